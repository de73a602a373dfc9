#!/usr/bin/python3
"""scripts/bench mesh fanin: edge routers fanned in on two interiors (edge mode, issue 17).

For each router kind (junctiond, and qdrouterd 1.19 where ../shared/peer/bin/qdrouterd
exists beside the repository): interiors I0 and I1 (I1's inter-router connector to I0), each
with a client listener, an inter-router listener and an edge listener on 127.0.0.1; then
--edges edge routers E0..E(N-1), started one after another (each once the one before
listens), Ei with one edge connector to I(i mod 2), so half the edges are on each interior.
Then:

  start        the time to start the edges that way;
  converge     from the moment the last edge listens, with one consumer of address
               `fanin` on every edge (one Proton container, one connection per edge,
               attached as each edge comes up): until each interior lists its N/2 edge
               connections (role edge) and counts N/2 local destinations of `fanin` (the
               edges' proxy receivers) and one remote (the other interior);
  memory       the resident memory (VmRSS) of each interior, and of all the edges summed and
               per edge, once converged;
  msg/s        junction-loadgen: a receiver on E(N-1) (its own address), a sender on E0:
               20 messages to warm up, then --seconds of at-least-once messages, checked by
               the receiver (scripts/bench mesh's run) - E0, its interior, the other interior
               (N even), E(N-1); its msg/s and p50 latency.

A phase that does not finish within --timeout seconds plus 0.2 per edge is reported with
what was missing. Every process is a child of this one, killed when it ends. Results (router
configurations and logs, one JSON line per kind in fanin.jsonl) go to --results. Prints a
table; exits 1 if a junctiond case failed, 0 otherwise (qdrouterd is the reference), 2 on a
usage error."""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "system"))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
from benchproc import CHILDREN, kill_children_at_exit  # noqa: E402
from mesh_bench import free_port  # noqa: E402
from mesh_bench import Bench as MeshBench  # noqa: E402
from mgmt_tool import Node  # noqa: E402

CONN = "org.apache.qpid.dispatch.connection"
ADDR = "org.apache.qpid.dispatch.router.address"


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class Proc:
    """One router: its config, process and ports."""

    def __init__(self, bench, kind, rid, mode, uplink=None, ir_to=None):
        self.bench, self.kind, self.id, self.mode = bench, kind, rid, mode
        self.port = free_port()
        self.ir_port = free_port() if mode == "interior" else None
        self.edge_port = free_port() if mode == "interior" else None
        self.uplink, self.ir_to = uplink, ir_to
        self.proc = None

    def config(self):
        sasl = {"saslMechanisms": "ANONYMOUS"} if self.kind == "qdrouterd" else {}
        ents = [["router", {"id": self.id, "mode": self.mode,
                            "workerThreads": self.bench.args.workers}],
                ["listener", {"host": "127.0.0.1", "port": str(self.port)}]]
        if self.mode == "interior":
            for port, role in ((self.ir_port, "inter-router"), (self.edge_port, "edge")):
                ents.append(["listener", dict({"host": "127.0.0.1", "port": str(port),
                                               "role": role}, **sasl)])
            if self.ir_to:
                ents.append(["connector", dict({"host": "127.0.0.1",
                                                "port": str(self.ir_to.ir_port),
                                                "role": "inter-router"}, **sasl)])
        else:
            ents.append(["connector", dict({"host": "127.0.0.1",
                                            "port": str(self.uplink.edge_port),
                                            "role": "edge"}, **sasl)])
        return ents

    def start(self):
        base = os.path.join(self.bench.results, "%s-%s" % (self.kind, self.id))
        with open(base + ".json", "w") as f:
            json.dump(self.config(), f)
        env = dict(os.environ)
        log = open(base + ".log", "w")
        self.proc = subprocess.Popen([self.bench.exe[self.kind], "-c", base + ".json"],
                                     stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=env)
        log.close()
        CHILDREN.append(self.proc)

    def wait_up(self, seconds):
        import socket
        deadline = time.monotonic() + seconds
        while self.proc.poll() is None and time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.5).close()
                return True
            except OSError:
                time.sleep(0.01)
        return False


class Consumers:
    """One Proton container thread: a receiver of `fanin` on every edge it is given."""

    def __init__(self):
        from proton.handlers import MessagingHandler
        from proton.reactor import Container, ApplicationEvent, EventInjector

        outer = self

        class H(MessagingHandler):
            def on_start(self, event):
                outer.container = event.container

            def on_add(self, event):
                c = outer.container.connect(event.subject, reconnect=False)
                outer.container.create_receiver(c, "fanin")
                outer.conns.append(c)

            def on_stop(self, event):
                for c in list(outer.conns):
                    c.close()

        self.injector = EventInjector()
        self.ApplicationEvent = ApplicationEvent
        self.handler = H()
        self.conns = []
        self.container = Container(self.handler)
        self.container.selectable(self.injector)
        self.thread = threading.Thread(target=self.container.run, daemon=True)
        self.thread.start()

    def add(self, url):
        self.injector.trigger(self.ApplicationEvent("add", subject=url))

    def stop(self):
        self.container.stop()
        self.injector.close()
        self.thread.join(10)


class Bench:
    def __init__(self, args):
        self.args = args
        self.results = args.results
        self.exe = {"junctiond": args.junctiond, "qdrouterd": args.qdrouterd}
        self.failed = False

    def interior_ok(self, i, n_local):
        """Interior i: its edge connections and fanin's destinations are all there, or
        what is missing."""
        try:
            node = Node("127.0.0.1:%d" % i.port, timeout=5)
            try:
                conns = [r for r in node.query_dicts(CONN) if r.get("role") == "edge"]
                addrs = {r.get("name"): r for r in node.query_dicts(ADDR)}
            finally:
                node.close()
        except Exception as e:
            return "%s: no answer (%s)" % (i.id, e)
        a = addrs.get("M0fanin") or {}
        local, remote = a.get("subscriberCount") or 0, a.get("remoteCount") or 0
        if len(conns) != n_local or local != n_local or remote != 1:
            return "%s: %d edge connections, fanin %d local %d remote (want %d, %d, 1)" % (
                i.id, len(conns), local, remote, n_local, n_local)
        return ""

    def run(self, kind):
        n = self.args.edges
        res = {"kind": kind, "edges": n}
        i0 = Proc(self, kind, "I0", "interior")
        i1 = Proc(self, kind, "I1", "interior", ir_to=i0)
        routers = [i0, i1]
        cons = Consumers()
        try:
            for r in (i0, i1):
                r.start()
                if not r.wait_up(20):
                    res["error"] = "%s did not start" % r.id
                    return res
            edges = []
            t0 = time.monotonic()
            for k in range(n):
                e = Proc(self, kind, "E%d" % k, "edge", uplink=(i0, i1)[k % 2])
                e.start()
                edges.append(e)
                routers.append(e)
                if not e.wait_up(20):
                    res["error"] = "%s did not start" % e.id
                    return res
                cons.add("amqp://127.0.0.1:%d" % e.port)
            t_last = time.monotonic()
            res["start_s"] = round(t_last - t0, 2)
            deadline = t_last + self.args.timeout + 0.2 * n
            want = {i0: (n + 1) // 2, i1: n // 2}
            missing = "not asked"
            while time.monotonic() < deadline:
                missing = "; ".join(x for x in (self.interior_ok(i, c) for i, c in want.items())
                                    if x)
                if not missing:
                    break
                time.sleep(self.args.poll)
            if missing:
                res["error"] = "converge: " + missing
                return res
            res["converge_s"] = round(time.monotonic() - t_last, 2)
            res["rss_i0_kib"], res["rss_i1_kib"] = rss_kib(i0.proc.pid), rss_kib(i1.proc.pid)
            erss = [rss_kib(e.proc.pid) for e in edges]
            res["rss_edges_kib"] = sum(erss)
            res["rss_edge_kib"] = round(sum(erss) / max(1, len(erss)))
            res.update(self.rate(edges[0], edges[-1]))
        finally:
            cons.stop()
            for r in routers:
                if r.proc and r.proc.poll() is None:
                    r.proc.terminate()
            for r in routers:
                if r.proc:
                    try:
                        r.proc.wait(10)
                    except subprocess.TimeoutExpired:
                        r.proc.kill()
        return res

    def rate(self, src, dst):
        """mesh_bench's run: warm-up, then the timed one (receiver checks every message)."""
        got = MeshBench(self.args).rate("%s-fanin" % src.kind, src, dst)
        if not isinstance(got, dict):
            return {"error": "msg/s: %s" % got}
        return {"msg_s": got.get("msg_per_s"), "p50_us": got.get("p50_us")}


def table(rows):
    heads = ["router", "edges", "start s", "converge s", "I0 MiB", "I1 MiB", "edges MiB",
             "MiB/edge", "msg/s", "p50 us", "error"]
    lines = []
    for r in rows:
        mib = lambda k: "%.1f" % (r[k] / 1024.0) if k in r else "-"  # noqa: E731
        lines.append([r["kind"], str(r["edges"]), str(r.get("start_s", "-")),
                      str(r.get("converge_s", "-")), mib("rss_i0_kib"), mib("rss_i1_kib"),
                      mib("rss_edges_kib"), mib("rss_edge_kib"), str(r.get("msg_s", "-")),
                      str(r.get("p50_us", "-")), r.get("error", "")])
    w = [max(len(h), *(len(x[i]) for x in lines)) for i, h in enumerate(heads)]
    print("  ".join(h.ljust(w[i]) for i, h in enumerate(heads)))
    for x in lines:
        print("  ".join(v.ljust(w[i]) for i, v in enumerate(x)))


def main():
    p = argparse.ArgumentParser(prog="scripts/bench mesh fanin", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--edges", type=int, default=100, help="edge routers (default 100)")
    p.add_argument("--routers", choices=["both", "junctiond"], default="both",
                   help="junctiond and qdrouterd (default, where it exists) or junctiond only")
    p.add_argument("--seconds", type=float, default=3, help="the timed message run (default 3)")
    p.add_argument("--credit", type=int, default=1000, help="loadgen credit (default 1000)")
    p.add_argument("--timeout", type=float, default=30, help="per phase, plus 0.2 s per edge")
    p.add_argument("--poll", type=float, default=0.1, help="management polling (default 0.1)")
    p.add_argument("--workers", type=int, default=1, help="workerThreads of every router")
    p.add_argument("--junctiond", default=os.path.join(ROOT, "build-bench/router/junctiond"))
    p.add_argument("--loadgen", default=os.path.join(
        ROOT, "build-bench/tests/bench/loadgen/junction-loadgen"))
    p.add_argument("--qdrouterd", default=os.path.join(
        os.path.dirname(ROOT), "shared", "peer", "bin", "qdrouterd"))
    p.add_argument("--results", default=None, help="directory for logs and fanin.jsonl")
    args = p.parse_args()
    if args.edges < 1:
        p.error("--edges: at least 1")
    args.results = args.results or tempfile.mkdtemp(prefix="junction-fanin-")
    os.makedirs(args.results, exist_ok=True)
    kill_children_at_exit()
    signal.signal(signal.SIGTERM, lambda s, f: sys.exit(1))
    kinds = ["junctiond"]
    if args.routers == "both" and os.path.exists(args.qdrouterd):
        kinds.append("qdrouterd")
    bench = Bench(args)
    rows = []
    for kind in kinds:
        r = bench.run(kind)
        rows.append(r)
        with open(os.path.join(args.results, "fanin.jsonl"), "a") as f:
            f.write(json.dumps(r) + "\n")
        if kind == "junctiond" and "error" in r:
            bench.failed = True
    table(rows)
    print("results: %s" % args.results)
    return 1 if bench.failed else 0


if __name__ == "__main__":
    sys.exit(main())
