/* tests/unit/router/hmap_test.c: the (channel, handle) -> link map (router/hmap.c): bind,
 * find (the last-hit cache kept true across unbinding), an end's and a close's unbinding,
 * many links, and the memory given back with the last binding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "router/hmap.h"

static int vals[4096];

static void test_bind_find(void **state)
{
    (void)state;
    rtr_hmap_t m = {0};
    assert_null(rtr_hmap_get(&m, 0, 0));
    assert_null(rtr_hmap_put(&m, 0, 0, &vals[0]));
    assert_null(rtr_hmap_put(&m, 1, 0, &vals[1]));
    assert_ptr_equal(rtr_hmap_get(&m, 0, 0), &vals[0]);
    assert_ptr_equal(rtr_hmap_get(&m, 0, 0), &vals[0]); /* from the cache */
    assert_ptr_equal(rtr_hmap_get(&m, 1, 0), &vals[1]);
    assert_null(rtr_hmap_get(&m, 0, 1));
    /* a detach: the cached entry goes too */
    assert_ptr_equal(rtr_hmap_get(&m, 1, 0), &vals[1]);
    assert_ptr_equal(rtr_hmap_del(&m, 1, 0), &vals[1]);
    assert_null(rtr_hmap_get(&m, 1, 0));
    assert_null(rtr_hmap_del(&m, 1, 0));
    /* bound again to another link, while cached */
    assert_ptr_equal(rtr_hmap_get(&m, 0, 0), &vals[0]);
    assert_ptr_equal(rtr_hmap_put(&m, 0, 0, &vals[2]), &vals[0]);
    assert_ptr_equal(rtr_hmap_get(&m, 0, 0), &vals[2]);
    assert_ptr_equal(rtr_hmap_del(&m, 0, 0), &vals[2]);
    assert_null(m.ents); /* the last binding gone: nothing held */
    rtr_hmap_put(&m, 4, 4, &vals[4]);
    rtr_hmap_fini(&m);
    assert_null(rtr_hmap_get(&m, 4, 4));
}

static void test_pop(void **state)
{
    (void)state;
    rtr_hmap_t m = {0};
    /* 1000 links on channels 0..3; an end of channel 2, then a close */
    for (int i = 0; i < 1000; i++)
        rtr_hmap_put(&m, (uint16_t)(i % 4), (uint32_t)i, &vals[i]);
    for (int i = 0; i < 1000; i++)
        assert_ptr_equal(rtr_hmap_get(&m, (uint16_t)(i % 4), (uint32_t)i), &vals[i]);
    assert_ptr_equal(rtr_hmap_get(&m, 2, 6), &vals[6]); /* cached: must not survive the end */
    int *v, n = 0;
    while ((v = rtr_hmap_pop(&m, 2))) {
        assert_int_equal((v - vals) % 4, 2);
        n++;
    }
    assert_int_equal(n, 250);
    assert_null(rtr_hmap_get(&m, 2, 6));
    assert_ptr_equal(rtr_hmap_get(&m, 3, 7), &vals[7]);
    /* channel 0xffff is a channel like any other; RTR_HMAP_ANY is every channel */
    rtr_hmap_put(&m, 0xffff, 5000, &vals[4000]);
    assert_ptr_equal(rtr_hmap_pop(&m, 0xffff), &vals[4000]);
    assert_null(rtr_hmap_pop(&m, 0xffff));
    assert_null(rtr_hmap_pop(&m, 2));
    n = 0;
    while ((v = rtr_hmap_pop(&m, RTR_HMAP_ANY)))
        n++;
    assert_int_equal(n, 750);
    assert_null(rtr_hmap_get(&m, 3, 7));
    assert_null(m.ents); /* the last binding gone: nothing held */
    /* the largest channel and handle, beside the smallest */
    rtr_hmap_put(&m, 0xffff, UINT32_MAX, &vals[1]);
    rtr_hmap_put(&m, 0, 0, &vals[0]);
    assert_ptr_equal(rtr_hmap_get(&m, 0xffff, UINT32_MAX), &vals[1]);
    assert_ptr_equal(rtr_hmap_pop(&m, 0), &vals[0]);
    assert_ptr_equal(rtr_hmap_get(&m, 0xffff, UINT32_MAX), &vals[1]);
    rtr_hmap_fini(&m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bind_find),
        cmocka_unit_test(test_pop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
