/* codec/frame.c: the frame guard (see frame.h) - a byte-stream state machine over protocol
 * headers and frames, with a full-depth value checker for performatives.
 * Any thread; one guard per connection; memory only from the caller's function, no logging. */
#include "codec/frame.h"

#include "codec/codec_int.h"
#include "codec/perf.h"

#include <string.h>

enum guard_state {
    G_PROTO = 0, /* gathering an 8-byte protocol header */
    G_FRAME,     /* gathering an 8-byte frame header */
    G_EXT,       /* skipping the extended header */
    G_PERF,      /* gathering the performative */
    G_PAYLOAD,   /* counting payload bytes */
};

#define MAX_DEPTH 32

/* ---- values, all the way down ----
 *
 * The rule (codec/DESIGN.md, "Work bounded by bytes"): a value may hold at most one value per
 * byte of its encoding, counting itself and every element of every list, map and array,
 * nested ones included, and every described value with its descriptor.  A value that carries
 * its own format code takes at least that byte, so only the elements of an array whose
 * constructor is zero-width (null, true, false, uint0, ulong0, list0, or a described one of
 * those) can break the rule: an array32 of 2^32-1 nulls is 10 bytes long.  Checking the rule
 * makes the walk proportional to the bytes, and it bounds what Proton (pn_data, one node per
 * value) builds from what we pass: refusing such an array is the point, not just skipping it
 * fast.  Fixed-width elements are counted without a loop; every loop below consumes at least
 * one byte per turn. */

/* The walk over one value (or a sequence of them): the values it may still hold. */
typedef struct vwalk {
    size_t left; /* values still allowed: the bytes walked over, minus the values met */
    bool   over; /* the rule was broken (as opposed to a malformed encoding) */
} vwalk_t;

/* Count n more values; false once there are more values than bytes. */
static bool vwalk_take(vwalk_t *w, uint64_t n)
{
    if (n > w->left) {
        w->over = true;
        return false;
    }
    w->left -= (size_t)n;
    return true;
}

static const uint8_t *check_value(vwalk_t *w, const uint8_t *p, const uint8_t *end, int depth);

/* `count` elements of an array whose elements share the constructor `code` (no code byte
 * each), from p; they must end exactly at end.  Returns end, or NULL. */
static const uint8_t *check_array_elems(vwalk_t *w, uint8_t code, uint32_t count,
                                        const uint8_t *p, const uint8_t *end, int depth);

/* One value of constructor `code` whose code byte is already read: p is just past it. */
static const uint8_t *check_body(vwalk_t *w, uint8_t code, const uint8_t *p, const uint8_t *end,
                                 int depth)
{
    size_t n;
    switch (codec__class[code]) {
    case CODEC_CLASS_W0:
    case CODEC_CLASS_W1:
    case CODEC_CLASS_W2:
    case CODEC_CLASS_W4:
    case CODEC_CLASS_W8:
    case CODEC_CLASS_W16:
        n = codec__class_width[codec__class[code]];
        break;
    case CODEC_CLASS_VAR1:
        if (end - p < 1)
            return NULL;
        n = 1 + (size_t)p[0];
        break;
    case CODEC_CLASS_VAR4:
        if (end - p < 4)
            return NULL;
        n = 4 + (size_t)codec_be32(p);
        break;
    case CODEC_CLASS_COMPOUND1:
    case CODEC_CLASS_COMPOUND4:
    case CODEC_CLASS_ARRAY1:
    case CODEC_CLASS_ARRAY4: {
        if (depth > MAX_DEPTH)
            return NULL;
        bool four = codec__class[code] == CODEC_CLASS_COMPOUND4 ||
                    codec__class[code] == CODEC_CLASS_ARRAY4;
        size_t cw = four ? 4 : 1;
        if ((size_t)(end - p) < 2 * cw)
            return NULL;
        size_t size = four ? codec_be32(p) : p[0];
        uint32_t count = four ? codec_be32(p + cw) : p[cw];
        if (size < cw || size > (size_t)(end - p) - cw)
            return NULL;
        const uint8_t *q = p + 2 * cw;
        const uint8_t *bend = p + cw + size;
        if (codec__class[code] == CODEC_CLASS_COMPOUND1 ||
            codec__class[code] == CODEC_CLASS_COMPOUND4) {
            if ((code == CODEC_CODE_MAP8 || code == CODEC_CODE_MAP32) && (count & 1))
                return NULL;
            /* each element has its code byte: the loop ends by the size whatever the count */
            for (uint32_t i = 0; i < count; i++)
                if (!(q = check_value(w, q, bend, depth + 1)))
                    return NULL;
            return q == bend ? q : NULL;
        }
        if (q >= bend)
            return NULL;
        uint8_t ec = *q++;
        if (ec == CODEC_CODE_DESCRIBED) {
            /* a described element constructor: its descriptor once, for every element */
            if (q >= bend || *q == CODEC_CODE_DESCRIBED)
                return NULL;
            if (!(q = check_value(w, q, bend, depth + 1)) || q >= bend)
                return NULL;
            ec = *q++;
        }
        if (codec__class[ec] == CODEC_CLASS_BAD || codec__class[ec] == CODEC_CLASS_DESCRIBED)
            return NULL;
        return check_array_elems(w, ec, count, q, bend, depth + 1);
    }
    default:
        return NULL;
    }
    return (size_t)(end - p) >= n ? p + n : NULL;
}

static const uint8_t *check_array_elems(vwalk_t *w, uint8_t code, uint32_t count,
                                        const uint8_t *p, const uint8_t *end, int depth)
{
    /* the elements are values too: counted before any is walked, so a count that the bytes
     * cannot pay for is refused at once */
    if (!vwalk_take(w, count))
        return NULL;
    uint8_t cls = codec__class[code];
    if (cls >= CODEC_CLASS_W0 && cls <= CODEC_CLASS_W16) {
        /* fixed width: the elements fill the rest exactly, nothing to walk */
        return (uint64_t)count * codec__class_width[cls] == (uint64_t)(end - p) ? end : NULL;
    }
    /* variable or compound elements: each takes at least its size field */
    for (uint32_t i = 0; i < count; i++)
        if (!(p = check_body(w, code, p, end, depth)))
            return NULL;
    return p == end ? p : NULL;
}

static const uint8_t *check_value(vwalk_t *w, const uint8_t *p, const uint8_t *end, int depth)
{
    if (p >= end || depth > MAX_DEPTH || !vwalk_take(w, 1))
        return NULL;
    uint8_t code = *p;
    switch (codec__class[code]) {
    case CODEC_CLASS_BAD:
        return NULL;
    case CODEC_CLASS_DESCRIBED: {
        const uint8_t *q = p + 1;
        if (q >= end || *q == CODEC_CODE_DESCRIBED)
            return NULL; /* a descriptor is not itself described */
        if (!(q = check_value(w, q, end, depth + 1)))
            return NULL;
        return check_value(w, q, end, depth + 1);
    }
    default:
        return check_body(w, code, p + 1, end, depth);
    }
}

/* Check the value at p[0, len): its length, or CODEC_INVALID (*over says whether the rule of
 * one value per byte was what failed). */
static long value_check(const uint8_t *p, size_t len, bool *over)
{
    vwalk_t        w = {.left = len, .over = false};
    const uint8_t *q = check_value(&w, p, p + len, 0);
    if (over)
        *over = w.over;
    return q ? (long)(q - p) : CODEC_INVALID;
}

long codec_value_check(const uint8_t *p, size_t len)
{
    return value_check(p, len, NULL);
}

int codec_values_check(const uint8_t *p, size_t len)
{
    vwalk_t        w = {.left = len, .over = false};
    const uint8_t *end = p + len;
    while (p < end)
        if (!(p = check_value(&w, p, end, 0)))
            return CODEC_INVALID;
    return 0;
}

/* ---- performatives ---- */

static int fail(codec_guard_t *g, const char *why)
{
    g->failed = true;
    g->why = why;
    return CODEC_INVALID;
}

/* Deliveries in progress are kept per link: (channel, handle), since every session numbers
 * its handles from 0. */
static uint64_t inprog_key(uint16_t channel, uint32_t handle)
{
    return (uint64_t)channel << 32 | handle;
}

static bool inprog_find(const codec_guard_t *g, uint64_t key, uint32_t *at)
{
    for (uint32_t i = 0; i < g->n_inprog; i++) {
        if (g->inprog[i] == key) {
            *at = i;
            return true;
        }
    }
    return false;
}

static void inprog_remove(codec_guard_t *g, uint32_t at)
{
    g->inprog[at] = g->inprog[--g->n_inprog];
    if (g->n_inprog == 0) {
        /* no delivery in progress: an idle connection holds nothing here */
        g->inprog = g->mem(g->inprog, 0);
        g->inprog_cap = 0;
    }
}

/* A detach ends its link's delivery in progress, an end every one of its session's, a close
 * all: a link attached later on the same handle starts afresh, and its first transfer needs
 * a delivery-id (PROTON-2853). */
static void inprog_forget(codec_guard_t *g, uint32_t channel, bool all_handles, uint32_t handle)
{
    for (uint32_t i = g->n_inprog; i-- > 0;) {
        uint64_t k = g->inprog[i];
        bool ours = (k >> 32) == channel && (all_handles || (uint32_t)k == handle);
        if (channel == UINT32_MAX || ours)
            inprog_remove(g, i);
    }
}

static int check_transfer(codec_guard_t *g, const codec_perf_t *f)
{
    uint32_t handle, id, at = 0;
    if (!codec_perf_uint(f, 0, &handle))
        return fail(g, "transfer: handle is missing or not a uint");
    bool has_id = codec_perf_uint(f, 1, &id);
    if (!has_id && !codec_perf_null(f, 1))
        return fail(g, "transfer: delivery-id is not a uint");
    if (!codec_perf_null(f, 2) && !codec_perf_is(f, 2, CODEC_CODE_VBIN8, CODEC_CODE_VBIN32))
        return fail(g, "transfer: delivery-tag is not binary");
    int more = codec_perf_bool(f, 5);
    int aborted = codec_perf_bool(f, 9);
    if (more == -2 || aborted == -2 || codec_perf_bool(f, 4) == -2)
        return fail(g, "transfer: a boolean field has another type");
    uint64_t key = inprog_key(g->channel, handle);
    bool in = inprog_find(g, key, &at);
    if (!in && !has_id)
        return fail(g, "transfer: the first transfer of a delivery has no delivery-id");
    bool continues = more == 1 && aborted != 1;
    if (continues && !in) {
        if (g->n_inprog == CODEC_GUARD_MAX_INPROG)
            return fail(g, "transfer: too many deliveries in progress on one connection");
        if (g->n_inprog == g->inprog_cap) {
            g->inprog_cap = g->inprog_cap ? 2 * g->inprog_cap : 4;
            g->inprog = g->mem(g->inprog, g->inprog_cap * sizeof(*g->inprog));
        }
        g->inprog[g->n_inprog++] = key;
    } else if (!continues && in) {
        inprog_remove(g, at);
    }
    return 0;
}

static int check_perf(codec_guard_t *g, const uint8_t *b, uint32_t len, bool has_payload,
                      codec_perf_t *f)
{
    bool over = false;
    if (value_check(b, len, &over) < 0)
        return fail(g, over ? "a performative claims more values than it has bytes"
                            : "a performative is not a well-formed AMQP value");
    if (codec_perf_read(f, b, len) != 0) /* validated above: cannot fail */
        return fail(g, "a performative's fields do not fill its list");
    int code = f->code;
    if (g->layer == 1 && g->client) {
        /* sasl-mechanisms, sasl-challenge, sasl-outcome */
        if (code != 0x40 && code != 0x42 && code != 0x44)
            return fail(g, "SASL frame is not sasl-mechanisms, sasl-challenge or sasl-outcome");
        if (has_payload)
            return fail(g, "SASL frame carries a payload");
        return 0;
    }
    if (g->layer == 1) {
        if (code != 0x41 && code != 0x43)
            return fail(g, "SASL frame is not sasl-init or sasl-response");
        if (code == 0x41 && !codec_perf_is(f, 0, CODEC_CODE_SYM8, CODEC_CODE_SYM32))
            return fail(g, "sasl-init: mechanism is missing or not a symbol");
        if (has_payload)
            return fail(g, "SASL frame carries a payload");
        return 0;
    }
    if (code < 0x10 || code > 0x18)
        return fail(g, "frame body is not an AMQP performative");
    if (has_payload && code != 0x14)
        return fail(g, "only a transfer may carry a payload");
    uint32_t u;
    switch (code) {
    case 0x10: /* open */
        if (!codec_perf_is(f, 0, CODEC_CODE_STR8, CODEC_CODE_STR32))
            return fail(g, "open: container-id is missing or not a string");
        break;
    case 0x11: /* begin */
        if (!codec_perf_null(f, 0) && !(*f->field[0] == 0x60))
            return fail(g, "begin: remote-channel is not a ushort");
        if (!codec_perf_uint(f, 1, &u) || !codec_perf_uint(f, 2, &u) || !codec_perf_uint(f, 3, &u))
            return fail(g, "begin: a mandatory window field is missing or not a uint");
        break;
    case 0x12: /* attach */
        if (!codec_perf_is(f, 0, CODEC_CODE_STR8, CODEC_CODE_STR32))
            return fail(g, "attach: name is missing or not a string");
        if (!codec_perf_uint(f, 1, &u))
            return fail(g, "attach: handle is missing or not a uint");
        if (codec_perf_bool(f, 2) < 0)
            return fail(g, "attach: role is missing or not a boolean");
        break;
    case 0x13: /* flow */
        if (!codec_perf_uint(f, 1, &u) || !codec_perf_uint(f, 2, &u) || !codec_perf_uint(f, 3, &u))
            return fail(g, "flow: a mandatory window field is missing or not a uint");
        if (!codec_perf_null(f, 4) && !codec_perf_uint(f, 4, &u))
            return fail(g, "flow: handle is not a uint");
        break;
    case 0x14:
        return check_transfer(g, f);
    case 0x15: /* disposition */
        if (codec_perf_bool(f, 0) < 0)
            return fail(g, "disposition: role is missing or not a boolean");
        if (!codec_perf_uint(f, 1, &u))
            return fail(g, "disposition: first is missing or not a uint");
        if (!codec_perf_null(f, 2) && !codec_perf_uint(f, 2, &u))
            return fail(g, "disposition: last is not a uint");
        break;
    case 0x16: /* detach */
        if (!codec_perf_uint(f, 0, &u))
            return fail(g, "detach: handle is missing or not a uint");
        inprog_forget(g, g->channel, false, u);
        break;
    case 0x17: /* end: only optional fields */
        inprog_forget(g, g->channel, true, 0);
        break;
    default: /* close: only optional fields */
        inprog_forget(g, UINT32_MAX, true, 0);
        break;
    }
    return 0;
}

/* ---- split mode (frame.h) ---- */

/* The frame header Proton gets for the current frame: no extended header, `body` bytes
 * after it. */
static void frame_header(const codec_guard_t *g, uint8_t h[8], uint32_t body)
{
    codec_be32_put(h, 8 + body);
    h[4] = 2;
    h[5] = g->layer;
    h[6] = (uint8_t)(g->channel >> 8);
    h[7] = (uint8_t)g->channel;
}

static void split_header(codec_guard_t *g, uint32_t body)
{
    uint8_t h[8];
    frame_header(g, h, body);
    g->sink->proton(g->sink->ctx, h, 8);
}

/* A checked frame's header and performative go to Proton; its payload (payload_len bytes,
 * still to come) goes beside, described first; attach, detach, end and close are reported. */
static int split_frame(codec_guard_t *g, const uint8_t *perf, uint32_t perf_len,
                       const codec_perf_t *f, uint32_t payload_len)
{
    uint32_t handle = 0, id = 0;
    const codec_guard_sink_t *s = g->sink;
    if (g->layer == 0 && f->code == 0x14) {
        /* a transfer's frame goes to Proton once its payload is all there (the caller's
         * business: Proton must not see a delivery complete before its bytes are) */
        uint8_t h[8];
        frame_header(g, h, perf_len);
        codec_perf_uint(f, 0, &handle);
        bool id_present = codec_perf_uint(f, 1, &id);
        g->whole = s->transfer(s->ctx, g->channel, handle, id_present, id,
                               codec_perf_bool(f, 5) == 1, codec_perf_bool(f, 9) == 1,
                               payload_len, h, perf, perf_len);
        if (g->whole) { /* the frame as it came (without an extended header) */
            split_header(g, perf_len + payload_len);
            s->proton(s->ctx, perf, perf_len);
        }
        return 0;
    }
    split_header(g, perf_len);
    s->proton(s->ctx, perf, perf_len);
    if (g->layer != 0)
        return 0;
    switch (f->code) {
    case 0x12: { /* attach: name, handle and role were checked */
        const uint8_t *name = NULL;
        size_t         len = 0;
        const char    *why = "attach refused";
        codec_perf_bytes(f, 0, &name, &len);
        codec_perf_uint(f, 1, &handle);
        if (s->attach(s->ctx, g->channel, handle, codec_perf_bool(f, 2) == 1, name, len, &why))
            return fail(g, why);
        break;
    }
    case 0x16:
        codec_perf_uint(f, 0, &handle);
        s->detach(s->ctx, g->channel, handle);
        break;
    case 0x17:
        s->end(s->ctx, g->channel);
        break;
    case 0x18:
        s->end(s->ctx, 0xffff);
        break;
    default:
        break;
    }
    return 0;
}

void codec_guard_set_sink(codec_guard_t *g, const codec_guard_sink_t *sink)
{
    g->sink = sink;
}

uint32_t codec_guard_payload_left(const codec_guard_t *g)
{
    return g->state == G_PAYLOAD ? g->frame_left : 0;
}

/* ---- the stream ---- */

void codec_guard_init(codec_guard_t *g, uint32_t max_frame, codec_guard_mem_fn mem)
{
    memset(g, 0, sizeof(*g));
    g->state = G_PROTO;
    g->max_frame = max_frame < 512 ? 512 : max_frame;
    g->mem = mem;
}

/* Give back the performative's memory once it has been checked (or refused). */
static void perf_release(codec_guard_t *g)
{
    if (g->heap) {
        g->heap = g->mem(g->heap, 0);
        g->heap_cap = 0;
    }
}

void codec_guard_fini(codec_guard_t *g)
{
    perf_release(g);
    if (g->inprog)
        g->inprog = g->mem(g->inprog, 0);
    g->inprog_cap = 0;
    g->n_inprog = 0;
}

size_t codec_guard_mem_bytes(const codec_guard_t *g)
{
    return (size_t)g->heap_cap + (size_t)g->inprog_cap * sizeof(*g->inprog);
}

/* Room for `need` bytes of the performative (need <= perf_len once it is known): in `small`
 * while it fits, else in memory grown as the bytes arrive (doubling, capped at the
 * performative's length), so a frame that claims a large performative and then trickles costs
 * what actually arrived. */
static uint8_t *perf_room(codec_guard_t *g, uint32_t need)
{
    if (!g->heap && need <= sizeof(g->small))
        return g->small;
    if (need > g->heap_cap) {
        uint64_t cap = g->heap_cap ? g->heap_cap : 2 * sizeof(g->small);
        while (cap < need)
            cap *= 2;
        if (g->perf_len && cap > g->perf_len)
            cap = g->perf_len;
        bool first = !g->heap;
        g->heap = g->mem(g->heap, (size_t)cap);
        g->heap_cap = (uint32_t)cap;
        if (first)
            memcpy(g->heap, g->small, g->buf_len);
    }
    return g->heap;
}

static const uint8_t AMQP_HDR[8] = {'A', 'M', 'Q', 'P', 0, 1, 0, 0};
static const uint8_t SASL_HDR[8] = {'A', 'M', 'Q', 'P', 3, 1, 0, 0};

static int end_protocol_header(codec_guard_t *g)
{
    if (memcmp(g->hdr, AMQP_HDR, 8) == 0)
        g->layer = 0;
    else if (memcmp(g->hdr, SASL_HDR, 8) == 0)
        g->layer = 1;
    else
        g->passthrough = true; /* Proton answers with its own header and closes */
    if (g->sink)
        g->sink->proton(g->sink->ctx, g->hdr, 8);
    g->state = G_FRAME;
    g->hdr_len = 0;
    return 0;
}

static int end_frame_header(codec_guard_t *g)
{
    const uint8_t *h = g->hdr;
    if (g->layer == 1 && memcmp(h, "AMQP", 4) == 0) {
        /* after SASL, the client's AMQP protocol header */
        return end_protocol_header(g);
    }
    uint32_t size = codec_be32(h);
    uint32_t doff = h[4];
    uint8_t type = h[5];
    g->hdr_len = 0;
    if (size < 8)
        return fail(g, "frame size is smaller than its header");
    if (size > g->max_frame)
        return fail(g, "frame is larger than the maximum frame size");
    if (doff < 2 || doff * 4u > size)
        return fail(g, "frame data offset is out of range");
    if (type != g->layer)
        return fail(g, g->layer ? "expected a SASL frame" : "expected an AMQP frame");
    g->frames++;
    g->channel = (uint16_t)(h[6] << 8 | h[7]);
    g->frame_left = size - 8;
    g->ext_left = doff * 4u - 8;
    if (g->frame_left == 0) {
        if (g->layer == 1)
            return fail(g, "empty SASL frame");
        g->state = G_FRAME; /* heartbeat */
        if (g->sink)
            split_header(g, 0);
        return 0;
    }
    g->state = g->ext_left ? G_EXT : G_PERF;
    g->buf_len = 0;
    g->perf_len = 0;
    if (g->state == G_PERF && g->frame_left == g->ext_left)
        g->state = G_FRAME;
    return 0;
}

int codec_guard_feed(codec_guard_t *g, const uint8_t *p, size_t n)
{
    if (g->failed)
        return CODEC_INVALID;
    while (n > 0 && !g->passthrough) {
        switch (g->state) {
        case G_PROTO:
        case G_FRAME: {
            size_t take = 8 - g->hdr_len;
            if (take > n)
                take = n;
            memcpy(g->hdr + g->hdr_len, p, take);
            g->hdr_len += (uint32_t)take;
            p += take;
            n -= take;
            if (g->hdr_len < 8)
                return 0;
            int rc = g->state == G_PROTO ? end_protocol_header(g) : end_frame_header(g);
            if (rc)
                return rc;
            break;
        }
        case G_EXT: {
            size_t take = g->ext_left < n ? g->ext_left : n;
            g->ext_left -= (uint32_t)take;
            g->frame_left -= (uint32_t)take;
            p += take;
            n -= take;
            if (g->ext_left == 0)
                g->state = g->frame_left ? G_PERF : G_FRAME;
            if (g->state == G_FRAME && g->sink)
                split_header(g, 0); /* only an extended header: an empty frame */
            break;
        }
        case G_PERF: {
            /* until its length is known, gather only what can tell it (at most 15 bytes:
             * 0x00 0x80 ulong + list32 size), so a transfer's payload is never copied */
            size_t want = g->perf_len ? g->perf_len - g->buf_len
                                      : (g->buf_len < 15 ? 15 - g->buf_len : 1);
            size_t take = want < n ? want : n;
            if (take > g->frame_left)
                take = g->frame_left;
            /* the frame header capped the frame at max_frame, so take fits a uint32_t */
            uint8_t *buf = perf_room(g, g->buf_len + (uint32_t)take);
            memcpy(buf + g->buf_len, p, take);
            g->buf_len += (uint32_t)take;
            g->frame_left -= (uint32_t)take;
            p += take;
            n -= take;
            int code = 0;
            if (!g->perf_len) {
                long len = codec_perf_length(buf, g->buf_len, &code);
                if (len == CODEC_INVALID)
                    return fail(g, "frame body does not start with a described list");
                if (len == CODEC_PARTIAL) {
                    if (g->frame_left == 0)
                        return fail(g, "performative ends after its frame");
                    break;
                }
                if ((uint64_t)len > (uint64_t)g->buf_len + g->frame_left)
                    return fail(g, "performative ends after its frame");
                g->perf_len = (uint32_t)len;
                /* give back what we took beyond the performative */
                if (g->buf_len > g->perf_len) {
                    uint32_t extra = g->buf_len - g->perf_len;
                    g->buf_len = g->perf_len;
                    g->frame_left += extra;
                    p -= extra;
                    n += extra;
                }
            }
            if (g->buf_len < g->perf_len)
                break;
            codec_perf_t f;
            int rc = check_perf(g, buf, g->perf_len, g->frame_left > 0, &f);
            if (rc == 0 && g->sink)
                rc = split_frame(g, buf, g->perf_len, &f, g->frame_left);
            perf_release(g);
            if (rc)
                return rc;
            g->state = g->frame_left ? G_PAYLOAD : G_FRAME;
            break;
        }
        case G_PAYLOAD: {
            size_t take = g->frame_left < n ? g->frame_left : n;
            g->frame_left -= (uint32_t)take;
            if (g->sink && g->whole)
                g->sink->proton(g->sink->ctx, p, take);
            else if (g->sink)
                g->sink->payload(g->sink->ctx, p, take);
            p += take;
            n -= take;
            if (g->frame_left == 0)
                g->state = G_FRAME;
            break;
        }
        default:
            return fail(g, "guard state is corrupt");
        }
    }
    if (n > 0 && g->sink) /* after an unknown protocol header: Proton answers it */
        g->sink->proton(g->sink->ctx, p, n);
    return 0;
}
