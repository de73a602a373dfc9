/* router/zin.h: the zero-copy input (issue 18, docs/decisions/0009) - an incoming transfer's
 * payload does not pass through Proton.
 *
 * A connection's input lands in its own reference-counted read buffers (rtr_rbuf_t): the
 * socket's bytes, or on a TLS connection the plaintext its session decrypts.  The frame guard (codec/frame.h, split mode) hands Proton every frame
 * without its extended header and every transfer without its payload, its frame size
 * rewritten: Proton accounts such a transfer exactly as one with its payload (0009).  The
 * payload becomes slices of the read buffer (rtr_zent_t), queued for the link the frame's
 * (channel, handle) names (rtr_zq_t): the guard reports the peer's attach (name), detach, end
 * and close frames, and the queue is found from a Proton link by its name when Proton first
 * announces a delivery on it (rtr_zin_delivery_event_WT, claimed with a reference on the
 * pn_link_t).  Link names are unique per connection and direction (AMQP 2.6.1); should a
 * peer attach a second sender of a name still attached, the name no longer tells the links
 * apart, so the new one's transfers go to Proton whole (and the first one's too, unless a
 * Proton link claimed its queue already; if payloads of it are queued unclaimed, the peer
 * loses its connection: framing-error).
 *
 * Which delivery a slice belongs to: each queue numbers its deliveries as Proton does
 * (pn_do_transfer: a new delivery unless a multi-frame one is pending and the frame carries
 * no other delivery-id), and each Proton delivery gets the next number when its first
 * PN_DELIVERY event is dispatched (events come in frame order).  A reader takes the slices of
 * its delivery's number; slices of an earlier number are dropped on the way (an aborted
 * delivery, or one the router settled before its last frame, whose rest Proton skips), so the
 * next delivery never takes stale bytes.
 *
 * rtr_link_recv_WT / rtr_delivery_pending_WT have pn_link_recv's and pn_delivery_pending's
 * semantics and fall back to them for a link without a queue.
 *
 * Memory: the connection's queued payload bytes are c->zin.queued (the input budget,
 * RTR_CONN_IN_MAX in transport.h); slices of links the router closed, and of queues whose
 * link was detached, are freed at the end of each pass over the connection's events
 * (rtr_zin_sweep_WT).  A slice pins its whole read buffer: a message may keep its slices
 * (rtr_link_take_WT) only when they are a fair share of the buffers they pin (link_in.c).
 *
 * Every function is _WT (the connection's worker only) but rtr_rbuf_unref.
 */
#ifndef JUNCTION_ROUTER_ZIN_H
#define JUNCTION_ROUTER_ZIN_H

#include "codec/frame.h"
#include "router/ctx.h"
#include "router/hmap.h"

#include <proton/types.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Read buffers: RTR_ZIN_READ bytes (the worker keeps a few spare), or a large frame's rest
 * (at most RTR_ZIN_READ_MAX). */
#define RTR_ZIN_READ     (64u << 10)
#define RTR_ZIN_READ_MAX (1u << 20)
/* What one queued slice counts in the input budget beside its bytes (its record, and the
 * frame header and performative that came with it). */
#define RTR_ZENT_COST 64u

typedef struct rtr_rbuf rtr_rbuf_t;
typedef struct rtr_zent rtr_zent_t;
typedef struct rtr_zq   rtr_zq_t;

/* A read buffer: socket bytes, shared by the slices that point into it and by the messages
 * whose bytes were left in it (rtr_msg_t's segments, freed on any thread). */
struct rtr_rbuf {
    atomic_uint refs; /* messages' segments (any thread), + 1 while `local` is not 0 */
    uint32_t local;  /* the connection's worker's: its current buffer (1) + queued slices */
    size_t   size;   /* bytes allocated, record included (base_buf_alloc) */
    uint32_t cap;    /* bytes allocated in data */
    uint32_t queued; /* payload bytes of queued slices in it (the worker's, as `local`) */
    uint32_t len;    /* bytes read into data */
    uint8_t  data[]; /* the bytes */
};

/* A slice of a transfer's payload. */
struct rtr_zent {
    rtr_zent_t *next; /* in its queue, frame order */
    rtr_rbuf_t *buf;  /* holds a reference */
    uint32_t    off;  /* first byte in buf->data */
    uint32_t    len;  /* bytes not yet taken */
    uint64_t    seq;  /* its delivery's number in the queue */
};

/* The payloads for one link of the peer (its attach: a sender). */
struct rtr_zq {
    rtr_zq_t   *next;         /* in zin->queues, oldest first */
    struct rtr_zin *zin;      /* its connection's */
    char       *name;         /* the link's name (heap, NUL-terminated) */
    size_t      name_len;     /* its length (a name may hold a NUL: then it matches nothing) */
    bool        bound;        /* its (channel, handle) still names it (zin->links): no detach
                                 or end yet */
    bool        whole;        /* a name attached twice: its transfers go to Proton whole */
    bool        more_pending; /* Proton's link->more_pending, mirrored */
    uint32_t    more_id;      /* Proton's link->more_id, mirrored */
    bool        claimed;      /* a Proton link claimed it (pl, until Proton finalizes it) */
    pn_link_t  *pl;           /* that link, or NULL: unclaimed, or finalized by Proton
                                 (PN_LINK_FINAL: rtr_zin_link_final_WT) */
    rtr_zent_t *head;         /* slices, oldest first */
    rtr_zent_t *tail;         /* newest */
    size_t      bytes;        /* their bytes */
    uint64_t    enq_seq;      /* deliveries begun by the frames queued */
    uint64_t    ev_seq;       /* deliveries Proton announced (numbers given) */
    uint64_t    read_seq;     /* the highest number a reader asked for */
    uint64_t    live_seq;     /* deliveries numbered below it were aborted or passed */
};

/* Per connection (rtr_conn_t.zin). */
typedef struct rtr_zin {
    bool               sweep;     /* a queue changed: rtr_zin_sweep_WT has work */
    rtr_rbuf_t        *rb;        /* the buffer reads land in, or NULL (idle) */
    uint8_t           *stage;     /* bytes for Proton it has not taken yet: the worker's room
                                     while a read is fed, else the connection's own (heap,
                                     stage_own) when Proton left some, else NULL */
    size_t             stage_len; /* bytes in stage */
    size_t             stage_off; /* bytes of stage Proton took */
    size_t             stage_cap; /* bytes allocated */
    bool               stage_own; /* stage is the connection's (heap) */
    rtr_zq_t          *queues;    /* oldest first */
    rtr_zq_t          *queues_tail; /* newest */
    rtr_hmap_t         links;     /* (channel, handle) -> the queue an attach made: bound ones */
    rtr_zq_t          *xfer;      /* the queue the current payload goes to, or NULL: dropped */
    size_t             queued;    /* payload bytes queued, all queues, + RTR_ZENT_COST per
                                     slice (RTR_CONN_IN_MAX) */
    uint8_t            held_in[96]; /* the current transfer's frame for Proton, given to it
                                       once its payload is all here */
    uint8_t           *held;      /* the same when longer (heap), else NULL */
    uint32_t           held_len;  /* its bytes */
    uint32_t           xfer_left; /* payload bytes of the current transfer still to come */
    codec_guard_sink_t sink;      /* the guard's callbacks (ctx: the connection) */
} rtr_zin_t;

/* Split mode for c (every connection: TCP, TLS or WebSocket), before any byte is read. */
void rtr_zin_init_WT(rtr_conn_t *c);
/* Free everything, right before Proton's objects go (pn_connection_driver_destroy): no Proton
 * object is touched (the links may be freed already). */
void rtr_zin_fini_WT(rtr_conn_t *c);

/* The buffer for the next socket read (len 0: do not read now). */
void rtr_zin_alloc_WT(rtr_conn_t *c, char **base, size_t *len);
/* n bytes were read into the current buffer: through the guard (payloads queued, the rest
 * staged for Proton), then to Proton.  Returns the guard's result (0, or CODEC_INVALID:
 * nothing of these bytes reached Proton). */
int rtr_zin_read_WT(rtr_conn_t *c, size_t n);
/* Give Proton what it can take of the staged bytes.  True when nothing is left staged. */
bool rtr_zin_push_WT(rtr_conn_t *c);
/* Bytes staged for Proton that it has not taken (reading waits for them). */
static inline bool rtr_zin_stalled(const rtr_zin_t *z)
{
    return z->stage_off < z->stage_len;
}

/* A PN_DELIVERY event on c (before it is dispatched): a receiver's delivery gets its number
 * in its link's queue, the queue claimed on the link's first. */
void rtr_zin_delivery_event_WT(rtr_conn_t *c, pn_delivery_t *d);
/* PN_LINK_FINAL: Proton frees pl once the event is done; its queue forgets it (a queue holds
 * no Proton reference: one kept past its session's end made Proton free the session twice). */
void rtr_zin_link_final_WT(rtr_conn_t *c, pn_link_t *pl);
/* The router settles d before its last frame: the rest of its payload, which Proton skips,
 * is dropped as it comes instead of waiting, counted in the input budget, for the link's next
 * delivery. */
void rtr_zin_delivery_settled_WT(rtr_conn_t *c, pn_delivery_t *d);
/* After a pass over c's events: free detached queues and the slices of links the router
 * closed. */
void rtr_zin_sweep_WT(rtr_conn_t *c);

/* The next slice of pl's current delivery (at most max bytes of it), taken out of its queue:
 * *p and *len its bytes, *buf the read buffer they lie in, with a reference for the caller
 * (rtr_rbuf_unref).  False when none is in hand, or pl has no queue (rtr_link_recv_WT reads
 * it then). */
bool rtr_link_take_WT(pn_link_t *pl, size_t max, const uint8_t **p, size_t *len,
                      rtr_rbuf_t **buf);
/* Drop a reference taken with rtr_link_take_WT: any thread. */
void rtr_rbuf_unref(rtr_rbuf_t *b);

/* pn_link_recv of the link's current delivery: its next bytes, 0 while more may come,
 * PN_EOS once complete, PN_ABORTED. */
ssize_t rtr_link_recv_WT(pn_link_t *pl, char *buf, size_t n);
/* pn_delivery_pending: bytes of d in hand (d: its link's current delivery). */
size_t rtr_delivery_pending_WT(pn_delivery_t *d);

#endif
