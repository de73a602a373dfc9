/* stats/stats.c: the stats registry, shards, reading, glob matching and snapshot walks (API
 * in stats.h; layout, locking and the reasons in stats/DESIGN.md "Memory layout", "Threads").
 *
 * Threads: every public function is thread-safe and serialises on the registry's one mutex
 * `_lock` (writers - object creation and retirement - go first; a walk copies labels under it
 * and sums slots with it released); *_LH functions need the caller to hold it.  The hot path
 * (stats.h's inline functions) never comes here.  Nothing here logs.
 */
#include "stats/stats.h"

#include "core/base/base.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

// clang-format off
#define HOLE          UINT32_MAX /* an empty position in a family's object list */
#define BATCH_SLOTS   16384u     /* values one iterator batch holds (128 KiB) */
#define BATCH_OBJECTS 512u       /* objects one batch visits at most */
#define SINK_TAG      0x80000000u /* stats_obj_t.index of a sink object: this | family index */
#define WRITER_SPIN_NS 50000u    /* a writer spins this long for a walk to let go, then sleeps */
#define READER_DEFER_NS 50000u   /* a walk defers to announced writers at most this long */
#define READER_MIN_OBJECTS 16u   /* objects a walk visits per hold, writers waiting or not */

/* Called by a walk right after it released the mutex and before it sums a hold's objects:
 * tests/unit/stats/stats_walk_test.c, which includes this file, makes the races happen
 * there (a shard freed, an object retired and its block reused). */
#ifndef STATS_TEST_UNLOCKED_HOOK
#define STATS_TEST_UNLOCKED_HOOK(r) ((void)0)
#endif
// clang-format on

/* A growable array of u32 (object positions, free blocks, holes). */
typedef struct u32vec {
    uint32_t *v;   /* elements */
    uint32_t  n;   /* used */
    uint32_t  cap; /* allocated */
} u32vec_t;

/* What the registry adds to a caller's field: where it lives, where a derived value comes
 * from, its Prometheus name. */
typedef struct fam_field {
    uint32_t        off;       /* slot offset in the block */
    uint32_t        width;     /* slots: 1, or STATS_HIST_SLOTS(buckets) */
    stats_family_t *src;       /* sum_of / count_of: the source family; NULL otherwise */
    int32_t         src_field; /* sum_of: the source field; -1 for count_of */
} fam_field_t;

/* A family.  Created under `_lock`, then its name, fields and geometry never change; the
 * object lists, free lists and retired totals change under `_lock` only. */
struct stats_family {
    char          *_name;        /* family name (a plain stat family: "") */
    uint32_t       _index;       /* position in r->_fams; UINT32_MAX for the hidden ones */
    bool           _singleton;   /* one object, created with the family */
    bool           _plain;       /* hidden family whose objects are plain stats */
    bool           _derived;     /* some field is sum_of/count_of */
    unsigned       _nfields;     /* fields */
    stats_field_t *_fields;      /* copies of the caller's fields; .prom resolved */
    fam_field_t   *_ff;          /* [nfields] layout and derivation */
    uint32_t       _nslots;      /* block size */
    unsigned       _nlabels;     /* label keys (0 for singleton and plain) */
    char          *_label_keys[STATS_MAX_LABELS]; /* copies */
    char          *_prom_prefix; /* prefix for derived Prometheus names */
    uint64_t      *_retired;     /* [nslots] what retired objects left (counters, hist) */
    u32vec_t       _objs;        /* position -> record index, or HOLE */
    u32vec_t       _holes;       /* free positions in _objs */
    u32vec_t       _freeb;       /* retired blocks' base ids, reused first */
    uint32_t       _nlive;       /* live objects */
    uint32_t       _nsink;       /* sink objects handed out and not yet retired */
    stats_obj_t    _single;      /* the singleton's object */
};

/* One live (or free) object.  Under `_lock`. */
typedef struct objrec {
    stats_family_t *fam;      /* NULL when the record is free */
    char           *strs;     /* label values packed "v0\0v1\0..."; a plain stat:
                                 "name\0help\0prom\0" */
    uint32_t        strs_len; /* bytes of strs, NULs included */
    uint32_t        base;     /* first slot */
    uint32_t        gen;      /* generation; 0 when free */
    uint32_t        pos;      /* live: index in fam->_objs; free: next free record + 1 */
    uint32_t        hash;     /* identity hash */
} objrec_t;

/* A slot of the identity hash (open addressing, linear probing, at most half full). */
typedef struct hslot {
    uint32_t hash; /* the record's identity hash, so a probe touches no record */
    uint32_t rec;  /* record index + 1; 0 = empty */
} hslot_t;

/* The registry.  Every field is guarded by `_lock` except the page tables' entries, which
 * are written once under it and then read by anyone the handles reached. */
struct stats_registry {
    pthread_mutex_t   _lock;     /* the one lock */
    _Atomic uint32_t  _writers;  /* writers waiting for `_lock` (lock_writer): a hint that
                                    makes walks let go; read and written without `_lock` */
    _Atomic uint32_t  _wdone;    /* writers that got `_lock` so far (wraps): a walk that let
                                    go waits for the ones it let go for, not for later ones */
    uint32_t          _hwm;      /* first never-used slot id (ids below STATS_SINK_SLOTS are
                                    the sink) */
    uint32_t          _max_hwm;  /* _hwm never passes it (stats_registry_set_limit) */
    uint64_t          _refused;  /* objects refused for want of room, ever */
    _Atomic uint32_t  _walkers;  /* walks summing slots with `_lock` released (incremented
                                    under it, decremented without it) */
    _Atomic uint32_t  _shard_seq; /* bumped under `_lock` before a freed shard is folded:
                                     a walk summing without the lock checks it */
    stats_shard_t   **_dead;     /* freed shards a walk may still be reading: released
                                    once no walk is (under `_lock`) */
    uint32_t          _ndead;    /* count */
    uint32_t          _deadcap;  /* allocated */
    uint32_t          _ncommit;  /* ids usable in every array (a multiple of COMMIT_SLOTS) */
    uint32_t          _gen_next; /* next object generation (never 0) */
    _Atomic uint32_t *_gens;     /* per slot: its object's gen, 0 = none; read lock-free by
                                    debug asserts */
    uint32_t         *_owner;    /* per slot: its object's record index */
    stats_shard_t   **_shards;   /* [0] is the base shard */
    uint32_t          _nshards;  /* live shards, base included */
    uint32_t          _sum_from; /* first shard readers sum: 1 until a shard was folded into
                                    the base shard, then 0 (saves a pass over it) */
    uint32_t          _shardcap; /* allocated */
    stats_family_t  **_fams;     /* visible families, creation order */
    uint32_t          _nfams;    /* count */
    uint32_t          _famcap;   /* allocated */
    stats_family_t   *_plain[2]; /* hidden families of plain counters / gauges */
    objrec_t         *_recs;     /* object records */
    uint32_t          _nrecs;    /* records ever used */
    uint32_t          _reccap;   /* allocated */
    uint32_t          _free_rec; /* first free record + 1, 0 = none */
    hslot_t          *_hs;       /* identity hash: (family, labels[0]) -> record; the two
                                    plain families share one namespace */
    uint32_t          _hmask;    /* slots - 1 */
    uint32_t          _hcount;   /* records in the hash */
    uint64_t          _bytes;    /* registry memory, names excluded (approximate) */
    uint64_t          _name_bytes; /* names, labels, help texts */
};

/* ---------------------------------------------------------------------------------------
 * small helpers
 * ------------------------------------------------------------------------------------- */

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Take `_lock` as a writer (see "writers first" at the top): announce, try for a while (a
 * walk lets go within a few objects), then sleep on the mutex (its holder may be descheduled,
 * or another writer). */
static void lock_writer(stats_registry_t *r)
{
    atomic_fetch_add_explicit(&r->_writers, 1, memory_order_relaxed);
    if (pthread_mutex_trylock(&r->_lock) != 0) {
        uint64_t t0 = mono_ns();
        for (unsigned i = 1;; i++) {
            cpu_relax();
            if (pthread_mutex_trylock(&r->_lock) == 0)
                break;
            if ((i & 31) == 0 && mono_ns() - t0 > WRITER_SPIN_NS) {
                pthread_mutex_lock(&r->_lock);
                break;
            }
        }
    }
    atomic_fetch_sub_explicit(&r->_writers, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->_wdone, 1, memory_order_relaxed);
}

/* A writer is waiting for `_lock`: a walk holding it should let go. */
static inline bool writer_waiting(stats_registry_t *r)
{
    return atomic_load_explicit(&r->_writers, memory_order_relaxed) != 0;
}

/* Take `_lock` as a walk: first let the writers announced now through - each gets one turn,
 * later ones wait for the walk's next hold - for at most READER_DEFER_NS (a writer may be
 * descheduled), so writers cannot stop a walk for good. */
static void lock_reader(stats_registry_t *r)
{
    uint32_t n = atomic_load_explicit(&r->_writers, memory_order_relaxed);
    if (n) {
        uint32_t d0 = atomic_load_explicit(&r->_wdone, memory_order_relaxed);
        uint64_t t0 = mono_ns();
        for (unsigned i = 1; writer_waiting(r) &&
                             atomic_load_explicit(&r->_wdone, memory_order_relaxed) - d0 < n;
             i++) {
            if (i < 64)
                cpu_relax();
            else
                sched_yield(); /* the writer may need this CPU */
            if ((i & 15) == 0 && mono_ns() - t0 > READER_DEFER_NS)
                break;
        }
    }
    pthread_mutex_lock(&r->_lock);
}

static void *aligned_zalloc(size_t align, size_t n)
{
    size_t sz = (n + align - 1) & ~(align - 1);
    void  *p = aligned_alloc(align, sz);
    BASE_BUG_ON(p == NULL); /* out of memory: same policy as base_malloc */
    memset(p, 0, sz);
    return p;
}

static void vec_push(u32vec_t *v, uint32_t x)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 16;
        v->v = base_realloc(v->v, v->cap * sizeof(*v->v));
    }
    v->v[v->n++] = x;
}

static bool name_is_valid(const char *s)
{
    if (!s || !*s || !((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
        return false;
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '_'))
            return false;
    return true;
}

static bool prom_name_is_valid(const char *s)
{
    if (!s || !*s || (*s >= '0' && *s <= '9'))
        return false;
    for (; *s; s++)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '_' || *s == ':'))
            return false;
    return true;
}

static char *dup_counted(stats_registry_t *r, const char *s)
{
    if (!s)
        return NULL;
    r->_name_bytes += strlen(s) + 1;
    return base_strdup(s);
}

/* FNV-1a over the identity, seeded with the family so that equal identities in two families
 * hash apart; plain stats (both kinds) share one seed: their names are one namespace. */
static uint32_t ident_hash(const stats_family_t *f, const char *s)
{
    uint32_t h = 2166136261u ^ (f->_plain ? 0x9e3779b9u : (uint32_t)(uintptr_t)f);
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h ^ (h >> 15);
}

/* Same identity namespace: the same family, or both plain. */
static bool fam_same(const stats_family_t *a, const stats_family_t *b)
{
    return a == b || (a->_plain && b->_plain);
}

/* Sum slot `id` over every shard.  _LH (the shard list). */
static uint64_t slot_sum_LH(stats_registry_t *r, uint32_t id)
{
    uint64_t v = 0;
    for (uint32_t i = r->_sum_from; i < r->_nshards; i++)
        v += atomic_load_explicit(stats__slot(r->_shards[i], id), memory_order_relaxed);
    return v;
}

/* Sum a block of n slots from `id` (inside one page) over every shard into out[] (added). */
static void block_sum_LH(stats_registry_t *r, uint32_t id, uint32_t n, uint64_t *out)
{
    for (uint32_t i = r->_sum_from; i < r->_nshards; i++) {
        _Atomic uint64_t *p = stats__slot(r->_shards[i], id);
        for (uint32_t j = 0; j < n; j++)
            out[j] += atomic_load_explicit(&p[j], memory_order_relaxed);
    }
}

/* ---------------------------------------------------------------------------------------
 * slot arrays and blocks
 * ------------------------------------------------------------------------------------- */

/* Reserve address space for STATS_MAX_SLOTS entries of `size` bytes: no access yet, no
 * memory, no commit charge. */
static void *range_reserve(size_t size)
{
    void *p = mmap(NULL, (size_t)STATS_MAX_SLOTS * size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    BASE_BUG_ON(p == MAP_FAILED); /* no address space: same policy as out of memory */
    return p;
}

/* Make entries [from, to) of a reserved range usable (zero-filled by the kernel on first
 * touch). */
static void range_commit(void *base, size_t size, uint32_t from, uint32_t to)
{
    int rc = mprotect((char *)base + (size_t)from * size, (size_t)(to - from) * size,
                      PROT_READ | PROT_WRITE);
    BASE_BUG_ON(rc != 0); /* out of memory (a strict overcommit limit) */
}

static void range_release(void *base, size_t size)
{
    munmap(base, (size_t)STATS_MAX_SLOTS * size);
}

/* Make ids [0, end) usable in every shard, the gens and the owners. */
static void commit_ensure_LH(stats_registry_t *r, uint32_t end)
{
    if (end <= r->_ncommit)
        return;
    uint32_t to = (end + STATS_COMMIT_SLOTS - 1) & ~(STATS_COMMIT_SLOTS - 1);
    range_commit((void *)r->_gens, sizeof(uint32_t), r->_ncommit, to);
    range_commit(r->_owner, sizeof(uint32_t), r->_ncommit, to);
    for (uint32_t i = 0; i < r->_nshards; i++)
        range_commit((void *)r->_shards[i]->_slots, sizeof(uint64_t), r->_ncommit, to);
    r->_ncommit = to;
}

/* A block of f->_nslots zeroed slots: a retired one of the family (zeroed now in every
 * shard), else fresh ones past the high-water mark (never written: zero).  Returns 0 and
 * *base, or -ENOSPC. */
static int block_alloc_LH(stats_registry_t *r, stats_family_t *f, uint32_t *base)
{
    uint32_t w = f->_nslots;
    if (f->_freeb.n) {
        uint32_t b = f->_freeb.v[--f->_freeb.n];
        /* A walk summing without the lock that reads one of these zeroes sees, after its
         * acquire fence, the block's generation at 0 (set by the retire, before this fence)
         * or newer: never its object's, so it drops the object (batch_sum_unlocked). */
        atomic_thread_fence(memory_order_release);
        for (uint32_t i = 0; i < r->_nshards; i++) {
            _Atomic uint64_t *p = stats__slot(r->_shards[i], b);
            for (uint32_t j = 0; j < w; j++)
                atomic_store_explicit(&p[j], 0, memory_order_relaxed);
        }
        *base = b;
        return 0;
    }
    uint32_t b = r->_hwm;
    if ((uint64_t)b + w > r->_max_hwm) {
        r->_refused++;
        return -ENOSPC;
    }
    commit_ensure_LH(r, b + w);
    r->_hwm = b + w;
    *base = b;
    return 0;
}

static void block_own_LH(stats_registry_t *r, uint32_t base, uint32_t w, uint32_t gen,
                         uint32_t rec)
{
    _Atomic uint32_t *g = &r->_gens[base];
    uint32_t         *o = &r->_owner[base];
    for (uint32_t j = 0; j < w; j++) {
        atomic_store_explicit(&g[j], gen, memory_order_relaxed);
        o[j] = rec;
    }
}

/* ---------------------------------------------------------------------------------------
 * registry and shards
 * ------------------------------------------------------------------------------------- */

static stats_shard_t *shard_alloc_LH(stats_registry_t *r)
{
    stats_shard_t *s = aligned_zalloc(64, sizeof(*s));
    s->_gens = r->_gens;
    s->_slots = range_reserve(sizeof(uint64_t));
    if (r->_ncommit)
        range_commit((void *)s->_slots, sizeof(uint64_t), 0, r->_ncommit);
    if (r->_nshards == r->_shardcap) {
        r->_shardcap = r->_shardcap ? r->_shardcap * 2 : 8;
        r->_shards = base_realloc(r->_shards, r->_shardcap * sizeof(*r->_shards));
    }
    r->_shards[r->_nshards++] = s;
    return s;
}

static void shard_release(stats_shard_t *s)
{
    range_release((void *)s->_slots, sizeof(uint64_t));
    free(s);
}

/* Release the freed shards if no walk is summing without the lock (a walk that starts
 * later cannot see them: they left the shard list under `_lock`), then unlock. */
static void dead_release_LH_unlock(stats_registry_t *r)
{
    stats_shard_t *dead[16];
    uint32_t       n = 0;
    if (r->_ndead && atomic_load_explicit(&r->_walkers, memory_order_acquire) == 0) {
        while (r->_ndead && n < 16)
            dead[n++] = r->_dead[--r->_ndead];
    }
    pthread_mutex_unlock(&r->_lock);
    for (uint32_t i = 0; i < n; i++)
        shard_release(dead[i]);
}

static stats_family_t *plain_family_new(stats_registry_t *r, stats_kind_t kind);

stats_registry_t *stats_registry_new(void)
{
    stats_registry_t *r = base_calloc(1, sizeof(*r));
    pthread_mutex_init(&r->_lock, NULL);
    r->_gen_next = 1;
    r->_sum_from = 1;
    r->_hwm = STATS_SINK_SLOTS; /* the sink: what objects without stats write */
    r->_max_hwm = STATS_MAX_SLOTS;
    r->_hmask = 1023;
    r->_hs = base_calloc(r->_hmask + 1, sizeof(*r->_hs));
    r->_bytes = sizeof(*r) + (r->_hmask + 1) * sizeof(*r->_hs);
    r->_gens = range_reserve(sizeof(uint32_t));
    r->_owner = range_reserve(sizeof(uint32_t));
    shard_alloc_LH(r); /* the base shard */
    commit_ensure_LH(r, STATS_SINK_SLOTS);
    r->_plain[0] = plain_family_new(r, STATS_COUNTER);
    r->_plain[1] = plain_family_new(r, STATS_GAUGE);
    return r;
}

int stats_registry_set_limit(stats_registry_t *r, uint64_t max_slots)
{
    if (max_slots == 0 || max_slots > STATS_MAX_SLOTS - STATS_SINK_SLOTS)
        return -EINVAL;
    pthread_mutex_lock(&r->_lock);
    r->_max_hwm = STATS_SINK_SLOTS + (uint32_t)max_slots;
    pthread_mutex_unlock(&r->_lock);
    return 0;
}

static void family_release(stats_family_t *f)
{
    for (unsigned i = 0; i < f->_nfields; i++) {
        free((char *)f->_fields[i].name);
        free((char *)f->_fields[i].help);
        free((char *)f->_fields[i].prom);
        free((char *)f->_fields[i].sum_of);
        free((char *)f->_fields[i].count_of);
    }
    for (unsigned i = 0; i < STATS_MAX_LABELS; i++)
        free(f->_label_keys[i]);
    free(f->_fields);
    free(f->_ff);
    free(f->_name);
    free(f->_prom_prefix);
    free(f->_retired);
    free(f->_objs.v);
    free(f->_holes.v);
    free(f->_freeb.v);
    free(f);
}

void stats_registry_free(stats_registry_t *r)
{
    if (!r)
        return;
    for (uint32_t i = 0; i < r->_nshards; i++)
        shard_release(r->_shards[i]);
    for (uint32_t i = 0; i < r->_ndead; i++)
        shard_release(r->_dead[i]);
    free(r->_dead);
    range_release((void *)r->_gens, sizeof(uint32_t));
    range_release(r->_owner, sizeof(uint32_t));
    for (uint32_t i = 0; i < r->_nrecs; i++)
        free(r->_recs[i].strs);
    for (uint32_t i = 0; i < r->_nfams; i++)
        family_release(r->_fams[i]);
    family_release(r->_plain[0]);
    family_release(r->_plain[1]);
    free(r->_fams);
    free(r->_shards);
    free(r->_recs);
    free(r->_hs);
    pthread_mutex_destroy(&r->_lock);
    free(r);
}

stats_shard_t *stats_shard_new(stats_registry_t *r)
{
    lock_writer(r);
    stats_shard_t *s = shard_alloc_LH(r);
    pthread_mutex_unlock(&r->_lock);
    return s;
}

void stats_shard_free(stats_registry_t *r, stats_shard_t *s)
{
    if (!s)
        return;
    lock_writer(r);
    uint32_t i;
    for (i = 1; i < r->_nshards && r->_shards[i] != s; i++)
        ;
    BASE_BUG_ON(i == r->_nshards); /* not a shard of this registry (or the base shard) */
    /* A walk summing without the lock may have both this shard and the base shard in its
     * list: it sees the bump (it reads the sequence after the slots, with an acquire fence,
     * and the fold's stores come after this release fence) and sums again under the lock. */
    atomic_fetch_add_explicit(&r->_shard_seq, 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);
    /* Fold every slot into the base shard: counters stay monotonic, gauge deltas and
     * histograms keep their sums.  Retired blocks are zeroed when reused, so folding
     * their stale values is harmless; the sink is nobody's. */
    _Atomic uint64_t *from = s->_slots, *to = r->_shards[0]->_slots;
    r->_sum_from = 0;
    for (uint32_t j = STATS_SINK_SLOTS; j < r->_hwm; j++) {
        uint64_t v = atomic_load_explicit(&from[j], memory_order_relaxed);
        if (v)
            atomic_store_explicit(&to[j], atomic_load_explicit(&to[j], memory_order_relaxed) + v,
                                  memory_order_relaxed);
    }
    r->_shards[i] = r->_shards[--r->_nshards];
    /* A walk summing without the lock may still read it: keep its memory until none is. */
    if (r->_ndead == r->_deadcap) {
        r->_deadcap = r->_deadcap ? r->_deadcap * 2 : 4;
        r->_dead = base_realloc(r->_dead, r->_deadcap * sizeof(*r->_dead));
    }
    r->_dead[r->_ndead++] = s;
    dead_release_LH_unlock(r);
}

/* ---------------------------------------------------------------------------------------
 * families
 * ------------------------------------------------------------------------------------- */

static stats_family_t *family_find_LH(stats_registry_t *r, const char *name, size_t len)
{
    for (uint32_t i = 0; i < r->_nfams; i++)
        if (strlen(r->_fams[i]->_name) == len && memcmp(r->_fams[i]->_name, name, len) == 0)
            return r->_fams[i];
    return NULL;
}

static uint32_t rec_find_LH(stats_registry_t *r, const stats_family_t *f, const char *ident);

/* The resolved Prometheus name of a field (or plain stat) called `name` of kind `kind` under
 * `prefix`: prefix_snake(name), `_total` added to counters. */
static char *prom_derive(const char *prefix, const char *name, stats_kind_t kind)
{
    size_t pl = strlen(prefix), nl = strlen(name);
    size_t cap = pl + 1 + 2 * nl + sizeof("_total");
    char  *p = base_malloc(cap);
    size_t n = 0;
    memcpy(p, prefix, pl);
    n = pl;
    if (pl && nl)
        p[n++] = '_';
    n += stats_prom_snake(name, p + n, cap - n);
    if (kind == STATS_COUNTER && !(n >= 6 && memcmp(p + n - 6, "_total", 6) == 0)) {
        memcpy(p + n, "_total", 7);
        n += 6;
    }
    p[n] = 0;
    return p;
}

static stats_family_t *family_alloc(stats_registry_t *r, unsigned nfields)
{
    stats_family_t *f = base_calloc(1, sizeof(*f));
    f->_nfields = nfields;
    f->_fields = base_calloc(nfields, sizeof(*f->_fields));
    f->_ff = base_calloc(nfields, sizeof(*f->_ff));
    r->_bytes += sizeof(*f) + nfields * (sizeof(*f->_fields) + sizeof(*f->_ff));
    return f;
}

static stats_family_t *plain_family_new(stats_registry_t *r, stats_kind_t kind)
{
    stats_family_t *f = family_alloc(r, 1);
    f->_name = base_strdup("");
    f->_index = UINT32_MAX;
    f->_plain = true;
    f->_fields[0].name = base_strdup("");
    f->_fields[0].kind = kind;
    f->_ff[0].width = 1;
    f->_nslots = 1;
    f->_retired = base_calloc(1, sizeof(uint64_t));
    f->_prom_prefix = base_strdup("junction");
    return f;
}

static int object_new_LH(stats_registry_t *r, stats_family_t *f, const char *const *strs,
                         unsigned nstrs, stats_obj_t *out);

/* Resolve a field's sum_of/count_of against the families created before. */
static int field_derive_LH(stats_registry_t *r, const stats_field_t *d, fam_field_t *ff)
{
    if (d->sum_of && d->count_of)
        return -EINVAL;
    if (d->count_of) {
        ff->src = family_find_LH(r, d->count_of, strlen(d->count_of));
        ff->src_field = -1;
        return ff->src && d->kind == STATS_GAUGE ? 0 : -EINVAL;
    }
    const char *dot = strchr(d->sum_of, '.');
    if (!dot)
        return -EINVAL;
    ff->src = family_find_LH(r, d->sum_of, (size_t)(dot - d->sum_of));
    if (!ff->src)
        return -EINVAL;
    for (unsigned i = 0; i < ff->src->_nfields; i++) {
        const stats_field_t *sf = &ff->src->_fields[i];
        if (strcmp(sf->name, dot + 1) != 0)
            continue;
        if (sf->kind != d->kind || sf->kind == STATS_HISTOGRAM || ff->src->_ff[i].src)
            return -EINVAL;
        ff->src_field = (int32_t)i;
        return 0;
    }
    return -EINVAL;
}

int stats_family_new(stats_registry_t *r, const stats_family_def_t *def, stats_family_t **out)
{
    if (!def || !name_is_valid(def->name) || !def->fields || def->nfields == 0 ||
        def->nfields > STATS_MAX_FIELDS)
        return -EINVAL;
    if (def->prom_prefix && !prom_name_is_valid(def->prom_prefix))
        return -EINVAL;
    uint32_t nslots = 0;
    for (unsigned i = 0; i < def->nfields; i++) {
        const stats_field_t *d = &def->fields[i];
        if (!name_is_valid(d->name) || (d->prom && !prom_name_is_valid(d->prom)))
            return -EINVAL;
        for (unsigned j = 0; j < i; j++)
            if (strcmp(def->fields[j].name, d->name) == 0)
                return -EINVAL;
        switch (d->kind) {
        case STATS_COUNTER:
        case STATS_GAUGE:
            nslots += 1;
            break;
        case STATS_HISTOGRAM:
            if (d->buckets < 1 || d->buckets > STATS_HIST_MAX_BUCKETS || d->sum_of ||
                d->count_of)
                return -EINVAL;
            nslots += STATS_HIST_SLOTS(d->buckets);
            break;
        default:
            return -EINVAL;
        }
        if ((d->sum_of || d->count_of) && !def->singleton)
            return -EINVAL;
    }
    if (nslots > STATS_MAX_BLOCK)
        return -EINVAL;
    unsigned nlabels = 0;
    if (!def->singleton) {
        while (nlabels < STATS_MAX_LABELS && def->labels[nlabels]) {
            if (!name_is_valid(def->labels[nlabels]) || strcmp(def->labels[nlabels], "le") == 0)
                return -EINVAL;
            nlabels++;
        }
        if (nlabels == 0)
            nlabels = 1; /* labels[0] defaults to the family's name */
    }

    lock_writer(r);
    int rc = 0;
    if (family_find_LH(r, def->name, strlen(def->name)) || rec_find_LH(r, r->_plain[0], def->name)) {
        rc = -EEXIST;
        goto out_unlock;
    }
    stats_family_t *f = family_alloc(r, def->nfields);
    f->_name = dup_counted(r, def->name);
    f->_singleton = def->singleton;
    f->_nslots = nslots;
    f->_nlabels = nlabels;
    for (unsigned i = 0; i < nlabels; i++)
        f->_label_keys[i] = dup_counted(r, def->labels[i] ? def->labels[i] : def->name);
    if (def->prom_prefix) {
        f->_prom_prefix = dup_counted(r, def->prom_prefix);
    } else {
        char buf[256] = "junction_";
        stats_prom_snake(def->name, buf + 9, sizeof(buf) - 9);
        f->_prom_prefix = dup_counted(r, buf);
    }
    uint32_t off = 0;
    for (unsigned i = 0; i < def->nfields; i++) {
        const stats_field_t *d = &def->fields[i];
        stats_field_t       *c = &f->_fields[i];
        c->name = dup_counted(r, d->name);
        c->kind = d->kind;
        c->help = dup_counted(r, d->help);
        c->buckets = d->kind == STATS_HISTOGRAM ? d->buckets : 0;
        c->sum_of = dup_counted(r, d->sum_of);
        c->count_of = dup_counted(r, d->count_of);
        if (d->prom) {
            c->prom = dup_counted(r, d->prom);
        } else {
            char *p = prom_derive(f->_prom_prefix, d->name, d->kind);
            r->_name_bytes += strlen(p) + 1;
            c->prom = p;
        }
        f->_ff[i].off = off;
        f->_ff[i].width = d->kind == STATS_HISTOGRAM ? STATS_HIST_SLOTS(d->buckets) : 1;
        off += f->_ff[i].width;
        if (d->sum_of || d->count_of) {
            f->_derived = true;
            if (field_derive_LH(r, d, &f->_ff[i]) != 0) {
                family_release(f);
                rc = -EINVAL;
                goto out_unlock;
            }
        }
    }
    f->_retired = base_calloc(nslots, sizeof(uint64_t));
    r->_bytes += nslots * sizeof(uint64_t);
    if (f->_singleton) {
        rc = object_new_LH(r, f, NULL, 0, &f->_single);
        if (rc != 0) {
            family_release(f);
            goto out_unlock;
        }
    }
    if (r->_nfams == r->_famcap) {
        r->_famcap = r->_famcap ? r->_famcap * 2 : 16;
        r->_fams = base_realloc(r->_fams, r->_famcap * sizeof(*r->_fams));
    }
    f->_index = r->_nfams;
    r->_fams[r->_nfams++] = f;
    *out = f;
out_unlock:
    pthread_mutex_unlock(&r->_lock);
    return rc;
}

stats_family_t *stats_family_find(stats_registry_t *r, const char *name)
{
    pthread_mutex_lock(&r->_lock);
    stats_family_t *f = family_find_LH(r, name, strlen(name));
    pthread_mutex_unlock(&r->_lock);
    return f;
}

stats_obj_t stats_family_object(const stats_family_t *f)
{
    return f->_single;
}

uint32_t stats_family_offset(const stats_family_t *f, unsigned field)
{
    return field < f->_nfields ? f->_ff[field].off : UINT32_MAX;
}

const char *stats_family_name(const stats_family_t *f)
{
    return f->_name;
}

unsigned stats_family_nfields(const stats_family_t *f)
{
    return f->_nfields;
}

const stats_field_t *stats_family_field(const stats_family_t *f, unsigned field)
{
    return field < f->_nfields ? &f->_fields[field] : NULL;
}

unsigned stats_family_nlabels(const stats_family_t *f)
{
    return f->_nlabels;
}

const char *stats_family_label_key(const stats_family_t *f, unsigned i)
{
    return i < f->_nlabels ? f->_label_keys[i] : NULL;
}

const char *stats_family_prom_name(const stats_family_t *f, unsigned field)
{
    return field < f->_nfields ? f->_fields[field].prom : NULL;
}

bool stats_family_is_singleton(const stats_family_t *f)
{
    return f->_singleton;
}

/* ---------------------------------------------------------------------------------------
 * objects
 * ------------------------------------------------------------------------------------- */

static uint32_t rec_find_LH(stats_registry_t *r, const stats_family_t *f, const char *ident)
{
    uint32_t h = ident_hash(f, ident);
    for (uint32_t i = h & r->_hmask; r->_hs[i].rec; i = (i + 1) & r->_hmask) {
        if (r->_hs[i].hash != h)
            continue;
        objrec_t *o = &r->_recs[r->_hs[i].rec - 1];
        if (fam_same(o->fam, f) && strcmp(o->strs, ident) == 0)
            return r->_hs[i].rec;
    }
    return 0;
}

static void hash_place_LH(stats_registry_t *r, uint32_t hash, uint32_t rec)
{
    uint32_t i = hash & r->_hmask;
    while (r->_hs[i].rec)
        i = (i + 1) & r->_hmask;
    r->_hs[i] = (hslot_t){hash, rec};
}

static void hash_insert_LH(stats_registry_t *r, uint32_t idx)
{
    if (2 * (r->_hcount + 1) > r->_hmask + 1) {
        hslot_t *old = r->_hs;
        uint32_t n = r->_hmask + 1;
        r->_hs = base_calloc(2 * n, sizeof(*r->_hs));
        r->_hmask = 2 * n - 1;
        r->_bytes += n * sizeof(*r->_hs);
        for (uint32_t i = 0; i < n; i++)
            if (old[i].rec)
                hash_place_LH(r, old[i].hash, old[i].rec);
        free(old);
    }
    hash_place_LH(r, r->_recs[idx].hash, idx + 1);
    r->_hcount++;
}

/* Remove record idx; backward-shift deletion keeps every probe chain unbroken. */
static void hash_remove_LH(stats_registry_t *r, uint32_t idx)
{
    uint32_t m = r->_hmask, i = r->_recs[idx].hash & m;
    while (r->_hs[i].rec != idx + 1)
        i = (i + 1) & m;
    for (uint32_t j = (i + 1) & m; r->_hs[j].rec; j = (j + 1) & m) {
        uint32_t home = r->_hs[j].hash & m;
        /* Move j back into the hole at i unless its home lies cyclically in (i, j]. */
        bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            r->_hs[i] = r->_hs[j];
            i = j;
        }
    }
    r->_hs[i] = (hslot_t){0, 0};
    r->_hcount--;
}

/* A new object of f.  strs[0 .. nstrs) are packed into its record; strs[0] (if any) is its
 * identity and must not be a live one (checked by the callers). */
static int object_new_LH(stats_registry_t *r, stats_family_t *f, const char *const *strs,
                         unsigned nstrs, stats_obj_t *out)
{
    uint32_t base;
    int      rc = block_alloc_LH(r, f, &base);
    if (rc != 0)
        return rc;
    uint32_t idx;
    if (r->_free_rec) {
        idx = r->_free_rec - 1;
        r->_free_rec = r->_recs[idx].pos;
    } else {
        if (r->_nrecs == r->_reccap) {
            r->_bytes += (r->_reccap ? r->_reccap : 1024) * sizeof(*r->_recs);
            r->_reccap = r->_reccap ? r->_reccap * 2 : 1024;
            r->_recs = base_realloc(r->_recs, r->_reccap * sizeof(*r->_recs));
        }
        idx = r->_nrecs++;
    }
    objrec_t *o = &r->_recs[idx];
    memset(o, 0, sizeof(*o));
    size_t len = 0;
    for (unsigned i = 0; i < nstrs; i++)
        len += (strs[i] ? strlen(strs[i]) : 0) + 1;
    o->strs = base_malloc(len ? len : 1);
    o->strs[0] = 0;
    o->strs_len = (uint32_t)len;
    r->_name_bytes += len;
    char *p = o->strs;
    for (unsigned i = 0; i < nstrs; i++) {
        size_t n = strs[i] ? strlen(strs[i]) : 0;
        memcpy(p, strs[i] ? strs[i] : "", n);
        p[n] = 0;
        p += n + 1;
    }
    o->fam = f;
    o->base = base;
    o->gen = r->_gen_next++;
    if (r->_gen_next == 0)
        r->_gen_next = 1;
    if (f->_holes.n) {
        o->pos = f->_holes.v[--f->_holes.n];
        f->_objs.v[o->pos] = idx;
    } else {
        o->pos = f->_objs.n;
        vec_push(&f->_objs, idx);
    }
    f->_nlive++;
    o->hash = ident_hash(f, o->strs);
    hash_insert_LH(r, idx);
    block_own_LH(r, base, f->_nslots, o->gen, idx);
    out->base = base;
    out->gen = o->gen;
    out->index = idx;
    return 0;
}

int stats_object_new(stats_registry_t *r, stats_family_t *f, const char *const *labels,
                     stats_obj_t *out)
{
    *out = (stats_obj_t){0, 0, 0};
    if (!f || f->_singleton || f->_plain || !labels)
        return -EINVAL;
    for (unsigned i = 0; i < f->_nlabels; i++)
        if (!labels[i])
            return -EINVAL;
    lock_writer(r);
    int rc = rec_find_LH(r, f, labels[0]) ? -EEXIST : object_new_LH(r, f, labels, f->_nlabels, out);
    if (rc != 0) {
        /* The sink rule: the caller gets an object it can write through and retire. */
        *out = (stats_obj_t){0, 0, SINK_TAG | f->_index};
        f->_nsink++;
    }
    pthread_mutex_unlock(&r->_lock);
    return rc;
}

int stats_stat_new(stats_registry_t *r, const char *name, stats_kind_t kind, const char *help,
                   const char *prom, stats_handle_t *out, stats_obj_t *obj)
{
    *out = (stats_handle_t){0, 0}; /* a sink handle until the stat exists */
    if (obj)
        *obj = (stats_obj_t){0, 0, 0};
    if (!name_is_valid(name) || (kind != STATS_COUNTER && kind != STATS_GAUGE) ||
        (prom && !prom_name_is_valid(prom)))
        return -EINVAL;
    stats_family_t *f = r->_plain[kind == STATS_GAUGE];
    char           *derived = prom ? NULL : prom_derive("junction", name, kind);
    const char     *strs[3] = {name, help ? help : "", prom ? prom : derived};
    stats_obj_t     o;
    lock_writer(r);
    int rc = 0;
    if (rec_find_LH(r, f, name) || family_find_LH(r, name, strlen(name)))
        rc = -EEXIST;
    else
        rc = object_new_LH(r, f, strs, 3, &o);
    pthread_mutex_unlock(&r->_lock);
    free(derived);
    if (rc == 0) {
        *out = stats_obj_stat(o, 0);
        if (obj)
            *obj = o;
    }
    return rc;
}

/* The live record `o` names, or NULL. */
static objrec_t *rec_get_LH(stats_registry_t *r, stats_obj_t o)
{
    if (o.gen == 0 || o.index >= r->_nrecs)
        return NULL;
    objrec_t *rec = &r->_recs[o.index];
    return rec->fam && rec->gen == o.gen && rec->base == o.base ? rec : NULL;
}

int stats_object_retire(stats_registry_t *r, stats_obj_t o)
{
    lock_writer(r);
    objrec_t *rec = rec_get_LH(r, o);
    int       rc = 0;
    if (!rec && o.gen == 0 && (o.index & SINK_TAG)) {
        uint32_t fi = o.index & ~SINK_TAG;
        if (fi < r->_nfams && r->_fams[fi]->_nsink)
            r->_fams[fi]->_nsink--;
        else
            rc = -ESTALE;
        goto out_unlock;
    }
    if (!rec) {
        rc = -ESTALE;
        goto out_unlock;
    }
    stats_family_t *f = rec->fam;
    if (f->_singleton) {
        rc = -EINVAL;
        goto out_unlock;
    }
    /* Fold counters and histograms into the family's retired totals; gauges die. */
    for (unsigned i = 0; i < f->_nfields; i++)
        if (f->_fields[i].kind != STATS_GAUGE)
            block_sum_LH(r, rec->base + f->_ff[i].off, f->_ff[i].width,
                         &f->_retired[f->_ff[i].off]);
    block_own_LH(r, rec->base, f->_nslots, 0, UINT32_MAX);
    vec_push(&f->_freeb, rec->base);
    f->_objs.v[rec->pos] = HOLE;
    vec_push(&f->_holes, rec->pos);
    f->_nlive--;
    hash_remove_LH(r, o.index);
    r->_name_bytes -= rec->strs_len;
    BASE_FREE(rec->strs);
    rec->fam = NULL;
    rec->gen = 0;
    rec->pos = r->_free_rec;
    r->_free_rec = o.index + 1;
out_unlock:
    pthread_mutex_unlock(&r->_lock);
    return rc;
}

int stats_object_find(stats_registry_t *r, stats_family_t *f, const char *identity,
                      stats_obj_t *out)
{
    pthread_mutex_lock(&r->_lock);
    uint32_t i = f && identity ? rec_find_LH(r, f, identity) : 0;
    if (i) {
        out->base = r->_recs[i - 1].base;
        out->gen = r->_recs[i - 1].gen;
        out->index = i - 1;
    }
    pthread_mutex_unlock(&r->_lock);
    return i ? 0 : -ENOENT;
}

/* ---------------------------------------------------------------------------------------
 * reading
 * ------------------------------------------------------------------------------------- */

/* Per-slot totals of family f (retired + live objects over all shards) into out[nslots]. */
static void fam_totals_LH(stats_registry_t *r, stats_family_t *f, uint64_t *out)
{
    memcpy(out, f->_retired, f->_nslots * sizeof(uint64_t));
    for (uint32_t p = 0; p < f->_objs.n; p++) {
        uint32_t idx = f->_objs.v[p];
        if (idx != HOLE)
            block_sum_LH(r, r->_recs[idx].base, f->_nslots, out);
    }
}

/* The value a derived field adds to its own slots, with `cache` (source family -> per-slot
 * totals) filled on demand.  cache may be NULL (computed each time). */
typedef struct totals_cache {
    stats_family_t *fam[8]; /* source families computed so far */
    uint64_t       *tot[8]; /* their per-slot totals */
    unsigned        n;      /* entries used */
} totals_cache_t;

static uint64_t derived_LH(stats_registry_t *r, const fam_field_t *ff, totals_cache_t *cache)
{
    stats_family_t *src = ff->src;
    if (ff->src_field < 0)
        return (uint64_t)src->_nlive + src->_nsink; /* things without stats count too */
    uint32_t off = src->_ff[ff->src_field].off;
    if (cache) {
        for (unsigned i = 0; i < cache->n; i++)
            if (cache->fam[i] == src)
                return cache->tot[i][off];
        if (cache->n < 8) {
            uint64_t *t = base_malloc(src->_nslots * sizeof(uint64_t));
            fam_totals_LH(r, src, t);
            cache->fam[cache->n] = src;
            cache->tot[cache->n++] = t;
            return t[off];
        }
    }
    uint64_t v = src->_retired[off];
    for (uint32_t p = 0; p < src->_objs.n; p++) {
        uint32_t idx = src->_objs.v[p];
        if (idx != HOLE)
            v += slot_sum_LH(r, r->_recs[idx].base + off);
    }
    return v;
}

static void cache_fini(totals_cache_t *c)
{
    for (unsigned i = 0; i < c->n; i++)
        free(c->tot[i]);
    c->n = 0;
}

/* Field of f at block offset off, or -1. */
static int field_at(const stats_family_t *f, uint32_t off)
{
    for (unsigned i = 0; i < f->_nfields; i++)
        if (f->_ff[i].off == off)
            return (int)i;
    return -1;
}

/* Fill out from per-slot sums v[] of one field. */
static void value_fill(stats_value_t *out, const stats_field_t *fd, const uint64_t *v)
{
    memset(out, 0, sizeof(*out));
    out->kind = fd->kind;
    if (fd->kind != STATS_HISTOGRAM) {
        out->value = v[0];
        return;
    }
    out->nbuckets = fd->buckets;
    for (uint32_t k = 0; k <= fd->buckets; k++) {
        out->buckets[k] = v[k];
        out->value += v[k];
    }
    out->sum = v[fd->buckets + 1];
}

int stats_value_get(stats_registry_t *r, stats_handle_t h, stats_value_t *out)
{
    int rc = -ESTALE;
    pthread_mutex_lock(&r->_lock);
    if (h.gen == 0 || h.id >= r->_hwm)
        goto out_unlock;
    if (atomic_load_explicit(&r->_gens[h.id], memory_order_relaxed) != h.gen)
        goto out_unlock;
    objrec_t       *rec = &r->_recs[r->_owner[h.id]];
    stats_family_t *f = rec->fam;
    int             fi = field_at(f, h.id - rec->base);
    if (fi < 0) {
        rc = -EINVAL; /* inside a histogram */
        goto out_unlock;
    }
    uint64_t v[STATS_HIST_SLOTS(STATS_HIST_MAX_BUCKETS)] = {0};
    block_sum_LH(r, h.id, f->_ff[fi].width, v);
    if (f->_ff[fi].src)
        v[0] += derived_LH(r, &f->_ff[fi], NULL);
    value_fill(out, &f->_fields[fi], v);
    rc = 0;
out_unlock:
    pthread_mutex_unlock(&r->_lock);
    return rc;
}

int stats_lookup(stats_registry_t *r, const char *name, stats_handle_t *h, stats_kind_t *kind)
{
    int rc = -ENOENT;
    pthread_mutex_lock(&r->_lock);
    const char *dot = strchr(name, '.');
    if (!dot) {
        uint32_t i = rec_find_LH(r, r->_plain[0], name); /* either kind */
        if (i) {
            *h = (stats_handle_t){r->_recs[i - 1].base, r->_recs[i - 1].gen};
            *kind = r->_recs[i - 1].fam->_fields[0].kind;
            rc = 0;
        }
        goto out_unlock;
    }
    stats_family_t *f = family_find_LH(r, name, (size_t)(dot - name));
    if (!f)
        goto out_unlock;
    const char *field = f->_singleton ? dot + 1 : strrchr(name, '.') + 1;
    if (!f->_singleton && field - 1 == dot)
        goto out_unlock; /* "family.field": no identity */
    stats_obj_t o = f->_single;
    if (!f->_singleton) {
        size_t len = (size_t)(field - 1 - (dot + 1));
        char  *ident = base_strndup(dot + 1, len);
        uint32_t i = rec_find_LH(r, f, ident);
        free(ident);
        if (!i)
            goto out_unlock;
        o = (stats_obj_t){r->_recs[i - 1].base, r->_recs[i - 1].gen, i - 1};
    }
    for (unsigned i = 0; i < f->_nfields; i++) {
        if (strcmp(f->_fields[i].name, field) == 0) {
            *h = stats_obj_stat(o, f->_ff[i].off);
            *kind = f->_fields[i].kind;
            rc = 0;
            break;
        }
    }
out_unlock:
    pthread_mutex_unlock(&r->_lock);
    return rc;
}

int stats_family_totals(stats_registry_t *r, stats_family_t *f, uint64_t *out)
{
    uint64_t *t = base_malloc(f->_nslots * sizeof(uint64_t));
    pthread_mutex_lock(&r->_lock);
    fam_totals_LH(r, f, t);
    for (unsigned i = 0; i < f->_nfields; i++) {
        const fam_field_t *ff = &f->_ff[i];
        out[i] = t[ff->off];
        if (f->_fields[i].kind == STATS_HISTOGRAM)
            for (uint32_t k = 1; k <= f->_fields[i].buckets; k++)
                out[i] += t[ff->off + k];
        if (ff->src)
            out[i] += derived_LH(r, ff, NULL);
    }
    pthread_mutex_unlock(&r->_lock);
    free(t);
    return 0;
}

double stats_hist_quantile(const uint64_t *buckets, uint32_t nbuckets, double q)
{
    uint64_t count = 0;
    for (uint32_t k = 0; k <= nbuckets; k++)
        count += buckets[k];
    if (count == 0)
        return 0;
    if (q < 0)
        q = 0;
    if (q > 1)
        q = 1;
    double   rank = q * (double)count;
    uint64_t cum = 0;
    for (uint32_t k = 0; k <= nbuckets; k++) {
        if (buckets[k] == 0 || (double)(cum + buckets[k]) < rank) {
            cum += buckets[k];
            continue;
        }
        if (k == nbuckets) /* +Inf: the last finite bound, as Prometheus does */
            return (double)(1ull << (nbuckets - 1));
        double lo = k == 0 ? 0 : (double)(1ull << (k - 1));
        double hi = (double)(1ull << k);
        return lo + (hi - lo) * ((rank - (double)cum) / (double)buckets[k]);
    }
    return (double)(1ull << (nbuckets - 1));
}

/* ---------------------------------------------------------------------------------------
 * glob
 * ------------------------------------------------------------------------------------- */

bool stats_glob_match(const char *g, const char *s, size_t n)
{
    const char *star_g = NULL; /* glob after the last `*` seen */
    size_t      star_s = 0;    /* where that `*` started matching */
    size_t      i = 0;
    while (i < n) {
        if (*g == '*') {
            while (*g == '*')
                g++;
            if (!*g)
                return true;
            star_g = g;
            star_s = i;
            continue;
        }
        if (*g == '?') {
            g++;
            i++;
            continue;
        }
        char        c = *g;
        const char *next = g + 1;
        if (c == '\\' && g[1]) {
            c = g[1];
            next = g + 2;
        }
        if (c && c == s[i]) {
            g = next;
            i++;
            continue;
        }
        if (!star_g)
            return false;
        g = star_g;
        i = ++star_s;
    }
    while (*g == '*')
        g++;
    return *g == 0;
}

/* ---------------------------------------------------------------------------------------
 * iterator
 * ------------------------------------------------------------------------------------- */

/* One object in an iterator batch. */
typedef struct batch_obj {
    uint32_t base;    /* first slot */
    uint32_t gen;     /* generation */
    uint32_t str_off; /* its strings in it->_str */
    uint32_t val_off; /* its values in it->_vals */
} batch_obj_t;

struct stats_iter {
    stats_registry_t *_r;        /* the registry */
    char             *_glob;     /* copy, or NULL */
    unsigned          _flags;    /* STATS_ITER_* */
    char             *_only_fam; /* the glob's literal first part, or NULL */
    size_t            _only_len; /* its length */
    const char       *_only_field; /* the glob's literal last part, or NULL */
    bool              _no_plain; /* the glob cannot match a plain stat */
    bool              _no_fams;  /* the glob can match only a plain stat */
    bool              _literal;  /* the glob has no wildcard */
    /* position of the next batch */
    uint32_t          _fam;      /* family index: in r->_fams, or in r->_plain once _in_plain */
    bool              _in_plain; /* the visible families are done */
    uint32_t          _pos;      /* next position in the family's _objs */
    bool              _done;     /* nothing left */
    /* the current batch */
    stats_family_t   *_bfam;     /* its family */
    bool              _bwhole;   /* the batch is the whole family, served field by field */
    uint32_t          _bonly;    /* the one field the glob can match, or UINT32_MAX for all */
    batch_obj_t      *_bobjs;    /* objects */
    uint32_t          _nb;       /* objects in the batch */
    uint32_t          _bcap;     /* allocated */
    uint64_t         *_vals;     /* values, width per object */
    size_t            _valcap;   /* allocated */
    char             *_str;      /* copied strings */
    size_t            _nstr;     /* used */
    size_t            _strcap;   /* allocated */
    uint32_t          _bi;       /* next object of the batch */
    uint32_t          _bf;       /* next field (of that object, or for all objects) */
    uint32_t          _chunk;    /* objects added since the mutex was last taken */
    totals_cache_t    _cache;    /* derived fields' source totals */
    _Atomic uint64_t **_sh;      /* the shards' slot arrays, as of the last hold */
    uint32_t          _nsh;      /* count */
    uint32_t          _shcap;    /* allocated */
    uint32_t          _h0;       /* first batch object added in the current hold */
    size_t            _need[3];  /* objects, values, string bytes the batch must hold next */
    stats_sample_t    _s;        /* what next() returns */
    char             *_name;     /* full name buffer */
    size_t            _namecap;  /* allocated */
};

stats_iter_t *stats_iter_new(stats_registry_t *r, const char *glob, unsigned flags)
{
    stats_iter_t *it = base_calloc(1, sizeof(*it));
    it->_r = r;
    if ((flags & STATS_ITER_ALL) == 0)
        flags |= STATS_ITER_ALL;
    it->_flags = flags;
    if (glob && strcmp(glob, "*") != 0) {
        it->_glob = base_strdup(glob);
        it->_flags |= STATS_ITER_NAMES;
        /* Narrow the walk: a literal first part names the family; a literal last part the
         * field; a dot means no plain stat (their names have none). */
        bool        wild = false, any_wild = false;
        const char *p = glob, *last = glob;
        size_t      first_len = 0;
        bool        dot = false;
        for (; *p; p++) {
            if (*p == '*' || *p == '?' || *p == '\\') {
                any_wild = true;
                if (!dot)
                    wild = true;
            }
            if (*p == '.') {
                if (!dot)
                    first_len = (size_t)(p - glob);
                dot = true;
                last = p + 1;
            }
        }
        it->_literal = !any_wild;
        it->_no_plain = dot;
        it->_no_fams = !dot && !any_wild;
        if (dot && !wild) {
            it->_only_fam = base_strndup(glob, first_len);
            it->_only_len = first_len;
        }
        if (dot && !strpbrk(last, "*?\\"))
            it->_only_field = last;
    }
    return it;
}

void stats_iter_free(stats_iter_t *it)
{
    if (!it)
        return;
    cache_fini(&it->_cache);
    free(it->_glob);
    free(it->_only_fam);
    free(it->_bobjs);
    free(it->_vals);
    free(it->_str);
    free(it->_name);
    free(it->_sh);
    free(it);
}

static bool fam_wanted(const stats_iter_t *it, const stats_family_t *f)
{
    if (f->_plain)
        return (it->_flags & STATS_ITER_PLAIN) && !it->_no_plain;
    if (it->_no_fams)
        return false;
    if (!(it->_flags & (f->_singleton ? STATS_ITER_SINGLETONS : STATS_ITER_OBJECTS)))
        return false;
    return !it->_only_fam ||
           (strlen(f->_name) == it->_only_len && memcmp(f->_name, it->_only_fam, it->_only_len) == 0);
}

static bool field_wanted(const stats_iter_t *it, const stats_family_t *f, uint32_t field)
{
    return !it->_only_field || f->_plain || strcmp(f->_fields[field].name, it->_only_field) == 0;
}

/* Make room in the batch for `objs` objects, `vals` values and `str` bytes of strings in
 * all (doubling).  Called with the mutex released, except for a single object: a batch that
 * grows to a whole family copies megabytes, which no writer should wait for. */
static void batch_grow(stats_iter_t *it, size_t objs, size_t vals, size_t str)
{
    if (objs > it->_bcap) {
        it->_bcap = objs * 2 > 64 ? (uint32_t)(objs * 2) : 64;
        it->_bobjs = base_realloc(it->_bobjs, it->_bcap * sizeof(*it->_bobjs));
    }
    if (vals > it->_valcap) {
        it->_valcap = vals * 2;
        it->_vals = base_realloc(it->_vals, it->_valcap * sizeof(uint64_t));
    }
    if (str > it->_strcap) {
        it->_strcap = str * 2 + 256;
        it->_str = base_realloc(it->_str, it->_strcap);
    }
}

/* Copy object `idx` into the batch with `width` values from block offset `off`: summed over
 * the shards now (plus a derived value for a singleton's derived field) if `now`, else
 * zeroed, to be summed once the mutex is released (hold_end_unlock).  Returns false, adding
 * nothing, when the batch has no room: the caller grows it (batch_grow, it->_need) with the
 * mutex released - or here, if `grow`. */
static bool batch_add_LH(stats_iter_t *it, uint32_t idx, uint32_t off, uint32_t width, bool now,
                         bool grow)
{
    stats_registry_t *r = it->_r;
    objrec_t         *o = &r->_recs[idx];
    size_t            val_off = it->_nb ? it->_bobjs[it->_nb - 1].val_off + width : 0;
    if (it->_nb == it->_bcap || val_off + width > it->_valcap ||
        it->_nstr + o->strs_len > it->_strcap) {
        it->_need[0] = (size_t)it->_nb + 1;
        it->_need[1] = val_off + width;
        it->_need[2] = it->_nstr + o->strs_len;
        if (!grow)
            return false;
        batch_grow(it, it->_need[0], it->_need[1], it->_need[2]);
    }
    batch_obj_t *b = &it->_bobjs[it->_nb];
    b->base = o->base;
    b->gen = o->gen;
    b->str_off = (uint32_t)it->_nstr;
    b->val_off = (uint32_t)val_off;
    if (o->strs_len)
        memcpy(it->_str + it->_nstr, o->strs, o->strs_len);
    it->_nstr += o->strs_len;
    uint64_t *v = &it->_vals[val_off];
    memset(v, 0, width * sizeof(uint64_t));
    if (now)
        block_sum_LH(r, o->base + off, width, v);
    stats_family_t *f = o->fam;
    if (f->_derived) {
        for (unsigned i = 0; i < f->_nfields; i++) {
            const fam_field_t *ff = &f->_ff[i];
            if (ff->src && ff->off >= off && ff->off < off + width)
                v[ff->off - off] += derived_LH(r, ff, &it->_cache);
        }
    }
    it->_nb++;
    return true;
}

/* End a hold of `_lock` (the caller holds it): unlock, and sum the slots of the batch's
 * objects added during the hold [_h0, _nb) over the shards without the lock, which is most
 * of a walk's work - so a writer (object creation, retirement) rarely finds the mutex taken,
 * and never for long.  What makes that safe:
 *   - the shard list is copied under the lock, and a shard freed meanwhile stays mapped
 *     while any walk is summing (`_walkers`, `_dead`);
 *   - a shard freed meanwhile was folded into the base shard: `_shard_seq` says so, and the
 *     hold's objects are summed again under the lock (rare: a thread exiting);
 *   - an object retired meanwhile, its block perhaps zeroed and reused: its generation is
 *     checked after the slots were read (acquire fence; block_alloc_LH's release fence comes
 *     before the zeroing), and a changed one drops the object from the batch (`gen` 0), as
 *     if it had been retired before the walk reached it.  So values are never shown under
 *     another object's name.
 * Objects of derived families were summed under the lock (`now`): they are singletons. */
static void hold_end_unlock(stats_iter_t *it)
{
    stats_registry_t *r = it->_r;
    uint32_t          h0 = it->_h0, nb = it->_nb;
    if (h0 >= nb || it->_bfam->_derived) {
        pthread_mutex_unlock(&r->_lock);
        return;
    }
    uint32_t n = r->_nshards - r->_sum_from;
    if (n > it->_shcap) {
        it->_shcap = n;
        it->_sh = base_realloc(it->_sh, n * sizeof(*it->_sh));
    }
    for (uint32_t i = 0; i < n; i++)
        it->_sh[i] = r->_shards[r->_sum_from + i]->_slots;
    it->_nsh = n;
    uint32_t seq = atomic_load_explicit(&r->_shard_seq, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->_walkers, 1, memory_order_relaxed);
    uint32_t width = it->_bfam->_nslots;
    pthread_mutex_unlock(&r->_lock);
    STATS_TEST_UNLOCKED_HOOK(r);

    for (uint32_t k = h0; k < nb; k++) {
        batch_obj_t *b = &it->_bobjs[k];
        uint64_t    *v = &it->_vals[b->val_off];
        for (uint32_t i = 0; i < n; i++) {
            _Atomic uint64_t *p = &it->_sh[i][b->base];
            for (uint32_t j = 0; j < width; j++)
                v[j] += atomic_load_explicit(&p[j], memory_order_relaxed);
        }
    }
    atomic_thread_fence(memory_order_acquire);
    for (uint32_t k = h0; k < nb; k++) {
        batch_obj_t *b = &it->_bobjs[k];
        if (atomic_load_explicit(&r->_gens[b->base], memory_order_relaxed) != b->gen)
            b->gen = 0; /* retired while we read it */
    }
    if (atomic_load_explicit(&r->_shard_seq, memory_order_relaxed) != seq) {
        /* A shard was folded meanwhile: sum again, under the lock. */
        lock_reader(r);
        for (uint32_t k = h0; k < nb; k++) {
            batch_obj_t *b = &it->_bobjs[k];
            uint64_t    *v = &it->_vals[b->val_off];
            memset(v, 0, width * sizeof(uint64_t));
            if (b->gen && atomic_load_explicit(&r->_gens[b->base], memory_order_relaxed) == b->gen)
                block_sum_LH(r, b->base, width, v);
            else
                b->gen = 0;
        }
        pthread_mutex_unlock(&r->_lock);
    }
    atomic_fetch_sub_explicit(&r->_walkers, 1, memory_order_release);
}

/* Move the walk to the next family. */
static void fam_next(stats_iter_t *it)
{
    it->_fam++;
    it->_pos = 0;
}

/* Fill the next batch; false at the end.  Object by object (or field by field over a family
 * of one field), a batch is up to BATCH_OBJECTS objects or BATCH_SLOTS values, taken in one
 * mutex hold.  Field by field over a family of several fields, the batch is the whole family,
 * taken in such chunks with the mutex released in between, so that next() can serve one
 * field for every object, then the next field (Prometheus's grouping) from one pass over the
 * shards instead of one pass per field.  Either way a hold ends early, after
 * READER_MIN_OBJECTS objects, as soon as a writer waits, and ends when the batch needs more
 * room (see "writers first" at the top). */
static bool batch_fill(stats_iter_t *it)
{
    stats_registry_t *r = it->_r;
    it->_nb = 0;
    it->_nstr = 0;
    it->_bi = 0;
    it->_bf = 0;
    if (it->_done)
        return false;
    lock_reader(r);
    if (r->_ndead && atomic_load_explicit(&r->_walkers, memory_order_acquire) == 0) {
        dead_release_LH_unlock(r);
        lock_reader(r);
    }
    it->_h0 = 0;
    bool grow = false; /* the batch ran out of room: grow it with the mutex released */
    for (;;) {
        stats_family_t *f = NULL;
        if (!it->_in_plain && it->_fam >= r->_nfams) {
            it->_in_plain = true; /* families created from now on are not visited */
            it->_fam = 0;
        }
        if (!it->_in_plain)
            f = r->_fams[it->_fam];
        else if (it->_fam < 2)
            f = r->_plain[it->_fam];
        if (!f) {
            it->_done = true;
            break;
        }
        if (!fam_wanted(it, f)) {
            fam_next(it);
            continue;
        }
        it->_bfam = f;
        it->_bonly = UINT32_MAX;
        if (it->_only_field && !f->_plain) {
            uint32_t k;
            for (k = 0; k < f->_nfields && !field_wanted(it, f, k); k++)
                ;
            if (k == f->_nfields) { /* no field of this family can match */
                fam_next(it);
                continue;
            }
            it->_bonly = k;
        }
        it->_bwhole = (it->_flags & STATS_ITER_BY_FIELD) && f->_nfields > 1 &&
                      it->_bonly == UINT32_MAX;
        if (it->_literal && (f->_plain || !f->_singleton) && it->_pos == 0) {
            /* An exact name: one lookup, not a walk.  For a labelled family the identity is
             * what lies between the first and the last dot. */
            uint32_t i;
            if (f->_plain) {
                i = rec_find_LH(r, f, it->_glob); /* both plain families answer it ... */
                if (i && r->_recs[i - 1].fam != f)
                    i = 0; /* ... but only one holds it */
            } else {
                const char *id = it->_glob + it->_only_len + 1;
                const char *end = strrchr(it->_glob, '.');
                char       *ident = base_strndup(id, end > id ? (size_t)(end - id) : 0);
                i = end >= id ? rec_find_LH(r, f, ident) : 0;
                free(ident);
            }
            if (i)
                batch_add_LH(it, i - 1, 0, f->_nslots, f->_derived, true);
            it->_pos = f->_objs.n;
        }
        uint32_t maxobj = BATCH_SLOTS / f->_nslots;
        if (maxobj > BATCH_OBJECTS)
            maxobj = BATCH_OBJECTS;
        if (maxobj == 0)
            maxobj = 1;
        it->_chunk = 0;
        for (;;) {
            bool     yield = false; /* a writer waits */
            uint32_t seen = 0;      /* positions visited in this hold */
            grow = false;
            while (it->_pos < f->_objs.n && it->_chunk < maxobj) {
                if (seen++ >= READER_MIN_OBJECTS && writer_waiting(r)) {
                    yield = true;
                    break;
                }
                uint32_t idx = f->_objs.v[it->_pos];
                if (idx != HOLE) {
                    if (!batch_add_LH(it, idx, 0, f->_nslots, f->_derived, false)) {
                        grow = true;
                        break;
                    }
                    it->_chunk++;
                }
                it->_pos++;
            }
            if (it->_pos >= f->_objs.n)
                break;
            if (!it->_bwhole && (it->_nb || !(yield || grow)))
                break; /* a batch to hand out (the mutex is released below) */
            /* Let object creation and retirement in: between chunks, and whenever a writer
             * waits (lock_reader lets announced writers go first). */
            hold_end_unlock(it);
            if (grow)
                batch_grow(it, it->_need[0], it->_need[1], it->_need[2]);
            grow = false;
            lock_reader(r);
            it->_h0 = it->_nb;
            it->_chunk = 0;
        }
        if (it->_pos >= f->_objs.n)
            fam_next(it);
        if (it->_nb)
            break;
    }
    hold_end_unlock(it);
    if (grow) /* for the next batch (the one in hand keeps its offsets) */
        batch_grow(it, it->_need[0], it->_need[1], it->_need[2]);
    return it->_nb > 0;
}

size_t stats_sample_name(const stats_sample_t *s, char *buf, size_t cap)
{
    size_t      n = 0;
    const char *parts[3] = {s->stem, s->nlabels ? s->labels[0] : NULL,
                            s->field_name && *s->field_name ? s->field_name : NULL};
    for (unsigned i = 0; i < 3; i++) {
        if (!parts[i])
            continue;
        if (n) {
            if (n + 1 < cap)
                buf[n] = '.';
            n++;
        }
        size_t l = strlen(parts[i]);
        if (n < cap)
            memcpy(buf + n, parts[i], n + l < cap ? l : cap - n - 1);
        n += l;
    }
    if (cap)
        buf[n < cap ? n : cap - 1] = 0;
    return n;
}

/* The sample's family-wide fields, once per batch. */
static void sample_batch_start(stats_iter_t *it)
{
    stats_sample_t *s = &it->_s;
    stats_family_t *f = it->_bfam;
    memset(s, 0, sizeof(*s));
    s->family = f->_plain ? NULL : f;
    s->field = UINT32_MAX; /* no field set yet */
    if (!f->_plain) {
        s->stem = f->_name;
        s->nlabels = f->_nlabels;
        for (unsigned i = 0; i < f->_nlabels; i++)
            s->label_keys[i] = f->_label_keys[i];
    } else {
        s->field_name = "";
    }
}

/* The sample's per-object fields: label values (or a plain stat's name, help, prom). */
static void sample_object(stats_iter_t *it, const batch_obj_t *b)
{
    stats_sample_t *s = &it->_s;
    const char     *strs = it->_str + b->str_off;
    if (it->_bfam->_plain) {
        s->stem = strs;
        s->help = strs + strlen(strs) + 1;
        s->prom = s->help + strlen(s->help) + 1;
        if (!*s->help)
            s->help = NULL;
        return;
    }
    for (unsigned i = 0; i < s->nlabels; i++) {
        size_t n = strlen(strs);
        s->labels[i] = strs;
        s->label_lens[i] = n;
        strs += n + 1;
    }
}

/* The sample's per-field fields. */
static void sample_field(stats_iter_t *it, uint32_t field)
{
    stats_sample_t      *s = &it->_s;
    stats_family_t      *f = it->_bfam;
    const stats_field_t *fd = &f->_fields[field];
    s->field = field;
    s->kind = fd->kind;
    s->nbuckets = fd->buckets;
    s->sum = 0;
    s->buckets = NULL;
    if (!f->_plain) {
        s->field_name = fd->name;
        s->help = fd->help;
        s->prom = fd->prom;
    }
}

const stats_sample_t *stats_iter_next(stats_iter_t *it)
{
    stats_sample_t *s = &it->_s;
    for (;;) {
        if (it->_bi >= it->_nb) {
            if (!batch_fill(it))
                return NULL;
            sample_batch_start(it);
        }
        stats_family_t *f = it->_bfam;
        batch_obj_t    *b = &it->_bobjs[it->_bi];
        uint32_t        field, voff;
        if (it->_bwhole) {
            field = it->_bf;
            voff = f->_ff[field].off;
            if (++it->_bi >= it->_nb && ++it->_bf < f->_nfields)
                it->_bi = 0; /* the next field, from the first object again */
            if (b->gen == 0)
                continue; /* retired while the batch was summed */
            sample_object(it, b);
        } else {
            if (b->gen == 0) {
                it->_bf = 0;
                it->_bi++;
                continue;
            }
            field = it->_bf;
            voff = f->_ff[field].off;
            if (field == 0)
                sample_object(it, b);
            if (++it->_bf >= f->_nfields) {
                it->_bf = 0;
                it->_bi++;
            }
            if (it->_bonly != UINT32_MAX && field != it->_bonly)
                continue;
        }
        if (field != s->field)
            sample_field(it, field);
        const uint64_t *v = &it->_vals[b->val_off + voff];
        s->handle.id = b->base + f->_ff[field].off;
        s->handle.gen = b->gen;
        if (s->kind == STATS_HISTOGRAM) {
            s->buckets = v;
            s->value = 0;
            for (uint32_t k = 0; k <= s->nbuckets; k++)
                s->value += v[k];
            s->sum = v[s->nbuckets + 1];
        } else {
            s->value = v[0];
        }
        if (it->_flags & STATS_ITER_NAMES) {
            size_t n = stats_sample_name(s, it->_name, it->_namecap);
            if (n + 1 > it->_namecap) {
                it->_namecap = n + 64;
                it->_name = base_realloc(it->_name, it->_namecap);
                stats_sample_name(s, it->_name, it->_namecap);
            }
            s->name = it->_name;
            s->name_len = n;
            if (it->_glob && !stats_glob_match(it->_glob, it->_name, n))
                continue;
        }
        return s;
    }
}

/* ---------------------------------------------------------------------------------------
 * accounting
 * ------------------------------------------------------------------------------------- */

void stats_registry_info(stats_registry_t *r, stats_info_t *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&r->_lock);
    out->families = r->_nfams + 2;
    out->shards = r->_nshards - 1; /* the base shard is the registry's own */
    for (uint32_t i = 0; i < r->_nfams + 2; i++) {
        stats_family_t *f = i < r->_nfams ? r->_fams[i] : r->_plain[i - r->_nfams];
        out->objects += f->_nlive;
        out->sinks += f->_nsink;
        out->stats += (uint64_t)f->_nlive * f->_nfields;
        out->slots += (uint64_t)f->_nlive * f->_nslots;
        out->registry_bytes += (f->_objs.cap + f->_holes.cap + f->_freeb.cap) * sizeof(uint32_t);
    }
    out->refused = r->_refused;
    out->slots_used = r->_hwm;
    out->slots_committed = r->_ncommit;
    out->shard_bytes = sizeof(stats_shard_t) + (uint64_t)r->_ncommit * sizeof(uint64_t);
    /* The per-slot generations and owners are registry memory, and so is the base shard
     * once a freed shard was folded into it (until then none of its pages is touched). */
    out->registry_bytes += r->_bytes + 2 * (uint64_t)r->_ncommit * sizeof(uint32_t) +
                           (r->_sum_from == 0 ? out->shard_bytes : 0);
    out->name_bytes = r->_name_bytes;
    pthread_mutex_unlock(&r->_lock);
}
