/* router/http.c: the HTTP/WebSocket server of `http: true` listeners, on libwebsockets 4.1
 * joined to the admin thread's libuv loop (LWS_SERVER_OPTION_LIBUV with a foreign loop: the
 * libwebsockets-evlib-uv plugin).
 *
 * Threads: the admin thread runs every function here, except probe_CT(), which the core
 * thread runs (core_call) for /healthz.  No _CT/_WT suffixes otherwise: nothing here belongs to
 * a worker or to the core.
 *
 * DESIGN.
 *   - Listening: the main thread binds every listener (so a port in use stops start-up and
 *     `Listening on HOST:PORT` is logged alike for all); this file accepts on the http ones
 *     (an rtr_acceptor_t: it pauses instead of spinning when descriptors run out) and hands
 *     each socket to libwebsockets (adopted with the listener as the connection's opaque
 *     user data: lws may move a connection to the first vhost by its Host header), one lws
 *     vhost per listener, made at start or by management CREATE (DELETE closes the socket;
 *     the vhost stays for the connections it has).  Only HTTP is spoken there: bytes that
 *     are not HTTP (an AMQP header, garbage) make lws close the connection.
 *   - Out of descriptors: a WebSocket whose socketpair cannot be made is closed (1011, "out
 *     of file descriptors"), a file of httpRootDir that cannot be opened is a 503; either
 *     logs one warning per FD_WARN_PERIOD_MS at most.
 *   - HTTP (protocol "http-only"): GET /metrics streams stats_prom_read() into the socket as it
 *     drains (32 KiB at a time, Connection: close, no length; a reader that takes nothing
 *     for HTTP_STALL_S is closed, since it holds a walk); GET /healthz waits for a round
 *     trip through the core thread (at most one probe in the core's queue; 200 "OK\n" when it
 *     answers, 503 after HEALTHZ_DEADLINE_MS); other paths are files: the embedded console
 *     (stats/console.h) or, with httpRootDir, that directory (`..` and paths that resolve
 *     outside it are refused with 403, a missing file is 404).  Both flags off give 404.
 *   - AMQP over WebSocket (subprotocols "amqp", "binary", "AMQPWSB10"): each session gets a
 *     socketpair; one end goes to a worker exactly like an accepted TCP socket
 *     (RTR_EXT_ACCEPT_WS: same routing, frame guard and limits), the other is a uv_pipe here.
 *     Bytes are pumped with back-pressure both ways: WebSocket payload is written to the pipe
 *     (uv_try_write, the rest by uv_write while lws_rx_flow_control stops reading the
 *     WebSocket); the pipe is read one buffer at a time, only after lws said the WebSocket can
 *     take the previous one.  Either side closing closes the other.
 *   - The console's live feed (subprotocol "junction-mgmt"): a management session
 *     (mgmt_sess_t, the same bounded session the management socket uses); each text
 *     message in is one request line, each reply line goes out as one text message.
 *   - `websockets: false` refuses every upgrade (LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION).
 *
 *   browser --HTTP--> lws vhost --http-only--> /metrics  stats_prom_read() (as it drains)
 *                                         \--> /healthz  core_call(probe_CT) ... async back
 *                                         \--> files     console table | httpRootDir
 *           --WS amqp--> ws_amqp_t <--socketpair--> worker (rtr_conn_t, like TCP)
 *           --WS junction-mgmt--> mgmt_sess_t (mgmt_proto_*)
 *
 * Lifetimes: http_req_t lives in lws's per-session memory (reset per request, cleaned on
 * close); ws_amqp_t and ws_mgmt_t are heap objects that outlive their lws connection until
 * their own uv handles closed.  Stop: lws_context_destroy() closes every connection; the
 * loop runs out once lws and our handles closed.
 */
#include "router/http.h"

#include "router/accept.h"
#include "router/router_int.h"

#include "core/base/list.h"
#include "stats/console.h"

#include <libwebsockets.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "junction_version.h"

#define LOG(lvl, ...) base_log(BASE_LOG_MOD_HTTP, BASE_LOG_##lvl, __VA_ARGS__)

// clang-format off
#define HTTP_CHUNK          (32u << 10) /* body bytes written per writable callback */
#define HEALTHZ_DEADLINE_MS 2000        /* the core must answer a /healthz probe within this */
#define WS_AMQP_CHUNK       (64u << 10) /* bytes read from the router per WebSocket message */
#define WS_RX_BUFFER        (64u << 10) /* most WebSocket payload lws hands over at a time */
#define FD_WARN_PERIOD_MS   10000       /* at most one line per period and kind about
                                           requests refused for lack of a descriptor */
#define HTTP_STALL_S        30          /* a reader that takes no body bytes for this long is
                                           closed (it would hold a /metrics walk forever) */
// clang-format on

typedef struct http_server http_server_t;
typedef struct http_listener http_listener_t;
typedef struct http_req http_req_t;

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
    rtr_acceptor_t        acc;       /* accepts on fd (data = this listener) */
    int                   fd;        /* listening socket (closed at DELETE or stop) */
    long                  id;        /* the server's listener id (management DELETE) */
    const cfg_listener_t *cfg;       /* its configuration */
    struct lws_vhost     *vhost;     /* its lws vhost (freed with the context) */
    http_server_t        *srv;       /* the server */
    char                 *root;      /* realpath of httpRootDir, or NULL (heap) */
    size_t                root_len;  /* its length */
    http_lstate_t         state;     /* where its socket is */
    http_listener_t      *next;      /* on srv->listeners */
};

/* What a request is answering with. */
typedef enum http_body {
    BODY_NONE = 0, /* no response started */
    BODY_BYTES,    /* `data` (constant or embedded), `len` bytes from `off` */
    BODY_PROM,     /* the Prometheus text, streamed */
    BODY_HEALTHZ,  /* waiting for the core's answer (on srv->waiters) */
    BODY_FILE,     /* lws_serve_http_file() sends it */
} http_body_t;

/* http_req_t: the current request on an HTTP connection (lws per-session memory). */
struct http_req {
    http_body_t          body;    /* what is being sent */
    const unsigned char *data;    /* BODY_BYTES: the bytes (never freed here) */
    size_t               len;     /* BODY_BYTES: their count */
    size_t               off;     /* BODY_BYTES: sent so far */
    stats_prom_t        *prom;    /* BODY_PROM: the rendering (ours) */
    struct lws          *wsi;     /* its connection */
    http_req_t          *prev;    /* BODY_HEALTHZ: in srv->waiters */
    http_req_t          *next;    /* BODY_HEALTHZ: in srv->waiters */
    int                  status;  /* BODY_HEALTHZ: 0 while waiting, then 200 or 503 */
};

/* http_server_t: the server (admin thread). */
struct http_server {
    uv_loop_t          *loop;        /* the admin loop */
    mgmt_admin_t       *admin;       /* the admin thread (registry, management sessions) */
    core_t             *core;        /* for the /healthz probe */
    struct lws_context *ctx;         /* libwebsockets; NULL once destroyed */
    http_listener_t    *listeners;   /* every listener made (a list) */
    bool                stopping;    /* rtr_http_stop() ran: closes count down `handles` */
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
    int                 handles;     /* stopping: our handles not closed yet */
};

/* The running server, or NULL (admin thread). */
static http_server_t *s_srv;

/* The libwebsockets context until it is wholly destroyed (lws writes NULL here then: with a
 * foreign loop that happens only once the loop ran lws's handle closes). */
static struct lws_context *s_lws;

/* The /healthz probe's answer from the core thread.  s_probe_async is set while the server
 * runs; probe_CT may run after the server stopped (a probe still queued), so it touches only
 * these statics. */
static pthread_mutex_t  s_probe_lock = PTHREAD_MUTEX_INITIALIZER;
static uv_async_t      *s_probe_async;    /* [s_probe_lock] where to send the wake-up */
static _Atomic uint64_t s_probe_answered; /* the last probe sequence the core ran */

/* ==================================================================== small helpers */

/* A log line from libwebsockets, into the HTTP module at info: its errors and warnings are
 * about one client's connection (a bad request, a header too long), which a client could
 * repeat at will; the router's own failures (start-up) are logged by this file. */
static void lws_emit(int level, const char *line)
{
    size_t n = strlen(line);
    (void)level;
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        n--;
    LOG(INFO, "libwebsockets: %.*s", (int)n, line);
}

static http_listener_t *wsi_listener(struct lws *wsi)
{
    return lws_get_opaque_user_data(wsi);
}

/* Something a request needed (a descriptor, most often) could not be had (`e`: its errno,
 * or 0): one warning per FD_WARN_PERIOD_MS at most, however many clients ask meanwhile. */
static void warn_limited(http_server_t *srv, rtr_ratelimit_t *rl, const char *what, int e)
{
    uint64_t held;
    char     more[64] = "";
    if (!rtr_ratelimit_pass(rl, uv_now(srv->loop), FD_WARN_PERIOD_MS, &held))
        return;
    if (held)
        snprintf(more, sizeof(more), " (%" PRIu64 " more since the last such line)", held);
    LOG(WARNING, "%s: %s%s", what, e ? strerror(e) : "no reason given", more);
}

/* "host:port" of the connection's peer. */
static void wsi_peer(struct lws *wsi, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t               sl = sizeof(ss);
    snprintf(buf, len, "?");
    int fd = lws_get_socket_fd(wsi);
    if (fd >= 0 && getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
        rtr_sockaddr_format(&ss, buf, len);
}

/* ==================================================================== HTTP responses */

static const char BODY_404[] = "Not Found\n";
static const char BODY_403[] = "Forbidden\n";
static const char BODY_503[] = "Service Unavailable: the core thread did not answer\n";
static const char BODY_503_FDS[] = "Service Unavailable: out of file descriptors\n";
static const char BODY_OK[] = "OK\n";

/* Send the status line and headers; the body follows from the writable callback.  Returns 0,
 * or -1 when the connection must close. */
static int send_head(struct lws *wsi, unsigned status, const char *mime, lws_filepos_t len)
{
    unsigned char  buf[LWS_PRE + 512];
    unsigned char *start = buf + LWS_PRE, *p = start, *end = buf + sizeof(buf) - 1;
    if (lws_add_http_common_headers(wsi, status, mime, len, &p, end) ||
        lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CACHE_CONTROL,
                                     (const unsigned char *)"no-store", 8, &p, end) ||
        lws_finalize_write_http_header(wsi, start, &p, end))
        return -1;
    return 0;
}

/* Answer with a whole body we already have (constant or embedded). */
static int respond_bytes(http_req_t *r, unsigned status, const char *mime, const void *data,
                         size_t len)
{
    r->body = BODY_BYTES;
    r->data = data;
    r->len = len;
    r->off = 0;
    if (send_head(r->wsi, status, mime, len) < 0)
        return -1;
    lws_callback_on_writable(r->wsi);
    return 0;
}

static int respond_text(http_req_t *r, unsigned status, const char *text)
{
    return respond_bytes(r, status, "text/plain; charset=utf-8", text, strlen(text));
}

/* Forget what the request held (its rendering, its place among the /healthz waiters). */
static void req_reset(http_req_t *r)
{
    if (r->body == BODY_HEALTHZ && s_srv)
        BASE_DLIST_REMOVE(s_srv->waiters, r, prev, next);
    if (r->prom)
        stats_prom_free(r->prom);
    r->prom = NULL;
    r->body = BODY_NONE;
    r->status = 0;
}

/* The request's next body bytes.  Returns 0, or -1 to close the connection. */
static int req_writable(http_req_t *r)
{
    unsigned char buf[LWS_PRE + HTTP_CHUNK];
    if (r->body == BODY_BYTES || r->body == BODY_PROM) /* the reader took the last chunk */
        lws_set_timeout(r->wsi, PENDING_TIMEOUT_HTTP_CONTENT, HTTP_STALL_S);
    switch (r->body) {
    case BODY_BYTES: {
        size_t n = r->len - r->off;
        if (n > HTTP_CHUNK)
            n = HTTP_CHUNK;
        bool last = r->off + n == r->len;
        if (n)
            memcpy(buf + LWS_PRE, r->data + r->off, n);
        if (lws_write(r->wsi, buf + LWS_PRE, n, last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) <
            (int)n)
            return -1;
        r->off += n;
        if (!last) {
            lws_callback_on_writable(r->wsi);
            return 0;
        }
        req_reset(r);
        lws_set_timeout(r->wsi, NO_PENDING_TIMEOUT, 0);
        return lws_http_transaction_completed(r->wsi) ? -1 : 0;
    }
    case BODY_PROM: {
        size_t n = stats_prom_read(r->prom, (char *)buf + LWS_PRE, HTTP_CHUNK);
        if (n == 0) {
            if (lws_write(r->wsi, buf + LWS_PRE, 0, LWS_WRITE_HTTP_FINAL) < 0)
                return -1;
            req_reset(r);
            lws_set_timeout(r->wsi, NO_PENDING_TIMEOUT, 0);
            return lws_http_transaction_completed(r->wsi) ? -1 : 0;
        }
        if (lws_write(r->wsi, buf + LWS_PRE, n, LWS_WRITE_HTTP) < (int)n)
            return -1;
        lws_callback_on_writable(r->wsi);
        return 0;
    }
    case BODY_HEALTHZ:
        if (!r->status)
            return 0; /* still waiting */
        {
            int st = r->status;
            BASE_DLIST_REMOVE(s_srv->waiters, r, prev, next);
            r->body = BODY_NONE;
            r->status = 0;
            if (st == 200)
                return respond_bytes(r, 200, "text/plain", BODY_OK, 3);
            return respond_text(r, 503, BODY_503);
        }
    default:
        return 0;
    }
}

/* ---- /healthz ---- */

/* Core thread (core_call): the round trip's far end.  Touches only the statics. */
static void probe_CT(core_t *core, void *arg)
{
    (void)core;
    atomic_store(&s_probe_answered, (uint64_t)(uintptr_t)arg);
    pthread_mutex_lock(&s_probe_lock);
    if (s_probe_async)
        uv_async_send(s_probe_async);
    pthread_mutex_unlock(&s_probe_lock);
}

/* Give every waiting /healthz request its status. */
static void probe_settle(http_server_t *srv, int status)
{
    for (http_req_t *r = srv->waiters; r; r = r->next) {
        if (!r->status) {
            r->status = status;
            lws_callback_on_writable(r->wsi);
        }
    }
}

static void probe_async_cb(uv_async_t *h)
{
    http_server_t *srv = h->data;
    if (!srv->probe_out || atomic_load(&s_probe_answered) != srv->probe_seq)
        return;
    srv->probe_out = false;
    stats_counter_inc(srv->shard, srv->st_probes);
    if (srv->probe_timed) {
        uv_timer_stop(&srv->probe_timer);
        srv->probe_timed = false;
    }
    probe_settle(srv, 200);
}

static void probe_timer_cb(uv_timer_t *t)
{
    http_server_t *srv = t->data;
    srv->probe_timed = false;
    LOG(WARNING, "/healthz: the core thread did not answer within %d ms",
        HEALTHZ_DEADLINE_MS);
    probe_settle(srv, 503);
}

/* A /healthz request: wait for the probe in the core's queue, or post one. */
static int healthz_start(http_server_t *srv, http_req_t *r)
{
    r->body = BODY_HEALTHZ;
    r->status = 0;
    BASE_DLIST_PUSH(srv->waiters, r, prev, next);
    if (!srv->probe_out) {
        /* at most one probe in the core's queue, even while the core is stuck */
        srv->probe_seq++;
        if (core_call(srv->core, probe_CT, (void *)(uintptr_t)srv->probe_seq) < 0) {
            r->status = 503;
            lws_callback_on_writable(r->wsi);
            return 0;
        }
        srv->probe_out = true;
    }
    if (!srv->probe_timed) {
        uv_timer_start(&srv->probe_timer, probe_timer_cb, HEALTHZ_DEADLINE_MS, 0);
        srv->probe_timed = true;
    }
    return 0;
}

/* ---- files ---- */

// clang-format off
static const struct { const char *ext; const char *mime; } MIME[] = {
    {".html", "text/html; charset=utf-8"}, {".htm", "text/html; charset=utf-8"},
    {".js", "application/javascript"},     {".mjs", "application/javascript"},
    {".css", "text/css"},                  {".json", "application/json"},
    {".map", "application/json"},          {".txt", "text/plain; charset=utf-8"},
    {".svg", "image/svg+xml"},             {".png", "image/png"},
    {".jpg", "image/jpeg"},                {".jpeg", "image/jpeg"},
    {".gif", "image/gif"},                 {".ico", "image/x-icon"},
    {".woff", "font/woff"},                {".woff2", "font/woff2"},
    {".ttf", "font/ttf"},                  {".wasm", "application/wasm"},
};
// clang-format on

/* Content-Type by extension (qdrouterd's list: lws's own plus .json and .woff2); anything
 * else is application/octet-stream. */
static const char *mime_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(slash ? slash : path, '.');
    if (dot)
        for (size_t i = 0; i < BASE_ARRAY_LEN(MIME); i++)
            if (strcasecmp(dot, MIME[i].ext) == 0)
                return MIME[i].mime;
    return "application/octet-stream";
}

/* A `..` path segment anywhere in the URL path. */
static bool has_dotdot(const char *path)
{
    for (const char *p = path; (p = strstr(p, "..")) != NULL; p += 2) {
        bool starts = p == path || p[-1] == '/' || p[-1] == '\\';
        bool ends = p[2] == '\0' || p[2] == '/' || p[2] == '\\';
        if (starts && ends)
            return true;
    }
    return false;
}

/* Serve `path` from the listener's httpRootDir. */
static int serve_root(http_listener_t *l, http_req_t *r, const char *path)
{
    if (has_dotdot(path)) {
        LOG(INFO, "HTTP: path with '..' refused: %s", path);
        return respond_text(r, 403, BODY_403);
    }
    char   want[PATH_MAX + 32];
    size_t pl = strlen(path);
    int    n = snprintf(want, sizeof(want), "%s%s%s", l->root, path,
                        pl && path[pl - 1] == '/' ? "index.html" : "");
    if (n < 0 || (size_t)n >= sizeof(want))
        return respond_text(r, 404, BODY_404);
    char real[PATH_MAX];
    if (!realpath(want, real))
        return respond_text(r, 404, BODY_404);
    /* symlinks may point anywhere inside the root, never out of it */
    if (strncmp(real, l->root, l->root_len) != 0 ||
        (real[l->root_len] != '/' && real[l->root_len] != '\0')) {
        LOG(INFO, "HTTP: path resolving outside httpRootDir refused: %s", path);
        return respond_text(r, 403, BODY_403);
    }
    struct stat st;
    if (stat(real, &st) != 0)
        return respond_text(r, 404, BODY_404);
    if (S_ISDIR(st.st_mode)) {
        size_t rl = strlen(real);
        if (rl + sizeof("/index.html") > sizeof(real))
            return respond_text(r, 404, BODY_404);
        memcpy(real + rl, "/index.html", sizeof("/index.html"));
        if (stat(real, &st) != 0 || !S_ISREG(st.st_mode))
            return respond_text(r, 404, BODY_404);
    } else if (!S_ISREG(st.st_mode)) {
        return respond_text(r, 404, BODY_404);
    }
    /* lws answers 404 when it cannot open the file; for lack of descriptors the truth is 503
     * (and worth a line in the log) */
    int probe = open(real, O_RDONLY | O_CLOEXEC);
    if (probe < 0 && rtr_errno_is_fd_shortage(errno)) {
        warn_limited(l->srv, &l->srv->warn_file, "HTTP: cannot open a file of httpRootDir",
                     errno);
        return respond_text(r, 503, BODY_503_FDS);
    }
    if (probe >= 0)
        close(probe);
    r->body = BODY_FILE;
    int rc = lws_serve_http_file(r->wsi, real, mime_of(real), NULL, 0);
    if (rc < 0)
        return -1;
    if (rc > 0) /* sent already; lws completed the transaction and says: close */
        return -1;
    return 0;
}

/* ---- requests ---- */

/* A new HTTP request for URL path `path` (lws decoded it and stripped the query). */
static int on_request(struct lws *wsi, http_req_t *r, const char *path)
{
    http_listener_t *l = wsi_listener(wsi);
    http_server_t   *srv = l->srv;
    req_reset(r);
    r->wsi = wsi;
    stats_counter_inc(srv->shard, srv->st_requests);
    if (lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) <= 0) {
        /* POST, PUT, ... (lws keeps their paths in other headers; a body may follow): one
         * answer, then the connection closes */
        lws_return_http_status(wsi, HTTP_STATUS_METHOD_NOT_ALLOWED, NULL);
        return -1;
    }
    if (strcmp(path, "/metrics") == 0) {
        if (!l->cfg->metrics)
            return respond_text(r, 404, BODY_404);
        r->body = BODY_PROM;
        r->prom = stats_prom_new(mgmt_admin_registry(srv->admin), NULL);
        if (send_head(wsi, 200, "text/plain; version=0.0.4; charset=utf-8",
                      LWS_ILLEGAL_HTTP_CONTENT_LEN) < 0)
            return -1;
        lws_callback_on_writable(wsi);
        return 0;
    }
    if (strcmp(path, "/healthz") == 0) {
        if (!l->cfg->healthz)
            return respond_text(r, 404, BODY_404);
        return healthz_start(srv, r);
    }
    if (l->root)
        return serve_root(l, r, path);
    const stats_console_file_t *f = stats_console_find(path);
    if (!f)
        return respond_text(r, 404, BODY_404);
    return respond_bytes(r, 200, f->mime, f->data, f->len);
}

static int cb_http(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                   size_t len)
{
    http_req_t *r = user;
    switch (reason) {
    case LWS_CALLBACK_HTTP:
        if (!r)
            return -1;
        return on_request(wsi, r, in ? (const char *)in : "/") < 0 ? -1 : 0;
    case LWS_CALLBACK_HTTP_WRITEABLE:
        if (!r)
            return -1;
        return req_writable(r) < 0 ? -1 : 0;
    case LWS_CALLBACK_HTTP_FILE_COMPLETION:
        if (r)
            r->body = BODY_NONE;
        return lws_http_transaction_completed(wsi) ? -1 : 0;
    case LWS_CALLBACK_CLOSED_HTTP:
    case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
        if (r)
            req_reset(r);
        return 0;
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
        return -1; /* a WebSocket without one of our subprotocols */
    default:
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    }
}

/* ==================================================================== AMQP over WebSocket */

/* ws_amqp_t: one AMQP-over-WebSocket connection: the WebSocket and our end of the
 * socketpair whose other end a worker serves as an AMQP connection.  Heap; freed when the
 * pipe handle closed. */
typedef struct ws_amqp {
    uv_pipe_t   pipe;     /* first member: our end of the socketpair */
    struct lws *wsi;      /* the WebSocket; NULL once lws closed it */
    uint8_t    *rbuf;     /* LWS_PRE + WS_AMQP_CHUNK: read from the router, to the client */
    size_t      rlen;     /* bytes waiting in rbuf (after LWS_PRE) */
    char       *wdata;    /* client bytes in a uv_write to the router */
    size_t      wcap;     /* allocated */
    char       *pend;     /* client bytes that arrived while that write was in flight */
    size_t      pend_len; /* their count */
    size_t      pend_cap; /* allocated */
    uv_write_t  wreq;     /* the write in flight */
    bool        writing;  /* a uv_write is in flight (the WebSocket is not read meanwhile) */
    bool        reading;  /* uv_read_start active */
    bool        eof;      /* the router side ended: close the WebSocket once rbuf is sent */
    bool        closing;  /* uv_close called */
} ws_amqp_t;

static void amqp_closed_cb(uv_handle_t *h)
{
    ws_amqp_t *b = (ws_amqp_t *)h;
    free(b->rbuf);
    free(b->wdata);
    free(b->pend);
    free(b);
}

static void amqp_close(ws_amqp_t *b)
{
    if (b->closing)
        return;
    b->closing = true;
    uv_close((uv_handle_t *)&b->pipe, amqp_closed_cb);
}

static void amqp_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    ws_amqp_t *b = (ws_amqp_t *)h;
    (void)suggested;
    *buf = uv_buf_init((char *)b->rbuf + LWS_PRE, WS_AMQP_CHUNK);
}

/* Router -> client: one buffer read, then nothing more until lws took it. */
static void amqp_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    ws_amqp_t *b = (ws_amqp_t *)st;
    (void)buf;
    if (nread == 0)
        return;
    uv_read_stop(st);
    b->reading = false;
    if (nread < 0)
        b->eof = true;
    else
        b->rlen = (size_t)nread;
    if (b->wsi)
        lws_callback_on_writable(b->wsi);
    else
        amqp_close(b);
}

static void amqp_read_on(ws_amqp_t *b)
{
    if (b->reading || b->eof || b->closing || b->rlen)
        return;
    if (uv_read_start((uv_stream_t *)&b->pipe, amqp_alloc_cb, amqp_read_cb) == 0)
        b->reading = true;
    else
        b->eof = true;
}

static void amqp_write_cb(uv_write_t *req, int status);

/* Client -> router: hand what is in pend to uv_write (swap buffers). */
static void amqp_write_pend(ws_amqp_t *b)
{
    char  *p = b->wdata;
    size_t cap = b->wcap;
    b->wdata = b->pend;
    b->wcap = b->pend_cap;
    uv_buf_t ub = uv_buf_init(b->wdata, (unsigned)b->pend_len);
    b->pend = p;
    b->pend_cap = cap;
    b->pend_len = 0;
    b->wreq.data = b;
    if (uv_write(&b->wreq, (uv_stream_t *)&b->pipe, &ub, 1, amqp_write_cb) < 0) {
        b->eof = true;
        if (b->wsi)
            lws_callback_on_writable(b->wsi);
        return;
    }
    b->writing = true;
}

static void amqp_write_cb(uv_write_t *req, int status)
{
    ws_amqp_t *b = req->data;
    b->writing = false;
    if (b->closing)
        return;
    if (status < 0) {
        b->eof = true;
        if (b->wsi)
            lws_callback_on_writable(b->wsi);
        return;
    }
    if (b->pend_len) {
        amqp_write_pend(b);
        return;
    }
    if (b->wsi)
        lws_rx_flow_control(b->wsi, 1); /* the router took everything: read the client again */
}

static void amqp_from_client(ws_amqp_t *b, const void *in, size_t len)
{
    if (b->eof || b->closing || len == 0)
        return;
    size_t off = 0;
    if (!b->writing && !b->pend_len) {
        uv_buf_t ub = uv_buf_init((char *)in, (unsigned)len);
        int      n = uv_try_write((uv_stream_t *)&b->pipe, &ub, 1);
        if (n > 0)
            off = (size_t)n;
        else if (n < 0 && n != UV_EAGAIN) {
            b->eof = true;
            lws_callback_on_writable(b->wsi);
            return;
        }
        if (off == len)
            return;
    }
    /* the socketpair is full: keep the rest, stop reading the client until it drained */
    if (b->pend_len + len - off > b->pend_cap) {
        b->pend_cap = b->pend_len + len - off;
        b->pend = base_realloc(b->pend, b->pend_cap);
    }
    memcpy(b->pend + b->pend_len, (const char *)in + off, len - off);
    b->pend_len += len - off;
    lws_rx_flow_control(b->wsi, 0);
    if (!b->writing)
        amqp_write_pend(b);
}

/* A new AMQP-over-WebSocket connection: a socketpair, one end to a worker. */
static int amqp_open(struct lws *wsi, ws_amqp_t **slot)
{
    http_listener_t *l = wsi_listener(wsi);
    http_server_t   *srv = l->srv;
    int              sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
        /* this client is refused (the WebSocket closes with a reason); the next may fit */
        warn_limited(srv, &srv->warn_ws, "AMQP over WebSocket: cannot make the connection's "
                     "socketpair", errno);
        static const char why[] = "out of file descriptors";
        lws_close_reason(wsi, LWS_CLOSE_STATUS_UNEXPECTED_CONDITION, (unsigned char *)why,
                         sizeof(why) - 1);
        return -1;
    }
    ws_amqp_t *b = base_calloc(1, sizeof(*b));
    b->wsi = wsi;
    b->rbuf = base_malloc(LWS_PRE + WS_AMQP_CHUNK);
    uv_pipe_init(srv->loop, &b->pipe, 0);
    int rc = uv_pipe_open(&b->pipe, sv[0]);
    if (rc != 0) {
        warn_limited(srv, &srv->warn_ws, "AMQP over WebSocket: cannot open the connection's "
                     "socketpair", -rc);
        close(sv[0]);
        close(sv[1]);
        b->wsi = NULL;
        amqp_close(b);
        return -1;
    }
    rtr_accept_t *acc = base_calloc(1, sizeof(*acc));
    acc->listener = l->cfg;
    wsi_peer(wsi, acc->peer, sizeof(acc->peer));
    rtr_worker_t *w = &g_rtr.workers[srv->next_worker];
    srv->next_worker = (srv->next_worker + 1) % g_rtr.n_workers;
    rtr_worker_post_ext(w, RTR_EXT_ACCEPT_WS, acc, sv[1]);
    stats_counter_inc(srv->shard, srv->st_ws_amqp);
    *slot = b;
    amqp_read_on(b);
    return 0;
}

static int cb_amqp(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                   size_t len)
{
    ws_amqp_t **slot = user;
    ws_amqp_t  *b = slot ? *slot : NULL;
    switch (reason) {
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
        return wsi_listener(wsi)->cfg->websockets ? 0 : -1;
    case LWS_CALLBACK_ESTABLISHED:
        if (!slot)
            return -1;
        *slot = NULL;
        return amqp_open(wsi, slot) < 0 ? -1 : 0;
    case LWS_CALLBACK_RECEIVE:
        if (!b)
            return -1;
        amqp_from_client(b, in, len);
        return 0;
    case LWS_CALLBACK_SERVER_WRITEABLE:
        if (!b)
            return -1;
        if (b->rlen) {
            size_t n = b->rlen;
            b->rlen = 0;
            if (lws_write(wsi, b->rbuf + LWS_PRE, n, LWS_WRITE_BINARY) < (int)n)
                return -1;
        }
        if (b->eof) {
            lws_close_reason(wsi, LWS_CLOSE_STATUS_NORMAL, NULL, 0);
            return -1;
        }
        amqp_read_on(b);
        return 0;
    case LWS_CALLBACK_CLOSED:
        if (b) {
            b->wsi = NULL;
            *slot = NULL;
            amqp_close(b); /* the worker sees the end of its socket */
        }
        return 0;
    default:
        return 0;
    }
}

/* ==================================================================== console live feed */

/* ws_mgmt_t: one junction-mgmt WebSocket: a management session.  Heap; freed when both the
 * WebSocket closed and the session let go. */
typedef struct ws_mgmt {
    struct lws       *wsi;     /* the WebSocket; NULL once lws closed it */
    mgmt_sess_t *sess;    /* its session */
    bool              refused; /* over the cap: not counted */
    bool              ending;  /* close the WebSocket once the output went */
} ws_mgmt_t;

static void mgmt_flush(void *ctx)
{
    ws_mgmt_t *m = ctx;
    if (m->wsi)
        lws_callback_on_writable(m->wsi);
}

static void mgmt_read(void *ctx, bool on)
{
    ws_mgmt_t *m = ctx;
    if (m->wsi)
        lws_rx_flow_control(m->wsi, on ? 1 : 0);
}

static size_t mgmt_in_flight(void *ctx)
{
    (void)ctx;
    return 0; /* lws writes each message whole (or keeps the rest and holds writable back) */
}

static void mgmt_fail(void *ctx)
{
    ws_mgmt_t *m = ctx;
    m->ending = true;
    if (m->wsi)
        lws_callback_on_writable(m->wsi);
}

static const mgmt_sess_io_t mgmt_io = {
    .flush = mgmt_flush,
    .read = mgmt_read,
    .in_flight = mgmt_in_flight,
    .fail = mgmt_fail,
};

/* One reply line out as one text message (without its "\n"). */
static int mgmt_writable(ws_mgmt_t *m)
{
    mgmt_sess_t *s = m->sess;
    if (s->out_len) {
        char  *nl = memchr(s->out, '\n', s->out_len);
        size_t line = nl ? (size_t)(nl - s->out) : s->out_len;
        size_t used = nl ? line + 1 : line;
        unsigned char *buf = base_malloc(LWS_PRE + line + 1);
        memcpy(buf + LWS_PRE, s->out, line);
        int n = lws_write(m->wsi, buf + LWS_PRE, line, LWS_WRITE_TEXT);
        free(buf);
        if (n < (int)line)
            return -1;
        memmove(s->out, s->out + used, s->out_len - used);
        s->out_len -= used;
        if (s->out_len)
            lws_callback_on_writable(m->wsi);
        mgmt_sess_pump(s); /* drained: more of a streamed reply, more requests */
        return 0;
    }
    if (m->ending) {
        lws_close_reason(m->wsi, LWS_CLOSE_STATUS_GOINGAWAY, NULL, 0);
        return -1;
    }
    return 0;
}

static int cb_mgmt(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                   size_t len)
{
    ws_mgmt_t **slot = user;
    ws_mgmt_t  *m = slot ? *slot : NULL;
    switch (reason) {
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
        return wsi_listener(wsi)->cfg->websockets ? 0 : -1;
    case LWS_CALLBACK_ESTABLISHED: {
        if (!slot)
            return -1;
        http_server_t *srv = wsi_listener(wsi)->srv;
        m = base_calloc(1, sizeof(*m));
        m->wsi = wsi;
        *slot = m;
        char        msg[128];
        const char *refuse = NULL;
        if (srv->n_mgmt >= mgmt_admin_max_clients(srv->admin)) {
            snprintf(msg, sizeof(msg), "too many console sessions (at most %u): try again later",
                     mgmt_admin_max_clients(srv->admin));
            LOG(WARNING, "Console feed: a session refused: %u open already", srv->n_mgmt);
            m->refused = true;
            refuse = msg;
        } else {
            srv->n_mgmt++;
            stats_counter_inc(srv->shard, srv->st_ws_mgmt);
        }
        m->sess = mgmt_sess_new(srv->admin, &mgmt_io, m, refuse);
        mgmt_sess_pump(m->sess);
        return 0;
    }
    case LWS_CALLBACK_RECEIVE:
        if (!m)
            return -1;
        if (m->refused || m->ending)
            return 0;
        mgmt_sess_input(m->sess, in, len, lws_is_final_fragment(wsi) != 0);
        return 0;
    case LWS_CALLBACK_SERVER_WRITEABLE:
        if (!m)
            return -1;
        return mgmt_writable(m) < 0 ? -1 : 0;
    case LWS_CALLBACK_CLOSED:
        if (m) {
            if (!m->refused && s_srv)
                s_srv->n_mgmt--;
            mgmt_sess_free(m->sess);
            free(m);
            *slot = NULL;
        }
        return 0;
    default:
        return 0;
    }
}

/* ==================================================================== the server */

// clang-format off
static const struct lws_protocols PROTOCOLS[] = {
    /* name             callback  per-session data      rx buffer */
    {"http-only",       cb_http,  sizeof(http_req_t),   0,            0, NULL, 0},
    {"amqp",            cb_amqp,  sizeof(ws_amqp_t *),  WS_RX_BUFFER, 0, NULL, 0},
    {"binary",          cb_amqp,  sizeof(ws_amqp_t *),  WS_RX_BUFFER, 0, NULL, 0},
    {"AMQPWSB10",       cb_amqp,  sizeof(ws_amqp_t *),  WS_RX_BUFFER, 0, NULL, 0},
    {"junction-mgmt",   cb_mgmt,  sizeof(ws_mgmt_t *),  WS_RX_BUFFER, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};
// clang-format on

static void accept_cb(rtr_acceptor_t *a, int fd)
{
    http_listener_t *l = a->data;
    if (!l->srv->ctx) {
        close(fd);
        return;
    }
    /* the listener rides on the connection itself: lws may move a connection to another
     * vhost by its Host header (all ours share one "port"), so the vhost cannot say */
    lws_adopt_desc_t ad;
    memset(&ad, 0, sizeof(ad));
    ad.vh = l->vhost;
    ad.type = LWS_ADOPT_SOCKET | LWS_ADOPT_HTTP;
    ad.fd.sockfd = fd;
    ad.opaque = l;
    /* lws closes the socket when adopting fails */
    errno = 0;
    if (!lws_adopt_descriptor_vhost_via_info(&ad))
        warn_limited(l->srv, &l->srv->warn_adopt, "HTTP: could not take a connection", errno);
}

static void http_free(http_server_t *srv)
{
    while (srv->listeners) {
        http_listener_t *l = srv->listeners;
        srv->listeners = l->next;
        free(l->root);
        free(l);
    }
    free(srv);
}

static void plain_stat(http_server_t *srv, const char *name, const char *help,
                       stats_handle_t *out)
{
    stats_registry_t *reg = mgmt_admin_registry(srv->admin);
    if (stats_stat_new(reg, name, STATS_COUNTER, help, NULL, out, NULL) < 0)
        memset(out, 0, sizeof(*out)); /* {0,0}: writes land in the sink slot */
    (void)srv;
}

int rtr_http_root_check(const char *dir, char *real, char *err, size_t errlen)
{
    char        buf[PATH_MAX];
    struct stat st;
    char       *out = real ? real : buf;
    if (!realpath(dir, out) || stat(out, &st) != 0) {
        int e = errno;
        snprintf(err, errlen, "httpRootDir %s: %s", dir, strerror(e));
        return -e;
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errlen, "httpRootDir %s is not a directory", dir);
        return -ENOTDIR;
    }
    return 0;
}

/* A listener for h on srv (its socket not yet polled): its root directory checked and its
 * vhost made.  Returns it (on srv->listeners), or NULL after logging why (h's socket is
 * then still the caller's). */
static http_listener_t *listener_new(http_server_t *srv, const mgmt_admin_http_t *h)
{
    const cfg_listener_t *lc = h->cfg;
    char                  real[PATH_MAX];
    char                  err[PATH_MAX + 64];
    char                 *root = NULL;
    if (lc->http_root_dir) {
        if (rtr_http_root_check(lc->http_root_dir, real, err, sizeof(err)) < 0) {
            LOG(CRITICAL, "Listener %s: %s", lc->port, err);
            return NULL;
        }
        size_t rl = strlen(real);
        if (rl > 1 && real[rl - 1] == '/')
            real[--rl] = '\0';
        root = base_strdup(strcmp(real, "/") == 0 ? "" : real);
    }
    http_listener_t *l = base_calloc(1, sizeof(*l));
    l->fd = h->fd;
    l->id = h->id;
    l->cfg = lc;
    l->srv = srv;
    l->root = root;
    l->root_len = root ? strlen(root) : 0;

    char name[32];
    snprintf(name, sizeof(name), "listener%ld", h->id);
    struct lws_context_creation_info vi;
    memset(&vi, 0, sizeof(vi));
    vi.port = CONTEXT_PORT_NO_LISTEN_SERVER;
    vi.protocols = PROTOCOLS;
    vi.vhost_name = name;
    vi.user = l;
    vi.keepalive_timeout = 5;
    vi.options = LWS_SERVER_OPTION_VALIDATE_UTF8;
    l->vhost = lws_create_vhost(srv->ctx, &vi);
    if (!l->vhost) {
        LOG(CRITICAL, "Cannot start the HTTP server for listener %s", lc->port);
        free(l->root);
        free(l);
        return NULL;
    }
    l->next = srv->listeners;
    srv->listeners = l;
    return l;
}

/* Start accepting on l.  Returns 0, or -1 after logging why (l stays LST_NEW, its socket
 * open until stop). */
static int listener_poll(http_server_t *srv, http_listener_t *l)
{
    l->acc.data = l;
    if (rtr_acceptor_start(&l->acc, srv->loop, l->fd, BASE_LOG_MOD_HTTP, NULL, accept_cb) != 0) {
        LOG(ERROR, "Cannot accept on http listener %s", l->cfg->port);
        return -1;
    }
    l->state = LST_POLLING;
    return 0;
}

int rtr_http_start(mgmt_admin_t *admin, uv_loop_t *loop, core_t *core,
                   const mgmt_admin_http_t *http, size_t n)
{
    http_server_t *srv = base_calloc(1, sizeof(*srv));
    srv->loop = loop;
    srv->admin = admin;
    srv->core = core;
    int rc = 0;

    lws_set_log_level(LLL_ERR | LLL_WARN, lws_emit);
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof(info));
    void *loops[1] = {loop};
    info.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_EXPLICIT_VHOSTS |
                   LWS_SERVER_OPTION_UV_NO_SIGSEGV_SIGFPE_SPIN | LWS_SERVER_OPTION_VALIDATE_UTF8;
    info.foreign_loops = loops;
    info.port = CONTEXT_PORT_NO_LISTEN_SERVER;
    info.server_string = "junction/" JUNCTION_VERSION;
    info.pcontext = &s_lws;
    info.max_http_header_data = 8192; /* browsers send cookies; lws's default is 1 KiB */
    srv->ctx = lws_create_context(&info);
    s_lws = srv->ctx;
    if (!srv->ctx) {
        rc = -ENOTSUP;
        LOG(CRITICAL, "Cannot start the HTTP server: libwebsockets could not join the "
                      "libuv loop (is its libuv event library plugin installed?)");
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        if (!listener_new(srv, &http[i]))
            rc = -EINVAL;
    if (rc < 0) {
        if (srv->ctx)
            lws_context_destroy(srv->ctx);
        srv->ctx = NULL;
        for (size_t i = 0; i < n; i++)
            close(http[i].fd);
        http_free(srv);
        return rc;
    }

    srv->shard = stats_shard_new(mgmt_admin_registry(srv->admin));
    plain_stat(srv, "httpRequests", "HTTP requests answered", &srv->st_requests);
    plain_stat(srv, "httpHealthzProbes", "/healthz round trips the core thread answered",
               &srv->st_probes);
    plain_stat(srv, "httpWebsocketAmqp", "AMQP-over-WebSocket connections accepted",
               &srv->st_ws_amqp);
    plain_stat(srv, "httpConsoleSessions", "Console live-feed (junction-mgmt) sessions opened",
               &srv->st_ws_mgmt);

    uv_async_init(loop, &srv->probe_async, probe_async_cb);
    srv->probe_async.data = srv;
    uv_timer_init(loop, &srv->probe_timer);
    srv->probe_timer.data = srv;
    pthread_mutex_lock(&s_probe_lock);
    s_probe_async = &srv->probe_async;
    pthread_mutex_unlock(&s_probe_lock);

    for (http_listener_t *l = srv->listeners; l; l = l->next)
        listener_poll(srv, l);
    s_srv = srv;
    return 0;
}

bool rtr_http_running(void)
{
    return s_srv != NULL;
}

int rtr_http_listener_add(const mgmt_admin_http_t *h)
{
    http_server_t *srv = s_srv;
    http_listener_t *l = srv ? listener_new(srv, h) : NULL;
    if (!l) {
        close(h->fd);
        return -EINVAL;
    }
    return listener_poll(srv, l) == 0 ? 0 : -EIO;
}

/* One of our handles closed; the last one frees the server (libuv runs close callbacks in
 * no order we can rely on). */
static void srv_handle_closed(http_server_t *srv)
{
    if (--srv->handles == 0)
        http_free(srv);
}

/* A listener's acceptor closed (DELETE or stop): its socket goes now. */
static void listener_closed_cb(rtr_acceptor_t *a)
{
    http_listener_t *l = a->data;
    close(l->fd);
    l->fd = -1;
    l->state = LST_CLOSED;
    if (l->srv->stopping)
        srv_handle_closed(l->srv);
}

static void srv_closed_cb(uv_handle_t *h)
{
    srv_handle_closed(h->data);
}

void rtr_http_listener_del(long id)
{
    http_server_t *srv = s_srv;
    for (http_listener_t *l = srv ? srv->listeners : NULL; l; l = l->next) {
        if (l->id == id && l->state == LST_NEW && l->fd >= 0) {
            close(l->fd); /* it never accepted */
            l->fd = -1;
            l->state = LST_CLOSED;
        }
        if (l->id != id || l->state != LST_POLLING)
            continue;
        /* the connections it accepted stay, as on an AMQP listener */
        l->state = LST_CLOSING;
        rtr_acceptor_close(&l->acc, listener_closed_cb);
        LOG(NOTICE, "Stopped listening on %s:%s (HTTP)",
            l->cfg->host && *l->cfg->host ? l->cfg->host : "0.0.0.0", l->cfg->port);
    }
}

void rtr_http_stop(void)
{
    http_server_t *srv = s_srv;
    if (!srv)
        return;
    pthread_mutex_lock(&s_probe_lock);
    s_probe_async = NULL;
    pthread_mutex_unlock(&s_probe_lock);
    /* every connection closes: ws_amqp_t pipes close, /healthz waiters go */
    srv->ctx = NULL;
    lws_context_destroy(s_lws);
    srv->waiters = NULL;
    stats_shard_free(mgmt_admin_registry(srv->admin), srv->shard);
    srv->shard = NULL;
    s_srv = NULL;
    srv->stopping = true;
    srv->handles = 2;
    /* a listener whose DELETE is closing it counts too: its close callback counts down */
    for (http_listener_t *l = srv->listeners; l; l = l->next)
        if (l->state == LST_POLLING || l->state == LST_CLOSING)
            srv->handles++;
    uv_close((uv_handle_t *)&srv->probe_async, srv_closed_cb);
    uv_close((uv_handle_t *)&srv->probe_timer, srv_closed_cb);
    for (http_listener_t *l = srv->listeners; l; l = l->next) {
        if (l->state == LST_POLLING) {
            l->state = LST_CLOSING;
            rtr_acceptor_close(&l->acc, listener_closed_cb);
        } else if (l->state == LST_NEW && l->fd >= 0) {
            close(l->fd);
            l->fd = -1;
        }
    }
}

void rtr_http_finish(uv_loop_t *loop)
{
    /* lws_context_destroy() on a foreign loop stops at the handles it must wait for; once the
     * loop ran their closes, a second call frees the rest */
    for (int i = 0; i < 3 && s_lws; i++) {
        lws_context_destroy(s_lws);
        uv_run(loop, UV_RUN_DEFAULT);
    }
    if (s_lws)
        LOG(WARNING, "libwebsockets did not finish its shutdown");
}
