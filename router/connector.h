/* router/connector.h: the connectors - outgoing AMQP connections the router keeps open
 * (qdrouterd 1.19's `connector` entity, its connection_manager.c and server.c reconnect).
 *
 * Each configured connector has one record.  The main thread resolves its host
 * (uv_getaddrinfo, in libuv's pool) and connects (uv_tcp_connect) on the main loop, then hands
 * the connected socket to a worker (RTR_EXT_CONNECT), where it is a connection like an
 * accepted one, with Proton on the client side (router/conn.c, router/transport.c): the links
 * and deliveries on it route exactly as on an accepted connection.  When the connection ends
 * (or the connect fails), the main thread tries again after qdrouterd's delays: 2 s after a
 * connection that was open, 5 s after one that never opened or a connect that failed.  One
 * log line per state change (opened, failed with a new reason), never one per attempt.
 *
 * Threads:
 *  - rtr_connectors_new/_start/_stop/_free: main thread, in that order; _start after the
 *    workers started, _stop at shutdown (no attempt after it), _free once the workers are
 *    gone (their connections point at the records).
 *  - rtr_connector_cfg: any thread (immutable).
 *  - rtr_connector_opened/_closed: thread-safe (a worker calls them for its connection);
 *    they take the connectors' one lock and wake the main loop.
 *  - rtr_connectors_add/_del/_status/_failover_urls: thread-safe (management); a record is
 *    started or ended by the main loop, woken by them.
 */
#ifndef JUNCTION_ROUTER_CONNECTOR_H
#define JUNCTION_ROUTER_CONNECTOR_H

#include "config/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct rtr_connector  rtr_connector_t;
typedef struct rtr_connectors rtr_connectors_t;
struct rtr_worker;

/* Delays before a new attempt (qdrouterd 1.19's server.c): after a connection that had
 * opened ends, and after a connect or connection that never opened. */
#define RTR_CONNECTOR_DELAY_OPENED_MS 2000
#define RTR_CONNECTOR_DELAY_FAILED_MS 5000

/* After a connection or attempt fails, with a failover list of more than one address, the
 * next address is tried after this (qdrouterd's "cycle through the failover urls every
 * second"). */
#define RTR_CONNECTOR_DELAY_FAILOVER_MS 1000
/* Addresses kept from a peer's failover-server-list (besides the configured one). */
#define RTR_CONNECTOR_FAILOVER_MAX      8

/* One address of a failover list. */
typedef struct rtr_connector_addr {
    char host[256]; /* network-host */
    char port[16];  /* port */
} rtr_connector_addr_t;

/* A connector's state as management shows it (qdrouterd's connectionStatus). */
typedef enum rtr_connector_state {
    RTR_CONNECTOR_INITIALIZING = 0, /* no attempt yet */
    RTR_CONNECTOR_CONNECTING,       /* an attempt is under way, or waits for its delay */
    RTR_CONNECTOR_SUCCESS,          /* its connection is open */
    RTR_CONNECTOR_FAILED,           /* the last attempt failed (another follows) */
} rtr_connector_state_t;

/* The records of cfg's connectors (borrowed: cfg outlives them); their connections go to
 * the n_workers `workers` round-robin.  Main thread. */
rtr_connectors_t *rtr_connectors_new(const cfg_t *cfg, uv_loop_t *loop, struct rtr_worker *workers,
                                     int n_workers);

/* The first attempt of every connector, now.  Returns 0 or a negative UV_E* code.  Main
 * thread, once the workers run. */
int rtr_connectors_start(rtr_connectors_t *cs);

/* Shutdown: no attempt after this one (the workers close the open connections).  Main
 * thread; idempotent. */
void rtr_connectors_stop(rtr_connectors_t *cs);

/* Free the records.  Main thread, after the workers stopped and the main loop's handles
 * closed.  NULL is ignored. */
void rtr_connectors_free(rtr_connectors_t *cs);

/* The connection settings of ct's connections (immutable).  Any thread. */
const cfg_connector_t *rtr_connector_cfg(const rtr_connector_t *ct);

/* Connection conn_id of ct opened (the peer's open came): state SUCCESS.  Returns false when
 * ct was deleted meanwhile: the caller closes the connection.  Thread-safe. */
bool rtr_connector_opened(rtr_connector_t *ct, uint64_t conn_id, const char *container);

/* The address the current attempt goes to (its connection's peer): the configured host and
 * port, or one of the failover list.  Written by the main thread only while no connection
 * of ct lives; read by that connection's worker. */
const rtr_connector_addr_t *rtr_connector_target(const rtr_connector_t *ct);

/* A peer's open carried qdrouterd's failover-server-list (`list` of n addresses, n may be 0):
 * the list becomes the configured address, the one connected to, and those of `list` not
 * already in it (qdrouterd's router_node.c); an empty list keeps only the first two.  A peer
 * whose open has no such property leaves the list as it was (the caller does not call).
 * Thread-safe. */
void rtr_connector_failover_set(rtr_connector_t *ct, const rtr_connector_addr_t *list, size_t n);

/* ct's connection ended (its record is being freed); `why` is the reason to show, or NULL.
 * The main thread tries again after the delay.  Thread-safe. */
void rtr_connector_closed(rtr_connector_t *ct, const char *why);

/* ct's connection failed with `msg` (connectionMsg): true when that is news (another
 * reason than the one last logged), so the caller logs its one line.  Thread-safe. */
bool rtr_connector_note(rtr_connector_t *ct, const char *msg);

/* A connector at run time (management CREATE): cn is borrowed and must outlive the records
 * (connections point at it); its first attempt starts on the main loop at once (or at
 * _start).  Returns its id (> 0; configured connector i has id i + 1).  Thread-safe. */
long rtr_connectors_add(rtr_connectors_t *cs, const cfg_connector_t *cn);

/* Delete connector `id` (management DELETE): no attempt any more, its connection closed (one
 * still being made is closed when it opens).  Its record stays, hidden, until _free (a
 * connection may still point at it).  False when there is no such connector.  Thread-safe. */
bool rtr_connectors_del(rtr_connectors_t *cs, long id);

/* Connector `id`'s state and last message (copied into msg[len]); false when there is none.
 * Thread-safe. */
bool rtr_connectors_status(rtr_connectors_t *cs, long id, rtr_connector_state_t *state, char *msg,
                           size_t len);

/* Connector `id`'s failover list as qdrouterd 1.19's read-only failoverUrls shows it: every
 * address, the current attempt's first and the rest in the order they are tried,
 * "amqp://host:port, amqp://host2:port2" (amqps with an sslProfile), into buf[len] (whole
 * entries only); false when there is no such connector.  Thread-safe. */
bool rtr_connectors_failover_urls(rtr_connectors_t *cs, long id, char *buf, size_t len);

/* Connector `id`'s record, or NULL when there is none (or it was deleted): for a caller
 * that hands a connected socket to a worker itself (RTR_EXT_CONNECT), as the fuzz target
 * tests/fuzz/fuzz_conn.c does with a set that was never started.  The record lives until
 * _free.  Thread-safe. */
rtr_connector_t *rtr_connectors_get(rtr_connectors_t *cs, long id);

/* qdrouterd's connectionStatus text of a state. */
const char *rtr_connector_state_name(rtr_connector_state_t st);

#endif
