/* router/lstats.c: per-listener stats and the log line of each TLS or authentication failure
 * (lstats.h says what is counted and who calls what).
 *
 * Thread suffixes: _WT = the connection's worker.  rtr_lstats_new/_free run on the thread
 * that owns the workers; rtr_lstats_listener_add/_del and every count take `lock`, which
 * guards the table and orders each count before the retire of the object it writes.
 */
#include "router/lstats.h"

#include "router/mgmt/mgmt.h"
#include "router/sasl.h"
#include "router/tls.h"
#include "router/transport.h"

#include <proton/sasl.h>
#include <pthread.h>
#include <sasl/sasl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The `listener` family's fields (slot offsets: no histogram). */
enum { L_ACCEPTED = 0, L_TLS_FAILED, L_BAD_HEADER, L_NFIELDS };

// clang-format off
static const stats_field_t listener_fields[L_NFIELDS] = {
    [L_ACCEPTED]   = {.name = "connectionsAccepted", .kind = STATS_COUNTER,
                      .help = "Connections accepted on the listener"},
    [L_TLS_FAILED] = {.name = "tlsHandshakesFailed", .kind = STATS_COUNTER,
                      .help = "TLS handshakes that failed, timed out or were aborted, and "
                              "clients of a requireSsl listener that did not start TLS"},
    [L_BAD_HEADER] = {.name = "badProtocolHeaders", .kind = STATS_COUNTER,
                      .help = "Connections that began with no AMQP or SASL protocol header "
                              "(a TLS client on a plain listener, another protocol)"},
};

static const stats_field_t auth_fields[1] = {
    {.name = "authFailed", .kind = STATS_COUNTER,
     .help = "Authentications that failed, by reason"},
};
// clang-format on

static const char *const reason_names[RTR_AUTH_N] = RTR_AUTH_REASON_NAMES;
static_assert(sizeof((const char *[])RTR_AUTH_REASON_NAMES) / sizeof(const char *) == RTR_AUTH_N,
              "a name per reason");

/* One listener's objects.  [lock] */
typedef struct lrec {
    const cfg_listener_t *lc;               /* the listener (borrowed) */
    char                 *name;             /* its name, the `listener` label (heap) */
    stats_obj_t           obj;              /* its `listener` object */
    stats_obj_t           auth[RTR_AUTH_N]; /* its `listenerAuth` objects (none: it does not
                                               authenticate) */
    struct lrec *next;                      /* the table */
} lrec_t;

struct rtr_lstats {
    const core_stats_t *cs;       /* immutable: the registry and its logging of refusals */
    stats_family_t     *fam;      /* immutable: `listener` */
    stats_family_t     *auth_fam; /* immutable: `listenerAuth` */
    pthread_mutex_t     lock;     /* guards recs and every count; taken alone */
    lrec_t             *recs;     /* [lock] live listeners */
};

const char *rtr_auth_reason_name(rtr_auth_reason_t r)
{
    return (unsigned)r < RTR_AUTH_N ? reason_names[r] : "?";
}

rtr_auth_reason_t rtr_auth_reason_of_cyrus(int rc)
{
    switch (rc) {
    case SASL_BADAUTH:
    case SASL_NOUSER:
    case SASL_NOVERIFY:
    case SASL_NOAUTHZ:
    case SASL_EXPIRED:
    case SASL_DISABLED:
        return RTR_AUTH_CREDENTIALS;
    case SASL_NOMECH:
    case SASL_TOOWEAK:
    case SASL_ENCRYPT:
        return RTR_AUTH_MECHANISM;
    case SASL_BADPROT:
    case SASL_BADPARAM:
        return RTR_AUTH_PROTOCOL;
    default:
        return RTR_AUTH_INTERNAL;
    }
}

rtr_lstats_t *rtr_lstats_new(const core_stats_t *cs)
{
    const stats_family_def_t ldef = {.name = "listener",
                                     .fields = listener_fields,
                                     .nfields = L_NFIELDS,
                                     .labels = {"listener"}};
    const stats_family_def_t adef = {.name = "listenerAuth",
                                     .fields = auth_fields,
                                     .nfields = 1,
                                     .labels = {"key", "listener", "reason"},
                                     .prom_prefix = "junction_listener"};
    stats_family_t          *fam = NULL, *auth_fam = NULL;
    if (!cs || !cs->reg || stats_family_new(cs->reg, &ldef, &fam) != 0 ||
        stats_family_new(cs->reg, &adef, &auth_fam) != 0)
        return NULL; /* families are permanent: one that was made stays unused */
    rtr_lstats_t *t = base_calloc(1, sizeof(*t));
    t->cs = cs;
    t->fam = fam;
    t->auth_fam = auth_fam;
    pthread_mutex_init(&t->lock, NULL);
    return t;
}

static void rec_free(rtr_lstats_t *t, lrec_t *r)
{
    stats_object_retire(t->cs->reg, r->obj);
    for (int i = 0; i < RTR_AUTH_N; i++)
        if (!stats_obj_is_none(r->auth[i]))
            stats_object_retire(t->cs->reg, r->auth[i]);
    free(r->name);
    free(r);
}

void rtr_lstats_free(rtr_lstats_t *t)
{
    if (!t)
        return;
    while (t->recs) {
        lrec_t *r = t->recs;
        t->recs = r->next;
        rec_free(t, r);
    }
    pthread_mutex_destroy(&t->lock);
    free(t);
}

void rtr_lstats_listener_add(rtr_lstats_t *t, const cfg_listener_t *lc, long id)
{
    if (!t)
        return;
    char identity[300];
    mgmt_listener_identity(lc, id, identity, sizeof(identity));
    lrec_t *r = base_calloc(1, sizeof(*r));
    r->lc = lc;
    r->name = base_strdup(lc->name ? lc->name : identity);
    core_stats_object_new(t->cs, t->fam, (const char *const[]){r->name}, &r->obj);
    if (rtr_sasl_listener_uses_cyrus(lc) || lc->sasl_plugin) { /* it authenticates */
        for (int i = 0; i < RTR_AUTH_N; i++) {
            size_t n = strlen(r->name) + strlen(reason_names[i]) + 2;
            char  *key = base_malloc(n);
            snprintf(key, n, "%s/%s", r->name, reason_names[i]);
            core_stats_object_new(t->cs, t->auth_fam,
                                  (const char *const[]){key, r->name, reason_names[i]},
                                  &r->auth[i]);
            free(key);
        }
    }
    pthread_mutex_lock(&t->lock);
    r->next = t->recs;
    t->recs = r;
    pthread_mutex_unlock(&t->lock);
}

void rtr_lstats_listener_del(rtr_lstats_t *t, const cfg_listener_t *lc)
{
    if (!t)
        return;
    pthread_mutex_lock(&t->lock);
    lrec_t **pp = &t->recs;
    while (*pp && (*pp)->lc != lc)
        pp = &(*pp)->next;
    lrec_t *r = *pp;
    if (r) {
        *pp = r->next;
        rec_free(t, r); /* under the lock: no count can follow the retire */
    }
    pthread_mutex_unlock(&t->lock);
}

/* Count into c's listener: field `field` of its `listener` object, or (reason >= 0) its
 * `listenerAuth` object of that reason; copy its name into name[len] for the log.  A
 * listener without objects (deleted, or never started by the connection manager: unit
 * tests) counts nowhere and is named by its identity without the id. */
static void count_WT(rtr_conn_t *c, int field, int reason, char *name, size_t len)
{
    rtr_lstats_t         *t = c->worker->ctx->lstats;
    const cfg_listener_t *lc = c->listener;
    bool                  found = false;
    if (t) {
        pthread_mutex_lock(&t->lock);
        for (lrec_t *r = t->recs; r; r = r->next) {
            if (r->lc != lc)
                continue;
            if (reason >= 0)
                stats_obj_add(c->worker->shard, r->auth[reason], 0, 1);
            else
                stats_obj_add(c->worker->shard, r->obj, (uint32_t)field, 1);
            if (name)
                snprintf(name, len, "%s", r->name);
            found = true;
            break;
        }
        pthread_mutex_unlock(&t->lock);
    }
    if (!found && name) {
        if (lc->name)
            snprintf(name, len, "%s", lc->name);
        else
            snprintf(name, len, "listener/%s:%s", lc->host ? lc->host : "", lc->port);
    }
}

void rtr_lstats_accepted_WT(rtr_conn_t *c)
{
    count_WT(c, L_ACCEPTED, -1, NULL, 0);
}

void rtr_lstats_tls_failed_WT(rtr_conn_t *c, const char *fmt, ...)
{
    if (c->end_logged)
        return;
    c->end_logged = true;
    char    what[512], name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    stats_counter_add(c->worker->shard, c->worker->ctx->tls_failed, 1);
    count_WT(c, L_TLS_FAILED, -1, name, sizeof(name));
    LOGC(c, INFO, "Connection from %s closed: %s (listener %s)", c->peer, what, name);
}

void rtr_lstats_tls_failed_other(rtr_lstats_t *t, const cfg_listener_t *lc, stats_shard_t *shard,
                                 char *name, size_t len)
{
    bool found = false;
    if (t) {
        pthread_mutex_lock(&t->lock);
        for (lrec_t *r = t->recs; r && !found; r = r->next) {
            if (r->lc != lc)
                continue;
            if (shard)
                stats_obj_add(shard, r->obj, L_TLS_FAILED, 1);
            snprintf(name, len, "%s", r->name);
            found = true;
        }
        pthread_mutex_unlock(&t->lock);
    }
    if (!found)
        snprintf(name, len, "%s", lc->name ? lc->name : lc->port);
}

static void auth_failed_va_WT(rtr_conn_t *c, rtr_auth_reason_t why, const char *mech,
                              const char *fmt, va_list ap)
{
    if (c->end_logged)
        return;
    c->end_logged = true;
    char what[512], name[256];
    vsnprintf(what, sizeof(what), fmt, ap);
    count_WT(c, -1, (int)why, name, sizeof(name));
    LOGC(c, INFO,
         "SASL: authentication of client %s failed (mechanism %s): %s (listener %s, "
         "reason %s)",
         c->peer, mech && *mech ? mech : "none", what, name, rtr_auth_reason_name(why));
}

void rtr_lstats_auth_failed_WT(rtr_conn_t *c, rtr_auth_reason_t why, const char *mech,
                               const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    auth_failed_va_WT(c, why, mech, fmt, ap);
    va_end(ap);
}

void rtr_lstats_sasl_failed_WT(pn_transport_t *t, rtr_auth_reason_t why, const char *mech,
                               const char *fmt, ...)
{
    rtr_conn_t *c = pn_transport_get_context(t);
    va_list     ap;
    va_start(ap, fmt);
    if (c) {
        auth_failed_va_WT(c, why, mech, fmt, ap);
    } else { /* a transport of no connection of the router's: the line alone */
        char what[512];
        vsnprintf(what, sizeof(what), fmt, ap);
        base_log(BASE_LOG_MOD_SERVER, BASE_LOG_INFO,
                 "SASL: authentication failed (mechanism %s): %s (reason %s)",
                 mech && *mech ? mech : "none", what, rtr_auth_reason_name(why));
    }
    va_end(ap);
}

void rtr_lstats_bad_header_WT(rtr_conn_t *c)
{
    if (c->end_logged)
        return;
    c->end_logged = true;
    char name[256];
    count_WT(c, L_BAD_HEADER, -1, name, sizeof(name));
    /* the guard keeps the header it gathered: its first byte tells a TLS record */
    LOGC(c, INFO, "Connection from %s closed: not an AMQP protocol header%s (listener %s)", c->peer,
         c->guard.hdr[0] == 0x16 ? " but a TLS handshake, and the listener has no sslProfile" : "",
         name);
}

/* The SASL exchange has begun (the client's SASL header went through the guard) and has no
 * outcome yet. */
static bool sasl_in_progress_WT(rtr_conn_t *c)
{
    return c->guard.layer == 1 && pn_sasl_outcome(pn_sasl(c->driver.transport)) == PN_SASL_NONE;
}

/* A TLS session whose handshake has not finished. */
static bool tls_in_progress_WT(const rtr_conn_t *c)
{
    return c->tls && !rtr_tls_ready_WT(c->tls);
}

bool rtr_lstats_guard_refused_WT(rtr_conn_t *c)
{
    if (c->end_logged)
        return true;
    if (!sasl_in_progress_WT(c))
        return false;
    rtr_lstats_auth_failed_WT(c, RTR_AUTH_PROTOCOL, pn_sasl_get_mech(pn_sasl(c->driver.transport)),
                              "amqp:connection:framing-error %s", c->guard.why);
    return true;
}

bool rtr_lstats_handshake_expired_WT(rtr_conn_t *c)
{
    unsigned s = c->listener->handshake_timeout_seconds;
    if (c->end_logged)
        return true;
    if (tls_in_progress_WT(c)) {
        rtr_lstats_tls_failed_WT(c, "no AMQP open within %u seconds: TLS handshake not done", s);
        return true;
    }
    if (!sasl_in_progress_WT(c))
        return false;
    rtr_lstats_auth_failed_WT(c, RTR_AUTH_TIMEOUT, pn_sasl_get_mech(pn_sasl(c->driver.transport)),
                              "no AMQP open within %u seconds: SASL exchange not done", s);
    return true;
}

bool rtr_lstats_transport_error_WT(rtr_conn_t *c, pn_condition_t *cond)
{
    if (c->end_logged)
        return true;
    const char *name = pn_condition_get_name(cond);
    const char *desc = pn_condition_get_description(cond);
    const char *mech = pn_sasl_get_mech(pn_sasl(c->driver.transport));
    name = name ? name : "";
    desc = desc ? desc : "";
    if (strcmp(name, "amqp:connection:policy-error") == 0 && strstr(desc, "authentication")) {
        /* Proton: the client skipped SASL on a listener that requires authentication */
        rtr_lstats_auth_failed_WT(c, RTR_AUTH_SKIPPED, NULL, "%s %s", name, desc);
        return true;
    }
    if (strcmp(name, "amqp:unauthorized-access") == 0) {
        /* Proton's own refusals (sasl.c reports Cyrus's before this): a mechanism outside
         * the listener's saslMechanisms, or its built-in ANONYMOUS layer's */
        rtr_lstats_auth_failed_WT(
            c, strstr(desc, "mechanism") ? RTR_AUTH_MECHANISM : RTR_AUTH_CREDENTIALS, mech, "%s %s",
            name, desc);
        return true;
    }
    if (tls_in_progress_WT(c)) {
        rtr_lstats_tls_failed_WT(c, "TLS handshake aborted: %s %s", name, desc);
        return true;
    }
    if (sasl_in_progress_WT(c)) {
        /* the client's input ended (or broke) in the middle of the exchange */
        rtr_lstats_auth_failed_WT(c, RTR_AUTH_ABORTED, mech, "%s %s", name, desc);
        return true;
    }
    return false;
}
