"""The router annotations of messages that cross a mesh, as qdrouterd 1.19 writes and reads
them (issue 16 point 3), seen by a client.

A line A - B - C (B connects to A and C), each position a Junction (J) or the real qdrouterd
1.19 (Q). A producer on A's ordinary listener (which strips what a client sends) sends to a
closest address, on a link to that address (targeted) and on an anonymous link (the address
in the message's `to`); the consumer is on C's second listener, with `stripAnnotations: no`,
so the message arrives with the annotations the routers wrote on the way: `x-opt-qd.ingress`
names A, `x-opt-qd.trace` lists every router it crossed in order, A's and B's written by
them and read by the next, C's added as it leaves, and a targeted link's address travels as
`x-opt-qd.to` (written by A, read and kept by B and C). EXPECTED is what three qdrouterds
show (the QQQ case checks the reference against it); every mix must show the same. The
cases with a qdrouterd skip where ../shared/peer is absent."""
import threading

import pytest
from proton import Delivery, Message
from proton.utils import BlockingConnection

from clients import router_annotations
from conftest import free_port
from meshnet import Net, need_peer, wait_for
from mgmt_tool import Node

ADDRESS_NODE = "org.apache.qpid.dispatch.router.address"

# what a consumer on C (stripAnnotations: no) sees of a message from a client of A
TRACE = ["0/A", "0/B", "0/C"]
EXPECTED = {
    "targeted": {"x-opt-qd.ingress": "0/A", "x-opt-qd.trace": TRACE,
                 "x-opt-qd.to": "cl.ann.targeted"},
    "anonymous": {"x-opt-qd.ingress": "0/A", "x-opt-qd.trace": TRACE},
}


@pytest.fixture
def net(make_router, tmp_path, request):
    n = Net(make_router, tmp_path, request)
    yield n
    n.close()


def remote_count(url, key):
    n = Node(url)
    try:
        rows = {r["key"]: r for r in n.query_dicts(ADDRESS_NODE)}
    finally:
        n.close()
    r = rows.get(key)
    return r["remoteCount"] if r else 0


def send_one(url, address, targeted, out):
    c = BlockingConnection(url)
    try:
        s = c.create_sender(address if targeted else None)
        d = s.send(Message(address=address, body="via the mesh"), timeout=20)
        out.append(d.remote_state)
    except Exception as e:  # reported by the test
        out.append(e)
    finally:
        c.close()


@pytest.mark.deadline(120)
@pytest.mark.parametrize("kinds", ["QQQ", "JJJ", "JQJ", "QJQ", "JJQ", "QQJ"])
def test_annotations_across_a_line(net, kinds):
    """kinds: who holds A, B and C."""
    if "Q" in kinds:
        need_peer()
    a, b, c = (net.add(k, rid) for k, rid in zip(kinds, "ABC"))
    c.raw_port = free_port()
    b.connect_to(a)
    b.connect_to(c)
    for p in (a, c, b):
        p.start()
    net.converged({"A": {"B"}, "B": {"A", "C"}, "C": {"B"}})
    got = {}
    for how in ("targeted", "anonymous"):
        address = "cl.ann.%s" % how
        rc = BlockingConnection("amqp://127.0.0.1:%d" % c.raw_port)
        try:
            rcv = rc.create_receiver(address)
            wait_for("A learns C's consumer of %s" % address,
                     lambda: remote_count(a.url, "M0" + address) >= 1)
            out = []
            t = threading.Thread(target=send_one, args=(a.url, address, how == "targeted", out),
                                 daemon=True)
            t.start()
            m = rcv.receive(timeout=20)
            rcv.accept()
            rc.wait(lambda: bool(out), timeout=25, msg="the outcome back at A")  # pumps C's
            t.join(5)
            assert out == [Delivery.ACCEPTED], (how, out)
            assert m.body == "via the mesh"
            got[how] = {k: (list(v) if isinstance(v, (list, tuple)) else str(v))
                        for k, v in router_annotations(m).items()}
        finally:
            rc.close()
    assert got == EXPECTED, "%s: %r" % (kinds, got)
    for p in (a, b, c):
        text = p.log_text()
        for bad in ("protocol error", "CRITICAL"):
            assert bad not in text, "%s logged %r:\n%s" % (p.id, bad, text[-3000:])
