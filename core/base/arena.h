/* core/base/arena.h: a bump allocator for data that lives exactly as long as one object
 * (a delivery's decoded router annotations, a config load).  Allocation is a pointer bump in
 * the inline first block; overflow blocks come from malloc and are freed by base_arena_fini().
 * Not thread-safe: an arena belongs to one thread at a time (ownership moves with its object).
 */
#ifndef JUNCTION_BASE_ARENA_H
#define JUNCTION_BASE_ARENA_H

#include "base.h"

typedef struct base_arena_block base_arena_block_t;

typedef struct base_arena {
    char               *cur;    /* next free byte in the current block */
    char               *end;    /* end of the current block */
    base_arena_block_t *blocks; /* overflow blocks, newest first (malloc'ed) */
    char               *first;  /* caller-provided first block, may be NULL */
    size_t              first_len; /* its size */
} base_arena_t;

/* Start an arena over an optional caller buffer (`buf` may be NULL, `len` 0). */
void base_arena_init(base_arena_t *a, void *buf, size_t len);
/* Free every overflow block; the arena may be reused after init again. */
void base_arena_fini(base_arena_t *a);
/* n bytes aligned to 8; never NULL (aborts on OOM). */
void *base_arena_alloc(base_arena_t *a, size_t n);
/* Copy of n bytes plus a NUL. */
char *base_arena_strndup(base_arena_t *a, const char *s, size_t n);

#endif
