#!/usr/bin/python3
"""scripts/bench policy: what a flood of denied connections or links costs the traffic vhost
policy admits (issue 17 point 3: "a flood of denied connections or links does not slow
admitted traffic").

One junctiond with enableVhostPolicy: listener A has policyVhost "bench" (anonymous users,
every source and target but those starting "denied"), listener B has none, and no
defaultVhost.  A junction-loadgen sender and receiver on A move at-least-once messages for
--seconds, once per row:

  off          the same router with enableVhostPolicy false (what policy itself costs)
  quiet        policy on, nothing else
  conn-flood   --flooders threads each opening connections to B whose open names the
               hostname "nosuch" (no vhost: refused with amqp:resource-limit-exceeded
               "connection disallowed by local policy"), one after another, as fast as the
               router answers
  link-flood   --flooders threads each on a connection to A attaching senders to
               "denied.N" (refused with amqp:unauthorized-access), 900 per connection (the
               router closes a connection after 1000 refused links), then a new connection

Each row prints the admitted msg/s and p50/p99 latency (the receiver's), the denials the
flood got per second (counted by the flooders from the router's answers), and the router's
CPU (user+sys, all threads) as a share of one CPU.  The flooders speak AMQP over raw sockets
(SASL ANONYMOUS, open, begin, attach) so that a Python client's own cost does not bound the
flood more than it must.  Every process is a child of this one, killed when it ends.
Results (configuration, logs, one JSON line per row in policy.jsonl) go to --results.
Exits 1 if a row failed (a client failed, the router died, or the flood was not refused as
expected), 0 otherwise, 2 on a usage error."""

import argparse
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "bench"))
from benchproc import CHILDREN, kill_children_at_exit  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")


# ---- AMQP by hand: just what the flooders send ----------------------------------------

def enc_str(s):
    b = s.encode()
    return (b"\xa1" + bytes([len(b)]) + b) if len(b) < 256 else \
        (b"\xb1" + struct.pack(">I", len(b)) + b)


def enc_sym(s):
    b = s.encode()
    return b"\xa3" + bytes([len(b)]) + b


def enc_uint(v):
    return b"\x70" + struct.pack(">I", v)


def enc_list(items):
    body = b"".join(items)
    return b"\xd0" + struct.pack(">II", len(body) + 4, len(items)) + body


def described(code, items):
    return b"\x00\x53" + bytes([code]) + enc_list(items)


def frame(body, ftype=0, channel=0):
    return struct.pack(">IBBH", 8 + len(body), 2, ftype, channel) + body


SASL_HEADER = b"AMQP\x03\x01\x00\x00"
AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_INIT = frame(described(0x41, [enc_sym("ANONYMOUS")]), ftype=1)
NULL = b"\x40"


def open_frame(hostname):
    return frame(described(0x10, [enc_str("policy-flood"), enc_str(hostname)]))


BEGIN = frame(described(0x11, [NULL, enc_uint(0), enc_uint(100), enc_uint(100)]))


def attach_frame(name, handle, target):
    # a sender (role false) with a source and a target
    return frame(described(0x12, [enc_str(name), enc_uint(handle), b"\x42", NULL, NULL,
                                  described(0x28, [enc_str("src")]),
                                  described(0x29, [enc_str(target)])]))


class Peer:
    """A blocking raw AMQP connection: reads whole frames."""

    def __init__(self, port, timeout=10):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def read(self, n):
        while len(self.buf) < n:
            got = self.s.recv(65536)
            if not got:
                raise EOFError
            self.buf += got
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def frame(self):
        """(descriptor code or None for an empty frame, body bytes)."""
        size = struct.unpack(">I", self.read(4))[0]
        rest = self.read(size - 4)
        body = rest[4 * rest[0] - 4:]
        if len(body) >= 3 and body[0] == 0 and body[1] == 0x53:
            return body[2], body
        return None, body

    def until(self, code):
        while True:
            c, body = self.frame()
            if c == code:
                return body

    def handshake(self, hostname):
        self.s.sendall(SASL_HEADER)
        self.read(8)
        self.until(0x40)  # sasl-mechanisms
        self.s.sendall(SASL_INIT)
        self.until(0x44)  # sasl-outcome
        self.s.sendall(AMQP_HEADER + open_frame(hostname))
        self.read(8)

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


class Flood:
    """kind "conn": refused opens on port_b; "link": refused attaches on port_a."""

    def __init__(self, kind, port_a, port_b, threads):
        self.kind, self.port_a, self.port_b = kind, port_a, port_b
        self.stop = threading.Event()
        self.denied = 0
        self.unexpected = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self.run, daemon=True) for _ in range(threads)]

    def count(self, n=1):
        with self.lock:
            self.denied += n

    def bad(self, what):
        with self.lock:
            if len(self.unexpected) < 5:
                self.unexpected.append(what)

    def run(self):
        while not self.stop.is_set():
            p = None
            try:
                if self.kind == "conn":
                    p = Peer(self.port_b)
                    p.handshake("nosuch")
                    self.until_refused(p)
                else:
                    p = Peer(self.port_a)
                    p.handshake("")
                    p.until(0x10)  # the router's open
                    p.s.sendall(BEGIN)
                    p.until(0x11)
                    for h in range(900):
                        if self.stop.is_set():
                            break
                        p.s.sendall(attach_frame("l%d" % h, h, "denied.%d" % h))
                        p.until(0x12)  # the router's attach, then its detach
                        body = p.until(0x16)
                        if b"amqp:unauthorized-access" in body:
                            self.count()
                        else:
                            self.bad("detach without amqp:unauthorized-access")
            except (OSError, EOFError) as e:
                if not self.stop.is_set():
                    self.bad("%s: %s" % (type(e).__name__, e))
                    time.sleep(0.05)
            finally:
                if p:
                    p.close()

    def until_refused(self, p):
        p.until(0x10)
        body = p.until(0x18)  # close
        if b"connection disallowed by local policy" in body:
            self.count()
        else:
            self.bad("close without the policy's description")

    def start(self):
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(15)


# ---- the router and the clients ---------------------------------------------------------

def config(workers, policy):
    group = {"users": "*", "remoteHosts": "*", "allowAnonymousSender": True,
             "allowDynamicSource": True, "sources": "bench, $management",
             "targets": "bench, $management"}
    return [
        ["router", {"id": "bench", "workerThreads": workers}],
        ["listener", {"host": "127.0.0.1", "port": "0", "linkCapacity": 1000,
                      "policyVhost": "bench", "authenticatePeer": False}],
        ["listener", {"host": "127.0.0.1", "port": "0", "authenticatePeer": False}],
        ["policy", {"enableVhostPolicy": policy, "defaultVhost": "",
                    "maxConnections": 65535}],
        ["vhost", {"hostname": "bench", "maxConnections": 65535,
                   "maxConnectionsPerUser": 65535, "maxConnectionsPerHost": 65535,
                   "allowUnknownUser": True, "groups": {"$default": group}}],
    ]


def start_router(args, tag, policy):
    cfg = os.path.join(args.results, tag + ".json")
    with open(cfg, "w") as f:
        json.dump(config(args.workers, policy), f)
    log = os.path.join(args.results, tag + ".router.log")
    p = subprocess.Popen([args.junctiond, "-c", cfg], stderr=open(log, "w"),
                         stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    CHILDREN.append(p)
    deadline = time.monotonic() + 30
    while True:
        text = open(log).read()
        ports = [int(x.split(":")[1]) for x in text.split()
                 if x.startswith("127.0.0.1:") and x.split(":")[1].isdigit()]
        if "Operational" in text and len(ports) >= 2:
            return p, ports[0], ports[1]
        if p.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("junctiond did not start (%s)" % log)
        time.sleep(0.05)


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def traffic(args, tag, port):
    base = os.path.join(args.results, tag)
    rcv = subprocess.Popen([args.loadgen, "receive", "--url", "127.0.0.1:%d" % port,
                            "--credit", "1000"], stdout=open(base + ".recv.json", "w"),
                           stderr=open(base + ".recv.log", "w"), stdin=subprocess.DEVNULL)
    CHILDREN.append(rcv)
    deadline = time.monotonic() + 20
    while "READY" not in open(base + ".recv.log").read():
        if rcv.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError("receiver did not attach (%s.recv.log)" % base)
        time.sleep(0.05)
    snd = subprocess.Popen([args.loadgen, "send", "--url", "127.0.0.1:%d" % port, "--credit",
                            "1000", "--seconds", str(args.seconds)],
                           stdout=open(base + ".send.json", "w"),
                           stderr=open(base + ".send.log", "w"), stdin=subprocess.DEVNULL)
    CHILDREN.append(snd)
    limit = args.seconds + 60
    if snd.wait(limit) or rcv.wait(limit):
        raise RuntimeError("the clients failed (%s.recv.log, %s.send.log)" % (base, base))
    with open(base + ".recv.json") as f:
        return json.loads(f.read().strip().splitlines()[-1])


def row(args, tag):
    policy = tag != "off"
    router, port_a, port_b = start_router(args, tag, policy)
    flood = None
    try:
        if tag in ("conn-flood", "link-flood"):
            flood = Flood(tag.split("-")[0], port_a, port_b, args.flooders)
            flood.start()
            time.sleep(1)  # the flood at full speed before the timed traffic
        t0, c0 = time.monotonic(), cpu_ticks(router.pid)
        d0 = flood.denied if flood else 0
        got = traffic(args, tag, port_a)
        t1, c1 = time.monotonic(), cpu_ticks(router.pid)
        d1 = flood.denied if flood else 0
        if flood:
            flood.finish()
        if router.poll() is not None:
            raise RuntimeError("junctiond died (%s.router.log)" % tag)
        res = {"row": tag, "msg_per_s": got["msg_per_s"], "p50_us": got.get("p50_us"),
               "p99_us": got.get("p99_us"), "denied_per_s": (d1 - d0) / (t1 - t0),
               "router_cpu": (c1 - c0) / CLK_TCK / (t1 - t0),
               "unexpected": flood.unexpected if flood else []}
        if flood and (not res["denied_per_s"] or flood.unexpected):
            res["error"] = "the flood was not refused as expected: %s" % flood.unexpected
        return res
    finally:
        if flood:
            flood.finish()
        router.send_signal(signal.SIGTERM)
        try:
            router.wait(15)
        except subprocess.TimeoutExpired:
            router.kill()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--seconds", type=float, default=5, help="timed traffic per row (5)")
    p.add_argument("--flooders", type=int, default=4, help="flooding threads (4)")
    p.add_argument("--workers", type=int, default=os.cpu_count(), help="workerThreads")
    p.add_argument("--rows", default="off,quiet,conn-flood,link-flood")
    p.add_argument("--results", default=None)
    p.add_argument("--junctiond", default=os.path.join(ROOT, "build-bench/router/junctiond"))
    p.add_argument("--loadgen", default=os.path.join(
        ROOT, "build-bench/tests/bench/loadgen/junction-loadgen"))
    args = p.parse_args()
    rows = args.rows.split(",")
    if any(r not in ("off", "quiet", "conn-flood", "link-flood") for r in rows) or \
            args.seconds <= 0 or args.flooders < 1 or args.workers < 1:
        p.print_usage(sys.stderr)
        return 2
    if not args.results:
        args.results = os.path.join(ROOT, "build-bench", "bench-results",
                                    time.strftime("%Y%m%d-%H%M%S") + "-policy")
    os.makedirs(args.results, exist_ok=True)
    kill_children_at_exit(signal.SIGTERM, signal.SIGINT)
    print("vhost policy: admitted traffic with and without a flood of denials; %d flooders, "
          "%g s per row, workerThreads=%d, %d CPUs; results in %s" % (
              args.flooders, args.seconds, args.workers, os.cpu_count(),
              os.path.relpath(args.results, ROOT)))
    failed = False
    out = []
    with open(os.path.join(args.results, "policy.jsonl"), "w") as jl:
        for tag in rows:
            try:
                res = row(args, tag)
            except RuntimeError as e:
                res = {"row": tag, "error": str(e)}
            jl.write(json.dumps(res) + "\n")
            out.append(res)
            failed = failed or "error" in res
    print("%-11s %9s %9s %9s %10s %10s %12s" % ("row", "msg/s", "p50 us", "p99 us", "denied/s",
                                               "router CPU", "us/denial"))
    quiet = next((r for r in out if r["row"] == "quiet" and "msg_per_s" in r), None)
    base = quiet["msg_per_s"] if quiet else None
    for r in out:
        if "msg_per_s" not in r:
            print("%-11s FAILED: %s" % (r["row"], r["error"]))
            continue
        rel = " (%3.0f%% of quiet)" % (100 * r["msg_per_s"] / base) if base else ""
        # the router's CPU beyond what the row's messages cost at the quiet row's CPU per
        # message, per denial: what one denial costs the router
        per = ""
        if quiet and r["denied_per_s"] and r["msg_per_s"]:
            extra = r["router_cpu"] - quiet["router_cpu"] * r["msg_per_s"] / quiet["msg_per_s"]
            per = "%.1f" % (1e6 * max(extra, 0) / r["denied_per_s"])
        print("%-11s %9.0f %9.0f %9.0f %10.0f %9.0f%% %12s%s%s" % (
            r["row"], r["msg_per_s"], r["p50_us"] or 0, r["p99_us"] or 0, r["denied_per_s"],
            100 * r["router_cpu"], per, rel, ("  " + r["error"]) if "error" in r else ""))
    print("msg/s: the receiver's (first to last message); router CPU: user+sys of all its "
          "threads over the row, as a share of one CPU; us/denial: the router's CPU beyond the "
          "row's messages (at the quiet row's CPU per message), per denial.  The flooders "
          "share the machine's CPUs with the router and the clients: on a machine with few "
          "CPUs, part of a flood row's drop is the flooders' own CPU.")
    print("load average at the end: %s" % " ".join(open("/proc/loadavg").read().split()[:3]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
