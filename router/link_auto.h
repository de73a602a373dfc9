/* router/link_auto.h: the links the router attaches itself (autoLinks) and the route
 * container connections the core is told of (link_auto.c).  Included by conn.c and
 * transport.c.
 *
 * Every function is _WT: the connection's worker.
 */
#ifndef JUNCTION_ROUTER_LINK_AUTO_H
#define JUNCTION_ROUTER_LINK_AUTO_H

#include "router/link_in.h"

/* c (a route container's) opened: tell the core (CORE_A_CONN_OPENED).  Any other
 * connection: nothing.  A connector's connection calls it as well once it is open. */
void rtr_autolink_conn_opened_WT(rtr_conn_t *c);
/* c is being freed: tell the core when it was told of c's open. */
void rtr_autolink_conn_freed_WT(rtr_conn_t *c);
/* CORE_W_AUTOLINK: attach an autoLink's link on its connection (when still open). */
void rtr_autolink_attach_WT(rtr_worker_t *w, core_work_t *work);
/* The peer's attach of an autoLink's link (k->al_id != 0) arrived. */
void rtr_autolink_remote_open_WT(rtr_link_t *k);
/* The peer detached an autoLink's link (before the link's cleanup). */
void rtr_autolink_remote_close_WT(rtr_link_t *k);

#endif
