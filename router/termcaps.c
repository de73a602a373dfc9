/* router/termcaps.c: qd.waypoint[.N] and qd.fallback on a terminus (see termcaps.h).
 *
 * Thread suffixes: none; each function touches only the terminus it is given (the caller's
 * connection's worker owns it).
 */
#include "router/termcaps.h"

#include <proton/codec.h>
#include <stdio.h>
#include <string.h>

#define CAP_WAYPOINT "qd.waypoint"
#define CAP_FALLBACK "qd.fallback"

/* The ordinal of one capability (the symbol under d's cursor), 0 when it is no waypoint's. */
static uint8_t ordinal(pn_data_t *d)
{
    if (pn_data_type(d) != PN_SYMBOL)
        return 0;
    pn_bytes_t s = pn_data_get_symbol(d);
    size_t     n = sizeof(CAP_WAYPOINT) - 1;
    if (s.size < n || memcmp(s.start, CAP_WAYPOINT, n) != 0)
        return 0;
    if (s.size == n)
        return 1;
    if (s.size == n + 2 && s.start[n] == '.' && s.start[n + 1] > '0' && s.start[n + 1] <= '9')
        return (uint8_t)(s.start[n + 1] - '0');
    return 0;
}

bool rtr_termcaps_first_is(pn_terminus_t *t, const char *cap)
{
    pn_data_t *d = t ? pn_terminus_capabilities(t) : NULL;
    if (!d)
        return false;
    pn_data_rewind(d);
    if (!pn_data_next(d))
        return false;
    pn_bytes_t s = {0, NULL};
    if (pn_data_type(d) == PN_SYMBOL) {
        s = pn_data_get_symbol(d);
    } else if (pn_data_type(d) == PN_ARRAY || pn_data_type(d) == PN_LIST) {
        pn_data_enter(d);
        if (pn_data_next(d) && pn_data_type(d) == PN_SYMBOL)
            s = pn_data_get_symbol(d);
        pn_data_exit(d);
    }
    pn_data_rewind(d);
    return s.size == strlen(cap) && memcmp(s.start, cap, s.size) == 0;
}

uint8_t rtr_termcaps_read(pn_terminus_t *t, bool *fallback)
{
    *fallback = rtr_termcaps_first_is(t, CAP_FALLBACK);
    pn_data_t *d = t ? pn_terminus_capabilities(t) : NULL;
    if (!d)
        return 0;
    pn_data_rewind(d);
    if (!pn_data_next(d))
        return 0;
    uint8_t n = 0;
    if (pn_data_type(d) == PN_SYMBOL) {
        n = ordinal(d);
    } else if (pn_data_type(d) == PN_ARRAY || pn_data_type(d) == PN_LIST) {
        pn_data_enter(d);
        while (pn_data_next(d) && !n)
            n = ordinal(d);
        pn_data_exit(d);
    }
    pn_data_rewind(d);
    return n;
}

void rtr_termcaps_write(pn_terminus_t *t, uint8_t waypoint, bool fallback)
{
    char cap[sizeof(CAP_WAYPOINT) + 2];
    if (fallback)
        snprintf(cap, sizeof(cap), "%s", CAP_FALLBACK);
    else if (waypoint >= 1 && waypoint <= 9)
        snprintf(cap, sizeof(cap), "%s.%c", CAP_WAYPOINT, '0' + waypoint);
    else
        return;
    pn_data_t *d = pn_terminus_capabilities(t);
    pn_data_clear(d);
    pn_data_put_symbol(d, pn_bytes(strlen(cap), cap));
}
