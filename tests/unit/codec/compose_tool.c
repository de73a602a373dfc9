/* tests/unit/codec/compose_tool.c: scan a message file, compose its outgoing prefix, write the
 * outgoing message.  Lets proton_check.py have Qpid Proton decode what codec/ produces.
 *
 * Usage: compose_tool <in> <out> strip|write [to=S] [ingress=S] [append=S] [phase=N]
 *                     [stream=N] [carry]
 *   strip    write no router annotations (drop the input's)
 *   write    write the ones given: to, ingress, phase, stream; `carry` keeps the input's trace
 *            and append=S adds S to it.
 * Exits 0 on success, 1 with a message on stderr otherwise.
 */
#include "codec/codec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static codec_bytes_t arg_bytes(const char *s)
{
    return (codec_bytes_t){(const uint8_t *)s, strlen(s)};
}

int main(int argc, char **argv)
{
    static uint8_t msg[1 << 20];
    static uint8_t scratch[1 << 16];
    codec_iov_t    iov[256];
    codec_scan_t   s;
    codec_ra_out_t ra = {0};
    const char    *why;
    FILE          *f;
    size_t         len;
    int            n;

    if (argc < 4 || (strcmp(argv[3], "strip") != 0 && strcmp(argv[3], "write") != 0)) {
        fprintf(stderr, "usage: compose_tool <in> <out> strip|write [key=value...] [carry]\n");
        return 1;
    }
    if (!(f = fopen(argv[1], "rb"))) {
        perror(argv[1]);
        return 1;
    }
    len = fread(msg, 1, sizeof(msg), f);
    fclose(f);
    if (codec_scan(msg, len, true, &s, &why) != 0) {
        fprintf(stderr, "compose_tool: %s: %s\n", argv[1], why);
        return 1;
    }
    ra.write = strcmp(argv[3], "write") == 0;
    for (int i = 4; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "to=", 3) == 0)
            ra.to = arg_bytes(a + 3);
        else if (strncmp(a, "ingress=", 8) == 0)
            ra.ingress = arg_bytes(a + 8);
        else if (strncmp(a, "append=", 7) == 0)
            ra.trace_append = arg_bytes(a + 7);
        else if (strncmp(a, "phase=", 6) == 0)
            ra.phase = atoi(a + 6);
        else if (strncmp(a, "stream=", 7) == 0)
            ra.stream = atoi(a + 7);
        else if (strcmp(a, "carry") == 0) {
            ra.trace = s.ra.trace;
            ra.trace_count = s.ra.trace_count;
        } else {
            fprintf(stderr, "compose_tool: unknown argument %s\n", a);
            return 1;
        }
    }
    n = codec_compose_prefix(msg, &s, &ra, scratch, sizeof(scratch), iov, 256);
    if (n < 0) {
        fprintf(stderr, "compose_tool: compose failed\n");
        return 1;
    }
    if (!(f = fopen(argv[2], "wb"))) {
        perror(argv[2]);
        return 1;
    }
    for (int i = 0; i < n; i++)
        fwrite(iov[i].base, 1, iov[i].len, f);
    fwrite(msg + s.body_off, 1, len - s.body_off, f);
    if (fclose(f) != 0) {
        perror(argv[2]);
        return 1;
    }
    return 0;
}
