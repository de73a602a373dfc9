/* router/link_out.h: a connection's outgoing links (link_out.c): copies from the core out to
 * the client's receivers, and every link's credit figures.  Above transport.h; included by
 * link_in.h and conn.c.
 *
 * Every function is _WT: the connection's worker only.
 */
#ifndef JUNCTION_ROUTER_LINK_OUT_H
#define JUNCTION_ROUTER_LINK_OUT_H

#include "router/transport.h"

/* Put outgoing link k on its connection's pump list (pumped in rtr_conn_process_WT). */
void rtr_link_schedule_pump_WT(rtr_link_t *k);
/* Push k's queued copies into Proton while the receiver has credit, the session has room
 * and the connection's output budget allows. */
void rtr_link_pump_WT(rtr_link_t *k);
/* CORE_W_SEND: queue a copy on outgoing link k (released at once when k is gone; a
 * presettled one is dropped when the receiver is not keeping up). */
void rtr_on_send_WT(rtr_worker_t *w, rtr_link_t *k, core_work_t *work);
/* The receiver settled (or updated) an outgoing copy: its outcome goes to the core. */
void rtr_out_update_WT(rtr_link_t *k, pn_delivery_t *d);
/* The link is going: report every copy not settled to the core and free them all. */
void rtr_link_out_cleanup_WT(rtr_link_t *k);
/* The router saw link k's credit (either direction): creditAvailable, and the start or end
 * of a zero run (zeroCreditSeconds, linksBlocked). */
void rtr_link_credit_seen_WT(rtr_link_t *k, int credit);

#endif
