/* stats/console.c: the console files table (see stats/console.h).
 *
 * This is the table used when the console page was not built: one page that says so.
 * Threads: any (constant data).
 */
#include "stats/console.h"

#include <string.h>

static const char NOT_BUILT[] =
    "<!doctype html><html><head><meta charset=\"utf-8\"><title>Junction</title></head>"
    "<body><h1>Junction</h1><p>The web console was not built into this junctiond "
    "(npm was not available when it was built). <a href=\"/metrics\">/metrics</a> and "
    "<a href=\"/healthz\">/healthz</a> work.</p></body></html>\n";

static const stats_console_file_t FILES[] = {
    {"/index.html", "text/html; charset=utf-8", (const unsigned char *)NOT_BUILT,
     sizeof(NOT_BUILT) - 1},
};

const stats_console_file_t *stats_console_find(const char *path)
{
    size_t n = strcspn(path, "?#");
    if (n == 1 && path[0] == '/') {
        path = "/index.html";
        n = strlen(path);
    }
    for (size_t i = 0; i < sizeof(FILES) / sizeof(FILES[0]); i++)
        if (strlen(FILES[i].path) == n && memcmp(FILES[i].path, path, n) == 0)
            return &FILES[i];
    return NULL;
}

bool stats_console_built(void)
{
    return false;
}
