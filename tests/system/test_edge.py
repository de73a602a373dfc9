"""Edge routers (issue 17, point 1): Junction in `mode: edge` on an interior, as qdrouterd
1.19's edges are (the interrouter reference, section 4).

Shapes: a Junction edge (J) on a qdrouterd 1.19 interior, with a second qdrouterd interior
behind it; clients on the edge reach consumers on the interior and behind it and the
reverse, for closest, balanced and multicast (each message ACCEPTED by one consumer, each
multicast message once at each consumer); the edge keeps its own consumers local (what a
producer on the edge sends to a consumer on the same edge never crosses to the interior);
`qdstat --edge` on the interior shows the Junction edge as it shows a qdrouterd edge beside
it. Then edges (qdrouterd's, Junction's) on a Junction interior; failover of a Junction edge
between two interiors; and qpid-dispatch 1.19's tests/config-2-edge/ set run by junctiond.
Every case with a qdrouterd (or its qdstat) skips where ../shared/peer is absent.
"""
import re
import subprocess
import time

import pytest

from conftest import free_port
from meshnet import ADDRESSES, PEER_BIN, Net, Traffic, interior_env, need_peer, wait_for
from mgmt_tool import Node


class EdgeNet(Net):
    """Net with edge routers: Q interiors with an edge listener, J or Q edges."""

    def interior(self, rid, connect_to=(), kind="Q"):
        """An interior (Q: qdrouterd, J: junctiond) with a normal, an inter-router and an
        edge listener."""
        if kind == "Q":
            need_peer()
        p = self.add(kind, rid)
        p.edge_port = free_port()
        for other in connect_to:
            p.connect_to(other)
        return p

    def start_interior(self, p):
        tmp = self.tmp_path
        p.starts += 1
        if p.kind == "J":
            ents = [["router", {"id": p.id, "mode": "interior"}]]
            ents += [["listener", {"host": "127.0.0.1", "port": str(port), "role": role}]
                     for port, role in ((p.port, "normal"), (p.ir_port, "inter-router"),
                                        (p.edge_port, "edge"))]
            ents += [["connector", {"host": "127.0.0.1", "port": str(port),
                                    "role": "inter-router"}] for port, _ in p.connect]
            ents += [["address", {"prefix": a, "distribution": d}] for a, d in ADDRESSES]
            p.jrouter = self.make_router(ents, name="%s-%d" % (p.id, p.starts),
                                         env=interior_env())
            p.proc = p.jrouter.proc
            return p
        log = tmp / ("%s-%d.log" % (p.id, p.starts))
        text = ("router {\n mode: interior\n id: %s\n}\n"
                "log {\n module: DEFAULT\n enable: info+\n outputFile: %s\n}\n" % (p.id, log))
        for port, role in ((p.port, "normal"), (p.ir_port, "inter-router"),
                           (p.edge_port, "edge")):
            text += ("listener {\n host: 127.0.0.1\n port: %d\n role: %s\n"
                     " authenticatePeer: no\n saslMechanisms: ANONYMOUS\n}\n" % (port, role))
        for port, _ in p.connect:
            text += ("connector {\n host: 127.0.0.1\n port: %d\n role: inter-router\n"
                     " saslMechanisms: ANONYMOUS\n}\n" % port)
        return self._run_qdrouterd(p, text, log)

    def _run_qdrouterd(self, p, text, log):
        """Start qdrouterd for position p on config `text` (plus the addresses every router
        here has), logging to `log`; return p once it listens."""
        text += "".join("address {\n prefix: %s\n distribution: %s\n}\n" % a
                        for a in ADDRESSES)
        cfg = self.tmp_path / ("%s-%d.conf" % (p.id, p.starts))
        cfg.write_text(text)
        p.log = log
        p.proc = subprocess.Popen([str(PEER_BIN / "qdrouterd"), "-c", str(cfg)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.qprocs.append(p.proc)
        wait_for("qdrouterd %s listening" % p.id, p._answers, timeout=10, every=0.1)
        return p

    def edge(self, kind, rid, uplinks):
        """An edge router (J: junctiond, Q: qdrouterd) with edge connectors to `uplinks`."""
        p = self.add(kind, rid)
        p.uplinks = list(uplinks)
        return p

    def start_edge(self, p):
        p.starts += 1
        if p.kind == "J":
            ents = [["router", {"id": p.id, "mode": "edge"}],
                    ["listener", {"host": "127.0.0.1", "port": str(p.port)}]]
            ents += [["connector", {"host": "127.0.0.1", "port": str(u.edge_port),
                                    "role": "edge", "name": "up-%s" % u.id}]
                     for u in p.uplinks]
            ents += [["address", {"prefix": a, "distribution": d}] for a, d in ADDRESSES]
            p.jrouter = self.make_router(ents, name="%s-%d" % (p.id, p.starts),
                                         env=interior_env())
            p.proc = p.jrouter.proc
            return p
        need_peer()
        log = self.tmp_path / ("%s-%d.log" % (p.id, p.starts))
        text = ("router {\n mode: edge\n id: %s\n}\n"
                "log {\n module: DEFAULT\n enable: info+\n outputFile: %s\n}\n"
                "listener {\n host: 127.0.0.1\n port: %d\n role: normal\n"
                " authenticatePeer: no\n saslMechanisms: ANONYMOUS\n}\n" % (p.id, log, p.port))
        for u in p.uplinks:
            text += ("connector {\n host: 127.0.0.1\n port: %d\n role: edge\n"
                     " saslMechanisms: ANONYMOUS\n}\n" % u.edge_port)
        return self._run_qdrouterd(p, text, log)


@pytest.fixture
def net(make_router, tmp_path, request):
    n = EdgeNet(make_router, tmp_path, request)
    yield n
    n.close()


def qdstat(url, *args):
    p = subprocess.run([str(PEER_BIN / "qdstat"), "-b", url.replace("amqp://", "")] + list(args),
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout


def addr_row(url, key):
    n = Node(url)
    try:
        for r in n.query_dicts("org.apache.qpid.dispatch.router.address"):
            if r.get("name") == key or r.get("identity") == key:
                return r
        return None
    finally:
        n.close()


def edge_containers(url):
    """The containers of the router's connections of role edge (management, no qdstat)."""
    n = Node(url)
    try:
        return {r["container"] for r in n.query_dicts("org.apache.qpid.dispatch.connection")
                if r.get("role") == "edge"}
    finally:
        n.close()


def consumers_known(interior_url, keys, count=1):
    """The interior sees `count` destinations (local or remote) for each of `keys`."""
    def check():
        for k in keys:
            r = addr_row(interior_url, k)
            if r is None or (r.get("subscriberCount") or 0) + (r.get("remoteCount") or 0) < count:
                return None
        return True
    return check


def run_traffic(t, producers, consumers, timeout=60.0):
    t.start()
    try:
        wait_for("every producer's messages accepted",
                 lambda: all(p.done() for p in producers), timeout=timeout)
    finally:
        t.stopping = True
        t.thread.join(15)
    assert t.error is None, t.error


def flows(net, src, dst, address, n=20):
    """n at-least-once messages from a producer on src to a consumer on dst: every id
    ACCEPTED and received."""
    t = Traffic()
    c = t.consumer(dst.url, address)
    p = t.producer(src.url, address, n, tag=src.id)
    run_traffic(t, [p], [c])
    got = {b["id"] for b in c.bodies if isinstance(b, dict)}
    assert got == set(range(n)), (src.id, dst.id, address, sorted(got))
    assert not p.rejected


@pytest.mark.deadline(240)
@pytest.mark.parametrize("behind", ["Q", "J"])
def test_junction_edge_on_qdrouterd_interior(net, behind):
    """A Junction edge E on qdrouterd interior A, with interior B (qdrouterd, or Junction)
    behind A: closest and balanced both ways between E and A, and between E and B;
    multicast from E reaches consumers on E, A and B once each, and from B reaches E once;
    `qdstat --edge-router E` through B reaches E's management."""
    a = net.interior("A")
    b = net.interior("B", connect_to=[a], kind=behind)
    e = net.edge("J", "E", [a])
    net.start_interior(a)
    net.start_interior(b)
    net.start_edge(e)
    wait_for("the edge connection on A", lambda: "E" in qdstat(a.url, "--edge"), timeout=30)

    # E to A and back, E to B and back (B's consumer is advertised across the mesh)
    for dist in ("cl", "bal"):
        for far in (a, b):
            flows(net, e, far, "%s.%s.%s" % (dist, "up", far.id))
            flows(net, far, e, "%s.%s.%s" % (dist, "down", far.id))

    # multicast: consumers on E, A and B; producers on E, then on B
    t = Traffic()
    cons = [t.consumer(x.url, "mc.fan") for x in (e, a, b)]
    prod_e = t.mc_producer(e.url, "mc.fan", "from-E")
    prod_b = t.mc_producer(b.url, "mc.fan", "from-B")
    t.start()
    try:
        def every_probe():
            return all(any(str(x).startswith("probe from-%s" % s) for x in c.bodies)
                       for c in cons for s in "EB")
        wait_for("multicast probes reach every consumer", every_probe, timeout=60)
        prod_e.go = prod_b.go = True
        wait_for("the real messages arrive",
                 lambda: all("from-E" in c.bodies and "from-B" in c.bodies for c in cons),
                 timeout=30)
        time.sleep(1.0)  # a duplicate, if any, arrives within this
    finally:
        t.stopping = True
        t.thread.join(15)
    assert t.error is None, t.error
    for who, c in zip("EAB", cons):
        assert c.bodies.count("from-E") == 1, (who, c.bodies)
        assert c.bodies.count("from-B") == 1, (who, c.bodies)
    out = wait_for("qdstat --edge-router E through B",
                   lambda: qdstat(b.url, "--edge-router", "E", "-g"), timeout=30)
    assert re.search(r"Router Id\s+E\b", out), out


@pytest.mark.deadline(180)
def test_junction_edge_keeps_local_traffic_local(net):
    """A producer and a consumer on the Junction edge: the interior advertises the edge's
    consumer (its proxy receiver), yet none of the messages crosses to it."""
    a = net.interior("A")
    e = net.edge("J", "E", [a])
    net.start_interior(a)
    net.start_edge(e)
    wait_for("the edge connection on A", lambda: "E" in qdstat(a.url, "--edge"), timeout=30)
    t = Traffic()
    c = t.consumer(e.url, "cl.local")
    p = t.producer(e.url, "cl.local", 30)
    t.start()
    try:
        wait_for("A sees the edge's consumer of cl.local",
                 consumers_known(a.url, ["M0cl.local"]), timeout=30)
        wait_for("every message accepted", p.done, timeout=60)
        row = addr_row(a.url, "M0cl.local")  # while the edge's clients are there
    finally:
        t.stopping = True
        t.thread.join(15)
    assert {b["id"] for b in c.bodies} == set(range(30))
    assert row is not None
    assert (row.get("deliveriesEgress") or 0) == 0, row
    assert (row.get("deliveriesIngress") or 0) == 0, row


def edge_rows(out):
    """qdstat --edge's rows: [columns] of each row after the header line."""
    lines = out.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("id") and "container" in line:
            return [re.split(r"\s{2,}", x.strip()) for x in lines[i + 2:] if x.strip()]
    return []


@pytest.mark.deadline(120)
def test_qdstat_edge_shows_junction_edge_as_qdrouterd_edge(net):
    """`qdstat --edge` on a qdrouterd interior: a Junction edge's row reads as a qdrouterd
    edge's (role edge, dir in, the same security and authentication)."""
    a = net.interior("A")
    ej = net.edge("J", "EJ", [a])
    eq = net.edge("Q", "EQ", [a])
    net.start_interior(a)
    net.start_edge(ej)
    net.start_edge(eq)

    def both():
        rows = {r[2]: r for r in edge_rows(qdstat(a.url, "--edge")) if len(r) > 4}
        return rows if {"EJ", "EQ"} <= set(rows) else None
    rows = wait_for("both edges in qdstat --edge", both, timeout=30)
    j, q = rows["EJ"], rows["EQ"]
    # id and host differ; role, dir, security, authentication (and tenant) agree
    assert j[3:] == q[3:], (j, q)
    assert j[3] == "edge" and j[4] == "in", j
    # qdstat -n: edges are no routers of the network, a Junction edge no more than qdrouterd's
    out = qdstat(a.url, "-n")
    table = out.split("=", 1)[1] if "=" in out else out
    ids = [x.split()[0] for x in table.splitlines() if x.strip() and not x.startswith("=")]
    assert ids == ["A"], out


def edges_listed(url, ids):
    """qdstat --edge on url lists a connection of each of `ids` (role edge, dir in)."""
    def check():
        rows = {r[2]: r for r in edge_rows(qdstat(url, "--edge")) if len(r) > 4}
        if not set(ids) <= set(rows):
            return None
        return rows
    return check


def multicast_once(senders, receivers, address):
    """A multicast message from each of `senders` reaches each consumer on `receivers`
    exactly once."""
    t = Traffic()
    cons = [t.consumer(x.url, address) for x in receivers]
    prods = [t.mc_producer(x.url, address, "from-" + x.id) for x in senders]
    t.start()
    try:
        def every_probe():
            return all(any(str(b).startswith("probe from-%s" % x.id) for b in c.bodies)
                       for c in cons for x in senders)
        wait_for("multicast probes reach every consumer", every_probe, timeout=60)
        for p in prods:
            p.go = True
        wait_for("the real messages arrive",
                 lambda: all("from-" + x.id in c.bodies for c in cons for x in senders),
                 timeout=30)
        time.sleep(1.0)  # a duplicate, if any, arrives within this
    finally:
        t.stopping = True
        t.thread.join(15)
    assert t.error is None, t.error
    for r, c in zip(receivers, cons):
        for x in senders:
            assert c.bodies.count("from-" + x.id) == 1, (r.id, x.id, c.bodies)


@pytest.mark.deadline(300)
@pytest.mark.parametrize("edge_kinds", ["Q", "J", "QJ"])
def test_edges_on_junction_interior(net, edge_kinds):
    """Edges (qdrouterd's, Junction's, or one of each) on Junction interior A, with qdrouterd
    interior B behind A: closest and balanced between each edge and A, B and the other edge,
    both ways; multicast from every router reaches every consumer once; `qdstat --edge` on A
    lists the edges (role edge, dir in) and `qdstat --edge-router` reaches an edge's
    management through A, and through B (A advertises the edge's address to the mesh)."""
    a = net.interior("A", kind="J")
    b = net.interior("B", connect_to=[a])
    edges = [net.edge(k, "E%s%d" % (k, i), [a]) for i, k in enumerate(edge_kinds)]
    net.start_interior(a)
    net.start_interior(b)
    for e in edges:
        net.start_edge(e)
    rows = wait_for("the edges on A", edges_listed(a.url, [e.id for e in edges]), timeout=30)
    for e in edges:
        assert rows[e.id][3:5] == ["edge", "in"], rows[e.id]
    others = [a, b] + edges
    for e in edges:
        for far in others:
            if far is e:
                continue
            for dist in ("cl", "bal"):
                flows(net, e, far, "%s.%s.%s" % (dist, e.id, far.id))
                flows(net, far, e, "%s.%s.%s" % (dist, far.id, e.id))
    multicast_once(others, others, "mc.all")
    for e in edges:
        # directly on A, and from B: A advertises the edge's H<id> to the mesh
        for via in (a, b):
            out = wait_for("qdstat --edge-router %s through %s" % (e.id, via.id),
                           lambda: qdstat(via.url, "--edge-router", e.id, "-g"), timeout=30)
            assert re.search(r"Router Id\s+%s" % e.id, out), out


def downlink_of(url):
    """Whether the router at url has an edge's downlink (it is that edge's active
    interior)."""
    n = Node(url)
    try:
        rows = n.query_dicts("org.apache.qpid.dispatch.router.link")
    finally:
        n.close()
    return any(r.get("linkType") == "edge-downlink" for r in rows)


@pytest.mark.deadline(240)
def test_junction_edge_fails_over(net):
    """A Junction edge with edge connectors to qdrouterd interiors A and B (A-B connected):
    the interior holding the active connection is killed; the edge activates the other one
    and its addresses follow: a consumer on the edge attached before the failure gets what
    a producer on the other interior sends afterwards, and a producer on the edge started
    before it has every message accepted by a consumer on that interior (deliveries in
    flight on the lost connection come back RELEASED and are resent)."""
    a = net.interior("A")
    b = net.interior("B", connect_to=[a])
    e = net.edge("J", "E", [a, b])
    net.start_interior(a)
    net.start_interior(b)
    net.start_edge(e)

    def active():
        for p, other in ((a, b), (b, a)):
            if downlink_of(p.url):
                return p, other
        return None
    x, y = wait_for("one interior has the edge's downlink", active, timeout=30)
    assert not downlink_of(y.url)
    # the edge's own qdstat --edge: both connections, the one to x active
    def both_up():
        rows = {r[2]: r for r in edge_rows(qdstat(e.url, "--edge")) if len(r) > 4}
        return rows if len(rows) == 2 else None
    rows = wait_for("both edge connections on E", both_up, timeout=30)
    assert set(rows) == {"A", "B"}, rows
    assert rows[x.id][-1] == "yes" and rows[y.id][-1] == "no", rows
    assert rows[x.id][3:5] == ["edge", "out"], rows

    t = Traffic()
    down = t.consumer(e.url, "cl.fo.down")
    up_c = t.consumer(y.url, "cl.fo.up")
    up_p = t.producer(e.url, "cl.fo.up", 60, rate=10, tag="E")
    t.start()
    try:
        wait_for("the edge's consumer is known on %s" % y.id,
                 consumers_known(y.url, ["M0cl.fo.down"]), timeout=30)
        wait_for("some messages accepted before the failure",
                 lambda: len(up_p.accepted) >= 5, timeout=30)
        x.kill()
        wait_for("%s has the edge's downlink" % y.id, lambda: downlink_of(y.url),
                 timeout=30)
        wait_for("the edge's consumer is known on %s again" % y.id,
                 consumers_known(y.url, ["M0cl.fo.down"]), timeout=30)
        t2 = Traffic()
        p2 = t2.producer(y.url, "cl.fo.down", 20, tag=y.id)
        run_traffic(t2, [p2], [])
        wait_for("every message from the edge accepted after the failover", up_p.done,
                 timeout=60)
    finally:
        t.stopping = True
        t.thread.join(15)
    assert t.error is None, t.error
    assert {m["id"] for m in down.bodies} == set(range(20))
    got = {m["id"] for m in up_c.bodies}
    assert got == set(range(60)), sorted(set(range(60)) - got)
    log = e.log_text()
    assert "Edge connection to interior lost, activating alternate" in log
    rows = {r[2]: r for r in edge_rows(qdstat(e.url, "--edge")) if len(r) > 4}
    assert rows.get(y.id, [""])[-1] == "yes", rows


@pytest.mark.deadline(180)
def test_corpus_edge_set(tmp_path, request):
    """qpid-dispatch 1.19's tests/config-2-edge/ (interiors INT.A and INT.B, edge E.25 with an
    edge connector to each) started with junctiond, ports and hosts rewritten as
    test_interior_corpus.py does: the interiors form their mesh, the edge is on one of them,
    and messages cross from the edge to a consumer on each interior and back."""
    from conftest import Router
    from test_interior_corpus import CORPUS, rewrite
    d = CORPUS / "tests" / "config-2-edge"
    ports, started = {}, []
    request.node.jn_routers = started
    urls = {}
    try:
        for f in ("INTA.conf", "INTB.conf", "EDGE25.conf"):
            text, client = rewrite((d / f).read_text(), ports)
            r = Router(tmp_path, [], name=f.split(".")[0], env=interior_env())
            r.config_path = tmp_path / f
            started.append(r)
            r.start(config_text=text)
            urls[f.split(".")[0]] = "amqp://127.0.0.1:%d" % client

        class P:  # the positions flows() takes
            def __init__(self, rid, url):
                self.id, self.url = rid, url
        ia, ib, e = P("INT.A", urls["INTA"]), P("INT.B", urls["INTB"]), P("E.25", urls["EDGE25"])
        wait_for("the edge on one interior",
                 lambda: any("E.25" in edge_containers(x.url) for x in (ia, ib)), timeout=30)
        assert edge_containers(e.url) == {"INT.A", "INT.B"}
        for far in (ia, ib):
            flows(None, e, far, "corpus.up.%s" % far.id)
            flows(None, far, e, "corpus.down.%s" % far.id)
    finally:
        problems = []
        for r in started:
            r.stop()
            problems += r.problems()
        assert not problems, problems


@pytest.mark.deadline(90)
def test_junction_interior_closes_silent_edge(make_router):
    """An edge that attaches its heartbeat link and then sends no heartbeat loses its
    connection to a Junction interior (qdrouterd 1.19's heartbeat server: after 8 s), with
    the reason logged (edges that send them keep theirs: the tests above run longer)."""
    from proton.utils import BlockingConnection
    edge_port = free_port()
    r = make_router([["router", {"id": "A", "mode": "interior"}],
                     ["listener", {"host": "127.0.0.1", "port": str(free_port())}],
                     ["listener", {"host": "127.0.0.1", "port": str(edge_port),
                                   "role": "edge"}]], env=interior_env())
    conn = BlockingConnection("amqp://127.0.0.1:%d" % edge_port, timeout=10)
    conn.create_sender("_$qd.edge_heartbeat")
    t0 = time.monotonic()
    wait_for("the silent edge's connection closed",
             lambda: re.search(r"Lost heartbeat from container \S+, closing connection",
                               r.stderr_text()),
             timeout=40)
    assert time.monotonic() - t0 >= 7.0  # not before qdrouterd's 8 s (less a sweep)
    try:
        conn.close()
    except Exception:
        pass


@pytest.mark.deadline(90)
def test_junction_edge_rejects_bad_tracking(make_router):
    """An interior (here a Proton peer) that sends the edge tracking messages that are not
    [key, bool], the last a transfer without any bytes (Proton's decoder asserts on none):
    each is REJECTED with one log line, and the edge connection stays up (a good message
    after them is ACCEPTED)."""
    import threading
    from proton import Message
    from proton.handlers import MessagingHandler
    from proton.reactor import Container

    port = free_port()
    bodies = ["not a list", ["M0x"], [1, True], ["M0x", "yes"], ["M0x", True]]
    outcomes = []
    opened = threading.Event()

    class FakeInterior(MessagingHandler):
        def __init__(self):
            super().__init__(auto_accept=True)
            self.sent = False

        def on_start(self, event):
            self.acceptor = event.container.listen("127.0.0.1:%d" % port)

        def on_sendable(self, event):
            src = event.link.remote_source.address
            if src == "_$qd.edge_addr_tracking" and not self.sent:
                self.sent = True
                opened.set()
                for b in bodies[:-1]:
                    event.sender.send(Message(body=b))
                event.sender.delivery(event.sender.delivery_tag())
                event.sender.advance()  # no bytes at all
                event.sender.send(Message(body=bodies[-1]))

        def on_accepted(self, event):
            outcomes.append("accepted")

        def on_rejected(self, event):
            outcomes.append("rejected")

    c = Container(FakeInterior())
    t = threading.Thread(target=c.run, daemon=True)
    t.start()
    try:
        r = make_router([["router", {"id": "E", "mode": "edge"}],
                         ["listener", {"host": "127.0.0.1", "port": str(free_port())}],
                         ["connector", {"host": "127.0.0.1", "port": str(port),
                                        "role": "edge", "saslMechanisms": "ANONYMOUS"}]],
                        env=interior_env())
        assert opened.wait(30), r.stderr_text()
        wait_for("every tracking message settled", lambda: len(outcomes) == len(bodies) + 1,
                 timeout=30)
        assert outcomes == ["rejected"] * 5 + ["accepted"], outcomes
        assert r.stderr_text().count("Edge address tracking: invalid message body") == 5
        assert "Connection to 127.0.0.1:%d closed" % port not in r.stderr_text()
    finally:
        c.stop()
        t.join(10)
