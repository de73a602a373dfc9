"""Link routes (qdrouterd's `linkRoute`): a client's link on a matching address is proxied, frame
by frame, to a route container - here a small broker written with Proton-Python that connects to
the router's route-container listener with its own container id and keeps queues in memory.

direction `in` routes client senders, `out` client receivers (qdrouterd 1.19's schema).
"""

import collections
import json
import queue
import subprocess
import threading
import time
from pathlib import Path

import pytest
from proton import Condition, Delivery, Endpoint, Handler, Message
from proton.reactor import Container

from clients import Client, WaitTimeout, outcome_name

BROKER_ID = "lr-broker"


class Broker(threading.Thread):
    """A broker on its own thread: accepts every attach (or refuses those whose address is in
    `refuse` with that error), stores what it receives in per-address queues (accepting each
    message, or rejecting those whose address starts with 'reject', or leaving unsettled
    those whose address has '.hold' in it), and sends queued messages
    on its senders as credit allows (answering a drain when it has nothing left).

    The test talks to it only through thread-safe calls: `put`, `messages`, `attaches`,
    `detach(address, cond)`, `kill()`."""

    def __init__(self, url, container_id=BROKER_ID, refuse=None):
        super().__init__(daemon=True)
        self.url = url
        self.container_id = container_id
        self.refuse = dict(refuse or {})
        self.lock = threading.Lock()
        self.queues = collections.defaultdict(collections.deque)  # address -> [bytes]
        self.attach_log = []  # (role, address) of each attach from the router
        self.flow_log = []  # (address, credit, drain) of each flow on a broker sender
        self.cmds = queue.Queue()
        self.opened = threading.Event()
        self.closed = threading.Event()
        self.error = None
        self.conn = None
        self.senders = []
        self.aborted = 0  # aborted transfers seen
        self.outcomes = []  # (address, body, outcome) the router gave for each sent message

    # ---- the test's side (any thread) ----
    def put(self, address, body):
        with self.lock:
            self.queues[address].append(Message(body=body).encode())

    def messages(self, address):
        with self.lock:
            return [_decode(b) for b in self.queues[address]]

    def attaches(self):
        with self.lock:
            return list(self.attach_log)

    def detach(self, address, name, desc):
        self.cmds.put(("detach", address, name, desc))

    def kill(self):
        """Close the socket at once, without an AMQP close."""
        self.cmds.put(("kill",))
        self.closed.wait(10)

    def stop(self):
        self.cmds.put(("stop",))
        self.join(10)
        assert not self.is_alive(), "the broker did not stop"
        assert self.error is None, self.error

    # ---- the broker's thread ----
    def run(self):
        try:
            c = Container(_BrokerHandler(self))
            c.container_id = self.container_id
            self.container = c
            c.run()
        except Exception as e:  # reported by the test through .error
            self.error = e
            self.opened.set()
        self.closed.set()


def _decode(raw):
    m = Message()
    m.decode(raw)
    return m.body


class _BrokerHandler(Handler):
    def __init__(self, broker):
        self.b = broker
        self.stop_at = None

    def close_socket(self, event):
        t = self.b.conn.transport
        if t is not None:
            t.close_tail()
            t.close_head()
        event.container.stop()

    def on_reactor_init(self, event):
        self.b.conn = event.container.connect(self.b.url, reconnect=False, sasl_enabled=True,
                                              allowed_mechs="ANONYMOUS")
        event.container.schedule(0.02, self)

    def on_timer_task(self, event):
        b = self.b
        while True:
            try:
                cmd = b.cmds.get_nowait()
            except queue.Empty:
                break
            if cmd[0] == "detach":
                link = b.conn.link_head(Endpoint.LOCAL_ACTIVE)
                while link:
                    term = link.target if link.is_receiver else link.source
                    if term.address == cmd[1]:
                        link.condition = Condition(cmd[2], cmd[3])
                        link.close()
                    link = link.next(Endpoint.LOCAL_ACTIVE)
            elif cmd[0] == "kill":
                self.close_socket(event)
                return
            elif cmd[0] == "stop":
                # an AMQP close; the socket goes once the router answered (or after 2 s)
                b.conn.close()
                self.stop_at = time.monotonic() + 2
        if self.stop_at and (b.conn.state & Endpoint.REMOTE_CLOSED or
                             time.monotonic() > self.stop_at):
            self.close_socket(event)
            return
        for link in b.senders:
            self.pump(link)
        event.container.schedule(0.02, self)

    def on_connection_remote_open(self, event):
        self.b.opened.set()

    def on_session_remote_open(self, event):
        if not event.session.state & Endpoint.LOCAL_ACTIVE:
            event.session.open()

    def on_link_remote_open(self, event):
        link = event.link
        term = link.remote_target if link.is_receiver else link.remote_source
        addr = term.address
        with self.b.lock:
            self.b.attach_log.append(("receiver" if link.is_receiver else "sender", addr))
        if link.is_receiver:
            link.target.address = addr
            link.source.address = link.remote_source.address
        else:
            link.source.address = addr
            link.target.address = link.remote_target.address
        if addr in self.b.refuse:
            # refused: attach with a null terminus, then detach with the error
            if link.is_receiver:
                link.target.type = 0
            else:
                link.source.type = 0
            link.open()
            link.condition = Condition(*self.b.refuse[addr])
            link.close()
            return
        link.open()
        if link.is_receiver:
            link.flow(100)
        else:
            self.b.senders.append(link)

    def on_link_flow(self, event):
        link = event.link
        if link.is_sender:
            with self.b.lock:
                self.b.flow_log.append((link.source.address, link.credit, link.drain_mode))
            self.pump(link)

    def pump(self, link):
        if not link.state & Endpoint.LOCAL_ACTIVE:
            return
        addr = link.source.address
        while link.credit > 0:
            with self.b.lock:
                q = self.b.queues[addr]
                if not q:
                    break
                raw = q.popleft()
            dlv = link.delivery(str(time.monotonic_ns()))
            dlv.jn_body = _decode(raw)
            link.send(raw)
            link.advance()
        if link.drain_mode and link.credit > 0:
            link.drained()

    def on_delivery(self, event):
        dlv = event.delivery
        link = event.link
        if link.is_sender:
            if dlv.remote_state and not getattr(dlv, "jn_seen", False):
                dlv.jn_seen = True
                with self.b.lock:
                    self.b.outcomes.append((link.source.address, dlv.jn_body, dlv.remote_state,
                                            dlv.settled))
            if dlv.settled and not dlv.local_state:
                dlv.settle()
            return
        if dlv.aborted:
            with self.b.lock:
                self.b.aborted += 1
            dlv.settle()
            link.advance()
            return
        if dlv.partial or getattr(dlv, "jn_read", False):
            return  # more to come, or a held one the router settled
        dlv.jn_read = True
        raw = link.recv(dlv.pending)
        link.advance()
        addr = link.target.address
        with self.b.lock:
            self.b.queues[addr].append(raw)
        if ".hold" in addr:
            link.flow(1)  # kept, never settled
            return
        dlv.update(Delivery.REJECTED if addr.startswith("reject") else Delivery.ACCEPTED)
        dlv.settle()
        link.flow(1)

    def on_link_remote_close(self, event):
        if event.link.state & Endpoint.LOCAL_ACTIVE:
            event.link.close()
        if event.link in self.b.senders:
            self.b.senders.remove(event.link)


LINK_ROUTES = [
    ["linkRoute", {"name": "lrIn", "prefix": "lr.in", "direction": "in", "containerId": BROKER_ID}],
    ["linkRoute", {"name": "lrOut", "prefix": "lr.out", "direction": "out",
                   "containerId": BROKER_ID}],
    ["linkRoute", {"name": "extIn", "prefix": "ext", "direction": "in", "containerId": BROKER_ID,
                   "delExternalPrefix": "ext.", "addExternalPrefix": "queue."}],
    ["linkRoute", {"name": "rejIn", "prefix": "reject", "direction": "in",
                   "containerId": BROKER_ID}],
    ["linkRoute", {"name": "none", "prefix": "nowhere", "direction": "in",
                   "containerId": "nobody"}],
]


@pytest.fixture
def lr_router(make_router):
    from conftest import router_entities
    ents = router_entities(
        listeners=[{"host": "127.0.0.1", "port": "0"},
                   {"host": "127.0.0.1", "port": "0", "role": "route-container",
                    "name": "brokers"}],
        extra=LINK_ROUTES)
    r = make_router(entities=ents)
    return r


@pytest.fixture
def broker(lr_router):
    b = Broker(lr_router.url_of(1))
    b.start()
    assert b.opened.wait(10), "the broker did not connect"
    assert b.error is None, b.error
    lr_router.wait_log(r"Link routes activated: \d+ \(container %s\)" % BROKER_ID)
    yield b
    b.stop()


def test_sender_through_link_route(lr_router, broker, client):
    conn = client.connect(lr_router.url_of(0))
    snd = conn.sender("lr.in.q1")
    assert not snd.is_remote_closed()
    assert snd.pn.remote_target.address == "lr.in.q1"
    dlvs = [snd.send(Message(body="m%d" % i)) for i in range(20)]
    assert snd.wait_outcomes(dlvs) == [Delivery.ACCEPTED] * 20
    assert broker.messages("lr.in.q1") == ["m%d" % i for i in range(20)]
    assert ("receiver", "lr.in.q1") in broker.attaches()
    # the broker's credit (100) reached the client as it was granted
    assert snd.max_credit_seen >= 80


def test_outcome_from_broker(lr_router, broker, client):
    conn = client.connect(lr_router.url_of(0))
    snd = conn.sender("reject.q")
    dlv = snd.send(Message(body="no"))
    assert snd.wait_outcome(dlv) == Delivery.REJECTED


def test_receiver_through_link_route(lr_router, broker, client):
    for i in range(5):
        broker.put("lr.out.q2", "r%d" % i)
    conn = client.connect(lr_router.url_of(0))
    rcv = conn.receiver("lr.out.q2", credit=3, auto_credit=False)
    got = rcv.get_n(3)
    assert [g.message.body for g in got] == ["r0", "r1", "r2"]
    client.run_for(0.3)
    assert len(rcv.queue) == 0  # the client's credit, not the broker's, limits it
    # the client's outcomes reach the broker as given, settled
    for g, outcome in zip(got, (Delivery.ACCEPTED, Delivery.RELEASED, Delivery.REJECTED)):
        g.delivery.update(outcome)
        g.delivery.settle()
    client.wait(lambda: len(broker.outcomes) == 3, msg="the outcomes at the broker")
    assert sorted((b, o, st) for (_, b, o, st) in broker.outcomes) == [
        ("r0", Delivery.ACCEPTED, True), ("r1", Delivery.RELEASED, True),
        ("r2", Delivery.REJECTED, True)]
    rcv.flow(5)
    got = rcv.get_n(2)
    assert [g.message.body for g in got] == ["r3", "r4"]


def test_drain_through_link_route(lr_router, broker, client):
    for i in range(3):
        broker.put("lr.out.d", "d%d" % i)
    conn = client.connect(lr_router.url_of(0))
    rcv = conn.receiver("lr.out.d", credit=0, auto_credit=False)
    rcv.pn.drain(10)
    client.flush()
    # every message the broker had comes before the drain's answer, which takes the rest
    assert [g.message.body for g in rcv.get_n(3)] == ["d0", "d1", "d2"]
    client.wait(lambda: rcv.pn.credit == 0 and not rcv.pn.draining(), msg="drain answered")
    assert any(d for (_, _, d) in broker.flow_log), "the drain did not reach the broker"
    # a drain with nothing queued is answered at once, and credit works again after it
    rcv.pn.drain(5)
    client.flush()
    client.wait(lambda: rcv.pn.credit == 0 and not rcv.pn.draining(), msg="second drain")
    broker.put("lr.out.d", "after")
    rcv.flow(1)
    assert rcv.get().message.body == "after"


def test_large_message_through_link_route(lr_router, broker, client):
    body = "x" * 300000  # many frames on both connections
    conn = client.connect(lr_router.url_of(0))
    snd = conn.sender("lr.in.big")
    dlv = snd.send(Message(body=body))
    assert snd.wait_outcome(dlv) == Delivery.ACCEPTED
    assert broker.messages("lr.in.big") == [body]
    broker.put("lr.out.big", body)
    rcv = conn.receiver("lr.out.big", credit=1)
    assert rcv.get().message.body == body


def test_prefix_rewrite(lr_router, broker, client):
    conn = client.connect(lr_router.url_of(0))
    snd = conn.sender("ext.orders")
    # the broker saw the rewritten address, the client sees its own
    assert ("receiver", "queue.orders") in broker.attaches()
    assert snd.pn.remote_target.address == "ext.orders"
    dlv = snd.send(Message(body="o1"))
    assert snd.wait_outcome(dlv) == Delivery.ACCEPTED
    assert broker.messages("queue.orders") == ["o1"]


def test_broker_refuses_attach(make_router, lr_router, client):
    b = Broker(lr_router.url_of(1),
               refuse={"lr.in.locked": ("amqp:unauthorized-access", "locked queue")})
    b.start()
    try:
        assert b.opened.wait(10)
        lr_router.wait_log(r"Link routes activated")
        conn = client.connect(lr_router.url_of(0))
        snd = conn.sender("lr.in.locked")
        assert snd.wait_remote_closed()
        assert snd.remote_condition.name == "amqp:unauthorized-access"
        assert snd.remote_condition.description == "locked queue"
    finally:
        b.stop()


def test_broker_detaches_with_error(lr_router, broker, client):
    conn = client.connect(lr_router.url_of(0))
    snd = conn.sender("lr.in.gone")
    dlv = snd.send(Message(body="a"))
    assert snd.wait_outcome(dlv) == Delivery.ACCEPTED
    broker.detach("lr.in.gone", "amqp:resource-deleted", "queue deleted")
    assert snd.wait_remote_closed()
    assert snd.remote_condition.name == "amqp:resource-deleted"
    assert snd.remote_condition.description == "queue deleted"


def test_broker_goes_away(lr_router, broker, client):
    conn = client.connect(lr_router.url_of(0))
    snd = conn.sender("lr.in.k")
    rcv = conn.receiver("lr.out.k", credit=5)
    broker.kill()
    assert snd.wait_remote_closed()
    assert rcv.wait_remote_closed()
    assert snd.remote_condition.name == "qd:routed-link-lost"
    assert rcv.remote_condition.name == "qd:routed-link-lost"
    # and a new attach finds no route
    snd2 = conn.sender("lr.in.k2")
    assert snd2.wait_remote_closed()
    assert snd2.remote_condition.name == "qd:no-route-to-dest"


@pytest.mark.parametrize("how", ["kill", "detach"])
def test_broker_goes_away_holding_deliveries(lr_router, broker, client, how):
    # the broker holds two transfers unsettled and goes away (or detaches the link): the
    # router settles them MODIFIED (delivery-failed) before it detaches the client's link, as
    # qdrouterd does, so that an at-least-once producer sends them again instead of guessing
    conn = client.connect(lr_router.url_of(0))
    snd = conn.sender("lr.in.hold-" + how)
    dlvs = [snd.send(Message(body="h%d" % i)) for i in range(2)]
    client.wait(lambda: len(broker.messages("lr.in.hold-" + how)) == 2, msg="the broker to "
                "hold the messages")
    if how == "kill":
        broker.kill()
    else:
        broker.detach("lr.in.hold-" + how, "amqp:resource-deleted", "queue deleted")
    assert snd.wait_remote_closed()
    assert snd.remote_condition.name == ("qd:routed-link-lost" if how == "kill"
                                         else "amqp:resource-deleted")
    for d in dlvs:
        assert d.settled and d.remote_state == Delivery.MODIFIED, outcome_name(d.remote_state)
        assert d.remote.failed


def test_no_route_container(lr_router, client):
    conn = client.connect(lr_router.url_of(0))
    for addr, make in (("nowhere.q", conn.sender), ("lr.in.x", conn.sender),
                       ("lr.out.x", conn.receiver)):
        link = make(addr)
        assert link.wait_remote_closed(), addr
        assert link.remote_condition.name == "qd:no-route-to-dest"
        assert link.remote_condition.description == "No route to the destination node"
    # a receiver on an `in` route is message-routed as usual (direction matters)
    rcv = conn.receiver("nowhere.q")
    client.run_for(0.2)
    assert not rcv.is_remote_closed()


def test_normal_listener_is_no_route_container(lr_router, client):
    """A connection with the route's container id on a normal listener serves no route
    (qdrouterd: only role route-container)."""
    b = Broker(lr_router.url_of(0))
    b.start()
    try:
        assert b.opened.wait(10)
        conn = client.connect(lr_router.url_of(0))
        snd = conn.sender("lr.in.n")
        assert snd.wait_remote_closed()
        assert snd.remote_condition.name == "qd:no-route-to-dest"
    finally:
        b.stop()


# ---- management: qdstat --linkroutes, qdstat -l, qdmanage CREATE/DELETE -------------------

PEER_BIN = Path(__file__).resolve().parents[2].parent / "shared" / "peer" / "bin"


def peer(tool, router, *args):
    exe = PEER_BIN / tool
    if not exe.exists():
        pytest.skip("the reference %s is not in ../shared/peer (%s)" % (tool, exe))
    h, p = router.addresses[0]
    out = subprocess.run([str(exe), "-b", "%s:%s" % (h, p)] + list(args),
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


def linkroute_rows(router):
    return {r["name"]: r for r in json.loads(peer("qdmanage", router, "query", "--type",
                                                  "linkRoute"))}


def test_qdstat_linkroutes_oper_status(lr_router, client):
    rows = linkroute_rows(lr_router)
    assert set(rows) == {"lrIn", "lrOut", "extIn", "rejIn", "none"}
    assert rows["lrIn"]["prefix"] == "lr.in" and rows["lrIn"]["direction"] == "in"
    assert rows["lrOut"]["direction"] == "out"
    assert rows["extIn"]["addExternalPrefix"] == "queue."
    assert rows["extIn"]["delExternalPrefix"] == "ext."
    assert rows["lrIn"]["containerId"] == BROKER_ID
    assert rows["lrIn"]["distribution"] == "linkBalanced"
    assert {r["operStatus"] for r in rows.values()} == {"inactive"}
    b = Broker(lr_router.url_of(1))
    b.start()
    try:
        assert b.opened.wait(10)
        lr_router.wait_log(r"Link routes activated")
        rows = linkroute_rows(lr_router)
        assert rows["lrIn"]["operStatus"] == "active"
        assert rows["none"]["operStatus"] == "inactive"
        text = peer("qdstat", lr_router, "--linkroutes")
        line = [ln for ln in text.splitlines() if ln.split()[:1] == ["lr.in"]]
        assert line and "active" in line[0].split(), text
        # a link-routed link is one of the router's links (qdstat -l)
        conn = client.connect(lr_router.url_of(0))
        conn.sender("lr.in.stat")
        links = json.loads(peer("qdmanage", lr_router, "query", "--type", "router.link"))
        assert any(ln.get("linkName", "").startswith("snd-lr.in.stat") for ln in links), links
    finally:
        b.stop()
    lr_router.wait_log(r"Link routes deactivated")
    assert linkroute_rows(lr_router)["lrIn"]["operStatus"] == "inactive"


def test_both_ends_of_a_routed_link_are_router_links(lr_router, broker, client):
    # qdrouterd 1.19 shows both ends of a link-routed link in router.link (and qdstat -l):
    # the client's on its connection, the router's own on the broker's, with opposite
    # directions, the client's address as owningAddr (M0<address>) and capacity 0 for the
    # broker's end; the broker's end goes with the link
    from mgmt_tool import Node
    conn = client.connect(lr_router.url_of(0))
    snd = conn.sender("lr.in.rows")
    rcv = conn.receiver("lr.out.rows")
    n = Node(lr_router.url_of(0))
    try:
        def rows_of(key):
            return [x for x in n.query_dicts("router.link") if x["owningAddr"] == key]

        snd_rows = rows_of("M0lr.in.rows")
        assert len(snd_rows) == 2, snd_rows
        by_dir = {x["linkDir"]: x for x in snd_rows}
        assert set(by_dir) == {"in", "out"}, snd_rows
        broker_conn = [x for x in n.query_dicts("connection")
                       if x["container"] == BROKER_ID][0]["identity"]
        assert by_dir["out"]["connectionId"] == broker_conn, snd_rows
        assert by_dir["in"]["connectionId"] != broker_conn, snd_rows
        assert by_dir["out"]["capacity"] == 0 and by_dir["in"]["capacity"] > 0, snd_rows
        assert {x["linkName"] for x in snd_rows} == {snd.pn.name}
        rcv_rows = {x["linkDir"]: x for x in rows_of("M0lr.out.rows")}
        assert rcv_rows["in"]["connectionId"] == broker_conn, rcv_rows
        assert rcv_rows["out"]["connectionId"] != broker_conn, rcv_rows
        # the real qdstat -l: two rows for each address, one on each connection
        exe = PEER_BIN / "qdstat"
        if exe.exists():
            h, p = lr_router.addresses[0]
            out = subprocess.run([str(exe), "-l", "-b", "%s:%s" % (h, p)],
                                 stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                 timeout=30)
            assert out.returncode == 0, out.stderr
            for addr in ("lr.in.rows", "lr.out.rows"):
                lines = [ln.split() for ln in out.stdout.splitlines()
                         if addr in ln.split()]
                assert len(lines) == 2, out.stdout
                assert {ln[1] for ln in lines} == {"in", "out"}, out.stdout
                assert broker_conn in {ln[2] for ln in lines}, out.stdout
                assert all(ln[4] == "mobile" for ln in lines), out.stdout
        # the client closes its sender: both of its rows go
        snd.close()
        deadline = time.monotonic() + 5
        while rows_of("M0lr.in.rows") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert rows_of("M0lr.in.rows") == []
        assert len(rows_of("M0lr.out.rows")) == 2
    finally:
        n.close()


def test_create_and_delete_at_run_time(lr_router, broker, client):
    conn = client.connect(lr_router.url_of(0))
    snd = conn.sender("late.q")  # no route yet: message-routed (no consumer, no credit)
    client.run_for(0.2)
    assert not snd.is_remote_closed() and snd.credit == 0
    row = json.loads(peer("qdmanage", lr_router, "create", "--type", "linkRoute", "--name",
                          "late", "prefix=late", "direction=in", "containerId=" + BROKER_ID))
    assert row["operStatus"] == "active" or row["operStatus"] == "inactive"
    assert linkroute_rows(lr_router)["late"]["operStatus"] == "active"
    snd2 = conn.sender("late.q2")
    dlv = snd2.send(Message(body="late"))
    assert snd2.wait_outcome(dlv) == Delivery.ACCEPTED
    assert broker.messages("late.q2") == ["late"]
    peer("qdmanage", lr_router, "delete", "--type", "linkRoute", "--name", "late")
    assert "late" not in linkroute_rows(lr_router)
    # the link routed already stays; a new attach is message-routed again
    dlv = snd2.send(Message(body="still"))
    assert snd2.wait_outcome(dlv) == Delivery.ACCEPTED
    snd3 = conn.sender("late.q3")
    client.run_for(0.2)
    assert not snd3.is_remote_closed() and snd3.credit == 0
    assert ("receiver", "late.q3") not in broker.attaches()


def test_create_refused_like_qdrouterd(lr_router):
    exe = PEER_BIN / "qdmanage"
    if not exe.exists():
        pytest.skip("the reference qdmanage is not in ../shared/peer (%s)" % exe)
    h, p = lr_router.addresses[0]
    for args in (["prefix=a"], ["prefix=a", "pattern=b", "direction=in"],
                 ["prefix=a", "direction=in", "connection=c", "containerId=d"],
                 ["--name", "lrIn", "prefix=zz", "direction=in"]):
        out = subprocess.run([str(exe), "-b", "%s:%s" % (h, p), "create", "--type",
                              "linkRoute"] + args, stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=30)
        text = out.stdout + out.stderr
        assert out.returncode != 0 and "BadRequestStatus" in text, (args, text)
    assert set(linkroute_rows(lr_router)) == {"lrIn", "lrOut", "extIn", "rejIn", "none"}


def test_router_stops_with_link_routed_links(lr_router, broker, client):
    """SIGTERM while link-routed links are attached, with deliveries in flight both ways: the
    router exits 0 within its grace period and leaks nothing (ASan builds check)."""
    for i in range(3):
        broker.put("lr.out.s", "s%d" % i)
    conn = client.connect(lr_router.url_of(0))
    snd = conn.sender("lr.in.s")
    rcv = conn.receiver("lr.out.s", credit=10, auto_credit=False)
    got = rcv.get_n(3)  # left unsettled
    assert [g.message.body for g in got] == ["s0", "s1", "s2"]
    snd.send(Message(body="in flight"))
    assert lr_router.stop() == 0
    assert lr_router.problems() == []
    client.wait(conn.is_gone, msg="the router's connection to end")


def test_credit_lowered_by_the_receiver(lr_router, broker):
    """A receiver that lowers its credit (a flow with less link-credit than before, which
    AMQP allows at any time) gets no more than the new credit, although the broker was
    granted the old one; raising it again delivers the rest (raw frames: Proton's API only
    adds credit)."""
    import socket
    import struct
    from test_conn_budget import (AMQP_HEADER, attach_receiver_frame, begin_frame, frame,
                                  open_frame, performatives, uint)
    from amqp_raw import _described, enc_list

    def flow(count, credit):
        return frame(_described(0x13, enc_list([uint(0), uint(0x7FFFFFFF), uint(0),
                                                uint(0x7FFFFFFF), uint(0), uint(count),
                                                uint(credit)])))

    h, p = lr_router.addresses[0]
    s = socket.create_connection((h, int(p)), timeout=5)
    data = bytearray()

    def read_for(seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            s.settimeout(max(0.01, end - time.monotonic()))
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                continue
            if not chunk:
                break
            data.extend(chunk)

    try:
        s.sendall(AMQP_HEADER + open_frame("lowering") + begin_frame(0) +
                  attach_receiver_frame(0, "lr.out.low", "low") + flow(0, 10))
        read_for(0.5)
        assert performatives(bytes(data), 0x12) == 1  # the router's attach
        s.sendall(flow(0, 2))  # credit lowered from 10 to 2, nothing received yet
        read_for(0.3)
        for i in range(10):
            broker.put("lr.out.low", "low%d" % i)
        read_for(1.0)
        assert performatives(bytes(data), 0x14) == 2
        s.sendall(flow(2, 5))  # 5 more
        read_for(1.0)
        assert performatives(bytes(data), 0x14) == 7
    finally:
        s.close()


def test_aborted_transfer_through_link_route(lr_router, broker, client):
    """A sender that aborts a message it has begun (frames already out): the broker sees the
    abort, stores nothing, and the link goes on."""
    conn = client.connect(lr_router.url_of(0))
    snd = conn.sender("lr.in.ab")
    snd.wait_credit(1)
    dlv = snd.pn.delivery("aborted-1")
    snd.pn.stream(b"\x00Su\xb0\x00\x01\x00\x00" + b"y" * 60000)  # the start of a data section
    client.run_for(0.3)
    dlv.abort()
    client.run_for(0.3)
    d2 = snd.send(Message(body="after the abort"))
    assert snd.wait_outcome(d2) == Delivery.ACCEPTED
    assert broker.messages("lr.in.ab") == ["after the abort"]
    assert broker.aborted == 1
