/* core/interior.c: the forwarder's data plane across routers (interior mode): the per-router
 * route table, remote destinations of addresses, the inter-router links of each connection,
 * and the forwarding rules of core/interior.h (qdrouterd 1.19's router_core/forwarder.c and
 * router_node.c's handling of the router annotations).
 *
 * Thread suffixes used here: _CT = core thread only (everything but core_ir_free(), which
 * core_free() calls on the main thread once the core thread is gone).
 *
 * Owns: core->ir (routes, router ids, connection table) and each address's ir_out counts.
 * Never: parses a message beyond the router-annotation views the worker handed over with
 * the delivery (as `to`), or frees message memory.
 */
#include "core/interior.h"

#include "codec/codec.h"
#include "core/base/log.h"
#include "core/core_int.h"
#include "core/linkroute_mesh.h"

#include <errno.h>
#include <string.h>

#define LOG(lvl, ...) base_log(BASE_LOG_MOD_ROUTER_CORE, BASE_LOG_##lvl, __VA_ARGS__)

/* One remote router as the forwarder knows it. */
typedef struct ir_router {
    char    *id;        /* router id (heap), NULL when the mask bit is free */
    size_t   idlen;     /* its length */
    int32_t  conn_bit;  /* connection reaching it, -1 when unreachable */
    bool     neighbour; /* it has a connection of its own, link_bit */
    int32_t  link_bit;  /* that connection (trace exclusion) */
    int32_t  up_bit;    /* connection its multicast copies come in on, -1 when unknown */
    int64_t  cost;      /* path cost */
    uint64_t vo[2];     /* valid origins */
} ir_router_t;

/* One inter-router connection. */
typedef struct ir_conn {
    uint64_t     conn_id;                  /* 0 when the mask bit is free */
    core_link_t *data[CORE_RT_PRIORITIES]; /* outgoing data link of each priority, or NULL */
    core_link_t *control;                  /* outgoing control link, or NULL */
} ir_conn_t;

struct core_ir {
    ir_router_t routers[CORE_RT_MAX_NODES]; /* by router mask bit (0, this router: unused) */
    ir_conn_t   conns[CORE_RT_MAX_CONNS];   /* by connection mask bit */
    base_map_t  ids;                        /* router id -> mask bit (as a pointer value) */
    uint32_t    radius;                     /* topology radius */
};

static bool bit_get(const uint64_t *m, uint32_t b)
{
    return (m[b / 64] >> (b % 64)) & 1;
}

static void bit_set(uint64_t *m, uint32_t b)
{
    m[b / 64] |= (uint64_t)1 << (b % 64);
}

static void bit_clear(uint64_t *m, uint32_t b)
{
    m[b / 64] &= ~((uint64_t)1 << (b % 64));
}

static struct core_ir *ir_get_CT(core_t *core)
{
    if (!core->ir) {
        core->ir = base_calloc(1, sizeof(*core->ir));
        base_map_init(&core->ir->ids);
        LOG(INFO, "Interior forwarding on");
    }
    return core->ir;
}

/* The mask bit of router id[0, n), -1 when unknown. */
static int router_bit_CT(struct core_ir *ir, const uint8_t *id, size_t n)
{
    void *v = base_map_get(&ir->ids, (const char *)id, n);
    return v ? (int)(uintptr_t)v : -1;
}

/* A node id of the annotations, "0/<id>" (area 0), as a router mask bit: 0 for this router's
 * own id, -1 for an unknown one. */
static int node_bit_CT(core_t *core, const uint8_t *p, size_t n)
{
    if (n < 2 || p[0] != '0' || p[1] != '/')
        return -1;
    size_t idlen = strlen(core->router_id);
    if (n - 2 == idlen && memcmp(p + 2, core->router_id, idlen) == 0)
        return 0;
    return router_bit_CT(core->ir, p + 2, n - 2);
}

/* ---- the control plane's calls ---- */

int core_rt_conn_CT(core_t *core, uint64_t conn_id, uint32_t conn_bit, bool add)
{
    BASE_ASSERT_THREAD(CORE);
    if (conn_bit >= CORE_RT_MAX_CONNS || conn_id == 0)
        return -EINVAL;
    struct core_ir *ir = ir_get_CT(core);
    ir_conn_t      *c = &ir->conns[conn_bit];
    if (!add) {
        if (c->conn_id != conn_id)
            return -EINVAL;
        for (int p = 0; p < CORE_RT_PRIORITIES; p++)
            if (c->data[p])
                c->data[p]->ir_conn = -1;
        if (c->control)
            c->control->ir_conn = -1;
        memset(c, 0, sizeof(*c));
        return 0;
    }
    if (c->conn_id && c->conn_id != conn_id)
        return -EINVAL;
    c->conn_id = conn_id;
    /* links that attached before the connection was announced */
    base_map_slot_t *s;
    for (size_t i = 0; (i = base_map_next(&core->links, i, &s)) != 0;) {
        core_link_t *l = s->value;
        if (l->conn_id == conn_id && l->ir_link && l->ir_conn < 0)
            core_ir_link_attach_CT(core, l);
    }
    return 0;
}

/* The address's remoteCount (qdstat -a's `remote`): the routers that have a consumer. */
static void remote_gauge_CT(core_t *core, core_addr_t *addr)
{
    int64_t n = __builtin_popcountll(addr->rnodes[0]) + __builtin_popcountll(addr->rnodes[1]);
    stats_obj_set(core->shard, addr->stats, CORE_ADDR_REMOTE, n);
}

/* Withdraw router `bit` from every address (it is gone or forgotten). */
static void router_flush_CT(core_t *core, uint32_t bit)
{
    base_map_slot_t *s;
    core_addr_t    **gone = NULL;
    size_t           n_gone = 0, cap = 0;
    for (size_t i = 0; (i = base_map_next(&core->addrs, i, &s)) != 0;) {
        core_addr_t *addr = s->value;
        if (!bit_get(addr->rnodes, bit))
            continue;
        bit_clear(addr->rnodes, bit);
        remote_gauge_CT(core, addr);
        if (!core_addr_reached(core, addr) && addr->consumers.count == 0)
            core__addr_credit_CT(core, addr, false);
        if (!core_addr_remote(addr)) {
            if (BASE_UNLIKELY(addr->n_edge_snd))
                core_edge_track_CT(core, addr);
            /* released after the walk: the map must not change under it */
            if (n_gone == cap) {
                cap = cap ? 2 * cap : 16;
                gone = base_realloc(gone, cap * sizeof(*gone));
            }
            gone[n_gone++] = addr;
        }
    }
    for (size_t i = 0; i < n_gone; i++)
        core__addr_release_CT(core, gone[i]);
    free(gone);
}

/* Router `b`'s own address, R<id> (qdrouterd's router class: `_topo/0/<id>/...`, qdstat -a's
 * `router` rows): it exists while the router is reached, with the router as its one remote
 * destination, so a sender attached to it (qdstat -r's requests for that router's
 * management node) has credit while the router is reached and none while it is not, and
 * closest forwarding takes a delivery there.  `was`: the routers reached before this change
 * of routes (core->ir_reached is already the new set). */
static void router_addr_CT(core_t *core, uint32_t b, const uint64_t was[2])
{
    const ir_router_t *r = &core->ir->routers[b];
    char               stack[256];
    size_t             klen = r->idlen + 1;
    char              *key = klen <= sizeof(stack) ? stack : base_malloc(klen);
    key[0] = 'R';
    memcpy(key + 1, r->id, r->idlen);
    bool         reached = r->conn_bit >= 0;
    core_addr_t *addr = core__addr_get_CT(core, key, klen, reached, CFG_DIST_CLOSEST);
    if (key != stack)
        free(key);
    if (!addr || bit_get(addr->rnodes, b) == reached)
        return;
    bool had = addr->consumers.count || (addr->rnodes[0] & was[0]) || (addr->rnodes[1] & was[1]);
    if (reached)
        bit_set(addr->rnodes, b);
    else
        bit_clear(addr->rnodes, b);
    remote_gauge_CT(core, addr);
    bool has = addr->consumers.count || core_addr_reached(core, addr);
    if (had != has)
        core__addr_credit_CT(core, addr, has);
    core__addr_release_CT(core, addr);
}

/* The routers reached changed (from `was` to core->ir_reached): the senders of an address
 * without a local consumer whose remote destinations went from none reached to some get
 * credit, and the other way they are drained. */
static void reached_changed_CT(core_t *core, const uint64_t was[2])
{
    uint64_t changed[2] = {was[0] ^ core->ir_reached[0], was[1] ^ core->ir_reached[1]};
    if (!(changed[0] | changed[1]))
        return;
    base_map_slot_t *s;
    for (size_t i = 0; (i = base_map_next(&core->addrs, i, &s)) != 0;) {
        core_addr_t *addr = s->value;
        if (!addr->senders.count || addr->consumers.count ||
            !((addr->rnodes[0] & changed[0]) | (addr->rnodes[1] & changed[1])))
            continue;
        bool before = (addr->rnodes[0] & was[0]) | (addr->rnodes[1] & was[1]);
        bool now = core_addr_reached(core, addr);
        if (before != now)
            core__addr_credit_CT(core, addr, now);
    }
}

int core_rt_set_routes_CT(core_t *core, const core_rt_routes_t *t)
{
    BASE_ASSERT_THREAD(CORE);
    for (uint32_t i = 0; i < t->n; i++) {
        const core_rt_route_t *r = &t->routers[i];
        if (r->maskbit == 0 || r->maskbit >= CORE_RT_MAX_NODES || !r->id || !*r->id ||
            r->conn_bit >= CORE_RT_MAX_CONNS || r->conn_bit < -1 ||
            (r->neighbour && (r->link_bit < 0 || r->link_bit >= CORE_RT_MAX_CONNS)) ||
            (r->has_up && (r->up_bit < 0 || r->up_bit >= CORE_RT_MAX_CONNS)))
            return -EINVAL;
    }
    struct core_ir *ir = ir_get_CT(core);
    uint64_t        keep[2] = {0, 0};
    for (uint32_t i = 0; i < t->n; i++)
        bit_set(keep, t->routers[i].maskbit);
    for (uint32_t b = 1; b < CORE_RT_MAX_NODES; b++) {
        ir_router_t *r = &ir->routers[b];
        if (!r->id || bit_get(keep, b))
            continue;
        router_flush_CT(core, b);
        base_map_del(&ir->ids, r->id, r->idlen);
        free(r->id);
        memset(r, 0, sizeof(*r));
    }
    for (uint32_t i = 0; i < t->n; i++) {
        const core_rt_route_t *in = &t->routers[i];
        ir_router_t           *r = &ir->routers[in->maskbit];
        size_t                 idlen = strlen(in->id);
        if (r->id && (r->idlen != idlen || memcmp(r->id, in->id, idlen) != 0)) {
            /* the bit was reused for another router */
            router_flush_CT(core, in->maskbit);
            base_map_del(&ir->ids, r->id, r->idlen);
            BASE_FREE(r->id);
        }
        if (!r->id) {
            r->id = base_strdup(in->id);
            r->idlen = idlen;
            base_map_put(&ir->ids, r->id, idlen, (void *)(uintptr_t)in->maskbit);
        }
        r->conn_bit = in->conn_bit;
        r->neighbour = in->neighbour;
        r->link_bit = in->neighbour ? in->link_bit : -1;
        r->up_bit = in->has_up ? in->up_bit : -1;
        r->cost = in->cost;
        r->vo[0] = in->vo[0] | 1; /* this router is a valid origin everywhere */
        r->vo[1] = in->vo[1];
    }
    ir->radius = t->radius;
    uint64_t was[2] = {core->ir_reached[0], core->ir_reached[1]};
    core->ir_reached[0] = core->ir_reached[1] = 0;
    for (uint32_t b = 1; b < CORE_RT_MAX_NODES; b++)
        if (ir->routers[b].id && ir->routers[b].conn_bit >= 0)
            bit_set(core->ir_reached, b);
    for (uint32_t i = 0; i < t->n; i++)
        router_addr_CT(core, t->routers[i].maskbit, was);
    reached_changed_CT(core, was);
    return 0;
}

int core_rt_remote_addr_CT(core_t *core, const char *key, size_t keylen, uint32_t router_bit,
                           bool add, int hint)
{
    BASE_ASSERT_THREAD(CORE);
    if (router_bit == 0 || router_bit >= CORE_RT_MAX_NODES || keylen < 2)
        return -EINVAL;
    core_addr_t *addr = core__addr_get_CT(core, key, keylen, add, core_rt_treatment_dist(hint));
    if (!addr)
        return -ENOENT;
    bool had = addr->consumers.count || core_addr_reached(core, addr);
    if (add) {
        ir_get_CT(core);
        if (!core_addr_remote(addr))
            core_lrm_remote_key_CT(core, key, keylen); /* a link route's key, perhaps */
        bit_set(addr->rnodes, router_bit);
        remote_gauge_CT(core, addr);
        if (!had && core_addr_reached(core, addr))
            core__addr_credit_CT(core, addr, true);
        if (BASE_UNLIKELY(addr->n_edge_snd))
            core_edge_track_CT(core, addr);
        return 0;
    }
    if (!bit_get(addr->rnodes, router_bit))
        return -ENOENT;
    bit_clear(addr->rnodes, router_bit);
    remote_gauge_CT(core, addr);
    if (had && !addr->consumers.count && !core_addr_reached(core, addr))
        core__addr_credit_CT(core, addr, false);
    if (BASE_UNLIKELY(addr->n_edge_snd))
        core_edge_track_CT(core, addr);
    core__addr_release_CT(core, addr);
    return 0;
}

bool core_ir_router_hop_CT(core_t *core, uint32_t router_bit, uint64_t exclude,
                           uint64_t *conn_id, int *worker)
{
    struct core_ir *ir = core->ir;
    if (!ir || router_bit == 0 || router_bit >= CORE_RT_MAX_NODES)
        return false;
    const ir_router_t *r = &ir->routers[router_bit];
    if (!r->id || r->conn_bit < 0)
        return false;
    const ir_conn_t *c = &ir->conns[r->conn_bit];
    if (!c->conn_id || c->conn_id == exclude)
        return false;
    const core_link_t *l = c->control;
    for (int p = 0; !l && p < CORE_RT_PRIORITIES; p++)
        l = c->data[p];
    if (!l)
        return false;
    *conn_id = c->conn_id;
    *worker = l->worker;
    return true;
}

int core_rt_treatment_dist(int hint)
{
    switch (hint) {
    case 0:
    case 1:
        return CFG_DIST_MULTICAST;
    case 2:
        return CFG_DIST_CLOSEST;
    case 3:
        return CFG_DIST_BALANCED;
    case 5:
        return CFG_DIST_UNAVAILABLE;
    default:
        return -1;
    }
}

int core_rt_dist_treatment(cfg_distribution_t dist)
{
    switch (dist) {
    case CFG_DIST_MULTICAST:
        return 1;
    case CFG_DIST_CLOSEST:
        return 2;
    case CFG_DIST_UNAVAILABLE:
        return 5;
    default:
        return 3;
    }
}

/* ---- inter-router links ---- */

void core_ir_link_attach_CT(core_t *core, core_link_t *l)
{
    struct core_ir *ir = core->ir;
    if (!ir || l->dir != CORE_LINK_OUT)
        return; /* incoming links need no table: their deliveries say where they go */
    for (uint32_t b = 0; b < CORE_RT_MAX_CONNS; b++) {
        ir_conn_t *c = &ir->conns[b];
        if (c->conn_id != l->conn_id)
            continue;
        if (l->ir_link == CORE_IR_LINK_CONTROL) {
            c->control = l;
        } else if (l->ir_link == CORE_IR_LINK_DATA && l->ir_priority < CORE_RT_PRIORITIES) {
            c->data[l->ir_priority] = l;
        } else {
            return;
        }
        l->ir_conn = (int16_t)b;
        return;
    }
}

void core_ir_link_detach_CT(core_t *core, core_link_t *l)
{
    if (!core->ir || l->ir_conn < 0)
        return;
    ir_conn_t *c = &core->ir->conns[l->ir_conn];
    if (c->control == l)
        c->control = NULL;
    for (int p = 0; p < CORE_RT_PRIORITIES; p++)
        if (c->data[p] == l)
            c->data[p] = NULL;
    l->ir_conn = -1;
}

/* The data link of connection conn_bit for priority prio, or the next lower that exists
 * (qdrouterd's peer_router_data_link). */
static core_link_t *data_link_CT(struct core_ir *ir, int32_t conn_bit, int prio)
{
    if (conn_bit < 0)
        return NULL;
    for (; prio >= 0; prio--)
        if (ir->conns[conn_bit].data[prio])
            return ir->conns[conn_bit].data[prio];
    return NULL;
}

/* ---- forwarding ---- */

/* What the router annotations of a delivery say. */
typedef struct ir_in {
    int      origin;  /* mask bit of the ingress router (0: here), -1 for an unknown one */
    uint64_t excl[2]; /* connections excluded by the trace */
} ir_in_t;

static void ir_in_read_CT(core_t *core, const core_delivery_t *dlv, ir_in_t *x)
{
    struct core_ir *ir = core->ir;
    x->origin = dlv->ra_ingress ? node_bit_CT(core, dlv->ra_ingress, dlv->ra_ingress_len) : 0;
    x->excl[0] = x->excl[1] = 0;
    codec_bytes_t trace = {dlv->ra_trace, dlv->ra_trace_len}, id;
    while (codec_trace_next(&trace, &id)) {
        int b = node_bit_CT(core, id.ptr, id.len);
        if (b > 0 && ir->routers[b].neighbour)
            bit_set(x->excl, (uint32_t)ir->routers[b].link_bit);
    }
}

static int prio_of(const core_delivery_t *dlv)
{
    int p = dlv->priority ? dlv->priority - 1 : CODEC_PRIORITY_DEFAULT;
    return p > CORE_RT_PRIORITIES - 1 ? CORE_RT_PRIORITIES - 1 : p;
}

/* A `_topo/0/<id>/...` address (normalized text) names router <id>: its mask bit, or -1. */
static int topo_router_CT(core_t *core, const char *a, size_t n)
{
    if (n < 8 || memcmp(a, "_topo/0/", 8) != 0)
        return -1;
    const char *id = a + 8;
    const char *slash = memchr(id, '/', n - 8);
    size_t      idlen = slash ? (size_t)(slash - id) : n - 8;
    return router_bit_CT(core->ir, (const uint8_t *)id, idlen);
}

/* Queue a copy of dlv (arrived on `in`) on out.  A copy to another router of a message that
 * came on a targeted link carries that link's address as x-opt-qd.to (and its phase), as
 * qdrouterd's ingress router sets it (router_node.c, AMQP_rx_handler): the next router
 * gets it on an anonymous data link. */
static void ir_send_CT(core_t *core, core_link_t *in, core_link_t *out, core_delivery_t *dlv)
{
    core_work_t *w = core__send_copy_CT(core, out, dlv);
    if (BASE_UNLIKELY(in->edge_to != NULL) &&
        (out->ir_link || out->edge == CORE_EDGE_LINK_DOWNLINK)) {
        /* `_edge/<id>/...` from a targeted link: the address goes along (the edge routes
         * what comes down its downlink by it) */
        w->u.send.to_override = base_strdup(in->edge_to);
        w->u.send.to_router = out->ir_link != 0;
        return;
    }
    if (!out->ir_link)
        return;
    w->u.send.to_router = true;
    if (!in->addr)
        return;
    const char *key = in->addr->key;
    size_t      klen = in->addr->keylen;
    if (key[0] == 'M' && klen >= 2) {
        w->u.send.to_override = base_strndup(key + 2, klen - 2);
        if (key[1] > '0' && key[1] <= '9')
            w->u.send.to_phase = (uint8_t)(key[1] - '0');
    } else if (key[0] == 'R' && in->topo_to) {
        w->u.send.to_override = base_strdup(in->topo_to);
    }
}

/* One copy on link out. */
static void one_copy_CT(core_t *core, core_link_t *in, core_link_t *out, core_delivery_t *dlv)
{
    core_content_ref(dlv->content, 1);
    ir_send_CT(core, in, out, dlv);
    dlv->_copies = 1;
    dlv->_out_link = out->id;
}

static unsigned multicast_CT(core_t *core, core_link_t *in, core_delivery_t *dlv, core_addr_t *addr,
                             unsigned *transit)
{
    struct core_ir *ir = core->ir;
    size_t          nl = addr->consumers.count;
    unsigned        copies = 0;
    core_link_t    *outs[CORE_RT_MAX_CONNS];
    unsigned        n_outs = 0;
    ir_in_t         x;
    ir_in_read_CT(core, dlv, &x);
    /* A copy from another router that came in on a connection off that router's tree is a
     * second one: a qdrouterd 1.19 router that got its own copy passes it on to every
     * neighbour with a consumer (it has no valid-origin test for multicast), so in a
     * triangle this router hears the origin twice. Only the copy on the tree is delivered. */
    if (x.origin > 0 && in->ir_link == CORE_IR_LINK_DATA && ir->routers[x.origin].up_bit >= 0 &&
        ir->conns[ir->routers[x.origin].up_bit].conn_id != in->conn_id)
        return 0;
    if (core_addr_remote(addr)) {
        uint64_t conns[2] = {0, 0};
        for (uint32_t b = 1; x.origin >= 0 && b < CORE_RT_MAX_NODES; b++) {
            if (!bit_get(addr->rnodes, b))
                continue;
            const ir_router_t *r = &ir->routers[b];
            if (!r->id || r->conn_bit < 0 || bit_get(x.excl, (uint32_t)r->conn_bit) ||
                !bit_get(r->vo, (uint32_t)x.origin))
                continue;
            bit_set(conns, (uint32_t)r->conn_bit);
        }
        int prio = prio_of(dlv);
        for (uint32_t c = 0; c < CORE_RT_MAX_CONNS; c++) {
            if (!bit_get(conns, c))
                continue;
            core_link_t *l = data_link_CT(ir, (int32_t)c, prio);
            if (l)
                outs[n_outs++] = l;
        }
    }
    /* local consumers, but none on the edge connection the delivery came from */
    size_t nloc = nl;
    if (BASE_UNLIKELY(in->edge))
        for (size_t i = 0; i < nl; i++)
            nloc -= core_edge_echo(in, addr->consumers.items[i]);
    copies = (unsigned)nloc + n_outs;
    if (copies == 0)
        return 0;
    dlv->_mcast = true;
    core_content_ref(dlv->content, copies);
    for (size_t i = 0; i < nl; i++) {
        core_link_t *l = addr->consumers.items[i];
        if (BASE_UNLIKELY(core_edge_echo(in, l)))
            continue;
        core__send_copy_CT(core, l, dlv);
        dlv->_out_link = l->id;
    }
    for (unsigned i = 0; i < n_outs; i++)
        ir_send_CT(core, in, outs[i], dlv);
    dlv->_copies = copies;
    if (copies == 1 && n_outs)
        dlv->_out_link = outs[0]->id;
    else if (copies != 1)
        dlv->_out_link = 0;
    *transit = n_outs;
    return copies;
}

static unsigned closest_CT(core_t *core, core_link_t *in, core_delivery_t *dlv, core_addr_t *addr,
                           unsigned *transit)
{
    struct core_ir *ir = core->ir;
    size_t          nl = addr->consumers.count;
    size_t          start = nl ? addr->rr++ % nl : 0;
    for (size_t k = 0; k < nl; k++) {
        core_link_t *l = addr->consumers.items[(start + k) % nl];
        if (BASE_UNLIKELY(core_edge_echo(in, l)))
            continue; /* not back to the edge it came from */
        one_copy_CT(core, in, l, dlv);
        return 1;
    }
    /* the remote routers of lowest cost, round-robin among them */
    uint32_t best[CORE_RT_MAX_NODES];
    uint32_t n_best = 0;
    int64_t  best_cost = 0;
    for (uint32_t b = 1; b < CORE_RT_MAX_NODES; b++) {
        if (!bit_get(addr->rnodes, b))
            continue;
        const ir_router_t *r = &ir->routers[b];
        if (!r->id || r->conn_bit < 0)
            continue;
        if (n_best == 0 || r->cost < best_cost) {
            n_best = 0;
            best_cost = r->cost;
        }
        if (r->cost == best_cost)
            best[n_best++] = b;
    }
    if (n_best == 0)
        return 0;
    const ir_router_t *r = &ir->routers[best[addr->rr++ % n_best]];
    core_link_t       *l = data_link_CT(ir, r->conn_bit, prio_of(dlv));
    if (!l)
        return 0;
    one_copy_CT(core, in, l, dlv);
    *transit = 1;
    return 1;
}

static unsigned balanced_CT(core_t *core, core_link_t *in, core_delivery_t *dlv, core_addr_t *addr,
                            unsigned *transit)
{
    struct core_ir *ir = core->ir;
    size_t          nl = addr->consumers.count;
    core_link_t    *elig = NULL, *inelig = NULL;
    uint64_t        elig_v = UINT64_MAX, inelig_v = UINT64_MAX;
    int32_t         elig_c = -1, inelig_c = -1;

    size_t start = nl ? addr->rr++ % nl : 0;
    for (size_t k = 0; k < nl && elig_v != 0; k++) {
        core_link_t *l = addr->consumers.items[(start + k) % nl];
        uint64_t     v = l->outstanding;
        if (BASE_UNLIKELY(core_edge_echo(in, l)))
            continue; /* not back to the edge it came from */
        if (l->capacity > v && elig_v > v) {
            elig = l;
            elig_v = v;
        } else if (l->capacity <= v && inelig_v > v) {
            inelig = l;
            inelig_v = v;
        }
    }
    if ((!elig || elig_v > 0) && core_addr_remote(addr)) {
        ir_in_t x;
        ir_in_read_CT(core, dlv, &x);
        /* an unknown ingress router counts as this one here (1.19), not in multicast */
        if (x.origin < 0)
            x.origin = 0;
        int prio = prio_of(dlv);
        for (uint32_t b = 1; b < CORE_RT_MAX_NODES; b++) {
            if (!bit_get(addr->rnodes, b))
                continue;
            const ir_router_t *r = &ir->routers[b];
            if (!r->id || !bit_get(r->vo, (uint32_t)x.origin))
                continue;
            core_link_t *l = data_link_CT(ir, r->conn_bit, prio);
            if (!l)
                continue;
            uint64_t v = addr->ir_out ? addr->ir_out[r->conn_bit] : 0;
            bool     eligible = l->capacity > v;
            v += r->cost > 0 ? (uint64_t)r->cost : 0;
            if (eligible && elig_v > v) {
                elig = l;
                elig_v = v;
                elig_c = r->conn_bit;
            } else if (!eligible && inelig_v > v) {
                inelig = l;
                inelig_v = v;
                inelig_c = r->conn_bit;
            }
        }
    }
    core_link_t *out = elig ? elig : inelig;
    int32_t      conn = elig ? elig_c : inelig_c;
    if (!out)
        return 0;
    one_copy_CT(core, in, out, dlv);
    if (conn >= 0) {
        *transit = 1;
        if (!dlv->presettled) {
            if (!addr->ir_out)
                addr->ir_out = base_calloc(CORE_RT_MAX_CONNS, sizeof(*addr->ir_out));
            addr->ir_out[conn]++;
            addr->tracked++;
            dlv->_track_addr = addr;
            dlv->_track_conn = (uint32_t)conn;
        }
    }
    return 1;
}

void core_ir_untrack_CT(core_t *core, core_delivery_t *dlv)
{
    core_addr_t *addr = dlv->_track_addr;
    dlv->_track_addr = NULL;
    if (addr->ir_out[dlv->_track_conn])
        addr->ir_out[dlv->_track_conn]--;
    addr->tracked--;
    core__addr_release_CT(core, addr);
}

unsigned core_ir_deliver_CT(core_t *core, core_link_t *in, core_delivery_t *dlv, core_addr_t *addr,
                            cfg_distribution_t dist, int owner)
{
    struct core_ir *ir = core->ir;
    unsigned        copies = 0, transit = 0;

    /* travelled further than the mesh is wide: a loop (qdrouterd releases it) */
    if (dlv->ra_trace_count > ir->radius + 1) {
        core__deliver_unroutable_CT(core, in, dlv, owner);
        return 0;
    }
    /* `_topo/0/<id>/...` of another router (its R<id> address, or an unknown router's):
     * to that router, whatever has the address */
    int  b = -1;
    bool topo = false;
    if (addr && addr->key[0] == 'R') {
        topo = true;
        b = router_bit_CT(ir, (const uint8_t *)addr->key + 1, addr->keylen - 1);
    } else if (addr && addr->key[0] == 'T') {
        topo = true;
    } else if (!addr && !in->addr && dlv->to) {
        size_t      tlen = 0;
        const char *text = core_addr_normalize(dlv->to, dlv->to_len, &tlen);
        topo = tlen >= 6 && memcmp(text, "_topo/", 6) == 0;
        b = topo_router_CT(core, text, tlen);
    }
    if (topo) {
        core_link_t *l = b > 0 ? data_link_CT(ir, ir->routers[b].conn_bit, prio_of(dlv)) : NULL;
        if (l) {
            one_copy_CT(core, in, l, dlv);
            copies = transit = 1;
        }
    } else if (addr) {
        if (dist == CFG_DIST_MULTICAST)
            copies = multicast_CT(core, in, dlv, addr, &transit);
        else if (dist == CFG_DIST_CLOSEST)
            copies = closest_CT(core, in, dlv, addr, &transit);
        else
            copies = balanced_CT(core, in, dlv, addr, &transit);
    }
    if (copies == 0) {
        core__deliver_unroutable_CT(core, in, dlv, owner);
        return 0;
    }
    core__addr_count_CT(core, in, addr, copies - transit, transit);
    core__deliver_finish_CT(core, in, dlv, owner);
    return copies;
}

void core_ir_free(core_t *core)
{
    struct core_ir *ir = core->ir;
    if (!ir)
        return;
    for (uint32_t b = 0; b < CORE_RT_MAX_NODES; b++)
        free(ir->routers[b].id);
    base_map_fini(&ir->ids);
    BASE_FREE(core->ir);
}
