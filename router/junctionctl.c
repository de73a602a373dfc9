/* router/junctionctl.c: junctionctl, the command-line client of junctiond's management
 * socket (the protocol is in stats/stats.h, "Management protocol").
 *
 *   junctionctl [-s SOCKET] [--json] stats [GLOB]      current values
 *   junctionctl [-s SOCKET] [--json] list [GLOB]       names, kinds, help
 *   junctionctl [-s SOCKET] [--json] watch GLOB        live values, redrawn in place
 *   junctionctl [-s SOCKET] [--json] query TYPE        router | connections | links | addresses
 *
 * Aligned tables by default, JSON with --json.  Exit status: 0 done, 1 the router could not
 * be reached or refused the request, 2 bad usage.  Every failure is one line on stderr.
 *
 * Threads: one; plain blocking sockets with poll() for timeouts.  Memory is freed on the
 * way out of each command only where it matters (watch runs for long); the process is short.
 */
#include "config/config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "junction_version.h"

#define EXIT_FAIL  1 /* the router could not be reached or refused */
#define EXIT_USAGE 2 /* bad command line */

static const char *prog = "junctionctl";

/* Options. */
static const char *opt_socket;           /* -s */
static bool        opt_json;             /* --json */
static long        opt_interval = 1000;  /* -i, ms */
static long        opt_count;            /* -n, 0 = forever */
static long        opt_timeout_ms = 10000; /* -t */

static volatile sig_atomic_t interrupted; /* SIGINT/SIGTERM during watch */

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: junctionctl [OPTIONS] COMMAND [ARGS]\n"
            "Read a running junctiond's statistics and entities over its management socket.\n"
            "\n"
            "Commands:\n"
            "  stats [GLOB]        current values of the stats matching GLOB (default: all),\n"
            "                      e.g. 'address.*.deliveriesEgress', 'router.*'\n"
            "  list [GLOB]         names, kinds and help of the stats matching GLOB\n"
            "  watch GLOB          live values, redrawn in place until interrupted\n"
            "  query TYPE          rows like qdstat's: router, connections, links, addresses\n"
            "\n"
            "Options:\n"
            "  -s, --socket PATH   the management socket (default: the `management` entity's\n"
            "                      default, /run/junction/junctiond.sock for root, else\n"
            "                      $XDG_RUNTIME_DIR/junction/junctiond.sock)\n"
            "  -j, --json          JSON for scripts instead of tables (watch: one JSON line\n"
            "                      per update, as the router sends it)\n"
            "  -i, --interval MS   watch: milliseconds between updates (default 1000)\n"
            "  -n, --count N       watch: stop after N intervals (default: until interrupted)\n"
            "  -t, --timeout SEC   how long to wait for a reply (default 10)\n"
            "  -v, --version       print the version and exit\n"
            "  -h, --help          print this help and exit\n"
            "\n"
            "A GLOB matches whole stat names: '*' any run of characters (dots included), '?'\n"
            "one character, '\\' quotes the next one.  Exit status: 0 done, 1 the router could\n"
            "not be reached or refused the request, 2 bad usage.\n");
}

__attribute__((format(printf, 2, 3), noreturn)) static void die(int code, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", prog);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(code);
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (!p)
        die(EXIT_FAIL, "out of memory");
    return p;
}

/* ---- the connection ---- */

typedef struct conn {
    int         fd;       /* the socket */
    const char *path;     /* for messages */
    char       *buf;      /* bytes read, not yet returned as lines */
    size_t      len;      /* their count */
    size_t      cap;      /* allocated */
    long        next_id;  /* request ids */
    cJSON      *hello;    /* the server's hello */
} conn_t;

static void conn_open(conn_t *c, const char *path)
{
    memset(c, 0, sizeof(*c));
    c->path = path;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        die(EXIT_FAIL, "cannot connect to %s: the path is longer than %zu bytes", path,
            sizeof(sa.sun_path) - 1);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        die(EXIT_FAIL, "cannot create a socket: %s", strerror(errno));
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        int e = errno;
        if (e == EACCES || e == EPERM)
            die(EXIT_FAIL, "cannot connect to %s: %s \xe2\x80\x94 the socket is mode 0660: run "
                           "as its owner or a member of its group", path, strerror(e));
        die(EXIT_FAIL, "cannot connect to %s: %s \xe2\x80\x94 is junctiond running with a "
                       "management entity?", path, strerror(e));
    }
}

/* The next line (NUL-terminated, newline removed; valid until the next call).  Waits at
 * most timeout_ms (< 0: opt_timeout_ms, and no reply by then is fatal); returns NULL when a
 * timeout_ms >= 0 ran out or a signal interrupted the wait.  Dies on EOF or error. */
static char *conn_line(conn_t *c, long timeout_ms)
{
    static char  *line;
    static size_t line_cap;
    for (;;) {
        char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - c->buf);
            if (n + 1 > line_cap) {
                line_cap = n + 1;
                line = xrealloc(line, line_cap);
            }
            memcpy(line, c->buf, n);
            line[n] = '\0';
            memmove(c->buf, nl + 1, c->len - n - 1);
            c->len -= n + 1;
            return line;
        }
        if (interrupted)
            return NULL;
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int rc = poll(&p, 1, (int)(timeout_ms < 0 ? opt_timeout_ms : timeout_ms));
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc < 0)
            die(EXIT_FAIL, "%s: %s", c->path, strerror(errno));
        if (rc == 0) {
            if (timeout_ms >= 0)
                return NULL;
            die(EXIT_FAIL, "%s: no reply within %ld seconds", c->path, opt_timeout_ms / 1000);
        }
        if (c->cap - c->len < 65536) {
            c->cap = c->cap ? c->cap * 2 : 131072;
            c->buf = xrealloc(c->buf, c->cap);
        }
        ssize_t n = read(c->fd, c->buf + c->len, c->cap - c->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            die(EXIT_FAIL, "%s: %s", c->path, strerror(errno));
        if (n == 0)
            die(EXIT_FAIL, "%s: junctiond closed the connection", c->path);
        c->len += (size_t)n;
    }
}

static cJSON *parse_line(conn_t *c, const char *line)
{
    cJSON *j = cJSON_Parse(line);
    if (!j || !cJSON_IsObject(j))
        die(EXIT_FAIL, "%s: not a management reply: %.80s", c->path, line);
    return j;
}

/* Die with the server's error, if the line is one. */
static void check_error(conn_t *c, const cJSON *j)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    if (!e)
        return;
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(e, "message");
    die(EXIT_FAIL, "%s: %s (error %d)", c->path,
        cJSON_IsString(msg) ? msg->valuestring : "error",
        cJSON_IsNumber(code) ? (int)code->valuedouble : 0);
}

static void conn_hello(conn_t *c)
{
    cJSON *j = parse_line(c, conn_line(c, -1));
    check_error(c, j); /* e.g. 503: too many clients */
    if (!cJSON_GetObjectItemCaseSensitive(j, "hello"))
        die(EXIT_FAIL, "%s: not a junctiond management socket (no hello)", c->path);
    c->hello = j;
}

static const char *hello_str(const conn_t *c, const char *key)
{
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(c->hello, "hello");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(h, key);
    return cJSON_IsString(v) ? v->valuestring : "?";
}

/* Send a request: the op and the extra members of `args` (consumed). Returns its id. */
static long conn_send(conn_t *c, const char *op, cJSON *args)
{
    cJSON *r = args ? args : cJSON_CreateObject();
    long   id = ++c->next_id;
    cJSON_AddNumberToObject(r, "id", (double)id);
    cJSON_AddStringToObject(r, "op", op);
    char  *text = cJSON_PrintUnformatted(r);
    size_t n = strlen(text);
    text = xrealloc(text, n + 2);
    text[n++] = '\n';
    for (size_t off = 0; off < n;) {
        ssize_t w = write(c->fd, text + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            die(EXIT_FAIL, "%s: %s", c->path, strerror(errno));
        off += (size_t)w;
    }
    free(text);
    cJSON_Delete(r);
    return id;
}

/* The next reply line to request `id` (subscription updates in between are skipped); dies
 * on an error reply. */
static cJSON *conn_reply(conn_t *c, long id)
{
    for (;;) {
        cJSON       *j = parse_line(c, conn_line(c, -1));
        const cJSON *jid = cJSON_GetObjectItemCaseSensitive(j, "id");
        if (cJSON_IsNull(jid))
            check_error(c, j);
        if (cJSON_IsNumber(jid) && (long)jid->valuedouble == id) {
            check_error(c, j);
            return j;
        }
        cJSON_Delete(j);
    }
}

static bool reply_more(const cJSON *j)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "more"));
}

static cJSON *result_of(const cJSON *j)
{
    return cJSON_GetObjectItemCaseSensitive(j, "result");
}

/* ---- output ---- */

/* A number as text: integers exactly (as far as a double holds them), others short. */
static void num_text(double d, char *buf, size_t n)
{
    if (!isfinite(d))
        snprintf(buf, n, "null");
    else if (d == floor(d) && fabs(d) < 1.8e19)
        snprintf(buf, n, "%.0f", d);
    else
        snprintf(buf, n, "%.6g", d);
}

/* A JSON string (the text came from valid JSON, so it is UTF-8 already). */
static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch == '\n')
            fputs("\\n", f);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

/* JSON with integral numbers written as integers (cJSON would write 1e+15). */
static void json_print(FILE *f, const cJSON *j, int indent, int depth)
{
    char num[64];
    if (cJSON_IsObject(j) || cJSON_IsArray(j)) {
        bool         obj = cJSON_IsObject(j);
        const cJSON *e;
        int          i = 0;
        fputc(obj ? '{' : '[', f);
        cJSON_ArrayForEach(e, j)
        {
            if (i++)
                fputc(',', f);
            if (indent)
                fprintf(f, "\n%*s", indent * (depth + 1), "");
            if (obj) {
                json_string(f, e->string);
                fputs(indent ? ": " : ":", f);
            }
            json_print(f, e, indent, depth + 1);
        }
        if (indent && i)
            fprintf(f, "\n%*s", indent * depth, "");
        fputc(obj ? '}' : ']', f);
    } else if (cJSON_IsNumber(j)) {
        num_text(j->valuedouble, num, sizeof(num));
        fputs(num, f);
    } else if (cJSON_IsString(j)) {
        json_string(f, j->valuestring);
    } else {
        char *t = cJSON_PrintUnformatted(j);
        fputs(t, f);
        free(t);
    }
}

static void json_out(const cJSON *j)
{
    json_print(stdout, j, 2, 0);
    fputc('\n', stdout);
}

/* A value as a table cell. */
static char *cell_text(const cJSON *v)
{
    char buf[256];
    if (!v || cJSON_IsNull(v)) {
        snprintf(buf, sizeof(buf), "-");
    } else if (cJSON_IsNumber(v)) {
        num_text(v->valuedouble, buf, sizeof(buf));
    } else if (cJSON_IsString(v)) {
        return strdup(v->valuestring);
    } else if (cJSON_IsBool(v)) {
        snprintf(buf, sizeof(buf), "%s", cJSON_IsTrue(v) ? "true" : "false");
    } else if (cJSON_IsObject(v) && cJSON_GetObjectItemCaseSensitive(v, "count")) {
        /* a histogram */
        char c[32], s[32], p50[32], p99[32];
        num_text(cJSON_GetObjectItemCaseSensitive(v, "count")->valuedouble, c, sizeof(c));
        const cJSON *sum = cJSON_GetObjectItemCaseSensitive(v, "sum");
        const cJSON *q50 = cJSON_GetObjectItemCaseSensitive(v, "p50");
        const cJSON *q99 = cJSON_GetObjectItemCaseSensitive(v, "p99");
        num_text(cJSON_IsNumber(sum) ? sum->valuedouble : 0, s, sizeof(s));
        num_text(cJSON_IsNumber(q50) ? q50->valuedouble : 0, p50, sizeof(p50));
        num_text(cJSON_IsNumber(q99) ? q99->valuedouble : 0, p99, sizeof(p99));
        snprintf(buf, sizeof(buf), "count=%s sum=%s p50=%s p99=%s", c, s, p50, p99);
    } else {
        char *t = cJSON_PrintUnformatted(v);
        return t;
    }
    return strdup(buf);
}

/* An aligned table: a header, a rule, rows; columns whose cells are all numbers (or "-") are
 * right-aligned. */
typedef struct table {
    size_t  ncols;  /* columns */
    char  **cells;  /* row-major, header first */
    size_t  nrows;  /* rows, header included */
    size_t  cap;    /* rows allocated */
} table_t;

static void table_init(table_t *t, size_t ncols, const char *const *header)
{
    memset(t, 0, sizeof(*t));
    t->ncols = ncols;
    t->cap = 16;
    t->cells = xrealloc(NULL, t->cap * ncols * sizeof(char *));
    for (size_t i = 0; i < ncols; i++)
        t->cells[i] = strdup(header[i]);
    t->nrows = 1;
}

/* Add a row (takes the strings). */
static void table_row(table_t *t, char **cells)
{
    if (t->nrows == t->cap) {
        t->cap *= 2;
        t->cells = xrealloc(t->cells, t->cap * t->ncols * sizeof(char *));
    }
    memcpy(&t->cells[t->nrows * t->ncols], cells, t->ncols * sizeof(char *));
    t->nrows++;
}

static bool is_numeric(const char *s)
{
    if (strcmp(s, "-") == 0)
        return true;
    if (*s == '-')
        s++;
    if (!*s)
        return false;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || *s == '.' || *s == 'e' || *s == '+'))
            return false;
    return true;
}

/* Display width of UTF-8 text: code points (good enough for labels). */
static size_t text_width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        w += ((unsigned char)*s & 0xc0) != 0x80;
    return w;
}

static void table_print(FILE *f, table_t *t)
{
    size_t *w = calloc(t->ncols, sizeof(size_t));
    bool   *right = calloc(t->ncols, sizeof(bool));
    for (size_t c = 0; c < t->ncols; c++) {
        right[c] = t->nrows > 1;
        for (size_t r = 0; r < t->nrows; r++) {
            const char *s = t->cells[r * t->ncols + c];
            if (text_width(s) > w[c])
                w[c] = text_width(s);
            if (r > 0 && !is_numeric(s))
                right[c] = false;
        }
    }
    for (size_t r = 0; r < t->nrows; r++) {
        for (size_t c = 0; c < t->ncols; c++) {
            const char *s = t->cells[r * t->ncols + c];
            size_t      pad = w[c] - text_width(s);
            bool        last = c + 1 == t->ncols;
            if (right[c])
                fprintf(f, "%*s%s", (int)pad, "", s);
            else
                fprintf(f, "%s%*s", s, last ? 0 : (int)pad, "");
            if (!last)
                fputs("  ", f);
        }
        fputc('\n', f);
        if (r == 0) {
            size_t total = 0;
            for (size_t c = 0; c < t->ncols; c++)
                total += w[c] + (c + 1 < t->ncols ? 2 : 0);
            for (size_t i = 0; i < total; i++)
                fputc('=', f);
            fputc('\n', f);
        }
    }
    for (size_t i = 0; i < t->nrows * t->ncols; i++)
        free(t->cells[i]);
    free(t->cells);
    free(w);
    free(right);
}

/* ---- commands ---- */

/* All values matching glob, in the router's order, as one JSON object (stats.snapshot). */
static cJSON *fetch_values(conn_t *c, const char *glob)
{
    cJSON *args = cJSON_CreateObject();
    cJSON_AddStringToObject(args, "match", glob);
    long   id = conn_send(c, "stats.snapshot", args);
    cJSON *all = cJSON_CreateObject();
    for (;;) {
        cJSON *j = conn_reply(c, id);
        cJSON *vals = cJSON_GetObjectItemCaseSensitive(result_of(j), "values");
        while (vals && vals->child) {
            cJSON *e = cJSON_DetachItemViaPointer(vals, vals->child);
            cJSON_AddItemToObject(all, e->string, e);
        }
        bool more = reply_more(j);
        cJSON_Delete(j);
        if (!more)
            break;
    }
    return all;
}

static void values_table(const cJSON *vals)
{
    static const char *const head[] = {"stat", "value"};
    table_t                  t;
    table_init(&t, 2, head);
    const cJSON *v;
    cJSON_ArrayForEach(v, vals)
    {
        char *cells[2] = {strdup(v->string), cell_text(v)};
        table_row(&t, cells);
    }
    table_print(stdout, &t);
}

static int cmd_stats(conn_t *c, const char *glob)
{
    cJSON *vals = fetch_values(c, glob ? glob : "*");
    if (opt_json)
        json_out(vals);
    else
        values_table(vals);
    cJSON_Delete(vals);
    return 0;
}

static int cmd_list(conn_t *c, const char *glob)
{
    cJSON *all = cJSON_CreateArray();
    char  *cursor = NULL;
    for (;;) {
        cJSON *args = cJSON_CreateObject();
        cJSON_AddStringToObject(args, "match", glob ? glob : "*");
        cJSON_AddNumberToObject(args, "limit", 10000);
        if (cursor)
            cJSON_AddStringToObject(args, "cursor", cursor);
        cJSON *j = conn_reply(c, conn_send(c, "stats.list", args));
        cJSON *res = result_of(j);
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
    if (opt_json) {
        json_out(all);
    } else {
        static const char *const head[] = {"stat", "kind", "help"};
        table_t                  t;
        table_init(&t, 3, head);
        const cJSON *e;
        cJSON_ArrayForEach(e, all)
        {
            const cJSON *help = cJSON_GetObjectItemCaseSensitive(e, "help");
            char *cells[3] = {cell_text(cJSON_GetObjectItemCaseSensitive(e, "name")),
                              cell_text(cJSON_GetObjectItemCaseSensitive(e, "kind")),
                              strdup(cJSON_IsString(help) ? help->valuestring : "")};
            table_row(&t, cells);
        }
        table_print(stdout, &t);
    }
    cJSON_Delete(all);
    return 0;
}

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void watch_draw(conn_t *c, const cJSON *vals, bool tty, long draws)
{
    char      when[32];
    time_t    now = time(NULL);
    struct tm tm;
    strftime(when, sizeof(when), "%H:%M:%S", localtime_r(&now, &tm));
    if (tty)
        fputs("\033[H\033[2J", stdout); /* cursor home, clear screen: redraw in place */
    else if (draws > 0)
        fputc('\n', stdout);
    printf("%s  router %s  every %ld ms  %d stats%s\n\n", when, hello_str(c, "router_id"),
           opt_interval, cJSON_GetArraySize(vals), tty ? "  (Ctrl-C to stop)" : "");
    values_table(vals);
    fflush(stdout);
}

/* Subscribe, then redraw every interval (the router sends only what changed; the table keeps
 * the latest value of everything).  --json prints each update line as it comes.  -n counts
 * intervals, the first being the one the first update arrives in. */
static int cmd_watch(conn_t *c, const char *glob)
{
    bool             tty = isatty(STDOUT_FILENO) && !opt_json;
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    cJSON *args = cJSON_CreateObject();
    cJSON_AddStringToObject(args, "match", glob);
    cJSON_AddNumberToObject(args, "interval_ms", (double)opt_interval);
    cJSON *j = conn_reply(c, conn_send(c, "stats.subscribe", args));
    cJSON *subv = cJSON_GetObjectItemCaseSensitive(result_of(j), "sub");
    long   sub = cJSON_IsNumber(subv) ? (long)subv->valuedouble : -1;
    cJSON_Delete(j);

    cJSON   *vals = cJSON_CreateObject(); /* the latest value of everything watched */
    bool     started = false;             /* the first update arrived */
    uint64_t next = 0;                    /* next redraw (ms) */
    long     draws = 0;
    while (!interrupted) {
        long  wait = started ? (long)(next > now_ms() ? next - now_ms() : 0) : -1;
        char *line = conn_line(c, wait);
        if (line) {
            cJSON       *u = parse_line(c, line);
            const cJSON *s = cJSON_GetObjectItemCaseSensitive(u, "sub");
            check_error(c, u);
            if (cJSON_IsNumber(s) && (long)s->valuedouble == sub) {
                if (opt_json) {
                    json_print(stdout, u, 0, 0);
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
            if (!opt_json)
                watch_draw(c, vals, tty, draws);
            draws++;
            next += (uint64_t)opt_interval;
            if (opt_count && draws >= opt_count)
                break;
        }
    }
    cJSON_Delete(vals);
    return 0;
}

/* A router address hash key (M0examples) as qdstat shows it: class, address, phase. */
static void addr_split(const char *key, char **cls, char **addr, char **phase)
{
    static const struct {
        char        c;
        const char *name;
    } classes[] = {{'M', "mobile"}, {'L', "local"},    {'T', "topo"},     {'R', "router"},
                   {'A', "area"},   {'C', "link-in"},  {'D', "link-out"}, {'E', "edge"},
                   {'H', "edge"}};
    *cls = strdup("-");
    *addr = strdup(key && *key ? key : "-");
    *phase = strdup("-");
    if (!key || !*key)
        return;
    for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++) {
        if (key[0] != classes[i].c)
            continue;
        free(*cls);
        free(*addr);
        *cls = strdup(classes[i].name);
        if (key[0] == 'M' && key[1] >= '0' && key[1] <= '9') {
            free(*phase);
            *phase = strndup(key + 1, 1);
            *addr = strdup(key + 2);
        } else {
            *addr = strdup(key + 1);
        }
        return;
    }
}

/* What a query TYPE shows: the columns of the table (header, attribute; "" = computed). */
typedef struct qcol {
    const char *head; /* column header */
    const char *attr; /* attribute, or a computed column ("@class", "@addr", "@phs", "@up") */
} qcol_t;

// clang-format off
static const qcol_t conn_qcols[] = {
    {"id", "identity"}, {"host", "host"}, {"container", "container"}, {"role", "role"},
    {"proto", "protocol"}, {"dir", "dir"}, {"in", "deliveriesIn"}, {"out", "deliveriesOut"},
    {"uptime", "@up"},
};
static const qcol_t link_qcols[] = {
    {"type", "linkType"}, {"dir", "linkDir"}, {"conn id", "connectionId"}, {"id", "identity"},
    {"class", "@class"}, {"addr", "@addr"}, {"phs", "@phs"}, {"cap", "capacity"},
    {"undel", "undeliveredCount"}, {"unsett", "unsettledCount"}, {"deliv", "deliveryCount"},
    {"presett", "presettledCount"}, {"psdrop", "droppedPresettledCount"},
    {"acc", "acceptedCount"}, {"rej", "rejectedCount"}, {"rel", "releasedCount"},
    {"mod", "modifiedCount"}, {"cred", "creditAvailable"},
};
static const qcol_t addr_qcols[] = {
    {"class", "@class"}, {"addr", "@addr"}, {"phs", "@phs"}, {"distrib", "distribution"},
    {"local", "subscriberCount"}, {"senders", "senderCount"}, {"in", "deliveriesIngress"},
    {"out", "deliveriesEgress"}, {"thru", "deliveriesTransit"},
};
// clang-format on

static const char *query_type(const char *word, const qcol_t **cols, size_t *ncols,
                              const char **key_attr)
{
    static const struct {
        const char   *words[3];
        const char   *type;
        const qcol_t *cols;
        size_t        ncols;
        const char   *key; /* attribute holding the address key for @class etc. */
    } types[] = {
        {{"connections", "connection", "conn"}, "connection", conn_qcols,
         sizeof(conn_qcols) / sizeof(conn_qcols[0]), NULL},
        {{"links", "link", "router.link"}, "link", link_qcols,
         sizeof(link_qcols) / sizeof(link_qcols[0]), "owningAddr"},
        {{"addresses", "address", "router.address"}, "address", addr_qcols,
         sizeof(addr_qcols) / sizeof(addr_qcols[0]), "key"},
        {{"router", "general", NULL}, "router", NULL, 0, NULL},
    };
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        for (size_t k = 0; k < 3 && types[i].words[k]; k++) {
            if (strcmp(word, types[i].words[k]) == 0) {
                *cols = types[i].cols;
                *ncols = types[i].ncols;
                *key_attr = types[i].key;
                return types[i].type;
            }
        }
    }
    return NULL;
}

static const cJSON *row_attr(const cJSON *names, const cJSON *row, const char *attr)
{
    int i = 0;
    const cJSON *n;
    cJSON_ArrayForEach(n, names)
    {
        if (cJSON_IsString(n) && strcmp(n->valuestring, attr) == 0)
            return cJSON_GetArrayItem(row, i);
        i++;
    }
    return NULL;
}

static char *uptime_text(const cJSON *v)
{
    char buf[64];
    if (!cJSON_IsNumber(v))
        return strdup("-");
    long s = (long)v->valuedouble;
    snprintf(buf, sizeof(buf), "%03ld:%02ld:%02ld:%02ld", s / 86400, s / 3600 % 24, s / 60 % 60,
             s % 60);
    return strdup(buf);
}

static int cmd_query(conn_t *c, const char *word)
{
    const qcol_t *cols;
    size_t        ncols;
    const char   *key_attr;
    const char   *type = query_type(word, &cols, &ncols, &key_attr);
    if (!type)
        die(EXIT_USAGE, "query: unknown type '%s' (expected router, connections, links or "
                        "addresses)", word);
    cJSON *args = cJSON_CreateObject();
    cJSON_AddStringToObject(args, "type", type);
    long   id = conn_send(c, "entity.query", args);
    cJSON *names = NULL;
    cJSON *rows = cJSON_CreateArray();
    for (;;) {
        cJSON *j = conn_reply(c, id);
        cJSON *res = result_of(j);
        if (!names)
            names = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(res, "attributeNames"),
                                    true);
        cJSON *r = cJSON_GetObjectItemCaseSensitive(res, "results");
        while (r && r->child)
            cJSON_AddItemToArray(rows, cJSON_DetachItemViaPointer(r, r->child));
        bool more = reply_more(j);
        cJSON_Delete(j);
        if (!more)
            break;
    }
    if (!names)
        names = cJSON_CreateArray();

    if (opt_json) {
        /* rows as objects: {attribute: value} */
        cJSON       *out = cJSON_CreateArray();
        const cJSON *row;
        cJSON_ArrayForEach(row, rows)
        {
            cJSON       *o = cJSON_CreateObject();
            const cJSON *n;
            int          i = 0;
            cJSON_ArrayForEach(n, names)
            {
                cJSON_AddItemToObject(o, n->valuestring,
                                      cJSON_Duplicate(cJSON_GetArrayItem(row, i++), true));
            }
            cJSON_AddItemToArray(out, o);
        }
        if (strcmp(type, "router") == 0 && cJSON_GetArraySize(out) == 1)
            json_out(cJSON_GetArrayItem(out, 0));
        else
            json_out(out);
        cJSON_Delete(out);
    } else if (!cols) {
        /* the router: one row, shown as attribute / value lines (qdstat -g) */
        static const char *const head[] = {"attribute", "value"};
        table_t                  t;
        table_init(&t, 2, head);
        const cJSON *row = cJSON_GetArrayItem(rows, 0);
        const cJSON *n;
        int          i = 0;
        cJSON_ArrayForEach(n, names)
        {
            const cJSON *v = cJSON_GetArrayItem(row, i++);
            char *cells[2] = {strdup(n->valuestring),
                              strcmp(n->valuestring, "uptimeSeconds") == 0 ? uptime_text(v)
                                                                           : cell_text(v)};
            table_row(&t, cells);
        }
        table_print(stdout, &t);
    } else {
        const char **head = calloc(ncols, sizeof(char *));
        for (size_t k = 0; k < ncols; k++)
            head[k] = cols[k].head;
        table_t t;
        table_init(&t, ncols, head);
        free(head);
        const cJSON *row;
        cJSON_ArrayForEach(row, rows)
        {
            char **cells = calloc(ncols, sizeof(char *));
            char  *cls = NULL, *addr = NULL, *phs = NULL;
            if (key_attr) {
                const cJSON *k = row_attr(names, row, key_attr);
                addr_split(cJSON_IsString(k) ? k->valuestring : NULL, &cls, &addr, &phs);
            }
            for (size_t k = 0; k < ncols; k++) {
                const char *a = cols[k].attr;
                if (strcmp(a, "@class") == 0)
                    cells[k] = strdup(cls);
                else if (strcmp(a, "@addr") == 0)
                    cells[k] = strdup(addr);
                else if (strcmp(a, "@phs") == 0)
                    cells[k] = strdup(phs);
                else if (strcmp(a, "@up") == 0)
                    cells[k] = uptime_text(row_attr(names, row, "uptimeSeconds"));
                else
                    cells[k] = cell_text(row_attr(names, row, a));
            }
            free(cls);
            free(addr);
            free(phs);
            table_row(&t, cells);
            free(cells);
        }
        table_print(stdout, &t);
    }
    cJSON_Delete(rows);
    cJSON_Delete(names);
    return 0;
}

static long parse_long(const char *opt, const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        die(EXIT_USAGE, "%s: expected a number from %ld to %ld, got '%s'", opt, min, max, s);
    return v;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'},   {"json", no_argument, NULL, 'j'},
        {"interval", required_argument, NULL, 'i'}, {"count", required_argument, NULL, 'n'},
        {"timeout", required_argument, NULL, 't'},  {"version", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "s:ji:n:t:vh", opts, NULL)) != -1) {
        switch (ch) {
        case 's':
            opt_socket = optarg;
            break;
        case 'j':
            opt_json = true;
            break;
        case 'i':
            opt_interval = parse_long("--interval", optarg, 10, 3600000);
            break;
        case 'n':
            opt_count = parse_long("--count", optarg, 1, 1000000000);
            break;
        case 't':
            opt_timeout_ms = parse_long("--timeout", optarg, 1, 86400) * 1000;
            break;
        case 'v':
            printf("%s\n", JUNCTION_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "%s: no command given\n", prog);
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[optind++];
    int         nargs = argc - optind;
    const char *arg = nargs > 0 ? argv[optind] : NULL;
    int (*run)(conn_t *, const char *) = NULL;
    if (strcmp(cmd, "stats") == 0 && nargs <= 1) {
        run = cmd_stats;
    } else if (strcmp(cmd, "list") == 0 && nargs <= 1) {
        run = cmd_list;
    } else if (strcmp(cmd, "watch") == 0 && nargs == 1) {
        run = cmd_watch;
    } else if (strcmp(cmd, "query") == 0 && nargs == 1) {
        const qcol_t *cols;
        size_t        ncols;
        const char   *key;
        if (!query_type(arg, &cols, &ncols, &key))
            die(EXIT_USAGE, "query: unknown type '%s' (expected router, connections, links or "
                            "addresses)", arg);
        run = cmd_query;
    } else if (strcmp(cmd, "stats") == 0 || strcmp(cmd, "list") == 0 ||
               strcmp(cmd, "watch") == 0 || strcmp(cmd, "query") == 0) {
        fprintf(stderr, "%s: %s: wrong number of arguments\n", prog, cmd);
        usage(stderr);
        return EXIT_USAGE;
    } else {
        fprintf(stderr, "%s: unknown command '%s'\n", prog, cmd);
        usage(stderr);
        return EXIT_USAGE;
    }

    char path[CFG_SOCKET_PATH_MAX + 1];
    if (!opt_socket) {
        int rc = cfg_management_default_socket(path, sizeof(path));
        if (rc == -ENOENT)
            die(EXIT_USAGE, "no socket given (-s) and XDG_RUNTIME_DIR is not set");
        if (rc < 0)
            die(EXIT_USAGE, "no socket given (-s) and the default path is too long");
        opt_socket = path;
    }
    signal(SIGPIPE, SIG_IGN);
    conn_t c;
    conn_open(&c, opt_socket);
    conn_hello(&c);
    int rc = run(&c, arg);
    fflush(stdout);
    if (ferror(stdout))
        die(EXIT_FAIL, "cannot write the output: %s", strerror(errno));
    cJSON_Delete(c.hello);
    free(c.buf);
    close(c.fd);
    return rc;
}
