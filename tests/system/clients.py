"""Proton-Python clients for the system tests.

A `Client` owns one Proton container and is driven from the test's own thread: nothing runs in
the background, so a test can look at (and change) any Proton object between two calls to
`Client.wait()`.  Every wait has a timeout and raises `WaitTimeout` (an AssertionError, so it
reads as a test failure) instead of hanging.

    client = Client()
    conn = client.connect(router.url)
    rcv = conn.receiver("q1", credit=10)            # grants 10 credits, tops up per message
    snd = conn.sender("q1")                         # waits for the attach to complete
    dlv = snd.send(Message(body="hi"))              # waits for credit, returns the Delivery
    got = rcv.get()                                 # a Received: .message, .delivery, .raw
    got.accept()
    assert snd.wait_outcome(dlv) == Delivery.ACCEPTED
    client.close()

Receivers never settle on their own unless created with settle="accept" (accept and settle
each message on arrival) or settle="release"/"reject".  Senders never settle on their own
either: the tests read `delivery.remote_state` and `delivery.settled` (remotely settled).
"""

import collections
import os
import select
import socket
import threading
import time

from proton import Condition, Delivery, Endpoint, Handler, Link, Message, symbol
from proton.reactor import AtMostOnce, Container

DEFAULT_TIMEOUT = float(os.environ.get("JUNCTION_TEST_TIMEOUT", "10"))

OUTCOME_NAMES = {
    0: "none",
    Delivery.RECEIVED: "RECEIVED",
    Delivery.ACCEPTED: "ACCEPTED",
    Delivery.REJECTED: "REJECTED",
    Delivery.RELEASED: "RELEASED",
    Delivery.MODIFIED: "MODIFIED",
}


class WaitTimeout(AssertionError):
    """A condition the test waited for did not become true in time."""


def outcome_name(state):
    return OUTCOME_NAMES.get(state, str(state))


def symbols(value):
    """A capability list as Proton returns it (Array, list, symbol or None) as a list of str."""
    if value is None:
        return []
    if isinstance(value, (str, symbol)):
        return [str(value)]
    elements = getattr(value, "elements", None)
    if elements is not None:
        return [str(e) for e in elements]
    return [str(e) for e in value]


class Received:
    """One complete incoming message."""

    def __init__(self, rcv, delivery, raw):
        self.receiver = rcv
        self.delivery = delivery
        self.raw = bytes(raw)  # the message bytes exactly as they arrived
        self._decoded = False
        self._message = None
        self._decode_error = None

    def _decode(self):
        """Decoded when first asked for, not in the event handler: a test that checks only
        the raw bytes of a large message keeps its client pumping (heartbeats) meanwhile."""
        if self._decoded:
            return
        self._decoded = True
        try:
            m = Message()
            m.decode(self.raw)
            self._message = m
        except Exception as e:  # a test may send something Proton cannot decode
            self._decode_error = e

    @property
    def message(self):
        """The decoded Message, or None if Proton could not decode it."""
        self._decode()
        return self._message

    @property
    def decode_error(self):
        self._decode()
        return self._decode_error

    @property
    def body(self):
        return self.message.body if self.message is not None else None

    def settle(self, state=None, condition=None, failed=None, undeliverable=None,
               annotations=None):
        """Set the local outcome (if given) and settle."""
        d = self.delivery
        if condition is not None:
            d.local.condition = condition
        if failed is not None:
            d.local.failed = failed
        if undeliverable is not None:
            d.local.undeliverable = undeliverable
        if annotations is not None:
            d.local.annotations = annotations
        if state is not None:
            d.update(state)
        d.settle()
        self.receiver.client.flush()

    def accept(self):
        self.settle(Delivery.ACCEPTED)

    def reject(self, name=None, description=None):
        cond = Condition(name, description) if name else None
        self.settle(Delivery.REJECTED, condition=cond)

    def release(self):
        self.settle(Delivery.RELEASED)

    def modify(self, failed=True, undeliverable=False):
        self.settle(Delivery.MODIFIED, failed=failed, undeliverable=undeliverable)


class _Handler(Handler):
    """Connection-scoped event handler shared by every connection of a Client."""

    def __init__(self, client):
        self.client = client

    # ---- deliveries ----
    def on_delivery(self, event):
        dlv = event.delivery
        link = event.link
        if not link.is_receiver:
            return
        rcv = getattr(link, "jn_wrapper", None)
        if rcv is None or getattr(dlv, "jn_done", False):
            return
        if dlv.aborted:
            dlv.jn_done = True
            rcv.aborted += 1
            dlv.settle()
            link.advance()
            return
        buf = getattr(dlv, "jn_buf", None)
        if buf is None:
            buf = bytearray()
            dlv.jn_buf = buf
        while dlv.pending:
            chunk = link.recv(dlv.pending)
            if not chunk:
                break
            buf.extend(chunk)
        if dlv.partial:
            return
        dlv.jn_done = True
        dlv.jn_buf = None
        link.advance()
        rcv._arrived(Received(rcv, dlv, buf))

    # ---- credit ----
    def on_link_flow(self, event):
        link = event.link
        if link.is_sender:
            snd = getattr(link, "jn_wrapper", None)
            if snd is not None:
                snd.max_credit_seen = max(snd.max_credit_seen, link.credit)
                # auto_drain gives the credit back at once (legal: nothing is queued yet).  A
                # sender with messages to send should send them first (peers.py does); and
                # Proton 0.37 holds the drain answer back while the link's newest delivery is
                # settled but still referenced by the application (it counts as unwritten)
                if link.drain_mode and snd.auto_drain:
                    link.drained()
                    snd.drained_count += 1

    # ---- endpoint state: close our end when the peer closes its end ----
    def on_link_remote_close(self, event):
        if event.link.state & Endpoint.LOCAL_ACTIVE:
            event.link.close()

    def on_session_remote_close(self, event):
        if event.session.state & Endpoint.LOCAL_ACTIVE:
            event.session.close()

    def on_connection_remote_close(self, event):
        c = getattr(event.connection, "jn_wrapper", None)
        if c is not None:
            c.remote_closed = True
        if event.connection.state & Endpoint.LOCAL_ACTIVE:
            event.connection.close()

    def on_transport_closed(self, event):
        conn = event.connection
        c = getattr(conn, "jn_wrapper", None) if conn is not None else None
        if c is not None:
            c.transport_closed = True
            if event.transport.condition is not None:
                c.transport_condition = event.transport.condition

    def on_transport_error(self, event):
        conn = event.connection
        c = getattr(conn, "jn_wrapper", None) if conn is not None else None
        if c is not None and event.transport.condition is not None:
            c.transport_condition = event.transport.condition


class _KeepAlive(Handler):
    def on_timer_task(self, event):
        pass


class Client:
    """A Proton container pumped by the calling thread (see the module comment)."""

    def __init__(self, timeout=DEFAULT_TIMEOUT):
        self.timeout = timeout
        self.handler = _Handler(self)
        self.container = Container()
        self.container.container_id = "junction-test-%d-%d" % (os.getpid(), id(self))
        self.container.timeout = 0.02  # how long one process() step may block
        self.container.start()
        # A far timer keeps the reactor from finishing when no connection is open.
        self._keepalive = self.container.schedule(24 * 3600, _KeepAlive())
        self.connections = []
        self._closed = False
        self._n_links = 0
        self._streams = []  # large deliveries still being fed to Proton: (snd, dlv, data, pos)

    def link_name(self, kind, address):
        """A link name unique within this client (Proton's default name is the same for two
        links to one address, and AMQP does not allow that on one connection)."""
        self._n_links += 1
        return "%s-%s-%d" % (kind, address, self._n_links)

    # ---- pumping ----
    def flush(self):
        """Let Proton write out what the test just did, without waiting for anything."""
        self._step()

    def _step(self):
        self.container.process()
        if self._streams:
            self._feed_streams()

    # Proton-C copies a delivery's unsent bytes around each time it writes a frame, so one huge
    # pn_link_send() costs O(size^2): large messages are fed to Proton a slice at a time
    # instead, keeping about STREAM_WINDOW bytes queued in the session.
    STREAM_SLICE = 256 * 1024
    STREAM_WINDOW = 1024 * 1024

    def _feed_streams(self):
        still = []
        busy = set()  # links with an unfinished delivery: later ones on them must wait
        for snd, dlv, data, pos in self._streams:
            link = snd.pn
            if snd in busy:
                still.append((snd, dlv, data, pos))
                continue
            while pos < len(data) and link.session.outgoing_bytes < self.STREAM_WINDOW:
                link.stream(data[pos:pos + self.STREAM_SLICE])
                pos += self.STREAM_SLICE
            if pos < len(data):
                still.append((snd, dlv, data, pos))
                busy.add(snd)
            else:
                link.advance()
                if link.snd_settle_mode == Link.SND_SETTLED:
                    dlv.settle()
        self._streams = still
        if not still:
            return
        self.container.process()

    def wait(self, condition, timeout=None, msg="condition"):
        """Process events until condition() is true; WaitTimeout after `timeout` seconds."""
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                raise WaitTimeout("timed out after %.1fs waiting for %s" % (timeout, msg))
            self._step()

    def run_for(self, seconds, stop=None):
        """Process events for `seconds` (or until stop() is true). Returns stop()'s last value."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if stop is not None and stop():
                return True
            self._step()
        return stop() if stop is not None else None

    # ---- connections ----
    def connect(self, url, wait=True, sasl=True, **kwargs):
        """Open a connection (no reconnect). With wait, returns once the router's open arrives."""
        kwargs.setdefault("sasl_enabled", sasl)
        if sasl:
            kwargs.setdefault("allowed_mechs", "ANONYMOUS")
        pn = self.container.connect(url, handler=self.handler, reconnect=False, **kwargs)
        c = Conn(self, pn)
        self.connections.append(c)
        if wait:
            c.wait_open()
        return c

    def close(self, timeout=5.0):
        """Close every connection that is still open and stop the container."""
        if self._closed:
            return
        self._closed = True
        for c in self.connections:
            if c.pn.state & Endpoint.LOCAL_ACTIVE:
                try:
                    c.pn.close()
                except Exception:
                    pass
        try:
            self.wait(lambda: all(c.is_gone() for c in self.connections), timeout=timeout,
                      msg="connections to close")
        except WaitTimeout:
            pass
        self._keepalive.cancel()
        for c in self.connections:
            t = c.pn.transport
            if t is not None:
                try:
                    t.close_tail()
                    t.close_head()
                except Exception:
                    pass
        try:
            self.run_for(0.05)
        except Exception:
            pass
        self.container.stop_events()


class Conn:
    """One AMQP connection of a Client."""

    def __init__(self, client, pn):
        self.client = client
        self.pn = pn
        pn.jn_wrapper = self
        self.remote_closed = False
        self.transport_closed = False
        self.transport_condition = None

    def wait_open(self, timeout=None):
        self.client.wait(lambda: self.pn.state & Endpoint.REMOTE_ACTIVE or self.is_gone(),
                         timeout, "the router's open")
        if not self.pn.state & Endpoint.REMOTE_ACTIVE:
            raise AssertionError("connection refused: %s %s" % (self.pn.remote_condition,
                                                                 self.transport_condition))

    def is_gone(self):
        """Closed by either side and the socket is done (or never opened)."""
        return self.transport_closed or (self.pn.state & Endpoint.REMOTE_CLOSED
                                         and not self.pn.state & Endpoint.LOCAL_ACTIVE
                                         and self.pn.transport is None)

    def wait_closed_by_peer(self, timeout=None):
        """Wait until the router closes the connection (close frame or socket closed)."""
        self.client.wait(lambda: self.remote_closed or self.transport_closed, timeout,
                         "the router to close the connection")

    @property
    def remote_offered_capabilities(self):
        return symbols(self.pn.remote_offered_capabilities)

    @property
    def remote_properties(self):
        return self.pn.remote_properties

    @property
    def remote_container(self):
        return self.pn.remote_container

    def sender(self, address, name=None, presettled=False, wait=True, auto_drain=True,
               options=None):
        """Attach a sender. `address` None makes an anonymous sender (null target address)."""
        opts = list(options or [])
        name = name or self.client.link_name("snd", address)
        if presettled:
            opts.append(AtMostOnce())
        pn = self.client.container.create_sender(self.pn, address, name=name, handler=None,
                                                 options=opts or None)
        s = Snd(self, pn, auto_drain)
        if wait:
            s.wait_attached()
        return s

    def receiver(self, address=None, credit=10, dynamic=False, name=None, settle=None,
                 auto_credit=True, wait=True, options=None):
        """Attach a receiver and grant `credit`.

        settle: None (the test settles), "accept", "reject", "release".
        auto_credit: grant one more credit for every message that arrives (a window).
        """
        name = name or self.client.link_name("rcv", address or "dynamic")
        pn = self.client.container.create_receiver(self.pn, address, name=name,
                                                   dynamic=dynamic, handler=None,
                                                   options=options)
        r = Rcv(self, pn, settle, auto_credit)
        if credit:
            pn.flow(credit)
        if wait:
            r.wait_attached()
        return r

    def close(self, wait=True, timeout=None):
        self.pn.close()
        if wait:
            self.client.wait(self.is_gone, timeout, "connection close")


class _LinkBase:
    def __init__(self, conn, pn):
        self.conn = conn
        self.client = conn.client
        self.pn = pn
        pn.jn_wrapper = self

    @property
    def link(self):
        return self.pn

    def wait_attached(self, timeout=None):
        """Wait for the router's attach (a refusal shows up as attach + detach).  A connection
        that is gone fails at once, with its error, rather than as a timeout."""
        self.client.wait(lambda: not self.pn.state & Endpoint.REMOTE_UNINIT or
                         self.conn.is_gone(), timeout,
                         "the router's attach of link %s" % self.pn.name)
        if self.pn.state & Endpoint.REMOTE_UNINIT:
            raise AssertionError("no attach of link %s: its connection is gone (%s %s)" % (
                self.pn.name, self.conn.pn.remote_condition, self.conn.transport_condition))

    def is_remote_closed(self):
        return bool(self.pn.state & Endpoint.REMOTE_CLOSED)

    def wait_remote_closed(self, timeout=None):
        self.client.wait(lambda: self.is_remote_closed() or self.conn.is_gone(), timeout,
                         "the router to detach link %s" % self.pn.name)
        return self.is_remote_closed()

    @property
    def remote_condition(self):
        return self.pn.remote_condition

    def close(self, wait=True, timeout=None):
        self.pn.close()
        if wait:
            self.client.wait(lambda: self.pn.state & Endpoint.REMOTE_CLOSED or
                             self.conn.is_gone(), timeout, "detach of link %s" % self.pn.name)
        else:
            self.client.flush()

    def detach(self):
        """Detach without closing (the link could be resumed)."""
        self.pn.detach()
        self.client.flush()


class Snd(_LinkBase):
    def __init__(self, conn, pn, auto_drain):
        super().__init__(conn, pn)
        self.auto_drain = auto_drain
        self.max_credit_seen = 0
        self.drained_count = 0
        self._tag = 0

    @property
    def credit(self):
        return self.pn.credit

    def _next_tag(self):
        self._tag += 1
        return str(self._tag)

    def wait_credit(self, n=1, timeout=None):
        self.client.wait(lambda: self.pn.credit >= n, timeout,
                         "%d credit on sender %s (has %d)" % (n, self.pn.name, self.pn.credit))

    def send(self, msg, wait_credit=True, timeout=None):
        """Send a Message; by default waits for credit first. Returns the Delivery."""
        return self.send_raw(msg.encode(), wait_credit, timeout)

    def send_raw(self, data, wait_credit=True, timeout=None):
        """Send bytes as the whole payload of one delivery (no encoding at all)."""
        if wait_credit:
            self.wait_credit(1, timeout)
        dlv = self.pn.delivery(self._next_tag())
        data = bytes(data)
        if len(data) > self.client.STREAM_WINDOW or self.client._streams:
            # a large message, or one behind a large message still being fed (keeps order)
            self.client._streams.append((self, dlv, data, 0))
            self.client._feed_streams()
            return dlv
        self.pn.stream(data)
        self.pn.advance()
        if self.pn.snd_settle_mode == Link.SND_SETTLED:
            dlv.settle()
        self.client.flush()
        return dlv

    def wait_outcome(self, dlv, timeout=None, settled=True):
        """Wait until the router reports an outcome (and, by default, settles). Returns it."""
        if settled:
            cond = lambda: dlv.settled and dlv.remote_state  # noqa: E731
        else:
            cond = lambda: dlv.remote_state  # noqa: E731
        self.client.wait(cond, timeout, "the outcome of delivery %r on %s (state %s%s)" % (
            dlv.tag, self.pn.name, outcome_name(dlv.remote_state),
            ", settled" if dlv.settled else ""))
        return dlv.remote_state

    def wait_outcomes(self, dlvs, timeout=None):
        self.client.wait(lambda: all(d.settled and d.remote_state for d in dlvs), timeout,
                         "outcomes of %d deliveries on %s (%d settled)" % (
                             len(dlvs), self.pn.name, sum(1 for d in dlvs if d.settled)))
        return [d.remote_state for d in dlvs]


class Rcv(_LinkBase):
    def __init__(self, conn, pn, settle, auto_credit):
        super().__init__(conn, pn)
        self.settle_mode = settle
        self.auto_credit = auto_credit
        self.queue = collections.deque()
        self.count = 0  # messages received so far
        self.aborted = 0

    @property
    def remote_address(self):
        return self.pn.remote_source.address

    def _arrived(self, got):
        self.count += 1
        if self.settle_mode == "accept":
            got.delivery.update(Delivery.ACCEPTED)
            got.delivery.settle()
        elif self.settle_mode == "reject":
            got.delivery.update(Delivery.REJECTED)
            got.delivery.settle()
        elif self.settle_mode == "release":
            got.delivery.update(Delivery.RELEASED)
            got.delivery.settle()
        if self.auto_credit:
            self.pn.flow(1)
        self.queue.append(got)

    def flow(self, n):
        self.pn.flow(n)
        self.client.flush()

    def get(self, timeout=None):
        """The next message (waits for it). Returns a Received."""
        self.client.wait(lambda: self.queue, timeout, "a message on receiver %s (%s)" % (
            self.pn.name, self.pn.source.address or "dynamic"))
        return self.queue.popleft()

    def get_n(self, n, timeout=None):
        self.client.wait(lambda: len(self.queue) >= n, timeout,
                         "%d messages on receiver %s (have %d)" % (n, self.pn.name,
                                                                   len(self.queue)))
        return [self.queue.popleft() for _ in range(n)]

    def drain_queue(self):
        out = list(self.queue)
        self.queue.clear()
        return out


# ---- raw sockets ----------------------------------------------------------------------------

def raw_exchange(host, port, data, timeout=5.0, close_write=False):
    """Connect, send `data`, and read until the router closes the socket.

    Returns (bytes received, closed) where closed says whether the router closed the
    connection (EOF or reset) within `timeout`.
    """
    s = socket.create_connection((host, port), timeout=timeout)
    got = bytearray()
    closed = False
    try:
        if data:
            s.sendall(data)
        if close_write:
            s.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r, _, _ = select.select([s], [], [], max(0.0, deadline - time.monotonic()))
            if not r:
                break
            try:
                chunk = s.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                closed = True
                break
            if not chunk:
                closed = True
                break
            got.extend(chunk)
    finally:
        s.close()
    return bytes(got), closed


class ServiceThread(threading.Thread):
    """A request/reply service on its own thread and Client: every request received on
    `address` is answered, through an anonymous sender, to its reply_to with the same
    correlation id and the body transformed by `fn`."""

    def __init__(self, url, address, fn=lambda body: body):
        super().__init__(daemon=True)
        self.url = url
        self.address = address
        self.fn = fn
        self.ready = threading.Event()
        self.stop_flag = threading.Event()
        self.error = None
        self.handled = 0

    def run(self):
        client = Client()
        try:
            conn = client.connect(self.url)
            rcv = conn.receiver(self.address, credit=10)
            snd = conn.sender(None)
            self.ready.set()
            while not self.stop_flag.is_set():
                client.run_for(0.05, stop=lambda: bool(rcv.queue))
                while rcv.queue:
                    req = rcv.queue.popleft()
                    reply = Message(address=req.message.reply_to,
                                    correlation_id=req.message.correlation_id,
                                    body=self.fn(req.message.body))
                    snd.send(reply)
                    req.accept()
                    self.handled += 1
        except Exception as e:  # reported by the test through .error
            self.error = e
            self.ready.set()
        finally:
            client.close()

    def stop(self):
        self.stop_flag.set()
        self.join(10)


# ---- comparing messages ---------------------------------------------------------------------

MESSAGE_FIELDS = (
    "durable", "priority", "ttl", "first_acquirer", "delivery_count",
    "id", "user_id", "address", "subject", "reply_to", "correlation_id", "content_type",
    "content_encoding", "expiry_time", "creation_time", "group_id", "group_sequence",
    "reply_to_group_id", "inferred", "instructions", "annotations", "properties", "body",
)


def message_fields(m, skip=()):
    """Every field of a Proton Message as a dict (for comparing a sent and a received one)."""
    out = {}
    for f in MESSAGE_FIELDS:
        if f in skip:
            continue
        v = getattr(m, f)
        if isinstance(v, dict):
            v = dict(v)
        out[f] = v
    return out


def user_annotations(m):
    """A received message's annotations without the router's own x-opt-qd.* keys."""
    return {k: v for k, v in dict(m.annotations or {}).items()
            if not str(k).startswith("x-opt-qd.")}


def router_annotations(m):
    return {str(k): v for k, v in dict(m.annotations or {}).items()
            if str(k).startswith("x-opt-qd.")}


def check_router_works(url, address=None, timeout=None):
    """A fresh client can still send a message through the router at `url` (asserts)."""
    address = address or "health.%d.%d" % (os.getpid(), int(time.monotonic() * 1e6))
    c = Client(timeout=timeout or DEFAULT_TIMEOUT)
    try:
        conn = c.connect(url)
        rcv = conn.receiver(address, settle="accept")
        snd = conn.sender(address)
        dlv = snd.send(Message(body="still alive"))
        got = rcv.get()
        assert got.body == "still alive"
        assert snd.wait_outcome(dlv) == Delivery.ACCEPTED
    finally:
        c.close()
