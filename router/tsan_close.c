/* router/tsan_close.c: built into junctiond only with -Db_sanitize=thread. Any thread.
 *
 * libuv on Linux closes descriptors with syscall(SYS_close, fd), not close(): glibc's close()
 * is a cancellation point, and libuv sidesteps it.  ThreadSanitizer intercepts close() but not
 * syscall(), so a descriptor that a libuv loop closed stays "open" in TSan's books, and the
 * next thread that gets the same number from socket(), accept4(), socketpair() or fopen() is
 * reported as racing with the thread that created it first (a descriptor made by the admin
 * thread for a WebSocket session, closed by a worker's uv_close(), reused by the main
 * thread's /proc read).  Those reports are about TSan's bookkeeping, not about Junction.
 *
 * Debian's libuv is not built with TSan, so it cannot tell TSan itself (libuv does, when it is
 * compiled with -fsanitize=thread).  This file defines syscall() in the executable, which the
 * dynamic linker then prefers to glibc's for libuv too: SYS_close goes through close(), which
 * TSan sees; every other number goes to glibc's syscall() unchanged.  Thread cancellation is
 * never used in junctiond, so close() being a cancellation point changes nothing here. */
#include <dlfcn.h>
#include <stdarg.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

long syscall(long number, ...);

typedef long (*syscall_fn)(long, ...);

long syscall(long number, ...)
{
    va_list ap;
    long a[6];
    va_start(ap, number);
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    if (number == SYS_close)
        return close((int)a[0]);
    /* dlsym() may run twice when two threads race here; both store the same value */
    static syscall_fn real;
    syscall_fn fn = __atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (!fn) {
        void *sym = dlsym(RTLD_NEXT, "syscall");
        memcpy(&fn, &sym, sizeof(fn)); /* POSIX: a data pointer may hold a function's address */
        __atomic_store_n(&real, fn, __ATOMIC_RELEASE);
    }
    return fn(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
