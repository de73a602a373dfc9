/* router/admin.c: the admin thread and the management socket.
 *
 * The admin thread runs one libuv loop with a Unix stream socket (uv_pipe) that speaks the
 * management protocol of stats/stats.h ("Management protocol"): newline-delimited JSON,
 * one stats_mgmt session per client.  This file only moves bytes: it cuts the input into
 * lines, hands each to the session, and writes what the session produces.
 *
 * Threads: rtr_admin_start() and rtr_admin_stop() run on the main thread.  Every other
 * function here is a callback of (or is called from) the admin loop and runs on the admin
 * thread only; nothing here is thread-safe, so no suffixes are used inside the file.  The
 * only cross-thread traffic is the stop request (uv_async_send) and the thread join.  The
 * stats registry is read through stats/'s thread-safe calls.
 *
 * DESIGN: everything a client can make the server hold is bounded.
 *   - input: a line longer than STATS_MGMT_LINE_MAX gets a 413 error and the rest of it is
 *     dropped up to its newline; reading stops while the client has a streamed reply in
 *     progress or ADMIN_OUT_MAX bytes of output waiting, so at most one line plus one read
 *     is buffered;
 *   - output: replies are never dropped, but the next request is not read until the output
 *     drained below ADMIN_OUT_MAX, and a streamed reply (snapshot, query) produces its next
 *     line only then; subscription updates are refused (-EAGAIN) while the output is above
 *     ADMIN_OUT_MAX, and the session then sends the latest values next time - a slow
 *     subscriber never builds a backlog;
 *   - clients: at most management.maxClients; one more gets an error line and is closed.
 *
 *   client --bytes--> in[] --line--> stats_mgmt_handle() --lines--> pend[] --uv_write--> client
 *                                    stats_mgmt_tick() (timer) ---^   (one write in flight;
 *                                    stats_mgmt_resume() (drained) -^   pend[] gathers the next)
 *
 * Lifetime of a client: accepted .. both its handles (pipe, tick timer) closed; freed in the
 * last close callback.  On stop, every handle of the loop is closed and the loop runs out.
 */
#include "router/admin.h"

#include "core/base/base.h"
#include "core/base/list.h"
#include "core/base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <uv.h>

#include "junction_version.h"

#define LOG(lvl, ...) base_log(BASE_LOG_MOD_AGENT, BASE_LOG_##lvl, __VA_ARGS__)

// clang-format off
#define ADMIN_OUT_MAX   (256u << 10) /* output waiting above which a client is paused and
                                        its subscription updates are dropped */
#define ADMIN_READ_SIZE (64u << 10)  /* room offered to each read */
#define ADMIN_BACKLOG   64           /* listen() backlog */
// clang-format on

typedef struct admin admin_t;
typedef struct admin_client admin_client_t;

/* admin_client_t: one connection to the management socket.  Admin thread only. */
struct admin_client {
    uv_pipe_t       pipe;       /* first member: handle <-> client cast */
    uv_timer_t      tick;       /* fires when a subscription update is due */
    admin_t        *admin;      /* the server */
    stats_mgmt_t   *sess;       /* its protocol session; NULL for a refused client */
    admin_client_t *prev;       /* in admin->clients */
    admin_client_t *next;       /* in admin->clients */
    char           *in;         /* bytes read that do not make a complete line yet */
    size_t          in_len;     /* their count */
    size_t          in_cap;     /* allocated */
    bool            discarding; /* the line being read was too long: drop it to its newline */
    char           *pend;       /* output gathered for the next uv_write */
    size_t          pend_len;   /* its length */
    size_t          pend_cap;   /* allocated */
    char           *wdata;      /* output in flight in uv_write (swapped with pend) */
    size_t          wlen;       /* its length */
    size_t          wcap;       /* allocated */
    uv_write_t      wreq;       /* the write in flight */
    bool            writing;    /* a uv_write is in flight */
    bool            reading;    /* uv_read_start is active */
    bool            closing;    /* uv_close was called */
    bool            refused;    /* over the cap: close once the error line is written */
    int             handles;    /* handles not yet closed */
};

/* admin_t: the server.  Written by the main thread before the admin thread starts and
 * after it was joined; in between, only the admin thread touches it. */
struct admin {
    uv_loop_t         loop;        /* the admin thread's loop */
    uv_pipe_t         server;      /* the listening socket */
    uv_async_t        stop;        /* main thread -> admin thread: stop */
    uv_thread_t       thread;      /* the admin thread */
    stats_registry_t *reg;         /* stats read by the sessions (borrowed) */
    stats_mgmt_info_t info;        /* hello's product, version, router id, mode (borrowed
                                      from the cfg and static strings) */
    char             *path;        /* the socket's path (heap), removed at stop */
    uint32_t          max_clients; /* management.maxClients */
    uint32_t          n_clients;   /* clients served (refused ones not counted) */
    admin_client_t   *clients;     /* every open client, refused ones included */
    bool              stopping;    /* the stop request arrived */
};

/* The running server, or NULL.  Written by the main thread only (start, stop). */
static admin_t *s_admin;

/* ---- output ---- */

static size_t out_bytes(const admin_client_t *c)
{
    return c->pend_len + (c->writing ? c->wlen : 0);
}

static void buf_append(char **buf, size_t *len, size_t *cap, const char *bytes, size_t n)
{
    if (*len + n > *cap) {
        size_t ncap = *cap ? *cap : 4096;
        while (ncap < *len + n)
            ncap *= 2;
        *buf = base_realloc(*buf, ncap);
        *cap = ncap;
    }
    memcpy(*buf + *len, bytes, n);
    *len += n;
}

/* stats_write_fn for replies: always taken (the client is paused instead, see DESIGN). */
static int write_reply(void *ctx, const char *bytes, size_t len)
{
    admin_client_t *c = ctx;
    if (c->closing)
        return -EPIPE;
    buf_append(&c->pend, &c->pend_len, &c->pend_cap, bytes, len);
    return 0;
}

/* stats_write_fn for subscription updates: refused while the client is behind. */
static int write_update(void *ctx, const char *bytes, size_t len)
{
    admin_client_t *c = ctx;
    if (c->closing)
        return -EPIPE;
    if (out_bytes(c) >= ADMIN_OUT_MAX)
        return -EAGAIN;
    buf_append(&c->pend, &c->pend_len, &c->pend_cap, bytes, len);
    return 0;
}

static void client_close(admin_client_t *c);
static void client_pump(admin_client_t *c);

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
    client_pump(c);
}

/* Hand the gathered output to uv_write unless a write is in flight. */
static void client_flush(admin_client_t *c)
{
    if (c->writing || c->closing || c->pend_len == 0)
        return;
    /* swap: the gathered bytes go out, the idle buffer gathers the next ones */
    char  *p = c->wdata;
    size_t cap = c->wcap;
    c->wdata = c->pend;
    c->wcap = c->pend_cap;
    c->wlen = c->pend_len;
    c->pend = p;
    c->pend_cap = cap;
    c->pend_len = 0;
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

/* ---- input ---- */

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    admin_client_t *c = (admin_client_t *)h;
    (void)suggested;
    if (c->in_cap - c->in_len < ADMIN_READ_SIZE) {
        c->in_cap = c->in_len + ADMIN_READ_SIZE;
        c->in = base_realloc(c->in, c->in_cap);
    }
    *buf = uv_buf_init(c->in + c->in_len, (unsigned)(c->in_cap - c->in_len));
}

/* The client must wait: a streamed reply is still going out, or its output is behind. */
static bool client_paused(const admin_client_t *c)
{
    return stats_mgmt_is_streaming(c->sess) || out_bytes(c) >= ADMIN_OUT_MAX;
}

/* Answer every complete line in c->in while the client is not paused. */
static void client_lines(admin_client_t *c)
{
    size_t off = 0;
    while (!c->closing && !client_paused(c) && off < c->in_len) {
        char *start = c->in + off;
        char *nl = memchr(start, '\n', c->in_len - off);
        if (c->discarding) {
            if (!nl) {
                off = c->in_len; /* still inside the over-long line */
                break;
            }
            c->discarding = false;
            off = (size_t)(nl - c->in) + 1;
            continue;
        }
        if (!nl) {
            if (c->in_len - off > STATS_MGMT_LINE_MAX) {
                char msg[96];
                snprintf(msg, sizeof(msg), "request line longer than %u bytes: dropped",
                         STATS_MGMT_LINE_MAX);
                stats_mgmt_error(write_reply, c, 413, msg);
                c->discarding = true;
                off = c->in_len;
            }
            break;
        }
        size_t len = (size_t)(nl - start);
        off += len + 1;
        if (len > STATS_MGMT_LINE_MAX) {
            char msg[96];
            snprintf(msg, sizeof(msg), "request line longer than %u bytes: dropped",
                     STATS_MGMT_LINE_MAX);
            stats_mgmt_error(write_reply, c, 413, msg);
            continue;
        }
        stats_mgmt_handle(c->sess, start, len, write_reply, c);
    }
    if (off) {
        memmove(c->in, c->in + off, c->in_len - off);
        c->in_len -= off;
    }
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    admin_client_t *c = (admin_client_t *)s;
    (void)buf;
    if (nread < 0) {
        if (nread != UV_EOF)
            LOG(DEBUG, "Management client read failed: %s", uv_strerror((int)nread));
        client_close(c);
        return;
    }
    c->in_len += (size_t)nread;
    client_pump(c);
}

/* ---- subscriptions ---- */

static void tick_cb(uv_timer_t *t)
{
    admin_client_t *c = BASE_CONTAINER_OF(t, admin_client_t, tick);
    if (c->closing)
        return;
    if (stats_mgmt_tick(c->sess, uv_now(&c->admin->loop), write_update, c) < 0) {
        client_close(c);
        return;
    }
    client_pump(c);
}

/* Everything that follows a change (bytes in, output drained, a tick): more of a streamed
 * reply, more requests, the write, reading on or off, the next tick. */
static void client_pump(admin_client_t *c)
{
    if (c->closing)
        return;
    if (c->refused) {
        client_flush(c);
        if (!c->writing && c->pend_len == 0)
            client_close(c);
        return;
    }
    while (stats_mgmt_is_streaming(c->sess) && out_bytes(c) < ADMIN_OUT_MAX)
        stats_mgmt_resume(c->sess, write_reply, c);
    client_lines(c);
    client_flush(c);
    if (c->closing)
        return;

    bool want = !client_paused(c);
    if (want && !c->reading) {
        if (uv_read_start((uv_stream_t *)&c->pipe, alloc_cb, read_cb) < 0) {
            client_close(c);
            return;
        }
        c->reading = true;
    } else if (!want && c->reading) {
        uv_read_stop((uv_stream_t *)&c->pipe);
        c->reading = false;
    }

    int64_t due = stats_mgmt_next_due(c->sess, uv_now(&c->admin->loop));
    if (due < 0)
        uv_timer_stop(&c->tick);
    else
        uv_timer_start(&c->tick, tick_cb, (uint64_t)due, 0);
}

/* ---- clients come and go ---- */

static void client_closed_cb(uv_handle_t *h)
{
    admin_client_t *c = h->data;
    if (--c->handles > 0)
        return;
    stats_mgmt_session_free(c->sess);
    free(c->in);
    free(c->pend);
    free(c->wdata);
    free(c);
}

static void client_close(admin_client_t *c)
{
    if (c->closing)
        return;
    c->closing = true;
    admin_t *a = c->admin;
    BASE_DLIST_REMOVE(a->clients, c, prev, next);
    if (!c->refused)
        a->n_clients--;
    uv_close((uv_handle_t *)&c->tick, client_closed_cb);
    uv_close((uv_handle_t *)&c->pipe, client_closed_cb);
}

static void connection_cb(uv_stream_t *server, int status)
{
    admin_t *a = server->data;
    if (status < 0) {
        LOG(WARNING, "Management socket: accept failed: %s", uv_strerror(status));
        return;
    }
    admin_client_t *c = base_calloc(1, sizeof(*c));
    c->admin = a;
    uv_pipe_init(&a->loop, &c->pipe, 0);
    c->pipe.data = c;
    uv_timer_init(&a->loop, &c->tick);
    c->tick.data = c;
    c->handles = 2;
    BASE_DLIST_PUSH(a->clients, c, prev, next);
    if (uv_accept(server, (uv_stream_t *)&c->pipe) < 0) {
        c->refused = true;
        client_close(c);
        return;
    }
    if (a->stopping || a->n_clients >= a->max_clients) {
        char msg[128];
        snprintf(msg, sizeof(msg), "too many management clients (maxClients is %u): try again "
                 "later", a->max_clients);
        LOG(WARNING, "Management socket: a client refused: %u clients already", a->n_clients);
        c->refused = true;
        stats_mgmt_error(write_reply, c, 503, msg);
        client_pump(c);
        return;
    }
    a->n_clients++;
    c->sess = stats_mgmt_session_new(a->reg, &a->info);
    stats_mgmt_hello(c->sess, write_reply, c);
    client_pump(c);
}

/* ---- the thread ---- */

static void stop_cb(uv_async_t *h)
{
    admin_t *a = h->data;
    a->stopping = true;
    while (a->clients)
        client_close(a->clients); /* takes it off the list */
    uv_close((uv_handle_t *)&a->server, NULL);
    uv_close((uv_handle_t *)&a->stop, NULL);
}

static void admin_main(void *arg)
{
    admin_t *a = arg;
    base_thread_set_role(BASE_THREAD_ADMIN, 0);
    pthread_setname_np(pthread_self(), "junction-admin");
    uv_run(&a->loop, UV_RUN_DEFAULT);
}

/* ---- start and stop (main thread) ---- */

/* mkdir -p of the directory that holds `path` (new directories get mode 0755). */
static int make_parent_dirs(const char *path)
{
    char  *dir = base_strdup(path);
    char  *slash = strrchr(dir, '/');
    int    rc = 0;
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

static void admin_free(admin_t *a)
{
    free(a->path);
    free(a);
}

int rtr_admin_start(const cfg_t *cfg, stats_registry_t *reg)
{
    const cfg_management_t *mc = &cfg->management;
    if (!mc->enabled || s_admin)
        return 0;
    const char *why = NULL;
    admin_t    *a = base_calloc(1, sizeof(*a));
    a->reg = reg;
    a->path = base_strdup(mc->socket);
    a->max_clients = mc->max_clients ? mc->max_clients : 16;
    a->info.product = "junction";
    a->info.version = JUNCTION_VERSION;
    a->info.router_id = cfg->router.id;
    a->info.mode = cfg->router.mode;

    int rc = make_parent_dirs(a->path);
    if (rc == 0)
        rc = remove_stale(a->path, &why);
    if (rc < 0) {
        LOG(CRITICAL, "Cannot open the management socket %s: %s", a->path,
            why ? why : strerror(-rc));
        admin_free(a);
        return rc;
    }
    rc = uv_loop_init(&a->loop);
    if (rc < 0) {
        admin_free(a);
        return rc;
    }
    uv_pipe_init(&a->loop, &a->server, 0);
    a->server.data = a;
    rc = uv_pipe_bind(&a->server, a->path);
    if (rc == 0 && chmod(a->path, 0660) != 0)
        rc = -errno;
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&a->server, ADMIN_BACKLOG, connection_cb);
    if (rc < 0) {
        LOG(CRITICAL, "Cannot open the management socket %s: %s", a->path, uv_strerror(rc));
        uv_close((uv_handle_t *)&a->server, NULL);
        uv_run(&a->loop, UV_RUN_DEFAULT);
        uv_loop_close(&a->loop);
        unlink(a->path);
        admin_free(a);
        return rc;
    }
    uv_async_init(&a->loop, &a->stop, stop_cb);
    a->stop.data = a;
    s_admin = a;
    rc = uv_thread_create(&a->thread, admin_main, a);
    if (rc < 0) {
        s_admin = NULL;
        uv_close((uv_handle_t *)&a->server, NULL);
        uv_close((uv_handle_t *)&a->stop, NULL);
        uv_run(&a->loop, UV_RUN_DEFAULT);
        uv_loop_close(&a->loop);
        unlink(a->path);
        admin_free(a);
        return rc;
    }
    LOG(NOTICE, "Management socket %s (mode 0660, at most %u clients)", a->path,
        a->max_clients);
    return 0;
}

void rtr_admin_stop(void)
{
    admin_t *a = s_admin;
    if (!a)
        return;
    uv_async_send(&a->stop);
    uv_thread_join(&a->thread);
    s_admin = NULL;
    uv_loop_close(&a->loop);
    unlink(a->path);
    admin_free(a);
}
