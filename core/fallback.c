/* core/fallback.c: fallback destinations, as qdrouterd 1.19 has them (an address's
 * `enableFallback`, an autoLink's `fallback`).
 *
 * Thread suffixes: _CT = core thread (every function here).
 *
 * DESIGN: a mobile address X configured with enableFallback (never a waypoint, never
 * phased: config.c refuses both) has a second address, its fallback destination, at key
 * "MF" X beside its own "M0" X.  An out autoLink with `fallback` consumes from the fallback
 * destination (core_autolink_phase_CT gives its link CORE_PHASE_FALLBACK), so a broker queue
 * takes what X's producers send while X has no consumer of its own; an in autoLink with
 * `fallback` sends into X itself (phase 0) and is marked, so that what it brings back from
 * the broker goes to X's consumers only, never back to the fallback destination.  Nothing is
 * linked ahead: core.c asks here, when it routes a delivery that found no consumer and when a
 * consumer of either address comes or goes (credit for X's producers), which address pairs
 * with which: two table lookups, on those events only.
 */
#include "core/core_int.h"

#include "core/base/pattern.h"

#include <string.h>

/* Whether X (the key without its class and phase) is configured with enableFallback. */
static bool configured_CT(core_t *core, const char *x, size_t n)
{
    const cfg_address_t *ac = base_pattern_match(core->patterns, x, n);
    return ac && ac->fallback;
}

/* The address at key `cls phase` + the rest of `key`, if it exists. */
static core_addr_t *sibling_CT(core_t *core, const core_addr_t *addr, char phase)
{
    char stack[512];
    char *buf = addr->keylen <= sizeof(stack) ? stack : base_malloc(addr->keylen);
    memcpy(buf, addr->key, addr->keylen);
    buf[1] = phase;
    core_addr_t *other = base_map_get(&core->addrs, buf, addr->keylen);
    if (buf != stack)
        free(buf);
    return other;
}

bool core_fallback_configured_CT(core_t *core, const core_addr_t *addr)
{
    return addr->keylen >= 3 && addr->key[0] == 'M' &&
           configured_CT(core, addr->key + 2, addr->keylen - 2);
}

core_addr_t *core_fallback_of_CT(core_t *core, const core_addr_t *addr)
{
    if (!addr || addr->keylen < 3 || addr->key[0] != 'M' || addr->key[1] != '0' ||
        !configured_CT(core, addr->key + 2, addr->keylen - 2))
        return NULL;
    return sibling_CT(core, addr, 'F');
}

core_addr_t *core_fallback_primary_CT(core_t *core, const core_addr_t *fb)
{
    if (!fb || fb->keylen < 3 || fb->key[0] != 'M' || fb->key[1] != 'F' ||
        !configured_CT(core, fb->key + 2, fb->keylen - 2))
        return NULL;
    return sibling_CT(core, fb, '0');
}
