/* tests/unit/router/accept_test.c: the acceptor (router/accept.c) on a real loopback
 * listener and a real libuv loop, with this process's open-files limit lowered so that
 * accept() fails with EMFILE: the loop must not spin, the clients it cannot take must be
 * closed, and it must accept again once descriptors are free.  Also the rate limiter. */
#include "router/accept.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#define N_CLIENTS 24 /* clients that connect while descriptors are short */
#define FREE      4  /* descriptors left for the acceptor to take */

/* What the acceptor's callback took. */
static int accepted[N_CLIENTS + 8];
static int n_accepted;

static void on_accept(rtr_acceptor_t *a, int fd)
{
    (void)a;
    assert_true(n_accepted < (int)(sizeof(accepted) / sizeof(accepted[0])));
    accepted[n_accepted++] = fd;
}

static int listen_loopback(struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    memset(sa, 0, sizeof(*sa));
    sa->sin_family = AF_INET;
    sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)sa, sizeof(*sa)), 0);
    assert_int_equal(listen(fd, 128), 0);
    socklen_t sl = sizeof(*sa);
    assert_int_equal(getsockname(fd, (struct sockaddr *)sa, &sl), 0);
    return fd;
}

static int connect_to(const struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (const struct sockaddr *)sa, sizeof(*sa)), 0);
    return fd;
}

/* The open-files limit under which exactly `n` descriptor numbers are free (new descriptors
 * take the lowest free number; those open above the limit stay usable). */
static rlim_t limit_leaving(int n)
{
    int fd = 0;
    for (int free_ = 0;; fd++)
        if (fcntl(fd, F_GETFD) < 0 && ++free_ == n)
            break;
    return (rlim_t)fd + 1;
}

/* Whether the peer closed `fd` (EOF or reset) within `ms`. */
static bool peer_closed(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0)
        return false;
    char    c;
    ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno == ECONNRESET);
}

static void timer_noop(uv_timer_t *t)
{
    (void)t;
}

/* Run the loop for about `ms`; returns how many iterations it made (each one waited for an
 * event: a spinning acceptor makes thousands). */
static int run_for(uv_loop_t *loop, uint64_t ms)
{
    uv_timer_t t;
    uv_timer_init(loop, &t);
    uv_timer_start(&t, timer_noop, ms, 0);
    int      n = 0;
    uint64_t end = uv_now(loop) + ms;
    while (uv_now(loop) < end) {
        uv_run(loop, UV_RUN_ONCE);
        n++;
    }
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
    return n;
}

static void test_out_of_descriptors_closes_the_rest_and_recovers(void **state)
{
    (void)state;
    struct rlimit saved;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    struct sockaddr_in sa;
    int                lfd = listen_loopback(&sa);
    rtr_fd_reserve_init();
    rtr_acceptor_t acc = {0};
    assert_int_equal(rtr_acceptor_start(&acc, &loop, lfd, BASE_LOG_MOD_SERVER, NULL, on_accept),
                     0);
    int clients[N_CLIENTS];
    for (int i = 0; i < N_CLIENTS; i++)
        clients[i] = connect_to(&sa);

    /* FREE descriptor numbers below the limit: the acceptor can take that many */
    struct rlimit low = {.rlim_cur = limit_leaving(FREE), .rlim_max = saved.rlim_max};
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);

    int iterations = run_for(&loop, 300);
    assert_int_equal(n_accepted, FREE);
    assert_true(iterations < 50); /* no spinning: the loop waited for events */
    int closed = 0;
    for (int i = 0; i < N_CLIENTS; i++)
        closed += peer_closed(clients[i], 0);
    assert_int_equal(closed, N_CLIENTS - FREE); /* the rest were closed, not left waiting */

    /* descriptors come back: the next client is accepted */
    for (int i = 0; i < n_accepted; i++)
        close(accepted[i]);
    n_accepted = 0;
    for (int i = 0; i < N_CLIENTS; i++)
        close(clients[i]);
    int c = connect_to(&sa);
    run_for(&loop, 100);
    assert_int_equal(n_accepted, 1);
    close(accepted[0]);
    close(c);

    assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
    rtr_acceptor_close(&acc, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    close(lfd);
    rtr_fd_reserve_fini();
}

static void test_ratelimit_lets_one_line_through_per_period(void **state)
{
    (void)state;
    rtr_ratelimit_t rl = {0};
    uint64_t        held = 99;
    assert_true(rtr_ratelimit_pass(&rl, 1000, 10000, &held));
    assert_int_equal(held, 0);
    assert_false(rtr_ratelimit_pass(&rl, 1001, 10000, &held));
    assert_false(rtr_ratelimit_pass(&rl, 10999, 10000, &held));
    assert_true(rtr_ratelimit_pass(&rl, 11000, 10000, &held));
    assert_int_equal(held, 2);
    assert_false(rtr_ratelimit_pass(&rl, 11001, 10000, &held));
    assert_true(rtr_ratelimit_pass(&rl, 50000, 10000, &held));
    assert_int_equal(held, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_out_of_descriptors_closes_the_rest_and_recovers),
        cmocka_unit_test(test_ratelimit_lets_one_line_through_per_period),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
