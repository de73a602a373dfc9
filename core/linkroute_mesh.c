/* core/linkroute_mesh.c: link routes across an interior mesh (see linkroute_mesh.h for
 * qdrouterd 1.19's rules).
 *
 * Thread suffixes: _CT = core thread only; core_lrm_key() is pure; core_lrm_free() runs on
 * the main thread once the core thread is gone.
 *
 * DESIGN: two small tables.  `adv` holds the keys of the local routes a connection serves,
 * as last told to the mobile-address table; the tick recomputes them from the link-route
 * table (routes are configuration: a handful) and tells the difference, so connections
 * opening and closing and management CREATE/DELETE all reach the mesh the same way, in the
 * tick's MAU batch.  `remote[dir]` maps each link-route pattern other routers advertise to
 * its key; a key joins it when its address gets its first remote router, and leaves it when
 * an attach finds the key's address gone or without routers (the address itself is the
 * forwarder's, interior.c: its router bits are the truth).
 */
#include "core/linkroute_mesh.h"

#include "core/base/base.h"
#include "core/base/log.h"
#include "core/base/map.h"
#include "core/base/pattern.h"
#include "core/core_int.h"
#include "core/interior.h"
#include "core/linkroute.h"
#include "core/rt.h"

#include <stdio.h>
#include <string.h>

#define LOG(lvl, ...) base_log(BASE_LOG_MOD_ROUTER_CORE, BASE_LOG_##lvl, __VA_ARGS__)

/* qdrouterd's treatment hint for a link route's key (QD_TREATMENT_LINK_BALANCED). */
#define LRM_HINT_LINK_BALANCED 4

struct core_lrm {
    base_map_t      adv;       /* keys this router advertises now -> (void *)1 */
    base_pattern_t *remote[2]; /* by direction (CORE_LINK_IN: `C`/`E` keys): pattern -> key
                                  (`known`'s) */
    base_map_t      known;     /* every key in `remote` -> its heap copy (the value there) */
    uint32_t        turn;      /* rotates the choice among the routers that have a key */
};

static bool is_sep(char c)
{
    return c == '.' || c == '/';
}

char *core_lrm_key(const char *prefix, const char *pattern, core_link_dir_t dir)
{
    const char *text = prefix ? prefix : pattern;
    if (!text)
        return NULL;
    /* qdrouterd's pattern: separators off both ends, a prefix gets `/#` */
    size_t b = 0, e = strlen(text);
    while (b < e && is_sep(text[b]))
        b++;
    while (e > b && is_sep(text[e - 1]))
        e--;
    if (b == e)
        return NULL;
    size_t n = e - b;
    char  *pat = base_malloc(n + 3);
    memcpy(pat, text + b, n);
    if (prefix) {
        memcpy(pat + n, "/#", 2);
        n += 2;
    }
    pat[n] = '\0';
    bool  in = dir == CORE_LINK_IN;
    char *key = base_malloc(n + 2);
    if (!strchr(pat, '*') && strchr(pat, '#') == &pat[n - 1]) {
        /* a prefix: advertised as `C`/`D` with the `#` and the separators before it off */
        size_t m = n - 1;
        while (m > 0 && is_sep(pat[m - 1]))
            m--;
        key[0] = in ? 'C' : 'D';
        memcpy(key + 1, pat, m);
        key[m + 1] = '\0';
    } else {
        key[0] = in ? 'E' : 'F';
        memcpy(key + 1, pat, n + 1);
    }
    free(pat);
    return key;
}

static struct core_lrm *lrm_get_CT(core_t *core)
{
    if (!core->lrm) {
        core->lrm = base_calloc(1, sizeof(*core->lrm));
        base_map_init(&core->lrm->adv);
        base_map_init(&core->lrm->known);
        core->lrm->remote[CORE_LINK_IN] = base_pattern_new();
        core->lrm->remote[CORE_LINK_OUT] = base_pattern_new();
    }
    return core->lrm;
}

void core_lrm_tick_CT(core_t *core)
{
    BASE_ASSERT_THREAD(CORE);
    struct core_lrm *m = lrm_get_CT(core);
    base_map_t       want;
    base_map_init(&want);
    core_lr_info_t info;
    for (size_t i = 0; core_lr_info(core->lr, i, &info); i++) {
        if (!info.active)
            continue;
        char *key = core_lrm_key(info.prefix, info.pattern, info.dir);
        if (key) {
            base_map_put(&want, key, strlen(key), (void *)1);
            free(key);
        }
    }
    base_map_slot_t *s;
    for (size_t i = 0; (i = base_map_next(&m->adv, i, &s)) != 0;) {
        if (!base_map_get(&want, s->key, s->klen)) {
            core_rt_local_key_CT(core, s->key, s->klen, LRM_HINT_LINK_BALANCED, false);
            LOG(INFO, "Link route address %.*s withdrawn from the mesh", (int)s->klen, s->key);
        }
    }
    for (size_t i = 0; (i = base_map_next(&want, i, &s)) != 0;) {
        if (!base_map_get(&m->adv, s->key, s->klen)) {
            core_rt_local_key_CT(core, s->key, s->klen, LRM_HINT_LINK_BALANCED, true);
            LOG(INFO, "Link route address %.*s advertised to the mesh", (int)s->klen, s->key);
        }
    }
    base_map_fini(&m->adv);
    m->adv = want;
}

/* The pattern table and the pattern of a link-route key, or false when it is not one. */
static bool key_pattern(struct core_lrm *m, const char *key, size_t keylen,
                        base_pattern_t **t, char **pattern, bool *is_prefix)
{
    if (keylen < 2 || !strchr("CDEF", key[0]))
        return false;
    *t = m->remote[key[0] == 'C' || key[0] == 'E' ? CORE_LINK_IN : CORE_LINK_OUT];
    *is_prefix = key[0] == 'C' || key[0] == 'D';
    *pattern = base_malloc(keylen);
    memcpy(*pattern, key + 1, keylen - 1);
    (*pattern)[keylen - 1] = '\0';
    return true;
}

void core_lrm_remote_key_CT(core_t *core, const char *key, size_t keylen)
{
    BASE_ASSERT_THREAD(CORE);
    if (keylen < 2 || !strchr("CDEF", key[0]))
        return;
    struct core_lrm *m = lrm_get_CT(core);
    base_pattern_t  *t;
    char            *pattern;
    bool             is_prefix;
    if (!key_pattern(m, key, keylen, &t, &pattern, &is_prefix))
        return;
    char *copy = base_malloc(keylen + 1);
    memcpy(copy, key, keylen);
    copy[keylen] = '\0';
    int rc = is_prefix ? base_pattern_add_prefix(t, pattern, copy) : base_pattern_add(t, pattern, copy);
    if (rc != 0) {
        free(copy); /* there already (-EEXIST), or not a pattern at all */
    } else {
        base_map_put(&m->known, copy, keylen, copy);
        LOG(DEBUG, "Link route address %s learned from the mesh", copy);
    }
    free(pattern);
}

/* Forget the pattern of `key` (its address is gone or has no router any more). */
static void remote_forget_CT(struct core_lrm *m, const char *key)
{
    base_pattern_t *t;
    char           *pattern;
    bool            is_prefix;
    if (!key_pattern(m, key, strlen(key), &t, &pattern, &is_prefix))
        return;
    char *full = pattern;
    if (is_prefix) {
        size_t n = strlen(pattern);
        full = base_malloc(n + 3);
        snprintf(full, n + 3, "%s/#", pattern);
        free(pattern);
    }
    char *copy = base_pattern_remove(t, full);
    if (copy) {
        base_map_del(&m->known, copy, strlen(copy));
        free(copy);
    }
    free(full);
}

bool core_lrm_route_CT(core_t *core, const core_action_t *a, core_lr_target_t *out)
{
    BASE_ASSERT_THREAD(CORE);
    const char *address = a->u.attach.address;
    if (!core->ir || !address || a->u.attach.dir > CORE_LINK_OUT)
        return false;
    struct core_lrm *m = lrm_get_CT(core);
    base_pattern_t  *t = m->remote[a->u.attach.dir];
    size_t           len = strlen(address);
    for (;;) {
        const char *key = base_pattern_match(t, address, len);
        if (!key)
            return false;
        core_addr_t *addr = core__addr_get_CT(core, key, strlen(key), false, -1);
        if (!addr || !core_addr_remote(addr)) {
            remote_forget_CT(m, key); /* frees key */
            continue;
        }
        /* linkBalanced over the routers that have it, from where the last attach stopped */
        uint32_t start = m->turn++;
        for (uint32_t i = 0; i < CORE_RT_MAX_NODES; i++) {
            uint32_t b = (start + i) % CORE_RT_MAX_NODES;
            if (b == 0 || !((addr->rnodes[b / 64] >> (b % 64)) & 1))
                continue;
            uint64_t conn_id;
            int      worker;
            if (!core_ir_router_hop_CT(core, b, a->u.attach.conn_id, &conn_id, &worker))
                continue;
            memset(out, 0, sizeof(*out));
            out->conn_id = conn_id;
            out->worker = worker;
            out->address = base_strdup(address);
            out->mesh = true;
            LOG(DEBUG, "[C%llu][L%llu] Link route %s: attach forwarded toward router bit %u",
                (unsigned long long)a->u.attach.conn_id, (unsigned long long)a->link_id, key, b);
            return true;
        }
        return false; /* routers have it, none is reached now (or only back where it came) */
    }
}

void core_lrm_free(core_t *core)
{
    struct core_lrm *m = core->lrm;
    if (!m)
        return;
    base_map_fini(&m->adv);
    base_map_slot_t *s;
    for (size_t i = 0; (i = base_map_next(&m->known, i, &s)) != 0;)
        free(s->value);
    base_map_fini(&m->known);
    base_pattern_free(m->remote[CORE_LINK_IN]);
    base_pattern_free(m->remote[CORE_LINK_OUT]);
    BASE_FREE(core->lrm);
}
