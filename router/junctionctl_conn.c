/* router/junctionctl_conn.c: junctionctl's connection to the management socket - connect,
 * the hello, request lines out and reply lines in (the protocol is in stats/stats.h,
 * "Management protocol"), and dying with one line on stderr when the router cannot be
 * reached, does not answer or refuses.
 *
 * Threads: one (junctionctl's).
 */
#include "router/junctionctl.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

volatile sig_atomic_t ctl_interrupted;

void ctl_die(int code, const char *fmt, ...)
{
    va_list ap;
    fputs(CTL_PROG ": ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(code);
}

void *ctl_xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (!p)
        ctl_die(CTL_EXIT_FAIL, "out of memory");
    return p;
}

void ctl_conn_open(ctl_conn_t *c, const char *path, long timeout_ms)
{
    memset(c, 0, sizeof(*c));
    c->path = path;
    c->timeout_ms = timeout_ms;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        ctl_die(CTL_EXIT_FAIL, "cannot connect to %s: the path is longer than %zu bytes", path,
                sizeof(sa.sun_path) - 1);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        ctl_die(CTL_EXIT_FAIL, "cannot create a socket: %s", strerror(errno));
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        int e = errno;
        if (e == EACCES || e == EPERM)
            ctl_die(CTL_EXIT_FAIL,
                    "cannot connect to %s: %s \xe2\x80\x94 the socket is mode 0660: run "
                    "as its owner or a member of its group",
                    path, strerror(e));
        ctl_die(CTL_EXIT_FAIL,
                "cannot connect to %s: %s \xe2\x80\x94 is junctiond running with a "
                "management entity?",
                path, strerror(e));
    }
}

char *ctl_conn_line(ctl_conn_t *c, long timeout_ms)
{
    static char  *line;
    static size_t line_cap;
    for (;;) {
        char *nl = c->len ? memchr(c->buf, '\n', c->len) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - c->buf);
            if (n + 1 > line_cap) {
                line_cap = n + 1;
                line = ctl_xrealloc(line, line_cap);
            }
            memcpy(line, c->buf, n);
            line[n] = '\0';
            memmove(c->buf, nl + 1, c->len - n - 1);
            c->len -= n + 1;
            return line;
        }
        if (ctl_interrupted)
            return NULL;
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int           rc = poll(&p, 1, (int)(timeout_ms < 0 ? c->timeout_ms : timeout_ms));
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc < 0)
            ctl_die(CTL_EXIT_FAIL, "%s: %s", c->path, strerror(errno));
        if (rc == 0) {
            if (timeout_ms >= 0)
                return NULL;
            ctl_die(CTL_EXIT_FAIL, "%s: no reply within %ld seconds", c->path,
                    c->timeout_ms / 1000);
        }
        if (c->cap - c->len < 65536) {
            c->cap = c->cap ? c->cap * 2 : 131072;
            c->buf = ctl_xrealloc(c->buf, c->cap);
        }
        ssize_t n = read(c->fd, c->buf + c->len, c->cap - c->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            ctl_die(CTL_EXIT_FAIL, "%s: %s", c->path, strerror(errno));
        if (n == 0)
            ctl_die(CTL_EXIT_FAIL, "%s: junctiond closed the connection", c->path);
        c->len += (size_t)n;
    }
}

cJSON *ctl_conn_parse(ctl_conn_t *c, const char *line)
{
    cJSON *j = cJSON_Parse(line);
    if (!j || !cJSON_IsObject(j))
        ctl_die(CTL_EXIT_FAIL, "%s: not a management reply: %.80s", c->path, line);
    return j;
}

void ctl_conn_check(ctl_conn_t *c, const cJSON *j)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    if (!e)
        return;
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(e, "code");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(e, "message");
    ctl_die(CTL_EXIT_FAIL, "%s: %s (error %d)", c->path,
            cJSON_IsString(msg) ? msg->valuestring : "error",
            cJSON_IsNumber(code) ? (int)code->valuedouble : 0);
}

void ctl_conn_hello(ctl_conn_t *c)
{
    cJSON *j = ctl_conn_parse(c, ctl_conn_line(c, -1));
    ctl_conn_check(c, j); /* e.g. 503: too many clients */
    if (!cJSON_GetObjectItemCaseSensitive(j, "hello"))
        ctl_die(CTL_EXIT_FAIL, "%s: not a junctiond management socket (no hello)", c->path);
    c->hello = j;
}

const char *ctl_conn_hello_str(const ctl_conn_t *c, const char *key)
{
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(c->hello, "hello");
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(h, key);
    return cJSON_IsString(v) ? v->valuestring : "?";
}

long ctl_conn_send(ctl_conn_t *c, const char *op, cJSON *args)
{
    cJSON *r = args ? args : cJSON_CreateObject();
    long   id = ++c->next_id;
    cJSON_AddNumberToObject(r, "id", (double)id);
    cJSON_AddStringToObject(r, "op", op);
    char  *text = cJSON_PrintUnformatted(r);
    size_t n = strlen(text);
    text = ctl_xrealloc(text, n + 2);
    text[n++] = '\n';
    for (size_t off = 0; off < n;) {
        ssize_t w = write(c->fd, text + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            ctl_die(CTL_EXIT_FAIL, "%s: %s", c->path, strerror(errno));
        off += (size_t)w;
    }
    free(text);
    cJSON_Delete(r);
    return id;
}

cJSON *ctl_conn_reply(ctl_conn_t *c, long id)
{
    for (;;) {
        cJSON       *j = ctl_conn_parse(c, ctl_conn_line(c, -1));
        const cJSON *jid = cJSON_GetObjectItemCaseSensitive(j, "id");
        if (cJSON_IsNull(jid))
            ctl_conn_check(c, j);
        if (cJSON_IsNumber(jid) && (long)jid->valuedouble == id) {
            ctl_conn_check(c, j);
            return j;
        }
        cJSON_Delete(j);
    }
}

bool ctl_reply_more(const cJSON *j)
{
    return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "more"));
}

cJSON *ctl_reply_result(const cJSON *j)
{
    return cJSON_GetObjectItemCaseSensitive(j, "result");
}

void ctl_conn_close(ctl_conn_t *c)
{
    cJSON_Delete(c->hello);
    free(c->buf);
    close(c->fd);
}
