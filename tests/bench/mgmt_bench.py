#!/usr/bin/python3
"""Time qdstat-style management QUERYs against a router holding K links.

    /usr/bin/python3 tests/bench/mgmt_bench.py [K] [JUNCTIOND] [HOLDLINKS]

Starts JUNCTIOND (default build/router/junctiond) on a free port of 127.0.0.1, holds K
receivers on K addresses with junction-holdlinks (default build/tests/bench/scale/...), then
times, through tests/system/mgmt_tool.Node (what qdstat sends: pages of count=500), a full
`-l` (router.link) and `-a` (router.address) read (best of 3) and the round trip of a small
QUERY (router [id], mean of 200); then the same rows through the management socket (what
junctionctl sends: entity.query link and address, best of 5), a full stats.list (pages of
10000) and stats.snapshot (best of 5), and the round trip of a small entity.query (router
[id], mean of 500).  A benchmark, not a test: it asserts nothing."""

import json
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
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        # the docstring is the help: its usage line, then what it does
        print("usage: " + __doc__.split("\n\n", 1)[1].lstrip())
        return
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
    sock = os.path.join(tmp, "mgmt.sock")
    with open(cfg, "w") as f:
        f.write('[["router", {"id": "B"}], ["listener", {"host": "127.0.0.1", "port": "%d"}],'
                ' ["management", {"socket": "%s"}]]' % (port, sock))
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
        socket_figures(sock)
    finally:
        n.close()
        h.send_signal(signal.SIGTERM)
        h.wait()
        r.send_signal(signal.SIGTERM)
        r.wait()


def socket_figures(path):
    """The management socket's side: entity.query, stats.list, stats.snapshot."""
    c = socket.socket(socket.AF_UNIX)
    c.connect(path)
    f = c.makefile("rb")
    f.readline()  # hello

    def request(o):
        c.sendall((json.dumps(o) + "\n").encode())
        lines = []
        while True:
            j = json.loads(f.readline())
            lines.append(j)
            if not j.get("more"):
                return lines

    def best_of(n, fn):
        best, what = 1e9, None
        for _ in range(n):
            t0 = time.monotonic()
            what = fn()
            best = min(best, time.monotonic() - t0)
        return best, what

    def query(t):
        return sum(len(line["result"]["results"])
                   for line in request({"id": 1, "op": "entity.query", "type": t}))

    def list_all():
        cursor, n = None, 0
        while True:
            o = {"id": 2, "op": "stats.list", "limit": 10000}
            if cursor:
                o["cursor"] = cursor
            res = request(o)[0]["result"]
            n += len(res["stats"])
            cursor = res["next"]
            if not cursor:
                return n

    def snapshot():
        return sum(len(line["result"]["values"])
                   for line in request({"id": 3, "op": "stats.snapshot"}))

    try:
        for t in ("link", "address"):
            secs, rows = best_of(5, lambda: query(t))
            print("socket entity.query %s (%d rows): best of 5 %.4f s" % (t, rows, secs))
        secs, n = best_of(5, list_all)
        print("socket stats.list (%d stats, pages of 10000): best of 5 %.4f s" % (n, secs))
        secs, n = best_of(5, snapshot)
        print("socket stats.snapshot (%d values): best of 5 %.4f s" % (n, secs))
        t0 = time.monotonic()
        for _ in range(500):
            request({"id": 4, "op": "entity.query", "type": "router", "attributeNames": ["id"]})
        print("entity.query router [id] round trip: %.3f ms"
              % ((time.monotonic() - t0) / 500 * 1000))
    finally:
        c.close()


if __name__ == "__main__":
    main()
