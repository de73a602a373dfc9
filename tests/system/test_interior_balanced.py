"""Balanced distribution and anycast credit across a mesh, as qdrouterd 1.19 does them.

A line B - A - C: A connects to B and to C (costs given per test), a producer on A.

* balanced, consumers on B and on C that hold every message unsettled: A sends one message
  at a time (each reaches a consumer before the next leaves), so every choice sees the
  copies before it outstanding.  qdrouterd 1.19's rule (forwarder.c) picks the router with
  the lowest outstanding copies on its next hop's connection plus its cost: equal costs
  split 10 messages 5/5, costs 1 and 3 give B two more (6/4);
* balanced, a consumer on A and one on B (cost 1): a local consumer's value is its own
  outstanding copies and wins ties, so A's takes 6 and B's 4;
* credit: a sender on A to an anycast address gets none while no router has a consumer,
  gets it when a consumer appears on B, keeps it while C still has one after B's left, is
  drained when the last remote consumer goes, gets it again when one appears on C (its
  message then ACCEPTED there), and is drained again when C is killed.

The balanced cases run with A a Junction (B and C Junctions, or qdrouterds: mixed) and with
A a qdrouterd (the reference: the same numbers).  The credit case runs with A a Junction
only: qdrouterd 1.19 drains a sender only when a delivery finds no destination, not when the
last remote consumer goes (Junction's rule is the issue's: credit while some router has a
consumer).  The cases with a qdrouterd skip where ../shared/peer is absent.
"""
import pytest
from proton import Message

from meshnet import Net, need_peer
from mgmt_tool import Node

ADDR_TYPE = "org.apache.qpid.dispatch.router.address"
KINDS = ["JJJ", "JQQ", "QJJ"]


@pytest.fixture
def net(make_router, tmp_path, request):
    n = Net(make_router, tmp_path, request)
    yield n
    n.close()


def line(net, kinds, cost_b, cost_c):
    """B - A - C, A connecting to both; started and converged."""
    if "Q" in kinds:
        need_peer()
    a, b, c = (net.add(k, rid) for k, rid in zip(kinds, "ABC"))
    a.connect_to(b, cost=cost_b)
    a.connect_to(c, cost=cost_c)
    for p in (b, c, a):
        p.start()
    net.converged({"A": {"B", "C"}, "B": {"A"}, "C": {"A"}})
    return a, b, c


def remote_count(url, key):
    n = Node(url)
    try:
        rows = {r["key"]: r for r in n.query_dicts(ADDR_TYPE, ["key", "remoteCount"])}
    finally:
        n.close()
    return rows[key]["remoteCount"] if key in rows else 0


def poll(client, what, fn, timeout=30.0):
    """Wait for fn() while the client's connections keep working."""
    if not client.run_for(timeout, stop=lambda: fn() or (client.run_for(0.2) and False)):
        raise AssertionError("%s: not within %.0fs" % (what, timeout))


def send_one_by_one(client, snd, receivers, n):
    """n messages, each once the one before reached some receiver (none settled)."""
    for i in range(n):
        snd.send(Message(body=i))
        client.wait(lambda: sum(r.count for r in receivers) == i + 1,
                    msg="message %d at a consumer" % i)
    return [r.count for r in receivers]


@pytest.mark.deadline(120)
@pytest.mark.parametrize("kinds", KINDS)
@pytest.mark.parametrize("cost_c,want", [(1, [5, 5]), (3, [6, 4])], ids=["equal", "costlier"])
def test_balanced_across_two_remote_routers(net, client, kinds, cost_c, want):
    a, b, c = line(net, kinds, 1, cost_c)
    rb = client.connect(b.url).receiver("bal.two", credit=50)
    rc = client.connect(c.url).receiver("bal.two", credit=50)
    poll(client, "A knows both consumers", lambda: remote_count(a.url, "M0bal.two") == 2)
    snd = client.connect(a.url).sender("bal.two")
    got = send_one_by_one(client, snd, [rb, rc], 10)
    assert got == want, "B and C got %s, qdrouterd 1.19's rule gives %s" % (got, want)
    for r in (rb, rc):
        for m in r.drain_queue():
            m.accept()


@pytest.mark.deadline(120)
@pytest.mark.parametrize("kinds", KINDS)
def test_balanced_local_and_remote(net, client, kinds):
    a, b, c = line(net, kinds, 1, 1)
    rb = client.connect(b.url).receiver("bal.lr", credit=50)
    poll(client, "A knows B's consumer", lambda: remote_count(a.url, "M0bal.lr") == 1)
    ra = client.connect(a.url).receiver("bal.lr", credit=50)
    snd = client.connect(a.url).sender("bal.lr")
    got = send_one_by_one(client, snd, [ra, rb], 10)
    assert got == [6, 4], "A's and B's consumers got %s, qdrouterd 1.19's rule gives [6, 4]" % (
        got,)
    for r in (ra, rb):
        for m in r.drain_queue():
            m.accept()


@pytest.mark.deadline(120)
@pytest.mark.parametrize("kinds", ["JJJ", "JQQ"])
@pytest.mark.parametrize("address", ["bal.credit", "cl.credit"])
def test_credit_follows_remote_consumers(net, client, kinds, address):
    a, b, c = line(net, kinds, 1, 1)
    key = "M0" + address
    snd = client.connect(a.url).sender(address)
    client.run_for(1.0)
    assert snd.credit == 0, "credit with no consumer anywhere"

    cb = client.connect(b.url)
    rb = cb.receiver(address, credit=5, settle="accept")
    snd.wait_credit(1, timeout=20)
    cc = client.connect(c.url)
    rc = cc.receiver(address, credit=5, settle="accept")
    poll(client, "A knows both consumers", lambda: remote_count(a.url, key) == 2)

    drained = snd.drained_count
    rb.close()
    poll(client, "A knows B's is gone", lambda: remote_count(a.url, key) == 1)
    client.run_for(0.5)
    assert snd.credit > 0 and snd.drained_count == drained, \
        "credit withdrawn while C still has a consumer"

    rc.close()
    client.wait(lambda: snd.credit == 0, timeout=20,
                msg="credit drained when the last remote consumer left (is %d)" % snd.credit)
    assert remote_count(a.url, key) == 0

    rc2 = cc.receiver(address, credit=5, settle="accept")
    snd.wait_credit(1, timeout=20)
    dlv = snd.send(Message(body="after"))
    assert rc2.get(timeout=20).body == "after"
    assert snd.wait_outcome(dlv, timeout=20) is not None

    # the router of the last consumer goes away: its addresses with it, the credit too
    snd.wait_credit(1, timeout=20)
    c.kill()
    client.wait(lambda: snd.credit == 0, timeout=30,
                msg="credit drained when the consumer's router went (is %d)" % snd.credit)
