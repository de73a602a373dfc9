/* tests/bench/scale/handshakes.c: junction-handshakes, the client of the connection set-up
 * rate in `scripts/bench tls`: as many whole AMQP connections per second as a router takes,
 * each one a new TCP connection, a full TLS handshake (optional), SASL and AMQP open/close.
 *
 *   junction-handshakes --url HOST:PORT [--tls-ca FILE] [--mech ANONYMOUS|PLAIN|none]
 *                       [--user U --password P] [--parallel P] [--seconds S]
 *
 * Each connection: connect(); with --tls-ca, a TLS handshake whose server certificate must
 * chain to FILE and name 127.0.0.1 (no session is ever resumed: every handshake is a full
 * one); then the SASL protocol header and a sasl-init for the mechanism (PLAIN with
 * "\0user\0password" as its initial response) in one write, without waiting for the
 * server's mechanisms (which Proton-C's own client waits for: one round trip less here);
 * once the server's sasl-outcome says ok, the AMQP protocol header and an open; once the
 * router's open came, a close; once its close came, a TLS close_notify, and close() once the
 * router has closed the socket (so that the client's ports are not held in TIME_WAIT).
 * --mech none skips the SASL layer.  P connections (default 8) are in progress at once; new
 * ones start for S seconds (default 5), then the ones in progress finish.  A connection that
 * fails is counted and not replaced.
 *
 * Prints one line of JSON on stdout: connections completed, failures, seconds (from the
 * first connect to the last completion), the rate, this process's CPU seconds (to tell
 * whether the client bounds the figure: a TLS handshake costs the client about what it
 * costs the server), the protocol and cipher of the first TLS session, and the mean
 * milliseconds a completed connection spent in each phase (connect, tls, sasl, open, close:
 * waiting for the router's answer; eof: for the router to close the socket).  Exit status: 0
 * when at least one connection completed and none failed, 1 otherwise, 2 on a usage error.
 *
 * A client of the benchmark, not part of the router.  One thread, one epoll loop; the few
 * frames it needs are written by hand, as junction-holdconns does, and OpenSSL does TLS.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum {
    ST_CONNECT = 0, /* connect() in progress */
    ST_TLS,         /* TLS handshake */
    ST_SASL,        /* sasl-init sent, waiting for the outcome */
    ST_OPEN,        /* open sent, waiting for the router's */
    ST_CLOSE,       /* close sent, waiting for the router's */
    ST_EOF,         /* closes exchanged (and our close_notify sent): waiting for the router
                     * to close the socket, so that it, not this client, holds TIME_WAIT */
};

/* One connection in progress. */
typedef struct hs {
    int     fd;
    int     state;
    SSL    *ssl;       /* NULL without --tls-ca */
    uint8_t in[16384]; /* bytes read, not yet parsed */
    size_t  inlen;
    uint8_t out[512]; /* bytes to write (retried as they are: SSL_write wants that) */
    size_t  outlen;
    double  at[ST_EOF + 2]; /* when each state began; [ST_EOF + 1]: the end */
} hs_t;

static struct {
    struct sockaddr_in addr;
    SSL_CTX           *tls;  /* --tls-ca */
    const char        *mech; /* NULL: no SASL */
    const char        *user;
    const char        *password;
    int                parallel;
    double             seconds;
    int                ep;
    long               done; /* completed connections */
    long               failed;
    char               first_error[256];
    char               proto[32]; /* the first TLS session's */
    char               cipher[64];
    double             in_state[ST_EOF + 1]; /* seconds spent in each state, summed over
                                              * the completed connections */
} g;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void set_state(hs_t *c, int st)
{
    c->state = st;
    c->at[st] = now_s();
}

static void fail(hs_t *c, const char *why)
{
    if (!g.failed++) {
        unsigned long e = ERR_peek_last_error();
        snprintf(g.first_error, sizeof(g.first_error), "%s%s%s (state %d)", why, e ? ": " : "",
                 e ? ERR_reason_error_string(e) : "", c->state);
    }
    ERR_clear_error();
}

static void hs_free(hs_t *c)
{
    if (c->ssl)
        SSL_free(c->ssl);
    close(c->fd);
    free(c);
}

/* Queue bytes for the socket (the connection's few frames always fit). */
static void put(hs_t *c, const void *p, size_t n)
{
    if (c->outlen + n > sizeof(c->out))
        abort();
    memcpy(c->out + c->outlen, p, n);
    c->outlen += n;
}

/* A frame of `type` (0 AMQP, 1 SASL) around the body. */
static void put_frame(hs_t *c, int type, const uint8_t *body, size_t n)
{
    uint8_t  h[8] = {0, 0, 0, 0, 2, (uint8_t)type, 0, 0};
    uint32_t size = (uint32_t)(8 + n);
    h[0] = (uint8_t)(size >> 24);
    h[1] = (uint8_t)(size >> 16);
    h[2] = (uint8_t)(size >> 8);
    h[3] = (uint8_t)size;
    put(c, h, 8);
    put(c, body, n);
}

static void put_sasl(hs_t *c)
{
    static const uint8_t hdr[8] = {'A', 'M', 'Q', 'P', 3, 1, 0, 0};
    uint8_t              b[400];
    size_t               mlen = strlen(g.mech), n = 0;
    uint8_t              resp[300];
    size_t               rlen = 0;
    if (strcmp(g.mech, "PLAIN") == 0) {
        rlen = (size_t)snprintf((char *)resp, sizeof(resp), "%c%s%c%s", 0, g.user, 0, g.password);
    } else {
        memcpy(resp, "anonymous", 9); /* ANONYMOUS: the trace (RFC 4505) */
        rlen = 9;
    }
    /* sasl-init: list [mechanism symbol, initial-response binary] */
    b[n++] = 0x00;
    b[n++] = 0x53;
    b[n++] = 0x41;
    b[n++] = 0xc0;
    b[n++] = (uint8_t)(1 + 2 + mlen + 2 + rlen);
    b[n++] = 2;
    b[n++] = 0xa3;
    b[n++] = (uint8_t)mlen;
    memcpy(b + n, g.mech, mlen);
    n += mlen;
    b[n++] = 0xa0;
    b[n++] = (uint8_t)rlen;
    memcpy(b + n, resp, rlen);
    n += rlen;
    put(c, hdr, sizeof(hdr));
    put_frame(c, 1, b, n);
}

static void put_open(hs_t *c)
{
    static const uint8_t hdr[8] = {'A', 'M', 'Q', 'P', 0, 1, 0, 0};
    /* open: list [container-id "hs"] */
    static const uint8_t open[] = {0x00, 0x53, 0x10, 0xc0, 0x05, 0x01, 0xa1, 0x02, 'h', 's'};
    put(c, hdr, sizeof(hdr));
    put_frame(c, 0, open, sizeof(open));
}

static void put_close(hs_t *c)
{
    static const uint8_t close_[] = {0x00, 0x53, 0x18, 0x45};
    put_frame(c, 0, close_, sizeof(close_));
}

/* The connection finished (ok) or failed: free it. */
static void finish(hs_t *c, bool ok)
{
    if (ok) {
        g.done++;
        c->at[ST_EOF + 1] = now_s();
        for (int st = ST_CONNECT; st <= ST_EOF; st++) {
            int next = st + 1;
            while (next <= ST_EOF && c->at[next] == 0)
                next++; /* a state skipped (no TLS, no SASL) */
            if (c->at[st] != 0)
                g.in_state[st] += c->at[next] - c->at[st];
        }
    }
    epoll_ctl(g.ep, EPOLL_CTL_DEL, c->fd, NULL);
    hs_free(c);
}

/* Performative code of a frame body (descriptor 0x00 0x53 code or 0x00 0x80 ulong), or -1. */
static int perf_code(const uint8_t *b, size_t n)
{
    if (n >= 3 && b[0] == 0x00 && b[1] == 0x53)
        return b[2];
    if (n >= 10 && b[0] == 0x00 && b[1] == 0x80)
        return b[9];
    return -1;
}

/* sasl-outcome's code (the list's first field, a ubyte), or -1. */
static int outcome_code(const uint8_t *b, size_t n)
{
    size_t at;
    if (n > 3 && b[3] == 0xc0)
        at = 6;
    else if (n > 3 && b[3] == 0xd0)
        at = 12;
    else
        return -1;
    return n >= at + 2 && b[at] == 0x50 ? b[at + 1] : -1;
}

/* Parse what was read: protocol headers and frames.  Returns false on a failure. */
static bool parse(hs_t *c)
{
    size_t pos = 0;
    while (c->inlen - pos >= 8) {
        const uint8_t *p = c->in + pos;
        if (memcmp(p, "AMQP", 4) == 0) {
            pos += 8;
            continue;
        }
        uint32_t size = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
        if (size < 8 || size > sizeof(c->in)) {
            fail(c, "bad frame size");
            return false;
        }
        if (c->inlen - pos < size)
            break;
        size_t doff = (size_t)p[4] * 4;
        if (doff < 8 || doff > size) {
            fail(c, "bad data offset");
            return false;
        }
        const uint8_t *body = p + doff;
        size_t         blen = size - doff;
        int            code = perf_code(body, blen);
        pos += size;
        if (c->state == ST_SASL && code == 0x44) {
            if (outcome_code(body, blen) != 0) {
                fail(c, "SASL outcome not ok");
                return false;
            }
            set_state(c, ST_OPEN);
            put_open(c);
        } else if (c->state == ST_OPEN && code == 0x10) {
            set_state(c, ST_CLOSE);
            put_close(c);
        } else if (code == 0x18) {
            if (c->state != ST_CLOSE) {
                fail(c, "the router closed the connection");
                return false;
            }
            set_state(c, ST_EOF);
            if (c->ssl) {
                SSL_shutdown(c->ssl); /* close_notify */
                ERR_clear_error();
            }
        }
    }
    memmove(c->in, c->in + pos, c->inlen - pos);
    c->inlen -= pos;
    return true;
}

/* After the handshake (or connect, without TLS): the first frames. */
static void begin_amqp(hs_t *c)
{
    if (g.mech) {
        set_state(c, ST_SASL);
        put_sasl(c);
    } else {
        set_state(c, ST_OPEN);
        put_open(c);
    }
}

/* Drive one connection as far as its socket allows.  Returns false when it is finished. */
static bool step(hs_t *c)
{
    if (c->state == ST_CONNECT) {
        int       err = 0;
        socklen_t len = sizeof(err);
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err) {
            errno = err;
            fail(c, strerror(err));
            finish(c, false);
            return false;
        }
        if (g.tls) {
            set_state(c, ST_TLS);
        } else {
            begin_amqp(c);
        }
    }
    if (c->state == ST_TLS) {
        int r = SSL_do_handshake(c->ssl);
        if (r != 1) {
            int e = SSL_get_error(c->ssl, r);
            if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                return true;
            fail(c, "TLS handshake failed");
            finish(c, false);
            return false;
        }
        if (!g.proto[0]) {
            snprintf(g.proto, sizeof(g.proto), "%s", SSL_get_version(c->ssl));
            snprintf(g.cipher, sizeof(g.cipher), "%s", SSL_get_cipher_name(c->ssl));
        }
        begin_amqp(c);
    }
    for (;;) {
        bool progress = false;
        while (c->outlen > 0) {
            long w = c->ssl ? SSL_write(c->ssl, c->out, (int)c->outlen)
                            : write(c->fd, c->out, c->outlen);
            if (w <= 0) {
                if (c->ssl) {
                    int e = SSL_get_error(c->ssl, (int)w);
                    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
                        break;
                } else if (errno == EAGAIN) {
                    break;
                }
                fail(c, "write failed");
                finish(c, false);
                return false;
            }
            memmove(c->out, c->out + w, c->outlen - (size_t)w);
            c->outlen -= (size_t)w;
            progress = true;
        }
        size_t room = sizeof(c->in) - c->inlen;
        long   k = c->ssl ? SSL_read(c->ssl, c->in + c->inlen, (int)room)
                          : read(c->fd, c->in + c->inlen, room);
        if (k > 0) {
            c->inlen += (size_t)k;
            if (!parse(c)) {
                finish(c, false);
                return false;
            }
            progress = true;
        } else {
            bool again, eof;
            if (c->ssl) {
                int e = SSL_get_error(c->ssl, (int)k);
                again = e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE;
                eof = e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && k == 0);
                ERR_clear_error();
            } else {
                again = k < 0 && (errno == EAGAIN || errno == EINTR);
                eof = k == 0;
            }
            if (!again) {
                bool ok = eof && c->state == ST_EOF;
                if (!ok)
                    fail(c, eof ? "the router closed the socket" : "read failed");
                finish(c, ok);
                return false;
            }
        }
        if (!progress)
            return true;
    }
}

/* A new connection (its hs_t lives in epoll's data pointer); false if it could not start. */
static bool start_one(void)
{
    hs_t *c = calloc(1, sizeof(*c));
    if (!c)
        abort();
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        fail(c, "socket");
        free(c);
        return false;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(c->fd, (struct sockaddr *)&g.addr, sizeof(g.addr)) != 0 && errno != EINPROGRESS) {
        fail(c, strerror(errno));
        hs_free(c);
        return false;
    }
    if (g.tls) {
        c->ssl = SSL_new(g.tls);
        if (!c->ssl || !SSL_set_fd(c->ssl, c->fd) || !SSL_set1_host(c->ssl, "127.0.0.1")) {
            fail(c, "cannot make a TLS session");
            hs_free(c);
            return false;
        }
        SSL_set_connect_state(c->ssl);
    }
    set_state(c, ST_CONNECT);
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = c};
    if (epoll_ctl(g.ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
        fail(c, "epoll_ctl");
        hs_free(c);
        return false;
    }
    return true;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: junction-handshakes --url HOST:PORT [--tls-ca FILE] [--mech ANONYMOUS|PLAIN|"
            "none]\n"
            "                           [--user U --password P] [--parallel P] [--seconds S]\n"
            "\n"
            "Opens connections to the router one after another, P at a time (default 8), for S\n"
            "seconds (default 5): each one TCP, a full TLS handshake with --tls-ca (the router's\n"
            "certificate checked against FILE and 127.0.0.1), SASL with the mechanism (default\n"
            "ANONYMOUS; none: no SASL layer), AMQP open and close.  Prints one line of JSON:\n"
            "connections, failures, seconds, per_s, cpu_s (this client's), tls, cipher.\n"
            "Exit status 0 when none failed, 1 otherwise, 2 on a usage error.\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"url", required_argument, NULL, 'u'},
                                         {"tls-ca", required_argument, NULL, 'T'},
                                         {"mech", required_argument, NULL, 'm'},
                                         {"user", required_argument, NULL, 'U'},
                                         {"password", required_argument, NULL, 'P'},
                                         {"parallel", required_argument, NULL, 'p'},
                                         {"seconds", required_argument, NULL, 's'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char                *url = NULL, *ca = NULL;
    g.mech = "ANONYMOUS";
    g.parallel = 8;
    g.seconds = 5;
    int o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (o) {
        case 'u':
            url = optarg;
            break;
        case 'T':
            ca = optarg;
            break;
        case 'm':
            g.mech = strcmp(optarg, "none") == 0 ? NULL : optarg;
            break;
        case 'U':
            g.user = optarg;
            break;
        case 'P':
            g.password = optarg;
            break;
        case 'p':
            g.parallel = atoi(optarg);
            break;
        case 's':
            g.seconds = atof(optarg);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    const char *colon = url ? strrchr(url, ':') : NULL;
    if (!colon || g.parallel < 1 || g.seconds <= 0 ||
        (g.mech && strcmp(g.mech, "ANONYMOUS") != 0 && strcmp(g.mech, "PLAIN") != 0) ||
        (g.mech && strcmp(g.mech, "PLAIN") == 0 && (!g.user || !g.password))) {
        usage(stderr);
        return 2;
    }
    char host[64];
    snprintf(host, sizeof(host), "%.*s", (int)(colon - url), url);
    g.addr.sin_family = AF_INET;
    g.addr.sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &g.addr.sin_addr) != 1) {
        fprintf(stderr, "junction-handshakes: --url needs an IPv4 address\n");
        return 2;
    }
    if (ca) {
        g.tls = SSL_CTX_new(TLS_client_method());
        if (!g.tls || SSL_CTX_load_verify_locations(g.tls, ca, NULL) != 1) {
            fprintf(stderr, "junction-handshakes: cannot load the CA file %s\n", ca);
            return 2;
        }
        SSL_CTX_set_verify(g.tls, SSL_VERIFY_PEER, NULL);
        SSL_CTX_set_session_cache_mode(g.tls, SSL_SESS_CACHE_OFF);
    }
    g.ep = epoll_create1(EPOLL_CLOEXEC);
    double t0 = now_s(), end = t0 + g.seconds, last = t0;
    int    live = 0;
    for (int i = 0; i < g.parallel; i++)
        live += start_one();
    struct epoll_event evs[256];
    while (live > 0) {
        int n = epoll_wait(g.ep, evs, 256, 1000);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++) {
            long before = g.done;
            if (!step(evs[i].data.ptr)) {
                last = now_s();
                live--;
                /* a failed connection is not replaced: the run has failed anyway, and a
                 * router that refuses every connection must not be hammered */
                if (last < end && g.done > before)
                    live += start_one();
            }
        }
        if (now_s() > end + 30)
            break; /* connections stuck for 30 s after the end: count them as failures */
    }
    g.failed += live;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
                 (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
    double secs = last - t0;
#define MS(st) (g.done ? 1e3 * g.in_state[st] / (double)g.done : 0)
    printf("{\"connections\":%ld,\"failures\":%ld,\"seconds\":%.3f,\"per_s\":%.1f,"
           "\"cpu_s\":%.3f,\"mech\":\"%s\",\"tls\":\"%s\",\"cipher\":\"%s\",\"error\":\"%s\","
           "\"ms_connect\":%.3f,\"ms_tls\":%.3f,\"ms_sasl\":%.3f,\"ms_open\":%.3f,"
           "\"ms_close\":%.3f,\"ms_eof\":%.3f}\n",
           g.done, g.failed, secs, secs > 0 ? (double)g.done / secs : 0, cpu,
           g.mech ? g.mech : "none", g.proto[0] ? g.proto : "none", g.cipher[0] ? g.cipher : "none",
           g.first_error, MS(ST_CONNECT), MS(ST_TLS), MS(ST_SASL), MS(ST_OPEN), MS(ST_CLOSE),
           MS(ST_EOF));
    return g.done > 0 && g.failed == 0 ? 0 : 1;
}
