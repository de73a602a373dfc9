/* core/base/pool.c: the global side of the per-thread pools (see pool.h). Thread-safe: every
 * function here takes the pool's mutex, once per batch. */
#include "pool.h"

#include <malloc.h>

/* Every pool that has allocated, for base_pool_info().  Lock order: list_lock, then a pool's
 * lock. */
static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static base_pool_t *pools;

static void pool_list(base_pool_t *pool)
{
    pthread_mutex_lock(&list_lock);
    if (!pool->listed) {
        pool->listed = true;
        pool->next_pool = pools;
        pools = pool;
    }
    pthread_mutex_unlock(&list_lock);
}

size_t base_pool_info(base_pool_info_t *out, size_t max)
{
    size_t n = 0;
    pthread_mutex_lock(&list_lock);
    for (base_pool_t *p = pools; p; p = p->next_pool, n++) {
        if (n >= max)
            continue;
        pthread_mutex_lock(&p->lock);
        out[n] = (base_pool_info_t){.name = p->name,
                                    .size = p->size,
                                    .batch = p->batch,
                                    .from_heap = p->from_heap,
                                    .to_heap = p->to_heap,
                                    .to_threads = p->to_threads,
                                    .to_global = p->to_global,
                                    .on_global = (uint64_t)p->n_chains * p->batch};
        pthread_mutex_unlock(&p->lock);
    }
    pthread_mutex_unlock(&list_lock);
    return n;
}

/* Called when the thread's private list is empty: take one chain from the global list, or
 * malloc a fresh batch. Returns the list head (never NULL); local->count is set. */
void *base_pool_alloc_slow(base_pool_t *pool, base_pool_local_t *local)
{
    base_pool_item_t *chain = NULL;

    if (BASE_UNLIKELY(!pool->listed))
        pool_list(pool);
    pthread_mutex_lock(&pool->lock);
    if (pool->n_chains > 0) {
        chain = pool->chains[--pool->n_chains];
        pool->to_threads++;
    } else {
        pool->from_heap += pool->batch;
    }
    pthread_mutex_unlock(&pool->lock);

    if (!chain) {
        for (uint32_t i = 0; i < pool->batch; i++) {
            base_pool_item_t *it = base_malloc(pool->size);
            it->next = chain;
            chain = it;
        }
    }
    local->head = chain;
    local->count = pool->batch;
    return chain;
}

/* Called when the private list reached 2*batch: move `batch` items to the global list. */
void base_pool_spill(base_pool_t *pool, base_pool_local_t *local)
{
    base_pool_item_t *chain = local->head;
    base_pool_item_t *last = chain;
    for (uint32_t i = 1; i < pool->batch; i++)
        last = last->next;
    local->head = last->next;
    last->next = NULL;
    local->count -= pool->batch;

    pthread_mutex_lock(&pool->lock);
    if (pool->n_chains == pool->cap_chains) {
        pool->cap_chains = pool->cap_chains ? pool->cap_chains * 2 : 16;
        pool->chains = base_realloc(pool->chains, pool->cap_chains * sizeof(*pool->chains));
    }
    pool->chains[pool->n_chains++] = chain;
    pool->to_global++;
    pthread_mutex_unlock(&pool->lock);
}

/* ---- byte buffers in size classes ---- */

#define BUF_MIN_SHIFT 8u  /* 256 B */
#define BUF_CLASSES   11u /* up to 256 KiB */

#ifdef BASE_NO_POOLS
void *base_buf_alloc(size_t size, size_t *cap)
{
    *cap = size ? size : 1;
    return base_malloc(*cap);
}

void base_buf_free(void *p, size_t cap)
{
    (void)cap;
    free(p);
}
#else
static base_pool_t buf_pools[BUF_CLASSES];
static pthread_once_t buf_once = PTHREAD_ONCE_INIT;
static _Thread_local base_pool_local_t buf_local[BUF_CLASSES];

static const char *const buf_names[BUF_CLASSES] = {
    "buffer256", "buffer512", "buffer1K",  "buffer2K",  "buffer4K",  "buffer8K",
    "buffer16K", "buffer32K", "buffer64K", "buffer128K", "buffer256K"};

static void buf_pools_init(void)
{
    for (unsigned i = 0; i < BUF_CLASSES; i++) {
        buf_pools[i].name = buf_names[i];
        buf_pools[i].size = (size_t)1 << (BUF_MIN_SHIFT + i);
        buf_pools[i].batch = i < 6 ? 32 : 4; /* >= 16 KiB: small batches */
        pthread_mutex_init(&buf_pools[i].lock, NULL);
    }
}

static unsigned buf_class(size_t size)
{
    unsigned c = 0;
    while (((size_t)1 << (BUF_MIN_SHIFT + c)) < size)
        c++;
    return c;
}

void *base_buf_alloc(size_t size, size_t *cap)
{
    unsigned c = buf_class(size);
    if (c >= BUF_CLASSES) {
        *cap = size;
        return base_malloc(size);
    }
    pthread_once(&buf_once, buf_pools_init);
    base_pool_local_t *l = &buf_local[c];
    base_pool_item_t *it = l->head;
    if (BASE_UNLIKELY(!it))
        it = base_pool_alloc_slow(&buf_pools[c], l);
    l->head = it->next;
    l->count--;
    *cap = buf_pools[c].size;
    return it;
}

void base_buf_free(void *p, size_t cap)
{
    if (!p)
        return;
    unsigned c = buf_class(cap);
    if (c >= BUF_CLASSES || ((size_t)1 << (BUF_MIN_SHIFT + c)) != cap) {
        free(p);
        return;
    }
    base_pool_local_t *l = &buf_local[c];
    base_pool_item_t *it = p;
    it->next = l->head;
    l->head = it;
    if (BASE_UNLIKELY(++l->count >= 2 * buf_pools[c].batch))
        base_pool_spill(&buf_pools[c], l);
}
#endif

/* ---- giving memory back ---- */

/* Free the chains of one pool beyond `keep_bytes` worth of items.  Chains come off the
 * global list under the lock and are freed outside it. */
static size_t pool_trim_one(base_pool_t *p, size_t keep_bytes)
{
    size_t chain_bytes = p->size * p->batch;
    size_t keep = keep_bytes / chain_bytes;
    if (keep < 1)
        keep = 1;
    base_pool_item_t *loose = NULL;
    size_t freed = 0;

    pthread_mutex_lock(&p->lock);
    while (p->n_chains > keep) {
        base_pool_item_t *chain = p->chains[--p->n_chains];
        base_pool_item_t *last = chain;
        while (last->next)
            last = last->next;
        last->next = loose; /* one list of everything to free */
        loose = chain;
        freed += chain_bytes;
        p->to_heap += p->batch;
    }
    pthread_mutex_unlock(&p->lock);
    while (loose) {
        base_pool_item_t *next = loose->next;
        free(loose);
        loose = next;
    }
    return freed;
}

size_t base_pool_trim(size_t keep_bytes)
{
    size_t freed = 0;
    pthread_mutex_lock(&list_lock);
    for (base_pool_t *p = pools; p; p = p->next_pool)
        freed += pool_trim_one(p, keep_bytes);
    pthread_mutex_unlock(&list_lock);
    malloc_trim(0);
    return freed;
}
