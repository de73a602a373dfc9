/* router/server.c: the process's threads - starts the core, the workers, the management
 * agent and (through the connection manager's listen step) the admin thread, hands each
 * accepted AMQP socket to a worker (round-robin), keeps the process gauges, and stops
 * everything in order on a signal.  The listeners are the connection manager's (connmgr.c).
 *
 * Threads: every function here runs on the main thread (its own libuv loop: the connection
 * manager's acceptors, signals, the process gauges' timer).  Start order: connection manager
 * (binds, in rtr_server_new) -> core, workers, agent -> accepting (admin thread, acceptors).
 * Shutdown order: stop accepting -> admin thread -> each worker closes its connections and
 * waits until the core has answered for every link and delivery -> join workers -> stop the
 * core -> stop the agent.  Signal and timer callbacks find the server in their handle's data.
 */
#include "router/server.h"

#include "core/base/pool.h"
#include "router/accept.h"
#include "router/connmgr.h"
#include "router/tls.h"
#include "router/http.h"
#include "router/mgmt/admin.h"
#include "router/mgmt/agent.h"
#include "router/notify.h"
#include "router/sasl.h"
#include "router/worker.h"

#include <fcntl.h>
#include <pthread.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#define LOG(lvl, ...) base_log(BASE_LOG_MOD_SERVER, BASE_LOG_##lvl, __VA_ARGS__)

/* Seconds between two trims of the pools and of malloc, and the bytes of free items each
 * pool keeps on its global list (base_pool_trim()). */
#define RTR_TRIM_PERIOD  5u
#define RTR_POOL_RESERVE (256u << 10)

struct rtr_server {
    const cfg_t      *cfg;             /* configuration, outlives the server */
    uv_loop_t         loop;            /* main thread's loop */
    int               sig_fd;          /* signalfd of the stop signals and SIGUSR1, or -1 */
    uv_poll_t         sig_poll;        /* watches sig_fd on the loop (start .. run's end) */
    uint64_t          log_dropped;     /* base_log_dropped() counted into the router's stats */
    bool              loop_ready;      /* `loop` initialised (start) */
    rtr_tls_t        *tls;             /* the sslProfiles' TLS contexts (new .. free) */
    mgmt_tls_t        tls_mgmt;        /* management's view of them (the admin thread's) */
    rtr_connmgr_t    *connmgr;         /* the listeners and connectors (new .. free) */
    int               n_workers;       /* worker threads */
    rtr_worker_t     *workers;         /* array */
    rtr_ctx_t         ctx;             /* what the workers share (filled at start) */
    mgmt_admin_web_t  web;             /* the admin thread's HTTP server, for these workers */
    base_mpsc_t     **worker_q;        /* each worker's inbox, for the core */
    core_t           *core;            /* the routing core (start .. free) */
    stats_registry_t *reg;             /* the process's stats registry */
    core_stats_t      stats;           /* the built-in families */
    stats_shard_t    *shard;           /* the main thread's shard: process gauges */
    uv_timer_t        proc_timer;      /* refreshes the process gauges every second */
    int               statm_fd;        /* /proc/self/statm for proc_timer, or -1 (start .. free) */
    unsigned          ticks;           /* proc_timer runs so far (for the pool trim period) */
    uint64_t          started_ms;      /* uv_now() at start, for uptimeSeconds */
    const char       *alloc_names[64]; /* pools with an `allocator` stats object */
    stats_obj_t       alloc_objs[64];  /* their objects */
    size_t            n_alloc;         /* entries used */
    int               next_worker;     /* round-robin */
    bool              started;         /* start succeeded, run has not ended */
    bool              stopping;        /* a signal or rtr_server_stop(): no new connections */
    mgmt_agent_t     *agent;           /* the management agent (start .. free) */
    mgmt_admin_t     *admin;           /* the admin thread while it runs, or NULL (main thread) */
};

/* The admin thread's HTTP server (http.c); each server's copy names its workers (`rtr`). */
static const mgmt_admin_web_t s_web = {
    .create = rtr_http_new,
    .start = rtr_http_start,
    .running = rtr_http_running,
    .listener_add = rtr_http_listener_add,
    .listener_del = rtr_http_listener_del,
    .stop = rtr_http_stop,
    .finish = rtr_http_finish,
    .destroy = rtr_http_free,
};

/* A new AMQP connection (the connection manager's accept callback): to the next worker
 * (round-robin). */
static void accept_amqp(void *ctx, const cfg_listener_t *lc, int fd)
{
    rtr_server_t *s = ctx;
    if (s->stopping) {
        close(fd);
        return;
    }
    rtr_worker_t *w = &s->workers[s->next_worker];
    s->next_worker = (s->next_worker + 1) % s->n_workers;
    rtr_worker_post_ext(w, RTR_EXT_ACCEPT, (void *)lc, fd);
}

/* Main thread, every second: uptime, memory and the pools' figures into their gauges; and
 * every RTR_TRIM_PERIOD seconds the pools' surplus and malloc's free pages go back to the
 * system, so that memory taken by a burst returns once it is over. */
static void proc_timer_cb(uv_timer_t *t)
{
    rtr_server_t *s = t->data;
    if (++s->ticks % RTR_TRIM_PERIOD == 0) {
        size_t freed = base_pool_trim(RTR_POOL_RESERVE);
        if (freed)
            LOG(DEBUG, "Pools gave %zu KiB back to the heap", freed >> 10);
    }
    stats_obj_t r = s->stats.router_obj;
    uint64_t    up = (uv_now(&s->loop) - s->started_ms) / 1000;
    stats_obj_set(s->shard, r, CORE_ROUTER_UPTIME, (int64_t)up);
    uint64_t dropped = base_log_dropped();
    stats_obj_add(s->shard, r, CORE_ROUTER_LOG_DROPPED, dropped - s->log_dropped);
    s->log_dropped = dropped;
    /* read through the descriptor opened at start: with every descriptor in use, opening
     * the file now would fail, just when the figures matter */
    char          statm[128];
    ssize_t       got = s->statm_fd >= 0 ? pread(s->statm_fd, statm, sizeof(statm) - 1, 0) : -1;
    unsigned long size = 0, rss = 0;
    if (got > 0) {
        statm[got] = '\0';
        if (sscanf(statm, "%lu %lu", &size, &rss) == 2) {
            long page = sysconf(_SC_PAGESIZE);
            stats_obj_set(s->shard, r, CORE_ROUTER_MEMORY, (int64_t)size * page);
            stats_obj_set(s->shard, r, CORE_ROUTER_RSS, (int64_t)rss * page);
        }
    }
    /* one `allocator` object per pool, as qdrouterd's allocator entity */
    base_pool_info_t info[64];
    size_t           n = base_pool_info(info, 64);
    for (size_t i = 0; i < n && i < 64; i++) {
        size_t k = 0;
        while (k < s->n_alloc && s->alloc_names[k] != info[i].name)
            k++;
        if (k == s->n_alloc) {
            if (s->n_alloc == 64)
                continue;
            if (stats_object_new(s->reg, s->stats.allocator, &info[i].name, &s->alloc_objs[k])) {
                /* no room (the router's maxStats): give the sink back, try next time */
                stats_object_retire(s->reg, s->alloc_objs[k]);
                continue;
            }
            s->alloc_names[s->n_alloc++] = info[i].name;
        }
        stats_obj_t o = s->alloc_objs[k];
        stats_obj_set(s->shard, o, CORE_ALLOC_TYPE_SIZE, (int64_t)info[i].size);
        stats_obj_set(s->shard, o, CORE_ALLOC_BATCH, info[i].batch);
        stats_obj_set(s->shard, o, CORE_ALLOC_FROM_HEAP, (int64_t)info[i].from_heap);
        stats_obj_set(s->shard, o, CORE_ALLOC_TO_THREADS, (int64_t)info[i].to_threads);
        stats_obj_set(s->shard, o, CORE_ALLOC_TO_GLOBAL, (int64_t)info[i].to_global);
        stats_obj_set(s->shard, o, CORE_ALLOC_ON_GLOBAL, (int64_t)info[i].on_global);
        stats_obj_set(s->shard, o, CORE_ALLOC_TO_HEAP, (int64_t)info[i].to_heap);
    }
}

/* Stop accepting and end rtr_server_run()'s main loop; the shutdown proper follows there. */
static void server_stop(rtr_server_t *s)
{
    s->stopping = true;
    /* a service manager waiting on us (Type=notify) learns the stop is ours, not a crash */
    int rc = rtr_notify("STOPPING=1\nSTATUS=Shutting down");
    if (rc < 0)
        LOG(WARNING, "Cannot tell the service manager (NOTIFY_SOCKET) that we stop: %s",
            strerror(-rc));
    /* stop accepting: a client that connects now is refused, not left in the backlog */
    rtr_connmgr_stop(s->connmgr);
    uv_stop(&s->loop);
}

void rtr_server_stop(rtr_server_t *s)
{
    if (s->stopping)
        return;
    LOG(NOTICE,
        "Shut down on request: no new connections or credit; deliveries in flight "
        "may settle for up to %u seconds",
        s->cfg->router.shutdown_grace_seconds);
    server_stop(s);
}

/* The stop signals and SIGUSR1 are blocked in every thread (rtr_server_start) and read
 * here from a signalfd: no handler runs at an arbitrary point of some thread, and a signal
 * that came while the threads started waits in the kernel until the loop reads it.
 * SIGUSR1 reopens the log files, as logrotate's postrotate expects of a daemon (qdrouterd
 * has no such signal; HUP already means shut down, as in qdrouterd); the others shut down. */
static void signal_cb(uv_poll_t *h, int status, int events)
{
    rtr_server_t           *s = h->data;
    struct signalfd_siginfo si;
    (void)status;
    (void)events;
    while (read(s->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        int signum = (int)si.ssi_signo;
        if (signum == SIGUSR1) {
            base_log_reopen();
            LOG(INFO, "Log files reopened (SIGUSR1)");
            continue;
        }
        if (s->stopping)
            continue;
        LOG(NOTICE,
            "Shut down on signal %d (%s): no new connections or credit; deliveries in "
            "flight may settle for up to %u seconds",
            signum, strsignal(signum), s->cfg->router.shutdown_grace_seconds);
        server_stop(s);
    }
}

rtr_server_t *rtr_server_new(const cfg_t *cfg, char *err, size_t errlen)
{
    rtr_server_t *s = base_calloc(1, sizeof(*s));
    s->cfg = cfg;
    s->statm_fd = -1;
    s->sig_fd = -1;
    /* Cyrus SASL before the listeners: an unusable saslConfigDir stops start-up here */
    if (rtr_sasl_init(&cfg->router, err, errlen) != 0) {
        free(s);
        return NULL;
    }
    /* the TLS contexts: a bad certificate, key or password stops start-up */
    s->tls = rtr_tls_new(cfg, err, errlen);
    if (!s->tls) {
        rtr_sasl_fini();
        free(s);
        return NULL;
    }
    s->connmgr = rtr_connmgr_new(cfg, err, errlen);
    if (!s->connmgr) {
        rtr_tls_free(s->tls);
        rtr_sasl_fini();
        free(s);
        return NULL;
    }
    return s;
}

int rtr_server_workers(const rtr_server_t *s)
{
    return s->n_workers;
}

rtr_ctx_t *rtr_server_ctx(rtr_server_t *s)
{
    return &s->ctx;
}

/* The signals that stop the router (and SIGUSR1, which reopens the logs). */
static void stop_signal_set(sigset_t *set)
{
    sigemptyset(set);
    int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        sigaddset(set, sigs[i]);
}

static int server_start(rtr_server_t *s);

/* The stop signals are blocked here in the main thread for good, before any thread starts:
 * the threads started here (log writer, core, workers, agent, admin) inherit the mask, and
 * the main loop reads the signals from a signalfd (signal_cb).  At the end of shutdown
 * (rtr_server_run) the loop no longer reads them: a second SIGTERM (a service manager's, an
 * impatient operator's) stays pending and does not kill a router that is finishing its
 * exit. */
int rtr_server_start(rtr_server_t *s)
{
    sigset_t set;
    stop_signal_set(&set);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    return server_start(s);
}

static int server_start(rtr_server_t *s)
{
    const cfg_t *cfg = s->cfg;
    int          rc = uv_loop_init(&s->loop);
    if (rc)
        return rc;
    s->loop_ready = true;
    /* first: a signal that arrives while the threads start (a client may already be
     * served) waits for the loop and shuts down as any other, instead of killing the process
     * (logrotate's SIGUSR1 too) */
    sigset_t set;
    stop_signal_set(&set);
    s->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
    if (s->sig_fd < 0)
        return -errno;
    rc = uv_poll_init(&s->loop, &s->sig_poll, s->sig_fd);
    if (rc)
        return rc;
    s->sig_poll.data = s;
    uv_poll_start(&s->sig_poll, UV_READABLE, signal_cb);
    rtr_fd_reserve_init(); /* before any thread accepts */
    /* from here on no thread that logs writes the log itself (after main()'s fork, which
     * would leave the writer thread behind) */
    rc = base_log_start_writer();
    if (rc)
        return rc;

    int n = cfg->router.worker_threads;
    if (n <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        n = cpus > 0 ? (int)cpus : 1;
    }
    if (n > RTR_MAX_WORKERS)
        n = RTR_MAX_WORKERS;
    s->n_workers = n;
    s->workers = base_calloc((size_t)n, sizeof(*s->workers));
    /* one queue per worker, and the management agent's last (index n: the core sends it
     * work as to any worker) */
    s->worker_q = base_calloc((size_t)n + 1, sizeof(*s->worker_q));
    for (int i = 0; i < n; i++)
        s->worker_q[i] = &s->workers[i].inbox;
    s->reg = stats_registry_new();
    static_assert(CFG_MAX_STATS_DEFAULT == STATS_MAX_SLOTS - STATS_SINK_SLOTS,
                  "maxStats's default is the registry's whole id space");
    BASE_BUG_ON(stats_registry_set_limit(s->reg, cfg->router.max_stats) != 0); /* checked */
    rc = core_stats_families_new(s->reg, &s->stats);
    if (rc)
        return rc;
    rtr_ctx_init(&s->ctx, cfg, &s->stats, s->workers, n);
    s->ctx.tls = s->tls;
    s->web = s_web;
    s->web.rtr = &s->ctx;
    rtr_tls_mgmt(s->tls, &s->tls_mgmt);
    s->web.tls = &s->tls_mgmt; /* the management socket's sslProfile.* */
    s->shard = stats_shard_new(s->reg);
    stats_obj_set(s->shard, s->stats.router_obj, CORE_ROUTER_WORKERS, n);
    s->core = core_new(cfg, &s->stats, n + 1, s->worker_q);
    for (int i = 0; i < n; i++) {
        rc = rtr_worker_init(&s->workers[i], &s->ctx, i, s->core);
        if (rc)
            return rc;
        s->worker_q[i] = &s->workers[i].inbox; /* init cleared the worker */
    }
    /* listeners may be added from here on (the agent's CREATE): the main loop starts them */
    rtr_connmgr_env_t env = {.loop = &s->loop,
                             .reg = s->reg,
                             .core = s->core,
                             .admin = &s->admin,
                             .web = &s->web,
                             .accept = accept_amqp,
                             .accept_ctx = s,
                             .workers = s->workers,
                             .n_workers = n,
                             .lstats = s->ctx.lstats};
    rc = rtr_connmgr_start(s->connmgr, &env);
    if (rc)
        return rc;
    rc = mgmt_agent_new(cfg, s->core, &s->ctx, n, s->reg, s->connmgr, &s->agent);
    if (rc)
        return rc;
    s->worker_q[n] = mgmt_agent_queue(s->agent);
    rc = core_start(s->core);
    if (rc)
        return rc;
    for (int i = 0; i < n; i++) {
        rc = rtr_worker_start(&s->workers[i]);
        if (rc)
            return rc;
    }
    rc = mgmt_agent_start(s->agent);
    if (rc)
        return rc;
    s->started = true;

    /* accepting: the AMQP listeners on this loop, the http ones on the admin thread, which
     * starts now with the management socket (it hands WebSocket AMQP connections to the
     * workers and probes the core, so it starts after them) */
    rc = rtr_connmgr_listen(s->connmgr);
    if (rc)
        return rc;

    s->started_ms = uv_now(&s->loop);
    s->statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    uv_timer_init(&s->loop, &s->proc_timer);
    s->proc_timer.data = s;
    uv_timer_start(&s->proc_timer, proc_timer_cb, 0, 1000);
    LOG(NOTICE, "Operational, %d Threads Running (process ID %ld)", n, (long)getpid());
    return 0;
}

int rtr_server_run(rtr_server_t *s)
{
    uv_run(&s->loop, UV_RUN_DEFAULT);
    mgmt_admin_stop(&s->admin);

    /* Every worker stops granting credit, waits up to the grace period for what is in
     * flight to settle, releases the rest, closes its connections and stops once the core
     * answered for them. */
    uint32_t grace = s->cfg->router.shutdown_grace_seconds;
    for (int i = 0; i < s->n_workers; i++)
        rtr_worker_post_ext(&s->workers[i], RTR_EXT_SHUTDOWN, NULL, (long)grace * 1000);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 15 + grace;
    for (int i = 0; i < s->n_workers; i++) {
        if (pthread_timedjoin_np(s->workers[i].thread, NULL, &deadline) != 0) {
            base_log(BASE_LOG_MOD_SERVER, BASE_LOG_CRITICAL,
                     "Worker %d did not stop within %u seconds; exiting anyway", i, 15 + grace);
            base_log_stop_writer(1.0);
            _exit(1);
        }
    }
    core_stop(s->core);
    mgmt_agent_stop(s->agent); /* after the core: it may send the agent work until it stops */
    s->started = false;
    rtr_connmgr_stop(s->connmgr); /* (done at the signal already) */
    /* the signal watcher closes with the rest: signals that come from here on stay pending
     * (blocked in every thread), so a second SIGTERM cannot kill a router finishing its
     * exit */
    rtr_loop_close_all(&s->loop);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    LOG(NOTICE, "Stopped");
    /* what is queued is written before the process exits (an output that never drains is
     * given up on after a while) */
    base_log_stop_writer(5.0);
    return 0;
}

void rtr_server_free(rtr_server_t *s)
{
    if (!s)
        return;
    if (s->workers) {
        for (int i = 0; i < s->n_workers; i++)
            rtr_worker_fini(&s->workers[i]);
    }
    mgmt_agent_free(s->agent); /* after the core and the workers: listeners' configurations */
    if (s->core)
        core_free(s->core);
    rtr_connmgr_free(s->connmgr); /* after the agent: the last to add a listener */
    if (s->statm_fd >= 0)
        close(s->statm_fd);
    rtr_fd_reserve_fini();
    if (s->shard)
        stats_shard_free(s->reg, s->shard);
    mgmt_admin_stop(&s->admin); /* reads the registry: stopped before it goes */
    rtr_tls_free(s->tls); /* after the workers (their sessions use the contexts), the agent and
                             the admin thread (management changes the profiles) */
    rtr_ctx_fini(&s->ctx);
    stats_registry_free(s->reg);
    if (s->loop_ready) {
        rtr_loop_close_all(&s->loop); /* the signal watcher when start failed */
        uv_run(&s->loop, UV_RUN_DEFAULT);
        uv_loop_close(&s->loop);
    }
    if (s->sig_fd >= 0)
        close(s->sig_fd); /* after its watcher closed */
    rtr_sasl_fini(); /* the workers are gone: no connection uses Cyrus any more */
    free(s->workers);
    free(s->worker_q);
    free(s);
}
