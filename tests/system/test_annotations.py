"""Message annotations and the other sections: the router's own x-opt-qd.* keys follow the
listener's stripAnnotations setting; every user annotation and every other section arrives
exactly as it was sent."""

import datetime
import uuid

import pytest
from proton import Described, Message, char, symbol, timestamp, ubyte, uint, ulong, ushort

import amqp_raw
from clients import message_fields, router_annotations, user_annotations
from conftest import ROUTER_ID

ROUTER_NAMES = (ROUTER_ID, "0/" + ROUTER_ID)  # qdrouterd writes "0/<id>"; accept either


def route_one(client, router, msg=None, raw=None, address="ann.q"):
    """Send one message (a Message, or raw bytes) from one connection to a receiver on
    another; returns the Received."""
    rcv = client.connect(router.url).receiver(address, settle="accept")
    snd = client.connect(router.url).sender(address)
    if raw is not None:
        snd.send_raw(raw)
    else:
        snd.send(msg)
    return rcv.get()


def user_pairs(raw):
    """Raw (key, value) byte pairs of the message annotations that are not x-opt-qd.*."""
    for code, sec in amqp_raw.split_sections(raw):
        if code == amqp_raw.MESSAGE_ANNOTATIONS:
            return [(k, v) for k, v in amqp_raw.map_pairs(sec)
                    if not (amqp_raw.symbol_text(k) or "").startswith("x-opt-qd.")]
    return []


def assert_same_except_router_annotations(sent_raw, got):
    """Every section but the message annotations is byte-for-byte the same, and the
    message annotations carry the same user entries, byte for byte, in the same order."""
    want = amqp_raw.sections_except(sent_raw, amqp_raw.MESSAGE_ANNOTATIONS)
    have = amqp_raw.sections_except(got.raw, amqp_raw.MESSAGE_ANNOTATIONS)
    assert [amqp_raw.SECTION_NAMES.get(c, c) for c, _ in have] == \
        [amqp_raw.SECTION_NAMES.get(c, c) for c, _ in want]
    for (c, w), (_, h) in zip(want, have):
        assert h == w, "%s section changed:\n sent %s\n got  %s" % (
            amqp_raw.SECTION_NAMES.get(c, c), w.hex(), h.hex())
    assert user_pairs(got.raw) == user_pairs(sent_raw)


SPOOF = [("x-opt-qd.ingress", "0/Spoofer"), ("x-opt-qd.trace", ["0/Spoofer"]),
         ("x-opt-qd.custom", "client-made")]


def spoofed_message():
    ann = {symbol("user.a"): "A", symbol("user.b"): 2}
    for k, v in SPOOF:
        ann[symbol(k)] = v
    return Message(body="spoof", annotations=ann)


def test_default_strips_router_annotations_but_keeps_user_ones(router, client):
    got = route_one(client, router, spoofed_message())
    assert router_annotations(got.message) == {}
    assert user_annotations(got.message) == {symbol("user.a"): "A", symbol("user.b"): 2}


def test_strip_no_adds_ingress_and_trace(make_router, client):
    r = make_router(listener={"stripAnnotations": "no"})
    got = route_one(client, r, Message(body="x", annotations={symbol("u"): "v"}))
    ra = router_annotations(got.message)
    assert ra.get("x-opt-qd.ingress") in ROUTER_NAMES, ra
    trace = ra.get("x-opt-qd.trace")
    assert isinstance(trace, list) and len(trace) == 1 and trace[0] in ROUTER_NAMES, ra
    assert trace[0] == ra["x-opt-qd.ingress"]
    assert user_annotations(got.message) == {symbol("u"): "v"}
    # the user entries come first, the router's after them
    keys = [str(k) for k in got.message.annotations]
    assert keys[0] == "u", keys


def test_strip_no_appends_to_an_existing_trace(make_router, client):
    r = make_router(listener={"stripAnnotations": "no"})
    msg = Message(body="x", annotations={symbol("x-opt-qd.ingress"): "0/Upstream",
                                         symbol("x-opt-qd.trace"): ["0/Upstream"]})
    ra = router_annotations(route_one(client, r, msg).message)
    trace = ra.get("x-opt-qd.trace")
    assert isinstance(trace, list) and len(trace) == 2, ra
    assert trace[0] == "0/Upstream" and trace[1] in ROUTER_NAMES, ra
    assert ra.get("x-opt-qd.ingress") == "0/Upstream", ra


def test_strip_in_replaces_client_router_annotations(make_router, client):
    r = make_router(listener={"stripAnnotations": "in"})
    got = route_one(client, r, spoofed_message())
    ra = router_annotations(got.message)
    assert ra.get("x-opt-qd.ingress") in ROUTER_NAMES, ra
    assert ra.get("x-opt-qd.trace") in ([ROUTER_NAMES[0]], [ROUTER_NAMES[1]]), ra
    assert "x-opt-qd.custom" not in ra, ra
    assert user_annotations(got.message) == {symbol("user.a"): "A", symbol("user.b"): 2}


def test_strip_out_removes_router_annotations_on_the_way_out(make_router, client):
    r = make_router(listener={"stripAnnotations": "out"})
    got = route_one(client, r, spoofed_message())
    assert router_annotations(got.message) == {}
    assert user_annotations(got.message) == {symbol("user.a"): "A", symbol("user.b"): 2}


@pytest.mark.parametrize("n", [0, 1, 50, 200])
def test_many_user_annotations_arrive_unchanged(router, client, n):
    ann = {symbol("key-%04d" % i): ("%04d" % i) * 25 for i in range(n)}  # 100-byte values
    sent = Message(body="with %d annotations" % n, annotations=ann)
    got = route_one(client, router, sent)
    assert user_annotations(got.message) == ann
    assert_same_except_router_annotations(sent.encode(), got)


def test_annotation_keys_and_values_of_every_kind_arrive_unchanged(router, client):
    ann = {
        symbol("str"): "text",
        symbol("sym"): symbol("a-symbol"),
        symbol("bin"): b"\x00\x01\x02\xff" * 10,
        symbol("map"): {"nested": {"deeper": [1, 2, {"x": None}]}, symbol("s"): 1.5},
        symbol("list"): [1, "two", [3, [4]], {"five": 5}, None, True],
        symbol("bool"): False,
        symbol("null"): None,
        symbol("ints"): [ubyte(1), ushort(2), uint(3), ulong(4), -5, 2 ** 40],
        symbol("time"): timestamp(1700000000123),
        symbol("uuid"): uuid.UUID("12345678-1234-5678-1234-567812345678"),
        symbol("char"): char("x"),
        symbol("described"): Described(symbol("my:descriptor"), "value"),
        ulong(1): "ulong key",
        ulong(2 ** 63): ["big", "ulong", "key"],
        symbol("long-" + "k" * 200): "long key",
        symbol("big"): "v" * 70000,
    }
    sent = Message(body="kinds", annotations=ann)
    got = route_one(client, router, sent)
    assert user_annotations(got.message) == ann
    assert_same_except_router_annotations(sent.encode(), got)


def full_message(body, inferred=False):
    m = Message(body=body)
    m.inferred = inferred
    m.durable = True
    m.priority = 7
    m.ttl = 30.5
    m.first_acquirer = True
    m.delivery_count = 3
    m.instructions = {symbol("x-opt-delivery-note"): "da-value", symbol("x-opt-n"): 9}
    m.annotations = {symbol("x-opt-user"): "ma-value"}
    m.id = uuid.UUID("0badc0de-0000-4000-8000-000000000001")
    m.user_id = b"anonymous"
    m.address = "ann.full"
    m.subject = "a subject"
    m.reply_to = "reply.address"
    m.correlation_id = ulong(123456789)
    m.content_type = symbol("application/octet-stream")
    m.content_encoding = symbol("identity")
    m.expiry_time = 1999999999.0
    m.creation_time = 1700000000.25
    m.group_id = "group"
    m.group_sequence = 17
    m.reply_to_group_id = "reply-group"
    m.properties = {"s": "str", "i": 5, "l": 2 ** 40, "b": True, "f": 2.5, "n": None,
                    "bin": b"\x01\x02", "t": timestamp(1700000000000),
                    "u": uuid.UUID(int=1), "sym": symbol("s")}
    return m


BODIES = {
    "string": ("a string body", False),
    "binary-data": (b"\x00\x01binary\xff" * 100, True),
    "binary-value": (b"binary in an amqp-value", False),
    "map": ({"a": 1, "b": [1, 2], "c": {"d": None}}, False),
    "list-value": ([1, "two", 3.0, None], False),
    "amqp-sequence": ([1, "two", 3.0], True),
    "empty-string": ("", False),
    "null": (None, False),
    "large-string": ("z" * 100000, False),
}


@pytest.mark.parametrize("kind", list(BODIES))
def test_every_section_arrives_unchanged(router, client, kind):
    body, inferred = BODIES[kind]
    sent = full_message(body, inferred)
    raw = sent.encode()
    got = route_one(client, router, raw=raw, address="ann.full")
    assert got.message is not None, got.decode_error
    want = message_fields(sent)
    have = message_fields(got.message)
    assert have.pop("annotations") == want.pop("annotations")
    assert have == want
    assert_same_except_router_annotations(raw, got)


def test_multiple_data_sections_arrive_unchanged(router, client):
    raw = (amqp_raw.header_section(durable=True)
           + amqp_raw.annotations_section([("x-opt-user", amqp_raw.enc_str("v"))])
           + amqp_raw.properties_section(to="ann.multi", message_id="multi-1")
           + amqp_raw.data_section(b"first part ")
           + amqp_raw.data_section(b"second part " * 1000)
           + amqp_raw.data_section(b"")
           + amqp_raw.data_section(b"last"))
    got = route_one(client, router, raw=raw, address="ann.multi")
    assert_same_except_router_annotations(raw, got)
    datas = [s for c, s in amqp_raw.split_sections(got.raw) if c == amqp_raw.DATA]
    assert len(datas) == 4


def test_message_without_annotations_gets_none_added(router, client):
    sent = Message(body="plain", properties={"k": "v"})
    got = route_one(client, router, sent)
    assert router_annotations(got.message) == {}
    assert_same_except_router_annotations(sent.encode(), got)


def test_empty_annotations_map_is_fine(router, client):
    sent = Message(body="empty map", annotations={})
    got = route_one(client, router, sent)
    assert user_annotations(got.message) == {}
    assert_same_except_router_annotations(sent.encode(), got)


def test_footer_arrives_unchanged(router, client):
    footer = amqp_raw._described(amqp_raw.FOOTER, amqp_raw.enc_map(
        [(amqp_raw.enc_sym("x-opt-checksum"), amqp_raw.enc_str("abc123"))]))
    raw = (amqp_raw.header_section()
           + amqp_raw.properties_section(to="ann.footer")
           + amqp_raw.value_section(amqp_raw.enc_str("with a footer"))
           + footer)
    got = route_one(client, router, raw=raw, address="ann.footer")
    assert_same_except_router_annotations(raw, got)


def test_timestamps_survive(router, client):
    now = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc).timestamp()
    sent = Message(body="t", creation_time=now, expiry_time=now + 60)
    got = route_one(client, router, sent)
    assert got.message.creation_time == now
    assert got.message.expiry_time == now + 60


@pytest.mark.parametrize("strip,routed_to", [("both", "to.props"), ("in", "to.props"),
                                             ("no", "to.annotation"), ("out", "to.annotation")])
def test_client_x_opt_qd_to_routes_only_when_not_stripped_in(make_router, client, strip,
                                                            routed_to):
    """An anonymous sender's x-opt-qd.to overrides properties.to, unless stripped on the way in."""
    r = make_router(listener={"stripAnnotations": strip})
    conn = client.connect(r.url)
    rcvs = {a: conn.receiver(a, settle="accept") for a in ("to.props", "to.annotation")}
    snd = conn.sender(None)
    dlv = snd.send(Message(address="to.props", body="where?",
                           annotations={symbol("x-opt-qd.to"): "to.annotation"}))
    assert rcvs[routed_to].get().body == "where?"
    snd.wait_outcome(dlv)
    client.run_for(0.2)
    assert sum(rc.count for rc in rcvs.values()) == 1

