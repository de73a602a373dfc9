/* tests/fuzz/fuzz_tls.c: libFuzzer target for the TLS layer (router/tls.c) and the
 * transport's TLS path (router/transport.c) - the fuzzer's bytes as a client's ciphertext,
 * or as the plaintext a real TLS client sends once its handshake is done.
 *
 * The key and the self-signed certificate of the test's sslProfile are made with OpenSSL's
 * API in the first input's set-up and written to a directory of the process's own, removed
 * at exit: no key is ever committed.  The first byte of an input picks what the rest is:
 *
 *   bits 0-1  mode
 *     0  raw:     ciphertext written into a server session of tls.c (rtr_tls_conn_new_WT),
 *                 cut at the TLS record boundaries it claims, the session's plaintext and
 *                 records taken after each piece, as transport.c does.  No client holds a
 *                 key, so the handshake must never finish and no plaintext may come out.
 *     1  echo:    an in-memory OpenSSL client does a real handshake with a server session,
 *                 then sends the rest as plaintext in pieces (sizes from the second byte);
 *                 the server must read exactly those bytes (into buffers of varying size),
 *                 write them back, and the client must read them; then close_notify both
 *                 ways.
 *     2  tamper:  after a real handshake the client encrypts a fixed text; the rest of the
 *                 input is edits (3 bytes each: 16-bit offset, XOR mask) applied to those
 *                 records; the server may only ever return a prefix of the fixed text.
 *     3  conn:    through the transport of a real router started in this process (core
 *                 thread and one worker, as fuzz_conn.c does) over a socketpair: bit 4 set,
 *                 a real client handshake first and the rest as the AMQP byte stream over
 *                 TLS; clear, the rest as raw ciphertext.  The router must close the
 *                 connection after the client's EOF.
 *   bit 2     the client offers TLSv1.2 only (else TLSv1.3)
 *   bit 3     mode 3: the listener without requireSsl (TLS or plain by the first byte)
 *
 * OpenSSL is the system's library and carries no coverage instrumentation: the fuzzer sees
 * the paths of tls.c and transport.c, and OpenSSL's own parser runs on what it is given.
 * A violated expectation aborts; a crash, a sanitizer report or a connection the router
 * keeps open is a finding.  At exit the router is shut down as on SIGTERM.
 *
 * Seeds: tests/fuzz/tls/corpus (tests/fuzz/tls/gen_corpus.py: real ClientHellos of TLS 1.2
 * and 1.3, truncated records, garbage, AMQP sessions as plaintext).  Threads: libFuzzer's
 * thread runs the sessions of modes 0-2 (their _WT functions belong to whoever holds the
 * session); the router runs its own.
 */
#include "config/config.h"
#include "core/base/base.h"
#include "core/base/log.h"
#include "router/server.h"
#include "router/tls.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { MODE_RAW = 0, MODE_ECHO, MODE_TAMPER, MODE_CONN };

#define FLAG_TLS12    0x04
#define FLAG_DETECT   0x08
#define FLAG_HANDSHAK 0x10

/* Listener 0 requires TLS, listener 1 detects it; both use profile "fuzz".  Limits low, as
 * in fuzz_conn.c, so the AMQP stream can reach them. */
static const char CONFIG[] =
    "[[\"router\", {\"id\": \"Fuzz.T\", \"workerThreads\": 1, \"shutdownGraceSeconds\": 0}],"
    " [\"sslProfile\", {\"name\": \"fuzz\", \"certFile\": \"%s/cert.pem\","
    "   \"privateKeyFile\": \"%s/key.pem\"}],"
    " [\"listener\", {\"host\": \"127.0.0.1\", \"port\": \"0\", \"sslProfile\": \"fuzz\","
    "   \"requireSsl\": true, \"maxSessions\": 4, \"maxSenders\": 4, \"maxReceivers\": 4,"
    "   \"linkCapacity\": 8, \"maxMessageSize\": 50000, \"idleTimeoutSeconds\": 0}],"
    " [\"listener\", {\"host\": \"127.0.0.1\", \"port\": \"0\", \"sslProfile\": \"fuzz\","
    "   \"maxSessions\": 4, \"linkCapacity\": 8, \"idleTimeoutSeconds\": 0}],"
    " [\"address\", {\"prefix\": \"multicast\", \"distribution\": \"multicast\"}]]";

static cfg_t        *cfg;
static rtr_server_t *srv;
static rtr_tls_t    *tls;   /* the sessions of modes 0-2 (the router has its own) */
static SSL_CTX      *cli12; /* clients: TLSv1.2 only, and TLSv1.3 */
static SSL_CTX      *cli13;
static char          dir[64]; /* the key and certificate, made at set-up */
static char          key_path[128];
static char          cert_path[128];

static void teardown(void)
{
    if (srv) {
        rtr_server_stop(srv);
        rtr_server_run(srv);
        rtr_server_free(srv);
        srv = NULL;
    }
    rtr_tls_free(tls);
    tls = NULL;
    SSL_CTX_free(cli12);
    SSL_CTX_free(cli13);
    cli12 = cli13 = NULL;
    cfg_free(cfg);
    cfg = NULL;
    unlink(key_path);
    unlink(cert_path);
    rmdir(dir);
}

static void die(const char *what)
{
    fprintf(stderr, "fuzz_tls: %s\n", what);
    ERR_print_errors_fp(stderr);
    abort();
}

/* A P-256 key and a self-signed certificate for 127.0.0.1 (its subjectAltName, which the
 * clients check), valid for a day; the key file is the process's own, in mkdtemp's
 * directory (mode 0700). */
static X509 *make_cert(void)
{
    EVP_PKEY *k = EVP_EC_gen("P-256");
    X509     *x = X509_new();
    if (!k || !x)
        die("cannot make a key");
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, k);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"127.0.0.1", -1, -1,
                               0);
    X509_set_issuer_name(x, n);
    X509V3_CTX v3;
    X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
    X509_EXTENSION *san = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, "IP:127.0.0.1");
    if (!san || !X509_add_ext(x, san, -1))
        die("cannot name 127.0.0.1 in the certificate");
    X509_EXTENSION_free(san);
    if (!X509_sign(x, k, EVP_sha256()))
        die("cannot sign the certificate");
    FILE *f = fopen(key_path, "w");
    if (!f || !PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL) || fclose(f) != 0)
        die("cannot write the key");
    f = fopen(cert_path, "w");
    if (!f || !PEM_write_X509(f, x) || fclose(f) != 0)
        die("cannot write the certificate");
    EVP_PKEY_free(k);
    return x;
}

static SSL_CTX *client_ctx(X509 *ca, int version)
{
    SSL_CTX *c = SSL_CTX_new(TLS_client_method());
    if (!c || !SSL_CTX_set_min_proto_version(c, version) ||
        !SSL_CTX_set_max_proto_version(c, version) ||
        !X509_STORE_add_cert(SSL_CTX_get_cert_store(c), ca))
        die("cannot make the client context");
    SSL_CTX_set_verify(c, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
    return c;
}

static void setup(void)
{
    char err[512];
    signal(SIGPIPE, SIG_IGN);
    base_thread_set_role(BASE_THREAD_MAIN, 0);
    uint8_t mask = 0;
    if (base_log_parse_enable(
            getenv("JUNCTION_FUZZ_LOG") ? getenv("JUNCTION_FUZZ_LOG") : "critical+", &mask) != 0)
        abort();
    base_log_set_mask(BASE_LOG_MOD_DEFAULT, mask);
    base_log_finish_config();
    snprintf(dir, sizeof(dir), "/tmp/fuzz_tls.XXXXXX");
    if (!mkdtemp(dir))
        die("mkdtemp");
    snprintf(key_path, sizeof(key_path), "%s/key.pem", dir);
    snprintf(cert_path, sizeof(cert_path), "%s/cert.pem", dir);
    /* OpenSSL's own exit handler (which drops the threads' state keys) must run after
     * teardown() has joined the router's worker, or the worker's OpenSSL state leaks: handlers
     * run in reverse order, so OpenSSL registers first. */
    OPENSSL_init_ssl(0, NULL);
    atexit(teardown);
    X509 *ca = make_cert();
    cli12 = client_ctx(ca, TLS1_2_VERSION);
    cli13 = client_ctx(ca, TLS1_3_VERSION);
    X509_free(ca);
    char text[sizeof(CONFIG) + 2 * sizeof(dir)];
    snprintf(text, sizeof(text), CONFIG, dir, dir);
    if (cfg_load_string(text, "fuzz_tls.json", &cfg, err, sizeof(err)) != 0)
        die(err);
    tls = rtr_tls_new(cfg, err, sizeof(err));
    if (!tls)
        die(err);
    srv = rtr_server_new(cfg, err, sizeof(err));
    if (!srv || rtr_server_start(srv) != 0)
        die(srv ? "cannot start the router" : err);
}

/* ---- modes 0-2: a server session of tls.c, driven as transport.c drives it ---- */

/* What a server session produced: its plaintext, and whether it failed or saw the end. */
typedef struct {
    uint8_t *plain; /* every plaintext byte read */
    size_t   n;
    size_t   cap;
    bool     failed; /* rtr_tls_read_WT() said -2 */
    bool     closed; /* ... -1 (close_notify) */
} srv_out_t;

/* Read the session's plaintext in chunks of at most `chunk` bytes (1 .. 16 KiB, as the input
 * decides, so partial reads happen) until it wants more ciphertext or fails. */
static void srv_read(rtr_tls_conn_t *t, srv_out_t *o, size_t chunk)
{
    static uint8_t buf[16384];
    if (chunk == 0 || chunk > sizeof(buf))
        chunk = sizeof(buf);
    while (!o->failed && !o->closed) {
        const char *why = NULL;
        long        k = rtr_tls_read_WT(t, buf, chunk, &why);
        if (k == 0)
            return;
        if (k == -1) {
            o->closed = true;
        } else if (k < 0) {
            if (!why)
                die("rtr_tls_read_WT failed without a reason");
            o->failed = true;
        } else {
            if ((size_t)k > chunk)
                die("rtr_tls_read_WT returned more than asked");
            if (o->n + (size_t)k > o->cap) {
                o->cap = (o->n + (size_t)k) * 2;
                o->plain = base_realloc(o->plain, o->cap);
            }
            memcpy(o->plain + o->n, buf, (size_t)k);
            o->n += (size_t)k;
        }
    }
}

/* Move every record the server has for the socket into `to` (a client's input BIO), or drop
 * them (to == NULL). */
static void srv_flush(rtr_tls_conn_t *t, BIO *to)
{
    static uint8_t buf[16384];
    size_t         k, pend = rtr_tls_cipher_out_WT(t);
    while ((k = rtr_tls_take_cipher_WT(t, buf, sizeof(buf))) > 0) {
        if (k > pend)
            die("more records taken than were pending");
        pend -= k;
        if (to && BIO_write(to, buf, (int)k) != (int)k)
            die("BIO_write");
    }
    if (rtr_tls_cipher_out_WT(t) != 0)
        die("records left after taking them all");
}

/* Where a TLS record stream of n bytes claims its records end (at most max breaks): each
 * record is a 5-byte header whose last two bytes are the length. */
static size_t record_breaks(const uint8_t *d, size_t n, size_t *at, size_t max)
{
    size_t k = 0, pos = 0;
    while (k < max && pos + 5 <= n) {
        size_t len = (size_t)d[pos + 3] << 8 | d[pos + 4];
        if (len > n - pos - 5)
            break;
        pos += 5 + len;
        at[k++] = pos;
    }
    return k;
}

static void mode_raw(const uint8_t *d, size_t n)
{
    rtr_tls_conn_t *t = rtr_tls_conn_new_WT(tls, "fuzz");
    srv_out_t       o = {0};
    size_t          at[33];
    size_t          k = record_breaks(d, n, at, 32), from = 0;
    if (!t)
        die("no session");
    if (k == 0 || at[k - 1] < n)
        at[k++] = n;
    for (size_t i = 0; i < k && !o.failed && !o.closed; i++) {
        rtr_tls_put_cipher_WT(t, d + from, at[i] - from);
        from = at[i];
        srv_read(t, &o, 0);
        srv_flush(t, NULL);
    }
    /* nobody holds the keys a finished handshake needs */
    if (rtr_tls_ready_WT(t) || o.n > 0)
        die("a handshake finished, or plaintext came out, from bytes with no key behind them");
    rtr_tls_shutdown_WT(t);
    srv_flush(t, NULL);
    rtr_tls_conn_free_WT(t);
    free(o.plain);
}

/* An in-memory client of the version the flags ask for. */
typedef struct {
    SSL *ssl;
    BIO *in;  /* server -> client */
    BIO *out; /* client -> server */
} cli_t;

static void cli_new(cli_t *c, uint8_t flags)
{
    c->ssl = SSL_new(flags & FLAG_TLS12 ? cli12 : cli13);
    c->in = BIO_new(BIO_s_mem());
    c->out = BIO_new(BIO_s_mem());
    if (!c->ssl || !c->in || !c->out)
        die("cannot make a client");
    BIO_set_mem_eof_return(c->in, -1);
    SSL_set_bio(c->ssl, c->in, c->out);
    SSL_set_connect_state(c->ssl);
    SSL_set1_host(c->ssl, "127.0.0.1");
}

/* Move the client's records into the server session. */
static void cli_flush(cli_t *c, rtr_tls_conn_t *t)
{
    static uint8_t buf[16384];
    int            k;
    while ((k = BIO_read(c->out, buf, sizeof(buf))) > 0)
        rtr_tls_put_cipher_WT(t, buf, (size_t)k);
}

/* A real handshake between c and t; dies if it does not finish in a few round trips. */
static void handshake(cli_t *c, rtr_tls_conn_t *t, srv_out_t *o)
{
    for (int i = 0; i < 8; i++) {
        int r = SSL_do_handshake(c->ssl);
        if (r <= 0 && SSL_get_error(c->ssl, r) != SSL_ERROR_WANT_READ)
            die(X509_verify_cert_error_string(SSL_get_verify_result(c->ssl)));
        cli_flush(c, t);
        srv_read(t, o, 0);
        srv_flush(t, c->in);
        if (r == 1 && rtr_tls_ready_WT(t))
            break;
    }
    if (!SSL_is_init_finished(c->ssl) || !rtr_tls_ready_WT(t) || o->failed || o->n)
        die("a real handshake did not finish");
    if (!rtr_tls_cipher_WT(t) || rtr_tls_ssf_WT(t) < 128)
        die("the session names no cipher of 128 bits or more");
}

static void mode_echo(uint8_t flags, const uint8_t *d, size_t n)
{
    rtr_tls_conn_t *t = rtr_tls_conn_new_WT(tls, "fuzz");
    srv_out_t       o = {0};
    cli_t           c;
    if (!t)
        die("no session");
    cli_new(&c, flags);
    handshake(&c, t, &o);
    /* the pieces the client writes, and the server's read size, from the second byte */
    size_t piece = n ? 1 + (size_t)(d[0] & 0x0f) * 1100 : 1;
    size_t chunk = n ? 1 + (size_t)(d[0] >> 4) * 1000 : 1;
    if (n) {
        d++;
        n--;
    }
    for (size_t off = 0; off < n;) {
        size_t k = n - off < piece ? n - off : piece;
        if (SSL_write(c.ssl, d + off, (int)k) != (int)k)
            die("the client could not write");
        off += k;
        cli_flush(&c, t);
        srv_read(t, &o, chunk);
        srv_flush(t, c.in); /* TLS 1.3 session tickets, key updates */
    }
    if (o.failed || o.closed || o.n != n || (n && memcmp(o.plain, d, n) != 0))
        die("the server did not read exactly what the client wrote");
    /* and back: the server encrypts what it read, the client must read the same */
    for (size_t off = 0; off < n;) {
        long k = rtr_tls_write_WT(t, d + off, n - off);
        if (k <= 0 || (size_t)k > n - off)
            die("rtr_tls_write_WT failed on an established session");
        off += (size_t)k;
    }
    srv_flush(t, c.in);
    uint8_t *back = base_malloc(n + 1);
    size_t   got = 0;
    for (;;) {
        int k = SSL_read(c.ssl, back + got, (int)(n + 1 - got));
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    if (got != n || (n && memcmp(back, d, n) != 0))
        die("the client did not read what the server wrote");
    free(back);
    /* close_notify: the server's reaches the client, the client's ends the server's reads */
    rtr_tls_shutdown_WT(t);
    srv_flush(t, c.in);
    char b;
    int  r = SSL_read(c.ssl, &b, 1);
    if (r > 0 || SSL_get_error(c.ssl, r) != SSL_ERROR_ZERO_RETURN)
        die("the client saw no close_notify");
    SSL_shutdown(c.ssl);
    cli_flush(&c, t);
    srv_read(t, &o, 0);
    if (!o.closed)
        die("the server did not see the client's close_notify");
    SSL_free(c.ssl);
    rtr_tls_conn_free_WT(t);
    free(o.plain);
    ERR_clear_error();
}

static void mode_tamper(uint8_t flags, const uint8_t *d, size_t n)
{
    static uint8_t text[3000];
    static uint8_t rec[8192];
    if (!text[0])
        for (size_t i = 0; i < sizeof(text); i++)
            text[i] = (uint8_t)('a' + i % 26);
    rtr_tls_conn_t *t = rtr_tls_conn_new_WT(tls, "fuzz");
    srv_out_t       o = {0};
    cli_t           c;
    if (!t)
        die("no session");
    cli_new(&c, flags);
    handshake(&c, t, &o);
    /* three records of 1000 bytes, encrypted, then edited as the input says */
    for (int i = 0; i < 3; i++)
        if (SSL_write(c.ssl, text + i * 1000, 1000) != 1000)
            die("the client could not write");
    int len = BIO_read(c.out, rec, sizeof(rec));
    if (len <= 0 || BIO_ctrl_pending(c.out) != 0)
        die("the records do not fit");
    bool changed = false;
    for (size_t i = 0; i + 3 <= n; i += 3) {
        size_t at = ((size_t)d[i] << 8 | d[i + 1]) % (size_t)len;
        changed |= d[i + 2] != 0;
        rec[at] ^= d[i + 2];
    }
    /* a trailing byte or two cut the stream short there */
    size_t cut = (size_t)len;
    if (n % 3)
        cut = (size_t)d[n - 1] * (size_t)len / 256;
    rtr_tls_put_cipher_WT(t, rec, cut);
    srv_read(t, &o, 0);
    srv_flush(t, NULL);
    if (o.n > sizeof(text) || (o.n && memcmp(o.plain, text, o.n) != 0))
        die("the server returned plaintext the client did not send");
    if (!changed && cut == (size_t)len && (o.n != sizeof(text) || o.failed))
        die("untouched records were not read whole");
    SSL_free(c.ssl);
    rtr_tls_conn_free_WT(t);
    free(o.plain);
    ERR_clear_error();
}

/* ---- mode 3: through the transport of the in-process router ---- */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Write everything pending (the client's BIO `out`, or the raw bytes), reading the router's
 * output meanwhile into `in` (or dropping it), then read until the router has been quiet for
 * wait_ms.  Returns 1 when the router closed the connection. */
static int sock_step(int fd, BIO *out, const uint8_t *raw, size_t rawlen, BIO *in, int wait_ms)
{
    static uint8_t buf[65536];
    uint64_t       end = now_ms() + 30000;
    for (;;) {
        size_t pend = out ? (size_t)BIO_ctrl_pending(out) : rawlen;
        if (now_ms() > end)
            die("the router neither read nor closed for 30 s");
        struct pollfd p = {.fd = fd, .events = POLLIN | (pend ? POLLOUT : 0)};
        int           r = poll(&p, 1, pend ? 1000 : wait_ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0) {
            if (!pend)
                return 0; /* quiet */
            continue;
        }
        if (p.revents & POLLIN) {
            ssize_t k = read(fd, buf, sizeof(buf));
            if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
                return 1;
            if (k > 0 && in)
                BIO_write(in, buf, (int)k);
        } else if (p.revents & (POLLERR | POLLHUP)) {
            return 1;
        }
        if (pend && (p.revents & POLLOUT)) {
            ssize_t w;
            if (out) {
                char *q;
                long  have = BIO_get_mem_data(out, &q);
                w = write(fd, q, (size_t)have);
                if (w > 0)
                    BIO_read(out, buf, (int)w); /* consume what went */
            } else {
                w = write(fd, raw, rawlen);
                if (w > 0) {
                    raw += w;
                    rawlen -= (size_t)w;
                }
            }
            if (w < 0 && (errno == EPIPE || errno == ECONNRESET))
                return 1;
        }
    }
}

/* Where an AMQP byte stream's protocol headers and frames end (at most max breaks). */
static size_t amqp_breaks(const uint8_t *d, size_t n, size_t *at, size_t max)
{
    size_t k = 0, pos = 0;
    while (k < max && pos + 8 <= n) {
        if (memcmp(d + pos, "AMQP", 4) == 0) {
            pos += 8;
        } else {
            uint32_t fs = (uint32_t)d[pos] << 24 | (uint32_t)d[pos + 1] << 16 |
                          (uint32_t)d[pos + 2] << 8 | d[pos + 3];
            if (fs < 8 || fs > n - pos)
                break;
            pos += fs;
        }
        at[k++] = pos;
    }
    return k;
}

#define BREAKS_MAX 12

static void mode_conn(uint8_t flags, const uint8_t *d, size_t n)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    /* the worker owns sv[1] from here */
    rtr_worker_post_ext(&rtr_server_ctx(srv)->workers[0], RTR_EXT_ACCEPT,
                        (void *)&cfg->listeners[flags & FLAG_DETECT ? 1 : 0], sv[1]);
    int    closed = 0;
    size_t at[BREAKS_MAX + 1], k, from = 0;
    if (flags & FLAG_HANDSHAK) {
        cli_t c;
        cli_new(&c, flags);
        uint64_t end = now_ms() + 5000;
        while (!SSL_is_init_finished(c.ssl)) {
            int r = SSL_do_handshake(c.ssl);
            if (r <= 0 && SSL_get_error(c.ssl, r) != SSL_ERROR_WANT_READ)
                die("the client's handshake with the router failed");
            if (sock_step(sv[0], c.out, NULL, 0, c.in, 1))
                die("the router closed a connection during a good handshake");
            if (now_ms() > end)
                die("no handshake with the router in 5 s");
        }
        k = amqp_breaks(d, n, at, BREAKS_MAX);
        if (k == 0 || at[k - 1] < n)
            at[k++] = n;
        for (size_t i = 0; i < k && !closed; i++) {
            if (at[i] > from && SSL_write(c.ssl, d + from, (int)(at[i] - from)) <= 0)
                die("the client could not write");
            from = at[i];
            closed = sock_step(sv[0], c.out, NULL, 0, c.in, 1);
            /* read (and drop) what the router said, so its tickets and alerts are parsed */
            char sink[4096];
            while (SSL_read(c.ssl, sink, sizeof(sink)) > 0)
                ;
        }
        if (!closed) {
            SSL_shutdown(c.ssl);
            closed = sock_step(sv[0], c.out, NULL, 0, NULL, 1);
        }
        SSL_free(c.ssl);
        ERR_clear_error();
    } else {
        k = record_breaks(d, n, at, BREAKS_MAX);
        if (k == 0 || at[k - 1] < n)
            at[k++] = n;
        for (size_t i = 0; i < k && !closed; i++) {
            closed = sock_step(sv[0], NULL, d + from, at[i] - from, NULL, 1);
            from = at[i];
        }
    }
    if (!closed) {
        shutdown(sv[0], SHUT_WR);
        uint64_t end = now_ms() + 30000;
        while (!closed) {
            closed = sock_step(sv[0], NULL, NULL, 0, NULL, 1000);
            if (!closed && now_ms() > end)
                die("the router kept the connection open 30 s after the client's EOF");
        }
    }
    close(sv[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!srv)
        setup();
    if (size == 0)
        return 0;
    uint8_t flags = data[0];
    switch (flags & 3) {
    case MODE_RAW:
        mode_raw(data + 1, size - 1);
        break;
    case MODE_ECHO:
        mode_echo(flags, data + 1, size - 1);
        break;
    case MODE_TAMPER:
        mode_tamper(flags, data + 1, size - 1);
        break;
    default:
        mode_conn(flags, data + 1, size - 1);
        break;
    }
    ERR_clear_error();
    return 0;
}
