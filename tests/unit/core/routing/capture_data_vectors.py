#!/usr/bin/env python3
"""Record data messages a real qdrouterd 1.19 forwards to another interior router.

Usage: /usr/bin/python3 capture_data_vectors.py [OUT_DIR]   (default: vectors/ beside this file)

Runs capture_vectors.py's peer (router "PEER" on an inter-router connection to qdrouterd
"QDR.A", which learns from PEER's MAU that PEER has a consumer for "peer/addr"), and also
attaches the data links a connecting router attaches (for each priority 0..9 a receiver and
a sender, capability qd.router-data as a bare symbol, each pair on its own session).  Once
PEER's addresses were sent, a client on QDR.A's normal listener sends to "peer/addr": one
message on a sender targeted at it (priority 7, with a user annotation), one on an anonymous
sender with properties.to.  What QDR.A forwards on PEER's data links is written byte for byte
to OUT_DIR/qdr-data-targeted.bin and qdr-data-anonymous.bin, with the priority of the link it
came on in qdr-data-links.txt.  Exits 1 if either was not seen within 20 s.
"""
import os
import sys
import tempfile
import time

from proton import Message, symbol

import capture_vectors as cv

WANT_DATA = ["data-targeted", "data-anonymous"]


class DataPeer(cv.Peer):
    def __init__(self, *args):
        super().__init__(*args)
        self.data_in = {}
        self.client = None
        self.prio = {}
        self.sent_mau_at = None
        self.targeted = self.anonymous = None
        self.sent = set()

    def on_start(self, event):
        super().on_start(event)
        for p in range(10):
            ssn = self.conn.session()
            ssn.open()
            rcv = ssn.receiver("data-in-%d" % p)
            snd = ssn.sender("data-out-%d" % p)
            for link in (rcv, snd):
                link.source.capabilities.put_symbol("qd.router-data")
                link.target.capabilities.put_symbol("qd.router-data")
                link.open()
            rcv.flow(100)
            self.data_in[rcv.name] = p

    def send(self, to, opcode, body):
        super().send(to, opcode, body)
        if opcode == "MAU" and self.sent_mau_at is None:
            self.sent_mau_at = time.time()

    def on_timer_task(self, event):
        if all(k in self.got for k in WANT_DATA) or time.time() > self.deadline:
            self.finish()
            return
        if self.sent_mau_at and not self.client and time.time() > self.sent_mau_at + 1:
            # the client, on the normal listener; its events come to this handler too
            self.client = event.container.connect(self.normal_url)
            self.targeted = event.container.create_sender(self.client, "peer/addr")
            self.anonymous = event.container.create_sender(self.client, None)
        body = dict(self.base(), instance=self.instance, seen=[cv.QDR_ID] if self.heard else [])
        self.send("amqp:/_local/qdhello", "HELLO", body)
        if self.heard:
            self.send("amqp:/_topo/0/all/qdrouter", "RA",
                      dict(self.base(), instance=self.instance, ls_seq=1, mobile_seq=1))
        event.container.schedule(1.0, self)

    def on_sendable(self, event):
        if event.sender == self.targeted and "targeted" not in self.sent:
            self.sent.add("targeted")
            self.targeted.send(Message(body="targeted", priority=7,
                                       annotations={symbol("x-user"): "u"}))
        elif event.sender == self.anonymous and "anonymous" not in self.sent:
            self.sent.add("anonymous")
            self.anonymous.send(Message(address="peer/addr", body="anonymous"))

    def on_delivery(self, event):
        link = event.link
        if link.name not in self.data_in:
            return super().on_delivery(event)
        dlv = event.delivery
        if dlv.partial:
            return
        raw = link.recv(dlv.pending)
        dlv.update(dlv.ACCEPTED)
        dlv.settle()
        link.flow(1)
        msg = Message()
        msg.decode(raw)
        kind = "data-" + str(msg.body)
        if kind in WANT_DATA and kind not in self.got:
            self.prio[kind] = self.data_in[link.name]
            self.record(kind, raw)

    def finish(self):
        if self.client:
            self.client.close()
        super().finish()


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "vectors")
    # the control-plane kinds go to a scratch directory: capture_vectors.py owns those
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        peer = run(scratch)
        for k in WANT_DATA:
            if k in peer.got:
                with open(os.path.join(out_dir, "qdr-%s.bin" % k), "wb") as f:
                    f.write(peer.got[k])
        with open(os.path.join(out_dir, "qdr-data-links.txt"), "w") as f:
            for k in WANT_DATA:
                if k in peer.prio:
                    f.write("%s %d\n" % (k, peer.prio[k]))
    missing = [k for k in WANT_DATA if k not in peer.got]
    print("capture_data_vectors: recorded %s%s" % (
        ", ".join(k for k in WANT_DATA if k in peer.got),
        "; missing " + ", ".join(missing) if missing else ""))
    return 1 if missing else 0


def run(scratch):
    cv.Peer = DataPeer
    cv.WANT = cv.WANT + WANT_DATA
    holder = {}
    orig = cv.Container

    def container(handler):
        holder["peer"] = handler
        return orig(handler)
    cv.Container = container
    sys.argv = [sys.argv[0], scratch]
    cv.main()
    return holder["peer"]


if __name__ == "__main__":
    sys.exit(main())
