/* stats/stats.h: Junction's sharded stats - registry, per-thread shards, handles, snapshot
 * walks, glob matching and the Prometheus renderer.  The one public header of stats/
 * (stats/DESIGN.md: the names, the memory layout, the threads and the reasons).
 *
 * Threads: registry calls (stats_registry_*, stats_family_*, stats_object_*, stats_stat_new,
 * stats_shard_new/free, stats_lookup, stats_value_get, stats_iter_*, stats_prom_*) are
 * thread-safe and never for a hot path.  The inline writes (stats_counter_*, stats_gauge_*,
 * stats_hist_record, stats_obj_*) take the caller's OWN shard: only the thread that owns
 * `shard` may call them (the argument plays the part of a _WT/_CT suffix).
 *
 * Contracts (DESIGN.md "Retire and reuse", "Objects without stats: the sink"):
 * stats_object_retire() comes after every thread's last write to the object, each of which
 * happens-before it; any object may be written without a check (one without stats writes
 * into the sink, ids [0, STATS_SINK_SLOTS)).
 *
 * Errors: 0 or a negative errno (-EINVAL, -EEXIST, -ENOENT, -ESTALE retired handle, -ENOSPC
 * id space or limit reached); memory exhaustion aborts.  Nothing here logs.
 */
#ifndef JUNCTION_STATS_H
#define JUNCTION_STATS_H

#include <assert.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// clang-format off
/* -- geometry (see DESIGN.md "Memory layout") -- */
#define STATS_MAX_SLOTS        (1u << 24)  /* 16,777,216 ids; a shard reserves 8 B each of
                                              address space (128 MiB), used as ids are */
#define STATS_COMMIT_SLOTS     (1u << 15)  /* growth step: 32,768 ids (256 KiB per shard) */
#define STATS_MAX_BLOCK        4096u       /* slots one object of a family may take */
#define STATS_SINK_SLOTS       STATS_MAX_BLOCK /* ids [0, this) are the sink: written through
                                              objects without stats, owned and read by none */
#define STATS_MAX_LABELS       8                            /* label keys per family */
#define STATS_MAX_FIELDS       1024                         /* fields per family */
#define STATS_HIST_MAX_BUCKETS 48                           /* finite buckets per histogram */
/* Slots a histogram field with b finite buckets takes: b buckets, the +Inf bucket, the sum. */
#define STATS_HIST_SLOTS(b)    ((b) + 2u)
// clang-format on

typedef struct stats_registry stats_registry_t; /* names, ids, shards; one per process */
typedef struct stats_family   stats_family_t;   /* a fixed list of fields; permanent */
typedef struct stats_shard    stats_shard_t;    /* one thread's slots */
typedef struct stats_iter     stats_iter_t;     /* a snapshot walk */
typedef struct stats_prom     stats_prom_t;     /* a Prometheus rendering in progress */

typedef enum stats_kind {
    STATS_COUNTER = 0, /* u64, only goes up; shards summed; folded into totals on retire */
    STATS_GAUGE,       /* i64, up and down; shards summed; dies with its object */
    STATS_HISTOGRAM,   /* log2 buckets of u64 values (e.g. µs) + their sum; shards summed */
} stats_kind_t;

/* One stat (for a histogram: its first slot).  A value: copy it, keep it in the object it
 * counts for.  A handle with gen 0 is "no stat" (id < STATS_SINK_SLOTS): it reads -ESTALE,
 * and a write to it lands in the sink, never reported. */
typedef struct stats_handle {
    uint32_t id;  /* slot index in every shard */
    uint32_t gen; /* the object's generation; 0 = none */
} stats_handle_t;

/* A histogram stat: a handle plus its bucket count, so recording needs no lookup. */
typedef struct stats_hist {
    uint32_t id;      /* first slot: bucket 0 */
    uint32_t gen;     /* the object's generation; 0 = none */
    uint32_t buckets; /* finite buckets b: slots id .. id+b are buckets, id+b+1 the sum */
} stats_hist_t;

/* One object of a family (an address, a link, a connection): a block of consecutive slots,
 * one per field (STATS_HIST_SLOTS(b) per histogram field), starting at `base`.  Three kinds
 * of value (see "The sink rule" above), all safe to write through:
 *   live   gen != 0: its own block;
 *   sink   gen == 0, index != 0: what a failed stats_object_new() gives; base 0 (the sink);
 *          index says whose sink it is, for stats_object_retire();
 *   none   {0, 0, 0}: no object (never made); base 0 (the sink). */
typedef struct stats_obj {
    uint32_t base;  /* first slot id of the block; 0 unless live */
    uint32_t gen;   /* generation, unique per object ever created; 0 = sink or none */
    uint32_t index; /* live: the registry's record of the object (for retire); sink: its
                       family, tagged; none: 0 */
} stats_obj_t;

/* A field of a family, as given to stats_family_new() (which copies everything). */
typedef struct stats_field {
    const char  *name;    /* [A-Za-z_][A-Za-z0-9_]*: the last part of the stat's name */
    stats_kind_t kind;    /* counter, gauge or histogram */
    const char  *help;    /* one line for `# HELP` and stats.list; NULL = none */
    const char  *prom;    /* Prometheus metric name; NULL = <family prefix>_<snake_case(name)>,
                             plus `_total` for a counter */
    unsigned     buckets; /* histograms: finite buckets b (1..STATS_HIST_MAX_BUCKETS); bucket k
                             counts values v with 2^(k-1) < v <= 2^k (bucket 0: v <= 1) */
    const char  *sum_of;  /* derived: "family.field" of an earlier family; this stat reads as
                             its own slots plus that field's family total (live objects +
                             retired ones): a router total that needs no second increment */
    const char  *count_of; /* derived gauge: "family"; reads as its own slots plus the number
                              of live objects of that family (addrCount, linkCount ...) */
} stats_field_t;

/* A family, as given to stats_family_new(). */
typedef struct stats_family_def {
    const char          *name;        /* [A-Za-z_][A-Za-z0-9_]*, unique among families and
                                         plain stats */
    const stats_field_t *fields;      /* the fields, in slot order */
    unsigned             nfields;     /* 1..STATS_MAX_FIELDS; <= STATS_MAX_BLOCK slots */
    bool                 singleton;   /* one object, no labels: `router`, `process` */
    const char          *labels[STATS_MAX_LABELS]; /* label keys, e.g. {"link", "connection",
                                         "address"}; labels[0] names the object's identity and
                                         defaults to the family's name; NULL ends the list */
    const char          *prom_prefix; /* prefix of derived Prometheus names; NULL =
                                         "junction_<snake_case(name)>" */
} stats_family_def_t;

/* The offset of field i in a family's block, by the fixed rule: fields take slots in
 * declaration order, 1 for a counter or gauge, STATS_HIST_SLOTS(b) for a histogram.  So a
 * family without histograms has field i at offset i, and callers can use an enum. */
uint32_t stats_family_offset(const stats_family_t *f, unsigned field);

/* The object has stats of its own (it is live, or was until retired).  Any thread. */
static inline bool stats_obj_is_live(stats_obj_t o)
{
    return o.gen != 0;
}

/* The object is "none": never made (the zero value).  A sink object is not none: it stands
 * for a thing whose stats could not be made, and is retired like a live one.  Any thread. */
static inline bool stats_obj_is_none(stats_obj_t o)
{
    return o.gen == 0 && o.index == 0;
}

/* The handle of the stat at `offset` in object o's block; a histogram's is
 * stats_obj_hist().  For a sink or none object it is a sink handle (base 0, offset <
 * STATS_MAX_BLOCK = STATS_SINK_SLOTS).  Pure arithmetic, any thread. */
static inline stats_handle_t stats_obj_stat(stats_obj_t o, uint32_t offset)
{
    stats_handle_t h = {o.base + offset, o.gen};
    return h;
}

static inline stats_hist_t stats_obj_hist(stats_obj_t o, uint32_t offset, uint32_t buckets)
{
    stats_hist_t h = {o.base + offset, o.gen, buckets};
    return h;
}

/* ---------------------------------------------------------------------------------------
 * Shards and the hot path
 * ------------------------------------------------------------------------------------- */

/* A thread's shard: slot `id` is _slots[id].  The range is reserved once (STATS_MAX_SLOTS x
 * 8 B of address space, page-aligned, no other data in it, so no two shards ever share a
 * cache line); the registry makes the ids it hands out readable and writable before any
 * handle to them exists, and the kernel gives each 4 KiB page zero-filled at its first touch.
 * Nothing in it ever moves.  Allocated 64-byte aligned. */
struct stats_shard {
    _Atomic uint64_t *_slots; /* the slots; fixed for the shard's life */
    _Atomic uint32_t *_gens;  /* the registry's per-slot generations (debug checks only) */
};

/* A new shard for the calling thread; it covers every id the registry has handed out, and
 * the new ones as the registry grows.  Thread-safe.  The caller owns it and writes it from
 * one thread only. */
stats_shard_t *stats_shard_new(stats_registry_t *r);

/* Fold the shard's counts into the registry (so no total ever goes down) and free it.  Call
 * on the shard's thread after its last write, or after that thread ended.  NULL is fine. */
void stats_shard_free(stats_registry_t *r, stats_shard_t *s);

/* Add n to slot p, which only the calling thread writes.  Private to the functions below.
 *
 * What it does is atomic_store(p, atomic_load(p) + n), both relaxed: exact because there is
 * one writer, and a reader's relaxed load sees the old or the new value, never a torn one.
 * On x86-64 it is written as one `addq n, (p)` without a lock prefix (Linux's this_cpu_add()
 * for per-CPU counters is the same instruction, for the same reason): an aligned 8-byte store
 * is single-copy atomic there, and the asm tells the compiler it touches *p only, so a loop
 * keeps the shard's base in a register - the code is then instruction for instruction that of
 * a plain `a[id] += n` (see DESIGN.md).  Elsewhere, and under TSan or ASan (which must see
 * every access), the C11 form. */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define STATS__C11_ONLY 1
#endif
#endif
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__) || defined(STATS_NO_ASM)
#define STATS__C11_ONLY 1
#endif
static_assert(sizeof(_Atomic uint64_t) == sizeof(uint64_t), "a slot is a plain u64");

static inline void stats__add(_Atomic uint64_t *p, uint64_t n)
{
#if defined(__x86_64__) && !defined(STATS__C11_ONLY)
    __asm__ volatile("addq %1, %0" : "+m"(*(uint64_t *)p) : "er"(n));
#else
    atomic_store_explicit(p, atomic_load_explicit(p, memory_order_relaxed) + n,
                          memory_order_relaxed);
#endif
}

/* The slot of `id` in `s`.  Private to the inline functions below. */
static inline _Atomic uint64_t *stats__slot(stats_shard_t *s, uint32_t id)
{
    return &s->_slots[id];
}

#ifndef NDEBUG
/* Used only in assert(): the handle's generation is still its slot's, or the handle is a
 * sink handle (gen 0) inside the sink. */
static inline bool stats__is_live(const stats_shard_t *s, uint32_t id, uint32_t gen)
{
    if (gen == 0)
        return id < STATS_SINK_SLOTS;
    return atomic_load_explicit(&s->_gens[id], memory_order_relaxed) == gen;
}
#endif

/* Add n to a counter: a relaxed load and a relaxed store on the caller's own shard (on
 * x86-64 one `addq`, no lock prefix).  Owner thread of `s` only. */
static inline void stats_counter_add(stats_shard_t *s, stats_handle_t h, uint64_t n)
{
    assert(stats__is_live(s, h.id, h.gen));
    stats__add(stats__slot(s, h.id), n);
}

static inline void stats_counter_inc(stats_shard_t *s, stats_handle_t h)
{
    stats_counter_add(s, h, 1);
}

/* Add d (may be negative) to a gauge.  The gauge's value is the sum over shards, so a gauge
 * may go up on one thread and down on another.  Owner thread of `s` only. */
static inline void stats_gauge_add(stats_shard_t *s, stats_handle_t h, int64_t d)
{
    stats_counter_add(s, h, (uint64_t)d);
}

/* Set this shard's part of a gauge to v.  Meant for a gauge that one thread owns (it is then
 * the value); if other threads also add to it, the value is v plus their parts.  Owner
 * thread of `s` only. */
static inline void stats_gauge_set(stats_shard_t *s, stats_handle_t h, int64_t v)
{
    assert(stats__is_live(s, h.id, h.gen));
    atomic_store_explicit(stats__slot(s, h.id), (uint64_t)v, memory_order_relaxed);
}

/* The bucket a value falls in: 0 for v <= 1, k for 2^(k-1) < v <= 2^k, b (+Inf) above 2^(b-1). */
static inline uint32_t stats_hist_bucket(uint64_t v, uint32_t buckets)
{
    uint32_t k = v <= 1 ? 0 : 64u - (uint32_t)__builtin_clzll(v - 1);
    return k < buckets ? k : buckets;
}

/* Record one value (e.g. a latency in µs): one bucket and the sum.  Owner thread of `s`. */
static inline void stats_hist_record(stats_shard_t *s, stats_hist_t h, uint64_t v)
{
    _Atomic uint64_t *b = stats__slot(s, h.id);
    assert(stats__is_live(s, h.id, h.gen));
    stats__add(&b[stats_hist_bucket(v, h.buckets)], 1);
    stats__add(&b[h.buckets + 1], v);
}

/* Add n to the counter at `offset` of object o (live, sink or none: no check needed, see
 * "The sink rule").  The one way the router counts into an object.  Owner thread of `s`. */
static inline void stats_obj_add(stats_shard_t *s, stats_obj_t o, uint32_t offset, uint64_t n)
{
    stats_counter_add(s, stats_obj_stat(o, offset), n);
}

/* Set this shard's part of the gauge at `offset` of object o (live, sink or none).  Owner
 * thread of `s`. */
static inline void stats_obj_set(stats_shard_t *s, stats_obj_t o, uint32_t offset, int64_t v)
{
    stats_gauge_set(s, stats_obj_stat(o, offset), v);
}

/* Add delta (may be negative) to this shard's part of the gauge at `offset` of object o
 * (live, sink or none).  Owner thread of `s`. */
static inline void stats_obj_gauge_add(stats_shard_t *s, stats_obj_t o, uint32_t offset,
                                       int64_t delta)
{
    stats_gauge_add(s, stats_obj_stat(o, offset), delta);
}

/* ---------------------------------------------------------------------------------------
 * Registry
 * ------------------------------------------------------------------------------------- */

/* A new empty registry.  Caller owns it.  Thread-safe from then on. */
stats_registry_t *stats_registry_new(void);

/* Free the registry, its families and objects, and any shard not yet freed (their pointers
 * become invalid).  No other call on it may be running.  NULL is fine. */
void stats_registry_free(stats_registry_t *r);

/* Hand out at most `max_slots` slot ids beyond the sink (a cap on the high-water mark, so
 * on the memory stats may take: 8 B per slot per shard plus ~12 B shared); past it, object
 * creation fails with -ENOSPC unless a retired block of the same family can be reused.
 * Meant for start-up (the router's `maxStats`); lowering it later only stops growth.
 * Returns 0, or -EINVAL for 0 or more than STATS_MAX_SLOTS - STATS_SINK_SLOTS.
 * Thread-safe. */
int stats_registry_set_limit(stats_registry_t *r, uint64_t max_slots);

/* Create a family from `def` (copied).  On success *out is the family, permanent until
 * stats_registry_free().  A singleton family gets its one object now (stats_family_object).
 * Returns 0, -EINVAL (bad name, kind, bucket count, too many fields or slots, a sum_of or
 * count_of naming no earlier family and field, or sum_of a histogram), -EEXIST (the name is
 * taken by a family or a plain stat), -ENOSPC.  Thread-safe. */
int stats_family_new(stats_registry_t *r, const stats_family_def_t *def, stats_family_t **out);

/* The family called `name`, or NULL.  Thread-safe. */
stats_family_t *stats_family_find(stats_registry_t *r, const char *name);

/* The singleton family's object ({0,0,0} for other families).  Any thread. */
stats_obj_t stats_family_object(const stats_family_t *f);

/* Read-only facts about a family, for renderers and management (the strings live as long
 * as the family).  Any thread. */
const char *stats_family_name(const stats_family_t *f);
unsigned stats_family_nfields(const stats_family_t *f);
const stats_field_t *stats_family_field(const stats_family_t *f, unsigned field);
unsigned stats_family_nlabels(const stats_family_t *f);
const char *stats_family_label_key(const stats_family_t *f, unsigned i);
const char *stats_family_prom_name(const stats_family_t *f, unsigned field);
bool stats_family_is_singleton(const stats_family_t *f);

/* A new object of family f with label values labels[0 .. nlabels) (labels[0] is its
 * identity: unique among the family's live objects; any bytes but NUL, dots included).  Its
 * stats start at 0 in every shard.  Returns 0 and *out, -EINVAL (singleton family, NULL
 * label), -EEXIST (a live object has that identity), -ENOSPC (no room, see
 * stats_registry_set_limit).  On -EEXIST and -ENOSPC *out is f's sink object: writes through
 * it are discarded, f's count_of derivations count it until it is retired, and the caller
 * needs no other path (see "The sink rule"); on -EINVAL *out is none.  Thread-safe. */
int stats_object_new(stats_registry_t *r, stats_family_t *f, const char *const *labels,
                     stats_obj_t *out);

/* Retire object o: its counters and histograms (summed over shards) are added to its
 * family's retired totals, so family totals and the router totals derived from them
 * (sum_of) never go down; gauges die with it.  Its handles become stale at once; its block
 * of ids goes to the family's free list, and is zeroed in every shard when reused.  See the
 * retire contract at the top.  A sink object leaves its family's count_of.  Returns 0 or
 * -ESTALE (already retired, never made: a none object).  Thread-safe. */
int stats_object_retire(stats_registry_t *r, stats_obj_t o);

/* The live object of family f whose identity is `identity`: 0 and *out, or -ENOENT. */
int stats_object_find(stats_registry_t *r, stats_family_t *f, const char *identity,
                      stats_obj_t *out);

/* A plain, individually named stat (a counter or a gauge): `name` is [A-Za-z_][A-Za-z0-9_]*,
 * unique among plain stats and families; `help` and `prom` (Prometheus name, NULL = derived
 * as for fields) are copied.  Retire it with stats_object_retire(*obj) if it ever goes away.
 * Returns 0 and *out (+ *obj if not NULL), or -EINVAL, -EEXIST, -ENOSPC; on failure *out is
 * a sink handle {0, 0} and *obj none.  Thread-safe. */
int stats_stat_new(stats_registry_t *r, const char *name, stats_kind_t kind, const char *help,
                   const char *prom, stats_handle_t *out, stats_obj_t *obj);

/* ---------------------------------------------------------------------------------------
 * Reading
 * ------------------------------------------------------------------------------------- */

/* A stat's value summed over all shards (and over the family for derived fields). */
typedef struct stats_value {
    stats_kind_t kind;     /* what the numbers mean */
    uint64_t     value;    /* counter: total; gauge: (int64_t)value; histogram: count */
    uint64_t     sum;      /* histogram: sum of the values recorded */
    uint32_t     nbuckets; /* histogram: finite buckets b */
    uint64_t     buckets[STATS_HIST_MAX_BUCKETS + 1]; /* histogram: per-bucket counts
                                                         (not cumulative), [b] is +Inf */
} stats_value_t;

/* Read the stat behind handle h (a histogram's handle is its first slot: pass
 * {hist.id, hist.gen}).  Returns 0, or -ESTALE if its object was retired.  Thread-safe. */
int stats_value_get(stats_registry_t *r, stats_handle_t h, stats_value_t *out);

/* Resolve a full stat name ("address.M0examples.deliveriesEgress", "router.linkCount",
 * "uptimeSeconds") to its handle and kind.  Returns 0, or -ENOENT.  Thread-safe. */
int stats_lookup(stats_registry_t *r, const char *name, stats_handle_t *h, stats_kind_t *kind);

/* Family totals: for each field, the sum over live objects and shards, plus what retired
 * objects left (counters and histograms; gauges: live objects only).  Histograms give their
 * count.  out[] has nfields entries.  One pass under the mutex.  Returns 0.  Thread-safe. */
int stats_family_totals(stats_registry_t *r, stats_family_t *f, uint64_t *out);

/* Estimate the q-quantile (0 <= q <= 1) of a histogram from its per-bucket counts (b finite
 * + the +Inf one), interpolating linearly inside a bucket like Prometheus's
 * histogram_quantile(); values in +Inf report the last finite bound.  0 when empty.  Pure. */
double stats_hist_quantile(const uint64_t *buckets, uint32_t nbuckets, double q);

/* Shell-style match of a whole stat name (len bytes, no NUL needed) against `glob`: `*` any
 * run of characters (dots included: `address.*.deliveriesEgress` matches an address
 * "a.b"), `?` one character, `\c` the character c.  Pure, any thread. */
bool stats_glob_match(const char *glob, const char *name, size_t len);

/* A sample: one stat, as a snapshot walk sees it.  All pointers are valid until the next
 * stats_iter_next() or stats_iter_free() (the registry may free an object's labels as soon
 * as the walk moves on; the iterator keeps its own copies). */
typedef struct stats_sample {
    const stats_family_t *family;  /* the family; NULL for a plain stat */
    unsigned              field;   /* field index in the family (0 for a plain stat) */
    stats_kind_t          kind;    /* counter, gauge, histogram */
    const char           *name;    /* the full name, when the walk was asked for names (a
                                      glob or STATS_ITER_NAMES); else NULL */
    size_t                name_len; /* strlen(name) */
    const char           *stem;    /* family name, or a plain stat's name */
    const char           *field_name; /* field name, "" for a plain stat */
    const char           *help;    /* help text or NULL */
    const char           *prom;    /* Prometheus metric name */
    unsigned              nlabels; /* 0 for singletons and plain stats */
    const char           *label_keys[STATS_MAX_LABELS]; /* family's keys */
    const char           *labels[STATS_MAX_LABELS];     /* the object's values */
    size_t                label_lens[STATS_MAX_LABELS]; /* strlen() of each value */
    stats_handle_t        handle;  /* the stat's handle (stats_value_get, subscriptions) */
    uint64_t              value;   /* counter total, (int64_t) gauge, histogram count */
    uint64_t              sum;     /* histogram: sum */
    uint32_t              nbuckets; /* histogram: finite buckets b */
    const uint64_t       *buckets; /* histogram: b + 1 per-bucket counts, [b] is +Inf */
} stats_sample_t;

// clang-format off
enum stats_iter_flags {
    STATS_ITER_SINGLETONS = 1u << 0, /* visit singleton families (router, process) */
    STATS_ITER_PLAIN      = 1u << 1, /* visit plain stats */
    STATS_ITER_OBJECTS    = 1u << 2, /* visit families with labelled objects */
    STATS_ITER_ALL        = 7u,      /* all three (0 means this too) */
    STATS_ITER_BY_FIELD   = 1u << 3, /* inside a family: field by field, all objects for each
                                        (Prometheus groups); default: object by object */
    STATS_ITER_NAMES      = 1u << 4, /* fill sample.name */
};
// clang-format on

/* Start a walk over the live stats matching `glob` (NULL = all; copied), restricted by
 * `flags`.  Order: families in creation order (singleton and labelled ones as flags say),
 * then plain stats; inside a family, objects in the order of their places in the family's
 * list (creation order, except that a new object takes a retired one's place), object by
 * object or field by field.  A walk holds the registry's mutex
 * only while it fills a batch (a few hundred objects), so object creation waits at most that
 * long and writers never wait.  Each value is exact as of some instant during the walk; an
 * object created or retired during the walk may or may not appear; an object that lives
 * through the whole walk appears exactly once (once per field with BY_FIELD).  A glob whose
 * first dot-separated part is literal visits only that family.  Caller owns the iterator
 * (stats_iter_free).  Thread-safe with respect to the registry; an iterator itself is used
 * by one thread at a time.  Field by field, a family of several fields is taken whole (in
 * chunks, the mutex released in between) and then served: transient memory of 8 B per stat
 * of the largest family, plus its labels (see DESIGN.md "Reading"). */
stats_iter_t *stats_iter_new(stats_registry_t *r, const char *glob, unsigned flags);

/* The next sample, or NULL at the end. */
const stats_sample_t *stats_iter_next(stats_iter_t *it);

void stats_iter_free(stats_iter_t *it);

/* Format a sample's full name into buf (NUL-terminated, truncated to cap); returns the
 * length the full name has (like snprintf).  Any thread. */
size_t stats_sample_name(const stats_sample_t *s, char *buf, size_t cap);

/* ---------------------------------------------------------------------------------------
 * Prometheus text format 0.0.4 (stats_prom.c)
 *
 * Order: singleton families (the router's qdr_* totals first if the router family was
 * created first), then plain stats, then each labelled family field by field, every
 * sample of one metric together under one `# HELP` (if any) and `# TYPE`.  Counters are
 * `name{labels} value`, gauges signed, histograms `name_bucket{labels,le="1"}` cumulative
 * ... `le="+Inf"`, then `name_sum` and `name_count`.  Label values and help are escaped
 * (`\\`, `\"`, `\n`).  Memory: the pending text (16 KiB plus one sample) and the walk's
 * batch, which field by field is the largest family's values (8 B per stat) and labels -
 * never the text of the whole output.
 * ------------------------------------------------------------------------------------- */

/* Start rendering the stats matching `glob` (NULL = all).  Caller owns it.  Thread-safe. */
stats_prom_t *stats_prom_new(stats_registry_t *r, const char *glob);

/* Copy the next at most `cap` bytes of text into buf; returns how many, 0 once everything
 * was read.  Lines may be split across calls.  For event loops: call when the socket is
 * writable.  Same thread rules as an iterator. */
size_t stats_prom_read(stats_prom_t *p, char *buf, size_t cap);

void stats_prom_free(stats_prom_t *p);

/* A sink for rendered text: returns 0 to go on, a negative errno to stop. */
typedef int (*stats_write_fn)(void *ctx, const char *bytes, size_t len);

/* Render everything matching `glob` through `write`, in chunks of at most 16 KiB from one
 * heap buffer.  Returns 0, or the first negative value `write` returned (rendering stops
 * there).  Thread-safe. */
int stats_prom_write(stats_registry_t *r, const char *glob, stats_write_fn write, void *ctx);

/* Append a Prometheus name derived from `name` to dst: camelCase becomes snake_case, other
 * characters outside [A-Za-z0-9_:] become `_`.  Returns the length written (at most cap-1,
 * NUL-terminated).  Pure. */
size_t stats_prom_snake(const char *name, char *dst, size_t cap);

/* ---------------------------------------------------------------------------------------
 * Accounting
 * ------------------------------------------------------------------------------------- */

typedef struct stats_info {
    uint32_t families;       /* families, hidden ones for plain stats included */
    uint32_t objects;        /* live objects (plain stats included) */
    uint32_t sinks;          /* sink objects not yet retired (things without stats) */
    uint64_t refused;        /* object creations that failed for want of room, ever */
    uint32_t shards;         /* live shards */
    uint64_t stats;          /* live stats (fields of live objects; a histogram is one) */
    uint64_t slots;          /* live slots (a histogram takes b + 2) */
    uint64_t slots_used;     /* slot ids handed out so far (the high-water mark) */
    uint64_t slots_committed; /* ids usable in every shard (slots_used, rounded up) */
    uint64_t shard_bytes;    /* bytes one shard can hold resident (committed slots + struct);
                                pages never written stay unallocated */
    uint64_t registry_bytes; /* bytes the registry holds, names and labels excluded (the
                                base shard counts once a freed shard was folded into it) */
    uint64_t name_bytes;     /* bytes of names, label values, help texts */
} stats_info_t;

/* Sizes, for /metrics and the benchmark.  Thread-safe. */
void stats_registry_info(stats_registry_t *r, stats_info_t *out);

#endif
