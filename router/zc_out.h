/* router/zc_out.h: zero-copy output (issue 18, docs/decisions/0009 "Output without
 * copies") - the payload of an outgoing copy goes to the socket beside Proton instead of
 * through it.  For each frame of an outgoing transfer the link layer (link_out.c) gives Proton
 * ONE placeholder byte and records the frame's share of the message (pieces of the message's
 * memory, kept alive by a reference on it) in its link's FIFO; the writer here follows
 * Proton's output byte stream frame by frame, learns (channel, handle) -> FIFO from the
 * router's own attach frames (detach and end unbind), and for each transfer frame whose
 * payload is the placeholder writes the frame header with its size rewritten, Proton's
 * performative, then the share's pieces - all of it with writev.  Proton counts each frame
 * in its session window exactly as it would a real payload (proved in
 * tests/unit/router/proton_payload_test.c, test_output_placeholders_spliced).
 *
 * Scope: every connection (plain TCP, WebSocket socketpairs, TLS), link_out's message-routed
 * copies.  The other pn_link_send users (linkroute.c, edgeconn.c, irconn.c, edge_lookup.c)
 * keep the old path: their frames pass through the writer unchanged.
 *
 * Layer: between transport.c (which calls rtr_zc_write_WT for a plain connection, and
 * rtr_zc_put_WT to hand a TLS connection's bytes to its session) and
 * link_out.c (which makes the shares); the writer calls back into the link layer
 * (rtr_link_pump_WT) for links waiting for their next placeholder once Proton framed the
 * previous one, so a multi-frame message does not wait a loop iteration per frame.
 *
 * Every function is _WT: the connection's worker only.
 */
#ifndef JUNCTION_ROUTER_ZC_OUT_H
#define JUNCTION_ROUTER_ZC_OUT_H

#include "router/msg.h"
#include "router/transport.h"

/* The most a transfer performative from Proton takes on a link in placeholder mode (our
 * delivery tags are 8 bytes; checked against every frame spliced). */
#define RTR_ZC_PERF_BOUND 96u
/* The largest share of one frame (a peer with no or a very large max-frame-size). */
#define RTR_ZC_SHARE_CAP  (256u << 10)
/* Pieces of one share at most (prefix pieces and body slices). */
#define RTR_ZC_PIECES_MAX 32
/* Pieces of a prefix an outgoing copy holds without allocating (a composed prefix has at most
 * CODEC_COMPOSE_IOV_MAX, and one more per segment or cut delivery annotations). */
#define RTR_ZC_PRE_IN 8
/* Chain buffers of a streamed message one share holds at most (a share of RTR_ZC_SHARE_CAP
 * spans at most 5 of RTR_BUF_SIZE). */
#define RTR_ZC_BUFS_MAX   8

/* Composed bytes of an outgoing copy's prefix (a fresh message-annotations section),
 * shared by the shares pointing into it. */
typedef struct rtr_zc_blob {
    uint32_t refs;
    uint32_t size; /* bytes allocated, record included (base_buf_alloc) */
    uint8_t  data[];
} rtr_zc_blob_t;

typedef struct rtr_zc_piece {
    const uint8_t *p;
    size_t         len;
} rtr_zc_piece_t;

/* One frame's share of an outgoing copy: what replaces its placeholder. */
typedef struct rtr_zc_share rtr_zc_share_t;
struct rtr_zc_share {
    rtr_zc_share_t *next;   /* in its FIFO */
    rtr_msg_t      *msg;    /* reference held: the pieces point into its head */
    rtr_zc_blob_t  *blob;   /* reference held, or NULL */
    rtr_buf_t      *bufs[RTR_ZC_BUFS_MAX]; /* chain buffers of a streamed message its
                                               pieces point into, a reference held on each */
    uint32_t        n_bufs; /* how many */
    size_t          len;    /* bytes in all */
    uint32_t        n;      /* pieces */
    rtr_zc_piece_t  pieces[];
};

/* The shares of one outgoing link in placeholder mode, oldest first.  Owned by the
 * connection's zero-copy state (it outlives the link record while Proton's output still
 * holds the link's frames). */
/* Its mode: chosen at the link's first pump (its first copy); a link never mixes the two. */
enum {
    RTR_ZC_UNDECIDED, /* no copy sent yet */
    RTR_ZC_ACTIVE,    /* placeholder mode: every transfer frame of the link takes a share */
    RTR_ZC_PASSIVE,   /* the old path (a link-routed link, or a name another link of the
                         connection has): the record only keeps the attach frames' order */
};

typedef struct rtr_zc_fifo rtr_zc_fifo_t;
struct rtr_zc_fifo {
    rtr_zc_fifo_t  *next;    /* in the connection's list, oldest link first */
    rtr_link_t     *link;    /* NULL once the link record forgot it */
    char           *name;    /* the link's name: its attach frame binds the FIFO (the oldest
                                unbound FIFO of that name: Proton writes attaches in the
                                order the links were made) */
    uint8_t         mode;    /* RTR_ZC_* */
    bool            bound;   /* its attach was written: a (channel, handle) names it */
    bool            done;    /* its detach (or its session's end) was written */
    bool            want;    /* the link waits for Proton to frame its last placeholder */
    rtr_zc_share_t *head;
    rtr_zc_share_t *tail;
};

typedef struct rtr_zc_conn rtr_zc_conn_t;

/* A connection's writer state; rtr_zc_conn_free_WT() drops every share it holds. */
rtr_zc_conn_t *rtr_zc_conn_new_WT(void);
void           rtr_zc_conn_free_WT(rtr_conn_t *c);

/* A new outgoing link k (rtr_link_new_WT, before anything of it can be written): its FIFO
 * record (k->zc); passive when another link of the connection whose
 * frames may still come has its name (the attach frames must name one FIFO each). */
void rtr_zc_link_new_WT(rtr_link_t *k);
/* Link k's first pump: is it in placeholder mode?  (Not a link-routed link.) */
bool rtr_zc_link_active_WT(rtr_link_t *k);
/* Link k's record goes: its FIFO stays (its frames may still be in Proton's output). */
void rtr_zc_link_gone_WT(rtr_link_t *k);
/* The largest share of one frame on c (remote max-frame-size less the header and the
 * performative's bound). */
size_t rtr_zc_share_max_WT(rtr_conn_t *c);
/* Queue share s (its references taken) for the placeholder the caller gives Proton next. */
void rtr_zc_push_WT(rtr_conn_t *c, rtr_zc_fifo_t *f, rtr_zc_share_t *s);
/* The newest share of f will never be framed (its delivery was aborted before Proton framed
 * its placeholder): drop it. */
void rtr_zc_drop_tail_WT(rtr_conn_t *c, rtr_zc_fifo_t *f);
/* Free a share (its references dropped). */
void rtr_zc_share_free(rtr_zc_share_t *s);
/* A blob of len bytes, one reference (pooled: composing one per outgoing message). */
rtr_zc_blob_t *rtr_zc_blob_new(size_t len);
void rtr_zc_blob_unref(rtr_zc_blob_t *b);

/* Placeholders given and not yet framed on c, and their shares' bytes (for the output
 * budget: Proton's outgoing bytes count the placeholders, the budget the real bytes). */
void rtr_zc_unframed_WT(const rtr_conn_t *c, size_t *placeholders, size_t *bytes);

/* Write what Proton framed, splicing the shares in (transport.c's rtr_conn_write_WT for a
 * plain connection): uv_try_write while the socket takes it, then one uv_write (callback
 * cb, which calls rtr_zc_written_WT with c->wlen).  Returns true when the socket took
 * everything Proton framed (the budgets start again). */
bool rtr_zc_write_WT(rtr_conn_t *c, uv_write_cb cb);
/* The same for a TLS connection: the bytes go to put() (the TLS session, which keeps what it
 * takes), in order, while it takes them all; Proton's bytes and the shares are given back as
 * soon as put() took them.  put returns the bytes it took (fewer than n: no room for more
 * now), or < 0 on failure (Proton's output is then closed).  Returns true when put() took
 * everything Proton framed. */
typedef long (*rtr_zc_put_fn)(void *ctx, const void *p, size_t n);
bool rtr_zc_put_WT(rtr_conn_t *c, rtr_zc_put_fn put, void *ctx);
/* The uv_write of n bytes (c->wlen) ended well. */
void rtr_zc_written_WT(rtr_conn_t *c, size_t n);

#endif
