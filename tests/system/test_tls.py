"""TLS on listeners (issue 14 point 1, docs/decisions/0005): an sslProfile's certificate, key,
password, CA list, ciphers and protocols; requireSsl; a listener without requireSsl serving
TLS and plain clients by the first byte; handshakes that fail; the start-up errors; and the
connection rows' isEncrypted, sslProto, sslCipher, sslSsf (with the real qdstat when
../shared/peer is there).

The certificates are made by the tests with `openssl` (a CA, a server certificate for
127.0.0.1 and localhost, a second CA that signed nothing of the router's); nothing is
committed.  Clients: Proton-Python over TLS (proton.SSLDomain) and `openssl s_client`.
"""

import http.client
import os
import shutil
import socket
import ssl
import subprocess
import time

import pytest
from proton import Delivery, Message, SSLDomain

import listener_metrics as lm
import test_conn_budget as cb
from clients import check_router_works
from conftest import REPO_ROOT, router_entities, run_junctiond
from mgmt_tool import Node

OPENSSL = shutil.which("openssl")
PEER_BIN = REPO_ROOT.parent / "shared" / "peer" / "bin"
PASSWORD = "s3cret-pw"

pytestmark = pytest.mark.skipif(OPENSSL is None, reason="the openssl command is not installed")


def ossl(*args, cwd):
    res = subprocess.run([OPENSSL] + [str(a) for a in args], cwd=cwd, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    assert res.returncode == 0, "openssl %s: %s" % (" ".join(map(str, args)), res.stderr)


def make_ca(d, name):
    ossl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", name + ".key", "-out", name + ".pem", "-days", "2", "-subj", "/CN=" + name,
         cwd=d)


def make_cert(d, name, ca, key_args=()):
    ossl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-out", name + ".key", *key_args, cwd=d)
    pw = ["-passin", "pass:" + PASSWORD] if key_args else []
    ossl("req", "-new", "-key", name + ".key", "-out", name + ".csr", "-subj", "/CN=localhost",
         *pw, cwd=d)
    (d / (name + ".ext")).write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    ossl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
         "-CAcreateserial", "-out", name + ".pem", "-days", "2", "-extfile", name + ".ext", cwd=d)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    make_ca(d, "ca")
    make_ca(d, "otherca")
    make_cert(d, "server", "ca")
    make_cert(d, "client", "ca")
    make_cert(d, "locked", "ca", key_args=("-aes256", "-pass", "pass:" + PASSWORD))
    return d


def profile(certs, name="tls", **kw):
    p = {"name": name, "certFile": str(certs / "server.pem"),
         "privateKeyFile": str(certs / "server.key"), "caCertFile": str(certs / "ca.pem")}
    p.update(kw)
    return ["sslProfile", p]


def tls_router(make_router, certs, prof=None, **kw):
    """Listeners: 0 requireSsl, 1 TLS or plain, 2 plain, 3 http (/metrics)."""
    return make_router(router_entities(listeners=[
        {"host": "127.0.0.1", "port": "0", "sslProfile": "tls", "requireSsl": True},
        {"host": "127.0.0.1", "port": "0", "sslProfile": "tls"},
        {"host": "127.0.0.1", "port": "0"},
        {"host": "127.0.0.1", "port": "0", "http": True}], extra=[prof or profile(certs, **kw)]))


def listener_name(i):
    """The name (and stats label) of listener i of a router whose listeners all have port 0."""
    return "listener/127.0.0.1:0:%d" % (i + 1)


def listener_tls_failed(r, i, want):
    """Listener i's tlsHandshakesFailed from /metrics (listener 3), once it is `want` (or
    after lm.wait_value's timeout: give the value expected, or every read waits it out)."""
    return lm.wait_value(lambda: lm.lstat(r.addresses[3], listener_name(i),
                                          "tls_handshakes_failed"), want)


def tls_failed(r):
    """The router's tlsHandshakesFailed, from /metrics."""
    c = http.client.HTTPConnection(*r.addresses[3], timeout=10)
    try:
        c.request("GET", "/metrics")
        body = c.getresponse().read().decode()
    finally:
        c.close()
    for line in body.splitlines():
        if line.startswith("junction_tls_handshakes_failed_total "):
            return int(float(line.split()[1]))
    raise AssertionError("no junction_tls_handshakes_failed_total in /metrics")


def tls_domain(certs, ca="ca.pem"):
    dom = SSLDomain(SSLDomain.MODE_CLIENT)
    dom.set_trusted_ca_db(str(certs / ca))
    dom.set_peer_authentication(SSLDomain.VERIFY_PEER)
    return dom


def amqps(r, i):
    return "amqps://%s:%d" % r.addresses[i]


def route_both_ways(client, tls_conn, plain_conn, sizes=(10, 70000, 300000)):
    """Messages from the TLS client to the plain one and back, every byte checked."""
    for src, dst, addr in ((tls_conn, plain_conn, "q.tls-to-plain"),
                           (plain_conn, tls_conn, "q.plain-to-tls")):
        rcv = dst.receiver(addr, credit=20)
        snd = src.sender(addr)
        for n in sizes:
            body = (addr + "/%d/" % n) * (n // 20 + 1)
            dlv = snd.send(Message(body=body))
            got = rcv.get()
            assert got.message.body == body
            got.accept()
            assert snd.wait_outcome(dlv) == Delivery.ACCEPTED


def test_tls_client_routes_to_plain_client_and_back(make_router, certs, client):
    r = tls_router(make_router, certs)
    tls_conn = client.connect(amqps(r, 0), ssl_domain=tls_domain(certs))
    plain_conn = client.connect(r.url_of(2))
    route_both_ways(client, tls_conn, plain_conn)


def test_listener_without_require_ssl_serves_tls_and_plain(make_router, certs, client):
    r = tls_router(make_router, certs)
    tls_conn = client.connect(amqps(r, 1), ssl_domain=tls_domain(certs))
    plain_conn = client.connect(r.url_of(1))
    route_both_ways(client, tls_conn, plain_conn)


def test_require_ssl_refuses_a_plain_client(make_router, certs, client):
    r = tls_router(make_router, certs)
    conn = client.connect(r.url_of(0), wait=False)
    client.wait(lambda: conn.transport_closed, msg="the router to close the plain connection")
    r.wait_log(r"Connection from 127\.0\.0\.1:\d+ closed: not a TLS handshake")
    assert not (conn.pn.state & conn.pn.REMOTE_ACTIVE)
    assert tls_failed(r) == 1
    assert listener_tls_failed(r, 0, 1) == 1
    # and garbage too; the router goes on
    with socket.create_connection(r.addresses[0], timeout=5) as s:
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        assert s.recv(100) == b""
    assert listener_tls_failed(r, 0, 2) == 2 and tls_failed(r) == 2
    lines = [l for l in r.stderr_lines() if "closed: not a TLS handshake" in l]
    assert len(lines) == 2 and all("(listener %s)" % listener_name(0) in l for l in lines)
    assert listener_tls_failed(r, 1, 0) == 0
    ok = client.connect(amqps(r, 0), ssl_domain=tls_domain(certs))
    ok.sender("q.after")


def s_client(r, i, *args, data=b""):
    host, port = r.addresses[i]
    res = subprocess.run([OPENSSL, "s_client", "-connect", "%s:%d" % (host, port), "-brief",
                          "-verify_return_error"] + [str(a) for a in args],
                         input=data, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         timeout=30)
    return res.returncode, res.stdout.decode(errors="replace")


def test_s_client_handshakes(make_router, certs):
    r = tls_router(make_router, certs, protocols="TLSv1.3")
    rc, out = s_client(r, 0, "-CAfile", certs / "ca.pem")
    assert rc == 0 and "TLSv1.3" in out, out
    assert tls_failed(r) == 0
    # the client does not trust the router's CA: its handshake fails, the router goes on
    rc, out = s_client(r, 0, "-CAfile", certs / "otherca.pem")
    assert rc != 0 and "verify" in out.lower(), out
    r.wait_log(r"Connection from 127\.0\.0\.1:\d+ closed: TLS handshake failed")
    # protocols TLSv1.3: a TLSv1.2 client is refused
    rc, out = s_client(r, 1, "-CAfile", certs / "ca.pem", "-tls1_2")
    assert rc != 0, out
    assert r.wait_log(r"closed: TLS handshake failed: .*(protocol|version)")
    # a ClientHello to a plain listener: that connection closes
    rc, out = s_client(r, 2, "-CAfile", certs / "ca.pem")
    assert rc != 0, out
    assert r.is_running()
    r.wait_log(r"closed: not an AMQP protocol header but a TLS handshake, and the listener has "
               r"no sslProfile \(listener %s\)" % listener_name(2))
    assert lm.wait_value(lambda: lm.lstat(r.addresses[3], listener_name(2),
                                          "bad_protocol_headers"), 1) == 1
    rc, out = s_client(r, 1, "-CAfile", certs / "ca.pem")
    assert rc == 0 and "TLSv1.3" in out, out
    assert tls_failed(r) == 2  # the client that did not trust the router, the TLSv1.2 one
    # each on its listener; a plain listener has no TLS to fail
    assert [listener_tls_failed(r, i, n) for i, n in enumerate([1, 1, 0])] == [1, 1, 0]


def test_a_handshake_that_stops_halfway_times_out(make_router, certs):
    r = make_router(router_entities(listeners=[
        {"host": "127.0.0.1", "port": "0", "sslProfile": "tls", "requireSsl": True,
         "initialHandshakeTimeoutSeconds": 1},
        {"host": "127.0.0.1", "port": "0", "http": True}], extra=[profile(certs)]))
    with socket.create_connection(r.addresses[0], timeout=10) as s:
        s.sendall(b"\x16\x03\x01\x02\x00\x01\x00")  # the start of a ClientHello, no more
        t0 = time.monotonic()
        while s.recv(4096):
            pass
        assert time.monotonic() - t0 < 8
    r.wait_log(r"no AMQP open within 1 seconds: TLS handshake not done \(listener %s\)"
               % listener_name(0))
    assert lm.wait_value(lambda: lm.lstat(r.addresses[1], listener_name(0),
                                          "tls_handshakes_failed"), 1) == 1


def test_encrypted_key_with_each_password_form(make_router, certs, client, tmp_path):
    pwfile = tmp_path / "pw"
    pwfile.write_text(PASSWORD + "\n")
    env = dict(os.environ, JN_TLS_PW=PASSWORD)
    for pw in (PASSWORD, "pass:" + PASSWORD, "env:JN_TLS_PW", "file:" + str(pwfile)):
        prof = profile(certs, certFile=str(certs / "locked.pem"),
                       privateKeyFile=str(certs / "locked.key"), password=pw)
        r = make_router(router_entities(listeners=[
            {"host": "127.0.0.1", "port": "0", "sslProfile": "tls", "requireSsl": True}],
            extra=[prof]), env=env)
        conn = client.connect(amqps(r, 0), ssl_domain=tls_domain(certs))
        conn.close()
        r.stop()


def start_fails(tmp_path, entities):
    cfg = tmp_path / "bad.json"
    cfg.write_text("[\n" + ",\n".join(__import__("json").dumps(e) for e in entities) + "\n]\n")
    res = run_junctiond(["-c", cfg])
    assert res.returncode != 0
    # the error is one line; the log lines before it are the usual start-up ones (info)
    lines = [l for l in res.stderr.splitlines() if l.strip() and "(info)" not in l]
    assert len(lines) == 1 and lines[0].startswith("junctiond: "), res.stderr
    # -t (check the configuration) says the same
    res = run_junctiond(["-t", "-c", cfg])
    assert res.returncode != 0 and res.stderr.strip() == lines[0], res.stderr
    return lines[0]


def with_profile(prof, listener=None):
    lst = {"host": "127.0.0.1", "port": "0", "sslProfile": "tls"}
    lst.update(listener or {})
    return router_entities(listeners=[lst], extra=[prof] if prof else [])


def test_start_up_errors_are_one_line_naming_the_file(certs, tmp_path):
    missing = certs / "nothere.pem"
    line = start_fails(tmp_path, with_profile(profile(certs, certFile=str(missing))))
    assert str(missing) in line and "No such file" in line and "certFile" in line, line
    line = start_fails(tmp_path, with_profile(profile(certs, privateKeyFile=str(certs / "client.key"))))
    assert str(certs / "client.key") in line and "does not match" in line, line
    line = start_fails(tmp_path, with_profile(profile(
        certs, certFile=str(certs / "locked.pem"), privateKeyFile=str(certs / "locked.key"),
        password="wrong")))
    assert str(certs / "locked.key") in line and "password" in line, line
    line = start_fails(tmp_path, with_profile(profile(
        certs, certFile=str(certs / "locked.pem"), privateKeyFile=str(certs / "locked.key"))))
    assert str(certs / "locked.key") in line, line
    line = start_fails(tmp_path, with_profile(profile(certs, ciphers="NO-SUCH-CIPHER")))
    assert "ciphers" in line and "NO-SUCH-CIPHER" in line, line
    line = start_fails(tmp_path, with_profile(profile(certs, protocols="TLSv9")))
    assert "protocols" in line and "TLSv9" in line, line
    line = start_fails(tmp_path, with_profile(profile(certs, password="env:JN_NOT_SET_ANYWHERE")))
    assert "JN_NOT_SET_ANYWHERE" in line, line
    line = start_fails(tmp_path, with_profile(None))
    assert "sslProfile 'tls'" in line and "no sslProfile" in line, line
    line = start_fails(tmp_path, router_entities(listener={"requireSsl": True}))
    assert "requireSsl" in line and "sslProfile" in line, line


def test_deprecated_names_load_with_a_warning(make_router, certs, client):
    prof = ["sslProfile", {"name": "tls", "certFile": str(certs / "server.pem"),
                           "keyFile": str(certs / "server.key"),
                           "certDb": str(certs / "ca.pem")}]
    r = make_router(with_profile(prof, {"requireSsl": True}))
    assert r.wait_log(r"attribute 'keyFile' is deprecated, use 'privateKeyFile' instead")
    client.connect(amqps(r, 0), ssl_domain=tls_domain(certs))


def test_connection_rows_show_the_tls_session(make_router, certs, client):
    r = tls_router(make_router, certs)
    client.connect(amqps(r, 0), ssl_domain=tls_domain(certs))
    client.connect(r.url_of(2))
    node = Node(r.url_of(2))
    try:
        rows = node.query_dicts("connection", ["container", "isEncrypted", "ssl", "sslProto",
                                               "sslCipher", "sslSsf"])
        listeners = node.query_dicts("listener", ["sslProfile", "requireSsl"])
    finally:
        node.close()
    assert [(l["sslProfile"], l["requireSsl"]) for l in listeners] == [
        ("tls", True), ("tls", False), (None, False), (None, False)], listeners
    enc = [row for row in rows if row["isEncrypted"]]
    plain = [row for row in rows if not row["isEncrypted"]]
    assert len(enc) == 1 and len(plain) == 2, rows  # the plain client and this query's
    t = enc[0]
    assert t["ssl"] is True and t["sslProto"] == "TLSv1.3", t
    assert t["sslCipher"].startswith("TLS_") and t["sslSsf"] >= 128, t
    for p in plain:
        assert p["isEncrypted"] is False and p["ssl"] is False, p
        assert p["sslProto"] is None and p["sslCipher"] is None and p["sslSsf"] == 0, p


def test_real_qdstat_shows_the_tls_columns(make_router, certs, client):
    qdstat = PEER_BIN / "qdstat"
    if not qdstat.exists():
        pytest.skip("the reference qdstat is not in ../shared/peer (%s)" % qdstat)
    r = tls_router(make_router, certs)
    client.connect(amqps(r, 0), ssl_domain=tls_domain(certs))
    res = subprocess.run([str(qdstat), "-b", "%s:%d" % r.addresses[2], "-c"],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    # qdstat's security column: "<sslProto>(<sslCipher>)" for the TLS client, and
    # "no-security" for its own plain connection
    rows = [l for l in res.stdout.splitlines() if "127.0.0.1:" in l]
    assert len(rows) == 2, res.stdout
    assert sum("TLSv1.3(TLS_" in l for l in rows) == 1, res.stdout
    assert sum("no-security" in l for l in rows) == 1, res.stdout


# ---- the byte budgets hold with TLS (test_conn_budget.py's clients, over TLS) ------------

def tls_socket(r, i, certs, rcvbuf=None):
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    raw.settimeout(10)
    raw.connect(r.addresses[i])
    ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    ctx.check_hostname = False
    return ctx.wrap_socket(raw, server_hostname="localhost")


def budget_router(make_router, certs, **listener):
    lst = {"host": "127.0.0.1", "port": "0", "sslProfile": "tls", "requireSsl": True,
           "idleTimeoutSeconds": 0}
    lst.update(listener)
    return make_router(router_entities(listeners=[lst, {"host": "127.0.0.1", "port": "0"}],
                                       extra=[profile(certs)]), env=cb.quiet_asan_env())


def test_a_tls_client_that_stops_reading_holds_at_most_the_connection_budget(
        make_router, certs, client):
    r = budget_router(make_router, certs, linkCapacity=8)
    s = tls_socket(r, 0, certs, rcvbuf=4096)
    try:
        sessions = 16
        out = cb.AMQP_HEADER + cb.open_frame()
        for ch in range(sessions):
            out += cb.begin_frame(ch) + cb.attach_receiver_frame(ch, "multicast.stall",
                                                                 "stalled-%d" % ch)
        s.sendall(out)
        got = b""
        while cb.performatives(got, 0x12) < sessions:
            got += s.recv(65536)
        s.sendall(b"".join(cb.flow_frame(ch, 100000) for ch in range(sessions)))
        snd = client.connect(r.url_of(1)).sender("multicast.stall", presettled=True)
        base = cb.rss_kb(r)
        most = base
        for i in range(2000):
            snd.send(Message(body=b"x" * 16384))
            if i % 100 == 0:
                client.run_for(0.01)
                most = max(most, cb.rss_kb(r))
        client.run_for(1.0)
        most = max(most, cb.rss_kb(r))
        grew = (most - base) / 1024.0
        print("\nTLS client that reads nothing, 2000 x 16 KiB multicast: router RSS +%.1f MiB"
              % grew)
        if not cb.memory_says_little(r):
            assert grew < cb.rss_bound_mib(r, 12), \
                "router RSS grew by %.1f MiB for a TLS client that reads nothing" % grew
        check_router_works(r.url_of(1))
    finally:
        s.close()
    check_router_works(r.url_of(1))


def test_a_tls_client_that_talks_but_never_reads_is_not_read_past_the_budget(make_router, certs):
    r = budget_router(make_router, certs)
    s = tls_socket(r, 0, certs, rcvbuf=4096)
    try:
        s.sendall(cb.AMQP_HEADER + cb.open_frame())
        got = b""
        while cb.performatives(got, 0x10) < 1:
            got += s.recv(65536)
        base = cb.rss_kb(r)
        pairs = (cb.begin_frame(0) + cb.end_frame(0)) * 1024
        s.setblocking(False)
        sent, most = 0, base
        deadline = time.monotonic() + 6
        buf = b""
        while time.monotonic() < deadline:
            if not buf:
                buf = pairs
            try:
                n = s.send(buf[:16384])
                buf = buf[n:]
                sent += n
            except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                time.sleep(0.02)
            most = max(most, cb.rss_kb(r))
        time.sleep(0.5)
        most = max(most, cb.rss_kb(r))
        grew = (most - base) / 1024.0
        # it stopped being read: far less went in than a client that is read sends in 6 s
        assert sent < (64 << 20), "the router read %.0f MiB from a client that never reads" % (
            sent / float(1 << 20))
        if not cb.memory_says_little(r):
            assert grew < cb.rss_bound_mib(r, 12), \
                "router RSS grew by %.1f MiB (the client sent %.0f MiB)" % (
                    grew, sent / float(1 << 20))
    finally:
        s.close()
    check_router_works(r.url_of(1))
