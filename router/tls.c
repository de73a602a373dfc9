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
#include "router/tls_uid.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* One profile as built: immutable once made, shared by the set and by every session made from
 * it, freed with the last of them (an UPDATE puts a new one in the set's slot). */
typedef struct tls_profile {
    const char       *name;        /* attrs.name */
    SSL_CTX          *ctx;         /* the server context */
    rtr_tls_uid_t    *uid;         /* how a client certificate names its user (tls_uid.h) */
    SSL_CTX          *client;      /* for the authServicePlugins and connectors that name the
                                      profile, else NULL */
    bool              client_name; /* without a caCertFile: a server's name is checked too */
    cfg_ssl_profile_t attrs;       /* a copy of the attributes it was built from */
    atomic_uint       refs;        /* the set's (while in a slot) and one per session */
} tls_profile_t;

/* A name in the set: its current profile and the listeners that name it. */
typedef struct tls_slot {
    tls_profile_t *cur;   /* [lock] the profile new sessions are made from */
    unsigned       users; /* [lock] listeners that name it (DELETE is refused while > 0) */
    unsigned       connectors; /* [lock] connectors that name it (likewise) */
    unsigned long  gen;   /* [lock] UPDATEs so far (rtr_tls_profile_gen) */
} tls_slot_t;

/* rtr_tls_watch's callback. */
typedef void watch_fn_t(void *arg);

struct rtr_tls {
    pthread_mutex_t lock; /* guards the slots; held only to look up, swap or copy (and take
                             a reference), never while a file is read or a context built */
    tls_slot_t *slots;    /* [lock] */
    size_t      n;        /* [lock] */
    watch_fn_t *watch;    /* [lock] called after each UPDATE (rtr_tls_watch), or NULL */
    void       *warg;     /* [lock] its argument */
};

struct rtr_tls_conn {
    SSL *ssl;
    BIO *in;   /* socket -> TLS */
    BIO *out;  /* TLS -> socket */
    bool shut; /* close_notify queued */

    tls_profile_t *prof; /* a server session's profile (a reference of its own), else NULL */
};

/* OpenSSL's last error as text (its reason, e.g. "key values mismatch"). */
static const char *ssl_why(void)
{
    unsigned long e = ERR_peek_last_error();
    const char   *r = e ? ERR_reason_error_string(e) : NULL;
    ERR_clear_error();
    return r ? r : "unknown error";
}

/* A file attribute that must be readable: its errno's text, as the line says it. */
static int check_file(const cfg_ssl_profile_t *p, const char *attr, const char *path, char *err,
                      size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return rtr_tls_profile_fail(p, NULL, NULL, err, errlen, "%s %s: %s", attr, path,
                                    strerror(errno));
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
            return rtr_tls_profile_fail(
                p, NULL, NULL, err, errlen,
                "protocols: unknown protocol '%s' (TLSv1, TLSv1.1, TLSv1.2 or "
                "TLSv1.3)",
                tok);
        }
        lo = lo && lo < v ? lo : v;
        hi = hi > v ? hi : v;
        s += n;
    }
    if (!lo)
        return rtr_tls_profile_fail(p, NULL, NULL, err, errlen, "protocols: no protocol given");
    if (!SSL_CTX_set_min_proto_version(ctx, lo) || !SSL_CTX_set_max_proto_version(ctx, hi))
        return rtr_tls_profile_fail(p, NULL, NULL, err, errlen, "protocols '%s': %s", p->protocols,
                                    ssl_why());
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

/* A context for profile p, built and checked: at start-up for every profile, and by
 * management's CREATE and UPDATE on the agent or admin thread (it touches nothing shared: the
 * password's environment variable is only read, and OpenSSL's error queue is per thread). */
static int profile_ctx_of(const cfg_ssl_profile_t *p, const SSL_METHOD *method, SSL_CTX **out,
                          char *err, size_t errlen)
{
    SSL_CTX *ctx = SSL_CTX_new(method);
    char    *pw = NULL;
    int      rc = -1;
    if (!ctx)
        return rtr_tls_profile_fail(p, NULL, NULL, err, errlen, "cannot make a TLS context: %s",
                                    ssl_why());
    SSL_CTX_set_min_proto_version(ctx, TLS1_VERSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS); /* an idle connection holds no buffers */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_default_passwd_cb(ctx, password_cb);
    if (p->password) {
        bool plain = false;
        char why[512];
        if (cfg_password_resolve(p->password, true, &pw, &plain, why, sizeof(why)) != 0) {
            rtr_tls_profile_fail(p, NULL, NULL, err, errlen, "password: %s", why);
            goto out;
        }
        SSL_CTX_set_default_passwd_cb_userdata(ctx, pw);
    }
    if (p->cert_file) {
        if (check_file(p, "certFile", p->cert_file, err, errlen) < 0)
            goto out;
        if (SSL_CTX_use_certificate_chain_file(ctx, p->cert_file) != 1) {
            rtr_tls_profile_fail(p, NULL, NULL, err, errlen,
                                 "certFile %s: not a PEM certificate (%s)", p->cert_file,
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
                rtr_tls_profile_fail(p, NULL, NULL, err, errlen,
                                     "%s %s: the key does not match certFile %s", attr, key,
                                     p->cert_file);
            else
                rtr_tls_profile_fail(p, NULL, NULL, err, errlen,
                                     "%s %s: cannot read the private key (%s%s)", attr, key, why,
                                     p->password ? "; wrong password?"
                                                 : "; encrypted without a password?");
            goto out;
        }
        if (SSL_CTX_check_private_key(ctx) != 1) {
            ERR_clear_error();
            rtr_tls_profile_fail(p, NULL, NULL, err, errlen,
                                 "%s %s: the key does not match certFile %s", attr, key,
                                 p->cert_file);
            goto out;
        }
    }
    if (p->ca_cert_file) {
        if (check_file(p, "caCertFile", p->ca_cert_file, err, errlen) < 0)
            goto out;
        if (SSL_CTX_load_verify_locations(ctx, p->ca_cert_file, NULL) != 1) {
            rtr_tls_profile_fail(p, NULL, NULL, err, errlen,
                                 "caCertFile %s: not PEM certificates (%s)", p->ca_cert_file,
                                 ssl_why());
            goto out;
        }
    }
    if (p->ciphers && SSL_CTX_set_cipher_list(ctx, p->ciphers) != 1) {
        rtr_tls_profile_fail(p, NULL, NULL, err, errlen,
                             "ciphers '%.200s': no cipher OpenSSL knows (%s)", p->ciphers,
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

/* What a profile needs for client certificates: the names of its CAs, which a session that
 * asks for a certificate sends the client (OpenSSL sends none otherwise), and how a
 * certificate names its user (uidFormat, uidNameMappingFile: tls_uid.c). */
static int profile_peer_setup(const cfg_ssl_profile_t *p, tls_profile_t *tp, char *err,
                              size_t errlen)
{
    if (p->ca_cert_file) {
        STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(p->ca_cert_file);
        if (!names)
            return rtr_tls_profile_fail(p, NULL, NULL, err, errlen,
                                        "caCertFile %s: no CA certificate names (%s)",
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

static int client_ctx(const cfg_ssl_profile_t *p, tls_profile_t *tp, char *err, size_t errlen);

/* An authServicePlugin of cfg names profile p (it gets a client context). */
static bool client_wanted(const cfg_t *cfg, const cfg_ssl_profile_t *p)
{
    for (size_t i = 0; i < cfg->n_auth_plugins; i++)
        if (cfg->auth_plugins[i].ssl_profile &&
            strcmp(cfg->auth_plugins[i].ssl_profile, p->name) == 0)
            return true;
    /* a connector's too (router/connector.h: the router's own TLS connections) */
    for (size_t i = 0; i < cfg->n_connectors; i++)
        if (cfg->connectors[i].conn.ssl_profile &&
            strcmp(cfg->connectors[i].conn.ssl_profile, p->name) == 0)
            return true;
    return false;
}

static void profile_unref(tls_profile_t *tp)
{
    if (!tp || atomic_fetch_sub_explicit(&tp->refs, 1, memory_order_acq_rel) != 1)
        return;
    SSL_CTX_free(tp->ctx);
    rtr_tls_uid_free(tp->uid);
    SSL_CTX_free(tp->client);
    cfg_ssl_profile_fini(&tp->attrs);
    free(tp);
}

/* Profile p built and checked (with a client context when `client`): a new profile with one
 * reference, or NULL with one line in err.  Any thread; touches nothing shared. */
static tls_profile_t *profile_build(const cfg_ssl_profile_t *p, bool client, char *err,
                                    size_t errlen)
{
    tls_profile_t *tp = base_calloc(1, sizeof(*tp));
    atomic_init(&tp->refs, 1);
    cfg_ssl_profile_copy(&tp->attrs, p);
    tp->name = tp->attrs.name;
    if (profile_ctx(p, &tp->ctx, err, errlen) < 0 || profile_peer_setup(p, tp, err, errlen) < 0 ||
        (client && client_ctx(p, tp, err, errlen) < 0)) {
        profile_unref(tp);
        return NULL;
    }
    return tp;
}

/* The slot of profile `name`, or NULL.  _LH: tls->lock. */
static tls_slot_t *find_LH(rtr_tls_t *tls, const char *name)
{
    for (size_t i = 0; name && i < tls->n; i++)
        if (strcmp(tls->slots[i].cur->name, name) == 0)
            return &tls->slots[i];
    return NULL;
}

/* The current profile of `name` with a reference of the caller's (profile_unref it), or
 * NULL.  Thread-safe: the lock is held for the look-up only. */
static tls_profile_t *profile_get(const rtr_tls_t *ctls, const char *name)
{
    rtr_tls_t *tls = (rtr_tls_t *)ctls; /* the lock is not part of the set's value */
    if (!tls)
        return NULL;
    pthread_mutex_lock(&tls->lock);
    tls_slot_t    *sl = find_LH(tls, name);
    tls_profile_t *tp = sl ? sl->cur : NULL;
    if (tp)
        atomic_fetch_add_explicit(&tp->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&tls->lock);
    return tp;
}

rtr_tls_t *rtr_tls_new(const cfg_t *cfg, char *err, size_t errlen)
{
    rtr_tls_t *tls = base_calloc(1, sizeof(*tls));
    pthread_mutex_init(&tls->lock, NULL);
    if (cfg->n_ssl_profiles)
        tls->slots = base_calloc(cfg->n_ssl_profiles, sizeof(*tls->slots));
    for (size_t i = 0; i < cfg->n_ssl_profiles; i++) {
        const cfg_ssl_profile_t *p = &cfg->ssl_profiles[i];
        tls_profile_t           *tp = profile_build(p, client_wanted(cfg, p), err, errlen);
        if (!tp) {
            rtr_tls_free(tls);
            return NULL;
        }
        tls->slots[i].cur = tp;
        /* the configured listeners hold their profiles (management DELETE is refused) */
        for (size_t k = 0; k < cfg->n_listeners; k++)
            if (cfg->listeners[k].ssl_profile &&
                strcmp(cfg->listeners[k].ssl_profile, p->name) == 0)
                tls->slots[i].users++;
        for (size_t k = 0; k < cfg->n_connectors; k++)
            if (cfg->connectors[k].conn.ssl_profile &&
                strcmp(cfg->connectors[k].conn.ssl_profile, p->name) == 0)
                tls->slots[i].connectors++;
        tls->n++;
    }
    return tls;
}

void rtr_tls_free(rtr_tls_t *tls)
{
    if (!tls)
        return;
    for (size_t i = 0; i < tls->n; i++)
        profile_unref(tls->slots[i].cur);
    free(tls->slots);
    pthread_mutex_destroy(&tls->lock);
    free(tls);
}

/* A session of ctx with its two memory BIOs; it keeps prof's reference (dropped here when it
 * cannot be made). */
static rtr_tls_conn_t *session_new(SSL_CTX *ctx, tls_profile_t *prof)
{
    rtr_tls_conn_t *t = base_calloc(1, sizeof(*t));
    t->prof = prof;
    t->ssl = SSL_new(ctx); /* with a reference of its own to the context */
    t->in = BIO_new(BIO_s_mem());
    t->out = BIO_new(BIO_s_mem());
    if (!t->ssl || !t->in || !t->out) {
        BIO_free(t->in);
        BIO_free(t->out);
        SSL_free(t->ssl);
        profile_unref(prof);
        free(t);
        ERR_clear_error();
        return NULL;
    }
    BIO_set_mem_eof_return(t->in, -1);  /* empty: "retry", not the end of the stream */
    SSL_set_bio(t->ssl, t->in, t->out); /* the session owns both */
    return t;
}

rtr_tls_conn_t *rtr_tls_conn_new_WT(const rtr_tls_t *tls, const char *profile)
{
    /* the current profile, with a reference of the session's own: a management UPDATE may
     * replace it in the set the moment the lock is let go */
    tls_profile_t *prof = profile_get(tls, profile);
    if (!prof)
        return NULL;
    rtr_tls_conn_t *t = session_new(prof->ctx, prof);
    if (t)
        SSL_set_accept_state(t->ssl);
    return t;
}

void rtr_tls_conn_free_WT(rtr_tls_conn_t *t)
{
    if (!t)
        return;
    SSL_free(t->ssl);
    profile_unref(t->prof);
    free(t);
    ERR_clear_error();
}

/* ---- run-time changes (management): thread-safe ---- */

int rtr_tls_profile_add(rtr_tls_t *tls, const cfg_ssl_profile_t *p, char *err, size_t errlen)
{
    /* the files are read outside the lock; a profile made at run time has no
     * authServicePlugin (they are configured at start-up), so no client context */
    tls_profile_t *tp = profile_build(p, false, err, errlen);
    if (!tp)
        return -EINVAL;
    int rc = 0;
    pthread_mutex_lock(&tls->lock);
    if (find_LH(tls, p->name)) {
        rc = -EEXIST;
    } else {
        tls->slots = base_realloc(tls->slots, (tls->n + 1) * sizeof(*tls->slots));
        tls->slots[tls->n++] = (tls_slot_t){.cur = tp};
        tp = NULL;
    }
    pthread_mutex_unlock(&tls->lock);
    if (rc == -EEXIST)
        rtr_tls_profile_fail(p, NULL, NULL, err, errlen,
                             "an sslProfile of that name exists already");
    profile_unref(tp);
    return rc;
}

int rtr_tls_profile_update(rtr_tls_t *tls, const cfg_ssl_profile_t *p, char *err, size_t errlen)
{
    /* built as the profile's was: with a client context when it had one (an
     * authServicePlugin names it) */
    tls_profile_t *old = profile_get(tls, p->name);
    if (!old) {
        rtr_tls_profile_fail(p, NULL, NULL, err, errlen, "no sslProfile of that name");
        return -ENOENT;
    }
    bool client = old->client != NULL;
    profile_unref(old);
    tls_profile_t *tp = profile_build(p, client, err, errlen);
    if (!tp) /* the old profile stays in force */
        return -EINVAL;
    pthread_mutex_lock(&tls->lock);
    tls_slot_t *sl = find_LH(tls, p->name);
    if (sl) {
        /* sessions made from the old profile hold references of their own: the connections
         * that have one go on untouched, new ones get the new profile */
        old = sl->cur;
        sl->cur = tp;
        tp = old;
        sl->gen++;
        if (tls->watch) /* under the lock: rtr_tls_watch(NULL) waits for it */
            tls->watch(tls->warg);
    }
    pthread_mutex_unlock(&tls->lock);
    profile_unref(tp); /* the old one, or the new one when the profile went meanwhile */
    if (!sl) {
        rtr_tls_profile_fail(p, NULL, NULL, err, errlen, "no sslProfile of that name");
        return -ENOENT;
    }
    return 0;
}

int rtr_tls_profile_del(rtr_tls_t *tls, const char *name, char *err, size_t errlen)
{
    tls_profile_t *gone = NULL;
    unsigned       users = 0, connectors = 0;
    int            rc = 0;
    pthread_mutex_lock(&tls->lock);
    tls_slot_t *sl = find_LH(tls, name);
    if (!sl) {
        rc = -ENOENT;
    } else if (sl->users || sl->connectors) {
        users = sl->users;
        connectors = sl->connectors;
        rc = -EBUSY;
    } else {
        gone = sl->cur;
        size_t i = (size_t)(sl - tls->slots);
        memmove(sl, sl + 1, (tls->n - i - 1) * sizeof(*sl));
        tls->n--;
    }
    pthread_mutex_unlock(&tls->lock);
    if (rc == -ENOENT)
        snprintf(err, errlen, "sslProfile '%s': no sslProfile of that name", name);
    else if (rc == -EBUSY && !connectors)
        snprintf(err, errlen, "sslProfile '%s' is in use by %u listener%s: delete %s first", name,
                 users, users == 1 ? "" : "s", users == 1 ? "it" : "them");
    else if (rc == -EBUSY)
        snprintf(err, errlen, "sslProfile '%s' is in use by %u listener%s and %u connector%s: "
                 "delete %s first", name, users, users == 1 ? "" : "s", connectors,
                 connectors == 1 ? "" : "s", users + connectors == 1 ? "it" : "them");
    profile_unref(gone); /* sessions made from it keep their own references */
    return rc;
}

int rtr_tls_profile_hold(rtr_tls_t *tls, const char *name)
{
    pthread_mutex_lock(&tls->lock);
    tls_slot_t *sl = find_LH(tls, name);
    if (sl)
        sl->users++;
    pthread_mutex_unlock(&tls->lock);
    return sl ? 0 : -ENOENT;
}

int rtr_tls_profile_hold_client(rtr_tls_t *tls, const char *name, char *err, size_t errlen)
{
    /* a profile made at run time, or one no connector named at start-up, has no client
     * context: one is built (outside the lock, files read again, as UPDATE does) and swapped
     * in with the same attributes; an UPDATE or DELETE that came meanwhile wins, and the
     * look-up starts again */
    for (;;) {
        tls_profile_t *cur = profile_get(tls, name);
        if (!cur) {
            snprintf(err, errlen, "sslProfile '%s': no sslProfile entity has that name", name);
            return -ENOENT;
        }
        tls_profile_t *tp = NULL;
        if (!cur->client && !(tp = profile_build(&cur->attrs, true, err, errlen))) {
            profile_unref(cur);
            return -EINVAL;
        }
        bool held = false;
        pthread_mutex_lock(&tls->lock);
        tls_slot_t *sl = find_LH(tls, name);
        if (sl && sl->cur == cur) {
            if (tp) { /* the set's reference moves to the new profile */
                sl->cur = tp;
                tp = cur;
            }
            sl->connectors++;
            held = true;
        }
        pthread_mutex_unlock(&tls->lock);
        profile_unref(tp);  /* the set's old one, or the new one that lost a race */
        profile_unref(cur); /* profile_get's */
        if (held)
            return 0;
    }
}

void rtr_tls_profile_release_client(rtr_tls_t *tls, const char *name)
{
    pthread_mutex_lock(&tls->lock);
    tls_slot_t *sl = find_LH(tls, name);
    if (sl && sl->connectors)
        sl->connectors--;
    pthread_mutex_unlock(&tls->lock);
}

void rtr_tls_profile_release(rtr_tls_t *tls, const char *name)
{
    pthread_mutex_lock(&tls->lock);
    tls_slot_t *sl = find_LH(tls, name);
    if (sl && sl->users)
        sl->users--;
    pthread_mutex_unlock(&tls->lock);
}

cfg_ssl_profile_t *rtr_tls_profiles_list(rtr_tls_t *tls, size_t *n)
{
    pthread_mutex_lock(&tls->lock);
    cfg_ssl_profile_t *v = base_calloc(tls->n + 1, sizeof(*v));
    for (size_t i = 0; i < tls->n; i++)
        cfg_ssl_profile_copy(&v[i], &tls->slots[i].cur->attrs);
    *n = tls->n;
    pthread_mutex_unlock(&tls->lock);
    return v;
}

unsigned long rtr_tls_profile_gen(const rtr_tls_t *ctls, const char *name)
{
    rtr_tls_t *tls = (rtr_tls_t *)ctls; /* the lock is not part of the set's value */
    pthread_mutex_lock(&tls->lock);
    tls_slot_t   *sl = find_LH(tls, name);
    unsigned long gen = sl ? sl->gen : 0;
    pthread_mutex_unlock(&tls->lock);
    return gen;
}

void rtr_tls_watch(rtr_tls_t *tls, void (*fn)(void *arg), void *arg)
{
    pthread_mutex_lock(&tls->lock);
    tls->watch = fn;
    tls->warg = arg;
    pthread_mutex_unlock(&tls->lock);
}

void rtr_tls_profiles_list_free(cfg_ssl_profile_t *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        cfg_ssl_profile_fini(&v[i]);
    free(v);
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

static int copy_ctx(SSL_CTX *src, const char *profile, SSL_CTX *dst, char *err, size_t errlen);

int rtr_tls_profile_copy(const rtr_tls_t *tls, const char *profile, SSL_CTX *dst, char *err,
                         size_t errlen)
{
    tls_profile_t *tp = profile_get(tls, profile); /* its current context, kept while read */
    if (!tp) {
        snprintf(err, errlen, "sslProfile '%s': no TLS context", profile);
        return -1;
    }
    int rc = copy_ctx(tp->ctx, profile, dst, err, errlen);
    profile_unref(tp);
    return rc;
}

static int copy_ctx(SSL_CTX *src, const char *profile, SSL_CTX *dst, char *err, size_t errlen)
{
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

/* A client context for profile p (when an authServicePlugin names it: client_wanted): the
 * profile's certificate and key (a client certificate for the service), ciphers and
 * protocols, and the server's certificate verified as Proton's client does - against the
 * system's CAs and the profile's caCertFile, its name checked only without a caCertFile
 * (rtr_tls_client_new_WT). */
static int client_ctx(const cfg_ssl_profile_t *p, tls_profile_t *tp, char *err, size_t errlen)
{
    SSL_CTX **out = &tp->client;
    if (profile_ctx_of(p, TLS_client_method(), out, err, errlen) < 0)
        return -1;
    if (SSL_CTX_set_default_verify_paths(*out) != 1)
        ERR_clear_error(); /* no system CAs: the profile's caCertFile alone */
    SSL_CTX_set_verify(*out, SSL_VERIFY_PEER, NULL);
    tp->client_name = !p->ca_cert_file;
    return 0;
}

/* A client session; check_name: -1 the profile's rule (authsvc), else whether the server's
 * certificate must name `host`. */
static rtr_tls_conn_t *client_new(const rtr_tls_t *tls, const char *profile, const char *host,
                                  int check);

rtr_tls_conn_t *rtr_tls_client_new_WT(const rtr_tls_t *tls, const char *profile, const char *host)
{
    return client_new(tls, profile, host, -1);
}

rtr_tls_conn_t *rtr_tls_connector_new_WT(const rtr_tls_t *tls, const char *profile,
                                         const char *host, bool verify_host)
{
    return client_new(tls, profile, host, verify_host);
}

static rtr_tls_conn_t *client_new(const rtr_tls_t *tls, const char *profile, const char *host,
                                  int check)
{
    tls_profile_t *prof = profile_get(tls, profile);
    SSL_CTX       *ctx = prof ? prof->client : NULL;
    bool           check_name = check < 0 ? prof && prof->client_name : check > 0;
    if (!ctx) {
        profile_unref(prof);
        return NULL;
    }
    rtr_tls_conn_t *t = session_new(ctx, prof);
    if (!t)
        return NULL;
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

static int mg_hold_client(void *ctx, const char *name, char *err, size_t errlen)
{
    return rtr_tls_profile_hold_client(ctx, name, err, errlen);
}

static void mg_release_client(void *ctx, const char *name)
{
    rtr_tls_profile_release_client(ctx, name);
}

static cfg_ssl_profile_t *mg_copy(void *ctx, size_t *n)
{
    return rtr_tls_profiles_list(ctx, n);
}

void rtr_tls_mgmt(rtr_tls_t *tls, struct mgmt_tls *out)
{
    *out = (mgmt_tls_t){.ctx = tls,
                        .add = mg_add,
                        .update = mg_update,
                        .del = mg_del,
                        .hold = mg_hold,
                        .release = mg_release,
                        .hold_client = mg_hold_client,
                        .release_client = mg_release_client,
                        .copy = mg_copy,
                        .copy_free = rtr_tls_profiles_list_free};
}
