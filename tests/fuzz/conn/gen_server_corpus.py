#!/usr/bin/env python3
"""Record what a server sends to one of the router's connectors, as client-mode seeds for
fuzz_conn (tests/fuzz/conn/corpus/server-*: the first byte 0xC5 says client mode).

    JUNCTIOND=build/router/junctiond /usr/bin/python3 tests/fuzz/conn/gen_server_corpus.py \\
        tests/fuzz/conn/corpus

For each scenario it starts junctiond with a connector like fuzz_conn.c's (role
route-container, the same autoLinks and link route naming it) toward a recording TCP proxy
in front of a Proton-Python server on loopback, drives the scenario, and writes every byte
the server sent.  The server answers every attach with the same termini, grants credit,
accepts what it receives, and sends two messages on each link where it sends.  From the
first recording, the SASL exchange is also replaced by hand-made ones a server may send
(PLAIN only, a challenge, an authentication failure, no mechanism in common, an AMQP header
where SASL was expected), each followed by the recorded AMQP frames.
"""
import os
import struct
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "system"))

from proton import Message  # noqa: E402
from proton.handlers import MessagingHandler  # noqa: E402
from proton.reactor import Container  # noqa: E402

from clients import Client  # noqa: E402
from conftest import Router, free_port  # noqa: E402
from recording_proxy import Proxy  # noqa: E402

CLIENT_MODE = b"\xc5"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"


def entities(proxy_port):
    return [
        ["router", {"id": "Fuzz.A", "workerThreads": 1, "shutdownGraceSeconds": 0}],
        ["listener", {"host": "127.0.0.1", "port": "0"}],
        ["connector", {"name": "fuzz-connector", "host": "127.0.0.1", "port": str(proxy_port),
                       "role": "route-container", "saslMechanisms": "ANONYMOUS PLAIN",
                       "saslUsername": "fuzz", "saslPassword": "fuzz", "maxSessions": 4,
                       "linkCapacity": 8, "idleTimeoutSeconds": 0,
                       "stripAnnotations": "out"}],
        ["autoLink", {"address": "fz.in", "direction": "in", "phase": 0,
                      "connection": "fuzz-connector"}],
        ["autoLink", {"address": "fz.out", "direction": "out", "connection": "fuzz-connector"}],
        ["linkRoute", {"prefix": "fz.lr", "direction": "in", "connection": "fuzz-connector"}],
    ]


class Server(MessagingHandler):
    """The peer behind the connector (see the module comment).  `attach` names addresses
    it attaches to itself once the connection is open: ("sender"|"receiver", address)."""

    def __init__(self, url, attach=()):
        super().__init__(prefetch=10)
        self.url = url
        self.attach = list(attach)
        self.ready = threading.Event()
        self.sent = set()

    def on_start(self, event):
        self.acceptor = event.container.listen(self.url)
        self.ready.set()

    def on_connection_opened(self, event):
        for kind, addr in self.attach:
            if kind == "sender":
                event.container.create_sender(event.connection, addr)
            else:
                event.container.create_receiver(event.connection, addr)

    def on_link_opening(self, event):
        link = event.link
        link.source.copy(link.remote_source)
        link.target.copy(link.remote_target)

    def on_sendable(self, event):
        link = event.link
        if link in self.sent:
            return
        self.sent.add(link)
        for i in range(2):
            link.send(Message(body="from-server-%d" % i, properties={"i": i}))


def s_autolinks(c, url):
    rcv = c.connect(url).receiver("fz.in", credit=5, settle="accept")
    snd = c.connect(url).sender("fz.out")
    d = snd.send(Message(body="to-server"))
    rcv.get_n(2)
    snd.wait_outcome(d)


def s_link_route(c, url):
    snd = c.connect(url).sender("fz.lr.orders")
    dlvs = [snd.send(Message(body="lr-%d" % i)) for i in range(3)]
    snd.wait_outcomes(dlvs)
    big = snd.send(Message(body=b"z" * 40000))
    snd.wait_outcome(big, timeout=20)
    snd.close()


def s_server_attaches(c, url):
    rcv = c.connect(url).receiver("srv.q", credit=5, settle="accept")
    rcv.get_n(2)
    snd = c.connect(url).sender("srv.back")
    d = snd.send(Message(body="to-server-receiver"))
    snd.wait_outcome(d)


SCENARIOS = [(s_autolinks, ()), (s_link_route, ()),
             (s_server_attaches, [("sender", "srv.q"), ("receiver", "srv.back")])]


def frame(body, channel=0, ftype=0):
    return struct.pack(">IBBH", 8 + len(body), 2, ftype, channel) + body


def sym8(s):
    return b"\xa3" + bytes([len(s)]) + s.encode()


def sasl_perf(code, fields):
    body = b"".join(fields)
    return frame(b"\x00\x53" + bytes([code]) + b"\xc0" + bytes([len(body) + 1, len(fields)]) +
                 body, ftype=1)


def mechanisms(*names):
    items = b"".join(bytes([len(n)]) + n.encode() for n in names)
    arr = b"\xe0" + bytes([len(items) + 2, len(names)]) + b"\xa3" + items
    return sasl_perf(0x40, [arr])


def outcome(code, data=None):
    fields = [b"\x50" + bytes([code])]
    if data is not None:
        fields.append(b"\xa0" + bytes([len(data)]) + data)
    return sasl_perf(0x44, fields)


def challenge(data):
    return sasl_perf(0x42, [b"\xa0" + bytes([len(data)]) + data])


def sasl_variants(amqp):
    """Hand-made SASL exchanges a server may send, each before the recorded AMQP frames."""
    ok = outcome(0)
    return {
        "sasl-plain-only": SASL_HEADER + mechanisms("PLAIN") + ok + amqp,
        "sasl-single-symbol": SASL_HEADER + sasl_perf(0x40, [sym8("ANONYMOUS")]) + ok + amqp,
        "sasl-challenge": SASL_HEADER + mechanisms("PLAIN", "ANONYMOUS") +
        challenge(b"more?") + ok + amqp,
        "sasl-outcome-data": SASL_HEADER + mechanisms("ANONYMOUS") +
        outcome(0, b"welcome") + amqp,
        "sasl-auth-failed": SASL_HEADER + mechanisms("PLAIN") + outcome(1) + amqp,
        "sasl-temp-failure": SASL_HEADER + mechanisms("ANONYMOUS") + outcome(4),
        "sasl-no-common-mech": SASL_HEADER + mechanisms("SCRAM-SHA-512", "GSSAPI") + ok + amqp,
        "sasl-empty-mechs": SASL_HEADER + sasl_perf(0x40, [b"\xe0\x02\x00\xa3"]) + ok + amqp,
        "sasl-amqp-header-instead": amqp,
        "sasl-init-from-server": SASL_HEADER + sasl_perf(0x41, [sym8("PLAIN")]) + ok + amqp,
    }


def record(fn, attach, work):
    port = free_port()
    server = Server("127.0.0.1:%d" % port, attach)
    sc = Container(server)
    th = threading.Thread(target=sc.run, daemon=True)
    th.start()
    server.ready.wait(5)
    proxy = Proxy(("127.0.0.1", port), record="target")
    proxy.start()
    r = Router(work, entities(proxy.port), name=fn.__name__).start()
    try:
        r.wait_log(r"Connection to .* opened", timeout=10)
        c = Client(timeout=20)
        try:
            h, p = r.addresses[0]
            fn(c, "amqp://%s:%s" % (h, p))
            c.run_for(0.3)
        except Exception:
            sys.stderr.write("".join(line + "\n" for line in r.lines[-40:]))
            raise
        finally:
            c.close()
    finally:
        r.stop()
        sc.stop()
        proxy.ls.close()
    time.sleep(0.2)
    return bytes(proxy.recorded[0]) if proxy.recorded else b""


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus")
    work = tempfile.mkdtemp(prefix="junction-conn-server-corpus-")
    first = None
    for fn, attach in SCENARIOS:
        data = record(fn, attach, work)
        if first is None:
            first = data
        name = os.path.join(out, "server-" + fn.__name__[2:].replace("_", "-"))
        with open(name, "wb") as f:
            f.write(CLIENT_MODE + data)
        print("%s: %d bytes" % (name, len(data)))
    at = first.find(AMQP_HEADER)
    amqp = first[at:] if at >= 0 else AMQP_HEADER
    for label, data in sasl_variants(amqp).items():
        name = os.path.join(out, "server-" + label)
        with open(name, "wb") as f:
            f.write(CLIENT_MODE + data)
        print("%s: %d bytes" % (name, len(data)))


if __name__ == "__main__":
    main()
