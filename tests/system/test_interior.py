"""Interior mode's connection layer and control plane: routers joined by inter-router
connections run qdrouterd 1.19's routing protocol and show each other in `router.node`
(qdstat -n).

Junction routers (edge mode is tested in test_edge.py): two joined by a connector (each sees
the other as a neighbour at the connection's cost, and learns the other's mobile addresses), a line of three
(the ends see each other through the middle, valid origins as qdrouterd computes them), the
loss of a router (killed: the other drops it within helloMaxAgeSeconds) and its return; then
mixed with the real qdrouterd 1.19 of ../shared/peer, each side connecting: both routers'
router.node rows agree, the real `qdstat -n` runs against both, and a consumer's address on
either router reaches the other's address table (qdrouterd's `qdstat -a` shows Junction's as
remote), and qdrouterd sees Junction's control and priority data links as its own; mixed lines
Q1-J-Q2 and J1-Q-J2 where every router's rows agree.  Client messages cross the routers'
data links: anycast from a sender on one router to the consumer on the other, with the
consumer's ACCEPTED back to the sender, and multicast with a consumer on each router (one copy
each), between two Junctions and between Junction and qdrouterd.  The qdrouterd tests skip
where ../shared/peer is absent.
"""
import signal
import subprocess
import threading
import time

import pytest
from proton import Delivery, Message
from proton.reactor import AtMostOnce, LinkOption
from proton import Timeout
from proton.utils import BlockingConnection, LinkDetached, SendException

from conftest import free_port
from meshnet import (PEER_BIN, answers, interior_env, need_peer, nodes, peer_tool,
                     qdr_interior_conf)
from mgmt_tool import Node


def junction(make_router, rid, inter_listen=False, connect=(), cost=None, name=None,
             router=None, extra=()):
    """An interior Junction router: listener 0 is for clients, listener 1 (when asked for)
    takes inter-router connections; one inter-router connector per port in `connect`;
    `router`: more router attributes; `extra`: more entities."""
    ents = [["router", dict({"id": rid, "mode": "interior"}, **(router or {}))],
            ["listener", {"host": "127.0.0.1", "port": "0"}]]
    if inter_listen:
        lst = {"host": "127.0.0.1", "port": "0", "role": "inter-router"}
        if cost:
            lst["cost"] = cost
        ents.append(["listener", lst])
    for port in connect:
        cn = {"host": "127.0.0.1", "port": str(port), "role": "inter-router"}
        if cost:
            cn["cost"] = cost
        ents.append(["connector", cn])
    ents.append(["log", {"module": "ROUTER_MA", "enable": "debug+"}])
    ents.extend(extra)
    return make_router(ents, name=name or rid, env=interior_env())


def wait_for(what, fn, timeout=20.0):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.2)
    raise AssertionError("%s: not within %.0fs (last: %r)" % (what, timeout, last))


def neighbour_of(url, me, other, cost=1):
    rows = nodes(url)
    r = rows.get(other)
    ok = (r and r["nextHop"] is None and r["routerLink"] is not None and r["cost"] == cost and
          rows[me]["nextHop"] == "(self)" and other in rows[me]["linkState"])
    return rows if ok else None


def inter_port(r):
    return r.addresses[1][1]


# ---------------------------------------------------------------- the switch


def test_interior_alone(make_router):
    """An interior router with an inter-router listener and a connector to nowhere starts and
    lists itself in router.node."""
    r = make_router(entities=[
        ["router", {"id": "Solo", "mode": "interior"}],
        ["listener", {"host": "127.0.0.1", "port": "0"}],
        ["listener", {"host": "127.0.0.1", "port": "0", "role": "inter-router"}],
        ["connector", {"host": "127.0.0.1", "port": str(free_port()), "role": "inter-router"}],
    ])
    r.wait_log(r"router id Solo, mode interior")
    end = time.monotonic() + 10  # its own row comes with the first routing tick
    while list(nodes(r.url)) != ["Solo"] and time.monotonic() < end:
        time.sleep(0.2)
    assert list(nodes(r.url)) == ["Solo"]


class RouterCaps(LinkOption):
    """A link that says it is an inter-router control link (a bare qd.router symbol)."""

    def apply(self, link):
        link.source.capabilities.put_symbol("qd.router")
        link.target.capabilities.put_symbol("qd.router")


class DataCaps(LinkOption):
    """An inter-router data link (a bare qd.router-data symbol)."""

    def apply(self, link):
        link.source.capabilities.put_symbol("qd.router-data")
        link.target.capabilities.put_symbol("qd.router-data")


def test_late_data_links_are_accepted(make_router):
    """A peer router (here a Proton client on the inter-router listener) attaches the control
    links, the ten priority data links each way, then one more data link, as qdrouterd does
    for a streaming message: Junction answers it, and a message on it for an address no
    router has is released."""
    r = junction(make_router, "A", inter_listen=True)
    c = BlockingConnection(r.url_of(1))
    try:
        c.create_receiver(None, options=RouterCaps())
        c.create_sender(None, options=RouterCaps())
        for _ in range(10):
            c.create_receiver(None, options=DataCaps())
            c.create_sender(None, options=DataCaps())
        late = c.create_sender(None, options=DataCaps())  # blocks until answered
        with pytest.raises(SendException) as e:
            late.send(Message(address="somewhere", body="x"), timeout=10)
        assert e.value.state == Delivery.RELEASED
    finally:
        c.close()


def refusal(url, address=None, options=None):
    c = BlockingConnection(url)
    try:
        with pytest.raises(LinkDetached) as e:
            c.create_receiver(address, options=options)
        cond = e.value.link.remote_condition
        return cond.name, cond.description
    finally:
        c.close()


def test_router_links_only_on_inter_router_connections(make_router):
    """As qdrouterd: a control link on a client's connection is refused (qd:forbidden), and
    a client's link on an inter-router connection without a control link too
    (qd:connection-role)."""
    r = junction(make_router, "A", inter_listen=True)
    assert refusal(r.url, options=RouterCaps()) == (
        "qd:forbidden", "Connectivity to the node is forbidden")
    assert refusal(r.url_of(1), "foo") == (
        "qd:connection-role", "Link attach forbidden on inter-router connection")
    r.wait_log(r"Router attach forbidden on non-inter-router connection")


# ---------------------------------------------------------------- Junction routers


def test_two_junction_routers(make_router):
    """B connects to A with cost 3 (A's listener says nothing): both use 3, both see the other
    as a neighbour; a consumer's address on each reaches the other (mobile-address sync)."""
    a = junction(make_router, "A", inter_listen=True)
    b = junction(make_router, "B", connect=[inter_port(a)], cost=3)
    wait_for("A sees B", lambda: neighbour_of(a.url, "A", "B", cost=3))
    rows_b = wait_for("B sees A", lambda: neighbour_of(b.url, "B", "A", cost=3))
    # B's link state reaches A by LSR and LSU once B is A's neighbour
    rows_a = wait_for("A holds B's link state", lambda: (
        lambda r: r if r["B"]["linkState"] == ["A"] else None)(nodes(a.url)))
    assert rows_a["A"]["linkState"] == ["B"] and rows_b["B"]["linkState"] == ["A"]
    assert rows_a["B"]["address"] == "amqp:/_topo/0/B"
    assert rows_a["B"]["validOrigins"] == [] and rows_a["B"]["protocolVersion"] == 1
    assert rows_a["B"]["instance"] > 1500000000, "B's boot number from its HELLO/RA"

    ca, cb = BlockingConnection(a.url), BlockingConnection(b.url)
    try:
        ca.create_receiver("on.a")
        cb.create_receiver("on.b")
        b.wait_log(r"Router A: address M0on\.a reachable", timeout=10)
        a.wait_log(r"Router B: address M0on\.b reachable", timeout=10)
    finally:
        ca.close()
        cb.close()
    b.wait_log(r"Router A: address M0on\.a withdrawn", timeout=10)


def test_line_of_three(make_router):
    """A - B - C: the ends reach each other through B at cost 2; B is on both ends' paths to
    each other, so each end is the other's valid origin at B."""
    a = junction(make_router, "A", inter_listen=True)
    c = junction(make_router, "C", inter_listen=True)
    b = junction(make_router, "B", connect=[inter_port(a), inter_port(c)])

    def a_sees_c():
        rows = nodes(a.url)
        r = rows.get("C")
        # C's link state came back from C through B (an LSR and an LSU B passed on)
        ok = r and r["nextHop"] == "B" and r["cost"] == 2 and r["linkState"] == ["B"] and \
            sorted(rows["B"]["linkState"]) == ["A", "C"]
        return rows if ok else None

    rows_a = wait_for("A reaches C through B", a_sees_c)
    assert rows_a["C"]["routerLink"] is None
    rows_c = wait_for("C reaches A through B",
                      lambda: (lambda r: r if r.get("A", {}).get("nextHop") == "B" else None)(
                          nodes(c.url)))
    assert rows_c["A"]["cost"] == 2

    def b_origins():
        rows = nodes(b.url)
        ok = rows.get("A", {}).get("validOrigins") == ["C"] and \
            rows.get("C", {}).get("validOrigins") == ["A"]
        return rows if ok else None

    rows_b = wait_for("B's valid origins", b_origins)
    assert rows_b["A"]["nextHop"] is None and rows_b["C"]["nextHop"] is None
    assert rows_a["C"]["validOrigins"] == [] and rows_a["B"]["validOrigins"] == []


def test_router_lost_and_back(make_router, request):
    """B is killed (SIGKILL): A drops it within helloMaxAgeSeconds (3) plus a tick; a new B
    (new instance) is learned again."""
    a = junction(make_router, "A", inter_listen=True)
    b = junction(make_router, "B", connect=[inter_port(a)])
    wait_for("A sees B", lambda: neighbour_of(a.url, "A", "B"))
    first = nodes(a.url)["B"]["instance"]
    b.proc.send_signal(signal.SIGKILL)
    b.proc.wait(5)
    request.node.jn_routers.remove(b)  # killed on purpose: no shutdown to check
    t0 = time.monotonic()

    def dropped():
        rows = nodes(a.url)
        r = rows.get("B")
        gone = "B" not in rows[a.name]["linkState"] and (
            r is None or (r["routerLink"] is None and r["nextHop"] is None))
        return rows if gone else None

    wait_for("A drops B", dropped, timeout=6)
    assert time.monotonic() - t0 < 3 + 2, "within helloMaxAgeSeconds and a tick"
    time.sleep(1.1)  # the new B's boot number is another second
    junction(make_router, "B", connect=[inter_port(a)], name="B2")
    rows = wait_for("A sees the new B", lambda: neighbour_of(a.url, "A", "B"))
    assert rows["B"]["instance"] != first, "the restart was seen"


@pytest.mark.parametrize("max_age", [None, 6], ids=["default", "helloMaxAgeSeconds-6"])
def test_silent_neighbour_expires(make_router, max_age):
    """B stops (SIGSTOP) with its connection open: no HELLO comes, and A drops B from its
    link state after A's helloMaxAgeSeconds (3 by default) - the timer, not a detach; B
    resumed (SIGCONT) is A's neighbour again, the same instance."""
    age = max_age or 3
    a = junction(make_router, "A", inter_listen=True,
                 router={"helloMaxAgeSeconds": max_age} if max_age else None)
    b = junction(make_router, "B", connect=[inter_port(a)])
    first = wait_for("A sees B", lambda: neighbour_of(a.url, "A", "B"))["B"]["instance"]
    b.proc.send_signal(signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        wait_for("A drops the silent B",
                 lambda: "B" not in nodes(a.url)["A"]["linkState"] or None, timeout=age + 5)
        took = time.monotonic() - t0
        assert age - 1.5 <= took < age + 2, \
            "helloMaxAgeSeconds (%d), give or take a tick: %.1fs" % (age, took)
        assert nodes(a.url)["B"]["routerLink"] is None
    finally:
        b.proc.send_signal(signal.SIGCONT)
    rows = wait_for("A sees B again", lambda: neighbour_of(a.url, "A", "B"))
    assert rows["B"]["instance"] == first


# ---------------------------------------------------------------- with qdrouterd 1.19


class Qdrouterd:
    def __init__(self, tmp_path, rid, connect_port=None, extra=""):
        need_peer()
        self.id = rid
        self.port, self.ir_port = free_port(), free_port()
        self.log = tmp_path / ("%s.log" % rid)
        text = qdr_interior_conf(rid, self.log, self.port, self.ir_port)
        if connect_port:
            text += ("connector {\n host: 127.0.0.1\n port: %d\n role: inter-router\n"
                     " saslMechanisms: ANONYMOUS\n}\n" % connect_port)
        cfg = tmp_path / ("%s.conf" % rid)
        cfg.write_text(text + extra)
        self.proc = subprocess.Popen([str(PEER_BIN / "qdrouterd"), "-c", str(cfg)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        for _ in range(100):
            if answers(self.port):
                break
            time.sleep(0.1)

    @property
    def url(self):
        return "amqp://127.0.0.1:%d" % self.port

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)

    def log_text(self):
        return self.log.read_text() if self.log.exists() else ""


def qdstat(url, *args):
    return peer_tool("qdstat", url, *args)


def mixed_pair(make_router, tmp_path, junction_connects):
    """A Junction J and a qdrouterd Q joined, J's connector to Q's inter-router listener or
    Q's to J's, once each sees the other as its neighbour; returns (j, q)."""
    if junction_connects:
        q = Qdrouterd(tmp_path, "Q")
        j = junction(make_router, "J", connect=[q.ir_port])
    else:
        j = junction(make_router, "J", inter_listen=True)
        q = Qdrouterd(tmp_path, "Q", connect_port=inter_port(j))
    try:
        wait_for("J sees Q", lambda: neighbour_of(j.url, "J", "Q"))
        wait_for("Q sees J", lambda: neighbour_of(q.url, "Q", "J"))
    except BaseException:
        q.stop()
        raise
    return j, q


def agree(rows_j, rows_q):
    """Both routers' rows name the same routers, each with its neighbours' ids."""
    view = lambda rows: {k: sorted(v["linkState"]) for k, v in rows.items()}
    return view(rows_j) == view(rows_q)


@pytest.mark.parametrize("junction_connects", [True, False],
                         ids=["junction-connector", "qdrouterd-connector"])
def test_with_qdrouterd(make_router, tmp_path, junction_connects):
    need_peer()
    j, q = mixed_pair(make_router, tmp_path, junction_connects)
    try:
        rows_q = wait_for("Q sees J", lambda: neighbour_of(q.url, "Q", "J"))
        rows_j = wait_for("J holds Q's link state",
                          lambda: (lambda r: r if r["Q"]["linkState"] == ["J"] else None)(
                              nodes(j.url)))
        assert agree(rows_j, rows_q), (rows_j, rows_q)
        assert rows_q["J"]["instance"] == rows_j["J"]["instance"]
        assert rows_j["Q"]["instance"] == rows_q["Q"]["instance"]
        # qdrouterd took the links for what they are: two control links, and a data link
        # each way for every priority (the capabilities are bare symbols, the attach order
        # qdrouterd's)
        n = Node(q.url)
        try:
            links = n.query_dicts("org.apache.qpid.dispatch.router.link")
        finally:
            n.close()
        ctl = sorted(x["linkDir"] for x in links if x["linkType"] == "router-control")
        data = sorted((x["linkDir"], x["priority"]) for x in links
                      if x["linkType"] == "inter-router")
        assert ctl == ["in", "out"], links
        assert data == sorted((d, p) for d in ("in", "out") for p in range(10)), links
        for url in (j.url, q.url):  # the real tool, both ways
            out = qdstat(url, "-n")
            assert "Routers in the Network" in out and " J " in out and " Q " in out, out

        cj, cq = BlockingConnection(j.url), BlockingConnection(q.url)
        try:
            cj.create_receiver("on.j")
            cq.create_receiver("on.q")

            def remote_on_q():
                n = Node(q.url)
                try:
                    rows = {r["key"]: r for r in n.query_dicts(
                        "org.apache.qpid.dispatch.router.address")}
                finally:
                    n.close()
                r = rows.get("M0on.j")
                return r if r and r["remoteCount"] == 1 and r["subscriberCount"] == 0 else None

            wait_for("qdrouterd learns J's address", remote_on_q)
            out = qdstat(q.url, "-a")
            line = [x for x in out.splitlines() if " on.j " in x]
            assert line and line[0].split()[6] == "1", out  # the `remote` column
            j.wait_log(r"Router Q: address M0on\.q reachable", timeout=10)
        finally:
            cj.close()
            cq.close()
        text = q.log_text()
        for bad in ("protocol error", "Exceeded Maximum", "duplicate", "CRITICAL"):
            assert bad not in text, "qdrouterd logged %r:\n%s" % (bad, text[-3000:])
    finally:
        q.stop()


def test_line_qdrouterd_junction_qdrouterd(make_router, tmp_path):
    """Q1 - J - Q2, Junction in the middle: J passes the qdrouterds' LSR and LSU on, floods
    their RAs, so each end reaches the other through J; all three routers' router.node rows
    agree, and J's valid origins are what qdrouterd would compute (each end for the other)."""
    need_peer()
    q1 = Qdrouterd(tmp_path, "Q1")
    q2 = Qdrouterd(tmp_path, "Q2")
    try:
        j = junction(make_router, "J", connect=[q1.ir_port, q2.ir_port])

        def end_sees_end(q, me, other):
            rows = nodes(q.url)
            r = rows.get(other)
            ok = r and r["nextHop"] == "J" and r["cost"] == 2 and r["linkState"] == ["J"] \
                and sorted(rows.get("J", {}).get("linkState", [])) == ["Q1", "Q2"]
            return rows if ok else None

        rows_1 = wait_for("Q1 reaches Q2 through J", lambda: end_sees_end(q1, "Q1", "Q2"))
        rows_2 = wait_for("Q2 reaches Q1 through J", lambda: end_sees_end(q2, "Q2", "Q1"))

        def j_origins():
            rows = nodes(j.url)
            ok = rows.get("Q1", {}).get("validOrigins") == ["Q2"] and \
                rows.get("Q2", {}).get("validOrigins") == ["Q1"]
            return rows if ok else None

        rows_j = wait_for("J's valid origins", j_origins)
        assert agree(rows_j, rows_1) and agree(rows_j, rows_2), (rows_j, rows_1, rows_2)
        assert rows_1["Q2"]["validOrigins"] == [] and rows_2["Q1"]["validOrigins"] == []
        for q in (q1, q2):
            text = q.log_text()
            for bad in ("protocol error", "Exceeded Maximum", "duplicate", "CRITICAL"):
                assert bad not in text, "%s logged %r:\n%s" % (q.id, bad, text[-3000:])
    finally:
        q1.stop()
        q2.stop()


def test_line_junction_qdrouterd_junction(make_router, tmp_path):
    """J1 - Q - J2, qdrouterd in the middle: the Junction ends take the link states and RAs
    qdrouterd passes on (with its trace), reach each other through Q, and agree with Q."""
    need_peer()
    q = Qdrouterd(tmp_path, "Q")
    try:
        j1 = junction(make_router, "J1", connect=[q.ir_port])
        j2 = junction(make_router, "J2", connect=[q.ir_port])

        def end_sees_end(j, other):
            rows = nodes(j.url)
            r = rows.get(other)
            ok = r and r["nextHop"] == "Q" and r["cost"] == 2 and r["linkState"] == ["Q"] \
                and sorted(rows.get("Q", {}).get("linkState", [])) == ["J1", "J2"]
            return rows if ok else None

        rows_1 = wait_for("J1 reaches J2 through Q", lambda: end_sees_end(j1, "J2"))
        rows_2 = wait_for("J2 reaches J1 through Q", lambda: end_sees_end(j2, "J1"))
        rows_q = wait_for("Q's valid origins", lambda: (lambda r: r if r.get("J1", {}).get(
            "validOrigins") == ["J2"] and r.get("J2", {}).get("validOrigins") == ["J1"]
            else None)(nodes(q.url)))
        assert agree(rows_1, rows_q) and agree(rows_2, rows_q), (rows_1, rows_2, rows_q)
    finally:
        q.stop()


# ---------------------------------------------------------------- client messages across routers

MULTICAST = ["address", {"prefix": "mc", "distribution": "multicast"}]
Q_MULTICAST = "address {\n prefix: mc\n distribution: multicast\n}\n"


def reachable_at(r, other, address):
    """Wait until router r (a Junction) has applied `other`'s MAU with `address`."""
    r.wait_log(r"Router %s: address M0%s reachable" % (other, address.replace(".", r"\.")),
               timeout=20)


def send_in_thread(url, address, body, settled=False):
    """Send one message from a client on `url` in a thread (a blocking send waits for the
    outcome, which needs the consumer's connection pumped meanwhile); the thread's result
    list gets the delivery's remote state, or the exception."""
    out = []

    def run():
        c = BlockingConnection(url)
        try:
            opts = AtMostOnce() if settled else None
            s = c.create_sender(address, options=opts)
            d = s.send(Message(address=address, body=body), timeout=20)
            out.append(d.remote_state if not settled else "sent")
        except Exception as e:  # reported by the caller
            out.append(e)
        finally:
            c.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def receive_one(rcv, want_body, accept=True):
    m = rcv.receive(timeout=15)
    assert m.body == want_body
    if accept:
        rcv.accept()
    return m


def no_more(rcv, while_alive=None):
    """No further message comes to rcv (receiving also pumps its connection, which sends the
    consumer's outcome on): for 1.5 s, or while thread `while_alive` runs (at most 25 s)."""
    deadline = time.monotonic() + 25
    while True:
        with pytest.raises(Timeout):
            rcv.receive(timeout=0.5 if while_alive else 1.5)
        if not while_alive or not while_alive.is_alive() or time.monotonic() > deadline:
            return


def anycast_across(a_url, b_url, sender_router, other_id, me_id):
    """A consumer on the receiver's router, a sender on the sender's: the message crosses
    the inter-router connection and ACCEPTED comes back to the sender."""
    cb = BlockingConnection(b_url)
    try:
        rcv = cb.create_receiver("far.q")
        reachable_at(sender_router, other_id, "far.q")
        t, out = send_in_thread(a_url, "far.q", "hello from %s" % me_id)
        receive_one(rcv, "hello from %s" % me_id)
        no_more(rcv, while_alive=t)
        t.join(5)
        assert out == [Delivery.ACCEPTED], out
    finally:
        cb.close()


def multicast_across(a_url, b_url, sender_router, other_id):
    """Consumers of a multicast address on both routers, a sender on the first: each
    consumer gets one copy."""
    ca, cb = BlockingConnection(a_url), BlockingConnection(b_url)
    try:
        ra = ca.create_receiver("mc.news")
        rb = cb.create_receiver("mc.news")
        reachable_at(sender_router, other_id, "mc.news")
        t, out = send_in_thread(a_url, "mc.news", "to all", settled=True)
        t.join(25)
        assert out == ["sent"], out
        receive_one(ra, "to all", accept=False)
        receive_one(rb, "to all", accept=False)
        no_more(ra)
        no_more(rb)
    finally:
        ca.close()
        cb.close()


def joined(make_router, extra=()):
    a = junction(make_router, "A", inter_listen=True, extra=extra)
    b = junction(make_router, "B", connect=[inter_port(a)], extra=extra)
    wait_for("A sees B", lambda: neighbour_of(a.url, "A", "B"))
    wait_for("B sees A", lambda: neighbour_of(b.url, "B", "A"))
    return a, b


def test_anycast_between_junction_routers(make_router):
    """A sender on A reaches the only consumer, on B, and B's consumer's ACCEPTED comes back
    to it hop by hop; and the other way round (data links both ways)."""
    a, b = joined(make_router)
    anycast_across(a.url, b.url, a, "B", "A")
    anycast_across(b.url, a.url, b, "A", "B")


def test_multicast_between_junction_routers(make_router):
    """A multicast address with a consumer on each router: one copy to each."""
    a, b = joined(make_router, extra=[MULTICAST])
    multicast_across(a.url, b.url, a, "B")


def test_client_messages_with_qdrouterd(make_router, tmp_path):
    """Junction J connects to the real qdrouterd Q: a sender on J reaches a consumer on Q
    and gets its ACCEPTED, a sender on Q one on J, and a multicast address with a consumer on
    each router gives each one copy."""
    need_peer()
    q = Qdrouterd(tmp_path, "Q", extra=Q_MULTICAST)
    try:
        j = junction(make_router, "J", connect=[q.ir_port], extra=[MULTICAST])
        wait_for("J sees Q", lambda: neighbour_of(j.url, "J", "Q"))
        wait_for("Q sees J", lambda: neighbour_of(q.url, "Q", "J"))
        anycast_across(j.url, q.url, j, "Q", "J")
        # the other way: Q learns J's consumer (its address table says so)
        cj = BlockingConnection(j.url)
        try:
            rcv = cj.create_receiver("back.q")

            def remote_on_q():
                n = Node(q.url)
                try:
                    rows = {r["key"]: r for r in n.query_dicts(
                        "org.apache.qpid.dispatch.router.address")}
                finally:
                    n.close()
                r = rows.get("M0back.q")
                return r if r and r["remoteCount"] == 1 else None

            wait_for("Q learns J's consumer", remote_on_q)
            t, out = send_in_thread(q.url, "back.q", "hello from Q")
            receive_one(rcv, "hello from Q")
            no_more(rcv, while_alive=t)
            t.join(5)
            assert out == [Delivery.ACCEPTED], out
        finally:
            cj.close()
        multicast_across(j.url, q.url, j, "Q")
        text = q.log_text()
        for bad in ("protocol error", "Exceeded Maximum", "CRITICAL"):
            assert bad not in text, "qdrouterd logged %r:\n%s" % (bad, text[-3000:])
    finally:
        q.stop()
