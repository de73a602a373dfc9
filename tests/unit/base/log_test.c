/* tests/unit/base/log_test.c: core/base/log.c - qdrouterd's `enable` grammar (separators,
 * prefixes, case, `+`, none, default, bad words), and the writer thread: lines from several
 * threads all land whole in the file, across a reopen after a rename. */
#include "core/base/log.h"

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// clang-format off: cmocka.h needs the headers above first
#include <cmocka.h>
// clang-format on

#define T      0x01u /* trace */
#define D      0x02u /* debug */
#define I      0x04u /* info */
#define N      0x08u /* notice */
#define W      0x10u /* warning */
#define E      0x20u /* error */
#define C      0x40u /* critical */
#define FOLLOW 0xffu

static unsigned parse(const char *text)
{
    uint8_t m = 0x55;
    assert_int_equal(base_log_parse_enable(text, &m), 0);
    return m;
}

static void assert_bad(const char *text)
{
    uint8_t m = 0x55;
    assert_int_equal(base_log_parse_enable(text, &m), -1);
    assert_int_equal(m, 0x55); /* untouched */
}

static void test_enable_levels_and_plus(void **state)
{
    (void)state;
    assert_int_equal(parse("trace"), T);
    assert_int_equal(parse("trace,debug"), T | D);
    assert_int_equal(parse("info+"), I | N | W | E | C);
    assert_int_equal(parse("warning+"), W | E | C);
    assert_int_equal(parse("critical+"), C);
    assert_int_equal(parse("trace,debug,warning+"), T | D | W | E | C);
    assert_int_equal(parse("notice"), N);
    assert_int_equal(parse("error"), E);
}

static void test_enable_separators(void **state)
{
    (void)state;
    /* qdrouterd splits on comma, space, semicolon and colon, and skips empty words */
    assert_int_equal(parse("trace debug"), T | D);
    assert_int_equal(parse("trace;debug:error"), T | D | E);
    assert_int_equal(parse(" ,trace,, debug ,"), T | D);
    assert_int_equal(parse("  info+  "), I | N | W | E | C);
}

static void test_enable_prefix_and_case(void **state)
{
    (void)state;
    assert_int_equal(parse("warn+"), W | E | C);
    assert_int_equal(parse("WARNING+"), W | E | C);
    assert_int_equal(parse("Info"), I);
    assert_int_equal(parse("i+"), I | N | W | E | C);
    assert_int_equal(parse("t"), T);
    assert_int_equal(parse("deb"), D);
    assert_int_equal(parse("not"), N);
    assert_int_equal(parse("crit"), C);
    assert_int_equal(parse("e+"), E | C);
    /* the first name in qdrouterd's order wins: default, none, trace, debug, info, notice, ... */
    assert_int_equal(parse("d"), FOLLOW);
    assert_int_equal(parse("de"), FOLLOW);
    assert_int_equal(parse("no"), 0);
}

static void test_enable_none_and_default(void **state)
{
    (void)state;
    assert_int_equal(parse("none"), 0);
    assert_int_equal(parse("NONE"), 0);
    assert_int_equal(parse(""), 0);
    assert_int_equal(parse("none,error"), E);
    assert_int_equal(parse("default"), FOLLOW);
    assert_int_equal(parse("Default"), FOLLOW);
    /* "default" anywhere: qdrouterd's mask becomes -1, following DEFAULT */
    assert_int_equal(parse("info,default"), FOLLOW);
    assert_int_equal(parse("+"), FOLLOW);
}

static void test_enable_bad_words(void **state)
{
    (void)state;
    assert_bad("loud");
    assert_bad("warnings"); /* longer than a name is no prefix of it */
    assert_bad("information");
    assert_bad("info+,x");
    assert_bad("trace,xyz"); /* qdrouterd's bit arithmetic lets this one through */
    assert_bad("info++");
    assert_bad("+info");
}

static void test_enable_round_trip(void **state)
{
    (void)state;
    const char *texts[] = {"info+",   "trace,debug", "trace,debug,warning+", "none",
                           "default", "critical",    "notice,error"};
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        char buf[128];
        base_log_format_enable((uint8_t)parse(texts[i]), buf, sizeof(buf));
        assert_string_equal(buf, texts[i]);
    }
}

/* -- the writer -- */

#define THREADS    4
#define PER_THREAD 5000

static void *log_lines(void *arg)
{
    long t = (long)arg;
    for (int i = 0; i < PER_THREAD; i++)
        base_log(BASE_LOG_MOD_SERVER, BASE_LOG_INFO, "thread %ld line %d", t, i);
    return NULL;
}

/* Count the lines of a file, checking that each is a whole one. */
static int count_lines(const char *path, int seen[THREADS][PER_THREAD], bool *reopened)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[512];
    int  n = 0;
    while (fgets(line, sizeof(line), f)) {
        long t;
        int  i;
        /* the test's own last line, and the writer's report of lines a full queue dropped
           (a loaded machine lets the threads outrun the writer) */
        if (strstr(line, "Reopened") != NULL) {
            *reopened = true;
            continue;
        }
        if (strstr(line, "log lines dropped") != NULL)
            continue;
        const char *p = strstr(line, "SERVER (info) thread ");
        assert_non_null(p);
        assert_int_equal(sscanf(p, "SERVER (info) thread %ld line %d", &t, &i), 2);
        assert_true(t >= 0 && t < THREADS && i >= 0 && i < PER_THREAD);
        seen[t][i]++;
        n++;
    }
    fclose(f);
    return n;
}

static void test_writer_loses_no_line_across_reopen(void **state)
{
    (void)state;
    char dir[] = "/tmp/log_test.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], old[256];
    snprintf(path, sizeof(path), "%s/out.log", dir);
    snprintf(old, sizeof(old), "%s/out.log.1", dir);
    assert_int_equal(base_log_set_output(BASE_LOG_MOD_DEFAULT, path), 0);
    /* a second module naming the same file shares it */
    assert_int_equal(base_log_set_output(BASE_LOG_MOD_AGENT, path), 0);
    base_log_finish_config();
    assert_int_equal(base_log_start_writer(), 0);

    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, log_lines, (void *)t), 0);
    usleep(2000);
    assert_int_equal(rename(path, old), 0);
    base_log_reopen();
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    /* the queue may still be full: this line goes in once there is room for it */
    uint64_t own_drops = 0;
    for (;;) {
        uint64_t before = base_log_dropped();
        base_log(BASE_LOG_MOD_AGENT, BASE_LOG_INFO, "Reopened, and the same file");
        if (base_log_dropped() == before)
            break;
        own_drops++;
        usleep(1000);
    }
    base_log_stop_writer(10.0);

    static int seen[THREADS][PER_THREAD];
    bool       reopened_old = false, reopened_new = false;
    int        in_old = count_lines(old, seen, &reopened_old);
    int        in_new = count_lines(path, seen, &reopened_new);
    uint64_t   dropped = base_log_dropped() - own_drops;
    /* a line is in one file exactly once, or it was counted as dropped */
    int missing = 0;
    for (int t = 0; t < THREADS; t++)
        for (int i = 0; i < PER_THREAD; i++) {
            assert_true(seen[t][i] <= 1);
            missing += seen[t][i] == 0;
        }
    assert_int_equal((uint64_t)missing, dropped);
    assert_int_equal(in_old + in_new + missing, THREADS * PER_THREAD);
    /* the line logged after the reopen is in the new file only (the threads' lines may all
       land in either file on a loaded machine) */
    assert_true(reopened_new && !reopened_old);
    unlink(old);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_enable_levels_and_plus),
        cmocka_unit_test(test_enable_separators),
        cmocka_unit_test(test_enable_prefix_and_case),
        cmocka_unit_test(test_enable_none_and_default),
        cmocka_unit_test(test_enable_bad_words),
        cmocka_unit_test(test_enable_round_trip),
        cmocka_unit_test(test_writer_loses_no_line_across_reopen),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
