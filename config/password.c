/* config/password.c: a password attribute's value as qdrouterd reads it (sslProfile
 * `password`, connector `saslPassword`; see cfg_password_resolve() in config.h).
 *
 * Threads: main thread at start-up only (getenv(), and the file is read with blocking I/O).
 * Owns nothing: the result is the caller's.
 */
#include "config/config.h"

#include "core/base/base.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* qdrouterd reads at most this many bytes of a password file's first line */
#define PASSWORD_FILE_MAX 199

__attribute__((format(printf, 3, 4))) static int pw_fail(char *err, size_t errlen,
                                                         const char *fmt, ...)
{
    va_list ap;
    if (err && errlen) {
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int from_file(const char *path, char **out, char *err, size_t errlen)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return pw_fail(err, errlen, "password file '%s': cannot open: %s", path,
                       strerror(errno));
    char   buf[PASSWORD_FILE_MAX + 1];
    size_t n = 0;
    int    c;
    while ((c = fgetc(f)) != EOF && c != '\n') {
        if (n == PASSWORD_FILE_MAX) {
            fclose(f);
            /* qdrouterd would cut it, and the key would then not open */
            return pw_fail(err, errlen,
                           "password file '%s': its first line is longer than %d bytes", path,
                           PASSWORD_FILE_MAX);
        }
        buf[n++] = (char)c;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad)
        return pw_fail(err, errlen, "password file '%s': cannot read it", path);
    if (n == 0)
        /* qdrouterd then keeps "file:<path>" itself as the password */
        return pw_fail(err, errlen, "password file '%s': its first line is empty", path);
    buf[n] = '\0';
    *out = base_strdup(buf);
    return 0;
}

int cfg_password_resolve(const char *value, bool allow_literal, char **out, bool *plain,
                         char *err, size_t errlen)
{
    *plain = false;
    if (!value)
        return pw_fail(err, errlen, "no password");
    if (strncmp(value, "env:", 4) == 0) {
        const char *var = value + 4;
        while (*var == ' ')
            var++;
        const char *v = getenv(var);
        if (!v)
            return pw_fail(err, errlen, "password: environment variable '%s' is not set", var);
        *out = base_strdup(v);
        return 0;
    }
    if (strncmp(value, "pass:", 5) == 0 ||
        (allow_literal && strncmp(value, "literal:", 8) == 0)) {
        *plain = true;
        *out = base_strdup(value + (value[0] == 'p' ? 5 : 8));
        return 0;
    }
    if (strncmp(value, "file:", 5) == 0)
        return from_file(value + 5, out, err, errlen);
    *plain = true;
    *out = base_strdup(value);
    return 0;
}
