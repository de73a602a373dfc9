"""A real qdrouterd 1.19 reads the routing-protocol messages Junction's encoder writes.

core/routing/msg.c's unit tests check that it decodes and re-encodes qdrouterd's own bytes
(and the interior tests run it inside junctiond against qdrouterd).  This test checks the
encoder alone, in the other direction: a Proton-Python peer plays interior router "PEER" towards ../shared/peer's
qdrouterd over an inter-router connection, and every routing message it sends is made by
rt_compose (the encoder, from the build beside $JUNCTIOND): HELLOs, an RA, the LSU answering
qdrouterd's LSR, the absolute MAU answering its MAR, then a differential MAU.  qdrouterd's
own management must then show PEER as its neighbour with PEER's link state, and both mobile
addresses as reachable through PEER with the distributions the hints named; its log must hold
no protocol error.  Skips where ../shared/peer is absent.
"""
import json
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest
from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container, LinkOption

from conftest import free_port
from meshnet import PEER_BIN, answers, need_peer, qdr_interior_conf

pytestmark = pytest.mark.no_router

REPO_ROOT = Path(__file__).resolve().parents[2]
QDR_ID = "QDR.A"
PEER_ID = "PEER"


def rt_compose_path():
    junctiond = Path(os.environ.get("JUNCTIOND", "build/router/junctiond"))
    if not junctiond.is_absolute():
        junctiond = REPO_ROOT / junctiond
    return junctiond.parent.parent / "tests" / "unit" / "core" / "routing" / "rt_compose"


def compose(*args):
    return subprocess.run([str(rt_compose_path())] + [str(a) for a in args], check=True,
                          stdout=subprocess.PIPE).stdout


class RouterCaps(LinkOption):
    def apply(self, link):
        link.source.capabilities.put_symbol("qd.router")
        link.target.capabilities.put_symbol("qd.router")


class DonePoller:
    """Runs a test's `done()` (which calls qdmanage: seconds on a loaded machine) in a thread of
    its own, so that the peer's event loop keeps sending HELLOs meanwhile; qdrouterd drops a
    neighbour whose HELLOs stop for 3 s, and its link state with it."""

    def __init__(self, done):
        self.done, self.thread, self.value = done, None, None

    def poll(self):
        value = self.done()
        if value is not None:
            self.value = value

    def result(self):
        """done()'s first non-None answer, or None; starts a new poll if none is running."""
        if self.value is None and (self.thread is None or not self.thread.is_alive()):
            self.thread = threading.Thread(target=self.poll, daemon=True)
            self.thread.start()
        return self.value


class Peer(MessagingHandler):
    """Interior router PEER, every message from rt_compose; stops when `done()` says so."""

    def __init__(self, url, done, deadline):
        super().__init__(prefetch=0, auto_accept=False, auto_settle=True)
        self.url, self.done, self.deadline = url, done, deadline
        self.instance = int(time.time())
        self.heard = False
        self.mar_answered = False
        self.diff_sent = False
        self.tag = 0
        self.sent = []
        self.result = None
        self.poller = DonePoller(done)

    def on_start(self, event):
        self.conn = event.container.connect(self.url, allowed_mechs="ANONYMOUS",
                                            sasl_enabled=True)
        self.ctl_in = event.container.create_receiver(self.conn, None, name="ctl-in",
                                                      options=RouterCaps())
        self.ctl_out = event.container.create_sender(self.conn, None, name="ctl-out",
                                                     options=RouterCaps())
        self.ctl_in.flow(1000)
        event.container.schedule(0.5, self)

    def send_raw(self, data, what):
        if self.ctl_out.credit <= 0:
            return False
        self.tag += 1
        dlv = self.ctl_out.delivery(str(self.tag))
        self.ctl_out.send(data)
        self.ctl_out.advance()
        dlv.settle()
        self.sent.append(what)
        return True

    def mobile_seq(self):
        return 2 if self.diff_sent else 1

    def on_timer_task(self, event):
        if time.time() > self.deadline:
            self.conn.close()
            return
        seen = ["seen=%s" % QDR_ID] if self.heard else []
        self.send_raw(compose("HELLO", "amqp:/_local/qdhello", PEER_ID,
                              "instance=%d" % self.instance, *seen), "HELLO")
        if self.heard:
            self.send_raw(compose("RA", "amqp:/_topo/0/all/qdrouter", PEER_ID,
                                  "instance=%d" % self.instance, "ls_seq=1",
                                  "mobile_seq=%d" % self.mobile_seq()), "RA")
        if self.mar_answered and not self.diff_sent:
            self.diff_sent = self.send_raw(
                compose("MAU", "_topo/0/all/qdrouter.ma", PEER_ID, "mobile_seq=2",
                        "add=M0peer/diff", "hints=1"), "MAU-diff")
        self.result = self.poller.result()
        if self.result is not None:
            self.conn.close()
            return
        event.container.schedule(0.5, self)

    def on_delivery(self, event):
        if event.link.name != "ctl-in" or event.delivery.partial:
            return
        raw = event.link.recv(event.delivery.pending)
        event.delivery.settle()
        event.link.flow(1)
        msg = Message()
        msg.decode(raw)
        op = msg.properties.get("opcode")
        body = dict((str(k), v) for k, v in msg.body.items())
        if op == "HELLO":
            self.heard = True  # our next HELLOs list QDR.A in `seen`
        elif op == "LSR":
            self.send_raw(compose("LSU", "amqp:/_topo/0/%s/qdrouter" % QDR_ID, PEER_ID,
                                  "instance=%d" % self.instance, "ls_seq=1",
                                  "peers=%s:1" % QDR_ID), "LSU")
        elif op == "MAR" and not self.mar_answered:
            self.mar_answered = self.send_raw(
                compose("MAU", "amqp:/_topo/0/%s/qdrouter.ma" % QDR_ID, PEER_ID,
                        "mobile_seq=1", "exist=M0peer/abs", "hints=3", "absolute"), "MAU-abs")


def qdmanage(port, entity):
    out = subprocess.run([str(PEER_BIN / "qdmanage"), "-b", "127.0.0.1:%d" % port, "query",
                          "--type", entity], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         timeout=10, check=True).stdout
    return json.loads(out)


def start_qdrouterd(tmp_path):
    """qdrouterd as QDR_ID with a normal and an inter-router listener (ANONYMOUS), logging to
    tmp_path/qdrouterd.log; returns (process, inter-router port, normal port, log) once the
    inter-router port takes connections (or after some 30 s: the test then finds out)."""
    ir_port, port = free_port(), free_port()
    log = tmp_path / "qdrouterd.log"
    cfg = tmp_path / "qdrouterd.conf"
    cfg.write_text(qdr_interior_conf(QDR_ID, log, port, ir_port))
    proc = subprocess.Popen([str(PEER_BIN / "qdrouterd"), "-c", str(cfg)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    for _ in range(100):
        if answers(ir_port):
            break
        time.sleep(0.1)
    return proc, ir_port, port, log


def test_qdrouterd_reads_what_junction_writes(tmp_path):
    need_peer()
    assert rt_compose_path().exists(), "rt_compose is built beside junctiond"
    proc, ir_port, port, log = start_qdrouterd(tmp_path)
    try:
        state = {}

        def done():
            nodes = qdmanage(port, "org.apache.qpid.dispatch.router.node")
            addrs = qdmanage(port, "org.apache.qpid.dispatch.router.address")
            state["nodes"] = dict((n["id"], n) for n in nodes)
            state["addrs"] = dict((a.get("key") or a.get("name"), a) for a in addrs)
            peer = state["nodes"].get(PEER_ID)
            diff = state["addrs"].get("M0peer/diff")
            # the cost comes with qdrouterd's next path computation, a tick after the link state
            if peer and peer.get("linkState") == [QDR_ID] and peer.get("cost") is not None \
                    and diff and diff["remoteCount"] == 1:
                return True
            return None

        peer = Peer("amqp://127.0.0.1:%d" % ir_port, done, time.time() + 25)
        c = Container(peer)
        c.container_id = PEER_ID
        c.run()
    finally:
        proc.terminate()
        proc.wait(10)

    nodes, addrs = state.get("nodes", {}), state.get("addrs", {})
    assert peer.result, "qdrouterd did not take PEER's link state and MAUs: sent %s, nodes %r, " \
        "addresses %r" % (sorted(set(peer.sent)), nodes, sorted(addrs))
    # our HELLOs made PEER a neighbour at cost 1, our LSU gave it PEER's link state
    assert nodes[QDR_ID]["linkState"] == [PEER_ID]
    assert nodes[PEER_ID]["cost"] == 1
    assert nodes[PEER_ID].get("nextHop") is None  # a neighbour: no next hop
    assert nodes[PEER_ID]["routerLink"] is not None
    # our absolute MAU (hint 3: balanced) and differential MAU (hint 1: multicast-once)
    assert addrs["M0peer/abs"]["remoteCount"] == 1
    assert addrs["M0peer/abs"]["remoteHostRouters"] == [PEER_ID]
    assert addrs["M0peer/abs"]["distribution"] == "balanced"
    assert addrs["M0peer/diff"]["remoteCount"] == 1
    assert addrs["M0peer/diff"]["distribution"] == "multicast"
    text = log.read_text()
    for bad in ("Exception", "malformed", "Control message error", "wrong data type"):
        assert bad not in text, "qdrouterd logged %r:\n%s" % (bad, text[-3000:])


# A mesh behind two neighbours of qdrouterd (A): P and Q are real connections of the test's
# Proton peer, X, Y and Z exist only in the link states it advertises.  Equal-cost paths make
# the (cost, id) tie rule decide next hops and valid origins (A to Z: via X or via Y; P to Y:
# through A or through X and Z).
MESH = {
    QDR_ID: {"P": 1, "Q": 1},
    "P": {QDR_ID: 1, "X": 1},
    "Q": {QDR_ID: 1, "Y": 1},
    "X": {"P": 1, "Z": 1},
    "Y": {"Q": 1, "Z": 1},
    "Z": {"X": 1, "Y": 1},
}
NEIGHBOURS = ["P", "Q"]


def rt_paths_path():
    return rt_compose_path().parent / "rt_paths"


def expected_routes():
    """path.c's result for MESH as A sees it: {id: (next hop, cost, valid origins)}."""
    topo = "|".join("%s:%s" % (rid, ",".join("%s=%d" % pc for pc in peers.items()))
                    for rid, peers in MESH.items())
    line = subprocess.run([str(rt_paths_path()), QDR_ID, topo], check=True,
                          stdout=subprocess.PIPE, text=True).stdout.strip()
    routes = {}
    for part in line.split("; ")[1:]:
        rid, rest = part.split(":", 1)
        nh, cost, vo = rest.split(",", 2)
        origins = vo[len("vo=["):-1]
        routes[rid] = (nh[len("nh="):], int(cost[len("cost="):]),
                       sorted(origins.split(",")) if origins else [])
    return routes


class Mesh(MessagingHandler):
    """P and Q as neighbours of A over two inter-router connections; every router of MESH
    but A advertises itself (RA) and answers LSRs (LSU), all encoded by rt_compose."""

    def __init__(self, url, done, deadline):
        super().__init__(prefetch=0, auto_accept=False, auto_settle=True)
        self.url, self.done, self.deadline = url, done, deadline
        self.instance = int(time.time())
        self.heard = set()
        self.ctl_out = {}
        self.conns = []
        self.tag = 0
        self.result = None
        self.poller = DonePoller(done)

    def on_start(self, event):
        for rid in NEIGHBOURS:
            conn = event.container.connect(self.url, allowed_mechs="ANONYMOUS",
                                           sasl_enabled=True, virtual_host=None)
            conn.container = rid  # the open's container-id: the router id, as qdrouterd sends
            rx = event.container.create_receiver(conn, None, name="ctl-in-" + rid,
                                                 options=RouterCaps())
            rx.flow(1000)
            self.ctl_out[rid] = event.container.create_sender(conn, None, name="ctl-out-" + rid,
                                                              options=RouterCaps())
            self.conns.append(conn)
        event.container.schedule(0.5, self)

    def send_raw(self, via, data):
        link = self.ctl_out[via]
        if link.credit <= 0:
            return
        self.tag += 1
        dlv = link.delivery(str(self.tag))
        link.send(data)
        link.advance()
        dlv.settle()

    def on_timer_task(self, event):
        if time.time() > self.deadline:
            self.close()
            return
        for rid in NEIGHBOURS:
            seen = ["seen=%s" % QDR_ID] if rid in self.heard else []
            self.send_raw(rid, compose("HELLO", "amqp:/_local/qdhello", rid,
                                       "instance=%d" % self.instance, *seen))
        if self.heard:
            for rid in MESH:
                if rid != QDR_ID:
                    self.send_raw("P", compose("RA", "amqp:/_topo/0/all/qdrouter", rid,
                                               "instance=%d" % self.instance, "ls_seq=1",
                                               "mobile_seq=0"))
        self.result = self.poller.result()
        if self.result is not None:
            self.close()
            return
        event.container.schedule(0.5, self)

    def close(self):
        for conn in self.conns:
            conn.close()

    def on_delivery(self, event):
        name = event.link.name
        if not name.startswith("ctl-in-") or event.delivery.partial:
            return
        raw = event.link.recv(event.delivery.pending)
        event.delivery.settle()
        event.link.flow(1)
        msg = Message()
        msg.decode(raw)
        op = msg.properties.get("opcode")
        if op == "HELLO":
            self.heard.add(name[len("ctl-in-"):])
        elif op == "LSR":
            target = msg.address.split("/")[-2]  # amqp:/_topo/0/<id>/qdrouter
            if target in MESH and target != QDR_ID:
                peers = ",".join("%s:%d" % pc for pc in MESH[target].items())
                self.send_raw("P", compose("LSU", "amqp:/_topo/0/%s/qdrouter" % QDR_ID, target,
                                           "instance=%d" % self.instance, "ls_seq=1",
                                           "peers=" + peers))


def test_qdrouterd_agrees_on_paths(tmp_path):
    """qdrouterd computes, from link states Junction's encoder wrote, the very next hops,
    costs and valid origins core/routing/path.c computes for the same mesh."""
    need_peer()
    assert rt_paths_path().exists(), "rt_paths is built beside junctiond"
    want = expected_routes()
    proc, ir_port, port, log = start_qdrouterd(tmp_path)
    state = {}

    def routes_now():
        got = {}
        for n in qdmanage(port, "org.apache.qpid.dispatch.router.node"):
            if n["id"] == QDR_ID:
                continue
            if n.get("cost") is None:
                return None  # not reachable (yet)
            got[n["id"]] = (n.get("nextHop") or n["id"], n["cost"],
                            sorted(n.get("validOrigins") or []))
        return got

    def done():
        state["got"] = routes_now()
        return True if state["got"] == want else None

    try:
        mesh = Mesh("amqp://127.0.0.1:%d" % ir_port, done, time.time() + 30)
        Container(mesh).run()
    finally:
        proc.terminate()
        proc.wait(10)
    assert state.get("got") == want, "qdrouterd's routes %r, path.c's %r" % (state.get("got"), want)
    text = log.read_text()
    for bad in ("Exception", "malformed", "Control message error", "wrong data type"):
        assert bad not in text, "qdrouterd logged %r:\n%s" % (bad, text[-3000:])
