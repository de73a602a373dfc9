/* core/autolink.c: autoLinks - links the router itself attaches to a route container (a
 * broker) while a connection to it is open, as qdrouterd's route_control.c does: an `out`
 * autoLink takes what producers send to its address (phase 0 of a waypoint address) to the
 * broker's queue, an `in` autoLink brings the queue's messages back into the router (phase
 * 1), where consumers receive them.
 *
 * Thread suffixes: _CT = core thread.  core_autolink_rows() is thread-safe (the agent thread
 * takes a copy); init/fini run on the main thread.
 *
 * DESIGN: the core keeps the autoLinks and the open route-container connections
 * (CORE_A_CONN_OPENED / CORE_A_CONN_CLOSED, posted by the connection's worker).  A connection
 * matches an autoLink when its container id is the autoLink's `containerId` or the entity it
 * came through (listener, next connector) is its `connection`; matching takes a newly opened
 * connection and nothing else, so a connector's outgoing connection plugs in by posting the
 * same CORE_A_CONN_OPENED with the connector's name.  An activation asks the worker to attach
 * the link (CORE_W_AUTOLINK); the worker reports what the peer answered (CORE_A_AUTOLINK:
 * ACTIVE, followed by the link's own CORE_A_LINK_ATTACH, or FAILED with the peer's error).
 * A failed autoLink is attached again 2 s later, then every 5 s, while its connection is
 * open (qdrouterd's intervals); a closed connection makes it inactive until a matching one
 * opens.  Each activation has a generation: a report about an older one is ignored.
 *
 * The list is guarded by `lock`: the core thread walks and changes it under the lock, the
 * agent thread copies the rows and adds or removes autoLinks (management CREATE, DELETE)
 * under it; what follows an addition or a removal (attaching, detaching) runs on the core
 * thread through core_call().
 */
#include "core/core_int.h"

#include "core/base/log.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define LOG(lvl, ...) base_log(BASE_LOG_MOD_ROUTER_CORE, BASE_LOG_##lvl, __VA_ARGS__)

/* qdrouterd's retry intervals after a failure: the first, then every next one (ms). */
#define AL_FIRST_RETRY_MS 2000
#define AL_RETRY_MS       5000

typedef struct core_al {
    cfg_autolink_t  cfg;        /* a copy of its configuration */
    uint32_t        id;         /* 1, 2, ... in creation order */
    uint32_t        gen;        /* activations so far */
    uint8_t         state;      /* core_autolink_state_t */
    char           *last_error; /* heap, or NULL */
    uint64_t        conn_id;    /* the connection it is attached on (not INACTIVE), or 0 */
    int             worker;     /* that connection's worker */
    uint64_t        link_id;    /* its link while ACTIVE, or 0 */
    uint64_t        retry_ms;   /* FAILED: when to attach again (core clock), or 0 */
    unsigned        retries;    /* failures since it was last active */
    struct core_al *next;
} core_al_t;

typedef struct core_al_conn {
    uint64_t             id;        /* the connection */
    int                  worker;    /* its worker */
    char                *container; /* the peer's container id, or NULL */
    char                *name;      /* its listener's (connector's) name, or NULL */
    struct core_al_conn *next;
} core_al_conn_t;

struct core_autolinks {
    pthread_mutex_t lock; /* the list's shape and the states (rows copy them) */
    core_al_t      *head; /* in creation order */
    core_al_t      *tail;
    size_t          n;       /* their count */
    uint32_t        next_id; /* the last id given */
    core_al_conn_t *conns;   /* _CT: open route-container connections */
};

static char *dup_or_null(const char *s)
{
    return s ? base_strdup(s) : NULL;
}

static void cfg_copy(cfg_autolink_t *dst, const cfg_autolink_t *src)
{
    *dst = *src;
    dst->name = dup_or_null(src->name);
    dst->address = dup_or_null(src->address);
    dst->container_id = dup_or_null(src->container_id);
    dst->connection = dup_or_null(src->connection);
    dst->external_address = dup_or_null(src->external_address);
}

static void al_add(struct core_autolinks *t, const cfg_autolink_t *cfg)
{
    core_al_t *al = base_calloc(1, sizeof(*al));
    cfg_copy(&al->cfg, cfg);
    al->id = ++t->next_id;
    if (t->tail)
        t->tail->next = al;
    else
        t->head = al;
    t->tail = al;
    t->n++;
}

void core_autolink_init(core_t *core)
{
    struct core_autolinks *t = base_calloc(1, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
    for (size_t i = 0; i < core->cfg->n_autolinks; i++)
        al_add(t, &core->cfg->autolinks[i]);
    core->autolinks = t;
}

void core_autolink_fini(core_t *core)
{
    struct core_autolinks *t = core->autolinks;
    if (!t)
        return;
    core_al_t *al = t->head;
    while (al) {
        core_al_t *next = al->next;
        cfg_autolink_fini(&al->cfg);
        free(al->last_error);
        free(al);
        al = next;
    }
    core_al_conn_t *c = t->conns;
    while (c) {
        core_al_conn_t *next = c->next;
        free(c->container);
        free(c->name);
        free(c);
        c = next;
    }
    pthread_mutex_destroy(&t->lock);
    free(t);
    core->autolinks = NULL;
}

/* The autoLink's label in logs: its name, else its address. */
static const char *al_label(const core_al_t *al)
{
    return al->cfg.name ? al->cfg.name : al->cfg.address;
}

static bool al_matches(const core_al_t *al, const core_al_conn_t *c)
{
    if (al->cfg.connection && c->name && strcmp(al->cfg.connection, c->name) == 0)
        return true;
    return al->cfg.container_id && c->container && strcmp(al->cfg.container_id, c->container) == 0;
}

/* Ask connection c's worker to attach al's link.  Caller holds the lock. */
static void al_activate_CT(core_t *core, core_al_t *al, const core_al_conn_t *c)
{
    al->gen++;
    al->conn_id = c->id;
    al->worker = c->worker;
    al->link_id = 0;
    al->retry_ms = 0;
    al->state = CORE_AUTOLINK_ATTACHING;
    core_work_t *w = base_mpsc_batch_add(&core->out[c->worker], sizeof(core_work_t));
    w->type = CORE_W_AUTOLINK;
    w->handle = NULL;
    w->u.autolink.conn_id = c->id;
    w->u.autolink.id = al->id;
    w->u.autolink.gen = al->gen;
    w->u.autolink.dir = al->cfg.dir == CFG_AUTOLINK_OUT ? CORE_LINK_OUT : CORE_LINK_IN;
    w->u.autolink.address = base_strdup(al->cfg.address);
    w->u.autolink.peer =
        base_strdup(al->cfg.external_address ? al->cfg.external_address : al->cfg.address);
    w->u.autolink.detach = false;
    LOG(INFO, "[C%llu] Auto Link Activated '%s' (%s %s, phase %d)", (unsigned long long)c->id,
        al_label(al), al->cfg.dir == CFG_AUTOLINK_OUT ? "out" : "in", al->cfg.address,
        al->cfg.phase);
}

/* Make al inactive (its connection went).  Caller holds the lock. */
static void al_deactivate_CT(core_al_t *al)
{
    LOG(INFO, "[C%llu] Auto Link Deactivated '%s'", (unsigned long long)al->conn_id, al_label(al));
    al->state = CORE_AUTOLINK_INACTIVE;
    al->conn_id = 0;
    al->link_id = 0;
    al->retry_ms = 0;
    al->retries = 0;
}

static core_al_conn_t *conn_find_CT(struct core_autolinks *t, uint64_t id)
{
    for (core_al_conn_t *c = t->conns; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

/* Attach every inactive autoLink that connection c (or, c NULL, any open one) matches. */
static void activate_inactive_CT(core_t *core, const core_al_conn_t *only)
{
    struct core_autolinks *t = core->autolinks;
    for (core_al_t *al = t->head; al; al = al->next) {
        if (al->conn_id)
            continue;
        for (const core_al_conn_t *c = only ? only : t->conns; c; c = only ? NULL : c->next) {
            if (al_matches(al, c)) {
                al_activate_CT(core, al, c);
                break;
            }
        }
    }
}

static void conn_opened_CT(core_t *core, core_action_t *a)
{
    struct core_autolinks *t = core->autolinks;
    core_al_conn_t        *c = base_calloc(1, sizeof(*c));
    c->id = a->u.conn.conn_id;
    c->worker = a->worker;
    c->container = a->u.conn.container_id;
    c->name = a->u.conn.name;
    c->next = t->conns;
    t->conns = c;
    pthread_mutex_lock(&t->lock);
    activate_inactive_CT(core, c);
    pthread_mutex_unlock(&t->lock);
}

static void conn_closed_CT(core_t *core, core_action_t *a)
{
    struct core_autolinks *t = core->autolinks;
    core_al_conn_t       **pp = &t->conns;
    while (*pp && (*pp)->id != a->u.conn.conn_id)
        pp = &(*pp)->next;
    core_al_conn_t *c = *pp;
    if (!c)
        return;
    *pp = c->next;
    free(c->container);
    free(c->name);
    free(c);
    pthread_mutex_lock(&t->lock);
    for (core_al_t *al = t->head; al; al = al->next)
        if (al->conn_id == a->u.conn.conn_id)
            al_deactivate_CT(al);
    activate_inactive_CT(core, NULL); /* another connection may serve them */
    pthread_mutex_unlock(&t->lock);
}

static void report_CT(core_t *core, core_action_t *a)
{
    struct core_autolinks *t = core->autolinks;
    char                  *err = a->u.autolink.error;
    pthread_mutex_lock(&t->lock);
    core_al_t *al = t->head;
    while (al && al->id != a->u.autolink.id)
        al = al->next;
    if (!al || al->gen != a->u.autolink.gen || !al->conn_id) {
        pthread_mutex_unlock(&t->lock);
        free(err); /* an older activation's, or a deleted autoLink's */
        return;
    }
    if (a->u.autolink.state == CORE_AUTOLINK_ACTIVE) {
        al->state = CORE_AUTOLINK_ACTIVE;
        al->link_id = a->link_id;
        al->retries = 0;
        free(err);
        LOG(INFO, "[C%llu][L%llu] Auto Link '%s' attached", (unsigned long long)al->conn_id,
            (unsigned long long)al->link_id, al_label(al));
    } else {
        al->state = CORE_AUTOLINK_FAILED;
        al->link_id = 0;
        free(al->last_error);
        al->last_error = err;
        al->retry_ms = core->now_ms + (al->retries++ ? AL_RETRY_MS : AL_FIRST_RETRY_MS);
        LOG(INFO, "[C%llu] Auto Link Activation Failed. '%s': %s", (unsigned long long)al->conn_id,
            al_label(al), err ? err : "detached");
    }
    pthread_mutex_unlock(&t->lock);
}

void core_autolink_action_CT(core_t *core, core_action_t *a)
{
    switch ((core_action_type_t)a->type) {
    case CORE_A_CONN_OPENED:
        conn_opened_CT(core, a);
        break;
    case CORE_A_CONN_CLOSED:
        conn_closed_CT(core, a);
        break;
    case CORE_A_AUTOLINK:
        report_CT(core, a);
        break;
    default:
        break;
    }
}

int core_autolink_phase_CT(core_t *core, uint64_t link_id)
{
    struct core_autolinks *t = core->autolinks;
    int                    phase = -1;
    pthread_mutex_lock(&t->lock);
    for (core_al_t *al = t->head; al && phase < 0; al = al->next)
        if (al->link_id == link_id)
            phase = al->cfg.fallback && al->cfg.dir == CFG_AUTOLINK_OUT ? CORE_PHASE_FALLBACK
                                                                         : al->cfg.phase;
    pthread_mutex_unlock(&t->lock);
    return phase;
}

bool core_autolink_fallback_CT(core_t *core, uint64_t link_id)
{
    struct core_autolinks *t = core->autolinks;
    bool                   fallback = false;
    pthread_mutex_lock(&t->lock);
    for (core_al_t *al = t->head; al; al = al->next)
        if (al->link_id == link_id) {
            fallback = al->cfg.fallback;
            break;
        }
    pthread_mutex_unlock(&t->lock);
    return fallback;
}

void core_autolink_link_gone_CT(core_t *core, uint64_t link_id)
{
    struct core_autolinks *t = core->autolinks;
    pthread_mutex_lock(&t->lock);
    for (core_al_t *al = t->head; al; al = al->next)
        if (al->link_id == link_id)
            al->link_id = 0; /* its state comes with the worker's report */
    pthread_mutex_unlock(&t->lock);
}

/* A created autoLink: attach it when an open connection matches it. */
static void added_CT(core_t *core, void *arg)
{
    struct core_autolinks *t = core->autolinks;
    uint32_t               id = (uint32_t)(uintptr_t)arg;
    pthread_mutex_lock(&t->lock);
    core_al_t *al = t->head;
    while (al && al->id != id)
        al = al->next;
    for (const core_al_conn_t *c = t->conns; al && !al->conn_id && c; c = c->next)
        if (al_matches(al, c))
            al_activate_CT(core, al, c);
    pthread_mutex_unlock(&t->lock);
}

/* A deleted autoLink (off the list already): detach its link, free it. */
static void deleted_CT(core_t *core, void *arg)
{
    core_al_t *al = arg;
    if (al->conn_id) {
        core_work_t *w = base_mpsc_batch_add(&core->out[al->worker], sizeof(core_work_t));
        w->type = CORE_W_AUTOLINK;
        w->handle = NULL;
        w->u.autolink.conn_id = al->conn_id;
        w->u.autolink.id = al->id;
        w->u.autolink.gen = al->gen;
        w->u.autolink.dir = al->cfg.dir == CFG_AUTOLINK_OUT ? CORE_LINK_OUT : CORE_LINK_IN;
        w->u.autolink.address = NULL;
        w->u.autolink.peer = NULL;
        w->u.autolink.detach = true;
    }
    LOG(INFO, "Auto Link '%s' deleted", al_label(al));
    cfg_autolink_fini(&al->cfg);
    free(al->last_error);
    free(al);
}

uint32_t core_autolink_add(core_t *core, const cfg_autolink_t *cfg)
{
    struct core_autolinks *t = core->autolinks;
    pthread_mutex_lock(&t->lock);
    al_add(t, cfg);
    uint32_t id = t->tail->id;
    pthread_mutex_unlock(&t->lock);
    (void)core_call(core, added_CT, (void *)(uintptr_t)id);
    return id;
}

int core_autolink_del(core_t *core, uint32_t id)
{
    struct core_autolinks *t = core->autolinks;
    pthread_mutex_lock(&t->lock);
    core_al_t **pp = &t->head, *prev = NULL;
    while (*pp && (*pp)->id != id) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    core_al_t *al = *pp;
    if (al) {
        *pp = al->next;
        if (t->tail == al)
            t->tail = prev;
        t->n--;
    }
    pthread_mutex_unlock(&t->lock);
    if (!al)
        return -ENOENT;
    if (core_call(core, deleted_CT, al) != 0) {
        cfg_autolink_fini(&al->cfg);
        free(al->last_error);
        free(al);
    }
    return 0;
}

void core_autolink_tick_CT(core_t *core)
{
    struct core_autolinks *t = core->autolinks;
    pthread_mutex_lock(&t->lock);
    for (core_al_t *al = t->head; al; al = al->next) {
        if (al->state != CORE_AUTOLINK_FAILED || !al->retry_ms || core->now_ms < al->retry_ms)
            continue;
        core_al_conn_t *c = conn_find_CT(t, al->conn_id);
        if (c)
            al_activate_CT(core, al, c);
    }
    pthread_mutex_unlock(&t->lock);
}

void core_autolink_action_discard(core_action_t *a)
{
    if (a->type == CORE_A_CONN_OPENED) {
        free(a->u.conn.container_id);
        free(a->u.conn.name);
    } else if (a->type == CORE_A_AUTOLINK) {
        free(a->u.autolink.error);
    }
}

core_autolink_row_t *core_autolink_rows(core_t *core, size_t *n)
{
    struct core_autolinks *t = core->autolinks;
    core_autolink_row_t   *rows = NULL;
    size_t                 k = 0;
    pthread_mutex_lock(&t->lock);
    if (t->n)
        rows = base_calloc(t->n, sizeof(*rows));
    for (core_al_t *al = t->head; al; al = al->next, k++) {
        cfg_copy(&rows[k].cfg, &al->cfg);
        rows[k].id = al->id;
        rows[k].state = al->state;
        rows[k].last_error = dup_or_null(al->last_error);
        rows[k].link_id = al->state == CORE_AUTOLINK_ACTIVE ? al->link_id : 0;
    }
    pthread_mutex_unlock(&t->lock);
    *n = k;
    return rows;
}

void core_autolink_rows_free(core_autolink_row_t *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        cfg_autolink_fini(&rows[i].cfg);
        free(rows[i].last_error);
    }
    free(rows);
}
