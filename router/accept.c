/* router/accept.c: accepting on a listening socket without spinning when descriptors run
 * out (rtr_acceptor_t), the process's reserve descriptor, the open-files limit at start-up,
 * and the "host:port" of a socket address for log lines.  Why and how: router/DESIGN.md
 * "File descriptors".
 *
 * Threads: an acceptor runs on the thread of its loop (main: AMQP listeners; admin: http
 * listeners and the management socket).  The reserve descriptor is one process-wide int
 * swapped atomically; s_accept_lock (a leaf lock) serializes the acceptors' accept() calls
 * with the moment the reserve is closed, so one thread cannot take the slot another freed to
 * refuse its clients.
 */
#include "router/accept.h"

#include "core/base/base.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define LOGM(a, lvl, ...) base_log((a)->mod, BASE_LOG_##lvl, __VA_ARGS__)

/* The reserve descriptor (/dev/null), or -1 while it is closed or lost to another thread. */
static _Atomic int s_reserve = -1;
/* Held around every accept() of an acceptor and around the reserve's closed window. */
static pthread_mutex_t s_accept_lock = PTHREAD_MUTEX_INITIALIZER;

void rtr_fd_reserve_init(void)
{
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    int old = atomic_exchange(&s_reserve, fd);
    if (old >= 0)
        close(old);
}

void rtr_fd_reserve_fini(void)
{
    int fd = atomic_exchange(&s_reserve, -1);
    if (fd >= 0)
        close(fd);
}

static void loop_reserve_closed_cb(uv_handle_t *h)
{
    free(h);
}

void rtr_fd_loop_reserve_init(uv_loop_t *loop)
{
    uv_pipe_t *p = base_malloc(sizeof(*p));
    uv_pipe_init(loop, p, 0); /* libuv opens the loop's reserve here, once */
    uv_close((uv_handle_t *)p, loop_reserve_closed_cb);
}

static void close_walk_cb(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

void rtr_loop_close_all(uv_loop_t *loop)
{
    uv_walk(loop, close_walk_cb, NULL);
}

/* Open the reserve again if it is closed; fails quietly while descriptors are short. */
static void reserve_refill(void)
{
    if (atomic_load_explicit(&s_reserve, memory_order_relaxed) >= 0)
        return;
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    int expect = -1;
    if (!atomic_compare_exchange_strong(&s_reserve, &expect, fd))
        close(fd); /* another thread put one back first */
}

/* Whether accept() failing with `e` cost only that one pending connection, so accepting can
 * go on (Linux reports the new connection's network errors from accept()). */
static bool error_is_one_connection(int e)
{
    switch (e) {
    case EINTR:
    case ECONNABORTED:
    case EPROTO:
    case EPERM:
    case ENETDOWN:
    case ENOPROTOOPT:
    case EHOSTDOWN:
    case ENONET:
    case EHOSTUNREACH:
    case EOPNOTSUPP:
    case ENETUNREACH:
        return true;
    default:
        return false;
    }
}

/* Close the reserve for a moment to accept and close the clients waiting on `lfd` (at most
 * a batch).  Returns how many were closed; *drained tells whether the backlog was emptied
 * (false when the reserve is not ours to use: another thread holds it, or it was lost). */
static uint64_t refuse_backlog(int lfd, bool *drained)
{
    *drained = false;
    pthread_mutex_lock(&s_accept_lock);
    int r = atomic_exchange(&s_reserve, -1);
    if (r < 0) {
        reserve_refill(); /* a descriptor may have come free since it was lost */
        pthread_mutex_unlock(&s_accept_lock);
        return 0;
    }
    close(r);
    uint64_t n = 0;
    for (int i = 0; i < RTR_ACCEPT_BATCH; i++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd >= 0) {
            close(fd);
            n++;
        } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
            *drained = true;
            break;
        } else if (errno != EINTR && !error_is_one_connection(errno)) {
            break; /* a thread that opened a file took the slot */
        }
    }
    reserve_refill();
    pthread_mutex_unlock(&s_accept_lock);
    return n;
}

/* Whether a client waits in the listening socket's backlog (poll(2) needs no descriptor). */
static bool has_pending(int lfd)
{
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    return poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

/* The soft open-files limit, for log lines (0 when unknown). */
static uint64_t fd_limit(void)
{
    struct rlimit rl;
    return getrlimit(RLIMIT_NOFILE, &rl) == 0 ? (uint64_t)rl.rlim_cur : 0;
}

static void poll_cb(uv_poll_t *p, int status, int events);

static void retry_cb(uv_timer_t *t)
{
    rtr_acceptor_t *a = t->data;
    a->_paused = false;
    if (!a->_started)
        return;
    uv_poll_start(&a->_poll, UV_READABLE, poll_cb);
    poll_cb(&a->_poll, 0, UV_READABLE); /* those who waited meanwhile, without a poll round */
}

/* Clients are being refused: log once per episode and warning period. */
static void episode_begin(rtr_acceptor_t *a, int e)
{
    uint64_t now = uv_now(a->_retry.loop);
    if (!a->_short) {
        a->_short = true;
        a->_since_ms = now;
        a->_backoff_ms = RTR_ACCEPT_RETRY_MIN_MS;
        a->_warned = a->_warn_ms == 0 || now - a->_warn_ms >= RTR_ACCEPT_WARN_PERIOD_MS;
        if (a->_warned) {
            a->_warn_ms = now;
            if (rtr_errno_is_fd_shortage(e))
                LOGM(a, WARNING,
                     "Out of file descriptors on %s (%s; open files limit %" PRIu64
                     "): new connections are refused until some close",
                     a->what, strerror(e), fd_limit());
            else
                LOGM(a, WARNING, "Cannot accept on %s: %s: retrying in %u ms", a->what, strerror(e),
                     (unsigned)a->_backoff_ms);
        }
    }
}

/* accept() failed with `e`, which the next call would repeat.  Out of descriptors, the
 * clients waiting are accepted in the reserve's slot and closed; when they could not all be
 * (no reserve), or for any other error, polling pauses for the back-off. */
static void acceptor_short(rtr_acceptor_t *a, int e)
{
    if (rtr_errno_is_fd_shortage(e)) {
        /* accept() fails for lack of a descriptor before it looks at the backlog: the last
         * descriptor may just have gone to the previous client, with nobody else waiting */
        if (!has_pending(a->fd))
            return;
        bool     drained;
        uint64_t n = refuse_backlog(a->fd, &drained);
        episode_begin(a, e);
        a->_refused += n;
        if (drained)
            return; /* not readable any more: the next client wakes the poll again */
    } else {
        episode_begin(a, e);
    }
    uv_poll_stop(&a->_poll);
    a->_paused = true;
    uv_timer_start(&a->_retry, retry_cb, a->_backoff_ms, 0);
    a->_backoff_ms =
        a->_backoff_ms * 2 > RTR_ACCEPT_RETRY_MAX_MS ? RTR_ACCEPT_RETRY_MAX_MS : a->_backoff_ms * 2;
}

/* A connection was accepted: the episode (if any) is over. */
static void acceptor_recovered(rtr_acceptor_t *a)
{
    a->_short = false;
    if (!a->_warned)
        return; /* its warning was held back: so is this line (the count carries on) */
    uint64_t now = uv_now(a->_retry.loop);
    LOGM(a, NOTICE, "Accepting on %s again after %.1f s; %" PRIu64 " connections refused meanwhile",
         a->what, (double)(now - a->_since_ms) / 1000.0, a->_refused);
    a->_refused = 0;
    a->_warned = false;
}

static void poll_cb(uv_poll_t *p, int status, int events)
{
    rtr_acceptor_t *a = p->data;
    (void)events;
    if (!a->_started || a->_paused)
        return;
    if (status < 0) {
        acceptor_short(a, -status);
        return;
    }
    for (int i = 0; i < RTR_ACCEPT_BATCH && a->_started; i++) {
        pthread_mutex_lock(&s_accept_lock);
        int fd = accept4(a->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        int e = errno;
        if (fd >= 0)
            reserve_refill();
        pthread_mutex_unlock(&s_accept_lock);
        if (fd < 0) {
            if (e == EAGAIN || e == EWOULDBLOCK)
                return;
            if (error_is_one_connection(e))
                continue;
            acceptor_short(a, e);
            return;
        }
        if (a->_short)
            acceptor_recovered(a);
        a->cb(a, fd);
    }
}

/* "host:port" or the path the listening socket is bound to. */
static void socket_name(int fd, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t               sl = sizeof(ss);
    char                    host[INET6_ADDRSTRLEN] = "?";
    snprintf(buf, len, "?");
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return;
    if (ss.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)&ss;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        snprintf(buf, len, "%s:%d", host, ntohs(in->sin_port));
    } else if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&ss;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        snprintf(buf, len, "%s:%d", host, ntohs(in6->sin6_port));
    } else if (ss.ss_family == AF_UNIX) {
        const struct sockaddr_un *un = (const struct sockaddr_un *)&ss;
        snprintf(buf, len, "%.*s", (int)sizeof(un->sun_path), un->sun_path);
    }
}

int rtr_acceptor_start(rtr_acceptor_t *a, uv_loop_t *loop, int fd, base_log_module_t mod,
                       const char *what, rtr_acceptor_cb cb)
{
    void *data = a->data;
    memset(a, 0, sizeof(*a));
    a->data = data;
    a->fd = fd;
    a->mod = mod;
    a->cb = cb;
    if (what)
        snprintf(a->what, sizeof(a->what), "%s", what);
    else
        socket_name(fd, a->what, sizeof(a->what));
    int rc = uv_poll_init(loop, &a->_poll, fd);
    if (rc < 0)
        return rc;
    uv_timer_init(loop, &a->_retry);
    a->_poll.data = a;
    a->_retry.data = a;
    a->_open = 2;
    a->_started = true;
    uv_poll_start(&a->_poll, UV_READABLE, poll_cb);
    return 0;
}

void rtr_acceptor_stop(rtr_acceptor_t *a)
{
    if (!a->_started)
        return;
    a->_started = false;
    if (!uv_is_closing((uv_handle_t *)&a->_poll))
        uv_poll_stop(&a->_poll);
    if (!uv_is_closing((uv_handle_t *)&a->_retry))
        uv_timer_stop(&a->_retry);
    a->_paused = false;
}

static void acceptor_closed_cb(uv_handle_t *h)
{
    rtr_acceptor_t *a = h->data;
    if (--a->_open == 0 && a->_closed)
        a->_closed(a);
}

void rtr_acceptor_close(rtr_acceptor_t *a, rtr_acceptor_closed_cb closed)
{
    rtr_acceptor_stop(a);
    a->_closed = closed;
    uv_close((uv_handle_t *)&a->_poll, acceptor_closed_cb);
    uv_close((uv_handle_t *)&a->_retry, acceptor_closed_cb);
}

/* ---- the open-files limit ---- */

/* The most descriptors the kernel lets one process have (fs.nr_open). */
static rlim_t nr_open(void)
{
    rlim_t n = 1u << 20; /* the kernel's default */
    FILE  *f = fopen("/proc/sys/fs/nr_open", "r");
    if (f) {
        unsigned long v;
        if (fscanf(f, "%lu", &v) == 1 && v > 0)
            n = (rlim_t)v;
        fclose(f);
    }
    return n;
}

uint64_t rtr_fd_limit_raise(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        base_log(BASE_LOG_MOD_SERVER, BASE_LOG_WARNING, "Open files limit: unknown (%s)",
                 strerror(errno));
        return 0;
    }
    rlim_t want = rl.rlim_max;
    if (want == RLIM_INFINITY || want > nr_open())
        want = nr_open();
    if (want <= rl.rlim_cur) {
        base_log(BASE_LOG_MOD_SERVER, BASE_LOG_INFO, "Open files limit: %" PRIu64,
                 (uint64_t)rl.rlim_cur);
        return (uint64_t)rl.rlim_cur;
    }
    struct rlimit nl = {.rlim_cur = want, .rlim_max = rl.rlim_max};
    if (setrlimit(RLIMIT_NOFILE, &nl) != 0) {
        base_log(BASE_LOG_MOD_SERVER, BASE_LOG_WARNING,
                 "Open files limit: %" PRIu64 " (cannot raise it to %" PRIu64 ": %s)",
                 (uint64_t)rl.rlim_cur, (uint64_t)want, strerror(errno));
        return (uint64_t)rl.rlim_cur;
    }
    base_log(BASE_LOG_MOD_SERVER, BASE_LOG_INFO, "Open files limit: %" PRIu64 " -> %" PRIu64,
             (uint64_t)rl.rlim_cur, (uint64_t)want);
    return (uint64_t)want;
}

/* ---- rate-limited log lines ---- */

bool rtr_ratelimit_pass(rtr_ratelimit_t *rl, uint64_t now_ms, uint32_t period_ms, uint64_t *held)
{
    if (rl->next_ms && now_ms < rl->next_ms) {
        rl->suppressed++;
        return false;
    }
    rl->next_ms = now_ms + period_ms;
    if (!rl->next_ms)
        rl->next_ms = 1;
    *held = rl->suppressed;
    rl->suppressed = 0;
    return true;
}

/* ---- socket addresses ---- */

void rtr_sockaddr_format(const struct sockaddr_storage *ss, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host));
        port = ntohs(a->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host));
        port = ntohs(a->sin6_port);
    }
    snprintf(buf, len, "%s:%d", host, port);
}
