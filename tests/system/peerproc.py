"""Run peers.py clients as child processes (so a test can kill them) and read what they report.

    p = Peer("send", router.url, "q", "--count", 100)
    p.wait_line("ready")
    p.wait_exit(60)
    p.lines_starting("resend")     # ['resend 7', ...]
    p.ids("got")                   # [3, 4, 5, ...] from "got <id>" lines
"""

import collections
import os
import signal
import subprocess
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = "/usr/bin/python3"  # Proton-Python is importable only by Debian's interpreter


class Peer:
    def __init__(self, mode, url, address, *args):
        self.argv = [PYTHON, os.path.join(HERE, "peers.py"), mode, url, address] + \
            [str(a) for a in args]
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)
        self.lines = []
        self.err = []
        self.cond = threading.Condition()
        self._threads = [threading.Thread(target=self._read, args=(s, sink), daemon=True)
                         for s, sink in ((self.proc.stdout, self.lines),
                                         (self.proc.stderr, self.err))]
        for t in self._threads:
            t.start()

    def _read(self, stream, sink):
        for line in iter(stream.readline, ""):
            with self.cond:
                sink.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.cond.notify_all()

    @property
    def pid(self):
        return self.proc.pid

    def count(self, prefix):
        with self.cond:
            return sum(1 for ln in self.lines if ln.split(" ", 1)[0] == prefix)

    def wait_line(self, prefix, timeout=30, n=1):
        """Wait until `n` lines start with the word `prefix`; returns the last of them."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                hits = [ln for ln in self.lines if ln.split(" ", 1)[0] == prefix]
                if len(hits) >= n:
                    return hits[n - 1]
                if self.proc.poll() is not None and not any(t.is_alive() for t in self._threads):
                    raise AssertionError("%s exited (%s) before %d '%s' lines:\n%s" % (
                        self.argv[2:4], self.proc.returncode, n, prefix, self.tail()))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError("no %d '%s' lines from %s within %.0fs:\n%s" % (
                        n, prefix, self.argv[2:4], timeout, self.tail()))
                self.cond.wait(min(left, 0.2))

    def lines_starting(self, prefix):
        with self.cond:
            return [ln for ln in self.lines if ln.split(" ", 1)[0] == prefix]

    def ids(self, prefix):
        return [int(ln.split()[1]) for ln in self.lines_starting(prefix)]

    def tail(self, n=15):
        with self.cond:
            return "stdout: %s\nstderr: %s" % ("\n".join(self.lines[-n:]),
                                               "\n".join(self.err[-n:]))

    def wait_exit(self, timeout):
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("%s still running after %.0fs:\n%s" % (
                self.argv[2:4], timeout, self.tail()))
        for t in self._threads:
            t.join(5)
        return rc

    def done(self, timeout):
        """Wait for a sender to finish: returns (accepted, resent, modified, released)."""
        rc = self.wait_exit(timeout)
        assert rc == 0, "sender exited with %s:\n%s" % (rc, self.tail())
        return tuple(int(x) for x in self.wait_line("done", 1).split()[1:])

    def kill(self, sig=signal.SIGKILL):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(10)
        for t in self._threads:
            t.join(5)

    def stop(self):
        """Kill it if it still runs (cleanup)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
