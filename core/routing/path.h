/* core/routing/path.h: shortest paths over the routers' link states, exactly as qdrouterd
 * 1.19 computes them (python/qpid_dispatch_internal/router/path.py, PathEngine), so that
 * Junction and qdrouterd routers of one mesh agree on next hops and valid origins.
 *
 * Facts of the algorithm (interrouter reference, 2.7):
 *  - Input: the collection {router id -> its advertised peers {id: cost}}, in a fixed order:
 *    self first, then the other routers in the order they were learned.  Edges are directed,
 *    with the advertising router's cost; nobody checks that the peer advertises it back.
 *  - Stub nodes: a peer id that is in nobody's collection entry gets a synthesised link state
 *    {first referrer (in collection order): cost 1}, so that it is reachable and can be asked
 *    for its own.  A collection entry with no peers is a leaf.
 *  - Dijkstra from a root: repeatedly resolve the unresolved node with the smallest (cost, id),
 *    ids compared byte by byte (code point order); stop when the smallest is unreachable.
 *    A node's cost and predecessor change only for a strictly smaller cost, so among
 *    equal-cost predecessors the one resolved first wins.  Hops follow the predecessor.
 *  - From self's tree: next hop of R = the node after self on the path to R (R itself for a
 *    neighbour); cost of R = its tree cost; radius = the largest hop count (0 when alone).
 *  - Upstream of a reachable origin O: self's predecessor in O's own tree (the neighbour
 *    O's copies for every router reach self through; Junction's multicast check, not
 *    path.py's).
 *  - Valid origins of a reachable D: every reachable O != self whose own tree (same algorithm,
 *    same graph) has self strictly between O and D.  (The forwarder adds self to every set.)
 *  - Ids must be non-empty (path.py would drop a node whose predecessor is the empty id).
 *
 * Cost: one Dijkstra is O(n^2) over n nodes (collection + stubs); valid origins take one per
 * reachable router, O(n^3) in all: about 2 million steps for qdrouterd's 128 routers.
 * Path costs add with saturation at INT64_MAX (Python's are unbounded; no real cost is near).
 *
 * Threads: pure functions; the routing engine calls them on the core thread.
 */
#ifndef JUNCTION_CORE_ROUTING_PATH_H
#define JUNCTION_CORE_ROUTING_PATH_H

#include "codec/codec.h"

#include <stdbool.h>
#include <stdint.h>

/* One router's advertised link state, as the computation reads it (views, not copied). */
typedef struct core_rt_ls_in {
    codec_bytes_t        id;      /* router id */
    const codec_bytes_t *peers;   /* its peers' ids */
    const int64_t       *costs;   /* parallel to peers */
    uint32_t             n_peers; /* entries of peers */
} core_rt_ls_in_t;

/* The result.  Nodes are the collection's, in its order, then the stubs, in the order the
 * collection first refers to them. */
typedef struct core_rt_paths {
    uint32_t       n;        /* nodes */
    uint32_t       n_coll;   /* the first n_coll are the collection's; the rest are stubs */
    codec_bytes_t *ids;      /* views into the input */
    int32_t       *next_hop; /* index of the neighbour self sends through to reach node i
                                (i itself for a neighbour); -1 for self and the unreachable */
    int64_t  *cost;          /* cost from self; -1 for self and the unreachable */
    uint32_t *hops;          /* hops from self (0 for self and the unreachable) */
    uint64_t *vo;            /* valid origins: bit o of vo[d * words ...] set when origin o
                                is valid for destination d */
    uint32_t words;          /* 64-bit words per destination in vo */
    int32_t *upstream;       /* for each origin o reachable from self: self's predecessor in
                                o's own tree (the neighbour a copy o sends to every router
                                reaches self through); -1 for self and the unreachable */
    uint32_t radius;         /* largest hop count of a reachable node */
} core_rt_paths_t;

/* Compute over coll[0, n) (coll[0] is self).  Fills *out (release with core_rt_paths_fini()).
 * Returns 0, or -1 when an id is empty or appears twice in the collection, or a router lists
 * a peer twice (*out is then empty). */
int core_rt_paths_compute(const core_rt_ls_in_t *coll, uint32_t n, core_rt_paths_t *out);

void core_rt_paths_fini(core_rt_paths_t *p);

/* Node index of id, or -1. */
int32_t core_rt_paths_find(const core_rt_paths_t *p, const uint8_t *id, size_t len);

/* Whether origin o is a valid origin for destination d (both node indices). */
static inline bool core_rt_paths_is_valid_origin(const core_rt_paths_t *p, uint32_t d, uint32_t o)
{
    return (p->vo[(size_t)d * p->words + o / 64] >> (o % 64)) & 1;
}

#endif
