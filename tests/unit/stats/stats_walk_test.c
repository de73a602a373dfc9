/* tests/unit/stats/stats_walk_test.c: stats/stats.c's walks sum objects' slots with the
 * registry's mutex released (hold_end_unlock), so that object creation and retirement - the
 * routing threads - never wait for a scrape.  What may happen meanwhile is made to happen
 * exactly there, through the STATS_TEST_UNLOCKED_HOOK that stats.c calls between releasing
 * the mutex and summing:
 *   - a shard is freed: its counts are folded into the base shard, which the walk may also
 *     be summing - it must not count them twice (nor read the freed shard's memory once
 *     unmapped: under ASan that would fail);
 *   - an object of the batch is retired and its block reused by a new object that counts at
 *     once - the walk must not show the new object's counts (or the zeroes of the reuse)
 *     under the old object's name.
 * Single-threaded: the hook runs the other side's calls on the walking thread. */
#include "stats/stats.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

typedef struct stats_registry stats_registry_t;
static void (*g_hook)(stats_registry_t *r);

/* Runs the armed action once. */
static void unlocked_hook(stats_registry_t *r)
{
    void (*h)(stats_registry_t *) = g_hook;
    g_hook = NULL;
    if (h)
        h(r);
}
#define STATS_TEST_UNLOCKED_HOOK(r) unlocked_hook(r)

#include "stats/stats.c"

// clang-format off: cmocka.h needs the headers above first
#include <cmocka.h>
// clang-format on

static const stats_field_t fields[] = {
    {.name = "deliveries", .kind = STATS_COUNTER},
    {.name = "accepted", .kind = STATS_COUNTER},
};

static stats_family_t *g_fam;
static stats_shard_t  *g_victim; /* the shard the hook frees */
static stats_shard_t  *g_writer; /* the shard the new object counts into */
static stats_obj_t     g_retire; /* the object the hook retires */

static void free_victim(stats_registry_t *r)
{
    stats_shard_free(r, g_victim);
}

static void retire_and_reuse(stats_registry_t *r)
{
    assert_int_equal(stats_object_retire(r, g_retire), 0);
    stats_obj_t o;
    assert_int_equal(stats_object_new(r, g_fam, (const char *[]){"C"}, &o), 0);
    assert_int_equal(o.base, g_retire.base); /* the retired block, zeroed and reused */
    stats_obj_add(g_writer, o, 0, 100);
    stats_obj_add(g_writer, o, 1, 100);
}

/* Walk family "link" (object by object, or field by field) with the hook armed; returns the
 * values seen as {identity -> deliveries} in out[] (labels[0][0] - 'A'), UINT64_MAX when not
 * seen. */
static void walk(stats_registry_t *r, unsigned flags, void (*hook)(stats_registry_t *),
                 uint64_t out[3])
{
    for (int i = 0; i < 3; i++)
        out[i] = UINT64_MAX;
    g_hook = hook;
    stats_iter_t         *it = stats_iter_new(r, "link.*", flags);
    const stats_sample_t *s;
    while ((s = stats_iter_next(it))) {
        int k = s->labels[0][0] - 'A';
        assert_true(k >= 0 && k < 3);
        if (s->field == 0) {
            assert_int_equal(out[k], UINT64_MAX); /* once */
            out[k] = s->value;
        }
    }
    stats_iter_free(it);
    assert_null(g_hook); /* the hook ran */
}

static void test_shard_freed_while_summing(void **state)
{
    for (unsigned mode = 0; mode < 2; mode++) {
        stats_registry_t *r = stats_registry_new();
        assert_int_equal(stats_family_new(r, &(stats_family_def_t){.name = "link",
                                                                   .fields = fields,
                                                                   .nfields = 2},
                                          &g_fam),
                         0);
        stats_obj_t a, b;
        assert_int_equal(stats_object_new(r, g_fam, (const char *[]){"A"}, &a), 0);
        assert_int_equal(stats_object_new(r, g_fam, (const char *[]){"B"}, &b), 0);
        /* A shard already folded: the base shard is summed from now on. */
        stats_shard_t *s0 = stats_shard_new(r);
        stats_obj_add(s0, a, 0, 1);
        stats_shard_free(r, s0);
        stats_shard_t *s1 = stats_shard_new(r);
        g_victim = stats_shard_new(r);
        stats_obj_add(s1, a, 0, 10);
        stats_obj_add(g_victim, a, 0, 5);
        stats_obj_add(g_victim, b, 0, 3);
        uint64_t v[3];
        walk(r, mode ? STATS_ITER_BY_FIELD : 0, free_victim, v);
        assert_int_equal(v[0], 16); /* 1 (folded before) + 10 + 5 (folded during): once */
        assert_int_equal(v[1], 3);
        walk(r, mode ? STATS_ITER_BY_FIELD : 0, NULL, v);
        assert_int_equal(v[0], 16);
        stats_shard_free(r, s1);
        stats_registry_free(r);
    }
}

static void test_object_retired_and_reused_while_summing(void **state)
{
    for (unsigned mode = 0; mode < 2; mode++) {
        stats_registry_t *r = stats_registry_new();
        assert_int_equal(stats_family_new(r, &(stats_family_def_t){.name = "link",
                                                                   .fields = fields,
                                                                   .nfields = 2},
                                          &g_fam),
                         0);
        stats_obj_t a, b;
        assert_int_equal(stats_object_new(r, g_fam, (const char *[]){"A"}, &a), 0);
        assert_int_equal(stats_object_new(r, g_fam, (const char *[]){"B"}, &b), 0);
        g_writer = stats_shard_new(r);
        stats_obj_add(g_writer, a, 0, 7);
        stats_obj_add(g_writer, b, 0, 9);
        g_retire = a;
        uint64_t v[3];
        walk(r, mode ? STATS_ITER_BY_FIELD : 0, retire_and_reuse, v);
        /* A went while the walk read it: not shown (never C's 100, nor the reuse's 0); B as
         * it was; C, made after the walk passed its place, not in this walk. */
        assert_int_equal(v[0], UINT64_MAX);
        assert_int_equal(v[1], 9);
        assert_int_equal(v[2], UINT64_MAX);
        walk(r, mode ? STATS_ITER_BY_FIELD : 0, NULL, v);
        assert_int_equal(v[0], UINT64_MAX);
        assert_int_equal(v[1], 9);
        assert_int_equal(v[2], 100);
        stats_shard_free(r, g_writer);
        stats_registry_free(r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shard_freed_while_summing),
        cmocka_unit_test(test_object_retired_and_reused_while_summing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
