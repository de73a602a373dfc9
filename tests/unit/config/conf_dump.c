/* tests/unit/config/conf_dump.c: prints what the `.conf` reader (config/conf.c) makes of each
 * file named on the command line, one line per file:
 *   OK <the list as compact JSON>
 *   ERR <line> <message>
 * For tests/system/test_conf_dialect.py, which compares it with qdrouterd's own reader. */
#include "config/config_int.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    static char buf[1 << 20];

    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            printf("ERR 0 cannot open %s\n", argv[i]);
            continue;
        }
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        cJSON       *root = NULL;
        cfg__lines_t lines;
        int          line = 0;
        char         err[512];
        cfg__lines_init(&lines);
        if (cfg__conf_parse(buf, &root, &lines, &line, err, sizeof(err)) < 0) {
            printf("ERR %d %s\n", line, err);
        } else {
            char *s = cJSON_PrintUnformatted(root);
            printf("OK %s\n", s);
            free(s);
            cJSON_Delete(root);
        }
        cfg__lines_fini(&lines);
    }
    return 0;
}
