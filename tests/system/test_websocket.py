"""AMQP 1.0 over WebSocket through the http listener, with rhea (the JavaScript client
qdrouterd's console used; tests/browser/rhea_ws.mjs in node) on the WebSocket side and
Proton-Python over plain TCP on the other, as a cross-check that both kinds of connection are
routed alike.  Both subprotocols junctiond accepts for AMQP are used: `binary` (what
qdrouterd's console asks for) and `amqp`.

Skipped when node is not installed (scripts/test installs it).
"""

import pytest
from proton import Delivery, Message

from nodejs import TIMEOUT, http_router, require_node, rhea_result, run_rhea, start_rhea

N = 200

pytestmark = pytest.mark.deadline(120)


def ws_url(http_port):
    return "ws://127.0.0.1:%d/" % http_port


@pytest.mark.parametrize("protocol", ["binary", "amqp"])
def test_rhea_ws_sender_to_proton_tcp_receiver(make_router, client, protocol):
    node = require_node()
    r, amqp_url, http_port = http_router(make_router)
    address = "closest.ws-in-" + protocol
    rcv = client.connect(amqp_url).receiver(address, credit=N)
    proc, lines = start_rhea(node, {"url": ws_url(http_port), "protocol": protocol,
                                    "mode": "send", "address": address, "count": N})
    try:
        for i in range(N):
            got = rcv.get()
            assert got.message.body == "msg-%d" % i
            assert got.message.properties["seq"] == i
            got.accept()
        res = rhea_result(proc, lines, pump=client.run_for)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert res["sent"] == N
    assert res["outcomes"] == {"accepted": N}


@pytest.mark.parametrize("protocol", ["binary", "amqp"])
def test_proton_tcp_sender_to_rhea_ws_receiver(make_router, client, protocol):
    node = require_node()
    r, amqp_url, http_port = http_router(make_router)
    address = "closest.ws-out-" + protocol
    proc, lines = start_rhea(node, {"url": ws_url(http_port), "protocol": protocol,
                                    "mode": "receive", "address": address, "count": N})
    try:
        assert lines.next(max(30.0, 3 * TIMEOUT), "rhea_ws.mjs receiver") == {"ready": True}
        snd = client.connect(amqp_url).sender(address)
        dlvs = []
        for i in range(N):
            m = Message(body="msg-%d" % i, properties={"seq": i})
            dlvs.append(snd.send(m))
        for d in dlvs:
            assert snd.wait_outcome(d) == Delivery.ACCEPTED
        res = rhea_result(proc, lines, pump=client.run_for)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert res["received"] == ["msg-%d" % i for i in range(N)]
    assert res["seq"] == list(range(N))


def test_rhea_ws_roundtrip_binary_to_amqp(make_router):
    """Both ends on WebSocket: a `binary` sender and an `amqp` receiver in one rhea
    process; multicast to show the router's own distribution applies."""
    node = require_node()
    r, amqp_url, http_port = http_router(make_router)
    res = run_rhea(node, {"url": ws_url(http_port), "protocol": "binary",
                          "receive_protocol": "amqp", "mode": "roundtrip",
                          "address": "multicast.ws-roundtrip", "count": N})
    assert res["outcomes"] == {"accepted": N}
    assert res["received"] == ["msg-%d" % i for i in range(N)]


def test_rhea_ws_and_tcp_multicast_together(make_router, client):
    """A multicast address with one consumer over TCP (Proton) and one over WebSocket
    (rhea): every message sent over WebSocket reaches both."""
    node = require_node()
    r, amqp_url, http_port = http_router(make_router)
    address = "multicast.ws-fanout"
    tcp_rcv = client.connect(amqp_url).receiver(address, credit=N)
    ws_rcv, ws_lines = start_rhea(node, {"url": ws_url(http_port), "protocol": "amqp",
                                         "mode": "receive", "address": address, "count": N})
    snd = None
    try:
        assert ws_lines.next(max(30.0, 3 * TIMEOUT), "rhea receiver") == {"ready": True}
        snd, snd_lines = start_rhea(node, {"url": ws_url(http_port), "protocol": "binary",
                                           "mode": "send", "address": address, "count": N})
        got = []
        for _ in range(N):
            g = tcp_rcv.get()
            got.append(g.message.body)
            g.accept()
        sent = rhea_result(snd, snd_lines, pump=client.run_for)
        res = rhea_result(ws_rcv, ws_lines, pump=client.run_for)
    finally:
        for p in (ws_rcv, snd):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait(5)
    want = ["msg-%d" % i for i in range(N)]
    assert sent["outcomes"] == {"accepted": N}
    assert got == want
    assert res["received"] == want
