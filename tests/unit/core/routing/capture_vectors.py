#!/usr/bin/env python3
"""Record the routing-protocol messages a real qdrouterd 1.19 sends, as test vectors.

Usage: /usr/bin/python3 capture_vectors.py [OUT_DIR]   (default: vectors/ beside this file)

Starts ../shared/peer/bin/qdrouterd (found from the repository root) as interior router
"QDR.A" with an inter-router listener and a normal listener on loopback, then plays a second
interior router "PEER" over Proton-Python: it opens an inter-router connection, attaches the
two control links (capability qd.router as a bare symbol on source and target), sends HELLOs
with QDR.A in `seen`, answers LSR with an LSU, advertises mobile_seq 1 so that QDR.A asks for
its addresses (MAR), asks QDR.A for its link state (LSR) and its addresses (MAR), and attaches
a consumer for "golden/addr" on the normal listener so that QDR.A floods a differential MAU.
Every message QDR.A sends on the control link is written byte for byte as it arrived
(message-annotations included) to OUT_DIR/qdr-<opcode>[-<kind>].bin, the first of each kind (HELLO with an empty
and with a non-empty `seen`, differential and absolute MAU).
The messages hold router ids, sequence numbers and a boot time: no secrets.
Exits 1 if some kind was not seen within 20 s.  Runs only with the Proton-Python of
/usr/bin/python3.
"""
import os
import socket
import subprocess
import sys
import tempfile
import time

from proton import Message, symbol
from proton.handlers import MessagingHandler
from proton.reactor import Container, LinkOption

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "system"))
from conftest import free_port  # noqa: E402
QDROUTERD = os.path.join(ROOT, "..", "shared", "peer", "bin", "qdrouterd")
QDR_ID = "QDR.A"
PEER_ID = "PEER"
WANT = ["HELLO", "HELLO-seen", "RA", "LSR", "LSU", "MAU-diff", "MAU-abs", "MAR"]


class RouterCaps(LinkOption):
    """Both termini carry the single symbol qd.router, no address."""

    def apply(self, link):
        link.source.capabilities.put_symbol("qd.router")
        link.target.capabilities.put_symbol("qd.router")


class Peer(MessagingHandler):
    def __init__(self, ir_url, normal_url, out_dir):
        super().__init__(prefetch=0, auto_accept=False, auto_settle=True)
        self.ir_url, self.normal_url, self.out_dir = ir_url, normal_url, out_dir
        self.instance = int(time.time())
        self.heard = False
        self.got = {}
        self.asked_ls = False
        self.asked_ma = False
        self.consumer = None
        self.deadline = time.time() + 20

    def on_start(self, event):
        self.container = event.container
        self.conn = event.container.connect(
            self.ir_url, allowed_mechs="ANONYMOUS", sasl_enabled=True,
            offered_capabilities=[symbol("ANONYMOUS-RELAY"), symbol("qd.streaming-links")],
            desired_capabilities=[symbol("ANONYMOUS-RELAY"), symbol("qd.streaming-links")],
            properties={symbol("product"): "junction-capture", symbol("version"): "1.19.0",
                        symbol("qd.annotations-version"): 1})
        self.ctl_in = event.container.create_receiver(self.conn, None, name="ctl-in",
                                                      options=RouterCaps())
        self.ctl_out = event.container.create_sender(self.conn, None, name="ctl-out",
                                                     options=RouterCaps())
        self.ctl_in.flow(1000)
        event.container.schedule(1.0, self)

    def send(self, to, opcode, body):
        if self.ctl_out.credit > 0:
            self.ctl_out.send(Message(address=to, properties={"opcode": opcode}, body=body))

    def base(self):
        return {"id": PEER_ID, "pv": 1, "area": "0"}

    def on_timer_task(self, event):
        if time.time() > self.deadline or all(k in self.got for k in WANT):
            self.finish()
            return
        body = dict(self.base(), instance=self.instance, seen=[QDR_ID] if self.heard else [])
        self.send("amqp:/_local/qdhello", "HELLO", body)
        if self.heard:
            self.send("amqp:/_topo/0/all/qdrouter", "RA",
                      dict(self.base(), instance=self.instance, ls_seq=1, mobile_seq=1))
        event.container.schedule(1.0, self)

    def finish(self):
        if self.consumer:
            self.consumer.connection.close()
        self.conn.close()

    def record(self, kind, raw):
        if kind not in self.got:
            self.got[kind] = raw
            with open(os.path.join(self.out_dir, "qdr-%s.bin" % kind), "wb") as f:
                f.write(raw)

    def on_delivery(self, event):
        dlv = event.delivery
        link = event.link
        if link.name != "ctl-in" or dlv.partial:
            return
        raw = link.recv(dlv.pending)
        dlv.settle()
        link.flow(1)
        msg = Message()
        msg.decode(raw)
        op = msg.properties.get("opcode") or msg.properties.get(symbol("opcode"))
        body = dict((str(k), v) for k, v in msg.body.items())
        if op == "MAU":
            self.record("MAU-abs" if "exist" in body else "MAU-diff", raw)
        elif op == "HELLO" and body.get("seen"):
            self.record("HELLO-seen", raw)
        else:
            self.record(op, raw)
        if op == "HELLO":
            self.heard = True
        elif op == "LSR":
            ls = {"id": PEER_ID, "area": "0", "ls_seq": 1, "peers": {QDR_ID: 1}}
            self.send("amqp:/_topo/0/%s/qdrouter" % QDR_ID, "LSU",
                      dict(self.base(), instance=self.instance, ls_seq=1, ls=ls))
        elif op == "MAR":
            self.send("amqp:/_topo/0/%s/qdrouter.ma" % QDR_ID, "MAU",
                      dict(self.base(), mobile_seq=1, exist=["M0peer/addr"], hints=[3]))
        elif op == "RA" and not self.asked_ls:
            self.asked_ls = True
            self.send("amqp:/_topo/0/%s/qdrouter" % QDR_ID, "LSR", self.base())
        elif op == "LSU" and not self.consumer:
            self.consumer = self.container.create_receiver(self.normal_url, "golden/addr")
        if op == "MAU" and "add" in body and not self.asked_ma:
            self.asked_ma = True
            self.send("amqp:/_topo/0/%s/qdrouter.ma" % QDR_ID, "MAR",
                      dict(self.base(), have_seq=0))


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "vectors")
    if not os.path.exists(QDROUTERD):
        print("capture_vectors: no qdrouterd at %s" % QDROUTERD)
        return 77
    ir_port, normal_port = free_port(), free_port()
    with tempfile.TemporaryDirectory() as tmp:
        cfg = os.path.join(tmp, "qdrouterd.conf")
        with open(cfg, "w") as f:
            f.write("router {\n mode: interior\n id: %s\n}\n" % QDR_ID)
            if os.environ.get("CAPTURE_TRACE"):
                f.write("log {\n module: DEFAULT\n enable: trace+\n}\n")
            f.write("listener {\n host: 127.0.0.1\n port: %d\n role: inter-router\n"
                    " authenticatePeer: no\n saslMechanisms: ANONYMOUS\n}\n" % ir_port)
            f.write("listener {\n host: 127.0.0.1\n port: %d\n role: normal\n"
                    " authenticatePeer: no\n saslMechanisms: ANONYMOUS\n}\n" % normal_port)
        log = open(os.path.join(tmp, "qdrouterd.log"), "w")
        proc = subprocess.Popen([QDROUTERD, "-c", cfg], stdout=log, stderr=subprocess.STDOUT)
        try:
            for _ in range(100):
                try:
                    socket.create_connection(("127.0.0.1", ir_port), 0.2).close()
                    break
                except OSError:
                    time.sleep(0.1)
            peer = Peer("amqp://127.0.0.1:%d" % ir_port, "amqp://127.0.0.1:%d" % normal_port,
                        out_dir)
            c = Container(peer)
            c.container_id = PEER_ID
            c.run()
        finally:
            proc.terminate()
            proc.wait(10)
            log.close()
            if peer.got.keys() != set(WANT):
                print(open(os.path.join(tmp, "qdrouterd.log")).read()[-3000:])
    missing = [k for k in WANT if k not in peer.got]
    print("capture_vectors: recorded %s%s" % (", ".join(sorted(peer.got)),
          "; missing " + ", ".join(missing) if missing else ""))
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
