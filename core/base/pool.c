/* core/base/pool.c: the global side of the per-thread pools (see pool.h). Thread-safe: every
 * function here takes the pool's mutex, once per batch. */
#include "pool.h"

/* Called when the thread's private list is empty: take one chain from the global list, or
 * malloc a fresh batch. Returns the list head (never NULL); local->count is set. */
void *base_pool_alloc_slow(base_pool_t *pool, base_pool_local_t *local)
{
    base_pool_item_t *chain = NULL;

    pthread_mutex_lock(&pool->lock);
    if (pool->n_chains > 0)
        chain = pool->chains[--pool->n_chains];
    else
        pool->from_heap += pool->batch;
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
    pthread_mutex_unlock(&pool->lock);
}
