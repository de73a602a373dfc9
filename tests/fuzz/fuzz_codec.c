/* tests/fuzz/fuzz_codec.c: libFuzzer target for codec/ (codec_scan, codec_compose_*).
 *
 * Each input is treated as an encoded message.  It is scanned as complete and as incomplete,
 * and a few of its prefixes as incomplete; the results must agree with each other.  When the
 * input is valid, it is composed toward receivers with several codec_ra_out_t variants and
 * each output is rescanned: it must be valid, keep every section but message-annotations
 * byte-identical, keep the user annotations byte-identical and in order, and carry exactly
 * the router annotations written.  Composing the output again with the same annotations
 * must reproduce it byte for byte.  The input is also cut into segments (codec_scan_segs):
 * the answer and the composition must be the same.  Any violation calls abort().
 *
 * Built two ways (tests/fuzz/meson.build): with -fsanitize=fuzzer as `fuzz_codec`, and with
 * replay.c as `fuzz_codec_replay`, which runs the corpus and crash inputs in every test run.
 */
#include "codec/codec.h"
#include "codec/codec_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_codec: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

static bool bytes_eq(codec_bytes_t a, codec_bytes_t b)
{
    if (!a.ptr || !b.ptr)
        return !a.ptr && !b.ptr;
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

static bool range_eq(const uint8_t *a, codec_range_t ra, const uint8_t *b, codec_range_t rb)
{
    return ra.len == rb.len && (ra.len == 0 || memcmp(a + ra.off, b + rb.off, ra.len) == 0);
}

/* Views a (into a message at abase) and b (at bbase) are at the same place. */
static bool view_eq(codec_bytes_t a, const uint8_t *abase, codec_bytes_t b, const uint8_t *bbase)
{
    if (!a.ptr || !b.ptr)
        return !a.ptr && !b.ptr;
    return a.len == b.len && a.ptr - abase == b.ptr - bbase;
}

/* Two scans of the same bytes, at a and at b, found the same things. */
static bool scan_eq(const codec_scan_t *a, const uint8_t *abase, const codec_scan_t *b,
                    const uint8_t *bbase)
{
    return memcmp(&a->header, &b->header, sizeof(a->header)) == 0 &&
           memcmp(&a->delivery_annotations, &b->delivery_annotations, sizeof(codec_range_t)) == 0 &&
           memcmp(&a->message_annotations, &b->message_annotations, sizeof(codec_range_t)) == 0 &&
           memcmp(&a->properties, &b->properties, sizeof(codec_range_t)) == 0 &&
           memcmp(&a->application_properties, &b->application_properties, sizeof(codec_range_t)) ==
               0 &&
           a->body_off == b->body_off && a->ma_count == b->ma_count &&
           a->ma_user_count == b->ma_user_count && a->ma_router_count == b->ma_router_count &&
           memcmp(&a->ma_user, &b->ma_user, sizeof(a->ma_user)) == 0 &&
           a->ma_user_split == b->ma_user_split && a->ma_user_bytes == b->ma_user_bytes &&
           view_eq(a->ra.ingress, abase, b->ra.ingress, bbase) &&
           view_eq(a->ra.to, abase, b->ra.to, bbase) &&
           view_eq(a->ra.trace, abase, b->ra.trace, bbase) &&
           a->ra.trace_count == b->ra.trace_count && a->ra.phase == b->ra.phase &&
           a->ra.stream == b->ra.stream && view_eq(a->to, abase, b->to, bbase) &&
           view_eq(a->reply_to, abase, b->reply_to, bbase);
}

/* Scan a malloc'ed copy of data[0, len) so that ASan sees any read past len.  *copyp gets
 * the copy (the scan's views point into it; caller frees). */
static int scan_copy(const uint8_t *data, size_t len, bool complete, codec_scan_t *s,
                     uint8_t **copyp)
{
    uint8_t    *copy = malloc(len ? len : 1);
    const char *why = NULL;
    int         rc;

    CHECK(copy);
    if (len)
        memcpy(copy, data, len);
    rc = codec_scan(copy, len, complete, s, &why);
    CHECK(rc == 0 || rc == CODEC_PARTIAL || rc == CODEC_INVALID);
    CHECK(rc == 0 ? why == NULL : why != NULL);
    *copyp = copy;
    return rc;
}

/* The user pairs of msg's MA, concatenated into out (at least scan->ma_user_bytes long);
 * returns how many. */
static uint32_t user_collect(const uint8_t *msg, const codec_scan_t *s, uint8_t *out,
                             size_t *out_len)
{
    const uint8_t *ma = msg + s->message_annotations.off;
    const uint8_t *p;
    const uint8_t *end = ma + s->message_annotations.len;
    int            code;
    size_t         dlen;
    uint32_t       count;
    uint32_t       n = 0;
    codec_err_t    err;

    *out_len = 0;
    if (!s->message_annotations.len)
        return 0;
    CHECK(codec__descriptor_read(ma, s->message_annotations.len, &code, &dlen, &err) == 0);
    CHECK(code == 0x72);
    p = ma + dlen;
    if (*p == CODEC_CODE_MAP8) {
        count = p[2];
        p += 3;
    } else {
        CHECK(*p == CODEC_CODE_MAP32);
        count = (uint32_t)p[5] << 24 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 8 | p[8];
        p += 9;
    }
    for (count /= 2; count; count--) {
        const uint8_t *k = p;
        size_t         klen = *p == CODEC_CODE_SYM8 ? p[1]
                              : *p == CODEC_CODE_SYM32
                                  ? (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | p[4]
                                  : 0;
        const uint8_t *kname = p + (*p == CODEC_CODE_SYM8 ? 2 : 5);
        bool           router = (*p == CODEC_CODE_SYM8 || *p == CODEC_CODE_SYM32) &&
                      klen >= CODEC_RA_PREFIX_LEN &&
                      memcmp(kname, CODEC_RA_PREFIX, CODEC_RA_PREFIX_LEN) == 0;
        CHECK((p = codec__value_skip(p, end, &err)));
        CHECK((p = codec__value_skip(p, end, &err)));
        if (!router) {
            memcpy(out + *out_len, k, (size_t)(p - k));
            *out_len += (size_t)(p - k);
            n++;
        }
    }
    CHECK(p == end);
    return n;
}

/* Compose msg's prefix for ra into a fresh buffer followed by the body as it arrived.
 * Returns the malloc'ed outgoing message (caller frees). */
static uint8_t *compose(const uint8_t *msg, size_t len, const codec_scan_t *s,
                        const codec_ra_out_t *ra, size_t *out_len)
{
    size_t       need;
    int          n_iov;
    uint8_t     *scratch;
    codec_iov_t *iov;
    uint8_t     *out;
    size_t       n = 0;
    int          rc;

    codec_compose_need(msg, s, ra, &need, &n_iov);
    CHECK(n_iov >= 0);
    scratch = malloc(need ? need : 1);
    iov = malloc(sizeof(*iov) * (size_t)(n_iov ? n_iov : 1));
    CHECK(scratch && iov);
    rc = codec_compose_prefix(msg, s, ra, scratch, need, iov, n_iov);
    CHECK(rc == n_iov);
    if (need)
        CHECK(codec_compose_prefix(msg, s, ra, scratch, need - 1, iov, n_iov) == CODEC_INVALID);
    if (n_iov)
        CHECK(codec_compose_prefix(msg, s, ra, scratch, need, iov, n_iov - 1) == CODEC_INVALID);
    rc = codec_compose_prefix(msg, s, ra, scratch, need, iov, n_iov);
    CHECK(rc == n_iov);
    for (int i = 0; i < rc; i++)
        n += iov[i].len;
    out = malloc(n + (len - s->body_off) + 1);
    CHECK(out);
    n = 0;
    for (int i = 0; i < rc; i++) {
        CHECK(iov[i].len > 0);
        memcpy(out + n, iov[i].base, iov[i].len);
        n += iov[i].len;
    }
    memcpy(out + n, msg + s->body_off, len - s->body_off);
    *out_len = n + (len - s->body_off);
    free(iov);
    free(scratch);
    return out;
}

/* The trace the output must carry for ra: carried elements then the appended id. */
static void trace_check(const codec_ra_out_t *ra, const codec_scan_t *o)
{
    if (!ra->trace.ptr && !ra->trace_append.ptr) {
        CHECK(!o->ra.trace.ptr);
        return;
    }
    size_t carried = ra->trace.ptr ? ra->trace.len : 0;
    CHECK(o->ra.trace.ptr);
    CHECK(o->ra.trace_count == (ra->trace.ptr ? ra->trace_count : 0) + !!ra->trace_append.ptr);
    CHECK(o->ra.trace.len >= carried);
    CHECK(carried == 0 || memcmp(o->ra.trace.ptr, ra->trace.ptr, carried) == 0);
    if (ra->trace_append.ptr) {
        size_t         h = ra->trace_append.len <= 255 ? 2 : 5;
        const uint8_t *a = o->ra.trace.ptr + carried;
        CHECK(o->ra.trace.len == carried + h + ra->trace_append.len);
        CHECK(a[0] == (h == 2 ? CODEC_CODE_STR8 : CODEC_CODE_STR32));
        CHECK(ra->trace_append.len == 0 ||
              memcmp(a + h, ra->trace_append.ptr, ra->trace_append.len) == 0);
    } else {
        CHECK(o->ra.trace.len == carried);
    }
}

static void compose_check(const uint8_t *msg, size_t len, const codec_scan_t *s,
                          const codec_ra_out_t *ra)
{
    size_t       out_len;
    uint8_t     *out = compose(msg, len, s, ra, &out_len);
    codec_scan_t o;
    const char  *why = NULL;
    uint8_t     *u_in = malloc(s->ma_user_bytes + 1);
    uint8_t     *u_out = malloc(s->ma_user_bytes + 1);
    size_t       b_in;
    size_t       b_out;
    bool         write = ra->write;
    uint32_t     router = 0;

    CHECK(u_in && u_out);
    if (codec_scan(out, out_len, true, &o, &why) != 0) {
        fprintf(stderr, "fuzz_codec: rescan of composed output failed: %s\n", why);
        abort();
    }
    CHECK(o.body_off == out_len - (len - s->body_off));
    CHECK(range_eq(msg, s->header, out, o.header));
    CHECK(range_eq(msg, s->delivery_annotations, out, o.delivery_annotations));
    CHECK(range_eq(msg, s->properties, out, o.properties));
    CHECK(range_eq(msg, s->application_properties, out, o.application_properties));
    CHECK(bytes_eq(s->to, o.to) && bytes_eq(s->reply_to, o.reply_to));
    CHECK(user_collect(msg, s, u_in, &b_in) == s->ma_user_count);
    CHECK(b_in == s->ma_user_bytes);
    CHECK(user_collect(out, &o, u_out, &b_out) == s->ma_user_count);
    CHECK(o.ma_user_count == s->ma_user_count);
    CHECK(b_out == b_in && (b_in == 0 || memcmp(u_in, u_out, b_in) == 0));
    CHECK(o.ma_user_bytes == s->ma_user_bytes);
    if (write) {
        router = !!ra->to.ptr + !!ra->phase + !!ra->stream + !!ra->ingress.ptr +
                 !!(ra->trace.ptr || ra->trace_append.ptr);
        CHECK(bytes_eq(o.ra.to, ra->to));
        CHECK(bytes_eq(o.ra.ingress, ra->ingress));
        CHECK(o.ra.phase == ra->phase);
        CHECK(o.ra.stream == ra->stream);
        trace_check(ra, &o);
    }
    CHECK(o.ma_router_count == router);
    if (s->ma_router_count == 0 && router == 0) {
        /* nothing dropped, nothing added: the message goes out unchanged */
        CHECK(out_len == len && memcmp(out, msg, len) == 0);
    } else {
        CHECK(!o.ma_user_split);
        CHECK(o.message_annotations.len == 0 ? o.ma_user_count == 0 && router == 0
                                             : o.ma_user_count + router > 0);
        if (o.message_annotations.len) {
            /* the smallest map header that fits */
            uint64_t pairs = o.message_annotations.len - 3 - 3;
            bool     map8 = out[o.message_annotations.off + 3] == CODEC_CODE_MAP8;
            if (!map8)
                pairs -= 6;
            CHECK(map8 == (pairs + 1 <= 255 && 2ull * o.ma_count <= 255));
        }
    }

    /* composing the output again with the same annotations is a fixed point */
    if (write) {
        codec_ra_out_t again = *ra;
        again.trace = o.ra.trace;
        again.trace_count = o.ra.trace_count;
        again.trace_append = (codec_bytes_t){NULL, 0};
        size_t   out2_len;
        uint8_t *out2 = compose(out, out_len, &o, &again, &out2_len);
        CHECK(out2_len == out_len && memcmp(out2, out, out_len) == 0);
        free(out2);
    }
    free(u_out);
    free(u_in);
    free(out);
}

/* ---- the same bytes in segments ---- */

static void   *stitched[1024];
static size_t  n_stitched;

static uint8_t *stitch_alloc(void *ctx, size_t len)
{
    (void)ctx;
    CHECK(n_stitched < sizeof(stitched) / sizeof(stitched[0]));
    uint8_t *b = malloc(len ? len : 1);
    CHECK(b);
    stitched[n_stitched++] = b;
    return b;
}

/* The prefix composed for ra, joined (malloc'ed; *n its length). */
static uint8_t *prefix_segs(const codec_segs_t *m, const codec_scan_t *s, const codec_ra_out_t *ra,
                            size_t *n)
{
    size_t need;
    int    n_iov;
    codec_compose_need_segs(m, s, ra, &need, &n_iov);
    CHECK(n_iov >= 0);
    uint8_t     *scratch = malloc(need ? need : 1);
    codec_iov_t *iov = malloc(sizeof(*iov) * (size_t)(n_iov ? n_iov : 1));
    CHECK(scratch && iov);
    CHECK(codec_compose_prefix_segs(m, s, ra, scratch, need, iov, n_iov) == n_iov);
    size_t len = 0;
    for (int i = 0; i < n_iov; i++)
        len += iov[i].len;
    uint8_t *out = malloc(len + 1);
    CHECK(out);
    *n = 0;
    for (int i = 0; i < n_iov; i++) {
        CHECK(iov[i].len > 0);
        memcpy(out + *n, iov[i].base, iov[i].len);
        *n += iov[i].len;
    }
    free(iov);
    free(scratch);
    return out;
}

/* data cut at two places the input picks (its last bytes) and, for a few inputs, at every
 * 7th byte: codec_scan_segs() gives codec_scan()'s answer (rc, why, and for a valid message
 * ref's offsets and views' bytes, views into data) or CODEC_SPLIT, and the composition is
 * the same bytes.  Each segment is its own allocation, so ASan sees a read past one. */
static void segs_check(const uint8_t *data, size_t size, int rc, const char *why,
                       const codec_scan_t *ref)
{
    if (size < 2)
        return;
    size_t        a = 1 + (size > 1 ? data[size - 1] * (size - 1) / 256 : 0);
    size_t        b = a + (data[size - 2] * (size - a)) / 256;
    size_t        step = (size > 64 && data[0] == 0) ? 7 : size;
    codec_bytes_t seg[64];
    uint32_t      n = 0;
    size_t        at = 0;
    while (at < size && n < 64) {
        size_t next = step < size ? at + step : n == 0 ? a : n == 1 ? b : size;
        if (next <= at)
            next = at + 1;
        if (next > size || n == 63)
            next = size;
        uint8_t *p = malloc(next - at);
        CHECK(p);
        memcpy(p, data + at, next - at);
        seg[n++] = (codec_bytes_t){p, next - at};
        at = next;
    }
    codec_segs_t   m = {.seg = seg, .n = n, .len = size};
    codec_stitch_t st = {.alloc = stitch_alloc};
    codec_scan_t   s;
    const char    *w = NULL;
    int            rs = codec_scan_segs(&m, &s, &st, &w);
    if (rs != CODEC_SPLIT) {
        CHECK(rs == rc);
        CHECK(rc == 0 ? w == NULL : w != NULL && strcmp(w, why) == 0);
    } else {
        CHECK(rc != 0 || (n > 1 && ref->ma_user_split) ||
              ref->header.off + ref->header.len > seg[0].len ||
              ref->delivery_annotations.off + ref->delivery_annotations.len > seg[0].len ||
              ref->properties.len);
    }
    if (rs == 0) {
        CHECK(memcmp(&s.header, &ref->header, 5 * sizeof(codec_range_t)) == 0);
        CHECK(s.body_off == ref->body_off && s.ma_count == ref->ma_count &&
              s.ma_user_count == ref->ma_user_count && s.ma_router_count == ref->ma_router_count &&
              memcmp(&s.ma_user, &ref->ma_user, sizeof(s.ma_user)) == 0 &&
              s.ma_user_split == ref->ma_user_split && (n == 1 || !s.ma_user_split) &&
              s.ma_user_bytes == ref->ma_user_bytes && s.ra.trace_count == ref->ra.trace_count &&
              s.ra.phase == ref->ra.phase && s.ra.stream == ref->ra.stream);
        CHECK(bytes_eq(s.ra.ingress, ref->ra.ingress) && bytes_eq(s.ra.to, ref->ra.to) &&
              bytes_eq(s.ra.trace, ref->ra.trace) && bytes_eq(s.to, ref->to) &&
              bytes_eq(s.reply_to, ref->reply_to));
        static const uint8_t id[] = "router-b";
        codec_ra_out_t ra = {.write = true, .ingress = {id, 8}, .trace = s.ra.trace,
                             .trace_count = s.ra.trace_count, .trace_append = {id, 8},
                             .to = s.ra.to, .phase = s.ra.phase};
        codec_ra_out_t ra_ref = ra;
        ra_ref.trace = ref->ra.trace;
        ra_ref.to = ref->ra.to;
        size_t   n1, n2;
        uint8_t *p1 = prefix_segs(&m, &s, &ra, &n1);
        codec_bytes_t   one = {data, size};
        codec_segs_t    whole = {.seg = &one, .n = 1, .len = size};
        uint8_t *p2 = prefix_segs(&whole, ref, &ra_ref, &n2);
        CHECK(n1 == n2 && (n1 == 0 || memcmp(p1, p2, n1) == 0));
        free(p1);
        free(p2);
    }
    while (n_stitched)
        free(stitched[--n_stitched]);
    while (n)
        free((void *)seg[--n].ptr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    codec_scan_t s;
    codec_scan_t si;
    codec_scan_t p;
    uint8_t     *copy;
    uint8_t     *copy_i;
    int          rc = scan_copy(data, size, true, &s, &copy);
    int          rci = scan_copy(data, size, false, &si, &copy_i);
    static char  big[300];

    CHECK(rc != CODEC_PARTIAL);
    {
        codec_scan_t r;
        const char  *why = NULL;
        int          rr = codec_scan(data, size, true, &r, &why);
        CHECK(rr == rc);
        segs_check(data, size, rr, why, &r);
    }
    if (rci == 0)
        CHECK(rc == 0 && scan_eq(&s, copy, &si, copy_i));
    if (rci == CODEC_INVALID)
        CHECK(rc == CODEC_INVALID);
    if (rc == 0 && rci == CODEC_PARTIAL)
        CHECK(s.body_off == size); /* no body seen yet */
    free(copy_i);
    if (rc != 0) {
        free(copy);
        return 0;
    }

    /* scanning is a pure function of the bytes; from here on s has views into data */
    CHECK(codec_scan(data, size, true, &p, NULL) == 0 && scan_eq(&s, copy, &p, data));
    free(copy);
    s = p;

    /* the interior readers: the trace yields exactly trace_count ids inside the trace, and the
     * priority is read from inside the header (or is the default) */
    codec_bytes_t tr = s.ra.trace, id;
    uint32_t      ids = 0;
    while (codec_trace_next(&tr, &id)) {
        CHECK(id.ptr >= s.ra.trace.ptr && id.ptr + id.len <= s.ra.trace.ptr + s.ra.trace.len);
        ids++;
    }
    CHECK(tr.len == 0 && ids == (s.ra.trace.ptr ? s.ra.trace_count : 0));
    uint8_t prio = codec_header_priority(data, &s);
    CHECK(s.header.len || prio == CODEC_PRIORITY_DEFAULT);

    /* prefixes of a valid message are never invalid while incomplete */
    for (size_t i = 1; i <= 8; i++) {
        size_t k = size * i / 9;
        int    r = scan_copy(data, k, false, &p, &copy);
        CHECK(r == 0 || r == CODEC_PARTIAL);
        if (r == 0)
            CHECK(p.body_off == s.body_off);
        free(copy);
    }

    memset(big, 'x', sizeof(big));
    const codec_ra_out_t variants[] = {
        /* stripAnnotations out: user keys only */
        {.write = false},
        /* nothing to write: the fast path when the input has no router keys */
        {.write = true},
        /* an interior router forwarding: everything carried over plus itself on the trace */
        {
            .write = true,
            .ingress = s.ra.ingress.ptr ? s.ra.ingress : (codec_bytes_t){(const uint8_t *)"0/A", 3},
            .trace = s.ra.trace,
            .trace_count = s.ra.trace_count,
            .trace_append = {(const uint8_t *)"0/B", 3},
            .to = s.ra.to,
            .phase = s.ra.phase,
            .stream = s.ra.stream,
        },
        /* wide values: str32, int, list32 */
        {
            .write = true,
            .ingress = {(const uint8_t *)big, 256},
            .trace_append = {(const uint8_t *)big, 300},
            .to = {(const uint8_t *)big, 255},
            .phase = -129,
            .stream = 1,
        },
    };
    for (size_t i = 0; i < sizeof(variants) / sizeof(variants[0]); i++)
        compose_check(data, size, &s, &variants[i]);
    return 0;
}
