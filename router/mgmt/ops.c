/* router/mgmt/ops.c: the AMQP management node's operations - QUERY, READ, CREATE, UPDATE,
 * DELETE and the GET-* of the node itself - on a decoded request (mgmt_req_t), writing
 * the reply body through an encoder (mgmt_enc_t; amqp.c decodes the request and encodes
 * the reply).  Rows come from the row producer (rows.c), the types and attributes from the
 * one schema table (schema.c).  Every operation checks everything first and writes its
 * body only once it knows it succeeds.
 *
 * Threads: the node's (the agent thread); hooks are called on it.  Log levels are changed
 * through core/base/log.h's thread-safe calls.
 */
#include "router/policy.h"
#include "router/mgmt/mgmt_int.h"

#include "core/base/base.h"
#include "core/base/log.h"
#include "core/base/pattern.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUERY_MAX 100000 /* rows one QUERY may return (qdstat pages by 500) */

int mgmt_req_vfail(mgmt_req_t *q, int status, const char *fmt, va_list ap)
{
    vsnprintf(q->desc, sizeof(q->desc), fmt, ap);
    q->status = status;
    q->wrote = false;
    return -1;
}

__attribute__((format(printf, 3, 4))) static int fail(mgmt_req_t *q, int status,
                                                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mgmt_req_vfail(q, status, fmt, ap);
    va_end(ap);
    return -1;
}

/* Success: the status and its description; the body follows (or none: an empty map). */
static int ok(mgmt_req_t *q, int status, bool body)
{
    q->status = status;
    snprintf(q->desc, sizeof(q->desc), "%s",
             status == 201 ? "Created" : status == 204 ? "No Content" : "OK");
    q->wrote = body;
    return 0;
}

/* ---- writing ---- */

static void put_str(const mgmt_enc_t *e, const char *s)
{
    mgmt_val_t v = {.t = MGMT_V_STR, .s = s};
    e->value(e->ctx, &v);
}

/* The current row as a map, attribute name -> value; `over` names up to two columns whose
 * values are replaced (UPDATE of a connection's adminStatus). */
typedef struct over {
    const char *name;  /* column, or NULL */
    const char *value; /* its new value */
} over_t;

static void write_row_map(const mgmt_enc_t *e, mgmt_rows_t *r, const over_t *over, size_t nover)
{
    e->map(e->ctx);
    for (unsigned i = 0; i < mgmt_rows_ncols(r); i++) {
        const char *name = mgmt_rows_col_name(r, i);
        mgmt_val_t  v;
        mgmt_rows_get(r, i, &v);
        for (size_t k = 0; k < nover; k++)
            if (strcmp(over[k].name, name) == 0)
                v = (mgmt_val_t){.t = MGMT_V_STR, .s = over[k].value};
        put_str(e, name);
        e->value(e->ctx, &v);
    }
    e->end(e->ctx);
}

static mgmt_rows_t *rows_new(mgmt_node_t *n, const mgmt_type_t *t)
{
    return mgmt_rows_new(t, n->reg, &n->info, n);
}

/* ---- finding an entity ---- */

/* Move r to the row whose name or identity is the request's (name first, as qdrouterd; a
 * singleton's one row when neither is given).  False with a 404 set when there is none. */
static bool find_row(mgmt_req_t *q, const mgmt_type_t *t, mgmt_rows_t *r)
{
    const char *key = q->name ? "name" : "identity";
    const char *want = q->name ? q->name : q->identity;
    int         col = mgmt_rows_col_find(r, key);
    while (mgmt_rows_next(r)) {
        if (!want && t->singleton)
            return true;
        mgmt_val_t v;
        if (!want || col < 0)
            continue;
        mgmt_rows_get(r, (unsigned)col, &v);
        if (v.t == MGMT_V_STR && strcmp(v.s, want) == 0)
            return true;
    }
    fail(q, 404, "Not Found: no %s with %s '%s'", t->full, key, want ? want : "");
    return false;
}

/* Move r to row `index`. */
static void seek_row(mgmt_rows_t *r, size_t index)
{
    for (size_t i = 0; i <= index && mgmt_rows_next(r); i++)
        ;
}

/* ---------------------------------------------------------------------------------------
 * QUERY
 * ------------------------------------------------------------------------------------- */

static int op_query(mgmt_node_t *n, mgmt_req_t *q, const mgmt_enc_t *e)
{
    const char        *tn = q->entity_type ? q->entity_type : q->type;
    const mgmt_type_t *tf = tn ? mgmt_type_find(tn) : NULL;
    if (!q->entity_type && tf && tf->kind == MGMT_K_NODE)
        tn = NULL; /* a node-level QUERY with no entityType: every entity (qdrouterd) */
    /* attributeNames: a list of strings, absent or empty for every attribute */
    const cJSON *an = NULL;
    if (q->body) {
        if (!cJSON_IsObject(q->body))
            return fail(q, 400, "Bad Request: the QUERY body must be a map");
        an = cJSON_GetObjectItemCaseSensitive(q->body, "attributeNames");
        if (an && !cJSON_IsNull(an) && !cJSON_IsArray(an))
            return fail(q, 400, "Bad Request: attributeNames must be a list of strings");
        const cJSON *x;
        cJSON_ArrayForEach(x, an)
        {
            if (!cJSON_IsString(x))
                return fail(q, 400, "Bad Request: attributeNames must be a list of strings");
        }
    }
    if (q->offset < -1 || q->count < -1)
        return fail(q, 400, "Bad Request: offset and count must not be negative");

    const mgmt_type_t *t = NULL;
    if (tn) {
        t = mgmt_type_find(tn);
        if (!t)
            return fail(q, 404, "Not Found: unknown entity type '%.200s'", tn);
    }
    /* the columns: requested ones (checked), or all of the type's */
    static const char *const base_names[] = {"name", "identity", "type"};
    const char             **names;
    size_t                   nnames = 0;
    mgmt_rows_t             *tr = t ? rows_new(n, t) : NULL;
    if (an && cJSON_GetArraySize(an) > 0) {
        names = base_calloc((size_t)cJSON_GetArraySize(an), sizeof(*names));
        const cJSON *x;
        cJSON_ArrayForEach(x, an)
        {
            if (tr && mgmt_rows_col_find(tr, x->valuestring) < 0) {
                fail(q, 404, "Not Found: '%.200s' is not an attribute of %s", x->valuestring,
                     t->full);
                free(names);
                mgmt_rows_free(tr);
                return -1;
            }
            names[nnames++] = x->valuestring;
        }
    } else if (tr) {
        nnames = mgmt_rows_ncols(tr);
        names = base_calloc(nnames, sizeof(*names));
        for (unsigned i = 0; i < nnames; i++)
            names[i] = mgmt_rows_col_name(tr, i);
    } else {
        nnames = 3;
        names = base_calloc(nnames, sizeof(*names));
        memcpy(names, base_names, sizeof(base_names));
    }

    ok(q, 200, true);
    e->map(e->ctx);
    put_str(e, "attributeNames");
    e->list(e->ctx);
    for (size_t i = 0; i < nnames; i++)
        put_str(e, names[i]);
    e->end(e->ctx);
    put_str(e, "results");
    e->list(e->ctx);
    long long offset = q->offset < 0 ? 0 : q->offset;
    long long count = q->count < 0 || q->count > QUERY_MAX ? QUERY_MAX : q->count;
    long long skipped = 0, sent = 0;
    int      *cols = base_calloc(nnames + 1, sizeof(*cols));
    for (size_t i = 0; i < mgmt_ntypes && sent < count; i++) {
        const mgmt_type_t *ti = t ? t : &mgmt_types[i];
        if (t && i > 0)
            break;
        mgmt_rows_t *r = tr ? tr : rows_new(n, ti);
        tr = NULL;
        for (size_t k = 0; k < nnames; k++)
            cols[k] = mgmt_rows_col_find(r, names[k]);
        /* a QUERY of every type has never skipped operational rows for its offset (it
         * paged them where they were made); kept so, the wire's behaviour is unchanged */
        bool skips = t || ti->kind != MGMT_K_STATS;
        while (sent < count && mgmt_rows_next(r)) {
            if (skips && skipped < offset) {
                skipped++;
                continue;
            }
            e->list(e->ctx);
            for (size_t k = 0; k < nnames; k++) {
                mgmt_val_t v = {.t = MGMT_V_NULL};
                if (cols[k] >= 0)
                    mgmt_rows_get(r, (unsigned)cols[k], &v);
                e->value(e->ctx, &v);
            }
            e->end(e->ctx);
            sent++;
        }
        mgmt_rows_free(r);
    }
    free(cols);
    free(names);
    e->end(e->ctx);
    e->end(e->ctx);
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * READ, CREATE, DELETE, UPDATE
 * ------------------------------------------------------------------------------------- */

static const mgmt_type_t *target_type(mgmt_req_t *q, bool required)
{
    if (!q->type) {
        if (required)
            fail(q, 400, "Bad Request: the %s request has no 'type'", q->op);
        return required ? NULL : mgmt_type_node();
    }
    const mgmt_type_t *t = mgmt_type_find(q->type);
    if (!t)
        fail(q, 404, "Not Found: unknown entity type '%.200s'", q->type);
    return t;
}

static int op_read(mgmt_node_t *n, mgmt_req_t *q, const mgmt_enc_t *e)
{
    const mgmt_type_t *t = target_type(q, false);
    if (!t)
        return -1;
    if (!q->name && !q->identity && !t->singleton)
        return fail(q, 400, "Bad Request: READ needs a name or an identity");
    mgmt_rows_t *r = rows_new(n, t);
    if (find_row(q, t, r)) {
        ok(q, 200, true);
        write_row_map(e, r, NULL, 0);
    }
    mgmt_rows_free(r);
    return q->wrote ? 0 : -1;
}

static cfg_t *parse_entity(mgmt_req_t *q, const char *cfg_type, const cJSON *attrs)
{
    cJSON *doc = cJSON_CreateArray();
    cJSON *ent = cJSON_CreateArray();
    cJSON_AddItemToArray(ent, cJSON_CreateString(cfg_type));
    cJSON_AddItemToArray(ent, cJSON_Duplicate(attrs, true));
    /* a listener's or connector's sslProfile is one of the router's, which the caller
     * holds (op_create): the loader, which checks that they name a profile of its file,
     * gets a stand-in of that name */
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(attrs, "sslProfile");
    if ((strcmp(cfg_type, "listener") == 0 || strcmp(cfg_type, "connector") == 0) &&
        cJSON_IsString(sp) && *sp->valuestring) {
        cJSON *stub = cJSON_CreateArray();
        cJSON *sa = cJSON_CreateObject();
        cJSON_AddItemToArray(stub, cJSON_CreateString("sslProfile"));
        cJSON_AddStringToObject(sa, "name", sp->valuestring);
        cJSON_AddItemToArray(stub, sa);
        cJSON_AddItemToArray(doc, stub);
    }
    cJSON_AddItemToArray(doc, ent);
    char *text = cJSON_PrintUnformatted(doc);
    cJSON_Delete(doc);
    cfg_t *cfg = NULL;
    char err[512];
    if (cfg_load_string(text, "request", &cfg, err, sizeof(err)) != 0) {
        /* "request: entity 0 (listener): attribute ..." -> the part after the entity */
        const char *p = strstr(err, "): ");
        fail(q, 400, "Bad Request: %s", p ? p + 3 : err);
        cfg = NULL;
    }
    free(text);
    return cfg;
}

/* A created entity's deprecation warnings (cfg_t.warnings, "request: entity 0 (listener):
 * attribute 'addr' is deprecated, use 'host' instead"), logged as start-up logs a file's, one
 * AGENT warning each, naming the type and the name instead of the request's entity index. */
static void log_create_warnings(const cfg_t *cfg, const char *full, const char *name)
{
    for (size_t i = 0; i < cfg->n_warnings; i++) {
        const char *w = cfg->warnings[i];
        const char *p = strstr(w, "): ");
        if (name)
            base_log(BASE_LOG_MOD_AGENT, BASE_LOG_WARNING, "CREATE %s '%.200s': %s", full, name,
                     p ? p + 3 : w);
        else
            base_log(BASE_LOG_MOD_AGENT, BASE_LOG_WARNING, "CREATE %s: %s", full, p ? p + 3 : w);
    }
}

/* The reply to an sslProfile change: its row as it is now (st: the change's status). */
static int ssl_reply(mgmt_node_t *m, mgmt_req_t *q, const mgmt_type_t *t, const mgmt_enc_t *e,
                     const char *name, int st)
{
    mgmt_rows_t *r = rows_new(m, t);
    int          col = mgmt_rows_col_find(r, "name");
    while (mgmt_rows_next(r)) {
        mgmt_val_t v;
        mgmt_rows_get(r, (unsigned)col, &v);
        if (v.t == MGMT_V_STR && strcmp(v.s, name) == 0) {
            ok(q, st, true);
            write_row_map(e, r, NULL, 0);
            break;
        }
    }
    mgmt_rows_free(r);
    if (!q->wrote) /* deleted again meanwhile (through the socket) */
        return fail(q, 404, "Not Found: no %s with name '%.200s'", t->full, name);
    return 0;
}

/* The sslProfile a request names: its name, or its identity "sslProfile/<name>". */
static const char *ssl_target(mgmt_req_t *q)
{
    if (q->name)
        return q->name;
    if (q->identity && strncmp(q->identity, "sslProfile/", 11) == 0)
        return q->identity + 11;
    return q->identity;
}

static int ssl_status(mgmt_req_t *q, int st, const char *err)
{
    return fail(q, st, "%s: %s",
                st == 404 ? "Not Found" : st == 409 ? "Conflict" : "Bad Request", err);
}

static bool name_taken(const mgmt_rec_list_t *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].name, name) == 0 || strcmp(l->v[i].identity, name) == 0)
            return true;
    return false;
}

/* The current row's identity as a number (an autoLink's), or -1. */
static long long row_identity(mgmt_rows_t *r)
{
    mgmt_val_t v = {.t = MGMT_V_NULL};
    int col = mgmt_rows_col_find(r, "identity");
    if (col >= 0)
        mgmt_rows_get(r, (unsigned)col, &v);
    return v.t == MGMT_V_STR ? strtoll(v.s, NULL, 10) : -1;
}

/* CREATE of an autoLink: parsed as the file's entity is, handed to the core (which attaches
 * it on a matching open connection); the reply is its row. */
static int create_autolink(mgmt_node_t *m, mgmt_req_t *q, const mgmt_type_t *t,
                           const mgmt_enc_t *e, const cJSON *attrs)
{
    const cJSON *bn = cJSON_GetObjectItemCaseSensitive(attrs, "name");
    if (bn && cJSON_IsString(bn)) {
        mgmt_rows_t *r = rows_new(m, t);
        int col = mgmt_rows_col_find(r, "name");
        bool taken = false;
        while (!taken && mgmt_rows_next(r)) {
            mgmt_val_t v = {.t = MGMT_V_NULL};
            mgmt_rows_get(r, (unsigned)col, &v);
            taken = v.t == MGMT_V_STR && strcmp(v.s, bn->valuestring) == 0;
        }
        mgmt_rows_free(r);
        if (taken)
            return fail(q, 400, "Bad Request: duplicate name '%.200s' for %s", bn->valuestring,
                        t->full);
    }
    cfg_t *cfg = parse_entity(q, "autoLink", attrs);
    if (!cfg)
        return -1;
    if (cfg->n_autolinks != 1) {
        cfg_free(cfg);
        return fail(q, 400, "Bad Request: not an autoLink");
    }
    log_create_warnings(cfg, t->full, cfg->autolinks[0].name);
    uint32_t id = m->hooks.autolink_add(m->hooks.ctx, &cfg->autolinks[0]);
    cfg_free(cfg);
    mgmt_rows_t *r = rows_new(m, t);
    while (mgmt_rows_next(r) && row_identity(r) != (long long)id)
        ;
    ok(q, 201, true);
    write_row_map(e, r, NULL, 0);
    mgmt_rows_free(r);
    return 0;
}

/* linkRoute CREATE: checked as the configuration file's entity is (config.c), added to the
 * core's table through the hook; `attrs` is the caller's, freed here. */
static int create_link_route(mgmt_node_t *m, mgmt_req_t *q, const mgmt_type_t *t,
                             const mgmt_enc_t *e, cJSON *attrs, const cJSON *bn)
{
    if (bn && name_taken(&m->link_routes, bn->valuestring)) {
        /* qdrouterd's words */
        fail(q, 400, "Bad Request: Name conflicts with an existing entity");
        cJSON_Delete(attrs);
        return -1;
    }
    cfg_t *cfg = parse_entity(q, "linkRoute", attrs);
    cJSON_Delete(attrs);
    if (!cfg)
        return -1;
    if (cfg->n_link_routes != 1) {
        cfg_free(cfg);
        return fail(q, 400, "Bad Request: not a linkRoute");
    }
    const cfg_link_route_t *lr = &cfg->link_routes[0];
    log_create_warnings(cfg, t->full, lr->name);
    mgmt_node_own(m, cfg);
    mgmt_node_link_route_rec(m, lr);
    if (m->hooks.link_route_add)
        m->hooks.link_route_add(m->hooks.ctx, lr);
    mgmt_rows_t *r = rows_new(m, t);
    seek_row(r, m->link_routes.n - 1);
    ok(q, 201, true);
    write_row_map(e, r, NULL, 0);
    mgmt_rows_free(r);
    return 0;
}

/* ---- vhost: the policy's (router/policy.h); a change applies to the opens after it ---- */

/* Reply with the vhost of that hostname's row. */
static int vhost_reply(mgmt_node_t *m, mgmt_req_t *q, const mgmt_type_t *t, const mgmt_enc_t *e,
                       const char *hostname, int st)
{
    mgmt_rows_t *r = rows_new(m, t);
    int          col = mgmt_rows_col_find(r, "hostname");
    while (mgmt_rows_next(r)) {
        mgmt_val_t v;
        mgmt_rows_get(r, (unsigned)col, &v);
        if (v.t == MGMT_V_STR && strcmp(v.s, hostname) == 0) {
            ok(q, st, true);
            write_row_map(e, r, NULL, 0);
            break;
        }
    }
    mgmt_rows_free(r);
    if (!q->wrote) /* deleted again meanwhile */
        return fail(q, 404, "Not Found: no %s with hostname '%.200s'", t->full, hostname);
    return 0;
}

/* Check attrs as a vhost and put it in the policy (CREATE, and UPDATE with the merged
 * attributes).  The status is qdrouterd 1.19's: 400 for what its schema refuses (an unknown
 * attribute, a value of the wrong type, a vhost that exists already), 500 for what its policy
 * compiler refuses (a number out of range, a bad group, a name clash), whose description
 * starts as qdrouterd's does ("PolicyError: Policy 'h' is invalid: ").  The rest of each
 * description is Junction's own (the attribute, group and option, and the value): where
 * qdrouterd's is a Python exception's text (a `groups` that is not a map gives "dictionary
 * update sequence element #0 has length 1; 2 is required:<traceback object ...>", a group
 * that is not a map "AttributeError: 'str' object has no attribute 'items'"), it says nothing
 * a user could act on. */
static int vhost_set(mgmt_node_t *m, mgmt_req_t *q, const mgmt_type_t *t, const mgmt_enc_t *e,
                     const cJSON *attrs, bool create)
{
    cfg_vhost_t v;
    char        err[768];
    if (!m->hooks.policy)
        return fail(q, 501, "Not Implemented: no vhost policies in this router");
    int rc = cfg_vhost_parse(attrs, &v, err, sizeof(err));
    if (rc == CFG_VHOST_EPOLICY) {
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(attrs, "hostname");
        if (!cJSON_IsString(h))
            h = cJSON_GetObjectItemCaseSensitive(attrs, "id");
        return fail(q, 500, "PolicyError: Policy '%.200s' is invalid: %s",
                    cJSON_IsString(h) ? h->valuestring : "", err);
    }
    if (rc < 0)
        return fail(q, 400, "Bad Request: vhost: %s", err);
    char *host = base_strdup(v.hostname);
    if (create) {
        cfg_vhost_t *all = NULL;
        size_t       n = rtr_policy_vhosts(m->hooks.policy, &all);
        bool         exists = false;
        for (size_t i = 0; i < n; i++) {
            exists = exists || strcmp(all[i].hostname, host) == 0;
            cfg_vhost_fini(&all[i]);
        }
        free(all);
        if (exists) {
            cfg_vhost_fini(&v);
            fail(q, 400, "Bad Request: vhost '%.200s' exists already (UPDATE changes it)", host);
            free(host);
            return -1;
        }
    }
    if (rtr_policy_vhost_set(m->hooks.policy, &v, err, sizeof(err)) < 0) {
        cfg_vhost_fini(&v);
        free(host);
        return fail(q, 500, "PolicyError: %s", err); /* qdrouterd's compiler: a name clash */
    }
    rc = vhost_reply(m, q, t, e, host, create ? 201 : 200);
    free(host);
    return rc;
}

/* The vhost a request names (by name or identity): its attributes as given, as a new cJSON
 * map and its hostname in host[len]; NULL with the 404 set when there is none. */
static cJSON *vhost_find(mgmt_node_t *m, mgmt_req_t *q, const mgmt_type_t *t, char *host,
                         size_t len)
{
    if (!q->name && !q->identity) {
        fail(q, 400, "Bad Request: %s needs a name or an identity", q->op);
        return NULL;
    }
    mgmt_rows_t *r = rows_new(m, t);
    cJSON       *out = NULL;
    if (find_row(q, t, r)) {
        mgmt_val_t v;
        mgmt_rows_get(r, (unsigned)mgmt_rows_col_find(r, "hostname"), &v);
        snprintf(host, len, "%s", v.t == MGMT_V_STR ? v.s : "");
        cfg_vhost_t *all = NULL;
        size_t       n = rtr_policy_vhosts(m->hooks.policy, &all);
        for (size_t i = 0; i < n; i++) {
            if (!out && strcmp(all[i].hostname, host) == 0 && all[i].attrs_json)
                out = cJSON_Parse(all[i].attrs_json);
            cfg_vhost_fini(&all[i]);
        }
        free(all);
        if (!out)
            out = cJSON_CreateObject();
    }
    mgmt_rows_free(r);
    return out;
}

static int update_vhost(mgmt_node_t *m, mgmt_req_t *q, const mgmt_type_t *t, const mgmt_enc_t *e)
{
    char   host[512];
    cJSON *attrs = m->hooks.policy ? vhost_find(m, q, t, host, sizeof(host)) : NULL;
    if (!m->hooks.policy)
        return fail(q, 501, "Not Implemented: no vhost policies in this router");
    if (!attrs)
        return -1;
    /* qdrouterd: the new attributes over the old ones, then the whole checked again; the
     * hostname may be written `id` (its deprecated name) on either side, not both in the
     * request */
    cJSON *old_id = cJSON_DetachItemFromObjectCaseSensitive(attrs, "id");
    if (old_id && !cJSON_GetObjectItemCaseSensitive(attrs, "hostname"))
        cJSON_AddItemToObject(attrs, "hostname", old_id);
    else
        cJSON_Delete(old_id);
    bool         both = cJSON_GetObjectItemCaseSensitive(q->body, "id") &&
                cJSON_GetObjectItemCaseSensitive(q->body, "hostname");
    const cJSON *x;
    const cJSON *merge = both ? NULL : q->body;
    cJSON_ArrayForEach(x, merge)
    {
        const char *k = strcmp(x->string, "id") == 0 ? "hostname" : x->string;
        if (strcmp(k, "identity") == 0 || strcmp(k, "type") == 0)
            continue;
        cJSON_DeleteItemFromObjectCaseSensitive(attrs, k);
        cJSON_AddItemToObject(attrs, k, cJSON_Duplicate(x, true));
    }
    if (both) {
        cJSON_Delete(attrs);
        return fail(q, 400, "Bad Request: attribute 'hostname': given twice (as 'hostname' and "
                            "'id')");
    }
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(attrs, "hostname");
    if (!h)
        h = cJSON_GetObjectItemCaseSensitive(attrs, "id");
    if (!cJSON_IsString(h) || strcmp(h->valuestring, host) != 0) {
        cJSON_Delete(attrs);
        return fail(q, 400, "Bad Request: a vhost's hostname cannot be changed (DELETE it and "
                            "CREATE another)");
    }
    int rc = vhost_set(m, q, t, e, attrs, false);
    cJSON_Delete(attrs);
    return rc;
}

static int delete_vhost(mgmt_node_t *m, mgmt_req_t *q, const mgmt_type_t *t)
{
    char   host[512];
    cJSON *attrs = m->hooks.policy ? vhost_find(m, q, t, host, sizeof(host)) : NULL;
    if (!m->hooks.policy)
        return fail(q, 404, "Not Found: no %s", t->full);
    if (!attrs)
        return -1;
    cJSON_Delete(attrs);
    if (rtr_policy_vhost_del(m->hooks.policy, host) < 0)
        return fail(q, 404, "Not Found: no %s with hostname '%.200s'", t->full, host);
    return ok(q, 204, false);
}

static uint64_t link_conn(mgmt_node_t *m, uint64_t link_id);

/* A CREATE of router.connection.linkRoute: a link route to the asking connection itself.
 * Junction does not have them yet; qdrouterd 1.19 first asks the connection's vhost policy
 * (allowDynamicLinkRoutes), whose refusal is its 403 "Forbidden", and that Junction does too.
 * Returns true when q is such a request (answered). */
static bool create_conn_link_route(mgmt_node_t *m, mgmt_req_t *q)
{
    static const char *const names[] = {"router.connection.linkRoute",
                                        MGMT_PREFIX ".router.connection.linkRoute"};
    if (!q->type || (strcmp(q->type, names[0]) != 0 && strcmp(q->type, names[1]) != 0))
        return false;
    if (m->hooks.policy && q->from_link &&
        !rtr_policy_dynamic_link_routes_allowed(m->hooks.policy, link_conn(m, q->from_link)))
        fail(q, 403, "Forbidden");
    else
        fail(q, 501, "Not Implemented: connection-scoped link routes (%s) are not supported by "
                     "Junction yet", names[1]);
    return true;
}

static int op_create(mgmt_node_t *m, mgmt_req_t *q, const mgmt_enc_t *e)
{
    if (create_conn_link_route(m, q))
        return -1;
    const mgmt_type_t *t = target_type(q, true);
    if (!t)
        return -1;
    const char *full = t->full;
    if (t->kind == MGMT_K_STATS && strcmp(t->name, "router") == 0)
        return fail(q, 403, "Forbidden: CREATE of %s", full);
    if (!mgmt_type_has_op(t, "CREATE"))
        return fail(q, 501, "Not Implemented: operation CREATE is not implemented for %s", full);
    if (q->body && !cJSON_IsObject(q->body))
        return fail(q, 400, "Bad Request: the CREATE body must be a map of attributes");
    cJSON *attrs = q->body ? cJSON_Duplicate(q->body, true) : cJSON_CreateObject();
    if (cJSON_GetObjectItemCaseSensitive(attrs, "identity")) {
        cJSON_Delete(attrs);
        return fail(q, 400, "Bad Request: identity cannot be given to CREATE");
    }
    /* `type` and `name` from the properties go with the attributes (qdrouterd) */
    cJSON_DeleteItemFromObjectCaseSensitive(attrs, "type");
    const cJSON *bn = cJSON_GetObjectItemCaseSensitive(attrs, "name");
    if (bn && !cJSON_IsString(bn)) {
        cJSON_Delete(attrs);
        return fail(q, 400, "Bad Request: name must be a string");
    }
    if (q->name && !bn)
        cJSON_AddStringToObject(attrs, "name", q->name);
    bn = cJSON_GetObjectItemCaseSensitive(attrs, "name");
    if (t->kind == MGMT_K_VHOST) {
        int rc = vhost_set(m, q, t, e, attrs, true);
        cJSON_Delete(attrs);
        return rc;
    }
    if (t->kind == MGMT_K_AUTOLINK && m->hooks.autolink_add) {
        int rc = create_autolink(m, q, t, e, attrs);
        cJSON_Delete(attrs);
        return rc;
    }
    if (t->kind == MGMT_K_EMPTY || t->kind == MGMT_K_AUTOLINK || t->kind == MGMT_K_RNODE) {
        cJSON_Delete(attrs);
        return fail(q, 501, "Not Implemented: %s entities are not supported by Junction yet",
                    full);
    }
    if (t->kind == MGMT_K_SSL_PROFILE) {
        char        err[512];
        char       *name = bn ? base_strdup(bn->valuestring) : NULL;
        int         st = m->hooks.tls ? mgmt_ssl_create(m->hooks.tls, name, attrs, err,
                                                        sizeof(err))
                                      : 501;
        cJSON_Delete(attrs);
        if (st == 501)
            snprintf(err, sizeof(err), "this router cannot make sslProfiles");
        int rc = st ? ssl_status(q, st == 501 ? 400 : st, err) : ssl_reply(m, q, t, e, name, 201);
        free(name);
        return rc;
    }
    if (t->kind == MGMT_K_LINK_ROUTE)
        return create_link_route(m, q, t, e, attrs, bn);
    /* a connector's failoverUrls is the list in use, read-only (a file's is ignored with a
     * warning, as qdrouterd 1.19 ignores it; a CREATE's is refused, as 1.19 refuses it) */
    if (t->kind == MGMT_K_CONNECTOR && (cJSON_GetObjectItemCaseSensitive(attrs, "failoverUrls") ||
                                        cJSON_GetObjectItemCaseSensitive(attrs, "failoverList"))) {
        cJSON_Delete(attrs);
        return fail(q, 400, "Bad Request: Cannot set attribute 'failoverUrls' in CREATE (it is "
                            "read-only: the failover list in use)");
    }
    mgmt_rec_list_t *list = t->kind == MGMT_K_LISTENER    ? &m->listeners
                            : t->kind == MGMT_K_CONNECTOR ? &m->connectors
                                                          : &m->addresses;
    if (bn && name_taken(list, bn->valuestring)) {
        fail(q, 400, "Bad Request: duplicate name '%.200s' for %s", bn->valuestring, full);
        cJSON_Delete(attrs);
        return -1;
    }
    cfg_t *cfg = parse_entity(q,
                              t->kind == MGMT_K_LISTENER    ? "listener"
                              : t->kind == MGMT_K_CONNECTOR ? "connector"
                                                            : "address",
                              attrs);
    cJSON_Delete(attrs);
    if (!cfg)
        return -1;
    size_t index;
    if (t->kind == MGMT_K_CONNECTOR) {
        if (cfg->n_connectors != 1) {
            cfg_free(cfg);
            return fail(q, 400, "Bad Request: not a connector");
        }
        /* the profile a connector names is the router's (one made at run time too), with
           a client context made for it if it had none: it stays while the connector does */
        const char *prof = cfg->connectors[0].conn.ssl_profile;
        char        err[300] = "no way to start connectors";
        if (prof) {
            int hrc = m->hooks.tls && m->hooks.tls->hold_client
                          ? m->hooks.tls->hold_client(m->hooks.tls->ctx, prof, err, sizeof(err))
                          : -ENOENT;
            if (hrc != 0) {
                if (hrc == -ENOENT)
                    fail(q, 400, "Bad Request: sslProfile '%.200s': no sslProfile entity has "
                                 "that name", prof);
                else
                    fail(q, 400, "Bad Request: %s", err);
                cfg_free(cfg);
                return -1;
            }
            snprintf(err, sizeof(err), "no way to start connectors");
        }
        long id = m->hooks.connector_add ? m->hooks.connector_add(m->hooks.ctx,
                                                                  &cfg->connectors[0], err,
                                                                  sizeof(err))
                                         : -1;
        if (id <= 0) {
            if (prof)
                m->hooks.tls->release_client(m->hooks.tls->ctx, prof);
            cfg_free(cfg);
            return fail(q, 400, "Bad Request: %s", err);
        }
        log_create_warnings(cfg, full, cfg->connectors[0].conn.name);
        mgmt_node_own(m, cfg);
        mgmt_node_connector_rec(m, &cfg->connectors[0], id);
        index = m->connectors.n - 1;
    } else if (t->kind == MGMT_K_LISTENER) {
        if (cfg->n_listeners != 1) {
            cfg_free(cfg);
            return fail(q, 400, "Bad Request: not a listener");
        }
        /* the profile a listener names is the router's (one made at run time too): it
         * stays while the listener does */
        const char *prof = cfg->listeners[0].ssl_profile;
        if (prof && (!m->hooks.tls || m->hooks.tls->hold(m->hooks.tls->ctx, prof) != 0)) {
            fail(q, 400, "Bad Request: sslProfile '%.200s': no sslProfile entity has that name",
                 prof);
            cfg_free(cfg);
            return -1;
        }
        char err[300] = "no way to start listeners";
        long id = m->hooks.listener_add
                      ? m->hooks.listener_add(m->hooks.ctx, &cfg->listeners[0], err, sizeof(err))
                      : -1;
        if (id <= 0) {
            if (prof)
                m->hooks.tls->release(m->hooks.tls->ctx, prof);
            cfg_free(cfg);
            return fail(q, 400, "Bad Request: %s", err);
        }
        log_create_warnings(cfg, full, cfg->listeners[0].name);
        mgmt_node_own(m, cfg);
        char identity[300];
        mgmt_listener_identity(&cfg->listeners[0], id, identity, sizeof(identity));
        mgmt_rec_add(&m->listeners, cfg->listeners[0].name, identity, id, &cfg->listeners[0]);
        index = m->listeners.n - 1;
    } else {
        if (cfg->n_addresses != 1) {
            cfg_free(cfg);
            return fail(q, 400, "Bad Request: not an address");
        }
        const cfg_address_t *ac = &cfg->addresses[0];
        bool prefix = ac->prefix != NULL;
        char *norm = base_pattern_normalize(prefix ? ac->prefix : ac->pattern, prefix);
        bool dup = false;
        for (size_t i = 0; norm && i < m->addresses.n && !dup; i++) {
            const cfg_address_t *o = m->addresses.v[i].cfg;
            bool op = o->prefix != NULL;
            char *on = base_pattern_normalize(op ? o->prefix : o->pattern, op);
            dup = on && strcmp(on, norm) == 0;
            free(on);
        }
        if (!norm || dup) {
            free(norm);
            fail(q, 400, "Bad Request: %s '%.200s' %s", prefix ? "prefix" : "pattern",
                 prefix ? ac->prefix : ac->pattern, dup ? "is configured already" : "is not valid");
            cfg_free(cfg);
            return -1;
        }
        free(norm);
        log_create_warnings(cfg, full, ac->name);
        mgmt_node_own(m, cfg);
        mgmt_node_address_rec(m, ac);
        if (m->hooks.address_add)
            m->hooks.address_add(m->hooks.ctx, ac);
        index = m->addresses.n - 1;
    }
    mgmt_rows_t *r = rows_new(m, t);
    seek_row(r, index);
    ok(q, 201, true);
    write_row_map(e, r, NULL, 0);
    mgmt_rows_free(r);
    return 0;
}


static int find_rec(mgmt_req_t *q, const mgmt_type_t *t, mgmt_rec_list_t *l)
{
    const char *want = q->name ? q->name : q->identity;
    if (!want)
        return fail(q, 400, "Bad Request: %s needs a name or an identity", q->op);
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(q->name ? l->v[i].name : l->v[i].identity, want) == 0)
            return (int)i;
    return fail(q, 404, "Not Found: no %s with %s '%.200s'", t->full,
                q->name ? "name" : "identity", want);
}

static int op_delete(mgmt_node_t *m, mgmt_req_t *q)
{
    const mgmt_type_t *t = target_type(q, true);
    if (!t)
        return -1;
    const char *full = t->full;
    if (t->kind == MGMT_K_STATS &&
        (strcmp(t->name, "router") == 0 || strcmp(t->name, "connection") == 0))
        return fail(q, 403, "Forbidden: DELETE of %s%s", full,
                    strcmp(t->name, "connection") == 0
                        ? " (UPDATE its adminStatus to 'deleted' to close it)"
                        : "");
    if (!mgmt_type_has_op(t, "DELETE"))
        return fail(q, 501, "Not Implemented: operation DELETE is not implemented for %s", full);
    if (t->kind == MGMT_K_VHOST)
        return delete_vhost(m, q, t);
    if (t->kind == MGMT_K_AUTOLINK && m->hooks.autolink_del) {
        mgmt_rows_t *r = rows_new(m, t);
        long long id = find_row(q, t, r) ? row_identity(r) : -1;
        mgmt_rows_free(r);
        if (id < 0)
            return -1; /* find_row() answered */
        if (m->hooks.autolink_del(m->hooks.ctx, (uint32_t)id) != 0)
            return fail(q, 404, "Not Found: no %s with identity '%lld'", full, id);
        return ok(q, 204, false);
    }
    if (t->kind == MGMT_K_EMPTY || t->kind == MGMT_K_AUTOLINK || t->kind == MGMT_K_RNODE) {
        const char *want = q->name ? q->name : q->identity;
        return fail(q, 404, "Not Found: no %s with %s '%.200s'", full,
                    q->name ? "name" : "identity", want ? want : "");
    }
    if (t->kind == MGMT_K_SSL_PROFILE) {
        const char *name = ssl_target(q);
        char        err[512];
        if (!name)
            return fail(q, 400, "Bad Request: DELETE needs a name or an identity");
        if (!m->hooks.tls)
            return fail(q, 404, "Not Found: no %s with name '%.200s'", full, name);
        int st = mgmt_ssl_delete(m->hooks.tls, name, err, sizeof(err));
        return st ? ssl_status(q, st == 409 ? 400 : st, err) : ok(q, 204, false);
    }
    mgmt_rec_list_t *l = t->kind == MGMT_K_LISTENER     ? &m->listeners
                         : t->kind == MGMT_K_CONNECTOR  ? &m->connectors
                         : t->kind == MGMT_K_LINK_ROUTE ? &m->link_routes
                                                        : &m->addresses;
    int              i = find_rec(q, t, l);
    if (i < 0)
        return -1;
    if (t->kind == MGMT_K_LINK_ROUTE) {
        if (m->hooks.link_route_del)
            m->hooks.link_route_del(m->hooks.ctx, l->v[i].cfg);
    } else if (t->kind == MGMT_K_CONNECTOR) {
        if (m->hooks.connector_del)
            m->hooks.connector_del(m->hooks.ctx, l->v[i].id);
        const cfg_connector_t *cn = l->v[i].cfg;
        if (cn->conn.ssl_profile && m->hooks.tls && m->hooks.tls->release_client)
            m->hooks.tls->release_client(m->hooks.tls->ctx, cn->conn.ssl_profile);
    } else if (t->kind == MGMT_K_LISTENER) {
        if (m->hooks.listener_del)
            m->hooks.listener_del(m->hooks.ctx, l->v[i].id);
        const cfg_listener_t *lc = l->v[i].cfg;
        if (lc->ssl_profile && m->hooks.tls) /* the profile may go once no listener names it */
            m->hooks.tls->release(m->hooks.tls->ctx, lc->ssl_profile);
    } else if (m->hooks.address_del) {
        m->hooks.address_del(m->hooks.ctx, l->v[i].cfg);
    }
    mgmt_rec_del(l, (size_t)i);
    return ok(q, 204, false);
}

static int update_log(mgmt_node_t *m, mgmt_req_t *q, const mgmt_type_t *t, const mgmt_enc_t *e)
{
    /* the module from name/identity "log/<MODULE>" (or the body's module) */
    const char  *want = q->name ? q->name : q->identity;
    const cJSON *bm = q->body ? cJSON_GetObjectItemCaseSensitive(q->body, "module") : NULL;
    const char  *mod_name = want && strncmp(want, "log/", 4) == 0 ? want + 4
                            : cJSON_IsString(bm)                 ? bm->valuestring
                                                                 : want;
    int          mod = mod_name ? base_log_module_find(mod_name) : -1;
    if (mod < 0)
        return fail(q, 404, "Not Found: no log with %s '%.200s'", q->name ? "name" : "identity",
                    want ? want : "");
    const cJSON *x;
    uint8_t      mask = 0;
    bool         set_mask = false;
    cJSON_ArrayForEach(x, q->body)
    {
        const char *k = x->string;
        if (strcmp(k, "name") == 0 || strcmp(k, "identity") == 0 || strcmp(k, "type") == 0 ||
            strcmp(k, "module") == 0)
            continue;
        if (strcmp(k, "enable") == 0) {
            if (!cJSON_IsString(x) || base_log_parse_enable(x->valuestring, &mask) != 0)
                return fail(q, 400, "Bad Request: enable: expected levels such as 'info+' or "
                                    "'trace,debug,warning+' or 'none'");
            set_mask = true;
            continue;
        }
        return fail(q, 400, "Bad Request: attribute '%.100s' of log cannot be updated at run "
                            "time", k);
    }
    if (set_mask) {
        base_log_update_module((base_log_module_t)mod, mask);
        base_log(BASE_LOG_MOD_AGENT, BASE_LOG_INFO, "Log module %s: enable %s",
                 base_log_module_name((base_log_module_t)mod),
                 cJSON_GetObjectItemCaseSensitive(q->body, "enable")->valuestring);
    }
    mgmt_rows_t *r = rows_new(m, t);
    seek_row(r, (size_t)mod);
    ok(q, 200, true);
    write_row_map(e, r, NULL, 0);
    mgmt_rows_free(r);
    return 0;
}

/* The connection of link `link_id` (its router.link row's connectionId), or 0. */
static uint64_t link_conn(mgmt_node_t *m, uint64_t link_id)
{
    const mgmt_type_t *lt = mgmt_type_find("router.link");
    if (!lt)
        return 0;
    mgmt_rows_t *r = rows_new(m, lt);
    int          ci = mgmt_rows_col_find(r, "identity");
    int          cc = mgmt_rows_col_find(r, "connectionId");
    uint64_t     conn = 0;
    while (ci >= 0 && cc >= 0 && !conn && mgmt_rows_next(r)) {
        mgmt_val_t v;
        mgmt_rows_get(r, (unsigned)ci, &v);
        if (v.t != MGMT_V_STR || strtoull(v.s, NULL, 10) != link_id)
            continue;
        mgmt_rows_get(r, (unsigned)cc, &v);
        conn = v.t == MGMT_V_STR ? strtoull(v.s, NULL, 10)
               : v.t == MGMT_V_INT ? (uint64_t)v.i
               : v.t == MGMT_V_UINT ? v.u : 0;
    }
    mgmt_rows_free(r);
    return conn;
}

static int update_connection(mgmt_node_t *m, mgmt_req_t *q, const mgmt_type_t *t,
                             const mgmt_enc_t *e)
{
    const cJSON *x;
    const char  *status = NULL;
    cJSON_ArrayForEach(x, q->body)
    {
        const char *k = x->string;
        if (strcmp(k, "name") == 0 || strcmp(k, "identity") == 0 || strcmp(k, "type") == 0)
            continue;
        if (strcmp(k, "adminStatus") == 0 && cJSON_IsString(x) &&
            (strcmp(x->valuestring, "deleted") == 0 || strcmp(x->valuestring, "enabled") == 0)) {
            status = x->valuestring;
            continue;
        }
        if (strcmp(k, "adminStatus") == 0)
            return fail(q, 400, "Bad Request: adminStatus: expected 'enabled' or 'deleted'");
        return fail(q, 400, "Bad Request: attribute '%.100s' of connection cannot be updated", k);
    }
    if (!q->name && !q->identity)
        return fail(q, 400, "Bad Request: UPDATE needs a name or an identity");
    mgmt_rows_t *r = rows_new(m, t);
    if (!find_row(q, t, r)) {
        mgmt_rows_free(r);
        return -1;
    }
    over_t over[2] = {{"adminStatus", "deleted"}, {"operStatus", "closing"}};
    size_t nover = 0;
    if (status && m->hooks.policy && q->from_link &&
        !rtr_policy_admin_status_allowed(m->hooks.policy, link_conn(m, q->from_link))) {
        /* vhost policy: the asking connection's group has allowAdminStatusUpdate false */
        mgmt_rows_free(r);
        return fail(q, 403, "You are not allowed to perform this operation.");
    }
    if (status && strcmp(status, "deleted") == 0) {
        mgmt_val_t id;
        int        col = mgmt_rows_col_find(r, "identity");
        if (col >= 0)
            mgmt_rows_get(r, (unsigned)col, &id);
        uint64_t cid = col >= 0 && id.t == MGMT_V_STR ? strtoull(id.s, NULL, 10) : 0;
        if (cid && m->hooks.conn_close)
            m->hooks.conn_close(m->hooks.ctx, cid);
        nover = 2;
    }
    ok(q, 200, true);
    write_row_map(e, r, over, nover);
    mgmt_rows_free(r);
    return 0;
}

static int op_update(mgmt_node_t *m, mgmt_req_t *q, const mgmt_enc_t *e)
{
    const mgmt_type_t *t = target_type(q, true);
    if (!t)
        return -1;
    if (q->body && !cJSON_IsObject(q->body))
        return fail(q, 400, "Bad Request: the UPDATE body must be a map of attributes");
    if (t->kind == MGMT_K_LOG)
        return update_log(m, q, t, e);
    if (t->kind == MGMT_K_SSL_PROFILE) {
        const char *name = ssl_target(q);
        char        err[512];
        if (!name)
            return fail(q, 400, "Bad Request: UPDATE needs a name or an identity");
        if (!m->hooks.tls)
            return fail(q, 404, "Not Found: no %s with name '%.200s'", t->full, name);
        int st = mgmt_ssl_update(m->hooks.tls, name, q->body, err, sizeof(err));
        return st ? ssl_status(q, st, err) : ssl_reply(m, q, t, e, name, 200);
    }
    if (t->kind == MGMT_K_STATS && strcmp(t->name, "connection") == 0)
        return update_connection(m, q, t, e);
    if (t->kind == MGMT_K_VHOST)
        return update_vhost(m, q, t, e);
    if (t->kind == MGMT_K_STATS && strcmp(t->name, "router") == 0) {
        /* qdrouterd answers 200 and changes nothing; an attribute that would not change is
         * refused here rather than reported as done */
        const cJSON *x;
        cJSON_ArrayForEach(x, q->body)
        {
            const char *k = x->string;
            if (strcmp(k, "name") != 0 && strcmp(k, "identity") != 0 && strcmp(k, "type") != 0)
                return fail(q, 400, "Bad Request: attribute '%.100s' of router cannot be updated "
                                    "at run time", k);
        }
        return op_read(m, q, e);
    }
    return fail(q, 501, "Not Implemented: operation UPDATE is not implemented for %s", t->full);
}

/* ---------------------------------------------------------------------------------------
 * The node's own operations
 * ------------------------------------------------------------------------------------- */

typedef enum get_what {
    GET_TYPES = 0,  /* base types */
    GET_OPERATIONS, /* operations */
    GET_ATTRIBUTES, /* attribute names */
} get_what_t;

/* GET-TYPES / GET-OPERATIONS / GET-ATTRIBUTES: a map full type name -> list. */
static int op_get_map(mgmt_node_t *n, mgmt_req_t *q, get_what_t what, const mgmt_enc_t *e)
{
    const mgmt_type_t *only = NULL;
    if (q->entity_type) {
        only = mgmt_type_find(q->entity_type);
        if (!only)
            return fail(q, 404, "Not Found: unknown entity type '%.200s'", q->entity_type);
    }
    ok(q, 200, true);
    e->map(e->ctx);
    for (size_t i = 0; i < mgmt_ntypes; i++) {
        const mgmt_type_t *t = &mgmt_types[i];
        if (only && t != only)
            continue;
        put_str(e, t->full);
        e->list(e->ctx);
        if (what == GET_TYPES) {
            if (t->kind != MGMT_K_NODE) {
                char base[128];
                snprintf(base, sizeof(base), "%s.%s", MGMT_PREFIX, t->extends);
                put_str(e, base);
                put_str(e, MGMT_PREFIX ".entity");
            }
        } else if (what == GET_OPERATIONS) {
            for (const char *p = t->ops; *p;) {
                const char *c = strchr(p, ',');
                size_t      len = c ? (size_t)(c - p) : strlen(p);
                char       *op = base_strndup(p, len);
                put_str(e, op);
                free(op);
                if (!c)
                    break;
                p = c + 1;
            }
        } else {
            mgmt_rows_t *r = mgmt_rows_new(t, n->reg, &n->info, NULL);
            for (unsigned k = 0; k < mgmt_rows_ncols(r); k++)
                put_str(e, mgmt_rows_col_name(r, k));
            mgmt_rows_free(r);
        }
        e->end(e->ctx);
    }
    e->end(e->ctx);
    return 0;
}

static int op_get_log(mgmt_req_t *q, const mgmt_enc_t *enc)
{
    base_log_entry_t *v = base_malloc(BASE_LOG_RING * sizeof(*v));
    size_t n = base_log_recent(v, BASE_LOG_RING);
    size_t first = 0;
    if (q->limit >= 0 && (size_t)q->limit < n)
        first = n - (size_t)q->limit;
    cJSON *list = cJSON_CreateArray();
    for (size_t i = first; i < n; i++) {
        cJSON *e = cJSON_CreateArray();
        cJSON_AddItemToArray(e, cJSON_CreateString(base_log_module_name(v[i].module)));
        cJSON_AddItemToArray(e, cJSON_CreateString(base_log_level_name(v[i].level)));
        cJSON_AddItemToArray(e, cJSON_CreateString(v[i].text));
        const char *file = v[i].file;
        while (file && strncmp(file, "../", 3) == 0)
            file += 3; /* meson builds in a subdirectory */
        cJSON_AddItemToArray(e, file ? cJSON_CreateString(file) : cJSON_CreateNull());
        cJSON_AddItemToArray(e, cJSON_CreateNumber(v[i].line));
        cJSON_AddItemToArray(e, cJSON_CreateNumber(floor(v[i].time)));
        cJSON_AddItemToArray(list, e);
    }
    free(v);
    ok(q, 200, true);
    enc->tree(enc->ctx, list);
    cJSON_Delete(list);
    return 0;
}


/* GET-MGMT-NODES: the management node of every router of the network, this one included,
 * as qdrouterd 1.19 lists them (its router.node rows, "amqp:/_topo/0/<id>/$management");
 * none when standalone.
 * qdstat and qdmanage send to one of them to manage another router through this one. */
static void op_get_mgmt_nodes(mgmt_node_t *n, mgmt_req_t *q, const mgmt_enc_t *e)
{
    size_t           nr = 0;
    core_node_row_t *rows = n->hooks.node_rows ? n->hooks.node_rows(n->hooks.ctx, &nr) : NULL;
    ok(q, 200, true);
    e->list(e->ctx);
    for (size_t i = 0; i < nr; i++) {
        char addr[320];
        snprintf(addr, sizeof(addr), "amqp:/_topo/0/%.250s/$management", rows[i].id);
        put_str(e, addr);
    }
    e->end(e->ctx);
    if (rows)
        n->hooks.node_rows_free(rows, nr);
}

void mgmt_ops_run(mgmt_node_t *n, mgmt_req_t *q, const mgmt_enc_t *e)
{
    const char *op = q->op;
    if (strcmp(op, "QUERY") == 0) {
        op_query(n, q, e);
    } else if (strcmp(op, "READ") == 0) {
        op_read(n, q, e);
    } else if (strcmp(op, "CREATE") == 0) {
        op_create(n, q, e);
    } else if (strcmp(op, "UPDATE") == 0) {
        op_update(n, q, e);
    } else if (strcmp(op, "DELETE") == 0) {
        op_delete(n, q);
    } else if (strcmp(op, "GET-TYPES") == 0) {
        op_get_map(n, q, GET_TYPES, e);
    } else if (strcmp(op, "GET-OPERATIONS") == 0) {
        op_get_map(n, q, GET_OPERATIONS, e);
    } else if (strcmp(op, "GET-ATTRIBUTES") == 0) {
        op_get_map(n, q, GET_ATTRIBUTES, e);
    } else if (strcmp(op, "GET-ANNOTATIONS") == 0) {
        ok(q, 200, true);
        e->map(e->ctx);
        e->end(e->ctx);
    } else if (strcmp(op, "GET-MGMT-NODES") == 0) {
        op_get_mgmt_nodes(n, q, e);
    } else if (strcmp(op, "GET-SCHEMA") == 0) {
        cJSON *s = mgmt_schema_json(n->reg);
        ok(q, 200, true);
        e->tree(e->ctx, s);
        cJSON_Delete(s);
    } else if (strcmp(op, "GET-JSON-SCHEMA") == 0) {
        cJSON *s = mgmt_schema_json(n->reg);
        char  *text = q->indent > 0 ? cJSON_Print(s) : cJSON_PrintUnformatted(s);
        cJSON_Delete(s);
        ok(q, 200, true);
        put_str(e, text);
        free(text);
    } else if (strcmp(op, "GET-LOG") == 0) {
        op_get_log(q, e);
    } else {
        fail(q, 501, "Not Implemented: unknown operation '%.100s'", op);
    }
}
