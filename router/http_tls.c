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
 * Threads: the admin thread runs everything here (lws calls back on its loop).
 */
#include "router/http_int.h"
#include "router/tls.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>

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

int rtr_http__tls_ctx_fill(struct lws_vhost *vh, void *ssl_ctx)
{
    SSL_CTX         *ctx = ssl_ctx;
    http_listener_t *l = lws_get_vhost_user(vh);
    if (!l || !ctx || !l->cfg->ssl_profile)
        return 0;
    const cfg_listener_t *lc = l->cfg;
    char                  err[512];
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
