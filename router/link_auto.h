/* router/link_auto.h: the links the router attaches itself (autoLinks) and the route
 * container connections the core is told of (link_auto.c).  Included by conn.c and
 * transport.c.
 *
 * Every function is _WT: the connection's worker.
 */
#ifndef JUNCTION_ROUTER_LINK_AUTO_H
#define JUNCTION_ROUTER_LINK_AUTO_H

#include "router/link_in.h"

/* c, accepted on a listener, opened: when the listener's role is route-container, tell the
 * core (rtr_autolink_conn_announce_WT with the listener's name); else nothing. */
void rtr_autolink_conn_opened_WT(rtr_conn_t *c);
/* Tell the core that route container connection c is open (CORE_A_CONN_OPENED), as the
 * entity named `name` made it (a listener's or a connector's name, or NULL); its autoLinks
 * (containerId = the peer's container id, or connection = name) are attached on it.  A
 * connector's outgoing connection of role route-container calls this once its open arrived;
 * rtr_autolink_conn_freed_WT() then reports its end.  Once per connection. */
void rtr_autolink_conn_announce_WT(rtr_conn_t *c, const char *name);
/* c is being freed: tell the core when it was told of c's open. */
void rtr_autolink_conn_freed_WT(rtr_conn_t *c);
/* CORE_W_AUTOLINK: attach an autoLink's link on its connection (when still open). */
void rtr_autolink_attach_WT(rtr_worker_t *w, core_work_t *work);
/* The peer's attach of an autoLink's link (k->al_id != 0) arrived. */
void rtr_autolink_remote_open_WT(rtr_link_t *k);
/* The peer detached an autoLink's link (before the link's cleanup). */
void rtr_autolink_remote_close_WT(rtr_link_t *k);

#endif
