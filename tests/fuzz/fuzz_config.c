/* tests/fuzz/fuzz_config.c: libFuzzer target for the configuration loader (config/config.c,
 * config/conf.c, config/names.c).
 *
 * Input: the text of a configuration file (any bytes; it need not be NUL-terminated), in
 * either dialect: the loader picks JSON or qdrouterd's `.conf` by content.  The loader must
 * either succeed - and then every listener and address it returns holds values within the
 * documented ranges, and every warning is one line - or fail with one non-empty line in err,
 * never crash or leak.  A second load of the same text must give the same verdict and the
 * same message (the loader is a pure function of the text; only a random router id may
 * differ).  Every input also goes to the `.conf` reader directly, so that JSON inputs
 * exercise it too: it must give a list of [type, {attributes}] pairs or one line with a line
 * number within the text.
 * Seeds: tests/fuzz/config/corpus (the example configurations in both dialects, the system
 * tests' configurations, the `.conf` dialect's quirks and hand-made broken ones).
 * Threads: libFuzzer's, one at a time. */
#include "config/config.h"
#include "config/config_int.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const cfg_t *cfg)
{
    for (size_t i = 0; i < cfg->n_listeners; i++) {
        const cfg_listener_t *l = &cfg->listeners[i];
        if (!l->port || !l->host || l->max_frame_size < 512 || l->max_sessions < 1 ||
            l->max_sessions > 32768 || l->link_capacity < 1 || cfg_port_number(l->port) < 0 ||
            l->idle_timeout_seconds > UINT32_MAX / 1000 || l->max_senders < 1 ||
            l->max_receivers < 1 || l->max_unsettled < 1 || l->max_unsettled > l->link_capacity ||
            l->handshake_timeout_seconds > UINT32_MAX / 1000)
            abort();
    }
    for (size_t i = 0; i < cfg->n_addresses; i++) {
        const cfg_address_t *a = &cfg->addresses[i];
        if ((a->prefix == NULL) == (a->pattern == NULL))
            abort();
    }
    if (!cfg->router.id || strpbrk(cfg->router.id, " \t\r\n"))
        abort();
    for (size_t i = 0; i < cfg->n_listeners; i++)
        if (!cfg->listeners[i].max_message_size_set &&
            cfg->listeners[i].max_message_size != cfg->policy.max_message_size)
            abort(); /* a listener without its own limit has the policy's */
    if (cfg->router.shutdown_grace_seconds > 3600)
        abort();
    for (size_t i = 0; i < cfg->n_warnings; i++)
        if (!cfg->warnings[i][0] || strchr(cfg->warnings[i], '\n'))
            abort(); /* one line each */
}

/* The .conf reader alone: a list of pairs, or one line naming a line of the text. */
static void check_conf(const char *text)
{
    cJSON       *root = NULL;
    cfg__lines_t lines;
    int          line = -1;
    char         err[512] = "";
    int          n_lines = 1;

    for (const char *p = text; *p; p++)
        n_lines += *p == '\n' || (*p == '\r' && p[1] != '\n');
    cfg__lines_init(&lines);
    if (cfg__conf_parse(text, &root, &lines, &line, err, sizeof(err)) == 0) {
        const cJSON *pair;
        if (!cJSON_IsArray(root))
            abort();
        cJSON_ArrayForEach(pair, root)
        {
            if (!cJSON_IsArray(pair) || cJSON_GetArraySize(pair) != 2 ||
                !cJSON_IsString(pair->child) || !cJSON_IsObject(pair->child->next))
                abort();
            int l = cfg__lines_get(&lines, pair);
            if (l < 1 || l > n_lines)
                abort(); /* every entity has its line */
        }
        cJSON_Delete(root);
    } else if (!err[0] || strchr(err, '\n') || line < 1 || line > n_lines) {
        abort();
    }
    cfg__lines_fini(&lines);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    char err1[512] = "", err2[512] = "";
    cfg_t *a = NULL, *b = NULL;
    int rc1 = cfg_load_string(text, "fuzz.json", &a, err1, sizeof(err1));
    int rc2 = cfg_load_string(text, "fuzz.json", &b, err2, sizeof(err2));
    if ((rc1 == 0) != (rc2 == 0))
        abort(); /* same text, same verdict */
    if (rc1 != 0) {
        if (!err1[0] || strchr(err1, '\n') || strcmp(err1, err2) != 0)
            abort(); /* one line, the same each time */
    } else {
        check(a);
        if (a->n_listeners != b->n_listeners || a->n_addresses != b->n_addresses)
            abort();
    }
    cfg_free(a);
    cfg_free(b);
    check_conf(text);
    free(text);
    return 0;
}
