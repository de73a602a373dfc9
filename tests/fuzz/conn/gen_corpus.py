#!/usr/bin/env python3
"""Record the client side of real Proton-Python sessions through the router, as seeds for
fuzz_conn (tests/fuzz/conn/corpus/session-*).

    JUNCTIOND=build/router/junctiond /usr/bin/python3 tests/fuzz/conn/gen_corpus.py \\
        tests/fuzz/conn/corpus

Starts junctiond with a configuration like fuzz_conn.c's (same addresses and limits), puts
a recording TCP proxy in front of it, runs each scenario below through the proxy on one
connection, and writes every byte the client sent as one file.  Replayed by fuzz_conn in
one piece, a recording drives the router through the same attach, flow, transfer and
disposition frames (delivery ids and handles are the client's or deterministic).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "system"))

from proton import Message  # noqa: E402

from clients import Client  # noqa: E402
from conftest import Router  # noqa: E402
from recording_proxy import Proxy  # noqa: E402

ENTITIES = [
    ["router", {"id": "Fuzz.A", "workerThreads": 1, "shutdownGraceSeconds": 0}],
    ["listener", {"host": "127.0.0.1", "port": "0", "maxSessions": 4, "maxSenders": 4,
                  "maxReceivers": 4, "linkCapacity": 8, "maxUnsettledPerLink": 5,
                  "maxMessageSize": 50000, "idleTimeoutSeconds": 0,
                  "stripAnnotations": "out"}],
    ["address", {"prefix": "multicast", "distribution": "multicast"}],
    ["address", {"prefix": "closest", "distribution": "closest"}],
    ["address", {"prefix": "unavailable", "distribution": "unavailable"}],
]


def s_send_receive_outcomes(c, url):
    conn = c.connect(url)
    rcv = conn.receiver("q1", credit=10)
    snd = conn.sender("q1")
    dlvs = [snd.send(Message(body=i, subject="s%d" % i, properties={"k": i})) for i in range(4)]
    got = rcv.get_n(4)
    got[0].accept()
    got[1].reject("app:bad", "no")
    got[2].release()
    got[3].modify(failed=True, undeliverable=True)
    snd.wait_outcomes(dlvs)
    conn.close()


def s_anonymous_and_dynamic(c, url):
    conn = c.connect(url)
    reply = conn.receiver(None, dynamic=True, credit=5, settle="accept")
    rcv = conn.receiver("closest.svc", credit=5, settle="accept")
    anon = conn.sender(None)
    d = anon.send(Message(address="closest.svc", reply_to=reply.remote_address, body="req",
                          annotations={"x-opt-qd.trace": ["0/X"], "user": 1}))
    rcv.get()
    anon.wait_outcome(d)
    d = anon.send(Message(address=reply.remote_address, body="resp"))
    reply.get()
    anon.wait_outcome(d)
    conn.close()


def s_multicast_presettled(c, url):
    conn = c.connect(url)
    rcvs = [conn.receiver("multicast.t", credit=10) for _ in range(2)]
    snd = conn.sender("multicast.t", presettled=True)
    for i in range(3):
        snd.send(Message(body="m%d" % i))
    for r in rcvs:
        r.get_n(3)
    conn.close()


def s_large_multiframe(c, url):
    conn = c.connect(url)
    rcv = conn.receiver("q2", credit=2, settle="accept")
    snd = conn.sender("q2")
    d = snd.send(Message(body=b"x" * 40000))
    rcv.get(timeout=20)
    snd.wait_outcome(d, timeout=20)
    conn.close()


def s_too_large(c, url):
    conn = c.connect(url)
    conn.receiver("q3", credit=2, settle="accept")
    snd = conn.sender("q3")
    snd.send(Message(body=b"y" * 60000))
    c.run_for(0.5)


def s_drain_and_detach(c, url):
    conn = c.connect(url)
    rcv = conn.receiver("q4", credit=3)
    snd = conn.sender("q4")
    snd.send(Message(body="one"))
    rcv.get()
    rcv.pn.drain(5)
    c.run_for(0.2)
    rcv.detach()
    snd.close()
    c.run_for(0.2)
    conn.close()


def s_sessions_and_links(c, url):
    conn = c.connect(url)
    ss = [conn.pn.session() for _ in range(3)]
    for s in ss:
        s.open()
    links = []
    for i, s in enumerate(ss):
        lk = s.receiver("r%d" % i)
        lk.source.address = "unavailable.%d" % i
        lk.open()
        links.append(lk)
    c.run_for(0.3)
    for s in ss:
        s.close()
    c.run_for(0.2)
    conn.close()


def s_no_sasl(c, url):
    conn = c.connect(url, sasl=False)
    rcv = conn.receiver("q5", credit=1, settle="accept")
    snd = conn.sender("q5")
    d = snd.send(Message(body={"map": [1, 2.5, None, True]}))
    rcv.get()
    snd.wait_outcome(d)
    conn.close()


SCENARIOS = [s_send_receive_outcomes, s_anonymous_and_dynamic, s_multicast_presettled,
             s_large_multiframe, s_too_large, s_drain_and_detach, s_sessions_and_links,
             s_no_sasl]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "corpus")
    import tempfile
    work = tempfile.mkdtemp(prefix="junction-conn-corpus-")
    r = Router(work, ENTITIES).start()
    try:
        for fn in SCENARIOS:
            proxy = Proxy((r.host, r.port), record="accepted")
            proxy.start()
            c = Client(timeout=20)
            try:
                fn(c, "amqp://127.0.0.1:%d" % proxy.port)
            finally:
                c.close()
            proxy.ls.close()
            data = b"".join(bytes(x) for x in proxy.recorded[:1])
            name = os.path.join(out, "session-" + fn.__name__[2:].replace("_", "-"))
            with open(name, "wb") as f:
                f.write(data)
            print("%s: %d bytes" % (name, len(data)))
    finally:
        r.stop()


if __name__ == "__main__":
    main()
