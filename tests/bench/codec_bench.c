/* tests/bench/codec_bench.c: how long codec_scan() and codec_compose_prefix() take per message
 * as the number of message annotations grows (the DISPATCH-760 workload).
 *
 * For N = 0, 1, 10, 200 user annotations of 100 bytes each (a sym8 key and a str8 value),
 * followed by the router keys an interior router receives (x-opt-qd.to, .ingress, .trace of
 * two hops, .phase), it prints nanoseconds per:
 *   scan          codec_scan() of the whole message
 *   need+compose  codec_compose_need() then codec_compose_prefix(), writing to/ingress/phase
 *                 and the trace plus this router's id (what a router does per outgoing copy)
 *   compose       codec_compose_prefix() alone, sizes already known
 *   strip         codec_compose_prefix() with write = false (stripAnnotations out)
 * Usage: codec_bench [milliseconds per measurement, default 200]
 *        codec_bench -i <iterations>   a fixed number of operations per measurement instead,
 *                                      for instruction counts (valgrind --tool=callgrind)
 */
#include "codec/codec.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile size_t sink; /* keeps results alive so the loops are not optimised away */

static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static size_t put(uint8_t *b, size_t n, const void *p, size_t len)
{
    memcpy(b + n, p, len);
    return n + len;
}

/* sym8 key / str8 value */
static size_t put_var8(uint8_t *b, size_t n, uint8_t code, const char *s, size_t len)
{
    b[n++] = code;
    b[n++] = (uint8_t)len;
    return put(b, n, s, len);
}

/* A message: header, MA (n user pairs of 100 bytes + router keys), properties, amqp-value. */
static size_t build(uint8_t *b, int n)
{
    static const uint8_t header[] = {0x00, 0x53, 0x70, 0xc0, 0x02, 0x01, 0x41};
    static const uint8_t props[] = {0x00, 0x53, 0x73, 0xc0, 0x07, 0x03,
                                    0x40, 0x40, 0xa1, 0x02, 'q',  '1'};
    static const uint8_t body[] = {0x00, 0x53, 0x77, 0xa1, 0x05, 'h', 'e', 'l', 'l', 'o'};
    size_t               len = 0;
    size_t               map;
    char                 key[32];
    char                 val[128];

    len = put(b, len, header, sizeof(header));
    b[len++] = 0x00;
    b[len++] = 0x53;
    b[len++] = 0x72;
    map = len;
    b[len++] = 0xd1;
    len += 8;
    for (int i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "annotation-%03d", i); /* 14 bytes: 16 encoded */
        memset(val, 'a' + i % 26, 82);                    /* 82 bytes: 84 encoded */
        len = put_var8(b, len, 0xa3, key, 14);
        len = put_var8(b, len, 0xa1, val, 82);
    }
    len = put_var8(b, len, 0xa3, "x-opt-qd.to", 11);
    len = put_var8(b, len, 0xa1, "addr/queue", 10);
    len = put_var8(b, len, 0xa3, "x-opt-qd.ingress", 16);
    len = put_var8(b, len, 0xa1, "0/RouterA", 9);
    len = put_var8(b, len, 0xa3, "x-opt-qd.trace", 14);
    static const uint8_t trace[] = {0xc0, 0x17, 0x02, 0xa1, 0x09, '0',  '/',  'R', 'o',
                                    'u',  't',  'e',  'r',  'A',  0xa1, 0x09, '0', '/',
                                    'R',  'o',  'u',  't',  'e',  'r',  'B'};
    len = put(b, len, trace, sizeof(trace));
    len = put_var8(b, len, 0xa3, "x-opt-qd.phase", 14);
    b[len++] = 0x54;
    b[len++] = 0x01;
    uint32_t size = (uint32_t)(len - map - 5);
    uint32_t count = (uint32_t)(2 * (n + 4));
    for (int i = 0; i < 4; i++) {
        b[map + 1 + i] = (uint8_t)(size >> (24 - 8 * i));
        b[map + 5 + i] = (uint8_t)(count >> (24 - 8 * i));
    }
    len = put(b, len, props, sizeof(props));
    return put(b, len, body, sizeof(body));
}

/* One operation of measurement k (see the file comment); returns something to sink. */
static size_t one(int k, const uint8_t *msg, size_t len, codec_scan_t *s, const codec_ra_out_t *ra,
                  const codec_ra_out_t *strip, uint8_t *scratch, codec_iov_t *iov)
{
    size_t need;
    int    n_iov;

    switch (k) {
    case 0:
        return (size_t)codec_scan(msg, len, true, s, NULL) + s->ma_user_count;
    case 1:
        codec_compose_need(msg, s, ra, &need, &n_iov);
        return (size_t)codec_compose_prefix(msg, s, ra, scratch, need, iov, n_iov);
    case 2:
        return (size_t)codec_compose_prefix(msg, s, ra, scratch, 512, iov, 16);
    default:
        return (size_t)codec_compose_prefix(msg, s, strip, scratch, 512, iov, 16);
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: codec_bench [MILLISECONDS]   time per measurement (default 200)\n"
               "       codec_bench -i ITERATIONS    a fixed number of operations per measurement\n"
               "                                    (for valgrind --tool=callgrind)\n"
               "Prints the nanoseconds per message of codec_scan() and codec_compose_prefix()\n"
               "for 0, 1, 10 and 200 message annotations of 100 bytes.\n");
}

int main(int argc, char **argv)
{
    static uint8_t   msg[64 * 1024];
    static const int ns[] = {0, 1, 10, 200};
    bool             fixed = argc > 2 && strcmp(argv[1], "-i") == 0;
    size_t           fixed_iters = fixed ? (size_t)atol(argv[2]) : 0;
    double           budget = (argc > 1 && !fixed ? atof(argv[1]) : 200) * 1e6;

    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        usage(stdout);
        return 0;
    }
    if ((argc > 1 && !fixed && budget <= 0) || (fixed && fixed_iters == 0)) {
        usage(stderr);
        return 2;
    }

    printf("%5s %7s %10s %14s %10s %10s  (ns per message)\n", "N", "bytes", "scan", "need+compose",
           "compose", "strip");
    for (size_t t = 0; t < sizeof(ns) / sizeof(ns[0]); t++) {
        size_t       len = build(msg, ns[t]);
        codec_scan_t s;
        const char  *why;
        uint8_t      scratch[512];
        codec_iov_t  iov[16];
        double       r[4];

        if (codec_scan(msg, len, true, &s, &why) != 0) {
            fprintf(stderr, "codec_bench: scan failed: %s\n", why);
            return 1;
        }
        const codec_ra_out_t ra = {
            .write = true,
            .ingress = s.ra.ingress,
            .trace = s.ra.trace,
            .trace_count = s.ra.trace_count,
            .trace_append = {(const uint8_t *)"0/RouterC", 9},
            .to = s.ra.to,
            .phase = s.ra.phase,
        };
        const codec_ra_out_t strip = {.write = false};
        for (int k = 0; k < 4; k++) {
            /* the best of 5 rounds: on a shared machine, noise only ever adds time */
            r[k] = 1e300;
            for (int round = 0; round < 5; round++) {
                size_t iters = 0;
                double start = now_ns();
                double end;

                do {
                    size_t batch = fixed ? fixed_iters : 1024;
                    for (size_t i = 0; i < batch; i++)
                        sink += one(k, msg, len, &s, &ra, &strip, scratch, iov);
                    iters += batch;
                    end = now_ns();
                } while (!fixed && end - start < budget / 5);
                if ((end - start) / (double)iters < r[k])
                    r[k] = (end - start) / (double)iters;
            }
        }
        printf("%5d %7zu %10.1f %14.1f %10.1f %10.1f\n", ns[t], len, r[0], r[1], r[2], r[3]);
    }
    return 0;
}
