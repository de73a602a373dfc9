"""Zero-copy over TLS (issue 18, docs/decisions/0009 and 0005): a TLS connection's plaintext
takes the path of a plain connection's bytes.  The session decrypts into the router's read
buffers, transfer payloads stay there beside Proton (router/zin.h), and the outgoing frames'
shares go to the session beside Proton's own bytes (router/zc_out.h, rtr_zc_put_WT).  Every
byte must arrive, whatever the frames on either side split it into: annotations 0..200,
bodies 0 B .. 1 MB and a streamed 50 MB message, small frames both ways (the router's
listener and the receiver's max-frame-size, with a receiver window of 2 frames), presettled
and at-least-once, aborted deliveries, a receiver that goes mid-message, and TLS and plain
clients on one address.

The certificates are made at test time (test_tls.py's `certs`)."""

import os

import pytest
from proton import Delivery, Message

from conftest import router_entities
from test_tls import OPENSSL, certs, profile, tls_domain  # noqa: F401 (certs: a fixture)
from test_zero_copy_in import msg, same
from test_zero_copy_out import annotations, check, every_byte, payload, small_receiver

pytestmark = pytest.mark.skipif(OPENSSL is None, reason="the openssl command is not installed")

MB = 1024 * 1024
SIZES = [0, 1, 100, 511, 512, 513, 4096, 20000, 70000, 300000, MB]


def zc_tls_router(make_router, certs, frame=None):  # noqa: F811
    """Listeners: 0 TLS only, 1 plain; both with maxFrameSize `frame` when given."""
    lst = [{"host": "127.0.0.1", "port": "0", "sslProfile": "tls", "requireSsl": True},
           {"host": "127.0.0.1", "port": "0"}]
    if frame:
        for ls in lst:
            ls["maxFrameSize"] = frame
    return make_router(router_entities(listeners=lst, extra=[profile(certs)]))


def tls_connect(client, r, certs, **kw):  # noqa: F811
    return client.connect("amqps://%s:%d" % r.addresses[0], ssl_domain=tls_domain(certs), **kw)


@pytest.mark.deadline(240)
@pytest.mark.parametrize("frame", [512, 4096])
@pytest.mark.parametrize("presettled", [False, True])
def test_every_byte_both_ways_small_frames(make_router, certs, client, frame,  # noqa: F811
                                           presettled):
    """A TLS sender whose frames the router's maxFrameSize keeps small, and a TLS receiver
    with the same max-frame-size and a window of 2 frames: every byte, every size."""
    r = zc_tls_router(make_router, certs, frame)
    rconn = tls_connect(client, r, certs, max_frame_size=frame)
    rcv = small_receiver(rconn, "zct.all", frame, 2, credit=5)
    snd = tls_connect(client, r, certs).sender("zct.all", presettled=presettled)
    every_byte(snd, rcv, SIZES, presettled)
    assert r.is_running()


@pytest.mark.slow
@pytest.mark.deadline(240)
def test_streamed_50mb_both_ways(make_router, certs, client):  # noqa: F811
    r = zc_tls_router(make_router, certs, 4096)
    body = os.urandom(50 * MB)
    rconn = tls_connect(client, r, certs, max_frame_size=4096)
    rcv = small_receiver(rconn, "zct.big", 4096, 4, credit=2)
    snd = tls_connect(client, r, certs).sender("zct.big")
    ann = annotations(200, 1)
    dlv = snd.send(Message(id=1, annotations=ann, body=body, inferred=True))
    check(rcv.get(timeout=200), ann, body, 1)
    assert snd.wait_outcome(dlv, timeout=60) == Delivery.ACCEPTED


@pytest.mark.deadline(120)
def test_tls_and_plain_clients_on_one_address(make_router, certs, client):  # noqa: F811
    """Messages from a TLS sender and a plain one to a TLS receiver and a plain one (fan-out:
    each copy's shares go to a socket, or to a session), every byte checked."""
    r = zc_tls_router(make_router, certs, 4096)
    rcvs = [tls_connect(client, r, certs).receiver("multicast.zct", credit=50,
                                                   settle="accept"),
            client.connect(r.url_of(1)).receiver("multicast.zct", credit=50, settle="accept")]
    snds = [tls_connect(client, r, certs).sender("multicast.zct", presettled=True),
            client.connect(r.url_of(1)).sender("multicast.zct", presettled=True)]
    sent = []
    for i in range(12):
        m = msg((i * 9973) % 70000, (i * 37) % 201, i)
        sent.append(m)
        snds[i % 2].send(m)
    for rc in rcvs:  # two senders: the order holds per sender only
        got = rc.get_n(len(sent), timeout=60)
        by_seed = {g.message.properties["seed"]: g for g in got if g.message is not None}
        assert sorted(by_seed) == list(range(len(sent)))
        for m in sent:
            same(by_seed[m.properties["seed"]], m)


@pytest.mark.deadline(120)
def test_aborted_deliveries_leave_no_bytes(make_router, certs, client):  # noqa: F811
    r = zc_tls_router(make_router, certs, 512)
    rcv = tls_connect(client, r, certs).receiver("zct.ab", credit=20, settle="accept")
    snd = tls_connect(client, r, certs).sender("zct.ab")
    snd.wait_credit(1)
    want = []
    for k in range(4):
        link = snd.pn
        dlv = link.delivery("ab-%d" % k)
        link.send(os.urandom(3 * 512 + 17))  # part of an encoded message: never completed
        client.wait(lambda: link.session.outgoing_bytes == 0, msg="the partial delivery out")
        dlv.abort()
        client.flush()
        m = msg(2 * 512 + k * 100, 3, k)
        want.append(m)
        snd.send(m)
    for g, m in zip(rcv.get_n(len(want), timeout=60), want):
        same(g, m)


@pytest.mark.deadline(120)
def test_receiver_gone_mid_message(make_router, certs, client):  # noqa: F811
    """A TLS receiver goes while a large message is on its way to it: the sender gets the
    outcome, then fresh credit on the same link, and the next receiver every byte."""
    r = zc_tls_router(make_router, certs)
    rconn = tls_connect(client, r, certs, max_frame_size=512)
    rcv = small_receiver(rconn, "zct.gone", 512, 2, credit=1, settle=None)
    snd = tls_connect(client, r, certs).sender("zct.gone")
    dlv = snd.send(Message(id=1, body=payload(8 * MB, 3), inferred=True))
    client.run_for(0.3)  # part of it is on its way
    assert rcv.count == 0
    rconn.close()
    assert snd.wait_outcome(dlv, timeout=60) in (Delivery.MODIFIED, Delivery.RELEASED)
    rconn2 = tls_connect(client, r, certs, max_frame_size=512)
    rcv2 = small_receiver(rconn2, "zct.gone", 512, 2, credit=5)
    for i in range(3):
        body = payload(70000 + i, 10 + i)
        snd.send(Message(id=10 + i, annotations=annotations(i * 50, i), body=body,
                         inferred=True))
        check(rcv2.get(timeout=60), annotations(i * 50, i), body, 10 + i)
    assert r.is_running()
