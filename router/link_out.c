/* router/link_out.c: a connection's outgoing links (the client's receivers) - the copies
 * the core sends (CORE_W_SEND), the message composed for each (a fresh message-annotations
 * section, every other byte as it arrived), streaming a message still arriving to its
 * receivers, the output budget a link stops on, and the receivers' dispositions back to the
 * core.  Also every link's credit as qdrouterd's figures see it (creditAvailable,
 * zeroCreditSeconds, linksBlocked), which the incoming links report through too.
 *
 * Thread suffixes: _WT = the connection's worker only (every function in this file).
 *
 * Layer: above transport.c (it hands bytes to Proton and counts them against the
 * connection's budget, which the transport restarts once the socket took them); below
 * link_in.c and conn.c, which call it.
 */
#include "router/link_out.h"

#include "core/base/list.h"
#include "core/core_metrics.h"
#include "router/peer_quirks.h"

#include <proton/condition.h>
#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/link.h>

#include <time.h>

BASE_POOL_DEFINE(rtr_out_t, 64)

char rtr_dlv_forgotten;

void rtr_link_schedule_pump_WT(rtr_link_t *k)
{
    if (k->in_pump || !k->pn)
        return;
    k->in_pump = true;
    k->pump_next = k->conn->pump;
    k->conn->pump = k;
}

static void report_WT(rtr_link_t *k, core_delivery_t *dlv, core_disposition_t *disp)
{
    core_action_t *a = rtr_worker_action_WT(k->conn->worker);
    a->type = CORE_A_DISPOSITION;
    a->link_id = k->id;
    a->u.disposition.dlv = dlv;
    a->u.disposition.disp = *disp;
}

/* Take a copy off its link and its message (a streamed message's reader list) and free it. */
static void out_free_WT(rtr_link_t *k, rtr_out_t *o)
{
    rtr_worker_t *w = k->conn->worker;
    if (o->on_wait)
        BASE_DLIST_REMOVE(w->waiters, o, wprev, wnext);
    if (o->msg->c.streaming)
        rtr_msg_reader_del(o->msg, &o->reader);
    if (k->next_send == o) {
        k->next_send = o->next;
        k->queued--;
    }
    BASE_DLIST_REMOVE_T(k->outs, k->outs_tail, o, prev, next);
    rtr_zc_blob_unref(o->zc_blob);
    if (o->zc_pre != o->zc_pre_in)
        free(o->zc_pre);
    rtr_msg_unref(o->msg);
    free(o->to_override);
    rtr_out_t_free(o);
    w->n_outs--;
}

static void out_abort_WT(rtr_link_t *k, rtr_out_t *o);

/* ---------------------------------------------------------------- zero credit
 * qdrouterd's zeroCreditSeconds and linksBlocked: a link's credit is looked at where the
 * router changes or uses it (below) and once a second (rtr_conn_sweep_WT); the time it went
 * to zero is the loop's cached clock, so the data path reads no clock for it. */

static void link_credit_back_positive_WT(rtr_link_t *k)
{
    rtr_worker_t *w = k->conn->worker;
    k->zero_since = 0;
    stats_obj_set(w->shard, k->stats, CORE_LINK_ZERO_CREDIT_SECS, 0);
    if (k->reported_blocked) {
        k->reported_blocked = false;
        stats_obj_gauge_add(w->shard, w->ctx->stats->router_obj, CORE_ROUTER_LINKS_BLOCKED,
                            -1);
    }
}

/* The router saw the link's credit: creditAvailable, and the start or end of a zero run. */
void rtr_link_credit_seen_WT(rtr_link_t *k, int credit)
{
    stats_obj_set(k->conn->worker->shard, k->stats, CORE_LINK_CREDIT, credit);
    if (credit > 0) {
        if (BASE_UNLIKELY(k->zero_since != 0))
            link_credit_back_positive_WT(k);
    } else if (!k->zero_since) {
        k->zero_since = uv_now(&k->conn->worker->loop) | 1;
    }
}

void rtr_conn_sweep_WT(rtr_worker_t *w)
{
    uint64_t now = uv_now(&w->loop);
    for (rtr_conn_t *c = w->conns; c; c = c->next) {
        for (rtr_link_t *k = c->links; k; k = k->next) {
            /* pn: not yet cleaned up, so the core has not retired its stats; none: the core
             * has not answered the attach (a link without stats of its own, a sink, counts
             * in linksBlocked all the same) */
            if (!k->pn || stats_obj_is_none(k->stats))
                continue;
            int credit = pn_link_credit(k->pn);
            rtr_link_credit_seen_WT(k, credit); /* creditAvailable fresh at least once a second */
            if (credit > 0)
                continue;
            uint64_t age = now > k->zero_since ? now - k->zero_since : 0;
            stats_obj_set(w->shard, k->stats, CORE_LINK_ZERO_CREDIT_SECS, (int64_t)(age / 1000));
            if (!k->reported_blocked && age > CORE_BLOCKED_AGE_MS) {
                k->reported_blocked = true;
                stats_obj_gauge_add(w->shard, w->ctx->stats->router_obj,
                                    CORE_ROUTER_LINKS_BLOCKED, 1);
                LOGL(k, INFO, "Link blocked with zero credit for %llu seconds",
                     (unsigned long long)(age / 1000));
            }
        }
    }
}

void rtr_on_send_WT(rtr_worker_t *w, rtr_link_t *k, core_work_t *work)
{
    rtr_msg_t *m = (rtr_msg_t *)work->u.send.content;
    core_delivery_t *dlv = work->u.send.dlv;

    if (!k->pn) {
        if (dlv) {
            core_disposition_t d = {.outcome = CORE_OUTCOME_RELEASED};
            report_WT(k, dlv, &d);
        }
        free(work->u.send.to_override);
        if (m->c.streaming)
            rtr_msg_reader_del(m, NULL);
        rtr_msg_unref(m);
        return;
    }
    if (!dlv && k->queued >= k->conn->listener->link_capacity)
        rtr_link_pump_WT(k); /* send what the receiver's credit allows before judging */
    if (!dlv && k->queued >= k->conn->listener->link_capacity) {
        /* presettled and the receiver is not keeping up: drop, as qdrouterd does */
        stats_obj_add(w->shard, k->stats, CORE_LINK_DROPPED_PRESETTLED, 1);
        stats_obj_add(w->shard, w->ctx->stats->router_obj, CORE_ROUTER_DROPPED_PRESETTLED, 1);
        free(work->u.send.to_override);
        if (m->c.streaming)
            rtr_msg_reader_del(m, NULL);
        rtr_msg_unref(m);
        return;
    }
    rtr_out_t *o = rtr_out_t_new();
    w->n_outs++;
    o->in = dlv;
    o->msg = m;
    o->link = k;
    o->to_override = work->u.send.to_override;
    o->to_phase = work->u.send.to_phase;
    o->to_router = work->u.send.to_router;
    o->reader.worker = w;
    if (m->c.streaming)
        rtr_msg_reader_add(m, &o->reader);
    BASE_DLIST_APPEND(k->outs, k->outs_tail, o, prev, next);
    if (!k->next_send)
        k->next_send = o;
    k->queued++;
    rtr_link_schedule_pump_WT(k);
    rtr_conn_mark_dirty_WT(k->conn);
}

/* Hand n bytes of an outgoing copy to Proton, counted against the connection's budget. */
static void link_send_WT(rtr_link_t *k, const void *p, size_t n)
{
    pn_link_send(k->pn, p, n);
    k->conn->out_queued += n;
}

/* The connection's output budget: once RTR_CONN_OUT_MAX bytes of copies wait in Proton (all
 * sessions together), its links stop (`blocked`) until the socket took what Proton framed;
 * rtr_conn_process_WT() resumes them.  Returns true when k must stop. */
static bool link_out_full_WT(rtr_link_t *k)
{
    if (k->conn->out_queued < RTR_CONN_OUT_MAX)
        return false;
    if (!k->blocked) {
        k->blocked = true;
        k->conn->n_blocked++;
    }
    return true;
}

/* A piece of copy o's prefix: to Proton (the old path), or kept as a piece for the shares
 * of a zero-copy link (router/zc_out.h). */
static void prefix_piece_WT(rtr_link_t *k, rtr_out_t *o, const uint8_t *p, size_t n)
{
    if (!k->zc_on) {
        link_send_WT(k, p, n);
        return;
    }
    if (o->zc_pre_cap == 0) {
        o->zc_pre = o->zc_pre_in;
        o->zc_pre_cap = RTR_ZC_PRE_IN;
    } else if (o->zc_pre_n == o->zc_pre_cap) {
        rtr_zc_piece_t *more = base_malloc(2 * o->zc_pre_cap * sizeof(*more));
        memcpy(more, o->zc_pre, o->zc_pre_n * sizeof(*more));
        if (o->zc_pre != o->zc_pre_in)
            free(o->zc_pre);
        o->zc_pre = more;
        o->zc_pre_cap *= 2;
    }
    o->zc_pre[o->zc_pre_n++] = (rtr_zc_piece_t){.p = p, .len = n};
}

/* Hand p[0, n) of an outgoing copy's prefix on less the bytes in cut[0, cut_len) (the
 * message's delivery annotations toward a peer they would break, docs/brokers.md R13). */
static void link_send_cut_WT(rtr_link_t *k, rtr_out_t *o, const uint8_t *p, size_t n,
                             const uint8_t *cut, size_t cut_len)
{
    codec_bytes_t part[2];
    int           np = rtr_quirk_cut(p, n, cut, cut_len, part);
    for (int i = 0; i < np; i++)
        prefix_piece_WT(k, o, part[i].ptr, part[i].len);
}

static void out_send_prefix_WT(rtr_link_t *k, rtr_out_t *o)
{
    rtr_msg_t *m = o->msg;
    const codec_scan_t *scan = &m->scan;
    codec_ra_out_t ra = {0};
    const uint8_t *cut = NULL; /* the delivery annotations, when k's peer must not get them */
    size_t cut_len = 0;
    if (BASE_UNLIKELY(k->quirks & RTR_QUIRK_NO_DA) && scan->delivery_annotations.len) {
        cut = m->data + scan->delivery_annotations.off;
        cut_len = scan->delivery_annotations.len;
    }

    if (!k->conn->strip_out) {
        const rtr_ctx_t *ctx = k->conn->worker->ctx;
        ra.write = true;
        ra.ingress.ptr = (const uint8_t *)ctx->node_id;
        ra.ingress.len = ctx->node_id_len;
        if (m->ra_in) {
            if (scan->ra.ingress.ptr)
                ra.ingress = scan->ra.ingress;
            if (scan->ra.trace.ptr) {
                ra.trace = scan->ra.trace;
                ra.trace_count = scan->ra.trace_count;
            }
            ra.to = scan->ra.to;
            ra.phase = scan->ra.phase;
        }
        if (BASE_UNLIKELY(o->to_router)) {
            /* qdrouterd 1.19 carries the mark on, and marks a message it routes before it
             * is whole */
            if (m->ra_in)
                ra.stream = scan->ra.stream;
            if (m->c.streaming)
                ra.stream = 1;
        }
        ra.trace_append.ptr = (const uint8_t *)ctx->node_id;
        ra.trace_append.len = ctx->node_id_len;
        if (BASE_UNLIKELY(ctx->cfg->router.edge)) {
            /* an edge writes no ingress and no trace: its interior is the ingress */
            ra.ingress.ptr = NULL;
            ra.trace.ptr = NULL;
            ra.trace_append.ptr = NULL;
        }
        if (BASE_UNLIKELY(o->to_override != NULL)) {
            /* to another router, from a targeted link: its address routes it there */
            ra.to.ptr = (const uint8_t *)o->to_override;
            ra.to.len = strlen(o->to_override);
            ra.phase = o->to_phase;
        }
    }
    if (!ra.write && scan->ma_router_count == 0) {
        for (size_t off = 0, room; off < scan->body_off; off += room) {
            const uint8_t *p = rtr_msg_at(m, off, &room);
            if (room > scan->body_off - off)
                room = scan->body_off - off;
            link_send_cut_WT(k, o, p, room, cut, cut_len);
        }
        return;
    }
    codec_bytes_t      one;
    const codec_segs_t segs = rtr_msg_segs(m, &one);
    uint8_t scratch_stack[1024];
    codec_iov_t iov_stack[16];
    size_t scratch_len = 0;
    int n_iov = 0;
    codec_compose_need_segs(&segs, scan, &ra, &scratch_len, &n_iov);
    uint8_t *scratch = scratch_len <= sizeof(scratch_stack) ? scratch_stack
                                                            : base_malloc(scratch_len);
    if (k->zc_on) {
        /* the composed bytes live until the last share pointing into them is written */
        if (scratch != scratch_stack)
            free(scratch);
        o->zc_blob = rtr_zc_blob_new(scratch_len);
        scratch = o->zc_blob->data;
    }
    codec_iov_t *iov = n_iov <= (int)BASE_ARRAY_LEN(iov_stack)
                           ? iov_stack
                           : base_malloc((size_t)n_iov * sizeof(*iov));
    int n = codec_compose_prefix_segs(&segs, scan, &ra, scratch,
                                 k->zc_on || scratch_len > sizeof(scratch_stack)
                                     ? scratch_len
                                     : sizeof(scratch_stack),
                                 iov, n_iov > 16 ? n_iov : 16);
    BASE_BUG_ON(n < 0);
    for (int i = 0; i < n; i++)
        if (iov[i].len)
            link_send_cut_WT(k, o, iov[i].base, iov[i].len, cut, cut_len);
    if (scratch != scratch_stack && !k->zc_on)
        free(scratch);
    if (iov != iov_stack)
        free(iov);
}

/* Send what has arrived of a streamed message.  Returns 1 when every byte was sent, 0 when
 * the sender aborted (the copy is aborted and freed), -1 when it must wait for more bytes
 * (o is on the worker's waiters) or for room in the connection's output budget. */
static int out_stream_WT(rtr_link_t *k, rtr_out_t *o)
{
    rtr_msg_t *m = o->msg;
    for (;;) {
        if (link_out_full_WT(k))
            return -1;
        bool complete, aborted;
        codec_bytes_t b = rtr_msg_reader_peek(m, &o->reader, RTR_SEND_CHUNK, &complete,
                                              &aborted, NULL);
        if (aborted) {
            out_abort_WT(k, o);
            return 0;
        }
        if (b.len) {
            link_send_WT(k, b.ptr, b.len);
            rtr_msg_reader_advance(m, &o->reader, b.len);
            continue;
        }
        if (complete)
            return 1;
        if (rtr_msg_reader_wait(m, &o->reader)) {
            rtr_worker_t *w = k->conn->worker;
            if (!o->on_wait) {
                o->on_wait = true;
                BASE_DLIST_PUSH(w->waiters, o, wprev, wnext);
            }
            return -1;
        }
    }
}

/* ---------------------------------------------------------------- zero-copy output
 * A link in placeholder mode (router/zc_out.h) gives Proton one placeholder byte per frame,
 * the next only once Proton framed the previous one (pn_delivery_pending back at 0), and
 * pn_link_advance with the last; each frame's share of the copy goes to the link's FIFO,
 * which the writer splices in place of the placeholder.  A frame takes at most
 * rtr_zc_share_max_WT() bytes: the peer's max-frame-size less the header and a bound on
 * the performative, so Proton never splits a placeholder frame and the last placeholder is
 * known when it is given. */

/* A streamed copy was aborted by its sender: abort the delivery and free the copy. */
static void out_abort_WT(rtr_link_t *k, rtr_out_t *o)
{
    if (o->in) {
        core_disposition_t d = {.outcome = CORE_OUTCOME_MODIFIED, .delivery_failed = true};
        report_WT(k, o->in, &d);
    }
    /* a placeholder Proton has not framed is dropped with the delivery's bytes: its share
     * is never spliced */
    if (k->zc_on && k->zc && pn_delivery_pending(o->pn) > 0)
        rtr_zc_drop_tail_WT(k->conn, k->zc);
    pn_delivery_set_context(o->pn, RTR_DLV_FORGOTTEN);
    pn_delivery_abort(o->pn);
    o->pn = NULL;
    out_free_WT(k, o);
}

/* Give Proton the next placeholder of copy o, its share queued.  Returns 1: it was the last
 * (not yet advanced), 2: more frames follow, 0: the sender aborted (o is freed), -1: waiting
 * for the message's bytes (o is on the worker's waiters). */
static int zc_give_WT(rtr_link_t *k, rtr_out_t *o)
{
    rtr_conn_t    *c = k->conn;
    rtr_msg_t     *m = o->msg;
    size_t         max = rtr_zc_share_max_WT(c);
    rtr_zc_piece_t pc[RTR_ZC_PIECES_MAX];
    uint32_t       n = 0;
    size_t         len = 0;
    rtr_buf_t     *bufs[RTR_ZC_BUFS_MAX]; /* chain buffers the pieces point into, held */
    uint32_t       n_bufs = 0;
    bool           last = false;
    while (len < max && o->zc_pre_i < o->zc_pre_n && n < RTR_ZC_PIECES_MAX) {
        const rtr_zc_piece_t *p = &o->zc_pre[o->zc_pre_i];
        size_t                t = p->len - o->zc_pre_off;
        if (t > max - len)
            t = max - len;
        pc[n++] = (rtr_zc_piece_t){.p = p->p + o->zc_pre_off, .len = t};
        len += t;
        o->zc_pre_off += t;
        if (o->zc_pre_off == p->len) {
            o->zc_pre_i++;
            o->zc_pre_off = 0;
        }
    }
    bool pre_done = o->zc_pre_i == o->zc_pre_n;
    if (pre_done && !m->c.streaming) {
        size_t body = m->len - m->scan.body_off;
        while (o->sent < body && len < max && n < RTR_ZC_PIECES_MAX) {
            size_t         room;
            const uint8_t *b = rtr_msg_at(m, m->scan.body_off + o->sent, &room);
            size_t         t = body - o->sent;
            if (t > room)
                t = room;
            if (t > max - len)
                t = max - len;
            pc[n++] = (rtr_zc_piece_t){.p = b, .len = t};
            len += t;
            o->sent += t;
        }
        last = o->sent == body;
    } else if (pre_done) {
        while (len < max && n < RTR_ZC_PIECES_MAX && n_bufs < RTR_ZC_BUFS_MAX) {
            bool          complete, aborted;
            rtr_buf_t    *buf;
            codec_bytes_t b = rtr_msg_reader_peek(m, &o->reader, max - len, &complete,
                                                  &aborted, &buf);
            if (aborted) {
                for (uint32_t i = 0; i < n_bufs; i++)
                    rtr_buf_unref(bufs[i]);
                if (buf)
                    rtr_buf_unref(buf);
                out_abort_WT(k, o);
                return 0;
            }
            if (b.len) {
                /* a chain buffer is freed once every reader passed it, which this one has
                 * once it advances: the share holds a reference on it instead (one per
                 * buffer) until the socket took its bytes */
                if (buf && n_bufs && bufs[n_bufs - 1] == buf)
                    rtr_buf_unref(buf);
                else if (buf)
                    bufs[n_bufs++] = buf;
                if (n && pc[n - 1].p + pc[n - 1].len == b.ptr)
                    pc[n - 1].len += b.len;
                else
                    pc[n++] = (rtr_zc_piece_t){.p = b.ptr, .len = b.len};
                len += b.len;
                rtr_msg_reader_advance(m, &o->reader, b.len);
                continue;
            }
            if (buf)
                rtr_buf_unref(buf);
            if (complete) {
                last = true;
                break;
            }
            if (len)
                break; /* this frame takes what is there; the rest goes in the next */
            if (rtr_msg_reader_wait(m, &o->reader)) {
                rtr_worker_t *w = c->worker;
                if (!o->on_wait) {
                    o->on_wait = true;
                    BASE_DLIST_PUSH(w->waiters, o, wprev, wnext);
                }
                return -1;
            }
        }
    }
    rtr_zc_share_t *s = base_malloc(sizeof(*s) + n * sizeof(s->pieces[0]));
    core_content_ref(&m->c, 1);
    s->msg = m;
    s->blob = o->zc_blob;
    if (s->blob)
        s->blob->refs++;
    s->n_bufs = n_bufs;
    memcpy(s->bufs, bufs, n_bufs * sizeof(bufs[0]));
    s->len = len;
    s->n = n;
    memcpy(s->pieces, pc, n * sizeof(pc[0]));
    rtr_zc_push_WT(c, k->zc, s);
    pn_link_send(k->pn, "", 1); /* the placeholder: one byte, one frame */
    c->out_queued += len;
    return last ? 1 : 2;
}

/* Send copy o on a zero-copy link: its placeholders, one frame at a time.  Returns 1 when
 * the last was given (the caller advances), 0 when the sender aborted (o is freed), -1 when
 * it waits: for Proton to frame the previous placeholder (the writer tops it up, zc_out.c),
 * for the output budget or for the message's bytes. */
static int zc_send_WT(rtr_link_t *k, rtr_out_t *o)
{
    for (;;) {
        if (pn_delivery_pending(o->pn) > 0) {
            k->zc->want = true;
            return -1;
        }
        if (link_out_full_WT(k))
            return -1;
        int r = zc_give_WT(k, o);
        if (r != 2)
            return r;
    }
}

/* Push queued copies into Proton while the receiver has credit and the session has room. */
void rtr_link_pump_WT(rtr_link_t *k)
{
    pn_link_t *pl = k->pn;
    if (!pl || !k->open)
        return;
    if (!k->zc_decided) {
        /* zero-copy output or the old path, chosen once, at the first pump: placeholder
         * mode on plain connections (rtr_zc_link_active_WT); TLS connections, link-routed
         * links and links sharing a name keep the old path, as do the other pn_link_send
         * users (linkroute.c, edgeconn.c, irconn.c, edge_lookup.c), whose frames pass the
         * writer unchanged */
        k->zc_decided = true;
        k->zc_on = rtr_zc_link_active_WT(k);
    }

    while (k->next_send) {
        rtr_out_t *o = k->next_send;
        rtr_msg_t *m = o->msg;
        if (link_out_full_WT(k))
            return; /* rtr_conn_process_WT() resumes it once the socket took Proton's bytes */
        if (!o->pn) {
            if (pn_link_credit(pl) <= 0)
                break;
            uint64_t tag = ++k->tag;
            o->pn = pn_delivery(pl, pn_dtag((const char *)&tag, sizeof(tag)));
            pn_delivery_set_context(o->pn, o);
        }
        if (!o->prefix_done) {
            out_send_prefix_WT(k, o);
            o->prefix_done = true;
        }
        if (k->zc_on) {
            int r = zc_send_WT(k, o);
            if (r < 0)
                return; /* waiting for framing, the output budget or the message's bytes */
            if (r == 0)
                continue; /* aborted: o is gone */
            goto sent;
        }
        if (m->c.streaming) {
            int r = out_stream_WT(k, o);
            if (r < 0)
                return; /* waiting for bytes or for the output budget */
            if (r == 0)
                continue; /* aborted: o is gone */
            goto sent;
        }
        size_t body = m->len - m->scan.body_off;
        while (o->sent < body) {
            if (link_out_full_WT(k))
                return;
            size_t         room;
            const uint8_t *b = rtr_msg_at(m, m->scan.body_off + o->sent, &room);
            size_t         n = body - o->sent;
            if (n > room)
                n = room;
            if (n > RTR_SEND_CHUNK)
                n = RTR_SEND_CHUNK;
            link_send_WT(k, b, n);
            o->sent += n;
        }
    sent:
        pn_link_advance(pl);
        stats_obj_add(k->conn->worker->shard, k->conn->stats, CORE_CONN_DELIVERIES_OUT, 1);
        stats_obj_set(k->conn->worker->shard, k->conn->stats, CORE_CONN_LAST_DLV,
                      (int64_t)time(NULL));
        k->next_send = o->next;
        k->queued--;
        o->done_sending = true;
        if (!o->in) {
            pn_delivery_set_context(o->pn, RTR_DLV_FORGOTTEN);
            pn_delivery_settle(o->pn);
            o->pn = NULL;
            out_free_WT(k, o);
        }
    }
    if (!k->next_send && pn_link_get_drain(pl) && pn_link_credit(pl) > 0)
        pn_link_drained(pl);
    rtr_worker_t *w = k->conn->worker;
    stats_obj_set(w->shard, k->stats, CORE_LINK_UNDELIVERED, k->queued);
    rtr_link_credit_seen_WT(k, pn_link_credit(pl));
}

/* The receiver settled (or updated) an outgoing copy. */
bool rtr_out_update_WT(rtr_link_t *k, pn_delivery_t *d)
{
    rtr_out_t *o = pn_delivery_get_context(d);
    if (!o)
        return false; /* not one the router made: the receiver sent a transfer */
    if (o == RTR_DLV_FORGOTTEN || !pn_delivery_settled(d))
        return true;
    core_disposition_t disp = {0};
    pn_disposition_t *remote = pn_delivery_remote(d);
    switch (pn_delivery_remote_state(d)) {
    case PN_REJECTED: {
        disp.outcome = CORE_OUTCOME_REJECTED;
        pn_condition_t *cond = pn_disposition_condition(remote);
        if (cond && pn_condition_is_set(cond)) {
            disp.cond_name = base_strdup(pn_condition_get_name(cond));
            const char *desc = pn_condition_get_description(cond);
            if (desc)
                disp.cond_desc = base_strdup(desc);
        }
        break;
    }
    case PN_RELEASED:
        disp.outcome = CORE_OUTCOME_RELEASED;
        break;
    case PN_MODIFIED:
        disp.outcome = CORE_OUTCOME_MODIFIED;
        disp.delivery_failed = pn_disposition_is_failed(remote);
        disp.undeliverable_here = pn_disposition_is_undeliverable(remote);
        break;
    default: /* accepted, or settled with no outcome: the receiver consumed it */
        disp.outcome = CORE_OUTCOME_ACCEPTED;
        break;
    }
    if (o->in)
        report_WT(k, o->in, &disp);
    pn_delivery_set_context(d, RTR_DLV_FORGOTTEN);
    pn_delivery_settle(d);
    o->pn = NULL;
    out_free_WT(k, o); /* settled before we finished sending it: that stops there */
    return true;
}

/* Forget the link's copies: each is reported to the core (never started: RELEASED; sent but
 * not settled: MODIFIED) and freed. */
void rtr_link_out_cleanup_WT(rtr_link_t *k)
{
    rtr_out_t *o = k->outs;
    while (o) {
        rtr_out_t *next = o->next;
        if (o->in) {
            /* never started: RELEASED; sent (even in part) but not settled: MODIFIED */
            core_disposition_t d = {.outcome = CORE_OUTCOME_RELEASED};
            if (o->pn) {
                d.outcome = CORE_OUTCOME_MODIFIED;
                d.delivery_failed = true;
            }
            report_WT(k, o->in, &d);
        }
        if (o->pn)
            pn_delivery_set_context(o->pn, RTR_DLV_FORGOTTEN);
        out_free_WT(k, o);
        o = next;
    }
    k->next_send = NULL;
    k->queued = 0;
    rtr_zc_link_gone_WT(k); /* its shares stay until its frames are written or dropped */
    if (k->blocked) {
        k->blocked = false;
        k->conn->n_blocked--;
    }
}
