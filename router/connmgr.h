/* router/connmgr.h: the connection manager - every listener of the router, configured or
 * made by management CREATE, and the configured connectors (outgoing connections and their
 * reconnect state, router/connector.h): qdrouterd's connection_manager.c, with Junction's
 * threads.
 *
 * It binds the configured listeners at start-up (`Listening on HOST:PORT`; one that cannot
 * be bound stops start-up), hands each listening socket to the main loop's acceptor, or, for
 * an http listener, to the admin thread (mgmt_admin_start, mgmt_admin_http_add/_del), adds and
 * deletes listeners at run time, and names each by an id (management rows and DELETE use
 * it).  An accepted AMQP socket goes to the owner's callback (the server's round-robin to
 * the workers): the connection manager never holds a connection.
 *
 * The connectors (router/connector.h, configured ones: their connections and reconnects) are
 * its too: made by _start, first attempts at _listen, no attempt after _stop, freed by _free.
 *
 * Threads:
 *  - rtr_connmgr_new/_start/_listen/_stop/_free: main thread, in that order (see each).
 *  - The entries' sockets and acceptors: main thread (its loop runs the acceptors).
 *  - rtr_connmgr_listener_add/_del and rtr_connmgr_find: thread-safe (the agent thread calls
 *    them), between rtr_connmgr_start() and the end of the main loop (the agent, their
 *    caller, stops before it).  They never touch a socket another thread uses: _add binds on
 *    the caller's thread, so a port in use is an error in the caller's reply, and enters a
 *    new entry that only the main thread starts; _del only marks the entry.  A uv_async
 *    wakes the main thread, which starts or ends what is marked.  One mutex guards the
 *    table, each entry's id/state/deleted and the id counter; the main thread holds it
 *    while it walks or changes the table and never while it calls the admin thread or an
 *    acceptor.  rtr_connmgr_listener_id: pure.
 */
#ifndef JUNCTION_ROUTER_CONNMGR_H
#define JUNCTION_ROUTER_CONNMGR_H

#include "config/config.h"
#include "core/core.h"
#include "router/mgmt/admin.h"
#include "stats/stats.h"

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

typedef struct rtr_connmgr rtr_connmgr_t;

/* What an entry is.  The connectors are records of their own (router/connector.h), kept
 * beside the table. */
typedef enum rtr_connmgr_kind {
    RTR_CONNMGR_LISTENER = 0, /* accepts connections (cfg_listener_t) */
} rtr_connmgr_kind_t;

/* Where an entry's socket is. */
typedef enum rtr_connmgr_state {
    RTR_CONNMGR_BOUND = 0, /* bound and listening; nobody accepts on it yet */
    RTR_CONNMGR_ACCEPTING, /* the main loop's acceptor accepts on it */
    RTR_CONNMGR_HTTP,      /* the admin thread's: its HTTP server accepts on it */
    RTR_CONNMGR_STOPPED,   /* shutdown: not accepting, socket closed */
} rtr_connmgr_state_t;

/* An accepted AMQP socket of listener `lc`: `fd` is the callee's to close.  Main thread. */
typedef void (*rtr_connmgr_accept_cb)(void *ctx, const cfg_listener_t *lc, int fd);

/* What the manager needs from the running router (rtr_connmgr_start).  Borrowed: each must
 * outlive rtr_connmgr_free(). */
typedef struct rtr_connmgr_env {
    uv_loop_t              *loop;       /* the main thread's loop: acceptors, the wake-up */
    stats_registry_t       *reg;        /* for the admin thread's HTTP server */
    core_t                 *core;       /* for the admin thread's HTTP server */
    mgmt_admin_t          **admin;      /* the admin thread (NULL while it does not run) */
    const mgmt_admin_web_t *web;        /* its HTTP server */
    rtr_connmgr_accept_cb   accept;     /* each accepted AMQP socket */
    void                   *accept_ctx; /* its first argument */
    struct rtr_lstats      *lstats;     /* each listener's stats are made when it starts and
                                           retired when deleted (router/lstats.h); NULL: none */
    struct rtr_worker      *workers;    /* where the connectors' connections go (round-robin) */
    int                     n_workers;  /* their count (0: no connector connects) */
} rtr_connmgr_env_t;

/* One entry as rtr_connmgr_find() reports it (a copy: the entry may go once the lock is
 * released). */
typedef struct rtr_connmgr_info {
    rtr_connmgr_kind_t    kind;     /* what it is */
    rtr_connmgr_state_t   state;    /* where its socket is */
    const cfg_listener_t *listener; /* kind LISTENER: its configuration (outlives the
                                       manager: connections point at it) */
} rtr_connmgr_info_t;

/* Bind every listener of `cfg` (borrowed; it outlives the manager), logging `Listening on
 * HOST:PORT` for each, without accepting yet.  Returns NULL with a one-line reason in err
 * when one cannot be bound (nothing stays open then).  Main thread, before other threads
 * run. */
rtr_connmgr_t *rtr_connmgr_new(const cfg_t *cfg, char *err, size_t errlen);

/* Make the run-time calls (rtr_connmgr_listener_add/_del) possible: their wake-up goes on
 * env->loop, which runs what they ask for once it runs.  Accepts nothing yet.  Returns 0 or
 * a negative UV_E* code.  Main thread, once, before any thread may call them. */
int rtr_connmgr_start(rtr_connmgr_t *m, const rtr_connmgr_env_t *env);

/* Begin accepting: the http listeners' sockets go to the admin thread, which this starts
 * (mgmt_admin_start: with the management socket too when the configuration has one; it
 * runs when there is either), and the others to acceptors on the main loop.  Returns 0, or
 * the admin thread's negative errno after it logged why.  Main thread, once, after the core
 * and the workers started (accepted sockets go to them at once). */
int rtr_connmgr_listen(rtr_connmgr_t *m);

/* Stop accepting for good: every acceptor stops and every socket the main thread holds
 * closes, so that a client that connects now is refused rather than left in a backlog (the
 * http ones close when the admin thread stops).  A listener added later is closed at once.
 * Main thread; idempotent. */
void rtr_connmgr_stop(rtr_connmgr_t *m);

/* Close what is left and free the manager.  Main thread, once the main loop's handles are
 * closed (or it never ran them).  NULL is ignored. */
void rtr_connmgr_free(rtr_connmgr_t *m);

/* Add a listener at run time (management CREATE): check lc's httpRootDir and bind `lc` on
 * the calling thread, then the main thread starts accepting on it (an http listener's
 * socket goes to the admin thread, started then if it is not running).  `lc` is borrowed
 * and must stay valid until the router is freed (connections point at it).  Returns the
 * listener's id (> 0), or -1 with a one-line reason in err.  Thread-safe. */
long rtr_connmgr_listener_add(rtr_connmgr_t *m, const cfg_listener_t *lc, char *err, size_t errlen);

/* Delete listener `id` (management DELETE): it is gone from the table at once; the main
 * thread stops accepting on it, closes its socket and frees its entry (its connections
 * stay).  An unknown id is ignored.  Thread-safe. */
void rtr_connmgr_listener_del(rtr_connmgr_t *m, long id);

/* The id of the configured listener at `index` in cfg->listeners (ids of listeners added
 * at run time follow them). */
long rtr_connmgr_listener_id(size_t index);

/* Connector `id` (configured connector i: i + 1; then those added): its connectionStatus
 * (qdrouterd's text: INITIALIZING, CONNECTING, SUCCESS, FAILED) into status[slen] and its
 * connectionMsg into msg[mlen]; false when there is no such connector.  Thread-safe. */
/* Connector `id`'s failoverUrls (rtr_connectors_failover_urls) into urls[len]; false when
 * there is no such connector.  Thread-safe. */
bool rtr_connmgr_connector_failover(rtr_connmgr_t *m, long id, char *urls, size_t len);

bool rtr_connmgr_connector_status(rtr_connmgr_t *m, long id, char *status, size_t slen, char *msg,
                                  size_t mlen);

/* Add a connector at run time (management CREATE): cn is borrowed and must stay valid until
 * the manager is freed; its first attempt starts at once.  Returns its id (> 0), or -1 with
 * a one-line reason in err.  Thread-safe. */
long rtr_connmgr_connector_add(rtr_connmgr_t *m, const cfg_connector_t *cn, char *err,
                               size_t errlen);

/* Delete connector `id` (management DELETE): no attempt any more, its connection closed.
 * An unknown id is ignored.  Thread-safe. */
void rtr_connmgr_connector_del(rtr_connmgr_t *m, long id);

/* Look entry `id` up: true with a copy in *out, false when there is none (never made, or
 * deleted).  Thread-safe. */
bool rtr_connmgr_find(rtr_connmgr_t *m, long id, rtr_connmgr_info_t *out);

#endif
