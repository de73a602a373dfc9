/* config/conf.c: qdrouterd's `.conf` dialect -> the cJSON list its JSON form gives.
 *
 * qdrouterd 1.19 (`Config._parse` in its config.py) rewrites each line of a `.conf` file
 * into a fragment of JSON and hands the result to a JSON parser.  This reader reads the same
 * lines and builds the same list directly, one line at a time, so that both dialects then go
 * through one validation (config.c), and every entity and attribute keeps its line number for
 * the messages.  What each kind of line does (the line is first stripped of blanks at both
 * ends; qdrouterd's file reading also ends a line at `\r\n` and `\r`):
 *
 *   (empty), `# ...`        nothing (also inside a JSON value)
 *   `pattern: a.# x`         `pattern`, `bindingKey` and `hostname` keep `#`: the value is
 *                            the first blank-free word after the colon
 *   `... # comment`          for every other line, text from the first `#` on is dropped
 *   `type {`                 opens an entity (only outside entities)
 *   `key: {`                 opens a map attribute; `openProperties` and `groups` hold JSON:
 *                            their lines are kept as they are up to the line ending in `}`
 *                            that brings qdrouterd's nesting count back (a line ending in
 *                            `"key": {` counts one deeper), and parsed as one JSON map, in
 *                            which a comma before `}` or `]` is dropped as qdrouterd does
 *   `key: value`             a string attribute: the rest of the line (the value must not
 *                            start with `{`); it is JSON string content, so `\n`, `\"`,
 *                            `\u00e9` are escapes, and a bare `"` or a control character is
 *                            an error, as qdrouterd's JSON parser makes it; `,` before `]`
 *                            or `}` is dropped (qdrouterd's spare-comma pass)
 *   `}`                      closes the innermost map attribute, else the entity
 *   anything else            qdrouterd logs "Invalid config file syntax" and passes the line
 *                            on to its JSON parser, which then fails; here it is an error
 *                            naming the line
 *
 * A file with no entity gives an empty list (qdrouterd then runs with its defaults).  The text
 * must be UTF-8, as qdrouterd's Python file reading requires.
 *
 * Threads: any; nothing here touches shared state.  Work is bounded by the text: one pass
 * over it, map attributes nested at most CONF_MAX_DEPTH deep.
 */
#include "config/config_int.h"

#include "core/base/base.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define CONF_MAX_DEPTH 32 /* map attributes inside map attributes: qdrouterd's own go 1 deep */

/* -- line numbers -- */

void cfg__lines_init(cfg__lines_t *l)
{
    base_map_init(&l->map);
}

void cfg__lines_fini(cfg__lines_t *l)
{
    base_map_fini(&l->map);
}

void cfg__lines_set(cfg__lines_t *l, const cJSON *node, int line)
{
    base_map_uput(&l->map, (uint64_t)(uintptr_t)node, (void *)(uintptr_t)line);
}

int cfg__lines_get(const cfg__lines_t *l, const cJSON *node)
{
    if (!l || !node)
        return 0;
    return (int)(uintptr_t)base_map_uget(&l->map, (uint64_t)(uintptr_t)node);
}

/* -- the reader -- */

typedef struct reader {
    cJSON        *root;                       /* the list being built */
    cJSON        *entity;                     /* the open entity's attributes, or NULL */
    const char   *entity_type;                /* its type as written (in root) */
    int           entity_line;                /* the line that opened it */
    cJSON        *maps[CONF_MAX_DEPTH];       /* open map attributes, innermost last */
    int           map_lines[CONF_MAX_DEPTH];  /* the line that opened each */
    int           depth;                      /* open map attributes (qdrouterd's child_level) */
    bool          in_json;                    /* inside openProperties/groups */
    char         *json;                       /* its text so far, from the opening `{` */
    size_t        json_len;                   /* bytes in json */
    size_t        json_cap;                   /* allocated */
    int           json_line;                  /* the line of `key: {` */
    char          json_key[64];               /* the key, for messages */
    cfg__lines_t *lines;                      /* where nodes came from */
    int           line;                       /* the line being read */
    int          *err_line;                   /* out: the line of the error */
    char         *err;                        /* out: the message */
    size_t        errlen;                     /* its size */
} reader_t;

__attribute__((format(printf, 3, 4))) static int rfail(reader_t *r, int line, const char *fmt,
                                                       ...)
{
    va_list ap;
    *r->err_line = line;
    if (r->err && r->errlen) {
        va_start(ap, fmt);
        vsnprintf(r->err, r->errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Python's str.strip() whitespace (ASCII part) */
static bool is_blank(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f' ||
           (c >= 0x1c && c <= 0x1f);
}

/* Python's `[\w-]` on text: letters, digits, `_`, `-`, and (approximately) every non-ASCII
 * character. */
static bool is_word(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-' || c >= 0x80;
}

/* A key at p[0..n): optional `$`s (when dollar), then one or more word characters.  Returns
 * its length, 0 when there is none. */
static size_t key_len(const char *p, size_t n, bool dollar)
{
    size_t i = 0;
    if (dollar)
        while (i < n && p[i] == '$')
            i++;
    size_t w = i;
    while (i < n && is_word((unsigned char)p[i]))
        i++;
    return i > w ? i : 0;
}

static size_t skip_sp_tab(const char *p, size_t i, size_t n)
{
    while (i < n && (p[i] == ' ' || p[i] == '\t'))
        i++;
    return i;
}

/* `KEY[ \t]*:[ \t]*` at the start of p[0..n): returns the offset of what follows, or 0. */
static size_t key_colon(const char *p, size_t n, size_t *klen, bool dollar)
{
    *klen = key_len(p, n, dollar);
    if (!*klen)
        return 0;
    size_t i = skip_sp_tab(p, *klen, n);
    if (i >= n || p[i] != ':')
        return 0;
    return skip_sp_tab(p, i + 1, n);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int hex4(const char *p, size_t i, size_t n)
{
    if (i + 4 > n)
        return -1;
    int v = 0;
    for (size_t k = 0; k < 4; k++) {
        int h = hexval(p[i + k]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

static size_t put_utf8(char *out, size_t o, uint32_t cp)
{
    if (cp < 0x80) {
        out[o++] = (char)cp;
    } else if (cp < 0x800) {
        out[o++] = (char)(0xc0 | (cp >> 6));
        out[o++] = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        out[o++] = (char)(0xe0 | (cp >> 12));
        out[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[o++] = (char)(0x80 | (cp & 0x3f));
    } else {
        out[o++] = (char)(0xf0 | (cp >> 18));
        out[o++] = (char)(0x80 | ((cp >> 12) & 0x3f));
        out[o++] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[o++] = (char)(0x80 | (cp & 0x3f));
    }
    return o;
}

/* qdrouterd's spare-comma pass on one stretch of text: `,` + blanks + `]` or `}` becomes the
 * bracket.  In place; returns the new length. */
static size_t drop_spare_commas(char *p, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == ',') {
            size_t j = i + 1;
            while (j < n && is_blank((unsigned char)p[j]))
                j++;
            if (j < n && (p[j] == ']' || p[j] == '}')) {
                i = j - 1; /* drop the comma and the blanks; the bracket is copied next */
                continue;
            }
        }
        p[o++] = p[i];
    }
    return o;
}

/* A `.conf` value as qdrouterd's JSON parser reads it: the text between the quotes of a JSON
 * string.  Returns a new cJSON string, or NULL with the error set. */
static cJSON *value_node(reader_t *r, const char *v, size_t n)
{
    char *raw = base_malloc(n + 1);
    memcpy(raw, v, n);
    n = drop_spare_commas(raw, n);
    char  *out = base_malloc(n + 1); /* escapes never make text longer */
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)raw[i];
        if (c == '"') {
            free(raw);
            free(out);
            rfail(r, r->line,
                  "a '\"' in a value: qdrouterd's .conf values are not quoted (write the text "
                  "as it is, or \\\" for a quote)");
            return NULL;
        }
        if (c < 0x20) {
            free(raw);
            free(out);
            rfail(r, r->line, "a control character (0x%02x) in a value: write it as \\u%04x",
                  c, c);
            return NULL;
        }
        if (c != '\\') {
            out[o++] = (char)c;
            continue;
        }
        char e = i + 1 < n ? raw[i + 1] : '\0';
        const char *simple = strchr("\"\\/bfnrt", e);
        if (e && simple) {
            static const char to[] = "\"\\/\b\f\n\r\t";
            out[o++] = to[simple - "\"\\/bfnrt"];
            i++;
            continue;
        }
        int cp = e == 'u' ? hex4(raw, i + 2, n) : -1;
        uint32_t u = (uint32_t)cp;
        size_t   used = 6;
        if (cp >= 0xd800 && cp <= 0xdbff) {
            int lo = (i + 7 < n && raw[i + 6] == '\\' && raw[i + 7] == 'u') ? hex4(raw, i + 8, n)
                                                                           : -1;
            if (lo >= 0xdc00 && lo <= 0xdfff) {
                u = 0x10000 + (((uint32_t)cp - 0xd800) << 10) + ((uint32_t)lo - 0xdc00);
                used = 12;
            } else {
                cp = -1;
            }
        } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            cp = -1;
        }
        if (cp <= 0) {
            free(raw);
            free(out);
            rfail(r, r->line,
                  cp == 0 ? "a \\u0000 in a value"
                          : "a '\\' that does not start a JSON escape in a value (qdrouterd's "
                            ".conf values are JSON string text: write \\\\ for a backslash)");
            return NULL;
        }
        o = put_utf8(out, o, u);
        i += used - 1;
    }
    out[o] = '\0';
    free(raw);
    cJSON *node = cJSON_CreateString(out);
    free(out);
    return node;
}

/* The object attributes go into: the innermost open map, else the entity. */
static cJSON *current(reader_t *r)
{
    return r->depth ? r->maps[r->depth - 1] : r->entity;
}

static int add_attr(reader_t *r, const char *key, size_t klen, cJSON *node)
{
    char k[256];
    if (klen >= sizeof(k)) {
        cJSON_Delete(node);
        return rfail(r, r->line, "an attribute name longer than %zu bytes", sizeof(k) - 1);
    }
    memcpy(k, key, klen);
    k[klen] = '\0';
    cJSON_AddItemToObject(current(r), k, node);
    cfg__lines_set(r->lines, node, r->line);
    return 0;
}

static void json_append(reader_t *r, const char *p, size_t n)
{
    if (r->json_len + n + 2 > r->json_cap) {
        r->json_cap = (r->json_len + n + 2) * 2;
        r->json = base_realloc(r->json, r->json_cap);
    }
    memcpy(r->json + r->json_len, p, n);
    r->json_len += n;
    r->json[r->json_len] = '\0';
}

/* A line that ends in `"KEY": {` (qdrouterd's json_map): one level deeper. */
static bool ends_json_map(const char *p, size_t n)
{
    if (!n || p[n - 1] != '{')
        return false;
    size_t i = n - 1;
    while (i > 0 && (p[i - 1] == ' ' || p[i - 1] == '\t'))
        i--;
    if (i == 0 || p[i - 1] != ':')
        return false;
    i--;
    while (i > 0 && (p[i - 1] == ' ' || p[i - 1] == '\t'))
        i--;
    if (i == 0 || p[i - 1] != '"')
        return false;
    i--;
    size_t end = i;
    while (i > 0 && is_word((unsigned char)p[i - 1]))
        i--;
    if (i == end)
        return false;
    while (i > 0 && p[i - 1] == '$')
        i--;
    return i > 0 && p[i - 1] == '"';
}

/* The JSON value is complete: parse it and add it. */
static int json_finish(reader_t *r)
{
    r->json_len = drop_spare_commas(r->json, r->json_len);
    r->json[r->json_len] = '\0';
    const char *end = NULL;
    cJSON      *v = cJSON_ParseWithOpts(r->json, &end, true);
    r->in_json = false;
    if (!v || !cJSON_IsObject(v)) {
        int line = r->json_line;
        for (const char *q = r->json; end && q < end && *q; q++)
            line += *q == '\n';
        cJSON_Delete(v);
        return rfail(r, line, "attribute '%s': invalid JSON in its value", r->json_key);
    }
    /* the map was counted open by `key: {`: it is closed now */
    r->depth--;
    int saved = r->line;
    r->line = r->json_line;
    int rc = add_attr(r, r->json_key, strlen(r->json_key), v);
    r->line = saved;
    return rc;
}

static int json_line(reader_t *r, const char *p, size_t n)
{
    json_append(r, "\n", 1);
    json_append(r, p, n);
    if (ends_json_map(p, n))
        r->depth++;
    if (p[n - 1] == '}') {
        r->depth--;
        if (r->depth == 0) {
            r->depth = 1; /* json_finish closes it */
            return json_finish(r);
        }
    }
    return 0;
}

static int open_entity(reader_t *r, const char *p, size_t klen)
{
    if (r->entity)
        return rfail(r, r->line,
                     "an entity inside entity '%s' (opened on line %d): is a '}' missing?",
                     r->entity_type, r->entity_line);
    char type[256];
    if (klen >= sizeof(type))
        return rfail(r, r->line, "an entity type longer than %zu bytes", sizeof(type) - 1);
    memcpy(type, p, klen);
    type[klen] = '\0';
    cJSON *pair = cJSON_CreateArray();
    cJSON *t = cJSON_CreateString(type);
    cJSON_AddItemToArray(pair, t);
    r->entity = cJSON_CreateObject();
    cJSON_AddItemToArray(pair, r->entity);
    cJSON_AddItemToArray(r->root, pair);
    cfg__lines_set(r->lines, pair, r->line);
    cfg__lines_set(r->lines, r->entity, r->line);
    r->entity_type = t->valuestring;
    r->entity_line = r->line;
    return 0;
}

static int open_map(reader_t *r, const char *p, size_t klen)
{
    if (!r->entity)
        return rfail(r, r->line, "a map attribute outside any entity");
    bool json = (klen == 14 && memcmp(p, "openProperties", 14) == 0) ||
                (klen == 6 && memcmp(p, "groups", 6) == 0);
    if (json) {
        if (r->depth)
            return rfail(r, r->line, "a JSON-valued attribute ('%.*s') inside a map attribute",
                         (int)klen, p);
        r->depth++; /* qdrouterd counts it as an open map */
        r->in_json = true;
        r->json_len = 0;
        json_append(r, "{", 1);
        r->json_line = r->line;
        snprintf(r->json_key, sizeof(r->json_key), "%.*s", (int)klen, p);
        return 0;
    }
    if (r->depth >= CONF_MAX_DEPTH)
        return rfail(r, r->line, "map attributes nested more than %d deep", CONF_MAX_DEPTH);
    cJSON *m = cJSON_CreateObject();
    if (add_attr(r, p, klen, m) < 0)
        return -1;
    r->map_lines[r->depth] = r->line;
    r->maps[r->depth++] = m;
    return 0;
}

static int close_block(reader_t *r)
{
    if (r->depth) {
        r->depth--;
        return 0;
    }
    if (!r->entity)
        return rfail(r, r->line, "a '}' with no entity open");
    r->entity = NULL;
    return 0;
}

/* One line, without its line end. */
static int conf_line(reader_t *r, const char *p, size_t n)
{
    while (n && is_blank((unsigned char)*p)) {
        p++;
        n--;
    }
    while (n && is_blank((unsigned char)p[n - 1]))
        n--;
    if (!n || *p == '#')
        return 0;
    if (r->in_json)
        return json_line(r, p, n);

    size_t klen;
    size_t v = key_colon(p, n, &klen, false);
    if (v && v < n && p[v] != ' ' && p[v] != '\t' && p[v] != '{') {
        /* pattern, bindingKey, hostname: `#` is part of the value, which is one word */
        static const char *const keep_hash[] = {"pattern", "bindingKey", "hostname"};
        for (size_t k = 0; k < BASE_ARRAY_LEN(keep_hash); k++) {
            if (klen == strlen(keep_hash[k]) && memcmp(p, keep_hash[k], klen) == 0) {
                size_t w = v;
                while (w < n && !is_blank((unsigned char)p[w]))
                    w++;
                if (!r->entity)
                    return rfail(r, r->line, "an attribute outside any entity");
                cJSON *node = value_node(r, p + v, w - v);
                return node ? add_attr(r, p, klen, node) : -1;
            }
        }
    }

    const char *hash = memchr(p, '#', n);
    if (hash) {
        n = (size_t)(hash - p);
        while (n && is_blank((unsigned char)p[n - 1]))
            n--;
    }

    if (n == 1 && p[0] == '}')
        return close_block(r);
    /* `type {` */
    klen = key_len(p, n, false);
    if (klen) {
        size_t i = skip_sp_tab(p, klen, n);
        if (i == n - 1 && p[i] == '{')
            return open_entity(r, p, klen);
    }
    /* `key: {` */
    v = key_colon(p, n, &klen, true);
    if (v && v == n - 1 && p[v] == '{')
        return open_map(r, p, klen);
    /* `key: value` */
    v = key_colon(p, n, &klen, false);
    if (v && v < n && p[v] != '{') {
        if (!r->entity)
            return rfail(r, r->line, "an attribute outside any entity");
        cJSON *node = value_node(r, p + v, n - v);
        return node ? add_attr(r, p, klen, node) : -1;
    }
    char shown[64];
    size_t m = n < 40 ? n : 40;
    size_t o = 0;
    for (size_t i = 0; i < m; i++)
        shown[o++] = (unsigned char)p[i] < 0x20 ? '?' : p[i];
    shown[o] = '\0';
    return rfail(r, r->line,
                 "'%s%s' is not a qdrouterd .conf line (`type {`, `key: value`, `key: {` or "
                 "`}`; qdrouterd logs \"Invalid config file syntax\" for it)",
                 shown, n > m ? "..." : "");
}

/* The length of a valid UTF-8 sequence at p (at most n bytes), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    if (p[0] < 0x80)
        return 1;
    size_t   len = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 ? 2 : 0;
    uint32_t min = len == 4 ? 0x10000 : len == 3 ? 0x800 : 0x80;
    if (!len || len > n || p[0] > 0xf4)
        return 0;
    uint32_t cp = p[0] & (0x3f >> (len - 1));
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

bool cfg__is_json(const char *text)
{
    const char *p = text;
    for (;;) {
        while (is_blank((unsigned char)*p))
            p++;
        if (*p != '#')
            return *p == '[' || *p == '{';
        p += strcspn(p, "\n\r");
    }
}

int cfg__conf_parse(const char *text, cJSON **out, cfg__lines_t *lines, int *err_line, char *err,
                    size_t errlen)
{
    reader_t r = {.root = cJSON_CreateArray(), .lines = lines, .err_line = err_line,
                  .err = err, .errlen = errlen};
    int      rc = 0;

    *err_line = 0;
    /* qdrouterd reads text: invalid UTF-8 anywhere stops it */
    int                  line = 1;
    const unsigned char *q = (const unsigned char *)text;
    const unsigned char *end = q + strlen(text);
    while (q < end) {
        size_t len = utf8_len(q, (size_t)(end - q));
        if (!len) {
            rc = rfail(&r, line, "not UTF-8 text (qdrouterd reads a .conf file as UTF-8)");
            goto out;
        }
        line += *q == '\n' || (*q == '\r' && q[1] != '\n');
        q += len;
    }

    const char *p = text;
    r.line = 1;
    while (*p) {
        size_t n = strcspn(p, "\r\n");
        if (conf_line(&r, p, n) < 0) {
            rc = -1;
            goto out;
        }
        p += n;
        if (*p == '\r')
            p += p[1] == '\n' ? 2 : 1;
        else if (*p == '\n')
            p++;
        r.line++;
    }
    if (r.in_json)
        rc = rfail(&r, r.json_line,
                   "attribute '%s': its JSON value does not end before the end of the file",
                   r.json_key);
    else if (r.depth)
        rc = rfail(&r, r.map_lines[r.depth - 1],
                   "a map attribute that is not closed before the end of the file: a '}' is "
                   "missing");
    else if (r.entity)
        rc = rfail(&r, r.entity_line,
                   "entity '%s' is not closed before the end of the file: a '}' is missing",
                   r.entity_type);

out:
    free(r.json);
    if (rc < 0) {
        cJSON_Delete(r.root);
        return -1;
    }
    *out = r.root;
    return 0;
}
