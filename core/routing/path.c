/* core/routing/path.c: qdrouterd 1.19's shortest-path computation (rules: path.h).
 *
 * Threads: pure; called on the core thread by the routing engine.  Allocates its result and
 * scratch arrays with base_malloc (proportional to nodes and edges) and frees the scratch.
 */
#include "core/routing/path.h"

#include "core/base/base.h"
#include "core/base/map.h"

#include <string.h>

/* The graph: compressed adjacency (edges of node i are [off[i], off[i + 1])). */
typedef struct graph {
    uint32_t  n;    /* nodes */
    uint32_t *off;  /* n + 1 offsets into to/cost */
    uint32_t *to;   /* edge targets */
    int64_t  *cost; /* edge costs */
} graph_t;

/* One tree (Dijkstra from a root). */
typedef struct tree {
    int64_t  *cost;     /* path cost, valid when reached[i] */
    int32_t  *prev;     /* predecessor, -1 for the root and the unreachable */
    uint32_t *hops;     /* hops along prev */
    bool     *reached;  /* has a finite cost */
    bool     *resolved; /* taken out of the unresolved set */
} tree_t;

/* Python's string order: code points, which for UTF-8 is byte order. */
static int id_cmp(codec_bytes_t a, codec_bytes_t b)
{
    size_t n = a.len < b.len ? a.len : b.len;
    int    c = n ? memcmp(a.ptr, b.ptr, n) : 0;
    if (c)
        return c;
    return a.len < b.len ? -1 : a.len > b.len;
}

static int64_t add_sat(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r))
        return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

static void tree_compute(const graph_t *g, const codec_bytes_t *ids, uint32_t root, tree_t *t)
{
    for (uint32_t i = 0; i < g->n; i++) {
        t->reached[i] = false;
        t->resolved[i] = false;
        t->prev[i] = -1;
        t->hops[i] = 0;
        t->cost[i] = 0;
    }
    t->reached[root] = true;
    for (;;) {
        int64_t u = -1;
        for (uint32_t i = 0; i < g->n; i++) {
            if (t->resolved[i] || !t->reached[i])
                continue;
            if (u < 0 || t->cost[i] < t->cost[u] ||
                (t->cost[i] == t->cost[u] && id_cmp(ids[i], ids[u]) < 0))
                u = i;
        }
        if (u < 0)
            break;
        t->resolved[u] = true;
        for (uint32_t e = g->off[u]; e < g->off[u + 1]; e++) {
            uint32_t v = g->to[e];
            if (t->resolved[v])
                continue;
            int64_t alt = add_sat(t->cost[u], g->cost[e]);
            if (!t->reached[v] || alt < t->cost[v]) {
                t->reached[v] = true;
                t->cost[v] = alt;
                t->prev[v] = (int32_t)u;
                t->hops[v] = t->hops[u] + 1;
            }
        }
    }
}

void core_rt_paths_fini(core_rt_paths_t *p)
{
    BASE_FREE(p->ids);
    BASE_FREE(p->next_hop);
    BASE_FREE(p->cost);
    BASE_FREE(p->hops);
    BASE_FREE(p->vo);
    BASE_FREE(p->upstream);
    memset(p, 0, sizeof(*p));
}

int32_t core_rt_paths_find(const core_rt_paths_t *p, const uint8_t *id, size_t len)
{
    for (uint32_t i = 0; i < p->n; i++)
        if (p->ids[i].len == len && (len == 0 || memcmp(p->ids[i].ptr, id, len) == 0))
            return (int32_t)i;
    return -1;
}

/* Index of id in m (stored as index + 1), or -1. */
static int64_t map_index(const base_map_t *m, codec_bytes_t id)
{
    void *v = base_map_get(m, (const char *)id.ptr, id.len);
    return v ? (int64_t)(uintptr_t)v - 1 : -1;
}

int core_rt_paths_compute(const core_rt_ls_in_t *coll, uint32_t n, core_rt_paths_t *out)
{
    memset(out, 0, sizeof(*out));
    if (n == 0)
        return -1;
    base_map_t m;
    base_map_init(&m);
    size_t n_edges = 0;
    for (uint32_t i = 0; i < n; i++)
        n_edges += coll[i].n_peers;
    /* nodes: at most the collection plus one stub per edge */
    size_t         cap = n + n_edges;
    codec_bytes_t *ids = base_calloc(cap, sizeof(*ids));
    uint32_t      *stub_ref = base_calloc(cap, sizeof(*stub_ref));
    uint32_t       nodes = 0;
    int            rc = -1;
    for (uint32_t i = 0; i < n; i++) {
        if (coll[i].id.len == 0 || map_index(&m, coll[i].id) >= 0)
            goto out_free;
        ids[nodes] = coll[i].id;
        base_map_put(&m, (const char *)coll[i].id.ptr, coll[i].id.len,
                     (void *)(uintptr_t)(nodes + 1));
        nodes++;
    }
    /* stubs, in the order the collection first names them */
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = 0; j < coll[i].n_peers; j++) {
            codec_bytes_t p = coll[i].peers[j];
            if (p.len == 0)
                goto out_free;
            for (uint32_t k = 0; k < j; k++)
                if (id_cmp(coll[i].peers[k], p) == 0)
                    goto out_free;
            if (map_index(&m, p) >= 0)
                continue;
            ids[nodes] = p;
            stub_ref[nodes] = i;
            base_map_put(&m, (const char *)p.ptr, p.len, (void *)(uintptr_t)(nodes + 1));
            nodes++;
        }
    }
    graph_t g = {.n = nodes};
    g.off = base_calloc(nodes + 1, sizeof(*g.off));
    g.to = base_calloc(n_edges + nodes + 1, sizeof(*g.to));
    g.cost = base_calloc(n_edges + nodes + 1, sizeof(*g.cost));
    uint32_t e = 0;
    for (uint32_t i = 0; i < nodes; i++) {
        g.off[i] = e;
        if (i < n) {
            for (uint32_t j = 0; j < coll[i].n_peers; j++) {
                g.to[e] = (uint32_t)map_index(&m, coll[i].peers[j]);
                g.cost[e] = coll[i].costs[j];
                e++;
            }
        } else {
            g.to[e] = stub_ref[i];
            g.cost[e] = 1;
            e++;
        }
    }
    g.off[nodes] = e;

    tree_t t;
    t.cost = base_calloc(nodes, sizeof(*t.cost));
    t.prev = base_calloc(nodes, sizeof(*t.prev));
    t.hops = base_calloc(nodes, sizeof(*t.hops));
    t.reached = base_calloc(nodes, sizeof(*t.reached));
    t.resolved = base_calloc(nodes, sizeof(*t.resolved));

    out->n = nodes;
    out->n_coll = n;
    out->ids = ids;
    ids = NULL;
    out->next_hop = base_calloc(nodes, sizeof(*out->next_hop));
    out->cost = base_calloc(nodes, sizeof(*out->cost));
    out->hops = base_calloc(nodes, sizeof(*out->hops));
    out->words = (nodes + 63) / 64;
    out->vo = base_calloc((size_t)nodes * out->words, sizeof(*out->vo));
    out->upstream = base_calloc(nodes, sizeof(*out->upstream));

    /* self's tree: next hops, costs, radius */
    tree_compute(&g, out->ids, 0, &t);
    bool *mine = base_calloc(nodes, sizeof(*mine)); /* reachable from self (self excluded) */
    for (uint32_t i = 0; i < nodes; i++) {
        out->next_hop[i] = -1;
        out->cost[i] = -1;
        out->upstream[i] = -1;
        if (i == 0 || t.prev[i] < 0)
            continue;
        mine[i] = true;
        out->cost[i] = t.cost[i];
        out->hops[i] = t.hops[i];
        if (t.hops[i] > out->radius)
            out->radius = t.hops[i];
        uint32_t x = i;
        while (t.prev[x] != 0)
            x = (uint32_t)t.prev[x];
        out->next_hop[i] = (int32_t)x;
    }
    /* valid origins: self strictly between each reachable origin and the destination */
    for (uint32_t o = 1; o < nodes; o++) {
        if (!mine[o])
            continue;
        tree_compute(&g, out->ids, o, &t);
        out->upstream[o] = t.prev[0];
        for (uint32_t d = 1; d < nodes; d++) {
            if (d == o || t.prev[d] < 0)
                continue;
            for (int32_t x = t.prev[d]; x >= 0 && (uint32_t)x != o; x = t.prev[x]) {
                if (x == 0) {
                    out->vo[(size_t)d * out->words + o / 64] |= (uint64_t)1 << (o % 64);
                    break;
                }
            }
        }
    }
    BASE_FREE(mine);
    BASE_FREE(t.cost);
    BASE_FREE(t.prev);
    BASE_FREE(t.hops);
    BASE_FREE(t.reached);
    BASE_FREE(t.resolved);
    BASE_FREE(g.off);
    BASE_FREE(g.to);
    BASE_FREE(g.cost);
    rc = 0;
out_free:
    BASE_FREE(ids);
    BASE_FREE(stub_ref);
    base_map_fini(&m);
    return rc;
}
