/* core/base/map.h: open-addressing hash maps, string keys or 64-bit keys, to void* values.
 * Not thread-safe: a map belongs to one thread (the core's address and link tables).
 * Keys of a string map are copied in; values are borrowed. */
#ifndef JUNCTION_BASE_MAP_H
#define JUNCTION_BASE_MAP_H

#include "base.h"

typedef struct base_map_slot {
    uint64_t hash;  /* 0 = empty, 1 = deleted (real hashes are forced >= 2) */
    char    *key;   /* owned copy for string maps; NULL for u64 maps */
    size_t   klen;  /* key length (string maps) */
    uint64_t ukey;  /* key (u64 maps) */
    void    *value; /* borrowed */
} base_map_slot_t;

typedef struct base_map {
    base_map_slot_t *slots; /* power-of-two table */
    size_t           cap;   /* slots allocated */
    size_t           count; /* live entries */
    size_t           used;  /* live + deleted */
} base_map_t;

void base_map_init(base_map_t *m);
void base_map_fini(base_map_t *m);

void *base_map_get(const base_map_t *m, const char *key, size_t klen);
/* Insert or replace; returns the previous value or NULL. */
void *base_map_put(base_map_t *m, const char *key, size_t klen, void *value);
void *base_map_del(base_map_t *m, const char *key, size_t klen);

void *base_map_uget(const base_map_t *m, uint64_t key);
void *base_map_uput(base_map_t *m, uint64_t key, void *value);
void *base_map_udel(base_map_t *m, uint64_t key);

/* Iterate: for (size_t i = 0; (i = base_map_next(m, i, &slot)) != 0;) ... */
size_t base_map_next(const base_map_t *m, size_t pos, base_map_slot_t **slot);

uint64_t base_hash_bytes(const void *p, size_t n);

#endif
