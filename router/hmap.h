/* router/hmap.h: the links a connection's frames name - (channel, handle) -> a pointer.
 *
 * An AMQP frame names its link by its session's channel and the link's handle (AMQP 2.6.2):
 * an attach binds them, a detach unbinds them, an end unbinds every handle of its channel,
 * and a close every channel.  The zero-copy input (router/zin.c: the peer's attaches, read
 * by the frame guard) and output (router/zc_out.c: the router's own, read from Proton's
 * output) each keep one such map per connection.
 *
 * An array sorted by channel << 32 | handle: 16 bytes a binding, found by binary search (the
 * last hit cached: a connection's transfers come in runs on one link), a channel's bindings
 * side by side; freed when the last binding goes, so a connection without links holds
 * nothing here.  All zeros is an empty map.
 *
 * Not thread-safe: a map belongs to its connection's worker; the functions touch nothing
 * else (no suffix: they hold no worker state of their own).
 */
#ifndef JUNCTION_ROUTER_HMAP_H
#define JUNCTION_ROUTER_HMAP_H

#include <stdint.h>

/* rtr_hmap_pop()'s channel for every channel (a close). */
#define RTR_HMAP_ANY (1u << 16)

typedef struct rtr_hmap_ent {
    uint64_t key; /* channel << 32 | handle */
    void    *v;   /* the value (borrowed) */
} rtr_hmap_ent_t;

typedef struct rtr_hmap {
    rtr_hmap_ent_t *ents; /* sorted by key (heap), or NULL when there is none */
    uint32_t        n;    /* bindings */
    uint32_t        cap;  /* entries allocated */
    uint32_t        last; /* the last hit's index + 1, 0: none (a cache) */
} rtr_hmap_t;

/* Free the map's memory (not the values): all zeros again. */
void rtr_hmap_fini(rtr_hmap_t *m);

/* The value bound to (ch, handle), or NULL. */
void *rtr_hmap_get(rtr_hmap_t *m, uint16_t ch, uint32_t handle);
/* Bind (ch, handle) to v (not NULL); returns the value it replaced, or NULL. */
void *rtr_hmap_put(rtr_hmap_t *m, uint16_t ch, uint32_t handle, void *v);
/* Unbind (ch, handle); returns its value, or NULL when it was not bound. */
void *rtr_hmap_del(rtr_hmap_t *m, uint16_t ch, uint32_t handle);
/* Unbind one binding of channel ch (RTR_HMAP_ANY: of any channel) and return its value;
 * NULL once there is none: while ((v = rtr_hmap_pop(m, ch))) ... */
void *rtr_hmap_pop(rtr_hmap_t *m, uint32_t ch);

#endif
