"""qdstat -a on an interior router, as qdrouterd 1.19 shows it.

A router of a mesh lists the routing protocol's own addresses (`qdhello`, `qdrouter` and
`qdrouter.ma`, local and topological, each consumed in process), the address of every other
router it reaches (class `router`: remote 1, closest) and its management node (closest,
consumed in process: inProcess 1, the requests counted as deliveriesToContainer).  The real
`qdstat -a -v` is run against two-router meshes - two qdrouterds (the reference), two
Junctions, and a Junction with a qdrouterd, each side connecting - and the rows are compared
column by column: class, address, phase, distribution, priority, in-proc, local, remote, and
which of the counters (in, out, thru, fallback, to-proc, from-proc) have moved.  `EXPECTED` is
what qdrouterd 1.19 shows; the Junction-only test checks Junction against it without the
peer, the others check qdrouterd against it too.  Then `qdstat -a -r OTHER` (both ways in the
mixed mesh) shows the other router's rows in the same shape, and management requests sent
across the mesh move the origin's `router` row (`in`, `thru`) and the target's local
`$management` row (`to-proc`) by exactly the number of requests, as on qdrouterd.

Rows qdrouterd 1.19 has that Junction has not (QDR_ONLY): `$_management_internal`, the
address of its Python half of the management agent (Junction has one agent), and the
`_$qd.*` addresses of its edge-router modules (no edge routers yet).  Dynamic reply addresses
(`temp.*`) belong to the qdstat run itself.  The tests with qdrouterd skip where
../shared/peer is absent.
"""
import pytest

from meshnet import need_peer
from mgmt_tool import Node
from test_interior import (Qdrouterd, inter_port, junction, mixed_pair, neighbour_of, qdstat,
                           wait_for)

QDR_ONLY = {("local", "$_management_internal"), ("mobile", "_$qd.addr_lookup"),
            ("mobile", "_$qd.edge_addr_tracking"), ("mobile", "_$qd.edge_heartbeat")}
COUNTERS = ["in", "out", "thru", "fallback", "to-proc", "from-proc"]


def moved(*names):
    """The counters that have moved (the others are 0)."""
    return tuple(c for c in COUNTERS if c in names)


# class, addr -> phs, distrib, pri, in-proc, local, remote, counters that moved: a router of a
# two-router mesh, before any request crossed it and with no mobile address (qdrouterd 1.19)
EXPECTED = {
    ("mobile", "$management"): ("0", "closest", "-", "1", "0", "0", moved("in", "to-proc")),
    ("local", "$management"): ("", "closest", "-", "1", "0", "0", moved()),
    ("router", "<other>"): ("", "closest", "-", "0", "0", "1", moved("thru", "from-proc")),
    ("local", "qdhello"): ("", "flood", "-", "1", "1", "0", moved("to-proc", "from-proc")),
    ("local", "qdrouter"): ("", "flood", "-", "1", "0", "0", moved("to-proc")),
    ("topo", "qdrouter"): ("", "flood", "-", "1", "0", "1",
                           moved("thru", "to-proc", "from-proc")),
    ("local", "qdrouter.ma"): ("", "multicast", "-", "1", "0", "0", moved()),
    ("topo", "qdrouter.ma"): ("", "multicast", "-", "1", "0", "1", moved()),
}


# The same router read from its neighbour (qdstat -a -r): the requests of that qdstat came
# to its local $management.  (Its own router row's `in` is left out there: it counts what
# the router itself sent across before.)
EXPECTED_R = dict(EXPECTED)
EXPECTED_R[("local", "$management")] = ("", "closest", "-", "1", "0", "0", moved("to-proc"))


def parse_a(out):
    """The rows of `qdstat -a -v` as dicts by column name (the columns are cut where the
    header's names start: the phase column is empty for most rows)."""
    lines = out.splitlines()
    i = next(k for k, x in enumerate(lines) if x.strip().startswith("class"))
    head = lines[i]
    names = head.split()
    starts = []
    pos = 0
    for n in names:
        pos = head.index(n, pos)
        starts.append(pos)
        pos += len(n)
    rows = []
    for line in lines[i + 2:]:
        if not line.strip():
            continue
        cells = [line[s:(starts[k + 1] if k + 1 < len(starts) else None)].strip()
                 for k, s in enumerate(starts)]
        rows.append(dict(zip(names, cells)))
    return rows


def rows_a(url, *args):
    return parse_a(qdstat(url, "-a", "-v", *args))


def shape(rows, other, remote=False):
    """class, addr -> the compared columns (the other router's id written `<other>`);
    `remote`: read with -r (its router row's `in` is left out)."""
    out = {}
    for r in rows:
        key = (r["class"], r["addr"])
        if key in QDR_ONLY or r["addr"].startswith("temp."):
            continue
        if r["class"] == "router":
            assert r["addr"] == other, rows
            key = ("router", "<other>")
        out[key] = (r["phs"], r["distrib"], r["pri"], r["in-proc"], r["local"], r["remote"],
                    tuple(c for c in COUNTERS if r[c] != "0" and
                          not (remote and c == "in" and r["class"] == "router")))
    return out


def settled_shape(url, other, *args):
    """The shape once it is EXPECTED (the mesh converged and the first link-state
    exchange happened), or the last one after the deadline."""
    last = {}
    want = EXPECTED_R if args else EXPECTED

    def ok():
        nonlocal last
        last = shape(rows_a(url, *args), other, remote=bool(args))
        return last == want

    try:
        wait_for("qdstat -a of %s (%s) as qdrouterd's" % (url, " ".join(args) or "own"), ok,
                 timeout=40)
    except AssertionError:
        pass
    return last


def diff(got, want=EXPECTED):
    keys = sorted(set(got) | set(want))
    return "\n".join("%-28s got %s\n%-28s want %s" % (k, got.get(k), "", want.get(k))
                     for k in keys if got.get(k) != want.get(k))


def row(url, cls, addr):
    return next(r for r in rows_a(url) if (r["class"], r["addr"]) == (cls, addr))


def requests_across(origin, target_id, target_url, n=3):
    """n management queries from `origin` to the router `target_id` of its mesh: how much
    the origin's router row moved (in, thru) and the target's local $management row
    (to-proc)."""
    r0 = row(origin, "router", target_id)
    m0 = row(target_url, "local", "$management")
    node = Node(origin, router=target_id)
    try:
        for _ in range(n):
            assert [x["id"] for x in node.query_dicts("org.apache.qpid.dispatch.router",
                                                      ["id"])] == [target_id]
    finally:
        node.close()
    r1 = row(origin, "router", target_id)
    m1 = row(target_url, "local", "$management")
    return (int(r1["in"]) - int(r0["in"]), int(r1["thru"]) - int(r0["thru"]),
            int(m1["to-proc"]) - int(m0["to-proc"]))


def qdrouterd_pair(tmp_path):
    a = Qdrouterd(tmp_path, "QA")
    b = Qdrouterd(tmp_path, "QB", connect_port=a.ir_port)
    try:
        wait_for("QA sees QB", lambda: neighbour_of(a.url, "QA", "QB"))
        wait_for("QB sees QA", lambda: neighbour_of(b.url, "QB", "QA"))
    except BaseException:
        a.stop()
        b.stop()
        raise
    return a, b


def test_qdrouterd_shows_expected(tmp_path):
    """The reference: two qdrouterd 1.19 routers show EXPECTED, and a request across moves
    the rows by one each."""
    need_peer()
    a, b = qdrouterd_pair(tmp_path)
    try:
        for url, other in ((a.url, "QB"), (b.url, "QA")):
            got = settled_shape(url, other)
            assert got == EXPECTED, diff(got)
        got = settled_shape(a.url, "QA", "-r", "QB")
        assert got == EXPECTED_R, diff(got, EXPECTED_R)
        ins, thru, to_proc = requests_across(a.url, "QB", b.url)
        assert (ins, to_proc) == (3, 3) and thru >= 3, (ins, thru, to_proc)
    finally:
        a.stop()
        b.stop()


def test_junctions_show_what_qdrouterd_shows(make_router):
    a = junction(make_router, "A", inter_listen=True)
    b = junction(make_router, "B", connect=[inter_port(a)])
    wait_for("A sees B", lambda: neighbour_of(a.url, "A", "B"))
    wait_for("B sees A", lambda: neighbour_of(b.url, "B", "A"))
    for url, other in ((a.url, "B"), (b.url, "A")):
        got = settled_shape(url, other)
        assert got == EXPECTED, diff(got)
    # qdstat -r: B's rows read through A
    got = settled_shape(a.url, "A", "-r", "B")
    assert got == EXPECTED_R, diff(got, EXPECTED_R)
    # management requests across the mesh, each way
    ins, thru, to_proc = requests_across(a.url, "B", b.url)
    assert (ins, to_proc) == (3, 3) and thru >= 3, (ins, thru, to_proc)
    ins, thru, to_proc = requests_across(b.url, "A", a.url)
    assert (ins, to_proc) == (3, 3) and thru >= 3, (ins, thru, to_proc)


@pytest.mark.parametrize("junction_connects", [True, False],
                         ids=["junction-connector", "qdrouterd-connector"])
def test_mixed_pair_shows_the_same_rows(make_router, tmp_path, junction_connects):
    """A Junction and a qdrouterd joined: each shows EXPECTED, read directly and through the
    other (qdstat -r both ways), and requests across move each other's rows alike."""
    need_peer()
    j, q = mixed_pair(make_router, tmp_path, junction_connects)
    try:
        for url, other, args in ((j.url, "Q", ()), (q.url, "J", ()),
                                 (j.url, "J", ("-r", "Q")), (q.url, "Q", ("-r", "J"))):
            got = settled_shape(url, other, *args)
            want = EXPECTED_R if args else EXPECTED
            assert got == want, "%s %s:\n%s" % (url, " ".join(args), diff(got, want))
        ins, thru, to_proc = requests_across(j.url, "Q", q.url)
        assert (ins, to_proc) == (3, 3) and thru >= 3, (ins, thru, to_proc)
        ins, thru, to_proc = requests_across(q.url, "J", j.url)
        assert (ins, to_proc) == (3, 3) and thru >= 3, (ins, thru, to_proc)
    finally:
        q.stop()
