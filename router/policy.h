/* router/policy.h: vhost policies (qdrouterd 1.19's policy engine) - which client connection
 * is admitted, with which settings, and which of its sessions and links.
 *
 * The policy (rtr_policy_t) holds the vhosts (the configuration's, then management's CREATE,
 * UPDATE and DELETE) and each vhost's counters.  A connection's open is checked once
 * (rtr_policy_open): the vhost named by its listener's policyVhost or its open's hostname
 * (aliases, enableVhostNamePatterns, then defaultVhost), the user's group (by name, `*`, or
 * `$default` when allowUnknownUser), the remote host against the group's remoteHosts, then the
 * vhost's live limits (maxConnections, per user and per host, a group's own per user/host).
 * An admitted connection holds an rtr_pconn_t until it ends (rtr_policy_close): its group's
 * settings, frozen at the open (a vhost UPDATE applies to the connections opened after it, as
 * in qdrouterd), and the vhost's counters.  Session and link checks (rtr_pconn_*) read only
 * that record: no lock, nothing shared but atomic counters.
 *
 * Denials get qdrouterd's conditions and descriptions (RTR_POLICY_COND_*, RTR_POLICY_DESC_*),
 * are counted per vhost and per user, and are logged once each (POLICY module, info) with
 * qdrouterd's words and the reason.
 *
 * Threads: rtr_policy_open/close, the vhost changes and the readers are thread-safe (one
 * mutex, held for a few map look-ups; never while logging).  rtr_pconn_* functions read a
 * record that is immutable after the open (the counters in it are atomic): any thread.
 */
#ifndef JUNCTION_ROUTER_POLICY_H
#define JUNCTION_ROUTER_POLICY_H

#include "config/config.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RTR_POLICY_COND_LIMIT  "amqp:resource-limit-exceeded"
#define RTR_POLICY_COND_UNAUTH "amqp:unauthorized-access"
#define RTR_POLICY_DESC_CONN   "connection disallowed by local policy"
#define RTR_POLICY_DESC_SESS   "session disallowed by local policy"
#define RTR_POLICY_DESC_LINK   "link disallowed by local policy"

typedef struct rtr_policy rtr_policy_t;
typedef struct rtr_pconn  rtr_pconn_t;

/* A new policy with cfg's vhosts and switches (cfg is not kept).  Thread: any. */
rtr_policy_t *rtr_policy_new(const cfg_t *cfg);
void          rtr_policy_free(rtr_policy_t *p);
/* enableVhostPolicy. */
bool rtr_policy_enabled(const rtr_policy_t *p);

/* The open of connection conn_id: vhost_in (policyVhost or the open's hostname, "" when
 * none), the authenticated user, the client's address (numeric).  Returns the connection's
 * record, or NULL when it is denied (counted and logged; the caller closes the connection with
 * RTR_POLICY_COND_LIMIT / RTR_POLICY_DESC_CONN). */
rtr_pconn_t *rtr_policy_open(rtr_policy_t *p, uint64_t conn_id, const char *vhost_in,
                             const char *user, const char *host);
/* The open of connection conn_id, made by a connector whose policyVhost is vhost_in (a
 * role normal or route-container connector, under enableVhostPolicy), authenticated as user
 * to host: qdrouterd's `$connector` group of that vhost (found as an open's vhost is: name,
 * alias, pattern, defaultVhost) governs what the peer does on it - the links it attaches
 * (sources, targets, maxSenders, maxReceivers, dynamic source, anonymous sender, waypoint and
 * fallback capabilities), the sessions it begins (maxSessions), the messages it sends
 * (allowUserIdProxy, maxMessageSize, targets of an anonymous sender), as on a client's
 * connection.  users, remoteHosts, maxFrameSize and maxSessionWindow are unused, the
 * connection is not counted in the vhost's connections, and the links the router attaches
 * itself (autoLinks, link routes) are not checked.  Returns the record, or NULL when there is
 * no such vhost or it has no `$connector` group (logged, an error in qdrouterd's words; the
 * caller closes the connection with RTR_POLICY_COND_LIMIT / RTR_POLICY_DESC_CONN). */
rtr_pconn_t *rtr_policy_open_connector(rtr_policy_t *p, uint64_t conn_id, const char *vhost_in,
                                       const char *user, const char *host);
/* The connection ended: its counts go.  NULL is fine. */
void rtr_policy_close(rtr_policy_t *p, rtr_pconn_t *pc);

/* The settings an admitted connection gets (0 = the listener's). */
uint32_t rtr_pconn_max_frame_size(const rtr_pconn_t *pc);
uint32_t rtr_pconn_max_sessions(const rtr_pconn_t *pc);
uint32_t rtr_pconn_max_session_window(const rtr_pconn_t *pc);
/* Its maxMessageSize: the group's, else the vhost's, else the policy's (0 = none). */
uint64_t rtr_pconn_max_message_size(const rtr_pconn_t *pc);
/* The vhost it was admitted to (the vhost's hostname). */
const char *rtr_pconn_vhost(const rtr_pconn_t *pc);

/* A session begins: false when it is one more than maxSessions (n_sessions: those open
 * before it); counted and logged. */
bool rtr_pconn_session(rtr_pconn_t *pc, uint64_t conn_id, uint32_t n_sessions);

/* What a link's attach asks for. */
typedef struct rtr_plink {
    bool        client_sends; /* the client's sender (the router's receiving end) */
    uint32_t    n_same;       /* the connection's links of that direction already */
    const char *address;      /* target (sender) or source (receiver) address; NULL/"" none */
    bool        dynamic;      /* a receiver's dynamic source */
    bool        waypoint;     /* the terminus's first capability starts qd.waypoint */
    bool        fallback;     /* the terminus's first capability is qd.fallback */
} rtr_plink_t;

/* A link's attach: NULL when allowed, else the condition name (RTR_POLICY_COND_*; the
 * description is RTR_POLICY_DESC_LINK); counted and logged. */
const char *rtr_pconn_link(rtr_pconn_t *pc, uint64_t conn_id, const rtr_plink_t *l);
/* A message to `to` on an anonymous sender (the targets rule); false = denied (logged). */
bool rtr_pconn_message_to(rtr_pconn_t *pc, uint64_t conn_id, const char *to, size_t len);
/* allowUserIdProxy: whether the connection may send a user-id that is not its own. */
bool rtr_pconn_user_id_proxy(const rtr_pconn_t *pc);
/* Whether `user_id` (len bytes) is the connection's own user. */
bool rtr_pconn_is_user(const rtr_pconn_t *pc, const char *user_id, size_t len);
/* allowAdminStatusUpdate of connection conn_id's group (true for a connection not under vhost
 * policy, or gone): whether it may close connections through management. */
bool rtr_policy_admin_status_allowed(rtr_policy_t *p, uint64_t conn_id);
/* allowDynamicLinkRoutes of connection conn_id's group (true for a connection not under
 * vhost policy, or gone): whether it may CREATE connection-scoped link routes
 * (router.connection.linkRoute) through management.  A refusal is counted for the user
 * (perUserDenied) and logged. */
bool rtr_policy_dynamic_link_routes_allowed(rtr_policy_t *p, uint64_t conn_id);
/* allowAdminStatusUpdate, allowDynamicLinkRoutes. */
bool rtr_pconn_admin_status_update(const rtr_pconn_t *pc);
bool rtr_pconn_dynamic_link_routes(const rtr_pconn_t *pc);
/* A message over maxMessageSize was refused on this connection (counted). */
void rtr_pconn_count_size_denied(rtr_pconn_t *pc);

/* -- management (vhost, vhostStats) -- */

/* Add or replace the vhost (v is taken: emptied).  Returns 0, or -1 with one line in err
 * (an alias or pattern that names another vhost). */
int rtr_policy_vhost_set(rtr_policy_t *p, cfg_vhost_t *v, char *err, size_t errlen);
/* Remove the vhost of that hostname: 0, or -1 when there is none. */
int rtr_policy_vhost_del(rtr_policy_t *p, const char *hostname);

/* One vhost's counters (vhostStats). */
typedef struct rtr_pstats_row {
    char    *hostname;
    uint64_t approved, denied, current;
    uint64_t session_denied, sender_denied, receiver_denied, size_denied;
    char    *per_user;        /* JSON map user -> connections open, heap */
    char    *per_host;        /* JSON map host -> connections open, heap */
    char    *per_user_denied; /* JSON map user -> connections, sessions and links denied
                                 (Junction's own; users past POLICY_USERS_MAX are left out) */
} rtr_pstats_row_t;

/* Every vhost's counters (also of vhosts deleted since, as qdrouterd keeps them): a new array
 * in *rows, its length returned.  Free with rtr_policy_stats_free. */
size_t rtr_policy_stats(rtr_policy_t *p, rtr_pstats_row_t **rows);
void   rtr_policy_stats_free(rtr_pstats_row_t *rows, size_t n);
/* A copy of every current vhost (cfg_vhost_t, free each with cfg_vhost_fini, then the array). */
size_t rtr_policy_vhosts(rtr_policy_t *p, cfg_vhost_t **out);

#endif
