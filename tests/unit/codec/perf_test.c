/* tests/unit/codec/perf_test.c: the performative reader (codec/perf.c) on hand-built
 * performatives: each descriptor and list form, the routing fields' types, and reads of a
 * performative whose bytes stop short (the zero-copy writer reads a transfer's handle before
 * the rest of its frame is in Proton's buffer). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "codec/codec.h"
#include "codec/perf.h"

#include <string.h>

/* attach (0x12): name "ab" (str8), handle 7 (smalluint), role true, then a null and a
 * uint0: list8 */
static const uint8_t ATTACH8[] = {0x00, 0x53, 0x12, 0xc0, 0x0a, 0x05, 0xa1, 0x02, 'a',
                                  'b',  0x52, 0x07, 0x41, 0x40, 0x43};

static void test_list8(void **state)
{
    (void)state;
    codec_perf_t   f;
    const uint8_t *name;
    size_t         len;
    uint32_t       v;
    int            code = 0;
    assert_int_equal(codec_perf_length(ATTACH8, sizeof(ATTACH8), &code), sizeof(ATTACH8));
    assert_int_equal(code, 0x12);
    assert_int_equal(codec_perf_read(&f, ATTACH8, sizeof(ATTACH8)), 0);
    assert_int_equal(f.code, 0x12);
    assert_int_equal(f.len, sizeof(ATTACH8));
    assert_int_equal(f.count, 5);
    assert_true(codec_perf_bytes(&f, 0, &name, &len));
    assert_int_equal(len, 2);
    assert_memory_equal(name, "ab", 2);
    assert_true(codec_perf_uint(&f, 1, &v));
    assert_int_equal(v, 7);
    assert_int_equal(codec_perf_bool(&f, 2), 1);
    assert_true(codec_perf_null(&f, 3));
    assert_int_equal(codec_perf_bool(&f, 3), -1);
    assert_true(codec_perf_uint(&f, 4, &v));
    assert_int_equal(v, 0);
    assert_int_equal(codec_perf_bool(&f, 4), -2); /* a uint is no boolean */
    assert_true(codec_perf_null(&f, 5));           /* past the count */
    assert_true(codec_perf_null(&f, 40));
    assert_false(codec_perf_bytes(&f, 1, &name, &len));
    assert_true(codec_perf_is(&f, 0, 0xa1, 0xb1));
    assert_false(codec_perf_is(&f, 0, 0xa0, 0xb0));
}

/* transfer (0x14) with a ulong descriptor and a list32: handle 300 (uint), delivery-id 1,
 * tag (vbin8 "t"), then fields 3-4 null, more = boolean 0x56 true; then 2 payload bytes */
static const uint8_t TRANSFER32[] = {
    0x00, 0x80, 0, 0, 0, 0, 0, 0, 0, 0x14, /* descriptor */
    0xd0, 0, 0, 0, 0x12, 0, 0, 0, 6,       /* list32: size 18, count 6 */
    0x70, 0, 0, 0x01, 0x2c,                /* handle 300 */
    0x52, 0x01,                            /* delivery-id 1 */
    0xa0, 0x01, 't',                       /* tag */
    0x40, 0x40,                            /* format, settled */
    0x56, 0x01,                            /* more */
    'x', 'y'};                             /* payload */

static void test_list32_and_partial(void **state)
{
    (void)state;
    codec_perf_t f;
    uint32_t     v;
    size_t       perf_len = sizeof(TRANSFER32) - 2;
    assert_int_equal(codec_perf_read(&f, TRANSFER32, sizeof(TRANSFER32)), 0);
    assert_int_equal(f.code, 0x14);
    assert_int_equal(f.len, perf_len); /* the payload is not the performative's */
    assert_int_equal(f.count, 6);
    assert_true(codec_perf_uint(&f, 0, &v));
    assert_int_equal(v, 300);
    assert_true(codec_perf_uint(&f, 1, &v));
    assert_int_equal(v, 1);
    assert_true(codec_perf_is(&f, 2, 0xa0, 0xb0));
    assert_int_equal(codec_perf_bool(&f, 5), 1);
    /* stopping short: too short to tell, then every field that ends within the bytes */
    for (size_t n = 0; n <= perf_len; n++) {
        int rc = codec_perf_read(&f, TRANSFER32, n);
        if (n < 19) {
            assert_int_equal(rc, CODEC_PARTIAL);
            continue;
        }
        assert_int_equal(rc, 0);
        assert_int_equal(f.len, perf_len);
        assert_int_equal(codec_perf_uint(&f, 0, &v), n >= 24);
        assert_int_equal(codec_perf_uint(&f, 1, &v), n >= 26);
        assert_int_equal(codec_perf_bool(&f, 5), n >= perf_len ? 1 : -1);
    }
}

static void test_refused(void **state)
{
    (void)state;
    codec_perf_t  f;
    int           code;
    const uint8_t not_described[] = {0x45};
    const uint8_t not_list[] = {0x00, 0x53, 0x10, 0xa1, 0x00};
    const uint8_t big_ulong[] = {0x00, 0x80, 0, 0, 0, 1, 0, 0, 0, 0x10, 0x45};
    const uint8_t list0[] = {0x00, 0x53, 0x17, 0x45};
    /* a field running past its list, all of it given: malformed */
    const uint8_t overrun[] = {0x00, 0x53, 0x16, 0xc0, 0x03, 0x01, 0x70, 0x00, 0, 0, 0, 0};
    assert_int_equal(codec_perf_read(&f, not_described, 1), CODEC_INVALID);
    assert_int_equal(codec_perf_read(&f, not_list, sizeof(not_list)), CODEC_INVALID);
    assert_int_equal(codec_perf_length(big_ulong, sizeof(big_ulong), &code), CODEC_INVALID);
    assert_int_equal(codec_perf_read(&f, list0, sizeof(list0)), 0);
    assert_int_equal(f.count, 0);
    assert_true(codec_perf_null(&f, 0));
    assert_int_equal(codec_perf_read(&f, overrun, sizeof(overrun)), CODEC_INVALID);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list8),
        cmocka_unit_test(test_list32_and_partial),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
