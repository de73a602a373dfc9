/* tests/unit/stats/stats_mt_test.c: stats/ under threads - writers counting into their own
 * shards while objects are created, retired and their ids reused, a reader walking
 * snapshots, a Prometheus renderer, and a thread whose shard is freed mid-run.  Meant to
 * run under TSan (build-tsan) as well as plainly.
 *
 * Invariants checked:
 *   - no misattribution: object "w<t>.<n>" is written exactly k(n) times by its owner, so
 *     any snapshot of it reads <= k(n) (a reused slot that kept an old object's count, or a
 *     count landing in the wrong block, would exceed it);
 *   - monotonic totals: router.deliveries (sum_of link.deliveries, across retires) and
 *     router.ticks (written by every thread) never go down between two walks;
 *   - exact totals at the end: every increment made is in the totals, once;
 *   - shards that come and go: a "folder" thread counts into one long-lived object through
 *     a new shard each time and frees it (folding it into the registry) - a walk, which
 *     sums slots with the mutex released, must read that object between what was counted
 *     before it started and what was counted when it ended: never a shard twice (the
 *     freed one and the base it was folded into), never a folded count missed.
 * The retire contract is the one the router uses: each object is retired by its owner, on
 * its own thread, after its last write. */
#include "stats/stats.h"

#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// clang-format off: cmocka.h needs the headers above first
#include <cmocka.h>
// clang-format on

enum {
    WRITERS = 3,    /* counting threads */
    OBJECTS = 1500, /* objects each writer makes over the run */
    LIVE = 40,      /* objects a writer keeps alive at once */
    HB = 4,         /* histogram buckets */
    FILLERS = 500,  /* objects made before "folded" (never written) */
    FOLD_WALKS = 300, /* walks that race the folder thread */
};
enum { L_DELIVERIES, L_INFLIGHT, L_LATENCY }; /* link fields; latency at offset 2 */

static const stats_field_t link_fields[] = {
    {.name = "deliveries", .kind = STATS_COUNTER},
    {.name = "inflight", .kind = STATS_GAUGE},
    {.name = "latency", .kind = STATS_HISTOGRAM, .buckets = HB},
};
static const stats_field_t router_fields[] = {
    {.name = "deliveries", .kind = STATS_COUNTER, .sum_of = "link.deliveries"},
    {.name = "linkCount", .kind = STATS_GAUGE, .count_of = "link"},
    {.name = "ticks", .kind = STATS_COUNTER},
};

typedef struct world {
    stats_registry_t *r;            /* the registry */
    stats_family_t   *link;         /* link family */
    stats_obj_t       router;       /* router singleton */
    atomic_int        writers_left; /* writers still running */
    atomic_int        walks;        /* reader passes done */
    atomic_int        renders;      /* Prometheus renderings done */
    uint64_t          written[WRITERS]; /* per writer: deliveries written (own thread) */
    uint64_t          ticks[WRITERS];   /* per writer: router ticks written */
    stats_obj_t       folded;       /* the folder thread's object */
    atomic_ullong     folds;        /* increments the folder made into it so far */
    atomic_bool       folding;      /* the folder thread runs */
    atomic_int        failed;       /* a thread saw a broken invariant */
    char              why[256];     /* the first one (written by the first to fail) */
} world_t;

/* Record a broken invariant; the main thread reports it (cmocka's fail_msg() must not run
 * off the test's own thread). */
static void fail_in_thread(world_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_in_thread(world_t *w, const char *fmt, ...)
{
    if (atomic_fetch_add(&w->failed, 1) != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->why, sizeof(w->why), fmt, ap);
    va_end(ap);
}

static uint64_t k_of(unsigned n)
{
    return n % 50 + 1;
}

typedef struct writer_arg {
    world_t *w;     /* shared */
    unsigned t;     /* writer index */
} writer_arg_t;

static void *writer_main(void *p)
{
    writer_arg_t *a = p;
    world_t      *w = a->w;
    stats_shard_t *s = stats_shard_new(w->r);
    stats_obj_t    live[LIVE];
    unsigned       nlive = 0, head = 0;
    stats_handle_t tick = stats_obj_stat(w->router, 2);
    char           id[32];
    for (unsigned n = 0; n < OBJECTS; n++) {
        stats_obj_t o;
        snprintf(id, sizeof(id), "w%u.%u", a->t, n);
        const char *labels[] = {id};
        if (stats_object_new(w->r, w->link, labels, &o) != 0)
            abort();
        stats_gauge_add(s, stats_obj_stat(o, L_INFLIGHT), 1);
        for (uint64_t i = 0; i < k_of(n); i++) {
            stats_counter_inc(s, stats_obj_stat(o, L_DELIVERIES));
            stats_hist_record(s, stats_obj_hist(o, L_LATENCY, HB), i);
            stats_counter_inc(s, tick);
        }
        w->written[a->t] += k_of(n);
        w->ticks[a->t] += k_of(n);
        if (nlive == LIVE) {
            /* Retire the oldest, on its owner's thread, after its last write. */
            stats_gauge_add(s, stats_obj_stat(live[head], L_INFLIGHT), -1);
            if (stats_object_retire(w->r, live[head]) != 0)
                abort();
            live[head] = o;
            head = (head + 1) % LIVE;
        } else {
            live[nlive++] = o;
        }
    }
    /* Writer 0 keeps its objects and its shard to the end; the others retire everything
     * and free their shard (folding it into the registry) before the reader is done. */
    if (a->t != 0) {
        for (unsigned i = 0; i < nlive; i++)
            if (stats_object_retire(w->r, live[i]) != 0)
                abort();
        stats_shard_free(w->r, s);
        s = NULL;
    }
    atomic_fetch_sub(&w->writers_left, 1);
    return s; /* writer 0's shard, freed by the test after the checks */
}

/* One shard per increment, freed at once: the registry folds each into its base shard.  It
 * goes on after the writers, until the reader has walked FOLD_WALKS times during its run. */
static void *folder_main(void *p)
{
    world_t *w = p;
    int      walks0 = atomic_load(&w->walks);
    while (atomic_load(&w->writers_left) > 0 || atomic_load(&w->walks) - walks0 < FOLD_WALKS) {
        stats_shard_t *s = stats_shard_new(w->r);
        atomic_fetch_add(&w->folds, 1); /* announced first: a walk never reads more */
        stats_counter_inc(s, stats_obj_stat(w->folded, L_DELIVERIES));
        stats_shard_free(w->r, s);
    }
    atomic_store(&w->folding, false);
    return NULL;
}

static void *reader_main(void *p)
{
    world_t *w = p;
    uint64_t last_total = 0, last_ticks = 0;
    bool     by_field = false;
    while (atomic_load(&w->writers_left) > 0 || atomic_load(&w->folding) ||
           atomic_load(&w->walks) < 3) {
        uint64_t      folds0 = atomic_load(&w->folds);
        stats_iter_t *it =
            stats_iter_new(w->r, NULL, by_field ? STATS_ITER_BY_FIELD : STATS_ITER_ALL);
        const stats_sample_t *s;
        uint64_t              total = 0, ticks = 0, folded = UINT64_MAX;
        while ((s = stats_iter_next(it))) {
            if (s->family == w->link && strcmp(s->labels[0], "folded") == 0) {
                if (s->field == L_DELIVERIES)
                    folded = s->value;
            } else if (s->family == w->link && s->labels[0][0] == 'f') {
                continue; /* a filler */
            } else if (s->family == w->link) {
                unsigned t, n;
                if (sscanf(s->labels[0], "w%u.%u", &t, &n) != 2)
                    abort();
                if (s->field == L_DELIVERIES && s->value > k_of(n))
                    fail_in_thread(w, "%s: %llu deliveries, at most %llu written", s->labels[0],
                             (unsigned long long)s->value, (unsigned long long)k_of(n));
                if (s->field == L_LATENCY && s->value > k_of(n))
                    fail_in_thread(w, "%s: histogram count %llu", s->labels[0],
                             (unsigned long long)s->value);
                if (s->field == L_INFLIGHT && (int64_t)s->value > 1)
                    fail_in_thread(w, "%s: inflight %lld", s->labels[0], (long long)s->value);
            } else if (s->family && strcmp(s->field_name, "deliveries") == 0) {
                total = s->value;
            } else if (s->family && strcmp(s->field_name, "ticks") == 0) {
                ticks = s->value;
            } else if (s->family && strcmp(s->field_name, "linkCount") == 0) {
                /* A writer makes its next object before it retires its oldest. */
                if (s->value > WRITERS * (LIVE + 1) + 1 + FILLERS)
                    fail_in_thread(w, "linkCount %llu", (unsigned long long)s->value);
            }
        }
        stats_iter_free(it);
        uint64_t folds1 = atomic_load(&w->folds);
        if (folded + 1 < folds0 || (folded > folds1 && folded != UINT64_MAX))
            fail_in_thread(w, "folded object read %llu, counted %llu (-1 in flight) before the "
                           "walk and %llu after",
                           (unsigned long long)folded, (unsigned long long)folds0,
                           (unsigned long long)folds1);
        if (folded == UINT64_MAX)
            fail_in_thread(w, "the folded object was not seen");
        if (total < last_total || ticks < last_ticks)
            fail_in_thread(w, "totals went down: %llu -> %llu, ticks %llu -> %llu",
                     (unsigned long long)last_total, (unsigned long long)total,
                     (unsigned long long)last_ticks, (unsigned long long)ticks);
        last_total = total;
        last_ticks = ticks;
        by_field = !by_field;
        atomic_fetch_add(&w->walks, 1);
    }
    return NULL;
}

static int count_bytes(void *ctx, const char *bytes, size_t len)
{
    *(size_t *)ctx += len;
    return 0;
}

static void *prom_main(void *p)
{
    world_t *w = p;
    while (atomic_load(&w->writers_left) > 0) {
        size_t n = 0;
        if (stats_prom_write(w->r, NULL, count_bytes, &n) != 0 || n == 0)
            abort();
        atomic_fetch_add(&w->renders, 1);
        /* A filtered lookup too (stats.get style). */
        stats_handle_t h;
        stats_kind_t   k;
        stats_value_t  v;
        if (stats_lookup(w->r, "router.ticks", &h, &k) != 0 || stats_value_get(w->r, h, &v) != 0)
            abort();
    }
    return NULL;
}

static void test_writers_reader_churn(void **state)
{
    world_t w = {0};
    w.r = stats_registry_new();
    assert_int_equal(stats_family_new(w.r, &(stats_family_def_t){.name = "link",
                                                                 .fields = link_fields,
                                                                 .nfields = 3},
                                      &w.link),
                     0);
    stats_family_t *fr;
    assert_int_equal(stats_family_new(w.r, &(stats_family_def_t){.name = "router",
                                                                 .fields = router_fields,
                                                                 .nfields = 3,
                                                                 .singleton = true},
                                      &fr),
                     0);
    w.router = stats_family_object(fr);
    /* "folded" last of a batch's worth of fillers: summed last, so a shard freed while the
     * batch is summed (with the mutex released) has time to be folded */
    for (unsigned i = 0; i < FILLERS; i++) {
        char        id[16];
        stats_obj_t o;
        snprintf(id, sizeof(id), "f%u", i);
        assert_int_equal(stats_object_new(w.r, w.link, (const char *[]){id}, &o), 0);
    }
    assert_int_equal(stats_object_new(w.r, w.link, (const char *[]){"folded"}, &w.folded), 0);
    atomic_store(&w.writers_left, WRITERS);
    atomic_store(&w.folding, true);

    pthread_t    wt[WRITERS], rt, pt, ft;
    writer_arg_t args[WRITERS];
    assert_int_equal(pthread_create(&rt, NULL, reader_main, &w), 0);
    assert_int_equal(pthread_create(&pt, NULL, prom_main, &w), 0);
    assert_int_equal(pthread_create(&ft, NULL, folder_main, &w), 0);
    for (unsigned t = 0; t < WRITERS; t++) {
        args[t] = (writer_arg_t){&w, t};
        assert_int_equal(pthread_create(&wt[t], NULL, writer_main, &args[t]), 0);
    }
    stats_shard_t *keep = NULL;
    for (unsigned t = 0; t < WRITERS; t++) {
        void *ret;
        pthread_join(wt[t], &ret);
        if (ret)
            keep = ret;
    }
    pthread_join(rt, NULL);
    pthread_join(pt, NULL);
    pthread_join(ft, NULL);
    if (atomic_load(&w.failed))
        fail_msg("%s", w.why);
    assert_non_null(keep);
    assert_true(atomic_load(&w.walks) >= 3);
    print_message("%d walks and %d renderings raced %d writers x %d objects and %llu shards"
                  " folded\n",
                  atomic_load(&w.walks), atomic_load(&w.renders), WRITERS, OBJECTS,
                  (unsigned long long)atomic_load(&w.folds));

    uint64_t want = 0, want_ticks = 0;
    for (unsigned t = 0; t < WRITERS; t++) {
        want += w.written[t];
        want_ticks += w.ticks[t];
    }
    uint64_t tot[3];
    assert_int_equal(stats_family_totals(w.r, fr, tot), 0);
    assert_int_equal(tot[0], want + atomic_load(&w.folds));
    assert_int_equal(tot[1], LIVE + 1 + FILLERS); /* writer 0's objects, "folded", fillers */
    assert_int_equal(tot[2], want_ticks);
    uint64_t lt[3];
    assert_int_equal(stats_family_totals(w.r, w.link, lt), 0);
    assert_int_equal(lt[L_DELIVERIES], want + atomic_load(&w.folds));
    assert_int_equal(lt[L_LATENCY], want);   /* histogram counts */
    assert_int_equal(lt[L_INFLIGHT], LIVE);  /* writer 0's live objects: +1 each */
    stats_shard_free(w.r, keep);
    assert_int_equal(stats_family_totals(w.r, fr, tot), 0);
    assert_int_equal(tot[0], want + atomic_load(&w.folds)); /* the freed shard's counts stay */
    stats_info_t info;
    stats_registry_info(w.r, &info);
    assert_int_equal(info.objects, LIVE + 2 + FILLERS); /* + "folded", fillers, router */
    stats_registry_free(w.r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_writers_reader_churn),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
