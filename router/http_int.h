/* router/http_int.h: what the three files of the HTTP server share, included by them only:
 * http.c (the server and its listeners), http_get.c (GET: /metrics, /healthz, files) and
 * http_ws.c (WebSockets: AMQP over WebSocket, the console's junction-mgmt feed) and
 * http_tls.c (https and wss).
 *
 * Threads: everything here belongs to the admin thread, except the /healthz probe's channel
 * (http_probe_t), which the core thread touches too (under its lock).
 *
 * A libwebsockets callback reaches the server through its connection: each connection is
 * adopted with its listener as lws's opaque user data (rtr_http__listener()), and the
 * listener points at the server.  The server lives until rtr_http_free(), after the admin
 * loop closed, so that pointer stays good for as long as lws can call back.
 */
#ifndef JUNCTION_ROUTER_HTTP_INT_H
#define JUNCTION_ROUTER_HTTP_INT_H

#include "router/accept.h"
#include "router/http.h"
#include "router/ctx.h"

#include <libwebsockets.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HTTP_LOG(lvl, ...) base_log(BASE_LOG_MOD_HTTP, BASE_LOG_##lvl, __VA_ARGS__)

typedef struct http_listener http_listener_t;
typedef struct http_req      http_req_t;
typedef struct http_probe    http_probe_t;

/* Where a listener's socket is. */
typedef enum http_lstate {
    LST_NEW = 0, /* not accepting (no acceptor yet, or it could not start) */
    LST_POLLING, /* accepting */
    LST_CLOSING, /* its acceptor is closing (DELETE or stop); the socket closes after */
    LST_CLOSED,  /* socket closed; the vhost stays for the connections it accepted */
} http_lstate_t;

/* http_listener_t: one http listener: its socket, its lws vhost and its flags.  Heap, on
 * srv->listeners until the server is freed (its vhost's connections point at it). */
struct http_listener {
    rtr_acceptor_t        acc;      /* accepts on fd (data = this listener) */
    int                   fd;       /* listening socket (closed at DELETE or stop) */
    long                  id;       /* the server's listener id (management DELETE) */
    const cfg_listener_t *cfg;      /* its configuration */
    struct lws_vhost     *vhost;    /* its lws vhost (freed with the context) */
    rtr_http_t           *srv;      /* the server */
    char                 *root;     /* realpath of httpRootDir, or NULL (heap) */
    size_t                root_len; /* its length */
    http_lstate_t         state;    /* where its socket is */
    void                 *ssl_ctx;  /* https: its vhost's server context (lws's), else NULL */
    unsigned long         tls_gen;  /* https: the profile's generation copied into ssl_ctx */
    bool                  one_cert; /* https: an UPDATE changed the key's type (http_tls.c) */
    http_listener_t      *next;     /* on srv->listeners */
};

/* What a request is answering with. */
typedef enum http_body {
    BODY_NONE = 0, /* no response started */
    BODY_BYTES,    /* `data` (constant or embedded), `len` bytes from `off` */
    BODY_PROM,     /* the Prometheus text, streamed */
    BODY_HEALTHZ,  /* waiting for the core's answer (on srv->waiters) */
    BODY_FILE,     /* lws_serve_http_file() sends it */
} http_body_t;

/* http_req_t: the current request on an HTTP connection (lws per-session memory, so its
 * size is in the server's protocol table). */
struct http_req {
    http_body_t          body;   /* what is being sent */
    const unsigned char *data;   /* BODY_BYTES: the bytes (never freed here) */
    size_t               len;    /* BODY_BYTES: their count */
    size_t               off;    /* BODY_BYTES: sent so far */
    stats_prom_t        *prom;   /* BODY_PROM: the rendering (ours) */
    struct lws          *wsi;    /* its connection */
    http_req_t          *prev;   /* BODY_HEALTHZ: in srv->waiters */
    http_req_t          *next;   /* BODY_HEALTHZ: in srv->waiters */
    int                  status; /* BODY_HEALTHZ: 0 while waiting, then 200 or 503 */
};

/* http_lws_cell_t: where lws says it destroyed a context (info.pcontext), one per context
 * made: lws writes NULL there, with a foreign loop only once the loop ran lws's handle
 * closes.  Heap, on srv->cells until the server is freed. */
typedef struct http_lws_cell {
    struct lws_context   *ctx;  /* the context, until lws wholly destroyed it */
    struct http_lws_cell *next; /* on srv->cells */
} http_lws_cell_t;

/* rtr_http_t: the server (admin thread).  Heap, from rtr_http_new() to rtr_http_free(), which
 * come after the admin loop closed: lws may call back (and write a cell) until then. */
struct rtr_http {
    uv_loop_t          *loop;        /* the admin loop */
    mgmt_admin_t       *admin;       /* the admin thread (registry, management sessions) */
    core_t             *core;        /* for the /healthz probe */
    rtr_ctx_t          *rtr;         /* the workers, for WebSocket AMQP connections */
    struct lws_context *ctx;         /* libwebsockets while running; NULL before and from stop */
    http_lws_cell_t    *cells;       /* every context made (a failed start's too) */
    http_listener_t    *listeners;   /* every listener made (a list) */
    bool                stopping;    /* rtr_http_stop() ran */
    http_probe_t       *probe;       /* the /healthz channel with the core (shared) */
    uv_async_t          probe_async; /* core thread -> here: a probe was answered */
    uv_timer_t          probe_timer; /* the probe's deadline */
    uint64_t            probe_seq;   /* the last probe posted to the core */
    bool                probe_out;   /* a probe is in the core's queue, not answered yet */
    bool                probe_timed; /* its deadline is running */
    http_req_t         *waiters;     /* /healthz requests waiting for the probe */
    uint32_t            n_mgmt;      /* junction-mgmt sessions open */
    int                 next_worker; /* round-robin for WebSocket AMQP connections */
    stats_shard_t      *shard;       /* the admin thread's stats shard */
    stats_handle_t      st_requests; /* HTTP requests answered */
    stats_handle_t      st_probes;   /* /healthz probes the core answered */
    stats_handle_t      st_ws_amqp;  /* AMQP-over-WebSocket connections accepted */
    stats_handle_t      st_ws_mgmt;  /* junction-mgmt sessions opened */
    rtr_ratelimit_t     warn_file;   /* lines about httpRootDir files that could not be opened */
    rtr_ratelimit_t     warn_ws;     /* lines about WebSocket socketpairs that could not be made */
    rtr_ratelimit_t     warn_adopt;  /* lines about connections lws could not take */
    uv_async_t          tls_async;   /* an sslProfile UPDATE -> here (http_tls.c) */
    bool                tls_watch;   /* tls_async is live and watches the profiles */
};

/* The listener that accepted the connection (its lws opaque user data; a stream's is its
 * network connection's - HTTP/2 is refused, but lws should never make us dereference NULL). */
static inline http_listener_t *rtr_http__listener(struct lws *wsi)
{
    http_listener_t *l = lws_get_opaque_user_data(wsi);
    return l ? l : lws_get_opaque_user_data(lws_get_network_wsi(wsi));
}

/* ---- http.c ---- */

/* Something a request needed (a descriptor, most often) could not be had (`e`: its errno,
 * or 0): one warning per period at most, however many clients ask meanwhile. */
void rtr_http__warn_limited(rtr_http_t *srv, rtr_ratelimit_t *rl, const char *what, int e);

/* ---- http_get.c ---- */

/* The callback of protocol "http-only": every plain HTTP request (user: http_req_t). */
int rtr_http__cb_get(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                     size_t len);

/* The /healthz probe's handles (on srv->loop) and its channel with the core: made in
 * rtr_http_start(), before any request. */
void rtr_http__probe_init(rtr_http_t *srv);

/* Stop: no wake-up reaches the server any more, the waiters are forgotten (their connections
 * are gone) and the probe's handles close; the channel goes once the core let go of it too. */
void rtr_http__probe_stop(rtr_http_t *srv);

/* ---- http_ws.c ---- */

/* The callback of the AMQP subprotocols "amqp", "binary" and "AMQPWSB10" (user: a pointer to
 * the connection's ws_amqp_t). */
int rtr_http__cb_amqp(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                      size_t len);

/* The callback of subprotocol "junction-mgmt" (user: a pointer to the session's ws_mgmt_t). */
int rtr_http__cb_mgmt(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                      size_t len);

/* ---- http_tls.c ---- */

/* The vhost options of listener lc: with an sslProfile, TLS (and plain HTTP too unless
 * requireSsl). */
void rtr_http__tls_vhost_options(const cfg_listener_t *lc, struct lws_context_creation_info *vi);

/* LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS: fill vhost vh's server context
 * (an SSL_CTX) from its listener's sslProfile.  Returns 0, or -1 after logging why (lws then
 * fails the vhost). */
int rtr_http__tls_ctx_fill(struct lws_vhost *vh, void *ssl_ctx);

/* From start to stop: an sslProfile UPDATE reaches the https listeners that name it (their
 * vhosts' contexts take the new profile on the admin loop). */
void rtr_http__tls_watch(rtr_http_t *srv);
void rtr_http__tls_unwatch(rtr_http_t *srv);
/* https listener l: copy its sslProfile into its vhost's context again if an UPDATE changed
 * it since the last copy (a look at the profile's generation otherwise).  Nothing for http. */
void rtr_http__tls_reload(http_listener_t *l);
/* LWS_CALLBACK_SSL_INFO on an https connection: count and log a handshake that failed. */
int rtr_http__tls_info(struct lws *wsi, const struct lws_ssl_info *si);
/* Count one failed handshake of a client `peer` on https listener l, and log it with why. */
void rtr_http__tls_failed(http_listener_t *l, const char *peer, const char *why);
/* The connection's TLS session as the connection rows' `tls` label ("TLSv1.3
 * TLS_AES_256_GCM_SHA384 256"), or "" when it is plain HTTP. */
void rtr_http__tls_label(struct lws *wsi, char *buf, size_t len);

#endif
