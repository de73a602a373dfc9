"""Credit: senders get linkCapacity credit only while their address has a consumer, lose it
when the last consumer goes, and get one credit back per settled delivery."""

import pytest
from proton import Delivery, Message


def test_sender_gets_no_credit_without_a_consumer(router, client):
    snd = client.connect(router.url).sender("credit.none")
    client.run_for(1.0)
    assert snd.credit == 0
    assert snd.max_credit_seen == 0


@pytest.mark.parametrize("capacity", [None, 10, 1])
def test_sender_gets_link_capacity_once_a_receiver_attaches(make_router, client, capacity):
    r = make_router(listener={} if capacity is None else {"linkCapacity": capacity})
    want = 250 if capacity is None else capacity
    conn = client.connect(r.url)
    snd = conn.sender("credit.cap")
    client.run_for(0.5)
    assert snd.credit == 0
    conn.receiver("credit.cap", credit=1)
    snd.wait_credit(want)
    client.run_for(0.3)
    assert snd.credit == want


def test_anonymous_sender_gets_link_capacity_at_once(make_router, client):
    r = make_router(listener={"linkCapacity": 17})
    snd = client.connect(r.url).sender(None)
    snd.wait_credit(17)
    client.run_for(0.3)
    assert snd.credit == 17


def test_credit_is_drained_when_the_last_receiver_detaches(router, client):
    snd = client.connect(router.url).sender("credit.drain")
    r1 = client.connect(router.url).receiver("credit.drain", credit=1)
    r2 = client.connect(router.url).receiver("credit.drain", credit=1)
    snd.wait_credit(250)
    r1.close()
    client.run_for(0.5)
    assert snd.credit == 250, "credit taken away while a receiver is still attached"
    r2.close()
    client.wait(lambda: snd.credit == 0, msg="credit drained to 0 (is %d)" % snd.credit)
    # and it comes back with the next receiver
    r3 = client.connect(router.url).receiver("credit.drain", credit=1, settle="accept")
    snd.wait_credit(1)
    snd.send(Message(body="after drain"))
    assert r3.get().body == "after drain"


def test_credit_is_drained_when_the_receivers_connection_closes(router, client):
    snd = client.connect(router.url).sender("credit.connclose")
    rconn = client.connect(router.url)
    rconn.receiver("credit.connclose", credit=1)
    snd.wait_credit(1)
    rconn.close()
    client.wait(lambda: snd.credit == 0, msg="credit drained to 0 (is %d)" % snd.credit)


def test_message_sent_before_any_consumer_reaches_the_first_consumer(router, client):
    snd = client.connect(router.url).sender("credit.early")
    dlv = snd.send(Message(body="early bird"), wait_credit=False)  # queued in the client
    client.run_for(0.5)
    assert dlv.remote_state == 0 and not dlv.settled
    rcv = client.connect(router.url).receiver("credit.early", settle="accept")
    assert rcv.get().body == "early bird"
    assert snd.wait_outcome(dlv) == Delivery.ACCEPTED


def test_credit_is_replenished_one_per_settled_delivery(make_router, client):
    r = make_router(listener={"linkCapacity": 10})
    rcv = client.connect(r.url).receiver("credit.repl", credit=200, settle="accept")
    snd = client.connect(r.url).sender("credit.repl")
    snd.wait_credit(10)
    dlvs = [snd.send(Message(body=i)) for i in range(100)]
    assert [g.body for g in rcv.get_n(100)] == list(range(100))
    assert snd.wait_outcomes(dlvs) == [Delivery.ACCEPTED] * 100
    assert snd.max_credit_seen <= 10, "sender saw %d credit with linkCapacity 10" % (
        snd.max_credit_seen)


def test_no_credit_comes_back_until_the_receiver_settles(make_router, client):
    r = make_router(listener={"linkCapacity": 10})
    rcv = client.connect(r.url).receiver("credit.hold", credit=100)  # settles by hand
    snd = client.connect(r.url).sender("credit.hold")
    snd.wait_credit(10)
    for i in range(10):
        snd.send(Message(body=i))
    got = rcv.get_n(10)
    client.run_for(0.5)
    assert snd.credit == 0, "credit came back before any settlement"
    for g in got[:3]:
        g.accept()
    client.wait(lambda: snd.credit == 3, msg="3 credits back after 3 settlements (have %d)"
                % snd.credit)
    for g in got[3:]:
        g.accept()
    snd.wait_credit(10)


def test_presettled_sender_credit_is_replenished(make_router, client):
    # The receiver's listener has the default capacity: an outgoing link whose backlog
    # reaches its capacity may drop presettled messages (qdrouterd does), which is not
    # what this test is about.
    r = make_router(listeners=[{"host": "127.0.0.1", "port": "0", "linkCapacity": 5},
                               {"host": "127.0.0.1", "port": "0"}])
    rcv = client.connect(r.url_of(1)).receiver("credit.pre", credit=100, settle="accept")
    snd = client.connect(r.url_of(0)).sender("credit.pre", presettled=True)
    for i in range(50):
        snd.send(Message(body=i))
    assert [g.body for g in rcv.get_n(50)] == list(range(50))
    assert snd.max_credit_seen <= 5
