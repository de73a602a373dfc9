/* router/tls_uid.c: the user a client certificate names (tls_uid.h says how, and who calls
 * what).
 *
 * Thread suffixes: none - rtr_tls_uid_new/free run on the main thread, rtr_tls_uid_user() is
 * thread-safe (it reads a table no one writes after start-up).
 */
#include "router/tls_uid.h"

#include "core/base/base.h"
#include "core/base/log.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* qdrouterd reads at most this many letters of uidFormat (the rest is ignored). */
#define UID_FORMAT_MAX 7

/* A mapping file bigger than this is refused (it is read whole at start-up). */
#define UID_MAP_FILE_MAX (64u << 20)

typedef struct uid_pair {
    char  *uid;  /* the key of the file's object */
    char  *name; /* its value */
    size_t at;   /* its place in the file: of two equal keys the later one counts */
} uid_pair_t;

struct rtr_tls_uid {
    char        format[UID_FORMAT_MAX + 1]; /* uidFormat's letters in use, "" = none */
    bool        format_ok;                  /* every letter is one qdrouterd knows */
    uid_pair_t *map;                        /* sorted by uid, one pair per uid */
    size_t      n_map;
};

static const char UID_LETTERS[] = "csloun125";

/* The attribute that names the mapping file, as its error lines say it. */
static const char UID_ATTR[] = "uidNameMappingFile";

int rtr_tls_profile_fail(const cfg_ssl_profile_t *p, const char *file_attr, const char *path,
                         char *err, size_t errlen, const char *fmt, ...)
{
    char    what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    if (file_attr)
        snprintf(err, errlen, "sslProfile '%s': %s %s: %s", p->name, file_attr, path, what);
    else
        snprintf(err, errlen, "sslProfile '%s': %s", p->name, what);
    return -1;
}

static int pair_cmp(const void *a, const void *b)
{
    const uid_pair_t *x = a, *y = b;
    int               c = strcmp(x->uid, y->uid);
    return c ? c : (x->at > y->at) - (x->at < y->at);
}

/* Read the whole file into a new NUL-terminated buffer; NULL with the reason in err. */
static char *read_file(const cfg_ssl_profile_t *p, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(p->uid_name_mapping_file, "rb");
    if (!f) {
        rtr_tls_profile_fail(p, UID_ATTR, p->uid_name_mapping_file, err, errlen, "%s",
                             strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char  *buf = base_malloc(cap);
    for (;;) {
        if (n + 1 == cap) {
            if (cap > UID_MAP_FILE_MAX) {
                rtr_tls_profile_fail(p, UID_ATTR, p->uid_name_mapping_file, err, errlen,
                                     "bigger than %u MiB", UID_MAP_FILE_MAX >> 20);
                fclose(f);
                free(buf);
                return NULL;
            }
            cap *= 2;
            buf = base_realloc(buf, cap);
        }
        size_t k = fread(buf + n, 1, cap - 1 - n, f);
        n += k;
        if (k == 0)
            break;
    }
    bool bad = ferror(f);
    int  e = errno;
    fclose(f);
    if (bad) {
        rtr_tls_profile_fail(p, UID_ATTR, p->uid_name_mapping_file, err, errlen, "%s", strerror(e));
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* The mapping file: a JSON object whose values are strings (qdrouterd reads it with Python's
 * json module: a later key replaces an earlier one, an empty name leaves the uid as it is). */
static int load_map(rtr_tls_uid_t *u, const cfg_ssl_profile_t *p, char *err, size_t errlen)
{
    size_t len = 0;
    char  *text = read_file(p, &len, err, errlen);
    if (!text)
        return -1;
    const char *end = NULL;
    cJSON      *root = cJSON_ParseWithLengthOpts(text, len + 1, &end, true); /* the NUL too: cJSON
                                                                  checks nothing follows */
    int rc = -1;
    if (!root) {
        size_t at = end && end >= text && end <= text + len ? (size_t)(end - text) : 0, line = 1;
        for (size_t i = 0; i < at; i++)
            line += text[i] == '\n';
        rtr_tls_profile_fail(p, UID_ATTR, p->uid_name_mapping_file, err, errlen,
                             "not JSON (line %zu)", line);
        goto out;
    }
    if (!cJSON_IsObject(root)) {
        rtr_tls_profile_fail(p, UID_ATTR, p->uid_name_mapping_file, err, errlen,
                             "not a JSON object of uid to name ({\"uid\": \"name\", ...})");
        goto out;
    }
    size_t n = (size_t)cJSON_GetArraySize(root), at = 0;
    u->map = n ? base_calloc(n, sizeof(*u->map)) : NULL;
    for (cJSON *it = root->child; it; it = it->next, at++) {
        if (!cJSON_IsString(it) || !it->valuestring) {
            rtr_tls_profile_fail(p, UID_ATTR, p->uid_name_mapping_file, err, errlen,
                                 "the value of \"%.200s\" is not a string (a name)",
                                 it->string ? it->string : "");
            goto out;
        }
        u->map[u->n_map].uid = base_strdup(it->string ? it->string : "");
        u->map[u->n_map].name = base_strdup(it->valuestring);
        u->map[u->n_map].at = at;
        u->n_map++;
    }
    if (u->n_map)
        qsort(u->map, u->n_map, sizeof(*u->map), pair_cmp);
    /* keep the last of each run of equal uids */
    size_t o = 0;
    for (size_t i = 0; i < u->n_map; i++) {
        if (i + 1 < u->n_map && strcmp(u->map[i].uid, u->map[i + 1].uid) == 0) {
            free(u->map[i].uid);
            free(u->map[i].name);
            continue;
        }
        u->map[o++] = u->map[i];
    }
    u->n_map = o;
    rc = 0;
out:
    cJSON_Delete(root);
    free(text);
    return rc;
}

rtr_tls_uid_t *rtr_tls_uid_new(const cfg_ssl_profile_t *p, char *err, size_t errlen)
{
    rtr_tls_uid_t *u = base_calloc(1, sizeof(*u));
    if (p->uid_format) {
        size_t n = strlen(p->uid_format);
        snprintf(u->format, sizeof(u->format), "%.*s", UID_FORMAT_MAX, p->uid_format);
        u->format_ok = true;
        for (const char *c = u->format; *c; c++) {
            if (!strchr(UID_LETTERS, *c)) {
                u->format_ok = false;
                base_log(BASE_LOG_MOD_SERVER, BASE_LOG_WARNING,
                         "sslProfile '%s': uidFormat '%s': '%c' is not a field (c, s, l, o, u, "
                         "n, 1, 2, 5): EXTERNAL clients are named by their certificate's subject",
                         p->name, p->uid_format, *c);
                break;
            }
        }
        if (u->format_ok && n > UID_FORMAT_MAX)
            base_log(BASE_LOG_MOD_SERVER, BASE_LOG_WARNING,
                     "sslProfile '%s': uidFormat '%s': only its first %d letters are used, as "
                     "qdrouterd does",
                     p->name, p->uid_format, UID_FORMAT_MAX);
    }
    if (p->uid_name_mapping_file && load_map(u, p, err, errlen) < 0) {
        rtr_tls_uid_free(u);
        return NULL;
    }
    return u;
}

void rtr_tls_uid_free(rtr_tls_uid_t *u)
{
    if (!u)
        return;
    for (size_t i = 0; i < u->n_map; i++) {
        free(u->map[i].uid);
        free(u->map[i].name);
    }
    free(u->map);
    free(u);
}

/* The certificate's subject as RFC 2253 writes it (Proton's pn_ssl_get_remote_subject()). */
static char *subject_text(X509 *cert)
{
    X509_NAME *name = X509_get_subject_name(cert);
    BIO       *b = name ? BIO_new(BIO_s_mem()) : NULL;
    char      *out = NULL;
    if (b && X509_NAME_print_ex(b, name, 0, XN_FLAG_RFC2253) >= 0) {
        char *p = NULL;
        long  n = BIO_get_mem_data(b, &p);
        if (n >= 0) {
            out = base_malloc((size_t)n + 1);
            memcpy(out, p, (size_t)n);
            out[n] = '\0';
        }
    }
    BIO_free(b);
    return out;
}

/* The first entry of field nid in the subject, as UTF-8 (a new string), or NULL. */
static char *subject_field(X509 *cert, int nid)
{
    X509_NAME *name = X509_get_subject_name(cert);
    int        i = name ? X509_NAME_get_index_by_NID(name, nid, -1) : -1;
    if (i < 0)
        return NULL;
    unsigned char *utf8 = NULL;
    int n = ASN1_STRING_to_UTF8(&utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name, i)));
    if (n < 0)
        return NULL;
    char *out = base_malloc((size_t)n + 1);
    memcpy(out, utf8, (size_t)n);
    out[n] = '\0';
    OPENSSL_free(utf8);
    return out;
}

static void fingerprint(X509 *cert, const EVP_MD *md, char *hex, size_t cap)
{
    unsigned char d[EVP_MAX_MD_SIZE];
    unsigned int  n = 0;
    hex[0] = '\0';
    if (X509_digest(cert, md, d, &n) != 1)
        return;
    for (unsigned i = 0; i < n && 2 * i + 2 < cap; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

char *rtr_tls_uid_user(const rtr_tls_uid_t *u, X509 *cert)
{
    if (!u || !u->format_ok || !u->format[0])
        return subject_text(cert);
    /* qdrouterd keeps one fingerprint: with two digit letters, both places get the last one
       computed */
    char  fp[2 * EVP_MAX_MD_SIZE + 1] = "";
    char *field[UID_FORMAT_MAX] = {NULL};
    for (size_t i = 0; u->format[i]; i++) {
        switch (u->format[i]) {
        case 'c':
            field[i] = subject_field(cert, NID_countryName);
            break;
        case 's':
            field[i] = subject_field(cert, NID_stateOrProvinceName);
            break;
        case 'l':
            field[i] = subject_field(cert, NID_localityName);
            break;
        case 'o':
            field[i] = subject_field(cert, NID_organizationName);
            break;
        case 'u':
            field[i] = subject_field(cert, NID_organizationalUnitName);
            break;
        case 'n':
            field[i] = subject_field(cert, NID_commonName);
            break;
        case '1':
            fingerprint(cert, EVP_sha1(), fp, sizeof(fp));
            break;
        case '2':
            fingerprint(cert, EVP_sha256(), fp, sizeof(fp));
            break;
        case '5':
            fingerprint(cert, EVP_sha512(), fp, sizeof(fp));
            break;
        }
    }
    size_t total = 0, n = strlen(u->format);
    for (size_t i = 0; i < n; i++)
        total += (field[i] ? strlen(field[i]) : strlen(fp)) + 1;
    char  *out = base_malloc(total + 1);
    size_t o = 0, text = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        const char *v = strchr("125", u->format[i]) ? fp : field[i];
        if (!v || (v == fp && !*fp))
            continue;
        if (o)
            out[o++] = ';';
        size_t k = strlen(v);
        memcpy(out + o, v, k);
        o += k;
        text += k;
        out[o] = '\0';
    }
    for (size_t i = 0; i < n; i++)
        free(field[i]);
    if (text == 0) { /* none of the fields is in the certificate */
        free(out);
        return subject_text(cert);
    }
    if (u->n_map) {
        uid_pair_t        key = {.uid = out};
        const uid_pair_t *hit = NULL;
        size_t            lo = 0, hi = u->n_map;
        while (lo < hi) { /* bsearch on the uid alone (pairs are unique by uid) */
            size_t mid = lo + (hi - lo) / 2;
            int    c = strcmp(key.uid, u->map[mid].uid);
            if (c == 0) {
                hit = &u->map[mid];
                break;
            }
            if (c < 0)
                hi = mid;
            else
                lo = mid + 1;
        }
        if (hit && *hit->name) {
            free(out);
            out = base_strdup(hit->name);
        }
    }
    return out;
}
