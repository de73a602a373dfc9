/* stats/console.c: look-ups in the console files table (see stats/console.h).
 *
 * The table itself is generated at build time (stats/console_int.h says by what): the
 * console's HTML, JavaScript and CSS and the charting library when npm's packages were there,
 * else one page saying the console was not built.
 * Threads: any (constant data).
 */
#include "stats/console.h"

#include "stats/console_int.h"

#include <string.h>

const stats_console_file_t *stats_console_find(const char *path)
{
    size_t n = strcspn(path, "?#");
    if (n == 1 && path[0] == '/') {
        path = "/index.html";
        n = strlen(path);
    }
    for (size_t i = 0; i < stats__console_nfiles; i++) {
        const stats_console_file_t *f = &stats__console_files[i];
        if (strlen(f->path) == n && memcmp(f->path, path, n) == 0)
            return f;
    }
    return NULL;
}

bool stats_console_built(void)
{
    return stats__console_built;
}
