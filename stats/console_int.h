/* stats/console_int.h: the table stats/console.c serves from, private to stats/.  The build
 * generates its definition (console_files.c, written by stats/console/embed.py): the built
 * console's files, or the one "not built" page when npm's packages were missing.
 *
 * Threads: read-only constant data; any thread.
 */
#ifndef JUNCTION_STATS_CONSOLE_INT_H
#define JUNCTION_STATS_CONSOLE_INT_H

#include "stats/console.h"

#include <stdbool.h>
#include <stddef.h>

extern const stats_console_file_t stats__console_files[]; /* the files, in no order */
extern const size_t               stats__console_nfiles;  /* their count (>= 1) */
extern const bool                 stats__console_built;   /* false: the "not built" page only */

#endif
