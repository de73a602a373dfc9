/* router/conn.c: an AMQP connection on a worker, the top of its layers (router/DESIGN.md "A
 * connection's layers") - its start and end, Proton's events (connection, sessions, link
 * attaches and detaches) dispatched to the link layers, and the core's work for it.
 *
 * Thread suffixes: _WT = the connection's worker only (every function in this file).
 *
 * DESIGN: a connection is driven by "process" (rtr_conn_process_WT(), which the transport's
 * socket and timer callbacks call): run every Proton event on what the socket read, push
 * pending outgoing copies into Proton (link_out.c: credit, session window and the output
 * budget permitting), reconcile the incoming links' credit (link_in.c), then write what
 * Proton produced and arm reading and the timer (transport.c).  Incoming messages are
 * handed to the core (CORE_A_DELIVER, link_in.c); outgoing copies arrive from the core
 * (CORE_W_SEND, link_out.c).
 *
 * Lifetimes: a link announced to the core lives until CORE_W_LINK_DETACHED; Proton objects
 * are never referenced after link cleanup (contexts cleared, pointers NULLed); a connection
 * is freed after its uv handles closed and its last link is gone.
 */
#include "router/conn.h"

#include "router/accept.h"
#include "router/link_auto.h"
#include "router/linkroute.h"
#include "router/conn_watch.h"
#include "router/conn_props.h"
#include "router/connector.h"
#include "router/edgeconn.h"
#include "router/irconn.h"
#include "router/lstats.h"
#include "router/policy.h"
#include "router/policy_conn.h"
#include "router/termcaps.h"

#include "core/base/list.h"
#include "core/core_metrics.h"
#include "core/linkroute.h"

#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/event.h>
#include <proton/link.h>
#include <proton/sasl.h>
#include <proton/session.h>
#include <proton/terminus.h>
#include <proton/transport.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "junction_version.h"

/* Attaches refused on one connection (maxSenders/maxReceivers) before it is closed. */
#define RTR_REFUSED_LINKS_MAX 1000u

/* ---------------------------------------------------------------- links */

/* maxSenders / maxReceivers: refuse an attach beyond the connection's cap (attach and
 * detach at once with amqp:resource-limit-exceeded, as qdrouterd's policy does).  Returns
 * true when the link may attach. */
static bool link_admit_WT(rtr_conn_t *c, pn_link_t *pl)
{
    bool client_sends = pn_link_is_receiver(pl);
    uint32_t n = client_sends ? c->n_in_links : c->n_out_links;
    uint32_t max = client_sends ? c->listener->max_senders : c->listener->max_receivers;
    /* vhost policy first (router/policy_conn.c): its denials are logged there */
    const char *cond = rtr_policy_link_WT(c, pl);
    if (cond) {
        rtr_pn_link_close_error_WT(pl, cond, RTR_POLICY_DESC_LINK);
        stats_counter_add(c->worker->shard, c->worker->ctx->policy_stats[RTR_POLICY_LINK_DENIED],
                          1);
    } else if (n < max) {
        return true;
    } else {
        char desc[96];
        snprintf(desc, sizeof(desc), "at most %u %s on one connection (%s)", max,
                 client_sends ? "senders" : "receivers",
                 client_sends ? "maxSenders" : "maxReceivers");
        rtr_pn_link_close_error_WT(pl, "amqp:resource-limit-exceeded", desc);
        stats_counter_add(c->worker->shard, c->worker->ctx->policy_stats[RTR_POLICY_LINK_DENIED],
                          1);
        LOGC(c, NOTICE, "Link refused: amqp:resource-limit-exceeded %s", desc);
    }
    /* Proton keeps a refused link until the client detaches it: a client that goes on
     * attaching regardless loses its connection instead of growing the router's memory */
    if (++c->n_refused > RTR_REFUSED_LINKS_MAX) {
        rtr_pn_conn_close_error_WT(c->driver.connection, "amqp:resource-limit-exceeded",
                                   "too many links refused on this connection");
        LOGC(c, NOTICE, "Connection from %s closed: amqp:resource-limit-exceeded more than %u "
                        "links refused", c->peer, RTR_REFUSED_LINKS_MAX);
    }
    return false;
}

static void link_attach_WT(rtr_conn_t *c, pn_link_t *pl)
{
    rtr_worker_t *w = c->worker;
    rtr_link_t   *k = rtr_link_new_WT(c, pl, pn_link_is_sender(pl));
    k->zero_since = uv_now(&w->loop) | 1; /* as qdrouterd: no credit yet since the attach */

    pn_terminus_copy(pn_link_source(pl), pn_link_remote_source(pl));
    pn_terminus_copy(pn_link_target(pl), pn_link_remote_target(pl));
    pn_link_set_snd_settle_mode(pl, pn_link_remote_snd_settle_mode(pl));
    pn_link_set_rcv_settle_mode(pl, pn_link_remote_rcv_settle_mode(pl));

    pn_terminus_t *term = k->out ? pn_link_remote_source(pl) : pn_link_remote_target(pl);
    const char *addr = pn_terminus_get_address(term);
    bool dynamic = k->out && pn_terminus_is_dynamic(term);

    core_action_t *a = rtr_worker_action_WT(w);
    a->type = CORE_A_LINK_ATTACH;
    a->link_id = k->id;
    a->u.attach.conn_id = c->id;
    a->u.attach.handle = k;
    a->u.attach.address = (addr && *addr && !dynamic) ? base_strdup(addr) : NULL;
    a->u.attach.capacity = c->listener->link_capacity;
    a->u.attach.dir = k->out ? CORE_LINK_OUT : CORE_LINK_IN;
    a->u.attach.dynamic = dynamic;
    a->u.attach.name = pn_link_name(pl) ? base_strdup(pn_link_name(pl)) : NULL;
    a->u.attach.edge = c->edge ? CORE_EDGE_LINK_PEER : CORE_EDGE_LINK_NONE;
    a->u.attach.waypoint = rtr_termcaps_read(term, &a->u.attach.fallback);
    k->at_core = true;
    LOGL(k, INFO, "Link attaching: %s %s%s", k->out ? "outgoing from" : "incoming to",
         dynamic ? "(dynamic)" : (addr && *addr ? addr : "(anonymous)"),
         pn_link_remote_snd_settle_mode(pl) == PN_SND_SETTLED ? " presettled" : "");
}

static void on_link_attached_WT(rtr_link_t *k, core_work_t *work)
{
    char *addr = work->u.attached.address;
    char *desc = work->u.attached.cond_desc;
    k->stats = work->u.attached.stats;
    if (work->u.attached.routed) {
        /* link-routed: the route container answers the attach (router/linkroute.c) */
        if (k->pn)
            rtr_lr_start_WT(k, work->u.attached.routed);
        else
            core_lr_target_free(work->u.attached.routed);
    } else if (k->pn) {
        if (addr)
            pn_terminus_set_address(pn_link_source(k->pn), addr);
        pn_link_open(k->pn);
        k->open = true;
        if (work->u.attached.cond_name) {
            rtr_pn_link_close_error_WT(k->pn, work->u.attached.cond_name, desc);
            LOGL(k, INFO, "Link refused: %s %s", work->u.attached.cond_name, desc ? desc : "");
        } else if (k->out) {
            rtr_link_schedule_pump_WT(k);
        }
        rtr_conn_mark_dirty_WT(k->conn);
    }
    free(addr);
    free(desc);
}

/* ---------------------------------------------------------------- core work */

void rtr_conn_work_WT(rtr_worker_t *w, core_work_t *work)
{
    rtr_link_t *k = work->handle;
    switch ((core_work_type_t)work->type) {
    case CORE_W_LINK_ATTACHED:
        on_link_attached_WT(k, work);
        break;
    case CORE_W_LINK_CREDIT:
        rtr_on_link_credit_WT(k, work->u.credit.grant);
        break;
    case CORE_W_LINK_DETACHED:
        k->at_core = false;
        if (!k->pn)
            rtr_link_unlink_WT(k);
        break;
    case CORE_W_SEND:
        rtr_on_send_WT(w, k, work);
        break;
    case CORE_W_SETTLE:
        rtr_on_settle_WT(w, work);
        break;
    case CORE_W_RELEASE:
        rtr_on_release_WT(w, work);
        break;
    case CORE_W_EXTERNAL: /* the worker's own: worker.c handles it */
        break;
    case CORE_W_AUTOLINK:
        rtr_autolink_attach_WT(w, work);
        break;
    case CORE_W_RT_SEND:
        rtr_ir_send_WT(w, work);
        break;
    case CORE_W_EDGE:
        rtr_edge_work_WT(w, work);
        break;
    }
}

void rtr_conn_close_id_WT(rtr_worker_t *w, uint64_t id)
{
    for (rtr_conn_t *c = w->conns; c; c = c->next) {
        if (c->id == id) {
            LOGC(c, INFO, "Connection closed by management (adminStatus deleted)");
            rtr_pn_conn_set_error_WT(c->driver.connection, "amqp:connection:forced",
                                     "Connection closed by management");
            rtr_conn_close_WT(c);
            return;
        }
    }
}

/* Run after the whole inbox: process every connection that inbox work touched. */
void rtr_conn_process_dirty_WT(rtr_worker_t *w)
{
    while (w->dirty) {
        rtr_conn_t *c = w->dirty;
        w->dirty = c->dirty_next;
        c->dirty = false;
        c->dirty_next = NULL;
        rtr_conn_process_WT(c);
    }
}

/* ---------------------------------------------------------------- Proton events */

static void conn_init_WT(rtr_conn_t *c)
{
    pn_connection_t *pc = c->driver.connection;
    pn_connection_set_container(pc, c->worker->ctx->router_id);
    pn_data_t *caps = pn_connection_offered_capabilities(pc);
    pn_data_put_array(caps, false, PN_SYMBOL);
    pn_data_enter(caps);
    pn_data_put_symbol(caps, pn_bytes(strlen("ANONYMOUS-RELAY"), "ANONYMOUS-RELAY"));
    pn_data_exit(caps);
    pn_data_t *props = pn_connection_properties(pc);
    pn_data_put_map(props);
    pn_data_enter(props);
    pn_data_put_symbol(props, pn_bytes(7, "product"));
    pn_data_put_string(props, pn_bytes(8, "junction"));
    pn_data_put_symbol(props, pn_bytes(7, "version"));
    pn_data_put_string(props, pn_bytes(strlen(JUNCTION_VERSION), JUNCTION_VERSION));
    if (c->connector) /* its openProperties, after the router's own (qdrouterd's order) */
        rtr_conn_props_put(props, rtr_connector_cfg(c->connector)->open_properties);
    pn_data_exit(props);
    if (c->listener->role == CFG_ROLE_INTER_ROUTER)
        rtr_ir_init_WT(c); /* interior mode (router/irconn.c) */
    else if (c->listener->role == CFG_ROLE_EDGE &&
             (c->connector ? c->worker->ctx->cfg->router.edge
                           : c->worker->ctx->cfg->router.interior))
        rtr_edge_init_WT(c); /* an edge's uplink, or an edge on an interior (edgeconn.c) */
    if (c->connector)
        pn_connection_open(pc); /* the router's outgoing connection speaks first */
}

/* policy maxConnections: count the connection, or refuse it (open, then close at once with
 * amqp:resource-limit-exceeded, as qdrouterd's policy does).  Returns true when admitted. */
static bool conn_admit_WT(rtr_conn_t *c)
{
    rtr_ctx_t *ctx = c->worker->ctx;
    uint32_t max = ctx->cfg->policy.max_connections;
    uint32_t n = atomic_fetch_add(&ctx->n_open_conns, 1);
    stats_counter_add(c->worker->shard, ctx->policy_stats[RTR_POLICY_PROCESSED], 1);
    if (max == 0 || n < max) {
        c->counted = true;
        return true;
    }
    atomic_fetch_sub(&ctx->n_open_conns, 1);
    stats_counter_add(c->worker->shard, ctx->policy_stats[RTR_POLICY_CONN_DENIED], 1);
    char desc[96];
    snprintf(desc, sizeof(desc), "at most %u connections (policy maxConnections)", max);
    rtr_pn_conn_close_error_WT(c->driver.connection, "amqp:resource-limit-exceeded", desc);
    LOGC(c, NOTICE, "Connection from %s refused: amqp:resource-limit-exceeded %s", c->peer,
         desc);
    return false;
}

/* A session's incoming window in bytes (what Proton may buffer for the router before the
 * client must wait): maxSessionFrames frames of maxFrameSize when configured, else
 * RTR_CONN_IN_MAX; never more than RTR_CONN_IN_MAX (one session alone stays within the
 * connection's input budget) nor less than one frame (Proton's precondition). */
static size_t conn_session_capacity(const cfg_listener_t *l)
{
    uint64_t cap = l->max_session_frames ? (uint64_t)l->max_session_frames * l->max_frame_size
                                         : RTR_CONN_IN_MAX;
    if (cap > RTR_CONN_IN_MAX)
        cap = RTR_CONN_IN_MAX;
    if (cap < l->max_frame_size)
        cap = l->max_frame_size;
    return (size_t)cap;
}

static void links_cleanup_session_WT(rtr_conn_t *c, pn_session_t *s)
{
    rtr_link_t *k = c->links;
    while (k) {
        rtr_link_t *next = k->next; /* cleanup may free k */
        if (k->pn && (!s || pn_link_session(k->pn) == s))
            rtr_link_cleanup_WT(k);
        k = next;
    }
}

/* A string or symbol's bytes, or {0, NULL}. */
static pn_bytes_t data_text(pn_data_t *d)
{
    if (pn_data_type(d) == PN_STRING)
        return pn_data_get_string(d);
    if (pn_data_type(d) == PN_SYMBOL)
        return pn_data_get_symbol(d);
    return pn_bytes(0, NULL);
}

/* A connector's peer announced qdrouterd's failover-server-list in its open (a list of maps
 * with network-host and port): its addresses go to the connector (qdrouterd's
 * router_node.c).  A peer whose open has no such property changes nothing; entries without a
 * host are skipped, a missing port is 5672. */
static void connector_failover_WT(rtr_conn_t *c, pn_connection_t *pc)
{
    static const char key[] = "failover-server-list";
    pn_data_t        *d = pn_connection_remote_properties(pc);
    pn_data_rewind(d);
    if (!pn_data_next(d) || pn_data_type(d) != PN_MAP)
        return;
    size_t n = pn_data_get_map(d);
    pn_data_enter(d);
    for (size_t i = 0; i + 1 < n; i += 2) {
        pn_data_next(d);
        pn_bytes_t k = data_text(d);
        pn_data_next(d);
        if (k.size != sizeof(key) - 1 || memcmp(k.start, key, k.size) != 0 ||
            pn_data_type(d) != PN_LIST)
            continue;
        rtr_connector_addr_t list[RTR_CONNECTOR_FAILOVER_MAX];
        size_t               got = 0, items = pn_data_get_list(d);
        pn_data_enter(d);
        for (size_t j = 0; j < items && pn_data_next(d); j++) {
            if (pn_data_type(d) != PN_MAP || got == RTR_CONNECTOR_FAILOVER_MAX)
                continue;
            rtr_connector_addr_t a = {.host = "", .port = "5672"};
            size_t               m = pn_data_get_map(d);
            pn_data_enter(d);
            for (size_t f = 0; f + 1 < m; f += 2) {
                pn_data_next(d);
                pn_bytes_t fk = data_text(d);
                pn_data_next(d);
                pn_bytes_t fv = data_text(d);
                char       num[16];
                if (!fv.start && (pn_data_type(d) == PN_INT || pn_data_type(d) == PN_UINT ||
                                  pn_data_type(d) == PN_USHORT)) {
                    long long v = pn_data_type(d) == PN_INT    ? (long long)pn_data_get_int(d)
                                  : pn_data_type(d) == PN_UINT ? (long long)pn_data_get_uint(d)
                                                               : (long long)pn_data_get_ushort(d);
                    snprintf(num, sizeof(num), "%lld", v);
                    fv = pn_bytes(strlen(num), num);
                }
                if (!fv.start)
                    continue;
                if (fk.size == 12 && memcmp(fk.start, "network-host", 12) == 0 &&
                    fv.size < sizeof(a.host))
                    snprintf(a.host, sizeof(a.host), "%.*s", (int)fv.size, fv.start);
                else if (fk.size == 4 && memcmp(fk.start, "port", 4) == 0 &&
                         fv.size < sizeof(a.port))
                    snprintf(a.port, sizeof(a.port), "%.*s", (int)fv.size, fv.start);
            }
            pn_data_exit(d);
            if (a.host[0])
                list[got++] = a;
        }
        pn_data_exit(d);
        rtr_connector_failover_set(c->connector, list, got);
        LOGC(c, DEBUG, "Failover list of connector %s: %zu address(es) from the peer",
             c->listener->name ? c->listener->name : "", got);
        break;
    }
    pn_data_exit(d);
}

static void dispatch_WT(rtr_conn_t *c, pn_event_t *e)
{
    if (pn_event_type(e) == PN_DELIVERY) /* zero-copy input: number it first */
        rtr_zin_delivery_event_WT(c, pn_event_delivery(e));
    else if (pn_event_type(e) == PN_LINK_FINAL)
        rtr_zin_link_final_WT(c, pn_event_link(e));
    if (c->ir && rtr_ir_event_WT(c, e))
        return; /* an inter-router link's (router/irconn.c) */
    if (c->edge && rtr_edge_event_WT(c, e))
        return; /* an edge connection's own link (router/edgeconn.c) */
    switch (pn_event_type(e)) {
    case PN_CONNECTION_INIT:
        conn_init_WT(c);
        break;
    case PN_CONNECTION_REMOTE_OPEN: {
        pn_connection_t *pc = pn_event_connection(e);
        c->handshake_due = 0; /* the handshake is done */
        if (pn_connection_state(pc) & PN_LOCAL_UNINIT)
            pn_connection_open(pc);
        if (!c->connector && !c->counted && !conn_admit_WT(c))
            break;
        /* vhost policy (router/policy_conn.c), after maxConnections as in qdrouterd: it sets
           the open's frame size and channels (Proton writes the open after this event), or
           refuses it (its condition set: the close right after the open, as qdrouterd) */
        if (!rtr_policy_conn_open_WT(c, pc)) {
            pn_connection_close(pc);
            break;
        }
        if (stats_obj_is_none(c->stats)) {
            char id[24];
            snprintf(id, sizeof(id), "%llu", (unsigned long long)c->id);
            const char *container = pn_connection_remote_container(pc);
            /* the SASL layer is done by the open: who the client is, and how it said so
               (none for a client that skipped SASL); the TLS session, if any */
            pn_sasl_t  *sasl = pn_sasl(c->driver.transport);
            const char *user = pn_sasl_get_user(sasl), *mech = pn_sasl_get_mech(sasl);
            if (!user || !*user)
                user = "anonymous"; /* qdrouterd's name for a client without SASL */
            char tls[160];
            rtr_transport_tls_label_WT(c, tls, sizeof(tls));
            /* role: normal or route-container, the only ones a listener or connector takes */
            const char *labels[] = {id, c->peer, container ? container : "",
                                    c->connector ? "out" : "in",
                                    user ? user : "", mech ? mech : "", tls,
                                    cfg_role_name(c->listener->role)};
            const core_stats_t *cs = c->worker->ctx->stats;
            core_stats_object_new(cs, cs->connection, labels, &c->stats);
            stats_obj_set(c->worker->shard, c->stats, CORE_CONN_OPENED_AT, (int64_t)time(NULL));
        }
        if (c->ir)
            rtr_ir_opened_WT(c);
        if (c->edge)
            rtr_edge_opened_WT(c);
        if (c->connector || c->listener->role == CFG_ROLE_ROUTE_CONTAINER) {
            /* a connection to a container: autoLinks and link routes find it there */
            const char     *rc = pn_connection_remote_container(pc);
            rtr_conn_info_t ci = {.id = c->id, .worker = c->worker->index,
                                  .role = c->listener->role};
            snprintf(ci.connector, sizeof(ci.connector), "%s",
                     c->connector && c->listener->name ? c->listener->name : "");
            snprintf(ci.container, sizeof(ci.container), "%s", rc ? rc : "");
            rtr_conn_watch_opened_WT(c->worker->ctx->conn_watch, &ci);
        }
        if (c->connector) {
            c->peer_opened = true;
            connector_failover_WT(c, pc);
            if (!rtr_connector_opened(c->connector, c->id, pn_connection_remote_container(pc))) {
                /* management deleted the connector while this connection was being made */
                rtr_pn_conn_close_error_WT(pc, "amqp:connection:forced", "connector deleted");
                LOGC(c, INFO, "Connection to %s closed: its connector was deleted", c->peer);
                break;
            }
            LOGC(c, INFO, "Connection to %s opened (connector %s, container %s)", c->peer,
                 c->listener->name ? c->listener->name : "",
                 pn_connection_remote_container(pc) ? pn_connection_remote_container(pc) : "");
            break;
        }
        LOGC(c, INFO, "Connection from %s opened (container %s)", c->peer,
             pn_connection_remote_container(pc) ? pn_connection_remote_container(pc) : "");
        break;
    }
    case PN_SESSION_REMOTE_OPEN: {
        pn_session_t *s = pn_event_session(e);
        if (pn_connection_state(c->driver.connection) & PN_LOCAL_CLOSED)
            break; /* refused or closing: nothing new starts */
        if (pn_session_state(s) & PN_LOCAL_UNINIT) {
            size_t cap = rtr_policy_session_WT(c, s, conn_session_capacity(c->listener));
            if (!cap) { /* refused by vhost policy: begin, then end with its condition */
                pn_session_open(s);
                pn_session_close(s);
                break;
            }
            pn_session_set_incoming_capacity(s, cap);
            pn_session_open(s);
            c->n_sessions++;
        }
        break;
    }
    case PN_LINK_REMOTE_OPEN: {
        pn_link_t *pl = pn_event_link(e);
        if (pn_connection_state(c->driver.connection) & PN_LOCAL_CLOSED)
            break; /* refused or closing: nothing new starts */
        rtr_link_t *k = pn_link_get_context(pl);
        if (k && k->al_id)
            rtr_autolink_remote_open_WT(k); /* the router attached it (link_auto.c) */
        else if (k && k->lr)
            rtr_lr_remote_open_WT(k); /* a route container answered the router's attach */
        else if ((pn_link_state(pl) & PN_LOCAL_UNINIT) && !k &&
                 !rtr_ir_attach_refused_WT(c, pl) && link_admit_WT(c, pl))
            link_attach_WT(c, pl);
        break;
    }
    case PN_LINK_FLOW: {
        rtr_link_t *k = pn_link_get_context(pn_event_link(e));
        if (k && k->lr)
            rtr_lr_flow_WT(k);
        else if (k && k->out)
            rtr_link_schedule_pump_WT(k);
        else if (k)
            rtr_link_flow_in_WT(k);
        break;
    }
    case PN_DELIVERY: {
        pn_delivery_t *d = pn_event_delivery(e);
        rtr_link_t *k = pn_link_get_context(pn_delivery_link(d));
        if (!k)
            break;
        if (k->lr)
            rtr_lr_delivery_WT(k, d);
        else if (k->out && !rtr_out_update_WT(k, d))
            rtr_link_errant_transfer_WT(k); /* the peer sent where it receives */
        else
            rtr_in_delivery_WT(k, d);
        break;
    }
    case PN_LINK_REMOTE_CLOSE:
    case PN_LINK_REMOTE_DETACH: {
        pn_link_t *pl = pn_event_link(e);
        rtr_link_t *k = pn_link_get_context(pl);
        if (k && k->al_id)
            rtr_autolink_remote_close_WT(k);
        if (k) {
            LOGL(k, INFO, "Link detached by the peer");
            rtr_link_cleanup_WT(k);
        }
        if (pn_event_type(e) == PN_LINK_REMOTE_CLOSE)
            pn_link_close(pl);
        else
            pn_link_detach(pl);
        pn_session_t *ls = pn_link_session(pl);
        pn_link_free(pl);
        rtr_lr_link_freed_WT(ls);
        rtr_autolink_link_freed_WT(ls);
        break;
    }
    case PN_SESSION_REMOTE_CLOSE: {
        pn_session_t *s = pn_event_session(e);
        if (c->n_sessions && !(pn_session_state(s) & PN_LOCAL_CLOSED))
            c->n_sessions--;
        rtr_autolink_session_end_WT(c, s);
        links_cleanup_session_WT(c, s);
        pn_session_close(s);
        pn_session_free(s);
        break;
    }
    case PN_CONNECTION_REMOTE_CLOSE: {
        pn_connection_t *pc = pn_event_connection(e);
        links_cleanup_session_WT(c, NULL);
        pn_connection_close(pc);
        break;
    }
    case PN_TRANSPORT_ERROR: {
        pn_condition_t *cond = pn_transport_condition(pn_event_transport(e));
        if (c->connector && c->end_logged)
            break; /* the transport said why (a TLS failure): Proton's error would repeat it */
        if (c->connector) {
            /* one line per new reason: a peer that keeps failing is not logged per attempt */
            char msg[300];
            const rtr_connector_addr_t *to = rtr_connector_target(c->connector);
            snprintf(msg, sizeof(msg), "Connection to %s:%s failed: %s %s", to->host, to->port,
                     pn_condition_get_name(cond) ? pn_condition_get_name(cond) : "",
                     pn_condition_get_description(cond) ? pn_condition_get_description(cond)
                                                        : "");
            if (rtr_connector_note(c->connector, msg))
                LOGC(c, INFO, "%s", msg);
            break;
        }
        if (rtr_lstats_transport_error_WT(c, cond))
            break; /* a TLS or authentication failure: its one line is out */
        LOGC(c, INFO, "Connection from %s failed: %s %s", c->peer,
             pn_condition_get_name(cond) ? pn_condition_get_name(cond) : "",
             pn_condition_get_description(cond) ? pn_condition_get_description(cond) : "");
        break;
    }
    case PN_TRANSPORT_CLOSED:
        links_cleanup_session_WT(c, NULL);
        break;
    default:
        break;
    }
}

/* ---------------------------------------------------------------- the connection's run and end */

void rtr_conn_closed_WT(rtr_conn_t *c)
{
    links_cleanup_session_WT(c, NULL);
}

void rtr_conn_process_WT(rtr_conn_t *c)
{
    if (c->closing)
        return;
    uint64_t now_ms = uv_now(&c->worker->loop);
    if (c->handshake_due && now_ms >= c->handshake_due)
        rtr_conn_handshake_expired_WT(c);
    int64_t deadline = rtr_transport_tick_WT(c, now_ms);
    for (;;) {
        pn_event_t *e;
        while ((e = pn_connection_driver_next_event(&c->driver)) != NULL)
            dispatch_WT(c, e);
        while (c->pump) {
            rtr_link_t *k = c->pump;
            c->pump = k->pump_next;
            k->in_pump = false;
            k->pump_next = NULL;
            rtr_link_pump_WT(k);
        }
        if (c->credit_sync)
            rtr_conn_credit_sync_WT(c);
        rtr_conn_write_WT(c);
        bool again = (c->lr_drain_due || c->n_lr_backlog) && rtr_lr_conn_written_WT(c);
        /* While a write is in flight (the socket is full), Proton still frames what it has to
         * say (its head stays the bytes being written): a session or link the client ended is
         * freed once its answer is framed, so a client that does not read leaves bytes here,
         * bounded by RTR_CONN_IN_UNANSWERED_MAX, not Proton's objects */
        if (c->writing)
            (void)pn_connection_driver_write_buffer(&c->driver);
        if (c->close_after_write && !pn_connection_driver_write_closed(&c->driver))
            pn_connection_driver_write_close(&c->driver); /* events follow: loop again */
        /* Links stopped by the output budget go on once the socket took what Proton framed
         * (rtr_conn_write_WT() starts the budget again); while the socket is full, its write
         * callback comes back. */
        if (c->n_blocked && c->out_queued < RTR_CONN_OUT_MAX) {
            for (rtr_link_t *k = c->links; k; k = k->next) {
                if (k->blocked) {
                    k->blocked = false;
                    c->n_blocked--;
                    rtr_link_schedule_pump_WT(k);
                    again = true;
                }
            }
        }
        if (!again && !pn_connection_driver_has_event(&c->driver))
            break;
    }
    if (pn_connection_driver_finished(&c->driver)) {
        rtr_transport_close_WT(c);
        return;
    }
    rtr_transport_arm_WT(c, deadline);
}

void rtr_conn_close_WT(rtr_conn_t *c)
{
    if (c->closing)
        return;
    pn_connection_t *pc = c->driver.connection;
    if (!pn_condition_is_set(pn_connection_condition(pc)))
        rtr_pn_conn_set_error_WT(pc, "amqp:connection:forced", "router shutting down");
    pn_connection_close(pc);
    rtr_conn_process_WT(c);
    pn_connection_driver_read_close(&c->driver);
    pn_connection_driver_write_close(&c->driver);
    rtr_conn_process_WT(c);
}

void rtr_conn_connect_WT(rtr_worker_t *w, int fd, struct rtr_connector *ct)
{
    if (w->stopping) {
        close(fd);
        rtr_connector_closed(ct, NULL);
        return;
    }
    const cfg_listener_t *l = &rtr_connector_cfg(ct)->conn;
    rtr_conn_t           *c = base_calloc(1, sizeof(*c));
    c->worker = w;
    c->listener = l;
    c->connector = ct;
    c->id = atomic_fetch_add(&w->ctx->next_conn_id, 1) + 1;
    c->strip_in = l->strip_annotations == CFG_STRIP_BOTH || l->strip_annotations == CFG_STRIP_IN;
    c->strip_out = l->strip_annotations == CFG_STRIP_BOTH || l->strip_annotations == CFG_STRIP_OUT;
    struct sockaddr_storage ss;
    socklen_t               sl = sizeof(ss);
    const rtr_connector_addr_t *to = rtr_connector_target(ct);
    snprintf(c->peer, sizeof(c->peer), "%.40s:%s", to->host, to->port); /* until getpeername */
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
        rtr_sockaddr_format(&ss, c->peer, sizeof(c->peer));
    BASE_DLIST_PUSH(w->conns, c, prev, next);
    w->n_conns++;
    if (!rtr_transport_open_WT(c, fd, false)) {
        rtr_transport_close_WT(c);
        return;
    }
    if (l->handshake_timeout_seconds)
        c->handshake_due = uv_now(&w->loop) + l->handshake_timeout_seconds * 1000ull;
    LOGC(c, DEBUG, "Connected to %s (connector %s)", c->peer, l->name ? l->name : "");
    rtr_conn_process_WT(c);
}

void rtr_conn_accept_WT(rtr_worker_t *w, int fd, const cfg_listener_t *l, const rtr_accept_t *ws)
{
    const char *peer = ws ? ws->peer : NULL;
    if (w->stopping) {
        close(fd);
        return;
    }
    rtr_conn_t *c = base_calloc(1, sizeof(*c));
    c->worker = w;
    c->listener = l;
    c->id = atomic_fetch_add(&w->ctx->next_conn_id, 1) + 1;
    c->strip_in = l->strip_annotations == CFG_STRIP_BOTH || l->strip_annotations == CFG_STRIP_IN;
    c->strip_out = l->strip_annotations == CFG_STRIP_BOTH || l->strip_annotations == CFG_STRIP_OUT;

    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    snprintf(c->peer, sizeof(c->peer), "?");
    if (peer) /* a WebSocket's socketpair: its client's address, not the unix socket's */
        snprintf(c->peer, sizeof(c->peer), "%s", peer);
    else if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
        rtr_sockaddr_format(&ss, c->peer, sizeof(c->peer));

    if (ws && ws->tls[0]) /* wss: libwebsockets' TLS session, for the connection's rows */
        c->ws_tls = base_strdup(ws->tls);
    BASE_DLIST_PUSH(w->conns, c, prev, next);
    w->n_conns++;

    if (!rtr_transport_open_WT(c, fd, peer != NULL)) {
        rtr_transport_close_WT(c);
        return;
    }
    if (l->handshake_timeout_seconds)
        c->handshake_due = uv_now(&w->loop) + l->handshake_timeout_seconds * 1000ull;
    LOGC(c, INFO, "Accepted %sconnection from %s", peer ? "WebSocket " : "", c->peer);
    rtr_conn_process_WT(c);
}
