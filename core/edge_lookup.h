/* core/edge_lookup.h: link routes through an edge router - qdrouterd 1.19's address lookup
 * (its address_lookup_client and address_lookup_server core modules), the core's side.
 *
 * Facts (qdrouterd 1.19, checked against a running qdrouterd):
 *  - An edge router that gets a client's attach with an address (not dynamic, not
 *    anonymous, not on the edge connection itself) while its active edge connection's
 *    lookup links are up, and no local link route that a connection of its own serves
 *    matches, asks its interior's `_$qd.addr_lookup` service whether the address is
 *    link-routed, and holds the attach until the answer (router/edge_lookup.h has the
 *    messages).  No answer within 3 s, a refused or lost lookup link, the loss of the edge
 *    connection: the edge's own lookup, as if it had not asked.
 *  - The interior answers from its link-route table, link routes learned from other routers
 *    of the mesh included: [is link route, has destinations], the status NOT_FOUND (3) when
 *    no route matches.  Destinations: a connection of its own serves the route, or another
 *    router advertises it.
 *  - Link route with destinations: the edge forwards the attach unchanged (same name, same
 *    termini) on its active edge connection, and every frame of the link follows it both
 *    ways (router/linkroute.c); the interior routes it on as a client's attach.  Link route
 *    without destinations: the attach is refused with `qd:no-route-to-dest`.  Not a link
 *    route: the edge's own lookup (message routing, proxied to the interior as usual).
 *  - The edge connection lost: each routed link's client end is detached with
 *    `qd:routed-link-lost`; new attaches go through the next active edge connection.
 *
 * Where Junction differs: an attach to a node of the router itself ($management) is never
 * asked about, so that management of an edge answers while its interior is slow.  An
 * autoLink's link is not asked about either (in qdrouterd the core makes it, not a peer's
 * attach).
 *
 * Threads: every function is _CT (the core thread); core_elk_free() runs in core_free().
 */
#ifndef JUNCTION_CORE_EDGE_LOOKUP_H
#define JUNCTION_CORE_EDGE_LOOKUP_H

#include "core/core.h"

#include <stdbool.h>

/* Edge mode, a client's CORE_A_LINK_ATTACH: when it is to be asked about, the lookup takes
 * the action (its strings too), asks the active edge connection's worker and returns true;
 * the attach is answered when the reply comes (core__link_attach_CT()).  False: go on. */
bool core_elk_attach_CT(core_t *core, core_action_t *a);

/* Edge mode, CORE_A_LINK_DETACH: a link whose attach waits for its answer is answered
 * first (refused), so that the detach finds it as any other.  Returns nothing: the caller
 * goes on with the detach. */
void core_elk_detach_CT(core_t *core, uint64_t link_id);

/* Edge mode: CORE_A_EDGE LOOKUP_REPLY (a->u.edge.req, .verdict, .conn_id) / the edge
 * connection conn_id is gone (what waits on it gets the edge's own lookup). */
void core_elk_reply_CT(core_t *core, const core_action_t *a);
void core_elk_conn_closed_CT(core_t *core, uint64_t conn_id);

/* During an answered attach (core_lr_route_attach_CT() asks first): true when the answer
 * routes or refuses the attach, with w filled as a link route's (routed: on the edge
 * connection, the address and name unchanged; or qd:no-route-to-dest). */
bool core_elk_routed_CT(core_t *core, const core_action_t *a, core_work_t *w);

/* Interior mode: CORE_A_EDGE LOOKUP from an edge connection's worker: answer it
 * (CORE_W_EDGE LOOKUP_ANSWER) from the link-route table and the mesh's patterns.  Frees
 * the action's strings. */
void core_elk_serve_CT(core_t *core, core_action_t *a);

/* Free the lookup's state (core_free(), after the core thread ended).  NULL-safe. */
void core_elk_free(core_t *core);

#endif
