/* stats/mgmt.c: the management protocol as a pure function - one request line in, reply
 * lines out - for the management socket (router/admin.c) and anything else that wants to
 * speak it (tests, a future WebSocket endpoint).
 *
 * The protocol (newline-delimited JSON; full description in stats/stats.h, "Management
 * protocol"): every request is one line `{"id": ..., "op": "...", ...}`; every reply is one
 * line with the same id and either "result" or "error": {"code", "message"}.  Streamed
 * replies (stats.snapshot, entity.query) are several lines with the same id and "more": true
 * on all but the last.  Subscription updates are lines `{"sub": N, "values": {...}}`.
 *
 * What it owns: a session per client - its streamed reply in progress (one snapshot
 * iterator at most), its stats.list cursor, its subscriptions with the last value each
 * client was sent.  It does no I/O: every line goes out through the caller's write
 * callback, and the caller decides when a subscriber is too slow (the callback refuses the
 * line with -EAGAIN and the session sends the latest values next time instead).
 *
 * Threads: a session is used by one thread at a time (the admin thread's loop); sessions on
 * different threads are independent.  The registry calls it makes are thread-safe and hold
 * the registry's mutex only while a walk fills a batch, never between calls.
 *
 * Output is written by hand (not through cJSON) so 64-bit counters print exactly; requests
 * are parsed with cJSON.  Nothing here logs; errors become error replies.
 */
#include "stats/stats.h"

#include "core/base/base.h"
#include "core/base/map.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

// clang-format off
#define CHUNK_SAMPLES   512         /* values per stats.snapshot line */
#define CHUNK_ROWS      128         /* rows per entity.query line */
#define CHUNK_BYTES     (32u << 10) /* a streamed line ends once it is this long */
#define LIST_LIMIT_DFL  1000        /* stats.list page */
#define LIST_LIMIT_MAX  10000
#define GET_LIMIT_DFL   10000       /* stats.get values before "truncated" */
#define GET_LIMIT_MAX   100000
#define SUB_INTERVAL_DFL 1000       /* ms */
#define SUB_INTERVAL_MIN 10
#define SUB_INTERVAL_MAX 3600000
// clang-format on

/* ---------------------------------------------------------------------------------------
 * JSON output
 * ------------------------------------------------------------------------------------- */

/* A line being built. */
typedef struct jbuf {
    char  *p;   /* bytes (heap) */
    size_t n;   /* used */
    size_t cap; /* allocated */
} jbuf_t;

static void jb_reserve(jbuf_t *b, size_t more)
{
    if (b->n + more <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + more)
        cap *= 2;
    b->p = base_realloc(b->p, cap);
    b->cap = cap;
}

static void jb_raw(jbuf_t *b, const char *s, size_t n)
{
    jb_reserve(b, n);
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void jb_lit(jbuf_t *b, const char *s)
{
    jb_raw(b, s, strlen(s));
}

static void jb_c(jbuf_t *b, char c)
{
    jb_reserve(b, 1);
    b->p[b->n++] = c;
}

/* Length of the valid UTF-8 sequence at s (n bytes available), or 0 when it is not one
 * (overlong forms, surrogates and values above U+10FFFF are not). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t   k;
    uint32_t v;
    if (c >= 0xc2 && c <= 0xdf) {
        k = 2;
        v = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        k = 3;
        v = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        k = 4;
        v = c & 0x07;
    } else {
        return 0;
    }
    if (n < k)
        return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if ((k == 3 && (v < 0x800 || (v >= 0xd800 && v <= 0xdfff))) ||
        (k == 4 && (v < 0x10000 || v > 0x10ffff)))
        return 0;
    return k;
}

/* A JSON string: quoted, escaped; bytes that are not UTF-8 become U+FFFD, so every line is
 * valid JSON whatever a label holds. */
static void jb_strn(jbuf_t *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    jb_reserve(b, n + 2);
    b->p[b->n++] = '"';
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            jb_c(b, (char)c);
            i++;
        } else if (c < 0x80) {
            char e[7] = {'\\', 0};
            switch (c) {
            case '"':
            case '\\':
                e[1] = (char)c;
                break;
            case '\n':
                e[1] = 'n';
                break;
            case '\r':
                e[1] = 'r';
                break;
            case '\t':
                e[1] = 't';
                break;
            default:
                memcpy(e + 1, "u00", 3);
                e[4] = hex[c >> 4];
                e[5] = hex[c & 15];
                break;
            }
            jb_lit(b, e);
            i++;
        } else {
            size_t k = utf8_len(u + i, n - i);
            if (k) {
                jb_raw(b, s + i, k);
                i += k;
            } else {
                jb_lit(b, "\\ufffd");
                i++;
            }
        }
    }
    jb_c(b, '"');
}

static void jb_str(jbuf_t *b, const char *s)
{
    jb_strn(b, s, strlen(s));
}

static void jb_u64(jbuf_t *b, uint64_t v)
{
    char d[24];
    int  n = snprintf(d, sizeof(d), "%" PRIu64, v);
    jb_raw(b, d, (size_t)n);
}

static void jb_i64(jbuf_t *b, int64_t v)
{
    char d[24];
    int  n = snprintf(d, sizeof(d), "%" PRId64, v);
    jb_raw(b, d, (size_t)n);
}

static void jb_double(jbuf_t *b, double v)
{
    char d[32];
    if (!isfinite(v)) {
        jb_lit(b, "null");
        return;
    }
    int n = snprintf(d, sizeof(d), "%.10g", v);
    jb_raw(b, d, (size_t)n);
}

/* "key": */
static void jb_key(jbuf_t *b, const char *key)
{
    jb_str(b, key);
    jb_c(b, ':');
}

/* A stat's value: counters unsigned, gauges signed, histograms an object with the count,
 * the sum, the per-bucket counts (bucket k counts 2^(k-1) < v <= 2^k, the last is +Inf) and
 * three estimated percentiles. */
static void jb_value(jbuf_t *b, stats_kind_t kind, uint64_t value, uint64_t sum,
                     const uint64_t *buckets, uint32_t nbuckets)
{
    if (kind == STATS_GAUGE) {
        jb_i64(b, (int64_t)value);
        return;
    }
    if (kind != STATS_HISTOGRAM || !buckets) {
        jb_u64(b, value);
        return;
    }
    jb_lit(b, "{\"count\":");
    jb_u64(b, value);
    jb_lit(b, ",\"sum\":");
    jb_u64(b, sum);
    jb_lit(b, ",\"buckets\":[");
    for (uint32_t k = 0; k <= nbuckets; k++) {
        if (k)
            jb_c(b, ',');
        jb_u64(b, buckets[k]);
    }
    jb_lit(b, "],\"p50\":");
    jb_double(b, stats_hist_quantile(buckets, nbuckets, 0.5));
    jb_lit(b, ",\"p90\":");
    jb_double(b, stats_hist_quantile(buckets, nbuckets, 0.9));
    jb_lit(b, ",\"p99\":");
    jb_double(b, stats_hist_quantile(buckets, nbuckets, 0.99));
    jb_c(b, '}');
}

static void jb_sample_value(jbuf_t *b, const stats_sample_t *s)
{
    jb_value(b, s->kind, s->value, s->sum, s->buckets, s->nbuckets);
}

static const char *kind_name(stats_kind_t k)
{
    switch (k) {
    case STATS_COUNTER:
        return "counter";
    case STATS_GAUGE:
        return "gauge";
    case STATS_HISTOGRAM:
        return "histogram";
    }
    return "?";
}

/* ---------------------------------------------------------------------------------------
 * Session
 * ------------------------------------------------------------------------------------- */

/* How an entity.query column gets its value. */
typedef enum col_src {
    COL_LABEL = 0, /* the object's label `arg` ("" reads as null when null_if_empty) */
    COL_FIELD,     /* the family's field `arg` (null when the family has none) */
    COL_STR,       /* the constant string `arg` */
    COL_INT,       /* the constant `ival` */
    COL_BOOL,      /* the constant `ival != 0` */
    COL_NULL,      /* always null */
    COL_INFO,      /* the session info's `arg`: "router_id", "mode", "version" */
    COL_UPTIME,    /* now - field `arg` (Unix seconds); null while that is 0 */
    COL_DOUBLE,    /* field `arg` times `ival` (localFreeListMax = 2 x transferBatchSize) */
    COL_DIFF,      /* field `arg` minus field `arg2` (heldByThreads) */
    COL_PREFIXED,  /* `arg2` followed by label `arg` (allocator identity "allocator/T") */
} col_src_t;

/* One column of an entity type, as declared. */
typedef struct col_def {
    const char *name;          /* qdrouterd's attribute name */
    col_src_t   src;           /* where the value comes from */
    const char *arg;           /* label key, field name, constant, info key */
    long long   ival;          /* COL_INT / COL_BOOL */
    bool        null_if_empty; /* COL_LABEL: "" is null (owningAddr of an anonymous link) */
    const char *arg2;          /* COL_DIFF: the field subtracted; COL_PREFIXED: the prefix */
} col_def_t;

/* A column resolved against the live family. */
typedef struct col {
    const col_def_t *def;   /* its declaration; NULL for a family field not declared */
    const char      *name;  /* attribute name */
    col_src_t        src;   /* COL_LABEL / COL_FIELD resolved, or the constant kinds */
    int              index; /* label index or field index; -1 = absent (null) */
    int              index2; /* COL_DIFF: the second field's index; -1 = absent */
} col_t;

/* An entity type entity.query knows. */
typedef struct qtype {
    const char      *name;      /* "router", "connection", "link", "address" */
    const char      *full;      /* qdrouterd's full type name */
    const char      *alias;     /* qdrouterd's short name when it differs ("router.link") */
    const char      *family;    /* the stats family rows come from */
    const col_def_t *cols;      /* declared columns, then every other family field */
    unsigned         ncols;
    bool             singleton; /* exactly one row, even with no family yet */
} qtype_t;

// clang-format off
static const col_def_t router_cols[] = {
    {"name",       COL_INFO,  "router_id", 0, false, NULL},
    {"identity",   COL_STR,   "1", 0, false, NULL},
    {"id",         COL_INFO,  "router_id", 0, false, NULL},
    {"type",       COL_STR,   "org.apache.qpid.dispatch.router", 0, false, NULL},
    {"mode",       COL_INFO,  "mode", 0, false, NULL},
    {"area",       COL_STR,   "0", 0, false, NULL},
    {"version",    COL_INFO,  "version", 0, false, NULL},
    /* qdrouterd counters for features a standalone Junction does not have (yet): 0 */
    {"nodeCount",                       COL_INT, NULL, 0, false, NULL},
    {"linkRouteCount",                  COL_INT, NULL, 0, false, NULL},
    {"autoLinkCount",                   COL_INT, NULL, 0, false, NULL},
    {"blockedLinkCount",                COL_INT, NULL, 0, false, NULL},
    {"deliveriesRedirectedToFallback",  COL_INT, NULL, 0, false, NULL},
    {"deliveriesIngressRouteContainer", COL_INT, NULL, 0, false, NULL},
    {"deliveriesEgressRouteContainer",  COL_INT, NULL, 0, false, NULL},
};
static const col_def_t conn_cols[] = {
    {"name",            COL_LABEL, "connection", 0, false, NULL},
    {"identity",        COL_LABEL, "connection", 0, false, NULL},
    {"type",            COL_STR,   "org.apache.qpid.dispatch.connection", 0, false, NULL},
    {"host",            COL_LABEL, "host", 0, false, NULL},
    {"container",       COL_LABEL, "container", 0, false, NULL},
    {"role",            COL_STR,   "normal", 0, false, NULL},
    {"protocol",        COL_STR,   "amqp", 0, false, NULL},
    {"dir",             COL_LABEL, "dir", 0, false, NULL},
    {"opened",          COL_BOOL,  NULL, 1, false, NULL},
    {"active",          COL_BOOL,  NULL, 1, false, NULL},
    {"adminStatus",     COL_STR,   "enabled", 0, false, NULL},
    {"operStatus",      COL_STR,   "up", 0, false, NULL},
    {"isAuthenticated", COL_BOOL,  NULL, 0, false, NULL},
    {"isEncrypted",     COL_BOOL,  NULL, 0, false, NULL},
    {"sasl",            COL_STR,   "ANONYMOUS", 0, false, NULL},
    {"user",            COL_STR,   "anonymous", 0, false, NULL},
    {"ssl",             COL_BOOL,  NULL, 0, false, NULL},
    {"sslProto",        COL_NULL,  NULL, 0, false, NULL},
    {"sslCipher",       COL_NULL,  NULL, 0, false, NULL},
    {"sslSsf",          COL_INT,   NULL, 0, false, NULL},
    {"tenant",          COL_NULL,  NULL, 0, false, NULL},
    {"enableProtocolTrace", COL_BOOL, NULL, 0, false, NULL},
    {"properties",      COL_NULL,  NULL, 0, false, NULL},
    {"uptimeSeconds",   COL_UPTIME, "openedAt", 0, false, NULL},
    {"lastDlvSeconds",  COL_UPTIME, "lastDeliveryAt", 0, false, NULL},
};
static const col_def_t link_cols[] = {
    {"name",         COL_LABEL, "link", 0, false, NULL},
    {"identity",     COL_LABEL, "link", 0, false, NULL},
    {"type",         COL_STR,   "org.apache.qpid.dispatch.router.link", 0, false, NULL},
    {"linkType",     COL_STR,   "endpoint", 0, false, NULL},
    {"linkDir",      COL_LABEL, "dir", 0, false, NULL},
    {"connectionId", COL_LABEL, "connection", 0, false, NULL},
    {"owningAddr",   COL_LABEL, "address", 0, true, NULL},
    /* qdrouterd: the peer link of a link-routed link; message-routed links have none */
    {"peer",         COL_NULL,  NULL, 0, false, NULL},
    {"linkName",     COL_LABEL, "name", 0, false, NULL},
    {"adminStatus",  COL_STR,   "enabled", 0, false, NULL},
    {"operStatus",   COL_STR,   "up", 0, false, NULL},
    {"priority",     COL_INT,   NULL, 4, false, NULL},
    {"ingressHistogram",       COL_NULL, NULL, 0, false, NULL},
};
static const col_def_t addr_cols[] = {
    {"name",           COL_LABEL, "address", 0, false, NULL},
    {"identity",       COL_LABEL, "address", 0, false, NULL},
    {"type",           COL_STR,   "org.apache.qpid.dispatch.router.address", 0, false, NULL},
    {"key",            COL_LABEL, "address", 0, false, NULL},
    {"distribution",   COL_LABEL, "distribution", 0, false, NULL},
    {"inProcess",      COL_INT,   NULL, 0, false, NULL},
    {"remoteCount",    COL_INT,   NULL, 0, false, NULL},
    {"containerCount", COL_INT,   NULL, 0, false, NULL},
    {"priority",       COL_INT,   NULL, -1, false, NULL},
    {"remoteHostRouters",              COL_NULL, NULL, 0, false, NULL},
    {"deliveriesToContainer",          COL_INT, NULL, 0, false, NULL},
    {"deliveriesFromContainer",        COL_INT, NULL, 0, false, NULL},
    {"deliveriesRedirectedToFallback", COL_INT, NULL, 0, false, NULL},
    {"deliveriesIngressRouteContainer", COL_INT, NULL, 0, false, NULL},
    {"deliveriesEgressRouteContainer", COL_INT, NULL, 0, false, NULL},
    {"transitOutstanding",             COL_NULL, NULL, 0, false, NULL},
    {"trackedDeliveries",              COL_INT, NULL, 0, false, NULL},
};
static const col_def_t alloc_cols[] = {
    {"name",              COL_PREFIXED, "typeName", 0, false, "allocator/"},
    {"identity",          COL_PREFIXED, "typeName", 0, false, "allocator/"},
    {"type",              COL_STR,   "org.apache.qpid.dispatch.allocator", 0, false, NULL},
    {"typeName",          COL_LABEL, "typeName", 0, false, NULL},
    {"localFreeListMax",  COL_DOUBLE, "transferBatchSize", 2, false, NULL},
    {"globalFreeListMax", COL_INT,   NULL, 0, false, NULL},
    {"totalFreeToHeap",   COL_INT,   NULL, 0, false, NULL},
    {"heldByThreads",     COL_DIFF,  "totalAllocFromHeap", 0, false, "globalFreeListItems"},
};

static const qtype_t qtypes[] = {
    {"router", "org.apache.qpid.dispatch.router", NULL, "router",
     router_cols, BASE_ARRAY_LEN(router_cols), true},
    {"connection", "org.apache.qpid.dispatch.connection", NULL, "connection",
     conn_cols, BASE_ARRAY_LEN(conn_cols), false},
    {"link", "org.apache.qpid.dispatch.router.link", "router.link", "link",
     link_cols, BASE_ARRAY_LEN(link_cols), false},
    {"address", "org.apache.qpid.dispatch.router.address", "router.address", "address",
     addr_cols, BASE_ARRAY_LEN(addr_cols), false},
    {"allocator", "org.apache.qpid.dispatch.allocator", NULL, "allocator",
     alloc_cols, BASE_ARRAY_LEN(alloc_cols), false},
};

static const char *const op_names[] = {
    "stats.list", "stats.get", "stats.snapshot", "stats.subscribe", "stats.unsubscribe",
    "entity.query",
};
// clang-format on

/* The object an entity.query is gathering (samples of one object come one after another). */
typedef struct row {
    bool      open;                     /* an object is being gathered */
    uint32_t  base;                     /* its first slot (the object's identity in the walk) */
    uint32_t  gen;                      /* its generation */
    char     *labels[STATS_MAX_LABELS]; /* copies of its label values */
    uint64_t *vals;                     /* one per family field */
    bool     *have;                     /* which fields were seen */
} row_t;

typedef enum stream_kind {
    STREAM_NONE = 0,
    STREAM_SNAPSHOT, /* stats.snapshot */
    STREAM_QUERY,    /* entity.query */
} stream_kind_t;

/* The streamed reply in progress. */
typedef struct stream {
    stream_kind_t         kind;    /* NONE when idle */
    char                 *id;      /* the request's id as JSON text */
    stats_iter_t         *it;      /* the walk */
    const stats_sample_t *pending; /* read ahead, not yet sent (valid until it's next call) */
    bool                  started; /* the first sample was read */
    /* entity.query */
    const qtype_t        *qt;      /* its type */
    stats_family_t       *fam;     /* its family, or NULL when it does not exist (yet) */
    col_t                *cols;    /* the columns sent */
    unsigned              ncols;
    uint64_t              skip;    /* rows still to skip (offset) */
    uint64_t              left;    /* rows still to send (count), UINT64_MAX = all */
    bool                  router_done; /* singleton: the one row was sent */
    row_t                 row;     /* the object being gathered */
} stream_t;

/* One stat a subscription has seen. */
typedef struct sub_ent {
    uint64_t     key;       /* handle id << 32 | generation: a new object is a new entry */
    uint64_t     last;      /* value the client was last sent */
    uint64_t     last_sum;  /* histogram: its sum then */
    uint64_t     cur;       /* value in this tick's walk */
    uint64_t     cur_sum;   /* histogram sum in this tick's walk */
    uint32_t     epoch;     /* tick that last saw it */
    bool         delivered; /* `last` reached the client */
    char        *name;      /* full name, for "gone" */
} sub_ent_t;

typedef struct sub {
    uint32_t   id;          /* the client's handle ("sub": id) */
    char      *glob;        /* what it watches */
    uint32_t   interval_ms; /* period */
    uint64_t   due_ms;      /* next update at or after this; 0 = at the next tick */
    uint32_t   epoch;       /* walks so far */
    bool       first_sent;  /* the first update (even an empty one) reached the client */
    sub_ent_t *ents;        /* stats seen */
    size_t     n;           /* used */
    size_t     cap;         /* allocated */
    base_map_t index;       /* key -> index + 1 in ents */
} sub_t;

struct stats_mgmt {
    stats_registry_t *_reg;       /* the registry read (not owned) */
    char             *_product;   /* hello: product */
    char             *_version;   /* hello: version */
    char             *_router_id; /* hello, router row: id */
    char             *_mode;      /* router row: mode */
    jbuf_t            _line;      /* the line being built (reused) */
    stream_t          _stream;    /* streamed reply in progress */
    /* stats.list paging: the walk behind the last cursor handed out */
    stats_iter_t         *_list_it;      /* NULL when none */
    char                 *_list_glob;    /* its glob ("*" for all) */
    const stats_sample_t *_list_pending; /* read ahead */
    uint64_t              _list_pos;     /* samples handed out so far */
    uint32_t              _list_seq;     /* which walk the cursor belongs to */
    /* subscriptions */
    sub_t            *_subs[STATS_MGMT_MAX_SUBS]; /* NULL = free slot */
    uint32_t          _next_sub;  /* last id given */
};

static char *dup_or(const char *s, const char *dflt)
{
    return base_strdup(s ? s : dflt);
}

stats_mgmt_t *stats_mgmt_session_new(stats_registry_t *r, const stats_mgmt_info_t *info)
{
    stats_mgmt_t *m = base_calloc(1, sizeof(*m));
    m->_reg = r;
    m->_product = dup_or(info ? info->product : NULL, "junction");
    m->_version = dup_or(info ? info->version : NULL, "");
    m->_router_id = dup_or(info ? info->router_id : NULL, "");
    m->_mode = dup_or(info ? info->mode : NULL, "standalone");
    return m;
}

static void row_clear(row_t *row)
{
    for (unsigned i = 0; i < STATS_MAX_LABELS; i++)
        BASE_FREE(row->labels[i]);
    row->open = false;
}

static void stream_end(stream_t *st)
{
    row_clear(&st->row);
    BASE_FREE(st->row.vals);
    BASE_FREE(st->row.have);
    stats_iter_free(st->it);
    free(st->id);
    free(st->cols);
    memset(st, 0, sizeof(*st));
}

static void list_end(stats_mgmt_t *m)
{
    stats_iter_free(m->_list_it);
    m->_list_it = NULL;
    BASE_FREE(m->_list_glob);
    m->_list_pending = NULL;
    m->_list_pos = 0;
}

static void sub_free(sub_t *s)
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

void stats_mgmt_session_free(stats_mgmt_t *m)
{
    if (!m)
        return;
    stream_end(&m->_stream);
    list_end(m);
    for (unsigned i = 0; i < STATS_MGMT_MAX_SUBS; i++)
        sub_free(m->_subs[i]);
    free(m->_line.p);
    free(m->_product);
    free(m->_version);
    free(m->_router_id);
    free(m->_mode);
    free(m);
}

/* Send the line in m->_line (a newline is added) and empty it. */
static int line_send(stats_mgmt_t *m, stats_write_fn write, void *ctx)
{
    jb_c(&m->_line, '\n');
    int rc = write(ctx, m->_line.p, m->_line.n);
    m->_line.n = 0;
    return rc;
}

/* Start a reply line: {"id":<id>, */
static void line_start(stats_mgmt_t *m, const char *id)
{
    m->_line.n = 0;
    jb_lit(&m->_line, "{\"id\":");
    jb_lit(&m->_line, id ? id : "null");
    jb_c(&m->_line, ',');
}

static int send_error(stats_mgmt_t *m, const char *id, int code, const char *msg,
                      stats_write_fn write, void *ctx)
{
    line_start(m, id);
    jb_lit(&m->_line, "\"error\":{\"code\":");
    jb_i64(&m->_line, code);
    jb_lit(&m->_line, ",\"message\":");
    jb_str(&m->_line, msg);
    jb_lit(&m->_line, "}}");
    return line_send(m, write, ctx);
}

int stats_mgmt_error(stats_write_fn write, void *ctx, int code, const char *message)
{
    jbuf_t b = {0};
    jb_lit(&b, "{\"id\":null,\"error\":{\"code\":");
    jb_i64(&b, code);
    jb_lit(&b, ",\"message\":");
    jb_str(&b, message ? message : "");
    jb_lit(&b, "}}\n");
    int rc = write(ctx, b.p, b.n);
    free(b.p);
    return rc;
}

int stats_mgmt_hello(stats_mgmt_t *m, stats_write_fn write, void *ctx)
{
    jbuf_t *b = &m->_line;
    b->n = 0;
    jb_lit(b, "{\"hello\":{\"product\":");
    jb_str(b, m->_product);
    jb_lit(b, ",\"version\":");
    jb_str(b, m->_version);
    jb_lit(b, ",\"router_id\":");
    jb_str(b, m->_router_id);
    jb_lit(b, ",\"mode\":");
    jb_str(b, m->_mode);
    jb_lit(b, ",\"protocol\":");
    jb_u64(b, STATS_MGMT_PROTOCOL);
    jb_lit(b, ",\"max_line\":");
    jb_u64(b, STATS_MGMT_LINE_MAX);
    jb_lit(b, ",\"ops\":[");
    for (size_t i = 0; i < BASE_ARRAY_LEN(op_names); i++) {
        if (i)
            jb_c(b, ',');
        jb_str(b, op_names[i]);
    }
    jb_lit(b, "]}}");
    return line_send(m, write, ctx);
}

/* ---------------------------------------------------------------------------------------
 * Request arguments
 * ------------------------------------------------------------------------------------- */

/* A request being answered. */
typedef struct req {
    stats_mgmt_t  *m;     /* the session */
    const char    *id;    /* the id as JSON text */
    const cJSON   *json;  /* the request object */
    stats_write_fn write; /* reply sink */
    void          *ctx;   /* its context */
} req_t;

/* Reply with a 400 naming the argument; returns what the write returned. */
__attribute__((format(printf, 3, 4))) static int bad_arg(const req_t *q, int code,
                                                         const char *fmt, ...)
{
    char    msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return send_error(q->m, q->id, code, msg, q->write, q->ctx);
}

/* A string argument: 0 and *out (borrowed from the request, or dflt when absent), 1 when
 * absent without a default and required (*out NULL), -1 when it has the wrong type. */
static int arg_str(const req_t *q, const char *key, const char *dflt, const char **out)
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

/* An integer argument in [min, max]: 0 and *out (dflt when absent), -1 when it is not an
 * integer or out of range. */
static int arg_int(const req_t *q, const char *key, long long min, long long max, long long dflt,
                   long long *out)
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

/* A glob argument (required or "*" by default): checks type and that it is not empty. */
static int arg_glob(const req_t *q, const char *key, bool required, const char **out)
{
    if (arg_str(q, key, required ? NULL : "*", out) < 0 || (required && !*out) ||
        (*out && !**out))
        return -1;
    return 0;
}

/* ---------------------------------------------------------------------------------------
 * stats.list
 * ------------------------------------------------------------------------------------- */

static void list_entry(jbuf_t *b, const stats_sample_t *s)
{
    jb_lit(b, "{\"name\":");
    jb_strn(b, s->name, s->name_len);
    jb_lit(b, ",\"kind\":");
    jb_str(b, kind_name(s->kind));
    if (s->help) {
        jb_lit(b, ",\"help\":");
        jb_str(b, s->help);
    }
    if (s->nlabels) {
        jb_lit(b, ",\"labels\":{");
        for (unsigned i = 0; i < s->nlabels; i++) {
            if (i)
                jb_c(b, ',');
            jb_key(b, s->label_keys[i]);
            jb_str(b, s->labels[i]);
        }
        jb_c(b, '}');
    }
    jb_c(b, '}');
}

static int op_list(const req_t *q)
{
    stats_mgmt_t *m = q->m;
    const char   *glob, *cursor;
    long long     limit;
    if (arg_glob(q, "match", false, &glob) < 0)
        return bad_arg(q, 400, "argument 'match': expected a non-empty glob string");
    if (arg_int(q, "limit", 1, LIST_LIMIT_MAX, LIST_LIMIT_DFL, &limit) < 0)
        return bad_arg(q, 400, "argument 'limit': expected an integer from 1 to %d",
                       LIST_LIMIT_MAX);
    if (arg_str(q, "cursor", NULL, &cursor) < 0)
        return bad_arg(q, 400, "argument 'cursor': expected the string a previous reply "
                               "gave as \"next\"");

    /* A cursor is "<walk>.<position>": the walk this session keeps goes on where it
     * stopped; any other valid cursor (an older walk, another match) walks again from
     * the start and skips what was handed out. */
    uint64_t skip = 0;
    bool     resume = false;
    if (cursor) {
        unsigned seq;
        uint64_t pos;
        int      used = 0;
        if (sscanf(cursor, "%u.%" SCNu64 "%n", &seq, &pos, &used) != 2 ||
            (size_t)used != strlen(cursor))
            return bad_arg(q, 400, "argument 'cursor': not a cursor this server handed out");
        resume = m->_list_it && seq == m->_list_seq && pos == m->_list_pos &&
                 strcmp(glob, m->_list_glob) == 0;
        skip = pos;
    }
    if (!resume) {
        list_end(m);
        m->_list_it = stats_iter_new(m->_reg, strcmp(glob, "*") ? glob : NULL,
                                     STATS_ITER_NAMES);
        m->_list_glob = base_strdup(glob);
        m->_list_seq++;
        for (; m->_list_pos < skip && stats_iter_next(m->_list_it); m->_list_pos++)
            ;
    }

    jbuf_t *b = &m->_line;
    line_start(m, q->id);
    jb_lit(b, "\"result\":{\"stats\":[");
    long long n = 0;
    const stats_sample_t *s = m->_list_pending;
    m->_list_pending = NULL;
    if (!s)
        s = stats_iter_next(m->_list_it);
    for (; s && n < limit; n++) {
        if (n)
            jb_c(b, ',');
        list_entry(b, s);
        s = stats_iter_next(m->_list_it);
    }
    m->_list_pos += (uint64_t)n;
    jb_lit(b, "],\"next\":");
    if (s) {
        char next[48];
        m->_list_pending = s;
        snprintf(next, sizeof(next), "%u.%" PRIu64, m->_list_seq, m->_list_pos);
        jb_str(b, next);
    } else {
        jb_lit(b, "null");
        list_end(m);
    }
    jb_lit(b, "}}");
    return line_send(m, q->write, q->ctx);
}

/* ---------------------------------------------------------------------------------------
 * stats.get
 * ------------------------------------------------------------------------------------- */

static int op_get(const req_t *q)
{
    stats_mgmt_t *m = q->m;
    const char   *glob;
    long long     limit;
    if (arg_glob(q, "match", true, &glob) < 0)
        return bad_arg(q, 400, "argument 'match': expected a stat name or glob "
                               "(e.g. \"address.*.deliveriesEgress\")");
    if (arg_int(q, "limit", 1, GET_LIMIT_MAX, GET_LIMIT_DFL, &limit) < 0)
        return bad_arg(q, 400, "argument 'limit': expected an integer from 1 to %d",
                       GET_LIMIT_MAX);
    stats_iter_t *it = stats_iter_new(m->_reg, strcmp(glob, "*") ? glob : NULL,
                                      STATS_ITER_NAMES);
    jbuf_t *b = &m->_line;
    line_start(m, q->id);
    jb_lit(b, "\"result\":{\"values\":{");
    long long             n = 0;
    const stats_sample_t *s;
    while ((s = stats_iter_next(it)) && n < limit) {
        if (n++)
            jb_c(b, ',');
        jb_strn(b, s->name, s->name_len);
        jb_c(b, ':');
        jb_sample_value(b, s);
    }
    jb_c(b, '}');
    if (s)
        jb_lit(b, ",\"truncated\":true");
    jb_lit(b, "}}");
    stats_iter_free(it);
    return line_send(m, q->write, q->ctx);
}

/* ---------------------------------------------------------------------------------------
 * Streams: stats.snapshot and entity.query
 * ------------------------------------------------------------------------------------- */

/* The next sample of the stream's walk (the read-ahead one first). */
static const stats_sample_t *stream_next(stream_t *st)
{
    const stats_sample_t *s = st->pending;
    st->pending = NULL;
    st->started = true;
    return s ? s : stats_iter_next(st->it);
}

/* One stats.snapshot line; true when it was the last. */
static bool snapshot_chunk(stats_mgmt_t *m)
{
    stream_t *st = &m->_stream;
    jbuf_t   *b = &m->_line;
    jb_lit(b, "\"result\":{\"values\":{");
    const stats_sample_t *s = stream_next(st);
    for (unsigned n = 0; s; n++) {
        if (n == CHUNK_SAMPLES || b->n >= CHUNK_BYTES) {
            st->pending = s;
            break;
        }
        if (n)
            jb_c(b, ',');
        jb_strn(b, s->name, s->name_len);
        jb_c(b, ':');
        jb_sample_value(b, s);
        s = stats_iter_next(st->it);
    }
    jb_lit(b, "}}");
    return st->pending == NULL;
}

static void col_value(stats_mgmt_t *m, const stream_t *st, const col_t *c)
{
    jbuf_t      *b = &m->_line;
    const row_t *row = &st->row;
    switch (c->src) {
    case COL_LABEL: {
        const char *v = c->index >= 0 ? row->labels[c->index] : NULL;
        if (!v || (!*v && c->def && c->def->null_if_empty))
            jb_lit(b, "null");
        else
            jb_str(b, v);
        return;
    }
    case COL_FIELD:
        if (c->index < 0 || !row->have[c->index]) {
            jb_lit(b, "null");
        } else {
            const stats_field_t *fd = stats_family_field(st->fam, (unsigned)c->index);
            jb_value(b, fd->kind == STATS_HISTOGRAM ? STATS_COUNTER : fd->kind,
                     row->vals[c->index], 0, NULL, 0);
        }
        return;
    case COL_STR:
        jb_str(b, c->def->arg);
        return;
    case COL_INT:
        jb_i64(b, c->def->ival);
        return;
    case COL_BOOL:
        jb_lit(b, c->def->ival ? "true" : "false");
        return;
    case COL_NULL:
        jb_lit(b, "null");
        return;
    case COL_INFO: {
        const char *a = c->def->arg;
        jb_str(b, strcmp(a, "mode") == 0      ? m->_mode
                  : strcmp(a, "version") == 0 ? m->_version
                                              : m->_router_id);
        return;
    }
    case COL_UPTIME:
        if (c->index < 0 || !row->have[c->index] || row->vals[c->index] == 0) {
            jb_lit(b, "null");
        } else {
            int64_t up = (int64_t)time(NULL) - (int64_t)row->vals[c->index];
            jb_i64(b, up < 0 ? 0 : up);
        }
        return;
    case COL_DOUBLE:
        if (c->index < 0 || !row->have[c->index])
            jb_lit(b, "null");
        else
            jb_i64(b, (int64_t)row->vals[c->index] * c->def->ival);
        return;
    case COL_DIFF:
        if (c->index < 0 || !row->have[c->index] || c->index2 < 0 || !row->have[c->index2])
            jb_lit(b, "null");
        else
            jb_i64(b, (int64_t)row->vals[c->index] - (int64_t)row->vals[c->index2]);
        return;
    case COL_PREFIXED: {
        const char *v = c->index >= 0 ? row->labels[c->index] : NULL;
        if (!v) {
            jb_lit(b, "null");
        } else {
            char buf[256];
            snprintf(buf, sizeof(buf), "%s%s", c->def->arg2, v);
            jb_str(b, buf);
        }
        return;
    }
    }
}

/* Append the gathered object as a row (unless offset/count say otherwise); true if sent. */
static bool row_emit(stats_mgmt_t *m, unsigned *nrows)
{
    stream_t *st = &m->_stream;
    if (st->skip) {
        st->skip--;
        return false;
    }
    if (st->left == 0)
        return false;
    if (st->left != UINT64_MAX)
        st->left--;
    jbuf_t *b = &m->_line;
    if ((*nrows)++)
        jb_c(b, ',');
    jb_c(b, '[');
    for (unsigned i = 0; i < st->ncols; i++) {
        if (i)
            jb_c(b, ',');
        col_value(m, st, &st->cols[i]);
    }
    jb_c(b, ']');
    return true;
}

/* Start gathering the object sample s belongs to. */
static void row_open(stream_t *st, const stats_sample_t *s)
{
    row_t   *row = &st->row;
    unsigned nf = stats_family_nfields(st->fam);
    row_clear(row);
    row->open = true;
    row->base = s->handle.id - stats_family_offset(st->fam, s->field);
    row->gen = s->handle.gen;
    for (unsigned i = 0; i < s->nlabels && i < STATS_MAX_LABELS; i++)
        row->labels[i] = base_strdup(s->labels[i] ? s->labels[i] : "");
    memset(row->have, 0, nf * sizeof(*row->have));
}

/* One entity.query line; true when it was the last. */
static bool query_chunk(stats_mgmt_t *m)
{
    stream_t *st = &m->_stream;
    jbuf_t   *b = &m->_line;
    jb_lit(b, "\"result\":{\"type\":");
    jb_str(b, st->qt->full);
    jb_lit(b, ",\"attributeNames\":[");
    for (unsigned i = 0; i < st->ncols; i++) {
        if (i)
            jb_c(b, ',');
        jb_str(b, st->cols[i].name);
    }
    jb_lit(b, "],\"results\":[");
    unsigned nrows = 0;
    bool     done = false;
    if (!st->it) {
        /* no family (yet): a singleton still has its row of constants */
        if (st->qt->singleton && !st->router_done) {
            row_clear(&st->row);
            row_emit(m, &nrows);
            st->router_done = true;
        }
        done = true;
    }
    while (!done) {
        if (nrows >= CHUNK_ROWS || b->n >= CHUNK_BYTES || st->left == 0) {
            done = st->left == 0;
            break;
        }
        const stats_sample_t *s = stream_next(st);
        if (!s) {
            if (st->row.open)
                row_emit(m, &nrows);
            row_clear(&st->row);
            done = true;
            break;
        }
        uint32_t base = s->handle.id - stats_family_offset(st->fam, s->field);
        if (st->row.open && (base != st->row.base || s->handle.gen != st->row.gen)) {
            /* s starts the next object: the gathered one is complete */
            st->pending = s;
            row_emit(m, &nrows);
            row_clear(&st->row);
            continue;
        }
        if (!st->row.open)
            row_open(st, s);
        if (s->field < stats_family_nfields(st->fam)) {
            st->row.vals[s->field] = s->value;
            st->row.have[s->field] = true;
        }
    }
    jb_lit(b, "]}");
    return done;
}

/* Write the stream's next line; the stream ends after its last.  Returns the write's
 * result. */
static int stream_chunk(stats_mgmt_t *m, stats_write_fn write, void *ctx)
{
    stream_t *st = &m->_stream;
    line_start(m, st->id);
    bool last = st->kind == STREAM_SNAPSHOT ? snapshot_chunk(m) : query_chunk(m);
    jb_lit(&m->_line, last ? ",\"more\":false}" : ",\"more\":true}");
    int rc = line_send(m, write, ctx);
    if (last)
        stream_end(st);
    return rc;
}

static int op_snapshot(const req_t *q)
{
    stats_mgmt_t *m = q->m;
    const char   *glob;
    if (arg_glob(q, "match", false, &glob) < 0)
        return bad_arg(q, 400, "argument 'match': expected a non-empty glob string");
    stream_t *st = &m->_stream;
    st->kind = STREAM_SNAPSHOT;
    st->id = base_strdup(q->id);
    st->it = stats_iter_new(m->_reg, strcmp(glob, "*") ? glob : NULL, STATS_ITER_NAMES);
    return stream_chunk(m, q->write, q->ctx);
}

static const qtype_t *qtype_find(const char *name)
{
    static const char org[] = "org.apache.qpid.dispatch.";
    for (size_t i = 0; i < BASE_ARRAY_LEN(qtypes); i++) {
        const qtype_t *t = &qtypes[i];
        if (strcmp(name, t->name) == 0 || strcmp(name, t->full) == 0 ||
            (t->alias && strcmp(name, t->alias) == 0))
            return t;
        if (strncmp(name, org, sizeof(org) - 1) == 0 && t->alias &&
            strcmp(name + sizeof(org) - 1, t->alias) == 0)
            return t;
    }
    return NULL;
}

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

/* All columns of the type: the declared ones, then the family's fields in order (a field
 * named like a declared column is that column). */
static col_t *columns_all(const qtype_t *t, stats_family_t *f, unsigned *n)
{
    unsigned nf = f ? stats_family_nfields(f) : 0;
    col_t   *cols = base_calloc(t->ncols + nf + 1, sizeof(*cols));
    unsigned k = 0;
    for (unsigned i = 0; i < t->ncols; i++) {
        const col_def_t *d = &t->cols[i];
        col_t           *c = &cols[k++];
        c->def = d;
        c->name = d->name;
        c->src = d->src;
        c->index = -1;
        c->index2 = -1;
        if (d->src == COL_LABEL || d->src == COL_PREFIXED)
            c->index = label_index(f, d->arg);
        else if (d->src == COL_FIELD || d->src == COL_UPTIME || d->src == COL_DOUBLE ||
                 d->src == COL_DIFF)
            c->index = field_index(f, d->arg);
        if (d->src == COL_DIFF)
            c->index2 = field_index(f, d->arg2);
    }
    for (unsigned i = 0; i < nf; i++) {
        const char *name = stats_family_field(f, i)->name;
        bool        declared = false;
        for (unsigned j = 0; j < t->ncols && !declared; j++)
            declared = strcmp(t->cols[j].name, name) == 0;
        if (declared)
            continue;
        col_t *c = &cols[k++];
        c->name = name;
        c->src = COL_FIELD;
        c->index = (int)i;
        c->index2 = -1;
    }
    *n = k;
    return cols;
}

static int op_query(const req_t *q)
{
    stats_mgmt_t *m = q->m;
    const char   *type;
    long long     offset, count;
    if (arg_str(q, "type", NULL, &type) < 0 || !type)
        return bad_arg(q, 400, "argument 'type': expected one of router, connection, link, "
                               "address, allocator");
    const qtype_t *t = qtype_find(type);
    if (!t)
        return bad_arg(q, 404, "argument 'type': unknown entity type '%.100s' (expected one "
                               "of router, connection, link, address, allocator)", type);
    if (arg_int(q, "offset", 0, INT64_MAX / 2, 0, &offset) < 0)
        return bad_arg(q, 400, "argument 'offset': expected an integer >= 0");
    if (arg_int(q, "count", 0, INT64_MAX / 2, -1, &count) < 0)
        return bad_arg(q, 400, "argument 'count': expected an integer >= 0");

    stats_family_t *f = stats_family_find(m->_reg, t->family);
    if (f && stats_family_is_singleton(f) != t->singleton)
        f = NULL; /* not the family we know */
    unsigned ncols;
    col_t   *all = columns_all(t, f, &ncols);
    col_t   *cols = all;

    /* attributeNames: only these columns, in this order (qdrouterd's QUERY) */
    const cJSON *names = cJSON_GetObjectItemCaseSensitive(q->json, "attributeNames");
    if (names && !cJSON_IsNull(names)) {
        int n = cJSON_IsArray(names) ? cJSON_GetArraySize(names) : -1;
        if (n < 0) {
            free(all);
            return bad_arg(q, 400, "argument 'attributeNames': expected a list of strings");
        }
        if (n > 0) {
            cols = base_calloc((size_t)n, sizeof(*cols));
            const cJSON *e;
            unsigned     k = 0;
            cJSON_ArrayForEach(e, names)
            {
                unsigned j = 0;
                if (cJSON_IsString(e) && e->valuestring)
                    for (; j < ncols && strcmp(all[j].name, e->valuestring) != 0; j++)
                        ;
                if (!cJSON_IsString(e) || !e->valuestring || j == ncols) {
                    int rc = cJSON_IsString(e) && e->valuestring
                                 ? bad_arg(q, 404,
                                           "argument 'attributeNames': '%.100s' is not an "
                                           "attribute of %s",
                                           e->valuestring, t->full)
                                 : bad_arg(q, 400, "argument 'attributeNames': expected a "
                                                   "list of strings");
                    free(cols);
                    free(all);
                    return rc;
                }
                cols[k++] = all[j];
            }
            free(all);
            ncols = k;
        }
    }

    stream_t *st = &m->_stream;
    st->kind = STREAM_QUERY;
    st->id = base_strdup(q->id);
    st->qt = t;
    st->fam = f;
    st->cols = cols;
    st->ncols = ncols;
    st->skip = (uint64_t)offset;
    st->left = count < 0 ? UINT64_MAX : (uint64_t)count;
    if (f) {
        char glob[64];
        snprintf(glob, sizeof(glob), "%s.*", t->family);
        st->it = stats_iter_new(m->_reg, glob, STATS_ITER_NAMES);
        st->row.vals = base_calloc(stats_family_nfields(f), sizeof(*st->row.vals));
        st->row.have = base_calloc(stats_family_nfields(f), sizeof(*st->row.have));
    }
    return stream_chunk(m, q->write, q->ctx);
}

bool stats_mgmt_is_streaming(const stats_mgmt_t *m)
{
    return m->_stream.kind != STREAM_NONE;
}

int stats_mgmt_resume(stats_mgmt_t *m, stats_write_fn write, void *ctx)
{
    if (m->_stream.kind == STREAM_NONE)
        return 0;
    return stream_chunk(m, write, ctx);
}

/* ---------------------------------------------------------------------------------------
 * Subscriptions
 * ------------------------------------------------------------------------------------- */

static int op_subscribe(const req_t *q)
{
    stats_mgmt_t *m = q->m;
    const char   *glob;
    long long     interval;
    if (arg_glob(q, "match", true, &glob) < 0)
        return bad_arg(q, 400, "argument 'match': expected a stat name or glob");
    if (arg_int(q, "interval_ms", SUB_INTERVAL_MIN, SUB_INTERVAL_MAX, SUB_INTERVAL_DFL,
                &interval) < 0)
        return bad_arg(q, 400, "argument 'interval_ms': expected an integer from %d to %d",
                       SUB_INTERVAL_MIN, SUB_INTERVAL_MAX);
    unsigned slot = 0;
    while (slot < STATS_MGMT_MAX_SUBS && m->_subs[slot])
        slot++;
    if (slot == STATS_MGMT_MAX_SUBS)
        return bad_arg(q, 429, "too many subscriptions on this connection (at most %d)",
                       STATS_MGMT_MAX_SUBS);
    sub_t *s = base_calloc(1, sizeof(*s));
    s->id = ++m->_next_sub;
    s->glob = base_strdup(glob);
    s->interval_ms = (uint32_t)interval;
    s->due_ms = 0;
    base_map_init(&s->index);
    m->_subs[slot] = s;

    line_start(m, q->id);
    jb_lit(&m->_line, "\"result\":{\"sub\":");
    jb_u64(&m->_line, s->id);
    jb_lit(&m->_line, ",\"interval_ms\":");
    jb_u64(&m->_line, s->interval_ms);
    jb_lit(&m->_line, "}}");
    return line_send(m, q->write, q->ctx);
}

static int op_unsubscribe(const req_t *q)
{
    stats_mgmt_t *m = q->m;
    long long     id;
    if (arg_int(q, "sub", 1, UINT32_MAX, 0, &id) < 0 || id == 0)
        return bad_arg(q, 400, "argument 'sub': expected the id stats.subscribe returned");
    for (unsigned i = 0; i < STATS_MGMT_MAX_SUBS; i++) {
        if (m->_subs[i] && m->_subs[i]->id == (uint32_t)id) {
            sub_free(m->_subs[i]);
            m->_subs[i] = NULL;
            line_start(m, q->id);
            jb_lit(&m->_line, "\"result\":{\"sub\":");
            jb_u64(&m->_line, (uint64_t)id);
            jb_lit(&m->_line, "}}");
            return line_send(m, q->write, q->ctx);
        }
    }
    return bad_arg(q, 404, "no subscription %lld on this connection", id);
}

/* The subscription's entry for sample s (a new one, not yet delivered, if unseen). */
static sub_ent_t *sub_entry(sub_t *s, const stats_sample_t *smp)
{
    uint64_t key = (uint64_t)smp->handle.id << 32 | smp->handle.gen;
    uintptr_t at = (uintptr_t)base_map_uget(&s->index, key);
    if (at)
        return &s->ents[at - 1];
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->ents = base_realloc(s->ents, s->cap * sizeof(*s->ents));
    }
    sub_ent_t *e = &s->ents[s->n++];
    memset(e, 0, sizeof(*e));
    e->key = key;
    e->name = base_strndup(smp->name, smp->name_len);
    base_map_uput(&s->index, key, (void *)(uintptr_t)s->n);
    return e;
}

/* After a delivered update: forget the stats that are gone and rebuild the index. */
static void sub_compact(sub_t *s)
{
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->ents[i].epoch != s->epoch) {
            free(s->ents[i].name);
            continue;
        }
        s->ents[k++] = s->ents[i];
    }
    if (k == s->n)
        return;
    s->n = k;
    base_map_fini(&s->index);
    base_map_init(&s->index);
    for (size_t i = 0; i < s->n; i++)
        base_map_uput(&s->index, s->ents[i].key, (void *)(uintptr_t)(i + 1));
}

/* Walk the subscription's stats and send what changed since the client's last update.  The
 * update is committed (becomes what the client has) only when the write accepts it, so a
 * refused update (-EAGAIN) is not lost: the next one carries the latest values of
 * everything that changed since the last one delivered. */
static int sub_update(stats_mgmt_t *m, sub_t *s, stats_write_fn write, void *ctx)
{
    jbuf_t *b = &m->_line;
    s->epoch++;
    b->n = 0;
    jb_lit(b, "{\"sub\":");
    jb_u64(b, s->id);
    jb_lit(b, ",\"values\":{");
    stats_iter_t         *it = stats_iter_new(m->_reg, strcmp(s->glob, "*") ? s->glob : NULL,
                                              STATS_ITER_NAMES);
    const stats_sample_t *smp;
    size_t                seen = 0, changed = 0;
    bool                  truncated = false;
    while ((smp = stats_iter_next(it))) {
        if (seen >= STATS_MGMT_SUB_MAX_STATS) {
            truncated = true;
            break;
        }
        seen++;
        sub_ent_t *e = sub_entry(s, smp);
        e->epoch = s->epoch;
        e->cur = smp->value;
        e->cur_sum = smp->sum;
        if (e->delivered && e->cur == e->last && e->cur_sum == e->last_sum)
            continue;
        if (changed++)
            jb_c(b, ',');
        jb_strn(b, smp->name, smp->name_len);
        jb_c(b, ':');
        jb_sample_value(b, smp);
    }
    stats_iter_free(it);
    jb_c(b, '}');
    size_t gone = 0;
    for (size_t i = 0; i < s->n; i++) {
        sub_ent_t *e = &s->ents[i];
        if (e->epoch == s->epoch || !e->delivered)
            continue;
        jb_lit(b, gone++ ? "," : ",\"gone\":[");
        jb_str(b, e->name);
    }
    if (gone)
        jb_c(b, ']');
    if (truncated)
        jb_lit(b, ",\"truncated\":true");
    jb_c(b, '}');
    if (!changed && !gone && s->first_sent) {
        b->n = 0;
        sub_compact(s);
        return 0;
    }
    int rc = line_send(m, write, ctx);
    if (rc < 0)
        return rc; /* not delivered: the entries keep what the client last got */
    s->first_sent = true;
    for (size_t i = 0; i < s->n; i++) {
        sub_ent_t *e = &s->ents[i];
        e->last = e->cur;
        e->last_sum = e->cur_sum;
        e->delivered = true;
    }
    sub_compact(s);
    return 0;
}

int stats_mgmt_tick(stats_mgmt_t *m, uint64_t now_ms, stats_write_fn write, void *ctx)
{
    for (unsigned i = 0; i < STATS_MGMT_MAX_SUBS; i++) {
        sub_t *s = m->_subs[i];
        if (!s || s->due_ms > now_ms)
            continue;
        /* a late tick does not try to catch up: one update, then a full period */
        s->due_ms = now_ms + s->interval_ms;
        int rc = sub_update(m, s, write, ctx);
        if (rc < 0 && rc != -EAGAIN)
            return rc;
    }
    return 0;
}

int64_t stats_mgmt_next_due(const stats_mgmt_t *m, uint64_t now_ms)
{
    int64_t next = -1;
    for (unsigned i = 0; i < STATS_MGMT_MAX_SUBS; i++) {
        const sub_t *s = m->_subs[i];
        if (!s)
            continue;
        int64_t d = s->due_ms <= now_ms ? 0 : (int64_t)(s->due_ms - now_ms);
        if (next < 0 || d < next)
            next = d;
    }
    return next;
}

/* ---------------------------------------------------------------------------------------
 * One request line
 * ------------------------------------------------------------------------------------- */

typedef struct op {
    const char *name;              /* "stats.get" */
    int (*fn)(const req_t *q);     /* answers it */
    bool        streams;           /* may leave a streamed reply in progress */
} op_t;

static const op_t ops[] = {
    {"stats.list", op_list, false},          {"stats.get", op_get, false},
    {"stats.snapshot", op_snapshot, true},   {"stats.subscribe", op_subscribe, false},
    {"stats.unsubscribe", op_unsubscribe, false}, {"entity.query", op_query, true},
};
_Static_assert(BASE_ARRAY_LEN(ops) == BASE_ARRAY_LEN(op_names), "ops and op_names agree");

/* The id as JSON text: a number or a string.  NULL when it is neither. */
static char *id_text(const cJSON *id)
{
    jbuf_t b = {0};
    if (cJSON_IsString(id) && id->valuestring) {
        jb_str(&b, id->valuestring);
    } else if (cJSON_IsNumber(id) && isfinite(id->valuedouble)) {
        double d = id->valuedouble;
        if (d == floor(d) && fabs(d) < 9007199254740992.0)
            jb_i64(&b, (int64_t)d);
        else
            jb_double(&b, d);
    } else {
        return NULL;
    }
    jb_c(&b, '\0');
    return b.p;
}

int stats_mgmt_handle(stats_mgmt_t *m, const char *line, size_t len, stats_write_fn write,
                      void *ctx)
{
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
        len--;
    size_t blank = 0;
    while (blank < len && (line[blank] == ' ' || line[blank] == '\t'))
        blank++;
    if (blank == len)
        return 0; /* an empty line asks nothing */
    if (len > STATS_MGMT_LINE_MAX) {
        char msg[96];
        snprintf(msg, sizeof(msg), "request line longer than %u bytes", STATS_MGMT_LINE_MAX);
        return send_error(m, NULL, 413, msg, write, ctx);
    }
    for (size_t i = 0; i < len;) {
        const unsigned char *u = (const unsigned char *)line + i;
        size_t               k = *u < 0x80 ? (*u ? 1 : 0) : utf8_len(u, len - i);
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
    req_t        q = {.m = m, .id = id, .json = json, .write = write, .ctx = ctx};
    if (!cJSON_IsString(opv) || !opv->valuestring) {
        rc = bad_arg(&q, 400, opv ? "bad request: 'op' must be a string"
                                  : "bad request: missing 'op'");
        goto out_id;
    }
    const op_t *op = NULL;
    for (size_t i = 0; i < BASE_ARRAY_LEN(ops) && !op; i++)
        if (strcmp(opv->valuestring, ops[i].name) == 0)
            op = &ops[i];
    if (!op) {
        rc = bad_arg(&q, 404, "unknown op '%.100s'", opv->valuestring);
    } else if (op->streams && stats_mgmt_is_streaming(m)) {
        rc = bad_arg(&q, 409, "a streamed reply (%s) is still being sent on this connection",
                     m->_stream.kind == STREAM_SNAPSHOT ? "stats.snapshot" : "entity.query");
    } else {
        rc = op->fn(&q);
    }
out_id:
    free(id);
out:
    cJSON_Delete(json);
    return rc;
}
