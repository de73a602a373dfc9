#!/usr/bin/python3
"""A fake broker for the autoLink tests: connects to a router's route-container listener with
a container id and serves one in-memory queue per node the router attaches to, as a broker
would.

    fake_broker.py URL --container ID [--preload QUEUE:N] [--refuse CONDITION]

Links the router attaches where it sends (the router's out autoLink) store each message in
the queue named by the link's target and settle it by its body: "reject..." REJECTED
(amqp:precondition-failed), "release..." RELEASED, "hold..." never ("held <body>"), anything
else ACCEPTED.  Links where the
router receives (its in autoLink) send the queue named by the link's source, one message per
credit; a message the router gives back RELEASED or MODIFIED goes back to the queue's head.
With --refuse every attach is refused with that condition (attach without the node, then a
detach carrying the error), as a broker does for a queue it does not have.

It prints lines on its standard output, flushed at once:
    "open" once the connection is open; "attached <in|out> <queue>" for each link it took,
    "refused <queue>" for each it refused, "detached <queue>" when the router detaches one; "stored <queue> <body>" and "settled <body>
    <outcome>" where it received; "sent <queue> <body>" and "outcome <body> <outcome>" where it
    sent.
"""

import argparse
import collections
import sys


import lazy_ssl  # noqa: F401,E402 - SSL domains made when used (lazy_ssl.py)
from proton import Condition, Message
from proton.handlers import MessagingHandler
from proton.reactor import Container


def say(*words):
    print(" ".join(str(w) for w in words), flush=True)


class Broker(MessagingHandler):
    def __init__(self, url, container_id, preload, refuse):
        super().__init__(prefetch=10, auto_accept=False, auto_settle=False)
        self.url = url
        self.container_id = container_id
        self.queues = collections.defaultdict(collections.deque)
        for spec in preload:
            q, n = spec.rsplit(":", 1)
            for i in range(int(n)):
                self.queues[q].append("%s-%d" % (q, i))
        self.refuse = refuse
        self.refusing = []  # (link, queue) to refuse once opened
        self.senders = {}  # link -> queue name
        self.out = {}  # delivery tag -> (queue, body)

    def on_start(self, event):
        event.container.container_id = self.container_id
        event.container.connect(self.url, reconnect=False)

    def on_connection_opened(self, event):
        say("open")

    def on_link_opening(self, event):
        link = event.link
        queue = (link.remote_target if link.is_receiver else link.remote_source).address
        if self.refuse:
            # as brokers refuse: an attach naming no node, then the detach with the error
            # (after this callback: Proton-Python opens the link when it returns)
            self.refusing.append((link, queue))
            event.container.schedule(0, self)
            return
        link.source.copy(link.remote_source)
        link.target.copy(link.remote_target)
        link.open()
        if link.is_sender:
            self.senders[link] = queue
        say("attached", "out" if link.is_receiver else "in", queue)

    def on_timer_task(self, event):
        while self.refusing:
            link, queue = self.refusing.pop(0)
            link.condition = Condition(self.refuse, "queue %s refused" % queue)
            link.close()
            say("refused", queue)

    def on_message(self, event):
        body = str(event.message.body)
        queue = event.link.target.address
        if body.startswith("reject"):
            event.delivery.local.condition = Condition("amqp:precondition-failed", "no " + body)
            self.reject(event.delivery)
            say("settled", body, "rejected")
        elif body.startswith("hold"):
            say("held", body)  # never settled: the test kills the broker
        elif body.startswith("release"):
            self.release(event.delivery, delivered=False)
            say("settled", body, "released")
        else:
            self.queues[queue].append(body)
            self.accept(event.delivery)
            say("stored", queue, body)
            say("settled", body, "accepted")
            for link, q in list(self.senders.items()):
                if q == queue:
                    self.pump(link)

    def pump(self, link):
        queue = self.senders.get(link)
        if queue is None or link.state & link.LOCAL_CLOSED:
            return
        q = self.queues[queue]
        while link.credit > 0 and q:
            body = q.popleft()
            dlv = link.send(Message(body=body))
            self.out[dlv.tag] = (queue, body)
            say("sent", queue, body)

    def on_sendable(self, event):
        self.pump(event.link)

    def _outcome(self, event, name, requeue):
        queue, body = self.out.pop(event.delivery.tag, (None, None))
        if body is None:
            return
        say("outcome", body, name)
        event.delivery.settle()
        if requeue:
            self.queues[queue].appendleft(body)
            self.pump(event.link)

    def on_accepted(self, event):
        self._outcome(event, "accepted", False)

    def on_rejected(self, event):
        self._outcome(event, "rejected", False)

    def on_released(self, event):
        # released and modified both arrive here
        self._outcome(event, "released", True)

    def on_link_closing(self, event):
        self.senders.pop(event.link, None)
        link = event.link
        say("detached", (link.remote_target if link.is_receiver else link.remote_source).address)

    def on_transport_error(self, event):
        say("transport-error", event.transport.condition)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("url")
    p.add_argument("--container", required=True)
    p.add_argument("--preload", action="append", default=[])
    p.add_argument("--refuse")
    a = p.parse_args()
    Container(Broker(a.url, a.container, a.preload, a.refuse)).run()


if __name__ == "__main__":
    sys.exit(main())
