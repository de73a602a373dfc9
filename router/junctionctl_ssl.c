/* router/junctionctl_ssl.c: junctionctl's sslprofile command - list, create, update (which
 * makes the router read the profile's files again: new connections get the new certificate,
 * open ones keep theirs) and delete the router's sslProfiles over the socket's sslProfile.*
 * operations (router/mgmt/mgmt.h).
 *
 *   junctionctl sslprofile list
 *   junctionctl sslprofile create NAME ATTR=VALUE...
 *   junctionctl sslprofile update NAME [ATTR=VALUE...]    ATTR= (empty) removes ATTR
 *   junctionctl sslprofile delete NAME
 *
 * Threads: one (junctionctl's).
 */
#include "router/junctionctl.h"

#include <stdlib.h>
#include <string.h>

/* The columns of the table (attribute names; the JSON has every attribute). */
static const char *const cols[] = {"name",      "certFile", "privateKeyFile", "caCertFile",
                                   "protocols", "ciphers",  "password"};
#define NCOLS (sizeof(cols) / sizeof(cols[0]))

static void print_profiles(const ctl_opts_t *o, const cJSON *list)
{
    if (o->json) {
        ctl_json_out(list);
        return;
    }
    ctl_table_t t;
    ctl_table_init(&t, NCOLS, cols);
    const cJSON *p;
    cJSON_ArrayForEach(p, list)
    {
        char *cells[NCOLS];
        for (size_t k = 0; k < NCOLS; k++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(p, cols[k]);
            cells[k] = ctl_cell_text(cJSON_IsNull(v) ? NULL : v);
        }
        ctl_table_row(&t, cells);
    }
    ctl_table_print(stdout, &t);
}

/* ATTR=VALUE words as an object ("ATTR=" is null: the attribute is removed). */
static cJSON *attr_args(int argc, char **argv)
{
    cJSON *a = cJSON_CreateObject();
    for (int i = 0; i < argc; i++) {
        const char *eq = strchr(argv[i], '=');
        if (!eq || eq == argv[i])
            ctl_die(CTL_EXIT_USAGE, "sslprofile: expected ATTR=VALUE, got '%s'", argv[i]);
        char *key = strndup(argv[i], (size_t)(eq - argv[i]));
        cJSON_DeleteItemFromObjectCaseSensitive(a, key);
        if (eq[1])
            cJSON_AddStringToObject(a, key, eq + 1);
        else
            cJSON_AddNullToObject(a, key);
        free(key);
    }
    return a;
}

int ctl_cmd_sslprofile(ctl_conn_t *c, const ctl_opts_t *o, int argc, char **argv)
{
    const char *verb = argv[0];
    const char *name = argc > 1 ? argv[1] : NULL;
    cJSON      *args = cJSON_CreateObject();
    char        op[32];
    snprintf(op, sizeof(op), "sslProfile.%s", verb);
    if (strcmp(verb, "list") != 0)
        cJSON_AddStringToObject(args, "name", name);
    if (strcmp(verb, "create") == 0 || strcmp(verb, "update") == 0)
        cJSON_AddItemToObject(args, "attributes", attr_args(argc - 2, argv + 2));
    long   id = ctl_conn_send(c, op, args);
    cJSON *j = ctl_conn_reply(c, id);
    cJSON *res = ctl_reply_result(j);
    if (strcmp(verb, "list") == 0) {
        print_profiles(o, cJSON_GetObjectItemCaseSensitive(res, "profiles"));
    } else if (strcmp(verb, "delete") == 0) {
        if (o->json)
            ctl_json_out(res);
        else
            printf("sslProfile '%s' deleted\n", name);
    } else {
        cJSON *one = cJSON_CreateArray();
        cJSON_AddItemReferenceToArray(one, cJSON_GetObjectItemCaseSensitive(res, "profile"));
        print_profiles(o, o->json ? cJSON_GetObjectItemCaseSensitive(res, "profile") : one);
        cJSON_Delete(one);
    }
    cJSON_Delete(j);
    return 0;
}

bool ctl_sslprofile_usage_ok(int argc, char **argv)
{
    if (argc < 1)
        return false;
    const char *verb = argv[0];
    if (strcmp(verb, "list") == 0)
        return argc == 1;
    if (strcmp(verb, "delete") == 0)
        return argc == 2;
    if (strcmp(verb, "create") == 0 || strcmp(verb, "update") == 0)
        return argc >= 2;
    return false;
}
