"""The time-based figures qdstat reads, with qdrouterd's meaning: a link's settleRate
(settlements per second over the last 5 s), deliveriesDelayed1Sec / 10Sec (settled more than
1 s / 10 s after arriving), deliveriesStuck (still unsettled after 10 s, found by a periodic
sweep), zeroCreditSeconds, and the router's linksBlocked (links whose credit has been zero for
more than 10 s) - on router.link rows, on the router entity, through qdstat's requests.
"""

import http.client
import re
import time

import pytest
from proton import Message

import mgmt_tool
from mgmt_tool import LINK_ATTRS, Node


@pytest.fixture
def node(router):
    n = Node(router.url)
    yield n
    n.close()


def links_of(node, conn):
    """{linkDir: row} of the router.link rows of one client connection (qdstat -l's query)."""
    cid = [c for c in node.query_dicts("connection")
           if c["container"] == conn.pn.container][0]["identity"]
    names, rows = node.query("router.link", LINK_ATTRS, offset=0, count=500)
    return [dict(zip(names, r)) for r in rows if r[names.index("connectionId")] == cid]


def link_named(node, conn, name):
    rows = [k for k in links_of(node, conn) if k["linkName"] == name]
    assert len(rows) == 1, rows
    return rows[0]


def router_row(node):
    return node.query_dicts("router")[0]


def metrics(r):
    """/metrics of router r's http listener (its second listener), as {name: value}."""
    c = http.client.HTTPConnection("127.0.0.1", r.addresses[1][1], timeout=10)
    try:
        c.request("GET", "/metrics")
        resp = c.getresponse()
        body = resp.read().decode()
        assert resp.status == 200, body[:200]
    finally:
        c.close()
    return {ln.rsplit(" ", 1)[0]: float(ln.rsplit(" ", 1)[1])
            for ln in body.splitlines() if ln and not ln.startswith("#")}


def wait_for(client, what, fn, timeout):
    """Poll fn() until it returns something true, pumping the client's connections (so they
    stay alive) in between; fail with `what` after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        assert time.monotonic() < deadline, "timed out waiting for " + what
        client.run_for(0.2)


def test_delivery_settled_after_one_second_is_delayed(node, router, client):
    conn = client.connect(router.url)
    rcv = conn.receiver("closest.late", credit=5)
    snd = conn.sender("closest.late")
    # one delivery the receiver holds 1.5 s before accepting it, one it accepts at once
    late = snd.send(Message(body="late"))
    got = rcv.get()
    client.run_for(1.5)
    got.accept()
    assert snd.wait_outcome(late) == late.ACCEPTED
    quick = snd.send(Message(body="quick"))
    rcv.get().accept()
    assert snd.wait_outcome(quick) == quick.ACCEPTED

    by_dir = {k["linkDir"]: k for k in links_of(node, conn)}
    for d in ("in", "out"):
        assert by_dir[d]["acceptedCount"] == 2
        assert by_dir[d]["deliveriesDelayed1Sec"] == 1, by_dir[d]
        assert by_dir[d]["deliveriesDelayed10Sec"] == 0
        assert by_dir[d]["deliveriesStuck"] == 0
    r = router_row(node)
    # router totals count the senders' side only (as qdrouterd)
    assert r["deliveriesDelayed1Sec"] == 1 and r["deliveriesDelayed10Sec"] == 0
    assert r["deliveriesStuck"] == 0 and r["linksBlocked"] == 0


def test_settle_rate_under_steady_traffic(node, router, client):
    conn = client.connect(router.url)
    rcv = conn.receiver("closest.rate", credit=50, settle="accept")
    snd = conn.sender("closest.rate")
    n = 0
    end = time.monotonic() + 2.5
    while time.monotonic() < end:  # steady traffic for a few seconds
        dlv = snd.send(Message(body="r%d" % n))
        assert snd.wait_outcome(dlv) == dlv.ACCEPTED
        n += 1
    assert n > 0
    # the window is 5 s wide and moves once a second
    rates = wait_for(client, "settleRate > 0 on both links",
                     lambda: (lambda ks: ks if all(k["settleRate"] > 0 for k in ks) else None)(
                         links_of(node, conn)), timeout=5)
    assert len(rates) == 2
    for k in rates:
        assert isinstance(k["settleRate"], int)
        # at most every settlement so far over the 5 s window, at least one
        assert 1 <= k["settleRate"] <= n, (k["settleRate"], n)
    assert rcv and snd


def test_settle_rate_counts_presettled(node, router, client):
    conn = client.connect(router.url)
    rcv = conn.receiver("closest.rate.ps", credit=100)
    snd = conn.sender("closest.rate.ps", presettled=True)
    for i in range(20):
        snd.send(Message(body="p%d" % i))
    for _ in range(20):
        rcv.get()
    ks = wait_for(client, "settleRate > 0 on both links",
                  lambda: (lambda ks: ks if all(k["settleRate"] > 0 for k in ks) else None)(
                      links_of(node, conn)), timeout=5)
    for k in ks:
        assert k["presettledCount"] == 20 and k["settleRate"] == 20 // 5


@pytest.mark.deadline(90)
def test_zero_credit_blocked_and_stuck(make_router, client):
    router = make_router(listeners=[{"host": "127.0.0.1", "port": "0"},
                                    {"host": "127.0.0.1", "port": "0", "http": True}])
    node = Node(router.url)
    conn = client.connect(router.url)
    # a sender to an address nobody consumes: the router gives it no credit
    blocked = conn.sender("closest.nobody")
    # a receiver that holds its one delivery unsettled
    rcv = conn.receiver("closest.stuck", credit=5)  # credit left: not blocked
    snd = conn.sender("closest.stuck")
    held = snd.send(Message(body="held"))
    got = rcv.get()
    start = time.monotonic()

    k = wait_for(client, "zeroCreditSeconds >= 2",
                 lambda: (lambda k: k if k["zeroCreditSeconds"] >= 2 else None)(
                     link_named(node, conn, blocked.link.name)), timeout=10)
    assert k["creditAvailable"] == 0 and k["linkDir"] == "in"
    assert router_row(node)["linksBlocked"] == 0  # not for 10 s yet
    later = wait_for(client, "zeroCreditSeconds grows",
                     lambda: (lambda k2: k2 if k2["zeroCreditSeconds"] > k["zeroCreditSeconds"]
                              else None)(link_named(node, conn, blocked.link.name)), timeout=5)
    assert later["zeroCreditSeconds"] > k["zeroCreditSeconds"]

    # after qdrouterd's 10 s: one link blocked, and the held delivery stuck on both its links
    r = wait_for(client, "linksBlocked == 1 and deliveriesStuck == 2",
                 lambda: (lambda r: r if r["linksBlocked"] == 1 and r["deliveriesStuck"] == 2
                          else None)(router_row(node)), timeout=25)
    assert time.monotonic() - start > 10
    assert r["linksBlocked"] == 1
    stuck = {k["linkDir"]: k for k in links_of(node, conn) if k["owningAddr"] == "M0closest.stuck"}
    assert stuck["in"]["deliveriesStuck"] == 1 and stuck["out"]["deliveriesStuck"] == 1
    assert stuck["out"]["unsettledCount"] == 1
    assert link_named(node, conn, blocked.link.name)["zeroCreditSeconds"] >= 10
    general = mgmt_tool.view_general(node)  # what qdstat -g prints
    assert re.search(r"Links Blocked\s+1\b", general), general
    assert re.search(r"Deliveries Stuck > 10sec\s+2\b", general), general
    print(general)
    m = metrics(router)
    assert m["qdr_links_blocked_total"] == 1 and m["qdr_deliveries_stuck_total"] == 2
    print(mgmt_tool.view_links(node))
    router.wait_log(r"Link blocked with zero credit for \d+ seconds")
    router.wait_log(r"Stuck delivery")

    # settled at last: more than 10 s late; a swept delivery stays counted as stuck once
    got.accept()
    assert snd.wait_outcome(held) == held.ACCEPTED
    stuck = {k["linkDir"]: k for k in links_of(node, conn) if k["owningAddr"] == "M0closest.stuck"}
    for d in ("in", "out"):
        assert stuck[d]["deliveriesDelayed10Sec"] == 1 and stuck[d]["deliveriesDelayed1Sec"] == 0
        assert stuck[d]["deliveriesStuck"] == 1
    r = router_row(node)
    assert r["deliveriesDelayed10Sec"] == 1 and r["deliveriesStuck"] == 2
    m = metrics(router)
    assert m["qdr_deliveries_delayed_10sec_total"] == 1
    assert m["qdr_deliveries_delayed_1sec_total"] == 0

    # a consumer arrives: the blocked sender gets credit, and is blocked no more
    conn.receiver("closest.nobody", credit=5)
    wait_for(client, "linksBlocked back to 0",
             lambda: router_row(node)["linksBlocked"] == 0, timeout=10)
    k = link_named(node, conn, blocked.link.name)
    assert k["creditAvailable"] > 0 and k["zeroCreditSeconds"] == 0
    assert metrics(router)["qdr_links_blocked_total"] == 0
    node.close()

