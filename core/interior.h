/* core/interior.h: the forwarder's data plane across routers (interior mode) - what the
 * control plane (the routing protocol's wiring, core/routing/DESIGN.md "Wiring it in") tells
 * the forwarder, and how the forwarder uses it (interrouter reference, 3.3-3.5).
 *
 * The control plane calls, on the core thread:
 *  - core_rt_conn_CT(): connection `conn_id` is an inter-router connection with connection
 *    mask bit `conn_bit` (0..CORE_RT_MAX_CONNS-1), or is no longer one.  Links that attach on
 *    it with `attach.ir_link` set are then its control link or its data link of a priority.
 *  - core_rt_set_routes_CT(): the whole per-router table (after each tick with
 *    routes_changed): for each remote router its mask bit, id, the connection it is reached
 *    through, cost, valid origins; and the topology radius.
 *  - core_rt_remote_addr_CT(): remote router `router_bit` has (or no longer has) a consumer
 *    for the address with hash key `key` (from its MAU / MAR, or withdrawn when the router is
 *    deleted or restarts).
 * The first of these calls turns the forwarder's interior rules on; until then (and in every
 * standalone router) deliveries take the standalone path, untouched.
 *
 * What the forwarder then does with a delivery (core.c's deliver_CT hands it over):
 *  - distance = entries of x-opt-qd.trace; above radius + 1 the delivery is released.
 *  - every trace entry naming a neighbour excludes that neighbour's connection from
 *    multicast fan-out; x-opt-qd.ingress names the origin (absent: this router; a router
 *    not in the table: no remote copies in multicast, this router in balanced, as 1.19).
 *  - `_topo/0/<id>/...` goes to router <id> over the connection that reaches it; a sender
 *    attached to such an address (qdstat -r's requests for another router's management
 *    node) has credit while router <id> is reached, none while it is not.
 *  - multicast: every local consumer, then one copy per distinct next-hop connection of the
 *    routers that have the address, leaving out excluded connections and routers for which
 *    the origin is not a valid origin (qdrouterd 1.13-1.19 leave that test out; the
 *    reference says to keep it, so that a redundant mesh delivers one copy per router).
 *    A copy from another router that came in on a connection other than `up_bit` of that
 *    router (off its tree: a qdrouterd neighbour passing its own copy on) goes nowhere.
 *  - closest: a local consumer (round-robin), else the remote routers of lowest cost
 *    (round-robin among equals).
 *  - balanced: local consumers weighted by their unsettled copies, remote routers (origin
 *    valid) by this address's unsettled copies on their next-hop connection plus their cost;
 *    eligible below the link's capacity; the lowest eligible, else the lowest ineligible
 *    (qdrouterd 1.19's qdr_forward_balanced_CT).
 *  - a copy for a remote router goes on the connection's data link of the message's
 *    priority, or of the next lower priority that has one (peer_router_data_link).
 * Settlement needs nothing new: a copy on an inter-router link is an ordinary outgoing copy
 * and its outcome travels back through CORE_A_DISPOSITION like any other.
 *
 * Threads: everything here is _CT (core thread only).
 */
#ifndef JUNCTION_CORE_INTERIOR_H
#define JUNCTION_CORE_INTERIOR_H

#include "core/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Router mask bits: 0 is this router, 1..127 the others (core/routing/lsdb.h). */
#define CORE_RT_MAX_NODES  128
/* Inter-router connections (connection mask bits 0..127, qdrouterd's likewise). */
#define CORE_RT_MAX_CONNS  128
/* Data-link priorities 0..9. */
#define CORE_RT_PRIORITIES 10

/* How an inter-router link is used (core_action_t u.attach.ir_link). */
typedef enum core_ir_link {
    CORE_IR_LINK_NONE = 0, /* an ordinary link */
    CORE_IR_LINK_CONTROL,  /* the connection's control link (qd.router) */
    CORE_IR_LINK_DATA,     /* one of its data links (qd.router-data), of u.attach.ir_priority */
} core_ir_link_t;

/* One remote router, as the forwarder routes to it. */
typedef struct core_rt_route {
    uint32_t    maskbit;  /* 1..127 */
    const char *id;       /* its router id (copied) */
    int32_t     conn_bit; /* the connection it is reached through: its next hop's whenever the
                             cheapest path goes through another router (a neighbour's too, as
                             in qdrouterd 1.19), else its own; -1 when unreachable */
    bool     neighbour;   /* it has a connection of its own, link_bit */
    int32_t  link_bit;    /* that connection, when a neighbour (trace exclusion) */
    bool     has_up;      /* up_bit is known */
    int32_t  up_bit;      /* the connection its multicast copies come in on: the one to this
                             router's predecessor in the router's own tree */
    int64_t  cost;        /* path cost */
    uint64_t vo[2];       /* valid origins by router mask bit (bit 0, this router, is
                             always taken as set) */
} core_rt_route_t;

/* The whole table (replaces the previous one). */
typedef struct core_rt_routes {
    const core_rt_route_t *routers; /* the remote routers known now */
    uint32_t               n;       /* their count */
    uint32_t               radius;  /* topology radius (core_rt_lsdb_radius()) */
} core_rt_routes_t;

/* Install the table (copied).  Routers left out are forgotten, and their address bits
 * withdrawn (core_rt_remote_addr_CT(.., false) for each).  Returns 0, or -EINVAL when a mask
 * bit or connection bit is out of range (nothing changes then). */
int core_rt_set_routes_CT(core_t *core, const core_rt_routes_t *t);

/* Remote router `router_bit` gains (add) or loses a consumer of the address with hash key
 * key[0, keylen) (Junction's keys: "M0foo" for a mobile address).  An address that does not
 * exist is made, with the configured treatment of its address, else the MAU's treatment
 * hint (`hint`: qdrouterd's code, below; -1 for none), else the default; when the address
 * gains its first destination anywhere its senders get credit, when it loses its last they are
 * drained.  Returns 0, -EINVAL for a bad bit or key, -ENOENT to delete what is not there. */
int core_rt_remote_addr_CT(core_t *core, const char *key, size_t keylen, uint32_t router_bit,
                           bool add, int hint);

/* qdrouterd's address treatment codes (MAU hints): 0 multicast-flood, 1 multicast-once,
 * 2 anycast-closest, 3 anycast-balanced, 4 link-balanced, 5 unavailable.  The distribution of
 * a hint (-1 for one Junction does not route by: link-balanced, unknown), and the hint of a
 * distribution (multicast is multicast-once).  Pure, thread-safe. */
int core_rt_treatment_dist(int hint);
int core_rt_dist_treatment(cfg_distribution_t dist);

/* Connection `conn_id` is (add) inter-router with connection mask bit `conn_bit`, or is not
 * any more (its links keep no inter-router role).  Returns 0, or -EINVAL. */
int core_rt_conn_CT(core_t *core, uint64_t conn_id, uint32_t conn_bit, bool add);

#endif
