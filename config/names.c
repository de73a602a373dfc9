/* config/names.c: every name qdrouterd has used for a configuration entity or attribute -
 * the attribute tables of the entities Junction builds, of the ones it refuses for now, and
 * of qdrouterd 0.x's removed ones - and the rules that turn a name as written into its
 * canonical form (qdrouterd's camelcase(), the long `org.apache.qpid.dispatch.` and
 * `router.config.` type names).
 *
 * Deprecated names come from qdrouterd 1.19's schema (`deprecationName`, and attributes marked
 * `deprecated`) and from the 0.4-0.8 schemas for the names 1.0 dropped (listener/connector
 * `addr`, router `routerId` and `mobileAddrMaxAge`, listener `requirePeerAuth`,
 * `allowUnsecured`, `allowNoSasl`; the `container`, `fixedAddress`, `waypoint` and
 * `linkRoutePattern` entities).  Each loads with one warning naming what replaced it.
 *
 * Threads: the tables are read-only; every function here is thread-safe.
 */
#include "config/config_int.h"

#include "core/base/base.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

// clang-format off
const char *const cfg__dist_tags[]   = {"multicast", "closest", "balanced", "unavailable",
                                          NULL};
static const char *const mode_tags[]   = {"standalone", "interior", "edge", NULL};
const char *const cfg__role_tags[]   = {"normal", "inter-router", "route-container", "edge",
                                          NULL};
const char *const cfg__strip_tags[]  = {"in", "out", "both", "no", NULL}; /* qdrouterd order */
static const char *const family_tags[] = {"IPv4", "IPv6", NULL};

/* strip_tags index -> cfg_strip_t */
const cfg_strip_t cfg__strip_by_tag[] = {CFG_STRIP_IN, CFG_STRIP_OUT, CFG_STRIP_BOTH,
                                           CFG_STRIP_NO};

_Static_assert(CFG_DIST_MULTICAST == 0 && CFG_DIST_CLOSEST == 1 && CFG_DIST_BALANCED == 2 &&
               CFG_DIST_UNAVAILABLE == 3, "cfg_distribution_t follows dist_tags");
_Static_assert(CFG_ROLE_NORMAL == 0 && CFG_ROLE_INTER_ROUTER == 1 &&
               CFG_ROLE_ROUTE_CONTAINER == 2 && CFG_ROLE_EDGE == 3, "cfg_role_t follows role_tags");

const attr_def_t cfg__router_attrs[R_N] = {
    [R_NAME]                  = {"name", AT_STRING, .ignored = true},
    [R_IDENTITY]              = {"identity", AT_STRING, .ignored = true},
    [R_TYPE]                  = {"type", AT_STRING},
    [R_ID]                    = {"id", AT_STRING},
    [R_ROUTER_ID]             = {"routerId", AT_STRING, .alias_of = R_ID, .deprecated = true},
    [R_MODE]                  = {"mode", AT_ENUM, mode_tags},
    [R_WORKER_THREADS]        = {"workerThreads", AT_INT},
    [R_DEFAULT_DISTRIBUTION]  = {"defaultDistribution", AT_ENUM, cfg__dist_tags},
    /* inter-router protocol, SASL database, link routes, log format: nothing a standalone,
     * ANONYMOUS-only router does differs with them (an interior router reads the protocol's
     * timers: config.c's router_timers_fill) */
    [R_AREA]                  = {"area", AT_STRING, .ignored = true},
    [R_HELLO_INTERVAL]        = {"helloIntervalSeconds", AT_INT, .ignored = true},
    [R_HELLO_MAX_AGE]         = {"helloMaxAgeSeconds", AT_INT, .ignored = true},
    [R_RA_INTERVAL]           = {"raIntervalSeconds", AT_INT, .ignored = true},
    [R_RA_INTERVAL_FLUX]      = {"raIntervalFluxSeconds", AT_INT, .ignored = true},
    [R_REMOTE_LS_MAX_AGE]     = {"remoteLsMaxAgeSeconds", AT_INT, .ignored = true},
    [R_MOBILE_ADDR_MAX_AGE]   = {"mobileAddrMaxAgeSeconds", AT_INT, .ignored = true},
    [R_DEBUG_DUMP_FILE]       = {"debugDumpFile", AT_STRING, .ignored = true},
    [R_SASL_CONFIG_DIR]       = {"saslConfigDir", AT_STRING},
    [R_SASL_CONFIG_NAME]      = {"saslConfigName", AT_STRING},
    [R_ALLOW_RESUMABLE_LINK_ROUTE] = {"allowResumableLinkRoute", AT_BOOL, .ignored = true},
    [R_TIMESTAMPS_IN_UTC]     = {"timestampsInUTC", AT_BOOL, .ignored = true},
    [R_TIMESTAMP_FORMAT]      = {"timestampFormat", AT_STRING}, /* refused: see build_router */
    [R_ALLOW_UNSETTLED_MULTICAST] = {"allowUnsettledMulticast", AT_BOOL, .ignored = true},
    [R_METADATA]              = {"metadata", AT_STRING, .ignored = true},
    /* Junction's own */
    [R_SHUTDOWN_GRACE]        = {"shutdownGraceSeconds", AT_INT},
    [R_MAX_STATS]             = {"maxStats", AT_INT},
    /* deprecated in 1.19's schema */
    [R_OLD_HELLO_INTERVAL]    = {"helloInterval", AT_INT, .alias_of = R_HELLO_INTERVAL,
                                 .ignored = true, .deprecated = true},
    [R_OLD_HELLO_MAX_AGE]     = {"helloMaxAge", AT_INT, .alias_of = R_HELLO_MAX_AGE,
                                 .ignored = true, .deprecated = true},
    [R_OLD_RA_INTERVAL]       = {"raInterval", AT_INT, .alias_of = R_RA_INTERVAL,
                                 .ignored = true, .deprecated = true},
    [R_OLD_RA_INTERVAL_FLUX]  = {"raIntervalFlux", AT_INT, .alias_of = R_RA_INTERVAL_FLUX,
                                 .ignored = true, .deprecated = true},
    [R_OLD_REMOTE_LS_MAX_AGE] = {"remoteLsMaxAge", AT_INT, .alias_of = R_REMOTE_LS_MAX_AGE,
                                 .ignored = true, .deprecated = true},
    [R_OLD_DEBUG_DUMP]        = {"debugDump", AT_STRING, .alias_of = R_DEBUG_DUMP_FILE,
                                 .ignored = true, .deprecated = true},
    [R_OLD_SASL_CONFIG_PATH]  = {"saslConfigPath", AT_STRING, .alias_of = R_SASL_CONFIG_DIR,
                                 .deprecated = true},
    /* qdrouterd 0.4-0.8 (unused there already) */
    [R_OLD_MOBILE_ADDR_MAX_AGE] = {"mobileAddrMaxAge", AT_INT, .ignored = true,
                                   .deprecated = true, .instead = "it is no longer used"},
};

const attr_def_t cfg__listener_attrs[L_N] = {
    [L_NAME]                  = {"name", AT_STRING},
    [L_IDENTITY]              = {"identity", AT_STRING, .ignored = true},
    [L_TYPE]                  = {"type", AT_STRING},
    [L_HOST]                  = {"host", AT_STRING},
    [L_ADDR]                  = {"addr", AT_STRING, .alias_of = L_HOST, .deprecated = true},
    [L_PORT]                  = {"port", AT_STRING},
    [L_SOCKET_ADDRESS_FAMILY] = {"socketAddressFamily", AT_ENUM, family_tags},
    [L_PROTOCOL_FAMILY]       = {"protocolFamily", AT_ENUM, family_tags,
                                 .alias_of = L_SOCKET_ADDRESS_FAMILY, .deprecated = true},
    [L_ROLE]                  = {"role", AT_ENUM, cfg__role_tags},
    [L_COST]                  = {"cost", AT_INT}, /* inter-router only (router/irconn.c) */
    [L_SSL_PROFILE]           = {"sslProfile", AT_STRING},
    [L_SASL_MECHANISMS]       = {"saslMechanisms", AT_STRING},
    [L_AUTHENTICATE_PEER]     = {"authenticatePeer", AT_BOOL},
    [L_SASL_PLUGIN]           = {"saslPlugin", AT_STRING},
    [L_REQUIRE_ENCRYPTION]    = {"requireEncryption", AT_BOOL},
    [L_REQUIRE_SSL]           = {"requireSsl", AT_BOOL},
    [L_TRUSTED_CERTS_FILE]    = {"trustedCertsFile", AT_STRING},
    [L_MAX_FRAME_SIZE]        = {"maxFrameSize", AT_INT},
    [L_MAX_SESSIONS]          = {"maxSessions", AT_INT},
    [L_MAX_SESSION_FRAMES]    = {"maxSessionFrames", AT_INT},
    [L_IDLE_TIMEOUT]          = {"idleTimeoutSeconds", AT_INT},
    [L_INITIAL_HANDSHAKE_TIMEOUT] = {"initialHandshakeTimeoutSeconds", AT_INT},
    /* what a client sees does not depend on these (the HTTP ones only matter with http) */
    [L_STRIP_ANNOTATIONS]     = {"stripAnnotations", AT_ENUM, cfg__strip_tags},
    [L_LINK_CAPACITY]         = {"linkCapacity", AT_INT},
    [L_MULTI_TENANT]          = {"multiTenant", AT_BOOL},
    [L_FAILOVER_URLS]         = {"failoverUrls", AT_STRING}, /* refused: see listener_fill */
    [L_HEALTHZ]               = {"healthz", AT_BOOL},
    [L_METRICS]               = {"metrics", AT_BOOL},
    [L_WEBSOCKETS]            = {"websockets", AT_BOOL},
    [L_HTTP]                  = {"http", AT_BOOL},
    [L_HTTP_ROOT_DIR]         = {"httpRootDir", AT_STRING},
    [L_MESSAGE_LOGGING_COMPONENTS] = {"messageLoggingComponents", AT_STRING}, /* "none" only */
    [L_POLICY_VHOST]          = {"policyVhost", AT_STRING}, /* vhost policies only: kept */
    [L_OPEN_PROPERTIES]       = {"openProperties", AT_MAP},
    /* qdrouterd has these on vhost policy groups; Junction applies them per listener */
    [L_MAX_SENDERS]           = {"maxSenders", AT_INT},
    [L_MAX_RECEIVERS]         = {"maxReceivers", AT_INT},
    [L_MAX_MESSAGE_SIZE]      = {"maxMessageSize", AT_INT},
    /* Junction's own */
    [L_MAX_UNSETTLED]         = {"maxUnsettledPerLink", AT_INT},
    /* deprecated in 1.19's schema */
    [L_OLD_TRUSTED_CERTS]     = {"trustedCerts", AT_STRING, .alias_of = L_TRUSTED_CERTS_FILE,
                                 .deprecated = true},
    [L_OLD_FAILOVER_LIST]     = {"failoverList", AT_STRING, .alias_of = L_FAILOVER_URLS,
                                 .deprecated = true},
    [L_OLD_HTTP_ROOT]         = {"httpRoot", AT_STRING, .alias_of = L_HTTP_ROOT_DIR,
                                 .deprecated = true},
    [L_OLD_LOG_MESSAGE]       = {"logMessage", AT_STRING, .alias_of = L_MESSAGE_LOGGING_COMPONENTS,
                                 .deprecated = true},
    /* qdrouterd 0.5-0.8: requirePeerAuth yes meant authenticatePeer yes; allowUnsecured no
     * meant requireEncryption yes; allowNoSasl was no longer read */
    [L_OLD_REQUIRE_PEER_AUTH] = {"requirePeerAuth", AT_BOOL, .alias_of = L_AUTHENTICATE_PEER,
                                 .deprecated = true},
    [L_OLD_ALLOW_UNSECURED]   = {"allowUnsecured", AT_BOOL, .deprecated = true,
                                 .instead = "use 'requireEncryption' instead (allowUnsecured: "
                                            "no is requireEncryption: yes)"},
    [L_OLD_ALLOW_NO_SASL]     = {"allowNoSasl", AT_BOOL, .ignored = true, .deprecated = true,
                                 .instead = "it is no longer used (see 'authenticatePeer')"},
};

static const char *const lr_distribution_tags[] = {"linkBalanced", NULL};
static const char *const lr_direction_tags[] = {"in", "out", NULL};

const attr_def_t cfg__link_route_attrs[LR_N] = {
    [LR_NAME]                = {"name", AT_STRING},
    [LR_IDENTITY]            = {"identity", AT_STRING, .ignored = true},
    [LR_TYPE]                = {"type", AT_STRING},
    [LR_PREFIX]              = {"prefix", AT_STRING},
    [LR_PATTERN]             = {"pattern", AT_STRING},
    [LR_ADD_EXTERNAL_PREFIX] = {"addExternalPrefix", AT_STRING},
    [LR_DEL_EXTERNAL_PREFIX] = {"delExternalPrefix", AT_STRING},
    [LR_CONTAINER_ID]        = {"containerId", AT_STRING},
    [LR_CONNECTION]          = {"connection", AT_STRING},
    [LR_DISTRIBUTION]        = {"distribution", AT_ENUM, lr_distribution_tags},
    [LR_DIRECTION]           = {"direction", AT_ENUM, lr_direction_tags},
    [LR_DIR]                 = {"dir", AT_ENUM, lr_direction_tags, .alias_of = LR_DIRECTION,
                                .deprecated = true},
};

const attr_def_t cfg__address_attrs[A_N] = {
    [A_NAME]          = {"name", AT_STRING},
    [A_IDENTITY]      = {"identity", AT_STRING, .ignored = true},
    [A_TYPE]          = {"type", AT_STRING},
    [A_PREFIX]        = {"prefix", AT_STRING},
    [A_PATTERN]       = {"pattern", AT_STRING},
    [A_DISTRIBUTION]  = {"distribution", AT_ENUM, cfg__dist_tags},
    [A_WAYPOINT]      = {"waypoint", AT_BOOL},
    [A_INGRESS_PHASE] = {"ingressPhase", AT_INT},
    [A_EGRESS_PHASE]  = {"egressPhase", AT_INT},
    [A_PRIORITY]      = {"priority", AT_INT},
    [A_ENABLE_FALLBACK] = {"enableFallback", AT_BOOL},
};

static const char *const autolink_dir_tags[] = {"in", "out", NULL};

const attr_def_t cfg__autolink_attrs[AL_N] = {
    [AL_NAME]             = {"name", AT_STRING},
    [AL_IDENTITY]         = {"identity", AT_STRING, .ignored = true},
    [AL_TYPE]             = {"type", AT_STRING},
    [AL_ADDRESS]          = {"address", AT_STRING},
    [AL_DIRECTION]        = {"direction", AT_ENUM, autolink_dir_tags},
    [AL_PHASE]            = {"phase", AT_INT},
    [AL_CONTAINER_ID]     = {"containerId", AT_STRING},
    [AL_CONNECTION]       = {"connection", AT_STRING},
    [AL_EXTERNAL_ADDRESS] = {"externalAddress", AT_STRING},
    [AL_FALLBACK]         = {"fallback", AT_BOOL},
    [AL_OLD_ADDR]         = {"addr", AT_STRING, .alias_of = AL_ADDRESS, .deprecated = true},
    [AL_OLD_DIR]          = {"dir", AT_ENUM, autolink_dir_tags, .alias_of = AL_DIRECTION,
                             .deprecated = true},
    [AL_OLD_EXTERNAL_ADDR] = {"externalAddr", AT_STRING, .alias_of = AL_EXTERNAL_ADDRESS,
                              .deprecated = true},
};

const attr_def_t cfg__log_attrs[G_N] = {
    [G_NAME]              = {"name", AT_STRING, .ignored = true},
    [G_IDENTITY]          = {"identity", AT_STRING, .ignored = true},
    [G_TYPE]              = {"type", AT_STRING},
    [G_MODULE]            = {"module", AT_STRING},
    [G_ENABLE]            = {"enable", AT_STRING},
    [G_INCLUDE_TIMESTAMP] = {"includeTimestamp", AT_BOOL},
    [G_INCLUDE_SOURCE]    = {"includeSource", AT_BOOL},
    [G_OUTPUT_FILE]       = {"outputFile", AT_STRING},
    /* deprecated in 1.19's schema */
    [G_OLD_TIMESTAMP]     = {"timestamp", AT_BOOL, .alias_of = G_INCLUDE_TIMESTAMP,
                             .deprecated = true},
    [G_OLD_SOURCE]        = {"source", AT_BOOL, .alias_of = G_INCLUDE_SOURCE, .deprecated = true},
    [G_OLD_OUTPUT]        = {"output", AT_STRING, .alias_of = G_OUTPUT_FILE, .deprecated = true},
};

const attr_def_t cfg__management_attrs[M_N] = {
    [M_NAME]        = {"name", AT_STRING},
    [M_IDENTITY]    = {"identity", AT_STRING, .ignored = true},
    [M_TYPE]        = {"type", AT_STRING},
    [M_SOCKET]      = {"socket", AT_STRING},
    [M_MAX_CLIENTS] = {"maxClients", AT_INT},
};

/* `policy` (qdrouterd's singleton): the global limits, without vhost policies. */
const attr_def_t cfg__policy_attrs[P_N] = {
    [P_NAME]              = {"name", AT_STRING},
    [P_IDENTITY]          = {"identity", AT_STRING, .ignored = true},
    [P_TYPE]              = {"type", AT_STRING},
    [P_MAX_CONNECTIONS]   = {"maxConnections", AT_INT},
    [P_MAX_MESSAGE_SIZE]  = {"maxMessageSize", AT_INT},
    [P_ENABLE_VHOST_POLICY] = {"enableVhostPolicy", AT_BOOL},
    [P_ENABLE_VHOST_NAME_PATTERNS] = {"enableVhostNamePatterns", AT_BOOL},
    [P_POLICY_DIR]        = {"policyDir", AT_STRING},
    [P_DEFAULT_VHOST]     = {"defaultVhost", AT_STRING},
};

/* qdrouterd 0.4-0.8's `container`: 1.0 moved its attributes to `router` (containerName went:
 * the router's id names its AMQP container). */
const attr_def_t cfg__container_attrs[C_N] = {
    [C_NAME]            = {"name", AT_STRING, .ignored = true},
    [C_IDENTITY]        = {"identity", AT_STRING, .ignored = true},
    [C_TYPE]            = {"type", AT_STRING},
    [C_CONTAINER_NAME]  = {"containerName", AT_STRING, .ignored = true},
    [C_WORKER_THREADS]  = {"workerThreads", AT_INT},
    [C_DEBUG_DUMP]      = {"debugDump", AT_STRING},
    [C_SASL_CONFIG_PATH] = {"saslConfigPath", AT_STRING},
    [C_SASL_CONFIG_NAME] = {"saslConfigName", AT_STRING},
};
const int cfg__container_to_router[C_N] = {
    [C_WORKER_THREADS] = R_WORKER_THREADS, [C_DEBUG_DUMP] = R_DEBUG_DUMP_FILE,
    [C_SASL_CONFIG_PATH] = R_SASL_CONFIG_DIR, [C_SASL_CONFIG_NAME] = R_SASL_CONFIG_NAME,
};

/* qdrouterd 0.4-0.8's `fixedAddress`: an address prefix whose fanout (multiple, single) and
 * bias (closest, spread) 0.8 turned into an `address` distribution. */
static const char *const fanout_tags[] = {"multiple", "single", NULL};
static const char *const bias_tags[]   = {"closest", "spread", NULL};
const attr_def_t cfg__fixed_address_attrs[F_N] = {
    [F_NAME]     = {"name", AT_STRING},
    [F_IDENTITY] = {"identity", AT_STRING, .ignored = true},
    [F_TYPE]     = {"type", AT_STRING},
    [F_PREFIX]   = {"prefix", AT_STRING},
    [F_PHASE]    = {"phase", AT_INT},
    [F_FANOUT]   = {"fanout", AT_ENUM, fanout_tags},
    [F_BIAS]     = {"bias", AT_ENUM, bias_tags},
};

const attr_def_t cfg__ssl_profile_attrs[S_N] = {
    [S_NAME]                  = {"name", AT_STRING},
    [S_IDENTITY]              = {"identity", AT_STRING, .ignored = true},
    [S_TYPE]                  = {"type", AT_STRING},
    [S_CIPHERS]               = {"ciphers", AT_STRING},
    [S_PROTOCOLS]             = {"protocols", AT_STRING},
    [S_CA_CERT_FILE]          = {"caCertFile", AT_STRING},
    [S_CERT_DB]               = {"certDb", AT_STRING, .alias_of = S_CA_CERT_FILE, .deprecated = true},
    [S_CERT_FILE]             = {"certFile", AT_STRING},
    [S_PRIVATE_KEY_FILE]      = {"privateKeyFile", AT_STRING},
    [S_KEY_FILE]              = {"keyFile", AT_STRING, .alias_of = S_PRIVATE_KEY_FILE, .deprecated = true},
    [S_PASSWORD_FILE]         = {"passwordFile", AT_STRING, .deprecated = true,
                                 .instead = "use 'password' with a \"file:\" prefix instead"},
    [S_PASSWORD]              = {"password", AT_STRING},
    [S_UID_FORMAT]            = {"uidFormat", AT_STRING},
    [S_UID_NAME_MAPPING_FILE] = {"uidNameMappingFile", AT_STRING},
    [S_DISPLAY_NAME_FILE]     = {"displayNameFile", AT_STRING, .alias_of = S_UID_NAME_MAPPING_FILE,
                                 .deprecated = true},
};

/* authServicePlugin (qdrouterd 1.19: host and port, or the deprecated authService
 * "host:port"; realm, once saslInitHostname; sslProfile, once authSslProfile) */
const attr_def_t cfg__auth_plugin_attrs[AP_N] = {
    [AP_NAME]               = {"name", AT_STRING},
    [AP_IDENTITY]           = {"identity", AT_STRING, .ignored = true},
    [AP_TYPE]               = {"type", AT_STRING},
    [AP_AUTH_SERVICE]       = {"authService", AT_STRING, .deprecated = true,
                               .instead = "use 'host' and 'port' instead"},
    [AP_HOST]               = {"host", AT_STRING},
    [AP_PORT]               = {"port", AT_STRING},
    [AP_REALM]              = {"realm", AT_STRING},
    [AP_SASL_INIT_HOSTNAME] = {"saslInitHostname", AT_STRING, .alias_of = AP_REALM,
                               .deprecated = true},
    [AP_SSL_PROFILE]        = {"sslProfile", AT_STRING},
    [AP_AUTH_SSL_PROFILE]   = {"authSslProfile", AT_STRING, .alias_of = AP_SSL_PROFILE,
                               .deprecated = true},
};

const attr_def_t cfg__connector_attrs[CN_N] = {
    [CN_NAME]                 = {"name", AT_STRING},
    [CN_IDENTITY]             = {"identity", AT_STRING, .ignored = true},
    [CN_TYPE]                 = {"type", AT_STRING},
    [CN_HOST]                 = {"host", AT_STRING},
    [CN_ADDR]                 = {"addr", AT_STRING, .alias_of = CN_HOST, .deprecated = true},
    [CN_PORT]                 = {"port", AT_STRING},
    [CN_PROTOCOL_FAMILY]      = {"protocolFamily", AT_ENUM, family_tags},
    [CN_ROLE]                 = {"role", AT_ENUM, cfg__role_tags},
    [CN_COST]                 = {"cost", AT_INT}, /* inter-router only (router/irconn.c) */
    [CN_SSL_PROFILE]          = {"sslProfile", AT_STRING}, /* TLS as a client (connector_fill) */
    [CN_SASL_MECHANISMS]      = {"saslMechanisms", AT_STRING},
    [CN_ALLOW_REDIRECT]       = {"allowRedirect", AT_BOOL, .ignored = true},
    [CN_MAX_FRAME_SIZE]       = {"maxFrameSize", AT_INT},
    [CN_MAX_SESSIONS]         = {"maxSessions", AT_INT},
    [CN_MAX_SESSION_FRAMES]   = {"maxSessionFrames", AT_INT},
    [CN_IDLE_TIMEOUT]         = {"idleTimeoutSeconds", AT_INT},
    [CN_STRIP_ANNOTATIONS]    = {"stripAnnotations", AT_ENUM, cfg__strip_tags},
    [CN_LINK_CAPACITY]        = {"linkCapacity", AT_INT},
    [CN_VERIFY_HOSTNAME]      = {"verifyHostname", AT_BOOL}, /* with sslProfile only */
    [CN_OLD_VERIFY_HOST_NAME] = {"verifyHostName", AT_BOOL, .alias_of = CN_VERIFY_HOSTNAME,
                                 .deprecated = true},
    [CN_SASL_USERNAME]        = {"saslUsername", AT_STRING},
    [CN_SASL_PASSWORD]        = {"saslPassword", AT_STRING},
    [CN_MESSAGE_LOGGING_COMPONENTS] = {"messageLoggingComponents", AT_STRING}, /* "none" only */
    [CN_OLD_LOG_MESSAGE]      = {"logMessage", AT_STRING, .alias_of = CN_MESSAGE_LOGGING_COMPONENTS,
                                 .deprecated = true},
    [CN_FAILOVER_URLS]        = {"failoverUrls", AT_STRING}, /* read-only: ignored with a warning */
    [CN_OLD_FAILOVER_LIST]    = {"failoverList", AT_STRING, .alias_of = CN_FAILOVER_URLS,
                                 .deprecated = true},
    /* qdrouterd's run-time columns: refused in a file (see connector_fill) */
    [CN_CONNECTION_STATUS]    = {"connectionStatus", AT_STRING},
    [CN_CONNECTION_MSG]       = {"connectionMsg", AT_STRING},
    [CN_POLICY_VHOST]         = {"policyVhost", AT_STRING}, /* its `$connector` group's vhost */
    [CN_OPEN_PROPERTIES]      = {"openProperties", AT_MAP},
};

_Static_assert(CN_N <= CFG_MAX_ATTRS, "CFG_MAX_ATTRS");

_Static_assert(R_N <= CFG_MAX_ATTRS && L_N <= CFG_MAX_ATTRS && A_N <= CFG_MAX_ATTRS &&
               G_N <= CFG_MAX_ATTRS && M_N <= CFG_MAX_ATTRS && P_N <= CFG_MAX_ATTRS &&
               C_N <= CFG_MAX_ATTRS && F_N <= CFG_MAX_ATTRS && S_N <= CFG_MAX_ATTRS &&
               AL_N <= CFG_MAX_ATTRS,
               "CFG_MAX_ATTRS");

/* qdrouterd entity types Junction knows but does not implement yet. */
static const char *const unsupported_types[] = {
    "linkRoute", "exchange", "binding",
    "vhostUserGroupSettings", "console",
    "httpListener", "httpConnector", "tcpListener", "tcpConnector", "site", "network",
    "proxyProfile", NULL,
};
/* qdrouterd entity types that exist only at run time (management), never in a file. */
static const char *const operational_types[] = {
    "connection", "router.link", "router.address", "router.node", "router.connection.linkRoute",
    "allocator", "logStats", "vhostStats", "management", "org.amqp.management", "routerMetrics",
    "tcpConnection", "httpRequestInfo", "dummy", "entity", "configurationEntity",
    "operationalEntity", NULL,
};
// clang-format on
/* -- entities Junction refuses for now: qdrouterd 1.19's attributes and deprecated names -- */

static const char *const linkRoute_distribution_tags[] = {"linkBalanced", NULL};
static const char *const linkRoute_direction_tags[] = {"in", "out", NULL};
static const char *const linkRoute_dir_tags[] = {"in", "out", NULL};
static const char *const linkRoute_operStatus_tags[] = {"inactive", "active", NULL};
static const char *const autoLink_direction_tags[] = {"in", "out", NULL};
static const char *const autoLink_dir_tags[] = {"in", "out", NULL};
static const char *const autoLink_operStatus_tags[] = {"inactive", "attaching", "failed", "active", "quiescing", "idle", NULL};
static const char *const exchange_matchMethod_tags[] = {"amqp", "mqtt", NULL};


static const attr_def_t linkRoute_attrs[] = {
    {.name = "name", .type = AT_STRING},
    {.name = "identity", .type = AT_STRING},
    {.name = "type", .type = AT_STRING},
    {.name = "prefix", .type = AT_STRING},
    {.name = "pattern", .type = AT_STRING},
    {.name = "addExternalPrefix", .type = AT_STRING},
    {.name = "delExternalPrefix", .type = AT_STRING},
    {.name = "containerId", .type = AT_STRING},
    {.name = "connection", .type = AT_STRING},
    {.name = "distribution", .type = AT_ENUM, .tags = linkRoute_distribution_tags},
    {.name = "direction", .type = AT_ENUM, .tags = linkRoute_direction_tags},
    {.name = "dir", .type = AT_ENUM, .tags = linkRoute_dir_tags, .alias_of = 10 /* direction */, .deprecated = true},
    {.name = "operStatus", .type = AT_ENUM, .tags = linkRoute_operStatus_tags},
};

static const attr_def_t autoLink_attrs[] = {
    {.name = "name", .type = AT_STRING},
    {.name = "identity", .type = AT_STRING},
    {.name = "type", .type = AT_STRING},
    {.name = "address", .type = AT_STRING},
    {.name = "addr", .type = AT_STRING, .alias_of = 3 /* address */, .deprecated = true},
    {.name = "direction", .type = AT_ENUM, .tags = autoLink_direction_tags},
    {.name = "dir", .type = AT_ENUM, .tags = autoLink_dir_tags, .alias_of = 5 /* direction */, .deprecated = true},
    {.name = "phase", .type = AT_INT},
    {.name = "containerId", .type = AT_STRING},
    {.name = "connection", .type = AT_STRING},
    {.name = "externalAddress", .type = AT_STRING},
    {.name = "externalAddr", .type = AT_STRING, .alias_of = 10 /* externalAddress */, .deprecated = true},
    {.name = "fallback", .type = AT_BOOL},
    {.name = "linkRef", .type = AT_STRING},
    {.name = "operStatus", .type = AT_ENUM, .tags = autoLink_operStatus_tags},
    {.name = "lastError", .type = AT_STRING},
};

static const attr_def_t exchange_attrs[] = {
    {.name = "name", .type = AT_STRING},
    {.name = "identity", .type = AT_STRING},
    {.name = "type", .type = AT_STRING},
    {.name = "address", .type = AT_STRING},
    {.name = "phase", .type = AT_INT},
    {.name = "alternateAddress", .type = AT_STRING},
    {.name = "alternatePhase", .type = AT_INT},
    {.name = "matchMethod", .type = AT_ENUM, .tags = exchange_matchMethod_tags},
    {.name = "bindingCount", .type = AT_INT},
    {.name = "receivedCount", .type = AT_INT},
    {.name = "droppedCount", .type = AT_INT},
    {.name = "forwardedCount", .type = AT_INT},
    {.name = "divertedCount", .type = AT_INT},
};

static const attr_def_t binding_attrs[] = {
    {.name = "name", .type = AT_STRING},
    {.name = "identity", .type = AT_STRING},
    {.name = "type", .type = AT_STRING},
    {.name = "exchangeName", .type = AT_STRING},
    {.name = "bindingKey", .type = AT_STRING},
    {.name = "nextHopAddress", .type = AT_STRING},
    {.name = "nextHopPhase", .type = AT_INT},
    {.name = "matchedCount", .type = AT_INT},
};


static const attr_def_t vhostUserGroupSettings_attrs[] = {
    {.name = "name", .type = AT_STRING},
    {.name = "identity", .type = AT_STRING},
    {.name = "type", .type = AT_STRING},
    {.name = "users", .type = AT_STRING},
    {.name = "remoteHosts", .type = AT_STRING},
    {.name = "maxConnectionsPerUser", .type = AT_INT},
    {.name = "maxConnectionsPerHost", .type = AT_INT},
    {.name = "maxMessageSize", .type = AT_INT},
    {.name = "maxFrameSize", .type = AT_INT},
    {.name = "maxSessionWindow", .type = AT_INT},
    {.name = "maxSessions", .type = AT_INT},
    {.name = "maxSenders", .type = AT_INT},
    {.name = "maxReceivers", .type = AT_INT},
    {.name = "allowDynamicSource", .type = AT_BOOL},
    {.name = "allowAnonymousSender", .type = AT_BOOL},
    {.name = "allowUserIdProxy", .type = AT_BOOL},
    {.name = "allowWaypointLinks", .type = AT_BOOL},
    {.name = "allowDynamicLinkRoutes", .type = AT_BOOL},
    {.name = "allowAdminStatusUpdate", .type = AT_BOOL},
    {.name = "allowFallbackLinks", .type = AT_BOOL},
    {.name = "sources", .type = AT_STRING},
    {.name = "targets", .type = AT_STRING},
    {.name = "sourcePattern", .type = AT_STRING},
    {.name = "targetPattern", .type = AT_STRING},
};
// clang-format on

/* Every table above, by canonical type. */
#define TABLE(t, d) {t, d, BASE_ARRAY_LEN(d), NULL}
static const cfg__type_table_t unsupported_tables[] = {
    TABLE("linkRoute", linkRoute_attrs),
    TABLE("autoLink", autoLink_attrs),
    TABLE("exchange", exchange_attrs),
    TABLE("binding", binding_attrs),
    TABLE("vhostUserGroupSettings", vhostUserGroupSettings_attrs),
    /* qdrouterd 0.x types that 1.0 removed: refused with what replaced them */
    {"waypoint", NULL, 0, "autoLink"},
    {"linkRoutePattern", NULL, 0, "linkRoute"},
};
#undef TABLE

const cfg__type_table_t *cfg__unsupported_table(const char *canon)
{
    for (size_t i = 0; i < BASE_ARRAY_LEN(unsupported_tables); i++)
        if (strcmp(unsupported_tables[i].type, canon) == 0)
            return &unsupported_tables[i];
    return NULL;
}

/* -- names -- */

/* qdrouterd's camelcase(): split on ' ', '_', '-', '.'; keep the first word; capitalize the
 * others (first letter upper, the rest lower, as Python's str.capitalize()). */
char *cfg__camelcase(const char *s)
{
    char  *out = base_malloc(strlen(s) + 1);
    size_t o = 0;
    bool   first_word = true;
    bool   word_start = false;

    for (const char *p = s; *p; p++) {
        if (*p == ' ' || *p == '_' || *p == '-' || *p == '.') {
            first_word = false;
            word_start = true;
            continue;
        }
        if (first_word)
            out[o++] = *p;
        else if (word_start)
            out[o++] = (char)toupper((unsigned char)*p);
        else
            out[o++] = (char)tolower((unsigned char)*p);
        word_start = false;
    }
    out[o] = '\0';
    return out;
}

static bool in_list(const char *const *list, const char *s)
{
    for (; *list; list++)
        if (strcmp(*list, s) == 0)
            return true;
    return false;
}

int cfg__attr_find(const attr_def_t *defs, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(key, defs[i].name) == 0)
            return (int)i;
    return -1;
}

type_kind_t cfg__type_resolve(const char *written, char **canon)
{
    static const char org[] = "org.apache.qpid.dispatch.";
    static const char rcfg[] = "router.config.";
    const char       *s = written;
    char             *c;

    if (strcmp(s, "management") == 0) {
        /* Junction's own entity; the long name stays qdrouterd's run-time management node */
        *canon = base_strdup(s);
        return TK_MANAGEMENT;
    }
    if (strncmp(s, org, sizeof(org) - 1) == 0)
        s += sizeof(org) - 1;
    if (in_list(operational_types, s)) {
        *canon = base_strdup(s);
        return TK_OPERATIONAL;
    }
    if (strncmp(s, rcfg, sizeof(rcfg) - 1) == 0) {
        static const char *const config_types[] = {"address",  "linkRoute", "autoLink",
                                                   "exchange", "binding",   NULL};
        s += sizeof(rcfg) - 1;
        if (!in_list(config_types, s)) {
            *canon = base_strdup(written);
            return TK_UNKNOWN;
        }
        c = base_strdup(s);
    } else if (s != written) {
        c = base_strdup(s); /* long names are spelled exactly */
    } else {
        c = cfg__camelcase(s);
    }
    *canon = c;
    if (strcmp(c, "router") == 0)
        return TK_ROUTER;
    if (strcmp(c, "listener") == 0)
        return TK_LISTENER;
    if (strcmp(c, "address") == 0)
        return TK_ADDRESS;
    if (strcmp(c, "log") == 0)
        return TK_LOG;
    if (strcmp(c, "policy") == 0)
        return TK_POLICY;
    if (strcmp(c, "container") == 0)
        return TK_CONTAINER;
    if (strcmp(c, "fixedAddress") == 0)
        return TK_FIXED_ADDRESS;
    if (strcmp(c, "sslProfile") == 0)
        return TK_SSL_PROFILE;
    if (strcmp(c, "authServicePlugin") == 0)
        return TK_AUTH_PLUGIN;
    if (strcmp(c, "autoLink") == 0)
        return TK_AUTOLINK;
    if (strcmp(c, "linkRoute") == 0)
        return TK_LINK_ROUTE;
    if (strcmp(c, "connector") == 0)
        return TK_CONNECTOR;
    if (strcmp(c, "vhost") == 0)
        return TK_VHOST;
    if (in_list(unsupported_types, c) || cfg__unsupported_table(c))
        return TK_UNSUPPORTED;
    free(c);
    *canon = base_strdup(written);
    return TK_UNKNOWN;
}

/* -- enum names (config.h) -- */

const char *cfg_distribution_name(cfg_distribution_t d)
{
    return (unsigned)d <= CFG_DIST_UNAVAILABLE ? cfg__dist_tags[d] : "?";
}

const char *cfg_strip_name(cfg_strip_t s)
{
    for (size_t i = 0; i < CFG__N_STRIP_TAGS; i++)
        if (cfg__strip_by_tag[i] == s)
            return cfg__strip_tags[i];
    return "?";
}

const char *cfg_family_name(cfg_family_t f)
{
    return f == CFG_FAMILY_IPV4 ? "IPv4" : f == CFG_FAMILY_IPV6 ? "IPv6" : NULL;
}

const char *cfg_role_name(cfg_role_t r)
{
    return (unsigned)r <= CFG_ROLE_EDGE ? cfg__role_tags[r] : "?";
}
