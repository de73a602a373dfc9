/* tests/unit/core/routing/rt_compose.c: write one routing-protocol message, encoded by
 * core/routing/msg.c, to stdout - for the system test that has a real qdrouterd 1.19 read
 * what Junction writes (tests/system/test_interrouter_codec.py).
 *
 * Usage: rt_compose OP TO ID [KEY=VALUE]... [absolute]
 *   OP     HELLO RA LSU LSR MAU MAR
 *   KEY    instance, ls_seq, mobile_seq, have_seq (integers); seen, add, del, exist (comma-
 *          separated ids or keys); peers (id:cost,...); hints (comma-separated integers)
 *   absolute   an absolute MAU (exist + hints) instead of a differential one
 * Exits 0 after writing the bytes, 2 on a usage error.
 */
#include "core/base/base.h"
#include "core/routing/msg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ITEMS 64

/* Split "a,b,c" (in place) into views; returns the count. */
static uint32_t split(char *s, codec_bytes_t *out)
{
    uint32_t n = 0;
    for (char *t = strtok(s, ","); t && n < MAX_ITEMS; t = strtok(NULL, ","))
        out[n++] = (codec_bytes_t){(const uint8_t *)t, strlen(t)};
    return n;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: rt_compose OP TO ID [KEY=VALUE]... [absolute]\n");
        return 2;
    }
    static codec_bytes_t ids[MAX_ITEMS], dels[MAX_ITEMS], hint_txt[MAX_ITEMS];
    static int64_t       values[MAX_ITEMS];
    core_rt_out_t        o = {.op = core_rt_op_parse((const uint8_t *)argv[1], strlen(argv[1])),
                              .to = argv[2],
                              .id = {(const uint8_t *)argv[3], strlen(argv[3])},
                              .ids = ids,
                              .values = values,
                              .dels = dels};
    if (o.op == CORE_RT_OP_NONE) {
        fprintf(stderr, "rt_compose: unknown opcode %s\n", argv[1]);
        return 2;
    }
    for (int i = 4; i < argc; i++) {
        char *eq = strchr(argv[i], '=');
        if (strcmp(argv[i], "absolute") == 0) {
            o.absolute = true;
            continue;
        }
        if (!eq) {
            fprintf(stderr, "rt_compose: bad argument %s\n", argv[i]);
            return 2;
        }
        *eq = 0;
        const char *k = argv[i];
        char       *v = eq + 1;
        if (strcmp(k, "instance") == 0)
            o.instance = strtoll(v, NULL, 10);
        else if (strcmp(k, "ls_seq") == 0)
            o.ls_seq = strtoll(v, NULL, 10);
        else if (strcmp(k, "mobile_seq") == 0)
            o.mobile_seq = strtoll(v, NULL, 10);
        else if (strcmp(k, "have_seq") == 0)
            o.have_seq = strtoll(v, NULL, 10);
        else if (strcmp(k, "seen") == 0 || strcmp(k, "add") == 0 || strcmp(k, "exist") == 0)
            o.n_ids = split(v, ids);
        else if (strcmp(k, "del") == 0)
            o.n_dels = split(v, dels);
        else if (strcmp(k, "hints") == 0) {
            uint32_t n = split(v, hint_txt);
            for (uint32_t j = 0; j < n; j++)
                values[j] = strtoll((const char *)hint_txt[j].ptr, NULL, 10);
        } else if (strcmp(k, "peers") == 0) {
            o.n_ids = split(v, ids);
            for (uint32_t j = 0; j < o.n_ids; j++) {
                char *colon = strchr((char *)ids[j].ptr, ':');
                values[j] = colon ? strtoll(colon + 1, NULL, 10) : 1;
                if (colon)
                    ids[j].len = (size_t)(colon - (const char *)ids[j].ptr);
            }
        } else {
            fprintf(stderr, "rt_compose: unknown key %s\n", k);
            return 2;
        }
    }
    core_rt_buf_t b = {0};
    if (core_rt_msg_encode(&o, &b) != 0) {
        fprintf(stderr, "rt_compose: cannot encode\n");
        return 2;
    }
    fwrite(b.ptr, 1, b.len, stdout);
    core_rt_buf_fini(&b);
    return 0;
}
