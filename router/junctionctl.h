/* router/junctionctl.h: what the files of junctionctl (the management socket's command-line
 * client, its own executable) share, included by them only.  Its files, lowest first:
 *
 *   junctionctl_conn.c   the socket: connect, request and reply lines, errors (and ctl_die)
 *   junctionctl_out.c    output: JSON as the router meant it, aligned tables
 *   junctionctl_stats.c  the commands on the stats registry: stats, list, watch
 *   junctionctl_query.c  the command on entities: query (rows like qdstat's)
 *   junctionctl_ssl.c    the sslprofile command: list, create, update, delete
 *   junctionctl.c        the command line: options, usage, main
 *
 * Threads: one; plain blocking sockets with poll() for timeouts.  Memory is freed on the way
 * out of each command only where it matters (watch runs for long); the process is short.
 */
#ifndef JUNCTION_ROUTER_JUNCTIONCTL_H
#define JUNCTION_ROUTER_JUNCTIONCTL_H

#include <cjson/cJSON.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define CTL_PROG       "junctionctl" /* the prefix of every message on stderr */
#define CTL_EXIT_FAIL  1             /* the router could not be reached or refused */
#define CTL_EXIT_USAGE 2             /* bad command line */

/* ctl_opts_t: the command line's options, as the commands read them. */
typedef struct ctl_opts {
    const char *socket;      /* -s: the management socket's path */
    bool        json;        /* --json: JSON for scripts instead of tables */
    long        interval_ms; /* -i: watch's milliseconds between updates */
    long        count;       /* -n: watch's intervals, 0 = until interrupted */
    long        timeout_ms;  /* -t: how long to wait for a reply */
} ctl_opts_t;

/* SIGINT or SIGTERM arrived (watch installs the handler); ctl_conn_line() stops waiting. */
extern volatile sig_atomic_t ctl_interrupted;

/* ---- junctionctl_conn.c: the socket ---- */

/* Print "junctionctl: <message>" on stderr and exit with `code`. */
__attribute__((format(printf, 2, 3), noreturn)) void ctl_die(int code, const char *fmt, ...);

/* realloc() that dies when memory runs out. */
void *ctl_xrealloc(void *p, size_t n);

/* ctl_conn_t: the connection to the management socket. */
typedef struct ctl_conn {
    int         fd;         /* the socket */
    const char *path;       /* for messages */
    char       *buf;        /* bytes read, not yet returned as lines */
    size_t      len;        /* their count */
    size_t      cap;        /* allocated */
    long        next_id;    /* request ids */
    long        timeout_ms; /* how long to wait for a reply (-t) */
    cJSON      *hello;      /* the server's hello */
} ctl_conn_t;

/* Connect to the socket at `path` (kept, not copied); dies with the reason when it cannot. */
void ctl_conn_open(ctl_conn_t *c, const char *path, long timeout_ms);

/* Read the server's hello (dies on an error reply, e.g. too many clients, or no hello). */
void ctl_conn_hello(ctl_conn_t *c);

/* A string member of the hello ("?" when it has none). */
const char *ctl_conn_hello_str(const ctl_conn_t *c, const char *key);

/* Close the socket and free what the connection holds. */
void ctl_conn_close(ctl_conn_t *c);

/* The next line (NUL-terminated, newline removed; valid until the next call).  Waits at
 * most timeout_ms (< 0: c->timeout_ms, and no reply by then is fatal); returns NULL when a
 * timeout_ms >= 0 ran out or a signal interrupted the wait.  Dies on EOF or error. */
char *ctl_conn_line(ctl_conn_t *c, long timeout_ms);

/* A reply line as a JSON object (the caller deletes it); dies when it is not one. */
cJSON *ctl_conn_parse(ctl_conn_t *c, const char *line);

/* Die with the server's error, if the line is one. */
void ctl_conn_check(ctl_conn_t *c, const cJSON *j);

/* Send a request: the op and the extra members of `args` (consumed). Returns its id. */
long ctl_conn_send(ctl_conn_t *c, const char *op, cJSON *args);

/* The next reply line to request `id` (subscription updates in between are skipped); dies
 * on an error reply.  The caller deletes it. */
cJSON *ctl_conn_reply(ctl_conn_t *c, long id);

/* A reply says more replies to the same request follow. */
bool ctl_reply_more(const cJSON *j);

/* A reply's result member (borrowed from it). */
cJSON *ctl_reply_result(const cJSON *j);

/* ---- junctionctl_out.c: output ---- */

/* JSON with integral numbers written as integers (cJSON would write 1e+15); indent 0 writes
 * one line. */
void ctl_json_print(FILE *f, const cJSON *j, int indent, int depth);

/* j on stdout, indented, and a newline. */
void ctl_json_out(const cJSON *j);

/* A value as a table cell (heap). */
char *ctl_cell_text(const cJSON *v);

/* ctl_table_t: an aligned table: a header, a rule, rows; columns whose cells are all numbers
 * (or "-") are right-aligned. */
typedef struct ctl_table {
    size_t ncols; /* columns */
    char **cells; /* row-major, header first */
    size_t nrows; /* rows, header included */
    size_t cap;   /* rows allocated */
} ctl_table_t;

void ctl_table_init(ctl_table_t *t, size_t ncols, const char *const *header);

/* Add a row of t->ncols cells (takes the strings, not the array). */
void ctl_table_row(ctl_table_t *t, char **cells);

/* Print the table and free its cells. */
void ctl_table_print(FILE *f, ctl_table_t *t);

/* ---- the commands (junctionctl_stats.c, junctionctl_query.c) ----
 * Each returns the exit status (0), or dies with the reason. */

int ctl_cmd_stats(ctl_conn_t *c, const ctl_opts_t *o, const char *glob);
int ctl_cmd_list(ctl_conn_t *c, const ctl_opts_t *o, const char *glob);
int ctl_cmd_watch(ctl_conn_t *c, const ctl_opts_t *o, const char *glob);
int ctl_cmd_query(ctl_conn_t *c, const ctl_opts_t *o, const char *type);

/* sslprofile VERB [NAME [ATTR=VALUE...]]: argv[0] is the verb. */
int ctl_cmd_sslprofile(ctl_conn_t *c, const ctl_opts_t *o, int argc, char **argv);
/* The sslprofile command's words make sense (else: usage). */
bool ctl_sslprofile_usage_ok(int argc, char **argv);

/* `word` is a TYPE the query command knows. */
bool ctl_query_known(const char *word);

#endif
