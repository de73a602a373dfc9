/* router/policy_conn.c: vhost policies on a connection (router/policy.h has the rules) - the
 * open admitted or refused and its settings applied to Proton, sessions and link attaches
 * checked, a message's user-id and anonymous target checked.  Called by conn.c and link_in.c.
 *
 * Thread suffixes: _WT = the connection's worker (every function here).
 */
#include "router/policy_conn.h"

#include "router/policy.h"

#include <proton/codec.h>
#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/link.h>
#include <proton/sasl.h>
#include <proton/session.h>
#include <proton/terminus.h>
#include <proton/transport.h>
#include <string.h>

/* A client's connection is under vhost policy unless it is inter-router (qdrouterd: every
 * incoming connection but inter-router ones).  A connector's has its own rule below. */
static bool governed(const rtr_conn_t *c)
{
    return !c->connector && c->listener->role != CFG_ROLE_INTER_ROUTER &&
           rtr_policy_enabled(c->worker->ctx->policy);
}

/* A connector's connection is governed by its vhost's `$connector` group when the connector
 * names a policyVhost and is role normal or route-container (qdrouterd 1.19). */
static bool connector_governed(const rtr_conn_t *c)
{
    return c->connector && c->listener->policy_vhost &&
           (c->listener->role == CFG_ROLE_NORMAL ||
            c->listener->role == CFG_ROLE_ROUTE_CONTAINER) &&
           rtr_policy_enabled(c->worker->ctx->policy);
}

/* The client's address without its port (c->peer is "host:port"). */
static void peer_host(const rtr_conn_t *c, char *host, size_t n)
{
    const char *colon = strrchr(c->peer, ':');
    size_t      hl = colon ? (size_t)(colon - c->peer) : strlen(c->peer);
    if (hl >= n)
        hl = n - 1;
    memcpy(host, c->peer, hl);
    host[hl] = '\0';
}

static void deny_open(pn_connection_t *pc)
{
    pn_condition_t *cond = pn_connection_condition(pc);
    pn_condition_set_name(cond, RTR_POLICY_COND_LIMIT);
    pn_condition_set_description(cond, RTR_POLICY_DESC_CONN);
}

bool rtr_policy_conn_open_WT(rtr_conn_t *c, pn_connection_t *pc)
{
    if (c->pconn)
        return true;
    if (connector_governed(c)) {
        /* the peer's open has come: the router's was sent first, so a refusal is its close
           (qdrouterd's condition); the connector tries again as after any close */
        char        host[64];
        const char *user = pn_transport_get_user(c->driver.transport); /* the router's own */
        peer_host(c, host, sizeof(host));
        c->pconn = rtr_policy_open_connector(c->worker->ctx->policy, c->id,
                                             c->listener->policy_vhost,
                                             user && *user ? user : "anonymous", host);
        if (!c->pconn) {
            deny_open(pc);
            return false;
        }
        c->max_message_size = rtr_pconn_max_message_size(c->pconn);
        return true;
    }
    if (!governed(c))
        return true;
    pn_sasl_t  *sasl = pn_sasl(c->driver.transport);
    const char *user = pn_sasl_get_user(sasl);
    if (!user || !*user)
        user = "anonymous"; /* qdrouterd's name for a client without SASL */
    const char *hostname = pn_connection_remote_hostname(pc);
    const char *vhost =
        c->listener->policy_vhost ? c->listener->policy_vhost : (hostname ? hostname : "");
    char host[64];
    peer_host(c, host, sizeof(host));

    c->pconn = rtr_policy_open(c->worker->ctx->policy, c->id, vhost, user, host);
    if (!c->pconn) {
        /* counted in the vhost's stats (the policy's connectionsDenied is maxConnections');
           the caller opens and closes it */
        deny_open(pc);
        return false;
    }
    /* The open's settings, before the router's open is written.  A larger frame than the
     * listener's is not granted: the frame guard (and its memory) is the listener's. */
    pn_transport_t *t = c->driver.transport;
    uint32_t        frame = rtr_pconn_max_frame_size(c->pconn);
    if (frame && frame < c->listener->max_frame_size)
        pn_transport_set_max_frame(t, frame < 512 ? 512 : frame);
    uint32_t sessions = rtr_pconn_max_sessions(c->pconn);
    if (sessions && sessions <= 65536)
        pn_transport_set_channel_max(t, (uint16_t)(sessions - 1));
    c->max_message_size = rtr_pconn_max_message_size(c->pconn);
    return true;
}

void rtr_policy_conn_free_WT(rtr_conn_t *c)
{
    rtr_policy_close(c->worker->ctx->policy, c->pconn);
    c->pconn = NULL;
}

size_t rtr_policy_session_WT(rtr_conn_t *c, pn_session_t *s, size_t capacity)
{
    if (!c->pconn)
        return capacity;
    if (!rtr_pconn_session(c->pconn, c->id, c->n_sessions)) {
        pn_condition_t *cond = pn_session_condition(s);
        pn_condition_set_name(cond, RTR_POLICY_COND_LIMIT);
        pn_condition_set_description(cond, RTR_POLICY_DESC_SESS);
        return 0;
    }
    uint32_t w = rtr_pconn_max_session_window(c->pconn);
    if (!w)
        return capacity;
    size_t frame = pn_transport_get_max_frame(c->driver.transport);
    if (w > RTR_CONN_IN_MAX)
        w = RTR_CONN_IN_MAX;
    return w < frame ? frame : w;
}

/* The terminus's first capability (qdrouterd looks at the first only). */
static void first_capability(pn_terminus_t *t, bool *waypoint, bool *fallback)
{
    pn_data_t *cap = pn_terminus_capabilities(t);
    *waypoint = *fallback = false;
    if (!cap)
        return;
    pn_data_rewind(cap);
    if (!pn_data_next(cap))
        return;
    if (pn_data_type(cap) == PN_ARRAY) { /* an array of symbols: its first */
        pn_data_enter(cap);
        if (!pn_data_next(cap)) {
            pn_data_exit(cap);
            return;
        }
    }
    if (pn_data_type(cap) == PN_SYMBOL) {
        pn_bytes_t b = pn_data_get_symbol(cap);
        *waypoint = b.size >= 11 && memcmp(b.start, "qd.waypoint", 11) == 0;
        *fallback = b.size == 11 && memcmp(b.start, "qd.fallback", 11) == 0;
    }
    pn_data_rewind(cap);
}

const char *rtr_policy_link_WT(rtr_conn_t *c, pn_link_t *pl)
{
    if (!c->pconn)
        return NULL;
    bool           client_sends = pn_link_is_receiver(pl);
    pn_terminus_t *t = client_sends ? pn_link_remote_target(pl) : pn_link_remote_source(pl);
    rtr_plink_t    l = {
           .client_sends = client_sends,
           .n_same = client_sends ? c->n_in_links : c->n_out_links,
           .address = pn_terminus_get_address(t),
           .dynamic = !client_sends && pn_terminus_is_dynamic(t),
    };
    first_capability(t, &l.waypoint, &l.fallback);
    return rtr_pconn_link(c->pconn, c->id, &l);
}

const char *rtr_policy_message_WT(rtr_conn_t *c, bool anonymous, const uint8_t *props,
                                  const codec_scan_t *scan)
{
    if (!c->pconn)
        return NULL;
    if (!rtr_pconn_user_id_proxy(c->pconn)) {
        const uint8_t *uid;
        size_t         len;
        rtr_policy_user_id(props, scan->properties.len, &uid, &len);
        if (uid && len && !rtr_pconn_is_user(c->pconn, (const char *)uid, len))
            return "user_id proxy violation";
    }
    if (anonymous && scan->to.ptr &&
        !rtr_pconn_message_to(c->pconn, c->id, (const char *)scan->to.ptr, scan->to.len))
        return "policy violation on target";
    return NULL;
}

/* The bytes of an AMQP value at p (end e) for the types a message-id may have; 0 when not
 * one of them. */
static size_t value_size(const uint8_t *p, const uint8_t *e)
{
    if (p >= e)
        return 0;
    switch (*p) {
    case 0x40:
    case 0x41:
    case 0x42:
    case 0x43:
    case 0x44: /* null, true, false, uint0, ulong0 */
        return 1;
    case 0x52:
    case 0x53: /* smalluint, smallulong */
        return 2;
    case 0x70:
    case 0x80: /* uint, ulong */
        return *p == 0x70 ? 5 : 9;
    case 0x98: /* uuid */
        return 17;
    case 0xa0:
    case 0xa1:
    case 0xa3: /* vbin8, str8, sym8 */
        return p + 1 < e ? 2 + (size_t)p[1] : 0;
    case 0xb0:
    case 0xb1:
    case 0xb3: {
        if (p + 5 > e)
            return 0;
        uint32_t n = ((uint32_t)p[1] << 24) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 8) | p[4];
        return 5 + (size_t)n;
    }
    default:
        return 0;
    }
}

void rtr_policy_user_id(const uint8_t *props, size_t props_len, const uint8_t **uid,
                        size_t *len)
{
    *uid = NULL;
    *len = 0;
    if (!props_len)
        return;
    const uint8_t *p = props + 3; /* past 0x00 0x53 0x73 */
    const uint8_t *e = props + props_len;
    uint32_t       count;
    if (p >= e)
        return;
    if (*p == 0x45) /* list0 */
        return;
    if (*p == 0xc0 && p + 3 <= e) {
        count = p[2];
        p += 3;
    } else if (*p == 0xd0 && p + 9 <= e) {
        count = ((uint32_t)p[5] << 24) | ((uint32_t)p[6] << 16) | ((uint32_t)p[7] << 8) | p[8];
        p += 9;
    } else {
        return;
    }
    if (count < 2)
        return;
    size_t n = value_size(p, e); /* message-id */
    if (!n || p + n > e)
        return;
    p += n;
    if (p + 2 <= e && *p == 0xa0 && p + 2 + p[1] <= e) {
        *uid = p + 2;
        *len = p[1];
    } else if (p + 5 <= e && *p == 0xb0) {
        size_t l = value_size(p, e) - 5;
        if (p + 5 + l <= e) {
            *uid = p + 5;
            *len = l;
        }
    }
}
