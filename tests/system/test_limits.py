"""Per-connection limits (listener attributes): sessions (maxSessions), links (maxSenders,
maxReceivers), the initial handshake timeout (initialHandshakeTimeoutSeconds), frames
(maxFrameSize), messages (maxMessageSize) and unsettled deliveries per link
(maxUnsettledPerLink, and transfers without credit).  Each test hits the limit, checks the
AMQP error the client sees, and checks that the router goes on serving other clients."""

import socket
import struct
import time

import pytest
from proton import Delivery, Endpoint, Message

from amqp_raw import _described, enc_bin, enc_list, enc_str, value_section
from clients import Client, check_router_works, raw_exchange

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"


def frame(body, channel=0, payload=b""):
    return struct.pack(">IBBH", 8 + len(body) + len(payload), 2, 0, channel) + body + payload


def uint(n):
    return b"\x70" + struct.pack(">I", n)


def open_frame(container="raw", max_frame=None):
    fields = [enc_str(container), b"\x40"]
    if max_frame is not None:
        fields.append(uint(max_frame))
    return frame(_described(0x10, enc_list(fields)))


def begin_frame(channel=0):
    # remote-channel null, next-outgoing-id 0, incoming-window, outgoing-window
    return frame(_described(0x11, enc_list([b"\x40", uint(0), uint(1000), uint(1000)])),
                 channel)


def attach_sender_frame(address, name="raw-sender", handle=0):
    target = _described(0x29, enc_list([enc_str(address)]))
    source = _described(0x28, enc_list([enc_str("raw")]))
    # name, handle, role=sender(false), snd-settle-mode, rcv-settle-mode, source, target
    return frame(_described(0x12, enc_list([enc_str(name), uint(handle), b"\x42", b"\x40",
                                            b"\x40", source, target])))


def transfer_frame(delivery_id, payload, handle=0):
    # handle, delivery-id, delivery-tag, message-format, settled=false
    body = _described(0x14, enc_list([uint(handle), uint(delivery_id),
                                      enc_bin(b"t%d" % delivery_id), uint(0), b"\x42"]))
    return frame(body, payload=payload)


class RawConn:
    """A plain socket to the router, driven step by step."""

    def __init__(self, router, timeout=5.0):
        self.s = socket.create_connection((router.host, router.port), timeout=timeout)
        self.got = b""
        self.closed = False

    def send(self, data):
        self.s.sendall(data)

    def read_until(self, pred, timeout=5.0):
        """Read until pred(bytes so far) or the router closes; returns pred's last value."""
        deadline = time.monotonic() + timeout
        while not pred(self.got) and not self.closed and time.monotonic() < deadline:
            self.s.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                chunk = self.s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.closed = True
            self.got += chunk
        return pred(self.got)

    def close(self):
        self.s.close()


def assert_serving(router):
    check_router_works(router.url)


# ---- sessions and links ---------------------------------------------------------------------

def test_max_sessions_refuses_one_session_too_many(make_router, client):
    r = make_router(listener={"maxSessions": 2})
    # the router's open announces channel-max 1 (sessions 0 and 1), so a Proton client
    # refuses to begin a third session itself; two work
    conn = client.connect(r.url)
    assert conn.pn.transport.remote_channel_max == 1
    sessions = [conn.pn.session() for _ in range(2)]
    for s in sessions:
        s.open()
    client.wait(lambda: all(s.state & Endpoint.REMOTE_ACTIVE for s in sessions),
                msg="two sessions")
    # a client that begins a third anyway gets the connection closed with a framing error
    raw = RawConn(r)
    try:
        raw.send(AMQP_HEADER + open_frame() + begin_frame(0) + begin_frame(1))
        assert raw.read_until(lambda b: b.count(b"\x00\x53\x11") == 2)  # two begins back
        raw.send(begin_frame(2))
        raw.read_until(lambda b: False)
        assert raw.closed
        assert b"amqp:connection:framing-error" in raw.got
        assert b"above negotiated channel_max 1" in raw.got
    finally:
        raw.close()
    assert_serving(r)


def test_max_senders_and_receivers_refuse_extra_links(make_router, client):
    r = make_router(listener={"maxSenders": 2, "maxReceivers": 1})
    conn = client.connect(r.url)
    s1 = conn.sender("limits.links")
    s2 = conn.sender("limits.links")
    s3 = conn.sender("limits.links", wait=False)
    assert s3.wait_remote_closed()
    assert s3.remote_condition.name == "amqp:resource-limit-exceeded"
    assert "maxSenders" in s3.remote_condition.description
    r1 = conn.receiver("limits.links", credit=5)
    r2 = conn.receiver("limits.links", credit=5, wait=False)
    assert r2.wait_remote_closed()
    assert r2.remote_condition.name == "amqp:resource-limit-exceeded"
    assert "maxReceivers" in r2.remote_condition.description
    r.wait_log(r"Link refused: amqp:resource-limit-exceeded at most 2 senders")
    # the admitted links work, on the same connection
    for s in (s1, s2):
        d = s.send(Message(body="ok"))
        r1.get().accept()
        assert s.wait_outcome(d) == Delivery.ACCEPTED
    # a link closed makes room for another
    s1.close()
    s4 = conn.sender("limits.links")
    assert not s4.is_remote_closed()
    d = s4.send(Message(body="again"))
    r1.get().accept()
    assert s4.wait_outcome(d) == Delivery.ACCEPTED
    assert_serving(r)


def test_a_client_that_keeps_attaching_refused_links_is_disconnected(make_router, client):
    r = make_router(listener={"maxSenders": 1})
    conn = client.connect(r.url)
    conn.sender("limits.refused")
    extra = [conn.sender("limits.refused", wait=False) for _ in range(1005)]
    client.wait(lambda: conn.pn.state & Endpoint.REMOTE_CLOSED or conn.is_gone(),
                timeout=30, msg="the connection closed")
    assert conn.pn.remote_condition.name == "amqp:resource-limit-exceeded"
    assert "too many links refused" in conn.pn.remote_condition.description
    assert sum(1 for x in extra if x.is_remote_closed()) >= 1000
    r.wait_log(r"more than 1000 links refused")
    assert_serving(r)


def test_1000_links_are_within_the_default_caps(router, client):
    conn = client.connect(router.url)
    rcvs = [conn.receiver("limits.many.%d" % i, credit=1, wait=False) for i in range(1000)]
    client.wait(lambda: all(x.pn.state & Endpoint.REMOTE_ACTIVE for x in rcvs),
                msg="1000 receivers attached")
    assert not any(x.is_remote_closed() for x in rcvs)


# ---- handshake timeout ----------------------------------------------------------------------

def _closed_within(router, data, seconds):
    """Connect, send data, keep the socket open; returns (seconds until the router closed it,
    bytes received) or (None, bytes) when it stayed open."""
    s = socket.create_connection((router.host, router.port), timeout=seconds)
    got = b""
    t0 = time.monotonic()
    try:
        if data:
            s.sendall(data)
        s.settimeout(0.5)
        while time.monotonic() - t0 < seconds:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                return time.monotonic() - t0, got
            if not chunk:
                return time.monotonic() - t0, got
            got += chunk
        return None, got
    finally:
        s.close()


def test_handshake_timeout_closes_a_silent_socket(make_router):
    r = make_router(listener={"initialHandshakeTimeoutSeconds": 1, "idleTimeoutSeconds": 0})
    took, _ = _closed_within(r, b"", 15)
    assert took is not None, "a socket that sent nothing stayed open"
    assert took >= 0.8
    r.wait_log(r"closed: no AMQP open within 1 seconds")
    assert_serving(r)


def test_handshake_timeout_closes_a_socket_that_sent_only_the_header(make_router):
    r = make_router(listener={"initialHandshakeTimeoutSeconds": 1, "idleTimeoutSeconds": 0})
    took, got = _closed_within(r, AMQP_HEADER, 15)
    assert took is not None, "a socket that sent only the protocol header stayed open"
    assert got.startswith(AMQP_HEADER)
    # the router says why, in a close frame
    assert b"amqp:resource-limit-exceeded" in got
    # a SASL header alone too
    took, got = _closed_within(r, b"AMQP\x03\x01\x00\x00", 15)
    assert took is not None
    assert_serving(r)


def test_handshake_timeout_spares_an_opened_connection(make_router, client):
    r = make_router(listener={"initialHandshakeTimeoutSeconds": 1, "idleTimeoutSeconds": 0})
    conn = client.connect(r.url)
    rcv = conn.receiver("limits.hs", credit=1)
    client.run_for(2.5)
    assert not conn.is_gone()
    snd = conn.sender("limits.hs")
    snd.send(Message(body="still here"))
    assert rcv.get().body == "still here"


# Release build only: the default's value; the timeout itself closes sockets on every build in
# the tests above (1 s).
@pytest.mark.release_only
def test_default_handshake_timeout_is_ten_seconds(router):
    # the default listener (no attribute): 10 s; measured loosely on a loaded machine
    took, _ = _closed_within(router, b"", 40)
    assert took is not None and 9 <= took < 40, took


# ---- frames and messages --------------------------------------------------------------------

def test_max_frame_size_is_offered_and_enforced(make_router):
    r = make_router(listener={"maxFrameSize": 1024})
    # the router's open announces max-frame-size 1024
    got, closed = raw_exchange(r.host, r.port, AMQP_HEADER + open_frame(), timeout=3)
    assert got.startswith(AMQP_HEADER)
    assert b"\x70\x00\x00\x04\x00" in got  # uint 1024 in the router's open
    # a frame bigger than that closes the connection with a framing error (in the router's
    # close frame once the connection is open; bytes before it are never seen)
    big = frame(_described(0x11, enc_list([b"\x40", uint(0), uint(1), enc_str("x" * 2000)])))
    got, closed = raw_exchange(r.host, r.port, AMQP_HEADER + big, timeout=5)
    assert closed
    raw = RawConn(r)
    try:
        raw.send(AMQP_HEADER + open_frame())
        assert raw.read_until(lambda b: b"\x00\x53\x10" in b)
        raw.send(big)
        raw.read_until(lambda b: False)
        assert raw.closed
        assert b"amqp:connection:framing-error" in raw.got
        assert b"larger than the maximum frame size" in raw.got
    finally:
        raw.close()
    assert_serving(r)


def test_max_message_size_rejects_detaches_and_closes(make_router, client):
    r = make_router(listener={"maxMessageSize": 10000})
    other = client.connect(r.url)
    rcv = other.receiver("limits.size", credit=10, settle="accept")
    conn = client.connect(r.url)
    snd = conn.sender("limits.size")
    small = snd.send(Message(body="x" * 5000))
    assert snd.wait_outcome(small) == Delivery.ACCEPTED
    big = snd.send(Message(body="y" * 20000))
    assert snd.wait_outcome(big) == Delivery.REJECTED
    assert big.remote.condition.name == "amqp:link:message-size-exceeded"
    assert snd.wait_remote_closed()
    assert snd.remote_condition.name == "amqp:link:message-size-exceeded"
    client.wait(lambda: conn.pn.state & Endpoint.REMOTE_CLOSED or conn.is_gone(),
                msg="the connection closed")
    if conn.pn.remote_condition is not None:
        assert conn.pn.remote_condition.name == "amqp:connection:forced"
    r.wait_log(r"Message refused: amqp:link:message-size-exceeded")
    # the receiver got the small one only, and still works
    client.run_for(0.3)
    assert rcv.count == 1
    assert rcv.get().body == "x" * 5000
    snd2 = client.connect(r.url).sender("limits.size")
    d = snd2.send(Message(body="z" * 100))
    assert rcv.get().body == "z" * 100
    assert snd2.wait_outcome(d) == Delivery.ACCEPTED
    assert_serving(r)


def test_max_message_size_stops_a_large_streamed_message(make_router, client):
    r = make_router(listener={"maxMessageSize": 1000000})
    rcv = client.connect(r.url).receiver("limits.stream", credit=10, settle="accept")
    conn = client.connect(r.url)
    snd = conn.sender("limits.stream")
    big = snd.send(Message(body=b"b" * 3000000))
    client.wait(lambda: snd.is_remote_closed() or conn.is_gone(), timeout=30,
                msg="the sender's link closed")
    if big.remote_state:
        assert big.remote_state == Delivery.REJECTED
    assert snd.remote_condition is None or \
        snd.remote_condition.name == "amqp:link:message-size-exceeded"
    # whatever part reached the receiver was aborted, never delivered whole
    client.run_for(0.5)
    assert rcv.count == 0
    assert_serving(r)


def test_policy_max_message_size_applies_to_every_listener(make_router, client):
    r = make_router(extra=[["policy", {"maxMessageSize": 2000}]])
    conn = client.connect(r.url)
    rcv = conn.receiver("limits.policy", credit=5, settle="accept")
    snd = conn.sender("limits.policy")
    ok = snd.send(Message(body="a" * 500))
    assert snd.wait_outcome(ok) == Delivery.ACCEPTED
    big = snd.send(Message(body="b" * 5000))
    assert snd.wait_outcome(big) == Delivery.REJECTED
    assert big.remote.condition.name == "amqp:link:message-size-exceeded"
    assert rcv.get().body == "a" * 500
    assert_serving(r)


def test_policy_max_connections_refuses_one_too_many(make_router, client):
    r = make_router(extra=[["policy", {"maxConnections": 2}]])
    c1 = client.connect(r.url)
    c2 = client.connect(r.url)
    c3 = client.connect(r.url, wait=False)
    client.wait(lambda: c3.pn.state & Endpoint.REMOTE_CLOSED or c3.is_gone(),
                msg="the third connection refused")
    assert c3.pn.remote_condition.name == "amqp:resource-limit-exceeded"
    assert "maxConnections" in c3.pn.remote_condition.description
    r.wait_log(r"refused: amqp:resource-limit-exceeded at most 2 connections")
    # the first two work; when one goes, another may come
    rcv = c1.receiver("limits.conns", credit=1, settle="accept")
    d = c2.sender("limits.conns").send(Message(body="in"))
    assert rcv.get().body == "in"
    c2.close()
    c3.close(wait=False)
    client.run_for(0.3)
    c4 = client.connect(r.url)
    snd = c4.sender("limits.conns")
    rcv.flow(1)
    d = snd.send(Message(body="again"))
    assert rcv.get().body == "again"
    assert snd.wait_outcome(d) == Delivery.ACCEPTED


# ---- unsettled deliveries per link ----------------------------------------------------------

def test_max_unsettled_per_link_caps_the_credit_window(make_router, client):
    r = make_router(listener={"linkCapacity": 50, "maxUnsettledPerLink": 3})
    conn = client.connect(r.url)
    rcv = conn.receiver("limits.unsettled", credit=100, settle=None)
    snd = conn.sender("limits.unsettled")
    snd.wait_credit(3)
    client.run_for(0.3)
    assert snd.credit == 3
    dlvs = [snd.send(Message(body=i)) for i in range(3)]
    got = rcv.get_n(3)
    client.run_for(0.3)
    assert snd.credit == 0  # three unsettled: no more credit
    got[0].accept()
    assert snd.wait_outcome(dlvs[0]) == Delivery.ACCEPTED
    snd.wait_credit(1)
    assert snd.credit == 1


def test_transfer_without_credit_detaches_the_link(router):
    # no consumer: the router grants no credit; a raw client sends a transfer anyway
    raw = RawConn(router)
    try:
        raw.send(AMQP_HEADER + open_frame() + begin_frame() +
                 attach_sender_frame("limits.nocredit"))
        assert raw.read_until(lambda b: b"\x00\x53\x12" in b)  # the router's attach
        raw.send(transfer_frame(0, value_section(enc_str("no credit"))))
        assert raw.read_until(lambda b: b"amqp:link:transfer-limit-exceeded" in b)
    finally:
        raw.close()
    router.wait_log(r"Link closed: amqp:link:transfer-limit-exceeded")
    assert_serving(router)
