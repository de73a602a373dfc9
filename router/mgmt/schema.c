/* router/mgmt/schema.c: the entity schema - every type the management module knows, its
 * names, operations and attributes, and for the operational types where each column's value
 * comes from - in one table that the AMQP node, the socket's entity.query and GET-SCHEMA all
 * read.  Constant data and lookups; any thread.
 */
#include "router/mgmt/mgmt_int.h"

#include "core/base/base.h"

#include <stdio.h>
#include <string.h>

// clang-format off
/* A configuration attribute: name, type, default, create, update, required. */
#define A(n, t, d, c, u, r)                                                               \
    {.name = n, .type = t, .dflt = d, .create = c, .update = u, .required = r}
static const mgmt_attr_t listener_attrs[] = {
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
    /* Junction's own, read-only: the listener's stats (router/lstats.h) */
    A("connectionsAccepted", "integer", NULL, false, false, false),
    A("tlsHandshakesFailed", "integer", NULL, false, false, false),
    A("authFailed", "integer", NULL, false, false, false),
};
static const mgmt_attr_t connector_attrs[] = {
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
    A("maxSessions", "integer", "32768", true, false, false),
    A("saslUsername", "string", NULL, true, false, false),
    A("failoverUrls", "string", NULL, false, false, false),
    A("policyVhost", "string", NULL, true, false, false),
};
static const mgmt_attr_t address_attrs[] = {
    A("prefix", "string", NULL, true, false, false),
    A("pattern", "string", NULL, true, false, false),
    A("distribution", "[\"multicast\",\"closest\",\"balanced\",\"unavailable\"]", "\"balanced\"", true, false, false),
    A("waypoint", "boolean", "false", true, false, false),
    A("ingressPhase", "integer", NULL, true, false, false),
    A("egressPhase", "integer", NULL, true, false, false),
    A("priority", "integer", NULL, true, false, false),
    A("enableFallback", "boolean", "false", true, false, false),
};
static const mgmt_attr_t autolink_attrs[] = {
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
static const mgmt_attr_t linkroute_attrs[] = {
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
/* sslProfile: CREATE and DELETE as qdrouterd, and UPDATE (qdrouterd has none): every
 * attribute may be changed, and an UPDATE reads the files again whatever it gives */
static const mgmt_attr_t ssl_profile_attrs[] = {
    A("ciphers", "string", NULL, true, true, false),
    A("protocols", "string", NULL, true, true, false),
    A("caCertFile", "string", NULL, true, true, false),
    A("certFile", "string", NULL, true, true, false),
    A("privateKeyFile", "string", NULL, true, true, false),
    A("passwordFile", "string", NULL, true, true, false),
    A("password", "string", NULL, true, true, false),
    A("uidFormat", "string", NULL, true, true, false),
    A("uidNameMappingFile", "string", NULL, true, true, false),
};
static const mgmt_attr_t log_attrs[] = {
    A("module", "[\"ROUTER\",\"ROUTER_CORE\",\"ROUTER_HELLO\",\"ROUTER_LS\",\"ROUTER_MA\",\"MESSAGE\","
                "\"SERVER\",\"AGENT\",\"AUTHSERVICE\",\"CONTAINER\",\"ERROR\",\"POLICY\",\"HTTP\","
                "\"CONN_MGR\",\"PYTHON\",\"PROTOCOL\",\"DEFAULT\"]", NULL, true, false, true),
    A("enable", "string", "\"default\"", true, true, false),
    /* set at start-up only (UPDATE changes `enable`) */
    A("includeTimestamp", "boolean", NULL, true, false, false),
    A("includeSource", "boolean", NULL, true, false, false),
    A("outputFile", "string", NULL, true, false, false),
};
static const mgmt_attr_t logstats_attrs[] = {
    A("traceCount", "integer", NULL, false, false, false),
    A("debugCount", "integer", NULL, false, false, false),
    A("infoCount", "integer", NULL, false, false, false),
    A("noticeCount", "integer", NULL, false, false, false),
    A("warningCount", "integer", NULL, false, false, false),
    A("errorCount", "integer", NULL, false, false, false),
    A("criticalCount", "integer", NULL, false, false, false),
};
static const mgmt_attr_t policy_attrs[] = {
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
static const mgmt_attr_t vhost_attrs[] = {
    A("hostname", "string", NULL, true, true, true),
    A("aliases", "string", NULL, true, true, false),
    A("maxConnections", "integer", "65535", true, true, false),
    A("maxMessageSize", "integer", NULL, true, true, false),
    A("maxConnectionsPerUser", "integer", "65535", true, true, false),
    A("maxConnectionsPerHost", "integer", "65535", true, true, false),
    A("allowUnknownUser", "boolean", "false", true, true, false),
    A("groups", "map", NULL, true, true, false),
};
/* qdrouterd's schema type for a group (JSON-format configuration only: no entities); qdstat
 * --vhostgroups reads its defaults */
static const mgmt_attr_t vhost_group_attrs[] = {
    A("users", "string", NULL, true, true, true),
    A("remoteHosts", "string", NULL, true, true, true),
    A("maxConnectionsPerUser", "integer", NULL, true, true, false),
    A("maxConnectionsPerHost", "integer", NULL, true, true, false),
    A("maxMessageSize", "integer", NULL, true, true, false),
    A("maxFrameSize", "integer", NULL, true, true, false),
    A("maxSessionWindow", "integer", NULL, true, true, false),
    A("maxSessions", "integer", NULL, true, true, false),
    A("maxSenders", "integer", "2147483647", true, true, false),
    A("maxReceivers", "integer", "2147483647", true, true, false),
    A("allowDynamicSource", "boolean", "false", true, true, false),
    A("allowAnonymousSender", "boolean", "false", true, true, false),
    A("allowUserIdProxy", "boolean", "false", true, true, false),
    A("allowWaypointLinks", "boolean", "true", true, true, false),
    A("allowDynamicLinkRoutes", "boolean", "true", true, true, false),
    A("allowAdminStatusUpdate", "boolean", "true", true, true, false),
    A("allowFallbackLinks", "boolean", "true", true, true, false),
    A("sources", "string", NULL, true, true, false),
    A("targets", "string", NULL, true, true, false),
    A("sourcePattern", "string", NULL, true, true, false),
    A("targetPattern", "string", NULL, true, true, false),
};
static const mgmt_attr_t vhost_stats_attrs[] = {
    A("id", "string", NULL, false, false, false),
    A("hostname", "string", NULL, false, false, false),
    A("connectionsApproved", "integer", NULL, false, false, false),
    A("connectionsDenied", "integer", NULL, false, false, false),
    A("connectionsCurrent", "integer", NULL, false, false, false),
    A("sessionDenied", "integer", NULL, false, false, false),
    A("senderDenied", "integer", NULL, false, false, false),
    A("receiverDenied", "integer", NULL, false, false, false),
    A("maxMessageSizeDenied", "integer", NULL, false, false, false),
    A("perUserState", "map", NULL, false, false, false),
    A("perHostState", "map", NULL, false, false, false),
    /* Junction's own: denials per user */
    A("perUserDenied", "map", NULL, false, false, false),
};
static const mgmt_attr_t node_attrs[] = {
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

/* Operational columns: C(name, type, source, arg, ival, null_if_empty, arg2); U() is the
 * same with update (adminStatus, which UPDATE changes). */
#define C(n, t, s, a, i, e, a2)                                                           \
    {.name = n, .type = t, .src = MGMT_SRC_##s, .arg = a, .ival = i, .null_if_empty = e,   \
     .arg2 = a2}
#define U(n, t, s, a, i, e, a2)                                                           \
    {.name = n, .type = t, .update = true, .src = MGMT_SRC_##s, .arg = a, .ival = i,       \
     .null_if_empty = e, .arg2 = a2}
#define STR "string"
#define INT "integer"
#define BOOL "boolean"
#define DIR "[\"in\",\"out\"]"
static const mgmt_attr_t router_cols[] = {
    C("name",       STR, INFO, "router_id", 0, false, NULL),
    C("identity",   STR, STR,  "1", 0, false, NULL),
    C("id",         STR, INFO, "router_id", 0, false, NULL),
    C("type",       STR, STR,  MGMT_PREFIX ".router", 0, false, NULL),
    C("mode",       "[\"standalone\",\"interior\",\"edge\"]", INFO, "mode", 0, false, NULL),
    C("area",       STR, STR,  "0", 0, false, NULL),
    C("version",    STR, INFO, "version", 0, false, NULL),
    /* qdrouterd counters for features a standalone Junction does not have (yet): 0 */
    C("nodeCount",                       INT, INT, NULL, 0, false, NULL),
    C("linkRouteCount",                  INT, INT, NULL, 0, false, NULL),
    C("autoLinkCount",                   INT, INT, NULL, 0, false, NULL),
    C("blockedLinkCount",                INT, INT, NULL, 0, false, NULL),
    C("deliveriesIngressRouteContainer", INT, INT, NULL, 0, false, NULL),
    C("deliveriesEgressRouteContainer",  INT, INT, NULL, 0, false, NULL),
};
static const mgmt_attr_t conn_cols[] = {
    C("name",            STR,  LABEL, "connection", 0, false, NULL),
    C("identity",        STR,  LABEL, "connection", 0, false, NULL),
    C("type",            STR,  STR,   MGMT_PREFIX ".connection", 0, false, NULL),
    C("host",            STR,  LABEL, "host", 0, false, NULL),
    C("container",       STR,  LABEL, "container", 0, false, NULL),
    C("role",            STR,  LABEL, "role", 0, false, NULL),
    C("protocol",        STR,  STR,   "amqp", 0, false, NULL),
    C("dir",             DIR,  LABEL, "dir", 0, false, NULL),
    C("opened",          BOOL, BOOL,  NULL, 1, false, NULL),
    /* an edge router's standby edge connections are not active (qdrouterd's) */
    C("active",          BOOL, FIELD_ZERO, "edgeStandby", 0, false, NULL),
    U("adminStatus",     STR,  STR,   "enabled", 0, false, NULL),
    C("operStatus",      STR,  STR,   "up", 0, false, NULL),
    /* Proton's SASL layer: a client that went through it is authenticated (ANONYMOUS too,
       user "anonymous", as qdrouterd shows it); one that skipped it has neither */
    C("isAuthenticated", BOOL, LABEL_SET, "sasl", 0, false, NULL),
    C("isEncrypted",     BOOL, TLS,   "tls", 0, false, NULL),
    C("sasl",            STR,  LABEL, "sasl", 0, true, NULL),
    C("user",            STR,  LABEL, "user", 0, false, NULL),
    C("ssl",             BOOL, TLS,   "tls", 0, false, NULL),
    C("sslProto",        STR,  TLS,   "tls", 1, false, NULL),
    C("sslCipher",       STR,  TLS,   "tls", 2, false, NULL),
    C("sslSsf",          INT,  TLS,   "tls", 3, false, NULL),
    C("tenant",          STR,  NULL,  NULL, 0, false, NULL),
    C("enableProtocolTrace", BOOL, BOOL, NULL, 0, false, NULL),
    C("properties",      "map", NULL, NULL, 0, false, NULL),
    C("uptimeSeconds",   INT,  UPTIME, "openedAt", 0, false, NULL),
    C("lastDlvSeconds",  INT,  UPTIME, "lastDeliveryAt", 0, false, NULL),
};
static const mgmt_attr_t link_cols[] = {
    C("name",         STR, LABEL, "link", 0, false, NULL),
    C("identity",     STR, LABEL, "link", 0, false, NULL),
    C("type",         STR, STR,   MGMT_PREFIX ".router.link", 0, false, NULL),
    /* endpoint, or an inter-router connection's router-control and inter-router links */
    C("linkType",     STR, LABEL, "linkType", 0, false, "endpoint"),
    C("linkDir",      DIR, LABEL, "dir", 0, false, NULL),
    C("connectionId", STR, LABEL, "connection", 0, false, NULL),
    C("owningAddr",   STR, LABEL, "address", 0, true, NULL),
    /* qdrouterd: the peer link of a link-routed link; message-routed links have none */
    C("peer",         STR, NULL,  NULL, 0, false, NULL),
    C("linkName",     STR, LABEL, "name", 0, false, NULL),
    U("adminStatus",  STR, STR,   "enabled", 0, false, NULL),
    C("operStatus",   STR, STR,   "up", 0, false, NULL),
    /* a data link's priority (0..9), 9 for control links, else qdrouterd's default 4 */
    C("priority",     INT, LABEL_INT, "priority", 4, false, NULL),
    C("ingressHistogram", "list", NULL, NULL, 0, false, NULL),
};
static const mgmt_attr_t addr_cols[] = {
    C("name",           STR, LABEL, "address", 0, false, NULL),
    C("identity",       STR, LABEL, "address", 0, false, NULL),
    C("type",           STR, STR,   MGMT_PREFIX ".router.address", 0, false, NULL),
    C("key",            STR, LABEL, "address", 0, false, NULL),
    C("distribution",   STR, LABEL, "distribution", 0, false, NULL),
    C("inProcess",      INT, FIELD, "inProcess", 0, false, "0"),
    C("remoteCount",    INT, FIELD, "remoteCount", 0, false, "0"),
    C("containerCount", INT, INT,   NULL, 0, false, NULL),
    C("priority",       INT, INT,   NULL, -1, false, NULL),
    C("remoteHostRouters",               "list", NULL, NULL, 0, false, NULL),
    C("deliveriesToContainer",   INT, FIELD, "deliveriesToContainer", 0, false, "0"),
    C("deliveriesFromContainer", INT, FIELD, "deliveriesFromContainer", 0, false, "0"),
    C("deliveriesIngressRouteContainer", INT, INT, NULL, 0, false, NULL),
    C("deliveriesEgressRouteContainer",  INT, INT, NULL, 0, false, NULL),
    C("transitOutstanding",              INT, NULL, NULL, 0, false, NULL),
    C("trackedDeliveries",               INT, INT, NULL, 0, false, NULL),
};
static const mgmt_attr_t alloc_cols[] = {
    C("name",              STR, PREFIXED, "typeName", 0, false, "allocator/"),
    C("identity",          STR, PREFIXED, "typeName", 0, false, "allocator/"),
    C("type",              STR, STR,      MGMT_PREFIX ".allocator", 0, false, NULL),
    C("typeName",          STR, LABEL,    "typeName", 0, false, NULL),
    C("localFreeListMax",  INT, TIMES,    "transferBatchSize", 2, false, NULL),
    C("globalFreeListMax", INT, INT,      NULL, 0, false, NULL),
    C("totalFreeToHeap",   INT, INT,      NULL, 0, false, NULL),
    C("heldByThreads",     INT, DIFF,     "totalAllocFromHeap", 0, false, "globalFreeListItems"),
};
#undef C
#undef U
#undef STR
#undef INT
#undef BOOL
#undef DIR

#define N(a) a, BASE_ARRAY_LEN(a)
#define CE "configurationEntity"
#define OE "operationalEntity"
#define CDRQ "CREATE,DELETE,READ,QUERY"
const mgmt_type_t mgmt_types[] = {
    {"router", NULL, MGMT_PREFIX ".router", MGMT_K_STATS, CE, "READ,QUERY,UPDATE", "router",
     N(router_cols), true},
    {"listener", NULL, MGMT_PREFIX ".listener", MGMT_K_LISTENER, CE, CDRQ, NULL,
     N(listener_attrs), false},
    {"connector", NULL, MGMT_PREFIX ".connector", MGMT_K_CONNECTOR, CE, CDRQ, NULL,
     N(connector_attrs), false},
    {"router.config.address", "address", MGMT_PREFIX ".router.config.address", MGMT_K_ADDRESS,
     CE, CDRQ, NULL, N(address_attrs), false},
    {"router.config.autoLink", "autoLink", MGMT_PREFIX ".router.config.autoLink", MGMT_K_AUTOLINK,
     CE, CDRQ, NULL, N(autolink_attrs), false},
    {"router.config.linkRoute", "linkRoute", MGMT_PREFIX ".router.config.linkRoute",
     MGMT_K_LINK_ROUTE, CE, CDRQ, NULL, N(linkroute_attrs), false},
    {"sslProfile", NULL, MGMT_PREFIX ".sslProfile", MGMT_K_SSL_PROFILE, CE,
     "CREATE,UPDATE,DELETE,READ,QUERY", NULL, N(ssl_profile_attrs), false},
    {"log", NULL, MGMT_PREFIX ".log", MGMT_K_LOG, CE, "UPDATE,READ,QUERY", NULL, N(log_attrs),
     false},
    {"policy", NULL, MGMT_PREFIX ".policy", MGMT_K_POLICY, CE, "READ,QUERY", NULL,
     N(policy_attrs), true},
    /* no UPDATE (adminStatus) until a link can be disabled: a listed operation must work */
    {"router.link", "link", MGMT_PREFIX ".router.link", MGMT_K_STATS, OE, "READ,QUERY", "link",
     N(link_cols), false},
    {"router.address", NULL, MGMT_PREFIX ".router.address", MGMT_K_STATS, OE, "READ,QUERY",
     "address", N(addr_cols), false},
    {"connection", NULL, MGMT_PREFIX ".connection", MGMT_K_STATS, OE, "UPDATE,READ,QUERY",
     "connection", N(conn_cols), false},
    {"allocator", NULL, MGMT_PREFIX ".allocator", MGMT_K_STATS, OE, "READ,QUERY", "allocator",
     N(alloc_cols), false},
    {"logStats", NULL, MGMT_PREFIX ".logStats", MGMT_K_LOGSTATS, OE, "READ,QUERY", NULL,
     N(logstats_attrs), false},
    {"router.node", "node", MGMT_PREFIX ".router.node", MGMT_K_RNODE, OE, "READ,QUERY", NULL,
     N(node_attrs), false},
    {"vhost", NULL, MGMT_PREFIX ".vhost", MGMT_K_VHOST, CE, "CREATE,UPDATE,DELETE,READ,QUERY",
     NULL, N(vhost_attrs), false},
    {"vhostUserGroupSettings", NULL, MGMT_PREFIX ".vhostUserGroupSettings", MGMT_K_EMPTY, CE, "",
     NULL, N(vhost_group_attrs), false},
    {"vhostStats", NULL, MGMT_PREFIX ".vhostStats", MGMT_K_VHOST_STATS, OE, "READ,QUERY", NULL,
     N(vhost_stats_attrs), false},
    /* last: mgmt_type_node() */
    {"management", NULL, MGMT_NODE_TYPE, MGMT_K_NODE, MGMT_NODE_TYPE,
     "QUERY,GET-TYPES,GET-ANNOTATIONS,GET-OPERATIONS,GET-ATTRIBUTES,GET-MGMT-NODES,GET-SCHEMA,"
     "GET-JSON-SCHEMA,GET-LOG", NULL, NULL, 0, true},
};
#undef N
#undef CE
#undef OE
#undef CDRQ
// clang-format on
const size_t mgmt_ntypes = BASE_ARRAY_LEN(mgmt_types);

const mgmt_type_t *mgmt_type_node(void)
{
    return &mgmt_types[BASE_ARRAY_LEN(mgmt_types) - 1];
}

const mgmt_type_t *mgmt_type_find(const char *name)
{
    static const char pre[] = MGMT_PREFIX ".";
    if (!name)
        return NULL;
    if (strcmp(name, MGMT_NODE_TYPE) == 0 || strcmp(name, MGMT_PREFIX ".management") == 0)
        return mgmt_type_node();
    const char *s = strncmp(name, pre, sizeof(pre) - 1) == 0 ? name + sizeof(pre) - 1 : name;
    for (size_t i = 0; i < BASE_ARRAY_LEN(mgmt_types); i++) {
        const mgmt_type_t *t = &mgmt_types[i];
        if (strcmp(s, t->name) == 0 || (t->alias && strcmp(s, t->alias) == 0))
            return t;
    }
    return NULL;
}

const mgmt_type_t *mgmt_type_find_stats(const char *name)
{
    for (size_t i = 0; i < BASE_ARRAY_LEN(mgmt_types); i++) {
        const mgmt_type_t *t = &mgmt_types[i];
        if (t->kind == MGMT_K_STATS && (strcmp(name, t->family) == 0 ||
                                        strcmp(name, t->name) == 0 || strcmp(name, t->full) == 0))
            return t;
    }
    return NULL;
}

bool mgmt_type_has_op(const mgmt_type_t *t, const char *op)
{
    size_t n = strlen(op);
    for (const char *p = t->ops; *p;) {
        const char *c = strchr(p, ',');
        size_t      len = c ? (size_t)(c - p) : strlen(p);
        if (len == n && memcmp(p, op, n) == 0)
            return true;
        if (!c)
            break;
        p = c + 1;
    }
    return false;
}

/* "type": a string, or an enum list (JSON text) as a list. */
static void add_type(cJSON *a, const char *ty)
{
    cJSON *tj = ty[0] == '[' ? cJSON_Parse(ty) : NULL;
    if (tj)
        cJSON_AddItemToObject(a, "type", tj);
    else
        cJSON_AddStringToObject(a, "type", ty);
}

/* An operational type's attributes: every column of its rows. */
static void stats_attrs(cJSON *attrs, const mgmt_type_t *t, stats_registry_t *reg)
{
    mgmt_rows_t *r = mgmt_rows_new(t, reg, NULL, NULL);
    for (unsigned i = 0; i < mgmt_rows_ncols(r); i++) {
        const char *name = mgmt_rows_col_name(r, i);
        if (cJSON_GetObjectItemCaseSensitive(attrs, name))
            continue;
        const mgmt_attr_t *d = NULL;
        for (size_t k = 0; k < t->nattrs && !d; k++)
            if (strcmp(t->attrs[k].name, name) == 0)
                d = &t->attrs[k];
        const char *ty = d ? d->type : "integer";
        cJSON      *a = cJSON_AddObjectToObject(attrs, name);
        add_type(a, ty);
        cJSON_AddBoolToObject(a, "graph", strcmp(ty, "integer") == 0);
        if (d && d->update)
            cJSON_AddBoolToObject(a, "update", true);
    }
    mgmt_rows_free(r);
}

cJSON *mgmt_schema_json(stats_registry_t *reg)
{
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "prefix", MGMT_PREFIX);
    cJSON_AddStringToObject(s, "description", "Junction's management schema (qdrouterd's entity "
                                              "types and attributes)");
    cJSON *types = cJSON_AddObjectToObject(s, "entityTypes");
    for (size_t i = 0; i < BASE_ARRAY_LEN(mgmt_types); i++) {
        const mgmt_type_t *t = &mgmt_types[i];
        cJSON             *e = cJSON_AddObjectToObject(types, t->name);
        cJSON_AddStringToObject(e, "fullName", t->full);
        cJSON_AddStringToObject(e, "extends", t->extends);
        if (t->singleton)
            cJSON_AddBoolToObject(e, "singleton", true);
        cJSON *ops = cJSON_AddArrayToObject(e, "operations");
        for (const char *p = t->ops; *p;) {
            const char *c = strchr(p, ',');
            size_t      len = c ? (size_t)(c - p) : strlen(p);
            char       *op = base_strndup(p, len);
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
        if (t->kind == MGMT_K_STATS) {
            stats_attrs(attrs, t, reg);
            continue;
        }
        for (size_t k = 0; k < t->nattrs; k++) {
            const mgmt_attr_t *d = &t->attrs[k];
            a = cJSON_AddObjectToObject(attrs, d->name);
            add_type(a, d->type);
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
