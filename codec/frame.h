/* codec/frame.h: the frame guard - checks every byte a client sends before Proton sees it.
 *
 * A router is a server that strangers send bytes to, and Proton-C 0.37 accepts malformed
 * performatives (a list whose size runs past its frame, unknown type codes) and still aborts
 * the process on some well-formed but out-of-order input (PROTON-2853: a transfer that starts
 * a multi-frame delivery without a delivery-id).  The guard follows the byte stream of one
 * connection - protocol headers, frame headers, performatives - and says "stop" at the first
 * byte that is not a well-formed AMQP 1.0 frame from a client:
 *
 *   protocol header  "AMQP" 0 1 0 0 (AMQP) or "AMQP" 3 1 0 0 (SASL); any other header is
 *                    passed through so that Proton answers it with its own and closes
 *   frame header     size:4 doff:1 type:1 channel:2   8 <= size <= max frame,
 *                    2 <= doff, doff*4 <= size, type 0 (AMQP layer) or 1 (SASL layer)
 *   performative     0x00 0x53|0x80 code, then a list (list0/list8/list32) every element of
 *                    which is a complete, well-formed value (checked all the way down, at
 *                    most 32 deep, and holding at most one value per byte: see below);
 *                    codes 0x10-0x18 in the AMQP layer, 0x41 / 0x43 (init, response) in SASL
 *   payload          only after a transfer
 *   fields           the mandatory fields of each performative are present with their type;
 *                    the first transfer of a delivery on a handle carries a delivery-id
 *
 * Work is bounded by the bytes (codec/DESIGN.md "Work bounded by bytes"): each value is walked
 * once, and a performative may hold at most one value per byte of its encoding.  Payload bytes
 * are counted, not copied; a performative longer than CODEC_GUARD_INLINE is gathered in memory
 * from the caller's function and given back once checked, so an idle guard holds nothing.
 * Threads: one guard belongs to one connection and is fed by that connection's thread.
 */
#ifndef JUNCTION_CODEC_FRAME_H
#define JUNCTION_CODEC_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Deliveries that may be in progress (more=true) at once on one connection. */
#define CODEC_GUARD_MAX_INPROG 256

/* Bytes of a performative gathered inside the guard itself (no memory from the caller). */
#define CODEC_GUARD_INLINE 64

/* The caller's memory: realloc(p, n) that never fails (it aborts instead), and with n == 0
 * frees p and returns NULL. */
typedef void *(*codec_guard_mem_fn)(void *p, size_t n);

/* Split mode (the zero-copy input, docs/decisions/0009): the guard hands on what it checked.
 * Every frame but a transfer goes to `proton` without its extended header (data offset 2).
 * A transfer goes to `transfer` instead: its frame header for Proton (size rewritten to the
 * header and performative only), its performative, and what the caller needs to know of it;
 * its payload (len bytes, 0 too) follows in `payload` calls.  The caller gives Proton the
 * transfer's header and performative, in their place in the stream, once it has the whole
 * payload: Proton must not see a delivery complete before its bytes are in hand.  A `transfer`
 * that returns true makes the guard pass that frame whole to `proton` instead (header,
 * performative and payload; a link the caller keeps on Proton's own path).  Protocol
 * headers go to `proton` as they are; after an unknown protocol header every byte does.
 * `attach` (a peer's attach: role true = the peer receives), `detach` and `end` (channel
 * 0xffff: a close, every channel) let the caller know which link a transfer's (channel,
 * handle) names.  A callback that returns non-zero fails the guard with `why` set to the
 * static string it put in *why.  Pointers given to `payload` point into the fed bytes. */
typedef struct codec_guard_sink {
    void *ctx;                                                      /* the callbacks' first argument */
    void (*proton)(void *ctx, const uint8_t *p, size_t n);          /* bytes for Proton, in order */
    int (*attach)(void *ctx, uint16_t channel, uint32_t handle, bool role, const uint8_t *name,
                  size_t name_len, const char **why);               /* a peer's attach */
    void (*detach)(void *ctx, uint16_t channel, uint32_t handle);   /* a peer's detach */
    void (*end)(void *ctx, uint16_t channel);                       /* end; 0xffff: close */
    bool (*transfer)(void *ctx, uint16_t channel, uint32_t handle, bool id_present, uint32_t id,
                     bool more, bool aborted, uint32_t len, const uint8_t hdr[8],
                     const uint8_t *perf, uint32_t perf_len); /* a transfer: its payload
                                   follows; true: pass this one whole to `proton` instead */
    void (*payload)(void *ctx, const uint8_t *p, size_t n);         /* the next payload bytes */
} codec_guard_sink_t;

typedef struct codec_guard {
    uint8_t     state;        /* where in the stream we are (frame.c) */
    uint8_t     layer;        /* 0 AMQP, 1 SASL: the frame type expected */
    bool        passthrough;  /* an unknown protocol header: Proton handles the rest */
    bool        failed;       /* a bad byte was seen; every later feed fails too */
    bool        client;       /* the router is the client (a connector's connection): the
                                 SASL frames expected are a server's (set after init) */
    uint8_t     hdr[8];       /* protocol or frame header being gathered */
    uint32_t    hdr_len;      /* its bytes so far */
    uint32_t    frame_left;   /* bytes of the current frame body not yet seen */
    uint32_t    ext_left;     /* extended-header bytes still to skip */
    codec_guard_mem_fn mem;   /* the caller's memory */
    uint8_t    *heap;         /* a performative longer than `small`, or NULL */
    uint32_t    heap_cap;     /* its size (<= the performative's length) */
    uint32_t    buf_len;      /* bytes gathered (in `small`, or in `heap` once it is there) */
    uint32_t    perf_len;     /* the performative's length once known, else 0 */
    uint32_t    max_frame;    /* largest frame accepted */
    uint32_t    n_inprog;     /* entries used in inprog */
    uint32_t    inprog_cap;   /* entries allocated (<= CODEC_GUARD_MAX_INPROG) */
    uint64_t   *inprog;       /* (channel << 32 | handle) of each link with a delivery in
                               * progress (caller's memory), or NULL */
    const char *why;          /* static reason once failed */
    uint64_t    frames;       /* frames checked (for tests and stats) */
    const codec_guard_sink_t *sink; /* split mode (above), or NULL: check only */
    uint16_t    channel;      /* the current frame's channel */
    bool        whole;        /* split mode: the current transfer's payload goes to Proton */
    uint8_t     small[CODEC_GUARD_INLINE]; /* a short performative, gathered in place */
} codec_guard_t;

/* Start a guard for a server connection; mem gives it memory for long performatives and
 * deliveries in progress (see above).  codec_guard_fini() gives that memory back. */
void codec_guard_init(codec_guard_t *g, uint32_t max_frame, codec_guard_mem_fn mem);
void codec_guard_fini(codec_guard_t *g);

/* Split mode from now on (sink non-NULL), or check only (NULL); before the first feed. */
void codec_guard_set_sink(codec_guard_t *g, const codec_guard_sink_t *sink);

/* The payload bytes of the current frame still to come (0 when not in a payload). */
uint32_t codec_guard_payload_left(const codec_guard_t *g);

/* Bytes of the caller's memory the guard holds now: 0 when idle; at most the performative
 * being gathered (<= max_frame) plus 4 bytes per delivery in progress. */
size_t codec_guard_mem_bytes(const codec_guard_t *g);

/* Check the next n bytes the client sent.  Returns 0 when they may go to Proton, or
 * CODEC_INVALID (and g->why) at the first bad byte - the connection must then be closed
 * without feeding Proton any of these bytes. */
int codec_guard_feed(codec_guard_t *g, const uint8_t *p, size_t n);

/* Validate one complete AMQP value at the start of p[0, len) all the way down (every element
 * of every list, map and array, at most 32 deep), holding at most `len` values in all (see
 * above); returns its length, or CODEC_INVALID.  Thread-safe; reads nothing outside p[0, len). */
long codec_value_check(const uint8_t *p, size_t len);

/* Validate that p[0, len) is a sequence of complete values, as codec_value_check() checks each,
 * holding at most `len` values in all: what must be true of bytes before Proton decodes them
 * (pn_message_decode, pn_data_decode).  Returns 0 or CODEC_INVALID.  Thread-safe. */
int codec_values_check(const uint8_t *p, size_t len);

#endif
