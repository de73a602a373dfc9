/* router/mgmt/sess.c: the management session every transport of the admin thread shares
 * (the socket's clients, admin.c; the WebSocket `junction-mgmt` subprotocol, router/http.c):
 * the input cut into request lines for mgmt_proto_handle(), the reply lines gathered for
 * the transport to write, and everything a client can make the server hold bounded.
 *
 * DESIGN:
 *   - input: a line longer than MGMT_PROTO_LINE_MAX gets a 413 error and the rest of it is
 *     dropped up to its newline; reading stops while the client has a streamed reply in
 *     progress or MGMT_SESS_OUT_MAX bytes of output waiting, so at most one line plus one
 *     read is buffered;
 *   - output: replies are never dropped, but the next request is not read until the output
 *     drained below MGMT_SESS_OUT_MAX, and a streamed reply (snapshot, query) produces its
 *     next line only then; subscription updates are refused (-EAGAIN) while the output is
 *     above MGMT_SESS_OUT_MAX, and the session then sends the latest values next time - a
 *     slow subscriber never builds a backlog.
 *
 *   client --bytes--> in[] --line--> mgmt_proto_handle() --lines--> out[] --io->flush--> client
 *                                    mgmt_proto_tick() (timer) ---^
 *                                    mgmt_proto_resume() (drained) -^
 *
 * Lifetime: a session is freed in its timer's close callback after mgmt_sess_free().
 * Threads: the admin thread only (no suffixes).
 */
#include "router/mgmt/admin.h"

#include "core/base/base.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void buf_append(char **buf, size_t *len, size_t *cap, const char *bytes, size_t n)
{
    if (*len + n > *cap) {
        size_t ncap = *cap ? *cap : 4096;
        while (ncap < *len + n)
            ncap *= 2;
        *buf = base_realloc(*buf, ncap);
        *cap = ncap;
    }
    memcpy(*buf + *len, bytes, n);
    *len += n;
}

static size_t sess_out_bytes(const mgmt_sess_t *s)
{
    return s->out_len + (s->ctx ? s->io->in_flight(s->ctx) : 0);
}

/* stats_write_fn for replies: always taken (the client is paused instead, see DESIGN). */
static int write_reply(void *ctx, const char *bytes, size_t len)
{
    mgmt_sess_t *s = ctx;
    if (s->closed || !s->ctx)
        return -EPIPE;
    buf_append(&s->out, &s->out_len, &s->out_cap, bytes, len);
    return 0;
}

/* stats_write_fn for subscription updates: refused while the client is behind. */
static int write_update(void *ctx, const char *bytes, size_t len)
{
    mgmt_sess_t *s = ctx;
    if (s->closed || !s->ctx)
        return -EPIPE;
    if (sess_out_bytes(s) >= MGMT_SESS_OUT_MAX)
        return -EAGAIN;
    buf_append(&s->out, &s->out_len, &s->out_cap, bytes, len);
    return 0;
}

bool mgmt_sess_paused(const mgmt_sess_t *s)
{
    return (s->mgmt && mgmt_proto_is_streaming(s->mgmt)) ||
           sess_out_bytes(s) >= MGMT_SESS_OUT_MAX;
}

static void sess_too_long(mgmt_sess_t *s)
{
    char msg[96];
    snprintf(msg, sizeof(msg), "request line longer than %u bytes: dropped", MGMT_PROTO_LINE_MAX);
    mgmt_proto_error(write_reply, s, 413, msg);
}

/* Answer every complete line in s->in while the client is not paused.  Bytes already known
 * to hold no newline (s->in_scanned) are not searched again: a line that arrives a byte at a
 * time (a WebSocket message in one-byte fragments) costs its length, not its square. */
static void sess_lines(mgmt_sess_t *s)
{
    size_t off = 0;
    while (!s->closed && s->ctx && !mgmt_sess_paused(s) && off < s->in_len) {
        char  *start = s->in + off;
        size_t from = off == 0 && s->in_scanned <= s->in_len ? s->in_scanned : 0;
        char  *nl = memchr(start + from, '\n', s->in_len - off - from);
        s->in_scanned = 0;
        if (s->discarding) {
            if (!nl) {
                off = s->in_len; /* still inside the over-long line */
                break;
            }
            s->discarding = false;
            off = (size_t)(nl - s->in) + 1;
            continue;
        }
        if (!nl) {
            if (s->in_len - off > MGMT_PROTO_LINE_MAX) {
                sess_too_long(s);
                s->discarding = true;
                off = s->in_len;
            } else {
                s->in_scanned = s->in_len - off; /* after the memmove below */
            }
            break;
        }
        size_t len = (size_t)(nl - start);
        off += len + 1;
        if (len > MGMT_PROTO_LINE_MAX) {
            sess_too_long(s);
            continue;
        }
        mgmt_proto_handle(s->mgmt, start, len, write_reply, s);
    }
    if (off) {
        memmove(s->in, s->in + off, s->in_len - off);
        s->in_len -= off;
    }
}

static void sess_tick_cb(uv_timer_t *t)
{
    mgmt_sess_t *s = (mgmt_sess_t *)t;
    if (s->closed || !s->ctx || !s->mgmt)
        return;
    if (mgmt_proto_tick(s->mgmt, uv_now(t->loop), write_update, s) < 0) {
        s->io->fail(s->ctx);
        return;
    }
    mgmt_sess_pump(s);
}

void mgmt_sess_pump(mgmt_sess_t *s)
{
    if (s->closed || !s->ctx)
        return;
    if (!s->mgmt) { /* refused: the error line goes out, then the transport closes */
        if (s->out_len)
            s->io->flush(s->ctx);
        if (s->ctx && s->out_len == 0 && s->io->in_flight(s->ctx) == 0)
            s->io->fail(s->ctx);
        return;
    }
    while (mgmt_proto_is_streaming(s->mgmt) && sess_out_bytes(s) < MGMT_SESS_OUT_MAX)
        mgmt_proto_resume(s->mgmt, write_reply, s);
    sess_lines(s);
    if (s->out_len && s->ctx)
        s->io->flush(s->ctx);
    if (s->closed || !s->ctx)
        return;

    bool want = !mgmt_sess_paused(s);
    if (want != s->reading) {
        s->reading = want;
        s->io->read(s->ctx, want);
        if (s->closed || !s->ctx)
            return;
    }
    int64_t due = mgmt_proto_next_due(s->mgmt, uv_now(s->tick.loop));
    if (due < 0)
        uv_timer_stop(&s->tick);
    else
        uv_timer_start(&s->tick, sess_tick_cb, (uint64_t)due, 0);
}

void mgmt_sess_in_room(mgmt_sess_t *s, size_t want)
{
    if (s->in_cap - s->in_len < want) {
        /* at least doubled, so that many small inputs are not a copy each */
        size_t cap = s->in_cap * 2;
        s->in_cap = cap > s->in_len + want ? cap : s->in_len + want;
        s->in = base_realloc(s->in, s->in_cap);
    }
}

void mgmt_sess_input(mgmt_sess_t *s, const void *bytes, size_t len, bool end_of_line)
{
    if (s->closed)
        return;
    if (bytes) {
        mgmt_sess_in_room(s, len + 1);
        memcpy(s->in + s->in_len, bytes, len);
    }
    s->in_len += len;
    if (end_of_line) {
        mgmt_sess_in_room(s, 1);
        s->in[s->in_len++] = '\n';
    }
    mgmt_sess_pump(s);
}

mgmt_sess_t *mgmt_sess_new(mgmt_admin_t *a, const mgmt_sess_io_t *io, void *ctx,
                           const char *refuse_msg)
{
    mgmt_sess_t *s = base_calloc(1, sizeof(*s));
    s->io = io;
    s->ctx = ctx;
    uv_timer_init(mgmt_admin_loop(a), &s->tick);
    if (refuse_msg) {
        mgmt_proto_error(write_reply, s, 503, refuse_msg);
        return s;
    }
    s->mgmt = mgmt_proto_new(mgmt_admin_registry(a), mgmt_admin_info(a));
    mgmt_proto_hello(s->mgmt, write_reply, s);
    return s;
}

static void sess_closed_cb(uv_handle_t *h)
{
    mgmt_sess_t *s = (mgmt_sess_t *)h;
    mgmt_proto_free(s->mgmt);
    free(s->in);
    free(s->out);
    free(s);
}

void mgmt_sess_free(mgmt_sess_t *s)
{
    if (!s || s->closed)
        return;
    s->closed = true;
    s->ctx = NULL;
    uv_close((uv_handle_t *)&s->tick, sess_closed_cb);
}
