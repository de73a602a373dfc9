/* tests/bench/relay/relay.c: junction-relay, a minimal TCP relay for `scripts/bench
 * annotations`: the floor for any process between the two junction-loadgen clients.  It knows
 * nothing of AMQP and only moves bytes, so the rate the clients reach through it bounds what
 * any process in the middle (junctiond included) can reach on the same machine.
 *
 *   junction-relay --listen HOST:PORT --to HOST:PORT [--mode copy|splice]
 *
 * Prints "LISTENING HOST:PORT" on stderr once it accepts connections (port 0: an ephemeral
 * one).  For each accepted connection it connects to --to and moves bytes both ways: the EOF
 * of one direction becomes a shutdown(SHUT_WR) of the other socket once its bytes are out,
 * and the pair is closed once both directions have ended, or at once on an error (a reset).
 *   copy    (default) read() into a 64 KiB buffer per direction and write() it out: two
 *           copies per byte, kernel to user and back, the fewest for a process that reads
 *           the bytes (as a router must);
 *   splice  socket -> pipe -> socket with splice(2) (SPLICE_F_MOVE | SPLICE_F_NONBLOCK): the
 *           bytes never enter user space; the pipe (64 KiB) is the direction's buffer.
 * A direction holds at most 64 KiB: while it is full, the relay stops reading its source, so
 * that TCP's flow control reaches the sender; nothing is dropped.  Every socket has
 * TCP_NODELAY.  One line per closed connection on stderr (bytes each way).  Exit status: 0 on
 * SIGINT or SIGTERM (everything closed), 1 on a setup failure, 2 on a usage error.
 *
 * Threads: one (single-threaded): one epoll loop, no locks, nothing shared.  Edge-triggered:
 * each socket is registered once for input and output, and the loop keeps each socket's
 * readiness itself (nginx's ready flags: a short read or write means empty or full, as TCP
 * guarantees), so that epoll_ctl is never called again for it.  The connect() to --to is a
 * blocking one: the relay runs on loopback, where it completes at once.  A tool of the
 * benchmark, not part of the router.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
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
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

enum {
    RELAY_BUF = 64 * 1024, /* bytes in flight per direction, at most */
    RELAY_EVENTS = 64,     /* epoll events taken per epoll_wait() */
};

typedef struct pair pair_t;

/* side_t: one of a pair's two sockets, and what the loop knows of its readiness. */
typedef struct side {
    int  fd;       /* nonblocking, registered edge-triggered; -1 once closed */
    bool readable; /* may have bytes or an EOF to read: set by EPOLLIN, cleared when a read
                    * finds the socket empty */
    bool writable; /* may take bytes: set by EPOLLOUT, cleared when a write finds it full */
    bool hup;      /* the peer closed or failed (EPOLLRDHUP, EPOLLHUP, EPOLLERR): read until
                    * EOF, a short read no longer means empty */
    pair_t *pair;  /* the pair this side belongs to (epoll's data.ptr is the side) */
} side_t;

/* dir_t: one direction of a pair, from side[i] to side[1 - i], and its bytes in flight. */
typedef struct dir {
    char    *buf;     /* copy: RELAY_BUF bytes; NULL in splice mode */
    size_t   head;    /* copy: first byte of buf not yet written */
    size_t   tail;    /* copy: end of the bytes read into buf */
    int      pipe[2]; /* splice: [0] read end, [1] write end; -1 in copy mode */
    size_t   pending; /* bytes read from the source and not yet written to the destination */
    size_t   cap;     /* the most pending may reach: buf's size or the pipe's */
    bool     eof;     /* the source's EOF was read */
    bool     shut;    /* the destination's write side was shut down (after eof, once empty) */
    uint64_t bytes;   /* bytes moved in all, for the closing line */
} dir_t;

/* pair_t: an accepted connection and the one the relay made to --to for it.
 * Owner: the loop; freed after the epoll batch in which it was closed, since later events of
 * that batch may still point at it. */
struct pair {
    side_t   side[2]; /* [0]: accepted from the client; [1]: connected to --to */
    dir_t    dir[2];  /* [i]: side[i] -> side[1 - i] */
    uint64_t id;      /* 1, 2, ... in accept order, for the log */
    bool     dead;    /* closed: its fds are gone, it waits on g.dead to be freed */
    pair_t  *next;    /* on g.pairs (open) or g.dead (closed) */
    pair_t  *prev;    /* on g.pairs only */
};

/* The relay's state: written at start-up, then by the loop (the only thread). */
static struct {
    bool                    splice;  /* --mode splice */
    struct sockaddr_storage to;      /* --to, resolved once */
    socklen_t               to_len;  /* its length */
    int                     epfd;    /* the epoll instance */
    int                     lfd;     /* the listening socket */
    int                     sfd;     /* signalfd for SIGINT and SIGTERM */
    pair_t                 *pairs;   /* open pairs (doubly linked) */
    pair_t                 *dead;    /* pairs closed during the current batch */
    uint64_t                next_id; /* the next pair's id */
} g;

/* epoll data.ptr for the listening socket and the signalfd (any other is a side_t). */
static char g_tag_listen;
static char g_tag_signal;

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);

    if (!p) {
        fprintf(stderr, "junction-relay: out of memory\n");
        abort();
    }
    return p;
}

/* Resolve "HOST:PORT" (numeric or not; the port after the last ':', brackets around an IPv6
 * host allowed) into ss.  Returns 0, or -1 after saying why on stderr. */
static int parse_hostport(const char *hp, struct sockaddr_storage *ss, socklen_t *len)
{
    char             host[256];
    const char      *colon = strrchr(hp, ':');
    size_t           hlen;
    struct addrinfo  hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_ADDRCONFIG};
    struct addrinfo *ai = NULL;
    int              rc;

    if (!colon || colon == hp || !colon[1]) {
        fprintf(stderr, "junction-relay: '%s' is not HOST:PORT\n", hp);
        return -1;
    }
    hlen = (size_t)(colon - hp);
    if (hp[0] == '[' && hlen >= 2 && hp[hlen - 1] == ']') {
        hp++;
        hlen -= 2;
    }
    if (hlen >= sizeof(host)) {
        fprintf(stderr, "junction-relay: host name too long in '%s'\n", hp);
        return -1;
    }
    memcpy(host, hp, hlen);
    host[hlen] = '\0';
    rc = getaddrinfo(host, colon + 1, &hints, &ai);
    if (rc != 0) {
        fprintf(stderr, "junction-relay: %s: %s\n", hp, gai_strerror(rc));
        return -1;
    }
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    *len = ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}

static void set_nodelay(int fd)
{
    int one = 1;

    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
        fprintf(stderr, "junction-relay: TCP_NODELAY: %s\n", strerror(errno));
}

/* Open the listening socket on hp and print "LISTENING HOST:PORT".  Returns the socket, or -1
 * after saying why. */
static int listen_on(const char *hp)
{
    struct sockaddr_storage ss;
    socklen_t               len;
    char                    host[NI_MAXHOST], port[NI_MAXSERV];
    int                     one = 1, fd;

    if (parse_hostport(hp, &ss, &len) != 0)
        return -1;
    fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fprintf(stderr, "junction-relay: socket: %s\n", strerror(errno));
        return -1;
    }
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 16) != 0) {
        fprintf(stderr, "junction-relay: listen %s: %s\n", hp, strerror(errno));
        goto out_close;
    }
    len = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0 ||
        getnameinfo((struct sockaddr *)&ss, len, host, sizeof(host), port, sizeof(port),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
        fprintf(stderr, "junction-relay: cannot read the listening address\n");
        goto out_close;
    }
    fprintf(stderr, "LISTENING %s:%s\n", host, port);
    fflush(stderr);
    return fd;
out_close:
    close(fd);
    return -1;
}

/* Prepare direction d's buffer (copy) or pipe (splice); d->pipe is {-1, -1} on entry.
 * Returns 0, or -errno. */
static int dir_init(dir_t *d)
{
    int sz;

    if (!g.splice) {
        d->buf = xcalloc(1, RELAY_BUF);
        d->cap = RELAY_BUF;
        return 0;
    }
    if (pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) != 0)
        return -errno;
    sz = fcntl(d->pipe[1], F_SETPIPE_SZ, RELAY_BUF);
    if (sz < 0)
        sz = fcntl(d->pipe[1], F_GETPIPE_SZ);
    d->cap = sz > 0 ? (size_t)sz : RELAY_BUF;
    return 0;
}

static void dir_fini(dir_t *d)
{
    free(d->buf);
    d->buf = NULL;
    if (d->pipe[0] >= 0)
        close(d->pipe[0]);
    if (d->pipe[1] >= 0)
        close(d->pipe[1]);
    d->pipe[0] = d->pipe[1] = -1;
}

/* Close both sockets of p (which leaves epoll) and its buffers or pipes, print its closing line
 * (why: NULL for a clean end), and move it to g.dead, to be freed after the batch. */
static void pair_close(pair_t *p, const char *why)
{
    int i;

    for (i = 0; i < 2; i++) {
        if (p->side[i].fd >= 0)
            close(p->side[i].fd);
        p->side[i].fd = -1;
        dir_fini(&p->dir[i]);
    }
    fprintf(stderr,
            "junction-relay: connection %" PRIu64 " closed%s%s: %" PRIu64 " bytes to --to, %" PRIu64
            " bytes back\n",
            p->id, why ? ": " : "", why ? why : "", p->dir[0].bytes, p->dir[1].bytes);
    if (p->prev)
        p->prev->next = p->next;
    else
        g.pairs = p->next;
    if (p->next)
        p->next->prev = p->prev;
    p->dead = true;
    p->prev = NULL;
    p->next = g.dead;
    g.dead = p;
}

/* Read from fd into d: at most room bytes.  Returns what read() or splice() returns. */
static ssize_t dir_in(dir_t *d, int fd, size_t room)
{
    if (g.splice)
        return splice(fd, NULL, d->pipe[1], NULL, room, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    return read(fd, d->buf + d->tail, room);
}

/* Write what d holds to fd.  Returns what write() or splice() returns. */
static ssize_t dir_out(dir_t *d, int fd)
{
    if (g.splice)
        return splice(d->pipe[0], NULL, fd, NULL, d->pending, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    return write(fd, d->buf + d->head, d->pending);
}

/* Move what can be moved from p->side[i] to p->side[1 - i] without blocking, and shut the
 * destination's write side down once the source's EOF was read and every byte is out.
 * Returns 0, or -errno on a socket error (the caller closes the pair). */
static int pump(pair_t *p, int i)
{
    side_t *src = &p->side[i], *dst = &p->side[1 - i];
    dir_t  *d = &p->dir[i];
    bool    moved;
    ssize_t n;
    size_t  want, room;

    do {
        moved = false;
        if (d->pending > 0 && dst->writable) {
            want = d->pending;
            n = dir_out(d, dst->fd);
            if (n > 0) {
                moved = true;
                d->pending -= (size_t)n;
                d->bytes += (uint64_t)n;
                if (!g.splice) {
                    d->head += (size_t)n;
                    if (d->head == d->tail)
                        d->head = d->tail = 0;
                    /* a short write to a nonblocking TCP socket: its send buffer is full */
                    if ((size_t)n < want)
                        dst->writable = false;
                }
            } else if (n < 0 && errno == EAGAIN) {
                dst->writable = false;
            } else if (n < 0 && errno != EINTR) {
                return -errno;
            }
        }
        room = g.splice ? d->cap - d->pending : d->cap - d->tail;
        if (!d->eof && src->readable && room > 0) {
            n = dir_in(d, src->fd, room);
            if (n > 0) {
                moved = true;
                d->pending += (size_t)n;
                if (!g.splice) {
                    d->tail += (size_t)n;
                    /* a short read: the socket is empty (unless an EOF or error is coming,
                     * which only a read that returns 0 or fails tells) */
                    if ((size_t)n < room && !src->hup)
                        src->readable = false;
                }
            } else if (n == 0) {
                moved = true;
                d->eof = true;
            } else if (errno == EAGAIN) {
                /* splice says EAGAIN for a full pipe as for an empty socket: only with the
                 * pipe empty does it mean the socket; else try again once the pipe drains */
                if (!g.splice || d->pending == 0)
                    src->readable = false;
            } else if (errno != EINTR) {
                return -errno;
            }
        }
    } while (moved);
    if (d->eof && d->pending == 0 && !d->shut) {
        d->shut = true;
        /* the peer may be gone already (ENOTCONN): the pair ends either way */
        shutdown(dst->fd, SHUT_WR);
    }
    return 0;
}

/* An event on side s: note its readiness, move both directions, close the pair once both
 * directions ended or a socket failed. */
static void on_side(side_t *s, uint32_t ev)
{
    pair_t *p = s->pair;
    int     i = s == &p->side[0] ? 0 : 1, rc;
    char    why[128];

    if (p->dead)
        return;
    if (ev & (EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        s->hup = true;
    if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
        s->readable = true;
    if (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR))
        s->writable = true;
    rc = pump(p, i);
    if (rc == 0)
        rc = pump(p, 1 - i);
    if (rc < 0) {
        snprintf(why, sizeof(why), "%s", strerror(-rc));
        pair_close(p, why);
    } else if (p->dir[0].shut && p->dir[1].shut) {
        pair_close(p, NULL);
    }
}

/* Register side s of p with epoll, edge-triggered, for input and output.  Returns 0 or -errno. */
static int side_add(pair_t *p, int i, int fd)
{
    struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET};

    p->side[i].fd = fd;
    p->side[i].pair = p;
    ev.data.ptr = &p->side[i];
    return epoll_ctl(g.epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -errno;
}

/* Connect to --to for the accepted socket cfd and start relaying.  On failure, closes cfd
 * (the client sees its connection closed) and says why. */
static void pair_open(int cfd)
{
    pair_t *p;
    int     tfd, i, rc;

    tfd = socket(g.to.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (tfd < 0 || connect(tfd, (struct sockaddr *)&g.to, g.to_len) != 0 ||
        fcntl(tfd, F_SETFL, O_NONBLOCK) != 0) {
        fprintf(stderr, "junction-relay: connect to --to: %s\n", strerror(errno));
        if (tfd >= 0)
            close(tfd);
        close(cfd);
        return;
    }
    set_nodelay(cfd);
    set_nodelay(tfd);
    p = xcalloc(1, sizeof(*p));
    p->id = ++g.next_id;
    p->side[0].fd = p->side[1].fd = -1;
    for (i = 0; i < 2; i++)
        p->dir[i].pipe[0] = p->dir[i].pipe[1] = -1;
    p->next = g.pairs;
    if (g.pairs)
        g.pairs->prev = p;
    g.pairs = p;
    rc = 0;
    for (i = 0; i < 2 && rc == 0; i++)
        rc = dir_init(&p->dir[i]);
    if (rc == 0)
        rc = side_add(p, 0, cfd);
    else
        close(cfd);
    if (rc == 0)
        rc = side_add(p, 1, tfd);
    else
        close(tfd);
    if (rc < 0) {
        char why[128];

        snprintf(why, sizeof(why), "set-up failed: %s", strerror(-rc));
        pair_close(p, why);
    }
}

/* Accept every connection waiting on the listening socket. */
static void on_listen(void)
{
    int fd;

    for (;;) {
        fd = accept4(g.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            pair_open(fd);
            continue;
        }
        if (errno == EAGAIN)
            return;
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        /* EMFILE and the like: say so, and try again at the next connection */
        fprintf(stderr, "junction-relay: accept: %s\n", strerror(errno));
        return;
    }
}

static void usage(FILE *f)
{
    fprintf(f, "usage: junction-relay --listen HOST:PORT --to HOST:PORT [--mode copy|splice]\n"
               "A TCP relay that only moves bytes (single-threaded, epoll).  Prints \"LISTENING\n"
               "HOST:PORT\" on stderr when ready; for each connection it accepts, connects to\n"
               "--to and relays both ways.  copy: read()/write() through a 64 KiB buffer per\n"
               "direction; splice: socket -> pipe -> socket, no user-space copy.  Stops on\n"
               "SIGINT or SIGTERM.\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"to", required_argument, NULL, 't'},
        {"mode", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char        *listen_hp = NULL, *to_hp = NULL;
    struct epoll_event evs[RELAY_EVENTS], ev;
    sigset_t           sigs;
    int                c, n, i;
    bool               stop = false;

    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'l':
            listen_hp = optarg;
            break;
        case 't':
            to_hp = optarg;
            break;
        case 'm':
            if (strcmp(optarg, "splice") == 0) {
                g.splice = true;
            } else if (strcmp(optarg, "copy") != 0) {
                fprintf(stderr, "junction-relay: --mode is copy or splice\n");
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!listen_hp || !to_hp || optind != argc) {
        usage(stderr);
        return 2;
    }
    if (parse_hostport(to_hp, &g.to, &g.to_len) != 0)
        return 1;

    /* A peer gone mid-write is an EPIPE for that pair, not the end of the relay. */
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    if (sigprocmask(SIG_BLOCK, &sigs, NULL) != 0) {
        fprintf(stderr, "junction-relay: sigprocmask: %s\n", strerror(errno));
        return 1;
    }
    g.sfd = signalfd(-1, &sigs, SFD_NONBLOCK | SFD_CLOEXEC);
    g.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (g.sfd < 0 || g.epfd < 0) {
        fprintf(stderr, "junction-relay: signalfd/epoll: %s\n", strerror(errno));
        return 1;
    }
    g.lfd = listen_on(listen_hp);
    if (g.lfd < 0)
        return 1;
    ev = (struct epoll_event){.events = EPOLLIN, .data.ptr = &g_tag_listen};
    if (epoll_ctl(g.epfd, EPOLL_CTL_ADD, g.lfd, &ev) != 0) {
        fprintf(stderr, "junction-relay: epoll_ctl: %s\n", strerror(errno));
        return 1;
    }
    ev = (struct epoll_event){.events = EPOLLIN, .data.ptr = &g_tag_signal};
    if (epoll_ctl(g.epfd, EPOLL_CTL_ADD, g.sfd, &ev) != 0) {
        fprintf(stderr, "junction-relay: epoll_ctl: %s\n", strerror(errno));
        return 1;
    }

    while (!stop) {
        n = epoll_wait(g.epfd, evs, RELAY_EVENTS, -1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fprintf(stderr, "junction-relay: epoll_wait: %s\n", strerror(errno));
            return 1;
        }
        for (i = 0; i < n; i++) {
            if (evs[i].data.ptr == &g_tag_listen)
                on_listen();
            else if (evs[i].data.ptr == &g_tag_signal)
                stop = true;
            else
                on_side(evs[i].data.ptr, evs[i].events);
        }
        while (g.dead) {
            pair_t *p = g.dead;

            g.dead = p->next;
            free(p);
        }
    }

    while (g.pairs)
        pair_close(g.pairs, "relay stopped");
    while (g.dead) {
        pair_t *p = g.dead;

        g.dead = p->next;
        free(p);
    }
    close(g.lfd);
    close(g.sfd);
    close(g.epfd);
    fprintf(stderr, "junction-relay: stopped on a signal\n");
    return 0;
}
