/* tests/fuzz/fuzz_frame.c: libFuzzer target for the frame guard (codec/frame.c).
 *
 * Input: the bytes a client sends on a fresh connection.  The guard is fed the input whole,
 * then again in pieces whose sizes come from the input itself; both runs must agree
 * (the guard is a pure function of the byte stream, however it is split), and a guard that
 * refused once must refuse every later feed.  Every input is checked twice so: by a server's
 * guard (the bytes a client sends), and by a client's guard (`client`: a connector's
 * connection, the bytes a server sends, whose SASL frames are a server's).  Seeds: Proton's
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

static void check(const uint8_t *data, size_t size, bool client)
{
    codec_guard_t whole, pieces;
    codec_guard_init(&whole, 16384, fuzz_mem);
    codec_guard_init(&pieces, 16384, fuzz_mem);
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
