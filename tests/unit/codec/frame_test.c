/* tests/unit/codec/frame_test.c: the frame guard (codec/frame.c) on hand-built byte streams,
 * fed whole and one byte at a time; and Proton's fuzz crash inputs, which must all be refused
 * or left incomplete, never passed as complete valid frames that crash Proton. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "codec/codec.h"
#include "codec/frame.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The guard's memory: realloc that aborts on failure; counts what is held, so tests can check
 * that the guard gives everything back. */
static long mem_live;

static void *test_mem(void *p, size_t n)
{
    if (n == 0) {
        if (p)
            mem_live--;
        free(p);
        return NULL;
    }
    if (!p)
        mem_live++;
    void *q = realloc(p, n);
    assert_non_null(q);
    return q;
}

typedef struct stream {
    uint8_t b[8192];
    size_t  n;
} stream_t;

static void put(stream_t *s, const void *p, size_t n)
{
    if (n == 0)
        return; /* p may be NULL then, which memcpy may not be given */
    memcpy(s->b + s->n, p, n);
    s->n += n;
}

static const uint8_t AMQP_HDR[8] = {'A', 'M', 'Q', 'P', 0, 1, 0, 0};
static const uint8_t SASL_HDR[8] = {'A', 'M', 'Q', 'P', 3, 1, 0, 0};

/* A frame of `type` around body[len]. */
static void frame(stream_t *s, uint8_t type, const void *body, size_t len)
{
    uint32_t size = (uint32_t)(8 + len);
    uint8_t h[8] = {(uint8_t)(size >> 24), (uint8_t)(size >> 16), (uint8_t)(size >> 8),
                    (uint8_t)size, 2, type, 0, 0};
    put(s, h, 8);
    put(s, body, len);
}

#define BYTES(...) ((const uint8_t[]){__VA_ARGS__}), sizeof((const uint8_t[]){__VA_ARGS__})

/* open: list8 [container-id "x"] */
#define OPEN_BODY 0x00, 0x53, 0x10, 0xc0, 0x04, 0x01, 0xa1, 0x01, 'x'
/* begin: [null, uint0 next-outgoing-id, uint 100 window, uint 100 window] */
#define BEGIN_BODY 0x00, 0x53, 0x11, 0xc0, 0x07, 0x04, 0x40, 0x43, 0x52, 100, 0x52, 100
/* attach: [name "l", handle 0, role false] */
#define ATTACH_BODY 0x00, 0x53, 0x12, 0xc0, 0x06, 0x03, 0xa1, 0x01, 'l', 0x43, 0x42

static int feed_whole(const stream_t *s)
{
    codec_guard_t g;
    codec_guard_init(&g, 16384, test_mem);
    int rc = codec_guard_feed(&g, s->b, s->n);
    codec_guard_fini(&g);
    assert_int_equal(mem_live, 0);
    return rc;
}

static int feed_bytewise(const stream_t *s)
{
    codec_guard_t g;
    codec_guard_init(&g, 16384, test_mem);
    int rc = 0;
    for (size_t i = 0; i < s->n && rc == 0; i++)
        rc = codec_guard_feed(&g, s->b + i, 1) != 0 ? CODEC_INVALID : 0;
    codec_guard_fini(&g);
    assert_int_equal(mem_live, 0);
    return rc;
}

static void expect(const stream_t *s, int want)
{
    assert_int_equal(feed_whole(s), want);
    assert_int_equal(feed_bytewise(s), want);
}

static void session_start(stream_t *s)
{
    s->n = 0;
    put(s, AMQP_HDR, 8);
    frame(s, 0, BYTES(OPEN_BODY));
    frame(s, 0, BYTES(BEGIN_BODY));
    frame(s, 0, BYTES(ATTACH_BODY));
}

static void test_good_session(void **state)
{
    (void)state;
    stream_t s;
    session_start(&s);
    frame(&s, 0, NULL, 0); /* heartbeat */
    /* transfer [handle 0, delivery-id 0, tag b"1"] + payload */
    frame(&s, 0,
          BYTES(0x00, 0x53, 0x14, 0xc0, 0x06, 0x03, 0x43, 0x43, 0xa0, 0x01, '1', 0x00, 0x53,
                0x77, 0xa1, 0x02, 'h', 'i'));
    /* close with no fields */
    frame(&s, 0, BYTES(0x00, 0x53, 0x18, 0x45));
    expect(&s, 0);
}

static void test_sasl_then_amqp(void **state)
{
    (void)state;
    stream_t s = {.n = 0};
    put(&s, SASL_HDR, 8);
    /* sasl-init [mechanism :ANONYMOUS] */
    frame(&s, 1,
          BYTES(0x00, 0x53, 0x41, 0xc0, 0x0c, 0x01, 0xa3, 0x09, 'A', 'N', 'O', 'N', 'Y', 'M',
                'O', 'U', 'S'));
    put(&s, AMQP_HDR, 8);
    frame(&s, 0, BYTES(OPEN_BODY));
    expect(&s, 0);
}

static void test_bad_frames(void **state)
{
    (void)state;
    stream_t s;
    /* open whose list claims more bytes than the frame has */
    s.n = 0;
    put(&s, AMQP_HDR, 8);
    frame(&s, 0, BYTES(0x00, 0x53, 0x10, 0xc0, 0xff, 0x05));
    expect(&s, CODEC_INVALID);
    /* not a performative (amqp-value descriptor) */
    s.n = 0;
    put(&s, AMQP_HDR, 8);
    frame(&s, 0, BYTES(OPEN_BODY));
    frame(&s, 0, BYTES(0x00, 0x53, 0x77, 0x40));
    expect(&s, CODEC_INVALID);
    /* unknown type code inside the open */
    s.n = 0;
    put(&s, AMQP_HDR, 8);
    frame(&s, 0, BYTES(0x00, 0x53, 0x10, 0xc0, 0x03, 0x02, 0xa1, 0x30));
    expect(&s, CODEC_INVALID);
    /* open without container-id */
    s.n = 0;
    put(&s, AMQP_HDR, 8);
    frame(&s, 0, BYTES(0x00, 0x53, 0x10, 0x45));
    expect(&s, CODEC_INVALID);
    /* frame smaller than its header, huge frame, bad doff, SASL frame in AMQP layer */
    s.n = 0;
    put(&s, AMQP_HDR, 8);
    put(&s, BYTES(0, 0, 0, 4, 2, 0, 0, 0));
    expect(&s, CODEC_INVALID);
    s.n = 0;
    put(&s, AMQP_HDR, 8);
    put(&s, BYTES(0xff, 0xff, 0xff, 0xf0, 2, 0, 0, 0));
    expect(&s, CODEC_INVALID);
    s.n = 0;
    put(&s, AMQP_HDR, 8);
    put(&s, BYTES(0, 0, 0, 8, 1, 0, 0, 0));
    expect(&s, CODEC_INVALID);
    s.n = 0;
    put(&s, AMQP_HDR, 8);
    frame(&s, 1, BYTES(OPEN_BODY));
    expect(&s, CODEC_INVALID);
    /* payload after a non-transfer */
    s.n = 0;
    put(&s, AMQP_HDR, 8);
    frame(&s, 0, BYTES(OPEN_BODY, 0x40));
    expect(&s, CODEC_INVALID);
}

static void test_transfer_without_delivery_id(void **state)
{
    (void)state;
    stream_t s;
    /* PROTON-2853: a transfer starting a multi-frame delivery without a delivery-id */
    session_start(&s);
    frame(&s, 0, BYTES(0x00, 0x53, 0x14, 0xc0, 0x07, 0x06, 0x43, 0x40, 0x40, 0x40, 0x40, 0x41));
    expect(&s, CODEC_INVALID);
    /* with a delivery-id and more=true, a continuation may omit it */
    session_start(&s);
    frame(&s, 0, BYTES(0x00, 0x53, 0x14, 0xc0, 0x09, 0x06, 0x43, 0x43, 0xa0, 0x01, '1', 0x40,
                       0x40, 0x41, 'a'));
    frame(&s, 0, BYTES(0x00, 0x53, 0x14, 0xc0, 0x07, 0x06, 0x43, 0x40, 0x40, 0x40, 0x40, 0x42,
                       'b'));
    expect(&s, 0);
    /* ...but once the delivery ended, the next one needs a delivery-id again */
    frame(&s, 0, BYTES(0x00, 0x53, 0x14, 0xc0, 0x07, 0x06, 0x43, 0x40, 0x40, 0x40, 0x40, 0x42,
                       'c'));
    expect(&s, CODEC_INVALID);
}

/* A frame of `type` on `channel` around body[len]. */
static void frame_on(stream_t *s, uint16_t channel, const void *body, size_t len)
{
    uint32_t size = (uint32_t)(8 + len);
    uint8_t h[8] = {(uint8_t)(size >> 24), (uint8_t)(size >> 16), (uint8_t)(size >> 8),
                    (uint8_t)size, 2, 0, (uint8_t)(channel >> 8), (uint8_t)channel};
    put(s, h, 8);
    put(s, body, len);
}

/* transfer [handle 0, delivery-id 0, tag "1", null, null, more true] + 'a' */
#define FIRST_MORE 0x00, 0x53, 0x14, 0xc0, 0x09, 0x06, 0x43, 0x43, 0xa0, 0x01, '1', 0x40, 0x40, \
                   0x41, 'a'
/* transfer [handle 0, null, null, null, null, more M] + 'b' */
#define NEXT(M) 0x00, 0x53, 0x14, 0xc0, 0x07, 0x06, 0x43, 0x40, 0x40, 0x40, 0x40, (M), 'b'

static void test_deliveries_in_progress_are_per_link(void **state)
{
    (void)state;
    stream_t s;
    /* two sessions, each with a link on handle 0, interleave multi-frame deliveries: the
     * one that ends first does not end the other's */
    session_start(&s);
    frame_on(&s, 1, BYTES(BEGIN_BODY));
    frame_on(&s, 1, BYTES(ATTACH_BODY));
    frame_on(&s, 0, BYTES(FIRST_MORE));
    frame_on(&s, 1, BYTES(FIRST_MORE));
    frame_on(&s, 1, BYTES(NEXT(0x42)));
    frame_on(&s, 0, BYTES(NEXT(0x41)));
    frame_on(&s, 0, BYTES(NEXT(0x42)));
    expect(&s, 0);
    /* ...and a delivery in progress on channel 0 lets no first transfer without a
     * delivery-id through on channel 1 */
    session_start(&s);
    frame_on(&s, 1, BYTES(BEGIN_BODY));
    frame_on(&s, 1, BYTES(ATTACH_BODY));
    frame_on(&s, 0, BYTES(FIRST_MORE));
    frame_on(&s, 1, BYTES(NEXT(0x41)));
    expect(&s, CODEC_INVALID);
    /* a detach ends its link's delivery in progress: a link attached again on the handle
     * needs a delivery-id on its first transfer */
    session_start(&s);
    frame_on(&s, 0, BYTES(FIRST_MORE));
    frame_on(&s, 0, BYTES(0x00, 0x53, 0x16, 0xc0, 0x02, 0x01, 0x43)); /* detach [handle 0] */
    frame_on(&s, 0, BYTES(ATTACH_BODY));
    frame_on(&s, 0, BYTES(NEXT(0x42)));
    expect(&s, CODEC_INVALID);
    /* so does an end, for every link of its session */
    session_start(&s);
    frame_on(&s, 0, BYTES(FIRST_MORE));
    frame_on(&s, 0, BYTES(0x00, 0x53, 0x17, 0x45)); /* end */
    frame_on(&s, 0, BYTES(BEGIN_BODY));
    frame_on(&s, 0, BYTES(ATTACH_BODY));
    frame_on(&s, 0, BYTES(NEXT(0x42)));
    expect(&s, CODEC_INVALID);
}

static void test_unknown_header_passes_to_proton(void **state)
{
    (void)state;
    stream_t s = {.n = 0};
    put(&s, BYTES('A', 'M', 'Q', 'P', 5, 1, 0, 0));
    put(&s, BYTES(0xff, 0xff, 0xff, 0xff));
    expect(&s, 0); /* Proton answers with its own header and closes */
}

static void test_value_check(void **state)
{
    (void)state;
    /* map8 with an odd count, array of uints, nested list, described value */
    assert_int_equal(codec_value_check(BYTES(0xc1, 0x02, 0x01, 0x40)), CODEC_INVALID);
    assert_int_equal(codec_value_check(BYTES(0xe0, 0x06, 0x02, 0x52, 1, 2, 3, 4)),
                     CODEC_INVALID);
    assert_int_equal(codec_value_check(BYTES(0xe0, 0x05, 0x03, 0x52, 1, 2, 3)), 7);
    assert_int_equal(codec_value_check(BYTES(0xc0, 0x04, 0x01, 0xc0, 0x01, 0x00)), 6);
    assert_int_equal(codec_value_check(BYTES(0x00, 0x53, 0x01, 0x40)), 4);
    assert_int_equal(codec_value_check(BYTES(0x00, 0x00, 0x53, 0x01, 0x40)), CODEC_INVALID);
    assert_int_equal(codec_value_check(BYTES(0xa1, 0x05, 'a')), CODEC_INVALID);
}

/* The open of issue 11: outgoing-locales is an array32 that claims 2^32-1 nulls (zero-width
 * elements) in a 31-byte frame.  The guard once walked every claimed element (18 s). */
#define HOSTILE_OPEN_BODY                                                                          \
    0x00, 0x53, 0x10, 0xc0, 0x12, 0x06, 0xa1, 0x01, 'x', 0x40, 0x40, 0x40, 0x40, 0xf0, 0x00, 0x00, \
        0x00, 0x05, 0xff, 0xff, 0xff, 0xff, 0x40

static const char *guard_why(const stream_t *s)
{
    codec_guard_t g;
    codec_guard_init(&g, 16384, test_mem);
    const char *why = codec_guard_feed(&g, s->b, s->n) == 0 ? NULL : g.why;
    codec_guard_fini(&g);
    assert_int_equal(mem_live, 0);
    return why;
}

/* An array8 of an array8 of ... (`levels` arrays) of one null, at b; returns its length. */
static size_t nested_arrays(uint8_t *b, size_t levels)
{
    b[0] = 0xe0;
    for (size_t i = 0; i < levels; i++) {
        b[1 + 3 * i] = (uint8_t)(2 + 3 * (levels - 1 - i)); /* count, ctor, the deeper levels */
        b[2 + 3 * i] = 1;
        b[3 + 3 * i] = i == levels - 1 ? 0x40 : 0xe0;
    }
    return 1 + 3 * levels;
}

/* A value holds at most one value per byte of its encoding, whatever its counts claim. */
static void test_counts_bounded_by_bytes(void **state)
{
    (void)state;
    stream_t s;
    s.n = 0;
    put(&s, AMQP_HDR, 8);
    frame(&s, 0, BYTES(HOSTILE_OPEN_BODY));
    assert_int_equal(s.n, 8 + 31);
    expect(&s, CODEC_INVALID);
    assert_string_equal(guard_why(&s), "a performative claims more values than it has bytes");

    /* zero-width elements (null, true, uint0, list0): 2^32-1, 255, 5 claimed in 4 bytes */
    assert_int_equal(codec_value_check(BYTES(0xf0, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xff, 0x40)),
                     CODEC_INVALID);
    assert_int_equal(codec_value_check(BYTES(0xe0, 0x02, 0xff, 0x41)), CODEC_INVALID);
    assert_int_equal(codec_value_check(BYTES(0xe0, 0x02, 0x05, 0x43)), CODEC_INVALID);
    assert_int_equal(codec_value_check(BYTES(0xe0, 0x02, 0x05, 0x45)), CODEC_INVALID);
    /* ...as many as there are bytes is fine: two nulls in 4 bytes, one true in 4 */
    assert_int_equal(codec_value_check(BYTES(0xe0, 0x02, 0x02, 0x40)), 4);
    assert_int_equal(codec_value_check(BYTES(0xe0, 0x02, 0x01, 0x41)), 4);
    assert_int_equal(codec_value_check(BYTES(0xe0, 0x02, 0x00, 0x40)), 4);
    /* described zero-width elements: the descriptor is encoded once for them all */
    assert_int_equal(
        codec_value_check(BYTES(0xf0, 0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff, 0x00, 0x53, 0x01, 0x40)),
        CODEC_INVALID);
    assert_int_equal(codec_value_check(BYTES(0xe0, 0x06, 0xff, 0x00, 0xa3, 0x01, 'd', 0x45)),
                     CODEC_INVALID);
    /* the scanner's rule for an array it meets (codec.c) is the same: 5 described trues in 7
     * bytes (the array, the descriptor, 5 elements), not 6 */
    assert_int_equal(codec_value_check(BYTES(0xe0, 0x05, 0x05, 0x00, 0x53, 0x01, 0x41)), 7);
    assert_int_equal(codec_value_check(BYTES(0xe0, 0x05, 0x06, 0x00, 0x53, 0x01, 0x41)),
                     CODEC_INVALID);
    /* nested arrays: an array8 of arrays that each claim 255 nulls in 3 bytes */
    assert_int_equal(codec_value_check(BYTES(0xe0, 0x08, 0x02, 0xe0, 0x02, 0xff, 0x40, 0x02,
                                             0xff, 0x40)),
                     CODEC_INVALID);
    /* ...and of empty arrays, which are paid for (3 bytes each) */
    assert_int_equal(codec_value_check(BYTES(0xe0, 0x08, 0x02, 0xe0, 0x02, 0x00, 0x40, 0x02,
                                             0x00, 0x40)),
                     10);
    /* nested arrays whose outer count claims 2^32-1 elements with one present */
    assert_int_equal(codec_value_check(BYTES(0xf0, 0, 0, 0, 8, 0xff, 0xff, 0xff, 0xff, 0xe0,
                                             0x02, 0x00, 0x40)),
                     CODEC_INVALID);
    /* lists and maps with huge counts and tiny sizes */
    assert_int_equal(codec_value_check(BYTES(0xd0, 0, 0, 0, 4, 0xff, 0xff, 0xff, 0xff)),
                     CODEC_INVALID);
    assert_int_equal(codec_value_check(BYTES(0xd1, 0, 0, 0, 5, 0xff, 0xff, 0xff, 0xfe, 0x40)),
                     CODEC_INVALID);
    assert_int_equal(codec_value_check(BYTES(0xc0, 0x01, 0xff)), CODEC_INVALID);
    /* a list of zero-width values carries a code per element: paid for */
    assert_int_equal(codec_value_check(BYTES(0xc0, 0x04, 0x03, 0x40, 0x41, 0x45)), 6);
    /* described values nested past the depth limit */
    uint8_t deep[2 * 40 + 1];
    for (size_t i = 0; i < 40; i++) {
        deep[2 * i] = 0x00;
        deep[2 * i + 1] = 0x44;
    }
    deep[80] = 0x40;
    assert_int_equal(codec_value_check(deep, sizeof(deep)), CODEC_INVALID);
    assert_int_equal(codec_value_check(deep + 60, sizeof(deep) - 60), 21);
    /* arrays of arrays, each level one element: fine 10 deep, refused 40 deep */
    uint8_t arrs[1 + 3 * 40];
    assert_int_equal(codec_value_check(arrs, nested_arrays(arrs, 10)), 1 + 3 * 10);
    assert_int_equal(codec_value_check(arrs, nested_arrays(arrs, 40)), CODEC_INVALID);

    /* a performative over the budget in a SASL frame, and inside an attach's source */
    s.n = 0;
    put(&s, SASL_HDR, 8);
    frame(&s, 1,
          BYTES(0x00, 0x53, 0x41, 0xc0, 0x0c, 0x02, 0xa3, 0x05, 'P', 'L', 'A', 'I', 'N', 0xe0,
                0x02, 0xff, 0x40));
    expect(&s, CODEC_INVALID);
    session_start(&s);
    frame(&s, 0, BYTES(BEGIN_BODY));
    frame(&s, 0,
          BYTES(0x00, 0x53, 0x12, 0xc0, 0x18, 0x06, 0xa1, 0x01, 'l', 0x43, 0x41, 0x40, 0x40, 0x00,
                0x53, 0x28, 0xc0, 0x0b, 0x01, 0xf0, 0, 0, 0, 5, 0, 1, 0, 0, 0x45));
    expect(&s, CODEC_INVALID);
}

/* What Proton-Python clients send (recorded sessions of the conn fuzz corpus: opens with
 * properties and capabilities, attaches with outcome and capability arrays, dispositions with
 * error maps, multi-frame transfers) passes the guard untouched. */
static void test_recorded_sessions_pass(void **state)
{
    (void)state;
    static const char *names[] = {
        "session-anonymous-and-dynamic", "session-drain-and-detach",
        "session-large-multiframe",      "session-multicast-presettled",
        "session-no-sasl",               "session-send-receive-outcomes",
        "session-sessions-and-links",    "session-too-large",
    };
    static uint8_t data[1 << 21];
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", CONN_CORPUS_DIR, names[i]);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        size_t n = fread(data, 1, sizeof(data), f);
        fclose(f);
        assert_true(n > 0 && n < sizeof(data));
        codec_guard_t g;
        codec_guard_init(&g, 1u << 20, test_mem);
        int rc = codec_guard_feed(&g, data, n);
        if (rc != 0)
            print_message("%s: %s\n", names[i], g.why);
        assert_int_equal(rc, 0);
        assert_true(g.frames > 3);
        codec_guard_fini(&g);
        assert_int_equal(mem_live, 0);
    }
}

/* An attach whose name is `name_len` bytes (str32 in a list32): a performative longer than
 * the guard's inline room. */
static void long_attach(stream_t *s, uint32_t name_len)
{
    uint8_t       b[4096];
    size_t        n = 0;
    uint32_t      list_size = 4 + 5 + name_len + 3; /* count, str32 header + name, handle, role */
    const uint8_t head[] = {0x00,
                            0x53,
                            0x12,
                            0xd0,
                            (uint8_t)(list_size >> 24),
                            (uint8_t)(list_size >> 16),
                            (uint8_t)(list_size >> 8),
                            (uint8_t)list_size,
                            0,
                            0,
                            0,
                            3,
                            0xb1,
                            (uint8_t)(name_len >> 24),
                            (uint8_t)(name_len >> 16),
                            (uint8_t)(name_len >> 8),
                            (uint8_t)name_len};
    memcpy(b, head, sizeof(head));
    n = sizeof(head);
    memset(b + n, 'n', name_len);
    n += name_len;
    b[n++] = 0x52; /* handle smalluint 1 */
    b[n++] = 1;
    b[n++] = 0x42; /* role false */
    frame(s, 0, b, n);
}

/* Memory grows with use: nothing held while idle or for short performatives, a long one held
 * only while it is gathered (and only as much as arrived), deliveries in progress only while
 * they are. */
static void test_memory_grows_with_use(void **state)
{
    (void)state;
    codec_guard_t g;
    stream_t      s;
    session_start(&s);
    codec_guard_init(&g, 16384, test_mem);
    assert_int_equal(codec_guard_feed(&g, s.b, s.n), 0);
    assert_int_equal(codec_guard_mem_bytes(&g), 0);
    assert_int_equal(mem_live, 0);

    /* a 2000-byte attach fed a byte at a time: memory follows what arrived */
    s.n = 0;
    long_attach(&s, 2000);
    size_t most = 0;
    for (size_t i = 0; i < s.n; i++) {
        if (codec_guard_feed(&g, s.b + i, 1) != 0)
            fail_msg("byte %zu: %s", i, g.why);
        size_t held = codec_guard_mem_bytes(&g);
        if (held > most)
            most = held;
        if (i == 300)
            assert_true(held <= 1024); /* 300 bytes in: not the whole performative yet */
    }
    assert_true(most >= 2000 && most <= 2100);      /* capped at the performative's length */
    assert_int_equal(codec_guard_mem_bytes(&g), 0); /* given back once checked */
    assert_int_equal(mem_live, 0);

    /* a frame that claims a 16000-byte performative, then trickles 200 bytes of it */
    s.n = 0;
    const uint32_t size = 16000, list = size - 8 - 3 - 5;
    put(&s, BYTES(0, 0, 0x3e, 0x80, 2, 0, 0, 0)); /* frame of 16000 bytes */
    put(&s, BYTES(0x00, 0x53, 0x12, 0xd0, (uint8_t)(list >> 24), (uint8_t)(list >> 16),
                  (uint8_t)(list >> 8), (uint8_t)list, 0, 0, 0, 3, 0xb1, 0, 0, 0x3e, 0x50));
    memset(s.b + s.n, 'x', 200);
    s.n += 200;
    assert_int_equal(codec_guard_feed(&g, s.b, s.n), 0);
    assert_true(codec_guard_mem_bytes(&g) <= 512);

    /* deliveries in progress on 20 handles: 8 bytes each (doubling), none once they end */
    codec_guard_fini(&g);
    assert_int_equal(mem_live, 0);
    codec_guard_init(&g, 16384, test_mem);
    session_start(&s);
    assert_int_equal(codec_guard_feed(&g, s.b, s.n), 0);
    for (int pass = 0; pass < 2; pass++) {
        for (uint8_t h = 0; h < 20; h++) {
            s.n = 0;
            /* transfer [handle h, delivery-id h, tag, format, settled, more] + payload */
            frame(&s, 0,
                  BYTES(0x00, 0x53, 0x14, 0xc0, 0x0b, 0x06, 0x52, h, 0x52, h, 0xa0, 0x01, '1', 0x40,
                        0x40, pass ? 0x42 : 0x41, 'p'));
            assert_int_equal(codec_guard_feed(&g, s.b, s.n), 0);
        }
        if (!pass)
            assert_int_equal(codec_guard_mem_bytes(&g), 32 * sizeof(uint64_t));
    }
    assert_int_equal(g.n_inprog, 0);
    assert_int_equal(codec_guard_mem_bytes(&g), 0);
    assert_int_equal(mem_live, 0);
    codec_guard_fini(&g);
}

/* Every Proton fuzz crash input: the guard must refuse it or see it end mid-frame. */
static void test_proton_crash_inputs(void **state)
{
    (void)state;
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s", PROTON_FUZZ_DIR "/crashes");
    DIR *d = opendir(dir);
    if (!d) {
        print_message("no %s here; skipped\n", dir);
        skip();
    }
    struct dirent *e;
    int files = 0, refused = 0;
    static uint8_t data[1 << 20];
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[2048];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        if (!f)
            continue;
        size_t n = fread(data, 1, sizeof(data), f);
        fclose(f);
        codec_guard_t g;
        codec_guard_init(&g, 16384, test_mem);
        files++;
        if (codec_guard_feed(&g, data, n) != 0)
            refused++;
        if (strcmp(e->d_name, "crash-20240918") == 0)
            assert_int_equal(g.failed, true);
        assert_true(codec_guard_mem_bytes(&g) <= 16384 + sizeof(uint64_t) * CODEC_GUARD_MAX_INPROG);
        codec_guard_fini(&g);
        assert_int_equal(mem_live, 0);
    }
    closedir(d);
    print_message("%d crash inputs, %d refused by the guard\n", files, refused);
    assert_true(files > 0);
}


/* ---- split mode (the zero-copy input) ---- */

/* What a split-mode guard handed on: Proton's stream (a transfer's frame put in place once
 * its payload is all there, as router/zin.c does), the payloads, and the link reports. */
typedef struct split_rec {
    stream_t proton;          /* bytes for Proton, in order */
    stream_t payload;         /* every payload byte, in order */
    uint8_t  held[64];        /* the transfer frame waiting for its payload */
    size_t   held_len;
    uint32_t left;            /* its payload bytes still to come */
    int      n_transfer;
    int      n_more;          /* transfers with `more` */
    int      n_aborted;
    uint32_t lens[16];        /* each transfer's payload length */
    int      n_attach;
    int      n_detach;
    int      n_end;
    bool     refuse_attach;
} split_rec_t;

static void rec_proton(void *ctx, const uint8_t *p, size_t n)
{
    put(&((split_rec_t *)ctx)->proton, p, n);
}

static int rec_attach(void *ctx, uint16_t channel, uint32_t handle, bool role,
                      const uint8_t *name, size_t len, const char **why)
{
    split_rec_t *r = ctx;
    assert_int_equal(channel, 0);
    assert_int_equal(handle, 0);
    assert_false(role);
    assert_int_equal(len, 1);
    assert_int_equal(name[0], 'l');
    r->n_attach++;
    if (r->refuse_attach) {
        *why = "refused by the test";
        return -1;
    }
    return 0;
}

static void rec_detach(void *ctx, uint16_t channel, uint32_t handle)
{
    (void)channel;
    assert_int_equal(handle, 0);
    ((split_rec_t *)ctx)->n_detach++;
}

static void rec_end(void *ctx, uint16_t channel)
{
    (void)channel;
    ((split_rec_t *)ctx)->n_end++;
}

static bool rec_transfer(void *ctx, uint16_t channel, uint32_t handle, bool id_present,
                         uint32_t id, bool more, bool aborted, uint32_t len,
                         const uint8_t hdr[8], const uint8_t *perf, uint32_t perf_len)
{
    split_rec_t *r = ctx;
    (void)channel;
    (void)id_present;
    (void)id;
    assert_int_equal(handle, 0);
    assert_int_equal(r->left, 0);
    assert_true(8 + perf_len <= sizeof(r->held));
    memcpy(r->held, hdr, 8);
    memcpy(r->held + 8, perf, perf_len);
    r->held_len = 8 + perf_len;
    r->lens[r->n_transfer++] = len;
    r->n_more += more;
    r->n_aborted += aborted;
    r->left = len;
    if (len == 0)
        put(&r->proton, r->held, r->held_len);
    return false;
}

static void rec_payload(void *ctx, const uint8_t *p, size_t n)
{
    split_rec_t *r = ctx;
    assert_true(n > 0 && n <= r->left);
    put(&r->payload, p, n);
    r->left -= (uint32_t)n;
    if (r->left == 0)
        put(&r->proton, r->held, r->held_len);
}

static int split_feed(const stream_t *s, split_rec_t *r, bool bytewise)
{
    bool refuse = r->refuse_attach;
    memset(r, 0, sizeof(*r));
    r->refuse_attach = refuse;
    codec_guard_sink_t sink = {.ctx = r, .proton = rec_proton, .attach = rec_attach,
                               .detach = rec_detach, .end = rec_end,
                               .transfer = rec_transfer, .payload = rec_payload};
    codec_guard_t g;
    codec_guard_init(&g, 16384, test_mem);
    codec_guard_set_sink(&g, &sink);
    int rc = 0;
    if (bytewise)
        for (size_t i = 0; i < s->n && rc == 0; i++)
            rc = codec_guard_feed(&g, s->b + i, 1);
    else
        rc = codec_guard_feed(&g, s->b, s->n);
    codec_guard_fini(&g);
    assert_int_equal(mem_live, 0);
    return rc;
}

/* A frame whose size field says 8 + body but with an extended header of `ext` words. */
static void frame_ext(stream_t *s, uint8_t type, int ext, const void *body, size_t len)
{
    uint32_t size = (uint32_t)(8 + 4 * ext + len);
    uint8_t h[8] = {(uint8_t)(size >> 24), (uint8_t)(size >> 16), (uint8_t)(size >> 8),
                    (uint8_t)size, (uint8_t)(2 + ext), type, 0, 0};
    put(s, h, 8);
    for (int i = 0; i < 4 * ext; i++)
        put(s, BYTES(0xee));
    put(s, body, len);
}

#define XFER_FIRST 0x00, 0x53, 0x14, 0xc0, 0x09, 0x06, 0x43, 0x43, 0xa0, 0x01, '1', 0x40, 0x40, \
                   0x41 /* [handle 0, id 0, tag "1", null, null, more true] */
#define XFER_NEXT  0x00, 0x53, 0x14, 0xc0, 0x07, 0x06, 0x43, 0x40, 0x40, 0x40, 0x40, 0x41
#define XFER_LAST  0x00, 0x53, 0x14, 0xc0, 0x07, 0x06, 0x43, 0x40, 0x40, 0x40, 0x40, 0x42

static void test_split_strips_payloads(void **state)
{
    (void)state;
    stream_t in, want, payload;
    session_start(&in);
    want = in;
    payload.n = 0;
    frame(&in, 0, NULL, 0); /* heartbeat */
    frame(&want, 0, NULL, 0);
    /* a flow with an extended header: Proton gets it without */
    uint8_t flow[] = {0x00, 0x53, 0x13, 0xc0, 0x07, 0x04, 0x43, 0x52, 100, 0x43, 0x52, 100};
    frame_ext(&in, 0, 2, flow, sizeof(flow));
    frame(&want, 0, flow, sizeof(flow));
    /* a three-frame delivery: payloads 300, 0 and 5 bytes */
    uint8_t body[300];
    for (size_t i = 0; i < sizeof(body); i++)
        body[i] = (uint8_t)(i * 7);
    uint8_t first[] = {XFER_FIRST}, next[] = {XFER_NEXT}, last[] = {XFER_LAST};
    stream_t tmp = {.n = 0};
    put(&tmp, first, sizeof(first));
    put(&tmp, body, sizeof(body));
    frame(&in, 0, tmp.b, tmp.n);
    frame(&want, 0, first, sizeof(first));
    put(&payload, body, sizeof(body));
    frame_ext(&in, 0, 1, next, sizeof(next));
    frame(&want, 0, next, sizeof(next));
    tmp.n = 0;
    put(&tmp, last, sizeof(last));
    put(&tmp, "hello", 5);
    frame(&in, 0, tmp.b, tmp.n);
    frame(&want, 0, last, sizeof(last));
    put(&payload, "hello", 5);
    /* detach [handle 0], end, close */
    frame(&in, 0, BYTES(0x00, 0x53, 0x16, 0xc0, 0x02, 0x01, 0x43));
    frame(&want, 0, BYTES(0x00, 0x53, 0x16, 0xc0, 0x02, 0x01, 0x43));
    frame(&in, 0, BYTES(0x00, 0x53, 0x17, 0x45));
    frame(&want, 0, BYTES(0x00, 0x53, 0x17, 0x45));
    frame(&in, 0, BYTES(0x00, 0x53, 0x18, 0x45));
    frame(&want, 0, BYTES(0x00, 0x53, 0x18, 0x45));

    for (int bytewise = 0; bytewise < 2; bytewise++) {
        static split_rec_t r;
        r.refuse_attach = false;
        assert_int_equal(split_feed(&in, &r, bytewise), 0);
        assert_int_equal(r.proton.n, want.n);
        assert_memory_equal(r.proton.b, want.b, want.n);
        assert_int_equal(r.payload.n, payload.n);
        assert_memory_equal(r.payload.b, payload.b, payload.n);
        assert_int_equal(r.n_transfer, 3);
        assert_int_equal(r.n_more, 2);
        assert_int_equal(r.lens[0], 300);
        assert_int_equal(r.lens[1], 0);
        assert_int_equal(r.lens[2], 5);
        assert_int_equal(r.n_attach, 1);
        assert_int_equal(r.n_detach, 1);
        assert_int_equal(r.n_end, 2); /* end, and close (every channel) */
    }
    /* the unchecked guard still passes the same input */
    expect(&in, 0);
}

static void test_split_abort_and_refusal(void **state)
{
    (void)state;
    stream_t in;
    session_start(&in);
    uint8_t first[] = {XFER_FIRST};
    stream_t tmp = {.n = 0};
    put(&tmp, first, sizeof(first));
    put(&tmp, "abc", 3);
    frame(&in, 0, tmp.b, tmp.n);
    frame(&in, 0, BYTES(XFER_NEXT));
    uint8_t ab[] = {0x00, 0x53, 0x14, 0xc0, 0x0b, 0x0a, 0x43, 0x40, 0x40, 0x40, 0x40, 0x42,
                    0x40, 0x40, 0x40, 0x41};
    frame(&in, 0, ab, sizeof(ab)); /* aborted, no payload */
    static split_rec_t r;
    r.refuse_attach = false;
    assert_int_equal(split_feed(&in, &r, false), 0);
    assert_int_equal(r.n_transfer, 3);
    assert_int_equal(r.n_aborted, 1);
    assert_int_equal(r.payload.n, 3);
    /* the caller refuses the attach: the guard fails with its reason, Proton gets no more */
    r.refuse_attach = true;
    assert_int_equal(split_feed(&in, &r, true), CODEC_INVALID);
    assert_int_equal(r.n_transfer, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_session),
        cmocka_unit_test(test_sasl_then_amqp),
        cmocka_unit_test(test_bad_frames),
        cmocka_unit_test(test_transfer_without_delivery_id),
        cmocka_unit_test(test_deliveries_in_progress_are_per_link),
        cmocka_unit_test(test_unknown_header_passes_to_proton),
        cmocka_unit_test(test_value_check),
        cmocka_unit_test(test_counts_bounded_by_bytes),
        cmocka_unit_test(test_recorded_sessions_pass),
        cmocka_unit_test(test_memory_grows_with_use),
        cmocka_unit_test(test_proton_crash_inputs),
        cmocka_unit_test(test_split_strips_payloads),
        cmocka_unit_test(test_split_abort_and_refusal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
