/* stats/console.h: the web console's files (HTML, JavaScript, CSS, the charting library),
 * embedded in the daemon at build time so an installed junctiond needs no file beside it.
 *
 * The HTTP server (router/http_get.c) serves them at '/' unless the listener's httpRootDir
 * names a directory, which then replaces them.  When the console could not be built (no
 * npm on the build machine) the table holds one page that says so.
 *
 * Threads: read-only constant data; any thread.
 */
#ifndef JUNCTION_STATS_CONSOLE_H
#define JUNCTION_STATS_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>

typedef struct stats_console_file {
    const char          *path; /* URL path, starting with '/', e.g. "/index.html" */
    const char          *mime; /* Content-Type, e.g. "text/html; charset=utf-8" */
    const unsigned char *data; /* the bytes */
    size_t               len;  /* their count */
} stats_console_file_t;

/* The file served at URL `path` ("/" means "/index.html"; a query string is ignored), or
 * NULL when there is none. */
const stats_console_file_t *stats_console_find(const char *path);

/* True when the real console was built; false when only the "not built" page is there. */
bool stats_console_built(void);

#endif
