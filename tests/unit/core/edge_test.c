/* tests/unit/core/edge_test.c: edge mode in the core (core/edge.c) - which edge connection is
 * active, the proxy links the core asks for, the uplink's share of the forwarding, the
 * interior's tracking binding a proxy sender, the edge-echo rule, and the interior's side of
 * the tracking.  As core_test.c, the test plays the workers against a real core thread
 * (core_fixture.h).
 *
 * Connections: 1 and 2 are clients' (worker 0); 100 and 101 are edge connections (worker 1).
 */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "core_fixture.h"

#include <stdlib.h>
#include <string.h>

/* The next CORE_W_EDGE for worker w: op, direction and key checked (key NULL: none). */
static void expect_edge(fixture_t *f, int w, core_edge_op_t op, int dir, const char *key,
                        uint64_t conn)
{
    core_work_t x = expect(f, w, CORE_W_EDGE);
    assert_int_equal(x.u.edge.op, op);
    assert_int_equal(x.u.edge.conn_id, conn);
    if (dir >= 0)
        assert_int_equal(x.u.edge.dir, dir);
    if (key)
        assert_string_equal(x.u.edge.key, key);
    free(x.u.edge.key);
}

static void edge_event(fixture_t *f, int w, uint64_t conn, core_edge_event_t ev, const char *key,
                       bool flag)
{
    core_action_t a = {.type = CORE_A_EDGE, .worker = (uint8_t)w};
    a.u.edge.conn_id = conn;
    a.u.edge.event = (uint8_t)ev;
    a.u.edge.key = key ? strdup(key) : NULL;
    a.u.edge.flag = flag;
    post(f, &a);
}

/* A presettled delivery on `link` (to: its `to`, NULL on a targeted link), which the core
 * releases at once. */
static test_dlv_t *send_presettled(fixture_t *f, int w, uint64_t link, const char *to)
{
    test_dlv_t *t = deliver(f, w, link, to, true);
    expect(f, w, CORE_W_RELEASE); /* presettled: the core is done with it */
    return t;
}

static const char *EDGE = "[[\"router\", {\"id\": \"E\", \"mode\": \"edge\", \"workerThreads\": 2}],"
                          " [\"address\", {\"prefix\": \"mc\", \"distribution\": \"multicast\"}],"
                          " [\"address\", {\"prefix\": \"cl\", \"distribution\": \"closest\"}]]";

/* The first edge connection to open is active; the core asks for a proxy receiver per
 * address with local consumers and a proxy sender per address with local producers, then
 * follows their first and last; in-process links are not proxied. */
static void test_activation_and_proxies(void **state)
{
    (void)state;
    fixture_t *f = fx_new(EDGE);
    uint64_t   c1 = attach_edge(f, 0, 1, CORE_LINK_OUT, "cl.x", CORE_EDGE_LINK_NONE);
    attach_edge(f, 0, 0, CORE_LINK_OUT, "cl.agent", CORE_EDGE_LINK_NONE); /* in-process */
    expect_none(f, 1, CORE_W_EDGE);
    edge_event(f, 1, 100, CORE_EDGE_CONN_OPENED, NULL, false);
    expect_edge(f, 1, CORE_EDGE_ACTIVATE, -1, NULL, 100);
    expect_edge(f, 1, CORE_EDGE_PROXY_ADD, CORE_LINK_IN, "M0cl.x", 100);
    expect_none(f, 1, CORE_W_EDGE); /* nothing for the in-process consumer */
    /* a second edge connection waits */
    edge_event(f, 1, 101, CORE_EDGE_CONN_OPENED, NULL, false);
    expect_none(f, 1, CORE_W_EDGE);
    uint64_t p1 = attach_edge(f, 0, 2, CORE_LINK_IN, "cl.y", CORE_EDGE_LINK_NONE);
    expect_edge(f, 1, CORE_EDGE_PROXY_ADD, CORE_LINK_OUT, "M0cl.y", 100);
    uint64_t c2 = attach_edge(f, 0, 2, CORE_LINK_OUT, "cl.x", CORE_EDGE_LINK_NONE);
    expect_none(f, 1, CORE_W_EDGE); /* not the first */
    detach(f, 0, c1);
    expect_none(f, 1, CORE_W_EDGE); /* not the last */
    detach(f, 0, c2);
    expect_edge(f, 1, CORE_EDGE_PROXY_DEL, CORE_LINK_IN, "M0cl.x", 100);
    /* the active connection goes: the other one is activated with the addresses left */
    edge_event(f, 1, 100, CORE_EDGE_CONN_CLOSED, NULL, false);
    expect_edge(f, 1, CORE_EDGE_ACTIVATE, -1, NULL, 101);
    expect_edge(f, 1, CORE_EDGE_PROXY_ADD, CORE_LINK_OUT, "M0cl.y", 101);
    detach(f, 0, p1);
    expect_edge(f, 1, CORE_EDGE_PROXY_DEL, CORE_LINK_OUT, "M0cl.y", 101);
    fx_free(f);
}

/* The uplink takes what is not local: an address not in the table, another router's, an
 * anycast one with no consumer here; multicast goes to the local consumers and up. */
static void test_uplink(void **state)
{
    (void)state;
    fixture_t *f = fx_new(EDGE);
    edge_event(f, 1, 100, CORE_EDGE_CONN_OPENED, NULL, false);
    expect_edge(f, 1, CORE_EDGE_ACTIVATE, -1, NULL, 100);
    uint64_t up = attach_edge(f, 1, 100, CORE_LINK_OUT, NULL, CORE_EDGE_LINK_UPLINK);
    uint64_t snd = attach_edge(f, 0, 1, CORE_LINK_IN, NULL, CORE_EDGE_LINK_NONE);
    free(send_presettled(f, 0, snd, "nowhere"));
    expect_h(f, 1, CORE_W_SEND, &f->handles[up]);
    free(send_presettled(f, 0, snd, "_topo/0/Other/$management"));
    expect_h(f, 1, CORE_W_SEND, &f->handles[up]);
    free(send_presettled(f, 0, snd, "_edge/E2/x"));
    expect_h(f, 1, CORE_W_SEND, &f->handles[up]);
    /* a local consumer of cl.a: it, not the uplink */
    uint64_t ca = attach_edge(f, 0, 2, CORE_LINK_OUT, "cl.a", CORE_EDGE_LINK_NONE);
    free(send_presettled(f, 0, snd, "cl.a"));
    expect_h(f, 0, CORE_W_SEND, &f->handles[ca]);
    expect_none_h(f, 1, CORE_W_SEND, &f->handles[up]);
    detach(f, 0, ca);
    free(send_presettled(f, 0, snd, "cl.a"));
    expect_h(f, 1, CORE_W_SEND, &f->handles[up]);
    /* multicast: the local consumer and up */
    uint64_t cm = attach_edge(f, 0, 2, CORE_LINK_OUT, "mc.b", CORE_EDGE_LINK_NONE);
    free(send_presettled(f, 0, snd, "mc.b"));
    expect_h(f, 0, CORE_W_SEND, &f->handles[cm]);
    expect_h(f, 1, CORE_W_SEND, &f->handles[up]);
    /* what comes down from the interior never goes back up */
    uint64_t down = attach_edge(f, 1, 100, CORE_LINK_IN, NULL, CORE_EDGE_LINK_PEER);
    free(send_presettled(f, 1, down, "nowhere"));
    free(send_presettled(f, 1, down, "mc.b"));
    expect_h(f, 0, CORE_W_SEND, &f->handles[cm]);
    expect_none_h(f, 1, CORE_W_SEND, &f->handles[up]);
    /* a client may not receive from the uplink's address */
    uint64_t id = ++f->next_link;
    core_action_t a = {.type = CORE_A_LINK_ATTACH, .worker = 0, .link_id = id};
    a.u.attach.conn_id = 2;
    a.u.attach.handle = &f->handles[id];
    a.u.attach.address = strdup("_topo/0/Other/x");
    a.u.attach.capacity = 250;
    a.u.attach.dir = CORE_LINK_OUT;
    post(f, &a);
    assert_true(answer_lookups(f, 50)); /* the edge asks its interior first */
    core_work_t r = expect_h(f, 0, CORE_W_LINK_ATTACHED, &f->handles[id]);
    assert_string_equal(r.u.attached.cond_name, "qd:no-route-to-dest");
    free(r.u.attached.cond_desc);
    fx_free(f);
}

/* A proxy sender joins its address only while the interior's tracking says so: the edge's
 * producer has credit then, and what it sends goes up on it; tracking of another connection
 * than the active one is ignored. */
static void test_tracking_binds_proxy_sender(void **state)
{
    (void)state;
    fixture_t *f = fx_new(EDGE);
    edge_event(f, 1, 100, CORE_EDGE_CONN_OPENED, NULL, false);
    expect_edge(f, 1, CORE_EDGE_ACTIVATE, -1, NULL, 100);
    uint64_t p = attach_edge(f, 0, 1, CORE_LINK_IN, "cl.p", CORE_EDGE_LINK_NONE);
    expect_edge(f, 1, CORE_EDGE_PROXY_ADD, CORE_LINK_OUT, "M0cl.p", 100);
    uint64_t po = attach_edge(f, 1, 100, CORE_LINK_OUT, "M0cl.p", CORE_EDGE_LINK_PROXY_OUT);
    expect_none_h(f, 0, CORE_W_LINK_CREDIT, &f->handles[p]);
    edge_event(f, 1, 101, CORE_EDGE_TRACK, "M0cl.p", true); /* not the active one */
    expect_none_h(f, 0, CORE_W_LINK_CREDIT, &f->handles[p]);
    edge_event(f, 1, 100, CORE_EDGE_TRACK, "M0cl.p", true);
    core_work_t cr = expect_h(f, 0, CORE_W_LINK_CREDIT, &f->handles[p]);
    assert_true(cr.u.credit.grant);
    free(send_presettled(f, 0, p, NULL));
    expect_h(f, 1, CORE_W_SEND, &f->handles[po]);
    edge_event(f, 1, 100, CORE_EDGE_TRACK, "M0cl.p", false);
    cr = expect_h(f, 0, CORE_W_LINK_CREDIT, &f->handles[p]);
    assert_false(cr.u.credit.grant);
    /* bound again, then the proxy sender goes: the producer is drained */
    edge_event(f, 1, 100, CORE_EDGE_TRACK, "M0cl.p", true);
    expect_h(f, 0, CORE_W_LINK_CREDIT, &f->handles[p]);
    detach(f, 1, po);
    cr = expect_h(f, 0, CORE_W_LINK_CREDIT, &f->handles[p]);
    assert_false(cr.u.credit.grant);
    detach(f, 0, p);
    fx_free(f);
}

static const char *INTERIOR = "[[\"router\", {\"id\": \"I\", \"mode\": \"interior\","
                              " \"workerThreads\": 2}]]";

/* The interior's side: an edge's producer link learns whether its address has a destination
 * other than that edge (a client's consumer here, another edge's proxy receiver), never its
 * own proxy receiver; and nothing an edge sends goes back to that edge. */
static void test_interior_tracking_and_echo(void **state)
{
    (void)state;
    fixture_t *f = fx_new(INTERIOR);
    uint64_t   ep = attach_edge(f, 1, 100, CORE_LINK_IN, "t", CORE_EDGE_LINK_PEER);
    expect_none(f, 1, CORE_W_EDGE);
    uint64_t own = attach_edge(f, 1, 100, CORE_LINK_OUT, "t", CORE_EDGE_LINK_PEER);
    expect_none(f, 1, CORE_W_EDGE); /* its own proxy receiver is no destination */
    uint64_t c = attach_edge(f, 0, 1, CORE_LINK_OUT, "t", CORE_EDGE_LINK_NONE);
    core_work_t x = expect(f, 1, CORE_W_EDGE);
    assert_int_equal(x.u.edge.op, CORE_EDGE_TRACK_SEND);
    assert_int_equal(x.u.edge.conn_id, 100);
    assert_string_equal(x.u.edge.key, "M0t");
    assert_true(x.u.edge.flag);
    free(x.u.edge.key);
    /* what the edge sends goes to the client's consumer, never back to the edge */
    for (int i = 0; i < 4; i++) {
        free(send_presettled(f, 1, ep, NULL));
        expect_h(f, 0, CORE_W_SEND, &f->handles[c]);
    }
    expect_none_h(f, 1, CORE_W_SEND, &f->handles[own]);
    detach(f, 0, c);
    x = expect(f, 1, CORE_W_EDGE);
    assert_int_equal(x.u.edge.op, CORE_EDGE_TRACK_SEND);
    assert_false(x.u.edge.flag);
    free(x.u.edge.key);
    /* another edge's proxy receiver counts */
    attach_edge(f, 1, 101, CORE_LINK_OUT, "t", CORE_EDGE_LINK_PEER);
    x = expect(f, 1, CORE_W_EDGE);
    assert_true(x.u.edge.flag);
    assert_int_equal(x.u.edge.conn_id, 100);
    free(x.u.edge.key);
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_activation_and_proxies),
        cmocka_unit_test(test_uplink),
        cmocka_unit_test(test_tracking_binds_proxy_sender),
        cmocka_unit_test(test_interior_tracking_and_echo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
