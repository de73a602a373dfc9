"""Log output: qdrouterd's line shape, per-module levels, connection and link ids."""

import datetime
import re

from proton import Message

from clients import Client
from conftest import OPERATIONAL_RE
from test_logging import start_logging_to

LEVELS = "trace|debug|info|notice|warning|error|critical"
LOG_LINE_RE = re.compile(
    r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})\.\d{6} \+0000 ([A-Z][A-Z_]*) \((%s)\) \S" % LEVELS)


def workload(router):
    """Connect, attach a receiver and a sender, move a few messages, detach, close."""
    client = Client()
    try:
        conn = client.connect(router.url)
        rcv = conn.receiver("log.q", settle="accept")
        snd = conn.sender("log.q")
        for i in range(5):
            snd.send(Message(body="m%d" % i))
        assert [rcv.get().body for _ in range(5)] == ["m%d" % i for i in range(5)]
        snd.close()
        rcv.close()
        conn.close()
    finally:
        client.close()


def test_every_log_line_has_qdrouterds_shape(router):
    workload(router)
    assert router.stop() == 0
    lines = [ln for ln in router.stderr_lines() if ln.strip()]
    assert lines, "no log output at all"
    bad = [ln for ln in lines if not LOG_LINE_RE.match(ln)]
    assert not bad, "lines not shaped 'YYYY-MM-DD HH:MM:SS.ffffff +0000 MODULE (level) text':\n" \
        + "\n".join(bad[:20])


def test_log_timestamps_are_current_utc(router):
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    m = LOG_LINE_RE.match(router.stderr_lines()[0])
    assert m, router.stderr_lines()[0]
    t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")
    assert abs((t - now).total_seconds()) < 60, "timestamp %s is not UTC now (%s)" % (t, now)


def test_operational_line_names_threads_and_pid(make_router):
    r = make_router(router={"workerThreads": 3})
    m = r.wait_log(OPERATIONAL_RE.pattern)
    assert int(m.group(1)) == 3
    assert int(m.group(2)) == r.pid
    line = [ln for ln in r.stderr_lines() if "Operational" in ln][0]
    assert re.search(r" SERVER \(notice\) Operational, 3 Threads Running \(process ID %d\)"
                     % r.pid, line), line


def test_listening_line_names_host_and_bound_port(router):
    assert router.host == "127.0.0.1"
    assert router.port > 0
    client = Client()
    try:
        conn = client.connect("amqp://127.0.0.1:%d" % router.port)
        assert conn.pn.remote_container, "no container id in the router's open"
    finally:
        client.close()


def _debug_lines(lines, modules=("SERVER", "ROUTER_CORE")):
    out = []
    for ln in lines:
        m = LOG_LINE_RE.match(ln)
        if m and m.group(2) in modules and m.group(3) in ("trace", "debug"):
            out.append(ln)
    return out


def test_trace_enable_for_server_and_router_core_logs_more(make_router):
    quiet = make_router(name="quiet")
    verbose = make_router(name="verbose", logs=[
        ["log", {"module": "SERVER", "enable": "trace+"}],
        ["log", {"module": "ROUTER_CORE", "enable": "trace+"}],
    ])
    workload(quiet)
    workload(verbose)
    assert quiet.stop() == 0 and verbose.stop() == 0
    q, v = quiet.stderr_lines(), verbose.stderr_lines()
    assert len(v) > len(q), "trace+ logged %d lines, default %d" % (len(v), len(q))
    assert not _debug_lines(q), "debug/trace lines at the default level:\n" + \
        "\n".join(_debug_lines(q)[:10])
    assert _debug_lines(v), "no SERVER/ROUTER_CORE debug or trace lines with trace+:\n" + \
        "\n".join(v[:40])


def test_log_enable_level_list_is_honoured(make_router):
    """'warning+' for SERVER hides its notice and info lines (Operational is one of them)."""
    # the readiness lines are SERVER notices: they must not come, so ready is listening
    r = start_logging_to(make_router, [["log", {"module": "SERVER", "enable": "warning+"}]],
                         lambda r: True)
    workload(r)
    assert r.stop() == 0
    low = [ln for ln in r.stderr_lines() if (LOG_LINE_RE.match(ln) or [None] * 4)[2] == "SERVER"
           and LOG_LINE_RE.match(ln).group(3) in ("trace", "debug", "info", "notice")]
    assert not low, "SERVER lines below warning with enable 'warning+':\n" + "\n".join(low)


def test_connection_and_link_log_lines_carry_ids(make_router):
    r = make_router(logs=[["log", {"module": "DEFAULT", "enable": "trace+"}]])
    workload(r)
    assert r.stop() == 0
    text = r.stderr_text()
    conn_ids = re.findall(r"\[C(\d+)\]", text)
    assert conn_ids, "no [C<n>] connection ids in the log:\n" + text[-4000:]
    assert re.search(r"\[C\d+\]\[L\d+\]", text), "no [C<n>][L<n>] link ids:\n" + text[-4000:]
    # the workload's connection is logged more than once (at least accepted and closed)
    assert max(conn_ids.count(c) for c in set(conn_ids)) >= 2, text[-4000:]
