/* router/router.h: the daemon's process-wide entry points, called from main().
 *
 * The router module runs the worker threads (one libuv loop each, owning its connections
 * and their Proton drivers), the listeners (the connection manager, connmgr.h: main
 * thread), and joins them to the core.
 * Threads: every function here runs on the main thread.
 */
#ifndef JUNCTION_ROUTER_H
#define JUNCTION_ROUTER_H

#include "config/config.h"

#include <stdbool.h>

typedef struct rtr_server rtr_server_t;

/* Bind every listener of cfg through the connection manager (`Listening on HOST:PORT`),
 * without accepting yet.  Returns NULL with a one-line reason in err when one cannot be
 * bound. */
rtr_server_t *rtr_server_new(const cfg_t *cfg, char *err, size_t errlen);
/* Start the core and the workers and begin accepting. Returns 0 or a negative errno. */
int rtr_server_start(rtr_server_t *s);
/* Run the main loop until SIGTERM/SIGINT/SIGHUP/SIGQUIT (or rtr_server_stop()), then shut
 * down gracefully: no new connections or credit, deliveries in flight settle for up to the
 * router's shutdownGraceSeconds, the rest are released to their senders, every connection is
 * closed and every thread stopped.  Returns 0 on a clean stop. */
int rtr_server_run(rtr_server_t *s);
/* Stop as SIGTERM does: stop accepting, and make rtr_server_run() (running or still to be
 * called) shut down gracefully and return.  For embedding (the in-process fuzz target). */
void rtr_server_stop(rtr_server_t *s);
void rtr_server_free(rtr_server_t *s);
/* Number of worker threads the server runs. */
int rtr_server_workers(const rtr_server_t *s);

#endif
