/* router/zc_out.c: zero-copy output (router/zc_out.h) - the FIFOs of shares of the links in
 * placeholder mode, and the writer: it follows Proton's output frame by frame, splices each
 * placeholder's share in and hands the kernel writev pieces (a TLS connection: its session).
 *
 * Thread suffixes: _WT = the connection's worker only (every function in this file but
 * rtr_zc_share_free() and rtr_zc_blob_unref(), which touch only what the share holds).
 *
 * DESIGN: Proton's output is turned into a queue of items in stream order: ranges of Proton's
 * own bytes (absolute positions in its output stream: they stay valid until they are given
 * back with pn_connection_driver_write_done, which happens only once the socket took them),
 * rewritten frame headers, and shares.  The socket takes the queue with uv_try_write (many
 * uv_buf_t at once); what it does not take goes in one uv_write whose Proton bytes are copied
 * (Proton may move its buffer before the write ends) and whose shares stay in the queue,
 * alive, until the callback.  Proton gets its bytes back as the socket takes them, a
 * placeholder once its share is all written.  The scan keeps its place across calls: a frame
 * passed through may arrive in parts; a frame the scan must read whole (an attach, a
 * transfer on a bound handle) waits in Proton's buffer until it is complete there (Proton's
 * output buffer grows to its peer's max-frame-size while full).
 */
#include "router/zc_out.h"

#include "router/hmap.h"
#include "router/link_out.h"

#include "codec/codec.h"
#include "codec/perf.h"

#include <proton/link.h>
#include <proton/transport.h>

#include <limits.h>
#include <string.h>
#include <sys/uio.h>

#ifndef IOV_MAX
#define IOV_MAX 1024
#endif

/* AMQP performative codes (the descriptor's small ulong). */
#define ZC_ATTACH   0x12
#define ZC_TRANSFER 0x14
#define ZC_DETACH   0x16
#define ZC_END      0x17

enum { IT_PROTON, IT_HDR, IT_SHARE };

/* One piece of the output, in stream order. */
typedef struct zc_item {
    uint8_t         kind;
    uint8_t         hdr[8];  /* IT_HDR: the frame header, its size rewritten */
    uint64_t        pos;     /* IT_PROTON: stream position of its first byte not yet written */
    size_t          len;     /* IT_PROTON: bytes not yet written */
    size_t          off;     /* IT_HDR, IT_SHARE: bytes already written */
    rtr_zc_share_t *share;   /* IT_SHARE (owned) */
} zc_item_t;

struct rtr_zc_conn {
    rtr_zc_fifo_t *fifos;     /* every FIFO of the connection */
    rtr_hmap_t     binds;     /* (channel, handle) -> FIFO, from the attaches written */
    zc_item_t     *items;     /* the queue: items[head, n_items) */
    uint32_t       head;
    uint32_t       n_items;
    uint32_t       cap_items;
    uint64_t       done;      /* Proton bytes given back: stream position of its buffer's start */
    uint64_t       scanned;   /* stream position up to which Proton's bytes are items */
    size_t         pass_left; /* bytes of a frame passed through still to come */
    bool           amqp;      /* an AMQP frame was written: no protocol header follows */
    size_t         ph;        /* placeholders given, not yet framed (shares in FIFOs) */
    size_t         bytes;     /* their shares' bytes */
    uint64_t       pushes;    /* shares queued so far (the top-up loop's progress) */
};

/* ---------------------------------------------------------------- shares and FIFOs */

rtr_zc_blob_t *rtr_zc_blob_new(size_t len)
{
    size_t         size;
    rtr_zc_blob_t *b = base_buf_alloc(sizeof(*b) + len, &size);
    b->refs = 1;
    b->size = (uint32_t)size;
    return b;
}

void rtr_zc_blob_unref(rtr_zc_blob_t *b)
{
    if (b && --b->refs == 0)
        base_buf_free(b, b->size);
}

void rtr_zc_share_free(rtr_zc_share_t *s)
{
    rtr_msg_unref(s->msg);
    rtr_zc_blob_unref(s->blob);
    for (uint32_t i = 0; i < s->n_bufs; i++)
        rtr_buf_unref(s->bufs[i]);
    free(s);
}

rtr_zc_conn_t *rtr_zc_conn_new_WT(void)
{
    return base_calloc(1, sizeof(rtr_zc_conn_t));
}

static void fifo_drop_WT(rtr_zc_conn_t *z, rtr_zc_fifo_t *f)
{
    while (f->head) {
        rtr_zc_share_t *s = f->head;
        f->head = s->next;
        z->ph--;
        z->bytes -= s->len;
        rtr_zc_share_free(s);
    }
    f->tail = NULL;
}

static void fifo_free_WT(rtr_zc_conn_t *z, rtr_zc_fifo_t *f)
{
    rtr_zc_fifo_t **pp = &z->fifos;
    while (*pp != f)
        pp = &(*pp)->next;
    *pp = f->next;
    fifo_drop_WT(z, f);
    free(f->name);
    free(f);
}

void rtr_zc_conn_free_WT(rtr_conn_t *c)
{
    rtr_zc_conn_t *z = c->zc;
    if (!z)
        return;
    for (uint32_t i = z->head; i < z->n_items; i++)
        if (z->items[i].kind == IT_SHARE)
            rtr_zc_share_free(z->items[i].share);
    while (z->fifos)
        fifo_free_WT(z, z->fifos);
    free(z->items);
    rtr_hmap_fini(&z->binds);
    free(z);
    c->zc = NULL;
}

void rtr_zc_link_new_WT(rtr_link_t *k)
{
    rtr_conn_t    *c = k->conn;
    rtr_zc_conn_t *z = c->zc;
    if (!z || !k->pn)
        return;
    const char    *name = pn_link_name(k->pn);
    rtr_zc_fifo_t *f = base_calloc(1, sizeof(*f)), **pp = &z->fifos;
    f->link = k;
    f->name = base_strdup(name ? name : "");
    for (; *pp; pp = &(*pp)->next)
        if (!(*pp)->done && strcmp((*pp)->name, f->name) == 0)
            f->mode = RTR_ZC_PASSIVE; /* which attach is whose: by order only */
    *pp = f; /* last: the oldest link's FIFO binds the first attach of a name */
    k->zc = f;
}

bool rtr_zc_link_active_WT(rtr_link_t *k)
{
    rtr_zc_fifo_t *f = k->zc;
    if (!f)
        return false;
    if (f->mode == RTR_ZC_UNDECIDED)
        f->mode = k->lr ? RTR_ZC_PASSIVE : RTR_ZC_ACTIVE; /* linkroute.c sends its own */
    return f->mode == RTR_ZC_ACTIVE;
}

void rtr_zc_link_gone_WT(rtr_link_t *k)
{
    rtr_zc_fifo_t *f = k->zc;
    if (!f)
        return;
    k->zc = NULL;
    f->link = NULL;
    f->want = false;
    if (f->done)
        fifo_free_WT(k->conn->zc, f);
}

size_t rtr_zc_share_max_WT(rtr_conn_t *c)
{
    uint32_t rmax = pn_transport_get_remote_max_frame(c->driver.transport);
    if (!rmax || rmax - 8 - RTR_ZC_PERF_BOUND > RTR_ZC_SHARE_CAP)
        return RTR_ZC_SHARE_CAP;
    return rmax - 8 - RTR_ZC_PERF_BOUND;
}

void rtr_zc_push_WT(rtr_conn_t *c, rtr_zc_fifo_t *f, rtr_zc_share_t *s)
{
    rtr_zc_conn_t *z = c->zc;
    z->pushes++;
    if (f->done) { /* its detach is written: Proton frames nothing more of it */
        rtr_zc_share_free(s);
        return;
    }
    s->next = NULL;
    if (f->tail)
        f->tail->next = s;
    else
        f->head = s;
    f->tail = s;
    z->ph++;
    z->bytes += s->len;
}

void rtr_zc_drop_tail_WT(rtr_conn_t *c, rtr_zc_fifo_t *f)
{
    rtr_zc_conn_t  *z = c->zc;
    rtr_zc_share_t *s = f->head, *prev = NULL;
    if (!s)
        return; /* dropped already (its detach was written) */
    while (s->next) {
        prev = s;
        s = s->next;
    }
    if (prev)
        prev->next = NULL;
    else
        f->head = NULL;
    f->tail = prev;
    z->ph--;
    z->bytes -= s->len;
    rtr_zc_share_free(s);
}

void rtr_zc_unframed_WT(const rtr_conn_t *c, size_t *placeholders, size_t *bytes)
{
    *placeholders = c->zc ? c->zc->ph : 0;
    *bytes = c->zc ? c->zc->bytes : 0;
}

/* ---------------------------------------------------------------- bindings */

/* The FIFO's link is detached (or its session ended) on the wire, its binding removed:
 * nothing more is framed for it; shares still queued were never framed.  f NULL: nothing
 * was bound there. */
static void unbind_WT(rtr_zc_conn_t *z, rtr_zc_fifo_t *f)
{
    if (!f)
        return;
    f->bound = false;
    f->done = true;
    f->want = false;
    fifo_drop_WT(z, f);
    if (!f->link)
        fifo_free_WT(z, f);
}

static void bind_WT(rtr_zc_conn_t *z, uint16_t ch, uint32_t handle, const uint8_t *name,
                    size_t name_len)
{
    unbind_WT(z, rtr_hmap_del(&z->binds, ch, handle)); /* a handle reused: the old link is gone */
    rtr_zc_fifo_t *f = z->fifos;
    for (; f; f = f->next)
        if (!f->bound && !f->done && strlen(f->name) == name_len &&
            memcmp(f->name, name, name_len) == 0)
            break;
    if (!f)
        return; /* a link on the old path */
    rtr_hmap_put(&z->binds, ch, handle, f);
    f->bound = true;
}

/* ---------------------------------------------------------------- the queue */

static zc_item_t *item_add(rtr_zc_conn_t *z, uint8_t kind)
{
    if (z->head > 0 && z->head == z->n_items)
        z->head = z->n_items = 0;
    if (z->n_items == z->cap_items) {
        if (z->head > z->cap_items / 2) {
            memmove(z->items, z->items + z->head, (z->n_items - z->head) * sizeof(*z->items));
            z->n_items -= z->head;
            z->head = 0;
        } else {
            z->cap_items = z->cap_items ? 2 * z->cap_items : 64;
            z->items = base_realloc(z->items, z->cap_items * sizeof(*z->items));
        }
    }
    zc_item_t *it = &z->items[z->n_items++];
    memset(it, 0, sizeof(*it));
    it->kind = kind;
    return it;
}

/* Proton's bytes [pos, pos + n) go out as they are (merged with the range before). */
static void add_proton(rtr_zc_conn_t *z, uint64_t pos, size_t n)
{
    if (n == 0)
        return;
    if (z->n_items > z->head) {
        zc_item_t *last = &z->items[z->n_items - 1];
        if (last->kind == IT_PROTON && last->pos + last->len == pos) {
            last->len += n;
            return;
        }
    }
    zc_item_t *it = item_add(z, IT_PROTON);
    it->pos = pos;
    it->len = n;
}

/* Turn Proton's bytes after `scanned` into items.  Returns true when a share was taken out
 * of its FIFO (Proton framed a placeholder: its link may give the next). */
static bool scan_WT(rtr_conn_t *c, pn_bytes_t wb)
{
    rtr_zc_conn_t *z = c->zc;
    BASE_BUG_ON(z->scanned < z->done || z->scanned - z->done > wb.size);
    const uint8_t *b = (const uint8_t *)wb.start;
    size_t         at = (size_t)(z->scanned - z->done);
    bool           took = false;
    while (at < wb.size) {
        const uint8_t *p = b + at;
        size_t         avail = wb.size - at;
        if (z->pass_left) {
            size_t n = avail < z->pass_left ? avail : z->pass_left;
            add_proton(z, z->done + at, n);
            at += n;
            z->pass_left -= n;
            continue;
        }
        if (!z->amqp && p[0] == 'A') { /* a protocol header (no frame is 1 GB) */
            if (avail < 8)
                break;
            z->pass_left = 8;
            continue;
        }
        if (avail < 8)
            break;
        uint32_t size = codec_be32(p);
        size_t   doff = (size_t)p[4] * 4;
        uint8_t  type = p[5];
        uint16_t ch = (uint16_t)(p[6] << 8 | p[7]);
        BASE_BUG_ON(size < 8 || doff < 8 || doff > size);
        if (type == 0)
            z->amqp = true;
        if (type != 0 || size < doff + 3) { /* SASL, or an empty frame (heartbeat) */
            z->pass_left = size;
            continue;
        }
        if (avail < doff + 3)
            break;
        const uint8_t *perf = p + doff;
        size_t         body = size - doff; /* the performative and the payload */
        if (perf[0] != 0 || perf[1] != 0x53) {
            z->pass_left = size;
            continue;
        }
        uint8_t      code = perf[2];
        codec_perf_t f;
        if (code == ZC_TRANSFER || code == ZC_DETACH) {
            /* the handle (the list's first element) is read before the frame is all there:
             * a frame passed through need not be */
            size_t want = doff + 3 + 9 + 5;
            if (want > size)
                want = size;
            if (avail < want)
                break;
            uint32_t handle;
            bool     ok = codec_perf_read(&f, perf, (avail < size ? avail : size) - doff) == 0 &&
                      codec_perf_uint(&f, 0, &handle);
            BASE_BUG_ON(!ok);
            rtr_zc_fifo_t *q = code == ZC_TRANSFER ? rtr_hmap_get(&z->binds, ch, handle) : NULL;
            if (code == ZC_DETACH)
                unbind_WT(z, rtr_hmap_del(&z->binds, ch, handle));
            if (!q || q->mode != RTR_ZC_ACTIVE) { /* a detach, or a link on the old path */
                z->pass_left = size;
                continue;
            }
            if (avail < size)
                break;
            BASE_BUG_ON(f.len > body);
            size_t payload = body - f.len;
            if (payload == 0) { /* an abort, or the end of a delivery settled early */
                z->pass_left = size;
                continue;
            }
            BASE_BUG_ON(payload != 1); /* one placeholder per frame */
            /* the frame's performative within the bound its share was planned with */
            BASE_BUG_ON(doff - 8 + f.len > RTR_ZC_PERF_BOUND);
            rtr_zc_share_t *s = q->head;
            BASE_BUG_ON(!s);
            q->head = s->next;
            if (!q->head)
                q->tail = NULL;
            z->ph--;
            z->bytes -= s->len;
            size_t   nsize = size - 1 + s->len;
            uint32_t rmax = pn_transport_get_remote_max_frame(c->driver.transport);
            BASE_BUG_ON(rmax && nsize > rmax);
            zc_item_t *h = item_add(z, IT_HDR);
            memcpy(h->hdr, p, 8);
            codec_be32_put(h->hdr, (uint32_t)nsize);
            add_proton(z, z->done + at + 8, size - 9);
            zc_item_t *it = item_add(z, IT_SHARE);
            it->share = s;
            at += size;
            took = true;
            continue;
        }
        if (code == ZC_ATTACH) {
            if (avail < size)
                break;
            const uint8_t *name;
            size_t         name_len;
            uint32_t       handle;
            /* the router's sender links (role false) take shares */
            if (codec_perf_read(&f, perf, body) == 0 && codec_perf_bytes(&f, 0, &name, &name_len) &&
                codec_perf_uint(&f, 1, &handle) && codec_perf_bool(&f, 2) == 0)
                bind_WT(z, ch, handle, name, name_len);
        } else if (code == ZC_END) {
            rtr_zc_fifo_t *q;
            while ((q = rtr_hmap_pop(&z->binds, ch)))
                unbind_WT(z, q);
        }
        z->pass_left = size;
    }
    z->scanned = z->done + at;
    return took;
}

/* Links waiting for their next placeholder, now that Proton framed the last: give it.
 * Returns true when one gave one. */
static bool topup_WT(rtr_conn_t *c)
{
    rtr_zc_conn_t *z = c->zc;
    uint64_t       before = z->pushes;
    for (rtr_zc_fifo_t *f = z->fifos; f; f = f->next) {
        if (f->want && f->link) {
            f->want = false;
            rtr_link_pump_WT(f->link); /* sets want again while Proton holds a placeholder */
        }
    }
    return z->pushes != before;
}

/* The socket took n more bytes of the queue: give Proton back its bytes so taken (a
 * placeholder once its share is all written) and free what is done. */
static void advance_WT(rtr_conn_t *c, size_t n)
{
    rtr_zc_conn_t *z = c->zc;
    size_t         give = 0; /* Proton's bytes taken: given back at once (each
                                pn_connection_driver_write_done moves Proton's buffer) */
    while (z->head < z->n_items) {
        zc_item_t *it = &z->items[z->head];
        size_t     k;
        if (it->kind == IT_PROTON) {
            k = n < it->len ? n : it->len;
            give += k;
            it->pos += k;
            it->len -= k;
            n -= k;
            if (it->len)
                break;
        } else if (it->kind == IT_HDR) {
            k = 8 - it->off < n ? 8 - it->off : n;
            it->off += k;
            n -= k;
            if (it->off < 8)
                break;
            give += 8;
        } else {
            size_t left = it->share->len - it->off;
            k = left < n ? left : n;
            it->off += k;
            n -= k;
            if (it->off < it->share->len)
                break;
            give += 1; /* the placeholder */
            rtr_zc_share_free(it->share);
        }
        z->head++;
    }
    BASE_BUG_ON(n != 0);
    if (z->head == z->n_items)
        z->head = z->n_items = 0;
    if (give) {
        pn_connection_driver_write_done(&c->driver, give);
        z->done += give;
    }
}

/* The queue's next bytes as at most `max` buffers.  With `copy` (a uv_write: Proton may move
 * its buffer, the queue's headers may move) Proton's bytes and headers are copied into
 * copy[0, cap) and it stops when that is full; shares are referenced. */
static int gather(rtr_conn_t *c, pn_bytes_t wb, uv_buf_t *iov, int max, uint8_t *copy, size_t cap,
                  size_t *total)
{
    rtr_zc_conn_t *z = c->zc;
    int            n = 0;
    size_t         used = 0;
    *total = 0;
    for (uint32_t i = z->head; i < z->n_items && n < max; i++) {
        zc_item_t     *it = &z->items[i];
        const uint8_t *p;
        size_t         len;
        if (it->kind == IT_SHARE) {
            size_t skip = it->off;
            rtr_zc_share_t *s = it->share;
            for (uint32_t j = 0; j < s->n && n < max; j++) {
                if (skip >= s->pieces[j].len) {
                    skip -= s->pieces[j].len;
                    continue;
                }
                iov[n++] = uv_buf_init((char *)s->pieces[j].p + skip,
                                       (unsigned)(s->pieces[j].len - skip));
                *total += s->pieces[j].len - skip;
                skip = 0;
            }
            continue;
        }
        if (it->kind == IT_PROTON) {
            BASE_BUG_ON(it->pos < z->done || it->pos - z->done + it->len > wb.size);
            p = (const uint8_t *)wb.start + (it->pos - z->done);
            len = it->len;
        } else {
            p = it->hdr + it->off;
            len = 8 - it->off;
        }
        if (copy) {
            size_t room = cap - used;
            if (room == 0)
                break;
            if (len > room)
                len = room;
            memcpy(copy + used, p, len);
            p = copy + used;
            used += len;
        }
        iov[n++] = uv_buf_init((char *)p, (unsigned)len);
        *total += len;
        if (copy && used == cap)
            break;
    }
    return n;
}

/* Queue what Proton frames, and the placeholders that follow: a link whose placeholder was
 * framed gives the next at once, so a multi-frame message goes out in one pass (as far as the
 * session window and the output budget allow).  Returns Proton's output buffer, which stays
 * valid for the queued items: only Proton's output calls move it. */
static pn_bytes_t frame_WT(rtr_conn_t *c)
{
    pn_bytes_t wb;
    for (;;) {
        wb = pn_connection_driver_write_buffer(&c->driver);
        if (!scan_WT(c, wb) || !topup_WT(c))
            return wb;
    }
}

bool rtr_zc_write_WT(rtr_conn_t *c, uv_write_cb cb)
{
    rtr_zc_conn_t *z = c->zc;
    uv_buf_t       iov[IOV_MAX > 1024 ? 1024 : IOV_MAX];
    size_t         stuck = (size_t)-1;
    while (!c->writing && !c->closing) {
        if (pn_connection_driver_write_closed(&c->driver))
            return false;
        pn_bytes_t wb = frame_WT(c);
        if (z->head == z->n_items) {
            if (wb.size == 0)
                return true; /* the client took everything Proton framed */
            /* only part of a frame the scan reads whole: Proton's buffer is full, and grows
             * when asked again */
            if (wb.size == stuck)
                return false;
            stuck = wb.size;
            continue;
        }
        stuck = (size_t)-1;
        size_t total;
        int    n = gather(c, wb, iov, (int)BASE_ARRAY_LEN(iov), NULL, 0, &total);
        if (total == 0) { /* empty shares (the end of a message) at the head */
            advance_WT(c, 0);
            continue;
        }
        int    r = uv_try_write((uv_stream_t *)&c->tcp, iov, (unsigned)n);
        if (r > 0) {
            advance_WT(c, (size_t)r);
            if ((size_t)r == total)
                continue;
            wb = pn_connection_driver_write_buffer(&c->driver);
        } else if (r != UV_EAGAIN) {
            pn_connection_driver_write_close(&c->driver);
            return false;
        }
        /* the socket is full: one uv_write of the next bytes, Proton's copied */
        if (!c->wreq)
            c->wreq = base_malloc(sizeof(*c->wreq));
        n = gather(c, wb, iov, (int)BASE_ARRAY_LEN(iov), (uint8_t *)c->wreq->data,
                   sizeof(c->wreq->data), &total);
        c->wreq->req.data = c;
        c->wlen = total;
        if (uv_write(&c->wreq->req, (uv_stream_t *)&c->tcp, iov, (unsigned)n, cb) == 0) {
            c->writing = true;
            return false;
        }
        pn_connection_driver_write_close(&c->driver);
        return false;
    }
    return false;
}

bool rtr_zc_put_WT(rtr_conn_t *c, rtr_zc_put_fn put, void *ctx)
{
    rtr_zc_conn_t *z = c->zc;
    uv_buf_t       iov[IOV_MAX > 1024 ? 1024 : IOV_MAX];
    size_t         stuck = (size_t)-1;
    while (!c->closing) {
        if (pn_connection_driver_write_closed(&c->driver))
            return false;
        pn_bytes_t wb = frame_WT(c);
        if (z->head == z->n_items) { /* as in rtr_zc_write_WT */
            if (wb.size == 0)
                return true;
            if (wb.size == stuck)
                return false;
            stuck = wb.size;
            continue;
        }
        stuck = (size_t)-1;
        size_t total;
        int    n = gather(c, wb, iov, (int)BASE_ARRAY_LEN(iov), NULL, 0, &total);
        size_t taken = 0;
        bool   full = false;
        for (int i = 0; i < n && !full; i++) {
            long k = put(ctx, iov[i].base, iov[i].len);
            if (k < 0) {
                pn_connection_driver_write_close(&c->driver);
                return false;
            }
            taken += (size_t)k;
            full = (size_t)k < iov[i].len;
        }
        advance_WT(c, taken); /* given back now: put() keeps what it took */
        if (full)
            return false;
    }
    return false;
}

void rtr_zc_written_WT(rtr_conn_t *c, size_t n)
{
    advance_WT(c, n);
}
