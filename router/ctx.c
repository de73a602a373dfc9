/* router/ctx.c: the router context the workers share, and the calls a connection's layers
 * make on their worker (ctx.h).
 *
 * Thread suffixes: _WT = the worker itself.  rtr_ctx_init/fini run on the thread that owns
 * the workers, before they start and after they stopped; rtr_worker_post_ext() is
 * thread-safe.
 */
#include "router/policy.h"
#include "router/ctx.h"

#include "router/accept.h"
#include "router/conn_watch.h"
#include "router/link_auto.h"
#include "router/lstats.h"

#include <stdio.h>
#include <string.h>

/* conn_watch's one callback (router/conn_watch.h): on the connection's worker, for each
 * feature that attaches links toward containers. */
static void conn_watch_WT(void *arg, const rtr_conn_info_t *ci, bool open)
{
    /* rtr_autolink_watch_WT announces a route container's connection to the core once
     * (CORE_A_CONN_OPENED, and CORE_A_CONN_CLOSED when it is freed); the core hands that one
     * announcement to both autoLinks and link routes */
    rtr_autolink_watch_WT(arg, ci, open);
}

void rtr_ctx_init(rtr_ctx_t *ctx, const cfg_t *cfg, const core_stats_t *stats,
                  rtr_worker_t *workers, int n_workers)
{
    static const char *const names[RTR_POLICY_N] = {
        [RTR_POLICY_PROCESSED] = "policyConnectionsProcessed",
        [RTR_POLICY_CONN_DENIED] = "policyConnectionsDenied",
        [RTR_POLICY_LINK_DENIED] = "policyLinksDenied",
        [RTR_POLICY_SIZE_DENIED] = "policyMaxMessageSizeDenied",
    };
    static const char *const help[RTR_POLICY_N] = {
        "Connections checked against policy maxConnections",
        "Connections refused by policy maxConnections",
        "Links refused by maxSenders or maxReceivers",
        "Messages refused by maxMessageSize",
    };
    memset(ctx, 0, sizeof(*ctx));
    ctx->cfg = cfg;
    ctx->router_id = cfg->router.id;
    size_t idlen = strlen(cfg->router.id);
    ctx->node_id = base_malloc(idlen + 3);
    snprintf(ctx->node_id, idlen + 3, "0/%s", cfg->router.id);
    ctx->node_id_len = idlen + 2;
    ctx->stats = stats;
    for (int i = 0; i < RTR_POLICY_N; i++)
        if (stats_stat_new(stats->reg, names[i], STATS_COUNTER, help[i], NULL,
                           &ctx->policy_stats[i], NULL) < 0)
            memset(&ctx->policy_stats[i], 0, sizeof(ctx->policy_stats[i])); /* sink slot */
    if (stats_stat_new(stats->reg, "tlsHandshakesFailed", STATS_COUNTER,
                       "TLS handshakes that failed, and plain clients of requireSsl listeners",
                       NULL, &ctx->tls_failed, NULL) < 0)
        memset(&ctx->tls_failed, 0, sizeof(ctx->tls_failed)); /* sink slot */
    ctx->lstats = rtr_lstats_new(stats);
    ctx->conn_watch = rtr_conn_watch_new();
    rtr_conn_watch_set(ctx->conn_watch, conn_watch_WT, ctx);
    ctx->workers = workers;
    ctx->n_workers = n_workers;
    ctx->policy = rtr_policy_new(cfg);
}

void rtr_ctx_fini(rtr_ctx_t *ctx)
{
    BASE_FREE(ctx->node_id);
    rtr_conn_watch_free(ctx->conn_watch);
    ctx->conn_watch = NULL;
    rtr_lstats_free(ctx->lstats);
    ctx->lstats = NULL;
    rtr_policy_free(ctx->policy);
    ctx->policy = NULL;
    ctx->stats = NULL;
    ctx->workers = NULL;
    ctx->n_workers = 0;
}

core_action_t *rtr_worker_action_WT(rtr_worker_t *w)
{
    core_action_t *a = core_batch_add(&w->to_core);
    a->worker = (uint8_t)w->index;
    return a;
}

/* Stop the loop once every connection was closed and nothing the core may still answer is
 * alive. */
void rtr_worker_maybe_exit_WT(rtr_worker_t *w)
{
    if (!w->closing_all || w->n_conns || w->n_ins || w->n_links)
        return;
    if (!base_mpsc_batch_empty(&w->to_core))
        core_post(w->core, &w->to_core);
    rtr_loop_close_all(&w->loop);
}

void rtr_worker_post_ext(rtr_worker_t *w, int kind, void *ptr, long arg)
{
    base_mpsc_batch_t b = {0};
    core_work_t      *work = base_mpsc_batch_add(&b, sizeof(core_work_t));
    work->type = CORE_W_EXTERNAL;
    work->u.ext.kind = kind;
    work->u.ext.ptr = ptr;
    work->u.ext.arg = arg;
    base_mpsc_push(&w->inbox, &b);
}
