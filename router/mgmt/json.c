/* router/mgmt/json.c: the writer of the JSON-lines protocol's text - strings escaped, bytes
 * that are not UTF-8 replaced by U+FFFD, 64-bit integers printed exactly (cJSON prints
 * doubles), stat values and row values in the protocol's shapes.  Pure; any thread.
 */
#include "router/mgmt/mgmt_int.h"

#include "core/base/base.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static void jb_reserve(mgmt_jbuf_t *b, size_t more)
{
    if (b->n + more <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + more)
        cap *= 2;
    b->p = base_realloc(b->p, cap);
    b->cap = cap;
}

void mgmt_jb_raw(mgmt_jbuf_t *b, const char *s, size_t n)
{
    jb_reserve(b, n);
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

void mgmt_jb_lit(mgmt_jbuf_t *b, const char *s)
{
    mgmt_jb_raw(b, s, strlen(s));
}

void mgmt_jb_c(mgmt_jbuf_t *b, char c)
{
    jb_reserve(b, 1);
    b->p[b->n++] = c;
}

/* Length of the valid UTF-8 sequence at s (n bytes available), or 0 when it is not one
 * (overlong forms, surrogates and values above U+10FFFF are not). */
size_t mgmt_utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t   k;
    uint32_t v;
    if (c >= 0xc2 && c <= 0xdf) {
        k = 2;
        v = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        k = 3;
        v = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        k = 4;
        v = c & 0x07;
    } else {
        return 0;
    }
    if (n < k)
        return 0;
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if ((k == 3 && (v < 0x800 || (v >= 0xd800 && v <= 0xdfff))) ||
        (k == 4 && (v < 0x10000 || v > 0x10ffff)))
        return 0;
    return k;
}

/* A JSON string: quoted, escaped; bytes that are not UTF-8 become U+FFFD, so every line is
 * valid JSON whatever a label holds. */
void mgmt_jb_strn(mgmt_jbuf_t *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    jb_reserve(b, n + 2);
    b->p[b->n++] = '"';
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            /* a run of characters that need no escape: copied at once */
            size_t j = i + 1;
            while (j < n && u[j] >= 0x20 && u[j] < 0x80 && u[j] != '"' && u[j] != '\\')
                j++;
            mgmt_jb_raw(b, s + i, j - i);
            i = j;
        } else if (c < 0x80) {
            char e[7] = {'\\', 0};
            switch (c) {
            case '"':
            case '\\':
                e[1] = (char)c;
                break;
            case '\n':
                e[1] = 'n';
                break;
            case '\r':
                e[1] = 'r';
                break;
            case '\t':
                e[1] = 't';
                break;
            default:
                memcpy(e + 1, "u00", 3);
                e[4] = hex[c >> 4];
                e[5] = hex[c & 15];
                break;
            }
            mgmt_jb_lit(b, e);
            i++;
        } else {
            size_t k = mgmt_utf8_len(u + i, n - i);
            if (k) {
                mgmt_jb_raw(b, s + i, k);
                i += k;
            } else {
                mgmt_jb_lit(b, "\\ufffd");
                i++;
            }
        }
    }
    mgmt_jb_c(b, '"');
}

void mgmt_jb_str(mgmt_jbuf_t *b, const char *s)
{
    mgmt_jb_strn(b, s, strlen(s));
}

/* Digits written from the end of a 24-byte buffer (snprintf costs more than the rest of a
 * row's column: entity.query writes tens of numbers per row). */
static void jb_digits(mgmt_jbuf_t *b, uint64_t v, bool minus)
{
    char  d[24];
    char *p = d + sizeof(d);
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (minus)
        *--p = '-';
    mgmt_jb_raw(b, p, (size_t)(d + sizeof(d) - p));
}

void mgmt_jb_u64(mgmt_jbuf_t *b, uint64_t v)
{
    jb_digits(b, v, false);
}

void mgmt_jb_i64(mgmt_jbuf_t *b, int64_t v)
{
    /* the magnitude as unsigned: -INT64_MIN does not fit in an int64_t */
    jb_digits(b, v < 0 ? 0 - (uint64_t)v : (uint64_t)v, v < 0);
}

void mgmt_jb_double(mgmt_jbuf_t *b, double v)
{
    char d[32];
    if (!isfinite(v)) {
        mgmt_jb_lit(b, "null");
        return;
    }
    int n = snprintf(d, sizeof(d), "%.10g", v);
    mgmt_jb_raw(b, d, (size_t)n);
}

/* "key": */
void mgmt_jb_key(mgmt_jbuf_t *b, const char *key)
{
    mgmt_jb_str(b, key);
    mgmt_jb_c(b, ':');
}

/* A stat's value: counters unsigned, gauges signed, histograms an object with the count,
 * the sum, the per-bucket counts (bucket k counts 2^(k-1) < v <= 2^k, the last is +Inf) and
 * three estimated percentiles. */
static void jb_value(mgmt_jbuf_t *b, stats_kind_t kind, uint64_t value, uint64_t sum,
                     const uint64_t *buckets, uint32_t nbuckets)
{
    if (kind == STATS_GAUGE) {
        mgmt_jb_i64(b, (int64_t)value);
        return;
    }
    if (kind != STATS_HISTOGRAM || !buckets) {
        mgmt_jb_u64(b, value);
        return;
    }
    mgmt_jb_lit(b, "{\"count\":");
    mgmt_jb_u64(b, value);
    mgmt_jb_lit(b, ",\"sum\":");
    mgmt_jb_u64(b, sum);
    mgmt_jb_lit(b, ",\"buckets\":[");
    for (uint32_t k = 0; k <= nbuckets; k++) {
        if (k)
            mgmt_jb_c(b, ',');
        mgmt_jb_u64(b, buckets[k]);
    }
    mgmt_jb_lit(b, "],\"p50\":");
    mgmt_jb_double(b, stats_hist_quantile(buckets, nbuckets, 0.5));
    mgmt_jb_lit(b, ",\"p90\":");
    mgmt_jb_double(b, stats_hist_quantile(buckets, nbuckets, 0.9));
    mgmt_jb_lit(b, ",\"p99\":");
    mgmt_jb_double(b, stats_hist_quantile(buckets, nbuckets, 0.99));
    mgmt_jb_c(b, '}');
}

void mgmt_jb_sample(mgmt_jbuf_t *b, const stats_sample_t *s)
{
    jb_value(b, s->kind, s->value, s->sum, s->buckets, s->nbuckets);
}

void mgmt_jb_val(mgmt_jbuf_t *b, const mgmt_val_t *v)
{
    switch (v->t) {
    case MGMT_V_NULL:
        mgmt_jb_lit(b, "null");
        return;
    case MGMT_V_BOOL:
        mgmt_jb_lit(b, v->b ? "true" : "false");
        return;
    case MGMT_V_INT:
        mgmt_jb_i64(b, v->i);
        return;
    case MGMT_V_UINT:
        mgmt_jb_u64(b, v->u);
        return;
    case MGMT_V_STR:
        mgmt_jb_str(b, v->s);
        return;
    case MGMT_V_JSON:
        mgmt_jb_lit(b, v->s);
        return;
    case MGMT_V_STRS: {
        mgmt_jb_c(b, '[');
        for (const char *p = v->s; *p;) {
            const char *comma = strchr(p, ',');
            size_t      n = comma ? (size_t)(comma - p) : strlen(p);
            if (p != v->s)
                mgmt_jb_c(b, ',');
            mgmt_jb_strn(b, p, n);
            p += n + (comma ? 1 : 0);
        }
        mgmt_jb_c(b, ']');
        return;
    }
    }
}
