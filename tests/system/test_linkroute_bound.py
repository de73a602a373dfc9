"""Link routes bound the bytes the router holds for a link-routed link (docs/decisions/0006):
credit bounds deliveries, not bytes, so a 50 MB message streamed through a link route toward a
peer that reads slowly must not make the router hold it all.  The router takes the sender's
bytes only as fast as the other side's socket takes them, by letting the sender's session
window close; the sockets are read all the while, so two links in opposite directions over
the same two connections never wait on each other.

How the bound is checked: the router's VmRSS is sampled every 5 ms while the message goes
through; its peak less the RSS after a warm-up (links attached, a small message each way) is
the growth, which must stay under GROWTH_MAX_MB for one 50 MB message (under 2 x for two
at once) - far below the message, which a router that buffers it exceeds.  The message must
arrive byte for byte (SHA-256), and be accepted.

The slow peer is a broker written with Proton-Python on its own thread: it connects to the
router's route-container listener, stops its whole event loop for a while on the first bytes
of a large message (nothing read from or written to its socket), then reads at most
BROKER_RATE bytes a second.  The client is the test's thread; in the two-way test it, too,
runs only part of the time.
"""

import hashlib
import os
import threading
import time

import pytest
from proton import Delivery, Endpoint, Handler, Message
from proton.reactor import Container

from conftest import router_entities, sanitizer_runtime
from test_large import RssSampler

MB = 1024 * 1024
BROKER_ID = "slow-broker"
SIZE = 50 * MB
BROKER_PAUSE = 2.0  # seconds the broker's loop stops on the first bytes of a large message
BROKER_RATE = 12 * MB  # bytes a second it reads after that
GROWTH_MAX_MB = 25  # one 50 MB message through a link route (see the module comment)

LINK_ROUTES = [
    ["linkRoute", {"name": "lrIn", "prefix": "big.in", "direction": "in",
                   "containerId": BROKER_ID}],
    ["linkRoute", {"name": "lrOut", "prefix": "big.out", "direction": "out",
                   "containerId": BROKER_ID}],
]


class SlowBroker(threading.Thread):
    """Receives on the links the router attaches where it sends (one credit at a time,
    accepting each message, keeping its SHA-256 and length), and sends what `put` queued
    on the links where it receives, 256 kB at a time as the session drains."""

    def __init__(self, url):
        super().__init__(daemon=True)
        self.url = url
        self.lock = threading.Lock()
        self.opened = threading.Event()
        self.error = None
        self.received = {}  # address -> [(sha256 hex, length)]
        self.to_send = {}  # address -> [payload]
        self.sent = {}  # address -> [outcome]
        self.pauses = 0
        self.stop_flag = False

    def put(self, address, data):
        """Queue a message to send, already encoded (encoding 50 MB takes seconds: in the
        broker's thread it would hold the interpreter lock from the test's client, which
        would send no heartbeat meanwhile)."""
        with self.lock:
            self.to_send.setdefault(address, []).append(data)

    def got(self, address):
        with self.lock:
            return list(self.received.get(address, []))

    def outcomes(self, address):
        with self.lock:
            return list(self.sent.get(address, []))

    def stop(self):
        self.stop_flag = True
        self.join(10)

    def run(self):
        try:
            c = Container(_SlowHandler(self))
            c.container_id = BROKER_ID
            c.run()
        except Exception as e:  # reported by the test through .error
            self.error = e
            self.opened.set()


class _SlowHandler(Handler):
    SLICE = 256 * 1024

    def __init__(self, b):
        self.b = b
        self.rx = {}  # receiver link -> (sha256, length, delivery)
        self.tx = []  # [sender link, data, pos, delivery]
        self.paused = False
        self.t0 = None  # when reading at BROKER_RATE began
        self.n = 0  # bytes read since

    def on_reactor_init(self, event):
        self.conn = event.container.connect(self.b.url, reconnect=False, sasl_enabled=True,
                                            allowed_mechs="ANONYMOUS")
        event.container.schedule(0.005, self)

    def on_connection_remote_open(self, event):
        self.b.opened.set()

    def on_session_remote_open(self, event):
        if not event.session.state & Endpoint.LOCAL_ACTIVE:
            event.session.open()

    def on_link_remote_open(self, event):
        link = event.link
        term = link.remote_target if link.is_receiver else link.remote_source
        if link.is_receiver:
            link.target.address = term.address
        else:
            link.source.address = term.address
        link.open()
        if link.is_receiver:
            link.flow(1)

    def on_timer_task(self, event):
        if self.b.stop_flag:
            self.conn.close()
            event.container.stop()
            return
        self.feed()
        event.container.schedule(0.005, self)

    def on_link_flow(self, event):
        self.feed()

    def feed(self):
        """Start what `put` queued on links with credit, and stream the started ones."""
        link = self.conn.link_head(Endpoint.LOCAL_ACTIVE)
        while link:
            if link.is_sender and link.credit > 0 and not any(t[0] is link for t in self.tx):
                with self.b.lock:
                    q = self.b.to_send.get(link.source.address) or []
                    data = q.pop(0) if q else None
                if data is not None:
                    dlv = link.delivery(str(time.monotonic_ns()))
                    dlv.jn_addr = link.source.address
                    self.tx.append([link, data, 0, dlv])
            link = link.next(Endpoint.LOCAL_ACTIVE)
        for t in list(self.tx):
            link, data, pos = t[0], t[1], t[2]
            while pos < len(data) and link.session.outgoing_bytes < 1024 * 1024:
                link.stream(data[pos:pos + self.SLICE])
                pos += self.SLICE
            t[2] = pos
            if pos >= len(data):
                link.advance()
                self.tx.remove(t)

    def on_delivery(self, event):
        dlv = event.delivery
        link = event.link
        if link.is_sender:
            if dlv.remote_state and dlv.settled:
                with self.b.lock:
                    self.b.sent.setdefault(dlv.jn_addr, []).append(dlv.remote_state)
                dlv.settle()
            return
        if dlv.aborted:
            dlv.settle()
            link.advance()
            return
        if dlv.pending and not self.paused and (dlv.pending >= 64 * 1024 or dlv.partial):
            # a large message begins: the whole loop stops (the router's writes fill the
            # socket), then reads at BROKER_RATE
            self.paused = True
            self.b.pauses += 1
            time.sleep(BROKER_PAUSE)
            self.t0 = time.monotonic()
        h, n = self.rx.get(link, (hashlib.sha256(), 0))
        while dlv.pending:
            chunk = link.recv(min(dlv.pending, 64 * 1024))
            if not chunk:
                break
            h.update(chunk)
            n += len(chunk)
            self.n += len(chunk)
        self.rx[link] = (h, n)
        if self.t0 is not None:
            ahead = self.t0 + self.n / BROKER_RATE - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        if dlv.partial:
            return
        del self.rx[link]
        link.advance()
        with self.b.lock:
            self.b.received.setdefault(link.target.address, []).append((h.hexdigest(), n))
        dlv.update(Delivery.ACCEPTED)
        dlv.settle()
        link.flow(1)


def encoded(payload):
    return Message(body=payload, inferred=True).encode()


def digest(data):
    """The SHA-256 and length of an encoded message, as the broker records it."""
    return hashlib.sha256(data).hexdigest(), len(data)


@pytest.fixture(scope="module")
def big():
    """Two 50 MB bodies and their encodings, made before any router, broker or client: it
    takes seconds, in which a client or broker of this process would send no heartbeat
    (Proton's encoder holds the interpreter lock) and a loaded machine could stretch that
    past an idle timeout."""
    up, down = os.urandom(SIZE), os.urandom(SIZE)
    return up, encoded(up), down, encoded(down)


@pytest.fixture
def bound_router(make_router):
    # Under AddressSanitizer freed memory waits in a quarantine instead of being reused,
    # which would make the RSS grow with every byte forwarded: turn it off for this router.
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(o for o in (env.get("ASAN_OPTIONS"), "quarantine_size_mb=0")
                                   if o)
    ents = router_entities(
        listeners=[{"host": "127.0.0.1", "port": "0"},
                   {"host": "127.0.0.1", "port": "0", "role": "route-container",
                    "name": "brokers"}],
        extra=LINK_ROUTES)
    return make_router(entities=ents, env=env)


@pytest.fixture
def slow_broker(bound_router):
    b = SlowBroker(bound_router.url_of(1))
    b.start()
    assert b.opened.wait(10), "the broker did not connect"
    assert b.error is None, b.error
    bound_router.wait_log(r"Link routes activated: \d+ \(container %s\)" % BROKER_ID)
    yield b
    b.stop()
    assert b.error is None, b.error


def check_growth(router, base, peak, limit_mb, what):
    growth_mb = (peak - base) / 1024.0
    print("%s: router RSS base %.1f MB, peak %.1f MB, growth %.1f MB" %
          (what, base / 1024.0, peak / 1024.0, growth_mb))
    runtime = sanitizer_runtime(router.pid)
    if runtime == "tsan":
        return  # TSan's allocator keeps freed memory for its race history
    if runtime == "asan":
        # ASan's allocator (the pools off) keeps each size class's chunks resident: the
        # connection's 64 KiB read buffers (router/zin.h) and the messages' chain buffers
        # take separate classes, so its peak runs 20-25 MB where the release build's stays
        # near 12.5 MB, as before the read buffers existed
        limit_mb *= 1.4
    assert growth_mb < limit_mb, "router RSS grew by %.1f MB: %s (base %.1f MB, peak " \
        "%.1f MB)" % (growth_mb, what, base / 1024.0, peak / 1024.0)


@pytest.mark.slow
@pytest.mark.deadline(180)
def test_large_message_to_slow_broker_is_bounded(big, bound_router, slow_broker, client):
    """A client streams one 50 MB message through a link route to a broker that stops
    reading, then reads slowly: the router holds a bounded part of it, all of it arrives."""
    conn = client.connect(bound_router.url_of(0))
    snd = conn.sender("big.in.q")
    warm = snd.send(Message(body="warm-up"))  # small: the broker reads it at once
    assert snd.wait_outcome(warm) == Delivery.ACCEPTED
    base = bound_router.rss_kb()
    data = big[1]
    want = digest(data)
    sampler = RssSampler(bound_router.pid)
    sampler.start()
    try:
        dlv = snd.send_raw(data)
        assert snd.wait_outcome(dlv, timeout=150) == Delivery.ACCEPTED
    finally:
        peak = sampler.stop()
    assert slow_broker.pauses == 1
    assert slow_broker.got("big.in.q")[1:] == [want]
    assert sampler.samples > 10
    check_growth(bound_router, base, peak, GROWTH_MAX_MB, "one 50 MB message to a slow broker")


@pytest.mark.slow
@pytest.mark.deadline(240)
def test_both_directions_over_shared_connections(big, bound_router, slow_broker, client):
    """One client connection (one session) sends a 50 MB message to the broker and receives
    a 50 MB message from it, both link-routed over the same broker connection, while each
    peer runs only part of the time: neither direction waits for the other (no deadlock),
    both arrive byte for byte, and the router's memory stays bounded."""
    conn = client.connect(bound_router.url_of(0))
    snd = conn.sender("big.in.two")
    rcv = conn.receiver("big.out.two", credit=1, settle="accept")
    warm = snd.send(Message(body="warm-up"))
    assert snd.wait_outcome(warm) == Delivery.ACCEPTED
    slow_broker.put("big.out.two", encoded(b"warm-up"))
    assert rcv.get().message.body == b"warm-up"
    base = bound_router.rss_kb()
    _, up_data, down, down_data = big
    want_up = digest(up_data)
    want_down = hashlib.sha256(down).hexdigest()
    sampler = RssSampler(bound_router.pid)
    sampler.start()
    try:
        slow_broker.put("big.out.two", down_data)
        dlv = snd.send_raw(up_data)
        end = time.monotonic() + 200
        # the client runs a third of the time: the router's writes to it back up too
        while not (dlv.remote_state and dlv.settled and len(rcv.queue) > 0):
            assert time.monotonic() < end, "stuck: outcome %s, %d received, broker got %s" % (
                dlv.remote_state, len(rcv.queue), slow_broker.got("big.in.two"))
            client.run_for(0.05)
            time.sleep(0.1)
    finally:
        peak = sampler.stop()
    assert dlv.remote_state == Delivery.ACCEPTED
    assert slow_broker.got("big.in.two")[1:] == [want_up]
    g = rcv.get()
    assert hashlib.sha256(g.message.body).hexdigest() == want_down
    client.wait(lambda: len(slow_broker.outcomes("big.out.two")) == 2,
                msg="the client's outcomes at the broker")
    assert slow_broker.outcomes("big.out.two") == [Delivery.ACCEPTED] * 2
    check_growth(bound_router, base, peak, 2 * GROWTH_MAX_MB,
                 "two 50 MB messages, one each way over shared connections")
