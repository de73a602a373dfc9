/* router/policy.c: vhost policies (see policy.h) - the vhost table, admission of an open,
 * and the session and link rules of an admitted connection.
 *
 * Threads: any.  The table and the live connection counts are under p->lock, held only for
 * map look-ups and counts (log lines are written after it is released).  A vhost's rules
 * (pvhost_t) are immutable once made and reference-counted: a connection keeps the rules it was
 * admitted with, an UPDATE puts new rules in the table for the opens after it.  A vhost's
 * counters (pstats_t) live as long as the policy (qdrouterd keeps a deleted vhost's stats
 * too), so a connection may point at them without a reference.
 */
#include "router/policy.h"

#include "core/base/base.h"
#include "core/base/log.h"
#include "core/base/map.h"
#include "core/base/pattern.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* Distinct users a vhost's counters remember (denials of users past it count for the vhost
 * only): a flood of made-up names may not grow the router's memory. */
#define POLICY_USERS_MAX 10000

#define PLOG(lvl, ...)                                                                             \
    do {                                                                                           \
        if (base_log_enabled(BASE_LOG_MOD_POLICY, BASE_LOG_##lvl))                                 \
            base_log_write(BASE_LOG_MOD_POLICY, BASE_LOG_##lvl, __VA_ARGS__);                      \
    } while (0)

typedef struct puser {
    uint32_t current; /* connections open (under the lock) */
    uint64_t denied;  /* connections and links denied (under the lock) */
} puser_t;

typedef struct pstats {
    char            *hostname;
    uint64_t         approved, denied, current; /* under the lock */
    _Atomic uint64_t session_denied, sender_denied, receiver_denied, size_denied;
    base_map_t       users; /* user -> puser_t (under the lock) */
    base_map_t       hosts; /* host -> connections open, as a pointer-sized count */
} pstats_t;

typedef struct pvhost {
    _Atomic int      refs;
    cfg_vhost_t      cfg;
    base_pattern_t **src_tree; /* per group: sourcePattern as a tree, or NULL */
    base_pattern_t **tgt_tree; /* per group: targetPattern */
    pstats_t        *st;
} pvhost_t;

struct rtr_policy {
    pthread_mutex_t lock;
    bool            enabled;
    bool            patterns; /* enableVhostNamePatterns */
    char           *default_vhost;
    uint64_t        max_message_size; /* the policy entity's */
    base_map_t      vhosts;           /* hostname -> pvhost_t (a reference) */
    base_map_t      aliases;          /* alias -> pvhost_t (borrowed from vhosts) */
    base_pattern_t *hpat;             /* with patterns: hostnames and aliases -> pvhost_t */
    base_map_t      stats;            /* hostname -> pstats_t (never removed) */
    base_map_t      conns;            /* connection id -> its rtr_pconn_t (admitted, open) */
};

struct rtr_pconn {
    rtr_policy_t            *p;
    uint64_t                 conn_id;
    pvhost_t                *vh;
    const cfg_vhost_group_t *g;
    size_t                   gi;
    pstats_t                *st;
    char                    *user;
    char                    *host;
    uint64_t                 max_message_size;
    bool                     outgoing; /* a connector's (`$connector`): not in the counts */
};

/* ---------------------------------------------------------------- vhost rules */

static void pvhost_unref(pvhost_t *v)
{
    if (!v || atomic_fetch_sub(&v->refs, 1) != 1)
        return;
    for (size_t i = 0; i < v->cfg.n_groups; i++) {
        base_pattern_free(v->src_tree[i]);
        base_pattern_free(v->tgt_tree[i]);
    }
    free(v->src_tree);
    free(v->tgt_tree);
    cfg_vhost_fini(&v->cfg);
    free(v);
}

/* A pattern item back as the text qdrouterd's tree holds (${user} a literal token). */
static char *vname_text(const cfg_vname_t *n)
{
    size_t len = strlen(n->s1) + strlen(n->s2) + 8;
    char  *s = base_malloc(len);
    switch (n->kind) {
    case CFG_VNAME_PREFIX:
        snprintf(s, len, "${user}%s", n->s2);
        break;
    case CFG_VNAME_SUFFIX:
        snprintf(s, len, "%s${user}", n->s1);
        break;
    case CFG_VNAME_WILDCARD:
        snprintf(s, len, "*");
        break;
    default:
        snprintf(s, len, "%s", n->s1);
        break;
    }
    return s;
}

static base_pattern_t *names_tree(const cfg_vnames_t *n)
{
    if (!n->given)
        return NULL;
    base_pattern_t *t = base_pattern_new();
    for (size_t i = 0; i < n->n; i++) {
        char *s = vname_text(&n->items[i]);
        (void)base_pattern_add(t, s, (void *)1); /* duplicates and empty tokens: no match */
        free(s);
    }
    return t;
}

static pstats_t *stats_get_locked(rtr_policy_t *p, const char *hostname)
{
    pstats_t *st = base_map_get(&p->stats, hostname, strlen(hostname));
    if (st)
        return st;
    st = base_calloc(1, sizeof(*st));
    st->hostname = base_strdup(hostname);
    base_map_init(&st->users);
    base_map_init(&st->hosts);
    base_map_put(&p->stats, hostname, strlen(hostname), st);
    return st;
}

static pvhost_t *pvhost_new(cfg_vhost_t *v)
{
    pvhost_t *x = base_calloc(1, sizeof(*x));
    atomic_init(&x->refs, 1);
    x->cfg = *v;
    *v = (cfg_vhost_t){0};
    size_t n = x->cfg.n_groups ? x->cfg.n_groups : 1;
    x->src_tree = base_calloc(n, sizeof(base_pattern_t *));
    x->tgt_tree = base_calloc(n, sizeof(base_pattern_t *));
    for (size_t i = 0; i < x->cfg.n_groups; i++) {
        x->src_tree[i] = names_tree(&x->cfg.groups[i].source_pattern);
        x->tgt_tree[i] = names_tree(&x->cfg.groups[i].target_pattern);
    }
    return x;
}

/* Take v's names out of the look-up tables (not out of vhosts). */
static void names_remove_locked(rtr_policy_t *p, pvhost_t *v)
{
    for (size_t i = 0; i < v->cfg.n_aliases; i++)
        base_map_del(&p->aliases, v->cfg.aliases[i], strlen(v->cfg.aliases[i]));
    if (p->hpat) {
        base_pattern_remove(p->hpat, v->cfg.hostname);
        for (size_t i = 0; i < v->cfg.n_aliases; i++)
            base_pattern_remove(p->hpat, v->cfg.aliases[i]);
    }
}

static const char *name_owner_locked(rtr_policy_t *p, const char *name, const pvhost_t *skip)
{
    pvhost_t *o = base_map_get(&p->vhosts, name, strlen(name));
    if (!o)
        o = base_map_get(&p->aliases, name, strlen(name));
    if (!o && p->hpat)
        o = base_pattern_get(p->hpat, name);
    return o && o != skip && strcmp(o->cfg.hostname, skip ? skip->cfg.hostname : "") != 0
               ? o->cfg.hostname
               : NULL;
}

int rtr_policy_vhost_set(rtr_policy_t *p, cfg_vhost_t *v, char *err, size_t errlen)
{
    pthread_mutex_lock(&p->lock);
    pvhost_t   *old = base_map_get(&p->vhosts, v->hostname, strlen(v->hostname));
    const char *owner = NULL;
    if ((owner = name_owner_locked(p, v->hostname, old)) != NULL) {
        snprintf(err, errlen, "vhost '%s': the name is an alias of vhost '%s' already", v->hostname,
                 owner);
        pthread_mutex_unlock(&p->lock);
        return -1;
    }
    for (size_t i = 0; i < v->n_aliases; i++) {
        if ((owner = name_owner_locked(p, v->aliases[i], old)) != NULL) {
            snprintf(err, errlen, "vhost '%s': alias '%s' names vhost '%s' already", v->hostname,
                     v->aliases[i], owner);
            pthread_mutex_unlock(&p->lock);
            return -1;
        }
    }
    if (old)
        names_remove_locked(p, old);
    pvhost_t *x = pvhost_new(v);
    x->st = stats_get_locked(p, x->cfg.hostname);
    base_map_put(&p->vhosts, x->cfg.hostname, strlen(x->cfg.hostname), x);
    for (size_t i = 0; i < x->cfg.n_aliases; i++)
        base_map_put(&p->aliases, x->cfg.aliases[i], strlen(x->cfg.aliases[i]), x);
    if (p->hpat) {
        (void)base_pattern_add(p->hpat, x->cfg.hostname, x);
        for (size_t i = 0; i < x->cfg.n_aliases; i++)
            (void)base_pattern_add(p->hpat, x->cfg.aliases[i], x);
    }
    pthread_mutex_unlock(&p->lock);
    PLOG(INFO, "%s policy rules for vhost %s", old ? "Updated" : "Created", x->cfg.hostname);
    pvhost_unref(old);
    return 0;
}

int rtr_policy_vhost_del(rtr_policy_t *p, const char *hostname)
{
    pthread_mutex_lock(&p->lock);
    pvhost_t *old = base_map_del(&p->vhosts, hostname, strlen(hostname));
    if (old)
        names_remove_locked(p, old);
    pthread_mutex_unlock(&p->lock);
    if (!old)
        return -1;
    PLOG(INFO, "Deleted policy rules for vhost %s", hostname);
    pvhost_unref(old);
    return 0;
}

rtr_policy_t *rtr_policy_new(const cfg_t *cfg)
{
    rtr_policy_t *p = base_calloc(1, sizeof(*p));
    pthread_mutex_init(&p->lock, NULL);
    p->enabled = cfg->policy.enable_vhost_policy;
    p->patterns = cfg->policy.enable_vhost_name_patterns;
    p->default_vhost = base_strdup(cfg->policy.default_vhost ? cfg->policy.default_vhost : "");
    p->max_message_size = cfg->policy.max_message_size;
    base_map_init(&p->vhosts);
    base_map_init(&p->aliases);
    base_map_init(&p->stats);
    base_map_init(&p->conns);
    if (p->patterns)
        p->hpat = base_pattern_new();
    for (size_t i = 0; i < cfg->n_vhosts; i++) {
        cfg_vhost_t v;
        char        err[256];
        cfg_vhost_copy(&v, &cfg->vhosts[i]);
        if (rtr_policy_vhost_set(p, &v, err, sizeof(err)) < 0) {
            /* the load checked names; only a pattern clash is left (two patterns that
               normalize alike), which qdrouterd refuses the same way */
            PLOG(WARNING, "%s", err);
            cfg_vhost_fini(&v);
        }
    }
    if (p->enabled && p->default_vhost[0])
        PLOG(INFO, "Policy fallback defaultVhost is defined: '%s'", p->default_vhost);
    return p;
}

void rtr_policy_free(rtr_policy_t *p)
{
    if (!p)
        return;
    base_map_slot_t *slot;
    for (size_t i = 0; (i = base_map_next(&p->vhosts, i, &slot)) != 0;)
        pvhost_unref(slot->value);
    for (size_t i = 0; (i = base_map_next(&p->stats, i, &slot)) != 0;) {
        pstats_t        *st = slot->value;
        base_map_slot_t *u;
        for (size_t j = 0; (j = base_map_next(&st->users, j, &u)) != 0;)
            free(u->value);
        base_map_fini(&st->users);
        base_map_fini(&st->hosts);
        free(st->hostname);
        free(st);
    }
    base_map_fini(&p->vhosts);
    base_map_fini(&p->aliases);
    base_map_fini(&p->stats);
    base_map_fini(&p->conns);
    base_pattern_free(p->hpat);
    free(p->default_vhost);
    pthread_mutex_destroy(&p->lock);
    free(p);
}

bool rtr_policy_enabled(const rtr_policy_t *p)
{
    return p && p->enabled;
}

/* ---------------------------------------------------------------- admission */

/* The client's address as family and bytes (an IPv4-mapped IPv6 address is IPv4). */
static bool host_bytes(const char *host, int *family, unsigned char *b)
{
    memset(b, 0, 16);
    if (inet_pton(AF_INET, host, b) == 1) {
        *family = AF_INET;
        return true;
    }
    if (inet_pton(AF_INET6, host, b) != 1)
        return false;
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (memcmp(b, mapped, 12) == 0) {
        memmove(b, b + 12, 4);
        memset(b + 4, 0, 12);
        *family = AF_INET;
    } else {
        *family = AF_INET6;
    }
    return true;
}

static bool host_allowed(const cfg_vhost_group_t *g, const char *host)
{
    int           fam = 0;
    unsigned char b[16];
    bool          parsed = host_bytes(host, &fam, b);
    for (size_t i = 0; i < g->n_hosts; i++) {
        const cfg_vhost_range_t *r = &g->hosts[i];
        if (r->wildcard)
            return true;
        size_t n = r->family == AF_INET ? 4 : 16;
        if (parsed && r->family == fam && memcmp(b, r->lo, n) >= 0 && memcmp(b, r->hi, n) <= 0)
            return true;
    }
    return false;
}

static const cfg_vhost_group_t *group_of(const cfg_vhost_t *v, const char *user, size_t *gi)
{
    const cfg_vhost_group_t *star = NULL;
    size_t                   star_i = 0;
    for (size_t i = 0; i < v->n_groups; i++) {
        for (size_t j = 0; j < v->groups[i].n_users; j++) {
            if (strcmp(v->groups[i].users[j], user) == 0) {
                *gi = i;
                return &v->groups[i];
            }
            if (!star && strcmp(v->groups[i].users[j], "*") == 0)
                star = &v->groups[i], star_i = i;
        }
    }
    if (star) {
        *gi = star_i;
        return star;
    }
    if (v->allow_unknown_user) {
        for (size_t i = 0; i < v->n_groups; i++) {
            if (strcmp(v->groups[i].name, "$default") == 0) {
                *gi = i;
                return &v->groups[i];
            }
        }
    }
    return NULL;
}

static pvhost_t *lookup_locked(rtr_policy_t *p, const char *vhost_in)
{
    pvhost_t *v = NULL;
    if (p->hpat)
        v = base_pattern_match(p->hpat, vhost_in, strlen(vhost_in));
    if (!v)
        v = base_map_get(&p->vhosts, vhost_in, strlen(vhost_in));
    if (!v)
        v = base_map_get(&p->aliases, vhost_in, strlen(vhost_in));
    if (!v && p->default_vhost[0])
        v = base_map_get(&p->vhosts, p->default_vhost, strlen(p->default_vhost));
    return v;
}

static puser_t *user_locked(pstats_t *st, const char *user, bool make)
{
    puser_t *u = base_map_get(&st->users, user, strlen(user));
    if (!u && make && st->users.count < POLICY_USERS_MAX) {
        u = base_calloc(1, sizeof(*u));
        base_map_put(&st->users, user, strlen(user), u);
    }
    return u;
}

static void count_denial_locked(pstats_t *st, const char *user)
{
    st->denied++;
    puser_t *u = user_locked(st, user, true);
    if (u)
        u->denied++;
}

/* A connection's record under group `gi` of vhost `v`, counted in `st`: it holds a reference
 * to the vhost and is in p->conns.  Under p->lock. */
static rtr_pconn_t *pconn_new_locked(rtr_policy_t *p, uint64_t conn_id, pvhost_t *v, size_t gi,
                                     pstats_t *st, bool outgoing)
{
    atomic_fetch_add(&v->refs, 1);
    rtr_pconn_t *pc = base_calloc(1, sizeof(*pc));
    pc->p = p;
    pc->conn_id = conn_id;
    pc->vh = v;
    pc->g = &v->cfg.groups[gi];
    pc->gi = gi;
    pc->st = st;
    pc->outgoing = outgoing;
    base_map_uput(&p->conns, conn_id, pc);
    return pc;
}

/* The rest of a new record, outside the lock: its user and host, and the largest message its
 * group, else its vhost, else the policy allows. */
static void pconn_fill(rtr_pconn_t *pc, const char *user, const char *host)
{
    const cfg_vhost_group_t *g = pc->g;
    pc->user = base_strdup(user);
    pc->host = base_strdup(host);
    pc->max_message_size = g->max_message_size >= 0 ? (uint64_t)g->max_message_size
                           : pc->vh->cfg.max_message_size >= 0
                               ? (uint64_t)pc->vh->cfg.max_message_size
                               : pc->p->max_message_size;
}

rtr_pconn_t *rtr_policy_open(rtr_policy_t *p, uint64_t conn_id, const char *vhost_in,
                             const char *user, const char *host)
{
    char        why[160] = "";
    const char *vname = vhost_in;
    size_t      gi = 0;

    pthread_mutex_lock(&p->lock);
    pvhost_t                *v = lookup_locked(p, vhost_in);
    const cfg_vhost_group_t *g = NULL;
    if (!v) {
        snprintf(why, sizeof(why), "No policy defined for vhost");
        goto deny;
    }
    vname = v->cfg.hostname;
    g = group_of(&v->cfg, user, &gi);
    if (!g) {
        snprintf(why, sizeof(why), "User is not in a user group and unknown users are denied");
        count_denial_locked(v->st, user);
        goto deny;
    }
    if (!host_allowed(g, host)) {
        snprintf(why, sizeof(why), "User is not allowed to connect from this network host");
        count_denial_locked(v->st, user);
        goto deny;
    }
    pstats_t *st = v->st;
    puser_t  *u = user_locked(st, user, false);
    uint32_t  n_user = u ? u->current : 0;
    uint32_t  n_host = (uint32_t)(uintptr_t)base_map_get(&st->hosts, host, strlen(host));
    uint32_t  max_user =
        g->max_conn_per_user >= 0 ? (uint32_t)g->max_conn_per_user : v->cfg.max_conn_per_user;
    uint32_t max_host =
        g->max_conn_per_host >= 0 ? (uint32_t)g->max_conn_per_host : v->cfg.max_conn_per_host;
    bool by_total = st->current < v->cfg.max_connections;
    bool by_user = n_user < max_user;
    bool by_host = n_host < max_host;
    if (!by_total || !by_user || !by_host) {
        /* qdrouterd logs one line per limit hit; one line here names them all */
        snprintf(why, sizeof(why), "%s%s%s",
                 !by_total ? "Connection denied by application connection limit" : "",
                 !by_user ? (!by_total ? "; per user limit"
                                       : "Connection denied by application per user limit")
                          : "",
                 !by_host
                     ? ((!by_total || !by_user) ? "; per host limit"
                                                : "Connection denied by application per host limit")
                     : "");
        count_denial_locked(st, user);
        goto deny;
    }
    u = user_locked(st, user, true);
    if (u)
        u->current++;
    base_map_put(&st->hosts, host, strlen(host), (void *)(uintptr_t)(n_host + 1));
    st->current++;
    st->approved++;
    rtr_pconn_t *pc = pconn_new_locked(p, conn_id, v, gi, st, false);
    pthread_mutex_unlock(&p->lock);
    pconn_fill(pc, user, host);
    if (strcmp(vname, vhost_in) != 0)
        PLOG(DEBUG,
             "[C%llu] AMQP Open for user '%s', rhost '%s', vhost '%s': proceeds using "
             "vhost '%s' ruleset",
             (unsigned long long)conn_id, user, host, vhost_in, vname);
    PLOG(TRACE, "[C%llu] ALLOW AMQP Open for user '%s', rhost '%s', vhost '%s', group '%s'",
         (unsigned long long)conn_id, user, host, vname, g->name);
    return pc;

deny:
    pthread_mutex_unlock(&p->lock);
    PLOG(INFO, "[C%llu] DENY AMQP Open for user '%s', rhost '%s', vhost '%s': %s",
         (unsigned long long)conn_id, user, host, vname, why);
    return NULL;
}

/* qdrouterd's group of the settings of connections the router makes itself */
#define POLICY_CONNECTOR_GROUP "$connector"

rtr_pconn_t *rtr_policy_open_connector(rtr_policy_t *p, uint64_t conn_id, const char *vhost_in,
                                       const char *user, const char *host)
{
    pthread_mutex_lock(&p->lock);
    pvhost_t                *v = lookup_locked(p, vhost_in);
    size_t                   gi = 0;
    const cfg_vhost_group_t *g = NULL;
    for (size_t i = 0; v && i < v->cfg.n_groups && !g; i++) {
        if (strcmp(v->cfg.groups[i].name, POLICY_CONNECTOR_GROUP) == 0) {
            g = &v->cfg.groups[i];
            gi = i;
        }
    }
    if (!g) {
        pthread_mutex_unlock(&p->lock);
        /* qdrouterd's line (it names the connection id twice) */
        PLOG(ERROR,
             "[C%llu] Failed to find policyVhost settings for connection '%llu', policyVhost: "
             "'%s'",
             (unsigned long long)conn_id, (unsigned long long)conn_id, vhost_in);
        return NULL;
    }
    rtr_pconn_t *pc = pconn_new_locked(p, conn_id, v, gi, v->st, true);
    pthread_mutex_unlock(&p->lock);
    pconn_fill(pc, user, host);
    PLOG(TRACE, "[C%llu] Connector connection to '%s' under vhost '%s', group '%s'",
         (unsigned long long)conn_id, host, v->cfg.hostname, g->name);
    return pc;
}

void rtr_policy_close(rtr_policy_t *p, rtr_pconn_t *pc)
{
    if (!pc)
        return;
    pthread_mutex_lock(&p->lock);
    if (base_map_uget(&p->conns, pc->conn_id) == pc)
        base_map_udel(&p->conns, pc->conn_id);
    if (pc->outgoing)
        goto out_unlock;
    pstats_t *st = pc->st;
    st->current--;
    puser_t *u = user_locked(st, pc->user, false);
    if (u && u->current)
        u->current--;
    if (u && !u->current && !u->denied) {
        base_map_del(&st->users, pc->user, strlen(pc->user));
        free(u);
    }
    uintptr_t n = (uintptr_t)base_map_get(&st->hosts, pc->host, strlen(pc->host));
    if (n > 1)
        base_map_put(&st->hosts, pc->host, strlen(pc->host), (void *)(n - 1));
    else
        base_map_del(&st->hosts, pc->host, strlen(pc->host));
out_unlock:
    pthread_mutex_unlock(&p->lock);
    pvhost_unref(pc->vh);
    free(pc->user);
    free(pc->host);
    free(pc);
}

uint32_t rtr_pconn_max_frame_size(const rtr_pconn_t *pc)
{
    return pc->g->max_frame_size;
}

uint32_t rtr_pconn_max_sessions(const rtr_pconn_t *pc)
{
    return pc->g->max_sessions;
}

uint32_t rtr_pconn_max_session_window(const rtr_pconn_t *pc)
{
    return pc->outgoing ? 0 : pc->g->max_session_window; /* qdrouterd: not on a connector's */
}

uint64_t rtr_pconn_max_message_size(const rtr_pconn_t *pc)
{
    return pc->max_message_size;
}

const char *rtr_pconn_vhost(const rtr_pconn_t *pc)
{
    return pc->vh->cfg.hostname;
}

bool rtr_pconn_user_id_proxy(const rtr_pconn_t *pc)
{
    return pc->g->allow_user_id_proxy;
}

bool rtr_pconn_is_user(const rtr_pconn_t *pc, const char *user_id, size_t len)
{
    return strlen(pc->user) == len && memcmp(pc->user, user_id, len) == 0;
}

bool rtr_pconn_admin_status_update(const rtr_pconn_t *pc)
{
    return pc->g->allow_admin_status_update;
}

bool rtr_policy_admin_status_allowed(rtr_policy_t *p, uint64_t conn_id)
{
    pthread_mutex_lock(&p->lock);
    rtr_pconn_t *pc = base_map_uget(&p->conns, conn_id);
    bool         ok = !pc || pc->g->allow_admin_status_update;
    pthread_mutex_unlock(&p->lock);
    return ok;
}

bool rtr_policy_dynamic_link_routes_allowed(rtr_policy_t *p, uint64_t conn_id)
{
    char line[512] = "";
    pthread_mutex_lock(&p->lock);
    rtr_pconn_t *pc = base_map_uget(&p->conns, conn_id);
    bool         ok = !pc || pc->g->allow_dynamic_link_routes;
    if (!ok) {
        /* a denial of the user's, like a link's (the record may go once the lock is
           released: the line is made under it) */
        puser_t *u = user_locked(pc->st, pc->user, true);
        if (u)
            u->denied++;
        snprintf(line, sizeof(line),
                 "[C%llu] DENY management CREATE of a connection-scoped link route for user "
                 "'%s', rhost '%s', vhost '%s': allowDynamicLinkRoutes is false",
                 (unsigned long long)conn_id, pc->user, pc->host, pc->vh->cfg.hostname);
    }
    pthread_mutex_unlock(&p->lock);
    if (!ok)
        PLOG(INFO, "%s", line);
    return ok;
}

bool rtr_pconn_dynamic_link_routes(const rtr_pconn_t *pc)
{
    return pc->g->allow_dynamic_link_routes;
}

void rtr_pconn_count_size_denied(rtr_pconn_t *pc)
{
    atomic_fetch_add(&pc->st->size_denied, 1);
}

/* ---------------------------------------------------------------- sessions and links */

/* A denial of this connection's user, counted for the user too (links are rare enough next to
 * messages that one short lock per denial is cheap; a flood of them is measured by
 * scripts/bench policy). */
static void count_user_denial(rtr_pconn_t *pc)
{
    pthread_mutex_lock(&pc->p->lock);
    puser_t *u = user_locked(pc->st, pc->user, true);
    if (u)
        u->denied++;
    pthread_mutex_unlock(&pc->p->lock);
}

bool rtr_pconn_session(rtr_pconn_t *pc, uint64_t conn_id, uint32_t n_sessions)
{
    uint32_t max = pc->g->max_sessions;
    if (!max || n_sessions < max)
        return true;
    atomic_fetch_add(&pc->st->session_denied, 1);
    count_user_denial(pc);
    PLOG(INFO,
         "[C%llu] DENY AMQP Begin Session due to session limit. user: %s, rhost: %s, "
         "vhost: %s",
         (unsigned long long)conn_id, pc->user, pc->host, pc->vh->cfg.hostname);
    return false;
}

static bool is_sep(char c)
{
    return c == '.' || c == '/';
}

/* qdrouterd's name rule (sources/targets): each item with the user put in; one ending in `*`
 * matches what starts with the rest. */
static bool name_ok(const char *user, const cfg_vnames_t *names, const char *s, size_t len)
{
    if (!len)
        return false;
    for (size_t i = 0; i < names->n; i++) {
        const cfg_vname_t *n = &names->items[i];
        char               rule[1024];
        int                rl;
        switch (n->kind) {
        case CFG_VNAME_WILDCARD:
            return true;
        case CFG_VNAME_PREFIX:
            rl = snprintf(rule, sizeof(rule), "%s%s", user, n->s2);
            break;
        case CFG_VNAME_SUFFIX:
            rl = snprintf(rule, sizeof(rule), "%s%s", n->s1, user);
            break;
        case CFG_VNAME_EMBED:
            rl = snprintf(rule, sizeof(rule), "%s%s%s", n->s1, user, n->s2);
            break;
        default:
            rl = snprintf(rule, sizeof(rule), "%s", n->s1);
            break;
        }
        if (rl <= 0 || (size_t)rl >= sizeof(rule))
            continue;
        if (rule[rl - 1] == '*') {
            if (len >= (size_t)rl - 1 && memcmp(s, rule, (size_t)rl - 1) == 0)
                return true;
        } else if ((size_t)rl == len && memcmp(s, rule, len) == 0) {
            return true;
        }
    }
    return false;
}

/* qdrouterd's pattern rule (sourcePattern/targetPattern): the user's name at the start or the
 * end of the address, as a whole token, stands for `${user}`; then the tree decides. */
static bool pattern_ok(const char *user, const cfg_vnames_t *names, const base_pattern_t *t,
                       const char *s, size_t len)
{
    size_t ul = strlen(user);
    char   buf[2048];
    if (!len || !t)
        return false;
    for (size_t i = 0; i < names->n; i++) {
        const cfg_vname_t *n = &names->items[i];
        int                bl;
        if (n->kind == CFG_VNAME_PREFIX) {
            if (len < ul || memcmp(s, user, ul) != 0 || (len > ul && !is_sep(s[ul])))
                continue;
            bl = snprintf(buf, sizeof(buf), "${user}%.*s", (int)(len - ul), s + ul);
        } else if (n->kind == CFG_VNAME_SUFFIX) {
            if (len <= ul || !is_sep(s[len - ul - 1]) || memcmp(s + len - ul, user, ul) != 0)
                continue;
            bl = snprintf(buf, sizeof(buf), "%.*s${user}", (int)(len - ul), s);
        } else {
            bl = snprintf(buf, sizeof(buf), "%.*s", (int)len, s);
        }
        if (bl > 0 && (size_t)bl < sizeof(buf) && base_pattern_match(t, buf, (size_t)bl))
            return true;
    }
    return false;
}

static bool address_ok(const rtr_pconn_t *pc, bool source, const char *s, size_t len)
{
    const cfg_vhost_group_t *g = pc->g;
    if (source && g->source_pattern.given)
        return pattern_ok(pc->user, &g->source_pattern, pc->vh->src_tree[pc->gi], s, len);
    if (!source && g->target_pattern.given)
        return pattern_ok(pc->user, &g->target_pattern, pc->vh->tgt_tree[pc->gi], s, len);
    return name_ok(pc->user, source ? &g->sources : &g->targets, s, len);
}

const char *rtr_pconn_link(rtr_pconn_t *pc, uint64_t conn_id, const rtr_plink_t *l)
{
    const cfg_vhost_group_t *g = pc->g;
    const char              *dir = l->client_sends ? "sender" : "receiver";
    const char              *addr = l->address && *l->address ? l->address : NULL;
    const char              *cond = RTR_POLICY_COND_UNAUTH;
    const char              *why;
    uint32_t                 max = l->client_sends ? g->max_senders : g->max_receivers;

    if (max && l->n_same >= max) {
        cond = RTR_POLICY_COND_LIMIT;
        why = l->client_sends ? "based on maxSenders limit" : "based on maxReceivers limit";
    } else if (!l->client_sends && l->dynamic) {
        if (g->allow_dynamic_source)
            return NULL;
        why = "dynamic source not permitted";
    } else if (!addr) {
        if (l->client_sends && g->allow_anonymous_sender)
            return NULL;
        why = l->client_sends ? "anonymous sender not permitted" : "no source address";
    } else if (l->waypoint && !g->allow_waypoint_links) {
        why = "Waypoint capability not permitted";
    } else if (l->fallback && !g->allow_fallback_links) {
        why = "Fallback capability not permitted";
    } else if (address_ok(pc, !l->client_sends, addr, strlen(addr))) {
        return NULL;
    } else {
        why = l->client_sends ? "based on link target name" : "based on link source name";
    }
    atomic_fetch_add(l->client_sends ? &pc->st->sender_denied : &pc->st->receiver_denied, 1);
    count_user_denial(pc);
    PLOG(INFO, "[C%llu] DENY AMQP Attach %s link '%s' for user '%s', rhost '%s', vhost '%s' %s",
         (unsigned long long)conn_id, dir, addr ? addr : "", pc->user, pc->host,
         pc->vh->cfg.hostname, why);
    return cond;
}

bool rtr_pconn_message_to(rtr_pconn_t *pc, uint64_t conn_id, const char *to, size_t len)
{
    if (address_ok(pc, false, to, len))
        return true;
    PLOG(INFO,
         "[C%llu] DENY AMQP message to '%.*s' for user '%s', rhost '%s', vhost '%s' based "
         "on target address",
         (unsigned long long)conn_id, (int)(len > 512 ? 512 : len), to, pc->user, pc->host,
         pc->vh->cfg.hostname);
    return false;
}

/* ---------------------------------------------------------------- management */

/* users: user -> connections open (qdrouterd's perUserState), denied: user -> denials
 * (Junction's perUserDenied), else host -> connections open. */
static char *count_map_json(const base_map_t *m, bool users, bool denied)
{
    cJSON           *o = cJSON_CreateObject();
    base_map_slot_t *slot;
    for (size_t i = 0; (i = base_map_next(m, i, &slot)) != 0;) {
        char key[512];
        snprintf(key, sizeof(key), "%.*s", (int)(slot->klen < 511 ? slot->klen : 511), slot->key);
        const puser_t *u = users ? slot->value : NULL;
        double n = u ? (double)(denied ? u->denied : u->current) : (double)(uintptr_t)slot->value;
        if (u && !n)
            continue;
        cJSON_AddNumberToObject(o, key, n);
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

size_t rtr_policy_stats(rtr_policy_t *p, rtr_pstats_row_t **rows)
{
    pthread_mutex_lock(&p->lock);
    size_t            n = 0;
    rtr_pstats_row_t *r = base_calloc(p->stats.count ? p->stats.count : 1, sizeof(*r));
    base_map_slot_t  *slot;
    for (size_t i = 0; (i = base_map_next(&p->stats, i, &slot)) != 0;) {
        pstats_t *st = slot->value;
        r[n++] = (rtr_pstats_row_t){
            .hostname = base_strdup(st->hostname),
            .approved = st->approved,
            .denied = st->denied,
            .current = st->current,
            .session_denied = atomic_load(&st->session_denied),
            .sender_denied = atomic_load(&st->sender_denied),
            .receiver_denied = atomic_load(&st->receiver_denied),
            .size_denied = atomic_load(&st->size_denied),
            .per_user = count_map_json(&st->users, true, false),
            .per_host = count_map_json(&st->hosts, false, false),
            .per_user_denied = count_map_json(&st->users, true, true),
        };
    }
    pthread_mutex_unlock(&p->lock);
    *rows = r;
    return n;
}

void rtr_policy_stats_free(rtr_pstats_row_t *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(rows[i].hostname);
        free(rows[i].per_user);
        free(rows[i].per_host);
        free(rows[i].per_user_denied);
    }
    free(rows);
}

size_t rtr_policy_vhosts(rtr_policy_t *p, cfg_vhost_t **out)
{
    pthread_mutex_lock(&p->lock);
    size_t           n = 0;
    cfg_vhost_t     *v = base_calloc(p->vhosts.count ? p->vhosts.count : 1, sizeof(*v));
    base_map_slot_t *slot;
    for (size_t i = 0; (i = base_map_next(&p->vhosts, i, &slot)) != 0;)
        cfg_vhost_copy(&v[n++], &((pvhost_t *)slot->value)->cfg);
    pthread_mutex_unlock(&p->lock);
    *out = v;
    return n;
}
