/* router/server.c: the process's threads and listeners - binds the configured listeners,
 * starts the core and the workers, accepts connections on the main thread and hands each
 * socket to a worker (round-robin), and stops everything in order on a signal.
 *
 * Threads: every function here runs on the main thread (its own libuv loop: listeners and
 * signals).  Shutdown order: stop accepting -> each worker closes its connections and waits
 * until the core has answered for every link and delivery -> join workers -> stop the core.
 */
#include "router/router_int.h"

#include "core/base/pool.h"

#include "router/accept.h"
#include "router/mgmt/admin.h"
#include "router/mgmt/agent.h"
#include "router/http.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define LOG(lvl, ...) base_log(BASE_LOG_MOD_SERVER, BASE_LOG_##lvl, __VA_ARGS__)

rtr_globals_t g_rtr;

const char *const rtr_policy_stat_names[RTR_POLICY_N] = {
    [RTR_POLICY_PROCESSED] = "policyConnectionsProcessed",
    [RTR_POLICY_CONN_DENIED] = "policyConnectionsDenied",
    [RTR_POLICY_LINK_DENIED] = "policyLinksDenied",
    [RTR_POLICY_SIZE_DENIED] = "policyMaxMessageSizeDenied",
};

typedef struct rtr_listener rtr_listener_t;
struct rtr_listener {
    int                   fd;    /* listening socket */
    rtr_acceptor_t        acc;   /* accepts on fd (data = this listener) */
    const cfg_listener_t *cfg;   /* its configuration */
    rtr_server_t         *srv;   /* back pointer */
    bool                  polling; /* acc started (its handles initialised) */
    long                  id;    /* 1.. for the configured ones (file order), then run-time */
    bool                  runtime; /* made by management CREATE (heap, on srv->extra) */
    bool                  deleted; /* management DELETE: no longer accepting */
    bool                  http;    /* an http listener: its socket is the admin thread's */
    rtr_listener_t       *next;  /* on srv->extra / srv->ctl_q */
};

/* A request from another thread to the main thread (management CREATE/DELETE listener). */
typedef struct rtr_ctl {
    struct rtr_ctl *next;     /* on srv->ctl_q */
    rtr_listener_t *add;      /* bound listener to start accepting on, or NULL */
    long            del;      /* id of a listener to stop, or 0 */
} rtr_ctl_t;

struct rtr_server {
    const cfg_t    *cfg;          /* configuration, outlives the server */
    uv_loop_t       loop;         /* main thread's loop */
    uv_signal_t     sigs[4];      /* SIGTERM, SIGINT, SIGHUP, SIGQUIT */
    rtr_listener_t *listeners;    /* one per listener entity */
    size_t          n_listeners;
    int             n_workers;
    rtr_worker_t   *workers;      /* array */
    base_mpsc_t   **worker_q;     /* each worker's inbox, for the core */
    core_t         *core;
    stats_registry_t *reg;        /* the process's stats registry */
    core_stats_t    stats;        /* the built-in families */
    stats_shard_t  *shard;        /* the main thread's shard: process gauges */
    uv_timer_t      proc_timer;   /* refreshes the process gauges every second */
    int             statm_fd;     /* /proc/self/statm for proc_timer, or -1 (start .. free) */
    unsigned        ticks;        /* proc_timer runs so far (for the pool trim period) */
    uint64_t        started_ms;   /* uv_now() at start, for uptimeSeconds */
    const char     *alloc_names[64]; /* pools with an `allocator` stats object */
    stats_obj_t     alloc_objs[64];  /* their objects */
    size_t          n_alloc;         /* entries used */
    int             next_worker;  /* round-robin */
    bool            started;
    bool            stopping;
    rtr_listener_t *extra;        /* main thread: listeners made at run time */
    long            next_listener_id; /* [ctl_lock] ids given so far */
    uv_async_t      ctl;          /* other threads -> main thread: ctl_q has requests */
    bool            ctl_init;     /* ctl initialised (uv_async_send allowed) */
    pthread_mutex_t ctl_lock;     /* guards ctl_q, next_listener_id */
    rtr_ctl_t      *ctl_q;        /* [ctl_lock] requests, newest first */
    mgmt_agent_t   *agent;        /* the management agent (start .. free) */
    mgmt_admin_t   *admin;        /* the admin thread while it runs, or NULL (main thread) */
};

/* The admin thread's HTTP server (http.c). */
static const mgmt_admin_web_t s_web = {
    .start = rtr_http_start,
    .running = rtr_http_running,
    .listener_add = rtr_http_listener_add,
    .listener_del = rtr_http_listener_del,
    .stop = rtr_http_stop,
    .finish = rtr_http_finish,
};

/* The running server, for the thread-safe rtr_server_listener_* calls (set at start). */
static rtr_server_t *s_server;

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

static const char *port_service(const char *port)
{
    if (strcmp(port, "amqp") == 0)
        return "5672";
    if (strcmp(port, "amqps") == 0)
        return "5671";
    return port;
}

static int listener_bind(rtr_listener_t *l, char *err, size_t errlen)
{
    const cfg_listener_t *lc = l->cfg;
    struct addrinfo hints = {0}, *res = NULL, *ai;
    /* socketAddressFamily: only that family's addresses (an empty host is then every IPv6
     * address for IPv6, as qdrouterd's) */
    hints.ai_family = lc->family == CFG_FAMILY_IPV4   ? AF_INET
                      : lc->family == CFG_FAMILY_IPV6 ? AF_INET6
                                                      : AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    const char *host = lc->host && *lc->host ? lc->host : NULL;
    int rc = getaddrinfo(host, port_service(lc->port), &hints, &res);
    if (rc != 0) {
        snprintf(err, errlen, "Cannot listen on %s:%s: %s", host ? host : "", lc->port,
                 gai_strerror(rc));
        return -1;
    }
    /* Prefer IPv4 when the name has both (an empty host means every IPv4 address, as
     * qdrouterd's 0.0.0.0). */
    struct addrinfo *pick = NULL;
    for (ai = res; ai; ai = ai->ai_next)
        if (ai->ai_family == AF_INET && !pick)
            pick = ai;
    if (!pick)
        pick = res;
    int fd = socket(pick->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, pick->ai_addr, pick->ai_addrlen) != 0 || listen(fd, 1024) != 0) {
        int e = errno;
        snprintf(err, errlen, "Cannot listen on %s:%s: %s",
                 host ? host : pick->ai_family == AF_INET6 ? "::" : "0.0.0.0", lc->port,
                 strerror(e));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);
    l->fd = fd;

    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char name[INET6_ADDRSTRLEN + 8] = "?";
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        rtr_sockaddr_format(&ss, name, sizeof(name));
    LOG(NOTICE, "Listening on %s", name);
    return 0;
}

/* A new AMQP connection: to the next worker (round-robin). */
static void accept_cb(rtr_acceptor_t *a, int fd)
{
    rtr_listener_t *l = a->data;
    rtr_server_t *s = l->srv;
    if (s->stopping) {
        close(fd);
        return;
    }
    rtr_worker_t *w = &s->workers[s->next_worker];
    s->next_worker = (s->next_worker + 1) % s->n_workers;
    rtr_worker_post_ext(w, RTR_EXT_ACCEPT, (void *)l->cfg, fd);
}

/* Main thread: start accepting on a bound listener. */
static void listener_start(rtr_server_t *s, rtr_listener_t *l)
{
    l->acc.data = l;
    if (rtr_acceptor_start(&l->acc, &s->loop, l->fd, BASE_LOG_MOD_SERVER, NULL, accept_cb) == 0)
        l->polling = true;
    else
        LOG(ERROR, "Cannot accept on %s:%s", l->cfg->host ? l->cfg->host : "", l->cfg->port);
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
    uint64_t up = (uv_now(&s->loop) - s->started_ms) / 1000;
    stats_obj_set(s->shard, r, CORE_ROUTER_UPTIME, (int64_t)up);
    /* read through the descriptor opened at start: with every descriptor in use, opening
     * the file now would fail, just when the figures matter */
    char statm[128];
    ssize_t got = s->statm_fd >= 0 ? pread(s->statm_fd, statm, sizeof(statm) - 1, 0) : -1;
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
    size_t n = base_pool_info(info, 64);
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
    /* stop accepting: a client that connects now is refused, not left in the backlog */
    for (size_t i = 0; i < s->n_listeners; i++) {
        if (s->listeners[i].polling)
            rtr_acceptor_stop(&s->listeners[i].acc);
        if (s->listeners[i].fd >= 0) {
            close(s->listeners[i].fd);
            s->listeners[i].fd = -1;
        }
    }
    /* run-time listeners (management CREATE): their sockets close with their handles */
    for (rtr_listener_t *l = s->extra; l; l = l->next)
        if (l->polling)
            rtr_acceptor_stop(&l->acc);
    uv_stop(&s->loop);
}

void rtr_server_stop(rtr_server_t *s)
{
    if (s->stopping)
        return;
    LOG(NOTICE, "Shut down on request: no new connections or credit; deliveries in flight "
                "may settle for up to %u seconds", s->cfg->router.shutdown_grace_seconds);
    server_stop(s);
}

static void signal_cb(uv_signal_t *h, int signum)
{
    rtr_server_t *s = h->data;
    if (s->stopping)
        return;
    LOG(NOTICE, "Shut down on signal %d (%s): no new connections or credit; deliveries in "
                "flight may settle for up to %u seconds", signum, strsignal(signum),
        s->cfg->router.shutdown_grace_seconds);
    server_stop(s);
}

/* ---- run-time listeners (management) ---- */

static void listener_closed_cb(rtr_acceptor_t *a)
{
    rtr_listener_t *l = a->data;
    l->polling = false;
    if (l->fd >= 0) {
        close(l->fd);
        l->fd = -1;
    }
}

/* Main thread: stop accepting on l and close its socket. */
static void listener_stop(rtr_server_t *s, rtr_listener_t *l)
{
    if (l->deleted)
        return;
    l->deleted = true;
    if (l->http) {
        mgmt_admin_http_del(s->admin, l->id); /* the admin thread closes it and logs */
        return;
    }
    if (l->polling) {
        rtr_acceptor_close(&l->acc, listener_closed_cb);
    } else if (l->fd >= 0) {
        close(l->fd);
        l->fd = -1;
    }
    LOG(NOTICE, "Stopped listening on %s:%s", l->cfg->host && *l->cfg->host ? l->cfg->host
                                                                             : "0.0.0.0",
        l->cfg->port);
}

static void ctl_cb(uv_async_t *h)
{
    rtr_server_t *s = h->data;
    pthread_mutex_lock(&s->ctl_lock);
    rtr_ctl_t *q = s->ctl_q;
    s->ctl_q = NULL;
    pthread_mutex_unlock(&s->ctl_lock);
    /* oldest first */
    rtr_ctl_t *rev = NULL;
    while (q) {
        rtr_ctl_t *next = q->next;
        q->next = rev;
        rev = q;
        q = next;
    }
    while (rev) {
        rtr_ctl_t *c = rev;
        rev = c->next;
        if (c->add) {
            rtr_listener_t *l = c->add;
            l->next = s->extra;
            s->extra = l;
            if (s->stopping) {
                listener_stop(s, l);
            } else if (l->cfg->http) {
                /* HTTP is served on the admin thread (started now if it is not running) */
                mgmt_admin_http_t hl = {.fd = l->fd, .cfg = l->cfg, .id = l->id};
                l->fd = -1;
                l->http = true;
                if (mgmt_admin_http_add(&s->admin, s->cfg, s->reg, s->core, &s_web, &hl) < 0)
                    LOG(ERROR, "HTTP listener %s:%s not started (see above)",
                        l->cfg->host ? l->cfg->host : "", l->cfg->port);
            } else {
                listener_start(s, l);
            }
        }
        if (c->del) {
            for (size_t i = 0; i < s->n_listeners; i++)
                if (s->listeners[i].id == c->del)
                    listener_stop(s, &s->listeners[i]);
            for (rtr_listener_t *l = s->extra; l; l = l->next)
                if (l->id == c->del)
                    listener_stop(s, l);
        }
        free(c);
    }
}

static void ctl_post(rtr_server_t *s, rtr_ctl_t *c)
{
    pthread_mutex_lock(&s->ctl_lock);
    c->next = s->ctl_q;
    s->ctl_q = c;
    pthread_mutex_unlock(&s->ctl_lock);
    uv_async_send(&s->ctl);
}

long rtr_server_listener_id(size_t index)
{
    return (long)index + 1;
}

long rtr_server_listener_add(const cfg_listener_t *lc, char *err, size_t errlen)
{
    rtr_server_t *s = s_server;
    if (!s || !s->ctl_init) {
        snprintf(err, errlen, "The router is not running");
        return -1;
    }
    if (lc->http_root_dir && rtr_http_root_check(lc->http_root_dir, NULL, err, errlen) < 0)
        return -1; /* refused before anything is bound */
    rtr_listener_t *l = base_calloc(1, sizeof(*l));
    l->fd = -1;
    l->cfg = lc;
    l->srv = s;
    l->runtime = true;
    if (listener_bind(l, err, errlen) != 0) {
        free(l);
        return -1;
    }
    pthread_mutex_lock(&s->ctl_lock);
    l->id = ++s->next_listener_id;
    pthread_mutex_unlock(&s->ctl_lock);
    long id = l->id;
    rtr_ctl_t *c = base_calloc(1, sizeof(*c));
    c->add = l;
    ctl_post(s, c);
    return id;
}

void rtr_server_listener_del(long id)
{
    rtr_server_t *s = s_server;
    if (!s || !s->ctl_init || id <= 0)
        return;
    rtr_ctl_t *c = base_calloc(1, sizeof(*c));
    c->del = id;
    ctl_post(s, c);
}

rtr_server_t *rtr_server_new(const cfg_t *cfg, char *err, size_t errlen)
{
    rtr_server_t *s = base_calloc(1, sizeof(*s));
    s->cfg = cfg;
    s->statm_fd = -1;
    s->n_listeners = cfg->n_listeners;
    s->listeners = base_calloc(s->n_listeners ? s->n_listeners : 1, sizeof(*s->listeners));
    for (size_t i = 0; i < s->n_listeners; i++) {
        s->listeners[i].fd = -1;
        s->listeners[i].cfg = &cfg->listeners[i];
        s->listeners[i].srv = s;
        s->listeners[i].id = rtr_server_listener_id(i);
    }
    s->next_listener_id = (long)s->n_listeners;
    pthread_mutex_init(&s->ctl_lock, NULL);
    for (size_t i = 0; i < s->n_listeners; i++) {
        if (listener_bind(&s->listeners[i], err, errlen) != 0) {
            rtr_server_free(s);
            return NULL;
        }
    }
    return s;
}

int rtr_server_workers(const rtr_server_t *s)
{
    return s->n_workers;
}

int rtr_server_start(rtr_server_t *s)
{
    const cfg_t *cfg = s->cfg;
    int rc = uv_loop_init(&s->loop);
    if (rc)
        return rc;
    rtr_fd_reserve_init(); /* before any thread accepts */

    g_rtr.cfg = cfg;
    g_rtr.router_id = cfg->router.id;
    size_t idlen = strlen(cfg->router.id);
    g_rtr.node_id = base_malloc(idlen + 3);
    snprintf(g_rtr.node_id, idlen + 3, "0/%s", cfg->router.id);
    g_rtr.node_id_len = idlen + 2;

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
    g_rtr.workers = s->workers;
    g_rtr.n_workers = n;
    s->reg = stats_registry_new();
    static_assert(CFG_MAX_STATS_DEFAULT == STATS_MAX_SLOTS - STATS_SINK_SLOTS,
                  "maxStats's default is the registry's whole id space");
    BASE_BUG_ON(stats_registry_set_limit(s->reg, cfg->router.max_stats) != 0); /* checked */
    rc = core_stats_families_new(s->reg, &s->stats);
    if (rc)
        return rc;
    g_rtr.stats = &s->stats;
    static const char *const policy_help[RTR_POLICY_N] = {
        "Connections checked against policy maxConnections",
        "Connections refused by policy maxConnections",
        "Links refused by maxSenders or maxReceivers",
        "Messages refused by maxMessageSize",
    };
    for (int i = 0; i < RTR_POLICY_N; i++)
        if (stats_stat_new(s->reg, rtr_policy_stat_names[i], STATS_COUNTER, policy_help[i], NULL,
                           &g_rtr.policy_stats[i], NULL) < 0)
            memset(&g_rtr.policy_stats[i], 0, sizeof(g_rtr.policy_stats[i])); /* sink slot */
    s->shard = stats_shard_new(s->reg);
    stats_obj_set(s->shard, s->stats.router_obj, CORE_ROUTER_WORKERS, n);
    uv_async_init(&s->loop, &s->ctl, ctl_cb);
    s->ctl.data = s;
    s->ctl_init = true;
    s_server = s;
    s->core = core_new(cfg, &s->stats, n + 1, s->worker_q);
    for (int i = 0; i < n; i++) {
        rc = rtr_worker_init(&s->workers[i], i, s->core);
        if (rc)
            return rc;
        s->worker_q[i] = &s->workers[i].inbox; /* init cleared the worker */
    }
    rc = mgmt_agent_new(cfg, s->core, n, s->reg, &s->agent);
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

    /* the admin thread: the management socket and the http listeners (which hand WebSocket
     * AMQP connections to the workers and probe the core, so it starts after them) */
    mgmt_admin_http_t *http = base_calloc(s->n_listeners ? s->n_listeners : 1, sizeof(*http));
    size_t            n_http = 0;
    for (size_t i = 0; i < s->n_listeners; i++) {
        rtr_listener_t *l = &s->listeners[i];
        if (!l->cfg->http)
            continue;
        http[n_http].fd = l->fd;
        http[n_http].id = l->id;
        http[n_http++].cfg = l->cfg;
        l->fd = -1; /* the admin thread's now */
        l->http = true;
    }
    rc = mgmt_admin_start(&s->admin, cfg, s->reg, s->core, &s_web, http, n_http);
    free(http);
    if (rc)
        return rc;

    int signals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};
    for (int i = 0; i < 4; i++) {
        uv_signal_init(&s->loop, &s->sigs[i]);
        s->sigs[i].data = s;
        uv_signal_start(&s->sigs[i], signal_cb, signals[i]);
    }
    s->started_ms = uv_now(&s->loop);
    s->statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    uv_timer_init(&s->loop, &s->proc_timer);
    s->proc_timer.data = s;
    uv_timer_start(&s->proc_timer, proc_timer_cb, 0, 1000);
    for (size_t i = 0; i < s->n_listeners; i++) {
        rtr_listener_t *l = &s->listeners[i];
        if (l->fd < 0)
            continue; /* http: served by the admin thread */
        listener_start(s, l);
    }
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
            _exit(1);
        }
    }
    core_stop(s->core);
    mgmt_agent_stop(s->agent); /* after the core: it may send the agent work until it stops */
    s->started = false;
    s_server = NULL;
    for (size_t i = 0; i < s->n_listeners; i++) {
        if (s->listeners[i].fd >= 0) {
            close(s->listeners[i].fd);
            s->listeners[i].fd = -1;
        }
    }
    for (rtr_listener_t *l = s->extra; l; l = l->next) {
        if (l->fd >= 0 && !l->polling) {
            close(l->fd);
            l->fd = -1;
        }
    }
    rtr_loop_close_all(&s->loop);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    for (rtr_listener_t *l = s->extra; l; l = l->next) {
        if (l->fd >= 0) {
            close(l->fd);
            l->fd = -1;
        }
    }
    LOG(NOTICE, "Stopped");
    return 0;
}

void rtr_server_free(rtr_server_t *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n_listeners; i++)
        if (s->listeners[i].fd >= 0)
            close(s->listeners[i].fd);
    if (s->workers) {
        for (int i = 0; i < s->n_workers; i++)
            rtr_worker_fini(&s->workers[i]);
    }
    mgmt_agent_free(s->agent); /* after the core and the workers: listeners' configurations */
    if (s->core)
        core_free(s->core);
    while (s->extra) {
        rtr_listener_t *l = s->extra;
        s->extra = l->next;
        if (l->fd >= 0)
            close(l->fd);
        free(l);
    }
    pthread_mutex_lock(&s->ctl_lock);
    while (s->ctl_q) {
        rtr_ctl_t *c = s->ctl_q;
        s->ctl_q = c->next;
        if (c->add) {
            close(c->add->fd);
            free(c->add);
        }
        free(c);
    }
    pthread_mutex_unlock(&s->ctl_lock);
    pthread_mutex_destroy(&s->ctl_lock);
    if (s_server == s)
        s_server = NULL;
    if (s->statm_fd >= 0)
        close(s->statm_fd);
    rtr_fd_reserve_fini();
    if (s->shard)
        stats_shard_free(s->reg, s->shard);
    mgmt_admin_stop(&s->admin); /* reads the registry: stopped before it goes */
    g_rtr.stats = NULL;
    stats_registry_free(s->reg);
    if (s->workers)
        uv_loop_close(&s->loop);
    free(s->workers);
    free(s->worker_q);
    free(s->listeners);
    BASE_FREE(g_rtr.node_id);
    free(s);
}
