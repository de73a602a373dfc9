/* router/mgmt/ssl.c: the sslProfile entity at run time - CREATE, UPDATE and DELETE as both
 * ways in (the AMQP node's ops.c, the socket's sslProfile.* operations) do them, and the
 * attributes as management shows them.  A request's attributes are checked by the
 * configuration loader exactly as a file's sslProfile is (the same names, aliases and
 * types); the files, the password and the cipher and protocol lists are then checked by the
 * router when it builds the profile's TLS context (mgmt_tls_t, router/tls.c), on the calling
 * thread and outside any lock.
 *
 * Threads: whichever thread runs the node or the session (the agent thread, the admin
 * thread); the mgmt_tls_t calls are thread-safe, so both may change profiles at once (the
 * later change wins, each one whole).
 */
#include "router/mgmt/mgmt_int.h"

#include "core/base/base.h"
#include "core/base/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* An attribute as management shows it: qdrouterd's name and the profile's value. */
static void attrs_each(const cfg_ssl_profile_t *p, bool secret,
                       void (*fn)(void *arg, const char *name, const char *value), void *arg)
{
    fn(arg, "ciphers", p->ciphers);
    fn(arg, "protocols", p->protocols);
    fn(arg, "caCertFile", p->ca_cert_file);
    fn(arg, "certFile", p->cert_file);
    fn(arg, "privateKeyFile", p->private_key_file);
    fn(arg, "password", secret ? p->password : mgmt_ssl_shown_password(p));
    fn(arg, "uidFormat", p->uid_format);
    fn(arg, "uidNameMappingFile", p->uid_name_mapping_file);
}

const char *mgmt_ssl_shown_password(const cfg_ssl_profile_t *p)
{
    /* env:VAR and file:PATH say where the password is, not what it is; a password written
     * in the configuration (literal, pass:, literal:) is never shown (qdrouterd 1.19 shows
     * it: its QUERY answers any client that reaches the port) */
    const char *pw = p->password;
    if (pw && (strncmp(pw, "env:", 4) == 0 || strncmp(pw, "file:", 5) == 0))
        return pw;
    return NULL;
}

static void add_json(void *arg, const char *name, const char *value)
{
    cJSON *o = arg;
    if (value)
        cJSON_AddStringToObject(o, name, value);
    else
        cJSON_AddNullToObject(o, name);
}

/* secret: the password as written (an UPDATE's starting point), else as shown. */
static cJSON *profile_json(const cfg_ssl_profile_t *p, bool secret)
{
    cJSON *o = cJSON_CreateObject();
    char   identity[300];
    snprintf(identity, sizeof(identity), "sslProfile/%s", p->name);
    cJSON_AddStringToObject(o, "name", p->name);
    cJSON_AddStringToObject(o, "identity", identity);
    cJSON_AddStringToObject(o, "type", MGMT_PREFIX ".sslProfile");
    attrs_each(p, secret, add_json, o);
    return o;
}

cJSON *mgmt_ssl_json(const cfg_ssl_profile_t *p)
{
    return profile_json(p, false);
}

/* The request's attributes as one sslProfile, checked by the configuration loader.  Returns
 * a new cfg_t holding exactly that profile, or NULL with the loader's reason in err. */
static cfg_t *parse_profile(const cJSON *attrs, char *err, size_t errlen)
{
    cJSON *doc = cJSON_CreateArray();
    cJSON *ent = cJSON_CreateArray();
    cJSON_AddItemToArray(ent, cJSON_CreateString("sslProfile"));
    cJSON_AddItemToArray(ent, cJSON_Duplicate(attrs, true));
    cJSON_AddItemToArray(doc, ent);
    char *text = cJSON_PrintUnformatted(doc);
    cJSON_Delete(doc);
    cfg_t *cfg = NULL;
    char   why[512];
    if (cfg_load_string(text, "request", &cfg, why, sizeof(why)) != 0) {
        /* "request: entity 0 (sslProfile): attribute ..." -> the part after the entity */
        const char *p = strstr(why, "): ");
        snprintf(err, errlen, "%s", p ? p + 3 : why);
        cfg = NULL;
    } else if (cfg->n_ssl_profiles != 1) {
        snprintf(err, errlen, "not an sslProfile");
        cfg_free(cfg);
        cfg = NULL;
    }
    free(text);
    return cfg;
}

/* The status of a mgmt_tls_t error. */
static int status_of(int rc)
{
    return rc == -ENOENT ? 404 : rc == -EBUSY ? 409 : 400;
}

/* A request's own name, identity and type go; a name that is not `name` is refused. */
static int strip_keys(cJSON *attrs, const char *name, char *err, size_t errlen)
{
    const cJSON *bn = cJSON_GetObjectItemCaseSensitive(attrs, "name");
    if (bn && (!cJSON_IsString(bn) || strcmp(bn->valuestring, name) != 0)) {
        snprintf(err, errlen, "the name of sslProfile '%.200s' cannot be changed", name);
        return 400;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(attrs, "name");
    cJSON_DeleteItemFromObjectCaseSensitive(attrs, "identity");
    cJSON_DeleteItemFromObjectCaseSensitive(attrs, "type");
    return 0;
}

/* The profile named `name` as profile_json() shows it, or NULL if there is none. */
static cJSON *find_json(const mgmt_tls_t *tls, const char *name, bool secret)
{
    size_t             n = 0;
    cfg_ssl_profile_t *all = tls->copy(tls->ctx, &n);
    cJSON             *j = NULL;
    for (size_t i = 0; i < n && !j; i++)
        if (strcmp(all[i].name, name) == 0)
            j = profile_json(&all[i], secret);
    tls->copy_free(all, n);
    return j;
}

/* CREATE's and UPDATE's last step: the attributes `a` (consumed) as a profile, added or
 * replacing the one of that name.  st is strip_keys()'s result (not 0: refused with it). */
static int apply(const mgmt_tls_t *tls, const char *name, bool update, cJSON *a, int st, char *err,
                 size_t errlen)
{
    cfg_t *cfg = st ? NULL : parse_profile(a, err, errlen);
    cJSON_Delete(a);
    if (!cfg)
        return st ? st : 400;
    const cfg_ssl_profile_t *p = &cfg->ssl_profiles[0];
    const char              *cert = p->cert_file ? p->cert_file : "none";
    int rc = update ? tls->update(tls->ctx, p, err, errlen) : tls->add(tls->ctx, p, err, errlen);
    if (rc == 0 && update)
        base_log(BASE_LOG_MOD_AGENT, BASE_LOG_INFO,
                 "sslProfile '%s' updated: new connections use certFile %s", name, cert);
    else if (rc == 0)
        base_log(BASE_LOG_MOD_AGENT, BASE_LOG_INFO, "sslProfile '%s' created (certFile %s)", name,
                 cert);
    cfg_free(cfg);
    return rc ? status_of(rc) : 0;
}

int mgmt_ssl_create(const mgmt_tls_t *tls, const char *name, const cJSON *attrs, char *err,
                    size_t errlen)
{
    if (!name || !*name) {
        snprintf(err, errlen, "an sslProfile needs a 'name' (listeners name it)");
        return 400;
    }
    cJSON *a = attrs ? cJSON_Duplicate(attrs, true) : cJSON_CreateObject();
    int    st = strip_keys(a, name, err, errlen);
    cJSON_AddStringToObject(a, "name", name);
    return apply(tls, name, false, a, st, err, errlen);
}

/* The deprecated names a request may use, and the attribute each stands for (a request that
 * gives one replaces what the profile has under the other). */
static const char *const aliases[][2] = {
    {"certDb", "caCertFile"},
    {"keyFile", "privateKeyFile"},
    {"displayNameFile", "uidNameMappingFile"},
    {"passwordFile", "password"},
};

int mgmt_ssl_update(const mgmt_tls_t *tls, const char *name, const cJSON *attrs, char *err,
                    size_t errlen)
{
    if (attrs && !cJSON_IsObject(attrs)) {
        snprintf(err, errlen, "the attributes must be a map");
        return 400;
    }
    /* the profile as it is (with its password), and the request's attributes over it */
    cJSON *merged = find_json(tls, name, true);
    if (!merged) {
        snprintf(err, errlen, "no sslProfile with name '%.200s'", name);
        return 404;
    }
    cJSON *a = attrs ? cJSON_Duplicate(attrs, true) : cJSON_CreateObject();
    int    st = strip_keys(a, name, err, errlen);
    cJSON_DeleteItemFromObjectCaseSensitive(merged, "identity");
    cJSON_DeleteItemFromObjectCaseSensitive(merged, "type");
    const cJSON *x;
    cJSON_ArrayForEach(x, a)
    {
        for (size_t k = 0; k < BASE_ARRAY_LEN(aliases); k++)
            if (strcmp(x->string, aliases[k][0]) == 0)
                cJSON_DeleteItemFromObjectCaseSensitive(merged, aliases[k][1]);
        cJSON_DeleteItemFromObjectCaseSensitive(merged, x->string);
        if (!cJSON_IsNull(x)) /* null removes the attribute */
            cJSON_AddItemToObject(merged, x->string, cJSON_Duplicate(x, true));
    }
    cJSON_Delete(a);
    /* attributes the profile does not have are null in the copy: leave them out */
    for (cJSON *c = merged->child, *next; c; c = next) {
        next = c->next;
        if (cJSON_IsNull(c))
            cJSON_Delete(cJSON_DetachItemViaPointer(merged, c));
    }
    return apply(tls, name, true, merged, st, err, errlen);
}

int mgmt_ssl_delete(const mgmt_tls_t *tls, const char *name, char *err, size_t errlen)
{
    int rc = tls->del(tls->ctx, name, err, errlen);
    if (rc == 0)
        base_log(BASE_LOG_MOD_AGENT, BASE_LOG_INFO, "sslProfile '%s' deleted", name);
    return rc ? status_of(rc) : 0;
}

/* ---------------------------------------------------------------------------------------
 * The socket's sslProfile.* operations (mgmt.h)
 * ------------------------------------------------------------------------------------- */

/* The reply {"id", "result": {key: j}} (j consumed). */
static int reply_json(const mgmt_preq_t *q, const char *key, cJSON *j)
{
    mgmt_proto_t *m = q->m;
    char         *text = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    mgmt__line_start(m, q->id);
    mgmt_jb_lit(&m->_line, "\"result\":{");
    mgmt_jb_key(&m->_line, key);
    mgmt_jb_raw(&m->_line, text, strlen(text));
    mgmt_jb_lit(&m->_line, "}}");
    free(text);
    return mgmt__line_send(m, q->write, q->ctx);
}

/* The session may change profiles, and the request names one: 0 and *name, or the error
 * reply's result (and *name NULL). */
static int ssl_args(const mgmt_preq_t *q, const char **name, const cJSON **attrs)
{
    *name = NULL;
    if (!q->m->_tls)
        return mgmt__bad_arg(q, 403, "sslProfile operations are served on the management "
                                     "socket only");
    const char *n;
    if (mgmt__arg_str(q, "name", NULL, &n) < 0 || !n || !*n)
        return mgmt__bad_arg(q, 400, "argument 'name': expected the sslProfile's name");
    if (attrs) {
        *attrs = cJSON_GetObjectItemCaseSensitive(q->json, "attributes");
        if (*attrs && cJSON_IsNull(*attrs))
            *attrs = NULL;
        if (*attrs && !cJSON_IsObject(*attrs))
            return mgmt__bad_arg(q, 400, "argument 'attributes': expected an object of "
                                         "sslProfile attributes");
    }
    *name = n;
    return 0;
}

/* The reply to a change: the profile as it is now. */
static int reply_profile(const mgmt_preq_t *q, const char *name)
{
    cJSON *j = find_json(q->m->_tls, name, false);
    if (!j) /* deleted again by the other way in meanwhile */
        return mgmt__bad_arg(q, 404, "no sslProfile with name '%.200s'", name);
    return reply_json(q, "profile", j);
}

int mgmt__op_ssl_list(const mgmt_preq_t *q)
{
    const mgmt_tls_t *tls = q->m->_tls;
    if (!tls)
        return mgmt__bad_arg(q, 403, "sslProfile operations are served on the management "
                                     "socket only");
    size_t             n = 0;
    cfg_ssl_profile_t *all = tls->copy(tls->ctx, &n);
    cJSON             *list = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(list, mgmt_ssl_json(&all[i]));
    tls->copy_free(all, n);
    return reply_json(q, "profiles", list);
}

/* sslProfile.create and .update: `change` is mgmt_ssl_create() or mgmt_ssl_update(). */
static int op_ssl_change(const mgmt_preq_t *q,
                         int (*change)(const mgmt_tls_t *tls, const char *name, const cJSON *attrs,
                                       char *err, size_t errlen))
{
    const char  *name;
    const cJSON *attrs;
    int          rc = ssl_args(q, &name, &attrs);
    if (!name)
        return rc;
    char err[512];
    int  st = change(q->m->_tls, name, attrs, err, sizeof(err));
    return st ? mgmt__bad_arg(q, st, "%s", err) : reply_profile(q, name);
}

int mgmt__op_ssl_create(const mgmt_preq_t *q)
{
    return op_ssl_change(q, mgmt_ssl_create);
}

int mgmt__op_ssl_update(const mgmt_preq_t *q)
{
    return op_ssl_change(q, mgmt_ssl_update);
}

int mgmt__op_ssl_delete(const mgmt_preq_t *q)
{
    const char *name;
    int         rc = ssl_args(q, &name, NULL);
    if (!name)
        return rc;
    char err[512];
    int  st = mgmt_ssl_delete(q->m->_tls, name, err, sizeof(err));
    if (st)
        return mgmt__bad_arg(q, st, "%s", err);
    cJSON *j = cJSON_CreateString(name);
    return reply_json(q, "deleted", j);
}
