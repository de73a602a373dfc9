/* router/admin.h: the admin thread - the management socket (and, later, the HTTP/WebSocket
 * server) on a libuv loop of its own, so a busy management client never slows the data
 * path.  The protocol itself is stats/'s (stats_mgmt_*); this side is the I/O.
 *
 * Threads: rtr_admin_start() and rtr_admin_stop() run on the main thread; everything else in
 * admin.c runs on the admin thread.
 */
#ifndef JUNCTION_ROUTER_ADMIN_H
#define JUNCTION_ROUTER_ADMIN_H

#include "config/config.h"
#include "stats/stats.h"

/* When cfg has a `management` entity: create its socket's directory, remove a stale socket
 * file (never a live one, never a file that is not a socket), bind the socket (mode 0660)
 * and start the admin thread serving it from `reg` (borrowed: it must outlive
 * rtr_admin_stop()).  Without the entity it does nothing.  Returns 0, or a negative errno
 * after logging one line that names the socket and the reason.  Main thread, once. */
int rtr_admin_start(const cfg_t *cfg, stats_registry_t *reg);

/* Close every management client and the socket, stop and join the admin thread, remove the
 * socket file.  Does nothing when the thread is not running, so it may be called on every
 * shutdown path.  Main thread. */
void rtr_admin_stop(void);

#endif
