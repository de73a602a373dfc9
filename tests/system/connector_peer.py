"""A listening AMQP peer for the connector tests (run with /usr/bin/python3): a Proton-Python
container that listens on 127.0.0.1:PORT and, on every connection the router makes to it,
attaches a receiver on IN_ADDR (a consumer at the router) and a sender on OUT_ADDR (a
producer at the router).  It prints one line per event on stdout, flushed:
  LISTENING <port>        once, when it accepts
  OPENED <container>      the router's open came (its container id)
  PROPERTIES <json>       its properties: [[key type, key, value type, value], ...] in order
  SASL <mech> <user>      what the router authenticated with (with --sasl-plain)
  LIMITS <max-frame-size> <channel-max> <idle-time-out ms>   from the router's open
  RECEIVED <body>         a message on IN_ADDR (accepted)
  SENT <n> ACCEPTED       the n-th message sent on OUT_ADDR was accepted
  LINK_OPENED <s|r> <source> <target>   a link of the peer's (sender or receiver) is open
  LINK_ERROR <address> <condition> <description>   the router closed one of its links
  CONN_ERROR <condition> <description>  the router closed the connection with an error
It sends a message "from-peer-<n>" each time a line "SEND" arrives on stdin.  With a fourth
argument FAILOVER_PORT its open announces qdrouterd's failover-server-list with
127.0.0.1:FAILOVER_PORT."""

import json
import sys
import threading


import lazy_ssl  # noqa: F401,E402 - SSL domains made when used (lazy_ssl.py)
from proton import Message, symbol
from proton.handlers import MessagingHandler
from proton.reactor import Container, EventInjector, ApplicationEvent


def out(*words):
    sys.stdout.write(" ".join(str(w) for w in words) + "\n")
    sys.stdout.flush()


class Peer(MessagingHandler):
    def __init__(self, port, in_addr, out_addr, injector, failover=None):
        super().__init__()
        self.failover = failover
        self.port, self.in_addr, self.out_addr = port, in_addr, out_addr
        self.injector = injector
        self.sender = None
        self.n_sent = 0
        self.pending = 0

    def on_start(self, event):
        event.container.selectable(self.injector)
        self.acceptor = event.container.listen("127.0.0.1:%d" % self.port)
        out("LISTENING", self.port)

    def on_connection_init(self, event):
        if self.failover:
            event.connection.properties = {symbol("failover-server-list"): [
                {symbol("network-host"): "127.0.0.1", symbol("port"): str(self.failover)}]}

    def on_connection_opened(self, event):
        c = event.connection
        out("OPENED", c.remote_container)
        props = c.remote_properties or {}
        out("PROPERTIES", json.dumps([[type(k).__name__, str(k), type(v).__name__, v]
                                      for k, v in props.items()], default=repr))
        t = event.transport
        if t is not None:
            try:
                s = t.sasl()
                out("SASL", s.mech or "-", s.user or "-")
            except Exception:  # noqa: BLE001
                out("SASL", "-", "-")
            out("LIMITS", t.remote_max_frame_size, t.remote_channel_max,
                int(round(t.remote_idle_timeout * 1000)))
        event.container.create_receiver(c, self.in_addr)
        self.sender = event.container.create_sender(c, self.out_addr)

    def on_sendable(self, event):
        self.flush()

    def flush(self):
        while self.sender is not None and self.pending and self.sender.credit > 0:
            self.pending -= 1
            self.n_sent += 1
            self.sender.send(Message(body="from-peer-%d" % self.n_sent))

    def on_accepted(self, event):
        out("SENT", event.delivery.tag.decode() if isinstance(event.delivery.tag, bytes)
            else event.delivery.tag, "ACCEPTED")

    def on_message(self, event):
        out("RECEIVED", event.message.body)

    def on_send_request(self, event):
        self.pending += 1
        self.flush()

    def on_link_opening(self, event):
        # a link the router attaches (an autoLink): answer with its termini, as a broker does
        k = event.link
        if k.remote_source is not None:
            k.source.copy(k.remote_source)
        if k.remote_target is not None:
            k.target.copy(k.remote_target)

    def on_link_opened(self, event):
        k = event.link
        out("LINK_OPENED", "s" if k.is_sender else "r", k.source.address or "-",
            k.target.address or "-")

    def on_link_error(self, event):
        k = event.link
        cond = k.remote_condition
        out("LINK_ERROR", (k.target if k.is_sender else k.source).address or "-",
            cond.name if cond else "-", cond.description if cond else "-")

    def on_connection_error(self, event):
        cond = event.connection.remote_condition
        out("CONN_ERROR", cond.name if cond else "-", cond.description if cond else "-")

    def on_disconnected(self, event):
        self.sender = None
        out("DISCONNECTED")


def main():
    port, in_addr, out_addr = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    injector = EventInjector()
    failover = int(sys.argv[4]) if len(sys.argv) > 4 else None
    peer = Peer(port, in_addr, out_addr, injector, failover)

    def stdin_reader():
        for line in sys.stdin:
            if line.strip() == "SEND":
                injector.trigger(ApplicationEvent("send_request"))

    threading.Thread(target=stdin_reader, daemon=True).start()
    Container(peer).run()


if __name__ == "__main__":
    main()
