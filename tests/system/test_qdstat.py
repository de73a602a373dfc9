"""qdstat compatibility: every view of qdstat (-g, -c, -l, -a, -m, -n, --autolinks,
--linkroutes, --log) sent exactly as qdstat sends it (mgmt_tool.Node: BlockingConnection +
SyncRequestResponse, a dynamic reply receiver, `$management`, QUERY pages of count=500), with
the attributes qdstat reads checked for their type and for values that real traffic moved.
"""

import time

import pytest
from proton import Message

import mgmt_tool
from mgmt_tool import ADDR_ATTRS, ALLOC_ATTRS, AUTOLINK_ATTRS, LINK_ATTRS, LINKROUTE_ATTRS, Node

INT = int
STR = str


@pytest.fixture
def node(router):
    n = Node(router.url)
    yield n
    n.close()


def traffic(client, router, address, n):
    """A receiver and a sender on `address`, n messages accepted end to end; returns the
    connection, the sender and the receiver."""
    conn = client.connect(router.url)
    rcv = conn.receiver(address, credit=n + 5, settle="accept")
    snd = conn.sender(address)
    for i in range(n):
        dlv = snd.send(Message(body="m%d" % i))
        assert snd.wait_outcome(dlv) == dlv.ACCEPTED
    for _ in range(n):
        rcv.get()
    return conn, snd, rcv


def check_types(row, spec):
    for k, t in spec.items():
        assert k in row, "attribute %s missing: %r" % (k, row)
        assert isinstance(row[k], t), "%s = %r is not %s" % (k, row[k], t)


def test_header_query_router_id(node, router):
    # every qdstat view starts with QUERY router [id]
    names, rows = node.query("router", ["id"], offset=0, count=500)
    assert names == ["id"] and rows == [["JTest"]]


def test_general_g(node, router, client):
    traffic(client, router, "closest.g", 5)
    node.query("router", ["id"])  # its reply: one presettled delivery through the router
    r = node.query_dicts("router")
    assert len(r) == 1
    r = r[0]
    check_types(r, {"version": STR, "mode": STR, "id": STR, "workerThreads": INT,
                    "uptimeSeconds": INT, "memoryUsage": INT, "area": STR,
                    "linkRouteCount": INT, "autoLinkCount": INT, "linkCount": INT,
                    "nodeCount": INT, "addrCount": INT, "connectionCount": INT,
                    "presettledDeliveries": INT, "droppedPresettledDeliveries": INT,
                    "acceptedDeliveries": INT, "rejectedDeliveries": INT,
                    "releasedDeliveries": INT, "modifiedDeliveries": INT,
                    "deliveriesDelayed1Sec": INT, "deliveriesDelayed10Sec": INT,
                    "deliveriesStuck": INT, "deliveriesRedirectedToFallback": INT,
                    "linksBlocked": INT, "deliveriesIngress": INT, "deliveriesEgress": INT,
                    "deliveriesTransit": INT, "deliveriesIngressRouteContainer": INT,
                    "deliveriesEgressRouteContainer": INT})
    assert r["id"] == "JTest" and r["mode"] == "standalone" and r["version"]
    assert r["name"] == "JTest" and r["identity"] == "1"
    assert r["type"] == "org.apache.qpid.dispatch.router"
    assert r["workerThreads"] >= 1 and r["memoryUsage"] > 0
    assert r["connectionCount"] >= 2  # the traffic client and this management client
    assert r["linkCount"] >= 4 and r["addrCount"] >= 2
    assert r["acceptedDeliveries"] >= 5
    assert r["deliveriesIngress"] >= 5 and r["deliveriesEgress"] >= 5
    # the management replies are presettled deliveries through the router
    assert r["presettledDeliveries"] >= 1
    text = mgmt_tool.view_general(node)
    assert "Router Id" in text and "JTest" in text
    print(text)


def test_uptime_moves(node):
    first = node.query_dicts("router", ["uptimeSeconds"])[0]["uptimeSeconds"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        now = node.query_dicts("router", ["uptimeSeconds"])[0]["uptimeSeconds"]
        if now > first:
            break
        time.sleep(0.2)
    assert now > first


def test_connections_c(node, router, client):
    conn, _, _ = traffic(client, router, "closest.c", 3)
    rows = node.query_dicts("connection")
    mine = [c for c in rows if c["container"] == conn.pn.container]
    assert len(mine) == 1, rows
    c = mine[0]
    check_types(c, {"identity": STR, "host": STR, "container": STR, "role": STR,
                    "protocol": STR, "dir": STR, "isEncrypted": bool, "isAuthenticated": bool,
                    "sasl": STR, "user": STR, "lastDlvSeconds": INT, "uptimeSeconds": INT,
                    "adminStatus": STR, "operStatus": STR, "opened": bool})
    assert c["identity"].isdigit()
    assert c["host"].startswith("127.0.0.1:") and c["host"] != "127.0.0.1:%d" % router.port
    assert c["role"] == "normal" and c["protocol"] == "amqp" and c["dir"] == "in"
    assert c["isEncrypted"] is False and c["tenant"] is None
    assert 0 <= c["lastDlvSeconds"] < 60 and 0 <= c["uptimeSeconds"] < 60
    assert c["adminStatus"] == "enabled" and c["operStatus"] == "up"
    # the management connection itself is there too
    assert len(rows) >= 2
    text = mgmt_tool.view_connections(node)
    assert conn.pn.container in text
    print(text)


def test_links_l(node, router, client):
    conn, snd, rcv = traffic(client, router, "closest.l", 4)
    cid = [c for c in node.query_dicts("connection")
           if c["container"] == conn.pn.container][0]["identity"]
    names, rows = node.query("router.link", LINK_ATTRS, offset=0, count=500)
    assert names == LINK_ATTRS
    links = [dict(zip(names, r)) for r in rows if r[2] == cid]
    assert len(links) == 2, rows
    by_dir = {k["linkDir"]: k for k in links}
    for k in links:
        check_types(k, {"linkType": STR, "linkDir": STR, "connectionId": STR, "identity": STR,
                        "owningAddr": STR, "capacity": INT, "undeliveredCount": INT,
                        "unsettledCount": INT, "deliveryCount": INT, "presettledCount": INT,
                        "droppedPresettledCount": INT, "acceptedCount": INT,
                        "rejectedCount": INT, "releasedCount": INT, "modifiedCount": INT,
                        "deliveriesDelayed1Sec": INT, "deliveriesDelayed10Sec": INT,
                        "deliveriesStuck": INT, "creditAvailable": INT,
                        "zeroCreditSeconds": INT, "adminStatus": STR, "operStatus": STR,
                        "linkName": STR, "priority": INT, "settleRate": INT})
        assert k["linkType"] == "endpoint" and k["identity"].isdigit()
        assert k["owningAddr"] == "M0closest.l"
        assert k["capacity"] == 250 and k["deliveryCount"] == 4
        assert k["adminStatus"] == "enabled" and k["operStatus"] == "up"
    assert by_dir["in"]["linkName"] == snd.link.name
    assert by_dir["out"]["linkName"] == rcv.link.name
    assert by_dir["out"]["acceptedCount"] == 4 and by_dir["in"]["acceptedCount"] == 4
    assert by_dir["in"]["creditAvailable"] > 0
    text = mgmt_tool.view_links(node)
    assert "closest.l" in text
    print(text)


def test_links_paged_like_qdstat(node, router, client):
    conn = client.connect(router.url)
    rcvs = [conn.receiver("closest.page%d" % i, credit=1) for i in range(12)]
    assert rcvs
    _, full = node.query("router.link", ["identity"])
    ids = [r[0] for r in full]
    assert len(ids) >= 14 and len(set(ids)) == len(ids)
    paged, offset = [], 0
    while True:
        _, page = node.query("router.link", ["identity"], offset=offset, count=5)
        paged += [r[0] for r in page]
        if len(page) < 5:
            break
        offset += 5
    assert paged == ids


def test_addresses_a(node, router, client):
    traffic(client, router, "closest.a", 3)
    names, rows = node.query("router.address", ADDR_ATTRS, offset=0, count=500)
    assert names == ADDR_ATTRS
    addrs = {r[names.index("name")]: dict(zip(names, r)) for r in rows}
    a = addrs["M0closest.a"]
    check_types(a, {"distribution": STR, "inProcess": INT, "subscriberCount": INT,
                    "remoteCount": INT, "containerCount": INT, "deliveriesIngress": INT,
                    "deliveriesEgress": INT, "deliveriesRedirectedToFallback": INT,
                    "deliveriesTransit": INT, "deliveriesToContainer": INT,
                    "deliveriesFromContainer": INT, "name": STR, "priority": INT})
    assert a["distribution"] == "closest" and a["subscriberCount"] == 1
    assert a["deliveriesIngress"] == 3 and a["deliveriesEgress"] == 3
    # the management node's addresses, and the reply address of this client (local class)
    assert "M0$management" in addrs
    assert any(k.startswith("Ltemp.") for k in addrs)
    text = mgmt_tool.view_addresses(node)
    assert "closest.a" in text and "mobile" in text
    print(text)


def test_memory_m(node, router, client):
    traffic(client, router, "closest.m", 2)
    vm = node.query_dicts("router", ["memoryUsage"])[0]["memoryUsage"]
    assert isinstance(vm, int) and vm > 0
    # pools publish their figures once a second (none in a -Dpools=false build)
    names, rows = node.query("allocator", ALLOC_ATTRS, offset=0, count=500)
    assert names == ALLOC_ATTRS
    for r in rows:
        a = dict(zip(names, r))
        check_types(a, {"identity": STR, "typeSize": INT, "transferBatchSize": INT,
                        "localFreeListMax": INT, "totalAllocFromHeap": INT,
                        "heldByThreads": INT, "batchesRebalancedToThreads": INT,
                        "batchesRebalancedToGlobal": INT})
        assert a["identity"].startswith("allocator/") and a["typeSize"] > 0
        assert a["localFreeListMax"] == 2 * a["transferBatchSize"]
    text = mgmt_tool.view_memory(node)
    assert "VmSize" in text
    print(text)


def test_nodes_n_empty_standalone(node):
    names, rows = node.query("router.node", None, offset=0, count=500)
    assert {"id", "nextHop", "routerLink", "cost", "validOrigins"} <= set(names)
    assert rows == []
    assert node.get("GET-MGMT-NODES") == []
    print(mgmt_tool.view_nodes(node))


def test_autolinks(node):
    names, rows = node.query("autoLink", AUTOLINK_ATTRS, offset=0, count=500)
    assert names == AUTOLINK_ATTRS and rows == []
    print(mgmt_tool.view_autolinks(node))


def test_linkroutes(node):
    names, rows = node.query("linkRoute", LINKROUTE_ATTRS, offset=0, count=500)
    assert names == LINKROUTE_ATTRS and rows == []
    print(mgmt_tool.view_linkroutes(node))


def test_log(node, router):
    entries = node.get("GET-LOG", limit=1000)
    assert isinstance(entries, list) and entries
    for e in entries:
        assert len(e) == 6
        module, level, text, file, line, ts = e
        assert isinstance(module, str) and isinstance(level, str) and isinstance(text, str)
        assert file is None or isinstance(file, str)
        assert isinstance(line, int) and isinstance(ts, int)
        assert abs(ts - time.time()) < 600
    listening = [e for e in entries if e[2].startswith("Listening on 127.0.0.1:")]
    assert listening and listening[0][0] == "SERVER" and listening[0][1] == "notice"
    assert listening[0][3].endswith("connmgr.c") and listening[0][4] > 0
    assert len(node.get("GET-LOG", limit=3)) == 3
    text = mgmt_tool.view_log(node, 5)
    assert text.count("\n") == 4
    print(text)


def test_topo_address_and_amqp_form(router):
    # qdstat -r <id> sends to _topo/0/<id>/$management; amqp:/ forms route the same way
    for path in (None, "amqp:/_topo/0/JTest/$management", "amqp:/$management"):
        n = Node(router.url, router="JTest") if path is None else Node(router.url + "/" + path)
        try:
            assert n.query_dicts("router", ["id"])[0]["id"] == "JTest"
        finally:
            n.close()
