/* tests/unit/config/password_test.c: config/password.c - cfg_password_resolve(), a password
 * attribute's value read the way qdrouterd 1.19 reads sslProfile `password` and connector
 * `saslPassword` (env:, pass:, literal:, file:, or the text itself). */
#include "config/config.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// clang-format off: cmocka.h needs the headers above first
#include <cmocka.h>
// clang-format on

static char errbuf[512];

static void resolves(const char *value, bool literal, const char *want, bool want_plain)
{
    char *out = NULL;
    bool  plain = !want_plain;
    errbuf[0] = '\0';
    int rc = cfg_password_resolve(value, literal, &out, &plain, errbuf, sizeof(errbuf));
    if (rc != 0)
        print_error("unexpected error: %s\n", errbuf);
    assert_int_equal(rc, 0);
    assert_string_equal(out, want);
    assert_int_equal(plain, want_plain);
    free(out);
}

static void fails(const char *value, const char *want)
{
    char *out = (char *)(uintptr_t)0x1;
    bool  plain;
    int   rc = cfg_password_resolve(value, true, &out, &plain, errbuf, sizeof(errbuf));
    assert_int_equal(rc, -1);
    assert_ptr_equal(out, (char *)(uintptr_t)0x1);
    assert_string_equal(errbuf, want);
}

static void test_prefixes(void **state)
{
    (void)state;
    resolves("secret", true, "secret", true);
    resolves("pass:secret", false, "secret", true);
    resolves("pass:", false, "", true);
    resolves("literal:secret", true, "secret", true);
    /* literal: is sslProfile's only: elsewhere it is part of the password */
    resolves("literal:secret", false, "literal:secret", true);
    resolves("PASS:secret", true, "PASS:secret", true);
    setenv("JUNCTION_TEST_PW", "from env", 1);
    resolves("env:JUNCTION_TEST_PW", false, "from env", false);
    resolves("env:   JUNCTION_TEST_PW", false, "from env", false);
    setenv("JUNCTION_TEST_EMPTY", "", 1);
    resolves("env:JUNCTION_TEST_EMPTY", false, "", false);
    unsetenv("JUNCTION_TEST_NONE");
    fails("env:JUNCTION_TEST_NONE",
          "password: environment variable 'JUNCTION_TEST_NONE' is not set");
}

static char *temp_file(const char *content, size_t n)
{
    static char path[64];
    snprintf(path, sizeof(path), "/tmp/junction-pw-XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, content, n), (ssize_t)n);
    close(fd);
    return path;
}

static void test_file(void **state)
{
    (void)state;
    char value[128];
    /* the first line, without its newline */
    char *p = temp_file("s3cret\nsecond line\n", 19);
    snprintf(value, sizeof(value), "file:%s", p);
    resolves(value, false, "s3cret", false);
    unlink(p);
    p = temp_file("no newline", 10);
    snprintf(value, sizeof(value), "file:%s", p);
    resolves(value, true, "no newline", false);
    unlink(p);
    /* 199 bytes are read; a longer first line would be cut by qdrouterd */
    char long_line[260];
    memset(long_line, 'x', sizeof(long_line));
    p = temp_file(long_line, 199);
    snprintf(value, sizeof(value), "file:%s", p);
    char want199[200];
    memset(want199, 'x', 199);
    want199[199] = '\0';
    resolves(value, false, want199, false);
    unlink(p);
    p = temp_file(long_line, 200);
    snprintf(value, sizeof(value), "file:%s", p);
    char want[256];
    snprintf(want, sizeof(want), "password file '%s': its first line is longer than 199 bytes",
             p);
    fails(value, want);
    unlink(p);
    /* empty: qdrouterd would use "file:<path>" itself as the password */
    p = temp_file("\nx\n", 3);
    snprintf(value, sizeof(value), "file:%s", p);
    snprintf(want, sizeof(want), "password file '%s': its first line is empty", p);
    fails(value, want);
    unlink(p);
    fails("file:/nonexistent/junction/pw",
          "password file '/nonexistent/junction/pw': cannot open: No such file or directory");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prefixes),
        cmocka_unit_test(test_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
