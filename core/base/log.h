/* core/base/log.h: qdrouterd-shaped logging for every thread.
 *
 * Lines look like qdrouterd's:  `2026-11-30 08:20:00.123456 +0000 SERVER (info) Listening on ...`.
 * Each module has a mask of enabled levels, set from the `log` config entities; a module
 * without its own entity follows DEFAULT.  base_log() is thread-safe: it formats into a stack
 * buffer and writes the line with one write(2), so lines from different threads never mix.
 * Configuration (base_log_set_*) happens at start-up, before the other threads run; after
 * that base_log_update_module() changes a module's levels at run time (management UPDATE).
 *
 * Every line written is also kept in a ring of the last BASE_LOG_RING entries (module,
 * level, text, source file and line, time) for the management GET-LOG operation, and counted
 * per module and level (the `logStats` entity).  Both are thread-safe.
 */
#ifndef JUNCTION_BASE_LOG_H
#define JUNCTION_BASE_LOG_H

#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Entries the ring of recent log lines keeps (qdrouterd's LIST_MAX). */
#define BASE_LOG_RING 1000
/* Bytes of lines the output queue holds for the writer (a few thousand lines). */
#define BASE_LOG_QUEUE_BYTES (1024 * 1024)

// clang-format off
typedef enum base_log_level {
    BASE_LOG_TRACE = 0,
    BASE_LOG_DEBUG,
    BASE_LOG_INFO,
    BASE_LOG_NOTICE,
    BASE_LOG_WARNING,
    BASE_LOG_ERROR,
    BASE_LOG_CRITICAL,
    BASE_LOG_N_LEVELS
} base_log_level_t;

/* qdrouterd's module names, so its `log` entities configure Junction unchanged. */
#define BASE_LOG_MODULES(X)                                                    \
    X(DEFAULT) X(ROUTER) X(ROUTER_CORE) X(ROUTER_HELLO) X(ROUTER_LS)           \
    X(ROUTER_MA) X(MESSAGE) X(SERVER) X(AGENT) X(AUTHSERVICE) X(CONTAINER)     \
    X(ERROR) X(POLICY) X(HTTP) X(CONN_MGR) X(PYTHON) X(PROTOCOL)

typedef enum base_log_module {
#define BASE__MOD_ENUM(m) BASE_LOG_MOD_##m,
    BASE_LOG_MODULES(BASE__MOD_ENUM)
#undef BASE__MOD_ENUM
    BASE_LOG_N_MODULES
} base_log_module_t;
// clang-format on

/* Enabled-level masks, one per module: read with a relaxed load (written at start-up and
 * by base_log_update_module()). */
extern _Atomic uint8_t base_log_masks[BASE_LOG_N_MODULES];

static inline bool base_log_enabled(base_log_module_t mod, base_log_level_t lvl)
{
    return (atomic_load_explicit(&base_log_masks[mod], memory_order_relaxed) >> lvl) & 1u;
}

/* Write one line if the level is enabled for the module; the ring records the caller's
 * source file and line. Thread-safe. */
#define base_log(mod, lvl, ...)                                                                    \
    do {                                                                                           \
        if (base_log_enabled((mod), (lvl)))                                                        \
            base_log_write_at((mod), (lvl), __FILE__, __LINE__, __VA_ARGS__);                      \
    } while (0)

void base_log_write(base_log_module_t mod, base_log_level_t lvl, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void base_log_write_at(base_log_module_t mod, base_log_level_t lvl, const char *file, int line,
                       const char *fmt, ...) __attribute__((format(printf, 5, 6)));
void base_log_vwrite(base_log_module_t mod, base_log_level_t lvl, const char *file, int line,
                     const char *fmt, va_list ap);

/* One entry of the ring of recent lines. */
typedef struct base_log_entry {
    uint8_t     module;    /* base_log_module_t */
    uint8_t     level;     /* base_log_level_t */
    const char *file;      /* source file (static string), or NULL */
    int         line;      /* source line, 0 when unknown */
    double      time;      /* Unix time, seconds */
    char        text[256]; /* the message (truncated), without module and level */
} base_log_entry_t;

/* Copy the most recent entries, oldest first, into out[0 .. max); returns how many were
 * copied.  Thread-safe (takes the ring's mutex for the copy). */
size_t base_log_recent(base_log_entry_t *out, size_t max);

/* Lines written so far for a module at a level (the `logStats` entity).  Thread-safe. */
uint64_t base_log_count(base_log_module_t mod, base_log_level_t lvl);

/* Run time: set a module's `enable` mask as base_log_parse_enable() gives it (0xff = follow
 * DEFAULT); changing DEFAULT changes every module that follows it.  Thread-safe. */
void base_log_update_module(base_log_module_t mod, uint8_t mask);
/* The module's configured mask (0xff when it follows DEFAULT) and its effective mask.
 * Thread-safe. */
uint8_t base_log_module_configured(base_log_module_t mod);
uint8_t base_log_module_mask(base_log_module_t mod);
/* Write a mask as an `enable` string ("info+", "trace,debug,warning+", "none") into buf.
 * Pure. */
void base_log_format_enable(uint8_t mask, char *buf, size_t len);

/* Module by qdrouterd name ("ROUTER_CORE"); returns -1 for an unknown name. */
int base_log_module_find(const char *name);
const char *base_log_module_name(base_log_module_t mod);
const char *base_log_level_name(base_log_level_t lvl);

/* Parse an `enable` string ("info+", "trace,debug,warning+", "none", "default") into a mask,
 * with qdrouterd's grammar: words separated by any of ", ;:", each the prefix of a level name,
 * "none" or "default" ignoring case (the first in the order default, none, trace, debug, info,
 * notice, warning, error, critical: "warn+" is warning and above, "d" is default), a trailing
 * `+` meaning "and above".  An empty value is "none"; "default" anywhere gives *mask = 0xff,
 * "follow DEFAULT".  Returns 0 and sets *mask, or -1 on a word that names nothing (qdrouterd
 * lets some of those through, by accident of its bit arithmetic). Thread-safe. */
int base_log_parse_enable(const char *text, uint8_t *mask);

/* Start-up only: set a module's mask (0xff = follow DEFAULT), its output, and options.
 * `path` NULL or "stderr" means standard error; "stdout"; "syslog" (which turns the module's
 * timestamps off, as qdrouterd does); anything else is a file opened for append, shared with
 * any module that names the same file.  Returns 0, or -errno when the file cannot be opened. */
void base_log_set_mask(base_log_module_t mod, uint8_t mask);
int base_log_set_output(base_log_module_t mod, const char *path);
/* includeTimestamp / includeSource of a module: 1 on, 0 off, -1 unchanged (a module that
 * never sets one follows DEFAULT's, whose own defaults are on and off).  With the source, a
 * line ends with " (file:line)" as qdrouterd's do. */
void base_log_set_format(base_log_module_t mod, int timestamps, int source);
/* What the module does once base_log_finish_config() ran.  Thread-safe (read-only then). */
bool base_log_timestamps(base_log_module_t mod);
bool base_log_source(base_log_module_t mod);
/* Apply DEFAULT's mask, output and format to every module left following it; call after the
 * set_* calls. */
void base_log_finish_config(void);

/* Main thread: start the writer thread (after any fork); from then on no thread that logs
 * writes to the output itself.  Returns 0 or -errno. */
int base_log_start_writer(void);
/* Main thread, at shutdown: let the writer write what is queued and stop, waiting up to
 * timeout_s seconds (an output that never drains is given up on); lines logged afterwards
 * are written by the caller again. */
void base_log_stop_writer(double timeout_s);
/* Reopen the file outputs under their names, for logrotate: lines queued before go to the
 * old file, later ones to the new file, none is lost.  Thread-safe; does not wait. */
void base_log_reopen(void);
/* Lines dropped so far because the output queue was full.  Thread-safe. */
uint64_t base_log_dropped(void);

#endif
