/* router/worker.h: a worker thread (worker.c) - the libuv loop that owns a set of
 * connections: its inbox (the core's work and RTR_EXT_* work from other threads), its timers
 * and its shutdown.  Above the connection's layers, which it calls through conn.h; its
 * record and the context it shares with the other workers are in ctx.h.
 *
 * Threads: these run on the thread that owns the workers (the daemon's main thread, or a
 * test's).
 */
#ifndef JUNCTION_ROUTER_WORKER_H
#define JUNCTION_ROUTER_WORKER_H

#include "router/ctx.h"

/* Prepare worker `index` of ctx (ctx->workers[index] is w) for core `core`: its loop, inbox
 * and timers.  Returns 0 or a negative UV_E* code. */
int  rtr_worker_init(rtr_worker_t *w, rtr_ctx_t *ctx, int index, core_t *core);
int  rtr_worker_start(rtr_worker_t *w);
void rtr_worker_join(rtr_worker_t *w);
void rtr_worker_fini(rtr_worker_t *w);

#endif
