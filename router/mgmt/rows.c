/* router/mgmt/rows.c: the row producer - every entity of a type as one typed value per
 * column, built once from live state: an operational type's rows from a walk of its stats
 * family (the samples of one object come one after another and make one row), a
 * configuration type's from the node's records, the configuration and core/base/log.h.
 * The socket writes the values as JSON text, the AMQP node straight into the reply; no
 * row is ever text that is parsed again.
 *
 * Threads: a producer belongs to the thread that made it (the agent thread or the admin
 * thread).  The walk holds the registry's mutex only while it fills a batch (stats.h).
 */
#include "router/policy.h"
#include "router/mgmt/mgmt_int.h"
#include "router/lstats.h"

#include "core/base/base.h"
#include "core/base/log.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* A column resolved against the live family. */
typedef struct col {
    const mgmt_attr_t *def;    /* its declaration; NULL for a family field not declared */
    const char        *name;   /* attribute name */
    mgmt_src_t         src;    /* where the value comes from */
    int                index;  /* label or field index (-1: absent, the value is null) */
    int                index2; /* MGMT_SRC_DIFF: the second field's index (-1: absent) */
} col_t;

/* Configuration rows: strings a row formats for itself. */
enum { SBUF_ID = 0, SBUF_ENABLE, SBUF_MSG, N_SBUF };

struct mgmt_rows {
    const mgmt_type_t *t;     /* the type */
    const mgmt_node_t *node;  /* configuration records, or NULL */
    const char        *router_id; /* the router row's info (never NULL) */
    const char        *mode;
    const char        *version;
    col_t             *cols;  /* every column */
    unsigned           ncols; /* their count */
    char               tmp[320]; /* a string mgmt_rows_get formatted */
    /* operational types: the walk and the object being gathered */
    stats_registry_t     *reg;     /* read (borrowed) */
    stats_family_t       *fam;     /* NULL when the family does not exist (yet) */
    stats_iter_t         *it;      /* the walk over "<family>.*" (from the first row on) */
    const stats_sample_t *pending; /* read ahead: the first sample of the next object */
    bool                  open;    /* an object was gathered */
    bool                  singleton_done; /* no family: the singleton's row was produced */
    bool                  ended;   /* the walk returned its last sample */
    uint32_t              base;    /* the object's first slot (its identity in the walk) */
    uint32_t              gen;     /* its generation */
    char                 *labels[STATS_MAX_LABELS]; /* copies of its label values */
    uint64_t             *vals;    /* one per family field */
    bool                 *have;    /* which fields were seen */
    /* configuration types */
    size_t      pos;           /* the current row's index + 1 (0: before the first) */
    mgmt_val_t *cur;           /* the current row's values, one per column */
    char        sbuf[N_SBUF][320]; /* strings of the current row */
    char        furls[3072];   /* a connector row's failoverUrls (up to 10 addresses) */
    /* sslProfile: a copy of the router's profiles, taken when the producer is made */
    cfg_ssl_profile_t *ssl;        /* NULL when there are none (or no mgmt_tls_t) */
    size_t             n_ssl;      /* their count */
    const mgmt_tls_t  *ssl_src;    /* where they came from (frees them) */
    /* autoLink: a copy of the core's, taken when the producer is made */
    core_autolink_row_t *al;       /* NULL when there are none */
    size_t               n_al;     /* their count */
    /* router.node: a copy of the core's rows, taken when the producer is made */
    core_node_row_t     *rn;       /* NULL when there are none */
    size_t               n_rn;     /* their count */
    /* vhost / vhostStats: a copy of the policy's, taken when the producer is made */
    cfg_vhost_t         *vh;
    size_t               n_vh;
    rtr_pstats_row_t    *vs;
    size_t               n_vs;
    char                *rowjson;  /* the current vhost row's groups (JSON text, heap) */
    char                 vbuf[2][1024]; /* the current row's aliases and identity */
};

/* ---- columns ---- */

static int label_index(const stats_family_t *f, const char *key)
{
    if (!f)
        return -1;
    for (unsigned i = 0; i < stats_family_nlabels(f); i++)
        if (strcmp(stats_family_label_key(f, i), key) == 0)
            return (int)i;
    return -1;
}

static int field_index(const stats_family_t *f, const char *name)
{
    if (!f)
        return -1;
    for (unsigned i = 0; i < stats_family_nfields(f); i++)
        if (strcmp(stats_family_field(f, i)->name, name) == 0)
            return (int)i;
    return -1;
}

/* An operational type's columns: the declared ones, then the family's fields in order (a
 * field named like a declared column is that column). */
static void columns_stats(mgmt_rows_t *r)
{
    const mgmt_type_t *t = r->t;
    stats_family_t    *f = r->fam;
    unsigned           nf = f ? stats_family_nfields(f) : 0;
    r->cols = base_calloc(t->nattrs + nf + 1, sizeof(*r->cols));
    unsigned k = 0;
    for (size_t i = 0; i < t->nattrs; i++) {
        const mgmt_attr_t *d = &t->attrs[i];
        col_t             *c = &r->cols[k++];
        c->def = d;
        c->name = d->name;
        c->src = d->src;
        c->index = -1;
        c->index2 = -1;
        if (d->src == MGMT_SRC_LABEL || d->src == MGMT_SRC_PREFIXED ||
            d->src == MGMT_SRC_LABEL_INT ||
            d->src == MGMT_SRC_LABEL_SET || d->src == MGMT_SRC_TLS)
            c->index = label_index(f, d->arg);
        else if (d->src == MGMT_SRC_FIELD || d->src == MGMT_SRC_UPTIME ||
                 d->src == MGMT_SRC_TIMES || d->src == MGMT_SRC_DIFF ||
                 d->src == MGMT_SRC_FIELD_ZERO)
            c->index = field_index(f, d->arg);
        if (d->src == MGMT_SRC_DIFF)
            c->index2 = field_index(f, d->arg2);
    }
    for (unsigned i = 0; i < nf; i++) {
        const char *name = stats_family_field(f, i)->name;
        bool        declared = false;
        for (size_t j = 0; j < t->nattrs && !declared; j++)
            declared = strcmp(t->attrs[j].name, name) == 0;
        if (declared)
            continue;
        col_t *c = &r->cols[k++];
        c->name = name;
        c->src = MGMT_SRC_FIELD;
        c->index = (int)i;
        c->index2 = -1;
    }
    r->ncols = k;
}

/* A configuration type's columns: name, identity, type, then its attributes. */
static void columns_cfg(mgmt_rows_t *r)
{
    static const char *const first[] = {"name", "identity", "type"};
    const mgmt_type_t       *t = r->t;
    r->ncols = (unsigned)(3 + t->nattrs);
    r->cols = base_calloc(r->ncols, sizeof(*r->cols));
    for (unsigned i = 0; i < r->ncols; i++) {
        r->cols[i].name = i < 3 ? first[i] : t->attrs[i - 3].name;
        r->cols[i].index = -1;
        r->cols[i].index2 = -1;
    }
    r->cur = base_calloc(r->ncols, sizeof(*r->cur));
}

mgmt_rows_t *mgmt_rows_new(const mgmt_type_t *t, stats_registry_t *reg, const mgmt_info_t *info,
                           const mgmt_node_t *n)
{
    mgmt_rows_t *r = base_calloc(1, sizeof(*r));
    r->t = t;
    r->node = n;
    r->router_id = info && info->router_id ? info->router_id : "";
    r->mode = info && info->mode ? info->mode : "standalone";
    r->version = info && info->version ? info->version : "";
    if (t->kind != MGMT_K_STATS) {
        columns_cfg(r);
        if (t->kind == MGMT_K_SSL_PROFILE && n && n->hooks.tls) {
            r->ssl_src = n->hooks.tls;
            r->ssl = r->ssl_src->copy(r->ssl_src->ctx, &r->n_ssl);
        }
        if (t->kind == MGMT_K_AUTOLINK && n && n->hooks.autolink_rows)
            r->al = n->hooks.autolink_rows(n->hooks.ctx, &r->n_al);
        if (t->kind == MGMT_K_RNODE && n && n->hooks.node_rows)
            r->rn = n->hooks.node_rows(n->hooks.ctx, &r->n_rn);
        if (t->kind == MGMT_K_VHOST && n && n->hooks.policy)
            r->n_vh = rtr_policy_vhosts(n->hooks.policy, &r->vh);
        if (t->kind == MGMT_K_VHOST_STATS && n && n->hooks.policy)
            r->n_vs = rtr_policy_stats(n->hooks.policy, &r->vs);
        return r;
    }
    stats_family_t *f = reg ? stats_family_find(reg, t->family) : NULL;
    if (f && stats_family_is_singleton(f) != t->singleton)
        f = NULL; /* not the family we know */
    r->reg = reg;
    r->fam = f;
    columns_stats(r);
    if (f) {
        r->vals = base_calloc(stats_family_nfields(f), sizeof(*r->vals));
        r->have = base_calloc(stats_family_nfields(f), sizeof(*r->have));
    }
    return r;
}

static void labels_clear(mgmt_rows_t *r)
{
    for (unsigned i = 0; i < STATS_MAX_LABELS; i++)
        BASE_FREE(r->labels[i]);
    r->open = false;
}

void mgmt_rows_free(mgmt_rows_t *r)
{
    if (!r)
        return;
    labels_clear(r);
    stats_iter_free(r->it);
    free(r->vals);
    free(r->have);
    free(r->cols);
    free(r->cur);
    if (r->ssl_src)
        r->ssl_src->copy_free(r->ssl, r->n_ssl);
    if (r->al)
        r->node->hooks.autolink_rows_free(r->al, r->n_al);
    if (r->rn)
        r->node->hooks.node_rows_free(r->rn, r->n_rn);
    for (size_t i = 0; i < r->n_vh; i++)
        cfg_vhost_fini(&r->vh[i]);
    free(r->vh);
    if (r->vs)
        rtr_policy_stats_free(r->vs, r->n_vs);
    free(r->rowjson);
    free(r);
}

unsigned mgmt_rows_ncols(const mgmt_rows_t *r)
{
    return r->ncols;
}

const char *mgmt_rows_col_name(const mgmt_rows_t *r, unsigned col)
{
    return r->cols[col].name;
}

int mgmt_rows_col_find(const mgmt_rows_t *r, const char *name)
{
    for (unsigned i = 0; i < r->ncols; i++)
        if (strcmp(r->cols[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* ---- operational rows ---- */

/* Start gathering the object sample s belongs to. */
static void row_open(mgmt_rows_t *r, const stats_sample_t *s)
{
    labels_clear(r);
    r->open = true;
    r->base = s->handle.id - stats_family_offset(r->fam, s->field);
    r->gen = s->handle.gen;
    for (unsigned i = 0; i < s->nlabels && i < STATS_MAX_LABELS; i++)
        r->labels[i] = base_strdup(s->labels[i] ? s->labels[i] : "");
    memset(r->have, 0, stats_family_nfields(r->fam) * sizeof(*r->have));
}

static bool stats_next(mgmt_rows_t *r)
{
    labels_clear(r);
    if (r->fam && !r->it) {
        /* the walk starts with the first row: a producer asked only for its columns
         * (GET-ATTRIBUTES, a QUERY's checks) never walks */
        char glob[64];
        snprintf(glob, sizeof(glob), "%s.*", r->t->family);
        r->it = stats_iter_new(r->reg, glob, STATS_ITER_NAMES);
    }
    if (!r->it) {
        /* no family (yet): a singleton still has its row of constants */
        if (!r->t->singleton || r->singleton_done)
            return false;
        r->singleton_done = true;
        return true;
    }
    const stats_sample_t *s;
    unsigned              nf = stats_family_nfields(r->fam);
    for (;;) {
        s = r->pending ? r->pending : stats_iter_next(r->it);
        r->pending = NULL;
        if (!s) {
            r->ended = true;
            break;
        }
        uint32_t base = s->handle.id - stats_family_offset(r->fam, s->field);
        if (r->open && (base != r->base || s->handle.gen != r->gen)) {
            /* s starts the next object: the gathered one is complete (s stays valid: the
             * walk does not move until the next call) */
            r->pending = s;
            return true;
        }
        if (!r->open)
            row_open(r, s);
        if (s->field < nf) {
            r->vals[s->field] = s->value;
            r->have[s->field] = true;
        }
    }
    return r->open;
}

static bool field_has(const mgmt_rows_t *r, int i)
{
    return i >= 0 && r->have && r->have[i];
}

static void stats_get(mgmt_rows_t *r, const col_t *c, mgmt_val_t *v)
{
    v->t = MGMT_V_NULL;
    switch (c->src) {
    case MGMT_SRC_LABEL: {
        const char *s = c->index >= 0 ? r->labels[c->index] : c->def ? c->def->arg2 : NULL;
        if (s && (*s || !c->def || !c->def->null_if_empty)) {
            v->t = MGMT_V_STR;
            v->s = s;
        }
        return;
    }
    case MGMT_SRC_LABEL_INT: {
        const char *s = c->index >= 0 ? r->labels[c->index] : NULL;
        v->t = MGMT_V_INT;
        v->i = s && *s ? strtoll(s, NULL, 10) : c->def->ival;
        return;
    }
    case MGMT_SRC_FIELD:
        if (c->index < 0 && c->def && c->def->arg2) {
            v->t = MGMT_V_INT;
            v->i = strtoll(c->def->arg2, NULL, 10);
        } else if (field_has(r, c->index)) {
            const stats_field_t *fd = stats_family_field(r->fam, (unsigned)c->index);
            if (fd->kind == STATS_GAUGE) {
                v->t = MGMT_V_INT;
                v->i = (int64_t)r->vals[c->index];
            } else {
                v->t = MGMT_V_UINT; /* a histogram's column is its count */
                v->u = r->vals[c->index];
            }
        }
        return;
    case MGMT_SRC_STR:
        v->t = MGMT_V_STR;
        v->s = c->def->arg;
        return;
    case MGMT_SRC_INT:
        v->t = MGMT_V_INT;
        v->i = c->def->ival;
        return;
    case MGMT_SRC_TLS: {
        const char *s = c->index >= 0 && r->labels[c->index] ? r->labels[c->index] : "";
        long long   w = c->def->ival;
        if (w == 0) {
            v->t = MGMT_V_BOOL;
            v->b = *s != '\0';
            return;
        }
        if (w == 3) {
            const char *bits = strrchr(s, ' ');
            v->t = MGMT_V_INT;
            v->i = bits ? strtoll(bits + 1, NULL, 10) : 0;
            return;
        }
        if (!*s)
            return; /* plain: null */
        const char *p = s;
        if (w == 2)
            p = strchr(s, ' ') ? strchr(s, ' ') + 1 : "";
        /* the configuration types' string buffers are free in an operational row */
        char *buf = r->sbuf[w == 1 ? 0 : 1];
        snprintf(buf, sizeof(r->sbuf[0]), "%.*s", (int)strcspn(p, " "), p);
        v->t = MGMT_V_STR;
        v->s = buf;
        return;
    }
    case MGMT_SRC_BOOL:
        v->t = MGMT_V_BOOL;
        v->b = c->def->ival != 0;
        return;
    case MGMT_SRC_NULL:
        return;
    case MGMT_SRC_INFO: {
        const char *a = c->def->arg;
        v->t = MGMT_V_STR;
        v->s = strcmp(a, "mode") == 0 ? r->mode : strcmp(a, "version") == 0 ? r->version
                                                                            : r->router_id;
        return;
    }
    case MGMT_SRC_UPTIME:
        if (field_has(r, c->index) && r->vals[c->index] != 0) {
            int64_t up = (int64_t)time(NULL) - (int64_t)r->vals[c->index];
            v->t = MGMT_V_INT;
            v->i = up < 0 ? 0 : up;
        }
        return;
    case MGMT_SRC_TIMES:
        if (field_has(r, c->index)) {
            v->t = MGMT_V_INT;
            v->i = (int64_t)r->vals[c->index] * c->def->ival;
        }
        return;
    case MGMT_SRC_DIFF:
        if (field_has(r, c->index) && field_has(r, c->index2)) {
            v->t = MGMT_V_INT;
            v->i = (int64_t)r->vals[c->index] - (int64_t)r->vals[c->index2];
        }
        return;
    case MGMT_SRC_FIELD_ZERO:
        v->t = MGMT_V_BOOL;
        v->b = !field_has(r, c->index) || r->vals[c->index] == 0;
        return;
    case MGMT_SRC_LABEL_SET: {
        const char *s = c->index >= 0 ? r->labels[c->index] : NULL;
        v->t = MGMT_V_BOOL;
        v->b = s && *s;
        return;
    }
    case MGMT_SRC_PREFIXED: {
        const char *s = c->index >= 0 ? r->labels[c->index] : NULL;
        if (s) {
            snprintf(r->tmp, sizeof(r->tmp), "%s%s", c->def->arg2, s);
            v->t = MGMT_V_STR;
            v->s = r->tmp;
        }
        return;
    }
    }
}

/* ---- configuration rows ---- */

/* Values of the current configuration row, filled in column order. */
typedef struct fill {
    mgmt_rows_t *r; /* the producer */
    unsigned     k; /* the next column */
} fill_t;

static mgmt_val_t *put(fill_t *f)
{
    BASE_BUG_ON(f->k >= f->r->ncols);
    mgmt_val_t *v = &f->r->cur[f->k++];
    v->t = MGMT_V_NULL;
    return v;
}

static void put_str(fill_t *f, const char *s)
{
    mgmt_val_t *v = put(f);
    if (s) {
        v->t = MGMT_V_STR;
        v->s = s;
    }
}

/* A list of strings, given comma-separated. */
static void put_strs(fill_t *f, const char *s)
{
    mgmt_val_t *v = put(f);
    v->t = MGMT_V_STRS;
    v->s = s ? s : "";
}

static void put_int(fill_t *f, int64_t i)
{
    mgmt_val_t *v = put(f);
    v->t = MGMT_V_INT;
    v->i = i;
}

static void put_uint(fill_t *f, uint64_t u)
{
    mgmt_val_t *v = put(f);
    v->t = MGMT_V_UINT;
    v->u = u;
}

static void put_bool(fill_t *f, bool b)
{
    mgmt_val_t *v = put(f);
    v->t = MGMT_V_BOOL;
    v->b = b;
}

static void put_null(fill_t *f)
{
    put(f);
}

/* name, identity, type */
static void put_base(fill_t *f, const char *name, const char *identity)
{
    put_str(f, name);
    put_str(f, identity);
    put_str(f, f->r->t->full);
}

static uint64_t stat_value(stats_registry_t *reg, const char *name);

/* A field of listener `name`'s stats (router/lstats.h): "listener.<name>.<field>", or with
 * reason set "listenerAuth.<name>/<reason>.authFailed"; 0 when there is none. */
static uint64_t listener_stat(const mgmt_rows_t *r, const char *name, const char *field,
                              const char *reason)
{
    char full[600];
    if (reason)
        snprintf(full, sizeof(full), "listenerAuth.%s/%s.authFailed", name, reason);
    else
        snprintf(full, sizeof(full), "listener.%s.%s", name, field);
    return stat_value(r->node->reg, full);
}

/* A listener as the router runs it: every value from its configuration (the constants are
 * the only values the configuration loader accepts for those attributes), then its stats. */
static void listener_row(fill_t *f, const mgmt_rec_t *rec)
{
    const cfg_listener_t *lc = rec->cfg;
    put_base(f, rec->name, rec->identity);
    put_str(f, lc->host ? lc->host : "");
    put_str(f, lc->port);
    put_str(f, cfg_family_name(lc->family));
    put_str(f, cfg_role_name(lc->role));
    put_int(f, lc->cost);
    put_str(f, lc->sasl_mechanisms);
    put_bool(f, lc->authenticate_peer);
    put_bool(f, lc->require_encryption);
    put_bool(f, lc->require_ssl);
    put_str(f, lc->ssl_profile); /* NULL: null */
    put_int(f, lc->max_frame_size);
    put_int(f, lc->max_sessions);
    put_int(f, lc->max_session_frames);
    put_int(f, lc->idle_timeout_seconds);
    put_int(f, lc->handshake_timeout_seconds);
    put_str(f, cfg_strip_name(lc->strip_annotations));
    put_int(f, lc->link_capacity);
    put_bool(f, false); /* multiTenant: true is refused */
    put_null(f);        /* failoverUrls: a list is refused */
    put_bool(f, lc->http);
    put_str(f, lc->http_root_dir);
    put_bool(f, lc->healthz);
    put_bool(f, lc->metrics);
    put_bool(f, lc->websockets);
    put_str(f, "none"); /* messageLoggingComponents: anything else is refused */
    put_str(f, lc->policy_vhost);
    put_int(f, lc->max_senders);
    put_int(f, lc->max_receivers);
    put_int(f, (int64_t)lc->max_message_size);
    put_int(f, lc->max_unsettled);
    static const char *const reasons[] = RTR_AUTH_REASON_NAMES;
    uint64_t                 auth = 0;
    for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
        auth += listener_stat(f->r, rec->name, NULL, reasons[i]);
    put_uint(f, listener_stat(f->r, rec->name, "connectionsAccepted", NULL));
    put_uint(f, listener_stat(f->r, rec->name, "tlsHandshakesFailed", NULL));
    put_uint(f, auth);
}

/* A configured connector: its attributes (never the password) and its live status
 * (router/connector.h, through the node's hook). */
static void connector_row(fill_t *f, const mgmt_rec_t *rec)
{
    mgmt_rows_t           *r = f->r;
    const cfg_connector_t *cn = rec->cfg;
    const cfg_listener_t  *l = &cn->conn;
    put_base(f, rec->name, rec->identity);
    put_str(f, l->host);
    put_str(f, l->port);
    put_str(f, cfg_role_name(l->role));
    put_int(f, l->cost);
    put_str(f, l->ssl_profile); /* NULL: null */
    put_str(f, l->sasl_mechanisms);
    put_int(f, l->max_frame_size);
    put_int(f, l->idle_timeout_seconds);
    put_str(f, cfg_strip_name(l->strip_annotations));
    put_int(f, l->link_capacity);
    put_bool(f, cn->verify_hostname);
    /* the status and message live in the row's string buffers until the next row */
    char               *status = r->sbuf[SBUF_ENABLE], *msg = r->sbuf[SBUF_MSG];
    const mgmt_hooks_t *h = &r->node->hooks;
    msg[0] = '\0';
    if (!h->connector_status ||
        !h->connector_status(h->ctx, rec->id, status, sizeof(r->sbuf[0]), msg,
                             sizeof(r->sbuf[0])))
        snprintf(status, sizeof(r->sbuf[0]), "INITIALIZING");
    put_str(f, status);
    put_str(f, msg);
    put_int(f, l->max_sessions);
    put_str(f, cn->sasl_username);
    /* failoverUrls: read-only, the list in use (qdrouterd 1.19) */
    if (h->connector_failover && h->connector_failover(h->ctx, rec->id, r->furls, sizeof(r->furls)))
        put_str(f, r->furls);
    else
        put_null(f);
    put_str(f, l->policy_vhost); /* its `$connector` group's vhost (router/policy.h) */
}

static void address_row(fill_t *f, const mgmt_rec_t *rec)
{
    const cfg_address_t *ac = rec->cfg;
    put_base(f, rec->name, rec->identity);
    put_str(f, ac->prefix);
    put_str(f, ac->pattern);
    put_str(f, cfg_distribution_name(ac->distribution));
    put_bool(f, ac->waypoint);
    put_int(f, ac->ingress_phase);
    put_int(f, ac->egress_phase);
    if (ac->priority >= 0)
        put_int(f, ac->priority);
    else
        put_null(f);
    put_bool(f, ac->fallback); /* enableFallback */
}

static void link_route_row(fill_t *f, const mgmt_rec_t *rec)
{
    const cfg_link_route_t *lr = rec->cfg;
    put_base(f, rec->name, rec->identity);
    put_str(f, lr->prefix);
    put_str(f, lr->pattern);
    put_str(f, lr->add_prefix);
    put_str(f, lr->del_prefix);
    put_str(f, lr->container_id);
    put_str(f, lr->connection);
    put_str(f, "linkBalanced");
    put_str(f, lr->direction);
    put_str(f, __atomic_load_n(&lr->serving, __ATOMIC_RELAXED) ? "active" : "inactive");
}

/* An sslProfile: its attributes as written, but never the password itself (ssl.c). */
static void ssl_profile_row(fill_t *f, const cfg_ssl_profile_t *p)
{
    char *id = f->r->sbuf[SBUF_ID];
    snprintf(id, sizeof(f->r->sbuf[0]), "sslProfile/%s", p->name);
    put_base(f, p->name, id);
    put_str(f, p->ciphers);
    put_str(f, p->protocols);
    put_str(f, p->ca_cert_file);
    put_str(f, p->cert_file);
    put_str(f, p->private_key_file);
    put_null(f); /* passwordFile: loaded as password "file:PATH" */
    put_str(f, mgmt_ssl_shown_password(p));
    put_str(f, p->uid_format);
    put_str(f, p->uid_name_mapping_file);
}

/* An autoLink: its configuration, then its state (qdrouterd's columns). */
static void autolink_row(fill_t *f, const core_autolink_row_t *al)
{
    char *id = f->r->sbuf[SBUF_ID], *link = f->r->sbuf[SBUF_ENABLE];
    snprintf(id, sizeof(f->r->sbuf[0]), "%u", al->id);
    char name[64];
    snprintf(name, sizeof(name), "autoLink/%u", al->id);
    put_base(f, al->cfg.name ? al->cfg.name : name, id);
    put_str(f, al->cfg.address);
    put_str(f, al->cfg.dir == CFG_AUTOLINK_OUT ? "out" : "in");
    put_int(f, al->cfg.phase);
    put_str(f, al->cfg.container_id);
    put_str(f, al->cfg.connection);
    put_str(f, al->cfg.external_address);
    put_bool(f, al->cfg.fallback);
    snprintf(link, sizeof(f->r->sbuf[0]), "%llu", (unsigned long long)al->link_id);
    if (al->link_id)
        put_str(f, link);
    else
        put_null(f);
    static const char *const states[] = {"inactive", "attaching", "failed", "active"};
    put_str(f, al->state < 4 ? states[al->state] : NULL);
    put_str(f, al->last_error);
}

/* A router of the network (qdrouterd's router.node columns). */
static void rnode_row(fill_t *f, const core_node_row_t *rn)
{
    char *id = f->r->sbuf[SBUF_ID], *addr = f->r->sbuf[SBUF_ENABLE];
    snprintf(id, sizeof(f->r->sbuf[0]), "router.node/%s", rn->id);
    snprintf(addr, sizeof(f->r->sbuf[0]), "amqp:/_topo/0/%s", rn->id);
    put_base(f, id, id);
    put_str(f, rn->id);
    put_int(f, rn->version);
    put_int(f, rn->instance);
    put_strs(f, rn->link_state);
    put_str(f, rn->next_hop);
    put_strs(f, rn->valid_origins);
    put_str(f, addr);
    if (rn->router_link >= 0)
        put_int(f, rn->router_link);
    else
        put_null(f);
    if (rn->cost >= 0)
        put_int(f, rn->cost);
    else
        put_null(f);
    put_int(f, rn->last_topo_change);
    put_int(f, rn->index);
}

/* The configured `log` entity of a module, or NULL. */
static const cfg_log_t *log_cfg(const cfg_t *cfg, int mod)
{
    for (size_t i = 0; i < cfg->n_logs; i++)
        if (cfg->logs[i].module_id == mod)
            return &cfg->logs[i];
    return NULL;
}

static void log_row(fill_t *f, int mod)
{
    mgmt_rows_t *r = f->r;
    char        *id = r->sbuf[SBUF_ID], *en = r->sbuf[SBUF_ENABLE];
    snprintf(id, sizeof(r->sbuf[0]), "log/%s", base_log_module_name((base_log_module_t)mod));
    put_base(f, id, id);
    put_str(f, base_log_module_name((base_log_module_t)mod));
    base_log_format_enable(base_log_module_configured((base_log_module_t)mod), en,
                           sizeof(r->sbuf[0]));
    put_str(f, en);
    const cfg_log_t *lc = log_cfg(r->node->cfg, mod);
    /* what the module does (a module without its own setting follows DEFAULT's) */
    put_bool(f, base_log_timestamps((base_log_module_t)mod));
    put_bool(f, base_log_source((base_log_module_t)mod));
    put_str(f, lc ? lc->output_file : NULL);
}

static void logstats_row(fill_t *f, int mod)
{
    char *id = f->r->sbuf[SBUF_ID];
    snprintf(id, sizeof(f->r->sbuf[0]), "logStats/%s",
             base_log_module_name((base_log_module_t)mod));
    put_base(f, id, id);
    for (int l = 0; l < BASE_LOG_N_LEVELS; l++)
        put_uint(f, base_log_count((base_log_module_t)mod, (base_log_level_t)l));
}

/* A stat's value by name, 0 when the registry has none (a unit test's registry). */
static uint64_t stat_value(stats_registry_t *reg, const char *name)
{
    stats_handle_t h;
    stats_kind_t   kind;
    stats_value_t  v;
    if (reg && stats_lookup(reg, name, &h, &kind) == 0 && stats_value_get(reg, h, &v) == 0)
        return v.value;
    return 0;
}

static void policy_row(fill_t *f)
{
    const mgmt_node_t  *n = f->r->node;
    const cfg_policy_t *pc = &n->cfg->policy;
    put_base(f, "policy/1", "policy/1");
    put_int(f, pc->max_connections);
    put_int(f, (int64_t)pc->max_message_size);
    put_bool(f, pc->enable_vhost_policy);
    put_bool(f, pc->enable_vhost_name_patterns);
    put_str(f, pc->policy_dir);
    put_str(f, pc->default_vhost ? pc->default_vhost : "$default");
    /* connectionsCurrent: the router's connectionCount; the rest: the workers' counts */
    uint64_t cur = stat_value(n->reg, "router.connectionCount");
    uint64_t conn_denied = stat_value(n->reg, "policyConnectionsDenied");
    uint64_t links_denied = stat_value(n->reg, "policyLinksDenied");
    uint64_t size_denied = stat_value(n->reg, "policyMaxMessageSizeDenied");
    put_uint(f, stat_value(n->reg, "policyConnectionsProcessed"));
    put_uint(f, conn_denied);
    put_uint(f, cur);
    put_uint(f, links_denied);
    put_uint(f, size_denied);
    put_uint(f, conn_denied + links_denied + size_denied);
}

static void put_json(fill_t *f, const char *json)
{
    mgmt_val_t *v = put(f);
    if (json) {
        v->t = MGMT_V_JSON;
        v->s = json;
    }
}

/* A vhost as management shows it: qdrouterd's attributes, `groups` as given. */
static void vhost_row(fill_t *f, const cfg_vhost_t *v)
{
    mgmt_rows_t *r = f->r;
    /* qdrouterd's identity, and the name of a vhost made without one (`vhost/$default`) */
    snprintf(r->vbuf[1], sizeof(r->vbuf[1]), "vhost/%s", v->hostname);
    put_base(f, v->name ? v->name : r->vbuf[1], r->vbuf[1]);
    put_str(f, v->hostname);
    size_t o = 0;
    r->vbuf[0][0] = '\0';
    for (size_t i = 0; i < v->n_aliases && o < sizeof(r->vbuf[0]); i++)
        o += (size_t)snprintf(r->vbuf[0] + o, sizeof(r->vbuf[0]) - o, "%s%s", i ? "," : "",
                              v->aliases[i]);
    put_str(f, v->n_aliases ? r->vbuf[0] : NULL);
    put_int(f, v->max_connections);
    if (v->max_message_size >= 0)
        put_int(f, v->max_message_size);
    else
        put_null(f);
    put_int(f, v->max_conn_per_user);
    put_int(f, v->max_conn_per_host);
    put_bool(f, v->allow_unknown_user);
    free(r->rowjson);
    r->rowjson = NULL;
    cJSON *a = v->attrs_json ? cJSON_Parse(v->attrs_json) : NULL;
    const cJSON *g = a ? cJSON_GetObjectItemCaseSensitive(a, "groups") : NULL;
    r->rowjson = cJSON_IsObject(g) ? cJSON_PrintUnformatted(g) : base_strdup("{}");
    cJSON_Delete(a);
    put_json(f, r->rowjson);
}

static void vhost_stats_row(fill_t *f, const rtr_pstats_row_t *s)
{
    mgmt_rows_t *r = f->r;
    snprintf(r->vbuf[1], sizeof(r->vbuf[1]), "vhostStats/%s", s->hostname);
    put_base(f, r->vbuf[1], r->vbuf[1]);
    put_str(f, s->hostname);
    put_str(f, s->hostname);
    put_uint(f, s->approved);
    put_uint(f, s->denied);
    put_uint(f, s->current);
    put_uint(f, s->session_denied);
    put_uint(f, s->sender_denied);
    put_uint(f, s->receiver_denied);
    put_uint(f, s->size_denied);
    put_json(f, s->per_user);
    put_json(f, s->per_host);
    put_json(f, s->per_user_denied);
}

/* How many rows a configuration type has. */
static size_t cfg_rows(const mgmt_rows_t *r)
{
    if (!r->node)
        return 0;
    switch (r->t->kind) {
    case MGMT_K_LISTENER:
        return r->node->listeners.n;
    case MGMT_K_ADDRESS:
        return r->node->addresses.n;
    case MGMT_K_LINK_ROUTE:
        return r->node->link_routes.n;
    case MGMT_K_LOG:
    case MGMT_K_LOGSTATS:
        return BASE_LOG_N_MODULES;
    case MGMT_K_POLICY:
    case MGMT_K_NODE:
        return 1;
    case MGMT_K_SSL_PROFILE:
        return r->n_ssl;
    case MGMT_K_AUTOLINK:
        return r->n_al;
    case MGMT_K_RNODE:
        return r->n_rn;
    case MGMT_K_CONNECTOR:
        return r->node->connectors.n;
    case MGMT_K_VHOST:
        return r->n_vh;
    case MGMT_K_VHOST_STATS:
        return r->n_vs;
    case MGMT_K_STATS:
    case MGMT_K_EMPTY:
        break;
    }
    return 0;
}

static bool cfg_next(mgmt_rows_t *r)
{
    if (r->pos >= cfg_rows(r))
        return false;
    size_t i = r->pos++;
    fill_t f = {.r = r};
    switch (r->t->kind) {
    case MGMT_K_LISTENER:
        listener_row(&f, &r->node->listeners.v[i]);
        break;
    case MGMT_K_ADDRESS:
        address_row(&f, &r->node->addresses.v[i]);
        break;
    case MGMT_K_LINK_ROUTE:
        link_route_row(&f, &r->node->link_routes.v[i]);
        break;
    case MGMT_K_LOG:
        log_row(&f, (int)i);
        break;
    case MGMT_K_LOGSTATS:
        logstats_row(&f, (int)i);
        break;
    case MGMT_K_POLICY:
        policy_row(&f);
        break;
    case MGMT_K_NODE:
        put_base(&f, "self", "self");
        break;
    case MGMT_K_SSL_PROFILE:
        ssl_profile_row(&f, &r->ssl[i]);
        break;
    case MGMT_K_AUTOLINK:
        autolink_row(&f, &r->al[i]);
        break;
    case MGMT_K_RNODE:
        rnode_row(&f, &r->rn[i]);
        break;
    case MGMT_K_CONNECTOR:
        connector_row(&f, &r->node->connectors.v[i]);
        break;
    case MGMT_K_VHOST:
        vhost_row(&f, &r->vh[i]);
        break;
    case MGMT_K_VHOST_STATS:
        vhost_stats_row(&f, &r->vs[i]);
        break;
    case MGMT_K_STATS:
    case MGMT_K_EMPTY:
        break;
    }
    BASE_BUG_ON(f.k != r->ncols);
    return true;
}

bool mgmt_rows_next(mgmt_rows_t *r)
{
    return r->t->kind == MGMT_K_STATS ? stats_next(r) : cfg_next(r);
}

bool mgmt_rows_at_end(const mgmt_rows_t *r)
{
    if (r->t->kind != MGMT_K_STATS)
        return r->pos >= cfg_rows(r);
    if (!r->fam)
        return !r->t->singleton || r->singleton_done;
    return r->ended && !r->pending;
}

void mgmt_rows_get(mgmt_rows_t *r, unsigned col, mgmt_val_t *out)
{
    if (r->t->kind == MGMT_K_STATS)
        stats_get(r, &r->cols[col], out);
    else
        *out = r->cur[col];
}
