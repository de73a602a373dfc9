/* router/conn_props.c: a connector's openProperties into its open (conn_props.h).
 *
 * Thread suffixes: none (the caller's pn_data_t only).  The recursion is as deep as the
 * JSON, which cJSON's parser bounds (CJSON_NESTING_LIMIT).
 */
#include "router/conn_props.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <string.h>

static void put_value(pn_data_t *d, const cJSON *v)
{
    if (cJSON_IsNull(v)) {
        pn_data_put_null(d);
    } else if (cJSON_IsBool(v)) {
        pn_data_put_bool(d, cJSON_IsTrue(v));
    } else if (cJSON_IsString(v)) {
        pn_data_put_string(d, pn_bytes(strlen(v->valuestring), v->valuestring));
    } else if (cJSON_IsNumber(v)) {
        double x = v->valuedouble;
        /* whole numbers as qdrouterd's JSON reader has them: int when 32 bits hold them */
        if (x == floor(x) && fabs(x) <= 9007199254740992.0) {
            if (x >= -2147483648.0 && x <= 2147483647.0)
                pn_data_put_int(d, (int32_t)x);
            else
                pn_data_put_long(d, (int64_t)x);
        } else {
            pn_data_put_double(d, x);
        }
    } else if (cJSON_IsArray(v)) {
        pn_data_put_list(d);
        pn_data_enter(d);
        for (const cJSON *e = v->child; e; e = e->next)
            put_value(d, e);
        pn_data_exit(d);
    } else if (cJSON_IsObject(v)) {
        pn_data_put_map(d);
        pn_data_enter(d);
        for (const cJSON *e = v->child; e; e = e->next) {
            pn_data_put_string(d, pn_bytes(strlen(e->string), e->string));
            put_value(d, e);
        }
        pn_data_exit(d);
    } else {
        pn_data_put_null(d); /* cJSON has no other kinds in a parsed document */
    }
}

void rtr_conn_props_put(pn_data_t *props, const cJSON *map)
{
    if (!map)
        return;
    for (const cJSON *e = map->child; e; e = e->next) {
        pn_data_put_symbol(props, pn_bytes(strlen(e->string), e->string));
        put_value(props, e);
    }
}
