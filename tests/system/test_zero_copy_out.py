"""Outgoing payloads written beside Proton (issue 18, docs/decisions/0009 "Output without
copies"): the router gives Proton one placeholder byte per outgoing frame and writes each
frame's share of the message in its place.  These tests check that every byte arrives, to
receivers with a small max-frame-size and a small session window (the window closes between
the frames of one message), presettled and at-least-once, streamed messages included, and
that a receiver that detaches or a connection that closes mid-message leaves the router
whole."""

import hashlib
import os

import pytest
from proton import Delivery, Message, symbol

from clients import Rcv

MB = 1024 * 1024

ANNOTATIONS = [0, 1, 30, 200]
BODIES = [0, 1, 100, 400, 511, 4096, 20000, 65536, 300 * 1024, MB]


def annotations(n, seed):
    return {symbol("k%03d" % i): "v%d-%d-%s" % (seed, i, "x" * 80) for i in range(n)}


def payload(size, seed):
    return bytes((seed * 7 + i * 13) & 0xFF for i in range(min(size, 4096))) * (size // 4096) + \
        bytes((seed * 7 + i * 13) & 0xFF for i in range(size % 4096))


def small_receiver(conn, address, max_frame, capacity_frames, credit, settle="accept",
                   name=None):
    """A receiver on a session of its own whose incoming window is `capacity_frames` frames
    (the window closes between the frames of one message)."""
    client = conn.client
    ssn = conn.pn.session()
    ssn.incoming_capacity = capacity_frames * max_frame
    ssn.open()
    name = name or client.link_name("rcv", address)
    pn = client.container.create_receiver(ssn, address, name=name, handler=None)
    r = Rcv(conn, pn, settle, True)
    pn.flow(credit)
    r.wait_attached()
    return r


def data_section(body):
    if len(body) < 256:
        return b"\x00\x53\x75\xa0" + bytes([len(body)]) + body
    return b"\x00\x53\x75\xb0" + len(body).to_bytes(4, "big") + body


def check(got, want_ann, want_body, mid):
    assert got.message is not None, got.decode_error
    assert got.message.id == mid
    ann = {k: v for k, v in (got.message.annotations or {}).items()
           if not str(k).startswith("x-opt-qd")}
    assert ann == want_ann
    # the body section byte for byte, as the sender wrote it
    assert got.raw.endswith(data_section(want_body))
    assert hashlib.sha256(got.message.body).digest() == hashlib.sha256(want_body).digest()


def every_byte(snd, rcv, bodies, presettled):
    """Send one message for each number of annotations in ANNOTATIONS and each body size in
    `bodies` (ids 1, 2, ..., each its own annotations and payload), then check every byte of
    each as `rcv` gets them, in order, and, unless `presettled`, that all were accepted."""
    sent = []
    seq = 0
    for n_ann in ANNOTATIONS:
        for size in bodies:
            seq += 1
            ann = annotations(n_ann, seq)
            body = payload(size, seq)
            msg = Message(id=seq, annotations=ann, body=body, inferred=True)
            dlv = snd.send(msg, timeout=60)
            sent.append((ann, body, seq, dlv))
    for ann, body, seq, _ in sent:
        got = rcv.get(timeout=120)
        check(got, ann, body, seq)
    if not presettled:
        assert snd.wait_outcomes([d for *_, d in sent], timeout=60) == \
            [Delivery.ACCEPTED] * len(sent)


@pytest.mark.deadline(240)
@pytest.mark.parametrize("max_frame", [512, 4096])
@pytest.mark.parametrize("presettled", [False, True])
def test_every_byte_small_frames(router, client, max_frame, presettled):
    address = "zc.%d.%d" % (max_frame, presettled)
    rconn = client.connect(router.url, max_frame_size=max_frame)
    rcv = small_receiver(rconn, address, max_frame, 2, credit=5)
    snd = client.connect(router.url).sender(address, presettled=presettled)
    every_byte(snd, rcv, BODIES, presettled)
    assert router.is_running()


@pytest.mark.slow
@pytest.mark.deadline(240)
def test_streamed_50mb_small_frames(router, client):
    body = os.urandom(50 * MB)
    rconn = client.connect(router.url, max_frame_size=4096)
    rcv = small_receiver(rconn, "zc.big", 4096, 4, credit=2)
    snd = client.connect(router.url).sender("zc.big")
    ann = annotations(200, 1)
    dlv = snd.send(Message(id=1, annotations=ann, body=body, inferred=True))
    got = rcv.get(timeout=200)
    check(got, ann, body, 1)
    assert snd.wait_outcome(dlv, timeout=60) == Delivery.ACCEPTED


@pytest.mark.deadline(120)
@pytest.mark.parametrize("how", ["detach", "close"])
def test_receiver_gone_mid_message(router, client, how):
    """A receiver whose link (or connection) goes while a message is on its way to it: the
    router stays whole and the next receiver gets the next messages intact."""
    big = payload(8 * MB, 3)
    rconn = client.connect(router.url, max_frame_size=512)
    rcv = small_receiver(rconn, "zc.gone", 512, 2, credit=1, settle=None)
    snd = client.connect(router.url).sender("zc.gone")
    dlv = snd.send(Message(id=1, body=big, inferred=True))
    client.run_for(0.3)  # part of it is on its way
    assert rcv.count == 0
    if how == "detach":
        rcv.close()
    else:
        rconn.close()
    outcome = snd.wait_outcome(dlv, timeout=60)
    assert outcome in (Delivery.MODIFIED, Delivery.RELEASED)
    rconn2 = client.connect(router.url, max_frame_size=512)
    rcv2 = small_receiver(rconn2, "zc.gone", 512, 2, credit=5)
    # the next messages on the same sender: the router drained it when its receiver went,
    # and Proton 0.37 holds back its answer to a drain that came while a delivery was not
    # all written - the router's fresh credit must not wait for that answer
    for i in range(3):
        body = payload(70000 + i, 10 + i)
        snd.send(Message(id=10 + i, annotations=annotations(i * 50, i), body=body,
                         inferred=True))
        check(rcv2.get(timeout=60), annotations(i * 50, i), body, 10 + i)
    assert router.is_running()


@pytest.mark.deadline(120)
def test_receiver_gone_as_message_starts(router, client):
    """The only receiver goes as a large message starts: the router drains the sender, whose
    Proton may then hold the rest of the message back.  The outcome still comes (RELEASED when
    the router routed the message after the receiver went, MODIFIED when it was on its way),
    before the rest of the message, and the router goes on."""
    rconn = client.connect(router.url, max_frame_size=512)
    rcv = small_receiver(rconn, "zc.gone2", 512, 2, credit=1, settle=None)
    snd = client.connect(router.url).sender("zc.gone2")
    dlv = snd.send(Message(id=1, body=payload(8 * MB, 3), inferred=True))
    rcv.close(wait=False)
    assert snd.wait_outcome(dlv, timeout=30) in (Delivery.MODIFIED, Delivery.RELEASED)
    assert rcv.count == 0
    rconn2 = client.connect(router.url, max_frame_size=512)
    rcv2 = small_receiver(rconn2, "zc.gone2", 512, 2, credit=5)
    # the next messages on the same sender: the router drained it when its receiver went,
    # and Proton 0.37 holds back its answer to a drain that came while a delivery was not
    # all written - the router's fresh credit must not wait for that answer
    for i in range(3):
        body = payload(70000 + i, 10 + i)
        snd.send(Message(id=10 + i, body=body, inferred=True))
        check(rcv2.get(timeout=60), {}, body, 10 + i)
    assert router.is_running()


@pytest.mark.deadline(180)
def test_sender_drained_mid_message_again_and_again(router, client):
    """Eight times over, on one sender: the only receiver goes while a large message is on
    its way, the router drains the sender, and the next receiver's credit must reach that
    sender.  A Proton 0.37 sender drained while its newest delivery is not all written gives
    its credit back to the application but holds the answer to the router until the link
    changes again, and nothing changes it: a router that waits for the answer before it
    grants again leaves the sender at credit 0 for good."""
    snd = None
    big = payload(8 * MB, 5)
    for i in range(8):
        rconn = client.connect(router.url, max_frame_size=512)
        rcv = small_receiver(rconn, "zc.again", 512, 2, credit=1, settle=None)
        snd = snd or client.connect(router.url).sender("zc.again")
        dlv = snd.send(Message(id=i, body=big, inferred=True), timeout=30)
        if i % 2:  # as the message starts, or once part of it is held back in the sender
            client.wait(lambda: snd.pn.session.outgoing_bytes > 0, timeout=30,
                        msg="the message held in the sender (the router reads no more)")
        rcv.close(wait=False)
        assert snd.wait_outcome(dlv, timeout=30) in (Delivery.MODIFIED, Delivery.RELEASED)
        rconn2 = client.connect(router.url, max_frame_size=512)
        rcv2 = small_receiver(rconn2, "zc.again", 512, 2, credit=5)
        body = payload(1000 + i, i)
        snd.send(Message(id=100 + i, body=body, inferred=True), timeout=30)
        check(rcv2.get(timeout=30), {}, body, 100 + i)
        rconn2.close()
    assert router.is_running()


@pytest.mark.deadline(120)
def test_many_receivers_interleaved(router, client):
    """Several links on one connection with multi-frame messages at once: each link's frames
    take their own shares, whatever order Proton writes them in."""
    rconn = client.connect(router.url, max_frame_size=512)
    rcvs = [small_receiver(rconn, "zc.many.%d" % i, 512, 3, credit=10) for i in range(4)]
    sconn = client.connect(router.url)
    snds = [sconn.sender("zc.many.%d" % i) for i in range(4)]
    sent = []
    for j in range(6):
        for i in range(4):
            body = payload(1000 * (j + 1) * (i + 1) + j, i * 10 + j)
            ann = annotations(j * 20, i)
            snds[i].send(Message(id=j, annotations=ann, body=body, inferred=True))
            sent.append((i, j, ann, body))
    for i, j, ann, body in sent:
        check(rcvs[i].get(timeout=60), ann, body, j)
