/* router/msg.h: message content (msg.c) - one received message's bytes, shared read-only by
 * every copy once routed, and the streaming of a large message while it still arrives.
 * Above ctx.h (a streamed message wakes the workers of its readers and of its receiver);
 * included by the link layers (link_out.h) and by the management agent, which makes replies.
 *
 * Threads: thread-safe except where marked _WT (the receiving worker).
 */
#ifndef JUNCTION_ROUTER_MSG_H
#define JUNCTION_ROUTER_MSG_H

#include "codec/codec.h"
#include "router/ctx.h"

#include <proton/types.h>
#include <pthread.h>

/* Size of each buffer a streamed message's later bytes arrive in. */
#define RTR_BUF_SIZE (64u << 10)
/* Q2: a streamed message stops being read when it holds this many bytes that some copy has
 * not sent yet, and goes on below RTR_Q2_LOW. */
#define RTR_Q2_HIGH  (1u << 20)
#define RTR_Q2_LOW   (512u << 10)

/* A buffer of a streamed message's bytes after the head.  The message's chain holds one
 * reference until every reader passed the buffer; an outgoing frame's share (zc_out.h) holds
 * one until the socket took its bytes: whoever drops the last frees it (rtr_buf_unref, any
 * worker). */
typedef struct rtr_buf rtr_buf_t;
struct rtr_buf {
    rtr_buf_t   *next;               /* next buffer (written under the message lock) */
    size_t       off;                /* message offset of data[0]; immutable */
    atomic_uint  refs;               /* the chain's + shares' */
    uint8_t      data[RTR_BUF_SIZE]; /* bytes; valid up to the message's `total` */
};

/* rtr_msg_reader_t: one copy reading a streamed message (embedded in its rtr_out_t).  Its
 * fields are the message's [lock] fields, except `worker`. */
typedef struct rtr_msg_reader rtr_msg_reader_t;
struct rtr_msg_reader {
    size_t            pos;     /* [msg lock] message offset sent up to */
    bool              waiting; /* [msg lock] wants RTR_EXT_STREAM when bytes arrive */
    rtr_worker_t     *worker;  /* the copy's worker (RTR_EXT_STREAM); immutable once added */
    rtr_msg_reader_t *next;    /* [msg lock] in msg->readers */
    rtr_msg_reader_t *prev;    /* [msg lock] in msg->readers */
};

/* rtr_msg_t: one received message's bytes and what the codec found in them.
 * The head (`data`) is written only by the receiving worker until the message is routed and
 * is read-only afterwards.  A streamed message (c.streaming) keeps arriving after it is
 * routed: its later bytes go to `chain` and the fields marked [lock] are guarded by `lock`.
 * DESIGN: copies register as readers; each reader's position says what it has sent, and the
 * receiving worker frees chain buffers every reader has passed (once the core has said how
 * many readers there will be), and stops reading (Q2) while the slowest reader lags by
 * RTR_Q2_HIGH bytes.  Whoever changes what the other side waits for posts RTR_EXT_STREAM to
 * the other's worker (the reader's `worker`, the message's `owner`); workers then re-check
 * their waiting lists, so a wake carries no pointer that could outlive its object. */
/* Segments: a message that arrived in several frames may keep its bytes where the socket
 * read them (zero-copy input, docs/decisions/0009): then `segs` lists them, each holding a
 * reference on its read buffer, `data` is the first one (the header and delivery annotations
 * lie in it: codec_scan_segs) and `cap` is 0.  Views the scan could not point into the
 * segments (a router annotation cut by a segment's end) live in `stitch`.  A message without
 * segments has no such record (it is pooled apart, so that a small message stays small). */
#define RTR_MSG_SEGS 8

typedef struct rtr_stitch rtr_stitch_t;

typedef struct rtr_msg_segs {
    codec_bytes_t     seg[RTR_MSG_SEGS]; /* their bytes, in order */
    struct rtr_rbuf  *buf[RTR_MSG_SEGS]; /* the read buffer each lies in (a reference) */
    rtr_stitch_t     *stitch;            /* memory codec_scan_segs copied into (a list) */
} rtr_msg_segs_t;

struct rtr_msg {
    core_content_t    c;             /* first: reference count shared with the core */
    uint8_t          *data;          /* the encoded message's head, contiguous (heap), or its
                                        first segment */
    size_t            len;           /* head bytes (all segments') */
    size_t            cap;           /* head bytes allocated (0 with segments) */
    uint32_t          n_seg;         /* segments (0: the head is `data`) */
    rtr_msg_segs_t   *segs;          /* with n_seg: the segments (pooled), else NULL */
    codec_scan_t      scan;          /* sections, valid once routed */
    bool              ra_in;         /* scan.ra came from a client whose annotations are kept */
    rtr_worker_t     *owner;         /* streaming: the receiving worker */
    pthread_mutex_t   lock;          /* streaming: guards the [lock] fields */
    rtr_buf_t        *chain;         /* [lock] buffers after the head, oldest kept first */
    rtr_buf_t        *chain_tail;    /* [lock] newest buffer (receiving worker only) */
    size_t            total;         /* [lock] bytes received: head + chain */
    bool              complete;      /* [lock] the last byte arrived */
    bool              aborted;       /* [lock] the sender aborted the delivery */
    bool              q2_blocked;    /* [lock] the receiving worker waits for readers */
    rtr_msg_reader_t *readers;       /* [lock] registered copies */
    uint32_t          n_readers;     /* [lock] their count */
    uint32_t          _readers_gone; /* [lock] copies that deregistered (or never could) */
};

/* Pooled (core/base/pool.h): allocated and freed on any worker. */
BASE_POOL_DECLARE(rtr_msg_t);
BASE_POOL_DECLARE(rtr_buf_t);
BASE_POOL_DECLARE(rtr_msg_segs_t);

rtr_msg_t *rtr_msg_new(void);
void       rtr_msg_unref(rtr_msg_t *m);
/* Head: make room for `more` bytes. Receiving worker, before routing. */
void rtr_msg_reserve(rtr_msg_t *m, size_t more);
/* Head: add a segment (p, len in read buffer b, whose reference m takes).  False, taking
 * nothing, when m has RTR_MSG_SEGS already or a contiguous head. */
bool rtr_msg_seg_add_WT(rtr_msg_t *m, const uint8_t *p, size_t len, struct rtr_rbuf *b);
/* Copy the head's bytes (all m->len of them, segments or not) to dst.  Any thread, once m is
 * routed (read-only). */
void rtr_msg_copy(const rtr_msg_t *m, uint8_t *dst);
/* Head: copy the segments into a contiguous head (data, cap) with room for `more` bytes
 * after them, dropping their references. */
void rtr_msg_join_WT(rtr_msg_t *m, size_t more);
/* Scan a whole message: in its segments when it keeps them (worth their buffers, and
 * codec_scan_segs can read them in place), else joined.  codec_scan's result. */
int rtr_msg_scan_WT(rtr_msg_t *m, const char **why);
/* m's bytes as a codec_segs_t (its one contiguous head, or its segments); `one` is room for
 * the first. */
static inline codec_segs_t rtr_msg_segs(const rtr_msg_t *m, codec_bytes_t *one)
{
    if (m->n_seg)
        return (codec_segs_t){.seg = m->segs->seg, .n = m->n_seg, .len = m->len};
    *one = (codec_bytes_t){m->data, m->len};
    return (codec_segs_t){.seg = one, .n = 1, .len = m->len};
}
/* The bytes at message offset off, contiguous for *room bytes (off < len; the head only). */
const uint8_t *rtr_msg_at(const rtr_msg_t *m, size_t off, size_t *room);
/* Switch a partly received message to streaming (before CORE_A_DELIVER); `owner` is the
 * receiving worker. */
void rtr_msg_stream_start_WT(rtr_msg_t *m, rtr_worker_t *owner);
/* Receiving worker: read everything Proton holds for d into the chain, unless Q2 says stop.
 * Returns true when reading stopped on Q2.  Wakes waiting readers. */
bool rtr_msg_stream_recv_WT(rtr_msg_t *m, pn_link_t *pl, pn_delivery_t *d);
/* Receiving worker: the last byte arrived, or the sender aborted. Wakes waiting readers. */
void rtr_msg_stream_end_WT(rtr_msg_t *m, bool aborted);
/* Receiving worker: the core answered for m while it still arrives, so it has routed it.
 * Q2 set before then counted every byte as unsent (some copy might still register); with
 * no copy at all, no reader will ever move it, so it is re-checked here. */
void rtr_msg_stream_answered_WT(rtr_msg_t *m);
/* Readers (any worker): register / deregister a copy; r NULL deregisters a copy that could
 * not register (its link was gone), so the receiving worker stops waiting for it. */
void rtr_msg_reader_add(rtr_msg_t *m, rtr_msg_reader_t *r);
void rtr_msg_reader_del(rtr_msg_t *m, rtr_msg_reader_t *r);
/* Reader: the next bytes for r at r->pos (up to max), or len 0 when none are there yet;
 * *complete / *aborted report the message's state.  With `buf`, bytes in a chain buffer come
 * with a reference on it (*buf; NULL for bytes of the head, which the message keeps), so they
 * stay valid after r passed them. */
codec_bytes_t rtr_msg_reader_peek(rtr_msg_t *m, rtr_msg_reader_t *r, size_t max, bool *complete,
                                  bool *aborted, rtr_buf_t **buf);
/* Drop a reference on a chain buffer taken by rtr_msg_reader_peek (any worker). */
void rtr_buf_unref(rtr_buf_t *b);
/* Reader: r sent n more bytes.  Frees nothing (the receiving worker frees).  Wakes the
 * owner on Q2 low. */
void rtr_msg_reader_advance(rtr_msg_t *m, rtr_msg_reader_t *r, size_t n);
/* Reader: returns true if r must wait (no more bytes yet), having asked to be woken. */
bool rtr_msg_reader_wait(rtr_msg_t *m, rtr_msg_reader_t *r);

#endif
