/* tests/unit/core/interior_test.c: the forwarder's data plane across routers (core/interior.c)
 * with a synthetic mesh: inter-router connections and their data links attached as the
 * connection layer will attach them, a route table and remote destinations as the control
 * plane will install them (core/interior.h), deliveries with router annotations as the
 * workers hand them over.  As core_test.c, the test plays the workers against a real core
 * thread.  The last test composes router annotations with the codec and compares them with
 * what a real qdrouterd 1.19 sent (tests/unit/core/routing/vectors/, VECTORS_DIR argument).
 *
 * The mesh seen from this router, A:
 *
 *        conn bit 0 (id 101)          conn bit 1 (id 102)
 *   B (mask 1, neighbour, cost 1)   C (mask 2, neighbour, cost 5)
 *   D (mask 3, via B, cost 2)
 */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "codec/codec.h"
#include "config/config.h"
#include "core/base/mpsc.h"
#include "core/core.h"
#include "core/interior.h"
#include "core_fixture.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The router annotations of a delivery (NULL: none). */
typedef struct ra {
    const char *ingress;  /* "0/<id>" */
    const char *trace[8]; /* "0/<id>" each, NULL-terminated */
    uint8_t     priority; /* header priority + 1, 0 for none */
    uint8_t     phase;    /* x-opt-qd.phase + 1, 0 for none */
} ra_t;

static test_dlv_t *deliver_ra(fixture_t *f, int w, uint64_t link, const char *to, bool presettled,
                              const ra_t *ra)
{
    test_dlv_t *t = dlv_new(link, to, presettled);
    if (ra) {
        if (ra->ingress) {
            t->dlv.ra_ingress = (const uint8_t *)ra->ingress;
            t->dlv.ra_ingress_len = (uint32_t)strlen(ra->ingress);
        }
        size_t n = 0;
        for (int i = 0; i < 8 && ra->trace[i]; i++) {
            size_t l = strlen(ra->trace[i]);
            t->trace[n++] = 0xa1;
            t->trace[n++] = (uint8_t)l;
            memcpy(t->trace + n, ra->trace[i], l);
            n += l;
            t->dlv.ra_trace_count++;
        }
        if (n) {
            t->dlv.ra_trace = t->trace;
            t->dlv.ra_trace_len = (uint32_t)n;
        }
        t->dlv.priority = ra->priority;
        t->dlv.ra_phase = ra->phase;
    }
    dlv_post(f, w, t);
    return t;
}

static const char *CONFIG = "[[\"router\", {\"id\": \"A\", \"workerThreads\": 2}],"
                            " [\"address\", {\"prefix\": \"mc\", \"distribution\": \"multicast\"}],"
                            " [\"address\", {\"prefix\": \"cl\", \"distribution\": \"closest\"}]]";

static const char *VECTORS_DIR = "tests/unit/core/routing/vectors";

/* ---- running the control plane's calls on the core thread ---- */

typedef struct on_core {
    int (*fn)(core_t *core, void *arg); /* what to run */
    void       *arg;                    /* its argument */
    int         rc;                     /* its result */
    atomic_bool done;                   /* set by the core thread */
} on_core_t;

static void on_core_cb(core_t *core, void *arg)
{
    on_core_t *c = arg;
    c->rc = c->fn(core, c->arg);
    atomic_store(&c->done, true);
}

static int run_on_core(fixture_t *f, int (*fn)(core_t *, void *), void *arg)
{
    on_core_t c = {.fn = fn, .arg = arg};
    atomic_init(&c.done, false);
    assert_int_equal(core_call(f->core, on_core_cb, &c), 0);
    while (!atomic_load(&c.done))
        usleep(1000);
    return c.rc;
}

static int routes_fn(core_t *core, void *arg)
{
    return core_rt_set_routes_CT(core, arg);
}

typedef struct conn_arg {
    uint64_t conn_id; /* the connection */
    uint32_t bit;     /* its mask bit */
    bool     add;     /* announce or withdraw */
} conn_arg_t;

static int conn_fn(core_t *core, void *arg)
{
    conn_arg_t *c = arg;
    return core_rt_conn_CT(core, c->conn_id, c->bit, c->add);
}

typedef struct raddr_arg {
    const char *key; /* address hash key */
    uint32_t    bit; /* router mask bit */
    bool        add; /* gain or lose */
} raddr_arg_t;

static int raddr_fn(core_t *core, void *arg)
{
    raddr_arg_t *r = arg;
    return core_rt_remote_addr_CT(core, r->key, strlen(r->key), r->bit, r->add, -1);
}

static void remote_addr(fixture_t *f, const char *key, uint32_t bit, bool add)
{
    raddr_arg_t r = {key, bit, add};
    assert_int_equal(run_on_core(f, raddr_fn, &r), 0);
}

#define ALL_VO                                                                                     \
    {                                                                                              \
        UINT64_MAX, UINT64_MAX                                                                     \
    }
#define CONN_B 101
#define CONN_C 102

/* The mesh of the file-top comment, with `radius`; vo_b/vo_c/vo_d: valid origins. */
static void set_routes(fixture_t *f, uint32_t radius, uint64_t vo_b, uint64_t vo_c, uint64_t vo_d)
{
    core_rt_route_t r[] = {
        {.maskbit = 1, .id = "B", .conn_bit = 0, .neighbour = true, .link_bit = 0, .cost = 1, .vo = {vo_b, 0}},
        {.maskbit = 2, .id = "C", .conn_bit = 1, .neighbour = true, .link_bit = 1, .cost = 5, .vo = {vo_c, 0}},
        {.maskbit = 3, .id = "D", .conn_bit = 0, .neighbour = false, .cost = 2, .vo = {vo_d, 0}},
    };
    core_rt_routes_t t = {.routers = r, .n = 3, .radius = radius};
    assert_int_equal(run_on_core(f, routes_fn, &t), 0);
}

/* The mesh's links: both connections announced, each with an outgoing data link of
 * priority 4 and an incoming one. */
typedef struct mesh {
    uint64_t b_out; /* data link to B (priority 4) */
    uint64_t c_out; /* data link to C (priority 4) */
    uint64_t b_in;  /* data link from B */
    uint64_t c_in;  /* data link from C */
} mesh_t;

static void mesh_up(fixture_t *f, mesh_t *m)
{
    conn_arg_t b = {CONN_B, 0, true}, c = {CONN_C, 1, true};
    assert_int_equal(run_on_core(f, conn_fn, &b), 0);
    assert_int_equal(run_on_core(f, conn_fn, &c), 0);
    m->b_out = attach_on(f, 0, CONN_B, CORE_LINK_OUT, NULL, CORE_IR_LINK_DATA, 4);
    m->c_out = attach_on(f, 0, CONN_C, CORE_LINK_OUT, NULL, CORE_IR_LINK_DATA, 4);
    m->b_in = attach_on(f, 0, CONN_B, CORE_LINK_IN, NULL, CORE_IR_LINK_DATA, 4);
    m->c_in = attach_on(f, 0, CONN_C, CORE_LINK_IN, NULL, CORE_IR_LINK_DATA, 4);
    /* incoming data links are anonymous: credit at once */
    for (int i = 0; i < 2; i++)
        assert_true(expect(f, 0, CORE_W_LINK_CREDIT).u.credit.grant);
    set_routes(f, 2, ~0ull, ~0ull, ~0ull);
}

/* A client's targeted sender (conn 1) to `addr`. */
static uint64_t client_sender(fixture_t *f, const char *addr)
{
    return attach_on(f, 0, 1, CORE_LINK_IN, addr, CORE_IR_LINK_NONE, 0);
}

static uint64_t client_receiver(fixture_t *f, const char *addr)
{
    return attach_on(f, 0, 1, CORE_LINK_OUT, addr, CORE_IR_LINK_NONE, 0);
}

/* The next CORE_W_SEND: the link it goes on (by its handle), its x-opt-qd.to (freed, copied
 * into to[64] when not NULL). */
static bool last_to_router; /* the last expect_send()'s send.to_router */

static uint64_t expect_send(fixture_t *f, char *to)
{
    core_work_t w = expect(f, 0, CORE_W_SEND);
    last_to_router = w.u.send.to_router;
    if (to) {
        snprintf(to, 64, "%s", w.u.send.to_override ? w.u.send.to_override : "");
    }
    free(w.u.send.to_override);
    return (uint64_t)((int *)w.handle - f->handles);
}

static void expect_released(fixture_t *f, test_dlv_t *d)
{
    core_disposition_t r = expect_settle(f, 0, &d->dlv);
    assert_int_equal(r.outcome, CORE_OUTCOME_RELEASED);
    free_disp(&r);
}

/* ---- tests ---- */

/* closest: the local consumer when there is one, else the remote router of lowest cost (D,
 * cost 2, through B), whose copy carries the sender's address as x-opt-qd.to. */
static void test_closest(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    mesh_t     m;
    mesh_up(f, &m);
    uint64_t snd = client_sender(f, "cl.q");
    remote_addr(f, "M0cl.q", 2, true); /* C, cost 5 */
    remote_addr(f, "M0cl.q", 3, true); /* D, cost 2 */
    char to[64];
    for (int i = 0; i < 3; i++) {
        test_dlv_t *d = deliver_ra(f, 0, snd, NULL, true, NULL);
        assert_int_equal(expect_send(f, to), m.b_out);
        assert_string_equal(to, "cl.q");
        assert_true(last_to_router);
        free(d);
    }
    uint64_t    rcv = client_receiver(f, "cl.q");
    test_dlv_t *d = deliver_ra(f, 0, snd, NULL, true, NULL);
    assert_int_equal(expect_send(f, to), rcv);
    assert_string_equal(to, ""); /* a client's copy gets no override */
    assert_false(last_to_router);
    free(d);
    fx_free(f);
}

/* balanced: remote routers weighted by this address's unsettled copies on their connection
 * plus their cost (B: n + 1, C: n + 5); an outcome from B travels back to the sender and
 * lowers B's count. */
static void test_balanced(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    mesh_t     m;
    mesh_up(f, &m);
    uint64_t snd = client_sender(f, "bq");
    expect_none(f, 0, CORE_W_LINK_CREDIT);
    remote_addr(f, "M0bq", 1, true);
    remote_addr(f, "M0bq", 2, true);
    /* the first remote consumer gives the sender credit */
    core_work_t cr = expect(f, 0, CORE_W_LINK_CREDIT);
    assert_true(cr.u.credit.grant);
    test_dlv_t *d[7];
    uint64_t    want[6] = {m.b_out, m.b_out, m.b_out, m.b_out, m.b_out, m.c_out};
    for (int i = 0; i < 6; i++) {
        d[i] = deliver_ra(f, 0, snd, NULL, false, NULL);
        assert_int_equal(expect_send(f, NULL), want[i]);
    }
    /* B accepts its first copy: the sender hears it; B is at 4 + 1 against C's 1 + 5 */
    settle_copy(f, 0, m.b_out, &d[0]->dlv, CORE_OUTCOME_ACCEPTED);
    core_disposition_t r = expect_settle(f, 0, &d[0]->dlv);
    assert_int_equal(r.outcome, CORE_OUTCOME_ACCEPTED);
    d[6] = deliver_ra(f, 0, snd, NULL, false, NULL);
    assert_int_equal(expect_send(f, NULL), m.b_out);
    for (int i = 1; i < 7; i++) {
        settle_copy(f, 0, i == 5 ? m.c_out : m.b_out, &d[i]->dlv, CORE_OUTCOME_ACCEPTED);
        r = expect_settle(f, 0, &d[i]->dlv);
        assert_int_equal(r.outcome, CORE_OUTCOME_ACCEPTED);
    }
    for (int i = 0; i < 7; i++)
        free(d[i]);
    /* the last remote consumer gone: the sender is drained */
    remote_addr(f, "M0bq", 1, false);
    expect_none(f, 0, CORE_W_LINK_CREDIT);
    remote_addr(f, "M0bq", 2, false);
    cr = expect(f, 0, CORE_W_LINK_CREDIT);
    assert_false(cr.u.credit.grant);
    fx_free(f);
}

/* balanced: a router for which the message's origin is not a valid origin is no
 * candidate. */
static void test_balanced_valid_origin(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    mesh_t     m;
    mesh_up(f, &m);
    /* origin C (mask 2) is valid for C only, not for B */
    set_routes(f, 2, 1u, 1u | 4u, 1u);
    remote_addr(f, "M0vq", 1, true);
    remote_addr(f, "M0vq", 2, true);
    ra_t        from_c = {.ingress = "0/C", .trace = {"0/C"}};
    test_dlv_t *d = deliver_ra(f, 0, m.c_in, "vq", true, &from_c);
    assert_int_equal(expect_send(f, NULL), m.c_out);
    free(d);
    /* an ingress router nobody knows counts as this router (qdrouterd 1.19's balanced) */
    ra_t from_x = {.ingress = "0/X", .trace = {"0/X"}};
    d = deliver_ra(f, 0, m.c_in, "vq", true, &from_x);
    assert_int_equal(expect_send(f, NULL), m.b_out);
    free(d);
    fx_free(f);
}

/* multicast: every local consumer and one copy per next-hop connection (B and D share
 * B's); the connection of a router in the trace gets none, nor a router for which the
 * origin is not valid. */
static void test_multicast(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    mesh_t     m;
    mesh_up(f, &m);
    uint64_t rcv = client_receiver(f, "mc.x");
    uint64_t snd = client_sender(f, "mc.x");
    remote_addr(f, "M0mc.x", 1, true);
    remote_addr(f, "M0mc.x", 2, true);
    remote_addr(f, "M0mc.x", 3, true);

    test_dlv_t *d = deliver_ra(f, 0, snd, NULL, false, NULL);
    uint64_t    got[3];
    char        to[3][64];
    for (int i = 0; i < 3; i++)
        got[i] = expect_send(f, to[i]);
    expect_none(f, 0, CORE_W_SEND);
    assert_int_equal(got[0], rcv);
    assert_int_equal(got[1], m.b_out);
    assert_string_equal(to[1], "mc.x");
    assert_int_equal(got[2], m.c_out);
    assert_int_equal(atomic_load(&d->content.refs), 4);
    /* the outcomes aggregate: one accepted is enough */
    settle_copy(f, 0, rcv, &d->dlv, CORE_OUTCOME_RELEASED);
    settle_copy(f, 0, m.b_out, &d->dlv, CORE_OUTCOME_ACCEPTED);
    settle_copy(f, 0, m.c_out, &d->dlv, CORE_OUTCOME_RELEASED);
    core_disposition_t r = expect_settle(f, 0, &d->dlv);
    assert_int_equal(r.outcome, CORE_OUTCOME_ACCEPTED);
    free(d);

    /* from B (in its trace): not back to B */
    ra_t from_b = {.ingress = "0/B", .trace = {"0/B"}};
    d = deliver_ra(f, 0, m.b_in, "mc.x", true, &from_b);
    assert_int_equal(expect_send(f, NULL), rcv);
    assert_int_equal(expect_send(f, NULL), m.c_out);
    expect_none(f, 0, CORE_W_SEND);
    free(d);

    /* origin B is not a valid origin for C: a redundant path must not deliver twice */
    set_routes(f, 2, ~0ull, 1u, ~0ull);
    d = deliver_ra(f, 0, m.b_in, "mc.x", true, &from_b);
    assert_int_equal(expect_send(f, NULL), rcv);
    expect_none(f, 0, CORE_W_SEND);
    free(d);

    /* an ingress router nobody knows: local consumers only (as 1.19) */
    ra_t from_x = {.ingress = "0/X", .trace = {"0/X"}};
    d = deliver_ra(f, 0, m.c_in, "mc.x", true, &from_x);
    assert_int_equal(expect_send(f, NULL), rcv);
    expect_none(f, 0, CORE_W_SEND);
    free(d);
    fx_free(f);
}

/* A neighbour whose cheapest path goes through another router (C's own connection costly,
 * the path through B cheaper): the control plane gives C B's connection and C's own apart.
 * A copy for C goes on B's; a multicast from C (C in the trace) arriving on C's own
 * connection excludes that one, not B's. */
static void test_neighbour_through_next_hop(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    mesh_t     m;
    mesh_up(f, &m);
    core_rt_route_t r[] = {
        {.maskbit = 1, .id = "B", .conn_bit = 0, .neighbour = true, .link_bit = 0, .cost = 1,
         .vo = {~0ull, 0}},
        {.maskbit = 2, .id = "C", .conn_bit = 0, .neighbour = true, .link_bit = 1, .cost = 2,
         .vo = {~0ull, 0}},
    };
    core_rt_routes_t t = {.routers = r, .n = 2, .radius = 2};
    assert_int_equal(run_on_core(f, routes_fn, &t), 0);

    uint64_t snd = client_sender(f, "cl.c");
    remote_addr(f, "M0cl.c", 2, true);
    test_dlv_t *d = deliver_ra(f, 0, snd, NULL, true, NULL);
    assert_int_equal(expect_send(f, NULL), m.b_out);
    expect_none(f, 0, CORE_W_SEND);
    free(d);

    remote_addr(f, "M0mc.x", 1, true);
    ra_t from_c = {.ingress = "0/C", .trace = {"0/C"}};
    d = deliver_ra(f, 0, m.c_in, "mc.x", true, &from_c);
    assert_int_equal(expect_send(f, NULL), m.b_out);
    expect_none(f, 0, CORE_W_SEND);
    free(d);
    fx_free(f);
}

/* A multicast copy from C that comes in on C's own connection while C's tree reaches this
 * router through B (a qdrouterd neighbour passing its copy on) is not delivered: only the
 * copy through B is. */
static void test_multicast_off_tree(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    mesh_t     m;
    mesh_up(f, &m);
    core_rt_route_t r[] = {
        {.maskbit = 1, .id = "B", .conn_bit = 0, .neighbour = true, .link_bit = 0,
         .has_up = true, .up_bit = 0, .cost = 1, .vo = {~0ull, 0}},
        {.maskbit = 2, .id = "C", .conn_bit = 1, .neighbour = true, .link_bit = 1,
         .has_up = true, .up_bit = 0, .cost = 5, .vo = {~0ull, 0}},
    };
    core_rt_routes_t t = {.routers = r, .n = 2, .radius = 2};
    assert_int_equal(run_on_core(f, routes_fn, &t), 0);
    uint64_t rcv = client_receiver(f, "mc.x");

    ra_t        direct = {.ingress = "0/C", .trace = {"0/C"}};
    test_dlv_t *d = deliver_ra(f, 0, m.c_in, "mc.x", true, &direct);
    expect_none(f, 0, CORE_W_SEND);
    free(d);

    ra_t via_b = {.ingress = "0/C", .trace = {"0/C", "0/B"}};
    d = deliver_ra(f, 0, m.b_in, "mc.x", true, &via_b);
    assert_int_equal(expect_send(f, NULL), rcv);
    expect_none(f, 0, CORE_W_SEND);
    free(d);
    fx_free(f);
}

/* x-opt-qd.phase picks the phase of x-opt-qd.to: the waypoint's second leg (M1) lives on
 * router C, the first (M0) on B. */
static void test_phase_annotation(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    mesh_t     m;
    mesh_up(f, &m);
    remote_addr(f, "M0wp", 1, true);
    remote_addr(f, "M1wp", 2, true);
    ra_t        p1 = {.ingress = "0/B", .trace = {"0/B"}, .phase = 2};
    test_dlv_t *d = deliver_ra(f, 0, m.b_in, "wp", true, &p1);
    assert_int_equal(expect_send(f, NULL), m.c_out);
    free(d);
    ra_t p0 = {.ingress = "0/C", .trace = {"0/C"}};
    d = deliver_ra(f, 0, m.c_in, "wp", true, &p0);
    assert_int_equal(expect_send(f, NULL), m.b_out);
    free(d);
    fx_free(f);
}

/* A delivery whose trace is longer than the radius + 1 is released (a loop), even when a
 * consumer is here. */
static void test_distance_drop(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    mesh_t     m;
    mesh_up(f, &m);
    set_routes(f, 1, ~0ull, ~0ull, ~0ull);
    uint64_t    rcv = client_receiver(f, "far");
    ra_t        two = {.ingress = "0/C", .trace = {"0/C", "0/B"}};
    test_dlv_t *d = deliver_ra(f, 0, m.b_in, "far", false, &two);
    assert_int_equal(expect_send(f, NULL), rcv);
    settle_copy(f, 0, rcv, &d->dlv, CORE_OUTCOME_ACCEPTED);
    core_disposition_t r = expect_settle(f, 0, &d->dlv);
    assert_int_equal(r.outcome, CORE_OUTCOME_ACCEPTED);
    free(d);
    ra_t three = {.ingress = "0/D", .trace = {"0/D", "0/C", "0/B"}};
    d = deliver_ra(f, 0, m.b_in, "far", false, &three);
    expect_released(f, d);
    expect_none(f, 0, CORE_W_SEND);
    free(d);
    fx_free(f);
}

/* `_topo/0/<id>/...` goes to that router over the connection that reaches it; an unknown
 * router has no route. */
static void test_topo_unicast(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    mesh_t     m;
    mesh_up(f, &m);
    uint64_t    anon = attach_on(f, 0, 1, CORE_LINK_IN, NULL, CORE_IR_LINK_NONE, 0);
    test_dlv_t *d = deliver_ra(f, 0, anon, "_topo/0/D/svc", true, NULL);
    assert_int_equal(expect_send(f, NULL), m.b_out);
    free(d);
    d = deliver_ra(f, 0, anon, "amqp:/_topo/0/C/svc", true, NULL);
    assert_int_equal(expect_send(f, NULL), m.c_out);
    free(d);
    d = deliver_ra(f, 0, anon, "_topo/0/Z/svc", false, NULL);
    expect_released(f, d);
    free(d);
    fx_free(f);
}

/* The data link of the message's priority, else the next lower one there is. */
static void test_priority_links(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    mesh_t     m;
    mesh_up(f, &m);
    uint64_t b7 = attach_on(f, 0, CONN_B, CORE_LINK_OUT, NULL, CORE_IR_LINK_DATA, 7);
    uint64_t b2 = attach_on(f, 0, CONN_B, CORE_LINK_OUT, NULL, CORE_IR_LINK_DATA, 2);
    uint64_t anon = attach_on(f, 0, 1, CORE_LINK_IN, NULL, CORE_IR_LINK_NONE, 0);
    static const struct {
        uint8_t prio; /* header priority + 1 (0: none) */
        int     link; /* 0: b7, 1: m.b_out (4), 2: b2, -1 none */
    } cases[] = {{10, 0}, {8, 0}, {7, 1}, {0, 1}, {6, 1}, {5, 1}, {4, 2}, {3, 2}, {2, -1}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ra_t        p = {.priority = cases[i].prio};
        test_dlv_t *d = deliver_ra(f, 0, anon, "_topo/0/B/x", false, &p);
        if (cases[i].link < 0) {
            expect_released(f, d);
        } else {
            uint64_t want = cases[i].link == 0 ? b7 : cases[i].link == 1 ? m.b_out : b2;
            assert_int_equal(expect_send(f, NULL), want);
            settle_copy(f, 0, want, &d->dlv, CORE_OUTCOME_ACCEPTED);
            core_disposition_t r = expect_settle(f, 0, &d->dlv);
            assert_int_equal(r.outcome, CORE_OUTCOME_ACCEPTED);
        }
        free(d);
    }
    /* priority 1 goes nowhere until a priority 0 or 1 link exists (b2 gone too: 4 is the
     * lowest) */
    detach(f, 0, b2);
    ra_t        p3 = {.priority = 4};
    test_dlv_t *d = deliver_ra(f, 0, anon, "_topo/0/B/x", true, &p3);
    expect_none(f, 0, CORE_W_SEND);
    free(d);
    fx_free(f);
}

/* An address a remote router's MAU brings takes its hint as treatment, unless an address
 * configuration says otherwise. */
static int raddr_hint_fn(core_t *core, void *arg)
{
    raddr_arg_t *r = arg;
    return core_rt_remote_addr_CT(core, r->key, strlen(r->key), r->bit, r->add, 1);
}

static void test_mau_hint(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    mesh_t     m;
    mesh_up(f, &m);
    /* hint 1 (multicast-once): one copy to each of B and C */
    raddr_arg_t h = {"M0hinted", 1, true};
    assert_int_equal(run_on_core(f, raddr_hint_fn, &h), 0);
    h.bit = 2;
    assert_int_equal(run_on_core(f, raddr_hint_fn, &h), 0);
    uint64_t    anon = attach_on(f, 0, 1, CORE_LINK_IN, NULL, CORE_IR_LINK_NONE, 0);
    test_dlv_t *d = deliver_ra(f, 0, anon, "hinted", true, NULL);
    assert_int_equal(expect_send(f, NULL), m.b_out);
    assert_int_equal(expect_send(f, NULL), m.c_out);
    free(d);
    /* "cl" is configured closest: the hint does not count; B is the closer */
    h.key = "M0cl.h";
    assert_int_equal(run_on_core(f, raddr_hint_fn, &h), 0);
    h.bit = 1;
    assert_int_equal(run_on_core(f, raddr_hint_fn, &h), 0);
    d = deliver_ra(f, 0, anon, "cl.h", true, NULL);
    assert_int_equal(expect_send(f, NULL), m.b_out);
    expect_none(f, 0, CORE_W_SEND);
    free(d);
    assert_int_equal(core_rt_treatment_dist(2), CFG_DIST_CLOSEST);
    assert_int_equal(core_rt_treatment_dist(4), -1);
    assert_int_equal(core_rt_dist_treatment(CFG_DIST_MULTICAST), 1);
    assert_int_equal(core_rt_dist_treatment(CFG_DIST_BALANCED), 3);
    fx_free(f);
}

/* A router still in the table but no longer reached (killed: the protocol keeps it until
 * remoteLsMaxAge) keeps its addresses, but their senders are drained until it is reached
 * again; a sender to its `_topo/0/<id>/...` address (its R<id>) the same. */
static void test_router_unreachable_withdraws(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    mesh_t     m;
    mesh_up(f, &m);
    uint64_t snd = client_sender(f, "uq");
    remote_addr(f, "M0uq", 2, true);
    assert_true(expect(f, 0, CORE_W_LINK_CREDIT).u.credit.grant);
    (void)client_sender(f, "_topo/0/C/$management"); /* keyed RC */
    assert_true(expect(f, 0, CORE_W_LINK_CREDIT).u.credit.grant);
    core_rt_route_t r[] = {
        {.maskbit = 1, .id = "B", .conn_bit = 0, .neighbour = true, .link_bit = 0, .cost = 1, .vo = ALL_VO},
        {.maskbit = 2, .id = "C", .conn_bit = -1, .neighbour = false, .cost = 5, .vo = ALL_VO},
    };
    core_rt_routes_t t = {.routers = r, .n = 2, .radius = 1};
    assert_int_equal(run_on_core(f, routes_fn, &t), 0);
    assert_false(expect(f, 0, CORE_W_LINK_CREDIT).u.credit.grant);
    assert_false(expect(f, 0, CORE_W_LINK_CREDIT).u.credit.grant);
    expect_none(f, 0, CORE_W_LINK_CREDIT);
    /* reached again: both get credit back, the address was kept */
    r[1].conn_bit = 1;
    r[1].neighbour = true;
    r[1].link_bit = 1;
    assert_int_equal(run_on_core(f, routes_fn, &t), 0);
    assert_true(expect(f, 0, CORE_W_LINK_CREDIT).u.credit.grant);
    assert_true(expect(f, 0, CORE_W_LINK_CREDIT).u.credit.grant);
    test_dlv_t *d = deliver_ra(f, 0, snd, NULL, false, NULL);
    assert_int_equal(expect_send(f, NULL), m.c_out);
    settle_copy(f, 0, m.c_out, &d->dlv, CORE_OUTCOME_ACCEPTED);
    core_disposition_t res = expect_settle(f, 0, &d->dlv);
    assert_int_equal(res.outcome, CORE_OUTCOME_ACCEPTED);
    free(d);
    fx_free(f);
}

/* A router left out of a new table takes its addresses along: the sender loses credit. */
static void test_router_gone_withdraws(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    mesh_t     m;
    mesh_up(f, &m);
    uint64_t snd = client_sender(f, "wq");
    remote_addr(f, "M0wq", 2, true);
    core_work_t cr = expect(f, 0, CORE_W_LINK_CREDIT);
    assert_true(cr.u.credit.grant);
    core_rt_route_t r[] = {
        {.maskbit = 1, .id = "B", .conn_bit = 0, .neighbour = true, .link_bit = 0, .cost = 1, .vo = ALL_VO},
    };
    core_rt_routes_t t = {.routers = r, .n = 1, .radius = 1};
    assert_int_equal(run_on_core(f, routes_fn, &t), 0);
    cr = expect(f, 0, CORE_W_LINK_CREDIT);
    assert_false(cr.u.credit.grant);
    test_dlv_t *d = deliver_ra(f, 0, snd, NULL, false, NULL);
    expect_released(f, d);
    free(d);
    /* bad tables change nothing */
    core_rt_route_t  bad[] = {{.maskbit = 0, .id = "B", .conn_bit = 0}};
    core_rt_routes_t tb = {.routers = bad, .n = 1};
    assert_int_equal(run_on_core(f, routes_fn, &tb), -EINVAL);
    fx_free(f);
}

/* Random tables, remote destinations, data links coming and going, and deliveries of every
 * kind: each delivery is answered exactly once (its copies' outcomes settle it, a presettled
 * one is released), its content has one reference per copy, and no copy goes to a link that
 * is gone.  (Run under ASan, this also checks the tables' memory.) */
static uint32_t rnd_state = 12345;

static uint32_t rnd(uint32_t n)
{
    rnd_state = rnd_state * 1103515245u + 12345u;
    return (rnd_state >> 8) % n;
}

static int random_routes_fn(core_t *core, void *arg)
{
    (void)arg;
    static const char *const ids[] = {"", "R1", "R2", "R3", "R4", "R5", "R6"};
    core_rt_route_t          r[6];
    uint32_t                 n = 0;
    for (uint32_t b = 1; b <= 6; b++) {
        if (rnd(5) == 0)
            continue;
        int32_t conn = rnd(4) == 0 ? -1 : (int32_t)rnd(2);
        r[n++] = (core_rt_route_t){.maskbit = b,
                                   .id = ids[b],
                                   .conn_bit = conn,
                                   .neighbour = conn >= 0 && rnd(2),
                                   .link_bit = conn,
                                   .cost = 1 + rnd(4),
                                   .vo = {rnd(128) | 1, 0}};
    }
    core_rt_routes_t t = {.routers = r, .n = n, .radius = 1 + rnd(3)};
    return core_rt_set_routes_CT(core, &t);
}

static void test_random_mesh(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    mesh_t     m;
    mesh_up(f, &m);
    uint64_t anon = attach_on(f, 0, 1, CORE_LINK_IN, NULL, CORE_IR_LINK_NONE, 0);
    assert_true(expect(f, 0, CORE_W_LINK_CREDIT).u.credit.grant);
    static const char *const keys[] = {"M0r0", "M0mc.r1", "M0cl.r2"};
    static const char *const tos[] = {"r0", "mc.r1", "cl.r2", "_topo/0/R3/x", "_topo/0/R5/y"};
    uint64_t                 extra = 0; /* a data link of a random priority on conn C, or 0 */
    int                      copies = 0, fanouts = 0, unrouted = 0; /* what the run exercised */
    for (int it = 0; it < 600; it++) {
        switch (rnd(8)) {
        case 0:
            assert_int_equal(run_on_core(f, random_routes_fn, NULL), 0);
            break;
        case 1:
        case 2:
        case 3: {
            raddr_arg_t r = {keys[rnd(3)], 1 + rnd(6), rnd(4) != 0};
            run_on_core(f, raddr_fn, &r); /* -ENOENT for a delete of nothing is fine */
            break;
        }
        case 4:
            if (extra) {
                detach(f, 0, extra);
                extra = 0;
            } else {
                extra = attach_on(f, 0, CONN_C, CORE_LINK_OUT, NULL, CORE_IR_LINK_DATA,
                                  (uint8_t)rnd(10));
            }
            break;
        default: {
            bool pre = rnd(2);
            ra_t ra = {.ingress = rnd(3) ? NULL : "0/R2",
                       .priority = (uint8_t)(rnd(2) ? 0 : rnd(11))};
            for (uint32_t k = 0, n = rnd(3); k < n; k++)
                ra.trace[k] = k == 0 ? "0/R1" : k == 1 ? "0/R4" : "0/A";
            test_dlv_t *d = deliver_ra(f, 0, anon, tos[rnd(5)], pre, &ra);
            /* the core's answer comes in one batch: the copies, and a SETTLE (no route) or
             * a RELEASE (presettled) */
            bool answered = false;
            for (int tries = 0; tries < 500 && !answered; tries++) {
                drain(f, 0, 10);
                for (size_t i = 0; i < f->n_pending[0]; i++) {
                    uint8_t t = f->pending[0][i].type;
                    answered |= t == CORE_W_SEND || t == CORE_W_SETTLE || t == CORE_W_RELEASE;
                }
            }
            assert_true(answered);
            core_work_t sends[8];
            int         ns = 0;
            for (size_t i = 0; i < f->n_pending[0]; i++) {
                core_work_t *w = &f->pending[0][i];
                if (w->type == CORE_W_SEND) {
                    assert_true(ns < 8);
                    sends[ns++] = *w;
                    memmove(w, w + 1, (f->n_pending[0] - i - 1) * sizeof(*w));
                    f->n_pending[0]--;
                    i--;
                }
            }
            assert_int_equal(atomic_load(&d->content.refs), 1 + ns);
            copies += ns;
            fanouts += ns > 1;
            unrouted += ns == 0;
            for (int i = 0; i < ns; i++) {
                uint64_t l = (uint64_t)((int *)sends[i].handle - f->handles);
                assert_true(l == m.b_out || l == m.c_out || (extra && l == extra));
                free(sends[i].u.send.to_override);
                if (!pre)
                    settle_copy(f, 0, l, &d->dlv, CORE_OUTCOME_ACCEPTED);
            }
            if (pre) {
                core_work_t r = expect(f, 0, CORE_W_RELEASE);
                assert_ptr_equal(r.u.release, &d->dlv);
            } else {
                core_disposition_t r = expect_settle(f, 0, &d->dlv);
                assert_int_equal(r.outcome, ns ? CORE_OUTCOME_ACCEPTED : CORE_OUTCOME_RELEASED);
                free_disp(&r);
            }
            free(d);
            break;
        }
        }
        /* credit to targeted senders does not concern this test */
        f->n_pending[0] = 0;
    }
    assert_true(copies > 50 && fanouts > 0 && unrouted > 5);
    fx_free(f);
}

/* ---- annotations, byte for byte as qdrouterd 1.19 ---- */

static uint8_t *read_vec(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", VECTORS_DIR, name);
    FILE *fp = fopen(path, "rb");
    if (!fp)
        fail_msg("cannot open %s", path);
    uint8_t *buf = malloc(65536);
    *len = fread(buf, 1, 65536, fp);
    fclose(fp);
    return buf;
}

/* Flatten a composed prefix plus the body into out; returns its length. */
static size_t compose_all(const uint8_t *msg, size_t len, const codec_scan_t *s,
                          const codec_ra_out_t *ra, uint8_t *out)
{
    uint8_t     scratch[4096];
    codec_iov_t iov[16];
    int         n = codec_compose_prefix(msg, s, ra, scratch, sizeof(scratch), iov, 16);
    assert_true(n >= 0);
    size_t o = 0;
    for (int i = 0; i < n; i++) {
        memcpy(out + o, iov[i].base, iov[i].len);
        o += iov[i].len;
    }
    memcpy(out + o, msg + s->body_off, len - s->body_off);
    return o + len - s->body_off;
}

/* What qdrouterd 1.19 (router QDR.A) sent on an inter-router link, with the router
 * annotations taken off, then composed as a router that is the message's ingress writes
 * them (the link_out.c rule: its own node id as ingress, appended to the trace): the same
 * bytes.  And as a transit router B forwards it (ingress and trace carried, B appended):
 * qdrouterd's trailer with B's id added to the list. */
static void test_annotations_as_qdrouterd(void **state)
{
    (void)state;
    static const char *const vecs[] = {"qdr-RA.bin", "qdr-HELLO.bin", "qdr-MAU-abs.bin",
                                       "qdr-LSU.bin"};
    for (size_t v = 0; v < sizeof(vecs) / sizeof(vecs[0]); v++) {
        size_t       len;
        uint8_t     *vec = read_vec(vecs[v], &len);
        codec_scan_t s;
        const char  *why;
        assert_int_equal(codec_scan(vec, len, true, &s, &why), 0);
        assert_int_equal(s.ma_router_count, 2);
        assert_int_equal(s.ra.trace_count, 1);
        /* strip */
        uint8_t        bare[65536], again[65536];
        codec_ra_out_t none = {0};
        size_t         bare_len = compose_all(vec, len, &s, &none, bare);
        codec_scan_t   sb;
        assert_int_equal(codec_scan(bare, bare_len, true, &sb, &why), 0);
        assert_int_equal(sb.ma_router_count, 0);
        /* compose as the ingress router */
        codec_ra_out_t ra = {.write = true, .ingress = s.ra.ingress, .trace_append = s.ra.ingress};
        size_t         n = compose_all(bare, bare_len, &sb, &ra, again);
        assert_int_equal(n, len);
        assert_memory_equal(again, vec, len);
        /* transit: trace carried, one more entry */
        codec_ra_out_t tr = {.write = true,
                             .ingress = s.ra.ingress,
                             .trace = s.ra.trace,
                             .trace_count = s.ra.trace_count,
                             .trace_append = {(const uint8_t *)"0/B", 3}};
        n = compose_all(vec, len, &s, &tr, again);
        codec_scan_t st;
        assert_int_equal(codec_scan(again, n, true, &st, &why), 0);
        assert_int_equal(st.ra.trace_count, 2);
        codec_bytes_t t = st.ra.trace, id;
        assert_true(codec_trace_next(&t, &id));
        assert_memory_equal(id.ptr, s.ra.ingress.ptr, s.ra.ingress.len);
        assert_true(codec_trace_next(&t, &id));
        assert_int_equal(id.len, 3);
        assert_memory_equal(id.ptr, "0/B", 3);
        assert_false(codec_trace_next(&t, &id));
        free(vec);
    }
}

/* Data messages qdrouterd 1.19 (QDR.A) forwarded on an inter-router data link, as its client
 * sent them on a targeted link (priority 7, a user annotation) and on an anonymous one
 * (capture_data_vectors.py): the message as it arrived from the client (router annotations
 * off), composed the way a Junction ingress router composes a copy to another router - its
 * node id as ingress and in the trace, the targeted link's address as x-opt-qd.to - is the
 * same bytes; and the priority read from it picks the link qdrouterd sent it on. */
static void test_data_as_qdrouterd(void **state)
{
    (void)state;
    static const struct {
        const char *file; /* vector */
        const char *to;   /* the core's to_override, or NULL */
        uint8_t     prio; /* the data link qdrouterd used (qdr-data-links.txt) */
    } cases[] = {{"qdr-data-targeted.bin", "peer/addr", 7}, {"qdr-data-anonymous.bin", NULL, 4}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        size_t       len;
        uint8_t     *vec = read_vec(cases[c].file, &len);
        codec_scan_t s, sb;
        const char  *why;
        assert_int_equal(codec_scan(vec, len, true, &s, &why), 0);
        assert_int_equal(codec_header_priority(vec, &s), cases[c].prio);
        uint8_t        bare[65536], again[65536];
        codec_ra_out_t none = {0};
        size_t         bare_len = compose_all(vec, len, &s, &none, bare);
        assert_int_equal(codec_scan(bare, bare_len, true, &sb, &why), 0);
        assert_int_equal(sb.ma_router_count, 0);
        codec_bytes_t  node = {(const uint8_t *)"0/QDR.A", 7};
        codec_ra_out_t ra = {.write = true, .ingress = node, .trace_append = node};
        if (cases[c].to) {
            ra.to.ptr = (const uint8_t *)cases[c].to;
            ra.to.len = strlen(cases[c].to);
        }
        size_t n = compose_all(bare, bare_len, &sb, &ra, again);
        assert_int_equal(n, len);
        assert_memory_equal(again, vec, len);
        free(vec);
    }
}

/* The trailer of a data message from a targeted link of phase 1, streamed, sent to another
 * router: qdrouterd 1.19's compose_router_message_annotations writes phase, stream, to,
 * ingress, trace in that order with smallint and str8 encodings. */
static void test_annotations_to_phase_stream(void **state)
{
    (void)state;
    /* header (priority 7) + properties + body, no annotations */
    static const uint8_t msg[] = {0x00, 0x53, 0x70, 0xc0, 0x04, 0x02, 0x42, 0x50, 0x07, 0x00,
                                  0x53, 0x73, 0x45, 0x00, 0x53, 0x77, 0xa1, 0x02, 'h',  'i'};
    codec_scan_t         s;
    const char          *why;
    assert_int_equal(codec_scan(msg, sizeof(msg), true, &s, &why), 0);
    assert_int_equal(codec_header_priority(msg, &s), 7);
    codec_ra_out_t       ra = {.write = true,
                               .ingress = {(const uint8_t *)"0/A", 3},
                               .trace_append = {(const uint8_t *)"0/A", 3},
                               .to = {(const uint8_t *)"q", 1},
                               .phase = 1,
                               .stream = 1};
    uint8_t              out[512];
    size_t               n = compose_all(msg, sizeof(msg), &s, &ra, out);
    static const uint8_t want_ma[] = "\x00\x53\x72\xc1\x65\x0a"
                                     "\xa3\x0ex-opt-qd.phase\x54\x01"
                                     "\xa3\x0fx-opt-qd.stream\x54\x01"
                                     "\xa3\x0bx-opt-qd.to\xa1\x01q"
                                     "\xa3\x10x-opt-qd.ingress\xa1\x03"
                                     "0/A"
                                     "\xa3\x0ex-opt-qd.trace\xc0\x06\x01\xa1\x03"
                                     "0/A";
    assert_int_equal(n, sizeof(msg) + sizeof(want_ma) - 1);
    assert_memory_equal(out, msg, 9);
    assert_memory_equal(out + 9, want_ma, sizeof(want_ma) - 1);
    assert_memory_equal(out + 9 + sizeof(want_ma) - 1, msg + 9, sizeof(msg) - 9);
    /* no header: priority 4 */
    s.header.len = 0;
    assert_int_equal(codec_header_priority(msg, &s), CODEC_PRIORITY_DEFAULT);
}

int main(int argc, char **argv)
{
    if (argc > 1)
        VECTORS_DIR = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_closest),
        cmocka_unit_test(test_balanced),
        cmocka_unit_test(test_balanced_valid_origin),
        cmocka_unit_test(test_multicast),
        cmocka_unit_test(test_neighbour_through_next_hop),
        cmocka_unit_test(test_multicast_off_tree),
        cmocka_unit_test(test_phase_annotation),
        cmocka_unit_test(test_distance_drop),
        cmocka_unit_test(test_topo_unicast),
        cmocka_unit_test(test_priority_links),
        cmocka_unit_test(test_mau_hint),
        cmocka_unit_test(test_router_gone_withdraws),
        cmocka_unit_test(test_router_unreachable_withdraws),
        cmocka_unit_test(test_random_mesh),
        cmocka_unit_test(test_annotations_as_qdrouterd),
        cmocka_unit_test(test_data_as_qdrouterd),
        cmocka_unit_test(test_annotations_to_phase_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
