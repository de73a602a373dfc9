/* tests/unit/router/proton_payload_test.c: the Proton 0.37 facts that docs/decisions/0009
 * builds on, proved on two real Proton connection drivers joined in memory (no router).
 *
 * Input: a filter between the two strips every transfer frame's payload (the frame keeps its
 * header, with the size rewritten, and its performative) and queues the payload beside
 * Proton.  The receiving Proton must then account for each transfer exactly as for a full
 * one - delivery ids, credit, `more`, completion, aborts, the session's transfer count - and
 * the bytes beside it must make up each message.
 *
 * Output: the sending side gives Proton one placeholder byte per frame, one at a time, and a
 * filter replaces each transfer frame's placeholder with that frame's share of the message.
 * The receiving Proton (unmodified) must get every message intact, within a small session
 * window and a max-frame-size smaller than the messages, with no window violation.
 *
 * Threads: the test's own.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/connection_driver.h>
#include <proton/delivery.h>
#include <proton/event.h>
#include <proton/link.h>
#include <proton/session.h>
#include <proton/transport.h>

#define MAX_MSGS   64
#define MAX_MSG    (200u << 10)
#define BUF_MAX    (4u << 20)
#define PERF_BOUND 96 /* the most bytes a transfer performative takes here (tags <= 32) */

/* A byte queue. */
typedef struct bytes {
    uint8_t *p;
    size_t   len;
    size_t   off; /* consumed from the front */
} bytes_t;

static void bytes_add(bytes_t *b, const void *p, size_t n)
{
    assert_true(b->len + n <= BUF_MAX);
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static size_t bytes_avail(const bytes_t *b)
{
    return b->len - b->off;
}

/* One side: a connection driver and the one link it uses. */
typedef struct side {
    pn_connection_driver_t d;
    const char            *name;
    bool                   server;
    pn_link_t             *link;
    uint32_t               max_frame;  /* local max-frame-size (0: Proton's default) */
    size_t                 capacity;   /* sessions' incoming capacity (0: none) */
    int                    credit;     /* a receiver's credit, granted once open */
    /* a receiver's view */
    bool                   stripped;   /* its input's payloads are stripped (the queue below) */
    bytes_t                beside;     /* stripped payloads, in frame order */
    size_t                 ends[MAX_MSGS * 2]; /* where each delivery ends in `beside` (the
                                                  frame without `more`) */
    int                    n_ends;
    int                    next_end;   /* the first not taken */
    size_t                 msg_len[MAX_MSGS]; /* each complete message's length */
    uint8_t               *msgs;       /* the complete messages, one after the other */
    size_t                 msgs_len;
    int                    n_msgs;
    int                    n_aborted;
    size_t                 partial;    /* bytes of the message being received */
    int                    recv_eos_at_once; /* deliveries done whose pn_link_recv gave EOS at once */
    /* flows this side received: the peer's next-incoming-id and incoming-window, and the
     * transfer frames this side had sent when the flow went out */
    uint32_t               flow_next_in[4096];
    uint32_t               flow_window[4096];
    uint32_t               flow_sent[4096];
    int                    n_flows;
} side_t;

/* A direction's filter: frames from `from` to `to`. */
typedef struct pipe pipe_t;
struct pipe {
    bytes_t  staged;       /* bytes written by `from`, not yet whole frames */
    bool     header_done;  /* the 8-byte protocol header passed */
    bool     strip;        /* input proof: strip transfers' payloads into to->beside */
    bool     splice;       /* output proof: replace placeholders with `src` bytes */
    bytes_t *src;          /* the messages being sent, concatenated */
    size_t  *sizes;        /* their sizes */
    int      n_sizes;
    int      cur;          /* message being spliced */
    size_t   cur_sent;     /* its bytes spliced so far */
    int      transfers;    /* transfer frames passed */
    pipe_t  *other;        /* the opposite direction */
    uint32_t max_perf;     /* the largest transfer performative seen */
};

/* ---- a minimal reader of the performatives the filters look at ---- */

static uint32_t rd32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void wr32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* The performative at p (n bytes of frame body): its descriptor code and encoded length, and
 * the list's first fields as (type, value) for uints and booleans; -1 if not a list. */
typedef struct perf {
    uint8_t  code;
    size_t   len;
    int      count;
    bool     has[8];
    uint64_t val[8];
} perf_t;

static int perf_read(const uint8_t *p, size_t n, perf_t *f)
{
    memset(f, 0, sizeof(*f));
    if (n < 4 || p[0] != 0x00 || p[1] != 0x53)
        return -1;
    f->code = p[2];
    size_t i = 3, size, count;
    if (p[i] == 0x45) {
        f->len = 4;
        return 0;
    } else if (p[i] == 0xc0) {
        size = p[i + 1];
        count = p[i + 2];
        i += 3;
        f->len = 3 + 2 + size;
    } else if (p[i] == 0xd0) {
        size = rd32(p + i + 1);
        count = rd32(p + i + 5);
        i += 9;
        f->len = 3 + 5 + size;
    } else {
        return -1;
    }
    f->count = (int)count;
    /* the leading fields of transfer and flow: uint, binary, boolean or null */
    for (int k = 0; k < 8 && k < (int)count && i < f->len; k++) {
        uint8_t t = p[i++];
        switch (t) {
        case 0x40: break;
        case 0x43: f->has[k] = true; f->val[k] = 0; break;
        case 0x52: f->has[k] = true; f->val[k] = p[i]; i += 1; break;
        case 0x70: f->has[k] = true; f->val[k] = rd32(p + i); i += 4; break;
        case 0x41: f->has[k] = true; f->val[k] = 1; break;
        case 0x42: f->has[k] = true; f->val[k] = 0; break;
        case 0x56: f->has[k] = true; f->val[k] = p[i]; i += 1; break;
        case 0xa0: i += 1 + p[i]; break;
        case 0xb0: i += 4 + rd32(p + i); break;
        default: return 0; /* a field this reader does not need */
        }
    }
    return 0;
}

#define TRANSFER 0x14
#define FLOW     0x13

/* Move whole frames from pipe->staged to `to`'s input, as the filter says. */
static void pipe_flush(pipe_t *pp, side_t *to, side_t *from)
{
    for (;;) {
        uint8_t *p = pp->staged.p + pp->staged.off;
        size_t   n = bytes_avail(&pp->staged);
        uint8_t  out[BUF_MAX / 8];
        size_t   out_len = 0;
        if (!pp->header_done) {
            if (n < 8)
                return;
            memcpy(out, p, 8);
            out_len = 8;
            pp->staged.off += 8;
            pp->header_done = true;
        } else {
            if (n < 8)
                return;
            uint32_t size = rd32(p);
            if (n < size)
                return;
            uint32_t doff = p[4] * 4u;
            perf_t   f;
            bool     is_perf = size > doff && perf_read(p + doff, size - doff, &f) == 0;
            if (is_perf && f.code == FLOW && to->n_flows < 4096) {
                /* the flow `from` sends: what `to` is told, beside what `to` sent (every
                 * transfer that passed the other pipe was processed by `from` already) */
                to->flow_next_in[to->n_flows] = f.has[0] ? (uint32_t)f.val[0] : 0;
                to->flow_window[to->n_flows] = (uint32_t)f.val[1];
                to->flow_sent[to->n_flows] = (uint32_t)pp->other->transfers;
                to->n_flows++;
            }
            if (is_perf && f.code == TRANSFER) {
                pp->transfers++;
                size_t payload = size - doff - f.len;
                if (f.len > pp->max_perf)
                    pp->max_perf = (uint32_t)f.len;
                if (pp->strip) {
                    /* the guard's part: it sees `more`, so it knows where a delivery ends */
                    bytes_add(&to->beside, p + doff + f.len, payload);
                    if (!(f.has[5] && f.val[5]))
                        to->ends[to->n_ends++] = to->beside.len;
                    memcpy(out, p, doff + f.len);
                    wr32(out, (uint32_t)(doff + f.len));
                    out_len = doff + f.len;
                } else if (pp->splice) {
                    /* one placeholder byte stands for this frame's share of the message */
                    assert_int_equal(payload, 1);
                    bool   more = f.has[5] && f.val[5];
                    size_t left = pp->sizes[pp->cur] - pp->cur_sent;
                    uint32_t remote_max = pn_transport_get_remote_max_frame(from->d.transport);
                    size_t   share = remote_max - doff - f.len;
                    size_t take = more ? (left < share ? left : share) : left;
                    assert_true(doff + f.len + take <= remote_max); /* the frame fits */
                    memcpy(out, p, doff + f.len);
                    memcpy(out + doff + f.len, pp->src->p + pp->src->off, take);
                    pp->src->off += take;
                    pp->cur_sent += take;
                    out_len = doff + f.len + take;
                    wr32(out, (uint32_t)out_len);
                    if (!more) {
                        assert_int_equal(pp->cur_sent, pp->sizes[pp->cur]);
                        pp->cur++;
                        pp->cur_sent = 0;
                    }
                }
            }
            if (!out_len) {
                memcpy(out, p, size);
                out_len = size;
            }
            pp->staged.off += size;
        }
        /* into `to`'s input, as much as its buffer takes at a time */
        size_t done = 0;
        while (done < out_len) {
            pn_rwbytes_t rb = pn_connection_driver_read_buffer(&to->d);
            assert_true(rb.size > 0);
            size_t k = out_len - done < rb.size ? out_len - done : rb.size;
            memcpy(rb.start, out + done, k);
            pn_connection_driver_read_done(&to->d, k);
            done += k;
        }
    }
}

/* ---- the sides' event handling ---- */

/* A delivery on the receiving side: its bytes come from Proton, or (stripped) from beside. */
static void on_delivery(side_t *s, pn_delivery_t *dv)
{
    pn_link_t *l = pn_delivery_link(dv);
    if (pn_delivery_aborted(dv)) {
        s->n_aborted++;
        s->partial = 0;
        pn_delivery_settle(dv);
        return;
    }
    char    buf[4096];
    ssize_t n;
    while ((n = pn_link_recv(l, buf, sizeof(buf))) > 0) {
        assert_false(s->stripped); /* stripped: Proton holds no payload */
        memcpy(s->msgs + s->msgs_len + s->partial, buf, (size_t)n);
        s->partial += (size_t)n;
    }
    if (pn_delivery_partial(dv)) {
        assert_int_equal(n, 0); /* more to come: not the end */
        return;
    }
    assert_int_equal(n, PN_EOS);
    if (s->stripped) {
        s->recv_eos_at_once++;
        /* the message: the bytes beside Proton up to its last frame */
        assert_true(s->next_end < s->n_ends);
        size_t k = s->ends[s->next_end++] - s->beside.off;
        memcpy(s->msgs + s->msgs_len, s->beside.p + s->beside.off, k);
        s->beside.off += k;
        s->partial = k;
    }
    s->msg_len[s->n_msgs++] = s->partial;
    s->msgs_len += s->partial;
    s->partial = 0;
    pn_delivery_update(dv, PN_ACCEPTED);
    pn_delivery_settle(dv);
    pn_link_flow(l, 1);
}

static void side_events(side_t *s)
{
    pn_event_t *e;
    while ((e = pn_connection_driver_next_event(&s->d)) != NULL) {
        switch (pn_event_type(e)) {
        case PN_CONNECTION_REMOTE_OPEN:
            if (s->server)
                pn_connection_open(pn_event_connection(e));
            break;
        case PN_SESSION_REMOTE_OPEN: {
            pn_session_t *ssn = pn_event_session(e);
            if (pn_session_state(ssn) & PN_LOCAL_UNINIT) {
                if (s->capacity)
                    pn_session_set_incoming_capacity(ssn, s->capacity);
                pn_session_open(ssn);
            }
            break;
        }
        case PN_LINK_REMOTE_OPEN: {
            pn_link_t *l = pn_event_link(e);
            if (pn_link_state(l) & PN_LOCAL_UNINIT) {
                pn_link_open(l);
                s->link = l;
            }
            if (pn_link_is_receiver(l) && s->credit) {
                pn_link_flow(l, s->credit);
                s->credit = 0;
            }
            break;
        }
        case PN_DELIVERY: {
            pn_delivery_t *dv = pn_event_delivery(e);
            if (pn_link_is_receiver(pn_delivery_link(dv)) && pn_delivery_readable(dv))
                on_delivery(s, dv);
            break;
        }
        case PN_TRANSPORT_ERROR: {
            pn_condition_t *c = pn_transport_condition(s->d.transport);
            fail_msg("%s: transport error %s: %s", s->name, pn_condition_get_name(c),
                     pn_condition_get_description(c));
            break;
        }
        default:
            break;
        }
    }
}

/* One round: each side handles its events and writes; the bytes go through the pipes. */
static void pump(side_t *a, side_t *b, pipe_t *ab, pipe_t *ba)
{
    side_events(a);
    side_events(b);
    side_t *sides[2] = {a, b};
    pipe_t *pipes[2] = {ab, ba};
    side_t *peers[2] = {b, a};
    for (int i = 0; i < 2; i++) {
        pn_bytes_t wb;
        while ((wb = pn_connection_driver_write_buffer(&sides[i]->d)).size > 0) {
            bytes_add(&pipes[i]->staged, wb.start, wb.size);
            pn_connection_driver_write_done(&sides[i]->d, wb.size);
        }
        pipe_flush(pipes[i], peers[i], sides[i]);
    }
    side_events(a);
    side_events(b);
}

static void side_init(side_t *s, const char *name, bool server)
{
    memset(s, 0, sizeof(*s));
    s->name = name;
    s->server = server;
    assert_int_equal(pn_connection_driver_init(&s->d, pn_connection(), pn_transport()), 0);
    if (server)
        pn_transport_set_server(s->d.transport);
    s->beside.p = malloc(BUF_MAX);
    s->msgs = malloc(BUF_MAX);
}

static void side_fini(side_t *s)
{
    pn_connection_driver_destroy(&s->d);
    free(s->beside.p);
    free(s->msgs);
}

static void pipes_init(pipe_t *ab, pipe_t *ba)
{
    memset(ab, 0, sizeof(*ab));
    memset(ba, 0, sizeof(*ba));
    ab->staged.p = malloc(BUF_MAX);
    ba->staged.p = malloc(BUF_MAX);
    ab->other = ba;
    ba->other = ab;
}

/* A sender a (the client) and a receiver b (the server), joined by the pipes ab and ba. */
static void pair_init(side_t *a, side_t *b, pipe_t *ab, pipe_t *ba)
{
    side_init(a, "sender", false);
    side_init(b, "receiver", true);
    pipes_init(ab, ba);
}

static void pair_fini(side_t *a, side_t *b, pipe_t *ab, pipe_t *ba)
{
    side_fini(a);
    side_fini(b);
    free(ab->staged.p);
    free(ba->staged.p);
}

/* Every flow the receiver sent counted exactly the transfer frames it had been given. */
static void assert_flows_exact(const side_t *sender)
{
    assert_true(sender->n_flows > 0);
    for (int i = 0; i < sender->n_flows; i++)
        assert_int_equal(sender->flow_next_in[i], sender->flow_sent[i]);
}

/* The client (a) opens a connection, a session and a sender; the server (b) receives. */
static pn_link_t *open_sender(side_t *a, side_t *b, pipe_t *ab, pipe_t *ba)
{
    if (a->max_frame)
        pn_transport_set_max_frame(a->d.transport, a->max_frame);
    if (b->max_frame)
        pn_transport_set_max_frame(b->d.transport, b->max_frame);
    pn_connection_t *c = a->d.connection;
    pn_connection_set_container(c, "a");
    pn_connection_open(c);
    pn_session_t *ssn = pn_session(c);
    pn_session_open(ssn);
    pn_link_t *snd = pn_sender(ssn, "payloads");
    pn_terminus_set_address(pn_link_target(snd), "q");
    pn_link_open(snd);
    for (int i = 0; i < 20 && pn_link_credit(snd) <= 0; i++)
        pump(a, b, ab, ba);
    assert_true(pn_link_credit(snd) > 0);
    return snd;
}

static void fill(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = (uint8_t)(seed >> 16);
    }
}

static const size_t SIZES[] = {1, 100, 4000, 4096, 5000, 20000, 100000, 3, 65536, 150000};
#define N_SIZES (sizeof(SIZES) / sizeof(SIZES[0]))

/* Input: every transfer's payload stripped before the receiving Proton sees it.  The
 * receiver's max-frame-size (4096) is smaller than most messages, so the sender splits them;
 * its session capacity is 4 frames, so the window closes and reopens all along. */
static void test_input_payloads_stripped(void **state)
{
    (void)state;
    side_t a, b;
    pipe_t ab, ba;
    pair_init(&a, &b, &ab, &ba);
    b.max_frame = 4096;
    b.capacity = 4 * 4096;
    b.credit = 3;
    b.stripped = true;
    ab.strip = true;
    pn_link_t *snd = open_sender(&a, &b, &ab, &ba);

    uint8_t *all = malloc(BUF_MAX);
    size_t   total = 0;
    for (size_t i = 0; i < N_SIZES; i++) {
        fill(all + total, SIZES[i], (uint32_t)i + 1);
        total += SIZES[i];
    }
    size_t off = 0;
    size_t next = 0;
    for (int round = 0; round < 10000 && b.n_msgs < (int)N_SIZES; round++) {
        /* a message is sent whole when the sender has credit for it */
        if (next < N_SIZES && pn_link_credit(snd) > 0) {
            char tag[8];
            int  tl = snprintf(tag, sizeof(tag), "t%zu", next);
            pn_delivery(snd, pn_dtag(tag, (size_t)tl));
            assert_int_equal(pn_link_send(snd, (const char *)all + off, SIZES[next]),
                             (ssize_t)SIZES[next]);
            pn_link_advance(snd);
            off += SIZES[next];
            next++;
        }
        pump(&a, &b, &ab, &ba);
    }
    assert_int_equal(b.n_msgs, N_SIZES);
    assert_int_equal(b.recv_eos_at_once, N_SIZES); /* Proton held none of the payload */
    for (size_t i = 0; i < N_SIZES; i++)
        assert_int_equal(b.msg_len[i], SIZES[i]);
    assert_memory_equal(b.msgs, all, total);
    assert_true(ab.transfers > (int)N_SIZES); /* multi-frame deliveries were among them */
    /* the receiver's flows count every transfer frame: the last one says next-incoming-id
     * = all the frames the sender wrote (Proton's first id is 0) */
    pump(&a, &b, &ab, &ba);
    assert_flows_exact(&a);
    for (int i = 0; i < a.n_flows; i++)
        assert_true(a.flow_window[i] <= 4); /* never more than capacity / frame */
    free(all);
    pair_fini(&a, &b, &ab, &ba);
}

/* Input: an aborted multi-frame delivery, payload stripped, is reported aborted and the
 * next message comes whole. */
static void test_input_abort_stripped(void **state)
{
    (void)state;
    side_t a, b;
    pipe_t ab, ba;
    pair_init(&a, &b, &ab, &ba);
    b.max_frame = 4096;
    b.capacity = 16 * 4096;
    b.credit = 5;
    b.stripped = true;
    ab.strip = true;
    pn_link_t *snd = open_sender(&a, &b, &ab, &ba);
    static uint8_t big[30000];
    fill(big, sizeof(big), 7);
    pn_delivery_t *d = pn_delivery(snd, pn_dtag("x", 1));
    pn_link_send(snd, (const char *)big, 10000); /* three frames, then the abort */
    pump(&a, &b, &ab, &ba);
    pump(&a, &b, &ab, &ba);
    size_t stripped_before = bytes_avail(&b.beside);
    assert_int_equal(stripped_before, 10000);
    pn_delivery_abort(d);
    pump(&a, &b, &ab, &ba);
    assert_int_equal(b.n_aborted, 1);
    /* an aborted delivery's bytes are dropped, up to its last (aborted) frame */
    assert_int_equal(b.n_ends, 1);
    b.beside.off = b.ends[b.next_end++];
    pn_delivery(snd, pn_dtag("y", 1));
    pn_link_send(snd, (const char *)big, sizeof(big));
    pn_link_advance(snd);
    for (int i = 0; i < 50 && b.n_msgs < 1; i++)
        pump(&a, &b, &ab, &ba);
    assert_int_equal(b.n_msgs, 1);
    assert_int_equal(b.msg_len[0], sizeof(big));
    assert_memory_equal(b.msgs, big, sizeof(big));
    pair_fini(&a, &b, &ab, &ba);
}

/* Output: the sender gives Proton one placeholder byte per frame, the next only once Proton
 * wrote the previous, and the filter splices each frame's share of the message in.  The
 * receiver is an unmodified Proton with max-frame-size 4096 and a session window of 2
 * frames. */
static void test_output_placeholders_spliced(void **state)
{
    (void)state;
    side_t a, b;
    pipe_t ab, ba;
    pair_init(&a, &b, &ab, &ba);
    b.max_frame = 4096;
    b.capacity = 2 * 4096;
    b.credit = 2;
    ab.splice = true;
    bytes_t src = {.p = malloc(BUF_MAX)};
    size_t  sizes[N_SIZES];
    for (size_t i = 0; i < N_SIZES; i++) {
        uint8_t tmp[MAX_MSG];
        sizes[i] = SIZES[i];
        fill(tmp, SIZES[i], (uint32_t)i + 11);
        bytes_add(&src, tmp, SIZES[i]);
    }
    ab.src = &src;
    ab.sizes = sizes;
    ab.n_sizes = (int)N_SIZES;
    pn_link_t *snd = open_sender(&a, &b, &ab, &ba);
    uint32_t remote_max = pn_transport_get_remote_max_frame(a.d.transport);
    assert_int_equal(remote_max, 4096);
    /* the least a frame can carry: the frame header and the largest performative off */
    size_t share_min = remote_max - 8 - PERF_BOUND;

    size_t         next = 0, left = 0;
    pn_delivery_t *cur = NULL;
    int            placeholders = 0;
    for (int round = 0; round < 20000 && b.n_msgs < (int)N_SIZES; round++) {
        if (!cur && next < N_SIZES && pn_link_credit(snd) > 0) {
            char tag[8];
            int  tl = snprintf(tag, sizeof(tag), "t%zu", next);
            cur = pn_delivery(snd, pn_dtag(tag, (size_t)tl));
            left = SIZES[next];
            next++;
        }
        /* the next placeholder once Proton wrote the last one */
        if (cur && pn_delivery_pending(cur) == 0) {
            pn_link_send(snd, "?", 1);
            placeholders++;
            if (left <= share_min) { /* this frame takes the rest: the last */
                pn_link_advance(snd);
                cur = NULL;
            } else {
                left -= share_min; /* at least that much goes in this frame */
            }
        }
        pump(&a, &b, &ab, &ba);
    }
    assert_int_equal(b.n_msgs, N_SIZES);
    for (size_t i = 0; i < N_SIZES; i++)
        assert_int_equal(b.msg_len[i], SIZES[i]);
    assert_memory_equal(b.msgs, src.p, src.len);
    assert_int_equal(ab.transfers, placeholders); /* one frame per placeholder */
    assert_true(ab.max_perf <= PERF_BOUND);
    for (int i = 0; i < 5; i++)
        pump(&a, &b, &ab, &ba);
    assert_flows_exact(&a);
    free(src.p);
    pair_fini(&a, &b, &ab, &ba);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_input_payloads_stripped),
        cmocka_unit_test(test_input_abort_stripped),
        cmocka_unit_test(test_output_placeholders_spliced),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
