/* tests/unit/core/core_fixture.c: the fixture shared by the core's unit tests (see
 * core_fixture.h).  Runs on the test's thread only. */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
// clang-format on

#include "core_fixture.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

fixture_t *fx_new(const char *json)
{
    fixture_t *f = calloc(1, sizeof(*f));
    char       err[512];
    if (cfg_load_string(json, "test.json", &f->cfg, err, sizeof(err)) != 0)
        fail_msg("config: %s", err);
    for (int i = 0; i < N_WORKERS; i++) {
        base_mpsc_init(&f->q[i], NULL, NULL);
        f->qp[i] = &f->q[i];
    }
    f->reg = stats_registry_new();
    assert_int_equal(core_stats_families_new(f->reg, &f->stats), 0);
    f->core = core_new(f->cfg, &f->stats, N_WORKERS, f->qp);
    assert_int_equal(core_start(f->core), 0);
    return f;
}

void fx_free(fixture_t *f)
{
    core_stop(f->core);
    core_free(f->core);
    stats_registry_free(f->reg);
    for (int w = 0; w < N_WORKERS; w++) {
        drain(f, w, 0); /* what the test left: a worker frees its edge work's key */
        for (size_t i = 0; i < f->n_pending[w]; i++)
            if (f->pending[w][i].type == CORE_W_EDGE)
                free(f->pending[w][i].u.edge.key);
        base_mpsc_fini(&f->q[w]);
    }
    cfg_free(f->cfg);
    free(f);
}

void post(fixture_t *f, core_action_t *a)
{
    base_mpsc_batch_t b = {0};
    *core_batch_add(&b) = *a;
    core_post(f->core, &b);
}

typedef struct {
    fixture_t *f; /* the fixture */
    int        w; /* the worker whose queue is drained */
} drain_ctx_t;

static void drain_one(void *ctx, void *item)
{
    drain_ctx_t *d = ctx;
    assert_true(d->f->n_pending[d->w] < 4096);
    d->f->pending[d->w][d->f->n_pending[d->w]++] = *(core_work_t *)item;
}

void drain(fixture_t *f, int w, int timeout_ms)
{
    base_mpsc_wait(&f->q[w], timeout_ms);
    drain_ctx_t d = {f, w};
    base_mpsc_drain(&f->q[w], drain_one, &d);
}

core_work_t expect_h(fixture_t *f, int w, core_work_type_t type, void *handle)
{
    for (int tries = 0; tries < 100; tries++) {
        for (size_t i = 0; i < f->n_pending[w]; i++) {
            core_work_t *x = &f->pending[w][i];
            if (x->type == type && (!handle || x->handle == handle)) {
                core_work_t got = *x;
                memmove(x, x + 1, (f->n_pending[w] - i - 1) * sizeof(core_work_t));
                f->n_pending[w]--;
                return got;
            }
        }
        drain(f, w, 10);
    }
    fail_msg("worker %d: no work of type %d", w, (int)type);
    core_work_t none = {0};
    return none;
}

core_work_t expect(fixture_t *f, int w, core_work_type_t type)
{
    return expect_h(f, w, type, NULL);
}

void expect_none_h(fixture_t *f, int w, core_work_type_t type, void *handle)
{
    drain(f, w, 50);
    for (size_t i = 0; i < f->n_pending[w]; i++)
        if (f->pending[w][i].type == type && (!handle || f->pending[w][i].handle == handle))
            fail_msg("worker %d: unexpected work of type %d", w, (int)type);
}

void expect_none(fixture_t *f, int w, core_work_type_t type)
{
    expect_none_h(f, w, type, NULL);
}

bool answer_lookups(fixture_t *f, int timeout_ms)
{
    bool any = false;
    for (int w = 0; w < N_WORKERS; w++) {
        drain(f, w, timeout_ms);
        for (size_t i = 0; i < f->n_pending[w];) {
            core_work_t *x = &f->pending[w][i];
            if (x->type != CORE_W_EDGE || x->u.edge.op != CORE_EDGE_LOOKUP_ASK) {
                i++;
                continue;
            }
            core_action_t a = {.type = CORE_A_EDGE, .worker = (uint8_t)w};
            a.u.edge.conn_id = x->u.edge.conn_id;
            a.u.edge.event = CORE_EDGE_LOOKUP_REPLY;
            a.u.edge.req = x->u.edge.req;
            a.u.edge.verdict = CORE_EDGE_VERDICT_LOCAL;
            free(x->u.edge.key);
            memmove(x, x + 1, (f->n_pending[w] - i - 1) * sizeof(core_work_t));
            f->n_pending[w]--;
            post(f, &a);
            any = true;
        }
    }
    return any;
}

/* The core's answer to the attach of link id on worker w; an edge's lookup of it (an edge
 * with an active connection asks before it answers) is answered "not a link route". */
static core_work_t attached(fixture_t *f, int w, uint64_t id)
{
    for (int tries = 0; tries < 100; tries++) {
        for (size_t i = 0; i < f->n_pending[w]; i++) {
            core_work_t *x = &f->pending[w][i];
            if (x->type == CORE_W_LINK_ATTACHED && x->handle == &f->handles[id]) {
                core_work_t got = *x;
                memmove(x, x + 1, (f->n_pending[w] - i - 1) * sizeof(core_work_t));
                f->n_pending[w]--;
                return got;
            }
        }
        answer_lookups(f, 0);
        drain(f, w, 10);
    }
    fail_msg("worker %d: no answer to the attach of link %llu", w, (unsigned long long)id);
    core_work_t none = {0};
    return none;
}

static uint64_t attach_link(fixture_t *f, int w, uint64_t conn, core_link_dir_t dir,
                            const char *addr, bool dynamic, uint8_t ir_link, uint8_t prio,
                            core_edge_link_t edge)
{
    uint64_t      id = ++f->next_link;
    core_action_t a = {.type = CORE_A_LINK_ATTACH, .worker = (uint8_t)w, .link_id = id};
    a.u.attach.conn_id = conn;
    a.u.attach.ir_link = ir_link;
    a.u.attach.ir_priority = prio;
    a.u.attach.handle = &f->handles[id];
    a.u.attach.address = addr ? strdup(addr) : NULL;
    a.u.attach.capacity = 250;
    a.u.attach.dir = (uint8_t)dir;
    a.u.attach.dynamic = dynamic;
    a.u.attach.edge = (uint8_t)edge;
    post(f, &a);
    core_work_t r = attached(f, w, id);
    assert_ptr_equal(r.handle, &f->handles[id]);
    assert_null(r.u.attached.cond_name);
    free(r.u.attached.address);
    free(r.u.attached.cond_desc);
    return id;
}

uint64_t attach(fixture_t *f, int w, core_link_dir_t dir, const char *addr, bool dynamic)
{
    return attach_link(f, w, 1, dir, addr, dynamic, 0, 0, CORE_EDGE_LINK_NONE);
}

uint64_t attach_on(fixture_t *f, int w, uint64_t conn, core_link_dir_t dir, const char *addr,
                   uint8_t ir_link, uint8_t prio)
{
    return attach_link(f, w, conn, dir, addr, false, ir_link, prio, CORE_EDGE_LINK_NONE);
}

uint64_t attach_edge(fixture_t *f, int w, uint64_t conn, core_link_dir_t dir, const char *addr,
                     core_edge_link_t kind)
{
    return attach_link(f, w, conn, dir, addr, false, 0, 0, kind);
}

void detach(fixture_t *f, int w, uint64_t id)
{
    core_action_t a = {.type = CORE_A_LINK_DETACH, .worker = (uint8_t)w, .link_id = id};
    post(f, &a);
    core_work_t r = expect(f, w, CORE_W_LINK_DETACHED);
    assert_ptr_equal(r.handle, &f->handles[id]);
}

test_dlv_t *dlv_new(uint64_t link, const char *to, bool presettled)
{
    test_dlv_t *t = calloc(1, sizeof(*t));
    atomic_init(&t->content.refs, 1);
    t->dlv.content = &t->content;
    t->dlv.link_id = link;
    t->dlv.presettled = presettled;
    if (to) {
        t->dlv.to = to;
        t->dlv.to_len = (uint32_t)strlen(to);
    }
    return t;
}

void dlv_post(fixture_t *f, int w, test_dlv_t *t)
{
    core_action_t a = {.type = CORE_A_DELIVER, .worker = (uint8_t)w, .link_id = t->dlv.link_id};
    a.u.dlv = &t->dlv;
    post(f, &a);
}

test_dlv_t *deliver(fixture_t *f, int w, uint64_t link, const char *to, bool presettled)
{
    test_dlv_t *t = dlv_new(link, to, presettled);
    dlv_post(f, w, t);
    return t;
}

void settle_copy(fixture_t *f, int w, uint64_t out_link, core_delivery_t *dlv,
                 core_outcome_t outcome)
{
    core_action_t a = {.type = CORE_A_DISPOSITION, .worker = (uint8_t)w, .link_id = out_link};
    a.u.disposition.dlv = dlv;
    a.u.disposition.disp.outcome = (uint8_t)outcome;
    if (outcome == CORE_OUTCOME_REJECTED) {
        a.u.disposition.disp.cond_name = strdup("app:bad");
        a.u.disposition.disp.cond_desc = strdup("no thanks");
    }
    post(f, &a);
}

core_disposition_t expect_settle(fixture_t *f, int w, core_delivery_t *dlv)
{
    core_work_t r = expect(f, w, CORE_W_SETTLE);
    assert_ptr_equal(r.u.settle.dlv, dlv);
    return r.u.settle.disp;
}

void free_disp(core_disposition_t *d)
{
    free(d->cond_name);
    free(d->cond_desc);
}
