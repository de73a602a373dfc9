"""A router whose stats registry is full (router `maxStats`): connections, links and addresses
past the limit get no stats of their own, and nothing else changes - the router's totals count
exactly the deliveries that went through, connectionCount/linkCount/addrCount count every
object, the failure is logged once, and routing goes on.

Before the sink rule, a worker counting for a link or connection whose stats object could not
be made wrote through a zero object into the router family's own slots (deliveriesIngress,
addrCount, ...): release builds reported wrong totals, debug builds stopped on an assert.
"""

import re

from proton import Delivery, Message

from test_management import Mgmt, wait_for

REFUSED_LOG = r"has no stats of its own"
REFUSED_AGAIN_LOG = r"more objects got no stats of their own"


def router_totals(m):
    return m.get("router.*")


def pump_until(client, fn, timeout=10.0, msg="condition"):
    """wait_for(), with the client pumped meanwhile (its sends and settlements go out)."""
    def step():
        client.run_for(0.05)
        return fn()
    return wait_for(step, timeout, msg)


def test_full_registry_keeps_router_totals_exact(make_router, tmp_path, client):
    sock = tmp_path / "j.sock"
    r = make_router(router={"workerThreads": 2, "maxStats": 1024},
                    extra=[["management", {"socket": str(sock)}]])
    m = Mgmt(sock)
    # The management agent attaches its links (the mobile and the local `$management`
    # addresses) on its own thread after start: the counts start once they are there.
    wait_for(lambda: len([a for a in m.query("address") if a["key"].endswith("$management")]) == 2,
             msg="the agent's two $management addresses")
    before = router_totals(m)

    # Fill the registry: receivers on fresh addresses (an address object and a link object
    # each) until the router has links without a row of their own (link rows are live stats
    # objects; linkCount counts every link).
    hold = client.connect(r.url)
    rcvs = []
    while True:
        for _ in range(8):
            rcvs.append(hold.receiver("full.%d" % len(rcvs), credit=1))
        total = pump_until(client, lambda: (lambda v: v if v["router.linkCount"] == len(rcvs) else None)(
            router_totals(m)), msg="linkCount == %d" % len(rcvs))["router.linkCount"]
        if len(m.query("link")) < total:
            break
        assert len(rcvs) < 400, "maxStats 1024 should be full long before this"
    # ... and well past it: a new connection, its links and its address have no stats.
    for _ in range(20):
        rcvs.append(hold.receiver("full.%d" % len(rcvs), credit=1))
    conn = client.connect(r.url)
    rcv = conn.receiver("past.limit", settle="accept", credit=50)
    snd = conn.sender("past.limit")
    anon = conn.sender(None)
    drop = conn.sender(None, presettled=True)
    n_links = before["router.linkCount"] + len(rcvs) + 4
    n_addrs = before["router.addrCount"] + len(rcvs) + 1  # + past.limit

    # Traffic only through objects without stats: accepted, presettled-and-dropped, and
    # through the anonymous sender.
    n = 40
    dlvs = [snd.send(Message(body="m%d" % i)) for i in range(n)]
    dlvs += [anon.send(Message(address="past.limit", body="a%d" % i)) for i in range(n)]
    rcv.get_n(2 * n)
    assert snd.wait_outcomes(dlvs[:n]) == [Delivery.ACCEPTED] * n
    assert anon.wait_outcomes(dlvs[n:]) == [Delivery.ACCEPTED] * n
    n_drop = 7
    for i in range(n_drop):
        drop.send(Message(address="nobody.listens", body="d%d" % i))

    want = {
        "router.deliveriesIngress": before["router.deliveriesIngress"] + 2 * n + n_drop,
        "router.deliveriesEgress": before["router.deliveriesEgress"] + 2 * n,
        "router.acceptedDeliveries": before["router.acceptedDeliveries"] + 2 * n,
        "router.presettledDeliveries": before["router.presettledDeliveries"] + n_drop,
        "router.droppedPresettledDeliveries":
            before["router.droppedPresettledDeliveries"] + n_drop,
        "router.connectionCount": before["router.connectionCount"] + 2,
        "router.linkCount": n_links,
        "router.addrCount": n_addrs,
    }

    def settled():
        v = router_totals(m)
        return v if all(v[k] == x for k, x in want.items()) else None

    try:
        got = pump_until(client, settled, timeout=30.0, msg="router totals")
    except AssertionError:
        got = router_totals(m)  # what the router says after waiting: the assertion shows it
    assert {k: got[k] for k in want} == want
    for k in ("router.rejectedDeliveries", "router.releasedDeliveries",
              "router.modifiedDeliveries", "router.deliveriesTransit", "router.linksBlocked",
              "router.deliveriesStuck", "router.deliveriesDelayed1Sec",
              "router.deliveriesDelayed10Sec"):
        assert got[k] == before[k], k
    assert got["router.workerThreads"] == 2

    # Logged once, although dozens of objects were refused (the next one is due a minute on).
    lines = r.stderr_lines()
    refused = [l for l in lines if re.search(REFUSED_LOG, l)]
    assert len(refused) == 1, refused
    assert "stats registry is full" in refused[0] and "maxStats" in refused[0]
    assert not [l for l in lines if re.search(REFUSED_AGAIN_LOG, l)]

    # The objects without stats leave the counts when they go, and routing goes on.
    conn.close()
    hold.close()
    pump_until(client, lambda: (lambda v: v if all(v[k] == before[k] for k in (
        "router.connectionCount", "router.linkCount", "router.addrCount")) else None)(
        router_totals(m)), msg="every count back to where it was")
    conn = client.connect(r.url)
    rcv = conn.receiver("after", settle="accept", credit=5)
    snd = conn.sender("after")
    d = snd.send(Message(body="still routing"))
    assert rcv.get().message.body == "still routing"
    assert snd.wait_outcome(d) == Delivery.ACCEPTED
    # With room again, the new objects have stats of their own.
    assert [l["owningAddr"] for l in m.query("link") if l["linkDir"] == "in"] == ["M0after"]
    m.close()
