/* router/http.c: the HTTP/WebSocket server of `http: true` listeners, on libwebsockets 4.1
 * joined to the admin thread's libuv loop (foreign-loop mode) - its life cycle, its
 * listeners (one lws vhost each) and the protocol table that hands each request to its file:
 * http_get.c (plain HTTP) and http_ws.c (WebSockets); an https listener's vhost gets its TLS
 * from http_tls.c.  router/DESIGN.md "The HTTP server".
 *
 * Threads: the admin thread runs every function here; rtr_http_root_check() is thread-safe.
 * The server's memory goes only after the admin loop closed (rtr_http_free): lws writes into
 * it (info.pcontext) from close callbacks for as long as the loop runs.
 */
#include "junction_version.h"
#include "router/http_int.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG HTTP_LOG

// clang-format off
#define WS_RX_BUFFER      (64u << 10) /* most WebSocket payload lws hands over at a time */
#define FD_WARN_PERIOD_MS 10000       /* at most one line per period and kind about
                                         requests refused for lack of a descriptor */
// clang-format on

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

void rtr_http__warn_limited(rtr_http_t *srv, rtr_ratelimit_t *rl, const char *what, int e)
{
    uint64_t held;
    char     more[64] = "";
    if (!rtr_ratelimit_pass(rl, uv_now(srv->loop), FD_WARN_PERIOD_MS, &held))
        return;
    if (held)
        snprintf(more, sizeof(more), " (%" PRIu64 " more since the last such line)", held);
    LOG(WARNING, "%s: %s%s", what, e ? strerror(e) : "no reason given", more);
}

/* Which file answers what: every vhost speaks these (per-session data: lws's memory). */
// clang-format off
static const struct lws_protocols PROTOCOLS[] = {
    /* name             callback           per-session data      rx buffer */
    {"http-only",       rtr_http__cb_get,  sizeof(http_req_t),   0,            0, NULL, 0},
    {"amqp",            rtr_http__cb_amqp, sizeof(void *),       WS_RX_BUFFER, 0, NULL, 0},
    {"binary",          rtr_http__cb_amqp, sizeof(void *),       WS_RX_BUFFER, 0, NULL, 0},
    {"AMQPWSB10",       rtr_http__cb_amqp, sizeof(void *),       WS_RX_BUFFER, 0, NULL, 0},
    {"junction-mgmt",   rtr_http__cb_mgmt, sizeof(void *),       WS_RX_BUFFER, 0, NULL, 0},
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
    ad.type = LWS_ADOPT_SOCKET | LWS_ADOPT_HTTP | LWS_ADOPT_ALLOW_SSL; /* TLS: https vhosts */
    ad.fd.sockfd = fd;
    ad.opaque = l;
    if (l->cfg->ssl_profile)
        rtr_http__tls_reload(l); /* the profile as it is now, if an UPDATE is not copied yet */
    /* lws closes the socket when adopting fails */
    errno = 0;
    if (lws_adopt_descriptor_vhost_via_info(&ad))
        return;
    int e = errno;
    /* an https listener: lws tries the handshake at once, and the client's first bytes may
     * be there already and be no TLS: counted and logged as a later failure is (http_tls.c) */
    if (!l->cfg->ssl_profile || e == EMFILE || e == ENFILE || e == ENOMEM || e == ENOBUFS)
        rtr_http__warn_limited(l->srv, &l->srv->warn_adopt, "HTTP: could not take a connection", e);
}

/* Free the server's listeners (no lws connection points at them any more). */
static void listeners_free(rtr_http_t *srv)
{
    while (srv->listeners) {
        http_listener_t *l = srv->listeners;
        srv->listeners = l->next;
        free(l->root);
        free(l);
    }
}

/* One of the server's counters (in the registry as it is, or the sink when it is full). */
static void plain_stat(rtr_http_t *srv, const char *name, const char *help, stats_handle_t *out)
{
    stats_registry_t *reg = mgmt_admin_registry(srv->admin);
    if (stats_stat_new(reg, name, STATS_COUNTER, help, NULL, out, NULL) < 0)
        memset(out, 0, sizeof(*out)); /* {0,0}: writes land in the sink slot */
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
static http_listener_t *listener_new(rtr_http_t *srv, const mgmt_admin_http_t *h)
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
    rtr_http__tls_vhost_options(lc, &vi);
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
static int listener_poll(rtr_http_t *srv, http_listener_t *l)
{
    l->acc.data = l;
    if (rtr_acceptor_start(&l->acc, srv->loop, l->fd, BASE_LOG_MOD_HTTP, NULL, accept_cb) != 0) {
        LOG(ERROR, "Cannot accept on http listener %s", l->cfg->port);
        return -1;
    }
    l->state = LST_POLLING;
    return 0;
}

rtr_http_t *rtr_http_new(mgmt_admin_t *admin, uv_loop_t *loop, core_t *core, rtr_ctx_t *ctx)
{
    rtr_http_t *srv = base_calloc(1, sizeof(*srv));
    srv->admin = admin;
    srv->loop = loop;
    srv->core = core;
    srv->rtr = ctx;
    return srv;
}

int rtr_http_start(rtr_http_t *srv, const mgmt_admin_http_t *http, size_t n)
{
    int rc = 0;
    assert(!srv->ctx && !srv->stopping); /* the admin starts a server that does not run, once */
    /* lws writes NULL into the cell once it destroyed the context, which may be in a close
     * callback of the loop long after a failed start: the cell lives as long as srv */
    http_lws_cell_t *cell = base_calloc(1, sizeof(*cell));
    cell->next = srv->cells;
    srv->cells = cell;

    lws_set_log_level(LLL_ERR | LLL_WARN, lws_emit);
    struct lws_context_creation_info info;
    memset(&info, 0, sizeof(info));
    void *loops[1] = {srv->loop};
    /* DO_SSL_GLOBAL_INIT: lws prepares its OpenSSL use with the context, which any later
     * https listener (management CREATE) needs */
    info.options = LWS_SERVER_OPTION_LIBUV | LWS_SERVER_OPTION_EXPLICIT_VHOSTS |
                   LWS_SERVER_OPTION_UV_NO_SIGSEGV_SIGFPE_SPIN | LWS_SERVER_OPTION_VALIDATE_UTF8 |
                   LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
    info.foreign_loops = loops;
    info.port = CONTEXT_PORT_NO_LISTEN_SERVER;
    info.server_string = "junction/" JUNCTION_VERSION;
    info.pcontext = &cell->ctx;
    info.max_http_header_data = 8192; /* browsers send cookies; lws's default is 1 KiB */
    srv->ctx = lws_create_context(&info);
    cell->ctx = srv->ctx;
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
        listeners_free(srv);
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
    rtr_http__probe_init(srv);
    rtr_http__tls_watch(srv);

    for (http_listener_t *l = srv->listeners; l; l = l->next)
        listener_poll(srv, l);
    return 0;
}

bool rtr_http_running(const rtr_http_t *srv)
{
    return srv && srv->ctx;
}

int rtr_http_listener_add(rtr_http_t *srv, const mgmt_admin_http_t *h)
{
    http_listener_t *l = rtr_http_running(srv) ? listener_new(srv, h) : NULL;
    if (!l) {
        close(h->fd);
        return -EINVAL;
    }
    return listener_poll(srv, l) == 0 ? 0 : -EIO;
}

/* A listener's acceptor closed (DELETE or stop): its socket goes now. */
static void listener_closed_cb(rtr_acceptor_t *a)
{
    http_listener_t *l = a->data;
    close(l->fd);
    l->fd = -1;
    l->state = LST_CLOSED;
}

void rtr_http_listener_del(rtr_http_t *srv, long id)
{
    if (!rtr_http_running(srv))
        return;
    for (http_listener_t *l = srv->listeners; l; l = l->next) {
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

void rtr_http_stop(rtr_http_t *srv)
{
    if (!rtr_http_running(srv))
        return;
    /* every connection closes: ws_amqp_t pipes close, /healthz waiters go */
    struct lws_context *ctx = srv->ctx;
    srv->ctx = NULL;
    lws_context_destroy(ctx);
    srv->stopping = true;
    rtr_http__probe_stop(srv);
    rtr_http__tls_unwatch(srv);
    stats_shard_free(mgmt_admin_registry(srv->admin), srv->shard);
    srv->shard = NULL;
    /* a listener whose DELETE is closing it already has its close callback coming */
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

void rtr_http_finish(rtr_http_t *srv)
{
    /* lws_context_destroy() on a foreign loop stops at the handles it must wait for; once the
     * loop ran their closes, a second call frees the rest */
    for (http_lws_cell_t *cell = srv ? srv->cells : NULL; cell; cell = cell->next) {
        for (int i = 0; i < 3 && cell->ctx; i++) {
            lws_context_destroy(cell->ctx);
            uv_run(srv->loop, UV_RUN_DEFAULT);
        }
        if (cell->ctx)
            LOG(WARNING, "libwebsockets did not finish its shutdown");
    }
}

void rtr_http_free(rtr_http_t *srv)
{
    if (!srv)
        return;
    listeners_free(srv);
    while (srv->cells) {
        http_lws_cell_t *cell = srv->cells;
        srv->cells = cell->next;
        free(cell);
    }
    free(srv);
}
