/* tests/fuzz/fuzz_elk.c: libFuzzer target for the address lookup messages of link routes
 * through an edge (router/edge_lookup.c): the input as a request an edge sends an interior
 * and as a reply the interior sends back.  A request that decodes is answered (the reply
 * encoder runs on it) and that reply must decode to what was put in it; a reply that decodes
 * has a status in qdrouterd's range and, when it is not OK, no body values.  Seeds: the
 * request and replies a qdrouterd 1.19 edge and interior exchanged (router annotations
 * included), and Junction's own (tests/fuzz/elk/corpus). */
#include "router/edge_lookup.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    rtr_elk_req_t    q;
    const char      *why = NULL;
    rtr_elk_status_t st = rtr_elk_request_decode(data, size, &q, &why);
    if (st == RTR_ELK_OK) {
        if (!q.msg || why)
            abort();
        size_t     len = 0;
        uint8_t   *rep = rtr_elk_reply_encode(q.msg, RTR_ELK_OK, true, q.receiver, &len);
        pn_msgid_t id = pn_message_get_correlation_id(q.msg);
        if (rep) {
            char *cid = NULL;
            bool  lr = false, dest = false;
            int   rst = rtr_elk_reply_decode(rep, len, &cid, &lr, &dest);
            /* a string correlation-id comes back as it went */
            if (id.type == PN_STRING && !memchr(id.u.as_bytes.start, '\0', id.u.as_bytes.size) &&
                (rst != RTR_ELK_OK || !lr || dest != q.receiver || !cid ||
                 strlen(cid) != id.u.as_bytes.size ||
                 memcmp(cid, id.u.as_bytes.start, id.u.as_bytes.size) != 0))
                abort();
            free(cid);
            free(rep);
        }
        pn_message_free(q.msg);
    } else if (q.msg || !why || st > RTR_ELK_INVALID) {
        abort();
    }
    char *cid = NULL;
    bool  lr = true, dest = true;
    int   rst = rtr_elk_reply_decode(data, size, &cid, &lr, &dest);
    if (rst < -1 || rst > RTR_ELK_INVALID || (rst < 0 && cid) || (rst >= 0 && !cid) ||
        (rst != RTR_ELK_OK && (lr || dest)))
        abort();
    free(cid);
    return 0;
}
