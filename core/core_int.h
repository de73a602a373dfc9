/* core/core_int.h: the core's private types - shared by the core's .c files only, never by other
 * folders.  Everything here is owned by the core thread (_CT). */
#ifndef JUNCTION_CORE_INT_H
#define JUNCTION_CORE_INT_H

#include "core/core.h"
#include "core/base/map.h"
#include "core/core_metrics.h"

#include <pthread.h>

typedef struct core_addr core_addr_t;
typedef struct core_link core_link_t;

/* A growable array of links, with O(1) removal (each link knows its slot). */
typedef struct core_link_set {
    core_link_t **items; /* links */
    size_t        count; /* used */
    size_t        cap;   /* allocated */
} core_link_set_t;

/* core_link_t: one attached link. Owner: core thread. Lifetime: CORE_A_LINK_ATTACH ..
 * CORE_A_LINK_DETACH. */
struct core_link {
    uint64_t     id;           /* worker-assigned, unique for the process; logged as [L<id>] */
    uint64_t     conn_id;      /* its connection; logged as [C<id>] */
    void        *handle;       /* the worker's link: echoed back, never dereferenced */
    int          worker;       /* owning worker index */
    uint8_t      dir;          /* core_link_dir_t */
    core_addr_t *addr;         /* attached address, NULL for an anonymous sender */
    size_t       slot;         /* index in addr->consumers or addr->senders */
    uint32_t     capacity;     /* linkCapacity */
    uint32_t     outstanding;  /* OUT: copies sent and not yet settled (balanced uses it) */
    bool         credit_on;    /* IN: credit currently granted */
    uint64_t     delivered;    /* IN: deliveries received; OUT: copies sent */
    stats_obj_t  stats;        /* its `link` stats object (retired at detach) */
    core_rate_t  rate;         /* settleRate's window */
    bool         rate_on;      /* on core->rate_links (something settled in the window) */
    core_link_t *rate_next;    /* in core->rate_links */
    core_link_t *rate_prev;    /* in core->rate_links */
    uint64_t     stuck;        /* deliveries counted stuck (logged at the first) */
    uint8_t      ir_link;      /* core_ir_link_t: an inter-router control or data link */
    uint8_t      ir_priority;  /* CORE_IR_LINK_DATA: its priority */
    int16_t      ir_conn;      /* its connection's mask bit once registered, else -1 (set
                                  only for inter-router links) */
    bool         fallback;     /* an autoLink's with `fallback` (fallback.c): OUT, the fallback
                                  destination's; IN, its deliveries never go to one */
    char        *topo_to;      /* IN, attached to another router's address (an `R` key): the
                                  normalized terminus address, written as x-opt-qd.to on the
                                  copies it sends to other routers (heap), else NULL */
    uint8_t      edge;         /* core_edge_link_t: a link of an edge connection (edge.c) */
    char        *edge_to;      /* interior, a targeted sender to `_edge/<id>/...`: that
                                  address (heap), written as x-opt-qd.to on what it sends */
    bool         edge_dest;    /* interior, an edge's producer link: the tracking last told
                                  the edge its address has a destination beyond it */
};

/* core_addr_t: one address in the table. Owner: core thread. Lives while any link refers
 * to it. */
struct core_addr {
    char              *key;        /* hash key with class prefix: "M0examples", "Ltemp.x1" */
    size_t             keylen;     /* its length */
    cfg_distribution_t dist;       /* treatment, from the address config or the default */
    core_link_set_t    consumers;  /* OUT links attached to it */
    core_link_set_t    senders;    /* IN links targeted at it */
    size_t             rr;         /* rotation for closest/balanced ties */
    stats_obj_t        stats;      /* its `address` stats object (retired with it) */
    uint64_t           rnodes[2];  /* interior: remote routers with a consumer, by mask bit */
    uint32_t          *ir_out;     /* interior, balanced: unsettled copies per inter-router
                                      connection (CORE_RT_MAX_CONNS entries), or NULL */
    uint32_t           tracked;    /* copies counted in ir_out (the address stays while any) */
    uint32_t           inproc;     /* consumers inside the router (conn_id 0: the management
                                      agent's links), counted in inProcess, not subscriberCount;
                                      copies to them are deliveriesToContainer */
    uint32_t           n_edge_cons; /* consumers that are links of an edge connection */
    uint32_t           n_edge_snd;  /* senders likewise */
    core_link_t       *edge_out;   /* edge mode: the proxy sender of this address toward the
                                      interior (edge.c), joined to `consumers` only while the
                                      interior says it has a destination there */
    bool               edge_out_bound; /* ... it is */
};

/* Would a copy of a delivery that came on `in` go back to the edge connection it came from
 * on `out`?  (qdrouterd's edge-echo rule: never.) */
static inline bool core_edge_echo(const core_link_t *in, const core_link_t *out)
{
    return in->edge && out->edge && in->conn_id == out->conn_id;
}

/* Does addr have a destination on another router? */
static inline bool core_addr_remote(const core_addr_t *addr)
{
    return (addr->rnodes[0] | addr->rnodes[1]) != 0;
}

struct core {
    const cfg_t       *cfg;        /* immutable after start */
    const core_stats_t *stats;     /* the built-in families (read-only) */
    stats_shard_t     *shard;      /* _CT: the core thread's stats shard */
    char              *router_id;  /* cfg router id, or the generated one */
    int                n_workers;  /* number of workers */
    base_mpsc_t      **worker_q;   /* each worker's inbound queue (owned by the router) */
    base_mpsc_batch_t *out;        /* _CT: per-worker batch being built this pass */
    base_mpsc_t        in;         /* actions from the workers */
    pthread_t          thread;     /* the core thread */
    bool               started;    /* main thread only */
    base_map_t         links;      /* _CT: link id -> core_link_t */
    base_map_t         addrs;      /* _CT: key -> core_addr_t */
    struct base_pattern *patterns; /* _CT: address config matcher (changed at run time only by
                                      core_addr_config_*_CT, on the core thread) */
    uint64_t           temp_seq;   /* _CT: dynamic-address counter */
    uint64_t           temp_salt;  /* random salt for dynamic addresses */
    uint64_t           now_ms;     /* _CT: monotonic clock (coarse), read once per loop pass */
    uint64_t           tick_ms;    /* _CT: when the last once-a-second sweep ran */
    core_delivery_t   *inflight;   /* _CT: unsettled deliveries with copies out, oldest first */
    core_delivery_t   *inflight_tail;
    core_link_t       *rate_links; /* _CT: links whose settleRate is not 0 */
    struct core_autolinks *autolinks; /* autoLinks and route containers (autolink.c) */
    uint32_t           n_phased;   /* _CT: address configurations with a phase other than 0
                                      (none: every mobile key is phase 0, no lookup) */
    char             **nodes;      /* names reserved for in-process nodes (core_node_reserve,
                                      main thread before start; read-only afterwards) */
    size_t             n_nodes;    /* their count */
    struct core_lr_table *lr;      /* _CT: the link routes (core/linkroute.c) */
    struct core_rt    *rt;         /* interior mode's control plane (core/rt.c), or NULL */
    struct core_ir    *ir;         /* _CT: interior mode's routes (core/interior.c), NULL
                                      until the first core_rt_*_CT() call (interior.h) */
    uint64_t           ir_reached[2]; /* _CT: the remote routers reached now, by mask bit
                                      (interior.c; 0 in a standalone router) */
    struct core_edge  *edge;       /* _CT: edge mode's state (core/edge.c), or NULL */
    struct core_lrm   *lrm;        /* _CT: link routes across the mesh
                                      (core/linkroute_mesh.c), NULL until first used */
    struct core_elk   *elk;        /* _CT: the edge's address lookups of link routes
                                      (core/edge_lookup.c), NULL until first used */
};

/* Does addr have a destination on a router this one reaches now?  Its senders have credit
 * while it has (or a local consumer): a router that went away keeps its addresses until the
 * protocol deletes it (remoteLsMaxAge), but nothing sent there would arrive. */
static inline bool core_addr_reached(const core_t *core, const core_addr_t *addr)
{
    return ((addr->rnodes[0] & core->ir_reached[0]) | (addr->rnodes[1] & core->ir_reached[1])) !=
           0;
}

/* ---- core.c: what interior.c shares with the standalone forwarder ---- */

/* Queue a copy of dlv on out (counts it as an outgoing copy of the link); returns the work
 * item (CORE_W_SEND), to add to before the pass ends. */
core_work_t *core__send_copy_CT(core_t *core, core_link_t *out, core_delivery_t *dlv);
/* No destination: unsettled comes back RELEASED, presettled is dropped. */
void core__deliver_unroutable_CT(core_t *core, core_link_t *in, core_delivery_t *dlv,
                                 int owner);
/* dlv got its copies (dlv->_copies set): track it until settled, or let presettled go. */
void core__deliver_finish_CT(core_t *core, core_link_t *in, core_delivery_t *dlv, int owner);
/* Senders of addr get credit (grant) or are drained. */
void core__addr_credit_CT(core_t *core, core_addr_t *addr, bool grant);
/* Find the address with hash key key[0, klen), creating it (treatment: configured, else
 * `hint` when >= 0, else the default; a key that is not mobile: `hint`, else balanced) when
 * `create`. */
core_addr_t *core__addr_get_CT(core_t *core, const char *key, size_t klen, bool create,
                               int hint);
/* Free addr when nothing refers to it any more. */
void core__addr_release_CT(core_t *core, core_addr_t *addr);
/* Count a delivery routed to addr (NULL: nothing but the router's totals) that arrived on
 * `in`, with `local` copies to this router's consumers and `transit` to other routers, as
 * qdrouterd counts them: a client's delivery is ingress, one the router sent itself (an
 * in-process link) deliveriesFromContainer, one from another router neither; local copies
 * are egress, or deliveriesToContainer when the address's consumers are in-process. */
void core__addr_count_CT(core_t *core, const core_link_t *in, core_addr_t *addr,
                         unsigned local, unsigned transit);

/* ---- interior.c: interior mode's hooks ---- */

/* Route dlv (arrived on `in`, address addr or NULL, treatment dist) by interior rules;
 * posts everything the standalone path would.  Returns the copies made. */
unsigned core_ir_deliver_CT(core_t *core, core_link_t *in, core_delivery_t *dlv,
                            core_addr_t *addr, cfg_distribution_t dist, int owner);
/* A copy counted in an address's per-connection count settled. */
void core_ir_untrack_CT(core_t *core, core_delivery_t *dlv);
/* Link l (ir_link set) attached / is detaching. */
void core_ir_link_attach_CT(core_t *core, core_link_t *l);
void core_ir_link_detach_CT(core_t *core, core_link_t *l);
/* Link routes across the mesh (linkroute_mesh.c): the connection that leads to remote router
 * `router_bit` (its next hop's, or its own when a neighbour) and that connection's worker;
 * false when the router is unreachable, its connection is `exclude`, or the connection has
 * no link yet (no worker known). */
bool core_ir_router_hop_CT(core_t *core, uint32_t router_bit, uint64_t exclude,
                           uint64_t *conn_id, int *worker);
/* core_free(): interior state. */
void core_ir_free(core_t *core);

/* ---- edge.c: edge mode (the rules are at the top of core/edge.c) ---- */

/* The hash key of the uplink's address (qdrouterd's): every address an edge does not serve. */
#define CORE_EDGE_KEY "L_edge"

/* Made by core_new() in edge mode; freed by core_free() (main thread). */
void core_edge_init(core_t *core);
void core_edge_fini(core_t *core);
/* CORE_A_EDGE. */
void core_edge_action_CT(core_t *core, core_action_t *a);
/* Free the strings of a CORE_A_EDGE posted after the core stopped. */
void core_edge_action_discard(core_action_t *a);
/* Link l (l->edge set, attach.edge in `kind`) attaches with no address of its own: the
 * uplink joins `L_edge`, a proxy sender its address unbound.  Returns true when it did. */
bool core_edge_link_attach_CT(core_t *core, core_link_t *l, const char *address);
/* Link l (any) is detaching: edge.c forgets it (uplink, proxy sender). */
void core_edge_link_detach_CT(core_t *core, core_link_t *l);
/* addr gained its first (add) or lost its last local consumer (dir OUT) or producer (dir
 * IN): links of the edge connection and in-process links not counted. */
void core_edge_local_CT(core_t *core, core_addr_t *addr, core_link_dir_t dir, bool add);
/* Interior: addr's destinations changed (or an edge's producer link joined it): tell each
 * edge with a producer link on addr whether it has a destination other than that edge. */
void core_edge_track_CT(core_t *core, core_addr_t *addr);
/* Route dlv by edge rules (core->edge set): local consumers, else up to the interior; on an
 * interior that has no route yet (standalone path), a delivery from an edge: the echo rule. */
unsigned core_edge_deliver_CT(core_t *core, core_link_t *in, core_delivery_t *dlv,
                              core_addr_t *addr, cfg_distribution_t dist, int owner);
/* core.c's consumer bookkeeping, shared with edge.c: l joins / leaves addr->consumers
 * (credit for the senders, the routing protocol's and the edge's local-destination news). */
void core__consumer_add_CT(core_t *core, core_addr_t *addr, core_link_t *l);
void core__consumer_del_CT(core_t *core, core_addr_t *addr, core_link_t *l);
/* Whether name[0, n) is reserved for a node of the router (core_node_reserve). */
bool core__node_reserved_CT(const core_t *core, const char *name, size_t n);
/* Queue a work item for worker `worker`. */
core_work_t *core__work_add_CT(core_t *core, int worker, core_work_type_t type, void *handle);
/* A client's CORE_A_LINK_ATTACH, run now (an edge's address lookup held it: edge_lookup.c);
 * takes the action's strings. */
void core__link_attach_CT(core_t *core, core_action_t *a);
/* Edge mode: the active edge connection and its worker; false when there is none. */
bool core_edge_active_CT(const core_t *core, uint64_t *conn_id, int *worker);

/* ---- autolink.c: autoLinks (hooks the rest of the core calls) ---- */

/* Made by core_new() from cfg's autoLinks; freed by core_free() (main thread). */
void core_autolink_init(core_t *core);
void core_autolink_fini(core_t *core);
/* CORE_A_CONN_OPENED, CORE_A_CONN_CLOSED, CORE_A_AUTOLINK. */
void core_autolink_action_CT(core_t *core, core_action_t *a);
/* The phase of link_id when it is an autoLink's link, else -1 (CORE_PHASE_FALLBACK for an
 * out autoLink with `fallback`). */
int core_autolink_phase_CT(core_t *core, uint64_t link_id);
/* Whether link_id is the link of an autoLink with `fallback`. */
bool core_autolink_fallback_CT(core_t *core, uint64_t link_id);

/* ---- fallback.c: fallback destinations ---- */

/* The "phase" of a fallback destination's key: a mobile address X with `enableFallback` has
 * its fallback destination at key "MF" X (qdrouterd 1.19's phase character 'F', which its
 * routers advertise and its interiors name in edge address tracking); an address lookup with
 * this phase makes that key. */
#define CORE_PHASE_FALLBACK ('F' - '0')
/* Whether addr (key "M<phase>" X) has X configured with enableFallback. */
bool core_fallback_configured_CT(core_t *core, const core_addr_t *addr);
/* The fallback destination of addr (key "M0" X, X configured with enableFallback), when it
 * exists in the table; else NULL. */
core_addr_t *core_fallback_of_CT(core_t *core, const core_addr_t *addr);
/* The address fb (key "MF" X) is the fallback destination of, when that address exists and
 * X is configured with enableFallback; else NULL. */
core_addr_t *core_fallback_primary_CT(core_t *core, const core_addr_t *fb);
/* link_id detached (whatever it was). */
void core_autolink_link_gone_CT(core_t *core, uint64_t link_id);
/* Once a second: re-attach the autoLinks whose retry time came. */
void core_autolink_tick_CT(core_t *core);
/* Free the strings of an action posted after the core stopped (autoLink types only). */
void core_autolink_action_discard(core_action_t *a);

#endif
