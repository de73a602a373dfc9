/* tests/unit/router/conn_test.c: one connection through the router's data path, in-process
 * and without a daemon - a core and ONE worker built here with their context (router/ctx.h),
 * no server, listener, agent or admin thread - driven by a Proton client on the test's thread.
 *
 * The client is a pn_connection_driver_t over one end of a socketpair, pumped by a poll()
 * loop; the other end goes to the worker as an accepted connection of a listener from a
 * configuration parsed here (RTR_EXT_ACCEPT, as the server's accept callback posts it).  The
 * client attaches a receiver on "q" and a sender to "q", sends three messages (the last one
 * large enough to be routed early and streamed) and checks that each arrives with its body
 * intact, that the sender's deliveries are ACCEPTED once the receiver accepted them, and
 * that the worker frees the connection and its links when the client closes (the registry's
 * connectionCount and linkCount, which the worker and the core keep, go back to zero).  The
 * router is then stopped as on SIGTERM and everything is freed (run under ASan/LSan in the
 * sanitizer build).
 *
 * Threads: the test's (main) thread runs the client; the worker and the core run their own.
 * The test reads the router's state only through the stats registry (thread-safe).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "router/worker.h"

#include "config/config.h"
#include "core/base/base.h"
#include "core/base/log.h"
#include "core/core.h"

#include <proton/connection.h>
#include <proton/connection_driver.h>
#include <proton/delivery.h>
#include <proton/event.h>
#include <proton/link.h>
#include <proton/message.h>
#include <proton/sasl.h>
#include <proton/session.h>
#include <proton/terminus.h>
#include <proton/transport.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char CONFIG[] =
    "[[\"router\", {\"id\": \"Unit.A\", \"workerThreads\": 1, \"shutdownGraceSeconds\": 0}],"
    " [\"listener\", {\"host\": \"127.0.0.1\", \"port\": \"0\", \"idleTimeoutSeconds\": 0}]]";

#define N_MSGS     3
#define BIG_BODY   (300u << 10) /* past the router's streaming threshold (256 KiB) */
#define WAIT_MS    10000

/* ---------------------------------------------------------------- the router, in-process */

typedef struct router {
    cfg_t            *cfg;
    stats_registry_t *reg;
    core_stats_t      stats;
    rtr_ctx_t         ctx;
    rtr_worker_t      worker;
    base_mpsc_t      *queues[1];
    core_t           *core;
} router_t;

static router_t *router_start(void)
{
    router_t *r = calloc(1, sizeof(*r));
    char err[512];
    if (cfg_load_string(CONFIG, "conn_test.json", &r->cfg, err, sizeof(err)) != 0)
        fail_msg("config: %s", err);
    r->reg = stats_registry_new();
    assert_int_equal(core_stats_families_new(r->reg, &r->stats), 0);
    rtr_ctx_init(&r->ctx, r->cfg, &r->stats, &r->worker, 1);
    r->queues[0] = &r->worker.inbox;
    r->core = core_new(r->cfg, &r->stats, 1, r->queues);
    assert_non_null(r->core);
    assert_int_equal(rtr_worker_init(&r->worker, &r->ctx, 0, r->core), 0);
    assert_int_equal(core_start(r->core), 0);
    assert_int_equal(rtr_worker_start(&r->worker), 0);
    return r;
}

/* Stop as the server does on SIGTERM: the worker closes what is left and stops once the
 * core answered for it, then the core stops; then everything is freed. */
static void router_stop(router_t *r)
{
    rtr_worker_post_ext(&r->worker, RTR_EXT_SHUTDOWN, NULL, 0);
    rtr_worker_join(&r->worker);
    core_stop(r->core);
    rtr_worker_fini(&r->worker);
    core_free(r->core);
    rtr_ctx_fini(&r->ctx);
    stats_registry_free(r->reg);
    cfg_free(r->cfg);
    free(r);
}

/* A gauge of the router entity ("connectionCount", "linkCount"), read from the registry. */
static int64_t router_gauge(router_t *r, const char *field)
{
    char name[64];
    snprintf(name, sizeof(name), "router.%s", field);
    stats_handle_t h;
    stats_kind_t kind;
    assert_int_equal(stats_lookup(r->reg, name, &h, &kind), 0);
    stats_value_t v;
    assert_int_equal(stats_value_get(r->reg, h, &v), 0);
    return (int64_t)v.value;
}

/* Hand one end of a new socketpair to the worker as an accepted connection of the
 * configuration's listener; returns the other end (the client's). */
static int router_connect(router_t *r)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    rtr_worker_post_ext(&r->worker, RTR_EXT_ACCEPT, (void *)&r->cfg->listeners[0], sv[1]);
    return sv[0];
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Wait until the router's gauge `field` is `want`. */
static void router_wait_gauge(router_t *r, const char *field, int64_t want)
{
    uint64_t end = now_ms() + WAIT_MS;
    int64_t v;
    while ((v = router_gauge(r, field)) != want && now_ms() < end)
        usleep(10000);
    if (v != want)
        fail_msg("router.%s is %lld, expected %lld", field, (long long)v, (long long)want);
}

/* ---------------------------------------------------------------- the client */

typedef struct client {
    int                    fd;        /* our end of the socketpair */
    pn_connection_driver_t d;         /* Proton, driven by client_step() */
    pn_link_t             *snd;       /* sender to "q" */
    pn_link_t             *rcv;       /* receiver on "q" */
    char                  *body[N_MSGS]; /* what we send */
    size_t                 body_len[N_MSGS];
    int                    n_sent;    /* messages handed to Proton */
    char                  *in;        /* the message being received */
    size_t                 in_len;
    size_t                 in_cap;
    char                  *got[N_MSGS]; /* bodies received, in order */
    size_t                 got_len[N_MSGS];
    int                    n_got;
    int                    n_accepted; /* our deliveries the router settled as ACCEPTED */
    int                    n_other;    /* ... settled with any other outcome */
    bool                   opened;    /* the router's open arrived */
    bool                   rcv_open;  /* the router answered the receiver's attach */
    bool                   snd_open;  /* ... and the sender's */
    bool                   closed;    /* the router's close arrived */
} client_t;

static void client_init(client_t *cl, int fd, int n_send)
{
    memset(cl, 0, sizeof(*cl));
    cl->fd = fd;
    pn_transport_t *t = pn_transport();
    pn_sasl_allowed_mechs(pn_sasl(t), "ANONYMOUS");
    assert_int_equal(pn_connection_driver_init(&cl->d, pn_connection(), t), 0);
    pn_connection_set_container(cl->d.connection, "conn_test");
    for (int i = 0; i < n_send; i++) {
        /* distinct bytes in every message, so a copy mixed up or cut short shows */
        size_t len = i == N_MSGS - 1 ? BIG_BODY : 100u + (size_t)i * 1000u;
        cl->body[i] = malloc(len);
        for (size_t j = 0; j < len; j++)
            cl->body[i][j] = (char)('a' + (j * 7 + (size_t)i * 3) % 26);
        cl->body_len[i] = len;
    }
}

static void client_fini(client_t *cl)
{
    pn_connection_driver_destroy(&cl->d);
    if (cl->fd >= 0)
        close(cl->fd);
    for (int i = 0; i < N_MSGS; i++) {
        free(cl->body[i]);
        free(cl->got[i]);
    }
    free(cl->in);
}

/* Encode message i (body an AMQP string, to "q"): a heap buffer, *len bytes. */
static char *message_encode(const client_t *cl, int i, size_t *len)
{
    pn_message_t *m = pn_message();
    pn_message_set_address(m, "q");
    pn_data_put_string(pn_message_body(m), pn_bytes(cl->body_len[i], cl->body[i]));
    size_t cap = cl->body_len[i] + 1024;
    char *buf = malloc(cap);
    *len = cap;
    assert_int_equal(pn_message_encode(m, buf, len), 0);
    pn_message_free(m);
    return buf;
}

/* Send what the sender's credit allows of the messages not sent yet. */
static void client_send(client_t *cl)
{
    while (cl->snd && cl->n_sent < N_MSGS && cl->body[cl->n_sent] &&
           pn_link_credit(cl->snd) > 0) {
        char tag[8];
        snprintf(tag, sizeof(tag), "t%d", cl->n_sent);
        pn_delivery(cl->snd, pn_dtag(tag, strlen(tag)));
        size_t len;
        char *buf = message_encode(cl, cl->n_sent, &len);
        assert_int_equal(pn_link_send(cl->snd, buf, len), (ssize_t)len);
        free(buf);
        pn_link_advance(cl->snd);
        cl->n_sent++;
    }
}

/* A delivery on our receiver: gather its bytes; once complete, keep its body and accept it. */
static void client_receive(client_t *cl, pn_delivery_t *dl)
{
    static char done; /* the context of a delivery taken already */
    pn_link_t *l = pn_delivery_link(dl);
    /* Proton may have queued two PN_DELIVERY events for one delivery (its frames came in one
     * read, another event between them): the second finds it settled and taken */
    if (pn_delivery_get_context(dl) == &done)
        return;
    for (;;) {
        size_t pending = pn_delivery_pending(dl);
        if (pending == 0)
            break;
        if (cl->in_cap - cl->in_len < pending) {
            cl->in_cap = cl->in_len + pending;
            cl->in = realloc(cl->in, cl->in_cap);
        }
        ssize_t n = pn_link_recv(l, cl->in + cl->in_len, pending);
        if (n <= 0)
            break;
        cl->in_len += (size_t)n;
    }
    if (pn_delivery_partial(dl))
        return;
    assert_true(cl->n_got < N_MSGS);
    pn_message_t *m = pn_message();
    assert_int_equal(pn_message_decode(m, cl->in, cl->in_len), 0);
    pn_data_t *body = pn_message_body(m);
    pn_data_rewind(body);
    assert_true(pn_data_next(body));
    assert_int_equal(pn_data_type(body), PN_STRING);
    pn_bytes_t b = pn_data_get_string(body);
    cl->got[cl->n_got] = malloc(b.size ? b.size : 1);
    memcpy(cl->got[cl->n_got], b.start, b.size);
    cl->got_len[cl->n_got++] = b.size;
    pn_message_free(m);
    cl->in_len = 0;
    pn_link_advance(l);
    pn_delivery_set_context(dl, &done);
    pn_delivery_update(dl, PN_ACCEPTED);
    pn_delivery_settle(dl);
}

static void client_event(client_t *cl, pn_event_t *e)
{
    switch (pn_event_type(e)) {
    case PN_CONNECTION_REMOTE_OPEN:
        cl->opened = true;
        break;
    case PN_CONNECTION_REMOTE_CLOSE:
        cl->closed = true;
        break;
    case PN_LINK_REMOTE_OPEN:
        if (pn_event_link(e) == cl->rcv)
            cl->rcv_open = true;
        if (pn_event_link(e) == cl->snd)
            cl->snd_open = true;
        break;
    case PN_DELIVERY: {
        pn_delivery_t *dl = pn_event_delivery(e);
        if (pn_delivery_link(dl) == cl->rcv) {
            client_receive(cl, dl);
        } else if (pn_delivery_settled(dl)) { /* the router settled one of ours */
            if (pn_delivery_remote_state(dl) == PN_ACCEPTED)
                cl->n_accepted++;
            else
                cl->n_other++;
            pn_delivery_settle(dl);
        }
        break;
    }
    default:
        break;
    }
}

/* One round: Proton's events, our sends, writes, then up to wait_ms for the router's bytes. */
static void client_step(client_t *cl, int wait_ms)
{
    pn_event_t *e;
    while ((e = pn_connection_driver_next_event(&cl->d)) != NULL)
        client_event(cl, e);
    client_send(cl);
    while ((e = pn_connection_driver_next_event(&cl->d)) != NULL)
        client_event(cl, e);
    for (;;) {
        pn_bytes_t wb = pn_connection_driver_write_buffer(&cl->d);
        if (wb.size == 0)
            break;
        ssize_t n = write(cl->fd, wb.start, wb.size);
        if (n > 0) {
            pn_connection_driver_write_done(&cl->d, (size_t)n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            break;
        pn_connection_driver_write_close(&cl->d);
        break;
    }
    bool want_read = !pn_connection_driver_read_closed(&cl->d);
    bool want_write = pn_connection_driver_write_buffer(&cl->d).size > 0;
    struct pollfd p = {.fd = cl->fd,
                       .events = (short)((want_read ? POLLIN : 0) | (want_write ? POLLOUT : 0))};
    if (poll(&p, 1, wait_ms) <= 0 || !want_read || !(p.revents & (POLLIN | POLLHUP | POLLERR)))
        return;
    pn_rwbytes_t rb = pn_connection_driver_read_buffer(&cl->d);
    if (rb.size == 0)
        return;
    ssize_t n = read(cl->fd, rb.start, rb.size);
    if (n > 0)
        pn_connection_driver_read_done(&cl->d, (size_t)n);
    else if (n == 0 || (errno != EAGAIN && errno != EINTR))
        pn_connection_driver_read_close(&cl->d);
}

/* Pump the client until cond(cl) holds (or fail after WAIT_MS, naming `what`). */
static void client_until(client_t *cl, bool (*cond)(const client_t *), const char *what)
{
    uint64_t end = now_ms() + WAIT_MS;
    while (!cond(cl)) {
        if (now_ms() > end)
            fail_msg("timed out waiting for %s (sent %d, received %d, accepted %d, other %d)",
                     what, cl->n_sent, cl->n_got, cl->n_accepted, cl->n_other);
        client_step(cl, 20);
    }
}

static bool links_open(const client_t *cl)
{
    return cl->opened && cl->rcv_open && cl->snd_open;
}

static bool all_settled(const client_t *cl)
{
    return cl->n_got == N_MSGS && cl->n_accepted + cl->n_other == N_MSGS;
}

static bool finished(const client_t *cl)
{
    return pn_connection_driver_finished((pn_connection_driver_t *)&cl->d);
}

/* Open the connection, a session, a receiver on "q" (with credit) and a sender to "q". */
static void client_attach(client_t *cl)
{
    pn_connection_open(cl->d.connection);
    pn_session_t *s = pn_session(cl->d.connection);
    pn_session_open(s);
    cl->rcv = pn_receiver(s, "rcv");
    pn_terminus_set_address(pn_link_source(cl->rcv), "q");
    pn_link_open(cl->rcv);
    pn_link_flow(cl->rcv, 10);
    cl->snd = pn_sender(s, "snd");
    pn_terminus_set_address(pn_link_target(cl->snd), "q");
    pn_link_open(cl->snd);
    client_until(cl, links_open, "the router's open and attaches");
}

/* ---------------------------------------------------------------- tests */

static int group_setup(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    base_thread_set_role(BASE_THREAD_MAIN, 0);
    uint8_t mask = 0;
    if (base_log_parse_enable(getenv("JUNCTION_TEST_LOG") ? getenv("JUNCTION_TEST_LOG")
                                                          : "critical+",
                              &mask) != 0)
        return -1;
    base_log_set_mask(BASE_LOG_MOD_DEFAULT, mask);
    base_log_finish_config();
    return 0;
}

/* Three messages from our sender to our receiver through the worker and the core: each
 * arrives whole and in order, each is ACCEPTED back to the sender once the receiver accepted
 * it, and closing the connection frees it and its links. */
static void test_route_settle_close(void **state)
{
    (void)state;
    router_t *r = router_start();
    client_t cl;
    client_init(&cl, router_connect(r), N_MSGS);
    client_attach(&cl);
    router_wait_gauge(r, "connectionCount", 1);
    router_wait_gauge(r, "linkCount", 2);

    client_until(&cl, all_settled, "three messages received and settled");
    for (int i = 0; i < N_MSGS; i++) {
        assert_int_equal(cl.got_len[i], cl.body_len[i]);
        assert_memory_equal(cl.got[i], cl.body[i], cl.body_len[i]);
    }
    assert_int_equal(cl.n_accepted, N_MSGS);
    assert_int_equal(cl.n_other, 0);

    pn_connection_close(cl.d.connection);
    client_until(&cl, finished, "the router's close and the end of the socket");
    assert_true(cl.closed);
    router_wait_gauge(r, "connectionCount", 0);
    router_wait_gauge(r, "linkCount", 0);
    client_fini(&cl);
    router_stop(r);
}

/* A client that goes away without a close frame (its socket just ends) is freed all the
 * same, links included. */
static void test_socket_end_frees(void **state)
{
    (void)state;
    router_t *r = router_start();
    client_t cl;
    client_init(&cl, router_connect(r), 0);
    client_attach(&cl);
    router_wait_gauge(r, "connectionCount", 1);
    router_wait_gauge(r, "linkCount", 2);
    close(cl.fd);
    cl.fd = -1;
    router_wait_gauge(r, "connectionCount", 0);
    router_wait_gauge(r, "linkCount", 0);
    client_fini(&cl);
    router_stop(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route_settle_close),
        cmocka_unit_test(test_socket_end_frees),
    };
    return cmocka_run_group_tests(tests, group_setup, NULL);
}
