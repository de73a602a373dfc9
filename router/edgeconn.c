/* router/edgeconn.c: an edge connection's own layer, on an edge and on an interior (see
 * edgeconn.h).
 *
 * Thread suffixes: _WT = the connection's worker only (every function in this file).
 *
 * DESIGN: the core picks the active edge connection and the proxy links (core/edge.c); this
 * file makes the Proton links it asks for, on one session, as qdrouterd 1.19's edge does:
 *  - ACTIVATE: the uplink (anonymous sender), the downlink (receiver, source = the router id,
 *    capability qd.router-edge-downlink), the tracking receiver (`_$qd.edge_addr_tracking`)
 *    and the heartbeat sender (`_$qd.edge_heartbeat`);
 *  - PROXY_ADD / PROXY_DEL: a receiver whose source is a mobile address (the edge has local
 *    consumers), or a sender whose target is one (local producers), with the qd.waypoint.N or
 *    qd.fallback capability the core asks for (a phase of a waypoint address, a fallback
 *    destination: termcaps.c).
 * The uplink, the downlink and the proxy links are ordinary links (rtr_link_t), announced to
 * the core with attach.edge saying what they are (core_edge_link_t); a proxy link is named
 * to the core by its address's hash key (its phase is in it).  The tracking receiver and the
 * heartbeat sender are Proton links the core never hears of, like the inter-router control
 * links (irconn.c), with router.link rows of their own as qdrouterd shows them (bare.c, on
 * both sides): an arriving tracking message (body [hash key, bool]) becomes CORE_A_EDGE TRACK; every two
 * seconds, while the interior gives credit, a heartbeat (body: an int counter) goes out
 * presettled (a 1.19 interior closes an edge connection that sent none for 8 s).
 * On an interior (c->edge->interior): the edge's tracking receiver and heartbeat sender are
 * answered as bare Proton links (a tracking message per CORE_W_EDGE TRACK_SEND, queued until
 * credit, presettled; heartbeats read, settled and credited, 8 s without one closes the
 * connection), its downlink becomes an ordinary link of address `_edge/<its id>`.
 * The address lookup links (link routes through the interior) are router/edge_lookup.c's:
 * the edge's client on its active connection, the interior's server.
 */
#include "router/edgeconn.h"

#include "core/base/base.h"
#include "router/bare.h"
#include "router/conn.h"
#include "router/edge_lookup.h"
#include "router/edgemsg.h"
#include "router/link_in.h"
#include "router/termcaps.h"

#include <proton/codec.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/link.h>
#include <proton/message.h>
#include <proton/session.h>
#include <proton/terminus.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EDGE_CAP_DOWNLINK "qd.router-edge-downlink"
#define EDGE_TRACKING     "_$qd.edge_addr_tracking"
#define EDGE_HEARTBEAT    "_$qd.edge_heartbeat"
#define EDGE_ADDR_LOOKUP  "_$qd.addr_lookup"
/* Tracking messages waiting for the edge's credit (an interior's; the oldest go first when it
 * is full: each address's latest state is sent again when it changes). */
#define EDGE_TRACK_QUEUE_MAX 100000
/* Credit on an interior's heartbeat receiver (qdrouterd's). */
#define EDGE_HB_CREDIT 2
/* An interior closes an edge connection whose heartbeat link went silent this long
 * (qdrouterd 1.19: 8 s, checked every 2 s). */
#define EDGE_HB_LOST_MS 8000
/* Credit on the tracking receiver (qdrouterd's), topped up by one per message. */
#define EDGE_TRACK_CREDIT 32
/* The largest tracking message read (a hash key and a bool). */
#define EDGE_TRACK_MAX (64u << 10)

typedef struct edge_proxy {
    char    *key;     /* the address's hash key (heap) */
    uint8_t  dir;     /* core_link_dir_t, as the core sees the link */
    uint64_t link_id; /* the rtr_link_t's id (it may be gone) */
} edge_proxy_t;

typedef struct edge_msg {
    uint8_t         *bytes; /* heap */
    size_t           len;
    struct edge_msg *next;
} edge_msg_t;

typedef struct rtr_edge {
    bool          interior;  /* this router is the interior: the edge connected to it */
    pn_link_t    *track_out; /* interior: the edge's tracking receiver, our sender */
    pn_link_t    *hb_in;     /* interior: the edge's heartbeat sender, our receiver */
    uint64_t      hb_last;   /* interior: when the last heartbeat came (loop ms) */
    edge_msg_t   *q_head;    /* interior: tracking messages waiting for credit */
    edge_msg_t   *q_tail;
    uint32_t      q_len;
    bool          announced; /* the core was told the connection opened */
    pn_session_t *ssn;       /* the session of the edge links, once active */
    pn_link_t    *track;     /* the tracking receiver, or NULL */
    pn_link_t    *hb;        /* the heartbeat sender, or NULL */
    uint32_t      hb_seq;    /* the heartbeat counter */
    uint32_t      ticks;     /* sweeps since activation */
    uint64_t      tag;       /* delivery tags on the heartbeat sender */
    uint32_t      n_links;   /* links made (their names) */
    uint8_t      *rx;        /* the tracking message being received */
    size_t        rx_len;
    size_t        rx_cap;
    bool          rx_drop;   /* it is too big: read and forget */
    rtr_elk_t    *elk;       /* the address lookup's links (router/edge_lookup.c), or NULL */
    stats_obj_t   row_track; /* the router.link rows of the four bare links above, as
                                qdrouterd shows them (bare.c; none while the link is not) */
    stats_obj_t   row_hb;
    stats_obj_t   row_track_out;
    stats_obj_t   row_hb_in;
    edge_proxy_t *proxies;   /* the proxy links asked for */
    size_t        n_proxies;
    size_t        cap;
} rtr_edge_t;

static pn_bytes_t bytes_of(const char *s)
{
    return pn_bytes(strlen(s), s);
}

void rtr_edge_init_WT(rtr_conn_t *c)
{
    pn_connection_t *pc = c->driver.connection;
    c->edge = base_calloc(1, sizeof(*c->edge));
    c->edge->interior = !c->connector;
    /* router annotations cross edge connections both ways (qdrouterd ignores
     * stripAnnotations there); an edge writes `to` and `phase` only (link_out.c) */
    c->strip_in = c->strip_out = false;
    pn_data_t *want = pn_connection_desired_capabilities(pc);
    pn_data_put_array(want, false, PN_SYMBOL);
    pn_data_enter(want);
    pn_data_put_symbol(want, bytes_of("ANONYMOUS-RELAY"));
    pn_data_put_symbol(want, bytes_of("qd.streaming-links"));
    pn_data_exit(want);
    /* the open's properties: qd.conn-id and qd.annotations-version after the router's own */
    pn_data_t *props = pn_connection_properties(pc);
    pn_data_rewind(props);
    if (pn_data_next(props) && pn_data_type(props) == PN_MAP) {
        pn_data_enter(props);
        while (pn_data_next(props))
            ;
        pn_data_put_symbol(props, bytes_of("qd.conn-id"));
        pn_data_put_int(props, (int32_t)c->id);
        pn_data_put_symbol(props, bytes_of("qd.annotations-version"));
        pn_data_put_int(props, 1);
        pn_data_exit(props);
    }
}

void rtr_edge_opened_WT(rtr_conn_t *c)
{
    if (c->edge->interior) {
        const char *peer_id = pn_connection_remote_container(c->driver.connection);
        LOGC(c, INFO, "Edge connection from %s (edge router %s)", c->peer,
             peer_id ? peer_id : "?");
        return;
    }
    if (c->edge->announced)
        return;
    c->edge->announced = true;
    /* standby until the core makes it the active one */
    stats_obj_set(c->worker->shard, c->stats, CORE_CONN_EDGE_STANDBY, 1);
    core_action_t *a = rtr_worker_action_WT(c->worker);
    a->type = CORE_A_EDGE;
    a->link_id = 0;
    a->u.edge.conn_id = c->id;
    a->u.edge.event = CORE_EDGE_CONN_OPENED;
    const char *peer_id = pn_connection_remote_container(c->driver.connection);
    LOGC(c, INFO, "Edge connection to %s (interior %s)", c->peer, peer_id ? peer_id : "?");
}

/* A Proton link of the edge session, named as the router names its own. */
static pn_link_t *link_make_WT(rtr_conn_t *c, bool sender, const char *what)
{
    char name[160];
    snprintf(name, sizeof(name), "%s.edge.%llu.%s.%u", c->worker->ctx->router_id,
             (unsigned long long)c->id, what, ++c->edge->n_links);
    pn_link_t *pl = sender ? pn_sender(c->edge->ssn, name) : pn_receiver(c->edge->ssn, name);
    if (sender)
        pn_link_set_snd_settle_mode(pl, PN_SND_MIXED);
    return pl;
}

/* pl becomes an ordinary link the core knows (`address` for it, or NULL; `kind` a
 * core_edge_link_t); it is opened.  Returns its record. */
static rtr_link_t *announce_WT(rtr_conn_t *c, pn_link_t *pl, const char *address, uint8_t kind)
{
    rtr_worker_t *w = c->worker;
    rtr_link_t   *k = rtr_link_new_WT(c, pl, pn_link_is_sender(pl));
    k->zero_since = uv_now(&w->loop) | 1;
    core_action_t *a = rtr_worker_action_WT(w);
    a->type = CORE_A_LINK_ATTACH;
    a->link_id = k->id;
    a->u.attach.conn_id = c->id;
    a->u.attach.handle = k;
    a->u.attach.address = address ? base_strdup(address) : NULL;
    a->u.attach.capacity = c->listener->link_capacity;
    a->u.attach.dir = k->out ? CORE_LINK_OUT : CORE_LINK_IN;
    a->u.attach.name = pn_link_name(pl) ? base_strdup(pn_link_name(pl)) : NULL;
    a->u.attach.edge = kind;
    k->at_core = true;
    pn_link_open(pl);
    return k;
}

static void caps_set_WT(pn_terminus_t *t, const char *cap)
{
    pn_data_t *caps = pn_terminus_capabilities(t);
    pn_data_clear(caps);
    pn_data_put_symbol(caps, bytes_of(cap));
}

static void activate_WT(rtr_conn_t *c)
{
    rtr_edge_t *e = c->edge;
    if (e->ssn)
        return;
    stats_obj_set(c->worker->shard, c->stats, CORE_CONN_EDGE_STANDBY, 0);
    e->ssn = pn_session(c->driver.connection);
    pn_session_set_incoming_capacity(e->ssn, RTR_CONN_IN_MAX);
    pn_session_open(e->ssn);
    /* the uplink: everything whose destination is not here */
    pn_link_t *pl = link_make_WT(c, true, "uplink");
    announce_WT(c, pl, NULL, CORE_EDGE_LINK_UPLINK);
    /* the downlink: what the interior routes to this router (_edge/<id>/...) */
    pl = link_make_WT(c, false, "downlink");
    pn_terminus_set_address(pn_link_source(pl), c->worker->ctx->router_id);
    caps_set_WT(pn_link_source(pl), EDGE_CAP_DOWNLINK);
    caps_set_WT(pn_link_target(pl), EDGE_CAP_DOWNLINK);
    announce_WT(c, pl, NULL, CORE_EDGE_LINK_PEER);
    /* the interior's address tracking */
    e->track = link_make_WT(c, false, "tracking");
    pn_terminus_set_address(pn_link_source(e->track), EDGE_TRACKING);
    pn_link_open(e->track);
    pn_link_flow(e->track, EDGE_TRACK_CREDIT);
    uint32_t cap = c->listener->link_capacity;
    e->row_track = rtr_bare_row_new_WT(c, e->track, "", "endpoint", "4", cap, EDGE_TRACK_CREDIT);
    /* the heartbeat */
    e->hb = link_make_WT(c, true, "heartbeat");
    pn_terminus_set_address(pn_link_target(e->hb), EDGE_HEARTBEAT);
    pn_link_set_snd_settle_mode(e->hb, PN_SND_SETTLED);
    pn_link_open(e->hb);
    rtr_elk_client_start_WT(c, &e->elk, e->ssn); /* link routes through the interior */
    e->row_hb = rtr_bare_row_new_WT(c, e->hb, "", "endpoint", "4", cap, 0);
    e->ticks = 0;
    LOGC(c, INFO, "Edge connection active: uplink, downlink, tracking and heartbeat attaching");
    rtr_conn_mark_dirty_WT(c);
}

static rtr_link_t *link_by_id_WT(rtr_conn_t *c, uint64_t id)
{
    for (rtr_link_t *k = c->links; k; k = k->next)
        if (k->id == id)
            return k;
    return NULL;
}

static edge_proxy_t *proxy_find_WT(rtr_edge_t *e, const char *key, uint8_t dir)
{
    for (size_t i = 0; i < e->n_proxies; i++)
        if (e->proxies[i].dir == dir && strcmp(e->proxies[i].key, key) == 0)
            return &e->proxies[i];
    return NULL;
}

static void proxy_del_WT(rtr_conn_t *c, const char *key, uint8_t dir)
{
    rtr_edge_t   *e = c->edge;
    edge_proxy_t *p = proxy_find_WT(e, key, dir);
    if (!p)
        return;
    rtr_link_t *k = link_by_id_WT(c, p->link_id);
    free(p->key);
    *p = e->proxies[--e->n_proxies];
    if (k && k->pn) {
        LOGL(k, DEBUG, "Edge proxy link detached: %s", key);
        pn_link_close(k->pn);
        rtr_link_cleanup_WT(k); /* may free k */
        rtr_conn_mark_dirty_WT(c);
    }
}

static void proxy_add_WT(rtr_conn_t *c, const char *key, uint8_t dir, uint8_t waypoint,
                         bool fallback)
{
    rtr_edge_t *e = c->edge;
    if (!e->ssn || strlen(key) < 3)
        return;
    edge_proxy_t *p = proxy_find_WT(e, key, dir);
    if (p) {
        rtr_link_t *old = link_by_id_WT(c, p->link_id);
        if (old && old->pn)
            return; /* it is there */
        proxy_del_WT(c, key, dir);
    }
    const char *address = key + 2; /* the mobile address: the key without class and phase */
    bool        out = dir == CORE_LINK_OUT;
    pn_link_t  *pl = link_make_WT(c, out, out ? "proxy-out" : "proxy-in");
    pn_terminus_t *t = out ? pn_link_target(pl) : pn_link_source(pl);
    pn_terminus_set_address(t, address);
    /* the phase of a waypoint address, a fallback destination (the core says which) */
    rtr_termcaps_write(t, waypoint, fallback);
    /* both are named to the core by the address's key (its phase is in it); a proxy sender
     * joins the address when the interior says so */
    rtr_link_t *k = announce_WT(c, pl, key,
                                out ? CORE_EDGE_LINK_PROXY_OUT : CORE_EDGE_LINK_PROXY_IN);
    if (e->n_proxies == e->cap) {
        e->cap = e->cap ? e->cap * 2 : 16;
        e->proxies = base_realloc(e->proxies, e->cap * sizeof(*e->proxies));
    }
    e->proxies[e->n_proxies++] = (edge_proxy_t){.key = base_strdup(key), .dir = dir,
                                                .link_id = k->id};
    LOGL(k, DEBUG, "Edge proxy link attaching: %s %s%s", out ? "sender to" : "receiver from",
         address, fallback ? " (qd.fallback)" : waypoint ? " (qd.waypoint)" : "");
    rtr_conn_mark_dirty_WT(c);
}

/* Interior: send what waits while the edge's tracking receiver gives credit. */
static void track_pump_WT(rtr_conn_t *c)
{
    rtr_edge_t *e = c->edge;
    pn_link_t  *pl = e->track_out;
    if (!pl || !(pn_link_state(pl) & PN_REMOTE_ACTIVE))
        return;
    while (e->q_head && pn_link_credit(pl) > 0) {
        edge_msg_t *m = e->q_head;
        e->q_head = m->next;
        if (!e->q_head)
            e->q_tail = NULL;
        e->q_len--;
        uint64_t       tag = e->tag++;
        pn_delivery_t *d = pn_delivery(pl, pn_dtag((const char *)&tag, sizeof(tag)));
        pn_link_send(pl, (const char *)m->bytes, m->len);
        pn_link_advance(pl);
        pn_delivery_settle(d); /* presettled: the edge settles them at once anyway */
        rtr_bare_row_delivery_WT(c, e->row_track_out, true);
        free(m->bytes);
        free(m);
    }
    rtr_bare_row_credit_WT(c, e->row_track_out, pn_link_credit(pl));
    rtr_conn_mark_dirty_WT(c);
}

/* Interior: the tracking message [key, dest] for the edge (body: an amqp-value list). */
static void track_send_WT(rtr_conn_t *c, const char *key, bool dest)
{
    rtr_edge_t *e = c->edge;
    size_t      len = 0;
    uint8_t    *buf = rtr_edgemsg_track_encode(key, dest, &len);
    if (!buf)
        return;
    edge_msg_t *em = base_malloc(sizeof(*em));
    em->bytes = buf;
    em->len = len;
    em->next = NULL;
    if (e->q_tail)
        e->q_tail->next = em;
    else
        e->q_head = em;
    e->q_tail = em;
    if (++e->q_len > EDGE_TRACK_QUEUE_MAX) {
        edge_msg_t *old = e->q_head;
        e->q_head = old->next;
        e->q_len--;
        free(old->bytes);
        free(old);
    }
    LOGC(c, DEBUG, "Edge address tracking to the edge: %s %s", key,
         dest ? "has destinations" : "has none");
    track_pump_WT(c);
}

static bool address_is(pn_terminus_t *t, const char *want)
{
    const char *a = pn_terminus_get_address(t);
    return a && strcmp(a, want) == 0;
}

/* Interior: the edge attaches; its tracking receiver and heartbeat sender are ours, its
 * downlink is an ordinary link bound to `_edge/<id>`, its address lookup sender the lookup
 * server's (router/edge_lookup.c).  Returns true when handled. */
static bool interior_attach_WT(rtr_conn_t *c, pn_link_t *pl)
{
    rtr_edge_t    *e = c->edge;
    bool           rcv = pn_link_is_receiver(pl);
    pn_terminus_t *src = pn_link_remote_source(pl), *tgt = pn_link_remote_target(pl);
    if (rcv && address_is(tgt, EDGE_ADDR_LOOKUP)) {
        rtr_elk_server_attach_WT(c, &e->elk, pl);
        return true;
    }
    bool hb = rcv && address_is(tgt, EDGE_HEARTBEAT) && !e->hb_in;
    bool track = !rcv && address_is(src, EDGE_TRACKING) && !e->track_out;
    bool down = !rcv && rtr_termcaps_first_is(src, EDGE_CAP_DOWNLINK) && pn_terminus_get_address(src);
    if (!hb && !track && !down)
        return false;
    pn_terminus_copy(pn_link_source(pl), src);
    pn_terminus_copy(pn_link_target(pl), tgt);
    pn_link_set_snd_settle_mode(pl, pn_link_remote_snd_settle_mode(pl));
    pn_link_set_rcv_settle_mode(pl, pn_link_remote_rcv_settle_mode(pl));
    if (down) {
        /* the core opens it with its answer (conn.c, CORE_W_LINK_ATTACHED) */
        rtr_worker_t *w = c->worker;
        rtr_link_t   *k = rtr_link_new_WT(c, pl, true);
        k->zero_since = uv_now(&w->loop) | 1;
        char addr[300];
        snprintf(addr, sizeof(addr), "_edge/%s", pn_terminus_get_address(src));
        core_action_t *a = rtr_worker_action_WT(w);
        a->type = CORE_A_LINK_ATTACH;
        a->link_id = k->id;
        a->u.attach.conn_id = c->id;
        a->u.attach.handle = k;
        a->u.attach.address = base_strdup(addr);
        a->u.attach.capacity = c->listener->link_capacity;
        a->u.attach.dir = CORE_LINK_OUT;
        a->u.attach.name = pn_link_name(pl) ? base_strdup(pn_link_name(pl)) : NULL;
        a->u.attach.edge = CORE_EDGE_LINK_DOWNLINK;
        k->at_core = true;
        LOGL(k, INFO, "Edge downlink attaching: outgoing from %s", addr);
        return true;
    }
    pn_link_open(pl);
    uint32_t cap = c->listener->link_capacity;
    if (hb) {
        e->hb_in = pl;
        e->hb_last = uv_now(&c->worker->loop);
        pn_link_flow(pl, EDGE_HB_CREDIT);
        /* qdrouterd's interior shows them owned by their mobile addresses */
        e->row_hb_in = rtr_bare_row_new_WT(c, pl, "M0" EDGE_HEARTBEAT, "endpoint", "4", cap,
                                           EDGE_HB_CREDIT);
        LOGC(c, INFO, "Edge attached to the heartbeat server");
    } else {
        e->track_out = pl;
        e->row_track_out = rtr_bare_row_new_WT(c, pl, "M0" EDGE_TRACKING, "endpoint", "4", cap,
                                               0);
        track_pump_WT(c);
    }
    rtr_conn_mark_dirty_WT(c);
    return true;
}

void rtr_edge_work_WT(rtr_worker_t *w, core_work_t *work)
{
    char       *key = work->u.edge.key;
    rtr_conn_t *c = w->conns;
    while (c && c->id != work->u.edge.conn_id)
        c = c->next;
    if (c && c->edge && !c->closing && !w->stopping &&
        !(pn_connection_state(c->driver.connection) & PN_LOCAL_CLOSED)) {
        switch ((core_edge_op_t)work->u.edge.op) {
        case CORE_EDGE_ACTIVATE:
            activate_WT(c);
            break;
        case CORE_EDGE_PROXY_ADD:
            if (key)
                proxy_add_WT(c, key, work->u.edge.dir, work->u.edge.waypoint,
                             work->u.edge.fallback);
            break;
        case CORE_EDGE_PROXY_DEL:
            if (key)
                proxy_del_WT(c, key, work->u.edge.dir);
            break;
        case CORE_EDGE_TRACK_SEND:
            if (key && c->edge->interior)
                track_send_WT(c, key, work->u.edge.flag);
            break;
        case CORE_EDGE_LOOKUP_ASK:
        case CORE_EDGE_LOOKUP_ANSWER:
            rtr_elk_work_WT(c, &c->edge->elk, work); /* may take the key */
            key = work->u.edge.key;
            break;
        }
    }
    free(key);
}

/* The body of a tracking message: [hash key, bool].  Posts CORE_A_EDGE TRACK; false when
 * the message is not one. */
static bool track_msg_WT(rtr_conn_t *c, const uint8_t *bytes, size_t len)
{
    bool  dest = false;
    char *key = rtr_edgemsg_track_parse(bytes, len, &dest);
    if (!key)
        return false;
    LOGC(c, DEBUG, "Edge address tracking: %s %s", key, dest ? "has destinations" : "has none");
    core_action_t *a = rtr_worker_action_WT(c->worker);
    a->type = CORE_A_EDGE;
    a->link_id = 0;
    a->u.edge.conn_id = c->id;
    a->u.edge.event = CORE_EDGE_TRACK;
    a->u.edge.flag = dest;
    a->u.edge.key = key; /* the core frees it */
    return true;
}

static void track_delivery_WT(rtr_conn_t *c, pn_delivery_t *d)
{
    rtr_edge_t *e = c->edge;
    pn_link_t  *pl = pn_delivery_link(d);
    if (!rtr_bare_gather_WT(d, EDGE_TRACK_MAX, &e->rx, &e->rx_len, &e->rx_cap, &e->rx_drop))
        return;
    rtr_bare_row_delivery_WT(c, e->row_track, pn_delivery_settled(d));
    bool ok = !e->rx_drop && track_msg_WT(c, e->rx, e->rx_len);
    if (!ok)
        LOGC(c, ERROR, "Edge address tracking: invalid message body, rejected");
    e->rx_len = 0;
    e->rx_drop = false;
    if (!pn_delivery_settled(d))
        pn_delivery_update(d, ok ? PN_ACCEPTED : PN_REJECTED);
    pn_delivery_settle(d);
    pn_link_flow(pl, 1);
}

/* Retire the router.link rows of the bare links c->edge no longer has. */
static void rows_sync_WT(rtr_conn_t *c)
{
    rtr_edge_t *e = c->edge;
    if (!e->track)
        rtr_bare_row_retire_WT(c, &e->row_track);
    if (!e->hb)
        rtr_bare_row_retire_WT(c, &e->row_hb);
    if (!e->track_out)
        rtr_bare_row_retire_WT(c, &e->row_track_out);
    if (!e->hb_in)
        rtr_bare_row_retire_WT(c, &e->row_hb_in);
}

static void heartbeat_WT(rtr_conn_t *c)
{
    rtr_edge_t *e = c->edge;
    if (!e->hb || !(pn_link_state(e->hb) & PN_REMOTE_ACTIVE) || pn_link_credit(e->hb) <= 0)
        return;
    uint8_t body[RTR_EDGEMSG_HB_LEN];
    rtr_edgemsg_heartbeat(e->hb_seq++, body);
    uint64_t       tag = e->tag++;
    pn_delivery_t *d = pn_delivery(e->hb, pn_dtag((const char *)&tag, sizeof(tag)));
    pn_link_send(e->hb, (const char *)body, sizeof(body));
    pn_link_advance(e->hb);
    pn_delivery_settle(d);
    rtr_bare_row_delivery_WT(c, e->row_hb, true);
    rtr_bare_row_credit_WT(c, e->row_hb, pn_link_credit(e->hb));
    rtr_conn_mark_dirty_WT(c);
}

void rtr_edge_sweep_WT(rtr_worker_t *w)
{
    uint64_t now = uv_now(&w->loop);
    for (rtr_conn_t *c = w->conns; c; c = c->next) {
        rtr_edge_t *e = c->edge;
        if (!e || c->closing)
            continue;
        if (e->hb && ++e->ticks % 2 == 0)
            heartbeat_WT(c);
        if (e->elk)
            rtr_elk_sweep_WT(c, e->elk, now);
        if (e->hb_in && now - e->hb_last > EDGE_HB_LOST_MS) {
            const char *peer = pn_connection_remote_container(c->driver.connection);
            LOGC(c, INFO, "Lost heartbeat from container %s, closing connection",
                 peer ? peer : "?");
            e->hb_in = NULL; /* once */
            rows_sync_WT(c);
            rtr_pn_conn_set_error_WT(c->driver.connection, "amqp:connection:forced",
                                     "Lost heartbeat");
            rtr_conn_close_WT(c);
        }
    }
}

/* Forget a worker-only link of c->edge that is going away. */
static void forget_WT(rtr_edge_t *e, pn_link_t *pl)
{
    if (pl == e->track)
        e->track = NULL;
    if (pl == e->hb)
        e->hb = NULL;
    if (pl == e->track_out)
        e->track_out = NULL;
    if (pl == e->hb_in)
        e->hb_in = NULL;
}

static bool own_link(const rtr_edge_t *e, const pn_link_t *pl)
{
    return pl && (pl == e->track || pl == e->hb || pl == e->track_out || pl == e->hb_in);
}

/* Interior: a heartbeat arrived: read it, settle it, credit for the next. */
static void hb_delivery_WT(rtr_conn_t *c, pn_delivery_t *d)
{
    pn_link_t *pl = pn_delivery_link(d);
    char       buf[256];
    while (rtr_link_recv_WT(pl, buf, sizeof(buf)) > 0)
        ;
    if (pn_delivery_partial(d))
        return;
    rtr_bare_row_delivery_WT(c, c->edge->row_hb_in, pn_delivery_settled(d));
    if (!pn_delivery_settled(d))
        pn_delivery_update(d, PN_ACCEPTED);
    pn_delivery_settle(d);
    pn_link_flow(pl, 1);
}

bool rtr_edge_event_WT(rtr_conn_t *c, pn_event_t *e)
{
    rtr_edge_t *ed = c->edge;
    if (ed->elk && rtr_elk_event_WT(c, ed->elk, e))
        return true;
    switch (pn_event_type(e)) {
    case PN_LINK_REMOTE_OPEN:
    case PN_LINK_FLOW: {
        pn_link_t *pl = pn_event_link(e);
        if (ed->interior && pn_event_type(e) == PN_LINK_REMOTE_OPEN && !own_link(ed, pl) &&
            !pn_link_get_context(pl) && (pn_link_state(pl) & PN_LOCAL_UNINIT) &&
            !(pn_connection_state(c->driver.connection) & PN_LOCAL_CLOSED))
            return interior_attach_WT(c, pl);
        if (pl == ed->track_out) {
            track_pump_WT(c);
            return true;
        }
        if (pl == ed->hb_in)
            return true;
        if (pl != ed->track && pl != ed->hb)
            return false;
        if (pl == ed->hb)
            rtr_bare_row_credit_WT(c, ed->row_hb, pn_link_credit(pl));
        if (pl == ed->hb && pn_event_type(e) == PN_LINK_REMOTE_OPEN && ed->hb_seq == 0)
            heartbeat_WT(c); /* the first at once: the interior counts from the attach */
        return true;
    }
    case PN_DELIVERY: {
        pn_delivery_t *d = pn_event_delivery(e);
        pn_link_t     *pl = pn_delivery_link(d);
        if (pl == ed->track) {
            track_delivery_WT(c, d);
            return true;
        }
        if (pl == ed->hb || pl == ed->track_out) {
            if (pn_delivery_updated(d))
                pn_delivery_settle(d);
            return true;
        }
        if (pl == ed->hb_in) {
            ed->hb_last = uv_now(&c->worker->loop);
            hb_delivery_WT(c, d);
            return true;
        }
        return false;
    }
    case PN_LINK_REMOTE_CLOSE:
    case PN_LINK_REMOTE_DETACH: {
        pn_link_t *pl = pn_event_link(e);
        if (!own_link(ed, pl))
            return false;
        LOGC(c, INFO, "Edge %s link detached by the %s",
             pl == ed->track || pl == ed->track_out ? "tracking" : "heartbeat",
             ed->interior ? "edge" : "interior");
        forget_WT(ed, pl);
        rows_sync_WT(c);
        if (pn_event_type(e) == PN_LINK_REMOTE_CLOSE)
            pn_link_close(pl);
        else
            pn_link_detach(pl);
        pn_link_free(pl);
        return true;
    }
    case PN_SESSION_REMOTE_CLOSE: {
        pn_session_t *s = pn_event_session(e);
        if (s == ed->ssn) {
            ed->track = ed->hb = NULL; /* conn.c frees the session, Proton its links */
            ed->ssn = NULL;
        }
        if (ed->track_out && pn_link_session(ed->track_out) == s)
            ed->track_out = NULL;
        if (ed->hb_in && pn_link_session(ed->hb_in) == s)
            ed->hb_in = NULL;
        rows_sync_WT(c);
        return false;
    }
    case PN_CONNECTION_REMOTE_CLOSE:
    case PN_TRANSPORT_CLOSED:
        ed->track = ed->hb = ed->track_out = ed->hb_in = NULL;
        rows_sync_WT(c);
        return false;
    default:
        return false;
    }
}

void rtr_edge_free_WT(rtr_conn_t *c)
{
    rtr_edge_t *e = c->edge;
    if (!e)
        return;
    if (e->announced) {
        core_action_t *a = rtr_worker_action_WT(c->worker);
        a->type = CORE_A_EDGE;
        a->link_id = 0;
        a->u.edge.conn_id = c->id;
        a->u.edge.event = CORE_EDGE_CONN_CLOSED;
    }
    while (e->q_head) {
        edge_msg_t *m = e->q_head;
        e->q_head = m->next;
        free(m->bytes);
        free(m);
    }
    e->track = e->hb = e->track_out = e->hb_in = NULL;
    rows_sync_WT(c);
    for (size_t i = 0; i < e->n_proxies; i++)
        free(e->proxies[i].key);
    free(e->proxies);
    free(e->rx);
    rtr_elk_free(e->elk);
    BASE_FREE(c->edge);
}
