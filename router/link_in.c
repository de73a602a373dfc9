/* router/link_in.c: a connection's incoming links (the client's senders) - receiving
 * deliveries (gathered until their sections before the body are here, then scanned and
 * handed to the core as CORE_A_DELIVER; a large one routed early and streamed), the
 * per-delivery limits (maxMessageSize, undecodable messages), Q2 (a streamed message stops
 * being read while its copies lag), the credit the router gives the sender, and the core's
 * outcomes given back to the sender.  Also a link's end in both directions (the top of the
 * link layers: it calls link_out.c for the outgoing side).
 *
 * Thread suffixes: _WT = the connection's worker only (every function in this file).
 *
 * Layer: above link_out.c and transport.c; conn.c calls it from Proton's events and the
 * core's work.
 */
#include "router/policy.h"
#include "router/policy_conn.h"
#include "router/link_in.h"
#include "router/link_auto.h"
#include "router/linkroute.h"
#include "router/peer_quirks.h"

#include "core/base/list.h"
#include "core/core_metrics.h"

#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/link.h>

#include <stdio.h>
#include <time.h>

BASE_POOL_DEFINE(rtr_in_t, 64)

static void in_finish_WT(rtr_worker_t *w, rtr_in_t *in);

static void in_unlink_WT(rtr_in_t *in)
{
    rtr_link_t *k = in->link;
    if (!k)
        return;
    BASE_DLIST_REMOVE(k->ins, in, prev, next);
    in->link = NULL;
}

static void link_credit_sync_later_WT(rtr_link_t *k);

/* One delivery's credit comes back to the sender.  An autoLink's incoming link gets it back
 * in batches, once half its window is used: every flow RabbitMQ receives while its queue is
 * sending lets it overrun the credit again (docs/brokers.md R18), and it echoes every flow
 * (R5). */
static void link_credit_back_WT(rtr_link_t *k)
{
    if (k->held)
        k->held--;
    if (k->al_id && k->pn) {
        if (k->credit_on && !k->drain_out &&
            pn_link_credit(k->pn) - pn_link_queued(k->pn) <=
                (int)k->conn->listener->max_unsettled / 2)
            link_credit_sync_later_WT(k);
        return;
    }
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

rtr_link_t *rtr_link_new_WT(rtr_conn_t *c, pn_link_t *pl, bool out)
{
    rtr_worker_t *w = c->worker;
    rtr_link_t   *k = base_calloc(1, sizeof(*k));
    k->id = atomic_fetch_add(&w->ctx->next_link_id, 1) + 1;
    k->conn = c;
    k->pn = pl;
    k->out = out;
    if (out)
        c->n_out_links++;
    else
        c->n_in_links++;
    BASE_DLIST_PUSH(c->links, k, prev, next);
    w->n_links++;
    pn_link_set_context(pl, k);
    if (out)
        rtr_zc_link_new_WT(k); /* zero-copy output: before its attach can be written */
    return k;
}

/* Take the link off the worker's list of links stopped by Q2, if it is on it. */
static void link_q2_off_WT(rtr_link_t *k)
{
    if (!k->q2)
        return;
    rtr_link_t **pp = &k->conn->worker->q2_links;
    while (*pp != k)
        pp = &(*pp)->q2_next;
    *pp = k->q2_next;
    k->q2 = false;
    k->q2_next = NULL;
    k->conn->n_q2--;
}

/* Forget every Proton object of the link, hand back what it held, and tell the core. */
void rtr_link_cleanup_WT(rtr_link_t *k)
{
    if (!k->pn)
        return;
    rtr_worker_t *w = k->conn->worker;
    if (k->lr)
        rtr_lr_end_WT(k); /* link-routed: the other end goes too */

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
        link_q2_off_WT(k);
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
        stats_obj_gauge_add(w->shard, w->ctx->stats->router_obj, CORE_ROUTER_LINKS_BLOCKED,
                            -1);
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
        /* never announced (an autoLink's link the peer refused, link_auto.c, or a link
         * route's broker end, linkroute.c): freed now, so off the pump list a flow from the
         * peer may have put it on; stats the worker made for it (the broker end's) retired
         * after its last write */
        if (!stats_obj_is_none(k->stats))
            stats_object_retire(w->ctx->stats->reg, k->stats);
        if (k->in_pump) {
            rtr_link_t **pp = &k->conn->pump;
            while (*pp != k)
                pp = &(*pp)->pump_next;
            *pp = k->pump_next;
            k->in_pump = false;
        }
        rtr_link_unlink_WT(k);
    }
}

void rtr_link_close_error_WT(rtr_link_t *k, const char *name, const char *desc)
{
    rtr_conn_t *c = k->conn;
    if (k->al_id)
        rtr_autolink_closed_WT(k, name, desc);
    rtr_pn_link_close_error_WT(k->pn, name, desc);
    rtr_link_cleanup_WT(k);
    rtr_conn_mark_dirty_WT(c);
}

void rtr_link_errant_transfer_WT(rtr_link_t *k)
{
    rtr_conn_t *c = k->conn;
    const char *desc = "a transfer on a link where the router sends";
    /* Proton took the transfer for one of the link's own deliveries, queued to go out: it
     * would hold the link's detach, and the connection's close, back for good.  The link goes
     * first (nothing more is sent on it), then the connection, at the transport */
    LOGL(k, DEBUG, "Link closed: amqp:not-allowed (a transfer from the link's receiver)");
    rtr_link_close_error_WT(k, "amqp:not-allowed", desc);
    rtr_conn_protocol_error_WT(c, "amqp:not-allowed", desc);
}

/* Credit on an incoming link.  The core's grant/drain (and the sender's flows) only mark the
 * link; link_credit_sync_WT reconciles once, right before the connection's next write, so a
 * grant and a drain within one batch net out instead of reaching the sender as a flow with
 * credit and drain set at once.
 *
 * A drain asks the sender to give back the credit it has (drain_left).  The sender gives it
 * back by moving its delivery-count on in a flow (Proton reports how much with
 * pn_link_drained on the receiving end), or uses it.  A grant while that is pending does not
 * wait for it: it turns the drain off and adds fresh credit on top, the window counting only
 * the credit the drain did not ask back - as qdrouterd does.  Waiting would wait for good on
 * a Proton 0.37 sender drained while its newest delivery was not all written: its
 * application gives the credit back (pn_link_drained) but Proton holds the answering flow
 * until the link changes again, and nothing changes it.  Whichever way the sender went, the
 * flow with drain off leaves it the fresh credit: one that answered counts from its moved
 * delivery-count, one that did not keeps what it had plus the fresh credit.  The credit a
 * sender never gives back stays in drain_left, out of the window, until it answers a later
 * drain or the credit is used. */
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
    uint32_t back = (uint32_t)pn_link_drained(pl); /* given back since the last look */
    k->drain_left = back >= k->drain_left ? 0 : k->drain_left - back;
    if ((int)k->drain_left > avail)
        k->drain_left = avail > 0 ? (uint32_t)avail : 0; /* used */
    if (k->drain_out && !k->drain_left)
        k->drain_out = false; /* answered, or the credit was used up */
    if (!k->credit_on || k->conn->worker->stopping) {
        if (!k->drain_out && avail > 0 && ((k->quirks & RTR_QUIRK_NO_DRAIN) || k->al_id)) {
            /* a peer a drain would break (RabbitMQ, docs/brokers.md R6), and every autoLink's
             * peer: a broker that never answers a drain keeps its credit (the Proton broker,
             * P5) and sends with it, presettled (P2), what the router then has no consumer
             * for.  The credit is taken back by lowering it, and transfers already sent on it
             * are still welcome */
            pn_link_flow(pl, -avail);
            k->revoked += (uint32_t)avail;
        } else if (!k->drain_out && avail > 0) {
            pn_link_drain(pl, 0); /* the sender gives back what it cannot use */
            k->drain_out = true;
            k->drain_left = (uint32_t)avail;
        }
    } else {
        k->drain_out = false; /* a pending drain is called off by the flow below */
        k->revoked = 0;
        if (pn_link_get_drain(pl))
            pn_link_set_drain(pl, false);
        /* the window: at most maxUnsettledPerLink (<= linkCapacity) deliveries unsettled */
        int want = (int)k->conn->listener->max_unsettled -
                   (pn_link_credit(pl) - (int)k->drain_left) - (int)k->held;
        if (want > 0 && k->al_id && (k->quirks & RTR_QUIRK_CREDIT_OVERRUN) &&
            want < ((int)k->conn->listener->max_unsettled + 1) / 2)
            want = 0; /* every flow may be overrun (R18): at least half a window, or none */
        if (want > 0) {
            pn_link_flow(pl, want);
            k->credit_given = true;
        }
    }
    rtr_link_credit_seen_WT(k, pn_link_credit(pl));
}

void rtr_conn_credit_sync_WT(rtr_conn_t *c)
{
    c->credit_sync = false;
    for (rtr_link_t *k = c->links; k; k = k->next)
        if (k->credit_sync)
            link_credit_sync_WT(k);
}

void rtr_on_link_credit_WT(rtr_link_t *k, bool grant)
{
    if (!k->pn || k->out)
        return;
    k->credit_on = grant;
    link_credit_sync_later_WT(k);
}

/* The sender of an incoming link sent a flow: it may have given back drained credit (Proton
 * took it off the link), which the window then counts again, and with credit on the window
 * is topped up. */
void rtr_link_flow_in_WT(rtr_link_t *k)
{
    if (k->pn && (k->drain_out || k->drain_left || k->credit_on))
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
            /* delivery-failed always, whatever the consumer said: qdrouterd 1.19 sets it on
             * every MODIFIED it passes back (router_node.c), so a producer counts the attempt
             * the same through either router, and through a mesh of both */
            pn_disposition_set_failed(local, true);
            pn_disposition_set_undeliverable(local, disp->undeliverable_here);
            break;
        default:
            break;
        }
        if (in->link && BASE_UNLIKELY(in->link->quirks))
            state = rtr_quirk_outcome(in->link->quirks, state); /* an autoLink's (R9) */
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
/* The router annotations the core's interior rules read (core.h). */
static void in_route_ra_WT(rtr_in_t *in, const rtr_msg_t *m)
{
    const codec_ra_t *ra = &m->scan.ra;
    if (ra->ingress.ptr) {
        in->dlv.ra_ingress = ra->ingress.ptr;
        in->dlv.ra_ingress_len = (uint32_t)ra->ingress.len;
    }
    if (ra->to.ptr && ra->phase > 0 && ra->phase <= 9)
        in->dlv.ra_phase = (uint8_t)(ra->phase + 1);
    if (ra->trace.ptr) {
        in->dlv.ra_trace = ra->trace.ptr;
        in->dlv.ra_trace_len = (uint32_t)ra->trace.len;
        in->dlv.ra_trace_count = ra->trace_count;
    }
}

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
    if (m->ra_in)
        in_route_ra_WT(in, m);
    if (m->scan.header.len) {
        /* the data link a copy to another router takes (core.h: +1, 0 is "absent") */
        uint8_t p = codec_header_priority(m->data, &m->scan);
        in->dlv.priority = (uint8_t)((p > 9 ? 9 : p) + 1);
    }
    in->link = k;
    BASE_DLIST_PUSH(k->ins, in, prev, next);
    stats_obj_add(c->worker->shard, c->stats, CORE_CONN_DELIVERIES_IN, 1);
    stats_obj_set(c->worker->shard, c->stats, CORE_CONN_LAST_DLV, (int64_t)time(NULL));
    in->at_core = true;
    core_action_t *a = rtr_worker_action_WT(c->worker);
    a->type = CORE_A_DELIVER;
    a->link_id = k->id;
    a->u.dlv = &in->dlv;
}

/* Vhost policy on a message (allowUserIdProxy; an anonymous sender's `to` against the
 * targets): true when refused (then discarded and rejected with amqp:unauthorized-access, as
 * qdrouterd does). */
static bool in_policy_refused_WT(rtr_link_t *k, rtr_in_t *in)
{
    rtr_msg_t  *m = in->msg;
    const char *addr = pn_terminus_get_address(pn_link_remote_target(k->pn));
    size_t         room;
    const uint8_t *props =
        m->scan.properties.len ? rtr_msg_at(m, m->scan.properties.off, &room) : NULL;
    const char *desc = rtr_policy_message_WT(k->conn, !addr || !*addr, props, &m->scan);
    if (!desc)
        return false;
    in->discard = true;
    in->discard_policy = true;
    in->discard_why = desc;
    return true;
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
    while (rtr_delivery_pending_WT(d) > 0 && rtr_link_recv_WT(k->pn, sink, sizeof(sink)) > 0)
        ;
    if (pn_delivery_partial(d))
        return;
    pn_link_advance(k->pn);
    k->receiving = NULL;
    pn_delivery_set_context(d, NULL);
    if (in->discard_policy) { /* router/policy_conn.c logged why */
        if (pn_delivery_settled(d))
            pn_delivery_settle(d);
        else
            in_reject_WT(d, "amqp:unauthorized-access", in->discard_why);
    } else if (pn_delivery_settled(d)) {
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
    /* a vhost group's once its policy admitted the connection, else the listener's */
    uint64_t max = k->conn->pconn ? k->conn->max_message_size
                                  : k->conn->listener->max_message_size;
    if (!max)
        return false;
    rtr_msg_t *m = in->msg;
    /* total is written by this worker only (the receiving one): no lock needed to read it */
    uint64_t have = (m->c.streaming ? m->total : m->len) + rtr_delivery_pending_WT(d);
    if (have <= max)
        return false;

    rtr_conn_t *c = k->conn;
    char desc[96];
    snprintf(desc, sizeof(desc), "message larger than maxMessageSize (%llu bytes)",
             (unsigned long long)max);
    LOGL(k, NOTICE, "Message refused: amqp:link:message-size-exceeded %s", desc);
    stats_counter_add(c->worker->shard, c->worker->ctx->policy_stats[RTR_POLICY_SIZE_DENIED], 1);
    if (c->pconn)
        rtr_pconn_count_size_denied(c->pconn);
    pn_delivery_set_context(d, NULL);
    if (pn_delivery_settled(d))
        pn_delivery_settle(d);
    else
        in_reject_WT(d, "amqp:link:message-size-exceeded", desc);
    in->pn = NULL; /* link cleanup frees or aborts the record */
    rtr_link_close_error_WT(k, "amqp:link:message-size-exceeded", desc);
    rtr_pn_conn_close_error_WT(c->driver.connection, "amqp:connection:forced", desc);
    return true;
}

/* A transfer beyond the credit on an autoLink's incoming link that the router gave credit
 * before, from a peer known to send them (RTR_QUIRK_CREDIT_OVERRUN).  RabbitMQ applies a
 * flow's credit from its queue's delivery-count, which runs ahead of its link's by the
 * transfers in flight, so every flow that meets a sending queue lets it send that many more
 * (docs/brokers.md R18).  Closing the link for it (as for a client) would fail the autoLink
 * and put back what the router had taken, so they are all taken; what the router holds stays
 * bounded because credit is paced on the deliveries it holds (link_credit_sync_WT: nothing
 * more while they fill the window, then at least half a window at once, so few flows meet
 * transfers in flight).  Proton's credit is raised to what arrived: otherwise its next flow
 * would carry a negative link-credit, which the broker reads as some four billion; that flow
 * says zero credit, which stops the queue.  Returns false for any other peer, or on a link
 * never given credit (a protocol error: the link is closed as any other, and its autoLink
 * attached again later). */
static bool autolink_overrun_WT(rtr_link_t *k, pn_link_t *pl)
{
    if (!k->al_id || !k->credit_given || !(k->quirks & RTR_QUIRK_CREDIT_OVERRUN))
        return false;
    int avail = pn_link_credit(pl) - pn_link_queued(pl);
    if (avail < 0) {
        if (!k->overrun_logged)
            LOGL(k, INFO, "Auto link's peer sent transfers beyond the link credit; taken");
        k->overrun_logged = true;
        pn_link_flow(pl, -avail);
    }
    return true;
}

/* Zero-copy input (docs/decisions/0009): a message that arrives in several frames, or in
 * one large one, keeps its bytes in the read buffers they arrived in, as segments of its
 * head - on a plain connection.  On a TLS connection the head is copied: measured, the
 * decryption's stores into read buffers that stay pinned (cold) cost more than decrypting
 * into one that is reused at once and copying from it.
 * Takes the next slice of d (at most max bytes: d's bytes in hand, up to the head's limit)
 * into m's segments: true when it did (after RTR_MSG_SEGS segments the head is joined and the
 * slice copied on), false when m is small and whole or d's bytes are not queued beside Proton
 * (m's head is then copied). */
static bool in_take_WT(rtr_msg_t *m, pn_link_t *pl, pn_delivery_t *d, size_t max)
{
    if (m->n_seg == 0 && m->len == 0 && max < RTR_MSG_SEG_MIN && !pn_delivery_partial(d))
        return false;
    const uint8_t *p;
    size_t         len;
    rtr_rbuf_t    *b;
    if (!rtr_link_take_WT(pl, max, &p, &len, &b))
        return false;
    if (!rtr_msg_seg_add_WT(m, p, len, b)) {
        rtr_msg_reserve(m, len > m->len ? len : m->len); /* joins them, with room to grow */
        memcpy(m->data + m->len, p, len);
        m->len += len;
        rtr_rbuf_unref(b);
    }
    return true;
}

void rtr_in_delivery_WT(rtr_link_t *k, pn_delivery_t *d)
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
        if ((pn_link_credit(pl) - pn_link_queued(pl) < -(int64_t)k->revoked ||
             k->held >= k->conn->listener->max_unsettled) &&
            !autolink_overrun_WT(k, pl)) {
            LOGL(k, NOTICE, "Link closed: amqp:link:transfer-limit-exceeded (a transfer "
                            "without credit, %u deliveries unsettled)", k->held);
            rtr_link_close_error_WT(k, "amqp:link:transfer-limit-exceeded",
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
            link_credit_sync_later_WT(k); /* the drain's credit is used up */
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
            if (pn_delivery_partial(d) || rtr_delivery_pending_WT(d) > 0)
                return;
            rtr_msg_stream_end_WT(m, false);
            pn_link_advance(pl);
            in_received_WT(k, in);
            return;
        }
        for (;;) {
            size_t pending = rtr_delivery_pending_WT(d);
            if (pending == 0 || m->len >= in->head_limit)
                break;
            if (pending > in->head_limit - m->len)
                pending = in->head_limit - m->len;
            if (m->cap == 0 && !k->conn->tls && in_take_WT(m, pl, d, pending))
                continue;
            /* A message arriving in several frames gets room for 64 KiB at once (and then
             * doubles), so that a typical multi-frame message is not copied as it grows. */
            size_t room = pending;
            if (m->cap == 0 && pn_delivery_partial(d) && room < RTR_HEAD_FIRST_PARTIAL)
                room = RTR_HEAD_FIRST_PARTIAL;
            rtr_msg_reserve(m, room);
            ssize_t n = rtr_link_recv_WT(pl, (char *)m->data + m->len, pending);
            if (n <= 0)
                break;
            m->len += (size_t)n;
        }
        const char *why = NULL;
        if (!pn_delivery_partial(d) && rtr_delivery_pending_WT(d) == 0) {
            if (rtr_msg_scan_WT(m, &why) != 0) {
                in->discard = true; /* in_discard_WT() advances and rejects */
                in->discard_why = why ? why : "malformed message";
                continue;
            }
            if (k->conn->pconn && in_policy_refused_WT(k, in))
                continue; /* in_discard_WT() rejects it */
            pn_link_advance(pl);
            in_route_WT(k, in);
            in_received_WT(k, in);
            return;
        }
        if (m->len < in->head_limit)
            return; /* more bytes to come */
        /* A large message: route it as soon as its sections before the body are here. */
        rtr_msg_join_WT(m, RTR_HEAD_FIRST_PARTIAL);
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
        if (k->conn->pconn && in_policy_refused_WT(k, in))
            continue;
        rtr_msg_stream_start_WT(m, w);
        in_route_WT(k, in);
    }
}

/* The core's answer for an incoming delivery: applied now, or once its last byte arrived. */
static void on_core_done_WT(rtr_worker_t *w, rtr_in_t *in)
{
    in->core_done = true;
    rtr_link_t *k = in->link;
    if (k && k->receiving == in) {
        if (!in->has_final) {
            /* presettled, still streaming in: its copies may still be reading, and
             * in_received_WT() finishes it.  Routed to no copy, nothing but this lets Q2
             * go, and the rest of the message is read (and freed) as it comes. */
            rtr_msg_stream_answered_WT(in->msg);
            return;
        }
        /* An outcome for a message still arriving: the core gives one once every copy is
         * done (or none was made: no receiver), so no copy needs the rest.  The sender gets
         * the outcome now, as from qdrouterd, and the rest of its frames are skipped.
         * Waiting for them could wait for good: the router drains a sender whose address
         * lost its receivers (link_credit_sync_WT), and a Proton-C sender that answers at
         * once gives back the credit its unfinished delivery needs (it sends no frame
         * without credit), so the rest never comes. */
        k->receiving = NULL;
        link_q2_off_WT(k);
        rtr_msg_stream_end_WT(in->msg, true);
        if (in->pn)
            rtr_zin_delivery_settled_WT(k->conn, in->pn);
    }
    in_finish_WT(w, in);
}

void rtr_on_settle_WT(rtr_worker_t *w, core_work_t *work)
{
    rtr_in_t *in = (rtr_in_t *)work->u.settle.dlv;
    in->final = work->u.settle.disp;
    in->has_final = true;
    on_core_done_WT(w, in);
}

void rtr_on_release_WT(rtr_worker_t *w, core_work_t *work)
{
    on_core_done_WT(w, (rtr_in_t *)work->u.release);
}

/* RTR_EXT_STREAM: a streamed message this worker sends or receives has changed. */
void rtr_on_stream_wake_WT(rtr_worker_t *w)
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
            rtr_in_delivery_WT(k, k->receiving->pn);
            rtr_conn_mark_dirty_WT(k->conn);
        }
        k = next;
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
