/* router/worker.c: a worker thread - one libuv loop that owns a set of connections (worker.h).
 * Above the connection's layers: it calls them through conn.h.
 *
 * Thread suffixes: _WT = the owning worker only.  rtr_worker_init/start/join/fini run on the
 * thread that owns the workers (the main thread).
 *
 * DESIGN: the worker's inbox is an MPSC batch queue (core/base/mpsc.h) whose wake-up is the
 * loop's uv_async_t, so any number of posts between two loop iterations cost one wake-up.
 * Actions for the core are collected in `to_core` while callbacks run and pushed once per
 * loop iteration from a uv_prepare_t (run right before the loop polls for I/O).
 *
 * Shutdown (RTR_EXT_SHUTDOWN): the worker stops granting credit and taking connections, and
 * checks after every loop iteration whether anything is still in flight (incoming deliveries
 * not answered, outgoing copies not settled); when nothing is, or when its grace timer fires
 * (what is left is then released to its senders), it closes every connection, and its loop
 * stops once the core has answered for all of them.
 */
#include "router/worker.h"

#include "router/accept.h"
#include "router/linkroute.h"

#include "core/linkroute.h"
#include "router/conn.h"
#include "router/edgeconn.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void maybe_close_all_WT(rtr_worker_t *w);

static void wake_cb(void *ctx)
{
    rtr_worker_t *w = ctx;
    uv_async_send(&w->wake);
}

static void flush_cb(uv_prepare_t *h)
{
    rtr_worker_t *w = h->data;
    rtr_conn_process_dirty_WT(w);
    maybe_close_all_WT(w);
    if (!base_mpsc_batch_empty(&w->to_core))
        core_post(w->core, &w->to_core);
}

static void sweep_cb(uv_timer_t *t)
{
    rtr_conn_sweep_WT(t->data);
    rtr_edge_sweep_WT(t->data); /* edge mode's heartbeats (router/edgeconn.c) */
}

/* Shutdown, once nothing is in flight or the grace period is over: close every connection
 * (links report their copies to the core, which answers for them; then the loop stops). */
static void close_all_WT(rtr_worker_t *w)
{
    w->closing_all = true;
    uv_timer_stop(&w->grace);
    for (rtr_conn_t *c = w->conns; c; c = c->next)
        rtr_conn_close_WT(c); /* frees nothing now: the uv_close callbacks do */
    rtr_worker_maybe_exit_WT(w);
}

/* Shutdown: once nothing is in flight (or the grace period is over), close every
 * connection. */
static void maybe_close_all_WT(rtr_worker_t *w)
{
    if (!w->stopping || w->closing_all || w->n_ins || w->n_outs)
        return;
    close_all_WT(w);
}

static void grace_cb(uv_timer_t *t)
{
    rtr_worker_t *w = t->data;
    if (w->closing_all)
        return;
    if (w->n_ins || w->n_outs)
        base_log(BASE_LOG_MOD_SERVER, BASE_LOG_NOTICE,
                 "Shutdown grace period over: releasing %zu deliveries still in flight, "
                 "%zu copies unsettled", w->n_ins, w->n_outs);
    rtr_conn_release_all_WT(w);
    close_all_WT(w);
}

/* RTR_EXT_SHUTDOWN: stop granting credit and taking connections; close everything once
 * nothing is in flight, or after grace_ms with what is left released. */
static void shutdown_WT(rtr_worker_t *w, uint64_t grace_ms)
{
    if (w->stopping)
        return;
    w->stopping = true;
    rtr_conn_quiesce_WT(w);
    uv_timer_start(&w->grace, grace_cb, grace_ms, 0);
    maybe_close_all_WT(w);
}

/* Work from another thread than the core (RTR_EXT_*). */
static void ext_work_WT(rtr_worker_t *w, core_work_t *work)
{
    switch (work->u.ext.kind) {
    case RTR_EXT_ACCEPT:
        rtr_conn_accept_WT(w, (int)work->u.ext.arg, work->u.ext.ptr, NULL);
        break;
    case RTR_EXT_ACCEPT_WS: {
        rtr_accept_t *acc = work->u.ext.ptr;
        rtr_conn_accept_WT(w, (int)work->u.ext.arg, acc->listener, acc);
        free(acc);
        break;
    }
    case RTR_EXT_CONNECT:
        rtr_conn_connect_WT(w, (int)work->u.ext.arg, work->u.ext.ptr);
        break;
    case RTR_EXT_STREAM:
        rtr_on_stream_wake_WT(w);
        break;
    case RTR_EXT_CLOSE_CONN:
        rtr_conn_close_id_WT(w, (uint64_t)work->u.ext.arg);
        break;
    case RTR_EXT_SHUTDOWN:
        shutdown_WT(w, (uint64_t)work->u.ext.arg);
        break;
    case RTR_EXT_LR:
        rtr_lr_msg_WT(w, work->u.ext.ptr);
        break;
    }
}

static void work_cb(void *arg, void *item)
{
    rtr_worker_t *w = arg;
    core_work_t *work = item;
    if (work->type == CORE_W_EXTERNAL)
        ext_work_WT(w, work);
    else
        rtr_conn_work_WT(w, work);
}

static void async_cb(uv_async_t *h)
{
    rtr_worker_t *w = h->data;
    base_mpsc_drain(&w->inbox, work_cb, w);
    rtr_conn_process_dirty_WT(w);
    maybe_close_all_WT(w);
    rtr_worker_maybe_exit_WT(w);
}

static void worker_main(void *arg)
{
    rtr_worker_t *w = arg;
    base_thread_set_role(BASE_THREAD_WORKER, w->index);
    char name[16];
    snprintf(name, sizeof(name), "junction-w%d", w->index);
    pthread_setname_np(pthread_self(), name);
    w->shard = stats_shard_new(w->ctx->stats->reg);
    uv_run(&w->loop, UV_RUN_DEFAULT);
    stats_shard_free(w->ctx->stats->reg, w->shard);
    w->shard = NULL;
}

int rtr_worker_init(rtr_worker_t *w, rtr_ctx_t *ctx, int index, core_t *core)
{
    memset(w, 0, sizeof(*w));
    w->index = index;
    w->ctx = ctx;
    w->core = core;
    int rc = uv_loop_init(&w->loop);
    if (rc)
        return rc;
    rtr_fd_loop_reserve_init(&w->loop);
    uv_async_init(&w->loop, &w->wake, async_cb);
    w->wake.data = w;
    uv_prepare_init(&w->loop, &w->flush);
    w->flush.data = w;
    uv_prepare_start(&w->flush, flush_cb);
    uv_timer_init(&w->loop, &w->sweep);
    w->sweep.data = w;
    uv_timer_start(&w->sweep, sweep_cb, 1000, 1000);
    uv_timer_init(&w->loop, &w->grace);
    w->grace.data = w;
    base_mpsc_init(&w->inbox, wake_cb, w);
    return 0;
}

int rtr_worker_start(rtr_worker_t *w)
{
    return uv_thread_create(&w->thread, worker_main, w);
}

void rtr_worker_join(rtr_worker_t *w)
{
    uv_thread_join(&w->thread);
}

/* Work left in the inbox of a worker that stopped: link-routed links' messages (one end
 * went during shutdown after the other end's worker stopped) and routing messages the core
 * posted to an inter-router connection in its last tick are freed. */
static void leftover_cb(void *arg, void *item)
{
    core_work_t *work = item;
    (void)arg;
    if (work->type == CORE_W_EXTERNAL && work->u.ext.kind == RTR_EXT_LR)
        rtr_lr_msg_drop(work->u.ext.ptr);
    else if (work->type == CORE_W_LINK_ATTACHED)
        core_lr_target_free(work->u.attached.routed);
    else if (work->type == CORE_W_RT_SEND)
        free(work->u.rt_send.bytes);
    else if (work->type == CORE_W_EDGE)
        free(work->u.edge.key);
}

void rtr_worker_fini(rtr_worker_t *w)
{
    uv_loop_close(&w->loop);
    base_mpsc_drain(&w->inbox, leftover_cb, w);
    base_mpsc_fini(&w->inbox);
}
