# scripts/lib.sh: helpers shared by scripts/run and scripts/test (sourced, not executed).
#
# Everything here is plain bash and Debian tooling: dpkg to see what is installed, apt-get to
# install what is missing, meson/ninja to build.

# The repository root, whatever directory the script was started from.
JUNCTION_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Packages needed to build and run junctiond.
# (libwebsockets-evlib-uv: libwebsockets' libuv event library, loaded at run time by the
# HTTP/WebSocket server)
JUNCTION_RUN_PKGS=(libqpid-proton11-dev libuv1-dev libwebsockets-dev libwebsockets-evlib-uv
                   libcjson-dev meson ninja-build pkg-config gcc)
# Extra packages needed by the tests (unit: cmocka; system: Proton-Python, pytest and
# websocket-client for the WebSocket tests; sanitizer builds: clang and its runtime; valgrind for `meson test --setup valgrind`).
JUNCTION_TEST_PKGS=(libcmocka-dev python3-qpid-proton python3-pytest python3-websocket clang
                    libclang-rt-14-dev valgrind)

jn_say() {
    printf '%s\n' "==> $*" >&2
}

jn_die() {
    printf '%s\n' "error: $*" >&2
    exit 1
}

# jn_ensure_packages PKG...: install the packages that are not installed yet. Runs
# `apt-get update` at most once per call, and only when something is missing.
jn_ensure_packages() {
    local missing=() p
    for p in "$@"; do
        if ! dpkg -s "$p" 2>/dev/null | grep -q '^Status: install ok installed'; then
            missing+=("$p")
        fi
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    jn_say "installing: ${missing[*]}"
    local sudo=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || jn_die "need root (or sudo) to install: ${missing[*]}"
        sudo=(sudo)
    fi
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q ||
        jn_die "apt-get update failed"
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" ||
        jn_die "apt-get install failed: ${missing[*]}"
}

# jn_build DIR [-DOPTION=VALUE...]: configure DIR with the options (`meson setup` the first
# time, `meson configure` when it exists, so an old build dir gets the options too), then
# compile it.  A directory left half-configured by an interrupted setup is set up again.
jn_build() {
    local dir="$1"
    shift
    local path="$JUNCTION_ROOT/$dir"
    if [ -d "$path" ] && [ ! -f "$path/build.ninja" ]; then
        rm -rf "$path"
    fi
    if [ ! -f "$path/build.ninja" ]; then
        (cd "$JUNCTION_ROOT" && meson setup "$dir" "$@") || return 1
    elif [ $# -gt 0 ]; then
        meson configure "$path" "$@" >/dev/null || return 1
    fi
    meson compile -C "$path"
}
