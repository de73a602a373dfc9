/* tests/unit/router/conn_watch_test.c: the table of connections to containers
 * (router/conn_watch.c): lookups by connector name and by container id, the callback once
 * per open and once per end, ends of connections never entered ignored. */
#include "router/conn_watch.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

typedef struct seen {
    int      opened; /* callbacks with open = true */
    int      closed; /* with open = false */
    uint64_t last;   /* the last connection id */
} seen_t;

static void on_conn(void *arg, const rtr_conn_info_t *ci, bool open)
{
    seen_t *s = arg;
    if (open)
        s->opened++;
    else
        s->closed++;
    s->last = ci->id;
}

static rtr_conn_info_t info(uint64_t id, const char *connector, const char *container)
{
    rtr_conn_info_t ci = {.id = id, .worker = 1, .role = CFG_ROLE_ROUTE_CONTAINER};
    snprintf(ci.connector, sizeof(ci.connector), "%s", connector);
    snprintf(ci.container, sizeof(ci.container), "%s", container);
    return ci;
}

static void test_find_and_notify(void **state)
{
    (void)state;
    rtr_conn_watch_t *w = rtr_conn_watch_new();
    seen_t            s = {0};
    rtr_conn_watch_set(w, on_conn, &s);
    rtr_conn_info_t a = info(7, "broker", "rabbit@host"), b = info(9, "", "rabbit@host");
    rtr_conn_info_t out;
    assert_false(rtr_conn_watch_find_connector(w, "broker", &out));
    rtr_conn_watch_opened_WT(w, &a);
    rtr_conn_watch_opened_WT(w, &b);
    assert_int_equal(s.opened, 2);
    assert_true(rtr_conn_watch_find_connector(w, "broker", &out));
    assert_int_equal(out.id, 7);
    /* the first to have opened */
    assert_true(rtr_conn_watch_find_container(w, "rabbit@host", &out));
    assert_int_equal(out.id, 7);
    /* an accepted connection has no connector name: "" finds nothing */
    assert_false(rtr_conn_watch_find_connector(w, "", &out));
    assert_false(rtr_conn_watch_find_container(w, "other", &out));
    rtr_conn_watch_closed_WT(w, 7);
    assert_int_equal(s.closed, 1);
    assert_int_equal(s.last, 7);
    assert_false(rtr_conn_watch_find_connector(w, "broker", &out));
    assert_true(rtr_conn_watch_find_container(w, "rabbit@host", &out));
    assert_int_equal(out.id, 9);
    /* never entered, or ended already: no callback */
    rtr_conn_watch_closed_WT(w, 7);
    rtr_conn_watch_closed_WT(w, 42);
    assert_int_equal(s.closed, 1);
    rtr_conn_watch_free(w); /* frees connection 9's entry */
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_find_and_notify)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
