/* core/base/map.c: open-addressing hash maps with linear probing (see map.h).
 * Not thread-safe: one owning thread per map. */
#include "map.h"

#include <string.h>

uint64_t base_hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ull;
    }
    h ^= h >> 29;
    return h < 2 ? h + 2 : h;
}

static uint64_t hash_u64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k < 2 ? k + 2 : k;
}

void base_map_init(base_map_t *m)
{
    memset(m, 0, sizeof(*m));
}

void base_map_fini(base_map_t *m)
{
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].hash >= 2)
            free(m->slots[i].key);
    BASE_FREE(m->slots);
    memset(m, 0, sizeof(*m));
}

static base_map_slot_t *find(const base_map_t *m, uint64_t h, const char *key, size_t klen,
                             uint64_t ukey, bool is_u)
{
    if (!m->cap)
        return NULL;
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        base_map_slot_t *s = &m->slots[i];
        if (s->hash == 0)
            return NULL;
        if (s->hash != h)
            continue;
        if (is_u ? s->ukey == ukey : (s->klen == klen && memcmp(s->key, key, klen) == 0))
            return s;
    }
}

static void grow(base_map_t *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 16;
    if (m->count * 4 < m->cap)
        ncap = m->cap; /* mostly tombstones: rehash in place size */
    base_map_slot_t *old = m->slots;
    size_t ocap = m->cap;
    m->slots = base_calloc(ncap, sizeof(*m->slots));
    m->cap = ncap;
    m->used = m->count;
    for (size_t i = 0; i < ocap; i++) {
        if (old[i].hash < 2)
            continue;
        size_t j = old[i].hash & (ncap - 1);
        while (m->slots[j].hash)
            j = (j + 1) & (ncap - 1);
        m->slots[j] = old[i];
    }
    free(old);
}

static void *put(base_map_t *m, uint64_t h, const char *key, size_t klen, uint64_t ukey,
                 bool is_u, void *value)
{
    base_map_slot_t *s = find(m, h, key, klen, ukey, is_u);
    if (s) {
        void *prev = s->value;
        s->value = value;
        return prev;
    }
    if ((m->used + 1) * 4 >= m->cap * 3)
        grow(m);
    size_t mask = m->cap - 1;
    size_t i = h & mask;
    while (m->slots[i].hash >= 2)
        i = (i + 1) & mask;
    s = &m->slots[i];
    if (s->hash == 0)
        m->used++;
    s->hash = h;
    s->key = is_u ? NULL : base_strndup(key, klen);
    s->klen = klen;
    s->ukey = ukey;
    s->value = value;
    m->count++;
    return NULL;
}

static void *del(base_map_t *m, base_map_slot_t *s)
{
    if (!s)
        return NULL;
    void *v = s->value;
    free(s->key);
    s->key = NULL;
    s->hash = 1;
    s->value = NULL;
    m->count--;
    return v;
}

void *base_map_get(const base_map_t *m, const char *key, size_t klen)
{
    base_map_slot_t *s = find(m, base_hash_bytes(key, klen), key, klen, 0, false);
    return s ? s->value : NULL;
}

void *base_map_put(base_map_t *m, const char *key, size_t klen, void *value)
{
    return put(m, base_hash_bytes(key, klen), key, klen, 0, false, value);
}

void *base_map_del(base_map_t *m, const char *key, size_t klen)
{
    return del(m, find(m, base_hash_bytes(key, klen), key, klen, 0, false));
}

void *base_map_uget(const base_map_t *m, uint64_t key)
{
    base_map_slot_t *s = find(m, hash_u64(key), NULL, 0, key, true);
    return s ? s->value : NULL;
}

void *base_map_uput(base_map_t *m, uint64_t key, void *value)
{
    return put(m, hash_u64(key), NULL, 0, key, true, value);
}

void *base_map_udel(base_map_t *m, uint64_t key)
{
    return del(m, find(m, hash_u64(key), NULL, 0, key, true));
}

size_t base_map_next(const base_map_t *m, size_t pos, base_map_slot_t **slot)
{
    for (size_t i = pos; i < m->cap; i++) {
        if (m->slots[i].hash >= 2) {
            *slot = &m->slots[i];
            return i + 1;
        }
    }
    return 0;
}
