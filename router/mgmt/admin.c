/* router/mgmt/admin.c: the admin thread and the management socket.
 *
 * The admin thread runs one libuv loop with a Unix stream socket (accepted through an
 * rtr_acceptor_t, router/accept.h; each client a uv_pipe with a session of sess.c that
 * speaks the JSON-lines protocol of mgmt.h); the same loop runs the HTTP/WebSocket server of
 * the http listeners (router/http.c), whose `junction-mgmt` subprotocol uses the same
 * session (the HTTP server is passed in as a mgmt_admin_web_t: this file does not include
 * http.h).  It runs when there is a `management` entity or at least one http listener (from
 * start-up, or from the management CREATE of the first one).  Clients: at most
 * management.maxClients per transport; one more gets an error line and is closed.
 *
 * Threads: mgmt_admin_start, _http_add, _http_del and _stop run on the main thread.  Every
 * other function here is a callback of (or is called from) the admin loop and runs on the
 * admin thread only; no suffixes are used inside the file.  The only cross-thread traffic is
 * the stop request (uv_async_send), the start handshake (a semaphore: libwebsockets joins
 * the loop from the admin thread), the thread join, and the main thread's requests for http
 * listeners made or deleted at run time (a list under req_lock plus a uv_async_send).
 *
 * Lifetime: a socket client is freed when its pipe closed.  On stop, every handle of the
 * loop is closed and the loop runs out.
 */
#include "router/mgmt/admin.h"

#include "core/base/base.h"
#include "core/base/list.h"
#include "core/base/log.h"
#include "junction_version.h"
#include "router/accept.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#define LOG(lvl, ...) base_log(BASE_LOG_MOD_AGENT, BASE_LOG_##lvl, __VA_ARGS__)

// clang-format off
#define ADMIN_READ_SIZE (64u << 10)  /* room offered to each read */
#define ADMIN_BACKLOG   64           /* listen() backlog */
// clang-format on

typedef struct admin_client admin_client_t;

/* admin_client_t: one connection to the management socket.  Admin thread only. */
struct admin_client {
    uv_pipe_t       pipe;    /* first member: handle <-> client cast */
    mgmt_admin_t   *admin;   /* the server */
    mgmt_sess_t    *sess;    /* its session (NULL once let go) */
    admin_client_t *prev;    /* in admin->clients */
    admin_client_t *next;    /* in admin->clients */
    char           *wdata;   /* output in flight in uv_write (swapped with sess->out) */
    size_t          wlen;    /* its length */
    size_t          wcap;    /* allocated */
    uv_write_t      wreq;    /* the write in flight */
    bool            writing; /* a uv_write is in flight */
    bool            reading; /* uv_read_start is active */
    bool            closing; /* uv_close was called */
    bool            refused; /* over the cap: not counted in n_clients */
};

/* A request from the main thread: an http listener to serve, or one to stop. */
typedef struct admin_req admin_req_t;
struct admin_req {
    admin_req_t      *next; /* on admin->reqs */
    mgmt_admin_http_t add;  /* add.fd >= 0: serve this listener */
    long              del;  /* > 0: stop listener `del` */
};

/* mgmt_admin_t: the admin thread.  Written by the main thread before the admin thread
 * starts and after it was joined; in between, only the admin thread touches it, except the
 * request queue (reqs, under req_lock). */
struct mgmt_admin {
    uv_loop_t         loop;              /* the admin thread's loop */
    int               server_fd;         /* the listening socket (when `path`), or -1 */
    rtr_acceptor_t    server;            /* accepts on server_fd (data = this mgmt_admin_t) */
    bool              accepting;         /* server started (its handles initialised) */
    rtr_ratelimit_t   open_warn;         /* lines about clients whose socket could not be opened */
    uv_async_t        stop;              /* main thread -> admin thread: stop */
    uv_thread_t       thread;            /* the admin thread */
    uv_sem_t          started;           /* admin thread -> main thread: http_rc is set */
    stats_registry_t *reg;               /* stats read by the sessions (borrowed) */
    core_t           *core;              /* the core, for /healthz (borrowed) */
    mgmt_info_t       info;              /* hello's product, version, router id, mode (borrowed
                                            from the cfg and static strings) */
    char *path;                          /* the socket's path (heap), removed at stop; NULL when
                                            there is no management entity */
    uint32_t                max_clients; /* management.maxClients */
    uint32_t                n_clients;   /* clients served (refused ones not counted) */
    admin_client_t         *clients;     /* every open client, refused ones included */
    mgmt_admin_http_t      *http;        /* http listeners (heap copy), or NULL */
    size_t                  n_http;      /* their count */
    const mgmt_admin_web_t *web;         /* the HTTP server's functions (borrowed) */
    struct rtr_http        *httpd;       /* the HTTP server (web->create; freed after the
                                            loop closed) */
    int             http_rc;             /* what web->start() returned (admin thread) */
    bool            stopping;            /* the stop request arrived */
    uv_async_t      req_async;           /* main thread -> admin thread: reqs has requests */
    pthread_mutex_t req_lock;            /* guards reqs */
    admin_req_t    *reqs;                /* [req_lock] requests, newest first */
};

stats_registry_t *mgmt_admin_registry(const mgmt_admin_t *a)
{
    return a->reg;
}

const mgmt_info_t *mgmt_admin_info(const mgmt_admin_t *a)
{
    return &a->info;
}

uv_loop_t *mgmt_admin_loop(mgmt_admin_t *a)
{
    return &a->loop;
}

uint32_t mgmt_admin_max_clients(const mgmt_admin_t *a)
{
    return a->max_clients;
}

/* ==== the management socket ==== */

static void client_close(admin_client_t *c);

static void write_cb(uv_write_t *req, int status)
{
    admin_client_t *c = req->data;
    c->writing = false;
    c->wlen = 0;
    if (c->closing)
        return;
    if (status < 0) {
        LOG(DEBUG, "Management client write failed: %s", uv_strerror(status));
        client_close(c);
        return;
    }
    mgmt_sess_pump(c->sess);
}

/* io->flush: hand the gathered output to uv_write unless a write is in flight. */
static void client_flush(void *ctx)
{
    admin_client_t *c = ctx;
    mgmt_sess_t    *s = c->sess;
    if (c->writing || c->closing || s->out_len == 0)
        return;
    /* swap: the gathered bytes go out, the idle buffer gathers the next ones */
    char  *p = c->wdata;
    size_t cap = c->wcap;
    c->wdata = s->out;
    c->wcap = s->out_cap;
    c->wlen = s->out_len;
    s->out = p;
    s->out_cap = cap;
    s->out_len = 0;
    uv_buf_t b = uv_buf_init(c->wdata, (unsigned)c->wlen);
    c->wreq.data = c;
    int rc = uv_write(&c->wreq, (uv_stream_t *)&c->pipe, &b, 1, write_cb);
    if (rc < 0) {
        c->wlen = 0;
        client_close(c);
        return;
    }
    c->writing = true;
}

static size_t client_in_flight(void *ctx)
{
    admin_client_t *c = ctx;
    return c->writing ? c->wlen : 0;
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    admin_client_t *c = (admin_client_t *)h;
    (void)suggested;
    mgmt_sess_in_room(c->sess, ADMIN_READ_SIZE);
    *buf =
        uv_buf_init(c->sess->in + c->sess->in_len, (unsigned)(c->sess->in_cap - c->sess->in_len));
}

static void read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    admin_client_t *c = (admin_client_t *)st;
    (void)buf;
    if (nread < 0) {
        if (nread != UV_EOF)
            LOG(DEBUG, "Management client read failed: %s", uv_strerror((int)nread));
        client_close(c);
        return;
    }
    mgmt_sess_input(c->sess, NULL, (size_t)nread, false);
}

/* io->read */
static void client_read(void *ctx, bool on)
{
    admin_client_t *c = ctx;
    if (c->closing)
        return;
    if (on && !c->reading) {
        if (uv_read_start((uv_stream_t *)&c->pipe, alloc_cb, read_cb) < 0) {
            client_close(c);
            return;
        }
        c->reading = true;
    } else if (!on && c->reading) {
        uv_read_stop((uv_stream_t *)&c->pipe);
        c->reading = false;
    }
}

static void client_fail(void *ctx)
{
    client_close(ctx);
}

static const mgmt_sess_io_t client_io = {
    .flush = client_flush,
    .read = client_read,
    .in_flight = client_in_flight,
    .fail = client_fail,
};

static void client_closed_cb(uv_handle_t *h)
{
    admin_client_t *c = h->data;
    free(c->wdata);
    free(c);
}

static void client_close(admin_client_t *c)
{
    if (c->closing)
        return;
    c->closing = true;
    mgmt_admin_t *a = c->admin;
    BASE_DLIST_REMOVE(a->clients, c, prev, next);
    if (!c->refused)
        a->n_clients--;
    mgmt_sess_free(c->sess);
    c->sess = NULL;
    uv_close((uv_handle_t *)&c->pipe, client_closed_cb);
}

/* A new client on the management socket (the acceptor pauses when descriptors run out). */
static void connection_cb(rtr_acceptor_t *acc, int fd)
{
    mgmt_admin_t   *a = acc->data;
    admin_client_t *c = base_calloc(1, sizeof(*c));
    c->admin = a;
    uv_pipe_init(&a->loop, &c->pipe, 0);
    c->pipe.data = c;
    BASE_DLIST_PUSH(a->clients, c, prev, next);
    int rc = uv_pipe_open(&c->pipe, fd);
    if (rc < 0) {
        uint64_t held;
        if (rtr_ratelimit_pass(&a->open_warn, uv_now(&a->loop), RTR_ACCEPT_WARN_PERIOD_MS, &held))
            LOG(WARNING,
                "Management socket: cannot take a client: %s (%" PRIu64
                " more since the last such line)",
                uv_strerror(rc), held);
        close(fd);
        c->refused = true;
        client_close(c);
        return;
    }
    char        msg[128];
    const char *refuse = NULL;
    if (a->stopping || a->n_clients >= a->max_clients) {
        snprintf(msg, sizeof(msg),
                 "too many management clients (maxClients is %u): try again "
                 "later",
                 a->max_clients);
        LOG(WARNING, "Management socket: a client refused: %u clients already", a->n_clients);
        c->refused = true;
        refuse = msg;
    } else {
        a->n_clients++;
    }
    c->sess = mgmt_sess_new(a, &client_io, c, refuse);
    if (c->sess->mgmt && a->web && a->web->tls) /* the socket's clients only (mgmt.h) */
        mgmt_proto_set_tls(c->sess->mgmt, a->web->tls);
    mgmt_sess_pump(c->sess);
}

/* ==== the thread ==== */

/* Take the queued requests, oldest first. */
static admin_req_t *reqs_take(mgmt_admin_t *a)
{
    pthread_mutex_lock(&a->req_lock);
    admin_req_t *q = a->reqs;
    a->reqs = NULL;
    pthread_mutex_unlock(&a->req_lock);
    admin_req_t *rev = NULL;
    while (q) {
        admin_req_t *next = q->next;
        q->next = rev;
        rev = q;
        q = next;
    }
    return rev;
}

static void req_cb(uv_async_t *h)
{
    mgmt_admin_t *a = h->data;
    admin_req_t  *r = reqs_take(a);
    while (r) {
        admin_req_t *next = r->next;
        if (r->add.fd >= 0) {
            if (a->stopping) {
                close(r->add.fd);
            } else if (!a->web->running(a->httpd)) {
                /* the first http listener of a router that had none: logged when it fails */
                if (a->web->start(a->httpd, &r->add, 1) < 0)
                    LOG(ERROR, "HTTP listener %s:%s not started",
                        r->add.cfg->host ? r->add.cfg->host : "", r->add.cfg->port);
            } else {
                a->web->listener_add(a->httpd, &r->add);
            }
        }
        if (r->del > 0 && !a->stopping)
            a->web->listener_del(a->httpd, r->del);
        free(r);
        r = next;
    }
}

static void server_closed_cb(rtr_acceptor_t *acc)
{
    mgmt_admin_t *a = acc->data;
    close(a->server_fd);
    a->server_fd = -1;
}

static void stop_cb(uv_async_t *h)
{
    mgmt_admin_t *a = h->data;
    a->stopping = true;
    req_cb(&a->req_async); /* sockets handed over meanwhile are closed */
    uv_close((uv_handle_t *)&a->req_async, NULL);
    while (a->clients)
        client_close(a->clients); /* takes it off the list */
    if (a->accepting) {
        rtr_acceptor_close(&a->server, server_closed_cb);
        a->accepting = false;
    }
    a->web->stop(a->httpd);
    uv_close((uv_handle_t *)&a->stop, NULL);
}

static void admin_main(void *arg)
{
    mgmt_admin_t *a = arg;
    base_thread_set_role(BASE_THREAD_ADMIN, 0);
    pthread_setname_np(pthread_self(), "junction-admin");
    /* libwebsockets joins this loop from the thread that runs it */
    a->http_rc = a->n_http ? a->web->start(a->httpd, a->http, a->n_http) : 0;
    uv_sem_post(&a->started);
    if (a->http_rc < 0)
        return; /* the main thread cleans up */
    uv_run(&a->loop, UV_RUN_DEFAULT);
    a->web->finish(a->httpd);
}

/* ==== start and stop (main thread) ==== */

/* mkdir -p of the directory that holds `path` (new directories get mode 0755). */
static int make_parent_dirs(const char *path)
{
    char *dir = base_strdup(path);
    char *slash = strrchr(dir, '/');
    int   rc = 0;
    if (!slash || slash == dir) {
        free(dir);
        return 0;
    }
    *slash = '\0';
    for (char *p = dir + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
                rc = -errno;
                break;
            }
            *p = c;
            if (!c)
                break;
        }
    }
    free(dir);
    return rc;
}

/* Remove a socket file nobody listens on; refuse a live socket or a file that is not one. */
static int remove_stale(const char *path, const char **why)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISSOCK(st.st_mode)) {
        *why = "a file that is not a socket is in the way";
        return -EEXIST;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
    int e = errno;
    close(fd);
    if (rc == 0) {
        *why = "another process serves it (is another junctiond running?)";
        return -EADDRINUSE;
    }
    if (e != ECONNREFUSED && e != ENOENT)
        return -e;
    if (unlink(path) != 0 && errno != ENOENT)
        return -errno;
    return 0;
}

static void close_http_fds(const mgmt_admin_http_t *http, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (http[i].fd >= 0)
            close(http[i].fd);
}

static void admin_free(mgmt_admin_t *a)
{
    if (a->server_fd >= 0)
        close(a->server_fd);
    free(a->path);
    /* requests that came after the admin thread stopped */
    admin_req_t *r = a->reqs;
    while (r) {
        admin_req_t *next = r->next;
        if (r->add.fd >= 0)
            close(r->add.fd);
        free(r);
        r = next;
    }
    pthread_mutex_destroy(&a->req_lock);
    if (a->httpd)
        a->web->destroy(a->httpd); /* after the loop closed */
    free(a->http);
    free(a);
}

/* Close what the loop holds and run it out (main thread, the admin thread not running). */
static void loop_drain(mgmt_admin_t *a)
{
    rtr_loop_close_all(&a->loop);
    uv_run(&a->loop, UV_RUN_DEFAULT);
    uv_loop_close(&a->loop);
}

/* Bind the management socket (a->server_fd) and accept on it (a->server).  Returns 0 or a
 * negative errno (logged). */
static int socket_open(mgmt_admin_t *a)
{
    const char *why = NULL;
    int         rc = make_parent_dirs(a->path);
    if (rc == 0)
        rc = remove_stale(a->path, &why);
    if (rc < 0) {
        LOG(CRITICAL, "Cannot open the management socket %s: %s", a->path,
            why ? why : strerror(-rc));
        return rc;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(a->path) >= sizeof(sa.sun_path)) {
        LOG(CRITICAL, "Cannot open the management socket %s: the path is longer than %zu bytes",
            a->path, sizeof(sa.sun_path) - 1);
        return -ENAMETOOLONG;
    }
    memcpy(sa.sun_path, a->path, strlen(a->path) + 1);
    /* our own socket, not uv_listen(): libuv's accept loop cannot pause when descriptors run
     * out, and spins if its reserve descriptor was lost to another thread */
    bool bound = false;
    a->server_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (a->server_fd < 0 || bind(a->server_fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        rc = -errno;
    } else {
        bound = true;
        if (chmod(a->path, 0660) != 0 || listen(a->server_fd, ADMIN_BACKLOG) != 0)
            rc = -errno;
    }
    if (rc == 0) {
        a->server.data = a;
        rc = rtr_acceptor_start(&a->server, &a->loop, a->server_fd, BASE_LOG_MOD_AGENT, NULL,
                                connection_cb);
        a->accepting = rc == 0;
    }
    if (rc < 0) {
        LOG(CRITICAL, "Cannot open the management socket %s: %s", a->path, strerror(-rc));
        if (a->server_fd >= 0)
            close(a->server_fd);
        a->server_fd = -1;
        if (bound) /* the file is ours: a failed bind leaves another's in place */
            unlink(a->path);
    }
    return rc;
}

int mgmt_admin_start(mgmt_admin_t **out, const cfg_t *cfg, stats_registry_t *reg, core_t *core,
                     const mgmt_admin_web_t *web, const mgmt_admin_http_t *http, size_t n_http)
{
    const cfg_management_t *mc = &cfg->management;
    if ((!mc->enabled && n_http == 0) || *out) {
        close_http_fds(http, n_http);
        return 0;
    }
    mgmt_admin_t *a = base_calloc(1, sizeof(*a));
    pthread_mutex_init(&a->req_lock, NULL);
    a->server_fd = -1;
    a->reg = reg;
    a->core = core;
    a->web = web;
    a->path = mc->enabled ? base_strdup(mc->socket) : NULL;
    a->max_clients = mc->enabled && mc->max_clients ? mc->max_clients : 16;
    a->info.product = "junction";
    a->info.version = JUNCTION_VERSION;
    a->info.router_id = cfg->router.id;
    a->info.mode = cfg->router.mode;
    if (n_http) {
        a->http = base_calloc(n_http, sizeof(*a->http));
        memcpy(a->http, http, n_http * sizeof(*http));
        a->n_http = n_http;
    }

    int rc = uv_loop_init(&a->loop);
    if (rc < 0) {
        close_http_fds(http, n_http);
        admin_free(a);
        return rc;
    }
    if (a->path && (rc = socket_open(a)) < 0) {
        close_http_fds(http, n_http);
        loop_drain(a);
        admin_free(a);
        return rc;
    }
    rtr_fd_loop_reserve_init(&a->loop);
    a->httpd = web->create(a, &a->loop, core, web->rtr);
    uv_async_init(&a->loop, &a->stop, stop_cb);
    a->stop.data = a;
    uv_async_init(&a->loop, &a->req_async, req_cb);
    a->req_async.data = a;
    uv_sem_init(&a->started, 0);
    rc = uv_thread_create(&a->thread, admin_main, a);
    if (rc == 0) {
        uv_sem_wait(&a->started);
        if (a->http_rc < 0) { /* web->start logged why and closed the sockets */
            rc = a->http_rc;
            uv_thread_join(&a->thread);
        }
    } else {
        close_http_fds(http, n_http);
    }
    uv_sem_destroy(&a->started);
    if (rc < 0) {
        loop_drain(a);
        if (a->path)
            unlink(a->path);
        admin_free(a);
        return rc;
    }
    if (a->path)
        LOG(NOTICE, "Management socket %s (mode 0660, at most %u clients)", a->path,
            a->max_clients);
    *out = a;
    return 0;
}

int mgmt_admin_http_add(mgmt_admin_t **ap, const cfg_t *cfg, stats_registry_t *reg, core_t *core,
                        const mgmt_admin_web_t *web, const mgmt_admin_http_t *h)
{
    mgmt_admin_t *a = *ap;
    if (!a)
        return mgmt_admin_start(ap, cfg, reg, core, web, h, 1);
    admin_req_t *r = base_calloc(1, sizeof(*r));
    r->add = *h;
    pthread_mutex_lock(&a->req_lock);
    r->next = a->reqs;
    a->reqs = r;
    pthread_mutex_unlock(&a->req_lock);
    uv_async_send(&a->req_async);
    return 0;
}

void mgmt_admin_http_del(mgmt_admin_t *a, long id)
{
    if (!a || id <= 0)
        return;
    admin_req_t *r = base_calloc(1, sizeof(*r));
    r->add.fd = -1;
    r->del = id;
    pthread_mutex_lock(&a->req_lock);
    r->next = a->reqs;
    a->reqs = r;
    pthread_mutex_unlock(&a->req_lock);
    uv_async_send(&a->req_async);
}

void mgmt_admin_stop(mgmt_admin_t **ap)
{
    mgmt_admin_t *a = *ap;
    if (!a)
        return;
    *ap = NULL;
    uv_async_send(&a->stop);
    uv_thread_join(&a->thread);
    loop_drain(a); /* normally empty: every handle closed in stop_cb */
    if (a->path)
        unlink(a->path);
    admin_free(a);
}
