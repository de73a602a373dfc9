"""Credit that goes down (issue 15, point 8): a receiver may lower its link credit at any time
(a flow whose delivery-count + link-credit is below the limit it granted before, which AMQP
allows); the router then sends no more than the new credit, and never stops with credit left.

Proton's receivers lower credit with a negative `flow()`: Proton-Python's flow controller
(MessagingHandler's prefetch) does it when a receiver was given credit twice - it tops the
link up to its window after every delivery, and a link holding twice the window gets a
negative top-up.  The tests do the same by hand, on message-routed links, on a waypoint's
in-autoLink (the consumer receives the broker's queue through the router) and on a
link-routed link, and run the same client against qdrouterd 1.19 (../shared/peer), which
stops sending on such a link with credit left.
"""

import time

import pytest
from proton import Message

from clients import Client
from conftest import free_port
from test_autolink import autolink_router, brokers, wait_states  # noqa: F401 (a fixture)
from mgmt_tool import Node
from meshnet import stop_process
from qdr_peer import start_standalone

def rest_once(c, rcv, prefix):
    """After lowered_then_raised: granted enough, rcv gets the other ten of the twenty
    (prefix0..prefix19) once each, accepts them, and nothing more comes."""
    rcv.pn.flow(100)
    got = rcv.get_n(10, timeout=15)
    assert sorted(m.body for m in got) == sorted("%s%d" % (prefix, i) for i in range(10, 20))
    for m in got:
        m.accept()
    c.run_for(0.5)
    assert len(rcv.queue) == 0


def lowered_then_raised(client, rcv, produce, settle=True, patience=5.0):
    """The receiver grants 10, lowers it to 2 before anything is there, then the messages
    come (`produce()`), then it grants 5 more and 3 more.  Returns how many messages it held
    after each step: the router must give exactly 2, 7, 10.  Each step waits (up to
    `patience` seconds) for what the credit allows, then half a second more for any extra."""
    rcv.pn.flow(10)
    client.run_for(0.3)
    rcv.pn.flow(-8)  # credit lowered from 10 to 2
    client.run_for(0.3)
    produce()
    counts = []
    for more, want in ((0, 2), (5, 7), (3, 10)):
        if more:
            rcv.pn.flow(more)
        client.run_for(patience, stop=lambda: len(rcv.queue) >= want)
        client.run_for(0.5)
        counts.append(len(rcv.queue))
    if settle:
        for m in rcv.drain_queue():
            m.accept()
        client.run_for(0.2)
    return counts


def test_message_routed_link_honours_lowered_credit(router, client):
    conn = client.connect(router.url)
    rcv = conn.receiver("low.q", credit=0, auto_credit=False)
    snd = client.connect(router.url).sender("low.q")
    snd.wait_credit(1)

    def produce():
        for i in range(20):
            snd.send(Message(body=i))

    assert lowered_then_raised(client, rcv, produce) == [2, 7, 10]
    # the rest is still there for the credit that comes
    rcv.pn.flow(100)
    got = rcv.get_n(10)
    assert [m.body for m in got] == list(range(10, 20))


def test_credit_granted_twice_then_half_taken_back(router, client):
    """Proton-Python's flow controller on a receiver given its window twice: 2N credit, then
    after the first delivery a top-up of -N (back to the window), then +1 per delivery.
    Every message arrives, in order, while the receiver never grants more than it had."""
    n, total = 10, 60
    conn = client.connect(router.url)
    rcv = conn.receiver("twice.q", credit=0, auto_credit=False)
    snd = client.connect(router.url).sender("twice.q")
    snd.wait_credit(1)
    dlvs = [snd.send(Message(body=i)) for i in range(total)]  # they wait at the router
    rcv.pn.flow(n)
    client.flush()
    rcv.pn.flow(n)
    client.flush()
    got, lowered = [], False
    end = time.monotonic() + 10
    while len(got) < total and time.monotonic() < end:
        client.run_for(0.02)
        while rcv.queue:
            m = rcv.queue.popleft()
            got.append(m.body)
            m.accept()
            if not lowered:
                rcv.pn.flow(-n)
                lowered = True
            top = n - rcv.pn.credit
            if top > 0:
                rcv.pn.flow(top)
            client.flush()
    assert got == list(range(total)), "got %d of %d, receiver credit %d" % (
        len(got), total, rcv.pn.credit)
    assert snd.wait_outcomes(dlvs) == [dlvs[0].ACCEPTED] * total


def test_lowered_to_what_is_in_flight_sends_nothing_more(router, client):
    """Credit lowered to zero left (delivery-count + credit = what was already sent): nothing
    more comes, however long the receiver waits; a later grant gets exactly that many."""
    conn = client.connect(router.url)
    rcv = conn.receiver("zero.q", credit=0, auto_credit=False)
    snd = client.connect(router.url).sender("zero.q")
    snd.wait_credit(1)
    for i in range(10):
        snd.send(Message(body=i))
    rcv.pn.flow(3)
    got = rcv.get_n(3)
    rcv.pn.flow(5)
    rcv.pn.flow(-5)  # the same flow frame: link-credit 0
    client.run_for(1.0)
    assert len(rcv.queue) == 0
    rcv.pn.flow(4)
    client.run_for(5.0, stop=lambda: len(rcv.queue) >= 4)
    client.run_for(0.5)
    assert [m.body for m in got + rcv.drain_queue()] == list(range(7))


def test_waypoint_consumer_honours_lowered_credit(make_router, brokers):
    """The consumer receives the broker's queue through the in-autoLink (phase 1)."""
    r = autolink_router(make_router)
    node = Node(r.url)
    c = Client()
    try:
        b = brokers(r.url_of(1))
        wait_states(node, {"q-out": "active", "q-in": "active"})
        conn = c.connect(r.url)
        rcv = conn.receiver("queue", credit=0, auto_credit=False)
        snd = conn.sender("queue")

        def produce():
            # producer -> out autoLink -> the broker's queue -> in autoLink -> consumer
            dlvs = [snd.send(Message(body="w%d" % i)) for i in range(20)]
            assert snd.wait_outcomes(dlvs) == [dlvs[0].ACCEPTED] * 20

        assert lowered_then_raised(c, rcv, produce) == [2, 7, 10]
        b.wait_line("outcome w9 accepted", client=c)
        # what the consumer had no credit for is the broker's still (sent to the router,
        # unsettled there): it comes with more credit, none lost or sent twice
        rcv.pn.flow(100)
        assert [m.body for m in rcv.get_n(10)] == ["w%d" % i for i in range(10, 20)]
        c.run_for(0.5)
        assert len(rcv.queue) == 0
        assert sum(1 for x in b.lines if x.startswith("sent queue w")) == 20, b.lines
    finally:
        c.close()
        node.close()


@pytest.mark.parametrize("kind", ["rabbitmq", "proton_broker"])
def test_waypoint_through_a_real_broker_honours_lowered_credit(kind, request, make_router):
    """The same through a connector to RabbitMQ and to the Proton example broker."""
    from brokers import unique_name, waypoint_router
    from test_autolink_brokers import ACTIVE
    from test_autolink_brokers import wait_states as wait_broker_states
    broker = request.getfixturevalue(kind)
    q = unique_name("low")
    r = waypoint_router(make_router, broker, q)
    node = Node(r.url)
    c = Client()
    try:
        wait_broker_states(node, ACTIVE, timeout=30)
        conn = c.connect(r.url)
        rcv = conn.receiver(q, credit=0, auto_credit=False)
        snd = conn.sender(q)

        def produce():
            dlvs = [snd.send(Message(body="r%d" % i, durable=True)) for i in range(20)]
            assert snd.wait_outcomes(dlvs, timeout=30) == [dlvs[0].ACCEPTED] * 20

        assert lowered_then_raised(c, rcv, produce) == [2, 7, 10]
        rest_once(c, rcv, "r")
    finally:
        c.close()
        node.close()


@pytest.mark.parametrize("kind", ["rabbitmq", "proton_broker"])
def test_link_routed_receiver_on_a_real_broker_honours_lowered_credit(kind, request,
                                                                      make_router):
    """A link-routed receiver on a queue of RabbitMQ and of the Proton example broker (both
    honour lowered credit themselves: docs/brokers.md R7, P6) gets exactly its new credit,
    then what it grants after, and the rest once it grants enough, every message once."""
    from brokers import linkroute_router, unique_name
    broker = request.getfixturevalue(kind)
    r = linkroute_router(make_router, broker, "lowlr", ("lowIn", "lowOut"))
    q = "lowlr.%s" % unique_name()
    c = Client()
    try:
        rcv = c.connect(r.url).receiver(q, credit=0, auto_credit=False)
        c.wait(lambda: rcv.pn.remote_source.address == q, 15, "the routed attach's answer")
        direct = c.connect(broker.url).sender(q)  # RabbitMQ: a bare name is a queue (R1)

        def produce():
            dlvs = [direct.send(Message(body="l%d" % i)) for i in range(20)]
            assert direct.wait_outcomes(dlvs, timeout=30) == [dlvs[0].ACCEPTED] * 20

        assert lowered_then_raised(c, rcv, produce) == [2, 7, 10]
        rest_once(c, rcv, "l")
    finally:
        c.close()


def test_link_routed_receiver_lowering_credit_with_proton(make_router):
    """The link-routed case with Proton's negative flow (test_linkroute.py has it with raw
    frames): the broker had the old credit, the client gets the new one."""
    from conftest import router_entities
    from test_linkroute import BROKER_ID, LINK_ROUTES, Broker
    r = make_router(entities=router_entities(
        listeners=[{"host": "127.0.0.1", "port": "0"},
                   {"host": "127.0.0.1", "port": "0", "role": "route-container",
                    "name": "brokers"}], extra=LINK_ROUTES))
    b = Broker(r.url_of(1))
    b.start()
    c = Client()
    try:
        assert b.opened.wait(10), "the broker did not connect"
        r.wait_log(r"Link routes activated: \d+ \(container %s\)" % BROKER_ID)
        rcv = c.connect(r.url_of(0)).receiver("lr.out.lowp", credit=0, auto_credit=False)

        def produce():
            for i in range(20):
                b.put("lr.out.lowp", "p%d" % i)

        assert lowered_then_raised(c, rcv, produce) == [2, 7, 10]
    finally:
        c.close()
        b.stop()


# ---------------------------------------------------------------- qdrouterd 1.19 beside it

def start_qdrouterd(tmp_path):
    port = free_port()
    p = start_standalone(tmp_path / "qdrouterd.json", [
        ["router", {"mode": "standalone", "id": "peer"}],
        ["listener", {"host": "127.0.0.1", "port": str(port)}]], port)
    return p, "amqp://127.0.0.1:%d" % port


def lowered_counts(url):
    c = Client()
    try:
        conn = c.connect(url)
        rcv = conn.receiver("low.q", credit=0, auto_credit=False)
        snd = c.connect(url).sender("low.q")
        snd.wait_credit(1)

        def produce():
            for i in range(20):
                snd.send(Message(body=i))

        counts = lowered_then_raised(c, rcv, produce, settle=False, patience=2.0)
        return counts, rcv.pn.credit
    finally:
        c.close()


def test_qdrouterd_stalls_with_credit_left_where_junction_does_not(router, tmp_path):
    p, url = start_qdrouterd(tmp_path)
    try:
        theirs, their_credit = lowered_counts(url)
    finally:
        stop_process(p)
    mine, my_credit = lowered_counts(router.url)
    print("qdrouterd 1.19:", theirs, "credit left", their_credit)
    print("junctiond:", mine, "credit left", my_credit)
    # qdrouterd sends the 2 the lowered credit allows, then nothing, with 8 credit left
    assert theirs == [2, 2, 2] and their_credit == 8, (theirs, their_credit)
    assert mine == [2, 7, 10] and my_credit == 0, (mine, my_credit)
