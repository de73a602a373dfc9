"""What a client sees of a message that crossed a mesh hop by hop (issue 16 point 3): the
router annotations as qdrouterd 1.19 writes and reads them, and the consumer's outcome
carried back to the producer.

A line A - B - C (B connects to A and C), each position a Junction (J) or the real qdrouterd
1.19 (Q); a producer on A's ordinary listener (which strips what a client sends), a consumer
of a closest address on C.

* Annotations: the consumer is on C's second listener, with `stripAnnotations: no`, so the
  message arrives with the annotations the routers wrote on the way, sent on a link to the
  address (targeted) and on an anonymous link (the address in the message's `to`):
  `x-opt-qd.ingress` names A, `x-opt-qd.trace` lists every router it crossed in order (A's
  and B's written by them and read by the next, C's added as it leaves), and a targeted
  link's address travels as `x-opt-qd.to` (written by A, read and kept by B and C).
* Outcomes: the consumer settles one message each way - accepted, rejected (with an error
  condition), released, modified (no flags) - and the producer's delivery gets that outcome
  through both hops, the condition too, and a MODIFIED with delivery-failed set (qdrouterd
  1.19 sets it on every MODIFIED it passes back; Junction did not before, so the producer's
  flag depended on which routers the path crossed).

EXPECTED and OUTCOMES are what three qdrouterds show (the QQQ case checks the reference
against them); every mix must show the same. The cases with a qdrouterd skip where
../shared/peer is absent."""
import threading

import pytest
from proton import Condition, Delivery, Message
from proton.handlers import MessagingHandler
from proton.reactor import Container
from proton.utils import BlockingConnection

from clients import router_annotations
from conftest import free_port
from meshnet import Net, need_peer, wait_for
from mgmt_tool import Node

ADDRESS_NODE = "org.apache.qpid.dispatch.router.address"
KINDS = ["QQQ", "JJJ", "JQJ", "QJQ", "JJQ", "QQJ"]

# what a consumer on C (stripAnnotations: no) sees of a message from a client of A
TRACE = ["0/A", "0/B", "0/C"]
EXPECTED = {
    "targeted": {"x-opt-qd.ingress": "0/A", "x-opt-qd.trace": TRACE,
                 "x-opt-qd.to": "cl.ann.targeted"},
    "anonymous": {"x-opt-qd.ingress": "0/A", "x-opt-qd.trace": TRACE},
}
# the consumer's settlement -> what the producer's delivery shows
OUTCOMES = {
    "accept": (Delivery.ACCEPTED, None, False),
    "reject": (Delivery.REJECTED, ("test:refused", "no thanks"), False),
    "release": (Delivery.RELEASED, None, False),
    "modify": (Delivery.MODIFIED, None, True),
}


@pytest.fixture
def net(make_router, tmp_path, request):
    n = Net(make_router, tmp_path, request)
    yield n
    n.close()


def line(net, kinds, raw=False):
    """The line A - B - C, converged; C with a stripAnnotations-no listener when `raw`."""
    if "Q" in kinds:
        need_peer()
    a, b, c = (net.add(k, rid) for k, rid in zip(kinds, "ABC"))
    if raw:
        c.raw_port = free_port()
    b.connect_to(a)
    b.connect_to(c)
    for p in (a, c, b):
        p.start()
    net.converged({"A": {"B"}, "B": {"A", "C"}, "C": {"B"}})
    return a, b, c


def remote_count(url, key):
    n = Node(url)
    try:
        rows = {r["key"]: r for r in n.query_dicts(ADDRESS_NODE)}
    finally:
        n.close()
    r = rows.get(key)
    return r["remoteCount"] if r else 0


def no_bad_logs(*pos):
    for p in pos:
        text = p.log_text()
        for bad in ("protocol error", "CRITICAL"):
            assert bad not in text, "%s logged %r:\n%s" % (p.id, bad, text[-3000:])


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
@pytest.mark.parametrize("kinds", KINDS)
def test_annotations_across_a_line(net, kinds):
    """kinds: who holds A, B and C."""
    a, b, c = line(net, kinds, raw=True)
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
    no_bad_logs(a, b, c)


class Settler(MessagingHandler):
    """The consumer on C: settles each message as its body says (OUTCOMES' keys)."""

    def __init__(self, url, address):
        super().__init__(prefetch=10, auto_accept=False)
        self.url, self.address = url, address
        self.ready = threading.Event()
        self.seen = []
        self.container = Container(self)
        self.error = None

    def on_start(self, event):
        self.conn = event.container.connect(self.url)
        event.container.create_receiver(self.conn, self.address)

    def on_link_opened(self, event):
        self.ready.set()

    def on_message(self, event):
        how = event.message.body
        self.seen.append(how)
        d = event.delivery
        if how == "accept":
            self.accept(d)
        elif how == "reject":
            d.local.condition = Condition(*OUTCOMES["reject"][1])
            self.reject(d)
        elif how == "release":
            self.release(d, delivered=False)
        else:
            self.release(d, delivered=True)  # MODIFIED, no flags (Proton-Python sets none)

    def on_transport_error(self, event):
        self.error = event.transport.condition

    def stop(self):
        self.container.stop()


@pytest.mark.deadline(120)
@pytest.mark.parametrize("kinds", KINDS)
def test_outcomes_across_a_line(net, kinds):
    """kinds: who holds A, B and C."""
    a, b, c = line(net, kinds)
    address = "cl.outcome"
    settler = Settler(c.url, address)
    th = threading.Thread(target=settler.container.run, daemon=True)
    th.start()
    got = {}
    try:
        assert settler.ready.wait(10), "the consumer on C attached"
        wait_for("A learns C's consumer", lambda: remote_count(a.url, "M0" + address) >= 1)
        snd = BlockingConnection(a.url)
        try:
            s = snd.create_sender(address)
            for how in OUTCOMES:
                d = s.send(Message(address=address, body=how), timeout=20, error_states=[])
                cond = d.remote.condition
                got[how] = (d.remote_state,
                            (str(cond.name), str(cond.description)) if cond else None,
                            bool(d.remote.failed))
        finally:
            snd.close()
    finally:
        settler.stop()
        th.join(10)
    assert settler.error is None, settler.error
    assert got == OUTCOMES, "%s: %r" % (kinds, got)
    assert settler.seen == list(OUTCOMES), "each message reached C once: %r" % settler.seen
    no_bad_logs(a, b, c)
