"""Real brokers as test fixtures: RabbitMQ (with its AMQP 1.0 plugin) and the Proton C example
broker, each started by the tests on 127.0.0.1 and stopped afterwards.

    def test_x(rabbitmq, proton_broker, client):
        conn = client.connect(rabbitmq.url)          # amqp://127.0.0.1:PORT
        ...
        rabbitmq.kill()                              # SIGKILL (the broker is gone at once)
        rabbitmq.restart()                           # same ports, same data directory
        rabbitmq.start(pump=client.run_for)          # keeps the client's connections alive

Both fixtures are function-scoped views of one broker per pytest session: RabbitMQ takes
seconds to start (see `start_seconds`), so the suite pays it once, and a test that killed or
stopped its broker gets it started again before the next test.  Tests share the broker, so
each uses queue names of its own (`unique_name()`).  `make_rabbitmq` / `make_proton_broker`
start private ones (e.g. for a test that must see a broker that never ran before).

RabbitMQ (`rabbitmq-server` 3.10, Debian 12): its own node name, AMQP port, distribution port
and epmd (started here on a port of its own with ERL_EPMD_PORT, so it never meets another
Erlang node's epmd), its own config, enabled-plugins file, Mnesia and log directories under
the test's tmp dir; everything bound to 127.0.0.1.  It runs as whoever runs the tests (root
is fine): the start script is called directly, not through the wrapper that switches to the
`rabbitmq` user.  Ready means: a Proton client got the broker's open and a sender attached
to a queue (RabbitMQ listens on its TCP port well before the AMQP 1.0 plugin answers).
Stopping sends SIGTERM to the start script (which stops the Erlang VM cleanly), then SIGKILL
to the whole process group if that took too long, and then stops its epmd.

The Proton example broker (`examples/c/broker.c` of `libqpid-proton11-dev-examples`) is
compiled once per session with `cc` against Debian's libqpid-proton-dev; it takes
`broker HOST PORT`, and with port 0 prints `listening on PORT`.

Starting a broker blocks the test for seconds (RabbitMQ: more than the router's 16 s idle
timeout on a loaded machine).  A test that keeps a connection to the router open across a
start passes `pump`, a callable taking seconds (`Client.run_for`): it is run between the
readiness probes, so that the connection goes on sending its heartbeats; otherwise the router
closes it for its idle timeout, and the test's next attach on it never gets an answer.

A test skips (with the reason) when a package is missing; scripts/test installs them.
"""

import glob
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from proton import Endpoint

from conftest import free_port

RABBITMQ_SERVER = Path("/usr/lib/rabbitmq/bin/rabbitmq-server")
RABBITMQ_PLUGIN_GLOB = "/usr/lib/rabbitmq/lib/rabbitmq_server-*/plugins/rabbitmq_amqp1_0-*"
EPMD = shutil.which("epmd") or "/usr/bin/epmd"
PROTON_EXAMPLES = Path("/usr/share/proton/examples/c")
STARTUP_TIMEOUT = float(os.environ.get("JUNCTION_BROKER_STARTUP_TIMEOUT", "60"))
STOP_TIMEOUT = 20.0

_names = itertools.count(1)


def unique_name(prefix="q"):
    """A queue name no other test of this session uses."""
    return "%s-%d-%d-%d" % (prefix, os.getpid(), int(time.time() * 1000) % 1000000,
                            next(_names))


# ---------------------------------------------------------------- a router toward a broker
# What the broker tests configure and wait for: one connector named "broker", autoLinks and
# link routes through it.

# The router's log line for the connector's connection (% the broker's port).
OPENED = r"Connection to 127\.0\.0\.1:%d opened \(connector broker"


def connector_to(broker, **attrs):
    """The connector entity "broker" toward `broker`: role route-container unless `attrs`
    say otherwise; `attrs` are added (maxSessions ...)."""
    c = {"name": "broker", "host": "127.0.0.1", "port": str(broker.port),
         "role": "route-container"}
    c.update(attrs)
    return ["connector", c]


def autolink_pair(address, external, names=("out", "in"), **attrs):
    """An out and an in autoLink of `address` to the broker's `external` address through the
    connector "broker", named `names`; `attrs` are added to both (fallback ...)."""
    return [["autoLink", dict({"name": n, "address": address, "direction": d,
                               "connection": "broker", "externalAddress": external}, **attrs)]
            for n, d in zip(names, ("out", "in"))]


def waypoint_router(make_router, broker, q, external_prefix="/queue/"):
    """A router whose address `q` is a waypoint to the broker's queue external_prefix + q,
    through autoLinks "out" and "in"."""
    return make_router(extra=[connector_to(broker), ["address", {"prefix": q, "waypoint": True}]]
                       + autolink_pair(q, external_prefix + q))


def linkroute_router(make_router, broker, prefix="lrq", names=("lrqIn", "lrqOut")):
    """A router that routes links of `prefix`, both ways, to the broker (link routes named
    `names`); returned once its connection to the broker is open."""
    r = make_router(extra=[connector_to(broker)] + [
        ["linkRoute", {"name": n, "prefix": prefix, "direction": d, "connection": "broker"}]
        for n, d in zip(names, ("in", "out"))])
    r.wait_log(OPENED % broker.port)
    return r


def opened_count(r, broker):
    """How many times router r's connector opened a connection to the broker."""
    pat = re.compile(OPENED % broker.port)
    return sum(1 for x in r.stderr_lines() if pat.search(x))


def autolink_states(rows):
    """{name: operStatus} of autoLink management rows."""
    return {x["name"]: x["operStatus"] for x in rows}


def wait_autolinks(query, want, timeout=30.0, every=0.2):
    """Wait until the autoLinks' states (autolink_states() of the rows `query()` returns) are
    `want`; AssertionError with the last states if they are not within `timeout` seconds."""
    end = time.monotonic() + timeout
    got = None
    while time.monotonic() < end:
        got = autolink_states(query())
        if got == want:
            return
        time.sleep(every)
    raise AssertionError("autoLinks never became %r; last %r" % (want, got))


def rabbitmq_missing():
    """Why RabbitMQ cannot run here, or None."""
    if not RABBITMQ_SERVER.exists():
        return "rabbitmq-server is not installed (%s missing; scripts/test installs it)" % (
            RABBITMQ_SERVER)
    if not glob.glob(RABBITMQ_PLUGIN_GLOB):
        return "RabbitMQ's rabbitmq_amqp1_0 plugin is missing"
    if not Path(EPMD).exists():
        return "epmd is missing (erlang-base)"
    return None


def proton_broker_missing():
    """Why the Proton example broker cannot be built here, or None."""
    if not (PROTON_EXAMPLES / "broker.c").exists():
        return ("the Proton C example broker is missing (%s/broker.c: package "
                "libqpid-proton11-dev-examples; scripts/test installs it)" % PROTON_EXAMPLES)
    if not shutil.which("cc"):
        return "no C compiler (cc) to build the Proton example broker"
    r = subprocess.run(["pkg-config", "--exists", "libqpid-proton"])
    if r.returncode != 0:
        return "pkg-config finds no libqpid-proton (libqpid-proton11-dev)"
    return None


def _probe_amqp(url, address, timeout):
    """True when a Proton client gets the peer's open and a sender attach on `address`."""
    from clients import Client, WaitTimeout
    c = Client(timeout=timeout)
    try:
        conn = c.connect(url, wait=False)
        c.wait(lambda: conn.pn.state & Endpoint.REMOTE_ACTIVE or conn.is_gone(), timeout,
               "the broker's open")
        if not conn.pn.state & Endpoint.REMOTE_ACTIVE:
            return False
        snd = conn.sender(address, wait=False)
        c.wait(lambda: not snd.pn.state & Endpoint.REMOTE_UNINIT or conn.is_gone(), timeout,
               "the broker's attach")
        return bool(snd.pn.state & Endpoint.REMOTE_ACTIVE)
    except (WaitTimeout, Exception):
        return False
    finally:
        c.close(timeout=2.0)


def _die_with_parent(sig):
    """A preexec_fn: the child gets `sig` when the test process dies (even by SIGKILL), so that
    no broker outlives an aborted run.  SIGTERM lets RabbitMQ's start script stop the VM."""
    import ctypes

    def preexec():
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    return preexec


class BrokerError(AssertionError):
    pass


class Broker:
    """A broker process on 127.0.0.1:port; subclasses say how to start it."""

    name = "broker"
    probe_address = "probe"

    def __init__(self, workdir):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.host = "127.0.0.1"
        self.port = None
        self.proc = None
        self.start_seconds = []  # one entry per start: seconds until ready
        self._out = []
        self._out_lock = threading.Lock()
        self._log = None

    @property
    def url(self):
        return "amqp://%s:%d" % (self.host, self.port)

    def _reader(self, stream):
        for line in iter(stream.readline, b""):
            text = line.decode(errors="replace").rstrip("\n")
            with self._out_lock:
                self._out.append(text)
            if self._log:
                self._log.write(text + "\n")
                self._log.flush()
        stream.close()

    def output(self):
        with self._out_lock:
            return list(self._out)

    def _spawn(self, argv, env=None, cwd=None):
        self._log = open(self.workdir / ("%s.out" % self.name), "a")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                     start_new_session=True,
                                     preexec_fn=_die_with_parent(signal.SIGTERM))
        t = threading.Thread(target=self._reader, args=(self.proc.stdout,), daemon=True)
        t.start()
        self._reader_thread = t

    def is_running(self):
        return self.proc is not None and self.proc.poll() is None

    def start(self, pump=None):
        """Start and wait until ready; pump(seconds), if given, runs while waiting (see the
        module comment)."""
        raise NotImplementedError

    def wait_ready(self, t0, timeout=STARTUP_TIMEOUT, pump=None):
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            if not self.is_running():
                raise BrokerError("%s exited with status %s while starting:\n%s" % (
                    self.name, self.proc.returncode, "\n".join(self.output()[-30:])))
            if self.port and _probe_amqp(self.url, self.probe_address, 2.0):
                self.start_seconds.append(time.monotonic() - t0)
                return
            if pump is not None:
                pump(0.1)
            else:
                time.sleep(0.1)
        self.kill()
        raise BrokerError("%s not ready after %.0fs:\n%s" % (
            self.name, timeout, "\n".join(self.output()[-30:])))

    def _kill_group(self, sig):
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self):
        """SIGKILL the broker and every process it started (no goodbye to any client)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self._kill_group(signal.SIGKILL)
        self.proc.wait(STOP_TIMEOUT)
        self._after_exit()

    def stop(self):
        """Stop the broker cleanly (SIGTERM); SIGKILL after STOP_TIMEOUT seconds."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self._kill_group(signal.SIGKILL)
                self.proc.wait(STOP_TIMEOUT)
        # Whatever the start script left behind in its group goes too.
        self._kill_group(signal.SIGKILL)
        self._after_exit()

    def _after_exit(self):
        if self._log:
            self._log.close()
            self._log = None

    def restart(self, pump=None):
        """Stop (if running) and start again on the same port and data."""
        self.stop()
        self.start(pump)

    def close(self):
        self.stop()


class RabbitMQ(Broker):
    name = "rabbitmq"
    probe_address = "/queue/junction-probe"

    _nodes = itertools.count(1)

    def __init__(self, workdir):
        super().__init__(workdir)
        self.node = "junction%d_%d@localhost" % (os.getpid(), next(self._nodes))
        self.port = free_port()
        self.dist_port = free_port()
        self.epmd_port = free_port()
        self.epmd = None
        for d in ("mnesia", "log", "home"):
            (self.workdir / d).mkdir(exist_ok=True)
        self.config = self.workdir / "rabbitmq.conf"
        self.config.write_text(
            "# Written by the tests: loopback only, this test's own ports.\n"
            "listeners.tcp.1 = 127.0.0.1:%d\n"
            "loopback_users = none\n"
            "log.console = true\n"
            "log.console.level = info\n"
            "log.file = false\n"
            "disk_free_limit.absolute = 1MB\n" % self.port)
        (self.workdir / "enabled_plugins").write_text("[rabbitmq_amqp1_0].\n")
        (self.workdir / "rabbitmq-env.conf").write_text("")

    def env(self):
        w = self.workdir
        env = dict(os.environ)
        env.update({
            "HOME": str(w / "home"),  # the Erlang cookie is made here
            "ERL_EPMD_PORT": str(self.epmd_port),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
            "RABBITMQ_CONF_ENV_FILE": str(w / "rabbitmq-env.conf"),
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_CONFIG_FILE": str(self.config),
            "RABBITMQ_ADVANCED_CONFIG_FILE": str(w / "advanced.config"),  # none
            "RABBITMQ_MNESIA_BASE": str(w / "mnesia"),
            "RABBITMQ_LOG_BASE": str(w / "log"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(w / "enabled_plugins"),
            "RABBITMQ_PID_FILE": str(w / "rabbitmq.pid"),
            "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS":
                "-kernel inet_dist_use_interface {127,0,0,1}",
        })
        env.pop("RABBITMQ_ALLOW_INPUT", None)
        return env

    def start(self, pump=None):
        t0 = time.monotonic()
        if self.epmd is None or self.epmd.poll() is not None:
            self.epmd = subprocess.Popen(
                [EPMD, "-port", str(self.epmd_port), "-address", "127.0.0.1"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=_die_with_parent(signal.SIGTERM))
        self._spawn([str(RABBITMQ_SERVER)], env=self.env(), cwd=str(self.workdir))
        self.wait_ready(t0, pump=pump)

    def stop_epmd(self):
        if self.epmd is not None and self.epmd.poll() is None:
            self.epmd.terminate()
            try:
                self.epmd.wait(5)
            except subprocess.TimeoutExpired:
                self.epmd.kill()
                self.epmd.wait(5)
        self.epmd = None

    def close(self):
        self.stop()
        self.stop_epmd()


class ProtonBroker(Broker):
    name = "proton-broker"
    probe_address = "junction-probe"
    _binary = None
    _build_lock = threading.Lock()

    def __init__(self, workdir, binary):
        super().__init__(workdir)
        self.binary = binary

    @classmethod
    def build(cls, outdir):
        """Compile examples/c/broker.c into outdir once per session; returns the binary."""
        with cls._build_lock:
            if cls._binary is not None and cls._binary.exists():
                return cls._binary
            Path(outdir).mkdir(parents=True, exist_ok=True)
            out = Path(outdir) / "proton-broker"
            flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libqpid-proton"],
                                   check=True, capture_output=True, text=True).stdout.split()
            r = subprocess.run(["cc", "-O2", "-o", str(out), str(PROTON_EXAMPLES / "broker.c")]
                               + flags + ["-lpthread"], capture_output=True, text=True)
            if r.returncode != 0:
                raise BrokerError("building the Proton example broker failed:\n" + r.stderr)
            cls._binary = out
            return out

    def start(self, pump=None):
        t0 = time.monotonic()
        seen = len(self.output())
        # The first start takes the port the kernel picks; a restart asks for the same one.
        self._spawn([str(self.binary), "127.0.0.1", str(self.port or 0)], cwd=str(self.workdir))
        while True:
            said = [l for l in self.output()[seen:] if l.startswith("listening on ")]
            if said:
                self.port = int(said[0].split()[-1])
                break
            if time.monotonic() > t0 + STARTUP_TIMEOUT or not self.is_running():
                self.kill()
                raise BrokerError("the Proton broker did not listen:\n" +
                                  "\n".join(self.output()[seen:]))
            time.sleep(0.01)
        self.wait_ready(t0, pump=pump)


def _session_broker(kind, tmp_path_factory):
    if kind == "rabbitmq":
        why = rabbitmq_missing()
        if why:
            pytest.skip(why)
        b = RabbitMQ(tmp_path_factory.mktemp("rabbitmq"))
    else:
        why = proton_broker_missing()
        if why:
            pytest.skip(why)
        d = tmp_path_factory.mktemp("proton-broker")
        b = ProtonBroker(d, ProtonBroker.build(d))
    return b


@pytest.fixture(scope="session")
def _rabbitmq_session(tmp_path_factory):
    b = _session_broker("rabbitmq", tmp_path_factory)
    try:
        b.start()
        yield b
    finally:
        b.close()


@pytest.fixture(scope="session")
def _proton_broker_session(tmp_path_factory):
    b = _session_broker("proton", tmp_path_factory)
    try:
        b.start()
        yield b
    finally:
        b.close()


def _ensure_running(b):
    if not b.is_running():
        b.stop()
        b.start()
    return b


@pytest.fixture
def rabbitmq(_rabbitmq_session, request):
    """The session's RabbitMQ, running (started again if a test before killed it)."""
    b = _ensure_running(_rabbitmq_session)
    request.node.jn_brokers = getattr(request.node, "jn_brokers", []) + [b]
    return b


@pytest.fixture
def proton_broker(_proton_broker_session, request):
    """The session's Proton example broker, running (started again if a test killed it)."""
    b = _ensure_running(_proton_broker_session)
    request.node.jn_brokers = getattr(request.node, "jn_brokers", []) + [b]
    return b


@pytest.fixture
def make_rabbitmq(tmp_path):
    """make_rabbitmq(): a private RabbitMQ for this test, stopped (with its epmd) after it."""
    why = rabbitmq_missing()
    if why:
        pytest.skip(why)
    made = []

    def make(start=True):
        b = RabbitMQ(tmp_path / ("rabbitmq%d" % len(made)))
        made.append(b)
        if start:
            b.start()
        return b

    yield make
    for b in made:
        b.close()


@pytest.fixture
def make_proton_broker(tmp_path, tmp_path_factory):
    """make_proton_broker(): a private Proton example broker for this test."""
    why = proton_broker_missing()
    if why:
        pytest.skip(why)
    made = []

    def make(start=True):
        d = tmp_path / ("proton-broker%d" % len(made))
        b = ProtonBroker(d, ProtonBroker.build(tmp_path_factory.getbasetemp()))
        made.append(b)
        if start:
            b.start()
        return b

    yield make
    for b in made:
        b.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Show the tail of each broker's output when a test that used it fails."""
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for b in getattr(item, "jn_brokers", ()):
            lines = b.output()
            rep.sections.append(("%s output (last 30 of %d lines)" % (b.name, len(lines)),
                                 "\n".join(lines[-30:])))


def main(argv):
    """`brokers.py serve rabbitmq|proton DIR`: start one broker under DIR (scripts/bench uses
    it), print `URL amqp://127.0.0.1:PORT` and `STARTED SECONDS` on stdout, and stop it
    (cleanly, with its epmd) on SIGTERM or SIGINT."""
    usage = ("usage: brokers.py serve rabbitmq|proton DIR\n"
             "Starts one broker on 127.0.0.1 with its files under DIR, as the system tests do;\n"
             "prints 'URL amqp://127.0.0.1:PORT' and 'STARTED SECONDS', and stops it cleanly\n"
             "on SIGTERM or SIGINT.\n")
    if argv[:1] in (["-h"], ["--help"]):
        sys.stdout.write(usage)
        return 0
    if len(argv) != 3 or argv[0] != "serve" or argv[1] not in ("rabbitmq", "proton"):
        sys.stderr.write(usage)
        return 2
    why = rabbitmq_missing() if argv[1] == "rabbitmq" else proton_broker_missing()
    if why:
        print("cannot start: " + why, file=sys.stderr)
        return 1
    d = Path(argv[2])
    b = RabbitMQ(d) if argv[1] == "rabbitmq" else ProtonBroker(d, ProtonBroker.build(d))

    def stop(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        b.start()
        print("URL %s" % b.url, flush=True)
        print("STARTED %.2f" % b.start_seconds[-1], flush=True)
        while b.is_running():
            time.sleep(0.5)
        print("broker exited with status %s" % b.proc.returncode, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    finally:
        b.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
