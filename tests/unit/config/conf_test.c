/* tests/unit/config/conf_test.c: config/conf.c and config/names.c - qdrouterd's `.conf`
 * dialect (read as qdrouterd 1.19's config.py reads it), the choice of dialect by content,
 * line numbers in messages, and every name qdrouterd has used (deprecated and pre-1.0 names
 * load with one warning naming the modern form).
 *
 * The expected trees were checked against qdrouterd 1.19's own reader (its Config._parse). */
#include "config/config.h"
#include "config/config_int.h"

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

#ifndef SRCDIR
#error "SRCDIR must name the source tree (set by tests/unit/config/meson.build)"
#endif

static char errbuf[1024];

static cfg_t *conf_ok(const char *text)
{
    cfg_t *cfg = NULL;
    errbuf[0] = '\0';
    int rc = cfg_load_string(text, "t.conf", &cfg, errbuf, sizeof(errbuf));
    if (rc != 0)
        print_error("unexpected error: %s\n", errbuf);
    assert_int_equal(rc, 0);
    assert_non_null(cfg);
    return cfg;
}

static void conf_err(const char *text, const char *want)
{
    cfg_t *cfg = (cfg_t *)(uintptr_t)0x1;
    int    rc = cfg_load_string(text, "t.conf", &cfg, errbuf, sizeof(errbuf));
    assert_int_equal(rc, -1);
    assert_ptr_equal(cfg, (cfg_t *)(uintptr_t)0x1);
    assert_null(strchr(errbuf, '\n'));
    assert_string_equal(errbuf, want);
}

/* The tree the reader makes, as compact JSON (a new string), or NULL with errbuf set to
 * "<line>: <message>". */
static char *tree(const char *text)
{
    cJSON       *root = NULL;
    cfg__lines_t lines;
    int          line = -1;
    char         msg[512];

    cfg__lines_init(&lines);
    int rc = cfg__conf_parse(text, &root, &lines, &line, msg, sizeof(msg));
    cfg__lines_fini(&lines);
    if (rc < 0) {
        snprintf(errbuf, sizeof(errbuf), "%d: %s", line, msg);
        return NULL;
    }
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

static void tree_is(const char *text, const char *want)
{
    char *got = tree(text);
    if (!got)
        print_error("unexpected error: %s\n", errbuf);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

static void tree_err(const char *text, const char *want)
{
    char *got = tree(text);
    assert_null(got);
    assert_string_equal(errbuf, want);
}

static void one_warning(const cfg_t *cfg, const char *want)
{
    if (cfg->n_warnings != 1)
        for (size_t i = 0; i < cfg->n_warnings; i++)
            print_error("warning: %s\n", cfg->warnings[i]);
    assert_int_equal(cfg->n_warnings, 1);
    assert_string_equal(cfg->warnings[0], want);
}

/* -- the dialect -- */

static void test_entities_and_values(void **state)
{
    (void)state;
    tree_is("router {\n    mode: standalone\n    id: R1\n}\nlistener {\n    port: amqp\n}\n",
            "[[\"router\",{\"mode\":\"standalone\",\"id\":\"R1\"}],"
            "[\"listener\",{\"port\":\"amqp\"}]]");
    /* values are strings: the rest of the line, inner blanks kept */
    tree_is("listener {\n  saslMechanisms: ANONYMOUS PLAIN\n  failoverUrls: amqp://a:5672\n}",
            "[[\"listener\",{\"saslMechanisms\":\"ANONYMOUS PLAIN\","
            "\"failoverUrls\":\"amqp://a:5672\"}]]");
    /* hyphens, underscores: kept as written here (the validation camelCases them) */
    tree_is("fixed-address {\n worker_threads: 4\n}", "[[\"fixed-address\",{\"worker_threads\":\"4\"}]]");
    /* the same file as JSON and as .conf gives the same configuration */
    cfg_t *c = conf_ok("router {\n mode: standalone\n id: A\n worker-threads: 3\n}\n"
                       "listener {\n host: 127.0.0.1\n port: 5672\n maxFrameSize: 1024\n"
                       " stripAnnotations: in\n authenticatePeer: no\n}\n"
                       "address {\n prefix: closest\n distribution: closest\n}\n"
                       "log {\n module: SERVER\n enable: trace+\n includeTimestamp: yes\n}\n");
    assert_string_equal(c->router.id, "A");
    assert_int_equal(c->router.worker_threads, 3);
    assert_int_equal(c->n_listeners, 1);
    assert_string_equal(c->listeners[0].host, "127.0.0.1");
    assert_string_equal(c->listeners[0].port, "5672");
    assert_int_equal(c->listeners[0].max_frame_size, 1024);
    assert_int_equal(c->listeners[0].strip_annotations, CFG_STRIP_IN);
    assert_int_equal(c->n_addresses, 1);
    assert_string_equal(c->addresses[0].prefix, "closest");
    assert_int_equal(c->addresses[0].distribution, CFG_DIST_CLOSEST);
    assert_int_equal(c->n_logs, 1);
    assert_string_equal(c->logs[0].enable, "trace+");
    cfg_free(c);
}

static void test_comments_and_hash_values(void **state)
{
    (void)state;
    tree_is("# top\n  # indented\nrouter {   # after the brace\n  id: R # trailing\n"
            "  # inside\n}  # after the end\n",
            "[[\"router\",{\"id\":\"R\"}]]");
    /* pattern, bindingKey, hostname keep '#': their value is the first word */
    tree_is("address {\n  pattern: a.#.b # a comment\n}\n",
            "[[\"address\",{\"pattern\":\"a.#.b\"}]]");
    tree_is("address {\n\tpattern:\t#\n}\n", "[[\"address\",{\"pattern\":\"#\"}]]");
    tree_is("address {\n  pattern: a.# b c\n}\n", "[[\"address\",{\"pattern\":\"a.#\"}]]");
    tree_is("binding {\n bindingKey: a.#\n}\nvhost {\n hostname: h#1 x\n}\n",
            "[[\"binding\",{\"bindingKey\":\"a.#\"}],[\"vhost\",{\"hostname\":\"h#1\"}]]");
    /* any other key: '#' starts a comment, also in a prefix */
    tree_is("address {\n  prefix: a.#.b\n}\n", "[[\"address\",{\"prefix\":\"a.\"}]]");
    tree_is("router {\n  id:R#x\n}\n", "[[\"router\",{\"id\":\"R\"}]]");
    /* a pattern that loads keeps its '#' through the validation */
    cfg_t *c = conf_ok("address {\n  pattern: sensors.# # all of them\n  distribution: "
                       "multicast\n}\n");
    assert_string_equal(c->addresses[0].pattern, "sensors.#");
    cfg_free(c);
}

static void test_blanks_and_line_ends(void **state)
{
    (void)state;
    const char *want = "[[\"router\",{\"mode\":\"standalone\",\"id\":\"R\"}]]";
    tree_is("router{\nmode:standalone\nid : R\n}", want);
    tree_is("\trouter\t{\t\n\tmode:\tstandalone\t\n  id:   R   \n\t}\t\n", want);
    tree_is("router {\r\n mode: standalone\r\n id: R\r\n}\r\n", want);
    tree_is("router {\r mode: standalone\r id: R\r}", want);
    tree_is("\v\frouter {\x1c\n mode: standalone\f\n id: R\v\n}\n", want);
    /* no final newline */
    tree_is("router {\n mode: standalone\n id: R\n}", want);
    /* blank and comment-only files: no entities (qdrouterd runs with its defaults) */
    tree_is("", "[]");
    tree_is("\n  \n\t\n# nothing\n", "[]");
    cfg_t *c = conf_ok("# nothing but a comment\n\n");
    assert_int_equal(c->n_listeners, 0);
    assert_string_equal(c->router.mode, "standalone");
    cfg_free(c);
    /* a zero-byte file is refused, as qdrouterd refuses it */
    conf_err("", "t.conf: an empty file: not a configuration (qdrouterd refuses it too)");
}

static void test_value_text(void **state)
{
    (void)state;
    /* values are JSON string text for qdrouterd: escapes work */
    tree_is("router {\n id: a\\tb\\u00e9\\\\c\\/d\n}", "[[\"router\",{\"id\":\"a\\tbé\\\\c/d\"}]]");
    tree_is("router {\n id: \\ud83d\\ude00\n}", "[[\"router\",{\"id\":\"\xf0\x9f\x98\x80\"}]]");
    tree_is("router {\n id: é\n}", "[[\"router\",{\"id\":\"é\"}]]");
    /* qdrouterd's spare-comma pass: a comma before ] or } goes, in values too */
    tree_is("listener {\n host: a, }\n name: [x,]\n}",
            "[[\"listener\",{\"host\":\"a}\",\"name\":\"[x]\"}]]");
    tree_err("router {\n id: \"R\"\n}",
             "2: a '\"' in a value: qdrouterd's .conf values are not quoted (write the text as "
             "it is, or \\\" for a quote)");
    tree_err("router {\n id: a\\qb\n}",
             "2: a '\\' that does not start a JSON escape in a value (qdrouterd's .conf values "
             "are JSON string text: write \\\\ for a backslash)");
    tree_err("router {\n id: a\\\n}",
             "2: a '\\' that does not start a JSON escape in a value (qdrouterd's .conf values "
             "are JSON string text: write \\\\ for a backslash)");
    tree_err("router {\n id: a\tb\n}", "2: a control character (0x09) in a value: write it as "
                                       "\\u0009");
    tree_err("router {\n id: \\ud83d\n}",
             "2: a '\\' that does not start a JSON escape in a value (qdrouterd's .conf values "
             "are JSON string text: write \\\\ for a backslash)");
    tree_err("router {\n id: a\\u0000\n}", "2: a \\u0000 in a value");
    tree_err("router {\n id: a\n}\n# \xff\n",
             "4: not UTF-8 text (qdrouterd reads a .conf file as UTF-8)");
}

static void test_map_attributes(void **state)
{
    (void)state;
    /* a map attribute of `key: value` lines, nested */
    tree_is("x {\n a: {\n  b: {\n   c: d\n  }\n  e: f\n }\n g: h\n}",
            "[[\"x\",{\"a\":{\"b\":{\"c\":\"d\"},\"e\":\"f\"},\"g\":\"h\"}]]");
    /* openProperties and groups are JSON, over several lines, with nested maps, comment lines
     * and qdrouterd's dropped spare commas */
    tree_is("listener {\n openProperties: {\n  \"a\": {\n   \"b\": [1, 2,]\n  }\n"
            "  # a comment line\n  , \"c\": \"x#y\",\n }\n port: 1\n}\n",
            "[[\"listener\",{\"openProperties\":{\"a\":{\"b\":[1,2]},\"c\":\"x#y\"},"
            "\"port\":\"1\"}]]");
    tree_is("vhost {\n hostname: $default\n groups: {\n  \"$default\": {\n   \"users\": \"*\",\n"
            "   \"maxSenders\": 10\n  }\n }\n}\n",
            "[[\"vhost\",{\"hostname\":\"$default\",\"groups\":{\"$default\":{\"users\":\"*\","
            "\"maxSenders\":10}}}]]");
    /* qdrouterd counts one level down for each line ending in '}', and one up only for a line
     * ending in `"key": {`: a map closed on its own line ends the value early */
    tree_err("listener {\n openProperties: {\n  \"a\": {\"b\": 1}\n }\n}\n",
             "3: attribute 'openProperties': invalid JSON in its value");
    tree_err("listener {\n openProperties: {\n  \"a\": 1,\n  \"b\": x\n }\n}\n",
             "4: attribute 'openProperties': invalid JSON in its value");
    tree_err("listener {\n openProperties: {\n  \"a\": 1\n", "2: attribute 'openProperties': "
                                                         "its JSON value does not end before "
                                                         "the end of the file");
    /* an empty openProperties loads; a non-empty one is refused, at its line */
    cfg_t *c = conf_ok("listener {\n port: 0\n openProperties: {\n }\n}\n");
    assert_int_equal(c->n_listeners, 1);
    cfg_free(c);
    conf_err("listener {\n port: 0\n openProperties: {\n  \"x\": 1\n }\n}\n",
             "t.conf: line 3: entity 0 (listener): attribute 'openProperties': Junction does not "
             "support openProperties (extra open properties) yet");
}

static void test_structure_errors(void **state)
{
    (void)state;
    const char *bad_line = "is not a qdrouterd .conf line (`type {`, `key: value`, `key: {` or "
                           "`}`; qdrouterd logs \"Invalid config file syntax\" for it)";
    char        want[512];

    /* lines qdrouterd warns about ("Invalid config file syntax") */
    snprintf(want, sizeof(want), "t.conf: line 2: 'host:' %s", bad_line);
    conf_err("listener {\n host:\n}\n", want);
    snprintf(want, sizeof(want), "t.conf: line 1: 'router' %s", bad_line);
    conf_err("router\n{\n}\n", want);
    snprintf(want, sizeof(want), "t.conf: line 2: 'key: {a}' %s", bad_line);
    conf_err("router {\n key: {a}\n}\n", want);
    snprintf(want, sizeof(want), "t.conf: line 2: 'foo bar: baz' %s", bad_line);
    conf_err("router {\n foo bar: baz\n}\n", want);
    snprintf(want, sizeof(want), "t.conf: line 3: '},' %s", bad_line);
    conf_err("router {\n m: {\n },\n}\n", want);
    /* nesting */
    conf_err("router {\n listener {\n }\n}\n",
             "t.conf: line 2: an entity inside entity 'router' (opened on line 1): is a '}' "
             "missing?");
    conf_err("router {\n id: R\n", "t.conf: line 1: entity 'router' is not closed before the "
                                  "end of the file: a '}' is missing");
    conf_err("router {\n m: {\n  a: b\n", "t.conf: line 2: a map attribute that is not "
                                             "closed before the end of the file: a '}' is "
                                             "missing");
    conf_err("}\n", "t.conf: line 1: a '}' with no entity open");
    conf_err("id: R\n", "t.conf: line 1: an attribute outside any entity");
    conf_err("pattern: a.#\n", "t.conf: line 1: an attribute outside any entity");
}

static void test_dialect_by_content(void **state)
{
    (void)state;
    cfg_t *c = NULL;
    /* JSON in a file called .conf, .conf in a file called .json */
    assert_int_equal(cfg_load_string("# c\n  [[\"router\", {\"id\": \"J\"}]]", "x.conf", &c,
                                     errbuf, sizeof(errbuf)),
                     0);
    assert_string_equal(c->router.id, "J");
    cfg_free(c);
    assert_int_equal(cfg_load_string("# c\nrouter {\n id: C\n}\n", "x.json", &c, errbuf,
                                     sizeof(errbuf)),
                     0);
    assert_string_equal(c->router.id, "C");
    cfg_free(c);
    assert_true(cfg__is_json("[]"));
    assert_true(cfg__is_json("\n  # a\n\t{"));
    assert_false(cfg__is_json("router {"));
    assert_false(cfg__is_json("# [\n"));
    assert_false(cfg__is_json(""));
    /* a JSON error keeps JSON's message */
    conf_err("[[\"router\", {\"id\": }]]", "t.conf: line 1, column 20: invalid JSON near '}]]'");
}

static void test_lines_in_messages(void **state)
{
    (void)state;
    /* attribute errors name the attribute's line, entity errors the entity's */
    conf_err("router {\n id: R\n}\n\nlistener {\n port: 0\n maxFrameSize: big\n}\n",
             "t.conf: line 7: entity 1 (listener): attribute 'maxFrameSize': expected an "
             "integer from 512 to 1048576, got \"big\"");
    conf_err("listener {\n port: 0\n colour: blue\n}\n",
             "t.conf: line 3: entity 0 (listener): attribute 'colour': unknown attribute");
    conf_err("listener {\n port: 0\n host: a\n addr: b\n}\n",
             "t.conf: line 4: entity 0 (listener): attribute 'host': given twice, as 'host' and "
             "'addr'");
    conf_err("# x\nsslProfile {\n certFile: /a\n}\n",
             "t.conf: line 2: entity 0 (sslProfile): an sslProfile needs a 'name' (listeners "
             "name it)");
    conf_err("listener {\n port: 0\n}\naddress {\n}\n",
             "t.conf: line 4: entity 1 (address): attributes 'prefix' and 'pattern': expected "
             "one of them, got neither");
    conf_err("listener {\n name: a\n port: 0\n}\nlistener {\n port: 1\n name: a\n}\n",
             "t.conf: line 7: entity 1 (listener): attribute 'name': entity 0 has the name "
             "\"a\" already");
    conf_err("blah {\n}\n", "t.conf: line 1: entity 0: unknown entity type 'blah'");
    conf_err("listener {\n port: 0\n role: spoke\n}\n",
             "t.conf: line 3: entity 0 (listener): attribute 'role': expected one of normal, "
             "inter-router, route-container, edge, got \"spoke\"");
}

static void test_shipped_examples(void **state)
{
    (void)state;
    cfg_t *a = NULL, *b = NULL;
    assert_int_equal(cfg_load_file(SRCDIR "/config/examples/standalone.conf", &a, errbuf,
                                   sizeof(errbuf)),
                     0);
    assert_int_equal(cfg_load_file(SRCDIR "/config/examples/standalone.json", &b, errbuf,
                                   sizeof(errbuf)),
                     0);
    /* the .conf example is the JSON one */
    assert_string_equal(a->router.id, b->router.id);
    assert_int_equal(a->n_listeners, b->n_listeners);
    for (size_t i = 0; i < a->n_listeners; i++) {
        assert_string_equal(a->listeners[i].host, b->listeners[i].host);
        assert_string_equal(a->listeners[i].port, b->listeners[i].port);
        assert_int_equal(a->listeners[i].http, b->listeners[i].http);
    }
    assert_int_equal(a->n_addresses, b->n_addresses);
    for (size_t i = 0; i < a->n_addresses; i++) {
        assert_string_equal(a->addresses[i].prefix, b->addresses[i].prefix);
        assert_int_equal(a->addresses[i].distribution, b->addresses[i].distribution);
    }
    assert_int_equal(a->n_warnings, 0);
    cfg_free(a);
    cfg_free(b);
}

/* -- names -- */

static void test_deprecated_attributes(void **state)
{
    (void)state;
    cfg_t *c;

    c = conf_ok("router {\n routerId: R0\n}\n");
    assert_string_equal(c->router.id, "R0");
    one_warning(c, "t.conf: line 2: entity 0 (router): attribute 'routerId' is deprecated, use "
                   "'id' instead");
    cfg_free(c);
    static const struct {
        const char *old, *modern;
    } router_old[] = {{"helloInterval", "helloIntervalSeconds"},
                      {"helloMaxAge", "helloMaxAgeSeconds"},
                      {"raInterval", "raIntervalSeconds"},
                      {"raIntervalFlux", "raIntervalFluxSeconds"},
                      {"remoteLsMaxAge", "remoteLsMaxAgeSeconds"},
                      {"debugDump", "debugDumpFile"},
                      {"saslConfigPath", "saslConfigDir"}};
    for (size_t i = 0; i < sizeof(router_old) / sizeof(router_old[0]); i++) {
        char text[256], want[256];
        snprintf(text, sizeof(text), "router {\n id: R\n %s: %s\n}\n", router_old[i].old,
                 strcmp(router_old[i].old, "saslConfigPath") == 0 ? "/etc/sasl2" : "3");
        snprintf(want, sizeof(want),
                 "t.conf: line 3: entity 0 (router): attribute '%s' is deprecated, use '%s' "
                 "instead",
                 router_old[i].old, router_old[i].modern);
        c = conf_ok(text);
        one_warning(c, want);
        cfg_free(c);
        /* the old and the new name together: given twice */
        snprintf(text, sizeof(text), "router {\n %s: 3\n %s: 3\n}\n", router_old[i].modern,
                 router_old[i].old);
        snprintf(want, sizeof(want),
                 "t.conf: line 3: entity 0 (router): attribute '%s': given twice, as '%s' and "
                 "'%s'",
                 router_old[i].modern, router_old[i].modern, router_old[i].old);
        conf_err(text, want);
    }
    /* a deprecated name is type-checked like the modern one */
    conf_err("router {\n helloInterval: soon\n}\n",
             "t.conf: line 2: entity 0 (router): attribute 'helloInterval': expected an "
             "integer, got \"soon\"");
    c = conf_ok("router {\n mobileAddrMaxAge: 60\n}\n");
    one_warning(c, "t.conf: line 2: entity 0 (router): attribute 'mobileAddrMaxAge' is "
                   "deprecated: it is no longer used");
    cfg_free(c);

    /* log: timestamp, source, output */
    c = conf_ok("log {\n module: SERVER\n timestamp: no\n}\n");
    assert_false(c->logs[0].include_timestamp);
    assert_true(c->logs[0].include_timestamp_set);
    one_warning(c, "t.conf: line 3: entity 0 (log): attribute 'timestamp' is deprecated, use "
                   "'includeTimestamp' instead");
    cfg_free(c);
    c = conf_ok("log {\n module: SERVER\n source: yes\n}\n");
    assert_true(c->logs[0].include_source);
    cfg_free(c);
    c = conf_ok("log {\n module: SERVER\n output: stdout\n}\n");
    assert_string_equal(c->logs[0].output_file, "stdout");
    one_warning(c, "t.conf: line 3: entity 0 (log): attribute 'output' is deprecated, use "
                   "'outputFile' instead");
    cfg_free(c);

    /* listener: addr (0.7/0.8), protocolFamily, httpRoot, logMessage, failoverList */
    c = conf_ok("listener {\n addr: 127.0.0.1\n port: 0\n}\n");
    assert_string_equal(c->listeners[0].host, "127.0.0.1");
    one_warning(c, "t.conf: line 2: entity 0 (listener): attribute 'addr' is deprecated, use "
                   "'host' instead");
    cfg_free(c);
    c = conf_ok("listener {\n port: 0\n protocolFamily: IPv6\n}\n");
    assert_int_equal(c->listeners[0].family, CFG_FAMILY_IPV6);
    assert_int_equal(c->n_warnings, 1);
    cfg_free(c);
    c = conf_ok("listener {\n port: 0\n httpRoot: /srv/www\n}\n");
    assert_string_equal(c->listeners[0].http_root_dir, "/srv/www");
    assert_true(c->listeners[0].http);
    one_warning(c, "t.conf: line 3: entity 0 (listener): attribute 'httpRoot' is deprecated, "
                   "use 'httpRootDir' instead");
    cfg_free(c);
    c = conf_ok("listener {\n port: 0\n logMessage: none\n}\n");
    one_warning(c, "t.conf: line 3: entity 0 (listener): attribute 'logMessage' is deprecated, "
                   "use 'messageLoggingComponents' instead");
    cfg_free(c);
    conf_err("listener {\n port: 0\n failoverList: amqp://b:5672\n}\n",
             "t.conf: line 3: entity 0 (listener): attribute 'failoverList': Junction does not "
             "support failoverUrls (a failover list for clients) yet");
    /* and the features they stand for are refused as under their modern names */
    conf_err("listener {\n port: 0\n trustedCerts: /ca.pem\n}\n",
             "t.conf: line 3: entity 0 (listener): attribute 'trustedCerts': Junction does not "
             "support trustedCertsFile (use the sslProfile's caCertFile) yet");
    conf_err("listener {\n port: 0\n logMessage: all\n}\n",
             "t.conf: line 3: entity 0 (listener): attribute 'logMessage': Junction does not "
             "support messageLoggingComponents other than \"none\" (message logging) yet");
    c = conf_ok("listener {\n port: 0\n allowUnsecured: no\n}\n");
    assert_true(c->listeners[0].require_encryption);
    cfg_free(c);
    c = conf_ok("listener {\n port: 0\n allowUnsecured: yes\n}\n");
    assert_false(c->listeners[0].require_encryption);
    one_warning(c, "t.conf: line 3: entity 0 (listener): attribute 'allowUnsecured' is "
                   "deprecated: use 'requireEncryption' instead (allowUnsecured: no is "
                   "requireEncryption: yes)");
    cfg_free(c);
    c = conf_ok("listener {\n port: 0\n allowNoSasl: yes\n}\n");
    one_warning(c, "t.conf: line 3: entity 0 (listener): attribute 'allowNoSasl' is deprecated: "
                   "it is no longer used (see 'authenticatePeer')");
    cfg_free(c);
    /* the JSON dialect warns alike, without a line */
    c = NULL;
    assert_int_equal(cfg_load_string("[[\"listener\", {\"port\": 0, \"addr\": \"::1\"}]]",
                                     "t.json", &c, errbuf, sizeof(errbuf)),
                     0);
    one_warning(c, "t.json: entity 0 (listener): attribute 'addr' is deprecated, use 'host' "
                   "instead");
    cfg_free(c);
}

static void test_old_spellings(void **state)
{
    (void)state;
    cfg_t *c = conf_ok("router {\n worker-threads: 2\n}\n");
    assert_int_equal(c->router.worker_threads, 2);
    one_warning(c, "t.conf: line 2: entity 0 (router): attribute 'worker-threads' is an old "
                   "spelling, use 'workerThreads' instead");
    cfg_free(c);
    c = conf_ok("listener {\n port: 0\n idle_timeout_seconds: 5\n}\n");
    assert_int_equal(c->listeners[0].idle_timeout_seconds, 5);
    one_warning(c, "t.conf: line 3: entity 0 (listener): attribute 'idle_timeout_seconds' is an "
                   "old spelling, use 'idleTimeoutSeconds' instead");
    cfg_free(c);
    /* a deprecated name in an old spelling still gets one warning */
    c = conf_ok("# a\nrouter {\n router-id: R\n}\n");
    assert_string_equal(c->router.id, "R");
    one_warning(c, "t.conf: line 3: entity 0 (router): attribute 'router-id' is deprecated, use "
                   "'id' instead");
    cfg_free(c);
    c = NULL;
    assert_int_equal(cfg_load_string("[[\"router\", {}]]", "t.json", &c, errbuf, sizeof(errbuf)),
                     0);
    assert_int_equal(c->n_warnings, 0);
    cfg_free(c);
}

static void test_container(void **state)
{
    (void)state;
    /* qdrouterd 0.x's container: its attributes are the router's */
    cfg_t *c = conf_ok("container {\n containerName: Q\n workerThreads: 3\n debugDump: /tmp/d\n"
                       " saslConfigPath: /etc/sasl2\n saslConfigName: q\n}\nrouter {\n id: R\n}\n");
    assert_string_equal(c->router.id, "R");
    assert_int_equal(c->router.worker_threads, 3);
    assert_string_equal(c->router.sasl_config_dir, "/etc/sasl2");
    assert_string_equal(c->router.sasl_config_name, "q");
    one_warning(c, "t.conf: line 1: entity 0 (container): the 'container' entity is deprecated, "
                   "use 'router' instead (its workerThreads, debugDump (debugDumpFile), "
                   "saslConfigPath (saslConfigDir) and saslConfigName are the router's now; "
                   "containerName is not used)");
    cfg_free(c);
    /* before or after the router; the router's own value wins */
    c = conf_ok("router {\n id: R\n workerThreads: 2\n}\ncontainer {\n workerThreads: 5\n}\n");
    assert_int_equal(c->router.worker_threads, 2);
    cfg_free(c);
    /* without a router: the router is made of it */
    c = conf_ok("container {\n worker-threads: 4\n}\n");
    assert_int_equal(c->router.worker_threads, 4);
    assert_int_equal(c->n_warnings, 2); /* the old spelling, then the entity */
    cfg_free(c);
    /* its values are checked as the router's, at their line */
    conf_err("container {\n workerThreads: 999\n}\n",
             "t.conf: line 2: entity 0 (router): attribute 'workerThreads': expected an integer "
             "from 1 to 254, got \"999\"");
    conf_err("container {\n colour: red\n}\n",
             "t.conf: line 2: entity 0 (container): attribute 'colour': unknown attribute");
    conf_err("container {\n}\ncontainer {\n}\n",
             "t.conf: line 3: entity 1 (container): a second container entity (entity 0 is the "
             "container already)");
}

static void test_fixed_address(void **state)
{
    (void)state;
    static const struct {
        const char         *attrs;
        cfg_distribution_t  dist;
        const char         *name;
    } cases[] = {
        {"", CFG_DIST_MULTICAST, "multicast"},
        {" fanout: multiple\n", CFG_DIST_MULTICAST, "multicast"},
        {" fanout: single\n", CFG_DIST_CLOSEST, "closest"},
        {" fanout: single\n bias: closest\n", CFG_DIST_CLOSEST, "closest"},
        {" fanout: single\n bias: spread\n", CFG_DIST_BALANCED, "balanced"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char text[256], want[512];
        snprintf(text, sizeof(text), "fixed-address {\n prefix: queue\n%s}\n", cases[i].attrs);
        cfg_t *c = conf_ok(text);
        assert_int_equal(c->n_addresses, 1);
        assert_string_equal(c->addresses[0].prefix, "queue");
        assert_int_equal(c->addresses[0].distribution, cases[i].dist);
        snprintf(want, sizeof(want),
                 "t.conf: line 1: entity 0 (fixedAddress): the 'fixedAddress' entity is "
                 "deprecated, use an 'address' with prefix \"queue\" and distribution \"%s\" "
                 "instead",
                 cases[i].name);
        one_warning(c, want);
        cfg_free(c);
    }
    conf_err("fixedAddress {\n prefix: q\n phase: 1\n}\n",
             "t.conf: line 3: entity 0 (fixedAddress): attribute 'phase': Junction does not "
             "support phase (address phases) yet");
    cfg_t *c = conf_ok("fixed-address {\n prefix: /\n fanout: single\n}\n");
    assert_int_equal(c->n_addresses, 0);
    one_warning(c, "t.conf: line 1: entity 0 (fixedAddress): the 'fixedAddress' entity is "
                   "deprecated, and one with prefix \"/\" configures nothing (qdrouterd 0.8 "
                   "ignored it too): remove it");
    cfg_free(c);
    conf_err("fixedAddress {\n fanout: single\n}\n",
             "t.conf: line 1: entity 0 (fixedAddress): attribute 'prefix': required, but not "
             "given");
    /* the address it makes is checked like any other: same prefix twice */
    conf_err("address {\n prefix: q\n}\nfixedAddress {\n prefix: q\n}\n",
             "t.conf: line 5: entity 1 (fixedAddress): attribute 'prefix': entity 0 configures "
             "the same pattern (\"q/#\") already");
}

static void test_unsupported_entity_tables(void **state)
{
    (void)state;
    /* every deprecationName of qdrouterd 1.19's schema, on the entities Junction refuses for
     * now, already maps to its modern attribute */
    static const struct {
        const char *type, *old, *modern;
    } names[] = {
        {"linkRoute", "dir", "direction"},
        {"autoLink", "addr", "address"},
        {"autoLink", "dir", "direction"},
        {"autoLink", "externalAddr", "externalAddress"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const cfg__type_table_t *t = cfg__unsupported_table(names[i].type);
        assert_non_null(t);
        assert_non_null(t->defs);
        int a = cfg__attr_find(t->defs, t->n_defs, names[i].old);
        assert_true(a > 0);
        assert_true(t->defs[a].deprecated);
        assert_string_equal(t->defs[t->defs[a].alias_of].name, names[i].modern);
    }
    /* connector (which Junction builds now): its deprecated names map to the modern ones */
    static const struct {
        const char *old, *modern;
    } cn_names[] = {{"verifyHostName", "verifyHostname"},
                    {"logMessage", "messageLoggingComponents"},
                    {"failoverList", "failoverUrls"},
                    {"addr", "host"}};
    assert_null(cfg__unsupported_table("connector"));
    for (size_t i = 0; i < sizeof(cn_names) / sizeof(cn_names[0]); i++) {
        int a = cfg__attr_find(cfg__connector_attrs, CN_N, cn_names[i].old);
        assert_true(a > 0);
        assert_true(cfg__connector_attrs[a].deprecated);
        assert_string_equal(cfg__connector_attrs[cfg__connector_attrs[a].alias_of].name,
                            cn_names[i].modern);
    }
    /* sslProfile (which Junction builds now): its deprecated names, and one without a
     * successor name */
    static const struct {
        const char *old, *modern;
    } ssl_names[] = {{"certDb", "caCertFile"},
                     {"keyFile", "privateKeyFile"},
                     {"displayNameFile", "uidNameMappingFile"}};
    assert_null(cfg__unsupported_table("sslProfile"));
    for (size_t i = 0; i < sizeof(ssl_names) / sizeof(ssl_names[0]); i++) {
        int a = cfg__attr_find(cfg__ssl_profile_attrs, S_N, ssl_names[i].old);
        assert_true(a > 0 && cfg__ssl_profile_attrs[a].deprecated);
        assert_string_equal(cfg__ssl_profile_attrs[cfg__ssl_profile_attrs[a].alias_of].name,
                            ssl_names[i].modern);
    }
    int a = cfg__attr_find(cfg__ssl_profile_attrs, S_N, "passwordFile");
    assert_true(a > 0 && cfg__ssl_profile_attrs[a].deprecated &&
                cfg__ssl_profile_attrs[a].alias_of == 0);
    assert_non_null(strstr(cfg__ssl_profile_attrs[a].instead, "file:"));
    /* authServicePlugin (which Junction builds now) */
    assert_null(cfg__unsupported_table("authServicePlugin"));
    a = cfg__attr_find(cfg__auth_plugin_attrs, AP_N, "saslInitHostname");
    assert_true(a > 0 && cfg__auth_plugin_attrs[a].deprecated);
    assert_string_equal(cfg__auth_plugin_attrs[cfg__auth_plugin_attrs[a].alias_of].name, "realm");
    a = cfg__attr_find(cfg__auth_plugin_attrs, AP_N, "authSslProfile");
    assert_true(a > 0 && cfg__auth_plugin_attrs[a].deprecated);
    assert_string_equal(cfg__auth_plugin_attrs[cfg__auth_plugin_attrs[a].alias_of].name,
                        "sslProfile");
    cfg_t *ap = conf_ok("sslProfile {\n name: t\n}\nauthServicePlugin {\n name: auth\n "
                        "authService: [::1]:5671\n saslInitHostname: r\n authSslProfile: t\n}\n"
                        "listener {\n port: 0\n saslPlugin: auth\n}\n");
    assert_int_equal(ap->n_auth_plugins, 1);
    assert_string_equal(ap->auth_plugins[0].host, "::1");
    assert_int_equal(ap->auth_plugins[0].port_number, 5671);
    assert_string_equal(ap->auth_plugins[0].realm, "r");
    assert_string_equal(ap->auth_plugins[0].ssl_profile, "t");
    assert_string_equal(ap->listeners[0].sasl_plugin, "auth");
    assert_true(ap->n_warnings >= 3); /* authService, saslInitHostname, authSslProfile */
    cfg_free(ap);
    /* an edge router's uplink */
    cfg_t *ed = conf_ok("router {\n mode: edge\n}\nconnector {\n addr: a\n port: 5672\n"
                        " role: edge\n}\n");
    assert_int_equal(ed->connectors[0].conn.role, CFG_ROLE_EDGE);
    cfg_free(ed);
    /* linkRoute loads (its 0.x `dir` with a warning); the checks qdrouterd's CREATE makes */
    cfg_t *lr = conf_ok("listener {\n port: 0\n role: route-container\n}\n"
                        "linkRoute {\n prefix: q\n dir: in\n containerId: b\n"
                        " addExternalPrefix: x.\n}\n");
    assert_int_equal(lr->listeners[0].role, CFG_ROLE_ROUTE_CONTAINER);
    assert_int_equal(lr->n_link_routes, 1);
    assert_string_equal(lr->link_routes[0].prefix, "q");
    assert_string_equal(lr->link_routes[0].direction, "in");
    assert_string_equal(lr->link_routes[0].container_id, "b");
    assert_string_equal(lr->link_routes[0].add_prefix, "x.");
    assert_null(lr->link_routes[0].connection);
    assert_int_equal(lr->n_warnings, 1);
    cfg_free(lr);
    conf_err("linkRoute {\n prefix: q\n}\n",
             "t.conf: line 1: entity 0 (linkRoute): attribute 'direction': required (in: client "
             "senders, out: client receivers)");
    conf_err("linkRoute {\n prefix: q\n pattern: q.#\n direction: out\n}\n",
             "t.conf: line 1: entity 0 (linkRoute): attributes 'prefix' and 'pattern': expected "
             "one of them, got both");
    conf_err("linkRoute {\n prefix: q\n direction: out\n connection: c\n containerId: b\n}\n",
             "t.conf: line 1: entity 0 (linkRoute): attributes 'connection' and 'containerId': "
             "expected at most one of them, got both");
    conf_err("linkRoute {\n prefix: q\n direction: out\n distribution: closest\n}\n",
             "t.conf: line 4: entity 0 (linkRoute): attribute 'distribution': expected one of "
             "linkBalanced, got \"closest\"");
    conf_err("vhost {\n id: $default\n allowUnknownUser: yes\n}\n",
             "t.conf: line 1: entity 0 (vhost): attribute 'allowUnknownUser': true needs a "
             "'$default' group (the settings of unknown users)");
}

static void test_service_names(void **state)
{
    (void)state;
    cfg_t *c = conf_ok("listener {\n port: amqps\n}\nlistener {\n port: amqp\n host: ::1\n}\n");
    assert_int_equal(cfg_port_number(c->listeners[0].port), 5671);
    assert_int_equal(cfg_port_number(c->listeners[1].port), 5672);
    cfg_free(c);
    conf_err("listener {\n port: no-such-service-here\n}\n",
             "t.conf: line 2: entity 0 (listener): attribute 'port': expected a port number "
             "from 0 to 65535 or a service name, got \"no-such-service-here\"");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entities_and_values),
        cmocka_unit_test(test_comments_and_hash_values),
        cmocka_unit_test(test_blanks_and_line_ends),
        cmocka_unit_test(test_value_text),
        cmocka_unit_test(test_map_attributes),
        cmocka_unit_test(test_structure_errors),
        cmocka_unit_test(test_dialect_by_content),
        cmocka_unit_test(test_lines_in_messages),
        cmocka_unit_test(test_shipped_examples),
        cmocka_unit_test(test_deprecated_attributes),
        cmocka_unit_test(test_old_spellings),
        cmocka_unit_test(test_container),
        cmocka_unit_test(test_fixed_address),
        cmocka_unit_test(test_unsupported_entity_tables),
        cmocka_unit_test(test_service_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
