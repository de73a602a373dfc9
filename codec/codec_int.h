/* codec/codec_int.h: private to codec/ (and to its unit tests and fuzz target).
 *
 * The AMQP 1.0 format codes the codec knows, the table that sorts them into size classes,
 * the error texts that codec_scan() reports through *why, and the layouts of everything
 * codec_compose_prefix() encodes.  Nothing here allocates or keeps state; everything is
 * safe on any thread.
 *
 * Byte layouts (AMQP 1.0 part 1, 1.6; all multi-byte integers are big-endian):
 *
 *   encoding        bytes
 *   --------------  -----------------------------------------------------------------
 *   fixed width     code [w bytes]                 w = 0 (0x4_), 1 (0x5_), 2 (0x6_),
 *                                                      4 (0x7_), 8 (0x8_), 16 (0x9_)
 *   variable 1      code size:1 [size bytes]       0xa0 vbin8, 0xa1 str8, 0xa3 sym8
 *   variable 4      code size:4 [size bytes]       0xb0 vbin32, 0xb1 str32, 0xb3 sym32
 *   compound 1      code size:1 count:1 [size-1 bytes: count elements]
 *                                                  0xc0 list8, 0xc1 map8 (count = 2*pairs)
 *   compound 4      code size:4 count:4 [size-4 bytes: count elements]
 *                                                  0xd0 list32, 0xd1 map32
 *   array 1         code size:1 count:1 ctor [size-1-|ctor| bytes: count elements,
 *                                                  each WITHOUT its own code]   0xe0 array8
 *   array 4         code size:4 count:4 ctor [...]                  0xf0 array32
 *   described       0x00 descriptor value          descriptor: any value that is not itself
 *                                                  described (symbol or ulong in practice)
 *
 *   `size` counts the bytes after the size field (so it includes the count field); a
 *   compound's `count` elements must fill exactly `size - |count|` bytes.
 *
 * What codec_compose_prefix() writes (into the caller's scratch buffer):
 *
 *   message-annotations section header (3 + 3 or 3 + 9 bytes)
 *   offset  size  value
 *        0     1  0x00                        described type
 *        1     1  0x53                        smallulong descriptor
 *        2     1  0x72                        message-annotations
 *        3     1  0xc1 map8 | 0xd1 map32      map8 when size <= 255 and count <= 255
 *        4   1|4  size                        bytes after this field: count field + pairs
 *      5|8   1|4  count                       2 * (user pairs + router pairs)
 *
 *   then the input's user pairs verbatim (iovs into the message), then the router trailer,
 *   whose pairs come in this order, each present only when there is a value to write:
 *
 *   pair              key (sym8)                      value
 *   ----------------  ------------------------------  ---------------------------------------
 *   phase             0xa3 0x0e "x-opt-qd.phase"      smallint 0x54 v:1 | int 0x71 v:4
 *   stream            0xa3 0x0f "x-opt-qd.stream"     smallint 0x54 v:1 | int 0x71 v:4
 *   to                0xa3 0x0b "x-opt-qd.to"         str8 0xa1 len:1 | str32 0xb1 len:4, bytes
 *   ingress           0xa3 0x10 "x-opt-qd.ingress"    str8 | str32 as for `to`
 *   trace             0xa3 0x0e "x-opt-qd.trace"      list8 0xc0 size:1 count:1 | list32 0xd0
 *                                                     size:4 count:4, then the carried-over
 *                                                     elements verbatim, then the appended
 *                                                     router id as str8 | str32
 *
 *   This is qdrouterd 1.19's order (message.c, compose_router_message_annotations).
 *   str8/smallint/list8 are used whenever the value fits, as Proton and qdrouterd do.
 */
#ifndef JUNCTION_CODEC_INT_H
#define JUNCTION_CODEC_INT_H

#include "codec/codec.h"

// clang-format off
/* AMQP 1.0 format codes (part 1, 1.6). */
enum codec_code {
    CODEC_CODE_DESCRIBED  = 0x00,
    CODEC_CODE_NULL       = 0x40,
    CODEC_CODE_TRUE       = 0x41,
    CODEC_CODE_FALSE      = 0x42,
    CODEC_CODE_UINT0      = 0x43,
    CODEC_CODE_ULONG0     = 0x44,
    CODEC_CODE_LIST0      = 0x45,
    CODEC_CODE_UBYTE      = 0x50,
    CODEC_CODE_BYTE       = 0x51,
    CODEC_CODE_SMALLUINT  = 0x52,
    CODEC_CODE_SMALLULONG = 0x53,
    CODEC_CODE_SMALLINT   = 0x54,
    CODEC_CODE_SMALLLONG  = 0x55,
    CODEC_CODE_BOOLEAN    = 0x56,
    CODEC_CODE_USHORT     = 0x60,
    CODEC_CODE_SHORT      = 0x61,
    CODEC_CODE_UINT       = 0x70,
    CODEC_CODE_INT        = 0x71,
    CODEC_CODE_FLOAT      = 0x72,
    CODEC_CODE_CHAR       = 0x73,
    CODEC_CODE_DECIMAL32  = 0x74,
    CODEC_CODE_ULONG      = 0x80,
    CODEC_CODE_LONG       = 0x81,
    CODEC_CODE_DOUBLE     = 0x82,
    CODEC_CODE_TIMESTAMP  = 0x83,
    CODEC_CODE_DECIMAL64  = 0x84,
    CODEC_CODE_DECIMAL128 = 0x94,
    CODEC_CODE_UUID       = 0x98,
    CODEC_CODE_VBIN8      = 0xa0,
    CODEC_CODE_STR8       = 0xa1,
    CODEC_CODE_SYM8       = 0xa3,
    CODEC_CODE_VBIN32     = 0xb0,
    CODEC_CODE_STR32      = 0xb1,
    CODEC_CODE_SYM32      = 0xb3,
    CODEC_CODE_LIST8      = 0xc0,
    CODEC_CODE_MAP8       = 0xc1,
    CODEC_CODE_LIST32     = 0xd0,
    CODEC_CODE_MAP32      = 0xd1,
    CODEC_CODE_ARRAY8     = 0xe0,
    CODEC_CODE_ARRAY32    = 0xf0,
};

/* Section descriptors (part 3, 3.2), as the low byte of a 0x00000000:0x000000NN ulong. */
enum codec_section_code {
    CODEC_SECTION_HEADER                 = 0x70,
    CODEC_SECTION_DELIVERY_ANNOTATIONS   = 0x71,
    CODEC_SECTION_MESSAGE_ANNOTATIONS    = 0x72,
    CODEC_SECTION_PROPERTIES             = 0x73,
    CODEC_SECTION_APPLICATION_PROPERTIES = 0x74,
    CODEC_SECTION_DATA                   = 0x75,
    CODEC_SECTION_AMQP_SEQUENCE          = 0x76,
    CODEC_SECTION_AMQP_VALUE             = 0x77,
    CODEC_SECTION_FOOTER                 = 0x78,
};

/* Size class of a format code: how to find the end of a value from its first bytes. */
enum codec_class {
    CODEC_CLASS_BAD = 0,  /* not an AMQP 1.0 format code */
    CODEC_CLASS_W0,       /* code only */
    CODEC_CLASS_W1,       /* code + 1 byte */
    CODEC_CLASS_W2,       /* code + 2 bytes */
    CODEC_CLASS_W4,       /* code + 4 bytes */
    CODEC_CLASS_W8,       /* code + 8 bytes */
    CODEC_CLASS_W16,      /* code + 16 bytes */
    CODEC_CLASS_VAR1,     /* code size:1 data */
    CODEC_CLASS_VAR4,     /* code size:4 data */
    CODEC_CLASS_COMPOUND1,/* code size:1 count:1 elements */
    CODEC_CLASS_COMPOUND4,/* code size:4 count:4 elements */
    CODEC_CLASS_ARRAY1,   /* code size:1 count:1 ctor elements */
    CODEC_CLASS_ARRAY4,   /* code size:4 count:4 ctor elements */
    CODEC_CLASS_DESCRIBED,/* 0x00 descriptor value */
};

/* Which part of the message an error was found in: the first half of a *why text. */
#define CODEC_PARTS(P)                                                                             \
    P(MESSAGE, "message")                                                                          \
    P(HEADER, "header")                                                                            \
    P(DA, "delivery-annotations")                                                                  \
    P(MA, "message-annotations")                                                                   \
    P(PROPERTIES, "properties")                                                                    \
    P(AP, "application-properties")

/* What was wrong: the second half of a *why text.  E(id, part, text). */
#define CODEC_ERRORS(E, p)                                                                         \
    E(NONE, p, "no error")                                                                         \
    E(OVERRUN, p, "a value runs past the end of its section or compound")                          \
    E(BAD_CODE, p, "unknown type code")                                                            \
    E(DESC_DESCRIBED, p, "a descriptor is itself a described type")                                \
    E(COMPOUND_SIZE, p, "compound size is smaller than its count field")                           \
    E(COMPOUND_COUNT, p, "compound count does not fit its size")                                   \
    E(COMPOUND_FILL, p, "compound elements do not fill its size exactly")                          \
    E(MAP_ODD, p, "map count is odd")                                                              \
    E(ARRAY_CTOR, p, "array element constructor is missing or invalid")                            \
    E(ARRAY_COUNT, p, "array count does not fit its size")                                         \
    E(KEY_TYPE, p, "key is not a symbol or ulong")                                                 \
    E(NOT_LIST, p, "section value is not a list")                                                  \
    E(NOT_MAP, p, "section value is not a map")                                                    \
    E(RA_DUP, p, "router annotation appears twice")                                                \
    E(RA_TO, p, "x-opt-qd.to is not a string")                                                     \
    E(RA_INGRESS, p, "x-opt-qd.ingress is not a string")                                           \
    E(RA_TRACE, p, "x-opt-qd.trace is not a list")                                                 \
    E(RA_TRACE_ELEM, p, "x-opt-qd.trace element is not a string")                                  \
    E(RA_PHASE, p, "x-opt-qd.phase is not an integer in int range")                                \
    E(RA_STREAM, p, "x-opt-qd.stream is not an integer in int range")                              \
    E(PROP_TO, p, "to is not a string, symbol or null")                                            \
    E(PROP_REPLY_TO, p, "reply-to is not a string, symbol or null")                                \
    E(NOT_SECTION, p, "expected a section (described type 0x00)")                                  \
    E(DESCRIPTOR, p, "section descriptor is not a smallulong, ulong or symbol")                    \
    E(UNKNOWN_SECTION, p, "unknown section descriptor")                                            \
    E(ORDER, p, "section is out of order or repeated")                                             \
    E(TRUNCATED, p, "input ends inside a section")                                                 \
    E(TOO_LARGE, p, "leading sections end beyond 4 GiB")
// clang-format on

#define CODEC__PART_ENUM(id, name)   CODEC_PART_##id,
#define CODEC__ERR_ENUM(id, p, text) CODEC_ERR_##id,
typedef enum codec_part { CODEC_PARTS(CODEC__PART_ENUM) CODEC_PART_COUNT } codec_part_t;
typedef enum codec_err { CODEC_ERRORS(CODEC__ERR_ENUM, _) CODEC_ERR_COUNT } codec_err_t;

/* The static *why text "<part>: <error>"; never NULL. */
const char *codec__why(codec_part_t part, codec_err_t err);

/* codec__class[code] is the enum codec_class of a format code. */
extern const uint8_t codec__class[256];

/* codec__class_width[class]: bytes after the format code that fixed-width values (W0..W16)
 * hold, or that the size (and count, and array constructor) fields take for the others. */
extern const uint8_t codec__class_width[CODEC_CLASS_DESCRIBED];

/* Skip one complete value (described values included) starting at p, bounded by end.
 * Returns the first byte after it, or NULL with *err set when it is malformed or does not end
 * by `end`.  Compounds and arrays are skipped by their size field after O(1) checks (size
 * covers the count field, count fits the size, no elements means no bytes, maps have an even
 * count, an array has a valid element constructor, fixed-width elements fill its size exactly,
 * and zero-width ones number at most one per byte of the array: DESIGN.md, "Work bounded by
 * bytes"); their elements are not visited.  Never reads at or past `end`. */
const uint8_t *codec__value_skip(const uint8_t *p, const uint8_t *end, codec_err_t *err);

/* Read a section's descriptor at msg[0, len): on success returns 0 and sets *code (0x70..0x78)
 * and *desc_len (bytes of 0x00 + descriptor).  Returns CODEC_PARTIAL when len is too short to
 * tell, CODEC_INVALID with *err set when it is not a known section descriptor. */
int codec__descriptor_read(const uint8_t *msg, size_t len, int *code, size_t *desc_len,
                           codec_err_t *err);

/* A key of the router's namespace: sym8/sym32 starting with this prefix. */
#define CODEC_RA_PREFIX     "x-opt-qd."
#define CODEC_RA_PREFIX_LEN 9

/* Bytes of the message-annotations header codec_compose_prefix() writes, at most. */
#define CODEC_MA_HEADER_MAX 12

#endif
