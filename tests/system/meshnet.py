"""Networks of interior routers for the mesh tests: each position held by a Junction or the
real qdrouterd 1.19 of ../shared/peer, on ports chosen before the start (so a router killed
and restarted comes back where its neighbours' connectors look for it), and an event-driven
Proton client (one container thread) with at-least-once producers, presettled multicast
producers and consumers on any of the routers.

Shared by test_mesh.py (failure, mixed meshes), test_interior_hops.py, test_interior_fanout.py
and test_interior_corpus.py."""
import collections
import os
import signal
import socket
import subprocess
import threading
import time

import pytest
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import AtMostOnce, Container

from conftest import REPO_ROOT, free_port
from mgmt_tool import Node

PEER_BIN = REPO_ROOT.parent / "shared" / "peer" / "bin"
NODE = "org.apache.qpid.dispatch.router.node"
# closest is the default distribution; these prefixes give the other two
ADDRESSES = [("mc", "multicast"), ("bal", "balanced"), ("cl", "closest")]


def need_peer():
    if not (PEER_BIN / "qdrouterd").exists():
        pytest.skip("the reference qdrouterd is not in ../shared/peer (%s)" % PEER_BIN)


def interior_env():
    return dict(os.environ)


def wait_for(what, fn, timeout=20.0, every=0.2):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except Exception as e:  # a router restarting: ask again
            last = e
        if last and not isinstance(last, Exception):
            return last
        time.sleep(every)
    raise AssertionError("%s: not within %.0fs (last: %r)" % (what, timeout, last))


def answers(port):
    """Whether something takes a TCP connection on 127.0.0.1:`port` (a router listening)."""
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
        return True
    except OSError:
        return False


def stop_process(proc):
    """Stop a qdrouterd (or any child) that may still run: SIGTERM, then SIGKILL after 10 s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def peer_tool(name, url, *args):
    """The peer's qdstat or qdmanage with `args`, against the router at `url`: its output
    (stderr with stdout), once it has exited with status 0."""
    p = subprocess.run([str(PEER_BIN / name), "-b", url.replace("amqp://", "")] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    assert p.returncode == 0, p.stdout
    return p.stdout


def qdr_interior_conf(rid, log, port, ir_port):
    """qdrouterd's configuration (its own format) of an interior router `rid` logging to
    `log`, with a normal listener on `port` and an inter-router one on `ir_port` (ANONYMOUS,
    no authentication); connectors and addresses are appended to it."""
    return ("router {\n mode: interior\n id: %s\n}\n"
            "log {\n module: DEFAULT\n enable: info+\n outputFile: %s\n}\n"
            "listener {\n host: 127.0.0.1\n port: %d\n role: normal\n"
            " authenticatePeer: no\n saslMechanisms: ANONYMOUS\n}\n"
            "listener {\n host: 127.0.0.1\n port: %d\n role: inter-router\n"
            " authenticatePeer: no\n saslMechanisms: ANONYMOUS\n}\n"
            % (rid, log, port, ir_port))


def nodes(url):
    n = Node(url)
    try:
        return {r["id"]: r for r in n.query_dicts(NODE)}
    finally:
        n.close()


class Position:
    """One router of a network: kind "J" (junctiond) or "Q" (qdrouterd), its id, a client
    port and an inter-router listener port, and inter-router connectors [(port, cost)]."""

    def __init__(self, net, kind, rid):
        self.net, self.kind, self.id = net, kind, rid
        self.port, self.ir_port = free_port(), free_port()
        self.connect = []
        self.proc = None
        self.jrouter = None
        self.starts = 0
        # a second client listener with stripAnnotations no (set before start), whose
        # clients see the router annotations
        self.raw_port = None

    @property
    def url(self):
        return "amqp://127.0.0.1:%d" % self.port

    def connect_to(self, other, cost=None):
        self.connect.append((other.ir_port, cost))

    def start(self):
        self.starts += 1
        if self.kind == "J":
            ents = [["router", {"id": self.id, "mode": "interior"}],
                    ["listener", {"host": "127.0.0.1", "port": str(self.port)}],
                    ["listener", {"host": "127.0.0.1", "port": str(self.ir_port),
                                  "role": "inter-router"}]]
            if self.raw_port:
                ents.append(["listener", {"host": "127.0.0.1", "port": str(self.raw_port),
                                          "stripAnnotations": "no"}])
            for port, cost in self.connect:
                cn = {"host": "127.0.0.1", "port": str(port), "role": "inter-router"}
                if cost:
                    cn["cost"] = cost
                ents.append(["connector", cn])
            ents += [["address", {"prefix": p, "distribution": d}] for p, d in ADDRESSES]
            self.jrouter = self.net.make_router(ents, name="%s-%d" % (self.id, self.starts),
                                                env=interior_env())
            self.proc = self.jrouter.proc
            return self
        need_peer()
        tmp = self.net.tmp_path
        log = tmp / ("%s-%d.log" % (self.id, self.starts))
        text = qdr_interior_conf(self.id, log, self.port, self.ir_port)
        if self.raw_port:
            text += ("listener {\n host: 127.0.0.1\n port: %d\n role: normal\n"
                     " authenticatePeer: no\n saslMechanisms: ANONYMOUS\n"
                     " stripAnnotations: no\n}\n" % self.raw_port)
        for port, cost in self.connect:
            text += ("connector {\n host: 127.0.0.1\n port: %d\n role: inter-router\n"
                     " saslMechanisms: ANONYMOUS\n%s}\n"
                     % (port, " cost: %d\n" % cost if cost else ""))
        for p, d in ADDRESSES:
            text += "address {\n prefix: %s\n distribution: %s\n}\n" % (p, d)
        cfg = tmp / ("%s-%d.conf" % (self.id, self.starts))
        cfg.write_text(text)
        self.log = log
        self.proc = subprocess.Popen([str(PEER_BIN / "qdrouterd"), "-c", str(cfg)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.net.qprocs.append(self.proc)
        wait_for("qdrouterd %s listening" % self.id, self._answers, timeout=10, every=0.1)
        return self

    def _answers(self):
        return answers(self.port)

    def kill(self):
        """SIGKILL: the router goes away without a word to its neighbours."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(5)
        if self.jrouter is not None:
            self.net.request.node.jn_routers.remove(self.jrouter)  # no shutdown to check
            self.jrouter = None

    def log_text(self):
        if self.kind == "Q":
            return self.log.read_text() if self.log.exists() else ""
        return self.jrouter.stderr_text() if self.jrouter else ""


class Net:
    """The routers of one test (make_router's Junctions, and the qdrouterds it stops)."""

    def __init__(self, make_router, tmp_path, request):
        self.make_router, self.tmp_path, self.request = make_router, tmp_path, request
        self.qprocs = []
        self.pos = {}

    def add(self, kind, rid):
        p = Position(self, kind, rid)
        self.pos[rid] = p
        return p

    def close(self):
        for p in self.qprocs:
            stop_process(p)

    def converged(self, edges, timeout=30.0):
        """Every router's router.node names every router with the neighbours `edges`
        ({id: set of neighbour ids}) gives it, and has a route to each; returns the rows."""
        want = {k: sorted(v) for k, v in edges.items()}

        def check():
            out = {}
            for rid, p in self.pos.items():
                rows = nodes(p.url)
                view = {k: sorted(v["linkState"]) for k, v in rows.items()}
                if view != want:
                    return None
                for k, r in rows.items():
                    if k != rid and r["nextHop"] is None and r["routerLink"] is None:
                        return None  # known but not reachable yet
                out[rid] = rows
            return out
        return wait_for("router.node agrees on every router (%s)" % want, check, timeout)


class Producer:
    """At-least-once: ids 0..n-1 (n None: until told), each resent on RELEASED or
    MODIFIED until ACCEPTED; `rate` messages a second at most."""

    def __init__(self, url, address, n, rate=200, window=50, tag=""):
        self.url, self.address, self.n, self.rate, self.window = url, address, n, rate, window
        self.tag = tag
        self.next = 0
        self.resend = collections.deque()
        self.inflight = {}
        self.accepted, self.rejected = set(), []
        self.released = 0
        self.link = None

    def done(self):
        return self.n is not None and len(self.accepted) >= self.n and not self.inflight

    def pump(self, budget):
        snd = self.link
        while budget > 0 and snd is not None and snd.credit > 0 and \
                len(self.inflight) < self.window:
            if self.resend:
                i = self.resend.popleft()
            elif self.n is None or self.next < self.n:
                i = self.next
                self.next += 1
            else:
                return
            d = snd.send(Message(address=self.address, id=i, body={"id": i, "from": self.tag}))
            self.inflight[d] = i
            budget -= 1


class McProducer:
    """Presettled multicast: probes (body "probe") every half second until `go`, then one
    message with body `real` (and no more)."""

    def __init__(self, url, address, real):
        self.url, self.address, self.real = url, address, real
        self.go, self.sent = False, False
        self.last = 0.0
        self.link = None

    def pump(self, budget):
        snd = self.link
        if snd is None or snd.credit <= 0 or self.sent:
            return
        if self.go:
            snd.send(Message(address=self.address, body=self.real))
            self.sent = True
        elif time.monotonic() - self.last > 0.5:
            snd.send(Message(address=self.address, body="probe " + self.real))
            self.last = time.monotonic()


class Consumer:
    """Records each message's body; accepts it at once, or `hold` seconds later (so that
    deliveries stay unsettled along their path meanwhile)."""

    def __init__(self, url, address, hold=0.0):
        self.url, self.address, self.hold = url, address, hold
        self.bodies = []
        self.held = collections.deque()


class Traffic(MessagingHandler):
    """One container thread for every client of a test; the test thread reads the
    producers' and consumers' records (plain lists and sets) and sets their flags."""

    TICK = 0.02

    def __init__(self):
        super().__init__(prefetch=100, auto_accept=False)
        self.producers, self.consumers = [], []
        self.by_link = {}
        self.stopping = False
        self.error = None
        self.container = Container(self)
        self.thread = None

    def producer(self, *a, **kw):
        p = Producer(*a, **kw)
        self.producers.append(p)
        return p

    def mc_producer(self, *a, **kw):
        p = McProducer(*a, **kw)
        self.producers.append(p)
        return p

    def consumer(self, *a):
        c = Consumer(*a)
        self.consumers.append(c)
        return c

    def start(self):
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _run(self):
        try:
            self.container.run()
        except Exception as e:  # reported by stop()
            self.error = e

    def on_start(self, event):
        for c in self.consumers:
            conn = event.container.connect(c.url, reconnect=False)
            self.by_link[event.container.create_receiver(conn, c.address)] = c
        for p in self.producers:
            conn = event.container.connect(p.url, reconnect=False)
            opts = AtMostOnce() if isinstance(p, McProducer) else None
            p.link = event.container.create_sender(conn, p.address, options=opts)
            self.by_link[p.link] = p
        event.container.schedule(self.TICK, self)

    def on_timer_task(self, event):
        if self.stopping:
            for link in self.by_link:
                link.connection.close()
            return
        now = time.monotonic()
        for c in self.consumers:
            while c.held and c.held[0][0] <= now:
                d = c.held.popleft()[1]
                if not d.settled:
                    self.accept(d)
        for p in self.producers:
            p.pump(max(1, int(p.rate * self.TICK)) if isinstance(p, Producer) else 1)
        event.container.schedule(self.TICK, self)

    def on_message(self, event):
        c = self.by_link.get(event.link)
        if c is not None:
            c.bodies.append(event.message.body)
            if c.hold:
                c.held.append((time.monotonic() + c.hold, event.delivery))
            else:
                self.accept(event.delivery)

    def _outcome(self, event, kind):
        p = self.by_link.get(event.link)
        i = p.inflight.pop(event.delivery, None) if isinstance(p, Producer) else None
        if i is None:
            return
        if kind == "accepted":
            p.accepted.add(i)
        elif kind == "released":
            p.released += 1
            p.resend.append(i)
        else:
            p.rejected.append(i)

    def on_accepted(self, event):
        self._outcome(event, "accepted")

    def on_released(self, event):  # RELEASED and MODIFIED
        self._outcome(event, "released")

    def on_rejected(self, event):
        self._outcome(event, "rejected")

    def on_transport_error(self, event):
        self.error = "transport error: %s" % event.transport.condition

    def stop(self):
        self.stopping = True
        self.thread.join(10)
        assert not self.thread.is_alive(), "the client thread did not stop"

    def wait(self, what, fn, timeout=30.0):
        return wait_for(what, lambda: self.error is None and fn(), timeout)
