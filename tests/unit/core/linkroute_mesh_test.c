/* tests/unit/core/linkroute_mesh_test.c: core/linkroute_mesh.c - the hash keys qdrouterd 1.19
 * advertises for link routes (read from a running qdrouterd 1.19's router.address table for
 * the same linkRoutes). */
#include "core/linkroute_mesh.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// clang-format off: cmocka.h needs the headers above first
#include <cmocka.h>
// clang-format on

static void key_is(const char *prefix, const char *pattern, core_link_dir_t dir, const char *want)
{
    char *k = core_lrm_key(prefix, pattern, dir);
    if (!want) {
        assert_null(k);
        return;
    }
    assert_non_null(k);
    assert_string_equal(k, want);
    free(k);
}

static void test_prefix_keys(void **state)
{
    (void)state;
    /* config-2-broker's `prefix: queue.` */
    key_is("queue.", NULL, CORE_LINK_IN, "Cqueue");
    key_is("queue.", NULL, CORE_LINK_OUT, "Dqueue");
    key_is("/e/f/", NULL, CORE_LINK_IN, "Ce/f");
    key_is("a.b", NULL, CORE_LINK_OUT, "Da.b");
    /* no token: no key (CREATE refuses it anyway) */
    key_is("./", NULL, CORE_LINK_IN, NULL);
    key_is(NULL, NULL, CORE_LINK_IN, NULL);
}

static void test_pattern_keys(void **state)
{
    (void)state;
    /* a pattern whose only wildcard is a last `#` is advertised as a prefix */
    key_is(NULL, "a.b.#", CORE_LINK_IN, "Ca.b");
    key_is(NULL, "c/d/#", CORE_LINK_OUT, "Dc/d");
    /* anything else keeps its whole pattern */
    key_is(NULL, "g.#.h", CORE_LINK_OUT, "Fg.#.h");
    key_is(NULL, "i.*.j.#", CORE_LINK_IN, "Ei.*.j.#");
    key_is(NULL, "k.#.#", CORE_LINK_IN, "Ek.#.#");
    key_is(NULL, "x.y", CORE_LINK_IN, "Ex.y");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefix_keys),
        cmocka_unit_test(test_pattern_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
