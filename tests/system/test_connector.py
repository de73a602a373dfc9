"""Connectors: the router's own outgoing AMQP connections (qdrouterd 1.19's `connector`).

The peers are real: a Proton-Python container listening in a child process
(connector_peer.py), which attaches a consumer and a producer over the connection the router
made, and a second junctiond that authenticates the router with SASL PLAIN against a sasldb
(test_sasl.py's fixtures).  Messages go both ways through the router; the connection shows
in management with dir "out"; the router reconnects after the peer restarts (qdrouterd's
delays: 2 s after an open connection, 5 s after a failed attempt) and logs one line per
state change, not one per attempt.  Also what management shows of them as qdrouterd 1.19 does
(each connection's role, the read-only failoverUrls), the openProperties the peer sees in the
router's open, and connectors with an sslProfile made at run time."""

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from proton import Delivery, Message

from clients import Client
from conftest import REPO_ROOT, free_port, run_junctiond, write_config
from mgmt_tool import Node
from test_sasl import PASSWORD, REALM, USER, sasl_dir, auth_router  # noqa: F401
from test_tls import certs, make_ca, ossl, profile  # noqa: F401

PEER = Path(__file__).resolve().parent / "connector_peer.py"
QDSTAT = REPO_ROOT.parent / "shared" / "peer" / "bin" / "qdstat"
IN_ADDR = "closest.to-peer"    # the peer's consumer
OUT_ADDR = "closest.from-peer"  # the peer's producer


class Peer:
    """connector_peer.py on 127.0.0.1:port; its stdout lines in self.lines."""

    def __init__(self, port, failover=None):
        self.port = port
        self.failover = failover
        self.proc = None
        self.lines = []
        self.cv = threading.Condition()

    def start(self):
        args = [str(self.port), IN_ADDR, OUT_ADDR] + ([str(self.failover)] if self.failover
                                                      else [])
        self.proc = subprocess.Popen(["/usr/bin/python3", str(PEER)] + args,
                                     stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        threading.Thread(target=self._read, args=(self.proc,), daemon=True).start()
        self.wait_line("LISTENING", start=len(self.lines))
        return self

    def _read(self, proc):
        for line in proc.stdout:
            with self.cv:
                self.lines.append(line.strip())
                self.cv.notify_all()

    def wait_line(self, prefix, timeout=15.0, start=0):
        deadline = time.monotonic() + timeout
        with self.cv:
            while True:
                for line in self.lines[start:]:
                    if line.startswith(prefix):
                        return line
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("peer: no %r line in %r" % (prefix, self.lines))
                self.cv.wait(left)

    def send(self):
        self.proc.stdin.write("SEND\n")
        self.proc.stdin.flush()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def peer():
    p = Peer(free_port())
    yield p
    p.stop()


def connector(port, **kw):
    c = {"name": "to-peer", "host": "127.0.0.1", "port": str(port), "role": "normal"}
    c.update(kw)
    return ["connector", c]


def test_messages_flow_both_ways_through_a_connector(make_router, peer):
    peer.start()
    r = make_router(extra=[connector(peer.port, idleTimeoutSeconds=8, maxFrameSize=4096,
                                     maxSessions=5, linkCapacity=7)])
    assert peer.wait_line("OPENED").split()[1] == "JTest"
    # the connector's maxFrameSize, maxSessions (channel-max: the highest channel number)
    # and idleTimeoutSeconds are in the router's open (Proton's engine announces half the
    # idle timeout it enforces)
    assert peer.wait_line("LIMITS").split()[1:] == ["4096", "4", "4000"]
    r.wait_log(r"Connection to 127\.0\.0\.1:%d opened \(connector to-peer" % peer.port)
    c = Client()
    try:
        conn = c.connect(r.url)
        rcv = conn.receiver(OUT_ADDR, settle="accept")
        snd = conn.sender(IN_ADDR)
        # client on the router -> the peer's consumer, accepted end to end
        dlv = snd.send(Message(body="to-the-peer"))
        assert snd.wait_outcome(dlv) == Delivery.ACCEPTED
        assert peer.wait_line("RECEIVED") == "RECEIVED to-the-peer"
        # the peer's producer -> client on the router
        peer.send()
        assert rcv.get().body == "from-peer-1"
        # the client's accept reaches the peer through the router
        c.wait(lambda: "SENT 1 ACCEPTED" in peer.lines, 10, "the peer's outcome")
        # the peer's links over the connection have the connector's linkCapacity
        n = Node(r.url)
        try:
            out = [x["identity"] for x in n.query_dicts("connection") if x.get("dir") == "out"]
            links = [x for x in n.query_dicts("router.link") if x["connectionId"] in out]
            assert sorted(x["linkDir"] for x in links) == ["in", "out"], links
            assert {x["capacity"] for x in links} == {7}, links
        finally:
            n.close()
    finally:
        c.close()


def test_the_outgoing_connection_shows_with_dir_out(make_router, peer):
    peer.start()
    r = make_router(extra=[connector(peer.port)])
    peer.wait_line("OPENED")
    n = Node(r.url)
    try:
        deadline = time.monotonic() + 10
        while True:
            rows = [x for x in n.query_dicts("connection") if x.get("dir") == "out"]
            if rows or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert len(rows) == 1, rows
        assert rows[0]["host"] == "127.0.0.1:%d" % peer.port
        assert rows[0]["opened"] is True
        # the connector entity, with qdrouterd 1.19's live columns
        cts = n.query_dicts("connector")
        assert len(cts) == 1, cts
        assert cts[0]["name"] == "to-peer" and cts[0]["port"] == str(peer.port)
        assert cts[0]["connectionStatus"] == "SUCCESS" and cts[0]["connectionMsg"] == ""
        assert "saslPassword" not in cts[0]
        one = n.read(type="connector", name="to-peer")
        assert one["connectionStatus"] == "SUCCESS"
    finally:
        n.close()
    if QDSTAT.exists():
        out = subprocess.run([str(QDSTAT), "-c", "-b", r.url], capture_output=True, text=True,
                             timeout=30, env=dict(os.environ, PYTHONPATH=""))
        assert out.returncode == 0, out.stderr
        line = [x for x in out.stdout.splitlines() if "127.0.0.1:%d" % peer.port in x]
        assert len(line) == 1 and " out " in line[0], out.stdout


def qdstat_rows(args, url):
    """The real qdstat's table (-c, -l ...) as dicts by its header, or None without it."""
    if not QDSTAT.exists():
        return None
    out = subprocess.run([str(QDSTAT)] + list(args) + ["-b", url], capture_output=True,
                         text=True, timeout=30, env=dict(os.environ, PYTHONPATH=""))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    head = next(i for i, x in enumerate(lines) if x.strip().startswith("===="))
    # the header's names (words one space apart) start their columns, values left-aligned
    cols = [(m.start(), m.group()) for m in re.finditer(r"\S+(?: \S+)*", lines[head - 1])]
    rows = []
    for line in lines[head + 1:]:
        if not line.strip():
            break
        rows.append({name: line[a:cols[k + 1][0] if k + 1 < len(cols) else None].strip()
                     for k, (a, name) in enumerate(cols)})
    return rows


def test_connection_rows_show_the_role_of_their_listener_or_connector(make_router, peer):
    # a route-container connector, a route-container listener and a normal one: each
    # connection's row says which (qdrouterd's `role`); the roles Junction does not have
    # (inter-router, edge) are never claimed
    peer.start()
    r = make_router(listeners=[{"host": "127.0.0.1", "port": "0"},
                               {"host": "127.0.0.1", "port": "0", "role": "route-container"}],
                    extra=[connector(peer.port, role="route-container")])
    peer.wait_line("OPENED")
    rc_client, plain_client = Client(), Client()
    n = Node(r.url)
    try:
        rc_client.connect(r.url_of(1))
        plain_client.connect(r.url)
        want = {rc_client.container.container_id: ("in", "route-container"),
                plain_client.container.container_id: ("in", "normal")}
        deadline = time.monotonic() + 10
        while True:
            rows = n.query_dicts("connection")
            out = [x for x in rows if x["dir"] == "out"]
            if out or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert len(out) == 1 and out[0]["role"] == "route-container", out
        got = {x["container"]: (x["dir"], x["role"]) for x in rows if x["container"] in want}
        assert got == want, rows
        assert {x["role"] for x in rows} == {"normal", "route-container"}, rows
        # the real qdstat -c: its role column, from the same rows
        table = qdstat_rows(["-c"], r.url)
        if table is not None:
            by_container = {x["container"]: x for x in table}
            assert by_container[rc_client.container.container_id]["role"] == "route-container"
            assert by_container[plain_client.container.container_id]["role"] == "normal"
            outs = [x for x in table if x["dir"] == "out"]
            assert [x["role"] for x in outs] == ["route-container"], table
            assert not [x for x in table if x["role"] in ("inter-router", "edge")], table
    finally:
        n.close()
        rc_client.close()
        plain_client.close()


OPEN_PROPS = {"app": "billing", "n": 7, "big": 5000000000, "f": 2.5, "ok": True,
              "nothing": None, "list": [1, "a"], "map": {"k": "v"},
              "scheme": "s", "hostname": "h"}  # the two 1.19 lets through (docs/brokers.md)


def props_seen(peer, start=0):
    import json
    return json.loads(peer.wait_line("PROPERTIES", start=start).split(" ", 1)[1])


def test_open_properties_follow_the_routers_own(make_router, peer):
    # qdrouterd 1.19: the router's properties (product, version), then the connector's
    # openProperties, keys as symbols, values as their JSON types map to AMQP
    peer.start()
    make_router(extra=[connector(peer.port, openProperties=OPEN_PROPS)])
    seen = props_seen(peer)
    assert [k for _, k, _, _ in seen] == ["product", "version"] + list(OPEN_PROPS), seen
    assert all(kt == "symbol" for kt, _, _, _ in seen), seen
    assert seen[0][3] == "junction"
    got = {k: (vt, v) for _, k, vt, v in seen[2:]}
    assert got == {"app": ("str", "billing"), "n": ("int32", 7), "big": ("int", 5000000000),
                   "f": ("float", 2.5), "ok": ("bool", True), "nothing": ("NoneType", None),
                   "list": ("list", [1, "a"]), "map": ("dict", {"k": "v"}),
                   "scheme": ("str", "s"), "hostname": ("str", "h")}, seen


@pytest.mark.deadline(60)
def test_open_properties_of_a_connector_made_at_run_time(make_router, peer):
    peer.start()
    r = make_router()
    n = Node(r.url)
    try:
        # a reserved key: a 400 naming it, and nothing made
        with pytest.raises(Exception, match="reserved key 'qd.conn-id'"):
            n.create({"host": "127.0.0.1", "port": str(peer.port),
                      "openProperties": {"qd.conn-id": 1}}, "connector", "bad")
        # failoverUrls is read-only: refused in a CREATE, as qdrouterd 1.19 does
        with pytest.raises(Exception, match="failoverUrls"):
            n.create({"host": "127.0.0.1", "port": str(peer.port),
                      "failoverUrls": "amqp://127.0.0.1:1"}, "connector", "bad")
        assert n.query_dicts("connector") == []
        n.create({"host": "127.0.0.1", "port": str(peer.port),
                  "openProperties": {"region": "eu", "tier": 3}}, "connector", "made")
        seen = props_seen(peer)
        assert [(k, v) for _, k, _, v in seen[2:]] == [("region", "eu"), ("tier", 3)], seen
    finally:
        n.close()


@pytest.mark.deadline(60)
def test_failover_urls_show_the_list_in_use(make_router):
    # qdrouterd 1.19's connector failoverUrls is read-only: the configured address, then
    # the ones the peer announced, the current one first; in a file it is ignored (a
    # warning here)
    b = Peer(free_port())
    a = Peer(free_port(), failover=b.port)
    try:
        a.start()
        r = make_router(extra=[connector(a.port, failoverUrls="amqp://127.0.0.1:1")])
        a.wait_line("OPENED")
        r.wait_log(r"attribute 'failoverUrls' of a connector is read-only")
        n = Node(r.url)
        try:
            deadline = time.monotonic() + 10
            while True:
                urls = n.read(type="connector", name="to-peer")["failoverUrls"]
                if "," in urls or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert urls == "amqp://127.0.0.1:%d, amqp://127.0.0.1:%d" % (a.port, b.port), urls
            a.stop()
            b.start()
            b.wait_line("OPENED", timeout=15)
            deadline = time.monotonic() + 10
            while True:
                urls = n.read(type="connector", name="to-peer")["failoverUrls"]
                if urls.startswith("amqp://127.0.0.1:%d" % b.port) or \
                        time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            assert urls == "amqp://127.0.0.1:%d, amqp://127.0.0.1:%d" % (b.port, a.port), urls
        finally:
            n.close()
    finally:
        a.stop()
        b.stop()


@pytest.mark.deadline(90)
def test_a_connector_to_nowhere_retries_quietly_then_connects_and_reconnects(make_router, peer):
    # nothing listens yet: attempts at 0 s, 5 s, 10 s... and one line
    r = make_router(extra=[connector(peer.port)])
    r.wait_log(r"Connection to 127\.0\.0\.1:%d failed" % peer.port)
    time.sleep(11)
    failed = [x for x in r.stderr_lines() if "Connection to 127.0.0.1:%d failed" % peer.port in x]
    assert len(failed) == 1, failed
    n = Node(r.url)
    try:
        ct = n.query_dicts("connector")[0]
        assert ct["connectionStatus"] == "FAILED", ct
        assert "connection refused" in ct["connectionMsg"], ct
    finally:
        n.close()
    # the peer comes: the next attempt opens the connection
    peer.start()
    peer.wait_line("OPENED", timeout=10)
    r.wait_log(r"Connection to 127\.0\.0\.1:%d opened" % peer.port, timeout=10)
    # the peer goes and comes back: the router connects again, with the links on it
    mark = len(peer.lines)
    peer.stop()
    time.sleep(1)
    peer.start()
    peer.wait_line("OPENED", timeout=15, start=mark)
    deadline = time.monotonic() + 5
    while True:
        opened = [x for x in r.stderr_lines()
                  if "Connection to 127.0.0.1:%d opened" % peer.port in x]
        if len(opened) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(opened) == 2, opened
    c = Client()
    try:
        conn = c.connect(r.url)
        snd = conn.sender(IN_ADDR)
        dlv = snd.send(Message(body="after-restart"))
        assert snd.wait_outcome(dlv) == Delivery.ACCEPTED
        assert peer.wait_line("RECEIVED", start=mark) == "RECEIVED after-restart"
    finally:
        c.close()


@pytest.mark.deadline(60)
def test_failover_to_the_address_the_peer_announced(make_router):
    # peer A announces B in its open (qdrouterd's failover-server-list); A goes, B comes
    b = Peer(free_port())
    a = Peer(free_port(), failover=b.port)
    try:
        a.start()
        r = make_router(extra=[connector(a.port)])
        a.wait_line("OPENED")
        r.wait_log(r"Connection to 127\.0\.0\.1:%d opened" % a.port, timeout=10)
        a.stop()
        b.start()
        assert b.wait_line("OPENED", timeout=15).split()[1] == "JTest"
        r.wait_log(r"Connection to 127\.0\.0\.1:%d opened" % b.port, timeout=10)
        # messages flow over the failover connection
        c = Client()
        try:
            conn = c.connect(r.url)
            snd = conn.sender(IN_ADDR)
            dlv = snd.send(Message(body="via-failover"))
            assert snd.wait_outcome(dlv) == Delivery.ACCEPTED
            assert b.wait_line("RECEIVED") == "RECEIVED via-failover"
        finally:
            c.close()
    finally:
        a.stop()
        b.stop()


QDMANAGE = REPO_ROOT.parent / "shared" / "peer" / "bin" / "qdmanage"


def qdmanage(r, *args):
    if QDMANAGE.exists():
        res = subprocess.run([str(QDMANAGE), "-b", r.url] + [str(a) for a in args],
                             capture_output=True, text=True, timeout=30)
        return res.returncode, res.stdout + res.stderr
    return None, None


@pytest.mark.deadline(60)
def test_connector_create_and_delete_at_run_time(make_router, peer):
    peer.start()
    r = make_router()
    n = Node(r.url)
    try:
        assert n.query_dicts("connector") == []
        # CREATE: the router connects at once (qdmanage when the reference one is here)
        rc, out = qdmanage(r, "create", "--type=connector", "--name=made", "host=127.0.0.1",
                           "port=%d" % peer.port, "role=route-container")
        if rc is None:
            n.create({"host": "127.0.0.1", "port": str(peer.port), "role": "route-container"},
                     "connector", "made")
        else:
            assert rc == 0, out
        assert peer.wait_line("OPENED", timeout=10).split()[1] == "JTest"
        r.wait_log(r"Connection to 127\.0\.0\.1:%d opened \(connector made" % peer.port)
        ct = n.read(type="connector", name="made")
        assert ct["role"] == "route-container" and ct["connectionStatus"] == "SUCCESS", ct
        rows = [x for x in n.query_dicts("connection") if x.get("dir") == "out"]
        assert len(rows) == 1, rows
        # a duplicate name and a bad attribute are refused, and change nothing
        with pytest.raises(Exception):
            n.create({"host": "127.0.0.1", "port": str(peer.port)}, "connector", "made")
        with pytest.raises(Exception):
            n.create({"host": "127.0.0.1", "port": "1", "role": "spoke"}, "connector", "x")
        assert [x["name"] for x in n.query_dicts("connector")] == ["made"]
        # DELETE closes the connection, and the router does not come back
        mark = len(peer.lines)
        rc, out = qdmanage(r, "delete", "--type=connector", "--name=made")
        if rc is None:
            n.delete(type="connector", name="made")
        else:
            assert rc == 0, out
        peer.wait_line("DISCONNECTED", timeout=10, start=mark)
        time.sleep(3)  # past the 2 s a lost connection would wait
        assert not [x for x in peer.lines[mark:] if x.startswith("OPENED")], peer.lines
        assert n.query_dicts("connector") == []
        assert [x for x in n.query_dicts("connection") if x.get("dir") == "out"] == []
    finally:
        n.close()


def test_sasl_plain_to_a_junction_with_a_sasldb(make_router, sasl_dir):  # noqa: F811
    far = auth_router(make_router, sasl_dir)
    near = make_router(name="near", extra=[connector(
        far.port, saslMechanisms="PLAIN", saslUsername=USER, saslPassword="env:CONN_TEST_PW")],
        env=dict(os.environ, CONN_TEST_PW=PASSWORD))
    near.wait_log(r"Connection to 127\.0\.0\.1:%d opened" % far.port, timeout=10)
    n = Node(far.url_of(1))
    try:
        rows = [x for x in n.query_dicts("connection") if x.get("container") == "JTest"]
        assert len(rows) == 1, rows
        assert rows[0]["user"] == USER and rows[0]["sasl"] == "PLAIN", rows[0]
    finally:
        n.close()


def test_a_wrong_password_fails_once_in_the_log(make_router, sasl_dir):  # noqa: F811
    far = auth_router(make_router, sasl_dir)
    near = make_router(name="near", extra=[connector(
        far.port, saslMechanisms="PLAIN", saslUsername=USER, saslPassword="pass:wrong")])
    near.wait_log(r"Connection to 127\.0\.0\.1:%d failed" % far.port, timeout=10)
    time.sleep(6)  # a second attempt fails the same way: no second line
    failed = [x for x in near.stderr_lines()
              if "Connection to 127.0.0.1:%d failed" % far.port in x]
    assert len(failed) == 1, failed
    assert "wrong" not in near.stderr_text()


def make_named_cert(d, name, ca, san):
    """A server certificate of `ca` whose only name is `san` (an openssl subjectAltName)."""
    ossl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-out", name + ".key", cwd=d)
    ossl("req", "-new", "-key", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + name,
         cwd=d)
    (d / (name + ".ext")).write_text("subjectAltName=%s\n" % san)
    ossl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
         "-CAcreateserial", "-out", name + ".pem", "-days", "2", "-extfile", name + ".ext",
         cwd=d)


def tls_far(make_router, certs, server="server"):  # noqa: F811
    """A junctiond whose listener 0 requires TLS with certificate `server`, 1 is plain."""
    return make_router(name="far", listeners=[
        {"host": "127.0.0.1", "port": "0", "sslProfile": "srv", "requireSsl": True},
        {"host": "127.0.0.1", "port": "0"}],
        extra=[["sslProfile", {"name": "srv", "certFile": str(certs / (server + ".pem")),
                               "privateKeyFile": str(certs / (server + ".key"))}]])


def client_profile(certs):  # noqa: F811
    return ["sslProfile", {"name": "cli", "caCertFile": str(certs / "ca.pem")}]


def far_tls_connections(far):
    n = Node(far.url_of(1))
    try:
        return [x for x in n.query_dicts("connection") if x.get("container") == "JTest"]
    finally:
        n.close()


def test_tls_with_verify_hostname(make_router, certs):  # noqa: F811
    far = tls_far(make_router, certs)
    near = make_router(name="near", extra=[client_profile(certs), connector(
        far.port, host="localhost", sslProfile="cli", verifyHostname=True)])
    near.wait_log(r"Connection to [^ ]+ opened \(connector to-peer", timeout=10)
    rows = far_tls_connections(far)
    assert len(rows) == 1 and rows[0]["isEncrypted"] is True, rows
    assert rows[0]["sslProto"].startswith("TLS"), rows[0]


def test_tls_refused_when_the_certificate_names_another_host(make_router, certs, tmp_path):  # noqa: F811,E501
    make_named_cert(certs, "elsewhere", "ca", "DNS:elsewhere.example")
    far = tls_far(make_router, certs, server="elsewhere")
    near = make_router(name="near", extra=[client_profile(certs), connector(
        far.port, sslProfile="cli")])
    near.wait_log(r"Connection to 127\.0\.0\.1:%d failed: TLS handshake" % far.port, timeout=10)
    time.sleep(6)  # the next attempt fails the same way: still one line
    failed = [x for x in near.stderr_lines() if "Connection to 127.0.0.1:%d failed" % far.port in x]
    assert len(failed) == 1, failed
    assert far_tls_connections(far) == []
    # verifyHostname: false takes the certificate (its CA still checked)
    other = make_router(name="other", extra=[client_profile(certs), connector(
        far.port, sslProfile="cli", verifyHostname=False)])
    other.wait_log(r"Connection to 127\.0\.0\.1:%d opened" % far.port, timeout=10)


@pytest.mark.deadline(60)
def test_connector_with_an_ssl_profile_created_at_run_time(make_router, certs):  # noqa: F811
    # the profile itself is made at run time too, so nothing at start-up gave it a client
    # context: the connector's CREATE does; the profile stays while the connector names it
    far = tls_far(make_router, certs)
    near = make_router(name="near")
    n = Node(near.url)
    try:
        n.create({"caCertFile": str(certs / "ca.pem")}, "sslProfile", "cli")
        # a profile that does not exist: a 400 that names it, and no connector
        with pytest.raises(Exception, match="sslProfile 'nope': no sslProfile entity"):
            n.create({"host": "localhost", "port": str(far.port), "sslProfile": "nope"},
                     "connector", "bad")
        rc, out = qdmanage(near, "create", "--type=connector", "--name=made", "host=localhost",
                           "port=%d" % far.port, "sslProfile=cli", "verifyHostname=true")
        if rc is None:
            n.create({"host": "localhost", "port": str(far.port), "sslProfile": "cli",
                      "verifyHostname": True}, "connector", "made")
        else:
            assert rc == 0, out
        near.wait_log(r"Connection to [^ ]+ opened \(connector made", timeout=10)
        rows = far_tls_connections(far)
        assert len(rows) == 1 and rows[0]["isEncrypted"] is True, rows
        assert rows[0]["sslProto"].startswith("TLS"), rows[0]
        assert [x["name"] for x in n.query_dicts("connector")] == ["made"]
        made = n.read(type="connector", name="made")
        assert made["sslProfile"] == "cli", made
        assert made["failoverUrls"] == "amqps://localhost:%d" % far.port, made
        # the profile is in use: DELETE refused until the connector goes
        with pytest.raises(Exception, match="in use by 0 listeners and 1 connector"):
            n.delete(type="sslProfile", name="cli")
        n.delete(type="connector", name="made")
        n.delete(type="sslProfile", name="cli")
    finally:
        n.close()


@pytest.mark.parametrize("attrs,want", [
    ({"role": "edge", "openProperties": {"x": 1}}, "openProperties not allowed for role edge"),
    ({"role": "inter-router", "openProperties": {"x": 1}},
     "openProperties not allowed for role inter-router"),
    ({"role": "spoke"}, "expected one of normal, inter-router, route-container, edge"),
    ({"sslProfile": "p"}, "sslProfile 'p': no sslProfile entity has that name"),
    ({"openProperties": {"product": "x"}}, "reserved key 'product' not allowed"),
    ({"openProperties": {"x-opt-qd.trace": 1}}, "reserved key 'x-opt-qd.trace' not allowed"),
    ({"openProperties": {"caf\u00e9": 1}}, "its keys must be ASCII"),
    ({"openProperties": [1]}, "expected a map"),
    ({"saslPassword": "x"}, "without a saslUsername"),
    ({"saslMechanisms": "SCRAM-SHA-256"}, "other than ANONYMOUS, PLAIN and EXTERNAL"),
    ({"port": "0"}, "attribute 'port'"),
    ({"connectionStatus": "SUCCESS"}, "connectionStatus in a file"),
    ({"saslUsername": "u", "saslPassword": "env:JUNCTION_NO_SUCH_VAR"}, "saslPassword"),
])
def test_bad_connectors_are_refused_with_one_line(tmp_path, attrs, want):
    c = {"host": "127.0.0.1", "port": "5999"}
    c.update(attrs)
    cfg = write_config(tmp_path / "c.json", [["router", {"id": "R"}], ["connector", c]])
    p = run_junctiond(["-c", cfg, "--check"] if False else ["-c", cfg])
    assert p.returncode != 0
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and want in lines[0], p.stderr
