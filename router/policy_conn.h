/* router/policy_conn.h: vhost policies on a connection (router/policy_conn.c): what conn.c,
 * transport.c and link_in.c call.  Every function is _WT (the connection's worker); each does
 * nothing on a connection that is not under vhost policy (no rtr_pconn_t).
 */
#ifndef JUNCTION_ROUTER_POLICY_CONN_H
#define JUNCTION_ROUTER_POLICY_CONN_H

#include "codec/codec.h"
#include "router/transport.h"

/* The client's open (before the router's open is written): false when the policy refused
 * it (the connection's close condition is set: amqp:resource-limit-exceeded "connection
 * disallowed by local policy").  Admitted: the group's frame size, sessions and message size
 * applied. */
bool rtr_policy_conn_open_WT(rtr_conn_t *c, pn_connection_t *pc);
/* The connection is freed: its counts go. */
void rtr_policy_conn_free_WT(rtr_conn_t *c);
/* A session's begin, with the incoming capacity the listener gives it: the capacity to use
 * (maxSessionWindow), or 0 when the session is refused (its condition is set). */
size_t rtr_policy_session_WT(rtr_conn_t *c, pn_session_t *s, size_t capacity);
/* A link's attach: NULL when allowed, else the condition to refuse it with (the description
 * is RTR_POLICY_DESC_LINK). */
const char *rtr_policy_link_WT(rtr_conn_t *c, pn_link_t *pl);
/* The user-id in a message's properties section (props[0, props_len), as codec_scan found
 * it; props_len 0: none), a view into it, or NULL/0 when it has none.  Thread-safe. */
void rtr_policy_user_id(const uint8_t *props, size_t props_len, const uint8_t **uid,
                        size_t *len);
/* A message scanned by codec_scan (props: its properties section, contiguous, or NULL when it
 * has none): its user-id (allowUserIdProxy) and, on an anonymous link, its properties' `to`
 * (targets): NULL when allowed, else the description to reject it with
 * (amqp:unauthorized-access). */
const char *rtr_policy_message_WT(rtr_conn_t *c, bool anonymous, const uint8_t *props,
                                  const codec_scan_t *scan);

#endif
