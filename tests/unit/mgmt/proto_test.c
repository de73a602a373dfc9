/* tests/unit/mgmt/proto_test.c: router/mgmt/proto.c - the management protocol as a pure function:
 * hello, malformed and over-long lines (the session stays usable), every op and its bad
 * arguments, paging, streamed replies, subscriptions (changes only, gone objects, a slow
 * subscriber that gets the latest values and no backlog), entity.query rows in qdrouterd's
 * attribute names, and JSON escaping of labels that are not clean text. */
#include "router/mgmt/mgmt.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// clang-format off: cmocka.h needs the headers above first
#include <cmocka.h>
// clang-format on

/* ---- a write sink that keeps every line, parsed ---- */

#define MAX_LINES 4096

typedef struct sink {
    cJSON *lines[MAX_LINES]; /* parsed lines */
    size_t n;                /* count */
    int    refuse;           /* return this instead of accepting (0 = accept) */
    size_t refused;          /* lines refused */
} sink_t;

static int sink_write(void *ctx, const char *bytes, size_t len)
{
    sink_t *s = ctx;
    /* every call is exactly one line: JSON, then one newline at the end and none before */
    assert_true(len >= 2);
    assert_int_equal(bytes[len - 1], '\n');
    assert_null(memchr(bytes, '\n', len - 1));
    if (s->refuse) {
        s->refused++;
        return s->refuse;
    }
    const char *end = NULL;
    cJSON      *j = cJSON_ParseWithLengthOpts(bytes, len - 1, &end, false);
    if (!j)
        fail_msg("reply is not JSON: %.*s", (int)len, bytes);
    assert_true(cJSON_IsObject(j));
    assert_true(s->n < MAX_LINES);
    s->lines[s->n++] = j;
    return 0;
}

static void sink_clear(sink_t *s)
{
    for (size_t i = 0; i < s->n; i++)
        cJSON_Delete(s->lines[i]);
    s->n = 0;
}

static cJSON *last(sink_t *s)
{
    assert_true(s->n > 0);
    return s->lines[s->n - 1];
}

static cJSON *get(const cJSON *j, const char *key)
{
    return cJSON_GetObjectItemCaseSensitive(j, key);
}

static cJSON *path(const cJSON *j, const char *a, const char *b)
{
    cJSON *x = get(j, a);
    assert_non_null(x);
    cJSON *y = get(x, b);
    return y;
}

static double num(const cJSON *j)
{
    assert_non_null(j);
    assert_true(cJSON_IsNumber(j));
    return j->valuedouble;
}

static const char *str(const cJSON *j)
{
    assert_non_null(j);
    assert_true(cJSON_IsString(j));
    return j->valuestring;
}

/* ---- the fixture: a registry shaped like the router's built-in families ---- */

static const stats_field_t conn_fields[] = {
    {.name = "deliveriesIn", .kind = STATS_COUNTER},
    {.name = "deliveriesOut", .kind = STATS_COUNTER},
    {.name = "openedAt", .kind = STATS_GAUGE},
};
static const stats_field_t link_fields[] = {
    {.name = "capacity", .kind = STATS_GAUGE},
    {.name = "undeliveredCount", .kind = STATS_GAUGE},
    {.name = "unsettledCount", .kind = STATS_GAUGE},
    {.name = "deliveryCount", .kind = STATS_COUNTER, .help = "Deliveries through the link"},
    {.name = "acceptedCount", .kind = STATS_COUNTER},
    {.name = "creditAvailable", .kind = STATS_GAUGE},
};
enum { L_CAP, L_UNDEL, L_UNSETTLED, L_DLV, L_ACC, L_CREDIT };
static const stats_field_t addr_fields[] = {
    {.name = "subscriberCount", .kind = STATS_GAUGE, .help = "Local consumers"},
    {.name = "senderCount", .kind = STATS_GAUGE},
    {.name = "deliveriesIngress", .kind = STATS_COUNTER, .help = "Deliveries in"},
    {.name = "deliveriesEgress", .kind = STATS_COUNTER, .help = "Deliveries out"},
    {.name = "deliveriesTransit", .kind = STATS_COUNTER},
};
enum { A_SUBS, A_SENDERS, A_IN, A_OUT, A_TRANSIT };
static const stats_field_t router_fields[] = {
    {.name = "deliveriesIngress", .kind = STATS_COUNTER, .sum_of = "address.deliveriesIngress"},
    {.name = "linkCount", .kind = STATS_GAUGE, .count_of = "link"},
    {.name = "workerThreads", .kind = STATS_GAUGE},
    {.name = "latency", .kind = STATS_HISTOGRAM, .buckets = 4},
};
enum { R_IN, R_LINKS, R_WORKERS };

typedef struct fx {
    stats_registry_t *reg;
    stats_shard_t    *shard;
    stats_family_t   *conn, *link, *addr, *router;
    mgmt_proto_t     *m;
    sink_t            out;
} fx_t;

static const mgmt_info_t info = {
    .product = "junction", .version = "9.8.7", .router_id = "R1", .mode = "standalone"};

static void families(fx_t *f)
{
    const stats_family_def_t conn = {.name = "connection", .fields = conn_fields, .nfields = 3,
                                     .labels = {"connection", "host", "container", "dir",
                                                "role"}};
    const stats_family_def_t link = {.name = "link", .fields = link_fields, .nfields = 6,
                                     .labels = {"link", "connection", "dir", "address"}};
    const stats_family_def_t addr = {.name = "address", .fields = addr_fields, .nfields = 5,
                                     .labels = {"address", "distribution"}};
    const stats_family_def_t router = {.name = "router", .fields = router_fields,
                                       .nfields = 4, .singleton = true};
    assert_int_equal(stats_family_new(f->reg, &conn, &f->conn), 0);
    assert_int_equal(stats_family_new(f->reg, &link, &f->link), 0);
    assert_int_equal(stats_family_new(f->reg, &addr, &f->addr), 0);
    assert_int_equal(stats_family_new(f->reg, &router, &f->router), 0);
}

static int setup(void **state)
{
    fx_t *f = calloc(1, sizeof(*f));
    f->reg = stats_registry_new();
    families(f);
    f->shard = stats_shard_new(f->reg);
    f->m = mgmt_proto_new(f->reg, &info);
    *state = f;
    return 0;
}

static int setup_empty(void **state)
{
    fx_t *f = calloc(1, sizeof(*f));
    f->reg = stats_registry_new();
    f->shard = stats_shard_new(f->reg);
    f->m = mgmt_proto_new(f->reg, &info);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx_t *f = *state;
    sink_clear(&f->out);
    mgmt_proto_free(f->m);
    stats_shard_free(f->reg, f->shard);
    stats_registry_free(f->reg);
    free(f);
    return 0;
}

static stats_obj_t mk(fx_t *f, stats_family_t *fam, const char *a, const char *b, const char *c,
                      const char *d)
{
    /* the fifth is the connection family's role; the other families have four labels */
    const char *labels[STATS_MAX_LABELS] = {a, b, c, d, "normal"};
    stats_obj_t o;
    assert_int_equal(stats_object_new(f->reg, fam, labels, &o), 0);
    return o;
}

/* Send a request (printf-style) and return the number of new lines. */
__attribute__((format(printf, 2, 3))) static size_t req(fx_t *f, const char *fmt, ...)
{
    char    line[8192];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    size_t before = f->out.n;
    assert_int_equal(mgmt_proto_handle(f->m, line, (size_t)n, sink_write, &f->out), 0);
    return f->out.n - before;
}

/* The last reply must be an error with this code and this id (-1: null). */
static void expect_error(fx_t *f, int code, int id)
{
    cJSON *r = last(&f->out);
    cJSON *e = get(r, "error");
    if (!e)
        fail_msg("expected error %d, got %s", code, cJSON_PrintUnformatted(r));
    assert_int_equal((int)num(get(e, "code")), code);
    assert_true(strlen(str(get(e, "message"))) > 0);
    assert_null(get(r, "result"));
    if (id < 0)
        assert_true(cJSON_IsNull(get(r, "id")));
    else
        assert_int_equal((int)num(get(r, "id")), id);
}

static cJSON *expect_result(fx_t *f, int id)
{
    cJSON *r = last(&f->out);
    if (get(r, "error"))
        fail_msg("unexpected error: %s", cJSON_PrintUnformatted(r));
    assert_int_equal((int)num(get(r, "id")), id);
    cJSON *res = get(r, "result");
    assert_non_null(res);
    return res;
}

/* The session still answers. */
static void expect_usable(fx_t *f)
{
    assert_int_equal(req(f, "{\"id\": 999, \"op\": \"stats.get\", \"match\": \"router.*\"}"), 1);
    cJSON *res = expect_result(f, 999);
    assert_non_null(path(res, "values", "router.workerThreads"));
}

/* ---- tests ---- */

static void test_hello(void **state)
{
    fx_t *f = *state;
    assert_int_equal(mgmt_proto_hello(f->m, sink_write, &f->out), 0);
    cJSON *h = get(last(&f->out), "hello");
    assert_non_null(h);
    assert_string_equal(str(get(h, "product")), "junction");
    assert_string_equal(str(get(h, "version")), "9.8.7");
    assert_string_equal(str(get(h, "router_id")), "R1");
    assert_string_equal(str(get(h, "mode")), "standalone");
    assert_int_equal((int)num(get(h, "protocol")), MGMT_PROTO_PROTOCOL);
    assert_int_equal((int)num(get(h, "max_line")), MGMT_PROTO_LINE_MAX);
    cJSON *ops = get(h, "ops");
    assert_true(cJSON_IsArray(ops));
    assert_int_equal(cJSON_GetArraySize(ops), 10);
    assert_string_equal(str(cJSON_GetArrayItem(ops, 0)), "stats.list");

    /* defaults for a NULL info */
    mgmt_proto_t *m = mgmt_proto_new(f->reg, NULL);
    assert_int_equal(mgmt_proto_hello(m, sink_write, &f->out), 0);
    assert_string_equal(str(path(last(&f->out), "hello", "product")), "junction");
    mgmt_proto_free(m);
    mgmt_proto_free(NULL);
}

static void test_malformed(void **state)
{
    fx_t *f = *state;
    static const struct {
        const char *line;
        int         code;
        int         id; /* -1 = null */
    } cases[] = {
        {"not json", 400, -1},
        {"{\"id\": 1, \"op\": \"stats.get\"", 400, -1},      /* unterminated */
        {"{\"id\": 1, \"op\": \"stats.get\"} x", 400, -1},    /* text after */
        {"{\"id\": 1}{\"id\": 2}", 400, -1},                  /* two objects */
        {"[1, 2, 3]", 400, -1},
        {"\"stats.get\"", 400, -1},
        {"42", 400, -1},
        {"null", 400, -1},
        {"{\"op\": \"stats.get\", \"match\": \"*\"}", 400, -1}, /* no id */
        {"{\"id\": true, \"op\": \"stats.get\"}", 400, -1},
        {"{\"id\": {\"a\": 1}, \"op\": \"stats.get\"}", 400, -1},
        {"{\"id\": null, \"op\": \"stats.get\"}", 400, -1},
        {"{\"id\": 5}", 400, 5},                                /* no op */
        {"{\"id\": 6, \"op\": 12}", 400, 6},
        {"{\"id\": 7, \"op\": \"stats.frobnicate\"}", 404, 7},
        {"{\"id\": 8, \"op\": \"\"}", 404, 8},
        {"{\"id\": 9, \"op\": \"stats.get\"}", 400, 9},          /* no match */
        {"{\"id\": 10, \"op\": \"stats.get\", \"match\": 3}", 400, 10},
        {"{\"id\": 11, \"op\": \"stats.get\", \"match\": \"\"}", 400, 11},
        {"{\"id\": 12, \"op\": \"stats.get\", \"match\": \"*\", \"limit\": 0}", 400, 12},
        {"{\"id\": 13, \"op\": \"stats.get\", \"match\": \"*\", \"limit\": 1.5}", 400, 13},
        {"{\"id\": 14, \"op\": \"stats.list\", \"limit\": \"10\"}", 400, 14},
        {"{\"id\": 15, \"op\": \"stats.list\", \"cursor\": \"garbage\"}", 400, 15},
        {"{\"id\": 16, \"op\": \"stats.list\", \"cursor\": 7}", 400, 16},
        {"{\"id\": 17, \"op\": \"stats.subscribe\"}", 400, 17},
        {"{\"id\": 18, \"op\": \"stats.subscribe\", \"match\": \"*\", \"interval_ms\": 1}", 400,
         18},
        {"{\"id\": 19, \"op\": \"stats.unsubscribe\"}", 400, 19},
        {"{\"id\": 20, \"op\": \"stats.unsubscribe\", \"sub\": 77}", 404, 20},
        {"{\"id\": 21, \"op\": \"entity.query\"}", 400, 21},
        /* a session without the router's sslProfiles (a WebSocket's) may not change them */
        {"{\"id\": 41, \"op\": \"sslProfile.update\", \"name\": \"p\"}", 403, 41},
        {"{\"id\": 42, \"op\": \"sslProfile.list\"}", 403, 42},
        {"{\"id\": 22, \"op\": \"entity.query\", \"type\": \"widget\"}", 404, 22},
        {"{\"id\": 23, \"op\": \"entity.query\", \"type\": \"link\", \"offset\": -1}", 400, 23},
        {"{\"id\": 24, \"op\": \"entity.query\", \"type\": \"link\", \"attributeNames\": 3}", 400,
         24},
        {"{\"id\": 25, \"op\": \"entity.query\", \"type\": \"link\", "
         "\"attributeNames\": [\"nope\"]}", 404, 25},
        {"{\"id\": 26, \"op\": \"entity.query\", \"type\": \"link\", "
         "\"attributeNames\": [1]}", 400, 26},
        {"{\"id\": 27, \"op\": \"stats.snapshot\", \"match\": false}", 400, 27},
        {"\x01\x02\xff\xfe", 400, -1},
        {"{\"id\": 28, \"op\": \"stats.get\", \"match\": \"\xff\xfe\"}", 400, -1}, /* not UTF-8 */
        {"{\"id\": 29, \"op\": \"stats.get\", \"match\": \"\xc0\xaf\"}", 400, -1}, /* overlong */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t before = f->out.n;
        int    rc = mgmt_proto_handle(f->m, cases[i].line, strlen(cases[i].line), sink_write,
                                      &f->out);
        assert_int_equal(rc, 0);
        if (f->out.n != before + 1)
            fail_msg("case %zu (%s): %zu replies", i, cases[i].line, f->out.n - before);
        cJSON *e = get(last(&f->out), "error");
        if (!e)
            fail_msg("case %zu (%s): no error", i, cases[i].line);
        if ((int)num(get(e, "code")) != cases[i].code)
            fail_msg("case %zu (%s): code %d, want %d", i, cases[i].line,
                     (int)num(get(e, "code")), cases[i].code);
        expect_error(f, cases[i].code, cases[i].id);
        expect_usable(f);
    }

    /* a NUL inside the line */
    const char nul[] = "{\"id\": 1,\0 \"op\": \"stats.get\"}";
    assert_int_equal(mgmt_proto_handle(f->m, nul, sizeof(nul) - 1, sink_write, &f->out), 0);
    expect_error(f, 400, -1);
    expect_usable(f);

    /* blank lines are not requests */
    size_t before = f->out.n;
    assert_int_equal(mgmt_proto_handle(f->m, "", 0, sink_write, &f->out), 0);
    assert_int_equal(mgmt_proto_handle(f->m, "  \t\r\n", 5, sink_write, &f->out), 0);
    assert_int_equal(f->out.n, before);

    /* string ids are echoed, with escapes; CR LF is accepted */
    const char crlf[] = "{\"id\": \"a\\\"b\", \"op\": \"nope\"}\r\n";
    assert_int_equal(mgmt_proto_handle(f->m, crlf, sizeof(crlf) - 1, sink_write, &f->out), 0);
    assert_string_equal(str(get(last(&f->out), "id")), "a\"b");
    /* large integral ids stay integral */
    req(f, "{\"id\": 9007199254740991, \"op\": \"nope\"}");
    assert_true(num(get(last(&f->out), "id")) == 9007199254740991.0);
}

static void test_too_long(void **state)
{
    fx_t  *f = *state;
    size_t n = MGMT_PROTO_LINE_MAX + 100;
    char  *line = malloc(n);
    memset(line, ' ', n);
    memcpy(line, "{\"id\": 1, \"op\": \"stats.get\", \"match\": \"", 39);
    line[n - 2] = '"';
    line[n - 1] = '}';
    assert_int_equal(mgmt_proto_handle(f->m, line, n, sink_write, &f->out), 0);
    expect_error(f, 413, -1);
    expect_usable(f);
    free(line);

    /* the error line a server sends itself */
    assert_int_equal(mgmt_proto_error(sink_write, &f->out, 503, "too many clients"), 0);
    expect_error(f, 503, -1);
    assert_string_equal(str(path(last(&f->out), "error", "message")), "too many clients");
}

static void test_get(void **state)
{
    fx_t       *f = *state;
    stats_obj_t a1 = mk(f, f->addr, "M0q", "balanced", NULL, NULL);
    stats_obj_t a2 = mk(f, f->addr, "M0a.b.c", "multicast", NULL, NULL); /* dots inside */
    stats_obj_t l1 = mk(f, f->link, "5", "1", "out", "M0q");
    stats_counter_add(f->shard, stats_obj_stat(a1, A_OUT), 12);
    stats_counter_add(f->shard, stats_obj_stat(a2, A_OUT), 34);
    stats_counter_add(f->shard, stats_obj_stat(a1, A_IN), 5);
    stats_gauge_add(f->shard, stats_obj_stat(l1, L_CREDIT), -3);
    stats_obj_t r = stats_family_object(f->router);
    stats_gauge_set(f->shard, stats_obj_stat(r, R_WORKERS), 4);
    stats_hist_record(f->shard, stats_obj_hist(r, 3, 4), 3);
    stats_hist_record(f->shard, stats_obj_hist(r, 3, 4), 100);
    stats_counter_add(f->shard, stats_obj_stat(a1, A_TRANSIT), UINT64_C(1) << 62);

    /* a glob over labelled objects */
    assert_int_equal(req(f, "{\"id\": 1, \"op\": \"stats.get\", "
                            "\"match\": \"address.*.deliveriesEgress\"}"), 1);
    cJSON *v = get(expect_result(f, 1), "values");
    assert_int_equal(cJSON_GetArraySize(v), 2);
    assert_int_equal((int)num(get(v, "address.M0q.deliveriesEgress")), 12);
    assert_int_equal((int)num(get(v, "address.M0a.b.c.deliveriesEgress")), 34);
    assert_null(get(expect_result(f, 1), "truncated"));

    /* one literal name; a gauge below zero; derived router totals */
    req(f, "{\"id\": 2, \"op\": \"stats.get\", \"match\": \"link.5.creditAvailable\"}");
    v = get(expect_result(f, 2), "values");
    assert_int_equal(cJSON_GetArraySize(v), 1);
    assert_int_equal((int)num(get(v, "link.5.creditAvailable")), -3);
    req(f, "{\"id\": 3, \"op\": \"stats.get\", \"match\": \"router.*\"}");
    v = get(expect_result(f, 3), "values");
    assert_int_equal((int)num(get(v, "router.deliveriesIngress")), 5);
    assert_int_equal((int)num(get(v, "router.linkCount")), 1);
    assert_int_equal((int)num(get(v, "router.workerThreads")), 4);
    cJSON *h = get(v, "router.latency");
    assert_true(cJSON_IsObject(h));
    assert_int_equal((int)num(get(h, "count")), 2);
    assert_int_equal((int)num(get(h, "sum")), 103);
    assert_int_equal(cJSON_GetArraySize(get(h, "buckets")), 5);
    assert_int_equal((int)num(cJSON_GetArrayItem(get(h, "buckets"), 2)), 1); /* 2 < 3 <= 4 */
    assert_int_equal((int)num(cJSON_GetArrayItem(get(h, "buckets"), 4)), 1); /* +Inf */
    assert_true(num(get(h, "p50")) > 0);

    assert_int_equal(req(f, "{\"id\": 4, \"op\": \"stats.get\", \"match\": "
                            "\"address.M0q.deliveriesTransit\"}"), 1);
    /* cJSON reads it as a double; 2^62 is exact in a double (test_exact_numbers reads the
     * text) */
    assert_true(num(path(expect_result(f, 4), "values", "address.M0q.deliveriesTransit")) ==
                4611686018427387904.0);

    /* nothing matches: an empty map, not an error */
    req(f, "{\"id\": 5, \"op\": \"stats.get\", \"match\": \"nosuch.*\"}");
    assert_int_equal(cJSON_GetArraySize(get(expect_result(f, 5), "values")), 0);

    /* limit: truncated */
    req(f, "{\"id\": 6, \"op\": \"stats.get\", \"match\": \"*\", \"limit\": 3}");
    cJSON *res = expect_result(f, 6);
    assert_int_equal(cJSON_GetArraySize(get(res, "values")), 3);
    assert_true(cJSON_IsTrue(get(res, "truncated")));
}

/* The raw text of a reply, to check exact number formatting. */
typedef struct rawbuf {
    char   text[4096];
    size_t n;
} rawbuf_t;

static int raw_write(void *ctx, const char *bytes, size_t len)
{
    rawbuf_t *r = ctx;
    if (r->n + len < sizeof(r->text)) {
        memcpy(r->text + r->n, bytes, len);
        r->n += len;
        r->text[r->n] = 0;
    }
    return 0;
}

static void test_exact_numbers(void **state)
{
    fx_t       *f = *state;
    stats_obj_t a = mk(f, f->addr, "M0q", "balanced", NULL, NULL);
    stats_counter_add(f->shard, stats_obj_stat(a, A_IN), UINT64_MAX);
    stats_gauge_add(f->shard, stats_obj_stat(a, A_SUBS), INT64_MIN);
    rawbuf_t    r = {0};
    const char *line = "{\"id\":1,\"op\":\"stats.get\",\"match\":\"address.M0q.*\"}";
    assert_int_equal(mgmt_proto_handle(f->m, line, strlen(line), raw_write, &r), 0);
    assert_non_null(strstr(r.text, "\"address.M0q.deliveriesIngress\":18446744073709551615"));
    assert_non_null(strstr(r.text, "\"address.M0q.subscriberCount\":-9223372036854775808"));
}

static void test_escaping(void **state)
{
    fx_t *f = *state;
    /* a container id with quotes, a backslash, control bytes and bytes that are not UTF-8 */
    mk(f, f->conn, "1", "127.0.0.1:1", "c\"q\\\n\t\x01\xff\xc3\xa9\xe2\x82", "in");
    req(f, "{\"id\": 1, \"op\": \"entity.query\", \"type\": \"connection\", "
           "\"attributeNames\": [\"container\"]}");
    cJSON *rows = get(expect_result(f, 1), "results");
    assert_int_equal(cJSON_GetArraySize(rows), 1);
    const char *c = str(cJSON_GetArrayItem(cJSON_GetArrayItem(rows, 0), 0));
    assert_string_equal(c, "c\"q\\\n\t\x01\xef\xbf\xbd\xc3\xa9\xef\xbf\xbd\xef\xbf\xbd");

    /* the same in stats.list labels and names */
    req(f, "{\"id\": 2, \"op\": \"stats.list\", \"match\": \"connection.*\"}");
    cJSON *st = get(expect_result(f, 2), "stats");
    assert_int_equal(cJSON_GetArraySize(st), 3);
    cJSON *labels = get(cJSON_GetArrayItem(st, 0), "labels");
    assert_string_equal(str(get(labels, "connection")), "1");
    assert_string_equal(str(get(labels, "dir")), "in");
}

static void test_list_paging(void **state)
{
    fx_t *f = *state;
    char  id[16];
    for (int i = 0; i < 100; i++) {
        snprintf(id, sizeof(id), "M0a%d", i);
        mk(f, f->addr, id, "balanced", NULL, NULL);
    }
    /* 500 address stats + 4 router stats; pages of 64 */
    size_t total = 0, pages = 0, want = 500 + 4;
    char   cursor[64] = "";
    int    seen_help = 0;
    for (;;) {
        if (*cursor)
            req(f, "{\"id\": %zu, \"op\": \"stats.list\", \"limit\": 64, \"cursor\": \"%s\"}",
                pages, cursor);
        else
            req(f, "{\"id\": %zu, \"op\": \"stats.list\", \"limit\": 64}", pages);
        cJSON *res = expect_result(f, (int)pages);
        cJSON *st = get(res, "stats");
        cJSON *e;
        cJSON_ArrayForEach(e, st)
        {
            const char *kind = str(get(e, "kind"));
            assert_true(strcmp(kind, "counter") == 0 || strcmp(kind, "gauge") == 0 ||
                        strcmp(kind, "histogram") == 0);
            if (strcmp(str(get(e, "name")), "address.M0a7.subscriberCount") == 0) {
                assert_string_equal(str(get(e, "help")), "Local consumers");
                assert_string_equal(kind, "gauge");
                seen_help++;
            }
            total++;
        }
        pages++;
        cJSON *next = get(res, "next");
        assert_non_null(next);
        if (cJSON_IsNull(next))
            break;
        assert_int_equal(cJSON_GetArraySize(st), 64);
        snprintf(cursor, sizeof(cursor), "%s", str(next));
        assert_true(pages < 100);
    }
    assert_int_equal(total, want);
    assert_int_equal(pages, (want + 63) / 64);
    assert_int_equal(seen_help, 1);

    /* a match, and a cursor from an older walk still pages correctly (by skipping) */
    req(f, "{\"id\": 1, \"op\": \"stats.list\", \"match\": \"address.*.deliveriesEgress\", "
           "\"limit\": 30}");
    cJSON *res = expect_result(f, 1);
    assert_int_equal(cJSON_GetArraySize(get(res, "stats")), 30);
    char old[64];
    snprintf(old, sizeof(old), "%s", str(get(res, "next")));
    req(f, "{\"id\": 2, \"op\": \"stats.list\", \"match\": \"router.*\"}");
    assert_true(cJSON_IsNull(get(expect_result(f, 2), "next")));
    req(f, "{\"id\": 3, \"op\": \"stats.list\", \"match\": \"address.*.deliveriesEgress\", "
           "\"limit\": 1000, \"cursor\": \"%s\"}", old);
    res = expect_result(f, 3);
    assert_int_equal(cJSON_GetArraySize(get(res, "stats")), 70);
    assert_true(cJSON_IsNull(get(res, "next")));
    assert_string_equal(str(get(cJSON_GetArrayItem(get(res, "stats"), 0), "name")),
                        "address.M0a30.deliveriesEgress");
}

static void test_snapshot(void **state)
{
    fx_t *f = *state;
    char  id[16];
    for (int i = 0; i < 300; i++) {
        snprintf(id, sizeof(id), "M0s%d", i);
        stats_obj_t o = mk(f, f->addr, id, "closest", NULL, NULL);
        stats_counter_add(f->shard, stats_obj_stat(o, A_OUT), (uint64_t)i);
    }
    assert_int_equal(req(f, "{\"id\": \"snap\", \"op\": \"stats.snapshot\"}"), 1);
    size_t values = 0, lines = 0;
    for (;;) {
        cJSON *r = last(&f->out);
        assert_string_equal(str(get(r, "id")), "snap");
        cJSON *v = path(r, "result", "values");
        assert_true(cJSON_IsObject(v));
        values += (size_t)cJSON_GetArraySize(v);
        lines++;
        cJSON *more = get(r, "more");
        assert_true(cJSON_IsBool(more));
        if (cJSON_IsFalse(more)) {
            assert_false(mgmt_proto_is_streaming(f->m));
            break;
        }
        assert_true(mgmt_proto_is_streaming(f->m));
        if (lines == 1) {
            /* while streaming: other ops answer at once, a second stream is refused */
            req(f, "{\"id\": 8, \"op\": \"stats.get\", \"match\": \"address.M0s299.*\"}");
            assert_int_equal((int)num(path(expect_result(f, 8), "values",
                                           "address.M0s299.deliveriesEgress")),
                             299);
            req(f, "{\"id\": 9, \"op\": \"stats.snapshot\"}");
            expect_error(f, 409, 9);
            req(f, "{\"id\": 10, \"op\": \"entity.query\", \"type\": \"link\"}");
            expect_error(f, 409, 10);
        }
        size_t before = f->out.n;
        assert_int_equal(mgmt_proto_resume(f->m, sink_write, &f->out), 0);
        assert_int_equal(f->out.n, before + 1);
    }
    assert_int_equal(values, 300 * 5 + 4 + 0);
    assert_true(lines >= 3); /* 1504 values, 512 a line */
    /* resume with nothing in progress does nothing */
    size_t before = f->out.n;
    assert_int_equal(mgmt_proto_resume(f->m, sink_write, &f->out), 0);
    assert_int_equal(f->out.n, before);

    /* a match: one line */
    req(f, "{\"id\": 2, \"op\": \"stats.snapshot\", \"match\": \"address.M0s1?.deliveriesEgress\"}");
    cJSON *r = last(&f->out);
    assert_true(cJSON_IsFalse(get(r, "more")));
    assert_int_equal(cJSON_GetArraySize(path(r, "result", "values")), 10);

    /* a session freed in the middle of a stream frees it */
    mgmt_proto_t *m = mgmt_proto_new(f->reg, &info);
    const char *snap = "{\"id\":1,\"op\":\"stats.snapshot\"}";
    assert_int_equal(mgmt_proto_handle(m, snap, strlen(snap), sink_write, &f->out), 0);
    assert_true(mgmt_proto_is_streaming(m));
    mgmt_proto_free(m);
}

static cJSON *sub_line(fx_t *f, int sub)
{
    cJSON *r = last(&f->out);
    assert_int_equal((int)num(get(r, "sub")), sub);
    assert_null(get(r, "id"));
    return r;
}

static void test_subscribe(void **state)
{
    fx_t       *f = *state;
    stats_obj_t a = mk(f, f->addr, "M0q", "balanced", NULL, NULL);
    stats_obj_t b = mk(f, f->addr, "M0r", "balanced", NULL, NULL);

    assert_int_equal(mgmt_proto_next_due(f->m, 0), -1);
    req(f, "{\"id\": 1, \"op\": \"stats.subscribe\", \"match\": \"address.*.deliveriesEgress\", "
           "\"interval_ms\": 100}");
    cJSON *res = expect_result(f, 1);
    int    sub = (int)num(get(res, "sub"));
    assert_true(sub > 0);
    assert_int_equal((int)num(get(res, "interval_ms")), 100);
    assert_int_equal(mgmt_proto_next_due(f->m, 1000), 0);

    /* the first update holds everything */
    size_t before = f->out.n;
    assert_int_equal(mgmt_proto_tick(f->m, 1000, sink_write, &f->out), 0);
    assert_int_equal(f->out.n, before + 1);
    cJSON *v = get(sub_line(f, sub), "values");
    assert_int_equal(cJSON_GetArraySize(v), 2);
    assert_int_equal((int)num(get(v, "address.M0q.deliveriesEgress")), 0);
    assert_int_equal(mgmt_proto_next_due(f->m, 1000), 100);
    assert_int_equal(mgmt_proto_next_due(f->m, 1060), 40);

    /* not due yet: nothing */
    stats_counter_add(f->shard, stats_obj_stat(a, A_OUT), 7);
    before = f->out.n;
    assert_int_equal(mgmt_proto_tick(f->m, 1050, sink_write, &f->out), 0);
    assert_int_equal(f->out.n, before);

    /* due: only what changed */
    assert_int_equal(mgmt_proto_tick(f->m, 1100, sink_write, &f->out), 0);
    assert_int_equal(f->out.n, before + 1);
    v = get(sub_line(f, sub), "values");
    assert_int_equal(cJSON_GetArraySize(v), 1);
    assert_int_equal((int)num(get(v, "address.M0q.deliveriesEgress")), 7);
    assert_null(get(sub_line(f, sub), "gone"));

    /* nothing changed: no line at all */
    before = f->out.n;
    assert_int_equal(mgmt_proto_tick(f->m, 1200, sink_write, &f->out), 0);
    assert_int_equal(f->out.n, before);

    /* a slow client: updates are refused, the values keep changing; the next update that
     * goes through has only the latest values, and there is never more than one line per
     * tick */
    f->out.refuse = -EAGAIN;
    for (int i = 0; i < 10; i++) {
        stats_counter_add(f->shard, stats_obj_stat(b, A_OUT), 1);
        assert_int_equal(mgmt_proto_tick(f->m, 1300 + 100 * (uint64_t)i, sink_write, &f->out),
                         0);
    }
    assert_int_equal(f->out.refused, 10);
    f->out.refuse = 0;
    before = f->out.n;
    assert_int_equal(mgmt_proto_tick(f->m, 2300, sink_write, &f->out), 0);
    assert_int_equal(f->out.n, before + 1);
    v = get(sub_line(f, sub), "values");
    assert_int_equal(cJSON_GetArraySize(v), 1);
    assert_int_equal((int)num(get(v, "address.M0r.deliveriesEgress")), 10);

    /* a late tick sends one update and does not try to catch up */
    stats_counter_add(f->shard, stats_obj_stat(a, A_OUT), 1);
    before = f->out.n;
    assert_int_equal(mgmt_proto_tick(f->m, 9000, sink_write, &f->out), 0);
    assert_int_equal(f->out.n, before + 1);
    assert_int_equal(mgmt_proto_next_due(f->m, 9000), 100);

    /* an object retired: "gone"; one created: its values */
    assert_int_equal(stats_object_retire(f->reg, b), 0);
    stats_obj_t c = mk(f, f->addr, "M0s", "balanced", NULL, NULL);
    stats_counter_add(f->shard, stats_obj_stat(c, A_OUT), 3);
    assert_int_equal(mgmt_proto_tick(f->m, 9100, sink_write, &f->out), 0);
    cJSON *u = sub_line(f, sub);
    v = get(u, "values");
    assert_int_equal(cJSON_GetArraySize(v), 1);
    assert_int_equal((int)num(get(v, "address.M0s.deliveriesEgress")), 3);
    cJSON *gone = get(u, "gone");
    assert_int_equal(cJSON_GetArraySize(gone), 1);
    assert_string_equal(str(cJSON_GetArrayItem(gone, 0)), "address.M0r.deliveriesEgress");
    /* reported once */
    before = f->out.n;
    assert_int_equal(mgmt_proto_tick(f->m, 9200, sink_write, &f->out), 0);
    assert_int_equal(f->out.n, before);

    /* a write that fails for good stops the tick with its error */
    stats_counter_add(f->shard, stats_obj_stat(a, A_OUT), 1);
    f->out.refuse = -EPIPE;
    assert_int_equal(mgmt_proto_tick(f->m, 9300, sink_write, &f->out), -EPIPE);
    f->out.refuse = 0;

    /* unsubscribe */
    req(f, "{\"id\": 2, \"op\": \"stats.unsubscribe\", \"sub\": %d}", sub);
    assert_int_equal((int)num(get(expect_result(f, 2), "sub")), sub);
    assert_int_equal(mgmt_proto_next_due(f->m, 0), -1);
    req(f, "{\"id\": 3, \"op\": \"stats.unsubscribe\", \"sub\": %d}", sub);
    expect_error(f, 404, 3);
}

static void test_subscribe_first_empty_and_limits(void **state)
{
    fx_t *f = *state;
    /* a match with nothing behind it still gets one (empty) first update */
    req(f, "{\"id\": 1, \"op\": \"stats.subscribe\", \"match\": \"nosuch.*\"}");
    int sub = (int)num(get(expect_result(f, 1), "sub"));
    assert_int_equal(mgmt_proto_tick(f->m, 5, sink_write, &f->out), 0);
    assert_int_equal(cJSON_GetArraySize(get(sub_line(f, sub), "values")), 0);
    size_t before = f->out.n;
    assert_int_equal(mgmt_proto_tick(f->m, 2000, sink_write, &f->out), 0);
    assert_int_equal(f->out.n, before);

    /* the cap on subscriptions */
    for (int i = 1; i < MGMT_PROTO_MAX_SUBS; i++) {
        req(f, "{\"id\": %d, \"op\": \"stats.subscribe\", \"match\": \"router.*\"}", 100 + i);
        expect_result(f, 100 + i);
    }
    req(f, "{\"id\": 2, \"op\": \"stats.subscribe\", \"match\": \"router.*\"}");
    expect_error(f, 429, 2);
    /* histograms change when their count or sum does */
    stats_obj_t r = stats_family_object(f->router);
    assert_int_equal(mgmt_proto_tick(f->m, 3000, sink_write, &f->out), 0);
    stats_hist_record(f->shard, stats_obj_hist(r, 3, 4), 2);
    before = f->out.n;
    assert_int_equal(mgmt_proto_tick(f->m, 5000, sink_write, &f->out), 0);
    assert_int_equal(f->out.n, before + MGMT_PROTO_MAX_SUBS - 1);
    cJSON *v = get(last(&f->out), "values");
    assert_int_equal(cJSON_GetArraySize(v), 1);
    assert_int_equal((int)num(path(v, "router.latency", "count")), 1);
}

/* The row of `rows` whose column `key` is `value`. */
static cJSON *row_where(cJSON *res, const char *key, const char *value)
{
    cJSON *names = get(res, "attributeNames");
    int    k = -1;
    for (int i = 0; i < cJSON_GetArraySize(names); i++)
        if (strcmp(str(cJSON_GetArrayItem(names, i)), key) == 0)
            k = i;
    assert_true(k >= 0);
    cJSON *row;
    cJSON_ArrayForEach(row, get(res, "results"))
    {
        cJSON *c = cJSON_GetArrayItem(row, k);
        if (cJSON_IsString(c) && strcmp(c->valuestring, value) == 0)
            return row;
    }
    return NULL;
}

/* Column `key` of `row`. */
static cJSON *col(cJSON *res, cJSON *row, const char *key)
{
    cJSON *names = get(res, "attributeNames");
    assert_int_equal(cJSON_GetArraySize(names), cJSON_GetArraySize(row));
    for (int i = 0; i < cJSON_GetArraySize(names); i++)
        if (strcmp(str(cJSON_GetArrayItem(names, i)), key) == 0)
            return cJSON_GetArrayItem(row, i);
    fail_msg("no column %s", key);
    return NULL;
}

/* Run a query to its end (resuming); returns the last line's result with every line's rows
 * moved into it. */
static cJSON *query_all(fx_t *f, const char *type, const char *extra)
{
    req(f, "{\"id\": 77, \"op\": \"entity.query\", \"type\": \"%s\"%s}", type, extra);
    cJSON *all = cJSON_CreateArray();
    for (;;) {
        cJSON *res = expect_result(f, 77);
        cJSON *rows = get(res, "results");
        while (cJSON_GetArraySize(rows) > 0)
            cJSON_AddItemToArray(all, cJSON_DetachItemFromArray(rows, 0));
        if (cJSON_IsFalse(get(last(&f->out), "more")))
            break;
        assert_int_equal(mgmt_proto_resume(f->m, sink_write, &f->out), 0);
    }
    cJSON *res = expect_result(f, 77);
    cJSON_ReplaceItemInObject(res, "results", all);
    return res;
}

static void test_query(void **state)
{
    fx_t       *f = *state;
    stats_obj_t c1 = mk(f, f->conn, "1", "127.0.0.1:40000", "client-a", "in");
    mk(f, f->conn, "2", "127.0.0.1:40001", "client-b", "in");
    stats_gauge_set(f->shard, stats_obj_stat(c1, 2), (int64_t)time(NULL) - 5);
    stats_counter_add(f->shard, stats_obj_stat(c1, 0), 11);
    stats_obj_t l1 = mk(f, f->link, "7", "1", "in", "M0q");
    stats_obj_t l2 = mk(f, f->link, "8", "2", "out", "M0q");
    mk(f, f->link, "9", "2", "in", ""); /* anonymous sender */
    stats_gauge_set(f->shard, stats_obj_stat(l1, L_CAP), 250);
    stats_counter_add(f->shard, stats_obj_stat(l2, L_DLV), 42);
    stats_counter_add(f->shard, stats_obj_stat(l2, L_ACC), 40);
    stats_gauge_set(f->shard, stats_obj_stat(l2, L_UNSETTLED), 2);
    stats_obj_t a = mk(f, f->addr, "M0q", "balanced", NULL, NULL);
    stats_gauge_set(f->shard, stats_obj_stat(a, A_SUBS), 1);
    stats_counter_add(f->shard, stats_obj_stat(a, A_IN), 42);
    stats_obj_t r = stats_family_object(f->router);
    stats_gauge_set(f->shard, stats_obj_stat(r, R_WORKERS), 2);

    /* links */
    cJSON *res = query_all(f, "link", "");
    assert_string_equal(str(get(res, "type")), "org.apache.qpid.dispatch.router.link");
    assert_int_equal(cJSON_GetArraySize(get(res, "results")), 3);
    cJSON *row = row_where(res, "identity", "8");
    assert_non_null(row);
    assert_string_equal(str(col(res, row, "linkDir")), "out");
    assert_string_equal(str(col(res, row, "connectionId")), "2");
    assert_string_equal(str(col(res, row, "owningAddr")), "M0q");
    assert_string_equal(str(col(res, row, "linkType")), "endpoint");
    assert_string_equal(str(col(res, row, "operStatus")), "up");
    assert_true(cJSON_IsNull(col(res, row, "peer")));
    assert_int_equal((int)num(col(res, row, "deliveryCount")), 42);
    assert_int_equal((int)num(col(res, row, "acceptedCount")), 40);
    assert_int_equal((int)num(col(res, row, "unsettledCount")), 2);
    assert_int_equal((int)num(col(res, row, "capacity")), 0);
    row = row_where(res, "identity", "7");
    assert_int_equal((int)num(col(res, row, "capacity")), 250);
    assert_string_equal(str(col(res, row, "linkDir")), "in");
    row = row_where(res, "identity", "9");
    assert_true(cJSON_IsNull(col(res, row, "owningAddr")));

    /* qdrouterd's names for the type, attributeNames to pick and order columns */
    res = query_all(f, "org.apache.qpid.dispatch.router.link",
                    ", \"attributeNames\": [\"deliveryCount\", \"identity\"]");
    cJSON *names = get(res, "attributeNames");
    assert_int_equal(cJSON_GetArraySize(names), 2);
    assert_string_equal(str(cJSON_GetArrayItem(names, 0)), "deliveryCount");
    row = row_where(res, "identity", "8");
    assert_int_equal((int)num(cJSON_GetArrayItem(row, 0)), 42);
    res = query_all(f, "router.link", ", \"offset\": 1, \"count\": 1");
    assert_int_equal(cJSON_GetArraySize(get(res, "results")), 1);
    res = query_all(f, "router.link", ", \"offset\": 5");
    assert_int_equal(cJSON_GetArraySize(get(res, "results")), 0);
    res = query_all(f, "router.link", ", \"count\": 0");
    assert_int_equal(cJSON_GetArraySize(get(res, "results")), 0);

    /* connections */
    res = query_all(f, "connection", "");
    assert_int_equal(cJSON_GetArraySize(get(res, "results")), 2);
    row = row_where(res, "identity", "1");
    assert_string_equal(str(col(res, row, "host")), "127.0.0.1:40000");
    assert_string_equal(str(col(res, row, "container")), "client-a");
    assert_string_equal(str(col(res, row, "dir")), "in");
    assert_string_equal(str(col(res, row, "role")), "normal");
    assert_true(cJSON_IsTrue(col(res, row, "opened")));
    assert_true(cJSON_IsFalse(col(res, row, "isEncrypted")));
    int up = (int)num(col(res, row, "uptimeSeconds"));
    assert_true(up >= 5 && up <= 7);
    assert_int_equal((int)num(col(res, row, "deliveriesIn")), 11);
    row = row_where(res, "identity", "2");
    assert_true(cJSON_IsNull(col(res, row, "uptimeSeconds"))); /* openedAt not set yet */

    /* addresses */
    res = query_all(f, "router.address", "");
    assert_int_equal(cJSON_GetArraySize(get(res, "results")), 1);
    row = row_where(res, "key", "M0q");
    assert_string_equal(str(col(res, row, "name")), "M0q");
    assert_string_equal(str(col(res, row, "identity")), "M0q");
    assert_string_equal(str(col(res, row, "distribution")), "balanced");
    assert_int_equal((int)num(col(res, row, "subscriberCount")), 1);
    assert_int_equal((int)num(col(res, row, "deliveriesIngress")), 42);
    assert_int_equal((int)num(col(res, row, "remoteCount")), 0);
    assert_int_equal((int)num(col(res, row, "priority")), -1);

    /* router */
    res = query_all(f, "router", "");
    assert_int_equal(cJSON_GetArraySize(get(res, "results")), 1);
    row = cJSON_GetArrayItem(get(res, "results"), 0);
    assert_string_equal(str(col(res, row, "id")), "R1");
    assert_string_equal(str(col(res, row, "name")), "R1");
    assert_string_equal(str(col(res, row, "mode")), "standalone");
    assert_string_equal(str(col(res, row, "version")), "9.8.7");
    assert_int_equal((int)num(col(res, row, "workerThreads")), 2);
    assert_int_equal((int)num(col(res, row, "linkCount")), 3);
    assert_int_equal((int)num(col(res, row, "deliveriesIngress")), 42);
}

static void test_query_chunks(void **state)
{
    fx_t *f = *state;
    char  id[16];
    for (int i = 0; i < 1000; i++) {
        snprintf(id, sizeof(id), "%d", i);
        stats_obj_t o = mk(f, f->link, id, "1", i % 2 ? "in" : "out", "M0q");
        stats_counter_add(f->shard, stats_obj_stat(o, L_DLV), (uint64_t)i);
    }
    size_t before = f->out.n;
    cJSON *res = query_all(f, "link", "");
    assert_true(f->out.n - before >= 1000 / 128);
    cJSON *rows = get(res, "results");
    assert_int_equal(cJSON_GetArraySize(rows), 1000);
    /* every object exactly once, each with its own values */
    static char seen[1000];
    memset(seen, 0, sizeof(seen));
    cJSON *row;
    cJSON_ArrayForEach(row, rows)
    {
        int i = atoi(str(col(res, row, "identity")));
        assert_true(i >= 0 && i < 1000);
        assert_int_equal(seen[i], 0);
        seen[i] = 1;
        assert_int_equal((int)num(col(res, row, "deliveryCount")), i);
        assert_string_equal(str(col(res, row, "linkDir")), i % 2 ? "in" : "out");
    }
    /* count across chunk boundaries */
    res = query_all(f, "link", ", \"offset\": 100, \"count\": 300");
    rows = get(res, "results");
    assert_int_equal(cJSON_GetArraySize(rows), 300);
    assert_string_equal(str(col(res, cJSON_GetArrayItem(rows, 0), "identity")), "100");
}

static void test_query_without_families(void **state)
{
    fx_t *f = *state;
    /* a registry the router has not filled yet: the router row still has id, mode,
     * version; other types are empty */
    cJSON *res = query_all(f, "router", "");
    assert_int_equal(cJSON_GetArraySize(get(res, "results")), 1);
    cJSON *row = cJSON_GetArrayItem(get(res, "results"), 0);
    assert_string_equal(str(col(res, row, "id")), "R1");
    assert_string_equal(str(col(res, row, "version")), "9.8.7");
    res = query_all(f, "link", "");
    assert_int_equal(cJSON_GetArraySize(get(res, "results")), 0);
    assert_true(cJSON_GetArraySize(get(res, "attributeNames")) > 5);
    req(f, "{\"id\": 1, \"op\": \"stats.list\"}");
    res = expect_result(f, 1);
    assert_int_equal(cJSON_GetArraySize(get(res, "stats")), 0);
    assert_true(cJSON_IsNull(get(res, "next")));
    req(f, "{\"id\": 2, \"op\": \"stats.snapshot\"}");
    assert_true(cJSON_IsFalse(get(last(&f->out), "more")));
    assert_int_equal(cJSON_GetArraySize(path(last(&f->out), "result", "values")), 0);
}

/* Random bytes and mangled requests never crash, never leave the session unusable, and
 * always get exactly one reply (or none for a blank line). */
static void test_garbage(void **state)
{
    fx_t        *f = *state;
    static const char *seeds[] = {
        "{\"id\":1,\"op\":\"stats.get\",\"match\":\"router.*\"}",
        "{\"id\":2,\"op\":\"stats.list\",\"limit\":2,\"cursor\":\"1.2\"}",
        "{\"id\":3,\"op\":\"entity.query\",\"type\":\"link\",\"attributeNames\":[\"identity\"]}",
        "{\"id\":4,\"op\":\"stats.subscribe\",\"match\":\"*\",\"interval_ms\":50}",
    };
    unsigned seed = 12345;
    char     buf[256];
    mk(f, f->link, "1", "1", "in", "M0q");
    for (int round = 0; round < 3000; round++) {
        const char *s = seeds[round % 4];
        size_t      n = strlen(s);
        memcpy(buf, s, n);
        for (int k = 0; k < 3; k++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = (seed >> 8) % n;
            seed = seed * 1103515245u + 12345u;
            buf[at] = (char)(seed >> 16);
        }
        size_t before = f->out.n;
        assert_int_equal(mgmt_proto_handle(f->m, buf, n, sink_write, &f->out), 0);
        assert_true(f->out.n - before <= 1);
        while (mgmt_proto_is_streaming(f->m))
            assert_int_equal(mgmt_proto_resume(f->m, sink_write, &f->out), 0);
        assert_int_equal(mgmt_proto_tick(f->m, (uint64_t)round * 10, sink_write, &f->out), 0);
        if (f->out.n > MAX_LINES - 200)
            sink_clear(&f->out);
    }
    sink_clear(&f->out);
    expect_usable(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_hello, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_too_long, setup, teardown),
        cmocka_unit_test_setup_teardown(test_get, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exact_numbers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_escaping, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_paging, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot, setup, teardown),
        cmocka_unit_test_setup_teardown(test_subscribe, setup, teardown),
        cmocka_unit_test_setup_teardown(test_subscribe_first_empty_and_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_query, setup, teardown),
        cmocka_unit_test_setup_teardown(test_query_chunks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_query_without_families, setup_empty, teardown),
        cmocka_unit_test_setup_teardown(test_garbage, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
