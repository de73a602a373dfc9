"""HTTP listeners (`"http": true`): the console's files, /metrics, /healthz, AMQP over
WebSocket, the console's live feed (`junction-mgmt`), httpRootDir, and bad input.

HTTP goes through http.client; WebSockets through websocket-client (Debian's
python3-websocket); AMQP over WebSocket through wsamqp.WsAmqp (Proton's engine pumped over the
WebSocket), checked against ordinary Proton clients on the router's TCP listener.

/healthz's 503 needs a core thread that does not answer: the test stops that one thread with
ptrace (PTRACE_SEIZE + PTRACE_INTERRUPT on its thread id; the rest of the process runs on) and
lets it go again.
"""

import concurrent.futures
import ctypes
import http.client
import json
import os
import random
import re
import socket
import time

import pytest
import websocket
from proton import Delivery, Message

from conftest import DEFAULT_ADDRESSES, junctiond_path, router_entities, run_junctiond, \
    write_config
from wsamqp import WsAmqp

TIMEOUT = 10.0


def http_router(make_router, tmp_path=None, **http_attrs):
    """A router with an AMQP listener (0) and an http listener (1)."""
    lst = {"host": "127.0.0.1", "port": "0", "http": True}
    lst.update(http_attrs)
    return make_router(listeners=[{"host": "127.0.0.1", "port": "0"}, lst])


def http_port(r, i=1):
    return r.addresses[i][1]


def get(r, path, i=1, method="GET", headers=None):
    """(status, headers dict with lower-case names, body bytes)."""
    c = http.client.HTTPConnection("127.0.0.1", http_port(r, i), timeout=TIMEOUT)
    try:
        c.request(method, path, headers=headers or {})
        resp = c.getresponse()
        body = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body
    finally:
        c.close()


def metrics(r, i=1):
    status, hdrs, body = get(r, "/metrics", i)
    assert status == 200, body[:200]
    values = {}
    for line in body.decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values, hdrs, body


def mgmt_ws(r, i=1):
    ws = websocket.create_connection("ws://127.0.0.1:%d/" % http_port(r, i),
                                     subprotocols=["junction-mgmt"], timeout=TIMEOUT)
    hello = json.loads(ws.recv())
    assert "hello" in hello
    return ws, hello


def ws_next(ws, pred, timeout=TIMEOUT):
    """The next text message (parsed) for which pred is true; others are skipped."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        assert left > 0, "no matching message within %.0fs" % timeout
        ws.settimeout(left)
        m = json.loads(ws.recv())
        if pred(m):
            return m


# ---------------------------------------------------------------- listener and files

def test_http_listener_serves_the_console_page(make_router):
    r = http_router(make_router)
    status, hdrs, body = get(r, "/")
    assert status == 200
    assert hdrs["content-type"].startswith("text/html")
    assert int(hdrs["content-length"]) == len(body)
    assert b"Junction" in body
    status2, _, body2 = get(r, "/index.html")
    assert (status2, body2) == (200, body)
    status, _, _ = get(r, "/no/such/file.js")
    assert status == 404
    status, _, _ = get(r, "/", method="POST")
    assert status == 405
    # a browser's headers (cookies of other apps on localhost) fit
    status, _, body3 = get(r, "/", headers={"Cookie": "a=" + "b" * 5000})
    assert (status, body3) == (200, body)


def test_http_listener_port_zero_logs_its_port(make_router):
    r = http_router(make_router)
    lines = [l for l in r.stderr_lines() if "Listening on" in l]
    assert len(lines) == 2
    assert lines[1].endswith("127.0.0.1:%d" % http_port(r))
    assert http_port(r) != r.port


def test_keepalive_serves_several_requests_on_one_connection(make_router):
    r = http_router(make_router)
    c = http.client.HTTPConnection("127.0.0.1", http_port(r), timeout=TIMEOUT)
    for path, want in (("/", 200), ("/healthz", 200), ("/nope", 404), ("/index.html", 200)):
        c.request("GET", path)
        resp = c.getresponse()
        resp.read()
        assert resp.status == want, path
    c.close()


def test_plain_amqp_is_refused_on_the_http_port(make_router):
    r = http_router(make_router)
    s = socket.create_connection(("127.0.0.1", http_port(r)), timeout=TIMEOUT)
    s.sendall(b"AMQP\x00\x01\x00\x00")
    got = b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    except (ConnectionResetError, socket.timeout):
        pass
    s.close()
    assert not got.startswith(b"AMQP"), got[:40]
    # the router goes on serving both listeners
    assert get(r, "/healthz")[0] == 200
    assert not any("Accepted connection" in l for l in r.stderr_lines())


# ---------------------------------------------------------------- /metrics

def test_metrics_counts_traffic(make_router, client):
    r = http_router(make_router)
    conn = client.connect(r.url)
    rcv = conn.receiver("closest.m", credit=10, settle="accept")
    snd = conn.sender("closest.m")
    for i in range(7):
        dlv = snd.send(Message(body=i))
        assert snd.wait_outcome(dlv) == Delivery.ACCEPTED
    values, hdrs, _ = metrics(r)
    assert hdrs["content-type"].startswith("text/plain; version=0.0.4")
    assert hdrs.get("connection") == "close"
    assert "content-length" not in hdrs  # streamed
    assert values["qdr_deliveries_ingress_total"] >= 7
    assert values["qdr_accepted_deliveries_total"] >= 7
    assert values["qdr_connections"] >= 1


@pytest.mark.deadline(240)
@pytest.mark.slow
def test_metrics_streams_many_stats(make_router, client):
    """20,000 addresses (each with a link): every one is in /metrics, read slowly through a
    small socket buffer, while the router keeps answering other requests."""
    # The client sends nothing while it builds 20,000 attaches, which on a loaded machine (or
    # under TSan) takes longer than the listener's idle timeout: that timeout is off here.
    r = make_router(listeners=[{"host": "127.0.0.1", "port": "0", "idleTimeoutSeconds": 0},
                               {"host": "127.0.0.1", "port": "0", "http": True}])
    n = 20000
    conns = [client.connect(r.url) for _ in range(4)]
    for i in range(n):
        conns[i % 4].receiver("closest.many.%d" % i, credit=0, wait=False)
        if i % 500 == 499:
            client.flush()
    deadline = time.monotonic() + 150
    while True:
        client.run_for(0.5)
        status, _, body = get(r, "/metrics")
        m = re.search(rb"^qdr_addresses (\d+)$", body, re.M)
        if (m and int(m.group(1)) >= n) or time.monotonic() > deadline:
            break
    assert m and int(m.group(1)) >= n

    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(TIMEOUT)
    s.connect(("127.0.0.1", http_port(r)))
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    first = s.recv(4096)
    assert first.startswith(b"HTTP/1.1 200")
    rss_before = r.rss_kb()
    time.sleep(0.5)  # the reader stalls: the router must neither block nor buffer it all
    assert get(r, "/healthz")[0] == 200
    data = [first]
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data.append(chunk)
    s.close()
    text = b"".join(data).decode()
    names = set(re.findall(r'address="[^"]*closest\.many\.(\d+)"', text))
    assert len(names) == n
    assert len(text) > 2_000_000
    # the whole text never sat in the router's memory (not measurable under ASan, whose
    # quarantine keeps every freed batch of the walk)
    with open("/proc/%d/maps" % r.pid) as f:
        asan = "libasan" in f.read()
    if not asan:
        assert r.rss_kb() - rss_before < len(text) // 1024 // 2


# ---------------------------------------------------------------- /healthz

def test_healthz_answers_ok_through_the_core(make_router):
    r = http_router(make_router)
    before, _, _ = metrics(r)
    for _ in range(3):
        status, hdrs, body = get(r, "/healthz")
        assert status == 200
        assert body == b"OK\n"
        assert hdrs["content-length"] == "3"
    after, _, _ = metrics(r)
    # each answer came back from a round trip through the core thread
    assert after["junction_http_healthz_probes_total"] - \
        before["junction_http_healthz_probes_total"] == 3


def _ptrace():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    return libc


def _thread_id(pid, name):
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
            if f.read().strip() == name:
                return int(tid)
    raise AssertionError("no thread %s in %d" % (name, pid))


def test_healthz_503_while_the_core_thread_is_stopped(make_router):
    r = http_router(make_router)
    assert get(r, "/healthz")[0] == 200
    libc = _ptrace()
    tid = _thread_id(r.pid, "junction-core")
    PTRACE_SEIZE, PTRACE_INTERRUPT, PTRACE_DETACH = 0x4206, 0x4207, 17
    if libc.ptrace(PTRACE_SEIZE, tid, None, None) != 0:
        pytest.skip("ptrace not permitted here (errno %d)" % ctypes.get_errno())
    try:
        assert libc.ptrace(PTRACE_INTERRUPT, tid, None, None) == 0
        os.waitpid(tid, 0x40000000)  # __WALL: the thread is stopped
        t0 = time.monotonic()
        status, _, body = get(r, "/healthz")
        assert status == 503, body
        assert time.monotonic() - t0 < 8
        # other threads still run: files and metrics are served meanwhile
        assert get(r, "/")[0] == 200
        assert get(r, "/healthz")[0] == 503
    finally:
        libc.ptrace(PTRACE_DETACH, tid, None, None)
    deadline = time.monotonic() + TIMEOUT
    while get(r, "/healthz")[0] != 200:
        assert time.monotonic() < deadline, "/healthz did not recover"
        time.sleep(0.1)
    r.wait_log(r"/healthz: the core thread did not answer")


def test_healthz_and_metrics_can_be_turned_off(make_router):
    r = http_router(make_router, healthz=False, metrics="no")
    assert get(r, "/healthz")[0] == 404
    assert get(r, "/metrics")[0] == 404
    assert get(r, "/")[0] == 200


# ---------------------------------------------------------------- AMQP over WebSocket

@pytest.mark.parametrize("proto", ["amqp", "binary", "AMQPWSB10"])
def test_amqp_over_websocket_routes_like_tcp(make_router, client, proto):
    r = http_router(make_router)
    ws = WsAmqp("127.0.0.1", http_port(r), proto=proto, peer=client).wait_open()
    try:
        assert ws.subprotocol.lower() == proto.lower()
        assert ws.conn.remote_container == "JTest"
        local_port = ws.ws.sock.getsockname()[1]
        r.wait_log(r"\[C\d+\] Accepted WebSocket connection from 127\.0\.0\.1:%d" % local_port)

        # WebSocket -> TCP
        conn = client.connect(r.url)
        rcv = conn.receiver("closest.ws1", credit=10)
        wsnd = ws.sender("closest.ws1")
        dlv = ws.send(wsnd, Message(body="over ws", properties={"k": 1}))
        ws.wait(lambda: rcv.queue, what="the TCP receiver's message")
        got = rcv.get()
        assert got.message.body == "over ws"
        assert got.message.properties == {"k": 1}
        got.accept()
        assert ws.wait_outcome(dlv) == Delivery.ACCEPTED

        # TCP -> WebSocket, and a rejection travels back
        wrcv = ws.receiver("closest.ws2", credit=5)
        snd = conn.sender("closest.ws2")
        d2 = snd.send(Message(body="to ws"))
        m, ws_dlv = ws.get_delivery(wrcv)
        assert m.body == "to ws"
        ws_dlv.update(Delivery.REJECTED)  # the rejection travels back to the TCP sender
        ws_dlv.settle()
        ws.wait(lambda: d2.remote_state, what="the TCP sender's outcome")
        assert snd.wait_outcome(d2) == Delivery.REJECTED
    finally:
        ws.close()
    values, _, _ = metrics(r)
    assert values["junction_http_websocket_amqp_total"] >= 1


def test_large_messages_both_ways_over_websocket(make_router, client):
    """5 MB each way: the WebSocket pump's back-pressure (socketpair full, lws busy) holds."""
    r = http_router(make_router)
    ws = WsAmqp("127.0.0.1", http_port(r), proto="amqp", timeout=60, peer=client).wait_open()
    try:
        conn = client.connect(r.url)
        big = bytes(random.getrandbits(8) for _ in range(1 << 16)) * 80  # 5 MiB
        rcv = conn.receiver("closest.big1", credit=2)
        wsnd = ws.sender("closest.big1")
        dlv = ws.send(wsnd, Message(body=big))
        ws.wait(lambda: rcv.queue, what="the big message at the TCP receiver")
        got = rcv.get()
        assert got.message.body == big
        got.accept()
        assert ws.wait_outcome(dlv) == Delivery.ACCEPTED

        wrcv = ws.receiver("closest.big2", credit=2)
        snd = conn.sender("closest.big2")
        d2 = snd.send(Message(body=big))
        m = ws.get(wrcv)
        assert m.body == big
        assert snd.wait_outcome(d2) == Delivery.ACCEPTED
    finally:
        ws.close()


def test_websocket_close_ends_the_amqp_connection(make_router, client):
    r = http_router(make_router)
    ws = WsAmqp("127.0.0.1", http_port(r), peer=client).wait_open()
    wrcv = ws.receiver("closest.gone", credit=5)
    conn = client.connect(r.url)
    snd = conn.sender("closest.gone")
    dlv = snd.send(Message(body="x"))
    ws.wait(lambda: wrcv.current is not None, what="delivery")
    ws.ws.close()  # abruptly: no AMQP close
    r.wait_log(r"\[C\d+\] Connection from 127\.0\.0\.1:\d+ (failed|closed)")
    # the unsettled delivery comes back to the sender as MODIFIED
    assert snd.wait_outcome(dlv) == Delivery.MODIFIED


def test_websockets_false_refuses_the_upgrade(make_router):
    r = http_router(make_router, websockets=False)
    for proto in ("amqp", "binary", "junction-mgmt"):
        with pytest.raises((websocket.WebSocketException, ConnectionError)):
            websocket.create_connection("ws://127.0.0.1:%d/" % http_port(r),
                                        subprotocols=[proto], timeout=TIMEOUT)
    assert get(r, "/healthz")[0] == 200
    assert not any("Accepted WebSocket" in l for l in r.stderr_lines())


def test_unknown_subprotocol_is_refused(make_router):
    r = http_router(make_router)
    with pytest.raises((websocket.WebSocketException, ConnectionError)):
        websocket.create_connection("ws://127.0.0.1:%d/" % http_port(r),
                                    subprotocols=["mqtt"], timeout=TIMEOUT)
    with pytest.raises((websocket.WebSocketException, ConnectionError)):
        websocket.create_connection("ws://127.0.0.1:%d/" % http_port(r), timeout=TIMEOUT)
    assert get(r, "/healthz")[0] == 200


# ---------------------------------------------------------------- the console's live feed

def test_mgmt_feed_speaks_the_management_protocol(make_router, client):
    r = http_router(make_router)
    ws, hello = mgmt_ws(r)
    try:
        assert hello["hello"]["router_id"] == "JTest"
        assert "stats.subscribe" in hello["hello"]["ops"]
        ws.send(json.dumps({"id": 1, "op": "stats.get", "match": "router.deliveriesIngress"}))
        m = ws_next(ws, lambda m: m.get("id") == 1)
        assert m["result"]["values"] == {"router.deliveriesIngress": 0}

        # a malformed line gets a 400 and the session goes on
        ws.send("this is not json")
        m = ws_next(ws, lambda m: "error" in m)
        assert m["error"]["code"] == 400 and m["id"] is None
        ws.send(json.dumps({"id": "x", "op": "no.such.op"}))
        m = ws_next(ws, lambda m: m.get("id") == "x")
        assert m["error"]["code"] == 404

        ws.send(json.dumps({"id": 2, "op": "stats.subscribe",
                            "match": "router.deliveriesIngress", "interval_ms": 100}))
        sub = ws_next(ws, lambda m: m.get("id") == 2)["result"]["sub"]
        first = ws_next(ws, lambda m: m.get("sub") == sub and "values" in m)
        assert first["values"]["router.deliveriesIngress"] == 0

        conn = client.connect(r.url)
        rcv = conn.receiver("closest.feed", credit=10, settle="accept")
        snd = conn.sender("closest.feed")
        for i in range(3):
            assert snd.wait_outcome(snd.send(Message(body=i))) == Delivery.ACCEPTED
        upd = ws_next(ws, lambda m: m.get("sub") == sub and
                      m.get("values", {}).get("router.deliveriesIngress", 0) >= 3)
        assert upd["values"]["router.deliveriesIngress"] >= 3
        assert rcv is not None

        # a streamed reply arrives whole, one message per line
        ws.send(json.dumps({"id": 3, "op": "entity.query", "type": "connection"}))
        rows = []
        while True:
            m = ws_next(ws, lambda m: m.get("id") == 3)
            rows.extend(m["result"]["results"])
            if not m.get("more"):
                break
        assert len(rows) >= 1
    finally:
        ws.close()
    values, _, _ = metrics(r)
    assert values["junction_http_console_sessions_total"] >= 1


def test_mgmt_feed_over_long_message_gets_413(make_router):
    r = http_router(make_router)
    ws, _ = mgmt_ws(r)
    try:
        ws.send('{"id": 1, "op": "stats.get", "match": "' + "x" * 70000 + '"}')
        m = ws_next(ws, lambda m: "error" in m)
        assert m["error"]["code"] == 413
        ws.send(json.dumps({"id": 2, "op": "stats.get", "match": "router.workerThreads"}))
        m = ws_next(ws, lambda m: m.get("id") == 2)
        assert "router.workerThreads" in m["result"]["values"]
    finally:
        ws.close()


def test_mgmt_feed_sessions_are_capped(make_router, tmp_path):
    # the cap is the management entity's maxClients (16 without the entity)
    sock = tmp_path / "m.sock"
    if len(str(sock)) > 100:
        sock = "/tmp/jt-http-%d.sock" % os.getpid()
    r = make_router(listeners=[{"host": "127.0.0.1", "port": "0"},
                               {"host": "127.0.0.1", "port": "0", "http": True}],
                    extra=[["management", {"socket": str(sock), "maxClients": 2}]])
    a, _ = mgmt_ws(r)
    b, _ = mgmt_ws(r)
    c = websocket.create_connection("ws://127.0.0.1:%d/" % http_port(r),
                                    subprotocols=["junction-mgmt"], timeout=TIMEOUT)
    m = json.loads(c.recv())
    assert m["error"]["code"] == 503
    c.close()
    a.close()
    # a closed session frees its place
    deadline = time.monotonic() + TIMEOUT
    while True:
        d = websocket.create_connection("ws://127.0.0.1:%d/" % http_port(r),
                                        subprotocols=["junction-mgmt"], timeout=TIMEOUT)
        m = json.loads(d.recv())
        d.close()
        if "hello" in m:
            break
        assert time.monotonic() < deadline, "the closed session's place never came back"
        time.sleep(0.1)
    b.close()


# ---------------------------------------------------------------- httpRootDir

def test_http_root_dir_serves_files_and_refuses_escapes(make_router, tmp_path):
    root = tmp_path / "www"
    (root / "sub").mkdir(parents=True)
    (root / "index.html").write_text("<h1>mine</h1>")
    (root / "app.js").write_text("let x = 1;")
    (root / "data.json").write_text("{}")
    (root / "f.woff2").write_bytes(b"wOF2")
    (root / "blob.xyz").write_bytes(b"\x00\x01")
    (root / "sub" / "index.html").write_text("sub")
    secret = tmp_path / "secret.txt"
    secret.write_text("secret")
    os.symlink(str(secret), str(root / "out.txt"))
    os.symlink(str(root / "app.js"), str(root / "in.js"))
    r = http_router(make_router, httpRootDir=str(root))

    def check(path, status, ctype=None, body=None):
        st, hdrs, b = get(r, path)
        assert st == status, (path, st, b[:100])
        if ctype:
            assert hdrs["content-type"].startswith(ctype), (path, hdrs)
        if body is not None:
            assert b == body
        return b

    check("/", 200, "text/html", b"<h1>mine</h1>")
    check("/app.js", 200, "application/javascript", b"let x = 1;")
    check("/data.json", 200, "application/json")
    check("/f.woff2", 200, "font/woff2")
    check("/blob.xyz", 200, "application/octet-stream")
    check("/sub/", 200, body=b"sub")
    check("/sub", 200, body=b"sub")
    check("/in.js", 200, body=b"let x = 1;")  # a symlink inside the root
    check("/out.txt", 403)                     # a symlink out of it
    check("/missing.html", 404)
    # /metrics and /healthz still work beside the files
    check("/healthz", 200, body=b"OK\n")

    # `..` never reaches the file system (raw, so no client normalises it)
    for raw in (b"/../secret.txt", b"/sub/../../secret.txt", b"/%2e%2e/secret.txt",
                b"/sub/%2E%2E/%2e%2e/secret.txt"):
        s = socket.create_connection(("127.0.0.1", http_port(r)), timeout=TIMEOUT)
        s.sendall(b"GET " + raw + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        resp = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            resp += chunk
        s.close()
        assert b"secret" not in resp.split(b"\r\n\r\n", 1)[-1], raw
        assert resp.startswith(b"HTTP/1.1 4"), (raw, resp[:60])


def test_http_root_dir_that_is_not_a_directory_stops_start_up(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    cfg = write_config(tmp_path / "j.json", router_entities(listeners=[
        {"host": "127.0.0.1", "port": "0", "httpRootDir": str(f)}]))
    res = run_junctiond(["-c", str(cfg)], timeout=30)
    assert res.returncode == 1, res.stderr  # a clean exit, not an abort
    assert "httpRootDir %s is not a directory" % f in res.stderr
    assert "Assertion" not in res.stderr and "Listening on" not in res.stderr, res.stderr


def test_http_root_dir_that_does_not_exist_stops_start_up(tmp_path):
    d = tmp_path / "no" / "such"
    cfg = write_config(tmp_path / "j.json", router_entities(listeners=[
        {"host": "127.0.0.1", "port": "0", "httpRootDir": str(d)}]))
    res = run_junctiond(["-c", str(cfg)], timeout=30)
    assert res.returncode == 1, res.stderr
    assert str(d) in res.stderr
    assert "Assertion" not in res.stderr and "Listening on" not in res.stderr, res.stderr


# ---------------------------------------------------------------- bad input

GARBAGE_HTTP = [
    b"\x00" * 64,
    b"GET\r\n\r\n",
    b"GET / HTTP/9.9\r\n\r\n",
    b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\n\r\n",
    b"GET / HTTP/1.1\r\n" + b"X-Long: " + b"b" * 20000 + b"\r\n\r\n",
    b"GET / HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
    b"POST /metrics HTTP/1.1\r\nContent-Length: 100000000\r\n\r\nabc",
    b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\x00" * 40,  # a TLS hello
    bytes(random.Random(5).getrandbits(8) for _ in range(4096)),
]

UPGRADE = (b"GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
           b"Sec-WebSocket-Protocol: %s\r\n\r\n")

GARBAGE_FRAMES = [
    b"\x82\x05hello",                         # unmasked client frame
    b"\x8f\x80\x00\x00\x00\x00",              # reserved opcode
    b"\xf2\x80\x00\x00\x00\x00",              # RSV bits set
    b"\x82\xff" + b"\x7f" * 8 + b"\x00" * 4,  # 2^63-byte length
    b"\x89\xfe\x01\x00" + b"\x00" * 4 + b"p" * 256,  # over-long ping
    b"\x81\x84\x01\x02\x03\x04" + bytes([0xff ^ 1, 0xfe ^ 2, 0x80 ^ 3, 0x80 ^ 4]),  # bad UTF-8
    b"\x02\x83\x00\x00\x00\x00abc\x02\x83\x00\x00\x00\x00abc",  # continuation misuse
    bytes(random.Random(7).getrandbits(8) for _ in range(2048)),
]


def _blast(port, data, pre=None):
    s = socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT)
    try:
        if pre:
            s.sendall(pre)
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = s.recv(4096)
                if not chunk:
                    return
                head += chunk
            assert head.startswith(b"HTTP/1.1 101"), head[:80]
        s.sendall(data)
        s.settimeout(2)
        try:
            while s.recv(65536):
                pass
        except (socket.timeout, ConnectionResetError):
            pass
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        s.close()


@pytest.mark.deadline(120)
def test_garbage_http_and_websocket_frames_never_hurt_the_router(make_router, client):
    r = http_router(make_router)
    port = http_port(r)
    # all at once: each blast waits up to 2 s for the router to close its socket, and the
    # router must cope with many bad clients at a time as well as with one
    blasts = [(data, None) for data in GARBAGE_HTTP] + [
        (data, UPGRADE % proto) for proto in (b"amqp", b"junction-mgmt")
        for data in GARBAGE_FRAMES]
    with concurrent.futures.ThreadPoolExecutor(len(blasts)) as pool:
        for f in [pool.submit(_blast, port, data, pre) for data, pre in blasts]:
            f.result()
    # AMQP-level garbage inside good WebSocket frames reaches the frame guard
    ws = websocket.create_connection("ws://127.0.0.1:%d/" % port, subprotocols=["amqp"],
                                     timeout=TIMEOUT)
    ws.send_binary(b"AMQP\x00\x01\x00\x00" + b"\x00\x00\x00\x08\x02\x00\x00\x00" * 3 +
                   b"\xff" * 100)
    try:
        while ws.recv_data()[1]:
            pass
    except (websocket.WebSocketException, ConnectionError, OSError):
        pass
    ws.close()
    # still serving everything
    assert get(r, "/healthz") == (200, get(r, "/healthz")[1], b"OK\n")
    w = WsAmqp("127.0.0.1", port).wait_open()
    w.close()
    conn = client.connect(r.url)
    assert conn is not None
    assert r.is_running()


def test_stop_with_websockets_and_requests_open(make_router, client):
    """SIGTERM while an AMQP WebSocket, a console session, a /healthz and a /metrics reader
    are open: the router still exits 0 with nothing leaked (checked at teardown)."""
    r = http_router(make_router)
    ws = WsAmqp("127.0.0.1", http_port(r), peer=client).wait_open()
    ws.receiver("closest.stop", credit=5)
    feed, _ = mgmt_ws(r)
    feed.send(json.dumps({"id": 1, "op": "stats.subscribe", "match": "router.*",
                          "interval_ms": 50}))
    ws_next(feed, lambda m: m.get("id") == 1)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", http_port(r)))
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert s.recv(100).startswith(b"HTTP/1.1 200")
    assert r.stop() == 0
    s.close()
    feed.close()
    ws.close()


def test_query_strings_are_ignored(make_router):
    r = http_router(make_router)
    assert get(r, "/healthz?verbose=1")[0] == 200
    status, _, body = get(r, "/metrics?name[]=qdr_links")
    assert status == 200 and b"qdr_links" in body
    assert get(r, "/?x=1")[0] == 200
