/* tests/unit/core/core_fixture.h: the fixture shared by the core's unit tests (core_test.c,
 * interior_test.c, edge_test.c).  The test plays the workers against a real core thread: it posts
 * core_action_t batches and reads the core_work_t batches the core hands back to each
 * "worker" queue (plain MPSC queues with no wake-up, read with base_mpsc_wait()).
 * Every function runs on the test's thread and fails the running cmocka test on a surprise. */
#ifndef JUNCTION_TESTS_CORE_FIXTURE_H
#define JUNCTION_TESTS_CORE_FIXTURE_H

#include "config/config.h"
#include "core/base/mpsc.h"
#include "core/core.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define N_WORKERS 2

typedef struct fixture {
    cfg_t            *cfg;           /* the configuration the core runs with */
    stats_registry_t *reg;           /* the registry of the core's counters */
    core_stats_t      stats;         /* the core's counters */
    core_t           *core;          /* the core, running on its own thread */
    base_mpsc_t       q[N_WORKERS];  /* each "worker"'s queue */
    base_mpsc_t      *qp[N_WORKERS]; /* pointers to q, as core_new() takes them */
    /* work taken from the queues and not yet consumed by the test */
    core_work_t pending[N_WORKERS][4096];
    size_t      n_pending[N_WORKERS]; /* how many of pending[w] are filled */
    uint64_t    next_link;            /* the last link id handed out */
    int         handles[64];          /* fake worker link handles: &handles[i] */
} fixture_t;

/* A delivery as a worker hands it to the core, with its content. */
typedef struct test_dlv {
    core_delivery_t dlv;        /* what the core sees */
    core_content_t  content;    /* its (empty) content */
    uint8_t         trace[256]; /* the encoded trace elements, for router annotations */
} test_dlv_t;

/* A core started on the configuration `json`; fails the test if the configuration is bad. */
fixture_t *fx_new(const char *json);
/* Stops the core and frees everything fx_new() made (with the keys of the edge work the
 * test left unread, as a worker would). */
void fx_free(fixture_t *f);

/* Posts one action to the core as a batch of one. */
void post(fixture_t *f, core_action_t *a);
/* Pulls whatever the core queued for worker w within timeout_ms. */
void drain(fixture_t *f, int w, int timeout_ms);
/* The next work item of `type` for worker w (waiting up to a second); fails if none. */
core_work_t expect(fixture_t *f, int w, core_work_type_t type);
/* expect() for the link whose worker handle is `handle` (NULL: any link). */
core_work_t expect_h(fixture_t *f, int w, core_work_type_t type, void *handle);
/* Fails if worker w gets work of `type` within 50 ms. */
void expect_none(fixture_t *f, int w, core_work_type_t type);
/* expect_none() for the link whose worker handle is `handle` (NULL: any link). */
void expect_none_h(fixture_t *f, int w, core_work_type_t type, void *handle);

/* Attaches a client link on connection 1 of worker w and waits for the core's answer (an
 * accepted attach: fails on a refusal); returns the link id. */
uint64_t attach(fixture_t *f, int w, core_link_dir_t dir, const char *addr, bool dynamic);
/* Attaches a link on connection `conn` of worker w as an inter-router link of kind ir_link
 * (0: none) and priority prio, and waits for the core's answer; returns the link id. */
uint64_t attach_on(fixture_t *f, int w, uint64_t conn, core_link_dir_t dir, const char *addr,
                   uint8_t ir_link, uint8_t prio);
/* Attaches a link on connection `conn` of worker w as an edge link of `kind` (uplink, proxy,
 * peer or none) and waits for the core's answer; returns the link id. */
uint64_t attach_edge(fixture_t *f, int w, uint64_t conn, core_link_dir_t dir, const char *addr,
                     core_edge_link_t kind);
/* Answers every address lookup an edge's core asked of the workers (CORE_W_EDGE
 * LOOKUP_ASK, drained within timeout_ms) with "not a link route" (core/edge_lookup.h);
 * attach(), attach_on() and attach_edge() do it while they wait.  True when there was one. */
bool answer_lookups(fixture_t *f, int timeout_ms);
/* Detaches link id of worker w and waits for the core's answer. */
void detach(fixture_t *f, int w, uint64_t id);

/* A new delivery on `link` to `to` (NULL: none), not yet posted; the test frees it. */
test_dlv_t *dlv_new(uint64_t link, const char *to, bool presettled);
/* Posts t to the core as delivered by worker w. */
void dlv_post(fixture_t *f, int w, test_dlv_t *t);
/* dlv_new() and dlv_post(): returns the delivery, which the test frees. */
test_dlv_t *deliver(fixture_t *f, int w, uint64_t link, const char *to, bool presettled);

/* Worker w settles the copy of dlv on out_link with `outcome` (REJECTED carries a condition). */
void settle_copy(fixture_t *f, int w, uint64_t out_link, core_delivery_t *dlv,
                 core_outcome_t outcome);
/* The settlement the core sends worker w for dlv; the caller frees it with free_disp(). */
core_disposition_t expect_settle(fixture_t *f, int w, core_delivery_t *dlv);
/* Frees the strings of a disposition. */
void free_disp(core_disposition_t *d);

#endif
