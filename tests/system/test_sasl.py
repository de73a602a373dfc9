"""SASL through Cyrus (router/sasl.c): a listener with authenticatePeer checks users against a
sasldb made here with saslpasswd2 and a Cyrus configuration file written here, exactly as a
qdrouterd deployment has them (saslConfigDir, saslConfigName, mech_list, sasldb_path).

Library clients give up by themselves when the router offers nothing they like, which proves
nothing about the router: refusals are also checked with the small SASL client below, which
speaks the SASL frames over a raw socket, and SCRAM-SHA-256 (which no packaged client speaks
here) with a client of RFC 5802 / RFC 7677 that verifies the server's signature."""

import base64
import hashlib
import hmac
import os
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest
from proton import Delivery, Message
from proton import ConnectionException
from proton.utils import BlockingConnection

import listener_metrics as lm
from clients import Client, raw_exchange
from conftest import REPO_ROOT, run_junctiond, write_config

PEER_BIN = REPO_ROOT.parent / "shared" / "peer" / "bin"
REALM = "example.com"
USER = "alice@" + REALM
PASSWORD = "s3cret-Pa55"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
OPEN = b"\x00\x53\x10\xc0\x04\x01\xa1\x01x"

# sasl-outcome codes (AMQP 1.0 part 5.3.3.6)
OK, AUTH = 0, 1

pytestmark = pytest.mark.skipif(shutil.which("saslpasswd2", path=os.environ.get("PATH", "") +
                                             ":/usr/sbin:/sbin") is None,
                                reason="saslpasswd2 (Debian package sasl2-bin) is not installed")


def saslpasswd2():
    return shutil.which("saslpasswd2", path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


@pytest.fixture
def sasl_dir(tmp_path):
    """A Cyrus configuration directory: junction.conf and a sasldb with USER in it."""
    d = tmp_path / "sasl"
    d.mkdir()
    db = d / "users.sasldb"
    subprocess.run([saslpasswd2(), "-c", "-p", "-f", str(db), "-u", REALM, "alice"],
                   input=PASSWORD + "\n", text=True, check=True, timeout=30)

    write_conf(d, "PLAIN SCRAM-SHA-256")
    return d


def write_conf(d, mech_list):
    """The Cyrus configuration file of saslConfigName "junction" in directory d."""
    (d / "junction.conf").write_text("pwcheck_method: auxprop\nauxprop_plugin: sasldb\n"
                                     "sasldb_path: %s\nmech_list: %s\n"
                                     % (d / "users.sasldb", mech_list))


def auth_router(make_router, sasl_dir, mechs=None):
    """Listener 0 authenticates; listener 1 is a plain one (for qdstat); listener 2 serves
    /metrics."""
    lst = {"host": "127.0.0.1", "port": "0", "authenticatePeer": "yes"}
    if mechs:
        lst["saslMechanisms"] = mechs
    return make_router(router={"saslConfigDir": str(sasl_dir), "saslConfigName": "junction"},
                       listeners=[lst, {"host": "127.0.0.1", "port": "0"},
                                  {"host": "127.0.0.1", "port": "0", "http": True}])


AUTH_LISTENER = "listener/127.0.0.1:0:1"  # listener 0's name, and its stats label


def auth_failures(r, want):
    """Listener 0's authFailed by reason (auth_router's), once it is `want`."""
    return lm.wait_value(lambda: lm.auth_failed(r.addresses[2], AUTH_LISTENER), want)


# ---- a SASL client over a raw socket -------------------------------------------------------

def _frame(body):
    return struct.pack(">IBBH", 8 + len(body), 2, 1, 0) + body


def _binary(b):
    return (b"\xa0" + bytes([len(b)]) if len(b) < 256 else b"\xb0" + struct.pack(">I", len(b))) + b


def _list(*fields):
    body = b"".join(fields)
    return b"\xd0" + struct.pack(">II", len(body) + 4, len(fields)) + body


def sasl_init(mech, initial=None):
    m = mech.encode()
    fields = [b"\xa3" + bytes([len(m)]) + m]
    if initial is not None:
        fields.append(_binary(initial))
    return _frame(b"\x00\x53\x41" + _list(*fields))


def sasl_response(data):
    return _frame(b"\x00\x53\x43" + _list(_binary(data)))


def _decode(buf, pos):
    """One AMQP value (the few types the SASL performatives use): (value, next pos)."""
    return _body(buf[pos], buf, pos + 1)


def _body(c, buf, pos):
    """The value of constructor c whose bytes start at pos: (value, next pos)."""
    if c == 0x40:
        return None, pos
    if c == 0x50:
        return buf[pos], pos + 1
    if c in (0xa0, 0xa3):
        n = buf[pos]
        v = bytes(buf[pos + 1:pos + 1 + n])
        return (v.decode() if c == 0xa3 else v), pos + 1 + n
    if c in (0xb0, 0xb3):
        n = struct.unpack_from(">I", buf, pos)[0]
        v = bytes(buf[pos + 4:pos + 4 + n])
        return (v.decode() if c == 0xb3 else v), pos + 4 + n
    if c == 0x45:
        return [], pos
    if c in (0xc0, 0xd0, 0xe0, 0xf0):
        small = c in (0xc0, 0xe0)
        count = buf[pos + 1] if small else struct.unpack_from(">I", buf, pos + 4)[0]
        pos += 2 if small else 8
        ctor = None
        if c in (0xe0, 0xf0):  # an array: one constructor for all its elements
            ctor = buf[pos]
            pos += 1
        out = []
        for _ in range(count):
            v, pos = _body(ctor, buf, pos) if ctor is not None else _decode(buf, pos)
            out.append(v)
        return out, pos
    raise ValueError("type 0x%02x not handled" % c)


class SaslClient:
    """Speaks the SASL layer: header, frames in, frames out."""

    def __init__(self, host, port):
        self.s = socket.create_connection((host, port), timeout=5)
        self.buf = b""
        self.s.sendall(SASL_HEADER)
        assert self._read(8) == SASL_HEADER

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError("the router closed the connection")
            self.buf += chunk
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def frame(self):
        """(descriptor code, fields) of the next SASL frame."""
        size, doff, ftype, _ = struct.unpack(">IBBH", self._read(8))
        body = self._read(size - 8)[doff * 4 - 8:]
        assert ftype == 1 and body[:2] == b"\x00\x53"
        fields, _ = _decode(body, 3)
        return body[2], fields

    def mechanisms(self):
        code, fields = self.frame()
        assert code == 0x40
        m = fields[0]
        return m if isinstance(m, list) else [m]

    def send(self, data):
        self.s.sendall(data)

    def closed(self, timeout=5):
        """Whether the router closes the socket within timeout (whatever it writes first)."""
        self.s.settimeout(timeout)
        try:
            while self.s.recv(65536):
                pass
            return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def close(self):
        self.s.close()


def plain_outcome(r, user, password, mech="PLAIN"):
    c = SaslClient(r.host, r.port)
    try:
        c.mechanisms()
        c.send(sasl_init(mech, b"\0" + user.encode() + b"\0" + password.encode()))
        code, fields = c.frame()
        assert code == 0x44, "expected a sasl-outcome, got 0x%02x" % code
        return fields[0]
    finally:
        c.close()


# ---- SCRAM (RFC 5802, RFC 7677) ------------------------------------------------------------

def scram_login(host, port, user, password, hname="sha256", mech="SCRAM-SHA-256", client=None):
    """Log in with SCRAM over the raw SASL layer; returns (outcome code, server verified).
    With `client` (a SaslClient that has read the SASL header), over it, left open."""
    h = getattr(hashlib, hname)
    c = client or SaslClient(host, port)
    try:
        assert mech in c.mechanisms()
        cnonce = base64.b64encode(os.urandom(18)).decode()
        first_bare = "n=%s,r=%s" % (user.replace("=", "=3D").replace(",", "=2C"), cnonce)
        c.send(sasl_init(mech, ("n,," + first_bare).encode()))
        code, fields = c.frame()
        assert code == 0x42, "expected a sasl-challenge, got 0x%02x %r" % (code, fields)
        server_first = fields[0].decode()
        attrs = dict(kv.split("=", 1) for kv in server_first.split(","))
        assert attrs["r"].startswith(cnonce) and len(attrs["r"]) > len(cnonce)
        salted = hashlib.pbkdf2_hmac(hname, password.encode(), base64.b64decode(attrs["s"]),
                                     int(attrs["i"]))
        client_key = hmac.new(salted, b"Client Key", h).digest()
        stored_key = h(client_key).digest()
        final_bare = "c=biws,r=" + attrs["r"]
        auth_message = ",".join([first_bare, server_first, final_bare]).encode()
        client_sig = hmac.new(stored_key, auth_message, h).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, client_sig))
        c.send(sasl_response((final_bare + ",p=" + base64.b64encode(proof).decode()).encode()))
        server_key = hmac.new(salted, b"Server Key", h).digest()
        want = b"v=" + base64.b64encode(hmac.new(server_key, auth_message, h).digest())
        code, fields = c.frame()
        verified = False
        if code == 0x42:  # server-final as a challenge: answered with an empty response
            verified = fields[0] == want
            c.send(sasl_response(b""))
            code, fields = c.frame()
        assert code == 0x44
        if len(fields) > 1 and fields[1]:
            verified = fields[1] == want
        return fields[0], verified
    finally:
        if client is None:
            c.close()


# ---- the tests -----------------------------------------------------------------------------

def test_plain_login_with_the_right_password_routes(make_router, sasl_dir):
    r = auth_router(make_router, sasl_dir)
    assert "mechanisms available:" in r.stderr_text()
    c = Client()
    try:
        conn = c.connect(r.url, user=USER, password=PASSWORD, allowed_mechs="PLAIN")
        rcv = conn.receiver("closest.sasl", settle="accept")
        snd = conn.sender("closest.sasl")
        dlv = snd.send(Message(body="authenticated"))
        assert rcv.get().body == "authenticated"
        assert snd.wait_outcome(dlv) == Delivery.ACCEPTED
    finally:
        c.close()


@pytest.mark.parametrize("user,password", [(USER, "wrong"), ("mallory@" + REALM, PASSWORD)],
                         ids=["wrong-password", "unknown-user"])
def test_bad_credentials_get_the_auth_outcome(make_router, sasl_dir, user, password):
    r = auth_router(make_router, sasl_dir)
    with pytest.raises(ConnectionException, match="unauthorized-access"):
        BlockingConnection(r.url, user=user, password=password, allowed_mechs="PLAIN", timeout=10)
    assert plain_outcome(r, user, password) == AUTH
    # one line per failed login (the log is written by its own thread: wait for the second)
    deadline = time.monotonic() + 5
    while True:
        failed = [l for l in r.stderr_lines() if "authentication of client 127.0.0.1:" in l]
        if len(failed) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert len(failed) == 2 and all("(mechanism PLAIN)" in l for l in failed)
    assert all(l.endswith("(listener %s, reason credentials)" % AUTH_LISTENER) for l in failed)
    assert password not in r.stderr_text()
    assert auth_failures(r, lm.only("credentials", 2)) == lm.only("credentials", 2)
    # the router goes on: the right password still logs in
    assert plain_outcome(r, USER, PASSWORD) == OK


def test_client_skipping_sasl_is_refused(make_router, sasl_dir):
    r = auth_router(make_router, sasl_dir)
    open_frame = struct.pack(">IBBH", 8 + len(OPEN), 2, 0, 0) + OPEN
    got, closed = raw_exchange(r.host, r.port, AMQP_HEADER + open_frame, timeout=5)
    assert closed
    # Proton refuses as it does in qdrouterd: the connection ends before any AMQP frame
    # (nothing could be attached), with the policy error in the log
    assert b"\x00\x53\x10" not in got, got
    r.wait_log("policy-error Client skipped authentication - forbidden")
    assert auth_failures(r, lm.only("skipped")) == lm.only("skipped")


def test_anonymous_refused_when_not_in_mech_list(make_router, sasl_dir):
    r = auth_router(make_router, sasl_dir)
    c = SaslClient(r.host, r.port)
    try:
        mechs = c.mechanisms()
        assert "ANONYMOUS" not in mechs and "PLAIN" in mechs
        c.send(sasl_init("ANONYMOUS", b"guest"))
        code, fields = c.frame()
        assert code == 0x44 and fields[0] != OK
        assert c.closed()
    finally:
        c.close()
    assert auth_failures(r, lm.only("mechanism")) == lm.only("mechanism")


def test_anonymous_allowed_when_listed(make_router, sasl_dir):
    write_conf(sasl_dir, "PLAIN ANONYMOUS")
    # authenticatePeer no: ANONYMOUS is Cyrus's, offered as mech_list says
    r = make_router(router={"saslConfigDir": str(sasl_dir), "saslConfigName": "junction"},
                    listener={"saslMechanisms": "ANONYMOUS PLAIN"})
    c = SaslClient(r.host, r.port)
    try:
        assert set(c.mechanisms()) == {"ANONYMOUS", "PLAIN"}
        c.send(sasl_init("ANONYMOUS", b"guest"))
        code, fields = c.frame()
        assert code == 0x44 and fields[0] == OK
    finally:
        c.close()


def test_sasl_mechanisms_restricts_the_offer(make_router, sasl_dir):
    r = auth_router(make_router, sasl_dir, mechs="SCRAM-SHA-256")
    c = SaslClient(r.host, r.port)
    try:
        assert c.mechanisms() == ["SCRAM-SHA-256"]
    finally:
        c.close()
    assert plain_outcome(r, USER, PASSWORD) != OK  # PLAIN is not on offer
    # the client that read the offer and left counts as an exchange aborted
    want = dict(lm.only("mechanism"), aborted=1)
    assert auth_failures(r, want) == want
    r.wait_log(r"failed \(mechanism PLAIN\): amqp:unauthorized-access Client mechanism not in "
               r"mechanism inclusion list\..*\(listener %s, reason mechanism\)" % AUTH_LISTENER)


def test_scram_sha_256_login_verifies_the_server(make_router, sasl_dir):
    if not any(Path(p, "libscram.so.2").exists() for p in
               ("/usr/lib/x86_64-linux-gnu/sasl2", "/usr/lib/sasl2", "/usr/lib64/sasl2")):
        pytest.skip("the Cyrus SCRAM plugin (libsasl2-modules) is not installed")
    r = auth_router(make_router, sasl_dir)
    assert "SCRAM-SHA-256" in r.stderr_text()
    code, verified = scram_login(r.host, r.port, USER, PASSWORD)
    assert code == OK and verified
    code, verified = scram_login(r.host, r.port, USER, "wrong")
    assert code == AUTH


def test_qdstat_shows_user_and_mechanism(make_router, sasl_dir):
    exe = PEER_BIN / "qdstat"
    if not exe.exists():
        pytest.skip("the reference qdstat is not in ../shared/peer (%s)" % exe)
    r = auth_router(make_router, sasl_dir)
    c = Client()
    try:
        c.connect(r.url, user=USER, password=PASSWORD, allowed_mechs="PLAIN")
        h, p = r.addresses[1]
        out = subprocess.run([str(exe), "-b", "%s:%d" % (h, p), "-c"], stdin=subprocess.DEVNULL,
                             capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        assert "%s(PLAIN)" % USER in out.stdout, out.stdout
        # qdstat itself skips SASL: "no-auth", as qdrouterd shows it (user "anonymous",
        # no mechanism, not authenticated)
        assert "no-auth" in out.stdout, out.stdout
    finally:
        c.close()


def test_unusable_sasl_config_dir_stops_start_up(tmp_path):
    cfg = write_config(tmp_path / "r.json", [
        ["router", {"id": "R", "saslConfigDir": str(tmp_path / "missing")}],
        ["listener", {"host": "127.0.0.1", "port": "0", "authenticatePeer": "yes"}]])
    out = run_junctiond(["-c", cfg])
    assert out.returncode != 0
    lines = [l for l in out.stderr.splitlines() if "saslConfigDir" in l]
    assert len(lines) == 1 and "No such file or directory" in lines[0], out.stderr


def test_external_is_not_offered_without_tls(make_router, sasl_dir):
    """EXTERNAL names the user by a client certificate (test_tls_clientcert.py): a plain
    client has none, so it is not offered."""
    r = auth_router(make_router, sasl_dir, mechs="EXTERNAL PLAIN")
    c = SaslClient(r.host, r.port)
    try:
        assert c.mechanisms() == ["PLAIN"]
    finally:
        c.close()


# ---- bad SASL input: each closes that connection, the router goes on -----------------------

def _bad_streams():
    init = sasl_init("PLAIN", b"\0" + USER.encode() + b"\0" + PASSWORD.encode())
    big = sasl_init("PLAIN", b"\0" + USER.encode() + b"\0" + b"x" * 70000)
    return {
        "response-before-init": SASL_HEADER + sasl_response(b"abc"),
        "second-init": SASL_HEADER + sasl_init("SCRAM-SHA-256", b"n,,n=a,r=x") +
        sasl_init("SCRAM-SHA-256", b"n,,n=a,r=x"),
        "amqp-frame-in-sasl-layer": SASL_HEADER + struct.pack(">IBBH", 8 + len(OPEN), 2, 0, 0) +
        OPEN,
        "oversized-init": SASL_HEADER + big,
        "init-truncated-list": SASL_HEADER + _frame(b"\x00\x53\x41\xc0\x10\x02\xa3\x05PLAIN"),
        "unknown-mechanism": SASL_HEADER + sasl_init("NO-SUCH-MECH", b"x"),
        "init-after-outcome": SASL_HEADER + init + init,
    }


BAD = _bad_streams()

# the reason each is counted under (init-after-outcome: the first init logged in)
BAD_REASON = {"response-before-init": "protocol", "second-init": "credentials",
              "amqp-frame-in-sasl-layer": "protocol", "oversized-init": "protocol",
              "init-truncated-list": "protocol", "unknown-mechanism": "mechanism",
              "init-after-outcome": None}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_sasl_input_closes_the_connection(make_router, sasl_dir, name):
    r = auth_router(make_router, sasl_dir)
    t0 = time.monotonic()
    got, closed = raw_exchange(r.host, r.port, BAD[name], timeout=5)
    assert closed, "connection still open %.1f s after %s" % (time.monotonic() - t0, name)
    assert b"\x00\x53\x11" not in got  # never a begin: nothing attached
    if name in ("unknown-mechanism",):
        # the SASL outcome (code 1 "auth" or 4 "sys-perm") ends it, not a framing error
        assert b"\x00\x53\x44" in got
    # the router goes on: a right login still works
    assert plain_outcome(r, USER, PASSWORD) == OK
    want = lm.only(BAD_REASON[name]) if BAD_REASON[name] else lm.only("credentials", 0)
    assert auth_failures(r, want) == want
    # one line for the failure, naming the listener and the reason
    if BAD_REASON[name]:
        r.wait_log("SASL: authentication of client", timeout=15)
    failed = [l for l in r.stderr_lines() if "SASL: authentication of client" in l]
    if BAD_REASON[name]:
        assert len(failed) == 1, failed
        assert failed[0].endswith("(listener %s, reason %s)" % (AUTH_LISTENER, BAD_REASON[name]))
    else:
        assert failed == []


def test_logins_in_parallel_on_every_worker(make_router, sasl_dir):
    """Cyrus's state is the process's: connections on different workers authenticate at the
    same time (the TSan run checks they share nothing unguarded)."""
    import threading
    r = make_router(router={"saslConfigDir": str(sasl_dir), "saslConfigName": "junction",
                            "workerThreads": 4},
                    listener={"authenticatePeer": "yes"})
    results = []

    def one(i):
        results.append(plain_outcome(r, USER, PASSWORD if i % 2 == 0 else "wrong"))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert sorted(results) == [OK] * 8 + [AUTH] * 8
