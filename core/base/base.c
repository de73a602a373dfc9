/* core/base/base.c: allocation wrappers, bug checks and thread roles (see base.h).
 * Thread-safe throughout; the thread role lives in a thread-local. */
#include "base.h"

#include "log.h"

#include <execinfo.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void oom(size_t n) __attribute__((noreturn));
static void oom(size_t n)
{
    fprintf(stderr, "junctiond: out of memory allocating %zu bytes\n", n);
    abort();
}

void *base_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom(n);
    return p;
}

void *base_calloc(size_t count, size_t n)
{
    void *p = calloc(count ? count : 1, n ? n : 1);
    if (!p)
        oom(count * n);
    return p;
}

void *base_realloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom(n);
    return q;
}

char *base_strdup(const char *s)
{
    return base_strndup(s, strlen(s));
}

char *base_strndup(const char *s, size_t n)
{
    char *d = base_malloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

void base_bug(const char *file, int line, const char *cond)
{
    void *frames[32];
    int n = backtrace(frames, 32);
    fprintf(stderr, "junctiond: BUG at %s:%d: %s\n", file, line, cond);
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
    abort();
}

void base_warn_once(const char *file, int line, const char *cond)
{
    base_log(BASE_LOG_MOD_DEFAULT, BASE_LOG_WARNING, "unexpected condition at %s:%d: %s", file,
             line, cond);
}

static _Thread_local base_thread_role_t t_role;
static _Thread_local int t_index;

void base_thread_set_role(base_thread_role_t role, int index)
{
    t_role = role;
    t_index = index;
}

base_thread_role_t base_thread_role(void)
{
    return t_role;
}

int base_thread_index(void)
{
    return t_index;
}

bool base_thread_is(base_thread_role_t role)
{
    return t_role == BASE_THREAD_OTHER || t_role == role;
}

uint64_t base_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
