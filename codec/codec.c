/* codec/codec.c: the message section scanner (codec_scan) and the message-annotations
 * rewriter (codec_compose_prefix).
 *
 * Threads: none of its own; every function is thread-safe (no state, no allocation, no
 * logging), so this file uses no _CT/_WT suffixes.  It owns nothing: it reads the caller's
 * message bytes and writes only into the caller's scan struct, scratch buffer and iov array.
 * It must never read outside msg[0, len), never allocate, and never do per-pair work for a
 * user annotation beyond finding where the pair ends.
 *
 * DESIGN: one forward pass over the leading sections.  Each section's bounds come from its
 * list/map header, so a section that is not fully present is recognised before any of its
 * elements are read (CODEC_PARTIAL, or CODEC_INVALID when the input is complete); inside a
 * section every read is bounded by the section's end, and overrunning it is CODEC_INVALID.
 * User values are skipped by their encoded size (codec__value_skip, O(1) per value); only
 * the router's keys (symbols starting "x-opt-qd.") have their values decoded.
 */
#include "codec/codec_int.h"

#include <assert.h>
#include <string.h>

// clang-format off
const uint8_t codec__class[256] = {
    [CODEC_CODE_DESCRIBED]  = CODEC_CLASS_DESCRIBED,
    [CODEC_CODE_NULL]       = CODEC_CLASS_W0,
    [CODEC_CODE_TRUE]       = CODEC_CLASS_W0,
    [CODEC_CODE_FALSE]      = CODEC_CLASS_W0,
    [CODEC_CODE_UINT0]      = CODEC_CLASS_W0,
    [CODEC_CODE_ULONG0]     = CODEC_CLASS_W0,
    [CODEC_CODE_LIST0]      = CODEC_CLASS_W0,
    [CODEC_CODE_UBYTE]      = CODEC_CLASS_W1,
    [CODEC_CODE_BYTE]       = CODEC_CLASS_W1,
    [CODEC_CODE_SMALLUINT]  = CODEC_CLASS_W1,
    [CODEC_CODE_SMALLULONG] = CODEC_CLASS_W1,
    [CODEC_CODE_SMALLINT]   = CODEC_CLASS_W1,
    [CODEC_CODE_SMALLLONG]  = CODEC_CLASS_W1,
    [CODEC_CODE_BOOLEAN]    = CODEC_CLASS_W1,
    [CODEC_CODE_USHORT]     = CODEC_CLASS_W2,
    [CODEC_CODE_SHORT]      = CODEC_CLASS_W2,
    [CODEC_CODE_UINT]       = CODEC_CLASS_W4,
    [CODEC_CODE_INT]        = CODEC_CLASS_W4,
    [CODEC_CODE_FLOAT]      = CODEC_CLASS_W4,
    [CODEC_CODE_CHAR]       = CODEC_CLASS_W4,
    [CODEC_CODE_DECIMAL32]  = CODEC_CLASS_W4,
    [CODEC_CODE_ULONG]      = CODEC_CLASS_W8,
    [CODEC_CODE_LONG]       = CODEC_CLASS_W8,
    [CODEC_CODE_DOUBLE]     = CODEC_CLASS_W8,
    [CODEC_CODE_TIMESTAMP]  = CODEC_CLASS_W8,
    [CODEC_CODE_DECIMAL64]  = CODEC_CLASS_W8,
    [CODEC_CODE_DECIMAL128] = CODEC_CLASS_W16,
    [CODEC_CODE_UUID]       = CODEC_CLASS_W16,
    [CODEC_CODE_VBIN8]      = CODEC_CLASS_VAR1,
    [CODEC_CODE_STR8]       = CODEC_CLASS_VAR1,
    [CODEC_CODE_SYM8]       = CODEC_CLASS_VAR1,
    [CODEC_CODE_VBIN32]     = CODEC_CLASS_VAR4,
    [CODEC_CODE_STR32]      = CODEC_CLASS_VAR4,
    [CODEC_CODE_SYM32]      = CODEC_CLASS_VAR4,
    [CODEC_CODE_LIST8]      = CODEC_CLASS_COMPOUND1,
    [CODEC_CODE_MAP8]       = CODEC_CLASS_COMPOUND1,
    [CODEC_CODE_LIST32]     = CODEC_CLASS_COMPOUND4,
    [CODEC_CODE_MAP32]      = CODEC_CLASS_COMPOUND4,
    [CODEC_CODE_ARRAY8]     = CODEC_CLASS_ARRAY1,
    [CODEC_CODE_ARRAY32]    = CODEC_CLASS_ARRAY4,
};

/* Bytes after the code of a fixed-width class; also the smallest element of an array of that
 * class (the array's elements carry no code), used to check an array's count against its size. */
const uint8_t codec__class_width[CODEC_CLASS_DESCRIBED] = {
    [CODEC_CLASS_W0] = 0,  [CODEC_CLASS_W1] = 1,  [CODEC_CLASS_W2] = 2,   [CODEC_CLASS_W4] = 4,
    [CODEC_CLASS_W8] = 8,  [CODEC_CLASS_W16] = 16,
    [CODEC_CLASS_VAR1] = 1,      /* size:1 */
    [CODEC_CLASS_VAR4] = 4,      /* size:4 */
    [CODEC_CLASS_COMPOUND1] = 2, /* size:1 count:1 */
    [CODEC_CLASS_COMPOUND4] = 8, /* size:4 count:4 */
    [CODEC_CLASS_ARRAY1] = 3,    /* size:1 count:1 ctor */
    [CODEC_CLASS_ARRAY4] = 9,    /* size:4 count:4 ctor */
};

/* Symbolic section descriptors, indexed by code - 0x70 (part 3, 3.2). */
static const char *const section_names[] = {
    "amqp:header:list",
    "amqp:delivery-annotations:map",
    "amqp:message-annotations:map",
    "amqp:properties:list",
    "amqp:application-properties:map",
    "amqp:data:binary",
    "amqp:amqp-sequence:list",
    "amqp:amqp-value:*",
    "amqp:footer:map",
};
#define SECTION_NAME_MAX 31 /* strlen("amqp:application-properties:map") */

#define CODEC__WHY_TEXT(id, p, text) p ": " text,
#define CODEC__WHY_ROW(id, name)     {CODEC_ERRORS(CODEC__WHY_TEXT, name)},
static const char *const why_texts[CODEC_PART_COUNT][CODEC_ERR_COUNT] = {
    CODEC_PARTS(CODEC__WHY_ROW)
};
// clang-format on

static_assert(sizeof(section_names) / sizeof(section_names[0]) == 9, "one name per section");
static_assert(CODEC_CODE_MAP8 == (CODEC_CODE_LIST8 | 1) &&
                  CODEC_CODE_MAP32 == (CODEC_CODE_LIST32 | 1),
              "maps are lists with the low bit set");

const char *codec__why(codec_part_t part, codec_err_t err)
{
    if (part >= CODEC_PART_COUNT || err >= CODEC_ERR_COUNT)
        return "codec: unknown error";
    return why_texts[part][err];
}

static inline uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline uint64_t be64(const uint8_t *p)
{
    return (uint64_t)be32(p) << 32 | be32(p + 4);
}

static inline const uint8_t *fail(codec_err_t *err, codec_err_t e)
{
    *err = e;
    return NULL;
}

/* Check an array's element constructor and that `count` elements can fit in [q, e): exactly
 * for fixed-width elements, as a lower bound for the others; the array starts at p (its format
 * code).  Returns e, or NULL with *err. */
static const uint8_t *array_check(const uint8_t *p, const uint8_t *q, const uint8_t *e,
                                  uint32_t count, codec_err_t *err);

/* plain_skip() for what its fast path leaves: the wider and compound encodings, and errors. */
__attribute__((noinline)) static const uint8_t *
plain_skip_slow(const uint8_t *p, const uint8_t *end, codec_err_t *err)
{
    size_t   avail = (size_t)(end - p);
    uint32_t size;
    uint32_t count;
    uint8_t  cls = codec__class[*p];

    switch (cls) {
    case CODEC_CLASS_W0:
    case CODEC_CLASS_W1:
    case CODEC_CLASS_W2:
    case CODEC_CLASS_W4:
    case CODEC_CLASS_W8:
    case CODEC_CLASS_W16:
        if (avail - 1 < codec__class_width[cls])
            return fail(err, CODEC_ERR_OVERRUN);
        return p + 1 + codec__class_width[cls];
    case CODEC_CLASS_VAR1:
        if (avail < 2 || p[1] > avail - 2)
            return fail(err, CODEC_ERR_OVERRUN);
        return p + 2 + p[1];
    case CODEC_CLASS_VAR4:
        if (avail < 5 || (size = be32(p + 1)) > avail - 5)
            return fail(err, CODEC_ERR_OVERRUN);
        return p + 5 + size;
    case CODEC_CLASS_COMPOUND1:
        if (avail < 2 || (size = p[1]) > avail - 2)
            return fail(err, CODEC_ERR_OVERRUN);
        if (size < 1)
            return fail(err, CODEC_ERR_COMPOUND_SIZE);
        count = p[2];
        goto compound;
    case CODEC_CLASS_COMPOUND4:
        if (avail < 5 || (size = be32(p + 1)) > avail - 5)
            return fail(err, CODEC_ERR_OVERRUN);
        if (size < 4)
            return fail(err, CODEC_ERR_COMPOUND_SIZE);
        count = be32(p + 5);
        /* each element takes at least one byte; no elements, no bytes */
        if (count > size - 4)
            return fail(err, CODEC_ERR_COMPOUND_COUNT);
        if (count == 0 && size != 4)
            return fail(err, CODEC_ERR_COMPOUND_FILL);
        if ((*p & 1) && (count & 1))
            return fail(err, CODEC_ERR_MAP_ODD);
        return p + 5 + size;
    case CODEC_CLASS_ARRAY1:
        if (avail < 2 || (size = p[1]) > avail - 2)
            return fail(err, CODEC_ERR_OVERRUN);
        if (size < 1)
            return fail(err, CODEC_ERR_COMPOUND_SIZE);
        return array_check(p, p + 3, p + 2 + size, p[2], err);
    case CODEC_CLASS_ARRAY4:
        if (avail < 5 || (size = be32(p + 1)) > avail - 5)
            return fail(err, CODEC_ERR_OVERRUN);
        if (size < 4)
            return fail(err, CODEC_ERR_COMPOUND_SIZE);
        return array_check(p, p + 9, p + 5 + size, be32(p + 5), err);
    case CODEC_CLASS_DESCRIBED:
        return fail(err, CODEC_ERR_DESC_DESCRIBED);
    default:
        return fail(err, CODEC_ERR_BAD_CODE);
    }
compound:
    if (count > size - 1)
        return fail(err, CODEC_ERR_COMPOUND_COUNT);
    if (count == 0 && size != 1)
        return fail(err, CODEC_ERR_COMPOUND_FILL);
    if ((*p & 1) && (count & 1))
        return fail(err, CODEC_ERR_MAP_ODD);
    return p + 2 + size;
}

/* Skip one value that is not described (the code at p is not 0x00); p < end.  The encodings
 * annotations are made of (str8/sym8/vbin8 and the fixed widths) are handled inline. */
static inline const uint8_t *plain_skip(const uint8_t *p, const uint8_t *end, codec_err_t *err)
{
    size_t  avail = (size_t)(end - p);
    uint8_t cls = codec__class[*p];

    if (__builtin_expect(cls == CODEC_CLASS_VAR1, 1)) {
        if (avail < 2 || p[1] > avail - 2)
            return fail(err, CODEC_ERR_OVERRUN);
        return p + 2 + p[1];
    }
    if ((unsigned)(cls - CODEC_CLASS_W0) <= (unsigned)(CODEC_CLASS_W16 - CODEC_CLASS_W0)) {
        if (avail - 1 < codec__class_width[cls])
            return fail(err, CODEC_ERR_OVERRUN);
        return p + 1 + codec__class_width[cls];
    }
    return plain_skip_slow(p, end, err);
}

static const uint8_t *array_check(const uint8_t *p, const uint8_t *q, const uint8_t *e,
                                  uint32_t count, codec_err_t *err)
{
    uint8_t  cls;
    uint64_t room;
    uint64_t values = 1 + (uint64_t)count; /* the array and its elements */

    if (q >= e)
        return fail(err, CODEC_ERR_ARRAY_CTOR);
    if (*q == CODEC_CODE_DESCRIBED) {
        values++; /* the descriptor */
        /* described element constructor: 0x00 descriptor code */
        if (++q >= e)
            return fail(err, CODEC_ERR_ARRAY_CTOR);
        if (*q == CODEC_CODE_DESCRIBED)
            return fail(err, CODEC_ERR_DESC_DESCRIBED);
        if (!(q = plain_skip_slow(q, e, err)))
            return NULL;
        if (q >= e || *q == CODEC_CODE_DESCRIBED)
            return fail(err, CODEC_ERR_ARRAY_CTOR);
    }
    cls = codec__class[*q++];
    room = (uint64_t)(e - q);
    switch (cls) {
    case CODEC_CLASS_W0:
        /* zero-width elements take no bytes at all: at most one value per byte of the array
         * (DESIGN.md, "Work bounded by bytes"), the rule every other element meets by itself */
        if (room != 0 || values > (uint64_t)(e - p))
            return fail(err, CODEC_ERR_ARRAY_COUNT);
        return e;
    case CODEC_CLASS_W1:
    case CODEC_CLASS_W2:
    case CODEC_CLASS_W4:
    case CODEC_CLASS_W8:
    case CODEC_CLASS_W16:
        if ((uint64_t)count * codec__class_width[cls] != room)
            return fail(err, CODEC_ERR_ARRAY_COUNT);
        return e;
    case CODEC_CLASS_VAR1:
    case CODEC_CLASS_VAR4:
    case CODEC_CLASS_COMPOUND1:
    case CODEC_CLASS_COMPOUND4:
    case CODEC_CLASS_ARRAY1:
    case CODEC_CLASS_ARRAY4:
        /* at least the elements' size fields; nothing at all for no elements */
        if ((uint64_t)count * codec__class_width[cls] > room || (count == 0 && room != 0))
            return fail(err, CODEC_ERR_ARRAY_COUNT);
        return e;
    default:
        return fail(err, CODEC_ERR_ARRAY_CTOR);
    }
}

/* value_skip() of a described value. */
__attribute__((noinline)) static const uint8_t *described_skip(const uint8_t *p, const uint8_t *end,
                                                               codec_err_t *err)
{
    /* A described value is a descriptor then a value, which may itself be described: loop
     * rather than recurse so that nesting costs no stack. */
    while (*p == CODEC_CODE_DESCRIBED) {
        if (++p >= end)
            return fail(err, CODEC_ERR_OVERRUN);
        if (*p == CODEC_CODE_DESCRIBED)
            return fail(err, CODEC_ERR_DESC_DESCRIBED);
        if (!(p = plain_skip(p, end, err)))
            return NULL;
        if (p >= end)
            return fail(err, CODEC_ERR_OVERRUN);
    }
    return plain_skip(p, end, err);
}

/* codec__value_skip(), inlined into the loops of this file. */
static inline const uint8_t *value_skip(const uint8_t *p, const uint8_t *end, codec_err_t *err)
{
    if (p >= end)
        return fail(err, CODEC_ERR_OVERRUN);
    if (__builtin_expect(*p != CODEC_CODE_DESCRIBED, 1))
        return plain_skip(p, end, err);
    return described_skip(p, end, err);
}

const uint8_t *codec__value_skip(const uint8_t *p, const uint8_t *end, codec_err_t *err)
{
    return value_skip(p, end, err);
}

int codec_section_by_name(const uint8_t *name, size_t len)
{
    for (size_t i = 0; i < sizeof(section_names) / sizeof(section_names[0]); i++)
        if (strlen(section_names[i]) == len && memcmp(section_names[i], name, len) == 0)
            return CODEC_SECTION_HEADER + (int)i;
    return -1;
}

int codec__descriptor_read(const uint8_t *msg, size_t len, int *code, size_t *desc_len,
                           codec_err_t *err)
{
    uint64_t v;
    size_t   h;
    size_t   n;
    int      s;

    if (len < 1)
        return CODEC_PARTIAL;
    if (msg[0] != CODEC_CODE_DESCRIBED)
        return *err = CODEC_ERR_NOT_SECTION, CODEC_INVALID;
    if (len < 2)
        return CODEC_PARTIAL;
    switch (msg[1]) {
    case CODEC_CODE_SMALLULONG:
        if (len < 3)
            return CODEC_PARTIAL;
        v = msg[2];
        *desc_len = 3;
        break;
    case CODEC_CODE_ULONG:
        if (len < 10)
            return CODEC_PARTIAL;
        v = be64(msg + 2);
        *desc_len = 10;
        break;
    case CODEC_CODE_SYM8:
    case CODEC_CODE_SYM32:
        h = msg[1] == CODEC_CODE_SYM8 ? 3 : 6;
        if (len < h)
            return CODEC_PARTIAL;
        n = h == 3 ? msg[2] : be32(msg + 2);
        /* known names are short: reject a long one now rather than wait for it to arrive */
        if (n > SECTION_NAME_MAX)
            return *err = CODEC_ERR_UNKNOWN_SECTION, CODEC_INVALID;
        if (len - h < n)
            return CODEC_PARTIAL;
        s = codec_section_by_name(msg + h, n);
        v = s < 0 ? 0 : (uint64_t)s;
        *desc_len = h + n;
        break;
    default:
        return *err = CODEC_ERR_DESCRIPTOR, CODEC_INVALID;
    }
    if (v < CODEC_SECTION_HEADER || v > CODEC_SECTION_FOOTER)
        return *err = CODEC_ERR_UNKNOWN_SECTION, CODEC_INVALID;
    *code = (int)v;
    return 0;
}

/* Open the list or map that is a section's value, at p (avail bytes of the message from p on;
 * at most its first 9 are read).  On success returns 0 with *body the offset from p of its
 * first element, *count its element count and *end the offset from p just past it.
 * CODEC_PARTIAL when the value is not wholly present; CODEC_INVALID with *err. */
static int section_value_open(const uint8_t *p, size_t avail, bool map, size_t *body,
                              uint32_t *count, size_t *end, codec_err_t *err)
{
    size_t size;
    size_t cw; /* width of the size and count fields */

    if (avail < 1)
        return CODEC_PARTIAL;
    switch (p[0]) {
    case CODEC_CODE_LIST0:
        if (map)
            break;
        *body = *end = 1;
        *count = 0;
        return 0;
    case CODEC_CODE_LIST8:
    case CODEC_CODE_MAP8:
    case CODEC_CODE_LIST32:
    case CODEC_CODE_MAP32:
        if ((p[0] & 1) != map)
            break;
        cw = (p[0] & 0xf0) == 0xc0 ? 1 : 4;
        if (avail < 1 + cw)
            return CODEC_PARTIAL;
        size = cw == 1 ? p[1] : be32(p + 1);
        if (size < cw)
            return *err = CODEC_ERR_COMPOUND_SIZE, CODEC_INVALID;
        if (avail < 1 + 2 * cw)
            return CODEC_PARTIAL;
        *count = cw == 1 ? p[2] : be32(p + 5);
        /* each element takes at least one byte: reject an impossible count before waiting
         * for the rest of the section */
        if (*count > size - cw)
            return *err = CODEC_ERR_COMPOUND_COUNT, CODEC_INVALID;
        if (size > avail - 1 - cw)
            return CODEC_PARTIAL;
        *body = 1 + 2 * cw;
        *end = 1 + cw + size;
        return 0;
    default:
        break;
    }
    *err = map ? CODEC_ERR_NOT_MAP : CODEC_ERR_NOT_LIST;
    return CODEC_INVALID;
}

/* Skip `count` elements from p; they must end exactly at end. */
static const uint8_t *elements_skip(const uint8_t *p, const uint8_t *end, uint32_t count,
                                    codec_err_t *err)
{
    while (count--) {
        if (!(p = value_skip(p, end, err)))
            return NULL;
    }
    return p == end ? p : fail(err, CODEC_ERR_COMPOUND_FILL);
}

/* An annotations-map key (symbol or ulong): returns its end, or NULL with *err. */
static inline const uint8_t *key_skip(const uint8_t *p, const uint8_t *end, codec_err_t *err)
{
    if (p >= end)
        return fail(err, CODEC_ERR_OVERRUN);
    switch (*p) {
    case CODEC_CODE_SYM8:
    case CODEC_CODE_SYM32:
    case CODEC_CODE_ULONG0:
    case CODEC_CODE_SMALLULONG:
    case CODEC_CODE_ULONG:
        return plain_skip(p, end, err);
    default:
        return fail(err, CODEC_ERR_KEY_TYPE);
    }
}

/* Walk a delivery-annotations map: keys symbol or ulong, values skipped. */
static const uint8_t *annotations_skip(const uint8_t *p, const uint8_t *end, uint32_t count,
                                       codec_err_t *err)
{
    if (count & 1)
        return fail(err, CODEC_ERR_MAP_ODD);
    for (count /= 2; count; count--) {
        if (!(p = key_skip(p, end, err)) || !(p = value_skip(p, end, err)))
            return NULL;
    }
    return p == end ? p : fail(err, CODEC_ERR_COMPOUND_FILL);
}

/* A string or symbol value [v, e) (already bounds-checked) as a view; false for other types. */
static inline bool string_view(const uint8_t *v, const uint8_t *e, bool symbol_ok,
                               codec_bytes_t *out)
{
    switch (*v) {
    case CODEC_CODE_SYM8:
        if (!symbol_ok)
            return false;
        /* fall through */
    case CODEC_CODE_STR8:
        out->ptr = v + 2;
        break;
    case CODEC_CODE_SYM32:
        if (!symbol_ok)
            return false;
        /* fall through */
    case CODEC_CODE_STR32:
        out->ptr = v + 5;
        break;
    default:
        return false;
    }
    out->len = (size_t)(e - out->ptr);
    return true;
}

/* An integer value [v, e) in int32 range; false for other types or out of range. */
static bool int_value(const uint8_t *v, int32_t *out)
{
    int64_t  x;
    uint64_t u;

    switch (*v) {
    case CODEC_CODE_UINT0:
    case CODEC_CODE_ULONG0:
        x = 0;
        break;
    case CODEC_CODE_UBYTE:
    case CODEC_CODE_SMALLUINT:
    case CODEC_CODE_SMALLULONG:
        x = v[1];
        break;
    case CODEC_CODE_BYTE:
    case CODEC_CODE_SMALLINT:
    case CODEC_CODE_SMALLLONG:
        x = (int8_t)v[1];
        break;
    case CODEC_CODE_USHORT:
        x = (uint16_t)(v[1] << 8 | v[2]);
        break;
    case CODEC_CODE_SHORT:
        x = (int16_t)(uint16_t)(v[1] << 8 | v[2]);
        break;
    case CODEC_CODE_UINT:
        x = be32(v + 1);
        break;
    case CODEC_CODE_INT:
        x = (int32_t)be32(v + 1);
        break;
    case CODEC_CODE_ULONG:
        u = be64(v + 1);
        if (u > INT32_MAX)
            return false;
        x = (int64_t)u;
        break;
    case CODEC_CODE_LONG:
        x = (int64_t)be64(v + 1);
        break;
    default:
        return false;
    }
    if (x < INT32_MIN || x > INT32_MAX)
        return false;
    *out = (int32_t)x;
    return true;
}

/* x-opt-qd.trace: a list of strings or symbols; records the elements as one view. */
static bool trace_value(const uint8_t *v, const uint8_t *e, codec_ra_t *ra, codec_err_t *err)
{
    const uint8_t *p;
    uint32_t       count;

    switch (*v) {
    case CODEC_CODE_LIST0:
        p = v + 1;
        count = 0;
        break;
    case CODEC_CODE_LIST8:
        p = v + 3;
        count = v[2];
        break;
    case CODEC_CODE_LIST32:
        p = v + 9;
        count = be32(v + 5);
        break;
    default:
        *err = CODEC_ERR_RA_TRACE;
        return false;
    }
    ra->trace.ptr = p;
    ra->trace.len = (size_t)(e - p);
    ra->trace_count = count;
    for (; count; count--) {
        if (p >= e || (*p != CODEC_CODE_STR8 && *p != CODEC_CODE_STR32 && *p != CODEC_CODE_SYM8 &&
                       *p != CODEC_CODE_SYM32)) {
            *err = p >= e ? CODEC_ERR_OVERRUN : CODEC_ERR_RA_TRACE_ELEM;
            return false;
        }
        if (!(p = plain_skip(p, e, err)))
            return false;
    }
    if (p != e) {
        *err = CODEC_ERR_COMPOUND_FILL;
        return false;
    }
    return true;
}

enum {
    RA_SEEN_TO = 1 << 0,
    RA_SEEN_TRACE = 1 << 1,
    RA_SEEN_PHASE = 1 << 2,
    RA_SEEN_STREAM = 1 << 3,
    RA_SEEN_INGRESS = 1 << 4,
};

/* Decode the value [v, e) of router key "x-opt-qd.<name>" (name[0, n)).  Keys the router does
 * not use (x-opt-qd.class, anything else in the namespace) are accepted and ignored. */
static bool ra_value(const uint8_t *name, size_t n, const uint8_t *v, const uint8_t *e,
                     codec_ra_t *ra, unsigned *seen, codec_err_t *err)
{
    unsigned bit = 0;
    bool     ok = true;

    if (n == 2 && memcmp(name, "to", 2) == 0) {
        bit = RA_SEEN_TO;
        ok = string_view(v, e, false, &ra->to) || (*err = CODEC_ERR_RA_TO, false);
    } else if (n == 7 && memcmp(name, "ingress", 7) == 0) {
        bit = RA_SEEN_INGRESS;
        ok = string_view(v, e, false, &ra->ingress) || (*err = CODEC_ERR_RA_INGRESS, false);
    } else if (n == 5 && memcmp(name, "trace", 5) == 0) {
        bit = RA_SEEN_TRACE;
        ok = trace_value(v, e, ra, err);
    } else if (n == 5 && memcmp(name, "phase", 5) == 0) {
        bit = RA_SEEN_PHASE;
        ok = int_value(v, &ra->phase) || (*err = CODEC_ERR_RA_PHASE, false);
    } else if (n == 6 && memcmp(name, "stream", 6) == 0) {
        bit = RA_SEEN_STREAM;
        ok = int_value(v, &ra->stream) || (*err = CODEC_ERR_RA_STREAM, false);
    }
    if (*seen & bit) {
        *err = CODEC_ERR_RA_DUP;
        return false;
    }
    *seen |= bit;
    return ok;
}

/* ---- a message in segments ----------------------------------------------------------------
 *
 * codec_scan() sees its message as one segment; codec_scan_segs() and the composer walk a
 * list.  segw_t is a position among the segments, moved forward (or back) to the segment that
 * holds a message offset. */
typedef struct segw {
    const codec_segs_t *m;
    uint32_t            i;     /* current segment */
    size_t              start; /* message offset of its first byte */
} segw_t;

/* The bytes at message offset off (< m->len): where they lie, and *room of them in a row. */
static inline const uint8_t *segw_at(segw_t *w, size_t off, size_t *room)
{
    while (off < w->start)
        w->start -= w->m->seg[--w->i].len;
    while (off - w->start >= w->m->seg[w->i].len)
        w->start += w->m->seg[w->i++].len;
    *room = w->m->seg[w->i].len - (off - w->start);
    return w->m->seg[w->i].ptr + (off - w->start);
}

/* Copy message bytes [off, off + n) to t. */
static void segw_copy(segw_t *w, size_t off, size_t n, uint8_t *t)
{
    while (n) {
        size_t         room;
        const uint8_t *p = segw_at(w, off, &room);
        size_t         k = room < n ? room : n;
        memcpy(t, p, k);
        t += k;
        off += k;
        n -= k;
    }
}

/* ---- message annotations ---------------------------------------------------------------------- */

/* One pair of an annotations map at p[0, len): *v is its value's offset, *n its key's symbol
 * length (0 for a ulong key), *e its end.  Per pair this reads the key's code and length and
 * the value's code and length, nothing more.  False with *err. */
static inline bool pair_parse(const uint8_t *p, size_t len, size_t *vo, size_t *no, size_t *eo,
                              codec_err_t *err)
{
    size_t  n = 0;
    size_t  v;
    size_t  e;
    uint8_t c;

    /* a pair takes at least 2 bytes (ulong0 key, null value) */
    if (len < 2)
        return *err = CODEC_ERR_OVERRUN, false;
    c = p[0];
    if (__builtin_expect(c == CODEC_CODE_SYM8, 1)) {
        n = p[1];
        v = 2 + n;
    } else if (c == CODEC_CODE_SYM32) {
        if (len < 5 || (n = be32(p + 1)) > len - 5)
            return *err = CODEC_ERR_OVERRUN, false;
        v = 5 + n;
    } else if (c == CODEC_CODE_ULONG0) {
        v = 1;
    } else if (c == CODEC_CODE_SMALLULONG) {
        v = 2;
    } else if (c == CODEC_CODE_ULONG) {
        v = 9;
    } else {
        return *err = CODEC_ERR_KEY_TYPE, false;
    }
    /* the key fits and the value has at least its code */
    if (v >= len)
        return *err = CODEC_ERR_OVERRUN, false;
    if (__builtin_expect(codec__class[p[v]] == CODEC_CLASS_VAR1, 1)) {
        if (len - v < 2 || (e = v + 2 + p[v + 1]) > len)
            return *err = CODEC_ERR_OVERRUN, false;
    } else {
        const uint8_t *q = value_skip(p + v, p + len, err);
        if (!q)
            return false;
        e = (size_t)(q - p);
    }
    *vo = v;
    *no = n;
    *eo = e;
    return true;
}

/* A pair that runs past its segment's end: copied whole, into tmp when it fits, else into
 * memory from the caller's stitch (growing by 4 until the pair fits or the section ends).
 * Returns the copy (pair_parse's results in *v, *n, *e), or NULL with *err. */
static const uint8_t *pair_stitch(segw_t *w, size_t off, size_t avail, uint8_t *tmp,
                                  size_t tmp_len, const codec_stitch_t *st, size_t *v, size_t *n,
                                  size_t *e, codec_err_t *err)
{
    for (size_t want = tmp_len;; want *= 4) {
        size_t   len = want < avail ? want : avail;
        uint8_t *t = len <= tmp_len ? tmp : st->alloc(st->ctx, len);
        segw_copy(w, off, len, t);
        if (pair_parse(t, len, v, n, e, err))
            return t;
        if (*err != CODEC_ERR_OVERRUN || len == avail)
            return NULL;
    }
}

/* The message-annotations map, [body, body + len) of the message: the hot loop.  Router pairs
 * are decoded, and their positions tell where the user pairs are: the user pairs are whatever
 * lies outside the router pairs.  Offsets (not pointers) are used so that lengths read from
 * the input can be added without any risk of overflow.  A pair is parsed where it lies; one
 * that a segment's end cuts is copied first (pair_stitch), and a router pair's copy is kept
 * (st) since its views must outlive the scan.  Without st the message is one segment. */
static int ma_scan(const codec_segs_t *m, size_t body, size_t len, uint32_t count,
                   codec_scan_t *s, const codec_stitch_t *st, codec_err_t *err)
{
    segw_t   w = {.m = m};
    size_t   i = 0;            /* the pair being read */
    size_t   rs = 0;           /* first router pair's start */
    size_t   re = 0;           /* last router pair's end */
    size_t   gap_start = 0;    /* the last run of user pairs between two router pairs */
    size_t   gap_end = 0;      /* (its end) */
    uint32_t gaps = 0;         /* runs of user pairs between router pairs */
    size_t   router_bytes = 0; /* encoded size of the router pairs */
    uint32_t router = 0;       /* router pairs */
    unsigned seen = 0;         /* RA_SEEN_* bits of the known router keys met */
    uint8_t  tmp[256];         /* a cut pair, while it is parsed */
    const uint8_t *base = NULL; /* the segment holding [lo, hi) of the section (at base) */
    size_t         lo = 0;
    size_t         hi = 0;

    if (count & 1)
        return *err = CODEC_ERR_MAP_ODD, CODEC_INVALID;
    for (uint32_t left = count / 2; left; left--) {
        size_t         k = i; /* key */
        size_t         v, n, e, room;
        size_t         avail = len - i;
        const uint8_t *p;

        if (avail < 2) /* a pair takes at least 2 bytes (and i may be the message's end) */
            return *err = CODEC_ERR_OVERRUN, CODEC_INVALID;
        if (__builtin_expect(i >= hi, 0) || i < lo) {
            base = segw_at(&w, body + i, &room);
            lo = i;
            hi = i + room;
        }
        p = base + (i - lo);
        room = hi - i;

        if (__builtin_expect(room >= avail, 1)) {
            if (!pair_parse(p, avail, &v, &n, &e, err))
                return CODEC_INVALID;
        } else if (!pair_parse(p, room, &v, &n, &e, err)) {
            if (*err != CODEC_ERR_OVERRUN ||
                !(p = pair_stitch(&w, body + i, avail, tmp, sizeof(tmp), st, &v, &n, &e, err)))
                return CODEC_INVALID;
        }
        if (n >= CODEC_RA_PREFIX_LEN) {
            const uint8_t *name = p + v - n;
            if (__builtin_expect(memcmp(name, CODEC_RA_PREFIX, CODEC_RA_PREFIX_LEN) == 0, 0)) {
                if (p == tmp) { /* its views must stay */
                    uint8_t *keep = st->alloc(st->ctx, e);
                    memcpy(keep, tmp, e);
                    p = keep;
                    name = p + v - n;
                }
                if (!ra_value(name + CODEC_RA_PREFIX_LEN, n - CODEC_RA_PREFIX_LEN, p + v, p + e,
                              &s->ra, &seen, err))
                    return CODEC_INVALID;
                if (router++ == 0) {
                    rs = k;
                } else if (k != re) {
                    gaps++;
                    gap_start = re;
                    gap_end = k;
                }
                re = k + e;
                router_bytes += e;
            }
        }
        i = k + e;
    }
    if (i != len)
        return *err = CODEC_ERR_COMPOUND_FILL, CODEC_INVALID;

    /* the user pairs: before the first router pair, between router pairs, after the last */
    uint32_t runs = router ? (rs > 0) + gaps + (re < len) : (len > 0);
    size_t   run_start = router == 0 ? 0 : rs > 0 ? 0 : gaps ? gap_start : re;
    size_t   run_end = router == 0 ? len : rs > 0 ? rs : gaps ? gap_end : len;

    s->ma_count = count / 2;
    s->ma_router_count = router;
    s->ma_user_count = count / 2 - router;
    s->ma_user_bytes = (uint32_t)(len - router_bytes);
    s->ma_user_split = runs > 1;
    if (runs == 1) {
        s->ma_user.off = (uint32_t)(body + run_start);
        s->ma_user.len = (uint32_t)(run_end - run_start);
    }
    return 0;
}

/* properties: walk every field; to (2) and reply-to (4) must be string, symbol or null. */
static int properties_scan(const uint8_t *p, const uint8_t *end, uint32_t count, codec_scan_t *s,
                           codec_err_t *err)
{
    const uint8_t *e;

    for (uint32_t i = 0; i < count; i++, p = e) {
        if (!(e = value_skip(p, end, err)))
            return CODEC_INVALID;
        if (i != 2 && i != 4)
            continue;
        codec_bytes_t *out = i == 2 ? &s->to : &s->reply_to;
        if (*p != CODEC_CODE_NULL && !string_view(p, e, true, out))
            return *err = i == 2 ? CODEC_ERR_PROP_TO : CODEC_ERR_PROP_REPLY_TO, CODEC_INVALID;
    }
    if (p != end)
        return *err = CODEC_ERR_COMPOUND_FILL, CODEC_INVALID;
    return 0;
}

static int scan_fail(int rc, bool complete, codec_part_t part, codec_err_t err, const char **why)
{
    if (rc == CODEC_PARTIAL && complete) {
        rc = CODEC_INVALID;
        part = CODEC_PART_MESSAGE;
        err = CODEC_ERR_TRUNCATED;
    } else if (rc == CODEC_PARTIAL) {
        err = CODEC_ERR_TRUNCATED;
    }
    if (why)
        *why = codec__why(part, err);
    return rc;
}

/* codec_scan() and codec_scan_segs(): st is NULL for the first (one segment). */
static int scan_msg(const codec_segs_t *m, bool complete, codec_scan_t *scan,
                    const codec_stitch_t *st, const char **why)
{
    const size_t len = m->len;
    size_t       off = 0;
    int          last = CODEC_SECTION_HEADER - 1;
    codec_err_t  err = CODEC_ERR_NONE;
    segw_t       w = {.m = m};
    uint8_t      hb[64]; /* a section's start that a segment's end cuts: descriptor (at most
                            6 + SECTION_NAME_MAX bytes) and list or map header (9) */

    *scan = (codec_scan_t){0};
    for (;;) {
        int            code;
        int            rc;
        size_t         dlen;
        size_t         body;
        size_t         end;
        size_t         room;
        uint32_t       count;
        codec_part_t   part;
        codec_range_t *range;
        const uint8_t *done = NULL;
        const uint8_t *h;
        size_t         hl;

        if (off == len) {
            if (!complete)
                return scan_fail(CODEC_PARTIAL, false, CODEC_PART_MESSAGE, err, why);
            break; /* a message may end without a body */
        }
        h = segw_at(&w, off, &room);
        hl = len - off;
        if (room < hl) {
            if (hl > sizeof(hb))
                hl = sizeof(hb);
            if (room < hl) {
                segw_copy(&w, off, hl, hb);
                h = hb;
            }
        }
        if (hl >= 3 && h[0] == CODEC_CODE_DESCRIBED && h[1] == CODEC_CODE_SMALLULONG &&
            h[2] >= CODEC_SECTION_HEADER && h[2] <= CODEC_SECTION_FOOTER) {
            /* the form every client writes, inline */
            code = h[2];
            dlen = 3;
            rc = 0;
        } else {
            rc = codec__descriptor_read(h, hl, &code, &dlen, &err);
        }
        if (rc < 0)
            return scan_fail(rc, complete, CODEC_PART_MESSAGE, err, why);
        if (code >= CODEC_SECTION_DATA)
            break;
        if (code <= last)
            return scan_fail(CODEC_INVALID, complete, CODEC_PART_MESSAGE, CODEC_ERR_ORDER, why);
        last = code;
        part = (codec_part_t)(CODEC_PART_HEADER + (code - CODEC_SECTION_HEADER));
        rc = section_value_open(h + dlen, len - off - dlen,
                                code != CODEC_SECTION_HEADER && code != CODEC_SECTION_PROPERTIES,
                                &body, &count, &end, &err);
        if (rc < 0)
            return scan_fail(rc, complete, part, err, why);
        body += off + dlen;
        end += off + dlen;
        if (end > UINT32_MAX)
            return scan_fail(CODEC_INVALID, complete, part, CODEC_ERR_TOO_LARGE, why);
        switch (code) {
        case CODEC_SECTION_HEADER:
        case CODEC_SECTION_DELIVERY_ANNOTATIONS: {
            /* read in place by the router (priority, a peer's quirks): in the first segment */
            const uint8_t *p = m->seg[0].ptr;
            if (end > m->seg[0].len)
                return CODEC_SPLIT;
            if (code == CODEC_SECTION_HEADER) {
                range = &scan->header;
                done = elements_skip(p + body, p + end, count, &err);
            } else {
                range = &scan->delivery_annotations;
                done = annotations_skip(p + body, p + end, count, &err);
            }
            break;
        }
        case CODEC_SECTION_MESSAGE_ANNOTATIONS:
            range = &scan->message_annotations;
            if (ma_scan(m, body, end - body, count, scan, st, &err) == 0)
                done = h; /* anything not NULL */
            break;
        case CODEC_SECTION_PROPERTIES: {
            /* read in place (policy's user-id): in one segment */
            const uint8_t *p = segw_at(&w, off, &room);
            range = &scan->properties;
            if (room < end - off)
                return CODEC_SPLIT;
            if (properties_scan(p + (body - off), p + (end - off), count, scan, &err) == 0)
                done = p;
            break;
        }
        default:
            /* application-properties: forwarded as is, so skipped by its size; the map's
             * own header was checked by section_value_open() */
            range = &scan->application_properties;
            done = (count & 1) ? fail(&err, CODEC_ERR_MAP_ODD) : h;
            break;
        }
        if (!done)
            return scan_fail(CODEC_INVALID, complete, part, err, why);
        range->off = (uint32_t)off;
        range->len = (uint32_t)(end - off);
        off = end;
    }
    if (off > UINT32_MAX)
        return scan_fail(CODEC_INVALID, complete, CODEC_PART_MESSAGE, CODEC_ERR_TOO_LARGE, why);
    if (m->n > 1 && scan->ma_user_split)
        return CODEC_SPLIT; /* the composer's second walk of the map is for one segment */
    scan->body_off = (uint32_t)off;
    if (why)
        *why = NULL;
    return 0;
}

int codec_scan(const uint8_t *msg, size_t len, bool complete, codec_scan_t *scan, const char **why)
{
    codec_bytes_t      one = {.ptr = msg, .len = len};
    const codec_segs_t m = {.seg = &one, .n = 1, .len = len};

    if (len == 0) {
        *scan = (codec_scan_t){0};
        if (!complete)
            return scan_fail(CODEC_PARTIAL, false, CODEC_PART_MESSAGE, CODEC_ERR_NONE, why);
        if (why)
            *why = NULL;
        return 0;
    }
    return scan_msg(&m, complete, scan, NULL, why);
}

int codec_scan_segs(const codec_segs_t *m, codec_scan_t *scan, const codec_stitch_t *st,
                    const char **why)
{
    return scan_msg(m, true, scan, st, why);
}

/* ---- composing ---------------------------------------------------------------------------- */

/* Output under construction.  With `counting` set it writes nothing and only counts, which is
 * how codec_compose_need() gets exactly the numbers codec_compose_prefix() will use. */
typedef struct out {
    bool           counting;    /* write nothing, count entries and bytes */
    codec_iov_t   *iov;         /* entries (unused when counting) */
    int            max_iov;     /* capacity of iov */
    int            n;           /* entries used (or needed) */
    uint8_t       *scratch;     /* fresh bytes (unused when counting) */
    size_t         scratch_len; /* capacity of scratch */
    size_t         used;        /* scratch bytes used (or needed) */
    size_t         pending;     /* start of the scratch bytes not yet in an iov */
    const uint8_t *next;        /* end of the last iov if it points into the message, else NULL */
    bool           overflow;    /* iov or scratch too small */
} out_t;

static void out_iov(out_t *o, const uint8_t *base, size_t len)
{
    if (!o->counting) {
        if (o->n < o->max_iov) {
            o->iov[o->n].base = base;
            o->iov[o->n].len = len;
        } else {
            o->overflow = true;
        }
    }
    o->n++;
}

/* Close the run of scratch bytes reserved since the last iov into one iov. */
static void out_flush(out_t *o)
{
    if (o->used == o->pending)
        return;
    /* no scratch pointer arithmetic once a reservation has failed: scratch may be NULL */
    out_iov(o, o->counting || o->overflow ? NULL : o->scratch + o->pending, o->used - o->pending);
    o->pending = o->used;
    o->next = NULL;
}

/* Bytes of the message, merged into the previous iov when they follow it. */
static void out_msg(out_t *o, const uint8_t *p, size_t len)
{
    if (len == 0)
        return;
    out_flush(o);
    if (o->next == p) {
        if (!o->counting && o->n <= o->max_iov)
            o->iov[o->n - 1].len += len;
    } else {
        out_iov(o, p, len);
    }
    o->next = p + len;
}

/* Message bytes [off, off + len), one entry per segment they lie in. */
static void out_msg_at(out_t *o, const codec_segs_t *m, size_t off, size_t len)
{
    segw_t w = {.m = m};

    if (m->n == 1) {
        out_msg(o, m->seg[0].ptr + off, len);
        return;
    }
    while (len) {
        size_t         room;
        const uint8_t *p = segw_at(&w, off, &room);
        size_t         k = room < len ? room : len;
        out_msg(o, p, k);
        off += k;
        len -= k;
    }
}

/* Reserve len scratch bytes for fresh encodings; returns where to write them, or NULL when
 * counting or when scratch is too small (then the call fails at the end). */
static uint8_t *out_reserve(out_t *o, size_t len)
{
    uint8_t *w = NULL;

    if (!o->counting && !o->overflow && len <= o->scratch_len - o->used)
        w = o->scratch + o->used;
    else if (!o->counting)
        o->overflow = true;
    o->used += len;
    return w;
}

static inline uint8_t *put_be32(uint8_t *w, uint32_t v)
{
    w[0] = (uint8_t)(v >> 24);
    w[1] = (uint8_t)(v >> 16);
    w[2] = (uint8_t)(v >> 8);
    w[3] = (uint8_t)v;
    return w + 4;
}

static inline size_t str_size(size_t len)
{
    return (len <= 255 ? 2 : 5) + len;
}

static inline size_t int_size(int32_t v)
{
    return v >= -128 && v <= 127 ? 2 : 5;
}

/* str8 when it fits, else str32 */
static uint8_t *put_str(uint8_t *w, codec_bytes_t b)
{
    if (b.len <= 255) {
        *w++ = CODEC_CODE_STR8;
        *w++ = (uint8_t)b.len;
    } else {
        *w++ = CODEC_CODE_STR32;
        w = put_be32(w, (uint32_t)b.len);
    }
    if (b.len)
        memcpy(w, b.ptr, b.len);
    return w + b.len;
}

/* smallint when it fits, else int */
static uint8_t *put_int(uint8_t *w, int32_t v)
{
    if (int_size(v) == 2) {
        *w++ = CODEC_CODE_SMALLINT;
        *w++ = (uint8_t)(int8_t)v;
        return w;
    }
    *w++ = CODEC_CODE_INT;
    return put_be32(w, (uint32_t)v);
}

/* The router keys, pre-encoded as sym8. */
#define KEY_TO      "\xa3\x0b" CODEC_RA_PREFIX "to"
#define KEY_PHASE   "\xa3\x0e" CODEC_RA_PREFIX "phase"
#define KEY_STREAM  "\xa3\x0f" CODEC_RA_PREFIX "stream"
#define KEY_INGRESS "\xa3\x10" CODEC_RA_PREFIX "ingress"
#define KEY_TRACE   "\xa3\x0e" CODEC_RA_PREFIX "trace"
#define KEY_SIZE(k) (sizeof(k) - 1)
static_assert(KEY_SIZE(KEY_TO) == 2 + 11 && KEY_SIZE(KEY_PHASE) == 2 + 14 &&
                  KEY_SIZE(KEY_STREAM) == 2 + 15 && KEY_SIZE(KEY_INGRESS) == 2 + 16 &&
                  KEY_SIZE(KEY_TRACE) == 2 + 14,
              "sym8 length bytes match the key names");
#define PUT_KEY(w, k) (memcpy((w), (k), KEY_SIZE(k)), (w) + KEY_SIZE(k))

/* The router trailer's shape, computed before anything is written. */
typedef struct trailer {
    uint32_t pairs;       /* router pairs to write */
    uint64_t bytes;       /* their encoded size */
    uint64_t trace_elems; /* bytes of the trace list's elements */
    uint64_t trace_count; /* trace list count */
    bool     trace;       /* write x-opt-qd.trace */
    bool     trace8;      /* as list8 (else list32) */
} trailer_t;

/* Size the trailer for ra; false when a value is too long to encode in a map32. */
static bool trailer_plan(const codec_ra_out_t *ra, trailer_t *t)
{
    memset(t, 0, sizeof(*t));
    if (!ra || !ra->write)
        return true;
    if (ra->to.len > UINT32_MAX || ra->ingress.len > UINT32_MAX || ra->trace.len > UINT32_MAX ||
        ra->trace_append.len > UINT32_MAX)
        return false;
    if (ra->phase) {
        t->pairs++;
        t->bytes += KEY_SIZE(KEY_PHASE) + int_size(ra->phase);
    }
    if (ra->stream) {
        t->pairs++;
        t->bytes += KEY_SIZE(KEY_STREAM) + int_size(ra->stream);
    }
    if (ra->to.ptr) {
        t->pairs++;
        t->bytes += KEY_SIZE(KEY_TO) + str_size(ra->to.len);
    }
    if (ra->ingress.ptr) {
        t->pairs++;
        t->bytes += KEY_SIZE(KEY_INGRESS) + str_size(ra->ingress.len);
    }
    if (ra->trace.ptr || ra->trace_append.ptr) {
        t->trace = true;
        t->pairs++;
        t->trace_elems = (ra->trace.ptr ? ra->trace.len : 0) +
                         (ra->trace_append.ptr ? str_size(ra->trace_append.len) : 0);
        t->trace_count = (ra->trace.ptr ? ra->trace_count : 0) + (ra->trace_append.ptr ? 1 : 0);
        t->trace8 = t->trace_elems + 1 <= 255 && t->trace_count <= 255;
        t->bytes += KEY_SIZE(KEY_TRACE) + (t->trace8 ? 3 : 9) + t->trace_elems;
        if (t->trace_elems + 4 > UINT32_MAX || t->trace_count > UINT32_MAX)
            return false;
    }
    return true;
}

/* Write the trailer planned by trailer_plan() at w (exactly t->bytes). */
static void trailer_put(uint8_t *w, const codec_ra_out_t *ra, const trailer_t *t)
{
    uint8_t *start = w;

    /* qdrouterd 1.19's order (message.c, compose_router_message_annotations) */
    if (ra->phase) {
        w = PUT_KEY(w, KEY_PHASE);
        w = put_int(w, ra->phase);
    }
    if (ra->stream) {
        w = PUT_KEY(w, KEY_STREAM);
        w = put_int(w, ra->stream);
    }
    if (ra->to.ptr) {
        w = PUT_KEY(w, KEY_TO);
        w = put_str(w, ra->to);
    }
    if (ra->ingress.ptr) {
        w = PUT_KEY(w, KEY_INGRESS);
        w = put_str(w, ra->ingress);
    }
    if (t->trace) {
        w = PUT_KEY(w, KEY_TRACE);
        if (t->trace8) {
            *w++ = CODEC_CODE_LIST8;
            *w++ = (uint8_t)(t->trace_elems + 1);
            *w++ = (uint8_t)t->trace_count;
        } else {
            *w++ = CODEC_CODE_LIST32;
            w = put_be32(w, (uint32_t)(t->trace_elems + 4));
            w = put_be32(w, (uint32_t)t->trace_count);
        }
        if (ra->trace.ptr && ra->trace.len) {
            memcpy(w, ra->trace.ptr, ra->trace.len);
            w += ra->trace.len;
        }
        if (ra->trace_append.ptr)
            w = put_str(w, ra->trace_append);
    }
    assert((uint64_t)(w - start) == t->bytes);
    (void)start;
}

/* ma_user_split: walk the input map again and copy each run of user pairs (one segment). */
static bool user_runs_put(out_t *o, const uint8_t *msg, const codec_scan_t *s)
{
    const uint8_t *ma = msg + s->message_annotations.off;
    size_t         len = s->message_annotations.len;
    const uint8_t *p;
    const uint8_t *end;
    const uint8_t *k;
    int            code;
    size_t         dlen;
    size_t         body;
    size_t         mend;
    uint32_t       count;
    codec_err_t    err;

    if (codec__descriptor_read(ma, len, &code, &dlen, &err) != 0 ||
        section_value_open(ma + dlen, len - dlen, true, &body, &count, &mend, &err) != 0)
        return false;
    p = ma + dlen + body;
    end = ma + dlen + mend;
    for (count /= 2; count; count--) {
        if (!(k = key_skip(p, end, &err)))
            return false;
        bool router = (*p == CODEC_CODE_SYM8 && p[1] >= CODEC_RA_PREFIX_LEN &&
                       memcmp(p + 2, CODEC_RA_PREFIX, CODEC_RA_PREFIX_LEN) == 0) ||
                      (*p == CODEC_CODE_SYM32 && be32(p + 1) >= CODEC_RA_PREFIX_LEN &&
                       memcmp(p + 5, CODEC_RA_PREFIX, CODEC_RA_PREFIX_LEN) == 0);
        if (!(k = value_skip(k, end, &err)))
            return false;
        if (!router)
            out_msg(o, p, (size_t)(k - p));
        p = k;
    }
    return true;
}

/* The one implementation behind codec_compose_prefix() and codec_compose_need(). */
static int compose(const codec_segs_t *m, const codec_scan_t *s, const codec_ra_out_t *ra,
                   out_t *o)
{
    trailer_t t;
    size_t    ins;
    size_t    ins_end;

    if (!trailer_plan(ra, &t))
        return CODEC_INVALID;
    if (s->ma_router_count == 0 && t.pairs == 0) {
        /* nothing to drop, nothing to add: the prefix goes out as it came */
        out_msg_at(o, m, 0, s->body_off);
        return o->overflow ? CODEC_INVALID : o->n;
    }
    if (s->message_annotations.len) {
        ins = s->message_annotations.off;
        ins_end = ins + s->message_annotations.len;
    } else {
        ins = s->properties.len               ? s->properties.off
              : s->application_properties.len ? s->application_properties.off
                                              : s->body_off;
        ins_end = ins;
    }
    out_msg_at(o, m, 0, ins);
    if (s->ma_user_count + (uint64_t)t.pairs) {
        uint64_t content = s->ma_user_bytes + t.bytes;
        uint64_t count = 2 * ((uint64_t)s->ma_user_count + t.pairs);
        bool     map8 = content + 1 <= 255 && count <= 255;
        uint8_t *w;

        if (content + 4 > UINT32_MAX || count > UINT32_MAX)
            return CODEC_INVALID;
        if ((w = out_reserve(o, map8 ? 6 : 12))) {
            *w++ = CODEC_CODE_DESCRIBED;
            *w++ = CODEC_CODE_SMALLULONG;
            *w++ = CODEC_SECTION_MESSAGE_ANNOTATIONS;
            if (map8) {
                *w++ = CODEC_CODE_MAP8;
                *w++ = (uint8_t)(content + 1);
                *w++ = (uint8_t)count;
            } else {
                *w++ = CODEC_CODE_MAP32;
                w = put_be32(w, (uint32_t)(content + 4));
                put_be32(w, (uint32_t)count);
            }
        }
        if (!s->ma_user_split)
            out_msg_at(o, m, s->ma_user.off, s->ma_user.len);
        else if (m->n != 1 || !user_runs_put(o, m->seg[0].ptr, s))
            return CODEC_INVALID;
        if (t.pairs && (w = out_reserve(o, (size_t)t.bytes)))
            trailer_put(w, ra, &t);
    }
    out_msg_at(o, m, ins_end, s->body_off - ins_end);
    out_flush(o);
    return o->overflow ? CODEC_INVALID : o->n;
}

int codec_compose_prefix_segs(const codec_segs_t *m, const codec_scan_t *scan,
                              const codec_ra_out_t *ra, uint8_t *scratch, size_t scratch_len,
                              codec_iov_t *iov, int max_iov)
{
    out_t o = {
        .iov = iov,
        .max_iov = iov && max_iov > 0 ? max_iov : 0,
        .scratch = scratch,
        .scratch_len = scratch ? scratch_len : 0,
    };

    return compose(m, scan, ra, &o);
}

void codec_compose_need_segs(const codec_segs_t *m, const codec_scan_t *scan,
                             const codec_ra_out_t *ra, size_t *scratch_len, int *n_iov)
{
    out_t o = {.counting = true};

    if (compose(m, scan, ra, &o) < 0) {
        *scratch_len = 0;
        *n_iov = 0;
        return;
    }
    *scratch_len = o.used;
    *n_iov = o.n;
}

/* A contiguous message as one segment (compose reads only [0, body_off)). */
#define ONE_SEG(name, msg, scan)                                                                   \
    codec_bytes_t      name##_one = {.ptr = (msg), .len = (scan)->body_off};                     \
    const codec_segs_t name = {.seg = &name##_one, .n = 1, .len = (scan)->body_off}

int codec_compose_prefix(const uint8_t *msg, const codec_scan_t *scan, const codec_ra_out_t *ra,
                         uint8_t *scratch, size_t scratch_len, codec_iov_t *iov, int max_iov)
{
    ONE_SEG(m, msg, scan);
    return codec_compose_prefix_segs(&m, scan, ra, scratch, scratch_len, iov, max_iov);
}

void codec_compose_need(const uint8_t *msg, const codec_scan_t *scan, const codec_ra_out_t *ra,
                        size_t *scratch_len, int *n_iov)
{
    ONE_SEG(m, msg, scan);
    codec_compose_need_segs(&m, scan, ra, scratch_len, n_iov);
}

uint8_t codec_header_priority(const uint8_t *msg, const codec_scan_t *scan)
{
    const uint8_t *h = msg + scan->header.off;
    size_t         len = scan->header.len;
    const uint8_t *p;
    const uint8_t *end;
    int            code;
    size_t         dlen;
    size_t         body;
    size_t         hend;
    uint32_t       count;
    codec_err_t    err;

    if (!len || codec__descriptor_read(h, len, &code, &dlen, &err) != 0 ||
        section_value_open(h + dlen, len - dlen, false, &body, &count, &hend, &err) != 0 ||
        count < 2)
        return CODEC_PRIORITY_DEFAULT;
    p = h + dlen + body;
    end = h + dlen + hend;
    if (!(p = value_skip(p, end, &err))) /* durable */
        return CODEC_PRIORITY_DEFAULT;
    return p < end && p + 1 < end && *p == CODEC_CODE_UBYTE ? p[1] : CODEC_PRIORITY_DEFAULT;
}

bool codec_trace_next(codec_bytes_t *trace, codec_bytes_t *id)
{
    const uint8_t *p = trace->ptr;
    size_t         n = trace->len;
    size_t         h;
    size_t         l;

    if (!p || n < 2)
        return false;
    if (*p == CODEC_CODE_STR8 || *p == CODEC_CODE_SYM8) {
        h = 2;
        l = p[1];
    } else if ((*p == CODEC_CODE_STR32 || *p == CODEC_CODE_SYM32) && n >= 5) {
        h = 5;
        l = be32(p + 1);
    } else {
        return false;
    }
    if (l > n - h)
        return false;
    id->ptr = p + h;
    id->len = l;
    trace->ptr = p + h + l;
    trace->len = n - h - l;
    return true;
}
