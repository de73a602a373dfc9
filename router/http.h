/* router/http.h: the HTTP/WebSocket server of listeners with `http: true` - the console's
 * files, /metrics, /healthz, AMQP over WebSocket and the console's live feed - served by
 * libwebsockets on the admin thread's libuv loop (router/mgmt/admin.c owns the loop and the
 * thread).
 *
 * Threads: the functions run on the admin thread (rtr_http_start before its loop runs or from
 * a callback of that loop, the others from callbacks of that loop), except
 * rtr_http_root_check (thread-safe); everything in http.c runs there too, except the /healthz
 * probe, which runs on the core thread (core_call) and only stores an atomic and wakes the
 * admin loop.
 */
#ifndef JUNCTION_ROUTER_HTTP_H
#define JUNCTION_ROUTER_HTTP_H

#include "router/mgmt/admin.h"

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

/* Serve the http listeners (n >= 1; their sockets are listening and become the server's: it
 * closes them) on `loop`, the loop of admin thread `admin` (whose registry and management
 * sessions it uses), handing AMQP-over-WebSocket connections to the workers (g_rtr) and
 * probing `core` for /healthz.  Returns 0, or a negative errno after logging one line (every
 * socket is closed then and nothing is left running; the loop may still hold closing handles,
 * which the caller runs out).  Admin thread, once. */
int rtr_http_start(mgmt_admin_t *admin, uv_loop_t *loop, core_t *core,
                   const mgmt_admin_http_t *http, size_t n);

/* The server runs (rtr_http_start succeeded and rtr_http_stop has not run).  Admin thread. */
bool rtr_http_running(void);

/* Serve one more http listener (management CREATE) on the running server: h's socket is
 * listening and becomes the server's.  Returns 0, or a negative errno after logging why (the
 * socket is closed then).  Admin thread. */
int rtr_http_listener_add(const mgmt_admin_http_t *h);

/* Stop accepting on listener `id` and close its socket (management DELETE); the connections
 * it accepted go on.  Nothing happens for an id the server does not serve.  Admin thread. */
void rtr_http_listener_del(long id);

/* Check an httpRootDir: it must resolve to a directory.  Returns 0 (with its real path in
 * `real`, PATH_MAX bytes, when not NULL), or a negative errno with a one-line reason naming
 * the directory in err.  Thread-safe (CREATE checks it on the management agent's thread,
 * before it answers). */
int rtr_http_root_check(const char *dir, char *real, char *err, size_t errlen);

/* Stop accepting, close every HTTP and WebSocket connection (AMQP ones: the router side sees
 * the connection end) and let libwebsockets go; the loop then runs out of handles.  Does
 * nothing when the server is not running.  Admin thread. */
void rtr_http_stop(void);

/* After the admin loop ran out: let libwebsockets finish destroying its context (it frees
 * the rest once its handles' close callbacks ran).  Admin thread, after uv_run returned. */
void rtr_http_finish(uv_loop_t *loop);

#endif
