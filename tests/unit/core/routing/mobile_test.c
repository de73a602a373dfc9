/* tests/unit/core/routing/mobile_test.c: core/routing/mobile.c - the mobile-address table.
 *
 * Local batches (an add and a delete inside one second cancel out, only mobile-sync classes
 * count, the sequence moves once per non-empty batch), absolute MAU contents, and the remote
 * rules: differential MAUs in order applied, out of order answered by one MAR and then
 * ignored (the fix after 1.19.0), absolute MAUs replacing a router's keys, hints, router
 * flush.  MAUs travel through msg.h's encoder and decoder, and qdrouterd's own captured MAUs
 * (vectors/) are applied. */
#include "core/base/base.h"
#include "core/routing/mobile.h"

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

static const char *vectors_dir = "vectors";

#define K(s) s, strlen(s)

/* Encode a differential (or absolute) MAU, decode it, apply it at `to` as router `bit`.
 * hints NULL: the MAU is applied as if it had come without usable hints. */
static core_rt_mau_result_t send_mau(core_rt_mobile_t *to, uint32_t bit, int64_t seq,
                                     const codec_bytes_t *add, const int64_t *hints, uint32_t n_add,
                                     const codec_bytes_t *del, uint32_t n_del, bool absolute)
{
    int64_t       zeros[8] = {0};
    core_rt_out_t o = {.op = CORE_RT_OP_MAU,
                       .to = "_topo/0/all/qdrouter.ma",
                       .id = {(const uint8_t *)"R", 1},
                       .mobile_seq = seq,
                       .ids = add,
                       .values = hints ? hints : zeros,
                       .n_ids = n_add,
                       .dels = del,
                       .n_dels = n_del,
                       .absolute = absolute};
    core_rt_buf_t b = {0};
    assert_int_equal(core_rt_msg_encode(&o, &b), 0);
    core_rt_msg_t m;
    assert_int_equal(core_rt_msg_decode(b.ptr, b.len, &m, NULL), 0);
    if (!hints)
        m.hints = (core_rt_ints_t){0};
    core_rt_mau_result_t r = core_rt_mobile_mau_CT(to, bit, &m);
    core_rt_buf_fini(&b);
    return r;
}

static bool has_key(const codec_bytes_t *keys, uint32_t n, const char *k)
{
    for (uint32_t i = 0; i < n; i++)
        if (keys[i].len == strlen(k) && memcmp(keys[i].ptr, k, keys[i].len) == 0)
            return true;
    return false;
}

static void test_local_batches(void **state)
{
    (void)state;
    core_rt_mobile_t     *mob = core_rt_mobile_new();
    core_rt_mobile_diff_t d;
    assert_false(core_rt_mobile_tick_CT(mob, &d));
    assert_int_equal(core_rt_mobile_seq(mob), 0);

    core_rt_mobile_local_add_CT(mob, K("M0a"), 3);
    core_rt_mobile_local_add_CT(mob, K("M0b"), 2);
    core_rt_mobile_local_add_CT(mob, K("Ltemp"), 3); /* not synced */
    core_rt_mobile_local_add_CT(mob, K("M0gone"), 3);
    core_rt_mobile_local_del_CT(mob, K("M0gone")); /* cancels */
    assert_true(core_rt_mobile_tick_CT(mob, &d));
    assert_int_equal(d.mobile_seq, 1);
    assert_int_equal(d.n_add, 2);
    assert_int_equal(d.n_del, 0);
    assert_true(has_key(d.add, d.n_add, "M0a") && has_key(d.add, d.n_add, "M0b"));
    assert_int_equal(d.hints[0], 3);
    assert_int_equal(d.hints[1], 2);
    assert_false(core_rt_mobile_tick_CT(mob, &d)); /* nothing new */

    core_rt_mobile_local_del_CT(mob, K("M0a"));
    core_rt_mobile_local_add_CT(mob, K("M0c"), 1);
    /* a MAR now: exist = keys with destinations or pending delete, minus pending adds */
    assert_true(core_rt_mobile_mar_CT(mob, 0));
    assert_false(core_rt_mobile_mar_CT(mob, 1));
    const codec_bytes_t *keys;
    const int64_t       *hints;
    uint32_t             n = core_rt_mobile_exist_CT(mob, &keys, &hints);
    assert_int_equal(n, 2);
    assert_true(has_key(keys, n, "M0a") && has_key(keys, n, "M0b"));
    assert_false(has_key(keys, n, "M0c"));

    assert_true(core_rt_mobile_tick_CT(mob, &d));
    assert_int_equal(d.mobile_seq, 2);
    assert_int_equal(d.n_add, 1);
    assert_int_equal(d.n_del, 1);
    assert_true(has_key(d.del, d.n_del, "M0a"));
    n = core_rt_mobile_exist_CT(mob, &keys, &hints);
    assert_int_equal(n, 2);
    assert_true(has_key(keys, n, "M0b") && has_key(keys, n, "M0c"));
    /* a delete and re-add inside one batch cancel out too */
    core_rt_mobile_local_del_CT(mob, K("M0b"));
    core_rt_mobile_local_add_CT(mob, K("M0b"), 2);
    assert_false(core_rt_mobile_tick_CT(mob, &d));
    assert_int_equal(core_rt_mobile_key_count(mob), 2);
    core_rt_mobile_free(mob);
}

static void test_remote_sequence(void **state)
{
    (void)state;
    core_rt_mobile_t *mob = core_rt_mobile_new();
    codec_bytes_t     a[] = {{(const uint8_t *)"M0x", 3}, {(const uint8_t *)"M0y", 3}};
    int64_t           h[] = {2, 3};
    /* in order: applied */
    assert_int_equal(send_mau(mob, 5, 1, a, h, 2, NULL, 0, false), CORE_RT_MAU_APPLIED);
    assert_true(core_rt_mobile_router_has(mob, K("M0x"), 5));
    assert_int_equal(core_rt_mobile_hint(mob, K("M0x")), 2);
    assert_int_equal(core_rt_mobile_hint(mob, K("M0y")), 3);
    assert_int_equal(core_rt_mobile_router_seq(mob, 5), 1);
    /* a duplicate (same seq again, by a second path): one MAR, then ignored */
    codec_bytes_t z[] = {{(const uint8_t *)"M0z", 3}};
    assert_int_equal(send_mau(mob, 5, 1, z, NULL, 1, NULL, 0, false), CORE_RT_MAU_SEND_MAR);
    assert_int_equal(send_mau(mob, 5, 3, z, NULL, 1, NULL, 0, false), CORE_RT_MAU_IGNORED);
    assert_false(core_rt_mobile_router_has(mob, K("M0z"), 5));
    assert_int_equal(core_rt_mobile_router_seq(mob, 5), 1);
    /* the absolute answer: M0y and M0z exist, M0x is withdrawn */
    codec_bytes_t e[] = {{(const uint8_t *)"M0y", 3}, {(const uint8_t *)"M0z", 3}};
    assert_int_equal(send_mau(mob, 5, 3, e, NULL, 2, NULL, 0, true), CORE_RT_MAU_APPLIED);
    assert_false(core_rt_mobile_router_has(mob, K("M0x"), 5));
    assert_true(core_rt_mobile_router_has(mob, K("M0y"), 5));
    assert_true(core_rt_mobile_router_has(mob, K("M0z"), 5));
    assert_int_equal(core_rt_mobile_hint(mob, K("M0z")), -1); /* no hints sent */
    assert_int_equal(core_rt_mobile_router_seq(mob, 5), 3);
    /* in order again, with a delete; another router holds M0y too */
    assert_int_equal(send_mau(mob, 9, 1, e, NULL, 1, NULL, 0, false), CORE_RT_MAU_APPLIED);
    assert_int_equal(core_rt_mobile_routers_of(mob, K("M0y")), 2);
    assert_int_equal(send_mau(mob, 5, 4, NULL, NULL, 0, e, 2, false), CORE_RT_MAU_APPLIED);
    assert_int_equal(core_rt_mobile_routers_of(mob, K("M0y")), 1);
    assert_int_equal(core_rt_mobile_key_count(mob), 1); /* M0x, M0z freed */
    /* router 9 restarts: its keys go */
    core_rt_mobile_flush_router_CT(mob, 9);
    assert_int_equal(core_rt_mobile_key_count(mob), 0);
    assert_int_equal(core_rt_mobile_router_seq(mob, 9), 0);
    core_rt_msg_t not_mau = {.op = CORE_RT_OP_MAR};
    assert_int_equal(core_rt_mobile_mau_CT(mob, 9, &not_mau), CORE_RT_MAU_IGNORED);
    assert_int_equal(core_rt_mobile_mau_CT(mob, 0, &not_mau), CORE_RT_MAU_IGNORED);
    core_rt_mobile_free(mob);
}

static void apply_vector(core_rt_mobile_t *mob, const char *name, uint32_t bit,
                         core_rt_mau_result_t want)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", vectors_dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    uint8_t buf[4096];
    size_t  n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    core_rt_msg_t m;
    assert_int_equal(core_rt_msg_decode(buf, n, &m, NULL), 0);
    assert_int_equal(core_rt_mobile_mau_CT(mob, bit, &m), want);
}

/* qdrouterd's own MAUs: its differential MAU (seq 1) and its absolute one. */
static void test_qdrouterd_maus(void **state)
{
    (void)state;
    core_rt_mobile_t *mob = core_rt_mobile_new();
    apply_vector(mob, "qdr-MAU-diff.bin", 3, CORE_RT_MAU_APPLIED);
    assert_true(core_rt_mobile_router_has(mob, K("M0golden/addr"), 3));
    assert_int_equal(core_rt_mobile_hint(mob, K("M0golden/addr")), 3);
    apply_vector(mob, "qdr-MAU-diff.bin", 3, CORE_RT_MAU_SEND_MAR); /* seen twice */
    apply_vector(mob, "qdr-MAU-abs.bin", 3, CORE_RT_MAU_APPLIED);
    assert_true(core_rt_mobile_router_has(mob, K("M0golden/addr"), 3));
    assert_int_equal(core_rt_mobile_router_seq(mob, 3), 1);
    core_rt_mobile_free(mob);
}

static void test_key_classes(void **state)
{
    (void)state;
    static const char *const yes[] = {"M0a", "Cprefix", "Dprefix", "Epat", "Fpat", "Hedge"};
    static const char *const no[] = {"Lqdhello", "Tqdrouter", "R0/x", "", "Aarea"};
    for (size_t i = 0; i < BASE_ARRAY_LEN(yes); i++)
        assert_true(core_rt_mobile_key_is_synced(yes[i], strlen(yes[i])));
    for (size_t i = 0; i < BASE_ARRAY_LEN(no); i++)
        assert_false(core_rt_mobile_key_is_synced(no[i], strlen(no[i])));
}

int main(int argc, char **argv)
{
    if (argc > 1)
        vectors_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_local_batches),
        cmocka_unit_test(test_remote_sequence),
        cmocka_unit_test(test_qdrouterd_maus),
        cmocka_unit_test(test_key_classes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
