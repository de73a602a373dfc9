"""AMQP 1.0 over a WebSocket, for the system tests: Proton's protocol engine (Connection,
Transport) pumped by hand over a websocket-client connection (Debian's python3-websocket).

Everything runs on the test's thread: `pump()` writes what the engine produced as binary
WebSocket messages and feeds what arrived into the engine.  Only what the tests need:
one session, senders and receivers with credit, send, receive, settle.
"""

import select
import time

import websocket
from proton import Collector, Connection, Delivery, Message, Transport

DEFAULT_TIMEOUT = 10.0
WRITE_CHUNK = 64 * 1024  # bytes per WebSocket message that pump() writes
WRITE_BURST = 16  # messages per pump() before it reads and pumps the peer again


class WsAmqp:
    """One AMQP connection through ws://host:port with WebSocket subprotocol `proto`."""

    def __init__(self, host, port, proto="amqp", container="ws-test", timeout=DEFAULT_TIMEOUT,
                 peer=None, sslopt=None):
        """`peer`: a clients.Client to pump along with this connection (each waits for the
        other, e.g. a TCP receiver for this sender's message).  `sslopt`: wss:// with these
        websocket-client TLS options (e.g. {"ca_certs": path})."""
        self.timeout = timeout
        self.peer = peer
        scheme = "wss" if sslopt is not None else "ws"
        self.ws = websocket.create_connection("%s://%s:%d/" % (scheme, host, port),
                                              subprotocols=[proto], timeout=timeout,
                                              sslopt=sslopt)
        self.conn = Connection()
        self.conn.container = container
        self.transport = Transport()
        self.transport.sasl().allowed_mechs("ANONYMOUS")
        self.transport.bind(self.conn)
        self.collector = Collector()
        self.conn.collect(self.collector)
        self.closed = False
        self.inbuf = b""  # bytes read from the WebSocket that the transport had no room for
        self.conn.open()
        self.session = self.conn.session()
        self.session.open()
        self.n_links = 0
        self.tag = 0

    @property
    def subprotocol(self):
        return self.ws.getsubprotocol()

    def pump(self, wait=0.05):
        """Write the engine's output; read what arrives within `wait` seconds (and pump the
        peer client)."""
        if self.peer is not None:
            self.peer.flush()
            wait = 0.005
        self.transport.tick(time.monotonic())  # heartbeats: the router has an idle timeout
        # At most WRITE_CHUNK bytes per WebSocket message, and only while the socket takes
        # them without waiting: a 5 MB message written in one blocking send would wait for the
        # router, which waits for the peer client, which is pumped only between calls here.
        for _ in range(WRITE_BURST):
            n = self.transport.pending()
            if n <= 0:
                break
            if not select.select([], [self.ws.sock], [], 0)[1]:
                break
            data = self.transport.peek(min(n, WRITE_CHUNK))
            self.ws.send_binary(data)
            self.transport.pop(len(data))
        if self.inbuf:
            self._push(b"")
            if self.inbuf:
                return  # the application must read first (session window full)
        self.ws.settimeout(wait)
        try:
            op, data = self.ws.recv_data()
        except websocket.WebSocketTimeoutException:
            return
        except (websocket.WebSocketConnectionClosedException, ConnectionError, OSError):
            self.closed = True
            self.transport.close_tail()
            return
        if op == websocket.ABNF.OPCODE_CLOSE or not data and op != websocket.ABNF.OPCODE_BINARY:
            self.closed = True
            self.transport.close_tail()
            return
        self._push(data)

    def _push(self, data):
        """Feed the transport as much as it takes; keep the rest for later."""
        self.inbuf += data
        cap = self.transport.capacity()
        if cap > 0 and self.inbuf:
            n = min(cap, len(self.inbuf))
            self.transport.push(self.inbuf[:n])
            self.inbuf = self.inbuf[n:]
        while self.collector.peek():
            self.collector.pop()

    def wait(self, cond, timeout=None, what="condition"):
        deadline = time.monotonic() + (timeout or self.timeout)
        while not cond():
            if time.monotonic() > deadline:
                raise AssertionError("WebSocket AMQP: no %s within %.0fs" % (
                    what, timeout or self.timeout))
            if self.closed and not cond():
                raise AssertionError("WebSocket AMQP: connection closed waiting for " + what)
            self.pump()

    def wait_open(self):
        self.wait(lambda: self.conn.state & Connection.REMOTE_ACTIVE, what="open")
        return self

    def sender(self, address):
        self.n_links += 1
        s = self.session.sender("ws-snd-%d" % self.n_links)
        s.target.address = address
        s.open()
        self.wait(lambda: s.state & s.REMOTE_ACTIVE, what="sender attach")
        return s

    def receiver(self, address, credit=10):
        self.n_links += 1
        r = self.session.receiver("ws-rcv-%d" % self.n_links)
        r.source.address = address
        r.flow(credit)
        r.open()
        self.wait(lambda: r.state & r.REMOTE_ACTIVE, what="receiver attach")
        return r

    def send(self, snd, msg):
        """Send when credit allows; returns the Delivery."""
        self.wait(lambda: snd.credit > 0, what="credit")
        self.tag += 1
        dlv = snd.delivery(str(self.tag))
        snd.send(msg.encode())
        snd.advance()
        self.pump()
        return dlv

    def wait_outcome(self, dlv):
        self.wait(lambda: dlv.remote_state != 0 and dlv.settled, what="outcome")
        return dlv.remote_state

    def get_delivery(self, rcv):
        """The next message on rcv and its Delivery, not settled."""
        parts = []

        def complete():
            dlv = rcv.current
            if dlv is None or not dlv.readable:
                return False
            if dlv.pending:  # read as it arrives: the session window refills
                parts.append(rcv.recv(dlv.pending))
            return not dlv.partial

        self.wait(complete, what="message")
        dlv = rcv.current
        data = b"".join(parts)
        rcv.advance()
        m = Message()
        m.decode(data)
        return m, dlv

    def get(self, rcv):
        """The next message on rcv, accepted and settled."""
        m, dlv = self.get_delivery(rcv)
        dlv.update(Delivery.ACCEPTED)
        dlv.settle()
        self.pump()
        return m

    def close(self):
        if not self.closed:
            try:
                self.conn.close()
                self.pump()
            except Exception:
                pass
        try:
            self.ws.close()
        except Exception:
            pass
