/* core/core_metrics.h: the pure arithmetic behind qdrouterd's time-based link figures -
 * settleRate's rolling window and the delay classes of deliveriesDelayed1Sec/10Sec - kept
 * apart from the threads that use them so unit tests can drive them with any clock.
 *
 * Threads: none of its own; a core_rate_t belongs to whoever embeds it (the core thread's
 * core_link_t).  Every function is pure or touches only its argument.
 */
#ifndef JUNCTION_CORE_METRICS_H
#define JUNCTION_CORE_METRICS_H

#include <stdbool.h>
#include <stdint.h>

/* qdrouterd's QDR_LINK_RATE_DEPTH: settleRate is the settlements of the last 5 seconds / 5. */
#define CORE_RATE_DEPTH 5u

/* A delivery counts in deliveriesDelayed1Sec when it settles more than 1 s after it arrived,
 * in deliveriesDelayed10Sec (and not in 1Sec) after more than 10 s; deliveriesStuck counts a
 * delivery still unsettled more than 10 s after it arrived; a link is blocked once its credit
 * has been zero for more than 10 s (qdrouterd's stuck_age). */
#define CORE_DELAY_1S_MS   1000u
#define CORE_DELAY_10S_MS  10000u
#define CORE_STUCK_AGE_MS  10000u
#define CORE_BLOCKED_AGE_MS 10000u

/* Settlements per second over a window of CORE_RATE_DEPTH whole seconds.  `cur` counts the
 * second in progress (one increment per settlement: the data path's only cost); once a
 * second core_rate_tick() moves it into the window. */
typedef struct core_rate {
    uint32_t slots[CORE_RATE_DEPTH]; /* settlements in each of the last whole seconds */
    uint32_t sum;                    /* their sum */
    uint32_t cur;                    /* settlements in the second in progress */
    uint8_t  cursor;                 /* the oldest slot, overwritten next */
} core_rate_t;

static inline void core_rate_add(core_rate_t *r)
{
    r->cur++;
}

/* `secs` whole seconds passed since the last tick (>= 1; seconds with no tick count as
 * seconds without settlements).  Returns the rate: settlements in the window / its depth. */
static inline uint32_t core_rate_tick(core_rate_t *r, uint64_t secs)
{
    for (uint64_t i = 0; i < secs && i < CORE_RATE_DEPTH; i++) {
        uint32_t v = i == 0 ? r->cur : 0;
        r->sum = r->sum - r->slots[r->cursor] + v;
        r->slots[r->cursor] = v;
        r->cursor = (uint8_t)((r->cursor + 1) % CORE_RATE_DEPTH);
    }
    r->cur = 0;
    return r->sum / CORE_RATE_DEPTH;
}

/* Nothing settled in the window nor in the second in progress: the rate is 0 for good. */
static inline bool core_rate_idle(const core_rate_t *r)
{
    return r->sum == 0 && r->cur == 0;
}

/* The delay class of a delivery settled at `now_ms` that arrived at `ingress_ms` (one
 * monotonic clock): 0 in time, 1 delayed more than 1 s, 2 more than 10 s. */
static inline int core_delay_class(uint64_t now_ms, uint64_t ingress_ms)
{
    uint64_t d = now_ms > ingress_ms ? now_ms - ingress_ms : 0;
    return d > CORE_DELAY_10S_MS ? 2 : d > CORE_DELAY_1S_MS ? 1 : 0;
}

#endif
