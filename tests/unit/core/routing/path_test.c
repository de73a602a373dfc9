/* tests/unit/core/routing/path_test.c: core/routing/path.c - next hops, costs, valid origins
 * and radius, compared with what qdrouterd 1.19's own path.py computes for the same
 * collections (path_cases.h, written by gen_paths.py: line, rings, triangles with equal and
 * unequal costs, star, disconnected, unsorted ids, asymmetric and one-way costs, stub and
 * empty link states, a mixed mesh, a router alone), for every router of each topology as
 * self.  Then the inputs path.c refuses, and a full mesh of qdrouterd's 128 routers. */
#include "core/base/base.h"
#include "core/routing/path.h"

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

#include "path_cases.h"
#include "topo.h"

static void test_cases_match_path_py(void **state)
{
    (void)state;
    for (size_t c = 0; c < BASE_ARRAY_LEN(path_cases); c++) {
        const struct path_case *pc = &path_cases[c];
        topo_t                  t;
        topo_parse(&t, pc->topology, pc->self);
        core_rt_paths_t p;
        assert_int_equal(core_rt_paths_compute(t.ls, t.n, &p), 0);
        char got[4096];
        canonical(&p, got, sizeof(got));
        if (strcmp(got, pc->expect) != 0)
            fail_msg("%s, self %s:\n  got  %s\n  want %s", pc->name, pc->self, got, pc->expect);
        core_rt_paths_fini(&p);
    }
}

/* Node order: the collection's, then stubs in the order they are first named. */
static void test_stub_nodes(void **state)
{
    (void)state;
    topo_t t;
    topo_parse(&t, "A:B=1,X=2|B:A=1,Y=1,X=1|X!|Y!", "A");
    core_rt_paths_t p;
    assert_int_equal(core_rt_paths_compute(t.ls, t.n, &p), 0);
    assert_int_equal(p.n, 4);
    assert_int_equal(p.n_coll, 2);
    assert_int_equal(core_rt_paths_find(&p, (const uint8_t *)"X", 1), 2);
    assert_int_equal(core_rt_paths_find(&p, (const uint8_t *)"Y", 1), 3);
    assert_int_equal(core_rt_paths_find(&p, (const uint8_t *)"Z", 1), -1);
    assert_int_equal(p.next_hop[0], -1);
    assert_int_equal(p.cost[0], -1);
    core_rt_paths_fini(&p);
}

/* Upstream: the neighbour each origin's copies reach self through (self's predecessor in
 * the origin's tree).  The triangle A-B-C with a costly A-C: from C, A hears through B; from
 * B, directly; in the line A-B-C (C a leaf beyond B), through B too. */
static void test_upstream(void **state)
{
    (void)state;
    topo_t t;
    topo_parse(&t, "A:B=1,C=10|B:A=1,C=1|C:A=10,B=1", "A");
    core_rt_paths_t p;
    assert_int_equal(core_rt_paths_compute(t.ls, t.n, &p), 0);
    int32_t b = core_rt_paths_find(&p, (const uint8_t *)"B", 1);
    int32_t c = core_rt_paths_find(&p, (const uint8_t *)"C", 1);
    assert_int_equal(p.upstream[0], -1);
    assert_int_equal(p.upstream[b], b);
    assert_int_equal(p.upstream[c], b);
    core_rt_paths_fini(&p);

    topo_parse(&t, "A:B=1|B:A=1,C=1|C:B=1|D!", "A");
    assert_int_equal(core_rt_paths_compute(t.ls, t.n, &p), 0);
    c = core_rt_paths_find(&p, (const uint8_t *)"C", 1);
    b = core_rt_paths_find(&p, (const uint8_t *)"B", 1);
    assert_int_equal(p.upstream[c], b);
    core_rt_paths_fini(&p);
}

static void test_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "A:B=1|A:B=1",     /* an id twice in the collection */
        "A:B=1,B=2|B:A=1", /* a peer twice */
        "A:=1|B:A=1",      /* an empty peer id */
    };
    for (size_t i = 0; i < BASE_ARRAY_LEN(bad); i++) {
        topo_t t;
        topo_parse(&t, bad[i], "A");
        core_rt_paths_t p;
        assert_int_equal(core_rt_paths_compute(t.ls, t.n, &p), -1);
        assert_int_equal(p.n, 0);
        core_rt_paths_fini(&p);
    }
    core_rt_paths_t p;
    assert_int_equal(core_rt_paths_compute(NULL, 0, &p), -1);
}

/* qdrouterd's largest network: 128 routers, every one a neighbour of every other. */
static void test_full_mesh_128(void **state)
{
    (void)state;
    enum { N = 128 };
    static char            names[N][8];
    static codec_bytes_t   peers[N][N];
    static int64_t         costs[N][N];
    static core_rt_ls_in_t ls[N];
    for (int i = 0; i < N; i++)
        snprintf(names[i], sizeof(names[i]), "R%03d", i);
    for (int i = 0; i < N; i++) {
        ls[i].id = view(names[i]);
        ls[i].peers = peers[i];
        ls[i].costs = costs[i];
        for (int j = 0; j < N; j++) {
            if (j == i)
                continue;
            peers[i][ls[i].n_peers] = view(names[j]);
            costs[i][ls[i].n_peers] = 1 + (i + j) % 3;
            ls[i].n_peers++;
        }
    }
    core_rt_paths_t p;
    assert_int_equal(core_rt_paths_compute(ls, N, &p), 0);
    assert_int_equal(p.n, N);
    for (int d = 1; d < N; d++) {
        assert_true(p.next_hop[d] >= 1);
        assert_true(p.cost[d] >= 1 && p.cost[d] <= 2 * 3);
        assert_true(p.hops[d] >= 1 && p.radius >= p.hops[d]);
    }
    core_rt_paths_fini(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cases_match_path_py),
        cmocka_unit_test(test_stub_nodes),
        cmocka_unit_test(test_upstream),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_full_mesh_128),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
