/* core/edge_lookup.c: link routes through an edge router, the core's side (see
 * edge_lookup.h for qdrouterd 1.19's rules).
 *
 * Thread suffixes: _CT = core thread (every function here but core_elk_free: core_free(),
 * after the core thread ended).
 *
 * DESIGN: on an edge, a client's attach that is asked about waits here as its action (a
 * copy, with its strings), keyed by a request number; CORE_W_EDGE LOOKUP_ASK goes to the
 * active edge connection's worker (router/edge_lookup.c), which sends the request, matches
 * the reply, and gives up after 3 s: CORE_A_EDGE LOOKUP_REPLY brings the verdict back.
 * The attach is then run as it would have been at once (core__link_attach_CT()), with the
 * verdict in hand while it runs: core_lr_route_attach_CT() asks core_elk_routed_CT() first,
 * and a routed verdict is a link route to the edge connection (router/linkroute.c carries
 * every frame).  The waiting attaches are few (clients attaching while a request is on its
 * way), so they are a plain list.
 * On an interior, a request is a CORE_A_EDGE LOOKUP: one lookup in the link-route table
 * and in the mesh's patterns, answered with CORE_W_EDGE LOOKUP_ANSWER to the same worker.
 */
#include "core/edge_lookup.h"

#include "core/base/log.h"
#include "core/core_int.h"
#include "core/linkroute.h"
#include "core/linkroute_mesh.h"

#include <string.h>

#define LOG(lvl, ...) base_log(BASE_LOG_MOD_ROUTER_CORE, BASE_LOG_##lvl, __VA_ARGS__)

/* An attach waiting for the interior's answer. */
typedef struct elk_wait {
    uint64_t         req;     /* the request's number */
    uint64_t         conn_id; /* the edge connection asked */
    core_action_t    a;       /* the client's attach (its strings are ours) */
    struct elk_wait *next;
} elk_wait_t;

struct core_elk {
    elk_wait_t *waiting;  /* attaches waiting for an answer, newest first */
    uint64_t    next_req; /* the next request's number (from 1) */
    uint64_t    run_link; /* the link whose attach runs with a verdict now (0: none) */
    uint8_t     verdict;  /* its core_edge_verdict_t */
    uint64_t    run_conn; /* ROUTED: the edge connection that answered */
    int         run_w;    /* its worker */
};

static struct core_elk *elk_CT(core_t *core)
{
    if (!core->elk)
        core->elk = base_calloc(1, sizeof(*core->elk));
    return core->elk;
}

void core_elk_free(core_t *core)
{
    struct core_elk *k = core->elk;
    if (!k)
        return;
    while (k->waiting) {
        elk_wait_t *x = k->waiting;
        k->waiting = x->next;
        free(x->a.u.attach.address);
        free(x->a.u.attach.name);
        free(x);
    }
    BASE_FREE(core->elk);
}

bool core_elk_attach_CT(core_t *core, core_action_t *a)
{
    const char *address = a->u.attach.address;
    uint64_t    conn_id;
    int         worker;
    if (!address || !*address || a->u.attach.dynamic || a->u.attach.conn_id == 0 ||
        a->u.attach.edge != CORE_EDGE_LINK_NONE || a->u.attach.ir_link ||
        !core_edge_active_CT(core, &conn_id, &worker))
        return false;
    size_t len = strlen(address);
    /* a node of the router itself, or an autoLink's link (the router's own, never a
     * client's: qdrouterd's core makes those without a lookup) */
    if (core__node_reserved_CT(core, address, len) || core_autolink_phase_CT(core, a->link_id) >= 0)
        return false;
    /* a local link route that a connection here serves: the edge routes it itself */
    core_lr_target_t tg = {0};
    bool matched = core_lr_attach(core->lr, (core_link_dir_t)a->u.attach.dir, address, len, &tg);
    bool local = matched && tg.conn_id != 0;
    core_lr_target_fini(&tg);
    if (local)
        return false;
    struct core_elk *k = elk_CT(core);
    elk_wait_t      *x = base_malloc(sizeof(*x));
    x->req = ++k->next_req;
    x->conn_id = conn_id;
    x->a = *a;
    x->next = k->waiting;
    k->waiting = x;
    core_work_t *w = core__work_add_CT(core, worker, CORE_W_EDGE, NULL);
    w->u.edge.conn_id = conn_id;
    w->u.edge.op = CORE_EDGE_LOOKUP_ASK;
    w->u.edge.dir = a->u.attach.dir;
    w->u.edge.key = base_strdup(address);
    w->u.edge.req = x->req;
    LOG(DEBUG, "[C%llu][L%llu] Address lookup of %s asked of the interior (request %llu)",
        (unsigned long long)a->u.attach.conn_id, (unsigned long long)a->link_id, address,
        (unsigned long long)x->req);
    return true;
}

/* Take the waiting attach that matches (req when link_id is 0, else link_id) off the list. */
static elk_wait_t *take_CT(struct core_elk *k, uint64_t req, uint64_t link_id)
{
    for (elk_wait_t **pp = &k->waiting; *pp; pp = &(*pp)->next) {
        elk_wait_t *x = *pp;
        if (link_id ? x->a.link_id == link_id : x->req == req) {
            *pp = x->next;
            return x;
        }
    }
    return NULL;
}

/* Run x's attach with the verdict, then forget x. */
static void resume_CT(core_t *core, elk_wait_t *x, core_edge_verdict_t verdict, uint64_t conn,
                      int worker)
{
    struct core_elk *k = core->elk;
    k->run_link = x->a.link_id;
    k->verdict = (uint8_t)verdict;
    k->run_conn = conn;
    k->run_w = worker;
    core__link_attach_CT(core, &x->a); /* takes the action's strings */
    k->run_link = 0;
    free(x);
}

void core_elk_detach_CT(core_t *core, uint64_t link_id)
{
    elk_wait_t *x = core->elk ? take_CT(core->elk, 0, link_id) : NULL;
    if (x)
        resume_CT(core, x, CORE_EDGE_VERDICT_NO_ROUTE, 0, 0);
}

void core_elk_reply_CT(core_t *core, const core_action_t *a)
{
    elk_wait_t *x = core->elk ? take_CT(core->elk, a->u.edge.req, 0) : NULL;
    if (!x)
        return; /* answered already (its connection went, or it was detached) */
    uint64_t conn_id;
    int      worker = 0;
    uint8_t  v = a->u.edge.verdict;
    /* a routed answer is only good while its connection is the active one */
    if (v == CORE_EDGE_VERDICT_ROUTED &&
        (!core_edge_active_CT(core, &conn_id, &worker) || conn_id != a->u.edge.conn_id))
        v = CORE_EDGE_VERDICT_LOCAL;
    if (v > CORE_EDGE_VERDICT_ROUTED)
        v = CORE_EDGE_VERDICT_LOCAL;
    LOG(DEBUG, "[C%llu][L%llu] Address lookup of %s answered: %s",
        (unsigned long long)x->a.u.attach.conn_id, (unsigned long long)x->a.link_id,
        x->a.u.attach.address,
        v == CORE_EDGE_VERDICT_ROUTED     ? "link route, routed to the interior"
        : v == CORE_EDGE_VERDICT_NO_ROUTE ? "link route without destination"
                                          : "not a link route (or no answer)");
    resume_CT(core, x, (core_edge_verdict_t)v, a->u.edge.conn_id, worker);
}

void core_elk_conn_closed_CT(core_t *core, uint64_t conn_id)
{
    struct core_elk *k = core->elk;
    if (!k)
        return;
    /* oldest first, as they came */
    elk_wait_t *mine = NULL;
    for (elk_wait_t **pp = &k->waiting; *pp;) {
        elk_wait_t *x = *pp;
        if (x->conn_id != conn_id) {
            pp = &x->next;
            continue;
        }
        *pp = x->next;
        x->next = mine;
        mine = x;
    }
    while (mine) {
        elk_wait_t *x = mine;
        mine = x->next;
        resume_CT(core, x, CORE_EDGE_VERDICT_LOCAL, 0, 0);
    }
}

bool core_elk_routed_CT(core_t *core, const core_action_t *a, core_work_t *w)
{
    struct core_elk *k = core->elk;
    if (!k || !k->run_link || k->run_link != a->link_id)
        return false;
    if (k->verdict == CORE_EDGE_VERDICT_NO_ROUTE) {
        /* qdrouterd's words for a link route no destination serves */
        w->u.attached.cond_name = "qd:no-route-to-dest";
        w->u.attached.cond_desc = base_strdup("No route to the destination node");
        LOG(INFO, "[C%llu][L%llu] Link route attach failed: no route to %s",
            (unsigned long long)a->u.attach.conn_id, (unsigned long long)a->link_id,
            a->u.attach.address ? a->u.attach.address : "");
        return true;
    }
    if (k->verdict != CORE_EDGE_VERDICT_ROUTED)
        return false;
    core_lr_target_t *tg = base_calloc(1, sizeof(*tg));
    tg->conn_id = k->run_conn;
    tg->worker = k->run_w;
    tg->address = base_strdup(a->u.attach.address);
    LOG(DEBUG, "[C%llu][L%llu] Link routed to the interior on edge connection %llu as %s",
        (unsigned long long)a->u.attach.conn_id, (unsigned long long)a->link_id,
        (unsigned long long)tg->conn_id, tg->address);
    w->u.attached.routed = tg;
    return true;
}

void core_elk_serve_CT(core_t *core, core_action_t *a)
{
    const char *address = a->u.edge.key;
    bool        lr = false, dest = false;
    if (address && a->u.edge.dir <= CORE_LINK_OUT) {
        core_lr_target_t tg = {0};
        lr =
            core_lr_attach(core->lr, (core_link_dir_t)a->u.edge.dir, address, strlen(address), &tg);
        dest = lr && tg.conn_id != 0;
        core_lr_target_fini(&tg);
        if (!dest && core->ir) {
            /* a pattern another router of the mesh advertises (never back toward the edge) */
            core_action_t q = {.type = CORE_A_LINK_ATTACH, .worker = a->worker};
            q.u.attach.conn_id = a->u.edge.conn_id;
            q.u.attach.address = (char *)address;
            q.u.attach.dir = a->u.edge.dir;
            core_lr_target_t mt = {0};
            if (core_lrm_route_CT(core, &q, &mt)) {
                lr = dest = true;
                core_lr_target_fini(&mt);
            }
        }
    }
    core_work_t *w = core__work_add_CT(core, a->worker, CORE_W_EDGE, NULL);
    w->u.edge.conn_id = a->u.edge.conn_id;
    w->u.edge.op = CORE_EDGE_LOOKUP_ANSWER;
    w->u.edge.key = NULL;
    w->u.edge.req = a->u.edge.req;
    w->u.edge.flag = lr;
    w->u.edge.dest = dest;
    LOG(DEBUG, "[C%llu] Address lookup from an edge: %s %s", (unsigned long long)a->u.edge.conn_id,
        address ? address : "",
        !lr    ? "is not a link route"
        : dest ? "is link-routed"
               : "is a link route without destination");
    BASE_FREE(a->u.edge.key);
}
