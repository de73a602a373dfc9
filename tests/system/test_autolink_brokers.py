"""autoLinks over a connector, against the real brokers (brokers.py: RabbitMQ and the Proton C
example broker; their quirks are in docs/brokers.md).

The router connects to the broker with a route-container connector; a waypoint address and an
out and an in autoLink naming the connector (`connection`) take producers' messages to the
broker's queue and bring them back to consumers through the router, outcomes end to end.  The
autoLinks go inactive when the broker is killed and active again once it is back and the
connector has reconnected.  The external address is `/queue/NAME` (RabbitMQ declares the
queue with it; the Proton broker takes it as a plain queue name).
"""

import time

import pytest
from proton import Delivery, Message

from brokers import (OPENED, autolink_states, connector_to, unique_name, wait_autolinks,
                     waypoint_router)
from clients import Client
from mgmt_tool import Node

# the connector retries 5 s after a failed attempt; RabbitMQ takes seconds to start
BACK_TIMEOUT = 60.0


def autolinks(r):
    """The router's autoLink rows, on a management connection of their own.

    A connection is made per query because the tests block for long stretches without
    pumping it (`broker.restart()`: a RabbitMQ start takes more than the router's 16 s idle
    timeout on a loaded machine), and a BlockingConnection sends its heartbeats only while it
    is pumped: a connection kept open across such a step is closed by the router."""
    node = Node(r.url)
    try:
        return node.query_dicts("autoLink")
    finally:
        node.close()


def wait_states(r, want, timeout=20.0):
    wait_autolinks(lambda: autolinks(r), want, timeout)


ACTIVE = {"out": "active", "in": "active"}
INACTIVE = {"out": "inactive", "in": "inactive"}


def round_trip(c, conn, q, bodies, settled_by_broker):
    """Send `bodies` to waypoint q (each ACCEPTED by the broker), receive them back."""
    snd = conn.sender(q)
    for body in bodies:
        d = snd.send(Message(body=body, durable=True))
        assert snd.wait_outcome(d) == d.ACCEPTED, body
    rcv = conn.receiver(q, credit=len(bodies) + 1)
    got = [rcv.get(timeout=15) for _ in bodies]
    assert sorted(m.body for m in got) == sorted(bodies)
    if settled_by_broker:
        return rcv, got
    # RabbitMQ waits for the consumer's outcome: a released message comes again, through
    # the router, and an accepted one is gone from the queue
    again = got[0]
    again.release()
    m = rcv.get(timeout=15)
    assert m.body == again.body
    for x in got[1:] + [m]:
        x.accept()
    c.run_for(0.5)
    with pytest.raises(Exception):
        rcv.get(timeout=1)
    return rcv, got


# RabbitMQ on the release build only: the router's autoLinks over a connector, their loss and
# return run on every build with the Proton broker, and with RabbitMQ in the tests below; a
# consumer's outcomes passed back to the broker run on every build in test_autolink.py (the
# fake broker), so what this case adds is RabbitMQ's own redelivery of a RELEASED message.
@pytest.mark.parametrize("kind", [pytest.param("rabbitmq", marks=pytest.mark.release_only),
                                  "proton_broker"])
def test_autolinks_through_a_connector_to_a_real_broker(kind, request, make_router):
    broker = request.getfixturevalue(kind)
    q = unique_name("wp")
    r = waypoint_router(make_router, broker, q)
    c = Client()
    try:
        wait_states(r, ACTIVE, timeout=30)
        conn = c.connect(r.url)
        # the Proton broker sends its deliveries settled (docs/brokers.md P2)
        round_trip(c, conn, q, ["a-1", "a-2", "a-3"], kind == "proton_broker")
        conn.close()  # its consumer would take a share of what comes later

        # the broker dies: both autoLinks go inactive; it comes back: active again
        broker.kill()
        wait_states(r, INACTIVE)
        broker.restart()
        wait_states(r, ACTIVE, timeout=BACK_TIMEOUT)
        conn2 = c.connect(r.url)
        round_trip(c, conn2, q, ["b-1", "b-2"], kind == "proton_broker")
        rows = {x["name"]: x for x in autolinks(r)}
        assert rows["in"]["connection"] == "broker" and rows["in"]["phase"] == 1
        assert rows["out"]["externalAddress"] == "/queue/" + q
    finally:
        c.close()


def test_normal_role_connector_gets_no_autolinks(proton_broker, make_router):
    # as qdrouterd's route_control.c: only route-container connections get autoLinks
    q = unique_name("wp")
    r = make_router(extra=[
        connector_to(proton_broker, role="normal"),
        ["address", {"prefix": q, "waypoint": True}],
        ["autoLink", {"name": "out", "address": q, "direction": "out", "connection": "broker"}],
    ])
    r.wait_log(OPENED % proton_broker.port)
    time.sleep(0.5)
    assert autolink_states(autolinks(r)) == {"out": "inactive"}


def test_rabbitmq_session_end_fails_the_autolink_and_it_comes_back(rabbitmq, make_router):
    # RabbitMQ refuses an attach to a queue that does not exist by ending the session, with no
    # detach (docs/brokers.md R3): the autoLink is failed with the broker's error, attached
    # again later, and active once the queue exists.  (A consumer's MODIFIED no longer ends
    # it: it goes as RELEASED, test_broker_quirks.py.)
    q = unique_name("wp")
    r = make_router(extra=[
        connector_to(rabbitmq),
        ["address", {"prefix": q, "waypoint": True}],
        ["autoLink", {"name": "in", "address": q, "direction": "in", "connection": "broker",
                      "externalAddress": "/amq/queue/" + q}],
    ])
    c = Client()
    try:
        wait_states(r, {"in": "failed"}, timeout=30)
        err = [x["lastError"] for x in autolinks(r) if x["name"] == "in"][0]
        assert err and "NOT_FOUND" in err, err
        # the queue is made (by a sender straight to the broker): the autoLink comes back
        direct = c.connect(rabbitmq.url)
        snd = direct.sender("/queue/" + q)
        d = snd.send(Message(body="m"))
        assert snd.wait_outcome(d) == d.ACCEPTED
        wait_states(r, {"in": "active"}, timeout=20)
        conn = c.connect(r.url)
        rcv = conn.receiver(q, credit=2)
        m = rcv.get(timeout=15)
        assert m.body == "m"
        m.accept()
    finally:
        c.close()


def test_rabbitmq_consumer_leaving_keeps_the_autolinks(rabbitmq, make_router):
    # when the waypoint's last consumer goes, the in autoLink's credit is taken back with a
    # flow of zero credit, never a drain, which would end the session (docs/brokers.md R6):
    # both autoLinks stay active and nothing the consumer accepted comes back
    q = unique_name("wp")
    r = waypoint_router(make_router, rabbitmq, q)
    c = Client()
    try:
        wait_states(r, ACTIVE, timeout=30)
        for round_ in range(2):
            conn = c.connect(r.url)
            bodies = ["%d-%d" % (round_, i) for i in range(5)]
            rcv, got = round_trip(c, conn, q, bodies, False)
            conn.close()
            c.run_for(1.5)
            rows = {x["name"]: x for x in autolinks(r)}
            assert {n: x["operStatus"] for n, x in rows.items()} == ACTIVE
            assert not rows["in"]["lastError"] and not rows["out"]["lastError"], rows
        assert not [x for x in r.stderr_lines() if "session ended by the peer" in x]
        # a consumer now finds the queue empty: every accepted message was settled
        conn = c.connect(r.url)
        rcv = conn.receiver(q, credit=10)
        with pytest.raises(Exception):
            rcv.get(timeout=1.5)
    finally:
        c.close()


@pytest.mark.deadline(120)
def test_rabbitmq_transfers_beyond_credit_are_taken(rabbitmq, make_router, client):
    # RabbitMQ sends beyond the link credit when a flow meets a busy queue (docs/brokers.md
    # R18); the in autoLink takes them and paces its credit on what it holds: every message
    # comes exactly once and the autoLink is not closed
    q = unique_name("wp")
    conn = client.connect(rabbitmq.url)
    snd = conn.sender("/queue/" + q)
    n = 3000
    dlvs = [snd.send(Message(body=i)) for i in range(n)]
    assert snd.wait_outcomes(dlvs) == [Delivery.ACCEPTED] * n
    conn.close()
    r = waypoint_router(make_router, rabbitmq, q)
    c = Client()
    try:
        cc = c.connect(r.url)
        rcv = cc.receiver(q, credit=500, settle="accept")
        got = [rcv.get(timeout=30).body for _ in range(n)]
        assert sorted(got) == list(range(n))
        assert not [x for x in r.stderr_lines() if "transfer-limit-exceeded" in x]
        assert {x["name"]: x["operStatus"] for x in autolinks(r)} == ACTIVE
    finally:
        c.close()


def test_proton_broker_consumer_leaving_loses_nothing(proton_broker, make_router):
    # when the waypoint's last consumer goes, the in autoLink's credit is taken back by
    # lowering it, not by a drain: the Proton broker never answers a drain (docs/brokers.md
    # P5) and kept the credit, so what a producer sent next came straight back, settled (P2),
    # to an address with no consumer, and the router dropped it
    q = unique_name("wp")
    r = waypoint_router(make_router, proton_broker, q)
    c = Client()
    node = Node(r.url)
    try:
        wait_states(r, ACTIVE, timeout=30)
        conn = c.connect(r.url)
        snd = conn.sender(q)
        rcv = conn.receiver(q, credit=10, settle="accept")
        assert snd.wait_outcome(snd.send(Message(body="w1"))) == Delivery.ACCEPTED
        assert rcv.get(timeout=15).body == "w1"
        rcv.close()
        c.run_for(0.5)
        # no consumer: the broker's queue keeps it
        assert snd.wait_outcome(snd.send(Message(body="w2"))) == Delivery.ACCEPTED
        c.run_for(1.0)
        rows = [x for x in node.query_dicts("router.link") if x["owningAddr"] == "M1" + q]
        assert [x["droppedPresettledCount"] for x in rows] == [0], rows
        assert [x["creditAvailable"] for x in rows] == [0], rows
        # a consumer again: it gets it
        rcv = conn.receiver(q, credit=10, settle="accept")
        assert rcv.get(timeout=15).body == "w2"
    finally:
        c.close()
        node.close()
