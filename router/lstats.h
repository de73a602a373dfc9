/* router/lstats.h: per-listener stats - what operators see of each listener's clients, and of
 * the ones it refused - and the one log line of each TLS or authentication failure.
 *
 * Two stat families, objects labelled by the listener's name as its management row names it
 * (its `name`, else its identity "listener/<host>:<port>"):
 *
 *   listener      connectionsAccepted, tlsHandshakesFailed, badProtocolHeaders
 *                 (Prometheus junction_listener_<field>_total{listener="..."})
 *   listenerAuth  authFailed, one object per reason (rtr_auth_reason_t) of a listener that
 *                 authenticates (authenticatePeer, saslMechanisms or saslPlugin): Prometheus
 *                 junction_listener_auth_failed_total{key="<listener>/<reason>",
 *                 listener="...",reason="credentials"}
 *
 * An http listener has a `listener` object too: its connectionsAccepted counts the AMQP
 * connections that came over WebSocket (its HTTP clients are the admin thread's).
 *
 * A listener's objects are made when the connection manager starts it (configured, or
 * management CREATE) and retired when it is deleted; its connections that outlive it count
 * nowhere from then on.  Counting is rare (an accept, a failure), so a count takes the
 * table's mutex, which also orders it before the retire of its object (stats/stats.h's
 * retire contract) - nothing on the data path counts here.
 *
 * Every TLS or authentication failure of a connection is counted and logged once, at info,
 * with the connection's id, the client's address and the listener, never what the client
 * sent (a password): "[C7] Connection from 127.0.0.1:40000 closed: TLS handshake failed:
 * <why> (listener L)", "[C7] SASL: authentication of client 127.0.0.1:40000 failed (mechanism
 * PLAIN): <why> (listener L, reason credentials)".  Later lines about the same end (Proton's
 * transport error) are left out.
 *
 * Threads: rtr_lstats_new/_free on the thread that owns the workers (rtr_ctx_init/fini);
 * rtr_lstats_listener_add/_del are thread-safe (the connection manager calls them from the
 * main and the agent thread); the _WT calls on the connection's worker.
 */
#ifndef JUNCTION_ROUTER_LSTATS_H
#define JUNCTION_ROUTER_LSTATS_H

#include "config/config.h"
#include "core/core.h"

#include <proton/condition.h>
#include <proton/transport.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rtr_lstats rtr_lstats_t;
struct rtr_conn;

/* Why an authentication failed: the `reason` label, one listenerAuth object each. */
typedef enum rtr_auth_reason {
    RTR_AUTH_CREDENTIALS = 0, /* "credentials": Cyrus refused the user or the password */
    RTR_AUTH_MECHANISM,       /* "mechanism": one the listener does not offer or Cyrus does not
                                 have (Proton's inclusion list, Cyrus's SASL_NOMECH) */
    RTR_AUTH_PROTOCOL,        /* "protocol": a SASL frame out of order, malformed or larger
                                 than maxFrameSize (the frame guard, sasl.c's order check) */
    RTR_AUTH_SKIPPED,         /* "skipped": AMQP without SASL to a listener that
                                 authenticates (Proton's policy-error) */
    RTR_AUTH_ABORTED,         /* "aborted": the client closed before the outcome */
    RTR_AUTH_TIMEOUT,         /* "timeout": no outcome within initialHandshakeTimeoutSeconds */
    RTR_AUTH_INTERNAL,        /* "internal": the router's side failed (Cyrus could not serve) */
    RTR_AUTH_N
} rtr_auth_reason_t;

/* The reasons' label values, in the enum's order (for the management rows too). */
#define RTR_AUTH_REASON_NAMES                                                                      \
    {                                                                                              \
        "credentials", "mechanism", "protocol", "skipped", "aborted", "timeout", "internal"        \
    }

/* The reason's label value ("credentials" ...). */
const char *rtr_auth_reason_name(rtr_auth_reason_t r);
/* The reason of a failed Cyrus SASL call's result code (SASL_BADAUTH: credentials ...). */
rtr_auth_reason_t rtr_auth_reason_of_cyrus(int rc);

/* Make the two families in cs->reg; NULL when they cannot be made (every count then goes
 * nowhere).  cs is borrowed and must outlive the table.  Owner thread of the workers. */
rtr_lstats_t *rtr_lstats_new(const core_stats_t *cs);
/* Retire every listener's objects and free the table, after the workers stopped.  NULL is
 * fine. */
void rtr_lstats_free(rtr_lstats_t *t);

/* Listener lc (borrowed; it outlives the table) with connection manager id `id` starts: make
 * its objects.  Thread-safe; t NULL is fine. */
void rtr_lstats_listener_add(rtr_lstats_t *t, const cfg_listener_t *lc, long id);
/* Listener lc is deleted: retire its objects.  Thread-safe; t NULL or an unknown lc is
 * fine. */
void rtr_lstats_listener_del(rtr_lstats_t *t, const cfg_listener_t *lc);

/* The connection c was accepted (counted on its listener). */
void rtr_lstats_accepted_WT(struct rtr_conn *c);

/* c's TLS handshake failed (or the client of a requireSsl listener is not TLS): count it on
 * the router (tlsHandshakesFailed) and the listener, and log it, once per connection. */
void rtr_lstats_tls_failed_WT(struct rtr_conn *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The same for a client of listener lc that is no connection of a worker's (an https client
 * of the admin thread's HTTP server): counted on the listener on `shard` (the router's own
 * counter is the caller's); name[len] gets the listener's name for the caller's log line.
 * Thread-safe; t NULL is fine. */
void rtr_lstats_tls_failed_other(rtr_lstats_t *t, const cfg_listener_t *lc, stats_shard_t *shard,
                                 char *name, size_t len);

/* c's authentication failed for `why` with mechanism mech (NULL: none chosen): count and log
 * it, once per connection; fmt says what failed, never with what the client sent. */
void rtr_lstats_auth_failed_WT(struct rtr_conn *c, rtr_auth_reason_t why, const char *mech,
                               const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* The same from the SASL layer, which knows the transport only (its context is the
 * connection: rtr_transport_open_WT sets it). */
void rtr_lstats_sasl_failed_WT(pn_transport_t *t, rtr_auth_reason_t why, const char *mech,
                               const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* The frame guard let c's first bytes through as an unknown protocol header (Proton answers
 * and closes): count and log it (a TLS ClientHello to a plain listener says so). */
void rtr_lstats_bad_header_WT(struct rtr_conn *c);

/* The frame guard refused c's bytes: true when that ends an authentication in progress
 * (counted and logged as "protocol"), false to let the caller log it. */
bool rtr_lstats_guard_refused_WT(struct rtr_conn *c);

/* c's initialHandshakeTimeoutSeconds ran out: true when a TLS handshake or a SASL exchange
 * was in progress (counted and logged), false to let the caller log it. */
bool rtr_lstats_handshake_expired_WT(struct rtr_conn *c);

/* Proton ended c's transport with condition cond: true when that end is a TLS or
 * authentication failure, counted and logged now or before (the caller logs nothing more),
 * false to let the caller log it. */
bool rtr_lstats_transport_error_WT(struct rtr_conn *c, pn_condition_t *cond);

#endif
