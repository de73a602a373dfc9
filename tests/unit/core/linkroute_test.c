/* tests/unit/core/linkroute_test.c: core/linkroute.c - qdrouterd's link-route rules: the
 * CREATE checks and their words, direction, prefix and pattern matching, which connections
 * serve a route (containerId, connection name, role), linkBalanced turns, the address
 * rewrite and its undoing, removal. */
#include "core/linkroute.h"

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

static uint64_t add_ok(core_lr_table_t *t, core_lr_spec_t spec)
{
    const char *err = NULL;
    uint64_t    id = core_lr_add(t, &spec, &err);
    if (!id)
        fail_msg("core_lr_add: %s", err);
    return id;
}

static const char *add_err(core_lr_table_t *t, core_lr_spec_t spec)
{
    const char *err = NULL;
    assert_int_equal(core_lr_add(t, &spec, &err), 0);
    assert_non_null(err);
    return err;
}

/* Route an attach; returns the connection id, or -1 when no route matched.  The address
 * given to the route container goes to *addr (caller frees) when addr is not NULL. */
static int64_t route(core_lr_table_t *t, core_link_dir_t dir, const char *a, char **addr)
{
    core_lr_target_t tg;
    if (!core_lr_attach(t, dir, a, strlen(a), &tg))
        return -1;
    if (addr) {
        *addr = tg.address;
        tg.address = NULL;
    }
    core_lr_target_fini(&tg);
    return (int64_t)tg.conn_id;
}

static void test_checks(void **state)
{
    (void)state;
    core_lr_table_t *t = core_lr_table_new();
    assert_string_equal(add_err(t, (core_lr_spec_t){.prefix = "q",
                                                    .direction = "in",
                                                    .connection = "c",
                                                    .container_id = "b"}),
                        "Both connection and containerId cannot be specified. Specify only one");
    assert_string_equal(add_err(t, (core_lr_spec_t){.prefix = "q"}),
                        "No 'direction' attribute provided - it is mandatory");
    assert_string_equal(add_err(t, (core_lr_spec_t){.direction = "in"}),
                        "Either a 'prefix' or 'pattern' attribute must be provided");
    assert_string_equal(
        add_err(t, (core_lr_spec_t){.prefix = "q", .pattern = "q.#", .direction = "in"}),
        "Cannot specify both a 'prefix' and a 'pattern' attribute");
    assert_string_equal(add_err(t, (core_lr_spec_t){.prefix = "", .direction = "in"}),
                        "Prefix must be a non-empty string type");
    assert_string_equal(add_err(t, (core_lr_spec_t){.pattern = "./", .direction = "in"}),
                        "Pattern invalid - no tokens");
    assert_string_equal(add_err(t, (core_lr_spec_t){.prefix = "q", .direction = "both"}),
                        "Invalid value for 'direction'");
    assert_string_equal(
        add_err(t, (core_lr_spec_t){.prefix = "q", .direction = "in", .distribution = "closest"}),
        "Invalid value for 'distribution'");
    assert_int_equal(core_lr_count(t), 0);
    add_ok(t, (core_lr_spec_t){
                  .name = "r", .prefix = "q", .direction = "in", .distribution = "linkBalanced"});
    assert_string_equal(add_err(t, (core_lr_spec_t){.name = "r", .prefix = "z", .direction = "in"}),
                        "Name conflicts with an existing entity");
    assert_int_equal(core_lr_count(t), 1);
    core_lr_table_free(t);
}

/* `in` routes client senders only, `out` client receivers only; a prefix P is P/#. */
static void test_direction_and_match(void **state)
{
    (void)state;
    core_lr_table_t *t = core_lr_table_new();
    add_ok(t, (core_lr_spec_t){.prefix = "org.apache", .direction = "in", .container_id = "b"});
    add_ok(t, (core_lr_spec_t){.pattern = "*.q.#", .direction = "out", .container_id = "b"});
    assert_int_equal(core_lr_conn_opened(t, 7, 0, true, "b", NULL), 2);

    assert_int_equal(route(t, CORE_LINK_IN, "org.apache", NULL), 7);
    assert_int_equal(route(t, CORE_LINK_IN, "org.apache/x.y", NULL), 7);
    assert_int_equal(route(t, CORE_LINK_IN, "amqp:/org.apache.x", NULL), 7);
    assert_int_equal(route(t, CORE_LINK_IN, "org.apachex", NULL), -1);
    assert_int_equal(route(t, CORE_LINK_OUT, "org.apache", NULL), -1);

    assert_int_equal(route(t, CORE_LINK_OUT, "a.q", NULL), 7);
    assert_int_equal(route(t, CORE_LINK_OUT, "a/q/b/c", NULL), 7);
    assert_int_equal(route(t, CORE_LINK_OUT, "q", NULL), -1);
    assert_int_equal(route(t, CORE_LINK_IN, "a.q", NULL), -1);
    core_lr_table_free(t);
}

/* Only route containers serve; containerId matches the open's container id, connection the
 * listener's or connector's own name (never a generated one). */
static void test_serving(void **state)
{
    (void)state;
    core_lr_table_t *t = core_lr_table_new();
    add_ok(t, (core_lr_spec_t){
                  .name = "byc", .prefix = "c", .direction = "in", .container_id = "broker"});
    add_ok(t, (core_lr_spec_t){
                  .name = "byn", .prefix = "n", .direction = "in", .connection = "toBroker"});
    add_ok(t, (core_lr_spec_t){.name = "none", .prefix = "x", .direction = "in"});
    add_ok(t, (core_lr_spec_t){.name = "gen",
                               .prefix = "g",
                               .direction = "in",
                               .connection = "listener/0.0.0.0:5672"});

    /* A normal connection with the right container id serves nothing. */
    assert_int_equal(core_lr_conn_opened(t, 1, 0, false, "broker", "toBroker"), 0);
    assert_int_equal(route(t, CORE_LINK_IN, "c.q", NULL), 0);
    assert_int_equal(route(t, CORE_LINK_IN, "x", NULL), 0);
    core_lr_info_t info;
    assert_true(core_lr_info(t, 0, &info));
    assert_false(info.active);

    assert_int_equal(core_lr_conn_opened(t, 2, 0, true, "broker", "listener/0.0.0.0:5672"), 1);
    assert_int_equal(route(t, CORE_LINK_IN, "c.q", NULL), 2);
    assert_int_equal(route(t, CORE_LINK_IN, "g.q", NULL), 0);
    assert_int_equal(core_lr_conn_opened(t, 3, 0, true, "other", "toBroker"), 1);
    assert_int_equal(route(t, CORE_LINK_IN, "n", NULL), 3);
    assert_int_equal(route(t, CORE_LINK_IN, "x", NULL), 0);

    assert_true(core_lr_info(t, 0, &info));
    assert_true(info.active);
    assert_string_equal(info.name, "byc");
    assert_string_equal(info.prefix, "c");
    assert_string_equal(info.container_id, "broker");
    assert_int_equal(info.dir, CORE_LINK_IN);
    assert_true(core_lr_info(t, 2, &info));
    assert_false(info.active);
    assert_false(core_lr_info(t, 4, &info));

    /* A route added later finds the connection that serves it; closing deactivates. */
    add_ok(t, (core_lr_spec_t){
                  .name = "late", .pattern = "l.*", .direction = "out", .container_id = "broker"});
    assert_int_equal(route(t, CORE_LINK_OUT, "l.1", NULL), 2);
    assert_int_equal(core_lr_conn_closed(t, 2), 2);
    assert_int_equal(core_lr_conn_closed(t, 2), 0);
    assert_int_equal(route(t, CORE_LINK_OUT, "l.1", NULL), 0);
    assert_true(core_lr_info(t, 0, &info));
    assert_false(info.active);
    assert_int_equal(core_lr_conn_closed(t, 1), 0); /* never remembered */
    core_lr_table_free(t);
}

/* linkBalanced: two containers serving one pattern (two routes) take turns. */
static void test_balanced(void **state)
{
    (void)state;
    core_lr_table_t *t = core_lr_table_new();
    add_ok(t,
           (core_lr_spec_t){.name = "a", .prefix = "q", .direction = "out", .container_id = "b1"});
    add_ok(t,
           (core_lr_spec_t){.name = "b", .prefix = "q", .direction = "out", .container_id = "b2"});
    core_lr_conn_opened(t, 10, 0, true, "b1", NULL);
    core_lr_conn_opened(t, 20, 0, true, "b2", NULL);
    int n10 = 0, n20 = 0;
    for (int i = 0; i < 6; i++) {
        int64_t c = route(t, CORE_LINK_OUT, "q.x", NULL);
        n10 += c == 10;
        n20 += c == 20;
    }
    assert_int_equal(n10, 3);
    assert_int_equal(n20, 3);
    assert_true(core_lr_remove(t, "a", 0));
    assert_false(core_lr_remove(t, "a", 0));
    for (int i = 0; i < 3; i++)
        assert_int_equal(route(t, CORE_LINK_OUT, "q.x", NULL), 20);
    core_lr_info_t info;
    assert_true(core_lr_info(t, 0, &info));
    assert_true(core_lr_remove(t, NULL, info.identity));
    assert_int_equal(route(t, CORE_LINK_OUT, "q.x", NULL), -1);
    assert_int_equal(core_lr_count(t), 0);
    /* The table still works after emptying (the tail was reset). */
    add_ok(t,
           (core_lr_spec_t){.name = "c", .prefix = "q", .direction = "out", .container_id = "b1"});
    assert_int_equal(route(t, CORE_LINK_OUT, "q", NULL), 10);
    core_lr_table_free(t);
}

/* delExternalPrefix off, addExternalPrefix on; the answer undoes both. */
static void test_rewrite(void **state)
{
    (void)state;
    core_lr_table_t *t = core_lr_table_new();
    add_ok(t, (core_lr_spec_t){.prefix = "ext.",
                               .direction = "in",
                               .container_id = "b",
                               .del_prefix = "ext.",
                               .add_prefix = "queue://"});
    add_ok(t, (core_lr_spec_t){.prefix = "plain", .direction = "in", .container_id = "b"});
    core_lr_conn_opened(t, 5, 0, true, "b", NULL);

    core_lr_target_t tg;
    assert_true(core_lr_attach(t, CORE_LINK_IN, "ext.orders", 10, &tg));
    assert_int_equal(tg.conn_id, 5);
    assert_string_equal(tg.address, "queue://orders");
    char *back = core_lr_answer_address(&tg, "queue://orders");
    assert_string_equal(back, "ext.orders");
    free(back);
    core_lr_target_fini(&tg);

    /* The address equal to the prefix is not stripped (qdrouterd strips only a longer one). */
    assert_true(core_lr_attach(t, CORE_LINK_IN, "ext.", 4, &tg));
    assert_string_equal(tg.address, "queue://ext.");
    assert_null(tg.insert);
    back = core_lr_answer_address(&tg, tg.address);
    assert_string_equal(back, "ext.");
    free(back);
    core_lr_target_fini(&tg);

    char *a = NULL;
    assert_int_equal(route(t, CORE_LINK_IN, "plain.q", &a), 5);
    assert_string_equal(a, "plain.q");
    free(a);
    core_lr_table_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checks),  cmocka_unit_test(test_direction_and_match),
        cmocka_unit_test(test_serving), cmocka_unit_test(test_balanced),
        cmocka_unit_test(test_rewrite),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
