/* core/routing/mobile.h: the mobile-address table of qdrouterd 1.19's mobile-address sync
 * (src/router_core/modules/mobile_sync/mobile.c): which hash keys have local destinations
 * here and what was added or deleted since the last differential MAU, our mobile_seq, and
 * which remote routers have destinations for which keys, with the sequence rules of MAU/MAR.
 *
 * Rules (interrouter reference, 2.8):
 *  - Local: a key's first local destination puts it in the add list, its last one going in
 *    the delete list; an add and a delete of one key inside one batch cancel out.  Only
 *    mobile-sync classes count: M (mobile), C D E F (link routes), H (edge).
 *  - Once a second, if either list is non-empty: mobile_seq += 1 and one differential MAU
 *    (hints = the added keys' treatments, add, del) goes to every router; then the RA.
 *  - MAR(have_seq) from R: answered with an absolute MAU when have_seq < mobile_seq.  Its
 *    `exist` holds the keys with local destinations or a pending delete, minus pending adds
 *    (the next differential MAU corrects both), in the order the keys were first seen.
 *  - Differential MAU from R: applied only when its mobile_seq is the stored one + 1.
 *    Otherwise one MAR goes to R and the MAU is ignored; further out-of-order MAUs are
 *    ignored without another MAR until one is accepted.  (qdrouterd 1.19.0 applies the second
 *    out-of-order MAU anyway; the fix after 1.19.0 ignores it, as here.)
 *  - Absolute MAU from R: always applied; R's keys not in `exist` are withdrawn from R.
 *  - A router deleted or restarted: all its keys withdrawn, its sequence back to 0.
 *  - Hints: a treatment per added key (qdrouterd's enum: 0 multicast-flood, 1 multicast-
 *    once, 2 anycast-closest, 3 anycast-balanced, 4 link-balanced); kept as -1 when the MAU
 *    had none (the core then applies its address configuration or default distribution).
 *
 * Threads: a table belongs to the core thread (_CT).  Keys are copied in.
 */
#ifndef JUNCTION_CORE_ROUTING_MOBILE_H
#define JUNCTION_CORE_ROUTING_MOBILE_H

#include "core/routing/lsdb.h"
#include "core/routing/msg.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct core_rt_mobile core_rt_mobile_t;

/* What a remote MAU did. */
typedef enum core_rt_mau_result {
    CORE_RT_MAU_APPLIED = 0, /* the router's keys and sequence are updated */
    CORE_RT_MAU_SEND_MAR,    /* out of order: send a MAR (have_seq = core_rt_mobile_router_seq()) */
    CORE_RT_MAU_IGNORED,     /* out of order again: nothing to do */
} core_rt_mau_result_t;

/* A differential MAU to send (views into the table, valid until the next call). */
typedef struct core_rt_mobile_diff {
    int64_t              mobile_seq; /* the new own sequence */
    const codec_bytes_t *add;        /* added keys */
    const int64_t       *hints;      /* their treatments */
    uint32_t             n_add;      /* entries */
    const codec_bytes_t *del;        /* deleted keys */
    uint32_t             n_del;      /* entries */
} core_rt_mobile_diff_t;

core_rt_mobile_t *core_rt_mobile_new(void);
void              core_rt_mobile_free(core_rt_mobile_t *mob);

/* Whether a hash key belongs to mobile sync (class M, C, D, E, F or H). */
bool core_rt_mobile_key_is_synced(const char *key, size_t len);

/* Local destinations: the first one of `key` appeared (with the treatment advertised as its
 * hint) / the last one went.  Keys of other classes are ignored. */
void core_rt_mobile_local_add_CT(core_rt_mobile_t *mob, const char *key, size_t len, int treatment);
void core_rt_mobile_local_del_CT(core_rt_mobile_t *mob, const char *key, size_t len);

/* The once-a-second batch: returns true and fills *d when a differential MAU is due (the
 * sequence has then advanced: tell the link-state database, which sends an RA). */
bool core_rt_mobile_tick_CT(core_rt_mobile_t *mob, core_rt_mobile_diff_t *d);

int64_t core_rt_mobile_seq(const core_rt_mobile_t *mob);

/* A MAR with have_seq arrived: true when an absolute MAU must answer it; then
 * core_rt_mobile_exist_CT() gives its keys and hints (views valid until the next call). */
bool     core_rt_mobile_mar_CT(const core_rt_mobile_t *mob, int64_t have_seq);
uint32_t core_rt_mobile_exist_CT(core_rt_mobile_t *mob, const codec_bytes_t **keys,
                                 const int64_t **hints);

/* A MAU (decoded, op MAU) from the router with mask bit `maskbit`. */
core_rt_mau_result_t core_rt_mobile_mau_CT(core_rt_mobile_t *mob, uint32_t maskbit,
                                           const core_rt_msg_t *m);

/* The sequence we hold for a router (a MAR's have_seq). */
int64_t core_rt_mobile_router_seq(const core_rt_mobile_t *mob, uint32_t maskbit);

/* Withdraw every key of a router and set its sequence to 0 (deleted or restarted). */
void core_rt_mobile_flush_router_CT(core_rt_mobile_t *mob, uint32_t maskbit);

/* Queries: whether router maskbit has a destination for key; its hint (-1: none or unknown
 * key); how many routers have it; how many keys the table holds. */
bool     core_rt_mobile_router_has(const core_rt_mobile_t *mob, const char *key, size_t len,
                                   uint32_t maskbit);
int      core_rt_mobile_hint(const core_rt_mobile_t *mob, const char *key, size_t len);
uint32_t core_rt_mobile_routers_of(const core_rt_mobile_t *mob, const char *key, size_t len);
uint32_t core_rt_mobile_key_count(const core_rt_mobile_t *mob);

#endif
