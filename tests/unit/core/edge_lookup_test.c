/* tests/unit/core/edge_lookup_test.c: link routes through an edge in the core
 * (core/edge_lookup.c): which attaches an edge asks its interior about, what each answer
 * makes of the attach (routed on the edge connection, qd:no-route-to-dest, the edge's own
 * lookup), an attach detached or its edge connection lost while it waits; and the interior's
 * answers from its link-route table.  The test plays the workers against a real core thread
 * (core_fixture.h): worker 0 has the clients (connection 1), worker 1 the edge connection 100.
 */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "core/linkroute.h"
#include "core_fixture.h"

#include <stdlib.h>
#include <string.h>

static const char *EDGE =
    "[[\"router\", {\"id\": \"E\", \"mode\": \"edge\", \"workerThreads\": 2}]]";

static const char *INTERIOR =
    "[[\"router\", {\"id\": \"I\", \"mode\": \"interior\", \"workerThreads\": 2}],"
    " [\"linkRoute\", {\"prefix\": \"lr\", \"direction\": \"in\", \"connection\": \"broker\"}],"
    " [\"linkRoute\", {\"prefix\": \"none\", \"direction\": \"out\","
    " \"connection\": \"nobroker\"}]]";

/* Post a client's attach (connection 1, worker 0) without waiting for the answer. */
static uint64_t attach_post(fixture_t *f, core_link_dir_t dir, const char *addr)
{
    uint64_t      id = ++f->next_link;
    core_action_t a = {.type = CORE_A_LINK_ATTACH, .worker = 0, .link_id = id};
    a.u.attach.conn_id = 1;
    a.u.attach.handle = &f->handles[id];
    a.u.attach.address = strdup(addr);
    a.u.attach.name = strdup("client-link");
    a.u.attach.capacity = 250;
    a.u.attach.dir = (uint8_t)dir;
    post(f, &a);
    return id;
}

static void edge_event(fixture_t *f, uint64_t conn, core_edge_event_t ev)
{
    core_action_t a = {.type = CORE_A_EDGE, .worker = 1};
    a.u.edge.conn_id = conn;
    a.u.edge.event = (uint8_t)ev;
    post(f, &a);
}

/* The next CORE_W_EDGE for worker 1, which must be op; its request number. */
static uint64_t expect_op(fixture_t *f, core_edge_op_t op, const char *key, int dir)
{
    core_work_t x = expect(f, 1, CORE_W_EDGE);
    assert_int_equal(x.u.edge.op, op);
    assert_int_equal(x.u.edge.conn_id, 100);
    if (key)
        assert_string_equal(x.u.edge.key, key);
    if (dir >= 0)
        assert_int_equal(x.u.edge.dir, dir);
    free(x.u.edge.key);
    return x.u.edge.req;
}

static void reply(fixture_t *f, uint64_t req, core_edge_verdict_t v)
{
    core_action_t a = {.type = CORE_A_EDGE, .worker = 1};
    a.u.edge.conn_id = 100;
    a.u.edge.event = CORE_EDGE_LOOKUP_REPLY;
    a.u.edge.req = req;
    a.u.edge.verdict = (uint8_t)v;
    post(f, &a);
}

/* The core's answer to link id (worker 0): its condition (NULL: attached), *routed set when
 * it is link-routed (then to connection 100 of worker 1 with `addr`). */
static const char *answer(fixture_t *f, uint64_t id, bool *routed, const char *addr)
{
    core_work_t r;
    for (;;) {
        r = expect(f, 0, CORE_W_LINK_ATTACHED);
        if (r.handle == &f->handles[id])
            break;
        fail_msg("an answer for another link");
    }
    *routed = r.u.attached.routed != NULL;
    if (r.u.attached.routed) {
        assert_int_equal(r.u.attached.routed->conn_id, 100);
        assert_int_equal(r.u.attached.routed->worker, 1);
        assert_string_equal(r.u.attached.routed->address, addr);
        assert_false(r.u.attached.routed->mesh); /* the link's name stays the client's */
        core_lr_target_free(r.u.attached.routed);
    }
    free(r.u.attached.address);
    free(r.u.attached.cond_desc);
    return r.u.attached.cond_name;
}

static void test_edge_asks(void **state)
{
    (void)state;
    fixture_t *f = fx_new(EDGE);
    bool       routed;
    /* no edge connection: the edge's own lookup at once */
    uint64_t l = attach_post(f, CORE_LINK_IN, "lr.x");
    assert_null(answer(f, l, &routed, NULL));
    assert_false(routed);
    edge_event(f, 100, CORE_EDGE_CONN_OPENED);
    expect_op(f, CORE_EDGE_ACTIVATE, NULL, -1);
    drain(f, 1, 50);
    for (size_t i = 0; i < f->n_pending[1]; i++) /* the proxy links of what is attached */
        if (f->pending[1][i].type == CORE_W_EDGE)
            free(f->pending[1][i].u.edge.key);
    f->n_pending[1] = 0;
    /* link-routed with a destination: routed on the edge connection, address unchanged */
    l = attach_post(f, CORE_LINK_IN, "lr.a");
    uint64_t req = expect_op(f, CORE_EDGE_LOOKUP_ASK, "lr.a", CORE_LINK_IN);
    expect_none(f, 0, CORE_W_LINK_ATTACHED); /* held until the answer */
    reply(f, req, CORE_EDGE_VERDICT_ROUTED);
    assert_null(answer(f, l, &routed, "lr.a"));
    assert_true(routed);
    /* a receiver, link-routed without a destination */
    l = attach_post(f, CORE_LINK_OUT, "lr.b");
    req = expect_op(f, CORE_EDGE_LOOKUP_ASK, "lr.b", CORE_LINK_OUT);
    reply(f, req, CORE_EDGE_VERDICT_NO_ROUTE);
    assert_string_equal(answer(f, l, &routed, NULL), "qd:no-route-to-dest");
    assert_false(routed);
    detach(f, 0, l);
    /* not a link route: message-routed here (and proxied to the interior) */
    l = attach_post(f, CORE_LINK_OUT, "plain");
    req = expect_op(f, CORE_EDGE_LOOKUP_ASK, "plain", CORE_LINK_OUT);
    reply(f, req, CORE_EDGE_VERDICT_LOCAL);
    assert_null(answer(f, l, &routed, NULL));
    assert_false(routed);
    expect_op(f, CORE_EDGE_PROXY_ADD, "M0plain", CORE_LINK_IN);
    /* detached while it waits: answered (refused), then detached; the late reply is
     * ignored */
    l = attach_post(f, CORE_LINK_IN, "lr.c");
    req = expect_op(f, CORE_EDGE_LOOKUP_ASK, "lr.c", CORE_LINK_IN);
    detach(f, 0, l);
    assert_string_equal(answer(f, l, &routed, NULL), "qd:no-route-to-dest");
    reply(f, req, CORE_EDGE_VERDICT_ROUTED);
    expect_none(f, 0, CORE_W_LINK_ATTACHED);
    /* the edge connection lost while it waits: the edge's own lookup */
    l = attach_post(f, CORE_LINK_IN, "lr.d");
    req = expect_op(f, CORE_EDGE_LOOKUP_ASK, "lr.d", CORE_LINK_IN);
    edge_event(f, 100, CORE_EDGE_CONN_CLOSED);
    assert_null(answer(f, l, &routed, NULL));
    assert_false(routed);
    reply(f, req, CORE_EDGE_VERDICT_ROUTED);
    expect_none(f, 0, CORE_W_LINK_ATTACHED);
    fx_free(f);
}

/* The interior's answer to an edge's request req for `addr` in direction dir. */
static void ask(fixture_t *f, uint64_t req, const char *addr, core_link_dir_t dir, bool lr,
                bool dest)
{
    core_action_t a = {.type = CORE_A_EDGE, .worker = 1};
    a.u.edge.conn_id = 100;
    a.u.edge.event = CORE_EDGE_LOOKUP;
    a.u.edge.key = strdup(addr);
    a.u.edge.req = req;
    a.u.edge.dir = (uint8_t)dir;
    post(f, &a);
    core_work_t x = expect(f, 1, CORE_W_EDGE);
    assert_int_equal(x.u.edge.op, CORE_EDGE_LOOKUP_ANSWER);
    assert_int_equal(x.u.edge.conn_id, 100);
    assert_int_equal(x.u.edge.req, req);
    assert_null(x.u.edge.key);
    assert_int_equal(x.u.edge.flag, lr);
    assert_int_equal(x.u.edge.dest, dest);
}

static void test_interior_answers(void **state)
{
    (void)state;
    fixture_t *f = fx_new(INTERIOR);
    ask(f, 1, "lr.q", CORE_LINK_IN, true, false); /* no container yet */
    core_action_t a = {.type = CORE_A_CONN_OPENED, .worker = 0};
    a.u.conn.conn_id = 5;
    a.u.conn.name = strdup("broker");
    a.u.conn.container_id = strdup("the-broker");
    a.u.conn.route_container = true;
    post(f, &a);
    ask(f, 2, "lr.q", CORE_LINK_IN, true, true);
    ask(f, 3, "lr", CORE_LINK_IN, true, true);
    ask(f, 4, "lr.q", CORE_LINK_OUT, false, false); /* the route is for senders only */
    ask(f, 5, "none.q", CORE_LINK_OUT, true, false);
    ask(f, 6, "other", CORE_LINK_IN, false, false);
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_edge_asks),
        cmocka_unit_test(test_interior_answers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
