/* core/linkroute.h: qdrouterd's link routes - the table of `linkRoute` entities, which
 * connections serve them (route containers), and the decision for a client's attach: which
 * route container its link goes to and with what address.
 *
 * Facts (qdrouterd 1.19, route_control.c, forwarder.c, agent_config_link_route.c):
 *  - `direction` is the direction of the client's link: `in` routes client senders (links
 *    into the router, CORE_LINK_IN), `out` routes client receivers (CORE_LINK_OUT).  The
 *    address matched is the target's for a sender, the source's for a receiver.
 *  - `prefix` P is the pattern `P/#` (core/base/pattern.h): it matches P and what is below it.
 *    Several routes may share one pattern and direction (they serve one address together).
 *  - A route is served by the connections that name it: `containerId` matches the container
 *    id of the peer's open, `connection` the name of the listener or connector the connection
 *    came through (a generated `listener/...` or `connector/...` name never matches).  Only a
 *    connection of role `route-container` serves routes (qdrouterd ignores the others).  A
 *    route without either is served by no connection here (in qdrouterd only by other
 *    routers, which a standalone router has not).  operStatus is `active` while one serves.
 *  - linkBalanced (the only distribution): successive attaches rotate over the connections
 *    that serve a pattern.
 *  - The address given to the route container: delExternalPrefix D is taken off the front
 *    when the address is longer than D and starts with it, then addExternalPrefix A is put
 *    in front.  The answering attach goes back with the rewrite undone (A taken off, D put
 *    back): core_lr_target_t keeps both for that.
 *
 * Threads: a table belongs to one thread, the core thread in the router (every function with
 * a table is _CT there); core_lr_spec_check() is pure and thread-safe.  Nothing here touches a
 * link, a connection or a message: the core calls it at attach and when a connection opens
 * or closes, and the agent through core_call().
 */
#ifndef JUNCTION_CORE_LINKROUTE_H
#define JUNCTION_CORE_LINKROUTE_H

#include "core/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct core_lr_table core_lr_table_t;
typedef struct core_lr       core_lr_t;

/* A linkRoute as configured or CREATEd: the attribute values as given (NULL: absent). */
typedef struct core_lr_spec {
    const char *name;         /* the entity's name, or NULL */
    const char *prefix;       /* exactly one of prefix and pattern */
    const char *pattern;      /* a qdrouterd address pattern */
    const char *direction;    /* "in" or "out" (required) */
    const char *connection;   /* at most one of connection and containerId */
    const char *container_id; /* the route container's container id */
    const char *add_prefix;   /* addExternalPrefix */
    const char *del_prefix;   /* delExternalPrefix */
    const char *distribution; /* "linkBalanced" or NULL */
    const void *owner;        /* who added it (core_lr_remove_owner()), or NULL */
    uint32_t   *serving;      /* where to store how many connections serve it (atomically:
                                 another thread reads it), or NULL */
} core_lr_spec_t;

/* What management shows of a route (a view into the table: valid until the route is
 * removed). */
typedef struct core_lr_info {
    uint64_t        identity;     /* qdrouterd's identity: a number, unique in the table */
    const char     *name;         /* or NULL */
    const char     *prefix;       /* as configured, or NULL */
    const char     *pattern;      /* as configured, or NULL */
    core_link_dir_t dir;          /* CORE_LINK_IN: "in" */
    const char     *connection;   /* or NULL */
    const char     *container_id; /* or NULL */
    const char     *add_prefix;   /* or NULL */
    const char     *del_prefix;   /* or NULL */
    bool            active;       /* a connection serves it: operStatus "active" */
} core_lr_info_t;

/* Where a client's attach goes (core_lr_attach()); core.h names it (the core hands it to
 * the client's worker with CORE_W_LINK_ATTACHED). */
struct core_lr_target {
    uint64_t conn_id; /* the route container's connection, or 0: none serves the route
                         (the attach is refused with qd:no-route-to-dest) */
    int   worker;     /* the worker that owns that connection */
    char *address;    /* the address for the route container (heap) */
    char *strip;      /* undo on the answer: the addExternalPrefix put on, or NULL (heap) */
    char *insert;     /* undo on the answer: the delExternalPrefix taken off, or NULL
                         (heap) */
    bool  mesh;       /* conn_id is an inter-router connection: the attach goes on toward
                         another router that has the route (core/linkroute_mesh.h) */
};

/* Free what a target holds (core_lr_attach() filled it); harmless on a zeroed one.  _free:
 * a heap target and what it holds (NULL is fine).  Any thread. */
void core_lr_target_fini(core_lr_target_t *target);
void core_lr_target_free(core_lr_target_t *target);

/* The core's hooks, core thread only.  _load: a new table of the configuration's linkRoutes
 * (core_new(), before the core thread starts).  _route_attach: a client's attach (a
 * CORE_A_LINK_ATTACH); true when a link route takes it: `w` (its CORE_W_LINK_ATTACHED) then
 * carries where it goes (routed) or qd:no-route-to-dest, and the core neither routes nor
 * credits it.  _conn_action: CORE_A_CONN_OPENED and CORE_A_CONN_CLOSED. */
core_lr_table_t *core_lr_table_load(const cfg_t *cfg);
bool             core_lr_route_attach_CT(core_t *core, const core_action_t *a, core_work_t *w);
void             core_lr_conn_action_CT(core_t *core, core_action_t *a);

/* The core's table (core.c owns it).  Core thread only: management reaches it through
 * core_call(). */
core_lr_table_t *core_lr_table_CT(core_t *core);

/* A new empty table / free it with its routes (NULL is fine).  Aborts on OOM. */
core_lr_table_t *core_lr_table_new(void);
void             core_lr_table_free(core_lr_table_t *t);

/* Check a spec as qdrouterd's CREATE does.  Returns NULL when it is good, else qdrouterd's
 * words for what is wrong (a static string).  Pure, thread-safe. */
const char *core_lr_spec_check(const core_lr_spec_t *spec);

/* Add a route (the spec's strings are copied).  Returns its identity (> 0), or 0 with
 * *err set to qdrouterd's words: an invalid spec (core_lr_spec_check()), or a name that
 * another route has ("Name conflicts with an existing entity").  A connection that serves it
 * already (core_lr_conn_opened() happened before) activates it at once. */
uint64_t core_lr_add(core_lr_table_t *t, const core_lr_spec_t *spec, const char **err);

/* Add a configured or CREATEd linkRoute: its owner is c, and c->serving its live count of
 * serving connections.  As core_lr_add(). */
uint64_t core_lr_add_cfg(core_lr_table_t *t, const cfg_link_route_t *c, const char **err);

/* Remove the route with this name (when `name` is not NULL) or else this identity.  Returns
 * true when one was removed.  Attaches routed already stay where they went. */
bool core_lr_remove(core_lr_table_t *t, const char *name, uint64_t identity);

/* Remove the route added with this owner (core_lr_spec_t.owner).  Returns true when one
 * was removed. */
bool core_lr_remove_owner(core_lr_table_t *t, const void *owner);

/* A connection opened (its open seen) on `worker`: `route_container` is its role, `container_id`
 * the container id of the peer's open, `conn_name` the name of the listener or connector it came
 * through (NULL or a generated `listener/`/`connector/` name match nothing).  This is the one
 * call for incoming and outgoing connections alike (a connector's connection calls it once
 * its open is seen).  A route-container connection is remembered until it closes, so that
 * routes added later find it; any other connection is ignored.  Returns how many routes it
 * serves now. */
size_t core_lr_conn_opened(core_lr_table_t *t, uint64_t conn_id, int worker, bool route_container,
                           const char *container_id, const char *conn_name);
/* The connection closed: it serves no route from now on.  Returns how many it served. */
size_t core_lr_conn_closed(core_lr_table_t *t, uint64_t conn_id);

/* A client's attach: `dir` is its link's direction at the router, addr[0..len) the address
 * of its target (CORE_LINK_IN) or source (CORE_LINK_OUT) as given.  Returns false when no
 * route matches (the attach is message-routed as usual); true with *out filled when one does
 * (out->conn_id 0: no connection serves it now).  Successive attaches rotate over the
 * connections that serve the matching routes (linkBalanced). */
bool core_lr_attach(core_lr_table_t *t, core_link_dir_t dir, const char *addr, size_t len,
                    core_lr_target_t *out);

/* The address of the route container's answering attach as the client must see it: the
 * rewrite undone (target->strip taken off when it begins the address, target->insert put
 * back).  Heap; the caller frees it.  Pure. */
char *core_lr_answer_address(const core_lr_target_t *target, const char *addr);

/* Management: the number of routes, and the i-th in the order they were added. */
size_t core_lr_count(const core_lr_table_t *t);
bool   core_lr_info(const core_lr_table_t *t, size_t i, core_lr_info_t *out);

#endif
