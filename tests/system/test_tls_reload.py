"""Certificates change without a restart (issue 14 point 6): management CREATE, UPDATE and
DELETE of sslProfile through the real qdmanage (AMQP `$management`, from ../shared/peer) and
through junctionctl (the management socket).  An UPDATE reads the profile's files again and
builds a new TLS context: new clients see the new certificate at once, a connection opened
before goes on with the old one, and a bad new file is refused with an error naming it while
the old certificate stays in force.  A profile made at run time serves a listener made at run
time; a profile a listener names cannot be deleted; QUERY and READ never show a password.

Certificates A and B (different subjects, one CA) are made by the tests with `openssl`; the
subject a client sees is read with Python's ssl module.
"""

import http.client
import json
import os
import shutil
import socket
import ssl
import subprocess
import threading
import time

import pytest
from proton import Delivery, Message, SSLDomain

from conftest import REPO_ROOT, free_port, router_entities
import listener_metrics as lm
import test_tls_clientcert as cc
from wsamqp import WsAmqp
from test_management import junctionctl
from test_tls import make_ca, make_cert, ossl

OPENSSL = shutil.which("openssl")
QDMANAGE = REPO_ROOT.parent / "shared" / "peer" / "bin" / "qdmanage"
PASSWORD = "r3load-pw"

pytestmark = pytest.mark.skipif(OPENSSL is None, reason="the openssl command is not installed")


def make_server_cert(d, name, ca, cn, encrypt=False, rsa=False):
    """A certificate for 127.0.0.1 with subject CN=cn, signed by ca; the key is name.key
    (encrypted with PASSWORD when encrypt; EC, or RSA when rsa)."""
    enc = ["-aes256", "-pass", "pass:" + PASSWORD] if encrypt else []
    alg = (["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"] if rsa else
           ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1"])
    ossl("genpkey", *alg, "-out", name + ".key", *enc, cwd=d)
    pw = ["-passin", "pass:" + PASSWORD] if encrypt else []
    ossl("req", "-new", "-key", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + cn,
         *pw, cwd=d)
    (d / (name + ".ext")).write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    ossl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
         "-CAcreateserial", "-out", name + ".pem", "-days", "2", "-extfile", name + ".ext",
         cwd=d)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("reload-certs")
    make_ca(d, "ca")
    make_server_cert(d, "a", "ca", "Reload-A")
    make_server_cert(d, "b", "ca", "Reload-B")
    make_server_cert(d, "locked", "ca", "Reload-Locked", encrypt=True)
    make_server_cert(d, "rsa", "ca", "Reload-RSA", rsa=True)
    make_ca(d, "otherca")  # a CA that signed nothing of the router's
    return d


def files(certs, which):
    return {"certFile": str(certs / (which + ".pem")),
            "privateKeyFile": str(certs / (which + ".key"))}


def peer_cn(port, certs):
    """The subject CN of the certificate the router shows a new TLS client on port."""
    ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    ctx.check_hostname = False
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        with ctx.wrap_socket(s) as t:
            return dict(x[0] for x in t.getpeercert()["subject"])["commonName"]


def tls_domain(certs):
    dom = SSLDomain(SSLDomain.MODE_CLIENT)
    dom.set_trusted_ca_db(str(certs / "ca.pem"))
    dom.set_peer_authentication(SSLDomain.VERIFY_PEER)
    return dom


@pytest.fixture
def reload_router(make_router, certs, tmp_path):
    """Listeners: 0 TLS only (profile "tls", certificate A), 1 plain (qdmanage); a
    management socket (junctionctl); two workers."""
    sock = tmp_path / "j.sock"
    prof = {"name": "tls", "caCertFile": str(certs / "ca.pem")}
    prof.update(files(certs, "a"))
    r = make_router(router_entities(
        router={"workerThreads": 2},
        listeners=[{"host": "127.0.0.1", "port": "0", "sslProfile": "tls", "requireSsl": True},
                   {"host": "127.0.0.1", "port": "0"}],
        extra=[["sslProfile", prof], ["management", {"socket": str(sock)}]]))
    r.sock = sock
    return r


# ---- the two ways in: each returns (ok, output, error text) ----

class Qdmanage:
    name = "qdmanage"

    def __init__(self, r, listener=1):
        if not QDMANAGE.exists():
            pytest.skip("the reference qdmanage is not in ../shared/peer (%s)" % QDMANAGE)
        self.r = r
        self.listener = listener  # a plain one

    def run(self, *args, stdin=None):
        res = subprocess.run([str(QDMANAGE), "-b", "%s:%d" % self.r.addresses[self.listener]] +
                             [str(a) for a in args], input=stdin,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             timeout=30)
        # qdmanage prints a failure's status and description on stdout
        return res.returncode == 0, res.stdout, res.stderr + res.stdout

    @staticmethod
    def kv(attrs):
        return ["%s=%s" % (k, v) for k, v in attrs.items()]

    def create(self, name, **attrs):
        return self.run("create", "--type", "sslProfile", "name=" + name, *self.kv(attrs))

    def update(self, name, **attrs):
        if not attrs:  # qdmanage wants attributes, or a map on stdin
            return self.run("update", "--type", "sslProfile", "--name", name, "--stdin",
                            stdin="{}")
        return self.run("update", "--type", "sslProfile", "--name", name, *self.kv(attrs))

    def delete(self, name):
        return self.run("delete", "--type", "sslProfile", "--name", name)

    def profiles(self):
        ok, out, err = self.run("query", "--type", "sslProfile")
        assert ok, err
        return {p["name"]: p for p in json.loads(out)}


class Ctl:
    name = "junctionctl"

    def __init__(self, r):
        self.r = r

    def run(self, *args):
        res = junctionctl("-s", self.r.sock, "--json", "sslprofile", *args)
        return res.returncode == 0, res.stdout, res.stderr

    def create(self, name, **attrs):
        return self.run("create", name, *Qdmanage.kv(attrs))

    def update(self, name, **attrs):
        return self.run("update", name, *Qdmanage.kv(attrs))

    def delete(self, name):
        return self.run("delete", name)

    def profiles(self):
        ok, out, err = self.run("list")
        assert ok, err
        return {p["name"]: p for p in json.loads(out)}


@pytest.fixture(params=[Qdmanage, Ctl], ids=["qdmanage", "junctionctl"])
def tool(request):
    return request.param


def messages_flow(client, conn, addr):
    """A message from conn to itself: sent, received, accepted."""
    rcv = conn.receiver(addr, credit=5)
    snd = conn.sender(addr)
    body = "through " + addr
    dlv = snd.send(Message(body=body))
    got = rcv.get()
    assert got.message.body == body
    got.accept()
    assert snd.wait_outcome(dlv) == Delivery.ACCEPTED


def test_update_new_clients_get_the_new_certificate_old_connections_go_on(
        reload_router, certs, client, tool):
    r = reload_router
    m = tool(r)
    port = r.addresses[0][1]
    assert peer_cn(port, certs) == "Reload-A"
    old = client.connect("amqps://127.0.0.1:%d" % port, ssl_domain=tls_domain(certs))
    messages_flow(client, old, "q.before")
    # a raw TLS session that has shaken hands with A and stays open across the UPDATE
    ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    ctx.check_hostname = False
    raw = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10))

    ok, out, err = m.update("tls", **files(certs, "b"))
    assert ok, err
    assert json.loads(out)["certFile"] == str(certs / "b.pem")
    assert peer_cn(port, certs) == "Reload-B"
    assert m.profiles()["tls"]["certFile"] == str(certs / "b.pem")
    # the connections made before go on with certificate A
    messages_flow(client, old, "q.after")
    assert dict(x[0] for x in raw.getpeercert()["subject"])["commonName"] == "Reload-A"
    raw.sendall(b"AMQP\x00\x01\x00\x00")
    assert raw.recv(8) == b"AMQP\x00\x01\x00\x00"
    raw.close()
    assert r.wait_log(r"sslProfile 'tls' updated: new connections use certFile .*b\.pem")

    # an UPDATE without attributes reads the same files again (a certificate renewed in place)
    shutil.copy(certs / "a.pem", r.workdir / "renewed.pem")
    shutil.copy(certs / "a.key", r.workdir / "renewed.key")
    ok, _, err = m.update("tls", certFile=r.workdir / "renewed.pem",
                          privateKeyFile=r.workdir / "renewed.key")
    assert ok, err
    assert peer_cn(port, certs) == "Reload-A"
    shutil.copy(certs / "b.pem", r.workdir / "renewed.pem")
    shutil.copy(certs / "b.key", r.workdir / "renewed.key")
    ok, _, err = m.update("tls")
    assert ok, err
    assert peer_cn(port, certs) == "Reload-B"


def test_bad_update_is_refused_and_the_old_certificate_stays(reload_router, certs, tool):
    r = reload_router
    m = tool(r)
    port = r.addresses[0][1]
    missing = certs / "missing.pem"
    ok, _, err = m.update("tls", certFile=missing, privateKeyFile=certs / "b.key")
    assert not ok
    assert str(missing) in err and "No such file or directory" in err, err
    assert peer_cn(port, certs) == "Reload-A"

    # B's certificate with A's key
    ok, _, err = m.update("tls", certFile=certs / "b.pem", privateKeyFile=certs / "a.key")
    assert not ok
    assert str(certs / "a.key") in err and "does not match" in err, err
    assert peer_cn(port, certs) == "Reload-A"

    # not a certificate at all, an encrypted key without its password, a bad protocol
    ok, _, err = m.update("tls", certFile=certs / "a.ext")
    assert not ok and "not a PEM certificate" in err, err
    ok, _, err = m.update("tls", **files(certs, "locked"))
    assert not ok and "cannot read the private key" in err, err
    ok, _, err = m.update("tls", protocols="TLSv9")
    assert not ok and "unknown protocol 'TLSv9'" in err, err
    ok, _, err = m.update("tls", frobnicate="yes")
    assert not ok and "frobnicate" in err, err
    ok, _, err = m.update("nosuch", **files(certs, "b"))
    assert not ok and "nosuch" in err, err

    assert peer_cn(port, certs) == "Reload-A"
    p = m.profiles()["tls"]
    assert p["certFile"] == str(certs / "a.pem") and p["privateKeyFile"] == str(certs / "a.key")
    # and a good one still works after them
    ok, _, err = m.update("tls", password="pass:" + PASSWORD, **files(certs, "locked"))
    assert ok, err
    assert peer_cn(port, certs) == "Reload-Locked"


def test_created_profile_serves_a_created_listener(reload_router, certs, client, tool):
    r = reload_router
    m = tool(r)
    q = Qdmanage(r)  # listeners are made through $management
    ok, out, err = m.create("made", caCertFile=certs / "ca.pem", **files(certs, "b"))
    assert ok, err
    assert json.loads(out)["certFile"] == str(certs / "b.pem")
    port = free_port()
    ok, out, err = q.run("create", "--type", "listener", "name=l-made", "host=127.0.0.1",
                         "port=%d" % port, "sslProfile=made", "requireSsl=true")
    assert ok, err
    assert r.wait_log(r"Listening on 127\.0\.0\.1:%d" % port)
    assert peer_cn(port, certs) == "Reload-B"
    conn = client.connect("amqps://127.0.0.1:%d" % port, ssl_domain=tls_domain(certs))
    messages_flow(client, conn, "q.made")
    # the first listener's profile is untouched
    assert peer_cn(r.addresses[0][1], certs) == "Reload-A"

    # a listener naming a profile that does not exist, a profile that fails its checks,
    # a second profile of the same name
    ok, _, err = q.run("create", "--type", "listener", "host=127.0.0.1", "port=0",
                       "sslProfile=nosuch")
    assert not ok and "sslProfile 'nosuch'" in err, err
    ok, _, err = m.create("broken", certFile=certs / "missing.pem")
    assert not ok and str(certs / "missing.pem") in err, err
    ok, _, err = m.create("made", **files(certs, "a"))
    assert not ok and "exists already" in err, err
    assert sorted(m.profiles()) == ["made", "tls"]


def test_delete_of_a_profile_in_use_is_refused(reload_router, certs, client, tool):
    r = reload_router
    m = tool(r)
    q = Qdmanage(r)
    port = r.addresses[0][1]
    ok, _, err = m.delete("tls")
    assert not ok and "in use by 1 listener" in err, err
    assert peer_cn(port, certs) == "Reload-A"
    assert "tls" in m.profiles()

    ok, _, err = m.create("spare", **files(certs, "b"))
    assert ok, err
    ok, _, err = m.delete("spare")
    assert ok, err
    assert sorted(m.profiles()) == ["tls"]
    ok, _, err = m.delete("spare")
    assert not ok and "spare" in err, err

    # once its listener is gone the profile may go; the listener's connection goes on
    conn = client.connect("amqps://127.0.0.1:%d" % port, ssl_domain=tls_domain(certs))
    ok, out, err = q.run("query", "--type", "listener")
    assert ok, err
    lname = [l["name"] for l in json.loads(out) if l.get("sslProfile") == "tls"][0]
    ok, _, err = q.run("delete", "--type", "listener", "--name", lname)
    assert ok, err
    ok, _, err = m.delete("tls")
    assert ok, err
    assert m.profiles() == {}
    messages_flow(client, conn, "q.orphan")


def test_query_and_read_never_show_the_password(make_router, certs, tmp_path, tool):
    sock = tmp_path / "j.sock"
    prof = {"name": "locked", "password": PASSWORD}
    prof.update(files(certs, "locked"))
    r = make_router(router_entities(
        listeners=[{"host": "127.0.0.1", "port": "0", "sslProfile": "locked",
                    "requireSsl": True},
                   {"host": "127.0.0.1", "port": "0"}],
        extra=[["sslProfile", prof], ["management", {"socket": str(sock)}]]),
        env=dict(os.environ, RELOAD_PW=PASSWORD))
    r.sock = sock
    m = tool(r)
    assert peer_cn(r.addresses[0][1], certs) == "Reload-Locked"
    p = m.profiles()["locked"]
    assert p.get("password") is None, p
    assert PASSWORD not in json.dumps(p)
    assert p["identity"] == "sslProfile/locked" and p["type"].endswith(".sslProfile")
    q = Qdmanage(r)
    ok, out, err = q.run("read", "--type", "sslProfile", "--name", "locked")
    assert ok, err
    assert PASSWORD not in out and json.loads(out)["password"] is None
    # an UPDATE keeps the password it does not mention; one that only names where the password
    # is shows that
    ok, out, err = m.update("locked", protocols="TLSv1.2 TLSv1.3")
    assert ok, err
    assert PASSWORD not in out
    ok, out, err = m.update("locked", password="env:RELOAD_PW")
    assert ok, err
    assert m.profiles()["locked"]["password"] == "env:RELOAD_PW"
    ok, _, err = m.update("locked", password="wrong-" + PASSWORD)
    assert not ok and "wrong password" in err and PASSWORD not in err, err
    assert peer_cn(r.addresses[0][1], certs) == "Reload-Locked"


def handshakes_while(port, certs, n_threads, flips, flip):
    """flip(0) .. flip(flips - 1), 50 ms apart (each turns the profile to A or B), while
    n_threads threads handshake with `port` again and again: every handshake got one of the
    two whole certificates, and none failed."""
    seen, errors = [], []
    stop = threading.Event()

    def connect_loop():
        while not stop.is_set():
            try:
                seen.append(peer_cn(port, certs))
            except Exception as e:  # noqa: BLE001 - every failure is reported below
                errors.append(repr(e))

    threads = [threading.Thread(target=connect_loop) for _ in range(n_threads)]
    for t in threads:
        t.start()
    try:
        for i in range(flips):
            flip(i)
            time.sleep(0.05)
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    assert not errors, errors[:5]
    assert set(seen) == {"Reload-A", "Reload-B"}, set(seen)


def test_updates_while_clients_connect(reload_router, certs):
    """Handshakes on two workers while the profile flips between A and B: every client gets
    one of the two whole certificates, none fails (the reload path under ThreadSanitizer)."""
    r = reload_router
    port = r.addresses[0][1]

    def flip(i):
        res = junctionctl("-s", r.sock, "sslprofile", "update", "tls",
                          *Qdmanage.kv(files(certs, "ab"[i % 2])))
        assert res.returncode == 0, res.stderr

    handshakes_while(port, certs, 3, 16, flip)
    assert peer_cn(port, certs) == "Reload-B"


@pytest.fixture(scope="module")
def client_certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("reload-clientcerts")
    make_ca(d, "ca")
    make_cert(d, "server", "ca")
    cc.make_client_cert(d, "alice", "ca", cc.ALICE_SUBJ)
    return d


def test_update_of_uid_format_names_new_external_clients(make_router, client_certs, client):
    """The whole profile is replaced: a new uidFormat names the next EXTERNAL client, the one
    connected before keeps the user it was given."""
    r = cc.ext_router(make_router, client_certs)
    dom = cc.domain(client_certs, "alice")
    client.connect("amqps://%s:%d" % r.addresses[0], ssl_domain=dom, allowed_mechs="EXTERNAL")
    assert [row["user"] for row in cc.tls_rows(r)] == [cc.ALICE_DN]
    ok, _, err = Qdmanage(r, listener=2).update("tls", uidFormat="n")
    assert ok, err
    client.connect("amqps://%s:%d" % r.addresses[0], ssl_domain=dom, allowed_mechs="EXTERNAL")
    assert sorted(row["user"] for row in cc.tls_rows(r)) == sorted([cc.ALICE_DN, "alice"])


# ---- https listeners (the admin thread's libwebsockets) ------------------------------------

HTTPS = "https-1"
MIXED = "https-or-http"


@pytest.fixture
def https_router(make_router, certs, tmp_path):
    """Listeners: 0 https with requireSsl named HTTPS (profile "tls", certificate A), 1 plain
    AMQP (qdmanage), 2 plain http (/metrics), 3 https or plain HTTP named MIXED; a management
    socket (junctionctl)."""
    sock = tmp_path / "j.sock"
    prof = {"name": "tls", "caCertFile": str(certs / "ca.pem")}
    prof.update(files(certs, "a"))
    r = make_router(router_entities(
        listeners=[{"name": HTTPS, "host": "127.0.0.1", "port": "0", "http": True,
                    "sslProfile": "tls", "requireSsl": True},
                   {"host": "127.0.0.1", "port": "0"},
                   {"host": "127.0.0.1", "port": "0", "http": True},
                   {"name": MIXED, "host": "127.0.0.1", "port": "0", "http": True,
                    "sslProfile": "tls"}],
        extra=[["sslProfile", prof], ["management", {"socket": str(sock)}]]))
    r.sock = sock
    return r


def https_tls_failed(r):
    """(the https listener's tlsHandshakesFailed, the router's) from /metrics."""
    text = lm.metrics_text(r.addresses[2])
    mine = lm.samples(text, "junction_listener_tls_handshakes_failed_total")
    total = [int(float(line.split()[1])) for line in text.splitlines()
             if line.startswith("junction_tls_handshakes_failed_total ")]
    return mine.get(frozenset({("listener", HTTPS)})), total[0]


def wss_flows(ws, addr):
    """A message from the wss AMQP connection ws to itself: received, accepted."""
    rcv = ws.receiver(addr, credit=5)
    snd = ws.sender(addr)
    dlv = ws.send(snd, Message(body="over wss " + addr))
    assert ws.get(rcv).body == "over wss " + addr
    assert ws.wait_outcome(dlv) == Delivery.ACCEPTED


def test_update_reaches_https_listeners_and_an_open_wss_connection_goes_on(
        https_router, certs, tool):
    r = https_router
    m = tool(r)
    port = r.addresses[0][1]
    assert peer_cn(port, certs) == "Reload-A"
    ws = WsAmqp("localhost", port, sslopt={"ca_certs": str(certs / "ca.pem")},
                container="wss-before").wait_open()
    # accepted before the UPDATE, its handshake after: its session was made with A
    early = socket.create_connection(("127.0.0.1", port), timeout=10)
    try:
        wss_flows(ws, "q.wss-before")
        ok, _, err = m.update("tls", **files(certs, "b"))
        assert ok, err
        assert peer_cn(port, certs) == "Reload-B"  # at once: no waiting for the admin thread
        assert r.wait_log(r"Listener \d+ \(https\): new connections use the updated "
                          r"sslProfile 'tls'")
        # the wss connection made with A goes on
        wss_flows(ws, "q.wss-after")
        ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
        ctx.check_hostname = False
        with ctx.wrap_socket(early) as t:
            assert dict(x[0] for x in t.getpeercert()["subject"])["commonName"] == "Reload-A"
        # a new wss client gets B and works
        ws2 = WsAmqp("localhost", port, sslopt={"ca_certs": str(certs / "ca.pem")},
                     container="wss-after").wait_open()
        try:
            cert = ws2.ws.sock.getpeercert()
            assert dict(x[0] for x in cert["subject"])["commonName"] == "Reload-B"
            wss_flows(ws2, "q.wss-new")
        finally:
            ws2.close()
        # and back to A
        ok, _, err = m.update("tls", **files(certs, "a"))
        assert ok, err
        assert peer_cn(port, certs) == "Reload-A"
        wss_flows(ws, "q.wss-last")
    finally:
        ws.close()
        early.close()
    assert https_tls_failed(r) == (0, 0)


def test_bad_update_leaves_https_on_the_old_certificate(https_router, certs, tool):
    r = https_router
    m = tool(r)
    port = r.addresses[0][1]
    missing = certs / "missing.pem"
    ok, _, err = m.update("tls", certFile=missing, privateKeyFile=certs / "b.key")
    assert not ok and str(missing) in err, err
    ok, _, err = m.update("tls", **files(certs, "locked"))  # no password
    assert not ok, err
    assert peer_cn(port, certs) == "Reload-A"
    assert not [l for l in r.stderr_lines() if "use the updated sslProfile" in l]
    ok, _, err = m.update("tls", **files(certs, "b"))
    assert ok, err
    assert peer_cn(port, certs) == "Reload-B"


def test_update_to_another_key_type_leaves_no_old_certificate(https_router, certs):
    """A context holds a certificate per key type: an RSA certificate after the EC one must
    not leave the EC one to clients that prefer ECDSA (Python's default client does)."""
    r = https_router
    port = r.addresses[0][1]
    for which, cn in (("rsa", "Reload-RSA"), ("b", "Reload-B"), ("rsa", "Reload-RSA")):
        res = junctionctl("-s", r.sock, "sslprofile", "update", "tls",
                          *Qdmanage.kv(files(certs, which)))
        assert res.returncode == 0, res.stderr
        for _ in range(3):
            assert peer_cn(port, certs) == cn


def test_https_handshake_failures_are_counted_and_logged(https_router, certs):
    r = https_router
    port = r.addresses[0][1]
    assert https_tls_failed(r) == (0, 0)
    ports = []
    # a client that does not trust the router's certificate (it aborts with an alert)
    ctx = ssl.create_default_context(cafile=str(certs / "otherca.pem"))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        ports.append(s.getsockname()[1])
        with pytest.raises(ssl.SSLError):
            ctx.wrap_socket(s, server_hostname="localhost")
    # plain HTTP to the requireSsl port, and half a ClientHello then the end of the stream
    for junk in (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
                 b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03"):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            ports.append(s.getsockname()[1])
            try:
                s.sendall(junk)
                s.shutdown(socket.SHUT_WR)
                while s.recv(4096):
                    pass
            except OSError:  # the router closed first
                pass
    # a client that closes before its first byte started no handshake: not counted
    socket.create_connection(("127.0.0.1", port), timeout=10).close()
    deadline = time.monotonic() + 5
    while https_tls_failed(r) != (3, 3) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert https_tls_failed(r) == (3, 3), (ports, [l for l in r.stderr_lines() if "HTTP" in l])
    for p in ports:
        line = r.wait_log(r"connection from 127\.0\.0\.1:%d closed: TLS handshake failed: .* "
                          r"\(listener %s\)" % (p, HTTPS)).group(0)
        assert len([l for l in r.stderr_lines() if "127.0.0.1:%d " % p in l]) == 1, line
    # the router goes on
    assert peer_cn(port, certs) == "Reload-A"
    assert https_tls_failed(r) == (3, 3)
    # plain HTTP where the listener serves it too is no failed handshake
    c = http.client.HTTPConnection(*r.addresses[3], timeout=10)
    try:
        c.request("GET", "/healthz")
        assert c.getresponse().status == 200
    finally:
        c.close()
    text = lm.metrics_text(r.addresses[2])
    assert lm.samples(text, "junction_listener_tls_handshakes_failed_total").get(
        frozenset({("listener", MIXED)})) == 0
    assert https_tls_failed(r) == (3, 3), (ports, [l for l in r.stderr_lines() if "HTTP" in l])


def test_no_session_made_before_an_update_resumes_after_it(https_router, certs):
    """The https listener's session-ticket keys change with the profile: a client cannot
    resume a session of the old certificate (or of the old CAs' verdict) after the UPDATE."""
    r = https_router
    port = r.addresses[0][1]
    ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    ctx.check_hostname = False
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2  # the session is the client's at once

    def connect(session=None):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            with ctx.wrap_socket(s, session=session) as t:
                cn = dict(x[0] for x in t.getpeercert()["subject"])["commonName"]
                return t.session, t.session_reused, cn

    sess, _, cn = connect()
    assert cn == "Reload-A"
    assert connect(sess)[1:] == (True, "Reload-A")  # resumption works
    res = junctionctl("-s", r.sock, "sslprofile", "update", "tls", *Qdmanage.kv(files(certs, "b")))
    assert res.returncode == 0, res.stderr
    _, reused, cn = connect(sess)
    assert (reused, cn) == (False, "Reload-B")


def test_https_clients_while_the_agent_thread_updates(https_router, certs):
    """https handshakes on the admin thread while `$management` UPDATEs (the agent thread)
    flip the profile between A and B: every client gets one whole certificate, none fails,
    and the last UPDATE is what a new client sees (the watch path under ThreadSanitizer)."""
    r = https_router
    m = Qdmanage(r)
    port = r.addresses[0][1]

    def flip(i):
        ok, _, err = m.update("tls", **files(certs, "ba"[i % 2]))
        assert ok, err

    handshakes_while(port, certs, 2, 6, flip)
    assert peer_cn(port, certs) == "Reload-A"
    assert https_tls_failed(r) == (0, 0)
