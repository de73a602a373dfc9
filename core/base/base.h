/* core/base/base.h: the low-level helpers every Junction module may use.
 *
 * One header for the leaf library `base` (depends on nothing of Junction's): memory
 * allocation that aborts on OOM, always-on bug checks, thread roles for the
 * _CT/_WT assertions, and small helpers.  The other pieces of core/base have their own
 * headers: log.h, pool.h, arena.h, mpsc.h, map.h.
 *
 * Thread-safety: everything here is thread-safe unless a comment says otherwise.
 */
#ifndef JUNCTION_BASE_H
#define JUNCTION_BASE_H

#include <assert.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* -- memory: abort on OOM (error returns are for bad input, never for ENOMEM) -- */
void *base_malloc(size_t n);
void *base_calloc(size_t count, size_t n);
void *base_realloc(void *p, size_t n);
char *base_strdup(const char *s);
char *base_strndup(const char *s, size_t n);

/* Free and clear the pointer so no reachable pointer to freed memory remains. */
#define BASE_FREE(p)                                                                               \
    do {                                                                                           \
        free(p);                                                                                   \
        (p) = NULL;                                                                                \
    } while (0)

/* -- always-on checks -- */
void base_bug(const char *file, int line, const char *cond) __attribute__((noreturn));
void base_warn_once(const char *file, int line, const char *cond);

/* Abort with file:line and a backtrace when continuing would corrupt routing. */
#define BASE_BUG_ON(cond)                                                                          \
    do {                                                                                           \
        if (__builtin_expect(!!(cond), 0))                                                         \
            base_bug(__FILE__, __LINE__, #cond);                                                   \
    } while (0)

/* Log once per call site for a surprise we can recover from; evaluates to cond. */
#define BASE_WARN_ONCE(cond)                                                                       \
    __extension__({                                                                                \
        bool base__c = !!(cond);                                                                   \
        static bool base__warned;                                                                  \
        if (__builtin_expect(base__c && !base__warned, 0)) {                                       \
            base__warned = true;                                                                   \
            base_warn_once(__FILE__, __LINE__, #cond);                                             \
        }                                                                                          \
        base__c;                                                                                   \
    })

#define BASE_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define BASE_CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#define BASE_LIKELY(x)    __builtin_expect(!!(x), 1)
#define BASE_UNLIKELY(x)  __builtin_expect(!!(x), 0)

/* -- thread roles, for the _CT / _WT assertions -- */
typedef enum base_thread_role {
    BASE_THREAD_OTHER = 0, /* not one of the router's threads (tests, tools) */
    BASE_THREAD_MAIN,      /* main(): start-up, signals, listeners */
    BASE_THREAD_CORE,      /* the core thread: routing state */
    BASE_THREAD_WORKER,    /* a worker thread: connections, Proton */
    BASE_THREAD_ADMIN,     /* the admin thread: management socket, HTTP */
} base_thread_role_t;

/* Set the calling thread's role and (for workers) index; call once when a thread starts. */
void base_thread_set_role(base_thread_role_t role, int index);
base_thread_role_t base_thread_role(void);
int base_thread_index(void);

/* Used in assert() only: true when the caller runs in `role` (OTHER matches anything,
 * so unit tests that drive a module from a plain thread are not stopped). */
bool base_thread_is(base_thread_role_t role);
#define BASE_ASSERT_THREAD(role) assert(base_thread_is(BASE_THREAD_##role))

/* Monotonic clock in nanoseconds. */
uint64_t base_now_ns(void);

#endif
