/* router/hmap.c: (channel, handle) -> pointer (see hmap.h).
 * Not thread-safe: the owning connection's worker only. */
#include "router/hmap.h"

static uint64_t hmap_key(uint16_t ch, uint32_t handle)
{
    return (uint64_t)ch << 32 | handle;
}

void rtr_hmap_fini(rtr_hmap_t *m)
{
    base_map_fini(&m->map);
    m->last = NULL;
}

void *rtr_hmap_get(rtr_hmap_t *m, uint16_t ch, uint32_t handle)
{
    uint64_t k = hmap_key(ch, handle);
    if (m->last && m->last_key == k)
        return m->last;
    void *v = base_map_uget(&m->map, k);
    if (v) {
        m->last_key = k;
        m->last = v;
    }
    return v;
}

void *rtr_hmap_put(rtr_hmap_t *m, uint16_t ch, uint32_t handle, void *v)
{
    uint64_t k = hmap_key(ch, handle);
    if (m->last_key == k)
        m->last = NULL;
    return base_map_uput(&m->map, k, v);
}

void *rtr_hmap_del(rtr_hmap_t *m, uint16_t ch, uint32_t handle)
{
    uint64_t k = hmap_key(ch, handle);
    if (m->last_key == k)
        m->last = NULL;
    return base_map_udel(&m->map, k);
}

void *rtr_hmap_take(rtr_hmap_t *m, uint32_t ch, size_t *pos)
{
    base_map_slot_t *s;
    while ((*pos = base_map_next(&m->map, *pos, &s)) != 0) {
        if (ch != RTR_HMAP_ANY && s->ukey >> 32 != ch)
            continue;
        uint64_t k = s->ukey;
        if (m->last_key == k)
            m->last = NULL;
        return base_map_udel(&m->map, k);
    }
    return NULL;
}
