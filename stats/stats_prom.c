/* stats/stats_prom.c: the Prometheus text format (0.0.4) renderer, streamed.
 *
 * Walks the registry with the public iterator (stats_iter_*), field by field so that the
 * samples of one metric stay together, and renders a few KiB of text at a time into a
 * pending buffer that stats_prom_read() hands out in whatever pieces the caller asks for.
 * Memory: the pending buffer (16 KiB, more only for one sample with huge labels) and the
 * iterator's batch (field by field: the largest family's values and labels); never the text
 * of the whole output.
 *
 * Order: singleton families and plain stats first (the router's qdr_* totals), then the
 * families with labelled objects (connections, links, addresses).
 *
 * Threads: a renderer belongs to the thread that uses it; creating and reading one is
 * thread-safe with respect to the registry (the iterator takes the registry's mutex per
 * batch).  No _CT/_WT functions here.  Never logs, never blocks on anything but that mutex.
 */
#include "stats/stats.h"

#include "core/base/base.h"

#include <string.h>

#define PEND_TARGET 16384 /* render until this much text is pending (stats_prom_write's chunk) */

struct stats_prom {
    stats_registry_t     *_r;         /* the registry */
    char                 *_glob;      /* filter (copy) or NULL */
    stats_iter_t         *_it;        /* the current walk, NULL between phases */
    int                   _phase;     /* 0 singletons + plain, 1 labelled families, 2 done */
    const stats_family_t *_fam;       /* family of the metric being written (NULL: none) */
    unsigned              _field;     /* its field */
    char                 *_buf;       /* pending text */
    size_t                _len;       /* bytes pending in _buf */
    size_t                _off;       /* bytes of _buf already handed out */
    size_t                _cap;       /* allocated */
    char                 *_head;      /* the metric's line head and label separators: */
    size_t                _head_cap;  /* allocated */
    size_t                _seg[STATS_MAX_LABELS + 1]; /* segment ends in _head: [0] is
                              `name{key0="` (or `name` without labels), [i] is `",keyi="` */
};

/* clang-format off */
static const char digits2[201] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
    "8081828384858687888990919293949596979899";
/* clang-format on */

static void reserve(stats_prom_t *p, size_t n)
{
    if (p->_len + n <= p->_cap)
        return;
    p->_cap = (p->_len + n) * 2;
    p->_buf = base_realloc(p->_buf, p->_cap);
}

static void put(stats_prom_t *p, const char *s, size_t n)
{
    reserve(p, n);
    memcpy(p->_buf + p->_len, s, n);
    p->_len += n;
}

static void put_str(stats_prom_t *p, const char *s)
{
    put(p, s, strlen(s));
}

/* Write v in decimal at out (room for 20 digits); returns the length (no NUL). */
static size_t fmt_u64(char *out, uint64_t v)
{
    size_t n = 1;
    for (uint64_t t = v; t >= 10; t /= 10)
        n++;
    char *s = out + n;
    while (v >= 100) {
        unsigned d = (unsigned)(v % 100) * 2;
        v /= 100;
        *--s = digits2[d + 1];
        *--s = digits2[d];
    }
    if (v >= 10) {
        *--s = digits2[v * 2 + 1];
        *--s = digits2[v * 2];
    } else {
        *--s = (char)('0' + v);
    }
    return n;
}

static void put_u64(stats_prom_t *p, uint64_t v)
{
    reserve(p, 20);
    p->_len += fmt_u64(p->_buf + p->_len, v);
}

/* Characters a label value must escape. */
static const unsigned char special[256] = {['\\'] = 1, ['\n'] = 1, ['"'] = 1};

/* Write s[0..n) escaped as a label value at o (room for 2n bytes); returns the end. */
static char *esc_label(char *o, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (BASE_LIKELY(!special[c])) {
            *o++ = (char)c;
            continue;
        }
        *o++ = '\\';
        *o++ = c == '\n' ? 'n' : (char)c;
    }
    return o;
}

/* Escape a label value (`\` `"` newline) or help text (`\` newline). */
static void put_escaped(stats_prom_t *p, const char *s, bool quote)
{
    const char *run = s;
    for (; *s; s++) {
        const char *rep = NULL;
        if (*s == '\\')
            rep = "\\\\";
        else if (*s == '\n')
            rep = "\\n";
        else if (*s == '"' && quote)
            rep = "\\\"";
        if (!rep)
            continue;
        put(p, run, (size_t)(s - run));
        put(p, rep, 2);
        run = s + 1;
    }
    put(p, run, (size_t)(s - run));
}

/* `{k="v",...` plus `,le="x"` when le is not NULL, then `}`; nothing at all when there is
 * no label. */
static void put_labels(stats_prom_t *p, const stats_sample_t *s, const char *le)
{
    if (s->nlabels == 0 && !le)
        return;
    put(p, "{", 1);
    for (unsigned i = 0; i < s->nlabels; i++) {
        if (i)
            put(p, ",", 1);
        put_str(p, s->label_keys[i]);
        put(p, "=\"", 2);
        put_escaped(p, s->labels[i], true);
        put(p, "\"", 1);
    }
    if (le) {
        if (s->nlabels)
            put(p, ",", 1);
        put(p, "le=\"", 4);
        put_str(p, le);
        put(p, "\"", 1);
    }
    put(p, "}", 1);
}

/* Append a piece to the metric's head buffer. */
static size_t head_put(stats_prom_t *p, size_t at, const char *s, size_t n)
{
    if (at + n > p->_head_cap) {
        p->_head_cap = (at + n) * 2;
        p->_head = base_realloc(p->_head, p->_head_cap);
    }
    memcpy(p->_head + at, s, n);
    return at + n;
}

/* Precompute the line head of the metric `s` belongs to: `name{key0="` and the separators
 * `",key1="`, ... (or just `name`), so a sample is a few memcpy()s. */
static void head_build(stats_prom_t *p, const stats_sample_t *s)
{
    size_t n = head_put(p, 0, s->prom, strlen(s->prom));
    if (s->nlabels) {
        n = head_put(p, n, "{", 1);
        n = head_put(p, n, s->label_keys[0], strlen(s->label_keys[0]));
        n = head_put(p, n, "=\"", 2);
    }
    p->_seg[0] = n;
    for (unsigned i = 1; i < s->nlabels; i++) {
        n = head_put(p, n, "\",", 2);
        n = head_put(p, n, s->label_keys[i], strlen(s->label_keys[i]));
        n = head_put(p, n, "=\"", 2);
        p->_seg[i] = n;
    }
}

static void put_header(stats_prom_t *p, const stats_sample_t *s)
{
    static const char *const types[] = {"counter", "gauge", "histogram"};
    if (s->help) {
        put(p, "# HELP ", 7);
        put_str(p, s->prom);
        put(p, " ", 1);
        put_escaped(p, s->help, false);
        put(p, "\n", 1);
    }
    put(p, "# TYPE ", 7);
    put_str(p, s->prom);
    put(p, " ", 1);
    put_str(p, types[s->kind]);
    put(p, "\n", 1);
}

/* A counter or gauge line from the precomputed head: one reserve, then memcpy()s. */
static void render_scalar(stats_prom_t *p, const stats_sample_t *s)
{
    size_t need = p->_seg[s->nlabels ? s->nlabels - 1 : 0] + 2 + 24;
    for (unsigned i = 0; i < s->nlabels; i++)
        need += 2 * s->label_lens[i];
    reserve(p, need);
    char *o = p->_buf + p->_len;
    memcpy(o, p->_head, p->_seg[0]);
    o += p->_seg[0];
    if (s->nlabels) {
        o = esc_label(o, s->labels[0], s->label_lens[0]);
        for (unsigned i = 1; i < s->nlabels; i++) {
            memcpy(o, p->_head + p->_seg[i - 1], p->_seg[i] - p->_seg[i - 1]);
            o += p->_seg[i] - p->_seg[i - 1];
            o = esc_label(o, s->labels[i], s->label_lens[i]);
        }
        *o++ = '"';
        *o++ = '}';
    }
    *o++ = ' ';
    if (s->kind == STATS_GAUGE && (int64_t)s->value < 0) {
        *o++ = '-';
        o += fmt_u64(o, (uint64_t)0 - s->value);
    } else {
        o += fmt_u64(o, s->value);
    }
    *o++ = '\n';
    p->_len = (size_t)(o - p->_buf);
}

static void render_sample(stats_prom_t *p, const stats_sample_t *s)
{
    if (!s->family || s->family != p->_fam || s->field != p->_field) {
        put_header(p, s);
        head_build(p, s);
        p->_fam = s->family;
        p->_field = s->field;
    }
    if (s->kind != STATS_HISTOGRAM) {
        render_scalar(p, s);
        return;
    }
    size_t   pl = strlen(s->prom);
    uint64_t cum = 0;
    char     le[24];
    for (uint32_t k = 0; k <= s->nbuckets; k++) {
        cum += s->buckets[k];
        if (k < s->nbuckets)
            le[fmt_u64(le, 1ull << k)] = 0;
        else
            memcpy(le, "+Inf", 5);
        put(p, s->prom, pl);
        put(p, "_bucket", 7);
        put_labels(p, s, le);
        put(p, " ", 1);
        put_u64(p, cum);
        put(p, "\n", 1);
    }
    put(p, s->prom, pl);
    put(p, "_sum", 4);
    put_labels(p, s, NULL);
    put(p, " ", 1);
    put_u64(p, s->sum);
    put(p, "\n", 1);
    put(p, s->prom, pl);
    put(p, "_count", 6);
    put_labels(p, s, NULL);
    put(p, " ", 1);
    put_u64(p, s->value);
    put(p, "\n", 1);
}

stats_prom_t *stats_prom_new(stats_registry_t *r, const char *glob)
{
    stats_prom_t *p = base_calloc(1, sizeof(*p));
    p->_r = r;
    p->_glob = glob ? base_strdup(glob) : NULL;
    p->_cap = PEND_TARGET + 1024;
    p->_buf = base_malloc(p->_cap);
    return p;
}

void stats_prom_free(stats_prom_t *p)
{
    if (!p)
        return;
    stats_iter_free(p->_it);
    free(p->_glob);
    free(p->_buf);
    free(p->_head);
    free(p);
}

/* Render samples until PEND_TARGET bytes are pending or the walk is over. */
static void render_more(stats_prom_t *p)
{
    while (p->_len < PEND_TARGET && p->_phase < 2) {
        if (!p->_it) {
            unsigned which = p->_phase == 0 ? STATS_ITER_SINGLETONS | STATS_ITER_PLAIN
                                            : STATS_ITER_OBJECTS;
            p->_it = stats_iter_new(p->_r, p->_glob, which | STATS_ITER_BY_FIELD);
            p->_fam = NULL;
        }
        const stats_sample_t *s = stats_iter_next(p->_it);
        if (!s) {
            stats_iter_free(p->_it);
            p->_it = NULL;
            p->_phase++;
            continue;
        }
        render_sample(p, s);
    }
}

size_t stats_prom_read(stats_prom_t *p, char *buf, size_t cap)
{
    size_t done = 0;
    while (done < cap) {
        if (p->_off == p->_len) {
            p->_off = p->_len = 0;
            render_more(p);
            if (p->_len == 0)
                break;
        }
        size_t n = p->_len - p->_off;
        if (n > cap - done)
            n = cap - done;
        memcpy(buf + done, p->_buf + p->_off, n);
        p->_off += n;
        done += n;
    }
    return done;
}

int stats_prom_write(stats_registry_t *r, const char *glob, stats_write_fn write, void *ctx)
{
    stats_prom_t *p = stats_prom_new(r, glob);
    int           rc = 0;
    /* The pending text is the chunk: no copy.  render_more() stops at PEND_TARGET bytes, so
     * a chunk is that plus at most one sample's text. */
    for (;;) {
        p->_len = 0;
        render_more(p);
        if (p->_len == 0)
            break;
        for (size_t off = 0; off < p->_len; off += PEND_TARGET) {
            size_t n = p->_len - off < PEND_TARGET ? p->_len - off : PEND_TARGET;
            rc = write(ctx, p->_buf + off, n);
            if (rc < 0)
                goto out_free;
        }
        rc = 0;
    }
out_free:
    stats_prom_free(p);
    return rc;
}

size_t stats_prom_snake(const char *name, char *dst, size_t cap)
{
    size_t n = 0;
    if (cap == 0)
        return 0;
    for (size_t i = 0; name[i] && n + 1 < cap; i++) {
        char c = name[i];
        bool up = c >= 'A' && c <= 'Z';
        if (up && i > 0 && n + 2 < cap) {
            char prev = name[i - 1], next = name[i + 1];
            bool prev_lower = (prev >= 'a' && prev <= 'z') || (prev >= '0' && prev <= '9');
            bool prev_upper = prev >= 'A' && prev <= 'Z';
            bool next_lower = next >= 'a' && next <= 'z';
            if (prev_lower || (prev_upper && next_lower))
                dst[n++] = '_';
        }
        if (up)
            c = (char)(c - 'A' + 'a');
        else if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == ':'))
            c = '_';
        dst[n++] = c;
    }
    dst[n] = 0;
    return n;
}
