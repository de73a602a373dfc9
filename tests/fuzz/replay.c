/* tests/fuzz/replay.c: run a libFuzzer target over saved inputs without libFuzzer.
 *
 * Usage: replay [-t MS] <file or directory>...  Every regular file named on the command line,
 * or found directly in a directory named there, is passed once to LLVMFuzzerTestOneInput().
 * Files whose names start with '.' or "README" are skipped, so a directory can carry a README.
 * Each input is placed at the end of a guard-paged buffer, so that even a build without
 * AddressSanitizer faults on a read past its end.
 *
 * A slow input fails like a crash: each input may use at most MS milliseconds of CPU time
 * (-t, default REPLAY_LIMIT_MS; the process's CPU time, every thread included, so a loaded
 * machine does not make an input fail) and ten times that of wall-clock time.  Past either,
 * the replay names the input and exits 3.  The work a decoder does is bounded by the bytes it
 * is given (STYLE.md, "Errors"); the inputs here are at most a few hundred KiB, so a legitimate
 * one takes milliseconds even under ASan, and an input that makes a decoder loop on a count
 * its bytes do not pay for takes seconds.  At the end the slowest input is named.
 *
 * Exits 0 when every input ran (the target aborts on a violated invariant), 1 when a path
 * could not be read, 2 on a usage or system error, 3 on a slow input.
 */
#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REPLAY_LIMIT_MS 2000 /* CPU time one input may take, by default */

static long        s_limit_ms = REPLAY_LIMIT_MS; /* -t */
static const char *s_current;                    /* the input being run (for the signal) */
static double      s_slowest_ms;                 /* the slowest input so far (CPU ms) */
static char        s_slowest[4096];              /* its path */

/* SIGPROF (CPU limit) or SIGALRM (wall-clock limit): name the input and stop.  Only
 * async-signal-safe calls. */
static void on_limit(int sig)
{
    static const char pre[] = "replay: SLOW INPUT (more than the per-input ";
    const char       *what = sig == SIGPROF ? "CPU time limit, -t): " : "wall-clock limit): ";
    ssize_t           rc;
    rc = write(2, pre, sizeof(pre) - 1);
    rc = write(2, what, strlen(what));
    if (s_current)
        rc = write(2, s_current, strlen(s_current));
    rc = write(2, "\n", 1);
    (void)rc;
    _exit(3);
}

/* Arm (ms > 0) or disarm (ms == 0) both limits. */
static void limits_arm(long ms)
{
    struct itimerval it = {{0, 0}, {ms / 1000, (ms % 1000) * 1000}};
    if (setitimer(ITIMER_PROF, &it, NULL) != 0) {
        perror("replay: setitimer");
        exit(2);
    }
    alarm(ms ? (unsigned)((ms * 10 + 999) / 1000) : 0);
}

static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Run the target on one input, under the limits. */
static void run_one(const char *path, const uint8_t *p, size_t size)
{
    s_current = path;
    double t0 = cpu_ms();
    limits_arm(s_limit_ms);
    LLVMFuzzerTestOneInput(p, size);
    limits_arm(0);
    double ms = cpu_ms() - t0;
    if (ms > s_slowest_ms) {
        s_slowest_ms = ms;
        snprintf(s_slowest, sizeof(s_slowest), "%s", path);
    }
    s_current = NULL;
}

/* Run one file; returns 0, or -1 when it cannot be read. */
static int replay_file(const char *path)
{
    FILE       *f = fopen(path, "rb");
    struct stat st;
    size_t      page = (size_t)sysconf(_SC_PAGESIZE);
    size_t      data;
    uint8_t    *map;
    uint8_t    *p;

    if (!f || fstat(fileno(f), &st) != 0) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        if (f)
            fclose(f);
        return -1;
    }
    data = ((size_t)st.st_size + page - 1) / page * page;
    map = mmap(NULL, data + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED || mprotect(map + data, page, PROT_NONE) != 0) {
        perror("replay: mmap");
        exit(2);
    }
    p = map + data - (size_t)st.st_size;
    if (fread(p, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        fprintf(stderr, "replay: short read on %s\n", path);
        fclose(f);
        munmap(map, data + page);
        return -1;
    }
    fclose(f);
    /* read-only, as libFuzzer hands it over */
    mprotect(map, data, PROT_READ);
    run_one(path, p, (size_t)st.st_size);
    munmap(map, data + page);
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    int    failed = 0;
    size_t runs = 0;
    int    first = 1;

    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        const char *slash = strrchr(argv[0], '/');
        printf("usage: %s [-t MS] FILE|DIR...\n"
               "Runs the fuzz target once on each file, and on each file directly in each DIR\n"
               "(names starting with '.' or README skipped).  An input may take MS ms of CPU\n"
               "time (default %d) and ten times that of wall-clock time.  Exits 0 when every\n"
               "input ran, 1 when a path could not be read, 2 on a usage error, 3 on a slow\n"
               "input.\n",
               slash ? slash + 1 : argv[0], REPLAY_LIMIT_MS);
        return 0;
    }
    if (argc > 2 && strcmp(argv[1], "-t") == 0) {
        char *end;
        s_limit_ms = strtol(argv[2], &end, 10);
        if (*end || s_limit_ms <= 0) {
            fprintf(stderr, "replay: -t needs a positive number of milliseconds\n");
            return 2;
        }
        first = 3;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_limit;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGPROF, &sa, NULL) != 0 || sigaction(SIGALRM, &sa, NULL) != 0) {
        perror("replay: sigaction");
        return 2;
    }

    for (int i = first; i < argc; i++) {
        struct stat st;

        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: cannot stat %s\n", argv[i]);
            failed = 1;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            failed |= replay_file(argv[i]) != 0;
            runs++;
            continue;
        }
        DIR           *d = opendir(argv[i]);
        struct dirent *e;
        char         **names = NULL;
        size_t         n = 0;

        if (!d) {
            fprintf(stderr, "replay: cannot open %s\n", argv[i]);
            failed = 1;
            continue;
        }
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.' || strncmp(e->d_name, "README", 6) == 0)
                continue;
            names = realloc(names, (n + 1) * sizeof(*names));
            if (!names || !(names[n] = malloc(strlen(argv[i]) + strlen(e->d_name) + 2))) {
                fprintf(stderr, "replay: out of memory\n");
                exit(2);
            }
            sprintf(names[n], "%s/%s", argv[i], e->d_name);
            n++;
        }
        closedir(d);
        /* a stable order makes a failure reproducible from the log */
        if (n)
            qsort(names, n, sizeof(*names), name_cmp);
        for (size_t j = 0; j < n; j++) {
            if (stat(names[j], &st) == 0 && S_ISREG(st.st_mode)) {
                failed |= replay_file(names[j]) != 0;
                runs++;
            }
            free(names[j]);
        }
        free(names);
    }
    printf("replay: %zu inputs (limit %ld ms of CPU time each); slowest %.2f ms: %s\n", runs,
           s_limit_ms, s_slowest_ms, runs ? s_slowest : "-");
    return failed;
}
