"""Vhost policy on the router's own connections (qdrouterd 1.19's `$connector` group): a
connector that names a `policyVhost` (role normal or route-container, under enableVhostPolicy)
has its connections governed by the `$connector` group of that vhost - the links the peer
attaches are checked against its sources and targets, as a client's are - while the links the
router attaches itself (autoLinks) are not; a vhost without such a group refuses the connection
(amqp:resource-limit-exceeded "connection disallowed by local policy", an error logged in
qdrouterd's words), and a connector without a policyVhost is not governed at all.

The peers are connector_peer.py (a Proton container the router connects to), which attaches a
receiver on IN_ADDR and a sender on OUT_ADDR over each connection the router makes.  The last
test makes the same connectors from the real qdrouterd (../shared/peer; skipped without it)."""

import time

import pytest
from proton import Delivery, Message

from clients import Client
from test_connector import IN_ADDR, OUT_ADDR, Peer
from conftest import free_port
from mgmt_tool import Node
from meshnet import stop_process
from qdr_peer import start_standalone

CONN_DENIED = "CONN_ERROR amqp:resource-limit-exceeded connection disallowed by local policy"


@pytest.fixture
def peers():
    ps = []

    def make():
        p = Peer(free_port()).start()
        ps.append(p)
        return p
    yield make
    for p in ps:
        p.stop()


def wait_autolink_opened(p, timeout=15.0):
    """Wait for the peer's line for the router's autoLink to auto.q (the router's attach names
    auto.q as its target; Junction's as its source too)."""
    deadline = time.monotonic() + timeout
    while not any(x.startswith("LINK_OPENED r ") and x.endswith(" auto.q") for x in p.lines):
        assert time.monotonic() < deadline, p.lines
        time.sleep(0.05)


def policy_extra(*connectors, autolinks=()):
    vhosts = [
        # the peer may send to the router only on "to-router.*" and receive only IN_ADDR
        ["vhost", {"hostname": "peers", "groups": {
            "$connector": {"sources": IN_ADDR, "targets": "to-router.*"},
            "clients": {"users": "someone", "remoteHosts": "*", "sources": "*",
                        "targets": "*"}}}],
        # no $connector group: a connector naming it is refused
        ["vhost", {"hostname": "nogroup", "groups": {
            "clients": {"users": "someone", "remoteHosts": "*"}}}],
        # what the test's own client gets (the open names 127.0.0.1; the defaultVhost)
        ["vhost", {"hostname": "$default", "allowUnknownUser": True, "groups": {
            "$default": {"remoteHosts": "*", "sources": "*", "targets": "*",
                         "allowAnonymousSender": True, "allowDynamicSource": True}}}],
    ]
    return ([["policy", {"enableVhostPolicy": True, "defaultVhost": "$default"}]] + vhosts +
            list(connectors) + [["autoLink", a] for a in autolinks] +
            ([["address", {"prefix": "auto", "waypoint": True}]] if autolinks else []))


def test_connector_group_governs_the_peers_links(make_router, peers):
    p = peers()
    conn = {"name": "to-peer", "host": "127.0.0.1", "port": str(p.port),
            "role": "route-container", "policyVhost": "peers"}
    r = make_router(extra=policy_extra(["connector", conn], autolinks=[
        {"address": "auto.q", "direction": "out", "connection": "to-peer"}]),
        logs=[["log", {"module": "POLICY", "enable": "info+"}]])
    p.wait_line("OPENED")
    # the peer's sender targets OUT_ADDR, which the group's targets do not list: refused as a
    # client's link would be; its receiver on IN_ADDR is in the sources: allowed
    line = p.wait_line("LINK_ERROR")
    assert line == "LINK_ERROR %s amqp:unauthorized-access link disallowed by local policy" \
        % OUT_ADDR, p.lines
    r.wait_log(r"DENY AMQP Attach sender link '%s' .*vhost 'peers' based on link target name"
               % OUT_ADDR, timeout=15)
    assert not any(x.startswith("LINK_ERROR %s " % IN_ADDR) for x in p.lines), p.lines
    # the router's own autoLink on that connection is not the group's to check: it attaches,
    # and a client's message to auto.q reaches the peer
    wait_autolink_opened(p)
    c = Client()
    try:
        snd = c.connect(r.url).sender("auto.q")
        assert snd.wait_outcome(snd.send(Message(body="through-the-autolink"))) == \
            Delivery.ACCEPTED
        assert p.wait_line("RECEIVED") == "RECEIVED through-the-autolink"
    finally:
        c.close()
    # the peer's connection is not one of the vhost's connections
    assert "CONN_ERROR" not in " ".join(p.lines)
    # management shows the connector's policyVhost, as qdrouterd does
    n = Node(r.url)
    try:
        row, = n.query_dicts("connector")
        assert row["policyVhost"] == "peers", row
    finally:
        n.close()


def test_connector_vhost_without_the_group_refuses_the_connection(make_router, peers):
    refused, free = peers(), peers()
    r = make_router(extra=policy_extra(
        ["connector", {"name": "refused", "host": "127.0.0.1", "port": str(refused.port),
                       "role": "normal", "policyVhost": "nogroup"}],
        ["connector", {"name": "free", "host": "127.0.0.1", "port": str(free.port),
                       "role": "normal"}]),
        logs=[["log", {"module": "POLICY", "enable": "info+"}]])
    # the router's open went first; the peer's answer is met with a close, with qdrouterd's
    # condition
    assert refused.wait_line("CONN_ERROR") == CONN_DENIED, refused.lines
    r.wait_log(r"POLICY \(error\) \[C\d+\] Failed to find policyVhost settings for connection "
               r"'\d+', policyVhost: 'nogroup'", timeout=15)
    # a connector without a policyVhost is not governed: both of the peer's links attach
    free.wait_line("LINK_OPENED s - %s" % OUT_ADDR)
    free.wait_line("LINK_OPENED r %s -" % IN_ADDR)
    assert not any(x.startswith(("LINK_ERROR", "CONN_ERROR")) for x in free.lines), free.lines


def test_the_same_with_qdrouterd(peers, tmp_path):
    """The same three connectors from the real qdrouterd 1.19 (skipped without it): the peers
    see the same refusals and the same links open."""
    governed, refused, free = peers(), peers(), peers()
    port = free_port()
    extra = policy_extra(
        ["connector", {"name": "to-peer", "host": "127.0.0.1", "port": governed.port,
                       "role": "route-container", "policyVhost": "peers"}],
        ["connector", {"name": "refused", "host": "127.0.0.1", "port": refused.port,
                       "role": "normal", "policyVhost": "nogroup"}],
        ["connector", {"name": "free", "host": "127.0.0.1", "port": free.port,
                       "role": "normal"}],
        autolinks=[{"address": "auto.q", "direction": "out", "connection": "to-peer"}])
    q = start_standalone(tmp_path / "qdr.json", [
        ["router", {"mode": "standalone", "id": "QDR"}],
        ["listener", {"host": "127.0.0.1", "port": port, "authenticatePeer": False,
                      "saslMechanisms": "ANONYMOUS"}]] + extra, port)
    try:
        assert governed.wait_line("LINK_ERROR") == \
            "LINK_ERROR %s amqp:unauthorized-access link disallowed by local policy" % OUT_ADDR
        wait_autolink_opened(governed)
        assert not any(x.startswith("LINK_ERROR %s " % IN_ADDR) for x in governed.lines)
        assert refused.wait_line("CONN_ERROR") == CONN_DENIED, refused.lines
        free.wait_line("LINK_OPENED s - %s" % OUT_ADDR)
        free.wait_line("LINK_OPENED r %s -" % IN_ADDR)
        assert not any(x.startswith(("LINK_ERROR", "CONN_ERROR")) for x in free.lines)
    finally:
        stop_process(q)
