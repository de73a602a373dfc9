/* router/junctionctl.c: junctionctl, the command-line client of junctiond's management
 * socket - its command line: options, usage and the choice of command (the other files are
 * listed in router/junctionctl.h).
 *
 *   junctionctl [-s SOCKET] [--json] stats [GLOB]      current values
 *   junctionctl [-s SOCKET] [--json] list [GLOB]       names, kinds, help
 *   junctionctl [-s SOCKET] [--json] watch GLOB        live values, redrawn in place
 *   junctionctl [-s SOCKET] [--json] query TYPE        router | connections | links | addresses
 *   junctionctl [-s SOCKET] [--json] sslprofile VERB   list | create | update | delete
 *
 * Aligned tables by default, JSON with --json.  Exit status: 0 done, 1 the router could not
 * be reached or refused the request, 2 bad usage.  Every failure is one line on stderr.
 *
 * Threads: one.
 */
#include "router/junctionctl.h"

#include "config/config.h"
#include "junction_version.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: junctionctl [OPTIONS] COMMAND [ARGS]\n"
            "Read a running junctiond's statistics and entities over its management socket.\n"
            "\n"
            "Commands:\n"
            "  stats [GLOB]        current values of the stats matching GLOB (default: all),\n"
            "                      e.g. 'address.*.deliveriesEgress', 'router.*'\n"
            "  list [GLOB]         names, kinds and help of the stats matching GLOB\n"
            "  watch GLOB          live values, redrawn in place until interrupted\n"
            "  query TYPE          rows like qdstat's: router, connections, links, addresses\n"
            "  sslprofile list     the router's sslProfiles (a password itself is never shown)\n"
            "  sslprofile create NAME ATTR=VALUE...\n"
            "                      a new sslProfile (certFile=, privateKeyFile=, caCertFile=,\n"
            "                      password=, ciphers=, protocols=...), checked as at start-up\n"
            "  sslprofile update NAME [ATTR=VALUE...]\n"
            "                      read the profile's files again, with the attributes given\n"
            "                      (ATTR= removes one): new connections get the new\n"
            "                      certificate, open ones keep theirs; on an error nothing\n"
            "                      changes\n"
            "  sslprofile delete NAME\n"
            "                      refused while a listener names the profile\n"
            "\n"
            "Options:\n"
            "  -s, --socket PATH   the management socket (default: the `management` entity's\n"
            "                      default, /run/junction/junctiond.sock for root, else\n"
            "                      $XDG_RUNTIME_DIR/junction/junctiond.sock)\n"
            "  -j, --json          JSON for scripts instead of tables (watch: one JSON line\n"
            "                      per update, as the router sends it)\n"
            "  -i, --interval MS   watch: milliseconds between updates (default 1000)\n"
            "  -n, --count N       watch: stop after N intervals (default: until interrupted)\n"
            "  -t, --timeout SEC   how long to wait for a reply (default 10)\n"
            "  -v, --version       print the version and exit\n"
            "  -h, --help          print this help and exit\n"
            "\n"
            "A GLOB matches whole stat names: '*' any run of characters (dots included), '?'\n"
            "one character, '\\' quotes the next one.  Exit status: 0 done, 1 the router could\n"
            "not be reached or refused the request, 2 bad usage.\n");
}

static long parse_long(const char *opt, const char *s, long min, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        ctl_die(CTL_EXIT_USAGE, "%s: expected a number from %ld to %ld, got '%s'", opt, min, max,
                s);
    return v;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'},   {"json", no_argument, NULL, 'j'},
        {"interval", required_argument, NULL, 'i'}, {"count", required_argument, NULL, 'n'},
        {"timeout", required_argument, NULL, 't'},  {"version", no_argument, NULL, 'v'},
        {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0}};
    ctl_opts_t o = {.interval_ms = 1000, .timeout_ms = 10000};
    int        ch;
    while ((ch = getopt_long(argc, argv, "s:ji:n:t:vh", opts, NULL)) != -1) {
        switch (ch) {
        case 's':
            o.socket = optarg;
            break;
        case 'j':
            o.json = true;
            break;
        case 'i':
            o.interval_ms = parse_long("--interval", optarg, 10, 3600000);
            break;
        case 'n':
            o.count = parse_long("--count", optarg, 1, 1000000000);
            break;
        case 't':
            o.timeout_ms = parse_long("--timeout", optarg, 1, 86400) * 1000;
            break;
        case 'v':
            printf("%s\n", JUNCTION_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return CTL_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "%s: no command given\n", CTL_PROG);
        usage(stderr);
        return CTL_EXIT_USAGE;
    }
    const char *cmd = argv[optind++];
    int         nargs = argc - optind;
    const char *arg = nargs > 0 ? argv[optind] : NULL;
    int (*run)(ctl_conn_t *, const ctl_opts_t *, const char *) = NULL;
    bool ssl = false;
    if (strcmp(cmd, "sslprofile") == 0) {
        if (!ctl_sslprofile_usage_ok(nargs, argv + optind)) {
            fprintf(stderr, "%s: sslprofile: expected list, create NAME ATTR=VALUE..., update "
                            "NAME [ATTR=VALUE...] or delete NAME\n", CTL_PROG);
            usage(stderr);
            return CTL_EXIT_USAGE;
        }
        ssl = true;
    } else if (strcmp(cmd, "stats") == 0 && nargs <= 1) {
        run = ctl_cmd_stats;
    } else if (strcmp(cmd, "list") == 0 && nargs <= 1) {
        run = ctl_cmd_list;
    } else if (strcmp(cmd, "watch") == 0 && nargs == 1) {
        run = ctl_cmd_watch;
    } else if (strcmp(cmd, "query") == 0 && nargs == 1) {
        if (!ctl_query_known(arg))
            ctl_die(CTL_EXIT_USAGE,
                    "query: unknown type '%s' (expected router, connections, links or "
                    "addresses)",
                    arg);
        run = ctl_cmd_query;
    } else if (strcmp(cmd, "stats") == 0 || strcmp(cmd, "list") == 0 || strcmp(cmd, "watch") == 0 ||
               strcmp(cmd, "query") == 0) {
        fprintf(stderr, "%s: %s: wrong number of arguments\n", CTL_PROG, cmd);
        usage(stderr);
        return CTL_EXIT_USAGE;
    } else {
        fprintf(stderr, "%s: unknown command '%s'\n", CTL_PROG, cmd);
        usage(stderr);
        return CTL_EXIT_USAGE;
    }

    char path[CFG_SOCKET_PATH_MAX + 1];
    if (!o.socket) {
        int rc = cfg_management_default_socket(path, sizeof(path));
        if (rc == -ENOENT)
            ctl_die(CTL_EXIT_USAGE, "no socket given (-s) and XDG_RUNTIME_DIR is not set");
        if (rc < 0)
            ctl_die(CTL_EXIT_USAGE, "no socket given (-s) and the default path is too long");
        o.socket = path;
    }
    signal(SIGPIPE, SIG_IGN);
    ctl_conn_t c;
    ctl_conn_open(&c, o.socket, o.timeout_ms);
    ctl_conn_hello(&c);
    int rc = ssl ? ctl_cmd_sslprofile(&c, &o, nargs, argv + optind) : run(&c, &o, arg);
    fflush(stdout);
    if (ferror(stdout))
        ctl_die(CTL_EXIT_FAIL, "cannot write the output: %s", strerror(errno));
    ctl_conn_close(&c);
    return rc;
}
