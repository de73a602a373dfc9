/* core/core.c: the core thread - address table, link records, routing decisions, outcome
 * aggregation and credit policy (see core.h for the queues and the ownership rules).
 *
 * Thread suffixes used here: _CT = core thread only.  core_new/start/stop/free run on the
 * main thread; core_post() on any worker.
 *
 * DESIGN: one loop.  Take every queued action chunk at once, run each action, then hand each
 * worker the batch of work built during the pass with one push and one wake-up.  Nothing in
 * the loop blocks, allocates per message, or frees message memory: deliveries the core is
 * done with go back to their owner as CORE_W_RELEASE / CORE_W_SETTLE items in those batches.
 */
#include "core/core_int.h"

#include "core/base/list.h"
#include "core/base/log.h"
#include "core/base/pattern.h"
#include "core/edge_lookup.h"
#include "core/interior.h"
#include "core/linkroute.h"
#include "core/linkroute_mesh.h"
#include "core/rt.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define LOG(lvl, ...) base_log(BASE_LOG_MOD_ROUTER_CORE, BASE_LOG_##lvl, __VA_ARGS__)

/* The core counts into its own shard (core->shard) with stats_obj_add() and stats_obj_set():
 * any object may be written without a check, one without stats of its own (an in-process
 * link: none; no room in the registry: a sink) writes into the sink (stats/stats.h "The sink
 * rule"). */

/* ---- link sets ---- */

static void set_add(core_link_set_t *s, core_link_t *l)
{
    if (s->count == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 4;
        s->items = base_realloc(s->items, s->cap * sizeof(*s->items));
    }
    l->slot = s->count;
    s->items[s->count++] = l;
}

static void set_del(core_link_set_t *s, core_link_t *l)
{
    BASE_BUG_ON(l->slot >= s->count || s->items[l->slot] != l);
    core_link_t *last = s->items[--s->count];
    s->items[l->slot] = last;
    last->slot = l->slot;
}

/* ---- addresses ---- */

const char *core_addr_normalize(const char *addr, size_t len, size_t *out_len)
{
    const char *p = addr;
    const char *end = addr + len;
    if (len >= 7 && memcmp(p, "amqp://", 7) == 0) {
        p += 7;
        const char *slash = memchr(p, '/', (size_t)(end - p));
        p = slash ? slash + 1 : end;
    } else if (len >= 6 && memcmp(p, "amqp:/", 6) == 0) {
        p += 6;
    }
    while (p < end && *p == '/')
        p++;
    *out_len = (size_t)(end - p);
    return p;
}

/* Build the hash key of a normalized address into buf (qdrouterd's classes: L for addresses
 * local to this router, T for other topological ones, M0 for mobile addresses).  Returns the
 * key length, or 0 when buf is too small. Sets *mobile for M-class keys. */
static size_t addr_key_CT(core_t *core, const char *a, size_t n, char *buf, size_t cap,
                          bool *mobile)
{
    const char *rest = NULL;
    char cls = 0;
    size_t idlen = strlen(core->router_id);

    *mobile = false;
    if (n >= 7 && memcmp(a, "_local/", 7) == 0) {
        cls = 'L';
        rest = a + 7;
    } else if (n >= 6 && memcmp(a, "_edge/", 6) == 0) {
        /* _edge/<router>/<rest>: ours is local; another edge's is `H<router>` on an interior
         * (the edge's downlink serves it, core/edge.c), up the uplink on an edge */
        const char *q = a + 6, *end = a + n;
        const char *s1 = memchr(q, '/', (size_t)(end - q));
        size_t rlen = s1 ? (size_t)(s1 - q) : (size_t)(end - q);
        if (s1 && rlen == idlen && memcmp(q, core->router_id, idlen) == 0) {
            cls = 'L';
            rest = s1 + 1;
        } else if (core->edge) {
            goto uplink;
        } else {
            if (rlen + 1 > cap)
                return 0;
            buf[0] = 'H';
            memcpy(buf + 1, q, rlen);
            return rlen + 1;
        }
    } else if (n >= 6 && memcmp(a, "_topo/", 6) == 0) {
        /* _topo/<area>/<router>/<rest>: ours (or "all") is local; another router's of area 0
         * is that router's address, R<router> (qdrouterd's router class: every address of
         * the router is one), anything else topological */
        const char *q = a + 6, *end = a + n;
        const char *s1 = memchr(q, '/', (size_t)(end - q));
        const char *s2 = s1 ? memchr(s1 + 1, '/', (size_t)(end - s1 - 1)) : NULL;
        size_t      idl = s1 ? (size_t)((s2 ? s2 : end) - s1 - 1) : 0;
        bool        mine = idl && ((idl == idlen && memcmp(s1 + 1, core->router_id, idlen) == 0) ||
                                   (idl == 3 && memcmp(s1 + 1, "all", 3) == 0));
        if (s2 && mine) {
            cls = 'L';
            rest = s2 + 1;
        } else if (idl && !mine && s1 == q + 1 && *q == '0') {
            if (idl + 1 > cap)
                return 0;
            buf[0] = 'R';
            memcpy(buf + 1, s1 + 1, idl);
            return idl + 1;
        } else {
            cls = 'T';
            rest = a;
        }
        if (cls == 'T' && core->edge)
            goto uplink; /* an edge knows no other router: its interior does */
    } else {
        *mobile = true;
        if (n + 2 > cap)
            return 0;
        buf[0] = 'M';
        buf[1] = '0';
        memcpy(buf + 2, a, n);
        return n + 2;
    }
    size_t rlen = (size_t)(a + n - rest);
    if (rlen + 1 > cap)
        return 0;
    buf[0] = cls;
    memcpy(buf + 1, rest, rlen);
    return rlen + 1;
uplink:
    /* qdrouterd's edge keys every other router's address `L_edge`: the uplink's address */
    if (cap < sizeof(CORE_EDGE_KEY) - 1)
        return 0;
    memcpy(buf, CORE_EDGE_KEY, sizeof(CORE_EDGE_KEY) - 1);
    return sizeof(CORE_EDGE_KEY) - 1;
}

/* A name reserved with core_node_reserve(). */
static bool node_reserved_CT(const core_t *core, const char *a, size_t n)
{
    for (size_t i = 0; i < core->n_nodes; i++)
        if (strlen(core->nodes[i]) == n && memcmp(core->nodes[i], a, n) == 0)
            return true;
    return false;
}

/* Who may receive from an address, by its hash key. */
typedef enum addr_owner {
    OWNER_CLIENTS = 0, /* an ordinary address */
    OWNER_NODE,        /* a node of the router itself (core_node_reserve): in-process only */
    OWNER_DYNAMIC,     /* a dynamic address (Ltemp.*): only the receiver it was made for */
    OWNER_REMOTE,      /* another router's (T class): no route from a standalone router */
} addr_owner_t;

static addr_owner_t addr_owner_CT(const core_t *core, const char *key, size_t klen)
{
    if (key[0] == 'T' || key[0] == 'R' || key[0] == 'H')
        return OWNER_REMOTE;
    if (BASE_UNLIKELY(core->edge) && klen == sizeof(CORE_EDGE_KEY) - 1 &&
        memcmp(key, CORE_EDGE_KEY, klen) == 0)
        return OWNER_REMOTE; /* the uplink's: a client receiving there would take it all */
    if (key[0] == 'L' && klen > 5 && memcmp(key + 1, "temp.", 5) == 0)
        return OWNER_DYNAMIC;
    if (key[0] == 'L' && node_reserved_CT(core, key + 1, klen - 1))
        return OWNER_NODE;
    if (key[0] == 'M' && klen > 2 && node_reserved_CT(core, key + 2, klen - 2))
        return OWNER_NODE;
    return OWNER_CLIENTS;
}

static cfg_distribution_t addr_dist_CT(core_t *core, const char *a, size_t n, bool mobile)
{
    /* local addresses and the router's own nodes are never configured away */
    if (!mobile || node_reserved_CT(core, a, n))
        return CFG_DIST_BALANCED;
    const cfg_address_t *ac = base_pattern_match(core->patterns, a, n);
    return ac ? ac->distribution : core->cfg->router.default_distribution;
}

/* Which phase of a mobile address a link or delivery uses: PHASE_INGRESS (what producers
 * send), PHASE_EGRESS (what consumers receive), or an autoLink's own phase (0-9). */
enum { PHASE_INGRESS = -1, PHASE_EGRESS = -2 };

/* The phase digit of mobile address a (normalized) for `phase`: the address configuration's
 * ingressPhase / egressPhase (qdrouterd's waypoints), 0 when none is configured. */
static char addr_phase_CT(core_t *core, const char *a, size_t n, int phase)
{
    if (phase >= 0)
        return (char)('0' + phase);
    if (core->n_phased == 0 || node_reserved_CT(core, a, n))
        return '0';
    const cfg_address_t *ac = base_pattern_match(core->patterns, a, n);
    if (!ac)
        return '0';
    return (char)('0' + (phase == PHASE_INGRESS ? ac->ingress_phase : ac->egress_phase));
}

/* The hash key of a terminus/`to` string: in `stack` (cap bytes) when it fits, else on the
 * heap (the caller frees *key when it is not `stack`).  Returns the key length, 0 when it
 * cannot be keyed; *norm / *norm_len get the normalized address and *mobile its class.  A
 * mobile key gets the digit of `phase` (above). */
static size_t addr_key_make_CT(core_t *core, const char *text, size_t len, char *stack,
                               size_t cap, char **key, const char **norm, size_t *norm_len,
                               bool *mobile, int phase)
{
    size_t n;
    const char *a = core_addr_normalize(text, len, &n);
    char *buf = n + 2 <= cap ? stack : base_malloc(n + 2);
    *key = buf;
    *norm = a;
    *norm_len = n;
    size_t klen = addr_key_CT(core, a, n, buf, n + 2, mobile);
    if (klen && *mobile)
        buf[1] = addr_phase_CT(core, a, n, phase);
    return klen;
}

/* A new address with hash key key[0, klen) and treatment dist, in the table. */
static core_addr_t *addr_new_CT(core_t *core, const char *key, size_t klen,
                                cfg_distribution_t dist)
{
    core_addr_t *addr = base_calloc(1, sizeof(*addr));
    addr->key = base_strndup(key, klen);
    addr->keylen = klen;
    addr->dist = dist;
    /* the router's own nodes and other routers' addresses are closest, as qdrouterd shows
     * them (one consumer: the same choice as balanced) */
    if (key[0] == 'R' || addr_owner_CT(core, key, klen) == OWNER_NODE)
        addr->dist = dist = CFG_DIST_CLOSEST;
    base_map_put(&core->addrs, key, klen, addr);
    const char *labels[] = {addr->key, cfg_distribution_name(dist)};
    core_stats_object_new(core->stats, core->stats->address, labels, &addr->stats);
    LOG(DEBUG, "Address %s created (%s)", addr->key, cfg_distribution_name(dist));
    return addr;
}

/* Find the address for a terminus/`to` string, creating it when `create`.  Returns NULL when
 * it does not exist (and !create) or the address is too long to key. */
static core_addr_t *addr_lookup_CT(core_t *core, const char *text, size_t len, bool create,
                                   cfg_distribution_t *dist_out, int phase)
{
    char stack[512];
    char *buf;
    const char *a;
    size_t n;
    bool mobile;
    size_t klen = addr_key_make_CT(core, text, len, stack, sizeof(stack), &buf, &a, &n, &mobile,
                                   phase);
    core_addr_t *addr = klen ? base_map_get(&core->addrs, buf, klen) : NULL;

    if (!addr && klen) {
        cfg_distribution_t dist = addr_dist_CT(core, a, n, mobile);
        if (dist_out)
            *dist_out = dist;
        if (create)
            addr = addr_new_CT(core, buf, klen, dist);
    } else if (addr && dist_out) {
        *dist_out = addr->dist;
    }
    if (buf != stack)
        free(buf);
    return addr;
}

/* May a client's receiver (not dynamic) attach to `address`?  Returns true, or false with
 * the condition to refuse it with (*cond static, *desc heap). */
static bool receiver_admit_CT(core_t *core, const char *address, const char **cond,
                              char **desc)
{
    char stack[512];
    char *buf;
    const char *a;
    size_t n;
    bool mobile;
    size_t klen = addr_key_make_CT(core, address, strlen(address), stack, sizeof(stack), &buf,
                                   &a, &n, &mobile, PHASE_EGRESS);
    addr_owner_t owner = klen ? addr_owner_CT(core, buf, klen) : OWNER_CLIENTS;
    if (buf != stack)
        free(buf);
    char msg[400];
    switch (owner) {
    case OWNER_CLIENTS:
        return true;
    case OWNER_NODE:
        *cond = "amqp:unauthorized-access";
        snprintf(msg, sizeof(msg), "Receiving from %.200s is not allowed: it is the router's "
                 "own node (send requests to it, take replies on a dynamic receiver)", address);
        break;
    case OWNER_DYNAMIC:
        *cond = "amqp:unauthorized-access";
        snprintf(msg, sizeof(msg), "Receiving from %.200s is not allowed: it is a dynamic "
                 "address, for the receiver the router made it for only", address);
        break;
    case OWNER_REMOTE:
        /* qdrouterd's answer for a router it has no route to */
        *cond = "qd:no-route-to-dest";
        snprintf(msg, sizeof(msg), "No route to the destination node");
        break;
    }
    *desc = base_strdup(msg);
    return false;
}

static void addr_release_CT(core_t *core, core_addr_t *addr)
{
    if (addr->consumers.count || addr->senders.count || core_addr_remote(addr) || addr->tracked ||
        addr->edge_out)
        return;
    LOG(DEBUG, "Address %s removed", addr->key);
    stats_object_retire(core->stats->reg, addr->stats); /* live or sink */
    base_map_del(&core->addrs, addr->key, addr->keylen);
    free(addr->consumers.items);
    free(addr->senders.items);
    free(addr->ir_out);
    free(addr->key);
    free(addr);
}

void core__addr_release_CT(core_t *core, core_addr_t *addr)
{
    addr_release_CT(core, addr);
}

core_addr_t *core__addr_get_CT(core_t *core, const char *key, size_t klen, bool create,
                               int hint)
{
    core_addr_t *addr = base_map_get(&core->addrs, key, klen);
    if (addr || !create || klen < 2)
        return addr;
    bool mobile = key[0] == 'M';
    const char *a = key + (mobile ? 2 : 1);
    size_t n = klen - (mobile ? 2 : 1);
    cfg_distribution_t dist = !mobile && hint >= 0 ? (cfg_distribution_t)hint : CFG_DIST_BALANCED;
    if (mobile && !node_reserved_CT(core, a, n)) {
        const cfg_address_t *ac = base_pattern_match(core->patterns, a, n);
        dist = ac ? ac->distribution
             : hint >= 0 ? (cfg_distribution_t)hint
                         : core->cfg->router.default_distribution;
    }
    return addr_new_CT(core, key, klen, dist);
}

/* ---- work for the workers ---- */

static core_work_t *work_add_CT(core_t *core, int worker, core_work_type_t type, void *handle)
{
    core_work_t *w = base_mpsc_batch_add(&core->out[worker], sizeof(core_work_t));
    w->type = (uint8_t)type;
    w->handle = handle;
    return w;
}

static void flush_CT(core_t *core)
{
    for (int i = 0; i < core->n_workers; i++)
        if (!base_mpsc_batch_empty(&core->out[i]))
            base_mpsc_push(core->worker_q[i], &core->out[i]);
}

static void credit_CT(core_t *core, core_link_t *l, bool grant)
{
    if (l->credit_on == grant)
        return;
    l->credit_on = grant;
    work_add_CT(core, l->worker, CORE_W_LINK_CREDIT, l->handle)->u.credit.grant = grant;
}

void core__addr_credit_CT(core_t *core, core_addr_t *addr, bool grant)
{
    for (size_t i = 0; i < addr->senders.count; i++)
        credit_CT(core, addr->senders.items[i], grant);
}

/* Fallback destinations (fallback.c): whether addr's producers have somewhere to send while
 * addr has no consumer, i.e. its fallback destination has one. */
static bool fallback_serves_CT(core_t *core, const core_addr_t *addr)
{
    core_addr_t *fb = core_fallback_of_CT(core, addr);
    return fb && fb->consumers.count > 0;
}

/* fb's consumers came (have) or all went: the producers of the address fb is the fallback
 * destination of get credit, or lose it when that address has no consumer either (an in
 * autoLink with `fallback` only ever sends to the address's own consumers). */
static void fallback_consumers_CT(core_t *core, core_addr_t *fb, bool have)
{
    core_addr_t *primary = core_fallback_primary_CT(core, fb);
    if (!primary || (!have && primary->consumers.count > 0))
        return;
    for (size_t i = 0; i < primary->senders.count; i++)
        if (!primary->senders.items[i]->fallback)
            credit_CT(core, primary->senders.items[i], have);
}

static void free_disp_strings(core_disposition_t *d)
{
    BASE_FREE(d->cond_name);
    BASE_FREE(d->cond_desc);
}

/* Count an outcome on a link (and, for the sender's final outcome, on the router). */
static void count_outcome_CT(core_t *core, stats_obj_t link, uint8_t outcome, bool router)
{
    uint32_t lf, rf;
    switch (outcome) {
    case CORE_OUTCOME_ACCEPTED:
        lf = CORE_LINK_ACCEPTED;
        rf = CORE_ROUTER_ACCEPTED;
        break;
    case CORE_OUTCOME_REJECTED:
        lf = CORE_LINK_REJECTED;
        rf = CORE_ROUTER_REJECTED;
        break;
    case CORE_OUTCOME_MODIFIED:
        lf = CORE_LINK_MODIFIED;
        rf = CORE_ROUTER_MODIFIED;
        break;
    default:
        lf = CORE_LINK_RELEASED;
        rf = CORE_ROUTER_RELEASED;
        break;
    }
    stats_obj_add(core->shard, link, lf, 1);
    if (router)
        stats_obj_add(core->shard, core->stats->router_obj, rf, 1);
}

/* ---- time-based figures: settleRate, deliveriesDelayed*, deliveriesStuck ----
 * DESIGN: nothing here reads a clock.  The core reads a coarse monotonic clock once per loop
 * pass (core->now_ms); a delivery takes that as its arrival time, a settlement compares with
 * it (one subtraction), a settlement that counts for settleRate is one increment, and the
 * rest happens once a second in tick_CT(). */

/* A settlement that counts for the link's settleRate (qdrouterd: accepted, rejected, or
 * presettled and not released). */
static void rate_settled_CT(core_t *core, core_link_t *l)
{
    core_rate_add(&l->rate);
    if (!l->rate_on && stats_obj_is_live(l->stats)) { /* settleRate is a link stat only */
        l->rate_on = true;
        BASE_DLIST_PUSH(core->rate_links, l, rate_prev, rate_next);
    }
}

/* deliveriesDelayed1Sec / 10Sec of a delivery settled now: on the link, and on the router
 * for the sender's side (as qdrouterd: router totals count incoming links only). */
static void count_delay_CT(core_t *core, stats_obj_t link, const core_delivery_t *dlv,
                           bool router)
{
    int cls = core_delay_class(core->now_ms, dlv->_ingress_ms);
    if (BASE_LIKELY(cls == 0))
        return;
    stats_obj_add(core->shard, link, cls == 1 ? CORE_LINK_DELAYED_1S : CORE_LINK_DELAYED_10S, 1);
    if (router)
        stats_obj_add(core->shard, core->stats->router_obj,
                      cls == 1 ? CORE_ROUTER_DELAYED_1S : CORE_ROUTER_DELAYED_10S, 1);
}

static void inflight_del_CT(core_t *core, core_delivery_t *dlv)
{
    if (dlv->_listed) {
        BASE_DLIST_REMOVE_T(core->inflight, core->inflight_tail, dlv, _fprev, _fnext);
        dlv->_listed = false;
    }
}

/* One link's share of a stuck delivery. */
static void count_stuck_CT(core_t *core, uint64_t link_id)
{
    core_link_t *l = link_id ? base_map_uget(&core->links, link_id) : NULL;
    if (!l || stats_obj_is_none(l->stats))
        return; /* an in-process link's are not counted (a sink's are: it is a real link) */
    stats_obj_add(core->shard, l->stats, CORE_LINK_STUCK, 1);
    stats_obj_add(core->shard, core->stats->router_obj, CORE_ROUTER_STUCK, 1);
    if (++l->stuck == 1)
        LOG(INFO, "[C%llu][L%llu] Stuck delivery: at least one delivery on this link has been "
            "unsettled for more than %u seconds", (unsigned long long)l->conn_id,
            (unsigned long long)l->id, CORE_STUCK_AGE_MS / 1000);
}

/* Once a second: deliveries that became stuck (the in-flight list is in arrival order, so
 * the walk stops at the first young one and visits each delivery once), and the settleRate
 * window of every link that settled something in the last CORE_RATE_DEPTH seconds. */
static void tick_CT(core_t *core)
{
    uint64_t secs = (core->now_ms - core->tick_ms) / 1000;
    core->tick_ms += secs * 1000;

    core_delivery_t *d;
    while ((d = core->inflight) != NULL && core->now_ms - d->_ingress_ms > CORE_STUCK_AGE_MS) {
        inflight_del_CT(core, d);
        count_stuck_CT(core, d->link_id);
        count_stuck_CT(core, d->_out_link);
    }

    core_link_t *l = core->rate_links;
    while (l) {
        core_link_t *next = l->rate_next;
        stats_obj_set(core->shard, l->stats, CORE_LINK_SETTLE_RATE, core_rate_tick(&l->rate, secs));
        if (core_rate_idle(&l->rate)) {
            BASE_DLIST_REMOVE(core->rate_links, l, rate_prev, rate_next);
            l->rate_on = false;
        }
        l = next;
    }
    core_autolink_tick_CT(core);
    if (core->rt)
        core_rt_tick_CT(core);
}

static uint64_t clock_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Final outcome for an incoming delivery: hand it back to its owner with the outcome. */
static void settle_in_CT(core_t *core, int owner, core_delivery_t *dlv, core_disposition_t *disp)
{
    core_link_t *in = base_map_uget(&core->links, dlv->link_id);
    count_outcome_CT(core, in ? in->stats : (stats_obj_t){0, 0, 0}, disp->outcome, true);
    inflight_del_CT(core, dlv);
    if (in) {
        count_delay_CT(core, in->stats, dlv, true);
        if (disp->outcome == CORE_OUTCOME_ACCEPTED || disp->outcome == CORE_OUTCOME_REJECTED)
            rate_settled_CT(core, in);
    }
    core_work_t *w = work_add_CT(core, owner, CORE_W_SETTLE, NULL);
    w->u.settle.dlv = dlv;
    w->u.settle.disp = *disp;
    memset(disp, 0, sizeof(*disp));
}

static void reject_in_CT(core_t *core, int owner, core_delivery_t *dlv, const char *cond,
                         const char *desc)
{
    if (dlv->presettled) {
        work_add_CT(core, owner, CORE_W_RELEASE, NULL)->u.release = dlv;
        return;
    }
    core_disposition_t d = {.outcome = CORE_OUTCOME_REJECTED,
                            .cond_name = base_strdup(cond),
                            .cond_desc = base_strdup(desc)};
    settle_in_CT(core, owner, dlv, &d);
}

/* ---- links ---- */

/* The phase a client link's qd.waypoint / qd.fallback capability picks, as qdrouterd 1.19's
 * address lookup does: a fallback receiver takes from the address's fallback destination, and
 * so does a fallback sender of an edge (its proxy for the fallback destination), while a
 * client's fallback sender sends into the ingress phase and is marked like an in autoLink with
 * `fallback`; a waypoint's ordinal N is phase N for a sender, N - 1 for a receiver. */
static int cap_phase_CT(const core_action_t *a, core_link_t *l)
{
    if (a->u.attach.fallback) {
        l->fallback = true;
        return l->dir == CORE_LINK_OUT || l->edge ? CORE_PHASE_FALLBACK : PHASE_INGRESS;
    }
    return l->dir == CORE_LINK_IN ? a->u.attach.waypoint : a->u.attach.waypoint - 1;
}

/* Resolve a new link's address and answer its attach (w). */
/* *lr_key: for a link-routed link, a new "M0<address>" (the owningAddr qdrouterd shows for
 * both ends of a routed link), else untouched. */
static void link_route_CT(core_t *core, core_link_t *l, core_action_t *a, core_work_t *w,
                          char **lr_key)
{
    char *address = a->u.attach.address;
    char dyn[256];

    if (a->u.attach.dynamic) {
        /* A fresh local address: amqp:/_topo/0/<router-id>/temp.<unique> */
        /* an edge's is under _edge/, which its interior routes down to it (qdrouterd's) */
        snprintf(dyn, sizeof(dyn), core->edge ? "amqp:/_edge/%s/temp.%08llx%06llx"
                                              : "amqp:/_topo/0/%s/temp.%08llx%06llx",
                 core->router_id,
                 (unsigned long long)(core->temp_salt & 0xffffffffu),
                 (unsigned long long)++core->temp_seq);
        free(address);
        address = base_strdup(dyn);
        w->u.attached.address = base_strdup(dyn);
    }

    if (core_lr_route_attach_CT(core, a, w)) {
        l->addr = NULL; /* link-routed: the record stays until the worker detaches it */
        size_t n = strlen(address ? address : "") + 3;
        *lr_key = base_malloc(n);
        snprintf(*lr_key, n, "M0%s", address ? address : "");
        free(address);
        return;
    }
    const char *cond = NULL;
    char *desc = NULL;
    if (address && *address && l->conn_id != 0 && l->dir == CORE_LINK_OUT &&
        !a->u.attach.dynamic && l->edge != CORE_EDGE_LINK_DOWNLINK &&
        !receiver_admit_CT(core, address, &cond, &desc)) {
        w->u.attached.cond_name = (char *)cond;
        w->u.attached.cond_desc = desc;
        LOG(INFO, "[C%llu][L%llu] Link refused: %s %s", (unsigned long long)l->conn_id,
            (unsigned long long)l->id, cond, desc);
        l->addr = NULL;
        free(address);
        return; /* the record stays until the worker detaches it */
    }
    if (BASE_UNLIKELY(l->edge == CORE_EDGE_LINK_PROXY_OUT || l->edge == CORE_EDGE_LINK_UPLINK) &&
        core_edge_link_attach_CT(core, l, address)) {
        free(address);
        return;
    }
    if (address && *address) {
        cfg_distribution_t dist = CFG_DIST_BALANCED;
        /* an autoLink's link uses its own phase; a client's the address's, or the one its
         * terminus's capability names */
        int phase = core_autolink_phase_CT(core, l->id);
        if (phase >= 0)
            l->fallback = core_autolink_fallback_CT(core, l->id);
        else if (BASE_UNLIKELY(a->u.attach.waypoint || a->u.attach.fallback))
            phase = cap_phase_CT(a, l);
        else
            phase = l->dir == CORE_LINK_OUT ? PHASE_EGRESS : PHASE_INGRESS;
        core_addr_t *addr = NULL;
        if (BASE_UNLIKELY(l->edge == CORE_EDGE_LINK_PROXY_IN)) /* named by its hash key */
            addr = core__addr_get_CT(core, address, strlen(address), true, -1);
        else
            addr = addr_lookup_CT(core, address, strlen(address), false, &dist, phase);
        if (!addr && dist == CFG_DIST_UNAVAILABLE) {
            w->u.attached.cond_name = "amqp:not-found";
            char msg[300];
            snprintf(msg, sizeof(msg), "Node not found: %.200s", address);
            w->u.attached.cond_desc = base_strdup(msg);
            LOG(INFO, "[C%llu][L%llu] Link refused: address %s has distribution unavailable",
                (unsigned long long)l->conn_id, (unsigned long long)l->id, address);
            l->addr = NULL;
            free(address);
            return; /* the record stays until the worker detaches it */
        }
        if (!addr)
            addr = addr_lookup_CT(core, address, strlen(address), true, NULL, phase);
        l->addr = addr;
        if (addr->key[0] == 'R' && l->dir == CORE_LINK_IN) {
            size_t      nlen;
            const char *norm = core_addr_normalize(address, strlen(address), &nlen);
            l->topo_to = base_strndup(norm, nlen);
        }
        if (BASE_UNLIKELY(addr->key[0] == 'H') && l->dir == CORE_LINK_IN)
            l->edge_to = base_strdup(address); /* an edge's address (core/edge.c) */
        if (l->dir == CORE_LINK_OUT) {
            core__consumer_add_CT(core, addr, l);
        } else {
            set_add(&addr->senders, l);
            if (l->edge) {
                addr->n_edge_snd++;
                l->edge_dest = false;
                if (!core->edge)
                    core_edge_track_CT(core, addr); /* interior: an edge's producer */
            } else if (BASE_UNLIKELY(core->edge) && l->conn_id &&
                     addr->senders.count - addr->n_edge_snd == 1)
                core_edge_local_CT(core, addr, CORE_LINK_IN, true);
            if (addr->consumers.count > 0 || core_addr_reached(core, addr) ||
                (!l->fallback && fallback_serves_CT(core, addr)))
                credit_CT(core, l, true);
        }
        LOG(DEBUG, "[C%llu][L%llu] Link attached %s address %s",
            (unsigned long long)l->conn_id, (unsigned long long)l->id,
            l->dir == CORE_LINK_OUT ? "outgoing" : "incoming", addr->key);
    } else if (l->dir == CORE_LINK_IN) {
        /* anonymous sender: routed per message by `to`; credit at once */
        credit_CT(core, l, true);
        LOG(DEBUG, "[C%llu][L%llu] Anonymous sender attached", (unsigned long long)l->conn_id,
            (unsigned long long)l->id);
    } else {
        LOG(DEBUG, "[C%llu][L%llu] Receiver attached with no address",
            (unsigned long long)l->conn_id, (unsigned long long)l->id);
    }
    free(address);
}

void core__consumer_add_CT(core_t *core, core_addr_t *addr, core_link_t *l)
{
    set_add(&addr->consumers, l);
    if (l->edge)
        addr->n_edge_cons++;
    if (l->conn_id == 0)
        addr->inproc++;
    if (addr->consumers.count == 1 && !core_addr_reached(core, addr)) {
        for (size_t i = 0; i < addr->senders.count; i++)
            credit_CT(core, addr->senders.items[i], true);
        fallback_consumers_CT(core, addr, true);
    }
    if (addr->consumers.count == 1 && core->rt && l->conn_id)
        core_rt_local_dest_CT(core, addr->key, addr->keylen, addr->dist, true);
    if (BASE_UNLIKELY(core->edge) && !l->edge && l->conn_id &&
        addr->consumers.count - addr->n_edge_cons == 1)
        core_edge_local_CT(core, addr, CORE_LINK_OUT, true);
    if (BASE_UNLIKELY(addr->n_edge_snd) && !core->edge)
        core_edge_track_CT(core, addr);
}

void core__consumer_del_CT(core_t *core, core_addr_t *addr, core_link_t *l)
{
    set_del(&addr->consumers, l);
    if (l->edge)
        addr->n_edge_cons--;
    if (l->conn_id == 0 && addr->inproc)
        addr->inproc--;
    if (addr->consumers.count == 0 && !core_addr_reached(core, addr)) {
        bool fb = fallback_serves_CT(core, addr);
        for (size_t i = 0; i < addr->senders.count; i++)
            if (!fb || addr->senders.items[i]->fallback)
                credit_CT(core, addr->senders.items[i], false);
        fallback_consumers_CT(core, addr, false);
    }
    if (addr->consumers.count == 0 && core->rt && l->conn_id)
        core_rt_local_dest_CT(core, addr->key, addr->keylen, addr->dist, false);
    if (BASE_UNLIKELY(core->edge) && !l->edge && l->conn_id &&
        addr->consumers.count == addr->n_edge_cons)
        core_edge_local_CT(core, addr, CORE_LINK_OUT, false);
    if (BASE_UNLIKELY(addr->n_edge_snd) && !core->edge)
        core_edge_track_CT(core, addr);
}

bool core__node_reserved_CT(const core_t *core, const char *name, size_t n)
{
    return node_reserved_CT(core, name, n);
}

core_work_t *core__work_add_CT(core_t *core, int worker, core_work_type_t type, void *handle)
{
    return work_add_CT(core, worker, type, handle);
}

static void addr_gauges_CT(core_t *core, core_addr_t *addr)
{
    stats_obj_set(core->shard, addr->stats, CORE_ADDR_SUBSCRIBERS,
                  (int64_t)(addr->consumers.count - addr->inproc));
    stats_obj_set(core->shard, addr->stats, CORE_ADDR_IN_PROCESS, (int64_t)addr->inproc);
    stats_obj_set(core->shard, addr->stats, CORE_ADDR_SENDERS, (int64_t)addr->senders.count);
}

void core__link_attach_CT(core_t *core, core_action_t *a)
{
    core_link_t *l = base_calloc(1, sizeof(*l));
    l->id = a->link_id;
    l->conn_id = a->u.attach.conn_id;
    l->handle = a->u.attach.handle;
    l->worker = a->worker;
    l->dir = a->u.attach.dir;
    l->capacity = a->u.attach.capacity;
    l->ir_link = a->u.attach.ir_link;
    l->ir_priority = a->u.attach.ir_priority;
    l->ir_conn = -1;
    l->edge = a->u.attach.edge;
    BASE_BUG_ON(base_map_uput(&core->links, l->id, l) != NULL);

    core_work_t *w = work_add_CT(core, l->worker, CORE_W_LINK_ATTACHED, l->handle);
    char        *lr_key = NULL;
    link_route_CT(core, l, a, w, &lr_key);

    char id[24], conn[24];
    snprintf(id, sizeof(id), "%llu", (unsigned long long)l->id);
    snprintf(conn, sizeof(conn), "%llu", (unsigned long long)l->conn_id);
    /* an inter-router data link shows its priority, as qdrouterd's (type inter-router) */
    char prio[4];
    snprintf(prio, sizeof(prio), "%u",
             l->ir_link == CORE_IR_LINK_DATA ? (unsigned)l->ir_priority : 4u);
    const char *labels[] = {id, conn, l->dir == CORE_LINK_OUT ? "out" : "in",
                            l->addr ? l->addr->key : lr_key ? lr_key : "",
                            a->u.attach.name ? a->u.attach.name : "",
                            l->ir_link == CORE_IR_LINK_DATA           ? "inter-router"
                            : l->edge == CORE_EDGE_LINK_DOWNLINK ? "edge-downlink"
                                                                 : "endpoint",
                            prio};
    /* conn_id 0: an in-process link (the management agent's): no router.link row, as in
     * qdrouterd where the agent is not a link */
    if (l->conn_id != 0)
        core_stats_object_new(core->stats, core->stats->link, labels, &l->stats);
    stats_obj_set(core->shard, l->stats, CORE_LINK_CAPACITY, l->capacity);
    /* live, sink or none: the worker writes it unchecked */
    w->u.attached.stats = l->stats;
    if (l->addr)
        addr_gauges_CT(core, l->addr);
    if (BASE_UNLIKELY(l->ir_link))
        core_ir_link_attach_CT(core, l);
    BASE_FREE(a->u.attach.name);
    free(lr_key);
}

static void link_attach_CT(core_t *core, core_action_t *a)
{
    /* an edge may ask its interior whether the address is link-routed first */
    if (BASE_UNLIKELY(core->edge != NULL) && core_elk_attach_CT(core, a))
        return;
    core__link_attach_CT(core, a);
}

static void link_detach_CT(core_t *core, core_action_t *a)
{
    if (BASE_UNLIKELY(core->elk != NULL))
        core_elk_detach_CT(core, a->link_id); /* an attach still waiting is answered first */
    core_link_t *l = base_map_udel(&core->links, a->link_id);
    if (BASE_WARN_ONCE(!l))
        return;
    if (BASE_UNLIKELY(l->ir_link))
        core_ir_link_detach_CT(core, l);
    if (BASE_UNLIKELY(core->edge != NULL))
        core_edge_link_detach_CT(core, l); /* an unbound proxy sender leaves l->addr NULL */
    core_addr_t *addr = l->addr;
    if (addr) {
        if (l->dir == CORE_LINK_OUT) {
            core__consumer_del_CT(core, addr, l);
        } else {
            set_del(&addr->senders, l);
            if (l->edge)
                addr->n_edge_snd--;
            else if (BASE_UNLIKELY(core->edge) && l->conn_id &&
                     addr->senders.count == addr->n_edge_snd)
                core_edge_local_CT(core, addr, CORE_LINK_IN, false);
        }
        addr_gauges_CT(core, addr);
        addr_release_CT(core, addr);
    }
    if (l->rate_on)
        BASE_DLIST_REMOVE(core->rate_links, l, rate_prev, rate_next);
    core_autolink_link_gone_CT(core, l->id);
    work_add_CT(core, l->worker, CORE_W_LINK_DETACHED, l->handle);
    LOG(DEBUG, "[C%llu][L%llu] Link detached", (unsigned long long)l->conn_id,
        (unsigned long long)l->id);
    /* the worker's last write to the link's stats came before its detach action; a none
     * object (in-process link) is not retired */
    if (!stats_obj_is_none(l->stats))
        stats_object_retire(core->stats->reg, l->stats);
    free(l->topo_to);
    free(l->edge_to);
    free(l);
}

/* ---- forwarding ---- */

static core_work_t *send_copy_CT(core_t *core, core_link_t *out, core_delivery_t *dlv)
{
    core_work_t *w = work_add_CT(core, out->worker, CORE_W_SEND, out->handle);
    w->u.send.dlv = dlv->presettled ? NULL : dlv;
    w->u.send.content = dlv->content;
    w->u.send.presettled = dlv->presettled;
    if (!dlv->presettled) {
        out->outstanding++;
        stats_obj_set(core->shard, out->stats, CORE_LINK_UNSETTLED, out->outstanding);
    } else {
        stats_obj_add(core->shard, out->stats, CORE_LINK_PRESETTLED, 1);
        rate_settled_CT(core, out);
    }
    out->delivered++;
    stats_obj_add(core->shard, out->stats, CORE_LINK_DELIVERIES, 1);
    return w;
}

core_work_t *core__send_copy_CT(core_t *core, core_link_t *out, core_delivery_t *dlv)
{
    return send_copy_CT(core, out, dlv);
}

/* No route: unsettled comes back RELEASED; presettled is dropped. */
static void deliver_unroutable_CT(core_t *core, core_link_t *in, core_delivery_t *dlv, int owner)
{
    if (dlv->presettled) {
        stats_obj_add(core->shard, core->stats->router_obj, CORE_ROUTER_DROPPED_PRESETTLED, 1);
        stats_obj_add(core->shard, in->stats, CORE_LINK_DROPPED_PRESETTLED, 1);
        work_add_CT(core, owner, CORE_W_RELEASE, NULL)->u.release = dlv;
    } else {
        core_disposition_t d = {.outcome = CORE_OUTCOME_RELEASED};
        settle_in_CT(core, owner, dlv, &d);
    }
}

void core__deliver_unroutable_CT(core_t *core, core_link_t *in, core_delivery_t *dlv, int owner)
{
    deliver_unroutable_CT(core, in, dlv, owner);
}

/* The copies are out: an unsettled delivery waits for their outcomes on the in-flight list;
 * a presettled one is done. */
static void deliver_finish_CT(core_t *core, core_link_t *in, core_delivery_t *dlv, int owner)
{
    if (!dlv->presettled) {
        BASE_DLIST_APPEND(core->inflight, core->inflight_tail, dlv, _fprev, _fnext);
        dlv->_listed = true;
    } else {
        /* at-most-once: nothing will come back; the owner may recycle it now */
        rate_settled_CT(core, in);
        dlv->_copies = 0;
        work_add_CT(core, owner, CORE_W_RELEASE, NULL)->u.release = dlv;
    }
}

void core__addr_count_CT(core_t *core, const core_link_t *in, core_addr_t *addr,
                         unsigned local, unsigned transit)
{
    stats_obj_t router = core->stats->router_obj;
    bool        to_proc = addr && addr->inproc; /* clients never consume there */
    if (addr) {
        if (in->conn_id == 0)
            stats_obj_add(core->shard, addr->stats, CORE_ADDR_FROM_PROC, 1);
        else if (in->ir_link == CORE_IR_LINK_NONE)
            stats_obj_add(core->shard, addr->stats, CORE_ADDR_INGRESS, 1);
        stats_obj_add(core->shard, addr->stats, to_proc ? CORE_ADDR_TO_PROC : CORE_ADDR_EGRESS,
                      local);
        stats_obj_add(core->shard, addr->stats, CORE_ADDR_TRANSIT, transit);
    }
    if (!to_proc)
        stats_obj_add(core->shard, router, CORE_ROUTER_EGRESS, local);
    stats_obj_add(core->shard, router, CORE_ROUTER_TRANSIT, transit);
}

void core__deliver_finish_CT(core_t *core, core_link_t *in, core_delivery_t *dlv, int owner)
{
    deliver_finish_CT(core, in, dlv, owner);
}

/* Balanced: the consumer with the fewest unsettled copies; ties go round-robin. */
static core_link_t *pick_balanced_CT(core_addr_t *addr)
{
    size_t n = addr->consumers.count;
    size_t start = addr->rr++ % n;
    core_link_t *best = NULL;
    for (size_t k = 0; k < n; k++) {
        core_link_t *l = addr->consumers.items[(start + k) % n];
        if (!best || l->outstanding < best->outstanding)
            best = l;
    }
    return best;
}

/* Route one delivery; returns the number of copies made. */
static unsigned deliver_CT(core_t *core, core_action_t *a)
{
    core_delivery_t *dlv = a->u.dlv;
    core_link_t *in = base_map_uget(&core->links, a->link_id);
    int owner = a->worker;
    core_addr_t *addr = NULL;
    cfg_distribution_t dist = CFG_DIST_BALANCED;

    memset(&dlv->_result, 0, sizeof(dlv->_result));
    dlv->_copies = 0;
    dlv->_mcast = false;
    dlv->_listed = false;
    dlv->_out_link = 0;
    dlv->_track_addr = NULL;
    dlv->_ingress_ms = core->now_ms;

    if (BASE_WARN_ONCE(!in)) {
        core_disposition_t d = {.outcome = CORE_OUTCOME_RELEASED};
        if (dlv->presettled)
            work_add_CT(core, owner, CORE_W_RELEASE, NULL)->u.release = dlv;
        else
            settle_in_CT(core, owner, dlv, &d);
        return 0;
    }
    in->delivered++;
    stats_obj_t router = core->stats->router_obj;
    stats_obj_add(core->shard, router, CORE_ROUTER_INGRESS, 1);
    stats_obj_add(core->shard, in->stats, CORE_LINK_DELIVERIES, 1);
    if (dlv->presettled) {
        stats_obj_add(core->shard, router, CORE_ROUTER_PRESETTLED, 1);
        stats_obj_add(core->shard, in->stats, CORE_LINK_PRESETTLED, 1);
    }
    if (in->addr) {
        addr = in->addr;
        dist = addr->dist;
    } else {
        if (!dlv->to) {
            reject_in_CT(core, owner, dlv, "amqp:precondition-failed",
                         "Routing failure: no address present");
            return 0;
        }
        /* interior: x-opt-qd.phase names the phase of x-opt-qd.to (a waypoint's next leg) */
        int phase = BASE_UNLIKELY(dlv->ra_phase && core->ir) ? dlv->ra_phase - 1 : PHASE_INGRESS;
        addr = addr_lookup_CT(core, dlv->to, dlv->to_len, false, &dist, phase);
    }
    if (dist == CFG_DIST_UNAVAILABLE) {
        reject_in_CT(core, owner, dlv, "amqp:not-found",
                     "Deliveries cannot be sent to an unavailable address");
        return 0;
    }

    size_t n = addr ? addr->consumers.count : 0;
    if (n == 0 && addr && !in->fallback && !core_addr_reached(core, addr) &&
        !(core->edge && !in->addr)) {
        /* no destination: the address's fallback destination, if it has one that has a
         * consumer here (on an interior, an edge's proxy receiver; on an edge, the bound proxy
         * sender).  An edge's anonymous sender's delivery goes up instead, as qdrouterd's. */
        core_addr_t *fb = core_fallback_of_CT(core, addr);
        if (fb && fb->consumers.count > 0) {
            stats_obj_add(core->shard, addr->stats, CORE_ADDR_REDIRECTED, 1);
            stats_obj_add(core->shard, router, CORE_ROUTER_REDIRECTED, 1);
            addr = fb;
            dist = fb->dist;
            n = fb->consumers.count;
        }
    }
    if (BASE_UNLIKELY(core->ir != NULL))
        return core_ir_deliver_CT(core, in, dlv, addr, dist, owner);
    if (BASE_UNLIKELY(core->edge != NULL || in->edge))
        return core_edge_deliver_CT(core, in, dlv, addr, dist, owner); /* an edge's rules, or
                                           an interior alone with its edges: the echo rule */
    if (n == 0) {
        deliver_unroutable_CT(core, in, dlv, owner);
        return 0;
    }
    if (dist == CFG_DIST_MULTICAST) {
        dlv->_mcast = true;
        core_content_ref(dlv->content, (unsigned)n);
        for (size_t i = 0; i < n; i++)
            send_copy_CT(core, addr->consumers.items[i], dlv);
        dlv->_copies = (uint32_t)n;
        if (n == 1)
            dlv->_out_link = addr->consumers.items[0]->id;
    } else {
        core_link_t *out = dist == CFG_DIST_CLOSEST ? addr->consumers.items[addr->rr++ % n]
                                                    : pick_balanced_CT(addr);
        core_content_ref(dlv->content, 1);
        send_copy_CT(core, out, dlv);
        dlv->_copies = 1;
        dlv->_out_link = out->id;
    }
    unsigned copies = dlv->_copies;
    core__addr_count_CT(core, in, addr, copies, 0);
    deliver_finish_CT(core, in, dlv, owner);
    return copies;
}

/* Multicast aggregation: Rejected > Accepted > Modified > Released (qdrouterd's rule). */
static int outcome_rank(uint8_t o)
{
    switch (o) {
    case CORE_OUTCOME_REJECTED:
        return 3;
    case CORE_OUTCOME_ACCEPTED:
        return 2;
    case CORE_OUTCOME_MODIFIED:
        return 1;
    case CORE_OUTCOME_RELEASED:
        return 0;
    default:
        return -1;
    }
}

static void disposition_CT(core_t *core, core_action_t *a)
{
    core_delivery_t *dlv = a->u.disposition.dlv;
    core_disposition_t *d = &a->u.disposition.disp;
    core_link_t *out = base_map_uget(&core->links, a->link_id);

    if (out) {
        if (out->outstanding)
            out->outstanding--;
        stats_obj_set(core->shard, out->stats, CORE_LINK_UNSETTLED, out->outstanding);
        count_outcome_CT(core, out->stats, d->outcome, false);
        count_delay_CT(core, out->stats, dlv, false);
        if (d->outcome == CORE_OUTCOME_ACCEPTED || d->outcome == CORE_OUTCOME_REJECTED)
            rate_settled_CT(core, out);
    }
    BASE_BUG_ON(dlv->_copies == 0);
    if (BASE_UNLIKELY(dlv->_track_addr != NULL))
        core_ir_untrack_CT(core, dlv);

    if (outcome_rank(d->outcome) > outcome_rank(dlv->_result.outcome)) {
        free_disp_strings(&dlv->_result);
        dlv->_result = *d;
        memset(d, 0, sizeof(*d));
    } else {
        free_disp_strings(d);
    }
    if (--dlv->_copies > 0)
        return;
    if (dlv->_result.outcome == CORE_OUTCOME_NONE)
        dlv->_result.outcome = CORE_OUTCOME_RELEASED;
    /* The owner is the worker that posted CORE_A_DELIVER; it is recorded in the incoming
     * link, which may be gone by now, so the delivery carries it. */
    settle_in_CT(core, dlv->_owner, dlv, &dlv->_result);
}

static void run_action_CT(core_t *core, core_action_t *a)
{
    switch ((core_action_type_t)a->type) {
    case CORE_A_LINK_ATTACH:
        link_attach_CT(core, a);
        break;
    case CORE_A_LINK_DETACH:
        link_detach_CT(core, a);
        break;
    case CORE_A_DELIVER: {
        core_delivery_t *dlv = a->u.dlv;
        core_content_t *content = dlv->content;
        dlv->_owner = a->worker;
        unsigned copies = deliver_CT(core, a);
        core_content_routed(content, copies);
        break;
    }
    case CORE_A_DISPOSITION:
        disposition_CT(core, a);
        break;
    case CORE_A_CALL:
        a->u.call.fn(core, a->u.call.arg);
        break;
    case CORE_A_CONN_OPENED:
    case CORE_A_CONN_CLOSED:
        /* one announcement serves both: link routes read the strings, autoLinks then keep
         * them */
        core_lr_conn_action_CT(core, a);
        core_autolink_action_CT(core, a);
        break;
    case CORE_A_AUTOLINK:
        core_autolink_action_CT(core, a);
        break;
    case CORE_A_EDGE:
        if (core->edge)
            core_edge_action_CT(core, a);
        else if (a->u.edge.event == CORE_EDGE_LOOKUP)
            core_elk_serve_CT(core, a); /* an edge's address lookup (edge_lookup.c) */
        else
            core_edge_action_discard(a);
        break;
    case CORE_A_RT:
        if (core->rt)
            core_rt_action_CT(core, a);
        else
            core_rt_action_discard(a);
        break;
    }
}

static void run_action_cb(void *core, void *a)
{
    run_action_CT(core, a);
}

static void *core_thread_main(void *arg)
{
    core_t *core = arg;
    base_thread_set_role(BASE_THREAD_CORE, 0);
    pthread_setname_np(pthread_self(), "junction-core");
    core->shard = stats_shard_new(core->stats->reg);
    core->now_ms = core->tick_ms = clock_ms();
    LOG(INFO, "Core thread started");
    for (;;) {
        base_mpsc_chunk_t *c = base_mpsc_take(&core->in);
        core->now_ms = clock_ms(); /* once per pass, not per delivery */
        if (core->now_ms - core->tick_ms >= 1000)
            tick_CT(core);
        if (!c) {
            flush_CT(core);
            uint64_t wait = 1000 - (core->now_ms - core->tick_ms);
            if (!base_mpsc_wait(&core->in, (int)wait))
                break;
            continue;
        }
        base_mpsc_chunks_drain(c, run_action_cb, core);
        flush_CT(core);
    }
    flush_CT(core);
    stats_shard_free(core->stats->reg, core->shard);
    core->shard = NULL;
    LOG(INFO, "Core thread stopped");
    return NULL;
}

/* ---- life cycle (main thread) ---- */

core_t *core_new(const cfg_t *cfg, const core_stats_t *stats, int n_workers,
                 base_mpsc_t **worker_q)
{
    core_t *core = base_calloc(1, sizeof(*core));
    core->cfg = cfg;
    core->stats = stats;
    core->router_id = base_strdup(cfg->router.id);
    core->n_workers = n_workers;
    core->worker_q = worker_q;
    core->out = base_calloc((size_t)n_workers, sizeof(*core->out));
    base_mpsc_init(&core->in, NULL, NULL);
    base_map_init(&core->links);
    base_map_init(&core->addrs);
    core->patterns = base_pattern_new();
    for (size_t i = 0; i < cfg->n_addresses; i++) {
        const cfg_address_t *ac = &cfg->addresses[i];
        bool prefix = ac->prefix != NULL;
        const char *text = prefix ? ac->prefix : ac->pattern;
        if ((prefix ? base_pattern_add_prefix(core->patterns, text, (void *)ac)
                   : base_pattern_add(core->patterns, text, (void *)ac)) != 0)
            LOG(WARNING, "Address configuration %s '%s' duplicates an earlier one; ignored",
                prefix ? "prefix" : "pattern", text);
    }
    for (size_t i = 0; i < cfg->n_addresses; i++)
        if (cfg->addresses[i].ingress_phase || cfg->addresses[i].egress_phase)
            core->n_phased++;
    core_autolink_init(core);
    core->lr = core_lr_table_load(cfg);
    if (cfg->router.interior)
        core->rt = core_rt_new(cfg, core->router_id);
    if (cfg->router.edge)
        core_edge_init(core);
    if (getrandom(&core->temp_salt, sizeof(core->temp_salt), 0) != sizeof(core->temp_salt))
        core->temp_salt = base_now_ns();
    return core;
}

int core_start(core_t *core)
{
    int rc = pthread_create(&core->thread, NULL, core_thread_main, core);
    if (rc != 0)
        return -rc;
    core->started = true;
    return 0;
}

void core_stop(core_t *core)
{
    if (!core->started)
        return;
    base_mpsc_interrupt(&core->in);
    pthread_join(core->thread, NULL);
    core->started = false;
}

/* An action posted after the core stopped (an attach the management agent made while the
 * router was already shutting down): free the strings it carries. */
static void free_late_action_cb(void *ctx, void *item)
{
    core_action_t *a = item;
    (void)ctx;
    if (a->type == CORE_A_LINK_ATTACH) {
        free(a->u.attach.address);
        free(a->u.attach.name);
    } else if (a->type == CORE_A_DISPOSITION) {
        free_disp_strings(&a->u.disposition.disp);
    } else if (a->type == CORE_A_RT) {
        core_rt_action_discard(a);
    } else if (a->type == CORE_A_EDGE) {
        core_edge_action_discard(a);
    } else {
        core_autolink_action_discard(a);
    }
}

void core_free(core_t *core)
{
    base_map_slot_t *s;
    base_mpsc_drain(&core->in, free_late_action_cb, NULL);
    for (size_t i = 0; (i = base_map_next(&core->links, i, &s)) != 0;) {
        core_link_t *l = s->value;
        free(l->topo_to);
        free(l->edge_to);
        free(l);
    }
    for (size_t i = 0; (i = base_map_next(&core->addrs, i, &s)) != 0;) {
        core_addr_t *addr = s->value;
        free(addr->consumers.items);
        free(addr->senders.items);
        free(addr->ir_out);
        free(addr->key);
        free(addr);
    }
    core_ir_free(core);
    core_edge_fini(core);
    base_map_fini(&core->links);
    base_map_fini(&core->addrs);
    base_pattern_free(core->patterns);
    core_autolink_fini(core);
    core_lr_table_free(core->lr);
    core_lrm_free(core);
    core_elk_free(core);
    core_rt_free(core->rt);
    for (size_t i = 0; i < core->n_nodes; i++)
        free(core->nodes[i]);
    free(core->nodes);
    for (int i = 0; i < core->n_workers; i++)
        base_mpsc_batch_discard(&core->out[i]);
    free(core->out);
    base_mpsc_fini(&core->in);
    free(core->router_id);
    free(core);
}

void core_node_reserve(core_t *core, const char *name)
{
    BASE_BUG_ON(core->started);
    core->nodes = base_realloc(core->nodes, (core->n_nodes + 1) * sizeof(*core->nodes));
    core->nodes[core->n_nodes++] = base_strdup(name);
}

int core_addr_config_add_CT(core_t *core, const cfg_address_t *ac)
{
    BASE_ASSERT_THREAD(CORE);
    bool prefix = ac->prefix != NULL;
    const char *text = prefix ? ac->prefix : ac->pattern;
    if (!text)
        return -EINVAL;
    int rc = prefix ? base_pattern_add_prefix(core->patterns, text, (void *)ac)
                    : base_pattern_add(core->patterns, text, (void *)ac);
    if (rc == 0 && (ac->ingress_phase || ac->egress_phase))
        core->n_phased++;
    if (rc == 0)
        LOG(INFO, "Address configuration %s '%s' added (%s)", prefix ? "prefix" : "pattern", text,
            cfg_distribution_name(ac->distribution));
    return rc;
}

const cfg_address_t *core_addr_config_remove_CT(core_t *core, const cfg_address_t *ac)
{
    BASE_ASSERT_THREAD(CORE);
    bool prefix = ac->prefix != NULL;
    const char *text = prefix ? ac->prefix : ac->pattern;
    char *norm = text ? base_pattern_normalize(text, prefix) : NULL;
    if (!norm)
        return NULL;
    const cfg_address_t *old = base_pattern_get(core->patterns, norm);
    if (old != ac) {
        free(norm);
        return NULL;
    }
    base_pattern_remove(core->patterns, norm);
    free(norm);
    if (old->ingress_phase || old->egress_phase)
        core->n_phased--;
    LOG(INFO, "Address configuration %s '%s' removed", prefix ? "prefix" : "pattern", text);
    return old;
}

const char *core_router_id(const core_t *core)
{
    return core->router_id;
}

void core_post(core_t *core, base_mpsc_batch_t *b)
{
    base_mpsc_push(&core->in, b);
}

int core_call(core_t *core, core_call_fn *fn, void *arg)
{
    base_mpsc_batch_t b = {0};
    core_action_t *a = core_batch_add(&b);
    if (!a)
        return -ENOMEM;
    a->type = CORE_A_CALL;
    a->u.call.fn = fn;
    a->u.call.arg = arg;
    core_post(core, &b);
    return 0;
}
