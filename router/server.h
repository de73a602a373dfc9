/* router/server.h: what server.c offers the rest of router/ besides main()'s entry points
 * (router.h): the context of a running server, for embedding.  Above ctx.h (the server
 * owns the workers and their context).
 */
#ifndef JUNCTION_ROUTER_SERVER_H
#define JUNCTION_ROUTER_SERVER_H

#include "router/ctx.h"
#include "router/router.h"

/* The context the server's workers share (valid from rtr_server_start() to
 * rtr_server_free()): what an embedder (the conn fuzz target) needs to hand a socket to a
 * worker (ctx->workers[i], rtr_worker_post_ext()).  Main thread. */
rtr_ctx_t *rtr_server_ctx(rtr_server_t *s);

#endif
