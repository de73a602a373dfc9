/* tests/unit/core/routing/msg_test.c: core/routing/msg.c - the routing-protocol messages.
 *
 * Golden vectors: vectors/qdr-*.bin are messages a real qdrouterd 1.19 sent on an
 * inter-router control link (capture_vectors.py).  Each must decode to what it holds, and
 * encoding the decoded values must give back the very bytes qdrouterd wrote, message
 * annotations aside (those are the sending hop's).  Then: every prefix of every vector is
 * rejected, bodies that qdrouterd would drop are rejected with the right words, and the
 * encoder's integer, string and list widths are qdrouterd's.
 *
 * Usage: msg_test VECTORS_DIR (meson passes it).
 */
#include "core/base/base.h"
#include "core/routing/msg.h"

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

typedef struct file {
    uint8_t *ptr; /* exactly len bytes, so ASan sees a read past the end */
    size_t   len;
} file_t;

static file_t load(const char *name)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", vectors_dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    uint8_t tmp[65536];
    size_t  n = fread(tmp, 1, sizeof(tmp), f);
    fclose(f);
    file_t r = {.ptr = base_malloc(n ? n : 1), .len = n};
    memcpy(r.ptr, tmp, n);
    return r;
}

static bool bytes_is(codec_bytes_t b, const char *s)
{
    return b.ptr && b.len == strlen(s) && memcmp(b.ptr, s, b.len) == 0;
}

#define assert_bytes(b, s)                                                                         \
    do {                                                                                           \
        if (!bytes_is((b), (s)))                                                                   \
            fail_msg("%s is '%.*s', not '%s'", #b, (int)(b).len, (const char *)(b).ptr, (s));      \
    } while (0)

static core_rt_msg_t decode_ok(const file_t *f)
{
    core_rt_msg_t m;
    const char   *why = NULL;
    int           rc = core_rt_msg_decode(f->ptr, f->len, &m, &why);
    if (rc != 0)
        fail_msg("decode: %d %s", rc, why ? why : "");
    return m;
}

/* The strings of a view, as an array (at most 16). */
static uint32_t strs_array(const core_rt_strs_t *l, codec_bytes_t *out)
{
    core_rt_iter_t it = core_rt_iter(l);
    uint32_t       n = 0;
    while (n < 16 && core_rt_strs_next(&it, &out[n]))
        n++;
    assert_int_equal(n, l->count);
    return n;
}

static void test_golden_decode(void **state)
{
    (void)state;
    file_t        f = load("qdr-HELLO.bin");
    core_rt_msg_t m = decode_ok(&f);
    assert_int_equal(m.op, CORE_RT_OP_HELLO);
    assert_bytes(m.id, "QDR.A");
    assert_int_equal(m.pv, 1);
    assert_bytes(m.area, "0");
    assert_true(m.instance > 1600000000);
    assert_non_null(m.seen.ptr);
    assert_int_equal(m.seen.count, 0);
    int64_t instance = m.instance;
    BASE_FREE(f.ptr);

    codec_bytes_t s[16];
    f = load("qdr-HELLO-seen.bin");
    m = decode_ok(&f);
    assert_int_equal(strs_array(&m.seen, s), 1);
    assert_bytes(s[0], "PEER");
    assert_int_equal(m.instance, instance);
    BASE_FREE(f.ptr);

    f = load("qdr-RA.bin");
    m = decode_ok(&f);
    assert_int_equal(m.op, CORE_RT_OP_RA);
    assert_int_equal(m.ls_seq, 1);
    assert_int_equal(m.mobile_seq, 0);
    assert_int_equal(m.instance, instance);
    BASE_FREE(f.ptr);

    f = load("qdr-LSR.bin");
    m = decode_ok(&f);
    assert_int_equal(m.op, CORE_RT_OP_LSR);
    assert_bytes(m.id, "QDR.A");
    BASE_FREE(f.ptr);

    f = load("qdr-LSU.bin");
    m = decode_ok(&f);
    assert_int_equal(m.op, CORE_RT_OP_LSU);
    assert_int_equal(m.ls_seq, 1);
    assert_bytes(m.ls_id, "QDR.A");
    assert_bytes(m.ls_area, "0");
    assert_int_equal(m.ls_ls_seq, 1);
    assert_int_equal(m.peers.count, 1);
    core_rt_iter_t it = core_rt_iter(&m.peers);
    codec_bytes_t  id;
    int64_t        cost;
    assert_true(core_rt_peers_next(&it, &id, &cost));
    assert_bytes(id, "PEER");
    assert_int_equal(cost, 1);
    assert_false(core_rt_peers_next(&it, &id, &cost));
    BASE_FREE(f.ptr);

    f = load("qdr-MAU-diff.bin");
    m = decode_ok(&f);
    assert_int_equal(m.op, CORE_RT_OP_MAU);
    assert_int_equal(m.mobile_seq, 1);
    assert_null(m.exist.ptr);
    assert_int_equal(strs_array(&m.add, s), 1);
    assert_bytes(s[0], "M0golden/addr");
    assert_non_null(m.del.ptr);
    assert_int_equal(m.del.count, 0);
    assert_int_equal(m.hints.count, 1);
    it = core_rt_iter(&m.hints);
    int64_t hint;
    assert_true(core_rt_ints_next(&it, &hint));
    assert_int_equal(hint, 3); /* anycast-balanced */
    BASE_FREE(f.ptr);

    f = load("qdr-MAU-abs.bin");
    m = decode_ok(&f);
    assert_null(m.add.ptr);
    assert_null(m.del.ptr);
    assert_int_equal(strs_array(&m.exist, s), 1);
    assert_bytes(s[0], "M0golden/addr");
    assert_int_equal(m.hints.count, 1);
    BASE_FREE(f.ptr);

    f = load("qdr-MAR.bin");
    m = decode_ok(&f);
    assert_int_equal(m.op, CORE_RT_OP_MAR);
    assert_int_equal(m.have_seq, 0);
    BASE_FREE(f.ptr);
}

static const char *const golden[] = {
    "qdr-HELLO.bin", "qdr-HELLO-seen.bin", "qdr-RA.bin",      "qdr-LSR.bin",
    "qdr-LSU.bin",   "qdr-MAU-diff.bin",   "qdr-MAU-abs.bin", "qdr-MAR.bin",
};

/* decode -> encode gives qdrouterd's bytes back (its message-annotations left out). */
static void test_golden_roundtrip(void **state)
{
    (void)state;
    for (size_t g = 0; g < BASE_ARRAY_LEN(golden); g++) {
        file_t        f = load(golden[g]);
        core_rt_msg_t m = decode_ok(&f);
        codec_scan_t  scan;
        assert_int_equal(codec_scan(f.ptr, f.len, true, &scan, NULL), 0);
        assert_non_null(scan.to.ptr);
        char to[256];
        snprintf(to, sizeof(to), "%.*s", (int)scan.to.len, (const char *)scan.to.ptr);

        codec_bytes_t  ids[16], dels[16];
        int64_t        values[16];
        core_rt_out_t  o = {.op = m.op,
                            .to = to,
                            .id = m.id,
                            .area = m.area,
                            .instance = m.instance,
                            .ls_seq = m.ls_seq,
                            .mobile_seq = m.mobile_seq,
                            .have_seq = m.have_seq,
                            .ids = ids,
                            .values = values,
                            .dels = dels};
        core_rt_iter_t it;
        switch (m.op) {
        case CORE_RT_OP_HELLO:
            o.n_ids = strs_array(&m.seen, ids);
            break;
        case CORE_RT_OP_LSU:
            it = core_rt_iter(&m.peers);
            while (core_rt_peers_next(&it, &ids[o.n_ids], &values[o.n_ids]))
                o.n_ids++;
            break;
        case CORE_RT_OP_MAU:
            o.absolute = m.exist.ptr != NULL;
            o.n_ids = strs_array(o.absolute ? &m.exist : &m.add, ids);
            if (!o.absolute)
                o.n_dels = strs_array(&m.del, dels);
            it = core_rt_iter(&m.hints);
            for (uint32_t i = 0; core_rt_ints_next(&it, &values[i]); i++)
                ;
            break;
        default:
            break;
        }
        core_rt_buf_t b = {0};
        assert_int_equal(core_rt_msg_encode(&o, &b), 0);
        /* expected: the capture without its message-annotations section */
        size_t ma_off = scan.message_annotations.off, ma_len = scan.message_annotations.len;
        assert_true(ma_len > 0);
        size_t   want_len = f.len - ma_len;
        uint8_t *want = base_malloc(want_len);
        memcpy(want, f.ptr, ma_off);
        memcpy(want + ma_off, f.ptr + ma_off + ma_len, f.len - ma_off - ma_len);
        if (b.len != want_len || memcmp(b.ptr, want, want_len) != 0) {
            for (size_t i = 0; i < b.len && i < want_len; i++)
                if (b.ptr[i] != want[i]) {
                    fail_msg("%s: encoded %zu bytes, want %zu; first difference at %zu "
                             "(0x%02x, want 0x%02x)",
                             golden[g], b.len, want_len, i, b.ptr[i], want[i]);
                }
            fail_msg("%s: encoded %zu bytes, want %zu", golden[g], b.len, want_len);
        }
        /* and what we encode decodes to the same values */
        core_rt_msg_t m2;
        assert_int_equal(core_rt_msg_decode(b.ptr, b.len, &m2, NULL), 0);
        assert_int_equal(m2.op, m.op);
        assert_int_equal(m2.instance, m.instance);
        BASE_FREE(want);
        core_rt_buf_fini(&b);
        BASE_FREE(f.ptr);
    }
}

/* Every proper prefix of a message is rejected, and never read past. */
static void test_golden_prefixes(void **state)
{
    (void)state;
    for (size_t g = 0; g < BASE_ARRAY_LEN(golden); g++) {
        file_t f = load(golden[g]);
        for (size_t n = 0; n < f.len; n++) {
            uint8_t *p = base_malloc(n ? n : 1);
            memcpy(p, f.ptr, n);
            core_rt_msg_t m;
            const char   *why = NULL;
            int           rc = core_rt_msg_decode(p, n, &m, &why);
            if (rc != CODEC_INVALID)
                fail_msg("%s: prefix of %zu bytes: %d", golden[g], n, rc);
            assert_non_null(why);
            BASE_FREE(p);
        }
        BASE_FREE(f.ptr);
    }
}

/* ------------------------------------------------------------------------------------------
 * A tiny notation for bodies:  {...} map32   [...] list32   l0 list0   s:TEXT str8
 * y:TEXT sym8   i:N smallint   I:N int   L:N long   U:N ulong   t f true false   n null
 * A:N array8 of N nulls   D:N N nested described prefixes (0x00 0x53 0x00 ...), then null
 * x:HEX raw bytes.  Tokens are separated by spaces.
 * ------------------------------------------------------------------------------------------ */

static void put(core_rt_buf_t *b, const void *p, size_t n)
{
    if (b->cap - b->len < n) {
        b->cap = (b->len + n) * 2 + 64;
        b->ptr = base_realloc(b->ptr, b->cap);
    }
    memcpy(b->ptr + b->len, p, n);
    b->len += n;
}

static void put1(core_rt_buf_t *b, uint8_t v)
{
    put(b, &v, 1);
}

static void put_be(core_rt_buf_t *b, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--)
        put1(b, (uint8_t)(v >> (8 * i)));
}

static const char *build(core_rt_buf_t *b, const char *s);

/* A compound: code, then patch size and count at the close. */
static const char *build_compound(core_rt_buf_t *b, const char *s, uint8_t code, char close)
{
    put1(b, code);
    size_t at = b->len;
    put_be(b, 0, 4);
    put_be(b, 0, 4);
    uint32_t count = 0;
    for (;;) {
        while (*s == ' ')
            s++;
        if (*s == close) {
            s++;
            break;
        }
        s = build(b, s);
        count++;
    }
    uint32_t size = (uint32_t)(b->len - at - 4);
    for (int i = 0; i < 4; i++) {
        b->ptr[at + i] = (uint8_t)(size >> (24 - 8 * i));
        b->ptr[at + 4 + i] = (uint8_t)(count >> (24 - 8 * i));
    }
    return s;
}

static const char *build(core_rt_buf_t *b, const char *s)
{
    while (*s == ' ')
        s++;
    const char *e = s;
    while (*e && *e != ' ' && *e != ']' && *e != '}')
        e++;
    size_t n = (size_t)(e - s);
    if (*s == '{')
        return build_compound(b, s + 1, 0xd1, '}');
    if (*s == '[')
        return build_compound(b, s + 1, 0xd0, ']');
    if (n == 2 && memcmp(s, "l0", 2) == 0)
        put1(b, 0x45);
    else if (n == 1 && *s == 't')
        put1(b, 0x41);
    else if (n == 1 && *s == 'f')
        put1(b, 0x42);
    else if (n == 1 && *s == 'n')
        put1(b, 0x40);
    else if (n >= 2 && s[1] == ':') {
        const char *v = s + 2;
        size_t      vn = n - 2;
        long long   num = strtoll(v, NULL, 10);
        switch (s[0]) {
        case 's':
        case 'y':
            put1(b, s[0] == 's' ? 0xa1 : 0xa3);
            put1(b, (uint8_t)vn);
            put(b, v, vn);
            break;
        case 'i':
            put1(b, 0x54);
            put1(b, (uint8_t)num);
            break;
        case 'I':
            put1(b, 0x71);
            put_be(b, (uint64_t)num, 4);
            break;
        case 'L':
            put1(b, 0x81);
            put_be(b, (uint64_t)num, 8);
            break;
        case 'U':
            put1(b, 0x80);
            put_be(b, strtoull(v, NULL, 10), 8);
            break;
        case 'A':
            put1(b, 0xe0);
            put1(b, 2);
            put1(b, (uint8_t)num);
            put1(b, 0x40);
            break;
        case 'D':
            for (long long i = 0; i < num; i++) {
                put1(b, 0x00);
                put1(b, 0x53);
                put1(b, 0x01);
            }
            put1(b, 0x40);
            break;
        case 'x':
            for (size_t i = 0; i + 1 < vn; i += 2) {
                char h[3] = {v[i], v[i + 1], 0};
                put1(b, (uint8_t)strtoul(h, NULL, 16));
            }
            break;
        default:
            fail_msg("bad token %.*s", (int)n, s);
        }
    } else {
        fail_msg("bad token %.*s", (int)n, s);
    }
    return e;
}

typedef struct body_case {
    core_rt_op_t op;
    const char  *body;
    int          rc;
    const char  *why; /* expected *why, or NULL for success */
} body_case_t;

#define ID "s:id s:R1 s:pv i:1 s:area s:0 "

static const body_case_t body_cases[] = {
    /* well-formed, and leniency qdrouterd has */
    {CORE_RT_OP_HELLO, "{" ID "s:instance I:5 s:seen [s:R2 s:R3]}", 0, NULL},
    {CORE_RT_OP_HELLO, "{y:id s:R1 y:seen l0}", 0, NULL}, /* symbol keys, no pv */
    {CORE_RT_OP_HELLO, "{s:id y:R1 s:seen l0 s:future [t n]}", 0,
     NULL},                                                            /* symbol text, extra key */
    {CORE_RT_OP_RA, "{" ID "s:ls_seq L:7 s:mobile_seq U:9}", 0, NULL}, /* any integer type */
    {CORE_RT_OP_LSR, "{s:id s:R1 s:skip A:200}", 0, NULL}, /* zero-width array skipped */
    {CORE_RT_OP_MAU, "{" ID "s:mobile_seq i:2 s:hints [i:1 t] s:add [s:M0a] s:del l0}", 0, NULL},
    {CORE_RT_OP_HELLO, "{s:id s:R1 s:pv i:2 s:seen t}", CORE_RT_NEWER, NULL}, /* newer: not read */
    /* what qdrouterd drops */
    {CORE_RT_OP_HELLO, "[s:id s:R1]", CODEC_INVALID, "HELLO: body is not a map"},
    {CORE_RT_OP_HELLO, "{s:pv i:1 s:seen l0}", CODEC_INVALID, "HELLO: id is missing"},
    {CORE_RT_OP_HELLO, "{s:id i:1 s:seen l0}", CODEC_INVALID, "HELLO: id is not a string"},
    {CORE_RT_OP_HELLO, "{s:id s:R1 s:pv t s:seen l0}", CODEC_INVALID,
     "HELLO: pv is not an integer"},
    {CORE_RT_OP_HELLO, "{" ID "}", CODEC_INVALID, "HELLO: seen is missing"},
    {CORE_RT_OP_HELLO, "{" ID "s:seen A:1}", CODEC_INVALID, "HELLO: seen is not a list"},
    {CORE_RT_OP_HELLO, "{" ID "s:seen [s:R2 i:3]}", CODEC_INVALID,
     "a list element is not a string"},
    {CORE_RT_OP_HELLO, "{" ID "s:seen l0 s:instance t}", CODEC_INVALID,
     "HELLO: instance is not an integer"},
    {CORE_RT_OP_HELLO, "{" ID "s:seen l0 y:seen l0}", CODEC_INVALID, "HELLO: body has a key twice"},
    {CORE_RT_OP_RA, "{" ID "s:ls_seq i:1}", CODEC_INVALID, "RA: mobile_seq is missing"},
    {CORE_RT_OP_RA, "{" ID "s:ls_seq f s:mobile_seq i:1}", CODEC_INVALID,
     "RA: ls_seq is not an integer"},
    {CORE_RT_OP_RA, "{" ID "s:ls_seq U:9223372036854775808 s:mobile_seq i:1}", CODEC_INVALID,
     "an integer is out of range"},
    {CORE_RT_OP_LSU, "{" ID "s:ls_seq i:1}", CODEC_INVALID, "LSU: ls is missing"},
    {CORE_RT_OP_LSU, "{" ID "s:ls_seq i:1 s:ls [s:id]}", CODEC_INVALID, "LSU: ls is not a map"},
    {CORE_RT_OP_LSU, "{" ID "s:ls_seq i:1 s:ls {s:id s:R1 s:ls_seq i:1}}", CODEC_INVALID,
     "LSU: ls.peers is missing"},
    {CORE_RT_OP_LSU, "{" ID "s:ls_seq i:1 s:ls {s:ls_seq i:1 s:peers {}}}", CODEC_INVALID,
     "LSU: ls.id is missing"},
    {CORE_RT_OP_LSU, "{" ID "s:ls_seq i:1 s:ls {s:id s:R1 s:ls_seq i:1 s:peers {s:R2 s:1}}}",
     CODEC_INVALID, "LSU: ls.peers value is not an integer"},
    {CORE_RT_OP_LSU, "{" ID "s:ls_seq i:1 s:ls {s:id s:R1 s:ls_seq i:1 s:peers {i:2 i:1}}}",
     CODEC_INVALID, "LSU: ls.peers key is not a string"},
    {CORE_RT_OP_LSU, "{" ID "s:ls_seq i:1 s:ls {s:id s:R1 s:ls_seq i:1 s:peers {s:R2 t}}}",
     CODEC_INVALID, "LSU: ls.peers value is not an integer"},
    {CORE_RT_OP_MAU, "{" ID "s:mobile_seq i:2 s:exist l0 s:add l0}", CODEC_INVALID,
     "MAU: exist comes with add or del"},
    {CORE_RT_OP_MAU, "{" ID "s:mobile_seq i:2 s:add l0}", CODEC_INVALID,
     "MAU: neither exist nor both add and del"},
    {CORE_RT_OP_MAU, "{" ID "s:add l0 s:del l0}", CODEC_INVALID, "MAU: mobile_seq is missing"},
    {CORE_RT_OP_MAU, "{" ID "s:mobile_seq i:2 s:exist s:M0a}", CODEC_INVALID,
     "MAU: exist is not a list"},
    {CORE_RT_OP_MAR, "{" ID "}", CODEC_INVALID, "MAR: have_seq is missing"},
    /* malformed encodings */
    {CORE_RT_OP_LSR, "x:c1", CODEC_INVALID, "a value runs past the end of its section or compound"},
    {CORE_RT_OP_LSR, "x:c10302a1", CODEC_INVALID,
     "a value runs past the end of its section or compound"},
    {CORE_RT_OP_LSR, "x:c1010240", CODEC_INVALID, "compound count does not fit its size"},
    {CORE_RT_OP_LSR, "x:c1020140", CODEC_INVALID, "map count is odd"},
    {CORE_RT_OP_LSR, "x:d100000004ffffffff", CODEC_INVALID, "compound count does not fit its size"},
    {CORE_RT_OP_LSR, "x:c103024040 x:40", CODEC_INVALID, "LSR: bytes follow the body map"},
    {CORE_RT_OP_LSR, "x:c1030240ff", CODEC_INVALID, "unknown type code"},
    {CORE_RT_OP_LSR, "{s:id s:R1 s:deep D:17}", CODEC_INVALID, "described values nest too deeply"},
    {CORE_RT_OP_LSR, "{s:id s:R1 s:deep D:15}", 0, NULL},
};

static void test_bodies(void **state)
{
    (void)state;
    for (size_t c = 0; c < BASE_ARRAY_LEN(body_cases); c++) {
        const body_case_t *bc = &body_cases[c];
        core_rt_buf_t      b = {0};
        const char        *s = bc->body;
        while (*s)
            s = build(&b, s);
        uint8_t *exact = base_malloc(b.len);
        memcpy(exact, b.ptr, b.len);
        core_rt_msg_t m;
        const char   *why = NULL;
        int           rc = core_rt_body_decode(bc->op, exact, b.len, &m, &why);
        if (rc != bc->rc || (bc->why && (!why || strcmp(why, bc->why) != 0)))
            fail_msg("case %zu (%s %s): rc %d why '%s'; want %d '%s'", c, core_rt_op_name(bc->op),
                     bc->body, rc, why ? why : "(null)", bc->rc, bc->why ? bc->why : "(null)");
        if (rc == CODEC_INVALID)
            assert_non_null(why);
        BASE_FREE(exact);
        core_rt_buf_fini(&b);
    }
}

/* The decoded hints are dropped when qdrouterd would ignore them. */
static void test_mau_hints(void **state)
{
    (void)state;
    static const struct {
        const char *body;
        uint32_t    hints;
    } cases[] = {
        {"{s:id s:R s:mobile_seq i:1 s:hints [i:3 i:0] s:add [s:M0a s:M0b] s:del l0}", 2},
        {"{s:id s:R s:mobile_seq i:1 s:hints [i:3] s:add [s:M0a s:M0b] s:del l0}", 0},
        {"{s:id s:R s:mobile_seq i:1 s:hints [i:3 s:x] s:add [s:M0a s:M0b] s:del l0}", 0},
        {"{s:id s:R s:mobile_seq i:1 s:hints s:x s:add [s:M0a] s:del l0}", 0},
        {"{s:id s:R s:mobile_seq i:1 s:exist [s:M0a] s:hints [i:1]}", 1},
    };
    for (size_t c = 0; c < BASE_ARRAY_LEN(cases); c++) {
        core_rt_buf_t b = {0};
        const char   *s = cases[c].body;
        while (*s)
            s = build(&b, s);
        core_rt_msg_t m;
        assert_int_equal(core_rt_body_decode(CORE_RT_OP_MAU, b.ptr, b.len, &m, NULL), 0);
        assert_int_equal(m.hints.count, cases[c].hints);
        assert_true((m.hints.ptr != NULL) == (cases[c].hints > 0));
        core_rt_buf_fini(&b);
    }
}

/* Whole-message framing: opcode key string or symbol, body section kinds. */
static void test_framing(void **state)
{
    (void)state;
    static const struct {
        const char *msg;
        int         rc;
        const char *why;
    } cases[] = {
        {"x:005374 {y:opcode s:LSR} x:005377 {s:id s:R}", 0, NULL},
        {"x:005374 {s:opcode s:LSR} x:005377 {s:id s:R} x:005378 {}", 0, NULL},
        {"x:005377 {s:id s:R}", CODEC_INVALID,
         "routing message: no application-properties (opcode)"},
        {"x:005374 {s:op s:LSR} x:005377 {s:id s:R}", CODEC_INVALID,
         "routing message: no opcode application property"},
        {"x:005374 {s:opcode s:NOPE} x:005377 {s:id s:R}", CODEC_INVALID,
         "routing message: unknown opcode"},
        {"x:005374 {s:opcode s:LSR} x:005375a00100", CODEC_INVALID,
         "routing message: body is not an amqp-value section"},
        {"x:005374 {s:opcode s:LSR} x:005377 {s:id s:R} x:005377 {}", CODEC_INVALID,
         "routing message: something other than a footer follows the body"},
        {"x:005374 {s:opcode s:LSR} x:005377 {s:id s:R} x:41", CODEC_INVALID,
         "expected a section (described type 0x00)"},
        {"x:005374 {s:opcode s:LSR}", CODEC_INVALID, "expected a section (described type 0x00)"},
    };
    for (size_t c = 0; c < BASE_ARRAY_LEN(cases); c++) {
        core_rt_buf_t b = {0};
        const char   *s = cases[c].msg;
        while (*s)
            s = build(&b, s);
        uint8_t *exact = base_malloc(b.len);
        memcpy(exact, b.ptr, b.len);
        core_rt_msg_t m;
        const char   *why = NULL;
        int           rc = core_rt_msg_decode(exact, b.len, &m, &why);
        if (rc != cases[c].rc || (cases[c].why && (!why || strcmp(why, cases[c].why) != 0)))
            fail_msg("case %zu (%s): rc %d why '%s'", c, cases[c].msg, rc, why ? why : "(null)");
        BASE_FREE(exact);
        core_rt_buf_fini(&b);
    }
}

/* Byte search helper. */
static bool contains(const core_rt_buf_t *b, const char *hex)
{
    core_rt_buf_t want = {0};
    char          tok[600];
    snprintf(tok, sizeof(tok), "x:%s", hex);
    build(&want, tok);
    bool found = false;
    for (size_t i = 0; !found && i + want.len <= b->len; i++)
        found = memcmp(b->ptr + i, want.ptr, want.len) == 0;
    core_rt_buf_fini(&want);
    return found;
}

/* qdrouterd's widths: Python ints are smallint/int/long by value, C's pv/seqs smalllong/long,
 * long strings str32, an empty Python list list0 and an empty C list list32. */
static void test_encode_widths(void **state)
{
    (void)state;
    core_rt_buf_t b = {0};
    codec_bytes_t id = {(const uint8_t *)"R1", 2};
    core_rt_out_t ra = {.op = CORE_RT_OP_RA,
                        .to = "amqp:/_topo/0/all/qdrouter",
                        .id = id,
                        .instance = 5000000000LL,
                        .ls_seq = 200,
                        .mobile_seq = -1};
    assert_int_equal(core_rt_msg_encode(&ra, &b), 0);
    assert_true(contains(&b, "a108696e7374616e636581000000012a05f200")); /* instance: long */
    assert_true(contains(&b, "a1066c735f73657171000000c8"));             /* ls_seq 200: int */
    assert_true(contains(&b, "a10a6d6f62696c655f73657154ff"));           /* -1: smallint */
    core_rt_msg_t m;
    assert_int_equal(core_rt_msg_decode(b.ptr, b.len, &m, NULL), 0);
    assert_int_equal(m.instance, 5000000000LL);
    assert_int_equal(m.mobile_seq, -1);
    core_rt_buf_fini(&b);

    char long_id[300];
    memset(long_id, 'x', sizeof(long_id));
    codec_bytes_t seen[1] = {{(const uint8_t *)long_id, sizeof(long_id)}};
    core_rt_out_t hello = {
        .op = CORE_RT_OP_HELLO, .to = "amqp:/_local/qdhello", .id = id, .ids = seen, .n_ids = 1};
    assert_int_equal(core_rt_msg_encode(&hello, &b), 0);
    assert_true(contains(&b, "b10000012c78787878")); /* str32 */
    assert_int_equal(core_rt_msg_decode(b.ptr, b.len, &m, NULL), 0);
    assert_int_equal(m.seen.count, 1);
    core_rt_buf_fini(&b);

    hello.n_ids = 0;
    assert_int_equal(core_rt_msg_encode(&hello, &b), 0);
    assert_true(contains(&b, "a1047365656e45")); /* seen: list0 */
    core_rt_buf_fini(&b);

    core_rt_out_t mau = {
        .op = CORE_RT_OP_MAU, .to = "_topo/0/all/qdrouter.ma", .id = id, .mobile_seq = 300};
    assert_int_equal(core_rt_msg_encode(&mau, &b), 0);
    assert_true(contains(&b, "a30a6d6f62696c655f73657181000000000000012c")); /* long */
    assert_true(contains(&b, "a30364656cd00000000400000000"));               /* del: list32 */
    assert_true(contains(&b, "a3066f70636f6465a1034d4155"));                 /* sym opcode */
    assert_int_equal(core_rt_msg_decode(b.ptr, b.len, &m, NULL), 0);
    assert_int_equal(m.mobile_seq, 300);
    core_rt_buf_fini(&b);

    core_rt_out_t bad = {.op = CORE_RT_OP_NONE, .to = "x", .id = id};
    assert_int_equal(core_rt_msg_encode(&bad, &b), CODEC_INVALID);
    assert_int_equal(b.len, 0);
    core_rt_buf_fini(&b);
}

static void test_op_names(void **state)
{
    (void)state;
    for (int op = CORE_RT_OP_HELLO; op < CORE_RT_OP_COUNT; op++) {
        const char *n = core_rt_op_name((core_rt_op_t)op);
        assert_int_equal(core_rt_op_parse((const uint8_t *)n, strlen(n)), op);
    }
    assert_int_equal(core_rt_op_parse((const uint8_t *)"HELL", 4), CORE_RT_OP_NONE);
    assert_string_equal(core_rt_op_name(CORE_RT_OP_COUNT), "?");
}

int main(int argc, char **argv)
{
    if (argc > 1)
        vectors_dir = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_decode),   cmocka_unit_test(test_golden_roundtrip),
        cmocka_unit_test(test_golden_prefixes), cmocka_unit_test(test_bodies),
        cmocka_unit_test(test_mau_hints),       cmocka_unit_test(test_framing),
        cmocka_unit_test(test_encode_widths),   cmocka_unit_test(test_op_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
