/* router/ctx.h: what every layer of a connection reaches - the router context the workers
 * share (rtr_ctx_t) and the record of the worker that owns the connection (rtr_worker_t),
 * with the few calls the layers make on their worker.  The bottom of router/'s data-path
 * headers (router/DESIGN.md "A connection's layers"): a connection reaches its worker as
 * c->worker and the context as c->worker->ctx; it includes no other header of router/.  The
 * worker's loop itself (worker.h, worker.c) sits above the layers.
 *
 * Threads: rtr_ctx_init/fini run on the thread that owns the workers (the daemon's main
 * thread, or a test's) before the workers start and after they stopped;
 * rtr_worker_post_ext() is thread-safe; _WT functions run on the worker itself.
 */
#ifndef JUNCTION_ROUTER_CTX_H
#define JUNCTION_ROUTER_CTX_H

#include "config/config.h"
#include "core/base/base.h"
#include "core/base/log.h"
#include "core/base/mpsc.h"
#include "core/base/pool.h"
#include "core/core.h"

#include <uv.h>

typedef struct rtr_ctx    rtr_ctx_t;
typedef struct rtr_worker rtr_worker_t;
/* The records of a connection, each defined by the lowest layer that reads its fields:
 * rtr_conn_t and rtr_link_t in transport.h, rtr_out_t in link_out.h, rtr_in_t in link_in.h,
 * rtr_msg_t in msg.h. */
typedef struct rtr_conn rtr_conn_t;
typedef struct rtr_link rtr_link_t;
typedef struct rtr_in   rtr_in_t;
typedef struct rtr_out  rtr_out_t;
typedef struct rtr_msg  rtr_msg_t;

/* Kinds of CORE_W_EXTERNAL work posted to a worker by other threads (rtr_worker_post_ext). */
enum {
    RTR_EXT_ACCEPT = 0, /* arg = socket fd, ptr = the listener's cfg_listener_t */
    RTR_EXT_SHUTDOWN,   /* quiesce: stop granting credit, let deliveries in flight settle
                           for up to arg ms, release the rest, close every connection, stop */
    RTR_EXT_STREAM,     /* a streamed message changed: re-check waiters and Q2 links */
    RTR_EXT_CLOSE_CONN, /* arg = connection id: close it if this worker owns it
                           (management UPDATE adminStatus=deleted; posted to every worker) */
    RTR_EXT_ACCEPT_WS,  /* arg = one end of a socketpair carrying an AMQP-over-WebSocket
                           connection (http.c pumps the other end), ptr = rtr_accept_t (heap,
                           the worker frees it) */
    RTR_EXT_LR,         /* ptr = a message between the two ends of a link-routed link
                           (router/linkroute.c; the worker hands it to rtr_lr_msg_WT) */
    RTR_EXT_CONNECT,    /* arg = a connected socket of connector ptr (rtr_connector_t,
                           router/connector.h): the router's outgoing connection */
};

/* What RTR_EXT_ACCEPT_WS carries besides the socket. */
typedef struct rtr_accept {
    const cfg_listener_t *listener; /* the http listener the WebSocket came in on */
    char                  peer[64]; /* "host:port" of the WebSocket's client, for logs */
    char                  tls[96];  /* its TLS session (https) as the connection's `tls`
                                       stats label, or "" (plain HTTP) */
} rtr_accept_t;

/* Most worker threads (the management agent takes the next queue index, and indexes are
 * uint8_t in core_action_t). */
#define RTR_MAX_WORKERS 254
static_assert(CFG_WORKER_THREADS_MAX <= RTR_MAX_WORKERS, "workerThreads is capped by the config");

/* The `policy` entity's counters, as plain stats (made by rtr_ctx_init). */
enum {
    RTR_POLICY_PROCESSED = 0, /* connections that reached the maxConnections check */
    RTR_POLICY_CONN_DENIED,   /* refused by maxConnections */
    RTR_POLICY_LINK_DENIED,   /* links refused by maxSenders / maxReceivers */
    RTR_POLICY_SIZE_DENIED,   /* messages refused by maxMessageSize */
    RTR_POLICY_N
};

/* rtr_ctx_t: what the workers of one router share.  Owner: whoever runs the workers (the
 * server, or a test); it fills it with rtr_ctx_init() before any worker starts, and it is
 * read-only afterwards except for the atomic counters, which any worker updates.  It must
 * outlive the workers. */
struct rtr_ctx {
    const cfg_t        *cfg;         /* the configuration (borrowed) */
    const char         *router_id;   /* cfg router id (container id of every connection) */
    char               *node_id;     /* "0/<router id>", in x-opt-qd.ingress/trace (heap) */
    size_t              node_id_len; /* its length */
    const core_stats_t *stats;       /* the built-in stat families (borrowed) */
    stats_handle_t      policy_stats[RTR_POLICY_N]; /* policy counters (into each shard) */
    rtr_worker_t       *workers;      /* every worker, for RTR_EXT_STREAM wake-ups (borrowed) */
    int                 n_workers;    /* their count */
    _Atomic uint64_t    next_conn_id; /* connection id counter (any worker) */
    _Atomic uint64_t    next_link_id; /* link id counter (any worker, the management agent) */
    struct rtr_tls     *tls;          /* the sslProfiles' TLS contexts (router/tls.h: thread-safe) */
    stats_handle_t      tls_failed;   /* tlsHandshakesFailed: TLS handshakes that failed, and
                                         plain clients of requireSsl listeners (the sum of the
                                         listeners' own, router/lstats.h) */
    struct rtr_lstats  *lstats;       /* per-listener stats (router/lstats.h), or NULL */
    _Atomic uint32_t    n_open_conns; /* connections past their open (maxConnections; any) */
    struct rtr_conn_watch *conn_watch; /* connections to containers (router/conn_watch.h:
                                          thread-safe), made by rtr_ctx_init */
    struct rtr_policy  *policy;       /* vhost policies (router/policy.h: thread-safe), made by
                                         rtr_ctx_init */
};

/* Fill ctx for the n_workers workers in `workers` (not yet initialised) of a router of
 * configuration cfg, with the stat families `stats`, and make the policy counters in
 * stats->reg.  cfg, stats and workers are borrowed: they must outlive ctx. */
void rtr_ctx_init(rtr_ctx_t *ctx, const cfg_t *cfg, const core_stats_t *stats,
                  rtr_worker_t *workers, int n_workers);
/* Free what rtr_ctx_init() made (the stats are the registry's).  Harmless on a zeroed ctx. */
void rtr_ctx_fini(rtr_ctx_t *ctx);

/* rtr_worker_t: one worker thread.  Owner: that thread; every field is _WT except `index`
 * and `ctx` (immutable once started: other workers read them) and the inbox (thread-safe). */
struct rtr_worker {
    int               index;       /* 0..n-1, its queue index at the core */
    rtr_ctx_t        *ctx;         /* the router it belongs to */
    uv_loop_t         loop;        /* the worker's loop */
    uv_async_t        wake;        /* core / main thread -> this worker */
    uv_prepare_t      flush;       /* end of each loop iteration: push the batch to the core */
    uv_timer_t        sweep;       /* once a second: zeroCreditSeconds, linksBlocked */
    uv_thread_t       thread;      /* the thread */
    base_mpsc_t       inbox;       /* core_work_t from the core and the main thread */
    base_mpsc_batch_t to_core;     /* actions built this iteration */
    core_t           *core;        /* the core */
    rtr_conn_t       *conns;       /* live connections */
    rtr_conn_t       *dirty;       /* connections touched by inbox work, to process */
    rtr_out_t        *waiters;     /* streamed copies waiting for more bytes */
    rtr_link_t       *q2_links;    /* incoming links stopped by Q2 */
    stats_shard_t    *shard;       /* this thread's stats shard */
    size_t            n_conns;     /* their count */
    size_t            n_ins;       /* rtr_in_t alive (shutdown waits for zero) */
    size_t            n_links;     /* rtr_link_t alive */
    bool              stopping;    /* RTR_EXT_SHUTDOWN seen: no credit, no new connections */
    bool              closing_all; /* shutdown: every connection is being closed */
    uv_timer_t        grace;       /* the shutdown grace period */
    size_t            n_outs;      /* rtr_out_t alive (shutdown waits for zero, grace allowing) */
};

/* Post CORE_W_EXTERNAL work of `kind` (RTR_EXT_*) to w.  Thread-safe. */
void rtr_worker_post_ext(rtr_worker_t *w, int kind, void *ptr, long arg);
/* The next action for the core, pushed at the end of this loop iteration. */
core_action_t *rtr_worker_action_WT(rtr_worker_t *w);
/* Stop the loop once every connection was closed and nothing the core may still answer is
 * alive (called when a connection or link record is freed). */
void rtr_worker_maybe_exit_WT(rtr_worker_t *w);

#endif
