/* router/mgmt/mgmt_int.h: private to router/mgmt/ - the entity schema (schema.c), the row
 * producer (rows.c), the JSON line writer (json.c), the AMQP management node's state and
 * operations (node.c, ops.c) and the protocol session's internals (proto.c, proto_stats.c).
 *
 * Threads: none of this is thread-safe; each object belongs to the thread that made it (the
 * agent thread for a node, the admin thread for a protocol session).  The stats registry is
 * read through stats/'s thread-safe calls.
 */
#ifndef JUNCTION_ROUTER_MGMT_INT_H
#define JUNCTION_ROUTER_MGMT_INT_H

#include "router/mgmt/mgmt.h"

#include "core/base/map.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MGMT_PREFIX    "org.apache.qpid.dispatch"
#define MGMT_NODE_TYPE "org.amqp.management"

/* ---------------------------------------------------------------------------------------
 * The schema (schema.c): every entity type, its names, operations and attributes
 * ------------------------------------------------------------------------------------- */

typedef enum mgmt_kind {
    MGMT_K_NODE = 0, /* org.amqp.management itself */
    MGMT_K_STATS,    /* operational rows from the stats registry (columns: mgmt_attr_t.src) */
    MGMT_K_LISTENER, /* configuration records of the node */
    MGMT_K_ADDRESS,
    MGMT_K_LOG,      /* one row per log module */
    MGMT_K_LOGSTATS,
    MGMT_K_POLICY,   /* the one policy of the configuration */
    MGMT_K_EMPTY,    /* a known type with no entities in a standalone Junction */
    MGMT_K_SSL_PROFILE, /* the router's sslProfiles (mgmt_tls_t, ssl.c) */
    MGMT_K_AUTOLINK, /* the core's autoLinks with their state (hooks.autolink_rows) */
    MGMT_K_LINK_ROUTE,  /* configuration records of the node, operStatus live */
    MGMT_K_CONNECTOR, /* the configured connectors, with their live connectionStatus */
    MGMT_K_RNODE,     /* router.node: the routers of the network (hooks.node_rows) */
    MGMT_K_VHOST,     /* the vhost policies (hooks.policy) */
    MGMT_K_VHOST_STATS, /* their counters */
} mgmt_kind_t;

/* Where an operational (MGMT_K_STATS) column gets its value. */
typedef enum mgmt_src {
    MGMT_SRC_LABEL = 0, /* the object's label `arg` ("" reads as null when null_if_empty);
                           the constant `arg2`, when set, where the family has no such label */
    MGMT_SRC_FIELD,     /* the family's field `arg` (null when the family has none, or
                           the integer `arg2` when that is set) */
    MGMT_SRC_STR,       /* the constant string `arg` */
    MGMT_SRC_INT,       /* the constant `ival` */
    MGMT_SRC_BOOL,      /* the constant `ival != 0` */
    MGMT_SRC_NULL,      /* always null */
    MGMT_SRC_INFO,      /* the router's "router_id", "mode" or "version" (`arg`) */
    MGMT_SRC_UPTIME,    /* now - field `arg` (Unix seconds); null while that is 0 */
    MGMT_SRC_TIMES,     /* field `arg` times `ival` (localFreeListMax = 2 x transferBatchSize) */
    MGMT_SRC_DIFF,      /* field `arg` minus field `arg2` (heldByThreads) */
    MGMT_SRC_PREFIXED,  /* `arg2` followed by label `arg` (allocator identity "allocator/T") */
    MGMT_SRC_LABEL_INT, /* label `arg` read as an integer; `ival` where the family has no
                           such label or it is empty */
    MGMT_SRC_FIELD_ZERO, /* true when the family's field `arg` is 0 or absent (a connection's
                            `active`: not an edge's standby connection) */
    MGMT_SRC_LABEL_SET, /* true when label `arg` is not empty (isAuthenticated: a mechanism) */
    MGMT_SRC_TLS,       /* word `ival` of label `arg` ("<proto> <cipher> <bits>", or "" when
                           plain): 0 = whether the label is set (isEncrypted), 1 = the
                           protocol, 2 = the cipher (null when plain), 3 = the bits (0) */
} mgmt_src_t;

/* One attribute of an entity type.  Configuration types list theirs after name, identity
 * and type (which every type has); operational types list every declared column, name,
 * identity and type included, and their family's other fields follow as integer columns. */
typedef struct mgmt_attr {
    const char *name;     /* qdrouterd's attribute name */
    const char *type;     /* "string", "integer", "boolean", "map", "list", or an enum list
                             as JSON text */
    const char *dflt;     /* JSON text of the default, or NULL */
    bool        create;   /* may be given to CREATE */
    bool        update;   /* may be given to UPDATE */
    bool        required; /* CREATE needs it */
    /* operational columns only */
    mgmt_src_t  src;           /* where the value comes from */
    const char *arg;           /* label key, field name, constant, info key */
    long long   ival;          /* MGMT_SRC_INT / _BOOL / _TIMES */
    bool        null_if_empty; /* MGMT_SRC_LABEL: "" is null (owningAddr of an anonymous link) */
    const char *arg2;          /* MGMT_SRC_DIFF: the field subtracted; _PREFIXED: the prefix */
} mgmt_attr_t;

/* One entity type. */
typedef struct mgmt_type {
    const char        *name;      /* short name as in qdrouterd's schema ("router.link") */
    const char        *alias;     /* another short name the AMQP node accepts ("link") */
    const char        *full;      /* full name ("org.apache.qpid.dispatch.router.link") */
    mgmt_kind_t        kind;      /* where its rows come from */
    const char        *extends;   /* "configurationEntity" / "operationalEntity" */
    const char        *ops;       /* its AMQP operations, comma-separated */
    const char        *family;    /* MGMT_K_STATS: the stats family of its rows, which is also
                                     its name in the socket's entity.query ("link") */
    const mgmt_attr_t *attrs;     /* see mgmt_attr_t */
    size_t             nattrs;    /* their count */
    bool               singleton; /* exactly one entity */
} mgmt_type_t;

extern const mgmt_type_t mgmt_types[];
extern const size_t      mgmt_ntypes;

/* The type named `name`: short name, alias, or the full name (the AMQP node's lookup).
 * NULL when unknown. */
const mgmt_type_t *mgmt_type_find(const char *name);
/* An operational type by the socket's names: its family, short or full name.  NULL when
 * unknown. */
const mgmt_type_t *mgmt_type_find_stats(const char *name);
/* The node's own type (org.amqp.management). */
const mgmt_type_t *mgmt_type_node(void);
/* `op` is one of t's operations. */
bool mgmt_type_has_op(const mgmt_type_t *t, const char *op);
/* The schema, qdrouterd's qdrouter.json shape (a new cJSON object); the columns of the
 * operational types come from the live families of `reg`. */
cJSON *mgmt_schema_json(stats_registry_t *reg);

/* ---------------------------------------------------------------------------------------
 * Rows (rows.c): every entity of a type, built from live state, one typed value per column
 * ------------------------------------------------------------------------------------- */

typedef enum mgmt_vtype {
    MGMT_V_NULL = 0,
    MGMT_V_BOOL, /* b */
    MGMT_V_INT,  /* i */
    MGMT_V_UINT, /* u (a counter) */
    MGMT_V_STR,  /* s: NUL-terminated; may hold bytes that are not UTF-8 (labels) */
    MGMT_V_STRS, /* s: a list of strings, written comma-separated ("" is the empty list) */
    MGMT_V_JSON, /* s: a JSON value as text (a vhost's groups, a map of counts) */
} mgmt_vtype_t;

/* A column's value.  A string is borrowed: valid until the producer moves on or is freed. */
typedef struct mgmt_val {
    mgmt_vtype_t t; /* which member */
    union {
        bool        b;
        int64_t     i;
        uint64_t    u;
        const char *s;
    };
} mgmt_val_t;

typedef struct mgmt_rows mgmt_rows_t;

/* A producer of t's rows: from the stats registry `reg` (operational types), the router's
 * `info` (the router row), and the node `n`'s configuration records (configuration types;
 * NULL gives them no rows).  All borrowed.  Caller owns it. */
mgmt_rows_t *mgmt_rows_new(const mgmt_type_t *t, stats_registry_t *reg, const mgmt_info_t *info,
                           const mgmt_node_t *n);
void         mgmt_rows_free(mgmt_rows_t *r);
/* The columns: every attribute of the type, in order (an operational type's family fields
 * after its declared columns). */
unsigned    mgmt_rows_ncols(const mgmt_rows_t *r);
const char *mgmt_rows_col_name(const mgmt_rows_t *r, unsigned col);
/* The column named `name`, or -1. */
int mgmt_rows_col_find(const mgmt_rows_t *r, const char *name);
/* Move to the next row (the first on the first call).  False when there is none. */
bool mgmt_rows_next(mgmt_rows_t *r);
/* The row just produced was the last (mgmt_rows_next would return false). */
bool mgmt_rows_at_end(const mgmt_rows_t *r);
/* The current row's value in column `col` (a string stays valid until the next call of
 * mgmt_rows_next or mgmt_rows_get). */
void mgmt_rows_get(mgmt_rows_t *r, unsigned col, mgmt_val_t *out);

/* ---------------------------------------------------------------------------------------
 * JSON text (json.c): the writer of the protocol's lines (not cJSON: 64-bit counters print
 * exactly, and a label that is not UTF-8 becomes U+FFFD, so every line is valid JSON)
 * ------------------------------------------------------------------------------------- */

typedef struct mgmt_jbuf {
    char  *p;   /* bytes (heap) */
    size_t n;   /* used */
    size_t cap; /* allocated */
} mgmt_jbuf_t;

void mgmt_jb_raw(mgmt_jbuf_t *b, const char *s, size_t n);
void mgmt_jb_lit(mgmt_jbuf_t *b, const char *s);
void mgmt_jb_c(mgmt_jbuf_t *b, char c);
void mgmt_jb_strn(mgmt_jbuf_t *b, const char *s, size_t n);
void mgmt_jb_str(mgmt_jbuf_t *b, const char *s);
void mgmt_jb_u64(mgmt_jbuf_t *b, uint64_t v);
void mgmt_jb_i64(mgmt_jbuf_t *b, int64_t v);
void mgmt_jb_double(mgmt_jbuf_t *b, double v);
void mgmt_jb_key(mgmt_jbuf_t *b, const char *key);
/* A column value: null, true/false, a number, a string. */
void mgmt_jb_val(mgmt_jbuf_t *b, const mgmt_val_t *v);
/* A stat's value: counters unsigned, gauges signed, histograms an object (see mgmt.h). */
void mgmt_jb_sample(mgmt_jbuf_t *b, const stats_sample_t *s);
/* Length of the valid UTF-8 sequence at s (n bytes available), or 0 when it is not one. */
size_t mgmt_utf8_len(const unsigned char *s, size_t n);

/* ---------------------------------------------------------------------------------------
 * The AMQP management node (node.c) and its operations (ops.c)
 * ------------------------------------------------------------------------------------- */

/* A configuration entity the node knows (listener or address). */
typedef struct mgmt_rec {
    char       *name;     /* `name` (given, or the identity) */
    char       *identity; /* identity */
    long        id;       /* listener id (server) / address serial */
    const void *cfg;      /* cfg_listener_t / cfg_address_t */
} mgmt_rec_t;

typedef struct mgmt_rec_list {
    mgmt_rec_t *v;   /* records */
    size_t      n;   /* used */
    size_t      cap; /* allocated */
} mgmt_rec_list_t;

struct mgmt_node {
    stats_registry_t    *reg;         /* borrowed */
    mgmt_hooks_t         hooks;       /* side effects */
    mgmt_info_t          info;        /* points at the copies below */
    char                *router_id;   /* copies of the info */
    char                *mode;
    char                *version;
    const cfg_t         *cfg;         /* the start-up configuration (borrowed) */
    mgmt_rec_list_t      listeners;   /* live listeners */
    mgmt_rec_list_t      addresses;   /* live address configurations */
    mgmt_rec_list_t      connectors;  /* live connectors (id: the connection manager's) */
    long                 addr_serial; /* identities given to addresses */
    mgmt_rec_list_t      link_routes; /* live linkRoute configurations */
    long                 lr_serial;   /* identities given to link routes */
    cfg_t              **owned;       /* configurations CREATE made (see mgmt_node_free) */
    size_t               n_owned;
    struct pn_message_t *req;         /* reused request and reply messages (amqp.c) */
    struct pn_message_t *rep;
};

void mgmt_rec_add(mgmt_rec_list_t *l, const char *name, const char *identity, long id,
                  const void *cfg);
void mgmt_rec_del(mgmt_rec_list_t *l, size_t i);
/* Connector cn's record with the connection manager's id (configured connector i: i + 1). */
void mgmt_node_connector_rec(mgmt_node_t *n, const cfg_connector_t *cn, long id);
void mgmt_node_address_rec(mgmt_node_t *n, const cfg_address_t *ac);
void mgmt_node_link_route_rec(mgmt_node_t *n, const cfg_link_route_t *lr);
void mgmt_node_own(mgmt_node_t *n, cfg_t *cfg);

/* Where an operation writes its reply body: the AMQP encoder (amqp.c) implements it. */
typedef struct mgmt_enc {
    void *ctx;                                     /* passed to every call */
    void (*map)(void *ctx);                        /* open a map */
    void (*list)(void *ctx);                       /* open a list */
    void (*end)(void *ctx);                        /* close the innermost map or list */
    void (*value)(void *ctx, const mgmt_val_t *v); /* a value (or, in a map, a key) */
    void (*tree)(void *ctx, const cJSON *j);       /* a whole value built as cJSON */
} mgmt_enc_t;

/* A decoded request. */
typedef struct mgmt_req {
    char      *op;          /* operation (heap copies of the properties, or NULL) */
    char      *type;
    char      *name;
    char      *identity;
    char      *entity_type;
    long long  offset;      /* -1 when absent */
    long long  count;       /* -1 when absent */
    long long  limit;       /* GET-LOG; -1 when absent */
    long long  indent;      /* GET-JSON-SCHEMA; -1 when absent */
    cJSON     *body;        /* the request body, or NULL when absent or null */
    uint64_t   from_link;   /* the link the request came on (0: unknown), for policy */
    int        status;      /* the reply's status code */
    char       desc[512];   /* its statusDescription */
    bool       wrote;       /* the operation wrote a body (else: an empty map) */
} mgmt_req_t;

/* Set a failure status and its description (printf format) on q.  Returns -1. */
int mgmt_req_vfail(mgmt_req_t *q, int status, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* Answer q: status and description in q, the body (when q->wrote) through enc. */
void mgmt_ops_run(mgmt_node_t *n, mgmt_req_t *q, const mgmt_enc_t *enc);

/* ---------------------------------------------------------------------------------------
 * The protocol session's internals (proto.c: the session, its lines, entity.query;
 * proto_stats.c: the stats.* operations)
 * ------------------------------------------------------------------------------------- */

typedef enum mgmt_stream_kind {
    MGMT_STREAM_NONE = 0,
    MGMT_STREAM_SNAPSHOT, /* stats.snapshot */
    MGMT_STREAM_QUERY,    /* entity.query */
} mgmt_stream_kind_t;

/* The streamed reply in progress. */
typedef struct mgmt_stream {
    mgmt_stream_kind_t    kind;    /* NONE when idle */
    char                 *id;      /* the request's id as JSON text */
    /* stats.snapshot */
    stats_iter_t         *it;      /* the walk */
    const stats_sample_t *pending; /* read ahead, not yet sent (valid until it's next call) */
    /* entity.query */
    const mgmt_type_t    *type;    /* its type */
    mgmt_rows_t          *rows;    /* its rows */
    unsigned             *cols;    /* the columns sent (indexes into the rows' columns) */
    unsigned              ncols;   /* their count */
    uint64_t              skip;    /* rows still to skip (offset) */
    uint64_t              left;    /* rows still to send (count), UINT64_MAX = all */
} mgmt_stream_t;

/* One stat a subscription has seen. */
typedef struct mgmt_sub_ent {
    uint64_t key;       /* handle id << 32 | generation: a new object is a new entry */
    uint64_t last;      /* value the client was last sent */
    uint64_t last_sum;  /* histogram: its sum then */
    uint64_t cur;       /* value in this tick's walk */
    uint64_t cur_sum;   /* histogram sum in this tick's walk */
    uint32_t epoch;     /* tick that last saw it */
    bool     delivered; /* `last` reached the client */
    char    *name;      /* full name, for "gone" */
} mgmt_sub_ent_t;

typedef struct mgmt_sub {
    uint32_t        id;          /* the client's handle ("sub": id) */
    char           *glob;        /* what it watches */
    uint32_t        interval_ms; /* period */
    uint64_t        due_ms;      /* next update at or after this; 0 = at the next tick */
    uint32_t        epoch;       /* walks so far */
    bool            first_sent;  /* the first update (even an empty one) reached the client */
    mgmt_sub_ent_t *ents;        /* stats seen */
    size_t          n;           /* used */
    size_t          cap;         /* allocated */
    base_map_t      index;       /* key -> index + 1 in ents */
} mgmt_sub_t;

struct mgmt_proto {
    stats_registry_t *_reg;       /* the registry read (not owned) */
    mgmt_info_t       _info;      /* hello and the router row (points at the copies below) */
    char             *_product;   /* copies of the info */
    char             *_version;
    char             *_router_id;
    char             *_mode;
    mgmt_jbuf_t       _line;      /* the line being built (reused) */
    mgmt_stream_t     _stream;    /* streamed reply in progress */
    /* stats.list paging: the walk behind the last cursor handed out */
    stats_iter_t         *_list_it;      /* NULL when none */
    char                 *_list_glob;    /* its glob ("*" for all) */
    const stats_sample_t *_list_pending; /* read ahead */
    uint64_t              _list_pos;     /* samples handed out so far */
    uint32_t              _list_seq;     /* which walk the cursor belongs to */
    /* subscriptions */
    mgmt_sub_t *_subs[MGMT_PROTO_MAX_SUBS]; /* NULL = free slot */
    uint32_t    _next_sub;                  /* last id given */
    const mgmt_tls_t *_tls;                 /* sslProfile.* may change these (borrowed), or
                                               NULL: they answer 403 */
};

/* A request being answered. */
typedef struct mgmt_preq {
    mgmt_proto_t  *m;     /* the session */
    const char    *id;    /* the id as JSON text */
    const cJSON   *json;  /* the request object */
    stats_write_fn write; /* reply sink */
    void          *ctx;   /* its context */
} mgmt_preq_t;

/* Send the line in m->_line (a newline is added) and empty it. */
int mgmt__line_send(mgmt_proto_t *m, stats_write_fn write, void *ctx);
/* Start a reply line: {"id":<id>, */
void mgmt__line_start(mgmt_proto_t *m, const char *id);
/* Reply with an error (code, message); returns what the write returned. */
int mgmt__bad_arg(const mgmt_preq_t *q, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A string argument: 0 and *out (borrowed from the request, or dflt when absent), -1 when
 * it has the wrong type. */
int mgmt__arg_str(const mgmt_preq_t *q, const char *key, const char *dflt, const char **out);
/* An integer argument in [min, max]: 0 and *out (dflt when absent), -1 when it is not an
 * integer or out of range. */
int mgmt__arg_int(const mgmt_preq_t *q, const char *key, long long min, long long max,
                  long long dflt, long long *out);
/* A glob argument (required, or "*" by default): checks type and that it is not empty. */
int mgmt__arg_glob(const mgmt_preq_t *q, const char *key, bool required, const char **out);
/* Write the stream's next line; the stream ends after its last. */
int mgmt__stream_chunk(mgmt_proto_t *m, stats_write_fn write, void *ctx);
/* One stats.snapshot line into m->_line; true when it was the last. */
bool mgmt__snapshot_chunk(mgmt_proto_t *m);
/* Forget the stats.list walk. */
void mgmt__list_end(mgmt_proto_t *m);
void mgmt__sub_free(mgmt_sub_t *s);
/* The stats.* operations (proto_stats.c). */
int mgmt__op_list(const mgmt_preq_t *q);
int mgmt__op_get(const mgmt_preq_t *q);
int mgmt__op_snapshot(const mgmt_preq_t *q);
int mgmt__op_subscribe(const mgmt_preq_t *q);
int mgmt__op_unsubscribe(const mgmt_preq_t *q);
/* The sslProfile.* operations (ssl.c). */
int mgmt__op_ssl_list(const mgmt_preq_t *q);
int mgmt__op_ssl_create(const mgmt_preq_t *q);
int mgmt__op_ssl_update(const mgmt_preq_t *q);
int mgmt__op_ssl_delete(const mgmt_preq_t *q);

/* ---------------------------------------------------------------------------------------
 * sslProfiles at run time (ssl.c), for the AMQP node and the socket alike.  Each returns 0,
 * or the status of the failure (400 bad attributes or files, 404 no such profile, 409 in
 * use by a listener) with one line in err.
 * ------------------------------------------------------------------------------------- */

int mgmt_ssl_create(const mgmt_tls_t *tls, const char *name, const cJSON *attrs, char *err,
                    size_t errlen);
/* attrs replace the profile's (null removes one); the files are read again either way. */
int mgmt_ssl_update(const mgmt_tls_t *tls, const char *name, const cJSON *attrs, char *err,
                    size_t errlen);
int mgmt_ssl_delete(const mgmt_tls_t *tls, const char *name, char *err, size_t errlen);
/* The profile's attributes as management shows them (a new object: name, identity, type
 * and qdrouterd's attribute names). */
cJSON *mgmt_ssl_json(const cfg_ssl_profile_t *p);
/* The password as shown: env:VAR and file:PATH as written, a password itself never (NULL). */
const char *mgmt_ssl_shown_password(const cfg_ssl_profile_t *p);

#endif
