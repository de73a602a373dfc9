"""Bad input: broken connections and malformed messages are refused without harming the
router or other clients."""

import socket
import struct
import time

import pytest
from proton import Delivery, Endpoint, Message

import amqp_raw
from clients import Client, check_router_works, outcome_name, raw_exchange

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"


def frame(body, ftype=0, channel=0):
    return struct.pack(">IBBH", 8 + len(body), 2, ftype, channel) + body


# An AMQP open performative for container "x", encoded by hand.
OPEN = b"\x00\x53\x10\xc0\x04\x01\xa1\x01x"


@pytest.mark.parametrize("data", [
    b"\x00\xff garbage that is not AMQP at all \xfe\xfd" * 4,
    b"AMQP\x05\x01\x00\x00",
    b"AMQP\x00\x02\x00\x00",
    b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
    b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\x00" * 32,
    SASL_HEADER + b"\xff" * 64,
    AMQP_HEADER + b"\x00\x00\x00\x08\x07\x00\x00\x00",  # frame with doff 7... and no body
    AMQP_HEADER + struct.pack(">IBBH", 0xFFFFFFF0, 2, 0, 0),  # 4 GB frame
    AMQP_HEADER + struct.pack(">IBBH", 4, 2, 0, 0),  # frame shorter than its header
], ids=["garbage", "amqp-version-5", "amqp-1.2", "http", "tls-hello", "sasl-then-garbage",
        "bad-doff", "huge-frame", "tiny-frame"])
def test_garbage_closes_the_connection_and_the_router_goes_on(router, data):
    got, closed = raw_exchange(router.host, router.port, data, timeout=5)
    assert closed, "the router kept a connection open after %r (sent back %r)" % (data[:16],
                                                                                 got[:64])
    check_router_works(router.url)


@pytest.mark.parametrize("header", [b"AMQP\x05\x01\x00\x00", b"AMQP\x00\x01\x00\x01",
                                    b"XMQP\x00\x01\x00\x00"])
def test_unsupported_protocol_header_gets_a_supported_one_back(router, header):
    got, closed = raw_exchange(router.host, router.port, header, timeout=5)
    assert closed
    assert got[:4] == b"AMQP" and len(got) >= 8, "got %r" % got[:32]


def test_clients_that_connect_and_close_at_once(router):
    for _ in range(50):
        s = socket.create_connection((router.host, router.port), timeout=5)
        s.close()
    for _ in range(20):  # and some that reset the connection
        s = socket.create_connection((router.host, router.port), timeout=5)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    check_router_works(router.url)


@pytest.mark.parametrize("data", [
    AMQP_HEADER[:5],
    AMQP_HEADER + frame(OPEN)[:7],
    SASL_HEADER + b"\x00\x00\x00\x20\x02\x01",
    AMQP_HEADER + frame(OPEN) + frame(b"\x00\x53\x11\xc0\x08\x04")[:10],
], ids=["half-header", "half-frame-header", "half-sasl-frame", "half-begin"])
def test_half_a_frame_then_disconnect(router, data):
    for _ in range(5):
        s = socket.create_connection((router.host, router.port), timeout=5)
        s.sendall(data)
        time.sleep(0.05)
        s.close()
    check_router_works(router.url)


def test_half_a_frame_then_silence_does_not_block_others(router):
    silent = []
    try:
        for _ in range(5):
            s = socket.create_connection((router.host, router.port), timeout=5)
            s.sendall(AMQP_HEADER + frame(OPEN)[:9])
            silent.append(s)
        check_router_works(router.url)
    finally:
        for s in silent:
            s.close()
    check_router_works(router.url)


def test_sasl_mechanism_other_than_anonymous_is_refused(router):
    c = Client()
    try:
        conn = c.connect(router.url, wait=False, allowed_mechs="PLAIN", user="u",
                         password="p")
        c.wait(lambda: conn.transport_closed or conn.remote_closed,
               msg="the router to refuse SASL PLAIN")
        assert not (conn.pn.state & Endpoint.REMOTE_ACTIVE), "PLAIN was accepted"
    finally:
        c.close()
    check_router_works(router.url)


BODY = amqp_raw.data_section(b"hi")
MALFORMED = {
    "annotations-map-with-odd-count":
        amqp_raw.header_section() + bytes.fromhex("005372c10503a3016140") + BODY,
    "annotations-map-size-past-the-end":
        amqp_raw.header_section() + bytes.fromhex("005372c1ff02a3016140") + BODY,
    "annotations-value-bad-constructor":
        amqp_raw.header_section() + bytes.fromhex("005372c10502a30161ff") + BODY,
    "annotations-not-a-map":
        amqp_raw.header_section() + bytes.fromhex("005372c00100") + BODY,
    "header-list-size-past-the-end":
        bytes.fromhex("005370c0ff0541"),
    "header-bad-constructor":
        bytes.fromhex("005370ff") + BODY,
}


@pytest.mark.parametrize("kind", list(MALFORMED))
def test_malformed_message_is_rejected_and_the_link_goes_on(router, client, kind):
    rcv = client.connect(router.url).receiver("bad.msg", settle="accept")
    snd = client.connect(router.url).sender("bad.msg")
    bad = snd.send_raw(MALFORMED[kind])
    assert outcome_name(snd.wait_outcome(bad)) == "REJECTED"
    cond = bad.remote.condition
    assert cond is not None and cond.name == "amqp:decode-error", cond
    good = snd.send(Message(body="good after bad"))
    assert rcv.get().body == "good after bad"
    assert snd.wait_outcome(good) == Delivery.ACCEPTED
    client.run_for(0.2)
    assert rcv.count == 1, "the malformed message was forwarded"
    check_router_works(router.url)


def test_malformed_properties_on_an_anonymous_link_are_rejected(router, client):
    snd = client.connect(router.url).sender(None)
    raw = amqp_raw.header_section() + bytes.fromhex("005373c0ff034040a103666f6f")
    bad = snd.send_raw(raw)
    assert outcome_name(snd.wait_outcome(bad)) == "REJECTED"
    cond = bad.remote.condition
    assert cond is not None and cond.name == "amqp:decode-error", cond
    rcv = client.connect(router.url).receiver("after.bad.props", settle="accept")
    good = snd.send(Message(address="after.bad.props", body="fine"))
    assert rcv.get().body == "fine"
    assert snd.wait_outcome(good) == Delivery.ACCEPTED


def test_many_malformed_messages_in_a_row(router, client):
    rcv = client.connect(router.url).receiver("bad.many", credit=50, settle="accept")
    snd = client.connect(router.url).sender("bad.many")
    kinds = list(MALFORMED)
    dlvs = [snd.send_raw(MALFORMED[kinds[i % len(kinds)]]) for i in range(100)]
    assert set(snd.wait_outcomes(dlvs)) == {Delivery.REJECTED}
    snd.send(Message(body="survivor"))
    assert rcv.get().body == "survivor"


def test_half_a_frame_then_end_of_input_closes_the_connection(make_router):
    # Proton 0.37 waits forever for the rest of a frame once its input has ended; the router
    # must still close a connection whose client stopped sending mid-frame (found by
    # fuzz_conn: tests/fuzz/conn/crashes/hang-partial-frame-at-eof).  No idle timeout here,
    # so only the end of input can close it.
    r = make_router(listener={"idleTimeoutSeconds": 0})
    # an open frame of 200 bytes whose first 13 arrive: a list32 of one string, cut short
    data = (AMQP_HEADER + struct.pack(">IBBH", 200, 2, 0, 0) +
            b"\x00\x53\x10\xd0\x00\x00\x00\xb0\x00\x00\x00\x01\xa1")
    got, closed = raw_exchange(r.host, r.port, data, timeout=10, close_write=True)
    assert closed, "the router kept a connection open after its client's input ended"
    check_router_works(r.url)
