/* tests/unit/router/zin_test.c: the zero-copy input (router/zin.c) between a real Proton
 * client and the router's Proton server side, joined in memory: the client's bytes go through
 * the connection's read buffers, the frame guard's split mode and the payload queues, in
 * reads of every size from 1 byte up, and the server reads each delivery with
 * rtr_link_recv_WT / rtr_delivery_pending_WT.  Every message must arrive whole, aborted
 * deliveries must leave no bytes behind, and the queues must hold nothing at the end.
 *
 * Threads: the test's own (it plays the connection's worker).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "router/transport.h"
#include "router/zin.h"

#include <proton/connection.h>
#include <proton/connection_driver.h>
#include <proton/delivery.h>
#include <proton/event.h>
#include <proton/link.h>
#include <proton/session.h>
#include <proton/transport.h>

#define N_MSGS  40
#define MSG_MAX (40u << 10)

static void *guard_mem(void *p, size_t n)
{
    if (n == 0) {
        free(p);
        return NULL;
    }
    void *q = realloc(p, n);
    assert_non_null(q);
    return q;
}

typedef struct run {
    rtr_conn_t             c;          /* the router's side (only what zin.c reads) */
    pn_connection_driver_t cl;         /* the client */
    pn_link_t             *snd;        /* the client's sender */
    uint8_t               *msgs[N_MSGS]; /* what the client sends (NULL: aborted) */
    size_t                 lens[N_MSGS];
    int                    n_sent;     /* deliveries the client began */
    bool                   abort_next; /* the client aborts the delivery it sends next */
    uint8_t                got[MSG_MAX]; /* the delivery being received */
    size_t                 got_len;
    int                    n_got;      /* messages received whole */
    int                    n_aborted;  /* aborted deliveries the server saw */
    int                    expect[N_MSGS]; /* the messages that must arrive, in order */
    int                    n_expect;
    uint32_t               seed;       /* read sizes */
    uint32_t               max_frame;  /* the router's */
} run_t;

static uint32_t rnd(run_t *r)
{
    r->seed = r->seed * 1103515245u + 12345u;
    return r->seed >> 8;
}

/* The client's bytes into the router, in reads of random sizes. */
static bool client_to_router(run_t *r)
{
    pn_bytes_t wb = pn_connection_driver_write_buffer(&r->cl);
    size_t     done = 0;
    while (done < wb.size) {
        char  *base;
        size_t len;
        rtr_zin_alloc_WT(&r->c, &base, &len);
        if (len == 0) {
            if (!rtr_zin_push_WT(&r->c))
                break; /* Proton's input is full: later */
            continue;
        }
        size_t n = 1 + rnd(r) % 3000;
        if (n > len)
            n = len;
        if (n > wb.size - done)
            n = wb.size - done;
        memcpy(base, wb.start + done, n);
        assert_int_equal(rtr_zin_read_WT(&r->c, n), 0);
        done += n;
    }
    pn_connection_driver_write_done(&r->cl, done);
    return done > 0;
}

static bool router_to_client(run_t *r)
{
    pn_bytes_t   wb = pn_connection_driver_write_buffer(&r->c.driver);
    pn_rwbytes_t rb = pn_connection_driver_read_buffer(&r->cl);
    size_t       n = wb.size < rb.size ? wb.size : rb.size;
    if (n == 0)
        return false;
    memcpy(rb.start, wb.start, n);
    pn_connection_driver_read_done(&r->cl, n);
    pn_connection_driver_write_done(&r->c.driver, n);
    return true;
}

/* The router's side of a delivery event, as link_in.c reads one. */
static void server_delivery(run_t *r, pn_delivery_t *d)
{
    pn_link_t *pl = pn_delivery_link(d);
    if (d != pn_link_current(pl))
        return;
    if (pn_delivery_aborted(d)) {
        assert_int_equal(rtr_link_recv_WT(pl, (char *)r->got, 1), PN_ABORTED);
        r->n_aborted++;
        r->got_len = 0;
        pn_delivery_settle(d);
        pn_link_flow(pl, 1);
        return;
    }
    size_t pending;
    while ((pending = rtr_delivery_pending_WT(d)) > 0) {
        assert_true(r->got_len + pending <= MSG_MAX);
        ssize_t n = rtr_link_recv_WT(pl, (char *)r->got + r->got_len, pending);
        assert_int_equal(n, (ssize_t)pending);
        r->got_len += (size_t)n;
    }
    if (pn_delivery_partial(d)) {
        assert_int_equal(rtr_link_recv_WT(pl, (char *)r->got, 16), 0);
        return;
    }
    assert_int_equal(rtr_link_recv_WT(pl, (char *)r->got, 16), PN_EOS);
    assert_true(r->n_got < r->n_expect);
    int k = r->expect[r->n_got++];
    assert_int_equal(r->got_len, r->lens[k]);
    assert_memory_equal(r->got, r->msgs[k], r->got_len);
    r->got_len = 0;
    pn_link_advance(pl); /* before the settle, which would advance past the next one */
    pn_delivery_update(d, PN_ACCEPTED);
    pn_delivery_settle(d);
    pn_link_flow(pl, 1);
}

static void server_events(run_t *r)
{
    pn_event_t *e;
    while ((e = pn_connection_driver_next_event(&r->c.driver))) {
        switch (pn_event_type(e)) {
        case PN_CONNECTION_REMOTE_OPEN:
            pn_connection_open(pn_event_connection(e));
            break;
        case PN_SESSION_REMOTE_OPEN:
            pn_session_set_incoming_capacity(pn_event_session(e), 4 * r->max_frame);
            pn_session_open(pn_event_session(e));
            break;
        case PN_LINK_REMOTE_OPEN:
            pn_link_open(pn_event_link(e));
            pn_link_flow(pn_event_link(e), 3);
            break;
        case PN_DELIVERY:
            rtr_zin_delivery_event_WT(&r->c, pn_event_delivery(e));
            server_delivery(r, pn_event_delivery(e));
            break;
        default:
            break;
        }
    }
    rtr_zin_sweep_WT(&r->c);
}

/* The client: sends N_MSGS messages as credit comes; every fifth is aborted half way. */
static void client_events(run_t *r)
{
    pn_event_t *e;
    while ((e = pn_connection_driver_next_event(&r->cl))) {
        if (pn_event_type(e) == PN_CONNECTION_INIT) {
            pn_connection_t *pc = pn_event_connection(e);
            pn_connection_open(pc);
            pn_session_t *s = pn_session(pc);
            pn_session_open(s);
            r->snd = pn_sender(s, "zin-sender");
            pn_link_open(r->snd);
        }
    }
    while (r->snd && !r->abort_next && r->n_sent < N_MSGS && pn_link_credit(r->snd) > 0 &&
           pn_session_outgoing_bytes(pn_link_session(r->snd)) == 0) {
        int  k = r->n_sent++;
        char tag[16];
        snprintf(tag, sizeof(tag), "t%d", k);
        pn_delivery_t *d = pn_delivery(r->snd, pn_dtag(tag, strlen(tag)));
        if (k % 5 == 4) {
            pn_link_send(r->snd, (const char *)r->msgs[k], r->lens[k] / 2);
            r->abort_next = true; /* once these bytes are out */
            break;
        }
        pn_link_send(r->snd, (const char *)r->msgs[k], r->lens[k]);
        pn_link_advance(r->snd);
        pn_delivery_settle(d);
        r->expect[r->n_expect++] = k;
    }
    if (r->abort_next && pn_session_outgoing_bytes(pn_link_session(r->snd)) == 0) {
        r->abort_next = false;
        pn_delivery_abort(pn_link_current(r->snd));
    }
}

static void run_once(uint32_t seed, uint32_t max_frame)
{
    run_t *r = calloc(1, sizeof(*r));
    r->seed = seed;
    r->max_frame = max_frame;
    for (int k = 0; k < N_MSGS; k++) {
        r->lens[k] = (k * 7919u + seed) % MSG_MAX;
        if (k % 7 == 0)
            r->lens[k] = k % 3; /* empty and tiny ones too */
        r->msgs[k] = malloc(r->lens[k] + 1);
        for (size_t i = 0; i < r->lens[k]; i++)
            r->msgs[k][i] = (uint8_t)(rnd(r) ^ (uint32_t)k);
    }
    pn_transport_t *st = pn_transport();
    pn_transport_set_server(st);
    pn_transport_set_max_frame(st, max_frame);
    assert_int_equal(pn_connection_driver_init(&r->c.driver, pn_connection(), st), 0);
    codec_guard_init(&r->c.guard, max_frame, guard_mem);
    rtr_zin_init_WT(&r->c);
    assert_int_equal(pn_connection_driver_init(&r->cl, pn_connection(), pn_transport()), 0);

    for (int i = 0; i < 200000 && r->n_got + r->n_aborted < N_MSGS; i++) {
        client_events(r);
        bool moved = client_to_router(r);
        if (rtr_zin_stalled(&r->c.zin))
            rtr_zin_push_WT(&r->c);
        server_events(r);
        moved |= router_to_client(r);
        (void)moved;
    }
    if (r->n_got != N_MSGS - N_MSGS / 5)
        fprintf(stderr, "seed %u frame %u: got %d aborted %d sent %d queued %zu stalled %d\n", seed, max_frame, r->n_got, r->n_aborted, r->n_sent, r->c.zin.queued, rtr_zin_stalled(&r->c.zin));
    assert_int_equal(r->n_got, N_MSGS - N_MSGS / 5);
    assert_int_equal(r->n_aborted, N_MSGS / 5);
    assert_int_equal(r->c.zin.queued, 0);
    assert_false(r->c.guard.failed);

    rtr_zin_fini_WT(&r->c);
    codec_guard_fini(&r->c.guard);
    pn_connection_driver_destroy(&r->c.driver);
    pn_connection_driver_destroy(&r->cl);
    for (int k = 0; k < N_MSGS; k++)
        free(r->msgs[k]);
    free(r);
}

static void test_messages_whole_in_any_reads(void **state)
{
    (void)state;
    for (uint32_t seed = 1; seed <= 6; seed++) {
        run_once(seed, 512);
        run_once(seed * 31, 4096);
        run_once(seed * 77, 65536);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_messages_whole_in_any_reads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
