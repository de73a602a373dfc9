/* tests/fuzz/fuzz_frame.c: libFuzzer target for the frame guard (codec/frame.c).
 *
 * Input: the bytes a client sends on a fresh connection.  The guard is fed the input whole,
 * then again in pieces whose sizes come from the input itself; both runs must agree
 * (the guard is a pure function of the byte stream, however it is split), and a guard that
 * refused once must refuse every later feed.  Every input is checked twice so: by a server's
 * guard (the bytes a client sends), and by a client's guard (`client`: a connector's
 * connection, the bytes a server sends, whose SASL frames are a server's).  Both guards run in
 * split mode (the zero-copy input, router/zin.h): what they hand on - the bytes for Proton,
 * each transfer's frame and description, the payload bytes, the link reports - must be the
 * same however the input was split, and each transfer's payload exactly its length.  Seeds: Proton's
 * public connection-driver fuzz inputs (tests/fuzz/frame/corpus, crashes). */
#include "codec/codec.h"
#include "codec/frame.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The guard's memory (realloc that aborts on failure). */
static void *fuzz_mem(void *p, size_t n)
{
    if (n == 0) {
        free(p);
        return NULL;
    }
    void *q = realloc(p, n);
    if (!q)
        abort();
    return q;
}

/* What a split-mode guard handed on, hashed (FNV-1a over each stream of bytes, so a stream
 * cut in pieces hashes as the whole). */
typedef struct rec {
    uint64_t proton;   /* bytes for Proton */
    uint64_t xfer;     /* transfers: frame, performative, fields */
    uint64_t payload;  /* payload bytes */
    uint64_t links;    /* attach, detach, end reports */
    uint32_t left;     /* payload bytes the current transfer still owes */
} rec_t;

static void fnv(uint64_t *h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        *h = (*h ^ b[i]) * 1099511628211ull;
}

static void rec_proton(void *ctx, const uint8_t *p, size_t n)
{
    fnv(&((rec_t *)ctx)->proton, p, n);
}

static int rec_attach(void *ctx, uint16_t channel, uint32_t handle, bool role,
                      const uint8_t *name, size_t len, const char **why)
{
    rec_t *r = ctx;
    (void)why;
    uint32_t v[3] = {channel, handle, role};
    fnv(&r->links, v, sizeof(v));
    fnv(&r->links, name, len);
    return 0;
}

static void rec_detach(void *ctx, uint16_t channel, uint32_t handle)
{
    uint32_t v[3] = {1, channel, handle};
    fnv(&((rec_t *)ctx)->links, v, sizeof(v));
}

static void rec_end(void *ctx, uint16_t channel)
{
    uint32_t v[2] = {2, channel};
    fnv(&((rec_t *)ctx)->links, v, sizeof(v));
}

static bool rec_transfer(void *ctx, uint16_t channel, uint32_t handle, bool id_present,
                         uint32_t id, bool more, bool aborted, uint32_t len,
                         const uint8_t hdr[8], const uint8_t *perf, uint32_t perf_len)
{
    rec_t *r = ctx;
    if (r->left)
        abort(); /* a transfer before the last one's payload was all handed on */
    uint32_t v[7] = {channel, handle, id_present, id, more, aborted, len};
    fnv(&r->xfer, v, sizeof(v));
    fnv(&r->xfer, hdr, 8);
    fnv(&r->xfer, perf, perf_len);
    uint32_t size = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
    if (size != 8 + perf_len)
        abort(); /* the frame Proton gets holds exactly the header and performative */
    r->left = len;
    return false;
}

static void rec_payload(void *ctx, const uint8_t *p, size_t n)
{
    rec_t *r = ctx;
    if (n == 0 || n > r->left)
        abort(); /* more payload than the transfer's frame holds */
    r->left -= (uint32_t)n;
    fnv(&r->payload, p, n);
}

static void check(const uint8_t *data, size_t size, bool client)
{
    codec_guard_t whole, pieces;
    rec_t         rw = {0}, rp = {0};
    codec_guard_sink_t sw = {.ctx = &rw, .proton = rec_proton, .attach = rec_attach,
                             .detach = rec_detach, .end = rec_end, .transfer = rec_transfer,
                             .payload = rec_payload};
    codec_guard_sink_t sp = sw;
    sp.ctx = &rp;
    codec_guard_init(&whole, 16384, fuzz_mem);
    codec_guard_init(&pieces, 16384, fuzz_mem);
    codec_guard_set_sink(&whole, &sw);
    codec_guard_set_sink(&pieces, &sp);
    whole.client = pieces.client = client;

    int rc_whole = codec_guard_feed(&whole, data, size);

    int rc_pieces = 0;
    size_t off = 0, i = 0;
    while (off < size && rc_pieces == 0) {
        size_t n = 1 + (data[i++ % size] % 37);
        if (n > size - off)
            n = size - off;
        rc_pieces = codec_guard_feed(&pieces, data + off, n);
        off += n;
    }
    if ((rc_whole == 0) != (rc_pieces == 0))
        abort(); /* the verdict must not depend on how the bytes were split */
    if (rc_whole == 0 && (rw.proton != rp.proton || rw.xfer != rp.xfer ||
                          rw.payload != rp.payload || rw.links != rp.links || rw.left != rp.left))
        abort(); /* nor what was handed on */
    if (rc_whole != 0 && (codec_guard_feed(&whole, data, 1) == 0 || !whole.why))
        abort(); /* a refusal sticks and says why */
    /* memory is bounded by one frame and the deliveries in progress */
    if (codec_guard_mem_bytes(&whole) > 16384 + 4 * CODEC_GUARD_MAX_INPROG ||
        codec_guard_mem_bytes(&pieces) > 16384 + 4 * CODEC_GUARD_MAX_INPROG)
        abort();
    codec_guard_fini(&whole);
    codec_guard_fini(&pieces);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check(data, size, false);
    check(data, size, true);
    return 0;
}
