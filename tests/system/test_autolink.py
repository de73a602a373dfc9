"""autoLinks and waypoint addresses (qdrouterd 1.19's route_control.c and address phases).

A fake broker (fake_broker.py, a Proton-Python process holding its queues in memory) connects
to the router's route-container listener with container id "broker"; the router attaches the
configured autoLinks on that connection: producers to the waypoint address `queue` land in its
phase 0, which the out autoLink takes to the broker's queue; the in autoLink brings the
queue's messages into phase 1, where consumers receive them.  Outcomes travel end to end, the
autoLinks' operStatus follows the broker's connection (re-attached when it comes back), a
refused attach is a failed autoLink with the broker's error in lastError, and the real qdstat
(../shared/peer) shows them with --autolinks.
"""

import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from proton import Message

from clients import Client
from brokers import wait_autolinks
from conftest import REPO_ROOT, router_entities
from mgmt_tool import Node

BROKER = Path(__file__).resolve().parent / "fake_broker.py"
PEER_BIN = REPO_ROOT.parent / "shared" / "peer" / "bin"

AUTOLINKS = [
    ["address", {"prefix": "queue", "waypoint": True}],
    ["autoLink", {"name": "q-out", "address": "queue", "direction": "out",
                  "containerId": "broker"}],
    ["autoLink", {"name": "q-in", "address": "queue", "direction": "in",
                  "containerId": "broker"}],
]


class FakeBroker:
    """fake_broker.py as a process; its lines are collected by a thread."""

    def __init__(self, url, *args):
        self.proc = subprocess.Popen([sys.executable if "proton" in sys.modules else
                                      "/usr/bin/python3", str(BROKER), url, "--container",
                                      "broker"] + list(args), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.lines = []
        self.q = queue.Queue()
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_line(self, text, timeout=10.0, client=None):
        """Wait for line `text`; with a client, its connections are served meanwhile."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if text in self.lines:
                return
            if client:
                client.run_for(0.02)
            else:
                time.sleep(0.02)
        raise AssertionError("fake broker never said %r; it said %r" % (text, self.lines))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self.t.join(timeout=5)


@pytest.fixture
def brokers():
    made = []

    def make(url, *args):
        b = FakeBroker(url, *args)
        made.append(b)
        return b

    yield make
    for b in made:
        b.stop()


def autolink_router(make_router, extra=AUTOLINKS):
    """A router with a normal listener (first) and a route-container one (second)."""
    return make_router(entities=router_entities(
        listeners=[{"host": "127.0.0.1", "port": "0"},
                   {"host": "127.0.0.1", "port": "0", "role": "route-container",
                    "name": "brokers"}],
        extra=extra))


def states(node):
    """{name: (operStatus, lastError)} of every autoLink."""
    rows = node.query_dicts("autoLink")
    return {r["name"]: (r["operStatus"], r["lastError"]) for r in rows}


def wait_states(node, want, timeout=15.0):
    wait_autolinks(lambda: node.query_dicts("autoLink"), want, timeout, every=0.1)


def round_trip(c, conn, b, addr, body):
    """A message to `addr` on conn (of client c) is accepted, stored by broker b, comes back to
    a receiver, and its accept reaches b; returns the sender and the receiver."""
    snd = conn.sender(addr)
    d = snd.send(Message(body=body))
    assert snd.wait_outcome(d) == d.ACCEPTED
    b.wait_line("stored %s %s" % (addr, body), client=c)
    rcv = conn.receiver(addr, credit=5, settle="accept")
    assert rcv.get(timeout=10).body == body
    b.wait_line("outcome %s accepted" % body, client=c)
    return snd, rcv


@pytest.fixture
def node_of():
    made = []

    def make(router):
        n = Node(router.url)
        made.append(n)
        return n

    yield make
    for n in made:
        n.close()


def test_config_loads_and_autolinks_start_inactive(make_router, node_of):
    r = autolink_router(make_router)
    node = node_of(r)
    rows = {x["name"]: x for x in node.query_dicts("autoLink")}
    assert set(rows) == {"q-out", "q-in"}
    assert rows["q-out"]["direction"] == "out" and rows["q-out"]["phase"] == 0
    assert rows["q-in"]["direction"] == "in" and rows["q-in"]["phase"] == 1
    assert rows["q-in"]["containerId"] == "broker"
    assert all(x["operStatus"] == "inactive" for x in rows.values())
    addr = node.query_dicts("address")
    wp = [a for a in addr if a["prefix"] == "queue"][0]
    assert wp["waypoint"] is True and wp["ingressPhase"] == 0 and wp["egressPhase"] == 1


def test_waypoint_through_the_broker_with_outcomes(make_router, node_of, brokers):
    r = autolink_router(make_router)
    node = node_of(r)
    b = brokers(r.url_of(1), "--preload", "queue:1")
    wait_states(node, {"q-out": "active", "q-in": "active"})

    c = Client()
    try:
        conn = c.connect(r.url)
        snd = conn.sender("queue")
        # producer -> router (phase 0) -> out autoLink -> the broker's queue
        d = snd.send(Message(body="m1"))
        assert snd.wait_outcome(d) == d.ACCEPTED
        b.wait_line("stored queue m1", client=c)
        # the broker's own outcomes come back to the producer
        d = snd.send(Message(body="reject-1"))
        assert snd.wait_outcome(d) == d.REJECTED
        d = snd.send(Message(body="release-1"))
        assert snd.wait_outcome(d) == d.RELEASED
        # the broker's queue -> in autoLink (phase 1) -> consumer
        rcv = conn.receiver("queue", credit=10)
        got = [rcv.get(timeout=10), rcv.get(timeout=10)]
        assert sorted(m.body for m in got) == ["m1", "queue-0"]
        first = [m for m in got if m.body == "queue-0"][0]
        other = [m for m in got if m.body == "m1"][0]
        first.accept()
        other.reject("amqp:precondition-failed", "not wanted")
        b.wait_line("outcome queue-0 accepted", client=c)
        b.wait_line("outcome m1 rejected", client=c)
        # a message the consumer releases goes back to the broker, which sends it again
        d = snd.send(Message(body="m2"))
        assert snd.wait_outcome(d) == d.ACCEPTED
        m = rcv.get(timeout=10)
        assert m.body == "m2"
        m.release()
        b.wait_line("outcome m2 released", client=c)
        m = rcv.get(timeout=10)
        assert m.body == "m2"
        m.accept()
        b.wait_line("outcome m2 accepted", client=c)
    finally:
        c.close()
    # the phases are two addresses: M0queue (producers, out autoLink), M1queue (in, consumers)
    keys = {a["key"] for a in node.query_dicts("router.address")}
    assert {"M0queue", "M1queue"} <= keys, keys


def test_autolinks_follow_the_broker_connection(make_router, node_of, brokers):
    r = autolink_router(make_router)
    node = node_of(r)
    b = brokers(r.url_of(1))
    wait_states(node, {"q-out": "active", "q-in": "active"})
    b.stop()
    wait_states(node, {"q-out": "inactive", "q-in": "inactive"})
    # the broker comes back: both are attached again, and messages flow again
    b = brokers(r.url_of(1))
    wait_states(node, {"q-out": "active", "q-in": "active"})
    c = Client()
    try:
        conn = c.connect(r.url)
        round_trip(c, conn, b, "queue", "again")
    finally:
        c.close()


def test_broker_lost_with_deliveries_in_flight(make_router, node_of, brokers):
    # the broker holds two messages unsettled and goes away: their producer gets them back
    # (RELEASED or MODIFIED, never ACCEPTED), and one sent again once it returns is stored
    r = autolink_router(make_router)
    node = node_of(r)
    b = brokers(r.url_of(1))
    wait_states(node, {"q-out": "active", "q-in": "active"})
    c = Client()
    try:
        conn = c.connect(r.url)
        snd = conn.sender("queue")
        held = [snd.send(Message(body="hold-%d" % i)) for i in range(2)]
        b.wait_line("held hold-1", client=c)
        b.stop()
        for d in held:
            assert snd.wait_outcome(d) in (d.RELEASED, d.MODIFIED)
        b = brokers(r.url_of(1))
        wait_states(node, {"q-out": "active", "q-in": "active"})
        snd.send(Message(body="hold-0 again"))
        c.wait(lambda: "held hold-0 again" in b.lines, 10, "the message sent again")
    finally:
        c.close()


def test_refused_attach_is_failed_with_last_error(make_router, node_of, brokers):
    r = autolink_router(make_router)
    node = node_of(r)
    b = brokers(r.url_of(1), "--refuse", "amqp:not-found")
    b.wait_line("refused queue")
    wait_states(node, {"q-out": "failed", "q-in": "failed"})
    for name, (status, err) in states(node).items():
        assert err == "queue queue refused", (name, err)  # the description, as qdrouterd
    # producers get no credit while nothing takes phase 0; the sender is not lost
    c = Client()
    try:
        conn = c.connect(r.url)
        snd = conn.sender("queue", wait=True)
        c.run_for(0.3)
        assert snd.pn.credit == 0
    finally:
        c.close()
    # it is retried (qdrouterd: 2 s after the failure, then every 5 s)
    n = b.lines.count("refused queue")
    b.wait_line("refused queue", timeout=1)
    end = time.monotonic() + 10
    while b.lines.count("refused queue") <= n and time.monotonic() < end:
        time.sleep(0.1)
    assert b.lines.count("refused queue") > n, b.lines


def test_only_route_container_connections_get_autolinks(make_router, node_of, brokers):
    r = autolink_router(make_router)
    node = node_of(r)
    b = brokers(r.url_of(0))  # container id "broker", but on the normal listener
    b.wait_line("open")
    time.sleep(0.5)
    assert {k: v[0] for k, v in states(node).items()} == {"q-out": "inactive",
                                                         "q-in": "inactive"}
    assert not [x for x in b.lines if x.startswith("attached")], b.lines


def test_connection_names_the_listener(make_router, node_of, brokers):
    extra = [["address", {"prefix": "queue", "waypoint": True}],
             ["autoLink", {"name": "by-conn", "addr": "queue", "dir": "out",
                           "connection": "brokers", "externalAddress": "ext.queue"}]]
    r = autolink_router(make_router, extra=extra)
    node = node_of(r)
    b = brokers(r.url_of(1))
    wait_states(node, {"by-conn": "active"})
    b.wait_line("attached out ext.queue")
    c = Client()
    try:
        conn = c.connect(r.url)
        snd = conn.sender("queue")
        d = snd.send(Message(body="ext"))
        assert snd.wait_outcome(d) == d.ACCEPTED
        b.wait_line("stored ext.queue ext", client=c)
    finally:
        c.close()


def test_one_connection_serves_autolinks_and_link_routes(make_router, node_of, brokers):
    # the connection is announced to the core once; autoLinks and link routes both see it
    extra = AUTOLINKS + [
        ["linkRoute", {"name": "lr-id", "prefix": "lr", "direction": "in",
                       "containerId": "broker"}],
        ["linkRoute", {"name": "lr-conn", "prefix": "lr", "direction": "out",
                       "connection": "brokers"}]]
    r = autolink_router(make_router, extra=extra)
    node = node_of(r)

    def routes():
        return {x["name"]: x["operStatus"] for x in node.query_dicts("linkRoute")}

    assert routes() == {"lr-id": "inactive", "lr-conn": "inactive"}
    b = brokers(r.url_of(1))
    wait_states(node, {"q-out": "active", "q-in": "active"})
    r.wait_log(r"Link routes activated: 2 \(container broker\)")
    assert routes() == {"lr-id": "active", "lr-conn": "active"}
    b.stop()
    wait_states(node, {"q-out": "inactive", "q-in": "inactive"})
    r.wait_log(r"Link routes deactivated: 2")
    assert routes() == {"lr-id": "inactive", "lr-conn": "inactive"}


def test_qdstat_autolinks(make_router, brokers, node_of):
    exe = PEER_BIN / "qdstat"
    if not exe.exists():
        pytest.skip("the reference qdstat is not in ../shared/peer (%s)" % exe)
    r = autolink_router(make_router)
    node = node_of(r)
    b = brokers(r.url_of(1))
    wait_states(node, {"q-out": "active", "q-in": "active"})
    h, p = r.addresses[0]
    out = subprocess.run([str(exe), "-b", "%s:%d" % (h, p), "--autolinks"],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()]
    print(out.stdout)
    assert ["queue", "out", "0"] in [x[:3] for x in rows], out.stdout
    assert ["queue", "in", "1"] in [x[:3] for x in rows], out.stdout
    assert sum(1 for x in rows if "active" in x) == 2, out.stdout
    b.stop()
    wait_states(node, {"q-out": "inactive", "q-in": "inactive"})
    b = brokers(r.url_of(1), "--refuse", "amqp:not-found")
    wait_states(node, {"q-out": "failed", "q-in": "failed"})
    out = subprocess.run([str(exe), "-b", "%s:%d" % (h, p), "--autolinks"],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    print(out.stdout)
    assert out.stdout.count("failed") == 2, out.stdout
    assert out.stdout.count("queue queue refused") == 2, out.stdout


def test_create_and_delete_at_run_time(make_router, node_of, brokers):
    # nothing configured but the listeners: the address and both autoLinks come by management
    r = autolink_router(make_router, extra=[])
    node = node_of(r)
    b = brokers(r.url_of(1))
    b.wait_line("open")
    node.create({"prefix": "rq", "waypoint": True}, "address", name="rq")
    qdmanage = PEER_BIN / "qdmanage"
    if qdmanage.exists():  # the real tool, as an operator would
        h, p = r.addresses[0]
        out = subprocess.run([str(qdmanage), "-b", "%s:%d" % (h, p), "create", "--type",
                              "autoLink", "--name", "rq-out", "address=rq", "direction=out",
                              "containerId=broker"], stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        assert '"operStatus": "' in out.stdout, out.stdout
    else:
        node.create({"address": "rq", "direction": "out", "containerId": "broker"}, "autoLink",
                    name="rq-out")
    row = node.create({"address": "rq", "direction": "in", "connection": "brokers"},
                      "autoLink", name="rq-in")
    assert row["phase"] == 1 and row["connection"] == "brokers", row
    wait_states(node, {"rq-out": "active", "rq-in": "active"})
    b.wait_line("attached out rq")
    b.wait_line("attached in rq")
    c = Client()
    try:
        conn = c.connect(r.url)
        snd, _ = round_trip(c, conn, b, "rq", "made")
        # a second autoLink of the same name is refused
        try:
            node.create({"address": "rq", "direction": "out", "containerId": "broker"},
                        "autoLink", name="rq-out")
            raise AssertionError("a duplicate name was accepted")
        except Exception as e:
            assert "duplicate name" in str(e), e
        # DELETE: the link is detached at the broker and the row is gone
        node.delete("autoLink", name="rq-out")
        b.wait_line("detached rq", client=c)
        assert set(states(node)) == {"rq-in"}
        node.delete("autoLink", identity=str(node.query_dicts("autoLink")[0]["identity"]))
        end = time.monotonic() + 10
        while b.lines.count("detached rq") < 2 and time.monotonic() < end:
            c.run_for(0.05)
        assert b.lines.count("detached rq") == 2, b.lines
        assert states(node) == {}
        # with nothing taking phase 0 any more, the producer's credit is drained
        c.wait(lambda: snd.pn.credit == 0, 10, "the producer's credit drained")
    finally:
        c.close()


def test_a_second_connection_takes_over(make_router, node_of, brokers):
    # two connections of container "broker": the autoLinks attach on the first, and move to
    # the second when the first goes
    r = autolink_router(make_router)
    node = node_of(r)
    b1 = brokers(r.url_of(1))
    wait_states(node, {"q-out": "active", "q-in": "active"})
    b2 = brokers(r.url_of(1))
    b2.wait_line("open")
    time.sleep(0.3)
    assert not [x for x in b2.lines if x.startswith("attached")], b2.lines
    row = node.read("autoLink", name="q-out")
    assert row["operStatus"] == "active" and row["linkRef"], row
    b1.stop()
    b2.wait_line("attached out queue")
    b2.wait_line("attached in queue")
    wait_states(node, {"q-out": "active", "q-in": "active"})
    assert node.read("autoLink", name="q-out")["linkRef"] != row["linkRef"]
