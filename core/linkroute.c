/* core/linkroute.c: the link-route table (see linkroute.h for qdrouterd's rules).
 *
 * Thread suffixes: none.  A table belongs to one thread (the core thread in the router);
 * core_lr_spec_check() and core_lr_answer_address() are pure.
 *
 * DESIGN: one pattern table per direction (core/base/pattern.h) whose value is a slot: the
 * routes that share one normalized pattern, in the order they were added.  Each route keeps
 * the ids of the connections that serve it; the table keeps the open route-container
 * connections (container id and name) so that a route added later finds the connections
 * that serve it at once.  An attach is one pattern lookup plus a walk of the slot's routes;
 * routes and route containers are few (configuration), so the walks are short.
 */
#include "core/linkroute.h"

#include "core/base/base.h"
#include "core/base/log.h"
#include "core/base/pattern.h"
#include "core/core_int.h"
#include "core/edge_lookup.h"
#include "core/linkroute_mesh.h"

#include <string.h>

#define LOG(lvl, ...) base_log(BASE_LOG_MOD_ROUTER_CORE, BASE_LOG_##lvl, __VA_ARGS__)

struct core_lr {
    uint64_t        identity; /* unique in the table, from 1 */
    char           *name;     /* heap copies of the spec's strings, or NULL */
    char           *prefix;
    char           *pattern;
    char           *connection;
    char           *container_id;
    char           *add_prefix;
    char           *del_prefix;
    char           *key;     /* the normalized pattern (its slot's key) */
    core_link_dir_t dir;     /* CORE_LINK_IN: client senders */
    uint64_t       *conns;   /* the connections that serve it (heap array) */
    int            *workers; /* the worker of each (heap array) */
    size_t          n_conns; /* their count */
    core_lr_t      *next;    /* the table's list, in the order routes were added */
    const void     *owner;   /* core_lr_spec_t.owner */
    uint32_t       *serving; /* core_lr_spec_t.serving */
};

/* The routes of one pattern and direction. */
typedef struct lr_slot {
    core_lr_t **routes; /* in the order they were added (heap array of borrowed routes) */
    size_t      n;      /* their count */
    size_t      turn;   /* linkBalanced: the next attach takes the turn-th serving connection */
} lr_slot_t;

/* An open route-container connection. */
typedef struct lr_conn {
    uint64_t        id;           /* connection id */
    int             worker;       /* its worker */
    char           *container_id; /* its peer's container id, or NULL (heap) */
    char           *name;         /* its listener's or connector's name, or NULL (heap) */
    struct lr_conn *next;
} lr_conn_t;

struct core_lr_table {
    base_pattern_t *by_dir[2];     /* CORE_LINK_IN, CORE_LINK_OUT: key -> lr_slot_t */
    core_lr_t      *head;          /* every route, oldest first */
    core_lr_t     **tail;          /* where the next route goes */
    size_t          n;             /* their count */
    uint64_t        next_identity; /* the next route's identity */
    lr_conn_t      *conns;         /* open route-container connections */
};

static char *dup_or_null(const char *s)
{
    return s ? base_strdup(s) : NULL;
}

static bool str_eq(const char *a, const char *b)
{
    return a && b && strcmp(a, b) == 0;
}

core_lr_table_t *core_lr_table_new(void)
{
    core_lr_table_t *t = base_calloc(1, sizeof(*t));
    t->by_dir[CORE_LINK_IN] = base_pattern_new();
    t->by_dir[CORE_LINK_OUT] = base_pattern_new();
    t->tail = &t->head;
    t->next_identity = 1;
    return t;
}

static void route_free(core_lr_t *lr)
{
    free(lr->name);
    free(lr->prefix);
    free(lr->pattern);
    free(lr->connection);
    free(lr->container_id);
    free(lr->add_prefix);
    free(lr->del_prefix);
    free(lr->key);
    free(lr->conns);
    free(lr->workers);
    free(lr);
}

void core_lr_table_free(core_lr_table_t *t)
{
    if (!t)
        return;
    for (core_lr_t *lr = t->head, *next; lr; lr = next) {
        next = lr->next;
        lr_slot_t *slot = base_pattern_remove(t->by_dir[lr->dir], lr->key);
        if (slot) {
            free(slot->routes);
            free(slot);
        }
        route_free(lr);
    }
    for (lr_conn_t *c = t->conns, *next; c; c = next) {
        next = c->next;
        free(c->container_id);
        free(c->name);
        free(c);
    }
    base_pattern_free(t->by_dir[CORE_LINK_IN]);
    base_pattern_free(t->by_dir[CORE_LINK_OUT]);
    free(t);
}

/* A prefix or pattern as qdrouterd's CREATE checks it: NULL when good. */
static const char *pattern_check(const char *text, bool is_prefix)
{
    if (!*text)
        return is_prefix ? "Prefix must be a non-empty string type"
                         : "Pattern must be a non-empty string type";
    char *norm = base_pattern_normalize(text, is_prefix);
    if (!norm)
        return is_prefix ? "Prefix invalid - no tokens" : "Pattern invalid - no tokens";
    free(norm);
    return NULL;
}

const char *core_lr_spec_check(const core_lr_spec_t *spec)
{
    /* qdrouterd's order of checks (agent_config_link_route.c). */
    if (spec->connection && spec->container_id)
        return "Both connection and containerId cannot be specified. Specify only one";
    if (!spec->direction)
        return "No 'direction' attribute provided - it is mandatory";
    if (!spec->prefix && !spec->pattern)
        return "Either a 'prefix' or 'pattern' attribute must be provided";
    if (spec->prefix && spec->pattern)
        return "Cannot specify both a 'prefix' and a 'pattern' attribute";
    const char *err = pattern_check(spec->prefix ? spec->prefix : spec->pattern, !!spec->prefix);
    if (err)
        return err;
    if (strcmp(spec->direction, "in") != 0 && strcmp(spec->direction, "out") != 0)
        return "Invalid value for 'direction'";
    if (spec->distribution && strcmp(spec->distribution, "linkBalanced") != 0)
        return "Invalid value for 'distribution'";
    return NULL;
}

/* Does connection c serve route lr?  A generated name (`listener/...`, `connector/...`) is
 * no name, as in qdrouterd. */
static bool conn_serves(const lr_conn_t *c, const core_lr_t *lr)
{
    if (lr->container_id && str_eq(lr->container_id, c->container_id))
        return true;
    return lr->connection && str_eq(lr->connection, c->name);
}

static void serving_set(core_lr_t *lr)
{
    if (lr->serving)
        __atomic_store_n(lr->serving, (uint32_t)lr->n_conns, __ATOMIC_RELAXED);
}

static void route_conn_add(core_lr_t *lr, uint64_t id, int worker)
{
    lr->conns = base_realloc(lr->conns, (lr->n_conns + 1) * sizeof(*lr->conns));
    lr->workers = base_realloc(lr->workers, (lr->n_conns + 1) * sizeof(*lr->workers));
    lr->workers[lr->n_conns] = worker;
    lr->conns[lr->n_conns++] = id;
    serving_set(lr);
}

static bool route_conn_del(core_lr_t *lr, uint64_t id)
{
    for (size_t i = 0; i < lr->n_conns; i++) {
        if (lr->conns[i] == id) {
            memmove(&lr->conns[i], &lr->conns[i + 1], (lr->n_conns - i - 1) * sizeof(*lr->conns));
            memmove(&lr->workers[i], &lr->workers[i + 1],
                    (lr->n_conns - i - 1) * sizeof(*lr->workers));
            lr->n_conns--;
            serving_set(lr);
            return true;
        }
    }
    return false;
}

static core_lr_t *find_by_name(const core_lr_table_t *t, const char *name)
{
    for (core_lr_t *lr = t->head; lr; lr = lr->next)
        if (str_eq(lr->name, name))
            return lr;
    return NULL;
}

uint64_t core_lr_add(core_lr_table_t *t, const core_lr_spec_t *spec, const char **err)
{
    if (spec->name && find_by_name(t, spec->name)) {
        *err = "Name conflicts with an existing entity";
        return 0;
    }
    *err = core_lr_spec_check(spec);
    if (*err)
        return 0;
    core_lr_t *lr = base_calloc(1, sizeof(*lr));
    lr->identity = t->next_identity++;
    lr->name = dup_or_null(spec->name);
    lr->prefix = dup_or_null(spec->prefix);
    lr->pattern = dup_or_null(spec->pattern);
    lr->connection = dup_or_null(spec->connection);
    lr->container_id = dup_or_null(spec->container_id);
    lr->add_prefix = dup_or_null(spec->add_prefix);
    lr->del_prefix = dup_or_null(spec->del_prefix);
    lr->dir = strcmp(spec->direction, "in") == 0 ? CORE_LINK_IN : CORE_LINK_OUT;
    lr->owner = spec->owner;
    lr->serving = spec->serving;
    lr->key = base_pattern_normalize(spec->prefix ? spec->prefix : spec->pattern, !!spec->prefix);
    BASE_BUG_ON(!lr->key); /* core_lr_spec_check() passed */

    lr_slot_t *slot = base_pattern_get(t->by_dir[lr->dir], lr->key);
    if (!slot) {
        slot = base_calloc(1, sizeof(*slot));
        BASE_BUG_ON(base_pattern_add(t->by_dir[lr->dir], lr->key, slot) != 0);
    }
    slot->routes = base_realloc(slot->routes, (slot->n + 1) * sizeof(*slot->routes));
    slot->routes[slot->n++] = lr;

    for (const lr_conn_t *c = t->conns; c; c = c->next)
        if (conn_serves(c, lr))
            route_conn_add(lr, c->id, c->worker);
    *t->tail = lr;
    t->tail = &lr->next;
    t->n++;
    return lr->identity;
}

static bool remove_at(core_lr_table_t *t, core_lr_t **pp);

bool core_lr_remove(core_lr_table_t *t, const char *name, uint64_t identity)
{
    core_lr_t **pp = &t->head;
    for (; *pp; pp = &(*pp)->next)
        if (name ? str_eq((*pp)->name, name) : (*pp)->identity == identity)
            break;
    return remove_at(t, pp);
}

bool core_lr_remove_owner(core_lr_table_t *t, const void *owner)
{
    core_lr_t **pp = &t->head;
    while (*pp && (*pp)->owner != owner)
        pp = &(*pp)->next;
    return owner && remove_at(t, pp);
}

static bool remove_at(core_lr_table_t *t, core_lr_t **pp)
{
    core_lr_t *lr = *pp;
    if (!lr)
        return false;
    *pp = lr->next;
    if (t->tail == &lr->next)
        t->tail = pp;
    t->n--;

    lr_slot_t *slot = base_pattern_get(t->by_dir[lr->dir], lr->key);
    BASE_BUG_ON(!slot);
    for (size_t i = 0; i < slot->n; i++) {
        if (slot->routes[i] == lr) {
            memmove(&slot->routes[i], &slot->routes[i + 1],
                    (slot->n - i - 1) * sizeof(*slot->routes));
            slot->n--;
            break;
        }
    }
    if (slot->n == 0) {
        base_pattern_remove(t->by_dir[lr->dir], lr->key);
        free(slot->routes);
        free(slot);
    }
    if (lr->serving)
        __atomic_store_n(lr->serving, 0, __ATOMIC_RELAXED);
    route_free(lr);
    return true;
}

size_t core_lr_conn_opened(core_lr_table_t *t, uint64_t conn_id, int worker, bool route_container,
                           const char *container_id, const char *conn_name)
{
    if (!route_container)
        return 0;
    lr_conn_t *c = base_calloc(1, sizeof(*c));
    c->id = conn_id;
    c->worker = worker;
    c->container_id = dup_or_null(container_id);
    if (conn_name && strncmp(conn_name, "listener/", 9) != 0 &&
        strncmp(conn_name, "connector/", 10) != 0)
        c->name = base_strdup(conn_name);
    c->next = t->conns;
    t->conns = c;
    size_t n = 0;
    for (core_lr_t *lr = t->head; lr; lr = lr->next) {
        if (conn_serves(c, lr)) {
            route_conn_add(lr, conn_id, worker);
            n++;
        }
    }
    return n;
}

size_t core_lr_conn_closed(core_lr_table_t *t, uint64_t conn_id)
{
    lr_conn_t **pp = &t->conns;
    while (*pp && (*pp)->id != conn_id)
        pp = &(*pp)->next;
    if (!*pp)
        return 0;
    lr_conn_t *c = *pp;
    *pp = c->next;
    free(c->container_id);
    free(c->name);
    free(c);
    size_t n = 0;
    for (core_lr_t *lr = t->head; lr; lr = lr->next)
        n += route_conn_del(lr, conn_id);
    return n;
}

void core_lr_target_fini(core_lr_target_t *target)
{
    BASE_FREE(target->address);
    BASE_FREE(target->strip);
    BASE_FREE(target->insert);
}

void core_lr_target_free(core_lr_target_t *target)
{
    if (!target)
        return;
    core_lr_target_fini(target);
    free(target);
}

bool core_lr_attach(core_lr_table_t *t, core_link_dir_t dir, const char *addr, size_t len,
                    core_lr_target_t *out)
{
    memset(out, 0, sizeof(*out));
    size_t      nlen;
    const char *norm = core_addr_normalize(addr, len, &nlen);
    lr_slot_t  *slot = base_pattern_match(t->by_dir[dir], norm, nlen);
    if (!slot)
        return false;

    /* linkBalanced: the slot's serving connections, in route order, take turns. */
    size_t total = 0;
    for (size_t i = 0; i < slot->n; i++)
        total += slot->routes[i]->n_conns;
    const core_lr_t *lr = slot->routes[0];
    if (total) {
        size_t k = slot->turn++ % total;
        for (size_t i = 0; i < slot->n; i++) {
            if (k < slot->routes[i]->n_conns) {
                lr = slot->routes[i];
                out->conn_id = lr->conns[k];
                out->worker = lr->workers[k];
                break;
            }
            k -= slot->routes[i]->n_conns;
        }
    }

    /* The rewrite (qdrouterd's forwarder.c): delExternalPrefix off, then addExternalPrefix
     * on; the answer undoes it. */
    const char *rest = addr;
    size_t      rest_len = len;
    if (lr->del_prefix) {
        size_t dl = strlen(lr->del_prefix);
        if (len > dl && memcmp(addr, lr->del_prefix, dl) == 0) {
            rest += dl;
            rest_len -= dl;
            out->insert = base_strdup(lr->del_prefix);
        }
    }
    size_t al = lr->add_prefix ? strlen(lr->add_prefix) : 0;
    out->address = base_malloc(al + rest_len + 1);
    if (al) {
        memcpy(out->address, lr->add_prefix, al);
        out->strip = base_strdup(lr->add_prefix);
    }
    memcpy(out->address + al, rest, rest_len);
    out->address[al + rest_len] = '\0';
    return true;
}

char *core_lr_answer_address(const core_lr_target_t *target, const char *addr)
{
    size_t len = strlen(addr);
    if (target->strip) {
        size_t sl = strlen(target->strip);
        if (len > sl && memcmp(addr, target->strip, sl) == 0) {
            addr += sl;
            len -= sl;
        }
    }
    size_t il = target->insert ? strlen(target->insert) : 0;
    char  *s = base_malloc(il + len + 1);
    if (il)
        memcpy(s, target->insert, il);
    memcpy(s + il, addr, len);
    s[il + len] = '\0';
    return s;
}

size_t core_lr_count(const core_lr_table_t *t)
{
    return t->n;
}

bool core_lr_info(const core_lr_table_t *t, size_t i, core_lr_info_t *out)
{
    const core_lr_t *lr = t->head;
    while (lr && i--)
        lr = lr->next;
    if (!lr)
        return false;
    *out = (core_lr_info_t){
        .identity = lr->identity,
        .name = lr->name,
        .prefix = lr->prefix,
        .pattern = lr->pattern,
        .dir = lr->dir,
        .connection = lr->connection,
        .container_id = lr->container_id,
        .add_prefix = lr->add_prefix,
        .del_prefix = lr->del_prefix,
        .active = lr->n_conns > 0,
    };
    return true;
}

/* ---- the core's hooks (core.c calls them on the core thread) ---- */

uint64_t core_lr_add_cfg(core_lr_table_t *t, const cfg_link_route_t *c, const char **err)
{
    core_lr_spec_t spec = {
        .name = c->name,
        .prefix = c->prefix,
        .pattern = c->pattern,
        .direction = c->direction,
        .connection = c->connection,
        .container_id = c->container_id,
        .add_prefix = c->add_prefix,
        .del_prefix = c->del_prefix,
        .owner = c,
        .serving = (uint32_t *)&c->serving, /* the one run-time field of the config */
    };
    return core_lr_add(t, &spec, err);
}

core_lr_table_t *core_lr_table_load(const cfg_t *cfg)
{
    core_lr_table_t *t = core_lr_table_new();
    for (size_t i = 0; i < cfg->n_link_routes; i++) {
        const char *err = NULL;
        /* the load checked each entity as CREATE does (core_lr_spec_check()) */
        if (!core_lr_add_cfg(t, &cfg->link_routes[i], &err))
            LOG(ERROR, "Error configuring linkRoute: %s", err);
    }
    return t;
}

core_lr_table_t *core_lr_table_CT(core_t *core)
{
    return core->lr;
}

bool core_lr_route_attach_CT(core_t *core, const core_action_t *a, core_work_t *w)
{
    const char *address = a->u.attach.address;
    if (!address || !*address || a->u.attach.dynamic || a->u.attach.conn_id == 0)
        return false;
    if (BASE_UNLIKELY(core->elk != NULL) && core_elk_routed_CT(core, a, w))
        return true; /* an edge: its interior's answer (core/edge_lookup.c) */
    core_lr_target_t *tg = base_calloc(1, sizeof(*tg));
    bool matched =
        core_lr_attach(core->lr, (core_link_dir_t)a->u.attach.dir, address, strlen(address), tg);
    if ((!matched || tg->conn_id == 0) && core->ir) {
        /* interior mode: another router may have the route's container */
        core_lr_target_fini(tg);
        if (core_lrm_route_CT(core, a, tg)) {
            w->u.attached.routed = tg;
            return true;
        }
    }
    if (!matched) {
        free(tg);
        return false;
    }
    if (tg->conn_id == 0) {
        /* qdrouterd's words for a link route no route container serves */
        w->u.attached.cond_name = "qd:no-route-to-dest";
        w->u.attached.cond_desc = base_strdup("No route to the destination node");
        LOG(INFO, "[C%llu][L%llu] Link route attach failed: no route to %s",
            (unsigned long long)a->u.attach.conn_id, (unsigned long long)a->link_id, address);
        core_lr_target_free(tg);
        return true;
    }
    LOG(DEBUG, "[C%llu][L%llu] Link routed to connection %llu as %s",
        (unsigned long long)a->u.attach.conn_id, (unsigned long long)a->link_id,
        (unsigned long long)tg->conn_id, tg->address);
    w->u.attached.routed = tg;
    return true;
}

void core_lr_conn_action_CT(core_t *core, core_action_t *a)
{
    if (a->type == CORE_A_CONN_OPENED) {
        size_t n =
            core_lr_conn_opened(core->lr, a->u.conn.conn_id, a->worker, a->u.conn.route_container,
                                a->u.conn.container_id, a->u.conn.name);
        if (n)
            LOG(INFO, "[C%llu] Link routes activated: %zu (container %s)",
                (unsigned long long)a->u.conn.conn_id, n,
                a->u.conn.container_id ? a->u.conn.container_id : "");
        /* the strings stay: autoLinks keep them (core_autolink_action_CT, called next) */
    } else {
        size_t n = core_lr_conn_closed(core->lr, a->u.conn.conn_id);
        if (n)
            LOG(INFO, "[C%llu] Link routes deactivated: %zu", (unsigned long long)a->u.conn.conn_id,
                n);
    }
}
