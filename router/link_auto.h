/* router/link_auto.h: the links the router attaches itself (autoLinks) and the route
 * container connections the core is told of (link_auto.c).  Included by conn.c,
 * transport.c and link_in.c.
 *
 * Every function is _WT: the connection's worker.
 */
#ifndef JUNCTION_ROUTER_LINK_AUTO_H
#define JUNCTION_ROUTER_LINK_AUTO_H

#include "router/conn_watch.h"
#include "router/link_in.h"

/* The conn_watch callback (router/conn_watch.h; arg: the rtr_ctx_t), set by rtr_ctx_init:
 * a connection of role route-container that opened - accepted on a listener or made by a
 * connector - is announced to the core with the listener's or connector's name (as in
 * qdrouterd, other roles get no autoLinks).  Its end is reported by
 * rtr_autolink_conn_freed_WT(). */
void rtr_autolink_watch_WT(void *arg, const rtr_conn_info_t *ci, bool open);
/* Tell the core that route container connection c is open (CORE_A_CONN_OPENED), as the
 * entity named `name` made it (a listener's or a connector's name, or NULL); its autoLinks
 * (containerId = the peer's container id, or connection = name) are attached on it;
 * rtr_autolink_conn_freed_WT() then reports its end.  Once per connection. */
void rtr_autolink_conn_announce_WT(rtr_conn_t *c, const char *name);
/* c is being freed: tell the core when it was told of c's open. */
void rtr_autolink_conn_freed_WT(rtr_conn_t *c);
/* The peer ended session s of c: its autoLink's link is gone without a detach (RabbitMQ
 * ends the session on a refused attach or an outcome it does not know): it is reported
 * failed, with the end's error, and attached again later.  Before the links' cleanup. */
void rtr_autolink_session_end_WT(rtr_conn_t *c, pn_session_t *s);
/* CORE_W_AUTOLINK: attach an autoLink's link on its connection (when still open). */
void rtr_autolink_attach_WT(rtr_worker_t *w, core_work_t *work);
/* How many more sessions the router may begin on c: both ends' channel-max + 1 (the lower),
 * less the sessions c has begun and not yet freed; *limit (when not NULL) gets that bound.
 * Proton itself finds a session beyond it no channel only when it writes the begin, and
 * then ends the whole connection: the router's own sessions check first. */
uint32_t rtr_conn_sessions_left_WT(rtr_conn_t *c, uint32_t *limit);
/* A link was freed from session s: an autoLink's session (one per autoLink) is ended with
 * it; any other session is left as it is. */
void rtr_autolink_link_freed_WT(pn_session_t *s);
/* The peer's attach of an autoLink's link (k->al_id != 0) arrived. */
void rtr_autolink_remote_open_WT(rtr_link_t *k);
/* The peer detached an autoLink's link (before the link's cleanup). */
void rtr_autolink_remote_close_WT(rtr_link_t *k);
/* The router detaches an autoLink's link (k->al_id != 0) with error `cond`/`desc` for what
 * the peer did on it (a transfer without credit): the autoLink is failed, with the error in
 * lastError, and attached again later.  Before the link's cleanup; the caller logs. */
void rtr_autolink_closed_WT(rtr_link_t *k, const char *cond, const char *desc);

#endif
