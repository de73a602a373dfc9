/* router/peer_quirks.h: what the router does differently toward a peer that is known to break
 * on some correct AMQP (docs/brokers.md, docs/decisions/0007): recognising the peer from its
 * open, and the helpers the links toward it use (peer_quirks.c).
 *
 * The quirks are looked up once per link, when the router attaches a link of its own on a
 * route container's connection (an autoLink's, link_auto.c; a link-routed link's broker end,
 * linkroute.c), and kept in the link (rtr_link_t.quirks); the per-message paths test one bit.
 *
 * rtr_peer_quirks_WT() reads Proton objects: the connection's worker only.  Everything else
 * here works on the caller's memory and is thread-safe.
 */
#ifndef JUNCTION_ROUTER_PEER_QUIRKS_H
#define JUNCTION_ROUTER_PEER_QUIRKS_H

#include "codec/codec.h"

#include <proton/connection.h>
#include <proton/disposition.h>
#include <proton/link.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What the router must avoid toward a peer (bits of rtr_link_t.quirks). */
enum {
    RTR_QUIRK_NONE = 0,
    RTR_QUIRK_NO_MODIFIED = 1u << 0, /* a MODIFIED disposition ends the session (RabbitMQ,
                                        R9): send RELEASED instead */
    RTR_QUIRK_NO_DA = 1u << 1,       /* delivery annotations drop the connection (R13):
                                        strip them from messages sent to it */
    RTR_QUIRK_NO_DRAIN = 1u << 2,    /* a drain ends the session (R6): never send one; take
                                        credit back by lowering it, answer a client's drain
                                        at the router */
    RTR_QUIRK_NO_RCV_SECOND = 1u << 3, /* rcv-settle-mode second ends the session (R15):
                                          never ask for it (rtr_quirk_rcv_mode) */
    RTR_QUIRK_CREDIT_OVERRUN = 1u << 4, /* a flow that meets transfers in flight lets it send
                                           beyond the credit (R18): such transfers are taken,
                                           never a reason to close the link (link_in.c,
                                           linkroute.c) */
};

/* The quirks of the peer of connection pc, from what it announced in its open (the
 * `product` connection property; RabbitMQ's is "RabbitMQ", R17).  0 for any other peer, and
 * before the peer's open arrived.  Walks the open's properties: call it once per link, not
 * per message.  _WT: pc's worker. */
unsigned rtr_peer_quirks_WT(pn_connection_t *pc);

/* The disposition state to send to a peer with `quirks` for the state `state` a client
 * gave: MODIFIED becomes RELEASED toward a peer with RTR_QUIRK_NO_MODIFIED (the message goes
 * back to its queue and comes again marked as redelivered - RabbitMQ's first-acquirer false -
 * which is what delivery-failed asks for; undeliverable-here cannot be said to it). */
static inline uint64_t rtr_quirk_outcome(unsigned quirks, uint64_t state)
{
    return (quirks & RTR_QUIRK_NO_MODIFIED) && state == PN_MODIFIED ? PN_RELEASED : state;
}

/* The rcv-settle-mode to put in the router's attach toward a peer with `quirks`, for a
 * link-routed client that attached with `wanted` (PN_RCV_FIRST or PN_RCV_SECOND);
 * `router_sends` when the router's link toward the peer is a sender (the client sends).
 * Returns false when the client's link must be refused instead (*mode untouched).
 * Toward a peer with RTR_QUIRK_NO_RCV_SECOND (decision 0007):
 *   - a sending client's second is only a wish: the receiver's attach says the mode it really
 *     uses (AMQP 1.0 part 2, 2.7.3), so the router asks for first and the client gets the
 *     peer's answer (first) in the router's reply;
 *   - a receiving client's second is the mode the client itself uses: the router cannot
 *     change it, and passing it on would end the peer's session, so it is refused. */
static inline bool rtr_quirk_rcv_mode(unsigned quirks, bool router_sends, int wanted, int *mode)
{
    if (!(quirks & RTR_QUIRK_NO_RCV_SECOND) || wanted != PN_RCV_SECOND) {
        *mode = wanted;
        return true;
    }
    if (!router_sends)
        return false;
    *mode = PN_RCV_FIRST;
    return true;
}

/* The condition a receiving client asking for rcv-settle-mode second is refused with. */
#define RTR_QUIRK_RCV_SECOND_COND "amqp:not-implemented"
#define RTR_QUIRK_RCV_SECOND_DESC                                                                  \
    "rcv-settle-mode second is not supported by the route container (it ends the session "         \
    "over it): attach with rcv-settle-mode first"

/* ---- stripping delivery annotations from a message that arrives in pieces (link routes)
 *
 * A message's delivery-annotations section, if any, is its first section or follows the
 * header (AMQP 1.0 part 3, 3.2).  The filter passes the header, drops the delivery
 * annotations, and passes everything after them untouched, whatever the pieces' sizes: it
 * holds at most RTR_DA_STRIP_HELD_MAX bytes of a section's start until it knows which
 * section that is.  Bytes it cannot read as a section start are passed as they are (the
 * peer judges a malformed message, as it would without the router). */

/* Most bytes a filter holds back between calls (a section's descriptor and size fields,
 * with the longest descriptor symbol the filter knows). */
#define RTR_DA_STRIP_HELD_MAX 48

/* One message's filter state; zeroed (or rtr_da_strip_init) at the message's start. */
typedef struct rtr_da_strip {
    uint8_t  state;                      /* RTR_DA_* below */
    uint8_t  n_held;                     /* bytes in held[] */
    uint8_t  held[RTR_DA_STRIP_HELD_MAX]; /* the start of a section not yet recognised */
    uint64_t left;                       /* bytes of the current section still to pass or drop */
} rtr_da_strip_t;

/* Ready s for a new message. */
void rtr_da_strip_init(rtr_da_strip_t *s);
/* Filter the next n bytes of the message: writes what is to be sent into out (room for
 * n + RTR_DA_STRIP_HELD_MAX bytes) and returns its length. */
size_t rtr_da_strip(rtr_da_strip_t *s, const uint8_t *in, size_t n, uint8_t *out);
/* The message ended: writes the bytes still held (at most RTR_DA_STRIP_HELD_MAX) into out
 * and returns their count. */
size_t rtr_da_strip_end(rtr_da_strip_t *s, uint8_t *out);

/* ---- stripping them from a message the router holds whole (autoLinks) */

/* The parts of p[0, n) that lie outside cut[0, cut_len) (a section the caller drops, found
 * by codec_scan), in order: writes up to 2 views into out and returns their count (0 when
 * everything is cut).  With cut == NULL or a range p does not overlap, out[0] is p. */
int rtr_quirk_cut(const uint8_t *p, size_t n, const uint8_t *cut, size_t cut_len,
                  codec_bytes_t out[2]);

#endif
