"""Sessions and settlement modes toward RabbitMQ (docs/brokers.md R3, R15; router/link_auto.c,
router/peer_quirks.c; docs/decisions/0007), against the real broker (brokers.py).

* RabbitMQ ends the whole session over a refused attach (R3): each autoLink has a session of
  its own on the connector's connection, so one refused autoLink, retried every few seconds,
  takes no other autoLink down.  A connection with fewer sessions than autoLinks (the
  connector's maxSessions, or the peer's channel-max) leaves the ones beyond it failed with a
  lastError that says so; they retry and take a session that comes free.
* RabbitMQ ends the session over rcv-settle-mode second (R15): a link-routed sender that asks
  for it is attached with first (the receiver's attach says the mode it uses, and RabbitMQ's
  answer, first, reaches the client); a link-routed receiver that uses it is refused by the
  router with a clear error, before anything reaches RabbitMQ.
"""

import re
import time

import pytest
from proton import Delivery, Link, Message

from brokers import connector_to, linkroute_router, unique_name
from clients import Client
from mgmt_tool import Node
from test_brokers import RcvSettleSecond

def rows(node):
    return {x["name"]: x for x in node.query_dicts("autoLink")}


def states(node):
    return {n: x["operStatus"] for n, x in rows(node).items()}


def wait_for(c, node, pred, timeout, what):
    end = time.monotonic() + timeout
    got = None
    while time.monotonic() < end:
        got = rows(node)
        if pred(got):
            return got
        c.run_for(0.2)
    raise AssertionError("%s never came; last %r" % (what, got))


def failures(r, name):
    """The router's log lines for autoLink `name`'s failed activations."""
    pat = re.compile(r"Auto Link Activation Failed\. '%s'" % re.escape(name))
    return [x for x in r.stderr_lines() if pat.search(x)]


@pytest.mark.deadline(120)
def test_rabbitmq_refused_autolink_takes_no_other_autolink(rabbitmq, make_router):
    """An in-autoLink to a missing `/amq/queue/...` is refused by RabbitMQ ending its session
    (R3), again at each retry; the other autoLinks of the connection, to an existing queue,
    stay active all along and carry messages (before, they shared the refused one's session
    and went down with it at every retry)."""
    q = unique_name("wp")
    missing = unique_name("missing")
    r = make_router(extra=[
        connector_to(rabbitmq),
        ["address", {"prefix": q, "waypoint": True}],
        ["address", {"prefix": missing, "waypoint": True}],
        ["autoLink", {"name": "out", "address": q, "direction": "out", "connection": "broker",
                      "externalAddress": "/queue/" + q}],
        ["autoLink", {"name": "in", "address": q, "direction": "in", "connection": "broker",
                      "externalAddress": "/queue/" + q}],
        ["autoLink", {"name": "bad", "address": missing, "direction": "in",
                      "connection": "broker", "externalAddress": "/amq/queue/" + missing}],
    ])
    node = Node(r.url)
    c = Client()
    try:
        wait_for(c, node, lambda x: x["out"]["operStatus"] == "active" and
                 x["in"]["operStatus"] == "active" and x["bad"]["operStatus"] == "failed",
                 30, "good autoLinks active, the bad one failed")
        conn = c.connect(r.url)
        snd = conn.sender(q)
        rcv = conn.receiver(q, credit=10)
        # the bad autoLink is attached again (2 s, then every 5 s) and refused each time;
        # the good ones never leave active, and carry a message between the retries
        # (until two more refusals are seen: 7 s at the timers, more on a loaded machine)
        n0 = len(failures(r, "bad"))
        end = time.monotonic() + 40
        sent = 0
        while len(failures(r, "bad")) < n0 + 2 and time.monotonic() < end:
            got = states(node)
            assert got["out"] == "active" and got["in"] == "active", got
            d = snd.send(Message(body="m-%d" % sent))
            assert snd.wait_outcome(d, timeout=10) == Delivery.ACCEPTED
            m = rcv.get(timeout=10)
            assert m.body == "m-%d" % sent
            m.accept()
            sent += 1
            c.run_for(0.3)
        assert len(failures(r, "bad")) >= n0 + 2, failures(r, "bad")
        bad = rows(node)["bad"]
        assert bad["operStatus"] == "failed" and "NOT_FOUND" in (bad["lastError"] or ""), bad
        assert snd.remote_condition is None and rcv.remote_condition is None
    finally:
        c.close()
        node.close()


@pytest.mark.deadline(120)
def test_rabbitmq_more_autolinks_than_sessions(rabbitmq, make_router):
    """A connector allowing 2 sessions (maxSessions) and 3 autoLinks: two are active, the third
    is failed with a lastError naming the session limit, and retried; once an active one is
    deleted, its session is ended and the third takes one at its next retry."""
    q = unique_name("wp")
    names = ["a1", "a2", "a3"]
    r = make_router(extra=[
        connector_to(rabbitmq, maxSessions=2),
        ["address", {"prefix": q, "waypoint": True}],
    ] + [["autoLink", {"name": n, "address": "%s.%s" % (q, n), "direction": "out",
                       "connection": "broker", "externalAddress": "/queue/%s.%s" % (q, n)}]
         for n in names])
    node = Node(r.url)
    c = Client()
    try:
        got = wait_for(c, node, lambda x: sorted(v["operStatus"] for v in x.values()) ==
                       ["active", "active", "failed"], 30, "two active autoLinks, one failed")
        left = [n for n in names if got[n]["operStatus"] == "failed"][0]
        err = got[left]["lastError"] or ""
        assert "No session left" in err and "all 2 in use" in err, err
        # it is retried, and stays failed while both sessions are taken
        n0 = len(failures(r, left))
        wait_for(c, node, lambda x: len(failures(r, left)) > n0, 10, "a retry")
        assert rows(node)[left]["operStatus"] == "failed"
        # an active one goes: its session ends, and the failed one gets it
        gone = [n for n in names if n != left][0]
        node.delete("autoLink", name=gone)
        wait_for(c, node, lambda x: gone not in x and x[left]["operStatus"] == "active",
                 15, "the failed autoLink active on the freed session")
        # and carries messages to RabbitMQ
        conn = c.connect(r.url)
        snd = conn.sender("%s.%s" % (q, left))
        d = snd.send(Message(body="x"))
        assert snd.wait_outcome(d, timeout=10) == Delivery.ACCEPTED
    finally:
        c.close()
        node.close()


@pytest.mark.deadline(90)
def test_rabbitmq_link_route_sender_rcv_second_attached_first(rabbitmq, make_router):
    """A link-routed sender asking for rcv-settle-mode second is attached to RabbitMQ with
    first: the router's attach reply says first (the receiver's attach carries the mode it
    uses), and messages go and are accepted (before, RabbitMQ ended the link's session and
    the client was detached with amqp:not-implemented)."""
    r = linkroute_router(make_router, rabbitmq)
    queue = "lrq." + unique_name()
    c = Client()
    try:
        conn = c.connect(r.url)
        snd = conn.sender(queue, options=[RcvSettleSecond()])
        assert snd.pn.remote_rcv_settle_mode == Link.RCV_FIRST
        d = snd.send(Message(body="m"))
        assert snd.wait_outcome(d, timeout=10) == Delivery.ACCEPTED
        rcv = conn.receiver(queue, credit=2)
        m = rcv.get(timeout=10)
        assert m.body == "m"
        m.accept()
        c.run_for(0.5)
        assert not snd.is_remote_closed() and snd.remote_condition is None
    finally:
        c.close()


@pytest.mark.deadline(90)
def test_rabbitmq_link_route_receiver_rcv_second_refused_by_the_router(rabbitmq, make_router):
    """A link-routed receiver using rcv-settle-mode second is refused by the router with a
    clear error saying what to do, before RabbitMQ sees it (before, RabbitMQ's own end of the
    session came back); the client's other link-routed links carry on."""
    r = linkroute_router(make_router, rabbitmq)
    queue = "lrq." + unique_name()
    c = Client()
    try:
        conn = c.connect(r.url)
        snd = conn.sender(queue)
        second = conn.receiver(queue, credit=1, wait=False, options=[RcvSettleSecond()])
        assert second.wait_remote_closed(timeout=15)
        cond = second.remote_condition
        assert cond is not None and cond.name == "amqp:not-implemented", cond
        assert "attach with rcv-settle-mode first" in cond.description, cond.description
        r.wait_log(r"Link route attach refused: the client asked for rcv-settle-mode second")
        d = snd.send(Message(body="still"))
        assert snd.wait_outcome(d, timeout=10) == Delivery.ACCEPTED
        rcv = conn.receiver(queue, credit=2)
        m = rcv.get(timeout=10)
        assert m.body == "still"
        m.accept()
    finally:
        c.close()


@pytest.mark.deadline(90)
def test_rabbitmq_link_route_with_no_session_left_is_refused(rabbitmq, make_router):
    """A connector allowing 1 session, taken by an autoLink: a link-routed attach finds no
    session left and is refused to its client with amqp:resource-limit-exceeded; the
    connection and the autoLink stay up (before, Proton found no channel when it wrote the
    begin and ended the connector's whole connection)."""
    q = unique_name("wp")
    r = make_router(extra=[
        connector_to(rabbitmq, maxSessions=1),
        ["address", {"prefix": q, "waypoint": True}],
        ["autoLink", {"name": "out", "address": q, "direction": "out", "connection": "broker",
                      "externalAddress": "/queue/" + q}],
        ["linkRoute", {"name": "lrqIn", "prefix": "lrq", "direction": "in",
                       "connection": "broker"}],
    ])
    node = Node(r.url)
    c = Client()
    try:
        wait_for(c, node, lambda x: x["out"]["operStatus"] == "active", 30, "autoLink active")
        conn = c.connect(r.url)
        lr = conn.sender("lrq." + unique_name(), wait=False)
        assert lr.wait_remote_closed(timeout=15)
        cond = lr.remote_condition
        assert cond is not None and cond.name == "amqp:resource-limit-exceeded", cond
        assert "No session left" in cond.description, cond.description
        c.run_for(1.0)
        assert states(node) == {"out": "active"}
        opened = [x for x in r.stderr_lines()
                  if re.search(r"Connection to 127\.0\.0\.1:%d opened" % rabbitmq.port, x)]
        assert len(opened) == 1, opened
        snd = conn.sender(q)
        d = snd.send(Message(body="x"))
        assert snd.wait_outcome(d, timeout=10) == Delivery.ACCEPTED
    finally:
        c.close()
        node.close()
