/* router/accept.h: accepting connections on a listening socket without spinning when the
 * process runs out of file descriptors, and the process's file-descriptor budget.
 *
 * Every listener of the router (AMQP: the connection manager's, on the main thread; http
 * and the management socket on the admin thread) accepts through an rtr_acceptor_t.  When accept() fails for lack of
 * descriptors (EMFILE, ENFILE) or kernel memory (ENOBUFS, ENOMEM), the listening socket stays
 * readable, so a plain accept loop would run again at once, forever.  An acceptor instead
 * accepts and closes the clients waiting in the backlog in the slot of the process's reserve
 * descriptor (they see the connection end at once rather than hang), or, when it cannot,
 * stops polling and tries again after a back-off (RTR_ACCEPT_RETRY_MIN_MS doubling up to
 * RTR_ACCEPT_RETRY_MAX_MS).  It logs one warning when it runs out (at most one per
 * RTR_ACCEPT_WARN_PERIOD_MS) and one line when it accepts again, with the count of clients
 * it refused meanwhile (accept.c's DESIGN).
 *
 * Threads: an acceptor belongs to the thread that runs its loop; every rtr_acceptor_* call
 * and its callback run there.  rtr_fd_reserve_init() runs once at start-up on the main
 * thread; the reserve itself is process-wide and taken with an atomic swap, so two threads
 * never close it twice.  rtr_fd_limit_raise() is start-up only.  rtr_ratelimit_pass() is not
 * thread-safe: each rtr_ratelimit_t belongs to one thread.  rtr_loop_close_all() (every
 * handle of a loop, at a thread's end) runs on the thread of that loop.
 * rtr_sockaddr_format() (a peer's or a listener's "host:port" in log lines) is thread-safe.
 */
#ifndef JUNCTION_ROUTER_ACCEPT_H
#define JUNCTION_ROUTER_ACCEPT_H

#include "core/base/log.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

// clang-format off
#define RTR_ACCEPT_BATCH           64    /* connections accepted per readable event */
#define RTR_ACCEPT_RETRY_MIN_MS    100   /* first pause after running out of descriptors */
#define RTR_ACCEPT_RETRY_MAX_MS    1000  /* the pause doubles up to this while it lasts */
#define RTR_ACCEPT_WARN_PERIOD_MS  10000 /* at most one "out of descriptors" line per period */
// clang-format on

typedef struct rtr_acceptor rtr_acceptor_t;

/* A new connection: `fd` is non-blocking and close-on-exec, and the callee's to close. */
typedef void (*rtr_acceptor_cb)(rtr_acceptor_t *a, int fd);

/* Called once both of the acceptor's handles closed (rtr_acceptor_close). */
typedef void (*rtr_acceptor_closed_cb)(rtr_acceptor_t *a);

/* rtr_acceptor_t: one listening socket being accepted on.  Embedded in its listener; owned
 * by the thread of its loop.  Lifetime: rtr_acceptor_start() .. the closed callback of
 * rtr_acceptor_close() (or the loop's own walk-and-close at shutdown). */
struct rtr_acceptor {
    uv_poll_t              _poll;       /* readable = connections to accept */
    uv_timer_t             _retry;      /* paused: when to try again */
    int                    fd;          /* listening socket (borrowed: the owner closes it) */
    base_log_module_t      mod;         /* log lines go to this module */
    char                   what[128];   /* names the listener in log lines */
    rtr_acceptor_cb        cb;          /* each accepted connection */
    void                  *data;        /* the owner's, untouched here */
    rtr_acceptor_closed_cb _closed;     /* rtr_acceptor_close()'s callback */
    int                    _open;       /* handles initialised and not closed yet */
    bool                   _started;    /* polling was started (not stopped for good) */
    bool                   _paused;     /* out of descriptors: not polling, _retry runs */
    bool                   _short;      /* an episode without descriptors has not ended */
    bool                   _warned;     /* that episode's warning was logged */
    uint32_t               _backoff_ms; /* the next pause */
    uint64_t               _since_ms;   /* when the episode began (uv_now) */
    uint64_t               _warn_ms;    /* when the last warning was logged (uv_now), or 0 */
    uint64_t               _refused;    /* clients closed at once since the last report */
};

/* Start accepting on `fd` (listening, non-blocking) on `loop`, calling cb with each new
 * connection; `what` names the listener in the log (NULL: the address or path the socket is
 * bound to, "127.0.0.1:5672").  Returns 0 or a
 * negative UV_E* code (nothing is left initialised then).  The loop's thread. */
int rtr_acceptor_start(rtr_acceptor_t *a, uv_loop_t *loop, int fd, base_log_module_t mod,
                       const char *what, rtr_acceptor_cb cb);

/* Stop accepting for good (the handles stay until closed, by rtr_acceptor_close() or by the
 * loop's shutdown walk).  Idempotent.  The loop's thread. */
void rtr_acceptor_stop(rtr_acceptor_t *a);

/* Stop accepting and close the handles; `closed` (may be NULL) runs once both closed.  The
 * listening socket is left to the owner.  Call once.  The loop's thread. */
void rtr_acceptor_close(rtr_acceptor_t *a, rtr_acceptor_closed_cb closed);

/* Open the process's reserve descriptor (on /dev/null), which an acceptor that runs out of
 * descriptors closes for a moment to accept and close the clients waiting in its backlog.
 * Main thread, start-up, before other threads run. */
void rtr_fd_reserve_init(void);
/* Close the reserve (shutdown; harmless when it is not open). */
void rtr_fd_reserve_fini(void);

/* Make libuv open now the descriptor it reserves per loop (on /dev/null, for its own accept
 * loops), which it otherwise opens when the loop makes its first stream handle: that may be
 * in the middle of a shortage, in the slot the process's reserve left for a moment, and the
 * reserve would be lost.  For loops that make streams (workers, the admin loop); call before
 * the loop runs, from the thread that starts it. */
void rtr_fd_loop_reserve_init(uv_loop_t *loop);

/* The one way a thread lets go of its loop's handles: uv_close() every handle of `loop` not
 * already closing, with no close callback (handles whose owner must hear of the close are
 * closed by that owner first).  Run the loop afterwards to finish the closes.  The thread
 * that runs `loop`, or any thread once nothing runs it. */
void rtr_loop_close_all(uv_loop_t *loop);

/* Raise the soft RLIMIT_NOFILE to the hard limit (capped at what the kernel allows one
 * process) and log the result, at start-up.  Returns the soft limit in force. */
uint64_t rtr_fd_limit_raise(void);

/* "host:port" of a socket address (IPv4 or IPv6; "?:0" for another family).  Thread-safe. */
struct sockaddr_storage;
void rtr_sockaddr_format(const struct sockaddr_storage *ss, char *buf, size_t len);

/* Whether an error number means the process or the system is out of descriptors. */
static inline bool rtr_errno_is_fd_shortage(int e)
{
    return e == EMFILE || e == ENFILE;
}

/* rtr_ratelimit_t: lets at most one log line through per period and counts the others, for
 * failures that each client can cause again (a socketpair or file a connection needs).
 * Zero-initialised is ready.  One thread only. */
typedef struct rtr_ratelimit {
    uint64_t next_ms;    /* no line before this time (ms, the caller's clock) */
    uint64_t suppressed; /* lines held back since the last one let through */
} rtr_ratelimit_t;

/* True when a line may be logged now (`now_ms` in any monotonic milliseconds); *held gets
 * how many were held back before it (and the count restarts).  False counts one more. */
bool rtr_ratelimit_pass(rtr_ratelimit_t *rl, uint64_t now_ms, uint32_t period_ms, uint64_t *held);

#endif
