"""A recording TCP proxy on loopback, shared by the fuzz_conn corpus generators
(gen_corpus.py records what a client sends the router, gen_server_corpus.py what a server
sends the router's connector)."""
import socket
import threading


class Proxy(threading.Thread):
    """Accepts one connection at a time, connects it to `target` and forwards both ways.
    For each connection it appends one bytearray to `recorded`: the bytes the accepted side
    sent (`record="accepted"`) or the bytes the target sent (`record="target"`)."""

    def __init__(self, target, record):
        super().__init__(daemon=True)
        if record not in ("accepted", "target"):
            raise ValueError("record: 'accepted' or 'target', not %r" % (record,))
        self.target = target
        self.record = record
        self.ls = socket.socket()
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(8)
        self.port = self.ls.getsockname()[1]
        self.recorded = []

    def run(self):
        while True:
            try:
                c, _ = self.ls.accept()
            except OSError:
                return
            u = socket.create_connection(self.target)
            rec = bytearray()
            self.recorded.append(rec)
            from_accepted = rec if self.record == "accepted" else None
            from_target = rec if self.record == "target" else None
            threading.Thread(target=self.pipe, args=(c, u, from_accepted), daemon=True).start()
            threading.Thread(target=self.pipe, args=(u, c, from_target), daemon=True).start()

    @staticmethod
    def pipe(a, b, rec):
        try:
            while True:
                d = a.recv(65536)
                if not d:
                    break
                if rec is not None:
                    rec.extend(d)
                b.sendall(d)
        except OSError:
            pass
        finally:
            try:
                b.shutdown(socket.SHUT_WR)
            except OSError:
                pass
