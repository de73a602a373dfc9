/* tests/unit/config/config_test.c: config/config.c - qdrouterd's JSON config format, its
 * coercions and defaults, and the exact shape of every error message.
 *
 * Inputs are written with ' for " (q() swaps them) to keep the JSON readable here. */
#include "config/config.h"
#include "core/base/log.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

// clang-format off: cmocka.h needs the headers above first
#include <cmocka.h>
// clang-format on

#ifndef SRCDIR
#error "SRCDIR must name the source tree (set by tests/unit/config/meson.build)"
#endif

static char errbuf[1024];

/* The text with every ' turned into ". Static buffer: one input at a time. */
static const char *q(const char *text)
{
    static char buf[8192];
    size_t      n = strlen(text);
    assert_true(n < sizeof(buf));
    for (size_t i = 0; i <= n; i++)
        buf[i] = text[i] == '\'' ? '"' : text[i];
    return buf;
}

static cfg_t *load_ok(const char *text)
{
    cfg_t *cfg = NULL;
    errbuf[0] = '\0';
    int rc = cfg_load_string(q(text), "t.json", &cfg, errbuf, sizeof(errbuf));
    if (rc != 0)
        print_error("unexpected error: %s\n", errbuf);
    assert_int_equal(rc, 0);
    assert_non_null(cfg);
    assert_string_equal(errbuf, "");
    return cfg;
}

static void load_err(const char *text, const char *want)
{
    cfg_t *cfg = (cfg_t *)(uintptr_t)0x1; /* must stay untouched on error */
    int    rc = cfg_load_string(q(text), "t.json", &cfg, errbuf, sizeof(errbuf));
    assert_int_equal(rc, -1);
    assert_ptr_equal(cfg, (cfg_t *)(uintptr_t)0x1);
    assert_null(strchr(errbuf, '\n')); /* one line */
    assert_string_equal(errbuf, want);
}

/* One listener with the given attributes, and its error for attribute checks. */
static cfg_t *listener_ok(const char *attrs)
{
    char text[4096];
    snprintf(text, sizeof(text), "[['listener', {%s}]]", attrs);
    cfg_t *cfg = load_ok(text);
    assert_int_equal(cfg->n_listeners, 1);
    return cfg;
}

static void listener_err(const char *attrs, const char *want_after_prefix)
{
    char text[4096];
    char want[2048];
    snprintf(text, sizeof(text), "[['listener', {%s}]]", attrs);
    snprintf(want, sizeof(want), "t.json: entity 0 (listener): %s", want_after_prefix);
    load_err(text, want);
}

static void router_err(const char *attrs, const char *want_after_prefix)
{
    char text[4096];
    char want[2048];
    snprintf(text, sizeof(text), "[['router', {%s}]]", attrs);
    snprintf(want, sizeof(want), "t.json: entity 0 (router): %s", want_after_prefix);
    load_err(text, want);
}

static void address_err(const char *attrs, const char *want_after_prefix)
{
    char text[4096];
    char want[2048];
    snprintf(text, sizeof(text), "[['address', {%s}]]", attrs);
    snprintf(want, sizeof(want), "t.json: entity 0 (address): %s", want_after_prefix);
    load_err(text, want);
}

static void log_err(const char *attrs, const char *want_after_prefix)
{
    char text[4096];
    char want[2048];
    snprintf(text, sizeof(text), "[['log', {%s}]]", attrs);
    snprintf(want, sizeof(want), "t.json: entity 0 (log): %s", want_after_prefix);
    load_err(text, want);
}

/* -- defaults -- */

static void test_empty_list_defaults(void **state)
{
    (void)state;
    cfg_t *cfg = load_ok("[]");
    assert_string_equal(cfg->path, "t.json");
    assert_non_null(cfg->router.id);
    /* random id: Junction.<8 hex> */
    assert_int_equal(strlen(cfg->router.id), strlen("Junction.") + 8);
    assert_memory_equal(cfg->router.id, "Junction.", 9);
    for (const char *p = cfg->router.id + 9; *p; p++)
        assert_true(isxdigit((unsigned char)*p));
    assert_string_equal(cfg->router.mode, "standalone");
    assert_int_equal(cfg->router.worker_threads, 0);
    assert_int_equal(cfg->router.default_distribution, CFG_DIST_BALANCED);
    assert_int_equal(cfg->n_listeners, 0);
    assert_int_equal(cfg->n_addresses, 0);
    assert_int_equal(cfg->n_logs, 0);
    cfg_free(cfg);

    cfg = load_ok("[['router', {}]]");
    assert_memory_equal(cfg->router.id, "Junction.", 9);
    assert_string_equal(cfg->router.mode, "standalone");
    cfg_free(cfg);

    cfg_free(NULL);
}

static void test_listener_defaults(void **state)
{
    (void)state;
    cfg_t                *cfg = listener_ok("");
    const cfg_listener_t *l = &cfg->listeners[0];
    assert_null(l->name);
    assert_string_equal(l->host, "");
    assert_string_equal(l->port, "amqp");
    assert_int_equal(l->role, CFG_ROLE_NORMAL);
    assert_false(l->authenticate_peer);
    assert_null(l->sasl_mechanisms);
    assert_int_equal(l->max_frame_size, 16384);
    assert_int_equal(l->max_sessions, 32768);
    assert_int_equal(l->max_session_frames, 0);
    assert_int_equal(l->idle_timeout_seconds, 16);
    assert_int_equal(l->link_capacity, 250);
    assert_int_equal(l->strip_annotations, CFG_STRIP_BOTH);
    assert_int_equal(l->handshake_timeout_seconds, 10);
    assert_int_equal(l->max_senders, 32768);
    assert_int_equal(l->max_receivers, 32768);
    assert_int_equal(l->max_message_size, 0);
    assert_int_equal(l->max_unsettled, 250);
    cfg_free(cfg);
}

static void test_address_defaults(void **state)
{
    (void)state;
    cfg_t *cfg = load_ok("[['address', {'prefix': 'p'}], ['address', {'pattern': 'a.*', "
                         "'waypoint': false, 'ingressPhase': 0, 'egressPhase': 0}]]");
    assert_int_equal(cfg->n_addresses, 2);
    const cfg_address_t *a = &cfg->addresses[0];
    assert_null(a->name);
    assert_string_equal(a->prefix, "p");
    assert_null(a->pattern);
    assert_int_equal(a->distribution, CFG_DIST_BALANCED);
    assert_false(a->waypoint);
    assert_int_equal(a->ingress_phase, 0);
    assert_int_equal(a->egress_phase, 0);
    assert_int_equal(a->priority, -1);
    a = &cfg->addresses[1];
    assert_null(a->prefix);
    assert_string_equal(a->pattern, "a.*");
    assert_false(a->waypoint);
    assert_int_equal(a->ingress_phase, 0);
    assert_int_equal(a->egress_phase, 0);
    cfg_free(cfg);
}

static void test_log_defaults(void **state)
{
    (void)state;
    cfg_t *cfg = load_ok("[['log', {'module': 'ROUTER_CORE'}]]");
    assert_int_equal(cfg->n_logs, 1);
    const cfg_log_t *g = &cfg->logs[0];
    assert_string_equal(g->module, "ROUTER_CORE");
    assert_int_equal(g->module_id, BASE_LOG_MOD_ROUTER_CORE);
    assert_null(g->enable);
    assert_int_equal(g->enable_mask, 0xff);
    assert_true(g->include_timestamp);
    assert_false(g->include_timestamp_set); /* follows DEFAULT's */
    assert_false(g->include_source);
    assert_false(g->include_source_set);
    assert_null(g->output_file);
    cfg_free(cfg);
}

/* -- coercions -- */

static void test_bool_coercion(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        bool        want;
    } ok[] = {
        {"true", true},     {"false", false}, {"'yes'", true},  {"'no'", false}, {"'true'", true},
        {"'false'", false}, {"'on'", true},   {"'off'", false}, {"'YES'", true}, {"'Off'", false},
        {"'TRUE'", true},   {"1", true},      {"0", false},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        char attrs[128];
        snprintf(attrs, sizeof(attrs), "'module': 'DEFAULT', 'includeSource': %s", ok[i].text);
        char text[256];
        snprintf(text, sizeof(text), "[['log', {%s}]]", attrs);
        cfg_t *cfg = load_ok(text);
        assert_int_equal(cfg->logs[0].include_source, ok[i].want);
        cfg_free(cfg);
    }
    static const struct {
        const char *text;
        const char *got;
    } bad[] = {
        {"'maybe'", "\"maybe\""}, {"2", "2"},     {"''", "\"\""},         {"[]", "a list"},
        {"{}", "a map"},          {"0.5", "0.5"}, {"' yes'", "\" yes\""},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char attrs[128];
        char want[256];
        snprintf(attrs, sizeof(attrs), "'module': 'DEFAULT', 'includeSource': %s", bad[i].text);
        snprintf(want, sizeof(want),
                 "attribute 'includeSource': expected a boolean (true/false, yes/no, on/off), "
                 "got %s",
                 bad[i].got);
        log_err(attrs, want);
    }
}

static void test_int_coercion(void **state)
{
    (void)state;
    static const char *const ok[] = {"1024", "'1024'", "' 1024 '", "'+1024'", "1024.0"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        char attrs[64];
        snprintf(attrs, sizeof(attrs), "'maxFrameSize': %s", ok[i]);
        cfg_t *cfg = listener_ok(attrs);
        assert_int_equal(cfg->listeners[0].max_frame_size, 1024);
        cfg_free(cfg);
    }
    listener_err("'maxFrameSize': 'big'",
                 "attribute 'maxFrameSize': expected an integer from 512 to 1048576, got \"big\"");
    listener_err("'maxFrameSize': 1.5",
                 "attribute 'maxFrameSize': expected an integer from 512 to 1048576, got 1.5");
    listener_err("'maxFrameSize': '1.5'",
                 "attribute 'maxFrameSize': expected an integer from 512 to 1048576, got \"1.5\"");
    listener_err(
        "'maxFrameSize': '0x400'",
        "attribute 'maxFrameSize': expected an integer from 512 to 1048576, got \"0x400\"");
    listener_err("'maxFrameSize': ''",
                 "attribute 'maxFrameSize': expected an integer from 512 to 1048576, got \"\"");
    listener_err("'maxFrameSize': true",
                 "attribute 'maxFrameSize': expected an integer from 512 to 1048576, got true");
    listener_err("'maxFrameSize': [1]",
                 "attribute 'maxFrameSize': expected an integer from 512 to 1048576, got a list");
    listener_err("'maxFrameSize': 511",
                 "attribute 'maxFrameSize': expected an integer from 512 to 1048576, got 511");
    listener_err("'maxFrameSize': -1",
                 "attribute 'maxFrameSize': expected an integer from 512 to 1048576, got -1");
    listener_err("'maxFrameSize': 4294967296",
                 "attribute 'maxFrameSize': expected an integer from 512 to 1048576, "
                 "got 4294967296");
    listener_err("'maxFrameSize': '99999999999999999999999'",
                 "attribute 'maxFrameSize': expected an integer from 512 to 1048576, "
                 "got \"99999999999999999999999\"");
    listener_err("'maxFrameSize': 1e300",
                 "attribute 'maxFrameSize': expected an integer from 512 to 1048576, "
                 "got 1.0000000000000001e+300");
    cfg_t *cfg = listener_ok("'maxFrameSize': 512");
    assert_int_equal(cfg->listeners[0].max_frame_size, 512);
    cfg_free(cfg);
    cfg = listener_ok("'maxFrameSize': '1048576'");
    assert_int_equal(cfg->listeners[0].max_frame_size, 1048576);
    cfg_free(cfg);
}

static void test_enum_coercion(void **state)
{
    (void)state;
    static const struct {
        const char        *text;
        cfg_distribution_t want;
    } ok[] = {
        {"'multicast'", CFG_DIST_MULTICAST}, {"'closest'", CFG_DIST_CLOSEST},
        {"'balanced'", CFG_DIST_BALANCED},   {"'unavailable'", CFG_DIST_UNAVAILABLE},
        {"0", CFG_DIST_MULTICAST},           {"'1'", CFG_DIST_MULTICAST}, /* see below */
        {"3", CFG_DIST_UNAVAILABLE},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        char text[256];
        snprintf(text, sizeof(text), "[['address', {'prefix': 'x', 'distribution': %s}]]",
                 ok[i].text);
        if (strcmp(ok[i].text, "'1'") == 0) {
            /* an index must be a number, as in qdrouterd; "1" is a (bad) name */
            address_err("'prefix': 'x', 'distribution': '1'",
                        "attribute 'distribution': expected one of multicast, closest, "
                        "balanced, unavailable, got \"1\"");
            continue;
        }
        cfg_t *cfg = load_ok(text);
        assert_int_equal(cfg->addresses[0].distribution, ok[i].want);
        cfg_free(cfg);
    }
    address_err("'prefix': 'x', 'distribution': 'Closest'",
                "attribute 'distribution': expected one of multicast, closest, balanced, "
                "unavailable, got \"Closest\"");
    address_err("'prefix': 'x', 'distribution': 4",
                "attribute 'distribution': expected one of multicast, closest, balanced, "
                "unavailable, got 4");
    address_err("'prefix': 'x', 'distribution': true",
                "attribute 'distribution': expected one of multicast, closest, balanced, "
                "unavailable, got true");
    router_err("'defaultDistribution': 'flood'",
               "attribute 'defaultDistribution': expected one of multicast, closest, balanced, "
               "unavailable, got \"flood\"");
    cfg_t *cfg = load_ok("[['router', {'defaultDistribution': 'unavailable'}]]");
    assert_int_equal(cfg->router.default_distribution, CFG_DIST_UNAVAILABLE);
    cfg_free(cfg);
}

static void test_string_coercion(void **state)
{
    (void)state;
    cfg_t *cfg = load_ok("[['router', {'id': 42}]]");
    assert_string_equal(cfg->router.id, "42"); /* qdrouterd's str() */
    cfg_free(cfg);
    cfg = listener_ok("'port': 5672, 'host': '::1'");
    assert_string_equal(cfg->listeners[0].port, "5672");
    assert_string_equal(cfg->listeners[0].host, "::1");
    cfg_free(cfg);
    router_err("'id': true", "attribute 'id': expected a string, got true");
    router_err("'id': 1.5", "attribute 'id': expected a string, got 1.5");
    router_err("'id': ['a']", "attribute 'id': expected a string, got a list");
    router_err("'id': {'a': 1}", "attribute 'id': expected a string, got a map");
}

static void test_null_is_absent(void **state)
{
    (void)state;
    cfg_t *cfg = listener_ok("'port': null, 'maxFrameSize': null, 'sslProfile': null");
    assert_string_equal(cfg->listeners[0].port, "amqp");
    assert_int_equal(cfg->listeners[0].max_frame_size, 16384);
    cfg_free(cfg);
    log_err("'module': null", "attribute 'module': required, but not given");
}

/* -- names of keys and types -- */

static void test_key_spellings(void **state)
{
    (void)state;
    static const char *const keys[] = {"workerThreads",  "worker-threads", "worker_threads",
                                       "worker threads", "worker.threads", "worker-THREADS",
                                       "worker--threads"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        char text[128];
        snprintf(text, sizeof(text), "[['router', {'%s': 3}]]", keys[i]);
        cfg_t *cfg = load_ok(text);
        assert_int_equal(cfg->router.worker_threads, 3);
        cfg_free(cfg);
    }
    cfg_t *cfg = listener_ok("'max-frame-size': 600, 'idle_timeout_seconds': '7', "
                             "'link capacity': 9, 'strip.annotations': 'in'");
    assert_int_equal(cfg->listeners[0].max_frame_size, 600);
    assert_int_equal(cfg->listeners[0].idle_timeout_seconds, 7);
    assert_int_equal(cfg->listeners[0].link_capacity, 9);
    assert_int_equal(cfg->listeners[0].strip_annotations, CFG_STRIP_IN);
    cfg_free(cfg);
    /* qdrouterd keeps the first word as written: these are not workerThreads */
    router_err("'WorkerThreads': 3", "attribute 'WorkerThreads': unknown attribute");
    router_err("'WORKER-THREADS': 3", "attribute 'WORKER-THREADS': unknown attribute");
    router_err("'workerthreads': 3", "attribute 'workerthreads': unknown attribute");
}

static void test_type_names(void **state)
{
    (void)state;
    cfg_t *cfg = load_ok("[['org.apache.qpid.dispatch.router', {'id': 'R'}],"
                         " ['org.apache.qpid.dispatch.listener', {}],"
                         " ['address', {'prefix': 'a'}],"
                         " ['router.config.address', {'prefix': 'b'}],"
                         " ['org.apache.qpid.dispatch.router.config.address', {'prefix': 'c'}],"
                         " ['org.apache.qpid.dispatch.address', {'prefix': 'd'}],"
                         " ['log', {'module': 'DEFAULT'}],"
                         " ['org.apache.qpid.dispatch.log', {'module': 'SERVER'}]]");
    assert_string_equal(cfg->router.id, "R");
    assert_int_equal(cfg->n_listeners, 1);
    assert_int_equal(cfg->n_addresses, 4);
    assert_string_equal(cfg->addresses[3].prefix, "d");
    assert_int_equal(cfg->n_logs, 2);
    cfg_free(cfg);

    load_err("[['frobnicator', {}]]", "t.json: entity 0: unknown entity type 'frobnicator'");
    load_err("[['Listener', {}]]", "t.json: entity 0: unknown entity type 'Listener'");
    load_err("[['router.config.listener', {}]]",
             "t.json: entity 0: unknown entity type 'router.config.listener'");
    load_err("[['org.apache.qpid.dispatch.bogus', {}]]",
             "t.json: entity 0: unknown entity type 'org.apache.qpid.dispatch.bogus'");
    load_err("[['', {}]]", "t.json: entity 0: unknown entity type ''");
    load_err("[['a\\nb', {}]]", "t.json: entity 0: unknown entity type 'a\\x0ab'");
}

static void test_unsupported_types(void **state)
{
    (void)state;
    static const struct {
        const char *written;
        const char *canon;
    } types[] = {
        {"exchange", "exchange"},
        {"binding", "binding"},
        {"console", "console"},
        {"httpListener", "httpListener"},
        {"tcpConnector", "tcpConnector"},
    };
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        char text[256];
        char want[256];
        snprintf(text, sizeof(text), "[['listener', {}], ['%s', {}]]", types[i].written);
        snprintf(want, sizeof(want),
                 "t.json: entity 1 (%s): Junction does not support the '%s' entity yet",
                 types[i].canon, types[i].canon);
        load_err(text, want);
    }
    load_err("[['connection', {}]]", "t.json: entity 0 (connection): 'connection' is not a "
                                     "configuration entity (it exists only at run time)");
    load_err("[['org.apache.qpid.dispatch.router.link', {}]]",
             "t.json: entity 0 (router.link): 'router.link' is not a configuration entity (it "
             "exists only at run time)");
    /* qdrouterd 0.x types that 1.0 replaced, and whose successors Junction lacks */
    load_err("[['waypoint', {'address': 'q', 'connector': 'c'}]]",
             "t.json: entity 0 (waypoint): Junction does not support the 'waypoint' entity yet "
             "(a qdrouterd 0.x entity: 1.0 replaced it with 'autoLink')");
    load_err("[['link-route-pattern', {'prefix': 'q'}]]",
             "t.json: entity 0 (linkRoutePattern): Junction does not support the "
             "'linkRoutePattern' entity yet (a qdrouterd 0.x entity: 1.0 replaced it with "
             "'linkRoute')");
}

static void test_name_identity_type(void **state)
{
    (void)state;
    cfg_t *cfg = load_ok("[['router', {'name': 'r', 'identity': 'router/1', 'type': 'router'}],"
                         " ['listener', {'name': 'l1', 'identity': 'x', "
                         "'type': 'org.apache.qpid.dispatch.listener'}],"
                         " ['address', {'name': 'a1', 'prefix': 'p', 'type': "
                         "'router.config.address'}],"
                         " ['log', {'name': 'g', 'module': 'DEFAULT', 'type': 'log'}]]");
    assert_string_equal(cfg->listeners[0].name, "l1");
    assert_string_equal(cfg->addresses[0].name, "a1");
    cfg_free(cfg);
    listener_err("'type': 'router'",
                 "attribute 'type': expected \"listener\" (the entity's own type), got "
                 "\"router\"");
    listener_err("'type': 5",
                 "attribute 'type': expected \"listener\" (the entity's own type), got 5");
    listener_err("'identity': []", "attribute 'identity': expected a string, got a list");
    load_err("[['listener', {'name': 'x'}], ['address', {'name': 'y', 'prefix': 'p'}],"
             " ['address', {'name': 'x', 'prefix': 'q'}]]",
             "t.json: entity 2 (address): attribute 'name': entity 0 has the name \"x\" "
             "already");
}

/* -- comments, JSON and file structure -- */

static void test_comments(void **state)
{
    (void)state;
    cfg_t *cfg = load_ok("# a comment\n"
                         "[\n"
                         "   # indented comment with 'quotes' and [brackets\n"
                         "\t# tab-indented\n"
                         "    ['address', {'pattern': 'a.#'}],\n"
                         "#['listener', {}],\n"
                         "    ['address', {'pattern':\n"
                         "        '#.b'}]\n"
                         "]\n"
                         "# trailing comment without newline");
    assert_int_equal(cfg->n_listeners, 0);
    assert_int_equal(cfg->n_addresses, 2);
    assert_string_equal(cfg->addresses[0].pattern, "a.#");
    assert_string_equal(cfg->addresses[1].pattern, "#.b");
    cfg_free(cfg);
}

static void test_byte_order_mark(void **state)
{
    (void)state;
    cfg_t *cfg = load_ok("\xef\xbb\xbf# saved by an editor that writes a BOM\n[['listener', {}]]");
    assert_int_equal(cfg->n_listeners, 1);
    cfg_free(cfg);
    load_err("\xef\xbb\xbf[}", "t.json: line 1, column 5: invalid JSON near '}'");
}

static void test_comment_after_json_is_error(void **state)
{
    (void)state;
    /* only whole lines are comments, as in qdrouterd: a # after JSON on a line is an error */
    load_err("[\n  ['listener', {}]  # listener\n]",
             "t.json: line 2, column 21: invalid JSON near '# listener'");
}

static void test_json_errors(void **state)
{
    (void)state;
    /* line numbers count the comment lines too */
    load_err("# one\n# two\n[\n  ['listener', {'port': }]\n]",
             "t.json: line 4, column 25: invalid JSON near '}]'");
    load_err("[['listener', {}]", "t.json: line 1, column 18: invalid JSON near the end of the "
                                  "file");
    load_err("[['listener', {}]] extra", "t.json: line 1, column 20: invalid JSON near 'extra'");
    /* zero bytes: qdrouterd refuses the file ("Configuration file was empty") */
    load_err("", "t.json: an empty file: not a configuration (qdrouterd refuses it too)");
}

static void test_structure_errors(void **state)
{
    (void)state;
    load_err("{'router': {}}",
             "t.json: expected a JSON list of [type, {attributes}] pairs, got a map");
    /* a text that does not start with [ or { is the .conf dialect */
    load_err("'router'", "t.json: line 1: '\"router\"' is not a qdrouterd .conf line (`type "
                         "{`, `key: value`, `key: {` or `}`; qdrouterd logs \"Invalid config "
                         "file syntax\" for it)");
    load_err("[['router']]",
             "t.json: entity 0: expected a [type, {attributes}] pair, got a list that is not a "
             "pair");
    load_err("[['router', {}, {}]]",
             "t.json: entity 0: expected a [type, {attributes}] pair, got a list that is not a "
             "pair");
    load_err("[['listener', {}], 5]",
             "t.json: entity 1: expected a [type, {attributes}] pair, got 5");
    load_err("[['listener', {}], {'router': {}}]",
             "t.json: entity 1: expected a [type, {attributes}] pair, got a map");
    load_err("[[5, {}]]", "t.json: entity 0: expected the entity type as a string, got 5");
    load_err("[['router', []]]",
             "t.json: entity 0 (router): expected the attributes as a map, got a list");
    load_err("[['router', 'mode']]",
             "t.json: entity 0 (router): expected the attributes as a map, got \"mode\"");
}

static void test_entity_index_in_messages(void **state)
{
    (void)state;
    load_err("[['router', {}], ['address', {'prefix': 'a'}], ['listener', {'port': 1}],"
             " ['listener', {'maxFrameSize': 'big'}]]",
             "t.json: entity 3 (listener): attribute 'maxFrameSize': expected an integer from "
             "512 to 1048576, got \"big\"");
}

static void test_unknown_and_repeated_attributes(void **state)
{
    (void)state;
    listener_err("'fooBar': 1", "attribute 'fooBar': unknown attribute");
    listener_err("'foo-bar': 1", "attribute 'foo-bar': unknown attribute");
    listener_err("'a\\tb': 1", "attribute 'a\\x09b': unknown attribute");
    listener_err("'verifyHostname': true", "attribute 'verifyHostname': unknown attribute");
    listener_err("'maxFrameSize': 600, 'max-frame-size': 600",
                 "attribute 'maxFrameSize': given twice");
    listener_err("'port': 1, 'port': 2", "attribute 'port': given twice");
    listener_err("'host': 'a', 'addr': 'b'", "attribute 'host': given twice, as 'host' and 'addr'");
    /* a long key is cut in the message */
    char attrs[512];
    char want[512];
    char key[201];
    memset(key, 'k', 200);
    key[200] = '\0';
    snprintf(attrs, sizeof(attrs), "'%s': 1", key);
    snprintf(want, sizeof(want), "attribute '%.48s...': unknown attribute", key);
    listener_err(attrs, want);
}

/* -- router -- */

static void test_router(void **state)
{
    (void)state;
    cfg_t *cfg = load_ok("[['router', {'id': 'Junction.A', 'mode': 'standalone', "
                         "'workerThreads': '8', 'defaultDistribution': 'closest'}]]");
    assert_string_equal(cfg->router.id, "Junction.A");
    assert_string_equal(cfg->router.mode, "standalone");
    assert_int_equal(cfg->router.worker_threads, 8);
    assert_int_equal(cfg->router.default_distribution, CFG_DIST_CLOSEST);
    assert_int_equal(cfg->router.shutdown_grace_seconds, CFG_SHUTDOWN_GRACE_DEFAULT);
    cfg_free(cfg);

    cfg = load_ok("[['router', {'shutdownGraceSeconds': '0'}]]");
    assert_int_equal(cfg->router.shutdown_grace_seconds, 0);
    cfg_free(cfg);
    cfg = load_ok("[['router', {'shutdown-grace-seconds': 3600}]]");
    assert_int_equal(cfg->router.shutdown_grace_seconds, 3600);
    cfg_free(cfg);
    router_err("'shutdownGraceSeconds': 3601",
               "attribute 'shutdownGraceSeconds': expected an integer from 0 to 3600, got 3601");

    cfg = load_ok("[['router', {}]]");
    assert_int_equal(cfg->router.max_stats, CFG_MAX_STATS_DEFAULT);
    cfg_free(cfg);
    cfg = load_ok("[['router', {'maxStats': 1024}]]");
    assert_int_equal(cfg->router.max_stats, 1024);
    cfg_free(cfg);
    router_err("'maxStats': 1023",
               "attribute 'maxStats': expected an integer from 1024 to 16773120, got 1023");
    router_err("'maxStats': 16773121",
               "attribute 'maxStats': expected an integer from 1024 to 16773120, got 16773121");

    cfg = load_ok("[['router', {'routerId': 'Old.Name'}]]"); /* deprecated spelling */
    assert_string_equal(cfg->router.id, "Old.Name");
    cfg_free(cfg);

    cfg = load_ok("[['router', {'id': ''}]]"); /* empty = absent, as in qdrouterd */
    assert_memory_equal(cfg->router.id, "Junction.", 9);
    cfg_free(cfg);

    router_err("'id': 'a b'", "attribute 'id': expected a router id without whitespace, got "
                              "\"a b\"");
    router_err("'id': 'a\\tb'", "attribute 'id': expected a router id without whitespace, got "
                                "\"a\\x09b\"");
    router_err("'id': 'x', 'routerId': 'y'", "attribute 'id': given twice, as 'id' and "
                                             "'routerId'");
    router_err("'mode': 'solo'",
               "attribute 'mode': expected one of standalone, interior, edge, got \"solo\"");
    router_err("'workerThreads': 0",
               "attribute 'workerThreads': expected an integer from 1 to 254, got 0");
    router_err("'workerThreads': 'many'",
               "attribute 'workerThreads': expected an integer from 1 to 254, got \"many\"");
    router_err("'workerThreads': 255",
               "attribute 'workerThreads': expected an integer from 1 to 254, got 255");
    load_err("[['router', {}], ['listener', {}], ['router', {'id': 'B'}]]",
             "t.json: entity 2 (router): a second router entity (entity 0 is the router "
             "already)");
}

static void test_router_ignored(void **state)
{
    (void)state;
    cfg_t *cfg =
        load_ok("[['router', {'area': '0', 'helloIntervalSeconds': 1, 'helloMaxAgeSeconds': '3',"
                " 'raIntervalSeconds': 30, 'raIntervalFluxSeconds': 4, 'remoteLsMaxAgeSeconds': 60,"
                " 'mobileAddrMaxAgeSeconds': 60, 'debugDumpFile': '/tmp/qdrouterd.core',"
                " 'saslConfigDir': '/etc/sasl2', 'saslConfigName': 'qdrouterd',"
                " 'allowResumableLinkRoute': 'yes', 'timestampsInUTC': true,"
                " 'allowUnsettledMulticast': false, 'metadata': 'x'}]]");
    assert_string_equal(cfg->router.sasl_config_dir, "/etc/sasl2");
    assert_string_equal(cfg->router.sasl_config_name, "qdrouterd");
    cfg_free(cfg);
    router_err("'saslConfigName': 'a/b'", "attribute 'saslConfigName': expected a file name "
                                          "without '/' (Cyrus reads <name>.conf), got \"a/b\"");
    /* log lines keep their one timestamp form */
    router_err("'timestampFormat': '%Y'", "attribute 'timestampFormat': Junction does not "
                                          "support timestampFormat (a log timestamp format) yet");
    /* ignored, but still type-checked like qdrouterd's schema does */
    router_err("'helloIntervalSeconds': 'often'",
               "attribute 'helloIntervalSeconds': expected an integer, got \"often\"");
    router_err("'timestampsInUTC': 'sometimes'",
               "attribute 'timestampsInUTC': expected a boolean (true/false, yes/no, on/off), "
               "got \"sometimes\"");
    router_err("'saslConfigDir': false", "attribute 'saslConfigDir': expected a string, got "
                                         "false");
}

/* -- listener -- */

static void test_listener_port(void **state)
{
    (void)state;
    static const char *const ok[] = {"'amqp'", "'amqps'", "'0'", "0", "'65535'", "5672"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        char attrs[64];
        snprintf(attrs, sizeof(attrs), "'port': %s", ok[i]);
        cfg_free(listener_ok(attrs));
    }
    listener_err("'port': 65536", "attribute 'port': expected a port number from 0 to 65535 or a "
                                  "service name, got 65536");
    listener_err("'port': -1", "attribute 'port': expected a port number from 0 to 65535 or a "
                               "service name, got -1");
    listener_err("'port': '12ab'", "attribute 'port': expected a port number from 0 to 65535 or "
                                   "a service name, got \"12ab\"");
    listener_err("'port': 'no-such-service-xyz'",
                 "attribute 'port': expected a port number from 0 to 65535 or a service name, "
                 "got \"no-such-service-xyz\"");
    listener_err("'port': ''", "attribute 'port': expected a port number from 0 to 65535 or a "
                               "service name, got \"\"");
    listener_err("'port': true", "attribute 'port': expected a string, got true");

    assert_int_equal(cfg_port_number("amqp"), 5672);
    assert_int_equal(cfg_port_number("amqps"), 5671);
    assert_int_equal(cfg_port_number("0"), 0);
    assert_int_equal(cfg_port_number("20000"), 20000);
    assert_int_equal(cfg_port_number("99999"), -1);
    assert_int_equal(cfg_port_number(""), -1);
    assert_int_equal(cfg_port_number(NULL), -1);
    assert_int_equal(cfg_port_number("a b"), -1);
}

static void test_listener_values(void **state)
{
    (void)state;
    cfg_t                *cfg = listener_ok("'name': 'main', 'host': '127.0.0.1', 'port': '5672', "
                                                           "'role': 'normal', 'authenticatePeer': 'no', "
                                                           "'saslMechanisms': 'anonymous', 'maxFrameSize': 65536, "
                                                           "'maxSessions': 10, 'maxSessionFrames': 100, "
                                                           "'idleTimeoutSeconds': 0, 'linkCapacity': 1, "
                                                           "'stripAnnotations': 'out'");
    const cfg_listener_t *l = &cfg->listeners[0];
    assert_string_equal(l->name, "main");
    assert_string_equal(l->host, "127.0.0.1");
    assert_string_equal(l->port, "5672");
    assert_string_equal(l->sasl_mechanisms, "ANONYMOUS");
    assert_int_equal(l->max_frame_size, 65536);
    assert_int_equal(l->max_sessions, 10);
    assert_int_equal(l->max_session_frames, 100);
    assert_int_equal(l->idle_timeout_seconds, 0);
    assert_int_equal(l->link_capacity, 1);
    assert_int_equal(l->strip_annotations, CFG_STRIP_OUT);
    cfg_free(cfg);

    cfg = listener_ok("'addr': '0.0.0.0'"); /* deprecated spelling of host */
    assert_string_equal(cfg->listeners[0].host, "0.0.0.0");
    cfg_free(cfg);

    /* qdrouterd's silent fix-ups */
    cfg = listener_ok("'maxSessions': 0, 'linkCapacity': 0");
    assert_int_equal(cfg->listeners[0].max_sessions, 32768);
    assert_int_equal(cfg->listeners[0].link_capacity, 250);
    cfg_free(cfg);
    cfg = listener_ok("'maxSessions': 100000");
    assert_int_equal(cfg->listeners[0].max_sessions, 32768);
    cfg_free(cfg);

    static const struct {
        const char *text;
        cfg_strip_t want;
    } strip[] = {{"'in'", CFG_STRIP_IN}, {"'out'", CFG_STRIP_OUT}, {"'both'", CFG_STRIP_BOTH},
                 {"'no'", CFG_STRIP_NO}, {"0", CFG_STRIP_IN},      {"3", CFG_STRIP_NO}};
    for (size_t i = 0; i < sizeof(strip) / sizeof(strip[0]); i++) {
        char attrs[64];
        snprintf(attrs, sizeof(attrs), "'stripAnnotations': %s", strip[i].text);
        cfg = listener_ok(attrs);
        assert_int_equal(cfg->listeners[0].strip_annotations, strip[i].want);
        cfg_free(cfg);
    }
    listener_err("'stripAnnotations': 'yes'",
                 "attribute 'stripAnnotations': expected one of in, out, both, no, got \"yes\"");
    listener_err("'idleTimeoutSeconds': 4294968",
                 "attribute 'idleTimeoutSeconds': expected an integer from 0 to 4294967, got "
                 "4294968");
    listener_err("'maxSessions': -5", "attribute 'maxSessions': expected an integer >= 0, got -5");
    listener_err("'linkCapacity': 'lots'",
                 "attribute 'linkCapacity': expected an integer from 0 to 100000, got \"lots\"");
    listener_err("'maxSessionFrames': 1.25",
                 "attribute 'maxSessionFrames': expected an integer from 0 to 2147483647, got "
                 "1.25");
}

/* Sizes that set what one connection may make the router hold have maxima: a bigger value is
 * an error naming the file, the entity, the attribute and the range (qdrouterd has none, and
 * Junction used to take a 4 GiB maxFrameSize). */
static void test_listener_size_maxima(void **state)
{
    (void)state;
    load_err("[['router', {}], ['listener', {'port': 1, 'maxFrameSize': 1048577}]]",
             "t.json: entity 1 (listener): attribute 'maxFrameSize': expected an integer from "
             "512 to 1048576, got 1048577");
    load_err("[['listener', {'port': 1, 'max-frame-size': '4294967295'}]]",
             "t.json: entity 0 (listener): attribute 'maxFrameSize': expected an integer "
             "from 512 to 1048576, got \"4294967295\"");
    listener_err("'linkCapacity': 100001",
                 "attribute 'linkCapacity': expected an integer from 0 to 100000, got 100001");
    listener_err("'maxUnsettledPerLink': 4294967295",
                 "attribute 'maxUnsettledPerLink': expected an integer from 0 to 100000, got "
                 "4294967295");
    listener_err("'maxSessionFrames': 2147483648",
                 "attribute 'maxSessionFrames': expected an integer from 0 to 2147483647, got "
                 "2147483648");
    cfg_t *cfg = listener_ok("'maxFrameSize': 1048576, 'linkCapacity': 100000, "
                             "'maxUnsettledPerLink': 100000, 'maxSessionFrames': 2147483647");
    assert_int_equal(cfg->listeners[0].max_frame_size, 1048576);
    assert_int_equal(cfg->listeners[0].link_capacity, 100000);
    assert_int_equal(cfg->listeners[0].max_unsettled, 100000);
    assert_int_equal(cfg->listeners[0].max_session_frames, 2147483647);
    cfg_free(cfg);
    cfg = load_ok("[['router', {'workerThreads': 254}]]");
    assert_int_equal(cfg->router.worker_threads, 254);
    cfg_free(cfg);
}

/* `policy`: global limits, maxMessageSize the default of every listener. */
static void test_policy(void **state)
{
    (void)state;
    cfg_t *cfg = load_ok("[['listener', {}]]");
    assert_int_equal(cfg->policy.max_connections, 65535);
    assert_true(cfg->policy.max_message_size == 0);
    assert_true(cfg->listeners[0].max_message_size == 0);
    assert_int_equal(cfg->router.shutdown_grace_seconds, CFG_SHUTDOWN_GRACE_DEFAULT);
    assert_string_equal(cfg->policy.default_vhost, "$default");
    assert_false(cfg->policy.enable_vhost_name_patterns);
    cfg_free(cfg);

    /* the policy may come after the listeners; a listener's own value wins */
    cfg = load_ok("[['listener', {'port': 1}], ['listener', {'port': 2, 'maxMessageSize': 5}],"
                  " ['policy', {'maxConnections': '3', 'maxMessageSize': 1000, "
                  "'enableVhostPolicy': false, 'defaultVhost': 'vh', "
                  "'enableVhostNamePatterns': true}]]");
    assert_int_equal(cfg->policy.max_connections, 3);
    assert_string_equal(cfg->policy.default_vhost, "vh"); /* kept for management */
    assert_true(cfg->policy.enable_vhost_name_patterns);
    assert_true(cfg->policy.max_message_size == 1000);
    assert_true(cfg->listeners[0].max_message_size == 1000);
    assert_true(cfg->listeners[1].max_message_size == 5);
    cfg_free(cfg);
    cfg = load_ok("[['org.apache.qpid.dispatch.policy', {'maxConnections': 0}]]");
    assert_int_equal(cfg->policy.max_connections, 0);
    cfg_free(cfg);

    cfg = load_ok("[['policy', {'enableVhostPolicy': true, 'policyDir': ''}]]");
    assert_true(cfg->policy.enable_vhost_policy);
    assert_null(cfg->policy.policy_dir); /* "" is none, as in qdrouterd */
    cfg_free(cfg);
    load_err("[['policy', {'policyDir': '/nonexistent/policies'}]]",
             "t.json: policy policyDir '/nonexistent/policies': cannot open: No such file or "
             "directory");
    load_err("[['policy', {'maxConnections': -1}]]",
             "t.json: entity 0 (policy): attribute 'maxConnections': expected an integer from 0 "
             "to 2147483647, got -1");
    load_err("[['policy', {}], ['policy', {}]]",
             "t.json: entity 1 (policy): a second policy entity (entity 0 is the policy "
             "already)");
}

/* `vhost`: qdrouterd 1.19's policy compiler's defaults and checks (config/vhost.c). */
static void test_vhost(void **state)
{
    (void)state;
    cfg_t *cfg = load_ok(
        "[['vhost', {'hostname': 'photo', 'aliases': 'a1, a2', 'maxConnections': '50', "
        "'allowUnknownUser': 'yes', 'groups': {"
        "'$default': {'remoteHosts': '*', 'sources': 'public, tmp-${user}', "
        "'targets': '${user}.*, x${user}y, *'},"
        "'admins': {'users': 'alice, bob', 'remoteHosts': '127.0.0.1, 10.0.0.0-10.0.255.255, ::1',"
        " 'maxSessions': 2, 'maxSenders': '3', 'allowDynamicSource': 'true', "
        "'allowWaypointLinks': false, 'sourcePattern': 'a.#.${user}', 'someFutureOption': 1}}}],"
        " ['vhost', {'id': 'other'}]]");
    assert_int_equal(cfg->n_vhosts, 2);
    const cfg_vhost_t *v = &cfg->vhosts[0];
    assert_string_equal(v->hostname, "photo");
    assert_int_equal(v->n_aliases, 2);
    assert_string_equal(v->aliases[1], "a2");
    assert_int_equal(v->max_connections, 50);
    assert_int_equal(v->max_conn_per_user, 65535);
    assert_true(v->allow_unknown_user);
    assert_true(v->max_message_size == -1);
    const cfg_vhost_group_t *d = cfg_vhost_group_find(v, "$default");
    assert_non_null(d);
    assert_int_equal(d->n_hosts, 1);
    assert_true(d->hosts[0].wildcard);
    assert_int_equal(d->max_senders, 2147483647);
    assert_int_equal(d->max_sessions, 0);
    assert_false(d->allow_dynamic_source);
    assert_true(d->allow_waypoint_links);
    assert_int_equal(d->sources.n, 2);
    assert_int_equal(d->sources.items[1].kind, CFG_VNAME_SUFFIX);
    assert_string_equal(d->sources.items[1].s1, "tmp-");
    assert_int_equal(d->targets.n, 3);
    assert_int_equal(d->targets.items[0].kind, CFG_VNAME_PREFIX);
    assert_string_equal(d->targets.items[0].s2, ".*");
    assert_int_equal(d->targets.items[1].kind, CFG_VNAME_EMBED);
    assert_int_equal(d->targets.items[2].kind, CFG_VNAME_WILDCARD);
    const cfg_vhost_group_t *g = cfg_vhost_group_find(v, "admins");
    assert_int_equal(g->n_users, 2);
    assert_string_equal(g->users[1], "bob");
    assert_int_equal(g->n_hosts, 3);
    assert_int_equal(g->hosts[1].family, AF_INET);
    assert_int_equal(g->hosts[1].hi[2], 255);
    assert_int_equal(g->hosts[2].family, AF_INET6);
    assert_int_equal(g->max_sessions, 2);
    assert_int_equal(g->max_senders, 3);
    assert_true(g->allow_dynamic_source);
    assert_false(g->allow_waypoint_links);
    assert_true(g->source_pattern.given);
    assert_false(g->sources.given);
    assert_string_equal(cfg->vhosts[1].hostname, "other");
    cfg_free(cfg);

    /* a second vhost of the same hostname replaces the first (qdrouterd updates it) */
    cfg = load_ok("[['vhost', {'hostname': 'h', 'maxConnections': 1}], "
                  "['vhost', {'hostname': 'h', 'maxConnections': 2}]]");
    assert_int_equal(cfg->n_vhosts, 1);
    assert_int_equal(cfg->vhosts[0].max_connections, 2);
    cfg_free(cfg);

    /* policyDir: its *.json files' vhosts, in name order; other entities and files ignored */
    char dir[] = "/tmp/junction-vhost-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[512], text[512];
    static const char *const files[][2] = {
        {"b.json", "# a comment line\n[[\"vhost\", {\"hostname\": \"h\", \"maxConnections\": 7}],"
                   " [\"listener\", {\"port\": 99}]]"},
        {"a.json", "[[\"vhost\", {\"hostname\": \"h\", \"maxConnections\": 3}]]"},
        {"c.txt", "not json"},
    };
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i][0]);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs(files[i][1], f);
        fclose(f);
    }
    snprintf(text, sizeof(text), "[['policy', {'enableVhostPolicy': true, 'policyDir': '%s'}]]",
             dir);
    cfg = load_ok(text);
    assert_int_equal(cfg->n_vhosts, 1);
    assert_int_equal(cfg->vhosts[0].max_connections, 7); /* b.json after a.json */
    assert_int_equal(cfg->n_listeners, 0);
    cfg_free(cfg);
    snprintf(path, sizeof(path), "%s/d.json", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("[[\"vhost\", {\"hostname\": \"x\", \"maxConnectionsPerHost\": \"lots\"}]]", f);
    fclose(f);
    char want[768];
    snprintf(want, sizeof(want), "%s/d.json: entity 0 (vhost): attribute "
             "'maxConnectionsPerHost': expected an integer, got \"lots\"", dir);
    load_err(text, want);
    for (size_t i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, files[i][0]);
        unlink(path);
    }
    snprintf(path, sizeof(path), "%s/d.json", dir);
    unlink(path);
    rmdir(dir);

    load_err("[['vhost', {}]]", "t.json: entity 0 (vhost): attribute 'hostname': required");
    load_err("[['vhost', {'hostname': 'h', 'colour': 1}]]",
             "t.json: entity 0 (vhost): attribute 'colour': unknown attribute");
    load_err("[['vhost', {'hostname': 'h', 'maxConnections': 65536}]]",
             "t.json: entity 0 (vhost): attribute 'maxConnections': expected an integer from 0 "
             "to 65535, got 65536");
    load_err("[['vhost', {'hostname': 'h', 'allowUnknownUser': true}]]",
             "t.json: entity 0 (vhost): attribute 'allowUnknownUser': true needs a '$default' "
             "group (the settings of unknown users)");
    load_err("[['vhost', {'hostname': 'h', 'aliases': 'h'}]]",
             "t.json: entity 0 (vhost): attribute 'aliases': 'h' is the vhost's hostname");
    load_err("[['vhost', {'hostname': 'h', 'aliases': 'x'}], ['vhost', {'hostname': 'x'}]]",
             "t.json: entity 1 (vhost): attribute 'hostname': 'x' is an alias of vhost 'h' "
             "already");
    load_err("[['vhost', {'hostname': 'h', 'groups': {'g': {'maxSessions': 'many'}}}]]",
             "t.json: entity 0 (vhost): attribute 'groups': group 'g': option 'maxSessions': "
             "expected an integer, got \"many\"");
    load_err("[['vhost', {'hostname': 'h', 'groups': {'g': {'maxConnectionsPerUser': -1}}}]]",
             "t.json: entity 0 (vhost): attribute 'groups': group 'g': option "
             "'maxConnectionsPerUser': expected an integer from 0 to 65535, got -1");
    load_err("[['vhost', {'hostname': 'h', 'groups': {'g': {'allowUserIdProxy': 'maybe'}}}]]",
             "t.json: entity 0 (vhost): attribute 'groups': group 'g': option "
             "'allowUserIdProxy': expected a boolean (true/false), got \"maybe\"");
    load_err("[['vhost', {'hostname': 'h', 'groups': {'a': {'users': 'u'}, 'b': {'users': 'v, "
             "u'}}}]]",
             "t.json: entity 0 (vhost): attribute 'groups': user 'u' is in two groups, 'a' and "
             "'b'");
    load_err("[['vhost', {'hostname': 'h', 'groups': {'g': {'sources': 'a', 'sourcePattern': "
             "'b'}}}]]",
             "t.json: entity 0 (vhost): attribute 'groups': group 'g': 'sources' and "
             "'sourcePattern' conflict: give one or the other");
    load_err("[['vhost', {'hostname': 'h', 'groups': {'g': {'targets': '${user}-${user}'}}}]]",
             "t.json: entity 0 (vhost): attribute 'groups': group 'g': option 'targets': item "
             "'${user}-${user}' contains more than one ${user}");
    load_err("[['vhost', {'hostname': 'h', 'groups': {'g': {'targetPattern': 'a.${user}.b'}}}]]",
             "t.json: entity 0 (vhost): attribute 'groups': group 'g': option 'targetPattern': "
             "item 'a.${user}.b' may have ${user} only as a prefix or a suffix");
    load_err("[['vhost', {'hostname': 'h', 'groups': {'g': {'remoteHosts': "
             "'10.0.0.9-10.0.0.1'}}}]]",
             "t.json: entity 0 (vhost): attribute 'groups': group 'g': option 'remoteHosts': "
             "'10.0.0.9-10.0.0.1': the lower address must come first");
    load_err("[['vhost', {'hostname': 'h', 'groups': {'g': {'remoteHosts': '10.0.0.1-::1'}}}]]",
             "t.json: entity 0 (vhost): attribute 'groups': group 'g': option 'remoteHosts': "
             "'10.0.0.1-::1': a range may not mix IPv4 and IPv6");
}

/* A vhost's booleans, spelled as qdrouterd 1.19 takes them: its schema's `boolean` for
 * allowUnknownUser (true/false, yes/no, on/off in any case, and numbers), only true/false (also
 * as strings, in any case) for a group's options, which its policy compiler checks. */
static void test_vhost_booleans(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        bool        want;
    } unknown_ok[] = {
        {"true", true},   {"false", false}, {"'True'", true}, {"'yes'", true}, {"'ON'", true},
        {"'off'", false}, {"'No'", false},  {"1", true},      {"0", false},
    };
    static const struct {
        const char *text;
        bool        want;
    } group_ok[] = {
        {"true", true}, {"false", false}, {"'true'", true}, {"'FALSE'", false}, {"'True'", true},
    };
    static const char *const unknown_bad[] = {"'maybe'", "'1'", "2", "'y'", "[]"};
    static const char *const group_bad[] = {"'yes'", "'no'", "'on'", "'off'",
                                            "1",     "0",    "'1'",  "'maybe'"};
    char text[512], want[512];

    for (size_t i = 0; i < sizeof(unknown_ok) / sizeof(unknown_ok[0]); i++) {
        snprintf(text, sizeof(text),
                 "[['vhost', {'hostname': 'h', 'allowUnknownUser': %s, 'groups': {'$default': "
                 "{}}}]]",
                 unknown_ok[i].text);
        cfg_t *cfg = load_ok(text);
        assert_int_equal(cfg->vhosts[0].allow_unknown_user, unknown_ok[i].want);
        cfg_free(cfg);
    }
    for (size_t i = 0; i < sizeof(group_ok) / sizeof(group_ok[0]); i++) {
        snprintf(text, sizeof(text),
                 "[['vhost', {'hostname': 'h', 'groups': {'g': {'allowDynamicSource': %s, "
                 "'allowWaypointLinks': %s}}}]]",
                 group_ok[i].text, group_ok[i].text);
        cfg_t *cfg = load_ok(text);
        assert_int_equal(cfg->vhosts[0].groups[0].allow_dynamic_source, group_ok[i].want);
        assert_int_equal(cfg->vhosts[0].groups[0].allow_waypoint_links, group_ok[i].want);
        cfg_free(cfg);
    }
    for (size_t i = 0; i < sizeof(unknown_bad) / sizeof(unknown_bad[0]); i++) {
        snprintf(text, sizeof(text), "[['vhost', {'hostname': 'h', 'allowUnknownUser': %s}]]",
                 unknown_bad[i]);
        const char *shown = unknown_bad[i][0] == '[' ? "a list" : unknown_bad[i];
        char        quoted[64];
        snprintf(quoted, sizeof(quoted), "%s", shown);
        for (char *q = quoted; *q; q++)
            if (*q == '\'')
                *q = '"';
        snprintf(want, sizeof(want),
                 "t.json: entity 0 (vhost): attribute 'allowUnknownUser': expected a boolean "
                 "(true/false, yes/no, on/off), got %s",
                 quoted);
        load_err(text, want);
    }
    for (size_t i = 0; i < sizeof(group_bad) / sizeof(group_bad[0]); i++) {
        snprintf(text, sizeof(text),
                 "[['vhost', {'hostname': 'h', 'groups': {'g': {'allowFallbackLinks': %s}}}]]",
                 group_bad[i]);
        char quoted[64];
        snprintf(quoted, sizeof(quoted), "%s", group_bad[i]);
        for (char *q = quoted; *q; q++)
            if (*q == '\'')
                *q = '"';
        snprintf(want, sizeof(want),
                 "t.json: entity 0 (vhost): attribute 'groups': group 'g': option "
                 "'allowFallbackLinks': expected a boolean (true/false), got %s",
                 quoted);
        load_err(text, want);
    }
    /* every other entity's booleans are the schema's, read by the same helper */
    cfg_t *cfg = listener_ok("'authenticatePeer': 'Yes', 'requireEncryption': 0");
    assert_true(cfg->listeners[0].authenticate_peer);
    assert_false(cfg->listeners[0].require_encryption);
    cfg_free(cfg);
}

/* What cfg_vhost_parse() says of a bad vhost: -1 for what qdrouterd's schema refuses,
 * CFG_VHOST_EPOLICY for what its policy compiler refuses (management answers 400 and 500), the
 * schema first whatever the order of the attributes. */
static void test_vhost_parse_kinds(void **state)
{
    (void)state;
    static const struct {
        const char *json;
        int         want;
        const char *err;
    } cases[] = {
        {"{\"hostname\": \"h\", \"colour\": 1}", -1, "attribute 'colour': unknown attribute"},
        {"{\"hostname\": \"h\", \"maxConnections\": \"many\"}", -1,
         "attribute 'maxConnections': expected an integer, got \"many\""},
        {"{\"maxConnections\": 1}", -1, "attribute 'hostname': required"},
        {"{\"hostname\": \"h\", \"groups\": \"{bad\"}", -1,
         "attribute 'groups': expected a map (JSON), got \"{bad\""},
        {"{\"hostname\": \"h\", \"allowUnknownUser\": \"maybe\"}", -1,
         "attribute 'allowUnknownUser': expected a boolean (true/false, yes/no, on/off), got "
         "\"maybe\""},
        {"{\"hostname\": \"h\", \"maxConnections\": 70000}", CFG_VHOST_EPOLICY,
         "attribute 'maxConnections': expected an integer from 0 to 65535, got 70000"},
        /* the schema's failure comes first, even after the compiler's */
        {"{\"hostname\": \"h\", \"maxConnections\": 70000, \"colour\": 1}", -1,
         "attribute 'colour': unknown attribute"},
        {"{\"maxConnections\": 70000, \"maxConnectionsPerUser\": -1, \"hostname\": \"h\"}",
         CFG_VHOST_EPOLICY,
         "attribute 'maxConnections': expected an integer from 0 to 65535, got 70000"},
        {"{\"hostname\": \"h\", \"groups\": {\"g\": {\"allowDynamicSource\": \"yes\"}}}",
         CFG_VHOST_EPOLICY,
         "attribute 'groups': group 'g': option 'allowDynamicSource': expected a boolean "
         "(true/false), got \"yes\""},
        {"{\"hostname\": \"h\", \"aliases\": \"h\"}", CFG_VHOST_EPOLICY,
         "attribute 'aliases': 'h' is the vhost's hostname"},
        {"{\"hostname\": \"h\", \"allowUnknownUser\": true}", CFG_VHOST_EPOLICY,
         "attribute 'allowUnknownUser': true needs a '$default' group (the settings of unknown "
         "users)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cJSON      *j = cJSON_Parse(cases[i].json);
        cfg_vhost_t v;
        char        err[256];
        assert_non_null(j);
        assert_int_equal(cfg_vhost_parse(j, &v, err, sizeof(err)), cases[i].want);
        assert_string_equal(err, cases[i].err);
        cJSON_Delete(j);
    }
}

/* The limits: handshake timeout, links per connection, message size, unsettled per link. */
static void test_listener_limits(void **state)
{
    (void)state;
    cfg_t *cfg = listener_ok("'initialHandshakeTimeoutSeconds': '3', 'maxSenders': 2, "
                             "'max-receivers': '7', 'maxMessageSize': 10000000000, "
                             "'maxUnsettledPerLink': 20, 'linkCapacity': 100");
    const cfg_listener_t *l = &cfg->listeners[0];
    assert_int_equal(l->handshake_timeout_seconds, 3);
    assert_int_equal(l->max_senders, 2);
    assert_int_equal(l->max_receivers, 7);
    assert_true(l->max_message_size == 10000000000ull);
    assert_int_equal(l->max_unsettled, 20);
    assert_int_equal(l->link_capacity, 100);
    cfg_free(cfg);

    /* the credit window never exceeds linkCapacity; 0 means linkCapacity */
    cfg = listener_ok("'maxUnsettledPerLink': 500, 'linkCapacity': 100");
    assert_int_equal(cfg->listeners[0].max_unsettled, 100);
    cfg_free(cfg);
    cfg = listener_ok("'maxUnsettledPerLink': 0, 'linkCapacity': 30");
    assert_int_equal(cfg->listeners[0].max_unsettled, 30);
    cfg_free(cfg);
    cfg = listener_ok("'initialHandshakeTimeoutSeconds': 0"); /* none */
    assert_int_equal(cfg->listeners[0].handshake_timeout_seconds, 0);
    cfg_free(cfg);

    listener_err("'maxSenders': 0",
                 "attribute 'maxSenders': expected an integer from 1 to 2147483647, got 0");
    listener_err("'maxReceivers': 'few'",
                 "attribute 'maxReceivers': expected an integer from 1 to 2147483647, got "
                 "\"few\"");
    listener_err("'maxMessageSize': -1",
                 "attribute 'maxMessageSize': expected an integer >= 0, got -1");
    listener_err("'maxUnsettledPerLink': 1.5",
                 "attribute 'maxUnsettledPerLink': expected an integer from 0 to 100000, got 1.5");
    listener_err("'initialHandshakeTimeoutSeconds': 4294968",
                 "attribute 'initialHandshakeTimeoutSeconds': expected an integer from 0 to "
                 "4294967, got 4294968");
}

/* Interior mode loads with the protocol's timers; edge mode with its edge connector, and an
 * interior's edge listener. */
static void test_interior_and_edge_modes(void **state)
{
    (void)state;
    const char *text = "[['router', {'id': 'R', 'mode': 'interior', 'helloMaxAgeSeconds': 5}],"
                       " ['listener', {'port': '0', 'role': 'inter-router', 'cost': 7}],"
                       " ['connector', {'port': '5999', 'role': 'inter-router'}]]";
    cfg_t *cfg = load_ok(text);
    assert_true(cfg->router.interior);
    assert_string_equal(cfg->router.mode, "interior");
    assert_int_equal(cfg->router.hello_interval, 1);
    assert_int_equal(cfg->router.hello_max_age, 5);
    assert_int_equal(cfg->router.ra_interval, 30);
    assert_int_equal(cfg->router.ra_interval_flux, 4);
    assert_int_equal(cfg->router.remote_ls_max_age, 60);
    assert_int_equal(cfg->listeners[0].role, CFG_ROLE_INTER_ROUTER);
    assert_int_equal(cfg->listeners[0].cost, 7);
    assert_int_equal(cfg->connectors[0].conn.role, CFG_ROLE_INTER_ROUTER);
    cfg_free(cfg);
    load_err("[['router', {'mode': 'interior', 'raIntervalSeconds': 0}]]",
             "t.json: entity 0 (router): attribute 'raIntervalSeconds': expected an integer "
             "from 1 to 86400, got 0");
    /* edge mode: the router and its edge connector */
    const char *edge = "[['router', {'id': 'E', 'mode': 'edge'}],"
                       " ['connector', {'port': '5999', 'role': 'edge'}]]";
    cfg = load_ok(edge);
    assert_true(cfg->router.edge);
    assert_false(cfg->router.interior);
    assert_string_equal(cfg->router.mode, "edge");
    assert_int_equal(cfg->connectors[0].conn.role, CFG_ROLE_EDGE);
    cfg_free(cfg);
    /* an interior's edge listener */
    cfg = load_ok("[['router', {'id': 'I', 'mode': 'interior'}],"
                  " ['listener', {'port': '0', 'role': 'edge'}]]");
    assert_int_equal(cfg->listeners[0].role, CFG_ROLE_EDGE);
    cfg_free(cfg);
}

static void test_listener_unsupported(void **state)
{
    (void)state;
    listener_err("'role': 'on-demand'", "attribute 'role': expected one of normal, inter-router, "
                                        "route-container, edge, got \"on-demand\"");
    listener_err("'trustedCertsFile': '/ca.pem'",
                 "attribute 'trustedCertsFile': Junction does not support trustedCertsFile (use "
                 "the sslProfile's caCertFile) yet");
    listener_err("'requireSsl': true",
                 "attribute 'requireSsl': requireSsl: true needs an sslProfile");
    /* a listener's sslProfile must name a profile, before or after it in the file */
    load_err("[['listener', {'sslProfile': 'tls'}]]",
             "t.json: listener '' (port amqp): sslProfile 'tls': no sslProfile entity has that "
             "name");
    cfg_t *tls = load_ok("[['listener', {'name': 'l', 'port': 0, 'sslProfile': 'tls', "
                         "'requireSsl': 'yes'}], ['ssl_profile', {'name': 'tls', "
                         "'certFile': '/c.pem', 'keyFile': '/k.pem', 'certDb': '/ca.pem', "
                         "'passwordFile': '/pw', 'ciphers': 'HIGH', 'protocols': 'TLSv1.3', "
                         "'uidFormat': 'cou', 'displayNameFile': '/m.json'}]]");
    assert_int_equal(tls->n_ssl_profiles, 1);
    const cfg_ssl_profile_t *p = cfg_ssl_profile_find(tls, "tls");
    assert_non_null(p);
    assert_string_equal(p->cert_file, "/c.pem");
    assert_string_equal(p->private_key_file, "/k.pem");
    assert_string_equal(p->ca_cert_file, "/ca.pem");
    assert_string_equal(p->password, "file:/pw");
    assert_string_equal(p->ciphers, "HIGH");
    assert_string_equal(p->protocols, "TLSv1.3");
    assert_string_equal(p->uid_format, "cou");
    assert_string_equal(p->uid_name_mapping_file, "/m.json");
    assert_string_equal(tls->listeners[0].ssl_profile, "tls");
    assert_true(tls->listeners[0].require_ssl);
    assert_true(tls->n_warnings >= 4); /* keyFile, certDb, passwordFile, displayNameFile, type */
    cfg_free(tls);
    load_err("[['sslProfile', {'certFile': '/c.pem'}]]",
             "t.json: entity 0 (sslProfile): an sslProfile needs a 'name' (listeners name it)");
    cfg_t *enc = listener_ok("'requireEncryption': 'on', 'saslMechanisms': 'PLAIN external'");
    assert_true(enc->listeners[0].require_encryption);
    assert_string_equal(enc->listeners[0].sasl_mechanisms, "PLAIN EXTERNAL");
    cfg_free(enc);
    listener_err("'requireEncryption': true, 'http': true",
                 "attribute 'requireEncryption': Junction does not support requireEncryption: "
                 "true on an http listener yet");
    /* EXTERNAL on a TLS listener needs the CAs that check client certificates */
    load_err("[['sslProfile', {'name': 'tls', 'certFile': '/c.pem'}], ['listener', {'port': "
             "'5', 'sslProfile': 'tls', 'saslMechanisms': 'EXTERNAL'}]]",
             "t.json: listener '' (port 5): saslMechanisms EXTERNAL needs client certificates "
             "checked against CAs: sslProfile 'tls' has no caCertFile");
    listener_err("'multiTenant': true",
                 "attribute 'multiTenant': Junction does not support multiTenant: true yet");
    /* authServicePlugin and the listeners naming it */
    cfg_t *ap = load_ok("[['listener', {'port': 1, 'saslPlugin': 'auth'}], "
                        "['authServicePlugin', {'name': 'auth', 'host': '127.0.0.1', "
                        "'port': '5673', 'realm': 'example.com'}]]");
    assert_int_equal(ap->n_auth_plugins, 1);
    assert_string_equal(ap->auth_plugins[0].name, "auth");
    assert_string_equal(ap->auth_plugins[0].host, "127.0.0.1");
    assert_int_equal(ap->auth_plugins[0].port_number, 5673);
    assert_string_equal(ap->auth_plugins[0].realm, "example.com");
    assert_null(ap->auth_plugins[0].ssl_profile);
    assert_ptr_equal(cfg_auth_plugin_find(ap, "auth"), &ap->auth_plugins[0]);
    assert_null(cfg_auth_plugin_find(ap, "other"));
    cfg_free(ap);
    ap = load_ok("[['authServicePlugin', {'name': 'a', 'authService': 'auth.example:amqps'}]]");
    assert_string_equal(ap->auth_plugins[0].host, "auth.example");
    assert_int_equal(ap->auth_plugins[0].port_number, 5671);
    assert_int_equal(ap->n_warnings, 1); /* authService is deprecated */
    cfg_free(ap);
    load_err("[['listener', {'port': 1, 'saslPlugin': 'auth'}]]",
             "t.json: listener '' (port 1): saslPlugin 'auth': no authServicePlugin entity has "
             "that name");
    load_err("[['authServicePlugin', {'name': 'auth', 'port': 5673}]]",
             "t.json: entity 0 (authServicePlugin): authServicePlugin 'auth': attribute 'host': "
             "the authentication service's host is missing (give host and port)");
    load_err("[['authServicePlugin', {'host': 'h'}]]",
             "t.json: entity 0 (authServicePlugin): an authServicePlugin needs a 'name' "
             "(listeners name it in saslPlugin)");
    load_err("[['authServicePlugin', {'name': 'a', 'host': 'h', 'port': '0'}]]",
             "t.json: entity 0 (authServicePlugin): attribute 'port': expected a port number "
             "from 1 to 65535 or a service name, got \"0\"");
    load_err("[['authServicePlugin', {'name': 'a', 'host': 'h', 'sslProfile': 'tls'}]]",
             "t.json: authServicePlugin 'a': sslProfile 'tls': no sslProfile entity has that "
             "name");
    listener_err("'saslMechanisms': 'PLAIN SCRAM/SHA-1'",
                 "attribute 'saslMechanisms': expected SASL mechanism names (letters, digits, "
                 "'-', '_') separated by blanks, got \"PLAIN SCRAM/SHA-1\"");
    listener_err("'saslMechanisms': ' '",
                 "attribute 'saslMechanisms': expected at least one SASL mechanism name, got "
                 "\" \"");
    listener_err("'openProperties': {'x': 1}",
                 "attribute 'openProperties': Junction does not support openProperties (extra "
                 "open properties) yet");
    listener_err("'openProperties': 'x'", "attribute 'openProperties': expected a map, got \"x\"");

    /* the harmless values of those attributes are fine */
    cfg_t *cfg = listener_ok("'authenticatePeer': false, 'requireSsl': 'no', "
                             "'requireEncryption': false, 'multiTenant': 'off', 'http': false, "
                             "'saslMechanisms': 'ANONYMOUS anonymous', 'openProperties': {}");
    assert_string_equal(cfg->listeners[0].sasl_mechanisms, "ANONYMOUS");
    assert_false(cfg->listeners[0].authenticate_peer);
    cfg_free(cfg);
    /* authentication (router/sasl.c): the mechanisms upper-cased, blank-separated, once */
    cfg = listener_ok("'authenticatePeer': 'yes', 'saslMechanisms': 'plain,SCRAM-SHA-256 PLAIN'");
    assert_true(cfg->listeners[0].authenticate_peer);
    assert_string_equal(cfg->listeners[0].sasl_mechanisms, "PLAIN SCRAM-SHA-256");
    cfg_free(cfg);
}

static void test_listener_ignored(void **state)
{
    (void)state;
    cfg_t *cfg = listener_ok("'cost': 3, 'socketAddressFamily': 'IPv4', 'failoverUrls': '', "
                             "'messageLoggingComponents': 'none', 'policyVhost': 'v', "
                             "'initialHandshakeTimeoutSeconds': '5', 'identity': 'listener/1'");
    const cfg_listener_t *l = &cfg->listeners[0];
    assert_int_equal(l->cost, 3); /* kept for management, used by nothing standalone */
    assert_int_equal(l->family, CFG_FAMILY_IPV4);
    assert_string_equal(l->policy_vhost, "v");
    cfg_free(cfg);
    cfg = listener_ok("'protocolFamily': 'IPv6'");
    assert_int_equal(cfg->listeners[0].family, CFG_FAMILY_IPV6);
    cfg_free(cfg);
    cfg = listener_ok("");
    assert_int_equal(cfg->listeners[0].family, CFG_FAMILY_ANY);
    assert_int_equal(cfg->listeners[0].cost, 1);
    assert_null(cfg->listeners[0].policy_vhost);
    cfg_free(cfg);
    /* what a client or the log would see differently is refused until Junction does it */
    listener_err("'failoverUrls': 'amqp://b:5672'",
                 "attribute 'failoverUrls': Junction does not support failoverUrls (a failover "
                 "list for clients) yet");
    listener_err("'messageLoggingComponents': 'all'",
                 "attribute 'messageLoggingComponents': Junction does not support "
                 "messageLoggingComponents other than \"none\" (message logging) yet");
    listener_err("'socketAddressFamily': 'IPv5'",
                 "attribute 'socketAddressFamily': expected one of IPv4, IPv6, got \"IPv5\"");
    listener_err("'cost': 'cheap'", "attribute 'cost': expected an integer, got \"cheap\"");
    listener_err("'healthz': 'sure'", "attribute 'healthz': expected a boolean (true/false, "
                                      "yes/no, on/off), got \"sure\"");
}

/* http, httpRootDir, websockets, healthz, metrics: qdrouterd's defaults and semantics */
static void test_listener_http(void **state)
{
    (void)state;
    cfg_t *cfg = listener_ok("");
    const cfg_listener_t *l = &cfg->listeners[0];
    assert_false(l->http);
    assert_null(l->http_root_dir);
    assert_true(l->websockets);
    assert_true(l->healthz);
    assert_true(l->metrics);
    cfg_free(cfg);

    cfg = listener_ok("'http': 'yes', 'websockets': false, 'healthz': 'no', 'metrics': 'off'");
    l = &cfg->listeners[0];
    assert_true(l->http);
    assert_false(l->websockets);
    assert_false(l->healthz);
    assert_false(l->metrics);
    cfg_free(cfg);

    /* httpRootDir implies http; an empty one is no directory at all */
    cfg = listener_ok("'httpRootDir': '/var/www'");
    assert_true(cfg->listeners[0].http);
    assert_string_equal(cfg->listeners[0].http_root_dir, "/var/www");
    cfg_free(cfg);
    cfg = listener_ok("'http-root-dir': ''");
    assert_false(cfg->listeners[0].http);
    assert_null(cfg->listeners[0].http_root_dir);
    cfg_free(cfg);

    listener_err("'http': 'maybe'", "attribute 'http': expected a boolean (true/false, "
                                    "yes/no, on/off), got \"maybe\"");
    listener_err("'websockets': 2", "attribute 'websockets': expected a boolean (true/false, "
                                    "yes/no, on/off), got 2");
    listener_err("'httpRootDir': true", "attribute 'httpRootDir': expected a string, got true");
}

/* -- autoLink -- */

static void test_autolink(void **state)
{
    (void)state;
    cfg_t *cfg = load_ok("[['autoLink', {'name': 'a', 'address': 'q', 'direction': 'out', "
                         "'containerId': 'broker', 'externalAddress': 'ext.q'}],"
                         " ['autoLink', {'addr': 'q', 'dir': 'in', 'connection': 'c1'}],"
                         " ['autoLink', {'address': 'q', 'direction': 'in', 'phase': 4, "
                         "'containerId': 'b', 'fallback': false}]]");
    assert_int_equal(cfg->n_autolinks, 3);
    const cfg_autolink_t *a = cfg->autolinks;
    assert_string_equal(a[0].name, "a");
    assert_string_equal(a[0].address, "q");
    assert_int_equal(a[0].dir, CFG_AUTOLINK_OUT);
    assert_int_equal(a[0].phase, 0); /* out: phase 0 */
    assert_string_equal(a[0].container_id, "broker");
    assert_null(a[0].connection);
    assert_string_equal(a[0].external_address, "ext.q");
    assert_int_equal(a[1].dir, CFG_AUTOLINK_IN);
    assert_int_equal(a[1].phase, 1); /* in: phase 1 */
    assert_string_equal(a[1].connection, "c1");
    assert_null(a[1].external_address);
    assert_int_equal(a[2].phase, 4);
    cfg_free(cfg);

    load_err("[['autoLink', {'direction': 'in', 'containerId': 'b'}]]",
             "t.json: entity 0 (autoLink): attribute 'address': required");
    load_err("[['autoLink', {'address': 'q', 'containerId': 'b'}]]",
             "t.json: entity 0 (autoLink): attribute 'direction': required (in or out)");
    load_err("[['autoLink', {'address': 'q', 'direction': 'in'}]]",
             "t.json: entity 0 (autoLink): attributes 'containerId' and 'connection': expected "
             "at least one of them, got neither");
    load_err("[['autoLink', {'address': 'q', 'direction': 'in', 'containerId': 'b', "
             "'phase': 10}]]",
             "t.json: entity 0 (autoLink): attribute 'phase': expected an integer from 0 to 9, "
             "got 10");
    /* fallback: an in autoLink's phase defaults to 0 then (qdrouterd) */
    cfg = load_ok("[['autoLink', {'address': 'q', 'direction': 'in', 'containerId': 'b', "
                  "'fallback': true}], ['autoLink', {'address': 'q', 'direction': 'out', "
                  "'containerId': 'b', 'fallback': true}]]");
    assert_int_equal(cfg->n_autolinks, 2);
    assert_true(cfg->autolinks[0].fallback);
    assert_int_equal(cfg->autolinks[0].phase, 0);
    assert_true(cfg->autolinks[1].fallback);
    assert_int_equal(cfg->autolinks[1].phase, 0);
    cfg_free(cfg);
}

/* -- address -- */

static void test_address(void **state)
{
    (void)state;
    cfg_t *cfg = load_ok("[['address', {'name': 'q', 'prefix': 'queue', 'distribution': "
                         "'closest', 'waypoint': 'no', 'ingressPhase': 0, 'egressPhase': '0', "
                         "'priority': 5, 'enableFallback': false}]]");
    const cfg_address_t *a = &cfg->addresses[0];
    assert_string_equal(a->name, "q");
    assert_string_equal(a->prefix, "queue");
    assert_int_equal(a->distribution, CFG_DIST_CLOSEST);
    assert_false(a->waypoint);
    assert_int_equal(a->ingress_phase, 0);
    assert_int_equal(a->egress_phase, 0);
    assert_int_equal(a->priority, 5);
    cfg_free(cfg);

    /* qdrouterd's phasing: a waypoint is ingress 0, egress 1 unless phases are given */
    cfg = load_ok("[['address', {'prefix': 'a', 'waypoint': true}],"
                  " ['address', {'pattern': 'a.b', 'egressPhase': 2}],"
                  " ['address', {'prefix': 'b', 'waypoint': true, 'ingressPhase': '3'}]]");
    assert_true(cfg->addresses[0].waypoint);
    assert_int_equal(cfg->addresses[0].ingress_phase, 0);
    assert_int_equal(cfg->addresses[0].egress_phase, 1);
    assert_int_equal(cfg->addresses[1].ingress_phase, 0);
    assert_int_equal(cfg->addresses[1].egress_phase, 2);
    assert_int_equal(cfg->addresses[2].ingress_phase, 3);
    assert_int_equal(cfg->addresses[2].egress_phase, 0);
    cfg_free(cfg);
    address_err("'prefix': 'a', 'egressPhase': 10",
                "attribute 'egressPhase': expected an integer from 0 to 9, got 10");

    address_err("'prefix': 'a', 'pattern': 'b'",
                "attributes 'prefix' and 'pattern': expected one of them, got both");
    address_err("'distribution': 'closest'",
                "attributes 'prefix' and 'pattern': expected one of them, got neither");
    address_err("'prefix': ''", "attribute 'prefix': expected a prefix of 1 to 256 tokens "
                                "separated by '.' or '/', got \"\"");
    address_err("'pattern': './/'", "attribute 'pattern': expected a pattern of 1 to 256 tokens "
                                    "separated by '.' or '/', got \".//\"");
    address_err("'prefix': true", "attribute 'prefix': expected a string, got true");
    cfg = load_ok("[['address', {'prefix': 7}]]"); /* qdrouterd's str(): a number is a name */
    assert_string_equal(cfg->addresses[0].prefix, "7");
    cfg_free(cfg);
    address_err("'prefix': 'a', 'ingressPhase': 10",
                "attribute 'ingressPhase': expected an integer from 0 to 9, got 10");
    address_err("'prefix': 'a', 'egressPhase': -1",
                "attribute 'egressPhase': expected an integer from 0 to 9, got -1");
    address_err("'prefix': 'a', 'priority': 10",
                "attribute 'priority': expected an integer from 0 to 9, got 10");
    address_err("'prefix': 'a', 'waypoint': 'maybe'",
                "attribute 'waypoint': expected a boolean (true/false, yes/no, on/off), got "
                "\"maybe\"");
    address_err("'prefix': 'a', 'enableFallback': true, 'waypoint': true",
                "attribute 'enableFallback': cannot be used with waypoint or a non-zero "
                "ingressPhase or egressPhase");
    address_err("'prefix': 'a', 'enableFallback': true, 'egressPhase': 1",
                "attribute 'enableFallback': cannot be used with waypoint or a non-zero "
                "ingressPhase or egressPhase");
    address_err("'prefix': 'a', 'containerId': 'b'", "attribute 'containerId': unknown attribute");
}

static void test_address_duplicates(void **state)
{
    (void)state;
    load_err("[['address', {'prefix': 'closest'}], ['address', {'prefix': 'x'}],"
             " ['address', {'prefix': '/closest/'}]]",
             "t.json: entity 2 (address): attribute 'prefix': entity 0 configures the same "
             "pattern (\"closest/#\") already");
    load_err("[['address', {'prefix': 'closest'}], ['address', {'pattern': 'closest.#'}]]",
             "t.json: entity 1 (address): attribute 'pattern': entity 0 configures the same "
             "pattern (\"closest.#\") already");
    load_err("[['address', {'pattern': '#.*'}], ['address', {'pattern': '*/#'}]]",
             "t.json: entity 1 (address): attribute 'pattern': entity 0 configures the same "
             "pattern (\"*/#\") already");
    /* a prefix and the same text as a pattern are different patterns */
    cfg_t *cfg = load_ok("[['address', {'prefix': 'a'}], ['address', {'pattern': 'a'}]]");
    assert_int_equal(cfg->n_addresses, 2);
    cfg_free(cfg);
}

/* -- log -- */

/* Junction's `management` entity: the management socket. */
static void test_management(void **state)
{
    (void)state;
    cfg_t *cfg = load_ok("[['listener', {}]]");
    assert_false(cfg->management.enabled); /* no entity, no socket */
    assert_null(cfg->management.socket);
    cfg_free(cfg);

    cfg = load_ok("[['management', {'socket': '/tmp/j.sock', 'max-clients': '3', "
                  "'name': 'm', 'type': 'management'}]]");
    assert_true(cfg->management.enabled);
    assert_string_equal(cfg->management.socket, "/tmp/j.sock");
    assert_int_equal(cfg->management.max_clients, 3);
    cfg_free(cfg);

    /* defaults: 16 clients; the socket under /run for root, else XDG_RUNTIME_DIR */
    char *saved = getenv("XDG_RUNTIME_DIR") ? strdup(getenv("XDG_RUNTIME_DIR")) : NULL;
    setenv("XDG_RUNTIME_DIR", "/run/user/1234", 1);
    char path[CFG_SOCKET_PATH_MAX + 1];
    assert_int_equal(cfg_management_default_socket(path, sizeof(path)), 0);
    cfg = load_ok("[['management', {}]]");
    assert_int_equal(cfg->management.max_clients, 16);
    assert_string_equal(cfg->management.socket, path);
    if (geteuid() == 0)
        assert_string_equal(path, "/run/junction/junctiond.sock");
    else
        assert_string_equal(path, "/run/user/1234/junction/junctiond.sock");
    cfg_free(cfg);
    assert_int_equal(cfg_management_default_socket(path, 10), -ENAMETOOLONG);
    if (geteuid() != 0) {
        unsetenv("XDG_RUNTIME_DIR");
        assert_int_equal(cfg_management_default_socket(path, sizeof(path)), -ENOENT);
        load_err("[['management', {}]]",
                 "t.json: entity 0 (management): attribute 'socket': required when junctiond "
                 "does not run as root and XDG_RUNTIME_DIR is not set");
    }
    if (saved) {
        setenv("XDG_RUNTIME_DIR", saved, 1);
        free(saved);
    } else {
        unsetenv("XDG_RUNTIME_DIR");
    }

    load_err("[['management', {'socket': ''}]]",
             "t.json: entity 0 (management): attribute 'socket': expected a Unix socket path, "
             "got \"\"");
    char text[512], want[512], longp[200];
    memset(longp, 'a', 108);
    longp[0] = '/';
    longp[108] = '\0';
    snprintf(text, sizeof(text), "[['management', {'socket': '%s'}]]", longp);
    cfg_t *c2 = NULL;
    assert_int_equal(cfg_load_string(q(text), "t.json", &c2, errbuf, sizeof(errbuf)), -1);
    snprintf(want, sizeof(want), "t.json: entity 0 (management): attribute 'socket': expected a "
                                 "Unix socket path of at most %d bytes, got \"",
             CFG_SOCKET_PATH_MAX);
    assert_memory_equal(errbuf, want, strlen(want));
    longp[107] = '\0'; /* exactly the limit */
    snprintf(text, sizeof(text), "[['management', {'socket': '%s'}]]", longp);
    cfg = load_ok(text);
    assert_int_equal(strlen(cfg->management.socket), CFG_SOCKET_PATH_MAX);
    cfg_free(cfg);

    load_err("[['management', {'socket': []}]]",
             "t.json: entity 0 (management): attribute 'socket': expected a string, got a list");
    load_err("[['management', {'socket': '/x', 'maxClients': 0}]]",
             "t.json: entity 0 (management): attribute 'maxClients': expected an integer from "
             "1 to 1024, got 0");
    load_err("[['management', {'socket': '/x', 'maxClients': 'many'}]]",
             "t.json: entity 0 (management): attribute 'maxClients': expected an integer from "
             "1 to 1024, got \"many\"");
    load_err("[['management', {'socket': '/x', 'port': 5}]]",
             "t.json: entity 0 (management): attribute 'port': unknown attribute");
    load_err("[['management', {'socket': '/x'}], ['listener', {}], ['management', {}]]",
             "t.json: entity 2 (management): a second management entity (entity 0 is the "
             "management entity already)");
    load_err("[['management', {'socket': '/x', 'type': 'listener'}]]",
             "t.json: entity 0 (management): attribute 'type': expected \"management\" (the "
             "entity's own type), got \"listener\"");
    /* qdrouterd's long name is its run-time management node, not this entity */
    load_err("[['org.apache.qpid.dispatch.management', {}]]",
             "t.json: entity 0 (management): 'management' is not a configuration entity (it "
             "exists only at run time)");
}

static void test_log(void **state)
{
    (void)state;
    cfg_t *cfg = load_ok("[['log', {'module': 'SERVER', 'enable': 'trace,debug,warning+', "
                         "'includeTimestamp': 'no', 'includeSource': 'yes', "
                         "'outputFile': '/tmp/junction.log'}],"
                         " ['log', {'module': 'DEFAULT', 'enable': 'none', 'output-file': "
                         "'stdout'}]]");
    const cfg_log_t *g = &cfg->logs[0];
    uint8_t          mask;
    assert_int_equal(base_log_parse_enable("trace,debug,warning+", &mask), 0);
    assert_string_equal(g->module, "SERVER");
    assert_int_equal(g->module_id, BASE_LOG_MOD_SERVER);
    assert_string_equal(g->enable, "trace,debug,warning+");
    assert_int_equal(g->enable_mask, mask);
    assert_false(g->include_timestamp);
    assert_true(g->include_timestamp_set);
    assert_true(g->include_source);
    assert_true(g->include_source_set);
    assert_string_equal(g->output_file, "/tmp/junction.log");
    g = &cfg->logs[1];
    assert_int_equal(g->module_id, BASE_LOG_MOD_DEFAULT);
    assert_int_equal(g->enable_mask, 0);
    assert_string_equal(g->output_file, "stdout");
    cfg_free(cfg);

    log_err("", "attribute 'module': required, but not given");
    log_err("'enable': 'info+'", "attribute 'module': required, but not given");
    log_err("'module': 'router'",
            "attribute 'module': expected one of DEFAULT, ROUTER, ROUTER_CORE, ROUTER_HELLO, "
            "ROUTER_LS, ROUTER_MA, MESSAGE, SERVER, AGENT, AUTHSERVICE, CONTAINER, ERROR, "
            "POLICY, HTTP, CONN_MGR, PYTHON, PROTOCOL, got \"router\"");
    log_err("'module': 'DEFAULT', 'enable': 'loud'",
            "attribute 'enable': expected a list of levels (trace, debug, info, notice, warning, "
            "error, critical, or the start of one; `+` after one means \"and above\"), \"none\" "
            "or \"default\", got \"loud\"");
    log_err("'module': 'DEFAULT', 'enable': 'info+,warnings'",
            "attribute 'enable': expected a list of levels (trace, debug, info, notice, warning, "
            "error, critical, or the start of one; `+` after one means \"and above\"), \"none\" "
            "or \"default\", got \"info+,warnings\"");
    log_err("'module': 'DEFAULT', 'outputFile': ''",
            "attribute 'outputFile': expected \"stderr\", \"stdout\", \"syslog\" or a file path, "
            "got \"\"");
    log_err("'module': 'DEFAULT', 'includeTimestamp': 'always'",
            "attribute 'includeTimestamp': expected a boolean (true/false, yes/no, on/off), got "
            "\"always\"");
    cfg = load_ok("[['log', {'module': 'AGENT', 'outputFile': 'syslog', 'enable': 'warn+'}]]");
    assert_string_equal(cfg->logs[0].output_file, "syslog");
    assert_int_equal(cfg->logs[0].enable_mask, 0x70);
    cfg_free(cfg);
    load_err("[['log', {'module': 'SERVER'}], ['log', {'module': 'SERVER', 'enable': 'debug'}]]",
             "t.json: entity 1 (log): attribute 'module': entity 0 configures module SERVER "
             "already");
}

/* -- files -- */

static void test_examples_load(void **state)
{
    (void)state;
    cfg_t *cfg = NULL;

    assert_int_equal(
        cfg_load_file(SRCDIR "/config/examples/standalone.json", &cfg, errbuf, sizeof(errbuf)), 0);
    assert_string_equal(cfg->router.id, "Junction.A");
    assert_int_equal(cfg->n_listeners, 2);
    assert_string_equal(cfg->listeners[0].host, "127.0.0.1");
    assert_int_equal(cfg_port_number(cfg->listeners[0].port), 5672);
    assert_string_equal(cfg->listeners[0].sasl_mechanisms, "ANONYMOUS");
    assert_false(cfg->listeners[0].authenticate_peer);
    assert_false(cfg->listeners[0].http);
    assert_int_equal(cfg_port_number(cfg->listeners[1].port), 8672);
    assert_true(cfg->listeners[1].http);
    assert_true(cfg->listeners[1].websockets && cfg->listeners[1].metrics &&
                cfg->listeners[1].healthz);
    assert_int_equal(cfg->n_addresses, 5);
    static const struct {
        const char        *prefix;
        cfg_distribution_t dist;
    } want[] = {{"closest", CFG_DIST_CLOSEST},
                {"exclusive", CFG_DIST_CLOSEST},
                {"unicast", CFG_DIST_CLOSEST},
                {"multicast", CFG_DIST_MULTICAST},
                {"broadcast", CFG_DIST_MULTICAST}};
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(cfg->addresses[i].prefix, want[i].prefix);
        assert_int_equal(cfg->addresses[i].distribution, want[i].dist);
    }
    cfg_free(cfg);

    assert_int_equal(
        cfg_load_file(SRCDIR "/config/examples/ephemeral.json", &cfg, errbuf, sizeof(errbuf)), 0);
    assert_string_equal(cfg->listeners[0].port, "0");
    assert_int_equal(cfg->router.worker_threads, 2);
    assert_int_equal(cfg->n_logs, 2);
    cfg_free(cfg);

    assert_int_equal(
        cfg_load_file(SRCDIR "/config/examples/patterns.json", &cfg, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(cfg->n_addresses, 4);
    assert_string_equal(cfg->addresses[0].pattern, "sensors.#");
    assert_int_equal(cfg->router.default_distribution, CFG_DIST_CLOSEST);
    cfg_free(cfg);

    assert_int_equal(
        cfg_load_file(SRCDIR "/config/examples/http.json", &cfg, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(cfg->n_listeners, 3);
    assert_false(cfg->listeners[0].http);
    assert_true(cfg->listeners[1].http && cfg->listeners[1].websockets);
    assert_true(cfg->listeners[2].http);
    assert_false(cfg->listeners[2].websockets);
    assert_true(cfg->management.enabled);
    cfg_free(cfg);

    assert_int_equal(
        cfg_load_file(SRCDIR "/config/examples/broker.json", &cfg, errbuf, sizeof(errbuf)), 0);
    assert_int_equal(cfg->listeners[1].role, CFG_ROLE_ROUTE_CONTAINER);
    assert_int_equal(cfg->addresses[0].egress_phase, 1);
    assert_int_equal(cfg->n_autolinks, 2);
    assert_string_equal(cfg->autolinks[1].external_address, "queue.orders");
    cfg_free(cfg);

    assert_int_equal(
        cfg_load_file(SRCDIR "/config/examples/interior.json", &cfg, errbuf, sizeof(errbuf)), 0);
    assert_true(cfg->router.interior);
    assert_int_equal(cfg->n_listeners, 3);
    assert_int_equal(cfg->listeners[1].role, CFG_ROLE_INTER_ROUTER);
    assert_int_equal(cfg->listeners[2].role, CFG_ROLE_EDGE);
    assert_int_equal(cfg->connectors[0].conn.role, CFG_ROLE_INTER_ROUTER);
    cfg_free(cfg);

    assert_int_equal(
        cfg_load_file(SRCDIR "/config/examples/edge.json", &cfg, errbuf, sizeof(errbuf)), 0);
    assert_true(cfg->router.edge);
    assert_int_equal(cfg->n_connectors, 2);
    assert_int_equal(cfg->connectors[1].conn.role, CFG_ROLE_EDGE);
    cfg_free(cfg);
}

static char *write_temp(const char *content, size_t len)
{
    static char path[64];
    snprintf(path, sizeof(path), "/tmp/junction-cfg-XXXXXX.json");
    int fd = mkstemps(path, 5);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, content, len), (ssize_t)len);
    close(fd);
    return path;
}

static void test_file_errors(void **state)
{
    (void)state;
    cfg_t *cfg = (cfg_t *)(uintptr_t)0x1;
    char   want[256];

    assert_int_equal(cfg_load_file("/nonexistent/junction.json", &cfg, errbuf, sizeof(errbuf)), -1);
    assert_string_equal(errbuf, "/nonexistent/junction.json: cannot open: No such file or "
                                "directory");
    assert_ptr_equal(cfg, (cfg_t *)(uintptr_t)0x1);

    char *path = write_temp("[\n[\"router\", {}],\n\0]", 20);
    assert_int_equal(cfg_load_file(path, &cfg, errbuf, sizeof(errbuf)), -1);
    snprintf(want, sizeof(want), "%s: line 3: a NUL byte: not a text file", path);
    assert_string_equal(errbuf, want);
    unlink(path);

    static const char bad_port[] = "[[\"listener\", {\"port\": \"x y\"}]]";
    path = write_temp(bad_port, strlen(bad_port));
    assert_int_equal(cfg_load_file(path, &cfg, errbuf, sizeof(errbuf)), -1);
    snprintf(want, sizeof(want),
             "%s: entity 0 (listener): attribute 'port': expected a port number from 0 to "
             "65535 or a service name, got \"x y\"",
             path);
    assert_string_equal(errbuf, want);
    unlink(path);

    path = write_temp("[]", 2);
    assert_int_equal(cfg_load_file(path, &cfg, errbuf, sizeof(errbuf)), 0);
    assert_string_equal(cfg->path, path);
    cfg_free(cfg);
    unlink(path);
}

static void test_small_error_buffer(void **state)
{
    (void)state;
    cfg_t *cfg = NULL;
    char   small[12];
    memset(small, 'x', sizeof(small));
    assert_int_equal(cfg_load_string("[[\"bogus\", {}]]", "t.json", &cfg, small, sizeof(small)),
                     -1);
    assert_string_equal(small, "t.json: ent"); /* cut, but terminated */
    assert_int_equal(cfg_load_string("[[\"bogus\", {}]]", "t.json", &cfg, NULL, 0), -1);
    assert_int_equal(cfg_load_string("[[\"bogus\", {}]]", NULL, &cfg, errbuf, sizeof(errbuf)), -1);
    assert_string_equal(errbuf, "config: entity 0: unknown entity type 'bogus'");
}

static void test_enum_names(void **state)
{
    (void)state;
    assert_string_equal(cfg_distribution_name(CFG_DIST_MULTICAST), "multicast");
    assert_string_equal(cfg_distribution_name(CFG_DIST_CLOSEST), "closest");
    assert_string_equal(cfg_distribution_name(CFG_DIST_BALANCED), "balanced");
    assert_string_equal(cfg_distribution_name(CFG_DIST_UNAVAILABLE), "unavailable");
    assert_string_equal(cfg_distribution_name((cfg_distribution_t)17), "?");
    assert_string_equal(cfg_strip_name(CFG_STRIP_BOTH), "both");
    assert_string_equal(cfg_strip_name(CFG_STRIP_IN), "in");
    assert_string_equal(cfg_strip_name(CFG_STRIP_OUT), "out");
    assert_string_equal(cfg_strip_name(CFG_STRIP_NO), "no");
    assert_string_equal(cfg_strip_name((cfg_strip_t)9), "?");
    assert_string_equal(cfg_role_name(CFG_ROLE_NORMAL), "normal");
    assert_string_equal(cfg_role_name(CFG_ROLE_ROUTE_CONTAINER), "route-container");
    assert_string_equal(cfg_role_name((cfg_role_t)-1), "?");
}

/* Cheap fuzzing: mutations of a valid file must load or fail cleanly (ASan checks leaks and
 * overruns; the one-line rule is checked here). */
static void test_mutations(void **state)
{
    (void)state;
    static const char base[] =
        "# c\n[[\"router\", {\"id\": \"R\", \"worker-threads\": \"2\"}],\n"
        " [\"listener\", {\"host\": \"127.0.0.1\", \"port\": 5672, \"saslMechanisms\": "
        "\"ANONYMOUS\", \"maxFrameSize\": \"1024\", \"stripAnnotations\": \"in\"}],\n"
        " [\"address\", {\"prefix\": \"closest\", \"distribution\": \"closest\"}],\n"
        " [\"address\", {\"pattern\": \"a.*.#\", \"waypoint\": \"no\"}],\n"
        " [\"log\", {\"module\": \"DEFAULT\", \"enable\": \"info+\"}]]\n";
    static const char alphabet[] = "[]{}\",:#.*/ \n\\0123456789aeyonTRUEfalse-_";
    char              text[sizeof(base) + 8];
    uint32_t          seed = 12345;
    int               ok = 0;

    for (int round = 0; round < 20000; round++) {
        memcpy(text, base, sizeof(base));
        size_t len = sizeof(base) - 1;
        int    edits = 1 + round % 4;
        for (int k = 0; k < edits; k++) {
            seed = seed * 1103515245u + 12345u;
            size_t pos = (seed >> 8) % len;
            seed = seed * 1103515245u + 12345u;
            char c = alphabet[(seed >> 8) % (sizeof(alphabet) - 1)];
            switch ((seed >> 20) % 3) {
            case 0: /* replace */
                text[pos] = c;
                break;
            case 1: /* delete */
                memmove(text + pos, text + pos + 1, len - pos);
                len--;
                break;
            default: /* insert */
                if (len + 1 < sizeof(text)) {
                    memmove(text + pos + 1, text + pos, len - pos + 1);
                    text[pos] = c;
                    len++;
                }
                break;
            }
        }
        cfg_t *cfg = NULL;
        errbuf[0] = '\0';
        if (cfg_load_string(text, "m.json", &cfg, errbuf, sizeof(errbuf)) == 0) {
            ok++;
            cfg_free(cfg);
        } else {
            assert_memory_equal(errbuf, "m.json: ", 8);
            assert_null(strchr(errbuf, '\n'));
        }
    }
    assert_true(ok > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_list_defaults),
        cmocka_unit_test(test_listener_defaults),
        cmocka_unit_test(test_address_defaults),
        cmocka_unit_test(test_log_defaults),
        cmocka_unit_test(test_bool_coercion),
        cmocka_unit_test(test_int_coercion),
        cmocka_unit_test(test_enum_coercion),
        cmocka_unit_test(test_string_coercion),
        cmocka_unit_test(test_null_is_absent),
        cmocka_unit_test(test_key_spellings),
        cmocka_unit_test(test_type_names),
        cmocka_unit_test(test_unsupported_types),
        cmocka_unit_test(test_name_identity_type),
        cmocka_unit_test(test_comments),
        cmocka_unit_test(test_byte_order_mark),
        cmocka_unit_test(test_comment_after_json_is_error),
        cmocka_unit_test(test_json_errors),
        cmocka_unit_test(test_structure_errors),
        cmocka_unit_test(test_entity_index_in_messages),
        cmocka_unit_test(test_unknown_and_repeated_attributes),
        cmocka_unit_test(test_router),
        cmocka_unit_test(test_router_ignored),
        cmocka_unit_test(test_interior_and_edge_modes),
        cmocka_unit_test(test_listener_port),
        cmocka_unit_test(test_listener_values),
        cmocka_unit_test(test_listener_size_maxima),
        cmocka_unit_test(test_listener_limits),
        cmocka_unit_test(test_policy),
        cmocka_unit_test(test_vhost),
        cmocka_unit_test(test_vhost_booleans),
        cmocka_unit_test(test_vhost_parse_kinds),
        cmocka_unit_test(test_listener_unsupported),
        cmocka_unit_test(test_listener_ignored),
        cmocka_unit_test(test_listener_http),
        cmocka_unit_test(test_address),
        cmocka_unit_test(test_autolink),
        cmocka_unit_test(test_address_duplicates),
        cmocka_unit_test(test_log),
        cmocka_unit_test(test_management),
        cmocka_unit_test(test_examples_load),
        cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_small_error_buffer),
        cmocka_unit_test(test_enum_names),
        cmocka_unit_test(test_mutations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
