"""Link routes across an interior mesh (qdrouterd 1.19's link routing between routers): router
A has a connector of role route-container to a broker and linkRoutes that name it; router B,
joined to A by an inter-router connector, has linkRoutes with only a prefix and a direction
(or none at all: it learns A's patterns from A's mobile-address updates).  A client on B
attaches to an address under the prefix: B sends the attach on to A over the inter-router
connection, A to the broker, and every frame of the link then travels hop by hop, so the
client talks to the broker queue as if attached to it.

Each pair is run as Junction-Junction and mixed with the real qdrouterd 1.19 of
../shared/peer both ways (skipped with the reason where it is absent), against the Proton
example broker and RabbitMQ.  Failures: the broker killed while deliveries are in flight,
and router A killed (the inter-router connection gone): the client's links are detached
with an error, nothing in flight is reported ACCEPTED, later attaches get
`qd:no-route-to-dest`, and link routing resumes when the broker or router is back.

test_config_2_broker runs qpid-dispatch 1.19's own tests/config-2-broker/ A.conf and B.conf
(tests/data/qdrouterd-configs), changed only in their ports and hosts as
test_interior_corpus.py changes its meshes (A's connector to the broker gets the broker's
port), and sends and receives through both routers to a queue of RabbitMQ and of the Proton
broker by the `queue.` link route."""
import os
import signal
import subprocess

import pytest
from proton import Delivery, Message

from brokers import unique_name
from clients import Client
from conftest import Router, free_port
from meshnet import PEER_BIN, answers, interior_env, need_peer, stop_process, wait_for
from qdr_peer import start_standalone
from test_interior_corpus import CORPUS, rewrite

PREFIX = "lrm"
NOWHERE = "lrmnone"  # a link route no router's container serves
KINDS = ["JJ", "QJ", "JQ"]  # A (the broker's router) then B (the client's router)
LOST = (Delivery.RELEASED, Delivery.MODIFIED)


def skip_qdrouterd_rabbitmq(a_kind, broker_name):
    """qdrouterd 1.19 as the broker's router aborts on RabbitMQ's link routes (a Proton
    assertion, `pn_link_flow` on a sender, when RabbitMQ's flow echo (R5) comes on a routed
    receiver; docs/brokers.md): two qdrouterds do the same."""
    if a_kind == "Q" and broker_name == "rabbitmq":
        pytest.skip("qdrouterd 1.19 aborts on RabbitMQ's flow echo on a link route "
                    "(pn_link_flow assertion; docs/brokers.md)")


class QdRouter:
    """The real qdrouterd 1.19 on a .conf text written under tmp (qpid-dispatch's own files;
    its output, trace logging included, in NAME.log)."""

    def __init__(self, tmp, name, text, port):
        self.name, self.port = name, port
        self.log = tmp / ("%s.log" % name)
        self.cfg = tmp / ("%s.conf" % name)
        self.cfg.write_text(text)
        self.proc = None

    def start(self):
        need_peer()
        self.out = open(self.log, "ab")
        self.proc = subprocess.Popen([str(PEER_BIN / "qdrouterd"), "-c", str(self.cfg)],
                                     stdout=self.out, stderr=subprocess.STDOUT)
        wait_for("qdrouterd %s listening" % self.name, lambda: answers(self.port), timeout=15,
                 every=0.1)
        return self

    def stop(self):
        if self.proc:
            stop_process(self.proc)
            self.out.close()


class Side:
    """One router of the pair, Junction ("J") or qdrouterd ("Q"), restartable on its ports."""

    def __init__(self, pair, kind, rid):
        self.pair, self.kind, self.id = pair, kind, rid
        self.port, self.ir_port = free_port(), free_port()
        self.r = None
        self.starts = 0

    @property
    def url(self):
        return "amqp://127.0.0.1:%d" % self.port

    def start(self, broker_port=None, connect=None, routes=True, listen=None):
        self.starts += 1
        name = "%s-%d" % (self.id, self.starts)
        ents = [["router", {"id": self.id, "mode": "interior"}],
                ["listener", {"host": "127.0.0.1", "port": str(self.port)}]]
        if listen or (listen is None and connect is None):
            ents.append(["listener", {"host": "127.0.0.1", "port": str(self.ir_port),
                                      "role": "inter-router"}])
        if connect is not None:
            ents.append(["connector", {"host": "127.0.0.1", "port": str(connect),
                                       "role": "inter-router"}])
        if broker_port is not None:
            ents.append(["connector", {"name": "broker", "host": "127.0.0.1",
                                       "port": str(broker_port), "role": "route-container"}])
        if routes:
            for prefix in (PREFIX, NOWHERE):
                for d in ("in", "out"):
                    lr = {"prefix": prefix, "direction": d}
                    if broker_port is not None:
                        lr["connection"] = "broker" if prefix == PREFIX else "nobroker"
                    ents.append(["linkRoute", lr])
        if self.kind == "J":
            self.r = self.pair.make_router(ents, name=name, env=interior_env())
        else:
            for t, a in ents:
                if t in ("listener", "connector"):
                    a["saslMechanisms"] = "ANONYMOUS"
            self.r = start_standalone(self.pair.tmp / (name + ".json"), ents, self.port)
            self.pair.qds.append(self.r)
        return self

    def kill(self):
        proc = self.r.proc if self.kind == "J" else self.r
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        if self.kind == "J":
            self.pair.request.node.jn_routers.remove(self.r)  # no shutdown to check


class Pair:
    def __init__(self, make_router, tmp, request, kinds):
        self.make_router, self.tmp, self.request = make_router, tmp, request
        self.qds = []
        if "Q" in kinds:
            need_peer()
        self.a = Side(self, kinds[0], "LR.A")
        self.b = Side(self, kinds[1], "LR.B")

    def start(self, broker, b_routes=True):
        skip_qdrouterd_rabbitmq(self.a.kind, broker.name)
        self.a.start(broker_port=broker.port)
        self.b.start(connect=self.a.ir_port, routes=b_routes)
        return self

    def close(self):
        for q in self.qds:
            stop_process(q)


@pytest.fixture
def pair_of(make_router, tmp_path, request):
    made = []

    def make(kinds):
        p = Pair(make_router, tmp_path, request, kinds)
        made.append(p)
        return p
    yield make
    for p in made:
        p.close()


@pytest.fixture(params=["proton_broker", "rabbitmq"])
def broker(request):
    return request.getfixturevalue(request.param)


def attach_result(url, address):
    """Attach a sender on a fresh connection: None when it attached and got credit (from the
    broker: nobody consumes the address as a message-routed one), "no credit" when it
    attached without, else the detach's condition name."""
    c = Client(timeout=10)
    try:
        conn = c.connect(url)
        link = conn.sender(address)
        c.wait(lambda: link.credit > 0 or link.is_remote_closed(), 3, "credit or detach") \
            if not link.is_remote_closed() else None
        if link.is_remote_closed():
            return link.remote_condition.name if link.remote_condition else "closed"
        return None
    except AssertionError:
        return "no credit"
    finally:
        c.close()


def wait_routed(url, address, timeout=45):
    """`address` is link-routed through the mesh from `url` (the broker grants credit)."""
    wait_for("link route to %s through %s" % (address, url),
             lambda: attach_result(url, address) is None, timeout=timeout, every=0.5)


def wait_no_route(url, address, timeout=45):
    wait_for("qd:no-route-to-dest for %s through %s" % (address, url),
             lambda: attach_result(url, address) == "qd:no-route-to-dest", timeout=timeout,
             every=0.5)


def routed_queue(url, timeout=45):
    """A fresh queue under PREFIX, once it is link-routed through the mesh from `url`."""
    queue = "%s.%s" % (PREFIX, unique_name())
    wait_routed(url, queue, timeout=timeout)
    return queue


def exchange(conn, queue, n, tag):
    """Send n messages to the queue and receive them back, all through the link route."""
    snd = conn.sender(queue)
    assert snd.remote_condition is None
    dlvs = [snd.send(Message(body="%s%d" % (tag, i))) for i in range(n)]
    assert snd.wait_outcomes(dlvs) == [Delivery.ACCEPTED] * n
    rcv = conn.receiver(queue, credit=n)
    got = rcv.get_n(n)
    assert [m.body for m in got] == ["%s%d" % (tag, i) for i in range(n)]
    for m in got:
        m.accept()
    return snd, rcv


def exchange_once(url, queue, n, tag):
    """exchange() on a connection of its own to `url`."""
    c = Client()
    try:
        exchange(c.connect(url), queue, n, tag)
    finally:
        c.close()


def detached_with_error(*links):
    """Each of `links` was detached by the router with an error condition."""
    for link in links:
        assert link.remote_condition is not None and link.remote_condition.name


def freeze(broker):
    os.killpg(broker.proc.pid, signal.SIGSTOP)


def thaw(broker):
    try:
        os.killpg(broker.proc.pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


def send_in_flight(c, snd, n, tag):
    """Send n messages that cannot be settled (the broker is frozen): as many as credit
    allows (the broker granted some with its attach)."""
    c.run_for(0.2)
    n = min(n, snd.credit)
    assert n > 0, "no credit left to send with"
    dlvs = [snd.send(Message(body="%s%d" % (tag, i)), wait_credit=False) for i in range(n)]
    c.run_for(0.5)
    assert not any(d.settled for d in dlvs), "settled while the broker is frozen"
    return dlvs


@pytest.mark.deadline(150)
@pytest.mark.parametrize("kinds", KINDS)
def test_link_route_across_the_mesh(pair_of, broker, kinds):
    p = pair_of(kinds).start(broker)
    queue = routed_queue(p.b.url)
    c = Client()
    try:
        conn = c.connect(p.b.url)
        exchange(conn, queue, 3, "m")
        # no router's container serves this one: qdrouterd's no-route answer
        lost = conn.sender(NOWHERE + ".x")
        assert lost.wait_remote_closed(timeout=20)
        assert lost.remote_condition.name == "qd:no-route-to-dest"
        # the mesh carried the attach: B has no route container of its own
        if p.b.kind == "J":
            text = "\n".join(p.b.r.stderr_lines())
            assert "Link routed to connection" in text
    finally:
        c.close()


@pytest.mark.deadline(150)
@pytest.mark.parametrize("a_kind", ["J", "Q"])
def test_patterns_learned_from_the_mesh(pair_of, proton_broker, a_kind):
    """A Junction with no linkRoute of its own routes what A advertises (qdrouterd 1.19 maps
    the link-route addresses its MAUs bring into its own link-route lookup)."""
    p = pair_of(a_kind + "J").start(proton_broker, b_routes=False)
    queue = routed_queue(p.b.url)
    exchange_once(p.b.url, queue, 2, "l")


@pytest.mark.deadline(150)
@pytest.mark.parametrize("kinds", ["JJJ", "JQJ"])
def test_link_route_over_two_hops(pair_of, proton_broker, kinds):
    """A line A - M - B: M (no linkRoute of its own) passes B's attach on toward A, and every
    frame of the link crosses both inter-router connections."""
    p = pair_of(kinds[0] + kinds[2])
    m = Side(p, kinds[1], "LR.M")
    p.a.start(broker_port=proton_broker.port)
    m.start(connect=p.a.ir_port, routes=False, listen=True)
    p.b.start(connect=m.ir_port)
    queue = routed_queue(p.b.url, timeout=60)
    exchange_once(p.b.url, queue, 3, "h")


@pytest.mark.deadline(240)
@pytest.mark.parametrize("kinds", KINDS)
def test_broker_loss_across_the_mesh(pair_of, broker, kinds):
    p = pair_of(kinds).start(broker)
    queue = routed_queue(p.b.url)
    c = Client()
    try:
        conn = c.connect(p.b.url)
        snd, rcv = exchange(conn, queue, 3, "a")
        freeze(broker)
        try:
            dlvs = send_in_flight(c, snd, 5, "b")
            broker.kill()
        finally:
            thaw(broker)
        # the client's links are detached with an error
        assert snd.wait_remote_closed(timeout=60)
        assert rcv.wait_remote_closed(timeout=60)
        detached_with_error(snd, rcv)
        # nothing in flight is reported taken: a Junction client router settles each as
        # RELEASED or MODIFIED (qdrouterd leaves them unsettled at the detach)
        assert not any(d.remote_state == Delivery.ACCEPTED for d in dlvs)
        if p.b.kind == "J":
            assert all(d.settled and d.remote_state in LOST for d in dlvs), \
                [(d.settled, d.remote_state) for d in dlvs]
        # A withdraws the route: attaches through B find no route
        wait_no_route(p.b.url, queue + "x")
        # the broker is back: the route is back, and messages go through again
        broker.start(pump=c.run_for)
        # (a fresh queue: the broker may hold again what it had not settled, at least once)
        wait_routed(p.b.url, queue + "y")
        exchange(c.connect(p.b.url), queue + "y", 2, "c")
    finally:
        c.close()


@pytest.mark.deadline(240)
@pytest.mark.parametrize("a_kind", ["J", "Q"])
def test_mesh_link_loss(pair_of, broker, a_kind):
    """Router A killed: the client's links on the Junction B are detached with an error, what
    was in flight comes back RELEASED or MODIFIED, B answers qd:no-route-to-dest until A is
    back."""
    p = pair_of(a_kind + "J").start(broker)
    queue = routed_queue(p.b.url)
    c = Client()
    try:
        conn = c.connect(p.b.url)
        snd, rcv = exchange(conn, queue, 3, "a")
        freeze(broker)
        try:
            dlvs = send_in_flight(c, snd, 5, "b")
            p.a.kill()
            assert snd.wait_remote_closed(timeout=30)
            assert rcv.wait_remote_closed(timeout=30)
        finally:
            thaw(broker)
        detached_with_error(snd, rcv)
        assert all(d.settled and d.remote_state in LOST for d in dlvs), \
            [(d.settled, d.remote_state) for d in dlvs]
        wait_no_route(p.b.url, queue + "x")
        # A is back on its ports: the mesh forms again and the route with it
        p.a.start(broker_port=broker.port)
        # (a fresh queue: the broker may hold what was in flight as well, at least once)
        wait_routed(p.b.url, queue + "y", timeout=60)
        exchange(c.connect(p.b.url), queue + "y", 2, "c")
    finally:
        c.close()


@pytest.mark.deadline(180)
@pytest.mark.parametrize("kinds", KINDS)
def test_config_2_broker(tmp_path, request, broker, kinds):
    """qpid-dispatch 1.19's tests/config-2-broker/: A.conf (the broker's router, its
    route-container connector to port 11000) and B.conf, ports and hosts rewritten, A's
    broker port made the broker's (RabbitMQ, the Proton broker); a client on B sends to and
    receives from a queue of the broker through both routers by the `queue.` link route."""
    if "Q" in kinds:
        need_peer()
    skip_qdrouterd_rabbitmq(kinds[0], broker.name)
    ports = {"11000": broker.port}
    qds, urls = [], {}
    try:
        for f, kind in zip(("A.conf", "B.conf"), kinds):
            text, client = rewrite((CORPUS / "tests" / "config-2-broker" / f).read_text(), ports)
            urls[f] = "amqp://127.0.0.1:%d" % client
            if kind == "J":
                r = Router(tmp_path, [], name=f[0], env=interior_env())
                r.config_path = tmp_path / f
                request.node.jn_routers = getattr(request.node, "jn_routers", [])
                request.node.jn_routers.append(r)
                r.start(config_text=text)
            else:
                q = QdRouter(tmp_path, "q" + f[0], text, client)
                qds.append(q)
                q.start()
        queue = "queue.%s" % unique_name()
        wait_routed(urls["B.conf"], queue)
        exchange_once(urls["B.conf"], queue, 5, "q")
        # the messages went to RabbitMQ itself: a message sent through the routers is
        # there for a client of the broker
        c = Client()
        try:
            snd = c.connect(urls["B.conf"]).sender(queue)
            assert snd.wait_outcome(snd.send(Message(body="direct"))) == Delivery.ACCEPTED
            got = c.connect(broker.url).receiver(queue, credit=1).get()
            assert got.body == "direct"
            got.accept()
        finally:
            c.close()
    finally:
        problems = []
        for r in getattr(request.node, "jn_routers", []):
            r.stop()
            problems += r.problems()
        request.node.jn_routers = []
        for q in qds:
            q.stop()
        assert not problems, problems
