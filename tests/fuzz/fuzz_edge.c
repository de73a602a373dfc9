/* tests/fuzz/fuzz_edge.c: libFuzzer target for the bodies of an edge connection's own messages
 * (router/edgemsg.c): the address-tracking message an interior sends an edge ([hash key,
 * bool]), which the edge parses, and the heartbeat an edge sends.
 *
 * Input: a message's bytes, parsed as a tracking message; whatever parses must have a
 * non-empty key without a NUL, and encode again to a message that parses to the same key and
 * flag.  The same input is then taken as a key (all but the first byte; the first byte's low
 * bit is the flag) to encode and parse back, and its first four bytes as a heartbeat counter,
 * whose message must decode to that int.  Seeds: tests/fuzz/edge/gen_corpus.py (tracking
 * messages of the shape qdrouterd's interiors send and heartbeats, as Proton-Python encodes
 * them, the malformed bodies of test_edge.py's bad-tracking test, and each cut short). */
#include "router/edgemsg.h"

#include <proton/codec.h>
#include <proton/message.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Encode key/dest, parse it back: it must come back the same. */
static void round_trip(const char *key, bool dest)
{
    size_t   len = 0;
    uint8_t *msg = rtr_edgemsg_track_encode(key, dest, &len);
    if (!msg)
        abort();
    bool  dest2 = !dest;
    char *key2 = rtr_edgemsg_track_parse(msg, len, &dest2);
    if (!key2 || strcmp(key, key2) != 0 || dest2 != dest)
        abort();
    free(key2);
    free(msg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bool  dest = false;
    char *key = rtr_edgemsg_track_parse(data, size, &dest);
    if (key) {
        if (!key[0])
            abort();
        round_trip(key, dest);
        free(key);
    }
    /* the input as a key */
    if (size >= 2 && !memchr(data + 1, 0, size - 1)) {
        char *k = malloc(size);
        if (!k)
            abort();
        memcpy(k, data + 1, size - 1);
        k[size - 1] = '\0';
        round_trip(k, data[0] & 1);
        free(k);
    }
    /* a heartbeat */
    uint32_t seq = 0;
    memcpy(&seq, data, size < sizeof(seq) ? size : sizeof(seq));
    uint8_t hb[RTR_EDGEMSG_HB_LEN];
    rtr_edgemsg_heartbeat(seq, hb);
    pn_message_t *m = pn_message();
    if (pn_message_decode(m, (const char *)hb, sizeof(hb)) != 0)
        abort();
    pn_data_t *body = pn_message_body(m);
    pn_data_rewind(body);
    if (!pn_data_next(body) || pn_data_type(body) != PN_INT ||
        (uint32_t)pn_data_get_int(body) != seq)
        abort();
    pn_message_free(m);
    return 0;
}
