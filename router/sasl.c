/* Server-side SASL through Cyrus SASL (sasl.h says who calls what, on which thread).
 *
 * Proton drives the exchange (it sends sasl-mechanisms, reads sasl-init and sasl-response,
 * sends sasl-challenge and sasl-outcome); this module answers its plugin calls with Cyrus's
 * sasl_server_start()/sasl_server_step().  No security layer is negotiated (max_ssf 0): a
 * mechanism's integrity or confidentiality layer would need Proton's encode/decode path, and
 * qdrouterd deployments put TLS under SASL instead.
 *
 * Suffixes: _WT, the connection's worker (Proton's plugin calls come from its transport).
 * rtr_sasl_init() and rtr_sasl_fini() run on the main thread (sasl.h); cyrus_log_cb() is
 * thread-safe (Cyrus calls it from whichever thread it runs on).
 */
#include "router/sasl.h"

#include "router/ctx.h"
#include "router/tls.h"
#include "router/lstats.h"

#include <proton/sasl.h>
#include <proton/sasl_plugin.h>
#include <sasl/sasl.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* Cyrus's state is the process's own (sasl_server_init once, sasl_server_done once): this
 * flag only says whether it was started, written before the workers start and after they
 * stop. */
static bool sasl_started;

/* A connection's Cyrus exchange. */
typedef struct sasl_conn_ctx {
    sasl_conn_t *cyrus;
    const char  *peer; /* the connection's "host:port" (outlives the transport) */
    char         mechs[512]; /* what list_mechanisms returned, valid until free */
    int          step;       /* 0 before the sasl-init, 1 while Cyrus wants responses, 2 done:
                                Cyrus must not see a frame out of that order (its
                                sasl_server_step() before a start crashes) */
    char        *out;        /* a copy of Cyrus's last output: Proton writes the frame later,
                                when Cyrus may have freed its own buffer (the SCRAM plugin
                                does on success) */

    /* EXTERNAL (external_init_WT) */
    rtr_tls_conn_t *const *tls; /* the connection's TLS session slot (set once TLS starts),
                                   or NULL: EXTERNAL is never offered */
    char *ext_user;             /* the user and authzid it succeeded with: Proton keeps the */
    char *ext_authzid;          /* pointers, not copies */
} sasl_conn_ctx_t;

/* Cyrus's own messages: its errors (a sasldb it cannot open, a plugin that fails to load) at
 * warning, the rest for debugging.  A failed password is reported by this module, once. */
static int cyrus_log_cb(void *context, int level, const char *message)
{
    (void)context;
    base_log_level_t lvl = level <= SASL_LOG_ERR ? BASE_LOG_WARNING : BASE_LOG_DEBUG;
    if (level != SASL_LOG_NONE && message)
        base_log(BASE_LOG_MOD_SERVER, lvl, "SASL: %s", message);
    return SASL_OK;
}

static const sasl_callback_t cyrus_callbacks[] = {
    /* Cyrus keeps every callback as int (*)(void): through void (*)(void), the generic one */
    {SASL_CB_LOG, (int (*)(void))(void (*)(void))cyrus_log_cb, NULL},
    {SASL_CB_LIST_END, NULL, NULL},
};

int rtr_sasl_init(const cfg_router_t *r, char *err, size_t errlen)
{
    const char *name = r->sasl_config_name ? r->sasl_config_name : "qdrouterd";
    if (r->sasl_config_dir) {
        struct stat st;
        if (stat(r->sasl_config_dir, &st) != 0) {
            snprintf(err, errlen, "saslConfigDir %s: %s", r->sasl_config_dir, strerror(errno));
            return -1;
        }
        if (!S_ISDIR(st.st_mode)) {
            snprintf(err, errlen, "saslConfigDir %s: not a directory", r->sasl_config_dir);
            return -1;
        }
        if (access(r->sasl_config_dir, R_OK | X_OK) != 0) {
            snprintf(err, errlen, "saslConfigDir %s: %s", r->sasl_config_dir, strerror(errno));
            return -1;
        }
        int rc = sasl_set_path(SASL_PATH_TYPE_CONFIG, r->sasl_config_dir);
        if (rc != SASL_OK) {
            snprintf(err, errlen, "saslConfigDir %s: Cyrus SASL refuses it: %s",
                     r->sasl_config_dir, sasl_errstring(rc, NULL, NULL));
            return -1;
        }
    }
    int rc = sasl_server_init(cyrus_callbacks, name);
    if (rc != SASL_OK) {
        snprintf(err, errlen, "cannot start Cyrus SASL (saslConfigDir %s, saslConfigName %s): %s",
                 r->sasl_config_dir ? r->sasl_config_dir : "(Cyrus's default)", name,
                 sasl_errstring(rc, NULL, NULL));
        return -1;
    }
    sasl_started = true;

    char        list[512] = "";
    size_t      o = 0;
    const char **mechs = sasl_global_listmech();
    for (size_t i = 0; mechs && mechs[i] && o < sizeof(list); i++)
        o += (size_t)snprintf(list + o, sizeof(list) - o, "%s%s", i ? " " : "", mechs[i]);
    base_log(BASE_LOG_MOD_SERVER, BASE_LOG_INFO,
             "SASL: Cyrus SASL configuration %s/%s.conf, mechanisms available: %s",
             r->sasl_config_dir ? r->sasl_config_dir : "(Cyrus's default)", name,
             *list ? list : "none");
    return 0;
}

void rtr_sasl_fini(void)
{
    if (sasl_started) {
        sasl_server_done();
        sasl_started = false;
    }
}

bool rtr_sasl_listener_uses_cyrus(const cfg_listener_t *l)
{
    return l->authenticate_peer || l->sasl_mechanisms;
}

/* -- Proton's plugin calls (all on the connection's worker) -- */

static void plugin_free_WT(pn_transport_t *t)
{
    sasl_conn_ctx_t *x = pnx_sasl_get_context(t);
    if (!x)
        return;
    if (x->cyrus)
        sasl_dispose(&x->cyrus);
    free(x->out);
    free(x->ext_user);
    free(x->ext_authzid);
    free(x);
    pnx_sasl_set_context(t, NULL);
}

static bool plugin_init_server_WT(pn_transport_t *t)
{
    sasl_conn_ctx_t *x = pnx_sasl_get_context(t);
    int rc = sasl_server_new("amqp", NULL, NULL, NULL, NULL, NULL, 0, &x->cyrus);
    if (rc == SASL_OK) {
        sasl_security_properties_t sp = {
            .min_ssf = 0,
            .max_ssf = 0, /* no security layer: see the top of this file */
            .maxbufsize = 0,
            .security_flags = 0,
        };
        if (!pnx_sasl_get_allow_insecure_mechanisms(t) && !pnx_sasl_is_transport_encrypted(t))
            sp.security_flags |= SASL_SEC_NOPLAINTEXT;
        if (pnx_sasl_get_authentication_required(t))
            sp.security_flags |= SASL_SEC_NOANONYMOUS;
        rc = sasl_setprop(x->cyrus, SASL_SEC_PROPS, &sp);
    }
    if (rc != SASL_OK) {
        base_log(BASE_LOG_MOD_SERVER, BASE_LOG_WARNING,
                 "SASL: cannot start authenticating the client %s: %s", x->peer,
                 sasl_errstring(rc, NULL, NULL));
        pnx_sasl_error(t, "Cyrus SASL cannot serve this connection", "amqp:internal-error");
        return false;
    }
    pnx_sasl_set_desired_state(t, SASL_POSTED_MECHANISMS);
    return true;
}

static bool plugin_init_client_WT(pn_transport_t *t)
{
    (void)t;
    return false; /* the router authenticates clients; it is never one here */
}

/* -- EXTERNAL: the client certificate the TLS session verified names the user (tls.c, by
 * the sslProfile's uidFormat and uidNameMappingFile).  Junction's own, not Cyrus's: Cyrus
 * would take the identity only through SASL_AUTH_EXTERNAL and offer the mechanism only where
 * its mech_list names it, while qdrouterd's Proton offers it to every client with a
 * certificate when the listener's saslMechanisms has it (Proton filters the list by that). */

/* The connection's verified client certificate names a user: EXTERNAL may be offered. */
static bool external_ok_WT(const sasl_conn_ctx_t *x)
{
    return x->tls && *x->tls && rtr_tls_peer_verified_WT(*x->tls);
}

static bool mech_listed(const char *list, const char *mech)
{
    size_t n = strlen(mech);
    for (const char *p = list; *p;) {
        size_t k = strcspn(p, " ");
        if (k == n && strncasecmp(p, mech, n) == 0)
            return true;
        p += k;
        p += *p == ' ';
    }
    return false;
}

static void external_offer_WT(sasl_conn_ctx_t *x)
{
    size_t len = strlen(x->mechs);
    if (!external_ok_WT(x) || mech_listed(x->mechs, "EXTERNAL") || len + 10 > sizeof(x->mechs))
        return;
    snprintf(x->mechs + len, sizeof(x->mechs) - len, "%sEXTERNAL", len ? " " : "");
}

/* The client chose EXTERNAL: its certificate's user succeeds (an authorization identity it
 * sends is kept as Proton's own EXTERNAL keeps it), or it fails with one line. */
static void external_init_WT(pn_transport_t *t, sasl_conn_ctx_t *x, const pn_bytes_t *recv)
{
    x->step = 2;
    char *user = external_ok_WT(x) ? rtr_tls_peer_user_WT(*x->tls) : NULL;
    if (!user) {
        rtr_lstats_sasl_failed_WT(t, RTR_AUTH_CREDENTIALS, "EXTERNAL",
                                  "no verified client certificate");
        pnx_sasl_set_failed(t);
        pnx_sasl_set_desired_state(t, SASL_POSTED_OUTCOME);
        return;
    }
    free(x->ext_user);
    free(x->ext_authzid);
    x->ext_user = user;
    x->ext_authzid = NULL;
    if (recv->start && recv->size) {
        x->ext_authzid = base_malloc(recv->size + 1);
        memcpy(x->ext_authzid, recv->start, recv->size);
        x->ext_authzid[recv->size] = '\0';
    }
    base_log(BASE_LOG_MOD_SERVER, BASE_LOG_DEBUG, "SASL: client %s authenticated as %s (EXTERNAL)",
             x->peer, user);
    pnx_sasl_set_succeeded(t, x->ext_user, x->ext_authzid);
    pnx_sasl_set_desired_state(t, SASL_POSTED_OUTCOME);
}

static const char *plugin_list_mechs_WT(pn_transport_t *t)
{
    sasl_conn_ctx_t *x = pnx_sasl_get_context(t);
    const char      *list = NULL;
    unsigned         len = 0;
    int              n = 0;
    x->mechs[0] = '\0';
    if (x->cyrus && sasl_listmech(x->cyrus, NULL, "", " ", "", &list, &len, &n) == SASL_OK &&
        list && len < sizeof(x->mechs)) {
        memcpy(x->mechs, list, len);
        x->mechs[len] = '\0';
    }
    external_offer_WT(x);
    return x->mechs;
}

static void plugin_prepare_write_WT(pn_transport_t *t)
{
    (void)t;
}

/* Hand Proton a copy of Cyrus's output for the next frame (see sasl_conn_ctx_t.out). */
static void set_out_WT(pn_transport_t *t, sasl_conn_ctx_t *x, const char *out, unsigned outlen)
{
    free(x->out);
    x->out = base_malloc(outlen ? outlen : 1);
    if (outlen)
        memcpy(x->out, out, outlen);
    pnx_sasl_set_bytes_out(t, pn_bytes(outlen, x->out));
}

/* Cyrus's answer to a sasl-init or sasl-response: a challenge, or the outcome. */
static void server_answer_WT(pn_transport_t *t, sasl_conn_ctx_t *x, int rc, const char *out,
                          unsigned outlen)
{
    const char *mech = pnx_sasl_get_selected_mechanism(t);
    x->step = rc == SASL_CONTINUE ? 1 : 2;
    if (rc == SASL_CONTINUE) {
        set_out_WT(t, x, out, outlen);
        pnx_sasl_set_desired_state(t, SASL_POSTED_CHALLENGE);
        return;
    }
    if (rc == SASL_OK) {
        const void *user = NULL;
        if (sasl_getprop(x->cyrus, SASL_USERNAME, &user) != SASL_OK || !user)
            user = "";
        base_log(BASE_LOG_MOD_SERVER, BASE_LOG_DEBUG,
                 "SASL: client %s authenticated as %s (%s)", x->peer, (const char *)user,
                 mech ? mech : "");
        pnx_sasl_set_succeeded(t, (const char *)user, NULL);
        if (outlen) /* additional data with the outcome (SCRAM's server signature) */
            set_out_WT(t, x, out, outlen);
        pnx_sasl_set_desired_state(t, SASL_POSTED_OUTCOME);
        return;
    }
    /* one line, with neither the response nor the password */
    rtr_lstats_sasl_failed_WT(t, rtr_auth_reason_of_cyrus(rc), mech, "%s",
                              sasl_errstring(rc, NULL, NULL));
    pnx_sasl_set_failed(t);
    pnx_sasl_set_desired_state(t, SASL_POSTED_OUTCOME);
}

/* A client's SASL frame out of order: authentication fails (once: the outcome is sent). */
static void out_of_order_WT(pn_transport_t *t, sasl_conn_ctx_t *x, const char *what)
{
    if (x->step == 2)
        return; /* the outcome is out already; the connection ends with it */
    x->step = 2;
    rtr_lstats_sasl_failed_WT(t, RTR_AUTH_PROTOCOL, pnx_sasl_get_selected_mechanism(t), "%s",
                              what);
    pnx_sasl_set_failed(t);
    pnx_sasl_set_desired_state(t, SASL_POSTED_OUTCOME);
}

static void plugin_process_init_WT(pn_transport_t *t, const char *mech, const pn_bytes_t *recv)
{
    sasl_conn_ctx_t *x = pnx_sasl_get_context(t);
    const char      *out = NULL;
    unsigned         outlen = 0;
    /* Cyrus tells an absent initial response (NULL) from an empty one */
    if (x->step != 0) {
        out_of_order_WT(t, x, "a second sasl-init");
        return;
    }
    if (mech && strcasecmp(mech, "EXTERNAL") == 0 && mech_listed(x->mechs, "EXTERNAL")) {
        external_init_WT(t, x, recv);
        return;
    }
    int rc = sasl_server_start(x->cyrus, mech, recv->start, (unsigned)recv->size, &out, &outlen);
    server_answer_WT(t, x, rc, out, outlen);
}

static void plugin_process_response_WT(pn_transport_t *t, const pn_bytes_t *recv)
{
    sasl_conn_ctx_t *x = pnx_sasl_get_context(t);
    const char      *out = NULL;
    unsigned         outlen = 0;
    if (x->step != 1) {
        out_of_order_WT(t, x, "a sasl-response no challenge asked for");
        return;
    }
    int rc = sasl_server_step(x->cyrus, recv->start, (unsigned)recv->size, &out, &outlen);
    server_answer_WT(t, x, rc, out, outlen);
}

static bool plugin_process_mechanisms_WT(pn_transport_t *t, const char *mechs)
{
    (void)t;
    (void)mechs;
    return false;
}

static void plugin_process_challenge_WT(pn_transport_t *t, const pn_bytes_t *recv)
{
    (void)t;
    (void)recv;
}

static void plugin_process_outcome_WT(pn_transport_t *t, const pn_bytes_t *recv)
{
    (void)t;
    (void)recv;
}

static bool plugin_can_encrypt_WT(pn_transport_t *t)
{
    (void)t;
    return false;
}

static ssize_t plugin_max_encrypt_size_WT(pn_transport_t *t)
{
    (void)t;
    return 0;
}

static ssize_t plugin_code_WT(pn_transport_t *t, pn_bytes_t in, pn_bytes_t *out)
{
    (void)t;
    (void)in;
    (void)out;
    return -1; /* never called: no security layer is negotiated */
}

static const pnx_sasl_implementation cyrus_server = {
    .free = plugin_free_WT,
    .list_mechanisms = plugin_list_mechs_WT,
    .init_server = plugin_init_server_WT,
    .init_client = plugin_init_client_WT,
    .prepare_write = plugin_prepare_write_WT,
    .process_init = plugin_process_init_WT,
    .process_response = plugin_process_response_WT,
    .process_mechanisms = plugin_process_mechanisms_WT,
    .process_challenge = plugin_process_challenge_WT,
    .process_outcome = plugin_process_outcome_WT,
    .can_encrypt = plugin_can_encrypt_WT,
    .max_encrypt_size = plugin_max_encrypt_size_WT,
    .encode = plugin_code_WT,
    .decode = plugin_code_WT,
};

bool rtr_sasl_server_WT(pn_transport_t *t, const cfg_listener_t *l, const char *peer)
{
    if (!sasl_started)
        return false;
    pn_transport_require_auth(t, l->authenticate_peer);
    pn_sasl_t *sasl = pn_sasl(t);
    if (l->sasl_mechanisms)
        pn_sasl_allowed_mechs(sasl, l->sasl_mechanisms);
    pn_sasl_set_allow_insecure_mechs(sasl, true); /* qdrouterd's default
                                                     (allowInsecureAuthentication) */
    sasl_conn_ctx_t *x = base_calloc(1, sizeof(*x));
    x->peer = peer;
    pnx_sasl_set_implementation(t, &cyrus_server, x);
    return true;
}

void rtr_sasl_external_WT(pn_transport_t *t, rtr_tls_conn_t *const *tls)
{
    sasl_conn_ctx_t *x = pnx_sasl_get_context(t);
    if (x)
        x->tls = tls;
}

bool rtr_sasl_listener_asks_cert(const cfg_listener_t *l)
{
    /* qdrouterd: an sslProfile and "EXTERNAL" in saslMechanisms, nothing else (not
       authenticatePeer, not caCertFile alone) */
    return l->ssl_profile && l->sasl_mechanisms && strstr(l->sasl_mechanisms, "EXTERNAL");
}
