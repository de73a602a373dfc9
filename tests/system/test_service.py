"""junctiond as a service: what `meson install` installs (into a DESTDIR), the systemd unit's
ExecStart line run with NOTIFY_SOCKET set (READY=1 once the listener accepts, STOPPING=1 at
SIGTERM), -U (privileges dropped once everything is bound), -t (configuration check), and
every command's -h."""

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from proton import Message

from conftest import (REPO_ROOT, STARTUP_TIMEOUT, Router, free_port, junctiond_path,
                      router_entities, run_junctiond, write_config)

PYTHON = "/usr/bin/python3"


def build_dir():
    return junctiond_path().parents[1]


def build_options():
    """The build directory's meson options (prefix, sysconfdir, sbindir, ...) by name."""
    intro = build_dir() / "meson-info" / "intro-buildoptions.json"
    if not intro.exists():
        pytest.skip("%s is not a meson build directory" % build_dir())
    return {o["name"]: o["value"] for o in json.loads(intro.read_text())}


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """`meson install` of the build under test into a fresh DESTDIR: (destdir, options)."""
    opts = build_options()
    dest = tmp_path_factory.mktemp("destdir")
    p = subprocess.run(["meson", "install", "-C", str(build_dir()), "--destdir", str(dest),
                        "--no-rebuild", "--quiet"], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    assert p.returncode == 0, p.stdout
    return dest, opts


def under(dest, path):
    """An installed absolute path as it lies in DESTDIR."""
    return Path(str(dest) + str(path))


def find_unit(dest):
    units = sorted(dest.rglob("junctiond.service"))
    assert len(units) == 1, "want one junctiond.service under %s, found %s" % (dest, units)
    return units[0]


def unit_service(unit_path):
    """The [Service] section of a unit file as {key: value} (a key's last value wins)."""
    section, out = None, {}
    for line in unit_path.read_text().splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line
        elif section == "[Service]":
            k, _, v = line.partition("=")
            out[k.strip()] = v.strip()
    return out


def exec_start(dest):
    """The installed unit's ExecStart as argv (the binary as it lies in DESTDIR), and the
    index of its -c value."""
    svc = unit_service(find_unit(dest))
    argv = shlex.split(svc["ExecStart"])
    assert "-c" in argv, svc["ExecStart"]
    return argv, argv.index("-c") + 1


def test_install_puts_each_file_where_the_options_say(installed):
    dest, opts = installed
    prefix = Path(opts["prefix"])
    sbin = prefix / opts["sbindir"]
    conf = prefix / opts["sysconfdir"] / "junction" / "junctiond.conf"
    assert os.access(under(dest, sbin / "junctiond"), os.X_OK)
    assert os.access(under(dest, prefix / opts["bindir"] / "junctionctl"), os.X_OK)
    assert under(dest, conf).is_file()
    unit = find_unit(dest)
    want_dir = opts.get("systemdunitdir") or None
    if want_dir:
        assert unit.parent == under(dest, want_dir)
    else:
        assert unit.parent.name == "system" and unit.parent.parent.name == "systemd", unit
    svc = unit_service(unit)
    assert svc["Type"] == "notify"
    argv = shlex.split(svc["ExecStart"])
    assert argv == [str(sbin / "junctiond"), "-c", str(conf)], svc["ExecStart"]
    # the installed binary's default -c is the installed configuration
    h = subprocess.run([str(under(dest, sbin / "junctiond")), "-h"], stdout=subprocess.PIPE,
                       text=True, timeout=30)
    assert "(default %s)" % conf in h.stdout, h.stdout


def test_unit_passes_systemd_analyze_verify(installed, tmp_path):
    """systemd's own check of the unit (its ExecStart pointed into DESTDIR, where the binary
    lies)."""
    tool = shutil.which("systemd-analyze")
    if not tool:
        pytest.skip("no systemd-analyze")
    dest, _ = installed
    text = find_unit(dest).read_text()
    unit = tmp_path / "junctiond.service"
    unit.write_text(text.replace("ExecStart=", "ExecStart=" + str(dest)))
    p = subprocess.run([tool, "verify", str(unit)], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    assert p.returncode == 0, p.stdout
    # a line it cannot parse is a warning only ("..., ignoring"), with status 0
    assert "junctiond.service" not in p.stdout, p.stdout


def test_installed_default_config_is_valid(installed):
    """-t loads and validates without binding (the default listens on 0.0.0.0:amqp)."""
    dest, opts = installed
    argv, ci = exec_start(dest)
    p = subprocess.run([str(under(dest, argv[0])), "-t", "-c", str(under(dest, argv[ci]))],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    assert re.search(r"configuration valid \(1 listeners, 5 addresses, 0 warnings\)", p.stdout)


class UnitRouter(Router):
    """A Router started from an explicit argv (the unit's ExecStart) instead of $JUNCTIOND."""

    def __init__(self, workdir, entities, argv, env):
        super().__init__(workdir, entities, name="unit", env=env)
        self.argv = argv

    def command(self):
        return self.argv


def notify_socket(tmp_path, kind):
    """A bound datagram socket and the NOTIFY_SOCKET value that names it."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if kind == "path":
        path = str(tmp_path / "notify.sock")
        s.bind(path)
        return s, path
    name = "junction-test-%d-%d" % (os.getpid(), time.monotonic_ns())
    s.bind("\0" + name)
    return s, "@" + name


def recv_state(s, timeout):
    """The next notify datagram as {VAR: value}, or None after `timeout` seconds."""
    s.settimeout(timeout)
    try:
        data = s.recv(4096)
    except socket.timeout:
        return None
    return dict(line.split("=", 1) for line in data.decode().splitlines() if "=" in line)


def unit_router(tmp_path, dest, entities, notify):
    argv, ci = exec_start(dest)
    argv = [str(under(dest, argv[0]))] + argv[1:]
    r = UnitRouter(tmp_path, entities, argv, env=dict(os.environ, NOTIFY_SOCKET=notify))
    argv[ci] = str(r.config_path)  # the unit's configuration, pointed at a test one
    return r


@pytest.mark.parametrize("kind", ["path", "abstract"])
def test_unit_exec_start_notifies_ready_once_serving_and_stopping_at_sigterm(
        installed, tmp_path, client, kind):
    dest, _ = installed
    s, name = notify_socket(tmp_path, kind)
    port = free_port()  # known before start: READY must find it accepting
    r = unit_router(tmp_path, dest, router_entities(listener={"port": str(port)}), name)
    try:
        r.start(wait=False)
        ready = recv_state(s, STARTUP_TIMEOUT)
        assert ready is not None, "no notify message within %ss:\n%s" % (STARTUP_TIMEOUT,
                                                                          r.stderr_text())
        assert ready.get("READY") == "1", ready
        assert ready.get("MAINPID") == str(r.pid), ready
        assert ready.get("STATUS", "").startswith("Operational"), ready
        # at READY every thread runs (core, workers, agent: as many as once serving) and
        # the listener accepts at once, no retry
        threads_at_ready = len(list(Path("/proc/%d/task" % r.pid).iterdir()))
        c = socket.create_connection(("127.0.0.1", port), timeout=2)
        c.close()
        r.wait_ready(5)
        conn = client.connect(r.url)
        rcv = conn.receiver("closest.svc", credit=1)
        conn.sender("closest.svc").send(Message(body="up"))
        assert rcv.get().message.body == "up"
        conn.close()
        assert threads_at_ready == r.thread_count() >= r.threads + 2
        assert recv_state(s, 0.2) is None, "a second message before SIGTERM"
        r.proc.send_signal(15)
        stopping = recv_state(s, 10)
        assert stopping is not None and stopping.get("STOPPING") == "1", stopping
        assert r.stop() == 0
        assert not r.problems(), r.problems()
    finally:
        r.stop()
        s.close()


def test_no_ready_when_start_up_fails(installed, tmp_path):
    dest, _ = installed
    s, name = notify_socket(tmp_path, "path")
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    r = unit_router(tmp_path, dest, router_entities(listener={"port": str(port)}), name)
    try:
        r.start(wait=False)
        assert r.proc.wait(STARTUP_TIMEOUT) == 1
        assert recv_state(s, 0.5) is None
    finally:
        r.stop()
        taken.close()
        s.close()


def test_no_notify_socket_sends_nothing_and_serves(make_router, client, tmp_path):
    """NOTIFY_SOCKET unset (the usual case): start and stop as before; with a socket name the
    router cannot reach, it still serves and says why once."""
    env = dict(os.environ)
    env.pop("NOTIFY_SOCKET", None)
    r = make_router(env=env)
    assert "NOTIFY_SOCKET" not in r.stderr_text()
    env["NOTIFY_SOCKET"] = str(tmp_path / "nobody-listens.sock")
    r2 = make_router(env=env)
    r2.wait_log(r"Cannot tell the service manager \(NOTIFY_SOCKET\) that we serve")
    conn = client.connect(r2.url)
    conn.close()


# ---- -U ----

def proc_ids(pid):
    """{Uid: [...], Gid: [...], Groups: [...]} of /proc/PID/status, for the process and each of
    its threads."""
    out = []
    for st in [Path("/proc/%d/status" % pid)] + sorted(Path("/proc/%d/task" % pid).glob(
            "*/status")):
        ids = {}
        for line in st.read_text().splitlines():
            k, _, v = line.partition(":")
            if k in ("Uid", "Gid", "Groups"):
                ids[k] = [int(x) for x in v.split()]
        out.append(ids)
    return out


def test_user_drops_privileges_after_binding(make_router, client, request):
    if os.geteuid() != 0:
        pytest.skip("-U needs root to change user")
    import pwd
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody'")
    port = free_port()
    # a directory the user may pass through (the test's own tmp_path is root's, mode 0700)
    sockdir = Path(tempfile.mkdtemp(prefix="junction-user-"))
    request.addfinalizer(lambda: shutil.rmtree(str(sockdir), ignore_errors=True))
    os.chmod(str(sockdir), 0o711)
    sock = sockdir / "m.sock"
    r = make_router(args=["-U", "nobody"], listener={"port": str(port)},
                    extra=[["management", {"socket": str(sock)}]])  # bound as root
    r.wait_log(r"Running as user nobody \(uid %d, gid %d\)" % (nobody.pw_uid, nobody.pw_gid))
    ids = proc_ids(r.pid)
    assert len(ids) > 2  # the process and its threads (core, workers, agent)
    for t in ids:
        assert t["Uid"] == [nobody.pw_uid] * 4, ids
        assert t["Gid"] == [nobody.pw_gid] * 4, ids
        assert 0 not in t["Groups"], ids
    conn = client.connect(r.url)
    rcv = conn.receiver("closest.user", credit=1)
    conn.sender("closest.user").send(Message(body="as nobody"))
    assert rcv.get().message.body == "as nobody"
    conn.close()
    # the management socket, made as root, is the user's: junctionctl as that user reaches it
    st = sock.stat()
    assert (st.st_uid, st.st_gid) == (nobody.pw_uid, nobody.pw_gid)
    ctl = str(junctiond_path().parent / "junctionctl")
    p = subprocess.run(["setpriv", "--reuid", str(nobody.pw_uid), "--regid", str(nobody.pw_gid),
                        "--clear-groups", ctl, "-s", str(sock), "stats", "router.*"],
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=20)
    assert p.returncode == 0 and "router" in p.stdout, p.stderr


def test_unknown_user_is_one_line(tmp_path):
    cfg = write_config(tmp_path / "r.json", router_entities())
    p = run_junctiond(["-U", "no-such-user-junction", "-c", cfg])
    assert p.returncode == 1
    lines = p.stderr.splitlines()
    assert lines == ["junctiond: unknown user 'no-such-user-junction' (-U)"], p.stderr


def test_check_config(tmp_path):
    good = write_config(tmp_path / "good.json", router_entities())
    p = run_junctiond(["-t", "-c", good])
    assert p.returncode == 0 and p.stderr == "", p.stderr
    assert "configuration valid" in p.stdout
    bad = tmp_path / "bad.conf"
    bad.write_text("router {\n    mode: standalone\n    nosuch: 1\n}\n")
    p = run_junctiond(["--check-config", "-c", bad])
    assert p.returncode == 1 and p.stdout == ""
    assert len(p.stderr.splitlines()) == 1 and "nosuch" in p.stderr, p.stderr


# ---- -h ----

def help_commands():
    b = build_dir()
    return [
        ("junctiond", [str(junctiond_path())]),
        ("junctionctl", [str(b / "router" / "junctionctl")]),
        ("junction-loadgen", [str(b / "tests" / "bench" / "loadgen" / "junction-loadgen")]),
        ("junction-holdlinks", [str(b / "tests" / "bench" / "scale" / "junction-holdlinks")]),
        ("junction-holdconns", [str(b / "tests" / "bench" / "scale" / "junction-holdconns")]),
        ("junction-handshakes", [str(b / "tests" / "bench" / "scale" / "junction-handshakes")]),
        ("codec_bench", [str(b / "tests" / "bench" / "codec_bench")]),
        ("stats-bench", [str(b / "tests" / "bench" / "stats" / "stats-bench")]),
        ("scripts/run", [str(REPO_ROOT / "scripts" / "run")]),
        ("scripts/test", [str(REPO_ROOT / "scripts" / "test")]),
        ("scripts/bench", [str(REPO_ROOT / "scripts" / "bench")]),
        ("scripts/fuzz", [str(REPO_ROOT / "scripts" / "fuzz")]),
        ("scripts/soak", [str(REPO_ROOT / "scripts" / "soak")]),
        (".ci/run", [str(REPO_ROOT / ".ci" / "run")]),
        ("soak.py", [PYTHON, str(REPO_ROOT / "tests" / "system" / "soak.py")]),
        ("mgmt_bench.py", [PYTHON, str(REPO_ROOT / "tests" / "bench" / "mgmt_bench.py")]),
        ("brokers.py", [PYTHON, str(REPO_ROOT / "tests" / "system" / "brokers.py")]),
    ] + [("fuzz_%s_replay" % t, [str(b / "tests" / "fuzz" / ("fuzz_%s_replay" % t))])
         for t in ("codec", "frame", "config", "mgmt", "agent", "conn", "tls")]


@pytest.mark.parametrize("flag", ["-h", "--help"])
@pytest.mark.parametrize("name", [n for n, _ in help_commands()])
def test_every_command_help(name, flag, tmp_path):
    argv = dict(help_commands())[name]
    if not Path(argv[-1]).exists():
        pytest.skip("%s is not built" % argv[-1])
    # from another directory, so that no command relies on being run from the repository
    p = subprocess.run(argv + [flag], cwd=str(tmp_path), stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""
    first = p.stdout.lstrip().lower()
    base = Path(name).name.lower()
    assert first.startswith("usage") or first.startswith(base), p.stdout[:200]
    assert list(tmp_path.iterdir()) == [], "-h left files behind"


def test_daemon_start_up_failure_is_printed_by_the_parent(tmp_path):
    """With -d the daemon's stderr is /dev/null once it forked: a failure after the fork (here
    the pidfile) still reaches the terminal, through the parent, in one line."""
    cfg = write_config(tmp_path / "r.json", router_entities())
    p = run_junctiond(["-c", cfg, "-d", "-P", tmp_path / "no-such-dir" / "j.pid"], cwd=tmp_path,
                      timeout=20)
    assert p.returncode == 1
    errs = [l for l in p.stderr.splitlines() if l.startswith("junctiond:")]
    assert len(errs) == 1 and "cannot write pidfile" in errs[0] and "no-such-dir" in errs[0], \
        p.stderr


def test_daemon_with_user(tmp_path):
    """-d -P -U: the daemon writes its pidfile, then serves as the user."""
    if os.geteuid() != 0:
        pytest.skip("-U needs root to change user")
    import pwd
    import signal
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody'")
    port = free_port()
    cfg = write_config(tmp_path / "d.json", router_entities(listener={"port": str(port)}))
    pidfile = tmp_path / "j.pid"
    p = run_junctiond(["-c", cfg, "-d", "-P", pidfile, "-U", "nobody"], cwd=tmp_path, timeout=20)
    assert p.returncode == 0, p.stderr
    pid = int(pidfile.read_text())  # written before the parent exits 0
    try:
        for t in proc_ids(pid):
            assert t["Uid"] == [nobody.pw_uid] * 4 and t["Gid"] == [nobody.pw_gid] * 4, t
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    finally:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and alive(pid):
            time.sleep(0.05)
    assert not alive(pid), "daemon still running 10s after SIGTERM"


def alive(pid):
    """Whether pid runs (not gone, not a zombie nobody reaped)."""
    try:
        stat = Path("/proc/%d/stat" % pid).read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"
