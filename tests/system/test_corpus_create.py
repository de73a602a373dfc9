"""Management CREATE takes the names qdrouterd has used, as a configuration file does, and
logs the same deprecation warning start-up logs for a file: one AGENT warning per old name,
naming the modern one, here with the type and the name of the created entity.

Requests go through mgmt_tool.Node, built as qdmanage builds them."""

import re

import pytest

from clients import Client
from conftest import free_port
from mgmt_tool import ManagementError, Node

WARNING_RE = re.compile(r"AGENT \(warning\) (.*)")
LISTENER = "org.apache.qpid.dispatch.listener"
ADDRESS = "org.apache.qpid.dispatch.router.config.address"


@pytest.fixture
def node_of():
    made = []

    def make(router):
        n = Node(router.url, timeout=10)
        made.append(n)
        return n

    yield make
    for n in made:
        n.close()


def warnings(router, start=0):
    return [m.group(1) for m in map(WARNING_RE.search, router.stderr_lines()[start:]) if m]


def serves(port):
    c = Client(timeout=10)
    try:
        c.connect("amqp://127.0.0.1:%d" % port)
        return True
    finally:
        c.close()


def test_create_with_deprecated_names_logs_one_warning_each(make_router, node_of):
    r = make_router()
    node = node_of(r)
    start = len(r.stderr_lines())
    assert warnings(r) == []
    port = free_port()
    row = node.create({"addr": "127.0.0.1", "port": str(port), "idle-timeout-seconds": 7},
                      "listener", name="old.names")
    assert row["host"] == "127.0.0.1" and row["idleTimeoutSeconds"] == 7
    assert serves(port)
    r.wait_log(r"AGENT \(warning\) CREATE .*idleTimeoutSeconds", start=start)
    got = warnings(r, start)
    assert len(got) == 2, got
    by_old = {("'addr'" in w and "'host'" in w): w for w in got}
    addr_w, kebab_w = by_old[True], by_old[False]
    assert addr_w == ("CREATE %s 'old.names': attribute 'addr' is deprecated, use 'host' "
                      "instead" % LISTENER), addr_w
    assert kebab_w.startswith("CREATE %s 'old.names': " % LISTENER), kebab_w
    assert "idle-timeout-seconds" in kebab_w and "'idleTimeoutSeconds'" in kebab_w, kebab_w


def test_create_warning_is_start_ups_warning(make_router, node_of):
    # the same attribute in a file: start-up's warning says the same after its file/entity part
    r = make_router(listeners=[{"host": "127.0.0.1", "port": "0"},
                               {"addr": "127.0.0.1", "port": "0"}])
    at_start = warnings(r)
    assert len(at_start) == 1 and "entity 2 (listener): " in at_start[0], at_start
    file_text = at_start[0].split("entity 2 (listener): ", 1)[1]
    start = len(r.stderr_lines())
    node_of(r).create({"addr": "127.0.0.1", "port": str(free_port())}, "listener",
                      name="same")
    r.wait_log(r"AGENT \(warning\) CREATE ", start=start)
    assert warnings(r, start) == ["CREATE %s 'same': %s" % (LISTENER, file_text)]


def test_create_address_with_old_spelling_warns(make_router, node_of):
    r = make_router()
    start = len(r.stderr_lines())
    node_of(r).create({"prefix": "old.spelling", "distribution": "multicast",
                       "ingress-phase": 0}, "address", name="old.addr")
    r.wait_log(r"AGENT \(warning\) CREATE ", start=start)
    got = warnings(r, start)
    assert len(got) == 1, got
    assert got[0].startswith("CREATE %s 'old.addr': " % ADDRESS), got
    assert "'ingressPhase'" in got[0], got


def test_create_with_modern_names_logs_no_warning(make_router, node_of):
    r = make_router()
    node = node_of(r)
    start = len(r.stderr_lines())
    port = free_port()
    node.create({"host": "127.0.0.1", "port": str(port), "idleTimeoutSeconds": 7},
                "listener", name="new.names")
    node.create({"prefix": "new.spelling", "distribution": "multicast"}, "address",
                name="new.addr")
    assert serves(port)
    # a later CREATE with an old name shows the log is read up to here
    node.create({"prefix": "marker", "ingress-phase": 0}, "address", name="marker")
    r.wait_log(r"AGENT \(warning\) CREATE .*'marker'", start=start)
    assert len(warnings(r, start)) == 1, warnings(r, start)


def test_failed_create_logs_no_warning(make_router, node_of):
    # a CREATE refused after its attributes were read (here: a prefix configured already)
    # gets the error in its reply and logs nothing
    r = make_router()
    node = node_of(r)
    node.create({"prefix": "taken", "distribution": "closest"}, "address", name="taken")
    start = len(r.stderr_lines())
    with pytest.raises(ManagementError) as ei:
        node.create({"prefix": "taken", "ingress-phase": 0}, "address", name="second")
    assert "is configured already" in ei.value.description, ei.value
    node.create({"prefix": "marker2", "ingress-phase": 0}, "address", name="marker2")
    r.wait_log(r"AGENT \(warning\) CREATE .*'marker2'", start=start)
    assert len(warnings(r, start)) == 1, warnings(r, start)
