/* router/conn_watch.c: the table of connections to containers (conn_watch.h).
 *
 * Threads: _new/_free/_set on the owner's thread; _find_* on any thread; _opened_WT and
 * _closed_WT on the connection's worker.  `lock` guards the list; the callback is called
 * with it released (it may call _find_*).
 */
#include "router/conn_watch.h"

#include "core/base/base.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    rtr_conn_info_t ci;   /* the connection */
    struct entry   *next; /* in the list, oldest first */
} entry_t;

struct rtr_conn_watch {
    pthread_mutex_t   lock;   /* guards head */
    entry_t          *head;   /* [lock] open connections, oldest first */
    rtr_conn_watch_fn fn;     /* immutable once the workers run */
    void             *fn_arg; /* its first argument */
};

rtr_conn_watch_t *rtr_conn_watch_new(void)
{
    rtr_conn_watch_t *w = base_calloc(1, sizeof(*w));
    pthread_mutex_init(&w->lock, NULL);
    return w;
}

void rtr_conn_watch_free(rtr_conn_watch_t *w)
{
    if (!w)
        return;
    while (w->head) {
        entry_t *e = w->head;
        w->head = e->next;
        free(e);
    }
    pthread_mutex_destroy(&w->lock);
    free(w);
}

void rtr_conn_watch_set(rtr_conn_watch_t *w, rtr_conn_watch_fn fn, void *arg)
{
    w->fn = fn;
    w->fn_arg = arg;
}

static bool find(rtr_conn_watch_t *w, const char *connector, const char *container,
                 rtr_conn_info_t *out)
{
    bool found = false;
    pthread_mutex_lock(&w->lock);
    for (entry_t *e = w->head; e && !found; e = e->next) {
        if ((connector && strcmp(e->ci.connector, connector) == 0) ||
            (container && strcmp(e->ci.container, container) == 0)) {
            *out = e->ci;
            found = true;
        }
    }
    pthread_mutex_unlock(&w->lock);
    return found;
}

bool rtr_conn_watch_find_connector(rtr_conn_watch_t *w, const char *name, rtr_conn_info_t *out)
{
    return w && name && *name && find(w, name, NULL, out);
}

bool rtr_conn_watch_find_container(rtr_conn_watch_t *w, const char *container, rtr_conn_info_t *out)
{
    return w && container && *container && find(w, NULL, container, out);
}

void rtr_conn_watch_opened_WT(rtr_conn_watch_t *w, const rtr_conn_info_t *ci)
{
    if (!w)
        return;
    entry_t *e = base_calloc(1, sizeof(*e));
    e->ci = *ci;
    pthread_mutex_lock(&w->lock);
    entry_t **pp = &w->head;
    while (*pp)
        pp = &(*pp)->next;
    *pp = e;
    pthread_mutex_unlock(&w->lock);
    if (w->fn)
        w->fn(w->fn_arg, ci, true);
}

void rtr_conn_watch_closed_WT(rtr_conn_watch_t *w, uint64_t id)
{
    if (!w)
        return;
    entry_t *gone = NULL;
    pthread_mutex_lock(&w->lock);
    for (entry_t **pp = &w->head; *pp; pp = &(*pp)->next) {
        if ((*pp)->ci.id == id) {
            gone = *pp;
            *pp = gone->next;
            break;
        }
    }
    pthread_mutex_unlock(&w->lock);
    if (!gone)
        return;
    if (w->fn)
        w->fn(w->fn_arg, &gone->ci, false);
    free(gone);
}
