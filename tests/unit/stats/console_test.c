/* tests/unit/stats/console_test.c: stats/console.c - the console files table: "/" is
 * index.html, query strings and fragments are ignored, unknown paths are NULL, and the table
 * matches stats_console_built(): the real page, its script and the charting library, or the
 * one "not built" page.
 *
 * Built twice (tests/unit/stats/meson.build): against the daemon's table (whatever the build
 * found) and against a table generated with no npm packages, whose argument "not-built"
 * makes it insist on the fallback. */
#include "stats/console.h"

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

static const char *g_expect = "any"; /* "built", "not-built" or "any" (argv[1]) */

/* The file's bytes contain `needle`. */
static bool file_has(const stats_console_file_t *f, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; i + n <= f->len; i++)
        if (memcmp(f->data + i, needle, n) == 0)
            return true;
    return false;
}

static void test_index_paths(void **state)
{
    (void)state;
    const stats_console_file_t *f = stats_console_find("/");
    assert_non_null(f);
    assert_string_equal(f->path, "/index.html");
    assert_string_equal(f->mime, "text/html; charset=utf-8");
    assert_true(f->len > 100);
    assert_ptr_equal(stats_console_find("/index.html"), f);
    assert_ptr_equal(stats_console_find("/?x=1"), f);
    assert_ptr_equal(stats_console_find("/index.html?reload=2#top"), f);
    assert_ptr_equal(stats_console_find("/#frag"), f);
}

static void test_unknown_paths(void **state)
{
    (void)state;
    assert_null(stats_console_find(""));
    assert_null(stats_console_find("index.html"));
    assert_null(stats_console_find("/nope"));
    assert_null(stats_console_find("//"));
    assert_null(stats_console_find("/index.htm"));
    assert_null(stats_console_find("/index.html/"));
    assert_null(stats_console_find("/../index.html"));
    assert_null(stats_console_find("/metrics"));
}

static void test_table_matches_built(void **state)
{
    (void)state;
    bool built = stats_console_built();
    if (strcmp(g_expect, "built") == 0)
        assert_true(built);
    else if (strcmp(g_expect, "not-built") == 0)
        assert_false(built);
    const stats_console_file_t *index = stats_console_find("/");
    assert_non_null(index);
    if (built) {
        assert_true(file_has(index, "console.js"));
        assert_true(file_has(index, "uPlot.iife.min.js"));
        const stats_console_file_t *js = stats_console_find("/console.js");
        assert_non_null(js);
        assert_string_equal(js->mime, "text/javascript; charset=utf-8");
        assert_true(file_has(js, "junction-mgmt"));
        const stats_console_file_t *css = stats_console_find("/console.css");
        assert_non_null(css);
        assert_string_equal(css->mime, "text/css; charset=utf-8");
        const stats_console_file_t *up = stats_console_find("/uPlot.iife.min.js");
        assert_non_null(up);
        assert_true(up->len > 10000);
        assert_true(file_has(up, "uPlot"));
        assert_non_null(stats_console_find("/uPlot.min.css"));
    } else {
        assert_true(file_has(index, "not built"));
        assert_null(stats_console_find("/console.js"));
        assert_null(stats_console_find("/uPlot.iife.min.js"));
    }
}

int main(int argc, char **argv)
{
    if (argc > 1)
        g_expect = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_index_paths),
        cmocka_unit_test(test_unknown_paths),
        cmocka_unit_test(test_table_matches_built),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
