/* router/mgmt/node.c: the AMQP management node's state - the router's info, the hooks, and
 * the configuration records (listeners, addresses) that CREATE and DELETE change and that
 * the configuration rows are built from.
 *
 * Threads: a node belongs to one thread (the agent thread; mgmt_node_new and _free run on
 * the main thread before and after it).
 */
#include "router/mgmt/mgmt_int.h"

#include "core/base/base.h"

#include <proton/message.h>
#include <stdio.h>
#include <string.h>

void mgmt_rec_add(mgmt_rec_list_t *l, const char *name, const char *identity, long id,
                  const void *cfg)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->v = base_realloc(l->v, l->cap * sizeof(*l->v));
    }
    mgmt_rec_t *r = &l->v[l->n++];
    r->identity = base_strdup(identity);
    r->name = base_strdup(name ? name : identity);
    r->id = id;
    r->cfg = cfg;
}

void mgmt_rec_del(mgmt_rec_list_t *l, size_t i)
{
    free(l->v[i].name);
    free(l->v[i].identity);
    memmove(&l->v[i], &l->v[i + 1], (l->n - i - 1) * sizeof(*l->v));
    l->n--;
}

void mgmt_listener_identity(const cfg_listener_t *lc, long id, char *buf, size_t len)
{
    /* qdrouterd: listener/<host>:<port>; port "0" (ephemeral) is made unique by the id */
    if (strcmp(lc->port, "0") == 0)
        snprintf(buf, len, "listener/%s:%s:%ld", lc->host ? lc->host : "", lc->port, id);
    else
        snprintf(buf, len, "listener/%s:%s", lc->host ? lc->host : "", lc->port);
}

void mgmt_node_address_rec(mgmt_node_t *n, const cfg_address_t *ac)
{
    char identity[32];
    snprintf(identity, sizeof(identity), "%ld", ++n->addr_serial);
    mgmt_rec_add(&n->addresses, ac->name, identity, n->addr_serial, ac);
}

void mgmt_node_link_route_rec(mgmt_node_t *n, const cfg_link_route_t *lr)
{
    char identity[32];
    snprintf(identity, sizeof(identity), "%ld", ++n->lr_serial);
    mgmt_rec_add(&n->link_routes, lr->name, identity, n->lr_serial, lr);
}

void mgmt_node_own(mgmt_node_t *n, cfg_t *cfg)
{
    n->owned = base_realloc(n->owned, (n->n_owned + 1) * sizeof(*n->owned));
    n->owned[n->n_owned++] = cfg;
}

void mgmt_node_connector_rec(mgmt_node_t *n, const cfg_connector_t *cn, long id)
{
    char identity[300];
    snprintf(identity, sizeof(identity), "connector/%s:%s", cn->conn.host, cn->conn.port);
    mgmt_rec_add(&n->connectors, cn->conn.name, identity, id, cn);
}

mgmt_node_t *mgmt_node_new(const cfg_t *cfg, stats_registry_t *reg, const mgmt_info_t *info,
                           const mgmt_hooks_t *hooks)
{
    mgmt_node_t *n = base_calloc(1, sizeof(*n));
    n->reg = reg;
    n->cfg = cfg;
    n->router_id = base_strdup(info && info->router_id ? info->router_id : cfg->router.id);
    n->mode = base_strdup(info && info->mode ? info->mode : "standalone");
    n->version = base_strdup(info && info->version ? info->version : "");
    n->info.product = "junction";
    n->info.router_id = n->router_id;
    n->info.mode = n->mode;
    n->info.version = n->version;
    if (hooks)
        n->hooks = *hooks;
    for (size_t i = 0; i < cfg->n_listeners; i++) {
        char identity[300];
        long id = (long)i + 1;
        mgmt_listener_identity(&cfg->listeners[i], id, identity, sizeof(identity));
        mgmt_rec_add(&n->listeners, cfg->listeners[i].name, identity, id, &cfg->listeners[i]);
    }
    for (size_t i = 0; i < cfg->n_addresses; i++)
        mgmt_node_address_rec(n, &cfg->addresses[i]);
    for (size_t i = 0; i < cfg->n_link_routes; i++)
        mgmt_node_link_route_rec(n, &cfg->link_routes[i]);
    for (size_t i = 0; i < cfg->n_connectors; i++)
        mgmt_node_connector_rec(n, &cfg->connectors[i], (long)i + 1);
    n->req = pn_message();
    n->rep = pn_message();
    return n;
}

void mgmt_node_free(mgmt_node_t *n)
{
    if (!n)
        return;
    while (n->listeners.n)
        mgmt_rec_del(&n->listeners, n->listeners.n - 1);
    while (n->addresses.n)
        mgmt_rec_del(&n->addresses, n->addresses.n - 1);
    while (n->connectors.n)
        mgmt_rec_del(&n->connectors, n->connectors.n - 1);
    free(n->listeners.v);
    free(n->addresses.v);
    while (n->link_routes.n)
        mgmt_rec_del(&n->link_routes, n->link_routes.n - 1);
    free(n->link_routes.v);
    free(n->connectors.v);
    for (size_t i = 0; i < n->n_owned; i++)
        cfg_free(n->owned[i]);
    free(n->owned);
    pn_message_free(n->req);
    pn_message_free(n->rep);
    free(n->router_id);
    free(n->mode);
    free(n->version);
    free(n);
}
