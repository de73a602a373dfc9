"""Configuration: qdrouterd's JSON form, its coercions and aliases, and clear errors (the .conf
dialect: test_conf.py)."""

import os
import re
import time

import pytest
from proton import Message

from clients import Client
from conftest import ROUTER_ID, run_junctiond, sanitizer_report, write_config

BASE = [
    ["router", {"id": ROUTER_ID, "mode": "standalone"}],
    ["listener", {"host": "127.0.0.1", "port": "0"}],
]


def start_fails(tmp_path, entities=None, text=None, name="bad-config.json"):
    """Run junctiond on a bad configuration; return (its single stderr line, the rest of the
    line with the file name removed).  Asserts a non-zero exit and exactly one line."""
    path = tmp_path / name
    if text is None:
        write_config(path, entities)
    else:
        path.write_text(text)
    p = run_junctiond(["-c", path])
    assert p.returncode != 0, "junctiond accepted the configuration:\n%s" % p.stderr
    assert sanitizer_report(p.stderr) is None, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, "want one line on stderr, got %d:\n%s" % (len(lines), p.stderr)
    line = lines[0]
    assert name in line, "the line does not name the file %s: %s" % (name, line)
    return line, line.replace(str(path), "").replace(name, "")


def names_entity(rest, index, etype):
    return re.search(r"\b%d\b" % index, rest) and etype in rest


def test_unknown_attribute_is_refused(tmp_path):
    line, rest = start_fails(tmp_path, BASE + [
        ["address", {"prefix": "a", "distribution": "closest"}],
        ["listener", {"host": "127.0.0.1", "port": "0", "noSuchAttribute": 1}],
    ])
    assert names_entity(rest, 3, "listener"), line
    assert "noSuchAttribute" in rest, line


def test_unknown_entity_type_is_refused(tmp_path):
    line, rest = start_fails(tmp_path, BASE + [["noSuchEntity", {"a": 1}]])
    assert re.search(r"\b2\b", rest), line
    assert "noSuchEntity" in rest, line


def test_wrong_attribute_type_is_refused(tmp_path):
    line, rest = start_fails(tmp_path, [
        ["router", {"id": ROUTER_ID}],
        ["listener", {"host": "127.0.0.1", "port": "0", "maxFrameSize": "big"}],
    ])
    assert names_entity(rest, 1, "listener"), line
    assert "maxFrameSize" in rest, line
    assert re.search(r"integer|number", rest, re.I), "no expectation in: " + line


def test_missing_required_attribute_is_refused(tmp_path):
    line, rest = start_fails(tmp_path, BASE + [["log", {"enable": "info+"}]])
    assert names_entity(rest, 2, "log"), line
    assert "module" in rest, line
    assert re.search(r"requir|missing", rest, re.I), "no expectation in: " + line


def test_address_with_prefix_and_pattern_is_refused(tmp_path):
    line, rest = start_fails(tmp_path, BASE + [
        ["address", {"prefix": "a", "pattern": "b.*", "distribution": "closest"}],
    ])
    assert names_entity(rest, 2, "address"), line
    assert "prefix" in rest and "pattern" in rest, line


def test_bad_enum_value_is_refused(tmp_path):
    line, rest = start_fails(tmp_path, BASE + [
        ["address", {"prefix": "a", "distribution": "sideways"}],
    ])
    assert names_entity(rest, 2, "address"), line
    assert "distribution" in rest, line
    assert "sideways" in rest or "multicast" in rest, line


@pytest.mark.parametrize("text", [
    '[["router", {"id": "x"}],\n ["listener", {"port": "0"},\n]\n',
    '[["router", {"id": "x"}]',
    '{"router": {}}\n',
], ids=["trailing-comma", "unterminated", "not-a-list"])
def test_bad_json_is_refused(tmp_path, text):
    start_fails(tmp_path, text=text)


def test_empty_file_is_refused(tmp_path):
    start_fails(tmp_path, text="")


# ---- coercions and aliases that qdrouterd accepts --------------------------------------------

def sender_credit(router, address="cfg.q", url=None):
    """The credit a sender gets once a receiver exists (= the listener's linkCapacity)."""
    client = Client()
    try:
        conn = client.connect(url or router.url)
        conn.receiver(address, credit=1)
        snd = conn.sender(address)
        snd.wait_credit(1)
        client.run_for(0.2)
        return snd.credit
    finally:
        client.close()


def fans_out(router, address, receivers=2):
    """True if one message sent to `address` reaches every one of `receivers` receivers."""
    client = Client()
    try:
        conn = client.connect(router.url)
        rcvs = [conn.receiver(address, settle="accept") for _ in range(receivers)]
        snd = conn.sender(address)
        snd.send(Message(body="fan?"))
        client.run_for(0.5, stop=lambda: all(r.count for r in rcvs))
        client.run_for(0.2)
        return sum(r.count for r in rcvs) == receivers
    finally:
        client.close()


def test_strings_for_numbers_and_booleans_are_accepted(make_router):
    r = make_router(router={"workerThreads": "2"},
                    listener={"idleTimeoutSeconds": "120", "authenticatePeer": "no",
                              "maxFrameSize": "65536", "linkCapacity": "7"})
    assert r.threads == 2
    assert sender_credit(r) == 7


@pytest.mark.parametrize("style", ["kebab", "snake"])
def test_kebab_and_snake_case_keys_are_accepted(make_router, style):
    sep = "-" if style == "kebab" else "_"
    r = make_router(router={"worker%sthreads" % sep: 2},
                    listener={"link%scapacity" % sep: 10,
                              "idle%stimeout%sseconds" % (sep, sep): 30})
    assert r.threads == 2
    assert sender_credit(r) == 10


def test_long_entity_type_names_are_accepted(make_router):
    r = make_router([
        ["org.apache.qpid.dispatch.router", {"id": ROUTER_ID, "mode": "standalone"}],
        ["org.apache.qpid.dispatch.listener", {"host": "127.0.0.1", "port": "0"}],
        ["org.apache.qpid.dispatch.router.config.address",
         {"prefix": "longfan", "distribution": "multicast"}],
        ["router.config.address", {"prefix": "midfan", "distribution": "multicast"}],
        ["address", {"prefix": "shortfan", "distribution": "multicast"}],
    ])
    for prefix in ("longfan", "midfan", "shortfan"):
        assert fans_out(r, prefix + "/x"), "the %s address entity was not applied" % prefix
    assert not fans_out(r, "plain/x"), "an unconfigured address fanned out"


def test_comment_lines_are_ignored(make_router):
    text = """# Junction test configuration
[
  # the router
  ["router", {"id": "%s", "mode": "standalone"}],
    # an indented comment
  ["listener", {"host": "127.0.0.1", "port": "0", "linkCapacity": 9}],
#  ["listener", {"host": "127.0.0.1", "port": "0"}],
  ["address", {"prefix": "multicast", "distribution": "multicast"}]
]
# trailing comment
""" % ROUTER_ID
    r = make_router(start=False)  # one listener, like the text
    r.start(config_text=text)
    assert len(r.addresses) == 1
    assert sender_credit(r) == 9


def test_config_without_router_entity_uses_defaults(make_router):
    r = make_router([["listener", {"host": "127.0.0.1", "port": "0"}]])
    client = Client()
    try:
        conn = client.connect(r.url)
        rcv = conn.receiver("defaults.q", settle="accept")
        snd = conn.sender("defaults.q")
        snd.wait_credit(250)
        assert snd.credit == 250
        snd.send(Message(body="ok"))
        assert rcv.get().body == "ok"
    finally:
        client.close()


def test_two_listeners_each_with_their_own_settings(make_router):
    r = make_router(listeners=[
        {"host": "127.0.0.1", "port": "0", "linkCapacity": 3},
        {"host": "127.0.0.1", "port": 0, "linkCapacity": 12},
    ])
    assert len(r.addresses) == 2 and r.addresses[0][1] != r.addresses[1][1]
    assert sender_credit(r, url=r.url_of(0)) == 3
    assert sender_credit(r, url=r.url_of(1)) == 12
    # and a message crosses from one listener's connection to the other's
    client = Client()
    try:
        rcv = client.connect(r.url_of(0)).receiver("two.q", settle="accept")
        snd = client.connect(r.url_of(1)).sender("two.q")
        snd.send(Message(body="across"))
        assert rcv.get().body == "across"
    finally:
        client.close()


@pytest.mark.parametrize("n", [1, 3])
def test_worker_threads_is_honoured(make_router, n):
    r = make_router(router={"workerThreads": n})
    assert r.threads == n
    def thread_names():
        names = []
        for t in os.listdir("/proc/%d/task" % r.pid):
            with open("/proc/%d/task/%s/comm" % (r.pid, t)) as f:
                names.append(f.read().strip())
        return names

    # a worker names itself when its thread starts running, which may come a moment after
    # the router answers
    deadline = time.monotonic() + 10
    names = thread_names()
    while len([x for x in names if x.startswith("junction-w")]) < n and \
            time.monotonic() < deadline:
        time.sleep(0.05)
        names = thread_names()
    workers = [x for x in names if x.startswith("junction-w")]
    assert len(workers) == n, names
    # + main, the core, the agent, the log writer, maybe the admin thread, and a sanitizer's
    # own background thread
    assert n + 1 <= len(names) <= n + 6, "%d threads for workerThreads %d: %s" % (
        len(names), n, names)


def test_worker_threads_changes_the_thread_count(make_router):
    one = make_router(name="one", router={"workerThreads": 1})
    four = make_router(name="four", router={"workerThreads": 4})
    assert four.thread_count() - one.thread_count() == 3
