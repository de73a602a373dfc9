/* router/connmgr.c: the connection manager (connmgr.h) - a table of entries, one per
 * listener, each with its socket and, on the main loop, its acceptor.
 *
 * Threads: rtr_connmgr_new/_start/_listen/_stop/_free and every static function below that
 * touches a socket or an acceptor run on the main thread; rtr_connmgr_listener_add/_del and
 * rtr_connmgr_find run on any thread.  No _CT/_WT functions here.
 *
 * DESIGN: other threads never start or end anything.  They enter a bound entry (add) or mark
 * one deleted (del) under `lock` and wake the main thread, which walks the table and brings
 * each entry where it should be: a bound one to its acceptor or the admin thread, a deleted
 * one to closed and freed (after its acceptor's handles closed, when it had one).  Entries
 * are freed on the main thread only, so the main thread may keep a pointer to one across an
 * unlock; the lock is never held while a socket, an acceptor or the admin thread is called.
 * The connectors are router/connector.c's records, made by _start, started by _listen and
 * stopped by _stop (their timers, lookups and connects on the main loop too).
 */
#include "router/connmgr.h"

#include "router/accept.h"
#include "router/connector.h"
#include "router/http.h"
#include "router/lstats.h"
#include "router/mgmt/admin.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define LOG(lvl, ...) base_log(BASE_LOG_MOD_SERVER, BASE_LOG_##lvl, __VA_ARGS__)

typedef struct rtr_connmgr_entry rtr_connmgr_entry_t;

/* rtr_connmgr_entry_t: one listener.  Made by rtr_connmgr_new() (configured) or
 * rtr_connmgr_listener_add() (on the caller's thread, bound before it is entered); freed by
 * the main thread once deleted and closed, or by rtr_connmgr_free(). */
struct rtr_connmgr_entry {
    rtr_acceptor_t        acc;      /* main thread: accepts on fd (data = this entry) */
    rtr_connmgr_t        *mgr;      /* immutable: back pointer */
    rtr_connmgr_kind_t    kind;     /* immutable: RTR_CONNMGR_LISTENER */
    long                  id;       /* immutable once entered: unique, > 0 */
    const cfg_listener_t *cfg;      /* immutable: borrowed, outlives the manager */
    int                   fd;       /* main thread once entered: listening socket or -1 */
    rtr_connmgr_state_t   state;    /* [lock] where the socket is */
    bool                  deleted;  /* [lock] DELETE asked: not found any more, to be freed */
    bool                  acc_open; /* main thread: acc's handles initialised, not closed */
    bool                  closing;  /* main thread: deleted, acc closing; freed when closed */
    rtr_connmgr_entry_t  *next;     /* [lock] the table, ids ascending */
};

struct rtr_connmgr {
    const cfg_t         *cfg;       /* immutable: borrowed configuration */
    rtr_connmgr_env_t    env;       /* main thread: set by rtr_connmgr_start() */
    uv_async_t           wake;      /* other threads -> main thread: entries to walk */
    bool                 started;   /* [lock] wake is initialised: it may be sent */
    bool                 listening; /* main thread: rtr_connmgr_listen() ran */
    bool                 stopping;  /* main thread: rtr_connmgr_stop() ran */
    pthread_mutex_t      lock;      /* guards the [lock] fields; taken alone */
    rtr_connmgr_entry_t *head;      /* [lock] the table (first entry) */
    rtr_connmgr_entry_t *tail;      /* [lock] its last entry, where new ones go */
    long                 next_id;   /* [lock] ids given so far */
    rtr_connectors_t    *connectors; /* the configured connectors (start .. free); their
                                        calls are thread-safe where connector.h says so */
};

/* Bind and listen on lc's address.  Returns the socket, or -1 with a one-line reason in err.
 * Any thread (it touches nothing shared). */
static int listener_bind(const cfg_listener_t *lc, char *err, size_t errlen)
{
    struct addrinfo hints = {0}, *res = NULL, *ai;
    /* socketAddressFamily: only that family's addresses (an empty host is then every IPv6
     * address for IPv6, as qdrouterd's) */
    hints.ai_family = lc->family == CFG_FAMILY_IPV4   ? AF_INET
                      : lc->family == CFG_FAMILY_IPV6 ? AF_INET6
                                                      : AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    const char *host = lc->host && *lc->host ? lc->host : NULL;
    char        port[8];
    snprintf(port, sizeof(port), "%d", cfg_port_number(lc->port)); /* the load checked it */
    hints.ai_flags |= AI_NUMERICSERV;
    int rc = getaddrinfo(host, port, &hints, &res);
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
                 host                          ? host
                 : pick->ai_family == AF_INET6 ? "::"
                                               : "0.0.0.0",
                 lc->port, strerror(e));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(res);
        return -1;
    }
    freeaddrinfo(res);

    struct sockaddr_storage ss;
    socklen_t               sl = sizeof(ss);
    char                    name[INET6_ADDRSTRLEN + 8] = "?";
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        rtr_sockaddr_format(&ss, name, sizeof(name));
    LOG(NOTICE, "Listening on %s", name);
    return fd;
}

/* A bound listener's entry, not entered in the table yet (no id).  NULL with err set when
 * lc cannot be bound.  Any thread. */
static rtr_connmgr_entry_t *entry_new(rtr_connmgr_t *m, const cfg_listener_t *lc, char *err,
                                      size_t errlen)
{
    /* an http listener's files are checked before anything is bound or started (a bad
     * httpRootDir is a one-line error at start-up and in CREATE's reply) */
    if (lc->http_root_dir && rtr_http_root_check(lc->http_root_dir, NULL, err, errlen) < 0)
        return NULL;
    int fd = listener_bind(lc, err, errlen);
    if (fd < 0)
        return NULL;
    rtr_connmgr_entry_t *e = base_calloc(1, sizeof(*e));
    e->mgr = m;
    e->kind = RTR_CONNMGR_LISTENER;
    e->cfg = lc;
    e->fd = fd;
    e->state = RTR_CONNMGR_BOUND;
    return e;
}

/* Enter e at the table's end with the next id; returns the id.  Any thread. */
static long entry_enter(rtr_connmgr_t *m, rtr_connmgr_entry_t *e)
{
    pthread_mutex_lock(&m->lock);
    e->id = ++m->next_id;
    if (m->tail)
        m->tail->next = e;
    else
        m->head = e;
    m->tail = e;
    long id = e->id;
    pthread_mutex_unlock(&m->lock);
    return id;
}

static void entry_set_state(rtr_connmgr_t *m, rtr_connmgr_entry_t *e, rtr_connmgr_state_t st)
{
    pthread_mutex_lock(&m->lock);
    e->state = st;
    pthread_mutex_unlock(&m->lock);
}

/* Main thread: take e out of the table and free it (its socket is closed or not ours). */
static void entry_free(rtr_connmgr_t *m, rtr_connmgr_entry_t *e)
{
    pthread_mutex_lock(&m->lock);
    rtr_connmgr_entry_t **pp = &m->head, *prev = NULL;
    while (*pp != e) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    *pp = e->next;
    if (m->tail == e)
        m->tail = prev;
    pthread_mutex_unlock(&m->lock);
    free(e);
}

/* Main thread: the first entry, or the one after e (the table may grow meanwhile). */
static rtr_connmgr_entry_t *entry_next(rtr_connmgr_t *m, rtr_connmgr_entry_t *e)
{
    pthread_mutex_lock(&m->lock);
    rtr_connmgr_entry_t *n = e ? e->next : m->head;
    pthread_mutex_unlock(&m->lock);
    return n;
}

static const char *entry_host(const rtr_connmgr_entry_t *e)
{
    return e->cfg->host && *e->cfg->host ? e->cfg->host : "0.0.0.0";
}

static void close_fd(rtr_connmgr_entry_t *e)
{
    if (e->fd >= 0) {
        close(e->fd);
        e->fd = -1;
    }
}

/* ---- main thread ---- */

/* A new AMQP connection on e: to the owner (the server gives it to a worker). */
static void accept_cb(rtr_acceptor_t *a, int fd)
{
    rtr_connmgr_entry_t *e = a->data;
    rtr_connmgr_t       *m = e->mgr;
    m->env.accept(m->env.accept_ctx, e->cfg, fd);
}

/* Start accepting on bound entry e: an http listener's socket goes to the admin thread, the
 * others to an acceptor on the main loop. */
static void entry_start(rtr_connmgr_t *m, rtr_connmgr_entry_t *e)
{
    if (e->cfg->http) {
        /* HTTP is served on the admin thread (started now if it is not running) */
        mgmt_admin_http_t hl = {.fd = e->fd, .cfg = e->cfg, .id = e->id};
        e->fd = -1;
        if (mgmt_admin_http_add(m->env.admin, m->cfg, m->env.reg, m->env.core, m->env.web, &hl) <
            0) {
            LOG(ERROR, "HTTP listener %s:%s not started (see above)",
                e->cfg->host ? e->cfg->host : "", e->cfg->port);
            entry_set_state(m, e, RTR_CONNMGR_STOPPED); /* it closed the socket */
            return;
        }
        entry_set_state(m, e, RTR_CONNMGR_HTTP);
        return;
    }
    e->acc.data = e;
    if (rtr_acceptor_start(&e->acc, m->env.loop, e->fd, BASE_LOG_MOD_SERVER, NULL, accept_cb) !=
        0) {
        LOG(ERROR, "Cannot accept on %s:%s", e->cfg->host ? e->cfg->host : "", e->cfg->port);
        close_fd(e); /* refused, rather than left waiting in a backlog */
        entry_set_state(m, e, RTR_CONNMGR_STOPPED);
        return;
    }
    e->acc_open = true;
    entry_set_state(m, e, RTR_CONNMGR_ACCEPTING);
}

/* Shutdown: stop accepting on e and close its socket (an http one is the admin thread's). */
static void entry_stop(rtr_connmgr_t *m, rtr_connmgr_entry_t *e)
{
    if (e->closing)
        return; /* its socket closes with its acceptor */
    pthread_mutex_lock(&m->lock);
    rtr_connmgr_state_t st = e->state;
    pthread_mutex_unlock(&m->lock);
    if (st == RTR_CONNMGR_HTTP || st == RTR_CONNMGR_STOPPED)
        return;
    if (e->acc_open)
        rtr_acceptor_stop(&e->acc);
    close_fd(e);
    entry_set_state(m, e, RTR_CONNMGR_STOPPED);
}

static void acceptor_closed_cb(rtr_acceptor_t *a)
{
    rtr_connmgr_entry_t *e = a->data;
    close_fd(e);
    entry_free(e->mgr, e);
}

/* Deleted entry e: stop accepting, close its socket and free it (once its acceptor's
 * handles closed, when it has them).  Its connections stay. */
static void entry_end(rtr_connmgr_t *m, rtr_connmgr_entry_t *e)
{
    pthread_mutex_lock(&m->lock);
    rtr_connmgr_state_t st = e->state;
    pthread_mutex_unlock(&m->lock);
    if (st == RTR_CONNMGR_HTTP)
        mgmt_admin_http_del(*m->env.admin, e->id); /* the admin thread closes it and logs */
    else if (st != RTR_CONNMGR_STOPPED)
        LOG(NOTICE, "Stopped listening on %s:%s", entry_host(e), e->cfg->port);
    if (e->acc_open) {
        e->closing = true;
        e->acc_open = false;
        rtr_acceptor_close(&e->acc, acceptor_closed_cb);
        return;
    }
    close_fd(e);
    entry_free(m, e);
}

/* Bring every entry where it should be: a deleted one ends, a bound one starts accepting
 * (or closes, once stopping).  The lock is held only to pick the next entry to act on. */
static void entries_walk(rtr_connmgr_t *m)
{
    for (;;) {
        rtr_connmgr_entry_t *e;
        bool                 end = false;
        pthread_mutex_lock(&m->lock);
        for (e = m->head; e; e = e->next) {
            if (e->deleted && !e->closing) {
                end = true;
                break;
            }
            if (e->state == RTR_CONNMGR_BOUND && (m->listening || m->stopping))
                break;
        }
        pthread_mutex_unlock(&m->lock);
        if (!e)
            return;
        /* each branch moves e out of what the search above picks, so the walk ends */
        if (end)
            entry_end(m, e);
        else if (m->stopping)
            entry_stop(m, e);
        else
            entry_start(m, e);
    }
}

static void wake_cb(uv_async_t *h)
{
    entries_walk(h->data);
}

rtr_connmgr_t *rtr_connmgr_new(const cfg_t *cfg, char *err, size_t errlen)
{
    rtr_connmgr_t *m = base_calloc(1, sizeof(*m));
    m->cfg = cfg;
    pthread_mutex_init(&m->lock, NULL);
    for (size_t i = 0; i < cfg->n_listeners; i++) {
        rtr_connmgr_entry_t *e = entry_new(m, &cfg->listeners[i], err, errlen);
        if (!e) {
            rtr_connmgr_free(m);
            return NULL;
        }
        long id = entry_enter(m, e);
        BASE_BUG_ON(id != rtr_connmgr_listener_id(i));
    }
    return m;
}

int rtr_connmgr_start(rtr_connmgr_t *m, const rtr_connmgr_env_t *env)
{
    m->env = *env;
    int rc = uv_async_init(env->loop, &m->wake, wake_cb);
    if (rc)
        return rc;
    m->wake.data = m;
    m->connectors = rtr_connectors_new(m->cfg, env->loop, env->workers, env->n_workers);
    /* the configured listeners' stats, before any thread may add or delete one */
    for (rtr_connmgr_entry_t *e = m->head; e; e = e->next)
        rtr_lstats_listener_add(env->lstats, e->cfg, e->id);
    pthread_mutex_lock(&m->lock);
    m->started = true;
    pthread_mutex_unlock(&m->lock);
    return 0;
}

int rtr_connmgr_listen(rtr_connmgr_t *m)
{
    m->listening = true;
    /* the http listeners bound so far go to the admin thread as it starts, so that one it
     * cannot serve fails start-up; those added later go to it one by one */
    size_t n = 0, n_http = 0;
    pthread_mutex_lock(&m->lock);
    for (rtr_connmgr_entry_t *e = m->head; e; e = e->next)
        n++;
    mgmt_admin_http_t *http = base_calloc(n ? n : 1, sizeof(*http));
    for (rtr_connmgr_entry_t *e = m->head; e; e = e->next) {
        if (!e->cfg->http || e->state != RTR_CONNMGR_BOUND || e->deleted)
            continue;
        http[n_http].fd = e->fd;
        http[n_http].id = e->id;
        http[n_http++].cfg = e->cfg;
        e->fd = -1; /* the admin thread's now */
        e->state = RTR_CONNMGR_HTTP;
    }
    pthread_mutex_unlock(&m->lock);
    int rc =
        mgmt_admin_start(m->env.admin, m->cfg, m->env.reg, m->env.core, m->env.web, http, n_http);
    free(http);
    if (rc)
        return rc; /* it closed the sockets; start-up ends */
    entries_walk(m);
    /* the outgoing connections, now that the workers and the core take them */
    if (m->env.n_workers > 0)
        return rtr_connectors_start(m->connectors);
    return 0;
}

void rtr_connmgr_stop(rtr_connmgr_t *m)
{
    if (m->stopping)
        return;
    m->stopping = true;
    rtr_connectors_stop(m->connectors); /* no new attempt; the workers close the connections */
    for (rtr_connmgr_entry_t *e = entry_next(m, NULL); e; e = entry_next(m, e))
        entry_stop(m, e);
}

void rtr_connmgr_free(rtr_connmgr_t *m)
{
    if (!m)
        return;
    while (m->head) {
        rtr_connmgr_entry_t *e = m->head;
        m->head = e->next;
        close_fd(e);
        free(e);
    }
    rtr_connectors_free(m->connectors); /* the workers are gone: nothing points at them */
    pthread_mutex_destroy(&m->lock);
    free(m);
}

/* ---- any thread ---- */

long rtr_connmgr_listener_add(rtr_connmgr_t *m, const cfg_listener_t *lc, char *err, size_t errlen)
{
    pthread_mutex_lock(&m->lock);
    bool started = m->started;
    pthread_mutex_unlock(&m->lock);
    if (!started) {
        snprintf(err, errlen, "The router is not running");
        return -1;
    }
    rtr_connmgr_entry_t *e = entry_new(m, lc, err, errlen);
    if (!e)
        return -1;
    long id = entry_enter(m, e);
    rtr_lstats_listener_add(m->env.lstats, lc, id);
    uv_async_send(&m->wake);
    return id;
}

void rtr_connmgr_listener_del(rtr_connmgr_t *m, long id)
{
    bool                  found = false;
    const cfg_listener_t *lc = NULL;
    pthread_mutex_lock(&m->lock);
    for (rtr_connmgr_entry_t *e = m->head; e && !found; e = e->next) {
        if (e->id == id && !e->deleted) {
            e->deleted = true;
            lc = e->cfg;
            found = true;
        }
    }
    bool started = m->started;
    pthread_mutex_unlock(&m->lock);
    if (found && started) {
        rtr_lstats_listener_del(m->env.lstats, lc); /* its connections count nowhere now */
        uv_async_send(&m->wake);
    }
}

long rtr_connmgr_listener_id(size_t index)
{
    return (long)index + 1;
}

bool rtr_connmgr_find(rtr_connmgr_t *m, long id, rtr_connmgr_info_t *out)
{
    bool found = false;
    pthread_mutex_lock(&m->lock);
    for (rtr_connmgr_entry_t *e = m->head; e && !found; e = e->next) {
        if (e->id == id && !e->deleted) {
            *out = (rtr_connmgr_info_t){.kind = e->kind, .state = e->state, .listener = e->cfg};
            found = true;
        }
    }
    pthread_mutex_unlock(&m->lock);
    return found;
}

long rtr_connmgr_connector_add(rtr_connmgr_t *m, const cfg_connector_t *cn, char *err,
                               size_t errlen)
{
    pthread_mutex_lock(&m->lock);
    bool started = m->started;
    pthread_mutex_unlock(&m->lock);
    if (!started || !m->connectors || m->env.n_workers <= 0) {
        snprintf(err, errlen, "The router is not running");
        return -1;
    }
    return rtr_connectors_add(m->connectors, cn);
}

void rtr_connmgr_connector_del(rtr_connmgr_t *m, long id)
{
    if (m->connectors)
        rtr_connectors_del(m->connectors, id);
}

bool rtr_connmgr_connector_status(rtr_connmgr_t *m, long id, char *status, size_t slen, char *msg,
                                  size_t mlen)
{
    rtr_connector_state_t st;
    if (!rtr_connectors_status(m->connectors, id, &st, msg, mlen))
        return false;
    snprintf(status, slen, "%s", rtr_connector_state_name(st));
    return true;
}

bool rtr_connmgr_connector_failover(rtr_connmgr_t *m, long id, char *urls, size_t len)
{
    return rtr_connectors_failover_urls(m->connectors, id, urls, len);
}
