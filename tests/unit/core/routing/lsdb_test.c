/* tests/unit/core/routing/lsdb_test.c: core/routing/lsdb.c - the link-state database.
 *
 * A few databases talk to each other through msg.h's encoder and decoder (every message is
 * encoded and decoded on its way) over an in-test network of connections, with a clock the
 * test advances one second per tick: bring-up of a line and a triangle (neighbours after two
 * HELLOs, link states exchanged, next hops, costs, valid origins, radius), a router restart,
 * an inter-router link lost, a router gone and deleted after remoteLsMaxAge, a duplicate id,
 * and the 127-router limit. */
#include "core/base/base.h"
#include "core/routing/lsdb.h"

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

#define NR 6

typedef struct net {
    uint32_t        n;                      /* routers */
    const char     *ids[NR];                /* their ids */
    core_rt_lsdb_t *db[NR];                 /* their databases */
    bool            up[NR][NR];             /* connection i-j exists (both ways) */
    int64_t         now;                    /* ms */
    uint32_t        sent[CORE_RT_OP_COUNT]; /* messages sent, by opcode */
    uint32_t        dup_ids;                /* dup_id actions seen */
    uint32_t        restarts;               /* restarted actions seen */
    uint32_t        deletes;                /* deleted actions seen */
} net_t;

static int router_index(const net_t *net, codec_bytes_t id)
{
    for (uint32_t i = 0; i < net->n; i++)
        if (strlen(net->ids[i]) == id.len && memcmp(net->ids[i], id.ptr, id.len) == 0)
            return (int)i;
    return -1;
}

/* Physically reachable over up connections (routing messages follow next hops in a real
 * mesh; here they arrive when any path exists, which is what a converged mesh gives). */
static bool path_exists(const net_t *net, uint32_t a, uint32_t b)
{
    bool     seen[NR] = {0};
    uint32_t stack[NR], sp = 0;
    stack[sp++] = a;
    seen[a] = true;
    while (sp) {
        uint32_t x = stack[--sp];
        if (x == b)
            return true;
        for (uint32_t y = 0; y < net->n; y++)
            if (net->up[x][y] && !seen[y]) {
                seen[y] = true;
                stack[sp++] = y;
            }
    }
    return false;
}

static void handle_actions(net_t *net, uint32_t from, core_rt_actions_t *a);

/* Encode, decode, hand to router `to` (conn = sender's index, cost 1). */
static void deliver(net_t *net, uint32_t from, uint32_t to, const core_rt_out_t *o)
{
    core_rt_buf_t b = {0};
    assert_int_equal(core_rt_msg_encode(o, &b), 0);
    net->sent[o->op]++;
    core_rt_msg_t m;
    const char   *why = NULL;
    if (core_rt_msg_decode(b.ptr, b.len, &m, &why) != 0)
        fail_msg("decode: %s", why);
    core_rt_actions_t a;
    core_rt_actions_clear(&a);
    core_rt_lsdb_t *db = net->db[to];
    switch (m.op) {
    case CORE_RT_OP_HELLO:
        assert_int_equal(core_rt_lsdb_hello_CT(db, &m, (int32_t)from, 1, net->now, &a), 0);
        break;
    case CORE_RT_OP_RA:
        assert_int_equal(core_rt_lsdb_ra_CT(db, &m, net->now, &a), 0);
        break;
    case CORE_RT_OP_LSU:
        assert_int_equal(core_rt_lsdb_lsu_CT(db, &m, net->now, &a), 0);
        break;
    case CORE_RT_OP_LSR:
        assert_int_equal(core_rt_lsdb_lsr_CT(db, &m, &a), 0);
        break;
    default:
        break;
    }
    core_rt_buf_fini(&b);
    handle_actions(net, to, &a);
}

static void handle_actions(net_t *net, uint32_t from, core_rt_actions_t *a)
{
    core_rt_lsdb_t *db = net->db[from];
    codec_bytes_t   me = {(const uint8_t *)net->ids[from], strlen(net->ids[from])};
    net->dup_ids += a->dup_id;
    net->restarts += a->n_restarted;
    net->deletes += a->n_deleted;
    if (a->send_hello) {
        const char   *seen[NR];
        codec_bytes_t ids[NR];
        uint32_t      n = core_rt_lsdb_seen_CT(db, seen, NR);
        for (uint32_t i = 0; i < n; i++)
            ids[i] = (codec_bytes_t){(const uint8_t *)seen[i], strlen(seen[i])};
        core_rt_out_t o = {.op = CORE_RT_OP_HELLO,
                           .to = "amqp:/_local/qdhello",
                           .id = me,
                           .instance = 1000 + from,
                           .ids = ids,
                           .n_ids = n};
        for (uint32_t j = 0; j < net->n; j++)
            if (net->up[from][j])
                deliver(net, from, j, &o);
    }
    if (a->send_ra) {
        core_rt_out_t o = {.op = CORE_RT_OP_RA,
                           .to = "amqp:/_topo/0/all/qdrouter",
                           .id = me,
                           .instance = 1000 + from,
                           .ls_seq = core_rt_lsdb_ls_seq(db),
                           .mobile_seq = core_rt_lsdb_mobile_seq(db)};
        for (uint32_t j = 0; j < net->n; j++)
            if (j != from && path_exists(net, from, j))
                deliver(net, from, j, &o);
    }
    for (uint32_t i = 0; i < a->n_lsr; i++) {
        core_rt_node_t *r = core_rt_lsdb_node(db, a->lsr[i]);
        assert_non_null(r);
        int to = router_index(net, (codec_bytes_t){(const uint8_t *)r->id, strlen(r->id)});
        core_rt_out_t o = {.op = CORE_RT_OP_LSR, .to = "amqp:/_topo/0/x/qdrouter", .id = me};
        if (to >= 0 && path_exists(net, from, (uint32_t)to))
            deliver(net, from, (uint32_t)to, &o);
    }
    for (uint32_t i = 0; i < a->n_lsu; i++) {
        core_rt_node_t *r = core_rt_lsdb_node(db, a->lsu[i]);
        assert_non_null(r);
        int to = router_index(net, (codec_bytes_t){(const uint8_t *)r->id, strlen(r->id)});
        assert_true(to >= 0);
        const core_rt_ls_t *ls = core_rt_lsdb_own_ls(db);
        codec_bytes_t       ids[NR];
        for (uint32_t k = 0; k < ls->n; k++)
            ids[k] = (codec_bytes_t){(const uint8_t *)ls->ids[k], strlen(ls->ids[k])};
        char addr[64];
        snprintf(addr, sizeof(addr), "amqp:/_topo/0/%s/qdrouter", net->ids[to]);
        core_rt_out_t lsu = {.op = CORE_RT_OP_LSU,
                             .to = addr,
                             .id = me,
                             .instance = 1000 + from,
                             .ls_seq = ls->ls_seq,
                             .ids = ids,
                             .values = ls->costs,
                             .n_ids = ls->n};
        if (path_exists(net, from, (uint32_t)to))
            deliver(net, from, (uint32_t)to, &lsu);
    }
    net->sent[CORE_RT_OP_MAR] += a->n_mar;
}

static void net_init(net_t *net, uint32_t n, const char *const *ids)
{
    memset(net, 0, sizeof(*net));
    net->n = n;
    net->now = 1000000;
    for (uint32_t i = 0; i < n; i++) {
        net->ids[i] = ids[i];
        net->db[i] = core_rt_lsdb_new(ids[i], 1000 + i, CORE_RT_TIMERS_DEFAULT, net->now);
    }
}

static void net_fini(net_t *net)
{
    for (uint32_t i = 0; i < net->n; i++)
        core_rt_lsdb_free(net->db[i]);
}

static void link_set(net_t *net, uint32_t a, uint32_t b, bool up)
{
    net->up[a][b] = net->up[b][a] = up;
    if (!up) { /* the control links went with the connection */
        core_rt_lsdb_link_lost_CT(net->db[a], (int32_t)b);
        core_rt_lsdb_link_lost_CT(net->db[b], (int32_t)a);
    }
}

static void run(net_t *net, int seconds)
{
    for (int s = 0; s < seconds; s++) {
        net->now += 1000;
        for (uint32_t i = 0; i < net->n; i++) {
            if (!net->db[i])
                continue;
            core_rt_actions_t a;
            core_rt_actions_clear(&a);
            core_rt_lsdb_tick_CT(net->db[i], net->now, &a);
            handle_actions(net, i, &a);
        }
    }
}

static core_rt_node_t *node(const net_t *net, uint32_t at, const char *id)
{
    return core_rt_lsdb_find(net->db[at], (const uint8_t *)id, strlen(id));
}

static void test_line_bringup(void **state)
{
    (void)state;
    static const char *const ids[] = {"A", "B", "C"};
    net_t                    net;
    net_init(&net, 3, ids);
    link_set(&net, 0, 1, true);
    link_set(&net, 1, 2, true);
    run(&net, 1);
    /* after one tick A has heard B's HELLO listing A (B ticked after A): B is a neighbour,
     * but the own link state's sequence moves on the next tick only */
    assert_non_null(node(&net, 0, "B"));
    assert_int_equal(core_rt_lsdb_ls_seq(net.db[0]), 0);
    run(&net, 4);
    core_rt_node_t *ab = node(&net, 0, "B"), *ac = node(&net, 0, "C");
    assert_non_null(ab);
    assert_non_null(ac);
    assert_int_equal(ab->link, 1);
    assert_int_equal(ab->next_hop, -1);
    assert_int_equal(ab->cost, 1);
    assert_int_equal(ac->link, -1);
    assert_int_equal(ac->next_hop, (int32_t)ab->maskbit);
    assert_int_equal(ac->cost, 2);
    assert_int_equal(core_rt_lsdb_radius(net.db[0]), 2);
    assert_int_equal(core_rt_lsdb_ls_seq(net.db[0]), 1);
    assert_true(core_rt_lsdb_ls_seq(net.db[1]) >= 1); /* A and C: one or two bumps */
    /* A's own link state is {B: 1}; B's seen list holds A and C */
    const core_rt_ls_t *own = core_rt_lsdb_own_ls(net.db[0]);
    assert_int_equal(own->n, 1);
    assert_string_equal(own->ids[0], "B");
    const char *seen[4];
    assert_int_equal(core_rt_lsdb_seen_CT(net.db[1], seen, 4), 2);
    /* valid origins: B forwards A's traffic to C and C's to A; A and C forward nobody's */
    core_rt_node_t *bc = node(&net, 1, "C"), *ba = node(&net, 1, "A");
    assert_true(bc->vo[0] & ((uint64_t)1 << ba->maskbit));
    assert_true(ba->vo[0] & ((uint64_t)1 << bc->maskbit));
    assert_int_equal(ac->vo[0], 1); /* self only */
    assert_int_equal(ac->vo[1], 0);
    assert_true(net.sent[CORE_RT_OP_LSR] >= 4 && net.sent[CORE_RT_OP_LSU] >= 4);
    /* stable: a further minute changes no route and sends no LSR */
    uint32_t lsr = net.sent[CORE_RT_OP_LSR];
    run(&net, 60);
    assert_int_equal(net.sent[CORE_RT_OP_LSR], lsr);
    assert_int_equal(node(&net, 0, "C")->cost, 2);
    assert_int_equal(net.dup_ids, 0);
    net_fini(&net);
}

static void test_triangle_and_link_loss(void **state)
{
    (void)state;
    static const char *const ids[] = {"A", "B", "C"};
    net_t                    net;
    net_init(&net, 3, ids);
    link_set(&net, 0, 1, true);
    link_set(&net, 1, 2, true);
    link_set(&net, 0, 2, true);
    run(&net, 6);
    for (uint32_t i = 0; i < 3; i++) {
        assert_int_equal(core_rt_lsdb_radius(net.db[i]), 1);
        assert_int_equal(core_rt_lsdb_count(net.db[i]), 2);
    }
    assert_int_equal(node(&net, 0, "C")->next_hop, -1);
    assert_int_equal(node(&net, 0, "C")->cost, 1);
    /* A-C goes away: at once A has C via B */
    link_set(&net, 0, 2, false);
    run(&net, 3);
    core_rt_node_t *ac = node(&net, 0, "C");
    assert_int_equal(ac->link, -1);
    assert_int_equal(ac->next_hop, (int32_t)node(&net, 0, "B")->maskbit);
    assert_int_equal(ac->cost, 2);
    assert_int_equal(core_rt_lsdb_radius(net.db[0]), 2);
    /* and back */
    link_set(&net, 0, 2, true);
    run(&net, 4);
    assert_int_equal(node(&net, 0, "C")->next_hop, -1);
    assert_int_equal(node(&net, 0, "C")->cost, 1);
    net_fini(&net);
}

static void test_router_gone_then_deleted(void **state)
{
    (void)state;
    static const char *const ids[] = {"A", "B", "C"};
    net_t                    net;
    net_init(&net, 3, ids);
    link_set(&net, 0, 1, true);
    link_set(&net, 1, 2, true);
    run(&net, 6);
    assert_true(node(&net, 0, "C")->reachable);
    /* C stops: its connection just stops carrying HELLOs (no detach): B drops it after
     * helloMaxAge, A then finds it unreachable */
    net.up[1][2] = net.up[2][1] = false;
    run(&net, 6);
    assert_int_equal(node(&net, 1, "C")->link, -1);
    assert_false(node(&net, 0, "C")->reachable);
    assert_int_equal(node(&net, 0, "C")->next_hop, -1);
    /* A keeps C's link state until remoteLsMaxAge (60 s), then deletes it on the third tick
     * that finds it unreferenced */
    assert_int_equal(core_rt_lsdb_count(net.db[0]), 2);
    run(&net, 60);
    assert_null(node(&net, 0, "C"));
    assert_null(node(&net, 1, "C"));
    assert_true(net.deletes >= 2);
    assert_int_equal(core_rt_lsdb_count(net.db[0]), 1);
    net_fini(&net);
}

static void test_restart(void **state)
{
    (void)state;
    static const char *const ids[] = {"A", "B"};
    net_t                    net;
    net_init(&net, 2, ids);
    link_set(&net, 0, 1, true);
    run(&net, 5);
    core_rt_node_t *ab = node(&net, 0, "B");
    assert_true(ab->ls.ls_seq >= 1);
    /* B's RA with a new instance: a restart (link state emptied, addresses flushed) */
    core_rt_msg_t     m = {.op = CORE_RT_OP_RA,
                           .id = {(const uint8_t *)"B", 1},
                           .pv = 1,
                           .instance = 99,
                           .ls_seq = 0,
                           .mobile_seq = 0};
    core_rt_actions_t a;
    core_rt_actions_clear(&a);
    assert_int_equal(core_rt_lsdb_ra_CT(net.db[0], &m, net.now, &a), 0);
    assert_int_equal(a.n_restarted, 1);
    assert_int_equal(a.restarted[0], ab->maskbit);
    assert_int_equal(ab->ls.ls_seq, 0);
    assert_int_equal(ab->ls.n, 0);
    assert_true(ab->need_lsr);
    net_fini(&net);
}

static void test_duplicate_id_and_own_messages(void **state)
{
    (void)state;
    core_rt_lsdb_t *db = core_rt_lsdb_new("A", 7, CORE_RT_TIMERS_DEFAULT, 0);
    core_rt_msg_t hello = {.op = CORE_RT_OP_HELLO, .id = {(const uint8_t *)"A", 1}, .instance = 8};
    core_rt_actions_t a;
    core_rt_actions_clear(&a);
    assert_int_equal(core_rt_lsdb_hello_CT(db, &hello, 0, 1, 1000, &a), 0);
    assert_true(a.dup_id);
    core_rt_actions_clear(&a);
    assert_int_equal(core_rt_lsdb_hello_CT(db, &hello, 0, 1, 2000, &a), 0);
    assert_false(a.dup_id); /* reported once */
    hello.instance = 7;     /* our own HELLO echoed: not a duplicate */
    core_rt_msg_t ra = {.op = CORE_RT_OP_RA, .id = {(const uint8_t *)"A", 1}, .ls_seq = 5};
    assert_int_equal(core_rt_lsdb_ra_CT(db, &ra, 3000, &a), 0);
    assert_int_equal(core_rt_lsdb_count(db), 0);
    assert_int_equal(a.n_lsr, 0);
    core_rt_msg_t empty = {.op = CORE_RT_OP_LSR, .id = {(const uint8_t *)"", 0}};
    assert_int_equal(core_rt_lsdb_lsr_CT(db, &empty, &a), -1);
    core_rt_msg_t nul = {.op = CORE_RT_OP_RA, .id = {(const uint8_t *)"B\0x", 3}};
    assert_int_equal(core_rt_lsdb_ra_CT(db, &nul, 3000, &a), -1);
    assert_int_equal(core_rt_lsdb_count(db), 0);
    assert_null(core_rt_lsdb_new("", 1, CORE_RT_TIMERS_DEFAULT, 0));
    core_rt_lsdb_free(db);
}

static void test_lsu_sequence_and_learning(void **state)
{
    (void)state;
    core_rt_lsdb_t *db = core_rt_lsdb_new("A", 7, CORE_RT_TIMERS_DEFAULT, 0);
    /* an LSU for B naming C and A: C is learned, A (self) is not */
    static const uint8_t peers2[] = {0xa1, 1, 'C', 0x54, 3, 0xa1, 1, 'A', 0x54, 1};
    core_rt_msg_t        lsu = {.op = CORE_RT_OP_LSU,
                                .id = {(const uint8_t *)"B", 1},
                                .ls_seq = 4,
                                .ls_ls_seq = 4,
                                .peers = {peers2, sizeof(peers2), 2}};
    core_rt_actions_t    a;
    core_rt_actions_clear(&a);
    assert_int_equal(core_rt_lsdb_lsu_CT(db, &lsu, 1000, &a), 0);
    core_rt_node_t *b = core_rt_lsdb_find(db, (const uint8_t *)"B", 1);
    assert_non_null(b);
    assert_int_equal(b->ls.ls_seq, 4);
    assert_int_equal(b->ls.n, 2);
    assert_string_equal(b->ls.ids[0], "C");
    assert_int_equal(b->ls.costs[0], 3);
    assert_non_null(core_rt_lsdb_find(db, (const uint8_t *)"C", 1));
    assert_int_equal(core_rt_lsdb_count(db), 2);
    /* peer ids that name no router (empty, or with a NUL) are left out */
    static const uint8_t peers3[] = {0xa1, 0, 0x54, 1, 0xa1, 2,    'D', 0,
                                     0x54, 1, 0xa1, 1, 'E',  0x54, 2};
    core_rt_msg_t        odd = {.op = CORE_RT_OP_LSU,
                                .id = {(const uint8_t *)"X", 1},
                                .ls_ls_seq = 1,
                                .peers = {peers3, sizeof(peers3), 3}};
    assert_int_equal(core_rt_lsdb_lsu_CT(db, &odd, 1000, &a), 0);
    core_rt_node_t *x = core_rt_lsdb_find(db, (const uint8_t *)"X", 1);
    assert_int_equal(x->ls.n, 1);
    assert_string_equal(x->ls.ids[0], "E");
    assert_int_equal(core_rt_lsdb_count(db), 4); /* B, C, X, E */
    /* an older or equal sequence changes nothing */
    static const uint8_t peers1[] = {0xa1, 1, 'A', 0x54, 9};
    core_rt_msg_t        old = lsu;
    old.ls_ls_seq = 4;
    old.peers = (core_rt_peers_t){peers1, sizeof(peers1), 1};
    assert_int_equal(core_rt_lsdb_lsu_CT(db, &old, 2000, &a), 0);
    assert_int_equal(b->ls.n, 2);
    /* an RA with a newer ls_seq asks for the link state at once */
    core_rt_msg_t ra = {
        .op = CORE_RT_OP_RA, .id = {(const uint8_t *)"B", 1}, .ls_seq = 5, .mobile_seq = 2};
    assert_int_equal(core_rt_lsdb_ra_CT(db, &ra, 3000, &a), 0);
    assert_int_equal(a.n_lsr, 1);
    assert_int_equal(a.lsr[0], b->maskbit);
    assert_true(b->need_mar);
    core_rt_lsdb_free(db);
}

/* Router A's view of its neighbour B, as several tests below set it up: B's HELLO listing A
 * (B becomes A's neighbour), and B's first link state, naming A and C. */
static const uint8_t b_seen[] = {0xa1, 1, 'A'};
static const uint8_t b_peers[] = {0xa1, 1, 'A', 0x54, 1, 0xa1, 1, 'C', 0x54, 1};

static core_rt_msg_t hello_from_b(void)
{
    return (core_rt_msg_t){.op = CORE_RT_OP_HELLO,
                           .id = {(const uint8_t *)"B", 1},
                           .pv = 1,
                           .instance = 3,
                           .seen = {b_seen, sizeof(b_seen), 1}};
}

static core_rt_msg_t lsu_from_b(void)
{
    return (core_rt_msg_t){.op = CORE_RT_OP_LSU,
                           .id = {(const uint8_t *)"B", 1},
                           .ls_ls_seq = 1,
                           .peers = {b_peers, sizeof(b_peers), 2}};
}

/* A router that is no neighbour and whose link state is empty is deleted on the third tick in
 * a row that finds it in nobody's link state: the count starts again while something links
 * to it, so a router that waited for a referrer a while before is not deleted on the first
 * tick after the link to it goes again. */
static void test_deletion_count_starts_again(void **state)
{
    (void)state;
    core_rt_lsdb_t   *db = core_rt_lsdb_new("A", 7, CORE_RT_TIMERS_DEFAULT, 0);
    core_rt_actions_t a;
    /* C is learned from B's link state, then B's next one lacks it */
    static const uint8_t with_c[] = {0xa1, 1, 'C', 0x54, 1};
    static const uint8_t with_a[] = {0xa1, 1, 'A', 0x54, 1};
    core_rt_msg_t        lsu = {.op = CORE_RT_OP_LSU,
                                .id = {(const uint8_t *)"B", 1},
                                .ls_ls_seq = 1,
                                .peers = {with_c, sizeof(with_c), 1}};
    core_rt_actions_clear(&a);
    assert_int_equal(core_rt_lsdb_lsu_CT(db, &lsu, 1000, &a), 0);
    assert_non_null(core_rt_lsdb_find(db, (const uint8_t *)"C", 1));
    lsu.ls_ls_seq = 2;
    lsu.peers = (core_rt_peers_t){with_a, sizeof(with_a), 1};
    assert_int_equal(core_rt_lsdb_lsu_CT(db, &lsu, 1000, &a), 0);
    int64_t now = 1000;
    for (int i = 0; i < 2; i++) { /* two ticks unreferenced */
        core_rt_actions_clear(&a);
        core_rt_lsdb_tick_CT(db, now += 1000, &a);
    }
    assert_non_null(core_rt_lsdb_find(db, (const uint8_t *)"C", 1));
    /* B's link state names C for a tick, then no longer */
    lsu.ls_ls_seq = 3;
    lsu.peers = (core_rt_peers_t){with_c, sizeof(with_c), 1};
    assert_int_equal(core_rt_lsdb_lsu_CT(db, &lsu, now, &a), 0);
    core_rt_actions_clear(&a);
    core_rt_lsdb_tick_CT(db, now += 1000, &a);
    lsu.ls_ls_seq = 4;
    lsu.peers = (core_rt_peers_t){with_a, sizeof(with_a), 1};
    assert_int_equal(core_rt_lsdb_lsu_CT(db, &lsu, now, &a), 0);
    for (int i = 0; i < 2; i++) {
        core_rt_actions_clear(&a);
        core_rt_lsdb_tick_CT(db, now += 1000, &a);
        assert_int_equal(a.n_deleted, 0);
        assert_non_null(core_rt_lsdb_find(db, (const uint8_t *)"C", 1));
    }
    core_rt_actions_clear(&a);
    core_rt_lsdb_tick_CT(db, now += 1000, &a);
    assert_int_equal(a.n_deleted, 1);
    assert_null(core_rt_lsdb_find(db, (const uint8_t *)"C", 1));
    core_rt_lsdb_free(db);
}

/* A router heard of by its own RA only (R7 at R1 while a line forms: the RA of R6's new
 * neighbour comes through the line before R6 can answer R1's LSR) is kept while that RA is
 * within remoteLsMaxAge, however long the link state that links to it takes (1.19 deleted
 * it on the third tick, and learned it again from that link state: a row that went and came
 * back), keeps its mask bit, and becomes reachable when that link state comes.  One whose
 * RAs stop is deleted on the third tick after remoteLsMaxAge has passed since the last. */
static void test_router_heard_by_its_ra_is_kept(void **state)
{
    (void)state;
    core_rt_lsdb_t   *db = core_rt_lsdb_new("A", 7, CORE_RT_TIMERS_DEFAULT, 0);
    core_rt_actions_t a;
    core_rt_msg_t     ra = {
            .op = CORE_RT_OP_RA, .id = {(const uint8_t *)"C", 1}, .pv = 1, .instance = 5, .ls_seq = 1};
    core_rt_actions_clear(&a);
    assert_int_equal(core_rt_lsdb_ra_CT(db, &ra, 1000, &a), 0);
    core_rt_node_t *c = core_rt_lsdb_find(db, (const uint8_t *)"C", 1);
    assert_non_null(c);
    uint32_t bit = c->maskbit;
    /* B becomes a neighbour, but its link state comes only five ticks later */
    core_rt_msg_t hello = hello_from_b();
    int64_t       now = 1000;
    for (int k = 0; k < 5; k++) {
        now += 1000;
        core_rt_actions_clear(&a);
        assert_int_equal(core_rt_lsdb_hello_CT(db, &hello, 0, 1, now - 10, &a), 0);
        core_rt_lsdb_tick_CT(db, now, &a);
        assert_int_equal(a.n_deleted, 0);
        assert_false(c->reachable);
    }
    assert_ptr_equal(core_rt_lsdb_find(db, (const uint8_t *)"C", 1), c);
    core_rt_msg_t lsu = lsu_from_b(); /* names A and C */
    assert_int_equal(core_rt_lsdb_lsu_CT(db, &lsu, now, &a), 0);
    now += 1000;
    core_rt_actions_clear(&a);
    assert_int_equal(core_rt_lsdb_hello_CT(db, &hello, 0, 1, now - 10, &a), 0);
    core_rt_lsdb_tick_CT(db, now, &a);
    assert_true(c->reachable);
    assert_int_equal(c->maskbit, bit);
    assert_int_equal(a.n_lsr, 1); /* the LSR the RA asked for goes now */
    assert_int_equal(a.lsr[0], bit);
    core_rt_lsdb_free(db);

    /* D, heard by its RA at 1 s and never again, nothing linking to it */
    db = core_rt_lsdb_new("A", 7, CORE_RT_TIMERS_DEFAULT, 0);
    ra.id = (codec_bytes_t){(const uint8_t *)"D", 1};
    core_rt_actions_clear(&a);
    assert_int_equal(core_rt_lsdb_ra_CT(db, &ra, 1000, &a), 0);
    for (now = 2000; now <= 61000; now += 1000) { /* within remoteLsMaxAge (60 s) */
        core_rt_actions_clear(&a);
        core_rt_lsdb_tick_CT(db, now, &a);
        assert_int_equal(a.n_deleted, 0);
    }
    for (int k = 0; k < 2; k++, now += 1000) {
        core_rt_actions_clear(&a);
        core_rt_lsdb_tick_CT(db, now, &a);
        assert_int_equal(a.n_deleted, 0);
    }
    core_rt_actions_clear(&a);
    core_rt_lsdb_tick_CT(db, now, &a);
    assert_int_equal(a.n_deleted, 1);
    assert_int_equal(core_rt_lsdb_count(db), 0);
    core_rt_lsdb_free(db);
}

/* An LSR from a router with no route to it yet is answered once there is one. */
static void test_lsr_answered_once_reachable(void **state)
{
    (void)state;
    core_rt_lsdb_t   *db = core_rt_lsdb_new("A", 7, CORE_RT_TIMERS_DEFAULT, 0);
    core_rt_actions_t a;
    core_rt_msg_t     lsr = {.op = CORE_RT_OP_LSR, .id = {(const uint8_t *)"C", 1}, .pv = 1};
    core_rt_actions_clear(&a);
    assert_int_equal(core_rt_lsdb_lsr_CT(db, &lsr, &a), 0);
    assert_int_equal(a.n_lsu, 0); /* no route to C: nothing to send yet */
    core_rt_node_t *c = core_rt_lsdb_find(db, (const uint8_t *)"C", 1);
    assert_non_null(c);
    /* B becomes a neighbour (its HELLO lists A), its link state names C */
    core_rt_msg_t hello = hello_from_b();
    assert_int_equal(core_rt_lsdb_hello_CT(db, &hello, 0, 1, 1000, &a), 0);
    core_rt_msg_t lsu = lsu_from_b();
    assert_int_equal(core_rt_lsdb_lsu_CT(db, &lsu, 1000, &a), 0);
    core_rt_actions_clear(&a);
    core_rt_lsdb_tick_CT(db, 2000, &a);
    assert_true(c->reachable);
    assert_int_equal(a.n_lsu, 1);
    assert_int_equal(a.lsu[0], c->maskbit);
    /* once: the next tick sends nothing more; a new LSR is answered at once */
    core_rt_actions_clear(&a);
    core_rt_lsdb_tick_CT(db, 3000, &a);
    assert_int_equal(a.n_lsu, 0);
    assert_int_equal(core_rt_lsdb_lsr_CT(db, &lsr, &a), 0);
    assert_int_equal(a.n_lsu, 1);
    core_rt_lsdb_free(db);
}

/* An LSR lost on its way (a router on it, or its target, could not route it yet) is sent
 * again on the next tick, up to raIntervalFluxSeconds times, until an LSU from the target
 * answers it; and an RA that asks for the link state of a router with no route to it yet
 * leaves the LSR to the first tick that finds one. */
static void test_lsr_sent_again_until_answered(void **state)
{
    (void)state;
    core_rt_lsdb_t   *db = core_rt_lsdb_new("A", 7, CORE_RT_TIMERS_DEFAULT, 0);
    core_rt_actions_t a;
    /* B a neighbour, its link state names C: C is reachable, as a stub, through B */
    core_rt_msg_t hello = hello_from_b();
    core_rt_actions_clear(&a);
    assert_int_equal(core_rt_lsdb_hello_CT(db, &hello, 0, 1, 1000, &a), 0);
    core_rt_msg_t lsu = lsu_from_b();
    assert_int_equal(core_rt_lsdb_lsu_CT(db, &lsu, 1000, &a), 0);
    core_rt_node_t *b = core_rt_lsdb_find(db, (const uint8_t *)"B", 1);
    core_rt_node_t *c = core_rt_lsdb_find(db, (const uint8_t *)"C", 1);
    assert_non_null(c);
    int64_t now = 2000;
    int     asked = 0;
    for (int k = 0; k < 10; k++, now += 1000) {
        core_rt_actions_clear(&a);
        assert_int_equal(core_rt_lsdb_hello_CT(db, &hello, 0, 1, now - 10, &a), 0);
        core_rt_lsdb_tick_CT(db, now, &a);
        for (uint32_t i = 0; i < a.n_lsr; i++)
            asked += a.lsr[i] == c->maskbit;
        /* B's LSU (the same ls_seq) answers the first tick's LSR to B: not sent again */
        for (uint32_t i = 0; i < a.n_lsr && k > 0; i++)
            assert_int_not_equal(a.lsr[i], b->maskbit);
        if (k == 0)
            assert_int_equal(core_rt_lsdb_lsu_CT(db, &lsu, now + 100, &a), 0);
    }
    assert_true(c->reachable);
    assert_int_equal(asked, 1 + 4); /* the first, then once a tick raIntervalFluxSeconds times */
    /* an RA advertising a newer link state asks at once; an LSU from C ends the asking */
    core_rt_msg_t ra = {.op = CORE_RT_OP_RA,
                        .id = {(const uint8_t *)"C", 1},
                        .pv = 1,
                        .instance = 9,
                        .ls_seq = 1};
    core_rt_actions_clear(&a);
    assert_int_equal(core_rt_lsdb_ra_CT(db, &ra, now, &a), 0);
    assert_int_equal(a.n_lsr, 1);
    static const uint8_t c_peers[] = {0xa1, 1, 'B', 0x54, 1};
    core_rt_msg_t        c_lsu = {.op = CORE_RT_OP_LSU,
                                  .id = {(const uint8_t *)"C", 1},
                                  .instance = 9,
                                  .ls_ls_seq = 1,
                                  .peers = {c_peers, sizeof(c_peers), 1}};
    assert_int_equal(core_rt_lsdb_lsu_CT(db, &c_lsu, now + 100, &a), 0);
    for (int k = 0; k < 3; k++) {
        now += 1000;
        core_rt_actions_clear(&a);
        assert_int_equal(core_rt_lsdb_hello_CT(db, &hello, 0, 1, now - 10, &a), 0);
        core_rt_lsdb_tick_CT(db, now, &a);
        assert_int_equal(a.n_lsr, 0);
    }
    /* D, heard of by its RA only, has no route: the LSR goes on the tick that finds one */
    core_rt_msg_t ra_d = {.op = CORE_RT_OP_RA,
                          .id = {(const uint8_t *)"D", 1},
                          .pv = 1,
                          .instance = 4,
                          .ls_seq = 1};
    core_rt_actions_clear(&a);
    assert_int_equal(core_rt_lsdb_ra_CT(db, &ra_d, now, &a), 0);
    core_rt_node_t *d = core_rt_lsdb_find(db, (const uint8_t *)"D", 1);
    assert_non_null(d);
    assert_false(d->reachable);
    static const uint8_t c_peers2[] = {0xa1, 1, 'B', 0x54, 1, 0xa1, 1, 'D', 0x54, 1};
    c_lsu.ls_ls_seq = 2;
    c_lsu.peers = (core_rt_peers_t){c_peers2, sizeof(c_peers2), 2};
    assert_int_equal(core_rt_lsdb_lsu_CT(db, &c_lsu, now + 100, &a), 0);
    now += 1000;
    core_rt_actions_clear(&a);
    assert_int_equal(core_rt_lsdb_hello_CT(db, &hello, 0, 1, now - 10, &a), 0);
    core_rt_lsdb_tick_CT(db, now, &a);
    assert_true(d->reachable);
    assert_int_equal(a.n_lsr, 1);
    assert_int_equal(a.lsr[0], d->maskbit);
    core_rt_lsdb_free(db);
}

/* In flux an RA goes every raIntervalFluxSeconds ticks, also when a tick falls a few
 * milliseconds earlier on its second than the one that sent the last RA. */
static void test_ra_interval_in_ticks(void **state)
{
    (void)state;
    core_rt_lsdb_t   *db = core_rt_lsdb_new("A", 7, CORE_RT_TIMERS_DEFAULT, 0);
    core_rt_actions_t a;
    /* a neighbour: the own link state changes, an RA goes at once, flux begins */
    core_rt_msg_t hello = hello_from_b();
    core_rt_actions_clear(&a);
    assert_int_equal(core_rt_lsdb_hello_CT(db, &hello, 0, 1, 100000, &a), 0);
    core_rt_actions_clear(&a);
    core_rt_lsdb_tick_CT(db, 100006, &a); /* 6 ms late on its second */
    assert_true(a.send_ra);
    int ras = 0, first = 0;
    for (int k = 1; k <= 8; k++) {
        core_rt_actions_clear(&a);
        /* HELLOs keep B a neighbour; ticks 1 to 3 ms late */
        assert_int_equal(core_rt_lsdb_hello_CT(db, &hello, 0, 1, 100000 + k * 1000, &a), 0);
        core_rt_lsdb_tick_CT(db, 100000 + k * 1000 + (k % 3) + 1, &a);
        if (a.send_ra && !first)
            first = k;
        ras += a.send_ra;
    }
    assert_int_equal(first, 4); /* raIntervalFluxSeconds (4) ticks after the last */
    assert_int_equal(ras, 2);   /* ticks 4 and 8 */
    core_rt_lsdb_free(db);
}

/* A router learned from another's link state, whose own link state came in an LSU but whose
 * RA never reached us: the LSU's
 * instance is its instance, so its restart (an RA of another instance) drops the old link
 * state and asks for the new one, which is taken although its ls_seq is lower. */
static void test_restart_after_lsu_only(void **state)
{
    (void)state;
    core_rt_lsdb_t      *db = core_rt_lsdb_new("A", 7, CORE_RT_TIMERS_DEFAULT, 0);
    core_rt_actions_t    a;
    static const uint8_t old_peers[] = {0xa1, 1, 'A', 0x54, 1, 0xa1, 1, 'D', 0x54, 1};
    core_rt_msg_t        lsu = {.op = CORE_RT_OP_LSU,
                                .id = {(const uint8_t *)"B", 1},
                                .pv = 1,
                                .instance = 50,
                                .ls_seq = 3,
                                .ls_ls_seq = 3,
                                .peers = {old_peers, sizeof(old_peers), 2}};
    /* B is learned first from C's link state, which names it (no instance there) */
    static const uint8_t c_peers[] = {0xa1, 1, 'B', 0x54, 1};
    core_rt_msg_t        c_lsu = {.op = CORE_RT_OP_LSU,
                                  .id = {(const uint8_t *)"C", 1},
                                  .pv = 1,
                                  .instance = 40,
                                  .ls_seq = 1,
                                  .ls_ls_seq = 1,
                                  .peers = {c_peers, sizeof(c_peers), 1}};
    core_rt_actions_clear(&a);
    assert_int_equal(core_rt_lsdb_lsu_CT(db, &c_lsu, 1000, &a), 0);
    core_rt_node_t *b = core_rt_lsdb_find(db, (const uint8_t *)"B", 1);
    assert_non_null(b);
    assert_false(b->has_instance);
    assert_int_equal(core_rt_lsdb_lsu_CT(db, &lsu, 1000, &a), 0);
    assert_int_equal(b->ls.n, 2);
    assert_true(b->has_instance);
    assert_int_equal(b->instance, 50);
    /* B restarts: its RA has another instance */
    core_rt_msg_t ra = {.op = CORE_RT_OP_RA,
                        .id = {(const uint8_t *)"B", 1},
                        .pv = 1,
                        .instance = 60,
                        .ls_seq = 1};
    assert_int_equal(core_rt_lsdb_ra_CT(db, &ra, 2000, &a), 0);
    assert_int_equal(a.n_restarted, 1);
    assert_int_equal(b->ls.n, 0);
    assert_int_equal(a.n_lsr, 1); /* its new link state asked */
    /* a late LSU of the previous life is not taken; the new one is, at ls_seq 1 */
    assert_int_equal(core_rt_lsdb_lsu_CT(db, &lsu, 2000, &a), 0);
    assert_int_equal(b->ls.n, 0);
    static const uint8_t new_peers[] = {0xa1, 1, 'A', 0x54, 1};
    lsu.instance = 60;
    lsu.ls_seq = lsu.ls_ls_seq = 1;
    lsu.peers = (core_rt_peers_t){new_peers, sizeof(new_peers), 1};
    assert_int_equal(core_rt_lsdb_lsu_CT(db, &lsu, 2000, &a), 0);
    assert_int_equal(b->ls.n, 1);
    assert_int_equal(b->ls.ls_seq, 1);
    core_rt_lsdb_free(db);
}

static void test_router_limit(void **state)
{
    (void)state;
    core_rt_lsdb_t   *db = core_rt_lsdb_new("self", 1, CORE_RT_TIMERS_DEFAULT, 0);
    core_rt_actions_t a;
    char              id[16];
    for (int i = 0; i < CORE_RT_MAX_ROUTERS; i++) {
        snprintf(id, sizeof(id), "R%d", i);
        core_rt_msg_t ra = {.op = CORE_RT_OP_RA, .id = {(const uint8_t *)id, strlen(id)}};
        core_rt_actions_clear(&a);
        int rc = core_rt_lsdb_ra_CT(db, &ra, 1000, &a);
        assert_int_equal(rc, i < CORE_RT_MAX_ROUTERS - 1 ? 0 : -1);
    }
    assert_int_equal(core_rt_lsdb_count(db), CORE_RT_MAX_ROUTERS - 1);
    /* mask bits are the lowest free ones */
    assert_int_equal(core_rt_lsdb_find(db, (const uint8_t *)"R0", 2)->maskbit, 1);
    assert_int_equal(core_rt_lsdb_find(db, (const uint8_t *)"R126", 4)->maskbit, 127);
    core_rt_actions_clear(&a);
    core_rt_lsdb_tick_CT(db, 2000, &a);
    core_rt_lsdb_free(db);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_bringup),
        cmocka_unit_test(test_triangle_and_link_loss),
        cmocka_unit_test(test_router_gone_then_deleted),
        cmocka_unit_test(test_restart),
        cmocka_unit_test(test_duplicate_id_and_own_messages),
        cmocka_unit_test(test_lsu_sequence_and_learning),
        cmocka_unit_test(test_router_limit),
        cmocka_unit_test(test_deletion_count_starts_again),
        cmocka_unit_test(test_router_heard_by_its_ra_is_kept),
        cmocka_unit_test(test_lsr_answered_once_reachable),
        cmocka_unit_test(test_lsr_sent_again_until_answered),
        cmocka_unit_test(test_ra_interval_in_ticks),
        cmocka_unit_test(test_restart_after_lsu_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
