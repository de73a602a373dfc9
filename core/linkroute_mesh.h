/* core/linkroute_mesh.h: link routes across an interior mesh (qdrouterd 1.19's
 * route_control.c, forwarder.c's qdr_forward_link_balanced_CT, mobile_sync's link-route
 * addresses).
 *
 * Facts (qdrouterd 1.19, checked against a running pair):
 *  - Each linkRoute has an address whose hash key is its pattern with a class character:
 *    `C` (direction in) / `D` (out) when the pattern is a prefix (no `*`, its only `#` the
 *    last token), keyed by the prefix with the `#` and the separators around it taken off
 *    (prefix `queue.` is the pattern `queue/#`, the key `Cqueue`); `E` / `F` with the whole
 *    pattern otherwise (`Ea.*.b`).
 *  - While a route-container connection serves the route, that key is one of the router's
 *    mobile addresses: MAU advertises it (treatment hint 4, link-balanced), so every router
 *    of the mesh learns which routers have the route's container.  A router that learns
 *    such a key from another router adds its pattern to its own link-route lookup, so a
 *    router needs no linkRoute of its own to forward an attach.
 *  - A client's attach whose address matches a route that no connection of this router
 *    serves goes to a router that has the key (rotating over them), on the connection to
 *    that router's next hop: the attach is sent on as it came (the same termini and
 *    address; add/delExternalPrefix are applied only by the router that has the
 *    container), under the name `<link name>@<client's container id>` when the client is
 *    not a router.  No router with the key: `qd:no-route-to-dest`.  Every frame of the
 *    link then travels hop by hop on the routed links (router/linkroute.c), message bytes
 *    untouched (no router annotations are added or read).
 *
 * Where Junction differs: the route a client's attach takes is the best local route that
 * a connection here serves, else the best pattern other routers advertise (qdrouterd keeps
 * both in one tree, so a local route no container serves can hide a remote pattern that
 * is less specific; Junction then still forwards).  An attach that came from another router
 * is never sent back on the connection it came in on.
 *
 * Threads: everything is _CT (the core thread), called from core/linkroute.c (attach),
 * core/rt.c (the tick) and core/interior.c (remote keys); core_lrm_free() from core_free().
 */
#ifndef JUNCTION_CORE_LINKROUTE_MESH_H
#define JUNCTION_CORE_LINKROUTE_MESH_H

#include "core/core.h"

#include <stdbool.h>
#include <stddef.h>

/* qdrouterd's hash key of a linkRoute (prefix, or else pattern, as configured; `dir` the
 * route's direction), as a new string, or NULL for an invalid prefix/pattern.  Pure. */
char *core_lrm_key(const char *prefix, const char *pattern, core_link_dir_t dir);

/* Once a second in interior mode, before the mobile-address batch: advertise the keys of
 * the routes a connection of this router serves now, withdraw the others. */
void core_lrm_tick_CT(core_t *core);

/* A remote router now has the address with hash key key[0, keylen) (its first remote
 * router): when it is a link-route key, its pattern becomes one an attach can match. */
void core_lrm_remote_key_CT(core_t *core, const char *key, size_t keylen);

/* A client's attach (or one from another router) that no connection here serves: when a
 * pattern another router advertises matches, fill *out with the connection toward it (its
 * worker, the address unchanged, out->mesh set) and return true; false when none does
 * (out untouched).  The connection the attach came on is never chosen. */
bool core_lrm_route_CT(core_t *core, const core_action_t *a, core_lr_target_t *out);

/* Free the state (core_free(), after the core thread ended).  NULL-safe on core->lrm. */
void core_lrm_free(core_t *core);

#endif
