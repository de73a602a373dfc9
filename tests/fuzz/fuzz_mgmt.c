/* tests/fuzz/fuzz_mgmt.c: libFuzzer target for the management protocol's request parser and
 * handlers (mgmt_proto_handle() in router/mgmt/proto.c), the code behind the management
 * socket.
 *
 * Input: what a client writes to the socket; it is cut at each '\n' into request lines, as
 * router/mgmt/sess.c does (lines longer than MGMT_PROTO_LINE_MAX are refused there before the
 * session sees them, so they are skipped here too).  Every line is handled by one session;
 * streamed replies are drained with mgmt_proto_resume() and subscriptions ticked with a
 * clock that moves on, so snapshots, queries and subscription updates all run.
 * Invariants: every line the session writes is one complete JSON object ending in one '\n'
 * with no other newline; a handled request always gets at least one line (except a blank
 * line); a stream always ends.  A violation aborts.
 *
 * The registry holds the router's real stat families (core_stats_families_new) with a few
 * connection, link, address and allocator objects and some values, made once.
 * Threads: libFuzzer's, one at a time. */
#include "core/core.h"
#include "router/mgmt/mgmt.h"

#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static stats_registry_t *reg;
static core_stats_t      fams;
static stats_shard_t    *shard;
static unsigned          lines_out;

static int write_line(void *ctx, const char *bytes, size_t len)
{
    (void)ctx;
    if (len == 0 || bytes[len - 1] != '\n' || memchr(bytes, '\n', len - 1))
        abort(); /* exactly one line */
    cJSON *j = cJSON_ParseWithLength(bytes, len - 1);
    if (!j || !cJSON_IsObject(j))
        abort(); /* valid JSON, an object */
    cJSON_Delete(j);
    lines_out++;
    return 0;
}

static void setup(void)
{
    reg = stats_registry_new();
    if (core_stats_families_new(reg, &fams) != 0)
        abort();
    shard = stats_shard_new(reg);
    for (int i = 0; i < 4; i++) {
        char id[8], addr[16];
        snprintf(id, sizeof(id), "%d", i + 1);
        snprintf(addr, sizeof(addr), "M0queue.%d", i);
        stats_obj_t c, l, a;
        const char *cl[] = {id, "127.0.0.1:1234", "client\"\\\x01", "in", "anonymous",
                            "ANONYMOUS", i % 2 ? "TLSv1.3 TLS_AES_128_GCM_SHA256 128" : "",
                            i % 2 ? "route-container" : "normal"}; /* 8 labels */
        const char *ll[] = {id, id, i % 2 ? "in" : "out", addr, "link-name", "endpoint",
                            "4"}; /* 7 labels */
        const char *al[] = {addr, "balanced"};
        if (stats_object_new(reg, fams.connection, cl, &c) != 0 ||
            stats_object_new(reg, fams.link, ll, &l) != 0 ||
            stats_object_new(reg, fams.address, al, &a) != 0)
            abort();
        stats_counter_add(shard, stats_obj_stat(c, CORE_CONN_DELIVERIES_IN), 10u * (unsigned)i);
        stats_counter_add(shard, stats_obj_stat(l, CORE_LINK_DELIVERIES), UINT64_MAX - 1);
        stats_gauge_set(shard, stats_obj_stat(l, CORE_LINK_CREDIT), -5);
    }
    const char *pool[] = {"rtr_in_t"};
    stats_obj_t p;
    if (stats_object_new(reg, fams.allocator, pool, &p) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint64_t now = 1000;
    if (!reg)
        setup();
    mgmt_info_t info = {"junction", "0.0.0", "Fuzz.A", "standalone"};
    mgmt_proto_t *m = mgmt_proto_new(reg, &info);
    mgmt_proto_hello(m, write_line, NULL);

    const char *p = (const char *)data, *end = p + size;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
        if (len <= MGMT_PROTO_LINE_MAX) {
            /* the socket hands over a copy that ends where the line ends */
            char *line = malloc(len ? len : 1);
            if (!line)
                abort();
            memcpy(line, p, len);
            unsigned before = lines_out;
            size_t t = len, b = 0;
            while (t && line[t - 1] == '\r')
                t--;
            while (b < t && (line[b] == ' ' || line[b] == '\t'))
                b++;
            bool blank = b == t; /* as mgmt_proto_handle() sees it */
            mgmt_proto_handle(m, line, len, write_line, NULL);
            if (!blank && lines_out == before)
                abort(); /* every request gets an answer */
            for (int i = 0; mgmt_proto_is_streaming(m); i++) {
                if (i > 100000)
                    abort(); /* a stream must end */
                mgmt_proto_resume(m, write_line, NULL);
            }
            free(line);
        }
        now += 750;
        mgmt_proto_tick(m, now, write_line, NULL);
        p += len + (nl ? 1 : 0);
    }
    now += 3600 * 1000;
    mgmt_proto_tick(m, now, write_line, NULL);
    mgmt_proto_free(m);
    return 0;
}
