/* router/link_out.h: a connection's outgoing links (link_out.c): copies from the core out to
 * the client's receivers, and every link's credit figures.  Above transport.h and msg.h;
 * included by link_in.h.
 *
 * Every function is _WT: the connection's worker only.
 */
#ifndef JUNCTION_ROUTER_LINK_OUT_H
#define JUNCTION_ROUTER_LINK_OUT_H

#include "router/msg.h"
#include "router/transport.h"
#include "router/zc_out.h"

/* Bytes handed to pn_link_send() at a time. */
#define RTR_SEND_CHUNK (64u << 10)

/* rtr_out_t: one outgoing copy on a link toward a client. Owner: that link's worker. */
struct rtr_out {
    rtr_out_t        *next;     /* in link->outs */
    rtr_out_t        *prev;     /* in link->outs */
    core_delivery_t  *in;       /* the incoming delivery to report to; NULL if presettled */
    rtr_msg_t        *msg;      /* content reference */
    pn_delivery_t    *pn;       /* once started */
    size_t            sent;     /* bytes of the message body part sent (from body_off) */
    bool              prefix_done; /* composed prefix sent */
    bool              done_sending; /* all bytes sent and the delivery advanced */
    /* streaming only */
    rtr_msg_reader_t  reader;   /* its place among the message's readers */
    bool              on_wait;  /* on worker->waiters */
    rtr_out_t        *wnext;    /* on worker->waiters */
    rtr_out_t        *wprev;    /* on worker->waiters */
    rtr_link_t       *link;     /* its link */
    char             *to_override; /* x-opt-qd.to to write (core_work_t send.to_override,
                                      heap), or NULL */
    uint8_t           to_phase;  /* with it: x-opt-qd.phase, 0 for none */
    bool              to_router; /* core_work_t send.to_router */
    /* zero-copy output (router/zc_out.h): the prefix's pieces not yet in a share */
    rtr_zc_blob_t    *zc_blob;  /* the composed prefix bytes (a reference), or NULL */
    rtr_zc_piece_t   *zc_pre;   /* the prefix's pieces: zc_pre_in, or heap when more */
    uint32_t          zc_pre_n;   /* pieces */
    uint32_t          zc_pre_cap; /* room in zc_pre (0: none yet) */
    uint32_t          zc_pre_i;   /* first piece not completely in a share */
    size_t            zc_pre_off; /* bytes of it already in a share */
    rtr_zc_piece_t    zc_pre_in[RTR_ZC_PRE_IN]; /* room for a prefix's usual pieces */
};

/* Pooled (core/base/pool.h): allocated and freed on its link's worker. */
BASE_POOL_DECLARE(rtr_out_t);

/* Put outgoing link k on its connection's pump list (pumped in rtr_conn_process_WT). */
void rtr_link_schedule_pump_WT(rtr_link_t *k);
/* Push k's queued copies into Proton while the receiver has credit, the session has room
 * and the connection's output budget allows. */
void rtr_link_pump_WT(rtr_link_t *k);
/* CORE_W_SEND: queue a copy on outgoing link k (released at once when k is gone; a
 * presettled one is dropped when the receiver is not keeping up). */
void rtr_on_send_WT(rtr_worker_t *w, rtr_link_t *k, core_work_t *work);
/* The context of a delivery on a sending link that the router made and is done with: a
 * delivery there without a context was made by Proton from the peer's transfer. */
extern char rtr_dlv_forgotten;
#define RTR_DLV_FORGOTTEN ((void *)&rtr_dlv_forgotten)

/* The receiver settled (or updated) an outgoing copy: its outcome goes to the core.
 * Returns false when d is not the router's but a transfer from the receiver (the caller
 * closes the link: rtr_link_errant_transfer_WT()). */
bool rtr_out_update_WT(rtr_link_t *k, pn_delivery_t *d);
/* The link is going: report every copy not settled to the core and free them all. */
void rtr_link_out_cleanup_WT(rtr_link_t *k);
/* The router saw link k's credit (either direction): creditAvailable, and the start or end
 * of a zero run (zeroCreditSeconds, linksBlocked). */
void rtr_link_credit_seen_WT(rtr_link_t *k, int credit);
/* Once a second (the worker's sweep timer): every link's credit (creditAvailable),
 * zero-credit time (zeroCreditSeconds) and whether it has been blocked long enough to count
 * in the router's linksBlocked. */
void rtr_conn_sweep_WT(rtr_worker_t *w);

#endif
