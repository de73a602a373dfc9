"""Broker facts: what RabbitMQ 3.10 (AMQP 1.0 plugin) and the Proton C example broker do, seen
with Proton-Python clients talking to them directly (no router).

Each test pins one behaviour that the router's connectors, autoLinks and link routes must cope
with (docs/brokers.md lists them with what the router does about each), so that a broker
upgrade that changes one is noticed here first.  Frames are read with Proton's frame tracer.
"""

import socket
import time

import pytest
from proton import (Collector, Connection, Delivery, Endpoint, Link, Message, Transport,
                    symbol)

from proton.reactor import AtMostOnce, LinkOption

from brokers import unique_name
from clients import Client

# no junctiond here: the sanitizer builds' runs leave these out (scripts/test)
pytestmark = pytest.mark.no_router


class DurableTerminus(LinkOption):
    """A target (sender) or source (receiver) with durability `durable` (0 none, 1
    configuration, 2 unsettled-state)."""

    def __init__(self, durable):
        self.durable = durable

    def apply(self, link):
        (link.target if link.is_sender else link.source).durability = self.durable


class RcvSettleSecond(LinkOption):
    """Ask for rcv-settle-mode second (the receiver settles after the sender)."""

    def apply(self, link):
        link.rcv_settle_mode = Link.RCV_SECOND

# RabbitMQ ends the whole session (not just the link) when it refuses an attach: each probe
# below uses a connection of its own.

UNLIMITED_FRAME = 4294967295


def traced(client, url, **kw):
    """A connection whose frames (after the open) are recorded as Proton's trace lines."""
    conn = client.connect(url, **kw)
    frames = []
    t = conn.pn.transport
    t.trace(Transport.TRACE_FRM)
    t.tracer = lambda _t, line: frames.append(line)
    return conn, frames


def incoming(frames, performative):
    return [f for f in frames if "<- @%s(" % performative in f]


def attach_answer(client, conn, link, timeout=5.0):
    """Wait until the broker answers an attach: by an attach, or by ending the link's session."""
    ssn = link.pn.session
    client.wait(lambda: not link.pn.state & Endpoint.REMOTE_UNINIT or
                ssn.state & Endpoint.REMOTE_CLOSED or conn.is_gone(), timeout,
                "the broker's answer to attach %s" % link.pn.name)


def refused_by_session_end(client, url, kind, address):
    """Attach `kind` ('snd'/'rcv') to address on a fresh connection: (link, session, conn)."""
    conn = client.connect(url)
    link = (conn.sender(address, wait=False) if kind == "snd"
            else conn.receiver(address, credit=1, wait=False))
    attach_answer(client, conn, link)
    client.run_for(0.2)
    return link, link.pn.session, conn


# ---- RabbitMQ -------------------------------------------------------------------------------

def test_rabbitmq_open(rabbitmq, client):
    """Container id is the cluster name: the node's name at the machine's host name (not the
    host part given in RABBITMQ_NODENAME); product/version in the properties; no failover
    list; no frame size limit; a 60 s idle timeout (the router must send heartbeats)."""
    conn = client.connect(rabbitmq.url)
    props = {str(k): v for k, v in (conn.remote_properties or {}).items()}
    assert conn.remote_container == props["cluster_name"]
    assert conn.remote_container == "%s@%s" % (rabbitmq.node.split("@")[0],
                                               socket.gethostname().split(".")[0])
    assert props["product"] == "RabbitMQ"
    assert props["version"].startswith("3.10."), props["version"]
    assert "failover-server-list" not in props
    t = conn.pn.transport
    assert t.remote_max_frame_size == UNLIMITED_FRAME
    assert t.remote_idle_timeout == 60.0
    assert not conn.remote_offered_capabilities


def test_rabbitmq_queue_addresses(rabbitmq, client):
    """/queue/NAME and a bare NAME are one queue, created by the first sender or receiver that
    attaches; /amq/queue/NAME needs the queue to exist."""
    name = unique_name()
    conn = client.connect(rabbitmq.url)
    snd = conn.sender("/queue/" + name)  # declares the queue
    dlv = snd.send(Message(body="via /queue"))
    assert snd.wait_outcome(dlv) == Delivery.ACCEPTED
    bare = conn.sender(name)
    dlv = bare.send(Message(body="via bare name"))
    assert bare.wait_outcome(dlv) == Delivery.ACCEPTED
    rcv = conn.receiver("/amq/queue/" + name, credit=5, settle="accept")
    assert rcv.pn.state & Endpoint.REMOTE_ACTIVE
    assert rcv.pn.remote_source.address == "/amq/queue/" + name
    assert [g.body for g in rcv.get_n(2)] == ["via /queue", "via bare name"]
    # A receiver on a bare name reads the same queue.
    rcv2 = conn.receiver(name, credit=5, settle="accept")
    dlv = snd.send(Message(body="third"))
    snd.wait_outcome(dlv)
    client.run_for(0.3)
    assert rcv.count + rcv2.count == 3


def test_rabbitmq_unroutable_message_accepted_and_dropped(rabbitmq, client):
    """A sender to /amq/queue/MISSING attaches, and its messages are ACCEPTED and dropped (no
    queue gets them); the same for an exchange with no matching binding."""
    name = unique_name()
    conn = client.connect(rabbitmq.url)
    snd = conn.sender("/amq/queue/" + name)
    assert snd.pn.state & Endpoint.REMOTE_ACTIVE
    assert snd.wait_outcome(snd.send(Message(body="lost"))) == Delivery.ACCEPTED
    ex = conn.sender("/exchange/amq.direct/" + name)
    assert ex.wait_outcome(ex.send(Message(body="lost too"))) == Delivery.ACCEPTED
    rcv = conn.receiver("/queue/" + name, credit=5)  # now the queue exists: empty
    client.run_for(0.5)
    assert rcv.count == 0


@pytest.mark.parametrize("kind,address,condition", [
    ("rcv", "/amq/queue/%s", "amqp:not-found"),
    ("snd", "/exchange/%s/key", "amqp:not-found"),
    ("rcv", "/exchange/%s/key", "amqp:not-found"),
    ("snd", "/bogus/%s", "amqp:invalid-field"),
    ("rcv", "/queue/", "amqp:invalid-field"),
])
def test_rabbitmq_refused_attach_ends_session(rabbitmq, client, kind, address, condition):
    """RabbitMQ refuses an attach by ending the session with an error: no attach, no detach;
    every other link on that session goes with it; the connection stays."""
    if "%s" in address:
        address = address % unique_name("missing")
    conn = client.connect(rabbitmq.url)
    other = conn.sender("/queue/" + unique_name())  # same (default) session
    link = (conn.sender(address, wait=False) if kind == "snd"
            else conn.receiver(address, credit=1, wait=False))
    attach_answer(client, conn, link)
    client.run_for(0.2)
    ssn = link.pn.session
    assert ssn.state & Endpoint.REMOTE_CLOSED
    assert other.pn.session.state & Endpoint.REMOTE_CLOSED
    assert ssn.remote_condition is not None and ssn.remote_condition.name == condition
    assert link.pn.state & Endpoint.REMOTE_UNINIT  # never answered with an attach
    assert conn.pn.state & Endpoint.REMOTE_ACTIVE  # the connection lives on
    # A new session on the same connection works.
    ssn2 = conn.pn.session()
    ssn2.open()
    snd = client.container.create_sender(ssn2, "/queue/" + unique_name(), name="after")
    client.wait(lambda: snd.state & Endpoint.REMOTE_ACTIVE, msg="attach on a new session")


def test_rabbitmq_attach_terms(rabbitmq, client):
    """The broker's sending end is unsettled (snd-settle-mode unsettled), offers the outcomes
    accepted, rejected and released (not modified), default outcome released; it grants a
    sender 65536 credit at once."""
    q = "/queue/" + unique_name()
    conn, frames = traced(client, rabbitmq.url)
    snd = conn.sender(q)
    snd.wait_credit(1)
    assert snd.credit == 65536
    assert snd.pn.remote_rcv_settle_mode == Link.RCV_FIRST
    rcv = conn.receiver(q, credit=3)
    assert rcv.pn.remote_snd_settle_mode == Link.SND_UNSETTLED
    attach = [f for f in incoming(frames, "attach") if rcv.pn.name in f][0]
    assert 'outcomes=@<symbol>[:"amqp:accepted:list", :"amqp:rejected:list", ' \
        ':"amqp:released:list"]' in attach
    assert "default-outcome=@released" in attach


def test_rabbitmq_flow_echo(rabbitmq, client):
    """After a receiver's attach, and after every flow the receiver sends, RabbitMQ sends a flow
    back with the same credit and available=0 (a flow the receiver did not ask for)."""
    q = "/queue/" + unique_name()
    conn, frames = traced(client, rabbitmq.url)
    rcv = conn.receiver(q, credit=0, auto_credit=False)
    rcv.flow(4)
    client.run_for(0.3)
    echoes = [f for f in incoming(frames, "flow") if "link-credit=0x4" in f]
    assert echoes and "available=0x0" in echoes[0] and "drain=false" in echoes[0]
    del frames[:]
    rcv.flow(2)
    client.run_for(0.3)
    assert [f for f in incoming(frames, "flow") if "link-credit=0x6" in f]


def test_rabbitmq_drain_on_empty_queue_ends_session(rabbitmq, client):
    """A drain on an empty queue gets a flow with drain=true but the credit NOT used up (the
    delivery-count does not advance), then the session ends with amqp:internal-error
    (function_clause in rabbit_classic_queue): RabbitMQ 3.10.8 cannot drain."""
    q = "/queue/" + unique_name()
    conn, frames = traced(client, rabbitmq.url)
    rcv = conn.receiver(q, credit=3, auto_credit=False)
    client.run_for(0.2)
    del frames[:]
    rcv.pn.drain(0)
    client.flush()
    ssn = rcv.pn.session
    client.wait(lambda: ssn.state & Endpoint.REMOTE_CLOSED, msg="the session's end")
    flows = [f for f in incoming(frames, "flow") if "drain=true" in f]
    assert flows and "link-credit=0x3" in flows[0] and "delivery-count=0x0" in flows[0]
    assert ssn.remote_condition.name == "amqp:internal-error"
    assert "send_drained" in ssn.remote_condition.description


def test_rabbitmq_credit_lowered(rabbitmq, client):
    """A receiver that lowers its credit (10, then 3 with the same delivery-count) gets 3."""
    q = "/queue/" + unique_name()
    conn = client.connect(rabbitmq.url)
    snd = conn.sender(q)
    rcv = conn.receiver(q, credit=0, auto_credit=False)
    rcv.flow(10)
    client.run_for(0.3)
    rcv.pn.flow(-7)
    client.flush()
    client.run_for(0.3)
    for i in range(10):
        snd.send(Message(id=i, body=i))
    client.run_for(1.0)
    assert rcv.count == 3


class HandDriver:
    """A Proton connection on a socket, read only when the test says so: transfers the broker
    sent stay in the socket while the test's flow goes out, as when a flow crosses transfers
    in flight."""

    def __init__(self, port):
        self.conn = Connection()
        self.conn.container = unique_name("hand")
        self.conn.hostname = "127.0.0.1"
        self.collector = Collector()
        self.conn.collect(self.collector)
        self.transport = Transport()
        self.transport.sasl().allowed_mechs("ANONYMOUS")
        self.transport.bind(self.conn)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.conn.open()

    def write(self):
        while self.transport.pending() > 0:
            n = self.transport.pending()
            self.sock.sendall(self.transport.peek(n))
            self.transport.pop(n)

    def receive(self):
        """Read once (waiting for it) what fits."""
        self.sock.settimeout(10)
        data = self.sock.recv(max(1, min(4096, self.transport.capacity())))
        assert data, "the broker closed the connection"
        self.transport.push(data)

    def read(self, seconds):
        """Write what is pending, then read for `seconds`."""
        self.write()
        end = time.monotonic() + seconds
        self.sock.settimeout(0.05)
        while time.monotonic() < end:
            try:
                data = self.sock.recv(max(1, min(4096, self.transport.capacity())))
            except socket.timeout:
                self.write()
                continue
            if not data:
                break
            self.transport.push(data)
            self.write()

    def close(self):
        self.sock.close()


def credit_in_steps(h, address):
    """On HandDriver h, a receiver from `address` granted 1000 credits, then 1 more five times
    while the transfers stream in (1005 in all); returns it after 2 s more of reading."""
    ssn = h.conn.session()
    ssn.open()
    rcv = ssn.receiver("overrun")
    rcv.source.address = address
    rcv.open()
    h.read(1.0)
    assert rcv.state & Endpoint.REMOTE_ACTIVE
    rcv.flow(1000)
    h.write()
    for at in (20, 60, 100, 140, 180):
        while rcv.queued < at:
            h.receive()
        rcv.flow(1)
        h.write()
    h.read(2.0)
    return rcv


@pytest.mark.deadline(150)  # up to five tries of 3000 messages
def test_rabbitmq_credit_overrun_when_a_flow_meets_a_busy_queue(rabbitmq, client):
    """A flow that reaches RabbitMQ while the queue is sending is applied from a delivery
    count ahead of the one the broker's link has sent (the queue process is ahead of the
    session's): the receiver gets more than the credit it granted.  Here: 1000 credits on a
    queue of 3000, then 1 more five times while the transfers stream in (1005 in all); more
    than 1005 arrive.  Whether a flow meets the queue ahead depends on timing: each try
    (a fresh queue) gets at least the credit granted, and the test skips, saying so, when
    none of five overran."""
    conn = client.connect(rabbitmq.url)
    got = []
    for _ in range(5):
        q = "/queue/" + unique_name()
        snd = conn.sender(q)
        dlvs = [snd.send(Message(body=i)) for i in range(3000)]
        assert snd.wait_outcomes(dlvs) == [Delivery.ACCEPTED] * 3000
        h = HandDriver(rabbitmq.port)
        try:
            # Proton counts what arrived (a receiver does not police the sender's credit)
            got.append(credit_in_steps(h, q).queued)
        finally:
            h.close()
        assert got[-1] >= 1005, got
        if got[-1] > 1005:
            return
    pytest.skip("RabbitMQ did not overrun the credit in 5 tries (%s received of 1005 "
                "granted): the flow never met the queue ahead on this run" % got)


def test_rabbitmq_detach_answered_without_closed(rabbitmq, client):
    """A closing detach (closed=true) is answered by a detach with closed=false: Proton sees a
    remote detach, not a remote close (the link stays REMOTE_ACTIVE)."""
    q = "/queue/" + unique_name()
    conn, frames = traced(client, rabbitmq.url)
    rcv = conn.receiver(q, credit=1)
    del frames[:]
    rcv.pn.close()
    client.flush()
    client.wait(lambda: incoming(frames, "detach"), msg="the broker's detach")
    detach = incoming(frames, "detach")[0]
    assert "closed=true" not in detach
    client.run_for(0.2)
    assert rcv.pn.state & Endpoint.REMOTE_ACTIVE
    assert not rcv.pn.state & Endpoint.REMOTE_CLOSED


def test_rabbitmq_presettled_both_ways(rabbitmq, client):
    """A presettled sender is answered snd-settle-mode settled; a receiver that asks for
    settled deliveries gets them settled."""
    q = "/queue/" + unique_name()
    conn = client.connect(rabbitmq.url)
    snd = conn.sender(q, presettled=True)
    assert snd.pn.remote_snd_settle_mode == Link.SND_SETTLED
    snd.send(Message(body="p"))
    rcv = conn.receiver(q, credit=1, options=[AtMostOnce()])
    assert rcv.pn.remote_snd_settle_mode == Link.SND_SETTLED
    got = rcv.get()
    assert got.body == "p" and got.delivery.settled


@pytest.mark.parametrize("kind", ["snd", "rcv"])
def test_rabbitmq_rcv_settle_second_ends_session(rabbitmq, client, kind):
    """rcv-settle-mode second is refused, by ending the session with amqp:not-implemented."""
    q = "/queue/" + unique_name()
    conn = client.connect(rabbitmq.url)
    link = (conn.sender(q, wait=False, options=[RcvSettleSecond()]) if kind == "snd" else
            conn.receiver(q, credit=1, wait=False, options=[RcvSettleSecond()]))
    attach_answer(client, conn, link)
    ssn = link.pn.session
    assert ssn.state & Endpoint.REMOTE_CLOSED
    assert ssn.remote_condition.name == "amqp:not-implemented"
    assert "rcv-settle-mode second" in ssn.remote_condition.description


def _four_deliveries(client, url, q):
    conn = client.connect(url)
    snd = conn.sender(q)
    for i in range(4):
        snd.wait_outcome(snd.send(Message(id=i, body="o%d" % i)))
    rcv = conn.receiver(q, credit=4, auto_credit=False)
    return conn, rcv, rcv.get_n(4)


def test_rabbitmq_outcomes(rabbitmq, client):
    """RELEASED puts the message back, delivered again with first-acquirer false but
    delivery-count still 0; REJECTED drops it (no dead-letter exchange by default)."""
    q = "/queue/" + unique_name()
    conn, rcv, got = _four_deliveries(client, rabbitmq.url, q)
    assert not any(g.delivery.settled for g in got)  # sent unsettled
    got[0].reject("app:bad", "no")
    got[1].release()
    got[2].accept()
    got[3].accept()
    rcv.flow(10)
    again = rcv.get()
    client.run_for(0.5)
    assert again.message.id == 1 and not rcv.queue
    assert again.message.delivery_count == 0
    assert again.message.first_acquirer is False and got[2].message.first_acquirer is True
    again.accept()


def test_rabbitmq_modified_ends_session(rabbitmq, client):
    """A MODIFIED disposition (not among the offered outcomes) ends the session with
    amqp:invalid-field 'Unrecognised state'; the message goes back to the queue."""
    q = "/queue/" + unique_name()
    conn, rcv, got = _four_deliveries(client, rabbitmq.url, q)
    got[0].accept()
    got[1].modify(failed=True)
    ssn = rcv.pn.session
    client.wait(lambda: ssn.state & Endpoint.REMOTE_CLOSED, msg="the session's end")
    assert ssn.remote_condition.name == "amqp:invalid-field"
    assert "Unrecognised state" in ssn.remote_condition.description
    other = client.connect(rabbitmq.url).receiver(q, credit=10, settle="accept")
    client.run_for(0.5)
    assert sorted(g.message.id for g in other.queue) == [1, 2, 3]


def test_rabbitmq_unsettled_requeued_when_client_vanishes(rabbitmq, client):
    """A delivery the receiver never settled goes back to the queue when its connection drops
    (socket closed without close frames); the redelivery has first-acquirer false,
    delivery-count 0."""
    q = "/queue/" + unique_name()
    conn = client.connect(rabbitmq.url)
    snd = conn.sender(q)
    snd.wait_outcome(snd.send(Message(id="u1", body="u1")))
    c2 = Client()
    try:
        r = c2.connect(rabbitmq.url).receiver(q, credit=1, auto_credit=False)
        got = r.get()
        assert not got.delivery.settled
        t = r.conn.pn.transport
        t.close_tail()
        t.close_head()
        c2.run_for(0.2)
    finally:
        c2.close()
    again = conn.receiver(q, credit=1, settle="accept").get()
    assert again.message.id == "u1"
    assert again.message.delivery_count == 0 and again.message.first_acquirer is False


def test_rabbitmq_message_sections_kept(rabbitmq, client):
    """Header, properties, application properties, message annotations and body come back
    equal, except first-acquirer, which the broker sets (true on a first delivery); a message
    without a header comes back with one (durable false, priority 4)."""
    q = "/queue/" + unique_name()
    conn = client.connect(rabbitmq.url)
    snd = conn.sender(q)
    m = full_message()
    m.instructions = None
    assert snd.wait_outcome(snd.send(m)) == Delivery.ACCEPTED
    rcv = conn.receiver(q, credit=1, settle="accept")
    got = rcv.get().message
    assert message_differences(m, got) == {"first_acquirer"}
    assert got.first_acquirer is True  # set by the broker on a first delivery
    bare = Message(body="bare")
    assert snd.wait_outcome(snd.send(bare)) == Delivery.ACCEPTED
    got = rcv.get()
    assert got.raw.startswith(b"\x00Sp")  # a header section first
    assert got.message.priority == 4 and got.message.durable is False


@pytest.mark.parametrize("with_header", [True, False])
def test_rabbitmq_delivery_annotations_close_connection(rabbitmq, client, with_header):
    """A message with delivery annotations makes RabbitMQ drop the whole connection, socket
    closed without a close frame (its log: amqp:internal-error, unexpected_trailing_sections):
    delivery annotations must never reach it."""
    conn = client.connect(rabbitmq.url)
    snd = conn.sender("/queue/" + unique_name())
    m = Message(body="x", instructions={symbol("x-opt-di"): "di"})
    if with_header:
        m.durable = True
    snd.send(m)
    conn.wait_closed_by_peer()
    assert not conn.remote_closed  # no close frame: the socket is dropped
    assert conn.transport_condition.name == "amqp:connection:framing-error"
    assert any("unexpected_trailing_sections" in line for line in rabbitmq.output())


@pytest.mark.deadline(180)  # a broker restart, and a recovery that is slow on a loaded machine
def test_rabbitmq_queue_durability_across_restart(rabbitmq, client):
    """/queue/NAME declares a non-durable queue unless the attaching terminus is durable
    (configuration or more): after the broker is killed and started again, a non-durable
    queue is gone with its messages, durable or not; a durable queue keeps its durable
    messages and loses the others.  Also checks the fixture: same port after a restart."""
    names = {}
    # A node SIGKILLed a second or two after declaring a durable queue sometimes comes back
    # without it (docs/brokers.md, "A broker that goes away"; this test saw it even with the
    # durable queue declared first): its declaration is made to last by a clean restart, the
    # kill below is what the messages and the non-durable queue go through.
    names[1] = unique_name()
    conn = client.connect(rabbitmq.url)
    snd = conn.sender("/queue/" + names[1], options=[DurableTerminus(1)])
    assert snd.pn.remote_target.durability == 1
    conn.close()
    rabbitmq.restart(pump=client.run_for)
    conn = client.connect(rabbitmq.url)
    for durable in (1, 0):
        names.setdefault(durable, unique_name())
        snd = conn.sender("/queue/" + names[durable], options=[DurableTerminus(durable)])
        assert snd.pn.remote_target.durability == durable
        for i, d in enumerate([True, False]):
            assert snd.wait_outcome(snd.send(Message(id=i, durable=d, body=i))) == \
                Delivery.ACCEPTED
    port = rabbitmq.port
    rabbitmq.kill()
    client.wait(conn.is_gone, msg="the connection to drop")
    rabbitmq.start()
    assert rabbitmq.port == port
    _, ssn, _ = refused_by_session_end(client, rabbitmq.url, "rcv", "/amq/queue/" + names[0])
    assert ssn.state & Endpoint.REMOTE_CLOSED
    assert ssn.remote_condition.name == "amqp:not-found"
    # RabbitMQ recovers durable queues after it says it has started: on a loaded machine an
    # attach may come first and find no queue yet, so it is tried again until the queue is back
    end = time.monotonic() + 60
    while True:
        conn = client.connect(rabbitmq.url)
        rcv = conn.receiver("/amq/queue/" + names[1], credit=10, settle="accept", wait=False)
        attach_answer(client, conn, rcv, timeout=20)
        ssn = rcv.pn.session
        if not ssn.state & Endpoint.REMOTE_CLOSED:
            break
        assert ssn.remote_condition.name == "amqp:not-found"
        assert time.monotonic() < end, "the durable queue was not recovered within 60 s"
        conn.close()
        time.sleep(0.5)
    # a queue just recovered may take a while to deliver on a loaded machine: wait for the
    # first message, then a moment more for any (wrong) second one
    client.wait(lambda: len(rcv.queue) > 0, 20, "the durable message")
    client.run_for(0.5)
    assert [g.message.id for g in rcv.queue] == [0]


def full_message():
    m = Message(id="mid-1", user_id=b"guest", address="to-x", subject="subj", reply_to="rt",
                correlation_id="cid", content_type="text/plain", content_encoding="enc",
                group_id="g", group_sequence=3, reply_to_group_id="rg", durable=True,
                priority=7, ttl=60, body={"a": 1}, properties={"ak": "av", "n": 5},
                annotations={symbol("x-opt-junction"): "ann"},
                instructions={symbol("x-opt-di"): "di"})
    m.creation_time = 1700000000.0
    return m


FIELDS = ("id", "user_id", "address", "subject", "reply_to", "correlation_id", "content_type",
          "content_encoding", "creation_time", "group_id", "group_sequence",
          "reply_to_group_id", "durable", "priority", "ttl", "first_acquirer",
          "delivery_count", "body", "properties", "annotations", "instructions")


def message_differences(a, b):
    return {f for f in FIELDS if getattr(a, f) != getattr(b, f)}


# ---- Proton C example broker ----------------------------------------------------------------

def test_proton_broker_open(proton_broker, client):
    """Container id is the broker's argv[0] (its path); no properties, no failover list, no
    frame size limit, no idle timeout."""
    conn = client.connect(proton_broker.url)
    assert conn.remote_container == str(proton_broker.binary)
    assert not conn.remote_properties
    t = conn.pn.transport
    assert t.remote_max_frame_size == UNLIMITED_FRAME
    assert t.remote_idle_timeout == 0.0


@pytest.mark.parametrize("address", ["plain", "/queue/x", "/amq/queue/x", "/exchange/e/k"])
def test_proton_broker_any_address_is_a_queue(proton_broker, client, address):
    """Every address is a queue of that exact name, made on first use."""
    q = address + "-" + unique_name()
    conn = client.connect(proton_broker.url)
    snd = conn.sender(q)
    assert snd.pn.remote_target.address == q
    assert snd.wait_outcome(snd.send(Message(body=q))) == Delivery.ACCEPTED
    rcv = conn.receiver(q, credit=1)
    assert rcv.pn.remote_source.address == q
    assert rcv.get().body == q


def test_proton_broker_credit_window(proton_broker, client):
    """A sender gets 5 credits and one more for each message the broker takes (accepted and
    settled at once)."""
    q = unique_name()
    conn = client.connect(proton_broker.url)
    snd = conn.sender(q)
    snd.wait_credit(1)
    assert snd.credit == 5
    dlvs = [snd.send(Message(body=i)) for i in range(12)]
    assert snd.wait_outcomes(dlvs) == [Delivery.ACCEPTED] * 12
    client.run_for(0.2)
    assert snd.credit == 5


def test_proton_broker_sends_presettled(proton_broker, client):
    """Deliveries to a receiver come settled (at most once), whatever the receiver asked: an
    outcome the receiver sends is ignored, and a message taken by a receiver that vanishes is
    gone."""
    q = unique_name()
    conn = client.connect(proton_broker.url)
    snd = conn.sender(q)
    for i in range(3):
        snd.wait_outcome(snd.send(Message(id=i, body=i)))
    c2 = Client()
    try:
        r = c2.connect(proton_broker.url).receiver(q, credit=2, auto_credit=False)
        assert r.pn.remote_snd_settle_mode == Link.SND_MIXED
        got = r.get_n(2)
        assert all(g.delivery.settled for g in got)
        got[0].release()  # ignored: nothing comes back
        t = r.conn.pn.transport
        t.close_tail()
        t.close_head()
        c2.run_for(0.2)
    finally:
        c2.close()
    rcv = conn.receiver(q, credit=10, settle="accept")
    client.run_for(0.5)
    assert [g.message.id for g in rcv.queue] == [2]


def test_proton_broker_settlement_modes(proton_broker, client):
    """Whatever a link asks, the broker answers snd-settle-mode mixed and rcv-settle-mode first
    (rcv-settle-mode second is taken and ignored: the broker settles at once)."""
    q = unique_name()
    conn = client.connect(proton_broker.url)
    snd = conn.sender(q, presettled=True)
    assert snd.pn.remote_snd_settle_mode == Link.SND_MIXED
    second = conn.sender(q, options=[RcvSettleSecond()])
    assert second.pn.remote_rcv_settle_mode == Link.RCV_FIRST
    dlv = second.send(Message(body="s"))
    assert second.wait_outcome(dlv) == Delivery.ACCEPTED
    rcv = conn.receiver(q, credit=1, options=[AtMostOnce()])
    assert rcv.pn.remote_snd_settle_mode == Link.SND_MIXED
    assert rcv.get().delivery.settled


def test_proton_broker_drain_never_answered(proton_broker, client):
    """A drain on an empty queue is never answered: no flow comes back, the credit stays."""
    q = unique_name()
    conn, frames = traced(client, proton_broker.url)
    rcv = conn.receiver(q, credit=3, auto_credit=False)
    client.run_for(0.2)
    del frames[:]
    rcv.pn.drain(0)
    client.flush()
    client.run_for(1.0)
    assert not incoming(frames, "flow")
    assert rcv.pn.credit == 3
    # The link still works: a message sent now arrives.
    snd = conn.sender(q)
    snd.send(Message(body="after drain"))
    assert rcv.get().body == "after drain"


def test_proton_broker_credit_lowered(proton_broker, client):
    """A receiver that lowers its credit (10, then 3) gets 3."""
    q = unique_name()
    conn = client.connect(proton_broker.url)
    rcv = conn.receiver(q, credit=0, auto_credit=False)
    rcv.flow(10)
    client.run_for(0.3)
    rcv.pn.flow(-7)
    client.flush()
    client.run_for(0.3)
    snd = conn.sender(q)
    for i in range(10):
        snd.send(Message(id=i, body=i))
    client.run_for(1.0)
    assert rcv.count == 3


def test_proton_broker_detach_answered_closed(proton_broker, client):
    """A closing detach is answered by a closing detach, without an error."""
    conn, frames = traced(client, proton_broker.url)
    rcv = conn.receiver(unique_name(), credit=1)
    del frames[:]
    rcv.close()
    detach = incoming(frames, "detach")
    assert detach and "closed=true" in detach[0] and "error" not in detach[0]
    assert rcv.pn.state & Endpoint.REMOTE_CLOSED


def test_proton_broker_message_bytes_kept(proton_broker, client):
    """The broker stores and forwards the message bytes as they came: every section, the
    delivery annotations too."""
    q = unique_name()
    conn = client.connect(proton_broker.url)
    snd = conn.sender(q)
    m = full_message()
    snd.wait_outcome(snd.send(m))
    got = conn.receiver(q, credit=1).get()
    assert got.raw == m.encode()


def test_proton_broker_restart_loses_everything(proton_broker, client):
    """Queues live in memory only: a killed and restarted broker has none (a receiver on the
    old queue gets nothing); it listens on the same port again."""
    q = unique_name()
    conn = client.connect(proton_broker.url)
    snd = conn.sender(q)
    snd.wait_outcome(snd.send(Message(body="before", durable=True)))
    port = proton_broker.port
    proton_broker.kill()
    client.wait(conn.is_gone, msg="the connection to drop")
    proton_broker.start()
    assert proton_broker.port == port
    rcv = client.connect(proton_broker.url).receiver(q, credit=1)
    client.run_for(0.5)
    assert rcv.count == 0


def test_proton_broker_receiver_without_address_crashes_it(make_proton_broker, client):
    """A receiver with no source address (as a dynamic or anonymous one) makes the broker
    crash (it looks up a queue named NULL): the router must never attach one to it."""
    b = make_proton_broker()
    conn = client.connect(b.url)
    conn.receiver(None, credit=1, wait=False)
    client.wait(lambda: conn.is_gone(), msg="the broker to drop the connection")
    b.proc.wait(5)
    assert b.proc.returncode < 0  # killed by a signal (SIGSEGV)


# ---- both ----------------------------------------------------------------------------------

@pytest.mark.parametrize("broker", ["rabbitmq", "proton_broker"])
def test_small_max_frame_honoured(request, client, broker):
    """Both brokers announce no frame size limit of their own, and both keep to the client's
    (512 bytes): a 20 KB message goes each way in many frames."""
    b = request.getfixturevalue(broker)
    q = ("/queue/" if broker == "rabbitmq" else "") + unique_name()
    conn, frames = traced(client, b.url, max_frame_size=512)
    snd = conn.sender(q)
    body = "m" * 20000
    assert snd.wait_outcome(snd.send(Message(body=body))) == Delivery.ACCEPTED
    del frames[:]
    got = conn.receiver(q, credit=1, settle="accept").get()
    assert got.body == body
    transfers = incoming(frames, "transfer")
    assert len(transfers) >= 20000 // 512
