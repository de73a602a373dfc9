/* core/rt.h: interior mode's control plane on the core thread - qdrouterd 1.19's routing
 * protocol (core/routing/) wired to the inter-router connections the workers report.
 *
 * The workers report each inter-router connection as it opens (with its effective cost) and
 * as it goes, each routing message that arrives on a connection's incoming control link (its
 * bytes), and the loss of a control link (CORE_A_RT).  rt.c decodes the message
 * (core/routing/msg.h), hands it to the link-state database or the mobile-address table, and
 * sends what they ask for - and what must travel on through this router (flooded RA and MAU,
 * LSR/LSU/MAR/MAU for another router) - as whole encoded messages with this hop's router
 * annotations, to the worker of the connection chosen (CORE_W_RT_SEND), which puts them on
 * its outgoing control link.  Reading a control message's body here is the exception
 * docs/decisions/0008 records.
 *
 * Threads: core_rt_new/_free on the main thread (core_new/core_free); core_rt_node_rows()
 * any thread (a copy under a lock); everything else _CT.
 */
#ifndef JUNCTION_CORE_RT_H
#define JUNCTION_CORE_RT_H

#include "core/core.h"

#include <stddef.h>
#include <stdint.h>

typedef struct core_rt core_rt_t;

/* Made by core_new() when the router's mode is interior; NULL otherwise. */
core_rt_t *core_rt_new(const cfg_t *cfg, const char *router_id);
void       core_rt_free(core_rt_t *rt);

/* CORE_A_RT (the action's u.rt). */
void core_rt_action_CT(core_t *core, core_action_t *a);
/* Once a second (core.c's tick): the protocol's timers and the mobile-address batch. */
void core_rt_tick_CT(core_t *core);
/* A mobile address got its first local consumer (`first`) or lost its last one. */
void core_rt_local_dest_CT(core_t *core, const char *key, size_t keylen, cfg_distribution_t dist,
                           bool first);
/* A key this router has (add) or no longer has, with its MAU treatment hint: a link
 * route's (core/linkroute_mesh.h). */
void core_rt_local_key_CT(core_t *core, const char *key, size_t keylen, int hint, bool add);
/* Free what an action posted after the core stopped carries (CORE_A_RT's bytes). */
void core_rt_action_discard(core_action_t *a);

#endif
