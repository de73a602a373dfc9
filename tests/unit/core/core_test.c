/* tests/unit/core/core_test.c: the core thread's routing decisions, driven through its real
 * queues.  The test plays the workers (core_fixture.h): it posts core_action_t batches and
 * reads the core_work_t batches the core hands back to each "worker" queue (plain MPSC queues
 * with no wake-up, read with base_mpsc_wait()).  The core runs on its own thread, as in the
 * router. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "config/config.h"
#include "core/base/mpsc.h"
#include "core/core.h"
#include "core_fixture.h"

#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const char *CONFIG =
    "[[\"router\", {\"id\": \"T1\", \"workerThreads\": 2}],"
    " [\"address\", {\"prefix\": \"mc\", \"distribution\": \"multicast\"}],"
    " [\"address\", {\"prefix\": \"cl\", \"distribution\": \"closest\"}],"
    " [\"address\", {\"pattern\": \"a.*.c\", \"distribution\": \"multicast\"}],"
    " [\"address\", {\"prefix\": \"gone\", \"distribution\": \"unavailable\"}]]";

/* ---- credit ---- */

static void test_credit_follows_consumers(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    uint64_t snd = attach(f, 0, CORE_LINK_IN, "q", false);
    expect_none(f, 0, CORE_W_LINK_CREDIT); /* no consumer: no credit */
    uint64_t rcv = attach(f, 1, CORE_LINK_OUT, "q", false);
    core_work_t c = expect(f, 0, CORE_W_LINK_CREDIT);
    assert_ptr_equal(c.handle, &f->handles[snd]);
    assert_true(c.u.credit.grant);
    uint64_t rcv2 = attach(f, 1, CORE_LINK_OUT, "q", false);
    expect_none(f, 0, CORE_W_LINK_CREDIT); /* already granted */
    detach(f, 1, rcv);
    expect_none(f, 0, CORE_W_LINK_CREDIT); /* a consumer remains */
    detach(f, 1, rcv2);
    c = expect(f, 0, CORE_W_LINK_CREDIT);
    assert_false(c.u.credit.grant); /* drained with the last consumer */
    uint64_t snd2 = attach(f, 0, CORE_LINK_IN, "q", false);
    attach(f, 1, CORE_LINK_OUT, "q", false);
    /* both senders get credit back */
    core_work_t c1 = expect(f, 0, CORE_W_LINK_CREDIT);
    core_work_t c2 = expect(f, 0, CORE_W_LINK_CREDIT);
    assert_true(c1.u.credit.grant && c2.u.credit.grant);
    assert_true((c1.handle == &f->handles[snd] && c2.handle == &f->handles[snd2]) ||
                (c2.handle == &f->handles[snd] && c1.handle == &f->handles[snd2]));
    fx_free(f);
}

static void test_anonymous_sender_gets_credit_at_once(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    uint64_t anon = attach(f, 0, CORE_LINK_IN, NULL, false);
    core_work_t c = expect(f, 0, CORE_W_LINK_CREDIT);
    assert_ptr_equal(c.handle, &f->handles[anon]);
    assert_true(c.u.credit.grant);
    fx_free(f);
}

/* ---- distribution ---- */

static void test_balanced_picks_fewest_unsettled(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    uint64_t a = attach(f, 1, CORE_LINK_OUT, "bal", false);
    uint64_t b = attach(f, 1, CORE_LINK_OUT, "bal", false);
    uint64_t snd = attach(f, 0, CORE_LINK_IN, "bal", false);
    expect(f, 0, CORE_W_LINK_CREDIT);
    test_dlv_t *d[4];
    int on_a = 0, on_b = 0;
    core_work_t sends[4];
    for (int i = 0; i < 4; i++) {
        d[i] = deliver(f, 0, snd, NULL, false);
        sends[i] = expect(f, 1, CORE_W_SEND);
        assert_ptr_equal(sends[i].u.send.dlv, &d[i]->dlv);
        assert_ptr_equal(sends[i].u.send.content, &d[i]->content);
        assert_false(sends[i].u.send.presettled);
        assert_int_equal(atomic_load(&d[i]->content.refs), 2); /* one per copy */
        if (sends[i].handle == &f->handles[a])
            on_a++;
        else
            on_b++;
    }
    assert_int_equal(on_a, 2);
    assert_int_equal(on_b, 2);
    /* settle both copies on `a`: the next two deliveries both go to `a` (0 vs 2 unsettled) */
    for (int i = 0; i < 4; i++) {
        if (sends[i].handle == &f->handles[a]) {
            settle_copy(f, 1, a, &d[i]->dlv, CORE_OUTCOME_ACCEPTED);
            core_disposition_t r = expect_settle(f, 0, &d[i]->dlv);
            assert_int_equal(r.outcome, CORE_OUTCOME_ACCEPTED);
        }
    }
    test_dlv_t *e1 = deliver(f, 0, snd, NULL, false);
    assert_ptr_equal(expect(f, 1, CORE_W_SEND).handle, &f->handles[a]);
    test_dlv_t *e2 = deliver(f, 0, snd, NULL, false);
    assert_ptr_equal(expect(f, 1, CORE_W_SEND).handle, &f->handles[a]);
    (void)b;
    for (int i = 0; i < 4; i++)
        free(d[i]);
    free(e1);
    free(e2);
    fx_free(f);
}

static void test_closest_rotates(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    uint64_t a = attach(f, 1, CORE_LINK_OUT, "cl.x", false);
    uint64_t b = attach(f, 1, CORE_LINK_OUT, "cl.x", false);
    uint64_t snd = attach(f, 0, CORE_LINK_IN, "cl.x", false);
    int on_a = 0, on_b = 0;
    test_dlv_t *d[6];
    for (int i = 0; i < 6; i++) {
        d[i] = deliver(f, 0, snd, NULL, true);
        core_work_t s = expect(f, 1, CORE_W_SEND);
        assert_true(s.u.send.presettled);
        assert_null(s.u.send.dlv); /* presettled: the core keeps no pointer */
        if (s.handle == &f->handles[a])
            on_a++;
        else if (s.handle == &f->handles[b])
            on_b++;
        /* presettled: the owner gets it back at once */
        core_work_t r = expect(f, 0, CORE_W_RELEASE);
        assert_ptr_equal(r.u.release, &d[i]->dlv);
    }
    assert_int_equal(on_a, 3);
    assert_int_equal(on_b, 3);
    for (int i = 0; i < 6; i++)
        free(d[i]);
    fx_free(f);
}

static void mcast_case(core_outcome_t o1, core_outcome_t o2, core_outcome_t o3,
                       core_outcome_t want)
{
    fixture_t *f = fx_new(CONFIG);
    uint64_t r[3];
    for (int i = 0; i < 3; i++)
        r[i] = attach(f, 1, CORE_LINK_OUT, "mc/news", false);
    uint64_t snd = attach(f, 0, CORE_LINK_IN, "mc/news", false);
    test_dlv_t *d = deliver(f, 0, snd, NULL, false);
    for (int i = 0; i < 3; i++)
        expect(f, 1, CORE_W_SEND);
    assert_int_equal(atomic_load(&d->content.refs), 4);
    core_outcome_t outs[3] = {o1, o2, o3};
    for (int i = 0; i < 3; i++) {
        settle_copy(f, 1, r[i], &d->dlv, outs[i]);
        if (i < 2)
            expect_none(f, 0, CORE_W_SETTLE); /* waits for every copy */
    }
    core_disposition_t res = expect_settle(f, 0, &d->dlv);
    assert_int_equal(res.outcome, want);
    if (want == CORE_OUTCOME_REJECTED)
        assert_string_equal(res.cond_name, "app:bad");
    free_disp(&res);
    free(d);
    fx_free(f);
}

static void test_multicast_outcomes(void **state)
{
    (void)state;
    mcast_case(CORE_OUTCOME_ACCEPTED, CORE_OUTCOME_ACCEPTED, CORE_OUTCOME_ACCEPTED,
               CORE_OUTCOME_ACCEPTED);
    mcast_case(CORE_OUTCOME_ACCEPTED, CORE_OUTCOME_REJECTED, CORE_OUTCOME_ACCEPTED,
               CORE_OUTCOME_REJECTED);
    mcast_case(CORE_OUTCOME_RELEASED, CORE_OUTCOME_ACCEPTED, CORE_OUTCOME_MODIFIED,
               CORE_OUTCOME_ACCEPTED);
    mcast_case(CORE_OUTCOME_RELEASED, CORE_OUTCOME_MODIFIED, CORE_OUTCOME_RELEASED,
               CORE_OUTCOME_MODIFIED);
    mcast_case(CORE_OUTCOME_RELEASED, CORE_OUTCOME_RELEASED, CORE_OUTCOME_RELEASED,
               CORE_OUTCOME_RELEASED);
}

static void test_pattern_and_default_distribution(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    /* a.*.c is multicast: two consumers both get a copy */
    attach(f, 1, CORE_LINK_OUT, "a.b.c", false);
    attach(f, 1, CORE_LINK_OUT, "a.b.c", false);
    uint64_t snd = attach(f, 0, CORE_LINK_IN, "a.b.c", false);
    test_dlv_t *d = deliver(f, 0, snd, NULL, true);
    expect(f, 1, CORE_W_SEND);
    expect(f, 1, CORE_W_SEND);
    free(d);
    fx_free(f);

    f = fx_new("[[\"router\", {\"id\": \"T2\", \"defaultDistribution\": \"multicast\"}]]");
    attach(f, 1, CORE_LINK_OUT, "anything", false);
    attach(f, 1, CORE_LINK_OUT, "anything", false);
    snd = attach(f, 0, CORE_LINK_IN, "anything", false);
    d = deliver(f, 0, snd, NULL, true);
    expect(f, 1, CORE_W_SEND);
    expect(f, 1, CORE_W_SEND);
    free(d);
    fx_free(f);
}

/* ---- no route, unavailable, anonymous ---- */

static void test_no_consumer(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    uint64_t anon = attach(f, 0, CORE_LINK_IN, NULL, false);
    test_dlv_t *d = deliver(f, 0, anon, "nobody", false);
    core_disposition_t r = expect_settle(f, 0, &d->dlv);
    assert_int_equal(r.outcome, CORE_OUTCOME_RELEASED);
    test_dlv_t *p = deliver(f, 0, anon, "nobody", true);
    assert_ptr_equal(expect(f, 0, CORE_W_RELEASE).u.release, &p->dlv);
    test_dlv_t *n = deliver(f, 0, anon, NULL, false);
    r = expect_settle(f, 0, &n->dlv);
    assert_int_equal(r.outcome, CORE_OUTCOME_REJECTED);
    assert_string_equal(r.cond_name, "amqp:precondition-failed");
    free_disp(&r);
    free(d);
    free(p);
    free(n);
    fx_free(f);
}

static void test_unavailable(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    uint64_t id = ++f->next_link;
    core_action_t a = {.type = CORE_A_LINK_ATTACH, .worker = 1, .link_id = id};
    a.u.attach.handle = &f->handles[id];
    a.u.attach.address = strdup("gone/x");
    a.u.attach.dir = CORE_LINK_OUT;
    post(f, &a);
    core_work_t r = expect(f, 1, CORE_W_LINK_ATTACHED);
    assert_non_null(r.u.attached.cond_name);
    assert_string_equal(r.u.attached.cond_name, "amqp:not-found");
    free(r.u.attached.cond_desc);
    detach(f, 1, id);

    uint64_t anon = attach(f, 0, CORE_LINK_IN, NULL, false);
    test_dlv_t *d = deliver(f, 0, anon, "amqp:/gone/y", false);
    core_disposition_t res = expect_settle(f, 0, &d->dlv);
    assert_int_equal(res.outcome, CORE_OUTCOME_REJECTED);
    assert_string_equal(res.cond_name, "amqp:not-found");
    free_disp(&res);
    free(d);
    fx_free(f);
}

static void test_anonymous_routes_by_to(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    uint64_t rcv = attach(f, 1, CORE_LINK_OUT, "q2", false);
    uint64_t anon = attach(f, 0, CORE_LINK_IN, NULL, false);
    /* amqp:/ and amqp://host/ forms reach the same address */
    const char *forms[] = {"q2", "amqp:/q2", "amqp://somehost/q2", "/q2"};
    for (int i = 0; i < 4; i++) {
        test_dlv_t *d = deliver(f, 0, anon, forms[i], false);
        core_work_t s = expect(f, 1, CORE_W_SEND);
        assert_ptr_equal(s.handle, &f->handles[rcv]);
        settle_copy(f, 1, rcv, &d->dlv, CORE_OUTCOME_ACCEPTED);
        core_disposition_t r = expect_settle(f, 0, &d->dlv);
        assert_int_equal(r.outcome, CORE_OUTCOME_ACCEPTED);
        free(d);
    }
    fx_free(f);
}

static void test_dynamic_address(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    uint64_t id = ++f->next_link;
    core_action_t a = {.type = CORE_A_LINK_ATTACH, .worker = 1, .link_id = id};
    a.u.attach.handle = &f->handles[id];
    a.u.attach.dir = CORE_LINK_OUT;
    a.u.attach.dynamic = true;
    post(f, &a);
    core_work_t r = expect(f, 1, CORE_W_LINK_ATTACHED);
    assert_null(r.u.attached.cond_name);
    assert_non_null(r.u.attached.address);
    assert_int_equal(strncmp(r.u.attached.address, "amqp:/_topo/0/T1/temp.", 22), 0);
    char addr[256];
    snprintf(addr, sizeof(addr), "%s", r.u.attached.address);
    free(r.u.attached.address);

    uint64_t anon = attach(f, 0, CORE_LINK_IN, NULL, false);
    test_dlv_t *d = deliver(f, 0, anon, addr, false);
    core_work_t s = expect(f, 1, CORE_W_SEND);
    assert_ptr_equal(s.handle, &f->handles[id]);
    /* a second dynamic address differs */
    uint64_t id2 = ++f->next_link;
    a.link_id = id2;
    a.u.attach.handle = &f->handles[id2];
    post(f, &a);
    r = expect(f, 1, CORE_W_LINK_ATTACHED);
    assert_string_not_equal(r.u.attached.address, addr);
    free(r.u.attached.address);
    settle_copy(f, 1, id, &d->dlv, CORE_OUTCOME_ACCEPTED);
    expect_settle(f, 0, &d->dlv);
    free(d);
    fx_free(f);
}

static void test_consumer_detach_reports_then_forgets(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    uint64_t rcv = attach(f, 1, CORE_LINK_OUT, "q3", false);
    uint64_t snd = attach(f, 0, CORE_LINK_IN, "q3", false);
    assert_true(expect(f, 0, CORE_W_LINK_CREDIT).u.credit.grant);
    test_dlv_t *d = deliver(f, 0, snd, NULL, false);
    expect(f, 1, CORE_W_SEND);
    /* the worker reports the unsent copy released, then detaches */
    settle_copy(f, 1, rcv, &d->dlv, CORE_OUTCOME_RELEASED);
    detach(f, 1, rcv);
    core_disposition_t r = expect_settle(f, 0, &d->dlv);
    assert_int_equal(r.outcome, CORE_OUTCOME_RELEASED);
    core_work_t c = expect(f, 0, CORE_W_LINK_CREDIT);
    assert_false(c.u.credit.grant);
    free(d);
    fx_free(f);
}

static uint64_t stat(fixture_t *f, const char *name)
{
    stats_handle_t h;
    stats_kind_t kind;
    stats_value_t v;
    if (stats_lookup(f->reg, name, &h, &kind) != 0)
        fail_msg("no stat %s", name);
    assert_int_equal(stats_value_get(f->reg, h, &v), 0);
    return v.value;
}

static void test_builtin_stats_count(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    uint64_t rcv = attach(f, 1, CORE_LINK_OUT, "mc.s", false);
    attach(f, 1, CORE_LINK_OUT, "mc.s", false);
    uint64_t snd = attach(f, 0, CORE_LINK_IN, "mc.s", false);
    test_dlv_t *d = deliver(f, 0, snd, NULL, false);
    expect(f, 1, CORE_W_SEND);
    expect(f, 1, CORE_W_SEND);
    settle_copy(f, 1, rcv, &d->dlv, CORE_OUTCOME_ACCEPTED);
    settle_copy(f, 1, rcv + 1, &d->dlv, CORE_OUTCOME_ACCEPTED);
    expect_settle(f, 0, &d->dlv);
    assert_int_equal(stat(f, "address.M0mc.s.deliveriesIngress"), 1);
    assert_int_equal(stat(f, "address.M0mc.s.deliveriesEgress"), 2);
    assert_int_equal(stat(f, "address.M0mc.s.subscriberCount"), 2);
    assert_int_equal(stat(f, "router.deliveriesIngress"), 1);
    assert_int_equal(stat(f, "router.deliveriesEgress"), 2);
    assert_int_equal(stat(f, "router.acceptedDeliveries"), 1);
    assert_int_equal(stat(f, "router.linkCount"), 3);
    assert_int_equal(stat(f, "router.addrCount"), 1);
    char name[64];
    snprintf(name, sizeof(name), "link.%llu.acceptedCount", (unsigned long long)rcv);
    assert_int_equal(stat(f, name), 1);
    snprintf(name, sizeof(name), "link.%llu.deliveryCount", (unsigned long long)snd);
    assert_int_equal(stat(f, name), 1);
    /* a detached link's counts stay in the totals */
    detach(f, 1, rcv);
    assert_int_equal(stat(f, "router.linkCount"), 2);
    assert_int_equal(stat(f, "router.deliveriesEgress"), 2);
    free(d);
    fx_free(f);
}

static void test_addr_normalize(void **state)
{
    (void)state;
    size_t n;
    const char *p = core_addr_normalize("amqp://h:5672/x/y", 17, &n);
    assert_int_equal(n, 3);
    assert_memory_equal(p, "x/y", 3);
    p = core_addr_normalize("amqp:/x", 7, &n);
    assert_int_equal(n, 1);
    assert_memory_equal(p, "x", 1);
    p = core_addr_normalize("//x", 3, &n);
    assert_int_equal(n, 1);
    p = core_addr_normalize("plain", 5, &n);
    assert_int_equal(n, 5);
}

/* core_call() runs the function on the core thread, after what was queued before it. */
typedef struct call_probe {
    pthread_mutex_t lock;
    pthread_cond_t  cond;
    int             calls;
    pthread_t       thread;
} call_probe_t;

static void probe_fn(core_t *core, void *arg)
{
    call_probe_t *p = arg;
    (void)core;
    pthread_mutex_lock(&p->lock);
    p->calls++;
    p->thread = pthread_self();
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->lock);
}

static void test_core_call(void **state)
{
    (void)state;
    fixture_t *f = fx_new(CONFIG);
    call_probe_t p = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
    uint64_t a = attach(f, 0, CORE_LINK_OUT, "q1", false);
    assert_int_equal(core_call(f->core, probe_fn, &p), 0);
    pthread_mutex_lock(&p.lock);
    while (p.calls == 0)
        pthread_cond_wait(&p.cond, &p.lock);
    pthread_mutex_unlock(&p.lock);
    assert_int_equal(p.calls, 1);
    assert_false(pthread_equal(p.thread, pthread_self()));
    detach(f, 0, a);
    fx_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_credit_follows_consumers),
        cmocka_unit_test(test_anonymous_sender_gets_credit_at_once),
        cmocka_unit_test(test_balanced_picks_fewest_unsettled),
        cmocka_unit_test(test_closest_rotates),
        cmocka_unit_test(test_multicast_outcomes),
        cmocka_unit_test(test_pattern_and_default_distribution),
        cmocka_unit_test(test_no_consumer),
        cmocka_unit_test(test_unavailable),
        cmocka_unit_test(test_anonymous_routes_by_to),
        cmocka_unit_test(test_dynamic_address),
        cmocka_unit_test(test_consumer_detach_reports_then_forgets),
        cmocka_unit_test(test_builtin_stats_count),
        cmocka_unit_test(test_addr_normalize),
        cmocka_unit_test(test_core_call),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
