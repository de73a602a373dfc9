"""Waypoint and fallback addresses through an edge (issue 17): the capabilities qdrouterd 1.19
puts on an edge's proxy links (`qd.waypoint.N` for a phase of a multi-phase address that its
ordinary clients do not use, `qd.fallback` for a fallback destination), so that the interior
attaches each proxy link to the same phase of the address as the edge.

Shape: a broker (fake_broker.py) on the edge's route-container listener, the edge's autoLinks
to it (a waypoint address's out and in autoLinks, a fallback out autoLink), and the clients on
the interior.  What a producer on the interior sends to the waypoint address goes down to the
edge's out autoLink (phase 0), into the broker, back up from the broker through the edge's in
autoLink (phase 1) to a consumer on the interior; what a producer on the interior sends to the
fallback address while it has no consumer goes to the broker's queue through the edge's
fallback autoLink, and to the consumer once there is one.  Every pairing of Junction (J) and
qdrouterd (Q) as edge and interior; the qdrouterd cases skip where ../shared/peer is absent
(QQ is the reference the others are held to).
"""
import subprocess

import pytest
from proton import Delivery, Message, symbol
from proton.reactor import ReceiverOption

from clients import Client, WaitTimeout
from conftest import free_port
from meshnet import PEER_BIN, interior_env, need_peer, stop_process, wait_for
from mgmt_tool import Node
from test_autolink import brokers  # noqa: F401

ADDRESSES = [{"prefix": "wp", "waypoint": True}, {"prefix": "fb", "enableFallback": True}]
# The edge's autoLinks to the broker (container "broker"): phase 0 out, phase 1 in (the
# waypoint's defaults), and the fallback destination's out autoLink.
AUTOLINKS = [{"address": "wp.q", "direction": "out", "containerId": "broker"},
             {"address": "wp.q", "direction": "in", "containerId": "broker"},
             {"address": "fb.q", "direction": "out", "containerId": "broker", "fallback": True}]


def qdr_value(v):
    return ("yes" if v else "no") if isinstance(v, bool) else v


def qdr_section(name, attrs):
    return "%s {\n%s}\n" % (name, "".join(" %s: %s\n" % (k, qdr_value(v))
                                          for k, v in attrs.items()))


class Routers:
    """An interior and an edge on it, each a Junction or a qdrouterd."""

    def __init__(self, make_router, tmp_path):
        self.make_router, self.tmp_path = make_router, tmp_path
        self.qprocs = []

    def start(self, kind, rid, mode, listeners, connectors=(), extra=()):
        """A router: listeners [(port, role)], connectors [(port, role)], extra entities
        [(type, attrs)]; returns its client URL (the first listener's)."""
        url = "amqp://127.0.0.1:%d" % listeners[0][0]
        ents = [("address", a) for a in ADDRESSES] + list(extra)
        if kind == "J":
            cfg = [["router", {"id": rid, "mode": mode}]]
            cfg += [["listener", {"host": "127.0.0.1", "port": str(p), "role": r}]
                    for p, r in listeners]
            cfg += [["connector", {"host": "127.0.0.1", "port": str(p), "role": r}]
                    for p, r in connectors]
            cfg += [[t, a] for t, a in ents]
            self.make_router(cfg, name=rid, env=interior_env())
            return url
        need_peer()
        log = self.tmp_path / ("%s.log" % rid)
        text = ("router {\n mode: %s\n id: %s\n}\n"
                "log {\n module: DEFAULT\n enable: info+\n outputFile: %s\n}\n" % (mode, rid, log))
        for p, r in listeners:
            text += qdr_section("listener", {"host": "127.0.0.1", "port": p, "role": r,
                                             "authenticatePeer": False,
                                             "saslMechanisms": "ANONYMOUS"})
        for p, r in connectors:
            text += qdr_section("connector", {"host": "127.0.0.1", "port": p, "role": r,
                                              "saslMechanisms": "ANONYMOUS"})
        text += "".join(qdr_section(t, a) for t, a in ents)
        cfg = self.tmp_path / ("%s.conf" % rid)
        cfg.write_text(text)
        proc = subprocess.Popen([str(PEER_BIN / "qdrouterd"), "-c", str(cfg)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.qprocs.append(proc)
        wait_for("qdrouterd %s answers management" % rid, lambda: addr_rows(url) is not None,
                 timeout=20)
        return url

    def close(self):
        for p in self.qprocs:
            stop_process(p)


@pytest.fixture
def routers(make_router, tmp_path):
    r = Routers(make_router, tmp_path)
    yield r
    r.close()


def addr_rows(url):
    """{key: router.address row} of the router at url."""
    n = Node(url)
    try:
        return {r["name"]: r for r in n.query_dicts("org.apache.qpid.dispatch.router.address")}
    finally:
        n.close()


def has_consumer(url, key):
    def check():
        r = addr_rows(url).get(key)
        return r is not None and (r.get("subscriberCount") or 0) >= 1
    return check


@pytest.mark.deadline(180)
@pytest.mark.parametrize("edge_kind,interior_kind", [("J", "J"), ("J", "Q"), ("Q", "J"),
                                                     ("Q", "Q")])
def test_waypoint_and_fallback_through_edge(routers, brokers, edge_kind,  # noqa: F811
                                            interior_kind):
    """The broker and its autoLinks on the edge, the clients on the interior: the interior
    attaches the edge's proxy receiver of the waypoint's phase 0 to M0wp.q (qd.waypoint.1),
    its proxy sender of phase 1 to M1wp.q (qd.waypoint.1) and its proxy receiver of the
    fallback destination to MFfb.q (qd.fallback); messages take the broker's way round."""
    i_port, i_edge, e_rc = free_port(), free_port(), free_port()
    i_url = routers.start(interior_kind, "I", "interior",
                          [(i_port, "normal"), (i_edge, "edge")])
    routers.start(edge_kind, "E", "edge", [(free_port(), "normal"), (e_rc, "route-container")],
                  connectors=[(i_edge, "edge")],
                  extra=[("autoLink", a) for a in AUTOLINKS])
    b = brokers("amqp://127.0.0.1:%d" % e_rc)
    for line in ("attached out wp.q", "attached in wp.q", "attached out fb.q"):
        b.wait_line(line, timeout=30)
    # the interior sees the edge's consumers at the phases the edge has them
    wait_for("the interior has the edge's consumer of M0wp.q", has_consumer(i_url, "M0wp.q"),
             timeout=30)
    wait_for("the interior has the edge's consumer of MFfb.q", has_consumer(i_url, "MFfb.q"),
             timeout=30)
    rows = addr_rows(i_url)
    # the waypoint's egress phase has no consumer on the interior yet: the edge's proxy
    # receiver is not there (it would make the message go round for ever)
    assert (rows.get("M1wp.q", {}).get("subscriberCount") or 0) == 0, rows.get("M1wp.q")
    assert (rows.get("M0fb.q", {}).get("subscriberCount") or 0) == 0, rows.get("M0fb.q")

    c = Client()
    try:
        conn = c.connect(i_url)
        # waypoint: interior -> edge (phase 0) -> broker -> edge (phase 1) -> interior
        rcv = conn.receiver("wp.q", credit=10, settle="accept")
        snd = conn.sender("wp.q")
        d = snd.send(Message(body="w1"), timeout=30)
        assert snd.wait_outcome(d, timeout=30) == Delivery.ACCEPTED
        b.wait_line("stored wp.q w1", client=c, timeout=30)
        got = rcv.get(timeout=30)
        assert got.message.body == "w1"
        # fallback: no consumer of fb.q anywhere, so its fallback destination, the broker
        fsnd = conn.sender("fb.q")
        d = fsnd.send(Message(body="f1"), timeout=30)
        assert fsnd.wait_outcome(d, timeout=30) == Delivery.ACCEPTED
        b.wait_line("stored fb.q f1", client=c, timeout=30)
        # with a consumer on the interior, fb.q goes to it and not to the broker
        frcv = conn.receiver("fb.q", credit=10, settle="accept")
        wait_for("the interior has a consumer of M0fb.q",
                 lambda: c.run_for(0.1) or has_consumer(i_url, "M0fb.q")(), timeout=30)
        d = fsnd.send(Message(body="f2"), timeout=30)
        assert fsnd.wait_outcome(d, timeout=30) == Delivery.ACCEPTED
        assert frcv.get(timeout=30).message.body == "f2"
        c.run_for(0.5)
        assert "stored fb.q f2" not in b.lines, b.lines
        # f1 went to the fallback destination (the address still has its links: qdrouterd
        # forgets an address without any)
        rows = addr_rows(i_url)
        assert rows["M0fb.q"]["deliveriesRedirectedToFallback"] == 1, rows["M0fb.q"]
    finally:
        c.close()


class Capability(ReceiverOption):
    """A receiver whose source carries one capability (a symbol)."""

    def __init__(self, cap):
        self.cap = cap

    def apply(self, link):
        link.source.capabilities.put_symbol(symbol(self.cap))


@pytest.mark.deadline(90)
@pytest.mark.parametrize("kind", ["J", "Q"])
def test_client_capabilities_pick_the_phase(routers, kind):
    """A client receiver with qd.fallback consumes the fallback destination (it gets what
    finds no other consumer, and nothing once there is one); one with qd.waypoint.1 on a
    waypoint address consumes phase 0, what producers send, where an ordinary receiver
    consumes phase 1 (qdrouterd 1.19's address lookup; Q: the reference)."""
    url = routers.start(kind, "S", "standalone", [(free_port(), "normal")])
    c = Client()
    try:
        conn = c.connect(url)
        fb = conn.receiver("fb.c", credit=10, settle="accept",
                           options=[Capability("qd.fallback")])
        wp = conn.receiver("wp.c", credit=10, settle="accept",
                           options=[Capability("qd.waypoint.1")])
        rows = wait_for("MFfb.c and M0wp.c consumed",
                        lambda: c.run_for(0.1) or (lambda r: r if all(
                            (r.get(k, {}).get("subscriberCount") or 0) == 1
                            for k in ("MFfb.c", "M0wp.c")) else None)(addr_rows(url)),
                        timeout=20)
        assert (rows.get("M0fb.c", {}).get("subscriberCount") or 0) == 0, rows.get("M0fb.c")
        snd = conn.sender("fb.c")
        d = snd.send(Message(body="to-fallback"))
        assert snd.wait_outcome(d) == Delivery.ACCEPTED
        assert fb.get().message.body == "to-fallback"
        plain = conn.receiver("fb.c", credit=10, settle="accept")
        wait_for("an ordinary consumer of M0fb.c",
                 lambda: c.run_for(0.1) or has_consumer(url, "M0fb.c")(), timeout=20)
        d = snd.send(Message(body="to-consumer"))
        assert snd.wait_outcome(d) == Delivery.ACCEPTED
        assert plain.get().message.body == "to-consumer"
        wsnd = conn.sender("wp.c")
        d = wsnd.send(Message(body="phase-0"))
        assert wsnd.wait_outcome(d) == Delivery.ACCEPTED
        assert wp.get().message.body == "phase-0"
        with pytest.raises(WaitTimeout):  # the fallback consumer got no more
            fb.get(timeout=0.5)
    finally:
        c.close()
