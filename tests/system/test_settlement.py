"""Settlement and outcomes: what the receiver decides reaches the sender, unsettled
deliveries are settled end to end, and lost deliveries come back RELEASED or MODIFIED."""

import pytest
from proton import Delivery, Message

from clients import outcome_name

OUTCOMES = {
    "ACCEPTED": Delivery.ACCEPTED,
    "REJECTED": Delivery.REJECTED,
    "RELEASED": Delivery.RELEASED,
    "MODIFIED": Delivery.MODIFIED,
}


def test_sender_sees_the_outcome_only_after_the_receiver_settles(router, client):
    rcv = client.connect(router.url).receiver("settle.late")  # settles by hand
    snd = client.connect(router.url).sender("settle.late")
    dlv = snd.send(Message(body="wait for it"))
    got = rcv.get()
    assert not got.delivery.settled, "an unsettled send arrived settled"
    client.run_for(0.5)
    assert dlv.remote_state == 0, "outcome %s before the receiver decided" % (
        outcome_name(dlv.remote_state))
    assert not dlv.settled
    got.accept()
    assert snd.wait_outcome(dlv) == Delivery.ACCEPTED
    assert dlv.settled


@pytest.mark.parametrize("outcome", list(OUTCOMES))
def test_receiver_outcome_reaches_the_sender(router, client, outcome):
    rcv = client.connect(router.url).receiver("settle.outcome")
    snd = client.connect(router.url).sender("settle.outcome")
    dlv = snd.send(Message(body=outcome))
    rcv.get().settle(OUTCOMES[outcome])
    assert outcome_name(snd.wait_outcome(dlv)) == outcome


def test_rejection_condition_reaches_the_sender(router, client):
    rcv = client.connect(router.url).receiver("settle.cond")
    snd = client.connect(router.url).sender("settle.cond")
    dlv = snd.send(Message(body="bad"))
    rcv.get().reject("app:bad-request", "the body was bad")
    assert snd.wait_outcome(dlv) == Delivery.REJECTED
    cond = dlv.remote.condition
    assert cond is not None, "REJECTED without the receiver's error condition"
    assert cond.name == "app:bad-request"
    assert cond.description == "the body was bad"


def test_modified_flags_reach_the_sender(router, client):
    rcv = client.connect(router.url).receiver("settle.mod")
    snd = client.connect(router.url).sender("settle.mod")
    dlv = snd.send(Message(body="modify me"))
    rcv.get().modify(failed=True, undeliverable=True)
    assert snd.wait_outcome(dlv) == Delivery.MODIFIED
    assert dlv.remote.failed
    assert dlv.remote.undeliverable


def test_modified_is_always_delivery_failed(router, client):
    """A consumer's MODIFIED without delivery-failed reaches the sender with it set, as
    qdrouterd 1.19 passes every MODIFIED back (undeliverable-here as the consumer said)."""
    rcv = client.connect(router.url).receiver("settle.mod0")
    snd = client.connect(router.url).sender("settle.mod0")
    dlv = snd.send(Message(body="modify me"))
    rcv.get().modify(failed=False, undeliverable=False)
    assert snd.wait_outcome(dlv) == Delivery.MODIFIED
    assert dlv.remote.failed
    assert not dlv.remote.undeliverable


def test_presettled_sender_delivers(router, client):
    rcv = client.connect(router.url).receiver("settle.pre")
    snd = client.connect(router.url).sender("settle.pre", presettled=True)
    for i in range(10):
        snd.send(Message(body=i))
    got = rcv.get_n(10)
    assert [g.body for g in got] == list(range(10))
    assert all(g.delivery.settled for g in got), "presettled message arrived unsettled"


def test_presettled_multicast_reaches_every_receiver(router, client):
    rcvs = [client.connect(router.url).receiver("multicast.pre", settle="accept")
            for _ in range(3)]
    snd = client.connect(router.url).sender("multicast.pre", presettled=True)
    for i in range(5):
        snd.send(Message(body=i))
    for r in rcvs:
        assert [g.body for g in r.get_n(5)] == list(range(5))


@pytest.mark.parametrize("outcomes,want", [
    (("ACCEPTED", "ACCEPTED", "ACCEPTED"), "ACCEPTED"),
    (("ACCEPTED", "REJECTED", "ACCEPTED"), "REJECTED"),
    (("REJECTED", "RELEASED", "MODIFIED"), "REJECTED"),
    (("RELEASED", "ACCEPTED", "RELEASED"), "ACCEPTED"),
    (("RELEASED", "MODIFIED", "RELEASED"), "MODIFIED"),
    (("RELEASED", "RELEASED", "RELEASED"), "RELEASED"),
], ids=lambda v: "-".join(v) if isinstance(v, tuple) else v)
def test_multicast_unsettled_outcome(router, client, outcomes, want):
    rcvs = [client.connect(router.url).receiver("multicast.outcome") for _ in range(3)]
    snd = client.connect(router.url).sender("multicast.outcome")
    dlv = snd.send(Message(body="to all"))
    got = [r.get() for r in rcvs]
    for g, o in zip(got[:-1], outcomes[:-1]):
        g.settle(OUTCOMES[o])
    client.run_for(0.3)
    assert not dlv.settled, "settled before every receiver settled"
    got[-1].settle(OUTCOMES[outcomes[-1]])
    assert outcome_name(snd.wait_outcome(dlv)) == want


def test_undelivered_messages_are_released_when_the_receiver_detaches(router, client):
    rcv = client.connect(router.url).receiver("settle.undelivered", credit=0)
    snd = client.connect(router.url).sender("settle.undelivered")
    dlvs = [snd.send(Message(body=i)) for i in range(3)]
    client.run_for(0.5)
    assert rcv.count == 0
    rcv.close()
    assert [outcome_name(s) for s in snd.wait_outcomes(dlvs)] == ["RELEASED"] * 3


@pytest.mark.parametrize("how", ["link", "connection"])
def test_unsettled_delivery_is_modified_when_the_receiver_goes(router, client, how):
    rconn = client.connect(router.url)
    rcv = rconn.receiver("settle.gone", credit=1, auto_credit=False)
    snd = client.connect(router.url).sender("settle.gone")
    dlvs = [snd.send(Message(body=i)) for i in range(3)]
    assert rcv.get().body == 0  # received, never settled
    client.run_for(0.3)
    assert rcv.count == 1
    if how == "link":
        rcv.close()
    else:
        rconn.close()
    states = [outcome_name(s) for s in snd.wait_outcomes(dlvs)]
    assert states == ["MODIFIED", "RELEASED", "RELEASED"], states
    assert dlvs[0].remote.failed, "MODIFIED without delivery-failed"


def test_released_message_can_be_sent_again(router, client):
    rcv = client.connect(router.url).receiver("settle.retry")
    snd = client.connect(router.url).sender("settle.retry")
    dlv = snd.send(Message(body="try again"))
    rcv.get().release()
    assert snd.wait_outcome(dlv) == Delivery.RELEASED
    dlv = snd.send(Message(body="try again"))
    rcv.get().accept()
    assert snd.wait_outcome(dlv) == Delivery.ACCEPTED
