/* tests/unit/router/tls_uid_test.c: the user a client certificate names (router/tls_uid.c),
 * with certificates made here in memory: the subject in RFC 2253 form, each uidFormat field
 * and fingerprint (the digests computed here over the certificate's DER, not through the code
 * under test), fields absent, an unknown letter, more than 7 letters, a UTF-8 field, and the
 * uidNameMappingFile (renaming, later keys, empty names, and the errors a bad file gives). */
#include "router/tls_uid.h"

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h> /* after setjmp.h, stdarg.h, stddef.h */

static X509 *make_cert(const char *const *fields)
{
    EVP_PKEY *key = EVP_EC_gen("prime256v1");
    X509     *x = X509_new();
    assert_non_null(key);
    assert_non_null(x);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 7);
    X509_gmtime_adj(X509_getm_notBefore(x), 0);
    X509_gmtime_adj(X509_getm_notAfter(x), 3600);
    X509_NAME *n = X509_get_subject_name(x);
    for (size_t i = 0; fields[i]; i += 2)
        assert_int_equal(X509_NAME_add_entry_by_txt(n, fields[i], MBSTRING_UTF8,
                                                    (const unsigned char *)fields[i + 1], -1, -1,
                                                    0),
                         1);
    X509_set_issuer_name(x, n);
    X509_set_pubkey(x, key);
    assert_true(X509_sign(x, key, EVP_sha256()) > 0);
    EVP_PKEY_free(key);
    return x;
}

/* The certificate's digest in lower-case hex, over its DER encoding. */
static void digest_hex(X509 *x, const char *md, char *out)
{
    unsigned char *der = NULL;
    int            len = i2d_X509(x, &der);
    unsigned char  d[EVP_MAX_MD_SIZE];
    unsigned int   n = 0;
    assert_true(len > 0);
    assert_int_equal(EVP_Digest(der, (size_t)len, d, &n, EVP_get_digestbyname(md), NULL), 1);
    for (unsigned i = 0; i < n; i++)
        sprintf(out + 2 * i, "%02x", d[i]);
    OPENSSL_free(der);
}

static cfg_ssl_profile_t prof(const char *fmt, const char *map)
{
    cfg_ssl_profile_t p = {.name = "p"};
    p.uid_format = (char *)fmt;
    p.uid_name_mapping_file = (char *)map;
    return p;
}

static void check_user(const char *fmt, const char *map, X509 *x, const char *want)
{
    char              err[1024] = "";
    cfg_ssl_profile_t p = prof(fmt, map);
    rtr_tls_uid_t    *u = rtr_tls_uid_new(&p, err, sizeof(err));
    assert_non_null(u);
    char *got = rtr_tls_uid_user(u, x);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
    rtr_tls_uid_free(u);
}

static const char *const ALICE[] = {"C",      "US", "ST",  "NC", "L",     "Raleigh", "O",
                                    "Client", "OU", "Dev", "CN", "alice", NULL};

static void test_fields_and_fingerprints(void **state)
{
    (void)state;
    X509 *x = make_cert(ALICE);
    char  sha1[41], sha256[65], sha512[129], want[512];
    digest_hex(x, "SHA1", sha1);
    digest_hex(x, "SHA256", sha256);
    digest_hex(x, "SHA512", sha512);

    check_user(NULL, NULL, x, "CN=alice,OU=Dev,O=Client,L=Raleigh,ST=NC,C=US");
    check_user("1", NULL, x, sha1);
    check_user("2", NULL, x, sha256);
    check_user("5", NULL, x, sha512);
    snprintf(want, sizeof(want), "%s;alice;Client;Dev;US;NC", sha256);
    check_user("2noucs", NULL, x, want);
    snprintf(want, sizeof(want), "US;NC;%s", sha512);
    check_user("cs5", NULL, x, want);
    check_user("scounl", NULL, x, "NC;US;Client;Dev;alice;Raleigh");
    /* qdrouterd reads 7 letters; an unknown one, or an empty format, names by the subject */
    check_user("ouccccccc", NULL, x, "Client;Dev;US;US;US;US;US");
    check_user("nx", NULL, x, "CN=alice,OU=Dev,O=Client,L=Raleigh,ST=NC,C=US");
    check_user("", NULL, x, "CN=alice,OU=Dev,O=Client,L=Raleigh,ST=NC,C=US");
    X509_free(x);
}

static void test_absent_fields_and_utf8(void **state)
{
    (void)state;
    static const char *const ZOE[] = {"O", "Ex, Inc", "CN", "Zo\xc3\xab", NULL};
    X509                    *x = make_cert(ZOE);
    check_user("csu", NULL, x, "CN=Zo\\C3\\AB,O=Ex\\, Inc"); /* RFC 2253 escapes, as Proton */
    check_user("cn", NULL, x, "Zo\xc3\xab");                 /* the field itself, as UTF-8 */
    check_user("no", NULL, x, "Zo\xc3\xab;Ex, Inc");
    X509_free(x);
}

static char *write_tmp(const char *text)
{
    static char path[64];
    snprintf(path, sizeof(path), "/tmp/tls_uid_test.XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void test_mapping_file(void **state)
{
    (void)state;
    X509 *x = make_cert(ALICE);
    char  sha1[41], text[256];
    digest_hex(x, "SHA1", sha1);
    /* a later key replaces an earlier one; an empty name leaves the uid */
    char *path = write_tmp("{\"alice;Dev\": \"first\", \"z\": \"Zed\",\n"
                           " \"alice;Dev\": \"Alice Liddell\"}\n");
    check_user("nu", path, x, "Alice Liddell");
    check_user("n", path, x, "alice"); /* not in the file */
    check_user(NULL, path, x, "CN=alice,OU=Dev,O=Client,L=Raleigh,ST=NC,C=US"); /* no uid */
    unlink(path);
    snprintf(text, sizeof(text), "{\"%s\": \"\"}", sha1);
    path = write_tmp(text);
    check_user("1", path, x, sha1);
    unlink(path);
    path = write_tmp("{}");
    check_user("n", path, x, "alice");
    unlink(path);
    X509_free(x);
}

static void bad_map(const char *text, const char *want)
{
    char              err[1024] = "", line[1100];
    char             *path = text ? write_tmp(text) : "/nonexistent/map.json";
    cfg_ssl_profile_t p = prof("n", path);
    assert_null(rtr_tls_uid_new(&p, err, sizeof(err)));
    snprintf(line, sizeof(line), "sslProfile 'p': uidNameMappingFile %s: %s", path, want);
    assert_string_equal(err, line);
    if (text)
        unlink(path);
}

static void test_bad_mapping_files(void **state)
{
    (void)state;
    bad_map(NULL, "No such file or directory");
    bad_map("", "not JSON (line 1)");
    bad_map("{\"a\": \"b\",\n\n \"c\" }", "not JSON (line 3)");
    bad_map("{\"a\": \"b\"} x", "not JSON (line 1)");
    bad_map("[\"a\"]", "not a JSON object of uid to name ({\"uid\": \"name\", ...})");
    bad_map("{\"a\": \"b\", \"c\": null}", "the value of \"c\" is not a string (a name)");
    bad_map("{\"a\": {\"b\": \"c\"}}", "the value of \"a\" is not a string (a name)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields_and_fingerprints),
        cmocka_unit_test(test_absent_fields_and_utf8),
        cmocka_unit_test(test_mapping_file),
        cmocka_unit_test(test_bad_mapping_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
