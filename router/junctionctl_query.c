/* router/junctionctl_query.c: junctionctl's query command - the rows of an entity type
 * (router, connections, links, addresses) over entity.query, shown as qdstat shows them
 * (its columns, an address key split into class, address and phase) or as JSON objects.
 *
 * Threads: one (junctionctl's).
 */
#include "router/junctionctl.h"

#include <stdlib.h>
#include <string.h>

/* A router address hash key (M0examples) as qdstat shows it: class, address, phase. */
static void addr_split(const char *key, char **cls, char **addr, char **phase)
{
    static const struct {
        char        c;
        const char *name;
    } classes[] = {{'M', "mobile"},   {'L', "local"}, {'T', "topo"},
                   {'R', "router"},   {'A', "area"},  {'C', "link-in"},
                   {'D', "link-out"}, {'E', "edge"},  {'H', "edge"}};
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
        {{"connections", "connection", "conn"},
         "connection",
         conn_qcols,
         sizeof(conn_qcols) / sizeof(conn_qcols[0]),
         NULL},
        {{"links", "link", "router.link"},
         "link",
         link_qcols,
         sizeof(link_qcols) / sizeof(link_qcols[0]),
         "owningAddr"},
        {{"addresses", "address", "router.address"},
         "address",
         addr_qcols,
         sizeof(addr_qcols) / sizeof(addr_qcols[0]),
         "key"},
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
    int          i = 0;
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

int ctl_cmd_query(ctl_conn_t *c, const ctl_opts_t *o, const char *word)
{
    const qcol_t *cols;
    size_t        ncols;
    const char   *key_attr;
    const char   *type = query_type(word, &cols, &ncols, &key_attr);
    if (!type)
        ctl_die(CTL_EXIT_USAGE,
                "query: unknown type '%s' (expected router, connections, links or "
                "addresses)",
                word);
    cJSON *args = cJSON_CreateObject();
    cJSON_AddStringToObject(args, "type", type);
    long   id = ctl_conn_send(c, "entity.query", args);
    cJSON *names = NULL;
    cJSON *rows = cJSON_CreateArray();
    for (;;) {
        cJSON *j = ctl_conn_reply(c, id);
        cJSON *res = ctl_reply_result(j);
        if (!names)
            names = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(res, "attributeNames"), true);
        cJSON *r = cJSON_GetObjectItemCaseSensitive(res, "results");
        while (r && r->child)
            cJSON_AddItemToArray(rows, cJSON_DetachItemViaPointer(r, r->child));
        bool more = ctl_reply_more(j);
        cJSON_Delete(j);
        if (!more)
            break;
    }
    if (!names)
        names = cJSON_CreateArray();

    if (o->json) {
        /* rows as objects: {attribute: value} */
        cJSON       *out = cJSON_CreateArray();
        const cJSON *row;
        cJSON_ArrayForEach(row, rows)
        {
            cJSON       *obj = cJSON_CreateObject();
            const cJSON *n;
            int          i = 0;
            cJSON_ArrayForEach(n, names)
            {
                cJSON_AddItemToObject(obj, n->valuestring,
                                      cJSON_Duplicate(cJSON_GetArrayItem(row, i++), true));
            }
            cJSON_AddItemToArray(out, obj);
        }
        if (strcmp(type, "router") == 0 && cJSON_GetArraySize(out) == 1)
            ctl_json_out(cJSON_GetArrayItem(out, 0));
        else
            ctl_json_out(out);
        cJSON_Delete(out);
    } else if (!cols) {
        /* the router: one row, shown as attribute / value lines (qdstat -g) */
        static const char *const head[] = {"attribute", "value"};
        ctl_table_t              t;
        ctl_table_init(&t, 2, head);
        const cJSON *row = cJSON_GetArrayItem(rows, 0);
        const cJSON *n;
        int          i = 0;
        cJSON_ArrayForEach(n, names)
        {
            const cJSON *v = cJSON_GetArrayItem(row, i++);
            char *cells[2] = {strdup(n->valuestring), strcmp(n->valuestring, "uptimeSeconds") == 0
                                                          ? uptime_text(v)
                                                          : ctl_cell_text(v)};
            ctl_table_row(&t, cells);
        }
        ctl_table_print(stdout, &t);
    } else {
        const char **head = calloc(ncols, sizeof(char *));
        for (size_t k = 0; k < ncols; k++)
            head[k] = cols[k].head;
        ctl_table_t t;
        ctl_table_init(&t, ncols, head);
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
                    cells[k] = ctl_cell_text(row_attr(names, row, a));
            }
            free(cls);
            free(addr);
            free(phs);
            ctl_table_row(&t, cells);
            free(cells);
        }
        ctl_table_print(stdout, &t);
    }
    cJSON_Delete(rows);
    cJSON_Delete(names);
    return 0;
}

bool ctl_query_known(const char *word)
{
    const qcol_t *cols;
    size_t        ncols;
    const char   *key;
    return query_type(word, &cols, &ncols, &key) != NULL;
}
