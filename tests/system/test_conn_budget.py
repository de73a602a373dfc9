"""What one connection can make the router hold.

Memory per connection grows with use (an idle connection holds no frame-sized buffer, whatever
maxFrameSize says), and a connection cannot make the router hold more than its budget: the
deliveries waiting in Proton for a client that does not read, across all its sessions
together; what the router reads from a client while its own answers wait; the frame guard's
buffer; what waits unread in Proton behind Q2, across all sessions together.  Each test
measures the router's memory (/proc) around a client that misbehaves on a plain socket, and
checks that the router still serves everybody else."""

import os
import re
import socket
import struct
import time

import pytest
from proton import Message

from amqp_raw import _described, enc_list, enc_str
from clients import check_router_works
from conftest import ROUTER_ID, free_port, proc_status_kb, run_junctiond, sanitizer_report, \
    sanitizer_runtime, write_config
from mgmt_tool import ManagementError, Node

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"


def frame(body, channel=0, payload=b""):
    return struct.pack(">IBBH", 8 + len(body) + len(payload), 2, 0, channel) + body + payload


def uint(n):
    return b"\x70" + struct.pack(">I", n)


def open_frame(container="budget"):
    return frame(_described(0x10, enc_list([enc_str(container)])))


def begin_frame(channel):
    return frame(_described(0x11, enc_list([b"\x40", uint(0), uint(0x7FFFFFFF),
                                            uint(0x7FFFFFFF)])), channel)


def attach_receiver_frame(channel, address, name):
    source = _described(0x28, enc_list([enc_str(address)]))
    target = _described(0x29, enc_list([]))
    # name, handle 0, role=receiver(true), snd-settle-mode null, rcv-settle-mode null, source,
    # target
    return frame(_described(0x12, enc_list([enc_str(name), uint(0), b"\x41", b"\x40", b"\x40",
                                            source, target])), channel)


def flow_frame(channel, credit):
    # next-incoming-id, incoming-window, next-outgoing-id, outgoing-window, handle 0,
    # delivery-count 0, link-credit
    return frame(_described(0x13, enc_list([uint(0), uint(0x7FFFFFFF), uint(0),
                                            uint(0x7FFFFFFF), uint(0), uint(0),
                                            uint(credit)])), channel)


def performatives(data, code):
    """How many frames in data (after the protocol header) carry performative `code`."""
    n, pos = 0, 8
    while pos + 8 <= len(data):
        size, doff = struct.unpack(">IB", data[pos:pos + 5])
        body = data[pos + doff * 4:pos + size]
        if body[:3] == bytes([0x00, 0x53, code]):
            n += 1
        pos += size
    return n


def stalled_receiver(router, address, sessions, credit):
    """A socket with `sessions` sessions, each with a receiver on address (or on address[i]
    for session i, given a list) holding `credit`, that then never reads again: the kernel's
    buffers are made small so that what the router sends piles up on the router's side."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect((router.host, router.port))
    out = AMQP_HEADER + open_frame()
    for ch in range(sessions):
        a = address[ch] if isinstance(address, list) else address
        out += begin_frame(ch) + attach_receiver_frame(ch, a, "stalled-%d" % ch)
    s.sendall(out)
    got = b""
    deadline = time.monotonic() + 10
    while performatives(got, 0x12) < sessions and time.monotonic() < deadline:
        got += s.recv(65536)
    assert performatives(got, 0x12) == sessions, "the router answered every attach"
    s.sendall(b"".join(flow_frame(ch, credit) for ch in range(sessions)))
    return s


def attach_sender_frame(channel, address, name):
    source = _described(0x28, enc_list([]))
    target = _described(0x29, enc_list([enc_str(address)]))
    return frame(_described(0x12, enc_list([enc_str(name), uint(0), b"\x42", b"\x40", b"\x40",
                                            source, target])), channel)


def transfer_frame(channel, first, payload, more=True):
    """A transfer on handle 0: the first of delivery 0 (id and tag), or a continuation; more
    set, or not on the last."""
    flag = b"\x41" if more else b"\x42"
    if first:
        fields = [uint(0), uint(0), b"\xa0\x01t", uint(0), b"\x42", flag]
    else:
        fields = [uint(0), b"\x40", b"\x40", b"\x40", b"\x40", flag]
    return frame(_described(0x14, enc_list(fields)), channel, payload)


def begin_windows(data):
    """The incoming-window of each begin the router sent, by channel."""
    wins, pos = {}, 8
    while pos + 8 <= len(data):
        size, doff, _, ch = struct.unpack(">IBBH", data[pos:pos + 8])
        body = data[pos + doff * 4:pos + size]
        if body[:3] == bytes([0x00, 0x53, 0x11]):
            # list8/list32 header, remote-channel (ushort), next-outgoing-id, incoming-window
            at = 3 + (3 if body[3] == 0xc0 else 9)
            at += 3  # remote-channel 0x60 + 2 bytes
            for _ in range(1):  # next-outgoing-id: 0x43, 0x52 x or 0x70 xxxx
                at += {0x43: 1, 0x52: 2, 0x70: 5}[body[at]]
            code = body[at]
            wins[ch] = {0x43: 0, 0x52: body[at + 1] if code == 0x52 else 0,
                        0x70: struct.unpack(">I", body[at + 1:at + 5])[0]}[code]
        pos += size
    return wins


def rss_kb(router):
    return proc_status_kb(router.pid, "VmRSS")


def quiet_asan_env():
    # ASan's quarantine keeps freed memory resident: off, so that RSS means what it says
    env = dict(os.environ)
    env["ASAN_OPTIONS"] = ":".join(o for o in (env.get("ASAN_OPTIONS"), "quarantine_size_mb=0")
                                   if o)
    return env


def memory_says_little(router, per_object=False):
    """Under TSan's allocator (it keeps freed memory for its race history) the router's RSS is
    not its own, nor, object by object, under ASan's (redzones, shadow memory): the scenario
    still runs (and must leave no sanitizer report), the figure is not checked."""
    rt = sanitizer_runtime(router.pid)
    return rt == "tsan" or (per_object and rt == "asan")


def rss_bound_mib(router, mib):
    """A bound on RSS growth for the release build, with room for ASan's redzones and shadow
    memory (which grow with every live allocation, and more so with TLS's many small ones:
    a TLS client that reads nothing, 6.5 to 10.2 MiB on the release build, 18.4 under ASan)."""
    return mib * 2 if sanitizer_runtime(router.pid) == "asan" else mib


def end_frame(channel):
    return frame(_described(0x17, enc_list([])), channel)


def idle_connections(router, n):
    """n sockets, each with an open, a begin and a receiver attach (address "idle"), all
    answered; the caller closes them."""
    socks = []
    for i in range(n):
        s = socket.create_connection((router.host, router.port), timeout=10)
        s.sendall(AMQP_HEADER + open_frame() + begin_frame(0) +
                  attach_receiver_frame(0, "idle", "idle-%d" % i))
        socks.append(s)
    for s in socks:
        got = b""
        while performatives(got, 0x12) < 1:
            chunk = s.recv(65536)
            assert chunk, "the router closed an idle connection"
            got += chunk
    return socks


def test_a_client_that_stops_reading_holds_at_most_the_connection_budget(make_router, client):
    # 16 sessions, each with a receiver on one multicast address, none read: every message
    # goes to 16 links of one connection that takes nothing.  A limit per session (1 MiB each
    # waiting in Proton) let this grow with the sessions; the connection's budget bounds all
    # of them together.
    r = make_router(env=quiet_asan_env(), listener={"linkCapacity": 8, "idleTimeoutSeconds": 0})
    stalled = stalled_receiver(r, "multicast.stall", sessions=16, credit=100000)
    try:
        conn = client.connect(r.url)
        snd = conn.sender("multicast.stall", presettled=True)
        base = rss_kb(r)
        body = b"x" * 16384
        most = base
        for i in range(2000):
            snd.send(Message(body=body))
            if i % 100 == 0:
                client.run_for(0.01)
                most = max(most, rss_kb(r))
        client.run_for(1.0)
        most = max(most, rss_kb(r))
        grew = (most - base) / 1024.0
        # 2000 x 16 KiB to each of 16 links is 500 MiB offered; a few MiB may wait (the
        # connection's budget, the messages the links queue, the kernel-side copy)
        if not memory_says_little(r):
            assert grew < 12, "router RSS grew by %.1f MiB for a client that reads nothing" % (
                grew)
        check_router_works(r.url)
    finally:
        stalled.close()
    check_router_works(r.url)


def test_a_client_that_talks_but_never_reads_is_not_read_past_the_budget(make_router):
    # Every begin makes the router answer with a begin, every end with an end: a client that
    # sends them in a loop and never reads would make the router's answers pile up without
    # end.  Past the budget of input read while answers wait, the router stops reading it.
    r = make_router(env=quiet_asan_env(), listener={"idleTimeoutSeconds": 0})
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect((r.host, r.port))
    try:
        s.sendall(AMQP_HEADER + open_frame())
        got = b""
        while performatives(got, 0x10) < 1:
            got += s.recv(65536)
        base = rss_kb(r)
        pairs = (begin_frame(0) + end_frame(0)) * 4096
        s.setblocking(False)
        sent, most = 0, base
        deadline = time.monotonic() + 6
        buf = b""
        while time.monotonic() < deadline:
            if not buf:
                buf = pairs
            try:
                n = s.send(buf)
                buf = buf[n:]
                sent += n
            except BlockingIOError:
                time.sleep(0.02)
            most = max(most, rss_kb(r))
        time.sleep(0.5)
        most = max(most, rss_kb(r))
        grew = (most - base) / 1024.0
        if not memory_says_little(r):
            assert grew < 12, "router RSS grew by %.1f MiB (the client sent %.0f MiB)" % (
                grew, sent / float(1 << 20))
    finally:
        s.close()
    check_router_works(r.url)


# ---- memory grows with use ------------------------------------------------------------------

def test_idle_connections_reserve_nothing_for_frames_they_do_not_send(make_router):
    # maxFrameSize 1 MiB: a connection that sends small frames must not hold (or reserve) a
    # buffer of that size; it used to allocate one per connection at accept
    r = make_router(env=quiet_asan_env(), listener={"maxFrameSize": 1048576})
    n = 300
    warm = idle_connections(r, 20)  # the first connections size the worker's pools
    vm0 = proc_status_kb(r.pid, "VmSize")
    rss0 = rss_kb(r)
    socks = idle_connections(r, n)
    try:
        time.sleep(0.5)
        vm_per = (proc_status_kb(r.pid, "VmSize") - vm0) * 1024.0 / n
        rss_per = (rss_kb(r) - rss0) * 1024.0 / n
        if not memory_says_little(r, per_object=True):
            assert vm_per < 128 * 1024, "%.0f KiB of address space per idle connection" % (
                vm_per / 1024)
            assert rss_per < 48 * 1024, "%.0f KiB resident per idle connection" % (
                rss_per / 1024)
        check_router_works(r.url)
    finally:
        for s in socks + warm:
            s.close()


# ---- configured sizes have maxima -----------------------------------------------------------

SIZE_MAXIMA = [
    ("listener", "maxFrameSize", 1048576),
    ("listener", "linkCapacity", 100000),
    ("listener", "maxUnsettledPerLink", 100000),
    ("listener", "maxSessionFrames", 2147483647),
    ("router", "workerThreads", 254),
]


@pytest.mark.parametrize("etype,attr,most", SIZE_MAXIMA)
def test_a_size_above_its_maximum_is_a_config_error(tmp_path, etype, attr, most):
    entities = [["router", {"id": ROUTER_ID}], ["listener", {"host": "127.0.0.1", "port": "0"}]]
    entities[0 if etype == "router" else 1][1][attr] = most + 1
    path = write_config(tmp_path / "too-big.json", entities)
    p = run_junctiond(["-c", path])
    assert p.returncode != 0, "junctiond accepted %s %d:\n%s" % (attr, most + 1, p.stderr)
    assert sanitizer_report(p.stderr) is None, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    line = lines[0]
    # the file, the entity (index and type), the attribute, the allowed range, the value
    assert "too-big.json" in line, line
    assert re.search(r"entity %d \(%s\)" % (0 if etype == "router" else 1, etype), line), line
    assert "'%s'" % attr in line, line
    assert re.search(r"from \d+ to %d" % most, line), line
    assert str(most + 1) in line, line


def test_the_largest_sizes_are_accepted(make_router, client):
    r = make_router(router={"workerThreads": 2},
                    listener={"maxFrameSize": 1048576, "linkCapacity": 100000,
                              "maxSessionFrames": 2147483647})
    conn = client.connect(r.url)
    assert conn.pn.transport.remote_max_frame_size == 1048576
    check_router_works(r.url)


def test_management_create_checks_the_same_maxima(router):
    node = Node(router.url)
    try:
        port = free_port()
        with pytest.raises(ManagementError) as e:
            node.create({"host": "127.0.0.1", "port": str(port), "maxFrameSize": 4294967295},
                        "listener", "huge-frames")
        assert e.value.status == 400, e.value
        assert "maxFrameSize" in e.value.description, e.value.description
        assert "from 512 to 1048576" in e.value.description, e.value.description
        assert not any(x["name"] == "huge-frames" for x in node.query_dicts("listener"))
        # within the range it is created
        lst = node.create({"host": "127.0.0.1", "port": str(port), "maxFrameSize": 1048576},
                          "listener", "big-frames")
        assert lst["maxFrameSize"] == 1048576
    finally:
        node.close()


# ---- the input budget: what waits in Proton behind Q2 ---------------------------------------

def test_streams_stopped_by_q2_on_many_sessions_hold_at_most_the_input_budget(make_router):
    # 8 sessions each stream a large message to a receiver that takes nothing (another
    # socket): once the copies lag, Q2 stops reading each delivery, and what the client keeps
    # sending within its session windows would wait in Proton, 8 MiB per session; the
    # connection's input budget stops reading the client instead
    r = make_router(env=quiet_asan_env(), listener={"idleTimeoutSeconds": 0})
    n = 8
    addrs = ["closest.q2.%d" % i for i in range(n)]
    stalled = stalled_receiver(r, addrs, sessions=n, credit=10)
    snd = socket.create_connection((r.host, r.port), timeout=10)
    try:
        out = AMQP_HEADER + open_frame("q2-sender")
        for ch in range(n):
            out += begin_frame(ch) + attach_sender_frame(ch, addrs[ch], "q2-%d" % ch)
        snd.sendall(out)
        got = b""
        deadline = time.monotonic() + 10
        # the router's attach and its credit (a flow) on every session
        while (performatives(got, 0x12) < n or performatives(got, 0x13) < n) and \
                time.monotonic() < deadline:
            got += snd.recv(65536)
        wins = begin_windows(got)
        assert len(wins) == n and performatives(got, 0x13) >= n, got
        frames = min(wins.values()) - 4  # stay inside every window the router granted
        chunk = 16384 - 64
        base = rss_kb(r)
        head = b"\x00\x53\x75\xb0" + struct.pack(">I", 64 << 20)  # a 64 MiB data section
        snd.setblocking(False)
        pending = [transfer_frame(ch, i == 0, (head if i == 0 else b"") +
                                  b"q" * (chunk - (len(head) if i == 0 else 0)))
                   for i in range(frames) for ch in range(n)]
        buf, most = b"", base
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            while len(buf) < (1 << 20) and pending:
                buf += pending.pop(0)
            if buf:
                try:
                    sent = snd.send(buf)
                    buf = buf[sent:]
                except BlockingIOError:
                    time.sleep(0.01)
            else:
                time.sleep(0.05)
            most = max(most, rss_kb(r))
        grew = (most - base) / 1024.0
        offered = frames * n * chunk / float(1 << 20)
        # per delivery Q2 keeps about 1.3 MiB (head and copies' lag), and Proton what the
        # session windows let in: the connection's budget keeps that sum near 8 MiB, where it
        # was 8 MiB per session (about 75 MiB here)
        assert offered > 50, "the client could offer only %.0f MiB" % offered
        if not memory_says_little(r):
            assert grew < 36, "router RSS grew by %.1f MiB (%.0f MiB offered on %d sessions)" % (
                grew, offered, n)
    finally:
        snd.close()
        stalled.close()
    check_router_works(r.url)
