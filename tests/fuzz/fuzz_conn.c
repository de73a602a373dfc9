/* tests/fuzz/fuzz_conn.c: libFuzzer target for a whole connection's input path - bytes ->
 * frame guard -> Proton driver -> router (router/transport.c, conn.c, link_in.c) -> core - on
 * the real thing.
 *
 * The first input starts a real router in this process (rtr_server_new/start: the core
 * thread and one worker thread, no listening socket is ever polled) from a fixed
 * configuration that also sets every per-connection limit low, so inputs can hit them.  Each
 * input is then one client connection over a socketpair: one end is handed to the worker as
 * an accepted connection (RTR_EXT_ACCEPT, exactly as the main thread hands over accepted
 * sockets), the input is written to the other end frame by frame (a pause after each of
 * the first few frames lets the router answer, e.g. grant credit after an attach, as a real
 * client would wait), the router's output is read and dropped, and once the router has gone
 * quiet the client's write side is shut down.  The router must
 * then close the connection: a connection still open 30 s after the client's EOF aborts.  A
 * router crash, a sanitizer report or Proton's abort (PROTON-2853) is a finding.
 *
 * At exit the router is shut down as on SIGTERM (rtr_server_stop/run/free), so a replay under
 * LeakSanitizer checks that every connection's memory went back.
 *
 * Seeds: tests/fuzz/conn/corpus - a sample of Proton's public connection-driver corpus, and
 * client byte streams recorded from Proton-Python sessions through the router
 * (tests/fuzz/conn/gen_corpus.py: attach, transfer, disposition, drain, dynamic links,
 * multi-frame messages), a TLS ClientHello recorded from `openssl s_client` (to this
 * plain listener: bytes the frame guard refuses), and the bad-input streams of
 * tests/system/test_sasl.py and test_auth_failures.py (files `sasl-*`, `tls-*`, `not-amqp-*`:
 * SASL frames out of order, malformed, at and past maxFrameSize, a SASL header alone, half a
 * ClientHello, an HTTP request).  Threads: libFuzzer's thread feeds inputs; the router runs its own.
 *
 * Client mode: an input whose first byte is FUZZ_CONNECTOR is what a server sends to one of
 * the router's connectors (the rest of the input, fed the same way).  Its connection is
 * handed to the worker as a connector's connected socket (RTR_EXT_CONNECT, with a record
 * of a connector set of this file's own that is never started, so it never connects
 * anywhere): the router is the client - Proton's SASL client (ANONYMOUS, or PLAIN with the
 * connector's saslUsername and saslPassword), the frame guard's client side (a server's
 * SASL frames) - and, the connector's role being route-container, the autoLinks and the
 * link route that name it attach their links once the peer's open came.  Seeds: files
 * `server-*` (tests/fuzz/conn/gen_server_corpus.py: a server's SASL exchanges, good and
 * failing, then the recorded sessions' AMQP frames as the peer's, and the answers a router
 * gives the autoLinks' attaches).
 */
#include "router/server.h"

#include "config/config.h"
#include "router/connector.h"
#include "core/base/base.h"
#include "core/base/log.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* One worker, limits low enough for inputs to reach them; no listener is ever polled.  The
 * listener authenticates through Cyrus SASL (router/sasl.c) with the configuration setup()
 * writes into a directory of its own (saslConfigDir): ANONYMOUS lets the recorded sessions
 * through, PLAIN and SCRAM run Cyrus's exchanges against a sasldb that has no user. */
static const char CONFIG[] =
    "[[\"router\", {\"id\": \"Fuzz.A\", \"workerThreads\": 1, \"shutdownGraceSeconds\": 0,"
    "   \"saslConfigDir\": \"%s\", \"saslConfigName\": \"fuzz\"}],"
    " [\"listener\", {\"host\": \"127.0.0.1\", \"port\": \"0\","
    "   \"saslMechanisms\": \"ANONYMOUS PLAIN SCRAM-SHA-256\","
    "   \"maxSessions\": 4, \"linkCapacity\": 8, \"idleTimeoutSeconds\": 0, \"stripAnnotations\": \"out\"}],"
    " [\"address\", {\"prefix\": \"multicast\", \"distribution\": \"multicast\"}],"
    " [\"address\", {\"prefix\": \"closest\", \"distribution\": \"closest\"}],"
    " [\"address\", {\"prefix\": \"unavailable\", \"distribution\": \"unavailable\"}],"
    " [\"autoLink\", {\"address\": \"fz.in\", \"direction\": \"in\", \"phase\": 0, \"connection\": \"fuzz-connector\"}],"
    " [\"autoLink\", {\"address\": \"fz.out\", \"direction\": \"out\", \"connection\": \"fuzz-connector\"}],"
    " [\"linkRoute\", {\"prefix\": \"fz.lr\", \"direction\": \"in\", \"connection\": \"fuzz-connector\"}]]";

/* Client mode: the first byte of an input that a connector's peer sends (see the top). */
#define FUZZ_CONNECTOR 0xC5

/* The connector of client mode: its own configuration, so the router's connector set never
 * has it (nothing ever connects); the same low limits as the listener's. */
static const char CONNECTOR_CONFIG[] =
    "[[\"router\", {\"id\": \"Fuzz.C\"}],"
    " [\"connector\", {\"name\": \"fuzz-connector\", \"host\": \"127.0.0.1\", \"port\": \"1\","
    "   \"role\": \"route-container\", \"saslMechanisms\": \"ANONYMOUS PLAIN\","
    "   \"saslUsername\": \"fuzz\", \"saslPassword\": \"fuzz\","
    "   \"maxSessions\": 4, \"linkCapacity\": 8, \"idleTimeoutSeconds\": 0, \"stripAnnotations\": \"out\"}]]";

static cfg_t            *cfg;
static cfg_t            *ccfg;      /* CONNECTOR_CONFIG */
static rtr_connectors_t *conns;     /* its connector set, never started */
static rtr_connector_t  *connector; /* its one record */
static rtr_server_t *srv;
static char          sasl_dir[64];
static char          sasl_conf[128];

static void teardown(void)
{
    if (!srv)
        return;
    rtr_server_stop(srv);
    rtr_server_run(srv);
    rtr_server_free(srv);
    srv = NULL;
    rtr_connectors_free(conns); /* the worker that used its record is gone */
    conns = NULL;
    connector = NULL;
    cfg_free(ccfg);
    ccfg = NULL;
    cfg_free(cfg);
    cfg = NULL;
    unlink(sasl_conf);
    rmdir(sasl_dir);
}

static void setup(void)
{
    char err[512];
    signal(SIGPIPE, SIG_IGN);
    base_thread_set_role(BASE_THREAD_MAIN, 0);
    /* the router logs every refused connection: keep the fuzzer's output readable */
    uint8_t mask = 0;
    if (base_log_parse_enable(getenv("JUNCTION_FUZZ_LOG") ? getenv("JUNCTION_FUZZ_LOG")
                                                          : "critical+",
                              &mask) != 0)
        abort();
    base_log_set_mask(BASE_LOG_MOD_DEFAULT, mask);
    base_log_finish_config();
    snprintf(sasl_dir, sizeof(sasl_dir), "/tmp/fuzz_conn.XXXXXX");
    if (!mkdtemp(sasl_dir))
        abort();
    snprintf(sasl_conf, sizeof(sasl_conf), "%s/fuzz.conf", sasl_dir);
    FILE *f = fopen(sasl_conf, "w");
    if (!f)
        abort();
    fprintf(f, "mech_list: ANONYMOUS PLAIN SCRAM-SHA-256\npwcheck_method: auxprop\n"
               "auxprop_plugin: sasldb\nsasldb_path: %s/none.sasldb\n", sasl_dir);
    fclose(f);
    char text[sizeof(CONFIG) + sizeof(sasl_dir)];
    snprintf(text, sizeof(text), CONFIG, sasl_dir);
    if (cfg_load_string(text, "fuzz_conn.json", &cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "fuzz_conn: %s\n", err);
        abort();
    }
    if (cfg_load_string(CONNECTOR_CONFIG, "fuzz_conn_connector.json", &ccfg, err,
                        sizeof(err)) != 0) {
        fprintf(stderr, "fuzz_conn: %s\n", err);
        abort();
    }
    srv = rtr_server_new(cfg, err, sizeof(err));
    if (!srv || rtr_server_start(srv) != 0) {
        fprintf(stderr, "fuzz_conn: cannot start the router: %s\n", srv ? "start" : err);
        abort();
    }
    conns = rtr_connectors_new(ccfg, NULL, rtr_server_ctx(srv)->workers, 1);
    connector = rtr_connectors_get(conns, 1);
    if (!connector)
        abort();
    atexit(teardown);
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Read and drop what the router wrote until it has been quiet for quiet_ms (or until
 * limit_ms passed).  Returns 1 on EOF (the router closed), else 0. */
static int drain(int fd, int quiet_ms, uint64_t limit_ms)
{
    static char sink[65536];
    uint64_t end = now_ms() + limit_ms;
    for (;;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        uint64_t t = now_ms();
        if (t >= end)
            return 0;
        int wait = quiet_ms < 0 ? (int)(end - t) : quiet_ms;
        int n = poll(&p, 1, wait);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0; /* quiet */
        ssize_t r = read(fd, sink, sizeof(sink));
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
            return 1;
    }
}

/* Write all of buf, reading (and dropping) the router's output meanwhile so neither side
 * blocks on a full socket.  Returns -1 when the router closed first. */
static int feed(int fd, const uint8_t *buf, size_t len)
{
    static char sink[65536];
    uint64_t end = now_ms() + 30000;
    while (len > 0) {
        struct pollfd p = {.fd = fd, .events = POLLIN | POLLOUT};
        if (now_ms() > end)
            abort(); /* the router neither read nor closed for 30 s */
        if (poll(&p, 1, 1000) <= 0)
            continue;
        if (p.revents & POLLIN) {
            ssize_t r = read(fd, sink, sizeof(sink));
            if (r == 0)
                return -1;
        }
        if (p.revents & (POLLERR | POLLHUP))
            return -1;
        if (p.revents & POLLOUT) {
            ssize_t w = write(fd, buf, len);
            if (w < 0 && (errno == EPIPE || errno == ECONNRESET))
                return -1;
            if (w > 0) {
                buf += w;
                len -= (size_t)w;
            }
        }
    }
    return 0;
}

/* Where to pause: after each protocol header and each whole frame, as a client waiting for
 * the router's answers would (an attach before its transfers waits for credit), at most
 * BREAKS_MAX times; a size that makes no sense ends the walk (the rest goes in one piece). */
#define BREAKS_MAX 12
static size_t frame_breaks(const uint8_t *d, size_t n, size_t *at)
{
    size_t k = 0, pos = 0;
    while (k < BREAKS_MAX && pos + 8 <= n) {
        if (memcmp(d + pos, "AMQP", 4) == 0) {
            pos += 8;
        } else {
            uint32_t fs = (uint32_t)d[pos] << 24 | (uint32_t)d[pos + 1] << 16 |
                          (uint32_t)d[pos + 2] << 8 | d[pos + 3];
            if (fs < 8 || fs > n - pos)
                break;
            pos += fs;
        }
        at[k++] = pos;
    }
    return k;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!srv)
        setup();
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) != 0)
        abort();
    /* the worker owns sv[1] from here (it closes it with the connection) */
    if (size > 0 && data[0] == FUZZ_CONNECTOR) {
        data++;
        size--;
        rtr_worker_post_ext(&rtr_server_ctx(srv)->workers[0], RTR_EXT_CONNECT, connector,
                            sv[1]);
    } else {
        rtr_worker_post_ext(&rtr_server_ctx(srv)->workers[0], RTR_EXT_ACCEPT,
                            (void *)&cfg->listeners[0], sv[1]);
    }

    size_t at[BREAKS_MAX + 1];
    size_t n = frame_breaks(data, size, at);
    if (n == 0 || at[n - 1] < size)
        at[n++] = size;
    int closed = 0;
    size_t from = 0;
    for (size_t i = 0; i < n && !closed; i++) {
        closed = feed(sv[0], data + from, at[i] - from) < 0;
        from = at[i];
        if (!closed)
            closed = drain(sv[0], 1, 100); /* let the router answer */
    }
    if (!closed) {
        shutdown(sv[0], SHUT_WR);
        if (!drain(sv[0], -1, 30000)) {
            fprintf(stderr, "fuzz_conn: the router kept the connection open 30 s after the "
                            "client's EOF\n");
            abort();
        }
    }
    close(sv[0]);
    return 0;
}
