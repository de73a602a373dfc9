/* router/http_ws.c: the WebSockets of the HTTP server - AMQP over WebSocket (subprotocols
 * "amqp", "binary", "AMQPWSB10") pumped through a socketpair to a worker, with back-pressure
 * both ways, and the console's live feed (subprotocol "junction-mgmt"), a management
 * session.  router/DESIGN.md "The HTTP server".
 *
 * Threads: the admin thread runs every function here (lws callbacks, our uv_pipe's).
 * Lifetimes: ws_amqp_t and ws_mgmt_t are heap objects pointed at from lws's per-session
 * memory; a ws_amqp_t outlives its WebSocket until its pipe handle closed.
 */
#include "router/http_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define LOG HTTP_LOG

#define WS_AMQP_CHUNK (64u << 10) /* bytes read from the router per WebSocket message */

/* "host:port" of the connection's peer. */
static void wsi_peer(struct lws *wsi, char *buf, size_t len)
{
    struct sockaddr_storage ss;
    socklen_t               sl = sizeof(ss);
    snprintf(buf, len, "?");
    int fd = lws_get_socket_fd(wsi);
    if (fd >= 0 && getpeername(fd, (struct sockaddr *)&ss, &sl) == 0)
        rtr_sockaddr_format(&ss, buf, len);
}

/* ==================================================================== AMQP over WebSocket */

/* ws_amqp_t: one AMQP-over-WebSocket connection: the WebSocket and our end of the
 * socketpair whose other end a worker serves as an AMQP connection.  Heap; freed when the
 * pipe handle closed. */
typedef struct ws_amqp {
    uv_pipe_t   pipe;     /* first member: our end of the socketpair */
    struct lws *wsi;      /* the WebSocket; NULL once lws closed it */
    uint8_t    *rbuf;     /* LWS_PRE + WS_AMQP_CHUNK: read from the router, to the client */
    size_t      rlen;     /* bytes waiting in rbuf (after LWS_PRE) */
    char       *wdata;    /* client bytes in a uv_write to the router */
    size_t      wcap;     /* allocated */
    char       *pend;     /* client bytes that arrived while that write was in flight */
    size_t      pend_len; /* their count */
    size_t      pend_cap; /* allocated */
    uv_write_t  wreq;     /* the write in flight */
    bool        writing;  /* a uv_write is in flight (the WebSocket is not read meanwhile) */
    bool        reading;  /* uv_read_start active */
    bool        eof;      /* the router side ended: close the WebSocket once rbuf is sent */
    bool        closing;  /* uv_close called */
} ws_amqp_t;

static void amqp_closed_cb(uv_handle_t *h)
{
    ws_amqp_t *b = (ws_amqp_t *)h;
    free(b->rbuf);
    free(b->wdata);
    free(b->pend);
    free(b);
}

static void amqp_close(ws_amqp_t *b)
{
    if (b->closing)
        return;
    b->closing = true;
    uv_close((uv_handle_t *)&b->pipe, amqp_closed_cb);
}

static void amqp_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    ws_amqp_t *b = (ws_amqp_t *)h;
    (void)suggested;
    *buf = uv_buf_init((char *)b->rbuf + LWS_PRE, WS_AMQP_CHUNK);
}

/* Router -> client: one buffer read, then nothing more until lws took it. */
static void amqp_read_cb(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf)
{
    ws_amqp_t *b = (ws_amqp_t *)st;
    (void)buf;
    if (nread == 0)
        return;
    uv_read_stop(st);
    b->reading = false;
    if (nread < 0)
        b->eof = true;
    else
        b->rlen = (size_t)nread;
    if (b->wsi)
        lws_callback_on_writable(b->wsi);
    else
        amqp_close(b);
}

static void amqp_read_on(ws_amqp_t *b)
{
    if (b->reading || b->eof || b->closing || b->rlen)
        return;
    if (uv_read_start((uv_stream_t *)&b->pipe, amqp_alloc_cb, amqp_read_cb) == 0)
        b->reading = true;
    else
        b->eof = true;
}

static void amqp_write_cb(uv_write_t *req, int status);

/* Client -> router: hand what is in pend to uv_write (swap buffers). */
static void amqp_write_pend(ws_amqp_t *b)
{
    char  *p = b->wdata;
    size_t cap = b->wcap;
    b->wdata = b->pend;
    b->wcap = b->pend_cap;
    uv_buf_t ub = uv_buf_init(b->wdata, (unsigned)b->pend_len);
    b->pend = p;
    b->pend_cap = cap;
    b->pend_len = 0;
    b->wreq.data = b;
    if (uv_write(&b->wreq, (uv_stream_t *)&b->pipe, &ub, 1, amqp_write_cb) < 0) {
        b->eof = true;
        if (b->wsi)
            lws_callback_on_writable(b->wsi);
        return;
    }
    b->writing = true;
}

static void amqp_write_cb(uv_write_t *req, int status)
{
    ws_amqp_t *b = req->data;
    b->writing = false;
    if (b->closing)
        return;
    if (status < 0) {
        b->eof = true;
        if (b->wsi)
            lws_callback_on_writable(b->wsi);
        return;
    }
    if (b->pend_len) {
        amqp_write_pend(b);
        return;
    }
    if (b->wsi)
        lws_rx_flow_control(b->wsi, 1); /* the router took everything: read the client again */
}

static void amqp_from_client(ws_amqp_t *b, const void *in, size_t len)
{
    if (b->eof || b->closing || len == 0)
        return;
    size_t off = 0;
    if (!b->writing && !b->pend_len) {
        uv_buf_t ub = uv_buf_init((char *)in, (unsigned)len);
        int      n = uv_try_write((uv_stream_t *)&b->pipe, &ub, 1);
        if (n > 0)
            off = (size_t)n;
        else if (n < 0 && n != UV_EAGAIN) {
            b->eof = true;
            lws_callback_on_writable(b->wsi);
            return;
        }
        if (off == len)
            return;
    }
    /* the socketpair is full: keep the rest, stop reading the client until it drained */
    if (b->pend_len + len - off > b->pend_cap) {
        b->pend_cap = b->pend_len + len - off;
        b->pend = base_realloc(b->pend, b->pend_cap);
    }
    memcpy(b->pend + b->pend_len, (const char *)in + off, len - off);
    b->pend_len += len - off;
    lws_rx_flow_control(b->wsi, 0);
    if (!b->writing)
        amqp_write_pend(b);
}

/* A new AMQP-over-WebSocket connection: a socketpair, one end to a worker. */
static int amqp_open(struct lws *wsi, ws_amqp_t **slot)
{
    http_listener_t *l = rtr_http__listener(wsi);
    rtr_http_t      *srv = l->srv;
    int              sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0) {
        /* this client is refused (the WebSocket closes with a reason); the next may fit */
        rtr_http__warn_limited(srv, &srv->warn_ws,
                               "AMQP over WebSocket: cannot make the connection's "
                               "socketpair",
                               errno);
        static const char why[] = "out of file descriptors";
        lws_close_reason(wsi, LWS_CLOSE_STATUS_UNEXPECTED_CONDITION, (unsigned char *)why,
                         sizeof(why) - 1);
        return -1;
    }
    ws_amqp_t *b = base_calloc(1, sizeof(*b));
    b->wsi = wsi;
    b->rbuf = base_malloc(LWS_PRE + WS_AMQP_CHUNK);
    uv_pipe_init(srv->loop, &b->pipe, 0);
    int rc = uv_pipe_open(&b->pipe, sv[0]);
    if (rc != 0) {
        rtr_http__warn_limited(srv, &srv->warn_ws,
                               "AMQP over WebSocket: cannot open the connection's "
                               "socketpair",
                               -rc);
        close(sv[0]);
        close(sv[1]);
        b->wsi = NULL;
        amqp_close(b);
        return -1;
    }
    rtr_accept_t *acc = base_calloc(1, sizeof(*acc));
    acc->listener = l->cfg;
    wsi_peer(wsi, acc->peer, sizeof(acc->peer));
    rtr_http__tls_label(wsi, acc->tls, sizeof(acc->tls)); /* wss: the rows say encrypted */
    rtr_worker_t *w = &srv->rtr->workers[srv->next_worker];
    srv->next_worker = (srv->next_worker + 1) % srv->rtr->n_workers;
    rtr_worker_post_ext(w, RTR_EXT_ACCEPT_WS, acc, sv[1]);
    stats_counter_inc(srv->shard, srv->st_ws_amqp);
    *slot = b;
    amqp_read_on(b);
    return 0;
}

int rtr_http__cb_amqp(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                      size_t len)
{
    ws_amqp_t **slot = user;
    ws_amqp_t  *b = slot ? *slot : NULL;
    switch (reason) {
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
        return rtr_http__listener(wsi)->cfg->websockets ? 0 : -1;
    case LWS_CALLBACK_ESTABLISHED:
        if (!slot)
            return -1;
        *slot = NULL;
        return amqp_open(wsi, slot) < 0 ? -1 : 0;
    case LWS_CALLBACK_RECEIVE:
        if (!b)
            return -1;
        amqp_from_client(b, in, len);
        return 0;
    case LWS_CALLBACK_SERVER_WRITEABLE:
        if (!b)
            return -1;
        if (b->rlen) {
            size_t n = b->rlen;
            b->rlen = 0;
            if (lws_write(wsi, b->rbuf + LWS_PRE, n, LWS_WRITE_BINARY) < (int)n)
                return -1;
        }
        if (b->eof) {
            lws_close_reason(wsi, LWS_CLOSE_STATUS_NORMAL, NULL, 0);
            return -1;
        }
        amqp_read_on(b);
        return 0;
    case LWS_CALLBACK_CLOSED:
        if (b) {
            b->wsi = NULL;
            *slot = NULL;
            amqp_close(b); /* the worker sees the end of its socket */
        }
        return 0;
    default:
        return 0;
    }
}

/* ==================================================================== console live feed */

/* ws_mgmt_t: one junction-mgmt WebSocket: a management session.  Heap; freed when both the
 * WebSocket closed and the session let go. */
typedef struct ws_mgmt {
    struct lws  *wsi;     /* the WebSocket; NULL once lws closed it */
    mgmt_sess_t *sess;    /* its session */
    bool         refused; /* over the cap: not counted */
    bool         ending;  /* close the WebSocket once the output went */
} ws_mgmt_t;

static void mgmt_flush(void *ctx)
{
    ws_mgmt_t *m = ctx;
    if (m->wsi)
        lws_callback_on_writable(m->wsi);
}

static void mgmt_read(void *ctx, bool on)
{
    ws_mgmt_t *m = ctx;
    if (m->wsi)
        lws_rx_flow_control(m->wsi, on ? 1 : 0);
}

static size_t mgmt_in_flight(void *ctx)
{
    (void)ctx;
    return 0; /* lws writes each message whole (or keeps the rest and holds writable back) */
}

static void mgmt_fail(void *ctx)
{
    ws_mgmt_t *m = ctx;
    m->ending = true;
    if (m->wsi)
        lws_callback_on_writable(m->wsi);
}

static const mgmt_sess_io_t mgmt_io = {
    .flush = mgmt_flush,
    .read = mgmt_read,
    .in_flight = mgmt_in_flight,
    .fail = mgmt_fail,
};

/* One reply line out as one text message (without its "\n"). */
static int mgmt_writable(ws_mgmt_t *m)
{
    mgmt_sess_t *s = m->sess;
    if (s->out_len) {
        char          *nl = memchr(s->out, '\n', s->out_len);
        size_t         line = nl ? (size_t)(nl - s->out) : s->out_len;
        size_t         used = nl ? line + 1 : line;
        unsigned char *buf = base_malloc(LWS_PRE + line + 1);
        memcpy(buf + LWS_PRE, s->out, line);
        int n = lws_write(m->wsi, buf + LWS_PRE, line, LWS_WRITE_TEXT);
        free(buf);
        if (n < (int)line)
            return -1;
        memmove(s->out, s->out + used, s->out_len - used);
        s->out_len -= used;
        if (s->out_len)
            lws_callback_on_writable(m->wsi);
        mgmt_sess_pump(s); /* drained: more of a streamed reply, more requests */
        return 0;
    }
    if (m->ending) {
        lws_close_reason(m->wsi, LWS_CLOSE_STATUS_GOINGAWAY, NULL, 0);
        return -1;
    }
    return 0;
}

int rtr_http__cb_mgmt(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                      size_t len)
{
    ws_mgmt_t **slot = user;
    ws_mgmt_t  *m = slot ? *slot : NULL;
    switch (reason) {
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
        return rtr_http__listener(wsi)->cfg->websockets ? 0 : -1;
    case LWS_CALLBACK_ESTABLISHED: {
        if (!slot)
            return -1;
        rtr_http_t *srv = rtr_http__listener(wsi)->srv;
        m = base_calloc(1, sizeof(*m));
        m->wsi = wsi;
        *slot = m;
        char        msg[128];
        const char *refuse = NULL;
        if (srv->n_mgmt >= mgmt_admin_max_clients(srv->admin)) {
            snprintf(msg, sizeof(msg), "too many console sessions (at most %u): try again later",
                     mgmt_admin_max_clients(srv->admin));
            LOG(WARNING, "Console feed: a session refused: %u open already", srv->n_mgmt);
            m->refused = true;
            refuse = msg;
        } else {
            srv->n_mgmt++;
            stats_counter_inc(srv->shard, srv->st_ws_mgmt);
        }
        m->sess = mgmt_sess_new(srv->admin, &mgmt_io, m, refuse);
        mgmt_sess_pump(m->sess);
        return 0;
    }
    case LWS_CALLBACK_RECEIVE:
        if (!m)
            return -1;
        if (m->refused || m->ending)
            return 0;
        mgmt_sess_input(m->sess, in, len, lws_is_final_fragment(wsi) != 0);
        return 0;
    case LWS_CALLBACK_SERVER_WRITEABLE:
        if (!m)
            return -1;
        return mgmt_writable(m) < 0 ? -1 : 0;
    case LWS_CALLBACK_CLOSED:
        if (m) {
            rtr_http_t *srv = rtr_http__listener(wsi)->srv;
            if (!m->refused && !srv->stopping)
                srv->n_mgmt--;
            mgmt_sess_free(m->sess);
            free(m);
            *slot = NULL;
        }
        return 0;
    default:
        return 0;
    }
}
