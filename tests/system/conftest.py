"""Fixtures for Junction's system tests: real junctiond processes on 127.0.0.1.

Every test starts its own router(s) through the `router` or `make_router` fixtures. A Router
writes a JSON configuration (qdrouterd's list-of-[type, attributes] form) into the test's
tmp dir, starts `junctiond -c FILE`, and waits for `Listening on HOST:PORT` (one per listener;
listeners use port "0", so the kernel picks the port and the log line tells it) and for
`Operational`.  Its stdout and stderr are collected by background threads for the whole run.

At teardown each router gets SIGTERM and must exit with status 0 within 10 s, and its stderr
must not contain a sanitizer report (ASan, LeakSanitizer, UBSan, TSan); otherwise the test
errors at teardown.

The binary is $JUNCTIOND, or build/router/junctiond under the repository root.
"""

import array
import fcntl
import json
import os
import random
import re
import signal
import socket
import subprocess
import termios
import threading
import time
from pathlib import Path

import pytest

import lazy_ssl  # noqa: F401 - Proton-Python's containers make their SSL domains when used
from clients import Client

# The broker fixtures (rabbitmq, proton_broker, make_rabbitmq, make_proton_broker).
pytest_plugins = ["brokers"]

REPO_ROOT = Path(__file__).resolve().parents[2]
STARTUP_TIMEOUT = float(os.environ.get("JUNCTION_STARTUP_TIMEOUT", "20"))
STOP_TIMEOUT = 10.0
DEFAULT_DEADLINE = 60.0  # seconds per test unless @pytest.mark.deadline(N)
ROUTER_ID = "JTest"

LISTENING_RE = re.compile(r"Listening on (\S+):(\d+)")
OPERATIONAL_RE = re.compile(r"Operational, (\d+) Threads? Running \(process ID (\d+)\)")
SANITIZER_RE = re.compile(
    r"ERROR: (?:AddressSanitizer|LeakSanitizer|ThreadSanitizer|MemorySanitizer)"
    r"|WARNING: (?:ThreadSanitizer|AddressSanitizer)"
    r"|SUMMARY: (?:AddressSanitizer|LeakSanitizer|ThreadSanitizer|UndefinedBehaviorSanitizer)"
    r"|runtime error: ")

# The configuration every test starts from unless it passes its own.
DEFAULT_ADDRESSES = [
    ["address", {"prefix": "multicast", "distribution": "multicast"}],
    ["address", {"prefix": "closest", "distribution": "closest"}],
    ["address", {"prefix": "balanced", "distribution": "balanced"}],
    ["address", {"prefix": "unavailable", "distribution": "unavailable"}],
]


def junctiond_path():
    p = Path(os.environ.get("JUNCTIOND", "build/router/junctiond"))
    if not p.is_absolute():
        p = REPO_ROOT / p
    return p


def sanitizer_report(text):
    """The first line of a sanitizer report in `text`, or None."""
    m = SANITIZER_RE.search(text or "")
    if not m:
        return None
    start = text.rfind("\n", 0, m.start()) + 1
    end = text.find("\n", m.end())
    return text[start:end if end >= 0 else None]


# Ports handed out by free_port() in this process, never handed out twice.
_PORTS_GIVEN = set()


def can_connect(port, host="127.0.0.1"):
    """Whether a TCP connection to host:port is accepted now (something listens there)."""
    s = socket.socket()
    s.settimeout(2)
    try:
        s.connect((host, port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def _port_range():
    """This pytest process's own slice of the ports below the kernel's ephemeral range (32768
    and up on Linux).  scripts/test runs the release, ASan and TSan suites at once, each in up
    to four pytest-xdist workers: with disjoint slices, no other test process can bind a port
    between free_port's check and the bind of the server it was drawn for (a router of one
    suite once failed to start with its port taken by another's)."""
    exe = os.environ.get("JUNCTIOND", "")
    build = 1 if "asan" in exe else 2 if "tsan" in exe else 0
    m = re.match(r"gw(\d+)$", os.environ.get("PYTEST_XDIST_WORKER", ""))
    slot = build * 4 + (int(m.group(1)) % 4 if m else 0)
    size = (32768 - 20000) // 12
    return 20000 + slot * size, 20000 + (slot + 1) * size


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago, for a server the test starts later:
    from this process's slice below the ephemeral range (_port_range), so that no client
    connection and no other test process takes it before the server binds it, as a port from
    bind(0) could; and not one given before, while the slice has others."""
    lo, hi = _port_range()
    rng = random.SystemRandom()
    for attempt in range(2000):
        if attempt == 1000:
            _PORTS_GIVEN.difference_update(range(lo, hi))  # all given once: reuse the free
        port = rng.randrange(lo, hi)
        if port in _PORTS_GIVEN:
            continue
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            s.close()
        _PORTS_GIVEN.add(port)
        return port
    raise RuntimeError("no free port in %d-%d" % (lo, hi - 1))


def write_config(path, entities):
    """Write a configuration (list of [type, attributes]) as JSON; returns the path."""
    path = Path(path)
    path.write_text("[\n" + ",\n".join("  " + json.dumps(e) for e in entities) + "\n]\n")
    return path


def run_junctiond(args, cwd=None, timeout=15.0, env=None):
    """Run junctiond to completion (for command-line tests). Returns CompletedProcess (text)."""
    exe = junctiond_path()
    if not exe.exists():
        pytest.fail("junctiond not found at %s (build it, or set JUNCTIOND)" % exe)
    return subprocess.run([str(exe)] + [str(a) for a in args], cwd=cwd, env=env,
                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, errors="replace",
                          timeout=timeout)


class RouterError(AssertionError):
    pass


class Router:
    """One junctiond process (see the module comment)."""

    def __init__(self, workdir, entities, name="router", args=(), env=None):
        self.workdir = Path(workdir)
        self.entities = entities
        self.name = name
        self.args = list(args)
        self.env = env
        self.config_path = self.workdir / ("%s.json" % name)
        self.proc = None
        self.lines = []  # stderr lines so far
        self.stdout_lines = []
        self.cond = threading.Condition()
        self.addresses = []  # [(host, port)] from the Listening lines, in order
        self.threads = None  # from the Operational line
        self.returncode = None
        self._readers = []
        self.config_text = None

    # ---- start / stop ----
    def write_config(self, text=None):
        self.workdir.mkdir(parents=True, exist_ok=True)
        if text is None:
            text = "[\n" + ",\n".join("  " + json.dumps(e) for e in self.entities) + "\n]\n"
        self.config_text = text
        self.config_path.write_text(text)
        return self.config_path

    def _reader(self, stream, sink):
        for line in iter(stream.readline, ""):
            with self.cond:
                sink.append(line.rstrip("\n"))
                self.cond.notify_all()
        stream.close()
        with self.cond:
            self.cond.notify_all()

    def command(self):
        """The command line that starts the router ($JUNCTIOND on the configuration file);
        a subclass may run another."""
        exe = junctiond_path()
        if not exe.exists():
            pytest.fail("junctiond not found at %s (build it, or set JUNCTIOND)" % exe)
        return [str(exe), "-c", str(self.config_path)] + self.args

    def start(self, wait=True, timeout=STARTUP_TIMEOUT, config_text=None):
        argv = self.command()
        self.write_config(config_text)
        self.proc = subprocess.Popen(
            argv, cwd=str(self.workdir), env=self.env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
            bufsize=1)
        for stream, sink in ((self.proc.stderr, self.lines), (self.proc.stdout, self.stdout_lines)):
            t = threading.Thread(target=self._reader, args=(stream, sink), daemon=True)
            t.start()
            self._readers.append(t)
        if wait:
            self.wait_ready(timeout)
        return self

    def n_listeners(self):
        return sum(1 for e in self.entities if e[0] in ("listener",))

    def wait_ready(self, timeout=STARTUP_TIMEOUT):
        """Wait for one Listening line per listener and the Operational line."""
        want = self.n_listeners()
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                text = "\n".join(self.lines)
                listening = LISTENING_RE.findall(text)
                op = OPERATIONAL_RE.search(text)
                if op and len(listening) >= want:
                    break
                if self.proc.poll() is not None and all(not t.is_alive() for t in self._readers):
                    raise RouterError("junctiond exited with status %s during start-up:\n%s" % (
                        self.proc.returncode, self.stderr_text()))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise RouterError("junctiond not ready after %.0fs (want %d Listening lines "
                                      "and Operational):\n%s" % (timeout, want,
                                                                 self.stderr_text()))
                self.cond.wait(min(left, 0.1))
        self.addresses = [(h, int(p)) for h, p in listening]
        self.threads = int(op.group(1))
        return self

    def stop(self, sig=signal.SIGTERM, timeout=STOP_TIMEOUT):
        """Signal the daemon and wait for it; returns its exit status (None if it hung)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            try:
                self.proc.send_signal(sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
                self.returncode = None
                self._join_readers()
                return None
        self.returncode = self.proc.returncode
        self._join_readers()
        return self.returncode

    def _join_readers(self):
        for t in self._readers:
            t.join(5)

    def problems(self, expect_status=0):
        """What is wrong with how this router ended (after stop()), as a list of strings."""
        out = []
        if self.proc is None:
            return out
        if self.proc.returncode is None or self.returncode is None:
            out.append("%s did not exit within %.0fs of SIGTERM (killed)" % (self.name,
                                                                            STOP_TIMEOUT))
        elif expect_status is not None and self.returncode != expect_status:
            out.append("%s exited with status %s (want %s)" % (self.name, self.returncode,
                                                               expect_status))
        rep = sanitizer_report(self.stderr_text())
        if rep:
            out.append("%s: sanitizer report: %s" % (self.name, rep))
        return out

    # ---- introspection ----
    @property
    def pid(self):
        return self.proc.pid

    @property
    def host(self):
        return self.addresses[0][0]

    @property
    def port(self):
        return self.addresses[0][1]

    @property
    def url(self):
        return "amqp://%s:%d" % (self.host, self.port)

    def url_of(self, i):
        h, p = self.addresses[i]
        return "amqp://%s:%d" % (h, p)

    def is_running(self):
        return self.proc is not None and self.proc.poll() is None

    def stderr_text(self):
        with self.cond:
            return "\n".join(self.lines)

    def stderr_lines(self):
        """Every line the router has written to stderr so far: the reader thread is first
        let catch up with what is in the pipe (on a loaded machine it can lag behind a line
        the router wrote before the management answer the test has just read)."""
        self._catch_up()
        with self.cond:
            return list(self.lines)

    def _catch_up(self, timeout=2.0):
        stream = self.proc.stderr if self.proc else None
        if stream is None:
            return
        end = time.monotonic() + timeout
        try:
            fd = stream.fileno()
        except ValueError:  # closed: the reader has taken everything
            return
        pending = array.array("i", [0])
        while time.monotonic() < end:
            try:
                fcntl.ioctl(fd, termios.FIONREAD, pending)
            except OSError:
                return
            if pending[0] == 0:
                break
            time.sleep(0.005)
        # what the reader took from the pipe may still be in its buffer: let it run until
        # the count of lines stops moving
        with self.cond:
            n = len(self.lines)
        while time.monotonic() < end:
            time.sleep(0.01)
            with self.cond:
                if len(self.lines) == n:
                    return
                n = len(self.lines)

    def wait_log(self, pattern, timeout=5.0, start=0):
        """Wait for a stderr line (from index `start`) matching `pattern`; returns the match."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for line in self.lines[start:]:
                    m = rx.search(line)
                    if m:
                        return m
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("no log line matching %r within %.0fs; stderr:\n%s" % (
                        pattern, timeout, "\n".join(self.lines[-50:])))
                self.cond.wait(min(left, 0.1))

    def rss_kb(self):
        return proc_status_kb(self.pid, "VmRSS")

    def thread_count(self):
        return len(os.listdir("/proc/%d/task" % self.pid))

    def __repr__(self):
        return "<Router %s pid=%s %s>" % (self.name, self.proc and self.proc.pid,
                                          self.addresses)


def proc_status_kb(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


def router_entities(router=None, listener=None, listeners=None, addresses=None, logs=(),
                    extra=()):
    """A configuration: `router` and `listener` attributes are added to the defaults."""
    r = {"id": ROUTER_ID, "mode": "standalone"}
    r.update(router or {})
    ents = [["router", r]]
    if listeners is None:
        lst = {"host": "127.0.0.1", "port": "0"}
        lst.update(listener or {})
        listeners = [lst]
    for lst in listeners:
        ents.append(["listener", lst])
    ents.extend(DEFAULT_ADDRESSES if addresses is None else addresses)
    ents.extend(logs)
    ents.extend(extra)
    return ents


@pytest.fixture
def make_router(request, tmp_path):
    """make_router(entities=None, name=..., args=(), start=True, **router_entities kwargs)."""
    made = []
    request.node.jn_routers = made  # for the failure report (pytest_runtest_makereport)

    def make(entities=None, name=None, args=(), start=True, env=None, **kw):
        if entities is None:
            entities = router_entities(**kw)
        r = Router(tmp_path, entities, name=name or "router%d" % len(made), args=args, env=env)
        made.append(r)
        if start:
            r.start()
        return r

    yield make
    problems = []
    for r in made:
        r.stop()
        problems.extend(r.problems())
    if problems:
        tail = "\n".join("---- %s stderr (last 60 lines) ----\n%s" % (
            r.name, "\n".join(r.stderr_lines()[-60:])) for r in made)
        pytest.fail("router shutdown problems:\n  " + "\n  ".join(problems) + "\n" + tail,
                    pytrace=False)


@pytest.fixture
def router(make_router):
    """One router with the default configuration."""
    return make_router()


@pytest.fixture
def client():
    c = Client()
    yield c
    c.close()


# The parameters that name the router of every position of a test's network: "J" junctiond,
# "Q" qdrouterd ("kinds" and "pair" one letter per position; "edge_kind" and "interior_kind"
# together).  Parameters naming one position only (a_kind, behind, ...) leave the others
# implicit and are not read.
ROUTER_MIX_PARAMS = ("kinds", "pair", "edge_kind", "interior_kind")


def router_mix(item):
    """The routers a parametrized case runs, as a string of J and Q ("" when it does not say)."""
    spec = getattr(item, "callspec", None)
    if spec is None:
        return ""
    return "".join(v for k, v in spec.params.items()
                   if k in ROUTER_MIX_PARAMS and isinstance(v, str) and re.fullmatch("[JQ]+", v))


def sanitizer_skips(item, sanitizer):
    """Why a sanitizer build's run leaves this case out, or None.  A case of qdrouterds alone
    (the reference) runs no junctiond.  TSan leaves out the mixed Junction/qdrouterd cases:
    the same test with Junctions only drives the same threads of junctiond; what a qdrouterd
    changes is the bytes it sends, which the ASan run checks."""
    mix = router_mix(item)
    if mix and "J" not in mix:
        return "qdrouterd alone"
    if sanitizer == "tsan" and "J" in mix and "Q" in mix:
        return "mixed with qdrouterd (run on the release and ASan builds)"
    return None


def pytest_collection_modifyitems(session, config, items):
    """With JUNCTION_SANITIZER (asan or tsan, set by scripts/test), leave out what
    sanitizer_skips names.  Under pytest-xdist, the files heaviest by their tests' deadlines
    first (each file's tests in their order). scripts/test hands whole files to its processes
    (--dist loadfile): a long file (the meshes, the brokers) handed out near the end would keep
    one process busy while the others sit idle, so the files handed out last are the short
    ones."""
    sanitizer = os.environ.get("JUNCTION_SANITIZER")
    if sanitizer:
        dropped = [it for it in items if sanitizer_skips(it, sanitizer)]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [it for it in items if not sanitizer_skips(it, sanitizer)]
    if not hasattr(config, "workerinput"):
        return
    weight = {}
    for item in items:
        marker = item.get_closest_marker("deadline")
        weight[item.path] = weight.get(item.path, 0) + (
            marker.args[0] if marker else DEFAULT_DEADLINE)
    items.sort(key=lambda item: -weight[item.path])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Show the tail of every router's stderr when a test fails."""
    outcome = yield
    rep = outcome.get_result()
    routers = getattr(item, "jn_routers", None)
    if rep.failed and routers:
        for r in routers:
            lines = r.stderr_lines()
            rep.sections.append(("junctiond %s stderr (last 40 of %d lines)" % (r.name, len(lines)),
                                 "\n".join(lines[-40:])))


# ---- a per-test deadline, so that a hung daemon fails the test instead of hanging it ----

class DeadlineExceeded(AssertionError):
    pass


@pytest.fixture(autouse=True)
def _deadline(request):
    marker = request.node.get_closest_marker("deadline")
    seconds = marker.args[0] if marker else DEFAULT_DEADLINE
    if os.environ.get("JUNCTION_SLOW"):  # e.g. valgrind
        seconds *= 10

    def expired(signum, frame):
        raise DeadlineExceeded("test still running after %.0fs" % seconds)

    old = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def sanitizer_runtime(pid):
    """'tsan' or 'asan' when the process runs with that sanitizer's runtime (its own allocator,
    so its RSS says little about the router's memory), else None."""
    with open("/proc/%d/maps" % pid) as f:
        maps = f.read()
    if "libtsan" in maps or "__tsan" in maps:
        return "tsan"
    if "libasan" in maps:
        return "asan"
    return None
