/* tests/bench/stats/stats_bench.c: `scripts/bench stats` - Apache Traffic Server's TS-157
 * experiment (2010) reproduced against Junction's stats/, plus the figures issue 4 sets
 * targets for.
 *
 * TS-157: N registered stats, 1,000 "requests" spread over the worker threads, each request
 * incrementing every stat once.  Variants:
 *   (a) one global hash map keyed by name, under a mutex (TS-157's 29.5 s design);
 *   (b) one hash map keyed by name per thread, no lock (TS-157's per-thread hash_map);
 *   (c) Junction: stats_counter_add(own shard, handle, 1);
 *   (d) the floor: a plain per-thread array, `a[h.id] += 1` with the same handles.
 * Then: time to register 1M stats (as 40,000 objects of a 25-field family, and as 1M plain
 * named stats), time to snapshot 1M stats over 2, 3 and 8 shards (and to render them as
 * Prometheus text), a writer's increment cost alone and during back-to-back snapshots, and
 * bytes per stat per shard.  Last, the core thread during scrapes: a thread creating an
 * object, counting into it and retiring it every 20 µs (what the router's core does when
 * links come and go) while 1M stats are scraped back to back, its operation times with and
 * without the scrapes (see stall_figures).
 *
 * Method: every figure runs --repeat times (default 3); the best is reported with the range
 * (the machine is shared: the best is the least disturbed).  A variant runs as many
 * requests as it takes to do at least a floor of increments (short runs cannot be timed)
 * and at most a ceiling (the global mutex would take minutes at 1M stats); the time is then
 * scaled to 1,000 requests and the requests actually run are printed.  "CPU ns/inc" is the
 * counting threads' own CPU time over the increments done (honest with 8 threads on 2 cores;
 * a thread asleep on the mutex uses none); "ms" is wall time per 1,000 requests from the
 * first thread's start to the last one's end, as TS-157 reported.  Junction and the array
 * are compared on CPU time (both are CPU-bound, and wall time on a shared machine counts
 * other processes' slices too); the mutex map on wall time (it blocks).
 *
 * Single process, no daemon; threads are plain pthreads with their own shard each.
 */
#include "stats/stats.h"

#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define FIELDS 25 /* stats per object in the family used for (c) and registration */

/* ---- command line ---- */

static unsigned g_requests = 1000;  /* requests per run, TS-157's figure */
static unsigned g_repeat = 3;       /* runs per figure */
static size_t   g_sizes[8] = {225, 2500, 100000, 1000000};
static unsigned g_nsizes = 4;
static unsigned g_threads[8] = {2, 8};
static unsigned g_nthreads = 2;

static double now_s(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- (a), (b): an open-addressing hash map keyed by name ---- */

typedef struct hslot {
    const char *key;   /* borrowed name; NULL = empty */
    uint64_t    hash;  /* FNV-1a of key */
    uint64_t    count; /* the stat */
} hslot_t;

typedef struct hmap {
    hslot_t *slots; /* power-of-two table */
    size_t   mask;  /* size - 1 */
} hmap_t;

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 14695981039346656037ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

static void hmap_init(hmap_t *m, char **names, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    m->slots = calloc(cap, sizeof(*m->slots));
    m->mask = cap - 1;
    for (size_t i = 0; i < n; i++) {
        uint64_t h = fnv1a(names[i]);
        size_t   j = h & m->mask;
        while (m->slots[j].key)
            j = (j + 1) & m->mask;
        m->slots[j].key = names[i];
        m->slots[j].hash = h;
    }
}

static inline void hmap_inc(hmap_t *m, const char *name)
{
    uint64_t h = fnv1a(name);
    for (size_t j = h & m->mask;; j = (j + 1) & m->mask) {
        hslot_t *s = &m->slots[j];
        if (s->hash == h && strcmp(s->key, name) == 0) {
            s->count++;
            return;
        }
    }
}

static uint64_t hmap_sum(const hmap_t *m)
{
    uint64_t v = 0;
    for (size_t j = 0; j <= m->mask; j++)
        v += m->slots[j].count;
    return v;
}

/* ---- the TS-157 runs ---- */

enum { V_GLOBAL, V_PERTHREAD, V_JUNCTION, V_ARRAY, V_COUNT };
static const char *const vnames[V_COUNT] = {
    "(a) global hash map + mutex",
    "(b) per-thread hash maps",
    "(c) junction stats (handles)",
    "(d) plain per-thread array",
};
/* Increments a run must do at least (to be timeable) and at most (to end this year). */
static const double vmin[V_COUNT] = {1e6, 1e7, 2e8, 2e8};
static const double vmax[V_COUNT] = {4e6, 4e7, 2e9, 2e9};

typedef struct world {
    size_t            n;        /* stats */
    char            **names;    /* (a), (b): names */
    hmap_t            global;   /* (a) */
    pthread_mutex_t   lock;     /* (a) */
    stats_registry_t *reg;      /* (c) */
    stats_handle_t   *handles;  /* (c), (d): one per stat */
    uint32_t          maxid;    /* (d): array size */
    pthread_barrier_t start;    /* all threads start together */
} world_t;

typedef struct job {
    world_t      *w;        /* shared */
    int           variant;  /* V_* */
    unsigned      requests; /* this thread's */
    uint64_t      check;    /* increments this thread's structure holds afterwards */
    stats_shard_t *shard;   /* (c): this thread's, freed by the caller */
    double        t_start;  /* monotonic clock when this thread started counting */
    double        t_end;    /* ... and when it was done */
    double        cpu;      /* this thread's CPU seconds while counting */
} job_t;

/* The measured loops, kept out of line so the disassembly can be read per variant. */
__attribute__((noinline)) static void loop_junction(stats_shard_t *s, const stats_handle_t *h,
                                                    size_t n, unsigned requests)
{
    for (unsigned r = 0; r < requests; r++)
        for (size_t i = 0; i < n; i++)
            stats_counter_add(s, h[i], 1);
}

__attribute__((noinline)) static void loop_array(uint64_t *a, const stats_handle_t *h, size_t n,
                                                 unsigned requests)
{
    for (unsigned r = 0; r < requests; r++)
        for (size_t i = 0; i < n; i++)
            a[h[i].id] += 1;
}

static void *job_main(void *p)
{
    job_t   *j = p;
    world_t *w = j->w;
    hmap_t   mine = {0};
    uint64_t *arr = NULL;
    if (j->variant == V_PERTHREAD)
        hmap_init(&mine, w->names, w->n);
    if (j->variant == V_JUNCTION)
        j->shard = stats_shard_new(w->reg);
    if (j->variant == V_ARRAY) {
        /* Page-aligned and zero-filled by the kernel, like a shard's slots, so that the two
         * differ only in how they are written (these loops are sensitive to how the counter
         * array's address lines up with the handle array's: 4K aliasing). */
        arr = mmap(NULL, (size_t)w->maxid * 8, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (arr == MAP_FAILED)
            abort();
    }
    pthread_barrier_wait(&w->start);
    /* Each thread times itself: the main thread may not run for a while after the barrier
     * (8 threads on 2 CPUs), so its clock would miss work already done. */
    j->t_start = now_s(CLOCK_MONOTONIC);
    double c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
    switch (j->variant) {
    case V_GLOBAL:
        for (unsigned r = 0; r < j->requests; r++)
            for (size_t i = 0; i < w->n; i++) {
                pthread_mutex_lock(&w->lock);
                hmap_inc(&w->global, w->names[i]);
                pthread_mutex_unlock(&w->lock);
            }
        break;
    case V_PERTHREAD:
        for (unsigned r = 0; r < j->requests; r++)
            for (size_t i = 0; i < w->n; i++)
                hmap_inc(&mine, w->names[i]);
        break;
    case V_JUNCTION:
        loop_junction(j->shard, w->handles, w->n, j->requests);
        break;
    case V_ARRAY:
        loop_array(arr, w->handles, w->n, j->requests);
        break;
    }
    j->cpu = now_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    j->t_end = now_s(CLOCK_MONOTONIC);
    if (j->variant == V_PERTHREAD) {
        j->check = hmap_sum(&mine);
        free(mine.slots);
    }
    if (j->variant == V_ARRAY) {
        for (uint32_t i = 0; i < w->maxid; i++)
            j->check += arr[i];
        munmap(arr, (size_t)w->maxid * 8);
    }
    return NULL;
}

/* Register n stats in w->reg: objects of the 25-field family, the rest as plain stats. */
static void register_stats(stats_registry_t *reg, size_t n, stats_handle_t *handles)
{
    static stats_field_t fields[FIELDS];
    static char          fnames[FIELDS][16];
    for (unsigned i = 0; i < FIELDS; i++) {
        snprintf(fnames[i], sizeof(fnames[i]), "stat%02u", i);
        fields[i] = (stats_field_t){.name = fnames[i], .kind = STATS_COUNTER};
    }
    stats_family_t          *f;
    const stats_family_def_t def = {.name = "plugin", .fields = fields, .nfields = FIELDS};
    if (stats_family_new(reg, &def, &f) != 0)
        abort();
    char   id[32];
    size_t k = 0;
    for (size_t o = 0; o < n / FIELDS; o++) {
        stats_obj_t obj;
        snprintf(id, sizeof(id), "%zu", o);
        const char *labels[] = {id};
        if (stats_object_new(reg, f, labels, &obj) != 0)
            abort();
        for (unsigned i = 0; i < FIELDS; i++)
            handles[k++] = stats_obj_stat(obj, i);
    }
    for (; k < n; k++) {
        snprintf(id, sizeof(id), "extra%zu", k);
        if (stats_stat_new(reg, id, STATS_COUNTER, NULL, NULL, &handles[k], NULL) != 0)
            abort();
    }
}

typedef struct figure {
    double best;  /* lowest */
    double worst; /* highest */
} figure_t;

static void figure_add(figure_t *f, double v, unsigned i)
{
    if (i == 0 || v < f->best)
        f->best = v;
    if (i == 0 || v > f->worst)
        f->worst = v;
}

/* One variant at n stats over t threads, g_repeat times.  ms is per 1000 requests (wall),
 * cpu_ns per increment. */
static void run_variant(world_t *w, int v, unsigned t, figure_t *ms, figure_t *cpu_ns,
                        unsigned *ran)
{
    double want = (double)g_requests * (double)w->n;
    double incs = want < vmin[v] ? vmin[v] : want > vmax[v] ? vmax[v] : want;
    unsigned req = (unsigned)(incs / (double)w->n + 0.5);
    if (req < t)
        req = t;
    req = (req + t - 1) / t * t; /* the same share for every thread */
    *ran = req;
    for (unsigned rep = 0; rep < g_repeat; rep++) {
        job_t     jobs[64];
        pthread_t th[64];
        pthread_barrier_init(&w->start, NULL, t + 1);
        if (v == V_GLOBAL) { /* a fresh table: the check below counts this run only */
            free(w->global.slots);
            hmap_init(&w->global, w->names, w->n);
        }
        for (unsigned i = 0; i < t; i++) {
            jobs[i] = (job_t){.w = w, .variant = v, .requests = req / t};
            pthread_create(&th[i], NULL, job_main, &jobs[i]);
        }
        pthread_barrier_wait(&w->start);
        uint64_t total = 0;
        for (unsigned i = 0; i < t; i++)
            pthread_join(th[i], NULL);
        pthread_barrier_destroy(&w->start);
        /* Wall: first start to last end; CPU: the counting threads' own CPU time. */
        double t0 = jobs[0].t_start, t1 = jobs[0].t_end, cpu = 0;
        for (unsigned i = 0; i < t; i++) {
            t0 = jobs[i].t_start < t0 ? jobs[i].t_start : t0;
            t1 = jobs[i].t_end > t1 ? jobs[i].t_end : t1;
            cpu += jobs[i].cpu;
        }
        /* Check that every increment landed, once. */
        if (v == V_GLOBAL) {
            total = hmap_sum(&w->global);
        } else if (v == V_JUNCTION) {
            stats_iter_t         *it = stats_iter_new(w->reg, NULL, 0);
            const stats_sample_t *s;
            uint64_t              before = 0;
            while ((s = stats_iter_next(it)))
                before += s->value;
            stats_iter_free(it);
            for (unsigned i = 0; i < t; i++)
                stats_shard_free(w->reg, jobs[i].shard); /* folds into the registry */
            total = before; /* this run's shards + what earlier runs' freed shards left */
        } else {
            for (unsigned i = 0; i < t; i++)
                total += jobs[i].check;
        }
        uint64_t expect = (uint64_t)req * w->n;
        if (v == V_JUNCTION) {
            static uint64_t base_total; /* folded by earlier runs at this n */
            if (rep == 0)
                base_total = 0;
            expect += base_total;
            base_total = expect;
        }
        if (total != expect) {
            fprintf(stderr, "stats-bench: %s lost increments: %llu, expected %llu\n", vnames[v],
                    (unsigned long long)total, (unsigned long long)expect);
            exit(1);
        }
        figure_add(ms, (t1 - t0) * 1e3 * g_requests / req, rep);
        figure_add(cpu_ns, cpu * 1e9 / ((double)req * (double)w->n), rep);
    }
}

typedef struct result {
    figure_t ms[V_COUNT];  /* per variant */
    figure_t ns[V_COUNT];  /* per variant */
    unsigned ran[V_COUNT]; /* requests run */
} result_t;

static void ts157(unsigned t, size_t n, result_t *res)
{
    world_t w = {.n = n};
    w.names = malloc(n * sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        char buf[48];
        snprintf(buf, sizeof(buf), "plugin.stat.%07zu", i);
        w.names[i] = strdup(buf);
    }
    hmap_init(&w.global, w.names, n);
    pthread_mutex_init(&w.lock, NULL);
    w.reg = stats_registry_new();
    w.handles = malloc(n * sizeof(*w.handles));
    register_stats(w.reg, n, w.handles);
    for (size_t i = 0; i < n; i++)
        if (w.handles[i].id >= w.maxid)
            w.maxid = w.handles[i].id + 1;
    for (int v = 0; v < V_COUNT; v++)
        run_variant(&w, v, t, &res->ms[v], &res->ns[v], &res->ran[v]);
    stats_registry_free(w.reg);
    free(w.handles);
    free(w.global.slots);
    for (size_t i = 0; i < n; i++)
        free(w.names[i]);
    free(w.names);
    pthread_mutex_destroy(&w.lock);
}

/* ---- registration, snapshot, memory ---- */

/* Resident memory of the process, from /proc/self/statm. */
static size_t rss_bytes(void)
{
    unsigned long size = 0, resident = 0;
    FILE         *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static int null_sink(void *ctx, const char *bytes, size_t len)
{
    *(size_t *)ctx += len;
    return 0;
}

typedef struct writer {
    stats_registry_t     *reg;     /* shared */
    const stats_handle_t *h;       /* handles */
    size_t                n;       /* stats */
    volatile int          stop;    /* set by main */
    double                ns;      /* measured ns per increment */
    pthread_barrier_t     go;      /* start together */
} writer_t;

static void *writer_main(void *p)
{
    writer_t      *wr = p;
    stats_shard_t *s = stats_shard_new(wr->reg);
    unsigned       passes = 0;
    pthread_barrier_wait(&wr->go);
    double c0 = now_s(CLOCK_THREAD_CPUTIME_ID);
    while (!wr->stop) {
        loop_junction(s, wr->h, wr->n, 1);
        passes++;
    }
    double c1 = now_s(CLOCK_THREAD_CPUTIME_ID);
    wr->ns = (c1 - c0) * 1e9 / ((double)passes * (double)wr->n);
    stats_shard_free(wr->reg, s);
    return NULL;
}

/* Writer's ns/inc over 1M stats for `secs`, alone or with main snapshotting back to back. */
static double writer_ns(stats_registry_t *reg, const stats_handle_t *h, size_t n, bool snapshot,
                        unsigned *snaps)
{
    writer_t  wr = {.reg = reg, .h = h, .n = n};
    pthread_t th;
    pthread_barrier_init(&wr.go, NULL, 2);
    pthread_create(&th, NULL, writer_main, &wr);
    pthread_barrier_wait(&wr.go);
    double t0 = now_s(CLOCK_MONOTONIC);
    *snaps = 0;
    while (now_s(CLOCK_MONOTONIC) - t0 < 1.5) {
        if (snapshot) {
            stats_iter_t         *it = stats_iter_new(reg, NULL, 0);
            const stats_sample_t *s;
            uint64_t              sum = 0;
            while ((s = stats_iter_next(it)))
                sum += s->value;
            stats_iter_free(it);
            if (sum == 0) /* the writer has been counting: never 0 */
                abort();
            (*snaps)++;
        } else {
            usleep(10000);
        }
    }
    wr.stop = 1;
    pthread_join(th, NULL);
    pthread_barrier_destroy(&wr.go);
    return wr.ns;
}

static void big_figures(void)
{
    const size_t n = 1000000;
    printf("\n== 1,000,000 stats ==\n");
    figure_t reg_obj = {0}, reg_plain = {0};
    double   mem_delta = 0;
    stats_info_t info = {0};
    for (unsigned rep = 0; rep < g_repeat; rep++) {
        stats_handle_t   *h = malloc(n * sizeof(*h));
        memset(h, 0, n * sizeof(*h));
        malloc_trim(0);
        size_t            rss0 = rss_bytes();
        stats_registry_t *reg = stats_registry_new();
        stats_shard_t    *s1 = stats_shard_new(reg), *s2 = stats_shard_new(reg);
        double            t0 = now_s(CLOCK_MONOTONIC);
        register_stats(reg, n, h);
        figure_add(&reg_obj, (now_s(CLOCK_MONOTONIC) - t0) * 1e3, rep);
        loop_junction(s1, h, n, 1); /* every stat written once in each shard */
        loop_junction(s2, h, n, 1);
        mem_delta = (double)(rss_bytes() - rss0);
        stats_registry_info(reg, &info);
        stats_shard_free(reg, s1);
        stats_shard_free(reg, s2);
        stats_registry_free(reg);

        reg = stats_registry_new();
        s1 = stats_shard_new(reg);
        s2 = stats_shard_new(reg);
        char name[48];
        t0 = now_s(CLOCK_MONOTONIC);
        for (size_t i = 0; i < n; i++) {
            snprintf(name, sizeof(name), "plugin_stat_%07zu", i);
            if (stats_stat_new(reg, name, STATS_COUNTER, NULL, NULL, &h[i], NULL) != 0)
                abort();
        }
        figure_add(&reg_plain, (now_s(CLOCK_MONOTONIC) - t0) * 1e3, rep);
        stats_shard_free(reg, s1);
        stats_shard_free(reg, s2);
        stats_registry_free(reg);
        free(h);
    }
    printf("register 1M stats as 40,000 objects x 25 fields (2 shards live): %7.1f ms"
           " (range %.1f-%.1f)   target < 2000 ms: %s\n",
           reg_obj.best, reg_obj.best, reg_obj.worst, reg_obj.best < 2000 ? "met" : "NOT met");
    printf("register 1M plain named stats, one by one (2 shards live):      %7.1f ms"
           " (range %.1f-%.1f)   target < 2000 ms: %s\n",
           reg_plain.best, reg_plain.best, reg_plain.worst,
           reg_plain.best < 2000 ? "met" : "NOT met");

    /* Memory: the registry's own accounting, and the heap's view. */
    double per_shard = (double)info.shard_bytes / (double)info.stats;
    double shared = (double)info.registry_bytes / (double)info.stats;
    double names = (double)info.name_bytes / (double)info.stats;
    printf("memory per stat (the registry's accounting): %.2f B in each shard (the 8 B slot,"
           " committed in steps of %u ids),\n  %.2f B shared by all shards (generation 4 B +"
           " owner 4 B + object record, hash and position), %.2f B of names\n",
           per_shard, STATS_COMMIT_SLOTS, shared, names);
    for (unsigned w = 1; w <= 8; w *= 2)
        printf("  with %u shard%s: %.2f B per stat per shard beyond names   target <= 32: %s\n",
               w, w > 1 ? "s" : " ", per_shard + shared / w,
               per_shard + shared / w <= 32 ? "met" : "NOT met");
    printf("  resident check (RSS growth: registry + 2 shards with every stat written, names and"
           " malloc overhead included):\n  %.2f B per stat = %.2f B per stat per shard"
           "   target <= 32: %s\n",
           mem_delta / (double)n, mem_delta / (2.0 * (double)n),
           mem_delta / (2.0 * (double)n) <= 32 ? "met" : "NOT met");

    /* Snapshots over 2, 3, 8 shards. */
    stats_handle_t   *h = malloc(n * sizeof(*h));
    stats_registry_t *reg = stats_registry_new();
    register_stats(reg, n, h);
    stats_shard_t *shards[8];
    unsigned       nsh = 0;
    unsigned       counts[] = {2, 3, 8};
    for (unsigned c = 0; c < 3; c++) {
        while (nsh < counts[c]) {
            shards[nsh] = stats_shard_new(reg);
            loop_junction(shards[nsh], h, n, 1); /* every page touched */
            nsh++;
        }
        figure_t walk = {0}, byfield = {0}, prom = {0};
        size_t   bytes = 0;
        for (unsigned rep = 0; rep < g_repeat; rep++) {
            double t0 = now_s(CLOCK_MONOTONIC);
            stats_iter_t         *it = stats_iter_new(reg, NULL, 0);
            const stats_sample_t *s;
            uint64_t              sum = 0, cnt = 0;
            while ((s = stats_iter_next(it))) {
                sum += s->value;
                cnt++;
            }
            stats_iter_free(it);
            figure_add(&walk, (now_s(CLOCK_MONOTONIC) - t0) * 1e3, rep);
            if (cnt != n || sum != (uint64_t)n * nsh) {
                fprintf(stderr, "stats-bench: snapshot saw %llu stats summing to %llu\n",
                        (unsigned long long)cnt, (unsigned long long)sum);
                exit(1);
            }
            t0 = now_s(CLOCK_MONOTONIC);
            it = stats_iter_new(reg, NULL, STATS_ITER_BY_FIELD);
            while ((s = stats_iter_next(it)))
                sum += s->value;
            stats_iter_free(it);
            figure_add(&byfield, (now_s(CLOCK_MONOTONIC) - t0) * 1e3, rep);
            bytes = 0;
            t0 = now_s(CLOCK_MONOTONIC);
            stats_prom_write(reg, NULL, null_sink, &bytes);
            figure_add(&prom, (now_s(CLOCK_MONOTONIC) - t0) * 1e3, rep);
        }
        printf("snapshot 1M stats over %u shards: %6.1f ms (range %.1f-%.1f), %.1f ns/stat"
               "   target < 50 ms: %s\n",
               nsh, walk.best, walk.best, walk.worst, walk.best * 1e6 / (double)n,
               walk.best < 50 ? "met" : "NOT met");
        printf("  field by field (Prometheus order): %6.1f ms (range %.1f-%.1f);"
               " Prometheus text: %.1f ms (range %.1f-%.1f), %.1f ns/stat, %.1f MB\n",
               byfield.best, byfield.best, byfield.worst, prom.best, prom.best, prom.worst,
               prom.best * 1e6 / (double)n, (double)bytes / 1e6);
    }
    for (unsigned i = 0; i < nsh; i++)
        stats_shard_free(reg, shards[i]);

    /* Writers are never blocked by readers: one writer over its own 1M-stat shard. */
    unsigned snaps;
    figure_t alone = {0}, during = {0};
    unsigned total_snaps = 0;
    for (unsigned rep = 0; rep < g_repeat; rep++) {
        figure_add(&alone, writer_ns(reg, h, n, false, &snaps), rep);
        figure_add(&during, writer_ns(reg, h, n, true, &snaps), rep);
        total_snaps += snaps;
    }
    printf("writer over 1M stats: %.2f ns/inc alone (range %.2f-%.2f), %.2f ns/inc during"
           " back-to-back snapshots (range %.2f-%.2f; %u snapshots)\n",
           alone.best, alone.best, alone.worst, during.best, during.best, during.worst,
           total_snaps);
    stats_registry_free(reg);
    free(h);
}

/* ---- the core thread never waits for a reader ----
 *
 * The router's core thread (and each worker) takes the registry's mutex to create and retire
 * objects (an address, a link, a connection); a reader (a /metrics scrape, a management
 * snapshot, the console's subscriptions) takes it too.  Here a "core" thread does what the
 * core does - create an object, count into it, retire it - once every CORE_PERIOD_US, busy
 * between operations as a loaded core is, and times every operation; the main thread reads
 * 1M live stats over 3 shards back to back (a Prometheus scrape, then an object-by-object
 * snapshot walk).  Reported: the core's operation times without readers and during the
 * readers (p50, p99, p99.9, the longest: the longest is the stall).  The machine is shared,
 * and an operation the kernel preempted (the thread's involuntary context switches went up
 * during it) measures the scheduler, not the registry: those are counted apart, and the
 * figures are given both for every operation and for those not preempted; "slept" counts
 * operations that went to sleep (voluntary switches: the mutex's futex). */

#define CORE_PERIOD_US 20 /* one create + count + retire every 20 µs: 50,000 a second */

typedef struct corejob {
    stats_registry_t *reg;      /* shared */
    stats_family_t   *fam;      /* the churned family */
    volatile int      phase;    /* 0 warm-up, 1 measure quiet, 2 measure during reads, 3 stop */
    uint32_t         *lat[3];   /* per phase: operation times (ns), at most LAT_MAX */
    size_t            nlat[3];  /* samples */
    uint32_t         *clean[3]; /* per phase: times of the operations not preempted */
    size_t            nclean[3]; /* samples */
    size_t            slept[3]; /* operations that slept (voluntary context switch) */
} corejob_t;

#define LAT_MAX (1u << 22)

/* This thread's voluntary and involuntary context switches so far. */
static void ctxsw(long *vol, long *invol)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    *vol = ru.ru_nvcsw;
    *invol = ru.ru_nivcsw;
}

static void *core_main(void *p)
{
    corejob_t     *cj = p;
    stats_shard_t *s = stats_shard_new(cj->reg);
    char           id[32];
    uint64_t       k = 0;
    double         next = now_s(CLOCK_MONOTONIC);
    int            ph;
    while ((ph = cj->phase) != 3) {
        double t = now_s(CLOCK_MONOTONIC);
        if (t < next)
            continue; /* busy, as a loaded core thread */
        next += CORE_PERIOD_US * 1e-6;
        if (next < t)
            next = t; /* fell behind (a reader, or the OS): no catch-up burst */
        snprintf(id, sizeof(id), "churn%llu", (unsigned long long)k++);
        const char *labels[] = {id};
        stats_obj_t o;
        long        v0, i0, v1, i1;
        ctxsw(&v0, &i0);
        double t0 = now_s(CLOCK_MONOTONIC);
        if (stats_object_new(cj->reg, cj->fam, labels, &o) != 0)
            abort();
        for (unsigned i = 0; i < FIELDS; i++)
            stats_counter_inc(s, stats_obj_stat(o, i));
        stats_object_retire(cj->reg, o);
        double ns = (now_s(CLOCK_MONOTONIC) - t0) * 1e9;
        ctxsw(&v1, &i1);
        uint32_t v = ns > 4e9 ? UINT32_MAX : (uint32_t)ns;
        if (cj->nlat[ph] < LAT_MAX)
            cj->lat[ph][cj->nlat[ph]++] = v;
        if (i1 == i0 && cj->nclean[ph] < LAT_MAX)
            cj->clean[ph][cj->nclean[ph]++] = v;
        if (v1 != v0)
            cj->slept[ph]++;
    }
    stats_shard_free(cj->reg, s);
    return NULL;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static void lat_print(const char *what, uint32_t *v, size_t n)
{
    if (n == 0) {
        printf("    %-22s no operations\n", what);
        return;
    }
    qsort(v, n, sizeof(*v), cmp_u32);
    printf("    %-22s %7zu ops  p50 %5.1f µs  p99 %6.1f µs  p99.9 %7.1f µs  longest %8.1f µs\n",
           what, n, v[n / 2] / 1e3, v[(size_t)(n * 0.99)] / 1e3, v[(size_t)(n * 0.999)] / 1e3,
           v[n - 1] / 1e3);
}

static void phase_print(const char *what, corejob_t *cj, int ph)
{
    printf("  %s (%zu preempted, %zu slept):\n", what, cj->nlat[ph] - cj->nclean[ph],
           cj->slept[ph]);
    lat_print("every op", cj->lat[ph], cj->nlat[ph]);
    lat_print("ops not preempted", cj->clean[ph], cj->nclean[ph]);
}

static void stall_figures(void)
{
    const size_t n = 1000000;
    printf("\n== the core thread during a scrape of 1,000,000 stats ==\n");
    stats_handle_t   *h = malloc(n * sizeof(*h));
    stats_registry_t *reg = stats_registry_new();
    register_stats(reg, n, h);
    stats_shard_t *w1 = stats_shard_new(reg), *w2 = stats_shard_new(reg);
    loop_junction(w1, h, n, 1); /* every page of two "workers" touched */
    loop_junction(w2, h, n, 1);
    static stats_field_t cf[FIELDS];
    static char          cn[FIELDS][16];
    for (unsigned i = 0; i < FIELDS; i++) {
        snprintf(cn[i], sizeof(cn[i]), "c%02u", i);
        cf[i] = (stats_field_t){.name = cn[i], .kind = STATS_COUNTER};
    }
    stats_family_t *churn;
    if (stats_family_new(reg, &(stats_family_def_t){.name = "churn", .fields = cf,
                                                    .nfields = FIELDS},
                         &churn) != 0)
        abort();
    for (unsigned rep = 0; rep < g_repeat; rep++) {
        corejob_t cj = {.reg = reg, .fam = churn};
        for (int i = 0; i < 3; i++) {
            cj.lat[i] = malloc(LAT_MAX * sizeof(uint32_t));
            cj.clean[i] = malloc(LAT_MAX * sizeof(uint32_t));
        }
        pthread_t th;
        pthread_create(&th, NULL, core_main, &cj);
        usleep(200000);
        cj.phase = 1;
        usleep(1500000);
        cj.phase = 2;
        double   t0 = now_s(CLOCK_MONOTONIC), prom_ms = 0, walk_ms = 0;
        unsigned scrapes = 0, walks = 0;
        size_t   bytes = 0;
        while (now_s(CLOCK_MONOTONIC) - t0 < 3.0) {
            double a = now_s(CLOCK_MONOTONIC);
            bytes = 0;
            stats_prom_write(reg, NULL, null_sink, &bytes);
            double b = now_s(CLOCK_MONOTONIC);
            stats_iter_t         *it = stats_iter_new(reg, NULL, 0);
            const stats_sample_t *smp;
            uint64_t              cnt = 0;
            while ((smp = stats_iter_next(it)))
                cnt++;
            stats_iter_free(it);
            double c = now_s(CLOCK_MONOTONIC);
            if (cnt < n)
                abort();
            prom_ms += (b - a) * 1e3;
            walk_ms += (c - b) * 1e3;
            scrapes++;
            walks++;
        }
        cj.phase = 3;
        pthread_join(th, NULL);
        printf("run %u: %u Prometheus scrapes (%.1f MB, %.0f ms each) and %u snapshot walks"
               " (%.0f ms each) back to back\n",
               rep + 1, scrapes, (double)bytes / 1e6, prom_ms / scrapes, walks, walk_ms / walks);
        phase_print("core op (create, 25 increments, retire), no reader", &cj, 1);
        phase_print("core op during the reads", &cj, 2);
        for (int i = 0; i < 3; i++) {
            free(cj.lat[i]);
            free(cj.clean[i]);
        }
    }
    stats_shard_free(reg, w1);
    stats_shard_free(reg, w2);
    stats_registry_free(reg);
    free(h);
}

/* Milliseconds with 3-4 significant digits. */
static void fmt_ms(char *buf, size_t cap, double v)
{
    snprintf(buf, cap, v >= 100 ? "%.0f" : v >= 10 ? "%.1f" : v >= 1 ? "%.2f" : "%.3f", v);
}

static int parse_list(const char *s, size_t *out, unsigned max)
{
    unsigned n = 0;
    char    *end;
    while (*s && n < max) {
        out[n++] = strtoull(s, &end, 10);
        if (end == s || out[n - 1] == 0)
            return -1;
        s = *end == ',' ? end + 1 : end;
    }
    return *s ? -1 : (int)n;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: stats-bench [--stats N,N,...] [--threads T,T,...] [--requests R]"
               " [--repeat K] [--quick] [--no-big|--big-only|--stall-only]\n"
               "  TS-157: R requests (default 1000) over T threads (default 2,8), each incrementing\n"
               "  every one of N stats (default 225,2500,100000,1000000); then 1M-stat figures.\n"
               "  --quick: 225,2500 stats, 2 threads, 1 repeat; --no-big: skip the 1M figures;\n"
               "  --big-only: only the 1M figures; --stall-only: only the core thread's operation\n"
               "  times during scrapes of 1M stats.\n");
}

int main(int argc, char **argv)
{
    bool big = true, stall = true;
    setvbuf(stdout, NULL, _IOLBF, 0); /* progress shows when piped */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        size_t      tmp[8];
        int         n;
        if (strcmp(a, "--stats") == 0 && v && (n = parse_list(v, g_sizes, 8)) > 0) {
            g_nsizes = (unsigned)n;
            i++;
        } else if (strcmp(a, "--threads") == 0 && v && (n = parse_list(v, tmp, 8)) > 0) {
            g_nthreads = (unsigned)n;
            for (int k = 0; k < n; k++)
                g_threads[k] = tmp[k] > 64 ? 64 : (unsigned)tmp[k];
            i++;
        } else if (strcmp(a, "--requests") == 0 && v && atoi(v) > 0) {
            g_requests = (unsigned)atoi(v);
            i++;
        } else if (strcmp(a, "--repeat") == 0 && v && atoi(v) > 0) {
            g_repeat = (unsigned)atoi(v);
            i++;
        } else if (strcmp(a, "--quick") == 0) {
            g_nsizes = 2;
            g_nthreads = 1;
            g_repeat = 1;
            big = false;
            stall = false;
        } else if (strcmp(a, "--no-big") == 0) {
            big = false;
            stall = false;
        } else if (strcmp(a, "--big-only") == 0) {
            g_nthreads = 0;
        } else if (strcmp(a, "--stall-only") == 0) {
            g_nthreads = 0;
            big = false;
            stall = true;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    printf("TS-157 reproduced: %u requests spread over the threads, each incrementing every stat"
           " once;\nbest of %u runs (range); %ld CPUs.  ms = wall time per %u requests;"
           " CPU ns/inc = the counting threads' CPU time / increments.\n",
           g_requests, g_repeat, sysconf(_SC_NPROCESSORS_ONLN), g_requests);
#ifndef NDEBUG
    printf("WARNING: built without NDEBUG: every increment also runs the debug generation"
           " check.  Use a release build (scripts/bench stats does).\n");
#endif
    for (unsigned ti = 0; ti < g_nthreads; ti++) {
        unsigned t = g_threads[ti];
        printf("\n== %u threads ==\n", t);
        printf("%9s  %-30s %21s %15s %9s\n", "stats", "variant", "ms (range)",
               "CPU ns/inc", "requests");
        for (unsigned si = 0; si < g_nsizes; si++) {
            size_t   n = g_sizes[si];
            result_t res;
            ts157(t, n, &res);
            for (int v = 0; v < V_COUNT; v++) {
                char ms[80], lo[24], hi[24];
                fmt_ms(lo, sizeof(lo), res.ms[v].best);
                fmt_ms(hi, sizeof(hi), res.ms[v].worst);
                snprintf(ms, sizeof(ms), "%s (%s-%s)", lo, lo, hi);
                printf("%9zu  %-30s %21s %15.2f %9u%s\n", n, vnames[v], ms, res.ns[v].best,
                       res.ran[v], res.ran[v] != g_requests ? " (scaled)" : "");
            }
            /* Junction vs the array: both loops are CPU-bound and never block, so CPU time per
             * increment is the fair measure (wall time on a shared machine also counts other
             * processes' time slices); the mutex map blocks, so it is compared on wall time,
             * as TS-157 did. */
            double vs_array = res.ns[V_JUNCTION].best / res.ns[V_ARRAY].best;
            double vs_array_wall = res.ms[V_JUNCTION].best / res.ms[V_ARRAY].best;
            double vs_global = res.ms[V_GLOBAL].best / res.ms[V_JUNCTION].best;
            double vs_thread = res.ms[V_PERTHREAD].best / res.ms[V_JUNCTION].best;
            printf("%9s  junction / plain array %.2fx CPU per increment, %.2fx wall (target <= 1.5:"
                   " %s); global mutex map is %.0fx junction (wall)%s; per-thread map %.1fx\n",
                   "", vs_array, vs_array_wall, vs_array <= 1.5 ? "met" : "NOT met", vs_global,
                   n == 2500 ? (vs_global >= 50 ? " (target >= 50x: met)"
                                                : " (target >= 50x: NOT met)")
                             : "",
                   vs_thread);
        }
    }
    if (big)
        big_figures();
    if (stall)
        stall_figures();
    return 0;
}
