/* router/mgmt/agent.c: the management agent's thread (see agent.h): a libuv loop whose
 * inbox is a core queue, three links at the core, requests in, replies out.
 *
 * Threads: mgmt_agent_new/start/stop/free on the main thread; addr_add_CT/addr_del_CT on
 * the core thread (through core_call()); every other function in this file is a callback
 * of the agent's loop and runs on the agent thread (unsuffixed).  Cross-thread traffic: the
 * core's work arrives on the inbox (base_mpsc + uv_async wake-up); actions for the core are
 * gathered during a loop iteration and pushed once from a uv_prepare_t, as a worker does;
 * address changes go to the core with core_call(), listener changes to the connection
 * manager (rtr_connmgr_listener_*), connection closes to the workers (RTR_EXT_CLOSE_CONN).
 *
 * Ownership: a request's content reference (CORE_W_SEND) is dropped once answered.  A reply
 * is an rtr_msg_t made here plus a core_delivery_t in an agent_dlv_t that the agent owns
 * until the core hands it back (CORE_W_RELEASE: presettled, the core is done with it); the
 * workers that send it hold their own references to the content.
 *
 * DESIGN: a QUERY reads the stats registry (never the core), so a big one costs the agent
 * thread time, not the core's; the core only routes the request and the reply, one
 * delivery each.
 */
#include "router/mgmt/agent.h"

#include "junction_version.h"
#include "router/accept.h"
#include "core/linkroute.h"
#include "router/connmgr.h"
#include "router/ctx.h"
#include "router/tls.h"
#include "router/mgmt/mgmt.h"
#include "router/msg.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define LOG(lvl, ...) base_log(BASE_LOG_MOD_AGENT, BASE_LOG_##lvl, __VA_ARGS__)

/* A reply on its way: owned by the agent until CORE_W_RELEASE. */
typedef struct agent_dlv agent_dlv_t;
struct agent_dlv {
    core_delivery_t dlv;  /* first: what the core sees */
    rtr_msg_t      *msg;  /* our content reference */
    char           *to;   /* the destination (dlv.to points into it) */
    agent_dlv_t    *prev; /* in agent->inflight */
    agent_dlv_t    *next;
};

/* The agent's links, by what the core echoes back as their handle. */
enum { LINK_MOBILE = 0, LINK_LOCAL, LINK_REPLY, N_LINKS };

struct mgmt_agent {
    uv_loop_t         loop;  /* the agent thread's loop */
    uv_async_t        wake;  /* inbox not empty */
    uv_async_t        stop;  /* main thread -> agent: stop */
    uv_prepare_t      flush; /* pushes to_core once per iteration */
    uv_thread_t       thread;
    base_mpsc_t       inbox;   /* core_work_t from the core */
    base_mpsc_batch_t to_core; /* actions built this iteration */
    core_t           *core;
    rtr_ctx_t        *ctx;              /* the workers (link ids, connection closes) */
    rtr_connmgr_t    *connmgr;          /* listeners (its thread-safe calls); outlives the agent */
    int               index;            /* our queue index at the core */
    mgmt_node_t      *mgmt;             /* the request -> reply logic and entity records */
    mgmt_tls_t        tls;              /* the router's sslProfiles (router/tls.h) */
    uint64_t          link_id[N_LINKS]; /* our link ids */
    char              handles[N_LINKS]; /* &handles[i] is link i's handle */
    agent_dlv_t      *inflight;         /* replies the core has not handed back */
    bool              started;          /* the thread runs */
    bool              stopping;         /* stop_cb ran */
    uint64_t          requests;         /* answered so far (logged at stop) */
};

/* ---- hooks (the management node -> the rest of the router) ---- */

static long hook_listener_add(void *ctx, const cfg_listener_t *lc, char *err, size_t errlen)
{
    mgmt_agent_t *a = ctx;
    return rtr_connmgr_listener_add(a->connmgr, lc, err, errlen);
}

static void hook_listener_del(void *ctx, long id)
{
    mgmt_agent_t *a = ctx;
    rtr_connmgr_listener_del(a->connmgr, id);
}

static core_autolink_row_t *hook_autolink_rows(void *ctx, size_t *n)
{
    mgmt_agent_t *a = ctx;
    return core_autolink_rows(a->core, n);
}

static core_node_row_t *hook_node_rows(void *ctx, size_t *n)
{
    mgmt_agent_t *a = ctx;
    return core_node_rows(a->core, n);
}

static uint32_t hook_autolink_add(void *ctx, const cfg_autolink_t *al)
{
    mgmt_agent_t *a = ctx;
    return core_autolink_add(a->core, al);
}

static int hook_autolink_del(void *ctx, uint32_t id)
{
    mgmt_agent_t *a = ctx;
    return core_autolink_del(a->core, id);
}

static void addr_add_CT(core_t *core, void *arg)
{
    const cfg_address_t *ac = arg;
    if (core_addr_config_add_CT(core, ac) != 0)
        base_log(BASE_LOG_MOD_AGENT, BASE_LOG_WARNING, "Address configuration %s was not added",
                 ac->prefix ? ac->prefix : ac->pattern);
}

static void addr_del_CT(core_t *core, void *arg)
{
    core_addr_config_remove_CT(core, arg);
}

static void hook_address_add(void *ctx, const cfg_address_t *ac)
{
    mgmt_agent_t *a = ctx;
    core_call(a->core, addr_add_CT, (void *)ac);
}

static void hook_address_del(void *ctx, const cfg_address_t *ac)
{
    mgmt_agent_t *a = ctx;
    core_call(a->core, addr_del_CT, (void *)ac);
}

static void lr_add_CT(core_t *core, void *arg)
{
    const cfg_link_route_t *c = arg;
    const char *err = NULL;
    if (!core_lr_add_cfg(core_lr_table_CT(core), c, &err))
        base_log(BASE_LOG_MOD_AGENT, BASE_LOG_WARNING, "linkRoute %s was not added: %s",
                 c->prefix ? c->prefix : c->pattern, err);
}

static void lr_del_CT(core_t *core, void *arg)
{
    core_lr_remove_owner(core_lr_table_CT(core), arg);
}

static void hook_link_route_add(void *ctx, const cfg_link_route_t *lr)
{
    mgmt_agent_t *a = ctx;
    core_call(a->core, lr_add_CT, (void *)lr);
}

static void hook_link_route_del(void *ctx, const cfg_link_route_t *lr)
{
    mgmt_agent_t *a = ctx;
    core_call(a->core, lr_del_CT, (void *)lr);
}

static void hook_conn_close(void *ctx, uint64_t id)
{
    mgmt_agent_t *a = ctx;
    for (int i = 0; i < a->ctx->n_workers; i++)
        rtr_worker_post_ext(&a->ctx->workers[i], RTR_EXT_CLOSE_CONN, NULL, (long)id);
}

/* ---- core traffic ---- */

static core_action_t *action(mgmt_agent_t *a, core_action_type_t type, uint64_t link_id)
{
    core_action_t *act = core_batch_add(&a->to_core);
    act->type = (uint8_t)type;
    act->worker = (uint8_t)a->index;
    act->link_id = link_id;
    return act;
}

static void attach(mgmt_agent_t *a, int which, const char *address, core_link_dir_t dir)
{
    a->link_id[which] = atomic_fetch_add(&a->ctx->next_link_id, 1) + 1;
    core_action_t *act = action(a, CORE_A_LINK_ATTACH, a->link_id[which]);
    act->u.attach.conn_id = 0;
    act->u.attach.handle = &a->handles[which];
    act->u.attach.address = address ? base_strdup(address) : NULL;
    act->u.attach.capacity = 250;
    act->u.attach.dir = (uint8_t)dir;
    act->u.attach.dynamic = false;
    act->u.attach.name = NULL;
}

static void reply_send(mgmt_agent_t *a, uint8_t *bytes, size_t len, char *to)
{
    rtr_msg_t *m = rtr_msg_new();
    rtr_msg_reserve(m, len);
    memcpy(m->data, bytes, len);
    m->len = len;
    const char *why = NULL;
    if (codec_scan(m->data, m->len, true, &m->scan, &why) != 0) {
        /* our own encoding: cannot happen unless the codec and Proton disagree */
        LOG(ERROR, "Management reply not sent: %s", why ? why : "scan failed");
        rtr_msg_unref(m);
        free(to);
        return;
    }
    agent_dlv_t *d = base_calloc(1, sizeof(*d));
    d->msg = m;
    d->to = to;
    d->dlv.content = &m->c;
    d->dlv.link_id = a->link_id[LINK_REPLY];
    d->dlv.to = to;
    d->dlv.to_len = (uint32_t)strlen(to);
    d->dlv.presettled = true;
    d->next = a->inflight;
    if (a->inflight)
        a->inflight->prev = d;
    a->inflight = d;
    action(a, CORE_A_DELIVER, a->link_id[LINK_REPLY])->u.dlv = &d->dlv;
}

static void on_request(mgmt_agent_t *a, core_work_t *w)
{
    rtr_msg_t         *m = (rtr_msg_t *)w->u.send.content;
    core_delivery_t   *in = w->u.send.dlv;
    core_disposition_t disp = {.outcome = CORE_OUTCOME_ACCEPTED};
    const char        *why = NULL;

    if (m->c.streaming) {
        rtr_msg_reader_del(m, NULL); /* we never read it: the receiving worker must not wait */
        why = "the request is too large";
    } else {
        uint8_t *out = NULL;
        size_t   out_len = 0;
        char    *to = NULL;
        /* the request's link (read-only while its delivery is in flight): policy's
           allowAdminStatusUpdate is its connection's */
        uint64_t from = in ? in->link_id : 0;
        /* a request kept in its read buffers (segments) is read from a joined copy: the
         * message is shared, read-only */
        uint8_t *joined = NULL;
        if (m->n_seg > 1) {
            joined = base_malloc(m->len);
            rtr_msg_copy(m, joined);
        }
        if (mgmt_amqp_handle_from(a->mgmt, from, joined ? joined : m->data, m->len, &out,
                                  &out_len, &to, &why) == 0) {
            reply_send(a, out, out_len, to);
            a->requests++;
        }
        free(joined);
        free(out);
    }
    if (why) {
        LOG(INFO, "Management request refused: %s", why);
        disp.outcome = CORE_OUTCOME_REJECTED;
        disp.cond_name = base_strdup("amqp:precondition-failed");
        disp.cond_desc = base_strdup(why);
    }
    if (in) {
        uint64_t       link = (char *)w->handle == &a->handles[LINK_LOCAL] ? a->link_id[LINK_LOCAL]
                                                                           : a->link_id[LINK_MOBILE];
        core_action_t *act = action(a, CORE_A_DISPOSITION, link);
        act->u.disposition.dlv = in;
        act->u.disposition.disp = disp;
    } else {
        free(disp.cond_name);
        free(disp.cond_desc);
    }
    rtr_msg_unref(m);
}

static void dlv_free(mgmt_agent_t *a, agent_dlv_t *d)
{
    if (d->prev)
        d->prev->next = d->next;
    else
        a->inflight = d->next;
    if (d->next)
        d->next->prev = d->prev;
    rtr_msg_unref(d->msg);
    free(d->to);
    free(d);
}

static void on_work(mgmt_agent_t *a, core_work_t *w)
{
    switch ((core_work_type_t)w->type) {
    case CORE_W_LINK_ATTACHED:
        if (w->u.attached.cond_name)
            LOG(WARNING, "The management node's link was refused: %s",
                w->u.attached.cond_desc ? w->u.attached.cond_desc : w->u.attached.cond_name);
        free(w->u.attached.address);
        free(w->u.attached.cond_desc);
        break;
    case CORE_W_LINK_CREDIT:
    case CORE_W_LINK_DETACHED:
        break;
    case CORE_W_SEND:
        on_request(a, w);
        break;
    case CORE_W_SETTLE: { /* not expected: replies are presettled */
        free(w->u.settle.disp.cond_name);
        free(w->u.settle.disp.cond_desc);
        dlv_free(a, (agent_dlv_t *)w->u.settle.dlv);
        break;
    }
    case CORE_W_RELEASE:
        dlv_free(a, (agent_dlv_t *)w->u.release);
        break;
    case CORE_W_EXTERNAL:
    case CORE_W_AUTOLINK: /* not expected: the agent has no connections */
        break;
    case CORE_W_RT_SEND: /* not expected either */
        free(w->u.rt_send.bytes);
        break;
    case CORE_W_EDGE: /* nor this */
        free(w->u.edge.key);
        break;
    }
}

static void on_work_cb(void *a, void *w)
{
    on_work(a, w);
}

static void drain_inbox(mgmt_agent_t *a)
{
    base_mpsc_drain(&a->inbox, on_work_cb, a);
}

static void wake_cb(uv_async_t *h)
{
    drain_inbox(h->data);
}

static void flush_cb(uv_prepare_t *h)
{
    mgmt_agent_t *a = h->data;
    if (!a->stopping && !base_mpsc_batch_empty(&a->to_core))
        core_post(a->core, &a->to_core);
}

static void inbox_wake(void *ctx)
{
    mgmt_agent_t *a = ctx;
    uv_async_send(&a->wake);
}

static void stop_cb(uv_async_t *h)
{
    mgmt_agent_t *a = h->data;
    /* the core has stopped: take what it sent last, then let go of everything */
    drain_inbox(a);
    a->stopping = true;
    while (a->inflight)
        dlv_free(a, a->inflight);
    rtr_loop_close_all(&a->loop); /* wake, stop, flush */
}

static void agent_main(void *arg)
{
    mgmt_agent_t *a = arg;
    base_thread_set_role(BASE_THREAD_ADMIN, 1);
    pthread_setname_np(pthread_self(), "junction-agent");
    attach(a, LINK_MOBILE, "$management", CORE_LINK_OUT);
    attach(a, LINK_LOCAL, "_local/$management", CORE_LINK_OUT);
    attach(a, LINK_REPLY, NULL, CORE_LINK_IN);
    core_post(a->core, &a->to_core);
    uv_run(&a->loop, UV_RUN_DEFAULT);
}

static bool hook_connector_status(void *ctx, long id, char *status, size_t slen, char *msg,
                                  size_t mlen)
{
    mgmt_agent_t *a = ctx;
    return rtr_connmgr_connector_status(a->connmgr, id, status, slen, msg, mlen);
}

static bool hook_connector_failover(void *ctx, long id, char *urls, size_t len)
{
    mgmt_agent_t *a = ctx;
    return rtr_connmgr_connector_failover(a->connmgr, id, urls, len);
}

static long hook_connector_add(void *ctx, const cfg_connector_t *cn, char *err, size_t errlen)
{
    mgmt_agent_t *a = ctx;
    return rtr_connmgr_connector_add(a->connmgr, cn, err, errlen);
}

static void hook_connector_del(void *ctx, long id)
{
    mgmt_agent_t *a = ctx;
    rtr_connmgr_connector_del(a->connmgr, id);
}

/* ---- main thread ---- */

int mgmt_agent_new(const cfg_t *cfg, core_t *core, rtr_ctx_t *ctx, int index,
                   stats_registry_t *reg, rtr_connmgr_t *connmgr, mgmt_agent_t **out)
{
    mgmt_agent_t *a = base_calloc(1, sizeof(*a));
    a->core = core;
    a->ctx = ctx;
    a->connmgr = connmgr;
    /* `$management` (and its local forms) belongs to the router: it routes to us whatever
     * the address configuration says, and no client may receive from it */
    core_node_reserve(core, "$management");
    a->index = index;
    int rc = uv_loop_init(&a->loop);
    if (rc) {
        free(a);
        return rc;
    }
    uv_async_init(&a->loop, &a->wake, wake_cb);
    a->wake.data = a;
    uv_async_init(&a->loop, &a->stop, stop_cb);
    a->stop.data = a;
    uv_prepare_init(&a->loop, &a->flush);
    a->flush.data = a;
    uv_prepare_start(&a->flush, flush_cb);
    base_mpsc_init(&a->inbox, inbox_wake, a);
    mgmt_info_t info = {
        .router_id = cfg->router.id, .mode = cfg->router.mode, .version = JUNCTION_VERSION};
    mgmt_hooks_t hooks = {.ctx = a,
                          .listener_add = hook_listener_add,
                          .listener_del = hook_listener_del,
                          .address_add = hook_address_add,
                          .address_del = hook_address_del,
                          .link_route_add = hook_link_route_add,
                          .link_route_del = hook_link_route_del,
                          .conn_close = hook_conn_close,
                          .connector_status = hook_connector_status,
                          .connector_failover = hook_connector_failover,
                          .connector_add = hook_connector_add,
                          .connector_del = hook_connector_del,
                          .tls = ctx->tls ? &a->tls : NULL,
                          .autolink_rows = hook_autolink_rows,
                          .autolink_rows_free = core_autolink_rows_free,
                          .autolink_add = hook_autolink_add,
                          .autolink_del = hook_autolink_del,
                          .node_rows = hook_node_rows,
                          .node_rows_free = core_node_rows_free,
                          .policy = ctx->policy};
    if (ctx->tls)
        rtr_tls_mgmt(ctx->tls, &a->tls);
    a->mgmt = mgmt_node_new(cfg, reg, &info, &hooks);
    *out = a;
    return 0;
}

base_mpsc_t *mgmt_agent_queue(mgmt_agent_t *a)
{
    return a ? &a->inbox : NULL;
}

int mgmt_agent_start(mgmt_agent_t *a)
{
    if (!a || a->started)
        return 0;
    int rc = uv_thread_create(&a->thread, agent_main, a);
    if (rc)
        return rc;
    a->started = true;
    return 0;
}

void mgmt_agent_stop(mgmt_agent_t *a)
{
    if (!a || !a->started)
        return;
    uv_async_send(&a->stop);
    uv_thread_join(&a->thread);
    a->started = false;
    LOG(DEBUG, "Management agent stopped after %llu requests", (unsigned long long)a->requests);
}

void mgmt_agent_free(mgmt_agent_t *a)
{
    if (!a)
        return;
    mgmt_agent_stop(a);
    if (!a->stopping) {
        /* never started: close the handles here */
        rtr_loop_close_all(&a->loop);
        uv_run(&a->loop, UV_RUN_DEFAULT);
    }
    uv_loop_close(&a->loop);
    /* actions never pushed (the core had stopped) */
    base_mpsc_batch_discard(&a->to_core);
    base_mpsc_drain(&a->inbox, NULL, NULL);
    base_mpsc_fini(&a->inbox);
    mgmt_node_free(a->mgmt);
    free(a);
}
