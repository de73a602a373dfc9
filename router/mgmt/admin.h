/* router/mgmt/admin.h: the admin thread (admin.c) - the management socket and the
 * HTTP/WebSocket server (router/http.c) on a libuv loop of its own, so a busy management
 * client or browser never slows the data path - and the management session every transport
 * of that loop shares (sess.c).  The protocol itself is mgmt_proto_* (mgmt.h); this side is
 * the I/O.
 *
 * Threads: mgmt_admin_start, _http_add, _http_del and _stop run on the main thread;
 * everything else (the mgmt_sess_* calls included) runs on the admin thread only.
 */
#ifndef JUNCTION_ROUTER_MGMT_ADMIN_H
#define JUNCTION_ROUTER_MGMT_ADMIN_H

#include "config/config.h"
#include "core/core.h"
#include "router/mgmt/mgmt.h"
#include "stats/stats.h"

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

/* The admin thread's state: made by mgmt_admin_start, freed by mgmt_admin_stop. */
typedef struct mgmt_admin mgmt_admin_t;

/* An http listener the main thread bound: its socket (listening, non-blocking; the admin
 * thread accepts on it and closes it at stop) and its configuration. */
typedef struct mgmt_admin_http {
    int                   fd;  /* listening socket */
    const cfg_listener_t *cfg; /* listener entity (http true); outlives the admin thread */
    long                  id;  /* the server's listener id (management DELETE names it) */
} mgmt_admin_http_t;

/* The HTTP server the admin thread runs on its loop (router/http.c, rtr_http_*).  The server
 * passes it in, so that this module does not include the files above it.  Every function is
 * called on the admin thread. */
struct rtr_http; /* the server, opaque here */
struct rtr_ctx;  /* the router's workers (router/ctx.h), opaque here */
typedef struct mgmt_admin_web {
    /* The workers the server hands AMQP-over-WebSocket connections to (passed to create). */
    struct rtr_ctx *rtr;
    /* A server that does not run yet, on admin thread a's `loop` (main thread, before the
     * loop runs). */
    struct rtr_http *(*create)(mgmt_admin_t *a, uv_loop_t *loop, core_t *core,
                               struct rtr_ctx *rtr);
    /* Serve the n http listeners (their sockets become the web server's).  Returns 0, or a
     * negative errno after logging why (every socket is closed then). */
    int (*start)(struct rtr_http *srv, const mgmt_admin_http_t *http, size_t n);
    /* start succeeded and stop has not run. */
    bool (*running)(const struct rtr_http *srv);
    /* One more listener on the running server (logged when it fails). */
    int (*listener_add)(struct rtr_http *srv, const mgmt_admin_http_t *h);
    /* Stop accepting on listener `id`. */
    void (*listener_del)(struct rtr_http *srv, long id);
    /* Close every connection; the loop then runs out.  Nothing when not running. */
    void (*stop)(struct rtr_http *srv);
    /* After the loop ran out. */
    void (*finish)(struct rtr_http *srv);
    /* After the loop closed (lws may write into the server until then). */
    void (*destroy)(struct rtr_http *srv);
    /* The router's sslProfiles, which the management socket's clients (never the
     * WebSocket's) may change with sslProfile.*; NULL: they cannot. */
    const mgmt_tls_t *tls;
} mgmt_admin_web_t;

/* Start the admin thread when cfg has a `management` entity or there are http listeners.
 * For the entity: create its socket's directory, remove a stale socket file (never a live
 * one, never a file that is not a socket), bind the socket (mode 0660).  For the http
 * listeners: start the HTTP server `web` on the admin loop, taking the sockets in `http`
 * (n_http of them; the array is copied).  `reg`, `core` and `web` are borrowed: they must
 * outlive mgmt_admin_stop().  Without either it does nothing.  Returns 0, or a negative errno after
 * logging one line that names the socket or listener and the reason (the http sockets are
 * closed then too).  The running thread's state goes to *out (left NULL when there is
 * nothing to run; when *out is set already, the sockets are closed and nothing happens).
 * Main thread, once, after the core and the workers started (the HTTP server hands
 * WebSocket AMQP connections to workers and asks the core for /healthz). */
int mgmt_admin_start(mgmt_admin_t **out, const cfg_t *cfg, stats_registry_t *reg, core_t *core,
                     const mgmt_admin_web_t *web, const mgmt_admin_http_t *http, size_t n_http);

/* Serve one more http listener at run time (management CREATE): h's socket is bound and
 * listening and becomes the admin thread's.  Starts the admin thread (with only this
 * listener) when it is not running, else hands the listener to it, which starts the HTTP
 * server first when it has none.  Returns 0, or a negative errno after logging why (the
 * socket is closed then); a failure on the admin thread is logged there.  Main thread. */
int mgmt_admin_http_add(mgmt_admin_t **a, const cfg_t *cfg, stats_registry_t *reg, core_t *core,
                        const mgmt_admin_web_t *web, const mgmt_admin_http_t *h);

/* Stop accepting on http listener `id` and close its socket (management DELETE).  Main
 * thread; the admin thread does it.  Nothing happens when `a` is NULL. */
void mgmt_admin_http_del(mgmt_admin_t *a, long id);

/* Close every management client, the socket and the HTTP server with its connections, stop
 * and join the admin thread, remove the socket file.  Does nothing when the thread is not
 * running (*a NULL), so it may be called on every shutdown path; *a is NULL after.  Main
 * thread. */
void mgmt_admin_stop(mgmt_admin_t **a);

/* ---------------------------------------------------------------------------------------
 * Management sessions over any transport (admin thread only).
 *
 * One mgmt_proto session with everything sess.c bounds for a socket client: the input cut
 * into request lines (a line longer than MGMT_PROTO_LINE_MAX gets a 413 error and is dropped),
 * the output gathered as reply lines in `out` and bounded by MGMT_SESS_OUT_MAX (requests and
 * streamed replies wait while the client is behind; subscription updates are dropped, the
 * next carries the latest values), and the subscription timer.  The management socket and the
 * WebSocket `junction-mgmt` subprotocol both use it; the transport moves the bytes.
 * ------------------------------------------------------------------------------------- */

/* Output waiting above which a client is paused and its subscription updates are dropped. */
#define MGMT_SESS_OUT_MAX (256u << 10)

typedef struct mgmt_sess mgmt_sess_t;

/* What a transport does for its session.  Every callback gets the transport's ctx. */
typedef struct mgmt_sess_io {
    /* Output was added to s->out: write it when the transport can (now or later). */
    void (*flush)(void *ctx);
    /* Start (true) or stop (false) delivering input. */
    void (*read)(void *ctx, bool on);
    /* Bytes taken out of s->out and not yet written (count toward MGMT_SESS_OUT_MAX). */
    size_t (*in_flight)(void *ctx);
    /* The session cannot go on (a write failed): close the transport; it calls
     * mgmt_sess_free() when it is done. */
    void (*fail)(void *ctx);
} mgmt_sess_io_t;

/* mgmt_sess_t: the session's state.  The transport reads and consumes `out` (complete
 * lines, each ending in "\n") and may fill `in` through mgmt_sess_in_room(); the other
 * fields are the session's. */
struct mgmt_sess {
    uv_timer_t            tick;       /* first member: fires when a subscription update is due */
    const mgmt_sess_io_t *io;         /* the transport */
    void                 *ctx;        /* its context; NULL once the transport let go */
    mgmt_proto_t         *mgmt;       /* the protocol session; NULL for a refused client */
    char                 *in;         /* bytes read that do not make a complete line yet */
    size_t                in_len;     /* their count */
    size_t                in_cap;     /* allocated */
    size_t                in_scanned; /* leading bytes of `in` known to hold no newline */
    bool                  discarding; /* the line being read was too long: drop to its newline */
    char                 *out;        /* reply lines waiting for the transport */
    size_t                out_len;    /* their length */
    size_t                out_cap;    /* allocated */
    bool                  reading;    /* the transport was told to deliver input */
    bool                  closed;     /* mgmt_sess_free() was called */
};

/* A new session on admin thread `a`'s loop for a transport (io, ctx).  With refuse_msg
 * NULL it opens a protocol session and queues the hello line; otherwise it queues one 503
 * error line with refuse_msg and nothing else (the transport closes once that is written).
 * Call mgmt_sess_pump() next. */
mgmt_sess_t *mgmt_sess_new(mgmt_admin_t *a, const mgmt_sess_io_t *io, void *ctx,
                           const char *refuse_msg);

/* Let go of the session: its timer closes and it is freed in the close callback.  No io
 * callback runs after this.  NULL is fine. */
void mgmt_sess_free(mgmt_sess_t *s);

/* Room for at least `want` more input bytes at s->in + s->in_len (the transport reads into
 * it, then calls mgmt_sess_input(s, NULL, n, false)). */
void mgmt_sess_in_room(mgmt_sess_t *s, size_t want);

/* Input arrived: `len` bytes at `bytes` (copied), or with bytes NULL, `len` bytes already
 * read into the room.  `end_of_line` ends a request line after them (a WebSocket message is
 * one request line).  Answers what can be answered now (mgmt_sess_pump). */
void mgmt_sess_input(mgmt_sess_t *s, const void *bytes, size_t len, bool end_of_line);

/* Everything that follows a change (input, output drained, a tick): more of a streamed
 * reply, more requests, io->flush, reading on or off, the next tick. */
void mgmt_sess_pump(mgmt_sess_t *s);

/* The client must wait: a streamed reply is in progress or its output is behind. */
bool mgmt_sess_paused(const mgmt_sess_t *s);

/* The registry the sessions read, and the hello's product, version, router id and mode. */
stats_registry_t  *mgmt_admin_registry(const mgmt_admin_t *a);
const mgmt_info_t *mgmt_admin_info(const mgmt_admin_t *a);
/* The admin thread's loop. */
uv_loop_t *mgmt_admin_loop(mgmt_admin_t *a);
/* Sessions served at once per transport: management.maxClients (16 without the entity). */
uint32_t mgmt_admin_max_clients(const mgmt_admin_t *a);

#endif
