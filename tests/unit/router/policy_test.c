/* tests/unit/router/policy_test.c: router/policy.c on its own - admission (vhost by hostname,
 * alias, pattern and defaultVhost; group by user, `*` and $default; remote hosts; live limits),
 * the link rules (names with ${user} and `*`, patterns with ${user} as a whole token), updates
 * applying to later opens only, and the counters. */
#include "config/config.h"
#include "router/policy.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// clang-format off: cmocka.h needs the headers above first
#include <cmocka.h>
// clang-format on

static cfg_t *load(const char *json)
{
    cfg_t *cfg = NULL;
    char   err[512];
    if (cfg_load_string(json, "t.json", &cfg, err, sizeof(err)) < 0)
        fail_msg("load: %s", err);
    return cfg;
}

static const char *const CONFIG =
    "[[\"policy\", {\"enableVhostPolicy\": true, \"enableVhostNamePatterns\": true,"
    "  \"defaultVhost\": \"fallback\"}],"
    " [\"vhost\", {\"hostname\": \"photo\", \"aliases\": \"pics\", \"maxConnections\": 3,"
    "  \"maxConnectionsPerUser\": 2, \"maxConnectionsPerHost\": 3, \"allowUnknownUser\": true,"
    "  \"groups\": {"
    "   \"users\": {\"users\": \"u1, u2\", \"remoteHosts\": \"10.0.0.0-10.0.0.255, ::1\","
    "     \"maxSenders\": 1, \"sources\": \"pub, tmp.*, ${user}-q, a${user}b\","
    "     \"targets\": \"*\"},"
    "   \"pat\": {\"users\": \"p1\", \"remoteHosts\": \"*\", \"maxConnectionsPerUser\": 1,"
    "     \"sourcePattern\": \"${user}.#, x.*.${user}\", \"targetPattern\": \"q.#\"},"
    "   \"$default\": {\"remoteHosts\": \"*\", \"sources\": \"pub\"}}}],"
    " [\"vhost\", {\"hostname\": \"*.example.com\", \"groups\": {"
    "   \"all\": {\"users\": \"*\", \"remoteHosts\": \"*\", \"allowAnonymousSender\": true}}}],"
    " [\"vhost\", {\"hostname\": \"fallback\", \"groups\": {"
    "   \"g\": {\"users\": \"f\", \"remoteHosts\": \"127.0.0.1\"}}}]]";

static const char *link_in(rtr_pconn_t *pc, bool sender, const char *addr, uint32_t n)
{
    rtr_plink_t l = {.client_sends = sender, .n_same = n, .address = addr};
    return rtr_pconn_link(pc, 1, &l);
}

static void test_admission(void **state)
{
    (void)state;
    cfg_t        *cfg = load(CONFIG);
    rtr_policy_t *p = rtr_policy_new(cfg);
    assert_true(rtr_policy_enabled(p));

    /* by hostname and by alias: same vhost, counted together */
    rtr_pconn_t *a = rtr_policy_open(p, 1, "photo", "u1", "10.0.0.7");
    rtr_pconn_t *b = rtr_policy_open(p, 2, "pics", "u1", "::1");
    assert_non_null(a);
    assert_non_null(b);
    assert_string_equal(rtr_pconn_vhost(b), "photo");
    /* u1's third: per-user limit 2 */
    assert_null(rtr_policy_open(p, 3, "photo", "u1", "10.0.0.8"));
    /* u2 from a host outside the group's range */
    assert_null(rtr_policy_open(p, 4, "photo", "u2", "10.0.1.1"));
    assert_null(rtr_policy_open(p, 4, "photo", "u2", "::ffff:10.0.1.1"));
    /* the same as an IPv4-mapped address inside it */
    rtr_pconn_t *c = rtr_policy_open(p, 5, "photo", "u2", "::ffff:10.0.0.1");
    assert_non_null(c);
    /* the vhost's maxConnections 3 */
    assert_null(rtr_policy_open(p, 6, "photo", "stranger", "1.2.3.4"));
    rtr_policy_close(p, c);
    /* an unknown user gets $default */
    rtr_pconn_t *d = rtr_policy_open(p, 7, "photo", "stranger", "1.2.3.4");
    assert_non_null(d);
    assert_null(link_in(d, false, "pub", 0));
    assert_string_equal(link_in(d, false, "tmp.x", 0), RTR_POLICY_COND_UNAUTH);
    /* a name pattern, and defaultVhost for the rest */
    rtr_pconn_t *e = rtr_policy_open(p, 8, "a.example.com", "anyone", "1.2.3.4");
    assert_non_null(e);
    assert_string_equal(rtr_pconn_vhost(e), "*.example.com");
    assert_null(rtr_policy_open(p, 9, "nowhere", "anyone", "127.0.0.1"));
    rtr_pconn_t *f = rtr_policy_open(p, 10, "nowhere", "f", "127.0.0.1");
    assert_non_null(f);
    assert_string_equal(rtr_pconn_vhost(f), "fallback");

    rtr_pstats_row_t *rows;
    size_t            n = rtr_policy_stats(p, &rows);
    bool              seen = false;
    for (size_t i = 0; i < n; i++) {
        if (strcmp(rows[i].hostname, "photo") != 0)
            continue;
        seen = true;
        assert_int_equal(rows[i].approved, 4);
        assert_int_equal(rows[i].denied, 4);
        assert_int_equal(rows[i].current, 3);
        assert_non_null(strstr(rows[i].per_user, "\"u1\":2"));
        assert_non_null(strstr(rows[i].per_host, "\"10.0.0.7\":1"));
        /* u1 over its limit, u2 twice from outside its hosts, stranger over maxConnections
         * and one link outside its sources */
        assert_non_null(strstr(rows[i].per_user_denied, "\"u1\":1"));
        assert_non_null(strstr(rows[i].per_user_denied, "\"u2\":2"));
        assert_non_null(strstr(rows[i].per_user_denied, "\"stranger\":2"));
    }
    assert_true(seen);
    rtr_policy_stats_free(rows, n);

    rtr_policy_close(p, a);
    rtr_policy_close(p, b);
    rtr_policy_close(p, d);
    rtr_policy_close(p, e);
    rtr_policy_close(p, f);
    rtr_policy_free(p);
    cfg_free(cfg);
}

static void test_link_rules(void **state)
{
    (void)state;
    cfg_t        *cfg = load(CONFIG);
    rtr_policy_t *p = rtr_policy_new(cfg);
    rtr_pconn_t  *u = rtr_policy_open(p, 1, "photo", "u1", "10.0.0.1");
    assert_non_null(u);
    /* sources: pub, tmp.*, ${user}-q, a${user}b */
    assert_null(link_in(u, false, "pub", 0));
    assert_null(link_in(u, false, "tmp.", 0));
    assert_null(link_in(u, false, "tmp.anything/else", 0));
    assert_null(link_in(u, false, "u1-q", 0));
    assert_null(link_in(u, false, "au1b", 0));
    assert_non_null(link_in(u, false, "u2-q", 0));
    assert_non_null(link_in(u, false, "tmp", 0));
    assert_non_null(link_in(u, false, "pubx", 0));
    assert_non_null(link_in(u, false, "", 0));
    /* targets `*`; maxSenders 1 */
    assert_null(link_in(u, true, "whatever", 0));
    assert_string_equal(link_in(u, true, "whatever", 1), RTR_POLICY_COND_LIMIT);
    /* no dynamic source, no anonymous sender */
    rtr_plink_t dyn = {.client_sends = false, .dynamic = true};
    assert_string_equal(rtr_pconn_link(u, 1, &dyn), RTR_POLICY_COND_UNAUTH);
    assert_string_equal(link_in(u, true, NULL, 0), RTR_POLICY_COND_UNAUTH);
    /* waypoint and fallback capabilities are allowed by default */
    rtr_plink_t wp = {.client_sends = false, .address = "pub", .waypoint = true};
    assert_null(rtr_pconn_link(u, 1, &wp));

    /* patterns: ${user} as a whole first or last token */
    rtr_pconn_t *q = rtr_policy_open(p, 2, "photo", "p1", "1.1.1.1");
    assert_non_null(q);
    assert_null(link_in(q, false, "p1", 0));
    assert_null(link_in(q, false, "p1.a.b", 0));
    assert_null(link_in(q, false, "p1/a", 0));
    assert_null(link_in(q, false, "x.y.p1", 0));
    assert_non_null(link_in(q, false, "p1x.a", 0));
    assert_non_null(link_in(q, false, "x.y.zp1", 0));
    assert_non_null(link_in(q, false, "x.y.z.p1", 0));
    assert_null(link_in(q, true, "q.r.s", 0));
    assert_non_null(link_in(q, true, "r.q", 0));
    /* the anonymous sender's messages against the targets; user-id proxy */
    assert_true(rtr_pconn_message_to(q, 2, "q.x", 3));
    assert_false(rtr_pconn_message_to(q, 2, "z.x", 3));
    assert_true(rtr_pconn_is_user(q, "p1", 2));
    assert_false(rtr_pconn_is_user(q, "p2", 2));
    assert_false(rtr_pconn_user_id_proxy(q));
    rtr_policy_close(p, u);
    rtr_policy_close(p, q);
    rtr_policy_free(p);
    cfg_free(cfg);
}

static void test_changes_apply_to_later_opens(void **state)
{
    (void)state;
    cfg_t        *cfg = load(CONFIG);
    rtr_policy_t *p = rtr_policy_new(cfg);
    rtr_pconn_t  *old = rtr_policy_open(p, 1, "photo", "stranger", "1.2.3.4");
    assert_non_null(old);

    cfg_t *upd =
        load("[[\"vhost\", {\"hostname\": \"photo\", \"allowUnknownUser\": true,"
             " \"groups\": {\"$default\": {\"remoteHosts\": \"*\", \"sources\": \"new\"}}}]]");
    char        err[256];
    cfg_vhost_t v;
    cfg_vhost_copy(&v, &upd->vhosts[0]);
    assert_int_equal(rtr_policy_vhost_set(p, &v, err, sizeof(err)), 0);
    /* the connection keeps the rules it was admitted with; the next one gets the new */
    assert_null(link_in(old, false, "pub", 0));
    rtr_pconn_t *now = rtr_policy_open(p, 2, "photo", "stranger", "1.2.3.4");
    assert_non_null(now);
    assert_non_null(link_in(now, false, "pub", 0));
    assert_null(link_in(now, false, "new", 0));
    /* the alias went with the old rules */
    assert_null(rtr_policy_open(p, 3, "pics", "stranger", "1.2.3.4"));

    /* an alias naming another vhost is refused */
    cfg_t *clash = load("[[\"vhost\", {\"hostname\": \"other\", \"aliases\": \"photo\"}]]");
    cfg_vhost_copy(&v, &clash->vhosts[0]);
    assert_int_equal(rtr_policy_vhost_set(p, &v, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "alias 'photo'"));
    cfg_vhost_fini(&v);

    assert_int_equal(rtr_policy_vhost_del(p, "photo"), 0);
    assert_int_equal(rtr_policy_vhost_del(p, "photo"), -1);
    /* gone: the default vhost has no group for this user */
    assert_null(rtr_policy_open(p, 4, "photo", "stranger", "1.2.3.4"));
    /* the connections still open keep their (freed from the table) rules */
    assert_null(link_in(old, false, "pub", 0));
    rtr_policy_close(p, old);
    rtr_policy_close(p, now);
    rtr_policy_free(p);
    cfg_free(clash);
    cfg_free(upd);
    cfg_free(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admission),
        cmocka_unit_test(test_link_rules),
        cmocka_unit_test(test_changes_apply_to_later_opens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
