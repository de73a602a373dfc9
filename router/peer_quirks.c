/* router/peer_quirks.c: recognising a peer with known quirks from its open, and stripping
 * delivery annotations from messages sent to it (see peer_quirks.h, docs/brokers.md and
 * docs/decisions/0007).
 *
 * Thread suffixes: _WT = the worker of the connection named.  The filters have no suffix:
 * they touch only the caller's memory.
 */
#include "router/peer_quirks.h"

#include <proton/codec.h>
#include <string.h>

/* RabbitMQ 3.10's AMQP 1.0 plugin (docs/brokers.md R6, R9, R13, R15, R18). */
#define RABBITMQ_QUIRKS                                                                            \
    (RTR_QUIRK_NO_MODIFIED | RTR_QUIRK_NO_DA | RTR_QUIRK_NO_DRAIN | RTR_QUIRK_NO_RCV_SECOND |     \
     RTR_QUIRK_CREDIT_OVERRUN)

static bool bytes_are(pn_bytes_t b, const char *s)
{
    size_t n = strlen(s);
    return b.size == n && b.start && memcmp(b.start, s, n) == 0;
}

/* A string or symbol's bytes at d's current node, or {0, NULL}. */
static pn_bytes_t text_at(pn_data_t *d)
{
    switch (pn_data_type(d)) {
    case PN_SYMBOL:
        return pn_data_get_symbol(d);
    case PN_STRING:
        return pn_data_get_string(d);
    default:
        return pn_bytes(0, NULL);
    }
}

unsigned rtr_peer_quirks_WT(pn_connection_t *pc)
{
    pn_data_t *d = pn_connection_remote_properties(pc);
    if (!d)
        return RTR_QUIRK_NONE;
    unsigned q = RTR_QUIRK_NONE;
    pn_data_rewind(d);
    if (pn_data_next(d) && pn_data_type(d) == PN_MAP && pn_data_enter(d)) {
        while (pn_data_next(d)) {
            bool product = bytes_are(text_at(d), "product");
            if (!pn_data_next(d))
                break;
            if (product && bytes_are(text_at(d), "RabbitMQ"))
                q |= RABBITMQ_QUIRKS;
        }
        pn_data_exit(d);
    }
    pn_data_rewind(d);
    return q;
}

/* ---------------------------------------------------------------- delivery annotations */

enum {
    DA_HEAD = 0, /* reading a section's start into held[] */
    DA_PASS,     /* passing the rest of a header section (`left` bytes) */
    DA_SKIP,     /* dropping the rest of the delivery annotations (`left` bytes) */
    DA_DONE,     /* past them: everything else passes */
};

#define SECTION_HEADER 0x70
#define SECTION_DA     0x71
#define SECTION_OTHER  0xff

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The section code a descriptor symbol names (only the two the filter acts on). */
static uint8_t code_of_name(const uint8_t *p, size_t n)
{
    static const char header[] = "amqp:header:list";
    static const char da[] = "amqp:delivery-annotations:map";
    if (n == sizeof(header) - 1 && memcmp(p, header, n) == 0)
        return SECTION_HEADER;
    if (n == sizeof(da) - 1 && memcmp(p, da, n) == 0)
        return SECTION_DA;
    return SECTION_OTHER;
}

/* Read a section's start in p[0, n): returns 1 with its code (SECTION_OTHER for one the
 * filter does not act on, whose size it does not need) and, for a header or delivery
 * annotations, its whole length from its 0x00 on; 0 when more bytes are needed; -1 when p
 * does not start a section the filter can read. */
static int section_head(const uint8_t *p, size_t n, uint8_t *code, uint64_t *total)
{
    if (n == 0)
        return 0;
    if (p[0] != 0x00)
        return -1;
    if (n < 2)
        return 0;
    size_t i;
    switch (p[1]) {
    case 0x53: /* smallulong */
        if (n < 3)
            return 0;
        *code = p[2];
        i = 3;
        break;
    case 0x80: /* ulong */
        if (n < 10)
            return 0;
        *code = p[2] | p[3] | p[4] | p[5] | p[6] | p[7] | p[8] ? SECTION_OTHER : p[9];
        i = 10;
        break;
    case 0xa3: /* sym8 */
        if (n < 3)
            return 0;
        if (n < 3u + p[2])
            return 3u + p[2] + 5 > RTR_DA_STRIP_HELD_MAX ? -1 : 0;
        *code = code_of_name(p + 3, p[2]);
        i = 3u + p[2];
        break;
    case 0xb3: { /* sym32 */
        if (n < 6)
            return 0;
        uint32_t len = be32(p + 2);
        if (6u + len + 5 > RTR_DA_STRIP_HELD_MAX)
            return -1; /* longer than any name the filter acts on */
        if (n < 6u + len)
            return 0;
        *code = code_of_name(p + 6, len);
        i = 6u + len;
        break;
    }
    default:
        return -1;
    }
    if (*code != SECTION_HEADER && *code != SECTION_DA) {
        *code = SECTION_OTHER;
        return 1;
    }
    if (n < i + 1)
        return 0;
    switch (p[i]) {
    case 0x40: /* null */
    case 0x45: /* list0 */
        *total = i + 1;
        return 1;
    case 0xc0: /* list8, map8 */
    case 0xc1:
        if (n < i + 2)
            return 0;
        *total = i + 2 + (uint64_t)p[i + 1];
        return 1;
    case 0xd0: /* list32, map32 */
    case 0xd1:
        if (n < i + 5)
            return 0;
        *total = i + 5 + (uint64_t)be32(p + i + 1);
        return 1;
    default:
        return -1;
    }
}

void rtr_da_strip_init(rtr_da_strip_t *s)
{
    memset(s, 0, sizeof(*s));
}

size_t rtr_da_strip(rtr_da_strip_t *s, const uint8_t *in, size_t n, uint8_t *out)
{
    size_t o = 0;
    while (n > 0) {
        switch (s->state) {
        case DA_DONE:
            memcpy(out + o, in, n);
            return o + n;
        case DA_PASS:
        case DA_SKIP: {
            size_t k = s->left < n ? (size_t)s->left : n;
            if (s->state == DA_PASS) {
                memcpy(out + o, in, k);
                o += k;
            }
            in += k;
            n -= k;
            s->left -= k;
            if (s->left == 0)
                s->state = s->state == DA_PASS ? DA_HEAD : DA_DONE;
            break;
        }
        default: { /* DA_HEAD: one byte at a time, at most RTR_DA_STRIP_HELD_MAX per section */
            s->held[s->n_held++] = *in++;
            n--;
            uint8_t  code = SECTION_OTHER;
            uint64_t total = 0;
            int      r = section_head(s->held, s->n_held, &code, &total);
            if (r == 0 && s->n_held < RTR_DA_STRIP_HELD_MAX)
                break;
            if (r == 1 && code == SECTION_DA) {
                s->left = total - s->n_held; /* the held bytes are dropped with the rest */
                s->state = s->left ? DA_SKIP : DA_DONE;
            } else {
                memcpy(out + o, s->held, s->n_held);
                o += s->n_held;
                if (r == 1 && code == SECTION_HEADER) {
                    s->left = total - s->n_held;
                    s->state = s->left ? DA_PASS : DA_HEAD;
                } else {
                    s->state = DA_DONE; /* the body or properties: the rest passes */
                }
            }
            s->n_held = 0;
            break;
        }
        }
    }
    return o;
}

size_t rtr_da_strip_end(rtr_da_strip_t *s, uint8_t *out)
{
    size_t n = s->n_held;
    memcpy(out, s->held, n);
    s->n_held = 0;
    s->state = DA_DONE;
    return n;
}

int rtr_quirk_cut(const uint8_t *p, size_t n, const uint8_t *cut, size_t cut_len,
                  codec_bytes_t out[2])
{
    /* as integers: p may point into a buffer other than the message cut is in */
    uintptr_t a = (uintptr_t)p, b = a + n, ca = (uintptr_t)cut, cb = ca + cut_len;
    int       k = 0;
    if (!n)
        return 0;
    if (!cut || !cut_len || ca >= b || cb <= a) {
        out[k++] = (codec_bytes_t){p, n};
        return k;
    }
    if (ca > a)
        out[k++] = (codec_bytes_t){p, (size_t)(ca - a)};
    if (cb < b)
        out[k++] = (codec_bytes_t){p + (cb - a), (size_t)(b - cb)};
    return k;
}
