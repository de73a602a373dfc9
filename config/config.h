/* config/config.h: Junction's configuration - qdrouterd's `.conf` dialect or its JSON form,
 * parsed and validated.
 *
 * The text decides the dialect (not the file name): JSON when its first character that is
 * neither blank nor on a `#` comment line is `[` (or `{`), else qdrouterd's `.conf` dialect,
 * read exactly as qdrouterd 1.19 reads it (config/DESIGN.md).  Both give a list of
 * [entityType, {attributes}] pairs, validated the same way: entity types
 * may be short (`address`) or long (`router.config.address`,
 * `org.apache.qpid.dispatch.router.config.address`); attribute keys may be camelCase or
 * kebab/snake case (`worker-threads` == `workerThreads`); booleans accept true/false and the
 * strings yes/no/true/false/on/off; integers accept JSON numbers and numeric strings; enums
 * accept their names.  Every attribute gets qdrouterd's default when absent.  Every name
 * qdrouterd has used loads (deprecated and pre-1.0 ones with a warning in cfg_t.warnings).
 *
 * Anything wrong - unreadable file, bad JSON or `.conf` line, unknown entity type or
 * attribute, wrong type, value out of range, missing required value, a qdrouterd feature
 * Junction does not support - makes cfg_load_*() fail with ONE line in `err` that names the
 * file, the line (`.conf` only), the entity (its index in the list, from 0, and its type),
 * the attribute, and what was expected, e.g.
 *   "junction.json: entity 2 (listener): attribute 'maxFrameSize': expected an integer, got \"big\""
 *   "qdrouterd.conf: line 14: entity 2 (listener): attribute 'maxFrameSize': expected ..."
 *
 * Threads: called on the main thread at start-up; the result is read-only afterwards and may
 * be read from any thread.  Owns all its strings (freed by cfg_free()).
 */
#ifndef JUNCTION_CONFIG_H
#define JUNCTION_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum cfg_distribution {
    CFG_DIST_MULTICAST = 0,
    CFG_DIST_CLOSEST,
    CFG_DIST_BALANCED,
    CFG_DIST_UNAVAILABLE,
} cfg_distribution_t;

/* listener.stripAnnotations: which direction drops x-opt-qd.* router annotations. */
typedef enum cfg_strip {
    CFG_STRIP_BOTH = 0, /* default */
    CFG_STRIP_IN,
    CFG_STRIP_OUT,
    CFG_STRIP_NO,
} cfg_strip_t;

/* listener.socketAddressFamily: which addresses `host` may resolve to. */
typedef enum cfg_family {
    CFG_FAMILY_ANY = 0, /* absent: from the address (IPv4 preferred for a name with both) */
    CFG_FAMILY_IPV4,
    CFG_FAMILY_IPV6,
} cfg_family_t;

typedef enum cfg_role {
    CFG_ROLE_NORMAL = 0,
    CFG_ROLE_INTER_ROUTER,
    CFG_ROLE_ROUTE_CONTAINER,
    CFG_ROLE_EDGE,
} cfg_role_t;

/* The `router` entity (singleton; defaults apply when the file has none). */
typedef struct cfg_router {
    char              *id;                   /* router id; default: "Junction.<random 8 hex>" style
                                                random id when absent; never contains whitespace */
    char              *mode;                 /* "standalone", "interior", or "edge" */
    bool               interior;             /* mode is "interior" */
    bool               edge;                 /* mode is "edge" */
    int                hello_interval;       /* helloIntervalSeconds, default 1 */
    int                hello_max_age;        /* helloMaxAgeSeconds, default 3 */
    int                ra_interval;          /* raIntervalSeconds, default 30 */
    int                ra_interval_flux;     /* raIntervalFluxSeconds, default 4 */
    int                remote_ls_max_age;    /* remoteLsMaxAgeSeconds, default 60 */
    int                worker_threads;       /* 1-CFG_WORKER_THREADS_MAX; 0 when absent =
                                                number of CPUs */
    cfg_distribution_t default_distribution; /* default CFG_DIST_BALANCED */
    uint32_t           shutdown_grace_seconds; /* `shutdownGraceSeconds` (Junction's own):
                                                  on SIGTERM, how long deliveries in flight
                                                  may take to settle before the rest are
                                                  released to their senders; 0-3600,
                                                  default CFG_SHUTDOWN_GRACE_DEFAULT */
    uint32_t           max_stats;            /* `maxStats` (Junction's own): stat slots the
                                                router may hand out (4 per connection, 16 per
                                                link, 5 per address, ...); objects past it
                                                get no stats of their own, router totals stay
                                                exact; CFG_MAX_STATS_MIN to
                                                CFG_MAX_STATS_DEFAULT (the default) */
    char              *sasl_config_dir;      /* `saslConfigDir` (deprecated saslConfigPath):
                                                where Cyrus SASL reads <name>.conf; NULL =
                                                Cyrus's default places */
    char              *sasl_config_name;     /* `saslConfigName`, default "qdrouterd" */
} cfg_router_t;

#define CFG_SHUTDOWN_GRACE_DEFAULT 5
#define CFG_MAX_STATS_MIN          1024
#define CFG_MAX_STATS_DEFAULT      16773120 /* stats/'s whole id space: STATS_MAX_SLOTS -
                                               STATS_SINK_SLOTS (checked in router/server.c) */

/* The largest values accepted for sizes that set what one connection may make the router
 * hold; a bigger value is a configuration error (qdrouterd has no maxima).
 *  - maxFrameSize: the frame guard and Proton's input buffer each hold up to one frame.
 *  - linkCapacity, maxUnsettledPerLink: deliveries one link may have unsettled (credit, an
 *    int in Proton).
 *  - maxSessionFrames: AMQP windows are at most 2^31-1 frames (the router caps the bytes of a
 *    session's window at its per-connection input budget anyway).
 *  - workerThreads: worker queue indexes are bytes (router/ctx.h RTR_MAX_WORKERS). */
#define CFG_MAX_FRAME_SIZE_MAX (1u << 20)
#define CFG_LINK_CAPACITY_MAX  100000u
#define CFG_SESSION_FRAMES_MAX 2147483647u
#define CFG_WORKER_THREADS_MAX 254

typedef struct cfg_listener {
    char       *name;                 /* `name`, or NULL */
    char       *host;                 /* default "" (all interfaces, like qdrouterd) */
    char       *port;                 /* default "amqp" (= 5672); "0" = ephemeral */
    cfg_family_t family;              /* `socketAddressFamily`, default CFG_FAMILY_ANY */
    cfg_role_t  role;                 /* normal or route-container (autoLinks attach and
                                         link routes lead there); the others are refused */
    int64_t     cost;                 /* `cost`, default 1: inter-router only, so it changes
                                         nothing on a normal listener; kept for management */
    bool        authenticate_peer;    /* `authenticatePeer`: no client gets past SASL
                                         without authenticating (router/sasl.c) */
    char       *sasl_mechanisms;      /* `saslMechanisms`: the blank-separated mechanisms
                                         offered (upper case), NULL = all Cyrus allows
                                         (ANONYMOUS alone when not authenticating) */
    uint32_t    max_frame_size;       /* default 16384; 512-CFG_MAX_FRAME_SIZE_MAX */
    uint32_t    max_sessions;         /* default 32768; 1-32768 (like qdrouterd, 0 or more
                                         than 32768 in the file give 32768) */
    uint32_t    max_session_frames;   /* default 0 = let the router choose; else a session's
                                         incoming window is this many frames of
                                         max_frame_size (at most the connection's input
                                         budget); 0-CFG_SESSION_FRAMES_MAX */
    uint32_t    idle_timeout_seconds; /* default 16; 0 = none; at most 4294967 (the AMQP
                                         idle-time-out is milliseconds in a uint) */
    uint32_t    link_capacity;        /* default 250; 1-CFG_LINK_CAPACITY_MAX (0 in the file
                                         gives 250) */
    uint32_t    handshake_timeout_seconds; /* `initialHandshakeTimeoutSeconds`: a connection
                                         that has not sent its AMQP open within it is
                                         closed; default 10 (qdrouterd: 0); 0 = none */
    uint32_t    max_senders;          /* `maxSenders`: links on one connection on which the
                                         client sends (the router receives); more are
                                         refused with amqp:resource-limit-exceeded;
                                         1-2147483647, default 32768 */
    uint32_t    max_receivers;        /* `maxReceivers`: likewise, links on which the client
                                         receives; default 32768 */
    uint64_t    max_message_size;     /* `maxMessageSize`: bytes of one message (all its
                                         sections); a bigger one is rejected with
                                         amqp:link:message-size-exceeded, its link closed and
                                         the connection closed (qdrouterd's policy); default
                                         0 = no limit; without the attribute, the policy
                                         entity's maxMessageSize */
    bool        max_message_size_set; /* maxMessageSize was given on the listener */
    uint32_t    max_unsettled;        /* `maxUnsettledPerLink` (Junction's own): deliveries a
                                         client may have unsettled on one link toward the
                                         router; the link's credit window is this (so it is
                                         never more than link_capacity: 0 or more in the
                                         file give link_capacity); a sender that sends
                                         beyond its credit is detached with
                                         amqp:link:transfer-limit-exceeded */
    cfg_strip_t strip_annotations;    /* default CFG_STRIP_BOTH */
    bool        http;                 /* default false: serve HTTP and WebSocket (the console,
                                         /metrics, /healthz, AMQP over WebSocket) instead of
                                         AMQP; true when http_root_dir is set */
    char       *http_root_dir;        /* `httpRootDir`: serve files at '/' from this directory
                                         instead of the embedded console; NULL = none */
    bool        websockets;           /* default true: WebSocket upgrades allowed (http only) */
    bool        healthz;              /* default true: /healthz served (http only) */
    bool        metrics;              /* default true: /metrics served (http only) */
    char       *ssl_profile;          /* `sslProfile`: the name of a cfg_ssl_profile_t (the
                                         load checks it exists), or NULL: no TLS */
    bool        require_ssl;          /* `requireSsl` (with ssl_profile only): every connection
                                         is TLS; false: TLS or plain, by the first byte */
    char       *sasl_plugin;          /* `saslPlugin`: the name of a cfg_auth_plugin_t (the
                                         load checks it exists) whose authentication service
                                         authenticates this listener's clients, or NULL */
    bool        require_encryption;   /* `requireEncryption`: a client that is not TLS is
                                         refused (amqp:connection:policy-error, as qdrouterd);
                                         not on an http listener */
    char       *policy_vhost;         /* `policyVhost`, or NULL: with enableVhostPolicy, the
                                         vhost of every connection of this listener (whatever
                                         its open's hostname); a connector's: the vhost whose
                                         `$connector` group governs its connections */
} cfg_listener_t;

/* `connector`: an outgoing AMQP connection the router keeps open (qdrouterd 1.19's
 * connector; router/connmgr.c makes it and reconnects).  `conn` holds what a connection
 * reads from its listener (the same layers serve both): host, port, name, role (normal or
 * route-container), cost, maxFrameSize, maxSessions, idleTimeoutSeconds, linkCapacity,
 * stripAnnotations, saslMechanisms, sslProfile (TLS client; the load checks it names a
 * profile). */
typedef struct cfg_connector {
    cfg_listener_t conn;          /* the connection's settings, as a listener's */
    char          *sasl_username; /* `saslUsername`, or NULL: no PLAIN */
    char          *sasl_password; /* `saslPassword` as resolved (env:, pass:, file:), or NULL */
    bool           verify_hostname; /* `verifyHostname` (default true): with conn.ssl_profile,
                                       the peer's certificate must name the host connected to */
    struct cJSON  *open_properties; /* `openProperties`: a map (checked: ASCII keys, none of
                                       the router's own), sent in the open after the router's
                                       properties; NULL when absent or empty */
} cfg_connector_t;

/* `sslProfile`: TLS settings listeners name.  Files and the password are checked when the
 * router builds its TLS contexts at start-up (router/tls.c), not by the load. */
typedef struct cfg_ssl_profile {
    char *name;                  /* `name`, required (listeners name it) */
    char *cert_file;             /* `certFile` (PEM), or NULL */
    char *private_key_file;      /* `privateKeyFile` (PEM), or NULL: the key is in cert_file */
    char *ca_cert_file;          /* `caCertFile` (PEM): CAs of client certificates, or NULL */
    char *password;              /* `password` as written (cfg_password_resolve() reads it,
                                    literal allowed), or "file:<passwordFile>", or NULL */
    char *ciphers;               /* `ciphers` (OpenSSL's cipher list, TLS 1.2 and below) */
    char *protocols;             /* `protocols`: e.g. "TLSv1.2 TLSv1.3", or NULL: OpenSSL's */
    char *uid_format;            /* `uidFormat`: which certificate fields name an EXTERNAL
                                    client (router/tls_uid.c), or NULL: the subject */
    char *uid_name_mapping_file; /* `uidNameMappingFile`: JSON {uid: name}, read and checked
                                    at start-up (router/tls_uid.c), or NULL */
} cfg_ssl_profile_t;

/* `authServicePlugin`: a remote AMQP authentication service that listeners naming it in
 * `saslPlugin` hand their clients' SASL exchange to (router/authsvc.c). */
typedef struct cfg_auth_plugin {
    char *name;        /* `name`, required (listeners name it) */
    char *host;        /* `host`, or the host of the deprecated `authService` "host:port" */
    char *port;        /* `port` (default "amqp"), or authService's port */
    int   port_number; /* port as a number (1-65535), resolved by the load */
    char *realm;       /* `realm` (once saslInitHostname): the sasl-init hostname, or NULL */
    char *ssl_profile; /* `sslProfile` (once authSslProfile): TLS to the service with that
                          profile (the load checks it exists), or NULL: plain */
} cfg_auth_plugin_t;

/* Longest httpRootDir accepted (bytes, without the NUL). */
#define CFG_PATH_MAX 4096

/* `address` (router.config.address): exactly one of prefix / pattern is non-NULL. */
typedef struct cfg_address {
    char              *name;          /* `name`, or NULL */
    char              *prefix;        /* as written, e.g. "closest" */
    char              *pattern;       /* as written, e.g. "a.*.b.#" */
    cfg_distribution_t distribution;  /* default CFG_DIST_BALANCED */
    bool               waypoint;      /* `waypoint`, as written */
    int                ingress_phase; /* phase of what producers send (0-9); default 0 */
    int                egress_phase;  /* phase consumers receive from (0-9); default 1 for a
                                         waypoint, else 0 */
    int                priority;      /* -1 when unset, else 0-9 (qdrouterd uses it between
                                         routers only, so nothing differs standalone) */
    bool               fallback;      /* `enableFallback`: what finds no consumer goes to the
                                         address's fallback destination (never with a
                                         waypoint or phases) */
} cfg_address_t;

/* `autoLink` (router.config.autoLink): a link the router attaches to a route container
 * (a broker) while a connection to it is open.  At least one of container_id / connection. */
typedef enum cfg_autolink_dir {
    CFG_AUTOLINK_IN = 0, /* the container sends to the router (its queue -> consumers) */
    CFG_AUTOLINK_OUT,    /* the router sends to the container (producers -> its queue) */
} cfg_autolink_dir_t;

typedef struct cfg_autolink {
    char              *name;             /* `name`, or NULL */
    char              *address;          /* `address` (old: addr), required */
    cfg_autolink_dir_t dir;              /* `direction` (old: dir), required */
    int                phase;            /* 0-9; default 0 for out, 1 for in */
    char              *container_id;     /* `containerId`: the peer's container id, or NULL */
    char              *connection;       /* `connection`: a listener's (next: a connector's)
                                            name, or NULL */
    char              *external_address; /* `externalAddress` (old: externalAddr): the
                                            broker's name for the node, or NULL: `address` */
    bool               fallback;         /* `fallback`: out: the link is the address's
                                            fallback destination; in: its deliveries go to
                                            the address's consumers only (phase default 0) */
} cfg_autolink_t;

/* `log`: module is one of qdrouterd's module names (ROUTER, ROUTER_CORE, ..., DEFAULT). */
/* `linkRoute` (router.config.linkRoute): exactly one of prefix / pattern, at most one of
 * connection / containerId; the strings are as written (NULL: absent). */
typedef struct cfg_link_route {
    char *name;         /* `name`, or NULL */
    char *prefix;       /* a prefix, or NULL */
    char *pattern;      /* a pattern, or NULL */
    char *direction;    /* "in" (client senders) or "out" (client receivers) */
    char *connection;   /* the listener's or connector's name, or NULL */
    char *container_id; /* the route container's container id, or NULL */
    char *add_prefix;   /* addExternalPrefix, or NULL */
    char *del_prefix;   /* delExternalPrefix, or NULL */
    uint32_t serving;   /* run time: connections that serve it (operStatus active when not
                           0); the core writes it, management reads it, both with
                           __atomic_load_n/__atomic_store_n (the rest is read-only) */
} cfg_link_route_t;

typedef struct cfg_log {
    char   *module;            /* required */
    char   *enable;            /* e.g. "info+", "trace,debug", "none"; NULL = default */
    bool    include_timestamp; /* default true */
    bool    include_timestamp_set; /* given: else the module follows DEFAULT's */
    bool    include_source;    /* default false: lines end with " (file:line)" when true */
    bool    include_source_set; /* given: else the module follows DEFAULT's */
    char   *output_file;       /* NULL = DEFAULT's output (stderr for DEFAULT); "stdout",
                                  "stderr", "syslog" or a file path */
    int     module_id;         /* `module` as a base_log_module_t (core/base/log.h) */
    uint8_t enable_mask;       /* `enable` parsed by base_log_parse_enable(); 0xff (follow
                                  DEFAULT) when enable is NULL */
} cfg_log_t;

/* `management` (Junction's own entity, singleton): the management socket that junctionctl
 * talks to (newline-delimited JSON, stats/stats.h "Management protocol").  Without the
 * entity there is no socket.  Only the short name `management` means this entity: qdrouterd's
 * long `org.apache.qpid.dispatch.management` is its run-time management node. */
typedef struct cfg_management {
    bool     enabled;     /* the file has a management entity */
    char    *socket;      /* Unix socket path, at most CFG_SOCKET_PATH_MAX bytes; default
                             cfg_management_default_socket() */
    uint32_t max_clients; /* `maxClients`: clients served at once, 1-1024, default 16 */
} cfg_management_t;

/* `policy` (qdrouterd's singleton).  Defaults apply without the entity. */
typedef struct cfg_policy {
    uint32_t max_connections;  /* `maxConnections`: client connections open at once (counted
                                  from their AMQP open; more are refused with
                                  amqp:resource-limit-exceeded); 0 = no limit; default
                                  65535 */
    uint64_t max_message_size; /* `maxMessageSize`: the default of every listener's (see
                                  cfg_listener_t) and of vhost groups without one; 0 = no
                                  limit */
    bool     enable_vhost_policy; /* `enableVhostPolicy`: every client connection is admitted
                                     by a vhost's rules (router/policy.h) */
    bool     enable_vhost_name_patterns; /* `enableVhostNamePatterns`: vhost hostnames and
                                            aliases are address patterns (`*.example.com`) */
    char    *policy_dir;       /* `policyDir`: a directory whose *.json files add vhosts (their
                                  other entities are ignored, as in qdrouterd), or NULL */
    char    *default_vhost;    /* `defaultVhost`, default "$default": the vhost of an open whose
                                  hostname names none ("" = none) (NULL before a load fills
                                  it) */
} cfg_policy_t;

/* A `sources`/`targets`/`sourcePattern`/`targetPattern` item compiled as qdrouterd does:
 * `${user}` at most once, as a prefix, a suffix or (names only) inside. */
typedef enum cfg_vname_kind {
    CFG_VNAME_ABSENT = 0, /* no ${user}: s1 is the name (may end in `*`) */
    CFG_VNAME_PREFIX,     /* ${user}s2 */
    CFG_VNAME_SUFFIX,     /* s1${user} */
    CFG_VNAME_EMBED,      /* s1${user}s2 (names only) */
    CFG_VNAME_WILDCARD,   /* exactly `*`: everything */
} cfg_vname_kind_t;

typedef struct cfg_vname {
    cfg_vname_kind_t kind;
    char            *s1; /* text before ${user} (or the whole name), "" when none */
    char            *s2; /* text after ${user}, "" when none */
} cfg_vname_t;

/* A list of them (NULL items with n 0 = the attribute was absent or empty). */
typedef struct cfg_vnames {
    cfg_vname_t *items;
    size_t       n;
    bool         given; /* the attribute was given */
} cfg_vnames_t;

/* A remoteHosts item: `*`, one address, or an inclusive range lo-hi of one family. */
typedef struct cfg_vhost_range {
    bool          wildcard;
    int           family;  /* AF_INET or AF_INET6 */
    unsigned char lo[16];  /* network order; IPv4 in the first 4 bytes */
    unsigned char hi[16];
} cfg_vhost_range_t;

/* A vhost's user group (qdrouterd's vhostUserGroupSettings; defaults are its policy
 * compiler's). */
typedef struct cfg_vhost_group {
    char              *name;               /* the key in `groups`; "$default": unknown users */
    char             **users;              /* `users`, split at commas, blanks trimmed */
    size_t             n_users;
    cfg_vhost_range_t *hosts;              /* `remoteHosts`; none = no host may connect */
    size_t             n_hosts;
    int32_t            max_conn_per_user;  /* 0-65535; -1 = the vhost's */
    int32_t            max_conn_per_host;  /* 0-65535; -1 = the vhost's */
    int64_t            max_message_size;   /* -1 = the vhost's, else the policy's */
    uint32_t           max_frame_size;     /* 0 = the listener's */
    uint32_t           max_session_window; /* bytes; 0 = the listener's */
    uint32_t           max_sessions;       /* 0 = the listener's */
    uint32_t           max_senders;        /* default 2147483647; 0 = no limit */
    uint32_t           max_receivers;      /* default 2147483647; 0 = no limit */
    bool               allow_dynamic_source;      /* default false */
    bool               allow_anonymous_sender;    /* default false */
    bool               allow_user_id_proxy;       /* default false */
    bool               allow_waypoint_links;      /* default true */
    bool               allow_dynamic_link_routes; /* default true */
    bool               allow_admin_status_update; /* default true */
    bool               allow_fallback_links;      /* default true */
    cfg_vnames_t       sources, targets, source_pattern, target_pattern;
} cfg_vhost_group_t;

/* `vhost`: the rules of connections whose open names `hostname` (or an alias). */
typedef struct cfg_vhost {
    char              *name;               /* `name`, or NULL */
    char              *hostname;           /* `hostname` (old: id), required; may be "" */
    char             **aliases;            /* `aliases`, split at commas */
    size_t             n_aliases;
    uint32_t           max_connections;    /* 0-65535, default 65535 */
    uint32_t           max_conn_per_user;  /* 0-65535, default 65535 */
    uint32_t           max_conn_per_host;  /* 0-65535, default 65535 */
    int64_t            max_message_size;   /* -1 = the policy's */
    bool               allow_unknown_user; /* default false: a user in no group is refused */
    cfg_vhost_group_t *groups;
    size_t             n_groups;
    char              *attrs_json;         /* the attributes as given (JSON map text): what
                                              management shows (`groups` as written) and what
                                              an UPDATE's attributes go over */
} cfg_vhost_t;

/* Read a vhost from its attributes (a JSON map: a file's entity, a policyDir file's, or a
 * management CREATE/UPDATE body), checked as qdrouterd 1.19's policy compiler checks it
 * (policy_local.py).  Returns 0 with *v filled (free with cfg_vhost_fini), or a negative
 * value with one line in err[errlen] naming the attribute (and the group and option), *v
 * empty: -1 when qdrouterd's schema refuses the attributes (an unknown one, a missing
 * hostname, a value of the wrong type: its management answers 400), CFG_VHOST_EPOLICY when
 * its policy compiler refuses their values (a number out of range, anything wrong in a group,
 * a clash of names: it answers 500).  Thread-safe (remoteHosts names are resolved with
 * getaddrinfo()). */
#define CFG_VHOST_EPOLICY (-2)
int cfg_vhost_parse(const struct cJSON *attrs, cfg_vhost_t *v, char *err, size_t errlen);
void cfg_vhost_fini(cfg_vhost_t *v);
/* A deep copy of src into dst (which holds nothing). */
void cfg_vhost_copy(cfg_vhost_t *dst, const cfg_vhost_t *src);
/* The group of that name, or NULL. */
const cfg_vhost_group_t *cfg_vhost_group_find(const cfg_vhost_t *v, const char *name);

/* Longest Unix socket path (sockaddr_un.sun_path holds 108 bytes with the NUL). */
#define CFG_SOCKET_PATH_MAX 107

typedef struct cfg {
    char           *path;        /* file name as given, for messages */
    cfg_router_t    router;      /* always present (defaults when not in the file) */
    cfg_management_t management; /* management.enabled is false without the entity */
    cfg_policy_t    policy;      /* defaults without the entity */
    cfg_listener_t *listeners;   /* array */
    size_t          n_listeners;
    cfg_connector_t *connectors; /* array, in file order */
    size_t          n_connectors;
    cfg_address_t  *addresses;   /* array, in file order */
    size_t          n_addresses;
    cfg_autolink_t *autolinks;   /* array, in file order */
    size_t          n_autolinks;
    cfg_link_route_t *link_routes; /* array, in file order */
    size_t          n_link_routes;
    cfg_ssl_profile_t *ssl_profiles; /* array, in file order */
    size_t          n_ssl_profiles;
    cfg_auth_plugin_t *auth_plugins; /* array, in file order */
    size_t          n_auth_plugins;
    cfg_vhost_t    *vhosts;      /* array: the file's, then policyDir's (file name order) */
    size_t          n_vhosts;
    cfg_log_t      *logs;        /* array, in file order */
    size_t          n_logs;
    char          **warnings;    /* what loaded but qdrouterd deprecated (old names), one line
                                    each in the form of the errors, in file order */
    size_t          n_warnings;
} cfg_t;

/* Parse and validate the file at `path`.  Returns 0 and a new cfg_t in *out, or -1 with a
 * one-line message (no trailing newline) in err[errlen] and *out untouched.  This is the
 * start-up load: it also writes each of the cfg_t's warnings to the log (AGENT, warning). */
int cfg_load_file(const char *path, cfg_t **out, char *err, size_t errlen);
/* Same, from a string; `name` stands for the file name in messages.  Logs nothing: the
 * warnings are in the result. */
int cfg_load_string(const char *text, const char *name, cfg_t **out, char *err, size_t errlen);
/* The sslProfile of that name, or NULL.  Thread-safe (cfg is read-only). */
const cfg_ssl_profile_t *cfg_ssl_profile_find(const cfg_t *cfg, const char *name);
/* A deep copy of src into dst (which holds nothing), and freeing what a profile holds (its
 * strings; the struct itself is the caller's).  Thread-safe. */
void cfg_ssl_profile_copy(cfg_ssl_profile_t *dst, const cfg_ssl_profile_t *src);
void cfg_ssl_profile_fini(cfg_ssl_profile_t *p);
/* The authServicePlugin of that name, or NULL.  Thread-safe (cfg is read-only). */
const cfg_auth_plugin_t *cfg_auth_plugin_find(const cfg_t *cfg, const char *name);
void cfg_free(cfg_t *cfg);
/* Free what an autoLink record holds (not the record). */
void cfg_autolink_fini(cfg_autolink_t *a);

/* qdrouterd's names for the enums ("balanced", "both", "inter-router"); "?" when out of range.
 * Thread-safe. */
const char *cfg_distribution_name(cfg_distribution_t d);
const char *cfg_strip_name(cfg_strip_t s);
const char *cfg_role_name(cfg_role_t r);

/* "IPv4", "IPv6", or NULL for CFG_FAMILY_ANY.  Thread-safe. */
const char *cfg_family_name(cfg_family_t f);

/* The management socket's default path: /run/junction/junctiond.sock for root, else
 * $XDG_RUNTIME_DIR/junction/junctiond.sock.  Writes it into buf (NUL-terminated) and returns
 * 0, or -ENOENT (not root and XDG_RUNTIME_DIR unset or not absolute) or -ENAMETOOLONG (longer
 * than CFG_SOCKET_PATH_MAX or than len - 1).  Reads the environment: call it from one thread
 * at a time (start-up, junctionctl). */
int cfg_management_default_socket(char *buf, size_t len);

/* A listener's or connector's `port` as a number: "amqp" is 5672, "amqps" 5671, digits are
 * themselves, any other name is looked up in the services database (getservbyname_r()).
 * Returns 0-65535 (0 = ephemeral), or -1 when the port is not valid.  Thread-safe. */
int cfg_port_number(const char *port);

/* A password attribute's value as qdrouterd 1.19 reads it (sslProfile `password`, connector
 * `saslPassword`):
 *   env:VAR       the value of environment variable VAR (blanks after the colon skipped)
 *   pass:TEXT     TEXT
 *   literal:TEXT  TEXT when allow_literal (sslProfile's password), else the value as written
 *   file:PATH     the first line of the file, without its newline (at most 199 bytes)
 *   anything else the value as written
 * Returns 0 with a new string in *out, and *plain set when the password itself is in the
 * configuration (qdrouterd warns "It is unsafe to provide plain text passwords in the config
 * file"); or -1 with one line in err[errlen]: a variable that is not set, a file that cannot
 * be read, is empty or has a longer first line (where qdrouterd would go on with a password
 * that cannot be right).  Reads the environment and the file system: main thread, start-up. */
int cfg_password_resolve(const char *value, bool allow_literal, char **out, bool *plain,
                         char *err, size_t errlen);

#endif
