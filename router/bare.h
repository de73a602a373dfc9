/* router/bare.h: helpers for the router's bare Proton links, those the core never hears of
 * (bare.c): an inter-router connection's control links (irconn.c), an edge connection's
 * tracking and heartbeat links (edgeconn.c).  qdrouterd shows such links in router.link
 * (`qdstat -l`) like any other, so each gets a row of its own here; the messages that arrive
 * on them are gathered whole, within a bound, by rtr_bare_gather_WT().
 *
 * Thread suffixes: _WT = the worker of the link's connection (every function here).
 */
#ifndef JUNCTION_ROUTER_BARE_H
#define JUNCTION_ROUTER_BARE_H

#include "router/transport.h"

#include <proton/delivery.h>
#include <proton/link.h>

/* A router.link row for pl, a link of c: its direction from pl, owning address `key` (a hash
 * key, "" for none), type `type`, priority `prio`, capacity `capacity` and credit `credit` to
 * start with.  Returns the row (a sink when the stats are full); retire it with
 * rtr_bare_row_retire_WT() once the link is gone. */
stats_obj_t rtr_bare_row_new_WT(rtr_conn_t *c, pn_link_t *pl, const char *key, const char *type,
                                const char *prio, uint32_t capacity, uint32_t credit);
/* A delivery went or came on the row's link (presettled or not). */
void rtr_bare_row_delivery_WT(rtr_conn_t *c, stats_obj_t row, bool presettled);
/* The row's credit is now `credit`. */
void rtr_bare_row_credit_WT(rtr_conn_t *c, stats_obj_t row, int credit);
/* Retire *row (after its last write) and forget it; nothing when it is none. */
void rtr_bare_row_retire_WT(rtr_conn_t *c, stats_obj_t *row);

/* Gather what has arrived of delivery d into the caller's buffer *buf (*len bytes used of
 * *cap allocated; grown with base_realloc, the caller frees it): once the message would pass
 * `max` bytes, the rest is read and dropped and *drop set (the caller resets *len and *drop
 * for the next message).  Returns true when the delivery is complete, false when it is not
 * readable or more of it is to come. */
bool rtr_bare_gather_WT(pn_delivery_t *d, size_t max, uint8_t **buf, size_t *len, size_t *cap,
                        bool *drop);

#endif
