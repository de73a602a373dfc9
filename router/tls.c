/* router/tls.c: TLS below the frame guard (tls.h, docs/decisions/0005) with OpenSSL's memory
 * BIOs: the transport writes the socket's bytes into a session's input BIO and reads the
 * plaintext out, and writes Proton's output in and reads the records out for the socket.
 *
 * Thread suffixes: rtr_tls_new/free run on the main thread; rtr_tls_profile_* and
 * rtr_tls_profiles_* are thread-safe (tls.h: the set's lock); _LH = the caller holds the set's
 * lock; _WT = the connection's worker.
 */
#include "router/tls.h"

#include "core/base/base.h"
#include "router/mgmt/mgmt.h"

#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef struct tls_profile {
    const char       *name;  /* attrs.name */
    SSL_CTX          *ctx;   /* [lock] the context new sessions are made from (one reference) */
    cfg_ssl_profile_t attrs; /* [lock] a copy of the attributes ctx was built from */
    unsigned          users; /* [lock] listeners that name the profile */
} tls_profile_t;

struct rtr_tls {
    pthread_mutex_t lock;    /* guards the array and each profile's ctx, attrs and users;
                                held only to look up, swap or copy, never while a file is
                                read or a context built */
    tls_profile_t *profiles; /* [lock] */
    size_t         n;        /* [lock] */
};

struct rtr_tls_conn {
    SSL *ssl;
    BIO *in;   /* socket -> TLS */
    BIO *out;  /* TLS -> socket */
    bool shut; /* close_notify queued */
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

/* The context of profile p, built and checked: at start-up for every profile, and by
 * management's CREATE and UPDATE on the agent or admin thread (it touches nothing shared: the
 * password's environment variable is only read, and OpenSSL's error queue is per thread). */
static int profile_ctx(const cfg_ssl_profile_t *p, SSL_CTX **out, char *err, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
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
    if (p->cert_file) {
        /* the certificate's chain is built once, here, from certFile and caCertFile, and no
         * handshake builds it again: a handshake that builds it reads objects of the
         * context's store that a concurrent one may be filling in (OpenSSL 3 caches them
         * lazily; ThreadSanitizer sees the race when two workers shake hands on a new
         * context, as after every UPDATE) */
        SSL_CTX_build_cert_chain(ctx, SSL_BUILD_CHAIN_FLAG_IGNORE_ERROR);
        SSL_CTX_set_mode(ctx, SSL_MODE_NO_AUTO_CHAIN);
        ERR_clear_error();
    }
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

/* Fill a profile of the set: a copy of p's attributes and the context built from them. */
static void profile_fill(tls_profile_t *tp, const cfg_ssl_profile_t *p, SSL_CTX *ctx)
{
    cfg_ssl_profile_copy(&tp->attrs, p);
    tp->name = tp->attrs.name;
    tp->ctx = ctx;
}

/* The profile named `name`, or NULL.  _LH: tls->lock. */
static tls_profile_t *find_LH(rtr_tls_t *tls, const char *name)
{
    for (size_t i = 0; name && i < tls->n; i++)
        if (strcmp(tls->profiles[i].name, name) == 0)
            return &tls->profiles[i];
    return NULL;
}

/* The current context of profile `name` with a new reference (SSL_CTX_free() it), or NULL.
 * Thread-safe. */
static SSL_CTX *ctx_get(rtr_tls_t *tls, const char *name)
{
    pthread_mutex_lock(&tls->lock);
    tls_profile_t *tp = find_LH(tls, name);
    SSL_CTX       *ctx = tp ? tp->ctx : NULL;
    if (ctx)
        SSL_CTX_up_ref(ctx);
    pthread_mutex_unlock(&tls->lock);
    return ctx;
}

rtr_tls_t *rtr_tls_new(const cfg_t *cfg, char *err, size_t errlen)
{
    rtr_tls_t *tls = base_calloc(1, sizeof(*tls));
    pthread_mutex_init(&tls->lock, NULL);
    if (cfg->n_ssl_profiles)
        tls->profiles = base_calloc(cfg->n_ssl_profiles, sizeof(*tls->profiles));
    for (size_t i = 0; i < cfg->n_ssl_profiles; i++) {
        const cfg_ssl_profile_t *p = &cfg->ssl_profiles[i];
        if (profile_ctx(p, &tls->profiles[i].ctx, err, errlen) < 0) {
            rtr_tls_free(tls);
            return NULL;
        }
        profile_fill(&tls->profiles[i], p, tls->profiles[i].ctx);
        /* the configured listeners hold their profiles (management DELETE is refused) */
        for (size_t k = 0; k < cfg->n_listeners; k++)
            if (cfg->listeners[k].ssl_profile &&
                strcmp(cfg->listeners[k].ssl_profile, p->name) == 0)
                tls->profiles[i].users++;
        tls->n++;
    }
    return tls;
}

void rtr_tls_free(rtr_tls_t *tls)
{
    if (!tls)
        return;
    for (size_t i = 0; i < tls->n; i++) {
        SSL_CTX_free(tls->profiles[i].ctx);
        cfg_ssl_profile_fini(&tls->profiles[i].attrs);
    }
    free(tls->profiles);
    pthread_mutex_destroy(&tls->lock);
    free(tls);
}

rtr_tls_conn_t *rtr_tls_conn_new_WT(const rtr_tls_t *tls, const char *profile)
{
    /* the current context, with a reference of our own: a management UPDATE may replace
     * the profile's the moment the lock is let go */
    SSL_CTX *ctx = tls ? ctx_get((rtr_tls_t *)tls, profile) : NULL;
    if (!ctx)
        return NULL;
    rtr_tls_conn_t *t = base_calloc(1, sizeof(*t));
    t->ssl = SSL_new(ctx); /* the session keeps a reference of its own to ctx */
    SSL_CTX_free(ctx);
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

/* ---- run-time changes (management): thread-safe ---- */

int rtr_tls_profile_add(rtr_tls_t *tls, const cfg_ssl_profile_t *p, char *err, size_t errlen)
{
    SSL_CTX *ctx = NULL;
    if (profile_ctx(p, &ctx, err, errlen) < 0) /* the files are read outside the lock */
        return -EINVAL;
    int rc = 0;
    pthread_mutex_lock(&tls->lock);
    if (find_LH(tls, p->name)) {
        rc = -EEXIST;
    } else {
        tls->profiles = base_realloc(tls->profiles, (tls->n + 1) * sizeof(*tls->profiles));
        tls_profile_t *tp = &tls->profiles[tls->n++];
        memset(tp, 0, sizeof(*tp));
        profile_fill(tp, p, ctx);
        ctx = NULL;
    }
    pthread_mutex_unlock(&tls->lock);
    if (rc == -EEXIST)
        prof_fail(p, err, errlen, "an sslProfile of that name exists already");
    SSL_CTX_free(ctx);
    return rc;
}

int rtr_tls_profile_update(rtr_tls_t *tls, const cfg_ssl_profile_t *p, char *err, size_t errlen)
{
    SSL_CTX *ctx = NULL;
    if (profile_ctx(p, &ctx, err, errlen) < 0) /* the old context stays in force */
        return -EINVAL;
    cfg_ssl_profile_t old = {0};
    pthread_mutex_lock(&tls->lock);
    tls_profile_t *tp = find_LH(tls, p->name);
    if (tp) {
        /* sessions made from the old context keep their own reference to it: the
         * connections that have one go on untouched, new ones get the new context */
        SSL_CTX *was = tp->ctx;
        unsigned users = tp->users;
        old = tp->attrs;
        profile_fill(tp, p, ctx);
        tp->users = users;
        ctx = was;
    }
    pthread_mutex_unlock(&tls->lock);
    SSL_CTX_free(ctx); /* the old one, or the new one when there was no such profile */
    cfg_ssl_profile_fini(&old);
    if (!tp) {
        prof_fail(p, err, errlen, "no sslProfile of that name");
        return -ENOENT;
    }
    return 0;
}

int rtr_tls_profile_del(rtr_tls_t *tls, const char *name, char *err, size_t errlen)
{
    tls_profile_t gone = {0};
    unsigned      users = 0;
    int           rc = 0;
    pthread_mutex_lock(&tls->lock);
    tls_profile_t *tp = find_LH(tls, name);
    if (!tp) {
        rc = -ENOENT;
    } else if (tp->users) {
        users = tp->users;
        rc = -EBUSY;
    } else {
        gone = *tp;
        size_t i = (size_t)(tp - tls->profiles);
        memmove(tp, tp + 1, (tls->n - i - 1) * sizeof(*tp));
        tls->n--;
    }
    pthread_mutex_unlock(&tls->lock);
    if (rc == -ENOENT)
        snprintf(err, errlen, "sslProfile '%s': no sslProfile of that name", name);
    else if (rc == -EBUSY)
        snprintf(err, errlen, "sslProfile '%s' is in use by %u listener%s: delete %s first", name,
                 users, users == 1 ? "" : "s", users == 1 ? "it" : "them");
    SSL_CTX_free(gone.ctx); /* sessions made from it keep their own references */
    cfg_ssl_profile_fini(&gone.attrs);
    return rc;
}

int rtr_tls_profile_hold(rtr_tls_t *tls, const char *name)
{
    pthread_mutex_lock(&tls->lock);
    tls_profile_t *tp = find_LH(tls, name);
    if (tp)
        tp->users++;
    pthread_mutex_unlock(&tls->lock);
    return tp ? 0 : -ENOENT;
}

void rtr_tls_profile_release(rtr_tls_t *tls, const char *name)
{
    pthread_mutex_lock(&tls->lock);
    tls_profile_t *tp = find_LH(tls, name);
    if (tp && tp->users)
        tp->users--;
    pthread_mutex_unlock(&tls->lock);
}

cfg_ssl_profile_t *rtr_tls_profiles_copy(rtr_tls_t *tls, size_t *n)
{
    pthread_mutex_lock(&tls->lock);
    cfg_ssl_profile_t *v = base_calloc(tls->n + 1, sizeof(*v));
    for (size_t i = 0; i < tls->n; i++)
        cfg_ssl_profile_copy(&v[i], &tls->profiles[i].attrs);
    *n = tls->n;
    pthread_mutex_unlock(&tls->lock);
    return v;
}

void rtr_tls_profiles_free(cfg_ssl_profile_t *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        cfg_ssl_profile_fini(&v[i]);
    free(v);
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

/* ---- management's view (mgmt_tls_t) ---- */

static int mg_add(void *ctx, const cfg_ssl_profile_t *p, char *err, size_t errlen)
{
    return rtr_tls_profile_add(ctx, p, err, errlen);
}

static int mg_update(void *ctx, const cfg_ssl_profile_t *p, char *err, size_t errlen)
{
    return rtr_tls_profile_update(ctx, p, err, errlen);
}

static int mg_del(void *ctx, const char *name, char *err, size_t errlen)
{
    return rtr_tls_profile_del(ctx, name, err, errlen);
}

static int mg_hold(void *ctx, const char *name)
{
    return rtr_tls_profile_hold(ctx, name);
}

static void mg_release(void *ctx, const char *name)
{
    rtr_tls_profile_release(ctx, name);
}

static cfg_ssl_profile_t *mg_copy(void *ctx, size_t *n)
{
    return rtr_tls_profiles_copy(ctx, n);
}

void rtr_tls_mgmt(rtr_tls_t *tls, struct mgmt_tls *out)
{
    *out = (mgmt_tls_t){.ctx = tls,
                        .add = mg_add,
                        .update = mg_update,
                        .del = mg_del,
                        .hold = mg_hold,
                        .release = mg_release,
                        .copy = mg_copy,
                        .copy_free = rtr_tls_profiles_free};
}
