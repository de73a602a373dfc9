/* config/vhost.c: a `vhost` entity (qdrouterd's policy ruleset) from its JSON attributes,
 * checked as qdrouterd 1.19's policy compiler (policy_local.py: PolicyCompiler) checks it, with
 * its defaults.  The same reader serves a configuration file's vhosts, a policyDir's files and
 * management's CREATE/UPDATE, so all three accept and refuse the same things.
 *
 * What qdrouterd's compiler does and this does too: limits 0-65535 (maxConnections and the
 * per-user/per-host ones), other numbers >= 0; booleans (a group's options only true/false,
 * also as strings in any case; allowUnknownUser also yes/no, on/off, 1/0, as the schema's);
 * `users`, `aliases`, `sources`, `targets`, `sourcePattern`, `targetPattern` and `remoteHosts`
 * as a comma-separated string or a list; `${user}` at most once per item, only as a prefix or
 * suffix in a pattern; `sources` with `sourcePattern` (or the targets) refused; a user in two
 * groups refused; an alias equal to the hostname or to another alias refused; `allowUnknownUser`
 * without a `$default` group refused; remoteHosts items `*`, an address, a host name that resolves,
 * or a range `lo-hi` of one family with lo first.  Group options qdrouterd does not know are
 * ignored (it warns).
 *
 * Threads: any (no shared state; host names are resolved with getaddrinfo()).
 */
#include "config/config.h"
#include "config/config_int.h"
#include "core/base/base.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define VH_USER_TOKEN "${user}"

typedef struct vh_err {
    char  *buf;
    size_t len;
    bool   policy; /* the failure is one qdrouterd's policy compiler reports, not its schema */
} vh_err_t;

__attribute__((format(printf, 2, 3))) static int vh_fail(vh_err_t *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (e->buf && e->len)
        vsnprintf(e->buf, e->len, fmt, ap);
    va_end(ap);
    return -1;
}

/* How a value reads in a message (short). */
static const char *vh_show(const cJSON *v, char *buf, size_t n)
{
    if (cJSON_IsString(v))
        snprintf(buf, n, "\"%.40s%s\"", v->valuestring, strlen(v->valuestring) > 40 ? "..." : "");
    else if (cJSON_IsNumber(v))
        snprintf(buf, n, "%.17g", v->valuedouble);
    else if (cJSON_IsBool(v))
        snprintf(buf, n, "%s", cJSON_IsTrue(v) ? "true" : "false");
    else if (cJSON_IsArray(v))
        snprintf(buf, n, "a list");
    else if (cJSON_IsObject(v))
        snprintf(buf, n, "a map");
    else
        snprintf(buf, n, "null");
    return buf;
}

/* An integer from a JSON number or a string of digits (qdrouterd's int()). */
static bool vh_int(const cJSON *v, long long *out)
{
    if (cJSON_IsNumber(v)) {
        if (v->valuedouble != floor(v->valuedouble) || fabs(v->valuedouble) > 9.2e18)
            return false;
        *out = (long long)v->valuedouble;
        return true;
    }
    if (cJSON_IsString(v) && v->valuestring) {
        const char *s = v->valuestring;
        while (*s == ' ')
            s++;
        char *end = NULL;
        if (!*s)
            return false;
        long long x = strtoll(s, &end, 10);
        while (end && *end == ' ')
            end++;
        if (!end || *end)
            return false;
        *out = x;
        return true;
    }
    return false;
}

static int vh_number(vh_err_t *e, const char *where, const cJSON *v, long long lo, long long hi,
                     long long *out)
{
    char shown[64];
    if (!vh_int(v, out)) {
        return vh_fail(e, "%s: expected an integer, got %s", where,
                       vh_show(v, shown, sizeof(shown)));
    }
    if (*out < lo || *out > hi) {
        e->policy = true; /* a number is the schema's; its range, the compiler's */
        if (hi == LLONG_MAX)
            return vh_fail(e, "%s: expected an integer >= %lld, got %lld", where, lo, *out);
        return vh_fail(e, "%s: expected an integer from %lld to %lld, got %lld", where, lo, hi,
                       *out);
    }
    return 0;
}

/* A boolean as config.c reads one (cfg__bool_value): `accept` is CFG_BOOL_SCHEMA for a vhost
 * attribute (qdrouterd checks those against its schema) and 0 for a group's options, where
 * qdrouterd's policy compiler takes only true/false, or "true"/"false" in any case. */
static int vh_bool(vh_err_t *e, const char *where, const cJSON *v, unsigned accept, bool *out)
{
    char shown[64];

    if (cfg__bool_value(v, accept, out))
        return 0;
    return vh_fail(e, "%s: expected a boolean (%s), got %s", where,
                   accept & CFG_BOOL_WORDS ? "true/false, yes/no, on/off" : "true/false",
                   vh_show(v, shown, sizeof(shown)));
}

/* Trim qdrouterd's way (strip(' ')): blanks at both ends. */
static char *vh_trim_dup(const char *s, size_t n)
{
    while (n && *s == ' ')
        s++, n--;
    while (n && s[n - 1] == ' ')
        n--;
    char *out = base_malloc(n + 1);
    memcpy(out, s, n);
    out[n] = '\0';
    return out;
}

static void vh_strv_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* A comma-separated string or a list of strings -> items (trimmed; duplicates dropped when
 * dedupe, as qdrouterd's set()). */
static int vh_list(vh_err_t *e, const char *where, const cJSON *v, bool dedupe, char ***out,
                   size_t *n_out)
{
    char   shown[64];
    char **items = NULL;
    size_t n = 0;

    *out = NULL;
    *n_out = 0;
    if (cJSON_IsString(v) && v->valuestring) {
        const char *p = v->valuestring;
        for (;;) {
            const char *comma = strchr(p, ',');
            size_t      len = comma ? (size_t)(comma - p) : strlen(p);
            items = base_realloc(items, (n + 1) * sizeof(char *));
            items[n++] = vh_trim_dup(p, len);
            if (!comma)
                break;
            p = comma + 1;
        }
    } else if (cJSON_IsArray(v)) {
        const cJSON *c;
        cJSON_ArrayForEach(c, v)
        {
            if (!cJSON_IsString(c) || !c->valuestring) {
                vh_strv_free(items, n);
                return vh_fail(e, "%s: expected a list of strings, got an item %s", where,
                               vh_show(c, shown, sizeof(shown)));
            }
            items = base_realloc(items, (n + 1) * sizeof(char *));
            items[n++] = base_strdup(c->valuestring);
        }
    } else {
        return vh_fail(e, "%s: expected a string or a list, got %s", where,
                       vh_show(v, shown, sizeof(shown)));
    }
    if (dedupe) {
        size_t o = 0;
        for (size_t i = 0; i < n; i++) {
            bool dup = false;
            for (size_t j = 0; j < o && !dup; j++)
                dup = strcmp(items[j], items[i]) == 0;
            if (dup)
                free(items[i]);
            else
                items[o++] = items[i];
        }
        n = o;
    }
    *out = items;
    *n_out = n;
    return 0;
}

static void vh_names_fini(cfg_vnames_t *v)
{
    for (size_t i = 0; i < v->n; i++) {
        free(v->items[i].s1);
        free(v->items[i].s2);
    }
    free(v->items);
    *v = (cfg_vnames_t){0};
}

/* sources/targets/sourcePattern/targetPattern: each item's ${user} (policy_local.py). */
static int vh_names(vh_err_t *e, const char *where, const cJSON *v, bool pattern, cfg_vnames_t *out)
{
    char **items;
    size_t n;
    size_t tl = strlen(VH_USER_TOKEN);

    if (vh_list(e, where, v, true, &items, &n) < 0)
        return -1;
    out->given = true;
    out->items = base_calloc(n ? n : 1, sizeof(cfg_vname_t));
    for (size_t i = 0; i < n; i++) {
        const char  *s = items[i];
        const char  *t = strstr(s, VH_USER_TOKEN);
        cfg_vname_t *x = &out->items[out->n];
        if (!*s)
            continue; /* "" names nothing (qdrouterd's rule never matches a blank name) */
        if (t && strstr(t + tl, VH_USER_TOKEN)) {
            vh_fail(e, "%s: item '%s' contains more than one %s", where, s, VH_USER_TOKEN);
            goto bad;
        }
        if (!t) {
            bool wild = strcmp(s, "*") == 0;
            *x = (cfg_vname_t){wild ? CFG_VNAME_WILDCARD : CFG_VNAME_ABSENT,
                               base_strdup(wild ? "" : s), base_strdup("")};
        } else if (t == s) {
            *x = (cfg_vname_t){CFG_VNAME_PREFIX, base_strdup(""), base_strdup(t + tl)};
        } else if (!t[tl]) {
            *x = (cfg_vname_t){CFG_VNAME_SUFFIX, vh_trim_dup(s, (size_t)(t - s)), base_strdup("")};
        } else if (pattern) {
            vh_fail(e, "%s: item '%s' may have %s only as a prefix or a suffix", where, s,
                    VH_USER_TOKEN);
            goto bad;
        } else {
            char *s1 = base_malloc((size_t)(t - s) + 1);
            memcpy(s1, s, (size_t)(t - s));
            s1[t - s] = '\0';
            *x = (cfg_vname_t){CFG_VNAME_EMBED, s1, base_strdup(t + tl)};
        }
        out->n++;
    }
    vh_strv_free(items, n);
    return 0;
bad:
    vh_strv_free(items, n);
    vh_names_fini(out);
    return -1;
}

/* One address or host name -> family and bytes. */
static int vh_addr(const char *s, int *family, unsigned char *bytes)
{
    memset(bytes, 0, 16);
    if (inet_pton(AF_INET, s, bytes) == 1) {
        *family = AF_INET;
        return 0;
    }
    if (inet_pton(AF_INET6, s, bytes) == 1) {
        *family = AF_INET6;
        return 0;
    }
    struct addrinfo  hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    if (!*s || getaddrinfo(s, NULL, &hints, &res) != 0 || !res)
        return -1;
    int rc = -1;
    for (struct addrinfo *a = res; a && rc < 0; a = a->ai_next) {
        if (a->ai_family == AF_INET) {
            memcpy(bytes, &((struct sockaddr_in *)a->ai_addr)->sin_addr, 4);
            *family = AF_INET;
            rc = 0;
        } else if (a->ai_family == AF_INET6) {
            memcpy(bytes, &((struct sockaddr_in6 *)a->ai_addr)->sin6_addr, 16);
            *family = AF_INET6;
            rc = 0;
        }
    }
    freeaddrinfo(res);
    return rc;
}

static int vh_hosts(vh_err_t *e, const char *where, const cJSON *v, cfg_vhost_group_t *g)
{
    char **items;
    size_t n;

    if (vh_list(e, where, v, false, &items, &n) < 0)
        return -1;
    g->hosts = base_calloc(n ? n : 1, sizeof(cfg_vhost_range_t));
    for (size_t i = 0; i < n; i++) {
        cfg_vhost_range_t *r = &g->hosts[g->n_hosts];
        const char        *s = items[i];
        if (strcmp(s, "*") == 0) {
            r->wildcard = true;
            g->n_hosts++;
            continue;
        }
        const char *dash = strchr(s, '-');
        char       *a = vh_trim_dup(s, dash ? (size_t)(dash - s) : strlen(s));
        char       *b = dash ? vh_trim_dup(dash + 1, strlen(dash + 1)) : NULL;
        int         fa = 0, fb = 0;
        int         rc = 0;
        if (b && strchr(b, '-'))
            rc = vh_fail(e, "%s: '%s': at most two hosts in a range", where, s);
        else if (vh_addr(a, &fa, r->lo) < 0)
            rc = vh_fail(e, "%s: '%s': '%s' is not an IP address or a host name that resolves",
                         where, s, a);
        else if (b && vh_addr(b, &fb, r->hi) < 0)
            rc = vh_fail(e, "%s: '%s': '%s' is not an IP address or a host name that resolves",
                         where, s, b);
        else if (b && fa != fb)
            rc = vh_fail(e, "%s: '%s': a range may not mix IPv4 and IPv6", where, s);
        else if (b && memcmp(r->lo, r->hi, fa == AF_INET ? 4 : 16) > 0)
            rc = vh_fail(e, "%s: '%s': the lower address must come first", where, s);
        free(a);
        free(b);
        if (rc < 0) {
            vh_strv_free(items, n);
            return -1;
        }
        r->family = fa;
        if (!dash)
            memcpy(r->hi, r->lo, 16);
        g->n_hosts++;
    }
    vh_strv_free(items, n);
    return 0;
}

static void vh_group_fini(cfg_vhost_group_t *g)
{
    free(g->name);
    vh_strv_free(g->users, g->n_users);
    free(g->hosts);
    vh_names_fini(&g->sources);
    vh_names_fini(&g->targets);
    vh_names_fini(&g->source_pattern);
    vh_names_fini(&g->target_pattern);
    *g = (cfg_vhost_group_t){0};
}

static int vh_group(vh_err_t *e, const char *gname, const cJSON *m, cfg_vhost_group_t *g)
{
    char where[256];
    char shown[64];

    *g = (cfg_vhost_group_t){
        .name = base_strdup(gname),
        .max_conn_per_user = -1,
        .max_conn_per_host = -1,
        .max_message_size = -1,
        .max_senders = 2147483647,
        .max_receivers = 2147483647,
        .allow_waypoint_links = true,
        .allow_dynamic_link_routes = true,
        .allow_admin_status_update = true,
        .allow_fallback_links = true,
    };
    e->policy = true; /* the schema sees `groups` as a map; what is in it, the compiler */
    if (!cJSON_IsObject(m))
        return vh_fail(e, "attribute 'groups': group '%s': expected a map, got %s", gname,
                       vh_show(m, shown, sizeof(shown)));
    const cJSON *c;
    cJSON_ArrayForEach(c, m)
    {
        const char *k = c->string ? c->string : "";
        long long   x;
        bool        b;
        snprintf(where, sizeof(where), "attribute 'groups': group '%s': option '%s'", gname, k);
        if (cJSON_IsNull(c))
            continue;
#define NUM(key, lo, hi, field)                                                                    \
    if (strcmp(k, key) == 0) {                                                                     \
        if (vh_number(e, where, c, lo, hi, &x) < 0)                                                \
            return -1;                                                                             \
        g->field = (__typeof__(g->field))x;                                                        \
        continue;                                                                                  \
    }
#define BOOL(key, field)                                                                           \
    if (strcmp(k, key) == 0) {                                                                     \
        if (vh_bool(e, where, c, 0, &b) < 0)                                                       \
            return -1;                                                                             \
        g->field = b;                                                                              \
        continue;                                                                                  \
    }
#define NAMES(key, pattern, field)                                                                 \
    if (strcmp(k, key) == 0) {                                                                     \
        if (vh_names(e, where, c, pattern, &g->field) < 0)                                         \
            return -1;                                                                             \
        continue;                                                                                  \
    }
        NUM("maxConnectionsPerUser", 0, 65535, max_conn_per_user)
        NUM("maxConnectionsPerHost", 0, 65535, max_conn_per_host)
        NUM("maxMessageSize", 0, LLONG_MAX, max_message_size)
        NUM("maxFrameSize", 0, UINT32_MAX, max_frame_size)
        NUM("maxSessionWindow", 0, UINT32_MAX, max_session_window)
        NUM("maxSessions", 0, UINT32_MAX, max_sessions)
        NUM("maxSenders", 0, UINT32_MAX, max_senders)
        NUM("maxReceivers", 0, UINT32_MAX, max_receivers)
        BOOL("allowDynamicSource", allow_dynamic_source)
        BOOL("allowAnonymousSender", allow_anonymous_sender)
        BOOL("allowUserIdProxy", allow_user_id_proxy)
        BOOL("allowWaypointLinks", allow_waypoint_links)
        BOOL("allowDynamicLinkRoutes", allow_dynamic_link_routes)
        BOOL("allowAdminStatusUpdate", allow_admin_status_update)
        BOOL("allowFallbackLinks", allow_fallback_links)
        NAMES("sources", false, sources)
        NAMES("targets", false, targets)
        NAMES("sourcePattern", true, source_pattern)
        NAMES("targetPattern", true, target_pattern)
#undef NUM
#undef BOOL
#undef NAMES
        if (strcmp(k, "users") == 0) {
            vh_strv_free(g->users, g->n_users);
            if (vh_list(e, where, c, true, &g->users, &g->n_users) < 0)
                return -1;
            continue;
        }
        if (strcmp(k, "remoteHosts") == 0) {
            free(g->hosts);
            g->hosts = NULL;
            g->n_hosts = 0;
            if (vh_hosts(e, where, c, g) < 0)
                return -1;
            continue;
        }
        /* anything else: qdrouterd warns that it is ignored, and goes on */
    }
    if (g->sources.given && g->source_pattern.given)
        return vh_fail(e,
                       "attribute 'groups': group '%s': 'sources' and 'sourcePattern' conflict: "
                       "give one or the other",
                       gname);
    if (g->targets.given && g->target_pattern.given)
        return vh_fail(e,
                       "attribute 'groups': group '%s': 'targets' and 'targetPattern' conflict: "
                       "give one or the other",
                       gname);
    return 0;
}

const cfg_vhost_group_t *cfg_vhost_group_find(const cfg_vhost_t *v, const char *name)
{
    for (size_t i = 0; i < v->n_groups; i++)
        if (strcmp(v->groups[i].name, name) == 0)
            return &v->groups[i];
    return NULL;
}

void cfg_vhost_fini(cfg_vhost_t *v)
{
    if (!v)
        return;
    free(v->name);
    free(v->hostname);
    vh_strv_free(v->aliases, v->n_aliases);
    for (size_t i = 0; i < v->n_groups; i++)
        vh_group_fini(&v->groups[i]);
    free(v->groups);
    free(v->attrs_json);
    *v = (cfg_vhost_t){0};
}

static int vh_parse(vh_err_t *e, const cJSON *attrs, cfg_vhost_t *v)
{
    static const char *const known[] = {
        "name",
        "identity",
        "type",
        "hostname",
        "id",
        "aliases",
        "maxConnections",
        "maxMessageSize",
        "maxConnectionsPerUser",
        "maxConnectionsPerHost",
        "allowUnknownUser",
        "groups",
    };
    char         shown[64];
    const cJSON *groups = NULL;
    const cJSON *c;
    char        *deferred = NULL; /* the first policy compiler's failure, as its message */

    if (!cJSON_IsObject(attrs))
        return vh_fail(e, "expected the attributes as a map, got %s",
                       vh_show(attrs, shown, sizeof(shown)));
    cJSON_ArrayForEach(c, attrs)
    {
        char     *k = cfg__camelcase(c->string ? c->string : "");
        char      where[160];
        size_t    i = 0;
        long long x;
        int       rc = 0;
        while (i < BASE_ARRAY_LEN(known) && strcmp(known[i], k) != 0)
            i++;
        snprintf(where, sizeof(where), "attribute '%s'", k);
        if (i == BASE_ARRAY_LEN(known)) {
            rc = vh_fail(e, "attribute '%.80s': unknown attribute", c->string ? c->string : "");
        } else if (cJSON_IsNull(c)) {
            /* absent */
        } else if (strcmp(k, "hostname") == 0 || strcmp(k, "id") == 0) {
            if (v->hostname)
                rc = vh_fail(e, "attribute 'hostname': given twice (as 'hostname' and 'id')");
            else if (cJSON_IsString(c))
                v->hostname = base_strdup(c->valuestring);
            else
                rc = vh_fail(e, "%s: expected a string, got %s", where,
                             vh_show(c, shown, sizeof(shown)));
        } else if (strcmp(k, "name") == 0) {
            if (cJSON_IsString(c))
                v->name = base_strdup(c->valuestring);
            else
                rc = vh_fail(e, "%s: expected a string, got %s", where,
                             vh_show(c, shown, sizeof(shown)));
        } else if (strcmp(k, "aliases") == 0) {
            rc = vh_list(e, where, c, false, &v->aliases, &v->n_aliases);
        } else if (strcmp(k, "maxConnections") == 0) {
            if ((rc = vh_number(e, where, c, 0, 65535, &x)) == 0)
                v->max_connections = (uint32_t)x;
        } else if (strcmp(k, "maxConnectionsPerUser") == 0) {
            if ((rc = vh_number(e, where, c, 0, 65535, &x)) == 0)
                v->max_conn_per_user = (uint32_t)x;
        } else if (strcmp(k, "maxConnectionsPerHost") == 0) {
            if ((rc = vh_number(e, where, c, 0, 65535, &x)) == 0)
                v->max_conn_per_host = (uint32_t)x;
        } else if (strcmp(k, "maxMessageSize") == 0) {
            if ((rc = vh_number(e, where, c, 0, LLONG_MAX, &x)) == 0)
                v->max_message_size = x;
        } else if (strcmp(k, "allowUnknownUser") == 0) {
            rc = vh_bool(e, where, c, CFG_BOOL_SCHEMA, &v->allow_unknown_user);
        } else if (strcmp(k, "groups") == 0) {
            if (!cJSON_IsObject(c))
                rc = vh_fail(e, "%s: expected a map, got %s", where,
                             vh_show(c, shown, sizeof(shown)));
            groups = c;
        }
        free(k);
        if (rc < 0 && !e->policy)
            goto out_free_deferred; /* the schema's: it comes first */
        if (rc < 0 && !deferred) {
            /* a number out of range is the compiler's, which runs after the schema has seen
               every attribute: kept while the others are read */
            deferred = base_strdup(e->buf && e->len ? e->buf : "");
        }
        e->policy = false;
    }
    if (!v->hostname) {
        vh_fail(e, "attribute 'hostname': required");
        goto out_free_deferred;
    }
    e->policy = true; /* the rest is checked by qdrouterd's policy compiler */
    if (deferred) {
        if (e->buf && e->len)
            snprintf(e->buf, e->len, "%s", deferred);
        free(deferred);
        return -1;
    }
    for (size_t i = 0; i < v->n_aliases; i++) {
        if (strcmp(v->aliases[i], v->hostname) == 0)
            return vh_fail(e, "attribute 'aliases': '%s' is the vhost's hostname", v->aliases[i]);
        for (size_t j = 0; j < i; j++)
            if (strcmp(v->aliases[i], v->aliases[j]) == 0)
                return vh_fail(e, "attribute 'aliases': '%s' given twice", v->aliases[i]);
    }
    if (groups) {
        size_t n = (size_t)cJSON_GetArraySize(groups);
        v->groups = base_calloc(n ? n : 1, sizeof(cfg_vhost_group_t));
        cJSON_ArrayForEach(c, groups)
        {
            const char *gname = c->string ? c->string : "";
            if (cfg_vhost_group_find(v, gname))
                return vh_fail(e, "attribute 'groups': group '%s' given twice", gname);
            int rc = vh_group(e, gname, c, &v->groups[v->n_groups]);
            v->n_groups++;
            if (rc < 0)
                return -1;
        }
    }
    /* each user in one group only */
    for (size_t gi = 0; gi < v->n_groups; gi++)
        for (size_t ui = 0; ui < v->groups[gi].n_users; ui++)
            for (size_t gj = 0; gj <= gi; gj++)
                for (size_t uj = 0; uj < v->groups[gj].n_users && (gj < gi || uj < ui); uj++)
                    if (strcmp(v->groups[gi].users[ui], v->groups[gj].users[uj]) == 0)
                        return vh_fail(e,
                                       "attribute 'groups': user '%s' is in two groups, '%s' "
                                       "and '%s'",
                                       v->groups[gi].users[ui], v->groups[gj].name,
                                       v->groups[gi].name);
    if (v->allow_unknown_user && !cfg_vhost_group_find(v, "$default"))
        return vh_fail(e, "attribute 'allowUnknownUser': true needs a '$default' group (the "
                          "settings of unknown users)");
    return 0;

out_free_deferred:
    free(deferred);
    e->policy = false;
    return -1;
}

int cfg_vhost_parse(const cJSON *attrs, cfg_vhost_t *v, char *err, size_t errlen)
{
    vh_err_t e = {err, errlen, false};

    *v = (cfg_vhost_t){.max_connections = 65535,
                       .max_conn_per_user = 65535,
                       .max_conn_per_host = 65535,
                       .max_message_size = -1};
    if (err && errlen)
        err[0] = '\0';
    /* management tools send every value as a string: `groups` may be its JSON text (the
     * `.conf` reader parses it the same way) */
    cJSON       *own = NULL;
    const cJSON *g =
        cJSON_IsObject(attrs) ? cJSON_GetObjectItemCaseSensitive(attrs, "groups") : NULL;
    if (cJSON_IsString(g) && g->valuestring) {
        cJSON *parsed = cJSON_Parse(g->valuestring);
        if (!cJSON_IsObject(parsed)) {
            cJSON_Delete(parsed);
            return vh_fail(&e, "attribute 'groups': expected a map (JSON), got \"%.40s%s\"",
                           g->valuestring, strlen(g->valuestring) > 40 ? "..." : "");
        }
        own = cJSON_Duplicate(attrs, true);
        cJSON_ReplaceItemInObjectCaseSensitive(own, "groups", parsed);
        attrs = own;
    }
    if (vh_parse(&e, attrs, v) < 0) {
        cfg_vhost_fini(v);
        cJSON_Delete(own);
        return e.policy ? CFG_VHOST_EPOLICY : -1;
    }
    v->attrs_json = cJSON_PrintUnformatted(attrs);
    cJSON_Delete(own);
    return 0;
}

static char **vh_strv_copy(char *const *v, size_t n)
{
    char **out = base_calloc(n ? n : 1, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        out[i] = base_strdup(v[i]);
    return out;
}

static void vh_names_copy(cfg_vnames_t *dst, const cfg_vnames_t *src)
{
    dst->given = src->given;
    dst->n = src->n;
    dst->items = base_calloc(src->n ? src->n : 1, sizeof(cfg_vname_t));
    for (size_t i = 0; i < src->n; i++)
        dst->items[i] = (cfg_vname_t){src->items[i].kind, base_strdup(src->items[i].s1),
                                      base_strdup(src->items[i].s2)};
}

void cfg_vhost_copy(cfg_vhost_t *dst, const cfg_vhost_t *src)
{
    *dst = *src;
    dst->name = src->name ? base_strdup(src->name) : NULL;
    dst->hostname = base_strdup(src->hostname);
    dst->aliases = vh_strv_copy(src->aliases, src->n_aliases);
    dst->attrs_json = src->attrs_json ? base_strdup(src->attrs_json) : NULL;
    dst->groups = base_calloc(src->n_groups ? src->n_groups : 1, sizeof(cfg_vhost_group_t));
    for (size_t i = 0; i < src->n_groups; i++) {
        const cfg_vhost_group_t *s = &src->groups[i];
        cfg_vhost_group_t       *d = &dst->groups[i];
        *d = *s;
        d->name = base_strdup(s->name);
        d->users = vh_strv_copy(s->users, s->n_users);
        d->hosts = base_calloc(s->n_hosts ? s->n_hosts : 1, sizeof(cfg_vhost_range_t));
        if (s->n_hosts)
            memcpy(d->hosts, s->hosts, s->n_hosts * sizeof(cfg_vhost_range_t));
        vh_names_copy(&d->sources, &s->sources);
        vh_names_copy(&d->targets, &s->targets);
        vh_names_copy(&d->source_pattern, &s->source_pattern);
        vh_names_copy(&d->target_pattern, &s->target_pattern);
    }
}
