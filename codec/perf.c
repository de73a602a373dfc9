/* codec/perf.c: a performative's fields read from well-formed bytes (see perf.h).
 * Thread-safe: no state, no allocation. */
#include "codec/perf.h"

#include "codec/codec_int.h"

long codec_perf_length(const uint8_t *b, size_t n, int *code)
{
    if (n < 1)
        return CODEC_PARTIAL;
    if (b[0] != CODEC_CODE_DESCRIBED)
        return CODEC_INVALID;
    if (n < 2)
        return CODEC_PARTIAL;
    size_t d;
    if (b[1] == CODEC_CODE_SMALLULONG) {
        if (n < 3)
            return CODEC_PARTIAL;
        *code = b[2];
        d = 3;
    } else if (b[1] == CODEC_CODE_ULONG) {
        if (n < 10)
            return CODEC_PARTIAL;
        if (codec_be32(b + 2) != 0 || b[6] || b[7] || b[8])
            return CODEC_INVALID;
        *code = b[9];
        d = 10;
    } else {
        return CODEC_INVALID;
    }
    if (n < d + 1)
        return CODEC_PARTIAL;
    switch (b[d]) {
    case CODEC_CODE_LIST0:
        return (long)d + 1;
    case CODEC_CODE_LIST8:
        if (n < d + 2)
            return CODEC_PARTIAL;
        return (long)d + 2 + b[d + 1];
    case CODEC_CODE_LIST32:
        if (n < d + 5)
            return CODEC_PARTIAL;
        return (long)d + 5 + (long)codec_be32(b + d + 1);
    default:
        return CODEC_INVALID;
    }
}

int codec_perf_read(codec_perf_t *f, const uint8_t *b, size_t n)
{
    int  code = 0;
    long len = codec_perf_length(b, n, &code);
    if (len < 0)
        return (int)len;
    *f = (codec_perf_t){.code = code, .len = (uint32_t)len};
    const uint8_t *p = b + (b[1] == CODEC_CODE_SMALLULONG ? 3 : 10);
    /* the list's header: its count field must be here too */
    if (*p == CODEC_CODE_LIST8) {
        if ((size_t)(p + 3 - b) > n)
            return CODEC_PARTIAL;
        f->count = p[2];
        p += 3;
    } else if (*p == CODEC_CODE_LIST32) {
        if ((size_t)(p + 9 - b) > n)
            return CODEC_PARTIAL;
        f->count = codec_be32(p + 5);
        p += 9;
    } else {
        p += 1;
    }
    bool           whole = (size_t)len <= n;
    const uint8_t *end = b + (whole ? (size_t)len : n);
    for (uint32_t i = 0; i < f->count && i < CODEC_PERF_FIELDS; i++) {
        codec_err_t    err;
        const uint8_t *q = codec__value_skip(p, end, &err);
        if (!q) /* malformed, or (a part) not here yet: the rest stays absent */
            return whole ? CODEC_INVALID : 0;
        f->field[i] = p;
        p = q;
    }
    return 0;
}

bool codec_perf_null(const codec_perf_t *f, int i)
{
    return i >= (int)f->count || i >= CODEC_PERF_FIELDS || !f->field[i] ||
           *f->field[i] == CODEC_CODE_NULL;
}

bool codec_perf_uint(const codec_perf_t *f, int i, uint32_t *v)
{
    if (codec_perf_null(f, i))
        return false;
    const uint8_t *p = f->field[i];
    switch (*p) {
    case CODEC_CODE_UINT0:
        *v = 0;
        return true;
    case CODEC_CODE_SMALLUINT:
        *v = p[1];
        return true;
    case CODEC_CODE_UINT:
        *v = codec_be32(p + 1);
        return true;
    default:
        return false;
    }
}

int codec_perf_bool(const codec_perf_t *f, int i)
{
    if (codec_perf_null(f, i))
        return -1;
    const uint8_t *p = f->field[i];
    switch (*p) {
    case CODEC_CODE_TRUE:
        return 1;
    case CODEC_CODE_FALSE:
        return 0;
    case CODEC_CODE_BOOLEAN:
        return p[1] != 0;
    default:
        return -2;
    }
}

bool codec_perf_is(const codec_perf_t *f, int i, uint8_t c8, uint8_t c32)
{
    return !codec_perf_null(f, i) && (*f->field[i] == c8 || *f->field[i] == c32);
}

bool codec_perf_bytes(const codec_perf_t *f, int i, const uint8_t **p, size_t *len)
{
    if (codec_perf_null(f, i))
        return false;
    const uint8_t *q = f->field[i];
    switch (codec__class[*q]) {
    case CODEC_CLASS_VAR1:
        *len = q[1];
        *p = q + 2;
        return true;
    case CODEC_CLASS_VAR4:
        *len = codec_be32(q + 1);
        *p = q + 5;
        return true;
    default:
        return false;
    }
}
