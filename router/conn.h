/* router/conn.h: a connection as its worker sees it - the top of a connection's layers
 * (router/DESIGN.md "A connection's layers"): the entry points worker.c calls, from its
 * inbox, its timers and its shutdown.  Includes link_in.h (and so every layer below it);
 * included by worker.c only.
 *
 * Every function is _WT: the worker w, or c's worker.
 */
#ifndef JUNCTION_ROUTER_CONN_H
#define JUNCTION_ROUTER_CONN_H

#include "router/link_in.h"

/* Serve socket fd as an AMQP connection of listener l; ws NULL = a TCP client, else a
 * WebSocket's socketpair with its client's "host:port" and TLS session (borrowed).  Takes fd
 * (closed on failure). */
void rtr_conn_accept_WT(rtr_worker_t *w, int fd, const cfg_listener_t *l, const rtr_accept_t *ws);
/* Serve connected socket fd as the outgoing connection of connector ct (Proton's client
 * side: SASL client, the router's open first).  Takes fd (closed on failure; the connector
 * hears of the end through rtr_connector_closed). */
void rtr_conn_connect_WT(rtr_worker_t *w, int fd, struct rtr_connector *ct);

/* Close c (with the condition set on it, else amqp:connection:forced "router shutting
 * down"); it is freed once its handles closed and its links are gone. */
void rtr_conn_close_WT(rtr_conn_t *c);
/* RTR_EXT_CLOSE_CONN: close connection `id` with amqp:connection:forced when w owns it. */
void rtr_conn_close_id_WT(rtr_worker_t *w, uint64_t id);
/* The core's work for a link or delivery of w (every core_work_t type but CORE_W_EXTERNAL,
 * which the worker handles). */
void rtr_conn_work_WT(rtr_worker_t *w, core_work_t *work);
/* After the inbox: process every connection that inbox work touched. */
void rtr_conn_process_dirty_WT(rtr_worker_t *w);

/* Also for the worker, from the layers below: rtr_conn_sweep_WT() (link_out.h),
 * rtr_on_stream_wake_WT(), rtr_conn_quiesce_WT() and rtr_conn_release_all_WT() (link_in.h). */

#endif
