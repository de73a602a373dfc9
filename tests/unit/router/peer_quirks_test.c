/* tests/unit/router/peer_quirks_test.c: stripping delivery annotations (router/peer_quirks.c)
 * from messages that arrive in pieces of every size - header kept, delivery annotations gone
 * in each descriptor form, everything after them byte for byte, bytes that are no message
 * passed as they are - and cutting a range out of a prefix held whole; the rcv-settle-mode
 * asked of a peer (granted, downgraded or refused). */
#include "router/peer_quirks.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

/* header [durable=true], list8 */
static const uint8_t HEADER[] = {0x00, 0x53, 0x70, 0xc0, 0x02, 0x01, 0x41};
/* delivery annotations {sym "k": str "v"}, map8 */
static const uint8_t DA8[] = {0x00, 0x53, 0x71, 0xc1, 0x07, 0x02, 0xa3, 0x01, 'k', 0xa1, 0x01, 'v'};
/* the same as a map32 with an 8-byte ulong descriptor */
static const uint8_t DA32[] = {0x00, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x71, 0xd1, 0, 0, 0, 0x0a,
                               0, 0, 0, 0x02, 0xa3, 0x01, 'k', 0xa1, 0x01, 'v'};
/* the same with its symbol descriptor */
static const uint8_t DASYM[] = {0x00, 0xa3, 29, 'a', 'm', 'q', 'p', ':', 'd', 'e', 'l', 'i', 'v',
                                'e', 'r', 'y', '-', 'a', 'n', 'n', 'o', 't', 'a', 't', 'i', 'o',
                                'n', 's', ':', 'm', 'a', 'p', 0xc1, 0x01, 0x00};
/* message annotations {sym "m": str "x"} and a data body "hello" */
static const uint8_t REST[] = {0x00, 0x53, 0x72, 0xc1, 0x07, 0x02, 0xa3, 0x01, 'm', 0xa1, 0x01,
                               'x', 0x00, 0x53, 0x75, 0xa0, 0x05, 'h', 'e', 'l', 'l', 'o'};

typedef struct buf {
    uint8_t b[512];
    size_t  n;
} buf_t;

static void put(buf_t *m, const uint8_t *p, size_t n)
{
    memcpy(m->b + m->n, p, n);
    m->n += n;
}

/* Run m through a filter in pieces of `step` bytes (0: all at once). */
static buf_t strip(const buf_t *m, size_t step)
{
    buf_t          out = {.n = 0};
    rtr_da_strip_t s;
    rtr_da_strip_init(&s);
    size_t at = 0;
    while (at < m->n) {
        size_t   k = step && m->n - at > step ? step : m->n - at;
        uint8_t *tmp = malloc(k + RTR_DA_STRIP_HELD_MAX);
        size_t   n = rtr_da_strip(&s, m->b + at, k, tmp);
        assert_true(n <= k + RTR_DA_STRIP_HELD_MAX);
        put(&out, tmp, n);
        free(tmp);
        at += k;
    }
    uint8_t tail[RTR_DA_STRIP_HELD_MAX];
    put(&out, tail, rtr_da_strip_end(&s, tail));
    return out;
}

static void check_all_steps(const buf_t *in, const buf_t *want)
{
    for (size_t step = 0; step <= in->n; step++) {
        buf_t got = strip(in, step);
        assert_int_equal(got.n, want->n);
        assert_memory_equal(got.b, want->b, want->n);
    }
}

static void test_da_dropped_header_kept(void **state)
{
    (void)state;
    const uint8_t *forms[] = {DA8, DA32, DASYM};
    size_t         lens[] = {sizeof(DA8), sizeof(DA32), sizeof(DASYM)};
    for (int f = 0; f < 3; f++) {
        for (int with_header = 0; with_header < 2; with_header++) {
            buf_t in = {.n = 0}, want = {.n = 0};
            if (with_header) {
                put(&in, HEADER, sizeof(HEADER));
                put(&want, HEADER, sizeof(HEADER));
            }
            put(&in, forms[f], lens[f]);
            put(&in, REST, sizeof(REST));
            put(&want, REST, sizeof(REST));
            check_all_steps(&in, &want);
        }
    }
}

static void test_no_da_unchanged(void **state)
{
    (void)state;
    buf_t in = {.n = 0};
    put(&in, HEADER, sizeof(HEADER));
    put(&in, REST, sizeof(REST));
    check_all_steps(&in, &in);
    buf_t body_only = {.n = 0};
    put(&body_only, REST + 12, sizeof(REST) - 12);
    check_all_steps(&body_only, &body_only);
    /* a header with list0, then the rest */
    const uint8_t h0[] = {0x00, 0x53, 0x70, 0x45};
    buf_t         in0 = {.n = 0};
    put(&in0, h0, sizeof(h0));
    put(&in0, REST, sizeof(REST));
    check_all_steps(&in0, &in0);
}

static void test_garbage_passes(void **state)
{
    (void)state;
    /* not a section, a symbol descriptor too long to be one the filter acts on, a header
     * whose value is not a list, and a message cut short inside its delivery annotations'
     * start: each passes as it is */
    const uint8_t g1[] = {0x41, 0x00, 0x53, 0x71, 0xc1, 0x01, 0x00};
    const uint8_t g2[] = {0x00, 0xb3, 0x00, 0x00, 0x01, 0x00, 'x', 'y'};
    const uint8_t g3[] = {0x00, 0x53, 0x70, 0xa1, 0x01, 'x', 0x00, 0x53, 0x71, 0xc1, 0x01, 0x00};
    const uint8_t g4[] = {0x00, 0x53, 0x71, 0xd1, 0x00};
    const uint8_t *g[] = {g1, g2, g3, g4};
    size_t         n[] = {sizeof(g1), sizeof(g2), sizeof(g3), sizeof(g4)};
    for (int i = 0; i < 4; i++) {
        buf_t in = {.n = 0};
        put(&in, g[i], n[i]);
        check_all_steps(&in, &in);
    }
}

static void test_cut(void **state)
{
    (void)state;
    const uint8_t msg[10] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
    codec_bytes_t part[2];
    /* in the middle: two parts */
    assert_int_equal(rtr_quirk_cut(msg, 10, msg + 3, 4, part), 2);
    assert_ptr_equal(part[0].ptr, msg);
    assert_int_equal(part[0].len, 3);
    assert_ptr_equal(part[1].ptr, msg + 7);
    assert_int_equal(part[1].len, 3);
    /* at the start, at the end, all of it, none of it */
    assert_int_equal(rtr_quirk_cut(msg, 10, msg, 4, part), 1);
    assert_ptr_equal(part[0].ptr, msg + 4);
    assert_int_equal(part[0].len, 6);
    assert_int_equal(rtr_quirk_cut(msg + 2, 5, msg + 5, 5, part), 1);
    assert_ptr_equal(part[0].ptr, msg + 2);
    assert_int_equal(part[0].len, 3);
    assert_int_equal(rtr_quirk_cut(msg + 3, 4, msg + 2, 6, part), 0);
    assert_int_equal(rtr_quirk_cut(msg, 4, msg + 6, 2, part), 1);
    assert_int_equal(part[0].len, 4);
    assert_int_equal(rtr_quirk_cut(msg, 4, NULL, 0, part), 1);
    assert_int_equal(rtr_quirk_cut(msg, 0, NULL, 0, part), 0);
}

static void test_outcome(void **state)
{
    (void)state;
    assert_int_equal(rtr_quirk_outcome(RTR_QUIRK_NO_MODIFIED, PN_MODIFIED), PN_RELEASED);
    assert_int_equal(rtr_quirk_outcome(RTR_QUIRK_NO_MODIFIED, PN_REJECTED), PN_REJECTED);
    assert_int_equal(rtr_quirk_outcome(RTR_QUIRK_NO_DA, PN_MODIFIED), PN_MODIFIED);
    assert_int_equal(rtr_quirk_outcome(0, PN_ACCEPTED), PN_ACCEPTED);
}

static void test_rcv_mode(void **state)
{
    (void)state;
    int mode = -1;
    /* toward RabbitMQ: a sending client's second is asked as first */
    assert_true(rtr_quirk_rcv_mode(RTR_QUIRK_NO_RCV_SECOND, true, PN_RCV_SECOND, &mode));
    assert_int_equal(mode, PN_RCV_FIRST);
    /* a receiving client's second is refused, mode untouched */
    mode = -1;
    assert_false(rtr_quirk_rcv_mode(RTR_QUIRK_NO_RCV_SECOND, false, PN_RCV_SECOND, &mode));
    assert_int_equal(mode, -1);
    /* first passes both ways; any other peer gets what the client asked */
    assert_true(rtr_quirk_rcv_mode(RTR_QUIRK_NO_RCV_SECOND, false, PN_RCV_FIRST, &mode));
    assert_int_equal(mode, PN_RCV_FIRST);
    assert_true(rtr_quirk_rcv_mode(RTR_QUIRK_NO_DRAIN, false, PN_RCV_SECOND, &mode));
    assert_int_equal(mode, PN_RCV_SECOND);
    assert_true(rtr_quirk_rcv_mode(0, true, PN_RCV_SECOND, &mode));
    assert_int_equal(mode, PN_RCV_SECOND);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_da_dropped_header_kept),
        cmocka_unit_test(test_no_da_unchanged),
        cmocka_unit_test(test_garbage_passes),
        cmocka_unit_test(test_cut),
        cmocka_unit_test(test_outcome),
        cmocka_unit_test(test_rcv_mode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
