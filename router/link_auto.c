/* router/link_auto.c: links the router attaches itself - autoLinks (core/autolink.c) - on a
 * route container's connection, and what the connection tells the core about them.
 *
 * Thread suffixes: _WT = the connection's worker only (every function in this file).
 *
 * DESIGN: the core decides (which autoLink, on which connection, when to retry); the worker
 * makes the Proton link (CORE_W_AUTOLINK) in a session of its own (a broker may end a whole
 * session over one link, docs/brokers.md R3: one refused autoLink must take no other down;
 * with no session left on the connection the autoLink is reported failed, and the core
 * retries), opens it, and waits for the peer's attach.  An
 * attach with the node named (source of an incoming link, target of an outgoing one) makes
 * the autoLink active: the worker reports it (CORE_A_AUTOLINK) and announces the link to the
 * core like any link (CORE_A_LINK_ATTACH), from which on it is an ordinary link of link_in.c
 * or link_out.c.  A peer that refuses answers with no node and detaches; a detach (with its
 * error, if any) reports the autoLink failed, as does a detach the router makes for what the
 * peer did on the link (link_in.c: a transfer without credit).  A route container's
 * connection is announced to the core when it opens (CORE_A_CONN_OPENED, with its listener's
 * name; a connector's outgoing connection is announced the same way, with the connector's
 * name) and when it is freed (CORE_A_CONN_CLOSED).
 *
 * Layer: beside conn.c, which calls it from Proton's events and the core's work.
 */
#include "router/link_auto.h"

#include "core/base/list.h"
#include "router/peer_quirks.h"

#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/link.h>
#include <proton/session.h>
#include <proton/terminus.h>
#include <proton/transport.h>
#include <stdio.h>
#include <string.h>

/* The context of the sessions the router opens for its autoLinks, one per link: its address
 * tags them (rtr_autolink_link_freed_WT). */
static const char session_tag = 0;

void rtr_autolink_conn_announce_WT(rtr_conn_t *c, const char *name)
{
    if (c->route_announced)
        return;
    const char    *container = pn_connection_remote_container(c->driver.connection);
    core_action_t *a = rtr_worker_action_WT(c->worker);
    a->type = CORE_A_CONN_OPENED;
    a->link_id = 0;
    a->u.conn.conn_id = c->id;
    a->u.conn.container_id = container && *container ? base_strdup(container) : NULL;
    a->u.conn.name = name ? base_strdup(name) : NULL;
    a->u.conn.route_container = true;
    c->route_announced = true;
}

void rtr_autolink_conn_freed_WT(rtr_conn_t *c)
{
    if (!c->route_announced)
        return;
    core_action_t *a = rtr_worker_action_WT(c->worker);
    a->type = CORE_A_CONN_CLOSED;
    a->link_id = 0;
    a->u.conn.conn_id = c->id;
    a->u.conn.container_id = NULL;
    a->u.conn.name = NULL;
    a->u.conn.route_container = true;
    c->route_announced = false;
}

static rtr_conn_t *conn_find_WT(rtr_worker_t *w, uint64_t id)
{
    for (rtr_conn_t *c = w->conns; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

void rtr_autolink_watch_WT(void *arg, const rtr_conn_info_t *ci, bool open)
{
    rtr_ctx_t *ctx = arg;
    /* as qdrouterd: only route containers' connections get autoLinks */
    if (!open || ci->role != CFG_ROLE_ROUTE_CONTAINER || ci->worker >= ctx->n_workers)
        return;
    rtr_conn_t *c = conn_find_WT(&ctx->workers[ci->worker], ci->id);
    if (c) /* a connector's conn cfg carries the connector's name */
        rtr_autolink_conn_announce_WT(c, c->listener->name);
}

/* A session of the autoLink's own on c.  A broker may end the whole session over one link
 * (RabbitMQ does on a refused attach, docs/brokers.md R3): a session per autoLink keeps
 * the others up.  NULL when the connection has no session left (the channel-max both ends
 * allow, the connector's maxSessions included, all in use), with *why saying so. */
uint32_t rtr_conn_sessions_left_WT(rtr_conn_t *c, uint32_t *limit)
{
    pn_connection_t *pc = c->driver.connection;
    pn_transport_t  *t = c->driver.transport;
    /* channel-max is the highest channel number: a count of channel-max + 1 sessions */
    uint32_t lim = (uint32_t)pn_transport_get_channel_max(t) + 1;
    if ((pn_connection_state(pc) & PN_REMOTE_ACTIVE) &&
        (uint32_t)pn_transport_remote_channel_max(t) + 1 < lim)
        lim = (uint32_t)pn_transport_remote_channel_max(t) + 1;
    uint32_t used = 0;
    for (pn_session_t *s = pn_session_head(pc, 0); s; s = pn_session_next(s, 0))
        if (!(pn_session_state(s) & PN_LOCAL_UNINIT))
            used++; /* open, or ended and not yet freed: its channel may still be taken */
    if (limit)
        *limit = lim;
    return used < lim ? lim - used : 0;
}

static pn_session_t *own_session_WT(rtr_conn_t *c, char **why)
{
    pn_connection_t *pc = c->driver.connection;
    uint32_t         limit;
    /* Proton would find no channel only when it writes the begin, and end the connection */
    pn_session_t *s = rtr_conn_sessions_left_WT(c, &limit) ? pn_session(pc) : NULL;
    if (!s) {
        char msg[200];
        snprintf(msg, sizeof(msg),
                 "No session left on the connection for the autoLink: all %u in use "
                 "(channel-max, the connector's maxSessions included)",
                 limit);
        *why = base_strdup(msg);
        return NULL;
    }
    /* the window a client's session gets: at most the connection's input budget */
    size_t cap = RTR_CONN_IN_MAX;
    if (c->listener->max_session_frames &&
        (uint64_t)c->listener->max_session_frames * c->listener->max_frame_size < cap)
        cap = (size_t)c->listener->max_session_frames * c->listener->max_frame_size;
    if (cap < c->listener->max_frame_size)
        cap = c->listener->max_frame_size;
    pn_session_set_incoming_capacity(s, cap);
    pn_session_set_context(s, (void *)&session_tag);
    pn_session_open(s);
    return s;
}

void rtr_autolink_link_freed_WT(pn_session_t *s)
{
    if (pn_session_get_context(s) == &session_tag && !(pn_session_state(s) & PN_LOCAL_CLOSED))
        pn_session_close(s); /* freed when the peer's end comes, or with the connection */
}

static void report_WT(rtr_worker_t *w, uint32_t id, uint32_t gen, uint64_t link_id,
                      core_autolink_state_t state, char *error)
{
    core_action_t *a = rtr_worker_action_WT(w);
    a->type = CORE_A_AUTOLINK;
    a->link_id = link_id;
    a->u.autolink.id = id;
    a->u.autolink.gen = gen;
    a->u.autolink.state = (uint8_t)state;
    a->u.autolink.error = error;
}

/* A deleted autoLink: its link of that activation, if any, is detached (the peer sees a
 * plain detach; deliveries in flight on it come back as on any detach). */
static void detach_WT(rtr_conn_t *c, uint32_t id, uint32_t gen)
{
    for (rtr_link_t *k = c->links; k; k = k->next) {
        if (k->al_id == id && k->al_gen == gen && k->pn) {
            LOGL(k, INFO, "Auto link detached: its autoLink was deleted");
            pn_link_close(k->pn);
            rtr_link_cleanup_WT(k); /* may free k: stop here */
            rtr_conn_mark_dirty_WT(c);
            return;
        }
    }
}

void rtr_autolink_attach_WT(rtr_worker_t *w, core_work_t *work)
{
    char       *address = work->u.autolink.address;
    char       *peer = work->u.autolink.peer;
    rtr_conn_t *c = conn_find_WT(w, work->u.autolink.conn_id);
    if (work->u.autolink.detach) {
        if (c && !c->closing)
            detach_WT(c, work->u.autolink.id, work->u.autolink.gen);
        return;
    }
    pn_session_t *ssn = NULL;
    char         *why = NULL;
    /* a connection that is gone or ending: the core hears of its end and forgets it */
    if (!c || c->closing || w->stopping ||
        (pn_connection_state(c->driver.connection) & PN_LOCAL_CLOSED) ||
        !(ssn = own_session_WT(c, &why))) {
        if (why) { /* no session left: failed, and the core retries */
            LOGC(c, INFO, "Auto link %u not attached: %s", work->u.autolink.id, why);
            report_WT(w, work->u.autolink.id, work->u.autolink.gen, 0, CORE_AUTOLINK_FAILED, why);
        }
        free(address);
        free(peer);
        return;
    }
    bool out = work->u.autolink.dir == CORE_LINK_OUT;
    char name[96];
    snprintf(name, sizeof(name), "%s.autoLink.%u.%u", w->ctx->router_id, work->u.autolink.id,
             work->u.autolink.gen);
    pn_link_t *pl = out ? pn_sender(ssn, name) : pn_receiver(ssn, name);
    pn_terminus_set_address(pn_link_source(pl), out ? address : peer);
    pn_terminus_set_address(pn_link_target(pl), out ? peer : address);
    pn_link_set_snd_settle_mode(pl, PN_SND_UNSETTLED);
    pn_link_set_rcv_settle_mode(pl, PN_RCV_FIRST);

    rtr_link_t *k = rtr_link_new_WT(c, pl, out);
    k->zero_since = uv_now(&w->loop) | 1;
    k->al_id = work->u.autolink.id;
    k->al_gen = work->u.autolink.gen;
    k->quirks = rtr_peer_quirks_WT(c->driver.connection); /* once per link (peer_quirks.h) */
    pn_link_open(pl);
    LOGL(k, INFO, "Auto link attaching: %s %s (%s at the peer)",
         out ? "outgoing from" : "incoming to", address, peer);
    free(address);
    free(peer);
    rtr_conn_mark_dirty_WT(c);
}

void rtr_autolink_remote_open_WT(rtr_link_t *k)
{
    if (k->at_core || !k->pn)
        return;
    pn_link_t *pl = k->pn;
    /* the peer names the node it attached to; a refusal names none (and detaches) */
    const char *node =
        pn_terminus_get_address(k->out ? pn_link_remote_target(pl) : pn_link_remote_source(pl));
    if (!node)
        return;
    rtr_conn_t    *c = k->conn;
    rtr_worker_t  *w = c->worker;
    pn_terminus_t *own = k->out ? pn_link_source(pl) : pn_link_target(pl);
    const char    *address = pn_terminus_get_address(own);
    report_WT(w, k->al_id, k->al_gen, k->id, CORE_AUTOLINK_ACTIVE, NULL);
    core_action_t *a = rtr_worker_action_WT(w);
    a->type = CORE_A_LINK_ATTACH;
    a->link_id = k->id;
    a->u.attach.conn_id = c->id;
    a->u.attach.handle = k;
    a->u.attach.address = base_strdup(address ? address : "");
    a->u.attach.capacity = c->listener->link_capacity;
    a->u.attach.dir = k->out ? CORE_LINK_OUT : CORE_LINK_IN;
    a->u.attach.dynamic = false;
    a->u.attach.name = pn_link_name(pl) ? base_strdup(pn_link_name(pl)) : NULL;
    k->at_core = true;
    LOGL(k, INFO, "Auto link attached: %s %s", k->out ? "outgoing from" : "incoming to",
         address ? address : "");
}

void rtr_autolink_session_end_WT(rtr_conn_t *c, pn_session_t *s)
{
    if (c->worker->stopping)
        return;
    pn_condition_t *cond = pn_session_remote_condition(s);
    const char     *cn = pn_condition_get_name(cond), *cd = pn_condition_get_description(cond);
    for (rtr_link_t *k = c->links; k; k = k->next) {
        if (!k->al_id || !k->pn || pn_link_session(k->pn) != s)
            continue;
        char *err = cd && *cd   ? base_strdup(cd)
                    : cn && *cn ? base_strdup(cn)
                                : base_strdup("session ended by the peer");
        LOGL(k, INFO, "Auto link's session ended by the peer%s%s%s%s", cn || cd ? ": " : "",
             cn ? cn : "", cn && cd ? " " : "", cd ? cd : "");
        report_WT(c->worker, k->al_id, k->al_gen, 0, CORE_AUTOLINK_FAILED, err);
    }
}

void rtr_autolink_remote_close_WT(rtr_link_t *k)
{
    rtr_conn_t *c = k->conn;
    if (!k->pn || c->worker->stopping)
        return;
    pn_condition_t *cond = pn_link_remote_condition(k->pn);
    const char     *cn = pn_condition_get_name(cond), *cd = pn_condition_get_description(cond);
    /* lastError is the error's description, as qdrouterd's (its name when it has none) */
    char *err = cd && *cd ? base_strdup(cd) : cn && *cn ? base_strdup(cn) : NULL;
    LOGL(k, INFO, "Auto link detached by the peer%s%s%s%s", cn || cd ? ": " : "", cn ? cn : "",
         cn && cd ? " " : "", cd ? cd : "");
    report_WT(c->worker, k->al_id, k->al_gen, 0, CORE_AUTOLINK_FAILED, err);
}

void rtr_autolink_closed_WT(rtr_link_t *k, const char *cond, const char *desc)
{
    if (!k->al_id || !k->pn || k->conn->worker->stopping)
        return;
    /* left unreported, the autoLink would stay "active" with no link, never attached again */
    report_WT(k->conn->worker, k->al_id, k->al_gen, 0, CORE_AUTOLINK_FAILED,
              base_strdup(desc && *desc ? desc : cond));
}
