"""An edge connection's links in `qdstat -l` (router.link), on the edge and on the interior,
as qdrouterd 1.19 shows them (issue 17): the uplink, the downlink (type edge-downlink on the
interior), the address-tracking receiver and the heartbeat sender (which on the interior are
owned by the mobile addresses `_$qd.edge_addr_tracking` and `_$qd.edge_heartbeat`), and the
proxy links of an address with a consumer on the edge and of one with a producer there.

The real qdstat reads each router; the rows of the edge connection are compared column by
column (type, dir, class, addr, phs, cap, pri, and the credit where it is fixed) with
EDGE_ROWS and INTERIOR_ROWS, which are qdrouterd's: the qdrouterd edge on the qdrouterd
interior is held to them too.  Every pairing; all need ../shared/peer (its qdstat), and skip
without it.  Rows qdrouterd has and Junction has not are left out: a qdrouterd edge's
`$management` client and address lookup (link routes) links.
"""
import re
import subprocess

import pytest

from clients import Client
from conftest import free_port
from meshnet import PEER_BIN, need_peer, wait_for
from mgmt_tool import Node
from test_edge_phases import routers  # noqa: F401

# (type, dir, class, addr, phs, cap, pri, cred); cred None: whatever it is at the moment
EDGE_ROWS = [
    ("endpoint", "out", "local", "_edge", "", "250", "4", None),       # the uplink
    ("endpoint", "in", "", "", "", "250", "4", "250"),                 # the downlink
    ("endpoint", "in", "", "", "", "250", "4", "32"),                  # address tracking
    ("endpoint", "out", "", "", "", "250", "4", "2"),                  # the heartbeat
    ("endpoint", "in", "mobile", "cons.x", "0", "250", "4", None),     # proxy receiver
    ("endpoint", "out", "mobile", "prod.y", "0", "250", "4", None),    # proxy sender (bound)
]
INTERIOR_ROWS = [
    ("endpoint", "in", "", "", "", "250", "4", None),                  # the edge's uplink
    ("edge-downlink", "out", "edge", "E", "", "250", "4", None),
    ("endpoint", "out", "mobile", "_$qd.edge_addr_tracking", "0", "250", "4", "32"),
    ("endpoint", "in", "mobile", "_$qd.edge_heartbeat", "0", "250", "4", "2"),
    ("endpoint", "out", "mobile", "cons.x", "0", "250", "4", None),
    ("endpoint", "in", "mobile", "prod.y", "0", "250", "4", None),
]
COLUMNS = ("type", "dir", "class", "addr", "phs", "cap", "pri", "cred")


def qdstat_links(url):
    """`qdstat -l` as a list of {column: cell}, cut by the header's column positions (cells
    may be empty)."""
    p = subprocess.run([str(PEER_BIN / "qdstat"), "-b", url.replace("amqp://", ""), "-l"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    for i, line in enumerate(lines):
        if line.strip().startswith("type") and " dir " in line:
            names = [(m.start(), m.group(0)) for m in re.finditer(r"\S+( id\b)?", line)]
            out = []
            for row in lines[i + 2:]:
                if not row.strip():
                    continue
                cells = {}
                for k, (start, name) in enumerate(names):
                    end = names[k + 1][0] if k + 1 < len(names) else len(row)
                    cells[name] = row[start:end].strip()
                out.append(cells)
            return out
    raise AssertionError("no link table in qdstat -l: %s" % p.stdout)


def edge_conn_id(url):
    n = Node(url)
    try:
        ids = [str(r["identity"]) for r in n.query_dicts("org.apache.qpid.dispatch.connection")
               if r.get("role") == "edge"]
    finally:
        n.close()
    return ids[0] if len(ids) == 1 else None


def missing(url, want):
    """The rows of `want` that the edge connection's rows at url lack (a multiset
    comparison), or None when the connection is not up."""
    cid = edge_conn_id(url)
    if cid is None:
        return None
    have = [tuple(r.get(c, "") for c in COLUMNS) for r in qdstat_links(url)
            if r.get("conn id") == cid]
    lack = []
    for w in want:
        for h in have:
            if all(a is None or a == b for a, b in zip(w, h)):
                have.remove(h)
                break
        else:
            lack.append(w)
    return lack


@pytest.mark.deadline(180)
@pytest.mark.parametrize("edge_kind,interior_kind", [("Q", "Q"), ("J", "Q"), ("Q", "J"),
                                                     ("J", "J")])
def test_edge_links_in_qdstat(routers, edge_kind, interior_kind):  # noqa: F811
    need_peer()  # qdstat
    i_port, i_edge, e_port = free_port(), free_port(), free_port()
    i_url = routers.start(interior_kind, "I", "interior", [(i_port, "normal"), (i_edge, "edge")])
    e_url = routers.start(edge_kind, "E", "edge", [(e_port, "normal")],
                          connectors=[(i_edge, "edge")])
    c = Client()
    try:
        ce = c.connect(e_url)
        ci = c.connect(i_url)
        ce.receiver("cons.x", credit=10)
        ci.receiver("prod.y", credit=10)  # so that the edge's proxy sender is bound
        ce.sender("prod.y")
        result = {}

        def both_match():
            c.run_for(0.2)
            result["edge"] = missing(e_url, EDGE_ROWS)
            result["interior"] = missing(i_url, INTERIOR_ROWS)
            return result["edge"] == [] and result["interior"] == []
        try:
            wait_for("the edge connection's links in qdstat -l on both sides", both_match,
                     timeout=40, every=0.5)
        except AssertionError:
            raise AssertionError("rows missing (%s): %r" % (COLUMNS, result))
    finally:
        c.close()
