/* core/base/arena.c: bump allocator (see arena.h). Not thread-safe: one owner at a time. */
#include "arena.h"

#include <string.h>

struct base_arena_block {
    base_arena_block_t *next; /* older block */
    size_t              len;  /* usable bytes after the header */
};

#define BLOCK_MIN 4096u

void base_arena_init(base_arena_t *a, void *buf, size_t len)
{
    a->first = buf;
    a->first_len = len;
    a->cur = buf;
    a->end = buf ? (char *)buf + len : NULL;
    a->blocks = NULL;
}

void base_arena_fini(base_arena_t *a)
{
    base_arena_block_t *b = a->blocks;
    while (b) {
        base_arena_block_t *next = b->next;
        free(b);
        b = next;
    }
    base_arena_init(a, a->first, a->first_len);
}

void *base_arena_alloc(base_arena_t *a, size_t n)
{
    n = (n + 7u) & ~(size_t)7u;
    if (a->cur && (size_t)(a->end - a->cur) >= n) {
        void *p = a->cur;
        a->cur += n;
        return p;
    }
    size_t len = n > BLOCK_MIN ? n : BLOCK_MIN;
    base_arena_block_t *b = base_malloc(sizeof(*b) + len);
    b->next = a->blocks;
    b->len = len;
    a->blocks = b;
    char *p = (char *)(b + 1);
    a->cur = p + n;
    a->end = p + len;
    return p;
}

char *base_arena_strndup(base_arena_t *a, const char *s, size_t n)
{
    char *d = base_arena_alloc(a, n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}
