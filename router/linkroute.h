/* router/linkroute.h: link-routed links on the workers - a client's link proxied frame by
 * frame to a link the router attaches on a route container's connection (qdrouterd's link
 * routes; the core decides where, core/linkroute.h; docs/decisions/0006).
 *
 * A link-routed link is a pair of ends: end 0 the client's link (announced to the core, which
 * answered CORE_W_LINK_ATTACHED with `routed`), end 1 the router's link on the route
 * container's connection.  The two connections may belong to different workers: the ends talk
 * through their workers' inboxes (RTR_EXT_LR), never through the core, and each end touches
 * only its own worker's Proton objects.  Every frame of the link is carried: attach (termini,
 * settle modes), flow (credit, drain), transfers (every frame's bytes, aborts), dispositions
 * and settlement both ways, detach with the peer's error.
 *
 * Threads: every function is _WT (the worker of the link or connection named) except
 * rtr_lr_msg_WT, which runs on the worker the message was posted to.
 */
#ifndef JUNCTION_ROUTER_LINKROUTE_H
#define JUNCTION_ROUTER_LINKROUTE_H

#include "router/conn_watch.h"
#include "router/transport.h"

/* The core routed k's attach (end 0): start the pair; takes `routed` (core_lr_target_t). */
void rtr_lr_start_WT(rtr_link_t *k, core_lr_target_t *routed);

/* Proton's events on a link-routed link (k->lr set). */
void rtr_lr_remote_open_WT(rtr_link_t *k);
void rtr_lr_flow_WT(rtr_link_t *k);
void rtr_lr_delivery_WT(rtr_link_t *k, pn_delivery_t *d);
/* k is going away (its peer detached it, its session or connection ended): the other end
 * is detached with the peer's error, or qd:routed-link-lost when the connection went. */
void rtr_lr_end_WT(rtr_link_t *k);

/* After c's output was written: the messages of link-routed links waiting for the output
 * budget go to Proton while it allows (c->n_lr_backlog), and a drain waiting for its queued
 * transfers to go out is answered (c->lr_drain_due).  Returns true when something new is to
 * be written. */
bool rtr_lr_conn_written_WT(rtr_conn_t *c);

/* A message from the other end of a pair (RTR_EXT_LR's ptr).  _drop: free one that was
 * never handled (its worker stopped first; any thread, once the workers are gone). */
void rtr_lr_msg_WT(rtr_worker_t *w, void *msg);
void rtr_lr_msg_drop(void *msg);

/* A link on session s was freed: the session a router's link toward a route container had
 * to itself ends with it. */
void rtr_lr_link_freed_WT(pn_session_t *s);


#endif
