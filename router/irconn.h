/* router/irconn.h: an inter-router connection's own layer (interior mode) - the open's
 * properties qdrouterd 1.19 sends and reads, the control and data links it attaches, and
 * the routing messages that travel on the control links between the worker and the core
 * (core/rt.h).
 *
 * As qdrouterd: the connector's side attaches the links - the two control links (receiver,
 * then sender) on one session, then for each priority 0..9 a data receiver and a data
 * sender on a session of their own - every terminus without an address, its capability a
 * bare `qd.router` / `qd.router-data` symbol.  The listener's side classifies the peer's
 * attaches by that capability (a bare symbol or an array's first element) and answers them,
 * late ones too (qdrouterd's streaming data links).  A routing message that arrives on the
 * incoming control link goes to the core whole (CORE_A_RT); the core's messages
 * (CORE_W_RT_SEND) go out pre-settled on the outgoing control link, queued until it has
 * credit.  The data links are handed to the ordinary link layers and announced to the core
 * as the connection's data links (attach.ir_link, ir_priority; core/interior.h), whose
 * forwarder carries client messages between routers on them.
 *
 * Every function is _WT: the connection's worker only.
 */
#ifndef JUNCTION_ROUTER_IRCONN_H
#define JUNCTION_ROUTER_IRCONN_H

#include "router/transport.h"

#include <proton/event.h>

/* PN_CONNECTION_INIT of a connection of role inter-router: c->ir, its open's capabilities
 * and properties (added to what conn.c put there), no annotation stripping. */
void rtr_ir_init_WT(rtr_conn_t *c);
/* The peer's open came: the effective cost, the core told, the connector's links attached. */
void rtr_ir_opened_WT(rtr_conn_t *c);
/* An event of c (which has c->ir): true when it concerned an inter-router link and was
 * handled here; false for conn.c to handle. */
bool rtr_ir_event_WT(rtr_conn_t *c, pn_event_t *e);
/* A peer's attach that conn.c is about to take as an ordinary link: refused (true) as
 * qdrouterd refuses it - an inter-router link on a connection of another role
 * (qd:forbidden), an endpoint's link on an inter-router connection before its control link
 * exists (qd:connection-role). */
bool rtr_ir_attach_refused_WT(rtr_conn_t *c, pn_link_t *pl);
/* CORE_W_RT_SEND. */
void rtr_ir_send_WT(rtr_worker_t *w, core_work_t *work);
/* c is being freed (its Proton objects are gone): tell the core, free c->ir. */
void rtr_ir_free_WT(rtr_conn_t *c);

#endif
