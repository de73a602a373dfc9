"""Client certificates (issue 14): a listener whose saslMechanisms names EXTERNAL asks TLS
clients for a certificate that its sslProfile's CAs signed, and a client that has none, or one
of another CA, fails the handshake (tlsHandshakesFailed, one log line); SASL EXTERNAL names the
user by the certificate - its subject, or the sslProfile's uidFormat fields renamed through the
uidNameMappingFile - as qdrouterd 1.19 does; other mechanisms over TLS keep their own user;
requireEncryption refuses plain clients with qdrouterd's condition; the connection rows (and the
real qdstat when ../shared/peer is there) show user, mechanism and TLS session.

Certificates are made here with `openssl` (test_tls.py's helpers): a CA, a second CA, the
server's certificate, client certificates of each CA with the subjects below.  Clients:
Proton-Python with SSLDomain credentials, and the raw SASL client of test_sasl.py over a TLS
socket (for SCRAM-SHA-256, which no packaged client speaks)."""

import json
import re
import socket
import ssl
import struct
import subprocess

import pytest
from proton import Delivery, Message, SSLDomain

import test_sasl
from conftest import router_entities
from mgmt_tool import Node
from test_sasl import AMQP_HEADER, OPEN, PASSWORD, USER, sasl_dir  # noqa: F401 (a fixture)
from test_tls import OPENSSL, PEER_BIN, amqps, make_ca, make_cert, ossl, start_fails, tls_failed

pytestmark = pytest.mark.skipif(OPENSSL is None, reason="the openssl command is not installed")

ALICE_SUBJ = "/C=US/ST=NC/L=Raleigh/O=Client/OU=Dev/CN=alice"
# RFC 2253 writes the subject last field first, as Proton (and so qdrouterd) names the user
ALICE_DN = "CN=alice,OU=Dev,O=Client,L=Raleigh,ST=NC,C=US"
BOB_SUBJ = "/O=Example/CN=bob"


def make_client_cert(d, name, ca, subj):
    ossl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-out", name + ".key", cwd=d)
    ossl("req", "-new", "-key", name + ".key", "-out", name + ".csr", "-subj", subj, cwd=d)
    ossl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
         "-CAcreateserial", "-out", name + ".pem", "-days", "2", cwd=d)


def fingerprint(certs, name, digest):
    res = subprocess.run([OPENSSL, "x509", "-in", str(certs / (name + ".pem")), "-noout",
                          "-fingerprint", "-" + digest], stdout=subprocess.PIPE, text=True,
                         check=True, timeout=30)
    return res.stdout.strip().split("=", 1)[1].replace(":", "").lower()


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("clientcerts")
    make_ca(d, "ca")
    make_ca(d, "otherca")
    make_cert(d, "server", "ca")
    make_client_cert(d, "alice", "ca", ALICE_SUBJ)
    make_client_cert(d, "bob", "ca", BOB_SUBJ)
    make_client_cert(d, "mallory", "otherca", "/O=Client/CN=mallory")
    return d


def profile(certs, name="tls", **kw):
    p = {"name": name, "certFile": str(certs / "server.pem"),
         "privateKeyFile": str(certs / "server.key"), "caCertFile": str(certs / "ca.pem")}
    p.update(kw)
    return ["sslProfile", p]


def domain(certs, who=None):
    dom = SSLDomain(SSLDomain.MODE_CLIENT)
    dom.set_trusted_ca_db(str(certs / "ca.pem"))
    dom.set_peer_authentication(SSLDomain.VERIFY_PEER)
    if who:
        dom.set_credentials(str(certs / (who + ".pem")), str(certs / (who + ".key")), None)
    return dom


def ext_router(make_router, certs, profiles=None, listeners=None, router=None):
    """Listeners: 0 EXTERNAL (profile "tls"), 1 TLS without EXTERNAL, 2 plain (management),
    3 http (/metrics), then `listeners`."""
    lst = [{"host": "127.0.0.1", "port": "0", "sslProfile": "tls", "authenticatePeer": True,
            "saslMechanisms": "EXTERNAL"},
           {"host": "127.0.0.1", "port": "0", "sslProfile": "tls", "saslMechanisms": "ANONYMOUS"},
           {"host": "127.0.0.1", "port": "0"},
           {"host": "127.0.0.1", "port": "0", "http": True}] + (listeners or [])
    return make_router(router_entities(router=router, listeners=lst,
                                       extra=profiles or [profile(certs)]))


def rows(r, entity="connection", attrs=("user", "isAuthenticated", "sasl", "isEncrypted",
                                         "sslProto", "sslCipher", "sslSsf")):
    node = Node(r.url_of(2))
    try:
        return node.query_dicts(entity, list(attrs))
    finally:
        node.close()


def tls_rows(r):
    return [row for row in rows(r) if row["isEncrypted"]]


def test_external_client_is_named_by_its_certificate_and_routes(make_router, certs, client):
    r = ext_router(make_router, certs)
    conn = client.connect(amqps(r, 0), ssl_domain=domain(certs, "alice"), allowed_mechs="EXTERNAL")
    plain = client.connect(r.url_of(2))
    rcv = plain.receiver("q.ext", credit=5)
    snd = conn.sender("q.ext")
    dlv = snd.send(Message(body="from alice"))
    got = rcv.get()
    assert got.message.body == "from alice"
    got.accept()
    assert snd.wait_outcome(dlv) == Delivery.ACCEPTED
    (row,) = tls_rows(r)
    assert row["user"] == ALICE_DN and row["sasl"] == "EXTERNAL", row
    assert row["isAuthenticated"] is True and row["sslProto"].startswith("TLSv1."), row
    assert row["sslCipher"] and row["sslSsf"] >= 128, row
    assert tls_failed(r) == 0


def test_missing_or_foreign_certificate_fails_the_handshake(make_router, certs, client):
    r = ext_router(make_router, certs)
    for who, why in ((None, "peer did not return a certificate"),
                     ("mallory", "certificate verify failed")):
        start = len(r.stderr_lines())
        conn = client.connect(amqps(r, 0), ssl_domain=domain(certs, who), wait=False,
                              allowed_mechs="EXTERNAL")
        client.wait(lambda: conn.transport_closed, msg="the router to refuse the handshake")
        assert not (conn.pn.state & conn.pn.REMOTE_ACTIVE)
        m = r.wait_log(r"\[(C\d+)\] Connection from 127\.0\.0\.1:\d+ closed: TLS handshake "
                       r"failed: " + why, start=start)
        r.wait_log(r"\[%s\] Connection from .* closed$" % m.group(1), start=start)
        # one line says why: not a second one from Proton ("no protocol header")
        said = [l for l in r.stderr_lines()[start:] if "[%s]" % m.group(1) in l
                and ("failed" in l or "refused" in l)]
        assert len(said) == 1, said
    assert tls_failed(r) == 2
    # a listener without EXTERNAL asks for no certificate: a client without one gets in
    client.connect(amqps(r, 1), ssl_domain=domain(certs))
    ok = client.connect(amqps(r, 0), ssl_domain=domain(certs, "bob"), allowed_mechs="EXTERNAL")
    ok.sender("q.after")
    assert tls_failed(r) == 2


def uid_cases(certs):
    """(uidFormat, the user qdrouterd 1.19 gives alice's certificate with it) - checked
    against the real qdrouterd: the fields in the order given, joined by ';'; a format with a
    letter it does not know, or whose fields are all absent, gives the subject."""
    sha1, sha256, sha512 = (fingerprint(certs, "alice", d) for d in ("sha1", "sha256", "sha512"))
    return [("1", sha1), ("2", sha256), ("5", sha512),
            ("2noucs", sha256 + ";alice;Client;Dev;US;NC"), ("1cs", sha1 + ";US;NC"),
            ("cs5", "US;NC;" + sha512), ("scounl", "NC;US;Client;Dev;alice;Raleigh"),
            ("n", "alice"), ("nx", ALICE_DN), ("ouccccccc", "Client;Dev;US;US;US;US;US")]


def test_uid_format_fields_name_external_clients(make_router, certs, client):
    cases = uid_cases(certs)
    profiles = [profile(certs, "u%d" % i, uidFormat=f) for i, (f, _) in enumerate(cases)]
    listeners = [{"host": "127.0.0.1", "port": "0", "sslProfile": "u%d" % i,
                  "authenticatePeer": True, "saslMechanisms": "EXTERNAL"}
                 for i in range(len(cases))]
    r = ext_router(make_router, certs, profiles=[profile(certs)] + profiles, listeners=listeners)
    r.wait_log(r"sslProfile 'u8': uidFormat 'nx': 'x' is not a field")
    r.wait_log(r"sslProfile 'u9': uidFormat 'ouccccccc': only its first 7 letters are used")
    for i, (fmt, want) in enumerate(cases):
        conn = client.connect(amqps(r, 4 + i), ssl_domain=domain(certs, "alice"),
                              allowed_mechs="EXTERNAL")
        (row,) = tls_rows(r)
        assert row["user"] == want and row["sasl"] == "EXTERNAL", (fmt, row)
        conn.close()
        client.wait(lambda: not tls_rows(r), msg="the connection row to go")
    # bob's certificate has no country, state or unit: 'csu' names him by his subject
    r2 = ext_router(make_router, certs, profiles=[profile(certs, uidFormat="csu")])
    client.connect(amqps(r2, 0), ssl_domain=domain(certs, "bob"), allowed_mechs="EXTERNAL")
    assert [row["user"] for row in tls_rows(r2)] == ["CN=bob,O=Example"]


def test_uid_name_mapping_file_renames_the_uid(make_router, certs, client, tmp_path):
    sha1_bob = fingerprint(certs, "bob", "sha1")
    mapping = tmp_path / "names.json"
    # a later key replaces an earlier one, an empty name leaves the uid (Python's json and
    # qdrouterd's display-name service)
    mapping.write_text('{"alice;Dev": "someone else", "alice;Dev": "Alice Liddell",\n'
                       ' "%s": "", "carol;Ops": "Carol"}\n' % sha1_bob)
    r = ext_router(make_router, certs, profiles=[
        profile(certs, uidFormat="nu", uidNameMappingFile=str(mapping)),
        profile(certs, "bob", uidFormat="1", displayNameFile=str(mapping))],
        listeners=[{"host": "127.0.0.1", "port": "0", "sslProfile": "bob",
                    "authenticatePeer": True, "saslMechanisms": "EXTERNAL"}])
    client.connect(amqps(r, 0), ssl_domain=domain(certs, "alice"), allowed_mechs="EXTERNAL")
    client.connect(amqps(r, 4), ssl_domain=domain(certs, "bob"), allowed_mechs="EXTERNAL")
    assert sorted(row["user"] for row in tls_rows(r)) == sorted(["Alice Liddell", sha1_bob])


def test_other_mechanisms_over_tls_keep_their_own_user(make_router, certs, client, sasl_dir):
    """qdrouterd applies uidFormat to EXTERNAL only: PLAIN with a client certificate is the
    PLAIN user, ANONYMOUS is "anonymous"."""
    test_sasl.write_conf(sasl_dir, "PLAIN ANONYMOUS")
    r = ext_router(make_router, certs, profiles=[profile(certs, uidFormat="n")],
                   router={"saslConfigDir": str(sasl_dir), "saslConfigName": "junction"},
                   listeners=[{"host": "127.0.0.1", "port": "0", "sslProfile": "tls",
                               "saslMechanisms": "EXTERNAL PLAIN ANONYMOUS"}])
    url = amqps(r, 4)
    client.connect(url, ssl_domain=domain(certs, "alice"), allowed_mechs="PLAIN", user=USER,
                   password=PASSWORD)
    client.connect(url, ssl_domain=domain(certs, "alice"), allowed_mechs="ANONYMOUS")
    client.connect(url, ssl_domain=domain(certs, "alice"), allowed_mechs="EXTERNAL")
    got = sorted((row["sasl"], row["user"]) for row in tls_rows(r))
    assert got == [("ANONYMOUS", "anonymous"), ("EXTERNAL", "alice"), ("PLAIN", USER)], got


def test_require_encryption_refuses_plain_clients(make_router, certs, client):
    r = ext_router(make_router, certs, listeners=[
        {"host": "127.0.0.1", "port": "0", "requireEncryption": True},
        {"host": "127.0.0.1", "port": "0", "sslProfile": "tls", "requireEncryption": True}])
    for i in (4, 5):
        start = len(r.stderr_lines())
        conn = client.connect(r.url_of(i), wait=False)
        client.wait(lambda: conn.transport_closed, msg="the router to refuse the plain client")
        assert not (conn.pn.state & conn.pn.REMOTE_ACTIVE)
        m = r.wait_log(r"\[(C\d+)\] Connection from 127\.0\.0\.1:\d+ closed: "
                       r"amqp:connection:policy-error Client connection unencrypted - forbidden",
                       start=start)
        r.wait_log(r"\[%s\] Connection from .* closed$" % m.group(1), start=start)
        said = [l for l in r.stderr_lines()[start:] if "[%s]" % m.group(1) in l
                and ("failed" in l or "forbidden" in l)]
        assert len(said) == 1, said
        # the router writes nothing back, as qdrouterd's Proton: the client sees the end
        with socket.create_connection(r.addresses[i], timeout=5) as s:
            s.sendall(AMQP_HEADER)
            assert s.recv(100) == b""
    assert tls_failed(r) == 0  # no handshake failed
    # TLS clients are served
    conn = client.connect(amqps(r, 5), ssl_domain=domain(certs))
    conn.sender("q.enc")
    listeners = rows(r, "listener", ["requireEncryption", "sslProfile"])
    assert [(l["requireEncryption"], l["sslProfile"]) for l in listeners[4:]] == [
        (True, None), (True, "tls")], listeners


def test_start_up_errors_name_the_file_and_what_is_wrong(certs, tmp_path):
    def with_map(text, fmt="1"):
        f = tmp_path / "map.json"
        if text is None:
            f.unlink(missing_ok=True)
        else:
            f.write_text(text)
        return router_entities(listeners=[{"host": "127.0.0.1", "port": "0", "sslProfile": "tls",
                                           "saslMechanisms": "EXTERNAL"}],
                               extra=[profile(certs, uidFormat=fmt,
                                              uidNameMappingFile=str(f))]), str(f)
    for text, what in ((None, "No such file"), ('{"a": "b",\n "c": }\n', "not JSON (line 2)"),
                       ('["a", "b"]', "not a JSON object"),
                       ('{"a": "b", "c": 5}', 'the value of "c" is not a string')):
        ents, path = with_map(text)
        line = start_fails(tmp_path, ents)
        assert "sslProfile 'tls'" in line and "uidNameMappingFile " + path in line, line
        assert what in line, line
    # EXTERNAL needs CAs to check client certificates against
    p = profile(certs)
    del p[1]["caCertFile"]
    line = start_fails(tmp_path, router_entities(
        listeners=[{"host": "127.0.0.1", "port": "0", "sslProfile": "tls",
                    "saslMechanisms": "ANONYMOUS EXTERNAL"}], extra=[p]))
    assert "EXTERNAL" in line and "caCertFile" in line and "'tls'" in line, line
    line = start_fails(tmp_path, router_entities(
        listeners=[{"host": "127.0.0.1", "port": "0", "http": True, "requireEncryption": True}]))
    assert "requireEncryption" in line and "http" in line, line


class TlsSaslClient(test_sasl.SaslClient):
    """test_sasl's raw SASL client over TLS (no client certificate)."""

    def __init__(self, host, port, ca):
        ctx = ssl.create_default_context(cafile=str(ca))
        self.s = ctx.wrap_socket(socket.create_connection((host, port), timeout=5),
                                 server_hostname="localhost")
        self.buf = b""
        self.s.sendall(test_sasl.SASL_HEADER)
        assert self._read(8) == test_sasl.SASL_HEADER


def test_qdstat_shows_scram_and_external_clients_over_tls(make_router, certs, client, sasl_dir):
    qdstat = PEER_BIN / "qdstat"
    if not qdstat.exists():
        pytest.skip("the reference qdstat is not in ../shared/peer (%s)" % qdstat)
    r = ext_router(make_router, certs,
                   router={"saslConfigDir": str(sasl_dir), "saslConfigName": "junction"},
                   listeners=[{"host": "127.0.0.1", "port": "0", "sslProfile": "tls",
                               "authenticatePeer": True,
                               "saslMechanisms": "SCRAM-SHA-256"}])
    host, port = r.addresses[4]
    scram = TlsSaslClient(host, port, certs / "ca.pem")
    try:
        code, verified = test_sasl.scram_login(host, port, USER, PASSWORD, client=scram)
        assert code == test_sasl.OK and verified
        # the AMQP layer: header and open, so that the connection has its row
        scram.send(AMQP_HEADER + struct.pack(">IBBH", 8 + len(OPEN), 2, 0, 0) + OPEN)
        assert scram._read(8) == AMQP_HEADER
        # (a listener whose saslMechanisms has EXTERNAL asks every client for a certificate,
        # as qdrouterd's: the SCRAM client uses listener 4, which does not)
        client.connect(amqps(r, 0), ssl_domain=domain(certs, "alice"), allowed_mechs="EXTERNAL")
        client.wait(lambda: len(tls_rows(r)) == 2, msg="both TLS connections' rows")
        res = subprocess.run([str(qdstat), "-b", "%s:%d" % r.addresses[2], "-c"],
                             stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    finally:
        scram.close()
    assert res.returncode == 0, res.stderr
    lines = [l for l in res.stdout.splitlines() if "127.0.0.1:" in l]
    assert len(lines) == 3, res.stdout  # the two TLS clients, qdstat's own
    assert any(re.search(r"TLSv1\.3\(TLS_\S+\)\s+%s\(SCRAM-SHA-256\)" % re.escape(USER), l)
               for l in lines), res.stdout
    # qdstat writes EXTERNAL as x.509
    assert any(re.search(r"TLSv1\.3\(TLS_\S+\)\s+%s\(x\.509\)" % re.escape(ALICE_DN), l)
               for l in lines), res.stdout
