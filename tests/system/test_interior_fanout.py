"""Multicast across a mesh fans out once per next-hop link (issue 16 point 3), counted on the
inter-router links themselves.

A line A - B - C (B connects to A and C), each position a Junction (J) or the real qdrouterd
1.19 (Q); a multicast address with one consumer on A, one on B and two on C. A presettled
producer on A sends N messages: every consumer gets each once, A's outgoing inter-router
data links carry N deliveries in all (one copy for B and C together, though three of the
consumers are beyond that link), B's carry N (on to C, none back to A: A is in the trace and
no valid origin for A's copies on B's way back), and C's none. The counts are the
`deliveryCount` of each router's `router.link` rows of type inter-router going out (qdstat
-l), read before and after. The cases with a qdrouterd skip where ../shared/peer is absent;
QQQ is the reference."""
import pytest
from proton import Message, Timeout
from proton.reactor import AtMostOnce
from proton.utils import BlockingConnection

from meshnet import Net, need_peer, wait_for
from mgmt_tool import Node

LINK = "org.apache.qpid.dispatch.router.link"
ADDRESS_NODE = "org.apache.qpid.dispatch.router.address"
ADDRESS = "mc.fan"  # meshnet's mc prefix: multicast on every router
N = 10


@pytest.fixture
def net(make_router, tmp_path, request):
    n = Net(make_router, tmp_path, request)
    yield n
    n.close()


def query(url, typ):
    n = Node(url)
    try:
        return n.query_dicts(typ)
    finally:
        n.close()


def sent_to_routers(url):
    """Deliveries the router at `url` has sent on its inter-router data links, all of them."""
    return sum(x["deliveryCount"] for x in query(url, LINK)
               if x["linkType"] == "inter-router" and x["linkDir"] == "out")


def remote_count(url):
    rows = {r["key"]: r for r in query(url, ADDRESS_NODE)}
    r = rows.get("M0" + ADDRESS)
    return r["remoteCount"] if r else 0


@pytest.mark.deadline(120)
@pytest.mark.parametrize("kinds", ["QQQ", "JJJ", "JQJ", "QJQ"])
def test_multicast_once_per_next_hop(net, kinds):
    """kinds: who holds A, B and C."""
    if "Q" in kinds:
        need_peer()
    pos = {rid: net.add(k, rid) for k, rid in zip(kinds, "ABC")}
    a, b, c = pos["A"], pos["B"], pos["C"]
    b.connect_to(a)
    b.connect_to(c)
    for p in (a, c, b):
        p.start()
    net.converged({"A": {"B"}, "B": {"A", "C"}, "C": {"B"}})
    conns = {p.id: BlockingConnection(p.url) for p in (a, b, c)}
    c2 = BlockingConnection(c.url)
    try:
        rcvs = [conns["A"].create_receiver(ADDRESS), conns["B"].create_receiver(ADDRESS),
                conns["C"].create_receiver(ADDRESS), c2.create_receiver(ADDRESS)]
        wait_for("A learns B's and C's consumers", lambda: remote_count(a.url) == 2)
        wait_for("B learns A's and C's consumers", lambda: remote_count(b.url) == 2)
        before = {p.id: sent_to_routers(p.url) for p in (a, b, c)}
        snd = BlockingConnection(a.url)
        try:
            s = snd.create_sender(ADDRESS, options=AtMostOnce())
            for i in range(N):
                s.send(Message(address=ADDRESS, body=i))
        finally:
            snd.close()
        for r in rcvs:
            got = [r.receive(timeout=20).body for _ in range(N)]
            assert sorted(got) == list(range(N)), got
        after = {}

        def counted():
            after.update({p.id: sent_to_routers(p.url) - before[p.id] for p in (a, b, c)})
            return after == {"A": N, "B": N, "C": 0}
        try:
            wait_for("the counts", counted, timeout=5)
        except AssertionError:
            pass  # reported below, with the counts
        assert after == {"A": N, "B": N, "C": 0}, \
            "%s: deliveries sent on each router's inter-router links: %r" % (kinds, after)
        for r in rcvs:  # and no second copy anywhere
            with pytest.raises(Timeout):
                r.receive(timeout=1)
    finally:
        c2.close()
        for x in conns.values():
            x.close()
