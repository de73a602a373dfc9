/* router/hmap.c: (channel, handle) -> pointer (see hmap.h).
 * Not thread-safe: the owning connection's worker only. */
#include "router/hmap.h"

#include "core/base/base.h"

#include <string.h>

static uint64_t hmap_key(uint16_t ch, uint32_t handle)
{
    return (uint64_t)ch << 32 | handle;
}

/* The index of the first entry whose key is >= key (m->n when none is). */
static uint32_t lower_bound(const rtr_hmap_t *m, uint64_t key)
{
    uint32_t lo = 0, hi = m->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (m->ents[mid].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

void rtr_hmap_fini(rtr_hmap_t *m)
{
    free(m->ents);
    memset(m, 0, sizeof(*m));
}

void *rtr_hmap_get(rtr_hmap_t *m, uint16_t ch, uint32_t handle)
{
    uint64_t k = hmap_key(ch, handle);
    if (m->last && m->ents[m->last - 1].key == k)
        return m->ents[m->last - 1].v;
    uint32_t i = lower_bound(m, k);
    if (i == m->n || m->ents[i].key != k)
        return NULL;
    m->last = i + 1;
    return m->ents[i].v;
}

void *rtr_hmap_put(rtr_hmap_t *m, uint16_t ch, uint32_t handle, void *v)
{
    uint64_t k = hmap_key(ch, handle);
    uint32_t i = lower_bound(m, k);
    if (i < m->n && m->ents[i].key == k) {
        void *old = m->ents[i].v;
        m->ents[i].v = v;
        return old;
    }
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 4;
        m->ents = base_realloc(m->ents, m->cap * sizeof(*m->ents));
    }
    memmove(m->ents + i + 1, m->ents + i, (m->n - i) * sizeof(*m->ents));
    m->ents[i] = (rtr_hmap_ent_t){.key = k, .v = v};
    m->n++;
    m->last = 0; /* indices moved */
    return NULL;
}

/* Remove entry i and return its value; the last one gone frees the array. */
static void *remove_at(rtr_hmap_t *m, uint32_t i)
{
    void *v = m->ents[i].v;
    m->n--;
    memmove(m->ents + i, m->ents + i + 1, (m->n - i) * sizeof(*m->ents));
    m->last = 0;
    if (m->n == 0)
        rtr_hmap_fini(m);
    return v;
}

void *rtr_hmap_del(rtr_hmap_t *m, uint16_t ch, uint32_t handle)
{
    uint64_t k = hmap_key(ch, handle);
    uint32_t i = lower_bound(m, k);
    if (i == m->n || m->ents[i].key != k)
        return NULL;
    return remove_at(m, i);
}

void *rtr_hmap_pop(rtr_hmap_t *m, uint32_t ch)
{
    if (m->n == 0)
        return NULL;
    if (ch == RTR_HMAP_ANY)
        return remove_at(m, m->n - 1);
    /* the channel's last binding: the entry before the next channel's first */
    uint32_t i = lower_bound(m, ((uint64_t)ch + 1) << 32);
    if (i == 0 || m->ents[i - 1].key >> 32 != ch)
        return NULL;
    return remove_at(m, i - 1);
}
