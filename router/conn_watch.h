/* router/conn_watch.h: the router's connections to containers - every open connection that a
 * connector made or that came in on a route-container listener - for the features that
 * attach links toward a peer (autoLinks, link routes): "the open connection of connector
 * NAME", "the open connection whose peer's container id is X", and a call when one opens or
 * ends.
 *
 * The connection layers (router/conn.c, router/transport.c) enter a connection when the
 * peer's open came and take it out when its record is freed; nothing else writes the table.
 *
 * Threads:
 *  - rtr_conn_watch_new/_free: the thread that owns the workers, before they start and after
 *    they stopped.
 *  - rtr_conn_watch_set: the same thread, before the workers start (the callback is then
 *    immutable).
 *  - The callback runs on the worker that owns the connection, outside the table's lock, once
 *    with open = true and, later, once with open = false.  It must not block: post work to
 *    the core or to the worker (rtr_worker_post_ext on ci->worker) instead.
 *  - rtr_conn_watch_find_connector/_find_container: thread-safe (a short lock); the result
 *    is a copy and may be stale by the time it is used: act on it by connection id through
 *    the owning worker, which knows whether it still has the connection.
 *  - rtr_conn_watch_opened_WT/_closed_WT: the connection's worker only.
 */
#ifndef JUNCTION_ROUTER_CONN_WATCH_H
#define JUNCTION_ROUTER_CONN_WATCH_H

#include "config/config.h"

#include <stdbool.h>
#include <stdint.h>

typedef struct rtr_conn_watch rtr_conn_watch_t;

/* One open connection as the table keeps it (a copy: strings are the copy's own). */
typedef struct rtr_conn_info {
    uint64_t   id;             /* the connection's id ([C<id>], management's identity) */
    int        worker;         /* index of the worker that owns it */
    char       connector[128]; /* the connector's name that made it, or "" (accepted) */
    char       container[128]; /* the peer's container id, or "" */
    cfg_role_t role;           /* its connector's or listener's role */
} rtr_conn_info_t;

/* Called when a watched connection opens (open = true) or ends (false). */
typedef void (*rtr_conn_watch_fn)(void *arg, const rtr_conn_info_t *ci, bool open);

rtr_conn_watch_t *rtr_conn_watch_new(void);
void              rtr_conn_watch_free(rtr_conn_watch_t *w);

/* The one callback (NULL: none). */
void rtr_conn_watch_set(rtr_conn_watch_t *w, rtr_conn_watch_fn fn, void *arg);

/* The open connection of connector `name` (a connector has at most one), or of a peer whose
 * container id is `container` (the first to have opened when several do): true with a copy
 * in *out, false when there is none.  Thread-safe. */
bool rtr_conn_watch_find_connector(rtr_conn_watch_t *w, const char *name, rtr_conn_info_t *out);
bool rtr_conn_watch_find_container(rtr_conn_watch_t *w, const char *container,
                                   rtr_conn_info_t *out);

/* The connection layers: ci opened / connection `id` ended (ignored when it was never
 * entered).  NULL w is ignored. */
void rtr_conn_watch_opened_WT(rtr_conn_watch_t *w, const rtr_conn_info_t *ci);
void rtr_conn_watch_closed_WT(rtr_conn_watch_t *w, uint64_t id);

#endif
