"""What the broker tests rely on from brokers.py itself: a test's connection to the router
lives through a broker start that blocks the test for longer than the router's idle timeout
(RabbitMQ's start does on a loaded machine), when the start pumps it.

The start is held here by a readiness probe that answers "not yet" for HOLD seconds, and the
router's idle timeout is 2 s, so the case is the same as a slow RabbitMQ start against the
default 16 s, in a few seconds and with the Proton broker."""

import time

import pytest

import brokers
from clients import Client

IDLE = 2   # the router's idleTimeoutSeconds in these tests
HOLD = 5.0  # seconds each start is held: well past IDLE


def hold_probe(monkeypatch, seconds):
    """The readiness probe answers "not ready" for `seconds`, then probes for real."""
    real = brokers._probe_amqp
    until = time.monotonic() + seconds

    def probe(url, address, timeout):
        if time.monotonic() < until:
            return False
        return real(url, address, timeout)
    monkeypatch.setattr(brokers, "_probe_amqp", probe)


# Release build only: a fact of brokers.py and Proton's heartbeats; the router's idle timeout
# runs on every build in test_lifecycle.py.
@pytest.mark.release_only
def test_a_slow_broker_start_keeps_a_pumped_connection(proton_broker, make_router,
                                                        monkeypatch):
    r = make_router(listener={"host": "127.0.0.1", "port": "0", "idleTimeoutSeconds": IDLE})
    c = Client()
    try:
        # unpumped, the connection sends no heartbeat and the router closes it: the failure
        # the broker tests had (their next attach was never answered)
        lost = c.connect(r.url)
        proton_broker.kill()
        hold_probe(monkeypatch, HOLD)
        proton_broker.start()
        assert proton_broker.start_seconds[-1] >= HOLD
        c.wait(lost.is_gone, 5, "the router to close the idle connection")
        r.wait_log(r"failed: amqp:resource-limit-exceeded local-idle-timeout expired")
        # pumped while the broker starts, it lives on and its new links are answered
        conn = c.connect(r.url)
        proton_broker.kill()
        hold_probe(monkeypatch, HOLD)
        proton_broker.start(pump=c.run_for)
        assert proton_broker.start_seconds[-1] >= HOLD
        assert not conn.is_gone()
        snd = conn.sender("fixture-q")
        assert snd.remote_condition is None
        assert not conn.is_gone()
    finally:
        c.close()
