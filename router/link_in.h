/* router/link_in.h: a connection's incoming links (link_in.c): deliveries from the client's
 * senders to the core, Q2, the credit toward the sender; and a link's end in either
 * direction.  Above link_out.h; included by conn.c.
 *
 * Every function is _WT: the connection's worker only.  (rtr_conn_quiesce_WT() and
 * rtr_conn_release_all_WT(), also in link_in.c, are declared in router_int.h for worker.c.)
 */
#ifndef JUNCTION_ROUTER_LINK_IN_H
#define JUNCTION_ROUTER_LINK_IN_H

#include "router/link_out.h"

/* Forget every Proton object of link k (either direction), hand back what it held, and
 * tell the core (CORE_A_LINK_DETACH), or free k when the core never knew it. */
void rtr_link_cleanup_WT(rtr_link_t *k);
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

#endif
