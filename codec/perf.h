/* codec/perf.h: reading an AMQP performative's fields, and frame headers, from bytes already
 * known to be well-formed.
 *
 * Two readers need the same few fields: the frame guard (codec/frame.h), which has checked a
 * peer's performative all the way down before it reads it, and the zero-copy writer
 * (router/zc_out.c), which follows Proton's own output (well-formed by construction) to find
 * which link a frame names.  This reader does not validate a value's contents: it locates
 * the list's elements by their encoded sizes (codec__value_skip) and decodes the few types
 * the performatives' routing fields use.  It never reads outside the bytes it is given.
 *
 * Byte layout (AMQP 1.0 part 2, 2.3 and 2.7):
 *
 *   frame header   size:4 doff:1 type:1 channel:2    size counts the header; doff in 4-byte
 *                                                    words (2: no extended header); type 0
 *                                                    AMQP, 1 SASL
 *   performative   0x00 0x53 code                    descriptor: smallulong, or
 *                  0x00 0x80 0 0 0 0 0 0 0 code      ulong (the high bytes zero)
 *                  then 0x45 list0 | 0xc0 list8 size:1 count:1 | 0xd0 list32 size:4 count:4,
 *                  then `count` values, the fields in order
 *   fields read    attach 0x12     0 name (string), 1 handle (uint), 2 role (boolean:
 *                                  true = receiver)
 *                  transfer 0x14   0 handle, 1 delivery-id (uint), 2 delivery-tag (binary),
 *                                  5 more, 9 aborted (booleans)
 *                  detach 0x16     0 handle
 *
 *   uint           0x43 uint0 | 0x52 smalluint v:1 | 0x70 uint v:4
 *   boolean        0x41 true | 0x42 false | 0x56 boolean v:1
 *
 * Nothing here allocates or keeps state; everything is thread-safe.
 */
#ifndef JUNCTION_CODEC_PERF_H
#define JUNCTION_CODEC_PERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Fields of a performative located at most (the routing fields are among the first 12). */
#define CODEC_PERF_FIELDS 12

/* A performative's list elements, located once. */
typedef struct codec_perf {
    int            code;                      /* descriptor low byte (0x10 open .. 0x18 close,
                                                 0x40 .. 0x44 SASL) */
    uint32_t       len;                       /* bytes of descriptor and list */
    uint32_t       count;                     /* list elements */
    const uint8_t *field[CODEC_PERF_FIELDS];  /* the first ones; NULL past count, or past the
                                                 bytes given (codec_perf_read) */
} codec_perf_t;

/* A big-endian uint32 at p[0, 4), and the same written. */
static inline uint32_t codec_be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void codec_be32_put(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* The length of the performative at b[0, n) (descriptor and list, from the list's header
 * alone), *code set to its descriptor's low byte.  CODEC_PARTIAL when n is too short to tell,
 * CODEC_INVALID when it is not a described list. */
long codec_perf_length(const uint8_t *b, size_t n, int *code);

/* Locate the fields of the performative at b[0, n).  n may stop short of its end (the rest
 * not here yet): fields that do not end within b[0, n) are left NULL, as if absent.  Returns 0,
 * CODEC_PARTIAL when descriptor and list header are not all there, CODEC_INVALID when they
 * are not a described list or a field's encoding does not fit its list. */
int codec_perf_read(codec_perf_t *f, const uint8_t *b, size_t n);

/* Field i is absent or null. */
bool codec_perf_null(const codec_perf_t *f, int i);
/* Field i as a uint: false when it is absent, null or another type. */
bool codec_perf_uint(const codec_perf_t *f, int i, uint32_t *v);
/* Field i as a boolean: -1 absent or null, 0 false, 1 true, -2 another type. */
int codec_perf_bool(const codec_perf_t *f, int i);
/* Field i is present with format code c8 or c32 (the 1- and 4-byte size forms of a type). */
bool codec_perf_is(const codec_perf_t *f, int i, uint8_t c8, uint8_t c32);
/* Field i as a string, symbol or binary: its bytes (pointing into the performative). */
bool codec_perf_bytes(const codec_perf_t *f, int i, const uint8_t **p, size_t *len);

#endif
