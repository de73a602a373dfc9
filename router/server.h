/* router/server.h: what server.c offers the rest of router/ besides main()'s entry points
 * (router.h): the listeners at run time, for management, and the context of a running
 * server, for embedding.  Above ctx.h (the server owns the workers and their context).
 *
 * Threads: as marked on each function.
 */
#ifndef JUNCTION_ROUTER_SERVER_H
#define JUNCTION_ROUTER_SERVER_H

#include "router/router.h"
#include "router/ctx.h"

/* Listeners at run time (management CREATE/DELETE).  Thread-safe.
 * rtr_server_listener_add() checks `lc`'s httpRootDir and binds `lc` on the calling thread
 * (so a port in use or a missing directory is an error at once) and hands the socket to the
 * main thread, which starts accepting on it (an http listener's socket goes on to the admin
 * thread, started then if it is not running); `lc` must
 * stay valid until the server is freed (connections point at it).  Returns the listener's
 * id (> 0), or -1 with a one-line reason in err.  rtr_server_listener_del() asks the main
 * thread to stop accepting on listener `id` and close it (connections stay).  The configured
 * listeners have ids rtr_server_listener_id(index). */
long rtr_server_listener_add(const cfg_listener_t *lc, char *err, size_t errlen);
void rtr_server_listener_del(long id);
long rtr_server_listener_id(size_t index);

/* The context the server's workers share (valid from rtr_server_start() to
 * rtr_server_free()): what an embedder (the conn fuzz target) needs to hand a socket to a
 * worker (ctx->workers[i], rtr_worker_post_ext()).  Main thread. */
rtr_ctx_t *rtr_server_ctx(rtr_server_t *s);

#endif
