"""Dynamic receivers (router-assigned temporary addresses) and request/reply."""

import re

import pytest
from proton import Delivery, Message
from proton.utils import BlockingConnection, SyncRequestResponse

from clients import ServiceThread, outcome_name
from conftest import ROUTER_ID

TEMP_RE = re.compile(r"^amqp:/_topo/0/%s/temp\.\S+$" % re.escape(ROUTER_ID))


def test_dynamic_receiver_gets_a_topological_temp_address(router, client):
    rcv = client.connect(router.url).receiver(dynamic=True)
    addr = rcv.remote_address
    assert addr and TEMP_RE.match(addr), "dynamic address %r is not amqp:/_topo/0/%s/temp.*" % (
        addr, ROUTER_ID)
    assert rcv.pn.remote_source.dynamic


def test_dynamic_addresses_use_the_configured_router_id(make_router, client):
    r = make_router(router={"id": "Other.Router-7"})
    rcv = client.connect(r.url).receiver(dynamic=True)
    assert rcv.remote_address.startswith("amqp:/_topo/0/Other.Router-7/temp."), \
        rcv.remote_address


def test_dynamic_addresses_are_unique(router, client):
    conns = [client.connect(router.url) for _ in range(4)]
    addrs = [conns[i % 4].receiver(dynamic=True).remote_address for i in range(40)]
    assert len(set(addrs)) == 40, addrs


@pytest.mark.parametrize("form", ["as-given", "without-scheme"])
def test_message_to_a_dynamic_address_reaches_it(router, client, form):
    rcv = client.connect(router.url).receiver(dynamic=True, settle="accept")
    addr = rcv.remote_address
    if form == "without-scheme":
        addr = addr[len("amqp:/"):]
    snd = client.connect(router.url).sender(None)
    dlv = snd.send(Message(address=addr, body="to temp"))
    assert rcv.get().body == "to temp"
    assert snd.wait_outcome(dlv) == Delivery.ACCEPTED


def test_targeted_sender_to_a_dynamic_address(router, client):
    rcv = client.connect(router.url).receiver(dynamic=True, settle="accept")
    snd = client.connect(router.url).sender(rcv.remote_address)
    snd.send(Message(body="targeted"))
    assert rcv.get().body == "targeted"


def test_request_reply_through_the_router(router, client):
    service_conn = client.connect(router.url)
    service = service_conn.receiver("rr.service", settle="accept")
    replier = service_conn.sender(None)

    app = client.connect(router.url)
    replies = app.receiver(dynamic=True, settle="accept")
    requester = app.sender("rr.service")
    for i in range(3):
        requester.send(Message(body="req%d" % i, reply_to=replies.remote_address,
                               correlation_id="c%d" % i))
        req = service.get()
        assert req.message.reply_to == replies.remote_address
        d = replier.send(Message(address=req.message.reply_to,
                                 correlation_id=req.message.correlation_id,
                                 body=req.body.upper()))
        rep = replies.get()
        assert rep.body == "REQ%d" % i
        assert rep.message.correlation_id == "c%d" % i
        assert replier.wait_outcome(d) == Delivery.ACCEPTED


def test_sync_request_response_end_to_end(router):
    svc = ServiceThread(router.url, "rpc.echo", fn=lambda body: "echo:" + body)
    svc.start()
    try:
        assert svc.ready.wait(10), "service did not start"
        assert svc.error is None, svc.error
        conn = BlockingConnection(router.url, timeout=10)
        try:
            rpc = SyncRequestResponse(conn, "rpc.echo")
            assert TEMP_RE.match(rpc.reply_to), rpc.reply_to
            for i in range(5):
                resp = rpc.call(Message(body="ping%d" % i))
                assert resp.body == "echo:ping%d" % i
        finally:
            conn.close()
    finally:
        svc.stop()
    assert svc.error is None, svc.error
    assert svc.handled == 5


def test_dynamic_address_is_gone_after_its_receiver_detaches(router, client):
    rcv = client.connect(router.url).receiver(dynamic=True, settle="accept")
    addr = rcv.remote_address
    rcv.close()
    snd = client.connect(router.url).sender(None)
    dlv = snd.send(Message(address=addr, body="too late"))
    assert outcome_name(snd.wait_outcome(dlv)) == "RELEASED"
