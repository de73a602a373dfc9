"""Interior mode's management as qdrouterd 1.19's: what qdstat and qdmanage show of a mesh.

Junction routers joined to each other and to the real
qdrouterd 1.19 of ../shared/peer:

* `router.connection` (qdstat -c): the inter-router connection has role inter-router and the
  other router's id as its container;
* `router.link` (qdstat -l): the connection's two control links (type router-control,
  priority 9) and its data links (type inter-router, one each way per priority 0..9), the
  same rows qdrouterd shows for the same connection;
* `router.address` (qdstat -a): an address with a consumer on another router counts that
  router in `remoteCount` (qdstat's `remote` column), and stops counting it when it goes;
* GET-MGMT-NODES names the management node of every router of the network, as qdrouterd's
  does, and a request sent to `_topo/0/<id>/$management` of another router (qdstat -r,
  qdmanage -r) crosses the mesh and is answered by that router: Junction to qdrouterd,
  qdrouterd to Junction, and Junction to Junction through a third router; a request for a
  router not in the network waits for credit that never comes.

The tests with qdrouterd, and those that run the real qdstat/qdmanage, skip where
../shared/peer is absent.
"""
import pytest
from proton import Timeout
from proton.utils import BlockingConnection

from meshnet import need_peer, peer_tool
from mgmt_tool import Node
from test_interior import inter_port, junction, mixed_pair, neighbour_of, qdstat, wait_for

PREFIX = "org.apache.qpid.dispatch"
CONN = PREFIX + ".connection"
LINK = PREFIX + ".router.link"
ADDR = PREFIX + ".router.address"
ROUTER = PREFIX + ".router"


def query(url, type, router=None):
    n = Node(url, router=router)
    try:
        return n.query_dicts(type)
    finally:
        n.close()


def mgmt_nodes(url):
    n = Node(url)
    try:
        return sorted(n.get("GET-MGMT-NODES"))
    finally:
        n.close()


def MGMT_NODES(*ids):
    """GET-MGMT-NODES as qdrouterd 1.19 answers it: every router of the network, itself
    included (sorted here)."""
    return sorted("amqp:/_topo/0/%s/$management" % i for i in ids)


def qdmanage(url, *args):
    return peer_tool("qdmanage", url, *args)


def ir_conns(url):
    return [c for c in query(url, CONN) if c["role"] == "inter-router"]


def ir_links(url):
    """The inter-router links' shapes: control links and data links as (dir, priority), the
    owning addresses they show, and the connections they belong to."""
    rows = query(url, LINK)
    ctl = sorted((x["linkDir"], x["priority"]) for x in rows if x["linkType"] == "router-control")
    data = sorted((x["linkDir"], x["priority"]) for x in rows
                  if x["linkType"] == "inter-router")
    owning = sorted({str(x["owningAddr"]) for x in rows
                     if x["linkType"] in ("router-control", "inter-router")})
    conns = {x["connectionId"] for x in rows if x["linkType"] in ("router-control",
                                                                  "inter-router")}
    return ctl, data, owning, conns


ALL_DATA = sorted((d, p) for d in ("in", "out") for p in range(10))


def joined(make_router):
    a = junction(make_router, "A", inter_listen=True)
    b = junction(make_router, "B", inter_listen=True, connect=[inter_port(a)])
    wait_for("A sees B", lambda: neighbour_of(a.url, "A", "B"))
    wait_for("B sees A", lambda: neighbour_of(b.url, "B", "A"))
    return a, b


def remote_count(url, key):
    rows = {r["key"]: r for r in query(url, ADDR)}
    r = rows.get(key)
    return (r["remoteCount"], r["subscriberCount"]) if r else None


# ---------------------------------------------------------------- connections and links


@pytest.mark.parametrize("junction_connects", [True, False],
                         ids=["junction-connector", "qdrouterd-connector"])
def test_connections_and_links_as_qdrouterd(make_router, tmp_path, junction_connects):
    need_peer()
    j, q = mixed_pair(make_router, tmp_path, junction_connects)
    try:
        # qdstat -c: one inter-router connection on each, the other router as container
        cj, cq = ir_conns(j.url), ir_conns(q.url)
        assert [c["container"] for c in cj] == ["Q"], cj
        assert [c["container"] for c in cq] == ["J"], cq
        assert cj[0]["dir"] == ("out" if junction_connects else "in"), cj
        out = qdstat(j.url, "-c")
        line = [x for x in out.splitlines() if "inter-router" in x]
        assert len(line) == 1 and " Q " in line[0], out

        # qdstat -l: the rows qdrouterd shows for the same connection
        ctl, data, owning, conns = wait_for(
            "J's inter-router links", lambda: (lambda s: s if s[1] == ALL_DATA else None)(
                ir_links(j.url)))
        q_ctl, q_data, q_owning, _ = ir_links(q.url)
        assert ctl == [("in", 9), ("out", 9)], ctl
        assert (ctl, data, owning) == (q_ctl, q_data, q_owning), (ctl, data, owning, q_ctl,
                                                                  q_data, q_owning)
        assert conns == {cj[0]["identity"]}, (conns, cj)
        out = qdstat(j.url, "-l")
        rows = out.splitlines()
        assert sum(1 for x in rows if " router-control " in x) == 2, out
        assert sum(1 for x in rows if " inter-router " in x) == 20, out
        # control links carry the routing protocol: their deliveries count
        wait_for("HELLOs counted on J's control links",
                 lambda: all(x["deliveryCount"] > 0 for x in query(j.url, LINK)
                             if x["linkType"] == "router-control"))
    finally:
        q.stop()


def test_connections_and_links_between_junctions(make_router):
    a, b = joined(make_router)
    assert [c["container"] for c in ir_conns(a.url)] == ["B"]
    assert [c["container"] for c in ir_conns(b.url)] == ["A"]
    for url in (a.url, b.url):
        ctl, data, _, _ = wait_for(
            "inter-router links", lambda: (lambda s: s if s[1] == ALL_DATA else None)(
                ir_links(url)))
        assert ctl == [("in", 9), ("out", 9)], ctl
    # client links stay endpoints of the default priority
    c = BlockingConnection(a.url)
    try:
        c.create_receiver("plain.q")
        rows = [x for x in query(a.url, LINK) if x["owningAddr"] == "M0plain.q"]
        assert [(x["linkType"], x["priority"]) for x in rows] == [("endpoint", 4)], rows
    finally:
        c.close()


# ---------------------------------------------------------------- remote counts


def test_remote_count_with_qdrouterd(make_router, tmp_path):
    """A consumer on qdrouterd: Junction's address counts Q (qdstat -a's `remote`); the
    consumer gone, Q stops counting."""
    need_peer()
    j, q = mixed_pair(make_router, tmp_path, True)
    try:
        c = BlockingConnection(q.url)
        try:
            c.create_receiver("on.q")
            wait_for("J counts Q for on.q", lambda: remote_count(j.url, "M0on.q") == (1, 0))
            out = qdstat(j.url, "-a")
            line = [x for x in out.splitlines() if " on.q " in x]
            assert line and line[0].split()[6] == "1", out  # the `remote` column
        finally:
            c.close()
        wait_for("J no longer counts Q", lambda: remote_count(j.url, "M0on.q") in (None, (0, 0)))
    finally:
        q.stop()


def test_remote_count_between_junctions(make_router):
    a, b = joined(make_router)
    cb = BlockingConnection(b.url)
    ca = BlockingConnection(a.url)
    try:
        cb.create_receiver("both.q")
        wait_for("A counts B", lambda: remote_count(a.url, "M0both.q") == (1, 0))
        ca.create_receiver("both.q")
        wait_for("B counts A", lambda: remote_count(b.url, "M0both.q") == (1, 1))
        assert remote_count(a.url, "M0both.q") == (1, 1)
    finally:
        cb.close()
    wait_for("A no longer counts B",
             lambda: remote_count(a.url, "M0both.q") == (0, 1))
    ca.close()


# ---------------------------------------------------------------- management across the mesh


@pytest.mark.parametrize("junction_connects", [True, False],
                         ids=["junction-connector", "qdrouterd-connector"])
def test_mgmt_across_with_qdrouterd(make_router, tmp_path, junction_connects):
    need_peer()
    j, q = mixed_pair(make_router, tmp_path, junction_connects)
    try:
        # GET-MGMT-NODES: what qdrouterd lists, Junction lists for the same network
        assert mgmt_nodes(q.url) == MGMT_NODES("J", "Q")
        assert mgmt_nodes(j.url) == MGMT_NODES("J", "Q")

        # qdstat -r / qdmanage -r: Junction's tools manage qdrouterd through Junction, and
        # qdrouterd's Junction through qdrouterd
        out = qdstat(j.url, "-r", "Q", "-g")
        assert "Q" in [x.split()[-1] for x in out.splitlines() if x.strip().startswith("Router Id")], out
        out = qdstat(q.url, "-r", "J", "-g")
        assert "J" in [x.split()[-1] for x in out.splitlines() if x.strip().startswith("Router Id")], out
        out = qdstat(q.url, "-r", "J", "-c")
        assert [x for x in out.splitlines() if "inter-router" in x and " Q " in x], out
        out = qdmanage(j.url, "-r", "Q", "query", "--type", "router")
        assert '"id": "Q"' in out, out
        out = qdmanage(q.url, "-r", "J", "query", "--type", "router")
        assert '"id": "J"' in out, out
        # the same with this project's client, request by request
        assert [r["id"] for r in query(j.url, ROUTER, router="Q")] == ["Q"]
        assert [r["id"] for r in query(q.url, ROUTER, router="J")] == ["J"]
    finally:
        q.stop()


def test_mgmt_across_junctions(make_router):
    """A line A - B - C of Junctions: A's management requests for C cross B and C answers;
    C's for A the other way; GET-MGMT-NODES names all three."""
    a, b = joined(make_router)
    c = junction(make_router, "C", connect=[inter_port(b)])
    wait_for("A reaches C", lambda: (lambda r: r if "C" in r and r["C"]["cost"] == 2 else None)(
        {x["id"]: x for x in query(a.url, PREFIX + ".router.node")}))
    wait_for("C reaches A", lambda: (lambda r: r if "A" in r and r["A"]["cost"] == 2 else None)(
        {x["id"]: x for x in query(c.url, PREFIX + ".router.node")}))
    assert [r["id"] for r in query(a.url, ROUTER, router="C")] == ["C"]
    assert [r["id"] for r in query(c.url, ROUTER, router="A")] == ["A"]
    assert [r["id"] for r in query(a.url, ROUTER, router="B")] == ["B"]
    assert sorted(x["container"] for x in query(a.url, CONN, router="B")
                  if x["role"] == "inter-router") == ["A", "C"]
    for url, me in ((a.url, "A"), (c.url, "C")):
        assert mgmt_nodes(url) == MGMT_NODES("A", "B", "C")
    # a router that is not in the network: the sender gets no credit, nothing is answered
    n = Node(a.url, router="Z", timeout=3)
    try:
        with pytest.raises(Timeout):
            n.query_dicts(ROUTER)
    finally:
        n.close()
