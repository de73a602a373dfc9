#!/usr/bin/python3
"""scripts/bench mesh: N interior routers joined on loopback, their routing protocol timed.

For each router kind (junctiond, and qdrouterd 1.19 where ../shared/peer/bin/qdrouterd
exists beside the repository), each shape and each N, N routers R0..R(N-1) start one after
another (each once the one before listens, so that no connector has to retry), each with
a client listener and an inter-router listener on 127.0.0.1 (ephemeral ports, chosen by the
kernel before the start so that a restarted router gets its own again), and one
inter-router connector per edge, from the higher-numbered router to the lower:

  line   R0 - R1 - ... - R(N-1)
  ring   the line and R(N-1) - R0 (N >= 3)
  mesh   every pair (N(N-1)/2 connections)

Then, reading every router's router.node (the rows qdstat -n shows) over one management
connection per router, polled every --poll seconds:

  start        the time to start them all that way;
  converge     from the moment the last router listens until every router lists every
               other with a next hop (a neighbour's routerLink or a nextHop) and the link
               states in its rows join them (only links both ends list count, as in the path
               computation);
  drop         R(N-1) is killed (SIGKILL): until no survivor lists it any more (in a line,
               R(N-1) is an end, so the news crosses N-2 routers); qdrouterd 1.19 keeps a
               lost router's last nextHop in its rows until remoteLsMaxAgeSeconds (60 s), so
               a survivor whose link states no longer join it to R(N-1) counts as having
               dropped it (marked * in the table);
  return       R(N-1) starts again, on its ports: until every router lists every other
               (R(N-1)'s connectors make all of its connections, so no reconnect timer of
               the others is in this figure), every other listing its new instance;
  rest B/s     after --settle seconds (default 10: past the RA flux period, which lasts
               2 x raIntervalFluxSeconds = 8 s after the last topology change, while every
               router sends its RA every 4 s instead of every 30), with no management
               traffic: the bytes both ways on
               the inter-router TCP connections (the kernel's bytes_sent and
               bytes_received of the listening ends, from ss -ti) over --quiet seconds, in
               total and per router; and the routers' CPU (user+sys, /proc/PID/stat) over
               the same interval, as a share of one CPU, summed;
  msg/s        a junction-loadgen receiver on the router at the far end of the longest path
               (line: R(N-1), N-1 hops; ring: R(N/2), N/2 hops; mesh: R1, one hop) and a
               sender on R0: 20 messages to warm up (they wait for the address to reach
               R0), then --seconds of at-least-once messages, checked by the receiver; its
               msg/s (first to last message) and p50 latency.

A phase that does not finish within --timeout seconds plus 3 per router (news crosses a
line of N routers in about 2N seconds, in qdrouterd as in Junction) is reported with what was missing
(which router lacked which) and the case goes on to its next phase where it can.  Every
process is a child of this one, killed when it ends whatever the way out.  Results (router
configurations and logs, one JSON line per case in mesh.jsonl) go to --results.  Prints a
table; exits 1 if a junctiond case failed (a phase timed out, a client failed or a router
died), 0 otherwise (qdrouterd is the reference: its failures are shown, not counted), 2 on a
usage error."""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "system"))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
from benchproc import CHILDREN, kill_children_at_exit  # noqa: E402
from conftest import free_port  # noqa: E402
from mgmt_tool import Node  # noqa: E402

NODE = "org.apache.qpid.dispatch.router.node"
CLK_TCK = os.sysconf("SC_CLK_TCK")


def edges(shape, n):
    if shape == "mesh":
        return [(i, j) for i in range(n) for j in range(i + 1, n)]
    e = [(i, i + 1) for i in range(n - 1)]
    if shape == "ring":
        e.append((0, n - 1))
    return e


def far_end(shape, n):
    """The router at the end of the longest shortest path from R0, and its hops."""
    if shape == "line":
        return n - 1, n - 1
    if shape == "ring":
        return n // 2, n // 2
    return 1, 1


class Router:
    def __init__(self, bench, kind, idx, tag):
        self.bench, self.kind, self.idx = bench, kind, idx
        self.id = "R%d" % idx
        self.port, self.ir_port = free_port(), free_port()
        self.connect = []  # the inter-router ports this router's connectors go to
        self.base = os.path.join(bench.results, "%s-%s" % (tag, self.id))
        self.proc = None
        self.node = None
        self.starts = 0

    def config(self):
        qd = self.kind == "qdrouterd"
        sasl = {"saslMechanisms": "ANONYMOUS"} if qd else {}
        ents = [["router", {"id": self.id, "mode": "interior",
                            "workerThreads": self.bench.args.workers}],
                ["listener", {"host": "127.0.0.1", "port": str(self.port)}],
                ["listener", dict({"host": "127.0.0.1", "port": str(self.ir_port),
                                   "role": "inter-router"}, **sasl)]]
        for p in self.connect:
            ents.append(["connector", dict({"host": "127.0.0.1", "port": str(p),
                                            "role": "inter-router"}, **sasl)])
        return ents

    def start(self):
        self.starts += 1
        cfg = self.base + ".json"
        with open(cfg, "w") as f:
            json.dump(self.config(), f)
        env = dict(os.environ)
        exe = self.bench.exe[self.kind]
        log = open("%s.%d.log" % (self.base, self.starts), "w")
        self.proc = subprocess.Popen([exe, "-c", cfg], stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env)
        log.close()
        CHILDREN.append(self.proc)

    def wait_up(self, seconds):
        """Until the inter-router listener takes connections; False if the router exited or
        the time ran out."""
        deadline = time.monotonic() + seconds
        while self.alive() and time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.ir_port), 0.5).close()
                return True
            except OSError:
                time.sleep(0.01)
        return False

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        self.close()
        if self.alive():
            self.proc.kill()
        if self.proc:
            self.proc.wait(10)

    def close(self):
        if self.node:
            try:
                self.node.close()
            except Exception:
                pass
            self.node = None

    def rows(self):
        """This router's router.node rows by id, or None (not up yet, or no answer)."""
        if not self.alive():
            return None
        try:
            if self.node is None:
                self.node = Node("127.0.0.1:%d" % self.port, timeout=5)
            return {r["id"]: r for r in self.node.query_dicts(NODE)}
        except Exception:
            self.close()
            return None

    def ticks(self):
        try:
            with open("/proc/%d/stat" % self.proc.pid) as f:
                rest = f.read().rsplit(")", 1)[1].split()
            return int(rest[11]) + int(rest[12])
        except (OSError, IndexError, ValueError):
            return 0


def reachable(row):
    return row is not None and (row.get("routerLink") is not None or
                                row.get("nextHop") not in (None, "(self)"))


def ls_reachable(rows, me, target):
    """Whether the link states in one router's rows join it to target: only links that both
    ends list count, as in the path computation."""
    def near(a):
        row = rows.get(a) or {}
        return [b for b in (row.get("linkState") or [])
                if a in ((rows.get(b) or {}).get("linkState") or [])]
    seen, todo = {me}, [me]
    while todo:
        for b in near(todo.pop()):
            if b not in seen:
                seen.add(b)
                todo.append(b)
    return target in seen


class Bench:
    def __init__(self, args):
        self.args = args
        self.results = args.results
        self.exe = {"junctiond": args.junctiond, "qdrouterd": args.qdrouterd}
        self.failed = False

    def wait(self, routers, check, t0):
        """Poll until check(router, rows) holds for every router in the same sweep; returns
        (seconds since t0 when the last router was first seen to hold, None) or (None, what
        was missing)."""
        deadline = t0 + self.args.timeout + 3 * len(routers)
        since = {}
        missing = "no answer"
        while True:
            missing = []
            for r in routers:
                rows = r.rows()
                now = time.monotonic()
                why = "no answer" if rows is None else check(r, rows)
                if why:
                    since.pop(r.id, None)
                    missing.append("%s: %s" % (r.id, why))
                else:
                    since.setdefault(r.id, now)
            if not missing:
                return max(since.values()) - t0, None
            if time.monotonic() > deadline:
                dead = [r.id for r in routers if not r.alive()]
                if dead:
                    missing.insert(0, "died: " + ",".join(dead))
                return None, "; ".join(missing)[:400]
            time.sleep(self.args.poll)

    def all_others(self, ids, fresh=None):
        """Every other router listed with a next hop, joined by the link states in the rows,
        and (fresh: (id, instance)) that router as its new instance."""
        def check(r, rows):
            lack = [o for o in ids if o != r.id and not (
                reachable(rows.get(o)) and ls_reachable(rows, r.id, o))]
            if fresh and fresh[0] != r.id and fresh[0] not in lack and \
                    rows[fresh[0]].get("instance") == fresh[1]:
                lack.append(fresh[0] + " (its old instance)")
            return ("lacks " + ",".join(lack)) if lack else ""
        return check

    def dropped(self, victim, stale):
        """The victim no longer reachable: no next hop, or (qdrouterd 1.19, whose rows keep a
        lost router's last nextHop until remoteLsMaxAgeSeconds) no routerLink and no path in
        the link states; stale collects the routers that showed such a next hop."""
        def check(r, rows):
            row = rows.get(victim)
            if not reachable(row):
                return ""
            if row.get("routerLink") is None and not ls_reachable(rows, r.id, victim):
                stale.add(r.id)
                return ""
            return "still lists %s (nextHop %s, routerLink %s)" % (
                victim, row.get("nextHop"), row.get("routerLink"))
        return check

    def rest_bytes(self, routers):
        """Bytes both ways on the inter-router connections over the quiet interval (from
        the listening ends' kernel counters), and the routers' CPU ticks."""
        ports = {r.ir_port for r in routers}

        def snap():
            out = subprocess.run(["ss", "-tinH", "state", "established"],
                                 stdout=subprocess.PIPE, text=True).stdout.splitlines()
            got = {}
            key = None
            for line in out:
                if not line[:1].isspace():
                    f = line.split()
                    key = None
                    if len(f) >= 4 and f[2].startswith("127.0.0.1:") and \
                            int(f[2].rsplit(":", 1)[1]) in ports:
                        key = (f[2], f[3])
                elif key:
                    v = dict(x.split(":", 1) for x in line.split() if
                             x.startswith(("bytes_sent:", "bytes_acked:", "bytes_received:")))
                    sent = int(v.get("bytes_sent", v.get("bytes_acked", 0)))
                    got[key] = sent + int(v.get("bytes_received", 0))
                    key = None
            return got

        for r in routers:
            r.close()  # no management traffic while counting
        time.sleep(self.args.settle)
        c0, t0 = snap(), sum(r.ticks() for r in routers)
        m0 = time.monotonic()
        time.sleep(self.args.quiet)
        c1, t1 = snap(), sum(r.ticks() for r in routers)
        secs = time.monotonic() - m0
        total = sum(c1[k] - c0[k] for k in c1 if k in c0)
        return total / secs, len(c1), 100.0 * (t1 - t0) / CLK_TCK / secs

    def rate(self, tag, src, dst):
        """Receiver on dst, sender on src: warm-up, then the timed run; the receiver's JSON
        of the timed run, or an error string."""
        addr = "mesh-bench-%d" % os.getpid()
        for part, extra in (("warmup", ["--count", "20"]),
                            ("timed", ["--seconds", str(self.args.seconds)])):
            base = os.path.join(self.results, "%s-%s" % (tag, part))
            rlog = open(base + ".recv.log", "w")
            rout = open(base + ".recv.json", "w")
            rcv = subprocess.Popen([self.args.loadgen, "receive", "--url",
                                    "127.0.0.1:%d" % dst.port, "-a", addr, "--credit",
                                    str(self.args.credit), "--timeout", str(self.args.timeout)],
                                   stdout=rout, stderr=rlog, stdin=subprocess.DEVNULL)
            CHILDREN.append(rcv)
            rlog.close()
            rout.close()
            deadline = time.monotonic() + 20
            while "READY" not in open(base + ".recv.log").read():
                if rcv.poll() is not None or time.monotonic() > deadline:
                    rcv.kill()
                    return "receiver did not attach (%s.recv.log)" % os.path.basename(base)
                time.sleep(0.05)
            with open(base + ".send.json", "w") as so, open(base + ".send.log", "w") as se:
                snd = subprocess.Popen([self.args.loadgen, "send", "--url",
                                        "127.0.0.1:%d" % src.port, "-a", addr, "--credit",
                                        str(self.args.credit), "--timeout",
                                        str(self.args.timeout)] + extra,
                                       stdout=so, stderr=se, stdin=subprocess.DEVNULL)
            CHILDREN.append(snd)
            limit = self.args.seconds + 2 * self.args.timeout + 10
            try:
                src_rc = snd.wait(limit)
                dst_rc = rcv.wait(limit)
            except subprocess.TimeoutExpired:
                snd.kill()
                rcv.kill()
                return "%s run did not end" % part
            if src_rc or dst_rc:
                err = open(base + ".recv.log").read().strip().splitlines()[-1:] or \
                    open(base + ".send.log").read().strip().splitlines()[-1:]
                return "%s run failed: %s" % (part, (err or ["?"])[0][:160])
        with open(base + ".recv.json") as f:
            return json.loads(f.read().strip().splitlines()[-1])

    def case(self, kind, shape, n):
        tag = "%s-%s-%d" % (kind, shape, n)
        res = {"kind": kind, "shape": shape, "n": n, "links": len(edges(shape, n))}
        routers = [Router(self, kind, i, tag) for i in range(n)]
        for lo, hi in edges(shape, n):
            routers[hi].connect.append(routers[lo].ir_port)
        ids = [r.id for r in routers]
        try:
            # One after another, each once it listens, so that every connector finds its
            # listener at the first attempt: the figure is the protocol's, not a connector's
            # retry timer's.
            t0 = time.monotonic()
            for r in routers:
                r.start()
                if not r.wait_up(30):
                    res["converge_missing"] = "%s did not start (%s.1.log)" % (
                        r.id, os.path.basename(r.base))
                    return res
            t1 = time.monotonic()
            res["start"] = t1 - t0
            res["converge"], why = self.wait(routers, self.all_others(ids), t1)
            if why:
                res["converge_missing"] = why
                return res
            victim, rest = routers[-1], routers[:-1]
            instance = (routers[0].rows() or {}).get(victim.id, {}).get("instance")
            t0 = time.monotonic()
            victim.kill()
            stale = set()
            res["drop"], why = self.wait(rest, self.dropped(victim.id, stale), t0)
            if why:
                res["drop_missing"] = why
            if stale:
                res["stale_next_hop"] = ",".join(sorted(stale))
            time.sleep(1.1)  # the new instance's boot time is another second
            t0 = time.monotonic()
            victim.start()
            res["return"], why = self.wait(
                routers, self.all_others(ids, (victim.id, instance) if instance else None), t0)
            if why:
                res["return_missing"] = why
                return res
            res["rest_Bps"], res["rest_conns"], res["rest_cpu_pct"] = self.rest_bytes(routers)
            far, hops = far_end(shape, n)
            res["hops"] = hops
            got = self.rate(tag, routers[0], routers[far])
            if isinstance(got, dict):
                res["msg_per_s"] = got.get("msg_per_s")
                res["p50_us"] = got.get("p50_us")
                res["messages"] = got.get("messages")
            else:
                res["rate_failed"] = got
            dead = [r.id for r in routers if not r.alive()]
            if dead:
                res["died"] = ",".join(dead)
            return res
        finally:
            for r in routers:
                r.kill()

    def run(self):
        kinds = ["junctiond"]
        if self.args.routers == "junctiond":
            print("qdrouterd: not run (--routers junctiond)")
        elif os.access(self.args.qdrouterd, os.X_OK):
            kinds.append("qdrouterd")
        else:
            print("qdrouterd: not run: no ../shared/peer/bin/qdrouterd beside the repository "
                  "(its rows are left out)")
        cases = []
        for shape in self.args.shapes.split(","):
            ns = getattr(self.args, shape)
            for n in ns:
                if shape == "ring" and n < 3:
                    print("ring of %d: not run (a ring needs 3 routers)" % n)
                    continue
                cases.append((shape, n))
        print("%d CPUs; load average %s at the start; routers %s (workerThreads %d); "
              "results in %s" % (os.cpu_count(), " ".join(open("/proc/loadavg").read().split()[:3]),
                                 " ".join(kinds), self.args.workers,
                                 os.path.relpath(self.results, ROOT)), flush=True)
        rows = []
        with open(os.path.join(self.results, "mesh.jsonl"), "w") as out:
            for shape, n in cases:
                for kind in kinds:
                    res = self.case(kind, shape, n)
                    out.write(json.dumps(res) + "\n")
                    out.flush()
                    bad = failure(res)
                    if bad:
                        print("%s %s %d: %s" % (kind, shape, n, bad), file=sys.stderr, flush=True)
                        if kind == "junctiond":
                            self.failed = True
                    rows.append(res)
        table(rows)
        print("load average at the end: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
        return 1 if self.failed else 0


def failure(res):
    parts = []
    for k in ("converge_missing", "drop_missing", "return_missing", "rate_failed", "died"):
        if k in res:
            parts.append("%s: %s" % (k.replace("_missing", "").replace("_", " "), res[k]))
    return "; ".join(parts)


def table(rows):
    def s(v, fmt):
        return "-" if v is None else fmt % v
    print()
    print("%-9s %-5s %3s %5s %6s %8s %7s %7s %9s %7s %7s %4s %8s %7s" % (
        "router", "shape", "N", "links", "start", "converge", "drop", "return", "rest B/s", "B/s/rtr",
        "rest", "hops", "msg/s", "p50"))
    print("%-9s %-5s %3s %5s %6s %8s %7s %7s %9s %7s %7s %4s %8s %7s" % (
        "", "", "", "", "s", "s", "s", "s", "", "", "CPU%", "", "", "ms"))
    for r in rows:
        bps = r.get("rest_Bps")
        print("%-9s %-5s %3d %5d %6s %8s %7s %7s %9s %7s %7s %4s %8s %7s%s" % (
            r["kind"], r["shape"], r["n"], r["links"], s(r.get("start"), "%.2f"),
            s(r.get("converge"), "%.2f"),
            s(r.get("drop"), "%.2f" + ("*" if r.get("stale_next_hop") else "")), s(r.get("return"), "%.2f"), s(bps, "%.0f"),
            s(bps / r["n"] if bps is not None else None, "%.0f"),
            s(r.get("rest_cpu_pct"), "%.1f"), s(r.get("hops"), "%d"),
            s(r.get("msg_per_s"), "%.0f"),
            s(r.get("p50_us") / 1000 if r.get("p50_us") is not None else None, "%.1f"),
            ("  FAILED: " + failure(r)) if failure(r) else ""))
    if any(r.get("stale_next_hop") for r in rows):
        print("*: some survivors' rows kept the lost router's last nextHop (qdrouterd 1.19 "
              "keeps it until remoteLsMaxAgeSeconds, 60 s); drop is when their link states "
              "no longer joined them to it")
    print("start: the routers started one after another; converge: the last one up to every router listing every other with a next hop "
          "(and joined to it by the link states in its rows); "
          "drop: R(N-1) killed to no survivor listing it; return: R(N-1) restarted to every "
          "router listing every other (polled, see --poll); rest B/s: both directions of all "
          "inter-router connections at rest, and per router; rest CPU%: all routers' CPU at "
          "rest, share of one CPU; msg/s: R0 to the far end (hops), receiver's rate")


def main():
    p = argparse.ArgumentParser(
        prog="scripts/bench mesh", formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__.split("\n\n", 1)[1])

    def ns(text):
        v = [int(x) for x in text.split(",")]
        if any(x < 2 or x > 50 for x in v):
            raise argparse.ArgumentTypeError("each N from 2 to 50")
        return v

    def pos(text):
        v = float(text)
        if v <= 0:
            raise argparse.ArgumentTypeError("must be > 0")
        return v
    p.add_argument("--shapes", default="line,ring,mesh",
                   help="shapes to run, of line,ring,mesh (default all three)")
    p.add_argument("--line", type=ns, default=[2, 5, 10, 20], metavar="N,N,...",
                   help="the line's sizes (default 2,5,10,20)")
    p.add_argument("--ring", type=ns, default=[3, 5, 10, 20], metavar="N,N,...",
                   help="the ring's sizes (default 3,5,10,20)")
    p.add_argument("--mesh", type=ns, default=[2, 5, 10], metavar="N,N,...",
                   help="the full mesh's sizes (default 2,5,10)")
    p.add_argument("--routers", choices=["both", "junctiond"], default="both",
                   help="junctiond and qdrouterd (default), or junctiond only")
    p.add_argument("--seconds", type=pos, default=3, help="the timed message run (default 3)")
    p.add_argument("--credit", type=int, default=1000,
                   help="the receiver's credit window, the sender's unsettled limit (1000)")
    p.add_argument("--quiet", type=pos, default=5,
                   help="the rest interval over which bytes are counted (default 5 s)")
    p.add_argument("--settle", type=float, default=10,
                   help="wait after the return before counting (default 10 s: past the RA "
                        "flux period of 8 s)")
    p.add_argument("--timeout", type=pos, default=30,
                   help="give up on a phase after this many seconds plus 3 per router "
                        "(default 30)")
    p.add_argument("--poll", type=float, default=0.05,
                   help="pause between two sweeps of router.node queries (default 0.05 s)")
    p.add_argument("--workers", type=int, default=1,
                   help="every router's workerThreads (default 1: up to 2x20 routers share "
                        "the machine)")
    p.add_argument("--junctiond", default=os.path.join(ROOT, "build-bench/router/junctiond"))
    p.add_argument("--loadgen", default=os.path.join(
        ROOT, "build-bench/tests/bench/loadgen/junction-loadgen"))
    p.add_argument("--qdrouterd", default=os.path.join(
        os.path.dirname(ROOT), "shared", "peer", "bin", "qdrouterd"))
    p.add_argument("--results", default=None, help="directory for logs and mesh.jsonl")
    args = p.parse_args()
    for s in args.shapes.split(","):
        if s not in ("line", "ring", "mesh"):
            p.error("--shapes: line, ring or mesh, not %r" % s)
    if args.workers < 1 or args.credit < 1:
        p.error("--workers and --credit must be >= 1")
    if args.results is None:
        args.results = os.path.join(ROOT, "build-bench", "bench-results",
                                    time.strftime("%Y%m%d-%H%M%S") + "-mesh")
    os.makedirs(args.results, exist_ok=True)
    kill_children_at_exit(signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    return Bench(args).run()


if __name__ == "__main__":
    sys.exit(main())
