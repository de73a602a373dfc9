/* router/admin.h: the admin thread - the management socket and the HTTP/WebSocket server
 * (router/http.c) on a libuv loop of its own, so a busy management client or browser never
 * slows the data path.  The protocol itself is stats/'s (stats_mgmt_*); this side is the I/O.
 *
 * Threads: rtr_admin_start() and rtr_admin_stop() run on the main thread; everything else
 * (the rtr_admin_sess_* calls included) runs on the admin thread only.
 */
#ifndef JUNCTION_ROUTER_ADMIN_H
#define JUNCTION_ROUTER_ADMIN_H

#include "config/config.h"
#include "core/core.h"
#include "stats/stats.h"

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

typedef struct rtr_ctx rtr_ctx_t; /* router/ctx.h */

/* An http listener the connection manager bound: its socket (listening, non-blocking; the
 * admin thread accepts on it and closes it at stop) and its configuration. */
typedef struct rtr_admin_http {
    int                   fd;  /* listening socket */
    const cfg_listener_t *cfg; /* listener entity (http true); outlives the admin thread */
    long                  id;  /* the connection manager's listener id (DELETE names it) */
} rtr_admin_http_t;

/* Start the admin thread when cfg has a `management` entity or there are http listeners.
 * For the entity: create its socket's directory, remove a stale socket file (never a live
 * one, never a file that is not a socket), bind the socket (mode 0660).  For the http
 * listeners: start the HTTP server on the admin loop (http.c), taking the sockets in `http`
 * (n_http of them; the array is copied).  `reg`, `core` and `ctx` (the workers, which take
 * AMQP-over-WebSocket connections) are borrowed: they must outlive
 * rtr_admin_stop().  Without either it does nothing.  Returns 0, or a negative errno after
 * logging one line that names the socket or listener and the reason (the http sockets are
 * closed then too).  Main thread, once, after the core and the workers started (the HTTP
 * server hands WebSocket AMQP connections to workers and asks the core for /healthz). */
int rtr_admin_start(const cfg_t *cfg, stats_registry_t *reg, core_t *core, rtr_ctx_t *ctx,
                    const rtr_admin_http_t *http, size_t n_http);

/* Serve one more http listener at run time (management CREATE): h's socket is bound and
 * listening and becomes the admin thread's.  Starts the admin thread (with only this
 * listener) when it is not running, else hands the listener to it, which starts the HTTP
 * server first when it has none.  Returns 0, or a negative errno after logging why (the
 * socket is closed then); a failure on the admin thread is logged there.  Main thread. */
int rtr_admin_http_add(const cfg_t *cfg, stats_registry_t *reg, core_t *core, rtr_ctx_t *ctx,
                       const rtr_admin_http_t *h);

/* Stop accepting on http listener `id` and close its socket (management DELETE).  Main
 * thread; the admin thread does it. */
void rtr_admin_http_del(long id);

/* Close every management client, the socket and the HTTP server with its connections, stop
 * and join the admin thread, remove the socket file.  Does nothing when the thread is not
 * running, so it may be called on every shutdown path.  Main thread. */
void rtr_admin_stop(void);

/* ---------------------------------------------------------------------------------------
 * Management sessions over any transport (admin thread only).
 *
 * One stats_mgmt session with everything admin.c bounds for a socket client: the input cut
 * into request lines (a line longer than STATS_MGMT_LINE_MAX gets a 413 error and is dropped),
 * the output gathered as reply lines in `out` and bounded by RTR_ADMIN_OUT_MAX (requests and
 * streamed replies wait while the client is behind; subscription updates are dropped, the
 * next carries the latest values), and the subscription timer.  The management socket and the
 * WebSocket `junction-mgmt` subprotocol both use it; the transport moves the bytes.
 * ------------------------------------------------------------------------------------- */

/* Output waiting above which a client is paused and its subscription updates are dropped. */
#define RTR_ADMIN_OUT_MAX (256u << 10)

typedef struct rtr_admin_sess rtr_admin_sess_t;

/* What a transport does for its session.  Every callback gets the transport's ctx. */
typedef struct rtr_admin_io {
    /* Output was added to s->out: write it when the transport can (now or later). */
    void (*flush)(void *ctx);
    /* Start (true) or stop (false) delivering input. */
    void (*read)(void *ctx, bool on);
    /* Bytes taken out of s->out and not yet written (count toward RTR_ADMIN_OUT_MAX). */
    size_t (*in_flight)(void *ctx);
    /* The session cannot go on (a write failed): close the transport; it calls
     * rtr_admin_sess_free() when it is done. */
    void (*fail)(void *ctx);
} rtr_admin_io_t;

/* rtr_admin_sess_t: the session's state.  The transport reads and consumes `out` (complete
 * lines, each ending in "\n") and may fill `in` through rtr_admin_sess_in_room(); the other
 * fields are the session's. */
struct rtr_admin_sess {
    uv_timer_t            tick;       /* first member: fires when a subscription update is due */
    const rtr_admin_io_t *io;         /* the transport */
    void                 *ctx;        /* its context; NULL once the transport let go */
    stats_mgmt_t         *mgmt;       /* the protocol session; NULL for a refused client */
    char                 *in;         /* bytes read that do not make a complete line yet */
    size_t                in_len;     /* their count */
    size_t                in_cap;     /* allocated */
    size_t                in_scanned; /* leading bytes of `in` known to hold no newline */
    bool                  discarding; /* the line being read was too long: drop to its newline */
    char                 *out;        /* reply lines waiting for the transport */
    size_t                out_len;    /* their length */
    size_t                out_cap;    /* allocated */
    bool                  reading;    /* the transport was told to deliver input */
    bool                  closed;     /* rtr_admin_sess_free() was called */
};

/* A new session on `loop` for a transport (io, ctx).  With refuse_msg NULL it opens a
 * protocol session and queues the hello line; otherwise it queues one 503 error line with
 * refuse_msg and nothing else (the transport closes once that is written).  Call
 * rtr_admin_sess_pump() next. */
rtr_admin_sess_t *rtr_admin_sess_new(uv_loop_t *loop, const rtr_admin_io_t *io, void *ctx,
                                     const char *refuse_msg);

/* Let go of the session: its timer closes and it is freed in the close callback.  No io
 * callback runs after this.  NULL is fine. */
void rtr_admin_sess_free(rtr_admin_sess_t *s);

/* Room for at least `want` more input bytes at s->in + s->in_len (the transport reads into
 * it, then calls rtr_admin_sess_input(s, NULL, n, false)). */
void rtr_admin_sess_in_room(rtr_admin_sess_t *s, size_t want);

/* Input arrived: `len` bytes at `bytes` (copied), or with bytes NULL, `len` bytes already
 * read into the room.  `end_of_line` ends a request line after them (a WebSocket message is
 * one request line).  Answers what can be answered now (rtr_admin_sess_pump). */
void rtr_admin_sess_input(rtr_admin_sess_t *s, const void *bytes, size_t len, bool end_of_line);

/* Everything that follows a change (input, output drained, a tick): more of a streamed
 * reply, more requests, io->flush, reading on or off, the next tick. */
void rtr_admin_sess_pump(rtr_admin_sess_t *s);

/* The client must wait: a streamed reply is in progress or its output is behind. */
bool rtr_admin_sess_paused(const rtr_admin_sess_t *s);

/* The hello's product, version, router id and mode, and the registry, for sessions made by
 * the http server (set by rtr_admin_start). */
stats_registry_t *rtr_admin_registry(void);
const stats_mgmt_info_t *rtr_admin_info(void);
/* Sessions served at once per transport: management.maxClients (16 without the entity). */
uint32_t rtr_admin_max_clients(void);

#endif
