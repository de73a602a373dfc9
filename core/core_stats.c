/* core/core_stats.c: the router's built-in stat families - qdrouterd's counters on `router`,
 * `connection`, `router.link` and `router.address` - defined once at start-up.
 *
 * Who writes what (each thread into its own shard, see stats/stats.h):
 *   core thread  router totals, link delivery and outcome counters, link capacity and
 *                unsettled gauges, every address stat; creates and retires link and address
 *                objects
 *   workers      connection objects (created at the peer's open, retired when freed) and
 *                their counters; link undelivered / credit gauges; presettled drops
 *   main thread  process gauges (uptime, memory), workerThreads, and the `allocator`
 *                family (one object per pool, figures from base_pool_info())
 * Threads: core_stats_families_new() on the main thread before any other thread starts;
 * core_stats_object_new() on any thread that makes objects (the core, the workers).
 *
 * Objects without stats.  When the registry has no room (the router's `maxStats`) an object
 * is a sink (stats/stats.h "The sink rule"): its counts go nowhere, the router's totals
 * (counted on the router object) and its count_of gauges stay exact, and nobody needs a
 * check.  core_stats_object_new() says so in the log once, then at most once a minute.
 */
#include "core/core.h"

#include "core/base/log.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#define LOG(lvl, ...) base_log(BASE_LOG_MOD_ROUTER, BASE_LOG_##lvl, __VA_ARGS__)

#define REFUSED_LOG_PERIOD_MS 60000 /* the log mentions refusals at most this often */

#define C(n, h)  {.name = n, .kind = STATS_COUNTER, .help = h}
#define G(n, h)  {.name = n, .kind = STATS_GAUGE, .help = h}

// clang-format off
static const stats_field_t conn_fields[CORE_CONN_NFIELDS] = {
    [CORE_CONN_DELIVERIES_IN]  = C("deliveriesIn", "Deliveries received from the peer"),
    [CORE_CONN_DELIVERIES_OUT] = C("deliveriesOut", "Deliveries sent to the peer"),
    [CORE_CONN_OPENED_AT]      = G("openedAt", "When the peer opened the connection (Unix seconds)"),
    [CORE_CONN_LAST_DLV]       = G("lastDeliveryAt", "When a delivery last went in or out (Unix seconds)"),
    [CORE_CONN_EDGE_STANDBY]   = G("edgeStandby", "1 for an edge router's edge connection that is not the active one"),
};

static const stats_field_t link_fields[CORE_LINK_NFIELDS] = {
    [CORE_LINK_CAPACITY]          = G("capacity", "Link capacity (linkCapacity)"),
    [CORE_LINK_UNDELIVERED]       = G("undeliveredCount", "Copies waiting for the receiver's credit"),
    [CORE_LINK_UNSETTLED]         = G("unsettledCount", "Copies sent and not yet settled"),
    [CORE_LINK_DELIVERIES]        = C("deliveryCount", "Deliveries through the link"),
    [CORE_LINK_PRESETTLED]        = C("presettledCount", "Presettled deliveries"),
    [CORE_LINK_DROPPED_PRESETTLED] = C("droppedPresettledCount", "Presettled deliveries dropped"),
    [CORE_LINK_ACCEPTED]          = C("acceptedCount", "Deliveries accepted"),
    [CORE_LINK_REJECTED]          = C("rejectedCount", "Deliveries rejected"),
    [CORE_LINK_RELEASED]          = C("releasedCount", "Deliveries released"),
    [CORE_LINK_MODIFIED]          = C("modifiedCount", "Deliveries modified"),
    [CORE_LINK_CREDIT]            = G("creditAvailable", "Credit the link holds now"),
    [CORE_LINK_SETTLE_RATE]       = G("settleRate", "Settlements per second, averaged over 5 s"),
    [CORE_LINK_DELAYED_1S]        = C("deliveriesDelayed1Sec", "Deliveries settled 1 to 10 s after they arrived"),
    [CORE_LINK_DELAYED_10S]       = C("deliveriesDelayed10Sec", "Deliveries settled more than 10 s after they arrived"),
    [CORE_LINK_STUCK]             = C("deliveriesStuck", "Deliveries found unsettled more than 10 s after they arrived"),
    [CORE_LINK_ZERO_CREDIT_SECS]  = G("zeroCreditSeconds", "Seconds the link's credit has been zero"),
};

static const stats_field_t addr_fields[CORE_ADDR_NFIELDS] = {
    [CORE_ADDR_SUBSCRIBERS] = G("subscriberCount", "Local consumers"),
    [CORE_ADDR_SENDERS]     = G("senderCount", "Senders attached to the address"),
    [CORE_ADDR_INGRESS]     = C("deliveriesIngress", "Deliveries routed to the address"),
    [CORE_ADDR_EGRESS]      = C("deliveriesEgress", "Copies sent to its consumers"),
    [CORE_ADDR_TRANSIT]     = C("deliveriesTransit", "Deliveries in transit to other routers"),
    [CORE_ADDR_REDIRECTED]  = C("deliveriesRedirectedToFallback", "Deliveries that found no consumer, sent to the fallback destination"),
    [CORE_ADDR_REMOTE]      = G("remoteCount", "Other routers of the network with a consumer"),
    [CORE_ADDR_IN_PROCESS]  = G("inProcess", "Consumers inside the router (management, routing protocol)"),
    [CORE_ADDR_TO_PROC]     = C("deliveriesToContainer", "Deliveries handed to consumers inside the router"),
    [CORE_ADDR_FROM_PROC]   = C("deliveriesFromContainer", "Deliveries sent by the router itself"),
};

static const stats_field_t alloc_fields[CORE_ALLOC_NFIELDS] = {
    [CORE_ALLOC_TYPE_SIZE]  = G("typeSize", "Bytes per item"),
    [CORE_ALLOC_BATCH]      = G("transferBatchSize", "Items moved between threads at once"),
    [CORE_ALLOC_FROM_HEAP]  = G("totalAllocFromHeap", "Items ever taken from the heap"),
    [CORE_ALLOC_TO_THREADS] = G("batchesRebalancedToThreads", "Batches moved to a thread"),
    [CORE_ALLOC_TO_GLOBAL]  = G("batchesRebalancedToGlobal", "Batches moved to the global list"),
    [CORE_ALLOC_ON_GLOBAL]  = G("globalFreeListItems", "Free items on the global list"),
    [CORE_ALLOC_TO_HEAP]    = G("totalFreeToHeap", "Items given back to the heap by trimming"),
};

static const stats_field_t router_fields[CORE_ROUTER_NFIELDS] = {
    [CORE_ROUTER_INGRESS]     = {.name = "deliveriesIngress", .kind = STATS_COUNTER,
                                 .help = "Deliveries received from clients",
                                 .prom = "qdr_deliveries_ingress_total"},
    [CORE_ROUTER_EGRESS]      = {.name = "deliveriesEgress", .kind = STATS_COUNTER,
                                 .help = "Deliveries sent to clients",
                                 .prom = "qdr_deliveries_egress_total"},
    [CORE_ROUTER_TRANSIT]     = {.name = "deliveriesTransit", .kind = STATS_COUNTER,
                                 .help = "Deliveries sent to other routers",
                                 .prom = "qdr_deliveries_transit_total"},
    [CORE_ROUTER_PRESETTLED]  = {.name = "presettledDeliveries", .kind = STATS_COUNTER,
                                 .help = "Presettled deliveries received",
                                 .prom = "qdr_presettled_deliveries_total"},
    [CORE_ROUTER_DROPPED_PRESETTLED] = {.name = "droppedPresettledDeliveries",
                                 .kind = STATS_COUNTER, .help = "Presettled deliveries dropped",
                                 .prom = "qdr_dropped_presettled_deliveries_total"},
    [CORE_ROUTER_ACCEPTED]    = {.name = "acceptedDeliveries", .kind = STATS_COUNTER,
                                 .help = "Deliveries accepted", .prom = "qdr_accepted_deliveries_total"},
    [CORE_ROUTER_REJECTED]    = {.name = "rejectedDeliveries", .kind = STATS_COUNTER,
                                 .help = "Deliveries rejected", .prom = "qdr_rejected_deliveries_total"},
    [CORE_ROUTER_RELEASED]    = {.name = "releasedDeliveries", .kind = STATS_COUNTER,
                                 .help = "Deliveries released", .prom = "qdr_released_deliveries_total"},
    [CORE_ROUTER_MODIFIED]    = {.name = "modifiedDeliveries", .kind = STATS_COUNTER,
                                 .help = "Deliveries modified", .prom = "qdr_modified_deliveries_total"},
    [CORE_ROUTER_ADDRS]       = {.name = "addrCount", .kind = STATS_GAUGE, .count_of = "address",
                                 .help = "Addresses", .prom = "qdr_addresses"},
    [CORE_ROUTER_LINKS]       = {.name = "linkCount", .kind = STATS_GAUGE, .count_of = "link",
                                 .help = "Links", .prom = "qdr_links"},
    [CORE_ROUTER_CONNECTIONS] = {.name = "connectionCount", .kind = STATS_GAUGE,
                                 .count_of = "connection", .help = "Connections",
                                 .prom = "qdr_connections"},
    [CORE_ROUTER_WORKERS]     = {.name = "workerThreads", .kind = STATS_GAUGE,
                                 .help = "Worker threads", .prom = "qdr_worker_threads"},
    [CORE_ROUTER_UPTIME]      = {.name = "uptimeSeconds", .kind = STATS_GAUGE,
                                 .help = "Seconds since start", .prom = "qdr_uptime_seconds"},
    [CORE_ROUTER_MEMORY]      = {.name = "memoryUsage", .kind = STATS_GAUGE,
                                 .help = "Virtual memory size (bytes)", .prom = "qdr_memory_usage_bytes"},
    [CORE_ROUTER_RSS]         = {.name = "residentMemory", .kind = STATS_GAUGE,
                                 .help = "Resident memory (bytes)", .prom = "qdr_resident_memory_bytes"},
    [CORE_ROUTER_DELAYED_1S]  = {.name = "deliveriesDelayed1Sec", .kind = STATS_COUNTER,
                                 .help = "Deliveries settled 1 to 10 s after they arrived",
                                 .prom = "qdr_deliveries_delayed_1sec_total"},
    [CORE_ROUTER_DELAYED_10S] = {.name = "deliveriesDelayed10Sec", .kind = STATS_COUNTER,
                                 .help = "Deliveries settled more than 10 s after they arrived",
                                 .prom = "qdr_deliveries_delayed_10sec_total"},
    [CORE_ROUTER_STUCK]       = {.name = "deliveriesStuck", .kind = STATS_COUNTER,
                                 .help = "Deliveries found unsettled more than 10 s after they arrived",
                                 .prom = "qdr_deliveries_stuck_total"},
    [CORE_ROUTER_LINKS_BLOCKED] = {.name = "linksBlocked", .kind = STATS_GAUGE,
                                 .help = "Links whose credit has been zero for more than 10 s",
                                 .prom = "qdr_links_blocked_total"},
    [CORE_ROUTER_LOG_DROPPED] = {.name = "logLinesDropped", .kind = STATS_COUNTER,
                                 .help = "Log lines dropped because the log output did not keep up"},
    [CORE_ROUTER_REDIRECTED]  = {.name = "deliveriesRedirectedToFallback", .kind = STATS_COUNTER,
                                 .help = "Deliveries that found no consumer, sent to a fallback destination",
                                 .prom = "qdr_deliveries_redirected_to_fallback_total"},
};
// clang-format on

int core_stats_families_new(stats_registry_t *reg, core_stats_t *out)
{
    memset(out, 0, sizeof(*out));
    out->reg = reg;
    const stats_family_def_t conn = {.name = "connection", .fields = conn_fields,
                                     .nfields = CORE_CONN_NFIELDS,
                                     .labels = {"connection", "host", "container", "dir", "user",
                                                "sasl", "tls", "role"}};
    const stats_family_def_t link = {.name = "link", .fields = link_fields,
                                     .nfields = CORE_LINK_NFIELDS,
                                     .labels = {"link", "connection", "dir", "address", "name",
                                                "linkType", "priority"}};
    const stats_family_def_t addr = {.name = "address", .fields = addr_fields,
                                     .nfields = CORE_ADDR_NFIELDS,
                                     .labels = {"address", "distribution"}};
    const stats_family_def_t alloc = {.name = "allocator", .fields = alloc_fields,
                                      .nfields = CORE_ALLOC_NFIELDS, .labels = {"typeName"},
                                      .prom_prefix = "qdr_allocator"};
    const stats_family_def_t router = {.name = "router", .fields = router_fields,
                                       .nfields = CORE_ROUTER_NFIELDS, .singleton = true,
                                       .prom_prefix = "qdr"};
    int rc;
    if ((rc = stats_family_new(reg, &conn, &out->connection)) != 0 ||
        (rc = stats_family_new(reg, &link, &out->link)) != 0 ||
        (rc = stats_family_new(reg, &addr, &out->address)) != 0 ||
        (rc = stats_family_new(reg, &router, &out->router)) != 0 ||
        (rc = stats_family_new(reg, &alloc, &out->allocator)) != 0)
        return rc;
    out->router_obj = stats_family_object(out->router);
    return 0;
}

/* Refusals not yet logged, and the monotonic time (ms) before which a refusal is only
 * counted (0: none logged yet).  Any thread, lock-free: the log's rate limit only. */
static _Atomic uint64_t s_refused;
static _Atomic uint64_t s_refused_quiet_until;

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void refused_log(const core_stats_t *cs, const char *family, int rc)
{
    atomic_fetch_add_explicit(&s_refused, 1, memory_order_relaxed);
    uint64_t now = mono_ms(), until = atomic_load_explicit(&s_refused_quiet_until,
                                                            memory_order_relaxed);
    if (until && now < until)
        return;
    if (!atomic_compare_exchange_strong(&s_refused_quiet_until, &until,
                                        now + REFUSED_LOG_PERIOD_MS))
        return; /* another thread logs this period */
    uint64_t n = atomic_exchange_explicit(&s_refused, 0, memory_order_relaxed);
    stats_info_t info;
    stats_registry_info(cs->reg, &info);
    const char *why = rc == -ENOSPC   ? "the stats registry is full"
                      : rc == -EEXIST ? "its identity is taken"
                                      : "bad labels";
    if (until == 0)
        LOG(WARNING, "A new %s has no stats of its own: %s (%llu stat slots in use, router "
            "maxStats); router totals still count it.  Logged again at most once a minute.",
            family, why, (unsigned long long)info.slots_used);
    else
        LOG(WARNING, "%llu more objects got no stats of their own in the last minute or more "
            "(%llu in all without stats now): %s", (unsigned long long)n,
            (unsigned long long)info.sinks, why);
}

void core_stats_object_new(const core_stats_t *cs, stats_family_t *f, const char *const *labels,
                           stats_obj_t *out)
{
    int rc = stats_object_new(cs->reg, f, labels, out);
    if (BASE_UNLIKELY(rc != 0))
        refused_log(cs, stats_family_name(f), rc);
}
