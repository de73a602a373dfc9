"""Graceful shutdown (router attribute shutdownGraceSeconds): on SIGTERM the router stops
accepting connections and granting credit, lets deliveries in flight settle for up to the
grace period, then releases what is left back to the senders and exits 0 (no sanitizer
report: the fixture checks stderr at teardown)."""

import signal
import socket
import time

from proton import Delivery, Message

from clients import outcome_name


def _sigterm(r):
    r.proc.send_signal(signal.SIGTERM)
    r.wait_log(r"Shut down on signal 15")


def _wait_exit(r, client, timeout):
    """Pump the client until the router exits; returns its status."""
    client.wait(lambda: r.proc.poll() is not None, timeout, "the router to exit")
    return r.proc.wait()


def test_slow_receiver_settles_within_the_grace_period(make_router, client):
    r = make_router(router={"shutdownGraceSeconds": 20})
    conn = client.connect(r.url)
    rcv = conn.receiver("shutdown.slow", credit=10)
    snd = conn.sender("shutdown.slow")
    dlvs = [snd.send(Message(body=i)) for i in range(3)]
    got = rcv.get_n(3)
    credit_before = snd.credit
    _sigterm(r)
    # no new connections once shutting down
    t0 = time.monotonic()
    refused = False
    while time.monotonic() - t0 < 5 and not refused:
        try:
            socket.create_connection((r.host, r.port), timeout=1).close()
            client.run_for(0.1)
        except OSError:
            refused = True
    assert refused, "the router still accepts connections after SIGTERM"
    # the receiver takes its time, then settles: the sender sees ACCEPTED
    client.run_for(1.0)
    assert r.proc.poll() is None, "the router exited with deliveries in flight"
    for g in got:
        g.accept()
    assert snd.wait_outcomes(dlvs) == [Delivery.ACCEPTED] * 3
    # no credit came back for them while shutting down
    assert snd.credit <= credit_before
    assert _wait_exit(r, client, 15) == 0
    assert not any("releasing" in line for line in r.stderr_lines())


def test_receiver_that_never_settles_gets_released_after_the_grace_period(make_router, client):
    r = make_router(router={"shutdownGraceSeconds": 2})
    conn = client.connect(r.url)
    rcv = conn.receiver("shutdown.never", credit=10)
    snd_conn = client.connect(r.url)
    snd = snd_conn.sender("shutdown.never")
    dlvs = [snd.send(Message(body=i)) for i in range(3)]
    rcv.get_n(3)  # received, never settled
    t0 = time.monotonic()
    _sigterm(r)
    states = snd.wait_outcomes(dlvs, timeout=20)
    took = time.monotonic() - t0
    assert all(s in (Delivery.RELEASED, Delivery.MODIFIED) for s in states), \
        [outcome_name(s) for s in states]
    assert took >= 1.5, "released before the grace period was over (%.1fs)" % took
    assert _wait_exit(r, client, 20) == 0
    r.wait_log(r"Shutdown grace period over: releasing")


def test_shutdown_with_nothing_in_flight_is_immediate(make_router, client):
    r = make_router(router={"shutdownGraceSeconds": 30})
    conn = client.connect(r.url)
    rcv = conn.receiver("shutdown.idle", credit=10, settle="accept")
    snd = conn.sender("shutdown.idle")
    d = snd.send(Message(body="done"))
    assert snd.wait_outcome(d) == Delivery.ACCEPTED
    t0 = time.monotonic()
    _sigterm(r)
    assert _wait_exit(r, client, 15) == 0
    assert time.monotonic() - t0 < 10, "waited for the grace period with nothing in flight"
    assert rcv.count == 1


def test_no_credit_is_granted_while_shutting_down(make_router, client):
    r = make_router(router={"shutdownGraceSeconds": 20},
                    listener={"linkCapacity": 5})
    conn = client.connect(r.url)
    rcv = conn.receiver("shutdown.credit", credit=50)
    snd = conn.sender("shutdown.credit")
    dlvs = [snd.send(Message(body=i)) for i in range(5)]
    got = rcv.get_n(5)
    _sigterm(r)
    client.run_for(0.5)
    for g in got:
        g.accept()
    snd.wait_outcomes(dlvs)
    client.run_for(0.5)
    # settled deliveries give no credit back (the router closes once they are settled)
    assert snd.credit == 0
    assert _wait_exit(r, client, 20) == 0
