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
    uint64_t           ingress;    /* deliveries routed to it */
    uint64_t           egress;     /* copies sent from it */
    stats_obj_t        stats;      /* its `address` stats object (retired with it) */
};

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
};

/* ---- autolink.c: autoLinks (hooks the rest of the core calls) ---- */

/* Made by core_new() from cfg's autoLinks; freed by core_free() (main thread). */
void core_autolink_init(core_t *core);
void core_autolink_fini(core_t *core);
/* CORE_A_CONN_OPENED, CORE_A_CONN_CLOSED, CORE_A_AUTOLINK. */
void core_autolink_action_CT(core_t *core, core_action_t *a);
/* The phase of link_id when it is an autoLink's link, else -1. */
int core_autolink_phase_CT(core_t *core, uint64_t link_id);
/* link_id detached (whatever it was). */
void core_autolink_link_gone_CT(core_t *core, uint64_t link_id);
/* Once a second: re-attach the autoLinks whose retry time came. */
void core_autolink_tick_CT(core_t *core);
/* Free the strings of an action posted after the core stopped (autoLink types only). */
void core_autolink_action_discard(core_action_t *a);

#endif
