/* core/base/pattern.h: qdrouterd's address patterns - a table of patterns, each with a value,
 * and a lookup that finds the best pattern for an address.
 *
 * Used for the `address` config entities (router.config.address): the core asks, once per new
 * address (not per message), which configured prefix or pattern governs it.
 *
 * Syntax (qdrouterd, src/parse_tree.c):
 *   - a pattern or an address is a list of tokens separated by `.` or `/` (either, mixed; the
 *     two are equivalent: `a.b` and `a/b` are the same pattern);
 *   - leading and trailing separators are ignored (`/a/b/` is `a.b`); a separator in the
 *     middle always ends a token, so `a..b` has three tokens, the middle one empty (qdrouterd
 *     accepts this, so Junction does too);
 *   - in a pattern, a token that is exactly `*` matches exactly one token, a token that is
 *     exactly `#` matches zero or more tokens; `*` or `#` inside a longer token (`a*`) is a
 *     literal character;
 *   - a prefix `P` is the pattern `P/#`: it matches `P` itself and everything below it
 *     (`closest` matches `closest`, `closest/x`, `closest.x.y`, but not `closestx`);
 *   - patterns are normalized the way qdrouterd does it: `#.#` becomes `#` and `#.*` becomes
 *     `*.#` (same set of addresses), so in any run of wildcards the `*`s come first and there
 *     is at most one `#`.  Two patterns that normalize to the same tokens are duplicates.
 *     Separators are kept by position in the normalized text; they do not affect matching.
 *   - a pattern with no token at all (``, `/`, `..`) is invalid; so is one with more than
 *     BASE_PATTERN_MAX_TOKENS tokens.
 *
 * Precedence when several patterns match one address (qdrouterd's parse-tree search order):
 * tokens are compared from the left, and at each position an exact token beats `*`, which
 * beats `#`; a `#` first tries to match as few tokens as possible.  So for `a.b.c`:
 * `a.b.c` > `a.b.*` > `a.b.#` > `a.*.c` > `a.#` > `*.b.c` > `#.c` > `#`; and `a.#.c` beats
 * `a.#` (the `#` first offers the rest of the address to what follows it in the pattern).
 *
 * Addresses are matched as given: strip `amqp:/`, `amqp://host/` and the like first.
 *
 * Cost: a token tree (children kept sorted, binary search), so a lookup follows one path per
 * alternative: the exact token, `*` and `#`.  Only `#` backtracks; with k `#` in one pattern
 * a lookup may cost O(n^k) for an n-token address.  Patterns come from the configuration,
 * so k is small.
 *
 * Threads: a table belongs to one thread (the core thread in the router); nothing here is
 * thread-safe.  Ownership: the table copies pattern strings; values are borrowed, never freed.
 */
#ifndef JUNCTION_BASE_PATTERN_H
#define JUNCTION_BASE_PATTERN_H

#include <stdbool.h>
#include <stddef.h>

/* Most tokens a pattern may have (after normalization); keeps the lookup's recursion bounded. */
#define BASE_PATTERN_MAX_TOKENS 256

typedef struct base_pattern base_pattern_t;

/* A new empty table; aborts on OOM.  Caller owns it (base_pattern_free()). */
base_pattern_t *base_pattern_new(void);
/* Free the table and its copies of the patterns; the values are not touched.  NULL is fine. */
void base_pattern_free(base_pattern_t *t);

/* Add `pattern` with `value` (must not be NULL: NULL means "no match" to the lookups).
 * Returns 0, -EINVAL for an invalid pattern or a NULL value, or -EEXIST when a pattern that
 * normalizes to the same tokens is in the table already (the table is then unchanged). */
int base_pattern_add(base_pattern_t *t, const char *pattern, void *value);
/* Add the prefix `prefix`, i.e. the pattern `prefix/#`; same returns as base_pattern_add(). */
int base_pattern_add_prefix(base_pattern_t *t, const char *prefix, void *value);

/* The value stored for exactly this pattern (after normalization; a prefix P is `P/#`), or
 * NULL.  This is not a match: `a.*` finds the entry added as `a.*` (or with `/`), not `a.b`. */
void *base_pattern_get(const base_pattern_t *t, const char *pattern);
/* Remove exactly this pattern (as for base_pattern_get()); returns its value, or NULL when it
 * was not in the table. */
void *base_pattern_remove(base_pattern_t *t, const char *pattern);

/* The value of the best pattern for the address addr[0..len) (see "Precedence" above), or
 * NULL when no pattern matches.  `addr` need not be NUL-terminated. */
void *base_pattern_match(const base_pattern_t *t, const char *addr, size_t len);

/* Number of patterns in the table. */
size_t base_pattern_count(const base_pattern_t *t);

/* The normalized form of `text` (a prefix when `is_prefix`, which appends `/#`) as a new
 * string the caller frees, or NULL when it is not a valid pattern.  Thread-safe. */
char *base_pattern_normalize(const char *text, bool is_prefix);

#endif
