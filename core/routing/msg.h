/* core/routing/msg.h: the messages of qdrouterd 1.19's routing protocol - HELLO, RA, LSU, LSR
 * (link state) and MAU, MAR (mobile addresses) - decoded from and encoded to AMQP bytes
 * exactly as qdrouterd writes and reads them.
 *
 * Two dialects (facts from qdrouterd 1.19: python_embedded.c, compose.c, mobile_sync/mobile.c;
 * checked against messages a real 1.19 sent, tests/unit/core/routing/vectors/):
 *
 *   HELLO, RA, LSU, LSR (the Python engine)      MAU, MAR (the C mobile-sync module)
 *   header      list32 [false]                   header      list32 [false]
 *   properties  list32 [null, null, to, null,    properties  list32 [null, null, to]
 *               null, null]
 *   app-props   map32 {str "opcode": str OP}     app-props   map32 {sym "opcode": str OP}
 *   body        amqp-value map32, STRING keys    body        amqp-value map32, SYMBOL keys
 *   integers    smallint (-128..127) | int |     integers    pv, mobile_seq, have_seq:
 *               long beyond int32                            smalllong | long;
 *                                                            hints: smallint | int
 *   lists       list0 when empty, else list32    lists       list32, even when empty
 *   strings     str8 below 256 bytes, else str32 (both)
 *
 *   Composites are always list32/map32 (never list8/map8): qdrouterd's composer reserves
 *   four-byte size and count fields before it knows the contents.
 *
 *   Body keys, in the order written:
 *   HELLO  id, pv, area, instance, seen [str...]
 *   RA     id, pv, area, instance, ls_seq, mobile_seq
 *   LSU    id, pv, area, instance, ls_seq, ls {id, area, ls_seq, peers {str: int cost}}
 *   LSR    id, pv, area
 *   MAU    id, pv, area, mobile_seq, then hints [int], add [str], del [str] (differential)
 *                                    or exist [str], hints [int]           (absolute)
 *   MAR    id, pv, area, have_seq
 *
 * Reading is lenient where qdrouterd's is: a key may be a string or a symbol; any AMQP integer
 * type is an integer (a boolean is not: the Python engine checks the class); text may be a
 * string or a symbol; unknown keys are skipped.  It is strict where qdrouterd drops the
 * message: a missing mandatory key, a wrong type, a list that is an array.  A message whose
 * `pv` is above CORE_RT_PV is not decoded further (qdrouterd ignores it).
 *
 * Decoded lists and maps stay encoded in the message: core_rt_strs_t and friends are views
 * that were validated element by element when decoded, so walking them cannot fail.  Work is
 * bounded by the bytes in hand: a count is trusted only after it is checked against the bytes
 * left, and nesting of described values is limited.
 *
 * Threads: every function is pure and thread-safe (the routing engine calls them on the core
 * thread); nothing here allocates except core_rt_buf_t's growth, logs or keeps state.
 */
#ifndef JUNCTION_CORE_ROUTING_MSG_H
#define JUNCTION_CORE_ROUTING_MSG_H

#include "codec/codec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The routing protocol version qdrouterd 1.19 speaks (and we speak). */
#define CORE_RT_PV 1

/* core_rt_msg_decode()'s result for a message of a newer protocol version: not an error,
 * but nothing beyond `op`, `id` and `pv` was decoded (qdrouterd logs and ignores it). */
#define CORE_RT_NEWER 1

typedef enum core_rt_op {
    CORE_RT_OP_NONE = 0,
    CORE_RT_OP_HELLO,
    CORE_RT_OP_RA,
    CORE_RT_OP_LSU,
    CORE_RT_OP_LSR,
    CORE_RT_OP_MAU,
    CORE_RT_OP_MAR,
    CORE_RT_OP_COUNT
} core_rt_op_t;

/* A validated list or map, left encoded: its elements' bytes.  The element kinds are in
 * the names of the typedefs below; one cursor (core_rt_iter()) walks all three. */
typedef struct core_rt_list {
    const uint8_t *ptr;   /* first element's format code; NULL when the key is absent */
    size_t         len;   /* bytes of the elements */
    uint32_t       count; /* elements (pairs, for a map) */
} core_rt_list_t;

/* A list of strings (or symbols). */
typedef core_rt_list_t core_rt_strs_t;
/* A list of integers (MAU hints). */
typedef core_rt_list_t core_rt_ints_t;
/* A map {router id: cost} (LSU's ls.peers). */
typedef core_rt_list_t core_rt_peers_t;

/* A cursor over one of the views above. */
typedef struct core_rt_iter {
    const uint8_t *p;   /* next element */
    const uint8_t *end; /* end of the elements */
} core_rt_iter_t;

/* A decoded routing message.  Views point into the message bytes. */
typedef struct core_rt_msg {
    core_rt_op_t    op;         /* from application-properties "opcode" */
    codec_bytes_t   id;         /* sender's router id (mandatory in all six) */
    int64_t         pv;         /* protocol version, 0 when absent */
    codec_bytes_t   area;       /* "0" in practice; ptr NULL when absent */
    int64_t         instance;   /* HELLO, RA, LSU: sender's boot time; 0 when absent */
    int64_t         ls_seq;     /* RA, LSU (the LSU's top-level ls_seq) */
    int64_t         mobile_seq; /* RA, MAU */
    int64_t         have_seq;   /* MAR */
    core_rt_strs_t  seen;       /* HELLO: router ids the sender heard from */
    codec_bytes_t   ls_id;      /* LSU ls.id */
    codec_bytes_t   ls_area;    /* LSU ls.area, ptr NULL when absent */
    int64_t         ls_ls_seq;  /* LSU ls.ls_seq: the sequence the receiver compares */
    core_rt_peers_t peers;      /* LSU ls.peers */
    core_rt_strs_t  add;        /* MAU differential: hash keys added */
    core_rt_strs_t  del;        /* MAU differential: hash keys deleted */
    core_rt_strs_t  exist;      /* MAU absolute: every hash key the sender has */
    core_rt_ints_t  hints;      /* MAU: treatments parallel to add/exist; ptr NULL when
                                   absent or unusable (not a list of integers, or its count
                                   differs from the keys', which qdrouterd also ignores) */
} core_rt_msg_t;

/* Decode a whole routing message msg[0, len) (as it arrives on a control link: header,
 * message-annotations, properties, application-properties, one amqp-value body section).
 * Returns 0 with *m filled; CORE_RT_NEWER (see above); CODEC_INVALID with *why (may be NULL)
 * a static text such as "LSU: ls.peers value is not an integer".  Views in *m point into msg.
 * Never reads outside msg[0, len). */
int core_rt_msg_decode(const uint8_t *msg, size_t len, core_rt_msg_t *m, const char **why);

/* Decode the body map of a message with opcode `op`: val[0, len) is exactly one encoded map.
 * Same results as core_rt_msg_decode() (which calls it); m->op is set to op. */
int core_rt_body_decode(core_rt_op_t op, const uint8_t *val, size_t len, core_rt_msg_t *m,
                        const char **why);

/* The opcode named by text[0, len) ("HELLO" ...), or CORE_RT_OP_NONE. */
core_rt_op_t core_rt_op_parse(const uint8_t *text, size_t len);
/* "HELLO" ... for an opcode, "?" for NONE or out of range. */
const char *core_rt_op_name(core_rt_op_t op);

/* Views' cursors.  _next() returns false at the end; the views are valid (decoded by
 * core_rt_*_decode()), so there is no error case. */
core_rt_iter_t core_rt_iter(const core_rt_list_t *l);
bool           core_rt_strs_next(core_rt_iter_t *it, codec_bytes_t *s);
bool           core_rt_ints_next(core_rt_iter_t *it, int64_t *v);
bool           core_rt_peers_next(core_rt_iter_t *it, codec_bytes_t *id, int64_t *cost);

/* A growable output buffer.  Zero-initialise; core_rt_buf_fini() frees. */
typedef struct core_rt_buf {
    uint8_t *ptr; /* bytes, base_malloc'd */
    size_t   len; /* bytes written */
    size_t   cap; /* bytes allocated */
} core_rt_buf_t;

void core_rt_buf_fini(core_rt_buf_t *b);

/* What to encode.  Unused fields are ignored: which ones each opcode writes is the table at
 * the top of this file. */
typedef struct core_rt_out {
    core_rt_op_t         op;         /* the message */
    const char          *to;         /* properties.to, e.g. "amqp:/_local/qdhello" */
    codec_bytes_t        id;         /* own router id */
    codec_bytes_t        area;       /* ptr NULL: "0" */
    int64_t              instance;   /* HELLO, RA, LSU */
    int64_t              ls_seq;     /* RA, LSU (written both top-level and as ls.ls_seq) */
    int64_t              mobile_seq; /* RA, MAU */
    int64_t              have_seq;   /* MAR */
    const codec_bytes_t *ids;        /* HELLO seen; LSU peer ids; MAU add or exist keys */
    const int64_t       *values;     /* LSU peer costs (NULL: all 1); MAU hints, parallel to
                                        ids (required: qdrouterd always writes hints) */
    uint32_t             n_ids;      /* entries of ids (and values) */
    const codec_bytes_t *dels;       /* MAU differential: deleted keys */
    uint32_t             n_dels;     /* entries of dels */
    bool                 absolute;   /* MAU: write exist + hints instead of hints + add + del */
} core_rt_out_t;

/* Append the whole message (header, properties, application-properties, body; no
 * message-annotations: those belong to the hop that sends it) to *b, in the dialect of
 * out->op.  Returns 0, or CODEC_INVALID for an opcode out of range, a missing `to` or `id`,
 * MAU keys without hints, or texts beyond 1 GiB in all (nothing is appended then). */
int core_rt_msg_encode(const core_rt_out_t *out, core_rt_buf_t *b);

#endif
