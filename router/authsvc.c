/* router/authsvc.c: a client's SASL exchange relayed to a remote authentication service
 * (authsvc.h says what, as qdrouterd's authServicePlugin does).
 *
 * One relay per client connection joins two Proton transports through Proton's SASL plugin
 * interface (proton/sasl_plugin.h): the client's (a server's: Proton calls server_*_WT) and
 * the router's own connection to the service (a client's: Proton calls svc_*_WT), whose
 * pn_connection_driver_t, socket, optional TLS session and timer are the relay's.
 *
 *  client ──sasl-init/response──> [client's transport] ─process_init/response─> relay
 *         <─mechanisms/challenge/outcome── prepare_write <─ wake ─┐           │ kick
 *                                                                  relay <─ [service's
 *  service <──sasl-init/response── prepare_write ─────────────────────────── transport]
 *          ──mechanisms/challenge/outcome, open{authenticated-identity}──> process_*
 *
 * Proton asks a server's plugin for its mechanisms only once the plugin posts them
 * (SASL_POSTED_MECHANISMS): the client's transport waits, with only its SASL header written,
 * until the service has sent its list (none comes: an empty list, then the failed outcome,
 * exactly as qdrouterd 1.19 answers).  A frame from one side sets what the other must post next and
 * wakes it: the client's connection is woken through the caller's wake_WT (its worker
 * processes it, and Proton calls prepare_write), the service's through the relay's timer
 * (0 ms), so neither transport is run from inside the other's Proton call.
 *
 * The service's bytes are a peer's too: before Proton sees them, every frame is checked here
 * (size, header, a complete AMQP value with a descriptor the exchange can carry: sasl
 * mechanisms, challenge, outcome, open, close), as the frame guard (codec/frame.h) checks a
 * client's.
 *
 * Lifetime: the relay has two owners, the client's transport (Proton calls server_free_WT
 * when it frees it) and the connection to the service (its handles and its address lookup).
 * The first to let go closes the service's connection, which is also closed as soon as the
 * client's outcome is decided; the relay is freed when both owners have let go.
 * The client's user name (set with pnx_sasl_set_succeeded, which keeps the pointer) is the
 * relay's, so it lives as long as the client's transport.
 *
 * Suffixes: _WT = the client connection's worker (every function here).
 */
#include "router/authsvc.h"

#include "codec/frame.h"
#include "core/base/base.h"
#include "router/lstats.h"
#include "router/tls.h"

#include <arpa/inet.h>
#include <proton/codec.h>
#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/connection_driver.h>
#include <proton/sasl.h>
#include <proton/sasl_plugin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

/* The largest frame accepted from the service (an open whose address-authz lists many
 * addresses is the big one), and what the router declares as its own. */
#define AUTHSVC_FRAME_MAX (256u << 10)
/* One socket read from the service. */
#define AUTHSVC_READ      (16u << 10)

/* What one side must post next. */
enum {
    TO_CLIENT_NONE = 0,
    TO_CLIENT_MECHS,     /* the service's mechanisms arrived */
    TO_CLIENT_CHALLENGE, /* a challenge to relay */
    TO_CLIENT_OK,        /* the service authenticated the client: outcome ok */
    TO_CLIENT_FAIL,      /* refused, or the service failed: outcome auth */
};
enum {
    TO_SVC_NONE = 0,
    TO_SVC_INIT,     /* the client's sasl-init to relay */
    TO_SVC_RESPONSE, /* a sasl-response to relay */
};

/* Bytes owned by the relay (a frame's field); null tells an absent field from an empty one. */
typedef struct relay_bytes {
    char  *p;    /* heap, or NULL */
    size_t n;    /* its length */
    bool   null; /* the field was absent */
} relay_bytes_t;

typedef struct relay {
    /* the client's side */
    pn_transport_t *client;             /* NULL once Proton freed the client's SASL layer */
    void (*wake_WT)(void *arg);         /* the client's connection: process soon */
    void                    *wake_arg;  /* its argument */
    uint64_t                 conn_id;   /* the client connection's id, for [C<id>] */
    char                     peer[64];  /* the client's "host:port" */
    const cfg_auth_plugin_t *plugin;    /* the service (the running configuration's) */
    rtr_worker_t            *worker;    /* the loop everything runs on */
    int                      to_client; /* TO_CLIENT_*: what the client's transport posts */
    int                      step;      /* client frames: 0 none yet, 1 init relayed,
                                           2 outcome known (later frames are out of order) */
    char         *mechs;                /* the service's mechanisms ("A B"), NULL until then */
    relay_bytes_t challenge;            /* the last challenge, for Proton to write */
    relay_bytes_t extra;                /* the outcome's additional-data */
    char         *user;                 /* the authenticated identity (pnx_sasl_set_succeeded
                                           keeps this pointer: freed with the relay) */
    /* the service's side */
    int                    to_svc;      /* TO_SVC_*: what the service's transport posts */
    char                  *mech;        /* the client's mechanism */
    relay_bytes_t          response;    /* its initial response or response */
    bool                   started;     /* the connection to the service was begun */
    bool                   finished;    /* the client's outcome is decided */
    bool                   closing;     /* the service's handles are closing (or none) */
    bool                   sasl_ok;     /* the service's outcome was ok: its open comes */
    int                    handles;     /* the service's uv handles not yet closed */
    bool                   gai_pending; /* uv_getaddrinfo's callback has yet to run */
    uv_getaddrinfo_t       gai;         /* the host name's lookup */
    struct addrinfo       *ai;          /* its addresses (freed with the relay) */
    struct addrinfo       *ai_next;     /* the next to try when a connect fails */
    uv_connect_t           creq;        /* the connect request */
    uv_tcp_t               tcp;         /* the socket to the service */
    bool                   tcp_open;    /* tcp was initialised */
    uv_timer_t             kick;        /* 0 ms: run the service's transport */
    bool                   driver_up;   /* driver was initialised */
    pn_connection_driver_t driver;      /* the router's AMQP connection to the service */
    rtr_tls_conn_t        *tls;         /* its TLS session, or NULL: plain */
    uint8_t               *in;          /* the service's plaintext not yet given to Proton */
    size_t                 in_len;      /* its bytes */
    size_t                 in_ok;       /* of which the checked ones (whole headers, frames) */
    size_t                 in_cap;      /* in's size */
} relay_t;

/* A write to the service: the request and its copy of the bytes. */
typedef struct relay_wreq {
    uv_write_t req;    /* first member: request <-> relay_wreq_t cast */
    char       data[]; /* the bytes */
} relay_wreq_t;

static void                          svc_close_WT(relay_t *r);
static void                          kick_cb(uv_timer_t *t);
static const pnx_sasl_implementation svc_impl;

/* ---------------------------------------------------------------- small helpers */

static void bytes_set(relay_bytes_t *b, const pn_bytes_t *v)
{
    free(b->p);
    b->p = NULL;
    b->n = v ? v->size : 0;
    b->null = !v || !v->start;
    if (b->n) {
        b->p = base_malloc(b->n);
        memcpy(b->p, v->start, b->n);
    }
}

static pn_bytes_t bytes_get(const relay_bytes_t *b)
{
    /* Proton encodes a NULL start as an absent field, anything else as binary */
    return pn_bytes(b->n, b->null ? NULL : b->p ? b->p : "");
}

/* Freed once both owners let go: the client's transport and the service's handles. */
static void relay_maybe_free_WT(relay_t *r)
{
    if (r->client || r->handles || r->gai_pending)
        return;
    if (r->driver_up)
        pn_connection_driver_destroy(&r->driver);
    rtr_tls_conn_free_WT(r->tls);
    uv_freeaddrinfo(r->ai);
    free(r->in);
    free(r->mechs);
    free(r->challenge.p);
    free(r->extra.p);
    free(r->user);
    free(r->mech);
    free(r->response.p);
    free(r);
}

static void wake_client_WT(relay_t *r)
{
    if (r->client && r->wake_WT)
        r->wake_WT(r->wake_arg);
}

static void kick_svc_WT(relay_t *r)
{
    if (!r->closing && r->handles)
        uv_timer_start(&r->kick, kick_cb, 0, 0);
}

/* The client's authentication failed here (the service refused it, or could not be asked):
 * outcome auth for the client, one line naming it, and the service's connection closed. */
__attribute__((format(printf, 2, 3))) static void fail_WT(relay_t *r, const char *fmt, ...)
{
    if (!r->finished) {
        char    why[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, sizeof(why), fmt, ap);
        va_end(ap);
        r->finished = true;
        r->step = 2;
        r->to_client = TO_CLIENT_FAIL;
        /* counted on the listener and logged once there (router/lstats.h), under the reason
         * the line's start tells: the service's refusal, a client's frame out of order, or a
         * service that could not be asked */
        if (r->client)
            rtr_lstats_sasl_failed_WT(r->client,
                                      strncmp(why, "refused", 7) == 0 ? RTR_AUTH_CREDENTIALS
                                      : strncmp(why, "a s", 3) == 0   ? RTR_AUTH_PROTOCOL
                                                                      : RTR_AUTH_INTERNAL,
                                      r->mech, "%s", why);
        wake_client_WT(r);
    }
    svc_close_WT(r);
}

/* ---------------------------------------------------------------- the service's bytes */

/* The descriptor code of the performative at p[0, n) (0x00 then a smallulong or ulong), or
 * -1. */
static int perf_code(const uint8_t *p, size_t n)
{
    if (n >= 3 && p[0] == 0x00 && p[1] == 0x53)
        return p[2];
    if (n >= 10 && p[0] == 0x00 && p[1] == 0x80) {
        for (int i = 2; i < 9; i++)
            if (p[i])
                return -1;
        return p[9];
    }
    return -1;
}

/* Check what came from the service past in_ok: whole protocol headers and frames whose
 * performative the exchange can carry.  Returns false (why set) at the first bad byte. */
static bool svc_check_WT(relay_t *r, const char **why)
{
    while (r->in_len - r->in_ok >= 8) {
        const uint8_t *p = r->in + r->in_ok;
        if (memcmp(p, "AMQP", 4) == 0) {
            if (!(p[4] == 3 || p[4] == 0) || p[5] != 1 || p[6] != 0 || p[7] != 0) {
                *why = "an unknown AMQP protocol header";
                return false;
            }
            r->in_ok += 8;
            continue;
        }
        uint32_t size = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        uint32_t doff = (uint32_t)p[4] * 4;
        if (size < 8 || size > AUTHSVC_FRAME_MAX || doff < 8 || doff > size || p[5] > 1) {
            *why = "a malformed frame header";
            return false;
        }
        if (r->in_len - r->in_ok < size)
            return true; /* the rest of the frame is to come */
        const uint8_t *body = p + doff;
        size_t         blen = size - doff;
        if (blen) {
            int  code = perf_code(body, blen);
            bool known = p[5] == 1 ? code == 0x40 || code == 0x42 || code == 0x44
                                   : code == 0x10 || code == 0x18;
            if (!known) {
                *why = "a frame the SASL exchange has no place for";
                return false;
            }
            if (codec_values_check(body, blen) != 0) {
                *why = "a malformed performative";
                return false;
            }
        }
        r->in_ok += size;
    }
    return true;
}

/* Give Proton the checked bytes its input buffer has room for (the rest waits for the next
 * round: svc_process_WT). */
static void svc_feed_WT(relay_t *r)
{
    while (r->in_ok && !pn_connection_driver_read_closed(&r->driver)) {
        pn_rwbytes_t rb = pn_connection_driver_read_buffer(&r->driver);
        if (!rb.size)
            break;
        size_t k = rb.size < r->in_ok ? rb.size : r->in_ok;
        memcpy(rb.start, r->in, k);
        pn_connection_driver_read_done(&r->driver, k);
        memmove(r->in, r->in + k, r->in_len - k);
        r->in_len -= k;
        r->in_ok -= k;
    }
}

/* Plaintext from the service: kept, checked, and the checked bytes given to Proton. */
static bool svc_plain_in_WT(relay_t *r, const void *p, size_t n)
{
    if (r->in_len + n > AUTHSVC_FRAME_MAX + 8 + AUTHSVC_READ) {
        fail_WT(r, "the authentication service %s:%s sent too much", r->plugin->host,
                r->plugin->port);
        return false;
    }
    if (r->in_len + n > r->in_cap) {
        r->in_cap = r->in_len + n + 4096;
        r->in = base_realloc(r->in, r->in_cap);
    }
    memcpy(r->in + r->in_len, p, n);
    r->in_len += n;
    const char *why = NULL;
    if (!svc_check_WT(r, &why)) {
        fail_WT(r, "the authentication service %s:%s sent %s", r->plugin->host, r->plugin->port,
                why);
        return false;
    }
    svc_feed_WT(r);
    return true;
}

/* ---------------------------------------------------------------- the service's connection */

static void svc_process_WT(relay_t *r);

static void svc_write_cb(uv_write_t *req, int status)
{
    relay_t *r = req->handle->data;
    free(req);
    if (status < 0 && status != UV_ECANCELED)
        fail_WT(r, "the authentication service %s:%s: %s", r->plugin->host, r->plugin->port,
                uv_strerror(status));
}

static void svc_send_WT(relay_t *r, const void *p, size_t n)
{
    relay_wreq_t *w = base_malloc(sizeof(*w) + n);
    memcpy(w->data, p, n);
    uv_buf_t b = uv_buf_init(w->data, (unsigned)n);
    int      rc = uv_write(&w->req, (uv_stream_t *)&r->tcp, &b, 1, svc_write_cb);
    if (rc < 0) {
        free(w);
        fail_WT(r, "the authentication service %s:%s: %s", r->plugin->host, r->plugin->port,
                uv_strerror(rc));
    }
}

/* What Proton framed for the service, through TLS when there is a session. */
static void svc_write_WT(relay_t *r)
{
    while (!r->closing) {
        pn_bytes_t wb = pn_connection_driver_write_buffer(&r->driver);
        if (r->tls) {
            if (wb.size && rtr_tls_ready_WT(r->tls)) {
                long k = rtr_tls_write_WT(r->tls, wb.start, wb.size);
                if (k < 0) {
                    fail_WT(r, "the authentication service %s:%s: TLS write failed",
                            r->plugin->host, r->plugin->port);
                    return;
                }
                pn_connection_driver_write_done(&r->driver, (size_t)k);
                continue;
            }
            char   buf[16384];
            size_t n;
            while ((n = rtr_tls_take_cipher_WT(r->tls, buf, sizeof(buf))) > 0 && !r->closing)
                svc_send_WT(r, buf, n);
            return;
        }
        if (!wb.size)
            return;
        svc_send_WT(r, wb.start, wb.size);
        pn_connection_driver_write_done(&r->driver, wb.size);
    }
}

/* The service's open: authenticated-identity ({sub, preferred_username}, or a string) and
 * address-authz (read: not enforced). */
static void svc_open_props_WT(relay_t *r, pn_data_t *d)
{
    pn_data_rewind(d);
    if (!pn_data_next(d) || pn_data_type(d) != PN_MAP)
        return;
    size_t n = pn_data_get_map(d);
    size_t n_authz = 0;
    pn_data_enter(d);
    for (size_t i = 0; i + 1 < n; i += 2) {
        if (!pn_data_next(d))
            break;
        pn_type_t  kt = pn_data_type(d);
        pn_bytes_t k = kt == PN_SYMBOL   ? pn_data_get_symbol(d)
                       : kt == PN_STRING ? pn_data_get_string(d)
                                         : pn_bytes_null;
        if (!pn_data_next(d))
            break;
        bool ident = k.size == 22 && memcmp(k.start, "authenticated-identity", 22) == 0;
        if (ident && pn_data_type(d) == PN_STRING && !r->user) {
            pn_bytes_t v = pn_data_get_string(d);
            r->user = base_strndup(v.start, v.size);
        } else if (ident && pn_data_type(d) == PN_MAP) {
            size_t m = pn_data_get_map(d);
            char  *sub = NULL, *pref = NULL;
            pn_data_enter(d);
            for (size_t j = 0; j + 1 < m; j += 2) {
                if (!pn_data_next(d))
                    break;
                pn_type_t  it = pn_data_type(d);
                pn_bytes_t ik = it == PN_SYMBOL   ? pn_data_get_symbol(d)
                                : it == PN_STRING ? pn_data_get_string(d)
                                                  : pn_bytes_null;
                if (!pn_data_next(d))
                    break;
                pn_type_t  vt = pn_data_type(d);
                pn_bytes_t v = vt == PN_STRING   ? pn_data_get_string(d)
                               : vt == PN_SYMBOL ? pn_data_get_symbol(d)
                                                 : pn_bytes_null;
                if (!v.start)
                    continue;
                if (ik.size == 3 && memcmp(ik.start, "sub", 3) == 0 && !sub)
                    sub = base_strndup(v.start, v.size);
                else if (ik.size == 18 && memcmp(ik.start, "preferred_username", 18) == 0 && !pref)
                    pref = base_strndup(v.start, v.size);
            }
            pn_data_exit(d);
            if (!r->user) {
                r->user = sub ? sub : pref;
                if (sub)
                    sub = NULL;
                else
                    pref = NULL;
            }
            free(sub);
            free(pref);
        } else if (k.size == 13 && memcmp(k.start, "address-authz", 13) == 0 &&
                   pn_data_type(d) == PN_MAP) {
            n_authz = pn_data_get_map(d) / 2;
        }
    }
    pn_data_exit(d);
    if (n_authz)
        base_log(BASE_LOG_MOD_AUTHSERVICE, BASE_LOG_DEBUG,
                 "[C%llu] the authentication service gave address-authz for %zu addresses "
                 "(not enforced)",
                 (unsigned long long)r->conn_id, n_authz);
}

static void svc_event_WT(relay_t *r, pn_event_t *e)
{
    switch (pn_event_type(e)) {
    case PN_CONNECTION_REMOTE_OPEN: {
        if (!r->sasl_ok || r->finished)
            break;
        svc_open_props_WT(r, pn_connection_remote_properties(r->driver.connection));
        if (!r->user)
            r->user = base_strdup(""); /* qdrouterd's: no identity named */
        r->finished = true;
        r->step = 2;
        r->to_client = TO_CLIENT_OK;
        base_log(BASE_LOG_MOD_AUTHSERVICE, BASE_LOG_INFO,
                 "[C%llu] SASL: client %s authenticated as %s by the authentication service "
                 "%s:%s",
                 (unsigned long long)r->conn_id, r->peer, r->user, r->plugin->host,
                 r->plugin->port);
        wake_client_WT(r);
        pn_connection_close(r->driver.connection);
        break;
    }
    case PN_CONNECTION_REMOTE_CLOSE:
    case PN_TRANSPORT_CLOSED: {
        pn_condition_t *c = pn_transport_condition(r->driver.transport);
        if (!pn_condition_is_set(c))
            c = pn_connection_remote_condition(r->driver.connection);
        if (!r->finished)
            fail_WT(
                r,
                "the authentication service %s:%s closed the connection before its outcome%s%s%s%s",
                r->plugin->host, r->plugin->port, pn_condition_is_set(c) ? " (" : "",
                pn_condition_is_set(c) ? pn_condition_get_name(c) : "",
                pn_condition_is_set(c) && pn_condition_get_description(c) ? " " : "",
                pn_condition_is_set(c)
                    ? (pn_condition_get_description(c) ? pn_condition_get_description(c) : "")
                    : "");
        svc_close_WT(r);
        break;
    }
    default:
        break;
    }
}

static void svc_process_WT(relay_t *r)
{
    if (r->closing || !r->driver_up)
        return;
    for (;;) {
        pn_event_t *e;
        svc_feed_WT(r);
        while (!r->closing && (e = pn_connection_driver_next_event(&r->driver)) != NULL)
            svc_event_WT(r, e);
        if (r->closing)
            return;
        svc_write_WT(r);
        if (r->closing || !pn_connection_driver_has_event(&r->driver))
            break;
    }
    if (!r->closing && r->finished && !r->to_svc)
        svc_close_WT(r); /* the client's outcome is decided: the service is done with */
    else if (!r->closing && pn_connection_driver_finished(&r->driver))
        fail_WT(r, "the authentication service %s:%s ended the connection", r->plugin->host,
                r->plugin->port);
}

static void kick_cb(uv_timer_t *t)
{
    svc_process_WT(t->data);
}

static void handle_closed_cb(uv_handle_t *h)
{
    relay_t *r = h->data;
    r->handles--;
    relay_maybe_free_WT(r);
}

/* Close the connection to the service (once): its handles, the lookup if it is under way. */
static void svc_close_WT(relay_t *r)
{
    if (r->closing)
        return;
    r->closing = true;
    if (r->gai_pending)
        uv_cancel((uv_req_t *)&r->gai);
    if (r->tcp_open)
        uv_close((uv_handle_t *)&r->tcp, handle_closed_cb);
    if (r->started) {
        uv_timer_stop(&r->kick);
        uv_close((uv_handle_t *)&r->kick, handle_closed_cb);
    }
}

static void svc_alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    (void)suggested;
    buf->base = base_malloc(AUTHSVC_READ);
    buf->len = AUTHSVC_READ;
}

static void svc_read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    relay_t *r = s->data;
    if (r->closing) {
        free(buf->base);
        return;
    }
    if (n < 0) {
        free(buf->base);
        uv_read_stop(s);
        if (!r->finished)
            fail_WT(r,
                    "the authentication service %s:%s closed the connection before its "
                    "outcome",
                    r->plugin->host, r->plugin->port);
        svc_close_WT(r);
        return;
    }
    if (r->tls && n > 0) {
        rtr_tls_put_cipher_WT(r->tls, buf->base, (size_t)n);
        char plain[AUTHSVC_READ];
        for (;;) {
            const char *why = NULL;
            long        k = rtr_tls_read_WT(r->tls, plain, sizeof(plain), &why);
            if (k > 0) {
                if (!svc_plain_in_WT(r, plain, (size_t)k))
                    break;
                continue;
            }
            if (k == -2)
                fail_WT(r, "the authentication service %s:%s: TLS %s failed: %s", r->plugin->host,
                        r->plugin->port, rtr_tls_ready_WT(r->tls) ? "session" : "handshake", why);
            else if (k == -1 && !r->finished)
                fail_WT(r, "the authentication service %s:%s closed TLS before its outcome",
                        r->plugin->host, r->plugin->port);
            break;
        }
    } else if (n > 0) {
        svc_plain_in_WT(r, buf->base, (size_t)n);
    }
    free(buf->base);
    svc_process_WT(r);
}

/* The socket is connected: the router's AMQP connection to the service starts (TLS first when
 * the plugin has an sslProfile).  qdrouterd's open: hostname the service's host, desired
 * capability ADDRESS-AUTHZ (the service may answer with address-authz), product and
 * version. */
static void svc_connected_WT(relay_t *r)
{
    const cfg_auth_plugin_t *p = r->plugin;
    pn_transport_t          *t = pn_transport();
    pn_transport_set_max_frame(t, AUTHSVC_FRAME_MAX);
    pn_sasl(t);
    pnx_sasl_set_implementation(t, &svc_impl, r);
    pn_connection_t *c = pn_connection();
    pn_connection_driver_init(&r->driver, c, t);
    r->driver_up = true;
    pn_connection_set_container(c, r->worker->ctx->router_id);
    pn_connection_set_hostname(c, p->host);
    pn_data_t *caps = pn_connection_desired_capabilities(c);
    pn_data_put_array(caps, false, PN_SYMBOL);
    pn_data_enter(caps);
    pn_data_put_symbol(caps, pn_bytes(13, "ADDRESS-AUTHZ"));
    pn_data_exit(caps);
    pn_data_t *props = pn_connection_properties(c);
    pn_data_put_map(props);
    pn_data_enter(props);
    pn_data_put_symbol(props, pn_bytes(7, "product"));
    pn_data_put_string(props, pn_bytes(8, "junction"));
    pn_data_exit(props);
    pn_connection_open(c);
    if (p->ssl_profile) {
        r->tls = rtr_tls_client_new_WT(r->worker->ctx->tls, p->ssl_profile, p->host);
        if (!r->tls) {
            fail_WT(r, "cannot start a TLS session to the authentication service %s:%s", p->host,
                    p->port);
            return;
        }
    }
    uv_read_start((uv_stream_t *)&r->tcp, svc_alloc_cb, svc_read_cb);
    svc_process_WT(r);
}

static void connect_WT(relay_t *r, const struct sockaddr *sa);

/* The socket of a failed connect is closed: the host name's next address is tried. */
static void retry_closed_cb(uv_handle_t *h)
{
    relay_t *r = h->data;
    r->handles--;
    if (r->closing) {
        relay_maybe_free_WT(r);
        return;
    }
    const struct addrinfo *a = r->ai_next;
    r->ai_next = a->ai_next;
    connect_WT(r, a->ai_addr);
}

static void connect_cb(uv_connect_t *req, int status)
{
    relay_t *r = req->data;
    if (r->closing)
        return;
    if (status < 0 && r->ai_next) {
        /* as Proton's proactor: each address of the name in turn */
        r->tcp_open = false;
        uv_close((uv_handle_t *)&r->tcp, retry_closed_cb);
        return;
    }
    if (status < 0) {
        fail_WT(r, "the authentication service %s:%s is unreachable: %s", r->plugin->host,
                r->plugin->port, uv_strerror(status));
        return;
    }
    uv_tcp_nodelay(&r->tcp, 1);
    svc_connected_WT(r);
}

static void connect_WT(relay_t *r, const struct sockaddr *sa)
{
    uv_tcp_init(&r->worker->loop, &r->tcp);
    r->tcp.data = r;
    r->tcp_open = true;
    r->handles++;
    r->creq.data = r;
    int rc = uv_tcp_connect(&r->creq, &r->tcp, sa, connect_cb);
    if (rc < 0)
        fail_WT(r, "the authentication service %s:%s is unreachable: %s", r->plugin->host,
                r->plugin->port, uv_strerror(rc));
}

static void gai_cb(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    relay_t *r = req->data;
    r->gai_pending = false;
    if (r->closing || status < 0) {
        if (!r->closing)
            fail_WT(r, "the authentication service's host %s: %s", r->plugin->host,
                    uv_strerror(status));
        uv_freeaddrinfo(res);
        relay_maybe_free_WT(r);
        return;
    }
    r->ai = res;
    r->ai_next = res->ai_next;
    connect_WT(r, res->ai_addr);
}

/* Begin the connection to the service: an address literal is connected to at once, a host
 * name is looked up first (libuv's thread pool: the worker never waits). */
static void svc_start_WT(relay_t *r)
{
    const cfg_auth_plugin_t *p = r->plugin;
    r->started = true;
    uv_timer_init(&r->worker->loop, &r->kick);
    r->kick.data = r;
    r->handles++;
    struct sockaddr_in  a4;
    struct sockaddr_in6 a6;
    if (uv_ip4_addr(p->host, p->port_number, &a4) == 0) {
        connect_WT(r, (const struct sockaddr *)&a4);
        return;
    }
    if (uv_ip6_addr(p->host, p->port_number, &a6) == 0) {
        connect_WT(r, (const struct sockaddr *)&a6);
        return;
    }
    char port[8];
    snprintf(port, sizeof(port), "%d", p->port_number);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    r->gai.data = r;
    int rc = uv_getaddrinfo(&r->worker->loop, &r->gai, gai_cb, p->host, port, &hints);
    if (rc < 0) {
        fail_WT(r, "the authentication service's host %s: %s", p->host, uv_strerror(rc));
        return;
    }
    r->gai_pending = true;
}

/* ---------------------------------------------------------------- Proton's plugin calls */

/* The service's transport (the router is the client there). */

static void svc_free_WT(pn_transport_t *t)
{
    (void)t; /* the relay is freed by its owners (relay_maybe_free_WT) */
}

static bool svc_init_client_WT(pn_transport_t *t)
{
    (void)t;
    return true;
}

static bool no_server_WT(pn_transport_t *t)
{
    (void)t;
    return false;
}

static const char *no_mechs_WT(pn_transport_t *t)
{
    (void)t;
    return NULL;
}

static void svc_prepare_write_WT(pn_transport_t *t)
{
    relay_t *r = pnx_sasl_get_context(t);
    if (r->to_svc == TO_SVC_INIT) {
        pnx_sasl_set_selected_mechanism(t, r->mech);
        if (r->plugin->realm)
            pnx_sasl_set_local_hostname(t, r->plugin->realm);
        pnx_sasl_set_bytes_out(t, bytes_get(&r->response));
        pnx_sasl_set_desired_state(t, SASL_POSTED_INIT);
    } else if (r->to_svc == TO_SVC_RESPONSE) {
        pnx_sasl_set_bytes_out(t, bytes_get(&r->response));
        pnx_sasl_set_desired_state(t, SASL_POSTED_RESPONSE);
    }
    r->to_svc = TO_SVC_NONE;
}

static bool svc_process_mechanisms_WT(pn_transport_t *t, const char *mechs)
{
    relay_t *r = pnx_sasl_get_context(t);
    if (r->mechs || r->finished)
        return true; /* a second list changes nothing */
    r->mechs = base_strdup(mechs);
    r->to_client = TO_CLIENT_MECHS;
    wake_client_WT(r);
    return true;
}

static void svc_process_challenge_WT(pn_transport_t *t, const pn_bytes_t *recv)
{
    relay_t *r = pnx_sasl_get_context(t);
    if (r->finished)
        return;
    bytes_set(&r->challenge, recv);
    r->to_client = TO_CLIENT_CHALLENGE;
    wake_client_WT(r);
}

/* The service's outcome: a failure ends the exchange; success waits for the service's open,
 * which names the identity. */
static void svc_process_outcome_WT(pn_transport_t *t, const pn_bytes_t *recv)
{
    relay_t *r = pnx_sasl_get_context(t);
    if (r->finished)
        return;
    pn_sasl_outcome_t o = pn_sasl_outcome(pn_sasl(t));
    if (o == PN_SASL_OK) {
        r->sasl_ok = true;
        bytes_set(&r->extra, recv);
        return;
    }
    fail_WT(r, "refused by the authentication service %s:%s (mechanism %s, outcome %d)",
            r->plugin->host, r->plugin->port, r->mech ? r->mech : "none", (int)o);
}

/* The client's transport (the router is the server there). */

static void server_free_WT(pn_transport_t *t)
{
    relay_t *r = pnx_sasl_get_context(t);
    pnx_sasl_set_context(t, NULL);
    if (!r)
        return;
    r->client = NULL;
    svc_close_WT(r);
    relay_maybe_free_WT(r);
}

/* Proton calls this until the plugin posts its mechanisms: the first call starts the
 * connection to the service, and nothing is posted before the service's list came. */
static bool server_init_WT(pn_transport_t *t)
{
    relay_t *r = pnx_sasl_get_context(t);
    if (!r->started && !r->closing)
        svc_start_WT(r);
    return true;
}

static const char *server_list_mechs_WT(pn_transport_t *t)
{
    relay_t *r = pnx_sasl_get_context(t);
    return r->mechs;
}

static void server_prepare_write_WT(pn_transport_t *t)
{
    relay_t *r = pnx_sasl_get_context(t);
    switch (r->to_client) {
    case TO_CLIENT_MECHS:
        pnx_sasl_set_desired_state(t, SASL_POSTED_MECHANISMS);
        break;
    case TO_CLIENT_CHALLENGE:
        pnx_sasl_set_bytes_out(t, bytes_get(&r->challenge));
        pnx_sasl_set_desired_state(t, SASL_POSTED_CHALLENGE);
        break;
    case TO_CLIENT_OK:
        pnx_sasl_set_succeeded(t, r->user, NULL);
        /* the service's additional data (a SCRAM server signature) goes to the client */
        pnx_sasl_set_bytes_out(t, r->extra.n ? bytes_get(&r->extra) : pn_bytes(0, NULL));
        pnx_sasl_set_desired_state(t, SASL_POSTED_OUTCOME);
        break;
    case TO_CLIENT_FAIL:
        pnx_sasl_set_failed(t);
        pnx_sasl_set_bytes_out(t, pn_bytes(0, NULL));
        pnx_sasl_set_desired_state(t, SASL_POSTED_OUTCOME);
        break;
    default:
        break;
    }
    r->to_client = TO_CLIENT_NONE;
}

static void server_process_init_WT(pn_transport_t *t, const char *mech, const pn_bytes_t *recv)
{
    relay_t *r = pnx_sasl_get_context(t);
    if (r->step != 0) {
        fail_WT(r, "a second sasl-init");
        return;
    }
    r->step = 1;
    free(r->mech);
    r->mech = base_strdup(mech ? mech : "");
    bytes_set(&r->response, recv);
    r->to_svc = TO_SVC_INIT;
    kick_svc_WT(r);
}

static void server_process_response_WT(pn_transport_t *t, const pn_bytes_t *recv)
{
    relay_t *r = pnx_sasl_get_context(t);
    if (r->step != 1 || r->to_svc != TO_SVC_NONE) {
        fail_WT(r, "a sasl-response no challenge asked for");
        return;
    }
    bytes_set(&r->response, recv);
    r->to_svc = TO_SVC_RESPONSE;
    kick_svc_WT(r);
}

static bool no_mechanisms_WT(pn_transport_t *t, const char *mechs)
{
    (void)t;
    (void)mechs;
    return false;
}

static void no_bytes_WT(pn_transport_t *t, const pn_bytes_t *recv)
{
    (void)t;
    (void)recv;
}

static void no_init_WT(pn_transport_t *t, const char *mech, const pn_bytes_t *recv)
{
    (void)t;
    (void)mech;
    (void)recv;
}

static bool no_encrypt_WT(pn_transport_t *t)
{
    (void)t;
    return false;
}

static ssize_t no_encrypt_size_WT(pn_transport_t *t)
{
    (void)t;
    return 0;
}

static ssize_t no_code_WT(pn_transport_t *t, pn_bytes_t in, pn_bytes_t *out)
{
    (void)t;
    (void)in;
    (void)out;
    return -1; /* never called: no security layer is negotiated */
}

static const pnx_sasl_implementation server_impl = {
    .free = server_free_WT,
    .list_mechanisms = server_list_mechs_WT,
    .init_server = server_init_WT,
    .init_client = no_server_WT,
    .prepare_write = server_prepare_write_WT,
    .process_init = server_process_init_WT,
    .process_response = server_process_response_WT,
    .process_mechanisms = no_mechanisms_WT,
    .process_challenge = no_bytes_WT,
    .process_outcome = no_bytes_WT,
    .can_encrypt = no_encrypt_WT,
    .max_encrypt_size = no_encrypt_size_WT,
    .encode = no_code_WT,
    .decode = no_code_WT,
};

static const pnx_sasl_implementation svc_impl = {
    .free = svc_free_WT,
    .list_mechanisms = no_mechs_WT,
    .init_server = no_server_WT,
    .init_client = svc_init_client_WT,
    .prepare_write = svc_prepare_write_WT,
    .process_init = no_init_WT,
    .process_response = no_bytes_WT,
    .process_mechanisms = svc_process_mechanisms_WT,
    .process_challenge = svc_process_challenge_WT,
    .process_outcome = svc_process_outcome_WT,
    .can_encrypt = no_encrypt_WT,
    .max_encrypt_size = no_encrypt_size_WT,
    .encode = no_code_WT,
    .decode = no_code_WT,
};

bool rtr_authsvc_server_WT(pn_transport_t *t, rtr_worker_t *w, const cfg_listener_t *l,
                           uint64_t conn_id, const char *peer, void (*wake_WT)(void *arg),
                           void *arg)
{
    const cfg_auth_plugin_t *p = cfg_auth_plugin_find(w->ctx->cfg, l->sasl_plugin);
    if (!p)
        return false;
    relay_t *r = base_calloc(1, sizeof(*r));
    r->client = t;
    r->wake_WT = wake_WT;
    r->wake_arg = arg;
    r->conn_id = conn_id;
    snprintf(r->peer, sizeof(r->peer), "%s", peer);
    r->plugin = p;
    r->worker = w;
    /* as qdrouterd: the listener's authenticatePeer, its saslMechanisms filter what the
     * service offers, and mechanisms that send a password in clear are allowed */
    pn_transport_require_auth(t, l->authenticate_peer);
    pn_sasl_t *sasl = pn_sasl(t);
    if (l->sasl_mechanisms)
        pn_sasl_allowed_mechs(sasl, l->sasl_mechanisms);
    pn_sasl_set_allow_insecure_mechs(sasl, true);
    pnx_sasl_set_implementation(t, &server_impl, r);
    return true;
}
