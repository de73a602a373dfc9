/* router/connector.c: the connectors (connector.h) - each one's attempts, on the main loop,
 * and the state its connection reports from its worker.
 *
 * Threads: every static function below runs on the main thread (its loop's timers, name
 * lookups and connects); rtr_connector_opened/_closed and rtr_connectors_status run on any
 * thread.  No _CT/_WT functions here.
 *
 * DESIGN: a record's attempt is a chain of main-loop callbacks: the timer fires, the host is
 * looked up (uv_getaddrinfo), the socket connects (uv_tcp_connect on the record's own handle),
 * and the connected descriptor is duplicated and handed to a worker while the main loop's
 * handle closes.  From then on the worker owns the connection; it reports the open and the
 * end under `lock`, and the end wakes the main loop (`wake`), which arms the timer again.
 * `lock` guards each record's state, message and `ended` flag; it is taken alone and never
 * held across a libuv call.
 */
#include "router/connector.h"

#include "core/base/base.h"
#include "core/base/log.h"
#include "router/ctx.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define LOG(lvl, ...) base_log(BASE_LOG_MOD_SERVER, BASE_LOG_##lvl, __VA_ARGS__)

/* rtr_connector_t: one configured connector.  Owner: the main thread (its handles); the
 * [lock] fields are also written by the worker that holds its connection. */
struct rtr_connector {
    rtr_connectors_t      *cs;          /* immutable: back pointer */
    const cfg_connector_t *cfg;         /* immutable: borrowed */
    uv_timer_t             timer;       /* main: the next attempt */
    uv_getaddrinfo_t       gai;         /* main: the lookup under way */
    uv_tcp_t               tcp;         /* main: the connect under way */
    uv_connect_t           creq;        /* main: its request */
    bool                   tcp_open;    /* main: tcp initialised and not closed */
    bool                   busy;        /* main: an attempt is under way or its connection lives */
    rtr_connector_state_t  state;       /* [lock] connectionStatus */
    char                   msg[300];    /* [lock] connectionMsg: the last failure, or "" */
    char                   logged[300]; /* [lock] the failure last logged (one line per change) */
    bool                   was_open;    /* [lock] the current connection opened */
    rtr_connector_addr_t   addrs[RTR_CONNECTOR_FAILOVER_MAX + 2]; /* [lock] the failover
                                         list: [0] the configured address, then a peer's */
    size_t               n_addrs;                                 /* [lock] its length (>= 1) */
    size_t               cur;    /* [lock] the address of the current attempt */
    rtr_connector_addr_t target; /* main (see rtr_connector_target): addrs[cur] copied
                                    when an attempt starts */
    bool ended;                  /* [lock] its connection ended: the main loop retries */
    long id;                     /* immutable once entered: > 0 (management) */
    bool deleted;                /* [lock] DELETE asked: no attempt any more, its
                                    connection closed; the record stays until _free */
    bool     timer_on;           /* main: timer initialised */
    bool     del_done;           /* main: the deletion was carried out */
    uint64_t conn_id;            /* [lock] its open connection, 0: none */
};

struct rtr_connectors {
    uv_loop_t         *loop;        /* immutable: the main loop */
    struct rtr_worker *workers;     /* immutable: where connections go */
    int                n_workers;   /* immutable */
    int                next_worker; /* main: round-robin */
    uv_async_t         wake;        /* workers -> main: a connection ended */
    bool               started;     /* [lock] wake and the timers are initialised */
    bool               stopping;    /* main: no attempt any more */
    pthread_mutex_t    lock;        /* guards the records' [lock] fields */
    rtr_connector_t  **recs;        /* [lock] every record, deleted ones too (freed by _free) */
    size_t             n;           /* [lock] its length */
    size_t             cap;         /* [lock] its room */
    long               next_id;     /* [lock] ids given so far */
};

static const char *const state_names[] = {"INITIALIZING", "CONNECTING", "SUCCESS", "FAILED"};

const char *rtr_connector_state_name(rtr_connector_state_t st)
{
    return (unsigned)st <= RTR_CONNECTOR_FAILED ? state_names[st] : "UNKNOWN";
}

static void timer_cb(uv_timer_t *t);

static void schedule(rtr_connector_t *ct, uint64_t ms)
{
    if (ct->cs->stopping)
        return;
    uv_timer_start(&ct->timer, timer_cb, ms, 0);
}

/* An attempt failed before any connection existed: FAILED, one line when the reason is new,
 * and the next attempt after the delay. */
/* The next address of the failover list after a failure; returns the delay before trying
 * it.  [lock] */
static uint64_t advance_LH(rtr_connector_t *ct, uint64_t dflt)
{
    if (ct->n_addrs <= 1)
        return dflt;
    ct->cur = (ct->cur + 1) % ct->n_addrs;
    return RTR_CONNECTOR_DELAY_FAILOVER_MS;
}

static void attempt_failed(rtr_connector_t *ct, const char *why)
{
    char msg[300];
    snprintf(msg, sizeof(msg), "Connection to %s:%s failed: %s", ct->target.host, ct->target.port,
             why);
    pthread_mutex_lock(&ct->cs->lock);
    ct->state = RTR_CONNECTOR_FAILED;
    uint64_t delay = advance_LH(ct, RTR_CONNECTOR_DELAY_FAILED_MS);
    pthread_mutex_unlock(&ct->cs->lock);
    if (rtr_connector_note(ct, msg))
        LOG(INFO, "%s (retrying every %d seconds, logged again when this changes)", msg,
            (int)(delay / 1000));
    ct->busy = false;
    schedule(ct, delay);
}

static void tcp_closed_cb(uv_handle_t *h)
{
    rtr_connector_t *ct = h->data;
    ct->tcp_open = false;
}

static void connect_cb(uv_connect_t *req, int status)
{
    rtr_connector_t  *ct = req->data;
    rtr_connectors_t *cs = ct->cs;
    int               fd = -1;
    if (status == 0 && !cs->stopping) {
        uv_os_fd_t ofd;
        if (uv_fileno((uv_handle_t *)&ct->tcp, &ofd) == 0)
            fd = fcntl(ofd, F_DUPFD_CLOEXEC, 0);
        if (fd < 0)
            status = uv_translate_sys_error(errno);
    }
    /* at shutdown the loop's handles are closed for it (the connect is then cancelled) */
    if (!uv_is_closing((uv_handle_t *)&ct->tcp))
        uv_close((uv_handle_t *)&ct->tcp, tcp_closed_cb);
    pthread_mutex_lock(&cs->lock);
    bool deleted = ct->deleted;
    pthread_mutex_unlock(&cs->lock);
    if (cs->stopping || deleted) {
        if (fd >= 0)
            close(fd);
        ct->busy = false;
        return;
    }
    if (status != 0) {
        attempt_failed(ct, uv_strerror(status));
        return;
    }
    /* the worker owns the connection now; it reports the open and the end */
    pthread_mutex_lock(&cs->lock);
    ct->was_open = false;
    ct->ended = false;
    pthread_mutex_unlock(&cs->lock);
    rtr_worker_t *w = &cs->workers[cs->next_worker];
    cs->next_worker = (cs->next_worker + 1) % cs->n_workers;
    rtr_worker_post_ext(w, RTR_EXT_CONNECT, ct, fd);
}

static void resolved_cb(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    rtr_connector_t *ct = req->data;
    if (ct->cs->stopping) {
        uv_freeaddrinfo(res);
        ct->busy = false;
        return;
    }
    if (status != 0) {
        attempt_failed(ct, uv_strerror(status));
        return;
    }
    uv_tcp_init(ct->cs->loop, &ct->tcp);
    ct->tcp.data = ct;
    ct->tcp_open = true;
    ct->creq.data = ct;
    int rc = uv_tcp_connect(&ct->creq, &ct->tcp, res->ai_addr, connect_cb);
    uv_freeaddrinfo(res);
    if (rc != 0) {
        uv_close((uv_handle_t *)&ct->tcp, tcp_closed_cb);
        attempt_failed(ct, uv_strerror(rc));
    }
}

static void timer_cb(uv_timer_t *t)
{
    rtr_connector_t *ct = t->data;
    pthread_mutex_lock(&ct->cs->lock);
    bool deleted = ct->deleted;
    pthread_mutex_unlock(&ct->cs->lock);
    if (ct->cs->stopping || ct->busy || ct->tcp_open || deleted)
        return;
    const cfg_listener_t *l = &ct->cfg->conn;
    ct->busy = true;
    pthread_mutex_lock(&ct->cs->lock);
    if (ct->state == RTR_CONNECTOR_INITIALIZING || ct->state == RTR_CONNECTOR_SUCCESS)
        ct->state = RTR_CONNECTOR_CONNECTING;
    ct->target = ct->addrs[ct->cur];
    pthread_mutex_unlock(&ct->cs->lock);
    struct addrinfo hints = {0};
    hints.ai_family = l->family == CFG_FAMILY_IPV4   ? AF_INET
                      : l->family == CFG_FAMILY_IPV6 ? AF_INET6
                                                     : AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    /* a failover address's port comes from the peer's open: checked here */
    int  pn = cfg_port_number(ct->target.port);
    char port[8];
    snprintf(port, sizeof(port), "%d", pn);
    ct->gai.data = ct;
    if (pn <= 0) {
        attempt_failed(ct, "the port is not a port number or a known service name");
        return;
    }
    int rc = uv_getaddrinfo(ct->cs->loop, &ct->gai, resolved_cb, ct->target.host, port, &hints);
    if (rc != 0)
        attempt_failed(ct, uv_strerror(rc));
}

/* Record i, or NULL past the end (the table may grow meanwhile). */
static rtr_connector_t *rec_at(rtr_connectors_t *cs, size_t i)
{
    pthread_mutex_lock(&cs->lock);
    rtr_connector_t *ct = i < cs->n ? cs->recs[i] : NULL;
    pthread_mutex_unlock(&cs->lock);
    return ct;
}

/* A deleted record: no attempt any more, and its open connection closed by its worker
 * (RTR_EXT_CLOSE_CONN to every worker; the owner closes it).  One still being made is
 * closed when its open comes (rtr_connector_opened). */
static void rec_delete(rtr_connectors_t *cs, rtr_connector_t *ct)
{
    ct->del_done = true;
    if (ct->timer_on)
        uv_timer_stop(&ct->timer);
    pthread_mutex_lock(&cs->lock);
    uint64_t conn = ct->conn_id;
    pthread_mutex_unlock(&cs->lock);
    if (conn)
        for (int w = 0; w < cs->n_workers; w++)
            rtr_worker_post_ext(&cs->workers[w], RTR_EXT_CLOSE_CONN, NULL, (long)conn);
    const cfg_listener_t *l = &ct->cfg->conn;
    LOG(INFO, "Connector %s (%s:%s) deleted", l->name ? l->name : "", l->host, l->port);
}

/* A record's first attempt, now. */
static void rec_start(rtr_connectors_t *cs, rtr_connector_t *ct)
{
    uv_timer_init(cs->loop, &ct->timer);
    ct->timer.data = ct;
    ct->timer_on = true;
    uv_timer_start(&ct->timer, timer_cb, 0, 0);
}

/* Connections that ended: each connector's next attempt after its delay; records added or
 * deleted at run time started or ended. */
static void wake_cb(uv_async_t *h)
{
    rtr_connectors_t *cs = h->data;
    rtr_connector_t  *ct;
    for (size_t i = 0; (ct = rec_at(cs, i)) != NULL; i++) {
        pthread_mutex_lock(&cs->lock);
        bool deleted = ct->deleted;
        pthread_mutex_unlock(&cs->lock);
        if (deleted) {
            if (!ct->del_done)
                rec_delete(cs, ct);
            continue;
        }
        if (!ct->timer_on && !cs->stopping) {
            rec_start(cs, ct);
            continue;
        }
        pthread_mutex_lock(&cs->lock);
        bool     ended = ct->ended, was_open = ct->was_open;
        uint64_t delay = 0;
        if (ended) /* qdrouterd moves on through the failover list after every end */
            delay = advance_LH(ct, was_open ? RTR_CONNECTOR_DELAY_OPENED_MS
                                            : RTR_CONNECTOR_DELAY_FAILED_MS);
        ct->ended = false;
        pthread_mutex_unlock(&cs->lock);
        if (!ended)
            continue;
        ct->busy = false;
        schedule(ct, delay);
    }
}

rtr_connectors_t *rtr_connectors_new(const cfg_t *cfg, uv_loop_t *loop, struct rtr_worker *workers,
                                     int n_workers)
{
    rtr_connectors_t *cs = base_calloc(1, sizeof(*cs));
    cs->loop = loop;
    cs->workers = workers;
    cs->n_workers = n_workers;
    pthread_mutex_init(&cs->lock, NULL);
    for (size_t i = 0; i < cfg->n_connectors; i++) {
        long id = rtr_connectors_add(cs, &cfg->connectors[i]);
        BASE_BUG_ON(id != (long)i + 1);
    }
    return cs;
}

long rtr_connectors_add(rtr_connectors_t *cs, const cfg_connector_t *cn)
{
    rtr_connector_t *ct = base_calloc(1, sizeof(*ct));
    ct->cs = cs;
    ct->cfg = cn;
    snprintf(ct->addrs[0].host, sizeof(ct->addrs[0].host), "%s", cn->conn.host);
    snprintf(ct->addrs[0].port, sizeof(ct->addrs[0].port), "%s", cn->conn.port);
    ct->n_addrs = 1;
    ct->target = ct->addrs[0];
    pthread_mutex_lock(&cs->lock);
    if (cs->n == cs->cap) {
        cs->cap = cs->cap ? 2 * cs->cap : 8;
        cs->recs = base_realloc(cs->recs, cs->cap * sizeof(*cs->recs));
    }
    cs->recs[cs->n++] = ct;
    ct->id = ++cs->next_id;
    long id = ct->id;
    bool started = cs->started;
    pthread_mutex_unlock(&cs->lock);
    if (started)
        uv_async_send(&cs->wake); /* the main loop starts it */
    return id;
}

bool rtr_connectors_del(rtr_connectors_t *cs, long id)
{
    bool found = false;
    pthread_mutex_lock(&cs->lock);
    for (size_t i = 0; i < cs->n && !found; i++) {
        if (cs->recs[i]->id == id && !cs->recs[i]->deleted) {
            cs->recs[i]->deleted = true;
            found = true;
        }
    }
    bool started = cs->started;
    pthread_mutex_unlock(&cs->lock);
    if (found && started)
        uv_async_send(&cs->wake);
    return found;
}

int rtr_connectors_start(rtr_connectors_t *cs)
{
    int rc = uv_async_init(cs->loop, &cs->wake, wake_cb);
    if (rc)
        return rc;
    cs->wake.data = cs;
    pthread_mutex_lock(&cs->lock);
    cs->started = true;
    pthread_mutex_unlock(&cs->lock);
    wake_cb(&cs->wake); /* every record so far: started (or deleted already) */
    return 0;
}

void rtr_connectors_stop(rtr_connectors_t *cs)
{
    if (!cs || cs->stopping)
        return;
    cs->stopping = true;
    rtr_connector_t *ct;
    for (size_t i = 0; (ct = rec_at(cs, i)) != NULL; i++)
        if (ct->timer_on)
            uv_timer_stop(&ct->timer);
}

void rtr_connectors_free(rtr_connectors_t *cs)
{
    if (!cs)
        return;
    pthread_mutex_destroy(&cs->lock);
    for (size_t i = 0; i < cs->n; i++)
        free(cs->recs[i]);
    free(cs->recs);
    free(cs);
}

const cfg_connector_t *rtr_connector_cfg(const rtr_connector_t *ct)
{
    return ct->cfg;
}

bool rtr_connector_opened(rtr_connector_t *ct, uint64_t conn_id, const char *container)
{
    rtr_connectors_t *cs = ct->cs;
    pthread_mutex_lock(&cs->lock);
    if (ct->deleted) {
        pthread_mutex_unlock(&cs->lock);
        return false;
    }
    ct->conn_id = conn_id;
    ct->state = RTR_CONNECTOR_SUCCESS;
    ct->was_open = true;
    ct->msg[0] = '\0';
    ct->logged[0] = '\0'; /* a failure after an open is news again */
    pthread_mutex_unlock(&cs->lock);
    (void)container; /* the connection logs its open (router/conn.c) */
    return true;
}

void rtr_connector_closed(rtr_connector_t *ct, const char *why)
{
    rtr_connectors_t *cs = ct->cs;
    pthread_mutex_lock(&cs->lock);
    ct->state = ct->was_open ? RTR_CONNECTOR_CONNECTING : RTR_CONNECTOR_FAILED;
    ct->conn_id = 0;
    if (why)
        snprintf(ct->msg, sizeof(ct->msg), "%s", why);
    ct->ended = true;
    bool started = cs->started;
    pthread_mutex_unlock(&cs->lock);
    if (started)
        uv_async_send(&cs->wake);
}

const rtr_connector_addr_t *rtr_connector_target(const rtr_connector_t *ct)
{
    return &ct->target;
}

static bool addr_in_LH(const rtr_connector_t *ct, const rtr_connector_addr_t *a)
{
    for (size_t i = 0; i < ct->n_addrs; i++)
        if (strcmp(ct->addrs[i].host, a->host) == 0 && strcmp(ct->addrs[i].port, a->port) == 0)
            return true;
    return false;
}

void rtr_connector_failover_set(rtr_connector_t *ct, const rtr_connector_addr_t *list, size_t n)
{
    pthread_mutex_lock(&ct->cs->lock);
    /* the configured address, the one connected to, then the peer's new ones */
    rtr_connector_addr_t now = ct->addrs[ct->cur];
    ct->n_addrs = 1;
    ct->cur = 0;
    if (!addr_in_LH(ct, &now)) {
        ct->addrs[ct->n_addrs] = now;
        ct->cur = ct->n_addrs++;
    }
    for (size_t i = 0; i < n && ct->n_addrs < BASE_ARRAY_LEN(ct->addrs); i++)
        if (!addr_in_LH(ct, &list[i]))
            ct->addrs[ct->n_addrs++] = list[i];
    pthread_mutex_unlock(&ct->cs->lock);
}

/* The live record of id, or NULL.  [lock] */
static rtr_connector_t *find_LH(rtr_connectors_t *cs, long id)
{
    for (size_t i = 0; i < cs->n; i++)
        if (cs->recs[i]->id == id && !cs->recs[i]->deleted)
            return cs->recs[i];
    return NULL;
}

rtr_connector_t *rtr_connectors_get(rtr_connectors_t *cs, long id)
{
    pthread_mutex_lock(&cs->lock);
    rtr_connector_t *ct = find_LH(cs, id);
    pthread_mutex_unlock(&cs->lock);
    return ct;
}

bool rtr_connector_note(rtr_connector_t *ct, const char *msg)
{
    pthread_mutex_lock(&ct->cs->lock);
    snprintf(ct->msg, sizeof(ct->msg), "%s", msg);
    bool news = strcmp(msg, ct->logged) != 0;
    if (news)
        snprintf(ct->logged, sizeof(ct->logged), "%s", msg);
    pthread_mutex_unlock(&ct->cs->lock);
    return news;
}

bool rtr_connectors_status(rtr_connectors_t *cs, long id, rtr_connector_state_t *state, char *msg,
                           size_t len)
{
    if (!cs)
        return false;
    pthread_mutex_lock(&cs->lock);
    rtr_connector_t *ct = find_LH(cs, id);
    if (ct) {
        *state = ct->state;
        snprintf(msg, len, "%s", ct->msg);
    }
    pthread_mutex_unlock(&cs->lock);
    return ct != NULL;
}

bool rtr_connectors_failover_urls(rtr_connectors_t *cs, long id, char *buf, size_t len)
{
    if (!cs || len == 0)
        return false;
    pthread_mutex_lock(&cs->lock);
    rtr_connector_t *ct = find_LH(cs, id);
    if (ct) {
        const char *scheme = ct->cfg->conn.ssl_profile ? "amqps" : "amqp";
        size_t      off = 0;
        buf[0] = '\0';
        for (size_t k = 0; k < ct->n_addrs; k++) {
            const rtr_connector_addr_t *a = &ct->addrs[(ct->cur + k) % ct->n_addrs];
            int n = snprintf(buf + off, len - off, "%s%s://%s:%s", k ? ", " : "", scheme, a->host,
                             a->port);
            if (n < 0 || (size_t)n >= len - off) {
                buf[off] = '\0'; /* no half entry */
                break;
            }
            off += (size_t)n;
        }
    }
    pthread_mutex_unlock(&cs->lock);
    return ct != NULL;
}
