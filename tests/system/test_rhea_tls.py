"""rhea (node) over TLS with SASL PLAIN against a sasldb user: the second client library of
issue 14's tests, on a listener that requires TLS and authenticates (requireSsl,
authenticatePeer, saslMechanisms PLAIN).  The certificates come from test_tls.py's fixture,
the Cyrus directory and its user from test_sasl.py's; rhea checks the server's certificate
against the test CA (NODE_EXTRA_CA_CERTS) and the host name."""
import listener_metrics as lm
from mgmt_tool import Node
from test_sasl import PASSWORD, REALM, USER, sasl_dir  # noqa: F401 (fixture)
from test_tls import certs, profile  # noqa: F401 (fixture)


def rhea_tls_router(make_router, certs, sasl_dir):
    """Listener 0: TLS only, PLAIN through Cyrus; 1: plain (management); 2: /metrics."""
    return make_router(router={"saslConfigDir": str(sasl_dir), "saslConfigName": "junction"},
                       listeners=[{"host": "127.0.0.1", "port": "0", "name": "secure",
                                   "sslProfile": "tls", "requireSsl": True,
                                   "authenticatePeer": True, "saslMechanisms": "PLAIN"},
                                  {"host": "127.0.0.1", "port": "0"},
                                  {"host": "127.0.0.1", "port": "0", "http": True}],
                       extra=[profile(certs)])


def test_rhea_over_tls_with_sasl_plain_routes_and_is_shown(make_router, certs, sasl_dir,
                                                           monkeypatch):
    from nodejs import require_node, run_rhea, start_rhea, rhea_result
    node = require_node()
    r = rhea_tls_router(make_router, certs, sasl_dir)
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", str(certs / "ca.pem"))
    url = "amqps://localhost:%d" % r.addresses[0][1]
    login = {"username": USER, "password": PASSWORD}

    # a receiver held open while the connection rows are read
    rx, lines = start_rhea(node, dict(login, url=url, mode="receive", address="q.rhea-tls",
                                      count=10))
    try:
        assert lines.next(60, "rhea_ws.mjs").get("ready"), "the rhea receiver did not attach"
        rows = Node(r.url_of(1)).query_dicts("connection")
        mine = [c for c in rows if c.get("user") == USER]
        assert len(mine) == 1, rows
        c = mine[0]
        assert c["isEncrypted"] is True and c["sslProto"].startswith("TLSv1"), c
        assert c["isAuthenticated"] is True and c["sasl"] == "PLAIN", c
        sent = run_rhea(node, dict(login, url=url, mode="send", address="q.rhea-tls",
                                   count=10))
        assert sent["outcomes"] == {"accepted": 10}, sent
        got = rhea_result(rx, lines)
        assert got["received"] == ["msg-%d" % i for i in range(10)], got
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait(5)


def test_rhea_with_a_wrong_password_gets_nothing(make_router, certs, sasl_dir, monkeypatch):
    from nodejs import require_node, start_rhea
    node = require_node()
    r = rhea_tls_router(make_router, certs, sasl_dir)
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", str(certs / "ca.pem"))
    proc, lines = start_rhea(node, {"url": "amqps://localhost:%d" % r.addresses[0][1],
                                    "username": USER, "password": "not-" + PASSWORD,
                                    "mode": "send", "address": "q.rhea-bad", "count": 1,
                                    "timeout": 20})
    try:
        res = lines.next(60, "rhea_ws.mjs")
        assert "error" in res, res
        proc.wait(30)
        assert proc.returncode == 1
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    # refused in SASL (counted by reason on the listener), never attached anything
    assert lm.wait_value(lambda: lm.auth_failed(r.addresses[2], "secure"),
                         lm.only("credentials")) == lm.only("credentials")
    r.wait_log(r"authentication of client 127\.0\.0\.1:\d+ failed \(mechanism PLAIN\)")
    assert ("not-" + PASSWORD) not in r.stderr_text()
    links = Node(r.url_of(1)).query_dicts("router.link")
    assert not [lk for lk in links if lk.get("owningAddr", "").endswith("q.rhea-bad")], links
