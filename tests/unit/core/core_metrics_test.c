/* tests/unit/core/core_metrics_test.c: settleRate's rolling window and the delay classes
 * (core/core_metrics.h) driven with hand-made clocks, and the router family's qdrouterd
 * /metrics names for the time-based counters (core_stats.c rendered by stats_prom). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/core.h"
#include "core/core_metrics.h"

#include <stdlib.h>
#include <string.h>

static void test_rate_empty(void **state)
{
    (void)state;
    core_rate_t r = {0};
    assert_true(core_rate_idle(&r));
    assert_int_equal(core_rate_tick(&r, 1), 0);
    assert_true(core_rate_idle(&r));
}

static void test_rate_window(void **state)
{
    (void)state;
    core_rate_t r = {0};
    /* 10 settlements a second for 5 seconds: 10/s */
    for (int s = 0; s < 5; s++) {
        for (int i = 0; i < 10; i++)
            core_rate_add(&r);
        uint32_t rate = core_rate_tick(&r, 1);
        assert_int_equal(rate, (uint32_t)(10 * (s + 1) / 5));
    }
    assert_int_equal(r.sum, 50);
    /* a quiet second drops the oldest 10: 40 / 5 */
    assert_int_equal(core_rate_tick(&r, 1), 8);
    assert_false(core_rate_idle(&r));
    /* three quiet seconds in one tick (the core was late): 10 left */
    assert_int_equal(core_rate_tick(&r, 3), 2);
    /* a long gap empties the window, however long */
    assert_int_equal(core_rate_tick(&r, 1000), 0);
    assert_true(core_rate_idle(&r));
    assert_int_equal(r.sum, 0);
}

static void test_rate_current_second_counts_at_tick(void **state)
{
    (void)state;
    core_rate_t r = {0};
    for (int i = 0; i < 7; i++)
        core_rate_add(&r);
    assert_false(core_rate_idle(&r)); /* not yet in the window, but not idle */
    /* the settlements of the second in progress go into the newest slot; late ticks add
     * empty seconds after it */
    assert_int_equal(core_rate_tick(&r, 2), 1);
    assert_int_equal(r.sum, 7);
    assert_int_equal(r.cur, 0);
    for (int k = 0; k < 3; k++)
        assert_int_equal(core_rate_tick(&r, 1), 1);
    assert_int_equal(core_rate_tick(&r, 1), 0); /* 5 s after it went in, it left */
}

static void test_delay_classes(void **state)
{
    (void)state;
    assert_int_equal(core_delay_class(5000, 5000), 0);
    assert_int_equal(core_delay_class(6000, 5000), 0);   /* exactly 1 s: not more */
    assert_int_equal(core_delay_class(6001, 5000), 1);
    assert_int_equal(core_delay_class(15000, 5000), 1);  /* exactly 10 s */
    assert_int_equal(core_delay_class(15001, 5000), 2);
    assert_int_equal(core_delay_class(4000, 5000), 0);   /* a clock behind: never negative */
    assert_int_equal(core_delay_class(UINT64_MAX, 0), 2);
}

typedef struct text {
    char  *buf;
    size_t len;
} text_t;

static int sink(void *ctx, const char *bytes, size_t len)
{
    text_t *t = ctx;
    t->buf = realloc(t->buf, t->len + len + 1);
    memcpy(t->buf + t->len, bytes, len);
    t->len += len;
    t->buf[t->len] = 0;
    return 0;
}

static void test_prometheus_names(void **state)
{
    (void)state;
    stats_registry_t *reg = stats_registry_new();
    core_stats_t cs;
    assert_int_equal(core_stats_families_new(reg, &cs), 0);
    stats_shard_t *sh = stats_shard_new(reg);
    stats_counter_add(sh, stats_obj_stat(cs.router_obj, CORE_ROUTER_DELAYED_1S), 3);
    stats_counter_add(sh, stats_obj_stat(cs.router_obj, CORE_ROUTER_DELAYED_10S), 2);
    stats_counter_add(sh, stats_obj_stat(cs.router_obj, CORE_ROUTER_STUCK), 4);
    stats_gauge_add(sh, stats_obj_stat(cs.router_obj, CORE_ROUTER_LINKS_BLOCKED), 1);
    text_t t = {0};
    assert_int_equal(stats_prom_write(reg, NULL, sink, &t), 0);
    assert_non_null(t.buf);
    assert_non_null(strstr(t.buf, "\nqdr_deliveries_delayed_1sec_total 3\n"));
    assert_non_null(strstr(t.buf, "\nqdr_deliveries_delayed_10sec_total 2\n"));
    assert_non_null(strstr(t.buf, "\nqdr_deliveries_stuck_total 4\n"));
    assert_non_null(strstr(t.buf, "\nqdr_links_blocked_total 1\n"));
    assert_non_null(strstr(t.buf, "# TYPE qdr_links_blocked_total gauge"));
    free(t.buf);
    stats_shard_free(reg, sh);
    stats_registry_free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rate_empty),
        cmocka_unit_test(test_rate_window),
        cmocka_unit_test(test_rate_current_second_counts_at_tick),
        cmocka_unit_test(test_delay_classes),
        cmocka_unit_test(test_prometheus_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
