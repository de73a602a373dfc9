/* core/routing/lsdb.c: the link-state database (rules: lsdb.h).
 *
 * Threads: _CT - a database belongs to the core thread.  Routers are kept in the order they
 * were learned (qdrouterd's dict order: it decides which referrer a stub node hangs from in
 * path.c) and by mask bit.  Remembered HELLO senders keep their first-heard order too, since
 * that is the order of our `seen` list.
 */
#include "core/routing/lsdb.h"

#include "core/base/base.h"
#include "core/routing/path.h"

#include <string.h>

struct core_rt_lsdb {
    char            *id;                         /* own router id */
    size_t           id_len;                     /* its length */
    int64_t          instance;                   /* own boot number */
    core_rt_timers_t t;                          /* protocol timers */
    core_rt_ls_t     own;                        /* own link state */
    bool             ls_changed;                 /* own link state changed since the last tick */
    bool             recompute;                  /* routes must be recomputed */
    bool             dup_reported;               /* a duplicate id was reported */
    int64_t          mobile_seq;                 /* own mobile sequence (mobile.c sets it) */
    int64_t          last_topo_change;           /* ms */
    int64_t          last_ra;                    /* ms of the last RA */
    uint64_t         ticks;                      /* ticks so far */
    uint64_t         last_hello_tick;            /* tick of the last HELLO */
    uint32_t         radius;                     /* of the last computation */
    uint32_t         n;                          /* remote routers */
    core_rt_node_t  *order[CORE_RT_MAX_ROUTERS]; /* in learned order, [0, n) */
    core_rt_node_t  *bits[CORE_RT_MAX_ROUTERS];  /* by mask bit; [0] unused (self) */
    uint32_t         n_hellos;                   /* remembered HELLO senders */
    uint32_t         hellos_cap;                 /* allocated */
    char           **hello_ids;                  /* owned */
    int64_t         *hello_at;                   /* ms heard */
};

/* ------------------------------------------------------------------------------------------
 * Link states
 * ------------------------------------------------------------------------------------------ */

static int ls_find(const core_rt_ls_t *ls, const uint8_t *id, size_t len)
{
    for (uint32_t i = 0; i < ls->n; i++)
        if (strlen(ls->ids[i]) == len && memcmp(ls->ids[i], id, len) == 0)
            return (int)i;
    return -1;
}

/* Add {id: cost} unless id is there: returns whether it was added. */
static bool ls_add(core_rt_ls_t *ls, const uint8_t *id, size_t len, int64_t cost)
{
    if (ls_find(ls, id, len) >= 0)
        return false;
    if (ls->n == ls->cap) {
        ls->cap = ls->cap ? ls->cap * 2 : 4;
        ls->ids = base_realloc(ls->ids, ls->cap * sizeof(*ls->ids));
        ls->costs = base_realloc(ls->costs, ls->cap * sizeof(*ls->costs));
    }
    ls->ids[ls->n] = base_strndup((const char *)id, len);
    ls->costs[ls->n] = cost;
    ls->n++;
    return true;
}

static bool ls_del(core_rt_ls_t *ls, const char *id)
{
    int i = ls_find(ls, (const uint8_t *)id, strlen(id));
    if (i < 0)
        return false;
    BASE_FREE(ls->ids[i]);
    memmove(&ls->ids[i], &ls->ids[i + 1], (ls->n - (uint32_t)i - 1) * sizeof(*ls->ids));
    memmove(&ls->costs[i], &ls->costs[i + 1], (ls->n - (uint32_t)i - 1) * sizeof(*ls->costs));
    ls->n--;
    return true;
}

/* qdrouterd's del_all_peers: no peers, ls_seq 0 (last_seen stays). */
static void ls_clear(core_rt_ls_t *ls)
{
    for (uint32_t i = 0; i < ls->n; i++)
        BASE_FREE(ls->ids[i]);
    ls->n = 0;
    ls->ls_seq = 0;
}

static void ls_fini(core_rt_ls_t *ls)
{
    ls_clear(ls);
    BASE_FREE(ls->ids);
    BASE_FREE(ls->costs);
    ls->cap = 0;
}

/* ------------------------------------------------------------------------------------------
 * Routers
 * ------------------------------------------------------------------------------------------ */

/* A router id the database can hold: non-empty, without NUL (ids are kept as C strings;
 * qdrouterd's schema allows no control characters in them anyway). */
static bool id_ok(codec_bytes_t id)
{
    return id.len > 0 && memchr(id.ptr, 0, id.len) == NULL;
}

static bool is_own(const core_rt_lsdb_t *db, codec_bytes_t id)
{
    return id.len == db->id_len && memcmp(id.ptr, db->id, id.len) == 0;
}

static void push_bit(uint32_t *list, uint32_t *n, uint32_t bit)
{
    for (uint32_t i = 0; i < *n; i++)
        if (list[i] == bit)
            return;
    if (*n < CORE_RT_MAX_ROUTERS)
        list[(*n)++] = bit;
}

core_rt_node_t *core_rt_lsdb_find(const core_rt_lsdb_t *db, const uint8_t *id, size_t len)
{
    for (uint32_t i = 0; i < db->n; i++)
        if (strlen(db->order[i]->id) == len && memcmp(db->order[i]->id, id, len) == 0)
            return db->order[i];
    return NULL;
}

core_rt_node_t *core_rt_lsdb_node(const core_rt_lsdb_t *db, uint32_t maskbit)
{
    return maskbit > 0 && maskbit < CORE_RT_MAX_ROUTERS ? db->bits[maskbit] : NULL;
}

uint32_t core_rt_lsdb_count(const core_rt_lsdb_t *db)
{
    return db->n;
}

/* Learn a router: the lowest free mask bit (qdrouterd's allocation order).  NULL when all
 * 127 are taken. */
static core_rt_node_t *node_new(core_rt_lsdb_t *db, codec_bytes_t id, bool has_instance,
                                int64_t instance, int64_t version)
{
    uint32_t bit = 1;
    while (bit < CORE_RT_MAX_ROUTERS && db->bits[bit])
        bit++;
    if (bit == CORE_RT_MAX_ROUTERS)
        return NULL;
    core_rt_node_t *r = base_calloc(1, sizeof(*r));
    r->id = base_strndup((const char *)id.ptr, id.len);
    r->maskbit = bit;
    r->has_instance = has_instance;
    r->instance = instance;
    r->version = version;
    r->link = -1;
    r->next_hop = -1;
    r->cost = -1;
    r->upstream = -1;
    r->ra_at = -1;
    r->need_lsr = true;
    db->bits[bit] = r;
    db->order[db->n++] = r;
    return r;
}

static void node_free(core_rt_lsdb_t *db, core_rt_node_t *r)
{
    for (uint32_t i = 0; i < db->n; i++) {
        if (db->order[i] == r) {
            memmove(&db->order[i], &db->order[i + 1], (db->n - i - 1) * sizeof(db->order[0]));
            db->n--;
            break;
        }
    }
    db->bits[r->maskbit] = NULL;
    ls_fini(&r->ls);
    BASE_FREE(r->id);
    BASE_FREE(r);
}

/* The router named id, learned if unknown.  NULL when the table is full. */
static core_rt_node_t *node_get(core_rt_lsdb_t *db, codec_bytes_t id, bool has_instance,
                                int64_t instance, int64_t version)
{
    core_rt_node_t *r = core_rt_lsdb_find(db, id.ptr, id.len);
    return r ? r : node_new(db, id, has_instance, instance, version);
}

/* qdrouterd's update_instance: true (and R's state reset) when R restarted. */
static bool node_restarted(core_rt_node_t *r, int64_t instance, int64_t version,
                           core_rt_actions_t *a)
{
    if (!r->has_instance) {
        r->has_instance = true;
        r->instance = instance;
        return false;
    }
    if (r->instance == instance)
        return false;
    r->instance = instance;
    r->version = version;
    ls_clear(&r->ls);
    r->mobile_seq = 0;
    push_bit(a->restarted, &a->n_restarted, r->maskbit);
    return true;
}

static bool node_reachable(const core_rt_node_t *r)
{
    return r->link >= 0 || r->next_hop >= 0;
}

/* An LSR to R (a new request, not one sent again): waited for when it can go. */
static void ask_ls(core_rt_node_t *r, int64_t now, core_rt_actions_t *a)
{
    push_bit(a->lsr, &a->n_lsr, r->maskbit);
    if (node_reachable(r)) {
        r->lsr_wait = true;
        r->lsr_sent = now;
        r->lsr_again = 0;
    } else {
        r->need_lsr = true; /* the caller cannot send it: asked again once reachable */
    }
}

/* ------------------------------------------------------------------------------------------
 * Database
 * ------------------------------------------------------------------------------------------ */

core_rt_lsdb_t *core_rt_lsdb_new(const char *id, int64_t instance, core_rt_timers_t timers,
                                 int64_t now_ms)
{
    if (!id || !*id)
        return NULL;
    core_rt_lsdb_t *db = base_calloc(1, sizeof(*db));
    db->id = base_strdup(id);
    db->id_len = strlen(id);
    db->instance = instance;
    db->t = timers;
    db->last_ra = 0;
    (void)now_ms;
    return db;
}

void core_rt_lsdb_free(core_rt_lsdb_t *db)
{
    if (!db)
        return;
    while (db->n)
        node_free(db, db->order[db->n - 1]);
    ls_fini(&db->own);
    for (uint32_t i = 0; i < db->n_hellos; i++)
        BASE_FREE(db->hello_ids[i]);
    BASE_FREE(db->hello_ids);
    BASE_FREE(db->hello_at);
    BASE_FREE(db->id);
    BASE_FREE(db);
}

void core_rt_actions_clear(core_rt_actions_t *a)
{
    memset(a, 0, sizeof(*a));
}

const core_rt_ls_t *core_rt_lsdb_own_ls(const core_rt_lsdb_t *db)
{
    return &db->own;
}

uint32_t core_rt_lsdb_seen_CT(const core_rt_lsdb_t *db, const char **ids, uint32_t max)
{
    uint32_t n = db->n_hellos < max ? db->n_hellos : max;
    for (uint32_t i = 0; i < n; i++)
        ids[i] = db->hello_ids[i];
    return n;
}

uint32_t core_rt_lsdb_radius(const core_rt_lsdb_t *db)
{
    return db->radius;
}

int64_t core_rt_lsdb_ls_seq(const core_rt_lsdb_t *db)
{
    return db->own.ls_seq;
}

void core_rt_lsdb_set_mobile_seq_CT(core_rt_lsdb_t *db, int64_t mobile_seq)
{
    db->mobile_seq = mobile_seq;
}

int64_t core_rt_lsdb_mobile_seq(const core_rt_lsdb_t *db)
{
    return db->mobile_seq;
}

void core_rt_lsdb_node_mobile_seq_CT(core_rt_lsdb_t *db, uint32_t maskbit, int64_t seq)
{
    core_rt_node_t *r = core_rt_lsdb_node(db, maskbit);
    if (r)
        r->mobile_seq = seq;
}

/* ------------------------------------------------------------------------------------------
 * Messages
 * ------------------------------------------------------------------------------------------ */

static void hello_heard(core_rt_lsdb_t *db, codec_bytes_t id, int64_t now)
{
    for (uint32_t i = 0; i < db->n_hellos; i++) {
        if (strlen(db->hello_ids[i]) == id.len && memcmp(db->hello_ids[i], id.ptr, id.len) == 0) {
            db->hello_at[i] = now;
            return;
        }
    }
    if (db->n_hellos == db->hellos_cap) {
        db->hellos_cap = db->hellos_cap ? db->hellos_cap * 2 : 8;
        db->hello_ids = base_realloc(db->hello_ids, db->hellos_cap * sizeof(*db->hello_ids));
        db->hello_at = base_realloc(db->hello_at, db->hellos_cap * sizeof(*db->hello_at));
    }
    db->hello_ids[db->n_hellos] = base_strndup((const char *)id.ptr, id.len);
    db->hello_at[db->n_hellos] = now;
    db->n_hellos++;
}

int core_rt_lsdb_hello_CT(core_rt_lsdb_t *db, const core_rt_msg_t *m, int32_t conn, int64_t cost,
                          int64_t now_ms, core_rt_actions_t *a)
{
    if (!id_ok(m->id))
        return -1;
    if (is_own(db, m->id)) {
        if (!db->dup_reported && m->instance != db->instance) {
            db->dup_reported = true;
            a->dup_id = true;
        }
        return 0;
    }
    bool           seen_me = false;
    core_rt_iter_t it = core_rt_iter(&m->seen);
    codec_bytes_t  s;
    while (core_rt_strs_next(&it, &s))
        seen_me = seen_me || is_own(db, s);
    hello_heard(db, m->id, now_ms);
    if (!seen_me)
        return 0;
    core_rt_node_t *r = node_get(db, m->id, true, m->instance, m->pv);
    if (!r)
        return -1;
    /* neighbour refresh */
    if (r->link != conn) {
        r->link = conn;
        r->next_hop = -1;
        r->need_lsr = true;
        if (ls_add(&db->own, m->id.ptr, m->id.len, cost))
            db->ls_changed = true;
    }
    r->refresh = now_ms;
    if (node_restarted(r, m->instance, m->pv, a)) {
        db->recompute = true;
        r->need_lsr = true;
    }
    return 0;
}

/* The node of the router that sent m (RA, LSU, LSR), made if it is new; has_instance says
 * whether m carries the sender's instance.  Returns -1 for a bad sender id or a full table;
 * 0 with *r NULL for our own id (the message is ignored); 0 with *r the node otherwise. */
static int sender_node(core_rt_lsdb_t *db, const core_rt_msg_t *m, bool has_instance,
                       core_rt_node_t **r)
{
    *r = NULL;
    if (!id_ok(m->id))
        return -1;
    if (is_own(db, m->id))
        return 0;
    *r = node_get(db, m->id, has_instance, has_instance ? m->instance : 0, m->pv);
    return *r ? 0 : -1;
}

int core_rt_lsdb_ra_CT(core_rt_lsdb_t *db, const core_rt_msg_t *m, int64_t now_ms,
                       core_rt_actions_t *a)
{
    core_rt_node_t *r;
    int             rc = sender_node(db, m, true, &r);
    if (!r)
        return rc;
    if (node_restarted(r, m->instance, m->pv, a)) {
        db->recompute = true;
        r->need_lsr = true;
    }
    r->ls.last_seen = now_ms;
    r->ra_at = now_ms;
    if (r->ls.ls_seq < m->ls_seq)
        ask_ls(r, now_ms, a); /* at once, reachable or not (1.19) */
    if (r->mobile_seq < m->mobile_seq)
        r->need_mar = true;
    return 0;
}

int core_rt_lsdb_lsu_CT(core_rt_lsdb_t *db, const core_rt_msg_t *m, int64_t now_ms,
                        core_rt_actions_t *a)
{
    (void)a;
    core_rt_node_t *r;
    int             rc = sender_node(db, m, m->instance != 0, &r);
    if (!r)
        return rc;
    r->lsr_wait = false; /* the way to R and back works: no need to ask again */
    if (m->instance != 0) {
        /* The instance the link state belongs to: known from now on, so that the RA or
         * HELLO of a restart finds it changed and drops this link state (without it, the
         * restarted router's new link state, its ls_seq counted from 0 again, would be
         * refused as older than the one kept from its previous life).  A link state of
         * another instance than the known one is not taken: a restart is for an RA or
         * HELLO to announce, and one from the previous life may still be on its way. */
        if (!r->has_instance) {
            r->has_instance = true;
            r->instance = m->instance;
        } else if (r->instance != m->instance) {
            return 0;
        }
    }
    if (m->ls_ls_seq <= r->ls.ls_seq)
        return 0;
    /* the peers not known yet must fit before anything changes */
    uint32_t       unknown = 0;
    core_rt_iter_t it = core_rt_iter(&m->peers);
    codec_bytes_t  id;
    int64_t        cost;
    while (core_rt_peers_next(&it, &id, &cost))
        if (id_ok(id) && !is_own(db, id) && !core_rt_lsdb_find(db, id.ptr, id.len))
            unknown++;
    if (db->n + unknown > CORE_RT_MAX_ROUTERS - 1)
        return -1;
    ls_clear(&r->ls);
    it = core_rt_iter(&m->peers);
    while (core_rt_peers_next(&it, &id, &cost)) {
        if (!id_ok(id))
            continue; /* names no router: path.c needs real ids */
        int i = ls_find(&r->ls, id.ptr, id.len);
        if (i >= 0)
            r->ls.costs[i] = cost; /* a repeated key: the last value, the first place */
        else
            ls_add(&r->ls, id.ptr, id.len, cost);
    }
    r->ls.ls_seq = m->ls_ls_seq;
    r->ls.last_seen = now_ms;
    db->recompute = true;
    for (uint32_t i = 0; i < r->ls.n; i++) {
        codec_bytes_t p = {(const uint8_t *)r->ls.ids[i], strlen(r->ls.ids[i])};
        if (!is_own(db, p) && !core_rt_lsdb_find(db, p.ptr, p.len))
            node_new(db, p, false, 0, 0);
    }
    return 0;
}

int core_rt_lsdb_lsr_CT(core_rt_lsdb_t *db, const core_rt_msg_t *m, core_rt_actions_t *a)
{
    core_rt_node_t *r;
    int             rc = sender_node(db, m, false, &r);
    if (!r)
        return rc;
    if (node_reachable(r))
        push_bit(a->lsu, &a->n_lsu, r->maskbit);
    else
        r->owe_lsu = true;
    return 0;
}

void core_rt_lsdb_link_lost_CT(core_rt_lsdb_t *db, int32_t conn)
{
    for (uint32_t i = 0; i < db->n; i++) {
        core_rt_node_t *r = db->order[i];
        if (r->link == conn) {
            r->link = -1;
            if (ls_del(&db->own, r->id))
                db->ls_changed = true;
        }
    }
}

/* ------------------------------------------------------------------------------------------
 * Tick
 * ------------------------------------------------------------------------------------------ */

static void expire(core_rt_lsdb_t *db, int64_t now, core_rt_actions_t *a)
{
    core_rt_node_t *list[CORE_RT_MAX_ROUTERS];
    uint32_t        n = db->n;
    memcpy(list, db->order, n * sizeof(list[0]));
    for (uint32_t i = 0; i < n; i++) {
        core_rt_node_t *r = list[i];
        if (r->link >= 0 && now - r->refresh > (int64_t)db->t.hello_max_age * 1000) {
            r->link = -1;
            if (ls_del(&db->own, r->id))
                db->ls_changed = true;
        }
        if (now - r->ls.last_seen > (int64_t)db->t.remote_ls_max_age * 1000 && r->ls.n) {
            ls_clear(&r->ls);
            db->recompute = true;
        }
        /* its own RA is its word that it exists: kept as long as a link state would be,
         * while the link state that links to it may still be on its way (lsdb.h) */
        bool referred =
            r->ls.n > 0 || r->link >= 0 ||
            (r->ra_at >= 0 && now - r->ra_at <= (int64_t)db->t.remote_ls_max_age * 1000);
        for (uint32_t j = 0; j < db->n && !referred; j++)
            referred = db->order[j] != r &&
                       ls_find(&db->order[j]->ls, (const uint8_t *)r->id, strlen(r->id)) >= 0;
        if (referred) {
            r->keep_alive = 0; /* the grace period starts again when it next becomes deletable */
        } else if (++r->keep_alive > 2) {
            push_bit(a->deleted, &a->n_deleted, r->maskbit);
            node_free(db, r);
        }
    }
}

/* Recompute routes over the own link state and every router's (learned order). */
static void recompute(core_rt_lsdb_t *db, core_rt_actions_t *a)
{
    core_rt_ls_in_t coll[CORE_RT_MAX_ROUTERS];
    codec_bytes_t  *views = NULL;
    size_t          total = db->own.n;
    for (uint32_t i = 0; i < db->n; i++)
        total += db->order[i]->ls.n;
    views = base_calloc(total + 1, sizeof(*views));
    size_t              v = 0;
    const core_rt_ls_t *src[CORE_RT_MAX_ROUTERS];
    src[0] = &db->own;
    coll[0].id = (codec_bytes_t){(const uint8_t *)db->id, db->id_len};
    for (uint32_t i = 0; i < db->n; i++) {
        src[i + 1] = &db->order[i]->ls;
        coll[i + 1].id =
            (codec_bytes_t){(const uint8_t *)db->order[i]->id, strlen(db->order[i]->id)};
    }
    for (uint32_t i = 0; i <= db->n; i++) {
        coll[i].peers = views + v;
        coll[i].costs = src[i]->costs;
        coll[i].n_peers = src[i]->n;
        for (uint32_t j = 0; j < src[i]->n; j++)
            views[v++] = (codec_bytes_t){(const uint8_t *)src[i]->ids[j], strlen(src[i]->ids[j])};
    }
    core_rt_paths_t p;
    if (core_rt_paths_compute(coll, db->n + 1, &p) != 0) {
        BASE_FREE(views);
        return; /* cannot happen: ids are unique and non-empty */
    }
    db->radius = p.radius;
    for (uint32_t i = 0; i < db->n; i++) {
        core_rt_node_t *r = db->order[i];
        uint32_t        k = i + 1; /* its node index */
        int32_t         nh = -1;
        int64_t         cost = -1;
        uint64_t        vo[2] = {1, 0}; /* self is a valid origin of everything */
        int32_t         up = -1;
        bool            reachable = p.next_hop[k] >= 0;
        if (reachable) {
            int32_t u = p.upstream[k];
            if (u >= 1 && (uint32_t)u < p.n_coll)
                up = (int32_t)db->order[u - 1]->maskbit;
            uint32_t hop = (uint32_t)p.next_hop[k];
            if (hop != k && hop >= 1 && hop < p.n_coll)
                nh = (int32_t)db->order[hop - 1]->maskbit;
            cost = p.cost[k];
            for (uint32_t o = 1; o < p.n_coll; o++) {
                if (core_rt_paths_is_valid_origin(&p, k, o)) {
                    uint32_t bit = db->order[o - 1]->maskbit;
                    vo[bit / 64] |= (uint64_t)1 << (bit % 64);
                }
            }
        }
        if (r->next_hop != nh || r->cost != cost || r->reachable != reachable ||
            r->vo[0] != vo[0] || r->vo[1] != vo[1] || r->upstream != up)
            a->routes_changed = true;
        r->upstream = up;
        r->next_hop = nh;
        r->cost = cost;
        r->reachable = reachable;
        r->vo[0] = vo[0];
        r->vo[1] = vo[1];
    }
    core_rt_paths_fini(&p);
    BASE_FREE(views);
}

void core_rt_lsdb_tick_CT(core_rt_lsdb_t *db, int64_t now, core_rt_actions_t *a)
{
    /* HELLO: forget senders not heard for helloMaxAge; one HELLO per interval of ticks */
    for (uint32_t i = 0; i < db->n_hellos;) {
        if (now - db->hello_at[i] > (int64_t)db->t.hello_max_age * 1000) {
            BASE_FREE(db->hello_ids[i]);
            memmove(&db->hello_ids[i], &db->hello_ids[i + 1],
                    (db->n_hellos - i - 1) * sizeof(*db->hello_ids));
            memmove(&db->hello_at[i], &db->hello_at[i + 1],
                    (db->n_hellos - i - 1) * sizeof(*db->hello_at));
            db->n_hellos--;
        } else {
            i++;
        }
    }
    db->ticks++;
    if (db->ticks - db->last_hello_tick >= (uint64_t)db->t.hello_interval) {
        db->last_hello_tick = db->ticks;
        a->send_hello = true;
    }
    /* RA: the flux interval within 2 x raIntervalFlux of the last topology change */
    if (a->send_ra)
        db->last_ra = now; /* the caller sends one already (a new mobile_seq) */
    bool    flux = now - db->last_topo_change <= (int64_t)db->t.ra_interval_flux * 2000;
    int64_t interval = (int64_t)(flux ? db->t.ra_interval_flux : db->t.ra_interval) * 1000;
    /* Half a tick early counts as due: ticks come once a second, each a few milliseconds
     * late or early on its second, so an interval of k seconds since an RA sent on a tick is
     * k ticks, not k + 1 whenever this tick is a little earlier on its second than that one
     * (qdrouterd's timer, re-armed a second after each tick, never comes early). */
    if (now - db->last_ra >= interval - 500) {
        db->last_ra = now;
        a->send_ra = true;
    }
    /* node tracker */
    expire(db, now, a);
    bool ra_now = false;
    if (db->ls_changed || db->recompute)
        db->last_topo_change = now;
    if (db->ls_changed) {
        db->ls_changed = false;
        db->own.ls_seq++;
        db->recompute = true;
        ra_now = true;
    }
    if (db->recompute) {
        db->recompute = false;
        recompute(db, a);
    }
    for (uint32_t i = 0; i < db->n; i++) {
        core_rt_node_t *r = db->order[i];
        if (r->need_lsr && node_reachable(r)) {
            r->need_lsr = false;
            ask_ls(r, now, a);
        } else if (r->lsr_wait && node_reachable(r) && now - r->lsr_sent >= 500 &&
                   r->lsr_again < (uint32_t)db->t.ra_interval_flux) {
            /* lost on its way (a router on it, or R, could not route it yet): again */
            r->lsr_sent = now;
            r->lsr_again++;
            push_bit(a->lsr, &a->n_lsr, r->maskbit);
        }
        if (r->owe_lsu && node_reachable(r)) {
            r->owe_lsu = false;
            push_bit(a->lsu, &a->n_lsu, r->maskbit);
        }
        if (r->need_mar && node_reachable(r)) {
            r->need_mar = false;
            push_bit(a->mar, &a->n_mar, r->maskbit);
        }
    }
    if (ra_now) {
        db->last_ra = now;
        a->send_ra = true;
    }
}
