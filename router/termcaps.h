/* router/termcaps.h: the router capabilities of a link's terminus that pick a phase of its
 * address (termcaps.c): qd.waypoint[.N] and qd.fallback, read from a client's or an edge's
 * attach and written on an edge's proxy links, as qdrouterd 1.19 reads and writes them.
 *
 * Nothing here keeps state: the functions work on the terminus they are given, so they belong
 * to the thread that owns its connection (a worker).
 */
#ifndef JUNCTION_ROUTER_TERMCAPS_H
#define JUNCTION_ROUTER_TERMCAPS_H

#include <proton/terminus.h>
#include <stdbool.h>
#include <stdint.h>

/* The waypoint ordinal of t's capabilities: N (1-9) for the first qd.waypoint.N among them,
 * 1 for a bare qd.waypoint, 0 for none.  *fallback: whether its first capability is
 * qd.fallback (qdrouterd looks at the first only).  t may be NULL (nothing). */
uint8_t rtr_termcaps_read(pn_terminus_t *t, bool *fallback);

/* Whether t's first capability (a bare symbol, or the first element of an array or list)
 * is the symbol cap: how qdrouterd tells its own links apart (inter-router control and data
 * links, an edge's downlink, qd.fallback).  t may be NULL (false). */
bool rtr_termcaps_first_is(pn_terminus_t *t, const char *cap);

/* Give t the capability qd.fallback (fallback), else qd.waypoint.N for waypoint N in 1-9,
 * else leave it as it is. */
void rtr_termcaps_write(pn_terminus_t *t, uint8_t waypoint, bool fallback);

#endif
