"""The management socket and junctionctl against a running router carrying traffic.

The socket is driven directly (a Unix socket, newline-delimited JSON, as stats/stats.h
describes) and through junctionctl, which is looked for next to junctiond.  Counters are read
while Proton clients send messages, so the tests see them move; entity.query rows are checked
against the links and connections the clients hold.
"""

import json
import os
import select
import socket
import stat
import subprocess
import time

import pytest
from proton import Delivery, Message

from conftest import junctiond_path, router_entities, run_junctiond, write_config

REPLY_TIMEOUT = 10.0


class Mgmt:
    """One client of the management socket: JSON lines in and out."""

    def __init__(self, path, hello=True):
        self.path = str(path)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(REPLY_TIMEOUT)
        self.sock.connect(self.path)
        self.buf = b""
        self.next_id = 0
        self.pending = []  # lines read while looking for something else
        self.hello = self.line() if hello else None

    def send_raw(self, data):
        self.sock.sendall(data)

    def line(self, timeout=REPLY_TIMEOUT):
        """The next line as a dict; None at EOF. Raises socket.timeout."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("no line from the management socket in %.1fs" % timeout)
            self.sock.settimeout(left)
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\n", 1)
        return json.loads(raw.decode("utf-8"))

    def next_line(self, timeout=REPLY_TIMEOUT):
        if self.pending:
            return self.pending.pop(0)
        return self.line(timeout)

    def reply(self, rid, timeout=REPLY_TIMEOUT):
        """The next line with id `rid` (other lines are kept for later)."""
        for i, m in enumerate(self.pending):
            if m.get("id") == rid:
                return self.pending.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            m = self.line(max(0.01, deadline - time.monotonic()))
            assert m is not None, "the router closed the management connection"
            if m.get("id") == rid:
                return m
            self.pending.append(m)

    def request(self, op, **args):
        self.next_id += 1
        rid = self.next_id
        req = dict(args, id=rid, op=op)
        self.send_raw((json.dumps(req) + "\n").encode())
        return rid

    def call(self, op, **args):
        """One request; its result (every line of a streamed reply merged); fails on error."""
        rid = self.request(op, **args)
        m = self.reply(rid)
        assert "error" not in m, m
        res = m["result"]
        while m.get("more"):
            m = self.reply(rid)
            assert "error" not in m, m
            for k, v in m["result"].items():
                if isinstance(v, dict):
                    res[k].update(v)
                elif isinstance(v, list) and k == "results":
                    res[k].extend(v)
        return res

    def error(self, op=None, raw=None, **args):
        """Send a request (or raw bytes) that must fail; returns the error reply."""
        if raw is not None:
            self.send_raw(raw)
            m = self.next_line()
        else:
            m = self.reply(self.request(op, **args))
        assert "error" in m, m
        assert isinstance(m["error"]["code"], int) and m["error"]["message"], m
        return m

    def get(self, match):
        return self.call("stats.get", match=match)["values"]

    def query(self, type_, **args):
        """entity.query rows as dicts."""
        res = self.call("entity.query", type=type_, **args)
        names = res["attributeNames"]
        return [dict(zip(names, row)) for row in res["results"]]

    def close(self):
        self.sock.close()


def wait_for(fn, timeout=10.0, msg="condition"):
    """Poll fn() until it returns something true; returns it."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for %s (last: %r)" % (msg, v))
        time.sleep(0.05)


def junctionctl_path():
    return os.path.join(os.path.dirname(str(junctiond_path())), "junctionctl")


def junctionctl(*args, timeout=20):
    exe = junctionctl_path()
    if not os.path.exists(exe):
        pytest.fail("junctionctl not found at %s (build it)" % exe)
    return subprocess.run([exe] + [str(a) for a in args], stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout)


@pytest.fixture
def sock_path(tmp_path):
    return tmp_path / "j.sock"


@pytest.fixture
def mrouter(make_router, sock_path):
    """A router with a management socket (two workers, so shards are summed)."""
    return make_router(router={"workerThreads": 2},
                       extra=[["management", {"socket": str(sock_path)}]])


def send_accepted(client, url, address, n, body="x"):
    """n messages to `address` through a receiver that accepts them; returns the receiver."""
    conn = client.connect(url)
    rcv = conn.receiver(address, settle="accept", credit=50)
    snd = conn.sender(address)
    dlvs = [snd.send(Message(body="%s%d" % (body, i))) for i in range(n)]
    rcv.get_n(n)
    assert snd.wait_outcomes(dlvs) == [Delivery.ACCEPTED] * n
    return conn, snd, rcv


# ---- the socket itself ----

def test_hello_socket_mode_and_cleanup(make_router, tmp_path):
    path = tmp_path / "sub" / "dir" / "j.sock"  # the directories are created
    r = make_router(extra=[["management", {"socket": str(path)}]])
    st = os.stat(path)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o660
    m = Mgmt(path)
    h = m.hello["hello"]
    assert h["product"] == "junction"
    assert h["router_id"] == "JTest"
    assert h["mode"] == "standalone"
    assert h["version"] and h["protocol"] == 1
    assert "stats.subscribe" in h["ops"] and "entity.query" in h["ops"]
    m.close()
    assert r.stop() == 0
    assert not path.exists(), "the socket file outlived junctiond"


def test_stale_socket_file_is_replaced_live_one_is_not(make_router, tmp_path):
    path = tmp_path / "j.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))  # bound, never listening, then abandoned: a stale socket file
    stale.close()
    r = make_router(extra=[["management", {"socket": str(path)}]])
    Mgmt(path).close()
    # a second router on the same path must not steal the live socket: it fails to start
    cfg = write_config(tmp_path / "second.json",
                       router_entities(extra=[["management", {"socket": str(path)}]]))
    p = run_junctiond(["-c", cfg])
    assert p.returncode == 1
    assert "Cannot open the management socket %s: another process serves it" % path in p.stderr
    Mgmt(path).close()  # the first router still serves
    assert r.is_running()
    # a file that is not a socket is never removed
    plain = tmp_path / "plain"
    plain.write_text("keep me")
    cfg = write_config(tmp_path / "third.json",
                       router_entities(extra=[["management", {"socket": str(plain)}]]))
    p = run_junctiond(["-c", cfg])
    assert p.returncode == 1 and "not a socket" in p.stderr
    assert plain.read_text() == "keep me"


def test_no_management_entity_no_socket(router, tmp_path):
    assert not any(p.suffix == ".sock" for p in tmp_path.iterdir())


# ---- counters move with traffic ----

def test_counters_move_with_traffic(mrouter, sock_path, client):
    m = Mgmt(sock_path)
    before = m.get("router.*")
    assert before["router.workerThreads"] == 2
    assert before["router.connectionCount"] == 0
    ingress0 = before["router.deliveriesIngress"]

    send_accepted(client, mrouter.url, "q", 25)

    # the core counts on its own thread: poll until the totals show up
    v = wait_for(lambda: (lambda x: x if x.get("address.M0q.deliveriesEgress") == 25 else None)(
        m.get("address.*.deliveries*")), msg="address.M0q.deliveriesEgress == 25")
    assert v["address.M0q.deliveriesIngress"] == 25
    after = wait_for(lambda: (lambda x: x if x["router.deliveriesIngress"] >= ingress0 + 25
                              and x["router.acceptedDeliveries"] >= 25 else None)(
        m.get("router.*")), msg="router totals")
    assert after["router.deliveriesIngress"] == ingress0 + 25
    assert after["router.deliveriesEgress"] >= 25
    assert after["router.connectionCount"] == 1
    assert after["router.linkCount"] == 2
    # a literal name is one value
    assert m.get("router.deliveriesIngress") == {"router.deliveriesIngress": ingress0 + 25}
    # link counters of the receiving link (the router sends on it: dir "out")
    links = m.query("link")
    out = [l for l in links if l["linkDir"] == "out" and l["owningAddr"] == "M0q"]
    assert len(out) == 1 and out[0]["deliveryCount"] == 25 and out[0]["acceptedCount"] == 25


def test_list_paged_and_snapshot_streamed(mrouter, sock_path, client):
    conn = client.connect(mrouter.url)
    rcvs = [conn.receiver("many.%d" % i, credit=1) for i in range(120)]
    assert rcvs
    m = Mgmt(sock_path)
    wait_for(lambda: m.get("router.addrCount")["router.addrCount"] >= 120, msg="120 addresses")
    # stats.list in pages of 100
    names, cursor, pages = [], None, 0
    while True:
        args = {"limit": 100}
        if cursor:
            args["cursor"] = cursor
        res = m.call("stats.list", **args)
        names += [s["name"] for s in res["stats"]]
        for s in res["stats"]:
            assert s["kind"] in ("counter", "gauge", "histogram")
        pages += 1
        cursor = res["next"]
        if cursor is None:
            break
    assert pages >= 8
    assert len(names) == len(set(names))
    assert "address.M0many.7.subscriberCount" in names
    assert "router.deliveriesIngress" in names
    # stats.snapshot arrives in several lines, the last with more: false
    rid = m.request("stats.snapshot")
    lines = [m.reply(rid)]
    while lines[-1]["more"]:
        lines.append(m.reply(rid))
    assert len(lines) >= 2
    values = {}
    for ln in lines:
        values.update(ln["result"]["values"])
    assert set(values) == set(names)
    assert values["address.M0many.7.subscriberCount"] == 1


# ---- malformed input ----

def test_malformed_lines_get_errors_and_connection_stays_usable(mrouter, sock_path):
    m = Mgmt(sock_path)
    e = m.error(raw=b"this is not json\n")
    assert e["id"] is None and e["error"]["code"] == 400
    e = m.error(raw=b'{"op": "stats.get", "match": "*"}\n')
    assert e["id"] is None and "id" in e["error"]["message"]
    e = m.error(raw=b'[1, 2]\n')
    assert e["error"]["code"] == 400
    e = m.error(raw=b'{"id": 1, "op": "stats.get"} trailing\n')
    assert e["error"]["code"] == 400
    e = m.error(raw=b'{"id": "a", "op": "stats.get", "match": "\xff\xfe"}\n')
    assert e["error"]["code"] == 400
    e = m.error("no.such.op")
    assert e["error"]["code"] == 404 and e["id"] == m.next_id
    e = m.error("stats.get", match=17)
    assert e["error"]["code"] == 400
    e = m.error("entity.query", type="widget")
    assert e["error"]["code"] == 404
    e = m.error("stats.unsubscribe", sub=999)
    assert e["error"]["code"] == 404
    # still usable after all that
    assert m.get("router.workerThreads") == {"router.workerThreads": 2}

    # an over-long line: one 413, the rest of it dropped, the next line answered
    big = b'{"id": 5, "op": "stats.get", "match": "' + b"x" * (70 * 1024) + b'"}'
    m.send_raw(big[:40000])
    m.send_raw(big[40000:] + b"\n" + b'{"id": 6, "op": "stats.get", "match": "router.linkCount"}\n')
    e = m.next_line()
    assert e["error"]["code"] == 413 and e["id"] is None
    r = m.next_line()
    assert r["id"] == 6 and "result" in r, r
    # the dropped line produced nothing else
    with pytest.raises(socket.timeout):
        m.line(timeout=0.3)
    # blank lines are ignored; several requests in one write are answered in order
    m.send_raw(b"\n\r\n" + b"".join(
        (json.dumps({"id": 100 + i, "op": "stats.get", "match": "router.linkCount"}) + "\n")
        .encode() for i in range(20)))
    assert [m.next_line()["id"] for _ in range(20)] == list(range(100, 120))


def test_client_that_vanishes_mid_snapshot(mrouter, sock_path, client):
    conn = client.connect(mrouter.url)
    for i in range(50):
        conn.receiver("vanish.%d" % i, credit=1)
    m = Mgmt(sock_path)
    m.request("stats.snapshot")
    m.request("entity.query", type="address")
    m.close()  # never reads the replies
    m2 = Mgmt(sock_path)
    assert m2.get("router.workerThreads") == {"router.workerThreads": 2}


# ---- subscriptions ----

def test_subscribe_sends_changes(mrouter, sock_path, client):
    m = Mgmt(sock_path)
    res = m.call("stats.subscribe", match="address.*.deliveriesEgress", interval_ms=100)
    sub = res["sub"]
    conn = client.connect(mrouter.url)
    rcv = conn.receiver("subq", settle="accept", credit=50)
    snd = conn.sender("subq")

    def update():
        u = m.next_line()
        assert u is not None and u.get("sub") == sub, u
        return u

    # the first update holds what matches now (the new address, at 0)
    u = wait_for(lambda: (lambda x: x if "address.M0subq.deliveriesEgress" in x["values"]
                          else None)(update()), msg="the first update with M0subq")
    assert u["values"]["address.M0subq.deliveriesEgress"] == 0
    for i in range(10):
        snd.send(Message(body=i))
    rcv.get_n(10)
    u = wait_for(lambda: (lambda x: x if x["values"].get("address.M0subq.deliveriesEgress") == 10
                          else None)(update()), msg="an update with 10")
    # nothing changes: no update (at least a few intervals go by in silence)
    with pytest.raises(socket.timeout):
        m.line(timeout=0.5)
    # the receiver goes away: its address goes, reported as gone
    rcv.close()
    snd.close()
    conn.close()
    u = wait_for(lambda: (lambda x: x if x.get("gone") else None)(update()),
                 msg="an update with gone")
    assert "address.M0subq.deliveriesEgress" in u["gone"]
    # unsubscribe: silence (updates sent before the reply were set aside by reply())
    m.call("stats.unsubscribe", sub=sub)
    m.pending = []
    with pytest.raises(socket.timeout):
        m.line(timeout=0.5)


@pytest.mark.deadline(90)
def test_slow_subscriber_gets_latest_values_not_a_backlog(mrouter, sock_path, client):
    """A subscriber that stops reading while counters change fast: the router holds a
    bounded amount for it, and once it reads again it gets the latest values."""
    conn = client.connect(mrouter.url)
    n_addr = 60
    rcvs = [conn.receiver("slow.%d" % i, settle="accept", credit=200) for i in range(n_addr)]
    snd = conn.sender(None)  # anonymous: one sender for every address
    m = Mgmt(sock_path)
    m.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sub = m.call("stats.subscribe", match="*", interval_ms=10)["sub"]
    sent = 0
    t_end = time.monotonic() + 5.0
    while time.monotonic() < t_end:  # the subscriber does not read meanwhile
        for i in range(n_addr):
            snd.send(Message(address="slow.%d" % i, body=sent))
            sent += 1
        client.run_for(0.01)
    m2 = Mgmt(sock_path)

    def all_counted():
        client.run_for(0.05)
        v = m2.get("address.M0slow.*.deliveriesEgress")
        return sum(v.values()) == sent
    wait_for(all_counted, timeout=30, msg="every message counted")
    assert sum(len(r.drain_queue()) for r in rcvs) == sent
    # read everything that was held for us
    held = 0
    latest = {}
    m.sock.setblocking(False)
    quiet_until = time.monotonic() + 1.0
    while time.monotonic() < quiet_until:
        r, _, _ = select.select([m.sock], [], [], 0.1)
        if not r:
            continue
        chunk = m.sock.recv(1 << 20)
        if not chunk:
            break
        held += len(chunk)
        m.buf += chunk
        if held > 64 * 1024 * 1024:
            break
    m.sock.setblocking(True)
    while b"\n" in m.buf:
        raw, m.buf = m.buf.split(b"\n", 1)
        u = json.loads(raw)
        if u.get("sub") == sub:
            latest.update(u["values"])
            for g in u.get("gone", []):
                latest.pop(g, None)
    # What may be held: the router's per-client output limit (256 KiB), what the kernel
    # buffers for a Unix stream socket (the sender's SO_SNDBUF), and the update in hand.
    # Without the limit the router queues every update of the pause (about 2.5 KiB each
    # every 10 ms here: well above this).
    with open("/proc/sys/net/core/wmem_default") as f:
        kernel = int(f.read())
    assert held < 256 * 1024 + 2 * kernel + 128 * 1024, held
    # after a fresh interval, what the subscriber knows is what the router says now
    time.sleep(0.2)
    while True:
        try:
            u = m.line(timeout=0.3)
        except socket.timeout:
            break
        if u.get("sub") == sub:
            latest.update(u["values"])
    now = m.get("address.M0slow.*.deliveriesEgress")
    assert now and all(latest.get(k) == v for k, v in now.items()), \
        [(k, latest.get(k), v) for k, v in now.items() if latest.get(k) != v][:5]
    assert sum(now.values()) == sent


# ---- the client cap ----

def test_client_cap(make_router, sock_path):
    make_router(extra=[["management", {"socket": str(sock_path), "maxClients": 2}]])
    a = Mgmt(sock_path)
    b = Mgmt(sock_path)
    c = Mgmt(sock_path, hello=False)
    e = c.line()
    assert e["error"]["code"] == 503 and "maxClients" in e["error"]["message"], e
    assert c.line() is None  # then closed
    c.close()
    assert a.get("router.workerThreads")  # the first two are served
    assert b.get("router.workerThreads")
    b.close()

    def third_served():
        try:
            x = Mgmt(sock_path, hello=False)
            first = x.line()
            x.close()
            return "hello" in first
        except (OSError, AttributeError):
            return False
    wait_for(third_served, msg="a client slot freed by a disconnect")
    a.close()
    # junctionctl reports the refusal in one line (once two clients hold the slots: the
    # router may not have seen the disconnects above yet)
    keep = []
    while len(keep) < 2:
        k = Mgmt(sock_path)
        if "hello" in k.hello:
            keep.append(k)
        else:
            k.close()
            time.sleep(0.05)
    p = junctionctl("-s", sock_path, "stats")
    assert p.returncode == 1
    assert "too many management clients" in p.stderr and p.stderr.count("\n") == 1, p.stderr
    for k in keep:
        k.close()


# ---- entity.query against live links and connections ----

def test_entity_query_matches_live_links_and_connections(mrouter, sock_path, client):
    c1 = client.connect(mrouter.url)
    c2 = client.connect(mrouter.url)
    rcv = c1.receiver("eq.a", settle="accept", credit=5)
    snd = c2.sender("eq.a")
    anon = c2.sender(None)
    dlvs = [snd.send(Message(body=i)) for i in range(3)]
    rcv.get_n(3)
    assert snd.wait_outcomes(dlvs) == [Delivery.ACCEPTED] * 3
    m = Mgmt(sock_path)
    conns = wait_for(lambda: (lambda rows: rows if len(rows) == 2 else None)(
        m.query("connection")), msg="two connection rows")
    containers = {row["container"] for row in conns}
    assert containers == {client.container.container_id}
    for row in conns:
        assert row["dir"] == "in" and row["role"] == "normal" and row["opened"] is True
        host, port = row["host"].rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        assert row["uptimeSeconds"] is not None and row["uptimeSeconds"] >= 0
    ids = {row["identity"] for row in conns}

    links = wait_for(lambda: (lambda rows: rows if len(rows) == 3 else None)(m.query("link")),
                     msg="three link rows")
    by_dir = {}
    for row in links:
        assert row["connectionId"] in ids
        assert row["linkType"] == "endpoint"
        by_dir.setdefault(row["linkDir"], []).append(row)
    assert len(by_dir["out"]) == 1 and len(by_dir["in"]) == 2
    out = by_dir["out"][0]
    assert out["owningAddr"] == "M0eq.a"
    assert out["deliveryCount"] == 3 and out["acceptedCount"] == 3
    ins = sorted(by_dir["in"], key=lambda r: r["owningAddr"] or "")
    assert ins[0]["owningAddr"] is None  # the anonymous sender
    assert ins[1]["owningAddr"] == "M0eq.a" and ins[1]["deliveryCount"] == 3
    assert ins[0]["connectionId"] == ins[1]["connectionId"] != out["connectionId"]

    addrs = {row["key"]: row for row in m.query("router.address")}
    assert addrs["M0eq.a"]["subscriberCount"] == 1
    assert addrs["M0eq.a"]["deliveriesEgress"] == 3
    assert addrs["M0eq.a"]["distribution"] == "balanced"

    (r,) = m.query("router")
    assert r["id"] == "JTest" and r["mode"] == "standalone"
    assert r["connectionCount"] == 2 and r["linkCount"] == 3
    assert r["workerThreads"] == 2
    # qdrouterd's paging and column choice
    res = m.call("entity.query", type="org.apache.qpid.dispatch.router.link",
                 attributeNames=["identity", "linkDir"], offset=1, count=1)
    assert res["attributeNames"] == ["identity", "linkDir"] and len(res["results"]) == 1

    # a closed link disappears from the rows
    snd.close()
    wait_for(lambda: len(m.query("link")) == 2, msg="two links once the sender closed")


# ---- junctionctl ----

def test_junctionctl(mrouter, sock_path, client):
    conn, snd, rcv = send_accepted(client, mrouter.url, "ctl.q", 7)
    m = Mgmt(sock_path)
    wait_for(lambda: m.get("address.M0ctl.q.deliveriesEgress").get(
        "address.M0ctl.q.deliveriesEgress") == 7, msg="7 deliveries counted")

    p = junctionctl("-s", sock_path, "stats", "address.*.deliveriesEgress")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split() == ["stat", "value"] and set(lines[1]) == {"="}
    row = [ln for ln in lines if ln.startswith("address.M0ctl.q.deliveriesEgress")]
    assert row and row[0].split()[-1] == "7"
    # aligned: the value column ends at the same place on every line
    assert len({len(ln) for ln in lines[2:]}) == 1

    p = junctionctl("-s", sock_path, "--json", "stats", "router.*")
    assert p.returncode == 0, p.stderr
    vals = json.loads(p.stdout)
    assert vals["router.workerThreads"] == 2 and vals["router.deliveriesIngress"] >= 7

    p = junctionctl("stats", "router.w*", "--json", "-s", sock_path)  # options after it
    assert p.returncode == 0 and json.loads(p.stdout) == {"router.workerThreads": 2}, p.stderr

    p = junctionctl("-s", sock_path, "stats")  # everything
    assert p.returncode == 0 and "router.uptimeSeconds" in p.stdout

    p = junctionctl("-s", sock_path, "list", "router.*")
    assert p.returncode == 0 and "counter" in p.stdout and "gauge" in p.stdout

    p = junctionctl("-s", sock_path, "query", "links")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].split()[:4] == ["type", "dir", "conn", "id"]
    body = [ln.split() for ln in lines[2:]]
    assert len(body) == 2
    assert any(r[1] == "out" and "ctl.q" in r and r[r.index("ctl.q") + 1] == "0" for r in body), \
        p.stdout  # class mobile, addr ctl.q, phase 0

    p = junctionctl("-s", sock_path, "--json", "query", "links")
    rows = json.loads(p.stdout)
    assert {r["linkDir"] for r in rows} == {"in", "out"}
    assert all(r["owningAddr"] == "M0ctl.q" for r in rows)

    p = junctionctl("-s", sock_path, "query", "connections")
    assert p.returncode == 0 and client.container.container_id in p.stdout
    p = junctionctl("-s", sock_path, "--json", "query", "connections")
    assert [r["container"] for r in json.loads(p.stdout)] == [client.container.container_id]

    p = junctionctl("-s", sock_path, "query", "addresses")
    assert p.returncode == 0 and "ctl.q" in p.stdout and "balanced" in p.stdout
    p = junctionctl("-s", sock_path, "query", "router")
    assert p.returncode == 0
    assert any(ln.split() == ["id", "JTest"] for ln in p.stdout.splitlines())
    p = junctionctl("-s", sock_path, "--json", "query", "router")
    assert json.loads(p.stdout)["workerThreads"] == 2

    # watch: redrawn every interval; --json: one line per update
    p = junctionctl("-s", sock_path, "-n", "3", "-i", "100", "watch", "router.*Count")
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("router.linkCount") == 3
    p = junctionctl("-s", sock_path, "--json", "-n", "3", "-i", "100", "watch",
                    "address.M0ctl.q.*")
    assert p.returncode == 0, p.stderr
    first = json.loads(p.stdout.splitlines()[0])
    assert first["values"]["address.M0ctl.q.deliveriesEgress"] == 7

    # errors: one line, exit 1 (runtime) or 2 (usage)
    p = junctionctl("-s", sock_path.parent / "nope.sock", "stats")
    assert p.returncode == 1
    assert p.stderr.strip() == ("junctionctl: cannot connect to %s: No such file or directory "
                                "\u2014 is junctiond running with a management entity?"
                                % (sock_path.parent / "nope.sock"))
    refusing = sock_path.parent / "refusing.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(refusing))  # bound, not listening
    p = junctionctl("-s", refusing, "stats")
    s.close()
    assert p.returncode == 1 and "Connection refused" in p.stderr
    assert p.stderr.count("\n") == 1
    p = junctionctl("-s", sock_path, "stats", "[")
    assert p.returncode == 0  # a glob that matches nothing is an empty table
    p = junctionctl("-s", sock_path, "query", "widgets")
    assert p.returncode == 2 and "unknown type" in p.stderr
    p = junctionctl("-s", sock_path, "frobnicate")
    assert p.returncode == 2
    p = junctionctl()
    assert p.returncode == 2
    p = junctionctl("-h")
    assert p.returncode == 0 and "watch GLOB" in p.stdout
    p = junctionctl("-s", sock_path, "watch")
    assert p.returncode == 2
