/* router/conn.c: AMQP connections on a worker - socket I/O through libuv, protocol through
 * Proton's pn_connection_driver_t, and the link/delivery work that joins them to the core.
 *
 * Thread suffixes: _WT = the connection's worker only (every function in this file).
 *
 * DESIGN: a connection is driven by "process": feed Proton what the socket read, run every
 * Proton event, push pending outgoing copies into Proton (credit and session-window
 * permitting), then write what Proton produced (uv_try_write first; a copy goes to uv_write
 * only when the socket is full).  Incoming messages are scanned by the codec once complete
 * and handed to the core (CORE_A_DELIVER); outgoing copies arrive from the core
 * (CORE_W_SEND) and are written with a freshly composed message-annotations section (router
 * annotations per stripAnnotations) and every other byte as it arrived.
 *
 * Lifetimes: a link announced to the core lives until CORE_W_LINK_DETACHED; Proton objects
 * are never referenced after link cleanup (contexts cleared, pointers NULLed); a connection
 * is freed after its uv handles closed and its last link is gone.
 */
#include "router/link_out.h"

#include "core/base/list.h"
#include "core/core_metrics.h"

#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/event.h>
#include <proton/link.h>
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

static void link_cleanup_WT(rtr_link_t *k);
static void in_finish_WT(rtr_worker_t *w, rtr_in_t *in);

/* ---------------------------------------------------------------- links */

static void in_unlink_WT(rtr_in_t *in)
{
    rtr_link_t *k = in->link;
    if (!k)
        return;
    BASE_DLIST_REMOVE(k->ins, in, prev, next);
    in->link = NULL;
}

/* One delivery's credit comes back to the sender. */
static void link_credit_back_WT(rtr_link_t *k)
{
    if (k->held)
        k->held--;
    if (k->credit_on && !k->drain_out && k->pn && !k->conn->worker->stopping) {
        pn_link_flow(k->pn, 1);
        rtr_conn_mark_dirty_WT(k->conn);
    }
}

static void in_free_WT(rtr_worker_t *w, rtr_in_t *in)
{
    if (in->msg)
        rtr_msg_unref(in->msg);
    rtr_in_t_free(in);
    w->n_ins--;
}

/* Forget every Proton object of the link, hand back what it held, and tell the core. */
static void link_cleanup_WT(rtr_link_t *k)
{
    if (!k->pn)
        return;
    rtr_worker_t *w = k->conn->worker;

    if (k->out) {
        rtr_link_out_cleanup_WT(k);
    } else {
        rtr_in_t *in = k->receiving;
        if (in) {
            k->receiving = NULL;
            if (in->pn)
                pn_delivery_set_context(in->pn, NULL);
            if (in->at_core) {
                /* a stream cut short: its copies abort, the core still answers for it */
                rtr_msg_stream_end_WT(in->msg, true);
            } else {
                in_free_WT(w, in);
            }
        }
        if (k->q2) {
            rtr_link_t **pp = &w->q2_links;
            while (*pp != k)
                pp = &(*pp)->q2_next;
            *pp = k->q2_next;
            k->q2 = false;
            k->conn->n_q2--;
        }
        while ((in = k->ins) != NULL) {
            if (in->pn)
                pn_delivery_set_context(in->pn, NULL);
            in->pn = NULL;
            in_unlink_WT(in);
            if (in->core_done)
                in_finish_WT(w, in); /* answered while its last bytes were awaited */
        }
    }
    if (k->reported_blocked) {
        k->reported_blocked = false;
        stats_gauge_add(w->shard, ROUTER_STAT(CORE_ROUTER_LINKS_BLOCKED), -1);
    }
    pn_link_set_context(k->pn, NULL);
    k->pn = NULL;
    if (k->out)
        k->conn->n_out_links--;
    else
        k->conn->n_in_links--;
    if (k->at_core) {
        core_action_t *a = rtr_worker_action_WT(w);
        a->type = CORE_A_LINK_DETACH;
        a->link_id = k->id;
    } else {
        rtr_link_unlink_WT(k);
    }
}

/* Close a link with an AMQP error, and forget it as on a detach (its deliveries are handed
 * back; k may be freed). */
static void link_close_error_WT(rtr_link_t *k, const char *name, const char *desc)
{
    rtr_conn_t *c = k->conn;
    pn_link_t *pl = k->pn;
    pn_condition_t *cond = pn_link_condition(pl);
    pn_condition_set_name(cond, name);
    pn_condition_set_description(cond, desc);
    pn_link_close(pl);
    link_cleanup_WT(k);
    rtr_conn_mark_dirty_WT(c);
}

/* maxSenders / maxReceivers: refuse an attach beyond the connection's cap (attach and
 * detach at once with amqp:resource-limit-exceeded, as qdrouterd's policy does).  Returns
 * true when the link may attach. */
static bool link_admit_WT(rtr_conn_t *c, pn_link_t *pl)
{
    bool client_sends = pn_link_is_receiver(pl);
    uint32_t n = client_sends ? c->n_in_links : c->n_out_links;
    uint32_t max = client_sends ? c->listener->max_senders : c->listener->max_receivers;
    if (n < max)
        return true;
    char desc[96];
    snprintf(desc, sizeof(desc), "at most %u %s on one connection (%s)", max,
             client_sends ? "senders" : "receivers",
             client_sends ? "maxSenders" : "maxReceivers");
    pn_condition_t *cond = pn_link_condition(pl);
    pn_condition_set_name(cond, "amqp:resource-limit-exceeded");
    pn_condition_set_description(cond, desc);
    pn_link_close(pl);
    stats_counter_add(c->worker->shard, g_rtr.policy_stats[RTR_POLICY_LINK_DENIED], 1);
    LOGC(c, NOTICE, "Link refused: amqp:resource-limit-exceeded %s", desc);
    /* Proton keeps a refused link until the client detaches it: a client that goes on
     * attaching regardless loses its connection instead of growing the router's memory */
    if (++c->n_refused > RTR_REFUSED_LINKS_MAX) {
        pn_connection_t *pc = c->driver.connection;
        pn_condition_t *cc = pn_connection_condition(pc);
        pn_condition_set_name(cc, "amqp:resource-limit-exceeded");
        pn_condition_set_description(cc, "too many links refused on this connection");
        pn_connection_close(pc);
        LOGC(c, NOTICE, "Connection from %s closed: amqp:resource-limit-exceeded more than %u "
                        "links refused", c->peer, RTR_REFUSED_LINKS_MAX);
    }
    return false;
}

static void link_attach_WT(rtr_conn_t *c, pn_link_t *pl)
{
    rtr_worker_t *w = c->worker;
    rtr_link_t *k = base_calloc(1, sizeof(*k));
    k->id = atomic_fetch_add(&g_rtr.next_link_id, 1) + 1;
    k->conn = c;
    k->pn = pl;
    k->out = pn_link_is_sender(pl);
    k->zero_since = uv_now(&w->loop) | 1; /* as qdrouterd: no credit yet since the attach */
    if (k->out)
        c->n_out_links++;
    else
        c->n_in_links++;
    BASE_DLIST_PUSH(c->links, k, prev, next);
    w->n_links++;
    pn_link_set_context(pl, k);

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
    if (k->pn) {
        if (addr)
            pn_terminus_set_address(pn_link_source(k->pn), addr);
        pn_link_open(k->pn);
        k->open = true;
        if (work->u.attached.cond_name) {
            pn_condition_t *cond = pn_link_condition(k->pn);
            pn_condition_set_name(cond, work->u.attached.cond_name);
            pn_condition_set_description(cond, desc ? desc : "");
            pn_link_close(k->pn);
            LOGL(k, INFO, "Link refused: %s %s", work->u.attached.cond_name, desc ? desc : "");
        } else if (k->out) {
            rtr_link_schedule_pump_WT(k);
        }
        rtr_conn_mark_dirty_WT(k->conn);
    }
    free(addr);
    free(desc);
}

/* Credit on an incoming link.  The core's grant/drain (and the sender's flows) only mark the
 * link; link_credit_sync_WT reconciles once, right before the connection's next write, so a
 * grant and a drain within one batch net out instead of reaching the sender as a flow with
 * credit and drain set at once.  A drain stays outstanding (drain_out) until the sender has
 * no credit left by the router's count: it answered (its delivery-count moved on, Proton took
 * the credit off) or it used the credit up.  Until then nothing is granted relative to it: a
 * grant made meanwhile waits for the answer, so the window is never computed from credit the
 * sender is about to give back, and the grant that follows an answered drain always moves
 * the sender's credit off 0 (a flow frame with drain off), whatever the sender's Proton
 * does with the drained credit. */
static void link_credit_sync_later_WT(rtr_link_t *k)
{
    k->credit_sync = true;
    k->conn->credit_sync = true;
    rtr_conn_mark_dirty_WT(k->conn);
}

static void link_credit_sync_WT(rtr_link_t *k)
{
    k->credit_sync = false;
    pn_link_t *pl = k->pn;
    if (!pl || k->out)
        return;
    /* what the sender has by the router's count (told, or about to be told) */
    int avail = pn_link_credit(pl) - pn_link_queued(pl);
    if (k->drain_out && avail <= 0)
        k->drain_out = false; /* answered, or the credit was used up */
    if (!k->credit_on || k->conn->worker->stopping) {
        if (!k->drain_out && avail > 0) {
            pn_link_drain(pl, 0); /* the sender gives back what it cannot use */
            k->drain_out = true;
        }
    } else if (!k->drain_out) {
        if (pn_link_get_drain(pl))
            pn_link_set_drain(pl, false);
        /* the window: at most maxUnsettledPerLink (<= linkCapacity) deliveries unsettled */
        int want = (int)k->conn->listener->max_unsettled - pn_link_credit(pl) - (int)k->held;
        if (want > 0)
            pn_link_flow(pl, want);
    }
    rtr_link_credit_seen_WT(k, pn_link_credit(pl));
}

static void conn_credit_sync_WT(rtr_conn_t *c)
{
    c->credit_sync = false;
    for (rtr_link_t *k = c->links; k; k = k->next)
        if (k->credit_sync)
            link_credit_sync_WT(k);
}

static void on_link_credit_WT(rtr_link_t *k, bool grant)
{
    if (!k->pn || k->out)
        return;
    k->credit_on = grant;
    link_credit_sync_later_WT(k);
}

/* The sender of an incoming link sent a flow: it may have answered a drain (Proton took the
 * drained credit off the link), so a grant waiting for that answer goes out now, and with
 * credit on the window is topped up again. */
static void link_flow_in_WT(rtr_link_t *k)
{
    if (k->pn && (k->drain_out || k->credit_on))
        link_credit_sync_later_WT(k);
}

/* ---------------------------------------------------------------- incoming deliveries */

static void in_reject_WT(pn_delivery_t *d, const char *cond, const char *desc)
{
    pn_disposition_t *local = pn_delivery_local(d);
    pn_condition_t *c = pn_disposition_condition(local);
    pn_condition_set_name(c, cond);
    pn_condition_set_description(c, desc);
    pn_delivery_update(d, PN_REJECTED);
    pn_delivery_settle(d);
}

/* Give the sender the core's outcome, settle, return the credit, and free the delivery.
 * Runs once the core answered and the last byte arrived (or the link is gone). */
static void in_finish_WT(rtr_worker_t *w, rtr_in_t *in)
{
    pn_delivery_t *d = in->pn;
    core_disposition_t *disp = &in->final;

    if (d) {
        pn_disposition_t *local = pn_delivery_local(d);
        uint64_t state = PN_RELEASED;
        switch (disp->outcome) {
        case CORE_OUTCOME_ACCEPTED:
            state = PN_ACCEPTED;
            break;
        case CORE_OUTCOME_REJECTED:
            state = PN_REJECTED;
            if (disp->cond_name) {
                pn_condition_t *cond = pn_disposition_condition(local);
                pn_condition_set_name(cond, disp->cond_name);
                if (disp->cond_desc)
                    pn_condition_set_description(cond, disp->cond_desc);
            }
            break;
        case CORE_OUTCOME_MODIFIED:
            state = PN_MODIFIED;
            pn_disposition_set_failed(local, disp->delivery_failed);
            pn_disposition_set_undeliverable(local, disp->undeliverable_here);
            break;
        default:
            break;
        }
        if (in->has_final)
            pn_delivery_update(d, state);
        pn_delivery_set_context(d, NULL);
        pn_delivery_settle(d);
        in->pn = NULL;
    }
    BASE_FREE(disp->cond_name);
    BASE_FREE(disp->cond_desc);
    rtr_link_t *k = in->link;
    if (k) {
        in_unlink_WT(in);
        link_credit_back_WT(k);
        rtr_conn_mark_dirty_WT(k->conn);
    }
    in_free_WT(w, in);
}

/* Hand a delivery whose sections up to the body are here to the core. */
static void in_route_WT(rtr_link_t *k, rtr_in_t *in)
{
    rtr_conn_t *c = k->conn;
    rtr_msg_t *m = in->msg;

    m->ra_in = !c->strip_in && m->scan.ma_router_count > 0;
    in->dlv.content = &m->c;
    in->dlv.link_id = k->id;
    in->dlv.presettled = pn_delivery_settled(in->pn);
    const codec_bytes_t *to = (m->ra_in && m->scan.ra.to.ptr) ? &m->scan.ra.to : &m->scan.to;
    if (to->ptr) {
        in->dlv.to = (const char *)to->ptr;
        in->dlv.to_len = (uint32_t)to->len;
    }
    in->link = k;
    BASE_DLIST_PUSH(k->ins, in, prev, next);
    WCOUNT(c->worker, c->stats, CORE_CONN_DELIVERIES_IN, 1);
    WGAUGE(c->worker, c->stats, CORE_CONN_LAST_DLV, (int64_t)time(NULL));
    in->at_core = true;
    core_action_t *a = rtr_worker_action_WT(c->worker);
    a->type = CORE_A_DELIVER;
    a->link_id = k->id;
    a->u.dlv = &in->dlv;
}

/* The last byte of a routed delivery arrived (already advanced past). */
static void in_received_WT(rtr_link_t *k, rtr_in_t *in)
{
    if (k->receiving == in)
        k->receiving = NULL;
    if (in->dlv.presettled) {
        pn_delivery_set_context(in->pn, NULL);
        pn_delivery_settle(in->pn);
        in->pn = NULL;
    }
    if (in->core_done)
        in_finish_WT(k->conn->worker, in);
}

/* Bytes of a delivery the router refuses: read and drop them, then reject once complete. */
static void in_discard_WT(rtr_link_t *k, rtr_in_t *in, pn_delivery_t *d)
{
    char sink[16384];
    while (pn_delivery_pending(d) > 0 && pn_link_recv(k->pn, sink, sizeof(sink)) > 0)
        ;
    if (pn_delivery_partial(d))
        return;
    pn_link_advance(k->pn);
    k->receiving = NULL;
    pn_delivery_set_context(d, NULL);
    if (pn_delivery_settled(d)) {
        LOGL(k, INFO, "Dropped a presettled message that cannot be decoded: %s", in->discard_why);
        pn_delivery_settle(d);
    } else {
        LOGL(k, INFO, "Rejected a message that cannot be decoded: %s", in->discard_why);
        in_reject_WT(d, "amqp:decode-error", in->discard_why);
    }
    in->pn = NULL;
    in_free_WT(k->conn->worker, in);
    link_credit_back_WT(k);
}

/* maxMessageSize: a delivery that is (or announces, by what Proton holds) bigger than the
 * listener's limit is rejected with amqp:link:message-size-exceeded, its link closed with
 * that condition and its connection closed with amqp:connection:forced (qdrouterd's policy).
 * Returns true when it did that (the delivery and maybe k are gone). */
static bool in_too_big_WT(rtr_link_t *k, rtr_in_t *in, pn_delivery_t *d)
{
    uint64_t max = k->conn->listener->max_message_size;
    if (!max)
        return false;
    rtr_msg_t *m = in->msg;
    /* total is written by this worker only (the receiving one): no lock needed to read it */
    uint64_t have = (m->c.streaming ? m->total : m->len) + pn_delivery_pending(d);
    if (have <= max)
        return false;

    rtr_conn_t *c = k->conn;
    char desc[96];
    snprintf(desc, sizeof(desc), "message larger than maxMessageSize (%llu bytes)",
             (unsigned long long)max);
    LOGL(k, NOTICE, "Message refused: amqp:link:message-size-exceeded %s", desc);
    stats_counter_add(c->worker->shard, g_rtr.policy_stats[RTR_POLICY_SIZE_DENIED], 1);
    pn_delivery_set_context(d, NULL);
    if (pn_delivery_settled(d))
        pn_delivery_settle(d);
    else
        in_reject_WT(d, "amqp:link:message-size-exceeded", desc);
    in->pn = NULL; /* link cleanup frees or aborts the record */
    link_close_error_WT(k, "amqp:link:message-size-exceeded", desc);
    pn_connection_t *pc = c->driver.connection;
    pn_condition_t *cond = pn_connection_condition(pc);
    pn_condition_set_name(cond, "amqp:connection:forced");
    pn_condition_set_description(cond, desc);
    pn_connection_close(pc);
    return true;
}

static void in_delivery_WT(rtr_link_t *k, pn_delivery_t *d)
{
    rtr_worker_t *w = k->conn->worker;
    pn_link_t *pl = k->pn;
    rtr_in_t *in = pn_delivery_get_context(d);

    if (!in) {
        if (d != pn_link_current(pl) || k->receiving)
            return; /* an update on a delivery the router already handed on: nothing to do */
        /* Proton counts a receiver's credit down when a delivery is advanced past, so the
         * credit left is credit - queued; below zero, the sender sent without credit (and
         * would make the router hold more than the link's window, maxUnsettledPerLink) */
        if (pn_link_credit(pl) - pn_link_queued(pl) < 0 ||
            k->held >= k->conn->listener->max_unsettled) {
            LOGL(k, NOTICE, "Link closed: amqp:link:transfer-limit-exceeded (a transfer "
                            "without credit, %u deliveries unsettled)", k->held);
            link_close_error_WT(k, "amqp:link:transfer-limit-exceeded",
                                "a transfer without link credit");
            return;
        }
        in = rtr_in_t_new();
        in->pn = d;
        in->msg = rtr_msg_new();
        in->head_limit = RTR_STREAM_THRESHOLD;
        w->n_ins++;
        k->receiving = in;
        k->held++;
        if (k->drain_out && pn_link_credit(pl) - pn_link_queued(pl) <= 0)
            link_credit_sync_later_WT(k); /* the drain's credit is used up: a grant may wait */
        pn_delivery_set_context(d, in);
    } else if (in != k->receiving) {
        return; /* the sender changed a routed delivery (e.g. settled it first) */
    }
    if (k->q2)
        return; /* resumed by RTR_EXT_STREAM once the copies caught up */

    rtr_msg_t *m = in->msg;
    if (pn_delivery_aborted(d)) {
        k->receiving = NULL;
        pn_delivery_set_context(d, NULL);
        pn_delivery_settle(d);
        in->pn = NULL;
        if (in->at_core) {
            rtr_msg_stream_end_WT(m, true);
            if (in->core_done)
                in_finish_WT(w, in);
        } else {
            in_free_WT(w, in);
            link_credit_back_WT(k);
        }
        return;
    }
    for (;;) {
        if (in_too_big_WT(k, in, d))
            return;
        if (in->discard) {
            in_discard_WT(k, in, d);
            return;
        }
        if (m->c.streaming) {
            if (rtr_msg_stream_recv_WT(m, pl, d)) {
                k->q2 = true;
                k->conn->n_q2++;
                k->q2_next = w->q2_links;
                w->q2_links = k;
                return;
            }
            if (pn_delivery_partial(d) || pn_delivery_pending(d) > 0)
                return;
            rtr_msg_stream_end_WT(m, false);
            pn_link_advance(pl);
            in_received_WT(k, in);
            return;
        }
        for (;;) {
            size_t pending = pn_delivery_pending(d);
            if (pending == 0 || m->len >= in->head_limit)
                break;
            if (pending > in->head_limit - m->len)
                pending = in->head_limit - m->len;
            /* A message arriving in several frames gets room for 64 KiB at once (and then
             * doubles), so that a typical multi-frame message is not copied as it grows. */
            size_t room = pending;
            if (m->cap == 0 && pn_delivery_partial(d) && room < RTR_HEAD_FIRST_PARTIAL)
                room = RTR_HEAD_FIRST_PARTIAL;
            rtr_msg_reserve(m, room);
            ssize_t n = pn_link_recv(pl, (char *)m->data + m->len, pending);
            if (n <= 0)
                break;
            m->len += (size_t)n;
        }
        const char *why = NULL;
        if (!pn_delivery_partial(d) && pn_delivery_pending(d) == 0) {
            if (codec_scan(m->data, m->len, true, &m->scan, &why) != 0) {
                in->discard = true; /* in_discard_WT() advances and rejects */
                in->discard_why = why ? why : "malformed message";
                continue;
            }
            pn_link_advance(pl);
            in_route_WT(k, in);
            in_received_WT(k, in);
            return;
        }
        if (m->len < in->head_limit)
            return; /* more bytes to come */
        /* A large message: route it as soon as its sections before the body are here. */
        int rc = codec_scan(m->data, m->len, false, &m->scan, &why);
        if (rc == CODEC_PARTIAL && in->head_limit < RTR_PREFIX_MAX) {
            in->head_limit = RTR_PREFIX_MAX;
            continue;
        }
        if (rc != 0) {
            in->discard = true;
            in->discard_why = rc == CODEC_PARTIAL
                                  ? "the sections before the body exceed 1 MiB"
                                  : (why ? why : "malformed message");
            continue;
        }
        rtr_msg_stream_start_WT(m, w->index);
        in_route_WT(k, in);
    }
}

/* The core's answer for an incoming delivery: applied now, or once its last byte arrived. */
static void on_core_done_WT(rtr_worker_t *w, rtr_in_t *in)
{
    in->core_done = true;
    if (in->link && in->link->receiving == in)
        return; /* still streaming in: in_received_WT() finishes it */
    in_finish_WT(w, in);
}

static void on_settle_WT(rtr_worker_t *w, core_work_t *work)
{
    rtr_in_t *in = (rtr_in_t *)work->u.settle.dlv;
    in->final = work->u.settle.disp;
    in->has_final = true;
    on_core_done_WT(w, in);
}

static void on_release_WT(rtr_worker_t *w, core_work_t *work)
{
    on_core_done_WT(w, (rtr_in_t *)work->u.release);
}

/* RTR_EXT_STREAM: a streamed message this worker sends or receives has changed. */
static void on_stream_wake_WT(rtr_worker_t *w)
{
    rtr_out_t *o = w->waiters;
    w->waiters = NULL;
    while (o) {
        rtr_out_t *next = o->wnext;
        o->on_wait = false;
        o->wnext = o->wprev = NULL;
        rtr_link_schedule_pump_WT(o->link);
        rtr_conn_mark_dirty_WT(o->link->conn);
        o = next;
    }
    rtr_link_t *k = w->q2_links;
    w->q2_links = NULL;
    while (k) {
        rtr_link_t *next = k->q2_next;
        k->q2 = false;
        k->conn->n_q2--;
        k->q2_next = NULL;
        if (k->pn && k->receiving && k->receiving->pn) {
            in_delivery_WT(k, k->receiving->pn);
            rtr_conn_mark_dirty_WT(k->conn);
        }
        k = next;
    }
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
        on_link_credit_WT(k, work->u.credit.grant);
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
        on_settle_WT(w, work);
        break;
    case CORE_W_RELEASE:
        on_release_WT(w, work);
        break;
    case CORE_W_EXTERNAL:
        if (work->u.ext.kind == RTR_EXT_ACCEPT) {
            rtr_conn_accept_WT(w, (int)work->u.ext.arg, work->u.ext.ptr, NULL);
        } else if (work->u.ext.kind == RTR_EXT_ACCEPT_WS) {
            rtr_accept_t *acc = work->u.ext.ptr;
            rtr_conn_accept_WT(w, (int)work->u.ext.arg, acc->listener, acc->peer);
            free(acc);
        } else if (work->u.ext.kind == RTR_EXT_STREAM) {
            on_stream_wake_WT(w);
        } else if (work->u.ext.kind == RTR_EXT_CLOSE_CONN) {
            for (rtr_conn_t *c = w->conns; c; c = c->next) {
                if (c->id == (uint64_t)work->u.ext.arg) {
                    LOGC(c, INFO, "Connection closed by management (adminStatus deleted)");
                    pn_condition_t *cond = pn_connection_condition(c->driver.connection);
                    pn_condition_set_name(cond, "amqp:connection:forced");
                    pn_condition_set_description(cond, "Connection closed by management");
                    rtr_conn_close_WT(c);
                    break;
                }
            }
        } else if (work->u.ext.kind == RTR_EXT_SHUTDOWN) {
            rtr_worker_shutdown_WT(w, (uint64_t)work->u.ext.arg);
        }
        break;
    }
}

void rtr_conn_quiesce_WT(rtr_worker_t *w)
{
    for (rtr_conn_t *c = w->conns; c; c = c->next) {
        for (rtr_link_t *k = c->links; k; k = k->next) {
            if (k->out || !k->pn)
                continue;
            k->credit_on = false;
            link_credit_sync_later_WT(k); /* the sender gives back what it cannot use */
        }
        rtr_conn_mark_dirty_WT(c);
    }
}

void rtr_conn_release_all_WT(rtr_worker_t *w)
{
    for (rtr_conn_t *c = w->conns; c; c = c->next) {
        for (rtr_link_t *k = c->links; k; k = k->next) {
            if (k->out)
                continue;
            for (rtr_in_t *in = k->ins; in; in = in->next) {
                if (!in->pn || in == k->receiving || in->dlv.presettled)
                    continue; /* a delivery still arriving is aborted by the link's cleanup */
                pn_delivery_set_context(in->pn, NULL);
                pn_delivery_update(in->pn, PN_RELEASED);
                pn_delivery_settle(in->pn);
                in->pn = NULL; /* the record waits for the core's answer */
            }
        }
        rtr_conn_mark_dirty_WT(c);
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
    pn_connection_set_container(pc, g_rtr.router_id);
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
    pn_data_exit(props);
}

/* policy maxConnections: count the connection, or refuse it (open, then close at once with
 * amqp:resource-limit-exceeded, as qdrouterd's policy does).  Returns true when admitted. */
static bool conn_admit_WT(rtr_conn_t *c)
{
    uint32_t max = g_rtr.cfg->policy.max_connections;
    uint32_t n = atomic_fetch_add(&g_rtr.n_open_conns, 1);
    stats_counter_add(c->worker->shard, g_rtr.policy_stats[RTR_POLICY_PROCESSED], 1);
    if (max == 0 || n < max) {
        c->counted = true;
        return true;
    }
    atomic_fetch_sub(&g_rtr.n_open_conns, 1);
    stats_counter_add(c->worker->shard, g_rtr.policy_stats[RTR_POLICY_CONN_DENIED], 1);
    pn_connection_t *pc = c->driver.connection;
    pn_condition_t *cond = pn_connection_condition(pc);
    pn_condition_set_name(cond, "amqp:resource-limit-exceeded");
    char desc[96];
    snprintf(desc, sizeof(desc), "at most %u connections (policy maxConnections)", max);
    pn_condition_set_description(cond, desc);
    pn_connection_close(pc);
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
            link_cleanup_WT(k);
        k = next;
    }
}

static void dispatch_WT(rtr_conn_t *c, pn_event_t *e)
{
    switch (pn_event_type(e)) {
    case PN_CONNECTION_INIT:
        conn_init_WT(c);
        break;
    case PN_CONNECTION_REMOTE_OPEN: {
        pn_connection_t *pc = pn_event_connection(e);
        c->handshake_due = 0; /* the handshake is done */
        if (pn_connection_state(pc) & PN_LOCAL_UNINIT)
            pn_connection_open(pc);
        if (!c->counted && !conn_admit_WT(c))
            break;
        if (stats_obj_is_none(c->stats)) {
            char id[24];
            snprintf(id, sizeof(id), "%llu", (unsigned long long)c->id);
            const char *container = pn_connection_remote_container(pc);
            const char *labels[] = {id, c->peer, container ? container : "", "in"};
            core_stats_object_new(g_rtr.stats, g_rtr.stats->connection, labels, &c->stats);
            WGAUGE(c->worker, c->stats, CORE_CONN_OPENED_AT, (int64_t)time(NULL));
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
            pn_session_set_incoming_capacity(s, conn_session_capacity(c->listener));
            pn_session_open(s);
        }
        break;
    }
    case PN_LINK_REMOTE_OPEN: {
        pn_link_t *pl = pn_event_link(e);
        if (pn_connection_state(c->driver.connection) & PN_LOCAL_CLOSED)
            break; /* refused or closing: nothing new starts */
        if ((pn_link_state(pl) & PN_LOCAL_UNINIT) && !pn_link_get_context(pl) &&
            link_admit_WT(c, pl))
            link_attach_WT(c, pl);
        break;
    }
    case PN_LINK_FLOW: {
        rtr_link_t *k = pn_link_get_context(pn_event_link(e));
        if (k && k->out)
            rtr_link_schedule_pump_WT(k);
        else if (k)
            link_flow_in_WT(k);
        break;
    }
    case PN_DELIVERY: {
        pn_delivery_t *d = pn_event_delivery(e);
        rtr_link_t *k = pn_link_get_context(pn_delivery_link(d));
        if (!k)
            break;
        if (k->out)
            rtr_out_update_WT(k, d);
        else
            in_delivery_WT(k, d);
        break;
    }
    case PN_LINK_REMOTE_CLOSE:
    case PN_LINK_REMOTE_DETACH: {
        pn_link_t *pl = pn_event_link(e);
        rtr_link_t *k = pn_link_get_context(pl);
        if (k) {
            LOGL(k, INFO, "Link detached by the peer");
            link_cleanup_WT(k);
        }
        if (pn_event_type(e) == PN_LINK_REMOTE_CLOSE)
            pn_link_close(pl);
        else
            pn_link_detach(pl);
        pn_link_free(pl);
        break;
    }
    case PN_SESSION_REMOTE_CLOSE: {
        pn_session_t *s = pn_event_session(e);
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

/* ---------------------------------------------------------------- socket I/O */

static void handle_closed_cb(uv_handle_t *h)
{
    rtr_conn_t *c = h->data;
    if (--c->handles > 0)
        return;
    links_cleanup_session_WT(c, NULL);
    pn_connection_driver_destroy(&c->driver);
    c->closed = true;
    LOGC(c, INFO, "Connection from %s closed", c->peer);
    if (!c->links)
        rtr_conn_free_WT(c);
}

static void conn_close_socket_WT(rtr_conn_t *c)
{
    if (c->closing)
        return;
    c->closing = true;
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, handle_closed_cb);
    uv_close((uv_handle_t *)&c->tcp, handle_closed_cb);
}

void rtr_conn_process_WT(rtr_conn_t *c)
{
    if (c->closing)
        return;
    pn_transport_t *t = c->driver.transport;
    uint64_t now_ms = uv_now(&c->worker->loop);
    if (c->handshake_due && now_ms >= c->handshake_due)
        rtr_conn_handshake_expired_WT(c);
    int64_t deadline = pn_transport_tick(t, (int64_t)now_ms);
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
            conn_credit_sync_WT(c);
        rtr_conn_write_WT(c);
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
        bool again = false;
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
        conn_close_socket_WT(c);
        return;
    }
    rtr_transport_arm_WT(c, deadline);
}

void rtr_conn_close_WT(rtr_conn_t *c)
{
    if (c->closing)
        return;
    pn_connection_t *pc = c->driver.connection;
    pn_condition_t *cond = pn_connection_condition(pc);
    if (!pn_condition_is_set(cond)) {
        pn_condition_set_name(cond, "amqp:connection:forced");
        pn_condition_set_description(cond, "router shutting down");
    }
    pn_connection_close(pc);
    rtr_conn_process_WT(c);
    pn_connection_driver_read_close(&c->driver);
    pn_connection_driver_write_close(&c->driver);
    rtr_conn_process_WT(c);
}

void rtr_conn_accept_WT(rtr_worker_t *w, int fd, const cfg_listener_t *l, const char *peer)
{
    if (w->stopping) {
        close(fd);
        return;
    }
    rtr_conn_t *c = base_calloc(1, sizeof(*c));
    c->worker = w;
    c->listener = l;
    c->id = atomic_fetch_add(&g_rtr.next_conn_id, 1) + 1;
    c->strip_in = l->strip_annotations == CFG_STRIP_BOTH || l->strip_annotations == CFG_STRIP_IN;
    c->strip_out = l->strip_annotations == CFG_STRIP_BOTH || l->strip_annotations == CFG_STRIP_OUT;

    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    snprintf(c->peer, sizeof(c->peer), "?");
    if (peer) /* a WebSocket's socketpair: its client's address, not the unix socket's */
        snprintf(c->peer, sizeof(c->peer), "%s", peer);
    else if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
        rtr_sockaddr_format(&ss, c->peer, sizeof(c->peer));

    BASE_DLIST_PUSH(w->conns, c, prev, next);
    w->n_conns++;

    if (!rtr_transport_open_WT(c, fd, peer != NULL)) {
        conn_close_socket_WT(c);
        return;
    }
    if (l->handshake_timeout_seconds)
        c->handshake_due = uv_now(&w->loop) + l->handshake_timeout_seconds * 1000ull;
    LOGC(c, INFO, "Accepted %sconnection from %s", peer ? "WebSocket " : "", c->peer);
    rtr_conn_process_WT(c);
}
