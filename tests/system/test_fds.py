"""File descriptors: the open-files limit at start-up, and a router that runs out of them.

A router is started normally, then its open-files limit is lowered (prlimit on its pid) to a
few more descriptors than it holds, and raw TCP connections to its AMQP listener take the
rest.  From then on every accept() fails with EMFILE.  The router must stay idle (CPU time
over two seconds, from /proc/PID/stat), keep its log short (one warning per listener, not one
per attempt), close the clients it cannot take instead of leaving them hanging, and serve new
clients again once others leave: AMQP (a Proton client routes a message), HTTP (/healthz),
the management socket (hello), and what an HTTP request needs a descriptor for (a socketpair
for AMQP over WebSocket, a file of httpRootDir) is refused cleanly with a rate-limited
warning.
"""

import contextlib
import http.client
import os
import resource
import select
import socket
import time

import pytest
import websocket
from proton import Message

from clients import Client
from wsamqp import WsAmqp

TIMEOUT = 10.0
SPARE = 24           # descriptors the router may take above what it holds at start
EXTRA = 16           # connections attempted beyond the limit
MEASURE_S = 2.0      # how long the router is watched while out of descriptors
MAX_CPU_S = 0.5      # CPU seconds it may use meanwhile (an accept loop that spins uses 2)
MAX_NEW_LINES = 10   # log lines it may write meanwhile


def cpu_seconds(pid):
    fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def n_fds(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def wait_fds(r, want, timeout=TIMEOUT, at_most=False):
    """Wait until the router holds exactly `want` descriptors (or at most, `at_most`)."""
    deadline = time.monotonic() + timeout
    while n_fds(r.pid) > want if at_most else n_fds(r.pid) != want:
        assert time.monotonic() < deadline, "router holds %d descriptors, want %s%d" % (
            n_fds(r.pid), "at most " if at_most else "", want)
        time.sleep(0.02)


def release(r, limit, socks):
    """Close the connections and wait until the router has closed its ends: a client that
    comes before that is refused like the others."""
    for s in socks:
        s.close()
    wait_fds(r, limit - SPARE // 2, at_most=True)


def fd_router(make_router, tmp_path, **http_attrs):
    """AMQP listener (no handshake timeout: raw connections stay), http listener, management
    socket."""
    http = {"host": "127.0.0.1", "port": "0", "http": True}
    http.update(http_attrs)
    return make_router(
        listeners=[{"host": "127.0.0.1", "port": "0", "initialHandshakeTimeoutSeconds": 0},
                   http],
        extra=[["management", {"socket": str(tmp_path / "m.sock")}]])


def exhaust(r):
    """Lower the router's limit to SPARE above what it holds and fill it with raw AMQP
    connections (and EXTRA more); returns (limit, sockets)."""
    limit = n_fds(r.pid) + SPARE
    resource.prlimit(r.pid, resource.RLIMIT_NOFILE, (limit, limit))
    socks = [socket.create_connection(r.addresses[0], timeout=TIMEOUT)
             for _ in range(SPARE + EXTRA)]
    wait_fds(r, limit)
    return limit, socks


def settle(r, quiet=0.3, limit=10.0):
    """Wait until the router's log has not grown for `quiet` s (what the last connections
    caused: under TSan on a loaded machine it accepted some of them more than 0.3 s late),
    at most `limit` s: a router that keeps logging is then caught by watch_idle."""
    deadline = time.monotonic() + limit
    n, since = len(r.stderr_lines()), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        m = len(r.stderr_lines())
        if m != n:
            n, since = m, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return


def watch_idle(r):
    """Assert that the router stays idle for MEASURE_S: little CPU, few log lines."""
    settle(r)
    cpu0, lines0 = cpu_seconds(r.pid), len(r.stderr_lines())
    time.sleep(MEASURE_S)
    cpu, lines = cpu_seconds(r.pid) - cpu0, r.stderr_lines()[lines0:]
    assert cpu < MAX_CPU_S, "out of descriptors, the router used %.2f s of CPU in %.1f s " \
        "(%d log lines, the last: %s)" % (cpu, MEASURE_S, len(lines), lines[-1:])
    assert len(lines) <= MAX_NEW_LINES, "out of descriptors, the router logged %d lines in " \
        "%.1f s:\n%s" % (len(lines), MEASURE_S, "\n".join(lines[:5]))


def closed_by_router(socks, wait=0.0):
    """Those of `socks` (raw connections that never sent a byte, so the router has nothing
    to say on them) that the router closed, waiting up to `wait` s for all of them."""
    deadline = time.monotonic() + wait
    while True:
        readable = select.select(socks, [], [], 0)[0]
        if len(readable) == len(socks) or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    out = []
    for s in readable:
        try:
            if s.recv(1) == b"":
                out.append(s)
        except ConnectionResetError:
            out.append(s)
    return out


def lines_matching(r, text):
    return [ln for ln in r.stderr_lines() if text in ln]


def route_one(r):
    """A new Proton client connects and routes a message to itself."""
    client = Client()
    try:
        conn = client.connect(r.url)
        rcv = conn.receiver("closest.fds", settle="accept")
        snd = conn.sender("closest.fds")
        snd.send(Message(body="after the shortage"))
        assert rcv.get().body == "after the shortage"
        conn.close()
    finally:
        client.close()


@contextlib.contextmanager
def soft_nofile(n):
    """This process's soft open-files limit lowered to n (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


# ---------------------------------------------------------------- start-up

def test_soft_limit_is_raised_to_the_hard_limit_at_start(make_router):
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    with open("/proc/sys/fs/nr_open") as f:
        nr_open = int(f.read())
    want = nr_open if hard == resource.RLIM_INFINITY else min(hard, nr_open)
    if want <= 256:
        pytest.skip("the hard open-files limit (%d) leaves nothing to raise" % want)
    with soft_nofile(256):
        r = make_router()
    r.wait_log(r"SERVER \(info\) Open files limit: 256 -> %d$" % want)
    with open("/proc/%d/limits" % r.pid) as f:
        row = [ln for ln in f if ln.startswith("Max open files")][0].split()
    assert int(row[3]) == want, row


# ---------------------------------------------------------------- out of descriptors

def test_amqp_listener_pauses_when_out_of_descriptors_and_serves_again(make_router, tmp_path):
    r = fd_router(make_router, tmp_path)
    port = r.addresses[0][1]
    limit, socks = exhaust(r)
    watch_idle(r)
    # the connections it could not take were closed, not left hanging in the backlog
    closed = closed_by_router(socks)
    assert EXTRA // 2 <= len(closed) < len(socks), "%d of %d connections closed" % (
        len(closed), len(socks))
    warn = lines_matching(r, "Out of file descriptors on 127.0.0.1:%d" % port)
    assert len(warn) == 1, warn
    assert "Too many open files; open files limit %d" % limit in warn[0]

    release(r, limit, socks)
    route_one(r)
    m = r.wait_log(r"Accepting on 127\.0\.0\.1:%d again after [\d.]+ s; (\d+) connections "
                   r"refused meanwhile" % port)
    assert int(m.group(1)) >= len(closed), m.group(0)


def test_http_listener_pauses_when_out_of_descriptors_and_serves_again(make_router, tmp_path):
    r = fd_router(make_router, tmp_path)
    http_port = r.addresses[1][1]
    limit, socks = exhaust(r)
    pokes = [socket.create_connection(("127.0.0.1", http_port), timeout=TIMEOUT)
             for _ in range(EXTRA)]
    watch_idle(r)
    assert len(closed_by_router(pokes, 2.0)) == len(pokes), "HTTP clients left hanging"
    warn = lines_matching(r, "HTTP (warning) Out of file descriptors on 127.0.0.1:%d" % http_port)
    assert len(warn) == 1, warn

    release(r, limit, socks + pokes)
    c = http.client.HTTPConnection("127.0.0.1", http_port, timeout=TIMEOUT)
    c.request("GET", "/healthz")
    resp = c.getresponse()
    assert (resp.status, resp.read()) == (200, b"OK\n")
    c.close()
    r.wait_log(r"HTTP \(notice\) Accepting on 127\.0\.0\.1:%d again" % http_port)


def test_management_socket_pauses_when_out_of_descriptors_and_serves_again(make_router,
                                                                           tmp_path):
    r = fd_router(make_router, tmp_path)
    path = str(tmp_path / "m.sock")
    limit, socks = exhaust(r)
    pokes = []
    for _ in range(EXTRA):
        u = socket.socket(socket.AF_UNIX)
        u.connect(path)
        pokes.append(u)
    watch_idle(r)
    assert len(closed_by_router(pokes, 2.0)) == len(pokes), "management clients left hanging"
    assert len(lines_matching(r, "AGENT (warning) Out of file descriptors on %s" % path)) == 1

    release(r, limit, socks + pokes)
    u = socket.socket(socket.AF_UNIX)
    u.settimeout(TIMEOUT)
    u.connect(path)
    assert b'"hello"' in u.recv(4096)
    u.close()
    r.wait_log(r"AGENT \(notice\) Accepting on %s again" % path)


def one_free(r, limit, socks):
    """Close raw connections until the router holds limit - 1 descriptors and keeps it so.  A
    freed descriptor may go at once to a client still waiting in a listener's backlog, or to
    an acceptor's reserve when its retry timer fires (at most RTR_ACCEPT_RETRY_MAX_MS, 1 s,
    later): wait past that, and free one more if it did."""
    for _ in range(5):
        socks.pop(0).close()
        deadline = time.monotonic() + 3
        while n_fds(r.pid) > limit - 1 and time.monotonic() < deadline:
            time.sleep(0.02)
        if n_fds(r.pid) > limit - 1:
            continue  # a client still waiting in a backlog took it: free another
        time.sleep(1.5)
        if n_fds(r.pid) == limit - 1:
            return
    raise AssertionError("the router keeps taking the free descriptor (holds %d, limit %d)" % (
        n_fds(r.pid), limit))


def test_requests_that_need_a_descriptor_are_refused_cleanly(make_router, tmp_path, client):
    root = tmp_path / "www"
    root.mkdir()
    (root / "index.html").write_text("<h1>page</h1>")
    r = fd_router(make_router, tmp_path, httpRootDir=str(root))
    http_port = r.addresses[1][1]
    limit, socks = exhaust(r)
    # one descriptor free: enough to accept an HTTP connection, not for what it asks next
    one_free(r, limit, socks)
    for _ in range(3):
        wait_fds(r, limit - 1)
        c = http.client.HTTPConnection("127.0.0.1", http_port, timeout=TIMEOUT)
        c.request("GET", "/index.html")
        resp = c.getresponse()
        assert (resp.status, resp.read()) == (503, b"Service Unavailable: out of file "
                                                   b"descriptors\n")
        c.close()
    for _ in range(3):
        wait_fds(r, limit - 1)
        ws = websocket.create_connection("ws://127.0.0.1:%d/" % http_port,
                                         subprotocols=["amqp"], timeout=TIMEOUT)
        op, data = ws.recv_data(control_frame=True)
        assert op == websocket.ABNF.OPCODE_CLOSE, (op, data)
        assert data == b"\x03\xf3out of file descriptors", data  # 1011
        ws.close()
    # one warning each, however many clients asked (waited for: the test reads the router's
    # stderr through a thread of its own, which may lag on a loaded machine)
    r.wait_log("cannot open a file of httpRootDir: Too many open files", timeout=15)
    r.wait_log("cannot make the connection's socketpair: Too many open files", timeout=15)
    assert len(lines_matching(r, "cannot open a file of httpRootDir: Too many open files")) == 1
    assert len(lines_matching(r, "cannot make the connection's socketpair: Too many open "
                                 "files")) == 1

    release(r, limit, socks)
    c = http.client.HTTPConnection("127.0.0.1", http_port, timeout=TIMEOUT)
    c.request("GET", "/index.html")
    resp = c.getresponse()
    assert (resp.status, resp.read()) == (200, b"<h1>page</h1>")
    c.close()
    conn = client.connect(r.url)
    rcv = conn.receiver("closest.ws", credit=5)
    ws = WsAmqp("127.0.0.1", http_port, peer=client).wait_open()
    try:
        ws.send(ws.sender("closest.ws"), Message(body="over ws"))
        ws.wait(lambda: rcv.queue, what="the TCP receiver's message")
        assert rcv.get().message.body == "over ws"
    finally:
        ws.close()
