/* core/base/log.c: qdrouterd-shaped log lines (see log.h).
 *
 * Threads: base_log_vwrite() is called by every thread; it formats the line on the caller's
 * stack, records it in the ring and the counts, and hands it to the output queue.  Once
 * base_log_start_writer() ran, only the writer thread calls write(2) or syslog(3): the
 * caller copies the line into a bounded byte queue (q_buf) and returns, so a slow disk, a
 * full pipe or a stuck syslog daemon never stalls a worker or the core thread.  When the queue
 * is full the line is dropped and counted against its sink; the writer writes "N log lines
 * dropped" into that sink once it could write again.  Before the writer starts and after it
 * stopped (start-up, shutdown, unit tests) the caller writes the line itself under q_lock.
 *
 * Configuration (base_log_set_*, base_log_finish_config) happens on the main thread at
 * start-up, before the other threads run; base_log_update_module() may run on any thread
 * (under cfg_lock).  base_log_reopen() (SIGUSR1, main thread) asks the writer to reopen the
 * file sinks between two batches, so each line lands whole in the old file or the new one.
 *
 * Locks: ring_lock, cfg_lock and q_lock are never held together. */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#define MASK_FOLLOW_DEFAULT 0xffu
#define MASK_INFO_PLUS      0x7cu /* info, notice, warning, error, critical */
#define MASK_ALL            0x7fu
#define LINE_MAX_BYTES      2048

_Atomic uint8_t base_log_masks[BASE_LOG_N_MODULES] = {
    [BASE_LOG_MOD_DEFAULT] = MASK_INFO_PLUS,
};
static uint8_t configured[BASE_LOG_N_MODULES]; /* mask as configured, FOLLOW_DEFAULT if unset */
static bool    configured_init;
/* includeTimestamp / includeSource as configured (-1: follow DEFAULT), and what each module
 * does (resolved by base_log_finish_config(); read-only once the other threads run) */
static int8_t fmt_timestamps[BASE_LOG_N_MODULES];
static int8_t fmt_source[BASE_LOG_N_MODULES];
static bool   fmt_init;
static bool   to_syslog[BASE_LOG_N_MODULES];     /* the module's own outputFile is syslog */
static bool   no_timestamps[BASE_LOG_N_MODULES]; /* (inverted: timestamps before the config) */
static bool   with_source[BASE_LOG_N_MODULES];
static pthread_mutex_t cfg_lock = PTHREAD_MUTEX_INITIALIZER; /* run-time updates of configured[] */

/* Output sinks, as qdrouterd's: one per distinct output, shared by every module that names
 * it (two modules naming one file share one descriptor).  sinks[0] is standard error.
 * Written at start-up only, except `fd` (dup2'd over by a reopen, by the writer or under
 * q_lock) and `dropped` [q_lock]. */
typedef struct log_sink {
    char    *name;    /* "stderr", "stdout", "syslog" or the path as configured */
    int      fd;      /* descriptor written to; -1 for syslog */
    bool     syslog;  /* lines go to syslog(3), facility daemon */
    bool     is_file; /* a path: reopened by base_log_reopen() */
    dev_t    dev;     /* the file's identity when opened, to share it between names */
    ino_t    ino;
    uint64_t dropped; /* [q_lock] lines dropped on a full queue, not yet reported */
} log_sink_t;

#define MAX_SINKS (BASE_LOG_N_MODULES + 2)
static log_sink_t sinks[MAX_SINKS] = {{.name = "stderr", .fd = STDERR_FILENO}};
static int        n_sinks = 1;
static int        sink_set[BASE_LOG_N_MODULES]; /* module's own sink + 1; 0 = DEFAULT's */
static int        sink_of[BASE_LOG_N_MODULES];  /* where the module writes (after finish) */

/* The ring of recent lines: ring[(ring_next - ring_used + i) % BASE_LOG_RING], i < ring_used. */
static base_log_entry_t ring[BASE_LOG_RING];
static size_t           ring_next; /* [ring_lock] slot written next */
static size_t           ring_used; /* [ring_lock] entries held */
static pthread_mutex_t  ring_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t counts[BASE_LOG_N_MODULES][BASE_LOG_N_LEVELS]; /* lines written */

/* The output queue: entries of a q_hdr_t and the line's bytes, back to back in a circular
 * byte buffer.  Everything here is [q_lock]. */
typedef struct q_hdr {
    uint16_t len;  /* bytes of the line that follow, newline included */
    uint8_t  sink; /* index into sinks[] */
    uint8_t  prio; /* syslog priority */
} q_hdr_t;

static char             q_buf[BASE_LOG_QUEUE_BYTES];
static size_t           q_head;       /* [q_lock] offset of the oldest entry */
static size_t           q_used;       /* [q_lock] bytes held */
static bool             writer_on;    /* [q_lock] lines go through the queue */
static bool             writer_stop;  /* [q_lock] the writer should drain and exit */
static bool             reopen_asked; /* [q_lock] base_log_reopen() waits for the writer */
static size_t           reopen_after; /* [q_lock] bytes queued before the reopen was asked:
                                         they go to the old file, later lines to the new */
static pthread_mutex_t  q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t   q_cond = PTHREAD_COND_INITIALIZER;
static pthread_t        writer_thread;
static bool             writer_started; /* main thread only: writer_thread is joinable */
static _Atomic uint64_t dropped_total;  /* lines dropped since start */
static _Atomic size_t   q_pending;      /* lines queued or taken and not yet written */

static const char *const module_names[] = {
#define BASE__MOD_NAME(m) #m,
    BASE_LOG_MODULES(BASE__MOD_NAME)
#undef BASE__MOD_NAME
};
static const char *const level_names[] = {"trace",   "debug", "info",    "notice",
                                          "warning", "error", "critical"};
/* qdrouterd's syslog priorities (syslog has no trace) */
static const uint8_t syslog_prio[] = {LOG_DEBUG,   LOG_DEBUG, LOG_INFO, LOG_NOTICE,
                                      LOG_WARNING, LOG_ERR,   LOG_CRIT};

_Static_assert(sizeof(module_names) / sizeof(module_names[0]) == BASE_LOG_N_MODULES,
               "module table");
_Static_assert(LINE_MAX_BYTES < UINT16_MAX, "q_hdr_t.len holds a line");
_Static_assert(MAX_SINKS <= UINT8_MAX, "q_hdr_t.sink holds a sink index");

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

/* The words of an `enable` value, in qdrouterd's order: a word names the first of these it
 * is a prefix of, ignoring case ("d" is default, "warn" is warning, "not" is notice). */
static const char *const enable_words[] = {"default", "none",    "trace", "debug",   "info",
                                           "notice",  "warning", "error", "critical"};

int base_log_parse_enable(const char *text, uint8_t *mask)
{
    /* qdrouterd splits on any of ", ;:" and skips empty words; an empty value is "none" */
    unsigned    m = 0;
    bool        follow = false;
    const char *p = text;

    while (*p) {
        size_t n = strcspn(p, ", ;:");
        if (n == 0) {
            p++;
            continue;
        }
        const char *word = p;
        p += n;
        bool   plus = word[n - 1] == '+';
        size_t len = n - (plus ? 1 : 0);
        size_t w = 0;
        /* a prefix of a name (strncasecmp over the word's length: a longer word never
         * matches); "+" alone is the empty prefix, so "default" as in qdrouterd */
        while (w < sizeof(enable_words) / sizeof(enable_words[0]) &&
               (len > strlen(enable_words[w]) || strncasecmp(enable_words[w], word, len) != 0))
            w++;
        if (w == sizeof(enable_words) / sizeof(enable_words[0]))
            return -1; /* qdrouterd's "not a valid log level" */
        if (w == 0)
            follow = true; /* "default" anywhere: the module follows DEFAULT */
        else if (w >= 2) {
            int lvl = (int)w - 2;
            m |= plus ? (MASK_ALL & ~((1u << lvl) - 1u)) : (1u << lvl);
        }
    }
    *mask = follow ? (uint8_t)MASK_FOLLOW_DEFAULT : (uint8_t)m;
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
        int8_t ts =
            fmt_timestamps[i] >= 0 ? fmt_timestamps[i] : fmt_timestamps[BASE_LOG_MOD_DEFAULT];
        int8_t src = fmt_source[i] >= 0 ? fmt_source[i] : fmt_source[BASE_LOG_MOD_DEFAULT];
        no_timestamps[i] = ts != 1;
        with_source[i] = src == 1;
    }
    /* a module without its own outputFile writes where DEFAULT does */
    int def = sink_set[BASE_LOG_MOD_DEFAULT] ? sink_set[BASE_LOG_MOD_DEFAULT] - 1 : 0;
    for (int i = 0; i < BASE_LOG_N_MODULES; i++)
        sink_of[i] = sink_set[i] ? sink_set[i] - 1 : def;
}

int base_log_set_output(base_log_module_t mod, const char *path)
{
    if (path == NULL)
        path = "stderr";
    for (int i = 0; i < n_sinks; i++)
        if (strcmp(sinks[i].name, path) == 0) {
            sink_set[mod] = i + 1;
            goto done;
        }
    log_sink_t s = {.fd = -1};
    if (strcmp(path, "stdout") == 0)
        s.fd = STDOUT_FILENO;
    else if (strcmp(path, "syslog") == 0) {
        s.syslog = true;
        openlog(NULL, 0, LOG_DAEMON); /* qdrouterd's facility; connects at the first line */
    } else {
        s.fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (s.fd < 0)
            return -errno;
        struct stat st;
        if (fstat(s.fd, &st) == 0) {
            s.dev = st.st_dev;
            s.ino = st.st_ino;
            /* another name for a file already open: one descriptor, so one reopen */
            for (int i = 0; i < n_sinks; i++)
                if (sinks[i].is_file && sinks[i].dev == st.st_dev && sinks[i].ino == st.st_ino) {
                    close(s.fd);
                    sink_set[mod] = i + 1;
                    goto done;
                }
        }
        s.is_file = true;
    }
    if (n_sinks == MAX_SINKS) { /* every module its own sink already: cannot happen */
        if (s.is_file)
            close(s.fd);
        return -EMFILE;
    }
    s.name = strdup(path);
    if (!s.name)
        abort();
    sinks[n_sinks] = s;
    sink_set[mod] = ++n_sinks;
done:
    /* qdrouterd: a module whose output is syslog has no timestamps (syslog adds its own),
     * whatever its includeTimestamp says */
    to_syslog[mod] = sinks[sink_set[mod] - 1].syslog;
    if (to_syslog[mod]) {
        init_format();
        fmt_timestamps[mod] = 0;
    }
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
    if (timestamps >= 0 && !to_syslog[mod])
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

/* -- output -- */

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* nowhere to say so: the log is the place that failed */
        p += w;
        n -= (size_t)w;
    }
}

/* Write lines (each ending in a newline) to a sink.  Called by the writer thread, or with
 * q_lock held when there is no writer. */
static void sink_write(const log_sink_t *s, int prio, const char *p, size_t n)
{
    if (s->syslog) {
        /* one record per line, without the newline */
        while (n > 0) {
            const char *nl = memchr(p, '\n', n);
            size_t      len = nl ? (size_t)(nl - p) : n;
            syslog(prio, "%.*s", (int)len, p);
            len += nl ? 1 : 0;
            p += len;
            n -= len;
        }
        return;
    }
    write_all(s->fd, p, n);
}

/* Reopen every file sink under its name (after logrotate renamed it): the new descriptor
 * takes the old one's number, so nothing else changes.  Writer thread, or q_lock held. */
static void reopen_files(void)
{
    for (int i = 0; i < n_sinks; i++) {
        log_sink_t *s = &sinks[i];
        if (!s->is_file)
            continue;
        int fd = open(s->name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0) {
            char line[512];
            int  n = snprintf(line, sizeof(line),
                              "SERVER (error) Cannot reopen log file %s: %s; still writing to "
                               "the file open before\n",
                              s->name, strerror(errno));
            write_all(s->fd, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
            continue;
        }
        dup2(fd, s->fd);
        close(fd);
    }
}

/* Format the time as the lines carry it into buf; returns the bytes written. */
static size_t format_time(char *buf, size_t len)
{
    struct timeval tv;
    struct tm      tm;
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    size_t n = strftime(buf, len, "%Y-%m-%d %H:%M:%S", &tm);
    n += (size_t)snprintf(buf + n, len - n, ".%06ld +0000 ", (long)tv.tv_usec);
    return n;
}

/* Queue a line (ending in a newline) for a sink, or write it now when there is no writer.
 * Thread-safe; never blocks on the output once the writer runs. */
static void emit(int sink, int prio, const char *line, size_t n)
{
    pthread_mutex_lock(&q_lock);
    if (!writer_on) {
        sink_write(&sinks[sink], prio, line, n);
        pthread_mutex_unlock(&q_lock);
        return;
    }
    if (sizeof(q_buf) - q_used < sizeof(q_hdr_t) + n) {
        sinks[sink].dropped++;
        atomic_fetch_add_explicit(&dropped_total, 1, memory_order_relaxed);
        pthread_mutex_unlock(&q_lock);
        return;
    }
    q_hdr_t     h = {.len = (uint16_t)n, .sink = (uint8_t)sink, .prio = (uint8_t)prio};
    bool        was_empty = q_used == 0;
    size_t      at = (q_head + q_used) % sizeof(q_buf);
    const char *parts[2] = {(const char *)&h, line};
    size_t      lens[2] = {sizeof(h), n};
    for (int k = 0; k < 2; k++) {
        size_t first = sizeof(q_buf) - at < lens[k] ? sizeof(q_buf) - at : lens[k];
        memcpy(q_buf + at, parts[k], first);
        memcpy(q_buf, parts[k] + first, lens[k] - first);
        at = (at + lens[k]) % sizeof(q_buf);
    }
    q_used += sizeof(h) + n;
    atomic_fetch_add_explicit(&q_pending, 1, memory_order_relaxed);
    if (was_empty)
        pthread_cond_signal(&q_cond);
    pthread_mutex_unlock(&q_lock);
}

/* Take bytes from the head of the queue (q_lock held). */
static void q_take_LH(void *out, size_t n)
{
    size_t first = sizeof(q_buf) - q_head < n ? sizeof(q_buf) - q_head : n;
    memcpy(out, q_buf + q_head, first);
    memcpy((char *)out + first, q_buf, n - first);
    q_head = (q_head + n) % sizeof(q_buf);
    q_used -= n;
}

#define BATCH_BYTES   (64 * 1024)
#define BATCH_ENTRIES 1024

/* The writer thread: takes a batch of lines under q_lock, writes it without the lock (runs
 * of lines for one sink in one write(2)), then reports what was dropped meanwhile. */
static void *writer_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "junction-log");
    char    *batch = malloc(BATCH_BYTES);
    q_hdr_t *hdrs = malloc(BATCH_ENTRIES * sizeof(*hdrs));
    uint64_t dropped[MAX_SINKS];
    if (!batch || !hdrs)
        abort();

    pthread_mutex_lock(&q_lock);
    for (;;) {
        while (q_used == 0 && !reopen_asked && !writer_stop)
            pthread_cond_wait(&q_cond, &q_lock);
        size_t n = 0, k = 0;
        while (q_used > 0 && k < BATCH_ENTRIES && !(reopen_asked && reopen_after == 0)) {
            q_hdr_t h;
            size_t  save_head = q_head, save_used = q_used;
            q_take_LH(&h, sizeof(h));
            if (n + h.len > BATCH_BYTES) {
                q_head = save_head; /* next batch */
                q_used = save_used;
                break;
            }
            q_take_LH(batch + n, h.len);
            n += h.len;
            hdrs[k++] = h;
            if (reopen_asked)
                reopen_after -= sizeof(h) + h.len;
        }
        for (int i = 0; i < n_sinks; i++) {
            dropped[i] = sinks[i].dropped;
            sinks[i].dropped = 0;
        }
        /* this batch goes to the old file; once it holds every line queued before the reopen
           was asked, the files are reopened and the rest goes to the new one */
        bool reopen = reopen_asked && reopen_after == 0; /* a SIGUSR1 during it asks again */
        if (reopen)
            reopen_asked = false;
        pthread_mutex_unlock(&q_lock);

        size_t off = 0;
        for (size_t i = 0; i < k;) {
            size_t j = i, len = 0;
            while (j < k && hdrs[j].sink == hdrs[i].sink &&
                   (!sinks[hdrs[i].sink].syslog || hdrs[j].prio == hdrs[i].prio))
                len += hdrs[j++].len;
            sink_write(&sinks[hdrs[i].sink], hdrs[i].prio, batch + off, len);
            off += len;
            i = j;
        }
        for (int i = 0; i < n_sinks; i++) {
            if (!dropped[i])
                continue;
            char   line[256];
            size_t m = no_timestamps[BASE_LOG_MOD_SERVER] || sinks[i].syslog
                           ? 0
                           : format_time(line, sizeof(line));
            m += (size_t)snprintf(line + m, sizeof(line) - m,
                                  "SERVER (warning) %llu log lines dropped: the log output did "
                                  "not keep up\n",
                                  (unsigned long long)dropped[i]);
            sink_write(&sinks[i], LOG_WARNING, line, m);
        }
        if (reopen)
            reopen_files();
        atomic_fetch_sub_explicit(&q_pending, k, memory_order_release);

        pthread_mutex_lock(&q_lock);
        if (writer_stop && q_used == 0)
            break; /* (lines queued while this batch was written go out first) */
    }
    writer_on = false;
    pthread_mutex_unlock(&q_lock);
    free(hdrs);
    free(batch);
    return NULL;
}

static void stop_writer_at_exit(void)
{
    base_log_stop_writer(1.0);
}

/* SIGABRT (an assert, a bug check): the lines just logged say why, so give the writer up to
 * two seconds to write what is queued before the process dies.  Only async-signal-safe
 * calls; the writer runs on meanwhile. */
static void on_abort(int sig)
{
    (void)sig;
    struct timespec ms = {0, 1000000};
    for (int i = 0; i < 2000 && atomic_load_explicit(&q_pending, memory_order_acquire) > 0; i++)
        nanosleep(&ms, NULL);
}

int base_log_start_writer(void)
{
    static bool at_exit;
    if (writer_started)
        return 0;
    if (!at_exit) {
        /* an exit() on an error path still writes what was queued before it */
        at_exit = true;
        atexit(stop_writer_at_exit);
        struct sigaction sa = {.sa_handler = on_abort, .sa_flags = SA_RESETHAND};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGABRT, &sa, NULL);
    }
    pthread_mutex_lock(&q_lock);
    writer_on = true;
    writer_stop = false;
    pthread_mutex_unlock(&q_lock);
    int rc = pthread_create(&writer_thread, NULL, writer_main, NULL);
    if (rc != 0) {
        pthread_mutex_lock(&q_lock);
        writer_on = false;
        pthread_mutex_unlock(&q_lock);
        return -rc;
    }
    writer_started = true;
    return 0;
}

void base_log_stop_writer(double timeout_s)
{
    if (!writer_started)
        return;
    pthread_mutex_lock(&q_lock);
    writer_stop = true;
    pthread_cond_broadcast(&q_cond);
    pthread_mutex_unlock(&q_lock);
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += (time_t)timeout_s;
    deadline.tv_nsec += (long)((timeout_s - (double)(time_t)timeout_s) * 1e9);
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    if (pthread_timedjoin_np(writer_thread, NULL, &deadline) != 0) {
        /* the output is stuck (a pipe nobody reads): leave the writer blocked, what it holds
         * is lost when the process exits */
        pthread_detach(writer_thread);
    }
    writer_started = false;
}

void base_log_reopen(void)
{
    pthread_mutex_lock(&q_lock);
    if (!writer_on) {
        reopen_files();
    } else {
        if (!reopen_asked) /* (asked twice: one reopen, at the first mark, serves both) */
            reopen_after = q_used;
        reopen_asked = true;
        pthread_cond_signal(&q_cond);
    }
    pthread_mutex_unlock(&q_lock);
}

uint64_t base_log_dropped(void)
{
    return atomic_load_explicit(&dropped_total, memory_order_relaxed);
}

void base_log_vwrite(base_log_module_t mod, base_log_level_t lvl, const char *file, int line_no,
                     const char *fmt, va_list ap)
{
    char   line[LINE_MAX_BYTES];
    size_t n = 0;

    if (!no_timestamps[mod])
        n = format_time(line, sizeof(line));
    n += (size_t)snprintf(line + n, sizeof(line) - n, "%s (%s) ", module_names[mod],
                          level_names[lvl]);
    size_t text_at = n;
    int    k = vsnprintf(line + n, sizeof(line) - n, fmt, ap);
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
    size_t tl = text_end - text_at < sizeof(e->text) - 1 ? text_end - text_at : sizeof(e->text) - 1;
    memcpy(e->text, line + text_at, tl);
    e->text[tl] = '\0';
    pthread_mutex_unlock(&ring_lock);

    line[n++] = '\n';
    emit(sink_of[mod], syslog_prio[lvl], line, n);
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
        bool    plus = (mask & rest) == rest && i < BASE_LOG_N_LEVELS - 1;
        int k = snprintf(buf + n, len - n, "%s%s%s", n ? "," : "", level_names[i], plus ? "+" : "");
        if (k < 0)
            break;
        n += (size_t)k;
        if (plus)
            break;
    }
}
