/* core/rt.c: interior mode's control plane (see rt.h) - the routing protocol's database and
 * mobile-address table fed from the inter-router connections' control links, and the
 * messages they ask for sent back out on them.
 *
 * Thread suffixes used here: _CT = core thread only.  core_rt_new/_free run on the main
 * thread; core_node_rows() on any thread (the agent's).
 *
 * DESIGN: the protocol modules (core/routing/) are pure; this file is their caller.  An
 * inter-router connection gets a connection mask bit (0..127) when it opens; a HELLO that
 * arrives on it carries that bit into the database, which names neighbours by it.  Messages
 * go out whole: encoded by msg.h, then given this hop's router annotations (x-opt-qd.ingress
 * kept or set to us, our node id appended to x-opt-qd.trace) with codec_compose_prefix(),
 * then posted to the worker of the chosen connection (CORE_W_RT_SEND).  Which connection:
 *   HELLO                    every inter-router connection (one hop)
 *   RA, differential MAU     flooded: one copy per connection that leads to some known
 *                            router, minus the one it came on and those to routers in its
 *                            trace
 *   LSR, LSU, MAR, abs. MAU  to router R: R's own connection when a neighbour, else its
 *                            next hop's; not sent while R is unreachable (an LSU answering
 *                            an LSR waits until R is reachable: lsdb.h)
 * A routing message whose trace is longer than the radius + 1 is dropped whole on arrival
 * (read by nobody, passed on to nobody), as qdrouterd 1.19 drops any such delivery.
 * A message for another router (`_topo/0/<other>/...`) that arrives here travels on the
 * same way, unread.  Forwarding client messages between routers is the data plane's
 * (core/interior.c); this file tells it what it needs: each inter-router connection's mask
 * bit (core_rt_conn_CT), the route table after every change of routes (core_rt_set_routes_CT),
 * and which remote routers have which mobile keys, as MAUs and flushes change that
 * (core_rt_remote_addr_CT; the forwarder's addresses are reconciled with the mobile table
 * after each of them).  The router.node rows are rebuilt after every change and published
 * under a mutex for the management agent.  The protocol's own addresses (Lqdhello, ...) are
 * `address` stats rows of this file (qdstat -a, as qdrouterd shows them; rt_row_t), and its
 * messages to one router count on that router's R<id> address, which interior.c keeps.
 */
#include "core/rt.h"

#include "core/core_int.h"

#include "codec/codec.h"
#include "core/base/base.h"
#include "core/base/log.h"
#include "core/interior.h"
#include "core/linkroute_mesh.h"
#include "core/routing/lsdb.h"
#include "core/routing/mobile.h"
#include "core/routing/msg.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOG(lvl, ...)    base_log(BASE_LOG_MOD_ROUTER, BASE_LOG_##lvl, __VA_ARGS__)
#define LOG_HL(lvl, ...) base_log(BASE_LOG_MOD_ROUTER_HELLO, BASE_LOG_##lvl, __VA_ARGS__)
#define LOG_LS(lvl, ...) base_log(BASE_LOG_MOD_ROUTER_LS, BASE_LOG_##lvl, __VA_ARGS__)
#define LOG_MA(lvl, ...) base_log(BASE_LOG_MOD_ROUTER_MA, BASE_LOG_##lvl, __VA_ARGS__)

/* Inter-router connections at most (qdrouterd's conn mask width). */
#define RT_MAX_CONNS 128
/* A routing message larger than this is not read (they are a few hundred bytes; an MAU with
 * every address of a big router is the largest). */
#define RT_MSG_MAX (16u << 20)

/* One inter-router connection. */
typedef struct rt_conn {
    bool     used;    /* the mask bit is taken */
    uint64_t conn_id; /* the worker's connection id */
    uint8_t  worker;  /* its worker */
    int64_t  cost;    /* effective cost */
} rt_conn_t;

/* The protocol's own addresses, as qdrouterd 1.19 shows them in qdstat -a: where its
 * messages go and what its in-process handlers take.  Junction sends and takes them without
 * the address table (docs/decisions/0008), so they are rows only: `address` stats objects
 * this file makes and counts (inProcess 1; deliveriesFromContainer: messages the protocol
 * sent, deliveriesToContainer: messages it took, deliveriesTransit: copies to other
 * routers), never addresses a link attaches to. */
typedef enum rt_row {
    RT_ROW_HELLO = 0, /* Lqdhello, flood: HELLO (one hop) */
    RT_ROW_LROUTER,   /* Lqdrouter, flood: LSR, LSU for this router */
    RT_ROW_TROUTER,   /* Tqdrouter, flood: RA (flooded) */
    RT_ROW_LMA,       /* Lqdrouter.ma, multicast: MAR, absolute MAU for this router */
    RT_ROW_TMA,       /* Tqdrouter.ma, multicast: differential MAU (flooded) */
    RT_NROWS,
    RT_ROW_NONE = -1, /* not one of them */
} rt_row_t;

static const char *const rt_row_keys[RT_NROWS] = {"Lqdhello", "Lqdrouter", "Tqdrouter",
                                                   "Lqdrouter.ma", "Tqdrouter.ma"};
static const char *const rt_row_dists[RT_NROWS] = {"flood", "flood", "flood", "multicast",
                                                    "multicast"};

struct core_rt {
    core_rt_lsdb_t   *db;       /* _CT: the link-state database */
    core_rt_mobile_t *mob;      /* _CT: the mobile-address table */
    char             *id;       /* our router id */
    char             *node_id;  /* "0/<id>": our name in router annotations */
    int64_t           instance; /* our boot number (Unix seconds at start) */
    rt_conn_t         conns[RT_MAX_CONNS]; /* _CT: by connection mask bit */
    int64_t           topo_change; /* _CT: Unix seconds of the last topology change */
    bool              dup_logged;  /* _CT: the duplicate-id line is out */
    bool              rows_made;   /* _CT: row_stats exist */
    stats_obj_t       row_stats[RT_NROWS]; /* _CT: the protocol addresses' rows */
    pthread_mutex_t   lock;     /* guards rows / n_rows */
    core_node_row_t  *rows;     /* [lock] the published router.node rows */
    size_t            n_rows;   /* [lock] their count */
    uint64_t          rows_digest; /* _CT: rows_digest_CT() of the published rows */
};

core_rt_t *core_rt_new(const cfg_t *cfg, const char *router_id)
{
    core_rt_t *rt = base_calloc(1, sizeof(*rt));
    core_rt_timers_t t = {cfg->router.hello_interval, cfg->router.hello_max_age,
                          cfg->router.ra_interval, cfg->router.ra_interval_flux,
                          cfg->router.remote_ls_max_age};
    rt->instance = (int64_t)time(NULL);
    rt->id = base_strdup(router_id);
    size_t n = strlen(router_id) + 3;
    rt->node_id = base_malloc(n);
    snprintf(rt->node_id, n, "0/%s", router_id);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    rt->db = core_rt_lsdb_new(router_id, rt->instance, t,
                              (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
    rt->mob = core_rt_mobile_new();
    rt->topo_change = rt->instance;
    pthread_mutex_init(&rt->lock, NULL);
    return rt;
}

void core_node_rows_free(core_node_row_t *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(rows[i].id);
        free(rows[i].next_hop);
        free(rows[i].link_state);
        free(rows[i].valid_origins);
    }
    free(rows);
}

void core_rt_free(core_rt_t *rt)
{
    if (!rt)
        return;
    core_rt_lsdb_free(rt->db);
    core_rt_mobile_free(rt->mob);
    core_node_rows_free(rt->rows, rt->n_rows);
    pthread_mutex_destroy(&rt->lock);
    free(rt->node_id);
    free(rt->id);
    free(rt);
}

void core_rt_action_discard(core_action_t *a)
{
    if (a->type == CORE_A_RT)
        BASE_FREE(a->u.rt.bytes);
}

/* ---- rows for router.node ---- */

static char *ids_join(char **ids, uint32_t n)
{
    size_t lens[CORE_RT_MAX_ROUTERS];
    size_t len = 1;
    for (uint32_t i = 0; i < n; i++)
        len += (lens[i] = strlen(ids[i])) + 1;
    char *s = base_malloc(len), *p = s;
    for (uint32_t i = 0; i < n; i++) {
        if (i)
            *p++ = ',';
        memcpy(p, ids[i], lens[i]);
        p += lens[i];
    }
    *p = '\0';
    return s;
}

static char *vo_join_CT(core_rt_t *rt, const uint64_t vo[2])
{
    char    *ids[CORE_RT_MAX_ROUTERS];
    uint32_t n = 0;
    for (uint32_t b = 1; b < CORE_RT_MAX_ROUTERS; b++) {
        if (!(vo[b / 64] & (1ull << (b % 64))))
            continue;
        core_rt_node_t *o = core_rt_lsdb_node(rt->db, b);
        if (o)
            ids[n++] = o->id;
    }
    return ids_join(ids, n);
}

/* FNV-1a over what the rows show. */
static uint64_t mix(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

#define MIX(h, v) ((h) = mix((h), &(v), sizeof(v)))

/* A digest of everything the rows are made of: a remote link state's peers are fixed by its
 * ls_seq (an LSU of the same sequence is not taken; a restart also changes the instance),
 * so only the own link state's peers are read one by one. */
static uint64_t rows_digest_CT(const core_rt_t *rt)
{
    uint64_t            h = 0xcbf29ce484222325ull;
    const core_rt_ls_t *own = core_rt_lsdb_own_ls(rt->db);
    MIX(h, rt->topo_change);
    MIX(h, own->n);
    for (uint32_t i = 0; i < own->n; i++)
        h = mix(h, own->ids[i], strlen(own->ids[i]) + 1);
    for (uint32_t b = 1; b < CORE_RT_MAX_ROUTERS; b++) {
        core_rt_node_t *r = core_rt_lsdb_node(rt->db, b);
        if (!r)
            continue;
        MIX(h, b);
        h = mix(h, r->id, strlen(r->id) + 1);
        MIX(h, r->has_instance);
        MIX(h, r->instance);
        MIX(h, r->version);
        MIX(h, r->next_hop);
        MIX(h, r->link);
        MIX(h, r->cost);
        MIX(h, r->reachable);
        MIX(h, r->vo[0]);
        MIX(h, r->vo[1]);
        MIX(h, r->ls.ls_seq);
        MIX(h, r->ls.n);
    }
    return h;
}

/* Publish the rows, unless nothing they show changed since the last time: a routing message
 * (a HELLO, most of them) usually changes nothing, and in a full mesh of 20 the rows of every
 * message were a third of the core thread's time after a router was lost. */
static void rows_publish_CT(core_rt_t *rt)
{
    uint64_t digest = rows_digest_CT(rt);
    if (rt->rows && digest == rt->rows_digest)
        return;
    rt->rows_digest = digest;
    uint32_t         cap = core_rt_lsdb_count(rt->db) + 1, n = 0;
    core_node_row_t *rows = base_calloc(cap, sizeof(*rows));
    const core_rt_ls_t *own = core_rt_lsdb_own_ls(rt->db);
    rows[n++] = (core_node_row_t){.id = base_strdup(rt->id),
                                  .index = 0,
                                  .instance = rt->instance,
                                  .version = CORE_RT_PV,
                                  .next_hop = base_strdup("(self)"),
                                  .router_link = -1,
                                  .cost = 0,
                                  .link_state = ids_join(own->ids, own->n),
                                  .valid_origins = base_strdup(""),
                                  .last_topo_change = rt->topo_change};
    for (uint32_t b = 1; b < CORE_RT_MAX_ROUTERS && n < cap; b++) {
        core_rt_node_t *r = core_rt_lsdb_node(rt->db, b);
        if (!r)
            continue;
        core_rt_node_t *nh = r->next_hop >= 0 ? core_rt_lsdb_node(rt->db, (uint32_t)r->next_hop)
                                              : NULL;
        rows[n++] = (core_node_row_t){.id = base_strdup(r->id),
                                      .index = b,
                                      .instance = r->has_instance ? r->instance : 0,
                                      .version = r->version,
                                      .next_hop = nh ? base_strdup(nh->id) : NULL,
                                      .router_link = r->link,
                                      .cost = r->reachable ? r->cost : -1,
                                      .link_state = ids_join(r->ls.ids, r->ls.n),
                                      .valid_origins = vo_join_CT(rt, r->vo),
                                      .last_topo_change = rt->topo_change};
    }
    pthread_mutex_lock(&rt->lock);
    core_node_row_t *old = rt->rows;
    size_t           n_old = rt->n_rows;
    rt->rows = rows;
    rt->n_rows = n;
    pthread_mutex_unlock(&rt->lock);
    core_node_rows_free(old, n_old);
}

core_node_row_t *core_node_rows(core_t *core, size_t *n)
{
    core_rt_t *rt = core->rt;
    *n = 0;
    if (!rt)
        return NULL;
    pthread_mutex_lock(&rt->lock);
    core_node_row_t *rows = base_calloc(rt->n_rows ? rt->n_rows : 1, sizeof(*rows));
    for (size_t i = 0; i < rt->n_rows; i++) {
        const core_node_row_t *s = &rt->rows[i];
        rows[i] = *s;
        rows[i].id = base_strdup(s->id);
        rows[i].next_hop = s->next_hop ? base_strdup(s->next_hop) : NULL;
        rows[i].link_state = base_strdup(s->link_state);
        rows[i].valid_origins = base_strdup(s->valid_origins);
    }
    *n = rt->n_rows;
    pthread_mutex_unlock(&rt->lock);
    return rows;
}

/* ---- sending ---- */

static int32_t conn_bit_CT(core_rt_t *rt, uint64_t conn_id)
{
    for (int32_t b = 0; b < RT_MAX_CONNS; b++)
        if (rt->conns[b].used && rt->conns[b].conn_id == conn_id)
            return b;
    return -1;
}

/* ---- the protocol addresses' rows ---- */

static void rows_make_CT(core_t *core)
{
    core_rt_t *rt = core->rt;
    if (rt->rows_made)
        return;
    rt->rows_made = true;
    for (int i = 0; i < RT_NROWS; i++) {
        const char *labels[] = {rt_row_keys[i], rt_row_dists[i]};
        core_stats_object_new(core->stats, core->stats->address, labels, &rt->row_stats[i]);
        stats_obj_set(core->shard, rt->row_stats[i], CORE_ADDR_IN_PROCESS, 1);
    }
}

static void row_add_CT(core_t *core, rt_row_t row, uint32_t field, uint64_t n)
{
    if (row != RT_ROW_NONE && n)
        stats_obj_add(core->shard, core->rt->row_stats[row], field, n);
}

/* The gauges: Lqdhello's consumers are the outgoing control links (one per inter-router
 * connection), the flooded addresses' remote destinations every router reached. */
static void rows_gauges_CT(core_t *core, uint32_t reached)
{
    core_rt_t *rt = core->rt;
    int64_t    conns = 0;
    for (int32_t b = 0; b < RT_MAX_CONNS; b++)
        conns += rt->conns[b].used;
    stats_obj_set(core->shard, rt->row_stats[RT_ROW_HELLO], CORE_ADDR_SUBSCRIBERS, conns);
    stats_obj_set(core->shard, rt->row_stats[RT_ROW_TROUTER], CORE_ADDR_REMOTE, reached);
    stats_obj_set(core->shard, rt->row_stats[RT_ROW_TMA], CORE_ADDR_REMOTE, reached);
}

/* Router `maskbit`'s address R<id> (interior.c keeps it while the router is reached): the
 * protocol's messages to that router count there, as qdrouterd's. */
static void router_row_add_CT(core_t *core, const char *id, size_t idlen, uint32_t field)
{
    char stack[256];
    if (idlen + 1 > sizeof(stack))
        return;
    stack[0] = 'R';
    memcpy(stack + 1, id, idlen);
    core_addr_t *addr = base_map_get(&core->addrs, stack, idlen + 1);
    if (addr)
        stats_obj_add(core->shard, addr->stats, field, 1);
}

/* Post msg[0, len) with this hop's router annotations (ingress kept when it has one, our id
 * appended to its trace) to connection bit `cb`.  Returns whether it was posted. */
static bool send_on_CT(core_t *core, int32_t cb, const uint8_t *msg, size_t len)
{
    core_rt_t *rt = core->rt;
    bool       sent = false;
    if (cb < 0 || cb >= RT_MAX_CONNS || !rt->conns[cb].used)
        return false;
    codec_scan_t scan;
    if (codec_scan(msg, len, true, &scan, NULL) != 0)
        return false;
    codec_bytes_t  me = {(const uint8_t *)rt->node_id, strlen(rt->node_id)};
    codec_ra_out_t ra = {.write = true,
                         .ingress = scan.ma_router_count && scan.ra.ingress.ptr ? scan.ra.ingress
                                                                                : me,
                         .trace = scan.ma_router_count ? scan.ra.trace : (codec_bytes_t){0},
                         .trace_count = scan.ma_router_count ? scan.ra.trace_count : 0,
                         .trace_append = me};
    size_t scratch_len;
    int    n_iov;
    codec_compose_need(msg, &scan, &ra, &scratch_len, &n_iov);
    if (n_iov == 0)
        return false;
    uint8_t     *scratch = base_malloc(scratch_len ? scratch_len : 1);
    codec_iov_t *iov = base_malloc((size_t)n_iov * sizeof(*iov));
    int          k = codec_compose_prefix(msg, &scan, &ra, scratch, scratch_len, iov, n_iov);
    if (k >= 0) {
        size_t total = len - scan.body_off;
        for (int i = 0; i < k; i++)
            total += iov[i].len;
        uint8_t *out = base_malloc(total), *p = out;
        for (int i = 0; i < k; i++) {
            memcpy(p, iov[i].base, iov[i].len);
            p += iov[i].len;
        }
        memcpy(p, msg + scan.body_off, len - scan.body_off);
        const rt_conn_t *c = &rt->conns[cb];
        core_work_t *w = base_mpsc_batch_add(&core->out[c->worker], sizeof(core_work_t));
        w->type = CORE_W_RT_SEND;
        w->handle = NULL;
        w->u.rt_send.conn_id = c->conn_id;
        w->u.rt_send.bytes = out;
        w->u.rt_send.len = (uint32_t)total;
        sent = true;
    }
    free(iov);
    free(scratch);
    return sent;
}

/* The connection bit that leads to router `maskbit`, or -1 when it is unreachable: its next
 * hop's whenever the cheapest path goes through another router, even to a neighbour (a
 * costly direct connection then carries nothing for it, as in qdrouterd 1.19, whose
 * forwarder takes the next hop's link before the router's own); else its own. */
static int32_t route_CT(core_rt_t *rt, uint32_t maskbit)
{
    core_rt_node_t *r = core_rt_lsdb_node(rt->db, maskbit);
    if (!r)
        return -1;
    if (r->next_hop >= 0) {
        core_rt_node_t *nh = core_rt_lsdb_node(rt->db, (uint32_t)r->next_hop);
        if (nh && nh->link >= 0)
            return nh->link;
    }
    return r->link;
}

/* Flood msg to one connection per next hop of every known router, except `from` and the
 * connections to routers in `trace` (encoded elements, as codec_ra_t has them); the copies
 * count as transit on `row`. */
static void flood_CT(core_t *core, const uint8_t *msg, size_t len, int32_t from,
                     const codec_ra_t *trace, rt_row_t row)
{
    core_rt_t *rt = core->rt;
    bool       to[RT_MAX_CONNS] = {false};
    for (uint32_t b = 1; b < CORE_RT_MAX_ROUTERS; b++) {
        int32_t cb = route_CT(rt, b);
        if (cb >= 0 && cb < RT_MAX_CONNS)
            to[cb] = true;
    }
    if (from >= 0)
        to[from] = false;
    if (trace && trace->trace.ptr) {
        core_rt_strs_t l = {trace->trace.ptr, trace->trace.len, trace->trace_count};
        core_rt_iter_t it = core_rt_iter(&l);
        codec_bytes_t  s;
        while (core_rt_strs_next(&it, &s)) {
            if (s.len > 2 && memcmp(s.ptr, "0/", 2) == 0) {
                core_rt_node_t *r = core_rt_lsdb_find(rt->db, s.ptr + 2, s.len - 2);
                if (r && r->link >= 0 && r->link < RT_MAX_CONNS)
                    to[r->link] = false;
            }
        }
    }
    uint64_t copies = 0;
    for (int32_t cb = 0; cb < RT_MAX_CONNS; cb++)
        if (to[cb])
            copies += send_on_CT(core, cb, msg, len);
    row_add_CT(core, row, CORE_ADDR_TRANSIT, copies);
}

static codec_bytes_t text(const char *s)
{
    return (codec_bytes_t){(const uint8_t *)s, strlen(s)};
}

/* ---- trace logging (the lines qdrouterd writes: "RCVD: RA(id=... ls_seq=...)") ---- */

/* The module a routing message's lines go to, as in qdrouterd: HELLO to ROUTER_HELLO,
 * MAU/MAR to ROUTER_MA, the link-state messages to ROUTER_LS. */
static base_log_module_t log_mod(core_rt_op_t op)
{
    return op == CORE_RT_OP_HELLO                         ? BASE_LOG_MOD_ROUTER_HELLO
           : op == CORE_RT_OP_MAU || op == CORE_RT_OP_MAR ? BASE_LOG_MOD_ROUTER_MA
                                                          : BASE_LOG_MOD_ROUTER_LS;
}

/* Append printf output to buf[*at, cap), truncating. */
static void put(char *buf, size_t cap, size_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t cap, size_t *at, const char *fmt, ...)
{
    if (*at >= cap)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *at, cap - *at, fmt, ap);
    va_end(ap);
    *at = n < 0 ? cap : *at + (size_t)n;
}

/* A routing message (received or sent), its fields as qdrouterd's trace lines show them
 * (`to`: the router an LSR, LSU or MAR went to, or NULL). */
static void log_msg_CT(const char *dir, const core_rt_msg_t *m, const char *to)
{
    base_log_module_t mod = log_mod(m->op);
    if (!base_log_enabled(mod, BASE_LOG_TRACE))
        return;
    char   b[1024];
    size_t at = 0;
    put(b, sizeof(b), &at, "%s(id=%.*s pv=%lld", core_rt_op_name(m->op), (int)m->id.len,
        (const char *)m->id.ptr, (long long)m->pv);
    switch (m->op) {
    case CORE_RT_OP_HELLO: {
        put(b, sizeof(b), &at, " inst=%lld seen=[", (long long)m->instance);
        core_rt_iter_t it = core_rt_iter(&m->seen);
        codec_bytes_t  id;
        for (bool first = true; core_rt_strs_next(&it, &id); first = false)
            put(b, sizeof(b), &at, "%s%.*s", first ? "" : ",", (int)id.len, (const char *)id.ptr);
        put(b, sizeof(b), &at, "]");
        break;
    }
    case CORE_RT_OP_RA:
        put(b, sizeof(b), &at, " inst=%lld ls_seq=%lld mobile_seq=%lld", (long long)m->instance,
            (long long)m->ls_seq, (long long)m->mobile_seq);
        break;
    case CORE_RT_OP_LSU: {
        put(b, sizeof(b), &at, " inst=%lld ls_seq=%lld peers={", (long long)m->instance,
            (long long)m->ls_ls_seq);
        core_rt_iter_t it = core_rt_iter(&m->peers);
        codec_bytes_t  id;
        int64_t        cost;
        for (bool first = true; core_rt_peers_next(&it, &id, &cost); first = false)
            put(b, sizeof(b), &at, "%s%.*s:%lld", first ? "" : ",", (int)id.len,
                (const char *)id.ptr, (long long)cost);
        put(b, sizeof(b), &at, "}");
        break;
    }
    case CORE_RT_OP_MAU:
        put(b, sizeof(b), &at, " mobile_seq=%lld %s", (long long)m->mobile_seq,
            m->exist.ptr ? "absolute" : "differential");
        break;
    case CORE_RT_OP_MAR:
        put(b, sizeof(b), &at, " have_seq=%lld", (long long)m->have_seq);
        break;
    default:
        break;
    }
    put(b, sizeof(b), &at, ")");
    base_log(mod, BASE_LOG_TRACE, "%s: %s%s%s", dir, b, to ? " to: " : "", to ? to : "");
}

/* A message this router sends (encoded in b), logged as log_msg_CT() does. */
static void log_sent_CT(core_rt_op_t op, const core_rt_buf_t *b, const char *to)
{
    core_rt_msg_t m;
    const char   *why;
    if (base_log_enabled(log_mod(op), BASE_LOG_TRACE) &&
        core_rt_msg_decode(b->ptr, b->len, &m, &why) == 0)
        log_msg_CT("SENT", &m, to);
}

/* Encode o (our id and instance filled in here) into *b; false when it does not encode. */
static bool encode_CT(core_rt_t *rt, core_rt_out_t *o, core_rt_buf_t *b)
{
    o->id = text(rt->id);
    o->instance = rt->instance;
    return core_rt_msg_encode(o, b) == 0;
}

/* Send o to router `maskbit` over its route (`suffix`: "qdrouter" or "qdrouter.ma"). */
static void send_to_router_CT(core_t *core, uint32_t maskbit, core_rt_out_t *o,
                              const char *suffix)
{
    core_rt_t      *rt = core->rt;
    core_rt_node_t *r = core_rt_lsdb_node(rt->db, maskbit);
    int32_t         cb = route_CT(rt, maskbit);
    if (!r)
        return;
    if (cb < 0) {
        base_log(log_mod(o->op), BASE_LOG_TRACE, "%s to %s not sent: no route to it yet",
                 core_rt_op_name(o->op), r->id);
        return;
    }
    char to[300];
    snprintf(to, sizeof(to), "amqp:/_topo/0/%.250s/%s", r->id, suffix);
    o->to = to;
    core_rt_buf_t b = {0};
    if (encode_CT(rt, o, &b)) {
        log_sent_CT(o->op, &b, r->id);
        router_row_add_CT(core, r->id, strlen(r->id), CORE_ADDR_FROM_PROC);
        if (send_on_CT(core, cb, b.ptr, b.len))
            router_row_add_CT(core, r->id, strlen(r->id), CORE_ADDR_TRANSIT);
    }
    core_rt_buf_fini(&b);
}

static void send_hello_CT(core_t *core)
{
    core_rt_t    *rt = core->rt;
    const char   *seen[CORE_RT_MAX_ROUTERS];
    codec_bytes_t ids[CORE_RT_MAX_ROUTERS];
    uint32_t      n = core_rt_lsdb_seen_CT(rt->db, seen, CORE_RT_MAX_ROUTERS);
    for (uint32_t i = 0; i < n; i++)
        ids[i] = text(seen[i]);
    core_rt_out_t o = {.op = CORE_RT_OP_HELLO, .to = "amqp:/_local/qdhello", .ids = ids,
                       .n_ids = n};
    core_rt_buf_t b = {0};
    if (encode_CT(rt, &o, &b)) {
        log_sent_CT(o.op, &b, NULL);
        row_add_CT(core, RT_ROW_HELLO, CORE_ADDR_FROM_PROC, 1);
    }
    if (b.len)
        for (int32_t cb = 0; cb < RT_MAX_CONNS; cb++)
            if (rt->conns[cb].used)
                send_on_CT(core, cb, b.ptr, b.len);
    core_rt_buf_fini(&b);
}

static void send_ra_CT(core_t *core)
{
    core_rt_t    *rt = core->rt;
    core_rt_out_t o = {.op = CORE_RT_OP_RA,
                       .to = "amqp:/_topo/0/all/qdrouter",
                       .ls_seq = core_rt_lsdb_ls_seq(rt->db),
                       .mobile_seq = core_rt_lsdb_mobile_seq(rt->db)};
    core_rt_buf_t b = {0};
    if (encode_CT(rt, &o, &b)) {
        log_sent_CT(o.op, &b, NULL);
        row_add_CT(core, RT_ROW_TROUTER, CORE_ADDR_FROM_PROC, 1);
        flood_CT(core, b.ptr, b.len, -1, NULL, RT_ROW_TROUTER);
    }
    core_rt_buf_fini(&b);
}

static void send_lsu_CT(core_t *core, uint32_t maskbit)
{
    core_rt_t          *rt = core->rt;
    const core_rt_ls_t *ls = core_rt_lsdb_own_ls(rt->db);
    codec_bytes_t       ids[CORE_RT_MAX_ROUTERS];
    uint32_t            n = ls->n < CORE_RT_MAX_ROUTERS ? ls->n : CORE_RT_MAX_ROUTERS;
    for (uint32_t i = 0; i < n; i++)
        ids[i] = text(ls->ids[i]);
    core_rt_out_t o = {.op = CORE_RT_OP_LSU, .ls_seq = ls->ls_seq, .ids = ids,
                       .values = ls->costs, .n_ids = n};
    send_to_router_CT(core, maskbit, &o, "qdrouter");
}

static void send_mar_CT(core_t *core, uint32_t maskbit)
{
    core_rt_out_t o = {.op = CORE_RT_OP_MAR,
                       .have_seq = core_rt_mobile_router_seq(core->rt->mob, maskbit)};
    send_to_router_CT(core, maskbit, &o, "qdrouter.ma");
}

/* ---- the forwarder's view (core/interior.h) ---- */

/* Give the forwarder the whole route table: every known router, the connection that
 * reaches it (-1 while it is unreachable), its cost and valid origins, and the radius. */
static void routes_to_forwarder_CT(core_t *core)
{
    core_rt_t       *rt = core->rt;
    core_rt_route_t  routes[CORE_RT_MAX_ROUTERS];
    core_rt_routes_t t = {.routers = routes, .n = 0, .radius = core_rt_lsdb_radius(rt->db)};
    uint32_t         reached = 0;
    for (uint32_t b = 1; b < CORE_RT_MAX_ROUTERS && b < CORE_RT_MAX_NODES; b++) {
        core_rt_node_t *r = core_rt_lsdb_node(rt->db, b);
        if (!r)
            continue;
        int32_t cb = r->reachable ? route_CT(rt, b) : -1;
        reached += cb >= 0 && cb < CORE_RT_MAX_CONNS;
        core_rt_node_t *u = r->reachable && r->upstream >= 0
                                ? core_rt_lsdb_node(rt->db, (uint32_t)r->upstream)
                                : NULL;
        int32_t up = u ? u->link : -1;
        routes[t.n++] = (core_rt_route_t){.maskbit = b,
                                          .id = r->id,
                                          .conn_bit = cb >= 0 && cb < CORE_RT_MAX_CONNS ? cb : -1,
                                          .neighbour = r->link >= 0 && r->link < CORE_RT_MAX_CONNS,
                                          .link_bit = r->link,
                                          .has_up = up >= 0 && up < CORE_RT_MAX_CONNS,
                                          .up_bit = up,
                                          .cost = r->cost,
                                          .vo = {r->vo[0], r->vo[1]}};
    }
    if (core_rt_set_routes_CT(core, &t) != 0)
        LOG(ERROR, "Route table refused by the forwarder");
    rows_gauges_CT(core, reached);
}

static bool rnode_has(const core_addr_t *addr, uint32_t b)
{
    return (addr->rnodes[b / 64] >> (b % 64)) & 1;
}

/* Router `maskbit`'s keys as the forwarder has them, made to match the mobile table: every
 * key of `adds` that the table gives the router is added (with the table's hint), and,
 * when `all` (an absolute MAU, a flush), every address the forwarder gives the router that
 * the table does not is withdrawn; else only the keys of `dels` are looked at. */
static void keys_to_forwarder_CT(core_t *core, uint32_t maskbit, const core_rt_strs_t *adds,
                                 const core_rt_strs_t *dels, bool all)
{
    core_rt_t *rt = core->rt;
    if (adds && adds->ptr) {
        core_rt_iter_t it = core_rt_iter(adds);
        codec_bytes_t  k;
        while (core_rt_strs_next(&it, &k)) {
            const char *key = (const char *)k.ptr;
            if (core_rt_mobile_router_has(rt->mob, key, k.len, maskbit))
                (void)core_rt_remote_addr_CT(core, key, k.len, maskbit, true,
                                             core_rt_mobile_hint(rt->mob, key, k.len));
        }
    }
    if (!all) {
        if (!dels || !dels->ptr)
            return;
        core_rt_iter_t it = core_rt_iter(dels);
        codec_bytes_t  k;
        while (core_rt_strs_next(&it, &k))
            if (!core_rt_mobile_router_has(rt->mob, (const char *)k.ptr, k.len, maskbit))
                (void)core_rt_remote_addr_CT(core, (const char *)k.ptr, k.len, maskbit, false,
                                             -1);
        return;
    }
    /* the keys are copied out first: a withdrawal may free the address, and the map must
     * not change under the walk */
    char           **gone = NULL;
    size_t           n_gone = 0, cap = 0;
    base_map_slot_t *s;
    for (size_t i = 0; (i = base_map_next(&core->addrs, i, &s)) != 0;) {
        core_addr_t *addr = s->value;
        if (!rnode_has(addr, maskbit) ||
            core_rt_mobile_router_has(rt->mob, addr->key, addr->keylen, maskbit))
            continue;
        if (n_gone == cap) {
            cap = cap ? 2 * cap : 16;
            gone = base_realloc(gone, cap * sizeof(*gone));
        }
        gone[n_gone++] = base_strndup(addr->key, addr->keylen);
    }
    for (size_t i = 0; i < n_gone; i++) {
        (void)core_rt_remote_addr_CT(core, gone[i], strlen(gone[i]), maskbit, false, -1);
        free(gone[i]);
    }
    free(gone);
}

/* Do what the database asked for. */
static void actions_CT(core_t *core, core_rt_actions_t *a)
{
    core_rt_t *rt = core->rt;
    if (a->dup_id && !rt->dup_logged) {
        rt->dup_logged = true;
        LOG_HL(CRITICAL, "Detected another router with the same ID (%s): check the router "
                         "ids of the network", rt->id);
    }
    for (uint32_t i = 0; i < a->n_deleted; i++) {
        core_rt_mobile_flush_router_CT(rt->mob, a->deleted[i]);
        keys_to_forwarder_CT(core, a->deleted[i], NULL, NULL, true);
        LOG(INFO, "Router with mask bit %u removed from the network", a->deleted[i]);
    }
    for (uint32_t i = 0; i < a->n_restarted; i++) {
        core_rt_mobile_flush_router_CT(rt->mob, a->restarted[i]);
        keys_to_forwarder_CT(core, a->restarted[i], NULL, NULL, true);
        core_rt_node_t *r = core_rt_lsdb_node(rt->db, a->restarted[i]);
        LOG(INFO, "Router %s restarted", r ? r->id : "?");
    }
    if (a->send_hello)
        send_hello_CT(core);
    for (uint32_t i = 0; i < a->n_lsr; i++) {
        core_rt_out_t o = {.op = CORE_RT_OP_LSR};
        send_to_router_CT(core, a->lsr[i], &o, "qdrouter");
    }
    for (uint32_t i = 0; i < a->n_lsu; i++)
        send_lsu_CT(core, a->lsu[i]);
    for (uint32_t i = 0; i < a->n_mar; i++)
        send_mar_CT(core, a->mar[i]);
    if (a->send_ra)
        send_ra_CT(core);
    if (a->routes_changed || a->n_deleted || a->n_restarted) {
        rt->topo_change = (int64_t)time(NULL);
        routes_to_forwarder_CT(core);
        LOG_LS(INFO, "Topology changed: %u remote routers known, radius %u",
               core_rt_lsdb_count(rt->db), core_rt_lsdb_radius(rt->db));
    }
    rows_publish_CT(rt);
}

/* ---- receiving ---- */

static void mau_CT(core_t *core, const core_rt_msg_t *m)
{
    core_rt_t      *rt = core->rt;
    core_rt_node_t *r = core_rt_lsdb_find(rt->db, m->id.ptr, m->id.len);
    if (!r) {
        LOG_MA(WARNING, "MAU from an unknown router %.*s ignored", (int)m->id.len,
               (const char *)m->id.ptr);
        return;
    }
    switch (core_rt_mobile_mau_CT(rt->mob, r->maskbit, m)) {
    case CORE_RT_MAU_APPLIED:
        core_rt_lsdb_node_mobile_seq_CT(rt->db, r->maskbit, m->mobile_seq);
        keys_to_forwarder_CT(core, r->maskbit, m->exist.ptr ? &m->exist : &m->add, &m->del,
                             m->exist.ptr != NULL);
        if (base_log_enabled(BASE_LOG_MOD_ROUTER_MA, BASE_LOG_DEBUG)) {
            const core_rt_strs_t *keys[2] = {m->exist.ptr ? &m->exist : &m->add, &m->del};
            for (int k = 0; k < 2; k++) {
                core_rt_iter_t it = core_rt_iter(keys[k]);
                codec_bytes_t  key;
                while (keys[k]->ptr && core_rt_strs_next(&it, &key))
                    LOG_MA(DEBUG, "Router %s: address %.*s %s", r->id, (int)key.len,
                           (const char *)key.ptr, k == 0 ? "reachable" : "withdrawn");
            }
        }
        LOG_MA(INFO, "Router %s: %s MAU applied, mobile_seq %lld, %u addresses known in the "
                     "network", r->id, m->exist.ptr ? "absolute" : "differential",
               (long long)m->mobile_seq, core_rt_mobile_key_count(rt->mob));
        break;
    case CORE_RT_MAU_SEND_MAR:
        send_mar_CT(core, r->maskbit);
        break;
    case CORE_RT_MAU_IGNORED:
        break;
    }
}

static void mar_CT(core_t *core, const core_rt_msg_t *m)
{
    core_rt_t      *rt = core->rt;
    core_rt_node_t *r = core_rt_lsdb_find(rt->db, m->id.ptr, m->id.len);
    if (!r || !core_rt_mobile_mar_CT(rt->mob, m->have_seq))
        return;
    const codec_bytes_t *keys;
    const int64_t       *hints;
    uint32_t             n = core_rt_mobile_exist_CT(rt->mob, &keys, &hints);
    core_rt_out_t        o = {.op = CORE_RT_OP_MAU, .absolute = true,
                              .mobile_seq = core_rt_mobile_seq(rt->mob), .ids = keys,
                              .values = hints, .n_ids = n};
    send_to_router_CT(core, r->maskbit, &o, "qdrouter.ma");
}

/* Hand a decoded message to its handler (the message is for this router). */
static void handle_CT(core_t *core, const core_rt_msg_t *m, int32_t cb)
{
    core_rt_t        *rt = core->rt;
    core_rt_actions_t a;
    core_rt_actions_clear(&a);
    int64_t now = (int64_t)core->now_ms;
    switch (m->op) {
    case CORE_RT_OP_HELLO:
        (void)core_rt_lsdb_hello_CT(rt->db, m, cb, rt->conns[cb].cost, now, &a);
        break;
    case CORE_RT_OP_RA:
        (void)core_rt_lsdb_ra_CT(rt->db, m, now, &a);
        break;
    case CORE_RT_OP_LSU:
        (void)core_rt_lsdb_lsu_CT(rt->db, m, now, &a);
        break;
    case CORE_RT_OP_LSR:
        (void)core_rt_lsdb_lsr_CT(rt->db, m, &a);
        break;
    case CORE_RT_OP_MAU:
        mau_CT(core, m);
        break;
    case CORE_RT_OP_MAR:
        mar_CT(core, m);
        break;
    default:
        break;
    }
    actions_CT(core, &a);
}

/* Where a routing message is going, from its `to`. */
typedef enum rt_dest {
    RT_DEST_HERE = 0, /* _local/..., _topo/0/<us>/... */
    RT_DEST_ALL,      /* _topo/0/all/...: here, and flooded on */
    RT_DEST_OTHER,    /* _topo/0/<other>/...: on towards it */
    RT_DEST_NONE,     /* anything else: dropped */
} rt_dest_t;

/* The protocol address a message for this router (`dest` HERE or ALL) is counted on, by the
 * rest of its address (`rest`, after `_local/` or `_topo/0/<id>/`). */
static rt_row_t row_of(rt_dest_t dest, const char *rest, size_t n)
{
    bool here = dest == RT_DEST_HERE;
    if (n == 7 && memcmp(rest, "qdhello", 7) == 0)
        return here ? RT_ROW_HELLO : RT_ROW_NONE;
    if (n == 8 && memcmp(rest, "qdrouter", 8) == 0)
        return here ? RT_ROW_LROUTER : RT_ROW_TROUTER;
    if (n == 11 && memcmp(rest, "qdrouter.ma", 11) == 0)
        return here ? RT_ROW_LMA : RT_ROW_TMA;
    return RT_ROW_NONE;
}

static rt_dest_t dest_of(core_rt_t *rt, codec_bytes_t to, codec_bytes_t *other, rt_row_t *row)
{
    size_t      n;
    const char *a = core_addr_normalize((const char *)to.ptr, to.len, &n);
    *row = RT_ROW_NONE;
    if (n >= 7 && memcmp(a, "_local/", 7) == 0) {
        *row = row_of(RT_DEST_HERE, a + 7, n - 7);
        return RT_DEST_HERE;
    }
    if (n < 8 || memcmp(a, "_topo/0/", 8) != 0)
        return RT_DEST_NONE;
    const char *id = a + 8, *end = a + n;
    const char *slash = memchr(id, '/', (size_t)(end - id));
    if (!slash)
        return RT_DEST_NONE;
    size_t idlen = (size_t)(slash - id);
    if (idlen == 3 && memcmp(id, "all", 3) == 0) {
        *row = row_of(RT_DEST_ALL, slash + 1, (size_t)(end - slash - 1));
        return RT_DEST_ALL;
    }
    if (idlen == strlen(rt->id) && memcmp(id, rt->id, idlen) == 0) {
        *row = row_of(RT_DEST_HERE, slash + 1, (size_t)(end - slash - 1));
        return RT_DEST_HERE;
    }
    *other = (codec_bytes_t){(const uint8_t *)id, idlen};
    return RT_DEST_OTHER;
}

/* Whether our node id is in a message's trace (it went round). */
static bool trace_has_us(core_rt_t *rt, const codec_ra_t *ra)
{
    if (!ra->trace.ptr)
        return false;
    core_rt_strs_t l = {ra->trace.ptr, ra->trace.len, ra->trace_count};
    core_rt_iter_t it = core_rt_iter(&l);
    codec_bytes_t  s;
    size_t         n = strlen(rt->node_id);
    while (core_rt_strs_next(&it, &s))
        if (s.len == n && memcmp(s.ptr, rt->node_id, n) == 0)
            return true;
    return false;
}

static void msg_CT(core_t *core, int32_t cb, const uint8_t *msg, size_t len)
{
    core_rt_t   *rt = core->rt;
    codec_scan_t scan;
    const char  *why = NULL;
    if (codec_scan(msg, len, true, &scan, &why) != 0 || !scan.to.ptr) {
        LOG(WARNING, "Routing message on connection mask bit %d dropped: %s", cb,
            why ? why : "no `to`");
        return;
    }
    codec_ra_t ra = scan.ma_router_count ? scan.ra : (codec_ra_t){0};
    if (trace_has_us(rt, &ra))
        return;
    /* A message that has come further than the topology's radius + 1 is dropped whole, not
     * read here either (qdrouterd 1.19's router_node.c does so for every delivery from
     * another router): a flooded RA or an LSR from a router this one cannot reach yet would
     * otherwise make it learn that router early, and forget it again three ticks later, as
     * nothing it knows links to it. */
    if (ra.trace_count > core_rt_lsdb_radius(rt->db) + 1)
        return;
    codec_bytes_t other = {0};
    rt_row_t      row;
    rt_dest_t     dest = dest_of(rt, scan.to, &other, &row);
    if (dest == RT_DEST_OTHER) {
        core_rt_node_t *r = core_rt_lsdb_find(rt->db, other.ptr, other.len);
        if (r && send_on_CT(core, route_CT(rt, r->maskbit), msg, len))
            router_row_add_CT(core, r->id, strlen(r->id), CORE_ADDR_TRANSIT);
        return;
    }
    if (dest == RT_DEST_NONE)
        return;
    core_rt_msg_t m;
    int           rc = core_rt_msg_decode(msg, len, &m, &why);
    if (rc == CORE_RT_NEWER)
        return; /* a newer protocol version: qdrouterd ignores it too */
    if (rc != 0) {
        LOG(WARNING, "Routing message on connection mask bit %d dropped: %s", cb,
            why ? why : "malformed");
        return;
    }
    log_msg_CT("RCVD", &m, NULL);
    row_add_CT(core, row, CORE_ADDR_TO_PROC, 1);
    handle_CT(core, &m, cb);
    if (dest == RT_DEST_ALL)
        flood_CT(core, msg, len, cb, &ra, row);
}

void core_rt_action_CT(core_t *core, core_action_t *a)
{
    core_rt_t *rt = core->rt;
    uint64_t   conn_id = a->u.rt.conn_id;
    int32_t    cb = conn_bit_CT(rt, conn_id);
    rows_make_CT(core);
    switch ((core_rt_event_t)a->u.rt.event) {
    case CORE_RT_CONN_OPENED:
        if (cb >= 0)
            break;
        for (cb = 0; cb < RT_MAX_CONNS && rt->conns[cb].used; cb++)
            ;
        if (cb == RT_MAX_CONNS) {
            LOG(ERROR, "[C%llu] More than %d inter-router connections: this one is not used "
                       "for routing", (unsigned long long)conn_id, RT_MAX_CONNS);
            break;
        }
        rt->conns[cb] = (rt_conn_t){.used = true, .conn_id = conn_id, .worker = a->worker,
                                    .cost = a->u.rt.cost > 0 ? a->u.rt.cost : 1};
        (void)core_rt_conn_CT(core, conn_id, (uint32_t)cb, true);
        LOG(INFO, "[C%llu] Inter-router connection opened: mask bit %d, cost %lld",
            (unsigned long long)conn_id, cb, (long long)rt->conns[cb].cost);
        routes_to_forwarder_CT(core); /* the rows' gauges */
        break;
    case CORE_RT_CTL_LOST:
    case CORE_RT_CONN_CLOSED:
        if (cb < 0)
            break;
        core_rt_lsdb_link_lost_CT(rt->db, cb);
        if (a->u.rt.event == CORE_RT_CONN_CLOSED) {
            rt->conns[cb].used = false;
            (void)core_rt_conn_CT(core, conn_id, (uint32_t)cb, false);
            LOG(INFO, "[C%llu] Inter-router connection closed (mask bit %d)",
                (unsigned long long)conn_id, cb);
            routes_to_forwarder_CT(core); /* the rows' gauges */
        }
        rows_publish_CT(rt);
        break;
    case CORE_RT_MSG:
        if (cb >= 0 && a->u.rt.len <= RT_MSG_MAX)
            msg_CT(core, cb, a->u.rt.bytes, a->u.rt.len);
        break;
    }
    BASE_FREE(a->u.rt.bytes);
}

void core_rt_tick_CT(core_t *core)
{
    core_rt_t            *rt = core->rt;
    core_rt_mobile_diff_t d;
    core_rt_actions_t     a;
    core_rt_actions_clear(&a);
    rows_make_CT(core);
    core_lrm_tick_CT(core); /* link routes' keys join this tick's batch */
    if (core_rt_mobile_tick_CT(rt->mob, &d)) {
        /* the MAU first, then the RA that carries the new mobile_seq (qdrouterd's order:
         * others then need no MAR) */
        core_rt_out_t o = {.op = CORE_RT_OP_MAU, .to = "_topo/0/all/qdrouter.ma",
                           .mobile_seq = d.mobile_seq, .ids = d.add, .values = d.hints,
                           .n_ids = d.n_add, .dels = d.del, .n_dels = d.n_del};
        core_rt_buf_t b = {0};
        if (encode_CT(rt, &o, &b)) {
            log_sent_CT(o.op, &b, NULL);
            row_add_CT(core, RT_ROW_TMA, CORE_ADDR_FROM_PROC, 1);
            flood_CT(core, b.ptr, b.len, -1, NULL, RT_ROW_TMA);
        }
        core_rt_buf_fini(&b);
        core_rt_lsdb_set_mobile_seq_CT(rt->db, d.mobile_seq);
        LOG_MA(DEBUG, "MAU sent: mobile_seq %lld, %u added, %u deleted",
               (long long)d.mobile_seq, d.n_add, d.n_del);
        a.send_ra = true;
    }
    core_rt_lsdb_tick_CT(rt->db, (int64_t)core->now_ms, &a);
    actions_CT(core, &a);
}

void core_rt_local_key_CT(core_t *core, const char *key, size_t keylen, int hint, bool add)
{
    if (add)
        core_rt_mobile_local_add_CT(core->rt->mob, key, keylen, hint);
    else
        core_rt_mobile_local_del_CT(core->rt->mob, key, keylen);
}

void core_rt_local_dest_CT(core_t *core, const char *key, size_t keylen, cfg_distribution_t dist,
                           bool first)
{
    core_rt_t *rt = core->rt;
    if (!core_rt_mobile_key_is_synced(key, keylen))
        return;
    if (!first) {
        core_rt_mobile_local_del_CT(rt->mob, key, keylen);
        return;
    }
    /* the hint: qdrouterd's treatment numbers */
    int hint = dist == CFG_DIST_MULTICAST ? 1 : dist == CFG_DIST_CLOSEST ? 2 : 3;
    core_rt_mobile_local_add_CT(rt->mob, key, keylen, hint);
}
