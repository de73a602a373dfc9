/* router/edgeconn.h: an edge connection's own layer (router/edgeconn.c; the core's side:
 * core/edge.c).  On an edge router (connector role edge): the open's properties, the links
 * qdrouterd 1.19's edges attach on the active connection, the address tracking the interior
 * sends, the heartbeat.  On an interior (listener role edge): the edge's downlink, the
 * tracking the interior sends the edge, its heartbeats (and the silence that ends them).
 *
 * Thread suffixes: _WT = the connection's worker only (every function here).
 */
#ifndef JUNCTION_ROUTER_EDGECONN_H
#define JUNCTION_ROUTER_EDGECONN_H

#include "router/transport.h"

#include <proton/event.h>

/* PN_CONNECTION_INIT of an edge router's connection of role edge, or of an interior's from
 * an edge: c->edge, its open's properties (as an inter-router connection's), annotations kept
 * both ways. */
void rtr_edge_init_WT(rtr_conn_t *c);
/* The peer's open came: on an edge, the core is told the edge connection opened. */
void rtr_edge_opened_WT(rtr_conn_t *c);
/* An event of c (which has c->edge): true when it concerned a link of this layer (tracking,
 * heartbeat; on an interior, also the edge's downlink and address lookup attaches) and was
 * handled here. */
bool rtr_edge_event_WT(rtr_conn_t *c, pn_event_t *e);
/* CORE_W_EDGE. */
void rtr_edge_work_WT(rtr_worker_t *w, core_work_t *work);
/* Once a second (the worker's sweep): heartbeats on an edge's active connection; on an
 * interior, an edge connection silent for 8 s is closed. */
void rtr_edge_sweep_WT(rtr_worker_t *w);
/* c is being freed (its Proton objects are gone): tell the core, free c->edge. */
void rtr_edge_free_WT(rtr_conn_t *c);

#endif
