"""https and wss (issue 14 point 5): an http listener with an sslProfile serves the console,
/metrics, /healthz and AMQP over WebSocket over TLS, as qdrouterd 1.19 does with
libwebsockets: the profile's certificate, key (each password form), CA list, ciphers and
protocols; plain HTTP on the same port unless requireSsl; client certificates with
authenticatePeer; the connection rows of wss AMQP clients encrypted; management CREATE of an
https listener; start-up errors naming the file.

The certificates are made by the tests with `openssl` (test_tls.py's helpers).  Clients:
Python's ssl with urllib and http.client, websocket-client with Proton's engine (wsamqp.py),
rhea in node (NODE_EXTRA_CA_CERTS trusts the test CA).
"""

import http.client
import os
import socket
import ssl
import time
import urllib.error
import urllib.request

import pytest
from proton import Delivery, Message

from conftest import free_port, router_entities
from mgmt_tool import Node
from test_tls import OPENSSL, PASSWORD, make_ca, make_cert, start_fails
from wsamqp import WsAmqp

pytestmark = pytest.mark.skipif(OPENSSL is None, reason="the openssl command is not installed")

TIMEOUT = 10


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("https-certs")
    make_ca(d, "ca")
    make_ca(d, "otherca")
    make_cert(d, "server", "ca")
    make_cert(d, "other", "otherca")  # a second listener's certificate, another CA's
    make_cert(d, "client", "ca")
    make_cert(d, "stranger", "otherca")  # a client certificate the router does not trust
    make_cert(d, "locked", "ca", key_args=("-aes256", "-pass", "pass:" + PASSWORD))
    return d


def profile(certs, name="tls", cert="server", **kw):
    p = {"name": name, "certFile": str(certs / (cert + ".pem")),
         "privateKeyFile": str(certs / (cert + ".key")), "caCertFile": str(certs / "ca.pem")}
    p.update(kw)
    return ["sslProfile", p]


def https_router(make_router, certs, extra=None, https=None, env=None, **prof):
    """Listeners: 0 AMQP (plain), 1 https with requireSsl, 2 https (TLS or plain HTTP)."""
    h1 = {"host": "127.0.0.1", "port": "0", "http": True, "sslProfile": "tls",
          "requireSsl": True}
    h1.update(https or {})
    return make_router(router_entities(listeners=[
        {"host": "127.0.0.1", "port": "0"}, h1,
        {"host": "127.0.0.1", "port": "0", "http": True, "sslProfile": "tls"}],
        extra=[profile(certs, **prof)] + (extra or [])), env=env)


def tls_ctx(certs, ca="ca.pem", cert=None):
    ctx = ssl.create_default_context(cafile=str(certs / ca))
    if cert:
        ctx.load_cert_chain(str(certs / (cert + ".pem")), str(certs / (cert + ".key")))
    return ctx


def get(url, ctx=None):
    """(status, content type, body) of a GET over http or https."""
    try:
        with urllib.request.urlopen(url, timeout=TIMEOUT, context=ctx) as resp:
            return resp.status, resp.headers.get("Content-Type"), resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type"), e.read()


def https_url(r, i, path, host="127.0.0.1"):
    return "https://%s:%d%s" % (host, r.addresses[i][1], path)


def http_url(r, i, path):
    return "http://127.0.0.1:%d%s" % (r.addresses[i][1], path)


def assert_serves_https(r, i, certs, **kw):
    status, ctype, body = get(https_url(r, i, "/healthz"), tls_ctx(certs, **kw))
    assert (status, body) == (200, b"OK\n"), (status, body)


def refused(fn):
    """fn() fails as a refused TLS connection does (handshake, reset or end of stream)."""
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException,
                        urllib.error.URLError, socket.timeout, OSError)):
        fn()


# ---- GET over https ------------------------------------------------------------------------

def test_https_serves_healthz_metrics_and_the_console(make_router, certs):
    r = https_router(make_router, certs)
    ctx = tls_ctx(certs)
    for i in (1, 2):
        status, ctype, body = get(https_url(r, i, "/healthz"), ctx)
        assert (status, body) == (200, b"OK\n")
        status, ctype, body = get(https_url(r, i, "/metrics", host="localhost"), ctx)
        assert status == 200 and ctype.startswith("text/plain"), (status, ctype)
        assert b"qdr_connections" in body or b"junction_" in body, body[:300]
        status, ctype, body = get(https_url(r, i, "/"), ctx)
        assert status == 200 and ctype.startswith("text/html") and b"<html" in body.lower()
    # http.client, keep-alive: several requests on one TLS connection
    c = http.client.HTTPSConnection("127.0.0.1", r.addresses[1][1], timeout=TIMEOUT,
                                    context=ctx)
    try:
        for _ in range(3):
            c.request("GET", "/healthz")
            resp = c.getresponse()
            assert (resp.status, resp.read()) == (200, b"OK\n")
        assert c.sock.version() in ("TLSv1.2", "TLSv1.3")
    finally:
        c.close()


def test_the_server_certificate_is_the_profiles(make_router, certs):
    r = https_router(make_router, certs)
    # a client that trusts another CA does not accept the router's certificate
    with pytest.raises(urllib.error.URLError) as e:
        get(https_url(r, 1, "/healthz"), tls_ctx(certs, ca="otherca.pem"))
    assert isinstance(e.value.reason, ssl.SSLCertVerificationError), e.value
    assert_serves_https(r, 1, certs)


def test_each_https_listener_keeps_its_own_certificate_whatever_the_server_name(
        make_router, certs):
    """Two https listeners with different profiles: a ClientHello naming a host (SNI) does
    not switch a connection to the other listener's certificate."""
    r = make_router(router_entities(listeners=[
        {"host": "127.0.0.1", "port": "0"},
        {"host": "127.0.0.1", "port": "0", "http": True, "sslProfile": "tls"},
        {"host": "127.0.0.1", "port": "0", "http": True, "sslProfile": "other"}],
        extra=[profile(certs), profile(certs, name="other", cert="other")]))
    for host in ("localhost", "127.0.0.1"):
        assert get(https_url(r, 1, "/healthz", host), tls_ctx(certs))[0] == 200
        assert get(https_url(r, 2, "/healthz", host), tls_ctx(certs, ca="otherca.pem"))[0] == 200
        refused(lambda: get(https_url(r, 2, "/healthz", host), tls_ctx(certs)))


def test_profile_protocols_and_http2_offers(make_router, certs):
    """The profile's protocols hold on https as on AMQP listeners; a client offering h2 by
    ALPN gets HTTP/1.1 (HTTP/2 is not served)."""
    r = https_router(make_router, certs, protocols="TLSv1.3")
    ctx = tls_ctx(certs)
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    refused(lambda: get(https_url(r, 1, "/healthz"), ctx))
    ctx = tls_ctx(certs)
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    with socket.create_connection(r.addresses[1], timeout=TIMEOUT) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            assert s.version() == "TLSv1.3"
            assert s.selected_alpn_protocol() == "http/1.1"
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.1 200")


def test_an_h2c_upgrade_gets_403_and_the_router_goes_on(make_router, certs):
    """HTTP/2 by upgrade (h2c) on a plain http listener, and on the plain side of an https
    one: lws would move the request onto an HTTP/2 stream, which crashed the router; it is
    refused."""
    r = make_router(router_entities(listeners=[
        {"host": "127.0.0.1", "port": "0", "http": True},
        {"host": "127.0.0.1", "port": "0", "http": True, "sslProfile": "tls"}],
        extra=[profile(certs)]))
    for i in (0, 1):
        c = http.client.HTTPConnection("127.0.0.1", r.addresses[i][1], timeout=TIMEOUT)
        try:
            c.request("GET", "/healthz", headers={
                "Connection": "Upgrade, HTTP2-Settings", "Upgrade": "h2c",
                "HTTP2-Settings": "AAMAAABkAARAAAAAAAIAAAAA"})
            resp = c.getresponse()
            assert resp.status == 403, resp.status
            resp.read()
        finally:
            c.close()
        assert r.is_running()
        assert get(http_url(r, i, "/healthz"))[::2] == (200, b"OK\n")


# ---- plain HTTP, garbage and aborted handshakes ---------------------------------------------

def test_require_ssl_refuses_plain_http_and_garbage_and_the_router_goes_on(make_router, certs):
    r = https_router(make_router, certs)
    port = r.addresses[1][1]
    # plain HTTP to the requireSsl port: no HTTP answer, the connection closes
    with socket.create_connection(r.addresses[1], timeout=TIMEOUT) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        got = b""
        try:
            while True:
                d = s.recv(4096)
                if not d:
                    break
                got += d
        except ConnectionResetError:
            pass
        assert not got.startswith(b"HTTP/"), got[:200]
    refused(lambda: get(http_url(r, 1, "/healthz")))
    # garbage, an AMQP header, a ClientHello cut short then closed, a client that closes
    # right after connecting: each closes or is closed, nothing else
    for junk in (b"\x00\x01\x02\x03" * 64, b"AMQP\x00\x01\x00\x00",
                 b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\xaa" * 40, b""):
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as s:
            if junk:
                s.sendall(junk)
            if junk.startswith(b"\x00") or junk.startswith(b"AMQP"):
                try:
                    while s.recv(4096):
                        pass
                except ConnectionResetError:
                    pass
    # a TLS handshake that the client gives up halfway (it does not trust the router)
    refused(lambda: get(https_url(r, 1, "/healthz"), tls_ctx(certs, ca="otherca.pem")))
    time.sleep(0.2)
    assert r.is_running()
    assert_serves_https(r, 1, certs)
    assert_serves_https(r, 2, certs)
    # the failed handshakes are the clients' business: no warning in the log
    assert not [l for l in r.stderr_lines() if "(warning)" in l or "(error)" in l], \
        r.stderr_lines()[-20:]


def test_without_require_ssl_plain_http_is_served_on_the_port_too(make_router, certs):
    """qdrouterd's http listener with an sslProfile and no requireSsl serves both."""
    r = https_router(make_router, certs)
    assert get(http_url(r, 2, "/healthz"))[::2] == (200, b"OK\n")
    assert_serves_https(r, 2, certs)


# ---- client certificates ---------------------------------------------------------------------

def test_authenticate_peer_requires_a_client_certificate_the_ca_signed(make_router, certs):
    r = https_router(make_router, certs, https={"authenticatePeer": True})
    # no certificate, or one another CA signed: refused
    refused(lambda: get(https_url(r, 1, "/healthz"), tls_ctx(certs)))
    refused(lambda: get(https_url(r, 1, "/healthz"), tls_ctx(certs, cert="stranger")))
    # the CA's client certificate: served
    assert_serves_https(r, 1, certs, cert="client")
    # a listener without authenticatePeer asks for none
    assert_serves_https(r, 2, certs)
    assert r.is_running()


# ---- the key's password, start-up errors --------------------------------------------------

def test_an_encrypted_key_with_each_password_form(make_router, certs, tmp_path):
    pwfile = tmp_path / "pw"
    pwfile.write_text(PASSWORD + "\n")
    env = dict(os.environ, JN_HTTPS_PW=PASSWORD)
    for pw in (PASSWORD, "pass:" + PASSWORD, "env:JN_HTTPS_PW", "file:" + str(pwfile)):
        r = https_router(make_router, certs, env=env, cert="locked", password=pw)
        assert_serves_https(r, 1, certs)
        r.stop()


def test_a_bad_certificate_or_key_stops_start_up_with_one_line_naming_the_file(certs, tmp_path):
    def ents(**kw):
        return router_entities(listeners=[
            {"host": "127.0.0.1", "port": "0", "http": True, "sslProfile": "tls"}],
            extra=[profile(certs, **kw)])

    missing = certs / "nothere.pem"
    line = start_fails(tmp_path, ents(certFile=str(missing)))
    assert str(missing) in line and "certFile" in line, line
    line = start_fails(tmp_path, ents(privateKeyFile=str(certs / "client.key")))
    assert str(certs / "client.key") in line and "does not match" in line, line
    line = start_fails(tmp_path, ents(cert="locked", password="wrong"))
    assert str(certs / "locked.key") in line and "password" in line, line


# ---- AMQP over wss ---------------------------------------------------------------------------

def wss(r, i, certs, **kw):
    return WsAmqp("localhost", r.addresses[i][1], sslopt={"ca_certs": str(certs / "ca.pem")},
                  **kw)


def test_amqp_over_wss_both_ways_with_a_tcp_client_and_encrypted_rows(make_router, certs,
                                                                      client):
    r = https_router(make_router, certs)
    tcp = client.connect(r.url_of(0))
    ws = wss(r, 1, certs, container="wss-client", peer=client).wait_open()
    plain_ws = WsAmqp("127.0.0.1", r.addresses[2][1], container="ws-plain").wait_open()
    try:
        # wss -> TCP
        rcv = tcp.receiver("q.wss-in", credit=10)
        snd = ws.sender("q.wss-in")
        for n in (10, 70000, 300000):
            body = ("in/%d/" % n) * (n // 8 + 1)
            dlv = ws.send(snd, Message(body=body))
            ws.wait(lambda: rcv.queue, what="the TCP receiver's message")
            got = rcv.get()
            assert got.message.body == body
            got.accept()
            assert ws.wait_outcome(dlv) == Delivery.ACCEPTED
        # TCP -> wss
        wrcv = ws.receiver("q.wss-out", credit=10)
        tsnd = tcp.sender("q.wss-out")
        for n in (10, 70000, 300000):
            body = ("out/%d/" % n) * (n // 8 + 1)
            dlv = tsnd.send(Message(body=body))
            assert ws.get(wrcv).body == body
            assert tsnd.wait_outcome(dlv) == Delivery.ACCEPTED
        node = Node(r.url_of(0))
        try:
            rows = node.query_dicts("connection", ["container", "isEncrypted", "ssl",
                                                   "sslProto", "sslCipher", "sslSsf"])
        finally:
            node.close()
        by = {row["container"]: row for row in rows}
        t = by["wss-client"]
        assert t["isEncrypted"] is True and t["ssl"] is True, t
        assert t["sslProto"] in ("TLSv1.2", "TLSv1.3"), t
        assert t["sslCipher"] and t["sslSsf"] >= 128, t
        p = by["ws-plain"]
        assert p["isEncrypted"] is False and p["sslProto"] is None and p["sslSsf"] == 0, p
    finally:
        ws.close()
        plain_ws.close()


def test_rhea_over_wss_roundtrip(make_router, certs, monkeypatch):
    from nodejs import require_node, run_rhea
    node = require_node()
    r = https_router(make_router, certs)
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", str(certs / "ca.pem"))
    res = run_rhea(node, {"url": "wss://localhost:%d/" % r.addresses[1][1],
                          "protocol": "binary", "receive_protocol": "amqp",
                          "mode": "roundtrip", "address": "multicast.wss-roundtrip",
                          "count": 20})
    assert res["outcomes"] == {"accepted": 20}
    assert res["received"] == ["msg-%d" % i for i in range(20)]


# ---- management CREATE ----------------------------------------------------------------------

def test_create_an_https_listener_at_run_time(make_router, certs):
    """A router without http listeners (no HTTP server yet): CREATE starts one over TLS."""
    r = make_router(router_entities(listeners=[{"host": "127.0.0.1", "port": "0"}],
                                    extra=[profile(certs)]))
    port = free_port()
    node = Node(r.url_of(0))
    try:
        node.create({"host": "127.0.0.1", "port": str(port), "http": True,
                     "sslProfile": "tls", "requireSsl": True}, "listener", name="web-tls")
        ctx = tls_ctx(certs)
        url = "https://127.0.0.1:%d/healthz" % port
        deadline = time.monotonic() + TIMEOUT
        while True:  # the admin thread starts serving it a moment after the reply
            try:
                assert get(url, ctx)[::2] == (200, b"OK\n")
                break
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        refused(lambda: get("http://127.0.0.1:%d/healthz" % port))
        # a second one on the running server
        port2 = free_port()
        node.create({"host": "127.0.0.1", "port": str(port2), "http": True,
                     "sslProfile": "tls"}, "listener", name="web-tls2")
        deadline = time.monotonic() + TIMEOUT
        while True:
            try:
                assert get("https://localhost:%d/healthz" % port2, ctx)[::2] == (200, b"OK\n")
                break
            except (urllib.error.URLError, ConnectionError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        rows = {l["name"]: l for l in node.query_dicts("listener", ["name", "sslProfile",
                                                                    "requireSsl", "http"])}
        assert (rows["web-tls"]["sslProfile"], rows["web-tls"]["requireSsl"]) == ("tls", True)
        # an unknown profile is a 400 naming it
        with pytest.raises(Exception) as e:
            node.create({"host": "127.0.0.1", "port": str(free_port()), "http": True,
                         "sslProfile": "nope"}, "listener", name="web-bad")
        assert "nope" in str(e.value), e.value
        node.delete("listener", name="web-tls")
    finally:
        node.close()
    assert r.is_running()


def test_create_an_amqps_listener_naming_a_configured_profile(make_router, certs, client):
    """The same path: a created AMQP listener may name the configuration's sslProfile."""
    from test_tls import tls_domain
    r = make_router(router_entities(listeners=[{"host": "127.0.0.1", "port": "0"}],
                                    extra=[profile(certs)]))
    port = free_port()
    node = Node(r.url_of(0))
    try:
        node.create({"host": "127.0.0.1", "port": str(port), "sslProfile": "tls",
                     "requireSsl": True}, "listener", name="amqps")
    finally:
        node.close()
    conn = client.connect("amqps://127.0.0.1:%d" % port, ssl_domain=tls_domain(certs))
    rcv = conn.receiver("q.created-amqps", credit=1)
    snd = conn.sender("q.created-amqps")
    dlv = snd.send(Message(body="over a created amqps listener"))
    got = rcv.get()
    assert got.message.body == "over a created amqps listener"
    got.accept()
    assert snd.wait_outcome(dlv) == Delivery.ACCEPTED
