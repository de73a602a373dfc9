/* tests/fuzz/fuzz_da_strip.c: libFuzzer target for the delivery-annotations filter
 * (router/peer_quirks.c) that link routes apply to messages sent to RabbitMQ.
 *
 * Input: a message's bytes.  The filter is fed the input whole, then again in pieces whose
 * sizes come from the input itself; both runs must give the same bytes (it is a pure function
 * of the byte stream, however it is split), never more than came in, and, when codec_scan()
 * reads the input as a valid message, exactly the input less its delivery-annotations
 * section.  Seeds: messages with and without a header and delivery annotations in each
 * descriptor form (tests/fuzz/da_strip/corpus). */
#include "codec/codec.h"
#include "router/peer_quirks.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Feed data to a new filter in pieces of sizes taken from `sizes` (0: whole); the result is
 * malloc'd into *out. */
static size_t run(const uint8_t *data, size_t size, const uint8_t *sizes, uint8_t **out)
{
    uint8_t       *o = malloc(size + RTR_DA_STRIP_HELD_MAX + 1);
    size_t         n = 0, off = 0, i = 0;
    rtr_da_strip_t s;
    if (!o)
        abort();
    rtr_da_strip_init(&s);
    while (off < size) {
        size_t k = sizes ? 1 + (size_t)(sizes[i++ % size] % 37) : size;
        if (k > size - off)
            k = size - off;
        size_t got = rtr_da_strip(&s, data + off, k, o + n);
        if (got > k + RTR_DA_STRIP_HELD_MAX)
            abort();
        n += got;
        off += k;
    }
    n += rtr_da_strip_end(&s, o + n);
    *out = o;
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *whole, *pieces;
    size_t   nw = run(data, size, NULL, &whole);
    size_t   np = run(data, size, data, &pieces);
    if (nw != np || memcmp(whole, pieces, nw) != 0 || nw > size)
        abort();
    codec_scan_t scan;
    const char  *why;
    if (codec_scan(data, size, true, &scan, &why) == 0) {
        const codec_range_t *da = &scan.delivery_annotations;
        if (nw != size - da->len || memcmp(whole, data, da->off) != 0 ||
            memcmp(whole + da->off, data + da->off + da->len, size - da->off - da->len) != 0)
            abort();
    }
    free(whole);
    free(pieces);
    return 0;
}
