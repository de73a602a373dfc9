/* codec/codec.h: the AMQP 1.0 message scanner and the message-annotations rewriter.
 *
 * The router never decodes what it only forwards.  codec_scan() walks an encoded message
 * once, with no allocation, and records where each section lies.  It decodes only what
 * routing needs: properties.to, and the router's own message annotations (x-opt-qd.ingress,
 * x-opt-qd.trace, x-opt-qd.to, x-opt-qd.phase, x-opt-qd.stream), returned as views into the
 * message bytes.  Every other annotation is left as encoded bytes.  codec_compose_prefix()
 * builds the outgoing message's leading sections as a list of byte ranges (an iovec): the
 * header and delivery annotations as they arrived, a message-annotations section made of a
 * fresh map header + the user annotations copied verbatim + the router annotations to write,
 * then properties and application properties as they arrived.  The body and footer follow
 * unchanged from the input (the caller sends bytes [scan.body_off, end)).
 *
 * Byte layout of what is scanned (AMQP 1.0 part 3, 3.2):
 *
 *   section        descriptor           encoding
 *   header         0x00 0x53 0x70       list  (durable, priority, ttl, first-acquirer, delivery-count)
 *   delivery-ann.  0x00 0x53 0x71       map   (symbol|ulong keys)
 *   message-ann.   0x00 0x53 0x72       map   (symbol|ulong keys)
 *   properties     0x00 0x53 0x73       list  (message-id, user-id, to, subject, reply-to, ...)
 *   app-props      0x00 0x53 0x74       map   (string keys)
 *   body           0x00 0x53 0x75|0x76|0x77   data* | amqp-sequence* | amqp-value
 *   footer         0x00 0x53 0x78       map
 *   (descriptors may also be written 0x00 0x80 <8-byte ulong> or as a symbol such as
 *    "amqp:header:list"; both are accepted)
 *
 * Conventions: functions return 0 (or a count) on success, CODEC_PARTIAL when the input ends
 * before the needed sections do, CODEC_INVALID when the bytes are malformed.  Nothing here
 * allocates, logs or keeps state between calls; everything is safe on any thread.
 */
#ifndef JUNCTION_CODEC_H
#define JUNCTION_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CODEC_INVALID (-1)
#define CODEC_PARTIAL (-2)

/* A view of bytes owned by someone else; ptr == NULL means absent. */
typedef struct codec_bytes {
    const uint8_t *ptr; /* first byte, or NULL when absent */
    size_t         len; /* byte count */
} codec_bytes_t;

/* A section's place in the message: offset from the first byte, length including its
 * descriptor.  len == 0 means the section is absent. */
typedef struct codec_range {
    uint32_t off; /* offset of the section's 0x00 descriptor byte */
    uint32_t len; /* bytes, descriptor included; 0 = absent */
} codec_range_t;

/* Router annotations found in a message-annotations section (views into the message). */
typedef struct codec_ra {
    codec_bytes_t ingress;     /* x-opt-qd.ingress: the string's bytes (no type code) */
    codec_bytes_t to;          /* x-opt-qd.to: the string's bytes */
    codec_bytes_t trace;       /* x-opt-qd.trace: the encoded list ELEMENTS, concatenated
                                  (each a complete str8/str32/sym encoding), ptr NULL if absent */
    uint32_t      trace_count; /* elements in `trace` */
    int32_t       phase;       /* x-opt-qd.phase, 0 when absent */
    int32_t       stream;      /* x-opt-qd.stream, 0 when absent */
} codec_ra_t;

/* Result of codec_scan(). */
typedef struct codec_scan {
    codec_range_t header;                 /* 0x70 */
    codec_range_t delivery_annotations;   /* 0x71 */
    codec_range_t message_annotations;    /* 0x72 */
    codec_range_t properties;             /* 0x73 */
    codec_range_t application_properties; /* 0x74 */
    uint32_t      body_off;   /* offset of the first body (or footer) section; == the scanned
                                 length when the message has none */
    uint32_t      ma_count;   /* key/value pairs in the MA map (router and user) */
    uint32_t      ma_user_count;  /* user (non x-opt-qd.) pairs */
    uint32_t      ma_router_count;/* x-opt-qd.* pairs */
    codec_range_t ma_user;    /* the user pairs' bytes when they form ONE contiguous run
                                 (always true when every router key follows the user keys, as
                                 qdrouterd writes them); len 0 with ma_user_count 0 */
    bool          ma_user_split; /* user pairs are interleaved with router keys, so ma_user is
                                    not set: codec_compose_prefix() walks the map instead */
    uint32_t      ma_user_bytes; /* total encoded bytes of the user pairs, split or not (sizes
                                    the outgoing map header before the pairs are copied) */
    codec_ra_t    ra;         /* router annotations (only meaningful with ma_router_count) */
    codec_bytes_t to;         /* properties.to (str8/str32/sym bytes), ptr NULL if absent/null */
    codec_bytes_t reply_to;   /* properties.reply-to, likewise */
} codec_scan_t;

/* Scan msg[0, len) up to the start of the body.  `complete` says the whole message is present
 * (so reaching the end early is valid: a message may have no body).  Validates the header,
 * delivery- and message-annotations (well-formed encodings, map with an even count, keys of
 * type symbol or ulong, known router keys of the right types) and the properties list.
 * Returns 0; CODEC_PARTIAL when !complete and the input ends before the body starts;
 * CODEC_INVALID when malformed, with *why (may be NULL) set to a static explanation such as
 * "message-annotations: map count is odd".
 *
 * Details: on success *why is set to NULL; on CODEC_PARTIAL it says where the input ended.  The
 * header and properties lists and both annotation maps are walked element by element (each
 * must fill its compound exactly); values nested inside a user value (a list, map or array
 * annotation) are bounds-checked through their size and count fields in O(1) but not walked,
 * and the application-properties map and the body are skipped by size (codec/DESIGN.md).
 * A duplicate x-opt-qd.to/.ingress/.trace/.phase/.stream key is invalid.  Views in `scan`
 * point into msg. */
int codec_scan(const uint8_t *msg, size_t len, bool complete, codec_scan_t *scan,
               const char **why);

/* A message whose bytes lie in several places (the frame payloads it arrived in, left where
 * the socket read them): seg[0, n) in order, none empty, `len` bytes in all. */
typedef struct codec_segs {
    const codec_bytes_t *seg;
    uint32_t             n;
    size_t               len;
} codec_segs_t;

/* Memory for the bytes codec_scan_segs() must copy and keep: alloc(ctx, len) returns len
 * bytes that live as long as the scan's views (never NULL). */
typedef struct codec_stitch {
    uint8_t *(*alloc)(void *ctx, size_t len);
    void *ctx;
} codec_stitch_t;

/* codec_scan() of a whole message in segments, without joining them.  The sections the
 * router reads in place must each lie in one segment: the header and delivery annotations in
 * the first, the properties in any.  The message annotations may span segments: a pair that
 * a segment's end cuts is copied (for a router pair, into memory from `st`, where its views
 * point; a user pair's copy is only parsed).  Returns codec_scan()'s result for the joined
 * bytes, or CODEC_SPLIT when a section the router reads in place spans segments or, with
 * more than one segment, the user annotations are split (ma_user_split): the caller joins
 * the bytes and calls codec_scan().
 * Offsets in `scan` are the message's; views point into the segments or into `st`'s memory. */
#define CODEC_SPLIT (-3)
int codec_scan_segs(const codec_segs_t *m, codec_scan_t *scan, const codec_stitch_t *st,
                    const char **why);

/* Router annotations to write toward one receiver. */
typedef struct codec_ra_out {
    bool          write;          /* false: write none (stripAnnotations out/both) */
    codec_bytes_t ingress;        /* x-opt-qd.ingress value, or ptr NULL for none */
    codec_bytes_t trace;          /* encoded trace elements carried over (codec_ra_t.trace) */
    uint32_t      trace_count;    /* their count */
    codec_bytes_t trace_append;   /* one more router id appended to the trace, or ptr NULL */
    codec_bytes_t to;             /* x-opt-qd.to value, or ptr NULL for none */
    int32_t       phase;          /* x-opt-qd.phase, written only when non-zero */
    int32_t       stream;         /* x-opt-qd.stream, written (after phase) only when non-zero */
} codec_ra_out_t;

typedef struct codec_iov {
    const uint8_t *base; /* into the message or into the caller's scratch buffer */
    size_t         len;
} codec_iov_t;

/* Build the outgoing bytes for msg[0, scan->body_off): header and delivery annotations as
 * they arrived; then, if there is anything to write, a message-annotations section holding
 * the input's user annotations byte-for-byte (router keys from the input are dropped) and then
 * the router annotations of `ra`; then properties and application properties as they
 * arrived.  When the input MA has no router keys and ra->write is false, the input MA is
 * kept as is, so the whole prefix is one iov.  Fresh encodings (map header, router
 * annotations) are written into scratch[scratch_len]; codec_compose_need() says how much
 * scratch and how many iov entries a call needs.
 * Returns the number of iov entries used, or CODEC_INVALID if iov or scratch is too small.
 *
 * Details: `scan` must be codec_scan()'s result for these very bytes (it is trusted).  `ra`
 * NULL means write nothing.  The router trailer is written in this order, each pair only when
 * it has a value: x-opt-qd.phase, .stream, .to, .ingress, .trace, qdrouterd 1.19's order
 * (codec_int.h has the byte layouts); the map is a map8 when it fits, else a map32.  When
 * nothing is left to put in the section (no user pairs, nothing to write) it is omitted.  Adjacent byte ranges are
 * merged, so without ma_user_split at most CODEC_COMPOSE_IOV_MAX entries are used (one more
 * per extra run of user pairs with it).  Zero-length entries are never produced; an empty
 * prefix returns 0.  Writes nothing but scratch[0, need) and iov[0, n); on CODEC_INVALID
 * their contents are unspecified. */
int codec_compose_prefix(const uint8_t *msg, const codec_scan_t *scan, const codec_ra_out_t *ra,
                         uint8_t *scratch, size_t scratch_len, codec_iov_t *iov, int max_iov);

/* Exactly the scratch bytes and iov entries codec_compose_prefix() will use for the same
 * arguments (0 and 0 when it would fail whatever the buffers, i.e. a value in `ra` is too
 * long for any AMQP encoding).  Costs about as much as the compose itself. */
void codec_compose_need(const uint8_t *msg, const codec_scan_t *scan, const codec_ra_out_t *ra,
                        size_t *scratch_len, int *n_iov);

/* codec_compose_prefix() / codec_compose_need() of a message in segments (codec_scan_segs()
 * succeeded on it): an iov entry never spans two segments, so at most m->n - 1 entries more
 * are used. */
int  codec_compose_prefix_segs(const codec_segs_t *m, const codec_scan_t *scan,
                               const codec_ra_out_t *ra, uint8_t *scratch, size_t scratch_len,
                               codec_iov_t *iov, int max_iov);
void codec_compose_need_segs(const codec_segs_t *m, const codec_scan_t *scan,
                             const codec_ra_out_t *ra, size_t *scratch_len, int *n_iov);

/* The message's priority (header.priority, AMQP 1.0 3.2.1): its value, or
 * CODEC_PRIORITY_DEFAULT when the header or the field is absent.  `scan` must be
 * codec_scan()'s result for msg (the header is trusted to be well-formed). */
#define CODEC_PRIORITY_DEFAULT 4
uint8_t codec_header_priority(const uint8_t *msg, const codec_scan_t *scan);

/* Take the first element of a router trace (codec_ra_t.trace: encoded string or symbol
 * elements, as codec_scan() validated them): *id gets its bytes, *trace is advanced past it.
 * Returns false when nothing is left (or the rest is not a string element). */
bool codec_trace_next(codec_bytes_t *trace, codec_bytes_t *id);

/* The section code a symbolic descriptor names: name[0, len) is "amqp:header:list" ...
 * "amqp:footer:map" (the table above); returns 0x70 .. 0x78, or -1 when it names no section. */
int codec_section_by_name(const uint8_t *name, size_t len);

/* The iov entries codec_compose_prefix() needs at most when !scan->ma_user_split: header and
 * delivery annotations, MA header, user pairs, router trailer, properties and app-props. */
#define CODEC_COMPOSE_IOV_MAX 5

#endif
