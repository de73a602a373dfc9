/* router/agent_ops.c: AMQP management requests to replies, and the entity schema (see
 * agent_ops.h).
 *
 * Threads: everything here runs on the thread that owns the rtr_mgmt_t (the agent thread);
 * no suffixes are used inside the file.  It reads the stats registry through stats/'s
 * thread-safe calls and changes log levels through core/base/log.h's thread-safe calls.
 *
 * DESIGN: every entity type produces its rows as JSON objects (cJSON), attribute name ->
 * value: the operational types (router, connection, router.link, router.address, allocator)
 * by running stats/'s entity.query on a private stats_mgmt session (the rows junctionctl
 * shows), the configuration types from the agent's own records.  QUERY picks columns and
 * pages, READ/UPDATE/DELETE find a row by name or identity, and the rows are converted to
 * AMQP (pn_data_t) only when the reply is written.  Requests are decoded with Proton's
 * pn_message_t, after codec_values_check() made sure that Proton's work is bounded by the
 * request's bytes; nothing in a request is trusted (types, keys, sizes are all checked).
 */
#include "router/agent_ops.h"

#include "codec/frame.h"
#include "core/base/base.h"
#include "core/base/log.h"
#include "core/base/pattern.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <proton/codec.h>
#include <proton/message.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define PREFIX       "org.apache.qpid.dispatch"
#define MGMT_TYPE    "org.amqp.management"
#define QUERY_MAX    100000 /* rows one QUERY may return (qdstat pages by 500) */

/* ---------------------------------------------------------------------------------------
 * Entity types
 * ------------------------------------------------------------------------------------- */

typedef enum etype_kind {
    ET_NODE = 0,   /* org.amqp.management itself */
    ET_STATS,      /* rows from entity.query */
    ET_LISTENER,
    ET_ADDRESS,
    ET_LOG,
    ET_LOGSTATS,
    ET_POLICY,
    ET_EMPTY,      /* known type with no entities in standalone Junction */
} etype_kind_t;

/* A configuration attribute: name, schema type, default (JSON text or NULL). */
typedef struct attr_def {
    const char *name;
    const char *type;    /* "string", "integer", "boolean", "map", "list", or an enum list */
    const char *dflt;    /* JSON text of the default, or NULL */
    bool        create;  /* may be given to CREATE */
    bool        update;  /* may be given to UPDATE */
    bool        required;
} attr_def_t;

typedef struct etype {
    const char       *name;      /* short name as in qdrouterd's schema ("router.link") */
    const char       *alias;     /* other short name accepted ("address"), or NULL */
    etype_kind_t      kind;
    const char       *extends;   /* "configurationEntity" / "operationalEntity" */
    const char       *ops;       /* operations, comma-separated */
    const char       *stats;     /* ET_STATS: the entity.query type */
    const attr_def_t *attrs;     /* non-stats types: attributes (after name, identity, type) */
    size_t            nattrs;
    bool              singleton;
} etype_t;

// clang-format off
#define A(n, t, d, c, u, r) {n, t, d, c, u, r}
static const attr_def_t listener_attrs[] = {
    A("host", "string", "\"\"", true, false, false),
    A("port", "string", "\"amqp\"", true, false, false),
    A("socketAddressFamily", "[\"IPv4\",\"IPv6\"]", NULL, true, false, false),
    A("role", "[\"normal\",\"inter-router\",\"route-container\",\"edge\"]", "\"normal\"", true, false, false),
    A("cost", "integer", "1", true, false, false),
    A("saslMechanisms", "string", NULL, true, false, false),
    A("authenticatePeer", "boolean", "false", true, false, false),
    A("requireEncryption", "boolean", "false", true, false, false),
    A("requireSsl", "boolean", "false", true, false, false),
    A("sslProfile", "string", NULL, true, false, false),
    A("maxFrameSize", "integer", "16384", true, false, false),
    A("maxSessions", "integer", "32768", true, false, false),
    A("maxSessionFrames", "integer", NULL, true, false, false),
    A("idleTimeoutSeconds", "integer", "16", true, false, false),
    A("initialHandshakeTimeoutSeconds", "integer", "10", true, false, false),
    A("stripAnnotations", "[\"in\",\"out\",\"both\",\"no\"]", "\"both\"", true, false, false),
    A("linkCapacity", "integer", "250", true, false, false),
    A("multiTenant", "boolean", "false", true, false, false),
    A("failoverUrls", "string", NULL, true, false, false),
    A("http", "boolean", "false", true, false, false),
    A("httpRootDir", "string", NULL, true, false, false),
    A("healthz", "boolean", "true", true, false, false),
    A("metrics", "boolean", "true", true, false, false),
    A("websockets", "boolean", "true", true, false, false),
    A("messageLoggingComponents", "string", "\"none\"", true, false, false),
    A("policyVhost", "string", NULL, true, false, false),
    /* Junction's own (qdrouterd has the first three on vhost policies) */
    A("maxSenders", "integer", "32768", true, false, false),
    A("maxReceivers", "integer", "32768", true, false, false),
    A("maxMessageSize", "integer", "0", true, false, false),
    A("maxUnsettledPerLink", "integer", NULL, true, false, false),
};
static const attr_def_t connector_attrs[] = {
    A("host", "string", "\"127.0.0.1\"", true, false, false),
    A("port", "string", "\"amqp\"", true, false, false),
    A("role", "[\"normal\",\"inter-router\",\"route-container\",\"edge\"]", "\"normal\"", true, false, false),
    A("cost", "integer", "1", true, false, false),
    A("sslProfile", "string", NULL, true, false, false),
    A("saslMechanisms", "string", NULL, true, false, false),
    A("maxFrameSize", "integer", "16384", true, false, false),
    A("idleTimeoutSeconds", "integer", "16", true, false, false),
    A("stripAnnotations", "[\"in\",\"out\",\"both\",\"no\"]", "\"both\"", true, false, false),
    A("linkCapacity", "integer", NULL, true, false, false),
    A("verifyHostname", "boolean", "true", true, false, false),
    A("connectionStatus", "string", NULL, false, false, false),
    A("connectionMsg", "string", NULL, false, false, false),
};
static const attr_def_t address_attrs[] = {
    A("prefix", "string", NULL, true, false, false),
    A("pattern", "string", NULL, true, false, false),
    A("distribution", "[\"multicast\",\"closest\",\"balanced\",\"unavailable\"]", "\"balanced\"", true, false, false),
    A("waypoint", "boolean", "false", true, false, false),
    A("ingressPhase", "integer", NULL, true, false, false),
    A("egressPhase", "integer", NULL, true, false, false),
    A("priority", "integer", NULL, true, false, false),
    A("enableFallback", "boolean", "false", true, false, false),
};
static const attr_def_t autolink_attrs[] = {
    A("address", "string", NULL, true, false, true),
    A("direction", "[\"in\",\"out\"]", NULL, true, false, true),
    A("phase", "integer", NULL, true, false, false),
    A("containerId", "string", NULL, true, false, false),
    A("connection", "string", NULL, true, false, false),
    A("externalAddress", "string", NULL, true, false, false),
    A("fallback", "boolean", "false", true, false, false),
    A("linkRef", "string", NULL, false, false, false),
    A("operStatus", "[\"inactive\",\"attaching\",\"failed\",\"active\",\"quiescing\",\"idle\"]", NULL, false, false, false),
    A("lastError", "string", NULL, false, false, false),
};
static const attr_def_t linkroute_attrs[] = {
    A("prefix", "string", NULL, true, false, false),
    A("pattern", "string", NULL, true, false, false),
    A("addExternalPrefix", "string", NULL, true, false, false),
    A("delExternalPrefix", "string", NULL, true, false, false),
    A("containerId", "string", NULL, true, false, false),
    A("connection", "string", NULL, true, false, false),
    A("distribution", "[\"linkBalanced\"]", "\"linkBalanced\"", true, false, false),
    A("direction", "[\"in\",\"out\"]", NULL, true, false, true),
    A("operStatus", "[\"inactive\",\"active\"]", NULL, false, false, false),
};
static const attr_def_t log_attrs[] = {
    A("module", "[\"ROUTER\",\"ROUTER_CORE\",\"ROUTER_HELLO\",\"ROUTER_LS\",\"ROUTER_MA\",\"MESSAGE\","
                "\"SERVER\",\"AGENT\",\"AUTHSERVICE\",\"CONTAINER\",\"ERROR\",\"POLICY\",\"HTTP\","
                "\"CONN_MGR\",\"PYTHON\",\"PROTOCOL\",\"DEFAULT\"]", NULL, true, false, true),
    A("enable", "string", "\"default\"", true, true, false),
    /* set at start-up only (UPDATE changes `enable`) */
    A("includeTimestamp", "boolean", NULL, true, false, false),
    A("includeSource", "boolean", NULL, true, false, false),
    A("outputFile", "string", NULL, true, false, false),
};
static const attr_def_t logstats_attrs[] = {
    A("traceCount", "integer", NULL, false, false, false),
    A("debugCount", "integer", NULL, false, false, false),
    A("infoCount", "integer", NULL, false, false, false),
    A("noticeCount", "integer", NULL, false, false, false),
    A("warningCount", "integer", NULL, false, false, false),
    A("errorCount", "integer", NULL, false, false, false),
    A("criticalCount", "integer", NULL, false, false, false),
};
static const attr_def_t policy_attrs[] = {
    A("maxConnections", "integer", "65535", true, false, false),
    A("maxMessageSize", "integer", "0", true, false, false),
    A("enableVhostPolicy", "boolean", "false", true, false, false),
    A("enableVhostNamePatterns", "boolean", "false", true, false, false),
    A("policyDir", "string", NULL, true, false, false),
    A("defaultVhost", "string", "\"$default\"", true, false, false),
    A("connectionsProcessed", "integer", NULL, false, false, false),
    A("connectionsDenied", "integer", NULL, false, false, false),
    A("connectionsCurrent", "integer", NULL, false, false, false),
    A("linksDenied", "integer", NULL, false, false, false),
    A("maxMessageSizeDenied", "integer", NULL, false, false, false),
    A("totalDenials", "integer", NULL, false, false, false),
};
static const attr_def_t node_attrs[] = {
    A("id", "string", NULL, false, false, false),
    A("protocolVersion", "integer", NULL, false, false, false),
    A("instance", "integer", NULL, false, false, false),
    A("linkState", "list", NULL, false, false, false),
    A("nextHop", "string", NULL, false, false, false),
    A("validOrigins", "list", NULL, false, false, false),
    A("address", "string", NULL, false, false, false),
    A("routerLink", "integer", NULL, false, false, false),
    A("cost", "integer", NULL, false, false, false),
    A("lastTopoChange", "integer", NULL, false, false, false),
    A("index", "integer", NULL, false, false, false),
};
#undef A

#define N(a) a, BASE_ARRAY_LEN(a)
static const etype_t etypes[] = {
    {"router", NULL, ET_STATS, "configurationEntity", "READ,QUERY,UPDATE", "router", NULL, 0, true},
    {"listener", NULL, ET_LISTENER, "configurationEntity", "CREATE,DELETE,READ,QUERY", NULL,
     N(listener_attrs), false},
    {"connector", NULL, ET_EMPTY, "configurationEntity", "CREATE,DELETE,READ,QUERY", NULL,
     N(connector_attrs), false},
    {"router.config.address", "address", ET_ADDRESS, "configurationEntity",
     "CREATE,DELETE,READ,QUERY", NULL, N(address_attrs), false},
    {"router.config.autoLink", "autoLink", ET_EMPTY, "configurationEntity",
     "CREATE,DELETE,READ,QUERY", NULL, N(autolink_attrs), false},
    {"router.config.linkRoute", "linkRoute", ET_EMPTY, "configurationEntity",
     "CREATE,DELETE,READ,QUERY", NULL, N(linkroute_attrs), false},
    {"log", NULL, ET_LOG, "configurationEntity", "UPDATE,READ,QUERY", NULL, N(log_attrs), false},
    {"policy", NULL, ET_POLICY, "configurationEntity", "READ,QUERY", NULL, N(policy_attrs), true},
    /* no UPDATE (adminStatus) until a link can be disabled: a listed operation must work */
    {"router.link", "link", ET_STATS, "operationalEntity", "READ,QUERY", "link", NULL, 0, false},
    {"router.address", NULL, ET_STATS, "operationalEntity", "READ,QUERY", "address", NULL, 0, false},
    {"connection", NULL, ET_STATS, "operationalEntity", "UPDATE,READ,QUERY", "connection", NULL, 0, false},
    {"allocator", NULL, ET_STATS, "operationalEntity", "READ,QUERY", "allocator", NULL, 0, false},
    {"logStats", NULL, ET_LOGSTATS, "operationalEntity", "READ,QUERY", NULL, N(logstats_attrs), false},
    {"router.node", "node", ET_EMPTY, "operationalEntity", "READ,QUERY", NULL, N(node_attrs), false},
    {"management", NULL, ET_NODE, "org.amqp.management",
     "QUERY,GET-TYPES,GET-ANNOTATIONS,GET-OPERATIONS,GET-ATTRIBUTES,GET-MGMT-NODES,GET-SCHEMA,"
     "GET-JSON-SCHEMA,GET-LOG", NULL, NULL, 0, true},
};
#undef N

/* Types of the operational (stats) columns that are not integers. */
static const struct { const char *name; const char *type; } col_types[] = {
    {"name", "string"}, {"identity", "string"}, {"type", "string"}, {"id", "string"},
    {"mode", "[\"standalone\",\"interior\",\"edge\"]"}, {"area", "string"}, {"version", "string"},
    {"host", "string"}, {"container", "string"}, {"role", "string"}, {"protocol", "string"},
    {"dir", "[\"in\",\"out\"]"}, {"adminStatus", "string"}, {"operStatus", "string"},
    {"sasl", "string"}, {"user", "string"}, {"sslProto", "string"}, {"sslCipher", "string"},
    {"tenant", "string"}, {"opened", "boolean"}, {"active", "boolean"},
    {"isAuthenticated", "boolean"}, {"isEncrypted", "boolean"}, {"ssl", "boolean"},
    {"enableProtocolTrace", "boolean"}, {"properties", "map"}, {"linkType", "string"},
    {"linkDir", "[\"in\",\"out\"]"}, {"connectionId", "string"}, {"owningAddr", "string"},
    {"peer", "string"}, {"linkName", "string"}, {"key", "string"}, {"distribution", "string"},
    {"remoteHostRouters", "list"}, {"ingressHistogram", "list"}, {"typeName", "string"},
};
// clang-format on

static const char *col_type(const char *name)
{
    for (size_t i = 0; i < BASE_ARRAY_LEN(col_types); i++)
        if (strcmp(col_types[i].name, name) == 0)
            return col_types[i].type;
    return "integer";
}

static bool ops_has(const etype_t *t, const char *op)
{
    size_t n = strlen(op);
    for (const char *p = t->ops; *p;) {
        const char *c = strchr(p, ',');
        size_t len = c ? (size_t)(c - p) : strlen(p);
        if (len == n && memcmp(p, op, n) == 0)
            return true;
        if (!c)
            break;
        p = c + 1;
    }
    return false;
}

/* The full type name of t into buf. */
static const char *full_name(const etype_t *t, char *buf, size_t len)
{
    if (t->kind == ET_NODE)
        snprintf(buf, len, "%s", MGMT_TYPE);
    else
        snprintf(buf, len, "%s.%s", PREFIX, t->name);
    return buf;
}

/* Type by full or short name (qdmanage and qdstat send full names). */
static const etype_t *etype_find(const char *name)
{
    static const char pre[] = PREFIX ".";
    if (!name)
        return NULL;
    if (strcmp(name, MGMT_TYPE) == 0 || strcmp(name, PREFIX ".management") == 0)
        return &etypes[BASE_ARRAY_LEN(etypes) - 1];
    const char *s = strncmp(name, pre, sizeof(pre) - 1) == 0 ? name + sizeof(pre) - 1 : name;
    for (size_t i = 0; i < BASE_ARRAY_LEN(etypes); i++)
        if (strcmp(s, etypes[i].name) == 0 || (etypes[i].alias && strcmp(s, etypes[i].alias) == 0))
            return &etypes[i];
    return NULL;
}

/* ---------------------------------------------------------------------------------------
 * State
 * ------------------------------------------------------------------------------------- */

/* A configuration entity the agent knows (listener or address). */
typedef struct rec {
    char *name;     /* `name` (given, or the identity) */
    char *identity; /* identity */
    long  id;       /* listener id (server) / address serial */
    const void *cfg; /* cfg_listener_t / cfg_address_t */
} rec_t;

typedef struct rec_list {
    rec_t *v;   /* records */
    size_t n;   /* used */
    size_t cap; /* allocated */
} rec_list_t;

struct rtr_mgmt {
    stats_registry_t *reg;       /* borrowed */
    stats_mgmt_t     *sess;      /* entity.query runs here */
    rtr_mgmt_hooks_t  hooks;     /* side effects */
    char             *router_id; /* copies of the info */
    char             *mode;
    char             *version;
    const cfg_t      *cfg;       /* the start-up configuration (borrowed) */
    rec_list_t        listeners; /* live listeners */
    rec_list_t        addresses; /* live address configurations */
    long              addr_serial; /* identities given to addresses */
    cfg_t           **owned;     /* configurations CREATE made (kept: see rtr_mgmt_free) */
    size_t            n_owned;
    pn_message_t     *req;       /* reused request and reply messages */
    pn_message_t     *rep;
    char             *lines;     /* entity.query output being gathered */
    size_t            lines_len;
    size_t            lines_cap;
};

static void rec_add(rec_list_t *l, const char *name, const char *identity, long id,
                    const void *cfg)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->v = base_realloc(l->v, l->cap * sizeof(*l->v));
    }
    rec_t *r = &l->v[l->n++];
    r->identity = base_strdup(identity);
    r->name = base_strdup(name ? name : identity);
    r->id = id;
    r->cfg = cfg;
}

static void rec_del(rec_list_t *l, size_t i)
{
    free(l->v[i].name);
    free(l->v[i].identity);
    memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof(*l->v));
    l->n--;
}

static void listener_identity(const cfg_listener_t *lc, long id, char *buf, size_t len)
{
    /* qdrouterd: listener/<host>:<port>; port "0" (ephemeral) is made unique by the id */
    if (strcmp(lc->port, "0") == 0)
        snprintf(buf, len, "listener/%s:%s:%ld", lc->host ? lc->host : "", lc->port, id);
    else
        snprintf(buf, len, "listener/%s:%s", lc->host ? lc->host : "", lc->port);
}

static void address_add_rec(rtr_mgmt_t *m, const cfg_address_t *ac)
{
    char identity[32];
    snprintf(identity, sizeof(identity), "%ld", ++m->addr_serial);
    rec_add(&m->addresses, ac->name, identity, m->addr_serial, ac);
}

rtr_mgmt_t *rtr_mgmt_new(const cfg_t *cfg, stats_registry_t *reg, const rtr_mgmt_info_t *info,
                         const rtr_mgmt_hooks_t *hooks)
{
    rtr_mgmt_t *m = base_calloc(1, sizeof(*m));
    m->reg = reg;
    m->cfg = cfg;
    m->router_id = base_strdup(info && info->router_id ? info->router_id : cfg->router.id);
    m->mode = base_strdup(info && info->mode ? info->mode : "standalone");
    m->version = base_strdup(info && info->version ? info->version : "");
    if (hooks)
        m->hooks = *hooks;
    stats_mgmt_info_t si = {.product = "junction", .version = m->version,
                            .router_id = m->router_id, .mode = m->mode};
    m->sess = stats_mgmt_session_new(reg, &si);
    for (size_t i = 0; i < cfg->n_listeners; i++) {
        char identity[300];
        long id = (long)i + 1;
        listener_identity(&cfg->listeners[i], id, identity, sizeof(identity));
        rec_add(&m->listeners, cfg->listeners[i].name, identity, id, &cfg->listeners[i]);
    }
    for (size_t i = 0; i < cfg->n_addresses; i++)
        address_add_rec(m, &cfg->addresses[i]);
    m->req = pn_message();
    m->rep = pn_message();
    return m;
}

void rtr_mgmt_free(rtr_mgmt_t *m)
{
    if (!m)
        return;
    while (m->listeners.n)
        rec_del(&m->listeners, m->listeners.n - 1);
    while (m->addresses.n)
        rec_del(&m->addresses, m->addresses.n - 1);
    free(m->listeners.v);
    free(m->addresses.v);
    for (size_t i = 0; i < m->n_owned; i++)
        cfg_free(m->owned[i]);
    free(m->owned);
    stats_mgmt_session_free(m->sess);
    pn_message_free(m->req);
    pn_message_free(m->rep);
    free(m->lines);
    free(m->router_id);
    free(m->mode);
    free(m->version);
    free(m);
}

/* ---------------------------------------------------------------------------------------
 * A request being answered
 * ------------------------------------------------------------------------------------- */

typedef struct req {
    rtr_mgmt_t *m;
    char       *op;          /* operation (heap copies of the properties) */
    char       *type;
    char       *name;
    char       *identity;
    char       *entity_type;
    long long   offset;      /* -1 when absent */
    long long   count;       /* -1 when absent */
    long long   limit;       /* GET-LOG; -1 when absent */
    long long   indent;      /* GET-JSON-SCHEMA; -1 when absent */
    cJSON      *body;        /* the request body as JSON, or NULL when absent/null */
    int         status;      /* reply status */
    char        desc[512];   /* reply statusDescription */
    cJSON      *out;         /* reply body (NULL = empty map) */
    const char *out_text;    /* GET-JSON-SCHEMA: reply body is this string (owned by out_str) */
    char       *out_str;
} req_t;

static int fail(req_t *q, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(req_t *q, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q->desc, sizeof(q->desc), fmt, ap);
    va_end(ap);
    q->status = status;
    cJSON_Delete(q->out);
    q->out = NULL;
    return -1;
}

static int ok(req_t *q, int status, cJSON *body)
{
    q->status = status;
    snprintf(q->desc, sizeof(q->desc), "%s",
             status == 201 ? "Created" : status == 204 ? "No Content" : "OK");
    cJSON_Delete(q->out);
    q->out = body;
    return 0;
}

/* ---- AMQP data <-> JSON ---- */

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

/* ---- rows ---- */

static int gather_line(void *ctx, const char *bytes, size_t len)
{
    rtr_mgmt_t *m = ctx;
    if (m->lines_len + len + 1 > m->lines_cap) {
        size_t cap = m->lines_cap ? m->lines_cap : 16384;
        while (cap < m->lines_len + len + 1)
            cap *= 2;
        m->lines = base_realloc(m->lines, cap);
        m->lines_cap = cap;
    }
    memcpy(m->lines + m->lines_len, bytes, len);
    m->lines_len += len;
    m->lines[m->lines_len] = '\0';
    return 0;
}

/* Rows of an operational type through entity.query: *names (array of strings) and *rows
 * (array of objects).  offset/count page (-1: all). */
static int stats_rows(req_t *q, const etype_t *t, long long offset, long long count,
                      cJSON **names, cJSON **rows)
{
    rtr_mgmt_t *m = q->m;
    char line[256];
    int n = snprintf(line, sizeof(line), "{\"id\":1,\"op\":\"entity.query\",\"type\":\"%s\"",
                     t->stats);
    if (offset > 0)
        n += snprintf(line + n, sizeof(line) - (size_t)n, ",\"offset\":%lld", offset);
    if (count >= 0)
        n += snprintf(line + n, sizeof(line) - (size_t)n, ",\"count\":%lld", count);
    snprintf(line + n, sizeof(line) - (size_t)n, "}");
    m->lines_len = 0;
    stats_mgmt_handle(m->sess, line, strlen(line), gather_line, m);
    while (stats_mgmt_is_streaming(m->sess))
        stats_mgmt_resume(m->sess, gather_line, m);

    *names = NULL;
    *rows = cJSON_CreateArray();
    char *p = m->lines, *end = m->lines + m->lines_len;
    while (p && p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        cJSON *j = cJSON_ParseWithLength(p, len);
        p = nl ? nl + 1 : end;
        if (!j)
            continue;
        const cJSON *err = cJSON_GetObjectItemCaseSensitive(j, "error");
        const cJSON *res = cJSON_GetObjectItemCaseSensitive(j, "result");
        if (err) {
            const cJSON *msg = cJSON_GetObjectItemCaseSensitive(err, "message");
            fail(q, 500, "Internal Server Error: %s",
                 cJSON_IsString(msg) ? msg->valuestring : "entity.query failed");
            cJSON_Delete(j);
            cJSON_Delete(*names);
            cJSON_Delete(*rows);
            *names = *rows = NULL;
            return -1;
        }
        const cJSON *an = cJSON_GetObjectItemCaseSensitive(res, "attributeNames");
        const cJSON *rs = cJSON_GetObjectItemCaseSensitive(res, "results");
        if (!*names && cJSON_IsArray(an))
            *names = cJSON_Duplicate(an, true);
        const cJSON *row;
        cJSON_ArrayForEach(row, rs)
        {
            cJSON *o = cJSON_CreateObject();
            const cJSON *k = an ? an->child : NULL;
            const cJSON *v;
            cJSON_ArrayForEach(v, row)
            {
                if (!k)
                    break;
                cJSON_AddItemToObject(o, k->valuestring, cJSON_Duplicate(v, true));
                k = k->next;
            }
            cJSON_AddItemToArray(*rows, o);
        }
        cJSON_Delete(j);
    }
    if (!*names)
        *names = cJSON_CreateArray();
    return 0;
}

static void add_str(cJSON *o, const char *k, const char *v)
{
    if (v)
        cJSON_AddStringToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

static cJSON *row_base(const etype_t *t, const char *name, const char *identity)
{
    char full[128];
    cJSON *o = cJSON_CreateObject();
    add_str(o, "name", name);
    add_str(o, "identity", identity);
    add_str(o, "type", full_name(t, full, sizeof(full)));
    return o;
}

/* A listener as the router runs it: every value from its configuration (the constants are
 * the only values the configuration loader accepts for those attributes). */
static cJSON *listener_row(const etype_t *t, const rec_t *r)
{
    const cfg_listener_t *lc = r->cfg;
    cJSON *o = row_base(t, r->name, r->identity);
    add_str(o, "host", lc->host ? lc->host : "");
    add_str(o, "port", lc->port);
    add_str(o, "socketAddressFamily", cfg_family_name(lc->family));
    add_str(o, "role", cfg_role_name(lc->role));
    cJSON_AddNumberToObject(o, "cost", (double)lc->cost);
    add_str(o, "saslMechanisms", lc->sasl_mechanisms);
    cJSON_AddBoolToObject(o, "authenticatePeer", lc->authenticate_peer);
    cJSON_AddBoolToObject(o, "requireEncryption", false); /* true is refused */
    cJSON_AddBoolToObject(o, "requireSsl", false);        /* likewise */
    cJSON_AddNullToObject(o, "sslProfile");                /* any is refused */
    cJSON_AddNumberToObject(o, "maxFrameSize", lc->max_frame_size);
    cJSON_AddNumberToObject(o, "maxSessions", lc->max_sessions);
    cJSON_AddNumberToObject(o, "maxSessionFrames", lc->max_session_frames);
    cJSON_AddNumberToObject(o, "idleTimeoutSeconds", lc->idle_timeout_seconds);
    cJSON_AddNumberToObject(o, "initialHandshakeTimeoutSeconds", lc->handshake_timeout_seconds);
    add_str(o, "stripAnnotations", cfg_strip_name(lc->strip_annotations));
    cJSON_AddNumberToObject(o, "linkCapacity", lc->link_capacity);
    cJSON_AddBoolToObject(o, "multiTenant", false);      /* true is refused */
    cJSON_AddNullToObject(o, "failoverUrls");             /* a list is refused */
    cJSON_AddBoolToObject(o, "http", lc->http);
    add_str(o, "httpRootDir", lc->http_root_dir);
    cJSON_AddBoolToObject(o, "healthz", lc->healthz);
    cJSON_AddBoolToObject(o, "metrics", lc->metrics);
    cJSON_AddBoolToObject(o, "websockets", lc->websockets);
    add_str(o, "messageLoggingComponents", "none");       /* anything else is refused */
    add_str(o, "policyVhost", lc->policy_vhost);
    cJSON_AddNumberToObject(o, "maxSenders", lc->max_senders);
    cJSON_AddNumberToObject(o, "maxReceivers", lc->max_receivers);
    cJSON_AddNumberToObject(o, "maxMessageSize", (double)lc->max_message_size);
    cJSON_AddNumberToObject(o, "maxUnsettledPerLink", lc->max_unsettled);
    return o;
}

static cJSON *address_row(const etype_t *t, const rec_t *r)
{
    const cfg_address_t *ac = r->cfg;
    cJSON *o = row_base(t, r->name, r->identity);
    add_str(o, "prefix", ac->prefix);
    add_str(o, "pattern", ac->pattern);
    add_str(o, "distribution", cfg_distribution_name(ac->distribution));
    cJSON_AddBoolToObject(o, "waypoint", ac->waypoint);
    cJSON_AddNumberToObject(o, "ingressPhase", ac->ingress_phase);
    cJSON_AddNumberToObject(o, "egressPhase", ac->egress_phase);
    if (ac->priority >= 0)
        cJSON_AddNumberToObject(o, "priority", ac->priority);
    else
        cJSON_AddNullToObject(o, "priority");
    cJSON_AddBoolToObject(o, "enableFallback", false);
    return o;
}

/* The configured `log` entity of a module, or NULL. */
static const cfg_log_t *log_cfg(const rtr_mgmt_t *m, int mod)
{
    for (size_t i = 0; i < m->cfg->n_logs; i++)
        if (m->cfg->logs[i].module_id == mod)
            return &m->cfg->logs[i];
    return NULL;
}

static cJSON *log_row(const rtr_mgmt_t *m, const etype_t *t, int mod)
{
    char id[64], en[96];
    snprintf(id, sizeof(id), "log/%s", base_log_module_name((base_log_module_t)mod));
    cJSON *o = row_base(t, id, id);
    add_str(o, "module", base_log_module_name((base_log_module_t)mod));
    base_log_format_enable(base_log_module_configured((base_log_module_t)mod), en, sizeof(en));
    add_str(o, "enable", en);
    const cfg_log_t *lc = log_cfg(m, mod);
    /* what the module does (a module without its own setting follows DEFAULT's) */
    cJSON_AddBoolToObject(o, "includeTimestamp", base_log_timestamps((base_log_module_t)mod));
    cJSON_AddBoolToObject(o, "includeSource", base_log_source((base_log_module_t)mod));
    add_str(o, "outputFile", lc ? lc->output_file : NULL);
    return o;
}

static cJSON *logstats_row(const etype_t *t, int mod)
{
    static const char *const keys[] = {"traceCount",   "debugCount", "infoCount",
                                       "noticeCount",  "warningCount", "errorCount",
                                       "criticalCount"};
    char id[64];
    snprintf(id, sizeof(id), "logStats/%s", base_log_module_name((base_log_module_t)mod));
    cJSON *o = row_base(t, id, id);
    for (int l = 0; l < BASE_LOG_N_LEVELS; l++)
        cJSON_AddNumberToObject(o, keys[l],
                                (double)base_log_count((base_log_module_t)mod, (base_log_level_t)l));
    return o;
}

/* A stat's value by name, 0 when the registry has none (a unit test's registry). */
static double stat_value(stats_registry_t *reg, const char *name)
{
    stats_handle_t h;
    stats_kind_t kind;
    stats_value_t v;
    if (stats_lookup(reg, name, &h, &kind) == 0 && stats_value_get(reg, h, &v) == 0)
        return (double)v.value;
    return 0;
}

static cJSON *policy_row(req_t *q, const etype_t *t)
{
    const cfg_policy_t *pc = &q->m->cfg->policy;
    cJSON *o = row_base(t, "policy/1", "policy/1");
    cJSON_AddNumberToObject(o, "maxConnections", pc->max_connections);
    cJSON_AddNumberToObject(o, "maxMessageSize", (double)pc->max_message_size);
    cJSON_AddBoolToObject(o, "enableVhostPolicy", false); /* true is refused */
    cJSON_AddBoolToObject(o, "enableVhostNamePatterns", pc->enable_vhost_name_patterns);
    cJSON_AddNullToObject(o, "policyDir");                /* any is refused */
    add_str(o, "defaultVhost", pc->default_vhost ? pc->default_vhost : "$default");
    /* connectionsCurrent: the router's connectionCount; the rest: the workers' counts */
    double cur = stat_value(q->m->reg, "router.connectionCount");
    double conn_denied = stat_value(q->m->reg, "policyConnectionsDenied");
    double links_denied = stat_value(q->m->reg, "policyLinksDenied");
    double size_denied = stat_value(q->m->reg, "policyMaxMessageSizeDenied");
    cJSON_AddNumberToObject(o, "connectionsProcessed",
                            stat_value(q->m->reg, "policyConnectionsProcessed"));
    cJSON_AddNumberToObject(o, "connectionsDenied", conn_denied);
    cJSON_AddNumberToObject(o, "connectionsCurrent", cur);
    cJSON_AddNumberToObject(o, "linksDenied", links_denied);
    cJSON_AddNumberToObject(o, "maxMessageSizeDenied", size_denied);
    cJSON_AddNumberToObject(o, "totalDenials", conn_denied + links_denied + size_denied);
    return o;
}

/* The attribute names of a type, in column order (new array). */
static cJSON *type_names(req_t *q, const etype_t *t)
{
    if (t->kind == ET_STATS) {
        cJSON *names, *rows;
        if (stats_rows(q, t, 0, 0, &names, &rows) < 0)
            return NULL;
        cJSON_Delete(rows);
        return names;
    }
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, cJSON_CreateString("name"));
    cJSON_AddItemToArray(a, cJSON_CreateString("identity"));
    cJSON_AddItemToArray(a, cJSON_CreateString("type"));
    for (size_t i = 0; i < t->nattrs; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(t->attrs[i].name));
    return a;
}

/* Every row of a type as objects (new array); offset/count page where the source can. */
static cJSON *type_rows(req_t *q, const etype_t *t, long long offset, long long count,
                        bool *paged)
{
    rtr_mgmt_t *m = q->m;
    cJSON *rows = NULL;
    *paged = false;
    switch (t->kind) {
    case ET_STATS: {
        cJSON *names;
        if (stats_rows(q, t, offset, count, &names, &rows) < 0)
            return NULL;
        cJSON_Delete(names);
        *paged = true;
        return rows;
    }
    case ET_LISTENER:
        rows = cJSON_CreateArray();
        for (size_t i = 0; i < m->listeners.n; i++)
            cJSON_AddItemToArray(rows, listener_row(t, &m->listeners.v[i]));
        return rows;
    case ET_ADDRESS:
        rows = cJSON_CreateArray();
        for (size_t i = 0; i < m->addresses.n; i++)
            cJSON_AddItemToArray(rows, address_row(t, &m->addresses.v[i]));
        return rows;
    case ET_LOG:
        rows = cJSON_CreateArray();
        for (int i = 0; i < BASE_LOG_N_MODULES; i++)
            cJSON_AddItemToArray(rows, log_row(m, t, i));
        return rows;
    case ET_LOGSTATS:
        rows = cJSON_CreateArray();
        for (int i = 0; i < BASE_LOG_N_MODULES; i++)
            cJSON_AddItemToArray(rows, logstats_row(t, i));
        return rows;
    case ET_POLICY:
        rows = cJSON_CreateArray();
        cJSON_AddItemToArray(rows, policy_row(q, t));
        return rows;
    case ET_NODE:
        rows = cJSON_CreateArray();
        cJSON_AddItemToArray(rows, row_base(t, "self", "self"));
        return rows;
    case ET_EMPTY:
        return cJSON_CreateArray();
    }
    return cJSON_CreateArray();
}

/* The row whose name or identity is the request's (name first, as qdrouterd), or NULL with
 * a 404 set. Returns a detached row (caller frees). */
static cJSON *find_row(req_t *q, const etype_t *t)
{
    bool paged;
    cJSON *rows = type_rows(q, t, -1, -1, &paged);
    if (!rows)
        return NULL;
    cJSON *found = NULL;
    const char *key = q->name ? "name" : "identity";
    const char *want = q->name ? q->name : q->identity;
    cJSON *r;
    cJSON_ArrayForEach(r, rows)
    {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(r, key);
        if ((!want && t->singleton) || (want && cJSON_IsString(v) && strcmp(v->valuestring, want) == 0)) {
            found = cJSON_DetachItemViaPointer(rows, r);
            break;
        }
    }
    cJSON_Delete(rows);
    if (!found) {
        char full[128];
        fail(q, 404, "Not Found: no %s with %s '%s'", full_name(t, full, sizeof(full)), key,
             want ? want : "");
    }
    return found;
}

/* ---------------------------------------------------------------------------------------
 * Operations
 * ------------------------------------------------------------------------------------- */

static int op_query(req_t *q)
{
    const char *tn = q->entity_type ? q->entity_type : q->type;
    if (!q->entity_type && tn && etype_find(tn) && etype_find(tn)->kind == ET_NODE)
        tn = NULL; /* a node-level QUERY with no entityType: every entity (qdrouterd) */
    /* attributeNames: a list of strings, absent or empty for every attribute */
    const cJSON *an = NULL;
    if (q->body) {
        if (!cJSON_IsObject(q->body))
            return fail(q, 400, "Bad Request: the QUERY body must be a map");
        an = cJSON_GetObjectItemCaseSensitive(q->body, "attributeNames");
        if (an && !cJSON_IsNull(an) && !cJSON_IsArray(an))
            return fail(q, 400, "Bad Request: attributeNames must be a list of strings");
        const cJSON *e;
        cJSON_ArrayForEach(e, an)
        {
            if (!cJSON_IsString(e))
                return fail(q, 400, "Bad Request: attributeNames must be a list of strings");
        }
    }
    if (q->offset < -1 || q->count < -1)
        return fail(q, 400, "Bad Request: offset and count must not be negative");

    const etype_t *t = NULL;
    if (tn) {
        t = etype_find(tn);
        if (!t)
            return fail(q, 404, "Not Found: unknown entity type '%.200s'", tn);
    }
    /* the columns: requested ones (checked), or all of the type's */
    cJSON *names = NULL;
    if (an && cJSON_GetArraySize(an) > 0) {
        names = cJSON_Duplicate(an, true);
        if (t) {
            cJSON *all = type_names(q, t);
            if (!all) {
                cJSON_Delete(names);
                return -1;
            }
            const cJSON *e, *a;
            cJSON_ArrayForEach(e, names)
            {
                bool known = false;
                cJSON_ArrayForEach(a, all) known = known || strcmp(a->valuestring, e->valuestring) == 0;
                if (!known) {
                    char full[128];
                    fail(q, 404, "Not Found: '%.200s' is not an attribute of %s",
                         e->valuestring, full_name(t, full, sizeof(full)));
                    cJSON_Delete(all);
                    cJSON_Delete(names);
                    return -1;
                }
            }
            cJSON_Delete(all);
        }
    } else if (t) {
        names = type_names(q, t);
        if (!names)
            return -1;
    } else {
        names = cJSON_CreateArray();
        cJSON_AddItemToArray(names, cJSON_CreateString("name"));
        cJSON_AddItemToArray(names, cJSON_CreateString("identity"));
        cJSON_AddItemToArray(names, cJSON_CreateString("type"));
    }

    long long offset = q->offset < 0 ? 0 : q->offset;
    long long count = q->count < 0 || q->count > QUERY_MAX ? QUERY_MAX : q->count;
    cJSON *results = cJSON_CreateArray();
    long long skipped = 0, sent = 0;
    for (size_t i = 0; i < BASE_ARRAY_LEN(etypes) && sent < count; i++) {
        const etype_t *ti = t ? t : &etypes[i];
        if (t && i > 0)
            break;
        bool paged;
        cJSON *rows = type_rows(q, ti, t ? offset : -1, t ? count : -1, &paged);
        if (!rows) {
            cJSON_Delete(names);
            cJSON_Delete(results);
            return -1;
        }
        const cJSON *r;
        cJSON_ArrayForEach(r, rows)
        {
            if (!paged && skipped < offset) {
                skipped++;
                continue;
            }
            if (sent >= count)
                break;
            cJSON *row = cJSON_CreateArray();
            const cJSON *k;
            cJSON_ArrayForEach(k, names)
            {
                const cJSON *v = cJSON_GetObjectItemCaseSensitive(r, k->valuestring);
                cJSON_AddItemToArray(row, v ? cJSON_Duplicate(v, true) : cJSON_CreateNull());
            }
            cJSON_AddItemToArray(results, row);
            sent++;
        }
        cJSON_Delete(rows);
    }
    cJSON *body = cJSON_CreateObject();
    cJSON_AddItemToObject(body, "attributeNames", names);
    cJSON_AddItemToObject(body, "results", results);
    return ok(q, 200, body);
}

static const etype_t *target_type(req_t *q, bool required)
{
    if (!q->type) {
        if (required)
            fail(q, 400, "Bad Request: the %s request has no 'type'", q->op);
        return required ? NULL : &etypes[BASE_ARRAY_LEN(etypes) - 1];
    }
    const etype_t *t = etype_find(q->type);
    if (!t)
        fail(q, 404, "Not Found: unknown entity type '%.200s'", q->type);
    return t;
}

static int op_read(req_t *q)
{
    const etype_t *t = target_type(q, false);
    if (!t)
        return -1;
    if (!q->name && !q->identity && !t->singleton)
        return fail(q, 400, "Bad Request: READ needs a name or an identity");
    cJSON *row = find_row(q, t);
    if (!row)
        return -1;
    return ok(q, 200, row);
}

/* Validate attributes through the configuration parser: `[[type, attrs]]` as a
 * configuration file.  Returns the new configuration or NULL with a 400 set. */
static cfg_t *parse_entity(req_t *q, const char *cfg_type, const cJSON *attrs)
{
    cJSON *doc = cJSON_CreateArray();
    cJSON *ent = cJSON_CreateArray();
    cJSON_AddItemToArray(ent, cJSON_CreateString(cfg_type));
    cJSON_AddItemToArray(ent, cJSON_Duplicate(attrs, true));
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

static void own_cfg(rtr_mgmt_t *m, cfg_t *cfg)
{
    m->owned = base_realloc(m->owned, (m->n_owned + 1) * sizeof(*m->owned));
    m->owned[m->n_owned++] = cfg;
}

static bool name_taken(const rec_list_t *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i].name, name) == 0 || strcmp(l->v[i].identity, name) == 0)
            return true;
    return false;
}

static int op_create(req_t *q)
{
    rtr_mgmt_t *m = q->m;
    const etype_t *t = target_type(q, true);
    if (!t)
        return -1;
    char full[128];
    full_name(t, full, sizeof(full));
    if (t->kind == ET_STATS && strcmp(t->name, "router") == 0)
        return fail(q, 403, "Forbidden: CREATE of %s", full);
    if (!ops_has(t, "CREATE"))
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
    if (t->kind == ET_EMPTY) {
        cJSON_Delete(attrs);
        return fail(q, 501, "Not Implemented: %s entities are not supported by Junction yet",
                    full);
    }
    rec_list_t *list = t->kind == ET_LISTENER ? &m->listeners : &m->addresses;
    if (bn && name_taken(list, bn->valuestring)) {
        fail(q, 400, "Bad Request: duplicate name '%.200s' for %s", bn->valuestring, full);
        cJSON_Delete(attrs);
        return -1;
    }
    cfg_t *cfg = parse_entity(q, t->kind == ET_LISTENER ? "listener" : "address", attrs);
    cJSON_Delete(attrs);
    if (!cfg)
        return -1;
    cJSON *row;
    if (t->kind == ET_LISTENER) {
        if (cfg->n_listeners != 1) {
            cfg_free(cfg);
            return fail(q, 400, "Bad Request: not a listener");
        }
        char err[300] = "no way to start listeners";
        long id = m->hooks.listener_add
                      ? m->hooks.listener_add(m->hooks.ctx, &cfg->listeners[0], err, sizeof(err))
                      : -1;
        if (id <= 0) {
            cfg_free(cfg);
            return fail(q, 400, "Bad Request: %s", err);
        }
        own_cfg(m, cfg);
        char identity[300];
        listener_identity(&cfg->listeners[0], id, identity, sizeof(identity));
        rec_add(&m->listeners, cfg->listeners[0].name, identity, id, &cfg->listeners[0]);
        row = listener_row(t, &m->listeners.v[m->listeners.n - 1]);
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
        own_cfg(m, cfg);
        address_add_rec(m, ac);
        if (m->hooks.address_add)
            m->hooks.address_add(m->hooks.ctx, ac);
        row = address_row(t, &m->addresses.v[m->addresses.n - 1]);
    }
    return ok(q, 201, row);
}

static int find_rec(req_t *q, const etype_t *t, rec_list_t *l)
{
    const char *want = q->name ? q->name : q->identity;
    if (!want)
        return fail(q, 400, "Bad Request: %s needs a name or an identity", q->op);
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(q->name ? l->v[i].name : l->v[i].identity, want) == 0)
            return (int)i;
    char full[128];
    return fail(q, 404, "Not Found: no %s with %s '%.200s'", full_name(t, full, sizeof(full)),
                q->name ? "name" : "identity", want);
}

static int op_delete(req_t *q)
{
    rtr_mgmt_t *m = q->m;
    const etype_t *t = target_type(q, true);
    if (!t)
        return -1;
    char full[128];
    full_name(t, full, sizeof(full));
    if (t->kind == ET_STATS && (strcmp(t->name, "router") == 0 || strcmp(t->name, "connection") == 0))
        return fail(q, 403, "Forbidden: DELETE of %s%s", full,
                    strcmp(t->name, "connection") == 0
                        ? " (UPDATE its adminStatus to 'deleted' to close it)"
                        : "");
    if (!ops_has(t, "DELETE"))
        return fail(q, 501, "Not Implemented: operation DELETE is not implemented for %s", full);
    if (t->kind == ET_EMPTY) {
        const char *want = q->name ? q->name : q->identity;
        return fail(q, 404, "Not Found: no %s with %s '%.200s'", full,
                    q->name ? "name" : "identity", want ? want : "");
    }
    rec_list_t *l = t->kind == ET_LISTENER ? &m->listeners : &m->addresses;
    int i = find_rec(q, t, l);
    if (i < 0)
        return -1;
    if (t->kind == ET_LISTENER) {
        if (m->hooks.listener_del)
            m->hooks.listener_del(m->hooks.ctx, l->v[i].id);
    } else if (m->hooks.address_del) {
        m->hooks.address_del(m->hooks.ctx, l->v[i].cfg);
    }
    rec_del(l, (size_t)i);
    return ok(q, 204, NULL);
}

static int update_log(req_t *q, const etype_t *t)
{
    /* the module from name/identity "log/<MODULE>" (or the body's module) */
    const char *want = q->name ? q->name : q->identity;
    const cJSON *bm = q->body ? cJSON_GetObjectItemCaseSensitive(q->body, "module") : NULL;
    const char *mod_name = want && strncmp(want, "log/", 4) == 0 ? want + 4
                           : cJSON_IsString(bm)                 ? bm->valuestring
                                                                : want;
    int mod = mod_name ? base_log_module_find(mod_name) : -1;
    if (mod < 0)
        return fail(q, 404, "Not Found: no log with %s '%.200s'", q->name ? "name" : "identity",
                    want ? want : "");
    const cJSON *e;
    uint8_t mask = 0;
    bool set_mask = false;
    cJSON_ArrayForEach(e, q->body)
    {
        const char *k = e->string;
        if (strcmp(k, "name") == 0 || strcmp(k, "identity") == 0 || strcmp(k, "type") == 0 ||
            strcmp(k, "module") == 0)
            continue;
        if (strcmp(k, "enable") == 0) {
            if (!cJSON_IsString(e) || base_log_parse_enable(e->valuestring, &mask) != 0)
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
    return ok(q, 200, log_row(q->m, t, mod));
}

static int update_connection(req_t *q, const etype_t *t)
{
    const cJSON *e;
    const char *status = NULL;
    cJSON_ArrayForEach(e, q->body)
    {
        const char *k = e->string;
        if (strcmp(k, "name") == 0 || strcmp(k, "identity") == 0 || strcmp(k, "type") == 0)
            continue;
        if (strcmp(k, "adminStatus") == 0 && cJSON_IsString(e) &&
            (strcmp(e->valuestring, "deleted") == 0 || strcmp(e->valuestring, "enabled") == 0)) {
            status = e->valuestring;
            continue;
        }
        if (strcmp(k, "adminStatus") == 0)
            return fail(q, 400, "Bad Request: adminStatus: expected 'enabled' or 'deleted'");
        return fail(q, 400, "Bad Request: attribute '%.100s' of connection cannot be updated", k);
    }
    if (!q->name && !q->identity)
        return fail(q, 400, "Bad Request: UPDATE needs a name or an identity");
    cJSON *row = find_row(q, t);
    if (!row)
        return -1;
    if (status && strcmp(status, "deleted") == 0) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(row, "identity");
        uint64_t cid = cJSON_IsString(id) ? strtoull(id->valuestring, NULL, 10) : 0;
        if (cid && q->m->hooks.conn_close)
            q->m->hooks.conn_close(q->m->hooks.ctx, cid);
        cJSON_ReplaceItemInObjectCaseSensitive(row, "adminStatus", cJSON_CreateString("deleted"));
        cJSON_ReplaceItemInObjectCaseSensitive(row, "operStatus", cJSON_CreateString("closing"));
    }
    return ok(q, 200, row);
}

static int op_update(req_t *q)
{
    const etype_t *t = target_type(q, true);
    if (!t)
        return -1;
    char full[128];
    full_name(t, full, sizeof(full));
    if (q->body && !cJSON_IsObject(q->body))
        return fail(q, 400, "Bad Request: the UPDATE body must be a map of attributes");
    if (t->kind == ET_LOG)
        return update_log(q, t);
    if (t->kind == ET_STATS && strcmp(t->name, "connection") == 0)
        return update_connection(q, t);
    if (t->kind == ET_STATS && strcmp(t->name, "router") == 0) {
        /* qdrouterd answers 200 and changes nothing; an attribute that would not change is
         * refused here rather than reported as done */
        const cJSON *e;
        cJSON_ArrayForEach(e, q->body)
        {
            const char *k = e->string;
            if (strcmp(k, "name") != 0 && strcmp(k, "identity") != 0 && strcmp(k, "type") != 0)
                return fail(q, 400, "Bad Request: attribute '%.100s' of router cannot be updated "
                                    "at run time", k);
        }
        cJSON *row = find_row(q, t);
        return row ? ok(q, 200, row) : -1;
    }
    return fail(q, 501, "Not Implemented: operation UPDATE is not implemented for %s", full);
}

/* GET-TYPES / GET-OPERATIONS / GET-ATTRIBUTES: a map full type name -> list. */
static int op_get_map(req_t *q, int what)
{
    const etype_t *only = NULL;
    if (q->entity_type) {
        only = etype_find(q->entity_type);
        if (!only)
            return fail(q, 404, "Not Found: unknown entity type '%.200s'", q->entity_type);
    }
    cJSON *body = cJSON_CreateObject();
    for (size_t i = 0; i < BASE_ARRAY_LEN(etypes); i++) {
        const etype_t *t = &etypes[i];
        if (only && t != only)
            continue;
        char full[128];
        full_name(t, full, sizeof(full));
        cJSON *list = cJSON_CreateArray();
        if (what == 0) { /* base types */
            if (t->kind != ET_NODE) {
                char base[128];
                snprintf(base, sizeof(base), "%s.%s", PREFIX, t->extends);
                cJSON_AddItemToArray(list, cJSON_CreateString(base));
                cJSON_AddItemToArray(list, cJSON_CreateString(PREFIX ".entity"));
            }
        } else if (what == 1) { /* operations */
            const char *p = t->ops;
            while (*p) {
                const char *c = strchr(p, ',');
                size_t len = c ? (size_t)(c - p) : strlen(p);
                char *op = base_strndup(p, len);
                cJSON_AddItemToArray(list, cJSON_CreateString(op));
                free(op);
                if (!c)
                    break;
                p = c + 1;
            }
        } else { /* attributes */
            cJSON_Delete(list);
            list = type_names(q, t);
            if (!list) {
                cJSON_Delete(body);
                return -1;
            }
        }
        cJSON_AddItemToObject(body, full, list);
    }
    return ok(q, 200, body);
}

/* The schema, qdrouterd's qdrouter.json shape (new object) */
static cJSON *schema(req_t *q)
{
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "prefix", PREFIX);
    cJSON_AddStringToObject(s, "description", "Junction's management schema (qdrouterd's entity "
                                              "types and attributes)");
    cJSON *types = cJSON_AddObjectToObject(s, "entityTypes");
    for (size_t i = 0; i < BASE_ARRAY_LEN(etypes); i++) {
        const etype_t *t = &etypes[i];
        char full[128];
        cJSON *e = cJSON_AddObjectToObject(types, t->name);
        cJSON_AddStringToObject(e, "fullName", full_name(t, full, sizeof(full)));
        cJSON_AddStringToObject(e, "extends", t->extends);
        if (t->singleton)
            cJSON_AddBoolToObject(e, "singleton", true);
        cJSON *ops = cJSON_AddArrayToObject(e, "operations");
        for (const char *p = t->ops; *p;) {
            const char *c = strchr(p, ',');
            size_t len = c ? (size_t)(c - p) : strlen(p);
            char *op = base_strndup(p, len);
            cJSON_AddItemToArray(ops, cJSON_CreateString(op));
            free(op);
            if (!c)
                break;
            p = c + 1;
        }
        cJSON *attrs = cJSON_AddObjectToObject(e, "attributes");
        cJSON *a;
        a = cJSON_AddObjectToObject(attrs, "name");
        cJSON_AddStringToObject(a, "type", "string");
        cJSON_AddBoolToObject(a, "create", true);
        a = cJSON_AddObjectToObject(attrs, "identity");
        cJSON_AddStringToObject(a, "type", "string");
        a = cJSON_AddObjectToObject(attrs, "type");
        cJSON_AddStringToObject(a, "type", "string");
        cJSON_AddBoolToObject(a, "required", true);
        if (t->kind == ET_STATS) {
            cJSON *names = type_names(q, t);
            const cJSON *n;
            cJSON_ArrayForEach(n, names)
            {
                if (cJSON_GetObjectItemCaseSensitive(attrs, n->valuestring))
                    continue;
                a = cJSON_AddObjectToObject(attrs, n->valuestring);
                const char *ty = col_type(n->valuestring);
                cJSON *tj = ty[0] == '[' ? cJSON_Parse(ty) : NULL;
                if (tj)
                    cJSON_AddItemToObject(a, "type", tj);
                else
                    cJSON_AddStringToObject(a, "type", ty);
                cJSON_AddBoolToObject(a, "graph", strcmp(ty, "integer") == 0);
            }
            cJSON_Delete(names);
            if (strcmp(t->name, "connection") == 0 || strcmp(t->name, "router.link") == 0)
                cJSON_AddBoolToObject(cJSON_GetObjectItemCaseSensitive(attrs, "adminStatus"),
                                      "update", true);
            continue;
        }
        for (size_t k = 0; k < t->nattrs; k++) {
            const attr_def_t *d = &t->attrs[k];
            a = cJSON_AddObjectToObject(attrs, d->name);
            cJSON *tj = d->type[0] == '[' ? cJSON_Parse(d->type) : NULL;
            if (tj)
                cJSON_AddItemToObject(a, "type", tj);
            else
                cJSON_AddStringToObject(a, "type", d->type);
            if (d->dflt) {
                cJSON *dj = cJSON_Parse(d->dflt);
                if (dj)
                    cJSON_AddItemToObject(a, "default", dj);
            }
            if (d->create)
                cJSON_AddBoolToObject(a, "create", true);
            if (d->update)
                cJSON_AddBoolToObject(a, "update", true);
            if (d->required)
                cJSON_AddBoolToObject(a, "required", true);
        }
    }
    return s;
}

static int op_get_log(req_t *q)
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
    return ok(q, 200, list);
}

static int dispatch(req_t *q)
{
    const char *op = q->op;
    if (strcmp(op, "QUERY") == 0)
        return op_query(q);
    if (strcmp(op, "READ") == 0)
        return op_read(q);
    if (strcmp(op, "CREATE") == 0)
        return op_create(q);
    if (strcmp(op, "UPDATE") == 0)
        return op_update(q);
    if (strcmp(op, "DELETE") == 0)
        return op_delete(q);
    if (strcmp(op, "GET-TYPES") == 0)
        return op_get_map(q, 0);
    if (strcmp(op, "GET-OPERATIONS") == 0)
        return op_get_map(q, 1);
    if (strcmp(op, "GET-ATTRIBUTES") == 0)
        return op_get_map(q, 2);
    if (strcmp(op, "GET-ANNOTATIONS") == 0)
        return ok(q, 200, cJSON_CreateObject());
    if (strcmp(op, "GET-MGMT-NODES") == 0)
        return ok(q, 200, cJSON_CreateArray()); /* standalone: no other routers */
    if (strcmp(op, "GET-SCHEMA") == 0)
        return ok(q, 200, schema(q));
    if (strcmp(op, "GET-JSON-SCHEMA") == 0) {
        cJSON *s = schema(q);
        q->out_str = q->indent > 0 ? cJSON_Print(s) : cJSON_PrintUnformatted(s);
        cJSON_Delete(s);
        q->out_text = q->out_str;
        return ok(q, 200, NULL);
    }
    if (strcmp(op, "GET-LOG") == 0)
        return op_get_log(q);
    return fail(q, 501, "Not Implemented: unknown operation '%.100s'", op);
}

/* ---------------------------------------------------------------------------------------
 * Request decoding and the reply
 * ------------------------------------------------------------------------------------- */

/* Read the application properties into q.  Returns 0, or -1 with a 400 set. */
static int read_props(req_t *q, pn_data_t *p)
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

static int read_body(req_t *q, pn_data_t *b)
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

static void req_clear(req_t *q)
{
    free(q->op);
    free(q->type);
    free(q->name);
    free(q->identity);
    free(q->entity_type);
    cJSON_Delete(q->body);
    cJSON_Delete(q->out);
    free(q->out_str);
}

int rtr_mgmt_handle(rtr_mgmt_t *m, const uint8_t *bytes, size_t len, uint8_t **out,
                    size_t *out_len, char **to, const char **why)
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

    req_t q = {.m = m, .offset = -1, .count = -1, .limit = -1, .indent = -1};
    if (read_props(&q, pn_message_properties(req)) == 0 &&
        read_body(&q, pn_message_body(req)) == 0)
        dispatch(&q);

    pn_message_clear(rep);
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
    pn_data_t *body = pn_message_body(rep);
    if (q.out_text)
        pn_data_put_string(body, pn_bytes(strlen(q.out_text), q.out_text));
    else if (q.out)
        json_to_data(body, q.out);
    else {
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
