/* tests/bench/scale/holdconns.c: hold N idle AMQP connections open on a router, each with one
 * session and one link, so that a benchmark can measure what an idle connection costs.
 *
 *   junction-holdconns --url HOST:PORT --connections N [--address A] [--distinct]
 *                      [--sender] [--what open|session|link] [--parallel P]
 *
 * Each connection sends the AMQP protocol header (no SASL layer), an open, a begin and an
 * attach of a receiver (--sender: a sender) on address A (default "idle"; --distinct: A0 ..
 * A(N-1)), all in one write, then reads and drops what the router sends, looking only at each
 * frame's performative code.  --what open|session stops after the open or the begin (to split
 * the cost per object).  At most P connections (default 200) are between connect() and the
 * router's answer at once, so the listen backlog never overflows.  Prints
 * "READY <N> <seconds>" on stdout once the router has answered every connection's last
 * frame, then keeps them open (an empty frame on each every 3 s, since the router closes a
 * connection that is silent for its idle timeout) until SIGTERM or SIGINT.  Exits non-zero if
 * a connection fails or the router closes, ends or detaches anything.
 *
 * A client of the benchmark, not part of the router: 10,000 Proton connections in one process
 * cost the client more than the router, so this writes the few frames it needs by hand (one
 * epoll loop, one small struct per connection).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Seconds between two empty frames on every connection (the router advertises half its idle
 * timeout, 8 s by default). */
#define HEARTBEAT_S 3

enum { WHAT_OPEN = 0, WHAT_SESSION, WHAT_LINK };

/* One connection: the socket and where its reader is in the router's byte stream. */
typedef struct hc {
    int      fd;
    bool     connected; /* connect() finished and the frames went out */
    bool     answered;  /* the router answered the last frame sent */
    bool     proto;     /* the router's protocol header was read */
    uint8_t  hdr[8];    /* frame header being read */
    uint8_t  hlen;      /* its bytes so far */
    uint8_t  perf[3];   /* the first bytes of the frame body: 0x00 0x53 code */
    uint8_t  plen;      /* their count */
    uint32_t ext_left;  /* extended header bytes to skip */
    uint32_t left;      /* frame body bytes still to come */
} hc_t;

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: junction-holdconns --url HOST:PORT --connections N [--address A] "
               "[--distinct]\n"
               "                          [--sender] [--what open|session|link] "
               "[--parallel P]\n"
               "Holds N connections, each with a session and a link (receivers on A, default "
               "\"idle\");\nprints READY once the router answered all of them; runs until "
               "SIGTERM.\n");
}

/* ---- the frames, encoded by hand (AMQP 1.0 part 2) ---- */

typedef struct out {
    uint8_t b[512];
    size_t  n;
} out_t;

static void put(out_t *o, const void *p, size_t n)
{
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

static void put8(out_t *o, uint8_t v)
{
    o->b[o->n++] = v;
}

/* frame header: size:4 doff:1 (2) type:1 (0, AMQP) channel:2 (0); size patched by frame_end */
static size_t frame_begin(out_t *o)
{
    size_t at = o->n;
    put(o, (const uint8_t[]){0, 0, 0, 0, 2, 0, 0, 0}, 8);
    return at;
}

static void frame_end(out_t *o, size_t at)
{
    uint32_t size = (uint32_t)(o->n - at);
    o->b[at] = (uint8_t)(size >> 24);
    o->b[at + 1] = (uint8_t)(size >> 16);
    o->b[at + 2] = (uint8_t)(size >> 8);
    o->b[at + 3] = (uint8_t)size;
}

static void put_str8(out_t *o, const char *s)
{
    size_t n = strlen(s);
    put8(o, 0xa1);
    put8(o, (uint8_t)n);
    put(o, s, n);
}

/* A described list8 with `count` fields: returns where its size byte is, for list_end. */
static size_t list_begin(out_t *o, uint8_t code, uint8_t count)
{
    put(o, (const uint8_t[]){0x00, 0x53, code, 0xc0, 0, count}, 6);
    return o->n - 2;
}

static void list_end(out_t *o, size_t size_at)
{
    o->b[size_at] = (uint8_t)(o->n - size_at - 1);
}

/* Header, open, begin, attach (as --what says) for connection i. */
static void build(out_t *o, int what, bool sender, const char *addr, bool distinct, long i)
{
    o->n = 0;
    put(o, (const uint8_t[]){'A', 'M', 'Q', 'P', 0, 1, 0, 0}, 8);
    size_t f = frame_begin(o);
    size_t l = list_begin(o, 0x10, 1); /* open [container-id] */
    put_str8(o, "junction-holdconns");
    list_end(o, l);
    frame_end(o, f);
    if (what < WHAT_SESSION)
        return;
    f = frame_begin(o);
    l = list_begin(o, 0x11, 4); /* begin [remote-channel null, next-outgoing-id 0, windows] */
    put(o,
        (const uint8_t[]){0x40, 0x43, 0x70, 0x7f, 0xff, 0xff, 0xff, 0x70, 0x7f, 0xff, 0xff, 0xff},
        12);
    list_end(o, l);
    frame_end(o, f);
    if (what < WHAT_LINK)
        return;
    char name[32], a[256];
    snprintf(name, sizeof(name), "hold-%ld", i);
    if (distinct)
        snprintf(a, sizeof(a), "%s%ld", addr, i);
    else
        snprintf(a, sizeof(a), "%s", addr);
    f = frame_begin(o);
    /* attach [name, handle 0, role, snd-settle-mode null, rcv-settle-mode null, source,
     * target]: the router's end holds the address (source of a receiver, target of a sender) */
    l = list_begin(o, 0x12, 7);
    put_str8(o, name);
    put8(o, 0x43);
    put8(o, sender ? 0x42 : 0x41);
    put8(o, 0x40);
    put8(o, 0x40);
    for (int t = 0; t < 2; t++) {
        bool with_addr = (t == 0) != sender; /* source for a receiver, target for a sender */
        if (with_addr) {
            size_t s = list_begin(o, t == 0 ? 0x28 : 0x29, 1);
            put_str8(o, a);
            list_end(o, s);
        } else {
            put(o, (const uint8_t[]){0x00, 0x53, t == 0 ? 0x28 : 0x29, 0x45}, 4);
        }
    }
    list_end(o, l);
    frame_end(o, f);
}

/* ---- reading: only each frame's performative code matters ---- */

/* Feed what the router sent.  Returns 1 when the connection's last frame was answered (the
 * first time), 0 to go on, -1 when the router closed, ended or detached something. */
static int feed(hc_t *c, const uint8_t *p, size_t n, int what)
{
    int r = 0;
    while (n > 0) {
        if (!c->proto || c->left == 0) {
            size_t take = 8u - c->hlen < n ? 8u - c->hlen : n;
            memcpy(c->hdr + c->hlen, p, take);
            c->hlen = (uint8_t)(c->hlen + take);
            p += take;
            n -= take;
            if (c->hlen < 8)
                break;
            c->hlen = 0;
            if (!c->proto) {
                if (memcmp(c->hdr, "AMQP\0\1\0\0", 8) != 0)
                    return -1;
                c->proto = true;
                continue;
            }
            uint32_t size = (uint32_t)c->hdr[0] << 24 | (uint32_t)c->hdr[1] << 16 |
                            (uint32_t)c->hdr[2] << 8 | c->hdr[3];
            if (size < 8 || c->hdr[4] < 2 || c->hdr[4] * 4u > size)
                return -1;
            c->left = size - 8;
            c->ext_left = c->hdr[4] * 4u - 8;
            c->plen = 0;
            continue;
        }
        size_t take = c->left < n ? c->left : n;
        size_t skip = c->ext_left < take ? c->ext_left : take;
        c->ext_left -= (uint32_t)skip;
        bool was_short = c->plen < 3;
        for (size_t i = skip; i < take && c->plen < 3; i++)
            c->perf[c->plen++] = p[i];
        c->left -= (uint32_t)take;
        p += take;
        n -= take;
        if (was_short && c->plen == 3 && c->perf[0] == 0 && c->perf[1] == 0x53) {
            uint8_t code = c->perf[2];
            if (code >= 0x16 && code <= 0x18)
                return -1; /* detach, end, close */
            int want = what == WHAT_OPEN ? 0x10 : what == WHAT_SESSION ? 0x11 : 0x12;
            if (code == want && !c->answered) {
                c->answered = true;
                r = 1;
            }
        }
    }
    return r;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"url", required_argument, NULL, 'u'},
                                         {"connections", required_argument, NULL, 'n'},
                                         {"address", required_argument, NULL, 'a'},
                                         {"distinct", no_argument, NULL, 'd'},
                                         {"sender", no_argument, NULL, 's'},
                                         {"what", required_argument, NULL, 'w'},
                                         {"parallel", required_argument, NULL, 'p'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char                *url = NULL, *addr = "idle";
    long                       n_conns = 0, parallel = 200;
    bool                       distinct = false, sender = false;
    int                        what = WHAT_LINK, ch;
    while ((ch = getopt_long(argc, argv, "u:n:a:dsw:p:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'u':
            url = optarg;
            break;
        case 'n':
            n_conns = strtol(optarg, NULL, 10);
            break;
        case 'a':
            addr = optarg;
            break;
        case 'd':
            distinct = true;
            break;
        case 's':
            sender = true;
            break;
        case 'w':
            if (strcmp(optarg, "open") == 0)
                what = WHAT_OPEN;
            else if (strcmp(optarg, "session") == 0)
                what = WHAT_SESSION;
            else if (strcmp(optarg, "link") == 0)
                what = WHAT_LINK;
            else {
                usage(stderr);
                return 2;
            }
            break;
        case 'p':
            parallel = strtol(optarg, NULL, 10);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!url || n_conns <= 0 || parallel <= 0 || strlen(addr) > 200) {
        usage(stderr);
        return 2;
    }
    char        host[256];
    const char *colon = strrchr(url, ':');
    if (!colon || (size_t)(colon - url) >= sizeof(host)) {
        usage(stderr);
        return 2;
    }
    memcpy(host, url, (size_t)(colon - url));
    host[colon - url] = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, colon + 1, &hints, &ai) != 0) {
        fprintf(stderr, "holdconns: cannot resolve %s\n", url);
        return 2;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGPIPE, SIG_IGN);

    hc_t *cs = calloc((size_t)n_conns, sizeof(*cs));
    int   ep = epoll_create1(EPOLL_CLOEXEC);
    if (!cs || ep < 0) {
        perror("holdconns");
        return 1;
    }
    long               started = 0, answered = 0, pending = 0;
    double             t0 = now_s(), next_beat = t0 + HEARTBEAT_S;
    bool               ready = false;
    int                rc = 0;
    static uint8_t     rbuf[65536];
    struct epoll_event evs[256];
    out_t              o;

    while (!stop) {
        /* start connections while fewer than P wait for the router's answer */
        while (started < n_conns && pending < parallel) {
            hc_t *c = &cs[started];
            c->fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
            if (c->fd < 0) {
                fprintf(stderr, "holdconns: socket() for connection %ld: %s\n", started,
                        strerror(errno));
                rc = 1;
                goto out;
            }
            int one = 1;
            setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            if (connect(c->fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
                fprintf(stderr, "holdconns: connect() for connection %ld: %s\n", started,
                        strerror(errno));
                rc = 1;
                goto out;
            }
            struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT, .data.u64 = (uint64_t)started};
            epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
            started++;
            pending++;
        }
        if (!ready && answered == n_conns) {
            ready = true;
            printf("READY %ld %.3f\n", n_conns, now_s() - t0);
            fflush(stdout);
        }
        double now = now_s();
        if (now >= next_beat) {
            static const uint8_t empty[8] = {0, 0, 0, 8, 2, 0, 0, 0};
            for (long i = 0; i < started; i++)
                if (cs[i].connected && write(cs[i].fd, empty, 8) != 8) {
                    fprintf(stderr, "holdconns: connection %ld: heartbeat failed\n", i);
                    rc = 1;
                    goto out;
                }
            next_beat = now + HEARTBEAT_S;
        }
        int n = epoll_wait(ep, evs, 256, 200);
        for (int e = 0; e < n; e++) {
            long  i = (long)evs[e].data.u64;
            hc_t *c = &cs[i];
            if (!c->connected && (evs[e].events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
                int       err = 0;
                socklen_t el = sizeof(err);
                getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &el);
                if (err) {
                    fprintf(stderr, "holdconns: connection %ld: %s\n", i, strerror(err));
                    rc = 1;
                    goto out;
                }
                build(&o, what, sender, addr, distinct, i);
                if (write(c->fd, o.b, o.n) != (ssize_t)o.n) {
                    fprintf(stderr, "holdconns: connection %ld: short write\n", i);
                    rc = 1;
                    goto out;
                }
                c->connected = true;
                struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)i};
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
            }
            if (evs[e].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                ssize_t r = read(c->fd, rbuf, sizeof(rbuf));
                if (r == 0 || (r < 0 && errno != EAGAIN)) {
                    fprintf(stderr, "holdconns: connection %ld: the router closed it\n", i);
                    rc = 1;
                    goto out;
                }
                if (r > 0) {
                    int f = feed(c, rbuf, (size_t)r, what);
                    if (f < 0) {
                        fprintf(stderr,
                                "holdconns: connection %ld: the router refused or "
                                "closed something\n",
                                i);
                        rc = 1;
                        goto out;
                    }
                    if (f > 0) {
                        answered++;
                        pending--;
                    }
                }
            }
        }
    }
out:
    for (long i = 0; i < started; i++)
        close(cs[i].fd);
    free(cs);
    freeaddrinfo(ai);
    close(ep);
    return rc;
}
