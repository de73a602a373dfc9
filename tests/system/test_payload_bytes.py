"""Every byte of every section arrives as it was sent (issue 18: the router's zero-copy input
and output must change nothing a client sees).

With stripAnnotations at its default (user annotations pass verbatim, the router writes none
of its own toward a client) junctiond forwards a message's encoded sections unchanged, so the
receiver's raw bytes must equal the sender's: header, delivery and message annotations (0 to
200 entries of about 100 bytes, the DISPATCH-760 workload), properties, application
properties, a body of 0 B to 1 MiB, and a footer.  Each case runs through a router whose
listener forces senders into small frames (maxFrameSize 512) and through one with the default
frame size, to receivers with small and default frames - so one incoming frame becomes several
outgoing ones and the other way round - presettled and at-least-once, with several senders
interleaving their multi-frame deliveries on one connection.  A 50 MiB message is compared
by digest of its raw bytes.
"""

import hashlib
import os

import pytest
from proton import Delivery, Message, symbol

MIB = 1024 * 1024


def encoded(n_annotations, body_len, seq):
    """One message's bytes: every section, n_annotations message annotations of ~100 bytes
    (seq in each, so messages differ), a random body of body_len bytes."""
    m = Message()
    m.durable = True
    m.priority = 7
    m.ttl = 60.0
    m.instructions = {symbol("x-opt-test-da"): "delivery annotation %d" % seq}
    m.annotations = {symbol("x-opt-user-%03d" % i): "v%05d-" % seq + "a" * 90
                     for i in range(n_annotations)}
    m.id = "msg-%d" % seq
    m.subject = "payload bytes"
    m.properties = {"seq": seq, "n": n_annotations, "blob": "p" * 50}
    m.body = os.urandom(body_len)
    m.footer = {symbol("x-opt-footer"): "end of %d" % seq}
    return m.encode()


CASES = [(n, b) for n in (0, 1, 20, 200) for b in (0, 32, 4000, 100000)] + [(200, MIB)]


def exchange(client, url, address, receiver_frame, presettled, senders=3):
    """Send every CASES message from `senders` senders on one connection (interleaved), to
    one receiver on another connection whose max-frame-size is receiver_frame; returns the
    (sent, received) raw byte lists in the receiver's order per sender."""
    kw = {"max_frame_size": receiver_frame} if receiver_frame else {}
    rcv = client.connect(url, **kw).receiver(address, credit=50,
                                             settle=None if presettled else "accept")
    sconn = client.connect(url)
    snds = [sconn.sender(address, presettled=presettled) for _ in range(senders)]
    sent = {}
    dlvs = [[] for _ in snds]
    for i, (n, b) in enumerate(CASES):
        for j, s in enumerate(snds):
            seq = i * senders + j
            raw = encoded(n, b, seq)
            sent[seq] = raw
            dlvs[j].append(s.send_raw(raw))
    got = rcv.get_n(len(sent), timeout=120)
    if not presettled:
        for s, ds in zip(snds, dlvs):
            states = s.wait_outcomes(ds, timeout=60)
            assert all(st == Delivery.ACCEPTED for st in states), states
    return sent, got


@pytest.mark.parametrize("listener_frame", [512, None], ids=["in-512", "in-default"])
@pytest.mark.parametrize("receiver_frame", [512, 4096, None],
                         ids=["out-512", "out-4096", "out-default"])
@pytest.mark.parametrize("presettled", [False, True], ids=["unsettled", "presettled"])
def test_every_section_byte_for_byte(make_router, client, listener_frame, receiver_frame,
                                     presettled):
    lst = {"maxFrameSize": listener_frame} if listener_frame else {}
    r = make_router(listener=lst)
    sent, got = exchange(client, r.url, "bytes", receiver_frame, presettled)
    for g in got:
        assert g.message is not None, g.decode_error
        seq = g.message.properties["seq"]
        assert g.raw == sent.pop(seq), "message %d changed on its way" % seq
    assert not sent


@pytest.mark.slow
@pytest.mark.deadline(240)
@pytest.mark.parametrize("receiver_frame", [4096, None], ids=["out-4096", "out-default"])
def test_streamed_50mib_byte_for_byte(make_router, client, receiver_frame):
    r = make_router(listener={"maxFrameSize": 16384})
    kw = {"max_frame_size": receiver_frame} if receiver_frame else {}
    rcv = client.connect(r.url, **kw).receiver("bytes.big", credit=2, settle="accept")
    snd = client.connect(r.url).sender("bytes.big")
    raw = encoded(200, 50 * MIB, 1)
    want = hashlib.sha256(raw).hexdigest()
    dlv = snd.send_raw(raw)
    g = rcv.get(timeout=180)
    assert len(g.raw) == len(raw)
    assert hashlib.sha256(g.raw).hexdigest() == want
    assert snd.wait_outcome(dlv, timeout=60) == Delivery.ACCEPTED
