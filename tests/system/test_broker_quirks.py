"""What the router does about RabbitMQ's quirks (docs/brokers.md R6, R9, R13, R14;
router/peer_quirks.c; docs/decisions/0007), against the real RabbitMQ (brokers.py).

The router knows RabbitMQ by the `product` property of its open.  Toward it, on autoLinks
(waypoints) and on link-routed links:
* a client's MODIFIED goes as RELEASED (MODIFIED ends RabbitMQ's session, R9);
* delivery annotations are stripped (they make RabbitMQ drop the connection, R13);
* no drain is sent (a drain on an empty queue ends the session, R6): an autoLink's credit is
  taken back by lowering it, and a link-routed client's drain is answered by the router.
Each test would see the session or the connection end without the rule.
"""

import time

import pytest
from proton import Delivery, Endpoint, Message, symbol

from brokers import (autolink_states, linkroute_router, opened_count, unique_name,
                     wait_autolinks, waypoint_router)
from clients import Client
from mgmt_tool import Node
from test_brokers import DurableTerminus, attach_answer

ACTIVE = {"out": "active", "in": "active"}
SESSION_END = "Auto link's session ended by the peer"


def states(node):
    return autolink_states(node.query_dicts("autoLink"))


def wait_active(node, timeout=30.0):
    wait_autolinks(lambda: node.query_dicts("autoLink"), ACTIVE, timeout)


def stays_active(c, node, r, seconds):
    """Both autoLinks stay active for `seconds`, and no session of theirs ended."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        assert states(node) == ACTIVE
        c.run_for(0.2)
    ended = [x for x in r.stderr_lines() if SESSION_END in x]
    assert not ended, ended


def with_da(body):
    m = Message(body=body, durable=True)
    m.instructions = {symbol("x-opt-test-da"): "dropped on the way"}
    return m


# ---- autoLinks (waypoint) ---------------------------------------------------------------------

@pytest.fixture
def waypoint(rabbitmq, make_router):
    """A router whose address of its own is a waypoint to RabbitMQ, its autoLinks active:
    (address, router, management node, client); the client and the node are closed after."""
    q = unique_name("wp")
    r = waypoint_router(make_router, rabbitmq, q)
    node = Node(r.url)
    c = Client()
    try:
        wait_active(node)
        yield q, r, node, c
    finally:
        c.close()
        node.close()


def test_rabbitmq_waypoint_modified_goes_as_released(waypoint):
    """A consumer's MODIFIED reaches RabbitMQ as RELEASED: the autoLinks' session survives
    (before, RabbitMQ ended it, taking the out autoLink down with the in one), and the message
    comes again."""
    q, r, node, c = waypoint
    conn = c.connect(r.url)
    snd = conn.sender(q)
    d = snd.send(Message(body="m"))
    assert snd.wait_outcome(d) == d.ACCEPTED
    rcv = conn.receiver(q, credit=2)
    first = rcv.get(timeout=15)
    first.modify(failed=True)
    again = rcv.get(timeout=15)
    assert again.body == "m"
    assert again.message.first_acquirer is False  # redelivered (R10)
    again.accept()
    stays_active(c, node, r, 1.5)
    # the out autoLink still takes messages
    d2 = snd.send(Message(body="after"))
    assert snd.wait_outcome(d2) == d2.ACCEPTED
    assert rcv.get(timeout=15).body == "after"


def test_rabbitmq_waypoint_consumer_gone_with_a_message(waypoint):
    """A consumer that goes away holding an unsettled waypoint message: the router gives the
    message back to RabbitMQ as RELEASED (its own MODIFIED for a lost delivery would end the
    autoLinks' session), and the next consumer gets it."""
    q, r, node, c = waypoint
    conn = c.connect(r.url)
    snd = conn.sender(q)
    d = snd.send(Message(body="held"))
    assert snd.wait_outcome(d) == d.ACCEPTED
    gone = c.connect(r.url)
    assert gone.receiver(q, credit=1).get(timeout=15).body == "held"
    gone.close()
    rcv = conn.receiver(q, credit=2)
    m = rcv.get(timeout=15)
    assert m.body == "held" and m.message.first_acquirer is False
    m.accept()
    stays_active(c, node, r, 1.0)


def test_rabbitmq_waypoint_delivery_annotations_stripped(rabbitmq, waypoint):
    """A producer's message with delivery annotations goes to RabbitMQ without them: RabbitMQ
    takes it (before, it dropped the connection and every autoLink on it)."""
    q, r, node, c = waypoint
    before = opened_count(r, rabbitmq)
    conn = c.connect(r.url)
    snd = conn.sender(q)
    d = snd.send(with_da("da"))
    assert snd.wait_outcome(d, timeout=15) == d.ACCEPTED
    rcv = conn.receiver(q, credit=2)
    got = rcv.get(timeout=15)
    assert got.body == "da" and not got.message.instructions
    assert got.message.durable is True
    got.accept()
    stays_active(c, node, r, 1.0)
    assert opened_count(r, rabbitmq) == before


def test_rabbitmq_waypoint_consumer_leaving_sends_no_drain(waypoint):
    """When a waypoint's last consumer leaves, the router takes the in autoLink's credit back
    by lowering it, not by a drain (a drain on an empty queue ends RabbitMQ's session, R6);
    messages sent meanwhile wait in the queue for the next consumer."""
    q, r, node, c = waypoint
    conn = c.connect(r.url)
    for round_ in range(2):
        rcv = conn.receiver(q, credit=5)
        c.run_for(0.5)  # the in autoLink gets credit
        rcv.close()
        stays_active(c, node, r, 1.5)
    snd = conn.sender(q)
    d = snd.send(Message(body="later"))
    assert snd.wait_outcome(d) == d.ACCEPTED
    c.run_for(0.5)
    rcv = conn.receiver(q, credit=5)
    m = rcv.get(timeout=15)
    assert m.body == "later"
    m.accept()


# ---- link routes ------------------------------------------------------------------------------

@pytest.mark.deadline(90)
def test_rabbitmq_link_route_modified_goes_as_released(rabbitmq, make_router):
    """A link-routed consumer's MODIFIED reaches RabbitMQ as RELEASED: the message comes
    again on the same link (before, RabbitMQ ended the link's session and the client's link
    was detached with its error)."""
    r = linkroute_router(make_router, rabbitmq)
    queue = "lrq." + unique_name()
    c = Client()
    try:
        conn = c.connect(r.url)
        snd = conn.sender(queue)
        d = snd.send(Message(body="m"))
        assert snd.wait_outcome(d) == Delivery.ACCEPTED
        rcv = conn.receiver(queue, credit=5)
        rcv.get().modify(failed=True, undeliverable=False)
        again = rcv.get()
        assert again.body == "m" and again.message.first_acquirer is False
        again.accept()
        c.run_for(0.5)
        assert not rcv.is_remote_closed() and rcv.remote_condition is None
    finally:
        c.close()


@pytest.mark.deadline(90)
def test_rabbitmq_link_route_delivery_annotations_stripped(rabbitmq, make_router):
    """A link-routed message with delivery annotations reaches RabbitMQ without them, in one
    frame or in many: RabbitMQ takes it (before, it dropped the connection and every
    link-routed link with it)."""
    r = linkroute_router(make_router, rabbitmq)
    queue = "lrq." + unique_name()
    before = opened_count(r, rabbitmq)
    c = Client()
    try:
        conn = c.connect(r.url, max_frame_size=512)
        snd = conn.sender(queue)
        big = "x" * 5000  # in about ten transfer frames
        dlvs = [snd.send(with_da("small")), snd.send(with_da(big))]
        assert snd.wait_outcomes(dlvs, timeout=15) == [Delivery.ACCEPTED] * 2
        rcv = conn.receiver(queue, credit=5)
        got = rcv.get_n(2)
        assert [m.body for m in got] == ["small", big]
        for m in got:
            assert not m.message.instructions and m.message.durable is True
            m.accept()
        c.run_for(0.5)
        assert not snd.is_remote_closed() and not rcv.is_remote_closed()
        assert opened_count(r, rabbitmq) == before
    finally:
        c.close()


@pytest.mark.deadline(90)
def test_rabbitmq_link_route_drain_answered_by_the_router(rabbitmq, make_router):
    """A link-routed client's drain on an empty RabbitMQ queue completes (its credit comes
    back to 0) and the link lives on (before, the drain went to RabbitMQ, which ended the
    link's session).  A message that arrives later waits at the router for the client's
    next credit."""
    r = linkroute_router(make_router, rabbitmq)
    queue = "lrq." + unique_name()
    c = Client()
    try:
        conn = c.connect(r.url)
        rcv = conn.receiver(queue, credit=3, auto_credit=False)
        c.run_for(0.5)  # the credit reaches RabbitMQ
        for _ in range(2):
            rcv.pn.drain(0)
            c.flush()
            c.wait(lambda: rcv.pn.credit == 0 or rcv.is_remote_closed(), 10, "the drain's answer")
            assert not rcv.is_remote_closed(), rcv.remote_condition
            assert rcv.count == 0
            rcv.flow(2)
        c.run_for(1.0)
        assert not rcv.is_remote_closed() and rcv.remote_condition is None
        snd = conn.sender(queue)
        d = snd.send(Message(body="after drain"))
        assert snd.wait_outcome(d) == Delivery.ACCEPTED
        m = rcv.get(timeout=15)
        assert m.body == "after drain"
        m.accept()
        # drained again, a message comes for the credit RabbitMQ still has: it waits at the
        # router; the client detaches: RabbitMQ gets it back (never settled) for the next one
        rcv.pn.drain(0)
        c.flush()
        c.wait(lambda: rcv.pn.credit == 0, 10, "the drain's answer")
        d = snd.send(Message(body="held"))
        assert snd.wait_outcome(d) == Delivery.ACCEPTED
        c.run_for(0.5)
        assert rcv.count == 1
        rcv.close()
        rcv2 = conn.receiver(queue, credit=5)
        m = rcv2.get(timeout=15)
        assert m.body == "held"
        m.accept()
    finally:
        c.close()


@pytest.mark.deadline(90)
def test_proton_broker_link_route_drain_is_passed_on(proton_broker, make_router):
    """The Proton example broker never answers a drain (docs/brokers.md P5); the router does
    nothing special for it (decision 0007): the drain goes to the broker, the client's credit
    stays, and the link keeps working, as if the client were attached to the broker."""
    r = linkroute_router(make_router, proton_broker)
    queue = "lrq." + unique_name()
    c = Client()
    try:
        conn = c.connect(r.url)
        rcv = conn.receiver(queue, credit=3, auto_credit=False)
        c.run_for(0.3)
        rcv.pn.drain(0)
        c.flush()
        c.run_for(1.0)
        assert rcv.pn.credit == 3 and not rcv.is_remote_closed()
        snd = conn.sender(queue)
        d = snd.send(Message(body="after drain"))
        assert snd.wait_outcome(d) == Delivery.ACCEPTED
        assert rcv.get(timeout=10).body == "after drain"
    finally:
        c.close()


# ---- a broker fact behind the durability rule (no router) ---------------------------------------

@pytest.mark.no_router
def test_rabbitmq_durability_must_match_an_existing_queue(rabbitmq, client):
    """/queue/NAME refuses an attach whose terminus durability differs from the existing
    queue's (amqp:precondition-failed, ending the session), both ways, while /amq/queue/NAME
    takes any durability: so the router's autoLinks keep qdrouterd's non-durable terminus
    (a durable one would lose every queue qdrouterd or a client declared), and a durable queue
    is reached with externalAddress /amq/queue/NAME (docs/brokers.md R14)."""
    for have, ask in ((0, 2), (2, 0)):
        name = unique_name()
        conn = client.connect(rabbitmq.url)
        made = conn.sender("/queue/" + name, options=[DurableTerminus(have)])
        d = made.send(Message(body=1))
        assert made.wait_outcome(d) == Delivery.ACCEPTED
        conn2 = client.connect(rabbitmq.url)
        other = conn2.sender("/queue/" + name, options=[DurableTerminus(ask)], wait=False)
        attach_answer(client, conn2, other)
        ssn = other.pn.session
        client.wait(lambda: ssn.state & Endpoint.REMOTE_CLOSED, msg="the session's end")
        assert ssn.remote_condition.name == "amqp:precondition-failed"
        assert "inequivalent arg 'durable'" in ssn.remote_condition.description
        conn3 = client.connect(rabbitmq.url)
        amq = conn3.receiver("/amq/queue/" + name, options=[DurableTerminus(ask)], credit=1)
        assert amq.get(timeout=10).body == 1
