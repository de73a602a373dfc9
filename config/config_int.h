/* config/config_int.h: private to config/ - the attribute tables (names.c), the `.conf`
 * dialect reader (conf.c) and what config.c shares with them.
 *
 * Threads: everything here runs on the caller's thread; the tables are read-only.
 */
#ifndef JUNCTION_CONFIG_INT_H
#define JUNCTION_CONFIG_INT_H

#include "config/config.h"
#include "core/base/map.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>

#define CFG_MAX_ATTRS 48 /* more than any entity table in names.c */

/* -- attribute tables (names.c) -- */

typedef enum attr_type {
    AT_STRING = 0, /* a JSON string, or an integral number (qdrouterd's str()) */
    AT_INT,        /* a JSON integer, or a string of digits */
    AT_BOOL,       /* true/false, 0/1, or yes/no/true/false/on/off in any case */
    AT_ENUM,       /* one of tags by name, or its index like qdrouterd's EnumType */
    AT_MAP,        /* a JSON object */
} attr_type_t;

/* One attribute of an entity type, in qdrouterd's camelCase spelling.  An alias (a deprecated
 * spelling) fills the slot of the attribute it stands for; alias_of 0 means none, since slot 0
 * is always `name`, which is nobody's alias.  A deprecated attribute loads with one warning
 * naming what replaced it: the attribute it is an alias of, or `instead`. */
typedef struct attr_def {
    const char        *name;       /* camelCase name */
    attr_type_t        type;       /* how the value is coerced */
    const char *const *tags;       /* AT_ENUM: names, NULL-terminated, in qdrouterd's order */
    int                alias_of;   /* deprecated spelling of attribute [alias_of]; 0 = none */
    bool               ignored;    /* accepted and type-checked, but changes nothing here */
    bool               deprecated; /* a name qdrouterd deprecated: warn when it is used */
    const char        *instead;    /* deprecated, not an alias: what the warning says to use */
} attr_def_t;

extern const char *const cfg__dist_tags[];   /* multicast closest balanced unavailable */
extern const char *const cfg__role_tags[];   /* normal inter-router route-container edge */
extern const char *const cfg__strip_tags[];  /* in out both no (qdrouterd's order) */
extern const cfg_strip_t cfg__strip_by_tag[]; /* cfg__strip_tags index -> cfg_strip_t */
#define CFG__N_STRIP_TAGS 4

// clang-format off
enum {
    R_NAME = 0, R_IDENTITY, R_TYPE, R_ID, R_ROUTER_ID, R_MODE, R_WORKER_THREADS,
    R_DEFAULT_DISTRIBUTION, R_AREA, R_HELLO_INTERVAL, R_HELLO_MAX_AGE, R_RA_INTERVAL,
    R_RA_INTERVAL_FLUX, R_REMOTE_LS_MAX_AGE, R_MOBILE_ADDR_MAX_AGE, R_DEBUG_DUMP_FILE,
    R_SASL_CONFIG_DIR, R_SASL_CONFIG_NAME, R_ALLOW_RESUMABLE_LINK_ROUTE, R_TIMESTAMPS_IN_UTC,
    R_TIMESTAMP_FORMAT, R_ALLOW_UNSETTLED_MULTICAST, R_METADATA, R_SHUTDOWN_GRACE,
    R_MAX_STATS, R_OLD_HELLO_INTERVAL, R_OLD_HELLO_MAX_AGE, R_OLD_RA_INTERVAL,
    R_OLD_RA_INTERVAL_FLUX, R_OLD_REMOTE_LS_MAX_AGE, R_OLD_DEBUG_DUMP, R_OLD_SASL_CONFIG_PATH,
    R_OLD_MOBILE_ADDR_MAX_AGE, R_N
};

enum {
    L_NAME = 0, L_IDENTITY, L_TYPE, L_HOST, L_ADDR, L_PORT, L_SOCKET_ADDRESS_FAMILY,
    L_PROTOCOL_FAMILY, L_ROLE, L_COST, L_SSL_PROFILE, L_SASL_MECHANISMS, L_AUTHENTICATE_PEER,
    L_SASL_PLUGIN, L_REQUIRE_ENCRYPTION, L_REQUIRE_SSL, L_TRUSTED_CERTS_FILE, L_MAX_FRAME_SIZE,
    L_MAX_SESSIONS, L_MAX_SESSION_FRAMES, L_IDLE_TIMEOUT, L_INITIAL_HANDSHAKE_TIMEOUT,
    L_STRIP_ANNOTATIONS, L_LINK_CAPACITY, L_MULTI_TENANT, L_FAILOVER_URLS, L_HEALTHZ, L_METRICS,
    L_WEBSOCKETS, L_HTTP, L_HTTP_ROOT_DIR, L_MESSAGE_LOGGING_COMPONENTS, L_POLICY_VHOST,
    L_OPEN_PROPERTIES, L_MAX_SENDERS, L_MAX_RECEIVERS, L_MAX_MESSAGE_SIZE,
    L_MAX_UNSETTLED, L_OLD_TRUSTED_CERTS, L_OLD_FAILOVER_LIST, L_OLD_HTTP_ROOT,
    L_OLD_LOG_MESSAGE, L_OLD_REQUIRE_PEER_AUTH, L_OLD_ALLOW_UNSECURED, L_OLD_ALLOW_NO_SASL, L_N
};

enum {
    A_NAME = 0, A_IDENTITY, A_TYPE, A_PREFIX, A_PATTERN, A_DISTRIBUTION, A_WAYPOINT,
    A_INGRESS_PHASE, A_EGRESS_PHASE, A_PRIORITY, A_ENABLE_FALLBACK, A_N
};

enum {
    AL_NAME = 0, AL_IDENTITY, AL_TYPE, AL_ADDRESS, AL_DIRECTION, AL_PHASE, AL_CONTAINER_ID,
    AL_CONNECTION, AL_EXTERNAL_ADDRESS, AL_FALLBACK, AL_OLD_ADDR, AL_OLD_DIR,
    AL_OLD_EXTERNAL_ADDR, AL_N
};

enum {
    G_NAME = 0, G_IDENTITY, G_TYPE, G_MODULE, G_ENABLE, G_INCLUDE_TIMESTAMP, G_INCLUDE_SOURCE,
    G_OUTPUT_FILE, G_OLD_TIMESTAMP, G_OLD_SOURCE, G_OLD_OUTPUT, G_N
};

enum { M_NAME = 0, M_IDENTITY, M_TYPE, M_SOCKET, M_MAX_CLIENTS, M_N };

enum {
    P_NAME = 0, P_IDENTITY, P_TYPE, P_MAX_CONNECTIONS, P_MAX_MESSAGE_SIZE, P_ENABLE_VHOST_POLICY,
    P_ENABLE_VHOST_NAME_PATTERNS, P_POLICY_DIR, P_DEFAULT_VHOST, P_N
};

/* qdrouterd 0.x's `container` (folded into `router` in 1.0) */
enum {
    C_NAME = 0, C_IDENTITY, C_TYPE, C_CONTAINER_NAME, C_WORKER_THREADS, C_DEBUG_DUMP,
    C_SASL_CONFIG_PATH, C_SASL_CONFIG_NAME, C_N
};

enum {
    S_NAME = 0, S_IDENTITY, S_TYPE, S_CIPHERS, S_PROTOCOLS, S_CA_CERT_FILE, S_CERT_DB,
    S_CERT_FILE, S_PRIVATE_KEY_FILE, S_KEY_FILE, S_PASSWORD_FILE, S_PASSWORD, S_UID_FORMAT,
    S_UID_NAME_MAPPING_FILE, S_DISPLAY_NAME_FILE, S_N
};

enum {
    AP_NAME = 0, AP_IDENTITY, AP_TYPE, AP_AUTH_SERVICE, AP_HOST, AP_PORT, AP_REALM,
    AP_SASL_INIT_HOSTNAME, AP_SSL_PROFILE, AP_AUTH_SSL_PROFILE, AP_N
};

enum {
    LR_NAME = 0, LR_IDENTITY, LR_TYPE, LR_PREFIX, LR_PATTERN, LR_ADD_EXTERNAL_PREFIX,
    LR_DEL_EXTERNAL_PREFIX, LR_CONTAINER_ID, LR_CONNECTION, LR_DISTRIBUTION, LR_DIRECTION,
    LR_DIR, LR_N
};

enum {
    CN_NAME = 0, CN_IDENTITY, CN_TYPE, CN_HOST, CN_ADDR, CN_PORT, CN_PROTOCOL_FAMILY, CN_ROLE,
    CN_COST, CN_SSL_PROFILE, CN_SASL_MECHANISMS, CN_ALLOW_REDIRECT, CN_MAX_FRAME_SIZE,
    CN_MAX_SESSIONS, CN_MAX_SESSION_FRAMES, CN_IDLE_TIMEOUT, CN_STRIP_ANNOTATIONS,
    CN_LINK_CAPACITY, CN_VERIFY_HOSTNAME, CN_OLD_VERIFY_HOST_NAME, CN_SASL_USERNAME,
    CN_SASL_PASSWORD, CN_MESSAGE_LOGGING_COMPONENTS, CN_OLD_LOG_MESSAGE, CN_FAILOVER_URLS,
    CN_OLD_FAILOVER_LIST, CN_CONNECTION_STATUS, CN_CONNECTION_MSG, CN_POLICY_VHOST,
    CN_OPEN_PROPERTIES, CN_N
};

/* qdrouterd 0.x's `fixedAddress` (replaced by `address` in 0.7, gone in 1.0) */
enum { F_NAME = 0, F_IDENTITY, F_TYPE, F_PREFIX, F_PHASE, F_FANOUT, F_BIAS, F_N };
// clang-format on

extern const attr_def_t cfg__router_attrs[R_N];
extern const attr_def_t cfg__listener_attrs[L_N];
extern const attr_def_t cfg__address_attrs[A_N];
extern const attr_def_t cfg__log_attrs[G_N];
extern const attr_def_t cfg__autolink_attrs[AL_N];
extern const attr_def_t cfg__management_attrs[M_N];
extern const attr_def_t cfg__policy_attrs[P_N];
extern const attr_def_t cfg__container_attrs[C_N];
extern const attr_def_t cfg__fixed_address_attrs[F_N];
extern const attr_def_t cfg__ssl_profile_attrs[S_N];
extern const attr_def_t cfg__auth_plugin_attrs[AP_N];
extern const attr_def_t cfg__link_route_attrs[LR_N];
extern const attr_def_t cfg__connector_attrs[CN_N];
/* container slot -> the router slot it fills (0: none, as for containerName) */
extern const int cfg__container_to_router[C_N];

typedef enum type_kind {
    TK_UNKNOWN = 0,
    TK_ROUTER,
    TK_LISTENER,
    TK_ADDRESS,
    TK_LOG,
    TK_MANAGEMENT,    /* Junction's management socket (short name only) */
    TK_POLICY,        /* qdrouterd's global limits and vhost policy switches */
    TK_CONTAINER,     /* qdrouterd 0.x: its attributes are the router's now */
    TK_FIXED_ADDRESS, /* qdrouterd 0.x: an `address` with fanout/bias for distribution */
    TK_SSL_PROFILE,   /* TLS settings a listener names */
    TK_AUTH_PLUGIN,   /* authServicePlugin: a remote authentication service */
    TK_AUTOLINK,      /* autoLink: a link the router attaches to a route container */
    TK_LINK_ROUTE,    /* linkRoute: links proxied to a route container */
    TK_CONNECTOR,     /* an outgoing connection */
    TK_VHOST,         /* a vhost policy (config/vhost.c reads its attributes) */
    TK_UNSUPPORTED,   /* a qdrouterd configuration type Junction does not implement yet */
    TK_OPERATIONAL,   /* a qdrouterd run-time type: never in a file */
} type_kind_t;

/* A configuration entity type of qdrouterd that Junction refuses for now, with its attribute
 * table (1.19's attributes and every deprecated name), so that the deprecated names already
 * map to their slots when the entity is implemented.  defs is NULL for types without one. */
typedef struct cfg__type_table {
    const char       *type;      /* canonical short name */
    const attr_def_t *defs;      /* attribute table, or NULL */
    size_t            n_defs;    /* entries in defs */
    const char       *successor; /* a removed 0.x type: what replaced it, else NULL */
} cfg__type_table_t;

/* The table of an unsupported type (canonical short name), or NULL.  Thread-safe. */
const cfg__type_table_t *cfg__unsupported_table(const char *canon);

/* qdrouterd's camelcase(): a new string.  Thread-safe. */
char *cfg__camelcase(const char *s);

/* Classify an entity type as written: short (`address`), `router.config.address`, or either
 * with `org.apache.qpid.dispatch.` before it; short names may be kebab/snake case.  *canon
 * gets a new string with the canonical short name (or the name as written when unknown).
 * Thread-safe. */
type_kind_t cfg__type_resolve(const char *written, char **canon);

/* Attribute slot of `key` (already camelCased) in defs[n], or -1.  Thread-safe. */
int cfg__attr_find(const attr_def_t *defs, size_t n, const char *key);

/* What a boolean may be spelled as, besides a JSON true/false and the strings "true"/"false"
 * in any case (all that qdrouterd 1.19's policy compiler takes for a vhost group's options). */
#define CFG_BOOL_WORDS   0x1u /* "yes"/"no", "on"/"off", in any case */
#define CFG_BOOL_NUMBERS 0x2u /* the numbers 1 and 0 */
/* qdrouterd's schema `boolean` (every entity attribute of that type, a vhost's
 * allowUnknownUser too); qdrouterd also takes any other number or a list through Python's
 * bool(), which Junction refuses as a likely mistake. */
#define CFG_BOOL_SCHEMA  (CFG_BOOL_WORDS | CFG_BOOL_NUMBERS)

/* A boolean from v, spelled in one of the ways `accept` (CFG_BOOL_*) allows: true with *out
 * set, or false (v is not one of them; *out untouched).  Thread-safe. */
bool cfg__bool_value(const cJSON *v, unsigned accept, bool *out);

/* -- the `.conf` dialect (conf.c) -- */

/* Where each node of a parsed file came from: cJSON node address -> line number (from 1).
 * Only the `.conf` reader fills it; a JSON file has no lines. */
typedef struct cfg__lines {
    base_map_t map; /* (uintptr_t)node -> (void *)(uintptr_t)line */
} cfg__lines_t;

void cfg__lines_init(cfg__lines_t *l);
void cfg__lines_fini(cfg__lines_t *l);
void cfg__lines_set(cfg__lines_t *l, const cJSON *node, int line);
/* The line of `node`, or 0 when unknown (a JSON file, or a node made by the loader). */
int cfg__lines_get(const cfg__lines_t *l, const cJSON *node);

/* True when the text is qdrouterd's JSON form: its first character that is neither blank nor
 * on a `#` comment line is `[` or `{`.  Otherwise it is the `.conf` dialect (also when there
 * is no such character: an empty file).  Thread-safe. */
bool cfg__is_json(const char *text);

/* Read qdrouterd's `.conf` dialect into the list the JSON form gives, [[type, {attrs}], ...]:
 * every value a string, a map attribute a map, `openProperties` and `groups` parsed as JSON.
 * Each entity's pair and each attribute's value get their line in *lines.  Returns 0 and a new
 * tree in *out, or -1 with *err_line (0 = none) and one line (without the file name) in
 * err[errlen].  Thread-safe. */
int cfg__conf_parse(const char *text, cJSON **out, cfg__lines_t *lines, int *err_line, char *err,
                    size_t errlen);

#endif
