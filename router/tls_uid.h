/* router/tls_uid.h: who a client certificate names - the user of a client that authenticated
 * with SASL EXTERNAL - as qdrouterd 1.19 names it: the sslProfile's uidFormat picks
 * certificate fields (c country, s state, l locality, o organisation, u unit, n common name,
 * 1/2/5 the SHA-1/256/512 fingerprint in lower-case hex) joined by ';' in the order given,
 * and its uidNameMappingFile (a JSON object {uid: name}) renames that uid.  Without a
 * uidFormat, or when none of its fields is in the certificate, or when it has a letter outside
 * that list, the user is the certificate's subject as RFC 2253 writes it
 * ("CN=alice,O=Example,C=US"), as Proton names it.
 *
 * Threads: rtr_tls_uid_new/free on the main thread (start-up, end); an rtr_tls_uid_t is then
 * read-only, and rtr_tls_uid_user() is thread-safe (the workers call it).
 */
#ifndef JUNCTION_ROUTER_TLS_UID_H
#define JUNCTION_ROUTER_TLS_UID_H

#include "config/config.h"

#include <openssl/x509.h>
#include <stddef.h>

typedef struct rtr_tls_uid rtr_tls_uid_t;

/* The uidFormat and the mapping of profile p, the mapping file read and checked (readable,
 * a JSON object whose values are strings).  NULL with one line in err naming the profile, the
 * file and what is wrong.  A uidFormat letter qdrouterd does not know is not an error (it
 * loads such a file): one warning line, and the subject names the clients. */
rtr_tls_uid_t *rtr_tls_uid_new(const cfg_ssl_profile_t *p, char *err, size_t errlen);
void           rtr_tls_uid_free(rtr_tls_uid_t *u);

/* The user that certificate `cert` names (u may be NULL: the subject).  Returns a new
 * string (the caller frees it), or NULL when the certificate has no subject.  Thread-safe. */
char *rtr_tls_uid_user(const rtr_tls_uid_t *u, X509 *cert);

/* Write a profile's error line into err: "sslProfile '<name>': <what>", or, with file_attr (an
 * attribute that names a file, such as "uidNameMappingFile"), "sslProfile '<name>':
 * <file_attr> <path>: <what>"; <what> is fmt's text.  Returns -1.  Thread-safe.
 * Declared here rather than in tls.h (tls.c uses it too) so that tls_uid.c, which its unit
 * test builds alone, needs nothing of tls.c. */
int rtr_tls_profile_fail(const cfg_ssl_profile_t *p, const char *file_attr, const char *path,
                         char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

#endif
