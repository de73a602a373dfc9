/* tests/unit/stats/stats_test.c: stats/stats.c - families, objects, handles and generations,
 * retire/fold/reuse, shards, gauges, histograms and quantiles, derived totals, lookup, glob
 * matching and snapshot walks (single-threaded; stats_mt_test.c races them). */
#include "stats/stats.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// clang-format off: cmocka.h needs the headers above first
#include <cmocka.h>
// clang-format on

static const stats_field_t addr_fields[] = {
    {.name = "deliveriesIngress", .kind = STATS_COUNTER, .help = "Deliveries in"},
    {.name = "deliveriesEgress", .kind = STATS_COUNTER, .help = "Deliveries out"},
    {.name = "subscriberCount", .kind = STATS_GAUGE, .help = "Local consumers"},
};
enum { A_IN, A_OUT, A_SUBS };

static const stats_family_def_t addr_def = {
    .name = "address", .fields = addr_fields, .nfields = 3,
};

static const stats_field_t link_fields[] = {
    {.name = "deliveryCount", .kind = STATS_COUNTER},
    {.name = "settleLatency", .kind = STATS_HISTOGRAM, .buckets = 8, .help = "µs"},
    {.name = "acceptedCount", .kind = STATS_COUNTER},
};
static const stats_family_def_t link_def = {
    .name = "link",
    .fields = link_fields,
    .nfields = 3,
    .labels = {"link", "connection", "dir"},
};

static stats_family_t *make(stats_registry_t *r, const stats_family_def_t *d)
{
    stats_family_t *f = NULL;
    assert_int_equal(stats_family_new(r, d, &f), 0);
    assert_non_null(f);
    return f;
}

static stats_obj_t obj(stats_registry_t *r, stats_family_t *f, const char *id)
{
    const char *labels[STATS_MAX_LABELS] = {id, "c1", "in", NULL};
    stats_obj_t o;
    assert_int_equal(stats_object_new(r, f, labels, &o), 0);
    assert_int_not_equal(o.gen, 0);
    return o;
}

static uint64_t val(stats_registry_t *r, stats_handle_t h)
{
    stats_value_t v;
    assert_int_equal(stats_value_get(r, h, &v), 0);
    return v.value;
}

static uint64_t lookup_val(stats_registry_t *r, const char *name)
{
    stats_handle_t h;
    stats_kind_t   k;
    assert_int_equal(stats_lookup(r, name, &h, &k), 0);
    return val(r, h);
}

static void test_counter_sums_shards(void **state)
{
    stats_registry_t *r = stats_registry_new();
    stats_family_t   *f = make(r, &addr_def);
    stats_shard_t    *s1 = stats_shard_new(r), *s2 = stats_shard_new(r);
    stats_obj_t       o = obj(r, f, "M0examples");
    stats_counter_add(s1, stats_obj_stat(o, A_OUT), 5);
    stats_counter_inc(s2, stats_obj_stat(o, A_OUT));
    stats_counter_add(s2, stats_obj_stat(o, A_IN), 7);
    assert_int_equal(val(r, stats_obj_stat(o, A_OUT)), 6);
    assert_int_equal(val(r, stats_obj_stat(o, A_IN)), 7);
    assert_int_equal(lookup_val(r, "address.M0examples.deliveriesEgress"), 6);
    stats_value_t v;
    assert_int_equal(stats_value_get(r, stats_obj_stat(o, A_IN), &v), 0);
    assert_int_equal(v.kind, STATS_COUNTER);
    stats_shard_free(r, s1);
    stats_shard_free(r, s2);
    stats_registry_free(r);
}

static void test_family_errors(void **state)
{
    stats_registry_t *r = stats_registry_new();
    stats_family_t   *f;
    make(r, &addr_def);
    assert_int_equal(stats_family_new(r, &addr_def, &f), -EEXIST);
    stats_family_def_t d = addr_def;
    d.name = "bad.name";
    assert_int_equal(stats_family_new(r, &d, &f), -EINVAL);
    d.name = "";
    assert_int_equal(stats_family_new(r, &d, &f), -EINVAL);
    d.name = "ok";
    d.nfields = 0;
    assert_int_equal(stats_family_new(r, &d, &f), -EINVAL);
    stats_field_t bad[2] = {{.name = "a", .kind = STATS_COUNTER}, {.name = "a"}};
    d.fields = bad;
    d.nfields = 2;
    assert_int_equal(stats_family_new(r, &d, &f), -EINVAL); /* duplicate field */
    bad[1] = (stats_field_t){.name = "h", .kind = STATS_HISTOGRAM, .buckets = 0};
    assert_int_equal(stats_family_new(r, &d, &f), -EINVAL); /* 0 buckets */
    bad[1].buckets = STATS_HIST_MAX_BUCKETS + 1;
    assert_int_equal(stats_family_new(r, &d, &f), -EINVAL);
    bad[1] = (stats_field_t){.name = "x", .kind = (stats_kind_t)9};
    assert_int_equal(stats_family_new(r, &d, &f), -EINVAL);
    bad[1] = (stats_field_t){.name = "x", .kind = STATS_COUNTER, .prom = "bad name"};
    assert_int_equal(stats_family_new(r, &d, &f), -EINVAL);
    bad[1] = (stats_field_t){.name = "x", .kind = STATS_COUNTER, .sum_of = "address.nope"};
    d.singleton = true;
    assert_int_equal(stats_family_new(r, &d, &f), -EINVAL); /* no such field */
    bad[1].sum_of = "address.subscriberCount";
    assert_int_equal(stats_family_new(r, &d, &f), -EINVAL); /* kinds differ */
    bad[1].sum_of = "address.deliveriesEgress";
    d.singleton = false;
    assert_int_equal(stats_family_new(r, &d, &f), -EINVAL); /* derived needs a singleton */
    d = addr_def;
    d.name = "lbl";
    d.labels[0] = "le";
    assert_int_equal(stats_family_new(r, &d, &f), -EINVAL); /* `le` is the histograms' */
    /* A block is at most STATS_MAX_BLOCK slots. */
    stats_field_t big[3] = {{.name = "a", .kind = STATS_HISTOGRAM, .buckets = 48}};
    d = (stats_family_def_t){.name = "big", .fields = big, .nfields = 1};
    assert_int_equal(stats_family_new(r, &d, &f), 0);
    assert_int_equal(stats_family_offset(f, 0), 0);
    static stats_field_t huge[100];
    static char          hn[100][8];
    for (int i = 0; i < 100; i++) { /* 100 x 50 slots > STATS_MAX_BLOCK */
        snprintf(hn[i], sizeof(hn[i]), "h%d", i);
        huge[i] = (stats_field_t){.name = hn[i], .kind = STATS_HISTOGRAM, .buckets = 48};
    }
    d = (stats_family_def_t){.name = "huge", .fields = huge, .nfields = 100};
    assert_int_equal(stats_family_new(r, &d, &f), -EINVAL);
    d.nfields = 80; /* 4000 slots: fits */
    assert_int_equal(stats_family_new(r, &d, &f), 0);
    stats_registry_free(r);
}

static void test_object_identity(void **state)
{
    stats_registry_t *r = stats_registry_new();
    stats_family_t   *f = make(r, &addr_def);
    stats_obj_t       o = obj(r, f, "a.b.c"), o2;
    const char       *dup[] = {"a.b.c"};
    assert_int_equal(stats_object_new(r, f, dup, &o2), -EEXIST);
    assert_int_equal(stats_object_find(r, f, "a.b.c", &o2), 0);
    assert_int_equal(o2.base, o.base);
    assert_int_equal(o2.gen, o.gen);
    assert_int_equal(stats_object_find(r, f, "zz", &o2), -ENOENT);
    const char *nul[] = {NULL};
    assert_int_equal(stats_object_new(r, f, nul, &o2), -EINVAL);
    /* Identities with dots resolve by first and last dot. */
    stats_shard_t *s = stats_shard_new(r);
    stats_counter_add(s, stats_obj_stat(o, A_IN), 3);
    assert_int_equal(lookup_val(r, "address.a.b.c.deliveriesIngress"), 3);
    stats_handle_t h;
    stats_kind_t   k;
    assert_int_equal(stats_lookup(r, "address.a.b.c.nope", &h, &k), -ENOENT);
    assert_int_equal(stats_lookup(r, "address.deliveriesIngress", &h, &k), -ENOENT);
    assert_int_equal(stats_lookup(r, "nofam.x.y", &h, &k), -ENOENT);
    assert_int_equal(stats_lookup(r, "nothing", &h, &k), -ENOENT);
    stats_shard_free(r, s);
    stats_registry_free(r);
}

/* Retire folds counters into the family's retired totals, kills gauges, makes handles
 * stale; the block is reused, zeroed in every shard, under a new generation. */
static void test_retire_fold_reuse(void **state)
{
    stats_registry_t *r = stats_registry_new();
    stats_family_t   *f = make(r, &addr_def);
    stats_shard_t    *s1 = stats_shard_new(r), *s2 = stats_shard_new(r);
    stats_obj_t       a = obj(r, f, "a"), b = obj(r, f, "b");
    stats_counter_add(s1, stats_obj_stat(a, A_OUT), 10);
    stats_counter_add(s2, stats_obj_stat(a, A_OUT), 5);
    stats_gauge_add(s1, stats_obj_stat(a, A_SUBS), 3);
    stats_counter_add(s1, stats_obj_stat(b, A_OUT), 1);
    uint64_t tot[3];
    assert_int_equal(stats_family_totals(r, f, tot), 0);
    assert_int_equal(tot[A_OUT], 16);
    assert_int_equal(tot[A_SUBS], 3);

    assert_int_equal(stats_object_retire(r, a), 0);
    assert_int_equal(stats_object_retire(r, a), -ESTALE);
    stats_value_t v;
    assert_int_equal(stats_value_get(r, stats_obj_stat(a, A_OUT), &v), -ESTALE);
    assert_int_equal(stats_family_totals(r, f, tot), 0);
    assert_int_equal(tot[A_OUT], 16); /* monotonic: a's 15 are in the retired totals */
    assert_int_equal(tot[A_SUBS], 0); /* a gauge dies with its object */

    /* The next object of the family takes a's block, zeroed, with a new generation. */
    stats_obj_t c = obj(r, f, "c");
    assert_int_equal(c.base, a.base);
    assert_int_not_equal(c.gen, a.gen);
    assert_int_equal(val(r, stats_obj_stat(c, A_OUT)), 0);
    assert_int_equal(val(r, stats_obj_stat(c, A_SUBS)), 0);
    assert_int_equal(stats_value_get(r, stats_obj_stat(a, A_OUT), &v), -ESTALE);
    stats_counter_add(s2, stats_obj_stat(c, A_OUT), 2);
    assert_int_equal(stats_family_totals(r, f, tot), 0);
    assert_int_equal(tot[A_OUT], 18);
    /* "a" can be made again: a fresh block (b's and c's are taken), all zero. */
    stats_obj_t a2 = obj(r, f, "a");
    assert_int_equal(val(r, stats_obj_stat(a2, A_OUT)), 0);
    assert_int_equal(stats_object_retire(r, (stats_obj_t){0, 0, 0}), -ESTALE);
    assert_int_equal(stats_object_retire(r, (stats_obj_t){a.base, a.gen, 99999}), -ESTALE);
    stats_shard_free(r, s1);
    stats_shard_free(r, s2);
    stats_registry_free(r);
}

/* A freed shard's counts move to the registry: totals never go down. */
static void test_shard_free_folds(void **state)
{
    stats_registry_t *r = stats_registry_new();
    stats_family_t   *f = make(r, &addr_def);
    stats_obj_t       a = obj(r, f, "a");
    stats_shard_t    *s1 = stats_shard_new(r);
    stats_counter_add(s1, stats_obj_stat(a, A_IN), 4);
    stats_gauge_add(s1, stats_obj_stat(a, A_SUBS), -2);
    stats_shard_free(r, s1);
    assert_int_equal(val(r, stats_obj_stat(a, A_IN)), 4);
    assert_int_equal((int64_t)val(r, stats_obj_stat(a, A_SUBS)), -2);
    stats_shard_t *s2 = stats_shard_new(r);
    stats_counter_add(s2, stats_obj_stat(a, A_IN), 1);
    assert_int_equal(val(r, stats_obj_stat(a, A_IN)), 5);
    /* Retire after the fold: the base shard's part folds too, and reuse zeroes it. */
    assert_int_equal(stats_object_retire(r, a), 0);
    stats_obj_t b = obj(r, f, "b");
    assert_int_equal(b.base, a.base);
    assert_int_equal(val(r, stats_obj_stat(b, A_IN)), 0);
    uint64_t tot[3];
    stats_family_totals(r, f, tot);
    assert_int_equal(tot[A_IN], 5);
    stats_shard_free(r, s2);
    stats_shard_free(r, NULL);
    stats_registry_free(r);
}

static void test_gauges(void **state)
{
    stats_registry_t *r = stats_registry_new();
    stats_shard_t    *s1 = stats_shard_new(r), *s2 = stats_shard_new(r);
    stats_handle_t    g;
    assert_int_equal(stats_stat_new(r, "rssBytes", STATS_GAUGE, "RSS", NULL, &g, NULL), 0);
    stats_gauge_set(s1, g, 1000);
    stats_gauge_set(s1, g, 900); /* set replaces this shard's part */
    assert_int_equal((int64_t)val(r, g), 900);
    stats_gauge_add(s2, g, -1000); /* up on one thread, down on another */
    assert_int_equal((int64_t)val(r, g), -100);
    stats_gauge_add(s2, g, 150);
    assert_int_equal((int64_t)val(r, g), 50);
    stats_shard_free(r, s1);
    stats_shard_free(r, s2);
    stats_registry_free(r);
}

static void test_hist_buckets(void **state)
{
    assert_int_equal(stats_hist_bucket(0, 8), 0);
    assert_int_equal(stats_hist_bucket(1, 8), 0);
    assert_int_equal(stats_hist_bucket(2, 8), 1);
    assert_int_equal(stats_hist_bucket(3, 8), 2);
    assert_int_equal(stats_hist_bucket(4, 8), 2);
    assert_int_equal(stats_hist_bucket(5, 8), 3);
    assert_int_equal(stats_hist_bucket(128, 8), 7);
    assert_int_equal(stats_hist_bucket(129, 8), 8); /* +Inf */
    assert_int_equal(stats_hist_bucket(UINT64_MAX, 8), 8);
    assert_int_equal(stats_hist_bucket(UINT64_MAX, 48), 48);
    assert_int_equal(stats_hist_bucket(1ull << 47, 48), 47);
}

static void test_histogram(void **state)
{
    stats_registry_t *r = stats_registry_new();
    stats_family_t   *f = make(r, &link_def);
    stats_shard_t    *s1 = stats_shard_new(r), *s2 = stats_shard_new(r);
    stats_obj_t       o = obj(r, f, "17");
    uint32_t          off = stats_family_offset(f, 1);
    assert_int_equal(off, 1);
    assert_int_equal(stats_family_offset(f, 2), 1 + STATS_HIST_SLOTS(8));
    assert_int_equal(stats_family_offset(f, 3), UINT32_MAX);
    stats_hist_t h = stats_obj_hist(o, off, 8);
    for (int i = 0; i < 50; i++)
        stats_hist_record(s1, h, 3); /* bucket 2: (2, 4] */
    for (int i = 0; i < 50; i++)
        stats_hist_record(s2, h, 100); /* bucket 7: (64, 128] */
    stats_hist_record(s2, h, 1000); /* +Inf */
    stats_value_t v;
    assert_int_equal(stats_value_get(r, (stats_handle_t){h.id, h.gen}, &v), 0);
    assert_int_equal(v.kind, STATS_HISTOGRAM);
    assert_int_equal(v.value, 101);
    assert_int_equal(v.sum, 50 * 3 + 50 * 100 + 1000);
    assert_int_equal(v.nbuckets, 8);
    assert_int_equal(v.buckets[2], 50);
    assert_int_equal(v.buckets[7], 50);
    assert_int_equal(v.buckets[8], 1);
    /* Handles inside the histogram are not stats. */
    assert_int_equal(stats_value_get(r, (stats_handle_t){h.id + 1, h.gen}, &v), -EINVAL);
    /* Neighbouring field untouched. */
    assert_int_equal(val(r, stats_obj_stat(o, stats_family_offset(f, 2))), 0);
    assert_int_equal(lookup_val(r, "link.17.settleLatency"), 101);
    /* Folding on retire keeps the histogram in the family totals (as a count). */
    uint64_t tot[3];
    assert_int_equal(stats_object_retire(r, o), 0);
    stats_family_totals(r, f, tot);
    assert_int_equal(tot[1], 101);
    stats_shard_free(r, s1);
    stats_shard_free(r, s2);
    stats_registry_free(r);
}

static void test_quantile(void **state)
{
    uint64_t b[9] = {0};
    assert_true(stats_hist_quantile(b, 8, 0.5) == 0);
    b[2] = 50; /* (2, 4] */
    b[7] = 50; /* (64, 128] */
    double p50 = stats_hist_quantile(b, 8, 0.5);
    assert_true(p50 > 3.99 && p50 <= 4.0);
    double p25 = stats_hist_quantile(b, 8, 0.25);
    assert_true(p25 > 2.99 && p25 < 3.01); /* middle of (2, 4] */
    double p99 = stats_hist_quantile(b, 8, 0.99);
    assert_true(p99 > 126 && p99 <= 128);
    double p100 = stats_hist_quantile(b, 8, 1.0);
    assert_true(p100 == 128);
    b[8] = 1000; /* most values above the top bound: report the top bound */
    assert_true(stats_hist_quantile(b, 8, 0.99) == 128);
    uint64_t one[3] = {10, 0, 0}; /* all in [0, 1] */
    double   q = stats_hist_quantile(one, 2, 0.5);
    assert_true(q > 0.49 && q < 0.51);
    assert_true(stats_hist_quantile(one, 2, -1) == 0);
    assert_true(stats_hist_quantile(one, 2, 7) == 1);
}

/* Router totals derived from families: monotonic across retire, no second increment. */
static void test_derived_totals(void **state)
{
    stats_registry_t *r = stats_registry_new();
    stats_family_t   *fa = make(r, &addr_def);
    const stats_field_t router_fields[] = {
        {.name = "addrCount", .kind = STATS_GAUGE, .count_of = "address",
         .prom = "qdr_addresses_total"},
        {.name = "deliveriesEgress", .kind = STATS_COUNTER, .sum_of = "address.deliveriesEgress",
         .prom = "qdr_deliveries_egress_total"},
        {.name = "droppedPresettledDeliveries", .kind = STATS_COUNTER},
    };
    const stats_family_def_t rd = {
        .name = "router", .fields = router_fields, .nfields = 3, .singleton = true,
    };
    stats_family_t *fr = make(r, &rd);
    stats_obj_t     ro = stats_family_object(fr);
    assert_int_not_equal(ro.gen, 0);
    assert_int_equal(stats_object_retire(r, ro), -EINVAL); /* singletons are permanent */
    const char *l[] = {"x"};
    stats_obj_t o;
    assert_int_equal(stats_object_new(r, fr, l, &o), -EINVAL);
    assert_int_equal(stats_family_object(fa).gen, 0);

    stats_shard_t *s = stats_shard_new(r);
    stats_obj_t    a = obj(r, fa, "a"), b = obj(r, fa, "b");
    stats_counter_add(s, stats_obj_stat(a, A_OUT), 10);
    stats_counter_add(s, stats_obj_stat(b, A_OUT), 5);
    stats_counter_add(s, stats_obj_stat(ro, 1), 1); /* the router may add its own part */
    assert_int_equal(lookup_val(r, "router.addrCount"), 2);
    assert_int_equal(lookup_val(r, "router.deliveriesEgress"), 16);
    stats_object_retire(r, a);
    assert_int_equal(lookup_val(r, "router.addrCount"), 1);
    assert_int_equal(lookup_val(r, "router.deliveriesEgress"), 16);
    uint64_t tot[3];
    stats_family_totals(r, fr, tot);
    assert_int_equal(tot[0], 1);
    assert_int_equal(tot[1], 16);
    /* Walks see the same values. */
    stats_iter_t         *it = stats_iter_new(r, "router.*", 0);
    const stats_sample_t *sm;
    int                   n = 0;
    while ((sm = stats_iter_next(it))) {
        if (strcmp(sm->field_name, "deliveriesEgress") == 0)
            assert_int_equal(sm->value, 16);
        if (strcmp(sm->field_name, "addrCount") == 0)
            assert_int_equal(sm->value, 1);
        n++;
    }
    assert_int_equal(n, 3);
    stats_iter_free(it);
    stats_shard_free(r, s);
    stats_registry_free(r);
}

static void test_plain_stats(void **state)
{
    stats_registry_t *r = stats_registry_new();
    stats_shard_t    *s = stats_shard_new(r);
    stats_handle_t    h, h2;
    stats_obj_t       o;
    assert_int_equal(stats_stat_new(r, "uptimeSeconds", STATS_COUNTER, "Up", NULL, &h, &o), 0);
    assert_int_equal(stats_stat_new(r, "uptimeSeconds", STATS_GAUGE, NULL, NULL, &h2, NULL),
                     -EEXIST);
    assert_int_equal(stats_stat_new(r, "a.b", STATS_COUNTER, NULL, NULL, &h2, NULL), -EINVAL);
    assert_int_equal(stats_stat_new(r, "h", STATS_HISTOGRAM, NULL, NULL, &h2, NULL), -EINVAL);
    assert_int_equal(stats_stat_new(r, "p", STATS_COUNTER, NULL, "1bad", &h2, NULL), -EINVAL);
    make(r, &addr_def);
    assert_int_equal(stats_stat_new(r, "address", STATS_COUNTER, NULL, NULL, &h2, NULL), -EEXIST);
    stats_family_t    *f;
    stats_family_def_t d = addr_def;
    d.name = "uptimeSeconds";
    assert_int_equal(stats_family_new(r, &d, &f), -EEXIST);
    stats_counter_add(s, h, 42);
    assert_int_equal(lookup_val(r, "uptimeSeconds"), 42);
    assert_int_equal(stats_object_retire(r, o), 0);
    stats_value_t v;
    assert_int_equal(stats_value_get(r, h, &v), -ESTALE);
    assert_int_equal(stats_stat_new(r, "uptimeSeconds", STATS_GAUGE, NULL, NULL, &h2, NULL), 0);
    assert_int_equal(val(r, h2), 0);
    stats_shard_free(r, s);
    stats_registry_free(r);
}

static void test_glob(void **state)
{
    struct {
        const char *glob, *name;
        bool        match;
    } cases[] = {
        {"router.*", "router.deliveriesIngress", true},
        {"router.*", "routerx.a", false},
        {"router.*", "router.", true},
        {"address.*.deliveriesEgress", "address.M0examples.deliveriesEgress", true},
        {"address.*.deliveriesEgress", "address.a.b.c.deliveriesEgress", true},
        {"address.*.deliveriesEgress", "address.a.deliveriesIngress", false},
        {"*", "", true},
        {"", "", true},
        {"", "a", false},
        {"a?c", "abc", true},
        {"a?c", "ac", false},
        {"*a*b*c*", "xxaxxbxxcxx", true},
        {"*a*b*c*", "xxaxxcxxbxx", false},
        {"link.1?", "link.17", true},
        {"link.\\*", "link.*", true},
        {"link.\\*", "link.x", false},
        {"a\\", "a\\", true},
        {"**x", "abx", true},
        {"a*", "a", true},
        {"*.*.*", "a.b", false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bool m = stats_glob_match(cases[i].glob, cases[i].name, strlen(cases[i].name));
        if (m != cases[i].match)
            fail_msg("glob '%s' vs '%s': got %d", cases[i].glob, cases[i].name, m);
    }
    /* The length bounds the name: no NUL needed. */
    assert_true(stats_glob_match("ab", "abc", 2));
    assert_false(stats_glob_match("abc", "abc", 2));
}

/* Collect "name=value" lines of a walk into buf. */
static int walk(stats_registry_t *r, const char *glob, unsigned flags, char *buf, size_t cap)
{
    stats_iter_t         *it = stats_iter_new(r, glob, flags | STATS_ITER_NAMES);
    const stats_sample_t *s;
    size_t                n = 0;
    int                   count = 0;
    buf[0] = 0;
    while ((s = stats_iter_next(it))) {
        char name[256];
        stats_sample_name(s, name, sizeof(name));
        assert_string_equal(name, s->name);
        assert_int_equal(strlen(name), s->name_len);
        n += (size_t)snprintf(buf + n, cap - n, "%s=%lld\n", s->name, (long long)s->value);
        assert_true(n < cap);
        count++;
    }
    stats_iter_free(it);
    return count;
}

static void test_iter_orders_and_filters(void **state)
{
    stats_registry_t *r = stats_registry_new();
    const stats_field_t router_fields[] = {
        {.name = "linkCount", .kind = STATS_GAUGE, .count_of = "link"},
    };
    stats_family_t *fl = make(r, &link_def);
    make(r, &(stats_family_def_t){.name = "router", .fields = router_fields, .nfields = 1,
                                  .singleton = true});
    stats_family_t *fa = make(r, &addr_def);
    stats_shard_t  *s = stats_shard_new(r);
    stats_handle_t  up;
    stats_stat_new(r, "uptimeSeconds", STATS_COUNTER, NULL, NULL, &up, NULL);
    stats_counter_add(s, up, 9);
    stats_obj_t a1 = obj(r, fa, "a1"), a2 = obj(r, fa, "a2");
    obj(r, fl, "7");
    stats_counter_add(s, stats_obj_stat(a1, A_IN), 1);
    stats_counter_add(s, stats_obj_stat(a2, A_OUT), 2);
    char buf[4096];

    assert_int_equal(walk(r, "address.*", 0, buf, sizeof(buf)), 6);
    assert_string_equal(buf, "address.a1.deliveriesIngress=1\n"
                             "address.a1.deliveriesEgress=0\n"
                             "address.a1.subscriberCount=0\n"
                             "address.a2.deliveriesIngress=0\n"
                             "address.a2.deliveriesEgress=2\n"
                             "address.a2.subscriberCount=0\n");
    assert_int_equal(walk(r, "address.*", STATS_ITER_BY_FIELD, buf, sizeof(buf)), 6);
    assert_string_equal(buf, "address.a1.deliveriesIngress=1\n"
                             "address.a2.deliveriesIngress=0\n"
                             "address.a1.deliveriesEgress=0\n"
                             "address.a2.deliveriesEgress=2\n"
                             "address.a1.subscriberCount=0\n"
                             "address.a2.subscriberCount=0\n");
    assert_int_equal(walk(r, "*.deliveriesEgress", 0, buf, sizeof(buf)), 2);
    assert_int_equal(walk(r, "address.a2.deliveriesEgress", 0, buf, sizeof(buf)), 1);
    assert_string_equal(buf, "address.a2.deliveriesEgress=2\n");
    assert_int_equal(walk(r, "address.a2.deliveriesEgress", STATS_ITER_BY_FIELD, buf,
                          sizeof(buf)), 1);
    assert_int_equal(walk(r, "address.zz.deliveriesEgress", 0, buf, sizeof(buf)), 0);
    assert_int_equal(walk(r, "uptimeSeconds", 0, buf, sizeof(buf)), 1);
    assert_string_equal(buf, "uptimeSeconds=9\n");
    assert_int_equal(walk(r, "uptime*", 0, buf, sizeof(buf)), 1);
    assert_int_equal(walk(r, "router.*", 0, buf, sizeof(buf)), 1);
    assert_string_equal(buf, "router.linkCount=1\n");
    /* link.7.deliveryCount, link.7.acceptedCount, router.linkCount, subscriberCount x2 */
    assert_int_equal(walk(r, "*Count", 0, buf, sizeof(buf)), 5);
    assert_int_equal(walk(r, "*.*Count", STATS_ITER_SINGLETONS, buf, sizeof(buf)), 1);
    assert_int_equal(walk(r, "nothing.*", 0, buf, sizeof(buf)), 0);
    /* Everything: link (3 fields), router (1), address (2 x 3), plain (1) = 11. */
    assert_int_equal(walk(r, NULL, 0, buf, sizeof(buf)), 11);
    assert_int_equal(walk(r, "*", STATS_ITER_PLAIN, buf, sizeof(buf)), 1);
    assert_int_equal(walk(r, NULL, STATS_ITER_OBJECTS, buf, sizeof(buf)), 9);
    /* Sample details: labels, handle, histogram buckets. */
    stats_iter_t         *it = stats_iter_new(r, "link.7.settleLatency", 0);
    const stats_sample_t *sm = stats_iter_next(it);
    assert_non_null(sm);
    assert_int_equal(sm->kind, STATS_HISTOGRAM);
    assert_int_equal(sm->nlabels, 3);
    assert_string_equal(sm->label_keys[1], "connection");
    assert_string_equal(sm->labels[1], "c1");
    assert_string_equal(sm->labels[2], "in");
    assert_int_equal(sm->nbuckets, 8);
    assert_non_null(sm->buckets);
    assert_string_equal(sm->prom, "junction_link_settle_latency");
    assert_string_equal(sm->help, "µs");
    assert_ptr_equal(sm->family, fl);
    stats_value_t v;
    assert_int_equal(stats_value_get(r, sm->handle, &v), 0);
    assert_null(stats_iter_next(it));
    assert_null(stats_iter_next(it));
    stats_iter_free(it);
    stats_shard_free(r, s);
    stats_registry_free(r);
}

/* Many objects: several batches and pages; retired objects vanish from walks; a walk keeps
 * going while objects come and go (every object alive throughout is seen exactly once). */
static void test_iter_many_and_churn(void **state)
{
    stats_registry_t *r = stats_registry_new();
    stats_family_t   *f = make(r, &addr_def);
    stats_shard_t    *s = stats_shard_new(r);
    enum { N = 5000 };
    static stats_obj_t objs[N];
    char               id[32];
    for (int i = 0; i < N; i++) {
        snprintf(id, sizeof(id), "addr%d", i);
        objs[i] = obj(r, f, id);
        stats_counter_add(s, stats_obj_stat(objs[i], A_IN), (uint64_t)i);
    }
    for (int i = 0; i < N; i += 2)
        assert_int_equal(stats_object_retire(r, objs[i]), 0);
    stats_iter_t         *it = stats_iter_new(r, NULL, STATS_ITER_OBJECTS);
    const stats_sample_t *sm;
    static unsigned char  seen[N];
    int                   n = 0, made = 0;
    while ((sm = stats_iter_next(it))) {
        if (sm->field != A_IN)
            continue;
        int i = atoi(sm->labels[0] + 4);
        if (strncmp(sm->labels[0], "new", 3) == 0)
            continue; /* made during the walk: may or may not appear */
        assert_true(i % 2 == 1);
        assert_int_equal(sm->value, (uint64_t)i);
        assert_int_equal(seen[i], 0);
        seen[i] = 1;
        n++;
        /* Churn during the walk: new objects fill the holes, odd ones die. */
        if (made < 1000) {
            snprintf(id, sizeof(id), "new%d", made++);
            obj(r, f, id);
        }
        if (i + 2 < N && (i / 2) % 3 == 0) {
            assert_int_equal(stats_object_retire(r, objs[i + 2]), 0);
            objs[i + 2].gen = 0;
        }
    }
    stats_iter_free(it);
    for (int i = 1; i < N; i += 2)
        if (objs[i].gen)
            assert_int_equal(seen[i], 1);
    assert_true(n >= 1000);
    stats_info_t info;
    stats_registry_info(r, &info);
    assert_int_equal(info.shards, 1);
    assert_true(info.slots_used >= N * 3);
    assert_true(info.objects > 1000);
    stats_shard_free(r, s);
    stats_registry_free(r);
}

/* Ids past the first commit step work in every shard, blocks are contiguous and disjoint,
 * and a shard made later covers every id handed out. */
static void test_growth(void **state)
{
    stats_registry_t  *r = stats_registry_new();
    stats_field_t      fields[100];
    char               names[100][8];
    for (int i = 0; i < 100; i++) {
        snprintf(names[i], sizeof(names[i]), "f%d", i);
        fields[i] = (stats_field_t){.name = names[i], .kind = STATS_COUNTER};
    }
    stats_family_t *f = make(r, &(stats_family_def_t){.name = "wide", .fields = fields,
                                                      .nfields = 100});
    stats_shard_t  *s1 = stats_shard_new(r);
    char            id[16];
    stats_obj_t     last = {0}, prev = {0};
    for (int i = 0; i < 400; i++) {
        snprintf(id, sizeof(id), "%d", i);
        last = obj(r, f, id);
        if (i)
            assert_int_equal(last.base, prev.base + 100);
        prev = last;
        stats_counter_add(s1, stats_obj_stat(last, 99), 1);
    }
    assert_true(last.base + 100 > STATS_COMMIT_SLOTS);
    stats_info_t info;
    stats_registry_info(r, &info);
    assert_true(info.slots_committed >= info.slots_used);
    assert_int_equal(info.slots_committed % STATS_COMMIT_SLOTS, 0);
    stats_shard_t *s2 = stats_shard_new(r);
    stats_counter_add(s2, stats_obj_stat(last, 99), 1);
    assert_int_equal(val(r, stats_obj_stat(last, 99)), 2);
    uint64_t tot[100];
    stats_family_totals(r, f, tot);
    assert_int_equal(tot[99], 401);
    assert_int_equal(tot[0], 0);
    /* {0,0} is the sink: writes are harmless, reads are stale. */
    stats_counter_inc(s2, (stats_handle_t){0, 0});
    stats_value_t v;
    assert_int_equal(stats_value_get(r, (stats_handle_t){0, 0}, &v), -ESTALE);
    assert_int_equal(stats_value_get(r, (stats_handle_t){STATS_MAX_SLOTS - 1, 5}, &v), -ESTALE);
    stats_shard_free(r, s1);
    stats_shard_free(r, s2);
    stats_registry_free(r);
}

/* The router's layout in miniature: link and connection families, then the singleton
 * `router` family (its block is the first one handed out) with its own counters and the
 * count_of gauges.  Used by the two tests below. */
static const stats_field_t mini_link_fields[16] = {
    {.name = "capacity", .kind = STATS_GAUGE},      {.name = "undelivered", .kind = STATS_GAUGE},
    {.name = "unsettled", .kind = STATS_GAUGE},     {.name = "deliveries", .kind = STATS_COUNTER},
    {.name = "presettled", .kind = STATS_COUNTER},  {.name = "dropped", .kind = STATS_COUNTER},
    {.name = "accepted", .kind = STATS_COUNTER},    {.name = "rejected", .kind = STATS_COUNTER},
    {.name = "released", .kind = STATS_COUNTER},    {.name = "modified", .kind = STATS_COUNTER},
    {.name = "credit", .kind = STATS_GAUGE},        {.name = "settleRate", .kind = STATS_GAUGE},
    {.name = "delayed1", .kind = STATS_COUNTER},    {.name = "delayed10", .kind = STATS_COUNTER},
    {.name = "stuck", .kind = STATS_COUNTER},       {.name = "zeroCredit", .kind = STATS_GAUGE},
};
static const stats_field_t mini_conn_fields[4] = {
    {.name = "deliveriesIn", .kind = STATS_COUNTER},
    {.name = "deliveriesOut", .kind = STATS_COUNTER},
    {.name = "openedAt", .kind = STATS_GAUGE},
    {.name = "lastDeliveryAt", .kind = STATS_GAUGE},
};
#define MINI_ROUTER_OWN 18 /* own counters r00..r17, then linkCount, connectionCount */
static stats_field_t mini_router_fields[MINI_ROUTER_OWN + 2];
static char          mini_router_names[MINI_ROUTER_OWN][8];

typedef struct mini {
    stats_registry_t *r;
    stats_family_t   *link, *conn, *router;
    stats_obj_t       ro; /* the router object */
} mini_t;

static void mini_new(mini_t *m)
{
    m->r = stats_registry_new();
    m->link = make(m->r, &(stats_family_def_t){.name = "link", .fields = mini_link_fields,
                                               .nfields = 16, .labels = {"link"}});
    m->conn = make(m->r, &(stats_family_def_t){.name = "connection",
                                               .fields = mini_conn_fields, .nfields = 4});
    for (int i = 0; i < MINI_ROUTER_OWN; i++) {
        snprintf(mini_router_names[i], sizeof(mini_router_names[i]), "r%02d", i);
        mini_router_fields[i] = (stats_field_t){.name = mini_router_names[i],
                                                .kind = STATS_COUNTER};
    }
    mini_router_fields[MINI_ROUTER_OWN] =
        (stats_field_t){.name = "linkCount", .kind = STATS_GAUGE, .count_of = "link"};
    mini_router_fields[MINI_ROUTER_OWN + 1] =
        (stats_field_t){.name = "connectionCount", .kind = STATS_GAUGE, .count_of = "connection"};
    m->router = make(m->r, &(stats_family_def_t){.name = "router", .fields = mini_router_fields,
                                                 .nfields = MINI_ROUTER_OWN + 2,
                                                 .singleton = true});
    m->ro = stats_family_object(m->router);
}

/* Write `n` into every field of object o of family f (counters add, gauges set), through
 * the plain handle API every caller has always had. */
static void write_all(stats_shard_t *s, stats_family_t *f, stats_obj_t o, uint64_t n)
{
    for (unsigned i = 0; i < stats_family_nfields(f); i++) {
        if (stats_family_field(f, i)->kind == STATS_GAUGE)
            stats_gauge_set(s, stats_obj_stat(o, stats_family_offset(f, i)), (int64_t)n);
        else
            stats_counter_add(s, stats_obj_stat(o, stats_family_offset(f, i)), n);
    }
}

/* Fill the whole id space (STATS_MAX_SLOTS, no limit set): the first object that cannot be
 * made leaves the caller an object it may write through - what the router's workers did
 * without a check - and those writes must change no stat: not the router's totals (whose
 * block lies right after the reserved ids), not a live object's. */
static void test_full_registry_writes_go_nowhere(void **state)
{
    mini_t m;
    mini_new(&m);
    stats_registry_t *r = m.r;
    /* A family of 4,096 slots per object (81 histograms of 48 buckets and 46 counters), to
     * fill 16 M ids with a few thousand objects. */
    static stats_field_t wide[127];
    static char          wnames[127][8];
    for (int i = 0; i < 127; i++) {
        snprintf(wnames[i], sizeof(wnames[i]), "w%03d", i);
        wide[i] = i < 81 ? (stats_field_t){.name = wnames[i], .kind = STATS_HISTOGRAM,
                                           .buckets = STATS_HIST_MAX_BUCKETS}
                         : (stats_field_t){.name = wnames[i], .kind = STATS_COUNTER};
    }
    stats_family_t *fw = make(r, &(stats_family_def_t){.name = "wide", .fields = wide,
                                                       .nfields = 127});
    stats_shard_t *core = stats_shard_new(r), *worker = stats_shard_new(r);
    for (int i = 0; i < MINI_ROUTER_OWN; i++)
        stats_counter_add(core, stats_obj_stat(m.ro, (uint32_t)i), (uint64_t)i + 1);
    stats_obj_t live_link = obj(r, m.link, "L1");
    write_all(worker, m.link, live_link, 7);

    char        id[32];
    stats_obj_t o;
    int         rc, nwide = 0, nlinks = 1, nconns = 0;
    for (;; nwide++) {
        snprintf(id, sizeof(id), "w%d", nwide);
        if ((rc = stats_object_new(r, fw, (const char *[]){id}, &o)) != 0)
            break;
    }
    assert_int_equal(rc, -ENOSPC);
    assert_true(nwide > 4000);
    for (;; nlinks++) { /* then the smaller blocks, until not even a link fits */
        snprintf(id, sizeof(id), "L%d", nlinks + 1);
        if ((rc = stats_object_new(r, m.link, (const char *[]){id}, &o)) != 0)
            break;
    }
    assert_int_equal(rc, -ENOSPC);
    for (;; nconns++) {
        snprintf(id, sizeof(id), "C%d", nconns);
        if ((rc = stats_object_new(r, m.conn, (const char *[]){id, "h", "c", "in"}, &o)) != 0)
            break;
    }
    assert_int_equal(rc, -ENOSPC);

    /* The objects that could not be made, as a caller holds them: zero-initialised, then
     * whatever stats_object_new left there.  Written from both shards, every field. */
    stats_obj_t bad_link = {0, 0, 0}, bad_conn = {0, 0, 0}, never = {0, 0, 0};
    assert_int_equal(stats_object_new(r, m.link, (const char *[]){"Lbad"}, &bad_link), -ENOSPC);
    assert_int_equal(stats_object_new(r, m.conn, (const char *[]){"Cbad", "h", "c", "in"},
                                      &bad_conn),
                     -ENOSPC);
    assert_int_equal(bad_link.gen, 0);
    for (int k = 0; k < 3; k++) {
        write_all(core, m.link, bad_link, 1000);
        write_all(worker, m.link, bad_link, 1000);
        write_all(worker, m.conn, bad_conn, 1000);
        write_all(worker, m.link, never, 1000);
    }
    stats_hist_record(worker, stats_obj_hist(never, 4000, STATS_HIST_MAX_BUCKETS), 1u << 20);

    for (int i = 0; i < MINI_ROUTER_OWN; i++) {
        snprintf(id, sizeof(id), "router.r%02d", i);
        assert_int_equal(lookup_val(r, id), (uint64_t)i + 1);
    }
    for (unsigned i = 0; i < 16; i++)
        assert_int_equal(val(r, stats_obj_stat(live_link, i)), 7);
    /* Every stat a walk reports: the router's own, the live link's, nothing else. */
    stats_iter_t         *it = stats_iter_new(r, NULL, 0);
    const stats_sample_t *sm;
    uint64_t              sum = 0;
    while ((sm = stats_iter_next(it)))
        if (!(sm->family && strstr(stats_family_name(sm->family), "router") &&
              sm->field >= MINI_ROUTER_OWN))
            sum += sm->value; /* (the count_of gauges aside: checked below) */
    stats_iter_free(it);
    assert_int_equal(sum, MINI_ROUTER_OWN * (MINI_ROUTER_OWN + 1) / 2 + 16 * 7);
    stats_shard_free(r, core);
    stats_shard_free(r, worker);
    stats_registry_free(r);
}

/* The sink rule's other half, with a small registry (stats_registry_set_limit): what a failed
 * creation gives is a sink object - not none, writable through stats_obj_add/set - that
 * count_of counts until it is retired; the registry counts refusals; a retired block is
 * still reused at the limit; a plain stat that cannot be made is a sink handle. */
static void test_sink_objects(void **state)
{
    mini_t m;
    mini_new(&m);
    stats_registry_t *r = m.r;
    assert_int_equal(stats_registry_set_limit(r, 0), -EINVAL);
    assert_int_equal(stats_registry_set_limit(r, STATS_MAX_SLOTS), -EINVAL);
    stats_info_t info;
    stats_registry_info(r, &info);
    /* Room for exactly 3 links beyond what the router took. */
    assert_int_equal(stats_registry_set_limit(r, info.slots_used - STATS_SINK_SLOTS + 3 * 16), 0);
    stats_shard_t *s = stats_shard_new(r);
    stats_obj_t    l[3], bad[2];
    for (int i = 0; i < 3; i++) {
        char id[8];
        snprintf(id, sizeof(id), "L%d", i);
        l[i] = obj(r, m.link, id);
        assert_true(stats_obj_is_live(l[i]));
    }
    assert_int_equal(stats_object_new(r, m.link, (const char *[]){"X"}, &bad[0]), -ENOSPC);
    assert_int_equal(stats_object_new(r, m.link, (const char *[]){"L0"}, &bad[1]), -EEXIST);
    for (int i = 0; i < 2; i++) {
        assert_false(stats_obj_is_live(bad[i]));
        assert_false(stats_obj_is_none(bad[i])); /* a sink: a thing without stats */
        for (uint32_t f = 0; f < 16; f++) {
            stats_obj_add(s, bad[i], f, 5);
            stats_obj_set(s, bad[i], f, -3);
        }
    }
    assert_true(stats_obj_is_none((stats_obj_t){0, 0, 0}));
    stats_obj_add(s, m.ro, 0, 1);
    assert_int_equal(lookup_val(r, "router.r00"), 1);
    assert_int_equal(lookup_val(r, "router.linkCount"), 5); /* 3 live + 2 sinks */
    assert_int_equal(lookup_val(r, "router.connectionCount"), 0);
    stats_registry_info(r, &info);
    assert_int_equal(info.sinks, 2);
    assert_int_equal(info.refused, 1);
    /* Retiring: a sink leaves count_of; none is nothing to retire. */
    assert_int_equal(stats_object_retire(r, bad[0]), 0);
    assert_int_equal(stats_object_retire(r, (stats_obj_t){0, 0, 0}), -ESTALE);
    assert_int_equal(lookup_val(r, "router.linkCount"), 4);
    /* At the limit, a retired block is reused. */
    assert_int_equal(stats_object_retire(r, l[1]), 0);
    stats_obj_t again = obj(r, m.link, "L9");
    assert_int_equal(again.base, l[1].base);
    assert_int_equal(val(r, stats_obj_stat(again, 3)), 0);
    assert_int_equal(stats_object_retire(r, bad[1]), 0);
    assert_int_equal(lookup_val(r, "router.linkCount"), 3);
    stats_registry_info(r, &info);
    assert_int_equal(info.sinks, 0);
    /* A plain stat that cannot be made: a sink handle. */
    stats_handle_t h = {77, 77};
    stats_obj_t    ho = {77, 77, 77};
    assert_int_equal(stats_stat_new(r, "tooMany", STATS_COUNTER, NULL, NULL, &h, &ho), -ENOSPC);
    assert_int_equal(h.gen, 0);
    assert_true(h.id < STATS_SINK_SLOTS);
    assert_true(stats_obj_is_none(ho));
    stats_counter_inc(s, h);
    /* The Prometheus text holds the live links and the router, nothing of the sinks. */
    stats_iter_t         *it = stats_iter_new(r, "link.*", 0);
    const stats_sample_t *sm;
    unsigned              n = 0;
    while ((sm = stats_iter_next(it))) {
        assert_true(strcmp(sm->labels[0], "X") != 0);
        n++;
    }
    stats_iter_free(it);
    assert_int_equal(n, 3 * 16);
    stats_shard_free(r, s);
    stats_registry_free(r);
}

/* The identity hash under churn: after random retires and re-creations every live identity
 * is found with its own block and every retired one is gone (open addressing with
 * backward-shift deletion must keep every probe chain whole). */
static void test_identity_hash_churn(void **state)
{
    stats_registry_t *r = stats_registry_new();
    stats_family_t   *f = make(r, &addr_def);
    stats_family_t   *g = make(r, &(stats_family_def_t){.name = "other", .fields = addr_fields,
                                                       .nfields = 1});
    enum { N = 20000 };
    static stats_obj_t objs[N];
    static bool        live[N];
    char               id[32];
    unsigned           seed = 12345;
    for (int i = 0; i < N; i++) {
        snprintf(id, sizeof(id), "%d", i);
        objs[i] = obj(r, f, id);
        live[i] = true;
        if (i % 7 == 0) /* the same identity in another family is another object */
            obj(r, g, id);
    }
    for (int round = 0; round < 4; round++) {
        for (int k = 0; k < N; k++) {
            seed = seed * 1103515245u + 12345u;
            int i = (int)((seed >> 8) % N);
            snprintf(id, sizeof(id), "%d", i);
            if (live[i]) {
                assert_int_equal(stats_object_retire(r, objs[i]), 0);
            } else {
                objs[i] = obj(r, f, id);
            }
            live[i] = !live[i];
        }
        for (int i = 0; i < N; i++) {
            stats_obj_t o;
            snprintf(id, sizeof(id), "%d", i);
            int rc = stats_object_find(r, f, id, &o);
            if (live[i]) {
                assert_int_equal(rc, 0);
                assert_int_equal(o.base, objs[i].base);
                assert_int_equal(o.gen, objs[i].gen);
            } else {
                assert_int_equal(rc, -ENOENT);
            }
            if (i % 7 == 0)
                assert_int_equal(stats_object_find(r, g, id, &o), 0);
        }
    }
    /* Plain names are one namespace whatever their kind. */
    stats_handle_t h;
    stats_kind_t   k;
    assert_int_equal(stats_stat_new(r, "g1", STATS_GAUGE, NULL, NULL, &h, NULL), 0);
    assert_int_equal(stats_stat_new(r, "g1", STATS_COUNTER, NULL, NULL, &h, NULL), -EEXIST);
    assert_int_equal(stats_lookup(r, "g1", &h, &k), 0);
    assert_int_equal(k, STATS_GAUGE);
    stats_registry_free(r);
}

static void test_family_accessors(void **state)
{
    stats_registry_t *r = stats_registry_new();
    stats_family_t   *f = make(r, &link_def);
    assert_ptr_equal(stats_family_find(r, "link"), f);
    assert_null(stats_family_find(r, "nope"));
    assert_string_equal(stats_family_name(f), "link");
    assert_int_equal(stats_family_nfields(f), 3);
    assert_string_equal(stats_family_field(f, 2)->name, "acceptedCount");
    assert_null(stats_family_field(f, 3));
    assert_int_equal(stats_family_nlabels(f), 3);
    assert_string_equal(stats_family_label_key(f, 2), "dir");
    assert_null(stats_family_label_key(f, 3));
    assert_string_equal(stats_family_prom_name(f, 0), "junction_link_delivery_count_total");
    assert_string_equal(stats_family_prom_name(f, 2), "junction_link_accepted_count_total");
    assert_false(stats_family_is_singleton(f));
    /* A family without label keys is labelled by its own name. */
    stats_family_t *fa = make(r, &addr_def);
    assert_int_equal(stats_family_nlabels(fa), 1);
    assert_string_equal(stats_family_label_key(fa, 0), "address");
    stats_registry_free(r);
}

static void test_snake(void **state)
{
    char buf[64];
    struct {
        const char *in, *out;
    } cases[] = {
        {"deliveriesEgress", "deliveries_egress"},
        {"deliveriesDelayed1Sec", "deliveries_delayed1_sec"},
        {"RSSBytes", "rss_bytes"},
        {"linkCount", "link_count"},
        {"a-b.c", "a_b_c"},
        {"already_snake", "already_snake"},
        {"x", "x"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = stats_prom_snake(cases[i].in, buf, sizeof(buf));
        assert_string_equal(buf, cases[i].out);
        assert_int_equal(n, strlen(cases[i].out));
    }
    assert_int_equal(stats_prom_snake("abcdef", buf, 4), 3);
    assert_string_equal(buf, "abc");
    assert_int_equal(stats_prom_snake("abcdef", buf, 0), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counter_sums_shards),
        cmocka_unit_test(test_family_errors),
        cmocka_unit_test(test_object_identity),
        cmocka_unit_test(test_retire_fold_reuse),
        cmocka_unit_test(test_shard_free_folds),
        cmocka_unit_test(test_gauges),
        cmocka_unit_test(test_hist_buckets),
        cmocka_unit_test(test_histogram),
        cmocka_unit_test(test_quantile),
        cmocka_unit_test(test_derived_totals),
        cmocka_unit_test(test_plain_stats),
        cmocka_unit_test(test_glob),
        cmocka_unit_test(test_iter_orders_and_filters),
        cmocka_unit_test(test_iter_many_and_churn),
        cmocka_unit_test(test_growth),
        cmocka_unit_test(test_full_registry_writes_go_nowhere),
        cmocka_unit_test(test_sink_objects),
        cmocka_unit_test(test_identity_hash_churn),
        cmocka_unit_test(test_family_accessors),
        cmocka_unit_test(test_snake),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
