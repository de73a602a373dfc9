/* tests/unit/base/pattern_test.c: core/base/pattern.c - qdrouterd's address-pattern rules:
 * token syntax, normalization, prefixes, precedence, duplicates, removal. */
#include "core/base/pattern.h"

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// clang-format off: cmocka.h needs the headers above first
#include <cmocka.h>
// clang-format on

/* The value stored for a pattern is the pattern text itself, so a match names its winner. */
static void add(base_pattern_t *t, const char *p)
{
    assert_int_equal(base_pattern_add(t, p, (void *)p), 0);
}

static void add_prefix(base_pattern_t *t, const char *p)
{
    assert_int_equal(base_pattern_add_prefix(t, p, (void *)p), 0);
}

static const char *match(const base_pattern_t *t, const char *addr)
{
    const char *m = base_pattern_match(t, addr, strlen(addr));
    return m ? m : "(none)";
}

static void assert_norm(const char *in, bool prefix, const char *want)
{
    char *got = base_pattern_normalize(in, prefix);
    if (!want) {
        assert_null(got);
        return;
    }
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

static void test_normalize(void **state)
{
    (void)state;
    assert_norm("a.b", false, "a.b");
    assert_norm("a/b", false, "a/b");
    assert_norm("/a/b/", false, "a/b"); /* leading and trailing separators dropped */
    assert_norm("..a..", false, "a");
    assert_norm("a..b", false, "a..b"); /* an empty token in the middle is a token */
    assert_norm("#.#", false, "#");     /* qdrouterd's #.# -> # */
    assert_norm("a.#.#.#.b", false, "a.#.b");
    assert_norm("#.*", false, "*.#"); /* qdrouterd's #.* -> *.# */
    assert_norm("a.#.*.b", false, "a.*.#.b");
    assert_norm("#.*.#.*", false, "*.*.#");
    assert_norm("x.#/*", false, "x.*/#"); /* separators stay where they were */
    assert_norm("a*.b#", false, "a*.b#"); /* wildcards only as whole tokens */
    assert_norm("", false, NULL);
    assert_norm("/", false, NULL);
    assert_norm("./.", false, NULL);

    assert_norm("closest", true, "closest/#");
    assert_norm("/closest/", true, "closest/#");
    assert_norm("a.b", true, "a.b/#");
    assert_norm("a.#", true, "a.#"); /* the implied # merges with a trailing # */
    assert_norm("a.*", true, "a.*/#");
    assert_norm("", true, NULL);
    assert_norm("..", true, NULL);
}

static void test_token_limit(void **state)
{
    (void)state;
    size_t n = BASE_PATTERN_MAX_TOKENS;
    char  *p = malloc(n * 4 + 8);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        p[o++] = 'a';
        p[o++] = '.';
    }
    p[o - 1] = '\0'; /* exactly the limit */
    char *norm = base_pattern_normalize(p, false);
    assert_non_null(norm);
    free(norm);
    assert_null(base_pattern_normalize(p, true)); /* the prefix's # is one too many */
    base_pattern_t *t = base_pattern_new();
    assert_int_equal(base_pattern_add(t, p, p), 0);
    assert_ptr_equal(base_pattern_match(t, p, strlen(p)), p);
    assert_int_equal(base_pattern_add_prefix(t, p, p), -EINVAL);
    p[o - 1] = '.';
    p[o] = 'b';
    p[o + 1] = '\0'; /* one more */
    assert_int_equal(base_pattern_add(t, p, p), -EINVAL);

    /* many wildcards collapse, so the limit applies after normalization */
    o = 0;
    for (size_t i = 0; i < n * 2; i++) {
        p[o++] = '#';
        p[o++] = '.';
    }
    p[o - 1] = '\0';
    norm = base_pattern_normalize(p, false);
    assert_string_equal(norm, "#");
    free(norm);
    base_pattern_free(t);
    free(p);
}

static void test_exact(void **state)
{
    (void)state;
    base_pattern_t *t = base_pattern_new();
    add(t, "a.b.c");
    assert_string_equal(match(t, "a.b.c"), "a.b.c");
    assert_string_equal(match(t, "a/b/c"), "a.b.c"); /* either separator */
    assert_string_equal(match(t, "a.b/c"), "a.b.c");
    assert_string_equal(match(t, "/a.b.c"), "a.b.c");   /* leading separators skipped */
    assert_string_equal(match(t, "a.b.c/"), "a.b.c");   /* one trailing separator is nothing */
    assert_string_equal(match(t, "a.b.c//"), "(none)"); /* ...but a second ends an empty token */
    assert_string_equal(match(t, "a.b"), "(none)");
    assert_string_equal(match(t, "a.b.c.d"), "(none)");
    assert_string_equal(match(t, "a.b.cd"), "(none)");
    assert_string_equal(match(t, "a.bb.c"), "(none)");
    assert_string_equal(match(t, ""), "(none)");
    /* the address need not be NUL-terminated */
    assert_string_equal((const char *)base_pattern_match(t, "a.b.cXYZ", 5), "a.b.c");
    assert_null(base_pattern_match(t, "a.b.cXYZ", 6));
    base_pattern_free(t);
}

static void test_length_bound(void **state)
{
    (void)state;
    base_pattern_t *t = base_pattern_new();
    add(t, "a.b");
    assert_string_equal((const char *)base_pattern_match(t, "a.b.c", 3), "a.b");
    assert_null(base_pattern_match(t, "a.b.c", 2));
    base_pattern_free(t);
}

static void test_star(void **state)
{
    (void)state;
    base_pattern_t *t = base_pattern_new();
    add(t, "a.*.c");
    assert_string_equal(match(t, "a.b.c"), "a.*.c");
    assert_string_equal(match(t, "a.xyz.c"), "a.*.c");
    assert_string_equal(match(t, "a..c"), "a.*.c"); /* * matches the empty token */
    assert_string_equal(match(t, "a.c"), "(none)"); /* exactly one token */
    assert_string_equal(match(t, "a.b.b.c"), "(none)");
    add(t, "*");
    assert_string_equal(match(t, "x"), "*");
    assert_string_equal(match(t, "x.y"), "(none)");
    assert_string_equal(match(t, ""), "(none)");
    base_pattern_free(t);
}

static void test_glob(void **state)
{
    (void)state;
    base_pattern_t *t = base_pattern_new();
    add(t, "a.#.c");
    assert_string_equal(match(t, "a.c"), "a.#.c"); /* # matches zero tokens */
    assert_string_equal(match(t, "a.b.c"), "a.#.c");
    assert_string_equal(match(t, "a.b.b.b.c"), "a.#.c");
    assert_string_equal(match(t, "a.c.c"), "a.#.c");
    assert_string_equal(match(t, "a.b"), "(none)");
    assert_string_equal(match(t, "a.c.d"), "(none)");
    add(t, "#");
    assert_string_equal(match(t, ""), "#"); /* # even matches the empty address */
    assert_string_equal(match(t, "anything/at.all"), "#");
    base_pattern_free(t);
}

static void test_literal_wildcard_chars(void **state)
{
    (void)state;
    base_pattern_t *t = base_pattern_new();
    add(t, "a*");
    add(t, "b#.c");
    assert_string_equal(match(t, "a*"), "a*");
    assert_string_equal(match(t, "ab"), "(none)");
    assert_string_equal(match(t, "b#.c"), "b#.c");
    assert_string_equal(match(t, "b.c"), "(none)");
    base_pattern_free(t);
}

/* qdrouterd's order for a.b.c: a.b.c > a.b.* > a.b.# > a.*.c > a.# > *.b.c > #.c > # */
static void test_precedence_chain(void **state)
{
    (void)state;
    static const char *const order[] = {"a.b.c", "a.b.*", "a.b.#", "a.*.c",
                                        "a.#",   "*.b.c", "#.c",   "#"};
    const size_t             n = sizeof(order) / sizeof(order[0]);

    /* add in reverse (and shuffled) order: insertion order must not matter */
    for (size_t first = 0; first < n; first++) {
        base_pattern_t *t = base_pattern_new();
        for (size_t i = n; i-- > first;)
            add(t, order[i]);
        assert_string_equal(match(t, "a.b.c"), order[first]);
        base_pattern_free(t);
    }
    base_pattern_t *t = base_pattern_new();
    for (size_t i = 0; i < n; i += 2)
        add(t, order[i]);
    for (size_t i = 1; i < n; i += 2)
        add(t, order[i]);
    assert_string_equal(match(t, "a.b.c"), "a.b.c");
    base_pattern_free(t);
}

static void test_precedence_left_first(void **state)
{
    (void)state;
    base_pattern_t *t = base_pattern_new();
    /* the first token decides before later ones: a.# beats *.b.c although *.b.c is "more
     * exact" overall */
    add(t, "a.#");
    add(t, "*.b.c");
    assert_string_equal(match(t, "a.b.c"), "a.#");
    assert_string_equal(match(t, "x.b.c"), "*.b.c");
    base_pattern_free(t);

    t = base_pattern_new();
    add(t, "*.b");
    add(t, "#.b");
    add(t, "a.*");
    assert_string_equal(match(t, "a.b"), "a.*");
    assert_string_equal(match(t, "x.b"), "*.b");
    assert_string_equal(match(t, "x.y.b"), "#.b");
    assert_string_equal(match(t, "b"), "#.b");
    base_pattern_free(t);
}

static void test_precedence_glob_lazy(void **state)
{
    (void)state;
    base_pattern_t *t = base_pattern_new();
    /* a # offers the rest to what follows it before swallowing everything itself */
    add(t, "a.#");
    add(t, "a.#.c");
    assert_string_equal(match(t, "a.b.c"), "a.#.c");
    assert_string_equal(match(t, "a.b.d"), "a.#");
    assert_string_equal(match(t, "a.c"), "a.#.c");
    assert_string_equal(match(t, "a"), "a.#");
    base_pattern_free(t);

    t = base_pattern_new();
    add(t, "a.#.b.#");
    add(t, "a.#.b.c");
    /* the # after a first tries zero tokens: x is not b, so one token, then b: rest is c.d,
     * and a.#.b.c needs exactly c */
    assert_string_equal(match(t, "a.x.b.c"), "a.#.b.c");
    assert_string_equal(match(t, "a.x.b.c.d"), "a.#.b.#");
    /* a.b.b.c: the # first stops at zero tokens, so the first b is the pattern's b; then
     * a.#.b.c wants exactly "c" but "b.c" is left, and a.#.b.# takes it: the earlier stop of
     * the # wins over a more exact pattern further right (qdrouterd's search order) */
    assert_string_equal(match(t, "a.b.b.c"), "a.#.b.#");
    base_pattern_free(t);
}

static void test_star_beats_glob_same_position(void **state)
{
    (void)state;
    base_pattern_t *t = base_pattern_new();
    add(t, "a.#");
    add(t, "a.*");
    assert_string_equal(match(t, "a.b"), "a.*");
    assert_string_equal(match(t, "a"), "a.#");
    assert_string_equal(match(t, "a.b.c"), "a.#");
    base_pattern_free(t);
}

static void test_prefix(void **state)
{
    (void)state;
    base_pattern_t *t = base_pattern_new();
    add_prefix(t, "closest");
    add_prefix(t, "multicast");
    add_prefix(t, "multicast/special");
    assert_string_equal(match(t, "closest"), "closest");
    assert_string_equal(match(t, "closest/x"), "closest");
    assert_string_equal(match(t, "closest.x.y"), "closest");
    assert_string_equal(match(t, "closestx"), "(none)"); /* a token prefix, not a string one */
    assert_string_equal(match(t, "x/closest"), "(none)");
    assert_string_equal(match(t, "multicast/q"), "multicast");
    assert_string_equal(match(t, "multicast/special"), "multicast/special"); /* longer wins */
    assert_string_equal(match(t, "multicast/special/q"), "multicast/special");
    assert_string_equal(match(t, "multicast/specialq"), "multicast");
    base_pattern_free(t);
}

static void test_prefix_vs_pattern(void **state)
{
    (void)state;
    base_pattern_t *t = base_pattern_new();
    add_prefix(t, "queue");
    add(t, "queue.*");
    add(t, "queue.x");
    assert_string_equal(match(t, "queue.x"), "queue.x");
    assert_string_equal(match(t, "queue.y"), "queue.*");
    assert_string_equal(match(t, "queue.y.z"), "queue");
    assert_string_equal(match(t, "queue"), "queue");
    base_pattern_free(t);
}

static void test_duplicates(void **state)
{
    (void)state;
    base_pattern_t *t = base_pattern_new();
    int             v = 0;
    add(t, "a.b");
    assert_int_equal(base_pattern_add(t, "a.b", &v), -EEXIST);
    assert_int_equal(base_pattern_add(t, "a/b", &v), -EEXIST); /* separators are equal */
    assert_int_equal(base_pattern_add(t, "/a.b/", &v), -EEXIST);
    add_prefix(t, "c");
    assert_int_equal(base_pattern_add(t, "c/#", &v), -EEXIST); /* prefix c is c/# */
    assert_int_equal(base_pattern_add(t, "c.#.#", &v), -EEXIST);
    assert_int_equal(base_pattern_add_prefix(t, "c.#", &v), -EEXIST);
    add(t, "*.#");
    assert_int_equal(base_pattern_add(t, "#.*", &v), -EEXIST); /* same after normalizing */
    assert_int_equal(base_pattern_count(t), 3);
    /* the first value stays */
    assert_string_equal((const char *)base_pattern_get(t, "a/b"), "a.b");
    base_pattern_free(t);
}

static void test_invalid(void **state)
{
    (void)state;
    base_pattern_t *t = base_pattern_new();
    int             v = 0;
    assert_int_equal(base_pattern_add(t, "", &v), -EINVAL);
    assert_int_equal(base_pattern_add(t, "/./", &v), -EINVAL);
    assert_int_equal(base_pattern_add_prefix(t, "", &v), -EINVAL);
    assert_int_equal(base_pattern_add(t, "ok", NULL), -EINVAL); /* NULL means no match */
    assert_int_equal(base_pattern_count(t), 0);
    assert_null(base_pattern_match(t, "ok", 2));
    base_pattern_free(t);
}

static void test_get_remove(void **state)
{
    (void)state;
    base_pattern_t *t = base_pattern_new();
    add(t, "a.b.c");
    add(t, "a.b");
    add(t, "a.*.c");
    add(t, "a.#");
    add_prefix(t, "z");
    assert_int_equal(base_pattern_count(t), 5);
    assert_string_equal((const char *)base_pattern_get(t, "a/*/c"), "a.*.c");
    assert_null(base_pattern_get(t, "a.x.c")); /* get is exact, not a match */
    assert_null(base_pattern_get(t, "a"));     /* a node on a path, not a pattern */
    assert_string_equal((const char *)base_pattern_get(t, "z/#"), "z");
    assert_null(base_pattern_get(t, ""));

    assert_string_equal((const char *)base_pattern_remove(t, "a.b.c"), "a.b.c");
    assert_null(base_pattern_remove(t, "a.b.c"));
    assert_int_equal(base_pattern_count(t), 4);
    assert_string_equal(match(t, "a.b.c"), "a.*.c");
    assert_string_equal(match(t, "a.b"), "a.b"); /* the shorter pattern on the path stays */

    assert_string_equal((const char *)base_pattern_remove(t, "a.b"), "a.b");
    assert_string_equal(match(t, "a.b"), "a.#");
    assert_string_equal((const char *)base_pattern_remove(t, "a.*.c"), "a.*.c");
    assert_string_equal(match(t, "a.b.c"), "a.#");
    assert_string_equal((const char *)base_pattern_remove(t, "a.#"), "a.#");
    assert_string_equal(match(t, "a.b.c"), "(none)");
    assert_string_equal((const char *)base_pattern_remove(t, "z.#"), "z");
    assert_int_equal(base_pattern_count(t), 0);

    /* the table is fully usable again after being emptied */
    add(t, "a.b.c");
    assert_string_equal(match(t, "a.b.c"), "a.b.c");
    base_pattern_free(t);
}

static void test_many_siblings(void **state)
{
    (void)state;
    base_pattern_t *t = base_pattern_new();
    enum { N = 2000 };
    static char names[N][16];
    for (int i = 0; i < N; i++) {
        /* insert in a scrambled order to exercise the sorted children */
        int k = (i * 7919) % N;
        snprintf(names[k], sizeof(names[k]), "q%d.x", k);
        add(t, names[k]);
    }
    add(t, "q*.x"); /* a literal token q* */
    for (int i = 0; i < N; i++) {
        char addr[32];
        snprintf(addr, sizeof(addr), "q%d/x", i);
        assert_string_equal(match(t, addr), names[i]);
    }
    assert_string_equal(match(t, "q.x"), "(none)");
    assert_string_equal(match(t, "q*.x"), "q*.x");
    for (int i = 0; i < N; i += 2)
        assert_ptr_equal(base_pattern_remove(t, names[i]), names[i]);
    for (int i = 0; i < N; i++) {
        char addr[32];
        snprintf(addr, sizeof(addr), "q%d.x", i);
        assert_string_equal(match(t, addr), i % 2 ? names[i] : "(none)");
    }
    base_pattern_free(t);
}

static void test_long_address(void **state)
{
    (void)state;
    base_pattern_t *t = base_pattern_new();
    add(t, "a.#.z");
    add(t, "#.y");
    /* a long address: the # loops instead of recursing, so no deep stack */
    size_t n = 200000;
    char  *addr = malloc(n * 2 + 3);
    size_t o = 0;
    addr[o++] = 'a';
    for (size_t i = 0; i < n; i++) {
        addr[o++] = '.';
        addr[o++] = 'b';
    }
    addr[o++] = '.';
    addr[o++] = 'z';
    assert_string_equal((const char *)base_pattern_match(t, addr, o), "a.#.z");
    addr[o - 1] = 'y';
    assert_string_equal((const char *)base_pattern_match(t, addr, o), "#.y");
    addr[o - 1] = 'q';
    assert_null(base_pattern_match(t, addr, o));
    free(addr);
    base_pattern_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_normalize),
        cmocka_unit_test(test_token_limit),
        cmocka_unit_test(test_exact),
        cmocka_unit_test(test_length_bound),
        cmocka_unit_test(test_star),
        cmocka_unit_test(test_glob),
        cmocka_unit_test(test_literal_wildcard_chars),
        cmocka_unit_test(test_precedence_chain),
        cmocka_unit_test(test_precedence_left_first),
        cmocka_unit_test(test_precedence_glob_lazy),
        cmocka_unit_test(test_star_beats_glob_same_position),
        cmocka_unit_test(test_prefix),
        cmocka_unit_test(test_prefix_vs_pattern),
        cmocka_unit_test(test_duplicates),
        cmocka_unit_test(test_invalid),
        cmocka_unit_test(test_get_remove),
        cmocka_unit_test(test_many_siblings),
        cmocka_unit_test(test_long_address),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
