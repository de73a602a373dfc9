#!/usr/bin/python3
"""Link routes across a mesh, timed: messages per second producer -> broker queue -> consumer
with both clients' links routed to the broker, the clients on the broker's own router (one
router), on a second interior router joined to it (two routers: every frame crosses the
inter-router connection too), or on an edge router of the broker's router (edge: the edge
asks its interior's address lookup, then every frame crosses the edge connection), beside
the clients connected to the broker directly.

    tests/bench/linkroute_mesh_bench.py [--brokers proton,rabbitmq] [--seconds S]
        [--rounds R] [--credit W] [--kinds junctiond,qdrouterd]

Each broker is started by tests/system/brokers.py (`serve`), as the system tests start it, on
127.0.0.1.  For each router kind (junctiond from build/, qdrouterd 1.19 from ../shared/peer
when it is there; never with RabbitMQ, on which qdrouterd 1.19 aborts: docs/brokers.md),
router A (interior, a route-container connector to the broker, linkRoutes in and out for
prefix bench-lr naming it, an edge listener), router B (interior, an inter-router connector
to A, linkRoutes with only the prefix) and router E (edge, an edge connector to A, no
linkRoute) start once; a round is one run per path of the bench's load generator
(build/tests/bench/loadgen: one receiver, then one sender for S seconds, W credit), on a
fresh queue each.  Prints the median of the rounds of the sender's and the receiver's
messages per second per broker, path and router kind.  Figures, not pass/fail: run it on a
quiet machine.  About a minute per broker and kind with the defaults."""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PEER = ROOT.parent / "shared" / "peer" / "bin" / "qdrouterd"


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, proc, timeout=30):
    import socket
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("exited with %s" % proc.returncode)
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("not listening on %d after %ds" % (port, timeout))


def start_broker(kind, workdir):
    p = subprocess.Popen([sys.executable, str(ROOT / "tests" / "system" / "brokers.py"), "serve",
                          kind, str(workdir)], stdout=subprocess.PIPE, text=True)
    for line in p.stdout:
        if line.startswith("URL "):
            port = int(line.split(":")[-1])
            return p, port
    raise RuntimeError("broker %s did not start" % kind)


def router_conf(kind, rid, port, ir_port, broker_port=None, connect=None, edge_port=None,
                edge_of=None):
    ents = [["router", {"id": rid, "mode": "edge" if edge_of else "interior"}],
            ["listener", {"host": "127.0.0.1", "port": str(port)}]]
    if edge_port:
        ents.append(["listener", {"host": "127.0.0.1", "port": str(edge_port), "role": "edge"}])
    if edge_of:
        ents.append(["connector", {"host": "127.0.0.1", "port": str(edge_of), "role": "edge"}])
    elif connect is None:
        ents.append(["listener", {"host": "127.0.0.1", "port": str(ir_port),
                                  "role": "inter-router"}])
    else:
        ents.append(["connector", {"host": "127.0.0.1", "port": str(connect),
                                   "role": "inter-router"}])
    if broker_port:
        ents.append(["connector", {"name": "broker", "host": "127.0.0.1",
                                   "port": str(broker_port), "role": "route-container"}])
    for d in ("in", "out") if not edge_of else ():
        lr = {"prefix": "bench-lr", "direction": d}
        if broker_port:
            lr["connection"] = "broker"
        ents.append(["linkRoute", lr])
    if kind == "qdrouterd":
        for t, a in ents:
            if t in ("listener", "connector"):
                a["saslMechanisms"] = "ANONYMOUS"
    return json.dumps(ents)


def start_router(kind, exe, workdir, name, text, port):
    cfg = workdir / ("%s.json" % name)
    cfg.write_text(text)
    env = dict(os.environ)
    log = open(workdir / ("%s.log" % name), "w")
    p = subprocess.Popen([str(exe), "-c", str(cfg)], env=env, stdout=log, stderr=log)
    wait_port(port, p)
    return p


def run(loadgen, port, address, seconds, credit, count=None):
    """One receiver, then one sender; returns (sent/s, received/s) or None on failure."""
    url = "127.0.0.1:%d" % port
    rcv = subprocess.Popen([str(loadgen), "receive", "--url", url, "-a", address, "--credit",
                            str(credit), "-t", "20"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    line = rcv.stderr.readline()
    if not line.startswith("READY"):
        rcv.kill()
        rcv.wait()
        return None
    what = ["--count", str(count)] if count else ["--seconds", str(seconds)]
    snd = subprocess.run([str(loadgen), "send", "--url", url, "-a", address, "--credit",
                          str(credit), "-t", "20"] + what, capture_output=True, text=True)
    out, _ = rcv.communicate(timeout=60)
    if snd.returncode != 0 or rcv.returncode != 0:
        return None
    s, r = json.loads(snd.stdout.strip().splitlines()[-1]), json.loads(out.strip().splitlines()[-1])
    return s.get("msg_per_s"), r.get("msg_per_s")


def warm(loadgen, port, address, timeout=60):
    """Until 20 messages go through (the route is known at that router)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if run(loadgen, port, address, 0, 20, count=20):
            return True
        time.sleep(0.5)
    return False


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brokers", default="proton,rabbitmq")
    ap.add_argument("--kinds", default="junctiond,qdrouterd")
    ap.add_argument("--seconds", type=float, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--credit", type=int, default=1000)
    ap.add_argument("--junctiond", default=str(ROOT / "build" / "router" / "junctiond"))
    ap.add_argument("--loadgen",
                    default=str(ROOT / "build" / "tests" / "bench" / "loadgen" / "junction-loadgen"))
    a = ap.parse_args()
    exes = {"junctiond": Path(a.junctiond), "qdrouterd": PEER}
    rows = []
    tmp = Path(tempfile.mkdtemp(prefix="lrmesh-"))
    try:
        for broker in a.brokers.split(","):
            bproc, bport = start_broker(broker, tmp / broker)
            try:
                res = {"direct": []}
                for i in range(a.rounds):
                    q = ("/queue/" if broker == "rabbitmq" else "") + "bench-d%d-%d" % (i, os.getpid())
                    warm(Path(a.loadgen), bport, q)
                    res["direct"].append(run(Path(a.loadgen), bport, q, a.seconds, a.credit))
                rows.append((broker, "direct", "-", res["direct"]))
                for kind in a.kinds.split(","):
                    if not exes[kind].exists():
                        print("# %s: %s absent, skipped" % (kind, exes[kind]), file=sys.stderr)
                        continue
                    if kind == "qdrouterd" and broker == "rabbitmq":
                        print("# qdrouterd with rabbitmq: skipped (qdrouterd 1.19 aborts on "
                              "RabbitMQ's link routes)", file=sys.stderr)
                        continue
                    pa, pb, ira = free_port(), free_port(), free_port()
                    pe, epa = free_port(), free_port()
                    d = tmp / ("%s-%s" % (broker, kind))
                    d.mkdir(parents=True)
                    ra = start_router(kind, exes[kind], d, "A",
                                      router_conf(kind, "BA", pa, ira, broker_port=bport,
                                                  edge_port=epa), pa)
                    rb = start_router(kind, exes[kind], d, "B",
                                      router_conf(kind, "BB", pb, None, connect=ira), pb)
                    re_ = start_router(kind, exes[kind], d, "E",
                                       router_conf(kind, "BE", pe, None, edge_of=epa), pe)
                    try:
                        for path, port in (("1 router", pa), ("2 routers", pb), ("edge", pe)):
                            got = []
                            for i in range(a.rounds):
                                q = "bench-lr.%s-%d-%d" % (path[0], i, os.getpid())
                                if not warm(Path(a.loadgen), port, q):
                                    got.append(None)
                                    continue
                                got.append(run(Path(a.loadgen), port, q, a.seconds, a.credit))
                            rows.append((broker, path, kind, got))
                    finally:
                        for p in (re_, rb, ra):
                            p.terminate()
                            p.wait(10)
            finally:
                bproc.terminate()
                bproc.wait(90)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("%-9s %-10s %-10s %10s %10s  %s" % ("broker", "path", "router", "sent/s", "recv/s",
                                               "rounds ok"))
    for broker, path, kind, got in rows:
        ok = [g for g in got if g and g[0] and g[1]]
        if not ok:
            print("%-9s %-10s %-10s %10s %10s  0/%d" % (broker, path, kind, "-", "-", len(got)))
            continue
        print("%-9s %-10s %-10s %10.0f %10.0f  %d/%d" % (
            broker, path, kind, statistics.median(g[0] for g in ok),
            statistics.median(g[1] for g in ok), len(ok), len(got)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
