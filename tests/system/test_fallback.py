"""Fallback destinations (qdrouterd 1.19: an address's `enableFallback`, an autoLink's
`fallback`), against the fake broker (fake_broker.py), RabbitMQ and the Proton example broker.

An address configured with enableFallback has a fallback destination beside it; an out
autoLink with `fallback` is a consumer of that destination, so the broker's queue takes what
producers send to the address while it has no consumer of its own, and only then; an in
autoLink with `fallback` (phase 0 by default) brings the queue's messages to the address's
own consumers, and gets credit only while there are some.  Producers have credit while the
address or its fallback destination has a consumer.
"""


import pytest
from proton import Delivery, Message

from brokers import autolink_pair, connector_to, unique_name
from clients import Client
from mgmt_tool import Node
from test_autolink import autolink_router, brokers, node_of, wait_states  # noqa: F401
from test_config import names_entity, start_fails

FALLBACK = [
    ["address", {"prefix": "dest", "enableFallback": True}],
    ["autoLink", {"name": "fb-out", "address": "dest.al", "direction": "out",
                  "containerId": "broker", "fallback": True}],
    ["autoLink", {"name": "fb-in", "address": "dest.al", "direction": "in",
                  "containerId": "broker", "fallback": True}],
]
ACTIVE = {"fb-out": "active", "fb-in": "active"}


def test_fallback_to_the_broker_only_while_no_consumer(make_router, node_of, brokers):
    r = autolink_router(make_router, extra=FALLBACK)
    node = node_of(r)
    rows = {x["name"]: x for x in node.query_dicts("autoLink")}
    assert rows["fb-out"]["fallback"] is True and rows["fb-in"]["fallback"] is True
    # qdrouterd's default phase for a fallback in autoLink is 0, not 1
    assert rows["fb-in"]["phase"] == 0 and rows["fb-out"]["phase"] == 0
    assert [a["enableFallback"] for a in node.query_dicts("address")
            if a["prefix"] == "dest"] == [True]
    b = brokers(r.url_of(1), "--preload", "dest.al:2")
    wait_states(node, ACTIVE)
    c = Client()
    try:
        conn = c.connect(r.url)
        snd = conn.sender("dest.al")
        # no consumer: the message goes to the fallback destination, the broker's queue
        d = snd.send(Message(body="f1"))
        assert snd.wait_outcome(d) == Delivery.ACCEPTED
        b.wait_line("stored dest.al f1", client=c)
        # and the broker's queue is not drained while nobody consumes
        c.run_for(0.5)
        assert not [x for x in b.lines if x.startswith("sent ")], b.lines
        # a consumer: the queue's messages come to it through the in autoLink
        rcv = conn.receiver("dest.al", credit=10, settle="accept")
        got = sorted(rcv.get(timeout=10).body for _ in range(3))
        assert got == ["dest.al-0", "dest.al-1", "f1"]
        # with a consumer, a producer's message goes to it, not to the broker
        d = snd.send(Message(body="p1"))
        assert snd.wait_outcome(d) == Delivery.ACCEPTED
        assert rcv.get(timeout=10).body == "p1"
        assert "stored dest.al p1" not in b.lines
        # the consumer goes: the broker takes what comes next again
        rcv.close()
        c.run_for(0.3)
        d = snd.send(Message(body="f2"))
        assert snd.wait_outcome(d) == Delivery.ACCEPTED
        b.wait_line("stored dest.al f2", client=c)
        # the in autoLink's credit is taken back (a drain, toward a broker that is not
        # RabbitMQ): what the broker sends meanwhile comes back RELEASED, and stays queued
        c.run_for(0.5)
        assert "outcome f2 accepted" not in b.lines
        rcv = conn.receiver("dest.al", credit=10, settle="accept")
        assert rcv.get(timeout=10).body == "f2"
        b.wait_line("outcome f2 accepted", client=c)
    finally:
        c.close()
    # the fallback destination is an address of its own, beside the address; f1 and f2
    # were redirected to it
    addrs = {a["key"]: a for a in node.query_dicts("router.address")}
    assert {"M0dest.al", "MFdest.al"} <= set(addrs), addrs
    assert addrs["M0dest.al"]["deliveriesRedirectedToFallback"] == 2
    assert node.query_dicts("router")[0]["deliveriesRedirectedToFallback"] == 2


def test_no_credit_without_a_consumer_or_a_fallback(make_router, node_of, brokers):
    # the producer has credit only while the address or its fallback destination has a
    # consumer: before the broker connects, and after it went, none
    r = autolink_router(make_router, extra=FALLBACK)
    node = node_of(r)
    c = Client()
    try:
        conn = c.connect(r.url)
        snd = conn.sender("dest.al")
        c.run_for(0.5)
        assert snd.pn.credit == 0
        b = brokers(r.url_of(1))
        wait_states(node, ACTIVE)
        c.wait(lambda: snd.pn.credit > 0, 10, "credit once the fallback is attached")
        b.stop()
        wait_states(node, {"fb-out": "inactive", "fb-in": "inactive"})
        c.wait(lambda: snd.pn.credit == 0, 10, "the credit taken back")
    finally:
        c.close()


def test_address_without_enable_fallback_is_not_redirected(make_router, node_of, brokers):
    # a fallback autoLink alone does not make an address fall back (as qdrouterd): the
    # producer gets no credit, nothing reaches the broker
    extra = [x for x in FALLBACK if x[0] != "address"]
    r = autolink_router(make_router, extra=extra)
    node = node_of(r)
    b = brokers(r.url_of(1))
    wait_states(node, ACTIVE)
    c = Client()
    try:
        conn = c.connect(r.url)
        snd = conn.sender("dest.al")
        c.run_for(0.5)
        assert snd.pn.credit == 0
        assert not [x for x in b.lines if x.startswith("stored ")]
    finally:
        c.close()


@pytest.mark.parametrize("attrs", [{"waypoint": True}, {"ingressPhase": 3},
                                   {"egressPhase": 2}], ids=["waypoint", "ingress", "egress"])
def test_enable_fallback_with_a_waypoint_or_phases_is_refused(tmp_path, attrs):
    a = {"prefix": "dest", "enableFallback": True}
    a.update(attrs)
    line, rest = start_fails(tmp_path, [["router", {"id": "R"}],
                                        ["listener", {"host": "127.0.0.1", "port": "0"}],
                                        ["address", a]])
    assert names_entity(rest, 2, "address"), line
    assert "enableFallback" in rest and "waypoint" in rest, line


@pytest.mark.deadline(120)
@pytest.mark.parametrize("kind", ["rabbitmq", "proton_broker"])
def test_fallback_to_a_real_broker(kind, request, make_router):
    # with the Proton broker, the in autoLink's credit taken back when the consumer leaves
    # must be lowered, not drained: the broker never answers a drain (docs/brokers.md P5),
    # would keep the credit and send f3 back, settled (P2), to an address with no consumer,
    # where the router drops it
    broker = request.getfixturevalue(kind)
    q = unique_name("fb")
    r = make_router(extra=[
        connector_to(broker),
        ["address", {"prefix": q, "enableFallback": True}],
        *autolink_pair(q, "/queue/" + q, names=("fb-out", "fb-in"), fallback=True),
    ])
    node = Node(r.url)
    c = Client()
    try:
        wait_states(node, ACTIVE, timeout=30)
        conn = c.connect(r.url)
        snd = conn.sender(q)
        # no consumer: RabbitMQ's queue takes them (ACCEPTED by the broker)
        dlvs = [snd.send(Message(body="f%d" % i)) for i in range(3)]
        assert snd.wait_outcomes(dlvs) == [Delivery.ACCEPTED] * 3
        # a consumer gets them from the queue, then what is sent while it is there
        rcv = conn.receiver(q, credit=10, settle="accept")
        assert sorted(rcv.get(timeout=15).body for _ in range(3)) == ["f0", "f1", "f2"]
        d = snd.send(Message(body="p1"))
        assert snd.wait_outcome(d) == Delivery.ACCEPTED
        assert rcv.get(timeout=15).body == "p1"
        rcv.close()
        c.run_for(0.5)
        # no consumer again: the queue takes it and keeps it (the in autoLink has no credit)
        d = snd.send(Message(body="f3"))
        assert snd.wait_outcome(d) == Delivery.ACCEPTED
        c.run_for(0.5)
        rows = {x["name"]: x for x in node.query_dicts("autoLink")}
        assert {n: x["operStatus"] for n, x in rows.items()} == ACTIVE, rows
        direct = c.connect(broker.url)
        drcv = direct.receiver("/queue/" + q, credit=10, settle="accept")
        assert drcv.get(timeout=15).body == "f3"
        with pytest.raises(Exception):
            drcv.get(timeout=1)
    finally:
        c.close()
        node.close()


def test_fallback_created_at_run_time(make_router, node_of, brokers):
    # qdmanage CREATE of the address and both autoLinks: the same behaviour as configured
    r = autolink_router(make_router, extra=[])
    node = node_of(r)
    b = brokers(r.url_of(1))
    b.wait_line("open")
    node.create({"prefix": "dest", "enableFallback": True}, "address", name="dest")
    for name, attrs in ((x[1]["name"], x[1]) for x in FALLBACK if x[0] == "autoLink"):
        row = node.create({k: v for k, v in attrs.items() if k != "name"}, "autoLink",
                          name=name)
        assert row["fallback"] is True
    wait_states(node, ACTIVE)
    c = Client()
    try:
        conn = c.connect(r.url)
        snd = conn.sender("dest.al")
        d = snd.send(Message(body="f1"))
        assert snd.wait_outcome(d) == Delivery.ACCEPTED
        b.wait_line("stored dest.al f1", client=c)
        rcv = conn.receiver("dest.al", credit=10, settle="accept")
        assert rcv.get(timeout=10).body == "f1"
    finally:
        c.close()
