/* router/edge_lookup.c: the address lookup service on an edge connection (see
 * edge_lookup.h): the messages, the edge's client, the interior's server.
 *
 * Thread suffixes: _WT = the edge connection's worker.  The codec functions are pure.
 *
 * DESIGN: the lookup links are bare Proton links that the core never hears of, like the
 * tracking and heartbeat links (edgeconn.c), on the edge session.
 *  - Edge (client): a sender to `_$qd.addr_lookup` and a receiver with a dynamic source,
 *    whose address (the interior's answer) is the requests' reply-to.  A request
 *    (CORE_W_EDGE LOOKUP_ASK) waits until both are up and the sender has credit, goes out
 *    presettled (qdrouterd's client gets its answer from the reply, not the outcome), and is
 *    answered with CORE_A_EDGE LOOKUP_REPLY when its reply comes, or with the edge's own
 *    lookup (VERDICT_LOCAL) after 3 s, when a lookup link is refused or detached, or when
 *    the reply is not one.  Requests are few at a time (clients attaching), so lists.
 *  - Interior (server): the edge's sender, credited 32 at a time (qdrouterd's window); a
 *    request is decoded here, asked of the core (CORE_A_EDGE LOOKUP, the request kept
 *    meanwhile), and answered (CORE_W_EDGE LOOKUP_ANSWER) on the edge's reply receiver:
 *    the outgoing link of this connection whose address is the request's reply-to, as a
 *    presettled copy of the reply (rtr_on_send_WT, the path a core copy takes).  qdrouterd
 *    routes the reply by its `to`; the lookup client's reply receiver is always on the edge
 *    connection that asked, so Junction looks it up there (a reply-to elsewhere: dropped,
 *    logged).
 */
#include "router/edge_lookup.h"

#include "codec/codec.h"
#include "codec/frame.h"
#include "core/base/base.h"
#include "router/bare.h"
#include "router/link_out.h"
#include "router/msg.h"

#include <inttypes.h>
#include <proton/codec.h>
#include <proton/connection.h>
#include <proton/delivery.h>
#include <proton/link.h>
#include <proton/session.h>
#include <proton/terminus.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Credit of the edge's reply receiver and of the interior's request receiver (qdrouterd's:
 * core_client_api's 250, address_lookup_server's CREDIT_WINDOW). */
#define ELK_REPLY_CREDIT   250
#define ELK_SERVER_CREDIT  32
/* A request not answered in this long gets the edge's own lookup (qdrouterd's 3 s). */
#define ELK_TIMEOUT_MS     3000
/* The largest lookup message read; a bigger one is read and dropped. */
#define ELK_MSG_MAX        (64u << 10)
/* Requests an interior holds for one edge while the core answers; more are rejected. */
#define ELK_SERVER_PENDING 4096

/* ---------------------------------------------------------------- the messages */

static pn_bytes_t bytes_of(const char *s)
{
    return pn_bytes(strlen(s), s);
}

/* Encode m into a new heap buffer.  NULL when Proton cannot. */
static uint8_t *encode(pn_message_t *m, size_t *len)
{
    size_t   cap = 256;
    uint8_t *buf = base_malloc(cap);
    int      rc;
    while ((rc = pn_message_encode(m, (char *)buf, &cap)) == PN_OVERFLOW) {
        cap *= 2;
        buf = base_realloc(buf, cap);
    }
    if (rc != 0) {
        free(buf);
        return NULL;
    }
    *len = cap;
    return buf;
}

static void put_props(pn_message_t *m, int status)
{
    pn_data_t *p = pn_message_properties(m);
    pn_data_put_map(p);
    pn_data_enter(p);
    pn_data_put_string(p, bytes_of("version"));
    pn_data_put_uint(p, RTR_ELK_VERSION);
    pn_data_put_string(p, bytes_of("opcode"));
    pn_data_put_uint(p, RTR_ELK_OPCODE_LR);
    if (status >= 0) {
        pn_data_put_string(p, bytes_of("status"));
        pn_data_put_uint(p, (uint32_t)status);
    }
    pn_data_exit(p);
}

uint8_t *rtr_elk_request_encode(const char *address, bool receiver, const char *reply_to,
                                const char *cid, size_t *len)
{
    pn_message_t *m = pn_message();
    pn_message_set_durable(m, false);
    pn_message_set_reply_to(m, reply_to);
    pn_atom_t id = {.type = PN_STRING};
    id.u.as_bytes = bytes_of(cid);
    pn_message_set_correlation_id(m, id);
    put_props(m, -1);
    pn_data_t *b = pn_message_body(m);
    pn_data_put_list(b);
    pn_data_enter(b);
    pn_data_put_string(b, bytes_of(address));
    pn_data_put_bool(b, receiver);
    pn_data_exit(b);
    uint8_t *out = encode(m, len);
    pn_message_free(m);
    return out;
}

/* The value of key `key` (a string or symbol key) in the map d is entered at, leaving d at
 * that value; false when there is none. */
static bool map_find(pn_data_t *d, const char *key)
{
    size_t klen = strlen(key);
    pn_data_rewind(d);
    if (!pn_data_next(d) || pn_data_type(d) != PN_MAP)
        return false;
    pn_data_enter(d);
    while (pn_data_next(d)) {
        pn_type_t  t = pn_data_type(d);
        pn_bytes_t k = t == PN_STRING   ? pn_data_get_string(d)
                       : t == PN_SYMBOL ? pn_data_get_symbol(d)
                                        : pn_bytes(0, NULL);
        if (!pn_data_next(d))
            return false;
        if (k.start && k.size == klen && memcmp(k.start, key, klen) == 0)
            return true;
    }
    return false;
}

/* The current value of d as an unsigned number (any integer type that is not negative). */
static bool as_uint(pn_data_t *d, uint64_t *v)
{
    int64_t s;
    switch (pn_data_type(d)) {
    case PN_UBYTE:
        *v = pn_data_get_ubyte(d);
        return true;
    case PN_USHORT:
        *v = pn_data_get_ushort(d);
        return true;
    case PN_UINT:
        *v = pn_data_get_uint(d);
        return true;
    case PN_ULONG:
        *v = pn_data_get_ulong(d);
        return true;
    case PN_BYTE:
        s = pn_data_get_byte(d);
        break;
    case PN_SHORT:
        s = pn_data_get_short(d);
        break;
    case PN_INT:
        s = pn_data_get_int(d);
        break;
    case PN_LONG:
        s = pn_data_get_long(d);
        break;
    default:
        return false;
    }
    if (s < 0)
        return false;
    *v = (uint64_t)s;
    return true;
}

/* Decode p[0, len) as a message; NULL when it is not one (checked first, so that Proton's
 * work is bounded by len). */
static pn_message_t *decode(const uint8_t *p, size_t len)
{
    if (len == 0 || codec_values_check(p, len) != 0)
        return NULL;
    pn_message_t *m = pn_message();
    if (pn_message_decode(m, (const char *)p, len) != 0) {
        pn_message_free(m);
        return NULL;
    }
    return m;
}

rtr_elk_status_t rtr_elk_request_decode(const uint8_t *p, size_t len, rtr_elk_req_t *q,
                                        const char **why)
{
    memset(q, 0, sizeof(*q));
    pn_message_t    *m = decode(p, len);
    rtr_elk_status_t st = RTR_ELK_INVALID;
    uint64_t         v = 0;
    if (!m) {
        *why = "not an AMQP message";
        return RTR_ELK_INVALID;
    }
    pn_data_t *props = pn_message_properties(m);
    pn_data_rewind(props);
    if (!pn_data_next(props) || pn_data_type(props) != PN_MAP) {
        *why = "no properties";
        goto out_free;
    }
    if (!map_find(props, "version")) {
        *why = "no version";
        goto out_free;
    }
    if (!as_uint(props, &v)) {
        *why = "invalid version";
        goto out_free;
    }
    if (v != RTR_ELK_VERSION) {
        *why = "unknown version";
        st = RTR_ELK_BAD_VERSION;
        goto out_free;
    }
    if (!map_find(props, "opcode") || !as_uint(props, &v) || v != RTR_ELK_OPCODE_LR) {
        *why = "invalid opcode";
        st = RTR_ELK_BAD_OPCODE;
        goto out_free;
    }
    pn_data_t *b = pn_message_body(m);
    pn_data_rewind(b);
    if (!pn_data_next(b) || pn_data_type(b) != PN_LIST || pn_data_get_list(b) < 2) {
        *why = "invalid request body";
        goto out_free;
    }
    pn_data_enter(b);
    pn_data_next(b);
    if (pn_data_type(b) == PN_STRING)
        q->address = pn_data_get_string(b);
    else if (pn_data_type(b) == PN_SYMBOL)
        q->address = pn_data_get_symbol(b);
    if (!q->address.start || !pn_data_next(b) || pn_data_type(b) != PN_BOOL) {
        *why = "invalid request body";
        goto out_free;
    }
    q->receiver = pn_data_get_bool(b);
    const char *rt = pn_message_get_reply_to(m);
    pn_msgid_t  cid = pn_message_get_correlation_id(m);
    if (!rt || !*rt || cid.type == PN_NULL) {
        *why = "invalid request message properties (no reply-to or correlation-id)";
        goto out_free;
    }
    q->msg = m;
    *why = NULL;
    return RTR_ELK_OK;
out_free:
    pn_message_free(m);
    q->address = pn_bytes(0, NULL);
    return st;
}

uint8_t *rtr_elk_reply_encode(pn_message_t *req, rtr_elk_status_t status, bool lr, bool dest,
                              size_t *len)
{
    pn_message_t *m = pn_message();
    pn_message_set_durable(m, false);
    pn_message_set_address(m, pn_message_get_reply_to(req));
    pn_message_set_correlation_id(m, pn_message_get_correlation_id(req));
    put_props(m, (int)status);
    pn_data_t *b = pn_message_body(m);
    pn_data_put_list(b);
    pn_data_enter(b);
    pn_data_put_bool(b, lr);
    pn_data_put_bool(b, dest);
    pn_data_exit(b);
    uint8_t *out = encode(m, len);
    pn_message_free(m);
    return out;
}

int rtr_elk_reply_decode(const uint8_t *p, size_t len, char **cid, bool *lr, bool *dest)
{
    *cid = NULL;
    *lr = *dest = false;
    pn_message_t *m = decode(p, len);
    if (!m)
        return -1;
    int        st = -1;
    uint64_t   v = 0;
    pn_msgid_t id = pn_message_get_correlation_id(m);
    pn_data_t *props = pn_message_properties(m);
    /* a correlation-id with a NUL in it cannot be one of ours (a C string) */
    if ((id.type != PN_STRING && id.type != PN_SYMBOL) ||
        memchr(id.u.as_bytes.start, '\0', id.u.as_bytes.size) || !map_find(props, "status") ||
        !as_uint(props, &v) || v > RTR_ELK_INVALID)
        goto out_free;
    if (v == RTR_ELK_OK) {
        pn_data_t *b = pn_message_body(m);
        pn_data_rewind(b);
        if (!pn_data_next(b) || pn_data_type(b) != PN_LIST || pn_data_get_list(b) < 2)
            goto out_free;
        pn_data_enter(b);
        if (!pn_data_next(b) || pn_data_type(b) != PN_BOOL)
            goto out_free;
        *lr = pn_data_get_bool(b);
        if (!pn_data_next(b) || pn_data_type(b) != PN_BOOL)
            goto out_free;
        *dest = pn_data_get_bool(b);
    }
    *cid = base_strndup(id.u.as_bytes.start, id.u.as_bytes.size);
    st = (int)v;
out_free:
    pn_message_free(m);
    if (st < 0)
        *lr = *dest = false;
    return st;
}

/* ---------------------------------------------------------------- the links */

/* A request: the edge's (waiting to go, or sent) or the interior's (asked of the core). */
typedef struct elk_req {
    uint64_t        req;      /* edge: the core's number; interior: ours */
    char           *address;  /* edge: the address (heap) */
    uint8_t         dir;      /* edge: core_link_dir_t of the client's link */
    uint64_t        deadline; /* edge: when it gets the edge's own lookup (loop ms) */
    pn_message_t   *msg;      /* interior: the request (its reply-to, correlation-id) */
    struct elk_req *next;
} elk_req_t;

struct rtr_elk {
    pn_link_t *snd;       /* edge: the request sender, or NULL */
    pn_link_t *rcv;       /* edge: the reply receiver, or NULL */
    char      *reply_to;  /* edge: the reply receiver's address, once the interior gave it */
    bool       failed;    /* edge: a lookup link was refused or lost: no more lookups here */
    elk_req_t *queued;    /* edge: requests not yet sent, oldest first */
    elk_req_t *sent;      /* edge: requests sent, not answered */
    pn_link_t *srv;       /* interior: the edge's request sender (our receiver), or NULL */
    elk_req_t *pending;   /* interior: requests the core has not answered */
    uint32_t   n_pending; /* their count */
    uint64_t   next_req;  /* interior: the next request's number */
    uint64_t   tag;       /* delivery tags of the requests */
    uint8_t   *rx;        /* the message being received */
    size_t     rx_len;
    size_t     rx_cap;
    bool       rx_drop; /* it is too big: read and forget */
};

static rtr_elk_t *elk_get(rtr_elk_t **elk)
{
    if (!*elk)
        *elk = base_calloc(1, sizeof(**elk));
    return *elk;
}

static void req_free(elk_req_t *r)
{
    free(r->address);
    if (r->msg)
        pn_message_free(r->msg);
    free(r);
}

/* Edge: answer request r to the core, and free it. */
static void reply_core_WT(rtr_conn_t *c, elk_req_t *r, core_edge_verdict_t v)
{
    core_action_t *a = rtr_worker_action_WT(c->worker);
    a->type = CORE_A_EDGE;
    a->link_id = 0;
    a->u.edge.conn_id = c->id;
    a->u.edge.event = CORE_EDGE_LOOKUP_REPLY;
    a->u.edge.key = NULL;
    a->u.edge.req = r->req;
    a->u.edge.verdict = (uint8_t)v;
    req_free(r);
}

/* Edge: every request gets the edge's own lookup (the service is gone). */
static void fail_all_WT(rtr_conn_t *c, rtr_elk_t *k)
{
    k->failed = true;
    elk_req_t *lists[2] = {k->queued, k->sent};
    k->queued = k->sent = NULL;
    for (int i = 0; i < 2; i++) {
        while (lists[i]) {
            elk_req_t *r = lists[i];
            lists[i] = r->next;
            reply_core_WT(c, r, CORE_EDGE_VERDICT_LOCAL);
        }
    }
}

static pn_link_t *link_make_WT(rtr_conn_t *c, pn_session_t *ssn, bool sender, const char *what)
{
    char name[160];
    snprintf(name, sizeof(name), "%s.edge.%llu.%s", c->worker->ctx->router_id,
             (unsigned long long)c->id, what);
    return sender ? pn_sender(ssn, name) : pn_receiver(ssn, name);
}

void rtr_elk_client_start_WT(rtr_conn_t *c, rtr_elk_t **elk, pn_session_t *ssn)
{
    rtr_elk_t *k = elk_get(elk);
    if (k->snd || k->rcv || k->failed)
        return;
    k->snd = link_make_WT(c, ssn, true, "addr-lookup");
    pn_terminus_set_address(pn_link_target(k->snd), RTR_ELK_ADDRESS);
    pn_link_set_snd_settle_mode(k->snd, PN_SND_SETTLED);
    pn_link_open(k->snd);
    k->rcv = link_make_WT(c, ssn, false, "addr-lookup-reply");
    pn_terminus_set_dynamic(pn_link_source(k->rcv), true);
    pn_link_open(k->rcv);
    pn_link_flow(k->rcv, ELK_REPLY_CREDIT);
    rtr_conn_mark_dirty_WT(c);
}

/* Edge: send what waits while the links are up and the interior gives credit. */
static void pump_WT(rtr_conn_t *c, rtr_elk_t *k)
{
    if (!k->snd || !k->reply_to || !(pn_link_state(k->snd) & PN_REMOTE_ACTIVE))
        return;
    while (k->queued && pn_link_credit(k->snd) > 0) {
        elk_req_t *r = k->queued;
        char       cid[48];
        snprintf(cid, sizeof(cid), "elk-%016llx", (unsigned long long)r->req);
        size_t   len = 0;
        uint8_t *bytes =
            rtr_elk_request_encode(r->address, r->dir == CORE_LINK_IN, k->reply_to, cid, &len);
        k->queued = r->next;
        if (!bytes) {
            reply_core_WT(c, r, CORE_EDGE_VERDICT_LOCAL);
            continue;
        }
        uint64_t       tag = k->tag++;
        pn_delivery_t *d = pn_delivery(k->snd, pn_dtag((const char *)&tag, sizeof(tag)));
        pn_link_send(k->snd, (const char *)bytes, len);
        pn_link_advance(k->snd);
        pn_delivery_settle(d);
        free(bytes);
        r->next = k->sent;
        k->sent = r;
        LOGC(c, DEBUG, "Address lookup request %s sent: %s", cid, r->address);
    }
    rtr_conn_mark_dirty_WT(c);
}

/* Edge: a reply arrived. */
static void on_reply_WT(rtr_conn_t *c, rtr_elk_t *k, const uint8_t *p, size_t len)
{
    char *cid;
    bool  lr, dest;
    int   st = rtr_elk_reply_decode(p, len, &cid, &lr, &dest);
    if (st < 0) {
        LOGC(c, ERROR, "Invalid address lookup reply: dropped");
        return;
    }
    unsigned long long n = 0;
    elk_req_t        **pp = &k->sent;
    if (sscanf(cid, "elk-%16llx", &n) == 1) {
        while (*pp && (*pp)->req != n)
            pp = &(*pp)->next;
    } else {
        pp = NULL;
    }
    free(cid);
    if (!pp || !*pp) {
        LOGC(c, DEBUG, "Address lookup reply dropped: no matching correlation-id");
        return;
    }
    elk_req_t *r = *pp;
    *pp = r->next;
    core_edge_verdict_t v = CORE_EDGE_VERDICT_LOCAL;
    if (st == RTR_ELK_OK && lr)
        v = dest ? CORE_EDGE_VERDICT_ROUTED : CORE_EDGE_VERDICT_NO_ROUTE;
    LOGC(c, DEBUG, "Address lookup of %s: status %d, link route %s, destinations %s", r->address,
         st, lr ? "yes" : "no", dest ? "yes" : "no");
    reply_core_WT(c, r, v);
}

void rtr_elk_server_attach_WT(rtr_conn_t *c, rtr_elk_t **elk, pn_link_t *pl)
{
    rtr_elk_t *k = elk_get(elk);
    if (k->srv) {
        rtr_pn_link_close_error_WT(pl, "amqp:resource-locked",
                                   "The address lookup link is attached already");
        LOGC(c, INFO, "A second address lookup link from the edge refused");
        return;
    }
    pn_terminus_copy(pn_link_source(pl), pn_link_remote_source(pl));
    pn_terminus_copy(pn_link_target(pl), pn_link_remote_target(pl));
    pn_link_set_rcv_settle_mode(pl, PN_RCV_FIRST);
    pn_link_open(pl);
    pn_link_flow(pl, ELK_SERVER_CREDIT);
    k->srv = pl;
    LOGC(c, INFO, "Edge attached to the address lookup server");
    rtr_conn_mark_dirty_WT(c);
}

/* Interior: a request arrived: decode it and ask the core.  Returns the outcome. */
static uint64_t on_request_WT(rtr_conn_t *c, rtr_elk_t *k, const uint8_t *p, size_t len)
{
    rtr_elk_req_t    q;
    const char      *why = NULL;
    rtr_elk_status_t st = rtr_elk_request_decode(p, len, &q, &why);
    if (st != RTR_ELK_OK) {
        LOGC(c, ERROR, "Invalid address lookup request - %s: rejected", why ? why : "?");
        return PN_REJECTED;
    }
    if (k->n_pending >= ELK_SERVER_PENDING) {
        LOGC(c, ERROR, "Address lookup request rejected: %u requests wait for an answer",
             k->n_pending);
        pn_message_free(q.msg);
        return PN_REJECTED;
    }
    elk_req_t *r = base_calloc(1, sizeof(*r));
    r->req = ++k->next_req;
    r->msg = q.msg;
    r->next = k->pending;
    k->pending = r;
    k->n_pending++;
    core_action_t *a = rtr_worker_action_WT(c->worker);
    a->type = CORE_A_EDGE;
    a->link_id = 0;
    a->u.edge.conn_id = c->id;
    a->u.edge.event = CORE_EDGE_LOOKUP;
    a->u.edge.key = base_strndup(q.address.start, q.address.size);
    a->u.edge.req = r->req;
    a->u.edge.dir = q.receiver ? CORE_LINK_IN : CORE_LINK_OUT;
    return PN_ACCEPTED;
}

/* Interior: the outgoing link of c whose address is `to` (the edge's reply receiver). */
static rtr_link_t *reply_link_WT(rtr_conn_t *c, const char *to)
{
    for (rtr_link_t *l = c->links; l; l = l->next) {
        if (!l->out || !l->pn || !l->open || l->lr)
            continue;
        const char *a = pn_terminus_get_address(pn_link_source(l->pn));
        if (a && strcmp(a, to) == 0)
            return l;
    }
    return NULL;
}

/* Interior: the core answered request req. */
static void on_answer_WT(rtr_conn_t *c, rtr_elk_t *k, uint64_t req, bool lr, bool dest)
{
    elk_req_t **pp = &k->pending;
    while (*pp && (*pp)->req != req)
        pp = &(*pp)->next;
    if (!*pp)
        return;
    elk_req_t *r = *pp;
    *pp = r->next;
    k->n_pending--;
    const char *to = pn_message_get_reply_to(r->msg);
    rtr_link_t *l = reply_link_WT(c, to);
    size_t      len = 0;
    uint8_t    *bytes =
        l ? rtr_elk_reply_encode(r->msg, lr ? RTR_ELK_OK : RTR_ELK_NOT_FOUND, lr, dest, &len)
             : NULL;
    if (!bytes) {
        LOGC(c, ERROR, "Address lookup reply not sent: no link of this connection is %s", to);
        req_free(r);
        return;
    }
    rtr_msg_t *m = rtr_msg_new();
    rtr_msg_reserve(m, len);
    memcpy(m->data, bytes, len);
    m->len = len;
    free(bytes);
    const char *why = NULL;
    if (codec_scan(m->data, m->len, true, &m->scan, &why) != 0) {
        /* our own encoding: cannot happen unless the codec and Proton disagree */
        LOGC(c, ERROR, "Address lookup reply not sent: %s", why ? why : "scan failed");
        rtr_msg_unref(m);
        req_free(r);
        return;
    }
    /* a presettled copy on the reply link, as the core would post it */
    core_work_t w = {.type = CORE_W_SEND, .handle = l};
    w.u.send.content = &m->c;
    w.u.send.presettled = true;
    rtr_on_send_WT(c->worker, l, &w);
    LOGC(c, DEBUG, "Address lookup answered: %s link route, %s destinations", lr ? "a" : "no",
         dest ? "with" : "without");
    req_free(r);
}

void rtr_elk_work_WT(rtr_conn_t *c, rtr_elk_t **elk, core_work_t *work)
{
    rtr_elk_t *k = elk_get(elk);
    if (work->u.edge.op == CORE_EDGE_LOOKUP_ANSWER) {
        on_answer_WT(c, k, work->u.edge.req, work->u.edge.flag, work->u.edge.dest);
        return;
    }
    elk_req_t *r = base_calloc(1, sizeof(*r));
    r->req = work->u.edge.req;
    r->dir = work->u.edge.dir;
    r->address = work->u.edge.key;
    work->u.edge.key = NULL;
    r->deadline = uv_now(&c->worker->loop) + ELK_TIMEOUT_MS;
    if (k->failed || !k->snd || !r->address) {
        reply_core_WT(c, r, CORE_EDGE_VERDICT_LOCAL);
        return;
    }
    elk_req_t **pp = &k->queued;
    while (*pp)
        pp = &(*pp)->next;
    *pp = r;
    pump_WT(c, k);
}

static void delivery_WT(rtr_conn_t *c, rtr_elk_t *k, pn_delivery_t *d)
{
    pn_link_t *pl = pn_delivery_link(d);
    if (pl == k->snd) {
        if (pn_delivery_updated(d))
            pn_delivery_settle(d);
        return;
    }
    if (!rtr_bare_gather_WT(d, ELK_MSG_MAX, &k->rx, &k->rx_len, &k->rx_cap, &k->rx_drop))
        return;
    uint64_t outcome = PN_ACCEPTED;
    if (k->rx_drop) {
        LOGC(c, ERROR, "Address lookup message larger than %u bytes: dropped", ELK_MSG_MAX);
        outcome = PN_REJECTED;
    } else if (pl == k->srv) {
        outcome = on_request_WT(c, k, k->rx, k->rx_len);
    } else {
        on_reply_WT(c, k, k->rx, k->rx_len);
    }
    k->rx_len = 0;
    k->rx_drop = false;
    if (!pn_delivery_settled(d))
        pn_delivery_update(d, outcome);
    pn_delivery_settle(d);
    pn_link_flow(pl, 1);
    rtr_conn_mark_dirty_WT(c);
}

bool rtr_elk_event_WT(rtr_conn_t *c, rtr_elk_t *k, pn_event_t *e)
{
    switch (pn_event_type(e)) {
    case PN_LINK_REMOTE_OPEN:
    case PN_LINK_FLOW: {
        pn_link_t *pl = pn_event_link(e);
        if (!pl || (pl != k->snd && pl != k->rcv && pl != k->srv))
            return false;
        if (pl == k->rcv && pn_event_type(e) == PN_LINK_REMOTE_OPEN) {
            const char *a = pn_terminus_get_address(pn_link_remote_source(pl));
            if (a && *a && !k->reply_to) {
                k->reply_to = base_strdup(a);
                LOGC(c, INFO, "Address lookup client attached to the interior (reply to %s)", a);
            }
        }
        pump_WT(c, k);
        return true;
    }
    case PN_DELIVERY: {
        pn_delivery_t *d = pn_event_delivery(e);
        pn_link_t     *pl = pn_delivery_link(d);
        if (pl != k->snd && pl != k->rcv && pl != k->srv)
            return false;
        delivery_WT(c, k, d);
        return true;
    }
    case PN_LINK_REMOTE_CLOSE:
    case PN_LINK_REMOTE_DETACH: {
        pn_link_t *pl = pn_event_link(e);
        if (!pl || (pl != k->snd && pl != k->rcv && pl != k->srv))
            return false;
        pn_condition_t *cond = pn_link_remote_condition(pl);
        const char     *cn = pn_condition_is_set(cond) ? pn_condition_get_name(cond) : NULL;
        if (pl == k->srv) {
            k->srv = NULL;
            LOGC(c, INFO, "Edge detached from the address lookup server");
        } else {
            if (pl == k->snd)
                k->snd = NULL;
            else
                k->rcv = NULL;
            LOGC(c, INFO,
                 "Address lookup link detached by the interior%s%s: link routes "
                 "through the interior are not looked up",
                 cn ? ": " : "", cn ? cn : "");
            fail_all_WT(c, k);
            /* the other one has no use any more */
            pn_link_t *other = k->snd ? k->snd : k->rcv;
            if (other) {
                k->snd = k->rcv = NULL;
                pn_link_close(other);
            }
        }
        if (pn_event_type(e) == PN_LINK_REMOTE_CLOSE)
            pn_link_close(pl);
        else
            pn_link_detach(pl);
        rtr_conn_mark_dirty_WT(c);
        return true;
    }
    case PN_SESSION_REMOTE_CLOSE: {
        pn_session_t *s = pn_event_session(e);
        if (k->snd && pn_link_session(k->snd) == s)
            k->snd = NULL;
        if (k->rcv && pn_link_session(k->rcv) == s)
            k->rcv = NULL;
        if (k->srv && pn_link_session(k->srv) == s)
            k->srv = NULL;
        return false;
    }
    case PN_CONNECTION_REMOTE_CLOSE:
    case PN_TRANSPORT_CLOSED:
        k->snd = k->rcv = k->srv = NULL;
        return false;
    default:
        return false;
    }
}

void rtr_elk_sweep_WT(rtr_conn_t *c, rtr_elk_t *k, uint64_t now)
{
    elk_req_t **lists[2] = {&k->queued, &k->sent};
    for (int i = 0; i < 2; i++) {
        for (elk_req_t **pp = lists[i]; *pp;) {
            elk_req_t *r = *pp;
            if (now < r->deadline) {
                pp = &r->next;
                continue;
            }
            *pp = r->next;
            LOGC(c, INFO, "Address lookup of %s not answered in %d s: the edge's own lookup",
                 r->address ? r->address : "", ELK_TIMEOUT_MS / 1000);
            reply_core_WT(c, r, CORE_EDGE_VERDICT_LOCAL);
        }
    }
}

void rtr_elk_free(rtr_elk_t *k)
{
    if (!k)
        return;
    elk_req_t *lists[3] = {k->queued, k->sent, k->pending};
    for (int i = 0; i < 3; i++) {
        while (lists[i]) {
            elk_req_t *r = lists[i];
            lists[i] = r->next;
            req_free(r);
        }
    }
    free(k->reply_to);
    free(k->rx);
    free(k);
}
