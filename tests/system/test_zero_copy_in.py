"""Zero-copy input (issue 18, docs/decisions/0009): transfer payloads reach the router beside
Proton (router/zin.h).  Every byte of every message must arrive as sent, whatever the frame
size splits it into: annotations 0..200, bodies 0 B .. 1 MB and a streamed 50 MB message,
small sender frames (the listener's maxFrameSize), presettled and at-least-once, aborted
deliveries, several links interleaving on one connection, and senders that go away in the
middle of a message."""

import hashlib
import os
import socket
import time

import pytest
from proton import Delivery, Message

from amqp_raw import data_section
from test_conn_budget import AMQP_HEADER, attach_sender_frame, begin_frame, begin_windows, \
    open_frame, performatives, transfer_frame

MB = 1024 * 1024


def frame_router(make_router, frame):
    lst = {"host": "127.0.0.1", "port": "0"}
    if frame:
        lst["maxFrameSize"] = frame
    return make_router(listener=lst)


def msg(body_len, n_ann, seed):
    body = os.urandom(body_len) if body_len else b""
    ann = {"k%03d" % i: "v%d-%d" % (seed, i) for i in range(n_ann)}
    return Message(body=body, inferred=True, annotations=ann or None,
                   properties={"seed": seed})


def same(got, want):
    assert got.message is not None, got.decode_error
    assert got.message.body == want.body
    assert (got.message.annotations or {}) == (want.annotations or {})
    assert got.message.properties == want.properties


SIZES = [0, 1, 100, 499, 500, 511, 512, 513, 4087, 4096, 20000, 70000, 300000, MB]


@pytest.mark.deadline(240)
@pytest.mark.parametrize("frame", [512, 4096, None])
@pytest.mark.parametrize("presettled", [False, True])
def test_every_byte_arrives(make_router, client, frame, presettled):
    r = frame_router(make_router, frame)
    rconn = client.connect(r.url)
    rcv = rconn.receiver("zin.all", credit=50, settle="accept")
    snd = client.connect(r.url).sender("zin.all", presettled=presettled)
    snd.wait_credit(1)
    sent, dlvs = [], []
    seed = 0
    for n_ann in (0, 1, 20, 200):
        for size in SIZES:
            if n_ann == 200 and size > 70000:
                continue
            m = msg(size, n_ann, seed)
            seed += 1
            sent.append(m)
            dlvs.append(snd.send(m))
    got = rcv.get_n(len(sent), timeout=120)
    for g, m in zip(got, sent):
        same(g, m)
    if not presettled:
        for d in dlvs:
            assert snd.wait_outcome(d, timeout=30) == Delivery.ACCEPTED


@pytest.mark.slow
@pytest.mark.deadline(240)
@pytest.mark.parametrize("frame", [4096, None])
def test_streamed_50mb(make_router, client, frame):
    r = frame_router(make_router, frame)
    payload = os.urandom(50 * MB)
    rcv = client.connect(r.url).receiver("zin.big", credit=2, settle="accept")
    snd = client.connect(r.url).sender("zin.big")
    snd.wait_credit(1)
    dlv = snd.send(Message(body=payload, inferred=True))
    g = rcv.get(timeout=180)
    assert g.message is not None, g.decode_error
    assert hashlib.sha256(g.message.body).digest() == hashlib.sha256(payload).digest()
    assert snd.wait_outcome(dlv, timeout=60) == Delivery.ACCEPTED


# Payload sizes of the transfers of test_streamed_message_in_frames_of_mixed_sizes, cycled.
MIXED = [7, 20000, 3000, 65000, 9000, 200, 130000, 16384, 8191, 8192, 40000, 1, 100000, 5000]


@pytest.mark.deadline(120)
def test_streamed_message_in_frames_of_mixed_sizes(make_router, client):
    """A streamed message (past 256 KiB) whose transfers' payloads are of every size (1 B to
    130 KB), sent by hand in one write: each read buffer holds several payloads, or parts of
    them, of one delivery, which the sweep keeps or moves by what the buffer's queued slices
    use of it together - the receiver gets every byte in order."""
    r = make_router(listener={"host": "127.0.0.1", "port": "0", "maxFrameSize": 131072})
    rcv = client.connect(r.url).receiver("zin.mix", credit=5, settle="accept")
    body = os.urandom(3 * MB // 2)
    data = data_section(body)
    chunks, at, i = [], 0, 0
    while at < len(data):
        n = MIXED[i % len(MIXED)]
        chunks.append(data[at:at + n])
        at, i = at + n, i + 1
    s = socket.create_connection((r.host, r.port), timeout=10)
    try:
        s.sendall(AMQP_HEADER + open_frame("zin-mix") + begin_frame(0) +
                  attach_sender_frame(0, "zin.mix", "mix"))
        got = b""
        deadline = time.monotonic() + 10
        while performatives(got, 0x13) == 0 and time.monotonic() < deadline:
            got += s.recv(65536)  # the router's flow: credit
        assert performatives(got, 0x13) > 0, "the router gave the sender credit"
        assert begin_windows(got)[0] >= len(chunks), "the session window takes every frame"
        s.sendall(b"".join(transfer_frame(0, k == 0, c, more=k < len(chunks) - 1)
                           for k, c in enumerate(chunks)))
        g = rcv.get(timeout=60)
        assert g.message is not None, g.decode_error
        assert len(g.message.body) == len(body)
        assert hashlib.sha256(g.message.body).digest() == hashlib.sha256(body).digest()
    finally:
        s.close()


@pytest.mark.deadline(120)
@pytest.mark.parametrize("frame", [512, 4096])
def test_links_interleave_on_one_connection(make_router, client, frame):
    """Several senders on one connection (and two sessions): their frames interleave on the
    wire, and each message takes only its own link's bytes."""
    r = frame_router(make_router, frame)
    rconn = client.connect(r.url)
    rcvs = [rconn.receiver("zin.il%d" % i, credit=100, settle="accept") for i in range(4)]
    sconn = client.connect(r.url)
    snds = [sconn.sender("zin.il%d" % i) for i in range(4)]
    for s in snds:
        s.wait_credit(1)
    sent = [[] for _ in snds]
    for j in range(12):
        for i, s in enumerate(snds):
            m = msg((j * 3001 + i * 777) % 30000, (i * 7 + j) % 30, j * 10 + i)
            sent[i].append(m)
            s.send(m)
    for i, rc in enumerate(rcvs):
        got = rc.get_n(len(sent[i]), timeout=60)
        for g, m in zip(got, sent[i]):
            same(g, m)


@pytest.mark.deadline(120)
@pytest.mark.parametrize("frame", [512, 4096])
def test_aborted_deliveries_leave_no_bytes(make_router, client, frame):
    """A sender aborts a multi-frame delivery half way: the receiver never sees it, and the
    next message on the link is whole (no stale bytes of the aborted one)."""
    r = frame_router(make_router, frame)
    rcv = client.connect(r.url).receiver("zin.ab", credit=20, settle="accept")
    snd = client.connect(r.url).sender("zin.ab")
    snd.wait_credit(1)
    want = []
    for k in range(4):
        link = snd.pn
        dlv = link.delivery("ab-%d" % k)
        part = os.urandom(3 * frame + 17)
        link.send(part)  # part of an encoded message: never completed
        client.wait(lambda: link.session.outgoing_bytes == 0, msg="the partial delivery out")
        dlv.abort()
        client.flush()
        m = msg(2 * frame + k * 100, 3, k)
        want.append(m)
        snd.send(m)
    got = rcv.get_n(len(want), timeout=60)
    for g, m in zip(got, want):
        same(g, m)


@pytest.mark.deadline(120)
@pytest.mark.parametrize("how", ["detach", "close"])
def test_sender_goes_away_mid_message(make_router, client, how):
    """A sender detaches (or closes its connection) in the middle of a multi-frame message:
    nothing of it is delivered, and a new sender of the same name gets its messages whole."""
    r = frame_router(make_router, 512)
    rcv = client.connect(r.url).receiver("zin.gone", credit=20, settle="accept")
    for k in range(3):
        conn = client.connect(r.url)
        snd = conn.sender("zin.gone", name="zin-gone-sender")
        snd.wait_credit(1)
        link = snd.pn
        link.delivery("half")
        link.send(os.urandom(5000))
        client.wait(lambda: link.session.outgoing_bytes == 0, msg="the partial delivery out")
        if how == "detach":
            link.close()
        else:
            conn.pn.close()
        client.flush()
        conn2 = client.connect(r.url)
        snd2 = conn2.sender("zin.gone", name="zin-gone-sender")
        snd2.wait_credit(1)
        m = msg(3000 + k, 2, k)
        d = snd2.send(m)
        g = rcv.get(timeout=30)
        same(g, m)
        assert snd2.wait_outcome(d) == Delivery.ACCEPTED
        conn2.pn.close()


@pytest.mark.deadline(60)
def test_two_senders_of_one_name(make_router, client):
    """Two sessions of one connection attach senders of the same name (AMQP forbids it; two
    clients' links routed to one container may meet so): both links' messages arrive whole."""
    r = frame_router(make_router, 512)
    rconn = client.connect(r.url)
    rcv1 = rconn.receiver("zin.dup1", credit=20, settle="accept")
    rcv2 = rconn.receiver("zin.dup2", credit=20, settle="accept")
    conn = client.connect(r.url)
    s1 = conn.sender("zin.dup1", name="zin-dup")
    s1.wait_credit(1)
    first = msg(3000, 2, 1)
    s1.send(first)
    same(rcv1.get(timeout=30), first)
    # a second session, a sender of the same name
    ssn = conn.pn.session()
    ssn.open()
    pl = ssn.sender("zin-dup")
    pl.target.address = "zin.dup2"
    pl.open()
    client.wait(lambda: pl.credit > 0, msg="credit for the second sender")
    sent1, sent2 = [], []
    for k in range(5):
        m1, m2 = msg(2000 + k, 3, 10 + k), msg(1500 + k, 1, 20 + k)
        s1.send(m1)
        sent1.append(m1)
        d = pl.delivery("d%d" % k)
        pl.send(m2.encode())
        pl.advance()
        sent2.append(m2)
    for g, m in zip(rcv1.get_n(5, timeout=30), sent1):
        same(g, m)
    for g, m in zip(rcv2.get_n(5, timeout=30), sent2):
        same(g, m)
