/* router/msg.c: message content - the bytes of one received message, shared by its copies,
 * and the streaming of large messages (see the DESIGN note on rtr_msg_t in msg.h).
 *
 * Thread suffixes: _WT = the receiving worker; the rest is thread-safe (the reader functions
 * are called by the worker of each copy).  One lock per streamed message (m->lock); never
 * held while calling into Proton or posting to a queue.
 */
#include "router/msg.h"

#include "core/base/list.h"
#include "router/zin.h"

#include <proton/delivery.h>
#include <proton/link.h>
#include <string.h>

BASE_POOL_DEFINE(rtr_msg_t, 64)
BASE_POOL_DEFINE(rtr_buf_t, 8)
BASE_POOL_DEFINE(rtr_msg_segs_t, 64)

rtr_msg_t *rtr_msg_new(void)
{
    rtr_msg_t *m = rtr_msg_t_new();
    atomic_init(&m->c.refs, 1);
    atomic_init(&m->c.readers, 0);
    atomic_init(&m->c.routed, false);
    return m;
}

void rtr_buf_unref(rtr_buf_t *b)
{
    if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
        rtr_buf_t_free(b);
}

/* ---- segments ---- */

/* A block codec_scan_segs() copied bytes into (the router annotations a segment's end cut). */
struct rtr_stitch {
    rtr_stitch_t *next;
    uint8_t       data[];
};

static uint8_t *stitch_alloc(void *ctx, size_t len)
{
    rtr_msg_t    *m = ctx;
    rtr_stitch_t *b = base_malloc(sizeof(*b) + len);
    b->next = m->segs->stitch;
    m->segs->stitch = b;
    return b->data;
}

static void stitch_free(rtr_msg_t *m)
{
    while (m->segs->stitch) {
        rtr_stitch_t *next = m->segs->stitch->next;
        free(m->segs->stitch);
        m->segs->stitch = next;
    }
}

/* Drop the segments, their references and their stitch memory. */
static void segs_drop(rtr_msg_t *m)
{
    for (uint32_t i = 0; i < m->n_seg; i++)
        rtr_rbuf_unref(m->segs->buf[i]);
    stitch_free(m);
    rtr_msg_segs_t_free(m->segs);
    m->segs = NULL;
    m->n_seg = 0;
}

bool rtr_msg_seg_add_WT(rtr_msg_t *m, const uint8_t *p, size_t len, rtr_rbuf_t *b)
{
    if (m->n_seg == RTR_MSG_SEGS || (m->n_seg == 0 && m->len > 0))
        return false;
    if (!m->segs)
        m->segs = rtr_msg_segs_t_new();
    rtr_msg_segs_t *s = m->segs;
    if (m->n_seg && s->seg[m->n_seg - 1].ptr + s->seg[m->n_seg - 1].len == p &&
        s->buf[m->n_seg - 1] == b) {
        s->seg[m->n_seg - 1].len += len; /* a frame's payload read in two pieces */
        rtr_rbuf_unref(b);
    } else {
        s->seg[m->n_seg] = (codec_bytes_t){p, len};
        s->buf[m->n_seg++] = b;
    }
    m->data = (uint8_t *)s->seg[0].ptr;
    m->len += len;
    return true;
}

void rtr_msg_copy(const rtr_msg_t *m, uint8_t *dst)
{
    if (!m->n_seg) {
        if (m->len)
            memcpy(dst, m->data, m->len);
        return;
    }
    for (uint32_t i = 0; i < m->n_seg; i++) {
        memcpy(dst, m->segs->seg[i].ptr, m->segs->seg[i].len);
        dst += m->segs->seg[i].len;
    }
}

void rtr_msg_join_WT(rtr_msg_t *m, size_t more)
{
    if (!m->n_seg)
        return;
    size_t   cap;
    uint8_t *data = base_buf_alloc(m->len + more, &cap);
    rtr_msg_copy(m, data);
    segs_drop(m);
    m->data = data;
    m->cap = cap;
}

/* Segments are kept only when the message is at least an eighth of the read buffers it
 * pins: a message may be held long (a slow receiver), and small ones pinning 64 KiB each
 * would multiply the memory a connection's input costs. */
static bool segs_worth(const rtr_msg_t *m)
{
    size_t pinned = 0;
    for (uint32_t i = 0; i < m->n_seg; i++) {
        bool seen = false;
        for (uint32_t j = 0; j < i; j++)
            seen |= m->segs->buf[j] == m->segs->buf[i];
        if (!seen)
            pinned += m->segs->buf[i]->cap;
    }
    return m->len * 8 >= pinned;
}

int rtr_msg_scan_WT(rtr_msg_t *m, const char **why)
{
    if (m->n_seg && segs_worth(m)) {
        codec_segs_t   segs = {.seg = m->segs->seg, .n = m->n_seg, .len = m->len};
        codec_stitch_t st = {.alloc = stitch_alloc, .ctx = m};
        int            rc = codec_scan_segs(&segs, &m->scan, &st, why);
        if (rc != CODEC_SPLIT)
            return rc;
    }
    rtr_msg_join_WT(m, 0); /* drops the stitch memory too */
    return codec_scan(m->data, m->len, true, &m->scan, why);
}

const uint8_t *rtr_msg_at(const rtr_msg_t *m, size_t off, size_t *room)
{
    if (!m->n_seg) {
        *room = m->len - off;
        return m->data + off;
    }
    uint32_t i = 0;
    const codec_bytes_t *seg = m->segs->seg;
    while (off >= seg[i].len)
        off -= seg[i++].len;
    *room = seg[i].len - off;
    return seg[i].ptr + off;
}

void rtr_msg_unref(rtr_msg_t *m)
{
    if (atomic_fetch_sub_explicit(&m->c.refs, 1, memory_order_acq_rel) != 1)
        return;
    if (m->n_seg) {
        segs_drop(m);
        rtr_msg_t_free(m);
        return;
    }
    if (m->c.streaming) {
        rtr_buf_t *b = m->chain;
        while (b) {
            rtr_buf_t *next = b->next;
            rtr_buf_unref(b);
            b = next;
        }
        pthread_mutex_destroy(&m->lock);
    }
    base_buf_free(m->data, m->cap);
    rtr_msg_t_free(m);
}

void rtr_msg_reserve(rtr_msg_t *m, size_t more)
{
    rtr_msg_join_WT(m, more);
    if (m->cap - m->len >= more)
        return;
    size_t cap, want = m->len + more;
    if (m->cap && want < 2 * m->cap)
        want = 2 * m->cap; /* grow geometrically */
    uint8_t *data = base_buf_alloc(want, &cap);
    if (m->len)
        memcpy(data, m->data, m->len);
    base_buf_free(m->data, m->cap);
    m->data = data;
    m->cap = cap;
}

/* ---- streaming ---- */

static uint32_t registered_total(const rtr_msg_t *m)
{
    return m->n_readers + m->_readers_gone;
}

/* The smallest position of any copy, or 0 while some copy may still register. */
static size_t min_pos_LH(const rtr_msg_t *m)
{
    if (!atomic_load_explicit(&m->c.routed, memory_order_acquire) ||
        registered_total(m) < atomic_load_explicit(&m->c.readers, memory_order_relaxed))
        return 0;
    size_t min = m->total;
    for (const rtr_msg_reader_t *r = m->readers; r; r = r->next)
        if (r->pos < min)
            min = r->pos;
    return min;
}

/* Bytes held that the slowest copy has not sent. */
static size_t lag_LH(const rtr_msg_t *m)
{
    size_t min = min_pos_LH(m);
    if (min < m->len)
        min = m->len; /* the head is never freed early; it does not count */
    return m->total - min;
}

/* The workers to wake with RTR_EXT_STREAM, each once: readers' workers all belong to one
 * router, whose context lists them by index. */
typedef struct wakes {
    const rtr_ctx_t *ctx;                  /* the readers' router; NULL: none to wake */
    uint8_t          on[RTR_MAX_WORKERS]; /* by worker index */
} wakes_t;

/* Collect the workers of copies waiting for bytes (clearing their requests). */
static void take_waiters_LH(rtr_msg_t *m, wakes_t *wake)
{
    for (rtr_msg_reader_t *r = m->readers; r; r = r->next) {
        if (r->waiting) {
            r->waiting = false;
            wake->ctx = r->worker->ctx;
            wake->on[r->worker->index] = 1;
        }
    }
}

static void post_wakes(const wakes_t *wake)
{
    for (int i = 0; wake->ctx && i < wake->ctx->n_workers; i++)
        if (wake->on[i])
            rtr_worker_post_ext(&wake->ctx->workers[i], RTR_EXT_STREAM, NULL, 0);
}

void rtr_msg_stream_start_WT(rtr_msg_t *m, rtr_worker_t *owner)
{
    BASE_BUG_ON(m->n_seg); /* a streamed message's head is contiguous (link_in.c joins it) */
    m->c.streaming = true;
    m->owner = owner;
    pthread_mutex_init(&m->lock, NULL);
    m->total = m->len;
}

bool rtr_msg_stream_recv_WT(rtr_msg_t *m, pn_link_t *pl, pn_delivery_t *d)
{
    wakes_t wake = {0};
    bool blocked = false;

    for (;;) {
        pthread_mutex_lock(&m->lock);
        /* free every buffer all copies have passed */
        size_t min = min_pos_LH(m);
        while (m->chain && m->chain->off + RTR_BUF_SIZE <= min) {
            rtr_buf_t *b = m->chain;
            m->chain = b->next;
            if (m->chain_tail == b)
                m->chain_tail = NULL;
            rtr_buf_unref(b); /* a share may still hold it */
        }
        if (lag_LH(m) >= RTR_Q2_HIGH) {
            m->q2_blocked = true;
            blocked = true;
        }
        rtr_buf_t *tail = m->chain_tail;
        size_t total = m->total;
        pthread_mutex_unlock(&m->lock);
        if (blocked)
            break;

        size_t pending = rtr_delivery_pending_WT(d);
        if (pending == 0)
            break;
        size_t room = tail ? tail->off + RTR_BUF_SIZE - total : 0;
        if (room == 0) {
            rtr_buf_t *b = rtr_buf_t_new();
            b->next = NULL;
            b->off = total;
            atomic_init(&b->refs, 1); /* the chain's */
            pthread_mutex_lock(&m->lock);
            if (m->chain_tail)
                m->chain_tail->next = b;
            else
                m->chain = b;
            m->chain_tail = b;
            pthread_mutex_unlock(&m->lock);
            tail = b;
            room = RTR_BUF_SIZE;
        }
        ssize_t n = rtr_link_recv_WT(pl, (char *)tail->data + (total - tail->off),
                                 room < pending ? room : pending);
        if (n <= 0)
            break;
        pthread_mutex_lock(&m->lock);
        m->total += (size_t)n;
        take_waiters_LH(m, &wake);
        pthread_mutex_unlock(&m->lock);
    }
    post_wakes(&wake);
    return blocked;
}

void rtr_msg_stream_end_WT(rtr_msg_t *m, bool aborted)
{
    wakes_t wake = {0};
    pthread_mutex_lock(&m->lock);
    if (aborted)
        m->aborted = true;
    else
        m->complete = true;
    take_waiters_LH(m, &wake);
    pthread_mutex_unlock(&m->lock);
    post_wakes(&wake);
}

void rtr_msg_reader_add(rtr_msg_t *m, rtr_msg_reader_t *r)
{
    pthread_mutex_lock(&m->lock);
    r->pos = m->scan.body_off;
    BASE_DLIST_PUSH(m->readers, r, prev, next);
    m->n_readers++;
    pthread_mutex_unlock(&m->lock);
}

/* After the set of positions moved forward: wake the receiving worker if it waits on Q2. */
static bool q2_release_LH(rtr_msg_t *m)
{
    if (m->q2_blocked && lag_LH(m) < RTR_Q2_LOW) {
        m->q2_blocked = false;
        return true;
    }
    return false;
}

static void wake_owner(const rtr_msg_t *m)
{
    if (m->owner)
        rtr_worker_post_ext(m->owner, RTR_EXT_STREAM, NULL, 0);
}

void rtr_msg_reader_del(rtr_msg_t *m, rtr_msg_reader_t *r)
{
    pthread_mutex_lock(&m->lock);
    if (r) {
        BASE_DLIST_REMOVE(m->readers, r, prev, next);
        m->n_readers--;
    }
    m->_readers_gone++;
    bool wake = q2_release_LH(m);
    pthread_mutex_unlock(&m->lock);
    if (wake)
        wake_owner(m);
}

void rtr_msg_stream_answered_WT(rtr_msg_t *m)
{
    pthread_mutex_lock(&m->lock);
    bool wake = q2_release_LH(m);
    pthread_mutex_unlock(&m->lock);
    if (wake)
        wake_owner(m);
}

codec_bytes_t rtr_msg_reader_peek(rtr_msg_t *m, rtr_msg_reader_t *r, size_t max,
                                  bool *complete, bool *aborted, rtr_buf_t **ref)
{
    codec_bytes_t b = {NULL, 0};
    if (ref)
        *ref = NULL;
    pthread_mutex_lock(&m->lock);
    *complete = m->complete;
    *aborted = m->aborted;
    size_t pos = r->pos;
    size_t avail = m->total - pos;
    if (avail > 0) {
        if (pos < m->len) {
            b.ptr = m->data + pos;
            b.len = m->len - pos;
        } else {
            rtr_buf_t *buf = m->chain;
            while (buf && buf->off + RTR_BUF_SIZE <= pos)
                buf = buf->next;
            BASE_BUG_ON(!buf || buf->off > pos);
            b.ptr = buf->data + (pos - buf->off);
            b.len = buf->off + RTR_BUF_SIZE - pos;
            if (ref) { /* r has not passed it: the chain still holds it */
                atomic_fetch_add_explicit(&buf->refs, 1, memory_order_relaxed);
                *ref = buf;
            }
        }
        if (b.len > avail)
            b.len = avail;
        if (b.len > max)
            b.len = max;
    }
    pthread_mutex_unlock(&m->lock);
    return b;
}

void rtr_msg_reader_advance(rtr_msg_t *m, rtr_msg_reader_t *r, size_t n)
{
    pthread_mutex_lock(&m->lock);
    r->pos += n;
    bool wake = q2_release_LH(m);
    pthread_mutex_unlock(&m->lock);
    if (wake)
        wake_owner(m);
}

bool rtr_msg_reader_wait(rtr_msg_t *m, rtr_msg_reader_t *r)
{
    pthread_mutex_lock(&m->lock);
    bool wait = r->pos >= m->total && !m->complete && !m->aborted;
    if (wait)
        r->waiting = true;
    pthread_mutex_unlock(&m->lock);
    return wait;
}
