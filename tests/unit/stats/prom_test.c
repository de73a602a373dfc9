/* tests/unit/stats/prom_test.c: stats/stats_prom.c - the Prometheus text format: order
 * (router totals under qdr_* names first, then labelled families), HELP/TYPE lines, counters
 * vs gauges vs histograms, escaping, streaming in pieces of any size, the write callback and
 * its errors, metric grouping over many objects. */
#include "stats/stats.h"

#include <errno.h>
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

/* A growable string, the write callback's sink. */
typedef struct sink {
    char  *buf;       /* text so far */
    size_t len;       /* bytes */
    size_t max_chunk; /* largest chunk seen */
    int    calls;     /* callback calls */
    int    fail_at;   /* return -EPIPE on this call (1-based), 0 = never */
} sink_t;

static int sink_write(void *ctx, const char *bytes, size_t len)
{
    sink_t *s = ctx;
    if (++s->calls == s->fail_at)
        return -EPIPE;
    s->buf = realloc(s->buf, s->len + len + 1);
    memcpy(s->buf + s->len, bytes, len);
    s->len += len;
    s->buf[s->len] = 0;
    if (len > s->max_chunk)
        s->max_chunk = len;
    return 0;
}

static char *render(stats_registry_t *r, const char *glob)
{
    sink_t s = {0};
    assert_int_equal(stats_prom_write(r, glob, sink_write, &s), 0);
    return s.buf ? s.buf : calloc(1, 1);
}

/* Read through stats_prom_read() in pieces of `piece` bytes. */
static char *render_pieces(stats_registry_t *r, size_t piece)
{
    stats_prom_t *p = stats_prom_new(r, NULL);
    char         *out = NULL, *tmp = malloc(piece);
    size_t        len = 0, n;
    while ((n = stats_prom_read(p, tmp, piece)) > 0) {
        assert_true(n <= piece);
        out = realloc(out, len + n + 1);
        memcpy(out + len, tmp, n);
        len += n;
    }
    assert_int_equal(stats_prom_read(p, tmp, piece), 0); /* stays done */
    stats_prom_free(p);
    free(tmp);
    if (!out)
        out = calloc(1, 1);
    out[len] = 0;
    return out;
}

static const stats_field_t addr_fields[] = {
    {.name = "deliveriesIngress", .kind = STATS_COUNTER, .help = "In \\ back\nline \"q\""},
    {.name = "subscriberCount", .kind = STATS_GAUGE},
};
static const stats_field_t conn_fields[] = {
    {.name = "deliveries", .kind = STATS_COUNTER, .prom = "junction_connection_deliveries"},
};
static const stats_field_t router_fields[] = {
    {.name = "connectionCount", .kind = STATS_GAUGE, .count_of = "connection",
     .prom = "qdr_connections_total", .help = "Connections"},
    {.name = "deliveriesIngress", .kind = STATS_COUNTER, .sum_of = "address.deliveriesIngress",
     .prom = "qdr_deliveries_ingress_total", .help = "Deliveries into the router"},
};
static const stats_field_t link_fields[] = {
    {.name = "settleLatency", .kind = STATS_HISTOGRAM, .buckets = 3,
     .help = "Settlement latency (µs)"},
};

typedef struct world {
    stats_registry_t *r;  /* the registry */
    stats_shard_t    *s;  /* one writer */
    stats_family_t   *fa; /* address */
    stats_family_t   *fc; /* connection */
    stats_family_t   *fl; /* link */
} world_t;

static int setup(void **state)
{
    world_t *w = calloc(1, sizeof(*w));
    w->r = stats_registry_new();
    w->s = stats_shard_new(w->r);
    stats_family_t *fr;
    assert_int_equal(stats_family_new(w->r, &(stats_family_def_t){.name = "address",
                                                                  .fields = addr_fields,
                                                                  .nfields = 2},
                                      &w->fa),
                     0);
    assert_int_equal(stats_family_new(w->r, &(stats_family_def_t){.name = "connection",
                                                                  .fields = conn_fields,
                                                                  .nfields = 1},
                                      &w->fc),
                     0);
    assert_int_equal(stats_family_new(w->r, &(stats_family_def_t){.name = "router",
                                                                  .fields = router_fields,
                                                                  .nfields = 2,
                                                                  .singleton = true},
                                      &fr),
                     0);
    assert_int_equal(stats_family_new(w->r, &(stats_family_def_t){.name = "link",
                                                                  .fields = link_fields,
                                                                  .nfields = 1,
                                                                  .labels = {"link", "connection"}},
                                      &w->fl),
                     0);
    *state = w;
    return 0;
}

static int teardown(void **state)
{
    world_t *w = *state;
    stats_shard_free(w->r, w->s);
    stats_registry_free(w->r);
    free(w);
    return 0;
}

static void populate(world_t *w)
{
    stats_obj_t a1, a2, c, l;
    stats_handle_t up, rss;
    assert_int_equal(stats_object_new(w->r, w->fa, (const char *[]){"M0examples"}, &a1), 0);
    assert_int_equal(stats_object_new(w->r, w->fa, (const char *[]){"a\"b\\c\nd"}, &a2), 0);
    assert_int_equal(stats_object_new(w->r, w->fc, (const char *[]){"4"}, &c), 0);
    assert_int_equal(stats_object_new(w->r, w->fl, (const char *[]){"17", "4"}, &l), 0);
    assert_int_equal(stats_stat_new(w->r, "uptimeSeconds", STATS_COUNTER, "Seconds since start",
                                    NULL, &up, NULL),
                     0);
    assert_int_equal(stats_stat_new(w->r, "rss", STATS_GAUGE, NULL,
                                    "process_resident_memory_bytes", &rss, NULL),
                     0);
    stats_counter_add(w->s, stats_obj_stat(a1, 0), 3);
    stats_counter_add(w->s, stats_obj_stat(a2, 0), 4);
    stats_gauge_add(w->s, stats_obj_stat(a2, 1), -1);
    stats_counter_add(w->s, stats_obj_stat(c, 0), 18446744073709551615ull);
    stats_counter_add(w->s, up, 12);
    stats_gauge_set(w->s, rss, -5);
    stats_hist_t h = stats_obj_hist(l, 0, 3);
    stats_hist_record(w->s, h, 1);
    stats_hist_record(w->s, h, 3);
    stats_hist_record(w->s, h, 3);
    stats_hist_record(w->s, h, 100);
}

static const char expected[] =
    "# HELP qdr_connections_total Connections\n"
    "# TYPE qdr_connections_total gauge\n"
    "qdr_connections_total 1\n"
    "# HELP qdr_deliveries_ingress_total Deliveries into the router\n"
    "# TYPE qdr_deliveries_ingress_total counter\n"
    "qdr_deliveries_ingress_total 7\n"
    "# HELP junction_uptime_seconds_total Seconds since start\n"
    "# TYPE junction_uptime_seconds_total counter\n"
    "junction_uptime_seconds_total 12\n"
    "# TYPE process_resident_memory_bytes gauge\n"
    "process_resident_memory_bytes -5\n"
    "# HELP junction_address_deliveries_ingress_total In \\\\ back\\nline \"q\"\n"
    "# TYPE junction_address_deliveries_ingress_total counter\n"
    "junction_address_deliveries_ingress_total{address=\"M0examples\"} 3\n"
    "junction_address_deliveries_ingress_total{address=\"a\\\"b\\\\c\\nd\"} 4\n"
    "# TYPE junction_address_subscriber_count gauge\n"
    "junction_address_subscriber_count{address=\"M0examples\"} 0\n"
    "junction_address_subscriber_count{address=\"a\\\"b\\\\c\\nd\"} -1\n"
    "# TYPE junction_connection_deliveries counter\n"
    "junction_connection_deliveries{connection=\"4\"} 18446744073709551615\n"
    "# HELP junction_link_settle_latency Settlement latency (µs)\n"
    "# TYPE junction_link_settle_latency histogram\n"
    "junction_link_settle_latency_bucket{link=\"17\",connection=\"4\",le=\"1\"} 1\n"
    "junction_link_settle_latency_bucket{link=\"17\",connection=\"4\",le=\"2\"} 1\n"
    "junction_link_settle_latency_bucket{link=\"17\",connection=\"4\",le=\"4\"} 3\n"
    "junction_link_settle_latency_bucket{link=\"17\",connection=\"4\",le=\"+Inf\"} 4\n"
    "junction_link_settle_latency_sum{link=\"17\",connection=\"4\"} 107\n"
    "junction_link_settle_latency_count{link=\"17\",connection=\"4\"} 4\n";

static void test_format(void **state)
{
    world_t *w = *state;
    char    *empty = render(w->r, NULL);
    /* No objects yet: only the router's totals (0) render; no header for empty families. */
    assert_string_equal(empty, "# HELP qdr_connections_total Connections\n"
                               "# TYPE qdr_connections_total gauge\n"
                               "qdr_connections_total 0\n"
                               "# HELP qdr_deliveries_ingress_total Deliveries into the router\n"
                               "# TYPE qdr_deliveries_ingress_total counter\n"
                               "qdr_deliveries_ingress_total 0\n");
    free(empty);
    populate(w);
    char *out = render(w->r, NULL);
    assert_string_equal(out, expected);
    free(out);
}

static void test_pieces(void **state)
{
    world_t *w = *state;
    populate(w);
    size_t pieces[] = {1, 2, 7, 64, 100, 4096, 1 << 20};
    for (size_t i = 0; i < sizeof(pieces) / sizeof(pieces[0]); i++) {
        char *out = render_pieces(w->r, pieces[i]);
        assert_string_equal(out, expected);
        free(out);
    }
}

static void test_glob_filter(void **state)
{
    world_t *w = *state;
    populate(w);
    char *out = render(w->r, "router.*");
    assert_string_equal(out, "# HELP qdr_connections_total Connections\n"
                             "# TYPE qdr_connections_total gauge\n"
                             "qdr_connections_total 1\n"
                             "# HELP qdr_deliveries_ingress_total Deliveries into the router\n"
                             "# TYPE qdr_deliveries_ingress_total counter\n"
                             "qdr_deliveries_ingress_total 7\n");
    free(out);
    out = render(w->r, "*.subscriberCount");
    assert_string_equal(out, "# TYPE junction_address_subscriber_count gauge\n"
                             "junction_address_subscriber_count{address=\"M0examples\"} 0\n"
                             "junction_address_subscriber_count{address=\"a\\\"b\\\\c\\nd\"} -1\n");
    free(out);
    out = render(w->r, "nothing");
    assert_string_equal(out, "");
    free(out);
}

static void test_write_error_stops(void **state)
{
    world_t *w = *state;
    populate(w);
    /* Enough objects for several chunks. */
    char id[32];
    for (int i = 0; i < 3000; i++) {
        stats_obj_t o;
        snprintf(id, sizeof(id), "conn%d", i);
        assert_int_equal(stats_object_new(w->r, w->fc, (const char *[]){id}, &o), 0);
    }
    sink_t s = {.fail_at = 2};
    assert_int_equal(stats_prom_write(w->r, NULL, sink_write, &s), -EPIPE);
    assert_int_equal(s.calls, 2); /* stopped at the failing call */
    free(s.buf);
}

/* Many objects: chunks are bounded, and every metric's samples are contiguous under one
 * TYPE line (Prometheus rejects a metric that comes back after another). */
static void test_grouping_many(void **state)
{
    world_t *w = *state;
    char     id[32];
    enum { N = 20000 };
    for (int i = 0; i < N; i++) {
        stats_obj_t o;
        snprintf(id, sizeof(id), "addr%d", i);
        assert_int_equal(stats_object_new(w->r, w->fa, (const char *[]){id}, &o), 0);
        stats_counter_add(w->s, stats_obj_stat(o, 0), (uint64_t)i);
    }
    sink_t s = {0};
    assert_int_equal(stats_prom_write(w->r, NULL, sink_write, &s), 0);
    assert_true(s.max_chunk <= 16384);
    assert_true(s.calls > 10);
    /* Walk the lines: a sample's metric must be the one of the last TYPE line. */
    char    *line = s.buf, *nl;
    char     current[128] = "";
    int      types = 0, samples = 0;
    uint64_t sum = 0;
    while ((nl = strchr(line, '\n'))) {
        *nl = 0;
        if (strncmp(line, "# TYPE ", 7) == 0) {
            sscanf(line + 7, "%127s", current);
            types++;
        } else if (line[0] != '#') {
            assert_int_equal(strncmp(line, current, strlen(current)), 0);
            samples++;
            if (strncmp(line, "junction_address_deliveries_ingress_total{", 42) == 0)
                sum += strtoull(strrchr(line, ' ') + 1, NULL, 10);
        }
        line = nl + 1;
    }
    assert_int_equal(types, 2 + 2); /* router x2, address x2 (connection and link empty) */
    assert_int_equal(samples, 2 + 2 * N);
    assert_true(sum == (uint64_t)N * (N - 1) / 2);
    free(s.buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_format, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pieces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_glob_filter, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_error_stops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grouping_many, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
