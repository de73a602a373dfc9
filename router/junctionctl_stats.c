/* router/junctionctl_stats.c: junctionctl's commands on the stats registry - stats (current
 * values), list (names, kinds, help) and watch (a subscription, redrawn in place every
 * interval; --json prints each update line as it comes).
 *
 * Threads: one (junctionctl's); watch catches SIGINT and SIGTERM to stop cleanly.
 */
#include "router/junctionctl.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* All values matching glob, in the router's order, as one JSON object (stats.snapshot). */
static cJSON *fetch_values(ctl_conn_t *c, const char *glob)
{
    cJSON *args = cJSON_CreateObject();
    cJSON_AddStringToObject(args, "match", glob);
    long   id = ctl_conn_send(c, "stats.snapshot", args);
    cJSON *all = cJSON_CreateObject();
    for (;;) {
        cJSON *j = ctl_conn_reply(c, id);
        cJSON *vals = cJSON_GetObjectItemCaseSensitive(ctl_reply_result(j), "values");
        while (vals && vals->child) {
            cJSON *e = cJSON_DetachItemViaPointer(vals, vals->child);
            cJSON_AddItemToObject(all, e->string, e);
        }
        bool more = ctl_reply_more(j);
        cJSON_Delete(j);
        if (!more)
            break;
    }
    return all;
}

static void values_table(const cJSON *vals)
{
    static const char *const head[] = {"stat", "value"};
    ctl_table_t              t;
    ctl_table_init(&t, 2, head);
    const cJSON *v;
    cJSON_ArrayForEach(v, vals)
    {
        char *cells[2] = {strdup(v->string), ctl_cell_text(v)};
        ctl_table_row(&t, cells);
    }
    ctl_table_print(stdout, &t);
}

int ctl_cmd_stats(ctl_conn_t *c, const ctl_opts_t *o, const char *glob)
{
    cJSON *vals = fetch_values(c, glob ? glob : "*");
    if (o->json)
        ctl_json_out(vals);
    else
        values_table(vals);
    cJSON_Delete(vals);
    return 0;
}

int ctl_cmd_list(ctl_conn_t *c, const ctl_opts_t *o, const char *glob)
{
    cJSON *all = cJSON_CreateArray();
    char  *cursor = NULL;
    for (;;) {
        cJSON *args = cJSON_CreateObject();
        cJSON_AddStringToObject(args, "match", glob ? glob : "*");
        cJSON_AddNumberToObject(args, "limit", 10000);
        if (cursor)
            cJSON_AddStringToObject(args, "cursor", cursor);
        cJSON *j = ctl_conn_reply(c, ctl_conn_send(c, "stats.list", args));
        cJSON *res = ctl_reply_result(j);
        cJSON *st = cJSON_GetObjectItemCaseSensitive(res, "stats");
        while (st && st->child)
            cJSON_AddItemToArray(all, cJSON_DetachItemViaPointer(st, st->child));
        cJSON *next = cJSON_GetObjectItemCaseSensitive(res, "next");
        free(cursor);
        cursor = cJSON_IsString(next) ? strdup(next->valuestring) : NULL;
        cJSON_Delete(j);
        if (!cursor)
            break;
    }
    if (o->json) {
        ctl_json_out(all);
    } else {
        static const char *const head[] = {"stat", "kind", "help"};
        ctl_table_t              t;
        ctl_table_init(&t, 3, head);
        const cJSON *e;
        cJSON_ArrayForEach(e, all)
        {
            const cJSON *help = cJSON_GetObjectItemCaseSensitive(e, "help");
            char        *cells[3] = {ctl_cell_text(cJSON_GetObjectItemCaseSensitive(e, "name")),
                                     ctl_cell_text(cJSON_GetObjectItemCaseSensitive(e, "kind")),
                                     strdup(cJSON_IsString(help) ? help->valuestring : "")};
            ctl_table_row(&t, cells);
        }
        ctl_table_print(stdout, &t);
    }
    cJSON_Delete(all);
    return 0;
}

static void on_signal(int sig)
{
    (void)sig;
    ctl_interrupted = 1;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void watch_draw(ctl_conn_t *c, const ctl_opts_t *o, const cJSON *vals, bool tty, long draws)
{
    char      when[32];
    time_t    now = time(NULL);
    struct tm tm;
    strftime(when, sizeof(when), "%H:%M:%S", localtime_r(&now, &tm));
    if (tty)
        fputs("\033[H\033[2J", stdout); /* cursor home, clear screen: redraw in place */
    else if (draws > 0)
        fputc('\n', stdout);
    printf("%s  router %s  every %ld ms  %d stats%s\n\n", when, ctl_conn_hello_str(c, "router_id"),
           o->interval_ms, cJSON_GetArraySize(vals), tty ? "  (Ctrl-C to stop)" : "");
    values_table(vals);
    fflush(stdout);
}

/* Subscribe, then redraw every interval (the router sends only what changed; the table keeps
 * the latest value of everything).  --json prints each update line as it comes.  -n counts
 * intervals, the first being the one the first update arrives in. */
int ctl_cmd_watch(ctl_conn_t *c, const ctl_opts_t *o, const char *glob)
{
    bool             tty = isatty(STDOUT_FILENO) && !o->json;
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    cJSON *args = cJSON_CreateObject();
    cJSON_AddStringToObject(args, "match", glob);
    cJSON_AddNumberToObject(args, "interval_ms", (double)o->interval_ms);
    cJSON *j = ctl_conn_reply(c, ctl_conn_send(c, "stats.subscribe", args));
    cJSON *subv = cJSON_GetObjectItemCaseSensitive(ctl_reply_result(j), "sub");
    long   sub = cJSON_IsNumber(subv) ? (long)subv->valuedouble : -1;
    cJSON_Delete(j);

    cJSON   *vals = cJSON_CreateObject(); /* the latest value of everything watched */
    bool     started = false;             /* the first update arrived */
    uint64_t next = 0;                    /* next redraw (ms) */
    long     draws = 0;
    while (!ctl_interrupted) {
        long  wait = started ? (long)(next > now_ms() ? next - now_ms() : 0) : -1;
        char *line = ctl_conn_line(c, wait);
        if (line) {
            cJSON       *u = ctl_conn_parse(c, line);
            const cJSON *s = cJSON_GetObjectItemCaseSensitive(u, "sub");
            ctl_conn_check(c, u);
            if (cJSON_IsNumber(s) && (long)s->valuedouble == sub) {
                if (o->json) {
                    ctl_json_print(stdout, u, 0, 0);
                    fputc('\n', stdout);
                    fflush(stdout);
                }
                cJSON *nv = cJSON_GetObjectItemCaseSensitive(u, "values");
                while (nv && nv->child) {
                    cJSON *e = cJSON_DetachItemViaPointer(nv, nv->child);
                    if (cJSON_GetObjectItemCaseSensitive(vals, e->string))
                        cJSON_ReplaceItemInObjectCaseSensitive(vals, e->string, e);
                    else
                        cJSON_AddItemToObject(vals, e->string, e);
                }
                const cJSON *g;
                cJSON_ArrayForEach(g, cJSON_GetObjectItemCaseSensitive(u, "gone"))
                {
                    if (cJSON_IsString(g))
                        cJSON_DeleteItemFromObjectCaseSensitive(vals, g->valuestring);
                }
                if (!started) {
                    started = true;
                    next = now_ms();
                }
            }
            cJSON_Delete(u);
        }
        if (started && now_ms() >= next) {
            if (!o->json)
                watch_draw(c, o, vals, tty, draws);
            draws++;
            next += (uint64_t)o->interval_ms;
            if (o->count && draws >= o->count)
                break;
        }
    }
    cJSON_Delete(vals);
    return 0;
}
