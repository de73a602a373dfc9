/* router/bare.c: router.link rows of the router's bare Proton links (see bare.h).
 *
 * Thread suffixes: _WT = the worker of the link's connection (every function here).
 */
#include "router/bare.h"

#include "core/base/base.h"
#include "router/conn.h"

#include <stdio.h>
#include <string.h>

stats_obj_t rtr_bare_row_new_WT(rtr_conn_t *c, pn_link_t *pl, const char *key, const char *type,
                                const char *prio, uint32_t capacity, uint32_t credit)
{
    rtr_worker_t *w = c->worker;
    char          id[24], conn[24];
    snprintf(id, sizeof(id), "%llu",
             (unsigned long long)atomic_fetch_add(&w->ctx->next_link_id, 1) + 1);
    snprintf(conn, sizeof(conn), "%llu", (unsigned long long)c->id);
    const char         *name = pn_link_name(pl);
    const char         *labels[] = {id,   conn, pn_link_is_sender(pl) ? "out" : "in", key,
                                    name ? name : "", type, prio};
    const core_stats_t *cs = w->ctx->stats;
    stats_obj_t         row = {0, 0, 0};
    core_stats_object_new(cs, cs->link, labels, &row);
    stats_obj_set(w->shard, row, CORE_LINK_CAPACITY, capacity);
    stats_obj_set(w->shard, row, CORE_LINK_CREDIT, credit);
    return row;
}

void rtr_bare_row_delivery_WT(rtr_conn_t *c, stats_obj_t row, bool presettled)
{
    stats_obj_add(c->worker->shard, row, CORE_LINK_DELIVERIES, 1);
    if (presettled)
        stats_obj_add(c->worker->shard, row, CORE_LINK_PRESETTLED, 1);
}

void rtr_bare_row_credit_WT(rtr_conn_t *c, stats_obj_t row, int credit)
{
    stats_obj_set(c->worker->shard, row, CORE_LINK_CREDIT, credit);
}

void rtr_bare_row_retire_WT(rtr_conn_t *c, stats_obj_t *row)
{
    if (row->gen == 0 && row->index == 0)
        return;
    stats_object_retire(c->worker->ctx->stats->reg, *row);
    *row = (stats_obj_t){0, 0, 0};
}

bool rtr_bare_gather_WT(pn_delivery_t *d, size_t max, uint8_t **buf, size_t *len, size_t *cap,
                        bool *drop)
{
    pn_link_t *pl = pn_delivery_link(d);
    if (!pn_delivery_readable(d))
        return false;
    char    chunk[4096];
    ssize_t n;
    while ((n = rtr_link_recv_WT(pl, chunk, sizeof(chunk))) > 0) {
        if (*drop || *len + (size_t)n > max) {
            *drop = true;
            continue;
        }
        if (*len + (size_t)n > *cap) {
            *cap = (*len + (size_t)n) * 2;
            *buf = base_realloc(*buf, *cap);
        }
        memcpy(*buf + *len, chunk, (size_t)n);
        *len += (size_t)n;
    }
    return !pn_delivery_partial(d);
}
