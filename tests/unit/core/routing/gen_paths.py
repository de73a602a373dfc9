#!/usr/bin/env python3
"""Write path_cases.h: topologies and what qdrouterd 1.19's own path engine computes for them.

Usage: gen_paths.py PATH_PY > path_cases.h

PATH_PY is qdrouterd 1.19's python/qpid_dispatch_internal/router/path.py (from the 1.19.0 tag
of the qpid-dispatch repository, e.g. `git show 1.19.0:python/qpid_dispatch_internal/router/
path.py > /tmp/path.py`).  For every topology below and every router of it as "self", the
collection is {self: its peers} followed by the other routers in the order listed (qdrouterd's
order: self, then routers as they were learned), PathEngine.calculate_routes() runs on it,
and the result is written as one canonical line that path_test.c rebuilds from
core_rt_paths_compute() and compares:

    radius=R; B:nh=B,cost=1,vo=[C,D]; C:nh=B,cost=2,vo=[]; ...

(reachable routers sorted by id, valid origins sorted by id).  Routers listed with peers
None are left out of the collection: they only appear as peers (stub nodes).
The header is committed; rerun this script to check or regenerate it.
"""
import importlib.util
import sys

# name -> list of (router id, {peer: cost} or None for "not in the collection")
TOPOLOGIES = [
    ("line", [("A", {"B": 1}), ("B", {"A": 1, "C": 1}), ("C", {"B": 1, "D": 1}),
              ("D", {"C": 1})]),
    ("ring5", [("A", {"B": 1, "E": 1}), ("B", {"A": 1, "C": 1}), ("C", {"B": 1, "D": 1}),
               ("D", {"C": 1, "E": 1}), ("E", {"D": 1, "A": 1})]),
    ("ring4_ties", [("A", {"B": 1, "D": 1}), ("B", {"A": 1, "C": 1}), ("C", {"B": 1, "D": 1}),
                    ("D", {"C": 1, "A": 1})]),
    ("triangle_equal", [("A", {"B": 1, "C": 1}), ("B", {"A": 1, "C": 1}),
                        ("C", {"A": 1, "B": 1})]),
    ("triangle_costly_side", [("A", {"B": 1, "C": 1}), ("B", {"A": 1, "C": 3}),
                              ("C", {"A": 1, "B": 3})]),
    ("triangle_tie_via_cost", [("A", {"B": 1, "C": 2}), ("B", {"A": 1, "C": 1}),
                               ("C", {"A": 2, "B": 1})]),
    ("star", [("H", {"L1": 1, "L2": 1, "L3": 1, "L4": 1}), ("L1", {"H": 1}), ("L2", {"H": 1}),
              ("L3", {"H": 1}), ("L4", {"H": 1})]),
    ("disconnected", [("A", {"B": 1}), ("B", {"A": 1}), ("C", {"D": 1}), ("D", {"C": 1})]),
    ("square_ids_unsorted", [("r3", {"r1": 1, "r2": 1}), ("r1", {"r3": 1, "r0": 1}),
                             ("r2", {"r3": 1, "r0": 1}), ("r0", {"r1": 1, "r2": 1})]),
    ("asymmetric", [("A", {"B": 1, "C": 10}), ("B", {"A": 5, "C": 1}), ("C", {"A": 1, "B": 1})]),
    ("stub_and_empty", [("A", {"B": 1, "X": 2}), ("B", {"A": 1, "Y": 1}), ("E", {}),
                        ("X", None), ("Y", None)]),
    ("one_way", [("A", {"B": 1}), ("B", {}), ("C", {"A": 1})]),
    ("mesh_costs", [("QDR.A", {"QDR.B": 2, "J.C": 5, "QDR.D": 1}),
                    ("QDR.B", {"QDR.A": 2, "J.C": 1, "J.E": 4}),
                    ("J.C", {"QDR.A": 5, "QDR.B": 1, "QDR.D": 3, "J.E": 1}),
                    ("QDR.D", {"QDR.A": 1, "J.C": 3}),
                    ("J.E", {"QDR.B": 4, "J.C": 1})]),
    ("alone", [("A", {})]),
]


def load(path_py):
    spec = importlib.util.spec_from_file_location("qd_path", path_py)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class LS:
    def __init__(self, peers):
        self.peers = peers


class Container:
    def __init__(self, _id):
        self.id = _id


def canonical(mod, routers, self_id):
    collection = {self_id: LS(dict(dict(routers)[self_id]))}
    for rid, peers in routers:
        if rid != self_id and peers is not None:
            collection[rid] = LS(dict(peers))
    next_hops, costs, valid_origins, radius = mod.PathEngine(Container(self_id)).calculate_routes(collection)
    parts = ["radius=%d" % radius]
    for node in sorted(next_hops):
        parts.append("%s:nh=%s,cost=%d,vo=[%s]" % (node, next_hops[node], costs[node],
                                                  ",".join(sorted(valid_origins[node]))))
    return "; ".join(parts)


def c_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def main():
    mod = load(sys.argv[1])
    print("/* tests/unit/core/routing/path_cases.h: written by gen_paths.py from qdrouterd 1.19's")
    print(" * path.py; do not edit.  Each case: topology (id:peer=cost,...|... with '!' marking a")
    print(" * router that is only a peer), self, and path.py's result in canonical form. */")
    print("static const struct path_case {")
    print("    const char *name;     /* topology */")
    print("    const char *topology; /* routers in collection order after self */")
    print("    const char *self;     /* the router computing */")
    print("    const char *expect;   /* path.py's result */")
    print("} path_cases[] = {")
    for name, routers in TOPOLOGIES:
        topo = "|".join(
            "%s!" % rid if peers is None else
            "%s:%s" % (rid, ",".join("%s=%d" % (p, c) for p, c in peers.items()))
            for rid, peers in routers)
        for rid, peers in routers:
            if peers is None:
                continue
            print("    {%s, %s, %s,\n     %s}," % (c_str(name), c_str(topo), c_str(rid),
                                                  c_str(canonical(mod, routers, rid))))
    print("};")


if __name__ == "__main__":
    main()
