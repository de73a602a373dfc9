/* router/irconn.c: an inter-router connection's own layer (see irconn.h).
 *
 * Thread suffixes: _WT = the connection's worker only (every function in this file).
 *
 * DESIGN: the control links are Proton links without an rtr_link_t: the core never hears
 * of them as links.  They are listed in c->ir, found by their pn_link_t, forgotten (removed)
 * when the peer detaches them or their session ends.  The data links are ordinary links
 * (rtr_link_t, conn.c and link_in.c/link_out.c carry their deliveries and outcomes), announced
 * to the core with attach.ir_link and their priority (core/interior.h): the core's forwarder
 * sends its copies for other routers on them and routes what arrives on them by the
 * message's router annotations, which cross these connections unstripped.  The outgoing
 * control link's queue holds the core's messages until there is credit (at most
 * RTR_IR_QUEUE_MAX; the oldest go first when it is full: HELLO and RA come again anyway).
 * The incoming control link's message being received is gathered in one buffer (routing
 * messages are small; one larger than RTR_IR_MSG_MAX is dropped).
 */
#include "router/irconn.h"

#include "core/base/base.h"
#include "core/interior.h"
#include "router/bare.h"
#include "router/link_in.h"
#include "router/termcaps.h"

#include <proton/codec.h>
#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/link.h>
#include <proton/session.h>
#include <proton/terminus.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Credit granted on incoming inter-router links (qdrouterd's default linkCapacity). */
#define RTR_IR_CREDIT 250
/* Messages waiting for the outgoing control link's credit. */
#define RTR_IR_QUEUE_MAX 1000
/* The largest routing message read. */
#define RTR_IR_MSG_MAX (16u << 20)
/* Data-link priorities (qdrouterd: 10, 0 to 9). */
#define RTR_IR_PRIORITIES 10

typedef enum ir_kind {
    IR_CTL_IN = 0, /* control link, the router receives */
    IR_CTL_OUT,    /* control link, the router sends */
} ir_kind_t;

typedef struct ir_link {
    pn_link_t  *pn;    /* the Proton link */
    uint8_t     kind;  /* ir_kind_t */
    stats_obj_t stats; /* its router.link row (linkType router-control) */
} ir_link_t;

typedef struct ir_msg {
    uint8_t       *bytes; /* heap */
    uint32_t       len;
    struct ir_msg *next;
} ir_msg_t;

typedef struct rtr_ir {
    ir_link_t *links;      /* every live link of this layer */
    size_t     n_links;    /* used entries */
    size_t     cap;        /* allocated */
    pn_link_t *ctl_in;     /* the incoming control link, or NULL */
    pn_link_t *ctl_out;    /* the outgoing control link, or NULL */
    int        n_data_in;  /* data receivers attached so far (priorities given) */
    int        n_data_out; /* data senders attached so far */
    bool       announced;  /* the core was told the connection opened */
    bool       ctl_lost;   /* the core was told the control links went */
    int64_t    cost;       /* effective cost */
    ir_msg_t  *q_head;     /* messages waiting for credit */
    ir_msg_t  *q_tail;
    uint32_t   q_len;      /* their count */
    uint64_t   tag;        /* delivery tags on the outgoing control link */
    uint8_t   *rx;         /* the control message being received */
    size_t     rx_len;
    size_t     rx_cap;
    bool       rx_drop;    /* it is too big: read and forget */
} rtr_ir_t;

#define RTR_IR_CAPS_CTL  "qd.router"
#define RTR_IR_CAPS_DATA "qd.router-data"

static pn_bytes_t bytes_of(const char *s)
{
    return pn_bytes(strlen(s), s);
}

/* Append one symbol to the array or map that d holds at its top level. */
static void data_append_WT(pn_data_t *d, const char *key_or_sym, bool map_int, int64_t v)
{
    pn_data_rewind(d);
    if (!pn_data_next(d))
        return;
    pn_data_enter(d);
    while (pn_data_next(d))
        ;
    pn_data_put_symbol(d, bytes_of(key_or_sym));
    if (map_int)
        pn_data_put_int(d, (int32_t)v);
    pn_data_exit(d);
}

void rtr_ir_init_WT(rtr_conn_t *c)
{
    pn_connection_t *pc = c->driver.connection;
    c->ir = base_calloc(1, sizeof(*c->ir));
    c->ir->cost = c->listener->cost > 0 ? c->listener->cost : 1;
    /* router annotations cross inter-router connections both ways, whatever the
     * configuration says (qdrouterd ignores stripAnnotations there) */
    c->strip_in = c->strip_out = false;
    data_append_WT(pn_connection_offered_capabilities(pc), "qd.streaming-links", false, 0);
    pn_data_t *want = pn_connection_desired_capabilities(pc);
    pn_data_put_array(want, false, PN_SYMBOL);
    pn_data_enter(want);
    pn_data_put_symbol(want, bytes_of("ANONYMOUS-RELAY"));
    pn_data_put_symbol(want, bytes_of("qd.streaming-links"));
    pn_data_exit(want);
    pn_data_t *props = pn_connection_properties(pc);
    data_append_WT(props, "qd.conn-id", true, (int64_t)c->id);
    if (c->ir->cost > 1) /* qdrouterd sends it only then */
        data_append_WT(props, "qd.inter-router-cost", true, c->ir->cost);
    data_append_WT(props, "qd.annotations-version", true, 1);
}

/* The peer's qd.inter-router-cost when it is an AMQP int, else 0. */
static int64_t peer_cost_WT(pn_connection_t *pc)
{
    pn_data_t *d = pn_connection_remote_properties(pc);
    int64_t    cost = 0;
    pn_data_rewind(d);
    if (!pn_data_next(d) || pn_data_type(d) != PN_MAP)
        return 0;
    pn_data_enter(d);
    while (pn_data_next(d)) {
        /* qdrouterd stops at the first key that is not a symbol */
        if (pn_data_type(d) != PN_SYMBOL)
            break;
        pn_bytes_t k = pn_data_get_symbol(d);
        if (!pn_data_next(d))
            break;
        if (k.size == 20 && memcmp(k.start, "qd.inter-router-cost", 20) == 0 &&
            pn_data_type(d) == PN_INT)
            cost = pn_data_get_int(d);
    }
    pn_data_exit(d);
    return cost;
}

/* A control link's router.link row, as qdrouterd shows it: type router-control, priority
 * 9, the outgoing one owned by the hello address (`Lqdhello`).  Its deliveries and credit
 * count there; it is retired when the link is forgotten. */
static void ctl_stats_WT(rtr_conn_t *c, ir_link_t *l)
{
    rtr_worker_t *w = c->worker;
    char          id[24], conn[24];
    snprintf(id, sizeof(id), "%llu",
             (unsigned long long)atomic_fetch_add(&w->ctx->next_link_id, 1) + 1);
    snprintf(conn, sizeof(conn), "%llu", (unsigned long long)c->id);
    const char         *name = pn_link_name(l->pn);
    bool                out = l->kind == IR_CTL_OUT;
    const char         *labels[] = {id, conn, out ? "out" : "in", out ? "Lqdhello" : "",
                                    name ? name : "", "router-control", "9"};
    const core_stats_t *cs = w->ctx->stats;
    core_stats_object_new(cs, cs->link, labels, &l->stats);
    stats_obj_set(w->shard, l->stats, CORE_LINK_CAPACITY, RTR_IR_CREDIT);
    /* the incoming one's credit is topped up to RTR_IR_CREDIT per message */
    stats_obj_set(w->shard, l->stats, CORE_LINK_CREDIT, out ? 0 : RTR_IR_CREDIT);
}

static ir_link_t *link_add_WT(rtr_conn_t *c, pn_link_t *pl, ir_kind_t kind)
{
    rtr_ir_t *ir = c->ir;
    if (ir->n_links == ir->cap) {
        ir->cap = ir->cap ? ir->cap * 2 : 32;
        ir->links = base_realloc(ir->links, ir->cap * sizeof(*ir->links));
    }
    ir_link_t *l = &ir->links[ir->n_links++];
    l->pn = pl;
    l->kind = (uint8_t)kind;
    if (kind == IR_CTL_IN)
        ir->ctl_in = pl;
    else if (kind == IR_CTL_OUT)
        ir->ctl_out = pl;
    l->stats = (stats_obj_t){0};
    ctl_stats_WT(c, l);
    return l;
}

static ir_link_t *link_find_WT(rtr_ir_t *ir, pn_link_t *pl)
{
    for (size_t i = 0; i < ir->n_links; i++)
        if (ir->links[i].pn == pl)
            return &ir->links[i];
    return NULL;
}

/* The terminus shape of every inter-router link: no address, one bare capability symbol. */
static void terminus_set_WT(pn_terminus_t *t, const char *cap)
{
    pn_terminus_set_address(t, NULL);
    pn_data_t *caps = pn_terminus_capabilities(t);
    pn_data_clear(caps);
    pn_data_put_symbol(caps, bytes_of(cap));
}

static pn_link_t *attach_WT(rtr_conn_t *c, pn_session_t *s, bool sender, const char *cap,
                            const char *what)
{
    char name[96];
    snprintf(name, sizeof(name), "qdlink.%s.%llu.%s", c->worker->ctx->router_id,
             (unsigned long long)c->id, what);
    pn_link_t *pl = sender ? pn_sender(s, name) : pn_receiver(s, name);
    terminus_set_WT(pn_link_source(pl), cap);
    terminus_set_WT(pn_link_target(pl), cap);
    if (sender)
        pn_link_set_snd_settle_mode(pl, PN_SND_MIXED);
    pn_link_open(pl);
    if (!sender && strcmp(cap, RTR_IR_CAPS_CTL) == 0)
        pn_link_flow(pl, RTR_IR_CREDIT); /* a data link's credit is the core's */
    return pl;
}

/* Data link pl (of priority prio, 0-9; -1 for a streaming link, which the forwarder does not
 * send on) becomes an ordinary link the core knows as this connection's data link. */
static void data_link_WT(rtr_conn_t *c, pn_link_t *pl, int prio)
{
    rtr_worker_t *w = c->worker;
    rtr_link_t   *k = rtr_link_new_WT(c, pl, pn_link_is_sender(pl));
    k->zero_since = uv_now(&w->loop) | 1;
    core_action_t *a = rtr_worker_action_WT(w);
    a->type = CORE_A_LINK_ATTACH;
    a->link_id = k->id;
    a->u.attach.conn_id = c->id;
    a->u.attach.handle = k;
    a->u.attach.address = NULL;
    a->u.attach.capacity = c->listener->link_capacity;
    a->u.attach.dir = k->out ? CORE_LINK_OUT : CORE_LINK_IN;
    a->u.attach.name = pn_link_name(pl) ? base_strdup(pn_link_name(pl)) : NULL;
    a->u.attach.ir_link = CORE_IR_LINK_DATA;
    a->u.attach.ir_priority = (uint8_t)(prio >= 0 ? prio : CORE_RT_PRIORITIES);
    k->at_core = true;
    LOGL(k, DEBUG, "Inter-router data link attaching (%s, priority %d)",
         k->out ? "outgoing" : "incoming", prio);
}

static pn_session_t *session_WT(rtr_conn_t *c)
{
    pn_session_t *s = pn_session(c->driver.connection);
    pn_session_set_incoming_capacity(s, RTR_CONN_IN_MAX);
    pn_session_open(s);
    return s;
}

/* The connector's side: the links qdrouterd attaches, in its order. */
static void attach_all_WT(rtr_conn_t *c)
{
    rtr_ir_t     *ir = c->ir;
    pn_session_t *s = session_WT(c);
    link_add_WT(c, attach_WT(c, s, false, RTR_IR_CAPS_CTL, "ctl-in"), IR_CTL_IN);
    link_add_WT(c, attach_WT(c, s, true, RTR_IR_CAPS_CTL, "ctl-out"), IR_CTL_OUT);
    for (int p = 0; p < RTR_IR_PRIORITIES; p++) {
        char in[24], out[24];
        snprintf(in, sizeof(in), "data-in.%d", p);
        snprintf(out, sizeof(out), "data-out.%d", p);
        s = session_WT(c);
        data_link_WT(c, attach_WT(c, s, false, RTR_IR_CAPS_DATA, in), p);
        data_link_WT(c, attach_WT(c, s, true, RTR_IR_CAPS_DATA, out), p);
    }
    ir->n_data_in = ir->n_data_out = RTR_IR_PRIORITIES;
}

void rtr_ir_opened_WT(rtr_conn_t *c)
{
    rtr_ir_t *ir = c->ir;
    if (ir->announced)
        return;
    int64_t peer = peer_cost_WT(c->driver.connection);
    if (peer > ir->cost)
        ir->cost = peer;
    core_action_t *a = rtr_worker_action_WT(c->worker);
    a->type = CORE_A_RT;
    a->link_id = 0;
    a->u.rt.conn_id = c->id;
    a->u.rt.event = CORE_RT_CONN_OPENED;
    a->u.rt.cost = ir->cost;
    a->u.rt.bytes = NULL;
    a->u.rt.len = 0;
    ir->announced = true;
    const char *peer_id = pn_connection_remote_container(c->driver.connection);
    LOGC(c, INFO, "Inter-router connection %s %s (router %s, cost %lld)",
         c->connector ? "to" : "from", c->peer, peer_id ? peer_id : "?", (long long)ir->cost);
    if (c->connector)
        attach_all_WT(c);
}

static void post_rt_WT(rtr_conn_t *c, core_rt_event_t ev, uint8_t *bytes, uint32_t len)
{
    core_action_t *a = rtr_worker_action_WT(c->worker);
    a->type = CORE_A_RT;
    a->link_id = 0;
    a->u.rt.conn_id = c->id;
    a->u.rt.event = (uint8_t)ev;
    a->u.rt.cost = 0;
    a->u.rt.bytes = bytes;
    a->u.rt.len = len;
}

/* A control link went: the neighbour on this connection is lost at once (qdrouterd's
 * link_lost), without waiting for its HELLOs to age. */
static void ctl_lost_WT(rtr_conn_t *c)
{
    rtr_ir_t *ir = c->ir;
    if (ir->ctl_lost || !ir->announced)
        return;
    ir->ctl_lost = true;
    post_rt_WT(c, CORE_RT_CTL_LOST, NULL, 0);
    LOGC(c, INFO, "Inter-router control link lost");
}

/* Forget l (an entry of c->ir->links; the last entry takes its place, so a connection
 * whose peer keeps making and dropping streaming links holds only the live ones). */
static void forget_WT(rtr_conn_t *c, ir_link_t *l)
{
    rtr_ir_t *ir = c->ir;
    if (l->pn == ir->ctl_in || l->pn == ir->ctl_out) {
        if (l->pn == ir->ctl_in)
            ir->ctl_in = NULL;
        else
            ir->ctl_out = NULL;
        ctl_lost_WT(c);
    }
    stats_object_retire(c->worker->ctx->stats->reg, l->stats); /* after its last write */
    *l = ir->links[--ir->n_links];
}

/* The listener's side: the peer attaches; answer and classify. */
static bool remote_attach_WT(rtr_conn_t *c, pn_link_t *pl)
{
    rtr_ir_t      *ir = c->ir;
    bool           rcv = pn_link_is_receiver(pl);
    pn_terminus_t *t = rcv ? pn_link_remote_target(pl) : pn_link_remote_source(pl);
    bool           ctl = rtr_termcaps_first_is(t, RTR_IR_CAPS_CTL);
    if (!ctl && !rtr_termcaps_first_is(t, RTR_IR_CAPS_DATA))
        return false;
    pn_terminus_copy(pn_link_source(pl), pn_link_remote_source(pl));
    pn_terminus_copy(pn_link_target(pl), pn_link_remote_target(pl));
    pn_link_set_snd_settle_mode(pl, pn_link_remote_snd_settle_mode(pl));
    pn_link_set_rcv_settle_mode(pl, pn_link_remote_rcv_settle_mode(pl));
    if (!ctl) {
        /* the core's answer opens it (conn.c, CORE_W_LINK_ATTACHED) */
        int *n = rcv ? &ir->n_data_in : &ir->n_data_out;
        data_link_WT(c, pl, *n < RTR_IR_PRIORITIES ? *n : -1); /* beyond 10: streaming */
        (*n)++;
        return true;
    }
    link_add_WT(c, pl, rcv ? IR_CTL_IN : IR_CTL_OUT);
    ir->ctl_lost = false;
    pn_link_open(pl);
    if (rcv)
        pn_link_flow(pl, RTR_IR_CREDIT);
    LOGC(c, DEBUG, "Inter-router control link attached (%s)", rcv ? "incoming" : "outgoing");
    return true;
}

/* Send what waits while the outgoing control link has credit. */
static void pump_WT(rtr_conn_t *c)
{
    rtr_ir_t  *ir = c->ir;
    pn_link_t *pl = ir->ctl_out;
    if (!pl || !(pn_link_state(pl) & PN_REMOTE_ACTIVE))
        return;
    ir_link_t *l = link_find_WT(ir, pl);
    while (ir->q_head && pn_link_credit(pl) > 0) {
        ir_msg_t *m = ir->q_head;
        ir->q_head = m->next;
        if (!ir->q_head)
            ir->q_tail = NULL;
        ir->q_len--;
        uint64_t       tag = ir->tag++;
        pn_delivery_t *d = pn_delivery(pl, pn_dtag((const char *)&tag, sizeof(tag)));
        pn_link_send(pl, (const char *)m->bytes, m->len);
        pn_link_advance(pl);
        pn_delivery_settle(d); /* routing messages are pre-settled */
        if (l) {
            stats_obj_add(c->worker->shard, l->stats, CORE_LINK_DELIVERIES, 1);
            stats_obj_add(c->worker->shard, l->stats, CORE_LINK_PRESETTLED, 1);
        }
        free(m->bytes);
        free(m);
    }
    if (l)
        stats_obj_set(c->worker->shard, l->stats, CORE_LINK_CREDIT, pn_link_credit(pl));
}

/* The incoming control link: gather a message, hand it to the core when complete. */
static void ctl_delivery_WT(rtr_conn_t *c, pn_delivery_t *d)
{
    rtr_ir_t  *ir = c->ir;
    pn_link_t *pl = pn_delivery_link(d);
    if (!rtr_bare_gather_WT(d, RTR_IR_MSG_MAX, &ir->rx, &ir->rx_len, &ir->rx_cap, &ir->rx_drop))
        return;
    ir_link_t *l = link_find_WT(ir, pl);
    if (l) {
        stats_obj_add(c->worker->shard, l->stats, CORE_LINK_DELIVERIES, 1);
        if (pn_delivery_settled(d))
            stats_obj_add(c->worker->shard, l->stats, CORE_LINK_PRESETTLED, 1);
    }
    if (ir->rx_drop) {
        LOGC(c, WARNING, "Routing message larger than %u bytes dropped", RTR_IR_MSG_MAX);
    } else if (ir->announced) {
        post_rt_WT(c, CORE_RT_MSG, ir->rx, (uint32_t)ir->rx_len);
        ir->rx = NULL;
        ir->rx_cap = 0;
    }
    ir->rx_len = 0;
    ir->rx_drop = false;
    if (!pn_delivery_settled(d))
        pn_delivery_update(d, PN_ACCEPTED);
    pn_delivery_settle(d);
    pn_link_flow(pl, 1);
}

bool rtr_ir_event_WT(rtr_conn_t *c, pn_event_t *e)
{
    rtr_ir_t *ir = c->ir;
    switch (pn_event_type(e)) {
    case PN_LINK_REMOTE_OPEN: {
        pn_link_t *pl = pn_event_link(e);
        if (link_find_WT(ir, pl)) {
            if (pl == ir->ctl_out)
                pump_WT(c);
            return true;
        }
        if (pn_link_get_context(pl) || !(pn_link_state(pl) & PN_LOCAL_UNINIT))
            return false;
        if (pn_connection_state(c->driver.connection) & PN_LOCAL_CLOSED)
            return false;
        return remote_attach_WT(c, pl);
    }
    case PN_LINK_FLOW: {
        pn_link_t *pl = pn_event_link(e);
        if (!link_find_WT(ir, pl))
            return false;
        if (pl == ir->ctl_out)
            pump_WT(c);
        return true;
    }
    case PN_DELIVERY: {
        pn_delivery_t *d = pn_event_delivery(e);
        ir_link_t     *l = link_find_WT(ir, pn_delivery_link(d));
        if (!l)
            return false;
        if (l->kind == IR_CTL_IN)
            ctl_delivery_WT(c, d);
        else
            pn_delivery_settle(d);
        return true;
    }
    case PN_LINK_REMOTE_CLOSE:
    case PN_LINK_REMOTE_DETACH: {
        pn_link_t *pl = pn_event_link(e);
        ir_link_t *l = link_find_WT(ir, pl);
        if (!l)
            return false;
        forget_WT(c, l);
        if (pn_event_type(e) == PN_LINK_REMOTE_CLOSE)
            pn_link_close(pl);
        else
            pn_link_detach(pl);
        pn_link_free(pl);
        return true;
    }
    case PN_SESSION_REMOTE_CLOSE: {
        /* conn.c frees the session, and Proton its links with it */
        pn_session_t *s = pn_event_session(e);
        for (size_t i = ir->n_links; i-- > 0;) /* backwards: forget_WT moves the last */
            if (pn_link_session(ir->links[i].pn) == s)
                forget_WT(c, &ir->links[i]);
        return false;
    }
    case PN_CONNECTION_REMOTE_CLOSE:
    case PN_TRANSPORT_CLOSED:
        while (ir->n_links)
            forget_WT(c, &ir->links[ir->n_links - 1]);
        return false;
    default:
        return false;
    }
}

bool rtr_ir_attach_refused_WT(rtr_conn_t *c, pn_link_t *pl)
{
    pn_terminus_t *t = pn_link_is_receiver(pl) ? pn_link_remote_target(pl)
                                               : pn_link_remote_source(pl);
    if (!c->ir) {
        if (!rtr_termcaps_first_is(t, RTR_IR_CAPS_CTL) && !rtr_termcaps_first_is(t, RTR_IR_CAPS_DATA))
            return false;
        rtr_pn_link_close_error_WT(pl, "qd:forbidden", "Connectivity to the node is forbidden");
        LOGC(c, INFO, "Router attach forbidden on non-inter-router connection");
        return true;
    }
    if (c->ir->ctl_out)
        return false;
    rtr_pn_link_close_error_WT(pl, "qd:connection-role",
                               "Link attach forbidden on inter-router connection");
    LOGC(c, INFO, "Endpoint attach forbidden on inter-router connection");
    return true;
}

void rtr_ir_send_WT(rtr_worker_t *w, core_work_t *work)
{
    rtr_conn_t *c = w->conns;
    while (c && c->id != work->u.rt_send.conn_id)
        c = c->next;
    if (!c || !c->ir || c->closing) {
        free(work->u.rt_send.bytes);
        return;
    }
    rtr_ir_t *ir = c->ir;
    ir_msg_t *m = base_malloc(sizeof(*m));
    m->bytes = work->u.rt_send.bytes;
    m->len = work->u.rt_send.len;
    m->next = NULL;
    if (ir->q_tail)
        ir->q_tail->next = m;
    else
        ir->q_head = m;
    ir->q_tail = m;
    if (++ir->q_len > RTR_IR_QUEUE_MAX) {
        ir_msg_t *old = ir->q_head;
        ir->q_head = old->next;
        ir->q_len--;
        free(old->bytes);
        free(old);
    }
    pump_WT(c);
    rtr_conn_mark_dirty_WT(c);
}

void rtr_ir_free_WT(rtr_conn_t *c)
{
    rtr_ir_t *ir = c->ir;
    if (!ir)
        return;
    if (ir->announced)
        post_rt_WT(c, CORE_RT_CONN_CLOSED, NULL, 0);
    while (ir->q_head) {
        ir_msg_t *m = ir->q_head;
        ir->q_head = m->next;
        free(m->bytes);
        free(m);
    }
    free(ir->rx);
    for (size_t i = 0; i < ir->n_links; i++)
        stats_object_retire(c->worker->ctx->stats->reg, ir->links[i].stats);
    free(ir->links);
    BASE_FREE(c->ir);
}
