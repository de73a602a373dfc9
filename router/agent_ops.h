/* router/agent_ops.h: AMQP management (qdrouterd's `$management`) as a function - one
 * encoded request message in, one encoded reply message out - with the entity schema.
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
 * router.address and allocator come from the stats registry through stats/'s entity.query
 * (stats_mgmt_*), so junctionctl and AMQP management show the same rows.
 *
 * Status codes as qdrouterd: 200, 201 (CREATE), 204 (DELETE); 400 malformed request or
 * invalid attributes; 403 an operation qdrouterd forbids (CREATE/DELETE router, DELETE
 * connection); 404 unknown entity type, entity or attribute; 501 an operation the type does
 * not have, or an unknown operation.
 *
 * Side effects leave through hooks (so the logic runs in unit tests without a router):
 * listeners (main thread), address configuration (core thread), closing a connection (its
 * worker).  Log levels are changed directly (core/base/log.h is thread-safe).
 *
 * Threads: an rtr_mgmt_t is used by one thread (the agent thread); hooks are called on it.
 */
#ifndef JUNCTION_ROUTER_AGENT_OPS_H
#define JUNCTION_ROUTER_AGENT_OPS_H

#include "config/config.h"
#include "stats/stats.h"

#include <stddef.h>
#include <stdint.h>

typedef struct rtr_mgmt rtr_mgmt_t;

/* What the agent asks of the rest of the router.  Every hook is called on the agent's
 * thread and must not block. */
typedef struct rtr_mgmt_hooks {
    void *ctx; /* passed to every hook */
    /* Start accepting on a new listener (lc stays valid until rtr_mgmt_free()).  Returns its
     * id (> 0), or -1 with a one-line reason in err. */
    long (*listener_add)(void *ctx, const cfg_listener_t *lc, char *err, size_t errlen);
    /* Stop accepting on listener `id` (configured listener i has id i + 1). */
    void (*listener_del)(void *ctx, long id);
    /* Route new addresses matching ac by it (ac stays valid until rtr_mgmt_free()). */
    void (*address_add)(void *ctx, const cfg_address_t *ac);
    /* Stop using ac for new addresses. */
    void (*address_del)(void *ctx, const cfg_address_t *ac);
    /* Close connection `id` (it is known to exist). */
    void (*conn_close)(void *ctx, uint64_t id);
} rtr_mgmt_hooks_t;

/* What the agent says about the router. */
typedef struct rtr_mgmt_info {
    const char *router_id; /* the router's id */
    const char *mode;      /* "standalone" */
    const char *version;   /* Junction's version */
} rtr_mgmt_info_t;

/* A new agent state for the configuration `cfg` (borrowed: it must outlive the state; its
 * listeners, addresses and logs are the initial entities), reading stats from `reg`
 * (borrowed).  Caller owns it. */
rtr_mgmt_t *rtr_mgmt_new(const cfg_t *cfg, stats_registry_t *reg, const rtr_mgmt_info_t *info,
                         const rtr_mgmt_hooks_t *hooks);
/* Free the state and every configuration it made (call once nothing can use them any more:
 * after the core and the workers stopped). NULL is fine. */
void rtr_mgmt_free(rtr_mgmt_t *m);

/* Answer one encoded request message bytes[0..len).  Returns 0 with a new encoded reply in
 * *out (*out_len bytes, caller frees with free()) and its destination (the request's
 * reply-to) in *to (caller frees); or -1 when no reply can be sent (the bytes are not an
 * AMQP message, or it has no reply-to), with a static reason in *why.  Never crashes on any
 * input; the state stays usable. */
int rtr_mgmt_handle(rtr_mgmt_t *m, const uint8_t *bytes, size_t len, uint8_t **out,
                    size_t *out_len, char **to, const char **why);

#endif
