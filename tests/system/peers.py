#!/usr/bin/python3
"""Client processes for the fault, slow-consumer and soak tests: an at-least-once sender and a
receiver that a test can kill (SIGKILL) or let the router vanish under.

    peers.py send URL ADDRESS --count N [--start K] [--size BYTES] [--window W]
                                        [--reconnect SECONDS] [--churn M]
    peers.py recv URL ADDRESS [--credit N] [--hold] [--delay SECONDS] [--reconnect SECONDS]
                              [--detach-after M]
    peers.py partial URL ADDRESS --size BYTES --stop-after BYTES

Each prints lines on its standard output (flushed before it talks to the router again, so a
line is out before the router can see what it reports):

    send:    "ready", "resend <id>" for every message sent again, "progress <accepted> <sent>
             <in flight> <to send> <credit>"
             now and then, and "done <accepted> <resent> <modified> <released>" at the end (exit 0);
             a REJECTED message prints "rejected <id> <condition>" and exits 3.
    recv:    "ready" once attached, then "got <id>" for every message accepted, or "held <id>"
             with --hold (kept unsettled); "aborted" for every aborted delivery.
    partial: "streamed <bytes>" once that many bytes of one big message went out; then it waits
             to be killed.

The sender is at-least-once: message <id> (the message-id; the body is <size> random bytes, or
the id) is sent again when the router answers RELEASED or MODIFIED, and every unsettled message
is sent again after its connection is lost; it finishes when every id was ACCEPTED.  With
--reconnect it reconnects (every that many seconds, until --give-up seconds pass) instead of
failing when the router is away; --churn M closes its connection after every M accepted
messages and opens a new one.  The receiver accepts each message on arrival unless --hold (it then keeps its first --credit
messages unsettled and grants no more credit);
--delay sleeps that long per message (a slow consumer, granting credit as it goes);
--detach-after M closes the link after M messages, or 2 s after the last one (accepting only
the first half of M, so the rest are unsettled when it goes), and exits 0.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from proton import Delivery, Endpoint, Message  # noqa: E402

from clients import Client, WaitTimeout  # noqa: E402


class Out:
    """Buffered stdout lines, flushed before the next step talks to the router."""

    def __init__(self):
        self.lines = []

    def __call__(self, *words):
        self.lines.append(" ".join(str(w) for w in words))

    def flush(self):
        if self.lines:
            sys.stdout.write("\n".join(self.lines) + "\n")
            sys.stdout.flush()
            self.lines = []


out = Out()


def step(client):
    out.flush()
    client._step()


def connect(client, url, reconnect, give_up):
    """A connection that the router opened; retries every `reconnect` seconds when set."""
    deadline = time.monotonic() + give_up
    while True:
        conn = client.connect(url, wait=False)
        try:
            client.wait(lambda: conn.pn.state & Endpoint.REMOTE_ACTIVE or conn.is_gone(),
                        timeout=30, msg="the router's open")
        except WaitTimeout:
            pass
        if conn.pn.state & Endpoint.REMOTE_ACTIVE and not conn.is_gone():
            return conn
        if not reconnect or time.monotonic() > deadline:
            raise SystemExit("peers: cannot connect to %s" % url)
        try:
            conn.pn.close()
        except Exception:
            pass
        client.run_for(reconnect)


def lost(conn, link):
    return conn.is_gone() or conn.remote_closed or bool(link.pn.state & Endpoint.REMOTE_CLOSED)


def run_send(a):
    client = Client(timeout=30)
    payload = os.urandom(a.size) if a.size else None
    todo = list(range(a.start + a.count - 1, a.start - 1, -1))  # popped from the end
    inflight = {}  # Delivery -> id
    accepted = set()
    resent = modified = released = sent = 0
    last_progress = time.monotonic()
    conn = snd = None
    since_churn = 0
    ready = False
    while len(accepted) < a.count:
        if snd is None or lost(conn, snd):
            if snd is not None:
                # everything unsettled on the lost connection goes again
                for d, i in inflight.items():
                    if i not in accepted:
                        todo.append(i)
                        out("resend", i)
                        resent += 1
                inflight.clear()
                if not a.reconnect and not a.churn:
                    raise SystemExit("peers: connection to the router lost")
                try:
                    conn.pn.close()
                except Exception:
                    pass
                client.run_for(a.reconnect or 0.05)
            conn = connect(client, a.url, a.reconnect, a.give_up)
            # the drain is answered below, once what can be sent is sent (AMQP 2.6.7)
            snd = conn.sender(a.address, wait=False, auto_drain=False)
            since_churn = 0
            if not ready:
                out("ready")
                ready = True
        while (todo and snd.pn.credit > 0 and len(inflight) < a.window and not client._streams
               and not lost(conn, snd)):
            i = todo.pop()
            m = Message(id=i, body=payload if payload is not None else i)
            if payload is not None:
                m.inferred = True
            inflight[snd.send(m, wait_credit=False)] = i
            sent += 1
        if (snd.pn.drain_mode and snd.pn.credit > 0 and not lost(conn, snd)
                and (not todo or len(inflight) >= a.window)):
            snd.pn.drained()  # nothing more to send now: the rest of the credit goes back
            client.flush()
        step(client)
        for d in [d for d in inflight if d.settled or d.remote_state]:
            if not d.settled:
                continue
            i = inflight.pop(d)
            st = d.remote_state
            if st == Delivery.ACCEPTED:
                accepted.add(i)
                since_churn += 1
            elif st in (Delivery.RELEASED, Delivery.MODIFIED):
                if st == Delivery.MODIFIED:
                    modified += 1
                else:
                    released += 1
                if i not in accepted:
                    todo.append(i)
                    out("resend", i)
                    resent += 1
            elif st == Delivery.REJECTED:
                out("rejected", i, d.remote.condition and d.remote.condition.name)
                out.flush()
                sys.exit(3)
            d.settle()
        # Proton 0.37 takes a sent delivery that is settled but still referenced, if it is the
        # link's newest, for one not yet written, and holds the answer to a drain back until it
        # is gone: keep no reference to settled deliveries
        d = None
        if a.churn and since_churn >= a.churn and not inflight:
            conn.pn.close()
            client.wait(conn.is_gone, timeout=30, msg="churn close")
        now = time.monotonic()
        if now - last_progress > 0.5:
            out("progress", len(accepted), sent, len(inflight), len(todo), snd.pn.credit)
            last_progress = now
    out("done", len(accepted), resent, modified, released)
    out.flush()
    client.close()


def run_recv(a):
    client = Client(timeout=30)
    conn = rcv = None
    got = 0
    last_msg = time.monotonic()
    while True:
        if rcv is None or lost(conn, rcv):
            if rcv is not None and not a.reconnect:
                raise SystemExit("peers: connection to the router lost")
            conn = connect(client, a.url, a.reconnect, a.give_up)
            # a holder keeps its first --credit messages and gets no more
            rcv = conn.receiver(a.address, credit=a.credit, settle=None, wait=False,
                                auto_credit=not a.hold)
            client.wait(lambda: not rcv.pn.state & Endpoint.REMOTE_UNINIT or conn.is_gone())
            out("ready")
        aborted = rcv.aborted
        step(client)
        if rcv.aborted != aborted:
            for _ in range(rcv.aborted - aborted):
                out("aborted")
        if a.detach_after and got and time.monotonic() - last_msg > 2:
            got = a.detach_after  # the stream went quiet: leave now, with what it holds
        while rcv.queue:
            r = rcv.queue.popleft()
            got += 1
            last_msg = time.monotonic()
            i = r.message.id if r.message is not None else None
            if a.hold or (a.detach_after and got > a.detach_after // 2):
                out("held", i)
            else:
                out("got", i)
                out.flush()  # the line is out before the router can learn of the accept
                r.accept()
            if a.delay:
                client.flush()
                time.sleep(a.delay)
        if a.detach_after and got >= a.detach_after:
            out.flush()
            rcv.close(wait=True)
            client.close()
            return


def run_partial(a):
    """Stream the first --stop-after bytes of a --size byte message, then wait to be killed."""
    client = Client(timeout=30)
    conn = client.connect(a.url)
    snd = conn.sender(a.address)
    snd.wait_credit(1)
    data = Message(body=os.urandom(a.size), inferred=True).encode()
    dlv = snd.pn.delivery("partial")
    pos = 0
    slice_ = 64 * 1024
    while pos < a.stop_after:
        if snd.pn.session.outgoing_bytes < 1024 * 1024:
            snd.pn.stream(data[pos:pos + slice_])
            pos += slice_
        client._step()
    # let Proton write everything queued, then report
    client.wait(lambda: snd.pn.session.outgoing_bytes == 0, timeout=60, msg="bytes out")
    out("streamed", pos)
    out.flush()
    del dlv
    client.run_for(3600)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("mode", choices=["send", "recv", "partial"])
    p.add_argument("url")
    p.add_argument("address")
    p.add_argument("--count", type=int, default=100)
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--size", type=int, default=0)
    p.add_argument("--window", type=int, default=1000)
    p.add_argument("--credit", type=int, default=10)
    p.add_argument("--hold", action="store_true")
    p.add_argument("--delay", type=float, default=0.0)
    p.add_argument("--reconnect", type=float, default=0.0)
    p.add_argument("--give-up", type=float, default=60.0)
    p.add_argument("--churn", type=int, default=0)
    p.add_argument("--detach-after", type=int, default=0)
    p.add_argument("--stop-after", type=int, default=0)
    a = p.parse_args()
    {"send": run_send, "recv": run_recv, "partial": run_partial}[a.mode](a)


if __name__ == "__main__":
    main()
