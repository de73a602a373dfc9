/* core/base/pattern.c: the address-pattern table (see pattern.h for the syntax and the
 * precedence rules, which are qdrouterd's).
 *
 * A token tree: each node stands for one pattern token and has three kinds of children,
 * the literal tokens (an array sorted by token bytes, searched by bisection), one `*` child
 * and one `#` child.  A node where a pattern ends holds that pattern's value.  The lookup is a
 * depth-first search that visits, at each node, the exact child, then `*`, then `#`, and stops
 * at the first pattern that matches the whole address: that visiting order is the precedence.
 * Recursion depth is bounded by the depth of the tree (BASE_PATTERN_MAX_TOKENS), never by
 * the length of the address, because a `#` consumes address tokens in a loop.
 *
 * Thread suffixes: none; a table belongs to one thread and nothing here is thread-safe except
 * base_pattern_normalize().
 */
#include "core/base/pattern.h"

#include "core/base/base.h"

#include <errno.h>
#include <string.h>

typedef enum pnode_kind {
    PNODE_ROOT = 0,
    PNODE_TOKEN,
    PNODE_STAR,
    PNODE_GLOB,
} pnode_kind_t;

/* One token of a pattern.  Owner: its parent (the table owns the root). */
typedef struct pnode pnode_t;
struct pnode {
    pnode_t     *parent;   /* NULL for the root */
    pnode_t    **kids;     /* literal-token children, sorted by (token bytes, length) */
    size_t       n_kids;   /* entries used in kids */
    size_t       cap_kids; /* entries allocated in kids */
    pnode_t     *star;     /* the `*` child, or NULL */
    pnode_t     *glob;     /* the `#` child, or NULL */
    char        *pattern;  /* normalized pattern that ends here (owned), or NULL */
    void        *value;    /* that pattern's value (borrowed); NULL when pattern is NULL */
    pnode_kind_t kind;     /* what this node matches */
    size_t       tlen;     /* PNODE_TOKEN: length of token */
    char         token[];  /* PNODE_TOKEN: the token's bytes (not NUL-terminated) */
};

struct base_pattern {
    pnode_t *root;  /* never NULL; holds no pattern (a pattern has at least one token) */
    size_t   count; /* patterns in the table */
};

/* -- tokens -- */

static bool is_sep(char c)
{
    return c == '.' || c == '/';
}

/* A walk over the tokens of s[0..end), with qdrouterd's rules: leading separators are skipped,
 * a separator in the middle ends a token (so empty tokens exist), and a separator at the very
 * end ends the last token without starting an empty one. */
typedef struct tok_iter {
    const char *pos;  /* start of the current token; == end when done */
    const char *tend; /* end of the current token (a separator or end) */
    const char *end;  /* end of the whole string */
} tok_iter_t;

static const char *find_sep(const char *p, const char *end)
{
    while (p < end && !is_sep(*p))
        p++;
    return p;
}

static void tok_init(tok_iter_t *it, const char *s, const char *end)
{
    while (s < end && is_sep(*s))
        s++;
    it->pos = s;
    it->end = end;
    it->tend = find_sep(s, end);
}

static bool tok_done(const tok_iter_t *it)
{
    return it->pos == it->end;
}

static void tok_next(tok_iter_t *it)
{
    if (it->tend == it->end) {
        it->pos = it->end;
    } else {
        it->pos = it->tend + 1;
        it->tend = find_sep(it->pos, it->end);
    }
}

static size_t tok_len(const tok_iter_t *it)
{
    return (size_t)(it->tend - it->pos);
}

static bool tok_is(const char *p, size_t n, char c)
{
    return n == 1 && p[0] == c;
}

/* -- normalization -- */

/* The normalized pattern being written: tokens are appended with emit(). */
typedef struct norm_out {
    char       *buf;   /* output, sized by the caller so it cannot overflow */
    size_t      len;   /* bytes written */
    size_t      n_tok; /* tokens written */
    const char *seps;  /* next place to look for an input separator */
    const char *end;   /* end of the input */
} norm_out_t;

/* Output token i (i >= 1) is preceded by the i-th separator of the input, or `/` when the
 * input has no more (a prefix's implied `/#`): separators stay where they were. */
static void emit(norm_out_t *o, const char *tok, size_t tlen)
{
    if (o->n_tok > 0) {
        const char *q = find_sep(o->seps, o->end);
        char        sep = '/';
        if (q < o->end) {
            sep = *q;
            o->seps = q + 1;
        }
        o->buf[o->len++] = sep;
    }
    memcpy(o->buf + o->len, tok, tlen);
    o->len += tlen;
    o->n_tok++;
}

char *base_pattern_normalize(const char *text, bool is_prefix)
{
    const char *s = text;
    const char *end = text + strlen(text);

    /* qdrouterd (agent_config_address.c) strips all leading and trailing separators. */
    while (s < end && is_sep(*s))
        s++;
    while (end > s && is_sep(end[-1]))
        end--;
    if (s == end)
        return NULL;

    /* Each run of wildcards becomes its `*`s followed by at most one `#`: that is where
     * qdrouterd's rewrites `#.#` -> `#` and `#.*` -> `*.#` end up.  The output is never
     * longer than the input plus the prefix's `/#`. */
    norm_out_t o = {.buf = base_malloc((size_t)(end - s) + 3), .seps = s, .end = end};
    bool       glob_pending = false;
    tok_iter_t it;

    tok_init(&it, s, end);
    for (; !tok_done(&it); tok_next(&it)) {
        size_t tl = tok_len(&it);
        if (tok_is(it.pos, tl, '#')) {
            glob_pending = true;
        } else if (tok_is(it.pos, tl, '*')) {
            emit(&o, "*", 1);
        } else {
            if (glob_pending)
                emit(&o, "#", 1);
            glob_pending = false;
            emit(&o, it.pos, tl);
        }
    }
    if (glob_pending || is_prefix) /* a prefix P is P/#; a trailing `#` of P merges with it */
        emit(&o, "#", 1);
    o.buf[o.len] = '\0';
    if (o.n_tok > BASE_PATTERN_MAX_TOKENS) {
        BASE_FREE(o.buf);
        return NULL;
    }
    return o.buf;
}

/* -- nodes -- */

static pnode_t *pnode_new(pnode_t *parent, pnode_kind_t kind, const char *tok, size_t tlen)
{
    pnode_t *n = base_calloc(1, sizeof(*n) + (kind == PNODE_TOKEN ? tlen : 0));
    n->parent = parent;
    n->kind = kind;
    if (kind == PNODE_TOKEN) {
        n->tlen = tlen;
        memcpy(n->token, tok, tlen);
    }
    return n;
}

static void pnode_free(pnode_t *n)
{
    if (!n)
        return;
    for (size_t i = 0; i < n->n_kids; i++)
        pnode_free(n->kids[i]);
    free(n->kids);
    pnode_free(n->star);
    pnode_free(n->glob);
    free(n->pattern);
    free(n);
}

static int token_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t m = alen < blen ? alen : blen;
    int    c = m ? memcmp(a, b, m) : 0;
    if (c)
        return c;
    return (alen > blen) - (alen < blen);
}

/* Index of the literal child `tok`, or of where it would go; *found says which. */
static size_t kid_search(const pnode_t *n, const char *tok, size_t tlen, bool *found)
{
    size_t lo = 0;
    size_t hi = n->n_kids;
    while (lo < hi) {
        size_t         mid = lo + (hi - lo) / 2;
        const pnode_t *k = n->kids[mid];
        int            c = token_cmp(tok, tlen, k->token, k->tlen);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    *found = false;
    return lo;
}

static pnode_t *kid_find(const pnode_t *n, const char *tok, size_t tlen)
{
    bool   found;
    size_t i = kid_search(n, tok, tlen, &found);
    return found ? n->kids[i] : NULL;
}

/* The child of `n` for token tok[0..tlen), created when `create`; NULL when absent. */
static pnode_t *child_step(pnode_t *n, const char *tok, size_t tlen, bool create)
{
    if (tok_is(tok, tlen, '*')) {
        if (!n->star && create)
            n->star = pnode_new(n, PNODE_STAR, NULL, 0);
        return n->star;
    }
    if (tok_is(tok, tlen, '#')) {
        if (!n->glob && create)
            n->glob = pnode_new(n, PNODE_GLOB, NULL, 0);
        return n->glob;
    }
    bool   found;
    size_t i = kid_search(n, tok, tlen, &found);
    if (found)
        return n->kids[i];
    if (!create)
        return NULL;
    if (n->n_kids == n->cap_kids) {
        n->cap_kids = n->cap_kids ? n->cap_kids * 2 : 4;
        n->kids = base_realloc(n->kids, n->cap_kids * sizeof(*n->kids));
    }
    memmove(&n->kids[i + 1], &n->kids[i], (n->n_kids - i) * sizeof(*n->kids));
    n->kids[i] = pnode_new(n, PNODE_TOKEN, tok, tlen);
    n->n_kids++;
    return n->kids[i];
}

/* The node where the normalized pattern `norm` ends; created when `create`, else NULL when
 * the table has no such path. */
static pnode_t *path_walk(pnode_t *root, const char *norm, bool create)
{
    tok_iter_t it;
    pnode_t   *n = root;

    tok_init(&it, norm, norm + strlen(norm));
    while (n && !tok_done(&it)) {
        n = child_step(n, it.pos, tok_len(&it), create);
        tok_next(&it);
    }
    return n;
}

static bool pnode_is_empty(const pnode_t *n)
{
    return !n->pattern && n->n_kids == 0 && !n->star && !n->glob;
}

/* Free `n` and then its ancestors as long as they hold nothing (never the root). */
static void prune(pnode_t *n)
{
    while (n->parent && pnode_is_empty(n)) {
        pnode_t *p = n->parent;
        if (n->kind == PNODE_STAR) {
            p->star = NULL;
        } else if (n->kind == PNODE_GLOB) {
            p->glob = NULL;
        } else {
            bool   found;
            size_t i = kid_search(p, n->token, n->tlen, &found);
            BASE_BUG_ON(!found || p->kids[i] != n);
            memmove(&p->kids[i], &p->kids[i + 1], (p->n_kids - i - 1) * sizeof(*p->kids));
            p->n_kids--;
        }
        pnode_free(n);
        n = p;
    }
}

/* -- table -- */

base_pattern_t *base_pattern_new(void)
{
    base_pattern_t *t = base_calloc(1, sizeof(*t));
    t->root = pnode_new(NULL, PNODE_ROOT, NULL, 0);
    return t;
}

void base_pattern_free(base_pattern_t *t)
{
    if (!t)
        return;
    pnode_free(t->root);
    free(t);
}

static int add_normalized(base_pattern_t *t, char *norm, void *value)
{
    if (!norm || !value) {
        free(norm);
        return -EINVAL;
    }
    pnode_t *n = path_walk(t->root, norm, true);
    if (n->pattern) {
        free(norm);
        return -EEXIST;
    }
    n->pattern = norm;
    n->value = value;
    t->count++;
    return 0;
}

int base_pattern_add(base_pattern_t *t, const char *pattern, void *value)
{
    return add_normalized(t, base_pattern_normalize(pattern, false), value);
}

int base_pattern_add_prefix(base_pattern_t *t, const char *prefix, void *value)
{
    return add_normalized(t, base_pattern_normalize(prefix, true), value);
}

static pnode_t *find_exact(const base_pattern_t *t, const char *pattern)
{
    char *norm = base_pattern_normalize(pattern, false);
    if (!norm)
        return NULL;
    pnode_t *n = path_walk(t->root, norm, false);
    free(norm);
    return n && n->pattern ? n : NULL;
}

void *base_pattern_get(const base_pattern_t *t, const char *pattern)
{
    pnode_t *n = find_exact(t, pattern);
    return n ? n->value : NULL;
}

void *base_pattern_remove(base_pattern_t *t, const char *pattern)
{
    pnode_t *n = find_exact(t, pattern);
    if (!n)
        return NULL;
    void *value = n->value;
    BASE_FREE(n->pattern);
    n->value = NULL;
    t->count--;
    prune(n);
    return value;
}

size_t base_pattern_count(const base_pattern_t *t)
{
    return t->count;
}

/* -- lookup: the visiting order below is the precedence (see pattern.h) -- */

static void *visit(const pnode_t *n, tok_iter_t it);

/* Try the subtrees of `n` against the tokens left in `it`: exact, then `*`, then `#`. */
static void *visit_kids(const pnode_t *n, const tok_iter_t *it)
{
    void *v;

    if (!tok_done(it)) {
        if (n->n_kids) {
            const pnode_t *k = kid_find(n, it->pos, tok_len(it));
            if (k) {
                tok_iter_t rest = *it;
                tok_next(&rest);
                if ((v = visit(k, rest)))
                    return v;
            }
        }
        if (n->star && (v = visit(n->star, *it)))
            return v;
    }
    /* a `#` may match nothing, so it is tried even with no token left */
    if (n->glob && (v = visit(n->glob, *it)))
        return v;
    return NULL;
}

/* `it` holds the tokens left once `n` has been reached (TOKEN, ROOT) or the tokens `n` itself
 * is to consume (STAR: one; GLOB: any number). */
static void *visit(const pnode_t *n, tok_iter_t it)
{
    void *v;

    switch (n->kind) {
    case PNODE_STAR:
        if (tok_done(&it))
            return NULL;
        tok_next(&it);
        /* having consumed its token, a `*` node is like a token node */
        /* fall through */
    case PNODE_TOKEN:
        if (tok_done(&it) && n->pattern)
            return n->value;
        return visit_kids(n, &it);
    case PNODE_GLOB:
        /* give the rest of the address to what follows the `#`, shortest swallow first */
        for (; !tok_done(&it); tok_next(&it))
            if ((v = visit_kids(n, &it)))
                return v;
        return n->pattern ? n->value : NULL;
    case PNODE_ROOT:
        return visit_kids(n, &it);
    }
    return NULL;
}

void *base_pattern_match(const base_pattern_t *t, const char *addr, size_t len)
{
    tok_iter_t it;

    tok_init(&it, addr, addr + len);
    return visit(t->root, it);
}
