#!/usr/bin/python3
"""The soak run behind scripts/soak (and test_soak.py): N messages through churning senders and
receivers, at-least-once, against one junctiond; checks zero loss, no duplicate beyond what the
senders sent again, and the router's RSS flat after warm-up.  Prints its figures; exit status 0
when every check holds, 1 otherwise.

Senders (peers.py send, each with its own id range) close their connection every --churn
accepted messages and open a new one; every --kill-every seconds one receiver is killed with
SIGKILL (after a new one started, so the address keeps a consumer), and now and then one leaves
on its own after a few messages with some unsettled (peers.py recv --detach-after).
"""

import argparse
import collections
import os
import random
import signal
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from conftest import Router, proc_status_kb, router_entities, sanitizer_report  # noqa: E402
from peerproc import Peer  # noqa: E402

MB = 1024 * 1024


class Rss(threading.Thread):
    """(seconds, progress, kB) samples of a process's RSS every `interval` seconds."""

    def __init__(self, pid, progress, interval=0.5):
        super().__init__(daemon=True)
        self.pid, self.progress, self.interval = pid, progress, interval
        self.samples = []
        self._stop_evt = threading.Event()

    def run(self):
        t0 = time.monotonic()
        while not self._stop_evt.wait(self.interval):
            try:
                self.samples.append((time.monotonic() - t0, self.progress(),
                                     proc_status_kb(self.pid, "VmRSS")))
            except (OSError, KeyError):
                return

    def stop(self):
        self._stop_evt.set()
        self.join(5)


def run(a, workdir):
    ents = router_entities(router={"workerThreads": a.workers} if a.workers else None)
    env = dict(os.environ)  # ASan's quarantine would hold freed memory: off
    env["ASAN_OPTIONS"] = ":".join(o for o in (env.get("ASAN_OPTIONS"), "quarantine_size_mb=0")
                                   if o)
    router = Router(workdir, ents, name="soak", env=env)
    router.start()
    with open("/proc/%d/maps" % router.pid) as f:
        sanitized = any(lib in f.read() for lib in ("libasan", "libtsan", "libubsan"))
    url = router.url
    addr = "balanced.soak"
    rnd = random.Random(a.seed)
    per = a.messages // a.senders
    total = per * a.senders
    receivers = []  # every receiver ever started (their output is kept)
    live = []
    killed = detached = 0

    def new_receiver(leave=False):
        args = ["--credit", a.credit, "--reconnect", 0.2, "--give-up", 60]
        if leave:
            args += ["--detach-after", rnd.randint(4, 40)]
        p = Peer("recv", url, addr, *args)
        receivers.append(p)
        if not leave:
            live.append(p)
        return p

    def got_count():
        return sum(p.count("got") for p in receivers)

    for _ in range(a.receivers):
        new_receiver().wait_line("ready")
    senders = [Peer("send", url, addr, "--count", per, "--start", i * per, "--size", a.size,
                    "--window", 200, "--churn", a.churn, "--reconnect", 0.2, "--give-up", 60)
               for i in range(a.senders)]
    rss = Rss(router.pid, got_count)
    rss.start()
    t0 = time.monotonic()
    ok = True
    try:
        next_kill = time.monotonic() + a.kill_every
        deadline = time.monotonic() + a.timeout
        while any(s.proc.poll() is None for s in senders):
            if time.monotonic() > deadline:
                raise AssertionError("soak: senders not done after %.0f s" % a.timeout)
            time.sleep(0.1)
            if a.kill_every and time.monotonic() >= next_kill:
                next_kill += a.kill_every
                fresh = new_receiver()
                victim = live.pop(rnd.randrange(len(live) - 1))  # never the fresh one
                fresh.wait_line("ready")
                victim.kill(signal.SIGKILL)
                killed += 1
                if rnd.random() < 0.5:
                    new_receiver(leave=True)
                    detached += 1
        elapsed = time.monotonic() - t0
        results = [s.done(30) for s in senders]
        # every id accepted: its receiver printed "got" before accepting
        want = set(range(total))
        wait_until = time.monotonic() + 60
        while time.monotonic() < wait_until:
            got_ids = set()
            for p in receivers:
                got_ids.update(p.ids("got"))
            if want <= got_ids:
                break
            time.sleep(0.2)
    finally:
        rss.stop()
        for p in receivers + senders:
            p.stop()
        status = router.stop()
    got = collections.Counter()
    for p in receivers:
        got.update(p.ids("got"))
    resent = collections.Counter()
    for s in senders:
        resent.update(s.ids("resend"))
    lost = sorted(set(range(total)) - set(got))
    dup_bad = {i: n for i, n in got.items() if n - 1 > resent[i]}
    dup_n = sum(n - 1 for n in got.values())
    accepted = sum(r[0] for r in results)
    # RSS after warm-up (the first quarter of the messages): the last third against the rest
    warm = [kb for _, n, kb in rss.samples if n >= total // 4]
    third = max(1, len(warm) // 3)
    early = max(warm[:-third]) if len(warm) > third else (warm[0] if warm else 0)
    late = max(warm[-third:]) if warm else 0
    flat = late <= early * 1.10 + 4 * 1024
    print("soak: %d messages of %d bytes in %.1f s (%.0f msg/s) through %d senders (reconnecting "
          "every %d) and %d receivers (%d killed with SIGKILL, %d left mid-stream)" % (
              total, a.size, elapsed, total / elapsed if elapsed else 0, a.senders, a.churn,
              a.receivers, killed, detached))
    print("soak: accepted %d, lost %d, duplicates %d (all of them sent again by their sender: "
          "%s), resent %d" % (accepted, len(lost), dup_n, "yes" if not dup_bad else "NO",
                              sum(resent.values())))
    print("soak: router RSS after warm-up %.1f MB, at the end %.1f MB (%s), peak %.1f MB" % (
        early / 1024.0, late / 1024.0,
        ("flat" if flat else "GROWING") + (", sanitizer build: not checked" if sanitized else ""),
        max((kb for _, _, kb in rss.samples), default=0) / 1024.0))
    problems = []
    if accepted != total:
        problems.append("senders report %d accepted of %d" % (accepted, total))
    if lost:
        problems.append("%d messages lost, e.g. %s" % (len(lost), lost[:10]))
    if dup_bad:
        problems.append("duplicates not sent again: %s" % list(dup_bad.items())[:10])
    if not flat and not a.no_rss_check and not sanitized:
        problems.append("RSS grew after warm-up")
    if status != 0:
        problems.append("router exit status %s" % status)
    rep = sanitizer_report(router.stderr_text())
    if rep:
        problems.append("sanitizer: " + rep)
    for p in problems:
        print("soak: FAIL: " + p)
        ok = False
    if ok:
        print("soak: OK")
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-n", "--messages", type=int, default=20000)
    p.add_argument("--senders", type=int, default=4)
    p.add_argument("--receivers", type=int, default=4)
    p.add_argument("--size", type=int, default=256, help="message body bytes")
    p.add_argument("--credit", type=int, default=50)
    p.add_argument("--churn", type=int, default=1000,
                   help="a sender reconnects after this many accepted messages")
    p.add_argument("--kill-every", type=float, default=2.0,
                   help="seconds between two receivers killed (0: none)")
    p.add_argument("--workers", type=int, default=0, help="router workerThreads (0: default)")
    p.add_argument("--timeout", type=float, default=3600.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-rss-check", action="store_true",
                   help="report RSS but do not fail on growth (sanitizer builds)")
    a = p.parse_args()
    if a.senders < 1 or a.receivers < 1 or a.messages < a.senders:
        p.error("need at least one sender, one receiver and one message per sender")
    with tempfile.TemporaryDirectory(prefix="junction-soak.") as d:
        sys.exit(0 if run(a, d) else 1)


if __name__ == "__main__":
    main()
