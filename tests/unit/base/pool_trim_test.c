/* tests/unit/base/pool_trim_test.c: core/base/pool.c - base_pool_trim() gives the global lists'
 * surplus back to the heap and keeps a reserve; pools go on working after a trim.  (Named
 * pool_trim_test so that it can sit beside a general pool_test.) */
#include "core/base/pool.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// clang-format off: cmocka.h needs the headers above first
#include <cmocka.h>
// clang-format on

typedef struct trim_item {
    uint8_t bytes[1024];
} trim_item_t;

BASE_POOL_DECLARE(trim_item_t);
BASE_POOL_DEFINE(trim_item_t, 4)

#define N_ITEMS 64

static trim_item_t *items[N_ITEMS];

/* Allocate on another thread, so that the frees below land on this thread's list and spill
 * to the global list in batches. */
static void *alloc_all(void *arg)
{
    (void)arg;
    for (int i = 0; i < N_ITEMS; i++) {
        items[i] = trim_item_t_new();
        memset(items[i]->bytes, i, sizeof(items[i]->bytes));
    }
    return NULL;
}

static __attribute__((unused)) const base_pool_info_t *find(base_pool_info_t *info, size_t n,
                                                             const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(info[i].name, name) == 0)
            return &info[i];
    return NULL;
}

static void test_trim_frees_the_surplus_and_keeps_a_reserve(void **state)
{
    (void)state;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, alloc_all, NULL), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
    for (int i = 0; i < N_ITEMS; i++)
        trim_item_t_free(items[i]);

    base_pool_info_t info[64];
    size_t n = base_pool_info(info, 64);
#ifdef BASE_NO_POOLS
    assert_int_equal(n, 0);
    assert_int_equal(base_pool_trim(0), 0); /* malloc_trim only */
#else
    const base_pool_info_t *p = find(info, n, "trim_item_t");
    assert_non_null(p);
    assert_int_equal(p->from_heap, N_ITEMS);
    /* this thread keeps < 2*batch; the rest waits on the global list */
    assert_true(p->on_global >= N_ITEMS - 2 * 4);
    uint64_t on_global = p->on_global;

    /* a reserve of 2 chains' worth: the rest goes back */
    size_t freed = base_pool_trim(2 * 4 * sizeof(trim_item_t));
    n = base_pool_info(info, 64);
    p = find(info, n, "trim_item_t");
    assert_int_equal(p->on_global, 2 * 4);
    assert_int_equal(p->to_heap, on_global - 2 * 4);
    assert_true(freed >= (on_global - 2 * 4) * sizeof(trim_item_t));

    /* a reserve of nothing still keeps one chain */
    base_pool_trim(0);
    n = base_pool_info(info, 64);
    p = find(info, n, "trim_item_t");
    assert_int_equal(p->on_global, 4);

    /* and the pool goes on: items come from the local list, the reserve, then the heap */
    for (int i = 0; i < N_ITEMS; i++) {
        items[i] = trim_item_t_new();
        assert_int_equal(items[i]->bytes[0], 0); /* zeroed */
    }
    n = base_pool_info(info, 64);
    p = find(info, n, "trim_item_t");
    assert_true(p->from_heap > N_ITEMS);
    for (int i = 0; i < N_ITEMS; i++)
        trim_item_t_free(items[i]);
#endif
}

static void test_trim_returns_byte_buffers(void **state)
{
    (void)state;
    void *bufs[64];
    size_t cap = 0;
    for (int i = 0; i < 64; i++) {
        bufs[i] = base_buf_alloc(64 << 10, &cap);
        memset(bufs[i], 0xab, cap);
    }
    assert_true(cap >= (64u << 10));
    for (int i = 0; i < 64; i++)
        base_buf_free(bufs[i], cap);
    base_pool_trim(0);
#ifndef BASE_NO_POOLS
    base_pool_info_t info[64];
    size_t n = base_pool_info(info, 64);
    const base_pool_info_t *p = find(info, n, "buffer64K");
    assert_non_null(p);
    assert_int_equal(p->on_global, p->batch); /* one chain kept */
    assert_true(p->to_heap > 0);
#endif
    void *b = base_buf_alloc(64 << 10, &cap); /* still works */
    memset(b, 1, cap);
    base_buf_free(b, cap);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trim_frees_the_surplus_and_keeps_a_reserve),
        cmocka_unit_test(test_trim_returns_byte_buffers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
