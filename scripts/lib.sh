# scripts/lib.sh: helpers shared by scripts/run and scripts/test (sourced, not executed).
#
# Everything here is plain bash and Debian tooling: dpkg to see what is installed, apt-get to
# install what is missing, meson/ninja to build.

# The repository root, whatever directory the script was started from.
JUNCTION_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# Packages needed to build and run junctiond.
# (libwebsockets-evlib-uv: libwebsockets' libuv event library, loaded at run time by the
# HTTP/WebSocket server)
JUNCTION_RUN_PKGS=(libqpid-proton11-dev libssl-dev libuv1-dev libwebsockets-dev libwebsockets-evlib-uv
                   libcjson-dev libsasl2-dev libsasl2-modules libsasl2-modules-db
                   meson ninja-build pkg-config gcc)
# Extra packages needed by the tests (unit: cmocka; system: Proton-Python, pytest, pytest-xdist
# for the parallel TSan run, and websocket-client for the WebSocket tests; sanitizer builds: clang and its runtime; valgrind
# for `meson test --setup valgrind`; the console's browser test: Chromium, driven from node by
# playwright-core; the brokers of tests/system/brokers.py: RabbitMQ with its AMQP 1.0 plugin,
# and the Proton C example broker's source, compiled by the tests).
JUNCTION_TEST_PKGS=(libcmocka-dev sasl2-bin python3-qpid-proton python3-pytest python3-pytest-xdist
                    python3-websocket clang libclang-rt-14-dev valgrind chromium openssl
                    rabbitmq-server libqpid-proton11-dev-examples)
# The npm projects: the console's charting library (embedded into junctiond at build time)
# and the browser tests' clients (playwright-core, rhea, ws).  Each has a committed lockfile.
JUNCTION_NPM_DIRS=(stats/console tests/browser)

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

# jn_ensure_node: node and npm, from Debian's nodejs and npm packages when the commands are
# missing (a node installed some other way, with its own npm, is used as it is).
jn_ensure_node() {
    if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
        return 0
    fi
    jn_ensure_packages nodejs npm
}

# jn_npm_ci DIR...: install each npm project's packages from its lockfile (`npm ci`), unless
# node_modules is already newer than package.json and package-lock.json.  Returns non-zero
# (after saying why) when npm is missing or `npm ci` fails; the build then embeds the
# "console not built" page.
jn_npm_ci() {
    local d rc=0
    if ! command -v npm >/dev/null 2>&1; then
        jn_say "npm not found: the web console will not be built"
        return 1
    fi
    for d in "$@"; do
        local path="$JUNCTION_ROOT/$d" stamp="$JUNCTION_ROOT/$d/node_modules/.package-lock.json"
        if [ -f "$stamp" ] && [ "$stamp" -nt "$path/package-lock.json" ] &&
            [ "$stamp" -nt "$path/package.json" ]; then
            continue
        fi
        jn_say "npm ci in $d"
        if ! (cd "$path" && npm ci --no-audit --no-fund --prefer-offline --loglevel=error); then
            jn_say "npm ci failed in $d"
            rc=1
        fi
    done
    return $rc
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
