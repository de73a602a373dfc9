"""Message routing on a standalone router: addresses, anonymous relay, distributions,
prefix and pattern matching, unavailable addresses."""

import uuid

import pytest
from proton import Delivery, Message, symbol, ulong

from clients import message_fields, outcome_name, user_annotations


def bodies(rcv_or_list):
    items = rcv_or_list.drain_queue() if hasattr(rcv_or_list, "drain_queue") else rcv_or_list
    return [g.body for g in items]


def send_all(snd, n, prefix="m", **kw):
    return [snd.send(Message(body="%s%d" % (prefix, i), **kw)) for i in range(n)]


def test_message_to_target_address_reaches_receiver_intact(router, client):
    rconn = client.connect(router.url)
    sconn = client.connect(router.url)
    rcv = rconn.receiver("route.q", settle="accept")
    assert rcv.remote_address == "route.q"
    snd = sconn.sender("route.q")
    assert snd.pn.remote_target.address == "route.q"
    sent = Message(body={"k": [1, 2, "three"], "b": b"\x00\x01"},
                   id="msg-1", correlation_id=uuid.UUID(int=7), subject="subj",
                   reply_to="reply.here", content_type="application/x-test",
                   properties={"app": "prop", "n": 42, "f": 1.5, "flag": True},
                   annotations={"user-key": "user-value", ulong(42): [1, 2]})
    dlv = snd.send(sent)
    got = rcv.get()
    assert got.message is not None, got.decode_error
    want = message_fields(sent)
    have = message_fields(got.message)
    assert have.pop("annotations") == want.pop("annotations")
    assert have == want
    assert snd.wait_outcome(dlv) == Delivery.ACCEPTED


def test_sender_and_receiver_on_one_connection(router, client):
    conn = client.connect(router.url)
    rcv = conn.receiver("same.conn", settle="accept")
    snd = conn.sender("same.conn")
    send_all(snd, 5)
    assert bodies(rcv.get_n(5)) == ["m%d" % i for i in range(5)]


def test_router_offers_anonymous_relay(router, client):
    conn = client.connect(router.url)
    assert "ANONYMOUS-RELAY" in conn.remote_offered_capabilities, \
        conn.remote_offered_capabilities


def test_anonymous_sender_routes_by_to(router, client):
    conn = client.connect(router.url)
    ra = conn.receiver("anon.a", settle="accept")
    rb = conn.receiver("anon.b", settle="accept")
    snd = client.connect(router.url).sender(None)
    assert snd.pn.remote_target is not None
    dlvs = []
    for i in range(6):
        dlvs.append(snd.send(Message(address="anon.a" if i % 2 == 0 else "anon.b",
                                     body="n%d" % i)))
    assert bodies(ra.get_n(3)) == ["n0", "n2", "n4"]
    assert bodies(rb.get_n(3)) == ["n1", "n3", "n5"]
    assert snd.wait_outcomes(dlvs) == [Delivery.ACCEPTED] * 6


def test_anonymous_sender_gets_credit_without_any_consumer(router, client):
    snd = client.connect(router.url).sender(None)
    snd.wait_credit(1)


def test_anonymous_send_to_address_without_consumer_is_released(router, client):
    snd = client.connect(router.url).sender(None)
    dlv = snd.send(Message(address="nobody.home", body="lost"))
    assert outcome_name(snd.wait_outcome(dlv)) == "RELEASED"


def test_presettled_send_without_consumer_is_dropped_and_the_link_goes_on(router, client):
    snd = client.connect(router.url).sender(None, presettled=True)
    snd.send(Message(address="nobody.presettled", body="dropped"))
    rcv = client.connect(router.url).receiver("somebody.presettled", settle="accept")
    snd.send(Message(address="somebody.presettled", body="kept"))
    assert rcv.get().body == "kept"
    client.run_for(0.2)
    assert rcv.count == 1


def test_anonymous_send_without_to_is_rejected(router, client):
    snd = client.connect(router.url).sender(None)
    dlv = snd.send(Message(body="no address"))
    assert outcome_name(snd.wait_outcome(dlv)) == "REJECTED"


def test_address_prefix_amqp_scheme_is_normalised(router, client):
    rcv = client.connect(router.url).receiver("norm.q", settle="accept")
    snd = client.connect(router.url).sender(None)
    snd.send(Message(address="amqp:/norm.q", body="via amqp:/"))
    assert rcv.get().body == "via amqp:/"


def test_multicast_prefix_fans_out_to_every_receiver(router, client):
    rcvs = [client.connect(router.url).receiver("multicast.news", settle="accept")
            for _ in range(3)]
    snd = client.connect(router.url).sender("multicast.news")
    dlvs = send_all(snd, 10)
    for r in rcvs:
        assert bodies(r.get_n(10)) == ["m%d" % i for i in range(10)]
    assert snd.wait_outcomes(dlvs) == [Delivery.ACCEPTED] * 10
    client.run_for(0.3)
    assert [r.count for r in rcvs] == [10, 10, 10], "duplicates"


def test_closest_delivers_each_message_to_exactly_one_receiver(router, client):
    rcvs = [client.connect(router.url).receiver("closest.svc", settle="accept")
            for _ in range(2)]
    snd = client.connect(router.url).sender("closest.svc")
    dlvs = send_all(snd, 20)
    assert snd.wait_outcomes(dlvs) == [Delivery.ACCEPTED] * 20
    client.run_for(0.3)
    got = bodies(rcvs[0]) + bodies(rcvs[1])
    assert sorted(got) == sorted("m%d" % i for i in range(20)), got


@pytest.mark.parametrize("address", ["balanced.work", "unconfigured.work"])
def test_balanced_delivers_each_once_and_uses_both_receivers(router, client, address):
    rcvs = [client.connect(router.url).receiver(address, credit=50, settle="accept")
            for _ in range(2)]
    snd = client.connect(router.url).sender(address)
    dlvs = send_all(snd, 100)
    assert snd.wait_outcomes(dlvs) == [Delivery.ACCEPTED] * 100
    client.run_for(0.3)
    got = [bodies(r) for r in rcvs]
    assert sorted(got[0] + got[1]) == sorted("m%d" % i for i in range(100))
    assert got[0] and got[1], "one receiver got nothing: %d / %d" % (len(got[0]), len(got[1]))


def test_message_order_is_kept_on_one_link(router, client):
    rcv = client.connect(router.url).receiver("order.q", credit=20, settle="accept")
    snd = client.connect(router.url).sender("order.q")
    send_all(snd, 200)
    assert bodies(rcv.get_n(200)) == ["m%d" % i for i in range(200)]


def test_two_senders_one_receiver(router, client):
    rcv = client.connect(router.url).receiver("fanin.q", credit=50, settle="accept")
    s1 = client.connect(router.url).sender("fanin.q")
    s2 = client.connect(router.url).sender("fanin.q")
    d = send_all(s1, 20, prefix="a") + send_all(s2, 20, prefix="b")
    got = bodies(rcv.get_n(40))
    assert [b for b in got if b[0] == "a"] == ["a%d" % i for i in range(20)]
    assert [b for b in got if b[0] == "b"] == ["b%d" % i for i in range(20)]
    assert s1.wait_outcomes(d[:20]) + s2.wait_outcomes(d[20:]) == [Delivery.ACCEPTED] * 40


def test_default_distribution_multicast_is_honoured(make_router, client):
    r = make_router(router={"defaultDistribution": "multicast"}, addresses=[])
    rcvs = [client.connect(r.url).receiver("anything.at.all", settle="accept")
            for _ in range(2)]
    snd = client.connect(r.url).sender("anything.at.all")
    send_all(snd, 3)
    for rc in rcvs:
        assert bodies(rc.get_n(3)) == ["m0", "m1", "m2"]


def test_default_distribution_unavailable_refuses_unconfigured(make_router, client):
    r = make_router(router={"defaultDistribution": "unavailable"},
                    addresses=[["address", {"prefix": "open", "distribution": "balanced"}]])
    conn = client.connect(r.url)
    refused = conn.receiver("closed.q")
    assert refused.wait_remote_closed(), "receiver on an unavailable address was attached"
    rcv = conn.receiver("open.q", settle="accept")
    snd = conn.sender("open.q")
    snd.send(Message(body="configured still works"))
    assert rcv.get().body == "configured still works"


def fanout_count(client, router, address, n_receivers=2):
    """How many of n receivers on `address` get one message sent to it."""
    conn = client.connect(router.url)
    rcvs = [conn.receiver(address, settle="accept") for _ in range(n_receivers)]
    snd = conn.sender(address)
    dlv = snd.send(Message(body="probe"))
    snd.wait_outcome(dlv)
    client.run_for(0.3)
    n = sum(r.count for r in rcvs)
    conn.close()
    return n


@pytest.mark.parametrize("address,fans", [
    ("multicast", True),
    ("multicast/foo", True),
    ("multicast.foo", True),
    ("multicast/foo/bar", True),
    ("multicastx", False),
    ("xmulticast.foo", False),
    ("multi.cast", False),
])
def test_prefix_matches_whole_tokens_only(router, client, address, fans):
    assert fanout_count(client, router, address) == (2 if fans else 1)


PATTERN_ADDRESSES = [
    ["address", {"pattern": "a.*.c", "distribution": "multicast"}],
    ["address", {"pattern": "x.#", "distribution": "multicast"}],
]


@pytest.mark.parametrize("address,fans", [
    ("a.b.c", True),
    ("a/b/c", True),
    ("a.zzz.c", True),
    ("a.c", False),
    ("a.b.b.c", False),
    ("a.b.c.d", False),
    ("x", True),
    ("x.y", True),
    ("x/y/z", True),
    ("xy.z", False),
])
def test_pattern_addresses(make_router, client, address, fans):
    r = make_router(addresses=PATTERN_ADDRESSES)
    assert fanout_count(client, r, address) == (2 if fans else 1)


def test_most_specific_pattern_wins(make_router, client):
    r = make_router(addresses=[
        ["address", {"pattern": "s.#", "distribution": "multicast"}],
        ["address", {"pattern": "s.*", "distribution": "closest"}],
        ["address", {"pattern": "s.exact", "distribution": "multicast"}],
    ])
    assert fanout_count(client, r, "s.exact") == 2
    assert fanout_count(client, r, "s.one") == 1
    assert fanout_count(client, r, "s.one.two") == 2


def test_unavailable_address_refuses_receiver(router, client):
    conn = client.connect(router.url)
    rcv = conn.receiver("unavailable.x")
    assert rcv.wait_remote_closed(), "receiver attached to an unavailable address"
    assert rcv.remote_condition is not None, "refused without an error condition"
    # the connection is still usable
    ok = conn.receiver("available.x", settle="accept")
    snd = conn.sender("available.x")
    snd.send(Message(body="fine"))
    assert ok.get().body == "fine"


def test_unavailable_address_refuses_sender(router, client):
    conn = client.connect(router.url)
    snd = conn.sender("unavailable.y")
    assert snd.wait_remote_closed(), "sender attached to an unavailable address"
    assert snd.remote_condition is not None, "refused without an error condition"


def test_anonymous_send_to_unavailable_address_is_rejected(router, client):
    snd = client.connect(router.url).sender(None)
    dlv = snd.send(Message(address="unavailable.z", body="no"))
    assert outcome_name(snd.wait_outcome(dlv)) == "REJECTED"
    # the anonymous link goes on working
    rcv = client.connect(router.url).receiver("after.unavailable", settle="accept")
    dlv = snd.send(Message(address="after.unavailable", body="yes"))
    assert rcv.get().body == "yes"
    assert snd.wait_outcome(dlv) == Delivery.ACCEPTED


def test_user_annotations_survive_multicast(router, client):
    rcvs = [client.connect(router.url).receiver("multicast.ann", settle="accept")
            for _ in range(2)]
    snd = client.connect(router.url).sender("multicast.ann")
    ann = {symbol("k%d" % i): "v" * 50 for i in range(20)}
    snd.send(Message(body="x", annotations=ann))
    for r in rcvs:
        assert user_annotations(r.get().message) == ann
