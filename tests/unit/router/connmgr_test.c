/* tests/unit/router/connmgr_test.c: the connection manager (router/connmgr.c) on real
 * loopback sockets and a real libuv loop run by this thread as the main thread: configured
 * listeners bound at start, run-time listeners added and deleted from another thread (as
 * the agent does), a port in use refused in the caller's reply, a deleted listener gone from
 * the table and its port free for the next CREATE, and shutdown refusing new clients. */
#include "router/accept.h"
#include "router/connmgr.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

// clang-format off
#include <cmocka.h> /* after setjmp.h and stdarg.h */
// clang-format on

/* What the accept callback got. */
static int                   n_accepted;
static const cfg_listener_t *last_lc;

static void on_accept(void *ctx, const cfg_listener_t *lc, int fd)
{
    (void)ctx;
    n_accepted++;
    last_lc = lc;
    close(fd);
}

/* A loopback port nobody listens on now. */
static int free_port(void)
{
    int                fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    socklen_t sl = sizeof(sa);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

/* Connect to 127.0.0.1:port: 0, or the errno of the failure (ECONNREFUSED). */
static int try_connect(int port, int *out)
{
    int                fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        int e = errno;
        close(fd);
        return e;
    }
    *out = fd;
    return 0;
}

/* Run the loop until *count reaches want (or 5 s pass). */
static void run_until(uv_loop_t *loop, const int *count, int want)
{
    for (int i = 0; i < 500 && *count < want; i++) {
        uv_run(loop, UV_RUN_NOWAIT);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(*count, want);
}

/* Run the loop a few times, for what does not call back. */
static void run_a_while(uv_loop_t *loop)
{
    for (int i = 0; i < 10; i++) {
        uv_run(loop, UV_RUN_NOWAIT);
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static cfg_t *load(int port)
{
    char text[512], err[256];
    snprintf(text, sizeof(text),
             "[[\"router\", {\"id\": \"T1\"}],"
             " [\"listener\", {\"host\": \"127.0.0.1\", \"port\": \"%d\"}]]",
             port);
    cfg_t *cfg = NULL;
    assert_int_equal(cfg_load_string(text, "t", &cfg, err, sizeof(err)), 0);
    return cfg;
}

/* A run-time call on another thread, as the agent makes it. */
typedef struct call {
    rtr_connmgr_t        *m;
    const cfg_listener_t *add; /* add this one, or */
    long                  del; /* delete this id */
    long                  id;  /* add: what it returned */
    char                  err[256];
} call_t;

static void *call_main(void *arg)
{
    call_t *c = arg;
    if (c->add)
        c->id = rtr_connmgr_listener_add(c->m, c->add, c->err, sizeof(c->err));
    else
        rtr_connmgr_listener_del(c->m, c->del);
    return NULL;
}

static void call_on_thread(call_t *c)
{
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, call_main, c), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
}

static rtr_connmgr_state_t state_of(rtr_connmgr_t *m, long id)
{
    rtr_connmgr_info_t info;
    assert_true(rtr_connmgr_find(m, id, &info));
    assert_int_equal(info.kind, RTR_CONNMGR_LISTENER);
    return info.state;
}

static void test_listeners_life(void **state)
{
    (void)state;
    int            port = free_port();
    cfg_t         *cfg = load(port);
    char           err[256];
    rtr_connmgr_t *m = rtr_connmgr_new(cfg, err, sizeof(err));
    assert_non_null(m);
    assert_int_equal(rtr_connmgr_listener_id(0), 1);
    assert_int_equal(state_of(m, 1), RTR_CONNMGR_BOUND);

    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    rtr_connmgr_env_t env = {.loop = &loop, .accept = on_accept};
    assert_int_equal(rtr_connmgr_start(m, &env), 0);
    assert_int_equal(rtr_connmgr_listen(m), 0);
    assert_int_equal(state_of(m, 1), RTR_CONNMGR_ACCEPTING);

    /* the configured listener accepts, and says which listener it was */
    int c1 = -1;
    n_accepted = 0;
    assert_int_equal(try_connect(port, &c1), 0);
    run_until(&loop, &n_accepted, 1);
    assert_ptr_equal(last_lc, &cfg->listeners[0]);
    close(c1);

    /* CREATE on another thread: bound there, accepting once the main loop ran */
    int    port2 = free_port();
    cfg_t *cfg2 = load(port2);
    call_t add = {.m = m, .add = &cfg2->listeners[0]};
    call_on_thread(&add);
    assert_int_equal(add.id, 2);
    run_a_while(&loop);
    assert_int_equal(state_of(m, 2), RTR_CONNMGR_ACCEPTING);
    int c2 = -1;
    assert_int_equal(try_connect(port2, &c2), 0);
    run_until(&loop, &n_accepted, 2);
    assert_ptr_equal(last_lc, &cfg2->listeners[0]);
    close(c2);

    /* the same port again: refused in the caller's reply, nothing entered */
    call_t dup = {.m = m, .add = &cfg2->listeners[0]};
    call_on_thread(&dup);
    assert_int_equal(dup.id, -1);
    assert_non_null(strstr(dup.err, "Address already in use"));
    rtr_connmgr_info_t info;
    assert_false(rtr_connmgr_find(m, 3, &info));

    /* DELETE: gone from the table at once, the socket closed once the loop ran (clients
     * refused), the configured listener untouched */
    call_t del = {.m = m, .del = 2};
    call_on_thread(&del);
    assert_false(rtr_connmgr_find(m, 2, &info));
    run_a_while(&loop);
    assert_int_equal(try_connect(port2, &c2), ECONNREFUSED);
    assert_int_equal(state_of(m, 1), RTR_CONNMGR_ACCEPTING);
    /* an unknown id, and the same id again, change nothing */
    del.del = 2;
    call_on_thread(&del);
    del.del = 42;
    call_on_thread(&del);

    /* its entry freed and its port free: a second CREATE of the same listener works */
    call_t again = {.m = m, .add = &cfg2->listeners[0]};
    call_on_thread(&again);
    assert_int_equal(again.id, 3);
    run_a_while(&loop);
    assert_int_equal(state_of(m, 3), RTR_CONNMGR_ACCEPTING);
    assert_int_equal(try_connect(port2, &c2), 0);
    run_until(&loop, &n_accepted, 3);
    close(c2);

    /* shutdown: every listener refuses clients; one added afterwards is closed at once */
    rtr_connmgr_stop(m);
    assert_int_equal(state_of(m, 1), RTR_CONNMGR_STOPPED);
    assert_int_equal(state_of(m, 3), RTR_CONNMGR_STOPPED);
    assert_int_equal(try_connect(port, &c1), ECONNREFUSED);
    assert_int_equal(try_connect(port2, &c2), ECONNREFUSED);
    int    port3 = free_port();
    cfg_t *cfg3 = load(port3);
    call_t late = {.m = m, .add = &cfg3->listeners[0]};
    call_on_thread(&late);
    assert_int_equal(late.id, 4);
    run_a_while(&loop);
    assert_int_equal(state_of(m, 4), RTR_CONNMGR_STOPPED);
    assert_int_equal(try_connect(port3, &c1), ECONNREFUSED);
    /* deleted after the stop: its stopped acceptor's handles close, then it is freed */
    del.del = 1;
    call_on_thread(&del);
    run_a_while(&loop);
    assert_false(rtr_connmgr_find(m, 1, &info));
    assert_int_equal(n_accepted, 3);

    /* the main loop's end, as the server's: every handle closed, nothing left on the loop */
    rtr_loop_close_all(&loop);
    uv_run(&loop, UV_RUN_DEFAULT);
    rtr_connmgr_free(m);
    assert_int_equal(uv_loop_close(&loop), 0);
    cfg_free(cfg);
    cfg_free(cfg2);
    cfg_free(cfg3);
}

/* A configured listener whose port is taken stops start-up with one line, and nothing of
 * the other listeners stays open. */
static void test_port_in_use(void **state)
{
    (void)state;
    int                port = free_port();
    int                hold = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(hold, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(hold, 8), 0);
    int  first = free_port();
    char text[512], err[256];
    snprintf(text, sizeof(text),
             "[[\"router\", {\"id\": \"T1\"}],"
             " [\"listener\", {\"host\": \"127.0.0.1\", \"port\": \"%d\"}],"
             " [\"listener\", {\"host\": \"127.0.0.1\", \"port\": \"%d\"}]]",
             first, port);
    cfg_t *cfg = NULL;
    assert_int_equal(cfg_load_string(text, "t", &cfg, err, sizeof(err)), 0);
    err[0] = '\0';
    assert_null(rtr_connmgr_new(cfg, err, sizeof(err)));
    char want[128];
    snprintf(want, sizeof(want), "Cannot listen on 127.0.0.1:%d: Address already in use", port);
    assert_string_equal(err, want);
    int c = -1;
    assert_int_equal(try_connect(first, &c), ECONNREFUSED); /* the first one was closed */
    close(hold);
    cfg_free(cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_listeners_life),
        cmocka_unit_test(test_port_in_use),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
