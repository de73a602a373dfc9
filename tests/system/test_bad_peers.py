"""Bad peers (issue 15, point 7): a broker that refuses attaches, detaches with errors, sends
transfers without credit or on a link it never attached, or speaks garbage after its open.
The router logs it (one line), shows it where qdrouterd does (the autoLink's `lastError`, the
connector's `connectionMsg`, the link-routed client's detach), and keeps serving everyone
else: a normal client's traffic through the same router keeps flowing, and a second broker's
autoLinks stay active with messages going through its waypoint.

The bad broker is written frame by frame on a plain socket (`RawBroker`, with amqp_raw.py's
encoders), since Proton would not misbehave; the good one is fake_broker.py (container
"broker").
"""

import socket
import struct
import time

import pytest
from proton import Message

from amqp_raw import _described, enc_list, enc_str, enc_sym, skip_value
from clients import Client, check_router_works
from conftest import router_entities
from mgmt_tool import Node
from test_autolink import AUTOLINKS, brokers, states, wait_states  # noqa: F401 (a fixture)

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"

# Performative codes (AMQP 1.0 part 2.7).
OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)

BAD_AUTOLINKS = [
    ["address", {"prefix": "bad", "waypoint": True}],
    ["autoLink", {"name": "bad-out", "address": "bad", "direction": "out",
                  "containerId": "bad"}],
    ["autoLink", {"name": "bad-in", "address": "bad", "direction": "in",
                  "containerId": "bad"}],
    ["linkRoute", {"name": "lr-bad-out", "prefix": "lrbad", "direction": "out",
                   "containerId": "bad"}],
    ["linkRoute", {"name": "lr-bad-in", "prefix": "lrbad", "direction": "in",
                   "containerId": "bad"}],
]


def uint(n):
    return b"\x70" + struct.pack(">I", n)


def frame(code, fields, channel=0, payload=b""):
    body = _described(code, enc_list(fields))
    return struct.pack(">IBBH", 8 + len(body) + len(payload), 2, 0, channel) + body + payload


def error(name, desc):
    return _described(0x1D, enc_list([enc_sym(name), enc_str(desc)]))


def decode_scalar(b):
    """The Python value of a few encoded scalars (null, bool, uint, ushort, str, sym)."""
    code = b[0]
    if code == 0x40:
        return None
    if code in (0x41, 0x42):
        return code == 0x41
    if code == 0x56:
        return b[1] != 0
    if code == 0x43:
        return 0
    if code in (0x52, 0x50):
        return b[1]
    if code == 0x60:
        return struct.unpack(">H", b[1:3])[0]
    if code == 0x70:
        return struct.unpack(">I", b[1:5])[0]
    if code in (0xA1, 0xA3):
        return bytes(b[2:2 + b[1]]).decode()
    if code in (0xB1, 0xB3):
        (n,) = struct.unpack(">I", b[1:5])
        return bytes(b[5:5 + n]).decode()
    return b  # anything else: its bytes


def list_fields(body, pos):
    """The encoded elements of the list at body[pos:], and the offset after the list."""
    code = body[pos]
    if code == 0x45:
        return [], pos + 1
    if code == 0xC0:
        size, count = body[pos + 1], body[pos + 2]
        at, end = pos + 3, pos + 2 + size
    elif code == 0xD0:
        size, count = struct.unpack(">II", body[pos + 1:pos + 9])
        at, end = pos + 9, pos + 5 + size
    else:
        raise ValueError("not a list: 0x%02x" % code)
    out = []
    for _ in range(count):
        nxt = skip_value(body, at)
        out.append(bytes(body[at:nxt]))
        at = nxt
    return out, end


def terminus_address(b):
    """The address of an encoded source or target (None for a null one)."""
    if b[0] == 0x40:
        return None
    fields, _ = list_fields(b, skip_value(b, 1) if b[0] == 0 else 0)
    return decode_scalar(fields[0]) if fields else None


SASL_HEADER = b"AMQP\x03\x01\x00\x00"


def sasl_serve(sock):
    """The server's side of SASL ANONYMOUS on an accepted socket (a connector's peer)."""
    def read_frame():
        head = b""
        while len(head) < 8:
            head += sock.recv(8 - len(head))
        size = struct.unpack(">I", head[:4])[0]
        body = b""
        while len(body) < size - 8:
            body += sock.recv(size - 8 - len(body))
        return body

    got = b""
    while len(got) < 8:
        got += sock.recv(8 - len(got))
    assert got == SASL_HEADER, got

    def sasl_frame(code, fields):
        body = _described(code, enc_list(fields))
        return struct.pack(">IBBH", 8 + len(body), 2, 1, 0) + body

    sock.sendall(SASL_HEADER + sasl_frame(0x40, [enc_sym("ANONYMOUS")]))
    assert read_frame()[2] == 0x41  # sasl-init
    sock.sendall(sasl_frame(0x44, [b"\x50\x00"]))  # sasl-outcome: ok


class RawBroker:
    """A route container on a plain socket: it connects to the router's route-container
    listener as container `container`, answers the router's begins, and answers each attach
    the router makes (its autoLinks) as `on_attach(link)` says: "accept" (the node named, and
    credit for the router's sending links) or ("refuse", condition, description).  It
    records what the router sent; the test makes it misbehave with `send()`."""

    def __init__(self, host, port, container="bad", on_attach=lambda link: "accept",
                 sock=None):
        self.s = sock or socket.create_connection((host, port), timeout=5)
        self.container = container
        self.on_attach = on_attach
        self.buf = bytearray()
        self.header_seen = False
        self.frames = []  # (channel, code, [encoded fields]) as they came
        self.sessions = {}  # the router's channel -> ours
        self.links = {}  # (our channel, name) -> dict of the link
        self.next_channel = 0
        self.next_handle = 0
        self.next_delivery = {}  # our channel -> next delivery-id
        self.closed = False
        self.send(AMQP_HEADER + frame(OPEN, [enc_str(container), b"\x40", uint(65536)]))

    def send(self, data):
        try:
            self.s.sendall(data)
        except OSError:
            self.closed = True  # the router ended the connection

    def pump(self, seconds=0.2):
        """Read and answer what the router says for `seconds`."""
        end = time.monotonic() + seconds
        while time.monotonic() < end and not self.closed:
            self.s.settimeout(max(0.01, end - time.monotonic()))
            try:
                chunk = self.s.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                self.closed = True
                break
            self.buf.extend(chunk)
            self._parse()

    def wait(self, cond, timeout=10.0, what="condition"):
        end = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > end:
                raise AssertionError("raw broker: timed out waiting for %s; frames %r" % (
                    what, [(ch, hex(c)) for ch, c, _ in self.frames]))
            self.pump(0.05)

    def _parse(self):
        if not self.header_seen:
            if len(self.buf) < 8:
                return
            assert bytes(self.buf[:8]) == AMQP_HEADER, bytes(self.buf[:8])
            del self.buf[:8]
            self.header_seen = True
        while len(self.buf) >= 8:
            size, doff, _, ch = struct.unpack(">IBBH", self.buf[:8])
            if len(self.buf) < size:
                return
            body = bytes(self.buf[doff * 4:size])
            del self.buf[:size]
            if not body:
                continue  # an empty frame (heartbeat)
            code = body[2]
            fields, _ = list_fields(body, 3)
            self.frames.append((ch, code, fields))
            self._answer(ch, code, fields)

    def _answer(self, ch, code, fields):
        if code == BEGIN and decode_scalar(fields[0]) is None:
            # the router's own session: answered on a channel of ours
            mine = self.next_channel + 1
            self.next_channel = mine
            self.sessions[ch] = mine
            self.next_delivery[mine] = 0
            self.send(frame(BEGIN, [b"\x60" + struct.pack(">H", ch), uint(0),
                                    uint(0x7FFFFFFF), uint(0x7FFFFFFF)], mine))
        elif code == BEGIN:
            self.sessions[ch] = decode_scalar(fields[0])
        elif code == ATTACH:
            mine = self.sessions[ch]
            link = {"name": decode_scalar(fields[0]), "theirs": decode_scalar(fields[1]),
                    "router_sends": not decode_scalar(fields[2]), "source": fields[5],
                    "target": fields[6], "channel": mine, "handle": self.next_handle,
                    "detached": False}
            link["address"] = terminus_address(fields[6] if link["router_sends"]
                                               else fields[5])
            self.next_handle += 1
            self.links[(mine, link["name"])] = link
            how = self.on_attach(link)
            src, tgt = link["source"], link["target"]
            if how != "accept":  # as brokers refuse: no node, then the detach with the error
                if link["router_sends"]:
                    tgt = b"\x40"
                else:
                    src = b"\x40"
            role = b"\x41" if link["router_sends"] else b"\x42"
            extra = [] if link["router_sends"] else [b"\x40", b"\x40", uint(0)]
            self.send(frame(ATTACH, [enc_str(link["name"]), uint(link["handle"]), role,
                                     b"\x40", b"\x40", src, tgt] + extra, mine))
            if how != "accept":
                self.send(frame(DETACH, [uint(link["handle"]), b"\x41", error(*how[1:])], mine))
                link["detached"] = True
            elif link["router_sends"]:
                self.flow(link, 0, 100)
        elif code == DETACH:
            mine = self.sessions.get(ch)
            handle = decode_scalar(fields[0])
            for link in self.links.values():
                if link["channel"] == mine and link["theirs"] == handle and \
                        not link["detached"]:
                    link["detached"] = True
                    self.send(frame(DETACH, [uint(link["handle"]), b"\x41"], mine))

    # ---- what a test makes it do ----
    def link(self, address, router_sends):
        """The newest live link of the router's on `address` in that direction, or None."""
        found = None
        for link in self.links.values():
            if link["address"] == address and link["router_sends"] == router_sends and \
                    not link["detached"]:
                found = link
        return found

    def flow(self, link, delivery_count, credit):
        self.send(frame(FLOW, [uint(0), uint(0x7FFFFFFF), uint(0), uint(0x7FFFFFFF),
                               uint(link["handle"]), uint(delivery_count), uint(credit)],
                        link["channel"]))

    def transfer(self, link, body, handle=None):
        ch = link["channel"] if link else 1
        did = self.next_delivery.get(ch, 0)
        self.next_delivery[ch] = did + 1
        tag = b"\xa0\x04" + struct.pack(">I", did)
        self.send(frame(TRANSFER, [uint(link["handle"] if handle is None else handle), uint(did),
                                   tag, uint(0), b"\x42"], ch, Message(body=body).encode()))

    def detach(self, link, cond, desc):
        link["detached"] = True
        self.send(frame(DETACH, [uint(link["handle"]), b"\x41", error(cond, desc)],
                        link["channel"]))

    def performatives(self, code):
        return [f for ch, c, f in self.frames if c == code]

    def router_error(self, code):
        """(condition, description) of the newest `code` frame (DETACH/CLOSE) with an error."""
        at = {DETACH: 2, CLOSE: 0, END: 0}[code]
        for fields in reversed(self.performatives(code)):
            if len(fields) > at and fields[at][0] == 0x00:
                err, _ = list_fields(fields[at], 3)
                return decode_scalar(err[0]), decode_scalar(err[1]) if len(err) > 1 else None
        return None

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


# ---------------------------------------------------------------- fixtures

@pytest.fixture
def bad_router(make_router):
    """A router with a normal listener (first) and a route-container one (second), waypoint
    addresses `queue` (the good broker's, container "broker") and `bad` (container "bad")."""
    return make_router(entities=router_entities(
        listeners=[{"host": "127.0.0.1", "port": "0"},
                   {"host": "127.0.0.1", "port": "0", "role": "route-container",
                    "name": "brokers"}],
        extra=AUTOLINKS + BAD_AUTOLINKS))


@pytest.fixture
def node(bad_router):
    n = Node(bad_router.url)
    yield n
    n.close()


@pytest.fixture
def good(bad_router, node, brokers):
    """The good broker, its autoLinks active."""
    b = brokers(bad_router.url_of(1))
    end = time.monotonic() + 15
    while time.monotonic() < end:
        s = states(node)
        if s["q-out"][0] == "active" and s["q-in"][0] == "active":
            break
        time.sleep(0.1)
    assert states(node)["q-in"][0] == "active", states(node)
    return b


@pytest.fixture
def raws(bad_router):
    made = []

    def make(**kw):
        h, p = bad_router.addresses[1]
        b = RawBroker(h, p, **kw)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()


def wait_state(node, name, status, timeout=10.0, pump=None):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        s = states(node)[name]
        if s[0] == status:
            return s
        if pump:
            pump.pump(0.1)
        else:
            time.sleep(0.1)
    raise AssertionError("autoLink %s never became %s: %r" % (name, status, states(node)))


def everyone_else_is_served(router, node, good, tag):
    """A normal client's traffic flows, the good broker's autoLinks are active, and a message
    goes producer -> router -> good broker's queue -> router -> consumer."""
    check_router_works(router.url)
    s = states(node)
    assert s["q-out"][0] == "active" and s["q-in"][0] == "active", s
    c = Client()
    try:
        conn = c.connect(router.url)
        snd = conn.sender("queue")
        d = snd.send(Message(body=tag))
        assert snd.wait_outcome(d) == d.ACCEPTED
        rcv = conn.receiver("queue", credit=5, settle="accept")
        assert rcv.get(timeout=10).body == tag
        good.wait_line("outcome %s accepted" % tag, client=c)
    finally:
        c.close()


def log_lines(router, text):
    return [x for x in router.stderr_lines() if text in x]


def wait_lines(router, text, n, timeout=10.0):
    """The router's lines holding text, once there are at least n (different threads write
    them, in either order) or the timeout has passed."""
    end = time.monotonic() + timeout
    while len(log_lines(router, text)) < n and time.monotonic() < end:
        time.sleep(0.05)
    return log_lines(router, text)


# ---------------------------------------------------------------- autoLinks on a bad broker

def test_refused_attaches(bad_router, node, good, raws):
    bad = raws(on_attach=lambda link: ("refuse", "amqp:unauthorized-access",
                                       "no access to %s" % link["address"]))
    wait_state(node, "bad-out", "failed", pump=bad)
    s = wait_state(node, "bad-in", "failed", pump=bad)
    assert s[1] == "no access to bad", s
    assert len(log_lines(bad_router, "Auto link detached by the peer: "
                                     "amqp:unauthorized-access no access to bad")) >= 2
    everyone_else_is_served(bad_router, node, good, "after-refusal")


def test_detach_with_an_error_after_the_attach(bad_router, node, good, raws):
    bad = raws()
    wait_state(node, "bad-in", "active", pump=bad)
    wait_state(node, "bad-out", "active", pump=bad)
    bad.detach(bad.link("bad", router_sends=False), "amqp:resource-deleted", "queue bad deleted")
    s = wait_state(node, "bad-in", "failed", pump=bad)
    assert s[1] == "queue bad deleted", s
    assert states(node)["bad-out"][0] == "active"  # only that link went
    lines = log_lines(bad_router, "amqp:resource-deleted queue bad deleted")
    assert len(lines) == 1, lines
    everyone_else_is_served(bad_router, node, good, "after-detach")
    # attached again (qdrouterd: 2 s after a failure), and it works: a message the bad broker
    # sends reaches a consumer of `bad`
    wait_state(node, "bad-in", "active", timeout=10, pump=bad)
    c = Client()
    try:
        rcv = c.connect(bad_router.url).receiver("bad", credit=5, settle="accept")
        link = bad.link("bad", router_sends=False)
        bad.wait(lambda: any(decode_scalar(f[4]) == link["theirs"] and decode_scalar(f[6])
                             for f in bad.performatives(FLOW) if len(f) > 6),
                 what="the router's credit on the new link")
        bad.transfer(link, "from-bad")
        c.wait(lambda: rcv.queue or bad.pump(0.02), msg="the bad broker's message")
        assert rcv.get().body == "from-bad"
    finally:
        c.close()


def test_transfer_without_credit_on_an_autolink(bad_router, node, good, raws):
    """The router gave the in-autoLink no credit (nobody consumes `bad`): a transfer on it is
    a protocol error - the link is detached with amqp:link:transfer-limit-exceeded, the
    autoLink fails with that in lastError and is attached again later; nothing else stops."""
    bad = raws()
    wait_state(node, "bad-in", "active", pump=bad)
    link = bad.link("bad", router_sends=False)
    bad.pump(0.3)
    assert not [f for f in bad.performatives(FLOW) if len(f) > 6 and decode_scalar(f[6])]
    bad.transfer(link, "uninvited")
    s = wait_state(node, "bad-in", "failed", pump=bad)
    assert s[1] == "a transfer without link credit", s
    bad.wait(lambda: bad.router_error(DETACH), what="the router's detach")
    assert bad.router_error(DETACH) == ("amqp:link:transfer-limit-exceeded",
                                        "a transfer without link credit")
    lines = log_lines(bad_router, "amqp:link:transfer-limit-exceeded")
    assert len(lines) == 1, lines
    everyone_else_is_served(bad_router, node, good, "after-no-credit")
    wait_state(node, "bad-in", "active", timeout=10, pump=bad)
    assert not bad.closed


def test_transfer_on_a_link_never_attached(bad_router, node, good, raws):
    bad = raws()
    wait_state(node, "bad-in", "active", pump=bad)
    bad.transfer(None, "nowhere", handle=77)
    bad.wait(lambda: bad.closed or bad.performatives(CLOSE), what="the router's close")
    cond = bad.router_error(CLOSE)
    assert cond and cond[0].startswith("amqp:"), cond
    assert cond == ("amqp:invalid-field", "no such handle: 77"), cond
    wait_state(node, "bad-in", "inactive")
    wait_state(node, "bad-out", "inactive")
    bad_router.wait_log(r"Connection from .* failed: amqp:invalid-field no such handle: 77$")
    assert len(log_lines(bad_router, "no such handle")) == 1
    everyone_else_is_served(bad_router, node, good, "after-bad-handle")


def test_garbage_after_open(bad_router, node, good, raws):
    bad = raws()
    wait_state(node, "bad-in", "active", pump=bad)
    bad.send(b"\x00\x00\x00\x10\x02\x00\x00\x00" + b"\xde\xad\xbe\xef" * 2)
    bad.wait(lambda: bad.closed, what="the router to drop the connection")
    wait_state(node, "bad-in", "inactive")
    wait_state(node, "bad-out", "inactive")
    bad_router.wait_log(r"Connection from .* closed: amqp:connection:framing-error frame body "
                        r"does not start with a described list$")
    bad_router.wait_log(r"Auto Link Deactivated 'bad-in'")
    assert len(log_lines(bad_router, "framing-error")) == 1, bad_router.lines
    everyone_else_is_served(bad_router, node, good, "after-garbage")


ERRANT = "a transfer on a link where the router sends"


def test_transfer_on_the_routers_sending_autolink(bad_router, node, good, raws):
    """The broker sends on the out-autoLink, where it is the receiver.  Proton takes such a
    transfer for a delivery of the router's own, queued to go out, which would hold the
    link's detach and the connection's close back for good: the link is dropped, the
    connection ends with amqp:not-allowed, and the autoLink keeps the error in lastError."""
    bad = raws()
    wait_state(node, "bad-out", "active", pump=bad)
    link = bad.link("bad", router_sends=True)
    for i in range(3):
        bad.transfer(link, "backwards-%d" % i)
    bad.wait(lambda: bad.closed, what="the router to end the connection")
    assert not bad.performatives(TRANSFER)  # nothing came back
    s = wait_state(node, "bad-out", "inactive")
    assert s[1] == ERRANT, s
    bad_router.wait_log(r"\[C\d+\] Connection from .* failed: amqp:not-allowed %s" % ERRANT)
    assert len(wait_lines(bad_router, ERRANT, 2)) == 2, bad_router.lines  # and the autoLink's
    everyone_else_is_served(bad_router, node, good, "after-backwards")
    # the broker comes back, behaving: the new link works
    bad = raws()
    wait_state(node, "bad-out", "active", pump=bad)
    c = Client()
    try:
        snd = c.connect(bad_router.url).sender("bad")
        snd.send(Message(body="to-bad"))
        bad.wait(lambda: bad.performatives(TRANSFER) or c.run_for(0.02),
                 what="the router's transfer")
    finally:
        c.close()


def test_client_sending_on_its_receiving_link(bad_router, node, good):
    """The same from a client (raw frames): its connection ends, everyone else goes on."""
    from test_conn_budget import attach_receiver_frame, begin_frame, open_frame, performatives
    h, p = bad_router.addresses[0]
    s = socket.create_connection((h, p), timeout=5)
    try:
        s.sendall(AMQP_HEADER + open_frame("backwards") + begin_frame(0) +
                  attach_receiver_frame(0, "plain.q", "r"))
        data = bytearray()
        end = time.monotonic() + 5
        while performatives(bytes(data), ATTACH) < 1 and time.monotonic() < end:
            data.extend(s.recv(65536))
        s.sendall(frame(TRANSFER, [uint(0), uint(0), b"\xa0\x01t", uint(0), b"\x42"], 0,
                        Message(body="backwards").encode()))
        end = time.monotonic() + 5
        while time.monotonic() < end:
            chunk = s.recv(65536)
            if not chunk:
                break
            data.extend(chunk)
        assert not chunk, "the router did not end the connection"
        assert performatives(bytes(data), TRANSFER) == 0
    finally:
        s.close()
    bad_router.wait_log(r"Connection from .* failed: amqp:not-allowed %s" % ERRANT)
    assert len(log_lines(bad_router, ERRANT)) == 1
    everyone_else_is_served(bad_router, node, good, "after-client-backwards")


# ---------------------------------------------------------------- link routes to a bad broker

def routed_link(bad_router, bad, c, address, client_sends):
    """A client link on `address`, routed to the bad broker: (client link, broker's link)."""
    bad_router.wait_log(r"Link routes activated: \d+ \(container bad\)")
    conn = c.connect(bad_router.url)
    if client_sends:
        cl = conn.sender(address, wait=False)
    else:
        cl = conn.receiver(address, credit=0, auto_credit=False, wait=False)
    bad.wait(lambda: bad.link(address, router_sends=client_sends) or c.run_for(0.02),
             what="the routed attach")
    c.wait(lambda: cl.pn.state & cl.pn.REMOTE_ACTIVE or bad.pump(0.02),
           msg="the client's link attached")
    return cl, bad.link(address, router_sends=client_sends)


def test_transfer_without_credit_on_a_link_routed_link(bad_router, node, good, raws):
    """A client's receiver routed to the bad broker, which sends although the client gave no
    credit: the broker's link is detached with amqp:link:transfer-limit-exceeded, and so is
    the client's, instead of the router holding whatever the broker sends."""
    bad = raws()
    c = Client()
    try:
        rcv, link = routed_link(bad_router, bad, c, "lrbad.q", client_sends=False)
        for i in range(5):
            bad.transfer(link, "uninvited-%d" % i)
        bad.wait(lambda: bad.router_error(DETACH), what="the router's detach")
        assert bad.router_error(DETACH) == ("amqp:link:transfer-limit-exceeded",
                                            "a transfer without link credit")
        c.wait(lambda: rcv.is_remote_closed(), msg="the client's link detached")
        assert rcv.remote_condition.name == "amqp:link:transfer-limit-exceeded"
        assert len(rcv.queue) == 0
        lines = log_lines(bad_router, "amqp:link:transfer-limit-exceeded (a transfer")
        assert len(lines) == 1, lines
        # the broker's connection is still there: a new routed link works
        rcv2, link2 = routed_link(bad_router, bad, c, "lrbad.q2", client_sends=False)
        rcv2.flow(1)
        bad.wait(lambda: any(decode_scalar(f[4]) == link2["theirs"] and decode_scalar(f[6])
                             for f in bad.performatives(FLOW) if len(f) > 6) or
                 c.run_for(0.02), what="the client's credit at the broker")
        bad.transfer(link2, "invited")
        c.wait(lambda: rcv2.queue or bad.pump(0.02), msg="the invited message")
        assert rcv2.get().body == "invited"
    finally:
        c.close()
    assert not bad.closed
    everyone_else_is_served(bad_router, node, good, "after-lr-no-credit")


def test_transfer_from_the_receiving_broker_on_a_link_routed_link(bad_router, node, good, raws):
    """A client's sender routed to the bad broker, which sends on it (it is the receiver):
    the broker's connection ends as above, the client's link is detached with the error."""
    bad = raws()
    c = Client()
    try:
        snd, link = routed_link(bad_router, bad, c, "lrbad.in", client_sends=True)
        bad.transfer(link, "backwards")
        bad.wait(lambda: bad.closed, what="the router to end the connection")
        c.wait(lambda: snd.is_remote_closed(), msg="the client's link detached")
        assert snd.remote_condition.name == "amqp:not-allowed"
        assert snd.remote_condition.description == ERRANT
        assert not snd.conn.is_gone()
    finally:
        c.close()
    everyone_else_is_served(bad_router, node, good, "after-lr-backwards")


# ---------------------------------------------------------------- a connector to a bad broker

def test_connector_to_a_broker_speaking_garbage(make_router, brokers):
    """The router's connector reaches a broker that speaks garbage after its open: the
    connection ends with one line, the connector's connectionMsg says why, the connector
    connects again, and the broker, behaving this time, gets its autoLinks."""
    lsn = socket.socket()
    lsn.bind(("127.0.0.1", 0))
    lsn.listen(4)
    lsn.settimeout(15)
    r = make_router(entities=router_entities(
        listeners=[{"host": "127.0.0.1", "port": "0"},
                   {"host": "127.0.0.1", "port": "0", "role": "route-container",
                    "name": "brokers"}],
        extra=AUTOLINKS + BAD_AUTOLINKS + [
            ["connector", {"name": "to-bad", "host": "127.0.0.1",
                           "port": str(lsn.getsockname()[1]), "role": "route-container"}]]))
    node = Node(r.url)
    made = []
    try:
        good = brokers(r.url_of(1))
        wait_states(node, {"q-out": "active", "q-in": "active", "bad-out": "inactive",
                           "bad-in": "inactive"})
        sock, _ = lsn.accept()
        sasl_serve(sock)
        bad = RawBroker(None, None, sock=sock)
        made.append(bad)
        wait_state(node, "bad-in", "active", pump=bad)
        bad.send(b"\x00\x00\x00\x10\x02\x00\x00\x00" + b"\xde\xad\xbe\xef" * 2)
        bad.wait(lambda: bad.closed, what="the router to drop the connection")
        wait_state(node, "bad-in", "inactive")
        want = "amqp:connection:framing-error frame body does not start with a described list"
        r.wait_log(r"Connection to 127.0.0.1:\d+ failed: " + want)
        row = node.query_dicts("connector")[0]
        assert want in row["connectionMsg"], row
        assert len(log_lines(r, "framing-error")) == 1, r.lines
        everyone_else_is_served(r, node, good, "after-connector-garbage")
        # qdrouterd's delay after an open connection ends: 2 s; the broker behaves now
        sock, _ = lsn.accept()
        sasl_serve(sock)
        bad = RawBroker(None, None, sock=sock)
        made.append(bad)
        wait_state(node, "bad-in", "active", pump=bad)
        wait_state(node, "bad-out", "active", pump=bad)
        row = node.query_dicts("connector")[0]
        assert row["connectionStatus"] == "SUCCESS" and row["connectionMsg"] == "", row
    finally:
        for b in made:
            b.close()
        lsn.close()
        node.close()
