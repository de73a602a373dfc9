/* router/mgmt/proto_stats.c: the protocol's stats.* operations - stats.list (paged by a
 * cursor), stats.get, stats.snapshot (streamed), stats.subscribe and its updates - on the
 * session of proto.c.  Each reads the registry through a walk; a streamed reply holds an
 * iterator, never the registry's mutex, between lines.
 *
 * Threads: the session's (the admin thread's loop).
 */
#include "router/mgmt/mgmt_int.h"

#include "core/base/base.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

// clang-format off
#define CHUNK_SAMPLES    512         /* values per stats.snapshot line */
#define CHUNK_BYTES      (32u << 10) /* a streamed line ends once it is this long */
#define LIST_LIMIT_DFL   1000        /* stats.list page */
#define LIST_LIMIT_MAX   10000
#define GET_LIMIT_DFL    10000       /* stats.get values before "truncated" */
#define GET_LIMIT_MAX    100000
#define SUB_INTERVAL_DFL 1000        /* ms */
#define SUB_INTERVAL_MIN 10
#define SUB_INTERVAL_MAX 3600000
// clang-format on

static const char *kind_name(stats_kind_t k)
{
    switch (k) {
    case STATS_COUNTER:
        return "counter";
    case STATS_GAUGE:
        return "gauge";
    case STATS_HISTOGRAM:
        return "histogram";
    }
    return "?";
}

/* ---------------------------------------------------------------------------------------
 * stats.list
 * ------------------------------------------------------------------------------------- */

static void list_entry(mgmt_jbuf_t *b, const stats_sample_t *s)
{
    mgmt_jb_lit(b, "{\"name\":");
    mgmt_jb_strn(b, s->name, s->name_len);
    mgmt_jb_lit(b, ",\"kind\":");
    mgmt_jb_str(b, kind_name(s->kind));
    if (s->help) {
        mgmt_jb_lit(b, ",\"help\":");
        mgmt_jb_str(b, s->help);
    }
    if (s->nlabels) {
        mgmt_jb_lit(b, ",\"labels\":{");
        for (unsigned i = 0; i < s->nlabels; i++) {
            if (i)
                mgmt_jb_c(b, ',');
            mgmt_jb_key(b, s->label_keys[i]);
            mgmt_jb_str(b, s->labels[i]);
        }
        mgmt_jb_c(b, '}');
    }
    mgmt_jb_c(b, '}');
}

int mgmt__op_list(const mgmt_preq_t *q)
{
    mgmt_proto_t *m = q->m;
    const char   *glob, *cursor;
    long long     limit;
    if (mgmt__arg_glob(q, "match", false, &glob) < 0)
        return mgmt__bad_arg(q, 400, "argument 'match': expected a non-empty glob string");
    if (mgmt__arg_int(q, "limit", 1, LIST_LIMIT_MAX, LIST_LIMIT_DFL, &limit) < 0)
        return mgmt__bad_arg(q, 400, "argument 'limit': expected an integer from 1 to %d",
                       LIST_LIMIT_MAX);
    if (mgmt__arg_str(q, "cursor", NULL, &cursor) < 0)
        return mgmt__bad_arg(q, 400, "argument 'cursor': expected the string a previous reply "
                               "gave as \"next\"");

    /* A cursor is "<walk>.<position>": the walk this session keeps goes on where it
     * stopped; any other valid cursor (an older walk, another match) walks again from
     * the start and skips what was handed out. */
    uint64_t skip = 0;
    bool     resume = false;
    if (cursor) {
        unsigned seq;
        uint64_t pos;
        int      used = 0;
        if (sscanf(cursor, "%u.%" SCNu64 "%n", &seq, &pos, &used) != 2 ||
            (size_t)used != strlen(cursor))
            return mgmt__bad_arg(q, 400, "argument 'cursor': not a cursor this server handed out");
        resume = m->_list_it && seq == m->_list_seq && pos == m->_list_pos &&
                 strcmp(glob, m->_list_glob) == 0;
        skip = pos;
    }
    if (!resume) {
        mgmt__list_end(m);
        m->_list_it = stats_iter_new(m->_reg, strcmp(glob, "*") ? glob : NULL,
                                     STATS_ITER_NAMES);
        m->_list_glob = base_strdup(glob);
        m->_list_seq++;
        for (; m->_list_pos < skip && stats_iter_next(m->_list_it); m->_list_pos++)
            ;
    }

    mgmt_jbuf_t *b = &m->_line;
    mgmt__line_start(m, q->id);
    mgmt_jb_lit(b, "\"result\":{\"stats\":[");
    long long n = 0;
    const stats_sample_t *s = m->_list_pending;
    m->_list_pending = NULL;
    if (!s)
        s = stats_iter_next(m->_list_it);
    for (; s && n < limit; n++) {
        if (n)
            mgmt_jb_c(b, ',');
        list_entry(b, s);
        s = stats_iter_next(m->_list_it);
    }
    m->_list_pos += (uint64_t)n;
    mgmt_jb_lit(b, "],\"next\":");
    if (s) {
        char next[48];
        m->_list_pending = s;
        snprintf(next, sizeof(next), "%u.%" PRIu64, m->_list_seq, m->_list_pos);
        mgmt_jb_str(b, next);
    } else {
        mgmt_jb_lit(b, "null");
        mgmt__list_end(m);
    }
    mgmt_jb_lit(b, "}}");
    return mgmt__line_send(m, q->write, q->ctx);
}

/* ---------------------------------------------------------------------------------------
 * stats.get
 * ------------------------------------------------------------------------------------- */

int mgmt__op_get(const mgmt_preq_t *q)
{
    mgmt_proto_t *m = q->m;
    const char   *glob;
    long long     limit;
    if (mgmt__arg_glob(q, "match", true, &glob) < 0)
        return mgmt__bad_arg(q, 400, "argument 'match': expected a stat name or glob "
                               "(e.g. \"address.*.deliveriesEgress\")");
    if (mgmt__arg_int(q, "limit", 1, GET_LIMIT_MAX, GET_LIMIT_DFL, &limit) < 0)
        return mgmt__bad_arg(q, 400, "argument 'limit': expected an integer from 1 to %d",
                       GET_LIMIT_MAX);
    stats_iter_t *it = stats_iter_new(m->_reg, strcmp(glob, "*") ? glob : NULL,
                                      STATS_ITER_NAMES);
    mgmt_jbuf_t *b = &m->_line;
    mgmt__line_start(m, q->id);
    mgmt_jb_lit(b, "\"result\":{\"values\":{");
    long long             n = 0;
    const stats_sample_t *s;
    while ((s = stats_iter_next(it)) && n < limit) {
        if (n++)
            mgmt_jb_c(b, ',');
        mgmt_jb_strn(b, s->name, s->name_len);
        mgmt_jb_c(b, ':');
        mgmt_jb_sample(b, s);
    }
    mgmt_jb_c(b, '}');
    if (s)
        mgmt_jb_lit(b, ",\"truncated\":true");
    mgmt_jb_lit(b, "}}");
    stats_iter_free(it);
    return mgmt__line_send(m, q->write, q->ctx);
}

/* The next sample of the snapshot's walk (the read-ahead one first). */
static const stats_sample_t *stream_next(mgmt_stream_t *st)
{
    const stats_sample_t *s = st->pending;
    st->pending = NULL;
    return s ? s : stats_iter_next(st->it);
}

/* One stats.snapshot line; true when it was the last. */
bool mgmt__snapshot_chunk(mgmt_proto_t *m)
{
    mgmt_stream_t *st = &m->_stream;
    mgmt_jbuf_t   *b = &m->_line;
    mgmt_jb_lit(b, "\"result\":{\"values\":{");
    const stats_sample_t *s = stream_next(st);
    for (unsigned n = 0; s; n++) {
        if (n == CHUNK_SAMPLES || b->n >= CHUNK_BYTES) {
            st->pending = s;
            break;
        }
        if (n)
            mgmt_jb_c(b, ',');
        mgmt_jb_strn(b, s->name, s->name_len);
        mgmt_jb_c(b, ':');
        mgmt_jb_sample(b, s);
        s = stats_iter_next(st->it);
    }
    mgmt_jb_lit(b, "}}");
    return st->pending == NULL;
}

int mgmt__op_snapshot(const mgmt_preq_t *q)
{
    mgmt_proto_t *m = q->m;
    const char   *glob;
    if (mgmt__arg_glob(q, "match", false, &glob) < 0)
        return mgmt__bad_arg(q, 400, "argument 'match': expected a non-empty glob string");
    mgmt_stream_t *st = &m->_stream;
    st->kind = MGMT_STREAM_SNAPSHOT;
    st->id = base_strdup(q->id);
    st->it = stats_iter_new(m->_reg, strcmp(glob, "*") ? glob : NULL, STATS_ITER_NAMES);
    return mgmt__stream_chunk(m, q->write, q->ctx);
}

/* ---------------------------------------------------------------------------------------
 * Subscriptions
 * ------------------------------------------------------------------------------------- */

int mgmt__op_subscribe(const mgmt_preq_t *q)
{
    mgmt_proto_t *m = q->m;
    const char   *glob;
    long long     interval;
    if (mgmt__arg_glob(q, "match", true, &glob) < 0)
        return mgmt__bad_arg(q, 400, "argument 'match': expected a stat name or glob");
    if (mgmt__arg_int(q, "interval_ms", SUB_INTERVAL_MIN, SUB_INTERVAL_MAX, SUB_INTERVAL_DFL,
                &interval) < 0)
        return mgmt__bad_arg(q, 400, "argument 'interval_ms': expected an integer from %d to %d",
                       SUB_INTERVAL_MIN, SUB_INTERVAL_MAX);
    unsigned slot = 0;
    while (slot < MGMT_PROTO_MAX_SUBS && m->_subs[slot])
        slot++;
    if (slot == MGMT_PROTO_MAX_SUBS)
        return mgmt__bad_arg(q, 429, "too many subscriptions on this connection (at most %d)",
                       MGMT_PROTO_MAX_SUBS);
    mgmt_sub_t *s = base_calloc(1, sizeof(*s));
    s->id = ++m->_next_sub;
    s->glob = base_strdup(glob);
    s->interval_ms = (uint32_t)interval;
    s->due_ms = 0;
    base_map_init(&s->index);
    m->_subs[slot] = s;

    mgmt__line_start(m, q->id);
    mgmt_jb_lit(&m->_line, "\"result\":{\"sub\":");
    mgmt_jb_u64(&m->_line, s->id);
    mgmt_jb_lit(&m->_line, ",\"interval_ms\":");
    mgmt_jb_u64(&m->_line, s->interval_ms);
    mgmt_jb_lit(&m->_line, "}}");
    return mgmt__line_send(m, q->write, q->ctx);
}

int mgmt__op_unsubscribe(const mgmt_preq_t *q)
{
    mgmt_proto_t *m = q->m;
    long long     id;
    if (mgmt__arg_int(q, "sub", 1, UINT32_MAX, 0, &id) < 0 || id == 0)
        return mgmt__bad_arg(q, 400, "argument 'sub': expected the id stats.subscribe returned");
    for (unsigned i = 0; i < MGMT_PROTO_MAX_SUBS; i++) {
        if (m->_subs[i] && m->_subs[i]->id == (uint32_t)id) {
            mgmt__sub_free(m->_subs[i]);
            m->_subs[i] = NULL;
            mgmt__line_start(m, q->id);
            mgmt_jb_lit(&m->_line, "\"result\":{\"sub\":");
            mgmt_jb_u64(&m->_line, (uint64_t)id);
            mgmt_jb_lit(&m->_line, "}}");
            return mgmt__line_send(m, q->write, q->ctx);
        }
    }
    return mgmt__bad_arg(q, 404, "no subscription %lld on this connection", id);
}

/* The subscription's entry for sample s (a new one, not yet delivered, if unseen). */
static mgmt_sub_ent_t *sub_entry(mgmt_sub_t *s, const stats_sample_t *smp)
{
    uint64_t key = (uint64_t)smp->handle.id << 32 | smp->handle.gen;
    uintptr_t at = (uintptr_t)base_map_uget(&s->index, key);
    if (at)
        return &s->ents[at - 1];
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->ents = base_realloc(s->ents, s->cap * sizeof(*s->ents));
    }
    mgmt_sub_ent_t *e = &s->ents[s->n++];
    memset(e, 0, sizeof(*e));
    e->key = key;
    e->name = base_strndup(smp->name, smp->name_len);
    base_map_uput(&s->index, key, (void *)(uintptr_t)s->n);
    return e;
}

/* After a delivered update: forget the stats that are gone and rebuild the index. */
static void sub_compact(mgmt_sub_t *s)
{
    size_t k = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (s->ents[i].epoch != s->epoch) {
            free(s->ents[i].name);
            continue;
        }
        s->ents[k++] = s->ents[i];
    }
    if (k == s->n)
        return;
    s->n = k;
    base_map_fini(&s->index);
    base_map_init(&s->index);
    for (size_t i = 0; i < s->n; i++)
        base_map_uput(&s->index, s->ents[i].key, (void *)(uintptr_t)(i + 1));
}

/* Walk the subscription's stats and send what changed since the client's last update.  The
 * update is committed (becomes what the client has) only when the write accepts it, so a
 * refused update (-EAGAIN) is not lost: the next one carries the latest values of
 * everything that changed since the last one delivered. */
static int sub_update(mgmt_proto_t *m, mgmt_sub_t *s, stats_write_fn write, void *ctx)
{
    mgmt_jbuf_t *b = &m->_line;
    s->epoch++;
    b->n = 0;
    mgmt_jb_lit(b, "{\"sub\":");
    mgmt_jb_u64(b, s->id);
    mgmt_jb_lit(b, ",\"values\":{");
    stats_iter_t         *it = stats_iter_new(m->_reg, strcmp(s->glob, "*") ? s->glob : NULL,
                                              STATS_ITER_NAMES);
    const stats_sample_t *smp;
    size_t                seen = 0, changed = 0;
    bool                  truncated = false;
    while ((smp = stats_iter_next(it))) {
        if (seen >= MGMT_PROTO_SUB_MAX_STATS) {
            truncated = true;
            break;
        }
        seen++;
        mgmt_sub_ent_t *e = sub_entry(s, smp);
        e->epoch = s->epoch;
        e->cur = smp->value;
        e->cur_sum = smp->sum;
        if (e->delivered && e->cur == e->last && e->cur_sum == e->last_sum)
            continue;
        if (changed++)
            mgmt_jb_c(b, ',');
        mgmt_jb_strn(b, smp->name, smp->name_len);
        mgmt_jb_c(b, ':');
        mgmt_jb_sample(b, smp);
    }
    stats_iter_free(it);
    mgmt_jb_c(b, '}');
    size_t gone = 0;
    for (size_t i = 0; i < s->n; i++) {
        mgmt_sub_ent_t *e = &s->ents[i];
        if (e->epoch == s->epoch || !e->delivered)
            continue;
        mgmt_jb_lit(b, gone++ ? "," : ",\"gone\":[");
        mgmt_jb_str(b, e->name);
    }
    if (gone)
        mgmt_jb_c(b, ']');
    if (truncated)
        mgmt_jb_lit(b, ",\"truncated\":true");
    mgmt_jb_c(b, '}');
    if (!changed && !gone && s->first_sent) {
        b->n = 0;
        sub_compact(s);
        return 0;
    }
    int rc = mgmt__line_send(m, write, ctx);
    if (rc < 0)
        return rc; /* not delivered: the entries keep what the client last got */
    s->first_sent = true;
    for (size_t i = 0; i < s->n; i++) {
        mgmt_sub_ent_t *e = &s->ents[i];
        e->last = e->cur;
        e->last_sum = e->cur_sum;
        e->delivered = true;
    }
    sub_compact(s);
    return 0;
}

int mgmt_proto_tick(mgmt_proto_t *m, uint64_t now_ms, stats_write_fn write, void *ctx)
{
    for (unsigned i = 0; i < MGMT_PROTO_MAX_SUBS; i++) {
        mgmt_sub_t *s = m->_subs[i];
        if (!s || s->due_ms > now_ms)
            continue;
        /* a late tick does not try to catch up: one update, then a full period */
        s->due_ms = now_ms + s->interval_ms;
        int rc = sub_update(m, s, write, ctx);
        if (rc < 0 && rc != -EAGAIN)
            return rc;
    }
    return 0;
}

int64_t mgmt_proto_next_due(const mgmt_proto_t *m, uint64_t now_ms)
{
    int64_t next = -1;
    for (unsigned i = 0; i < MGMT_PROTO_MAX_SUBS; i++) {
        const mgmt_sub_t *s = m->_subs[i];
        if (!s)
            continue;
        int64_t d = s->due_ms <= now_ms ? 0 : (int64_t)(s->due_ms - now_ms);
        if (next < 0 || d < next)
            next = d;
    }
    return next;
}

