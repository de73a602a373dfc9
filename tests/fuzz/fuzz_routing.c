/* tests/fuzz/fuzz_routing.c: libFuzzer target for core/routing/ (the routing-protocol
 * messages of msg.c, and what the link-state database, path computation and mobile-address
 * table make of whatever decodes).
 *
 * Each input is decoded as a whole routing message, and its bytes after the first as the body
 * map of the opcode the first byte names.  Whatever decodes is checked: its views walk to
 * exactly their counts; encoding its values and decoding the result gives the same values;
 * encoding those again gives the same bytes.  Then the message is handed to a fresh link-state
 * database and mobile-address table (as from a neighbour on connection 1), the database ticks
 * and recomputes its routes, and the table applies MAUs.  Any violated check calls abort();
 * a malformed input must only be refused.
 *
 * Built two ways (tests/fuzz/meson.build): with -fsanitize=fuzzer as `fuzz_routing`, and with
 * replay.c as `fuzz_routing_replay`, which runs the corpus and crash inputs in every test run.
 * Seeds: tests/fuzz/routing/corpus holds the messages qdrouterd 1.19 sent in
 * tests/unit/core/routing/vectors/ and a few bodies.
 */
#include "core/base/base.h"
#include "core/routing/lsdb.h"
#include "core/routing/mobile.h"
#include "core/routing/msg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_routing: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static bool bytes_eq(codec_bytes_t a, codec_bytes_t b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

/* A decoded message's lists, materialised. */
typedef struct lists {
    codec_bytes_t *ids;    /* seen / peers / add / exist */
    int64_t       *values; /* peer costs / hints */
    uint32_t       n_ids;  /* entries */
    codec_bytes_t *dels;   /* MAU del */
    uint32_t       n_dels; /* entries */
    bool           hints;  /* MAU hints were usable */
} lists_t;

static uint32_t strs_take(const core_rt_strs_t *l, codec_bytes_t **out)
{
    *out = base_calloc(l->count + 1, sizeof(**out));
    core_rt_iter_t it = core_rt_iter(l);
    uint32_t       n = 0;
    while (n <= l->count && core_rt_strs_next(&it, &(*out)[n]))
        n++;
    CHECK(n == l->count);
    return n;
}

static void lists_take(const core_rt_msg_t *m, lists_t *l)
{
    memset(l, 0, sizeof(*l));
    core_rt_iter_t it;
    switch (m->op) {
    case CORE_RT_OP_HELLO:
        l->n_ids = strs_take(&m->seen, &l->ids);
        break;
    case CORE_RT_OP_LSU:
        l->ids = base_calloc(m->peers.count + 1, sizeof(*l->ids));
        l->values = base_calloc(m->peers.count + 1, sizeof(*l->values));
        it = core_rt_iter(&m->peers);
        while (l->n_ids <= m->peers.count &&
               core_rt_peers_next(&it, &l->ids[l->n_ids], &l->values[l->n_ids]))
            l->n_ids++;
        CHECK(l->n_ids == m->peers.count);
        break;
    case CORE_RT_OP_MAU:
        l->n_ids = strs_take(m->exist.ptr ? &m->exist : &m->add, &l->ids);
        if (!m->exist.ptr)
            l->n_dels = strs_take(&m->del, &l->dels);
        l->values = base_calloc(l->n_ids + 1, sizeof(*l->values));
        l->hints = m->hints.ptr != NULL;
        if (l->hints) {
            CHECK(m->hints.count == l->n_ids);
            it = core_rt_iter(&m->hints);
            uint32_t n = 0;
            while (n <= l->n_ids && core_rt_ints_next(&it, &l->values[n]))
                n++;
            CHECK(n == l->n_ids);
        }
        break;
    default:
        break;
    }
}

static void lists_free(lists_t *l)
{
    BASE_FREE(l->ids);
    BASE_FREE(l->values);
    BASE_FREE(l->dels);
}

static core_rt_out_t out_of(const core_rt_msg_t *m, const lists_t *l)
{
    return (core_rt_out_t){.op = m->op,
                           .to = "amqp:/_topo/0/all/qdrouter",
                           .id = m->id,
                           .area = m->area,
                           .instance = m->instance,
                           .ls_seq = m->ls_seq,
                           .mobile_seq = m->mobile_seq,
                           .have_seq = m->have_seq,
                           .ids = l->ids,
                           .values = l->values,
                           .n_ids = l->n_ids,
                           .dels = l->dels,
                           .n_dels = l->n_dels,
                           .absolute = m->exist.ptr != NULL};
}

/* m was decoded: its values survive encode -> decode, and a second encode is identical. */
static void check_roundtrip(const core_rt_msg_t *m)
{
    lists_t l, l2;
    lists_take(m, &l);
    core_rt_out_t o = out_of(m, &l);
    core_rt_buf_t b = {0}, b2 = {0};
    int           rc = core_rt_msg_encode(&o, &b);
    if (rc != 0) { /* only texts beyond 1 GiB, impossible from a fuzz input */
        CHECK(false);
    }
    core_rt_msg_t m2;
    const char   *why = NULL;
    CHECK(core_rt_msg_decode(b.ptr, b.len, &m2, &why) == 0);
    CHECK(m2.op == m->op && bytes_eq(m2.id, m->id) && m2.pv == CORE_RT_PV);
    CHECK(bytes_eq(m2.area, m->area.ptr ? m->area : (codec_bytes_t){(const uint8_t *)"0", 1}));
    lists_take(&m2, &l2);
    CHECK(l2.n_ids == l.n_ids && l2.n_dels == l.n_dels);
    for (uint32_t i = 0; i < l.n_ids; i++)
        CHECK(bytes_eq(l.ids[i], l2.ids[i]));
    for (uint32_t i = 0; i < l.n_dels; i++)
        CHECK(bytes_eq(l.dels[i], l2.dels[i]));
    switch (m->op) {
    case CORE_RT_OP_HELLO:
        CHECK(m2.instance == m->instance);
        break;
    case CORE_RT_OP_RA:
        CHECK(m2.instance == m->instance && m2.ls_seq == m->ls_seq &&
              m2.mobile_seq == m->mobile_seq);
        break;
    case CORE_RT_OP_LSU:
        CHECK(m2.ls_seq == m->ls_seq && m2.ls_ls_seq == m->ls_seq && bytes_eq(m2.ls_id, m->id));
        for (uint32_t i = 0; i < l.n_ids; i++)
            CHECK(l.values[i] == l2.values[i]);
        break;
    case CORE_RT_OP_MAU:
        CHECK(m2.mobile_seq == m->mobile_seq);
        /* hints are always written: the ones read, or zeros */
        CHECK(l2.hints || l.n_ids == 0);
        for (uint32_t i = 0; i < l.n_ids && l.hints; i++)
            CHECK((int32_t)l.values[i] == l2.values[i]);
        break;
    case CORE_RT_OP_MAR:
        CHECK(m2.have_seq == m->have_seq);
        break;
    default:
        break;
    }
    core_rt_out_t o2 = out_of(&m2, &l2);
    CHECK(core_rt_msg_encode(&o2, &b2) == 0);
    CHECK(b2.len == b.len && memcmp(b2.ptr, b.ptr, b.len) == 0);
    lists_free(&l);
    lists_free(&l2);
    core_rt_buf_fini(&b);
    core_rt_buf_fini(&b2);
}

/* Hand m to a database and a table that have one neighbour, "N", on connection 1. */
static void feed(const core_rt_msg_t *m)
{
    int64_t              now = 1000000;
    core_rt_lsdb_t      *db = core_rt_lsdb_new("ME", 1, CORE_RT_TIMERS_DEFAULT, now);
    core_rt_mobile_t    *mob = core_rt_mobile_new();
    core_rt_actions_t    a;
    static const uint8_t seen_me[] = {0xa1, 2, 'M', 'E'};
    core_rt_msg_t        hello = {.op = CORE_RT_OP_HELLO,
                                  .id = {(const uint8_t *)"N", 1},
                                  .pv = 1,
                                  .instance = 5,
                                  .seen = {seen_me, sizeof(seen_me), 1}};
    core_rt_actions_clear(&a);
    CHECK(core_rt_lsdb_hello_CT(db, &hello, 1, 1, now, &a) == 0);
    core_rt_lsdb_tick_CT(db, now += 1000, &a);
    core_rt_actions_clear(&a);
    switch (m->op) {
    case CORE_RT_OP_HELLO:
        (void)core_rt_lsdb_hello_CT(db, m, 1, 1 + (int64_t)(m->instance & 7), now, &a);
        break;
    case CORE_RT_OP_RA:
        (void)core_rt_lsdb_ra_CT(db, m, now, &a);
        break;
    case CORE_RT_OP_LSU:
        (void)core_rt_lsdb_lsu_CT(db, m, now, &a);
        break;
    case CORE_RT_OP_LSR:
        (void)core_rt_lsdb_lsr_CT(db, m, &a);
        break;
    case CORE_RT_OP_MAU: {
        core_rt_node_t *r = core_rt_lsdb_find(db, m->id.ptr, m->id.len);
        uint32_t        bit = r ? r->maskbit : 1;
        (void)core_rt_mobile_mau_CT(mob, bit, m);
        (void)core_rt_mobile_mau_CT(mob, bit, m); /* twice: in order, then a duplicate */
        core_rt_mobile_flush_router_CT(mob, bit);
        CHECK(core_rt_mobile_key_count(mob) == 0);
        break;
    }
    case CORE_RT_OP_MAR:
        (void)core_rt_mobile_mar_CT(mob, m->have_seq);
        break;
    default:
        break;
    }
    for (int i = 0; i < 3; i++) {
        core_rt_actions_clear(&a);
        core_rt_lsdb_tick_CT(db, now += 1000, &a);
        CHECK(core_rt_lsdb_count(db) < CORE_RT_MAX_ROUTERS);
        for (uint32_t k = 0; k < a.n_lsr; k++)
            CHECK(core_rt_lsdb_node(db, a.lsr[k]) != NULL);
    }
    core_rt_mobile_free(mob);
    core_rt_lsdb_free(db);
}

static void one(int rc, const core_rt_msg_t *m, const char *why)
{
    CHECK(rc == 0 || rc == CORE_RT_NEWER || rc == CODEC_INVALID);
    if (rc == CODEC_INVALID) {
        CHECK(why != NULL && *why);
        return;
    }
    CHECK(m->op > CORE_RT_OP_NONE && m->op < CORE_RT_OP_COUNT);
    if (rc == CORE_RT_NEWER) {
        CHECK(m->pv > CORE_RT_PV);
        return;
    }
    check_roundtrip(m);
    feed(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    core_rt_msg_t m;
    const char   *why = NULL;
    int           rc = core_rt_msg_decode(data, size, &m, &why);
    one(rc, &m, why);
    if (size >= 1) {
        core_rt_op_t op = (core_rt_op_t)(1 + data[0] % (CORE_RT_OP_COUNT - 1));
        why = NULL;
        rc = core_rt_body_decode(op, data + 1, size - 1, &m, &why);
        one(rc, &m, why);
    }
    return 0;
}
