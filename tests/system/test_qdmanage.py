"""qdmanage compatibility: query, create, read, update, delete, get-types, get-schema (and the
other GET-* operations) sent exactly as qdmanage sends them (mgmt_tool.Node), the run-time
effect of each change (listeners, address configuration, log levels, closing a connection),
qdrouterd's error codes, and malformed requests that must leave the management link usable.
"""

import json
import time

import pytest
from proton import Message, symbol

import amqp_raw
from conftest import can_connect, free_port
from mgmt_tool import PREFIX, ManagementError, Node

TYPES = ["router", "listener", "connector", "router.config.address", "router.config.autoLink",
         "router.config.linkRoute", "router.link", "router.address", "connection", "allocator",
         "log", "logStats", "policy", "router.node"]


@pytest.fixture
def node(router):
    n = Node(router.url)
    yield n
    n.close()


def raw_call(node, props, body=None, reply_to=True, **msg_fields):
    """A hand-made request through the same management link."""
    msg = Message(body=body, properties=props, **msg_fields)
    if reply_to:
        msg.reply_to = node.reply_to
    resp = node.client.call(msg)
    return resp.properties["statusCode"], resp.properties["statusDescription"], resp.body


def still_usable(node):
    names, rows = node.query("router", ["id"])
    assert rows == [["JTest"]]


def expect_status(status, fn, *args, **kw):
    with pytest.raises(ManagementError) as e:
        fn(*args, **kw)
    assert e.value.status == status, e.value
    assert e.value.description
    return e.value.description


# ---- query ----------------------------------------------------------------------------

def test_query_listener_and_address(node, router):
    rows = node.query_dicts("listener")
    assert len(rows) == 1
    lst = rows[0]
    assert lst["host"] == "127.0.0.1" and lst["port"] == "0"
    assert lst["identity"].startswith("listener/") and lst["name"]
    assert lst["type"] == PREFIX + ".listener"
    assert isinstance(lst["maxFrameSize"], int) and lst["linkCapacity"] == 250
    assert lst["authenticatePeer"] is False and lst["stripAnnotations"] == "both"
    addrs = {a["prefix"]: a for a in node.query_dicts("address")}
    assert addrs["multicast"]["distribution"] == "multicast"
    assert addrs["closest"]["distribution"] == "closest"
    assert all(a["identity"] and a["type"] == PREFIX + ".router.config.address"
               for a in addrs.values())


def test_query_every_type(node):
    for t in TYPES:
        names, rows = node.query(PREFIX + "." + t)
        assert {"name", "identity", "type"} <= set(names), t
        for r in rows:
            row = dict(zip(names, r))
            assert row["type"] == PREFIX + "." + t
            assert isinstance(row["identity"], str)


def test_query_without_type_lists_entities(node):
    names, rows = node.query(None)
    assert names == ["name", "identity", "type"]
    types = {r[2] for r in rows}
    assert {PREFIX + ".router", PREFIX + ".listener", PREFIX + ".log"} <= types


def test_query_log_and_logstats(node):
    logs = {r["module"]: r for r in node.query_dicts("log")}
    assert set(logs) >= {"DEFAULT", "ROUTER", "ROUTER_CORE", "SERVER", "AGENT"}
    assert logs["DEFAULT"]["identity"] == "log/DEFAULT" and logs["DEFAULT"]["enable"]
    stats = {r["identity"]: r for r in node.query_dicts("logStats")}
    assert stats["logStats/SERVER"]["noticeCount"] >= 2  # Listening on ..., Operational ...
    assert isinstance(stats["logStats/SERVER"]["traceCount"], int)


def test_query_policy(node, router):
    p = node.query_dicts("policy")
    assert len(p) == 1 and p[0]["maxConnections"] == 65535
    assert p[0]["connectionsCurrent"] >= 1


# ---- create / read / delete: address ----------------------------------------------------

def test_create_read_delete_address(node, router, client):
    a = node.create({"prefix": "fan", "distribution": "multicast"}, "address", "fan1")
    assert a["name"] == "fan1" and a["prefix"] == "fan" and a["distribution"] == "multicast"
    assert isinstance(a["identity"], str) and a["identity"]
    assert node.read("address", name="fan1")["identity"] == a["identity"]
    assert node.read("address", identity=a["identity"])["name"] == "fan1"

    # it takes effect at once: two receivers each get the message (multicast)
    conn = client.connect(router.url)
    r1 = conn.receiver("fan.x", credit=5, settle="accept")
    r2 = conn.receiver("fan.x", credit=5, settle="accept")
    snd = conn.sender("fan.x")
    dlv = snd.send(Message(body="to all"))
    assert snd.wait_outcome(dlv) == dlv.ACCEPTED
    assert r1.get().body == "to all" and r2.get().body == "to all"
    addr = [x for x in node.query_dicts("router.address") if x["key"] == "M0fan.x"]
    assert addr[0]["distribution"] == "multicast"

    assert node.delete("address", name="fan1") == {}
    expect_status(404, node.read, "address", name="fan1")
    # addresses made from now on get the default treatment again
    conn.receiver("fan.after", credit=1)
    addr = [x for x in node.query_dicts("router.address") if x["key"] == "M0fan.after"]
    assert addr[0]["distribution"] == "balanced"


def test_create_address_errors(node):
    d = expect_status(400, node.create, {"prefix": "bad", "distribution": "sideways"}, "address")
    assert "distribution" in d
    expect_status(400, node.create, {"prefix": "closest"}, "address", "dup")  # configured
    expect_status(400, node.create, {"prefix": "x", "frobnicate": 1}, "address")
    expect_status(400, node.create, {"prefix": "x", "identity": "5"}, "address")
    node.create({"pattern": "a.*.b"}, "address", "pat")
    expect_status(400, node.create, {"pattern": "a.*.c"}, "address", "pat")  # name taken
    expect_status(404, node.delete, "address", name="nope")
    still_usable(node)


# ---- create / delete: listener -----------------------------------------------------------

def test_create_delete_listener(node, router, client):
    port = free_port()
    lst = node.create({"host": "127.0.0.1", "port": str(port), "linkCapacity": 7},
                      "listener", "extra")
    assert lst["name"] == "extra" and lst["port"] == str(port) and lst["linkCapacity"] == 7
    router.wait_log(r"Listening on 127\.0\.0\.1:%d" % port)
    # a real client on the new listener, with its linkCapacity
    conn = client.connect("amqp://127.0.0.1:%d" % port)
    conn.receiver("closest.l2", credit=1)
    snd = conn.sender("closest.l2")
    snd.wait_credit(7)
    assert snd.credit == 7
    assert any(x["name"] == "extra" for x in node.query_dicts("listener"))

    assert node.delete("listener", name="extra") == {}
    deadline = time.monotonic() + 10
    while can_connect(port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not can_connect(port)
    assert not any(x["name"] == "extra" for x in node.query_dicts("listener"))
    # the connection made through it stays
    dlv = snd.send(Message(body="still here"))
    assert dlv is not None
    still_usable(node)


def test_create_listener_port_in_use(node, router):
    d = expect_status(400, node.create, {"host": "127.0.0.1", "port": str(router.port)},
                      "listener")
    assert "Cannot listen" in d
    still_usable(node)


def test_delete_configured_listener(node, router):
    ident = node.query_dicts("listener")[0]["identity"]
    # a second listener first, so the management client keeps a way in
    port = free_port()
    node.create({"host": "127.0.0.1", "port": str(port)}, "listener", "keep")
    router.wait_log(r"Listening on 127\.0\.0\.1:%d" % port)
    node.delete("listener", identity=ident)
    deadline = time.monotonic() + 10
    while can_connect(router.port) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not can_connect(router.port)
    n2 = Node("amqp://127.0.0.1:%d" % port)
    try:
        assert [x["name"] for x in n2.query_dicts("listener")] == ["keep"]
    finally:
        n2.close()


# ---- update ------------------------------------------------------------------------------

def test_update_log_level(node, router, client):
    before = len(router.stderr_lines())
    r = node.update({"enable": "trace+"}, "log", name="log/ROUTER_CORE")
    assert r["enable"] == "trace+" and r["module"] == "ROUTER_CORE"
    assert node.read("log", name="log/ROUTER_CORE")["enable"] == "trace+"
    conn = client.connect(router.url)
    conn.receiver("closest.traced", credit=1)
    router.wait_log(r"ROUTER_CORE \(debug\) .*Link attached outgoing address M0closest\.traced",
                    start=before)
    node.update({"enable": "info+"}, "log", identity="log/ROUTER_CORE")
    n = len(router.stderr_lines())
    conn.receiver("closest.untraced", credit=1)
    client.run_for(0.3)
    assert not any("ROUTER_CORE" in line and "closest.untraced" in line
                   for line in router.stderr_lines()[n:])
    expect_status(400, node.update, {"enable": "loud"}, "log", name="log/ROUTER_CORE")
    expect_status(400, node.update, {"outputFile": "/nonexistent/x"}, "log",
                  name="log/ROUTER_CORE")
    expect_status(404, node.update, {"enable": "info+"}, "log", name="log/NOPE")


def test_update_connection_admin_status_deleted_closes_it(node, router, client):
    conn = client.connect(router.url)
    conn.receiver("closest.victim", credit=1)
    cid = [c for c in node.query_dicts("connection")
           if c["container"] == conn.pn.container][0]["identity"]
    r = node.update({"adminStatus": "deleted"}, "connection", identity=cid)
    assert r["identity"] == cid and r["adminStatus"] == "deleted"
    conn.wait_closed_by_peer()
    assert conn.pn.remote_condition.name == "amqp:connection:forced"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not any(c["identity"] == cid for c in node.query_dicts("connection")):
            break
        time.sleep(0.05)
    assert not any(c["identity"] == cid for c in node.query_dicts("connection"))
    expect_status(404, node.update, {"adminStatus": "deleted"}, "connection", identity=cid)
    expect_status(400, node.update, {"adminStatus": "sleepy"}, "connection",
                  identity=node.query_dicts("connection")[0]["identity"])


def test_read_router_and_connection(node):
    r = node.read("router")
    assert r["id"] == "JTest" and r["identity"] == "1"
    me = node.query_dicts("connection")[0]
    assert node.read("connection", identity=me["identity"])["host"] == me["host"]


# ---- node operations ----------------------------------------------------------------------

def test_get_types(node):
    types = node.get("GET-TYPES")
    for t in TYPES:
        assert PREFIX + "." + t in types, t
    assert PREFIX + ".configurationEntity" in types[PREFIX + ".listener"]
    assert PREFIX + ".operationalEntity" in types[PREFIX + ".router.link"]
    only = node.get("GET-TYPES", entityType=PREFIX + ".log")
    assert list(only) == [PREFIX + ".log"]


def test_get_schema(node):
    s = node.get("GET-SCHEMA")
    assert s["prefix"] == PREFIX
    et = s["entityTypes"]
    for t in TYPES:
        assert t in et and et[t]["fullName"] == PREFIX + "." + t
    assert "CREATE" in et["listener"]["operations"]
    assert et["listener"]["attributes"]["port"]["create"] is True
    assert et["log"]["attributes"]["enable"]["update"] is True
    assert "linksBlocked" in et["router"]["attributes"]
    assert "connectionId" in et["router.link"]["attributes"]
    js = json.loads(node.get("GET-JSON-SCHEMA"))
    assert js["entityTypes"].keys() == et.keys()


def test_get_attributes_operations_annotations(node):
    attrs = node.get("GET-ATTRIBUTES")
    assert "owningAddr" in attrs[PREFIX + ".router.link"]
    assert "host" in attrs[PREFIX + ".connection"]
    ops = node.get("GET-OPERATIONS")
    assert set(ops[PREFIX + ".router.config.address"]) >= {"CREATE", "DELETE", "READ", "QUERY"}
    assert node.get("GET-ANNOTATIONS") == {}


# ---- errors and malformed requests --------------------------------------------------------

def test_error_codes(node):
    expect_status(404, node.query, "org.apache.qpid.dispatch.nosuch")
    expect_status(404, node.query, "router", ["id", "noSuchAttribute"])
    expect_status(501, node.get, "FROBNICATE")
    expect_status(403, node.create, {}, "router")
    expect_status(403, node.delete, "router", name="JTest")
    expect_status(403, node.delete, "connection", identity="1")
    expect_status(501, node.update, {"port": "1"}, "listener", name="x")
    # a linkRoute has no `address` (prefix or pattern)
    expect_status(400, node.create, {"address": "q", "direction": "in"}, "linkRoute")
    # an autoLink must name where it attaches
    expect_status(400, node.create, {"address": "q", "direction": "in"}, "autoLink")
    expect_status(404, node.read, "listener", name="nope")
    still_usable(node)


@pytest.fixture
def raw(router, client):
    """A sender to $management and a dynamic receiver of the replies, for hand-made requests."""
    conn = client.connect(router.url)
    rcv = conn.receiver(dynamic=True, credit=50)
    snd = conn.sender("$management")
    return snd, rcv, rcv.link.remote_source.address


def raw_request(app_props_section, reply_to, body=b"\x00\x53\x77\xc1\x01\x00", cid=None):
    props = [b"\x40", b"\x40", b"\x40", b"\x40", amqp_raw.enc_str(reply_to)]
    if cid is not None:
        props += [amqp_raw.enc_str(cid)]
    return (amqp_raw._described(0x73, amqp_raw.enc_list(props)) + app_props_section + body)


def app_props(pairs):
    return amqp_raw._described(0x74, amqp_raw.enc_map(pairs))


def test_correlation_id_types_echoed(raw):
    snd, rcv, reply_to = raw
    for cid in (7, "abc", 2 ** 40, b"\x01bin"):
        msg = Message(body={}, properties={"operation": "GET-MGMT-NODES", "name": "self",
                                           "type": "org.amqp.management"})
        msg.reply_to = reply_to
        msg.correlation_id = cid
        snd.send(msg)
        resp = rcv.get().message
        assert resp.correlation_id == cid and type(resp.correlation_id) is type(cid)
        assert resp.properties["statusCode"] == 200
        assert resp.address == reply_to


@pytest.mark.parametrize("section,status", [
    # a symbol key (Proton-Python refuses to build it)
    (app_props([(amqp_raw.enc_sym("operation"), amqp_raw.enc_str("QUERY"))]), 400),
    # a binary key
    (app_props([(amqp_raw.enc_bin(b"op"), amqp_raw.enc_str("QUERY"))]), 400),
    # operation as binary
    (app_props([(amqp_raw.enc_str("operation"), amqp_raw.enc_bin(b"QUERY"))]), 400),
    # no application-properties at all
    (b"", 400),
    # application-properties that are not a map: not a message at all; refused, no reply
    (amqp_raw._described(0x74, amqp_raw.enc_list([amqp_raw.enc_str("QUERY")])), None),
    (amqp_raw._described(0x74, amqp_raw.enc_str("operation=QUERY")), None),
])
def test_garbage_application_properties(raw, node, section, status):
    snd, rcv, reply_to = raw
    dlv = snd.send_raw(raw_request(section, reply_to, cid="c1"))
    if status is None:
        assert snd.wait_outcome(dlv) == dlv.REJECTED
    else:
        resp = rcv.get().message
        assert resp.properties["statusCode"] == status, resp.properties
        assert resp.properties["statusDescription"]
        assert resp.correlation_id == "c1"
    # the same link answers a good request next
    good = app_props([(amqp_raw.enc_str("operation"), amqp_raw.enc_str("QUERY")),
                      (amqp_raw.enc_str("entityType"), amqp_raw.enc_str("router"))])
    snd.send_raw(raw_request(good, reply_to, cid="c2"))
    resp = rcv.get().message
    assert resp.properties["statusCode"] == 200 and resp.correlation_id == "c2"
    still_usable(node)


@pytest.mark.parametrize("props,body,status", [
    ({"type": "org.amqp.management"}, {}, 400),                       # no operation
    ({"operation": 5}, {}, 400),                                       # not a string
    ({"operation": "QUERY", "entityType": "router"}, "garbage", 400),  # body not a map
    ({"operation": "QUERY", "entityType": "router"}, {"attributeNames": "id"}, 400),
    ({"operation": "QUERY", "entityType": "router"}, {"attributeNames": [1, 2]}, 400),
    ({"operation": "QUERY", "entityType": "router", "offset": "x"}, {}, 400),
    ({"operation": "QUERY", "entityType": "router", "count": -1}, {}, 400),
    ({"operation": "CREATE", "type": "address"}, ["prefix", "x"], 400),
    ({"operation": "CREATE", "type": "address"}, {"prefix": b"\x00\x01"}, 400),
    ({"operation": "CREATE", "type": "address"}, {1: "x"}, 400),
    ({"operation": "UPDATE", "type": "log", "name": "log/DEFAULT"}, {"enable": 3}, 400),
    ({"operation": "READ"}, {}, 200),                                  # the node itself
])
def test_malformed_requests_keep_the_link_usable(node, props, body, status):
    got, desc, resp_body = raw_call(node, props, body)
    assert got == status, desc
    assert isinstance(desc, str) and desc
    if status >= 400:
        assert resp_body == {}
    still_usable(node)


def test_request_without_reply_to_is_rejected(node, router, client):
    conn = client.connect(router.url)
    snd = conn.sender("$management")
    dlv = snd.send(Message(body={}, properties={"operation": "QUERY", "entityType": "router"}))
    assert snd.wait_outcome(dlv) == dlv.REJECTED
    still_usable(node)


def test_query_without_body_and_presettled_request(node, router, client):
    conn = client.connect(router.url)
    rcv = conn.receiver(dynamic=True, credit=5)
    rcv.wait_attached()
    reply_to = rcv.link.remote_source.address
    snd = conn.sender("_topo/0/JTest/$management", presettled=True)
    msg = Message(properties={"operation": "QUERY", "entityType": "router",
                              "type": "org.amqp.management", "name": "self"})
    msg.reply_to = reply_to
    msg.correlation_id = 99
    snd.send(msg)
    got = rcv.get().message
    assert got.properties["statusCode"] == 200 and got.correlation_id == 99
    assert "id" in got.body["attributeNames"] and len(got.body["results"]) == 1


def test_oversized_request_refused(raw, node):
    # a request big enough to be streamed (over 256 KiB) is refused, not buffered whole
    snd, rcv, reply_to = raw
    msg = Message(body={"prefix": "big", "junk": "x" * (300 << 10)},
                  properties={"operation": "CREATE", "type": "address"})
    msg.reply_to = reply_to
    dlv = snd.send(msg)
    assert snd.wait_outcome(dlv) == dlv.REJECTED
    still_usable(node)
    names, rows = node.query("address", ["prefix"])
    assert ["big"] not in rows
