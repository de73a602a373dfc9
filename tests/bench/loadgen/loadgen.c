/* tests/bench/loadgen/loadgen.c: junction-loadgen, the AMQP 1.0 load generator of
 * `scripts/bench annotations` (the DISPATCH-760 workload: N message annotations of ~100 bytes).
 *
 *   junction-loadgen send    --url HOST:PORT    [options]   one sender link to the address
 *   junction-loadgen receive --url HOST:PORT    [options]   one receiver link from the address
 *   junction-loadgen receive --listen HOST:PORT [options]   accept one connection; the sender
 *                                                          then connects straight to it (the
 *                                                          direct, no-router ceiling)
 *
 * The sender sends at-least-once (unsettled) messages as fast as its link credit allows (or
 * --rate messages per second), with at most --credit deliveries unsettled.  Each message is a
 * message-annotations section with N pairs (key: the symbol "k0001".., value: a 100-byte string
 * derived from the key's index) and a data section of 32 bytes: send time (CLOCK_MONOTONIC ns),
 * sequence number, N, flags and a check word.  The message is encoded once; per message only the
 * body's fields are patched. After --count messages or --seconds, it sends one END message carrying
 * the count, waits until every delivery is settled and closes.
 *
 * The receiver grants --credit (topped up as it consumes), accepts and settles every
 * delivery, and checks every message: complete and well-formed, sequence numbers contiguous
 * from 0 (a gap is a loss, a repeat a duplicate), the data section intact, and the user
 * annotations, in order, key and value bytes identical to what the sender encodes for N (the
 * map header may differ; keys starting with "x-opt-qd." are the router's and are skipped).
 * It stops at the END message and checks the count it carries.
 *
 * Each prints one line of JSON on stdout at the end (messages, seconds, msg/s, latency
 * percentiles, error counts); progress and problems go to stderr.  The receiver writes
 * "READY" (connected, link attached, credit granted) or "LISTENING HOST:PORT" to stderr so
 * that a script knows when to start the sender; with --tls-ca, each writes "TLS PROTOCOL
 * CIPHER" there too once the router's open came.  Exit status: 0 when everything arrived
 * intact and was accepted, 1 on any loss, duplicate, corruption, rejection or timeout, 2 on
 * a usage error.
 *
 * --inject KIND[@SEQ] makes the sender commit one fault on purpose (a lost, duplicated or
 * corrupted message), so that a script can check that the receiver catches each kind.
 *
 * Threads: one.  Each process drives its single connection with Proton's
 * pn_connection_driver_t from a plain non-blocking socket loop: run Proton's events, write
 * everything Proton has, read up to 1 MiB (running the events of each chunk, so that the
 * receiver's dispositions and credit leave in one write), and poll() only when the socket can
 * do neither.  Measured on this workload, Proton's own proactor read at most one frame per
 * wake-up and wrote the receiver's dispositions once per message: about 4 system calls per
 * message at N=200 where this loop makes 2, and ~30% more CPU per message at N=0.  The
 * sender also keeps at most
 * 1 MiB waiting in Proton (as the router does), because Proton's output buffer moves its
 * contents on every partial write.  Nothing is shared; no locks.
 *
 * Latency: the receiver's is send timestamp to receipt (both processes read CLOCK_MONOTONIC
 * on the same machine); the sender's "ack" latency is send to settlement.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/connection_driver.h>
#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/event.h>
#include <proton/link.h>
#include <proton/session.h>
#include <proton/ssl.h>
#include <proton/terminus.h>
#include <proton/transport.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

// clang-format off
#define LG_VALUE_LEN     100           /* bytes of each annotation's string value */
#define LG_KEY_LEN       5             /* "k0001": 'k' and 4 digits */
#define LG_MAX_ANN       9999          /* keys have 4 digits */
#define LG_BODY_LEN      32            /* the data section's payload, see body layout */
#define LG_BODY_MAGIC    0x4a4c4731u   /* "JLG1" */
#define LG_FLAG_END      1u            /* the END message: seq is the number of messages sent */
#define LG_CHECK_MIX     0x9e3779b97f4a7c15ull
#define LG_MAX_REPORTS   10            /* problems printed per kind; all are counted */
#define LG_READ_CHUNK    (256u << 10)  /* bytes asked of recv() at a time */
#define LG_READ_BUDGET   (1u << 20)    /* bytes read before writing again */
#define LG_OUT_MAX       (1u << 20)    /* sender: most bytes waiting in Proton, as the router */
#define LG_HIST_SUB_BITS 6             /* latency histogram: 64 buckets per power of two */
#define LG_HIST_LEN      ((64 - LG_HIST_SUB_BITS + 1) << LG_HIST_SUB_BITS)

/* AMQP type codes used here (AMQP 1.0 part 1, section 1.6). */
#define T_DESCRIBED 0x00
#define T_SMALLULONG 0x53
#define T_ULONG     0x80
#define T_VBIN8     0xa0
#define T_VBIN32    0xb0
#define T_STR8      0xa1
#define T_STR32     0xb1
#define T_SYM8      0xa3
#define T_SYM32     0xb3
#define T_MAP8      0xc1
#define T_MAP32     0xd1

/* Section descriptors (part 3, section 3.2). */
#define S_HEADER    0x70
#define S_DA        0x71
#define S_MA        0x72
#define S_PROPS     0x73
#define S_AP        0x74
#define S_DATA      0x75
#define S_SEQUENCE  0x76
#define S_VALUE     0x77
#define S_FOOTER    0x78
// clang-format on

/* Body layout (the data section's 32 bytes, big-endian):
 *   0  u64 send time, CLOCK_MONOTONIC ns
 *   8  u64 sequence number from 0 (END: the number of messages sent before it)
 *  16  u32 N, the number of annotations
 *  20  u32 flags (LG_FLAG_END)
 *  24  u32 LG_BODY_MAGIC
 *  28  u32 check: low 32 bits of (time ^ seq ^ N ^ flags) * LG_CHECK_MIX
 */

/* --inject: one deliberate fault, to check that the receiver catches it. */
typedef enum lg_inject {
    LG_INJECT_NONE = 0,
    LG_INJECT_LOSS,         /* skip one sequence number */
    LG_INJECT_DUPLICATE,    /* send one sequence number twice */
    LG_INJECT_CORRUPT_ANN,  /* flip a bit in one annotation value (needs N > 0) */
    LG_INJECT_CORRUPT_BODY, /* flip a bit in one body */
} lg_inject_t;

typedef enum lg_mode {
    LG_MODE_SEND = 0,
    LG_MODE_RECEIVE,
} lg_mode_t;

/* Latency histogram: log-linear buckets of ~1.5% width over nanoseconds. */
typedef struct lg_hist {
    uint64_t count[LG_HIST_LEN]; /* per bucket */
    uint64_t total;              /* samples */
    uint64_t max;                /* largest sample, ns */
} lg_hist_t;

/* The command line. */
typedef struct lg_opts {
    lg_mode_t   mode;        /* send or receive */
    const char *url;         /* HOST:PORT to connect to, or NULL */
    const char *listen;      /* HOST:PORT to listen on (receive only), or NULL */
    const char *address;     /* link target (send) or source (receive) */
    uint64_t    count;       /* messages to send; 0 = use seconds */
    double      seconds;     /* how long to send when count is 0 */
    unsigned    annotations; /* N */
    unsigned    credit;      /* receiver's window; sender's cap on unsettled deliveries */
    unsigned    max_frame;   /* the transport's max frame size */
    double      timeout;     /* give up after this long with no progress, seconds */
    double      rate;        /* sender: messages per second; 0 = as fast as credit allows */
    lg_inject_t inject;      /* sender: a fault to inject, or NONE */
    uint64_t    inject_at;   /* ... at this sequence number */
    const char *tls_ca;      /* --url over TLS, trusting this CA file (Proton's pn_ssl) */
} lg_opts_t;

/* All the state: one process, one connection, one link. */
typedef struct lg {
    lg_opts_t              o;                /* options */
    int                    fd;               /* the connection's socket */
    pn_connection_driver_t driver;           /* Proton's protocol engine for the connection */
    pn_connection_t       *conn;             /* the driver's connection */
    pn_link_t             *link;             /* the sending or receiving link */
    bool                   done;             /* the transport closed: leave the loop */
    bool                   closing;          /* we closed the connection */
    bool                   ready;            /* receiver: announced READY */
    uint64_t               last_progress_ns; /* for the timeout */
    uint64_t               give_up_ns;       /* timed out: leave the loop at this time regardless */
    /* the message (sender) / the expected annotations (receiver) */
    uint8_t       *msg;       /* the encoded message */
    size_t         msg_len;   /* its length */
    size_t         body_off;  /* offset of the 32 body bytes in msg */
    const uint8_t *pairs;     /* the encoded annotation pairs, inside msg */
    size_t         pairs_len; /* their length (0 when N = 0) */
    size_t        *pair_off;  /* N + 1 offsets of each pair in pairs */
    /* sender */
    uint64_t       sent;         /* data deliveries sent (END excluded): the next tag */
    uint64_t       seq;          /* the next sequence number (differs with --inject) */
    bool           injected;     /* the --inject fault happened */
    uint64_t       settled;      /* deliveries settled by the receiver, END excluded */
    uint64_t       accepted;     /* ... of which accepted */
    uint64_t       not_accepted; /* ... of which released, modified or rejected */
    bool           stop;         /* no more data messages */
    pn_delivery_t *end_dlv;      /* the END delivery, while unsettled */
    bool           end_sent;     /* END sent */
    bool           end_settled;  /* END settled (accepted or not) */
    uint64_t      *send_ns;      /* send time per in-flight slot (tag % credit), for acks */
    uint64_t       deadline_ns;  /* --seconds: stop sending at this time */
    uint64_t       next_due_ns;  /* --rate: the next message is due then (0: not waiting) */
    /* receiver */
    uint8_t *rbuf;       /* receive buffer */
    size_t   rbuf_cap;   /* its size */
    uint64_t received;   /* data messages received */
    uint64_t next_seq;   /* the sequence number expected next */
    uint64_t consumed;   /* deliveries since the last credit top-up */
    uint64_t lost;       /* sequence gaps, in messages */
    uint64_t duplicates; /* sequence numbers seen again (or going back) */
    uint64_t corrupt;    /* malformed messages, bad bodies, bad annotations */
    uint64_t reencoded;  /* messages whose user pairs were re-encoded (same values) */
    bool     got_end;    /* END received */
    /* both */
    uint64_t  first_ns; /* first send / first receipt */
    uint64_t  last_ns;  /* last settlement / last receipt */
    uint64_t  errors;   /* everything that makes the exit status 1 */
    unsigned  reports;  /* problems printed so far */
    lg_hist_t lat;      /* receiver: one-way latency; sender: ack latency */
} lg_t;

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);

    if (!p) {
        fprintf(stderr, "junction-loadgen: out of memory\n");
        exit(1);
    }
    return p;
}

/* Print a problem to stderr, at most LG_MAX_REPORTS of them; every call counts an error. */
static void problem(lg_t *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(lg_t *g, const char *fmt, ...)
{
    va_list ap;

    g->errors++;
    if (g->reports++ >= LG_MAX_REPORTS)
        return;
    va_start(ap, fmt);
    fputs("junction-loadgen: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

/* ---- histogram ---- */

static unsigned hist_index(uint64_t v)
{
    unsigned e;

    if (v < (1u << LG_HIST_SUB_BITS))
        return (unsigned)v;
    e = 63u - (unsigned)__builtin_clzll(v); /* e >= LG_HIST_SUB_BITS */
    return ((e - LG_HIST_SUB_BITS + 1) << LG_HIST_SUB_BITS) +
           (unsigned)((v >> (e - LG_HIST_SUB_BITS)) & ((1u << LG_HIST_SUB_BITS) - 1));
}

/* The middle of bucket i, ns. */
static double hist_value(unsigned i)
{
    unsigned group = i >> LG_HIST_SUB_BITS;
    unsigned sub = i & ((1u << LG_HIST_SUB_BITS) - 1);
    double   lo, width;

    if (group == 0)
        return (double)i;
    lo = (double)((1u << LG_HIST_SUB_BITS) | sub) * (double)(1ull << (group - 1));
    width = (double)(1ull << (group - 1));
    return lo + width / 2;
}

static void hist_add(lg_hist_t *h, uint64_t v)
{
    h->count[hist_index(v)]++;
    h->total++;
    if (v > h->max)
        h->max = v;
}

/* The q-quantile (0..1) in microseconds; 0 when empty. */
static double hist_quantile_us(const lg_hist_t *h, double q)
{
    uint64_t want, seen = 0;

    if (h->total == 0)
        return 0;
    want = (uint64_t)(q * (double)h->total);
    if (want >= h->total)
        want = h->total - 1;
    for (unsigned i = 0; i < LG_HIST_LEN; i++) {
        seen += h->count[i];
        if (seen > want) /* the bucket's middle, but never above the largest sample */
            return (hist_value(i) < (double)h->max ? hist_value(i) : (double)h->max) / 1000.0;
    }
    return (double)h->max / 1000.0;
}

/* ---- encoding ---- */

static void put_u32(uint8_t *b, uint32_t v)
{
    b[0] = (uint8_t)(v >> 24);
    b[1] = (uint8_t)(v >> 16);
    b[2] = (uint8_t)(v >> 8);
    b[3] = (uint8_t)v;
}

static void put_u64(uint8_t *b, uint64_t v)
{
    put_u32(b, (uint32_t)(v >> 32));
    put_u32(b + 4, (uint32_t)v);
}

static uint32_t get_u32(const uint8_t *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
}

static uint64_t get_u64(const uint8_t *b)
{
    return (uint64_t)get_u32(b) << 32 | get_u32(b + 4);
}

/* Annotation i's key and value, deterministic in i. */
static void ann_key(unsigned i, char key[LG_KEY_LEN + 1])
{
    snprintf(key, LG_KEY_LEN + 1, "k%04u", (i + 1) % 10000);
}

static void ann_value(unsigned i, uint8_t val[LG_VALUE_LEN])
{
    int n = snprintf((char *)val, LG_VALUE_LEN, "v%04u:", (i + 1) % 10000);

    for (unsigned j = (unsigned)n; j < LG_VALUE_LEN; j++)
        val[j] = (uint8_t)('!' + (i * 31u + j * 7u) % 94u);
}

static uint32_t body_check(uint64_t t, uint64_t seq, uint32_t n, uint32_t flags)
{
    return (uint32_t)((t ^ seq ^ n ^ ((uint64_t)flags << 32)) * LG_CHECK_MIX);
}

static void body_patch(uint8_t *body, uint64_t t, uint64_t seq, uint32_t n, uint32_t flags)
{
    put_u64(body, t);
    put_u64(body + 8, seq);
    put_u32(body + 16, n);
    put_u32(body + 20, flags);
    put_u32(body + 24, LG_BODY_MAGIC);
    put_u32(body + 28, body_check(t, seq, n, flags));
}

/* Encode the message for N annotations into g->msg (and record where the pairs and the body
 * are).  The map is a map8 when it fits, else a map32, as Proton would write it. */
static void message_build(lg_t *g)
{
    unsigned n = g->o.annotations;
    size_t   pair_len = 2 + LG_KEY_LEN + 2 + LG_VALUE_LEN;
    size_t   pairs_len = (size_t)n * pair_len;
    size_t   len = 0;
    uint8_t *b;

    g->msg = b = xcalloc(1, 16 + pairs_len + 8 + LG_BODY_LEN);
    g->pair_off = xcalloc(n + 1u, sizeof(*g->pair_off));
    if (n > 0) {
        bool small = 2 * n <= 255 && 1 + pairs_len <= 255;

        b[len++] = T_DESCRIBED;
        b[len++] = T_SMALLULONG;
        b[len++] = S_MA;
        if (small) {
            b[len++] = T_MAP8;
            b[len++] = (uint8_t)(1 + pairs_len);
            b[len++] = (uint8_t)(2 * n);
        } else {
            b[len++] = T_MAP32;
            put_u32(b + len, (uint32_t)(4 + pairs_len));
            put_u32(b + len + 4, 2 * n);
            len += 8;
        }
        g->pairs = b + len;
        g->pairs_len = pairs_len;
        for (unsigned i = 0; i < n; i++) {
            char key[LG_KEY_LEN + 1];

            g->pair_off[i] = (size_t)i * pair_len;
            ann_key(i, key);
            b[len++] = T_SYM8;
            b[len++] = LG_KEY_LEN;
            memcpy(b + len, key, LG_KEY_LEN);
            len += LG_KEY_LEN;
            b[len++] = T_STR8;
            b[len++] = LG_VALUE_LEN;
            ann_value(i, b + len);
            len += LG_VALUE_LEN;
        }
        g->pair_off[n] = pairs_len;
    }
    b[len++] = T_DESCRIBED;
    b[len++] = T_SMALLULONG;
    b[len++] = S_DATA;
    b[len++] = T_VBIN8;
    b[len++] = LG_BODY_LEN;
    g->body_off = len;
    body_patch(b + len, 0, 0, n, 0);
    len += LG_BODY_LEN;
    g->msg_len = len;
}

/* ---- decoding (receiver) ---- */

/* A read cursor; a failure sticks (bad) and every later read fails. */
typedef struct cur {
    const uint8_t *p;   /* next byte */
    const uint8_t *end; /* one past the last */
    bool           bad; /* overrun or malformed */
} cur_t;

static bool cur_take(cur_t *c, size_t n, const uint8_t **out)
{
    if (c->bad || (size_t)(c->end - c->p) < n) {
        c->bad = true;
        return false;
    }
    *out = c->p;
    c->p += n;
    return true;
}

static bool cur_u8(cur_t *c, uint8_t *v)
{
    const uint8_t *p;

    if (!cur_take(c, 1, &p))
        return false;
    *v = *p;
    return true;
}

static bool cur_u32(cur_t *c, uint32_t *v)
{
    const uint8_t *p;

    if (!cur_take(c, 4, &p))
        return false;
    *v = get_u32(p);
    return true;
}

/* Skip one encoded value (described values included). */
static bool skip_value(cur_t *c, int depth)
{
    const uint8_t *p;
    uint8_t        code, n8;
    uint32_t       n32;

    if (depth > 16 || !cur_u8(c, &code))
        return (c->bad = true, false);
    if (code == T_DESCRIBED)
        return skip_value(c, depth + 1) && skip_value(c, depth + 1);
    switch (code >> 4) {
    case 0x4:
        return true;
    case 0x5:
        return cur_take(c, 1, &p);
    case 0x6:
        return cur_take(c, 2, &p);
    case 0x7:
        return cur_take(c, 4, &p);
    case 0x8:
        return cur_take(c, 8, &p);
    case 0x9:
        return cur_take(c, 16, &p);
    case 0xa:
    case 0xc:
    case 0xe:
        return cur_u8(c, &n8) && cur_take(c, n8, &p);
    case 0xb:
    case 0xd:
    case 0xf:
        return cur_u32(c, &n32) && cur_take(c, n32, &p);
    default:
        return (c->bad = true, false);
    }
}

/* A section's descriptor code (smallulong or ulong form); false if it is not one. */
static bool read_descriptor(cur_t *c, uint64_t *code)
{
    const uint8_t *p;
    uint8_t        t;

    if (!cur_u8(c, &t) || t != T_DESCRIBED || !cur_u8(c, &t))
        return (c->bad = true, false);
    if (t == T_SMALLULONG) {
        if (!cur_take(c, 1, &p))
            return false;
        *code = *p;
        return true;
    }
    if (t == T_ULONG) {
        if (!cur_take(c, 8, &p))
            return false;
        *code = get_u64(p);
        return true;
    }
    return (c->bad = true, false);
}

/* A variable-width value of one of two codes (8- or 32-bit length); false otherwise. */
static bool read_var(cur_t *c, uint8_t code8, uint8_t code32, const uint8_t **s, uint32_t *len)
{
    uint8_t t, n8;

    if (!cur_u8(c, &t))
        return false;
    if (t == code8) {
        if (!cur_u8(c, &n8))
            return false;
        *len = n8;
    } else if (t == code32) {
        if (!cur_u32(c, len))
            return false;
    } else {
        return (c->bad = true, false);
    }
    return cur_take(c, *len, s);
}

/* Check the message-annotations map's user pairs against the expected ones.  Returns NULL
 * when they match, else what is wrong; *reencoded is set when they match in value but not in
 * encoding. */
static const char *check_annotations(lg_t *g, cur_t *c, bool *reencoded)
{
    uint8_t        t, n8;
    uint32_t       size, count;
    const uint8_t *pairs;
    unsigned       k = 0;
    cur_t          m;

    if (!cur_u8(c, &t))
        return "truncated message-annotations";
    if (t == T_MAP8) {
        if (!cur_u8(c, &n8))
            return "truncated map8 header";
        size = n8;
        if (!cur_u8(c, &n8))
            return "truncated map8 header";
        count = n8;
        if (size < 1)
            return "bad map8 size";
        size -= 1;
    } else if (t == T_MAP32) {
        if (!cur_u32(c, &size) || !cur_u32(c, &count))
            return "truncated map32 header";
        if (size < 4)
            return "bad map32 size";
        size -= 4;
    } else {
        return "message-annotations is not a map";
    }
    if (count % 2 != 0)
        return "odd map count";
    if (!cur_take(c, size, &pairs))
        return "map overruns the message";
    /* The common case: exactly the pairs the sender wrote, byte for byte. */
    if (size == g->pairs_len && count == 2 * g->o.annotations && memcmp(pairs, g->pairs, size) == 0)
        return NULL;
    /* Else walk the pairs: skip the router's, compare each user pair by value. */
    m.p = pairs;
    m.end = pairs + size;
    m.bad = false;
    for (uint32_t i = 0; i < count / 2; i++) {
        const uint8_t *ks, *kv, *vs, *ev, *key_start = m.p;
        uint32_t       klen, vlen;

        if (!read_var(&m, T_SYM8, T_SYM32, &ks, &klen))
            return "annotation key is not a symbol";
        if (klen >= 9 && memcmp(ks, "x-opt-qd.", 9) == 0) {
            if (!skip_value(&m, 0))
                return "malformed router annotation value";
            continue;
        }
        if (k >= g->o.annotations)
            return "unexpected extra annotation";
        kv = g->pairs + g->pair_off[k] + 2; /* the expected key's bytes */
        if (klen != LG_KEY_LEN || memcmp(ks, kv, LG_KEY_LEN) != 0)
            return "annotation key differs or is out of order";
        if (!read_var(&m, T_STR8, T_STR32, &vs, &vlen))
            return "annotation value is not a string";
        ev = kv + LG_KEY_LEN + 2; /* the expected value's bytes */
        if (vlen != LG_VALUE_LEN || memcmp(vs, ev, LG_VALUE_LEN) != 0)
            return "annotation value differs";
        if ((size_t)(m.p - key_start) != g->pair_off[k + 1] - g->pair_off[k] ||
            memcmp(key_start, g->pairs + g->pair_off[k], (size_t)(m.p - key_start)) != 0)
            *reencoded = true;
        k++;
    }
    if (m.p != m.end)
        return "map size does not match its pairs";
    if (k != g->o.annotations)
        return "annotations missing";
    return NULL;
}

/* Check one whole message.  Returns NULL if it is intact, else what is wrong.  *body_ok is
 * set when the body is intact (and its fields filled in), even if something else is wrong, so
 * that the sequence can still be followed past a message with a damaged annotation. */
static const char *check_message(lg_t *g, const uint8_t *b, size_t len, uint64_t *t, uint64_t *seq,
                                 uint32_t *flags, bool *reencoded, bool *body_ok)
{
    cur_t       c = {b, b + len, false};
    bool        seen_ma = false, seen_body = false;
    const char *ann_why = NULL;

    *body_ok = false;
    while (c.p < c.end) {
        uint64_t       code;
        const uint8_t *body;
        uint32_t       blen, n;

        if (!read_descriptor(&c, &code))
            return "malformed section descriptor";
        switch (code) {
        case S_MA:
            if (seen_ma || seen_body)
                return "message-annotations repeated or after the body";
            seen_ma = true;
            /* A bad pair leaves the cursor after the map; only a bad map header does not. */
            ann_why = check_annotations(g, &c, reencoded);
            if (c.bad)
                return ann_why;
            break;
        case S_DATA:
            if (seen_body)
                return "more than one data section";
            seen_body = true;
            if (!read_var(&c, T_VBIN8, T_VBIN32, &body, &blen))
                return "data section is not binary";
            if (blen != LG_BODY_LEN || get_u32(body + 24) != LG_BODY_MAGIC)
                return "body length or magic differs";
            *t = get_u64(body);
            *seq = get_u64(body + 8);
            n = get_u32(body + 16);
            *flags = get_u32(body + 20);
            if (get_u32(body + 28) != body_check(*t, *seq, n, *flags))
                return "body check word differs";
            if (n != g->o.annotations)
                return "body says a different N (sender and receiver disagree on "
                       "--annotations)";
            *body_ok = true;
            break;
        case S_HEADER:
        case S_DA:
        case S_PROPS:
        case S_AP:
        case S_FOOTER:
            if (!skip_value(&c, 0))
                return "malformed section";
            break;
        case S_SEQUENCE:
        case S_VALUE:
            return "body is not a data section";
        default:
            return "unknown section";
        }
    }
    if (c.bad)
        return "truncated";
    if (!seen_body)
        return "no body";
    if (ann_why)
        return ann_why;
    if (!seen_ma && g->o.annotations > 0)
        return "message-annotations missing";
    return NULL;
}

/* ---- sender ---- */

static void sender_open(lg_t *g, pn_connection_t *conn)
{
    pn_session_t *s = pn_session(conn);

    pn_session_open(s);
    g->link = pn_sender(s, "junction-loadgen-send");
    pn_terminus_set_address(pn_link_target(g->link), g->o.address);
    pn_terminus_set_address(pn_link_source(g->link), g->o.address);
    pn_link_set_snd_settle_mode(g->link, PN_SND_UNSETTLED);
    pn_link_set_rcv_settle_mode(g->link, PN_RCV_FIRST);
    pn_link_open(g->link);
}

/* Send one message with delivery tag `tag` (UINT64_MAX for END).  `fault` (an lg_inject_t)
 * damages this one copy on purpose, for --inject. */
static pn_delivery_t *send_one(lg_t *g, uint64_t tag, uint64_t t, uint64_t seq, uint32_t flags,
                               int fault)
{
    uint8_t        tb[8];
    pn_delivery_t *d;
    size_t         at = 0;

    put_u64(tb, tag);
    d = pn_delivery(g->link, pn_dtag((const char *)tb, sizeof(tb)));
    body_patch(g->msg + g->body_off, t, seq, g->o.annotations, flags);
    if (fault == LG_INJECT_CORRUPT_ANN && g->pairs_len > 0)
        at = (size_t)(g->pairs - g->msg) + g->pairs_len - LG_VALUE_LEN / 2; /* last value */
    else if (fault == LG_INJECT_CORRUPT_BODY)
        at = g->body_off + 12; /* inside the sequence number */
    g->msg[at] ^= at ? 0x20 : 0;
    pn_link_send(g->link, (const char *)g->msg, g->msg_len);
    g->msg[at] ^= at ? 0x20 : 0;
    pn_link_advance(g->link);
    return d;
}

/* Send the next data message (and, once, the fault --inject asked for). */
static void send_data(lg_t *g, uint64_t t)
{
    int fault = LG_INJECT_NONE;

    if (g->o.inject != LG_INJECT_NONE && g->seq == g->o.inject_at && !g->injected) {
        g->injected = true;
        fault = g->o.inject;
        if (fault == LG_INJECT_LOSS) {
            g->seq++; /* this sequence number never goes out */
            fault = LG_INJECT_NONE;
        } else if (fault == LG_INJECT_DUPLICATE) {
            g->send_ns[g->sent % g->o.credit] = t;
            send_one(g, g->sent++, t, g->seq, 0, LG_INJECT_NONE); /* and again below */
            fault = LG_INJECT_NONE;
        }
    }
    g->send_ns[g->sent % g->o.credit] = t;
    send_one(g, g->sent++, t, g->seq++, 0, fault);
}

/* Send while there is credit, room under the cap and less than LG_OUT_MAX bytes waiting in
 * Proton (more only makes Proton's buffers bigger); then END when it is time. */
static void sender_pump(lg_t *g)
{
    pn_link_t *l = g->link;

    g->next_due_ns = 0;
    if (!l || g->closing || pn_link_state(l) & PN_LOCAL_CLOSED)
        return;
    while (!g->stop && pn_link_credit(l) > 0 && g->sent - g->settled < g->o.credit &&
           pn_session_outgoing_bytes(pn_link_session(l)) < LG_OUT_MAX) {
        uint64_t t = now_ns();

        if (g->first_ns == 0) {
            g->first_ns = t;
            if (g->o.count == 0)
                g->deadline_ns = t + (uint64_t)(g->o.seconds * 1e9);
        }
        if (g->o.count ? g->seq >= g->o.count : t >= g->deadline_ns) {
            g->stop = true;
            break;
        }
        if (g->o.rate > 0) {
            uint64_t due = g->first_ns + (uint64_t)((double)g->seq * 1e9 / g->o.rate);

            if (t < due) {
                g->next_due_ns = due; /* run() sleeps until then at most */
                break;
            }
        }
        send_data(g, t);
    }
    if (g->stop && !g->end_sent && pn_link_credit(l) > 0) {
        g->end_dlv = send_one(g, UINT64_MAX, now_ns(), g->seq, LG_FLAG_END, LG_INJECT_NONE);
        g->end_sent = true;
    }
}

static void sender_close_if_done(lg_t *g)
{
    if (g->end_settled && g->settled == g->sent && !g->closing) {
        g->last_ns = now_ns();
        g->closing = true;
        pn_link_close(g->link);
        pn_connection_close(g->conn);
    }
}

/* A disposition arrived for one of our deliveries. */
static void sender_delivery(lg_t *g, pn_delivery_t *d)
{
    uint64_t state;

    if (!pn_delivery_remote_state(d) && !pn_delivery_settled(d))
        return; /* nothing decided yet */
    state = pn_delivery_remote_state(d);
    g->last_progress_ns = now_ns();
    if (d == g->end_dlv) {
        if (state != PN_ACCEPTED)
            problem(g, "END message not accepted (state 0x%" PRIx64 ")", state);
        g->end_dlv = NULL;
        g->end_settled = true;
    } else {
        pn_delivery_tag_t tag = pn_delivery_tag(d);
        uint64_t          n = tag.size == 8 ? get_u64((const uint8_t *)tag.start) : 0;

        g->settled++;
        if (state == PN_ACCEPTED) {
            g->accepted++;
            if (n < g->sent)
                hist_add(&g->lat, g->last_progress_ns - g->send_ns[n % g->o.credit]);
        } else {
            g->not_accepted++;
            problem(g, "delivery %" PRIu64 " not accepted (state 0x%" PRIx64 ")", n, state);
        }
    }
    pn_delivery_settle(d);
    sender_close_if_done(g);
}

/* ---- receiver ---- */

static void receiver_open(lg_t *g, pn_connection_t *conn)
{
    pn_session_t *s = pn_session(conn);

    pn_session_open(s);
    g->link = pn_receiver(s, "junction-loadgen-receive");
    pn_terminus_set_address(pn_link_source(g->link), g->o.address);
    pn_terminus_set_address(pn_link_target(g->link), g->o.address);
    pn_link_set_snd_settle_mode(g->link, PN_SND_UNSETTLED);
    pn_link_set_rcv_settle_mode(g->link, PN_RCV_FIRST);
    pn_link_open(g->link);
    pn_link_flow(g->link, (int)g->o.credit);
}

static void receiver_topup(lg_t *g)
{
    uint64_t batch = g->o.credit / 8 ? g->o.credit / 8 : 1;
    int      credit = pn_link_credit(g->link);

    if (g->consumed >= batch && credit < (int)g->o.credit) {
        pn_link_flow(g->link, (int)g->o.credit - credit);
        g->consumed = 0;
    }
}

static void receiver_finish(lg_t *g, uint64_t total)
{
    if (g->next_seq != total) {
        if (total > g->next_seq)
            g->lost += total - g->next_seq;
        problem(g,
                "END says %" PRIu64 " messages were sent; the last seq was %" PRIu64 " (%" PRIu64
                " messages arrived)",
                total, g->next_seq ? g->next_seq - 1 : 0, g->received);
    }
    g->got_end = true;
    g->closing = true;
    pn_link_close(g->link);
    pn_connection_close(g->conn);
}

/* Account for sequence number seq: in order, a gap (loss) or a repeat (duplicate). */
static void follow_seq(lg_t *g, uint64_t seq)
{
    if (seq == g->next_seq) {
        g->next_seq++;
    } else if (seq > g->next_seq) {
        problem(g, "lost %" PRIu64 " messages before seq %" PRIu64, seq - g->next_seq, seq);
        g->lost += seq - g->next_seq;
        g->next_seq = seq + 1;
    } else {
        problem(g, "duplicate or out-of-order seq %" PRIu64 " (expected %" PRIu64 ")", seq,
                g->next_seq);
        g->duplicates++;
    }
}

static void receiver_delivery(lg_t *g, pn_delivery_t *d)
{
    pn_link_t  *l = pn_delivery_link(d);
    size_t      n;
    ssize_t     got;
    uint64_t    t = 0, seq = 0, now;
    uint32_t    flags = 0;
    bool        reencoded = false, body_ok = false;
    const char *why;

    if (pn_delivery_aborted(d)) {
        problem(g, "delivery aborted by the sender");
        g->corrupt++;
        pn_delivery_settle(d);
        return;
    }
    if (!pn_delivery_readable(d) || pn_delivery_partial(d))
        return; /* wait for the rest */
    n = pn_delivery_pending(d);
    if (n > g->rbuf_cap) {
        free(g->rbuf);
        g->rbuf_cap = n * 2;
        g->rbuf = xcalloc(1, g->rbuf_cap);
    }
    got = pn_link_recv(l, (char *)g->rbuf, n);
    pn_link_advance(l);
    now = now_ns();
    g->last_progress_ns = now;
    g->consumed++;
    receiver_topup(g);
    if (got < 0 || (size_t)got != n) {
        problem(g, "pn_link_recv returned %zd for %zu pending bytes", got, n);
        g->corrupt++;
        pn_delivery_update(d, PN_REJECTED);
        pn_delivery_settle(d);
        return;
    }
    why = check_message(g, g->rbuf, n, &t, &seq, &flags, &reencoded, &body_ok);
    pn_delivery_update(d, why ? PN_REJECTED : PN_ACCEPTED);
    pn_delivery_settle(d);
    if (why) {
        g->corrupt++;
        problem(g, "message (expected seq %" PRIu64 ", %zu bytes) is corrupt: %s", g->next_seq, n,
                why);
        if (!body_ok)
            return; /* the sequence number cannot be trusted: a gap will show */
    }
    if (flags & LG_FLAG_END) {
        receiver_finish(g, seq);
        return;
    }
    follow_seq(g, seq);
    if (why)
        return; /* counted as corrupt, not as received */
    if (g->first_ns == 0)
        g->first_ns = now;
    g->last_ns = now;
    g->received++;
    if (reencoded)
        g->reencoded++;
    hist_add(&g->lat, now >= t ? now - t : 0);
}

/* ---- events ---- */

static void on_transport_closed(lg_t *g, pn_event_t *e)
{
    pn_condition_t *cond = pn_transport_condition(pn_event_transport(e));

    if (pn_condition_is_set(cond) && !g->closing)
        problem(g, "connection lost: %s: %s", pn_condition_get_name(cond),
                pn_condition_get_description(cond));
    else if (!g->closing)
        problem(g, "connection closed before the run finished");
    g->done = true;
}

/* A link the peer opened (listen mode, or a peer that attaches first). */
static void on_link_remote_open(lg_t *g, pn_link_t *l)
{
    if (pn_link_state(l) & PN_LOCAL_UNINIT) {
        if (g->o.mode != LG_MODE_RECEIVE || !pn_link_is_receiver(l) || g->link) {
            pn_condition_set_name(pn_link_condition(l), "amqp:not-allowed");
            pn_link_close(l);
            return;
        }
        g->link = l;
        pn_terminus_copy(pn_link_source(l), pn_link_remote_source(l));
        pn_terminus_copy(pn_link_target(l), pn_link_remote_target(l));
        pn_link_set_rcv_settle_mode(l, PN_RCV_FIRST);
        pn_link_open(l);
        pn_link_flow(l, (int)g->o.credit);
    }
    if (g->o.mode == LG_MODE_RECEIVE && l == g->link && !g->ready) {
        g->ready = true;
        fprintf(stderr, "READY\n");
        fflush(stderr);
    }
}

static void on_remote_close(lg_t *g, pn_event_t *e)
{
    pn_event_type_t t = pn_event_type(e);
    pn_condition_t *cond = t == PN_LINK_REMOTE_CLOSE ? pn_link_remote_condition(pn_event_link(e))
                           : t == PN_SESSION_REMOTE_CLOSE
                               ? pn_session_remote_condition(pn_event_session(e))
                               : pn_connection_remote_condition(pn_event_connection(e));

    if (!g->closing) {
        problem(g, "peer closed %s before the run finished%s%s",
                t == PN_LINK_REMOTE_CLOSE      ? "the link"
                : t == PN_SESSION_REMOTE_CLOSE ? "the session"
                                               : "the connection",
                pn_condition_is_set(cond) ? ": " : "",
                pn_condition_is_set(cond) ? pn_condition_get_description(cond) : "");
        g->closing = true;
    }
    pn_connection_close(g->conn);
}

static void handle(lg_t *g, pn_event_t *e)
{
    switch (pn_event_type(e)) {
    case PN_CONNECTION_BOUND:
        if (!g->o.listen) {
            pn_connection_open(g->conn);
            if (g->o.mode == LG_MODE_SEND)
                sender_open(g, g->conn);
            else
                receiver_open(g, g->conn);
        }
        break;
    case PN_CONNECTION_REMOTE_OPEN:
        if (pn_connection_state(g->conn) & PN_LOCAL_UNINIT)
            pn_connection_open(g->conn);
        if (g->o.tls_ca && !g->o.listen) {
            /* what TLS the router negotiated, for the benchmark to show */
            char             proto[32] = "?", cipher[64] = "?";
            pn_ssl_t        *ssl = pn_ssl(pn_event_transport(e));
            if (ssl) {
                pn_ssl_get_protocol_name(ssl, proto, sizeof(proto));
                pn_ssl_get_cipher_name(ssl, cipher, sizeof(cipher));
            }
            fprintf(stderr, "TLS %s %s\n", proto, cipher);
        }
        break;
    case PN_SESSION_REMOTE_OPEN:
        if (pn_session_state(pn_event_session(e)) & PN_LOCAL_UNINIT)
            pn_session_open(pn_event_session(e));
        break;
    case PN_LINK_REMOTE_OPEN:
        on_link_remote_open(g, pn_event_link(e));
        break;
    case PN_LINK_FLOW:
        if (g->o.mode == LG_MODE_SEND)
            sender_pump(g);
        break;
    case PN_DELIVERY: {
        pn_delivery_t *d = pn_event_delivery(e);

        if (pn_link_is_sender(pn_delivery_link(d)))
            sender_delivery(g, d);
        else
            receiver_delivery(g, d);
        break;
    }
    case PN_LINK_REMOTE_CLOSE:
    case PN_SESSION_REMOTE_CLOSE:
    case PN_CONNECTION_REMOTE_CLOSE:
        on_remote_close(g, e);
        break;
    case PN_TRANSPORT_CLOSED:
        on_transport_closed(g, e);
        break;
    default:
        break;
    }
}

/* ---- sockets and the I/O loop ---- */

/* Split "HOST:PORT" (the last colon) into host and port.  Returns false if there is none. */
static bool split_hostport(const char *hp, char *host, size_t hlen, const char **port)
{
    const char *colon = strrchr(hp, ':');

    if (!colon || (size_t)(colon - hp) >= hlen)
        return false;
    memcpy(host, hp, (size_t)(colon - hp));
    host[colon - hp] = '\0';
    *port = colon + 1;
    return true;
}

/* A TCP socket bound (listen) or connected (connect) to HOST:PORT, numeric addresses only
 * (this tool talks to 127.0.0.1).  Returns the descriptor, or -1 after printing why. */
static int socket_open(const char *hp, bool listen_mode)
{
    struct addrinfo hints = {0}, *ai = NULL;
    char            host[256];
    const char     *port;
    int             fd = -1, one = 1, rc;

    if (!split_hostport(hp, host, sizeof(host), &port)) {
        fprintf(stderr, "junction-loadgen: expected HOST:PORT, got '%s'\n", hp);
        return -1;
    }
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | (listen_mode ? AI_PASSIVE : 0);
    rc = getaddrinfo(host, port, &hints, &ai);
    if (rc != 0) {
        fprintf(stderr, "junction-loadgen: %s: %s\n", hp, gai_strerror(rc));
        return -1;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto out_err;
    if (listen_mode) {
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 4) != 0)
            goto out_err;
    } else if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        goto out_err;
    }
    freeaddrinfo(ai);
    return fd;
out_err:
    fprintf(stderr, "junction-loadgen: %s %s: %s\n", listen_mode ? "listen" : "connect", hp,
            strerror(errno));
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
    return -1;
}

/* Print "LISTENING HOST:PORT" for the listening socket, wait (at most timeout seconds) for
 * one connection and return it; the listening socket is closed.  -1 on failure. */
static int socket_accept_one(int lfd, double timeout)
{
    struct sockaddr_storage ss;
    socklen_t               len = sizeof(ss);
    char                    host[NI_MAXHOST], port[NI_MAXSERV];
    struct pollfd           pfd = {lfd, POLLIN, 0};
    int                     fd = -1;

    if (getsockname(lfd, (struct sockaddr *)&ss, &len) != 0 ||
        getnameinfo((struct sockaddr *)&ss, len, host, sizeof(host), port, sizeof(port),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        fprintf(stderr, "junction-loadgen: cannot read the listening address\n");
        goto out_close;
    }
    fprintf(stderr, "LISTENING %s:%s\n", host, port);
    fflush(stderr);
    if (poll(&pfd, 1, (int)(timeout * 1000)) != 1) {
        fprintf(stderr, "junction-loadgen: nobody connected within %.0f s\n", timeout);
        goto out_close;
    }
    fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0)
        fprintf(stderr, "junction-loadgen: accept: %s\n", strerror(errno));
out_close:
    close(lfd);
    return fd;
}

/* Give up when nothing happened for --timeout seconds: close, and leave the loop if even the
 * close does not complete within two seconds. */
static void check_timeout(lg_t *g, uint64_t now)
{
    if (g->give_up_ns) {
        if (now > g->give_up_ns)
            g->done = true;
        return;
    }
    if ((double)(now - g->last_progress_ns) > g->o.timeout * 1e9) {
        problem(g, "no progress for %.0f s: giving up", g->o.timeout);
        g->closing = true;
        g->give_up_ns = now + 2000000000u;
        pn_connection_close(g->conn);
    }
}

/* Drive the connection until it is finished: run Proton's events, write everything it has
 * to write, read one chunk, and sleep in poll() only when the socket can do neither. */
static void run(lg_t *g)
{
    pn_connection_driver_t *d = &g->driver;

    while (!g->done && !pn_connection_driver_finished(d)) {
        pn_event_t  *e;
        pn_bytes_t   wb;
        pn_rwbytes_t rb;
        bool         progress = false, want_write = false;

        while ((e = pn_connection_driver_next_event(d)))
            handle(g, e);
        if (g->o.mode == LG_MODE_SEND)
            sender_pump(g); /* Proton's output drained: room for more */
        while ((wb = pn_connection_driver_write_buffer(d)).size > 0) {
            ssize_t n = send(g->fd, wb.start, wb.size, MSG_NOSIGNAL | MSG_DONTWAIT);

            if (n > 0) {
                pn_connection_driver_write_done(d, (size_t)n);
                progress = true;
            } else if (n < 0 && errno == EINTR) {
                continue;
            } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                want_write = true;
                break;
            } else {
                pn_connection_driver_errorf(d, "junction-loadgen:io", "send: %s", strerror(errno));
                pn_connection_driver_write_close(d);
                progress = true;
                break;
            }
        }
        /* Read up to LG_READ_BUDGET bytes, running the events of each chunk, so that the
         * dispositions and credit they produce go out in one write. */
        for (size_t got = 0; got < LG_READ_BUDGET;) {
            ssize_t n;

            rb = pn_connection_driver_read_buffer_sized(d, LG_READ_CHUNK);
            if (rb.size == 0)
                break;
            n = recv(g->fd, rb.start, rb.size, MSG_DONTWAIT);
            if (n > 0) {
                pn_connection_driver_read_done(d, (size_t)n);
                got += (size_t)n;
                progress = true;
                while ((e = pn_connection_driver_next_event(d)))
                    handle(g, e);
                continue;
            }
            if (n == 0) {
                pn_connection_driver_read_close(d);
                progress = true;
            } else if (errno == EINTR) {
                continue;
            } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
                pn_connection_driver_errorf(d, "junction-loadgen:io", "recv: %s", strerror(errno));
                pn_connection_driver_read_close(d);
                progress = true;
            }
            break;
        }
        if (!progress && !pn_connection_driver_has_event(d)) {
            struct pollfd pfd = {
                g->fd, (short)((rb.size > 0 ? POLLIN : 0) | (want_write ? POLLOUT : 0)), 0};
            int ms = 500;

            if (g->next_due_ns) { /* --rate: wake up when the next message is due */
                uint64_t now = now_ns();

                ms = now >= g->next_due_ns ? 0 : (int)((g->next_due_ns - now + 999999) / 1000000);
                ms = ms < 500 ? ms : 500;
            }
            poll(&pfd, 1, ms);
        }
        check_timeout(g, now_ns());
    }
}

/* ---- main ---- */

static void usage(FILE *f)
{
    fprintf(f, "usage: junction-loadgen send    --url HOST:PORT [OPTIONS]\n"
               "       junction-loadgen receive --url HOST:PORT [OPTIONS]\n"
               "       junction-loadgen receive --listen HOST:PORT [OPTIONS]\n"
               "\n"
               "  -a, --address A       link address (default \"bench\")\n"
               "  -n, --count N         send N messages (default: use --seconds)\n"
               "  -s, --seconds S       send for S seconds (default 5)\n"
               "  -N, --annotations N   message annotations per message, 100 bytes each "
               "(default 0)\n"
               "  -w, --credit W        receiver: credit window; sender: most unsettled "
               "(default 1000)\n"
               "  -f, --max-frame B     transport max frame size (default 16384)\n"
               "  -t, --timeout S       give up after S seconds without progress (default 30)\n"
               "  -r, --rate R          sender: R messages per second (default: as fast as\n"
               "                        the credit allows); for latency below saturation\n"
               "  -i, --inject KIND[@SEQ]  sender: one deliberate fault at sequence number SEQ\n"
               "                        (default 100), to check the receiver: loss, duplicate,\n"
               "                        corrupt-annotation, corrupt-body\n"
               "  -T, --tls-ca FILE     --url over TLS, the router's certificate checked\n"
               "                        against the CA certificates in FILE; prints\n"
               "                        \"TLS PROTOCOL CIPHER\" on stderr once the router opened\n"
               "  -h, --help            this help\n"
               "\n"
               "Prints one JSON line on stdout; exits 1 on any loss, duplicate, corruption or\n"
               "rejection.  The receiver prints READY (or LISTENING HOST:PORT) on stderr.\n");
}

static bool parse_u64(const char *s, uint64_t *v)
{
    char *end;

    errno = 0;
    *v = strtoull(s, &end, 10);
    return errno == 0 && end != s && *end == '\0' && s[0] != '-';
}

static int parse_args(lg_opts_t *o, int argc, char **argv)
{
    static const struct option longs[] = {
        {"url", required_argument, NULL, 'u'},
        {"listen", required_argument, NULL, 'l'},
        {"address", required_argument, NULL, 'a'},
        {"count", required_argument, NULL, 'n'},
        {"seconds", required_argument, NULL, 's'},
        {"annotations", required_argument, NULL, 'N'},
        {"credit", required_argument, NULL, 'w'},
        {"max-frame", required_argument, NULL, 'f'},
        {"timeout", required_argument, NULL, 't'},
        {"inject", required_argument, NULL, 'i'},
        {"rate", required_argument, NULL, 'r'},
        {"tls-ca", required_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    uint64_t v;
    int      ch;

    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0) {
        usage(stdout);
        return 1;
    }
    if (strcmp(argv[1], "send") == 0) {
        o->mode = LG_MODE_SEND;
    } else if (strcmp(argv[1], "receive") == 0) {
        o->mode = LG_MODE_RECEIVE;
    } else {
        fprintf(stderr, "junction-loadgen: unknown mode '%s' (send or receive)\n", argv[1]);
        return 2;
    }
    o->address = "bench";
    o->seconds = 5;
    o->credit = 1000;
    o->max_frame = 16384;
    o->timeout = 30;
    optind = 2;
    while ((ch = getopt_long(argc, argv, "u:l:a:n:s:N:w:f:t:i:r:T:h", longs, NULL)) != -1) {
        switch (ch) {
        case 'u':
            o->url = optarg;
            break;
        case 'l':
            o->listen = optarg;
            break;
        case 'a':
            o->address = optarg;
            break;
        case 'n':
            if (!parse_u64(optarg, &o->count) || o->count == 0)
                goto bad;
            break;
        case 's':
            o->seconds = strtod(optarg, NULL);
            if (!(o->seconds > 0))
                goto bad;
            break;
        case 'N':
            if (!parse_u64(optarg, &v) || v > LG_MAX_ANN)
                goto bad;
            o->annotations = (unsigned)v;
            break;
        case 'w':
            if (!parse_u64(optarg, &v) || v == 0 || v > 1000000)
                goto bad;
            o->credit = (unsigned)v;
            break;
        case 'f':
            if (!parse_u64(optarg, &v) || v < 512 || v > UINT32_MAX)
                goto bad;
            o->max_frame = (unsigned)v;
            break;
        case 't':
            o->timeout = strtod(optarg, NULL);
            if (!(o->timeout > 0))
                goto bad;
            break;
        case 'i': {
            static const char *const kinds[] = {"", "loss", "duplicate", "corrupt-annotation",
                                                "corrupt-body"};
            const char              *at = strchr(optarg, '@');
            size_t                   len = at ? (size_t)(at - optarg) : strlen(optarg);

            o->inject = LG_INJECT_NONE;
            for (int k = 1; k < (int)(sizeof(kinds) / sizeof(kinds[0])); k++)
                if (strlen(kinds[k]) == len && strncmp(optarg, kinds[k], len) == 0)
                    o->inject = (lg_inject_t)k;
            o->inject_at = 100;
            if (o->inject == LG_INJECT_NONE || (at && !parse_u64(at + 1, &o->inject_at)))
                goto bad;
            break;
        }
        case 'r':
            o->rate = strtod(optarg, NULL);
            if (!(o->rate > 0))
                goto bad;
            break;
        case 'T':
            o->tls_ca = optarg;
            break;
        case 'h':
            usage(stdout);
            return 1;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (o->inject == LG_INJECT_CORRUPT_ANN && o->annotations == 0) {
        fprintf(stderr, "junction-loadgen: --inject corrupt-annotation needs --annotations\n");
        return 2;
    }
    if (optind != argc || (!o->url == !o->listen) || (o->listen && o->mode != LG_MODE_RECEIVE)) {
        fprintf(stderr, "junction-loadgen: give exactly one of --url or --listen (receive)\n");
        return 2;
    }
    return 0;
bad:
    fprintf(stderr, "junction-loadgen: bad value for %s: '%s'\n", argv[optind - 1], optarg);
    return 2;
}

/* CPU seconds (user + system) this process used so far. */
static double cpu_seconds(void)
{
    struct rusage ru;

    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static void print_summary(lg_t *g)
{
    double secs = g->last_ns > g->first_ns ? (double)(g->last_ns - g->first_ns) / 1e9 : 0;

    if (g->o.mode == LG_MODE_SEND) {
        printf("{\"mode\":\"send\",\"rate\":%.0f,\"annotations\":%u,\"message_bytes\":%zu,"
               "\"messages\":%" PRIu64 ",\"accepted\":%" PRIu64
               ",\"seconds\":%.3f,\"msg_per_s\":%.0f,"
               "\"ack_p50_us\":%.1f,\"ack_p99_us\":%.1f,\"ack_max_us\":%.1f,"
               "\"not_accepted\":%" PRIu64 ",\"unsettled\":%" PRIu64 ",\"cpu_s\":%.3f,"
               "\"errors\":%" PRIu64 "}\n",
               g->o.rate, g->o.annotations, g->msg_len, g->sent, g->accepted, secs,
               secs > 0 ? (double)g->accepted / secs : 0, hist_quantile_us(&g->lat, 0.5),
               hist_quantile_us(&g->lat, 0.99), (double)g->lat.max / 1000.0, g->not_accepted,
               g->sent - g->settled, cpu_seconds(), g->errors);
    } else {
        printf("{\"mode\":\"receive\",\"annotations\":%u,\"messages\":%" PRIu64
               ",\"seconds\":%.3f,\"msg_per_s\":%.0f,\"p50_us\":%.1f,\"p99_us\":%.1f,"
               "\"max_us\":%.1f,\"lost\":%" PRIu64 ",\"duplicates\":%" PRIu64
               ",\"corrupt\":%" PRIu64 ",\"reencoded\":%" PRIu64 ",\"end\":%s,"
               "\"cpu_s\":%.3f,\"errors\":%" PRIu64 "}\n",
               g->o.annotations, g->received, secs, secs > 0 ? (double)g->received / secs : 0,
               hist_quantile_us(&g->lat, 0.5), hist_quantile_us(&g->lat, 0.99),
               (double)g->lat.max / 1000.0, g->lost, g->duplicates, g->corrupt, g->reencoded,
               g->got_end ? "true" : "false", cpu_seconds(), g->errors);
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    static lg_t     g; /* large (the histogram): static, not on the stack */
    pn_transport_t *t;
    int             rc;

    rc = parse_args(&g.o, argc, argv);
    if (rc != 0)
        return rc == 1 ? 0 : rc;
    message_build(&g);
    g.send_ns = xcalloc(g.o.credit, sizeof(*g.send_ns));
    g.rbuf_cap = g.msg_len * 2 + 4096;
    g.rbuf = xcalloc(1, g.rbuf_cap);

    g.fd = socket_open(g.o.url ? g.o.url : g.o.listen, g.o.listen != NULL);
    if (g.fd >= 0 && g.o.listen)
        g.fd = socket_accept_one(g.fd, g.o.timeout);
    if (g.fd < 0) {
        problem(&g, "no connection");
        print_summary(&g);
        return 1;
    }
    setsockopt(g.fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
    g.last_progress_ns = now_ns();
    g.conn = pn_connection();
    pn_connection_set_container(g.conn, g.o.mode == LG_MODE_SEND ? "junction-loadgen-send"
                                                                 : "junction-loadgen-receive");
    t = pn_transport();
    pn_transport_set_max_frame(t, g.o.max_frame);
    if (g.o.listen)
        pn_transport_set_server(t);
    if (g.o.tls_ca && !g.o.listen) {
        pn_ssl_domain_t *dom = pn_ssl_domain(PN_SSL_MODE_CLIENT);
        if (!dom || pn_ssl_domain_set_trusted_ca_db(dom, g.o.tls_ca) != 0 ||
            pn_ssl_domain_set_peer_authentication(dom, PN_SSL_VERIFY_PEER, NULL) != 0 ||
            pn_ssl_init(pn_ssl(t), dom, NULL) != 0) {
            fprintf(stderr, "junction-loadgen: cannot set up TLS with %s\n", g.o.tls_ca);
            return 1;
        }
        pn_ssl_domain_free(dom);
    }
    if (pn_connection_driver_init(&g.driver, g.conn, t) != 0) {
        fprintf(stderr, "junction-loadgen: cannot set up the AMQP connection\n");
        return 1;
    }
    run(&g);
    if (g.o.mode == LG_MODE_SEND) {
        if (!g.end_settled)
            problem(&g, "END was never settled");
        if (g.sent != g.settled)
            problem(&g, "%" PRIu64 " deliveries left unsettled", g.sent - g.settled);
        if (g.o.inject != LG_INJECT_NONE && !g.injected)
            problem(&g, "--inject: the run ended before sequence number %" PRIu64, g.o.inject_at);
    } else {
        if (!g.got_end)
            problem(&g, "END never arrived (%" PRIu64 " messages received)", g.received);
    }
    print_summary(&g);
    pn_connection_driver_destroy(&g.driver);
    close(g.fd);
    free(g.msg);
    free(g.pair_off);
    free(g.send_ns);
    free(g.rbuf);
    return g.errors || g.lost || g.duplicates || g.corrupt || g.not_accepted ? 1 : 0;
}
