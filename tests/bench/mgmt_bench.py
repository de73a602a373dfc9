#!/usr/bin/python3
"""Time qdstat-style management QUERYs against a router holding K links.

    /usr/bin/python3 tests/bench/mgmt_bench.py [K] [JUNCTIOND] [HOLDLINKS]

Starts JUNCTIOND (default build/router/junctiond) on a free port of 127.0.0.1, holds K
receivers on K addresses with junction-holdlinks (default build/tests/bench/scale/...), then
times, through tests/system/mgmt_tool.Node (what qdstat sends: pages of count=500), a full
`-l` (router.link) and `-a` (router.address) read (best of 3) and the round trip of a small
QUERY (router [id], mean of 200).  A benchmark, not a test: it asserts nothing."""

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "system"))
from mgmt_tool import Node  # noqa: E402


def main():
    k = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    junctiond = sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build/router/junctiond")
    hold = sys.argv[3] if len(sys.argv) > 3 else os.path.join(
        ROOT, "build/tests/bench/scale/junction-holdlinks")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    tmp = tempfile.mkdtemp()
    cfg = os.path.join(tmp, "bench.json")
    with open(cfg, "w") as f:
        f.write('[["router", {"id": "B"}], ["listener", {"host": "127.0.0.1", "port": "%d"}]]'
                % port)
    r = subprocess.Popen([junctiond, "-c", cfg], stderr=open(os.path.join(tmp, "router.log"), "w"))
    time.sleep(1)
    h = subprocess.Popen([hold, "--url", "127.0.0.1:%d" % port, "--links", str(k)],
                         stdout=subprocess.PIPE)
    print(h.stdout.readline().decode().strip())
    n = Node("127.0.0.1:%d" % port)
    try:
        for view, t in (("-l", "router.link"), ("-a", "router.address")):
            best, rows = 1e9, []
            for _ in range(3):
                t0 = time.monotonic()
                rows = n.query_dicts(t)
                best = min(best, time.monotonic() - t0)
            print("qdstat %s (%s, %d rows, pages of 500): best of 3 %.3f s"
                  % (view, t, len(rows), best))
        t0 = time.monotonic()
        for _ in range(200):
            n.query("router", ["id"])
        print("QUERY router [id] round trip: %.2f ms" % ((time.monotonic() - t0) / 200 * 1000))
    finally:
        n.close()
        h.send_signal(signal.SIGTERM)
        h.wait()
        r.send_signal(signal.SIGTERM)
        r.wait()


if __name__ == "__main__":
    main()
