/* router/mgmt/mgmt.h: Junction's management - one module, prefix mgmt_ - for qdrouterd's
 * AMQP management (`$management`, qdstat and qdmanage) and for the management socket's
 * JSON-lines protocol (junctionctl, the console).  Both read one entity schema
 * (schema.c) and build their rows once from live state (rows.c): the stats registry for the
 * operational types, the node's configuration records for the configuration types.
 *
 * This header is the part without threads or I/O: the AMQP node as a function (one encoded
 * request in, one encoded reply out: node.c, ops.c, amqp.c) and the protocol session (one
 * request line in, reply lines out: proto.c, proto_stats.c).  The threads that carry them
 * are in admin.h (the admin thread: the socket, sessions over any transport) and agent.h
 * (the agent thread: `$management` at the core).  router/DESIGN.md draws the whole.
 *
 * Threads: a node or a protocol session belongs to one thread at a time; hooks are called
 * on it.  The stats registry is read through stats/'s thread-safe calls.
 */
#ifndef JUNCTION_ROUTER_MGMT_H
#define JUNCTION_ROUTER_MGMT_H

#include "config/config.h"
#include "core/core.h" /* core_autolink_row_t (the type only) */
#include "stats/stats.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A listener's identity as its management row gives it: "listener/<host>:<port>", with
 * ":<id>" after port "0" (each ephemeral port is then unique); its row's name is its `name`,
 * else this (the per-listener stats label it the same way, router/lstats.h).  Pure. */
void mgmt_listener_identity(const cfg_listener_t *lc, long id, char *buf, size_t len);

/* What hello and the router row say about the process (copied where it is kept). */
typedef struct mgmt_info {
    const char *product;   /* "junction" (NULL = that) */
    const char *version;   /* e.g. "0.1.0" */
    const char *router_id; /* the router's id */
    const char *mode;      /* "standalone" (NULL = that) */
} mgmt_info_t;

/* =======================================================================================
 * AMQP management (node.c, ops.c, amqp.c): qdrouterd's `$management` as a function
 *
 * The request/response shape is qdrouterd's (AMQP management draft as qdrouterd implements
 * it): application properties `operation`, `type`, `name`, `identity`, `entityType`,
 * `offset`, `count` (and `limit` for GET-LOG, `indent` for GET-JSON-SCHEMA), string keys
 * only; body an amqp-value map.  The reply goes to the request's reply-to, echoes its
 * correlation-id (with its type), carries `statusCode` (int) and `statusDescription`, and a
 * body: QUERY {attributeNames, results}, READ/CREATE/UPDATE the entity's attribute map,
 * DELETE an empty map, errors an empty map.
 *
 * Operations: QUERY, READ, CREATE, UPDATE, DELETE, GET-TYPES, GET-ATTRIBUTES,
 * GET-OPERATIONS, GET-ANNOTATIONS, GET-MGMT-NODES, GET-SCHEMA, GET-JSON-SCHEMA, GET-LOG.
 * Entity types (prefix org.apache.qpid.dispatch.): router, listener, connector,
 * router.config.address, router.config.autoLink, router.config.linkRoute, router.link,
 * router.address, connection, allocator, log, logStats, policy, router.node, and the
 * node itself (org.amqp.management).  Rows of router, connection, router.link,
 * router.address and allocator are the ones the socket's entity.query sends.
 *
 * Status codes as qdrouterd: 200, 201 (CREATE), 204 (DELETE); 400 malformed request or
 * invalid attributes; 403 an operation qdrouterd forbids (CREATE/DELETE router, DELETE
 * connection); 404 unknown entity type, entity or attribute; 501 an operation the type does
 * not have, or an unknown operation.
 *
 * Side effects leave through hooks (so the logic runs in unit tests without a router):
 * listeners (main thread), address configuration (core thread), closing a connection (its
 * worker).  Log levels are changed directly (core/base/log.h is thread-safe).
 * ======================================================================================= */

typedef struct mgmt_node mgmt_node_t;

/* The router's sslProfiles as management lists and changes them (router/tls.c implements it
 * over its profile set: every call is thread-safe, and none waits on more than a short lock -
 * the files are read by the calling thread, outside it).  Errors: a negative errno with one
 * line in err naming the profile, the file and what is wrong. */
typedef struct mgmt_tls {
    void *ctx; /* passed to every call */
    /* A new profile with a context built and checked from p: 0, -EINVAL, -EEXIST. */
    int (*add)(void *ctx, const cfg_ssl_profile_t *p, char *err, size_t errlen);
    /* Profile p->name takes p's attributes and a new context (the old stays on failure):
     * 0, -EINVAL, -ENOENT. */
    int (*update)(void *ctx, const cfg_ssl_profile_t *p, char *err, size_t errlen);
    /* Remove a profile: 0, -ENOENT, -EBUSY (a listener or a connector names it). */
    int (*del)(void *ctx, const char *name, char *err, size_t errlen);
    /* A listener names the profile (0) until release; -ENOENT when there is none. */
    int (*hold)(void *ctx, const char *name);
    void (*release)(void *ctx, const char *name);
    /* A connector names the profile (0) until release_client; the profile gets a client
     * context if it had none: -ENOENT (none of that name) or -EINVAL (no client context
     * can be made from it), with one line in err. */
    int (*hold_client)(void *ctx, const char *name, char *err, size_t errlen);
    void (*release_client)(void *ctx, const char *name);
    /* Copies of every profile (password as written), *n of them; free with copy_free. */
    cfg_ssl_profile_t *(*copy)(void *ctx, size_t *n);
    void (*copy_free)(cfg_ssl_profile_t *v, size_t n);
} mgmt_tls_t;

/* What the node asks of the rest of the router.  Every hook is called on the node's
 * thread and must not block. */
typedef struct mgmt_hooks {
    void *ctx; /* passed to every hook */
    /* Start accepting on a new listener (lc stays valid until mgmt_node_free()).  Returns its
     * id (> 0), or -1 with a one-line reason in err. */
    long (*listener_add)(void *ctx, const cfg_listener_t *lc, char *err, size_t errlen);
    /* Stop accepting on listener `id` (configured listener i has id i + 1). */
    void (*listener_del)(void *ctx, long id);
    /* Route new addresses matching ac by it (ac stays valid until mgmt_node_free()). */
    void (*address_add)(void *ctx, const cfg_address_t *ac);
    /* Stop using ac for new addresses. */
    void (*address_del)(void *ctx, const cfg_address_t *ac);
    /* Add link route lr (it stays valid until mgmt_node_free()) / remove it. */
    void (*link_route_add)(void *ctx, const cfg_link_route_t *lr);
    void (*link_route_del)(void *ctx, const cfg_link_route_t *lr);
    /* Close connection `id` (it is known to exist). */
    void (*conn_close)(void *ctx, uint64_t id);
    /* The sslProfiles (borrowed; NULL: the type has no entities and cannot be changed). */
    const mgmt_tls_t *tls;
    /* A copy of every autoLink with its state (core_autolink_rows()), *n of them; NULL when
     * none; free with autolink_rows_free.  NULL hook: no autoLinks. */
    core_autolink_row_t *(*autolink_rows)(void *ctx, size_t *n);
    void (*autolink_rows_free)(core_autolink_row_t *rows, size_t n);
    /* CREATE: a new autoLink (al is copied); returns its id.  NULL: autoLinks cannot be
     * made. */
    uint32_t (*autolink_add)(void *ctx, const cfg_autolink_t *al);
    /* DELETE of autoLink `id`: 0, or -ENOENT. */
    int (*autolink_del)(void *ctx, uint32_t id);
    /* Start a connector (cn stays valid until mgmt_node_free()): its id (> 0), or -1 with
     * a one-line reason in err. */
    long (*connector_add)(void *ctx, const cfg_connector_t *cn, char *err, size_t errlen);
    /* Delete connector `id`: no attempt any more, its connection closed. */
    void (*connector_del)(void *ctx, long id);
    /* Connector `id`'s connectionStatus and connectionMsg (router/connector.h); false when
     * it has none (NULL hook: INITIALIZING, no message). */
    bool (*connector_status)(void *ctx, long id, char *status, size_t slen, char *msg,
                             size_t mlen);
    /* Connector `id`'s failoverUrls (router/connector.h: the failover list in use, current
     * address first) into urls[len]; false when it has none (NULL hook: null). */
    bool (*connector_failover)(void *ctx, long id, char *urls, size_t len);
    /* Interior mode: a copy of the router.node rows (core_node_rows()), *n of them; NULL
     * when none; free with node_rows_free.  NULL hook: no rows. */
    core_node_row_t *(*node_rows)(void *ctx, size_t *n);
    void (*node_rows_free)(core_node_row_t *rows, size_t n);
    /* The vhost policies (router/policy.h: thread-safe; vhost CREATE/UPDATE/DELETE apply to
     * the opens after them), or NULL: no vhosts. */
    struct rtr_policy *policy;
} mgmt_hooks_t;

/* A new node for the configuration `cfg` (borrowed: it must outlive the node; its
 * listeners, addresses and logs are the initial entities), reading stats from `reg`
 * (borrowed); `info` is copied (its product is not used).  Caller owns it. */
mgmt_node_t *mgmt_node_new(const cfg_t *cfg, stats_registry_t *reg, const mgmt_info_t *info,
                           const mgmt_hooks_t *hooks);
/* Free the node and every configuration it made (call once nothing can use them any more:
 * after the core and the workers stopped). NULL is fine. */
void mgmt_node_free(mgmt_node_t *n);

/* Answer one encoded request message bytes[0..len).  Returns 0 with a new encoded reply in
 * *out (*out_len bytes, caller frees with free()) and its destination (the request's
 * reply-to) in *to (caller frees); or -1 when no reply can be sent (the bytes are not an
 * AMQP message, or it has no reply-to), with a static reason in *why.  Never crashes on any
 * input; the node stays usable. */
/* The same for a request that came on link `from_link` (0: unknown): vhost policy's
 * allowAdminStatusUpdate is its connection's. */
int mgmt_amqp_handle_from(mgmt_node_t *n, uint64_t from_link, const uint8_t *bytes, size_t len,
                          uint8_t **out, size_t *out_len, char **to, const char **why);
int mgmt_amqp_handle(mgmt_node_t *n, const uint8_t *bytes, size_t len, uint8_t **out,
                     size_t *out_len, char **to, const char **why);

/* =======================================================================================
 * The JSON-lines protocol (proto.c, proto_stats.c) - the management socket's (issue 4)
 *
 * A pure function: one request line in, zero or more reply lines out through a
 * stats_write_fn (each call gets exactly one complete line: a JSON object and "\n").  The
 * management socket (admin.c) keeps one session per client (sess.c); so can any other
 * transport: the http listeners' WebSocket subprotocol `junction-mgmt` (router/http.c) carries
 * each request line as one text message and each reply line as one text message (without
 * its "\n").  Newline-delimited JSON, UTF-8; strings the router does not control (labels)
 * are sent with invalid bytes replaced by U+FFFD.
 *
 *   on connect  {"hello": {"product": "junction", "version": "0.1.0", "router_id": "R",
 *                          "mode": "standalone", "protocol": 1, "max_line": 65536,
 *                          "ops": [...]}}
 *   request     {"id": 7, "op": "stats.get", "match": "address.*.deliveriesEgress"}
 *   reply       {"id": 7, "result": {"values": {"address.M0q.deliveriesEgress": 12}}}
 *   error       {"id": 7, "error": {"code": 400, "message": "argument 'match': ..."}}
 *
 * `id` is a number or a string, echoed as given; an error about a line whose id could not
 * be read has "id": null.  Values: counters are unsigned, gauges signed, histograms
 * {"count", "sum", "buckets": [per-bucket counts, the last is +Inf], "p50", "p90", "p99"}.
 *
 *   stats.list       {"match"?: glob, "limit"?: 1..10000 (1000), "cursor"?: next}
 *                    -> {"stats": [{"name", "kind", "help"?, "labels"?: {key: value}}],
 *                        "next": cursor or null}
 *   stats.get        {"match": name or glob, "limit"?: 1..100000 (10000)}
 *                    -> {"values": {name: value}, "truncated"?: true}
 *   stats.snapshot   {"match"?: glob} -> several lines {"id", "result": {"values": {...}},
 *                    "more": true} ... the last with "more": false (at most 512 values or
 *                    about 32 KiB per line)
 *   stats.subscribe  {"match": glob, "interval_ms"?: 10..3600000 (1000)}
 *                    -> {"sub": N, "interval_ms"}; then, every interval, a line
 *                    {"sub": N, "values": {name: value, ...}, "gone"?: [name, ...],
 *                    "truncated"?: true} holding what changed since the last update the
 *                    client got (the first holds everything); no line when nothing changed
 *   stats.unsubscribe {"sub": N} -> {"sub": N}
 *   entity.query     {"type": "router" | "connection" | "link" | "address" | "allocator"
 *                    (qdrouterd's names too: "router.link",
 *                    "org.apache.qpid.dispatch.router.address"),
 *                    "attributeNames"?: [...], "offset"?: n, "count"?: n}
 *                    -> lines {"id", "result": {"type", "attributeNames": [...],
 *                    "results": [[...], ...]}, "more": ...} as stats.snapshot; the rows
 *                    are qdrouterd's QUERY rows (its attribute names) built from the
 *                    objects of the stats family of the same name, plus every field of
 *                    that family
 *   sslProfile.list  {} -> {"profiles": [{attribute: value}, ...]}  (qdrouterd's attribute
 *                    names, as the AMQP QUERY of sslProfile has them: the password only
 *                    when it names where it is, env: or file:, else null)
 *   sslProfile.create {"name", "attributes": {...}} -> {"profile": {...}}
 *   sslProfile.update {"name", "attributes"?: {...}} -> {"profile": {...}}: the given
 *                    attributes replace the profile's (null removes one), its files are read
 *                    again and its TLS context rebuilt; new connections use it, open ones
 *                    keep theirs; on any error the old one stays in force
 *   sslProfile.delete {"name"} -> {"deleted": name}  (refused while a listener names it)
 *
 * Error codes: 400 malformed line or bad argument (a certificate, key or password that
 * fails its checks: the message names the file and what is wrong), 403 an operation this
 * transport may not do (sslProfile.* on a WebSocket), 404 unknown op, type, attribute,
 * subscription or profile, 409 a streamed reply is still being sent (or a profile in use),
 * 413 line too long, 429 too many subscriptions; servers add 503 (too many clients).  After an error the session goes on.
 *
 * Threads: a session belongs to one thread at a time; sessions are independent.  A
 * streamed reply holds an iterator, never the registry's mutex, between calls.
 * ======================================================================================= */

// clang-format off
#define MGMT_PROTO_PROTOCOL      1           /* "protocol" in hello */
#define MGMT_PROTO_LINE_MAX      (64u << 10) /* longest request line (bytes, without "\n") */
#define MGMT_PROTO_MAX_SUBS      32          /* subscriptions per session */
#define MGMT_PROTO_SUB_MAX_STATS 100000      /* stats one subscription follows */
// clang-format on

typedef struct mgmt_proto mgmt_proto_t; /* one client's session */

/* A new session reading registry r (borrowed: it must outlive the session).  Caller owns
 * it.  Thread-safe. */
mgmt_proto_t *mgmt_proto_new(stats_registry_t *r, const mgmt_info_t *info);

/* Let the session's sslProfile.* operations change the router's sslProfiles (tls borrowed: it
 * must outlive the session).  Without it they answer 403.  Only the management socket's
 * sessions get it: a WebSocket client of an http listener has no right to change certificates. */
void mgmt_proto_set_tls(mgmt_proto_t *m, const mgmt_tls_t *tls);

/* Free the session, its streamed reply and its subscriptions.  NULL is fine. */
void mgmt_proto_free(mgmt_proto_t *m);

/* Write the hello line.  Returns what write returned. */
int mgmt_proto_hello(mgmt_proto_t *m, stats_write_fn write, void *ctx);

/* Answer one request line (len bytes, with or without its "\n"; no NUL needed).  Writes one
 * reply line - or, for stats.snapshot and entity.query, the first line of a streamed reply
 * (mgmt_proto_is_streaming() then says whether more follow: call mgmt_proto_resume() for
 * each further line, e.g. whenever the client's output has drained).  A blank line gets no
 * reply.  Every problem with the line is an error reply; the session stays usable.  Returns
 * 0, or the first negative value write returned. */
int mgmt_proto_handle(mgmt_proto_t *m, const char *line, size_t len, stats_write_fn write,
                      void *ctx);

/* A streamed reply is in progress (more lines to come through mgmt_proto_resume). */
bool mgmt_proto_is_streaming(const mgmt_proto_t *m);

/* Write the streamed reply's next line (no-op when none is in progress).  Returns 0 or the
 * write's negative value. */
int mgmt_proto_resume(mgmt_proto_t *m, stats_write_fn write, void *ctx);

/* Emit the subscription updates due at now_ms (any monotonic clock in ms): at most one
 * line per subscription.  If write refuses an update with -EAGAIN (the client is slow) the
 * update is dropped and not lost: the next one carries the latest value of everything that
 * changed since the last update delivered - a slow subscriber gets the latest values, never
 * a backlog.  Returns 0, or write's first negative value other than -EAGAIN. */
int mgmt_proto_tick(mgmt_proto_t *m, uint64_t now_ms, stats_write_fn write, void *ctx);

/* Milliseconds from now_ms until mgmt_proto_tick() has something due (0 = now), or -1 when
 * the session has no subscription. */
int64_t mgmt_proto_next_due(const mgmt_proto_t *m, uint64_t now_ms);

/* Write an error line with "id": null (for what a server refuses before any session sees
 * it: an over-long line, one client too many).  Returns what write returned.  Pure. */
int mgmt_proto_error(stats_write_fn write, void *ctx, int code, const char *message);

#endif
