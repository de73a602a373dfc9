/* tests/fuzz/fuzz_config.c: libFuzzer target for the configuration loader (config/config.c).
 *
 * Input: the text of a configuration file (any bytes; it need not be NUL-terminated).  The
 * loader must either succeed - and then every listener and address it returns holds values
 * within the documented ranges - or fail with one non-empty line in err, never crash or
 * leak.  A second load of the same text must give the same verdict and the same message
 * (the loader is a pure function of the text; only a random router id may differ).
 * Seeds: tests/fuzz/config/corpus (the example configurations, the system tests' configurations
 * and hand-made broken ones).  Threads: libFuzzer's, one at a time. */
#include "config/config.h"

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
    free(text);
    return 0;
}
