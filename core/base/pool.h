/* core/base/pool.h: per-thread object pools that move memory between threads in batches.
 *
 * BASE_POOL_DECLARE(T, batch) in a header and BASE_POOL_DEFINE(T, batch) in one .c give
 * `T *T_new(void)` (zeroed) and `void T_free(T *)`.  Each thread keeps a private free list per
 * type (no lock); when it grows past 2*batch, `batch` items move to the type's global list as
 * one chain under its mutex; an empty private list takes one chain back, or mallocs a batch.
 * So an object allocated on one thread and freed on another costs no lock of its own: only
 * whole batches cross, under one lock each.  A private list never holds more than 2*batch
 * items; the global lists keep what threads gave back until base_pool_trim() returns all but
 * a reserve to the heap (qdrouterd's pools never do: its most common memory complaint).
 *
 * Built with -Dpools=false (BASE_NO_POOLS) every _new/_free is plain calloc/free, so ASan sees
 * real use-after-free and leaks.  Thread-safe: any thread may call _new and _free.
 */
#ifndef JUNCTION_BASE_POOL_H
#define JUNCTION_BASE_POOL_H

#include "base.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

typedef struct base_pool_item base_pool_item_t;
struct base_pool_item {
    base_pool_item_t *next; /* free-list link, valid only while the item is free */
};

/* A chain of `batch` free items waiting on the global list. */
typedef struct base_pool_chain base_pool_chain_t;

/* base_pool_t: one per pooled type; the global side. */
typedef struct base_pool {
    const char      *name;       /* type name, for stats */
    size_t           size;       /* item size in bytes (>= sizeof(void*)) */
    uint32_t         batch;      /* items moved per global transfer */
    pthread_mutex_t  lock;       /* guards the fields below */
    base_pool_item_t **chains;   /* stack of chain heads, each `batch` items long */
    size_t           n_chains;   /* chains on the stack */
    size_t           cap_chains; /* allocated slots in `chains` */
    uint64_t         from_heap;  /* items ever malloc'ed */
    uint64_t         to_heap;    /* items freed back to the heap by base_pool_trim() */
    uint64_t         to_threads; /* batches moved from the global list to a thread */
    uint64_t         to_global;  /* batches moved from a thread to the global list */
    _Atomic bool     listed;     /* on the list base_pool_info() walks */
    struct base_pool *next_pool; /* that list (guarded by its own mutex in pool.c) */
} base_pool_t;

/* Figures of one pool, for the `allocator` stats (qdrouterd's allocator entity). */
typedef struct base_pool_info {
    const char *name;       /* type name (static) */
    size_t      size;       /* item size */
    uint32_t    batch;      /* items per transfer */
    uint64_t    from_heap;  /* items ever malloc'ed */
    uint64_t    to_heap;    /* items freed back to the heap */
    uint64_t    to_threads; /* batches global -> thread */
    uint64_t    to_global;  /* batches thread -> global */
    uint64_t    on_global;  /* items waiting on the global list */
} base_pool_info_t;

/* Fill out[0 .. max) with the pools used so far; returns how many there are (may exceed max).
 * Thread-safe.  Returns 0 when built with -Dpools=false. */
size_t base_pool_info(base_pool_info_t *out, size_t max);

/* Free the chains on every pool's global list beyond a reserve of `keep_bytes` per pool (at
 * least one chain is kept, so a pool that was busy does not start from the heap), the byte
 * buffers' included, then ask malloc to hand free pages back to the system (malloc_trim).
 * Returns the bytes of items freed.  Thread-safe; meant for a timer on a thread that is not
 * on the data path.  Built with -Dpools=false it only trims malloc and returns 0. */
size_t base_pool_trim(size_t keep_bytes);

/* One thread's private free list for one type. */
typedef struct base_pool_local {
    base_pool_item_t *head;  /* free items */
    uint32_t          count; /* items on `head` */
} base_pool_local_t;

void *base_pool_alloc_slow(base_pool_t *pool, base_pool_local_t *local);
void base_pool_spill(base_pool_t *pool, base_pool_local_t *local);

#ifdef BASE_NO_POOLS
#define BASE_POOL_DECLARE(T)                                                                       \
    T *T##_new(void);                                                                              \
    void T##_free(T *p)
#define BASE_POOL_DEFINE(T, BATCH)                                                                 \
    T *T##_new(void)                                                                               \
    {                                                                                              \
        return base_calloc(1, sizeof(T));                                                          \
    }                                                                                              \
    void T##_free(T *p)                                                                            \
    {                                                                                              \
        free(p);                                                                                   \
    }
#else
#define BASE_POOL_DECLARE(T)                                                                       \
    T *T##_new(void);                                                                              \
    void T##_free(T *p)
#define BASE_POOL_DEFINE(T, BATCH)                                                                 \
    static base_pool_t T##__pool = {.name = #T,                                                    \
                                    .size = sizeof(T) < sizeof(void *) ? sizeof(void *)            \
                                                                       : sizeof(T),                \
                                    .batch = (BATCH),                                              \
                                    .lock = PTHREAD_MUTEX_INITIALIZER};                            \
    static _Thread_local base_pool_local_t T##__local;                                             \
    T *T##_new(void)                                                                               \
    {                                                                                              \
        base_pool_local_t *l = &T##__local;                                                        \
        base_pool_item_t *it = l->head;                                                            \
        if (BASE_UNLIKELY(!it))                                                                    \
            it = base_pool_alloc_slow(&T##__pool, l);                                              \
        l->head = it->next;                                                                        \
        l->count--;                                                                                \
        memset(it, 0, sizeof(T));                                                                  \
        return (T *)(void *)it;                                                                    \
    }                                                                                              \
    void T##_free(T *p)                                                                            \
    {                                                                                              \
        base_pool_local_t *l = &T##__local;                                                        \
        base_pool_item_t *it = (base_pool_item_t *)(void *)p;                                      \
        it->next = l->head;                                                                        \
        l->head = it;                                                                              \
        if (BASE_UNLIKELY(++l->count >= 2 * T##__pool.batch))                                      \
            base_pool_spill(&T##__pool, l);                                                        \
    }
/* Byte buffers in power-of-two size classes, 256 B to 256 KiB, pooled per thread like the
 * typed pools (larger requests go to malloc).  base_buf_alloc() returns a buffer of at least
 * `size` bytes and its real capacity in *cap; give that capacity back to base_buf_free().
 * Thread-safe: any thread may free a buffer another thread allocated. */
void *base_buf_alloc(size_t size, size_t *cap);
void base_buf_free(void *p, size_t cap);

#endif

/* Byte buffers in power-of-two size classes, 256 B to 256 KiB, pooled per thread like the
 * typed pools (larger requests go to malloc).  base_buf_alloc() returns a buffer of at least
 * `size` bytes and its real capacity in *cap; give that capacity back to base_buf_free().
 * Thread-safe: any thread may free a buffer another thread allocated. */
void *base_buf_alloc(size_t size, size_t *cap);
void base_buf_free(void *p, size_t cap);

#endif
