/* router/edgemsg.c: an edge connection's tracking and heartbeat message bodies (see
 * edgemsg.h).
 *
 * Thread suffixes: none; every function works on the caller's memory (thread-safe).
 */
#include "router/edgemsg.h"

#include "codec/frame.h"
#include "core/base/base.h"

#include <proton/codec.h>
#include <proton/message.h>
#include <string.h>

void rtr_edgemsg_heartbeat(uint32_t seq, uint8_t out[RTR_EDGEMSG_HB_LEN])
{
    /* described amqp-value (0x00 0x53 0x77), an int (0x71), big-endian */
    out[0] = 0x00;
    out[1] = 0x53;
    out[2] = 0x77;
    out[3] = 0x71;
    out[4] = (uint8_t)(seq >> 24);
    out[5] = (uint8_t)(seq >> 16);
    out[6] = (uint8_t)(seq >> 8);
    out[7] = (uint8_t)seq;
}

uint8_t *rtr_edgemsg_track_encode(const char *key, bool dest, size_t *len)
{
    pn_message_t *m = pn_message();
    pn_data_t    *body = pn_message_body(m);
    pn_data_put_list(body);
    pn_data_enter(body);
    pn_data_put_string(body, pn_bytes(strlen(key), key));
    pn_data_put_bool(body, dest);
    pn_data_exit(body);
    size_t   cap = strlen(key) + 64;
    uint8_t *buf = base_malloc(cap);
    int      rc;
    while ((rc = pn_message_encode(m, (char *)buf, &cap)) == PN_OVERFLOW) {
        cap *= 2;
        buf = base_realloc(buf, cap);
    }
    pn_message_free(m);
    if (rc != 0) {
        free(buf);
        return NULL;
    }
    *len = cap;
    return buf;
}

char *rtr_edgemsg_track_parse(const uint8_t *msg, size_t len, bool *dest)
{
    /* Proton asserts that there are bytes to decode: a transfer without any (which an
     * interior can send) would abort the router; and it builds a node per value whatever
     * the bytes pay for, so they must pass the frame guard's rule first (codec/frame.h), as a
     * management request does */
    if (!msg || len == 0 || codec_values_check(msg, len) != 0)
        return NULL;
    pn_message_t *m = pn_message();
    char         *key = NULL;
    if (pn_message_decode(m, (const char *)msg, len) == 0) {
        pn_data_t *d = pn_message_body(m);
        pn_data_rewind(d);
        if (pn_data_next(d) && pn_data_type(d) == PN_LIST && pn_data_get_list(d) == 2) {
            pn_data_enter(d);
            if (pn_data_next(d) &&
                (pn_data_type(d) == PN_STRING || pn_data_type(d) == PN_SYMBOL)) {
                pn_bytes_t k = pn_data_type(d) == PN_STRING ? pn_data_get_string(d)
                                                            : pn_data_get_symbol(d);
                if (k.size > 0 && !memchr(k.start, 0, k.size) && pn_data_next(d) &&
                    pn_data_type(d) == PN_BOOL) {
                    *dest = pn_data_get_bool(d);
                    key = base_strndup(k.start, k.size);
                }
            }
            pn_data_exit(d);
        }
    }
    pn_message_free(m);
    return key;
}
