"""Logging as qdrouterd logs: the log entity's outputFile (a file, stdout, syslog, shared files,
modules following DEFAULT), its `enable` grammar, the reopen on SIGUSR1 for logrotate without
a lost line, and writes that never hold up routing when the output stops draining."""

import errno
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import threading
import time

import pytest
from proton import Message
from proton.utils import BlockingConnection

from clients import Client
from conftest import (STARTUP_TIMEOUT, free_port, junctiond_path, router_entities,
                      run_junctiond, write_config)
from mgmt_tool import ManagementError, Node

TS = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6} \+0000 "


def wait_file(path, pattern, timeout=STARTUP_TIMEOUT):
    """Wait until a line of the file matches; returns the match."""
    rx = re.compile(pattern, re.M)
    deadline = time.monotonic() + timeout
    while True:
        try:
            m = rx.search(open(path, errors="replace").read())
            if m:
                return m
        except FileNotFoundError:
            pass
        if time.monotonic() > deadline:
            text = open(path).read() if os.path.exists(path) else "(no file)"
            raise AssertionError("no line matching %r in %s within %.0fs:\n%s" % (
                pattern, path, timeout, text[-3000:]))
        time.sleep(0.05)


def start_logging_to(make_router, logs, ready, port=None, **kw):
    """A router whose log goes elsewhere than stderr: ready once its port accepts and
    ready() (which looks for the Operational line where the log goes) is true."""
    port = port or free_port()
    r = make_router(listener={"port": str(port)}, logs=logs, start=False, **kw)
    r.start(wait=False)
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while True:
        assert r.is_running(), r.stderr_text()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "not listening on %d:\n%s" % (
                port, r.stderr_text())
            time.sleep(0.05)
    while not ready(r):
        assert r.is_running() and time.monotonic() < deadline, r.stderr_text()
        time.sleep(0.05)
    r.addresses = [("127.0.0.1", port)]
    return r


def in_file(path):
    """A ready() for start_logging_to: the Operational line is in the file."""
    return lambda r: os.path.exists(path) and "Operational" in open(path).read()


def one_connection(url):
    c = BlockingConnection(url, timeout=10)
    c.close()


def agent_debug_line(url):
    """A management request that fails: the agent logs it at debug ("Management READ ...")."""
    node = Node(url)
    try:
        with pytest.raises(ManagementError):
            node.read("log", name="log/NO_SUCH_MODULE")
    finally:
        node.close()


# ---- outputFile ---------------------------------------------------------------------

def test_output_file_per_module_shared_and_inherited(make_router, tmp_path):
    main, server = tmp_path / "main.log", tmp_path / "server.log"
    r = start_logging_to(make_router, [
        ["log", {"module": "DEFAULT", "enable": "info+", "outputFile": str(main)}],
        ["log", {"module": "SERVER", "outputFile": str(server)}],
        # the same file by another name: qdrouterd shares one open file between them
        ["log", {"module": "AGENT", "outputFile": str(tmp_path / "." / "server.log"),
                 "enable": "debug+"}],
    ], in_file(server))
    wait_file(server, r"^%sSERVER \(notice\) Operational" % TS)
    one_connection(r.url)
    agent_debug_line(r.url)
    wait_file(server, r"^%sSERVER \(info\) \[C\d+\] Connection from \S+ closed" % TS)
    wait_file(server, r"^%sAGENT \(debug\) Management " % TS)
    assert r.stop() == 0
    s, m = server.read_text(), main.read_text()
    # modules without an outputFile of their own write where DEFAULT does
    assert re.search(r"^%sROUTER \(info\) Junction " % TS, m, re.M), m
    assert re.search(r"^%sROUTER_CORE \(info\) Core thread started" % TS, m, re.M), m
    assert " SERVER " not in m and " AGENT " not in m, m
    assert re.search(r"^%sSERVER \(notice\) Stopped$" % TS, s, re.M), s
    assert not re.search(r" (ROUTER|ROUTER_CORE) ", s), s
    # whole lines only: both modules wrote through one descriptor
    assert all(re.match(TS + r"(SERVER|AGENT) \((\w+)\) ", ln) for ln in s.splitlines()), s
    assert r.stderr_text().strip() == "", r.stderr_text()


def test_output_stdout_with_source_and_without_timestamp(make_router, tmp_path):
    r = start_logging_to(make_router, [
        ["log", {"module": "DEFAULT", "outputFile": "stdout", "includeTimestamp": False,
                 "includeSource": True}]],
        lambda r: any("Operational" in ln for ln in r.stdout_lines))
    assert r.stop() == 0
    out = r.stdout_lines
    assert any(re.match(r"^SERVER \(notice\) Operational, \d+ Threads Running \(process ID "
                        r"\d+\) \(router/server\.c:\d+\)$", ln) for ln in out), out
    # (a line logged without a source position, as qdrouterd's, has none)
    assert all(re.match(r"^[A-Z_]+ \((trace|debug|info|notice|warning|error|critical)\) ", ln)
               for ln in out), out
    assert sum(1 for ln in out if re.search(r" \([\w/]+\.c:\d+\)$", ln)) >= 4, out
    assert r.stderr_text().strip() == ""


def test_output_file_that_cannot_be_opened_stops_startup(tmp_path):
    bad = tmp_path / "no-such-dir" / "x.log"
    cfg = tmp_path / "r.json"
    write_config(cfg, router_entities(logs=[["log", {"module": "SERVER",
                                                     "outputFile": str(bad)}]]))
    p = run_junctiond(["-c", cfg])
    assert p.returncode == 1, p.stderr
    assert "log module SERVER: cannot open outputFile '%s'" % bad in p.stderr, p.stderr


# ---- syslog ------------------------------------------------------------------------

# syslog(3) writes to /dev/log, which this machine may not have (no syslog daemon in a
# container).  qdrouterd has no option for another socket, so the router runs in a private
# mount namespace where /dev is a fresh tmpfs with the few devices a process needs and
# /dev/log is the test's own datagram socket.
NAMESPACE_SCRIPT = r"""
set -e
mkdir -p "$T/olddev"
mount --bind /dev "$T/olddev"
mount -t tmpfs tmpfs /dev
for f in null zero full random urandom; do
    touch "/dev/$f"; mount --bind "$T/olddev/$f" "/dev/$f"
done
ln -s /proc/self/fd /dev/fd
touch /dev/log
mount --bind "$T/log.sock" /dev/log
umount "$T/olddev"
exec "$@"
"""


def can_unshare():
    if not shutil.which("unshare"):
        return "no unshare(1)"
    p = subprocess.run(["unshare", "-m", "true"], capture_output=True, text=True)
    if p.returncode != 0:
        return "unshare -m fails (needs CAP_SYS_ADMIN): " + p.stderr.strip()
    return None


def test_output_syslog_with_qdrouterds_priorities(tmp_path):
    why = can_unshare()
    if why:
        pytest.skip("syslog test needs a private mount namespace for /dev/log: " + why)
    rx = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock = tmp_path / "log.sock"
    rx.bind(str(sock))
    rx.settimeout(0.2)
    port = free_port()
    cfg = tmp_path / "r.json"
    cfg.write_text(
        '[["router", {"id": "S", "mode": "standalone"}],\n'
        ' ["listener", {"host": "127.0.0.1", "port": "%d"}],\n'
        ' ["log", {"module": "DEFAULT", "outputFile": "syslog", "includeTimestamp": true,'
        ' "enable": "info+"}],\n'
        ' ["log", {"module": "AGENT", "enable": "debug+"}]]\n' % port)
    env = dict(os.environ, T=str(tmp_path))
    p = subprocess.Popen(["unshare", "-m", "sh", "-c", NAMESPACE_SCRIPT, "sh",
                          str(junctiond_path()), "-c", str(cfg)],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    got = []

    def receive_until(pattern, timeout=STARTUP_TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for d in got:
                if re.search(pattern, d):
                    return d
            try:
                got.append(rx.recv(65536).decode(errors="replace"))
            except socket.timeout:
                assert p.poll() is None, p.communicate()
        raise AssertionError("no syslog record matching %r:\n%s" % (pattern, "\n".join(got)))

    try:
        op = receive_until(r"SERVER \(notice\) Operational")
        one_connection("amqp://127.0.0.1:%d" % port)
        info = receive_until(r"SERVER \(info\) \[C\d+\] Connection from \S+ closed")
        agent_debug_line("amqp://127.0.0.1:%d" % port)
        dbg = receive_until(r"AGENT \(debug\) Management ")
    finally:
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=20)
        rx.close()
    assert p.returncode == 0, err
    # facility daemon (3 << 3): notice 5, info 6, and debug 7
    assert op.startswith("<29>"), op
    assert info.startswith("<30>"), info
    assert dbg.startswith("<31>"), dbg
    # no timestamp of the router's own in a syslog record (syslog has one), whatever
    # includeTimestamp says; one record per line, without the newline
    assert re.search(r"junctiond: SERVER \(notice\) Operational, \d+ Threads Running \(process ID "
                     r"\d+\)$", op), op
    assert not any(re.search(TS, d) for d in got), got
    assert err.strip() == "", err


# ---- the enable grammar ------------------------------------------------------------

def test_enable_grammar_prefixes_case_and_separators(make_router, tmp_path):
    log = tmp_path / "r.log"
    r = start_logging_to(make_router, [
        ["log", {"module": "DEFAULT", "enable": "none", "outputFile": str(log)}],
        ["log", {"module": "SERVER", "enable": "Warn+ ; not"}],   # notice, warning and above
        ["log", {"module": "ROUTER_CORE", "enable": "i"}],        # info only
        ["log", {"module": "AGENT", "enable": "deb:info"}],       # debug and info
    ], in_file(log))
    wait_file(log, r"SERVER \(notice\) Operational")
    one_connection(r.url)
    agent_debug_line(r.url)
    wait_file(log, r"AGENT \(debug\) Management ")
    assert r.stop() == 0
    lines = log.read_text().splitlines()
    seen = {(m.group(1), m.group(2)) for m in (re.match(TS + r"(\w+) \((\w+)\)", ln)
                                                for ln in lines) if m}
    assert ("SERVER", "notice") in seen and ("ROUTER_CORE", "info") in seen
    assert ("AGENT", "debug") in seen, seen
    assert ("SERVER", "info") not in seen, "SERVER info lines with 'Warn+ ; not'"
    assert not any(mod == "ROUTER" for mod, _ in seen), "DEFAULT none: ROUTER lines"
    assert not (seen - {("SERVER", "notice"), ("SERVER", "warning"), ("ROUTER_CORE", "info"),
                        ("AGENT", "debug"), ("AGENT", "info")}), seen


def test_bad_level_names_the_attribute(tmp_path):
    cfg = tmp_path / "r.json"
    write_config(cfg, router_entities(logs=[["log", {"module": "SERVER",
                                                     "enable": "info+,warnings"}]]))
    p = run_junctiond(["-c", cfg])
    assert p.returncode == 1, p.stderr
    assert re.search(r"entity \d+ \(log\): attribute 'enable': expected a list of levels .* got "
                     r"\"info\+,warnings\"", p.stderr), p.stderr


def test_management_update_of_enable_takes_the_grammar(make_router, tmp_path):
    log = tmp_path / "r.log"
    r = start_logging_to(make_router, [
        ["log", {"module": "DEFAULT", "outputFile": str(log)}]], in_file(log))
    node = Node(r.url)
    row = node.update({"enable": "TRACE,deb"}, "log", name="log/AGENT")
    assert row["enable"] == "trace,debug"
    agent_debug_line(r.url)
    wait_file(log, r"AGENT \(debug\) Management ")
    node.update({"enable": "warn+"}, "log", name="log/AGENT")
    assert node.read("log", name="log/AGENT")["enable"] == "warning+"
    node.close()
    assert r.stop() == 0


# ---- reopen on SIGUSR1 ------------------------------------------------------------

@pytest.mark.deadline(120)
def test_reopen_on_sigusr1_loses_no_line(make_router, tmp_path):
    log = tmp_path / "r.log"
    r = start_logging_to(make_router, [
        ["log", {"module": "DEFAULT", "enable": "info+", "outputFile": str(log)}]], in_file(log))
    # The files are rotated while connections come and go: after every tenth connection (by
    # the clients' progress, not the clock, so a loaded machine cannot put them all in one file).
    n_conns, rotations = 40, 3
    done = threading.Event()
    errors = []
    progress = [0]

    def traffic():
        try:
            for _ in range(n_conns):
                one_connection(r.url)
                progress[0] += 1
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
        done.set()

    t = threading.Thread(target=traffic)
    t.start()
    rotated = []
    for i in range(1, rotations + 1):
        while progress[0] < i * n_conns // (rotations + 1) and not done.is_set():
            time.sleep(0.01)
        old = tmp_path / ("r.log.%d" % i)
        os.rename(log, old)            # logrotate's rename ...
        os.kill(r.pid, signal.SIGUSR1)  # ... and its postrotate
        rotated.append(old)
    t.join(180)
    assert done.is_set() and not errors, errors
    assert not r.proc.poll(), r.stderr_text()
    # every connection's closed line is written before the router stops
    deadline = time.monotonic() + 10
    while True:
        text = "".join(p.read_text() for p in rotated + [log])
        if len(re.findall(r"SERVER \(info\) \[C\d+\] Connection from \S+ closed", text)) \
                >= n_conns or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert r.stop() == 0
    files = rotated + [log]
    texts = [p.read_text() for p in files]
    for p, text in zip(files, texts):
        assert text.endswith("\n") and all(re.match(TS + r"[A-Z_]+ \(\w+\) ", ln)
                                           for ln in text.splitlines()), p
    counts = [len(re.findall(r"\] Connection from \S+ opened", tx)) for tx in texts]
    assert sum(1 for c in counts if c) >= 2, "the connections' lines all in one file: %s" % counts
    text = "".join(texts)
    accepted = re.findall(r"SERVER \(info\) \[C(\d+)\] Accepted connection from", text)
    opened = re.findall(r"SERVER \(info\) \[C(\d+)\] Connection from \S+ opened", text)
    closed = re.findall(r"SERVER \(info\) \[C(\d+)\] Connection from \S+ closed", text)
    # each of the connections logged its three lines exactly once, across the files (and
    # so did the start-up probe, which sent no AMQP header)
    assert len(opened) == len(set(opened)) == n_conns, (len(opened), len(set(opened)))
    assert len(accepted) == len(set(accepted)) == n_conns + 1, len(accepted)
    assert sorted(closed) == sorted(accepted) and set(opened) < set(accepted)
    assert text.count("Log files reopened (SIGUSR1)") == rotations
    # lines logged after the last reopen are in the new file
    assert re.search(r"SERVER \(notice\) Stopped$", texts[-1], re.M), texts[-1]
    assert r.stderr_text().strip() == ""


# ---- writes never block -------------------------------------------------------------

def test_stalled_log_output_does_not_stop_routing_and_drops_are_reported(make_router, tmp_path):
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    # the reader exists before the router opens the FIFO (an open for writing waits for one)
    rd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    received = []

    def drain(timeout):
        """Read what the FIFO has until it stays empty for `timeout` seconds."""
        while select.select([rd], [], [], timeout)[0]:
            try:
                b = os.read(rd, 1 << 16)
            except OSError as e:
                if e.errno == errno.EAGAIN:
                    continue
                raise
            if not b:
                break
            received.append(b)

    try:
        port = free_port()
        r = make_router(listener={"port": str(port)}, start=False, logs=[
            ["log", {"module": "DEFAULT", "enable": "info+", "outputFile": str(fifo)}]])
        r.start(wait=False)
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while b"Operational" not in b"".join(received):
            assert time.monotonic() < deadline and r.is_running(), r.stderr_text()
            drain(0.1)
        r.addresses = [("127.0.0.1", port)]
        # the reader stops: the pipe fills (64 KiB), then the router's queue (1 MiB).  A
        # connection that closes before its AMQP header logs three lines (~350 bytes).
        for _ in range(8000):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        # the router routes on while the output is stuck
        n = 500
        client = Client(timeout=30)
        try:
            conn = client.connect(r.url)
            rcv = conn.receiver("stall.q", settle="accept")
            snd = conn.sender("stall.q")
            for i in range(n):
                snd.send(Message(body="m%d" % i))
            got = [rcv.get().body for _ in range(n)]
            assert got == ["m%d" % i for i in range(n)]
        finally:
            client.close()
        # management still answers, and counts what the log lost
        node = Node(r.url)
        row = node.query_dicts("router")[0]
        deadline = time.monotonic() + 5
        while row.get("logLinesDropped", 0) == 0 and time.monotonic() < deadline:
            time.sleep(0.2)
            row = node.query_dicts("router")[0]
        node.close()
        assert row["logLinesDropped"] > 0, row
        # the reader resumes: the router writes again, and says how much it dropped
        deadline = time.monotonic() + 20
        while not re.search(rb"SERVER \(warning\) \d+ log lines dropped", b"".join(received)):
            assert time.monotonic() < deadline, b"".join(received)[-2000:]
            drain(0.2)
        t = threading.Thread(target=drain, args=(3.0,))
        t.start()
        assert r.stop() == 0
        t.join()
    finally:
        os.close(rd)
    text = b"".join(received).decode(errors="replace")
    dropped = sum(int(x) for x in re.findall(r"SERVER \(warning\) (\d+) log lines dropped", text))
    assert dropped >= row["logLinesDropped"] > 0
    print("stalled output: %d lines dropped (router stat %d while stalled), %d bytes read"
          % (dropped, row["logLinesDropped"], len(text)))
    # whole lines only, before and after the gap
    assert all(re.match(TS + r"[A-Z_]+ \(\w+\) ", ln) for ln in text.splitlines()), \
        [ln for ln in text.splitlines() if not re.match(TS, ln)][:5]
    assert re.search(r"SERVER \(notice\) Stopped$", text, re.M)
