/* tests/bench/scale/holdlinks.c: hold K receiver links open on K distinct addresses, so that
 * a router carries K addresses (and their stats) while a benchmark runs beside it.
 *
 *   junction-holdlinks --url HOST:PORT --links K [--prefix P] [--per-connection M]
 *
 * Opens ceil(K/M) connections with up to M receivers each, 500 to a session (addresses
 * P0 .. P(K-1), no credit), prints "READY <K> <seconds>" on stdout once the router has answered every
 * attach, then keeps the links open until SIGTERM or SIGINT.
 * A client of the benchmark, not part of the router: it uses Proton's proactor, single
 * threaded.  Exits non-zero if an attach is refused or a connection fails.
 */
#include <proton/condition.h>
#include <proton/connection.h>
#include <proton/event.h>
#include <proton/link.h>
#include <proton/listener.h>
#include <proton/proactor.h>
#include <proton/session.h>
#include <proton/terminus.h>
#include <proton/transport.h>

#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Links per session (see the note where sessions are made). */
#define SESSION_LINKS 500

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: junction-holdlinks --url HOST:PORT --links K [--prefix P] "
               "[--per-connection M]\n"
               "Holds K receivers on addresses P0..P(K-1) (default prefix \"scale.\", "
               "M = 10000);\nprints READY once all are attached; runs until SIGTERM.\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {{"url", required_argument, NULL, 'u'},
                                         {"links", required_argument, NULL, 'k'},
                                         {"prefix", required_argument, NULL, 'p'},
                                         {"per-connection", required_argument, NULL, 'm'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    const char *url = NULL, *prefix = "scale.";
    long links = 0, per = 10000;
    int ch;
    while ((ch = getopt_long(argc, argv, "u:k:p:m:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'u':
            url = optarg;
            break;
        case 'k':
            links = strtol(optarg, NULL, 10);
            break;
        case 'p':
            prefix = optarg;
            break;
        case 'm':
            per = strtol(optarg, NULL, 10);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!url || links <= 0 || per <= 0) {
        usage(stderr);
        return 2;
    }
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);

    pn_proactor_t *p = pn_proactor();
    long n_conns = (links + per - 1) / per;
    long next = 0, opened = 0;
    double t0 = now_s();
    for (long c = 0; c < n_conns; c++) {
        pn_connection_t *conn = pn_connection();
        pn_connection_set_container(conn, "junction-holdlinks");
        pn_connection_open(conn);
        pn_session_t *s = NULL;
        for (long i = 0; i < per && next < links; i++, next++) {
            /* Proton finds a link by name with a walk over its session's links, so keep
             * sessions small or attaching K links costs K^2 on both sides */
            if (i % SESSION_LINKS == 0) {
                s = pn_session(conn);
                pn_session_open(s);
            }
            char name[64], addr[256];
            snprintf(name, sizeof(name), "hold-%ld", next);
            snprintf(addr, sizeof(addr), "%s%ld", prefix, next);
            pn_link_t *l = pn_receiver(s, name);
            pn_terminus_set_address(pn_link_source(l), addr);
            pn_link_open(l);
        }
        pn_proactor_connect2(p, conn, NULL, url);
    }

    bool ready = false;
    int rc = 0;
    pn_proactor_set_timeout(p, 200); /* wake up now and then to see a signal */
    while (!stop) {
        pn_event_batch_t *b = pn_proactor_wait(p);
        pn_event_t *e;
        while ((e = pn_event_batch_next(b)) != NULL) {
            switch (pn_event_type(e)) {
            case PN_LINK_REMOTE_OPEN:
                opened++;
                break;
            case PN_LINK_REMOTE_CLOSE: {
                pn_condition_t *cond = pn_link_remote_condition(pn_event_link(e));
                fprintf(stderr, "holdlinks: link refused: %s %s\n",
                        pn_condition_get_name(cond) ? pn_condition_get_name(cond) : "",
                        pn_condition_get_description(cond) ? pn_condition_get_description(cond)
                                                           : "");
                rc = 1;
                stop = 1;
                break;
            }
            case PN_TRANSPORT_CLOSED: {
                pn_condition_t *cond = pn_transport_condition(pn_event_transport(e));
                if (pn_condition_is_set(cond)) {
                    fprintf(stderr, "holdlinks: connection failed: %s %s\n",
                            pn_condition_get_name(cond),
                            pn_condition_get_description(cond)
                                ? pn_condition_get_description(cond)
                                : "");
                    rc = 1;
                    stop = 1;
                }
                break;
            }
            case PN_PROACTOR_TIMEOUT:
                pn_proactor_set_timeout(p, 200);
                break;
            default:
                break;
            }
        }
        pn_proactor_done(p, b);
        if (!ready && opened == links) {
            ready = true;
            printf("READY %ld %.2f\n", links, now_s() - t0);
            fflush(stdout);
        }
    }
    pn_proactor_free(p);
    return rc;
}
