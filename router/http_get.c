/* router/http_get.c: the answers to plain HTTP requests (protocol "http-only") - GET /metrics
 * (stats_prom_read() streamed as the socket drains), GET /healthz (a round trip through the
 * core thread) and files (the embedded console, or a listener's httpRootDir).
 *
 * Threads: the admin thread runs every function here, except probe_CT(), which the core
 * thread runs (core_call) and which touches only the probe's channel (http_probe_t).
 *
 * DESIGN.
 *   - /metrics holds a stats_prom_t per request and writes HTTP_CHUNK at a time, only when
 *     the socket can take more (Connection: close, no length); a reader that takes nothing
 *     for HTTP_STALL_S is closed, since it holds a walk.
 *   - /healthz: at most one probe sits in the core's queue; the core stores its sequence in
 *     the channel's atomic and wakes the admin loop; 200 "OK\n" when it answers, 503 after
 *     HEALTHZ_DEADLINE_MS (later requests wait for that same probe, so a stuck core does not
 *     fill its queue).  The channel is shared with the core, which may run a probe after the
 *     server stopped: the server and the probe in the queue each hold a reference.
 *   - Files: the embedded console (stats/console.h) or, with httpRootDir, that directory
 *     (`..` and paths that resolve outside it are 403, a missing file 404, a file that cannot
 *     be opened for lack of descriptors 503).  Other methods than GET get 405 and a close.
 *
 * Lifetime: http_req_t lives in lws's per-session memory (reset per request, cleaned on close).
 */
#include "core/base/list.h"
#include "router/http_int.h"
#include "stats/console.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG HTTP_LOG

// clang-format off
#define HTTP_CHUNK          (32u << 10) /* body bytes written per writable callback */
#define HTTP_STALL_S        30          /* a reader that takes no body bytes for this long is
                                           closed (it would hold a /metrics walk forever) */
#define HEALTHZ_DEADLINE_MS 2000        /* the core must answer a /healthz probe within this */
// clang-format on

/* http_probe_t: the /healthz round trip's meeting point with the core thread.  Heap; freed by
 * whichever lets go last of the server (rtr_http__probe_stop) and the probe in the core's
 * queue (probe_CT): the core runs every call posted before it stops. */
struct http_probe {
    pthread_mutex_t  lock;     /* guards async and refs */
    uv_async_t      *async;    /* [lock] where to send the wake-up; NULL once the server stopped */
    int              refs;     /* [lock] the server's, and one for a probe in the core's queue */
    _Atomic uint64_t posted;   /* the sequence of the probe in the core's queue */
    _Atomic uint64_t answered; /* the last probe sequence the core ran */
};

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

/* Forget what the request held (its rendering, its place among the /healthz waiters: those
 * are forgotten wholesale once the server stopped). */
static void req_reset(http_req_t *r)
{
    if (r->body == BODY_HEALTHZ) {
        rtr_http_t *srv = rtr_http__listener(r->wsi)->srv;
        if (!srv->stopping)
            BASE_DLIST_REMOVE(srv->waiters, r, prev, next);
    }
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
            BASE_DLIST_REMOVE(rtr_http__listener(r->wsi)->srv->waiters, r, prev, next);
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

/* Let go of the channel: the last reference frees it.  Thread-safe. */
static void probe_unref(http_probe_t *p)
{
    pthread_mutex_lock(&p->lock);
    bool last = --p->refs == 0;
    pthread_mutex_unlock(&p->lock);
    if (!last)
        return;
    pthread_mutex_destroy(&p->lock);
    free(p);
}

/* Core thread (core_call): the round trip's far end.  Touches only the channel, which the
 * probe holds a reference to (the server may have stopped meanwhile). */
static void probe_CT(core_t *core, void *arg)
{
    http_probe_t *p = arg;
    (void)core;
    atomic_store(&p->answered, atomic_load(&p->posted));
    pthread_mutex_lock(&p->lock);
    if (p->async)
        uv_async_send(p->async);
    pthread_mutex_unlock(&p->lock);
    probe_unref(p);
}

/* Give every waiting /healthz request its status. */
static void probe_settle(rtr_http_t *srv, int status)
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
    rtr_http_t *srv = h->data;
    if (!srv->probe_out || atomic_load(&srv->probe->answered) != srv->probe_seq)
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
    rtr_http_t *srv = t->data;
    srv->probe_timed = false;
    LOG(WARNING, "/healthz: the core thread did not answer within %d ms", HEALTHZ_DEADLINE_MS);
    probe_settle(srv, 503);
}

/* A /healthz request: wait for the probe in the core's queue, or post one. */
static int healthz_start(rtr_http_t *srv, http_req_t *r)
{
    r->body = BODY_HEALTHZ;
    r->status = 0;
    BASE_DLIST_PUSH(srv->waiters, r, prev, next);
    if (!srv->probe_out) {
        /* at most one probe in the core's queue, even while the core is stuck */
        http_probe_t *p = srv->probe;
        srv->probe_seq++;
        atomic_store(&p->posted, srv->probe_seq);
        pthread_mutex_lock(&p->lock);
        p->refs++;
        pthread_mutex_unlock(&p->lock);
        if (core_call(srv->core, probe_CT, p) < 0) {
            probe_unref(p);
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

void rtr_http__probe_init(rtr_http_t *srv)
{
    http_probe_t *p = base_calloc(1, sizeof(*p));
    pthread_mutex_init(&p->lock, NULL);
    p->async = &srv->probe_async;
    p->refs = 1;
    srv->probe = p;
    uv_async_init(srv->loop, &srv->probe_async, probe_async_cb);
    srv->probe_async.data = srv;
    uv_timer_init(srv->loop, &srv->probe_timer);
    srv->probe_timer.data = srv;
}

void rtr_http__probe_stop(rtr_http_t *srv)
{
    http_probe_t *p = srv->probe;
    pthread_mutex_lock(&p->lock);
    p->async = NULL;
    pthread_mutex_unlock(&p->lock);
    probe_unref(p);
    srv->probe = NULL;
    srv->waiters = NULL;
    uv_close((uv_handle_t *)&srv->probe_async, NULL);
    uv_close((uv_handle_t *)&srv->probe_timer, NULL);
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
        rtr_http__warn_limited(l->srv, &l->srv->warn_file,
                               "HTTP: cannot open a file of httpRootDir", errno);
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
    http_listener_t *l = rtr_http__listener(wsi);
    rtr_http_t      *srv = l->srv;
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

int rtr_http__cb_get(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
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
    case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
        /* HTTP/2 (h2c) is not served: lws would answer on a stream of its own; the request
         * gets a 403 as any other unknown upgrade (websocket goes on to its subprotocol) */
        if (in && strcmp(in, "websocket") != 0) {
            if (lws_return_http_status(wsi, HTTP_STATUS_FORBIDDEN, NULL))
                return -1;
            return 1;
        }
        return 0;
    case LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS:
        return rtr_http__tls_ctx_fill(in, user); /* an https vhost's context (http_tls.c) */
    case LWS_CALLBACK_SSL_INFO:
        return rtr_http__tls_info(wsi, in); /* a handshake's end (http_tls.c) */
    default:
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    }
}
