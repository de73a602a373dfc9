"""Management tells the truth: READ and QUERY rows show what the router runs with (from the
file, or from CREATE at run time), CREATE of an http listener makes an HTTP listener, DELETE
of any listener closes its socket, and an attribute Junction accepts but would not act on is
refused ("does not support ... yet") in the file and in CREATE.

Requests go through mgmt_tool.Node (built as qdmanage builds them); where ../shared/peer has
the real qdmanage, it reads the same rows.
"""

import http.client
import json
import os
import subprocess
import time

import pytest

from conftest import REPO_ROOT, can_connect, free_port, run_junctiond, write_config
from mgmt_tool import ManagementError, Node, full_type

PEER_BIN = REPO_ROOT.parent / "shared" / "peer" / "bin"


def wait_refused(port, timeout=10):
    deadline = time.monotonic() + timeout
    while can_connect(port) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not can_connect(port)


def http_get(port, path, timeout=10):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        resp = c.getresponse()
        return resp.status, resp.read()
    finally:
        c.close()


def wait_http(port, path="/healthz", timeout=10):
    """GET `path` until the listener answers; returns (status, body)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return http_get(port, path)
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.fixture
def node_of():
    made = []

    def make(router, i=0):
        n = Node(router.url_of(i), timeout=10)
        made.append(n)
        return n

    yield make
    for n in made:
        n.close()


def create_fails(node, attrs, etype):
    with pytest.raises(ManagementError) as e:
        node.create(attrs, etype)
    return e.value


# ---- rows from the live configuration -------------------------------------------------

LISTENER_FILE = {"host": "127.0.0.1", "port": "0", "initialHandshakeTimeoutSeconds": 3,
                 "cost": 7, "socketAddressFamily": "IPv4", "policyVhost": "vh",
                 "linkCapacity": 40, "maxSenders": 5, "maxReceivers": 6,
                 "maxMessageSize": 100000, "maxUnsettledPerLink": 20, "idleTimeoutSeconds": 9,
                 "stripAnnotations": "in", "maxFrameSize": 4096, "maxSessionFrames": 8}


def test_listener_rows_show_the_configured_values(make_router, node_of):
    r = make_router(listeners=[LISTENER_FILE])
    row, = node_of(r).query_dicts("listener")
    for k, v in LISTENER_FILE.items():
        assert row[k] == v, "%s: row has %r, the file %r" % (k, row[k], v)
    assert row["http"] is False and row["httpRootDir"] is None


def test_requests_in_several_frames_are_answered(make_router, node_of):
    """A management request that arrives in several frames (its message annotations pad it
    past the listener's 4096-byte frames) is answered as a small one: the router keeps such a
    message in the buffers it was read into, and the agent reads it from a joined copy."""
    r = make_router(listeners=[LISTENER_FILE])
    node = node_of(r)
    for pad in (3000, 5000, 9000, 20000, 60000):
        req = node.node_request({"attributeNames": ["maxFrameSize", "cost"]}, operation="QUERY",
                                entityType=full_type("listener"))
        req.annotations = {"pad%d" % i: "p" * 90 for i in range(pad // 98)}
        body = node.call(req).body
        assert body["attributeNames"] == ["maxFrameSize", "cost"]
        assert body["results"] == [[4096, 7]], pad


def test_listener_row_defaults_are_what_the_router_does(make_router, node_of):
    r = make_router()
    row, = node_of(r).query_dicts("listener")
    # Junction closes a silent connection after 10 s by default (qdrouterd: never)
    assert row["initialHandshakeTimeoutSeconds"] == 10
    assert row["linkCapacity"] == 250 and row["cost"] == 1
    assert row["socketAddressFamily"] is None
    assert row["maxMessageSize"] == 0 and row["maxUnsettledPerLink"] == 250


def test_http_listener_row_shows_its_switches(make_router, node_of, tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    r = make_router(listeners=[
        {"host": "127.0.0.1", "port": "0"},
        {"host": "127.0.0.1", "port": "0", "httpRootDir": str(root), "healthz": False,
         "metrics": False, "websockets": False}])
    rows = node_of(r).query_dicts("listener")
    http_row = [x for x in rows if x["http"]]
    assert len(http_row) == 1 and len(rows) == 2
    row = http_row[0]
    assert row["httpRootDir"] == str(root)
    assert row["healthz"] is False and row["metrics"] is False and row["websockets"] is False


def test_created_listener_row_shows_what_create_gave(make_router, node_of):
    r = make_router()
    node = node_of(r)
    port = free_port()
    attrs = {"host": "127.0.0.1", "port": str(port), "initialHandshakeTimeoutSeconds": 2,
             "maxSenders": 3, "linkCapacity": 11}
    made = node.create(attrs, "listener", name="rt")
    got = node.read("listener", name="rt")
    for row in (made, got):
        for k, v in attrs.items():
            assert row[k] == v, (k, row[k], v)
        assert row["http"] is False


def test_policy_row_shows_the_configured_policy(make_router, node_of):
    r = make_router(extra=[["policy", {"maxConnections": 7, "maxMessageSize": 5000,
                                       "defaultVhost": "vh", "enableVhostNamePatterns": True}]])
    row = node_of(r).read("policy")
    assert row["maxConnections"] == 7 and row["maxMessageSize"] == 5000
    assert row["defaultVhost"] == "vh" and row["enableVhostNamePatterns"] is True
    # without the entity: qdrouterd's defaults, which Junction runs with
    r2 = make_router()
    row = node_of(r2).read("policy")
    assert row["maxConnections"] == 65535 and row["maxMessageSize"] == 0


def test_log_rows_show_timestamp_and_source_and_the_lines_follow(make_router, node_of):
    r = make_router(logs=[["log", {"module": "DEFAULT", "enable": "info+",
                                   "includeSource": True}],
                          ["log", {"module": "SERVER", "includeTimestamp": False}]])
    node = node_of(r)
    server = node.read("log", name="log/SERVER")
    assert server["includeTimestamp"] is False and server["includeSource"] is True
    agent = node.read("log", name="log/AGENT")  # no entity of its own: DEFAULT's
    assert agent["includeTimestamp"] is True and agent["includeSource"] is True
    # and the log lines are written that way (qdrouterd's form: " (file:line)" at the end)
    m = r.wait_log(r"^SERVER \(notice\) Listening on \S+ \(router/connmgr\.c:\d+\)$")
    assert m
    m = r.wait_log(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6} \+0000 ROUTER_CORE \(info\) "
                   r"Core thread started \(core/core\.c:\d+\)$")
    assert m


# ---- CREATE and DELETE of listeners do what they say ----------------------------------

def test_create_http_listener_serves_http(make_router, node_of):
    # the configuration has no http listener and no management entity: no admin thread yet
    r = make_router()
    node = node_of(r)
    port = free_port()
    row = node.create({"host": "127.0.0.1", "port": str(port), "http": True}, "listener",
                      name="web")
    assert row["http"] is True
    status, body = wait_http(port, "/healthz")
    assert status == 200 and body == b"OK\n"
    status, body = http_get(port, "/metrics")
    assert status == 200 and b"# TYPE" in body
    assert node.read("listener", name="web")["http"] is True


def test_create_http_listener_beside_the_management_socket(make_router, node_of, tmp_path):
    # the admin thread runs (for the socket) but has no HTTP server yet: CREATE starts one
    sock = tmp_path / "m.sock"
    if len(str(sock)) > 100:
        sock = "/tmp/jt-truth-%d.sock" % os.getpid()
    r = make_router(extra=[["management", {"socket": str(sock)}]])
    node = node_of(r)
    port = free_port()
    node.create({"host": "127.0.0.1", "port": str(port), "http": True, "metrics": False},
                "listener", name="web")
    assert wait_http(port, "/healthz") == (200, b"OK\n")
    assert http_get(port, "/metrics")[0] == 404
    node.delete("listener", name="web")
    assert wait_refused(port)


def test_create_second_http_listener_with_its_own_switches(make_router, node_of, tmp_path):
    root = tmp_path / "site"
    root.mkdir()
    (root / "index.html").write_text("<p>created</p>")
    r = make_router(listeners=[{"host": "127.0.0.1", "port": "0"},
                               {"host": "127.0.0.1", "port": "0", "http": True}])
    node = node_of(r)
    port = free_port()
    node.create({"host": "127.0.0.1", "port": str(port), "httpRootDir": str(root),
                 "healthz": False}, "listener", name="site")
    status, body = wait_http(port, "/index.html")
    assert status == 200 and body == b"<p>created</p>"
    assert http_get(port, "/healthz")[0] == 404
    # the configured one still answers
    assert http_get(r.addresses[1][1], "/healthz")[0] == 200


def test_create_http_listener_with_a_bad_root_dir_is_refused(make_router, node_of, tmp_path):
    r = make_router()
    node = node_of(r)
    port = free_port()
    err = create_fails(node, {"host": "127.0.0.1", "port": str(port),
                              "httpRootDir": str(tmp_path / "missing")}, "listener")
    assert err.status == 400 and "httpRootDir" in err.description
    assert not can_connect(port)
    assert not any(x["port"] == str(port) for x in node.query_dicts("listener"))


def test_delete_configured_listeners_closes_their_sockets(make_router, node_of):
    r = make_router(listeners=[{"host": "127.0.0.1", "port": "0"},
                               {"host": "127.0.0.1", "port": "0", "http": True, "name": "web"},
                               {"host": "127.0.0.1", "port": "0", "name": "spare"}])
    hport, aport = r.addresses[1][1], r.addresses[2][1]
    assert http_get(hport, "/healthz")[0] == 200
    node = node_of(r)
    assert node.delete("listener", name="web") == {}
    assert wait_refused(hport), "the http listener still accepts after DELETE"
    assert node.delete("listener", name="spare") == {}
    assert wait_refused(aport), "the AMQP listener still accepts after DELETE"
    assert len(node.query_dicts("listener")) == 1


def test_delete_created_http_listener_closes_its_socket(make_router, node_of):
    r = make_router()
    node = node_of(r)
    port = free_port()
    node.create({"host": "127.0.0.1", "port": str(port), "http": True}, "listener", name="w2")
    assert wait_http(port)[0] == 200
    node.delete("listener", name="w2")
    assert wait_refused(port)
    # and the port can be had again, as an AMQP listener this time
    node.create({"host": "127.0.0.1", "port": str(port)}, "listener", name="a2")
    r.wait_log(r"Listening on 127\.0\.0\.1:%d" % port)
    n2 = Node("amqp://127.0.0.1:%d" % port, timeout=10)
    try:
        assert n2.query("router", ["id"])[1] == [["JTest"]]
    finally:
        n2.close()


# ---- accepted but not acted on: refused --------------------------------------------------

UNSUPPORTED = [
    ("listener", {"host": "127.0.0.1", "port": "0", "failoverUrls": "amqp://b:5672"},
     "failoverUrls"),
    ("listener", {"host": "127.0.0.1", "port": "0", "messageLoggingComponents": "all"},
     "messageLoggingComponents"),
]


@pytest.mark.parametrize("etype,attrs,attr", UNSUPPORTED, ids=[u[2] for u in UNSUPPORTED])
def test_unsupported_attribute_refused_in_the_file(tmp_path, etype, attrs, attr):
    path = tmp_path / "cfg.json"
    write_config(path, [["router", {"id": "JTest"}], ["listener", {"host": "127.0.0.1",
                                                                   "port": "0"}],
                        [etype, attrs]])
    p = run_junctiond(["-c", path])
    assert p.returncode != 0, p.stderr
    line = p.stderr.strip()
    assert "cfg.json" in line and "entity 2 (%s)" % etype in line, line
    assert "attribute '%s'" % attr in line and "does not support" in line and "yet" in line, line


@pytest.mark.parametrize("etype,attrs,attr", UNSUPPORTED, ids=[u[2] for u in UNSUPPORTED])
def test_unsupported_attribute_refused_by_create(router, node_of, etype, attrs, attr):
    node = node_of(router)
    attrs = dict(attrs)
    if etype == "listener":
        attrs["port"] = str(free_port())
    err = create_fails(node, attrs, etype)
    assert err.status == 400, err
    assert "'%s'" % attr in err.description and "does not support" in err.description
    # nothing was made
    if etype == "listener":
        assert not can_connect(int(attrs["port"]))
        assert len(node.query_dicts("listener")) == 1
    else:
        assert not any(x["prefix"] == "q" for x in node.query_dicts("address"))


def test_timestamp_format_refused(tmp_path):
    path = tmp_path / "cfg.json"
    write_config(path, [["router", {"id": "JTest", "timestampFormat": "%H:%M"}]])
    p = run_junctiond(["-c", path])
    assert p.returncode != 0
    assert "attribute 'timestampFormat'" in p.stderr and "does not support" in p.stderr


def test_socket_address_family_is_honoured(make_router, tmp_path):
    # IPv4 only: an IPv6 host cannot be had, and the error says so
    path = tmp_path / "cfg.json"
    write_config(path, [["router", {"id": "JTest"}],
                        ["listener", {"host": "::1", "port": "0",
                                      "socketAddressFamily": "IPv4"}]])
    p = run_junctiond(["-c", path])
    assert p.returncode != 0 and "Cannot listen on ::1" in p.stderr, p.stderr
    r = make_router(listeners=[{"host": "localhost", "port": "0",
                                "socketAddressFamily": "IPv4"}])
    assert r.host == "127.0.0.1"


# ---- the real qdmanage reads the same rows -----------------------------------------------

def test_real_qdmanage_reads_the_live_listener(make_router):
    exe = PEER_BIN / "qdmanage"
    if not exe.exists():
        pytest.skip("the reference qdmanage is not in ../shared/peer (%s)" % exe)
    r = make_router(listeners=[LISTENER_FILE])
    out = subprocess.run([str(exe), "-b", "%s:%d" % (r.host, r.port), "query", "--type",
                          "listener"], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    row, = json.loads(out.stdout)
    assert row["initialHandshakeTimeoutSeconds"] == 3 and row["cost"] == 7
    assert row["linkCapacity"] == 40 and row["maxFrameSize"] == 4096


def test_update_router_attribute_is_refused_not_ignored(router, node_of):
    node = node_of(router)
    with pytest.raises(ManagementError) as e:
        node.update({"workerThreads": 7}, "router")
    assert e.value.status == 400 and "workerThreads" in e.value.description
    assert node.update({}, "router")["id"] == "JTest"  # nothing to change: qdrouterd's no-op


def test_policy_counters_count_what_the_policy_refused(make_router, client, node_of):
    from proton import Delivery, Endpoint, Message
    r = make_router(listener={"maxSenders": 1, "maxMessageSize": 1000},
                    extra=[["policy", {"maxConnections": 2}]])
    node = node_of(r)  # connection 1
    c1 = client.connect(r.url)  # connection 2
    snd = c1.sender("policy.q")
    extra = c1.sender("policy.q", wait=False)  # one sender too many
    assert extra.wait_remote_closed()
    c3 = client.connect(r.url, wait=False)  # one connection too many
    client.wait(lambda: c3.pn.state & Endpoint.REMOTE_CLOSED or c3.is_gone(),
                msg="the third connection refused")
    c1.receiver("policy.q", credit=5, settle="accept")
    big = snd.send(Message(body="b" * 5000))  # too large: refused, c1 closed
    assert snd.wait_outcome(big) == Delivery.REJECTED
    want = {"connectionsDenied": 1, "linksDenied": 1, "maxMessageSizeDenied": 1,
            "totalDenials": 3}
    deadline = time.monotonic() + 10
    while True:
        row = node.read("policy")
        if all(row[k] == v for k, v in want.items()) or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for k, v in want.items():
        assert row[k] == v, (k, row)
    assert row["connectionsProcessed"] >= 3


def test_listed_operations_are_the_ones_that_work(router, node_of):
    """GET-OPERATIONS lists only what the router does: an UPDATE it lists for a type is
    answered (not 501), and router.link, whose adminStatus cannot be changed yet, lists none."""
    node = node_of(router)
    ops = node.get("GET-OPERATIONS")
    prefix = "org.apache.qpid.dispatch."
    assert set(ops[prefix + "router.link"]) == {"READ", "QUERY"}
    with pytest.raises(ManagementError) as e:
        node.update({"adminStatus": "disabled"}, "router.link", identity="1")
    assert e.value.status == 501
    tried = []
    for t, listed in ops.items():
        short = t.replace(prefix, "")
        if "UPDATE" not in listed or short == "connection":
            continue  # connection: UPDATE adminStatus=deleted closes one (test_qdmanage)
        rows = node.query_dicts(short, ["name", "identity"])
        if not rows:
            continue
        try:
            node.update({}, short, identity=rows[0]["identity"])
        except ManagementError as err:
            assert err.status != 501, (t, err.description)
        tried.append(short)
    assert {"router", "log"} <= set(tried)
