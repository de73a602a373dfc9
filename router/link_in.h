/* router/link_in.h: a connection's incoming links (link_in.c): deliveries from the client's
 * senders to the core, Q2, the credit toward the sender; and a link's end in either
 * direction.  Above link_out.h; included by conn.h.
 *
 * Every function is _WT: the connection's worker only.
 */
#ifndef JUNCTION_ROUTER_LINK_IN_H
#define JUNCTION_ROUTER_LINK_IN_H

#include "router/link_out.h"

/* Largest message prefix (sections before the body) the router accepts. */
#define RTR_PREFIX_MAX (1u << 20)
/* Head room given at once to a message that arrives in several frames. */
#define RTR_HEAD_FIRST_PARTIAL (64u << 10)
/* A message still arriving after this many bytes is routed at once and streamed. */
#define RTR_STREAM_THRESHOLD (256u << 10)
/* A message that comes whole in one frame keeps its bytes in the read buffer (rather than a
 * copy) from this size on. */
#define RTR_MSG_SEG_MIN (8u << 10)

/* rtr_in_t: an incoming delivery (the client's transfer to the router). Owner: the worker
 * of its connection. Freed when both the worker (Proton side done) and the core (posted
 * CORE_W_SETTLE/RELEASE) are done with it. */
struct rtr_in {
    core_delivery_t dlv;      /* first: what the core sees */
    rtr_link_t     *link;     /* NULL once the link is gone */
    pn_delivery_t  *pn;       /* NULL once settled or the link is gone */
    rtr_msg_t      *msg;      /* our content reference */
    rtr_in_t       *prev;     /* in link->ins */
    rtr_in_t       *next;     /* in link->ins */
    bool            at_core;  /* posted to the core */
    bool            core_done; /* the core answered (CORE_W_SETTLE / CORE_W_RELEASE) */
    bool            has_final; /* `final` holds the outcome to give the sender */
    bool            discard;  /* drop the rest of the bytes, then reject (or drop) */
    const char     *discard_why; /* static reason for the rejection */
    bool            discard_policy; /* refused by vhost policy: amqp:unauthorized-access, not
                                       amqp:decode-error */
    size_t          head_limit; /* bytes to gather before routing it as a stream */
    core_disposition_t final; /* the core's outcome, kept until the last byte arrived */
};

/* Pooled (core/base/pool.h): allocated by its link's worker, freed there. */
BASE_POOL_DECLARE(rtr_in_t);

/* Forget every Proton object of link k (either direction), hand back what it held, and
 * tell the core (CORE_A_LINK_DETACH), or free k when the core never knew it. */
void rtr_link_cleanup_WT(rtr_link_t *k);
/* Close link k with an AMQP error (logged by the caller), and forget it as on a detach:
 * its deliveries are handed back, an autoLink's link fails the autoLink (lastError: desc),
 * a link-routed link's other end is detached with the same error; k may be freed. */
void rtr_link_close_error_WT(rtr_link_t *k, const char *name, const char *desc);
/* A transfer from the peer on k, a link where the router sends (rtr_out_update_WT() said so,
 * or a link route's sending end saw one): k is closed, and its connection ends with
 * amqp:not-allowed (its one line is the transport error's). */
void rtr_link_errant_transfer_WT(rtr_link_t *k);
/* A link record for Proton link pl of c (attached by the peer, or by the router for an
 * autoLink or a link route), counted and listed on c, with pl's context set to it. */
rtr_link_t *rtr_link_new_WT(rtr_conn_t *c, pn_link_t *pl, bool out);
/* PN_DELIVERY on incoming link k: read what arrived of d, route it once its sections before
 * the body are here, stream the rest (Q2 permitting). */
void rtr_in_delivery_WT(rtr_link_t *k, pn_delivery_t *d);
/* CORE_W_LINK_CREDIT: the core wants the sender to have credit (grant) or not (drain). */
void rtr_on_link_credit_WT(rtr_link_t *k, bool grant);
/* PN_LINK_FLOW on incoming link k: the sender may have answered a drain. */
void rtr_link_flow_in_WT(rtr_link_t *k);
/* Before c's next write: reconcile the credit of every link that asked for it. */
void rtr_conn_credit_sync_WT(rtr_conn_t *c);
/* CORE_W_SETTLE / CORE_W_RELEASE: the core's answer for an incoming delivery. */
void rtr_on_settle_WT(rtr_worker_t *w, core_work_t *work);
void rtr_on_release_WT(rtr_worker_t *w, core_work_t *work);
/* RTR_EXT_STREAM: resume streamed copies waiting for bytes and links stopped by Q2. */
void rtr_on_stream_wake_WT(rtr_worker_t *w);
/* Shutdown: stop granting credit on every incoming link of the worker (drain). */
void rtr_conn_quiesce_WT(rtr_worker_t *w);
/* Shutdown, at the end of the grace period: give RELEASED to every delivery a client sent
 * that is still waiting for its outcome, so its sender may send it elsewhere. */
void rtr_conn_release_all_WT(rtr_worker_t *w);

#endif
