"""Link routes through an edge router (issue 17, point 1), as qdrouterd 1.19 does them: the
edge asks its interior's address lookup service (`_$qd.addr_lookup`) whether a client's
address is link-routed, and if it is, forwards the client's attach on its active edge
connection, so the link goes edge -> interior -> broker and every frame of it is carried both
ways.  The interior (route-container connector `broker`, linkRoutes `elr` in/out served by it
and `elrnone` in/out served by nobody) is Junction or qdrouterd; so is the edge, which has no
linkRoute of its own.

Pairs (edge, interior): JJ, JQ (a Junction edge on a qdrouterd interior), QJ (a qdrouterd
edge on a Junction interior); cases with qdrouterd skip where ../shared/peer is absent.
Against the Proton example broker (RabbitMQ for JJ): messages sent and received through the
edge; an address that no container serves gets `qd:no-route-to-dest`; an ordinary address
stays message-routed; an interior that learned the route from the mesh answers it (the link
crosses edge, interior and the broker's interior); the broker lost with links up (the links
detached with an error, nothing in flight reported ACCEPTED); the edge connection lost (the
client's links detached with qd:routed-link-lost, new attaches through the edge's other
interior); the routed links in the edge's `qdstat -l`; an interior that stops answering.
"""
import re
import signal
import subprocess

import pytest
from proton import Delivery, Message

from brokers import unique_name
from clients import Client
from conftest import free_port
from meshnet import PEER_BIN, interior_env, need_peer, stop_process
from qdr_peer import start_standalone
from test_linkroute_mesh import (LOST, exchange, freeze, send_in_flight, thaw,
                                 wait_no_route, wait_routed)

PREFIX = "elr"
NOWHERE = "elrnone"  # a link route no container serves
PAIRS = ["JJ", "JQ", "QJ"]  # the edge, then the interior


class Node:
    """One router, Junction ("J") or qdrouterd ("Q"), restartable on its ports."""

    def __init__(self, net, kind, rid):
        self.net, self.kind, self.id = net, kind, rid
        self.port, self.edge_port = free_port(), free_port()
        self.r = None
        self.starts = 0

    @property
    def url(self):
        return "amqp://127.0.0.1:%d" % self.port

    def start_interior(self, broker_port=None, connect=None):
        """An interior with a client and an edge listener: with the broker (a route-container
        connector and the linkRoutes) and an inter-router listener, or without either and
        an inter-router connector to `connect` (it learns the routes from that router)."""
        self.ir_port = getattr(self, "ir_port", None) or free_port()
        ents = [["router", {"id": self.id, "mode": "interior"}],
                ["listener", {"host": "127.0.0.1", "port": str(self.port)}],
                ["listener", {"host": "127.0.0.1", "port": str(self.edge_port), "role": "edge"}]]
        if connect is not None:
            ents.append(["connector", {"host": "127.0.0.1", "port": str(connect.ir_port),
                                       "role": "inter-router"}])
        else:
            ents.append(["listener", {"host": "127.0.0.1", "port": str(self.ir_port),
                                      "role": "inter-router"}])
        if broker_port is not None:
            ents.append(["connector", {"name": "broker", "host": "127.0.0.1",
                                       "port": str(broker_port), "role": "route-container"}])
            for prefix, conn in ((PREFIX, "broker"), (NOWHERE, "nobroker")):
                for d in ("in", "out"):
                    ents.append(["linkRoute", {"prefix": prefix, "direction": d,
                                               "connection": conn}])
        return self._start(ents)

    def start_edge(self, interiors):
        ents = [["router", {"id": self.id, "mode": "edge"}],
                # the lookups' own lines (debug) say what a failed test saw
                ["log", {"module": "DEFAULT", "enable": "debug+"}],
                ["listener", {"host": "127.0.0.1", "port": str(self.port)}]]
        ents += [["connector", {"name": "up-%s" % i.id, "host": "127.0.0.1",
                                "port": str(i.edge_port), "role": "edge"}] for i in interiors]
        return self._start(ents)

    def _start(self, ents):
        self.starts += 1
        name = "%s-%d" % (self.id, self.starts)
        if self.kind == "J":
            self.r = self.net.make_router(ents, name=name, env=interior_env())
        else:
            for t, a in ents:
                if t in ("listener", "connector"):
                    a["saslMechanisms"] = "ANONYMOUS"
                if t == "listener":
                    a["authenticatePeer"] = False
            self.r = start_standalone(self.net.tmp / (name + ".json"), ents, self.port)
            self.net.qds.append(self.r)
        return self

    def log_text(self):
        return "\n".join(self.r.stderr_lines()) if self.kind == "J" else ""

    def kill(self):
        proc = self.r.proc if self.kind == "J" else self.r
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        if self.kind == "J":
            self.net.request.node.jn_routers.remove(self.r)  # no shutdown to check


class EdgeNet:
    def __init__(self, make_router, tmp, request):
        self.make_router, self.tmp, self.request = make_router, tmp, request
        self.qds = []

    def node(self, kind, rid):
        if kind == "Q":
            need_peer()
        return Node(self, kind, rid)

    def close(self):
        for q in self.qds:
            stop_process(q)


@pytest.fixture
def net(make_router, tmp_path, request):
    n = EdgeNet(make_router, tmp_path, request)
    yield n
    n.close()


def start_pair(net, pair, broker):
    if "Q" in pair:
        need_peer()
    interior = net.node(pair[1], "ELR.I").start_interior(broker.port)
    edge = net.node(pair[0], "ELR.E").start_edge([interior])
    return edge, interior


def carries(node, address):
    """Whether `node` has a link of `address` (its `qdstat -l`; Junction's log when there is
    no qdstat)."""
    if node.kind == "J" and not PEER_BIN.exists():
        return any("Link routed" in line and address in line for line in
                   node.log_text().splitlines())
    need_peer()
    out = subprocess.run([str(PEER_BIN / "qdstat"), "-b", "127.0.0.1:%d" % node.port, "-l"],
                         capture_output=True, text=True, timeout=30)
    return out.returncode == 0 and address in out.stdout


def plain_exchange(conn, address, n):
    """An ordinary address stays message-routed on the edge: a receiver and a sender on it,
    both on the edge."""
    rcv = conn.receiver(address, credit=n)
    snd = conn.sender(address)
    dlvs = [snd.send(Message(body="p%d" % i)) for i in range(n)]
    got = rcv.get_n(n)
    assert [m.body for m in got] == ["p%d" % i for i in range(n)]
    for m in got:
        m.accept()
    assert snd.wait_outcomes(dlvs) == [Delivery.ACCEPTED] * n


def routed_pair(net, pair, broker):
    """start_pair, then a fresh queue of the route once the edge routes it: (edge, interior,
    queue)."""
    edge, interior = start_pair(net, pair, broker)
    queue = "%s.%s" % (PREFIX, unique_name())
    wait_routed(edge.url, queue)
    return edge, interior, queue


@pytest.mark.deadline(150)
@pytest.mark.parametrize("pair", PAIRS)
def test_link_route_through_edge(net, proton_broker, pair):
    edge, interior, queue = routed_pair(net, pair, proton_broker)
    c = Client()
    try:
        conn = c.connect(edge.url)
        exchange(conn, queue, 5, "m")
        # a link route that no container serves: qdrouterd's no-route answer
        lost = conn.sender(NOWHERE + ".x")
        assert lost.wait_remote_closed(timeout=20)
        assert lost.remote_condition.name == "qd:no-route-to-dest"
        lost = conn.receiver(NOWHERE + ".y", credit=1)
        assert lost.wait_remote_closed(timeout=20)
        assert lost.remote_condition.name == "qd:no-route-to-dest"
        # what is not link-routed is message-routed as before
        plain_exchange(conn, "plain." + unique_name(), 3)
    finally:
        c.close()
    if edge.kind == "J":
        text = edge.log_text()
        assert "Address lookup client attached to the interior" in text
        assert "Link routed to connection" in text
    if interior.kind == "J":
        assert "Edge attached to the address lookup server" in interior.log_text()


@pytest.mark.deadline(180)
@pytest.mark.parametrize("kinds", ["JJJ", "QJQ", "JJQ"])
def test_link_route_learned_from_the_mesh(net, proton_broker, kinds):
    """Edge E on interior B, which has no linkRoute and no broker: B learns the route from
    interior A (A's broker, A's linkRoutes) and answers E's lookup with it (qdrouterd 1.19's
    server looks the address up in the link-route table that the mesh fills too); the link
    goes E -> B -> A -> broker.  Kinds: E, B, A."""
    if "Q" in kinds:
        need_peer()
    a = net.node(kinds[2], "ELR.A").start_interior(proton_broker.port)
    b = net.node(kinds[1], "ELR.B").start_interior(connect=a)
    edge = net.node(kinds[0], "ELR.E").start_edge([b])
    queue = "%s.%s" % (PREFIX, unique_name())
    wait_routed(edge.url, queue, timeout=60)
    c = Client()
    try:
        exchange(c.connect(edge.url), queue, 3, "m")
    finally:
        c.close()
    if edge.kind == "J":
        assert "Link routed to connection" in edge.log_text()


@pytest.mark.deadline(150)
def test_link_route_through_edge_rabbitmq(net, rabbitmq):
    edge, interior, queue = routed_pair(net, "JJ", rabbitmq)
    c = Client()
    try:
        exchange(c.connect(edge.url), queue, 5, "r")
    finally:
        c.close()


@pytest.mark.deadline(240)
@pytest.mark.parametrize("pair", PAIRS)
def test_broker_loss_through_edge(net, proton_broker, pair):
    edge, interior, queue = routed_pair(net, pair, proton_broker)
    c = Client()
    try:
        conn = c.connect(edge.url)
        snd, rcv = exchange(conn, queue, 3, "a")
        freeze(proton_broker)
        try:
            dlvs = send_in_flight(c, snd, 5, "b")
            proton_broker.kill()
        finally:
            thaw(proton_broker)
        # the client's links are detached with an error
        assert snd.wait_remote_closed(timeout=60)
        assert rcv.wait_remote_closed(timeout=60)
        assert snd.remote_condition is not None and snd.remote_condition.name
        assert rcv.remote_condition is not None and rcv.remote_condition.name
        # nothing in flight is reported taken
        assert not any(d.remote_state == Delivery.ACCEPTED for d in dlvs)
        if edge.kind == "J":
            assert all(d.settled and d.remote_state in LOST for d in dlvs), \
                [(d.settled, d.remote_state) for d in dlvs]
        # no container: the interior answers no destination, the edge no route
        wait_no_route(edge.url, queue + "x")
        proton_broker.start(pump=c.run_for)
        wait_routed(edge.url, queue + "y")
        exchange(c.connect(edge.url), queue + "y", 2, "c")
    finally:
        c.close()


@pytest.mark.deadline(240)
@pytest.mark.parametrize("kinds", ["JJ", "JQ"])
def test_edge_connection_loss(net, proton_broker, kinds):
    """A Junction edge on two interiors (both with the broker): the active one killed, the
    client's routed links are detached with qd:routed-link-lost (qdrouterd's condition), what
    was in flight comes back RELEASED or MODIFIED, and new attaches go through the other
    interior."""
    i1 = net.node(kinds[1], "ELR.I1").start_interior(proton_broker.port)
    i2 = net.node(kinds[1], "ELR.I2").start_interior(proton_broker.port)
    edge = net.node(kinds[0], "ELR.E").start_edge([i1, i2])
    queue = "%s.%s" % (PREFIX, unique_name())
    wait_routed(edge.url, queue)
    c = Client()
    try:
        conn = c.connect(edge.url)
        snd, rcv = exchange(conn, queue, 3, "a")
        # the interior that carries the link: the one of the active edge connection
        active = [i for i in (i1, i2) if carries(i, queue)]
        assert len(active) == 1, "the routed link is on one interior"
        other = i2 if active[0] is i1 else i1
        freeze(proton_broker)
        try:
            dlvs = send_in_flight(c, snd, 5, "b")
            active[0].kill()
            assert snd.wait_remote_closed(timeout=30)
            assert rcv.wait_remote_closed(timeout=30)
        finally:
            thaw(proton_broker)
        assert snd.remote_condition.name == "qd:routed-link-lost", snd.remote_condition
        assert rcv.remote_condition.name == "qd:routed-link-lost", rcv.remote_condition
        assert all(d.settled and d.remote_state in LOST for d in dlvs), \
            [(d.settled, d.remote_state) for d in dlvs]
        # new attaches go through the interior that is left
        wait_routed(edge.url, queue + "y", timeout=60)
        exchange(c.connect(edge.url), queue + "y", 2, "c")
        assert carries(other, queue + "y")
    finally:
        c.close()


def qdstat_links(port):
    """`qdstat -l` of the router on `port`, as one dict per row (column title -> text)."""
    out = subprocess.run([str(PEER_BIN / "qdstat"), "-b", "127.0.0.1:%d" % port, "-l"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    head = next(i for i, line in enumerate(lines) if line.split()[:2] == ["type", "dir"])
    title = lines[head]
    cols = [(m.start(), m.group()) for m in re.finditer(r"conn id|\S+", title)]
    rows = []
    for line in lines[head + 2:]:
        if not line.strip():
            continue
        row = {}
        for k, (start, name) in enumerate(cols):
            end = cols[k + 1][0] if k + 1 < len(cols) else len(line)
            row[name] = line[start:end].strip()
        rows.append(row)
    return rows


@pytest.mark.deadline(150)
@pytest.mark.parametrize("pair", ["JJ", "QJ"])
def test_routed_links_in_edge_qdstat(net, proton_broker, pair):
    """The routed link's two ends on the edge show in `qdstat -l` as qdrouterd 1.19's edge
    shows them (checked on both kinds of edge): endpoint links of class mobile and the
    client's address, the client's end (capacity 250) on its connection, the other end
    (capacity 0) on the edge connection, in the other direction."""
    need_peer()
    edge, interior, queue = routed_pair(net, pair, proton_broker)
    c = Client()
    try:
        conn = c.connect(edge.url)
        snd = conn.sender(queue)
        c.wait(lambda: snd.credit > 0, 20, "credit from the broker")
        rows = [r for r in qdstat_links(edge.port) if r["addr"] == queue]
        assert len(rows) == 2, rows
        assert all(r["type"] == "endpoint" and r["class"] == "mobile" and r["phs"] == "0"
                   for r in rows), rows
        client = next(r for r in rows if r["dir"] == "in")
        up = next(r for r in rows if r["dir"] == "out")
        assert (client["cap"], up["cap"]) == ("250", "0"), rows
        assert client["conn id"] != up["conn id"], rows
        # the credit the broker gave, on both ends (qdrouterd's cred column)
        assert int(client["cred"]) > 0 and int(up["cred"]) > 0, rows
        # the edge connection is the one of the uplink (address _edge)
        uplink = [r for r in qdstat_links(edge.port) if r["addr"] == "_edge"]
        assert uplink and uplink[0]["conn id"] == up["conn id"], rows
    finally:
        c.close()


@pytest.mark.deadline(120)
def test_attach_without_lookup_service(net, proton_broker):
    """A Junction edge whose interior's answer never comes (the interior is stopped with
    SIGSTOP after the lookup links are up) answers a client's attach by its own lookup after
    3 s: an ordinary address is message-routed on the edge."""
    edge, interior = start_pair(net, "JJ", proton_broker)
    # An attach that comes before the edge connection is up is message-routed without a
    # lookup (qdrouterd's edge asks only once its lookup links are up), and the interior may
    # then give the edge's proxy link credit through its own link route: wait_routed can
    # pass that way, before the lookup links are up, so wait for the links themselves.
    edge.r.wait_log("Address lookup client attached to the interior", timeout=30)
    wait_routed(edge.url, "%s.%s" % (PREFIX, unique_name()))
    interior.r.proc.send_signal(signal.SIGSTOP)
    address = "plain." + unique_name()
    c = Client()
    try:
        conn = c.connect(edge.url)
        plain_exchange(conn, address, 2)
    finally:
        interior.r.proc.send_signal(signal.SIGCONT)
        c.close()
    log = edge.log_text()
    assert "Address lookup of %s asked of the interior" % address in log
    assert "Address lookup of %s not answered in 3 s" % address in log
