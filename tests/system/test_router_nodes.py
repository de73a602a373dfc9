"""Addresses that belong to the router itself: the management node (`$management` and its
local forms), dynamic (reply) addresses, and other routers' `_topo` addresses.

Whatever the address configuration says (`defaultDistribution: unavailable`, an `address`
entity whose prefix or pattern matches `$management`), requests to the management node reach
the router's agent; no client may attach a receiver to it (it would be handed other clients'
requests), nor to a dynamic address the router made for another receiver (it would be handed
that receiver's replies).  Senders to them are allowed: that is how requests and replies
travel.  A receiver for another router's `_topo/0/<id>/...` address gets qdrouterd's
`qd:no-route-to-dest`.  The real qdstat and qdmanage from ../shared/peer are run where present.
"""

import subprocess

import pytest
from proton import Message

from conftest import REPO_ROOT, router_entities
from mgmt_tool import Node

PEER_BIN = REPO_ROOT.parent / "shared" / "peer" / "bin"

NODE_FORMS = ["$management", "amqp:/$management", "/$management", "_local/$management",
              "_topo/0/JTest/$management", "_topo/0/all/$management"]

# configurations that, taken literally, would make `$management` unavailable or multicast
HOSTILE = {
    "default-unavailable": dict(router={"defaultDistribution": "unavailable"}, addresses=[]),
    "pattern-all-unavailable": dict(addresses=[
        ["address", {"pattern": "#", "distribution": "unavailable"}]]),
    "prefix-unavailable": dict(addresses=[
        ["address", {"prefix": "$management", "distribution": "unavailable"}]]),
    "prefix-multicast": dict(addresses=[
        ["address", {"prefix": "$management", "distribution": "multicast"}]]),
}


def peer_tool(name):
    exe = PEER_BIN / name
    if not exe.exists():
        pytest.skip("the reference qdrouterd tools are not in ../shared/peer (%s)" % exe)
    return exe


def run_tool(name, *args):
    res = subprocess.run([str(peer_tool(name))] + [str(a) for a in args],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=30)
    assert res.returncode == 0, "%s %s: status %d\n%s%s" % (name, args, res.returncode,
                                                           res.stdout, res.stderr)
    return res.stdout


def key_of(path):
    """The address key a request to `path` is routed by."""
    return "M0$management" if path == "$management" else "L$management"


@pytest.mark.parametrize("config", sorted(HOSTILE))
@pytest.mark.parametrize("path", ["$management", "_topo/0/JTest/$management",
                                  "_local/$management"])
def test_management_answers_whatever_the_address_configuration(make_router, config, path):
    r = make_router(**HOSTILE[config])
    node = Node(r.url + "/" + path, timeout=5)
    try:
        names, rows = node.query("router", ["id"])
        assert rows == [["JTest"]]
        # the node's addresses are closest (never unavailable or multicast) and consumed in
        # process, as qdrouterd 1.19 shows them: inProcess 1, no subscriber, the requests
        # counted as deliveriesToContainer
        rows = node.query_dicts("router.address")
        dist = {row["key"]: row["distribution"] for row in rows}
        assert dist.get("M0$management") == "closest", dist
        assert dist.get("L$management") == "closest", dist
        own = {row["key"]: row for row in rows if row["key"].endswith("$management")}
        for key, row in own.items():
            assert (row["inProcess"], row["subscriberCount"], row["deliveriesEgress"]) == \
                (1, 0, 0), row
        assert own[key_of(path)]["deliveriesToContainer"] >= 1, own
    finally:
        node.close()


def test_anonymous_request_to_management_with_default_unavailable(make_router, client):
    r = make_router(router={"defaultDistribution": "unavailable"}, addresses=[])
    conn = client.connect(r.url)
    rcv = conn.receiver(dynamic=True, credit=5)
    snd = conn.sender(None)
    for i, to in enumerate(["$management", "_topo/0/JTest/$management"]):
        msg = Message(address=to, properties={"operation": "QUERY", "entityType": "router",
                                              "type": "org.amqp.management", "name": "self"},
                      body={"attributeNames": ["id"]}, reply_to=rcv.remote_address,
                      correlation_id=i)
        dlv = snd.send(msg)
        assert snd.wait_outcome(dlv) == dlv.ACCEPTED
        got = rcv.get().message
        assert got.properties["statusCode"] == 200 and got.correlation_id == i
        assert got.body["results"] == [["JTest"]]


@pytest.mark.parametrize("config", ["default-unavailable", "prefix-unavailable"])
def test_real_qdstat_and_qdmanage_with_hostile_configuration(make_router, config):
    qdstat = peer_tool("qdstat")
    r = make_router(**HOSTILE[config])
    bus = "%s:%d" % (r.host, r.port)
    out = run_tool(qdstat.name, "-b", bus, "-g")
    assert "JTest" in out and "standalone" in out
    out = run_tool(qdstat.name, "-b", bus, "-r", "JTest", "-a")
    assert "$management" in out
    out = run_tool("qdmanage", "-b", bus, "query", "--type", "listener")
    assert '"port": "0"' in out


@pytest.mark.parametrize("address", NODE_FORMS)
def test_client_receiver_on_management_is_refused(router, client, address):
    conn = client.connect(router.url)
    rcv = conn.receiver(address, credit=10, wait=False)
    rcv.wait_remote_closed()
    cond = rcv.remote_condition
    assert cond is not None and cond.name == "amqp:unauthorized-access", cond
    assert "router's own node" in cond.description, cond.description
    # requests meanwhile all reach the agent: none is handed to the client
    node = Node(router.url, timeout=5)
    try:
        for _ in range(4):
            assert node.query("router", ["id"])[1] == [["JTest"]]
    finally:
        node.close()
    assert not rcv.queue
    # the connection is still usable, and a sender to the node is welcome: that is how
    # requests arrive
    snd = conn.sender(address)
    snd.wait_credit()
    assert snd.credit > 0 and not snd.is_remote_closed()


def test_refused_receiver_cannot_take_requests_with_unavailable_default(make_router, client):
    # the reported case: with `defaultDistribution: unavailable` the agent's own link was
    # refused, and a client receiver on `$management` got other users' requests
    r = make_router(router={"defaultDistribution": "unavailable"}, addresses=[])
    conn = client.connect(r.url)
    thief = conn.receiver("$management", credit=10, wait=False)
    thief.wait_remote_closed()
    assert thief.remote_condition.name == "amqp:unauthorized-access"
    node = Node(r.url, timeout=5)
    try:
        for _ in range(4):
            assert node.query("router", ["id"])[1] == [["JTest"]]
    finally:
        node.close()
    assert not thief.queue


@pytest.mark.parametrize("form", ["as-given", "without-scheme", "local"])
def test_receiver_on_someone_elses_dynamic_address_is_refused(router, client, form):
    owner = client.connect(router.url).receiver(dynamic=True, settle="accept")
    addr = owner.remote_address  # amqp:/_topo/0/JTest/temp.<...>
    if form == "without-scheme":
        addr = addr[len("amqp:/"):]
    elif form == "local":
        addr = "_local/" + addr.rsplit("/", 1)[1]
    thief = client.connect(router.url).receiver(addr, credit=10, wait=False)
    thief.wait_remote_closed()
    cond = thief.remote_condition
    assert cond is not None and cond.name == "amqp:unauthorized-access", cond
    assert "dynamic address" in cond.description
    # the owner still gets every message sent there, and a sender may still send to it
    snd = client.connect(router.url).sender(addr)
    for i in range(4):
        snd.send(Message(body="reply%d" % i))
    assert [owner.get().body for _ in range(4)] == ["reply%d" % i for i in range(4)]
    assert not thief.queue
    # an ordinary local address stays open to clients' receivers
    conn = client.connect(router.url)
    rcv = conn.receiver("_local/svc", settle="accept")
    conn.sender("_topo/0/JTest/svc").send(Message(body="local"))
    assert rcv.get().body == "local"


@pytest.mark.parametrize("address", ["_topo/0/Other/foo", "amqp:/_topo/0/Other/$management"])
def test_receiver_for_another_router_gets_no_route(router, client, address):
    rcv = client.connect(router.url).receiver(address, credit=1, wait=False)
    rcv.wait_remote_closed()
    cond = rcv.remote_condition
    # qdrouterd 1.19's answer, word for word
    assert cond.name == "qd:no-route-to-dest", cond
    assert cond.description == "No route to the destination node"
