/* tests/unit/mgmt/amqp_test.c: the AMQP management node's request -> reply logic
 * (router/mgmt/node.c, ops.c, amqp.c) without a router: requests encoded with Proton,
 * replies decoded and checked; hooks record what the agent asked of the router.  Malformed requests included. */
#include "router/mgmt/mgmt.h"

#include "core/base/log.h"
#include "core/core.h"

#include <errno.h>
#include <proton/codec.h>
#include <proton/message.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

static const char *CFG = "[[\"router\", {\"id\": \"T1\"}],"
                         " [\"listener\", {\"host\": \"127.0.0.1\", \"port\": \"5999\"}],"
                         " [\"address\", {\"prefix\": \"mc\", \"distribution\": \"multicast\"}],"
                         " [\"log\", {\"module\": \"DEFAULT\", \"enable\": \"info+\"}]]";

/* what the hooks saw */
static int n_listener_add, n_listener_del, n_addr_add, n_addr_del, n_close;
static long last_del_id;
static uint64_t last_close;
static char last_prefix[64];
static bool listener_fails;

static long h_listener_add(void *ctx, const cfg_listener_t *lc, char *err, size_t errlen)
{
    (void)ctx;
    n_listener_add++;
    if (listener_fails) {
        snprintf(err, errlen, "Cannot listen on %s:%s: Address in use", lc->host, lc->port);
        return -1;
    }
    return 100 + n_listener_add;
}
static void h_listener_del(void *ctx, long id)
{
    (void)ctx;
    n_listener_del++;
    last_del_id = id;
}
static void h_addr_add(void *ctx, const cfg_address_t *ac)
{
    (void)ctx;
    n_addr_add++;
    snprintf(last_prefix, sizeof(last_prefix), "%s", ac->prefix ? ac->prefix : ac->pattern);
}
static void h_addr_del(void *ctx, const cfg_address_t *ac)
{
    (void)ctx;
    (void)ac;
    n_addr_del++;
}
static void h_close(void *ctx, uint64_t id)
{
    (void)ctx;
    n_close++;
    last_close = id;
}

typedef struct fx {
    cfg_t            *cfg;
    stats_registry_t *reg;
    core_stats_t      st;
    mgmt_node_t       *m;
    pn_message_t     *rep;
} fx_t;

static int setup(void **state)
{
    fx_t *f = calloc(1, sizeof(*f));
    char err[256];
    assert_int_equal(cfg_load_string(CFG, "t", &f->cfg, err, sizeof(err)), 0);
    f->reg = stats_registry_new();
    assert_int_equal(core_stats_families_new(f->reg, &f->st), 0);
    mgmt_info_t info = {.router_id = "T1", .mode = "standalone", .version = "9.9"};
    mgmt_hooks_t hooks = {.listener_add = h_listener_add, .listener_del = h_listener_del,
                              .address_add = h_addr_add, .address_del = h_addr_del,
                              .conn_close = h_close};
    f->m = mgmt_node_new(f->cfg, f->reg, &info, &hooks);
    f->rep = pn_message();
    n_listener_add = n_listener_del = n_addr_add = n_addr_del = n_close = 0;
    listener_fails = false;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx_t *f = *state;
    mgmt_node_free(f->m);
    stats_registry_free(f->reg);
    cfg_free(f->cfg);
    pn_message_free(f->rep);
    free(f);
    return 0;
}

/* Encode a request: props as "key", "value" string pairs (NULL ends), body set by fill. */
static int call(fx_t *f, void (*fill)(pn_data_t *body), const char *k1, ...)
{
    pn_message_t *req = pn_message();
    pn_message_set_reply_to(req, "amqp:/_topo/0/T1/temp.1");
    pn_msgid_t cid = {.type = PN_ULONG, .u.as_ulong = 4242};
    pn_message_set_correlation_id(req, cid);
    pn_data_t *p = pn_message_properties(req);
    pn_data_put_map(p);
    pn_data_enter(p);
    va_list ap;
    va_start(ap, k1);
    for (const char *k = k1; k; k = va_arg(ap, const char *)) {
        const char *v = va_arg(ap, const char *);
        pn_data_put_string(p, pn_bytes(strlen(k), k));
        if (strcmp(k, "offset") == 0 || strcmp(k, "count") == 0 || strcmp(k, "limit") == 0)
            pn_data_put_long(p, atol(v));
        else
            pn_data_put_string(p, pn_bytes(strlen(v), v));
    }
    va_end(ap);
    pn_data_exit(p);
    if (fill)
        fill(pn_message_body(req));
    else
        pn_data_put_map(pn_message_body(req));
    pn_rwbytes_t buf = {0, NULL};
    ssize_t n = pn_message_encode2(req, &buf);
    assert_true(n > 0);
    uint8_t *out;
    size_t out_len;
    char *to;
    const char *why;
    assert_int_equal(mgmt_amqp_handle(f->m, (uint8_t *)buf.start, (size_t)n, &out, &out_len, &to,
                                     &why),
                     0);
    assert_string_equal(to, "amqp:/_topo/0/T1/temp.1");
    pn_message_clear(f->rep);
    assert_int_equal(pn_message_decode(f->rep, (const char *)out, out_len), 0);
    assert_string_equal(pn_message_get_address(f->rep), "amqp:/_topo/0/T1/temp.1");
    pn_msgid_t rc = pn_message_get_correlation_id(f->rep);
    assert_int_equal(rc.type, PN_ULONG);
    assert_int_equal(rc.u.as_ulong, 4242);
    free(out);
    free(to);
    free(buf.start);
    pn_message_free(req);
    /* statusCode */
    pn_data_t *ap2 = pn_message_properties(f->rep);
    pn_data_rewind(ap2);
    pn_data_next(ap2);
    pn_data_enter(ap2);
    int status = -1;
    while (pn_data_next(ap2)) {
        pn_bytes_t k = pn_data_get_string(ap2);
        pn_data_next(ap2);
        if (k.size == 10 && memcmp(k.start, "statusCode", 10) == 0)
            status = pn_data_get_int(ap2);
    }
    return status;
}

/* The reply body's first value (rewound, positioned on it). */
static pn_data_t *body(fx_t *f)
{
    pn_data_t *b = pn_message_body(f->rep);
    pn_data_rewind(b);
    pn_data_next(b);
    return b;
}

/* In the current map, find string key k and position on its value. */
static bool map_find(pn_data_t *d, const char *k)
{
    size_t n = pn_data_get_map(d);
    pn_data_enter(d);
    for (size_t i = 0; i < n; i += 2) {
        pn_data_next(d);
        pn_bytes_t key = pn_data_get_string(d);
        pn_data_next(d);
        if (key.size == strlen(k) && memcmp(key.start, k, key.size) == 0)
            return true;
    }
    return false;
}

static void fill_create_addr(pn_data_t *b)
{
    pn_data_put_map(b);
    pn_data_enter(b);
    pn_data_put_string(b, pn_bytes(6, "prefix"));
    pn_data_put_string(b, pn_bytes(3, "fan"));
    pn_data_put_string(b, pn_bytes(12, "distribution"));
    pn_data_put_string(b, pn_bytes(7, "closest"));
    pn_data_exit(b);
}

static void fill_create_listener(pn_data_t *b)
{
    pn_data_put_map(b);
    pn_data_enter(b);
    pn_data_put_string(b, pn_bytes(4, "host"));
    pn_data_put_string(b, pn_bytes(9, "127.0.0.1"));
    pn_data_put_string(b, pn_bytes(4, "port"));
    pn_data_put_string(b, pn_bytes(4, "6000"));
    pn_data_exit(b);
}

static void fill_query_id(pn_data_t *b)
{
    pn_data_put_map(b);
    pn_data_enter(b);
    pn_data_put_string(b, pn_bytes(14, "attributeNames"));
    pn_data_put_list(b);
    pn_data_enter(b);
    pn_data_put_string(b, pn_bytes(2, "id"));
    pn_data_put_string(b, pn_bytes(4, "mode"));
    pn_data_exit(b);
    pn_data_exit(b);
}

static void fill_query_bad_names(pn_data_t *b)
{
    pn_data_put_map(b);
    pn_data_enter(b);
    pn_data_put_string(b, pn_bytes(14, "attributeNames"));
    pn_data_put_list(b);
    pn_data_enter(b);
    pn_data_put_int(b, 7);
    pn_data_exit(b);
    pn_data_exit(b);
}

static void fill_binary(pn_data_t *b)
{
    pn_data_put_binary(b, pn_bytes(3, "\x01\x02\x03"));
}

static void fill_enable_trace(pn_data_t *b)
{
    pn_data_put_map(b);
    pn_data_enter(b);
    pn_data_put_string(b, pn_bytes(6, "enable"));
    pn_data_put_string(b, pn_bytes(6, "trace+"));
    pn_data_exit(b);
}

static void fill_worker_threads(pn_data_t *b)
{
    pn_data_put_map(b);
    pn_data_enter(b);
    pn_data_put_string(b, pn_bytes(13, "workerThreads"));
    pn_data_put_int(b, 7);
    pn_data_exit(b);
}

static void fill_create_fallback(pn_data_t *b)
{
    pn_data_put_map(b);
    pn_data_enter(b);
    pn_data_put_string(b, pn_bytes(6, "prefix"));
    pn_data_put_string(b, pn_bytes(2, "fb"));
    pn_data_put_string(b, pn_bytes(14, "enableFallback"));
    pn_data_put_bool(b, true);
    pn_data_put_string(b, pn_bytes(8, "waypoint"));
    pn_data_put_bool(b, true);
    pn_data_exit(b);
}

static void fill_admin_deleted(pn_data_t *b)
{
    pn_data_put_map(b);
    pn_data_enter(b);
    pn_data_put_string(b, pn_bytes(11, "adminStatus"));
    pn_data_put_string(b, pn_bytes(7, "deleted"));
    pn_data_exit(b);
}

static void test_not_a_message(void **state)
{
    fx_t *f = *state;
    uint8_t *out = NULL;
    size_t len = 1;
    char *to = NULL;
    const char *why = NULL;
    const uint8_t garbage[] = {0x00, 0x53, 0x74, 0xd1, 0xff, 0xff, 0xff, 0xff, 0x01};
    assert_int_equal(mgmt_amqp_handle(f->m, garbage, sizeof(garbage), &out, &len, &to, &why), -1);
    assert_non_null(why);
    assert_null(out);
    assert_int_equal(mgmt_amqp_handle(f->m, garbage, 0, &out, &len, &to, &why), -1);
    /* a message without reply-to */
    pn_message_t *req = pn_message();
    pn_data_put_map(pn_message_body(req));
    pn_rwbytes_t buf = {0, NULL};
    ssize_t n = pn_message_encode2(req, &buf);
    assert_int_equal(mgmt_amqp_handle(f->m, (uint8_t *)buf.start, (size_t)n, &out, &len, &to, &why),
                     -1);
    assert_string_equal(why, "the request has no reply-to");
    free(buf.start);
    pn_message_free(req);
}

/* A GET-TYPES request whose body section is `body` (raw bytes); returns mgmt_amqp_handle()'s
 * result and sets *why. */
static int call_raw_body(fx_t *f, const uint8_t *bodyb, size_t body_len, const char **why)
{
    pn_message_t *req = pn_message();
    pn_message_set_reply_to(req, "amqp:/_topo/0/T1/temp.1");
    pn_data_t *p = pn_message_properties(req);
    pn_data_put_map(p);
    pn_data_enter(p);
    pn_data_put_string(p, pn_bytes(9, "operation"));
    pn_data_put_string(p, pn_bytes(9, "GET-TYPES"));
    pn_data_exit(p);
    pn_rwbytes_t buf = {0, NULL};
    ssize_t n = pn_message_encode2(req, &buf); /* no body section: the body is empty */
    assert_true(n > 0);
    uint8_t *msg = malloc((size_t)n + body_len);
    memcpy(msg, buf.start, (size_t)n);
    memcpy(msg + n, bodyb, body_len);
    uint8_t *out = NULL;
    size_t out_len = 0;
    char *to = NULL;
    *why = NULL;
    int rc = mgmt_amqp_handle(f->m, msg, (size_t)n + body_len, &out, &out_len, &to, why);
    free(out);
    free(to);
    free(msg);
    free(buf.start);
    pn_message_free(req);
    return rc;
}

/* Proton builds one node per value: a request may hold at most one value per byte, as a
 * performative may (codec/frame.h), and is refused before Proton decodes it otherwise. */
static void test_values_bounded_by_bytes(void **state)
{
    fx_t *f = *state;
    const char *why;
    /* amqp-value [null, null]: paid for, answered */
    assert_int_equal(call_raw_body(f, (const uint8_t[]){0x00, 0x53, 0x77, 0xe0, 0x02, 0x02, 0x40},
                                   7, &why),
                     0);
    /* an array8 of 255 nulls, an array32 of 2^32-1 of them, a described list0 of 2^32-1 */
    assert_int_equal(call_raw_body(f, (const uint8_t[]){0x00, 0x53, 0x77, 0xe0, 0x02, 0xff, 0x40},
                                   7, &why),
                     -1);
    assert_string_equal(why, "the request is not a well-formed AMQP message (malformed, nested "
                             "more than 32 deep, or more values than bytes)");
    assert_int_equal(call_raw_body(f,
                                   (const uint8_t[]){0x00, 0x53, 0x77, 0xf0, 0, 0, 0, 5, 0xff,
                                                     0xff, 0xff, 0xff, 0x40},
                                   13, &why),
                     -1);
    assert_non_null(strstr(why, "more values than bytes"));
    assert_int_equal(call_raw_body(f,
                                   (const uint8_t[]){0x00, 0x53, 0x77, 0xf0, 0, 0, 0, 8, 0xff,
                                                     0xff, 0xff, 0xff, 0x00, 0x53, 0x01, 0x45},
                                   16, &why),
                     -1);
    assert_non_null(strstr(why, "more values than bytes"));
    /* a body of lists nested 40 deep */
    uint8_t deep[3 + 3 * 40 + 1] = {0x00, 0x53, 0x77};
    for (size_t i = 0; i < 40; i++) {
        deep[3 + 3 * i] = 0xc0;
        deep[4 + 3 * i] = (uint8_t)(1 + 3 * (40 - 1 - i) + 1); /* count, deeper lists, list0 */
        deep[5 + 3 * i] = 1;
    }
    deep[3 + 3 * 40] = 0x45;
    assert_int_equal(call_raw_body(f, deep, sizeof(deep), &why), -1);
    assert_non_null(strstr(why, "nested"));
}

static void test_bad_requests(void **state)
{
    fx_t *f = *state;
    assert_int_equal(call(f, NULL, "type", "org.amqp.management", NULL), 400); /* no operation */
    assert_int_equal(call(f, NULL, "operation", "FLY", NULL), 501);
    assert_int_equal(call(f, NULL, "operation", "QUERY", "entityType", "nosuch", NULL), 404);
    assert_int_equal(call(f, fill_query_bad_names, "operation", "QUERY", "entityType", "router",
                          NULL),
                     400);
    assert_int_equal(call(f, fill_binary, "operation", "QUERY", "entityType", "router", NULL),
                     400);
    assert_int_equal(call(f, NULL, "operation", "QUERY", "entityType", "router", "offset",
                          "-3", NULL),
                     400);
    assert_int_equal(call(f, NULL, "operation", "CREATE", "type", "router", NULL), 403);
    assert_int_equal(call(f, NULL, "operation", "DELETE", "type", "connection", "identity", "1",
                          NULL),
                     403);
    assert_int_equal(call(f, NULL, "operation", "UPDATE", "type", "listener", "name", "x", NULL),
                     501);
    /* an error reply has an empty map body */
    pn_data_t *b = body(f);
    assert_int_equal(pn_data_type(b), PN_MAP);
    assert_int_equal(pn_data_get_map(b), 0);
}

static void test_query_router(void **state)
{
    fx_t *f = *state;
    assert_int_equal(call(f, fill_query_id, "operation", "QUERY", "entityType",
                          "org.apache.qpid.dispatch.router", "name", "self", "type",
                          "org.amqp.management", "offset", "0", "count", "500", NULL),
                     200);
    pn_data_t *b = body(f);
    assert_true(map_find(b, "results"));
    assert_int_equal(pn_data_get_list(b), 1);
    pn_data_enter(b);
    pn_data_next(b);
    assert_int_equal(pn_data_get_list(b), 2);
    pn_data_enter(b);
    pn_data_next(b);
    assert_memory_equal(pn_data_get_string(b).start, "T1", 2);
    pn_data_next(b);
    assert_memory_equal(pn_data_get_string(b).start, "standalone", 10);
}

static void test_query_paging(void **state)
{
    fx_t *f = *state;
    /* 17 log modules: pages of 5 */
    int total = 0;
    for (int off = 0;; off += 5) {
        char o[16];
        snprintf(o, sizeof(o), "%d", off);
        assert_int_equal(call(f, NULL, "operation", "QUERY", "entityType", "log", "offset", o,
                              "count", "5", NULL),
                         200);
        pn_data_t *b = body(f);
        assert_true(map_find(b, "results"));
        int n = (int)pn_data_get_list(b);
        total += n;
        if (n < 5)
            break;
    }
    assert_int_equal(total, BASE_LOG_N_MODULES);
}

static void fill_query_delivery_count(pn_data_t *b)
{
    pn_data_put_map(b);
    pn_data_enter(b);
    pn_data_put_string(b, pn_bytes(14, "attributeNames"));
    pn_data_put_list(b);
    pn_data_enter(b);
    pn_data_put_string(b, pn_bytes(8, "identity"));
    pn_data_put_string(b, pn_bytes(13, "deliveryCount"));
    pn_data_exit(b);
    pn_data_exit(b);
}

/* A counter reaches the reply exactly as the registry holds it: rows are built from the
 * registry straight into AMQP, never through a double (2^60 + 1 has no double). */
static void test_query_counter_exact(void **state)
{
    fx_t          *f = *state;
    stats_shard_t *shard = stats_shard_new(f->reg);
    stats_obj_t    l;
    const char    *labels[] = {"7", "3", "in", "big", "big-link", "endpoint", "4"};
    assert_int_equal(stats_object_new(f->reg, f->st.link, labels, &l), 0);
    uint64_t big = (UINT64_C(1) << 60) + 1;
    stats_counter_add(shard, stats_obj_stat(l, CORE_LINK_DELIVERIES), big);
    assert_int_equal(call(f, fill_query_delivery_count, "operation", "QUERY", "entityType",
                          "org.apache.qpid.dispatch.router.link", "type",
                          "org.amqp.management", NULL),
                     200);
    pn_data_t *b = body(f);
    assert_true(map_find(b, "results"));
    assert_int_equal(pn_data_get_list(b), 1);
    pn_data_enter(b);
    pn_data_next(b);
    assert_int_equal(pn_data_get_list(b), 2);
    pn_data_enter(b);
    pn_data_next(b);
    assert_int_equal(pn_data_type(b), PN_STRING);
    assert_memory_equal(pn_data_get_string(b).start, "7", 1);
    pn_data_next(b);
    assert_int_equal(pn_data_type(b), PN_LONG);
    assert_int_equal((uint64_t)pn_data_get_long(b), big);
    stats_shard_free(f->reg, shard);
}

static void test_address_create_delete(void **state)
{
    fx_t *f = *state;
    assert_int_equal(call(f, fill_create_addr, "operation", "CREATE", "type", "address", "name",
                          "a1", NULL),
                     201);
    assert_int_equal(n_addr_add, 1);
    assert_string_equal(last_prefix, "fan");
    pn_data_t *b = body(f);
    assert_true(map_find(b, "distribution"));
    assert_memory_equal(pn_data_get_string(b).start, "closest", 7);
    /* same prefix again: refused, no hook */
    assert_int_equal(call(f, fill_create_addr, "operation", "CREATE", "type", "address", NULL),
                     400);
    assert_int_equal(n_addr_add, 1);
    assert_int_equal(call(f, NULL, "operation", "READ", "type", "address", "name", "a1", NULL),
                     200);
    assert_int_equal(call(f, NULL, "operation", "DELETE", "type",
                          "org.apache.qpid.dispatch.router.config.address", "name", "a1", NULL),
                     204);
    assert_int_equal(n_addr_del, 1);
    assert_int_equal(call(f, NULL, "operation", "DELETE", "type", "address", "name", "a1", NULL),
                     404);
    assert_int_equal(n_addr_del, 1);
}

static void test_listener_create_delete(void **state)
{
    fx_t *f = *state;
    listener_fails = true;
    assert_int_equal(call(f, fill_create_listener, "operation", "CREATE", "type", "listener",
                          NULL),
                     400);
    listener_fails = false;
    assert_int_equal(call(f, fill_create_listener, "operation", "CREATE", "type", "listener",
                          "name", "L2", NULL),
                     201);
    assert_int_equal(n_listener_add, 2);
    assert_int_equal(call(f, NULL, "operation", "DELETE", "type", "listener", "name", "L2",
                          NULL),
                     204);
    assert_int_equal(last_del_id, 102);
    /* the configured one: id 1 */
    assert_int_equal(call(f, NULL, "operation", "DELETE", "type", "listener", "identity",
                          "listener/127.0.0.1:5999", NULL),
                     204);
    assert_int_equal(last_del_id, 1);
}

/* ---- sslProfile through a fake of the router's profile set (router/tls.c is the real one) ---- */

static cfg_ssl_profile_t fake_prof;   /* the one profile, "p" (name NULL: deleted) */
static int               fake_users;  /* listeners holding it */
static int               fake_rc;     /* what the next add/update returns */
static int               fake_updates; /* updates that took */

static int fake_add(void *ctx, const cfg_ssl_profile_t *p, char *err, size_t errlen)
{
    (void)ctx;
    if (fake_rc)
        return snprintf(err, errlen, "sslProfile '%s': certFile %s: broken", p->name,
                        p->cert_file ? p->cert_file : "-"), fake_rc;
    if (fake_prof.name)
        return snprintf(err, errlen, "exists"), -EEXIST;
    cfg_ssl_profile_copy(&fake_prof, p);
    return 0;
}

static int fake_update(void *ctx, const cfg_ssl_profile_t *p, char *err, size_t errlen)
{
    (void)ctx;
    if (!fake_prof.name || strcmp(fake_prof.name, p->name) != 0)
        return snprintf(err, errlen, "none"), -ENOENT;
    if (fake_rc)
        return snprintf(err, errlen, "sslProfile '%s': certFile %s: broken", p->name,
                        p->cert_file ? p->cert_file : "-"), fake_rc;
    cfg_ssl_profile_fini(&fake_prof);
    cfg_ssl_profile_copy(&fake_prof, p);
    fake_updates++;
    return 0;
}

static int fake_del(void *ctx, const char *name, char *err, size_t errlen)
{
    (void)ctx;
    if (!fake_prof.name || strcmp(fake_prof.name, name) != 0)
        return snprintf(err, errlen, "none"), -ENOENT;
    if (fake_users)
        return snprintf(err, errlen, "sslProfile '%s' is in use", name), -EBUSY;
    cfg_ssl_profile_fini(&fake_prof);
    memset(&fake_prof, 0, sizeof(fake_prof));
    return 0;
}

static int fake_hold(void *ctx, const char *name)
{
    (void)ctx;
    if (!fake_prof.name || strcmp(fake_prof.name, name) != 0)
        return -ENOENT;
    fake_users++;
    return 0;
}

static void fake_release(void *ctx, const char *name)
{
    (void)ctx;
    (void)name;
    fake_users--;
}

static cfg_ssl_profile_t *fake_copy(void *ctx, size_t *n)
{
    (void)ctx;
    cfg_ssl_profile_t *v = calloc(1, sizeof(*v));
    *n = fake_prof.name ? 1 : 0;
    if (*n)
        cfg_ssl_profile_copy(v, &fake_prof);
    return v;
}

static void fake_copy_free(cfg_ssl_profile_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cfg_ssl_profile_fini(&v[i]);
    free(v);
}

static const mgmt_tls_t fake_tls = {.add = fake_add,
                                    .update = fake_update,
                                    .del = fake_del,
                                    .hold = fake_hold,
                                    .release = fake_release,
                                    .copy = fake_copy,
                                    .copy_free = fake_copy_free};

static int setup_tls(void **state)
{
    setup(state);
    fx_t *f = *state;
    mgmt_node_free(f->m);
    mgmt_info_t  info = {.router_id = "T1", .mode = "standalone", .version = "9.9"};
    mgmt_hooks_t hooks = {.listener_add = h_listener_add, .listener_del = h_listener_del,
                          .tls = &fake_tls};
    f->m = mgmt_node_new(f->cfg, f->reg, &info, &hooks);
    cfg_ssl_profile_t p = {.name = "p", .cert_file = "/c.pem", .private_key_file = "/k.pem",
                           .ca_cert_file = "/ca.pem", .password = "pass:hidden"};
    cfg_ssl_profile_copy(&fake_prof, &p);
    fake_users = fake_rc = fake_updates = 0;
    return 0;
}

static int teardown_tls(void **state)
{
    cfg_ssl_profile_fini(&fake_prof);
    memset(&fake_prof, 0, sizeof(fake_prof));
    return teardown(state);
}

static void put_kv(pn_data_t *b, const char *k, const char *v)
{
    pn_data_put_string(b, pn_bytes(strlen(k), k));
    if (v)
        pn_data_put_string(b, pn_bytes(strlen(v), v));
    else
        pn_data_put_null(b);
}

/* certFile replaced, caCertFile removed (null), the deprecated keyFile for privateKeyFile */
static void fill_update_ssl(pn_data_t *b)
{
    pn_data_put_map(b);
    pn_data_enter(b);
    put_kv(b, "certFile", "/new.pem");
    put_kv(b, "caCertFile", NULL);
    put_kv(b, "keyFile", "/newkey.pem");
    pn_data_exit(b);
}

static void fill_rename_ssl(pn_data_t *b)
{
    pn_data_put_map(b);
    pn_data_enter(b);
    put_kv(b, "name", "other");
    pn_data_exit(b);
}

static void fill_create_ssl(pn_data_t *b)
{
    pn_data_put_map(b);
    pn_data_enter(b);
    put_kv(b, "name", "q");
    put_kv(b, "certFile", "/q.pem");
    put_kv(b, "password", "env:Q_PW");
    pn_data_exit(b);
}

static void fill_listener_ssl(pn_data_t *b)
{
    pn_data_put_map(b);
    pn_data_enter(b);
    put_kv(b, "port", "0");
    put_kv(b, "sslProfile", "p");
    pn_data_exit(b);
}

static void fill_listener_nossl(pn_data_t *b)
{
    pn_data_put_map(b);
    pn_data_enter(b);
    put_kv(b, "port", "0");
    put_kv(b, "sslProfile", "nosuch");
    pn_data_exit(b);
}

/* The reply body's string attribute k, or NULL when it is null. */
static const char *body_str(fx_t *f, const char *k, char *buf, size_t len)
{
    pn_data_t *b = body(f);
    assert_true(map_find(b, k));
    if (pn_data_type(b) == PN_NULL)
        return NULL;
    pn_bytes_t v = pn_data_get_string(b);
    snprintf(buf, len, "%.*s", (int)v.size, v.start);
    return buf;
}

static void test_ssl_profile_update_merges_and_hides_the_password(void **state)
{
    fx_t *f = *state;
    char  buf[128];
    assert_int_equal(call(f, fill_update_ssl, "operation", "UPDATE", "type", "sslProfile",
                          "name", "p", NULL),
                     200);
    assert_int_equal(fake_updates, 1);
    assert_string_equal(fake_prof.cert_file, "/new.pem");
    assert_string_equal(fake_prof.private_key_file, "/newkey.pem");
    assert_null(fake_prof.ca_cert_file);
    assert_string_equal(fake_prof.password, "pass:hidden"); /* kept, never shown */
    assert_string_equal(body_str(f, "certFile", buf, sizeof(buf)), "/new.pem");
    assert_null(body_str(f, "password", buf, sizeof(buf)));
    assert_string_equal(body_str(f, "identity", buf, sizeof(buf)), "sslProfile/p");

    /* an UPDATE with no attributes reads the files again: the router is asked once more */
    assert_int_equal(call(f, NULL, "operation", "UPDATE", "type", "sslProfile", "identity",
                          "sslProfile/p", NULL),
                     200);
    assert_int_equal(fake_updates, 2);
    /* refusals: a new name, no such profile, the router's checks failing (nothing changes) */
    assert_int_equal(call(f, fill_rename_ssl, "operation", "UPDATE", "type", "sslProfile",
                          "name", "p", NULL),
                     400);
    assert_int_equal(call(f, NULL, "operation", "UPDATE", "type", "sslProfile", "name", "zz",
                          NULL),
                     404);
    fake_rc = -EINVAL;
    assert_int_equal(call(f, fill_update_ssl, "operation", "UPDATE", "type", "sslProfile",
                          "name", "p", NULL),
                     400);
    assert_int_equal(fake_updates, 2);
    fake_rc = 0;

    /* READ and QUERY: env: is shown, a password itself never */
    assert_int_equal(call(f, fill_create_ssl, "operation", "CREATE", "type", "sslProfile", NULL),
                     400); /* "p" is the fake's only slot: exists */
    assert_int_equal(call(f, NULL, "operation", "READ", "type", "sslProfile", "name", "p", NULL),
                     200);
    assert_null(body_str(f, "password", buf, sizeof(buf)));
}

static void test_ssl_profile_listeners_hold_it(void **state)
{
    fx_t *f = *state;
    assert_int_equal(call(f, fill_listener_nossl, "operation", "CREATE", "type", "listener",
                          NULL),
                     400);
    assert_int_equal(fake_users, 0);
    assert_int_equal(call(f, fill_listener_ssl, "operation", "CREATE", "type", "listener",
                          "name", "LS", NULL),
                     201);
    assert_int_equal(fake_users, 1);
    assert_int_equal(call(f, NULL, "operation", "DELETE", "type", "sslProfile", "name", "p",
                          NULL),
                     400);
    assert_non_null(fake_prof.name);
    assert_int_equal(call(f, NULL, "operation", "DELETE", "type", "listener", "name", "LS",
                          NULL),
                     204);
    assert_int_equal(fake_users, 0);
    assert_int_equal(call(f, NULL, "operation", "DELETE", "type", "sslProfile", "name", "p",
                          NULL),
                     204);
    assert_null(fake_prof.name);
    assert_int_equal(call(f, NULL, "operation", "DELETE", "type", "sslProfile", "name", "p",
                          NULL),
                     404);
    /* a profile made at run time */
    char buf[64];
    assert_int_equal(call(f, fill_create_ssl, "operation", "CREATE", "type", "sslProfile", NULL),
                     201);
    assert_string_equal(fake_prof.password, "env:Q_PW");
    assert_string_equal(body_str(f, "password", buf, sizeof(buf)), "env:Q_PW");
    fake_rc = -EINVAL; /* and one the router's checks refuse */
    cfg_ssl_profile_fini(&fake_prof);
    memset(&fake_prof, 0, sizeof(fake_prof));
    assert_int_equal(call(f, fill_create_ssl, "operation", "CREATE", "type", "sslProfile", NULL),
                     400);
    assert_null(fake_prof.name);
}

static void test_log_update_and_get_log(void **state)
{
    fx_t *f = *state;
    assert_int_equal(call(f, fill_enable_trace, "operation", "UPDATE", "type", "log", "name",
                          "log/MESSAGE", NULL),
                     200);
    assert_int_equal(base_log_module_configured(BASE_LOG_MOD_MESSAGE), 0x7f);
    base_log(BASE_LOG_MOD_MESSAGE, BASE_LOG_TRACE, "unit test line %d", 1);
    base_log(BASE_LOG_MOD_MESSAGE, BASE_LOG_TRACE, "unit test line %d", 2);
    assert_int_equal(call(f, NULL, "operation", "GET-LOG", "limit", "1", NULL), 200);
    pn_data_t *b = body(f);
    assert_int_equal(pn_data_get_list(b), 1);
    pn_data_enter(b);
    pn_data_next(b);
    assert_int_equal(pn_data_get_list(b), 6);
    pn_data_enter(b);
    pn_data_next(b);
    assert_memory_equal(pn_data_get_string(b).start, "MESSAGE", 7);
    pn_data_next(b);
    assert_memory_equal(pn_data_get_string(b).start, "trace", 5);
    pn_data_next(b);
    assert_memory_equal(pn_data_get_string(b).start, "unit test line 2", 16);
    assert_true(base_log_count(BASE_LOG_MOD_MESSAGE, BASE_LOG_TRACE) >= 2);
    assert_int_equal(call(f, NULL, "operation", "UPDATE", "type", "log", "name", "log/NOPE",
                          NULL),
                     404);
}

static void test_node_operations(void **state)
{
    fx_t *f = *state;
    assert_int_equal(call(f, NULL, "operation", "GET-TYPES", "name", "self", "type",
                          "org.amqp.management", NULL),
                     200);
    pn_data_t *b = body(f);
    assert_true(map_find(b, "org.apache.qpid.dispatch.router.link"));
    assert_int_equal(call(f, NULL, "operation", "GET-SCHEMA", NULL), 200);
    b = body(f);
    assert_true(map_find(b, "prefix"));
    assert_memory_equal(pn_data_get_string(b).start, "org.apache.qpid.dispatch", 24);
    assert_int_equal(call(f, NULL, "operation", "GET-JSON-SCHEMA", NULL), 200);
    assert_int_equal(pn_data_type(body(f)), PN_STRING);
    assert_int_equal(call(f, NULL, "operation", "GET-MGMT-NODES", NULL), 200);
    assert_int_equal(pn_data_get_list(body(f)), 0);
}

/* Interior mode: the network's routers (this one first, mask bit 0), as core_node_rows()
 * gives them. */
static core_node_row_t *fake_node_rows(void *ctx, size_t *n)
{
    (void)ctx;
    static const char *const ids[] = {"T1", "Q", "R2"};
    core_node_row_t         *rows = calloc(3, sizeof(*rows));
    for (uint32_t i = 0; i < 3; i++) {
        rows[i].id = strdup(ids[i]);
        rows[i].index = i;
    }
    *n = 3;
    return rows;
}

static void fake_node_rows_free(core_node_row_t *rows, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(rows[i].id);
    free(rows);
}

/* GET-MGMT-NODES names the management node of each router of the network, as qdrouterd
 * does (qdstat and qdmanage -r send there). */
static void test_get_mgmt_nodes_interior(void **state)
{
    fx_t *f = *state;
    mgmt_node_free(f->m);
    mgmt_info_t  info = {.router_id = "T1", .mode = "interior", .version = "9.9"};
    mgmt_hooks_t hooks = {.node_rows = fake_node_rows, .node_rows_free = fake_node_rows_free};
    f->m = mgmt_node_new(f->cfg, f->reg, &info, &hooks);
    assert_int_equal(call(f, NULL, "operation", "GET-MGMT-NODES", NULL), 200);
    pn_data_t *b = body(f);
    static const char *const want[] = {"amqp:/_topo/0/T1/$management", "amqp:/_topo/0/Q/$management",
                                        "amqp:/_topo/0/R2/$management"};
    size_t                   n = sizeof(want) / sizeof(want[0]);
    assert_int_equal(pn_data_get_list(b), n);
    pn_data_enter(b);
    for (size_t i = 0; i < n; i++) {
        assert_true(pn_data_next(b));
        assert_int_equal(pn_data_type(b), PN_STRING);
        pn_bytes_t s = pn_data_get_string(b);
        assert_int_equal(s.size, strlen(want[i]));
        assert_memory_equal(s.start, want[i], s.size);
    }
    pn_data_exit(b);
}

static void test_connection_update_unknown(void **state)
{
    fx_t *f = *state;
    assert_int_equal(call(f, fill_admin_deleted, "operation", "UPDATE", "type", "connection",
                          "identity", "77", NULL),
                     404);
    assert_int_equal(n_close, 0);
}

/* Rows come from the configuration the router runs with; what would not be acted on is
 * refused. */
static void test_rows_are_the_live_configuration(void **state)
{
    fx_t *f = *state;
    assert_int_equal(call(f, NULL, "operation", "READ", "type", "listener", "name",
                          "listener/127.0.0.1:5999", NULL),
                     200);
    pn_data_t *b = body(f);
    assert_true(map_find(b, "initialHandshakeTimeoutSeconds"));
    assert_int_equal(pn_data_get_long(b), 10); /* Junction's default, not qdrouterd's 0 */
    b = body(f);
    assert_true(map_find(b, "http"));
    assert_false(pn_data_get_bool(b));

    /* UPDATE of a router attribute: refused, not answered as done */
    assert_int_equal(call(f, fill_worker_threads, "operation", "UPDATE", "type", "router", NULL),
                     400);
    assert_int_equal(call(f, NULL, "operation", "UPDATE", "type", "router", NULL), 200);

    /* a combination qdrouterd refuses too (enableFallback with a waypoint): 400, and
     * nothing reaches the core */
    assert_int_equal(call(f, fill_create_fallback, "operation", "CREATE", "type",
                          "org.apache.qpid.dispatch.router.config.address", NULL),
                     400);
    assert_int_equal(n_addr_add, 0);
}

int main(void)
{
    base_log_finish_config();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_not_a_message, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_values_bounded_by_bytes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_query_router, setup, teardown),
        cmocka_unit_test_setup_teardown(test_query_paging, setup, teardown),
        cmocka_unit_test_setup_teardown(test_query_counter_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_address_create_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_listener_create_delete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ssl_profile_update_merges_and_hides_the_password,
                                        setup_tls, teardown_tls),
        cmocka_unit_test_setup_teardown(test_ssl_profile_listeners_hold_it, setup_tls,
                                        teardown_tls),
        cmocka_unit_test_setup_teardown(test_log_update_and_get_log, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_operations, setup, teardown),
        cmocka_unit_test_setup_teardown(test_get_mgmt_nodes_interior, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_update_unknown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rows_are_the_live_configuration, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
