/* router/http_tls.c: https and wss - an http listener with an sslProfile, as qdrouterd 1.19
 * serves one: libwebsockets runs its own OpenSSL session on each connection, with the server
 * context of the listener's vhost.  That context is filled from the profile's context that
 * router/tls.c built and checked at start-up (certificate and chain, key, trusted CAs,
 * ciphers, protocols), so the files, the key's password and every check are those of the
 * AMQP listeners, and a bad file stops start-up with tls.c's one line.
 * router/DESIGN.md "The HTTP server".
 *
 * What the listener's attributes mean here (qdrouterd's http-libwebsockets.c):
 *   requireSsl false  plain HTTP is served on the port too (the first byte decides, as lws's
 *                     ALLOW_NON_SSL_ON_SSL_PORT and ALLOW_HTTP_ON_HTTPS_LISTENER do);
 *   requireSsl true   only TLS: anything else fails the handshake and is closed;
 *   authenticatePeer  with trusted CAs in the profile: a TLS client must present a
 *                     certificate they signed (OpenSSL's verification decides; qdrouterd's
 *                     lws callback would take any certificate).
 *
 * An sslProfile UPDATE reaches the listeners that name it (rtr_http__tls_watch): new https
 * and wss clients get the new certificate, open connections go on with theirs.  How the
 * vhost's context takes the new profile is said at rtr_http__tls_reload().
 *
 * An https client whose TLS handshake fails is counted (the listener's and the router's
 * tlsHandshakesFailed, as on an AMQP listener) and logged once at info with its address:
 * lws reports each SSL_accept() (LWS_CALLBACK_SSL_INFO), where the session gets a note of
 * ours (its ex_data), and a session freed with bytes read and its handshake not done failed
 * (the note's free callback) - lws closes a connection whose client hung up without asking
 * OpenSSL again, so the end of SSL_accept() alone would miss those.
 *
 * Threads: the admin thread runs everything here (lws calls back on its loop), except
 * tls_changed(), which the thread of the UPDATE calls.
 */
#include "router/http_int.h"
#include "router/lstats.h"
#include "router/tls.h"

#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

#define LOG HTTP_LOG

void rtr_http__tls_vhost_options(const cfg_listener_t *lc, struct lws_context_creation_info *vi)
{
    if (!lc->ssl_profile)
        return;
    /* lws makes the vhost's (empty) server context and hands it to the vhost's first
     * protocol (LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS), which fills it */
    vi->options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT | LWS_SERVER_OPTION_CREATE_VHOST_SSL_CTX;
    /* HTTP/1.1 only: lws would offer h2, whose requests come on streams of their own (without
     * the listener on them) and whose WebSockets the AMQP bridge does not know */
    vi->alpn = "http/1.1";
    /* each SSL_accept()'s start and end, for counting the handshakes that failed */
    vi->ssl_info_event_mask = SSL_CB_HANDSHAKE_START | SSL_CB_EXIT;
    if (!lc->require_ssl)
        vi->options |= LWS_SERVER_OPTION_ALLOW_NON_SSL_ON_SSL_PORT |
                       LWS_SERVER_OPTION_ALLOW_HTTP_ON_HTTPS_LISTENER;
}

/* The trusted CAs hold at least one certificate. */
static bool has_trusted_cas(SSL_CTX *ctx)
{
    X509_STORE *st = SSL_CTX_get_cert_store(ctx);
    return st && sk_X509_OBJECT_num(X509_STORE_get0_objects(st)) > 0;
}

static int cert_cb(SSL *ssl, void *arg);

int rtr_http__tls_ctx_fill(struct lws_vhost *vh, void *ssl_ctx)
{
    SSL_CTX         *ctx = ssl_ctx;
    http_listener_t *l = lws_get_vhost_user(vh);
    if (!l || !ctx || !l->cfg->ssl_profile)
        return 0;
    const cfg_listener_t *lc = l->cfg;
    char                  err[512];
    /* the generation first: an UPDATE between the two is copied again */
    l->tls_gen = rtr_tls_profile_gen(l->srv->rtr->tls, lc->ssl_profile);
    if (rtr_tls_profile_copy(l->srv->rtr->tls, lc->ssl_profile, ctx, err, sizeof(err)) < 0) {
        LOG(CRITICAL, "Listener %s (https): %s", lc->port, err);
        return -1;
    }
    /* lws would switch a session to the context of the vhost a ClientHello's server name
     * matches "on the same port", and all our vhosts share the no-listen one: each listener
     * keeps its own certificate */
    SSL_CTX_set_tlsext_servername_callback(ctx, NULL);
    /* as the AMQP listeners' contexts: no session cache; the id context lets a client that
     * presented a certificate resume with a ticket */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    static const unsigned char sid[] = "junction-https";
    SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
    if (lc->authenticate_peer && has_trusted_cas(ctx))
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    SSL_CTX_set_cert_cb(ctx, cert_cb, l);
    l->ssl_ctx = ctx;
    return 0;
}

void rtr_http__tls_label(struct lws *wsi, char *buf, size_t len)
{
    buf[0] = '\0';
    SSL *ssl = lws_get_ssl(wsi);
    if (ssl && SSL_is_init_finished(ssl))
        snprintf(buf, len, "%s %s %d", SSL_get_version(ssl), SSL_get_cipher_name(ssl),
                 SSL_get_cipher_bits(ssl, NULL));
}

/* ---- an UPDATE of the listener's sslProfile ---- */

/* Before the server picks its certificate for a new session (OpenSSL's certificate callback,
 * after the ClientHello).  Only after an UPDATE changed the key's type (see
 * rtr_http__tls_reload): the session gets the context's current certificate alone. */
static int cert_cb(SSL *ssl, void *arg)
{
    http_listener_t *l = arg;
    if (!l->one_cert)
        return 1;
    SSL_CTX  *ctx = SSL_get_SSL_CTX(ssl);
    X509     *cert = SSL_CTX_get0_certificate(ctx);
    EVP_PKEY *key = SSL_CTX_get0_privatekey(ctx);
    STACK_OF(X509) *chain = NULL;
    if (!cert || !key || SSL_CTX_get0_chain_certs(ctx, &chain) != 1)
        return 0;
    SSL_certs_clear(ssl);
    return SSL_use_cert_and_key(ssl, cert, key, chain, 1) == 1 ? 1 : 0;
}

/* The OpenSSL type of ctx's current key (EVP_PKEY_RSA ...), or NID_undef. */
static int key_type(SSL_CTX *ctx)
{
    EVP_PKEY *k = SSL_CTX_get0_privatekey(ctx);
    return k ? EVP_PKEY_get_base_id(k) : NID_undef;
}

/* Copy listener l's profile into its vhost's context again when an UPDATE changed it: at
 * once (tls_async_cb), and before each accept - so an https client that connects after an
 * UPDATE was answered gets the new certificate whichever thread ran it.
 *
 * The context is changed in place, as lws does itself when a vhost's certificate is renewed
 * (lws_tls_cert_updated): lws keeps its own data in the context (its ex_data, the ALPN and
 * info callbacks) and offers no way to give a vhost another one, and switching each new
 * session to a context of ours (SSL_set_SSL_CTX) would lose that data on it.  In place is
 * safe here:
 *  - only the admin thread uses the context (every lws session runs on it), and this runs
 *    there, between callbacks;
 *  - a session copies the context's certificates, key, cipher lists and protocol range when
 *    it is made (SSL_new(), at the accept), each with a reference of its own: open
 *    connections keep theirs, and so does a connection accepted before the UPDATE whose
 *    handshake comes after it; the trusted CAs are looked up in the context when a client
 *    certificate is verified (one store, swapped by reference).
 * A context holds one certificate per key type: a new certificate of another type than the
 * old one (RSA to EC) would leave the old one in the context beside it, offered to clients
 * that prefer its type; then cert_cb gives each new session the current one alone.
 * The profile's context was built and checked, so copying from it fails only without memory
 * (logged; the listener then serves what the context has). */
void rtr_http__tls_reload(http_listener_t *l)
{
    if (!l->ssl_ctx)
        return;
    const rtr_tls_t *tls = l->srv->rtr->tls;
    const char      *name = l->cfg->ssl_profile;
    unsigned long    gen = rtr_tls_profile_gen(tls, name);
    if (gen == l->tls_gen)
        return;
    l->tls_gen = gen;
    int  before = key_type(l->ssl_ctx);
    char err[512];
    if (rtr_tls_profile_copy(tls, name, l->ssl_ctx, err, sizeof(err)) < 0) {
        LOG(ERROR, "Listener %s (https): sslProfile '%s' updated, but not taken: %s", l->cfg->port,
            name, err);
        return;
    }
    if (key_type(l->ssl_ctx) != before)
        l->one_cert = true;
    /* new session-ticket keys: a client could otherwise resume a session made under the old
     * profile (its certificate, the client certificate the old CAs verified) */
    unsigned char keys[80];
    if (RAND_bytes(keys, sizeof(keys)) != 1 ||
        SSL_CTX_set_tlsext_ticket_keys(l->ssl_ctx, keys, sizeof(keys)) != 1) {
        SSL_CTX_set_options(l->ssl_ctx, SSL_OP_NO_TICKET); /* no resumption then */
        ERR_clear_error();
    }
    OPENSSL_cleanse(keys, sizeof(keys));
    LOG(INFO, "Listener %s (https): new connections use the updated sslProfile '%s'", l->cfg->port,
        name);
}

/* The admin loop's wake-up from tls_changed(): every accepting https listener looks at its
 * profile's generation. */
static void tls_async_cb(uv_async_t *h)
{
    rtr_http_t *srv = h->data;
    for (http_listener_t *l = srv->listeners; l; l = l->next)
        if (l->state == LST_POLLING)
            rtr_http__tls_reload(l);
}

/* rtr_tls_watch's callback: on the UPDATE's thread, under the set's lock - wake the admin
 * loop only (many UPDATEs before it runs give one wake-up: the generations tell). */
static void tls_changed(void *arg)
{
    uv_async_send(arg);
}

void rtr_http__tls_watch(rtr_http_t *srv)
{
    if (!srv->rtr || !srv->rtr->tls)
        return;
    uv_async_init(srv->loop, &srv->tls_async, tls_async_cb);
    srv->tls_async.data = srv;
    rtr_tls_watch(srv->rtr->tls, tls_changed, &srv->tls_async);
    srv->tls_watch = true;
}

void rtr_http__tls_unwatch(rtr_http_t *srv)
{
    if (!srv->tls_watch)
        return;
    srv->tls_watch = false;
    rtr_tls_watch(srv->rtr->tls, NULL, NULL); /* no call runs or comes after this */
    uv_close((uv_handle_t *)&srv->tls_async, NULL);
    for (http_listener_t *l = srv->listeners; l; l = l->next)
        l->ssl_ctx = NULL; /* freed with its vhost */
}

/* ---- handshakes that failed ---- */

void rtr_http__tls_failed(http_listener_t *l, const char *peer, const char *why)
{
    rtr_http_t *srv = l->srv;
    char        name[256];
    if (srv->shard)
        stats_counter_add(srv->shard, srv->rtr->tls_failed, 1);
    rtr_lstats_tls_failed_other(srv->rtr->lstats, l->cfg, srv->shard, name, sizeof(name));
    LOG(INFO, "HTTP: connection from %s closed: TLS handshake failed: %s (listener %s)", peer, why,
        name);
}

/* What the admin thread knows of an https session's handshake, in the session's ex_data
 * (from its first SSL_accept() to SSL_free(), whose free callback says whether it failed). */
typedef struct hs_watch {
    http_listener_t *l;         /* its listener */
    const char      *why;       /* why an SSL_accept() failed (OpenSSL's, static), or NULL */
    char             peer[128]; /* the client's address */
} hs_watch_t;

static int            s_hs_idx = -1;
static pthread_once_t s_hs_once = PTHREAD_ONCE_INIT;

/* SSL_free() of an https session (admin thread, lws's close): a session that read bytes of a
 * handshake and did not finish it failed - an error of OpenSSL's, or the client gave up
 * (lws closes a connection whose client hung up without asking OpenSSL again).  A client
 * whose Finished came is done, even if it closed while TLS 1.3's session tickets were
 * still being written to it. */
static void hs_free(void *parent, void *ptr, CRYPTO_EX_DATA *ad, int idx, long argl, void *argp)
{
    (void)ad, (void)idx, (void)argl, (void)argp;
    hs_watch_t *h = ptr;
    SSL        *ssl = parent;
    if (!h)
        return;
    BIO *rb = SSL_get_rbio(ssl);
    /* not while the server stops (srv->ctx NULL): those sessions are the router's doing;
     * a client that closed before its first byte started no handshake (as on an AMQP
     * listener: not counted) */
    unsigned char fin[EVP_MAX_MD_SIZE];
    if (h->l->srv->ctx && !SSL_is_init_finished(ssl) && rb && BIO_number_read(rb) > 0 &&
        SSL_get_peer_finished(ssl, fin, sizeof(fin)) == 0)
        rtr_http__tls_failed(h->l, h->peer,
                             h->why ? h->why : "the client closed the connection first");
    free(h);
}

static void hs_index(void)
{
    s_hs_idx = SSL_get_ex_new_index(0, NULL, NULL, NULL, hs_free);
}

int rtr_http__tls_info(struct lws *wsi, const struct lws_ssl_info *si)
{
    SSL             *ssl = lws_get_ssl(wsi);
    http_listener_t *l = rtr_http__listener(wsi);
    if (!ssl || !l || !si || SSL_is_init_finished(ssl))
        return 0;
    pthread_once(&s_hs_once, hs_index);
    if (s_hs_idx < 0)
        return 0;
    hs_watch_t *h = SSL_get_ex_data(ssl, s_hs_idx);
    if (!h) { /* the session's first SSL_accept() */
        h = base_calloc(1, sizeof(*h));
        h->l = l;
        snprintf(h->peer, sizeof(h->peer), "?");
        struct sockaddr_storage ss;
        socklen_t               sl = sizeof(ss);
        if (getpeername(SSL_get_fd(ssl), (struct sockaddr *)&ss, &sl) == 0)
            rtr_sockaddr_format(&ss, h->peer, sizeof(h->peer));
        if (SSL_set_ex_data(ssl, s_hs_idx, h) != 1) {
            free(h);
            return 0;
        }
    }
    /* an SSL_accept() that failed (neither done nor waiting for the socket): its reason,
     * peeked, not taken - lws reads the error queue after SSL_accept() returns */
    if ((si->where & SSL_CB_EXIT) && si->ret <= 0 && SSL_want(ssl) == SSL_NOTHING) {
        unsigned long e = ERR_peek_last_error();
        const char   *why = e ? ERR_reason_error_string(e) : NULL;
        if (why)
            h->why = why;
    }
    return 0;
}
