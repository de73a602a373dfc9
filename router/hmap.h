/* router/hmap.h: the links a connection's frames name - (channel, handle) -> a pointer.
 *
 * An AMQP frame names its link by its session's channel and the link's handle (AMQP 2.6.2):
 * an attach binds them, a detach unbinds them, an end unbinds every handle of its channel,
 * and a close every channel.  The zero-copy input (router/zin.c: the peer's attaches, read
 * by the frame guard) and output (router/zc_out.c: the router's own, read from Proton's
 * output) each keep one such map per connection.  A hash map (core/base/map.h) keyed by
 * channel << 32 | handle, with the last hit cached: a connection's transfers come in runs on
 * one link.  All zeros is an empty map (it allocates at the first binding).
 *
 * Not thread-safe: a map belongs to its connection's worker; the functions touch nothing
 * else (no suffix: they hold no worker state of their own).
 */
#ifndef JUNCTION_ROUTER_HMAP_H
#define JUNCTION_ROUTER_HMAP_H

#include "core/base/map.h"

#include <stdint.h>

/* rtr_hmap_take()'s channel for every channel (a close). */
#define RTR_HMAP_ANY (1u << 16)

typedef struct rtr_hmap {
    base_map_t map;      /* channel << 32 | handle -> value (borrowed) */
    uint64_t   last_key; /* the last key found (a cache) */
    void      *last;     /* its value, or NULL: no cache */
} rtr_hmap_t;

/* Free the map's memory (not the values). */
void rtr_hmap_fini(rtr_hmap_t *m);

/* The value bound to (ch, handle), or NULL. */
void *rtr_hmap_get(rtr_hmap_t *m, uint16_t ch, uint32_t handle);
/* Bind (ch, handle) to v (not NULL); returns the value it replaced, or NULL. */
void *rtr_hmap_put(rtr_hmap_t *m, uint16_t ch, uint32_t handle, void *v);
/* Unbind (ch, handle); returns its value, or NULL when it was not bound. */
void *rtr_hmap_del(rtr_hmap_t *m, uint16_t ch, uint32_t handle);
/* Unbind the next binding of channel ch (RTR_HMAP_ANY: of any channel) from *pos on, and
 * return its value; NULL once there is none.  Start with *pos = 0 and bind nothing until
 * the loop ends:
 *     size_t pos = 0;
 *     while ((v = rtr_hmap_take(m, ch, &pos))) ... */
void *rtr_hmap_take(rtr_hmap_t *m, uint32_t ch, size_t *pos);

#endif
