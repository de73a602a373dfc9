/* core/base/log.c: qdrouterd-shaped log lines (see log.h). Thread-safe writes, ring and
 * counts; configuration happens on the main thread at start-up, except
 * base_log_update_module() (any thread, under cfg_lock).  Locks: ring_lock and cfg_lock are
 * never held together. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MASK_FOLLOW_DEFAULT 0xffu
#define MASK_INFO_PLUS      0x7cu /* info, notice, warning, error, critical */

_Atomic uint8_t base_log_masks[BASE_LOG_N_MODULES] = {
    [BASE_LOG_MOD_DEFAULT] = MASK_INFO_PLUS,
};
static uint8_t configured[BASE_LOG_N_MODULES]; /* mask as configured, FOLLOW_DEFAULT if unset */
static bool configured_init;
static int out_fd[BASE_LOG_N_MODULES];       /* 0 = stderr */
/* includeTimestamp / includeSource as configured (-1: follow DEFAULT), and what each module
 * does (resolved by base_log_finish_config(); read-only once the other threads run) */
static int8_t fmt_timestamps[BASE_LOG_N_MODULES];
static int8_t fmt_source[BASE_LOG_N_MODULES];
static bool   fmt_init;
static bool   no_timestamps[BASE_LOG_N_MODULES]; /* (inverted: timestamps before the config) */
static bool   with_source[BASE_LOG_N_MODULES];
static pthread_mutex_t cfg_lock = PTHREAD_MUTEX_INITIALIZER; /* run-time updates of configured[] */

/* The ring of recent lines: ring[(ring_next - ring_used + i) % BASE_LOG_RING], i < ring_used. */
static base_log_entry_t ring[BASE_LOG_RING];
static size_t ring_next;  /* [ring_lock] slot written next */
static size_t ring_used;  /* [ring_lock] entries held */
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t counts[BASE_LOG_N_MODULES][BASE_LOG_N_LEVELS]; /* lines written */

static const char *const module_names[] = {
#define BASE__MOD_NAME(m) #m,
    BASE_LOG_MODULES(BASE__MOD_NAME)
#undef BASE__MOD_NAME
};
static const char *const level_names[] = {"trace",   "debug", "info",    "notice",
                                          "warning", "error", "critical"};

_Static_assert(sizeof(module_names) / sizeof(module_names[0]) == BASE_LOG_N_MODULES, "module table");

static void apply_masks_LH(void);
static void init_format(void);

static void init_configured(void)
{
    if (configured_init)
        return;
    configured_init = true;
    for (int i = 0; i < BASE_LOG_N_MODULES; i++)
        configured[i] = MASK_FOLLOW_DEFAULT;
    configured[BASE_LOG_MOD_DEFAULT] = MASK_INFO_PLUS;
}

int base_log_module_find(const char *name)
{
    for (int i = 0; i < BASE_LOG_N_MODULES; i++)
        if (strcmp(name, module_names[i]) == 0)
            return i;
    return -1;
}

const char *base_log_module_name(base_log_module_t mod)
{
    return module_names[mod];
}

const char *base_log_level_name(base_log_level_t lvl)
{
    return level_names[lvl];
}

int base_log_parse_enable(const char *text, uint8_t *mask)
{
    uint8_t m = 0;
    char word[32];
    const char *p = text;

    while (*p == ' ')
        p++;
    if (strcasecmp(p, "default") == 0) {
        *mask = MASK_FOLLOW_DEFAULT;
        return 0;
    }
    if (*p == '\0' || strcasecmp(p, "none") == 0) {
        *mask = 0;
        return 0;
    }
    while (*p) {
        size_t n = strcspn(p, ", ");
        if (n == 0) {
            p++;
            continue;
        }
        if (n >= sizeof(word))
            return -1;
        memcpy(word, p, n);
        word[n] = '\0';
        p += n;
        bool plus = n > 1 && word[n - 1] == '+';
        if (plus)
            word[n - 1] = '\0';
        int lvl = -1;
        for (int i = 0; i < BASE_LOG_N_LEVELS; i++)
            if (strcasecmp(word, level_names[i]) == 0)
                lvl = i;
        if (lvl < 0)
            return -1;
        if (plus)
            m |= (uint8_t)(0x7fu & ~((1u << lvl) - 1u));
        else
            m |= (uint8_t)(1u << lvl);
    }
    *mask = m;
    return 0;
}

void base_log_set_mask(base_log_module_t mod, uint8_t mask)
{
    init_configured();
    configured[mod] = mask;
}

void base_log_finish_config(void)
{
    init_configured();
    apply_masks_LH();
    init_format();
    for (int i = 0; i < BASE_LOG_N_MODULES; i++) {
        int8_t ts = fmt_timestamps[i] >= 0 ? fmt_timestamps[i] : fmt_timestamps[BASE_LOG_MOD_DEFAULT];
        int8_t src = fmt_source[i] >= 0 ? fmt_source[i] : fmt_source[BASE_LOG_MOD_DEFAULT];
        no_timestamps[i] = ts != 1;
        with_source[i] = src == 1;
    }
    for (int i = 0; i < BASE_LOG_N_MODULES; i++)
        if (out_fd[i] == 0 && i != BASE_LOG_MOD_DEFAULT)
            out_fd[i] = out_fd[BASE_LOG_MOD_DEFAULT];
}

int base_log_set_output(base_log_module_t mod, const char *path)
{
    int fd = 0;
    if (path == NULL || strcmp(path, "stderr") == 0)
        fd = 0;
    else if (strcmp(path, "stdout") == 0)
        fd = STDOUT_FILENO;
    else {
        fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0)
            return -errno;
    }
    out_fd[mod] = fd;
    return 0;
}

static void init_format(void)
{
    if (fmt_init)
        return;
    fmt_init = true;
    for (int i = 0; i < BASE_LOG_N_MODULES; i++)
        fmt_timestamps[i] = fmt_source[i] = -1;
    fmt_timestamps[BASE_LOG_MOD_DEFAULT] = 1;
    fmt_source[BASE_LOG_MOD_DEFAULT] = 0;
}

void base_log_set_format(base_log_module_t mod, int timestamps, int source)
{
    init_format();
    if (timestamps >= 0)
        fmt_timestamps[mod] = timestamps ? 1 : 0;
    if (source >= 0)
        fmt_source[mod] = source ? 1 : 0;
}

bool base_log_timestamps(base_log_module_t mod)
{
    return !no_timestamps[mod];
}

bool base_log_source(base_log_module_t mod)
{
    return with_source[mod];
}

void base_log_vwrite(base_log_module_t mod, base_log_level_t lvl, const char *file, int line_no,
                     const char *fmt, va_list ap)
{
    char line[2048];
    size_t n = 0;

    if (!no_timestamps[mod]) {
        struct timeval tv;
        struct tm tm;
        gettimeofday(&tv, NULL);
        gmtime_r(&tv.tv_sec, &tm);
        n = strftime(line, sizeof(line), "%Y-%m-%d %H:%M:%S", &tm);
        n += (size_t)snprintf(line + n, sizeof(line) - n, ".%06ld +0000 ", (long)tv.tv_usec);
    }
    n += (size_t)snprintf(line + n, sizeof(line) - n, "%s (%s) ", module_names[mod],
                          level_names[lvl]);
    size_t text_at = n;
    int k = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
    if (k < 0)
        k = 0;
    n += (size_t)k;
    if (n > sizeof(line) - 2)
        n = sizeof(line) - 2;
    size_t text_end = n;
    if (with_source[mod] && file) {
        while (strncmp(file, "../", 3) == 0)
            file += 3; /* meson builds in a subdirectory */
        int k2 = snprintf(line + n, sizeof(line) - n, " (%s:%d)", file, line_no);
        if (k2 > 0)
            n += (size_t)k2;
        if (n > sizeof(line) - 2)
            n = sizeof(line) - 2;
    }

    atomic_fetch_add_explicit(&counts[mod][lvl], 1, memory_order_relaxed);
    struct timeval now;
    gettimeofday(&now, NULL);
    pthread_mutex_lock(&ring_lock);
    base_log_entry_t *e = &ring[ring_next];
    ring_next = (ring_next + 1) % BASE_LOG_RING;
    if (ring_used < BASE_LOG_RING)
        ring_used++;
    e->module = (uint8_t)mod;
    e->level = (uint8_t)lvl;
    e->file = file;
    e->line = line_no;
    e->time = (double)now.tv_sec + (double)now.tv_usec / 1e6;
    size_t tl = text_end - text_at < sizeof(e->text) - 1 ? text_end - text_at
                                                         : sizeof(e->text) - 1;
    memcpy(e->text, line + text_at, tl);
    e->text[tl] = '\0';
    pthread_mutex_unlock(&ring_lock);

    if (n > sizeof(line) - 2)
        n = sizeof(line) - 2;
    line[n++] = '\n';
    int fd = out_fd[mod] ? out_fd[mod] : STDERR_FILENO;
    ssize_t w;
    do
        w = write(fd, line, n);
    while (w < 0 && errno == EINTR);
}

void base_log_write(base_log_module_t mod, base_log_level_t lvl, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    base_log_vwrite(mod, lvl, NULL, 0, fmt, ap);
    va_end(ap);
}

void base_log_write_at(base_log_module_t mod, base_log_level_t lvl, const char *file, int line,
                       const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    base_log_vwrite(mod, lvl, file, line, fmt, ap);
    va_end(ap);
}

size_t base_log_recent(base_log_entry_t *out, size_t max)
{
    pthread_mutex_lock(&ring_lock);
    size_t n = ring_used < max ? ring_used : max;
    size_t first = (ring_next + BASE_LOG_RING - n) % BASE_LOG_RING; /* the newest n */
    for (size_t i = 0; i < n; i++)
        out[i] = ring[(first + i) % BASE_LOG_RING];
    pthread_mutex_unlock(&ring_lock);
    return n;
}

uint64_t base_log_count(base_log_module_t mod, base_log_level_t lvl)
{
    if ((unsigned)mod >= BASE_LOG_N_MODULES || (unsigned)lvl >= BASE_LOG_N_LEVELS)
        return 0;
    return atomic_load_explicit(&counts[mod][lvl], memory_order_relaxed);
}

/* Effective masks from configured[] (cfg_lock held, or start-up). */
static void apply_masks_LH(void)
{
    uint8_t def = configured[BASE_LOG_MOD_DEFAULT];
    if (def == MASK_FOLLOW_DEFAULT)
        def = MASK_INFO_PLUS;
    for (int i = 0; i < BASE_LOG_N_MODULES; i++)
        atomic_store_explicit(&base_log_masks[i],
                              configured[i] == MASK_FOLLOW_DEFAULT ? def : configured[i],
                              memory_order_relaxed);
}

void base_log_update_module(base_log_module_t mod, uint8_t mask)
{
    if ((unsigned)mod >= BASE_LOG_N_MODULES)
        return;
    pthread_mutex_lock(&cfg_lock);
    init_configured();
    if (mod == BASE_LOG_MOD_DEFAULT && mask == MASK_FOLLOW_DEFAULT)
        mask = MASK_INFO_PLUS;
    configured[mod] = mask;
    apply_masks_LH();
    pthread_mutex_unlock(&cfg_lock);
}

uint8_t base_log_module_configured(base_log_module_t mod)
{
    pthread_mutex_lock(&cfg_lock);
    init_configured();
    uint8_t m = configured[mod];
    pthread_mutex_unlock(&cfg_lock);
    return m;
}

uint8_t base_log_module_mask(base_log_module_t mod)
{
    return atomic_load_explicit(&base_log_masks[mod], memory_order_relaxed);
}

void base_log_format_enable(uint8_t mask, char *buf, size_t len)
{
    size_t n = 0;
    if (len == 0)
        return;
    buf[0] = '\0';
    if (mask == MASK_FOLLOW_DEFAULT) {
        snprintf(buf, len, "default");
        return;
    }
    mask &= 0x7fu;
    if (mask == 0) {
        snprintf(buf, len, "none");
        return;
    }
    for (int i = 0; i < BASE_LOG_N_LEVELS && n < len; i++) {
        if (!((mask >> i) & 1u))
            continue;
        /* the rest of the levels all enabled: "level+" */
        uint8_t rest = (uint8_t)(0x7fu & ~((1u << i) - 1u));
        bool plus = (mask & rest) == rest && i < BASE_LOG_N_LEVELS - 1;
        int k = snprintf(buf + n, len - n, "%s%s%s", n ? "," : "", level_names[i],
                         plus ? "+" : "");
        if (k < 0)
            break;
        n += (size_t)k;
        if (plus)
            break;
    }
}
