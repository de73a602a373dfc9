/* router/authsvc.h: a listener's SASL exchange handed to a remote AMQP authentication service
 * (the listener's `saslPlugin` names an `authServicePlugin`), as qdrouterd's does.
 *
 * For each client of such a listener the router opens its own AMQP connection (SASL, TLS when
 * the plugin has an sslProfile) to the service, offers the client the mechanisms the service
 * offers, relays the client's sasl-init and sasl-responses to the service and its challenges
 * back, and gives the client the service's outcome.  On success the client's user is the
 * identity the service names in its open's properties (`authenticated-identity`).  The
 * service unreachable, or gone before its outcome: the client's authentication fails
 * (sasl-outcome code 1, auth, as qdrouterd's), with one log line naming the client.
 *
 * Threads: everything runs on the client connection's worker (_WT): the connection to the
 * service is a handle of that worker's loop, made with uv_tcp_connect (uv_getaddrinfo for a
 * host name), never a blocking call.
 */
#ifndef JUNCTION_ROUTER_AUTHSVC_H
#define JUNCTION_ROUTER_AUTHSVC_H

#include "config/config.h"
#include "router/ctx.h"

#include <proton/transport.h>
#include <stdbool.h>
#include <stdint.h>

/* Make server transport t, of connection conn_id whose client is `peer` ("host:port", copied
 * for the log lines), authenticate through the authServicePlugin listener l names, on worker
 * w.  wake_WT(arg) is called when t has something new to write: the caller processes the
 * connection soon, which lets Proton write it, but not from inside the call (it may come from
 * one of t's Proton calls); it is never called after Proton freed t's SASL layer.  false when l
 * names no plugin of w's configuration (the caller then authenticates as without one).  The state
 * belongs to t: Proton frees it with t, and the connection to the service is closed then at the
 * latest. */
bool rtr_authsvc_server_WT(pn_transport_t *t, rtr_worker_t *w, const cfg_listener_t *l,
                           uint64_t conn_id, const char *peer, void (*wake_WT)(void *arg),
                           void *arg);

#endif
