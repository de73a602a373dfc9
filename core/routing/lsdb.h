/* core/routing/lsdb.h: the link-state database - qdrouterd 1.19's node tracker, HELLO and
 * link-state engines (python/qpid_dispatch_internal/router/{node,hello,link}.py) as data and
 * rules: which routers exist, who is a neighbour, each router's advertised link state, the own
 * link state and its sequence, and the routes path.c computes from them.
 *
 * Rules (interrouter reference, 2.5-2.7; the Python is the authority where they differ):
 *  - HELLO from R on connection c (cost k): R's id is remembered for our own `seen` list; only
 *    if our id is in R's `seen` (two-way contact) does R become (or stay) a neighbour: a new
 *    link sets R's link to c, asks for R's link state and adds {R: k} to the own link state
 *    when R is not in it yet (a changed cost is not picked up until R is removed and re-added,
 *    as in 1.19).  A HELLO carrying our own id with another instance is a duplicate router id.
 *  - A changed `instance` (HELLO, RA) is a restart: R's link state is emptied (ls_seq 0),
 *    its mobile addresses flushed (mobile_seq 0), routes recomputed and its link state asked.
 *  - RA: R's link state is "seen" now; an ls_seq above the stored one asks for R's link state
 *    at once (an LSR, reachable or not: once reachable when not); a mobile_seq above the
 *    stored one asks for its addresses (a MAR) once R is reachable.
 *  - LSU: replaces R's link state only when its ls.ls_seq is above the stored one; peers not
 *    known yet are learned.  LSR: R is learned; the caller answers with the own link state,
 *    at once when R is reachable, else on the first tick that finds it so.
 *  - Tick (once a second, in this order): expire HELLO records older than helloMaxAge; HELLO
 *    due every helloIntervalSeconds ticks; RA due when raInterval (raIntervalFlux while in flux,
 *    i.e. within 2 x raIntervalFlux of the last topology change) has passed since the last;
 *    then expirations - a neighbour without a qualifying HELLO for helloMaxAge loses its link
 *    and its place in the own link state, a remote link state not refreshed for
 *    remoteLsMaxAge is emptied, a router with an empty link state that is no neighbour, in
 *    nobody's link state and whose last RA is older than remoteLsMaxAge is deleted on the
 *    third tick in a row that finds it so; an own
 *    link-state change bumps ls_seq once and sends an RA at once; routes are
 *    recomputed when anything changed; LSRs and MARs go to routers that are reachable; an
 *    LSR that no LSU from its router answered by the next tick (at least half a second
 *    later) is sent again, on each tick, up to raIntervalFluxSeconds times.
 *  - At most CORE_RT_MAX_ROUTERS - 1 remote routers (mask bits 1..127; 0 is self); one more is
 *    refused (qdrouterd raises "Exceeded Maximum Router Count").
 *  - Messages carrying our own id are ignored (RA, LSU, LSR).
 *  Differences from 1.19, local only (nothing another router sees changes):
 *  - a router that becomes unreachable loses its next hop and cost here (1.19 keeps the stale
 *    ones until the router is deleted);
 *  - a router whose own RA came within remoteLsMaxAge is not deleted, even while nothing
 *    links to it (1.19 deletes it on the third tick in a row that finds its link state empty,
 *    no neighbour's, and in nobody's link state).  An RA of a router's new neighbour reaches
 *    the routers that know the way to that neighbour a tick or two after it connects; the
 *    link state of that neighbour, the one that links to it, comes only when the neighbour
 *    can answer an LSR: once its radius reaches back to the requester (it drops what came
 *    further, as 1.19 does) and it has a route back, which takes it a tick a hop while it
 *    learns the mesh itself.  At the far end of a forming line under load, that was more
 *    than three ticks: the router was deleted, and learned again when the answer came.  An
 *    RA is the router's own word that it exists; 1.19 keeps a link state that long on it
 *    (remoteLsMaxAge), so the router is kept as long.  A router that leaves is deleted no
 *    later than before whenever its link state was held (the RA that refreshed it is as old);
 *    one known only by its RA stays an unreachable row for remoteLsMaxAge;
 *  - the deletion count starts again whenever the router is found not deletable (1.19 never
 *    resets it, so a router that restarts, and whose link state is emptied, can be deleted
 *    on the next tick for the ticks it spent waiting for its first link state long before,
 *    and learned again a moment later: a route that disappears and reappears);
 *  - an LSR from a router this one has no route to yet is answered once it has one (1.19
 *    drops the answer, and the requester asks again only at the sender's next RA, up to
 *    raIntervalFluxSeconds later: a router that restarts at the end of a line asks each
 *    router of it for its link state while that router has not yet learned the way back);
 *  - an LSU's `instance` is kept when R's is not known yet (1.19 takes it from HELLO and RA
 *    only: a router learned from another's link state, whose RA never reached us before it
 *    restarted, kept its old link state across the restart, and refused the new one while
 *    its ls_seq was not above the old); an LSU of another instance than the known one is
 *    not taken (the restart is the RA's or HELLO's to announce);
 *  - an LSR that gets no answer is sent again a tick later (1.19 asks again only when R's next
 *    RA advertises an ls_seq above the stored one, raIntervalFluxSeconds later while in
 *    flux).  While a mesh forms, an LSR is dropped on its way whenever a router on it has
 *    no route to R yet, or R's radius does not reach back to the requester yet (R drops
 *    any delivery that came further than its radius + 1); the requester then went without
 *    R's link state for four seconds, and a router it had heard of only by its RA (R's
 *    neighbour, that only R's link state links to) was deleted three ticks after, and
 *    learned again when the answer finally came: a row that appeared, disappeared and came
 *    back;
 *  - an RA is due half a tick early (ticks here fall a few milliseconds either side of their
 *    second; 1.19's never come early, so its raIntervalFluxSeconds of 4 means 4 ticks).
 *
 * Time is the caller's, in milliseconds; the database never reads a clock.  It sends nothing:
 * each call appends what to send to a core_rt_actions_t (the caller composes with msg.h).
 *
 * Threads: one database belongs to one thread, the core thread in the router (every function
 * taking one is _CT).
 */
#ifndef JUNCTION_CORE_ROUTING_LSDB_H
#define JUNCTION_CORE_ROUTING_LSDB_H

#include "core/routing/msg.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Mask-bit width: self + 127 remote routers (qdrouterd's QD_BITMASK_BITS). */
#define CORE_RT_MAX_ROUTERS 128

/* The router entity's protocol timers, in seconds (qdrouterd's defaults in comments). */
typedef struct core_rt_timers {
    int hello_interval;    /* helloIntervalSeconds: 1 */
    int hello_max_age;     /* helloMaxAgeSeconds: 3 */
    int ra_interval;       /* raIntervalSeconds: 30 */
    int ra_interval_flux;  /* raIntervalFluxSeconds: 4 */
    int remote_ls_max_age; /* remoteLsMaxAgeSeconds: 60 */
} core_rt_timers_t;

/* qdrouterd 1.19's defaults. */
#define CORE_RT_TIMERS_DEFAULT ((core_rt_timers_t){1, 3, 30, 4, 60})

/* One router's link state: {peer id: cost} in the order the peers were added, and ls_seq. */
typedef struct core_rt_ls {
    int64_t  ls_seq;    /* sequence; 0 when empty/unknown */
    uint32_t n;         /* peers */
    uint32_t cap;       /* allocated entries */
    char   **ids;       /* owned, NUL-terminated (ids hold no NUL: they come from strings) */
    int64_t *costs;     /* parallel to ids */
    int64_t  last_seen; /* ms of the last RA or accepted LSU (remote link states) */
} core_rt_ls_t;

/* A remote router. */
typedef struct core_rt_node {
    char        *id;           /* owned, NUL-terminated */
    uint32_t     maskbit;      /* 1..127 */
    bool         has_instance; /* instance known */
    int64_t      instance;     /* its boot number */
    int64_t      version;      /* protocol version it sent */
    int32_t      link;         /* connection (conn mask bit) when a neighbour, else -1 */
    int64_t      refresh;      /* ms of the last qualifying HELLO */
    core_rt_ls_t ls;           /* its advertised link state */
    int32_t      next_hop;     /* mask bit of the neighbour to send through; -1: none (a
                                  neighbour, or unreachable) */
    int64_t  cost;             /* path cost; -1 when unreachable */
    bool     reachable;        /* in the last computed tree */
    uint64_t vo[2];            /* valid origins by mask bit (bit 0, self, always set) */
    int32_t  upstream;         /* mask bit of the neighbour its multicast copies reach this
                                  router through (this router's predecessor in its tree);
                                  -1: none (unreachable, or a stub) */
    int64_t  mobile_seq;       /* the sequence of its addresses we hold */
    bool     need_lsr;         /* ask for its link state once reachable */
    bool     need_mar;         /* ask for its addresses once reachable */
    bool     owe_lsu;          /* it asked for our link state while we had no route to it:
                                  the answer goes once it is reachable */
    bool     lsr_wait;         /* our LSR to it went (it was reachable), no LSU from it
                                  came since */
    int64_t  lsr_sent;         /* ms that LSR went */
    uint32_t lsr_again;        /* LSRs sent again for it without an answer */
    int64_t  ra_at;            /* ms of its last RA; -1 before the first */
    uint32_t keep_alive;       /* ticks found deletable */
} core_rt_node_t;

/* What the caller must do after a call (appended to; core_rt_actions_clear() empties). */
typedef struct core_rt_actions {
    bool     send_hello;                     /* HELLO on every control link */
    bool     send_ra;                        /* RA to amqp:/_topo/0/all/qdrouter */
    bool     routes_changed;                 /* next hops, costs or valid origins changed */
    bool     dup_id;                         /* a neighbour has our id (log it, once) */
    uint32_t n_lsr;                          /* LSR to these routers (mask bits) */
    uint32_t lsr[CORE_RT_MAX_ROUTERS];       /* ... */
    uint32_t n_lsu;                          /* LSU (the own link state) to these */
    uint32_t lsu[CORE_RT_MAX_ROUTERS];       /* routers (mask bits): answers to their LSRs */
    uint32_t n_mar;                          /* MAR to these routers (mask bits) */
    uint32_t mar[CORE_RT_MAX_ROUTERS];       /* ... */
    uint32_t n_deleted;                      /* routers deleted (withdraw their addresses) */
    uint32_t deleted[CORE_RT_MAX_ROUTERS];   /* their mask bits, no longer valid */
    uint32_t n_restarted;                    /* routers that restarted (flush their addresses) */
    uint32_t restarted[CORE_RT_MAX_ROUTERS]; /* their mask bits */
} core_rt_actions_t;

typedef struct core_rt_lsdb core_rt_lsdb_t;

/* A database for router `id` (copied) with boot number `instance`, at time now_ms.
 * Returns NULL when id is empty. */
core_rt_lsdb_t *core_rt_lsdb_new(const char *id, int64_t instance, core_rt_timers_t timers,
                                 int64_t now_ms);
void            core_rt_lsdb_free(core_rt_lsdb_t *db);

void core_rt_actions_clear(core_rt_actions_t *a);

/* Message handlers (m decoded by msg.h, with the matching op).  HELLO also takes the
 * connection it came in on and that connection's cost.  Return 0, or -1 when a new router
 * would exceed CORE_RT_MAX_ROUTERS or the sender's id is empty or holds a NUL (nothing
 * changes then).  LSU peer ids that are empty or hold a NUL are left out. */
int core_rt_lsdb_hello_CT(core_rt_lsdb_t *db, const core_rt_msg_t *m, int32_t conn, int64_t cost,
                          int64_t now_ms, core_rt_actions_t *a);
int core_rt_lsdb_ra_CT(core_rt_lsdb_t *db, const core_rt_msg_t *m, int64_t now_ms,
                       core_rt_actions_t *a);
int core_rt_lsdb_lsu_CT(core_rt_lsdb_t *db, const core_rt_msg_t *m, int64_t now_ms,
                        core_rt_actions_t *a);
/* LSR: learns the requester and puts it in a->lsu (the caller sends it core_rt_lsdb_own_ls()
 * as an LSU) when it is reachable; else the answer waits until it is (a tick puts it in
 * a->lsu then). */
int core_rt_lsdb_lsr_CT(core_rt_lsdb_t *db, const core_rt_msg_t *m, core_rt_actions_t *a);

/* The control link of connection `conn` went away: its neighbour is lost at once. */
void core_rt_lsdb_link_lost_CT(core_rt_lsdb_t *db, int32_t conn);

/* The 1-second tick (rules above). */
void core_rt_lsdb_tick_CT(core_rt_lsdb_t *db, int64_t now_ms, core_rt_actions_t *a);

/* The own link state (for LSU) and the ids for HELLO's `seen`, in qdrouterd's order. */
const core_rt_ls_t *core_rt_lsdb_own_ls(const core_rt_lsdb_t *db);
uint32_t            core_rt_lsdb_seen_CT(const core_rt_lsdb_t *db, const char **ids, uint32_t max);

/* Remote routers: by id (NULL if unknown) and by mask bit (NULL if free). */
core_rt_node_t *core_rt_lsdb_find(const core_rt_lsdb_t *db, const uint8_t *id, size_t len);
core_rt_node_t *core_rt_lsdb_node(const core_rt_lsdb_t *db, uint32_t maskbit);
uint32_t        core_rt_lsdb_count(const core_rt_lsdb_t *db);
/* Topology radius of the last computation. */
uint32_t core_rt_lsdb_radius(const core_rt_lsdb_t *db);
/* Own sequence numbers; the mobile one is set by the mobile-address table. */
int64_t core_rt_lsdb_ls_seq(const core_rt_lsdb_t *db);
void    core_rt_lsdb_set_mobile_seq_CT(core_rt_lsdb_t *db, int64_t mobile_seq);
int64_t core_rt_lsdb_mobile_seq(const core_rt_lsdb_t *db);
/* Record a remote router's mobile_seq once its MAU was applied (mobile.c tells). */
void core_rt_lsdb_node_mobile_seq_CT(core_rt_lsdb_t *db, uint32_t maskbit, int64_t seq);

#endif
