/* router/tls.c: TLS below the frame guard (tls.h, docs/decisions/0005) with OpenSSL's memory
 * BIOs: the transport writes the socket's bytes into a session's input BIO and reads the
 * plaintext out, and writes Proton's output in and reads the records out for the socket.
 *
 * Thread suffixes: rtr_tls_new/free run on the main thread; _WT = the connection's worker.
 */
#include "router/tls.h"

#include "core/base/base.h"
#include "router/tls_uid.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct tls_profile {
    const char    *name; /* the cfg's */
    SSL_CTX       *ctx;
    rtr_tls_uid_t *uid;         /* how a client certificate names its user (tls_uid.h) */
    SSL_CTX       *client;      /* for authServicePlugins that name the profile, else NULL */
    bool           client_name; /* without a caCertFile: a server's name is checked too */
} tls_profile_t;

struct rtr_tls {
    tls_profile_t *profiles;
    size_t         n;
};

struct rtr_tls_conn {
    SSL *ssl;
    BIO *in;   /* socket -> TLS */
    BIO *out;  /* TLS -> socket */
    bool shut; /* close_notify queued */

    const tls_profile_t *prof; /* the listener's profile (rtr_tls_t outlives its sessions) */
};

/* OpenSSL's last error as text (its reason, e.g. "key values mismatch"). */
static const char *ssl_why(void)
{
    unsigned long e = ERR_peek_last_error();
    const char   *r = e ? ERR_reason_error_string(e) : NULL;
    ERR_clear_error();
    return r ? r : "unknown error";
}

__attribute__((format(printf, 4, 5))) static int prof_fail(const cfg_ssl_profile_t *p, char *err,
                                                           size_t errlen, const char *fmt, ...)
{
    char    what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(err, errlen, "sslProfile '%s': %s", p->name, what);
    return -1;
}

/* A file attribute that must be readable: its errno's text, as the line says it. */
static int check_file(const cfg_ssl_profile_t *p, const char *attr, const char *path, char *err,
                      size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return prof_fail(p, err, errlen, "%s %s: %s", attr, path, strerror(errno));
    fclose(f);
    return 0;
}

/* `protocols`: blank-separated TLSv1, TLSv1.1, TLSv1.2, TLSv1.3 (Proton's names); the session
 * is limited to the lowest .. highest given (OpenSSL has no holes in between). */
static int set_protocols(SSL_CTX *ctx, const cfg_ssl_profile_t *p, char *err, size_t errlen)
{
    static const struct {
        const char *name;
        int         v;
    } known[] = {{"TLSv1", TLS1_VERSION},
                 {"TLSv1.1", TLS1_1_VERSION},
                 {"TLSv1.2", TLS1_2_VERSION},
                 {"TLSv1.3", TLS1_3_VERSION}};
    int  lo = 0, hi = 0;
    char tok[32];
    for (const char *s = p->protocols; *s;) {
        while (*s == ' ' || *s == '\t' || *s == ',')
            s++;
        size_t n = strcspn(s, " \t,");
        if (n == 0)
            break;
        int v = 0;
        for (size_t i = 0; i < BASE_ARRAY_LEN(known); i++)
            if (strlen(known[i].name) == n && strncmp(s, known[i].name, n) == 0)
                v = known[i].v;
        if (!v) {
            snprintf(tok, sizeof(tok), "%.*s", (int)(n < 24 ? n : 24), s);
            return prof_fail(p, err, errlen,
                             "protocols: unknown protocol '%s' (TLSv1, TLSv1.1, TLSv1.2 or "
                             "TLSv1.3)",
                             tok);
        }
        lo = lo && lo < v ? lo : v;
        hi = hi > v ? hi : v;
        s += n;
    }
    if (!lo)
        return prof_fail(p, err, errlen, "protocols: no protocol given");
    if (!SSL_CTX_set_min_proto_version(ctx, lo) || !SSL_CTX_set_max_proto_version(ctx, hi))
        return prof_fail(p, err, errlen, "protocols '%s': %s", p->protocols, ssl_why());
    return 0;
}

/* The key's password: the profile's (resolved), or none - never a prompt on the terminal. */
static int password_cb(char *buf, int size, int rwflag, void *userdata)
{
    (void)rwflag;
    const char *pw = userdata;
    if (!pw)
        return 0;
    size_t n = strlen(pw);
    if (n > (size_t)size)
        return 0;
    memcpy(buf, pw, n);
    return (int)n;
}

static int profile_ctx_of(const cfg_ssl_profile_t *p, const SSL_METHOD *method, SSL_CTX **out,
                          char *err, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(method);
    char    *pw = NULL;
    int      rc = -1;
    if (!ctx)
        return prof_fail(p, err, errlen, "cannot make a TLS context: %s", ssl_why());
    SSL_CTX_set_min_proto_version(ctx, TLS1_VERSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS); /* an idle connection holds no buffers */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_default_passwd_cb(ctx, password_cb);
    if (p->password) {
        bool plain = false;
        char why[512];
        if (cfg_password_resolve(p->password, true, &pw, &plain, why, sizeof(why)) != 0) {
            prof_fail(p, err, errlen, "password: %s", why);
            goto out;
        }
        SSL_CTX_set_default_passwd_cb_userdata(ctx, pw);
    }
    if (p->cert_file) {
        if (check_file(p, "certFile", p->cert_file, err, errlen) < 0)
            goto out;
        if (SSL_CTX_use_certificate_chain_file(ctx, p->cert_file) != 1) {
            prof_fail(p, err, errlen, "certFile %s: not a PEM certificate (%s)", p->cert_file,
                      ssl_why());
            goto out;
        }
        const char *key = p->private_key_file ? p->private_key_file : p->cert_file;
        const char *attr = p->private_key_file ? "privateKeyFile" : "certFile";
        if (check_file(p, attr, key, err, errlen) < 0)
            goto out;
        if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
            unsigned long e = ERR_peek_last_error();
            bool          mismatch = ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH;
            const char   *why = ssl_why();
            if (mismatch)
                prof_fail(p, err, errlen, "%s %s: the key does not match certFile %s", attr, key,
                          p->cert_file);
            else
                prof_fail(p, err, errlen, "%s %s: cannot read the private key (%s%s)", attr, key,
                          why,
                          p->password ? "; wrong password?" : "; encrypted without a password?");
            goto out;
        }
        if (SSL_CTX_check_private_key(ctx) != 1) {
            ERR_clear_error();
            prof_fail(p, err, errlen, "%s %s: the key does not match certFile %s", attr, key,
                      p->cert_file);
            goto out;
        }
    }
    if (p->ca_cert_file) {
        if (check_file(p, "caCertFile", p->ca_cert_file, err, errlen) < 0)
            goto out;
        if (SSL_CTX_load_verify_locations(ctx, p->ca_cert_file, NULL) != 1) {
            prof_fail(p, err, errlen, "caCertFile %s: not PEM certificates (%s)", p->ca_cert_file,
                      ssl_why());
            goto out;
        }
    }
    if (p->ciphers && SSL_CTX_set_cipher_list(ctx, p->ciphers) != 1) {
        prof_fail(p, err, errlen, "ciphers '%.200s': no cipher OpenSSL knows (%s)", p->ciphers,
                  ssl_why());
        goto out;
    }
    if (p->protocols && set_protocols(ctx, p, err, errlen) < 0)
        goto out;
    rc = 0;
out:
    /* the key is loaded: the password is not needed any more */
    SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
    if (pw) {
        explicit_bzero(pw, strlen(pw));
        free(pw);
    }
    if (rc < 0)
        SSL_CTX_free(ctx);
    else
        *out = ctx;
    return rc;
}

/* What a profile needs for client certificates: the names of its CAs, which a session that
 * asks for a certificate sends the client (OpenSSL sends none otherwise), and how a
 * certificate names its user (uidFormat, uidNameMappingFile: tls_uid.c). */
static int profile_peer_setup(const cfg_ssl_profile_t *p, tls_profile_t *tp, char *err,
                              size_t errlen)
{
    if (p->ca_cert_file) {
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(p->ca_cert_file);
        if (!names)
            return prof_fail(p, err, errlen, "caCertFile %s: no CA certificate names (%s)",
                             p->ca_cert_file, ssl_why());
        SSL_CTX_set_client_CA_list(tp->ctx, names); /* the context owns them */
    }
    tp->uid = rtr_tls_uid_new(p, err, errlen);
    return tp->uid ? 0 : -1;
}

static int profile_ctx(const cfg_ssl_profile_t *p, SSL_CTX **out, char *err, size_t errlen)
{
    return profile_ctx_of(p, TLS_server_method(), out, err, errlen);
}

static int client_ctx(const cfg_t *cfg, const cfg_ssl_profile_t *p, tls_profile_t *tp, char *err,
                      size_t errlen);

rtr_tls_t *rtr_tls_new(const cfg_t *cfg, char *err, size_t errlen)
{
    rtr_tls_t *tls = base_calloc(1, sizeof(*tls));
    if (cfg->n_ssl_profiles)
        tls->profiles = base_calloc(cfg->n_ssl_profiles, sizeof(*tls->profiles));
    for (size_t i = 0; i < cfg->n_ssl_profiles; i++) {
        const cfg_ssl_profile_t *p = &cfg->ssl_profiles[i];
        if (profile_ctx(p, &tls->profiles[i].ctx, err, errlen) < 0) {
            rtr_tls_free(tls);
            return NULL;
        }
        if (profile_peer_setup(p, &tls->profiles[i], err, errlen) < 0) {
            SSL_CTX_free(tls->profiles[i].ctx);
            rtr_tls_free(tls);
            return NULL;
        }
        tls->profiles[i].name = p->name;
        tls->n++;
        if (client_ctx(cfg, p, &tls->profiles[i], err, errlen) < 0) {
            rtr_tls_free(tls);
            return NULL;
        }
    }
    return tls;
}

void rtr_tls_free(rtr_tls_t *tls)
{
    if (!tls)
        return;
    for (size_t i = 0; i < tls->n; i++) {
        SSL_CTX_free(tls->profiles[i].ctx);
        rtr_tls_uid_free(tls->profiles[i].uid);
        SSL_CTX_free(tls->profiles[i].client);
    }
    free(tls->profiles);
    free(tls);
}

rtr_tls_conn_t *rtr_tls_conn_new_WT(const rtr_tls_t *tls, const char *profile)
{
    SSL_CTX             *ctx = NULL;
    const tls_profile_t *prof = NULL;
    for (size_t i = 0; tls && i < tls->n && !ctx; i++)
        if (strcmp(tls->profiles[i].name, profile) == 0)
            prof = &tls->profiles[i], ctx = prof->ctx;
    if (!ctx)
        return NULL;
    rtr_tls_conn_t *t = base_calloc(1, sizeof(*t));
    t->prof = prof;
    t->ssl = SSL_new(ctx);
    t->in = BIO_new(BIO_s_mem());
    t->out = BIO_new(BIO_s_mem());
    if (!t->ssl || !t->in || !t->out) {
        BIO_free(t->in);
        BIO_free(t->out);
        SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return NULL;
    }
    BIO_set_mem_eof_return(t->in, -1);  /* empty: "retry", not the end of the stream */
    SSL_set_bio(t->ssl, t->in, t->out); /* the session owns both */
    SSL_set_accept_state(t->ssl);
    return t;
}

void rtr_tls_conn_free_WT(rtr_tls_conn_t *t)
{
    if (!t)
        return;
    SSL_free(t->ssl);
    free(t);
    ERR_clear_error();
}

void rtr_tls_put_cipher_WT(rtr_tls_conn_t *t, const void *p, size_t n)
{
    /* a memory BIO grows: it takes everything (the caller bounds it by RTR_TLS_IN_MAX) */
    BIO_write(t->in, p, (int)n);
}

size_t rtr_tls_cipher_in_WT(const rtr_tls_conn_t *t)
{
    return BIO_ctrl_pending(t->in);
}

long rtr_tls_read_WT(rtr_tls_conn_t *t, void *buf, size_t cap, const char **why)
{
    int k = SSL_read(t->ssl, buf, cap > INT_MAX ? INT_MAX : (int)cap);
    if (k > 0)
        return k;
    switch (SSL_get_error(t->ssl, k)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        return 0;
    case SSL_ERROR_ZERO_RETURN:
        return -1;
    default:
        *why = ssl_why();
        return -2;
    }
}

bool rtr_tls_ready_WT(const rtr_tls_conn_t *t)
{
    return SSL_is_init_finished(t->ssl);
}

long rtr_tls_write_WT(rtr_tls_conn_t *t, const void *p, size_t n)
{
    /* one record at a time: the caller bounds the records waiting for the socket */
    int k = SSL_write(t->ssl, p, n > 16384 ? 16384 : (int)n);
    if (k > 0)
        return k;
    ERR_clear_error();
    return -1;
}

size_t rtr_tls_cipher_out_WT(const rtr_tls_conn_t *t)
{
    return BIO_ctrl_pending(t->out);
}

size_t rtr_tls_take_cipher_WT(rtr_tls_conn_t *t, void *buf, size_t cap)
{
    int k = BIO_read(t->out, buf, cap > INT_MAX ? INT_MAX : (int)cap);
    return k > 0 ? (size_t)k : 0;
}

void rtr_tls_shutdown_WT(rtr_tls_conn_t *t)
{
    if (t->shut || !SSL_is_init_finished(t->ssl))
        return;
    t->shut = true;
    SSL_shutdown(t->ssl);
    ERR_clear_error();
}

const char *rtr_tls_proto_WT(const rtr_tls_conn_t *t)
{
    return SSL_get_version(t->ssl);
}

const char *rtr_tls_cipher_WT(const rtr_tls_conn_t *t)
{
    return SSL_get_cipher_name(t->ssl);
}

int rtr_tls_ssf_WT(const rtr_tls_conn_t *t)
{
    return SSL_is_init_finished(t->ssl) ? SSL_get_cipher_bits(t->ssl, NULL) : 0;
}

void rtr_tls_conn_ask_cert_WT(rtr_tls_conn_t *t)
{
    /* as Proton's PN_SSL_VERIFY_PEER on a server: no certificate, or one the profile's CAs
       did not sign, fails the handshake */
    SSL_set_verify(t->ssl, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
}

bool rtr_tls_peer_verified_WT(const rtr_tls_conn_t *t)
{
    return SSL_is_init_finished(t->ssl) && SSL_get0_peer_certificate(t->ssl) &&
           SSL_get_verify_result(t->ssl) == X509_V_OK;
}

char *rtr_tls_peer_user_WT(const rtr_tls_conn_t *t)
{
    if (!rtr_tls_peer_verified_WT(t))
        return NULL;
    return rtr_tls_uid_user(t->prof->uid, SSL_get0_peer_certificate(t->ssl));
}

/* Append `name` to the ':'-separated list in *buf (heap, grown). */
static void cipher_append(char **buf, size_t *len, const char *name)
{
    size_t n = strlen(name);
    *buf = base_realloc(*buf, *len + n + 2);
    if (*len)
        (*buf)[(*len)++] = ':';
    memcpy(*buf + *len, name, n + 1);
    *len += n;
}

int rtr_tls_profile_copy(const rtr_tls_t *tls, const char *profile, SSL_CTX *dst, char *err,
                         size_t errlen)
{
    SSL_CTX *src = NULL;
    for (size_t i = 0; tls && i < tls->n && !src; i++)
        if (strcmp(tls->profiles[i].name, profile) == 0)
            src = tls->profiles[i].ctx;
    if (!src) {
        snprintf(err, errlen, "sslProfile '%s': no TLS context", profile);
        return -1;
    }
    X509     *cert = SSL_CTX_get0_certificate(src);
    EVP_PKEY *key = SSL_CTX_get0_privatekey(src);
    STACK_OF(X509) *chain = NULL;
    if (cert && key &&
        (SSL_CTX_use_certificate(dst, cert) != 1 || SSL_CTX_use_PrivateKey(dst, key) != 1 ||
         SSL_CTX_get0_chain_certs(src, &chain) != 1 ||
         (chain && SSL_CTX_set1_chain(dst, chain) != 1))) {
        snprintf(err, errlen, "sslProfile '%s': cannot use its certificate: %s", profile,
                 ssl_why());
        return -1;
    }
    /* the trusted CAs: the one store, shared (OpenSSL locks it) */
    X509_STORE *store = SSL_CTX_get_cert_store(src);
    if (store && X509_STORE_up_ref(store) == 1)
        SSL_CTX_set_cert_store(dst, store);
    /* the ciphers: TLS 1.2 and below as a cipher list, TLS 1.3's as suites */
    STACK_OF(SSL_CIPHER) *sk = SSL_CTX_get_ciphers(src);
    char  *list = NULL, *suites = NULL;
    size_t nl = 0, ns = 0;
    for (int i = 0; sk && i < sk_SSL_CIPHER_num(sk); i++) {
        const SSL_CIPHER *c = sk_SSL_CIPHER_value(sk, i);
        if (strcmp(SSL_CIPHER_get_version(c), "TLSv1.3") == 0)
            cipher_append(&suites, &ns, SSL_CIPHER_get_name(c));
        else
            cipher_append(&list, &nl, SSL_CIPHER_get_name(c));
    }
    int ok = (!list || SSL_CTX_set_cipher_list(dst, list) == 1) &&
             SSL_CTX_set_ciphersuites(dst, suites ? suites : "") == 1 &&
             SSL_CTX_set_min_proto_version(dst, SSL_CTX_get_min_proto_version(src)) == 1 &&
             SSL_CTX_set_max_proto_version(dst, SSL_CTX_get_max_proto_version(src)) == 1;
    free(list);
    free(suites);
    if (!ok) {
        snprintf(err, errlen, "sslProfile '%s': cannot use its ciphers or protocols: %s", profile,
                 ssl_why());
        return -1;
    }
    return 0;
}
/* -- client sessions: the router's connections to authentication services (authsvc.c) -- */

/* A client context for profile p when an authServicePlugin names it (else none): the
 * profile's certificate and key (a client certificate for the service), ciphers and
 * protocols, and the server's certificate verified as Proton's client does - against the
 * system's CAs and the profile's caCertFile, its name checked only without a caCertFile
 * (rtr_tls_client_new_WT). */
static int client_ctx(const cfg_t *cfg, const cfg_ssl_profile_t *p, tls_profile_t *tp, char *err,
                      size_t errlen)
{
    SSL_CTX **out = &tp->client;
    bool      used = false;
    for (size_t i = 0; i < cfg->n_auth_plugins && !used; i++)
        used = cfg->auth_plugins[i].ssl_profile &&
               strcmp(cfg->auth_plugins[i].ssl_profile, p->name) == 0;
    if (!used)
        return 0;
    if (profile_ctx_of(p, TLS_client_method(), out, err, errlen) < 0)
        return -1;
    if (SSL_CTX_set_default_verify_paths(*out) != 1)
        ERR_clear_error(); /* no system CAs: the profile's caCertFile alone */
    SSL_CTX_set_verify(*out, SSL_VERIFY_PEER, NULL);
    tp->client_name = !p->ca_cert_file;
    return 0;
}

rtr_tls_conn_t *rtr_tls_client_new_WT(const rtr_tls_t *tls, const char *profile, const char *host)
{
    SSL_CTX *ctx = NULL;
    bool     check_name = false;
    for (size_t i = 0; tls && i < tls->n && !ctx; i++) {
        if (strcmp(tls->profiles[i].name, profile) == 0) {
            ctx = tls->profiles[i].client;
            check_name = tls->profiles[i].client_name;
        }
    }
    if (!ctx)
        return NULL;
    rtr_tls_conn_t *t = base_calloc(1, sizeof(*t));
    t->ssl = SSL_new(ctx);
    t->in = BIO_new(BIO_s_mem());
    t->out = BIO_new(BIO_s_mem());
    if (!t->ssl || !t->in || !t->out) {
        BIO_free(t->in);
        BIO_free(t->out);
        SSL_free(t->ssl);
        free(t);
        ERR_clear_error();
        return NULL;
    }
    BIO_set_mem_eof_return(t->in, -1);
    SSL_set_bio(t->ssl, t->in, t->out);
    SSL_set_connect_state(t->ssl);
    unsigned char addr[16];
    bool literal = inet_pton(AF_INET, host, addr) == 1 || inet_pton(AF_INET6, host, addr) == 1;
    if (!literal)
        SSL_set_tlsext_host_name(t->ssl, host); /* SNI takes names only */
    if (check_name && SSL_set1_host(t->ssl, host) != 1) {
        rtr_tls_conn_free_WT(t);
        return NULL;
    }
    SSL_do_handshake(t->ssl); /* the ClientHello, into the output BIO */
    ERR_clear_error();
    return t;
}
