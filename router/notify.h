/* router/notify.h: service-manager readiness notification (systemd's sd_notify protocol,
 * spoken directly: no libsystemd).
 */
#ifndef JUNCTION_ROUTER_NOTIFY_H
#define JUNCTION_ROUTER_NOTIFY_H

/* Send `state` - newline-separated assignments such as "READY=1\nMAINPID=123" - as one
 * datagram to the unix socket named by $NOTIFY_SOCKET: a path, or an abstract socket name
 * when it starts with '@'.  Returns 1 when sent, 0 when NOTIFY_SOCKET is unset or empty
 * (nothing is sent: no service manager asked), or a negative errno: -EAFNOSUPPORT for an
 * address that is neither an absolute path nor '@' name, -ENAMETOOLONG, or the socket's
 * error.  Thread-safe (no state; reads the environment, which nothing changes after start);
 * junctiond calls it from the main thread only. */
int rtr_notify(const char *state);

#endif
