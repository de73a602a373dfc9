/* core/base/mpsc.c: batch queue between threads (see mpsc.h for the design).
 * Threads: push from any thread; take/wait on the consumer only. One lock: q->lock. */
#include "mpsc.h"

#include "pool.h"

#include <errno.h>
#include <string.h>
#include <time.h>

void base_mpsc_init(base_mpsc_t *q, void (*wake)(void *), void *wake_ctx)
{
    memset(q, 0, sizeof(*q));
    pthread_mutex_init(&q->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&q->cond, &attr);
    pthread_condattr_destroy(&attr);
    q->wake = wake;
    q->wake_ctx = wake_ctx;
}

void base_mpsc_fini(base_mpsc_t *q)
{
    base_mpsc_chunks_drain(q->head, NULL, NULL);
    q->head = q->tail = NULL;
    pthread_mutex_destroy(&q->lock);
    pthread_cond_destroy(&q->cond);
}

void *base_mpsc_batch_add(base_mpsc_batch_t *b, uint32_t size)
{
    base_mpsc_chunk_t *c = b->tail;
    if (!c || c->count == BASE_MPSC_CHUNK_ITEMS || c->size != size) {
        /* chunks come from the size-class pools: the consumer frees what producers made,
         * and the pools bring the memory back in batches, not one malloc/free per chunk */
        size_t cap;
        c = base_buf_alloc(sizeof(*c) + (size_t)BASE_MPSC_CHUNK_ITEMS * size, &cap);
        c->cap = cap;
        c->next = NULL;
        c->count = 0;
        c->size = size;
        if (b->tail)
            b->tail->next = c;
        else
            b->head = c;
        b->tail = c;
    }
    void *slot = c->items + (size_t)c->count * size;
    c->count++;
    memset(slot, 0, size);
    return slot;
}

void base_mpsc_push(base_mpsc_t *q, base_mpsc_batch_t *b)
{
    if (!b->head)
        return;
    pthread_mutex_lock(&q->lock);
    bool was_empty = q->head == NULL;
    if (q->tail)
        q->tail->next = b->head;
    else
        q->head = b->head;
    q->tail = b->tail;
    bool signal = q->sleeping;
    pthread_mutex_unlock(&q->lock);
    b->head = b->tail = NULL;
    if (was_empty && q->wake)
        q->wake(q->wake_ctx);
    if (signal)
        pthread_cond_signal(&q->cond);
}

base_mpsc_chunk_t *base_mpsc_take(base_mpsc_t *q)
{
    pthread_mutex_lock(&q->lock);
    base_mpsc_chunk_t *c = q->head;
    q->head = q->tail = NULL;
    pthread_mutex_unlock(&q->lock);
    return c;
}

bool base_mpsc_wait(base_mpsc_t *q, int timeout_ms)
{
    struct timespec deadline;
    if (timeout_ms >= 0) {
        clock_gettime(CLOCK_MONOTONIC, &deadline);
        deadline.tv_sec += timeout_ms / 1000;
        deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
        if (deadline.tv_nsec >= 1000000000L) {
            deadline.tv_sec++;
            deadline.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_lock(&q->lock);
    while (!q->head && !q->stopped) {
        q->sleeping = true;
        int rc = timeout_ms >= 0 ? pthread_cond_timedwait(&q->cond, &q->lock, &deadline)
                                 : pthread_cond_wait(&q->cond, &q->lock);
        q->sleeping = false;
        if (rc == ETIMEDOUT)
            break;
    }
    bool running = !q->stopped;
    pthread_mutex_unlock(&q->lock);
    return running;
}

void base_mpsc_interrupt(base_mpsc_t *q)
{
    pthread_mutex_lock(&q->lock);
    q->stopped = true;
    pthread_mutex_unlock(&q->lock);
    pthread_cond_broadcast(&q->cond);
    if (q->wake)
        q->wake(q->wake_ctx);
}

void base_mpsc_chunk_free(base_mpsc_chunk_t *c)
{
    base_buf_free(c, c->cap);
}
