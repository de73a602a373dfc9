/* core/routing/mobile.c: the mobile-address table (rules: mobile.h).
 *
 * Threads: _CT - a table belongs to the core thread.  Entries live in a hash map by key and
 * in a list in the order they were created (an absolute MAU lists keys in that order, as
 * qdrouterd walks its address list); an entry is freed once it has no local destination,
 * no remote router and is in neither pending list.
 */
#include "core/routing/mobile.h"

#include "core/base/base.h"
#include "core/base/map.h"

#include <string.h>

typedef struct entry entry_t;

struct entry {
    char    *key;       /* owned */
    size_t   len;       /* key bytes */
    uint64_t rnodes[2]; /* remote routers with a destination, by mask bit */
    int      hint;      /* treatment a remote router advertised first, -1 none */
    int      treatment; /* local treatment, advertised as the hint */
    bool     local;     /* has a local destination */
    bool     in_add;    /* in the pending add list */
    bool     in_del;    /* in the pending delete list */
    bool     doomed;    /* absolute MAU: not (yet) listed again */
    entry_t *prev;      /* creation order */
    entry_t *next;      /* ... */
};

/* A list of entries (pending adds or deletes) in insertion order. */
typedef struct elist {
    entry_t **e;   /* entries */
    uint32_t  n;   /* used */
    uint32_t  cap; /* allocated */
} elist_t;

struct core_rt_mobile {
    base_map_t     keys;                          /* key -> entry_t */
    entry_t       *head;                          /* creation order */
    entry_t       *tail;                          /* ... */
    uint32_t       count;                         /* entries */
    elist_t        adds;                          /* pending adds */
    elist_t        dels;                          /* pending deletes */
    int64_t        seq;                           /* own mobile_seq */
    int64_t        rseq[CORE_RT_MAX_ROUTERS];     /* per router: the sequence we hold */
    bool           mar_sent[CORE_RT_MAX_ROUTERS]; /* per router: MAR sent, no MAU since */
    codec_bytes_t *out_keys;                      /* views handed out by _tick and _exist */
    int64_t       *out_hints;                     /* ... */
    codec_bytes_t *out_dels;                      /* ... */
    uint32_t       out_cap;                       /* entries allocated in the three above */
};

core_rt_mobile_t *core_rt_mobile_new(void)
{
    core_rt_mobile_t *mob = base_calloc(1, sizeof(*mob));
    base_map_init(&mob->keys);
    return mob;
}

static void entry_free(core_rt_mobile_t *mob, entry_t *e)
{
    base_map_del(&mob->keys, e->key, e->len);
    if (e->prev)
        e->prev->next = e->next;
    else
        mob->head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    else
        mob->tail = e->prev;
    mob->count--;
    BASE_FREE(e->key);
    BASE_FREE(e);
}

void core_rt_mobile_free(core_rt_mobile_t *mob)
{
    if (!mob)
        return;
    while (mob->head)
        entry_free(mob, mob->head);
    base_map_fini(&mob->keys);
    BASE_FREE(mob->adds.e);
    BASE_FREE(mob->dels.e);
    BASE_FREE(mob->out_keys);
    BASE_FREE(mob->out_hints);
    BASE_FREE(mob->out_dels);
    BASE_FREE(mob);
}

static entry_t *entry_find(const core_rt_mobile_t *mob, const char *key, size_t len)
{
    return base_map_get(&mob->keys, key, len);
}

static entry_t *entry_get(core_rt_mobile_t *mob, const char *key, size_t len)
{
    entry_t *e = entry_find(mob, key, len);
    if (e)
        return e;
    e = base_calloc(1, sizeof(*e));
    e->key = base_strndup(key, len);
    e->len = len;
    e->hint = -1;
    e->prev = mob->tail;
    if (mob->tail)
        mob->tail->next = e;
    else
        mob->head = e;
    mob->tail = e;
    mob->count++;
    base_map_put(&mob->keys, e->key, len, e);
    return e;
}

static bool entry_idle(const entry_t *e)
{
    return !e->local && !e->in_add && !e->in_del && !e->rnodes[0] && !e->rnodes[1];
}

static void entry_check(core_rt_mobile_t *mob, entry_t *e)
{
    if (entry_idle(e))
        entry_free(mob, e);
}

static void elist_push(elist_t *l, entry_t *e)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->e = base_realloc(l->e, l->cap * sizeof(*l->e));
    }
    l->e[l->n++] = e;
}

static void elist_remove(elist_t *l, entry_t *e)
{
    for (uint32_t i = 0; i < l->n; i++) {
        if (l->e[i] == e) {
            memmove(&l->e[i], &l->e[i + 1], (l->n - i - 1) * sizeof(*l->e));
            l->n--;
            return;
        }
    }
}

bool core_rt_mobile_key_is_synced(const char *key, size_t len)
{
    return len > 0 && strchr("MCDEFH", key[0]) != NULL && key[0] != '\0';
}

void core_rt_mobile_local_add_CT(core_rt_mobile_t *mob, const char *key, size_t len, int treatment)
{
    if (!core_rt_mobile_key_is_synced(key, len))
        return;
    entry_t *e = entry_get(mob, key, len);
    e->local = true;
    e->treatment = treatment;
    if (e->in_add)
        return;
    if (e->in_del) { /* deleted and back inside one batch: nothing to tell */
        e->in_del = false;
        elist_remove(&mob->dels, e);
    } else {
        e->in_add = true;
        elist_push(&mob->adds, e);
    }
}

void core_rt_mobile_local_del_CT(core_rt_mobile_t *mob, const char *key, size_t len)
{
    entry_t *e = entry_find(mob, key, len);
    if (!e || !e->local)
        return;
    e->local = false;
    if (e->in_del)
        return;
    if (e->in_add) { /* added and gone inside one batch: nothing to tell */
        e->in_add = false;
        elist_remove(&mob->adds, e);
        entry_check(mob, e);
    } else {
        e->in_del = true;
        elist_push(&mob->dels, e);
    }
}

static void out_room(core_rt_mobile_t *mob, uint32_t n)
{
    if (n <= mob->out_cap)
        return;
    mob->out_cap = n;
    mob->out_keys = base_realloc(mob->out_keys, n * sizeof(*mob->out_keys));
    mob->out_hints = base_realloc(mob->out_hints, n * sizeof(*mob->out_hints));
    mob->out_dels = base_realloc(mob->out_dels, n * sizeof(*mob->out_dels));
}

/* Entries whose delete was sent: forgotten unless something else holds them.  They are
 * freed at the start of the next call that hands out views, so the views stay valid. */
static void sweep(core_rt_mobile_t *mob)
{
    for (entry_t *e = mob->head, *next; e; e = next) {
        next = e->next;
        entry_check(mob, e);
    }
}

bool core_rt_mobile_tick_CT(core_rt_mobile_t *mob, core_rt_mobile_diff_t *d)
{
    sweep(mob);
    memset(d, 0, sizeof(*d));
    if (mob->adds.n == 0 && mob->dels.n == 0)
        return false;
    mob->seq++;
    out_room(mob, mob->adds.n > mob->dels.n ? mob->adds.n : mob->dels.n);
    for (uint32_t i = 0; i < mob->adds.n; i++) {
        entry_t *e = mob->adds.e[i];
        e->in_add = false;
        mob->out_keys[i] = (codec_bytes_t){(const uint8_t *)e->key, e->len};
        mob->out_hints[i] = e->treatment;
    }
    for (uint32_t i = 0; i < mob->dels.n; i++) {
        entry_t *e = mob->dels.e[i];
        e->in_del = false;
        mob->out_dels[i] = (codec_bytes_t){(const uint8_t *)e->key, e->len};
    }
    d->mobile_seq = mob->seq;
    d->add = mob->out_keys;
    d->hints = mob->out_hints;
    d->n_add = mob->adds.n;
    d->del = mob->out_dels;
    d->n_del = mob->dels.n;
    mob->adds.n = 0;
    mob->dels.n = 0;
    return true;
}

int64_t core_rt_mobile_seq(const core_rt_mobile_t *mob)
{
    return mob->seq;
}

bool core_rt_mobile_mar_CT(const core_rt_mobile_t *mob, int64_t have_seq)
{
    return have_seq < mob->seq;
}

uint32_t core_rt_mobile_exist_CT(core_rt_mobile_t *mob, const codec_bytes_t **keys,
                                 const int64_t **hints)
{
    sweep(mob);
    out_room(mob, mob->count);
    uint32_t n = 0;
    for (entry_t *e = mob->head; e; e = e->next) {
        if ((e->local || e->in_del) && !e->in_add) {
            mob->out_keys[n] = (codec_bytes_t){(const uint8_t *)e->key, e->len};
            mob->out_hints[n] = e->treatment;
            n++;
        }
    }
    *keys = mob->out_keys;
    *hints = mob->out_hints;
    return n;
}

static bool bit_get(const uint64_t *m, uint32_t b)
{
    return (m[b / 64] >> (b % 64)) & 1;
}

static void bit_set(uint64_t *m, uint32_t b, bool on)
{
    if (on)
        m[b / 64] |= (uint64_t)1 << (b % 64);
    else
        m[b / 64] &= ~((uint64_t)1 << (b % 64));
}

core_rt_mau_result_t core_rt_mobile_mau_CT(core_rt_mobile_t *mob, uint32_t maskbit,
                                           const core_rt_msg_t *m)
{
    if (maskbit == 0 || maskbit >= CORE_RT_MAX_ROUTERS || m->op != CORE_RT_OP_MAU)
        return CORE_RT_MAU_IGNORED;
    bool absolute = m->exist.ptr != NULL;
    if (!absolute && mob->rseq[maskbit] != m->mobile_seq - 1) {
        if (mob->mar_sent[maskbit])
            return CORE_RT_MAU_IGNORED;
        mob->mar_sent[maskbit] = true;
        return CORE_RT_MAU_SEND_MAR;
    }
    mob->mar_sent[maskbit] = false;
    mob->rseq[maskbit] = m->mobile_seq;
    if (absolute)
        for (entry_t *e = mob->head; e; e = e->next)
            e->doomed = bit_get(e->rnodes, maskbit);
    core_rt_iter_t it = core_rt_iter(absolute ? &m->exist : &m->add);
    core_rt_iter_t hit = core_rt_iter(&m->hints);
    codec_bytes_t  k;
    while (core_rt_strs_next(&it, &k)) {
        int64_t hint = -1;
        if (m->hints.ptr)
            core_rt_ints_next(&hit, &hint);
        if (k.len == 0)
            continue;
        entry_t *e = entry_get(mob, (const char *)k.ptr, k.len);
        if (e->hint < 0 && hint >= 0 && hint <= 5)
            e->hint = (int)hint;
        e->doomed = false;
        bit_set(e->rnodes, maskbit, true);
    }
    if (!absolute) {
        it = core_rt_iter(&m->del);
        while (core_rt_strs_next(&it, &k)) {
            entry_t *e = entry_find(mob, (const char *)k.ptr, k.len);
            if (e) {
                bit_set(e->rnodes, maskbit, false);
                entry_check(mob, e);
            }
        }
    } else {
        for (entry_t *e = mob->head, *next; e; e = next) {
            next = e->next;
            if (e->doomed) {
                e->doomed = false;
                bit_set(e->rnodes, maskbit, false);
                entry_check(mob, e);
            }
        }
    }
    return CORE_RT_MAU_APPLIED;
}

int64_t core_rt_mobile_router_seq(const core_rt_mobile_t *mob, uint32_t maskbit)
{
    return maskbit < CORE_RT_MAX_ROUTERS ? mob->rseq[maskbit] : 0;
}

void core_rt_mobile_flush_router_CT(core_rt_mobile_t *mob, uint32_t maskbit)
{
    if (maskbit == 0 || maskbit >= CORE_RT_MAX_ROUTERS)
        return;
    mob->rseq[maskbit] = 0;
    mob->mar_sent[maskbit] = false;
    for (entry_t *e = mob->head, *next; e; e = next) {
        next = e->next;
        if (bit_get(e->rnodes, maskbit)) {
            bit_set(e->rnodes, maskbit, false);
            entry_check(mob, e);
        }
    }
}

bool core_rt_mobile_router_has(const core_rt_mobile_t *mob, const char *key, size_t len,
                               uint32_t maskbit)
{
    const entry_t *e = entry_find(mob, key, len);
    return e && maskbit < CORE_RT_MAX_ROUTERS && bit_get(e->rnodes, maskbit);
}

int core_rt_mobile_hint(const core_rt_mobile_t *mob, const char *key, size_t len)
{
    const entry_t *e = entry_find(mob, key, len);
    return e ? e->hint : -1;
}

uint32_t core_rt_mobile_routers_of(const core_rt_mobile_t *mob, const char *key, size_t len)
{
    const entry_t *e = entry_find(mob, key, len);
    return e ? (uint32_t)(__builtin_popcountll(e->rnodes[0]) + __builtin_popcountll(e->rnodes[1]))
             : 0;
}

uint32_t core_rt_mobile_key_count(const core_rt_mobile_t *mob)
{
    return mob->count;
}
