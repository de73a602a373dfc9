/* core/edge.c: edge mode, as qdrouterd 1.19's edge routers behave (the interrouter reference,
 * section 4).
 *
 * Thread suffixes: _CT = core thread (every function here, but core_edge_init/_fini: main
 * thread, before start and after stop).
 *
 * DESIGN: an edge router (router.mode edge) takes no part in the routing protocol.  Its
 * connectors of role edge lead to interior routers; of the edge connections that are open,
 * one is active (the first to open; when it goes, the next open one, in the order they
 * opened), and every link toward the interior is on that one:
 *  - the uplink, an anonymous sender that consumes the address `L_edge`: every address of
 *    another router (`_topo/0/<other>/...`, `_edge/<other>/...`) is keyed `L_edge` on an
 *    edge, so what goes there, and what has nowhere to go here, goes up;
 *  - the downlink (a receiver, source = this router's id, capability
 *    qd.router-edge-downlink): the interior sends it what it routes to `_edge/<id>/...`;
 *  - the tracking receiver and the heartbeat sender (router/edgeconn.c: the worker's own);
 *  - per mobile address with local consumers, a proxy receiver (source = the address): the
 *    interior sees a consumer and advertises it to the mesh;
 *  - per mobile address with local producers, a proxy sender (target = the address), which
 *    joins the address's consumers only while the interior's tracking says that the address
 *    has a destination there other than this edge (CORE_EDGE_TRACK), and one more for its
 *    fallback destination when the address is configured with enableFallback;
 *  - a proxy link of a phase of a waypoint address that its ordinary clients do not use, or
 *    of a fallback destination, carries qd.waypoint.N or qd.fallback (proxy_cap_CT), so that
 *    the interior attaches it to the same phase.
 * "Local" leaves out links of an edge connection and in-process links (the management
 * agent's).  The core decides which proxy links there are (first local consumer or producer
 * of an address, last one going, the activation of a connection: CORE_W_EDGE to its worker);
 * the worker attaches them and announces them like any link, with attach.edge saying what
 * they are.
 *
 * Forwarding (core_edge_deliver_CT), qdrouterd 1.19's transfer.c rules:
 *  - a delivery on a link of an edge connection never goes back out on a link of the same
 *    connection (its "via edge" echo rule);
 *  - an anonymous delivery whose address is not in the table goes up the uplink; one to an
 *    anycast address with no consumer here goes up too; one to a multicast address goes to
 *    the local consumers and up (once: not again when the address's proxy sender is bound,
 *    which qdrouterd 1.19 would also copy to);
 *  - a delivery on a targeted link goes to the address's consumers, the bound proxy sender
 *    among them (so its producers have credit while the interior has a destination).
 */
#include "core/core_int.h"
#include "core/edge_lookup.h"

#include "core/base/log.h"
#include "core/base/pattern.h"

#include <string.h>

#define LOG(lvl, ...) base_log(BASE_LOG_MOD_ROUTER_CORE, BASE_LOG_##lvl, __VA_ARGS__)

typedef struct edge_conn {
    uint64_t id;     /* the connection */
    int      worker; /* its worker */
} edge_conn_t;

struct core_edge {
    edge_conn_t *conns;      /* the open edge connections, in the order they opened */
    size_t       n;          /* used */
    size_t       cap;        /* allocated */
    uint64_t     active;     /* the active one's id, 0 for none */
    int          active_w;   /* its worker */
    core_link_t *uplink;     /* the uplink, once attached */
};

void core_edge_init(core_t *core)
{
    core->edge = base_calloc(1, sizeof(*core->edge));
}

void core_edge_fini(core_t *core)
{
    if (!core->edge)
        return;
    free(core->edge->conns);
    BASE_FREE(core->edge);
}

void core_edge_action_discard(core_action_t *a)
{
    BASE_FREE(a->u.edge.key);
}

/* The capability a proxy link of key carries, qdrouterd 1.19's (its addr_proxy.c), so that
 * the interior attaches it to the same address: qd.fallback for a fallback destination
 * (*fallback); for a phase p of a multi-phase (waypoint) address, none where its ordinary
 * clients are (a proxy sender of the ingress phase, a proxy receiver of the egress phase) or
 * for a phase outside the two, else qd.waypoint.N with N = p for a sender (the interior sends
 * into phase N) and p + 1 for a receiver (it takes from N - 1).  Returns N, or 0. */
static uint8_t proxy_cap_CT(core_t *core, const char *key, size_t klen, core_link_dir_t dir,
                            bool *fallback)
{
    *fallback = key[1] == '0' + CORE_PHASE_FALLBACK;
    if (*fallback || core->n_phased == 0 || key[1] < '0' || key[1] > '9')
        return 0;
    const cfg_address_t *ac = base_pattern_match(core->patterns, key + 2, klen - 2);
    if (!ac || ac->egress_phase <= 0)
        return 0;
    int p = key[1] - '0';
    if ((dir == CORE_LINK_OUT && p == ac->ingress_phase) ||
        (dir == CORE_LINK_IN && p == ac->egress_phase) || p < ac->ingress_phase ||
        p > ac->egress_phase)
        return 0;
    return (uint8_t)(p + (dir == CORE_LINK_IN));
}

/* Ask the active connection's worker to attach (add) or detach the proxy link of the address
 * with hash key key[0, klen). */
static void proxy_key_CT(core_t *core, const char *key, size_t klen, core_link_dir_t dir,
                         bool add)
{
    struct core_edge *e = core->edge;
    core_work_t      *w = core__work_add_CT(core, e->active_w, CORE_W_EDGE, NULL);
    w->u.edge.conn_id = e->active;
    w->u.edge.op = add ? CORE_EDGE_PROXY_ADD : CORE_EDGE_PROXY_DEL;
    w->u.edge.dir = (uint8_t)dir;
    w->u.edge.key = base_strndup(key, klen);
    w->u.edge.waypoint = add ? proxy_cap_CT(core, key, klen, dir, &w->u.edge.fallback) : 0;
    if (!add)
        w->u.edge.fallback = false;
}

/* The proxy link of addr; a proxy sender's comes with one for the address's fallback
 * destination when the address has one configured (qdrouterd 1.19 attaches that one when the
 * edge connection becomes active; here, too, with the address's first local producer). */
static void proxy_CT(core_t *core, const core_addr_t *addr, core_link_dir_t dir, bool add)
{
    proxy_key_CT(core, addr->key, addr->keylen, dir, add);
    if (dir != CORE_LINK_OUT || addr->key[1] != '0' || !core_fallback_configured_CT(core, addr))
        return;
    char stack[512];
    char *fb = addr->keylen <= sizeof(stack) ? stack : base_malloc(addr->keylen);
    memcpy(fb, addr->key, addr->keylen);
    fb[1] = (char)('0' + CORE_PHASE_FALLBACK);
    proxy_key_CT(core, fb, addr->keylen, dir, add);
    if (fb != stack)
        free(fb);
}

/* Whether addr is proxied to the interior at all: a mobile address that is not one of the
 * router's own nodes (qdrouterd proxies no address its core subscribes to: $management). */
static bool proxied(const core_t *core, const core_addr_t *addr)
{
    return addr->key[0] == 'M' && addr->keylen > 2 &&
           !core__node_reserved_CT(core, addr->key + 2, addr->keylen - 2);
}

/* Links of s that are local: neither an edge connection's nor in-process. */
static size_t local_count(const core_link_set_t *s)
{
    size_t n = 0;
    for (size_t i = 0; i < s->count; i++)
        if (!s->items[i]->edge && s->items[i]->conn_id)
            n++;
    return n;
}

/* Connection ci becomes the active one: its worker attaches the fixed links, then one proxy
 * link per mobile address with local consumers or producers. */
static void activate_CT(core_t *core, const edge_conn_t *ci)
{
    struct core_edge *e = core->edge;
    e->active = ci->id;
    e->active_w = ci->worker;
    core_work_t *w = core__work_add_CT(core, ci->worker, CORE_W_EDGE, NULL);
    w->u.edge.conn_id = ci->id;
    w->u.edge.op = CORE_EDGE_ACTIVATE;
    w->u.edge.key = NULL;
    LOG(INFO, "[C%llu] Edge connection to interior active", (unsigned long long)ci->id);
    base_map_slot_t *s;
    for (size_t i = 0; (i = base_map_next(&core->addrs, i, &s)) != 0;) {
        core_addr_t *addr = s->value;
        if (!proxied(core, addr))
            continue;
        if (local_count(&addr->consumers))
            proxy_CT(core, addr, CORE_LINK_IN, true);
        if (local_count(&addr->senders))
            proxy_CT(core, addr, CORE_LINK_OUT, true);
    }
}

static void track_CT(core_t *core, const char *key, bool dest)
{
    core_addr_t *addr = base_map_get(&core->addrs, key, strlen(key));
    core_link_t *l = addr ? addr->edge_out : NULL;
    if (!l || addr->edge_out_bound == dest)
        return;
    addr->edge_out_bound = dest;
    if (dest)
        core__consumer_add_CT(core, addr, l);
    else
        core__consumer_del_CT(core, addr, l);
    LOG(DEBUG, "[C%llu][L%llu] Edge proxy sender of %s %s", (unsigned long long)l->conn_id,
        (unsigned long long)l->id, addr->key, dest ? "bound" : "unbound");
}

void core_edge_action_CT(core_t *core, core_action_t *a)
{
    struct core_edge *e = core->edge;
    uint64_t          id = a->u.edge.conn_id;
    switch ((core_edge_event_t)a->u.edge.event) {
    case CORE_EDGE_CONN_OPENED:
        if (e->n == e->cap) {
            e->cap = e->cap ? e->cap * 2 : 4;
            e->conns = base_realloc(e->conns, e->cap * sizeof(*e->conns));
        }
        e->conns[e->n] = (edge_conn_t){.id = id, .worker = a->worker};
        if (!e->active)
            activate_CT(core, &e->conns[e->n]);
        e->n++;
        break;
    case CORE_EDGE_CONN_CLOSED:
        for (size_t i = 0; i < e->n; i++) {
            if (e->conns[i].id != id)
                continue;
            memmove(&e->conns[i], &e->conns[i + 1], (e->n - i - 1) * sizeof(*e->conns));
            e->n--;
            break;
        }
        if (e->active != id)
            break;
        e->active = 0;
        if (e->n) {
            LOG(INFO, "[C%llu] Edge connection to interior lost, activating alternate C%llu",
                (unsigned long long)id, (unsigned long long)e->conns[0].id);
            activate_CT(core, &e->conns[0]);
        } else {
            LOG(INFO, "[C%llu] Edge connection to interior lost, no alternate connection "
                "available", (unsigned long long)id);
        }
        /* the attaches it was asked about get the edge's own lookup (only the active
         * connection is ever asked) */
        core_elk_conn_closed_CT(core, id);
        break;
    case CORE_EDGE_TRACK:
        if (a->u.edge.key && id == e->active)
            track_CT(core, a->u.edge.key, a->u.edge.flag);
        break;
    case CORE_EDGE_LOOKUP_REPLY:
        core_elk_reply_CT(core, a);
        break;
    case CORE_EDGE_LOOKUP: /* an interior's request: not for an edge */
        break;
    }
    BASE_FREE(a->u.edge.key);
}

bool core_edge_active_CT(const core_t *core, uint64_t *conn_id, int *worker)
{
    const struct core_edge *e = core->edge;
    if (!e || !e->active)
        return false;
    *conn_id = e->active;
    *worker = e->active_w;
    return true;
}

bool core_edge_link_attach_CT(core_t *core, core_link_t *l, const char *address)
{
    struct core_edge *e = core->edge;
    if (!e)
        return false;
    if (l->edge == CORE_EDGE_LINK_UPLINK && l->dir == CORE_LINK_OUT) {
        core_addr_t *addr = core__addr_get_CT(core, CORE_EDGE_KEY, sizeof(CORE_EDGE_KEY) - 1,
                                              true, CFG_DIST_CLOSEST); /* qdrouterd's */
        l->addr = addr;
        core__consumer_add_CT(core, addr, l);
        e->uplink = l;
        LOG(DEBUG, "[C%llu][L%llu] Edge uplink attached", (unsigned long long)l->conn_id,
            (unsigned long long)l->id);
        return true;
    }
    if (l->edge == CORE_EDGE_LINK_PROXY_OUT && l->dir == CORE_LINK_OUT && address &&
        address[0] == 'M' && address[1]) {
        /* the worker names a proxy sender's address by its key */
        core_addr_t *addr = core__addr_get_CT(core, address, strlen(address), true, -1);
        if (addr->edge_out) /* a second one for the address: it stays unbound */
            return true;
        l->addr = addr;
        addr->edge_out = l;
        addr->edge_out_bound = false;
        return true;
    }
    return false;
}

void core_edge_link_detach_CT(core_t *core, core_link_t *l)
{
    struct core_edge *e = core->edge;
    if (l == e->uplink)
        e->uplink = NULL;
    core_addr_t *addr = l->addr;
    if (l->edge != CORE_EDGE_LINK_PROXY_OUT || !addr || addr->edge_out != l)
        return;
    addr->edge_out = NULL;
    if (addr->edge_out_bound) {
        addr->edge_out_bound = false; /* core.c takes it out of the consumers */
        return;
    }
    l->addr = NULL;
    core__addr_release_CT(core, addr);
}

void core_edge_local_CT(core_t *core, core_addr_t *addr, core_link_dir_t dir, bool add)
{
    if (!core->edge->active || !proxied(core, addr))
        return;
    /* local consumers: the edge receives the address from the interior (an IN link here);
     * local producers: it sends there (OUT) */
    proxy_CT(core, addr, dir == CORE_LINK_OUT ? CORE_LINK_IN : CORE_LINK_OUT, add);
}

/* May a copy of a delivery that came on `in` go out on `out`? Not back to the edge
 * connection it came from. */
static inline bool eligible(const core_link_t *in, const core_link_t *out)
{
    return !(in->edge && out->edge && in->conn_id == out->conn_id);
}

unsigned core_edge_deliver_CT(core_t *core, core_link_t *in, core_delivery_t *dlv,
                              core_addr_t *addr, cfg_distribution_t dist, int owner)
{
    struct core_edge *e = core->edge; /* NULL: an interior (no routes yet) */
    bool              anon = in->addr == NULL;
    core_link_t      *up = e && !in->edge && anon ? e->uplink : NULL; /* NULL: not up */
    if (!addr && up) {
        addr = up->addr;
        dist = addr->dist;
    }
    if (up && addr == up->addr)
        up = NULL; /* it is the uplink's own address: its consumer is the uplink */
    core_link_t *out[1];
    size_t       n = addr ? addr->consumers.count : 0;
    unsigned     copies = 0;
    if (dist == CFG_DIST_MULTICAST) {
        size_t elig = 0;
        for (size_t i = 0; i < n; i++)
            elig += eligible(in, addr->consumers.items[i]);
        bool also_up = up && !addr->edge_out_bound;
        copies = (unsigned)elig + also_up;
        if (copies == 0) {
            core__deliver_unroutable_CT(core, in, dlv, owner);
            return 0;
        }
        dlv->_mcast = true;
        core_content_ref(dlv->content, copies);
        for (size_t i = 0; i < n; i++) {
            core_link_t *l = addr->consumers.items[i];
            if (eligible(in, l)) {
                core__send_copy_CT(core, l, dlv);
                dlv->_out_link = l->id;
            }
        }
        if (also_up) {
            core__send_copy_CT(core, up, dlv);
            dlv->_out_link = up->id;
        }
        if (copies > 1)
            dlv->_out_link = 0;
    } else {
        core_link_t *best = NULL;
        size_t       start = n ? addr->rr++ % n : 0;
        for (size_t k = 0; k < n; k++) {
            core_link_t *l = addr->consumers.items[(start + k) % n];
            if (!eligible(in, l))
                continue;
            if (!best || (dist != CFG_DIST_CLOSEST && l->outstanding < best->outstanding))
                best = l;
            if (dist == CFG_DIST_CLOSEST)
                break;
        }
        if (!best)
            best = up;
        if (!best) {
            core__deliver_unroutable_CT(core, in, dlv, owner);
            return 0;
        }
        out[0] = best;
        core_content_ref(dlv->content, 1);
        core__send_copy_CT(core, out[0], dlv);
        dlv->_out_link = out[0]->id;
        copies = 1;
    }
    dlv->_copies = copies;
    core__addr_count_CT(core, in, addr, copies, 0);
    core__deliver_finish_CT(core, in, dlv, owner);
    return copies;
}

/* ---- the interior's side: address tracking for the edges attached to this router ---- */

void core_edge_track_CT(core_t *core, core_addr_t *addr)
{
    if (addr->key[0] != 'M' || core->edge)
        return;
    bool remote = core_addr_remote(addr);
    for (size_t i = 0; i < addr->senders.count; i++) {
        core_link_t *l = addr->senders.items[i];
        if (!l->edge)
            continue;
        /* a destination other than that edge: a remote router, or a consumer that is not
         * one of that edge's links (another edge's proxy receiver counts) */
        bool dest = remote;
        for (size_t k = 0; !dest && k < addr->consumers.count; k++)
            dest = !core_edge_echo(l, addr->consumers.items[k]);
        if (dest == l->edge_dest)
            continue;
        l->edge_dest = dest;
        core_work_t *w = core__work_add_CT(core, l->worker, CORE_W_EDGE, NULL);
        w->u.edge.conn_id = l->conn_id;
        w->u.edge.op = CORE_EDGE_TRACK_SEND;
        w->u.edge.key = base_strndup(addr->key, addr->keylen);
        w->u.edge.flag = dest;
    }
}
