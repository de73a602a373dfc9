/* router/http.h: the HTTP/WebSocket server of listeners with `http: true` - the console's
 * files, /metrics, /healthz, AMQP over WebSocket and the console's live feed - served by
 * libwebsockets on the admin thread's libuv loop (router/mgmt/admin.c owns the loop and the thread
 * and holds the server).  Its files: http.c (life cycle, listeners), http_get.c (plain HTTP),
 * http_ws.c (WebSockets), sharing router/http_int.h.
 *
 * Threads: the functions run on the admin thread (rtr_http_start before its loop runs or from
 * a callback of that loop, the others from callbacks of that loop, rtr_http_finish after it
 * ran out), except rtr_http_root_check (thread-safe) and rtr_http_new/rtr_http_free (before
 * the loop runs, after it closed).  Only the /healthz probe runs on the core
 * thread (core_call), and it only stores an atomic and wakes the admin loop.
 */
#ifndef JUNCTION_ROUTER_HTTP_H
#define JUNCTION_ROUTER_HTTP_H

#include "router/mgmt/admin.h"

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

/* rtr_http_t: one HTTP server (its libwebsockets contexts, listeners and probe). */
typedef struct rtr_http rtr_http_t;
typedef struct rtr_ctx  rtr_ctx_t; /* router/ctx.h */

/* A server that does not run yet, for the loop `loop` of admin thread `admin` (whose
 * registry and management sessions it uses), probing `core` for /healthz and handing
 * AMQP-over-WebSocket connections to the workers of `ctx` (borrowed).  Main or admin
 * thread, before the loop runs. */
rtr_http_t *rtr_http_new(mgmt_admin_t *admin, uv_loop_t *loop, core_t *core, rtr_ctx_t *ctx);

/* Serve the http listeners (n >= 1; their sockets are listening and become the server's: it
 * closes them) on srv's loop, handing AMQP-over-WebSocket connections to the workers.
 * srv must not run or have stopped.  Returns 0, or a negative errno after logging one line
 * (every socket is closed then and nothing is left running; the loop may still hold closing
 * handles, which the caller runs out; a later call may try again).  Admin thread. */
int rtr_http_start(rtr_http_t *srv, const mgmt_admin_http_t *http, size_t n);

/* srv runs (rtr_http_start succeeded and rtr_http_stop has not run; NULL does not run).
 * Admin thread. */
bool rtr_http_running(const rtr_http_t *srv);

/* Serve one more http listener (management CREATE) on the running server: h's socket is
 * listening and becomes the server's.  Returns 0, or a negative errno after logging why (the
 * socket is closed then).  Admin thread. */
int rtr_http_listener_add(rtr_http_t *srv, const mgmt_admin_http_t *h);

/* Stop accepting on listener `id` and close its socket (management DELETE); the connections
 * it accepted go on.  Nothing happens for an id the server does not serve, or when srv does
 * not run.  Admin thread. */
void rtr_http_listener_del(rtr_http_t *srv, long id);

/* Check an httpRootDir: it must resolve to a directory.  Returns 0 (with its real path in
 * `real`, PATH_MAX bytes, when not NULL), or a negative errno with a one-line reason naming
 * the directory in err.  Thread-safe (CREATE checks it on the management agent's thread,
 * before it answers). */
int rtr_http_root_check(const char *dir, char *real, char *err, size_t errlen);

/* Stop accepting, close every HTTP and WebSocket connection (AMQP ones: the router side sees
 * the connection end) and let libwebsockets go; the loop then runs out of the server's
 * handles.  Does nothing when srv does not run.  Admin thread. */
void rtr_http_stop(rtr_http_t *srv);

/* After the admin loop ran out: let libwebsockets finish destroying its contexts (it frees
 * the rest once its handles' close callbacks ran).  NULL does nothing.  Admin thread, after
 * uv_run returned. */
void rtr_http_finish(rtr_http_t *srv);

/* Free the server, once its loop is closed (lws calls back, and writes into the server, for
 * as long as the loop runs).  NULL does nothing.  Any thread, after the loop closed. */
void rtr_http_free(rtr_http_t *srv);

#endif
