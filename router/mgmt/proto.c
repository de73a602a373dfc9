/* router/mgmt/proto.c: the management socket's protocol as a pure function - one request
 * line in, reply lines out - for every transport of the admin thread (the socket, the
 * WebSocket `junction-mgmt` subprotocol: sess.c) and for tests.  This file holds the
 * session, its lines, the request dispatch and entity.query (rows from rows.c, written as
 * JSON text as they are produced); the stats.* operations are in proto_stats.c.  The
 * protocol is described in mgmt.h.
 *
 * What it owns: a session per client - its streamed reply in progress (one walk at most),
 * its stats.list cursor, its subscriptions with the last value each client was sent.  It
 * does no I/O: every line goes out through the caller's write callback, and the caller
 * decides when a subscriber is too slow (the callback refuses the line with -EAGAIN and
 * the session sends the latest values next time instead).  Requests are parsed with cJSON;
 * nothing here logs, errors become error replies.
 *
 * Threads: a session is used by one thread at a time (the admin thread's loop); sessions on
 * different threads are independent.
 */
#include "router/mgmt/mgmt_int.h"

#include "core/base/base.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

// clang-format off
#define CHUNK_ROWS  128         /* rows per entity.query line */
#define CHUNK_BYTES (32u << 10) /* a streamed line ends once it is this long */
// clang-format on

static const char *const op_names[] = {
    "stats.list", "stats.get", "stats.snapshot", "stats.subscribe", "stats.unsubscribe",
    "entity.query", "sslProfile.list", "sslProfile.create", "sslProfile.update",
    "sslProfile.delete",
};

static char *dup_or(const char *s, const char *dflt)
{
    return base_strdup(s ? s : dflt);
}

mgmt_proto_t *mgmt_proto_new(stats_registry_t *r, const mgmt_info_t *info)
{
    mgmt_proto_t *m = base_calloc(1, sizeof(*m));
    m->_reg = r;
    m->_product = dup_or(info ? info->product : NULL, "junction");
    m->_version = dup_or(info ? info->version : NULL, "");
    m->_router_id = dup_or(info ? info->router_id : NULL, "");
    m->_mode = dup_or(info ? info->mode : NULL, "standalone");
    m->_info.product = m->_product;
    m->_info.version = m->_version;
    m->_info.router_id = m->_router_id;
    m->_info.mode = m->_mode;
    return m;
}

void mgmt_proto_set_tls(mgmt_proto_t *m, const mgmt_tls_t *tls)
{
    m->_tls = tls;
}

static void stream_end(mgmt_stream_t *st)
{
    stats_iter_free(st->it);
    mgmt_rows_free(st->rows);
    free(st->id);
    free(st->cols);
    memset(st, 0, sizeof(*st));
}

void mgmt__list_end(mgmt_proto_t *m)
{
    stats_iter_free(m->_list_it);
    m->_list_it = NULL;
    BASE_FREE(m->_list_glob);
    m->_list_pending = NULL;
    m->_list_pos = 0;
}

void mgmt__sub_free(mgmt_sub_t *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->ents[i].name);
    free(s->ents);
    base_map_fini(&s->index);
    free(s->glob);
    free(s);
}

void mgmt_proto_free(mgmt_proto_t *m)
{
    if (!m)
        return;
    stream_end(&m->_stream);
    mgmt__list_end(m);
    for (unsigned i = 0; i < MGMT_PROTO_MAX_SUBS; i++)
        mgmt__sub_free(m->_subs[i]);
    free(m->_line.p);
    free(m->_product);
    free(m->_version);
    free(m->_router_id);
    free(m->_mode);
    free(m);
}

int mgmt__line_send(mgmt_proto_t *m, stats_write_fn write, void *ctx)
{
    mgmt_jb_c(&m->_line, '\n');
    int rc = write(ctx, m->_line.p, m->_line.n);
    m->_line.n = 0;
    return rc;
}

void mgmt__line_start(mgmt_proto_t *m, const char *id)
{
    m->_line.n = 0;
    mgmt_jb_lit(&m->_line, "{\"id\":");
    mgmt_jb_lit(&m->_line, id ? id : "null");
    mgmt_jb_c(&m->_line, ',');
}

static int send_error(mgmt_proto_t *m, const char *id, int code, const char *msg,
                      stats_write_fn write, void *ctx)
{
    mgmt__line_start(m, id);
    mgmt_jb_lit(&m->_line, "\"error\":{\"code\":");
    mgmt_jb_i64(&m->_line, code);
    mgmt_jb_lit(&m->_line, ",\"message\":");
    mgmt_jb_str(&m->_line, msg);
    mgmt_jb_lit(&m->_line, "}}");
    return mgmt__line_send(m, write, ctx);
}

int mgmt_proto_error(stats_write_fn write, void *ctx, int code, const char *message)
{
    mgmt_jbuf_t b = {0};
    mgmt_jb_lit(&b, "{\"id\":null,\"error\":{\"code\":");
    mgmt_jb_i64(&b, code);
    mgmt_jb_lit(&b, ",\"message\":");
    mgmt_jb_str(&b, message ? message : "");
    mgmt_jb_lit(&b, "}}\n");
    int rc = write(ctx, b.p, b.n);
    free(b.p);
    return rc;
}

int mgmt_proto_hello(mgmt_proto_t *m, stats_write_fn write, void *ctx)
{
    mgmt_jbuf_t *b = &m->_line;
    b->n = 0;
    mgmt_jb_lit(b, "{\"hello\":{\"product\":");
    mgmt_jb_str(b, m->_product);
    mgmt_jb_lit(b, ",\"version\":");
    mgmt_jb_str(b, m->_version);
    mgmt_jb_lit(b, ",\"router_id\":");
    mgmt_jb_str(b, m->_router_id);
    mgmt_jb_lit(b, ",\"mode\":");
    mgmt_jb_str(b, m->_mode);
    mgmt_jb_lit(b, ",\"protocol\":");
    mgmt_jb_u64(b, MGMT_PROTO_PROTOCOL);
    mgmt_jb_lit(b, ",\"max_line\":");
    mgmt_jb_u64(b, MGMT_PROTO_LINE_MAX);
    mgmt_jb_lit(b, ",\"ops\":[");
    for (size_t i = 0; i < BASE_ARRAY_LEN(op_names); i++) {
        if (i)
            mgmt_jb_c(b, ',');
        mgmt_jb_str(b, op_names[i]);
    }
    mgmt_jb_lit(b, "]}}");
    return mgmt__line_send(m, write, ctx);
}

/* ---------------------------------------------------------------------------------------
 * Request arguments
 * ------------------------------------------------------------------------------------- */

int mgmt__bad_arg(const mgmt_preq_t *q, int code, const char *fmt, ...)
{
    char    msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return send_error(q->m, q->id, code, msg, q->write, q->ctx);
}

int mgmt__arg_str(const mgmt_preq_t *q, const char *key, const char *dflt, const char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(q->json, key);
    *out = dflt;
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsString(v) || !v->valuestring)
        return -1;
    *out = v->valuestring;
    return 0;
}

int mgmt__arg_int(const mgmt_preq_t *q, const char *key, long long min, long long max,
                  long long dflt, long long *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(q->json, key);
    *out = dflt;
    if (!v || cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble < (double)min || v->valuedouble > (double)max)
        return -1;
    *out = (long long)v->valuedouble;
    return 0;
}

int mgmt__arg_glob(const mgmt_preq_t *q, const char *key, bool required, const char **out)
{
    if (mgmt__arg_str(q, key, required ? NULL : "*", out) < 0 || (required && !*out) ||
        (*out && !**out))
        return -1;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * Streams: entity.query here, stats.snapshot in proto_stats.c
 * ------------------------------------------------------------------------------------- */

/* One entity.query line; true when it was the last. */
static bool query_chunk(mgmt_proto_t *m)
{
    mgmt_stream_t *st = &m->_stream;
    mgmt_jbuf_t   *b = &m->_line;
    mgmt_jb_lit(b, "\"result\":{\"type\":");
    mgmt_jb_str(b, st->type->full);
    mgmt_jb_lit(b, ",\"attributeNames\":[");
    for (unsigned i = 0; i < st->ncols; i++) {
        if (i)
            mgmt_jb_c(b, ',');
        mgmt_jb_str(b, mgmt_rows_col_name(st->rows, st->cols[i]));
    }
    mgmt_jb_lit(b, "],\"results\":[");
    unsigned nrows = 0;
    bool     done;
    for (;;) {
        if (st->left == 0) {
            done = true;
            break;
        }
        if (nrows >= CHUNK_ROWS || b->n >= CHUNK_BYTES) {
            done = false;
            break;
        }
        if (!mgmt_rows_next(st->rows)) {
            done = true;
            break;
        }
        if (st->skip) {
            st->skip--;
        } else {
            if (st->left != UINT64_MAX)
                st->left--;
            if (nrows++)
                mgmt_jb_c(b, ',');
            mgmt_jb_c(b, '[');
            for (unsigned i = 0; i < st->ncols; i++) {
                mgmt_val_t v;
                if (i)
                    mgmt_jb_c(b, ',');
                mgmt_rows_get(st->rows, st->cols[i], &v);
                mgmt_jb_val(b, &v);
            }
            mgmt_jb_c(b, ']');
        }
        if (mgmt_rows_at_end(st->rows)) {
            done = true;
            break;
        }
    }
    mgmt_jb_lit(b, "]}");
    return done;
}

int mgmt__stream_chunk(mgmt_proto_t *m, stats_write_fn write, void *ctx)
{
    mgmt_stream_t *st = &m->_stream;
    mgmt__line_start(m, st->id);
    bool last = st->kind == MGMT_STREAM_SNAPSHOT ? mgmt__snapshot_chunk(m) : query_chunk(m);
    mgmt_jb_lit(&m->_line, last ? ",\"more\":false}" : ",\"more\":true}");
    int rc = mgmt__line_send(m, write, ctx);
    if (last)
        stream_end(st);
    return rc;
}

static int op_query(const mgmt_preq_t *q)
{
    mgmt_proto_t *m = q->m;
    const char   *type;
    long long     offset, count;
    if (mgmt__arg_str(q, "type", NULL, &type) < 0 || !type)
        return mgmt__bad_arg(q, 400, "argument 'type': expected one of router, connection, "
                                     "link, address, allocator");
    const mgmt_type_t *t = mgmt_type_find_stats(type);
    if (!t)
        return mgmt__bad_arg(q, 404, "argument 'type': unknown entity type '%.100s' (expected "
                                     "one of router, connection, link, address, allocator)",
                             type);
    if (mgmt__arg_int(q, "offset", 0, INT64_MAX / 2, 0, &offset) < 0)
        return mgmt__bad_arg(q, 400, "argument 'offset': expected an integer >= 0");
    if (mgmt__arg_int(q, "count", 0, INT64_MAX / 2, -1, &count) < 0)
        return mgmt__bad_arg(q, 400, "argument 'count': expected an integer >= 0");

    mgmt_rows_t *rows = mgmt_rows_new(t, m->_reg, &m->_info, NULL);
    unsigned     ncols = mgmt_rows_ncols(rows);
    unsigned    *cols;
    /* attributeNames: only these columns, in this order (qdrouterd's QUERY) */
    const cJSON *names = cJSON_GetObjectItemCaseSensitive(q->json, "attributeNames");
    int          n = 0;
    if (names && !cJSON_IsNull(names)) {
        n = cJSON_IsArray(names) ? cJSON_GetArraySize(names) : -1;
        if (n < 0) {
            mgmt_rows_free(rows);
            return mgmt__bad_arg(q, 400, "argument 'attributeNames': expected a list of "
                                         "strings");
        }
    }
    if (n > 0) {
        cols = base_calloc((size_t)n, sizeof(*cols));
        const cJSON *e;
        unsigned     k = 0;
        cJSON_ArrayForEach(e, names)
        {
            int j = cJSON_IsString(e) && e->valuestring ? mgmt_rows_col_find(rows, e->valuestring)
                                                        : -1;
            if (j < 0) {
                int rc = cJSON_IsString(e) && e->valuestring
                             ? mgmt__bad_arg(q, 404,
                                             "argument 'attributeNames': '%.100s' is not an "
                                             "attribute of %s",
                                             e->valuestring, t->full)
                             : mgmt__bad_arg(q, 400, "argument 'attributeNames': expected a "
                                                     "list of strings");
                free(cols);
                mgmt_rows_free(rows);
                return rc;
            }
            cols[k++] = (unsigned)j;
        }
        ncols = k;
    } else {
        cols = base_calloc(ncols + 1, sizeof(*cols));
        for (unsigned i = 0; i < ncols; i++)
            cols[i] = i;
    }

    mgmt_stream_t *st = &m->_stream;
    st->kind = MGMT_STREAM_QUERY;
    st->id = base_strdup(q->id);
    st->type = t;
    st->rows = rows;
    st->cols = cols;
    st->ncols = ncols;
    st->skip = (uint64_t)offset;
    st->left = count < 0 ? UINT64_MAX : (uint64_t)count;
    return mgmt__stream_chunk(m, q->write, q->ctx);
}

bool mgmt_proto_is_streaming(const mgmt_proto_t *m)
{
    return m->_stream.kind != MGMT_STREAM_NONE;
}

int mgmt_proto_resume(mgmt_proto_t *m, stats_write_fn write, void *ctx)
{
    if (m->_stream.kind == MGMT_STREAM_NONE)
        return 0;
    return mgmt__stream_chunk(m, write, ctx);
}

/* ---------------------------------------------------------------------------------------
 * One request line
 * ------------------------------------------------------------------------------------- */

typedef struct op {
    const char *name;                /* "stats.get" */
    int (*fn)(const mgmt_preq_t *q); /* answers it */
    bool        streams;             /* may leave a streamed reply in progress */
} op_t;

static const op_t ops[] = {
    {"stats.list", mgmt__op_list, false},
    {"stats.get", mgmt__op_get, false},
    {"stats.snapshot", mgmt__op_snapshot, true},
    {"stats.subscribe", mgmt__op_subscribe, false},
    {"stats.unsubscribe", mgmt__op_unsubscribe, false},
    {"entity.query", op_query, true},
    {"sslProfile.list", mgmt__op_ssl_list, false},
    {"sslProfile.create", mgmt__op_ssl_create, false},
    {"sslProfile.update", mgmt__op_ssl_update, false},
    {"sslProfile.delete", mgmt__op_ssl_delete, false},
};
_Static_assert(BASE_ARRAY_LEN(ops) == BASE_ARRAY_LEN(op_names), "ops and op_names agree");

/* The id as JSON text: a number or a string.  NULL when it is neither. */
static char *id_text(const cJSON *id)
{
    mgmt_jbuf_t b = {0};
    if (cJSON_IsString(id) && id->valuestring) {
        mgmt_jb_str(&b, id->valuestring);
    } else if (cJSON_IsNumber(id) && isfinite(id->valuedouble)) {
        double d = id->valuedouble;
        if (d == floor(d) && fabs(d) < 9007199254740992.0)
            mgmt_jb_i64(&b, (int64_t)d);
        else
            mgmt_jb_double(&b, d);
    } else {
        return NULL;
    }
    mgmt_jb_c(&b, '\0');
    return b.p;
}

int mgmt_proto_handle(mgmt_proto_t *m, const char *line, size_t len, stats_write_fn write,
                      void *ctx)
{
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        len--;
    size_t blank = 0;
    while (blank < len && (line[blank] == ' ' || line[blank] == '\t'))
        blank++;
    if (blank == len)
        return 0; /* an empty line asks nothing */
    if (len > MGMT_PROTO_LINE_MAX) {
        char msg[96];
        snprintf(msg, sizeof(msg), "request line longer than %u bytes", MGMT_PROTO_LINE_MAX);
        return send_error(m, NULL, 413, msg, write, ctx);
    }
    for (size_t i = 0; i < len;) {
        const unsigned char *u = (const unsigned char *)line + i;
        size_t               k = *u < 0x80 ? (*u ? 1 : 0) : mgmt_utf8_len(u, len - i);
        if (!k) {
            char msg[96];
            snprintf(msg, sizeof(msg), "malformed request: %s at byte %zu",
                     *u ? "not UTF-8" : "a NUL byte", i);
            return send_error(m, NULL, 400, msg, write, ctx);
        }
        i += k;
    }
    const char *end = NULL;
    cJSON      *json = cJSON_ParseWithLengthOpts(line, len, &end, false);
    if (json && end) {
        while (end < line + len && (*end == ' ' || *end == '\t'))
            end++;
        if (end != line + len) {
            cJSON_Delete(json);
            return send_error(m, NULL, 400, "malformed request: text after the JSON object",
                              write, ctx);
        }
    }
    if (!json) {
        char   msg[128];
        size_t at = end && end >= line && end <= line + len ? (size_t)(end - line) : 0;
        snprintf(msg, sizeof(msg), "malformed request: not valid JSON (at byte %zu)", at);
        return send_error(m, NULL, 400, msg, write, ctx);
    }
    int rc;
    if (!cJSON_IsObject(json)) {
        rc = send_error(m, NULL, 400, "malformed request: expected a JSON object", write, ctx);
        goto out;
    }
    const cJSON *idv = cJSON_GetObjectItemCaseSensitive(json, "id");
    char        *id = idv ? id_text(idv) : NULL;
    if (!id) {
        rc = send_error(m, NULL, 400,
                        idv ? "bad request: 'id' must be a number or a string"
                            : "bad request: missing 'id'",
                        write, ctx);
        goto out;
    }
    const cJSON *opv = cJSON_GetObjectItemCaseSensitive(json, "op");
    mgmt_preq_t  q = {.m = m, .id = id, .json = json, .write = write, .ctx = ctx};
    if (!cJSON_IsString(opv) || !opv->valuestring) {
        rc = mgmt__bad_arg(&q, 400, opv ? "bad request: 'op' must be a string"
                                  : "bad request: missing 'op'");
        goto out_id;
    }
    const op_t *op = NULL;
    for (size_t i = 0; i < BASE_ARRAY_LEN(ops) && !op; i++)
        if (strcmp(opv->valuestring, ops[i].name) == 0)
            op = &ops[i];
    if (!op) {
        rc = mgmt__bad_arg(&q, 404, "unknown op '%.100s'", opv->valuestring);
    } else if (op->streams && mgmt_proto_is_streaming(m)) {
        rc = mgmt__bad_arg(&q, 409, "a streamed reply (%s) is still being sent on this connection",
                     m->_stream.kind == MGMT_STREAM_SNAPSHOT ? "stats.snapshot" : "entity.query");
    } else {
        rc = op->fn(&q);
    }
out_id:
    free(id);
out:
    cJSON_Delete(json);
    return rc;
}
