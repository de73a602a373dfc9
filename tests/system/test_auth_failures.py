"""What operators see of clients that fail TLS or authentication (issue 14, points 4 and 7):
the per-listener stats (router/lstats.h: the `listener` and `listenerAuth` families) in
/metrics, junctionctl and the management listener rows, the one log line of each failure, and
the bad-input cases that test_tls.py and test_sasl.py do not already drive: a TLS handshake
the client abandons, a SASL exchange the client abandons or leaves unfinished until the
handshake timeout, SASL frames at and past maxFrameSize, and a password that must appear in
no log line even at trace level.  Each case checks the outcome on the wire, the log line, the
stat, and that the router goes on serving.

The per-listener stats are labelled by the listener's name as its management row names it
(its `name`, else "listener/<host>:<port>", with ":<id>" after port "0").  The certificates
and the sasldb come from test_tls.py's and test_sasl.py's fixtures."""

import collections
import json
import re
import socket
import ssl
import time

import pytest
from proton.utils import BlockingConnection

import listener_metrics as lm
import test_sasl as ts
import test_tls as tt
from conftest import free_port, router_entities
from listener_metrics import REASONS, only, samples, wait_value
from mgmt_tool import Node
from qdr_peer import start_standalone
from test_management import junctionctl
from test_sasl import sasl_dir  # noqa: F401  (fixture)
from test_tls import certs  # noqa: F401  (fixture)

pytestmark = [tt.pytestmark, ts.pytestmark]

Addr = collections.namedtuple("Addr", "host port")  # what plain_outcome() reads of a router

# listener names, in configuration order (index = position in r.addresses)
TLS_ONLY, PLAIN, AUTH, SCRAM_ONLY, HTTP = "tls-only", "plain", "auth", "scram-only", "http"


def full_router(make_router, certs, sasl_dir, sock=None, log=None):
    """Listeners: tls-only (requireSsl), plain, auth (authenticatePeer over TLS or plain),
    scram-only (authenticatePeer, saslMechanisms SCRAM-SHA-256), and http for /metrics.
    The handshake timeout is 1 s on the TLS and authenticating ones."""
    extra = [tt.profile(certs)]
    if sock:
        extra.append(["management", {"socket": str(sock)}])
    logs = [["log", {"module": "DEFAULT", "enable": log}]] if log else []
    return make_router(router_entities(
        router={"saslConfigDir": str(sasl_dir), "saslConfigName": "junction"},
        listeners=[
            {"name": TLS_ONLY, "host": "127.0.0.1", "port": "0", "sslProfile": "tls",
             "requireSsl": True, "initialHandshakeTimeoutSeconds": 1},
            {"name": PLAIN, "host": "127.0.0.1", "port": "0"},
            {"name": AUTH, "host": "127.0.0.1", "port": "0", "sslProfile": "tls",
             "authenticatePeer": True, "initialHandshakeTimeoutSeconds": 1},
            {"name": SCRAM_ONLY, "host": "127.0.0.1", "port": "0", "authenticatePeer": True,
             "saslMechanisms": "SCRAM-SHA-256"},
            {"name": HTTP, "host": "127.0.0.1", "port": "0", "http": True}],
        logs=logs, extra=extra))


INDEX = {TLS_ONLY: 0, PLAIN: 1, AUTH: 2, SCRAM_ONLY: 3, HTTP: 4}


def metrics_text(r, http_index=None):
    return lm.metrics_text(r.addresses[INDEX[HTTP] if http_index is None else http_index])


def lstat(r, listener, field, http_index=None):
    return lm.lstat(r.addresses[INDEX[HTTP] if http_index is None else http_index], listener,
                    field)


def auth_failed(r, listener):
    return lm.auth_failed(r.addresses[INDEX[HTTP]], listener)


def router_tls_failed(r):
    for line in metrics_text(r).splitlines():
        if line.startswith("junction_tls_handshakes_failed_total "):
            return int(float(line.split()[1]))
    raise AssertionError("no junction_tls_handshakes_failed_total")


def conn_lines(r, local_port):
    """The log lines of the connection the client made from local_port (after its Accepted
    line), without its Accepted line."""
    m = r.wait_log(r"\[C(\d+)\] Accepted connection from 127\.0\.0\.1:%d$" % local_port)
    tag = "[C%s] " % m.group(1)
    return [l for l in r.stderr_lines() if tag in l and "Accepted connection" not in l]


def failure_line(r, local_port, pattern, timeout=5):
    """The one failure line of that connection: it matches `pattern`, names the client and
    the listener, and no other line of the connection but its final "closed" reports it."""
    r.wait_log(pattern, timeout=timeout)
    r.wait_log(r"Connection from 127\.0\.0\.1:%d closed$" % local_port, timeout=timeout)
    lines = conn_lines(r, local_port)
    hits = [l for l in lines if re.search(pattern, l)]
    assert len(hits) == 1, lines
    assert "127.0.0.1:%d" % local_port in hits[0] and "(info)" in hits[0], hits[0]
    rest = [l for l in lines if l is not hits[0] and not l.endswith(
        "Connection from 127.0.0.1:%d closed" % local_port)]
    assert rest == [], "more than one line for one failure: %r" % lines
    return hits[0]


def tls_works(r, certs, i, header=ts.AMQP_HEADER):
    """A TLS client's handshake completes and the router answers its protocol header."""
    ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    with socket.create_connection(r.addresses[i], timeout=10) as s:
        with ctx.wrap_socket(s, server_hostname="localhost") as t:
            t.sendall(header)
            assert t.recv(8) == header


# ---- the families: names, labels, every reason from the start ------------------------------

def test_every_listener_has_its_stats_from_the_start(make_router, certs, sasl_dir, tmp_path):
    sock = tmp_path / "j.sock"
    r = full_router(make_router, certs, sasl_dir, sock=sock)
    text = metrics_text(r)
    for name in (TLS_ONLY, PLAIN, AUTH, SCRAM_ONLY, HTTP):
        for field in ("connections_accepted", "tls_handshakes_failed", "bad_protocol_headers"):
            assert samples(text, "junction_listener_%s_total" % field).get(
                frozenset({("listener", name)})) == 0, (name, field)
    # the reasons only for the listeners that authenticate, each at 0
    for name in (AUTH, SCRAM_ONLY):
        assert auth_failed(r, name) == {k: 0 for k in REASONS}
    assert auth_failed(r, TLS_ONLY) == {} and auth_failed(r, PLAIN) == {}
    assert "# TYPE junction_listener_auth_failed_total counter" in text
    # junctionctl: the same stats by their full names
    p = junctionctl("-s", sock, "--json", "stats", "listener*")
    assert p.returncode == 0, p.stderr
    vals = json.loads(p.stdout)
    assert vals["listener.plain.connectionsAccepted"] == 0
    assert vals["listenerAuth.auth/credentials.authFailed"] == 0
    assert "listenerAuth.plain/credentials.authFailed" not in vals


def test_an_unnamed_listener_is_labelled_as_its_management_row(make_router):
    r = make_router(router_entities(listeners=[
        {"host": "127.0.0.1", "port": "0"},
        {"host": "127.0.0.1", "port": "0", "http": True}]))
    node = Node(r.url)
    try:
        names = [row["name"] for row in node.query_dicts("listener", ["name"])]
    finally:
        node.close()
    # the AMQP connection management made is accepted on listener 0
    assert names[0] == "listener/127.0.0.1:0:1", names
    assert wait_value(lambda: lstat(r, names[0], "connections_accepted", 1), 1) == 1


def test_listeners_made_and_deleted_at_run_time_get_and_drop_their_stats(make_router):
    r = make_router(router_entities(listeners=[
        {"host": "127.0.0.1", "port": "0"},
        {"host": "127.0.0.1", "port": "0", "http": True}]))
    node = Node(r.url)
    try:
        node.create({"host": "127.0.0.1", "port": "0", "authenticatePeer": False},
                    "listener", name="made-later")
        m = r.wait_log(r"Listening on 127\.0\.0\.1:(\d+)", start=r.stderr_lines().index(
            next(l for l in r.stderr_lines() if "Operational" in l)))
        port = int(m.group(1))
        assert lstat(r, "made-later", "connections_accepted", 1) == 0
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
                s.sendall(b"HELLO / 1.0\r\n\r\n")  # not AMQP: refused
                while s.recv(100):
                    pass
        assert wait_value(lambda: lstat(r, "made-later", "connections_accepted", 1), 3) == 3
        assert lstat(r, "made-later", "bad_protocol_headers", 1) == 3
        node.delete(type="listener", name="made-later")
        assert wait_value(lambda: lstat(r, "made-later", "connections_accepted", 1), None) is None
        # made again under the same name: new stats from 0
        node.create({"host": "127.0.0.1", "port": "0"}, "listener", name="made-later")
        assert wait_value(lambda: lstat(r, "made-later", "connections_accepted", 1), 0) == 0
    finally:
        node.close()


# ---- TLS handshakes the client abandons ------------------------------------------------------

def test_half_a_client_hello_then_close(make_router, certs, sasl_dir):
    r = full_router(make_router, certs, sasl_dir)
    with socket.create_connection(r.addresses[INDEX[TLS_ONLY]], timeout=5) as s:
        port = s.getsockname()[1]
        s.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")  # a ClientHello's start
        s.shutdown(socket.SHUT_WR)
        t0 = time.monotonic()
        while s.recv(4096):
            pass
        assert time.monotonic() - t0 < 0.9  # closed at once, not by the 1 s timeout
    line = failure_line(r, port, r"closed: TLS handshake aborted")
    assert "(listener %s)" % TLS_ONLY in line
    assert wait_value(lambda: lstat(r, TLS_ONLY, "tls_handshakes_failed"), 1) == 1
    assert router_tls_failed(r) == 1
    tls_works(r, certs, INDEX[TLS_ONLY])  # the router goes on
    assert lstat(r, TLS_ONLY, "tls_handshakes_failed") == 1


def test_a_client_hello_then_silence_until_the_timeout(make_router, certs, sasl_dir):
    r = full_router(make_router, certs, sasl_dir)
    with socket.create_connection(r.addresses[INDEX[AUTH]], timeout=10) as s:
        port = s.getsockname()[1]
        s.sendall(b"\x16\x03\x01\x02\x00\x01\x00")
        t0 = time.monotonic()
        while s.recv(4096):
            pass
        assert 0.8 < time.monotonic() - t0 < 8
    line = failure_line(r, port, r"closed: no AMQP open within 1 seconds: TLS handshake not done")
    assert "(listener %s)" % AUTH in line
    assert wait_value(lambda: lstat(r, AUTH, "tls_handshakes_failed"), 1) == 1
    assert auth_failed(r, AUTH) == {k: 0 for k in REASONS}  # TLS, not the SASL layer
    tls_works(r, certs, INDEX[AUTH], ts.SASL_HEADER)


def test_a_client_hello_to_a_plain_listener(make_router, certs, sasl_dir):
    r = full_router(make_router, certs, sasl_dir)
    ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    with socket.create_connection(r.addresses[INDEX[PLAIN]], timeout=5) as s:
        port = s.getsockname()[1]
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            ctx.wrap_socket(s, server_hostname="localhost")
    line = failure_line(r, port, r"closed: not an AMQP protocol header but a TLS handshake, "
                        r"and the listener has no sslProfile")
    assert "(listener %s)" % PLAIN in line
    assert wait_value(lambda: lstat(r, PLAIN, "bad_protocol_headers"), 1) == 1
    assert lstat(r, PLAIN, "tls_handshakes_failed") == 0 and router_tls_failed(r) == 0
    got, closed = ts.raw_exchange(*r.addresses[INDEX[PLAIN]], ts.AMQP_HEADER, timeout=2)
    assert got.startswith(ts.AMQP_HEADER)  # the router goes on


# ---- SASL exchanges the client abandons or leaves unfinished ---------------------------------

@pytest.mark.parametrize("after", ["header", "scram-first"])
def test_a_sasl_exchange_the_client_abandons(make_router, certs, sasl_dir, after):
    r = full_router(make_router, certs, sasl_dir)
    c = ts.SaslClient(*r.addresses[INDEX[SCRAM_ONLY]])
    port = c.s.getsockname()[1]
    assert c.mechanisms() == ["SCRAM-SHA-256"]
    if after == "scram-first":
        c.send(ts.sasl_init("SCRAM-SHA-256", b"n,,n=" + ts.USER.encode() + b",r=abcdefgh"))
        assert c.frame()[0] == 0x42  # the server's first message: a challenge
    c.s.shutdown(socket.SHUT_WR)
    assert c.closed()
    c.close()
    line = failure_line(r, port, r"SASL: authentication of client 127\.0\.0\.1:%d failed" % port)
    assert "(listener %s, reason aborted)" % SCRAM_ONLY in line
    assert ("mechanism SCRAM-SHA-256" if after == "scram-first" else "mechanism none") in line
    assert wait_value(lambda: auth_failed(r, SCRAM_ONLY), only("aborted")) == only("aborted")
    code, verified = ts.scram_login(*r.addresses[INDEX[SCRAM_ONLY]], ts.USER, ts.PASSWORD)
    assert code == ts.OK and verified


def test_a_sasl_exchange_left_unfinished_times_out(make_router, certs, sasl_dir):
    r = full_router(make_router, certs, sasl_dir)
    # the router's second counts from the accept, so from before the connect here (a
    # sanitizer build may take most of it to answer the first SCRAM step)
    t0 = time.monotonic()
    c = ts.SaslClient(*r.addresses[INDEX[AUTH]])
    port = c.s.getsockname()[1]
    c.mechanisms()
    c.send(ts.sasl_init("SCRAM-SHA-256", b"n,,n=" + ts.USER.encode() + b",r=abcdefgh"))
    assert c.frame()[0] == 0x42
    assert c.closed(timeout=8)
    assert 0.95 < time.monotonic() - t0 < 9
    c.close()
    line = failure_line(r, port, r"SASL: authentication of client 127\.0\.0\.1:%d failed "
                        r"\(mechanism SCRAM-SHA-256\): no AMQP open within 1 seconds" % port)
    assert "(listener %s, reason timeout)" % AUTH in line
    assert wait_value(lambda: auth_failed(r, AUTH), only("timeout")) == only("timeout")
    assert ts.plain_outcome(Addr(*r.addresses[INDEX[AUTH]]), ts.USER, ts.PASSWORD) == ts.OK


# ---- SASL frames at and past maxFrameSize ----------------------------------------------------

def init_of_size(n, mech="PLAIN"):
    """A sasl-init frame of exactly n bytes (PLAIN for USER, a wrong password of x's)."""
    head = ts.sasl_init(mech, b"")
    fill = n - len(head) - (3 if n - len(head) - 2 >= 256 else 0)
    frame = ts.sasl_init(mech, b"\0" + ts.USER.encode() + b"\0" + b"x" * (fill - 2 -
                                                                          len(ts.USER)))
    assert len(frame) == n, (len(frame), n)
    return frame


def outcome_of(addr, frame):
    """The SASL outcome code the server at addr answers `frame` with, or None when it closes
    without one."""
    s = socket.create_connection(addr, timeout=5)
    got = b""
    try:
        s.sendall(ts.SASL_HEADER + frame)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
            i = got.find(b"\x00\x53\x44\xc0")  # sasl-outcome, list8: size, count, ubyte code
            if i >= 0 and len(got) >= i + 8:
                return got[i + 7]
    except (ConnectionResetError, socket.timeout):
        pass
    finally:
        s.close()
    return None


def test_qdrouterd_draws_the_same_line_for_sasl_frames(make_router, sasl_dir, tmp_path):
    """What qdrouterd 1.19 (Debian's Proton 0.37) answers: a sasl-init of maxFrameSize bytes
    is read, one byte more ends the connection without an outcome; Junction the same."""
    port = free_port()
    peer = start_standalone(tmp_path / "qdrouterd.json", [
        ["router", {"id": "Peer", "mode": "standalone"}],
        ["listener", {"host": "127.0.0.1", "port": str(port), "saslMechanisms": "ANONYMOUS"}]],
        port, timeout=20)
    try:
        peer_said = [outcome_of(("127.0.0.1", port), init_of_size(n, "ANONYMOUS"))
                     for n in (600, 16384, 16385)]
    finally:
        peer.terminate()
        peer.wait(10)
    assert peer_said == [0, 0, None]  # ANONYMOUS succeeds whatever its initial response
    ts.write_conf(sasl_dir, "PLAIN ANONYMOUS")
    r = make_router(router_entities(router={"saslConfigDir": str(sasl_dir),
                                            "saslConfigName": "junction"}, listeners=[
        {"name": "anon", "host": "127.0.0.1", "port": "0", "saslMechanisms": "ANONYMOUS"},
        {"host": "127.0.0.1", "port": "0", "http": True}]))
    assert [outcome_of(r.addresses[0], init_of_size(n, "ANONYMOUS"))
            for n in (600, 16384, 16385)] == [0, 0, None]
    # Junction counts the refusal, as a protocol failure of that listener's authentication
    assert wait_value(lambda: lm.auth_failed(r.addresses[1], "anon"), only("protocol")) == \
        only("protocol")
    r.wait_log(r"frame is larger than the maximum frame size \(listener anon, reason protocol\)")


def test_sasl_frames_up_to_max_frame_size_are_read_larger_ones_refused(make_router, certs,
                                                                        sasl_dir):
    """The AMQP 1.0 spec lets a peer refuse frames over 512 bytes before the open
    (MIN-MAX-FRAME-SIZE); Proton 0.37, and so qdrouterd 1.19, read SASL frames up to the
    listener's maxFrameSize (16384 by default) and close on a larger one with a framing error
    and no outcome.  Junction's frame guard draws the same line."""
    r = full_router(make_router, certs, sasl_dir)
    addr = r.addresses[INDEX[AUTH]]

    c = ts.SaslClient(*addr)
    c.mechanisms()
    c.send(init_of_size(16384))
    code, fields = c.frame()
    assert code == 0x44 and fields[0] == ts.AUTH  # read, and the password is wrong
    c.close()
    c = ts.SaslClient(*addr)
    port = c.s.getsockname()[1]
    c.mechanisms()
    c.send(init_of_size(16385))
    got = b""
    c.s.settimeout(5)
    try:
        while True:
            chunk = c.s.recv(65536)
            if not chunk:
                break
            got += chunk
    except ConnectionResetError:
        pass
    c.close()
    assert b"\x00\x53\x44" not in got  # no outcome: a framing error ends it
    line = failure_line(r, port, r"frame is larger than the maximum frame size")
    assert "(listener %s, reason protocol)" % AUTH in line
    want = {k: 0 for k in REASONS}
    want.update(credentials=1, protocol=1)
    assert wait_value(lambda: auth_failed(r, AUTH), want) == want
    assert ts.plain_outcome(Addr(*addr), ts.USER, ts.PASSWORD) == ts.OK


# ---- a password appears in no log line -------------------------------------------------------

def test_a_failing_password_is_in_no_log_line_even_at_trace(make_router, certs, sasl_dir):
    r = full_router(make_router, certs, sasl_dir, log="trace+")
    secret = "Zq9-never-logged-7Xw"
    addr = Addr(*r.addresses[INDEX[AUTH]])
    assert ts.plain_outcome(addr, ts.USER, secret) == ts.AUTH
    assert ts.plain_outcome(addr, "nobody@" + ts.REALM, secret) == ts.AUTH
    # over TLS too, with a library client
    with pytest.raises(Exception):
        BlockingConnection("amqps://%s:%d" % r.addresses[INDEX[AUTH]], user=ts.USER,
                           password=secret, allowed_mechs="PLAIN", timeout=10,
                           ssl_domain=tt.tls_domain(certs))
    want = only("credentials", 3)
    assert wait_value(lambda: auth_failed(r, AUTH), want) == want
    r.wait_log(r"reason credentials\)", timeout=5)
    time.sleep(0.3)  # the log writer's thread
    text = r.stderr_text()
    assert secret not in text
    assert secret.encode().hex() not in text.replace(" ", "").lower()
    assert len(re.findall(r"SASL: authentication of client .* failed \(mechanism PLAIN\)",
                          text)) == 3


# ---- the management listener rows ------------------------------------------------------------

def test_listener_rows_carry_the_counts(make_router, certs, sasl_dir):
    r = full_router(make_router, certs, sasl_dir)
    addr = Addr(*r.addresses[INDEX[AUTH]])
    assert ts.plain_outcome(addr, ts.USER, "wrong") == ts.AUTH
    assert ts.plain_outcome(addr, ts.USER, ts.PASSWORD) == ts.OK
    with socket.create_connection(r.addresses[INDEX[TLS_ONLY]], timeout=5) as s:
        s.sendall(ts.AMQP_HEADER)
        while s.recv(100):
            pass
    assert wait_value(lambda: auth_failed(r, AUTH), only("credentials")) == only("credentials")
    assert wait_value(lambda: lstat(r, TLS_ONLY, "tls_handshakes_failed"), 1) == 1
    node = Node(r.url_of(INDEX[PLAIN]))
    try:
        rows = {row["name"]: row for row in node.query_dicts(
            "listener", ["name", "connectionsAccepted", "tlsHandshakesFailed", "authFailed"])}
    finally:
        node.close()
    assert (rows[AUTH]["connectionsAccepted"], rows[AUTH]["tlsHandshakesFailed"],
            rows[AUTH]["authFailed"]) == (2, 0, 1)
    assert (rows[TLS_ONLY]["connectionsAccepted"], rows[TLS_ONLY]["tlsHandshakesFailed"],
            rows[TLS_ONLY]["authFailed"]) == (1, 1, 0)
    assert rows[PLAIN]["connectionsAccepted"] == 1  # management's own connection
