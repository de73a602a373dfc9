/* tests/fuzz/replay.c: run a libFuzzer target over saved inputs without libFuzzer.
 *
 * Usage: replay <file or directory>...  Every regular file named on the command line, or found
 * directly in a directory named there, is passed once to LLVMFuzzerTestOneInput().  Files
 * whose names start with '.' or "README" are skipped, so a directory can carry a README.
 * Each input is placed at the end of a guard-paged buffer, so that even a build without
 * AddressSanitizer faults on a read past its end.  Exits 0 when every input ran (the target
 * aborts on a violated invariant), 1 when a path could not be read.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
    LLVMFuzzerTestOneInput(p, (size_t)st.st_size);
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

    for (int i = 1; i < argc; i++) {
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
    printf("replay: %zu inputs\n", runs);
    return failed;
}
