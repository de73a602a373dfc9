/* router/mgmt/amqp.c: the AMQP side of the management node - decode a request message
 * into a mgmt_req_t, run it (ops.c), encode the reply message, with the body written
 * straight into Proton's pn_data_t by the encoder the operations write through.
 *
 * Requests are decoded with Proton's pn_message_t, after codec_values_check() made sure
 * that Proton's work is bounded by the request's bytes; nothing in a request is trusted
 * (types, keys, sizes are all checked).  The body is converted to cJSON for the operations
 * (a CREATE's attributes go through the configuration parser).
 *
 * Threads: the node's (the agent thread).
 */
#include "router/mgmt/mgmt_int.h"

#include "codec/frame.h"
#include "core/base/base.h"
#include "core/base/log.h"

#include <math.h>
#include <proton/codec.h>
#include <proton/message.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

__attribute__((format(printf, 3, 4))) static int fail(mgmt_req_t *q, int status,
                                                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    mgmt_req_vfail(q, status, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- the request body: AMQP data -> JSON ---- */

/* The current value of d as JSON, or NULL when it cannot be represented (binary, described,
 * a map with a key that is not a string or symbol, nested too deep). */
static cJSON *data_to_json(pn_data_t *d, int depth)
{
    if (depth > 32)
        return NULL;
    switch (pn_data_type(d)) {
    case PN_NULL:
        return cJSON_CreateNull();
    case PN_BOOL:
        return cJSON_CreateBool(pn_data_get_bool(d));
    case PN_UBYTE:
        return cJSON_CreateNumber(pn_data_get_ubyte(d));
    case PN_BYTE:
        return cJSON_CreateNumber(pn_data_get_byte(d));
    case PN_USHORT:
        return cJSON_CreateNumber(pn_data_get_ushort(d));
    case PN_SHORT:
        return cJSON_CreateNumber(pn_data_get_short(d));
    case PN_UINT:
        return cJSON_CreateNumber(pn_data_get_uint(d));
    case PN_INT:
        return cJSON_CreateNumber(pn_data_get_int(d));
    case PN_ULONG:
        return cJSON_CreateNumber((double)pn_data_get_ulong(d));
    case PN_LONG:
        return cJSON_CreateNumber((double)pn_data_get_long(d));
    case PN_FLOAT:
        return cJSON_CreateNumber(pn_data_get_float(d));
    case PN_DOUBLE:
        return cJSON_CreateNumber(pn_data_get_double(d));
    case PN_STRING:
    case PN_SYMBOL: {
        pn_bytes_t b = pn_data_type(d) == PN_STRING ? pn_data_get_string(d)
                                                    : pn_data_get_symbol(d);
        if (memchr(b.start, '\0', b.size))
            return NULL;
        char *s = base_strndup(b.start ? b.start : "", b.size);
        cJSON *j = cJSON_CreateString(s);
        free(s);
        return j;
    }
    case PN_LIST:
    case PN_ARRAY: {
        cJSON *a = cJSON_CreateArray();
        size_t n = pn_data_type(d) == PN_LIST ? pn_data_get_list(d) : pn_data_get_array(d);
        pn_data_enter(d);
        for (size_t i = 0; i < n; i++) {
            cJSON *e = pn_data_next(d) ? data_to_json(d, depth + 1) : NULL;
            if (!e) {
                cJSON_Delete(a);
                pn_data_exit(d);
                return NULL;
            }
            cJSON_AddItemToArray(a, e);
        }
        pn_data_exit(d);
        return a;
    }
    case PN_MAP: {
        cJSON *o = cJSON_CreateObject();
        size_t n = pn_data_get_map(d);
        pn_data_enter(d);
        for (size_t i = 0; i < n; i += 2) {
            cJSON *k = pn_data_next(d) ? data_to_json(d, depth + 1) : NULL;
            cJSON *v = k && cJSON_IsString(k) && pn_data_next(d) ? data_to_json(d, depth + 1)
                                                                 : NULL;
            if (!v) {
                cJSON_Delete(k);
                cJSON_Delete(o);
                pn_data_exit(d);
                return NULL;
            }
            cJSON_AddItemToObject(o, k->valuestring, v);
            cJSON_Delete(k);
        }
        pn_data_exit(d);
        return o;
    }
    default:
        return NULL;
    }
}

static void json_to_data(pn_data_t *d, const cJSON *v)
{
    if (cJSON_IsBool(v)) {
        pn_data_put_bool(d, cJSON_IsTrue(v));
    } else if (cJSON_IsNumber(v)) {
        double x = v->valuedouble;
        if (x == floor(x) && fabs(x) < 9.2e18)
            pn_data_put_long(d, (int64_t)x);
        else
            pn_data_put_double(d, x);
    } else if (cJSON_IsString(v)) {
        pn_data_put_string(d, pn_bytes(strlen(v->valuestring), v->valuestring));
    } else if (cJSON_IsArray(v)) {
        pn_data_put_list(d);
        pn_data_enter(d);
        const cJSON *e;
        cJSON_ArrayForEach(e, v) json_to_data(d, e);
        pn_data_exit(d);
    } else if (cJSON_IsObject(v)) {
        pn_data_put_map(d);
        pn_data_enter(d);
        const cJSON *e;
        cJSON_ArrayForEach(e, v)
        {
            pn_data_put_string(d, pn_bytes(strlen(e->string), e->string));
            json_to_data(d, e);
        }
        pn_data_exit(d);
    } else {
        pn_data_put_null(d);
    }
}


/* ---- the reply body: the operations' encoder on pn_data_t ---- */

typedef struct enc {
    pn_data_t *d; /* the reply's body */
} enc_t;

/* A string; bytes that are not UTF-8 become U+FFFD (as the socket's JSON has them). */
static void put_string(pn_data_t *d, const char *s)
{
    size_t n = strlen(s);
    size_t i = 0;
    while (i < n) {
        const unsigned char *u = (const unsigned char *)s + i;
        size_t               k = *u < 0x80 ? 1 : mgmt_utf8_len(u, n - i);
        if (!k)
            break;
        i += k;
    }
    if (i == n) {
        pn_data_put_string(d, pn_bytes(n, s));
        return;
    }
    mgmt_jbuf_t b = {0};
    for (i = 0; i < n;) {
        const unsigned char *u = (const unsigned char *)s + i;
        size_t               k = *u < 0x80 ? 1 : mgmt_utf8_len(u, n - i);
        if (k) {
            mgmt_jb_raw(&b, s + i, k);
            i += k;
        } else {
            mgmt_jb_lit(&b, "\xef\xbf\xbd");
            i++;
        }
    }
    pn_data_put_string(d, pn_bytes(b.n, b.p));
    free(b.p);
}

static void enc_map(void *ctx)
{
    enc_t *e = ctx;
    pn_data_put_map(e->d);
    pn_data_enter(e->d);
}

static void enc_list(void *ctx)
{
    enc_t *e = ctx;
    pn_data_put_list(e->d);
    pn_data_enter(e->d);
}

static void enc_end(void *ctx)
{
    enc_t *e = ctx;
    pn_data_exit(e->d);
}

/* Integers are longs, as qdrouterd sends them; a counter past INT64_MAX becomes a double. */
static void enc_value(void *ctx, const mgmt_val_t *v)
{
    enc_t *e = ctx;
    switch (v->t) {
    case MGMT_V_NULL:
        pn_data_put_null(e->d);
        return;
    case MGMT_V_BOOL:
        pn_data_put_bool(e->d, v->b);
        return;
    case MGMT_V_INT:
        pn_data_put_long(e->d, v->i);
        return;
    case MGMT_V_UINT:
        if (v->u <= (uint64_t)INT64_MAX)
            pn_data_put_long(e->d, (int64_t)v->u);
        else
            pn_data_put_double(e->d, (double)v->u);
        return;
    case MGMT_V_STR:
        put_string(e->d, v->s);
        return;
    case MGMT_V_JSON: {
        cJSON *j = cJSON_Parse(v->s);
        if (j)
            json_to_data(e->d, j);
        else
            pn_data_put_null(e->d);
        cJSON_Delete(j);
        return;
    }
    case MGMT_V_STRS: {
        pn_data_put_list(e->d);
        pn_data_enter(e->d);
        for (const char *p = v->s; *p;) {
            const char *comma = strchr(p, ',');
            size_t      n = comma ? (size_t)(comma - p) : strlen(p);
            char        one[256];
            snprintf(one, sizeof(one), "%.*s", (int)n, p);
            put_string(e->d, one);
            p += n + (comma ? 1 : 0);
        }
        pn_data_exit(e->d);
        return;
    }
    }
}

static void enc_tree(void *ctx, const cJSON *j)
{
    enc_t *e = ctx;
    json_to_data(e->d, j);
}

/* ---- the request and the reply ---- */

/* Read the application properties into q.  Returns 0, or -1 with a 400 set. */
static int read_props(mgmt_req_t *q, pn_data_t *p)
{
    pn_data_rewind(p);
    if (!pn_data_next(p))
        return fail(q, 400, "Bad Request: the request has no application-properties");
    if (pn_data_type(p) != PN_MAP)
        return fail(q, 400, "Bad Request: application-properties must be a map");
    size_t n = pn_data_get_map(p);
    pn_data_enter(p);
    for (size_t i = 0; i < n; i += 2) {
        if (!pn_data_next(p) || pn_data_type(p) != PN_STRING) {
            pn_data_exit(p);
            return fail(q, 400, "Bad Request: application-properties keys must be strings");
        }
        pn_bytes_t k = pn_data_get_string(p);
        if (!pn_data_next(p))
            break;
        pn_type_t vt = pn_data_type(p);
        char **dst = NULL;
        long long *num = NULL;
#define KEY(s) (k.size == strlen(s) && memcmp(k.start, s, k.size) == 0)
        if (KEY("operation"))
            dst = &q->op;
        else if (KEY("type"))
            dst = &q->type;
        else if (KEY("name"))
            dst = &q->name;
        else if (KEY("identity"))
            dst = &q->identity;
        else if (KEY("entityType"))
            dst = &q->entity_type;
        else if (KEY("offset"))
            num = &q->offset;
        else if (KEY("count"))
            num = &q->count;
        else if (KEY("limit"))
            num = &q->limit;
        else if (KEY("indent"))
            num = &q->indent;
#undef KEY
        if (dst) {
            if (vt == PN_NULL)
                continue;
            if (vt != PN_STRING && vt != PN_SYMBOL) {
                pn_data_exit(p);
                return fail(q, 400, "Bad Request: application property '%.*s' must be a string",
                            (int)(k.size > 64 ? 64 : k.size), k.start);
            }
            pn_bytes_t b = vt == PN_STRING ? pn_data_get_string(p) : pn_data_get_symbol(p);
            if (memchr(b.start, '\0', b.size)) {
                pn_data_exit(p);
                return fail(q, 400, "Bad Request: application property '%.*s' holds a NUL",
                            (int)(k.size > 64 ? 64 : k.size), k.start);
            }
            free(*dst);
            *dst = base_strndup(b.start ? b.start : "", b.size);
        } else if (num) {
            long long v;
            switch (vt) {
            case PN_NULL:
                continue;
            case PN_BYTE: v = pn_data_get_byte(p); break;
            case PN_UBYTE: v = pn_data_get_ubyte(p); break;
            case PN_SHORT: v = pn_data_get_short(p); break;
            case PN_USHORT: v = pn_data_get_ushort(p); break;
            case PN_INT: v = pn_data_get_int(p); break;
            case PN_UINT: v = pn_data_get_uint(p); break;
            case PN_LONG: v = pn_data_get_long(p); break;
            case PN_ULONG:
                v = pn_data_get_ulong(p) > (uint64_t)INT64_MAX ? INT64_MAX
                                                               : (long long)pn_data_get_ulong(p);
                break;
            default:
                pn_data_exit(p);
                return fail(q, 400, "Bad Request: application property '%.*s' must be an "
                                    "integer",
                            (int)(k.size > 64 ? 64 : k.size), k.start);
            }
            if (v < 0) {
                pn_data_exit(p);
                return fail(q, 400, "Bad Request: application property '%.*s' must not be "
                                    "negative",
                            (int)(k.size > 64 ? 64 : k.size), k.start);
            }
            *num = v;
        }
    }
    pn_data_exit(p);
    if (!q->op)
        return fail(q, 400, "Bad Request: the request has no 'operation'");
    return 0;
}

static int read_body(mgmt_req_t *q, pn_data_t *b)
{
    pn_data_rewind(b);
    if (!pn_data_next(b) || pn_data_type(b) == PN_NULL)
        return 0;
    q->body = data_to_json(b, 0);
    if (!q->body)
        return fail(q, 400, "Bad Request: the body must be a map with string keys (or a list)");
    if (cJSON_IsArray(q->body) && cJSON_GetArraySize(q->body) == 0) {
        cJSON_Delete(q->body); /* the console sends [] for "nothing" */
        q->body = NULL;
    }
    return 0;
}

static void req_clear(mgmt_req_t *q)
{
    free(q->op);
    free(q->type);
    free(q->name);
    free(q->identity);
    free(q->entity_type);
    cJSON_Delete(q->body);
}

int mgmt_amqp_handle(mgmt_node_t *m, const uint8_t *bytes, size_t len, uint8_t **out,
                     size_t *out_len, char **to, const char **why)
{
    return mgmt_amqp_handle_from(m, 0, bytes, len, out, out_len, to, why);
}

int mgmt_amqp_handle_from(mgmt_node_t *m, uint64_t from_link, const uint8_t *bytes, size_t len,
                          uint8_t **out, size_t *out_len, char **to, const char **why)
{
    pn_message_t *req = m->req, *rep = m->rep;
    *out = NULL;
    *out_len = 0;
    *to = NULL;
    pn_message_clear(req);
    /* (Proton asserts on an empty buffer) */
    if (!bytes || len == 0) {
        *why = "the request is not an AMQP message";
        return -1;
    }
    /* Proton builds one node per value, recursing per level of nesting, whatever the bytes
     * pay for: they must hold at most one value per byte and nest at most 32 deep first, the
     * rule the frame guard applies to performatives (codec/frame.h) */
    if (codec_values_check(bytes, len) != 0) {
        *why = "the request is not a well-formed AMQP message (malformed, nested more than 32 "
               "deep, or more values than bytes)";
        return -1;
    }
    if (pn_message_decode(req, (const char *)bytes, len) != 0) {
        *why = "the request is not an AMQP message";
        return -1;
    }
    const char *reply_to = pn_message_get_reply_to(req);
    if (!reply_to || !*reply_to) {
        *why = "the request has no reply-to";
        return -1;
    }

    mgmt_req_t q = {.offset = -1, .count = -1, .limit = -1, .indent = -1,
                    .from_link = from_link};
    pn_message_clear(rep);
    pn_data_t *body = pn_message_body(rep);
    enc_t      ec = {.d = body};
    mgmt_enc_t enc = {.ctx = &ec,
                      .map = enc_map,
                      .list = enc_list,
                      .end = enc_end,
                      .value = enc_value,
                      .tree = enc_tree};
    if (read_props(&q, pn_message_properties(req)) == 0 &&
        read_body(&q, pn_message_body(req)) == 0)
        mgmt_ops_run(m, &q, &enc);

    pn_message_set_address(rep, reply_to);
    pn_message_set_durable(rep, false);
    pn_message_set_correlation_id(rep, pn_message_get_correlation_id(req));
    pn_data_t *ap = pn_message_properties(rep);
    pn_data_put_map(ap);
    pn_data_enter(ap);
    pn_data_put_string(ap, pn_bytes(10, "statusCode"));
    pn_data_put_int(ap, q.status);
    pn_data_put_string(ap, pn_bytes(17, "statusDescription"));
    pn_data_put_string(ap, pn_bytes(strlen(q.desc), q.desc));
    pn_data_exit(ap);
    if (!q.wrote || q.status >= 400) {
        pn_data_clear(body); /* an error, or nothing written: an empty map */
        pn_data_put_map(body);
    }
    if (q.status >= 400)
        base_log(BASE_LOG_MOD_AGENT, BASE_LOG_DEBUG, "Management %s %s: %d %s",
                 q.op ? q.op : "?", q.type ? q.type : (q.entity_type ? q.entity_type : ""),
                 q.status, q.desc);
    req_clear(&q);

    pn_rwbytes_t buf = {0, NULL};
    ssize_t n = pn_message_encode2(rep, &buf);
    if (n < 0) {
        free(buf.start);
        *why = "the reply could not be encoded";
        return -1;
    }
    *out = (uint8_t *)buf.start;
    *out_len = (size_t)n;
    *to = base_strdup(reply_to);
    return 0;
}
