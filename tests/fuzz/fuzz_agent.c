/* tests/fuzz/fuzz_agent.c: libFuzzer target for the management request decoder and its
 * operations (router/mgmt/node.c, ops.c, amqp.c).
 *
 * Input: the encoded bytes of one request message, as the agent receives them.  Each input
 * is answered twice by one agent state (a request must never leave the state unusable: the
 * second answer must exist exactly when the first did), then a known good QUERY must still
 * get its 200.  Hooks accept everything (listeners get made-up ids), so CREATE/DELETE paths
 * run too.  Seeds: tests/fuzz/agent/corpus (gen_corpus.py: what qdstat and qdmanage send, and
 * malformed variants).  Single-threaded. */
#include "router/mgmt/mgmt.h"

#include "core/base/log.h"
#include "core/core.h"

#include <proton/codec.h>
#include <proton/message.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static long next_id;
static long h_listener_add(void *ctx, const cfg_listener_t *lc, char *err, size_t errlen)
{
    (void)ctx, (void)lc, (void)err, (void)errlen;
    return ++next_id;
}

static mgmt_node_t *agent(void)
{
    static mgmt_node_t *m;
    static cfg_t *cfg;
    static stats_registry_t *reg;
    static core_stats_t st;
    if (m)
        return m;
    char err[256];
    if (cfg_load_string("[[\"router\", {\"id\": \"F\"}], [\"listener\", {\"port\": \"0\"}],"
                        " [\"address\", {\"prefix\": \"q\"}]]",
                        "fuzz", &cfg, err, sizeof(err)) != 0)
        abort();
    reg = stats_registry_new();
    if (core_stats_families_new(reg, &st) != 0)
        abort();
    base_log_set_mask(BASE_LOG_MOD_DEFAULT, 0); /* quiet: UPDATE log may turn modules on */
    base_log_finish_config();
    mgmt_hooks_t hooks = {.listener_add = h_listener_add};
    m = mgmt_node_new(cfg, reg, NULL, &hooks);
    return m;
}

static int answer(mgmt_node_t *m, const uint8_t *data, size_t size)
{
    uint8_t *out = NULL;
    size_t len = 0;
    char *to = NULL;
    const char *why = NULL;
    int rc = mgmt_amqp_handle(m, data, size, &out, &len, &to, &why);
    if (rc == 0 && (!out || !len || !to))
        abort();
    if (rc != 0 && (!why || out))
        abort();
    free(out);
    free(to);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mgmt_node_t *m = agent();
    int first = answer(m, data, size);
    if (answer(m, data, size) != first)
        abort(); /* decoding does not depend on the state */
    /* the state is still usable */
    static uint8_t good[512];
    static size_t good_len;
    if (!good_len) {
        pn_message_t *q = pn_message();
        pn_message_set_reply_to(q, "r");
        pn_data_t *p = pn_message_properties(q);
        pn_data_put_map(p);
        pn_data_enter(p);
        pn_data_put_string(p, pn_bytes(9, "operation"));
        pn_data_put_string(p, pn_bytes(5, "QUERY"));
        pn_data_put_string(p, pn_bytes(10, "entityType"));
        pn_data_put_string(p, pn_bytes(6, "router"));
        pn_data_exit(p);
        good_len = sizeof(good);
        if (pn_message_encode(q, (char *)good, &good_len) != 0)
            abort();
        pn_message_free(q);
    }
    if (answer(m, good, good_len) != 0)
        abort();
    return 0;
}
