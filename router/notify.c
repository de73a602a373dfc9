/* router/notify.c: tells the service manager (systemd, Type=notify) when junctiond serves and
 * when it stops, by the notify socket protocol: each message is one datagram of
 * newline-separated VARIABLE=value assignments sent to the unix socket whose address is in
 * $NOTIFY_SOCKET (a file path, or an abstract name written with a leading '@').  Nothing else:
 * no libsystemd, no state, no thread of its own.
 *
 * Threads: rtr_notify() is thread-safe; junctiond calls it on the main thread only - READY
 * from main() once rtr_server_start() returned, STOPPING from server.c's server_stop() at the
 * signal.
 */
#include "router/notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int rtr_notify(const char *state)
{
    const char *addr = getenv("NOTIFY_SOCKET");
    if (!addr || !addr[0])
        return 0;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t             len = strlen(addr);
    if (addr[0] != '/' && addr[0] != '@')
        return -EAFNOSUPPORT; /* e.g. systemd's "vsock:" addresses, for virtual machines */
    if (len >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, addr, len);
    socklen_t salen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    if (addr[0] == '@')
        sa.sun_path[0] = '\0'; /* abstract: the name is the bytes after the NUL, no terminator */
    else
        salen++; /* a path counts its terminating NUL */

    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    ssize_t n;
    do
        n = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, salen);
    while (n < 0 && errno == EINTR);
    int rc = n < 0 ? -errno : 1;
    close(fd);
    return rc;
}
