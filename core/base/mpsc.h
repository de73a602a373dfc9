/* core/base/mpsc.h: the multi-producer, single-consumer batch queue between threads.
 *
 * DESIGN: a producer fills a private batch (base_mpsc_batch_t: a list of fixed-size item
 * chunks) with no lock, then hands the whole batch over with base_mpsc_push(): one mutex
 * acquisition per batch.  The consumer takes everything queued at once with base_mpsc_take()
 * (the list is swapped out under the lock and processed outside it) and walks it with
 * base_mpsc_chunks_drain() or base_mpsc_drain(), the one loop that visits items and frees
 * chunks.  Wake-ups coalesce: the consumer is woken only when the
 * queue goes from empty to non-empty - through `wake` (e.g. uv_async_send) when one is set,
 * otherwise through the queue's condition variable if the consumer sleeps in base_mpsc_wait().
 *
 * Threads: push from any thread (thread-safe); take/wait from the one consumer thread only;
 * a batch belongs to one producer thread.
 */
#ifndef JUNCTION_BASE_MPSC_H
#define JUNCTION_BASE_MPSC_H

#include "base.h"

#include <pthread.h>

#define BASE_MPSC_CHUNK_ITEMS 64u

typedef struct base_mpsc_chunk base_mpsc_chunk_t;
struct base_mpsc_chunk {
    base_mpsc_chunk_t *next;  /* next chunk in the batch / queue */
    uint32_t           count; /* items written */
    uint32_t           size;  /* bytes per item */
    size_t             cap;   /* bytes allocated for the chunk (pooled buffer size class) */
    _Alignas(16) unsigned char items[]; /* BASE_MPSC_CHUNK_ITEMS * size bytes */
};

/* A producer's private batch under construction. */
typedef struct base_mpsc_batch {
    base_mpsc_chunk_t *head; /* oldest chunk */
    base_mpsc_chunk_t *tail; /* chunk being filled */
} base_mpsc_batch_t;

typedef struct base_mpsc {
    pthread_mutex_t    lock;     /* guards head, tail, sleeping, stopped */
    pthread_cond_t     cond;     /* signalled for a consumer in base_mpsc_wait() */
    base_mpsc_chunk_t *head;     /* queued chunks, oldest first */
    base_mpsc_chunk_t *tail;     /* last queued chunk */
    bool               sleeping; /* consumer is blocked in base_mpsc_wait() */
    bool               stopped;  /* base_mpsc_interrupt() was called */
    void (*wake)(void *ctx);     /* optional wake-up, called outside the lock; thread-safe */
    void              *wake_ctx; /* its argument */
} base_mpsc_t;

void base_mpsc_init(base_mpsc_t *q, void (*wake)(void *), void *wake_ctx);
/* Frees whatever is still queued (items are not visited). */
void base_mpsc_fini(base_mpsc_t *q);

/* Producer: a new zeroed item slot of `size` bytes at the end of the batch. No lock. */
void *base_mpsc_batch_add(base_mpsc_batch_t *b, uint32_t size);
static inline bool base_mpsc_batch_empty(const base_mpsc_batch_t *b)
{
    return b->head == NULL;
}
/* Producer: move the whole batch into the queue (batch becomes empty). Thread-safe. */
void base_mpsc_push(base_mpsc_t *q, base_mpsc_batch_t *b);

/* Consumer: take every queued chunk (oldest first), or NULL. */
base_mpsc_chunk_t *base_mpsc_take(base_mpsc_t *q);
/* Consumer: block until something is queued, base_mpsc_interrupt() is called, or timeout_ms
 * passes (<0: no timeout). Returns false once interrupted. */
bool base_mpsc_wait(base_mpsc_t *q, int timeout_ms);
/* Wake a waiting consumer for good (shutdown). Thread-safe. */
void base_mpsc_interrupt(base_mpsc_t *q);

static inline void *base_mpsc_chunk_item(base_mpsc_chunk_t *c, uint32_t i)
{
    return c->items + (size_t)i * c->size;
}
void base_mpsc_chunk_free(base_mpsc_chunk_t *c);

/* Consumer: the one way to walk a chunk list.  Visits every item of `c` (a list as
 * base_mpsc_take() returns it, or a batch's head) oldest first with fn(ctx, item), and frees
 * each chunk once its items are done.  fn NULL: the chunks are only freed (items that own
 * nothing, or a queue being thrown away).  The caller owns the list: the consumer thread for
 * what it took, the producer for its own batch. */
static inline void base_mpsc_chunks_drain(base_mpsc_chunk_t *c, void (*fn)(void *ctx, void *item),
                                          void *ctx)
{
    while (c) {
        base_mpsc_chunk_t *next = c->next;
        if (fn)
            for (uint32_t i = 0; i < c->count; i++)
                fn(ctx, base_mpsc_chunk_item(c, i));
        base_mpsc_chunk_free(c);
        c = next;
    }
}

/* Consumer: take everything queued on q and drain it with fn(ctx, item) as
 * base_mpsc_chunks_drain() does.  Consumer thread only. */
static inline void base_mpsc_drain(base_mpsc_t *q, void (*fn)(void *ctx, void *item), void *ctx)
{
    base_mpsc_chunks_drain(base_mpsc_take(q), fn, ctx);
}

/* Producer: free a batch never pushed, items unvisited; b is left empty.  Its producer's
 * thread (or any thread once that producer is gone). */
static inline void base_mpsc_batch_discard(base_mpsc_batch_t *b)
{
    base_mpsc_chunks_drain(b->head, NULL, NULL);
    b->head = b->tail = NULL;
}

#endif
