/* Server-side SASL through Cyrus SASL.
 *
 * Debian's Proton is built without Cyrus: its own SASL layer offers ANONYMOUS and checks no
 * password.  This module plugs Cyrus into Proton's SASL plugin interface
 * (proton/sasl_plugin.h) for the listeners that authenticate, so that the Cyrus configuration
 * file (<saslConfigDir>/<saslConfigName>.conf: mech_list, sasldb_path, pwcheck_method,
 * auxprop_plugin) and the sasldb of a qdrouterd deployment serve unchanged.
 *
 * Threads: rtr_sasl_init() and rtr_sasl_fini() on the main thread, before any worker starts
 * and after all have stopped (Cyrus's library state is the process's); rtr_sasl_server_WT()
 * and the plugin's entry points on the connection's worker.
 */
#ifndef RTR_SASL_H
#define RTR_SASL_H

#include "config/config.h"

#include <proton/transport.h>
#include <stdbool.h>
#include <stddef.h>

/* Start Cyrus's server side with the router's saslConfigDir (NULL: Cyrus's default places)
 * and saslConfigName; logs the mechanisms its plugins provide at info.  0, or -1 with one
 * line in err. */
int rtr_sasl_init(const cfg_router_t *r, char *err, size_t errlen);
void rtr_sasl_fini(void);

/* Whether listener l authenticates through Cyrus (authenticatePeer, or a saslMechanisms
 * list): else Proton's own ANONYMOUS serves it. */
bool rtr_sasl_listener_uses_cyrus(const cfg_listener_t *l);

/* Make transport t (a server's) authenticate through Cyrus as listener l says; peer is the
 * client's "host:port", kept for the log line of a failed authentication (it must outlive
 * t).  false when Cyrus has not been started. */
bool rtr_sasl_server_WT(pn_transport_t *t, const cfg_listener_t *l, const char *peer);

/* Let the Cyrus exchange of transport t (rtr_sasl_server_WT made it) offer EXTERNAL once
 * *tls holds a TLS session whose client certificate verified; tls is the connection's slot
 * for its session (it outlives t). */
typedef struct rtr_tls_conn rtr_tls_conn_t;
void rtr_sasl_external_WT(pn_transport_t *t, rtr_tls_conn_t *const *tls);

/* Whether listener l's TLS sessions ask the client for a certificate (and so may offer
 * EXTERNAL): as qdrouterd, when it has an sslProfile and saslMechanisms names EXTERNAL. */
bool rtr_sasl_listener_asks_cert(const cfg_listener_t *l);

#endif
