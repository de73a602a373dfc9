/* router/conn_props.h: a connector's `openProperties` (a JSON map from the configuration)
 * into the properties of the router's AMQP open, after the router's own, as qdrouterd 1.19
 * sends them: each key a symbol, each value as its JSON type maps to AMQP -
 *
 *   null -> null    true/false -> boolean    string -> string
 *   whole number -> int (32 bits) or long     other number -> double
 *   array -> list   object -> map (string keys)
 *
 * (qdrouterd's JSON reader keeps "1.0" a double; cJSON does not tell 1.0 from 1, so a whole
 * number written with a fraction is sent as an int here.)  The configuration loader checked
 * the keys (ASCII, none of the router's own: config/config.c).
 *
 * Threads: any; it touches only the pn_data_t it is given (the connection's worker's).
 */
#ifndef JUNCTION_ROUTER_CONN_PROPS_H
#define JUNCTION_ROUTER_CONN_PROPS_H

#include <proton/codec.h>

struct cJSON;

/* Append map's entries to the map `props` is inside (between pn_data_enter and
 * pn_data_exit).  map NULL: nothing. */
void rtr_conn_props_put(pn_data_t *props, const struct cJSON *map);

#endif
