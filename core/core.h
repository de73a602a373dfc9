/* core/core.h: the core thread - Junction's routing state and decisions.
 *
 * The core owns every address, link and connection record, picks the destinations of each
 * delivery (multicast, closest, balanced), aggregates outcomes back to the sender, and runs
 * credit policy.  It never touches a socket, a Proton object or a message's bytes (beyond
 * the views the worker hands over with a delivery: its `to`, and in interior mode its router
 * annotations), and never frees message memory: it talks to the workers only through batched
 * queues.
 *
 *   workers --(core_action_t batches, one MPSC queue)--> core thread
 *   core thread --(core_work_t batches, one MPSC queue per worker + its wake-up)--> worker
 *
 * Worker -> core (core_action_t): a link attached / detached, a delivery arrived, an outgoing
 * copy was settled by its receiver.  Core -> worker (core_work_t): attach answered, credit
 * granted or drained, send this delivery on that link, settle this incoming delivery with
 * this outcome, the core is done with this delivery, the core forgot this link.
 *
 * Ownership across the queues (no pointer crosses without one of these rules):
 *  - A worker's link handle (`void *handle`) stays valid until the worker has processed
 *    CORE_W_LINK_DETACHED for it; the core never dereferences it.
 *  - A core_delivery_t is allocated and freed by the worker that received it (its owner).
 *    After CORE_A_DELIVER the core may use the core-side fields until it posts either
 *    CORE_W_SETTLE (final outcome) or CORE_W_RELEASE (done, nothing to report) to the owner;
 *    after that the core holds no pointer to it.  Outgoing copies report back with
 *    CORE_A_DISPOSITION while the core still counts them, so the pointer they carry is live.
 *  - Message content is reference-counted (core_content_t); the core adds one reference per
 *    outgoing copy before posting it, and never drops one.
 *
 * Threads: core_new/core_start/core_stop/core_free on the main thread; core_post() from any
 * worker (thread-safe); everything else inside core/ runs on the core thread (_CT).
 */
#ifndef JUNCTION_CORE_H
#define JUNCTION_CORE_H

#include "config/config.h"
#include "core/base/mpsc.h"
#include "stats/stats.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct core core_t;

/* ---- built-in stats (core_stats.c): field offsets of each family ---- */
enum core_conn_field {
    CORE_CONN_DELIVERIES_IN = 0,
    CORE_CONN_DELIVERIES_OUT,
    CORE_CONN_OPENED_AT,
    CORE_CONN_LAST_DLV,
    CORE_CONN_EDGE_STANDBY, /* an edge router's edge connection that is not the active one */
    CORE_CONN_NFIELDS
};
enum core_link_field {
    CORE_LINK_CAPACITY = 0,
    CORE_LINK_UNDELIVERED,
    CORE_LINK_UNSETTLED,
    CORE_LINK_DELIVERIES,
    CORE_LINK_PRESETTLED,
    CORE_LINK_DROPPED_PRESETTLED,
    CORE_LINK_ACCEPTED,
    CORE_LINK_REJECTED,
    CORE_LINK_RELEASED,
    CORE_LINK_MODIFIED,
    CORE_LINK_CREDIT,
    CORE_LINK_SETTLE_RATE,
    CORE_LINK_DELAYED_1S,
    CORE_LINK_DELAYED_10S,
    CORE_LINK_STUCK,
    CORE_LINK_ZERO_CREDIT_SECS,
    CORE_LINK_NFIELDS
};
enum core_addr_field {
    CORE_ADDR_SUBSCRIBERS = 0,
    CORE_ADDR_SENDERS,
    CORE_ADDR_INGRESS,
    CORE_ADDR_EGRESS,
    CORE_ADDR_TRANSIT,
    CORE_ADDR_REDIRECTED, /* sent to its fallback destination instead (core/fallback.c) */
    CORE_ADDR_REMOTE,     /* interior: the other routers with a consumer (remoteCount) */
    CORE_ADDR_IN_PROCESS, /* consumers inside the router: the management agent's links, the
                             routing protocol's handlers (inProcess) */
    CORE_ADDR_TO_PROC,    /* copies handed to them (deliveriesToContainer) */
    CORE_ADDR_FROM_PROC,  /* deliveries they sent to the address (deliveriesFromContainer) */
    CORE_ADDR_NFIELDS
};
enum core_alloc_field {
    CORE_ALLOC_TYPE_SIZE = 0,
    CORE_ALLOC_BATCH,
    CORE_ALLOC_FROM_HEAP,
    CORE_ALLOC_TO_THREADS,
    CORE_ALLOC_TO_GLOBAL,
    CORE_ALLOC_ON_GLOBAL,
    CORE_ALLOC_TO_HEAP,
    CORE_ALLOC_NFIELDS
};
enum core_router_field {
    CORE_ROUTER_INGRESS = 0,
    CORE_ROUTER_EGRESS,
    CORE_ROUTER_TRANSIT,
    CORE_ROUTER_PRESETTLED,
    CORE_ROUTER_DROPPED_PRESETTLED,
    CORE_ROUTER_ACCEPTED,
    CORE_ROUTER_REJECTED,
    CORE_ROUTER_RELEASED,
    CORE_ROUTER_MODIFIED,
    CORE_ROUTER_ADDRS,
    CORE_ROUTER_LINKS,
    CORE_ROUTER_CONNECTIONS,
    CORE_ROUTER_WORKERS,
    CORE_ROUTER_UPTIME,
    CORE_ROUTER_MEMORY,
    CORE_ROUTER_RSS,
    CORE_ROUTER_DELAYED_1S,
    CORE_ROUTER_DELAYED_10S,
    CORE_ROUTER_STUCK,
    CORE_ROUTER_LINKS_BLOCKED,
    CORE_ROUTER_LOG_DROPPED,
    CORE_ROUTER_REDIRECTED, /* deliveries sent to a fallback destination (core/fallback.c) */
    CORE_ROUTER_NFIELDS
};

/* The families, made once by core_stats_families_new() (main thread, at start-up) and
 * read-only afterwards. */
typedef struct core_stats {
    stats_registry_t *reg;        /* the process's registry */
    stats_family_t   *connection; /* labels: connection id, host, container, dir */
    stats_family_t   *link;       /* labels: link id, connection id, dir, owning address key,
                                     link name */
    stats_family_t   *address;    /* labels: address key, distribution */
    stats_family_t   *router;     /* singleton: qdrouterd's router counters */
    stats_family_t   *allocator;  /* labels: typeName (one per pool, main thread writes) */
    stats_obj_t       router_obj; /* its object */
} core_stats_t;

int core_stats_families_new(stats_registry_t *reg, core_stats_t *out);

/* A new object of family f (stats_object_new()).  *out is always usable: live, or a sink
 * when the registry had no room (see stats/stats.h "The sink rule"), which is logged here,
 * rate-limited; either way retire it with stats_object_retire().  Thread-safe. */
void core_stats_object_new(const core_stats_t *cs, stats_family_t *f, const char *const *labels,
                           stats_obj_t *out);

/* The reference-counted head of a message's content; the router embeds it first in its
 * message type.  The core only adds references (one per outgoing copy). */
typedef struct core_content {
    atomic_uint refs;      /* owners: the receiving worker's delivery + one per outgoing copy */
    bool        streaming; /* set by the receiving worker before CORE_A_DELIVER: the message
                              is routed before it is complete (it is large) */
    atomic_uint readers;   /* streaming only: copies the core made (written by the core) */
    atomic_bool routed;    /* streaming only: `readers` is final (written by the core) */
} core_content_t;

static inline void core_content_ref(core_content_t *c, unsigned n)
{
    atomic_fetch_add_explicit(&c->refs, n, memory_order_relaxed);
}

/* The core has decided every copy of a streaming message (n may be 0): the receiving worker
 * may now free bytes that every copy has sent. */
static inline void core_content_routed(core_content_t *c, unsigned n)
{
    if (!c->streaming)
        return;
    atomic_fetch_add_explicit(&c->readers, n, memory_order_relaxed);
    atomic_store_explicit(&c->routed, true, memory_order_release);
}

/* Delivery outcomes, with the AMQP descriptor codes of their states. */
typedef enum core_outcome {
    CORE_OUTCOME_NONE = 0,        /* not yet known */
    CORE_OUTCOME_ACCEPTED = 0x24,
    CORE_OUTCOME_REJECTED = 0x25,
    CORE_OUTCOME_RELEASED = 0x26,
    CORE_OUTCOME_MODIFIED = 0x27,
} core_outcome_t;

/* An outcome and its details, as it travels between receiver and sender. */
typedef struct core_disposition {
    uint8_t  outcome;             /* core_outcome_t */
    bool     delivery_failed;     /* MODIFIED: delivery-failed */
    bool     undeliverable_here;  /* MODIFIED: undeliverable-here */
    char    *cond_name;           /* REJECTED: error condition name, heap, or NULL; the
                                     receiver of the message owns (frees) it */
    char    *cond_desc;           /* REJECTED: its description, heap, or NULL; likewise */
} core_disposition_t;

/* One incoming delivery, as the core sees it.  The router embeds it in its own delivery
 * record; the owner (receiving) worker allocates and frees it. */
typedef struct core_delivery {
    /* Written by the owner before CORE_A_DELIVER; read-only afterwards. */
    core_content_t *content;     /* message content (refcounted) */
    uint64_t        link_id;     /* the incoming link */
    const char     *to;          /* routing address for anonymous links (properties.to or
                                    x-opt-qd.to), not NUL-terminated; NULL for targeted links */
    uint32_t        to_len;      /* its length */
    bool            presettled;  /* the sender settled it on sending: at-most-once */
    uint8_t         priority;    /* header.priority + 1 (0: not read, taken as 4); read by
                                    interior mode only, to pick an inter-router data link */
    /* The router annotations that arrived with it (views into the content, like `to`), set
     * only on a link that keeps them (stripAnnotations no/out, inter-router).  Read by
     * interior mode only (core/interior.h). */
    const uint8_t  *ra_ingress;     /* x-opt-qd.ingress string bytes, or NULL */
    const uint8_t  *ra_trace;       /* x-opt-qd.trace: its encoded elements, or NULL */
    uint32_t        ra_ingress_len; /* bytes at ra_ingress */
    uint32_t        ra_trace_len;   /* bytes at ra_trace */
    uint32_t        ra_trace_count; /* elements of the trace (the distance travelled) */
    uint8_t         ra_phase;       /* x-opt-qd.phase 1..9 + 1 when `to` is x-opt-qd.to,
                                       else 0 (the address's configured ingress phase); read
                                       in interior mode only */
    /* Core-thread fields (_CT), valid between CORE_A_DELIVER and CORE_W_SETTLE/RELEASE. */
    uint32_t           _copies;  /* outgoing copies not yet settled */
    bool               _mcast;   /* aggregate outcomes with the multicast rule */
    uint8_t            _owner;   /* worker that posted it (gets CORE_W_SETTLE/RELEASE) */
    core_disposition_t _result;  /* aggregated outcome so far */
    bool               _listed;  /* on the core's in-flight list (a stuck one has left it) */
    uint64_t           _ingress_ms; /* the core's loop clock when it arrived (monotonic) */
    uint64_t           _out_link;   /* the one outgoing link of a single-copy delivery, or 0 */
    struct core_addr  *_track_addr; /* interior, balanced: the address whose per-connection
                                       count this copy is in (core/interior.c), or NULL */
    uint32_t           _track_conn; /* ... and the connection mask bit */
    struct core_delivery *_fnext; /* in-flight list (oldest first: the stuck sweep's order) */
    struct core_delivery *_fprev;
} core_delivery_t;

typedef enum core_link_dir {
    CORE_LINK_IN = 0, /* the router receives: the client's sender */
    CORE_LINK_OUT,    /* the router sends: the client's receiver */
} core_link_dir_t;

/* -- worker -> core -- */
typedef enum core_action_type {
    CORE_A_LINK_ATTACH = 0, /* link_attach */
    CORE_A_LINK_DETACH,     /* link_id */
    CORE_A_DELIVER,         /* dlv */
    CORE_A_DISPOSITION,     /* an outgoing copy of dlv was settled by its receiver */
    CORE_A_CALL,            /* run call.fn(core, call.arg) on the core thread */
    CORE_A_CONN_OPENED,     /* conn: a route container's connection opened (autoLinks,
                               autolink.c, and link routes, linkroute.c) */
    CORE_A_CONN_CLOSED,     /* conn.conn_id: a connection that posted CONN_OPENED is gone */
    CORE_A_AUTOLINK,        /* autolink: what became of an autoLink's link (link_id) */
    CORE_A_RT,              /* rt: an inter-router connection's news (interior mode, rt.c) */
    CORE_A_EDGE,            /* edge: an edge connection's news (edge mode, core/edge.c) */
} core_action_type_t;

/* What CORE_A_EDGE reports (edge mode, core/edge.c). */
typedef enum core_edge_event {
    CORE_EDGE_CONN_OPENED = 0, /* an edge connection (connector role edge) opened */
    CORE_EDGE_CONN_CLOSED,     /* it is gone */
    CORE_EDGE_TRACK,           /* the interior's address tracking: edge.key has (flag) or no
                                  longer has a destination other than this edge */
    CORE_EDGE_LOOKUP,          /* interior: an edge asks whether edge.key (an address) is
                                  link-routed for a link of direction edge.dir (request
                                  edge.req; core/edge_lookup.h) */
    CORE_EDGE_LOOKUP_REPLY,    /* edge: the interior's answer to request edge.req
                                  (edge.verdict, a core_edge_verdict_t) */
} core_edge_event_t;

/* An edge's answer to a client's attach that it asked its interior about (core/edge_lookup.h). */
typedef enum core_edge_verdict {
    CORE_EDGE_VERDICT_LOCAL = 0, /* not link-routed, or no answer: the edge's own lookup */
    CORE_EDGE_VERDICT_NO_ROUTE,  /* link-routed, but no destination: qd:no-route-to-dest */
    CORE_EDGE_VERDICT_ROUTED,    /* link-routed with a destination: the attach goes uplink */
} core_edge_verdict_t;

/* How a link of an edge connection is used (core_action_t u.attach.edge). */
typedef enum core_edge_link {
    CORE_EDGE_LINK_NONE = 0, /* an ordinary link */
    CORE_EDGE_LINK_PEER,     /* a link of an edge connection: what arrives on it never goes
                                back on a link of the same connection */
    CORE_EDGE_LINK_PROXY_OUT,/* an edge's sender for an address with local producers: it
                                joins the address only while the interior says the address
                                has a destination there (CORE_EDGE_TRACK) */
    CORE_EDGE_LINK_UPLINK,   /* an edge's anonymous sender: everything not local (`L_edge`) */
    CORE_EDGE_LINK_DOWNLINK, /* interior: an edge's downlink, the consumer of `_edge/<id>`
                                (key H<id>) */
    CORE_EDGE_LINK_PROXY_IN, /* an edge's receiver for an address with local consumers, named
                                to the core by the address's hash key (a phase of a waypoint
                                address, a fallback destination); otherwise a PEER link */
} core_edge_link_t;

/* What CORE_A_RT reports (interior mode, core/rt.h). */
typedef enum core_rt_event {
    CORE_RT_CONN_OPENED = 0, /* an inter-router connection opened (rt.cost is effective) */
    CORE_RT_CONN_CLOSED,     /* it is gone */
    CORE_RT_CTL_LOST,        /* its control links went away (the neighbour is lost) */
    CORE_RT_MSG,             /* a routing message arrived on its incoming control link */
} core_rt_event_t;

/* States of an autoLink (qdrouterd's operStatus). */
typedef enum core_autolink_state {
    CORE_AUTOLINK_INACTIVE = 0, /* no connection to attach it on */
    CORE_AUTOLINK_ATTACHING,    /* attach sent, the peer has not answered */
    CORE_AUTOLINK_FAILED,       /* the peer refused or detached it (lastError); retried */
    CORE_AUTOLINK_ACTIVE,       /* attached: messages flow */
} core_autolink_state_t;

/* A function another thread (the admin thread: /healthz, management) runs on the core
 * thread through CORE_A_CALL.  It must not block; it answers its caller by its own means
 * (an atomic plus a uv_async_send, say).  `arg` belongs to the caller. */
typedef void core_call_fn(core_t *core, void *arg);

typedef struct core_action {
    uint8_t  type;    /* core_action_type_t */
    uint8_t  worker;  /* index of the posting worker */
    uint64_t link_id; /* the link concerned (every type) */
    union {
        struct {
            uint64_t conn_id;   /* its connection, for logs and management; 0 for an
                                   in-process link (the management agent), which gets no
                                   stats object */
            void    *handle;    /* the worker's link, echoed back, never dereferenced */
            char    *address;   /* terminus address (heap; the core frees it), or NULL */
            char    *name;      /* the link's name (heap; the core frees it), or NULL */
            uint32_t capacity;  /* linkCapacity of the connection's listener */
            uint8_t  dir;       /* core_link_dir_t */
            bool     dynamic;   /* dynamic source: the core makes an address */
            uint8_t  ir_link;   /* core_ir_link_t (core/interior.h): an inter-router
                                   connection's control or data link; 0 for others */
            uint8_t  ir_priority; /* CORE_IR_LINK_DATA: its priority, 0..9 */
            uint8_t  edge;      /* core_edge_link_t: a link of an edge connection */
            uint8_t  waypoint;  /* the terminus's qd.waypoint.N capability: N (1-9; 1 for
                                   a bare qd.waypoint), 0 for none (qdrouterd 1.19: the
                                   link uses phase N, a receiver N - 1) */
            bool     fallback;  /* the terminus's capability qd.fallback (the address's
                                   fallback destination, core/fallback.c) */
        } attach;
        core_delivery_t *dlv; /* CORE_A_DELIVER */
        struct {
            core_delivery_t   *dlv;  /* the incoming delivery this copy came from */
            core_disposition_t disp; /* the receiver's outcome (strings move to the core) */
        } disposition;
        struct {
            core_call_fn *fn;  /* CORE_A_CALL: run on the core thread */
            void         *arg; /* its argument */
        } call;
        struct {
            uint64_t conn_id;         /* the connection */
            char    *container_id;    /* OPENED: the peer's container id (heap; the core
                                         frees it), or NULL */
            char    *name;            /* OPENED: its listener's or connector's name (heap; the
                                         core frees it), or NULL */
            bool     route_container; /* OPENED: its role is route-container */
        } conn;
        struct {
            uint32_t id;    /* the autoLink (core_work_t u.autolink.id) */
            uint32_t gen;   /* its activation (stale reports are ignored) */
            uint8_t  state; /* core_autolink_state_t: ACTIVE (link_id is the link, announced
                               with CORE_A_LINK_ATTACH right after) or FAILED */
            char    *error; /* FAILED: the peer's error description (its condition name
                               when it has none; heap), or NULL */
        } autolink;
        struct {
            uint64_t conn_id; /* the inter-router connection */
            uint8_t  event;   /* core_rt_event_t */
            int64_t  cost;    /* OPENED: max(our cost, the peer's qd.inter-router-cost) */
            uint8_t *bytes;   /* MSG: the whole message (heap; the core frees it) */
            uint32_t len;     /* its length */
        } rt;
        struct {
            uint64_t conn_id; /* the edge connection */
            uint8_t  event;   /* core_edge_event_t */
            bool     flag;    /* TRACK: the address has a destination beyond the edge */
            char    *key;     /* TRACK: the address's hash key; LOOKUP: the address (heap;
                                 the core frees it) */
            uint64_t req;     /* LOOKUP, LOOKUP_REPLY: the request, echoed */
            uint8_t  dir;     /* LOOKUP: core_link_dir_t of the edge client's link */
            uint8_t  verdict; /* LOOKUP_REPLY: core_edge_verdict_t */
        } edge;
    } u;
} core_action_t;

/* Where a link-routed attach goes (core/linkroute.h defines it). */
typedef struct core_lr_target core_lr_target_t;

/* -- core -> worker -- */
typedef enum core_work_type {
    CORE_W_LINK_ATTACHED = 0, /* attach answered: ok, or refused with a condition */
    CORE_W_LINK_CREDIT,       /* incoming link: grant capacity, or drain to zero */
    CORE_W_LINK_DETACHED,     /* the core forgot the link: the worker may free it */
    CORE_W_SEND,              /* send a copy of dlv's content on an outgoing link */
    CORE_W_SETTLE,            /* final outcome for an incoming delivery; core is done with it */
    CORE_W_RELEASE,           /* core is done with an incoming delivery (nothing to report) */
    CORE_W_EXTERNAL,          /* posted by another thread of the router (see `ext`) */
    CORE_W_AUTOLINK,          /* attach an autoLink's link on connection autolink.conn_id */
    CORE_W_RT_SEND,           /* send a routing message on rt_send.conn_id's control link */
    CORE_W_EDGE,              /* edge mode: what to attach or detach on edge.conn_id */
} core_work_type_t;

/* What CORE_W_EDGE asks of an edge connection's worker (router/edgeconn.c). */
typedef enum core_edge_op {
    CORE_EDGE_ACTIVATE = 0, /* it is the active edge connection: attach the uplink, the
                               downlink, the tracking receiver and the heartbeat sender */
    CORE_EDGE_PROXY_ADD,    /* attach the proxy link of edge.key in direction edge.dir */
    CORE_EDGE_PROXY_DEL,    /* detach it */
    CORE_EDGE_TRACK_SEND,   /* interior: send the edge the tracking message [edge.key,
                               edge.flag] */
    CORE_EDGE_LOOKUP_ASK,   /* edge: ask the interior whether edge.key (an address) is
                               link-routed for a link of direction edge.dir; answer with
                               CORE_A_EDGE LOOKUP_REPLY of edge.req (router/edge_lookup.h) */
    CORE_EDGE_LOOKUP_ANSWER,/* interior: answer the edge's request edge.req: edge.flag (is
                               link-routed), edge.dest (it has a destination) */
} core_edge_op_t;

typedef struct core_work {
    uint8_t type; /* core_work_type_t */
    void   *handle; /* the worker's link (LINK_*, SEND) */
    union {
        struct {
            stats_obj_t stats; /* the link's stats object (worker-written gauges) */
            char *address;   /* dynamic address given (heap, the worker frees), or NULL */
            char *cond_name; /* refused: static condition name, or NULL when accepted */
            char *cond_desc; /* refused: description (heap, the worker frees) */
            core_lr_target_t *routed; /* link-routed: where the link goes (heap, the worker
                                         frees it with core_lr_target_free()); the core
                                         neither routes nor credits the link */
        } attached;
        struct {
            bool grant; /* true: top the credit up to capacity; false: drain */
        } credit;
        struct {
            core_delivery_t *dlv;        /* the incoming delivery to report the outcome to;
                                            NULL when presettled (it may be gone already) */
            core_content_t  *content;    /* the message (one reference taken for this copy) */
            bool             presettled; /* send settled */
            uint8_t          to_phase;   /* with to_override: x-opt-qd.phase (0: none) */
            bool             to_router;  /* interior: the copy goes to another router (a
                                            streamed message says so: x-opt-qd.stream) */
            char            *to_override;/* interior, a copy to another router of a message
                                            that came on a targeted link: the x-opt-qd.to
                                            to write (heap, NUL-terminated; the worker frees
                                            it), else NULL */
        } send;
        struct {
            core_delivery_t   *dlv;  /* owner's incoming delivery */
            core_disposition_t disp; /* outcome to give the sender (strings move along) */
        } settle;
        core_delivery_t *release; /* CORE_W_RELEASE */
        struct {
            int   kind;  /* router-defined */
            void *ptr;   /* router-defined */
            long  arg;   /* router-defined */
        } ext;
        struct {
            uint64_t conn_id; /* the connection (it may be gone: then nothing happens) */
            uint32_t id;      /* the autoLink, echoed in CORE_A_AUTOLINK */
            uint32_t gen;     /* its activation, likewise */
            uint8_t  dir;     /* core_link_dir_t: OUT = the router sends to the peer */
            char    *address; /* the router's address (heap, the worker frees it) */
            char    *peer;    /* the peer's node: externalAddress or address (heap, likewise) */
            bool     detach;  /* instead: detach the link of that activation (the autoLink
                                 was deleted); address and peer are NULL */
        } autolink;
        struct {
            uint64_t conn_id; /* the inter-router connection (it may be gone: then the
                                 worker just frees the bytes) */
            uint8_t *bytes;   /* the whole message, router annotations included (heap; the
                                 worker frees it) */
            uint32_t len;     /* its length */
        } rt_send;
        struct {
            uint64_t conn_id; /* the edge connection (it may be gone: then nothing happens) */
            uint8_t  op;      /* core_edge_op_t */
            uint8_t  dir;     /* PROXY_*: core_link_dir_t, as the core will see the link: IN,
                                 the edge receives the address's messages from the interior
                                 (local consumers); OUT, it sends them there (producers) */
            char    *key;     /* PROXY_*, TRACK_SEND: the address's hash key (heap; the worker
                                 frees it) */
            bool     flag;    /* TRACK_SEND: it has a destination beyond the edge */
            uint64_t req;     /* LOOKUP_*: the request, echoed */
            bool     dest;    /* LOOKUP_ANSWER: the link route has a destination */
            uint8_t  waypoint;/* PROXY_ADD: the qd.waypoint.N capability the link carries,
                                 N (1-9), or 0 for none */
            bool     fallback;/* PROXY_ADD: it carries qd.fallback (a fallback destination) */
        } edge;
    } u;
} core_work_t;

/* Create the core for `n_workers` workers whose queues are `worker_q[i]` (the router owns
 * the queues and their wake-ups).  `cfg` must outlive the core. Main thread. */
core_t *core_new(const cfg_t *cfg, const core_stats_t *stats, int n_workers,
                 base_mpsc_t **worker_q);
/* Start / stop the core thread. Main thread. */
int core_start(core_t *core);
void core_stop(core_t *core);
void core_free(core_t *core);

/* The router id, as configured; immutable. Thread-safe. */
const char *core_router_id(const core_t *core);

/* A worker's batch of actions: fill with core_batch_add(), hand over with core_post().
 * Thread-safe between workers (each has its own batch). */
static inline core_action_t *core_batch_add(base_mpsc_batch_t *b)
{
    return base_mpsc_batch_add(b, sizeof(core_action_t));
}
void core_post(core_t *core, base_mpsc_batch_t *b);

/* Run fn(core, arg) on the core thread, after the actions already queued (any thread that
 * is not a worker: it posts a batch of its own).  Returns 0, or -ENOMEM. */
int core_call(core_t *core, core_call_fn *fn, void *arg);

/* Reserve `name` (say "$management") for a node of the router itself, served by in-process
 * links (connection id 0).  Its mobile form (`name`) and its local forms (`_local/<name>`,
 * `_topo/0/<router-id>/<name>`, `_topo/0/all/<name>`) always have balanced distribution,
 * whatever `defaultDistribution` and the `address` entities say, and a client's receiver
 * cannot attach to them (amqp:unauthorized-access); clients may send to them.  Main thread,
 * before core_start(); `name` is copied. */
void core_node_reserve(core_t *core, const char *name);

/* Run-time address configuration (management CREATE/DELETE of `address`).  Core thread
 * only: call them from a core_call() function.  They change the treatment of addresses
 * created from now on; addresses that exist keep theirs until they go away (as in
 * qdrouterd).  add: `ac` (prefix or pattern) must stay valid until it is removed; returns 0,
 * -EEXIST when the same prefix/pattern is configured already, -EINVAL when it is not a valid
 * pattern.  remove: returns the configuration that was removed, or NULL when it was not
 * there. */
int core_addr_config_add_CT(core_t *core, const cfg_address_t *ac);
const cfg_address_t *core_addr_config_remove_CT(core_t *core, const cfg_address_t *ac);

/* autoLinks (core/autolink.c).  The configured ones are made by core_new(). */

/* One autoLink as management shows it (strings heap, freed by core_autolink_rows_free). */
typedef struct core_autolink_row {
    cfg_autolink_t cfg;        /* its configuration (a copy) */
    uint32_t       id;         /* "autoLink/<id>" when it has no name */
    uint8_t        state;      /* core_autolink_state_t */
    char          *last_error; /* or NULL */
    uint64_t       link_id;    /* the attached link, or 0 */
} core_autolink_row_t;

/* A copy of every autoLink, in creation order (*n of them; NULL when none).  Thread-safe
 * (a short lock the core thread takes to change a state). */
core_autolink_row_t *core_autolink_rows(core_t *core, size_t *n);
void core_autolink_rows_free(core_autolink_row_t *rows, size_t n);
/* Management CREATE: a new autoLink (cfg is copied); the core attaches it on an open
 * connection it matches.  Returns its id.  Thread-safe (not the core thread). */
uint32_t core_autolink_add(core_t *core, const cfg_autolink_t *cfg);
/* Management DELETE of autoLink `id`: forgotten at once, its link detached.  Returns 0, or
 * -ENOENT.  Thread-safe (not the core thread). */
int core_autolink_del(core_t *core, uint32_t id);

/* Interior mode: the routers of the network as management's router.node shows them
 * (qdstat -n), this router first.  Strings heap, freed by core_node_rows_free(). */
typedef struct core_node_row {
    char    *id;              /* router id */
    uint32_t index;           /* mask bit (0: this router) */
    int64_t  instance;        /* its boot number (0 when not known yet) */
    int64_t  version;         /* protocol version */
    char    *next_hop;        /* "(self)" for this router; NULL for a neighbour or an
                                 unreachable router; else the neighbour it is reached through */
    int32_t  router_link;     /* a neighbour's connection mask bit, else -1 */
    int64_t  cost;            /* path cost, -1 when unreachable (0 for this router) */
    char    *link_state;      /* its neighbours' ids, comma-separated */
    char    *valid_origins;   /* valid origins' ids, comma-separated */
    int64_t  last_topo_change; /* Unix seconds of this router's last topology change */
} core_node_row_t;

/* A copy of the rows (*n of them; NULL and 0 when the router is not interior).
 * Thread-safe (the core thread publishes them under a lock after each change). */
core_node_row_t *core_node_rows(core_t *core, size_t *n);
void core_node_rows_free(core_node_row_t *rows, size_t n);

/* Address helpers (pure, thread-safe). */

/* Strip `amqp:/`, `amqp://host/`, and leading '/' from an address; returns a view. */
const char *core_addr_normalize(const char *addr, size_t len, size_t *out_len);

#endif
