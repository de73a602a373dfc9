/* router/edgemsg.h: the bodies of an edge connection's own messages (edgemsg.c), as
 * qdrouterd 1.19 writes them: the interior's address-tracking message, an amqp-value list
 * [hash key (string), has-destination (bool)], and the edge's heartbeat, an amqp-value int.
 *
 * Thread-safe: the functions work on the caller's memory only.  A received message is parsed
 * here and acted on by router/edgeconn.c; tests/fuzz/fuzz_edge.c drives the parser.
 */
#ifndef JUNCTION_ROUTER_EDGEMSG_H
#define JUNCTION_ROUTER_EDGEMSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The bytes of a heartbeat message with counter `seq` (an amqp-value section). */
#define RTR_EDGEMSG_HB_LEN 8
void rtr_edgemsg_heartbeat(uint32_t seq, uint8_t out[RTR_EDGEMSG_HB_LEN]);

/* A tracking message for hash key `key` (NUL-terminated): its bytes (heap; the caller frees
 * them) and their count in *len; NULL when Proton cannot encode it. */
uint8_t *rtr_edgemsg_track_encode(const char *key, bool dest, size_t *len);

/* Parse the tracking message msg[0, len): on success a new copy of its key (heap,
 * NUL-terminated; the caller frees it), its flag in *dest; NULL when it is not one (no bytes,
 * values the bytes do not pay for, not a message, a body that is not a list of a non-empty string or symbol and a bool, a key with a
 * NUL in it). */
char *rtr_edgemsg_track_parse(const uint8_t *msg, size_t len, bool *dest);

#endif
