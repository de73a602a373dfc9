/* router/zin.c: the zero-copy input (see zin.h) - read buffers, the guard's split-mode
 * callbacks, the per-link payload queues and the pn_link_recv-like readers.
 *
 * Thread suffixes: _WT = the connection's worker (all of it).  Proton objects are touched
 * only from the worker that owns their connection.
 */
#include "router/zin.h"

#include "router/transport.h"

#include "codec/codec.h"

#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/link.h>
#include <proton/object.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

BASE_POOL_DECLARE(rtr_zent_t);
BASE_POOL_DEFINE(rtr_zent_t, 256)

PN_HANDLE(ZIN_LINK) /* pn_link_attachments: its rtr_zq_t */
PN_HANDLE(ZIN_DLV)  /* pn_delivery_attachments: its number in its link's queue */

/* ---- the worker's spare memory ----
 *
 * An idle connection holds no read buffer and no staging room (router/DESIGN.md "What one
 * connection can hold"): read buffers come from the byte-buffer pools (core/base/pool.h),
 * taken for a read and given back once nothing points into them - by whichever thread drops
 * the last reference: the connection's worker, or (for a message's segments) another worker
 * or the management agent's thread; the pools move them back between threads in batches.
 * Each worker keeps one staging buffer for all its connections (the thread's own, freed when
 * it exits). */
typedef struct spare {
    uint8_t *stage;     /* staging room lent to the connection being read */
    size_t   stage_cap; /* its size */
} spare_t;

static pthread_key_t  spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;

static void spare_free(void *arg)
{
    spare_t *sp = arg;
    free(sp->stage);
    free(sp);
}

static void spare_key_make(void)
{
    pthread_key_create(&spare_key, spare_free);
}

static spare_t *spare(void)
{
    pthread_once(&spare_once, spare_key_make);
    spare_t *sp = pthread_getspecific(spare_key);
    if (!sp) {
        sp = base_calloc(1, sizeof(*sp));
        pthread_setspecific(spare_key, sp);
    }
    return sp;
}

/* ---- read buffers ---- */

/* A buffer of cap bytes (RTR_ZIN_READ: its record included, so that it takes a 64 KiB pool
 * buffer whole, and cap is a little less). */
static rtr_rbuf_t *rbuf_new(uint32_t cap)
{
    size_t      size;
    rtr_rbuf_t *b = base_buf_alloc(cap == RTR_ZIN_READ ? cap : sizeof(*b) + cap, &size);
    atomic_init(&b->refs, 1);
    b->local = 1;
    b->queued = 0;
    b->size = size;
    b->cap = (uint32_t)(size - sizeof(*b));
    b->len = 0;
    return b;
}

/* References: the connection's worker counts its own (the current buffer, queued slices) in
 * `local`, without atomics, and they hold one of `refs`, which messages' segments share
 * across threads; whoever drops the last of `refs` frees the buffer. */
static void rbuf_unref_shared(rtr_rbuf_t *b)
{
    if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
        base_buf_free(b, b->size);
}

static void rbuf_unref(rtr_rbuf_t *b)
{
    if (b && --b->local == 0) {
        BASE_BUG_ON(b->queued); /* queued slices hold local references */
        rbuf_unref_shared(b);
    }
}

/* Nothing but the connection's current buffer points into b. */
static bool rbuf_alone(rtr_rbuf_t *b)
{
    return b->local == 1 && atomic_load_explicit(&b->refs, memory_order_acquire) == 1;
}

/* ---- queues ---- */

static void zent_free(rtr_zin_t *z, rtr_zq_t *q, rtr_zent_t *e)
{
    q->bytes -= e->len;
    z->queued -= e->len + RTR_ZENT_COST;
    e->buf->queued -= e->len;
    rbuf_unref(e->buf);
    rtr_zent_t_free(e);
}

/* Drop the head slice. */
static void zq_pop(rtr_zq_t *q)
{
    rtr_zent_t *e = q->head;
    q->head = e->next;
    if (!q->head)
        q->tail = NULL;
    zent_free(q->zin, q, e);
}

static void zq_clear(rtr_zq_t *q)
{
    while (q->head)
        zq_pop(q);
}

/* Drop the slices of deliveries numbered before seq. */
static void zq_drop_before(rtr_zq_t *q, uint64_t seq)
{
    while (q->head && q->head->seq < seq)
        zq_pop(q);
}

/* Slices that stay queued after a pass (a link stopped by Q2, or waiting for its pair) must
 * not pin read buffers much larger than themselves: those in a buffer whose queued slices
 * (of every queue) use less than a quarter of it get buffers of their own, so the memory
 * queued is at most four times the payload bytes plus RTR_ZENT_COST per slice, both counted
 * in the input budget.  A buffer the slices fill together (a streamed message's frames, each
 * a quarter of a read or less) stays as it is. */
static void zq_compact(rtr_zq_t *q)
{
    for (rtr_zent_t *e = q->head; e; e = e->next) {
        if ((uint64_t)e->buf->queued * 4 >= e->buf->cap)
            continue;
        rtr_rbuf_t *b = rbuf_new(e->len);
        memcpy(b->data, e->buf->data + e->off, e->len);
        b->len = e->len;
        b->queued = e->len;
        e->buf->queued -= e->len;
        rbuf_unref(e->buf);
        e->buf = b;
        e->off = 0;
    }
}

/* With `live`, q's link (if Proton has not finalized it) forgets q.  Without, Proton's objects
 * are going (rtr_zin_fini_WT): its links may be freed already, their PN_LINK_FINAL events
 * drained undispatched (Proton releases its collector once the connection's transport is
 * done), so q->pl is not touched. */
static void zq_free(rtr_zq_t *q, bool live)
{
    zq_clear(q);
    if (live && q->pl) /* a link Proton has not finalized: it must not find the freed queue */
        pn_record_set(pn_link_attachments(q->pl), ZIN_LINK, NULL);
    free(q->name);
    free(q);
}

/* q's (channel, handle) is unbound (its binding removed): no more payloads come for it. */
static void zq_unbind(rtr_zin_t *z, rtr_zq_t *q)
{
    q->bound = false;
    if (z->xfer == q)
        z->xfer = NULL;
    z->sweep = true;
}

/* ---- the guard's callbacks (split mode) ---- */

static void sink_proton(void *ctx, const uint8_t *p, size_t n)
{
    rtr_zin_t *z = &((rtr_conn_t *)ctx)->zin;
    if (z->stage_len + n > z->stage_cap) {
        size_t cap = z->stage_cap ? z->stage_cap : 4096;
        while (cap < z->stage_len + n)
            cap *= 2;
        z->stage = base_realloc(z->stage, cap);
        z->stage_cap = cap;
    }
    memcpy(z->stage + z->stage_len, p, n);
    z->stage_len += n;
}

/* The transfer frame held for its payload goes to Proton (after the frames before it). */
static void held_release(void *ctx)
{
    rtr_zin_t *z = &((rtr_conn_t *)ctx)->zin;
    sink_proton(ctx, z->held ? z->held : z->held_in, z->held_len);
    z->held_len = 0;
    BASE_FREE(z->held); /* a long performative's room */
}

static int sink_attach(void *ctx, uint16_t channel, uint32_t handle, bool role,
                       const uint8_t *name, size_t len, const char **why)
{
    rtr_zin_t *z = &((rtr_conn_t *)ctx)->zin;
    if (role)
        return 0; /* the peer receives: no payload comes on it */
    if (rtr_hmap_get(&z->links, channel, handle)) {
        *why = "attach: the handle is in use";
        return -1;
    }
    bool whole = false;
    for (rtr_zq_t *q = z->queues; q; q = q->next) {
        if (!q->bound)
            continue;
        if (q->name_len != len || memcmp(q->name, name, len) != 0)
            continue;
        /* a second sender of a name still attached (AMQP forbids it, but two clients'
         * links routed to one container may meet so): the new one keeps Proton's own path,
         * and so does the first unless a Proton link claimed its queue already (only the
         * name tells them apart) */
        whole = true;
        if (!q->claimed && !q->whole) {
            if (q->head) {
                *why = "attach: a sender of that name is attached on this connection";
                return -1;
            }
            q->whole = true;
        }
    }
    rtr_zq_t *q = base_calloc(1, sizeof(*q));
    q->zin = z;
    q->name = base_strndup((const char *)name, len);
    q->name_len = len;
    q->bound = true;
    rtr_hmap_put(&z->links, channel, handle, q);
    q->whole = whole;
    if (z->queues_tail)
        z->queues_tail->next = q;
    else
        z->queues = q;
    z->queues_tail = q;
    return 0;
}

static void sink_detach(void *ctx, uint16_t channel, uint32_t handle)
{
    rtr_zin_t *z = &((rtr_conn_t *)ctx)->zin;
    rtr_zq_t  *q = rtr_hmap_del(&z->links, channel, handle);
    if (q)
        zq_unbind(z, q);
}

static void sink_end(void *ctx, uint16_t channel)
{
    rtr_zin_t *z = &((rtr_conn_t *)ctx)->zin;
    rtr_zq_t  *q;
    while ((q = rtr_hmap_pop(&z->links, channel == 0xffff ? RTR_HMAP_ANY : channel)))
        zq_unbind(z, q);
}

static bool sink_transfer(void *ctx, uint16_t channel, uint32_t handle, bool id_present,
                          uint32_t id, bool more, bool aborted, uint32_t len, const uint8_t hdr[8],
                          const uint8_t *perf, uint32_t perf_len)
{
    rtr_zin_t *z = &((rtr_conn_t *)ctx)->zin;
    rtr_zq_t  *q = rtr_hmap_get(&z->links, channel, handle);
    if (q && q->whole) {
        z->xfer = NULL;
        return true; /* Proton's own path (sink_attach) */
    }
    /* the frame waits for its payload (frame.h): then it goes to Proton */
    uint8_t *h = z->held_in;
    if (perf_len + 8 > sizeof(z->held_in))
        h = z->held = base_malloc(perf_len + 8);
    memcpy(h, hdr, 8);
    memcpy(h + 8, perf, perf_len);
    z->held_len = perf_len + 8;
    z->xfer_left = len;
    if (len == 0)
        held_release(ctx);
    z->xfer = q;
    if (!q)
        return false; /* no such link: Proton ends the connection; the payload is dropped */
    /* the delivery it belongs to, as pn_do_transfer decides: a frame continues the pending
     * multi-frame delivery (or its rest that Proton skips) unless it names another id */
    if (!q->more_pending || (id_present && id != q->more_id)) {
        q->enq_seq++;
        q->more_pending = false;
    }
    if (more && !q->more_pending) {
        q->more_pending = true;
        q->more_id = id;
    }
    if (aborted)
        q->more_pending = false;
    z->sweep = true;
    return false;
}

static void sink_payload(void *ctx, const uint8_t *p, size_t n)
{
    rtr_conn_t *c = ctx;
    rtr_zin_t  *z = &c->zin;
    rtr_zq_t   *q = z->xfer;
    z->xfer_left -= (uint32_t)n;
    if (z->xfer_left == 0)
        held_release(ctx); /* the payload is all here (queued below, before Proton runs) */
    if (!q || n == 0)
        return;
    rtr_rbuf_t *b = z->rb;
    uint32_t    off = (uint32_t)(p - b->data);
    rtr_zent_t *t = q->tail;
    if (t && t->buf == b && t->seq == q->enq_seq && t->off + t->len == off) {
        t->len += (uint32_t)n; /* the same frame's payload, read in two pieces */
        b->queued += (uint32_t)n;
    } else {
        rtr_zent_t *e = rtr_zent_t_new();
        e->next = NULL;
        e->buf = b;
        b->local++;
        e->off = off;
        e->len = (uint32_t)n;
        e->seq = q->enq_seq;
        b->queued += (uint32_t)n;
        z->queued += RTR_ZENT_COST;
        if (t)
            t->next = e;
        else
            q->head = e;
        q->tail = e;
    }
    q->bytes += n;
    z->queued += n;
}

/* ---- the connection's side ---- */

void rtr_zin_init_WT(rtr_conn_t *c)
{
    rtr_zin_t *z = &c->zin;
    z->sink = (codec_guard_sink_t){.ctx = c,
                                   .proton = sink_proton,
                                   .attach = sink_attach,
                                   .detach = sink_detach,
                                   .end = sink_end,
                                   .transfer = sink_transfer,
                                   .payload = sink_payload};
    codec_guard_set_sink(&c->guard, &z->sink);
}

void rtr_zin_fini_WT(rtr_conn_t *c)
{
    rtr_zin_t *z = &c->zin;
    while (z->queues) {
        rtr_zq_t *q = z->queues;
        z->queues = q->next;
        zq_free(q, false);
    }
    rtr_hmap_fini(&z->links);
    z->queues_tail = z->xfer = NULL;
    rbuf_unref(z->rb);
    z->rb = NULL;
    if (z->stage_own)
        free(z->stage);
    z->stage = NULL;
    z->stage_len = z->stage_off = z->stage_cap = 0;
    z->stage_own = false;
    BASE_FREE(z->held);
    z->held_len = 0;
}

void rtr_zin_alloc_WT(rtr_conn_t *c, char **base, size_t *len)
{
    rtr_zin_t *z = &c->zin;
    if (rtr_zin_stalled(z)) { /* Proton has not taken the last read yet */
        *base = NULL;
        *len = 0;
        return;
    }
    uint32_t want = RTR_ZIN_READ;
    uint32_t left = codec_guard_payload_left(&c->guard);
    if (left > want) /* a large frame's rest: one buffer for it, if not too large */
        want = left + 4096 < RTR_ZIN_READ_MAX ? left + 4096 : RTR_ZIN_READ_MAX;
    rtr_rbuf_t *b = z->rb;
    uint32_t    room = b ? b->cap - b->len : 0;
    if (b && rbuf_alone(b)) {
        /* nothing points into it (a message on another thread may just have let it go): start
         * it again */
        b->len = 0;
        room = b->cap;
    }
    if (!b || room < 2048 || (room < want / 2 && left > room)) {
        rbuf_unref(b);
        z->rb = b = rbuf_new(want);
        room = b->cap;
    }
    *base = (char *)b->data + b->len;
    *len = room;
}

bool rtr_zin_push_WT(rtr_conn_t *c)
{
    rtr_zin_t *z = &c->zin;
    while (z->stage_off < z->stage_len) {
        if (pn_connection_driver_read_closed(&c->driver)) {
            z->stage_off = z->stage_len; /* Proton takes no more input: nothing to give */
            break;
        }
        pn_rwbytes_t rb = pn_connection_driver_read_buffer(&c->driver);
        if (rb.size == 0)
            return false;
        size_t k = z->stage_len - z->stage_off;
        if (k > rb.size)
            k = rb.size;
        memcpy(rb.start, z->stage + z->stage_off, k);
        z->stage_off += k;
        pn_connection_driver_read_done(&c->driver, k);
    }
    z->stage_off = z->stage_len = 0;
    if (z->stage_own) { /* the rest of a stalled read: given back */
        free(z->stage);
        z->stage = NULL;
        z->stage_cap = 0;
        z->stage_own = false;
    }
    return true;
}

int rtr_zin_read_WT(rtr_conn_t *c, size_t n)
{
    rtr_zin_t     *z = &c->zin;
    rtr_rbuf_t    *b = z->rb;
    const uint8_t *p = b->data + b->len;
    b->len += (uint32_t)n;
    /* nothing is staged (a stalled read is not followed by another): the worker's room */
    spare_t *sp = spare();
    z->stage = sp->stage;
    z->stage_cap = sp->stage_cap;
    int rc = codec_guard_feed(&c->guard, p, n);
    sp->stage = z->stage; /* grown, maybe */
    sp->stage_cap = z->stage_cap;
    if (rc != 0)
        z->stage_len = z->stage_off = 0; /* nothing of them reaches Proton */
    else
        rtr_zin_push_WT(c);
    if (rtr_zin_stalled(z)) { /* Proton did not take it all: the rest in the connection's own */
        size_t   rest = z->stage_len - z->stage_off;
        uint8_t *own = base_malloc(rest);
        memcpy(own, z->stage + z->stage_off, rest);
        z->stage = own;
        z->stage_cap = z->stage_len = rest;
        z->stage_off = 0;
        z->stage_own = true;
    } else {
        z->stage = NULL;
        z->stage_cap = 0;
    }
    return rc ? CODEC_INVALID : 0;
}

static rtr_zq_t *zq_of(pn_link_t *pl)
{
    return pn_record_get(pn_link_attachments(pl), ZIN_LINK);
}

static uint64_t dlv_seq(pn_delivery_t *d)
{
    return (uint64_t)(uintptr_t)pn_record_get(pn_delivery_attachments(d), ZIN_DLV);
}

void rtr_zin_delivery_event_WT(rtr_conn_t *c, pn_delivery_t *d)
{
    rtr_zin_t *z = &c->zin;
    pn_link_t *pl = pn_delivery_link(d);
    if (!pn_link_is_receiver(pl))
        return;
    rtr_zq_t *q = zq_of(pl);
    if (!q) {
        /* its first delivery: the oldest unclaimed queue of its name (a queue whose link
         * was detached in this same read is older than one attached again after it) */
        const char *name = pn_link_name(pl);
        size_t      len = strlen(name);
        for (q = z->queues; q; q = q->next)
            if (!q->claimed && !q->whole && q->name_len == len && memcmp(q->name, name, len) == 0)
                break;
        if (!q)
            return;
        q->claimed = true;
        q->pl = pl;
        pn_record_t *r = pn_link_attachments(pl);
        pn_record_def(r, ZIN_LINK, PN_VOID);
        pn_record_set(r, ZIN_LINK, q);
    }
    pn_record_t *r = pn_delivery_attachments(d);
    uint64_t     seq = (uint64_t)(uintptr_t)pn_record_get(r, ZIN_DLV);
    if (!seq) {
        pn_record_def(r, ZIN_DLV, PN_VOID);
        seq = ++q->ev_seq;
        pn_record_set(r, ZIN_DLV, (void *)(uintptr_t)seq);
        z->sweep = true;
    }
    /* an aborted delivery's slices are all queued (its abort frame came after them), and
     * no reader wants them: the sweep drops them */
    if (pn_delivery_aborted(d) && seq >= q->live_seq) {
        q->live_seq = seq + 1;
        z->sweep = true;
    }
}

void rtr_zin_link_final_WT(rtr_conn_t *c, pn_link_t *pl)
{
    rtr_zq_t *q = zq_of(pl);
    if (!q)
        return;
    pn_record_set(pn_link_attachments(pl), ZIN_LINK, NULL);
    q->pl = NULL;
    c->zin.sweep = true; /* its slices go (nobody can read them now) */
}

void rtr_zin_delivery_settled_WT(rtr_conn_t *c, pn_delivery_t *d)
{
    rtr_zq_t *q = zq_of(pn_delivery_link(d));
    uint64_t  seq = dlv_seq(d);
    if (!q || !seq)
        return;
    if (seq >= q->live_seq)
        q->live_seq = seq + 1;
    c->zin.sweep = true;
}

void rtr_zin_sweep_WT(rtr_conn_t *c)
{
    rtr_zin_t *z = &c->zin;
    if (z->rb && rbuf_alone(z->rb)) {
        /* nothing points into it: back to the pools */
        rbuf_unref(z->rb);
        z->rb = NULL;
    }
    if (!z->sweep || rtr_zin_stalled(z))
        return; /* staged frames: their payloads are queued before Proton has seen them */
    z->sweep = false;
    bool       conn_closed = pn_connection_state(c->driver.connection) & PN_LOCAL_CLOSED;
    rtr_zq_t **pp = &z->queues;
    rtr_zq_t  *prev = NULL;
    while (*pp) {
        rtr_zq_t *q = *pp;
        if (!q->bound) {
            *pp = q->next;
            if (z->queues_tail == q)
                z->queues_tail = prev;
            zq_free(q, true);
            continue;
        }
        if (q->head) {
            /* a link the router closed takes nothing; nor one no event named (Proton saw no
             * transfer of it), unless its transfer waits for the rest of its payload */
            bool in_frame = z->xfer == q && z->xfer_left > 0;
            if (conn_closed || (q->pl && (pn_link_state(q->pl) & PN_LOCAL_CLOSED)) ||
                (!q->pl && !in_frame))
                zq_clear(q);
            else
                zq_drop_before(q, q->read_seq > q->live_seq ? q->read_seq : q->live_seq);
            zq_compact(q);
        }
        prev = q;
        pp = &q->next;
    }
}

/* The queue and number of pl's current delivery, the stale slices before it dropped; NULL
 * when pl has no queue (the old path). */
static rtr_zq_t *reader(pn_link_t *pl, pn_delivery_t *d, uint64_t *seq)
{
    rtr_zq_t *q = zq_of(pl);
    if (!q)
        return NULL;
    *seq = d ? dlv_seq(d) : 0;
    if (*seq > q->read_seq)
        q->read_seq = *seq;
    zq_drop_before(q, *seq);
    return q;
}

size_t rtr_delivery_pending_WT(pn_delivery_t *d)
{
    uint64_t  seq;
    rtr_zq_t *q = reader(pn_delivery_link(d), d, &seq);
    if (!q)
        return pn_delivery_pending(d);
    size_t n = 0;
    for (rtr_zent_t *e = q->head; e && e->seq == seq; e = e->next)
        n += e->len;
    return n;
}

void rtr_rbuf_unref(rtr_rbuf_t *b)
{
    rbuf_unref_shared(b);
}

/* The first k bytes of q's head slice are read: it shrinks, and goes once empty. */
static void zq_consume(rtr_zq_t *q, size_t k)
{
    rtr_zent_t *e = q->head;
    e->off += (uint32_t)k;
    e->len -= (uint32_t)k;
    e->buf->queued -= (uint32_t)k;
    q->bytes -= k;
    q->zin->queued -= k;
    if (e->len == 0)
        zq_pop(q);
}

bool rtr_link_take_WT(pn_link_t *pl, size_t max, const uint8_t **p, size_t *len,
                      rtr_rbuf_t **buf)
{
    pn_delivery_t *d = pn_link_current(pl);
    uint64_t       seq;
    rtr_zq_t      *q = d ? reader(pl, d, &seq) : NULL;
    if (!q || max == 0 || pn_delivery_aborted(d) || !q->head || q->head->seq != seq)
        return false;
    rtr_zent_t *e = q->head;
    *p = e->buf->data + e->off;
    *buf = e->buf;
    *len = e->len < max ? e->len : max;
    atomic_fetch_add_explicit(&e->buf->refs, 1, memory_order_relaxed); /* the caller's */
    zq_consume(q, *len);
    return true;
}

ssize_t rtr_link_recv_WT(pn_link_t *pl, char *buf, size_t n)
{
    pn_delivery_t *d = pn_link_current(pl);
    uint64_t       seq;
    rtr_zq_t      *q = d ? reader(pl, d, &seq) : NULL;
    if (!q || pn_delivery_aborted(d))
        return pn_link_recv(pl, buf, n);
    size_t got = 0;
    while (got < n && q->head && q->head->seq == seq) {
        rtr_zent_t *e = q->head;
        size_t      k = e->len < n - got ? e->len : n - got;
        memcpy(buf + got, e->buf->data + e->off, k);
        got += k;
        zq_consume(q, k);
    }
    if (got)
        return (ssize_t)got;
    return pn_link_recv(pl, buf, n); /* Proton holds no bytes: 0, PN_EOS */
}
