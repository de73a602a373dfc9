"""Brokers configured at run time, and the parts of issue 15 the other broker tests configure
only one way, against the real brokers (brokers.py: RabbitMQ and the Proton C example broker).

* A router that starts with nothing but a listener is given, through qdmanage (qdrouterd
  1.19's, from ../shared/peer, as an operator would use it; the same requests from
  mgmt_tool.Node without it), a listener, a route-container connector to the broker, a
  waypoint address, an out and an in autoLink and a linkRoute each way.  Their QUERYs show
  the live state (the connector's connectionStatus, the autoLinks' and linkRoutes'
  operStatus; the real qdstat --autolinks and --linkroutes too), clients use the new listener
  through the waypoint and the link routes, and each DELETE takes effect: the connector's
  connection goes (autoLinks inactive, link-routed attaches refused with qd:no-route-to-dest),
  an attach once routed by a deleted linkRoute is message-routed, the listener stops
  listening.  The autoLinks and linkRoutes name the broker by its container id
  (`containerId`: RabbitMQ's cluster name, the Proton broker's argv[0], docs/brokers.md R17
  and P11), and the linkRoutes rewrite the address toward the broker (`delExternalPrefix`,
  `addExternalPrefix` "/queue/"): a client of the broker finds the messages in the queue
  named that way.
* A waypoint address of more than two phases (ingressPhase 0, egressPhase 2): producers' messages
  go through two queues of the broker in turn (phase 0 out to the first, phase 1 back from it and
  out to the second, phase 2 back to consumers), as qdrouterd 1.19 chains waypoints.
"""

import json
import subprocess
import time

import pytest
from proton import Delivery, Message

from brokers import autolink_states, unique_name, wait_autolinks
from clients import Client
from conftest import can_connect, free_port
from meshnet import PEER_BIN, peer_tool
from mgmt_tool import Node

KINDS = ["proton_broker", "rabbitmq"]


@pytest.fixture(params=KINDS)
def broker(request):
    return request.getfixturevalue(request.param)


def container_of(broker):
    """The container id the broker announces in its open."""
    c = Client()
    try:
        return c.connect(broker.url).pn.remote_container
    finally:
        c.close()


class Manage:
    """CREATE / DELETE / QUERY on router r: the reference qdmanage when it is there, else the
    same requests from mgmt_tool.Node.  Each call opens its own connection (a test blocks for
    seconds between them)."""

    def __init__(self, r):
        self.url = r.url
        self.exe = PEER_BIN / "qdmanage"

    def _tool(self, *args):
        out = subprocess.run([str(self.exe), "-b", self.url.replace("amqp://", "")] +
                             [str(a) for a in args], stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stdout + out.stderr
        return out.stdout

    def _node(self, fn):
        n = Node(self.url)
        try:
            return fn(n)
        finally:
            n.close()

    def create(self, type, name, **attrs):
        if self.exe.exists():
            return json.loads(self._tool("create", "--type", type, "--name", name,
                                         *["%s=%s" % kv for kv in attrs.items()]))
        return self._node(lambda n: n.create(attrs, type, name=name))

    def delete(self, type, name):
        if self.exe.exists():
            self._tool("delete", "--type", type, "--name", name)
        else:
            self._node(lambda n: n.delete(type, name=name))

    def query(self, type):
        if self.exe.exists():
            return json.loads(self._tool("query", "--type", type))
        return self._node(lambda n: n.query_dicts(type))


def wait_rows(fn, want, what, timeout=30.0):
    """Wait until fn() == want; fails with the last value."""
    end = time.monotonic() + timeout
    got = None
    while time.monotonic() < end:
        got = fn()
        if got == want:
            return
        time.sleep(0.2)
    raise AssertionError("%s never became %r; last %r" % (what, want, got))


@pytest.mark.deadline(150)
def test_everything_created_and_deleted_at_run_time(broker, make_router):
    container = container_of(broker)
    q = unique_name("rt")      # the waypoint's address and queue
    lr = unique_name("rtlr")   # the link routes' prefix
    lrq = unique_name("rtq")   # the queue reached through the link routes
    r = make_router()
    m = Manage(r)
    assert m.query("connector") == [] and m.query("autoLink") == []
    assert m.query("linkRoute") == []

    port = free_port()
    row = m.create("listener", "late", host="127.0.0.1", port=port)
    assert row["port"] == str(port)
    r.wait_log(r"Listening on 127\.0\.0\.1:%d" % port)
    row = m.create("connector", "broker", host="127.0.0.1", port=broker.port,
                   role="route-container")
    assert row["role"] == "route-container"
    m.create("address", q, prefix=q, waypoint="true")
    for name, d in (("out", "out"), ("in", "in")):
        m.create("autoLink", name, address=q, direction=d, containerId=container,
                 externalAddress="/queue/" + q)
    for name, d in (("lrIn", "in"), ("lrOut", "out")):
        m.create("linkRoute", name, prefix=lr, direction=d, containerId=container,
                 delExternalPrefix=lr + ".", addExternalPrefix="/queue/")

    # QUERY: live status of each
    wait_rows(lambda: [(x["name"], x["connectionStatus"]) for x in m.query("connector")],
              [("broker", "SUCCESS")], "the connector's status")
    wait_autolinks(lambda: m.query("autoLink"), {"out": "active", "in": "active"}, 30)
    wait_rows(lambda: {x["name"]: x["operStatus"] for x in m.query("linkRoute")},
              {"lrIn": "active", "lrOut": "active"}, "the linkRoutes' operStatus")
    rows = {x["name"]: x for x in m.query("linkRoute")}
    assert rows["lrIn"]["containerId"] == container
    assert rows["lrIn"]["addExternalPrefix"] == "/queue/"
    assert rows["lrIn"]["delExternalPrefix"] == lr + "."
    out = [x for x in m.query("connection") if x.get("dir") == "out"]
    assert [x["container"] for x in out] == [container], out
    assert out[0]["role"] == "route-container"
    if (PEER_BIN / "qdstat").exists():
        # the real qdstat's views of them
        text = peer_tool("qdstat", r.url, "--autolinks")
        rows = [x.split() for x in text.splitlines()]
        assert [q, "out", "0"] in [x[:3] for x in rows], text
        assert [q, "in", "1"] in [x[:3] for x in rows], text
        assert sum(1 for x in rows if x[:1] == [q] and "active" in x) == 2, text
        text = peer_tool("qdstat", r.url, "--linkroutes")
        rows = [x.split() for x in text.splitlines() if x.split()[:1] == [lr]]
        assert len(rows) == 2 and all("active" in x for x in rows), text

    url = "amqp://127.0.0.1:%d" % port
    c = Client()
    try:
        conn = c.connect(url)
        # the waypoint, through the created listener
        snd = conn.sender(q)
        dlvs = [snd.send(Message(body="w%d" % i)) for i in range(3)]
        assert snd.wait_outcomes(dlvs) == [Delivery.ACCEPTED] * 3
        rcv = conn.receiver(q, credit=5)
        got = rcv.get_n(3)
        assert sorted(x.body for x in got) == ["w0", "w1", "w2"]
        for x in got:
            x.accept()
        rcv.close()
        # the link routes: the client's address lr.NAME is the broker's /queue/NAME
        lsnd = conn.sender("%s.%s" % (lr, lrq))
        dlvs = [lsnd.send(Message(body="l%d" % i)) for i in range(2)]
        assert lsnd.wait_outcomes(dlvs) == [Delivery.ACCEPTED] * 2
        direct = c.connect(broker.url)
        # one credit, no more (a window would take l1 too); RabbitMQ answers a detach without
        # closed=true (R4): not waited for
        drcv = direct.receiver("/queue/" + lrq, credit=1, auto_credit=False)
        first = drcv.get()
        assert first.body == "l0"
        first.accept()
        c.run_for(0.2)
        drcv.close(wait=False)
        lrcv = conn.receiver("%s.%s" % (lr, lrq), credit=5)
        second = lrcv.get()
        assert second.body == "l1"
        second.accept()
        dsnd = direct.sender("/queue/" + lrq)
        assert dsnd.wait_outcome(dsnd.send(Message(body="from-direct"))) == Delivery.ACCEPTED
        third = lrcv.get()
        assert third.body == "from-direct"
        third.accept()
        c.run_for(0.3)
        lrcv.close()
        lsnd.close()

        # DELETE the connector: its connection goes, the autoLinks are inactive, a link-routed
        # attach finds no route container
        m.delete("connector", "broker")
        assert m.query("connector") == []
        wait_autolinks(lambda: m.query("autoLink"), {"out": "inactive", "in": "inactive"}, 20)
        wait_rows(lambda: [x for x in m.query("connection") if x.get("dir") == "out"], [],
                  "the connector's connection closed")
        wait_rows(lambda: {x["name"]: x["operStatus"] for x in m.query("linkRoute")},
                  {"lrIn": "inactive", "lrOut": "inactive"}, "the linkRoutes' operStatus")
        lost = conn.sender("%s.%s" % (lr, unique_name()))
        assert lost.wait_remote_closed(timeout=10)
        assert lost.remote_condition.name == "qd:no-route-to-dest"

        # DELETE the link routes: the prefix is message-routed again (no consumer: no credit,
        # not refused)
        m.delete("linkRoute", "lrIn")
        m.delete("linkRoute", "lrOut")
        assert m.query("linkRoute") == []
        plain = conn.sender("%s.%s" % (lr, unique_name()))
        c.run_for(0.5)
        assert not plain.is_remote_closed() and plain.credit == 0

        # DELETE the autoLinks and the address, then the listener
        m.delete("autoLink", "out")
        m.delete("autoLink", "in")
        assert autolink_states(m.query("autoLink")) == {}
        m.delete("address", q)
        assert [x for x in m.query("address") if x["name"] == q] == []
        m.delete("listener", "late")
        wait_rows(lambda: can_connect(port), False, "the deleted listener closed")
        assert [x["name"] for x in m.query("listener") if x["name"] == "late"] == []
    finally:
        c.close()


@pytest.mark.deadline(120)
def test_waypoint_of_three_phases_through_two_queues(broker, make_router):
    container = container_of(broker)
    q = unique_name("ph")
    first, second = "/queue/%s-a" % q, "/queue/%s-b" % q
    r = make_router(extra=[
        ["connector", {"name": "broker", "host": "127.0.0.1", "port": str(broker.port),
                       "role": "route-container"}],
        ["address", {"prefix": q, "ingressPhase": 0, "egressPhase": 2}],
        ["autoLink", {"name": "out0", "address": q, "direction": "out", "phase": 0,
                      "containerId": container, "externalAddress": first}],
        ["autoLink", {"name": "in1", "address": q, "direction": "in", "phase": 1,
                      "containerId": container, "externalAddress": first}],
        ["autoLink", {"name": "out1", "address": q, "direction": "out", "phase": 1,
                      "containerId": container, "externalAddress": second}],
        ["autoLink", {"name": "in2", "address": q, "direction": "in", "phase": 2,
                      "containerId": container, "externalAddress": second}],
    ])
    m = Manage(r)
    wait_autolinks(lambda: m.query("autoLink"),
                   {"out0": "active", "in1": "active", "out1": "active", "in2": "active"}, 30)
    assert {x["name"]: x["phase"] for x in m.query("autoLink")} == \
        {"out0": 0, "in1": 1, "out1": 1, "in2": 2}
    c = Client()
    try:
        conn = c.connect(r.url)
        snd = conn.sender(q)
        bodies = ["p%d" % i for i in range(5)]
        dlvs = [snd.send(Message(body=b)) for b in bodies]
        assert snd.wait_outcomes(dlvs) == [Delivery.ACCEPTED] * 5
        rcv = conn.receiver(q, credit=10)
        got = rcv.get_n(5, timeout=20)
        assert sorted(x.body for x in got) == bodies
        for x in got:
            x.accept()
        c.run_for(0.5)
        # the router's address table has the three phases of the address, and phase 1 took
        # each message from the first queue and gave it to the second
        rows = {x["key"]: x for x in m.query("router.address") if x["key"].endswith(q)}
        assert {"M0" + q, "M1" + q, "M2" + q} <= set(rows), sorted(rows)
        # each phase took the five messages in and gave them out once
        for k in ("M0", "M1", "M2"):
            row = rows[k + q]
            assert (row["deliveriesIngress"], row["deliveriesEgress"]) == (5, 5), (k, row)
    finally:
        c.close()
