/* router/transport.c: a connection's transport, the lowest of its layers - the socket
 * (libuv reads and writes), TLS on listeners with an sslProfile (the session is tls.c's; the
 * first byte, the decrypted input and the encrypted output are here: router/DESIGN.md "A
 * connection's layers"), the frame guard that checks every byte before Proton sees it,
 * the Proton connection driver's input and output buffers, the per-connection byte budgets
 * (what a client can make the router hold), the timer, and the end of input or output on
 * errors.  Also the lifetime of the records every layer frees (a connection, a link), and
 * the one way every layer closes a connection or a link with an AMQP error condition.
 *
 * Thread suffixes: _WT = the connection's worker only (every function in this file but
 * rtr_log_ids(), which is thread-safe).
 *
 * It runs no Proton event and knows no link's protocol: after socket and timer events it
 * calls rtr_conn_process_WT() (conn.c, the layer above), which runs Proton and the links
 * and comes back here to write (rtr_conn_write_WT), to arm reading and the timer
 * (rtr_transport_arm_WT) or to close (rtr_transport_close_WT); once the socket and the
 * timer closed it calls rtr_conn_closed_WT() before it destroys the Proton driver.
 */
#include "router/policy_conn.h"
#include "router/transport.h"

#include "router/edgeconn.h"
#include "router/irconn.h"
#include "router/link_auto.h"
#include "router/lstats.h"
#include "router/tls.h"
#include "router/zc_out.h"

#include "router/authsvc.h"
#include "router/conn_watch.h"
#include "router/connector.h"
#include "router/sasl.h"

#include "core/base/list.h"

#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/link.h>
#include <proton/sasl.h>
#include <proton/session.h>
#include <proton/transport.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void condition_set(pn_condition_t *cond, const char *name, const char *desc)
{
    pn_condition_set_name(cond, name);
    pn_condition_set_description(cond, desc ? desc : "");
}

void rtr_pn_conn_set_error_WT(pn_connection_t *pc, const char *name, const char *desc)
{
    condition_set(pn_connection_condition(pc), name, desc);
}

void rtr_pn_conn_close_error_WT(pn_connection_t *pc, const char *name, const char *desc)
{
    condition_set(pn_connection_condition(pc), name, desc);
    pn_connection_close(pc);
}

void rtr_pn_link_close_error_WT(pn_link_t *pl, const char *name, const char *desc)
{
    condition_set(pn_link_condition(pl), name, desc);
    pn_link_close(pl);
}

void rtr_log_ids(base_log_module_t mod, base_log_level_t lvl, uint64_t conn, uint64_t link,
                    const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (link)
        base_log_write(mod, lvl, "[C%llu][L%llu] %s", (unsigned long long)conn,
                       (unsigned long long)link, text);
    else
        base_log_write(mod, lvl, "[C%llu] %s", (unsigned long long)conn, text);
}

void rtr_conn_mark_dirty_WT(rtr_conn_t *c)
{
    if (c->dirty || c->closed)
        return;
    c->dirty = true;
    c->dirty_next = c->worker->dirty;
    c->worker->dirty = c;
}

void rtr_conn_free_WT(rtr_conn_t *c)
{
    rtr_worker_t *w = c->worker;
    rtr_autolink_conn_freed_WT(c);
    if (c->dirty) {
        rtr_conn_t **pp = &w->dirty;
        while (*pp != c)
            pp = &(*pp)->dirty_next;
        *pp = c->dirty_next;
    }
    BASE_DLIST_REMOVE(w->conns, c, prev, next);
    w->n_conns--;
    if (c->counted)
        atomic_fetch_sub(&w->ctx->n_open_conns, 1);
    rtr_policy_conn_free_WT(c);
    if (!stats_obj_is_none(c->stats)) /* live or sink; this worker wrote it last */
        stats_object_retire(w->ctx->stats->reg, c->stats);
    free(c->wreq); /* a write cancelled by the close */
    rtr_zc_conn_free_WT(c);
    codec_guard_fini(&c->guard);
    rtr_tls_conn_free_WT(c->tls);
    free(c->ws_tls);
    rtr_ir_free_WT(c);
    rtr_edge_free_WT(c);
    if (c->connector || c->listener->role == CFG_ROLE_ROUTE_CONTAINER)
        rtr_conn_watch_closed_WT(w->ctx->conn_watch, c->id); /* before its connector retries */
    if (c->connector)
        rtr_connector_closed(c->connector, NULL);
    free(c);
    rtr_worker_maybe_exit_WT(w);
}

void rtr_link_unlink_WT(rtr_link_t *k)
{
    rtr_conn_t *c = k->conn;
    rtr_zc_link_gone_WT(k);
    BASE_DLIST_REMOVE(c->links, k, prev, next);
    c->worker->n_links--;
    free(k);
    if (c->closed && !c->links)
        rtr_conn_free_WT(c);
}

/* The frame guard's memory (codec_guard_mem_fn): grows with the performative being checked,
 * given back once it is checked. */
static void *guard_mem(void *p, size_t n)
{
    if (n == 0) {
        free(p);
        return NULL;
    }
    return base_realloc(p, n);
}

/* Bytes of copies Proton holds but has not framed (a session or link window of the client's
 * is closed): what stays of the connection's output budget once the socket took everything
 * Proton framed.  Zero-copy links (router/zc_out.h) hold one placeholder byte in Proton per
 * frame not yet framed: their shares' bytes count instead. */
static size_t conn_unframed_WT(rtr_conn_t *c)
{
    size_t n = 0, ph, zc_bytes;
    for (pn_session_t *s = pn_session_head(c->driver.connection, 0); s; s = pn_session_next(s, 0))
        n += pn_session_outgoing_bytes(s);
    rtr_zc_unframed_WT(c, &ph, &zc_bytes);
    /* a placeholder of a link gone may stay counted in Proton after its share is dropped */
    return (n > ph ? n - ph : 0) + zc_bytes;
}

static void write_cb(uv_write_t *req, int status);

/* Write what Proton framed, the shares spliced in (router/zc_out.h): a plain connection's to
 * the socket, a TLS connection's through its session. */
static void tls_write_WT(rtr_conn_t *c);

void rtr_conn_write_WT(rtr_conn_t *c)
{
    if (c->tls) {
        tls_write_WT(c);
        return;
    }
    if (rtr_zc_write_WT(c, write_cb)) {
        /* the client has read everything Proton framed: the budgets start again */
        c->in_unanswered = 0;
        if (c->out_queued)
            c->out_queued = conn_unframed_WT(c);
    }
}

static void write_cb(uv_write_t *req, int status)
{
    rtr_conn_t *c = req->data;
    c->writing = false;
    if (c->closing)
        return;
    if (status < 0)
        pn_connection_driver_write_close(&c->driver);
    else if (!c->tls) /* Proton's bytes and the shares written (zc_out.c); TLS gave them
                         back when its session took them */
        rtr_zc_written_WT(c, c->wlen);
    c->wlen = 0;
    BASE_FREE(c->wreq); /* a connection whose socket keeps up holds no copy */
    rtr_conn_process_WT(c);
}

static bool conn_in_full_WT(rtr_conn_t *c);

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    rtr_conn_t *c = h->data;
    (void)suggested;
    if (c->tls) {
        /* a buffer for this read only (read_cb copies it into the session and frees it), so
         * an idle TLS connection holds none; a full session is not read (UV_ENOBUFS stops
         * reading, arming starts it again) */
        bool room = rtr_tls_cipher_in_WT(c->tls) < RTR_TLS_IN_MAX;
        buf->base = room ? base_malloc(RTR_TLS_READ) : NULL;
        buf->len = room ? RTR_TLS_READ : 0;
        return;
    }
    /* the connection's own read buffers (router/zin.h).  libuv reads up to 32 times per poll
     * while buffers come: the budget is checked before each read, not only after the loop's
     * pass (UV_ENOBUFS stops reading, arming starts it again) */
    if (conn_in_full_WT(c)) {
        buf->base = NULL;
        buf->len = 0;
        return;
    }
    rtr_zin_alloc_WT(c, &buf->base, &buf->len);
}

/* The frame guard refused bytes: Proton never sees them, the connection ends here. */
static void guard_refused_WT(rtr_conn_t *c)
{
    /* a connector's line (and connectionMsg) comes with the transport error (conn.c) */
    if (!c->connector && !rtr_lstats_guard_refused_WT(c)) { /* else a failed authentication */
        LOGC(c, NOTICE, "Connection from %s closed: amqp:connection:framing-error %s", c->peer,
             c->guard.why);
        c->end_logged = true; /* Proton's transport error would say it again */
    }
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->reading = false;
    pn_connection_driver_errorf(&c->driver, "amqp:connection:framing-error", "%s", c->guard.why);
    /* no more input; Proton's close frame (with the error, once the AMQP layer is up) still
     * goes out, then the connection ends */
    pn_connection_driver_read_close(&c->driver);
    c->close_after_write = true;
}

void rtr_conn_protocol_error_WT(rtr_conn_t *c, const char *name, const char *desc)
{
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
    pn_connection_driver_errorf(&c->driver, name, "%s", desc);
    pn_connection_driver_read_close(&c->driver);
    c->close_after_write = true;
}

/* No more input from the client: end once Proton has written what it has to say (Proton 0.37
 * ignores the end of input while it holds part of a frame: it would wait for the rest). */
static void input_ended_WT(rtr_conn_t *c)
{
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
    pn_connection_driver_read_close(&c->driver);
    c->close_after_write = true;
}

/* n bytes of plaintext in hand, just read (or decrypted) into c->zin.rb: through the guard
 * to Proton (payloads beside it). */
static bool plain_in_WT(rtr_conn_t *c, size_t n)
{
    if (rtr_zin_read_WT(c, n) != 0) {
        guard_refused_WT(c);
        return false;
    }
    if (c->guard.passthrough)
        rtr_lstats_bad_header_WT(c); /* Proton answers an unknown header and closes */
    c->in_unanswered += n;
    c->read_since_tick = true;
    return true;
}

/* Decrypt what the session holds into the connection's read buffers, through the guard,
 * while Proton and the input budgets take it (the rest waits: tls_stalled). */
static void tls_read_WT(rtr_conn_t *c)
{
    c->tls_stalled = false;
    while (!c->closing && !pn_connection_driver_read_closed(&c->driver)) {
        char  *base = NULL;
        size_t cap = 0;
        if (c->in_unanswered < RTR_CONN_IN_UNANSWERED_MAX && !conn_in_full_WT(c))
            rtr_zin_alloc_WT(c, &base, &cap); /* none while Proton holds back staged bytes */
        if (cap == 0) {
            c->tls_stalled = true;
            return;
        }
        const char *why = NULL;
        long        k = rtr_tls_read_WT(c->tls, base, cap, &why);
        if (k > 0) {
            if (!plain_in_WT(c, (size_t)k))
                return;
            continue;
        }
        if (k == 0 && c->tls_eof) {
            input_ended_WT(c); /* everything the client sent before its end is in Proton */
        } else if (k == -2 && c->connector) {
            /* one line per new reason, as the connector's other failures */
            char msg[300];
            const rtr_connector_addr_t *to = rtr_connector_target(c->connector);
            snprintf(msg, sizeof(msg), "Connection to %.200s:%s failed: TLS %s: %s", to->host,
                     to->port, rtr_tls_ready_WT(c->tls) ? "session" : "handshake", why);
            if (rtr_connector_note(c->connector, msg))
                LOGC(c, INFO, "%s", msg);
            c->end_logged = true;
            input_ended_WT(c);
        } else if (k == -2) {
            if (!rtr_tls_ready_WT(c->tls))
                rtr_lstats_tls_failed_WT(c, "TLS handshake failed: %s", why);
            else
                LOGC(c, INFO, "Connection from %s closed: TLS session failed: %s", c->peer, why);
            input_ended_WT(c); /* the alert (if any) goes out, then the connection ends */
        } else if (k == -1) {
            input_ended_WT(c); /* the client's close_notify */
        }
        return;
    }
}

/* requireEncryption: a client that did not start TLS is refused as qdrouterd's Proton
 * refuses it (amqp:connection:policy-error, nothing written back: the client sees the
 * connection end).  No handshake failed: tlsHandshakesFailed does not count it. */
static bool unencrypted_refused_WT(rtr_conn_t *c)
{
    LOGC(c, INFO,
         "Connection from %s closed: amqp:connection:policy-error Client connection "
         "unencrypted - forbidden (listener requires encryption)",
         c->peer);
    c->end_logged = true;
    input_ended_WT(c);
    return false;
}

/* The first bytes of a connection to a listener with an sslProfile: a TLS handshake record
 * (0x16) starts TLS; anything else is plain AMQP, or refused when the listener requires TLS.
 * The bytes are where zin's next read lands (never given to the guard when they are TLS). */
static bool tls_detect_WT(rtr_conn_t *c, const char *p, size_t n)
{
    const cfg_listener_t *l = c->listener;
    c->tls_detect = false;
    if ((uint8_t)p[0] != 0x16 || !l->ssl_profile) {
        if (l->require_encryption)
            return unencrypted_refused_WT(c);
        if (!l->require_ssl)
            return plain_in_WT(c, n); /* p is where zin's next read lands */
        rtr_lstats_tls_failed_WT(c, "not a TLS handshake, and the listener requires TLS");
        input_ended_WT(c);
        return false;
    }
    c->tls = rtr_tls_conn_new_WT(c->worker->ctx->tls, l->ssl_profile);
    if (!c->tls) {
        LOGC(c, WARNING, "Connection from %s closed: cannot start a TLS session", c->peer);
        input_ended_WT(c);
        return false;
    }
    if (rtr_sasl_listener_asks_cert(l))
        rtr_tls_conn_ask_cert_WT(c->tls);
    rtr_tls_put_cipher_WT(c->tls, p, n); /* p's room in zin's buffer takes the plaintext */
    tls_read_WT(c);
    return true;
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    rtr_conn_t *c = s->data;
    bool        tls_buf = c->tls && !c->tls_detect; /* buf is alloc_cb's TLS read buffer */
    if (c->closing) {
        if (tls_buf)
            free(buf->base);
        return;
    }
    if (tls_buf && n < 0 && n != UV_ENOBUFS) {
        /* the client's end: what the session holds still goes to Proton first */
        free(buf->base);
        uv_read_stop(s);
        c->reading = false;
        c->tls_eof = true;
        tls_read_WT(c);
    } else if (n > 0) {
        if (c->tls_detect) {
            tls_detect_WT(c, buf->base, (size_t)n);
        } else if (c->tls) {
            rtr_tls_put_cipher_WT(c->tls, buf->base, (size_t)n);
            free(buf->base);
            tls_read_WT(c);
        } else {
            plain_in_WT(c, (size_t)n);
        }
    } else if (n == UV_ENOBUFS) {
        uv_read_stop(s);
        c->reading = false;
    } else if (n < 0) {
        input_ended_WT(c);
    } else if (tls_buf) {
        free(buf->base); /* n == 0: nothing read */
    }
    rtr_conn_process_WT(c);
}

/* TLS takes Proton's output (and the shares spliced into it, router/zc_out.h) while the
 * records waiting for the socket are fewer than RTR_WRITE_COPY_MAX bytes.  Small pieces (frame
 * headers, performatives, small messages' bytes) are gathered into one record of up to 16 KiB
 * rather than a record each (a record costs its header, its tag and a pass of the cipher); a
 * piece of TLS_PIECE_OWN bytes or more goes into records of its own, uncopied. */
#define TLS_RECORD_MAX (16u << 10)
#define TLS_PIECE_OWN  (4u << 10)

typedef struct tls_out {
    rtr_tls_conn_t *t;
    size_t          len;                 /* bytes gathered in rec */
    uint8_t         rec[TLS_RECORD_MAX]; /* the next record's bytes */
} tls_out_t;

static bool tls_out_flush(tls_out_t *o)
{
    for (size_t off = 0; off < o->len;) {
        long k = rtr_tls_write_WT(o->t, o->rec + off, o->len - off);
        if (k < 0)
            return false;
        off += (size_t)k;
    }
    o->len = 0;
    return true;
}

static long tls_put(void *ctx, const void *p, size_t n)
{
    tls_out_t *o = ctx;
    if (rtr_tls_cipher_out_WT(o->t) >= RTR_WRITE_COPY_MAX)
        return 0;
    if (n < TLS_PIECE_OWN) {
        if (o->len + n > TLS_RECORD_MAX && !tls_out_flush(o))
            return -1;
        memcpy(o->rec + o->len, p, n);
        o->len += n;
        return (long)n;
    }
    if (!tls_out_flush(o)) /* the stream's order */
        return -1;
    size_t done = 0;
    while (done < n && rtr_tls_cipher_out_WT(o->t) < RTR_WRITE_COPY_MAX) {
        long k = rtr_tls_write_WT(o->t, (const uint8_t *)p + done, n - done);
        if (k < 0)
            return -1;
        done += (size_t)k;
    }
    return (long)done;
}

/* Proton's output through TLS: encrypted as the zero-copy writer hands it over (each byte
 * given back once the session took it: the session keeps its records), then the records
 * written (uv_try_write, then one uv_write of what it did not take).  The budgets start again
 * once the session took everything Proton framed and the socket took every record. */
static void tls_write_WT(rtr_conn_t *c)
{
    rtr_tls_conn_t *t = c->tls;
    tls_out_t       o;
    o.t = t;
    o.len = 0;
    while (!c->writing && !c->closing) {
        bool taken = false; /* the session took everything Proton framed */
        if (rtr_tls_ready_WT(t)) {
            if (!pn_connection_driver_write_closed(&c->driver))
                taken = rtr_zc_put_WT(c, tls_put, &o);
            if (o.len && !tls_out_flush(&o))
                pn_connection_driver_write_close(&c->driver);
            if (pn_connection_driver_write_closed(&c->driver))
                rtr_tls_shutdown_WT(t); /* Proton said its last: close_notify */
        }
        size_t pend = rtr_tls_cipher_out_WT(t);
        if (pend == 0) {
            if (taken) {
                /* the client has read everything Proton framed: the budgets start again */
                c->in_unanswered = 0;
                if (c->out_queued)
                    c->out_queued = conn_unframed_WT(c);
            }
            break;
        }
        if (!c->wreq)
            c->wreq = base_malloc(sizeof(*c->wreq));
        size_t   len = rtr_tls_take_cipher_WT(t, c->wreq->data, RTR_WRITE_COPY_MAX);
        uv_buf_t b = uv_buf_init(c->wreq->data, (unsigned)len);
        int      n = uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
        if (n == (int)len)
            continue;
        if (n < 0 && n != UV_EAGAIN) {
            pn_connection_driver_write_close(&c->driver);
            break;
        }
        size_t   done = n > 0 ? (size_t)n : 0;
        uv_buf_t rest = uv_buf_init(c->wreq->data + done, (unsigned)(len - done));
        c->wreq->req.data = c;
        c->wlen = len - done;
        if (uv_write(&c->wreq->req, (uv_stream_t *)&c->tcp, &rest, 1, write_cb) == 0) {
            c->writing = true;
            break;
        }
        pn_connection_driver_write_close(&c->driver);
        break;
    }
    if (!c->writing)
        BASE_FREE(c->wreq);
}

/* The local idle timeout Proton is given (0: none), from the listener's (or connector's)
 * idleTimeoutSeconds. */
static uint32_t idle_ms(const cfg_listener_t *l)
{
    return l->idle_timeout_seconds * 1000u;
}

/* True when the router reads c and bytes wait in its socket. */
static bool input_waiting_WT(rtr_conn_t *c)
{
    uv_os_fd_t fd;
    char       b;
    if (!c->reading || c->closing || uv_fileno((uv_handle_t *)&c->tcp, &fd) != 0)
        return false;
    return recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
}

int64_t rtr_transport_tick_WT(rtr_conn_t *c, uint64_t now)
{
    if (c->tick_due && (int64_t)now >= c->tick_due && !c->read_since_tick &&
        idle_ms(c->listener) && input_waiting_WT(c))
        return (int64_t)now + 1; /* a timer at 0 ms would run again before the poll */
    c->read_since_tick = false;
    c->tick_due = pn_transport_tick(c->driver.transport, (int64_t)now);
    return c->tick_due;
}

static void timer_cb(uv_timer_t *t)
{
    rtr_conn_t *c = t->data;
    if (rtr_zin_stalled(&c->zin))
        rtr_zin_push_WT(c);
    if (c->tls && c->tls_stalled)
        tls_read_WT(c); /* after the push: a read lands only once Proton took the last */
    rtr_conn_process_WT(c);
}

/* One of c's handles closed; after the last one the connection's Proton objects go, and c
 * too unless a link still waits for the core's detach (rtr_link_unlink_WT frees it then). */
static void handle_closed_cb(uv_handle_t *h)
{
    rtr_conn_t *c = h->data;
    if (--c->handles > 0)
        return;
    rtr_conn_closed_WT(c);
    rtr_zin_fini_WT(c); /* touches no Proton object: they go next */
    pn_connection_driver_destroy(&c->driver);
    c->closed = true;
    if (!c->connector)
        LOGC(c, INFO, "Connection from %s closed", c->peer);
    else if (c->peer_opened) /* one that never opened is its connector's line, if news */
        LOGC(c, INFO, "Connection to %s closed", c->peer);
    if (!c->links)
        rtr_conn_free_WT(c);
}

void rtr_transport_close_WT(rtr_conn_t *c)
{
    if (c->closing)
        return;
    c->closing = true;
    uv_timer_stop(&c->timer);
    uv_close((uv_handle_t *)&c->timer, handle_closed_cb);
    uv_close((uv_handle_t *)&c->tcp, handle_closed_cb);
}

/* initialHandshakeTimeoutSeconds: a client that has not opened its connection in time is
 * closed (the socket may have sent nothing, or only a protocol header). */
void rtr_conn_handshake_expired_WT(rtr_conn_t *c)
{
    c->handshake_due = 0;
    if (!rtr_lstats_handshake_expired_WT(c)) /* else logged as a TLS or SASL failure */
        LOGC(c, NOTICE, "Connection from %s closed: no AMQP open within %u seconds", c->peer,
             c->listener->handshake_timeout_seconds);
    pn_connection_driver_errorf(&c->driver, "amqp:resource-limit-exceeded",
                                "no AMQP open within %u seconds",
                                c->listener->handshake_timeout_seconds);
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
    pn_connection_driver_read_close(&c->driver);
    c->close_after_write = true; /* whatever Proton says next is the last */
}

/* The connection's input budget: the router reads whatever a delivery brings at once, except
 * for links stopped by Q2 (their copies lag) and link-routed links stopped by their pair's
 * lag (router/linkroute.c), whose bytes wait.  Past RTR_CONN_IN_MAX of those, all sessions
 * together, the client is not read until they go on.  The payloads wait beside Proton
 * (split mode, router/zin.h: every connection from rtr_transport_open_WT on, TLS included),
 * whose window stays open (0009): c->zin.queued counts them. */
static bool conn_in_full_WT(rtr_conn_t *c)
{
    return c->zin.queued > RTR_CONN_IN_MAX;
}

/* The SASL layer: Cyrus (router/sasl.c) for a listener that authenticates or names its
 * mechanisms, else Proton's own ANONYMOUS.  Should Cyrus fail to take the connection, a
 * listener with authenticatePeer still lets nobody in: Proton's layer then offers
 * ANONYMOUS, which authenticated-only transports refuse. */
static void transport_wake_WT(void *arg)
{
    rtr_conn_mark_dirty_WT(arg);
}

/* A connector's SASL client: Proton's own (ANONYMOUS, PLAIN with saslUsername and
 * saslPassword, EXTERNAL), limited to saslMechanisms when given; PLAIN goes over plain TCP
 * too, as qdrouterd's connectors allow. */
static void transport_sasl_client_WT(rtr_conn_t *c, pn_transport_t *t)
{
    pn_sasl_t *sasl = pn_sasl(t);
    if (c->listener->sasl_mechanisms)
        pn_sasl_allowed_mechs(sasl, c->listener->sasl_mechanisms);
    pn_sasl_set_allow_insecure_mechs(sasl, true);
}

static void transport_sasl_WT(rtr_conn_t *c, pn_transport_t *t)
{
    if (c->connector) {
        transport_sasl_client_WT(c, t);
        return;
    }
    if (c->listener->sasl_plugin &&
        rtr_authsvc_server_WT(t, c->worker, c->listener, c->id, c->peer, transport_wake_WT, c))
        return; /* the listener's authentication service decides (router/authsvc.c) */
    const cfg_listener_t *l = c->listener;
    if (rtr_sasl_listener_uses_cyrus(l) && rtr_sasl_server_WT(t, l, c->peer)) {
        rtr_sasl_external_WT(t, &c->tls);
        return;
    }
    pn_transport_require_auth(t, l->authenticate_peer);
    pn_sasl_t *sasl = pn_sasl(t);
    pn_sasl_allowed_mechs(sasl, l->authenticate_peer ? "" : "ANONYMOUS");
    pn_sasl_set_allow_insecure_mechs(sasl, true);
}

bool rtr_transport_open_WT(rtr_conn_t *c, int fd, bool websocket)
{
    rtr_worker_t *w = c->worker;
    const cfg_listener_t *l = c->listener;
    uv_tcp_init(&w->loop, &c->tcp);
    c->tcp.data = c;
    uv_timer_init(&w->loop, &c->timer);
    c->timer.data = c;
    c->handles = 2;

    pn_transport_t *t = pn_transport();
    if (!c->connector)
        pn_transport_set_server(t);
    pn_transport_set_context(t, c); /* for the SASL layer's failures (router/lstats.h) */
    pn_transport_set_max_frame(t, l->max_frame_size);
    pn_transport_set_channel_max(t, (uint16_t)(l->max_sessions > 65536 ? 65535
                                                                        : l->max_sessions - 1));
    pn_transport_set_idle_timeout(t, idle_ms(l));
    transport_sasl_WT(c, t);
    pn_connection_t *pc = pn_connection();
    if (c->connector) { /* before the transport is bound: Proton's SASL client reads them */
        const cfg_connector_t *cn = rtr_connector_cfg(c->connector);
        pn_connection_set_hostname(pc, rtr_connector_target(c->connector)->host);
        if (cn->sasl_username)
            pn_connection_set_user(pc, cn->sasl_username);
        if (cn->sasl_password)
            pn_connection_set_password(pc, cn->sasl_password);
    }
    pn_connection_driver_init(&c->driver, pc, t);
    codec_guard_init(&c->guard, l->max_frame_size, guard_mem);
    c->zc = rtr_zc_conn_new_WT(); /* used unless the connection turns out to be TLS */
    c->guard.client = c->connector != NULL;

    /* uv_tcp_open takes any stream socket: a WebSocket's unix socketpair end reads and writes
     * the same way (only uv_tcp_nodelay fails on it, harmlessly) */
    if (uv_tcp_open(&c->tcp, fd) != 0) {
        close(fd);
        LOGC(c, WARNING, "Cannot take the connection from %s", c->peer);
        pn_connection_driver_read_close(&c->driver);
        pn_connection_driver_write_close(&c->driver);
        return false;
    }
    if (!websocket)
        uv_tcp_nodelay(&c->tcp, 1);
    /* the first byte says whether it is TLS (or, requiring encryption, refused); not on a
     * WebSocket, whose bytes lws decrypted (https) or that came plain */
    c->tls_detect = !websocket && !c->connector &&
                    (l->ssl_profile != NULL || l->require_encryption);
    if (c->connector && l->ssl_profile) {
        /* the router's TLS client: its ClientHello goes out with the first write */
        const cfg_connector_t *cn = rtr_connector_cfg(c->connector);
        c->tls = rtr_tls_connector_new_WT(w->ctx->tls, l->ssl_profile,
                                          rtr_connector_target(c->connector)->host,
                                          cn->verify_hostname);
        if (!c->tls) {
            rtr_connector_note(c->connector, "Connection failed: cannot start a TLS session");
            LOGC(c, WARNING, "Connection to %s: cannot start a TLS session (sslProfile %s)",
                 c->peer, l->ssl_profile);
            pn_connection_driver_read_close(&c->driver);
            pn_connection_driver_write_close(&c->driver);
            return true; /* it ends at once, through the usual path */
        }
    }
    rtr_zin_init_WT(c);
    rtr_lstats_accepted_WT(c);
    return true;
}

void rtr_transport_tls_label_WT(const rtr_conn_t *c, char *buf, size_t len)
{
    buf[0] = '\0';
    if (c->tls && rtr_tls_ready_WT(c->tls))
        snprintf(buf, len, "%s %s %d", rtr_tls_proto_WT(c->tls), rtr_tls_cipher_WT(c->tls),
                 rtr_tls_ssf_WT(c->tls));
    else if (c->ws_tls)
        snprintf(buf, len, "%s", c->ws_tls);
}

/* The peer's idleness is judged only while its bytes are read.  A connection the router does
 * not read (the budgets above, or Proton not done with the last read) cannot show its peer's
 * frames, heartbeats included: they wait in the socket behind the data held back.  Proton's
 * local idle timeout is turned off while reading is stopped; once reading starts again it is
 * turned back on at the first frame read (Proton then counts from that frame) or after one
 * whole timeout without a frame (Proton then ends the connection at once, as it would have).
 * Without this, a sender held back by a slow consumer for longer than idleTimeoutSeconds
 * lost its connection. */
static void idle_watch_WT(rtr_conn_t *c, int64_t *deadline)
{
    uint32_t ms = idle_ms(c->listener);
    if (!ms || pn_connection_driver_read_closed(&c->driver))
        return;
    pn_transport_t *t = c->driver.transport;
    uint64_t        now = uv_now(&c->worker->loop);
    if (!c->reading) {
        if (!c->idle_held) {
            pn_transport_set_idle_timeout(t, 0);
            c->idle_held = true;
        }
        c->idle_resumed = 0;
        return;
    }
    if (!c->idle_held)
        return;
    uint64_t frames = pn_transport_get_frames_input(t);
    if (!c->idle_resumed) {
        c->idle_resumed = now;
        c->idle_frames = frames;
    }
    int64_t due = (int64_t)(c->idle_resumed + ms);
    if (frames != c->idle_frames || now >= (uint64_t)due) {
        pn_transport_set_idle_timeout(t, ms);
        c->idle_held = false;
        c->idle_resumed = 0;
        due = (int64_t)now; /* Proton's tick takes it from here */
    }
    if (!*deadline || *deadline > due)
        *deadline = due;
}

void rtr_transport_arm_WT(rtr_conn_t *c, int64_t deadline)
{
    /* A client that does not read what the router writes is not read from either once
     * RTR_CONN_IN_UNANSWERED_MAX bytes came in since it last did: what it sends (transfers,
     * flows) makes the router write more (dispositions, flows), which would pile up here. */
    rtr_zin_sweep_WT(c); /* the pass over the events is done */
    bool stalled = rtr_zin_stalled(&c->zin); /* Proton has not taken the last read yet */
    bool may_read = c->in_unanswered < RTR_CONN_IN_UNANSWERED_MAX && !conn_in_full_WT(c) &&
                    !stalled;
    if (stalled && !pn_connection_driver_read_closed(&c->driver) &&
        pn_connection_driver_read_buffer(&c->driver).size > 0)
        deadline = (int64_t)uv_now(&c->worker->loop); /* it can now: from the timer */
    if (c->reading && !may_read) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    } else if (!c->reading && may_read && !pn_connection_driver_read_closed(&c->driver) &&
               !c->tls_eof && (c->tls ? rtr_tls_cipher_in_WT(c->tls) < RTR_TLS_IN_MAX
                       : pn_connection_driver_read_buffer(&c->driver).size > 0)) {
        if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) == 0)
            c->reading = true;
    }
    idle_watch_WT(c, &deadline);
    /* plaintext waiting in the TLS session: decrypted from the timer, now */
    if (c->tls && c->tls_stalled && may_read && !pn_connection_driver_read_closed(&c->driver) &&
        pn_connection_driver_read_buffer(&c->driver).size > 0)
        deadline = (int64_t)uv_now(&c->worker->loop);
    if (c->handshake_due && (!deadline || (uint64_t)deadline > c->handshake_due))
        deadline = (int64_t)c->handshake_due;
    if (deadline) {
        int64_t now = (int64_t)uv_now(&c->worker->loop);
        uv_timer_start(&c->timer, timer_cb, deadline > now ? (uint64_t)(deadline - now) : 0, 0);
    }
}
