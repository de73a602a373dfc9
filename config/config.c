/* config/config.c: qdrouterd's JSON configuration -> cfg_t (see config.h for the format and
 * config/DESIGN.md for the module).
 *
 * One pass over the cJSON tree: each entity's attributes are first collected into a table
 * slot per known attribute (keys camelCased the way qdrouterd does it, unknown and repeated
 * keys refused), then a builder per entity type reads the slots with typed getters that coerce
 * like qdrouterd's schema and fill in its defaults.  The first problem found stops the load and
 * becomes the one-line message; nothing is logged here.
 *
 * Threads: main thread, at start-up (no suffixes: nothing here touches shared state).
 * Memory: every string in the result is the cfg_t's own (base_strdup); on an error path the
 * partly built cfg_t and the cJSON tree are freed before returning.
 */
#include "config/config.h"
#include "config/config_int.h"

#include "core/base/base.h"
#include "core/base/log.h"
#include "core/base/map.h"
#include "core/base/pattern.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <ctype.h>
#include <dirent.h>
#include <stddef.h>
#include <stdlib.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define CFG_MAX_FILE_BYTES (16u << 20) /* a config this big is a mistake, not a config */
#define CFG_SHOW_BYTES     48          /* how much of a bad value an error message quotes */


/* -- load state and messages -- */

/* Everything one load needs; lives on cfg_load_string()'s stack. */
typedef struct load {
    const char     *name;                       /* file name for messages */
    char           *err;                        /* caller's buffer, or NULL */
    size_t          errlen;                     /* its size */
    cfg_t          *cfg;                        /* being built; freed by the caller on error */
    int             router_at;                  /* index of the router entity, -1 if none yet */
    int             management_at;              /* index of the management entity, -1 if none */
    int             policy_at;                  /* index of the policy entity, -1 if none */
    int             log_at[BASE_LOG_N_MODULES]; /* index+1 of each module's log entity */
    base_pattern_t *patterns;                   /* address patterns so far; value = index + 1 */
    base_map_t      names;                      /* `name`s so far; value = entity index + 1 */
    cfg__lines_t   *lines;                      /* `.conf`: each node's line; NULL for JSON */
    cJSON          *made;                       /* values the loader made (a fixedAddress's
                                                   distribution), freed with the tree */
    int             container_at;               /* index of a 0.x container entity, or -1 */
    const cJSON    *container_vals[C_N];        /* its attributes, to fill the router's */
    const char     *container_spelled[C_N];     /* and how each was written */
} load_t;

/* One entity being read. */
typedef struct ent {
    load_t           *ld;                     /* the load it belongs to */
    int               index;                  /* position in the file's list, from 0 */
    const char       *type;                   /* canonical short type, for messages */
    const attr_def_t *defs;                   /* its attribute table */
    size_t            n_defs;                 /* entries in defs */
    const cJSON      *vals[CFG_MAX_ATTRS];    /* value per attribute slot, NULL = absent */
    const char       *spelled[CFG_MAX_ATTRS]; /* which def name set the slot (aliases) */
    int               line;                   /* `.conf`: the entity's line; 0 = unknown */
} ent_t;

/* Write a string for a message: escaped so it stays on one line, cut at `max` bytes (never
 * inside a UTF-8 sequence), quoted with `q` when q is not 0. */
static void show_text(char *buf, size_t n, const char *s, size_t max, char q)
{
    size_t o = 0;
    size_t i = 0;

#define PUT(c)                                                                                     \
    do {                                                                                           \
        if (o + 1 < n)                                                                             \
            buf[o++] = (c);                                                                        \
    } while (0)
    if (q)
        PUT(q);
    for (; s[i] && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\\' || (q && c == (unsigned char)q)) {
            PUT('\\');
            PUT((char)c);
        } else if (c < 0x20 || c == 0x7f) {
            char hex[8];
            snprintf(hex, sizeof(hex), "\\x%02x", c);
            for (const char *h = hex; *h; h++)
                PUT(*h);
        } else {
            PUT((char)c);
        }
    }
    bool cut = s[i] != '\0';
    if (cut) {
        /* back off to the start of a UTF-8 sequence so the cut leaves valid text */
        while (o > 1 && ((unsigned char)buf[o - 1] & 0xc0) == 0x80)
            o--;
        if (o > 1 && ((unsigned char)buf[o - 1] & 0xc0) == 0xc0)
            o--;
    }
    if (q)
        PUT(q);
    if (cut) {
        PUT('.');
        PUT('.');
        PUT('.');
    }
#undef PUT
    if (n)
        buf[o] = '\0'; /* PUT() kept o < n */
}

/* How a value reads in a message: "big", 12, 1.5, true, null, a list, a map. */
static const char *show_value(const cJSON *v, char *buf, size_t n)
{
    if (cJSON_IsString(v) && v->valuestring)
        show_text(buf, n, v->valuestring, CFG_SHOW_BYTES, '"');
    else if (cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) &&
             fabs(v->valuedouble) < 1e15)
        snprintf(buf, n, "%.0f", v->valuedouble);
    else if (cJSON_IsNumber(v))
        snprintf(buf, n, "%.17g", v->valuedouble);
    else if (cJSON_IsTrue(v))
        snprintf(buf, n, "true");
    else if (cJSON_IsFalse(v))
        snprintf(buf, n, "false");
    else if (cJSON_IsArray(v))
        snprintf(buf, n, "a list");
    else if (cJSON_IsObject(v))
        snprintf(buf, n, "a map");
    else
        snprintf(buf, n, "null");
    return buf;
}

/* "<file>: [line <l>: ][entity <i> (<type>): ]<message>" into buf. */
static void vformat(char *buf, size_t n, const load_t *ld, const ent_t *e, int line,
                    const char *fmt, va_list ap)
{
    char msg[1024];
    int  o = 0;

    if (line > 0)
        o = snprintf(msg, sizeof(msg), "line %d: ", line);
    if (e)
        o += snprintf(msg + o, sizeof(msg) - (size_t)o, "entity %d (%s): ", e->index, e->type);
    vsnprintf(msg + o, sizeof(msg) - (size_t)o, fmt, ap);
    snprintf(buf, n, "%s: %s", ld->name, msg);
}

static int vfail(load_t *ld, const ent_t *e, int line, const char *fmt, va_list ap)
{
    if (ld->err && ld->errlen)
        vformat(ld->err, ld->errlen, ld, e, line, fmt, ap);
    return -1;
}

/* The line of a value in the file, or 0 (a JSON file, or a value the loader made). */
static int node_line(const load_t *ld, const cJSON *v)
{
    return cfg__lines_get(ld->lines, v);
}

/* Record a warning (one line, like the errors) in the cfg_t being built. */
__attribute__((format(printf, 4, 5))) static void warn(const ent_t *e, const cJSON *at,
                                                        int line, const char *fmt, ...)
{
    load_t *ld = e->ld;
    char    buf[2048];
    va_list ap;

    if (at && node_line(ld, at))
        line = node_line(ld, at);
    va_start(ap, fmt);
    vformat(buf, sizeof(buf), ld, e, line, fmt, ap);
    va_end(ap);
    cfg_t *cfg = ld->cfg;
    cfg->warnings = base_realloc(cfg->warnings, (cfg->n_warnings + 1) * sizeof(char *));
    cfg->warnings[cfg->n_warnings++] = base_strdup(buf);
}

/* "<file>: <message>"; returns -1. */
__attribute__((format(printf, 2, 3))) static int fail(load_t *ld, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(ld, NULL, 0, fmt, ap);
    va_end(ap);
    return -1;
}

/* "<file>: [line <l>: ]entity <i> (<type>): <message>" with the entity's line; returns -1. */
__attribute__((format(printf, 2, 3))) static int ent_fail(const ent_t *e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(e->ld, e, e->line, fmt, ap);
    va_end(ap);
    return -1;
}

/* The same with a line of one's own (0: none); returns -1. */
__attribute__((format(printf, 4, 5))) static int line_fail(load_t *ld, const ent_t *e, int line,
                                                            const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(ld, e, line, fmt, ap);
    va_end(ap);
    return -1;
}

/* The same with the line of attribute slot a when the file gives it. */
__attribute__((format(printf, 3, 4))) static int attr_fail(const ent_t *e, int a, const char *fmt,
                                                            ...)
{
    int     line = node_line(e->ld, e->vals[a]);
    va_list ap;
    va_start(ap, fmt);
    vfail(e->ld, e, line ? line : e->line, fmt, ap);
    va_end(ap);
    return -1;
}

static const char *attr_name(const ent_t *e, int a)
{
    return e->spelled[a] ? e->spelled[a] : e->defs[a].name;
}

/* "... attribute '<a>': expected <what>, got <value>"; returns -1. */
__attribute__((format(printf, 3, 4))) static int expect(const ent_t *e, int a, const char *fmt, ...)
{
    char    what[512];
    char    got[CFG_SHOW_BYTES * 4 + 16];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return attr_fail(e, a, "attribute '%s': expected %s, got %s", attr_name(e, a), what,
                     show_value(e->vals[a], got, sizeof(got)));
}

/* "... attribute '<a>': Junction does not support <what> yet"; returns -1. */
static int unsupported(const ent_t *e, int a, const char *what)
{
    return attr_fail(e, a, "attribute '%s': Junction does not support %s yet", attr_name(e, a),
                     what);
}

/* -- typed getters: an absent slot gives the default -- */

static int get_int(const ent_t *e, int a, long long lo, long long hi, long long dflt,
                   long long *out);

/* The routing protocol's timers (router entity), qdrouterd's ranges and defaults. */
static int router_timers_fill(const ent_t *e, cfg_router_t *r)
{
    static const struct {
        int slot;
        int dflt;
        size_t off;
    } t[] = {
        {R_HELLO_INTERVAL, 1, offsetof(cfg_router_t, hello_interval)},
        {R_HELLO_MAX_AGE, 3, offsetof(cfg_router_t, hello_max_age)},
        {R_RA_INTERVAL, 30, offsetof(cfg_router_t, ra_interval)},
        {R_RA_INTERVAL_FLUX, 4, offsetof(cfg_router_t, ra_interval_flux)},
        {R_REMOTE_LS_MAX_AGE, 60, offsetof(cfg_router_t, remote_ls_max_age)},
    };
    for (size_t k = 0; k < sizeof(t) / sizeof(t[0]); k++) {
        long long x;
        if (get_int(e, t[k].slot, 1, 86400, t[k].dflt, &x) < 0)
            return -1;
        *(int *)((char *)r + t[k].off) = (int)x;
    }
    return 0;
}

static bool int_from_double(double d, long long *out)
{
    if (!isfinite(d) || d != floor(d) || d < -9.2e18 || d > 9.2e18)
        return false;
    *out = (long long)d;
    return true;
}

/* Python's int() on a string: blanks around, an optional sign, decimal digits. */
static bool int_from_string(const char *s, long long *out)
{
    const char *p = s;
    while (isspace((unsigned char)*p))
        p++;
    const char *start = p;
    if (*p == '+' || *p == '-')
        p++;
    if (!isdigit((unsigned char)*p))
        return false;
    while (isdigit((unsigned char)*p))
        p++;
    const char *stop = p;
    while (isspace((unsigned char)*p))
        p++;
    if (*p)
        return false;
    char digits[32];
    if ((size_t)(stop - start) >= sizeof(digits))
        return false;
    memcpy(digits, start, (size_t)(stop - start));
    digits[stop - start] = '\0';
    errno = 0;
    *out = strtoll(digits, NULL, 10);
    return errno == 0;
}

static void int_range_text(char *buf, size_t n, long long min, long long max, bool full)
{
    if (min == LLONG_MIN && max == LLONG_MAX)
        snprintf(buf, n, "an integer");
    else if (!full && max >= (long long)UINT32_MAX)
        snprintf(buf, n, "an integer >= %lld", min);
    else
        snprintf(buf, n, "an integer from %lld to %lld", min, max);
}

static int get_int(const ent_t *e, int a, long long min, long long max, long long dflt,
                   long long *out)
{
    const cJSON *v = e->vals[a];
    long long    x;
    char         what[96];

    if (!v) {
        *out = dflt;
        return 0;
    }
    bool ok = (cJSON_IsNumber(v) && int_from_double(v->valuedouble, &x)) ||
              (cJSON_IsString(v) && v->valuestring && int_from_string(v->valuestring, &x));
    if (!ok) {
        int_range_text(what, sizeof(what), min, max, false);
        return expect(e, a, "%s", what);
    }
    if (x < min || x > max) {
        /* "from 512 to 4294967295" only when the upper bound is the problem */
        int_range_text(what, sizeof(what), min, max, x > max);
        return expect(e, a, "%s", what);
    }
    *out = x;
    return 0;
}

static int get_u32(const ent_t *e, int a, long long min, long long max, uint32_t dflt,
                   uint32_t *out)
{
    long long x;
    if (get_int(e, a, min, max, dflt, &x) < 0)
        return -1;
    *out = (uint32_t)x;
    return 0;
}

bool cfg__bool_value(const cJSON *v, unsigned accept, bool *out)
{
    static const char *const yes[] = {"true", "yes", "on"};
    static const char *const no[] = {"false", "no", "off"};
    /* the words to try: true/false always, yes/no and on/off with CFG_BOOL_WORDS */
    size_t n_words = (accept & CFG_BOOL_WORDS) ? BASE_ARRAY_LEN(yes) : 1;

    if (cJSON_IsBool(v)) {
        *out = cJSON_IsTrue(v);
        return true;
    }
    if ((accept & CFG_BOOL_NUMBERS) && cJSON_IsNumber(v) &&
        (v->valuedouble == 0 || v->valuedouble == 1)) {
        *out = v->valuedouble == 1;
        return true;
    }
    if (cJSON_IsString(v) && v->valuestring) {
        for (size_t i = 0; i < n_words; i++) {
            if (strcasecmp(v->valuestring, yes[i]) == 0) {
                *out = true;
                return true;
            }
            if (strcasecmp(v->valuestring, no[i]) == 0) {
                *out = false;
                return true;
            }
        }
    }
    return false;
}

static int get_bool(const ent_t *e, int a, bool dflt, bool *out)
{
    const cJSON *v = e->vals[a];

    if (!v) {
        *out = dflt;
        return 0;
    }
    if (cfg__bool_value(v, CFG_BOOL_SCHEMA, out))
        return 0;
    return expect(e, a, "a boolean (true/false, yes/no, on/off)");
}

/* A new copy of the string value in *out, or dflt (copied; may be NULL) when absent. */
static int get_str(const ent_t *e, int a, const char *dflt, char **out)
{
    const cJSON *v = e->vals[a];
    long long    x;

    if (!v) {
        *out = dflt ? base_strdup(dflt) : NULL;
        return 0;
    }
    if (cJSON_IsString(v) && v->valuestring) {
        *out = base_strdup(v->valuestring);
        return 0;
    }
    if (cJSON_IsNumber(v) && int_from_double(v->valuedouble, &x)) {
        char num[32];
        snprintf(num, sizeof(num), "%lld", x);
        *out = base_strdup(num);
        return 0;
    }
    return expect(e, a, "a string");
}

/* Index of the value in the slot's tags; by name (exact, like qdrouterd) or by index. */
static int get_enum(const ent_t *e, int a, int dflt, int *out)
{
    const char *const *tags = e->defs[a].tags;
    const cJSON       *v = e->vals[a];
    int                n = 0;
    long long          x;

    while (tags[n])
        n++;
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (cJSON_IsString(v) && v->valuestring) {
        for (int i = 0; i < n; i++) {
            if (strcmp(v->valuestring, tags[i]) == 0) {
                *out = i;
                return 0;
            }
        }
    } else if (cJSON_IsNumber(v) && int_from_double(v->valuedouble, &x) && x >= 0 && x < n) {
        *out = (int)x;
        return 0;
    }
    char   list[256];
    size_t o = 0;
    for (int i = 0; i < n && o < sizeof(list); i++)
        o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", i ? ", " : "", tags[i]);
    return expect(e, a, "one of %s", list);
}

/* Type-check an attribute that is accepted but not used. */
static int check_ignored(const ent_t *e, int a)
{
    long long x;
    bool      b;
    int       i;
    char     *s = NULL;
    int       rc = 0;

    switch (e->defs[a].type) {
    case AT_STRING:
        rc = get_str(e, a, NULL, &s);
        free(s);
        break;
    case AT_INT:
        rc = get_int(e, a, LLONG_MIN, LLONG_MAX, 0, &x);
        break;
    case AT_BOOL:
        rc = get_bool(e, a, false, &b);
        break;
    case AT_ENUM:
        rc = get_enum(e, a, 0, &i);
        break;
    case AT_MAP:
        if (!cJSON_IsObject(e->vals[a]))
            rc = expect(e, a, "a map");
        break;
    }
    return rc;
}

/* -- collecting an entity's attributes -- */

/* The one warning a deprecated name or an old spelling of an attribute gets. */
static void warn_name(const ent_t *e, const cJSON *c, int a, bool respelled)
{
    const attr_def_t *d = &e->defs[a];
    char              shown[CFG_SHOW_BYTES * 4 + 8];

    show_text(shown, sizeof(shown), c->string ? c->string : "", CFG_SHOW_BYTES, 0);
    if (d->deprecated && d->alias_of)
        warn(e, c, e->line, "attribute '%s' is deprecated, use '%s' instead", shown,
             e->defs[d->alias_of].name);
    else if (d->deprecated)
        warn(e, c, e->line, "attribute '%s' is deprecated: %s", shown, d->instead);
    else if (respelled)
        warn(e, c, e->line, "attribute '%s' is an old spelling, use '%s' instead", shown, d->name);
}

static int collect(ent_t *e, const cJSON *attrs)
{
    const cJSON *c;
    load_t      *ld = e->ld;

    cJSON_ArrayForEach(c, attrs)
    {
        const char *written = c->string ? c->string : "";
        char       *key = cfg__camelcase(written);
        int         a = cfg__attr_find(e->defs, e->n_defs, key);
        bool        respelled = strcmp(key, written) != 0;
        int         line = node_line(ld, c) ? node_line(ld, c) : e->line;
        free(key);
        if (a < 0) {
            char shown[CFG_SHOW_BYTES * 4 + 8];
            show_text(shown, sizeof(shown), written, CFG_SHOW_BYTES, 0);
            return line_fail(ld, e, line, "attribute '%s': unknown attribute", shown);
        }
        if (cJSON_IsNull(c))
            continue; /* null is absent, as in qdrouterd */
        int slot = e->defs[a].alias_of ? e->defs[a].alias_of : a;
        if (e->vals[slot]) {
            if (e->spelled[slot] != e->defs[a].name)
                return line_fail(ld, e, line, "attribute '%s': given twice, as '%s' and '%s'",
                                 e->defs[slot].name, e->spelled[slot], e->defs[a].name);
            return line_fail(ld, e, line, "attribute '%s': given twice", e->defs[a].name);
        }
        e->vals[slot] = c;
        e->spelled[slot] = e->defs[a].name;
        warn_name(e, c, a, respelled);
    }
    for (size_t i = 0; i < e->n_defs; i++)
        if (e->defs[i].ignored && e->vals[i] && check_ignored(e, (int)i) < 0)
            return -1;
    return 0;
}

/* `type` inside the attributes: accepted when it names this entity's own type. */
static int check_type_attr(const ent_t *e, int a)
{
    const cJSON *v = e->vals[a];
    if (!v)
        return 0;
    char *canon = NULL;
    bool  same = cJSON_IsString(v) && v->valuestring &&
                cfg__type_resolve(v->valuestring, &canon) != TK_UNKNOWN && strcmp(canon, e->type) == 0;
    free(canon);
    if (!same)
        return expect(e, a, "\"%s\" (the entity's own type)", e->type);
    return 0;
}

/* `name`: unique over the whole file (qdrouterd's names are unique across entities). */
static int check_name(ent_t *e, int a, const char *name)
{
    if (!name)
        return 0;
    uintptr_t other = (uintptr_t)base_map_get(&e->ld->names, name, strlen(name));
    if (other)
        return attr_fail(e, a, "attribute '%s': entity %d has the name \"%s\" already",
                         attr_name(e, a), (int)(other - 1), name);
    base_map_put(&e->ld->names, name, strlen(name), (void *)(uintptr_t)(e->index + 1));
    return 0;
}

/* Common to every entity: the `type` and `name` checks. */
static int check_common(ent_t *e, int type_slot, int name_slot, char **name_out)
{
    char *name = NULL;

    if (check_type_attr(e, type_slot) < 0)
        return -1;
    if (get_str(e, name_slot, NULL, &name) < 0)
        return -1;
    if (check_name(e, name_slot, name) < 0) {
        free(name);
        return -1;
    }
    if (name_out)
        *name_out = name;
    else
        free(name);
    return 0;
}

/* -- entity builders -- */

static char *random_router_id(void)
{
    uint32_t r = 0;
    char     id[32];

    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r = (uint32_t)ts.tv_nsec ^ (uint32_t)ts.tv_sec ^ ((uint32_t)getpid() << 16);
    }
    snprintf(id, sizeof(id), "Junction.%08x", r);
    return base_strdup(id);
}

/* saslConfigDir (saslConfigPath) and saslConfigName: where Cyrus SASL reads its
 * configuration (router/sasl.c checks the directory at start-up). */
static int router_sasl(ent_t *e, cfg_router_t *r)
{
    if (get_str(e, R_SASL_CONFIG_DIR, NULL, &r->sasl_config_dir) < 0 ||
        get_str(e, R_SASL_CONFIG_NAME, NULL, &r->sasl_config_name) < 0)
        return -1;
    if (r->sasl_config_dir && !*r->sasl_config_dir)
        BASE_FREE(r->sasl_config_dir);
    if (r->sasl_config_dir && strlen(r->sasl_config_dir) >= CFG_PATH_MAX)
        return expect(e, R_SASL_CONFIG_DIR, "a directory path shorter than 4096 bytes");
    if (r->sasl_config_name &&
        (!*r->sasl_config_name || strlen(r->sasl_config_name) > 255 ||
         strchr(r->sasl_config_name, '/')))
        return expect(e, R_SASL_CONFIG_NAME, "a file name without '/' (Cyrus reads <name>.conf)");
    return 0;
}

static int build_router(ent_t *e)
{
    cfg_router_t *r = &e->ld->cfg->router;
    long long     x;
    int           i;

    if (e->ld->router_at >= 0)
        return ent_fail(e, "a second router entity (entity %d is the router already)",
                        e->ld->router_at);
    e->ld->router_at = e->index;
    if (check_common(e, R_TYPE, R_NAME, NULL) < 0)
        return -1;
    /* a qdrouterd 0.x container entity's attributes fill those the router does not give (0.8
     * read the container's first; its router then set what it gave) */
    for (int c = 0; c < C_N; c++) {
        int slot = cfg__container_to_router[c];
        if (slot && e->ld->container_vals[c] && !e->vals[slot]) {
            e->vals[slot] = e->ld->container_vals[c];
            e->spelled[slot] = e->ld->container_spelled[c];
            if (cfg__router_attrs[slot].ignored && check_ignored(e, slot) < 0)
                return -1;
        }
    }

    char *id = NULL;
    if (get_str(e, R_ID, NULL, &id) < 0)
        return -1;
    if (id && *id == '\0')
        BASE_FREE(id); /* qdrouterd treats an empty id as none */
    for (const char *p = id; p && *p; p++) {
        if (isspace((unsigned char)*p)) {
            free(id);
            return expect(e, R_ID, "a router id without whitespace");
        }
    }
    if (id) {
        free(r->id);
        r->id = id;
    }

    if (get_enum(e, R_MODE, 0, &i) < 0)
        return -1;
    if (i == 2) {
        /* an edge router (core/edge.c): no routing protocol, one uplink to an interior */
        free(r->mode);
        r->mode = base_strdup("edge");
        r->edge = true;
    }
    if (i == 1) {
        free(r->mode);
        r->mode = base_strdup("interior");
        r->interior = true;
        /* read for the routing protocol; a standalone router drops them (as before) */
        if (router_timers_fill(e, r) < 0)
            return -1;
    }

    if (get_int(e, R_WORKER_THREADS, 1, CFG_WORKER_THREADS_MAX, 0, &x) < 0)
        return -1;
    r->worker_threads = (int)x;

    if (get_enum(e, R_DEFAULT_DISTRIBUTION, CFG_DIST_BALANCED, &i) < 0)
        return -1;
    r->default_distribution = (cfg_distribution_t)i;

    if (get_int(e, R_SHUTDOWN_GRACE, 0, 3600, CFG_SHUTDOWN_GRACE_DEFAULT, &x) < 0)
        return -1;
    r->shutdown_grace_seconds = (uint32_t)x;

    if (get_int(e, R_MAX_STATS, CFG_MAX_STATS_MIN, CFG_MAX_STATS_DEFAULT, CFG_MAX_STATS_DEFAULT,
                &x) < 0)
        return -1;
    r->max_stats = (uint32_t)x;
    if (router_sasl(e, r) < 0)
        return -1;

    /* log lines always carry qdrouterd's default timestamp form */
    if (e->vals[R_TIMESTAMP_FORMAT]) {
        char *fmt = NULL;
        if (get_str(e, R_TIMESTAMP_FORMAT, NULL, &fmt) < 0)
            return -1;
        free(fmt);
        return unsupported(e, R_TIMESTAMP_FORMAT, "timestampFormat (a log timestamp format)");
    }
    return 0;
}

static void listener_fini(cfg_listener_t *l)
{
    BASE_FREE(l->name);
    BASE_FREE(l->host);
    BASE_FREE(l->port);
    BASE_FREE(l->sasl_mechanisms);
    BASE_FREE(l->http_root_dir);
    BASE_FREE(l->policy_vhost);
    BASE_FREE(l->ssl_profile);
    BASE_FREE(l->sasl_plugin);
}

/* saslMechanisms: a blank- (or comma-) separated list of mechanism names (RFC 4422: upper
 * case letters, digits, '-' and '_', at most 20); kept upper-cased and blank-separated, as
 * Proton's allowed-mechanisms list wants it.  EXTERNAL makes a listener's TLS sessions ask for
 * client certificates (router/tls.c). */
static int check_sasl_at(const ent_t *e, int slot, const char *mechs, char **out)
{
    const char *p = mechs;
    size_t      len = strlen(mechs);
    char       *list = base_malloc(len + 1);
    size_t      o = 0;

    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (!*p)
            break;
        size_t n = strcspn(p, " \t,");
        bool   ok = n >= 1 && n <= 20;
        for (size_t k = 0; k < n && ok; k++)
            ok = isalnum((unsigned char)p[k]) || p[k] == '-' || p[k] == '_';
        if (!ok) {
            free(list);
            return expect(e, slot,
                          "SASL mechanism names (letters, digits, '-', '_') separated by blanks");
        }
        /* a name given twice is offered once */
        bool seen = false;
        for (size_t at = 0; at < o && !seen; at += strcspn(list + at, " ") + 1)
            seen = strcspn(list + at, " ") == n && strncasecmp(list + at, p, n) == 0;
        if (!seen) {
            if (o)
                list[o++] = ' ';
            for (size_t k = 0; k < n; k++)
                list[o++] = (char)toupper((unsigned char)p[k]);
            list[o] = '\0';
        }
        p += n;
    }
    if (!o) {
        free(list);
        return expect(e, slot, "at least one SASL mechanism name");
    }
    list[o] = '\0';
    *out = list;
    return 0;
}

static int check_sasl(const ent_t *e, const char *mechs, char **out)
{
    return check_sasl_at(e, L_SASL_MECHANISMS, mechs, out);
}

/* A listener's TLS: sslProfile (checked to name a profile once the file is read, since the
 * profile may come later) and requireSsl, which needs it.  trustedCertsFile (qdrouterd 0.x,
 * client certificates checked against another CA list) stays refused. */
static int listener_tls_fill(ent_t *e, cfg_listener_t *l)
{
    if (e->vals[L_TRUSTED_CERTS_FILE])
        return unsupported(e, L_TRUSTED_CERTS_FILE, "trustedCertsFile (use the sslProfile's "
                                                    "caCertFile)");
    if (get_str(e, L_SSL_PROFILE, NULL, &l->ssl_profile) < 0 ||
        get_bool(e, L_REQUIRE_SSL, false, &l->require_ssl) < 0)
        return -1;
    if (l->ssl_profile && !*l->ssl_profile)
        BASE_FREE(l->ssl_profile);
    if (l->require_ssl && !l->ssl_profile)
        return attr_fail(e, L_REQUIRE_SSL, "attribute '%s': requireSsl: true needs an sslProfile",
                         attr_name(e, L_REQUIRE_SSL));
    return 0;
}

static int listener_fill(ent_t *e, cfg_listener_t *l)
{
    bool  b;
    int   i;
    char *s = NULL;

    if (check_common(e, L_TYPE, L_NAME, &l->name) < 0)
        return -1;
    if (get_str(e, L_HOST, "", &l->host) < 0 || get_str(e, L_PORT, "amqp", &l->port) < 0)
        return -1;
    if (cfg_port_number(l->port) < 0)
        return expect(e, L_PORT, "a port number from 0 to 65535 or a service name");

    if (get_enum(e, L_SOCKET_ADDRESS_FAMILY, -1, &i) < 0)
        return -1;
    l->family = i < 0 ? CFG_FAMILY_ANY : i == 0 ? CFG_FAMILY_IPV4 : CFG_FAMILY_IPV6;
    long long cost;
    if (get_int(e, L_COST, LLONG_MIN, LLONG_MAX, 1, &cost) < 0)
        return -1;
    l->cost = (int64_t)cost;

    if (get_enum(e, L_ROLE, CFG_ROLE_NORMAL, &i) < 0)
        return -1;
    /* every role serves: route-container (autoLinks attach on its connections, link routes
     * lead there), inter-router (an interior mesh), edge (an interior's edge routers) */
    l->role = (cfg_role_t)i;

    if (listener_tls_fill(e, l) < 0)
        return -1;
    /* authentication, multi-tenancy: refused rather than silently ignored, since a client
     * would see the difference */
    static const struct {
        int         slot;
        const char *what;
    } refused_true[] = {
        {L_MULTI_TENANT, "multiTenant: true"},
    };
    for (size_t k = 0; k < BASE_ARRAY_LEN(refused_true); k++) {
        if (get_bool(e, refused_true[k].slot, false, &b) < 0)
            return -1;
        if (b)
            return unsupported(e, refused_true[k].slot, refused_true[k].what);
    }
    if (get_bool(e, L_AUTHENTICATE_PEER, false, &l->authenticate_peer) < 0 ||
        get_bool(e, L_REQUIRE_ENCRYPTION, false, &l->require_encryption) < 0)
        return -1;
    /* qdrouterd 0.x: allowUnsecured no meant requireEncryption yes */
    if (get_bool(e, L_OLD_ALLOW_UNSECURED, true, &b) < 0)
        return -1;
    if (!b)
        l->require_encryption = true;

    /* HTTP (qdrouterd's semantics): `http` makes the listener serve HTTP and WebSocket only;
     * a non-empty httpRootDir implies http (connection_manager.c); healthz, metrics and
     * websockets default to true and only matter on an http listener */
    if (get_bool(e, L_HTTP, false, &l->http) < 0 ||
        get_bool(e, L_HEALTHZ, true, &l->healthz) < 0 ||
        get_bool(e, L_METRICS, true, &l->metrics) < 0 ||
        get_bool(e, L_WEBSOCKETS, true, &l->websockets) < 0 ||
        get_str(e, L_HTTP_ROOT_DIR, NULL, &l->http_root_dir) < 0)
        return -1;
    if (l->http_root_dir && !*l->http_root_dir)
        BASE_FREE(l->http_root_dir);
    if (l->http_root_dir) {
        if (strlen(l->http_root_dir) >= CFG_PATH_MAX)
            return expect(e, L_HTTP_ROOT_DIR, "a directory path shorter than 4096 bytes");
        l->http = true;
    }
    if (l->require_encryption && l->http)
        return unsupported(e, L_REQUIRE_ENCRYPTION, "requireEncryption: true on an http listener");
    /* checked to name an authServicePlugin once the file is read (it may come later) */
    if (get_str(e, L_SASL_PLUGIN, NULL, &l->sasl_plugin) < 0)
        return -1;
    if (l->sasl_plugin && !*l->sasl_plugin)
        BASE_FREE(l->sasl_plugin);
    if (get_str(e, L_SASL_MECHANISMS, NULL, &s) < 0)
        return -1;
    if (s) {
        int rc = check_sasl(e, s, &l->sasl_mechanisms);
        BASE_FREE(s);
        if (rc < 0)
            return -1;
    }
    /* what a client would see, or the log would show, differently: refused until it works */
    if (e->vals[L_FAILOVER_URLS]) {
        if (get_str(e, L_FAILOVER_URLS, NULL, &s) < 0)
            return -1;
        bool given = *s != '\0';
        BASE_FREE(s);
        if (given)
            return unsupported(e, L_FAILOVER_URLS, "failoverUrls (a failover list for clients)");
    }
    if (get_str(e, L_MESSAGE_LOGGING_COMPONENTS, NULL, &s) < 0)
        return -1;
    if (s) {
        bool none = strcmp(s, "none") == 0;
        BASE_FREE(s);
        if (!none)
            return unsupported(e, L_MESSAGE_LOGGING_COMPONENTS,
                               "messageLoggingComponents other than \"none\" (message logging)");
    }
    if (get_str(e, L_POLICY_VHOST, NULL, &l->policy_vhost) < 0)
        return -1;
    if (e->vals[L_OPEN_PROPERTIES]) {
        const cJSON *op = e->vals[L_OPEN_PROPERTIES];
        if (!cJSON_IsObject(op))
            return expect(e, L_OPEN_PROPERTIES, "a map");
        if (op->child)
            return unsupported(e, L_OPEN_PROPERTIES, "openProperties (extra open properties)");
    }

    if (get_u32(e, L_MAX_FRAME_SIZE, 512, CFG_MAX_FRAME_SIZE_MAX, 16384, &l->max_frame_size) < 0 ||
        get_u32(e, L_MAX_SESSIONS, 0, UINT32_MAX, 32768, &l->max_sessions) < 0 ||
        get_u32(e, L_MAX_SESSION_FRAMES, 0, CFG_SESSION_FRAMES_MAX, 0,
                &l->max_session_frames) < 0 ||
        get_u32(e, L_IDLE_TIMEOUT, 0, UINT32_MAX / 1000, 16, &l->idle_timeout_seconds) < 0 ||
        get_u32(e, L_LINK_CAPACITY, 0, CFG_LINK_CAPACITY_MAX, 250, &l->link_capacity) < 0 ||
        get_u32(e, L_INITIAL_HANDSHAKE_TIMEOUT, 0, UINT32_MAX / 1000, 10,
                &l->handshake_timeout_seconds) < 0 ||
        get_u32(e, L_MAX_SENDERS, 1, INT32_MAX, 32768, &l->max_senders) < 0 ||
        get_u32(e, L_MAX_RECEIVERS, 1, INT32_MAX, 32768, &l->max_receivers) < 0 ||
        get_u32(e, L_MAX_UNSETTLED, 0, CFG_LINK_CAPACITY_MAX, 0, &l->max_unsettled) < 0)
        return -1;
    long long mms;
    if (get_int(e, L_MAX_MESSAGE_SIZE, 0, INT64_MAX, 0, &mms) < 0)
        return -1;
    l->max_message_size = (uint64_t)mms;
    l->max_message_size_set = e->vals[L_MAX_MESSAGE_SIZE] != NULL;
    /* qdrouterd (connection_manager.c): Proton allows at most 32768 sessions; 0 means that */
    if (l->max_sessions == 0 || l->max_sessions > 32768)
        l->max_sessions = 32768;
    if (l->link_capacity == 0)
        l->link_capacity = 250;
    /* the credit window of an incoming link is the smaller of the two */
    if (l->max_unsettled == 0 || l->max_unsettled > l->link_capacity)
        l->max_unsettled = l->link_capacity;

    if (get_enum(e, L_STRIP_ANNOTATIONS, 2 /* both */, &i) < 0)
        return -1;
    l->strip_annotations = cfg__strip_by_tag[i];
    return 0;
}

static int build_listener(ent_t *e)
{
    cfg_t         *cfg = e->ld->cfg;
    cfg_listener_t l = {0};

    if (listener_fill(e, &l) < 0) {
        listener_fini(&l);
        return -1;
    }
    cfg->listeners = base_realloc(cfg->listeners, (cfg->n_listeners + 1) * sizeof(l));
    cfg->listeners[cfg->n_listeners++] = l;
    return 0;
}

static void connector_fini(cfg_connector_t *cn)
{
    listener_fini(&cn->conn);
    BASE_FREE(cn->sasl_username);
    BASE_FREE(cn->sasl_password);
    cJSON_Delete(cn->open_properties);
    cn->open_properties = NULL;
}

/* openProperties: a map whose keys become symbols in the open's properties, after the
 * router's own (router/conn_props.h).  qdrouterd 1.19's rules: ASCII keys; product, version,
 * failover-server-list, network-host and port, and keys that start with qd. or x-opt-qd.,
 * are the router's.  (1.19's schema names scheme and hostname as reserved too, but its check
 * misses them - a missing comma joins them into one key - so a 1.19 configuration may use
 * them, and they are accepted here.) */
static int open_properties_check(const ent_t *e, int a)
{
    static const char *const reserved[] = {"product", "version", "failover-server-list",
                                           "network-host", "port"};
    const cJSON *op = e->vals[a];
    if (!cJSON_IsObject(op))
        return expect(e, a, "a map");
    for (const cJSON *k = op->child; k; k = k->next) {
        const char *key = k->string;
        for (const unsigned char *p = (const unsigned char *)key; *p; p++)
            if (*p > 127)
                return attr_fail(e, a, "attribute '%s': its keys must be ASCII", attr_name(e, a));
        bool taken = strncmp(key, "qd.", 3) == 0 || strncmp(key, "x-opt-qd.", 9) == 0;
        for (size_t i = 0; i < BASE_ARRAY_LEN(reserved) && !taken; i++)
            taken = strcmp(key, reserved[i]) == 0;
        if (taken)
            return attr_fail(e, a, "attribute '%s': reserved key '%.100s' not allowed (the "
                             "router's own open properties)", attr_name(e, a), key);
    }
    return 0;
}

/* connector: what the connection manager needs to keep one outgoing connection (its
 * connection settings in the listener's struct, which the connection layers read).  What
 * Junction does not do yet on a connector is refused with one line: roles other than normal
 * and route-container, message logging.  failoverUrls is read-only in qdrouterd 1.19 (the
 * failover list in use), which ignores it in a file: a warning here. */
static int connector_fill(ent_t *e, cfg_connector_t *cn)
{
    cfg_listener_t *l = &cn->conn;
    int             i;
    char           *s = NULL;

    if (check_common(e, CN_TYPE, CN_NAME, &l->name) < 0)
        return -1;
    if (get_str(e, CN_HOST, "127.0.0.1", &l->host) < 0 ||
        get_str(e, CN_PORT, "amqp", &l->port) < 0)
        return -1;
    if (!*l->host)
        return expect(e, CN_HOST, "a host name or address to connect to");
    if (cfg_port_number(l->port) <= 0)
        return expect(e, CN_PORT, "a port number from 1 to 65535 or a service name");
    if (get_enum(e, CN_PROTOCOL_FAMILY, -1, &i) < 0)
        return -1;
    l->family = i < 0 ? CFG_FAMILY_ANY : i == 0 ? CFG_FAMILY_IPV4 : CFG_FAMILY_IPV6;
    long long cost;
    if (get_int(e, CN_COST, LLONG_MIN, LLONG_MAX, 1, &cost) < 0)
        return -1;
    l->cost = (int64_t)cost;
    if (get_enum(e, CN_ROLE, CFG_ROLE_NORMAL, &i) < 0)
        return -1;
    l->role = (cfg_role_t)i;

    /* TLS as a client: the profile is checked to exist once the file is read */
    if (get_str(e, CN_SSL_PROFILE, NULL, &l->ssl_profile) < 0)
        return -1;
    if (l->ssl_profile && !*l->ssl_profile)
        BASE_FREE(l->ssl_profile);
    /* with enableVhostPolicy, the vhost whose `$connector` group governs its connections
       (router/policy.c); "" is none, as in qdrouterd */
    if (get_str(e, CN_POLICY_VHOST, NULL, &l->policy_vhost) < 0)
        return -1;
    if (l->policy_vhost && !l->policy_vhost[0])
        BASE_FREE(l->policy_vhost);
    if (get_bool(e, CN_VERIFY_HOSTNAME, true, &cn->verify_hostname) < 0)
        return -1;
    if (e->vals[CN_FAILOVER_URLS])
        warn(e, e->vals[CN_FAILOVER_URLS], e->line,
             "attribute '%s' of a connector is read-only (the failover list in use, as "
             "management shows it): ignored", attr_name(e, CN_FAILOVER_URLS));
    if (e->vals[CN_CONNECTION_STATUS])
        return unsupported(e, CN_CONNECTION_STATUS, "connectionStatus in a file (it is a "
                                                    "run-time column)");
    if (e->vals[CN_CONNECTION_MSG])
        return unsupported(e, CN_CONNECTION_MSG, "connectionMsg in a file (it is a run-time "
                                                 "column)");
    if (get_str(e, CN_MESSAGE_LOGGING_COMPONENTS, NULL, &s) < 0)
        return -1;
    if (s) {
        bool none = strcmp(s, "none") == 0;
        BASE_FREE(s);
        if (!none)
            return unsupported(e, CN_MESSAGE_LOGGING_COMPONENTS,
                               "messageLoggingComponents other than \"none\" (message logging)");
    }
    if (e->vals[CN_OPEN_PROPERTIES]) {
        if (open_properties_check(e, CN_OPEN_PROPERTIES) < 0)
            return -1;
        /* qdrouterd 1.19: no user properties on a router-to-router connection */
        if (l->role == CFG_ROLE_INTER_ROUTER || l->role == CFG_ROLE_EDGE)
            return attr_fail(e, CN_OPEN_PROPERTIES, "attribute '%s': openProperties not "
                             "allowed for role %s", attr_name(e, CN_OPEN_PROPERTIES),
                             cfg__role_tags[l->role]);
        if (e->vals[CN_OPEN_PROPERTIES]->child)
            cn->open_properties = cJSON_Duplicate(e->vals[CN_OPEN_PROPERTIES], true);
    }

    /* SASL as a client: Proton's own mechanisms (ANONYMOUS, PLAIN, EXTERNAL) */
    if (get_str(e, CN_SASL_MECHANISMS, NULL, &s) < 0)
        return -1;
    if (s) {
        int rc = check_sasl_at(e, CN_SASL_MECHANISMS, s, &l->sasl_mechanisms);
        BASE_FREE(s);
        if (rc < 0)
            return -1;
        for (const char *p = l->sasl_mechanisms; *p;) {
            size_t n = strcspn(p, " ");
            if (!(n == 9 && strncmp(p, "ANONYMOUS", 9) == 0) &&
                !(n == 5 && strncmp(p, "PLAIN", 5) == 0) &&
                !(n == 8 && strncmp(p, "EXTERNAL", 8) == 0))
                return unsupported(e, CN_SASL_MECHANISMS,
                                   "SASL mechanisms other than ANONYMOUS, PLAIN and EXTERNAL on a "
                                   "connector");
            p += n;
            while (*p == ' ')
                p++;
        }
    }
    if (get_str(e, CN_SASL_USERNAME, NULL, &cn->sasl_username) < 0 ||
        get_str(e, CN_SASL_PASSWORD, NULL, &s) < 0)
        return -1;
    if (s) {
        bool plain = false;
        char why[256];
        int  rc = cfg_password_resolve(s, false, &cn->sasl_password, &plain, why, sizeof(why));
        BASE_FREE(s);
        if (rc < 0)
            return attr_fail(e, CN_SASL_PASSWORD, "attribute '%s': %s",
                             attr_name(e, CN_SASL_PASSWORD), why);
    }
    if (cn->sasl_password && !cn->sasl_username)
        return attr_fail(e, CN_SASL_PASSWORD, "attribute '%s' without a saslUsername",
                         attr_name(e, CN_SASL_PASSWORD));

    if (get_u32(e, CN_MAX_FRAME_SIZE, 512, CFG_MAX_FRAME_SIZE_MAX, 16384, &l->max_frame_size) < 0 ||
        get_u32(e, CN_MAX_SESSIONS, 0, UINT32_MAX, 32768, &l->max_sessions) < 0 ||
        get_u32(e, CN_MAX_SESSION_FRAMES, 0, CFG_SESSION_FRAMES_MAX, 0,
                &l->max_session_frames) < 0 ||
        get_u32(e, CN_IDLE_TIMEOUT, 0, UINT32_MAX / 1000, 16, &l->idle_timeout_seconds) < 0 ||
        get_u32(e, CN_LINK_CAPACITY, 0, CFG_LINK_CAPACITY_MAX, 250, &l->link_capacity) < 0)
        return -1;
    if (l->max_sessions == 0 || l->max_sessions > 32768)
        l->max_sessions = 32768;
    if (l->link_capacity == 0)
        l->link_capacity = 250;
    l->max_unsettled = l->link_capacity;
    l->max_senders = 32768;
    l->max_receivers = 32768;
    l->handshake_timeout_seconds = 10; /* the peer's open must come (as from a client) */
    if (get_enum(e, CN_STRIP_ANNOTATIONS, 2 /* both */, &i) < 0)
        return -1;
    l->strip_annotations = cfg__strip_by_tag[i];
    return 0;
}

static int build_connector(ent_t *e)
{
    cfg_t          *cfg = e->ld->cfg;
    cfg_connector_t cn = {0};

    if (connector_fill(e, &cn) < 0) {
        connector_fini(&cn);
        return -1;
    }
    cfg->connectors = base_realloc(cfg->connectors, (cfg->n_connectors + 1) * sizeof(cn));
    cfg->connectors[cfg->n_connectors++] = cn;
    return 0;
}

static void ssl_profile_fini(cfg_ssl_profile_t *p)
{
    BASE_FREE(p->name);
    BASE_FREE(p->cert_file);
    BASE_FREE(p->private_key_file);
    BASE_FREE(p->ca_cert_file);
    BASE_FREE(p->password);
    BASE_FREE(p->ciphers);
    BASE_FREE(p->protocols);
    BASE_FREE(p->uid_format);
    BASE_FREE(p->uid_name_mapping_file);
}

/* sslProfile: its strings as written; the files, the password and the cipher and protocol
 * lists are checked by the router when it builds the profile's TLS context (router/tls.c). */
static int ssl_profile_fill(ent_t *e, cfg_ssl_profile_t *p)
{
    char *pw_file = NULL;

    if (check_common(e, S_TYPE, S_NAME, &p->name) < 0)
        return -1;
    if (!p->name)
        return ent_fail(e, "an sslProfile needs a 'name' (listeners name it)");
    if (get_str(e, S_CERT_FILE, NULL, &p->cert_file) < 0 ||
        get_str(e, S_PRIVATE_KEY_FILE, NULL, &p->private_key_file) < 0 ||
        get_str(e, S_CA_CERT_FILE, NULL, &p->ca_cert_file) < 0 ||
        get_str(e, S_PASSWORD, NULL, &p->password) < 0 ||
        get_str(e, S_PASSWORD_FILE, NULL, &pw_file) < 0 ||
        get_str(e, S_CIPHERS, NULL, &p->ciphers) < 0 ||
        get_str(e, S_PROTOCOLS, NULL, &p->protocols) < 0 ||
        get_str(e, S_UID_FORMAT, NULL, &p->uid_format) < 0 ||
        get_str(e, S_UID_NAME_MAPPING_FILE, NULL, &p->uid_name_mapping_file) < 0) {
        free(pw_file);
        return -1;
    }
    /* qdrouterd 1.19: a password wins over the deprecated passwordFile */
    if (pw_file && !p->password) {
        size_t n = strlen(pw_file) + sizeof("file:");
        p->password = base_malloc(n);
        snprintf(p->password, n, "file:%s", pw_file);
    }
    free(pw_file);
    if (!p->cert_file && p->private_key_file)
        return attr_fail(e, S_PRIVATE_KEY_FILE, "attribute '%s' without a certFile",
                         attr_name(e, S_PRIVATE_KEY_FILE));
    return 0;
}

static int build_ssl_profile(ent_t *e)
{
    cfg_t            *cfg = e->ld->cfg;
    cfg_ssl_profile_t p = {0};

    if (ssl_profile_fill(e, &p) < 0) {
        ssl_profile_fini(&p);
        return -1;
    }
    cfg->ssl_profiles = base_realloc(cfg->ssl_profiles, (cfg->n_ssl_profiles + 1) * sizeof(p));
    cfg->ssl_profiles[cfg->n_ssl_profiles++] = p;
    return 0;
}

const cfg_ssl_profile_t *cfg_ssl_profile_find(const cfg_t *cfg, const char *name)
{
    for (size_t i = 0; name && i < cfg->n_ssl_profiles; i++)
        if (strcmp(cfg->ssl_profiles[i].name, name) == 0)
            return &cfg->ssl_profiles[i];
    return NULL;
}

void cfg_ssl_profile_fini(cfg_ssl_profile_t *p)
{
    ssl_profile_fini(p);
}

static char *dup_or_null(const char *s)
{
    return s ? base_strdup(s) : NULL;
}

void cfg_ssl_profile_copy(cfg_ssl_profile_t *dst, const cfg_ssl_profile_t *src)
{
    dst->name = dup_or_null(src->name);
    dst->cert_file = dup_or_null(src->cert_file);
    dst->private_key_file = dup_or_null(src->private_key_file);
    dst->ca_cert_file = dup_or_null(src->ca_cert_file);
    dst->password = dup_or_null(src->password);
    dst->ciphers = dup_or_null(src->ciphers);
    dst->protocols = dup_or_null(src->protocols);
    dst->uid_format = dup_or_null(src->uid_format);
    dst->uid_name_mapping_file = dup_or_null(src->uid_name_mapping_file);
}

static void auth_plugin_fini(cfg_auth_plugin_t *p)
{
    BASE_FREE(p->name);
    BASE_FREE(p->host);
    BASE_FREE(p->port);
    BASE_FREE(p->realm);
    BASE_FREE(p->ssl_profile);
}

/* authServicePlugin: host and port, else the deprecated authService "host:port" (as
 * qdrouterd 1.19 chooses: a non-empty host wins).  qdrouterd quietly authenticates nobody
 * through a plugin with neither; Junction refuses it. */
static int auth_plugin_fill(ent_t *e, cfg_auth_plugin_t *p)
{
    char *svc = NULL;

    if (check_common(e, AP_TYPE, AP_NAME, &p->name) < 0)
        return -1;
    if (!p->name)
        return ent_fail(e, "an authServicePlugin needs a 'name' (listeners name it in "
                           "saslPlugin)");
    if (get_str(e, AP_HOST, "", &p->host) < 0 || get_str(e, AP_PORT, "amqp", &p->port) < 0 ||
        get_str(e, AP_REALM, NULL, &p->realm) < 0 ||
        get_str(e, AP_SSL_PROFILE, NULL, &p->ssl_profile) < 0 ||
        get_str(e, AP_AUTH_SERVICE, NULL, &svc) < 0)
        return -1;
    if (p->ssl_profile && !*p->ssl_profile)
        BASE_FREE(p->ssl_profile);
    int slot = AP_PORT;
    if (!*p->host && svc && *svc) {
        /* "host:port", "[v6]:port" or "host" (port amqp), as Proton's address parser reads
         * it */
        char *colon = strrchr(svc, ':');
        char *h = svc;
        if (colon && (svc[0] != '[' || colon > strchr(svc, ']'))) {
            *colon = '\0';
            BASE_FREE(p->port);
            p->port = base_strdup(colon + 1);
        }
        size_t hl = strlen(h);
        if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {
            h[hl - 1] = '\0';
            h++;
        }
        BASE_FREE(p->host);
        p->host = base_strdup(h);
        slot = AP_AUTH_SERVICE;
    }
    free(svc);
    if (!*p->host)
        return ent_fail(e, "authServicePlugin '%s': attribute 'host': the authentication "
                           "service's host is missing (give host and port)",
                        p->name);
    p->port_number = cfg_port_number(p->port);
    if (p->port_number <= 0)
        return expect(e, slot, "a port number from 1 to 65535 or a service name");
    return 0;
}

static int build_auth_plugin(ent_t *e)
{
    cfg_t            *cfg = e->ld->cfg;
    cfg_auth_plugin_t p = {0};

    if (auth_plugin_fill(e, &p) < 0) {
        auth_plugin_fini(&p);
        return -1;
    }
    cfg->auth_plugins = base_realloc(cfg->auth_plugins, (cfg->n_auth_plugins + 1) * sizeof(p));
    cfg->auth_plugins[cfg->n_auth_plugins++] = p;
    return 0;
}

const cfg_auth_plugin_t *cfg_auth_plugin_find(const cfg_t *cfg, const char *name)
{
    for (size_t i = 0; name && i < cfg->n_auth_plugins; i++)
        if (strcmp(cfg->auth_plugins[i].name, name) == 0)
            return &cfg->auth_plugins[i];
    return NULL;
}

static void address_fini(cfg_address_t *a)
{
    BASE_FREE(a->name);
    BASE_FREE(a->prefix);
    BASE_FREE(a->pattern);
}

static int address_fill(ent_t *e, cfg_address_t *ad)
{
    load_t   *ld = e->ld;
    long long x;
    int       i;

    if (check_common(e, A_TYPE, A_NAME, &ad->name) < 0)
        return -1;
    if (e->vals[A_PREFIX] && e->vals[A_PATTERN])
        return ent_fail(e, "attributes 'prefix' and 'pattern': expected one of them, got both");
    if (!e->vals[A_PREFIX] && !e->vals[A_PATTERN])
        return ent_fail(e, "attributes 'prefix' and 'pattern': expected one of them, got neither");
    int    slot = e->vals[A_PREFIX] ? A_PREFIX : A_PATTERN;
    char **text = slot == A_PREFIX ? &ad->prefix : &ad->pattern;
    if (get_str(e, slot, NULL, text) < 0)
        return -1;
    char *norm = base_pattern_normalize(*text, slot == A_PREFIX);
    if (!norm)
        return expect(e, slot, "%s of 1 to %d tokens separated by '.' or '/'",
                      slot == A_PREFIX ? "a prefix" : "a pattern", BASE_PATTERN_MAX_TOKENS);
    int rc = base_pattern_add(ld->patterns, norm, (void *)(uintptr_t)(e->index + 1));
    if (rc == -EEXIST) {
        uintptr_t other = (uintptr_t)base_pattern_get(ld->patterns, norm);
        char      shown[CFG_SHOW_BYTES * 4 + 8];
        show_text(shown, sizeof(shown), norm, CFG_SHOW_BYTES, '"');
        free(norm);
        return attr_fail(e, slot, "attribute '%s': entity %d configures the same pattern (%s) "
                                  "already",
                         attr_name(e, slot), (int)other - 1, shown);
    }
    free(norm);
    BASE_BUG_ON(rc != 0);

    if (get_enum(e, A_DISTRIBUTION, CFG_DIST_BALANCED, &i) < 0)
        return -1;
    ad->distribution = (cfg_distribution_t)i;
    /* qdrouterd's phasing: phases given are used; else a waypoint is ingress 0, egress 1 */
    if (get_bool(e, A_WAYPOINT, false, &ad->waypoint) < 0)
        return -1;
    if (get_int(e, A_INGRESS_PHASE, 0, 9, -1, &x) < 0)
        return -1;
    ad->ingress_phase = (int)x;
    if (get_int(e, A_EGRESS_PHASE, 0, 9, -1, &x) < 0)
        return -1;
    ad->egress_phase = (int)x;
    if (ad->ingress_phase < 0 && ad->egress_phase < 0) {
        ad->ingress_phase = 0;
        ad->egress_phase = ad->waypoint ? 1 : 0;
    } else {
        if (ad->ingress_phase < 0)
            ad->ingress_phase = 0;
        if (ad->egress_phase < 0)
            ad->egress_phase = 0;
    }
    if (get_int(e, A_PRIORITY, 0, 9, -1, &x) < 0)
        return -1;
    ad->priority = (int)x;
    if (get_bool(e, A_ENABLE_FALLBACK, false, &ad->fallback) < 0)
        return -1;
    /* qdrouterd 1.19 refuses the same (agent_config_address.c) */
    if (ad->fallback && (ad->waypoint || ad->ingress_phase > 0 || ad->egress_phase > 0))
        return ent_fail(e, "attribute 'enableFallback': cannot be used with waypoint or a "
                           "non-zero ingressPhase or egressPhase");
    return 0;
}

static void link_route_fini(cfg_link_route_t *r)
{
    BASE_FREE(r->name);
    BASE_FREE(r->prefix);
    BASE_FREE(r->pattern);
    BASE_FREE(r->direction);
    BASE_FREE(r->connection);
    BASE_FREE(r->container_id);
    BASE_FREE(r->add_prefix);
    BASE_FREE(r->del_prefix);
}

/* The checks qdrouterd's linkRoute CREATE makes (core/linkroute.c has its words for
 * management), with the load's messages. */
static int link_route_fill(ent_t *e, cfg_link_route_t *r)
{
    int i;

    if (check_common(e, LR_TYPE, LR_NAME, &r->name) < 0)
        return -1;
    if (e->vals[LR_PREFIX] && e->vals[LR_PATTERN])
        return ent_fail(e, "attributes 'prefix' and 'pattern': expected one of them, got both");
    if (!e->vals[LR_PREFIX] && !e->vals[LR_PATTERN])
        return ent_fail(e, "attributes 'prefix' and 'pattern': expected one of them, got neither");
    int    slot = e->vals[LR_PREFIX] ? LR_PREFIX : LR_PATTERN;
    char **text = slot == LR_PREFIX ? &r->prefix : &r->pattern;
    if (get_str(e, slot, NULL, text) < 0)
        return -1;
    char *norm = base_pattern_normalize(*text, slot == LR_PREFIX);
    if (!norm)
        return expect(e, slot, "%s of 1 to %d tokens separated by '.' or '/'",
                      slot == LR_PREFIX ? "a prefix" : "a pattern", BASE_PATTERN_MAX_TOKENS);
    free(norm);
    if (!e->vals[LR_DIRECTION])
        return ent_fail(e, "attribute 'direction': required (in: client senders, out: client "
                           "receivers)");
    if (get_enum(e, LR_DIRECTION, 0, &i) < 0)
        return -1;
    r->direction = base_strdup(i == 0 ? "in" : "out");
    if (get_enum(e, LR_DISTRIBUTION, 0, &i) < 0)
        return -1;
    if (e->vals[LR_CONNECTION] && e->vals[LR_CONTAINER_ID])
        return ent_fail(e, "attributes 'connection' and 'containerId': expected at most one of "
                           "them, got both");
    if (get_str(e, LR_CONNECTION, NULL, &r->connection) < 0 ||
        get_str(e, LR_CONTAINER_ID, NULL, &r->container_id) < 0 ||
        get_str(e, LR_ADD_EXTERNAL_PREFIX, NULL, &r->add_prefix) < 0 ||
        get_str(e, LR_DEL_EXTERNAL_PREFIX, NULL, &r->del_prefix) < 0)
        return -1;
    return 0;
}

static int build_link_route(ent_t *e)
{
    cfg_t           *cfg = e->ld->cfg;
    cfg_link_route_t r = {0};

    if (link_route_fill(e, &r) < 0) {
        link_route_fini(&r);
        return -1;
    }
    cfg->link_routes = base_realloc(cfg->link_routes, (cfg->n_link_routes + 1) * sizeof(r));
    cfg->link_routes[cfg->n_link_routes++] = r;
    return 0;
}

static int build_address(ent_t *e)
{
    cfg_t        *cfg = e->ld->cfg;
    cfg_address_t a = {0};

    if (address_fill(e, &a) < 0) {
        address_fini(&a);
        return -1;
    }
    cfg->addresses = base_realloc(cfg->addresses, (cfg->n_addresses + 1) * sizeof(a));
    cfg->addresses[cfg->n_addresses++] = a;
    return 0;
}

void cfg_autolink_fini(cfg_autolink_t *a)
{
    BASE_FREE(a->name);
    BASE_FREE(a->address);
    BASE_FREE(a->container_id);
    BASE_FREE(a->connection);
    BASE_FREE(a->external_address);
}

static int autolink_fill(ent_t *e, cfg_autolink_t *al)
{
    long long x;
    int       i;

    if (check_common(e, AL_TYPE, AL_NAME, &al->name) < 0)
        return -1;
    if (!e->vals[AL_ADDRESS])
        return ent_fail(e, "attribute 'address': required");
    if (get_str(e, AL_ADDRESS, NULL, &al->address) < 0)
        return -1;
    if (!al->address[0])
        return expect(e, AL_ADDRESS, "an address");
    if (!e->vals[AL_DIRECTION])
        return ent_fail(e, "attribute 'direction': required (in or out)");
    if (get_enum(e, AL_DIRECTION, 0, &i) < 0)
        return -1;
    al->dir = i == 0 ? CFG_AUTOLINK_IN : CFG_AUTOLINK_OUT;
    if (get_bool(e, AL_FALLBACK, false, &al->fallback) < 0)
        return -1;
    /* qdrouterd: phase 0 for outgoing links and fallback ones, 1 for other incoming ones */
    if (get_int(e, AL_PHASE, 0, 9, al->dir == CFG_AUTOLINK_OUT || al->fallback ? 0 : 1, &x) < 0)
        return -1;
    al->phase = (int)x;
    if (get_str(e, AL_CONTAINER_ID, NULL, &al->container_id) < 0 ||
        get_str(e, AL_CONNECTION, NULL, &al->connection) < 0 ||
        get_str(e, AL_EXTERNAL_ADDRESS, NULL, &al->external_address) < 0)
        return -1;
    if (!al->container_id && !al->connection)
        return ent_fail(e, "attributes 'containerId' and 'connection': expected at least one "
                           "of them, got neither");
    return 0;
}

static int build_autolink(ent_t *e)
{
    cfg_t         *cfg = e->ld->cfg;
    cfg_autolink_t a = {0};

    if (autolink_fill(e, &a) < 0) {
        cfg_autolink_fini(&a);
        return -1;
    }
    cfg->autolinks = base_realloc(cfg->autolinks, (cfg->n_autolinks + 1) * sizeof(a));
    cfg->autolinks[cfg->n_autolinks++] = a;
    return 0;
}

int cfg_management_default_socket(char *buf, size_t len)
{
    static const char tail[] = "/junction/junctiond.sock";
    const char       *dir = "/run";
    if (geteuid() != 0) {
        dir = getenv("XDG_RUNTIME_DIR");
        if (!dir || dir[0] != '/')
            return -ENOENT;
    }
    size_t n = strlen(dir) + sizeof(tail) - 1;
    if (n > CFG_SOCKET_PATH_MAX || n >= len)
        return -ENAMETOOLONG;
    snprintf(buf, len, "%s%s", dir, tail);
    return 0;
}

static int build_management(ent_t *e)
{
    cfg_management_t *m = &e->ld->cfg->management;
    long long         x;

    if (e->ld->management_at >= 0)
        return ent_fail(e, "a second management entity (entity %d is the management entity "
                           "already)",
                        e->ld->management_at);
    e->ld->management_at = e->index;
    if (check_common(e, M_TYPE, M_NAME, NULL) < 0)
        return -1;
    if (get_str(e, M_SOCKET, NULL, &m->socket) < 0)
        return -1;
    if (m->socket) {
        if (!*m->socket)
            return expect(e, M_SOCKET, "a Unix socket path");
        if (strlen(m->socket) > CFG_SOCKET_PATH_MAX)
            return expect(e, M_SOCKET, "a Unix socket path of at most %d bytes",
                          CFG_SOCKET_PATH_MAX);
    } else {
        char path[CFG_SOCKET_PATH_MAX + 1];
        int  rc = cfg_management_default_socket(path, sizeof(path));
        if (rc == -ENOENT)
            return ent_fail(e, "attribute 'socket': required when junctiond does not run as "
                               "root and XDG_RUNTIME_DIR is not set");
        if (rc < 0)
            return ent_fail(e, "attribute 'socket': the default path under XDG_RUNTIME_DIR "
                               "is longer than %d bytes; give a shorter one",
                            CFG_SOCKET_PATH_MAX);
        m->socket = base_strdup(path);
    }
    if (get_int(e, M_MAX_CLIENTS, 1, 1024, 16, &x) < 0)
        return -1;
    m->max_clients = (uint32_t)x;
    m->enabled = true;
    return 0;
}

static int build_policy(ent_t *e)
{
    cfg_policy_t *p = &e->ld->cfg->policy;
    long long     x;
    char         *s = NULL;

    if (e->ld->policy_at >= 0)
        return ent_fail(e, "a second policy entity (entity %d is the policy already)",
                        e->ld->policy_at);
    e->ld->policy_at = e->index;
    if (check_common(e, P_TYPE, P_NAME, NULL) < 0)
        return -1;
    if (get_bool(e, P_ENABLE_VHOST_POLICY, false, &p->enable_vhost_policy) < 0)
        return -1;
    free(p->policy_dir);
    p->policy_dir = NULL;
    if (get_str(e, P_POLICY_DIR, NULL, &s) < 0)
        return -1;
    if (s && *s)
        p->policy_dir = s;
    else
        free(s);
    if (get_bool(e, P_ENABLE_VHOST_NAME_PATTERNS, false, &p->enable_vhost_name_patterns) < 0)
        return -1;
    free(p->default_vhost);
    p->default_vhost = NULL;
    if (get_str(e, P_DEFAULT_VHOST, "$default", &p->default_vhost) < 0)
        return -1;
    if (get_int(e, P_MAX_CONNECTIONS, 0, INT32_MAX, 65535, &x) < 0)
        return -1;
    p->max_connections = (uint32_t)x;
    if (get_int(e, P_MAX_MESSAGE_SIZE, 0, INT64_MAX, 0, &x) < 0)
        return -1;
    p->max_message_size = (uint64_t)x;
    return 0;
}

/* -- vhosts (config/vhost.c reads them) -- */

/* Whether `name` is a hostname or an alias of a vhost other than skip; *owner gets it. */
static bool vhost_name_taken(const cfg_t *cfg, const char *name, size_t skip, const char **owner)
{
    for (size_t i = 0; i < cfg->n_vhosts; i++) {
        const cfg_vhost_t *v = &cfg->vhosts[i];
        if (i == skip)
            continue;
        bool hit = strcmp(v->hostname, name) == 0;
        for (size_t j = 0; j < v->n_aliases && !hit; j++)
            hit = strcmp(v->aliases[j], name) == 0;
        if (hit) {
            *owner = v->hostname;
            return true;
        }
    }
    return false;
}

/* A vhost entity: read, then added (a second one of the same hostname replaces the first, as
 * qdrouterd updates it); aliases may not name another vhost or its aliases. */
static int build_vhost(ent_t *e, const cJSON *attrs)
{
    cfg_t      *cfg = e->ld->cfg;
    cfg_vhost_t v;
    char        msg[768];
    const char *owner;

    if (cfg_vhost_parse(attrs, &v, msg, sizeof(msg)) < 0)
        return ent_fail(e, "%s", msg);
    size_t at = cfg->n_vhosts;
    for (size_t i = 0; i < cfg->n_vhosts; i++)
        if (strcmp(cfg->vhosts[i].hostname, v.hostname) == 0)
            at = i;
    int rc = 0;
    if (vhost_name_taken(cfg, v.hostname, at, &owner) && strcmp(owner, v.hostname) != 0)
        rc = ent_fail(e, "attribute 'hostname': '%s' is an alias of vhost '%s' already",
                      v.hostname, owner);
    for (size_t j = 0; rc == 0 && j < v.n_aliases; j++)
        if (vhost_name_taken(cfg, v.aliases[j], at, &owner))
            rc = ent_fail(e, "attribute 'aliases': '%s' names vhost '%s' already", v.aliases[j],
                          owner);
    if (rc < 0) {
        cfg_vhost_fini(&v);
        return -1;
    }
    if (at < cfg->n_vhosts) {
        cfg_vhost_fini(&cfg->vhosts[at]);
        cfg->vhosts[at] = v;
        return 0;
    }
    cfg->vhosts = base_realloc(cfg->vhosts, (cfg->n_vhosts + 1) * sizeof(cfg_vhost_t));
    cfg->vhosts[cfg->n_vhosts++] = v;
    return 0;
}

static void log_fini(cfg_log_t *g)
{
    BASE_FREE(g->module);
    BASE_FREE(g->enable);
    BASE_FREE(g->output_file);
}

static int log_fill(ent_t *e, cfg_log_t *g)
{
    load_t *ld = e->ld;

    if (check_common(e, G_TYPE, G_NAME, NULL) < 0)
        return -1;
    if (!e->vals[G_MODULE])
        return ent_fail(e, "attribute 'module': required, but not given");
    if (get_str(e, G_MODULE, NULL, &g->module) < 0)
        return -1;
    int m = base_log_module_find(g->module);
    if (m < 0) {
        char   list[512];
        size_t o = 0;
        for (int k = 0; k < BASE_LOG_N_MODULES && o < sizeof(list); k++)
            o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", k ? ", " : "",
                                  base_log_module_name((base_log_module_t)k));
        return expect(e, G_MODULE, "one of %s", list);
    }
    if (ld->log_at[m])
        return ent_fail(e, "attribute 'module': entity %d configures module %s already",
                        ld->log_at[m] - 1, g->module);
    ld->log_at[m] = e->index + 1;
    g->module_id = m;

    g->enable_mask = 0xff;
    if (get_str(e, G_ENABLE, NULL, &g->enable) < 0)
        return -1;
    if (g->enable && base_log_parse_enable(g->enable, &g->enable_mask) < 0)
        return expect(e, G_ENABLE,
                      "a list of levels (trace, debug, info, notice, warning, error, critical, "
                      "or the start of one; `+` after one means \"and above\"), \"none\" or "
                      "\"default\"");
    g->include_timestamp_set = e->vals[G_INCLUDE_TIMESTAMP] != NULL;
    g->include_source_set = e->vals[G_INCLUDE_SOURCE] != NULL;
    if (get_bool(e, G_INCLUDE_TIMESTAMP, true, &g->include_timestamp) < 0 ||
        get_bool(e, G_INCLUDE_SOURCE, false, &g->include_source) < 0 ||
        get_str(e, G_OUTPUT_FILE, NULL, &g->output_file) < 0)
        return -1;
    if (g->output_file && *g->output_file == '\0')
        return expect(e, G_OUTPUT_FILE, "\"stderr\", \"stdout\", \"syslog\" or a file path");
    return 0;
}

static int build_log(ent_t *e)
{
    cfg_t    *cfg = e->ld->cfg;
    cfg_log_t g = {0};

    if (log_fill(e, &g) < 0) {
        log_fini(&g);
        return -1;
    }
    cfg->logs = base_realloc(cfg->logs, (cfg->n_logs + 1) * sizeof(g));
    cfg->logs[cfg->n_logs++] = g;
    return 0;
}

/* -- the file -- */

/* qdrouterd 0.x's fixedAddress as the address 0.8 made of it: fanout multiple is multicast;
 * fanout single is closest with bias closest, balanced with bias spread. */
static int build_fixed_address(ent_t *e)
{
    static const char *const dist[] = {"multicast", "closest", "balanced"};
    long long                phase;
    int                      fanout, bias;
    char                     shown[CFG_SHOW_BYTES * 4 + 8] = "";

    if (check_type_attr(e, F_TYPE) < 0)
        return -1;
    if (!e->vals[F_PREFIX])
        return ent_fail(e, "attribute 'prefix': required, but not given");
    if (get_int(e, F_PHASE, -1, 9, -1, &phase) < 0 || get_enum(e, F_FANOUT, 0, &fanout) < 0 ||
        get_enum(e, F_BIAS, 0, &bias) < 0)
        return -1;
    /* a phase made it a waypoint's address (0.6), or made 0.8 ignore it */
    if (phase != -1)
        return unsupported(e, F_PHASE, "phase (address phases)");
    /* 0.8 skipped the prefix "/" (0.x's default for every address) with a warning */
    const cJSON *pv = e->vals[F_PREFIX];
    if (cJSON_IsString(pv) && strcmp(pv->valuestring, "/") == 0) {
        char *name = NULL;
        if (get_str(e, F_NAME, NULL, &name) < 0)
            return -1;
        free(name);
        warn(e, NULL, e->line,
             "the 'fixedAddress' entity is deprecated, and one with prefix \"/\" configures "
             "nothing (qdrouterd 0.8 ignored it too): remove it");
        return 0;
    }
    const char *d = fanout == 0 ? dist[0] : bias == 0 ? dist[1] : dist[2];
    cJSON      *dn = cJSON_CreateString(d);
    cJSON_AddItemToArray(e->ld->made, dn);

    ent_t a = {.ld = e->ld, .index = e->index, .type = e->type, .defs = cfg__address_attrs,
               .n_defs = A_N, .line = e->line};
    a.vals[A_NAME] = e->vals[F_NAME];
    a.spelled[A_NAME] = e->spelled[F_NAME];
    a.vals[A_PREFIX] = e->vals[F_PREFIX];
    a.spelled[A_PREFIX] = e->spelled[F_PREFIX];
    a.vals[A_DISTRIBUTION] = dn;
    a.spelled[A_DISTRIBUTION] = "fanout";
    if (cJSON_IsString(e->vals[F_PREFIX]))
        show_text(shown, sizeof(shown), e->vals[F_PREFIX]->valuestring, CFG_SHOW_BYTES, '"');
    warn(e, NULL, e->line,
         "the 'fixedAddress' entity is deprecated, use an 'address' with prefix %s and "
         "distribution \"%s\" instead",
         shown, d);
    return build_address(&a);
}

/* Check an entity's shape and classify its type: fills e (type in shown[CFG_SHOW_BYTES * 4 +
 * 8], line), *kind and *attrs; returns -1 with the message for a malformed pair. */
static int entity_head(load_t *ld, int index, const cJSON *item, ent_t *e, char *shown,
                       type_kind_t *kind, const cJSON **attrs)
{
    char got[CFG_SHOW_BYTES * 4 + 16];

    *e = (ent_t){.ld = ld, .index = index, .line = node_line(ld, item)};
    if (!cJSON_IsArray(item) || cJSON_GetArraySize(item) != 2)
        return fail(ld, "entity %d: expected a [type, {attributes}] pair, got %s", index,
                    cJSON_IsArray(item) ? "a list that is not a pair"
                                        : show_value(item, got, sizeof(got)));
    const cJSON *t = item->child;
    *attrs = t->next;
    if (!cJSON_IsString(t) || !t->valuestring)
        return fail(ld, "entity %d: expected the entity type as a string, got %s", index,
                    show_value(t, got, sizeof(got)));
    char *canon = NULL;
    *kind = cfg__type_resolve(t->valuestring, &canon);
    show_text(shown, CFG_SHOW_BYTES * 4 + 8, canon, CFG_SHOW_BYTES, 0);
    free(canon);
    e->type = shown;
    if (*kind == TK_UNKNOWN)
        return line_fail(ld, NULL, e->line, "entity %d: unknown entity type '%s'", index, shown);
    if (*kind != TK_UNSUPPORTED && *kind != TK_OPERATIONAL && !cJSON_IsObject(*attrs))
        return ent_fail(e, "expected the attributes as a map, got %s",
                        show_value(*attrs, got, sizeof(got)));
    return 0;
}

/* Before the entities are built: a qdrouterd 0.x `container` entity (at most one) is read,
 * and its attributes kept for the router (which may come before or after it, or not at
 * all).  A malformed entity is left for the main pass to report in its turn. */
static int read_container(load_t *ld, const cJSON *root)
{
    char         shown[CFG_SHOW_BYTES * 4 + 8];
    int          index = 0;
    const cJSON *item;

    cJSON_ArrayForEach(item, root)
    {
        ent_t        e;
        type_kind_t  kind = TK_UNKNOWN;
        const cJSON *attrs = NULL;
        char         err0 = ld->err && ld->errlen ? ld->err[0] : 0;
        int          i = index++;

        if (entity_head(ld, i, item, &e, shown, &kind, &attrs) < 0) {
            if (ld->err && ld->errlen)
                ld->err[0] = err0; /* reported by the main pass */
            continue;
        }
        if (kind != TK_CONTAINER)
            continue;
        if (ld->container_at >= 0)
            return ent_fail(&e, "a second container entity (entity %d is the container already)",
                            ld->container_at);
        ld->container_at = i;
        e.defs = cfg__container_attrs;
        e.n_defs = C_N;
        if (collect(&e, attrs) < 0 || check_common(&e, C_TYPE, C_NAME, NULL) < 0)
            return -1;
        memcpy(ld->container_vals, e.vals, sizeof(ld->container_vals));
        memcpy(ld->container_spelled, e.spelled, sizeof(ld->container_spelled));
        warn(&e, NULL, e.line,
             "the 'container' entity is deprecated, use 'router' instead (its workerThreads, "
             "debugDump (debugDumpFile), saslConfigPath (saslConfigDir) and saslConfigName are "
             "the router's now; containerName is not used)");
    }
    return 0;
}

static int load_entity(load_t *ld, int index, const cJSON *item)
{
    char         shown[CFG_SHOW_BYTES * 4 + 8];
    ent_t        e;
    type_kind_t  kind = TK_UNKNOWN;
    const cJSON *attrs = NULL;

    if (entity_head(ld, index, item, &e, shown, &kind, &attrs) < 0)
        return -1;
    const char *written = item->child->valuestring;

    switch (kind) {
    case TK_UNKNOWN:
        BASE_BUG_ON(true); /* entity_head() refused it */
        return -1;
    case TK_UNSUPPORTED: {
        /* the entity's attribute table (names.c) already maps its deprecated names; it is
         * refused until Junction implements it */
        const cfg__type_table_t *t = cfg__unsupported_table(shown);
        if (t && t->successor)
            return ent_fail(&e,
                            "Junction does not support the '%s' entity yet (a qdrouterd 0.x "
                            "entity: 1.0 replaced it with '%s')",
                            shown, t->successor);
        return ent_fail(&e, "Junction does not support the '%s' entity yet", shown);
    }
    case TK_OPERATIONAL:
        return ent_fail(&e, "'%s' is not a configuration entity (it exists only at run time)",
                        shown);
    case TK_CONTAINER:
        return 0; /* read by read_container(); the router has its attributes */
    case TK_VHOST:
        return build_vhost(&e, attrs);
    case TK_FIXED_ADDRESS:
        e.defs = cfg__fixed_address_attrs;
        e.n_defs = F_N;
        break;
    case TK_ROUTER:
        e.defs = cfg__router_attrs;
        e.n_defs = R_N;
        break;
    case TK_LISTENER:
        e.defs = cfg__listener_attrs;
        e.n_defs = L_N;
        break;
    case TK_ADDRESS:
        e.defs = cfg__address_attrs;
        e.n_defs = A_N;
        break;
    case TK_LOG:
        e.defs = cfg__log_attrs;
        e.n_defs = G_N;
        break;
    case TK_MANAGEMENT:
        e.defs = cfg__management_attrs;
        e.n_defs = M_N;
        break;
    case TK_POLICY:
        e.defs = cfg__policy_attrs;
        e.n_defs = P_N;
        break;
    case TK_SSL_PROFILE:
        e.defs = cfg__ssl_profile_attrs;
        e.n_defs = S_N;
        break;
    case TK_AUTH_PLUGIN:
        e.defs = cfg__auth_plugin_attrs;
        e.n_defs = AP_N;
        break;
    case TK_AUTOLINK:
        e.defs = cfg__autolink_attrs;
        e.n_defs = AL_N;
        break;
    case TK_LINK_ROUTE:
        e.defs = cfg__link_route_attrs;
        e.n_defs = LR_N;
        break;
    case TK_CONNECTOR:
        e.defs = cfg__connector_attrs;
        e.n_defs = CN_N;
        break;
    }
    if (collect(&e, attrs) < 0)
        return -1;
    /* qdrouterd camelCases type names too: `fixed-address` was 0.x's spelling */
    if (!strchr(written, '.') && strcmp(written, shown) != 0 && kind != TK_FIXED_ADDRESS)
        warn(&e, NULL, e.line, "entity type '%s' is an old spelling, use '%s' instead", written,
             shown);

    switch (kind) {
    case TK_ROUTER:
        return build_router(&e);
    case TK_LISTENER:
        return build_listener(&e);
    case TK_ADDRESS:
        return build_address(&e);
    case TK_LOG:
        return build_log(&e);
    case TK_MANAGEMENT:
        return build_management(&e);
    case TK_POLICY:
        return build_policy(&e);
    case TK_FIXED_ADDRESS:
        return build_fixed_address(&e);
    case TK_SSL_PROFILE:
        return build_ssl_profile(&e);
    case TK_AUTH_PLUGIN:
        return build_auth_plugin(&e);
    case TK_AUTOLINK:
        return build_autolink(&e);
    case TK_LINK_ROUTE:
        return build_link_route(&e);
    case TK_CONNECTOR:
        return build_connector(&e);
    default:
        BASE_BUG_ON(true);
    }
    return -1;
}

/* Blank out (with spaces, so line and column numbers stay true) each line whose first
 * non-blank character is `#`, like qdrouterd does before handing the text to json.loads. */
static void strip_comments(char *text)
{
    char *line = text;

    while (*line) {
        char *p = line;
        while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\f' || *p == '\v')
            p++;
        char *eol = strchr(p, '\n');
        if (!eol)
            eol = p + strlen(p);
        if (*p == '#')
            memset(line, ' ', (size_t)(eol - line));
        line = *eol ? eol + 1 : eol;
    }
}

static int parse_json(load_t *ld, const char *text, cJSON **out)
{
    const char *end = NULL;
    cJSON      *root = cJSON_ParseWithOpts(text, &end, true);

    if (root) {
        *out = root;
        return 0;
    }
    if (!end || end < text)
        end = text;
    int         line = 1;
    const char *bol = text;
    for (const char *q = text; q < end && *q; q++) {
        if (*q == '\n') {
            line++;
            bol = q + 1;
        }
    }
    char   near[64];
    size_t n = strcspn(end, "\n");
    char   frag[32];
    if (n >= sizeof(frag))
        n = sizeof(frag) - 1;
    memcpy(frag, end, n);
    frag[n] = '\0';
    show_text(near, sizeof(near), frag, sizeof(frag), '\'');
    return fail(ld, "line %d, column %d: invalid JSON near %s", line, (int)(end - bol) + 1,
                *end ? near : "the end of the file");
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* policyDir: each *.json file in it (in name order) is qdrouterd's JSON form; its vhost
 * entities are added, everything else in it is ignored (as in qdrouterd).  Messages name the
 * file. */
static int load_policy_dir(load_t *ld)
{
    const char *dir = ld->cfg->policy.policy_dir;
    DIR        *d = opendir(dir);
    char      **names = NULL;
    size_t      n = 0;
    int         rc = 0;

    if (!d)
        return fail(ld, "policy policyDir '%s': cannot open: %s", dir, strerror(errno));
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (len > 5 && strcmp(de->d_name + len - 5, ".json") == 0) {
            names = base_realloc(names, (n + 1) * sizeof(char *));
            names[n++] = base_strdup(de->d_name);
        }
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof(char *), name_cmp);
    for (size_t i = 0; i < n && rc == 0; i++) {
        char path[CFG_PATH_MAX + 256];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        load_t sub = *ld;
        sub.name = path;
        sub.lines = NULL;
        char  *text = NULL;
        FILE  *f = fopen(path, "rb");
        if (!f) {
            rc = fail(&sub, "cannot open: %s", strerror(errno));
            break;
        }
        size_t cap = 4096, len = 0;
        text = base_malloc(cap);
        for (;;) {
            if (len + 1 >= cap) {
                if (cap > CFG_MAX_FILE_BYTES) {
                    rc = fail(&sub, "larger than %u MiB: not a policy file",
                              CFG_MAX_FILE_BYTES >> 20);
                    break;
                }
                cap *= 2;
                text = base_realloc(text, cap);
            }
            size_t got = fread(text + len, 1, cap - len - 1, f);
            len += got;
            if (got == 0)
                break;
        }
        fclose(f);
        text[len] = '\0';
        cJSON *root = NULL;
        if (rc == 0) {
            strip_comments(text);
            rc = parse_json(&sub, text, &root);
        }
        if (rc == 0 && !cJSON_IsArray(root))
            rc = fail(&sub, "expected a JSON list of [type, {attributes}] pairs");
        int          index = 0;
        const cJSON *item;
        const cJSON *list = rc == 0 ? root : NULL;
        cJSON_ArrayForEach(item, list)
        {
            char         shown[CFG_SHOW_BYTES * 4 + 8];
            ent_t        e;
            type_kind_t  kind;
            const cJSON *attrs;
            int          at = index++;
            char         err0 = sub.err && sub.errlen ? sub.err[0] : 0;
            if (entity_head(&sub, at, item, &e, shown, &kind, &attrs) < 0) {
                if (sub.err && sub.errlen)
                    sub.err[0] = err0; /* not a vhost: ignored, as in qdrouterd */
                continue;
            }
            if (kind == TK_VHOST && (rc = build_vhost(&e, attrs)) < 0)
                break;
        }
        cJSON_Delete(root);
        free(text);
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return rc;
}

int cfg_load_string(const char *text, const char *name, cfg_t **out, char *err, size_t errlen)
{
    load_t       ld = {.name = name ? name : "config", .err = err, .errlen = errlen,
                       .router_at = -1, .management_at = -1, .policy_at = -1,
                       .container_at = -1};
    cfg__lines_t lines;
    cJSON       *root = NULL;
    int          rc = -1;

    if (err && errlen)
        err[0] = '\0';
    if (!text)
        return fail(&ld, "no configuration text");
    /* qdrouterd refuses a file of zero bytes (one of blanks and comments is a config with
     * nothing in it) */
    if (!*text)
        return fail(&ld, "an empty file: not a configuration (qdrouterd refuses it too)");

    char *buf = base_strdup(text);
    if (strncmp(buf, "\xef\xbb\xbf", 3) == 0) /* a UTF-8 byte-order mark: blank it */
        memset(buf, ' ', 3);
    /* the dialect is chosen by the text, not the file name (qdrouterd takes a name ending in
     * .json for JSON): JSON starts with `[`, and a `.conf` line never starts with `[` or `{` */
    bool json = cfg__is_json(buf);
    if (json)
        strip_comments(buf);
    cfg__lines_init(&lines);
    ld.made = cJSON_CreateArray();
    ld.cfg = base_calloc(1, sizeof(*ld.cfg));
    ld.cfg->path = base_strdup(ld.name);
    ld.cfg->router.default_distribution = CFG_DIST_BALANCED; /* a file may have no router */
    ld.cfg->router.shutdown_grace_seconds = CFG_SHUTDOWN_GRACE_DEFAULT;
    ld.cfg->router.max_stats = CFG_MAX_STATS_DEFAULT;
    ld.cfg->policy.max_connections = 65535; /* qdrouterd's defaults without a policy entity */
    ld.patterns = base_pattern_new();
    base_map_init(&ld.names);

    if (json) {
        if (parse_json(&ld, buf, &root) < 0)
            goto out;
    } else {
        char msg[512];
        int  line = 0;
        if (cfg__conf_parse(buf, &root, &lines, &line, msg, sizeof(msg)) < 0) {
            line_fail(&ld, NULL, line, "%s", msg);
            goto out;
        }
        ld.lines = &lines;
    }
    if (!cJSON_IsArray(root)) {
        char got[CFG_SHOW_BYTES * 4 + 16];
        fail(&ld, "expected a JSON list of [type, {attributes}] pairs, got %s",
             show_value(root, got, sizeof(got)));
        goto out;
    }
    if (read_container(&ld, root) < 0)
        goto out;
    int          index = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, root)
    {
        if (load_entity(&ld, index++, item) < 0)
            goto out;
    }
    if (ld.router_at < 0 && ld.container_at >= 0) {
        /* a container without a router: the router is made of the container's attributes */
        ent_t e = {.ld = &ld, .index = ld.container_at, .type = "router",
                   .defs = cfg__router_attrs, .n_defs = R_N,
                   .line = node_line(&ld, cJSON_GetArrayItem(root, ld.container_at))};
        if (build_router(&e) < 0)
            goto out;
    }
    if (!ld.cfg->router.id)
        ld.cfg->router.id = random_router_id();
    if (!ld.cfg->router.mode)
        ld.cfg->router.mode = base_strdup("standalone");
    if (!ld.cfg->router.hello_interval) /* not interior: the protocol's defaults */
        ld.cfg->router.hello_interval = 1, ld.cfg->router.hello_max_age = 3,
        ld.cfg->router.ra_interval = 30, ld.cfg->router.ra_interval_flux = 4,
        ld.cfg->router.remote_ls_max_age = 60;
    /* a listener without its own maxMessageSize has the policy's (in any order in the file) */
    for (size_t i = 0; i < ld.cfg->n_listeners; i++)
        if (!ld.cfg->listeners[i].max_message_size_set)
            ld.cfg->listeners[i].max_message_size = ld.cfg->policy.max_message_size;
    if (!ld.cfg->policy.default_vhost)
        ld.cfg->policy.default_vhost = base_strdup("$default");
    if (ld.cfg->policy.policy_dir && load_policy_dir(&ld) < 0)
        goto out;
    for (size_t i = 0; i < ld.cfg->n_listeners; i++) {
        const cfg_listener_t *l = &ld.cfg->listeners[i];
        if (l->ssl_profile && !cfg_ssl_profile_find(ld.cfg, l->ssl_profile)) {
            fail(&ld, "listener '%s' (port %s): sslProfile '%s': no sslProfile entity has that name",
                 l->name ? l->name : "", l->port, l->ssl_profile);
            goto out;
        }
        if (l->sasl_plugin && !cfg_auth_plugin_find(ld.cfg, l->sasl_plugin)) {
            fail(&ld, "listener '%s' (port %s): saslPlugin '%s': no authServicePlugin entity has "
                      "that name",
                 l->name ? l->name : "", l->port, l->sasl_plugin);
            goto out;
        }
        /* EXTERNAL makes the TLS session ask for a client certificate and check it against
           the profile's CAs (qdrouterd: every connection fails without them) */
        const cfg_ssl_profile_t *sp = l->ssl_profile ? cfg_ssl_profile_find(ld.cfg, l->ssl_profile)
                                                     : NULL;
        if (sp && !sp->ca_cert_file && l->sasl_mechanisms &&
            strstr(l->sasl_mechanisms, "EXTERNAL")) {
            fail(&ld, "listener '%s' (port %s): saslMechanisms EXTERNAL needs client certificates "
                      "checked against CAs: sslProfile '%s' has no caCertFile",
                 l->name ? l->name : "", l->port, l->ssl_profile);
            goto out;
        }
    }
    for (size_t i = 0; i < ld.cfg->n_connectors; i++) {
        const cfg_listener_t *l = &ld.cfg->connectors[i].conn;
        if (l->ssl_profile && !cfg_ssl_profile_find(ld.cfg, l->ssl_profile)) {
            fail(&ld, "connector '%s' (%s:%s): sslProfile '%s': no sslProfile entity has that name",
                 l->name ? l->name : "", l->host, l->port, l->ssl_profile);
            goto out;
        }
    }
    for (size_t i = 0; i < ld.cfg->n_auth_plugins; i++) {
        const cfg_auth_plugin_t *p = &ld.cfg->auth_plugins[i];
        if (p->ssl_profile && !cfg_ssl_profile_find(ld.cfg, p->ssl_profile)) {
            fail(&ld, "authServicePlugin '%s': sslProfile '%s': no sslProfile entity has that "
                      "name",
                 p->name, p->ssl_profile);
            goto out;
        }
    }
    rc = 0;

out:
    cJSON_Delete(root);
    cJSON_Delete(ld.made);
    cfg__lines_fini(&lines);
    base_map_fini(&ld.names);
    base_pattern_free(ld.patterns);
    free(buf);
    if (rc < 0) {
        cfg_free(ld.cfg);
        return -1;
    }
    *out = ld.cfg;
    return 0;
}

int cfg_load_file(const char *path, cfg_t **out, char *err, size_t errlen)
{
    load_t ld = {.name = path ? path : "config", .err = err, .errlen = errlen};
    FILE  *f = path ? fopen(path, "rb") : NULL;

    if (!f)
        return fail(&ld, "cannot open: %s", path ? strerror(errno) : "no file name");
    size_t cap = 4096;
    size_t len = 0;
    char  *buf = base_malloc(cap);
    for (;;) {
        if (len + 1 >= cap) {
            if (cap > CFG_MAX_FILE_BYTES) {
                fclose(f);
                free(buf);
                return fail(&ld, "larger than %u MiB: not a configuration file",
                            CFG_MAX_FILE_BYTES >> 20);
            }
            cap *= 2;
            buf = base_realloc(buf, cap);
        }
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
        if (n == 0)
            break;
    }
    bool bad = ferror(f);
    int  saved = errno;
    fclose(f);
    if (bad) {
        free(buf);
        return fail(&ld, "cannot read: %s", strerror(saved));
    }
    buf[len] = '\0';
    const char *nul = memchr(buf, '\0', len);
    if (nul) {
        int line = 1;
        for (const char *q = buf; q < nul; q++)
            line += *q == '\n';
        free(buf);
        return fail(&ld, "line %d: a NUL byte: not a text file", line);
    }
    int rc = cfg_load_string(buf, path, out, err, errlen);
    free(buf);
    /* Start-up: the log entities are not applied yet, so these go where qdrouterd's go at this
     * point, to stderr (its default, info and above, shows warnings). */
    for (size_t i = 0; rc == 0 && i < (*out)->n_warnings; i++)
        base_log_write(BASE_LOG_MOD_AGENT, BASE_LOG_WARNING, "%s", (*out)->warnings[i]);
    return rc;
}

void cfg_free(cfg_t *cfg)
{
    if (!cfg)
        return;
    free(cfg->path);
    free(cfg->router.id);
    free(cfg->router.mode);
    free(cfg->router.sasl_config_dir);
    free(cfg->router.sasl_config_name);
    for (size_t i = 0; i < cfg->n_listeners; i++)
        listener_fini(&cfg->listeners[i]);
    free(cfg->listeners);
    for (size_t i = 0; i < cfg->n_connectors; i++)
        connector_fini(&cfg->connectors[i]);
    free(cfg->connectors);
    for (size_t i = 0; i < cfg->n_addresses; i++)
        address_fini(&cfg->addresses[i]);
    for (size_t i = 0; i < cfg->n_autolinks; i++)
        cfg_autolink_fini(&cfg->autolinks[i]);
    free(cfg->autolinks);
    free(cfg->addresses);
    for (size_t i = 0; i < cfg->n_link_routes; i++)
        link_route_fini(&cfg->link_routes[i]);
    free(cfg->link_routes);
    for (size_t i = 0; i < cfg->n_logs; i++)
        log_fini(&cfg->logs[i]);
    free(cfg->logs);
    for (size_t i = 0; i < cfg->n_ssl_profiles; i++)
        ssl_profile_fini(&cfg->ssl_profiles[i]);
    free(cfg->ssl_profiles);
    for (size_t i = 0; i < cfg->n_auth_plugins; i++)
        auth_plugin_fini(&cfg->auth_plugins[i]);
    free(cfg->auth_plugins);
    free(cfg->management.socket);
    free(cfg->policy.default_vhost);
    free(cfg->policy.policy_dir);
    for (size_t i = 0; i < cfg->n_vhosts; i++)
        cfg_vhost_fini(&cfg->vhosts[i]);
    free(cfg->vhosts);
    for (size_t i = 0; i < cfg->n_warnings; i++)
        free(cfg->warnings[i]);
    free(cfg->warnings);
    free(cfg);
}

/* -- small helpers -- */

int cfg_port_number(const char *port)
{
    if (!port || !*port)
        return -1;
    if (strcmp(port, "amqp") == 0)
        return 5672;
    if (strcmp(port, "amqps") == 0)
        return 5671;
    if (isdigit((unsigned char)port[0])) {
        long v = 0;
        for (const char *p = port; *p; p++) {
            if (!isdigit((unsigned char)*p))
                return -1;
            v = v * 10 + (*p - '0');
            if (v > 65535)
                return -1;
        }
        return (int)v;
    }
    /* only what a service name can look like goes to the services database */
    size_t n = strspn(port, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-");
    if (port[n] || n > 64)
        return -1;
    /* the reentrant form: the connection manager resolves ports at run time too */
    struct servent se, *res = NULL;
    char           buf[1024];
    if (getservbyname_r(port, "tcp", &se, buf, sizeof(buf), &res) != 0 || !res)
        return -1;
    return ntohs((uint16_t)res->s_port);
}
