"""authServicePlugin (router/authsvc.c): a listener whose saslPlugin names an
authServicePlugin hands each client's SASL exchange to a remote AMQP authentication service,
as qdrouterd's does.

The authentication service is written here (AuthService, a thread of the test): Debian's
Proton-Python has no Cyrus, so its SASL layer is its own - a raw socket, the SASL frames and
the AMQP open encoded with proton.Data - and, for the sslProfile case, TLS with Python's ssl
module.  It offers PLAIN and ANONYMOUS, allows one user and refuses any other, and answers the
router's open with the properties qdrouterd's services send (authenticated-identity {sub,
preferred_username}, address-authz).  Clients: Proton-Python with PLAIN, and the raw SASL
client of test_sasl.py where the exact frames the router sends matter (a library client that
finds no mechanism it likes gives up by itself, which proves nothing about the router)."""

import socket
import ssl
import struct
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from proton import Array, Data, Described, Message, UNDESCRIBED, symbol, ubyte, uint, ulong
from proton import ConnectionException, Delivery
from proton.utils import BlockingConnection

from clients import Client
from conftest import REPO_ROOT, free_port, router_entities
from meshnet import stop_process
from qdr_peer import need_qdrouterd, start_standalone
from test_sasl import AUTH, OK, SaslClient, plain_outcome, sasl_init
from test_tls import certs, make_ca, start_fails  # noqa: F401 (certs: a fixture)

PEER_BIN = REPO_ROOT.parent / "shared" / "peer" / "bin"
USER, PASSWORD = "alice", "wonderland"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"


# ---- the authentication service ------------------------------------------------------------

def frame(ftype, code, fields):
    d = Data()
    d.put_object(Described(ulong(code), fields))
    body = d.encode()
    return struct.pack(">IBBH", 8 + len(body), 2, ftype, 0) + body


class AuthService:
    """Listens on 127.0.0.1 (an ephemeral port); one thread per connection.

    mode: "normal"; "close-after-init" (the socket closes once the sasl-init came, before any
    outcome); "close-at-once" (closes right after accepting); "garbage" (answers the sasl-init
    with a malformed frame); "silent" (never answers; notes when the router closes)."""

    def __init__(self, mode="normal", tls=None):
        self.mode = mode
        self.tls = tls
        self.seen = []  # one dict per exchange: what the router sent
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.stopped = False
        self.threads = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self.threads.append(t)

    def stop(self):
        self.stopped = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes accept()
        except OSError:
            pass
        self.sock.close()

    def _accept(self):
        while not self.stopped:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(s,), daemon=True)
            t.start()
            self.threads.append(t)

    @staticmethod
    def _read(s, buf, n):
        while len(buf) < n:
            chunk = s.recv(65536)
            if not chunk:
                raise EOFError
            buf.extend(chunk)
        out = bytes(buf[:n])
        del buf[:n]
        return out

    def _frame(self, s, buf):
        size, doff, _, _ = struct.unpack(">IBBH", self._read(s, buf, 8))
        body = self._read(s, buf, size - 8)[doff * 4 - 8:]
        d = Data()
        d.decode(body)
        d.rewind()
        d.next()
        return d.get_object()

    def _serve(self, s):
        seen = {}
        with self.lock:
            self.seen.append(seen)
        try:
            s.settimeout(30)
            if self.tls:
                s = self.tls.wrap_socket(s, server_side=True)
            if self.mode == "close-at-once":
                return
            if self.mode == "silent":  # reads, never answers: until the router lets go
                while s.recv(65536):
                    pass
                seen["eof"] = time.monotonic()
                return
            buf = bytearray()
            assert self._read(s, buf, 8) == SASL_HEADER
            s.sendall(SASL_HEADER + frame(1, 0x40, [Array(UNDESCRIBED, Data.SYMBOL,
                                                          symbol("PLAIN"),
                                                          symbol("ANONYMOUS"))]))
            init = self._frame(s, buf)
            mech, resp = init.value[0], init.value[1]
            seen["mechanism"] = mech
            seen["sasl_hostname"] = init.value[2] if len(init.value) > 2 else None
            if self.mode == "close-after-init":
                return
            if self.mode == "garbage":  # an outcome whose list runs past its frame
                s.sendall(struct.pack(">IBBH", 16, 2, 1, 0) + b"\x00\x53\x44\xc0\xff\xff\x50\x00")
                time.sleep(1)
                return
            user = None
            if mech == "PLAIN" and resp is not None:
                _, u, p = bytes(resp).split(b"\0", 2)
                if u.decode() == USER and p.decode() == PASSWORD:
                    user = USER
            elif mech == "ANONYMOUS":
                user = "anonymous-guest"
            if user is None:
                s.sendall(frame(1, 0x44, [ubyte(1)]))
                return
            s.sendall(frame(1, 0x44, [ubyte(0)]))
            assert self._read(s, buf, 8) == AMQP_HEADER
            op = self._frame(s, buf)
            seen["open_hostname"] = op.value[1]
            seen["desired"] = list(op.value[8]) if len(op.value) > 8 and op.value[8] else []
            props = {symbol("authenticated-identity"): {symbol("sub"): user,
                                                        symbol("preferred_username"): user},
                     symbol("address-authz"): {"q": Array(UNDESCRIBED, Data.STRING, "send",
                                                          "recv")}}
            s.sendall(AMQP_HEADER + frame(0, 0x10, ["auth-service", None, uint(65536), None,
                                                    None, None, None, None, None, props]))
            seen["outcome"] = "ok"
            try:  # the router closes its connection once it has the identity
                self._frame(s, buf)
                s.sendall(frame(0, 0x18, []))
            except (EOFError, OSError):
                pass
        except (EOFError, OSError, AssertionError) as e:
            seen["error"] = repr(e)
        finally:
            try:
                s.close()
            except OSError:
                pass


@pytest.fixture
def service():
    made = []

    def make(**kw):
        svc = AuthService(**kw)
        made.append(svc)
        return svc

    yield make
    for svc in made:
        svc.stop()


def plugin_router(make_router, port, plugin=None, listener=None, extra=()):
    """Listener 0 delegates to the authentication service; listener 1 is plain (qdstat)."""
    p = {"name": "auth", "host": "127.0.0.1", "port": str(port), "realm": "example.com"}
    p.update(plugin or {})
    lst = {"host": "127.0.0.1", "port": "0", "saslPlugin": "auth", "authenticatePeer": "yes",
           "saslMechanisms": "PLAIN"}
    lst.update(listener or {})
    return make_router(router_entities(listeners=[lst, {"host": "127.0.0.1", "port": "0"}],
                                       extra=[["authServicePlugin", p]] + list(extra)))


def wait_lines(r, text, n=1, timeout=5):
    deadline = time.monotonic() + timeout
    while True:
        found = [l for l in r.stderr_lines() if text in l]
        if len(found) >= n or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def outcome_frames(r, user, password):
    """The raw SASL exchange: (mechanisms offered, outcome code)."""
    c = SaslClient(r.host, r.port)
    try:
        mechs = c.mechanisms()
        c.send(sasl_init("PLAIN", b"\0" + user.encode() + b"\0" + password.encode()))
        code, fields = c.frame()
        assert code == 0x44, "expected a sasl-outcome, got 0x%02x" % code
        if fields[0] != OK:  # the client is let go: nothing can attach
            assert c.closed()
        return mechs, fields[0]
    finally:
        c.close()


def routes(conn, address="closest.authsvc"):
    rcv = conn.receiver(address, settle="accept")
    snd = conn.sender(address)
    dlv = snd.send(Message(body="through the service"))
    assert rcv.get().body == "through the service"
    assert snd.wait_outcome(dlv) == Delivery.ACCEPTED


# ---- the tests -----------------------------------------------------------------------------

def test_allowed_user_gets_in_and_routes(make_router, service):
    svc = service()
    r = plugin_router(make_router, svc.port)
    c = Client()
    try:
        conn = c.connect(r.url, user=USER, password=PASSWORD, allowed_mechs="PLAIN")
        routes(conn)
    finally:
        c.close()
    seen = [s for s in svc.seen if s.get("outcome") == "ok"]
    assert len(seen) == 1, svc.seen
    # what qdrouterd's relay sends the service: the client's mechanism, the realm as the
    # sasl-init hostname, the service's host as the open's hostname, ADDRESS-AUTHZ desired
    assert seen[0]["mechanism"] == "PLAIN"
    assert seen[0]["sasl_hostname"] == "example.com"
    assert seen[0]["open_hostname"] == "127.0.0.1"
    assert "ADDRESS-AUTHZ" in seen[0]["desired"]
    assert wait_lines(r, "authenticated as %s by the authentication service" % USER)
    # the router's connection to the service is closed once it has the outcome
    deadline = time.monotonic() + 5
    while "error" not in seen[0] and any(t.is_alive() for t in svc.threads[1:]):
        assert time.monotonic() < deadline, "the router kept its connection to the service"
        time.sleep(0.05)


def test_mechanisms_are_the_services_filtered_by_the_listener(make_router, service):
    svc = service()
    r = plugin_router(make_router, svc.port, listener={"saslMechanisms": "PLAIN ANONYMOUS"})
    mechs, code = outcome_frames(r, USER, PASSWORD)
    assert sorted(mechs) == ["ANONYMOUS", "PLAIN"] and code == OK
    r2 = plugin_router(make_router, svc.port)  # saslMechanisms PLAIN
    mechs, code = outcome_frames(r2, USER, PASSWORD)
    assert mechs == ["PLAIN"] and code == OK


def test_refused_user_gets_the_failed_outcome(make_router, service):
    svc = service()
    r = plugin_router(make_router, svc.port)
    with pytest.raises(ConnectionException, match="unauthorized-access"):
        BlockingConnection(r.url, user="mallory", password=PASSWORD, allowed_mechs="PLAIN",
                           timeout=10)
    with pytest.raises(ConnectionException, match="unauthorized-access"):
        BlockingConnection(r.url, user=USER, password="wrong", allowed_mechs="PLAIN", timeout=10)
    assert outcome_frames(r, USER, "wrong")[1] == AUTH
    failed = wait_lines(r, "authentication of client 127.0.0.1:", 3)
    assert len(failed) == 3 and all("refused by the authentication service" in l
                                    for l in failed), failed
    assert "wrong" not in r.stderr_text() and PASSWORD not in r.stderr_text()
    # the router goes on: the right user still gets in
    assert outcome_frames(r, USER, PASSWORD)[1] == OK


def test_service_down_gives_the_auth_outcome(make_router, service):
    port = free_port()  # nothing listens there
    r = plugin_router(make_router, port)
    mechs, code = outcome_frames(r, USER, PASSWORD)
    # qdrouterd's: an empty mechanism list, then outcome auth (1)
    assert mechs == [] and code == AUTH
    # which Proton-Python takes for the end of SASL, then fails on the outcome frame (as it
    # does with qdrouterd: test_same_outcomes_as_qdrouterd)
    with pytest.raises(ConnectionException, match="framing-error|unauthorized-access"):
        BlockingConnection(r.url, user=USER, password=PASSWORD, allowed_mechs="PLAIN",
                           timeout=10)
    lines = wait_lines(r, "authentication of client 127.0.0.1:", 2)
    assert len(lines) == 2 and all("unreachable" in l and "127.0.0.1:%d" % port in l
                                   for l in lines), lines
    # the router goes on (its plain listener still routes)
    c = Client()
    try:
        routes(c.connect(r.url_of(1)))
    finally:
        c.close()


@pytest.mark.parametrize("mode", ["close-after-init", "close-at-once"])
def test_service_closing_mid_exchange_gives_the_auth_outcome(make_router, service, mode):
    svc = service(mode=mode)
    r = plugin_router(make_router, svc.port)
    mechs, code = outcome_frames(r, USER, PASSWORD)
    assert code == AUTH
    assert mechs == (["PLAIN"] if mode == "close-after-init" else [])
    lines = wait_lines(r, "authentication of client 127.0.0.1:")
    assert len(lines) == 1 and "closed the connection before its outcome" in lines[0], lines
    # again, with a client that stops half-way: the service connection goes too
    s = socket.create_connection((r.host, r.port), timeout=5)
    s.sendall(SASL_HEADER)
    s.close()
    assert outcome_frames(r, USER, PASSWORD)[1] == AUTH


def test_service_sending_garbage_gives_the_auth_outcome(make_router, service):
    svc = service(mode="garbage")
    r = plugin_router(make_router, svc.port)
    assert outcome_frames(r, USER, PASSWORD) == (["PLAIN"], AUTH)
    lines = wait_lines(r, "authentication of client 127.0.0.1:")
    assert len(lines) == 1 and "a malformed performative" in lines[0], lines


def test_client_leaving_during_the_exchange(make_router, service):
    """Clients that leave at each point: the router goes on, the service's connections go."""
    svc = service()
    r = plugin_router(make_router, svc.port)
    for n in range(20):
        c = SaslClient(r.host, r.port)
        if n % 2:
            c.mechanisms()
            c.send(sasl_init("PLAIN", b"\0" + USER.encode() + b"\0"))
        c.close()
    assert outcome_frames(r, USER, PASSWORD)[1] == OK


def test_silent_service_is_let_go_with_its_client(make_router, service):
    """A service that never answers: the client hears nothing (no mechanisms before the
    service's), and when the client leaves - or its handshake time runs out - the router
    closes its connection to the service."""
    svc = service(mode="silent")
    r = plugin_router(make_router, svc.port, listener={"initialHandshakeTimeoutSeconds": 2})
    c = SaslClient(r.host, r.port)
    c.s.settimeout(0.5)
    with pytest.raises(socket.timeout):
        c.s.recv(1)
    c.close()
    # the handshake deadline closes the second one
    c2 = SaslClient(r.host, r.port)
    try:
        assert c2.closed(timeout=10)
    finally:
        c2.close()
    deadline = time.monotonic() + 10
    while sum("eof" in x for x in svc.seen) < 2:
        assert time.monotonic() < deadline, svc.seen
        time.sleep(0.05)


def test_logins_in_parallel(make_router, service):
    svc = service()
    r = plugin_router(make_router, svc.port)
    users = [(USER, PASSWORD) if i % 3 else ("mallory", "x") for i in range(30)]
    with ThreadPoolExecutor(10) as pool:
        got = list(pool.map(lambda up: outcome_frames(r, *up)[1], users))
    assert got == [OK if u == USER else AUTH for u, _ in users]


def tls_context(certs, cert="server"):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(str(certs / (cert + ".pem")), str(certs / (cert + ".key")))
    return ctx


def test_service_behind_tls(make_router, service, certs):
    svc = service(tls=tls_context(certs))
    prof = ["sslProfile", {"name": "authtls", "caCertFile": str(certs / "ca.pem")}]
    r = plugin_router(make_router, svc.port, plugin={"sslProfile": "authtls"}, extra=[prof])
    c = Client()
    try:
        routes(c.connect(r.url, user=USER, password=PASSWORD, allowed_mechs="PLAIN"))
    finally:
        c.close()
    assert outcome_frames(r, "mallory", "x")[1] == AUTH
    assert [s.get("outcome") for s in svc.seen].count("ok") == 1, svc.seen


def test_service_with_an_untrusted_certificate(make_router, service, certs):
    svc = service(tls=tls_context(certs))
    # the profile trusts another CA: the service's certificate is refused
    prof = ["sslProfile", {"name": "authtls", "caCertFile": str(certs / "otherca.pem")}]
    r = plugin_router(make_router, svc.port, plugin={"sslProfile": "authtls"}, extra=[prof])
    assert outcome_frames(r, USER, PASSWORD)[1] == AUTH
    lines = wait_lines(r, "authentication of client 127.0.0.1:")
    assert len(lines) == 1 and "TLS handshake failed" in lines[0], lines


def test_update_of_the_plugins_profile_rebuilds_its_client_context(make_router, service, certs,
                                                                   tmp_path):
    """An sslProfile UPDATE (management) of the profile an authServicePlugin names: the next
    authentication uses the new trusted CAs, the old ones no more."""
    from test_management import junctionctl
    svc = service(tls=tls_context(certs))
    sock = tmp_path / "j.sock"
    prof = ["sslProfile", {"name": "authtls", "caCertFile": str(certs / "otherca.pem")}]
    r = plugin_router(make_router, svc.port, plugin={"sslProfile": "authtls"},
                      extra=[prof, ["management", {"socket": str(sock)}]])
    assert outcome_frames(r, USER, PASSWORD)[1] == AUTH  # the service's CA is not trusted
    for ca, want in (("ca.pem", OK), ("otherca.pem", AUTH)):
        res = junctionctl("-s", sock, "sslprofile", "update", "authtls",
                          "caCertFile=%s" % (certs / ca))
        assert res.returncode == 0, res.stderr
        assert outcome_frames(r, USER, PASSWORD)[1] == want, ca
    assert [s.get("outcome") for s in svc.seen].count("ok") == 1, svc.seen


def test_connection_row_shows_the_services_identity(make_router, service):
    exe = PEER_BIN / "qdstat"
    if not exe.exists():
        pytest.skip("the reference qdstat is not in ../shared/peer (%s)" % exe)
    svc = service()
    r = plugin_router(make_router, svc.port)
    c = Client()
    try:
        c.connect(r.url, user=USER, password=PASSWORD, allowed_mechs="PLAIN")
        h, p = r.addresses[1]
        out = subprocess.run([str(exe), "-b", "%s:%d" % (h, p), "-c"], stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        print(out.stdout)
        # the user is the service's authenticated-identity, with the client's mechanism
        assert "%s(PLAIN)" % USER in out.stdout, out.stdout
    finally:
        c.close()


def test_start_up_refuses_a_bad_plugin(tmp_path):
    line = start_fails(tmp_path, router_entities(listener={"saslPlugin": "nosuch"}))
    assert "saslPlugin 'nosuch'" in line and "no authServicePlugin" in line, line
    line = start_fails(tmp_path, router_entities(extra=[["authServicePlugin",
                                                         {"name": "auth", "port": "5672"}]]))
    assert "authServicePlugin" in line and "'host'" in line, line
    line = start_fails(tmp_path, router_entities(extra=[["authServicePlugin",
                                                         {"name": "auth", "host": "h",
                                                          "sslProfile": "nosuch"}]]))
    assert "sslProfile 'nosuch'" in line, line


def test_deprecated_auth_service_attribute(make_router, service):
    """authService "host:port", here with a host name (looked up; each address in turn: the
    service listens on 127.0.0.1 only, and localhost may be ::1 first)."""
    svc = service()
    r = plugin_router(make_router, 0, plugin={"host": "", "port": "amqp",
                                              "authService": "localhost:%d" % svc.port})
    assert "authService" in r.stderr_text()  # the deprecation warning
    assert outcome_frames(r, USER, PASSWORD)[1] == OK


@pytest.fixture
def qdrouterd(tmp_path):
    """qdrouterd 1.19 from ../shared/peer with a listener whose saslPlugin names an
    authServicePlugin at the given port: qdrouterd(port) -> (host, port) of its listener."""
    need_qdrouterd()
    procs = []

    def start(svc_port):
        port = free_port()
        procs.append(start_standalone(tmp_path / ("qdrouterd%d.json" % len(procs)), [
            ["router", {"mode": "standalone", "id": "peer"}],
            ["authServicePlugin", {"name": "auth", "host": "127.0.0.1", "port": str(svc_port),
                                   "realm": "example.com"}],
            ["listener", {"host": "127.0.0.1", "port": str(port), "saslPlugin": "auth",
                          "authenticatePeer": True, "saslMechanisms": "PLAIN"}]], port))
        return "127.0.0.1", port

    yield start
    for p in procs:
        stop_process(p)


class Addr:
    def __init__(self, host, port):
        self.host, self.port = host, port


def test_same_outcomes_as_qdrouterd(make_router, service, qdrouterd):
    """The frames a client sees, Junction's and qdrouterd 1.19's, with the same service: the
    allowed user, a refused one, the service closing after the sasl-init, the service down."""
    svc = service()
    closing = service(mode="close-after-init")
    down = free_port()
    for port, user, password in ((svc.port, USER, PASSWORD), (svc.port, "mallory", "x"),
                                 (closing.port, USER, PASSWORD), (down, USER, PASSWORD)):
        ours = outcome_frames(plugin_router(make_router, port), user, password)
        theirs = outcome_frames(Addr(*qdrouterd(port)), user, password)
        assert ours == theirs, (port, user, ours, theirs)
