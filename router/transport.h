/* router/transport.h: a connection's transport, the lowest of its layers (router/DESIGN.md
 * "A connection's layers"): the socket, the frame guard, the Proton connection driver's
 * bytes, the per-connection byte budgets, and the records' lifetimes.  Included by the
 * link layers (link_out.h, link_in.h) and by conn.c; it includes nothing of theirs.
 *
 * Every function is _WT: the connection's worker only.
 */
#ifndef JUNCTION_ROUTER_TRANSPORT_H
#define JUNCTION_ROUTER_TRANSPORT_H

#include "router/router_int.h"

/* Log lines of a connection (LOGC) and of a link (LOGL), prefixed with qdrouterd's ids. */
#define LOGC(c, lvl, ...)                                                                          \
    do {                                                                                           \
        if (base_log_enabled(BASE_LOG_MOD_SERVER, BASE_LOG_##lvl))                                 \
            rtr_log_ids(BASE_LOG_MOD_SERVER, BASE_LOG_##lvl, (c)->id, 0, __VA_ARGS__);             \
    } while (0)
#define LOGL(k, lvl, ...)                                                                          \
    do {                                                                                           \
        if (base_log_enabled(BASE_LOG_MOD_ROUTER, BASE_LOG_##lvl))                                 \
            rtr_log_ids(BASE_LOG_MOD_ROUTER, BASE_LOG_##lvl, (k)->conn->id, (k)->id, __VA_ARGS__); \
    } while (0)

/* One log line prefixed with qdrouterd's [C<conn>][L<link>] ids (link 0: none).
 * Thread-safe. */
void rtr_log_ids(base_log_module_t mod, base_log_level_t lvl, uint64_t conn, uint64_t link,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* A worker counts into its own shard (w->shard) with stats_obj_add(), stats_obj_set() and
 * stats_obj_gauge_add(): any object may be written without a check, one without stats (not
 * attached yet: none; no room in the registry: a sink) writes into the sink (stats/stats.h
 * "The sink rule"). */

/* Put c on its worker's dirty list: processed once the worker's inbox is done. */
void rtr_conn_mark_dirty_WT(rtr_conn_t *c);
/* Free c (its handles closed and its last link gone); the worker may exit after it. */
void rtr_conn_free_WT(rtr_conn_t *c);
/* Free link record k; frees its connection too when that is closed and k was its last. */
void rtr_link_unlink_WT(rtr_link_t *k);

/* The one way the router ends a connection or a link with an AMQP error: set the endpoint's
 * local condition to `name` and `desc` (NULL: an empty description), and close it (the
 * frames go out with the next write).  Logging stays with the caller, whose line says why.
 * pc or pl must belong to a connection of the calling worker. */
void rtr_pn_conn_close_error_WT(pn_connection_t *pc, const char *name, const char *desc);
void rtr_pn_link_close_error_WT(pn_link_t *pl, const char *name, const char *desc);
/* Only set connection pc's local condition, for a close that follows through
 * rtr_conn_close_WT() (which keeps a condition already set).  The calling worker's
 * connections only. */
void rtr_pn_conn_set_error_WT(pn_connection_t *pc, const char *name, const char *desc);

/* Set up c's socket (fd, a TCP socket or a WebSocket's socketpair end; peer non-NULL for
 * the latter), its timer, its Proton transport and driver and its frame guard.  Returns
 * false when the socket cannot be taken (fd closed, c's handles closing). */
bool rtr_transport_open_WT(rtr_conn_t *c, int fd, bool websocket);
/* Write what Proton framed (uv_try_write, then one uv_write of a copy when the socket is
 * full); resets the budgets once the client took everything. */
void rtr_conn_write_WT(rtr_conn_t *c);
/* initialHandshakeTimeoutSeconds ran out: close with an error once written. */
void rtr_conn_handshake_expired_WT(rtr_conn_t *c);
/* After a round of processing: read the client or stop reading it, by the input budgets,
 * and arm the timer for Proton's deadline (0: none) or the handshake's. */
void rtr_transport_arm_WT(rtr_conn_t *c, int64_t deadline);

/* Provided by conn.c, the layer above, and called back by the transport's socket and timer
 * callbacks (as a libuv stream calls its owner's read callback): run Proton's events, the
 * links and the writes of c. */
void rtr_conn_process_WT(rtr_conn_t *c);

#endif
