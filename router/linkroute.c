/* router/linkroute.c: link-routed links on the workers (see linkroute.h and
 * docs/decisions/0006).
 *
 * Thread suffixes: _WT = the worker that owns the link or connection named; a pair's two ends
 * are owned by (possibly) two workers, which share only the pair's reference count and the
 * messages they post each other.
 *
 * DESIGN: each end keeps its own Proton deliveries, numbered by the end that receives the
 * transfers (`seq`); a message names a delivery by that number.  An end settles its own
 * delivery exactly once: when its own peer settled it, or when the other end says its peer
 * did.  When a link ends, the other end is detached with the error.  When the router's link
 * to the route container ends first, its client's unsettled transfers are settled before that
 * detach, with the container's outcome or else RELEASED / MODIFIED (settle_lost_WT, and
 * release_unsent_WT for what never reached that link, backlog included), as qdrouterd does;
 * a client receiver's unsettled deliveries stay unsettled (the container takes its messages
 * back when its own link goes).
 *
 * Credit: the end whose link sends to its peer (S) sees that peer's credit; the end that
 * receives (R) grants credit to its peer.  S keeps the credit R granted and the transfers
 * that arrived from R, and asks R for more (FLOW) when its peer's credit, less what S holds
 * unsent, exceeds what is outstanding at R.  A peer that lowers its credit gets nothing more
 * granted; what R's peer already had credit for is held at S until its peer's credit allows
 * (at most the credit it had before).  A drain at S drains R's peer (DRAIN), whose answer
 * (DRAINED, with the credit it gave up) lets S answer its own peer's drain.
 *
 * Bytes (docs/decisions/0006, as Q2 for message-routed deliveries, router/msg.h): credit
 * bounds deliveries, not bytes, so a pair bounds its bytes itself.  The pair's `lag` counts
 * the bytes R took from its Proton and S has not yet handed to its own: R takes at most
 * LR_CHUNK bytes per message and stops taking at LR_LAG_HIGH, leaving the rest in its
 * session, whose incoming window then closes on its peer (the session's capacity, and past
 * RTR_CONN_IN_MAX of such sessions the connection's input, bound it: transport.c); S hands
 * bytes to Proton only within its connection's output budget (RTR_CONN_OUT_MAX, shared with
 * message-routed copies) and keeps the rest, and every message behind them, in its backlog
 * until the socket took what Proton framed; when the lag falls to LR_LAG_LOW, S wakes R
 * (RESUME).  The sockets are read all the while (flows and dispositions are never held), so
 * two links in opposite directions over the same connections wait only on their own peers.
 */
#include "router/linkroute.h"

#include "core/base/list.h"
#include "core/base/map.h"
#include "core/linkroute.h"
#include "router/link_auto.h"
#include "router/link_in.h"
#include "router/peer_quirks.h"

#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/disposition.h>
#include <proton/link.h>
#include <proton/session.h>
#include <proton/terminus.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* The bound on a pair's bytes in transit between its workers (see DESIGN above): R stops
 * taking bytes from its Proton at LR_LAG_HIGH and goes on at LR_LAG_LOW (Q2's figures,
 * router/msg.h); one message carries at most LR_CHUNK bytes. */
#define LR_LAG_HIGH (1u << 20)
#define LR_LAG_LOW  (512u << 10)
#define LR_CHUNK    (64u << 10)

struct lr_msg;

/* The two ends of a link-routed link.  `refs`: one per end alive and one per message in
 * flight; the last drop frees it. */
typedef struct rtr_lr_pair {
    atomic_int         refs;    /* owners: ends and messages */
    atomic_size_t      lag;     /* bytes R took from its Proton, not yet handed to S's (or
                                   dropped): R adds, whoever frees the message subtracts */
    atomic_bool        r_waiting; /* R stopped on the lag: the one who clears it posts (or
                                     skips) the RESUME */
    rtr_worker_t      *w[2];    /* the worker of each end (immutable) */
    uint64_t           conn[2]; /* the connection of each end (immutable) */
    struct rtr_lr_end *e[2];    /* each end's state while it lives: e[i] is read and written
                                   by worker w[i] only (messages for end i run there) */
    char *strip;                /* the answer's address rewrite (core_lr_target_t's; end 0) */
    char *insert;
} rtr_lr_pair_t;

/* An end's state, owned by its worker (k->lr). */
typedef struct rtr_lr_end {
    rtr_lr_pair_t *pair;    /* its pair (one reference) */
    int            side;    /* 0: the client's link, 1: the router's on the route container */
    rtr_link_t    *k;       /* its link */
    bool           open;    /* the other end's attach answer was applied (end 0), or the
                               attach sent (end 1) */
    bool       told;        /* the other end was told this end is gone (or it went first) */
    base_map_t dlv;         /* seq -> pn_delivery_t of this end not yet settled here */
    uint64_t   next_seq;    /* R: the last number given to a delivery */
    int64_t    granted;     /* S: credit R was asked to grant, in all */
    int64_t    arrived;     /* S: deliveries R sent (and credit its peer gave up draining) */
    int64_t    got;         /* R: credit granted to its peer, in all */
    int64_t    used;        /* R: deliveries its peer sent (and credit it drained) */
    bool       drain_asked; /* S: DRAIN sent, DRAINED not yet back */
    bool       drained_due; /* S: the other peer drained: answer this peer's drain once
                               what is queued went out (rtr_lr_conn_written_WT) */
    bool draining;          /* R: its peer was asked to drain */
    unsigned        far_quirks; /* end 0: what the route container cannot take
                                   (RTR_QUIRK_*; end 1's are its link's k->quirks) */
    rtr_da_strip_t *da;         /* end 1, RTR_QUIRK_NO_DA: the delivery being sent's filter */
    struct lr_msg *backlog; /* S: messages waiting for the connection's output budget, in
                               the order they came (the first is a transfer's bytes) */
    struct lr_msg *backlog_tail; /* S: its last */
} rtr_lr_end_t;

/* Per-delivery record (the Proton delivery's context). */
typedef struct lr_dlv {
    uint64_t seq;          /* its number */
    uint64_t state;        /* the last remote state told to the other end */
    bool     settled;      /* settled here */
    bool     told_settled; /* the other end was told its peer settled it */
} lr_dlv_t;

enum {
    LR_ATTACH = 0, /* to end 1: attach on the route container's connection */
    LR_ATTACHED,   /* to end 0: the route container answered */
    LR_FLOW,       /* to R: grant `credit` more */
    LR_DRAIN,      /* to R: drain the peer */
    LR_DRAINED,    /* to S: the peer drained, giving up `credit` */
    LR_XFER,       /* to S: bytes of delivery `seq` */
    LR_DISP,       /* either way: delivery `seq`'s state and settlement */
    LR_DETACH,     /* either way: the other end is gone (with its peer's error) */
    LR_RESUME,     /* to R: the lag fell to LR_LAG_LOW: take bytes again */
};

/* A terminus carried between workers. */
typedef struct lr_term {
    pn_terminus_type_t     type;
    char                  *address;
    pn_durability_t        durability;
    pn_expiry_policy_t     expiry;
    pn_seconds_t           timeout;
    bool                   dynamic;
    pn_distribution_mode_t dist;
    pn_data_t             *props, *caps, *outcomes, *filter;
} lr_term_t;

typedef struct lr_msg {
    struct lr_msg *next;   /* S: in its end's backlog */
    rtr_lr_pair_t *pair;   /* one reference */
    int            to;     /* the end it is for */
    int            type;   /* LR_* */
    uint64_t       seq;    /* XFER, DISP */
    int64_t        credit; /* FLOW, DRAINED */
    /* ATTACH, ATTACHED */
    char                *name;
    char                *key;    /* ATTACH: the client's address as qdrouterd's owningAddr
                                    shows it for both ends ("M0<address>") */
    bool                 sender; /* ATTACH: end 1's link is a sender */
    lr_term_t            source, target;
    pn_snd_settle_mode_t snd_mode;
    pn_rcv_settle_mode_t rcv_mode;
    unsigned             quirks; /* ATTACHED: the route container's (RTR_QUIRK_*) */
    /* XFER */
    char   *bytes;
    size_t  len;
    bool    first, more, aborted;
    int64_t extra;  /* first: credit R's peer used beyond what R granted (overrun_WT) */
    bool    lagged; /* its `len` bytes count in the pair's lag */
    /* XFER (settled), DISP */
    bool     settled;
    uint64_t state;
    bool     failed, undeliverable;
    /* DISP (rejected), DETACH */
    char *cond_name, *cond_desc;
} lr_msg_t;

static void pair_unref(rtr_lr_pair_t *p)
{
    if (atomic_fetch_sub(&p->refs, 1) != 1)
        return;
    free(p->strip);
    free(p->insert);
    free(p);
}

static void term_take(lr_term_t *t, pn_terminus_t *src)
{
    t->type = pn_terminus_get_type(src);
    const char *a = pn_terminus_get_address(src);
    t->address = a ? base_strdup(a) : NULL;
    t->durability = pn_terminus_get_durability(src);
    t->expiry = pn_terminus_get_expiry_policy(src);
    t->timeout = pn_terminus_get_timeout(src);
    t->dynamic = pn_terminus_is_dynamic(src);
    t->dist = pn_terminus_get_distribution_mode(src);
    t->props = pn_data(0);
    pn_data_copy(t->props, pn_terminus_properties(src));
    t->caps = pn_data(0);
    pn_data_copy(t->caps, pn_terminus_capabilities(src));
    t->outcomes = pn_data(0);
    pn_data_copy(t->outcomes, pn_terminus_outcomes(src));
    t->filter = pn_data(0);
    pn_data_copy(t->filter, pn_terminus_filter(src));
}

/* Put t into dst, with `address` instead of t's when not NULL. */
static void term_put(pn_terminus_t *dst, const lr_term_t *t, const char *address)
{
    pn_terminus_set_type(dst, t->type);
    pn_terminus_set_address(dst, address ? address : t->address);
    pn_terminus_set_durability(dst, t->durability);
    pn_terminus_set_expiry_policy(dst, t->expiry);
    pn_terminus_set_timeout(dst, t->timeout);
    pn_terminus_set_dynamic(dst, t->dynamic);
    pn_terminus_set_distribution_mode(dst, t->dist);
    if (t->props)
        pn_data_copy(pn_terminus_properties(dst), t->props);
    if (t->caps)
        pn_data_copy(pn_terminus_capabilities(dst), t->caps);
    if (t->outcomes)
        pn_data_copy(pn_terminus_outcomes(dst), t->outcomes);
    if (t->filter)
        pn_data_copy(pn_terminus_filter(dst), t->filter);
}

static void term_fini(lr_term_t *t)
{
    free(t->address);
    if (t->props)
        pn_data_free(t->props);
    if (t->caps)
        pn_data_free(t->caps);
    if (t->outcomes)
        pn_data_free(t->outcomes);
    if (t->filter)
        pn_data_free(t->filter);
}

static void msg_post(lr_msg_t *m);
static lr_msg_t *msg_new(rtr_lr_pair_t *p, int to, int type);

/* m's bytes left the pair (S handed them to Proton, or m was dropped): once the lag fell to
 * LR_LAG_LOW, a waiting R goes on.  Thread-safe (S's worker, or any that drops m). */
static void lag_release(lr_msg_t *m)
{
    if (!m->lagged)
        return;
    m->lagged = false;
    rtr_lr_pair_t *p = m->pair;
    size_t left = atomic_fetch_sub(&p->lag, m->len) - m->len;
    if (left <= LR_LAG_LOW && atomic_exchange(&p->r_waiting, false))
        msg_post(msg_new(p, 1 - m->to, LR_RESUME));
}

static void msg_free(lr_msg_t *m)
{
    lag_release(m);
    free(m->name);
    free(m->key);
    term_fini(&m->source);
    term_fini(&m->target);
    free(m->bytes);
    free(m->cond_name);
    free(m->cond_desc);
    pair_unref(m->pair);
    free(m);
}

static lr_msg_t *msg_new(rtr_lr_pair_t *p, int to, int type)
{
    lr_msg_t *m = base_calloc(1, sizeof(*m));
    atomic_fetch_add(&p->refs, 1);
    m->pair = p;
    m->to = to;
    m->type = type;
    return m;
}

static void msg_post(lr_msg_t *m)
{
    rtr_worker_post_ext(m->pair->w[m->to], RTR_EXT_LR, m, 0);
}

static rtr_lr_end_t *end_new(rtr_lr_pair_t *p, int side, rtr_link_t *k)
{
    rtr_lr_end_t *e = base_calloc(1, sizeof(*e));
    e->pair = p; /* the caller's reference moves here */
    e->side = side;
    e->k = k;
    base_map_init(&e->dlv);
    k->lr = e;
    p->e[side] = e;
    return e;
}

/* Is k's Proton link a sender (the S end)? */
static bool end_is_s(const rtr_link_t *k)
{
    return k->out;
}

/* A delivery this end is done with.  At S (a sending link) its context becomes
 * RTR_DLV_FORGOTTEN, so that one without a context is known for the peer's transfer. */
static void dlv_forget_WT(rtr_lr_end_t *e, pn_delivery_t *d)
{
    lr_dlv_t *r = pn_delivery_get_context(d);
    if (!r || r == RTR_DLV_FORGOTTEN)
        return;
    base_map_udel(&e->dlv, r->seq);
    pn_delivery_set_context(d, end_is_s(e->k) ? RTR_DLV_FORGOTTEN : NULL);
    free(r);
}

static void dlv_settle_WT(rtr_lr_end_t *e, pn_delivery_t *d)
{
    dlv_forget_WT(e, d);
    pn_delivery_settle(d);
}

/* ---------------------------------------------------------------- start and attach */

void rtr_lr_start_WT(rtr_link_t *k, core_lr_target_t *routed)
{
    rtr_ctx_t     *ctx = k->conn->worker->ctx;
    rtr_lr_pair_t *p = base_calloc(1, sizeof(*p));
    atomic_init(&p->refs, 2); /* end 0, and end 1 (made by its worker, or refused there) */
    p->w[0] = k->conn->worker;
    p->conn[0] = k->conn->id;
    BASE_BUG_ON(routed->worker < 0 || routed->worker >= ctx->n_workers);
    p->w[1] = &ctx->workers[routed->worker];
    p->conn[1] = routed->conn_id;
    p->strip = routed->strip;
    p->insert = routed->insert;
    routed->strip = routed->insert = NULL;
    end_new(p, 0, k);

    pn_link_t *pl = k->pn;
    lr_msg_t  *m = msg_new(p, 1, LR_ATTACH);
    if (routed->mesh && !k->conn->ir) {
        /* on toward another router: qdrouterd 1.19 names the link after the client's link
         * and container, so that two clients' links of one name stay apart on the
         * inter-router connection */
        const char *cid = pn_connection_remote_container(k->conn->driver.connection);
        size_t      n = strlen(pn_link_name(pl)) + strlen(cid ? cid : "") + 2;
        m->name = base_malloc(n);
        snprintf(m->name, n, "%s@%s", pn_link_name(pl), cid ? cid : "");
    } else {
        m->name = base_strdup(pn_link_name(pl));
    }
    m->sender = !k->out; /* the client sends: the router sends on to the container */
    term_take(&m->source, pn_link_remote_source(pl));
    term_take(&m->target, pn_link_remote_target(pl));
    /* the container's terminus gets the rewritten address */
    lr_term_t *t = k->out ? &m->source : &m->target;
    size_t     klen = strlen(t->address ? t->address : "") + 3;
    m->key = base_malloc(klen);
    snprintf(m->key, klen, "M0%s", t->address ? t->address : "");
    free(t->address);
    t->address = routed->address;
    routed->address = NULL;
    m->snd_mode = pn_link_remote_snd_settle_mode(pl);
    m->rcv_mode = pn_link_remote_rcv_settle_mode(pl);
    LOGL(k, INFO, "Link routed to connection %llu as %s", (unsigned long long)p->conn[1],
         t->address ? t->address : "");
    msg_post(m);
    core_lr_target_free(routed);
}

static rtr_conn_t *conn_find_WT(rtr_worker_t *w, uint64_t id)
{
    for (rtr_conn_t *c = w->conns; c; c = c->next)
        if (c->id == id && !c->closing &&
            !(pn_connection_state(c->driver.connection) & PN_LOCAL_CLOSED) &&
            (pn_connection_state(c->driver.connection) & PN_REMOTE_ACTIVE))
            return c;
    return NULL;
}

static void detach_msg(rtr_lr_pair_t *p, int to, const char *name, const char *desc)
{
    lr_msg_t *m = msg_new(p, to, LR_DETACH);
    m->cond_name = name ? base_strdup(name) : NULL;
    m->cond_desc = desc ? base_strdup(desc) : NULL;
    msg_post(m);
}

/* The context of the sessions on_attach_WT makes, one per link (rtr_lr_link_freed_WT). */
static char own_session;

void rtr_lr_link_freed_WT(pn_session_t *s)
{
    if (pn_session_get_context(s) == &own_session && !(pn_session_state(s) & PN_LOCAL_CLOSED))
        pn_session_close(s); /* freed when the peer's end comes, or with the connection */
}

/* End 1's router.link row (qdrouterd 1.19 shows both ends of a routed link): made here, as
 * the core makes the client end's, and retired by rtr_link_cleanup_WT after this worker's
 * last write.  Its capacity is 0, as qdrouterd's is for this end. */
static void lr_end_stats_WT(rtr_link_t *k, const lr_msg_t *m)
{
    char id[24], conn[24];
    snprintf(id, sizeof(id), "%llu", (unsigned long long)k->id);
    snprintf(conn, sizeof(conn), "%llu", (unsigned long long)k->conn->id);
    const char         *labels[] = {id, conn, k->out ? "out" : "in", m->key ? m->key : "",
                                    m->name ? m->name : "", "endpoint", "4"};
    const core_stats_t *cs = k->conn->worker->ctx->stats;
    core_stats_object_new(cs, cs->link, labels, &k->stats);
}

/* End 1: attach on the route container's connection. */
static void on_attach_WT(rtr_worker_t *w, lr_msg_t *m)
{
    rtr_lr_pair_t *p = m->pair;
    rtr_conn_t    *c = conn_find_WT(w, p->conn[1]);
    if (!c) {
        detach_msg(p, 0, "qd:no-route-to-dest", "No route to the destination node");
        pair_unref(p); /* end 1's reference: it never lived */
        return;
    }
    /* the settlement mode a peer with quirks can take (RabbitMQ, docs/brokers.md R15) */
    unsigned quirks = rtr_peer_quirks_WT(c->driver.connection); /* once per link */
    int      rcv_mode;
    if (!rtr_quirk_rcv_mode(quirks, m->sender, m->rcv_mode, &rcv_mode)) {
        LOGC(c, INFO, "Link route attach refused: the client asked for rcv-settle-mode second");
        detach_msg(p, 0, RTR_QUIRK_RCV_SECOND_COND, RTR_QUIRK_RCV_SECOND_DESC);
        pair_unref(p); /* end 1's reference: it never lived */
        return;
    }
    if (!rtr_conn_sessions_left_WT(c, NULL)) {
        /* a session beyond channel-max would end the whole connection (link_auto.h) */
        LOGC(c, INFO, "Link route attach refused: no session left on the connection");
        detach_msg(p, 0, "amqp:resource-limit-exceeded",
                   "No session left on the route container's connection (channel-max, the "
                   "connector's maxSessions included)");
        pair_unref(p); /* end 1's reference: it never lived */
        return;
    }
    /* A session of its own: a broker may end the whole session over one link (RabbitMQ
     * does on a refused attach, docs/brokers.md R3), which must not take the others. */
    pn_session_t *s = pn_session(c->driver.connection);
    pn_session_set_incoming_capacity(s, RTR_CONN_IN_MAX);
    pn_session_set_context(s, &own_session);
    pn_session_open(s);
    pn_link_t *pl = m->sender ? pn_sender(s, m->name) : pn_receiver(s, m->name);
    term_put(pn_link_source(pl), &m->source, NULL);
    term_put(pn_link_target(pl), &m->target, NULL);
    pn_link_set_snd_settle_mode(pl, m->snd_mode);
    pn_link_set_rcv_settle_mode(pl, (pn_rcv_settle_mode_t)rcv_mode);

    rtr_link_t *k = rtr_link_new_WT(c, pl, m->sender);
    k->quirks = quirks;
    lr_end_stats_WT(k, m);
    rtr_lr_end_t *e = end_new(p, 1, k);
    e->open = true;
    pn_link_open(pl);
    LOGL(k, INFO, "Link route attaching: %s %s", k->out ? "outgoing to" : "incoming from",
         m->sender ? (m->target.address ? m->target.address : "")
                   : (m->source.address ? m->source.address : ""));
    rtr_conn_mark_dirty_WT(c);
}

void rtr_lr_remote_open_WT(rtr_link_t *k)
{
    rtr_lr_end_t *e = k->lr;
    if (e->side != 1)
        return;
    pn_link_t *pl = k->pn;
    lr_msg_t  *m = msg_new(e->pair, 0, LR_ATTACHED);
    term_take(&m->source, pn_link_remote_source(pl));
    term_take(&m->target, pn_link_remote_target(pl));
    m->snd_mode = pn_link_remote_snd_settle_mode(pl);
    m->rcv_mode = pn_link_remote_rcv_settle_mode(pl);
    m->quirks = k->quirks;
    msg_post(m);
    rtr_lr_flow_WT(k); /* a broker may grant credit with its attach */
}

static void flow_s_WT(rtr_lr_end_t *e);

/* End 0: the route container answered: answer the client the same way. */
static void on_attached_WT(rtr_lr_end_t *e, lr_msg_t *m)
{
    rtr_link_t *k = e->k;
    pn_link_t  *pl = k->pn;
    /* the address the container gave back, with the rewrite undone */
    lr_term_t *t = k->out ? &m->source : &m->target;
    char      *addr = NULL;
    if (t->address) {
        core_lr_target_t undo = {.strip = e->pair->strip, .insert = e->pair->insert};
        addr = core_lr_answer_address(&undo, t->address);
    }
    term_put(pn_link_source(pl), &m->source, k->out ? addr : NULL);
    term_put(pn_link_target(pl), &m->target, k->out ? NULL : addr);
    free(addr);
    pn_link_set_snd_settle_mode(pl, m->snd_mode);
    pn_link_set_rcv_settle_mode(pl, m->rcv_mode);
    pn_link_open(pl);
    k->open = true;
    e->open = true;
    e->far_quirks = m->quirks;
    if (end_is_s(k))
        flow_s_WT(e);
    rtr_conn_mark_dirty_WT(k->conn);
}

/* ---------------------------------------------------------------- credit */

/* S: ask R for the credit its peer gave and R has not yet been asked for; ask R to drain
 * when the peer drains. */
static void flow_s_WT(rtr_lr_end_t *e)
{
    pn_link_t *pl = e->k->pn;
    if (!e->open || e->told || !pl)
        return;
    int64_t want = (int64_t)pn_link_credit(pl) - pn_link_queued(pl);
    int64_t outstanding = e->granted - e->arrived;
    if (want > outstanding) {
        lr_msg_t *m = msg_new(e->pair, 1 - e->side, LR_FLOW);
        m->credit = want - outstanding;
        e->granted += m->credit;
        msg_post(m);
    }
    if (pn_link_get_drain(pl) && pn_link_credit(pl) > 0 && !e->drain_asked) {
        if (e->far_quirks & RTR_QUIRK_NO_DRAIN) {
            /* a drain would end the route container's session (RabbitMQ, docs/brokers.md
             * R6): it is answered here, as on a message-routed link, once what the router
             * holds went out; the credit the container has stays its own and what it sends
             * with it waits here for the client's next credit (decision 0007) */
            if (!e->drained_due) {
                e->drained_due = true;
                e->k->conn->lr_drain_due = true;
                rtr_conn_mark_dirty_WT(e->k->conn);
            }
            return;
        }
        e->drain_asked = true;
        msg_post(msg_new(e->pair, 1 - e->side, LR_DRAIN));
    }
}

/* R: its peer answered a drain once the credit is gone. */
static void drain_check_r_WT(rtr_lr_end_t *e)
{
    pn_link_t *pl = e->k->pn;
    if (!e->draining || pn_link_credit(pl) > 0)
        return;
    e->draining = false;
    pn_link_set_drain(pl, false);
    lr_msg_t *m = msg_new(e->pair, 1 - e->side, LR_DRAINED);
    m->credit = e->got - e->used; /* what the peer gave up */
    e->used = e->got;
    msg_post(m);
}

/* The credit k's peer sees now, as its router.link row's creditAvailable (qdstat -l's cred
 * column, which qdrouterd 1.19 fills for both ends of a routed link). */
static void credit_gauge_WT(rtr_link_t *k)
{
    if (k->pn)
        stats_obj_set(k->conn->worker->shard, k->stats, CORE_LINK_CREDIT, pn_link_credit(k->pn));
}

void rtr_lr_flow_WT(rtr_link_t *k)
{
    rtr_lr_end_t *e = k->lr;
    credit_gauge_WT(k);
    if (end_is_s(k))
        flow_s_WT(e);
    else
        drain_check_r_WT(e);
}

/* ---------------------------------------------------------------- transfers and outcomes */

/* A delivery's state changed at this end's peer: tell the other end. */
static void disp_out_WT(rtr_lr_end_t *e, pn_delivery_t *d, lr_dlv_t *r)
{
    uint64_t state = pn_delivery_remote_state(d);
    bool     settled = pn_delivery_settled(d);
    if (state == r->state && (!settled || r->told_settled))
        return;
    lr_msg_t *m = msg_new(e->pair, 1 - e->side, LR_DISP);
    m->seq = r->seq;
    m->state = state;
    m->settled = settled;
    pn_disposition_t *disp = pn_delivery_remote(d);
    m->failed = pn_disposition_is_failed(disp);
    m->undeliverable = pn_disposition_is_undeliverable(disp);
    pn_condition_t *cond = pn_disposition_condition(disp);
    if (cond && pn_condition_is_set(cond)) {
        m->cond_name = base_strdup(pn_condition_get_name(cond));
        const char *desc = pn_condition_get_description(cond);
        m->cond_desc = desc ? base_strdup(desc) : NULL;
    }
    r->state = state;
    r->told_settled = settled;
    msg_post(m);
    if (settled)
        dlv_settle_WT(e, d); /* its peer settled it: so does this end, once */
}

/* R: stop or go on taking bytes; a stopped link's session counts in its connection's input
 * budget (transport.c). */
static void pause_set_WT(rtr_lr_end_t *e, bool on)
{
    rtr_link_t *k = e->k;
    if (k->lr_paused == on)
        return;
    k->lr_paused = on;
    if (on)
        k->conn->n_lr_paused++;
    else
        k->conn->n_lr_paused--;
}

/* R: is the pair's lag at LR_LAG_HIGH?  Then R stops taking bytes (the caller takes none)
 * until S's RESUME. */
static bool lag_full_WT(rtr_lr_end_t *e)
{
    rtr_lr_pair_t *p = e->pair;
    if (atomic_load(&p->lag) < LR_LAG_HIGH)
        return false;
    atomic_store(&p->r_waiting, true);
    if (atomic_load(&p->lag) < LR_LAG_HIGH) {
        /* S let bytes go meanwhile; a RESUME it may have posted finds R going */
        atomic_store(&p->r_waiting, false);
        return false;
    }
    pause_set_WT(e, true);
    return true;
}

/* R: the route container sent beyond the credit R gave, -avail deliveries in all: a peer
 * known to do so (RabbitMQ: a flow that meets its queue sending is applied from the queue's
 * count, ahead of the link's by the transfers in flight, docs/brokers.md R18).  A client
 * attached to it directly would take them, so they go on to S as any other, which holds what
 * its own peer has no credit for yet, its bytes bounded as any (the lag and S's output
 * budget), and asks for that much less credit.  Proton's credit is raised by as many, as if
 * granted: its next flow carries zero credit, not a negative link-credit (read as some four
 * billion), and `got` counts them so that a drain's answer stays right.  Returns the credit
 * so added, which S adds to what it asked for (LR_XFER's `extra`). */
static int64_t overrun_WT(rtr_lr_end_t *e, pn_link_t *pl, int avail)
{
    if (!e->k->overrun_logged)
        LOGL(e->k, INFO, "Link route's peer sent transfers beyond the link credit; relayed");
    e->k->overrun_logged = true;
    pn_link_flow(pl, -avail);
    e->got -= avail;
    return -avail;
}

/* R: a transfer (or more of one) from the peer.  The bytes in hand go to S LR_CHUNK at a
 * time while the lag allows; the rest stays in Proton until RESUME brings R back here. */
static void xfer_in_WT(rtr_lr_end_t *e, pn_delivery_t *d)
{
    pn_link_t *pl = e->k->pn;
    lr_dlv_t  *r = pn_delivery_get_context(d);
    bool       current = d == pn_link_current(pl);
    if (!r && !current)
        return;
    if (current && (e->k->lr_paused || (rtr_delivery_pending_WT(d) && lag_full_WT(e))))
        return; /* RESUME comes back */
    bool    first = false;
    int64_t extra = 0;
    if (!r) {
        int avail = pn_link_credit(pl) - pn_link_queued(pl);
        if (avail < 0 && (e->k->quirks & RTR_QUIRK_CREDIT_OVERRUN)) {
            extra = overrun_WT(e, pl, avail);
        } else if (avail < 0) {
            /* sent without the credit R gave (as link_in.c's check): held at S, such
             * deliveries would be bounded by nothing */
            LOGL(e->k, NOTICE, "Link closed: amqp:link:transfer-limit-exceeded (a transfer "
                               "without credit on a routed link)");
            rtr_link_close_error_WT(e->k, "amqp:link:transfer-limit-exceeded",
                                    "a transfer without link credit");
            return;
        }
        r = base_calloc(1, sizeof(*r));
        r->seq = ++e->next_seq;
        pn_delivery_set_context(d, r);
        base_map_uput(&e->dlv, r->seq, d);
        e->used++;
        first = true;
    }
    if (current) {
        bool   aborted = pn_delivery_aborted(d);
        bool   more = pn_delivery_partial(d);
        bool   settled = pn_delivery_settled(d);
        size_t avail = aborted ? 0 : rtr_delivery_pending_WT(d);
        if (first || avail || aborted || !more) {
            do {
                size_t    n = avail < LR_CHUNK ? avail : LR_CHUNK;
                lr_msg_t *m = msg_new(e->pair, 1 - e->side, LR_XFER);
                m->seq = r->seq;
                m->first = first;
                m->extra = first ? extra : 0;
                first = false;
                if (n) {
                    m->bytes = base_malloc(n);
                    ssize_t got = rtr_link_recv_WT(pl, m->bytes, n);
                    m->len = got > 0 ? (size_t)got : 0;
                }
                avail -= n;
                m->aborted = aborted;
                m->more = (more || avail) && !aborted;
                m->settled = settled;
                if (settled)
                    r->told_settled = true;
                if (m->len) {
                    m->lagged = true;
                    atomic_fetch_add(&e->pair->lag, m->len);
                }
                msg_post(m); /* the other worker owns m from here */
                if (avail && lag_full_WT(e))
                    return; /* the rest waits in the session (its window closes) */
            } while (avail);
            if (aborted) {
                dlv_settle_WT(e, d);
                pn_link_advance(pl);
                return;
            }
            if (!more) {
                pn_link_advance(pl);
                if (settled) {
                    dlv_settle_WT(e, d); /* presettled: nothing more comes of it */
                    return;
                }
            }
        }
        if (more)
            return;
    }
    disp_out_WT(e, d, r);
}

/* R: S let the lag fall to LR_LAG_LOW: take what waits in Proton. */
static void on_resume_WT(rtr_lr_end_t *e)
{
    pause_set_WT(e, false);
    pn_delivery_t *d = pn_link_current(e->k->pn);
    if (d)
        xfer_in_WT(e, d);
}

void rtr_lr_delivery_WT(rtr_link_t *k, pn_delivery_t *d)
{
    rtr_lr_end_t *e = k->lr;
    rtr_conn_t   *c = k->conn; /* k may be gone below: closed for what its peer did */
    if (!end_is_s(k)) {
        xfer_in_WT(e, d);
    } else {
        lr_dlv_t *r = pn_delivery_get_context(d);
        if (!r) {
            rtr_link_errant_transfer_WT(k); /* the peer sent where it receives */
            return;
        }
        if (r != RTR_DLV_FORGOTTEN && (pn_delivery_updated(d) || pn_delivery_settled(d))) {
            pn_delivery_clear(d);
            disp_out_WT(e, d, r);
        }
        flow_s_WT(e);
    }
    rtr_conn_mark_dirty_WT(c);
}

/* S toward a peer that must not get delivery annotations: send m's bytes without them (the
 * delivery's filter is made at its first bytes and kept until the next delivery starts). */
static void xfer_send_stripped_WT(rtr_lr_end_t *e, lr_msg_t *m)
{
    if (!e->da)
        e->da = base_malloc(sizeof(*e->da));
    if (m->first)
        rtr_da_strip_init(e->da);
    uint8_t  stack[4096];
    size_t   room = m->len + RTR_DA_STRIP_HELD_MAX;
    uint8_t *out = room <= sizeof(stack) ? stack : base_malloc(room);
    size_t   n = rtr_da_strip(e->da, (const uint8_t *)m->bytes, m->len, out);
    if (!m->more)
        n += rtr_da_strip_end(e->da, out + n);
    if (n)
        pn_link_send(e->k->pn, (const char *)out, n);
    if (out != stack)
        free(out);
}

/* S: bytes of a delivery from R. */
static void on_xfer_WT(rtr_lr_end_t *e, lr_msg_t *m)
{
    pn_link_t     *pl = e->k->pn;
    pn_delivery_t *d;
    if (m->first) {
        e->arrived++;
        e->granted += m->extra; /* R's peer sent them on credit nobody asked for */
        char tag[8];
        memcpy(tag, &m->seq, sizeof(tag));
        d = pn_delivery(pl, pn_dtag(tag, sizeof(tag)));
        lr_dlv_t *r = base_calloc(1, sizeof(*r));
        r->seq = m->seq;
        pn_delivery_set_context(d, r);
        base_map_uput(&e->dlv, m->seq, d);
    } else {
        d = base_map_uget(&e->dlv, m->seq);
        if (!d)
            return;
    }
    if (m->aborted) {
        dlv_forget_WT(e, d);
        pn_delivery_abort(d); /* frees d */
        return;
    }
    if (BASE_UNLIKELY(e->k->quirks & RTR_QUIRK_NO_DA)) {
        xfer_send_stripped_WT(e, m); /* delivery annotations would drop the connection (R13) */
    } else if (m->len) {
        pn_link_send(pl, m->bytes, m->len);
    }
    e->k->conn->out_queued += m->len; /* the output budget, as a copy's bytes */
    lag_release(m);
    if (!m->more) {
        pn_link_advance(pl);
        if (m->settled)
            dlv_settle_WT(e, d); /* presettled: sent settled */
    }
}

/* Either end: the other end's peer changed or settled delivery `seq`. */
static void on_disp_WT(rtr_lr_end_t *e, lr_msg_t *m)
{
    pn_delivery_t *d = base_map_uget(&e->dlv, m->seq);
    if (!d)
        return;
    /* toward a peer that breaks on MODIFIED: RELEASED (RabbitMQ, docs/brokers.md R9) */
    uint64_t state = rtr_quirk_outcome(e->k->quirks, m->state);
    if (state && state != pn_delivery_local_state(d)) {
        pn_disposition_t *disp = pn_delivery_local(d);
        if (state == PN_MODIFIED) {
            pn_disposition_set_failed(disp, m->failed);
            pn_disposition_set_undeliverable(disp, m->undeliverable);
        }
        if (m->cond_name) {
            pn_condition_t *cond = pn_disposition_condition(disp);
            pn_condition_set_name(cond, m->cond_name);
            pn_condition_set_description(cond, m->cond_desc);
        }
        pn_delivery_update(d, state);
    }
    if (m->settled) {
        lr_dlv_t *r = pn_delivery_get_context(d);
        r->told_settled = true; /* never tell the other end back */
        dlv_settle_WT(e, d);
    }
}

static void msg_apply_WT(rtr_lr_end_t *e, lr_msg_t *m);

/* S: would m wait for the connection's output budget (it, or a message before it)? */
static bool backlog_needed_WT(rtr_lr_end_t *e, const lr_msg_t *m)
{
    return e->backlog ||
           (m->type == LR_XFER && m->len && e->k->conn->out_queued >= RTR_CONN_OUT_MAX);
}

static void backlog_add_WT(rtr_lr_end_t *e, lr_msg_t *m)
{
    m->next = NULL;
    if (e->backlog_tail) {
        e->backlog_tail->next = m;
    } else {
        e->backlog = m;
        e->k->conn->n_lr_backlog++;
    }
    e->backlog_tail = m;
}

/* S: hand the backlog to Proton while the output budget allows.  Returns true when some
 * message went (e may be gone then: a DETACH frees it). */
static bool backlog_send_WT(rtr_lr_end_t *e)
{
    rtr_conn_t *c = e->k->conn;
    bool        did = false;
    while (e->backlog) {
        lr_msg_t *m = e->backlog;
        if (m->type == LR_XFER && m->len && c->out_queued >= RTR_CONN_OUT_MAX)
            break;
        e->backlog = m->next;
        if (!e->backlog) {
            e->backlog_tail = NULL;
            c->n_lr_backlog--;
        }
        did = true;
        bool gone = m->type == LR_DETACH;
        msg_apply_WT(e, m);
        msg_free(m);
        if (gone)
            break;
    }
    return did;
}

bool rtr_lr_conn_written_WT(rtr_conn_t *c)
{
    bool did = false;
    for (rtr_link_t *k = c->links, *next; k && c->n_lr_backlog; k = next) {
        next = k->next; /* a DETACH in a backlog ends k */
        if (k->lr && k->lr->backlog && backlog_send_WT(k->lr))
            did = true;
    }
    if (!c->lr_drain_due)
        return did;
    c->lr_drain_due = false;
    for (rtr_link_t *k = c->links; k; k = k->next) {
        rtr_lr_end_t *e = k->lr;
        if (!e || !e->drained_due || !k->pn)
            continue;
        if (pn_link_queued(k->pn) > 0 && pn_link_credit(k->pn) > 0) {
            c->lr_drain_due = true; /* still going out */
            continue;
        }
        e->drained_due = false;
        if (pn_link_get_drain(k->pn) && pn_link_drained(k->pn) > 0)
            did = true;
        flow_s_WT(e);
    }
    return did;
}

/* ---------------------------------------------------------------- the end of a link */

static void end_free_WT(rtr_lr_end_t *e)
{
    base_map_slot_t *s;
    for (size_t i = 0; (i = base_map_next(&e->dlv, i, &s)) != 0;) {
        pn_delivery_t *d = s->value;
        free(pn_delivery_get_context(d));
        pn_delivery_set_context(d, NULL);
    }
    base_map_fini(&e->dlv);
    free(e->da);
    if (e->backlog)
        e->k->conn->n_lr_backlog--;
    while (e->backlog) {
        lr_msg_t *m = e->backlog;
        e->backlog = m->next;
        msg_free(m); /* its bytes leave the lag: a waiting R goes on to its DETACH */
    }
    pause_set_WT(e, false);
    e->k->lr = NULL;
    e->pair->e[e->side] = NULL;
    pair_unref(e->pair);
    free(e);
}

/* S on the route container's side, going away before its peer settled what it was sent:
 * the client's deliveries get an outcome before the client's link is detached, as qdrouterd
 * gives them (a producer must not be left guessing): the one the container gave, settled, or
 * else RELEASED when none of it left the router and MODIFIED (delivery-failed) when it may
 * have reached the container.  Either way an at-least-once producer sends it again.  The
 * messages go before the DETACH, and the other worker takes them in order. */
static void settle_lost_WT(rtr_lr_end_t *e)
{
    base_map_slot_t *s;
    for (size_t i = 0; (i = base_map_next(&e->dlv, i, &s)) != 0;) {
        pn_delivery_t *d = s->value;
        lr_dlv_t      *r = pn_delivery_get_context(d);
        if (!r || r->told_settled)
            continue;
        lr_msg_t *m = msg_new(e->pair, 1 - e->side, LR_DISP);
        m->seq = r->seq;
        m->settled = true;
        if (r->state == PN_ACCEPTED || r->state == PN_REJECTED || r->state == PN_RELEASED ||
            r->state == PN_MODIFIED) {
            m->state = r->state; /* the container's outcome, already told */
        } else if (pn_delivery_buffered(d)) {
            m->state = PN_RELEASED;
        } else {
            m->state = PN_MODIFIED;
            m->failed = true;
        }
        r->told_settled = true;
        msg_post(m);
    }
}

void rtr_lr_end_WT(rtr_link_t *k)
{
    rtr_lr_end_t *e = k->lr;
    if (!e)
        return;
    if (!e->told) {
        e->told = true;
        if (e->side == 1 && end_is_s(k))
            settle_lost_WT(e);
        pn_link_t      *pl = k->pn;
        pn_condition_t *cond = pl ? pn_link_remote_condition(pl) : NULL;
        pn_session_t   *s = pl ? pn_link_session(pl) : NULL;
        pn_condition_t *scond = s ? pn_session_remote_condition(s) : NULL;
        if (s && (pn_session_state(s) & PN_REMOTE_CLOSED) && pn_condition_is_set(scond) &&
            !(pn_link_state(pl) & PN_REMOTE_CLOSED)) {
            /* its peer ended the link's session with an error (RabbitMQ refusing an
             * attach, docs/brokers.md R3): that error is the link's */
            detach_msg(e->pair, 1 - e->side, pn_condition_get_name(scond),
                       pn_condition_get_description(scond));
        } else if (pl && (pn_link_state(pl) & PN_REMOTE_CLOSED)) {
            /* its peer detached it: the other end's peer gets the same error (or none) */
            detach_msg(e->pair, 1 - e->side,
                       pn_condition_is_set(cond) ? pn_condition_get_name(cond) : NULL,
                       pn_condition_is_set(cond) ? pn_condition_get_description(cond) : NULL);
        } else if (pl && pn_condition_is_set(pn_link_condition(pl))) {
            /* the router closed it for what its peer did (rtr_link_close_error_WT()): the
             * other end's peer is told the same */
            detach_msg(e->pair, 1 - e->side, pn_condition_get_name(pn_link_condition(pl)),
                       pn_condition_get_description(pn_link_condition(pl)));
        } else {
            detach_msg(e->pair, 1 - e->side, "qd:routed-link-lost",
                       "Connectivity to the peer container was lost");
        }
    }
    end_free_WT(e);
}

/* R on the client's side, its other end gone: what is still unsettled here never reached
 * the other end (what did was settled by settle_lost_WT's messages, which came first): it
 * never left the router, so it is RELEASED, settled, before the client's link is detached. */
static void release_unsent_WT(rtr_lr_end_t *e)
{
    if (!e->dlv.count)
        return;
    pn_delivery_t  **ds = base_calloc(e->dlv.count, sizeof(*ds));
    size_t           n = 0;
    base_map_slot_t *s;
    for (size_t i = 0; (i = base_map_next(&e->dlv, i, &s)) != 0 && n < e->dlv.count;)
        ds[n++] = s->value;
    for (size_t i = 0; i < n; i++) {
        pn_delivery_update(ds[i], PN_RELEASED);
        dlv_settle_WT(e, ds[i]);
    }
    free(ds);
}

static void on_detach_WT(rtr_lr_end_t *e, lr_msg_t *m)
{
    rtr_link_t *k = e->k;
    e->told = true; /* the other end is gone: nothing goes back */
    if (e->side == 0 && !end_is_s(k))
        release_unsent_WT(e);
    LOGL(k, INFO, "Link route detached by the other end: %s %s", m->cond_name ? m->cond_name : "",
         m->cond_desc ? m->cond_desc : "");
    if (!k->open) {
        /* never answered: answer now (a null terminus) and detach at once, as a refusal */
        pn_terminus_set_type(k->out ? pn_link_source(k->pn) : pn_link_target(k->pn),
                             PN_UNSPECIFIED);
        pn_link_open(k->pn);
        k->open = true;
    }
    if (m->cond_name)
        rtr_pn_link_close_error_WT(k->pn, m->cond_name, m->cond_desc);
    else
        pn_link_close(k->pn);
    rtr_conn_t *c = k->conn;
    rtr_link_cleanup_WT(k); /* calls rtr_lr_end_WT: frees e */
    rtr_conn_mark_dirty_WT(c);
}

/* ---------------------------------------------------------------- messages */

void rtr_lr_msg_WT(rtr_worker_t *w, void *ptr)
{
    lr_msg_t *m = ptr;
    if (m->type == LR_ATTACH) {
        on_attach_WT(w, m);
        msg_free(m);
        return;
    }
    /* the end this is for, if it still lives (this worker is its owner) */
    BASE_BUG_ON(m->pair->w[m->to] != w);
    rtr_lr_end_t *e = m->pair->e[m->to];
    if (!e || !e->k->pn) {
        msg_free(m);
        return;
    }
    rtr_conn_t *c = e->k->conn;
    if (end_is_s(e->k) && backlog_needed_WT(e, m)) {
        backlog_add_WT(e, m); /* sent once the socket took what Proton framed */
        rtr_conn_mark_dirty_WT(c);
        return;
    }
    msg_apply_WT(e, m);
    rtr_conn_mark_dirty_WT(c);
    msg_free(m);
}

/* A message for end e, in its turn (after its backlog).  The caller frees m; e is gone
 * after a DETACH. */
static void msg_apply_WT(rtr_lr_end_t *e, lr_msg_t *m)
{
    rtr_conn_t *c = e->k->conn;
    switch (m->type) {
    case LR_ATTACHED:
        on_attached_WT(e, m);
        break;
    case LR_FLOW:
        e->got += m->credit;
        pn_link_flow(e->k->pn, (int)m->credit);
        credit_gauge_WT(e->k);
        break;
    case LR_DRAIN:
        e->draining = true;
        pn_link_drain(e->k->pn, 0);
        drain_check_r_WT(e);
        break;
    case LR_DRAINED:
        /* the transfers R sent before are queued here: Proton's drained would zero the
         * credit they need, so the answer waits until they went out */
        e->drain_asked = false;
        e->arrived += m->credit;
        e->drained_due = true;
        c->lr_drain_due = true;
        break;
    case LR_XFER:
        on_xfer_WT(e, m);
        break;
    case LR_DISP:
        on_disp_WT(e, m);
        break;
    case LR_DETACH:
        on_detach_WT(e, m);
        break;
    case LR_RESUME:
        on_resume_WT(e);
        break;
    }
    rtr_conn_mark_dirty_WT(c);
}

void rtr_lr_msg_drop(void *ptr)
{
    lr_msg_t *m = ptr;
    if (m->type == LR_ATTACH)
        pair_unref(m->pair); /* end 1's reference: it never lived */
    m->lagged = false; /* no worker is left to wake */
    msg_free(m);
}

/* ---------------------------------------------------------------- route containers */

