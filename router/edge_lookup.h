/* router/edge_lookup.h: qdrouterd 1.19's address lookup service on an edge connection
 * (`_$qd.addr_lookup`): the messages, the edge's client and the interior's server.  The
 * core's side (which attaches are asked about, what the answer does) is core/edge_lookup.h.
 *
 * The messages (qdrouterd 1.19's address_lookup_utils.c, address_lookup_server.c and
 * core_client_api.c; seen on the wire between two qdrouterds):
 *
 *   request (edge -> interior, on a sender to `_$qd.addr_lookup`):
 *     properties              reply-to = the edge's dynamic reply receiver's address,
 *                             correlation-id = a string unique among the edge's requests
 *     application-properties  {"version": uint 1, "opcode": uint 1 (link route lookup)}
 *     body (amqp-value)       [address (string), role (bool: true = the edge's end of the
 *                              client's link is a receiver, i.e. the client sends)]
 *   reply (interior -> edge, to the reply-to):
 *     properties              to = the request's reply-to, correlation-id = the request's
 *     application-properties  {"version": 1, "opcode": 1, "status": uint}
 *                             status 0 OK, 1 BAD_VERSION, 2 BAD_OPCODE, 3 NOT_FOUND,
 *                             4 INVALID_REQUEST; a link route found is 0, none is 3
 *     body (amqp-value)       [is link route (bool), has destinations (bool)]
 *
 * An interior settles a request ACCEPTED, or REJECTED when it is not one (no map of
 * application properties, no or another version, another opcode, a body that is not a list
 * of an address and a bool, no reply-to or correlation-id), which it then does not answer.
 *
 * Threads: the codec functions (rtr_elk_*_encode/_decode) are pure and thread-safe; the
 * others are _WT, the edge connection's worker.
 */
#ifndef JUNCTION_ROUTER_EDGE_LOOKUP_H
#define JUNCTION_ROUTER_EDGE_LOOKUP_H

#include "router/transport.h"

#include <proton/event.h>
#include <proton/message.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RTR_ELK_ADDRESS   "_$qd.addr_lookup"
#define RTR_ELK_VERSION   1
#define RTR_ELK_OPCODE_LR 1 /* link route lookup, the one opcode */

/* qdrouterd's statuses (qcm_address_lookup_status_t). */
typedef enum rtr_elk_status {
    RTR_ELK_OK = 0,
    RTR_ELK_BAD_VERSION,
    RTR_ELK_BAD_OPCODE,
    RTR_ELK_NOT_FOUND,
    RTR_ELK_INVALID,
} rtr_elk_status_t;

/* A request decoded: views into `msg`, which the caller frees with pn_message_free(). */
typedef struct rtr_elk_req {
    pn_message_t *msg;      /* the whole request (its reply-to and correlation-id) */
    pn_bytes_t    address;  /* body[0] */
    bool          receiver; /* body[1]: the client sends (the router's link receives) */
} rtr_elk_req_t;

/* The request for `address` (`receiver`: the client's link is a sender), answered to
 * `reply_to` under `cid`.  Returns the encoded message (heap, *len its length), or NULL when
 * Proton cannot encode it.  Pure. */
uint8_t *rtr_elk_request_encode(const char *address, bool receiver, const char *reply_to,
                                const char *cid, size_t *len);

/* Decode a request from p[0, len).  Returns RTR_ELK_OK with *q filled (q->msg to free), or
 * the status that says what is wrong (*why: a static description; q->msg NULL).  Work is
 * bounded by len.  Pure. */
rtr_elk_status_t rtr_elk_request_decode(const uint8_t *p, size_t len, rtr_elk_req_t *q,
                                        const char **why);

/* The reply to request `req` (a decoded request's msg): status, [lr, dest].  Returns the
 * encoded message (heap, *len), or NULL.  Pure. */
uint8_t *rtr_elk_reply_encode(pn_message_t *req, rtr_elk_status_t status, bool lr, bool dest,
                              size_t *len);

/* Decode a reply from p[0, len): its correlation-id (a string or symbol, copied to the heap
 * as *cid), its status, and when the status is OK its body.  Returns the status (>= 0), or
 * -1 when it is not a reply (no map of properties with a status, no string correlation-id
 * without a NUL in it, an OK whose body is not a list of two bools); *cid is NULL unless the
 * status is >= 0.
 * Work is bounded by len.  Pure. */
int rtr_elk_reply_decode(const uint8_t *p, size_t len, char **cid, bool *lr, bool *dest);

typedef struct rtr_elk rtr_elk_t;

/* Edge: the connection became the active one (edgeconn.c made `ssn`): attach the lookup
 * sender and the dynamic reply receiver.  *elk is made when NULL. */
void rtr_elk_client_start_WT(rtr_conn_t *c, rtr_elk_t **elk, pn_session_t *ssn);
/* Interior: the edge attached its lookup sender `pl` (target `_$qd.addr_lookup`): take it.
 * *elk is made when NULL. */
void rtr_elk_server_attach_WT(rtr_conn_t *c, rtr_elk_t **elk, pn_link_t *pl);
/* CORE_W_EDGE LOOKUP_ASK (edge) and LOOKUP_ANSWER (interior) for connection c.  *elk is
 * made when NULL (an ask before the links: answered at once, no lookup). */
void rtr_elk_work_WT(rtr_conn_t *c, rtr_elk_t **elk, core_work_t *work);
/* An event of c: true when it concerned a lookup link (nothing else is to be done). */
bool rtr_elk_event_WT(rtr_conn_t *c, rtr_elk_t *elk, pn_event_t *e);
/* Once a second: requests past their 3 s get the edge's own lookup. */
void rtr_elk_sweep_WT(rtr_conn_t *c, rtr_elk_t *elk, uint64_t now);
/* c is being freed (NULL is fine): what waits is dropped (the core answers the edge's
 * attaches itself when it hears that the connection closed). */
void rtr_elk_free(rtr_elk_t *elk);

#endif
