/* router/main.c: junctiond's command line - the same options as qdrouterd's.
 *
 *   junctiond [-c CONFIG] [-d] [-P PIDFILE] [-U USER] [-t] [-v] [-h]
 *
 * Loads and validates the configuration, applies the `log` entities, raises the open-files
 * soft limit to the hard one, binds the listeners, daemonizes if asked (only after the
 * listeners are bound, so that a bad configuration or a port in use is reported by the
 * foreground process), starts the threads, drops privileges to -U's user (after every
 * listener, the management socket and the log files are open), tells a service manager
 * that it serves (router/notify.c: READY=1), then runs until a signal.
 * Start-up failures print one line to stderr and exit 1.  Threads: main thread only.
 */
#include "router/router.h"

#include "config/config.h"
#include "router/accept.h"
#include "router/notify.h"
#include "router/tls.h"
#include "core/base/base.h"
#include "core/base/log.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "junction_version.h"

/* JUNCTION_DEFAULT_CONFIG: SYSCONFDIR/junction/junctiond.conf, what `meson install` installs */
#define DEFAULT_CONFIG JUNCTION_DEFAULT_CONFIG

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: junctiond [OPTIONS]\n"
            "Junction: a standalone AMQP 1.0 message router (a drop-in for qdrouterd).\n"
            "\n"
            "  -c, --config PATH     configuration file, qdrouterd's .conf dialect or its\n"
            "                        JSON form (default " DEFAULT_CONFIG ")\n"
            "  -d, --daemon          run in the background\n"
            "  -P, --pidfile PATH    write the process id to PATH\n"
            "  -U, --user USER       once the listeners are bound and the files open, run as\n"
            "                        USER (its uid, gid and groups)\n"
            "  -t, --check-config    load and validate the configuration, then exit (0 if it\n"
            "                        is valid); binds nothing, opens no log file\n"
            "  -I, --include PATH    accepted for qdrouterd compatibility; ignored\n"
            "  -T, --test-hooks      accepted for qdrouterd compatibility; ignored\n"
            "  -v, --version         print the version and exit\n"
            "  -h, --help            print this help and exit\n"
            "\n"
            "Under systemd (Type=notify) it sends READY=1 to $NOTIFY_SOCKET once every\n"
            "listener accepts, and STOPPING=1 when it starts to shut down.\n"
            "SIGTERM, SIGINT, SIGHUP or SIGQUIT stop accepting and granting credit, let\n"
            "deliveries in flight settle (router shutdownGraceSeconds), release the rest,\n"
            "close every connection and exit 0.  SIGUSR1 reopens the log files (logrotate).\n");
}

/* Apply the `log` entities (validated by the config loader). */
static int apply_logs(const cfg_t *cfg, char *err, size_t errlen)
{
    for (size_t i = 0; i < cfg->n_logs; i++) {
        const cfg_log_t *l = &cfg->logs[i];
        base_log_module_t mod = (base_log_module_t)l->module_id;
        if (l->enable_mask != 0xff)
            base_log_set_mask(mod, l->enable_mask);
        if (l->output_file) {
            int rc = base_log_set_output(mod, l->output_file);
            if (rc != 0) {
                snprintf(err, errlen, "%s: log module %s: cannot open outputFile '%s': %s",
                         cfg->path, l->module, l->output_file, strerror(-rc));
                return -1;
            }
        }
        base_log_set_format(mod, l->include_timestamp_set ? l->include_timestamp : -1,
                            l->include_source_set ? l->include_source : -1);
    }
    base_log_finish_config();
    return 0;
}

static int write_pidfile(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    fprintf(f, "%ld\n", (long)getpid());
    return fclose(f) == 0 ? 0 : -errno;
}

/* -U's user, looked up before anything starts so that a bad name fails at once. */
typedef struct {
    const char *name; /* as given (argv) */
    uid_t       uid;  /* its user id */
    gid_t       gid;  /* its primary group */
} run_as_t;

/* Look up `name` into *ra.  Returns 0, or -1 with a one-line message in err[errlen]. */
static int run_as_lookup(const char *name, run_as_t *ra, char *err, size_t errlen)
{
    errno = 0;
    struct passwd *pw = getpwnam(name);
    if (!pw) {
        if (errno == 0 || errno == ENOENT || errno == ESRCH || errno == EBADF || errno == EPERM)
            snprintf(err, errlen, "unknown user '%s' (-U)", name);
        else
            snprintf(err, errlen, "cannot look up user '%s' (-U): %s", name, strerror(errno));
        return -1;
    }
    ra->name = name;
    ra->uid = pw->pw_uid;
    ra->gid = pw->pw_gid;
    return 0;
}

/* Become ra's user: its supplementary groups, its group, then its user id (in that order:
 * each step but the last needs the privilege the last one gives up).  glibc applies each
 * change to every thread of the process.  Returns 0, or -1 with a one-line message. */
static int run_as_drop(const run_as_t *ra, char *err, size_t errlen)
{
    if (geteuid() == ra->uid && getuid() == ra->uid && getegid() == ra->gid && getgid() == ra->gid)
        return 0; /* already that user (e.g. started by it): nothing to give up */
    if (initgroups(ra->name, ra->gid) != 0 || setgid(ra->gid) != 0 || setuid(ra->uid) != 0) {
        snprintf(err, errlen, "cannot run as user '%s' (-U): %s", ra->name, strerror(errno));
        return -1;
    }
    /* the privilege must be gone for good, not just set aside */
    if (ra->uid != 0 && setuid(0) == 0) {
        snprintf(err, errlen, "cannot run as user '%s' (-U): root could be regained", ra->name);
        return -1;
    }
    return 0;
}

/* Fork into the background.  The parent waits on a pipe until the child reports that it is
 * operational ('y'), then exits 0; or, if the child failed, prints what the child wrote to
 * the pipe instead (its one-line error, start_failed()) and exits 1.  Returns the write end
 * of the pipe in the child. */
static int daemonize(void)
{
    int p[2];
    if (pipe(p) != 0) {
        fprintf(stderr, "junctiond: cannot daemonize: %s\n", strerror(errno));
        exit(1);
    }
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "junctiond: cannot daemonize: %s\n", strerror(errno));
        exit(1);
    }
    if (pid > 0) {
        close(p[1]);
        char   msg[1024];
        size_t got = 0;
        for (;;) {
            ssize_t n = read(p[0], msg + got, sizeof(msg) - 1 - got);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            got += (size_t)n;
            if (msg[0] == 'y' || got == sizeof(msg) - 1)
                break;
        }
        if (got > 0 && msg[0] == 'y')
            _exit(0);
        if (got > 0 && fwrite(msg, 1, got, stderr) != got) {
            /* nowhere else to say it */
        }
        _exit(1);
    }
    close(p[0]);
    setsid();
    if (chdir("/") != 0) {
        /* not fatal: relative paths were resolved already */
    }
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        if (null > STDERR_FILENO)
            close(null);
    }
    return p[1];
}

/* A start-up failure: one line to stderr, and when daemonized (ready_fd >= 0: stderr is
 * /dev/null by now) the same line through the pipe, for the parent to print. */
static void start_failed(int ready_fd, const char *msg)
{
    fprintf(stderr, "junctiond: %s\n", msg);
    if (ready_fd >= 0) {
        dprintf(ready_fd, "junctiond: %s\n", msg);
        close(ready_fd);
    }
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},  {"daemon", no_argument, NULL, 'd'},
        {"pidfile", required_argument, NULL, 'P'}, {"include", required_argument, NULL, 'I'},
        {"version", no_argument, NULL, 'v'},       {"help", no_argument, NULL, 'h'},
        {"user", required_argument, NULL, 'U'},    {"test-hooks", no_argument, NULL, 'T'},
        {"check-config", no_argument, NULL, 't'},  {NULL, 0, NULL, 0}};
    const char *config = DEFAULT_CONFIG;
    const char *pidfile = NULL;
    const char *user = NULL;
    bool daemon = false;
    bool check = false;
    int ch;

    while ((ch = getopt_long(argc, argv, "c:dP:I:U:tTvh", opts, NULL)) != -1) {
        switch (ch) {
        case 'c':
            config = optarg;
            break;
        case 'd':
            daemon = true;
            break;
        case 'P':
            pidfile = optarg;
            break;
        case 'U':
            user = optarg;
            break;
        case 't':
            check = true;
            break;
        case 'I':
        case 'T':
            break;
        case 'v':
            printf("%s\n", JUNCTION_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "junctiond: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 1;
    }

    signal(SIGPIPE, SIG_IGN);
    base_thread_set_role(BASE_THREAD_MAIN, 0);

    char err[1024];
    run_as_t run_as = {0};
    if (user && run_as_lookup(user, &run_as, err, sizeof(err)) != 0) {
        fprintf(stderr, "junctiond: %s\n", err);
        return 1;
    }
    cfg_t *cfg = NULL;
    if (cfg_load_file(config, &cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "junctiond: %s\n", err);
        return 1;
    }
    if (check) {
        /* the TLS contexts too: their files, keys and passwords are checked as at start-up */
        rtr_tls_t *tls = rtr_tls_new(cfg, err, sizeof(err));
        if (!tls) {
            fprintf(stderr, "junctiond: %s\n", err);
            cfg_free(cfg);
            return 1;
        }
        rtr_tls_free(tls);
        printf("junctiond: %s: configuration valid (%zu listeners, %zu addresses, %zu warnings)\n",
               config, cfg->n_listeners, cfg->n_addresses, cfg->n_warnings);
        cfg_free(cfg);
        return 0;
    }
    if (apply_logs(cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "junctiond: %s\n", err);
        cfg_free(cfg);
        return 1;
    }
    base_log(BASE_LOG_MOD_ROUTER, BASE_LOG_INFO, "Junction %s: router id %s, mode %s",
             JUNCTION_VERSION, cfg->router.id, cfg->router.mode);
    /* every connection is a descriptor: take all the hard limit allows (a soft limit of
     * 1024 is a common default), and say what it is */
    rtr_fd_limit_raise();
    rtr_server_t *srv = rtr_server_new(cfg, err, sizeof(err));
    if (!srv) {
        fprintf(stderr, "junctiond: %s\n", err);
        cfg_free(cfg);
        return 1;
    }

    int ready_fd = daemon ? daemonize() : -1;
    if (pidfile) {
        int rc = write_pidfile(pidfile);
        if (rc != 0) {
            base_log(BASE_LOG_MOD_SERVER, BASE_LOG_ERROR, "Cannot write pidfile %s: %s",
                     pidfile, strerror(-rc));
            snprintf(err, sizeof(err), "cannot write pidfile %s: %s", pidfile, strerror(-rc));
            start_failed(ready_fd, err);
            rtr_server_free(srv);
            cfg_free(cfg);
            return 1;
        }
    }
    int rc = rtr_server_start(srv);
    if (rc != 0) {
        snprintf(err, sizeof(err), "cannot start: %s", strerror(rc < 0 ? -rc : rc));
        start_failed(ready_fd, err);
        return 1;
    }
    /* everything that needs the privilege is open: the listeners and the management socket
     * (bound above and in start), the log files, the pidfile.  The management socket (mode
     * 0660) becomes the user's, so that junctionctl run as that user still reaches it. */
    if (user && cfg->management.enabled &&
        lchown(cfg->management.socket, run_as.uid, run_as.gid) != 0)
        base_log(BASE_LOG_MOD_SERVER, BASE_LOG_WARNING,
                 "Cannot give the management socket %s to user %s: %s", cfg->management.socket,
                 run_as.name, strerror(errno));
    if (user && run_as_drop(&run_as, err, sizeof(err)) != 0) {
        base_log(BASE_LOG_MOD_SERVER, BASE_LOG_CRITICAL, "%s", err);
        start_failed(ready_fd, err);
        rtr_server_stop(srv); /* the threads run: stop them in order (run returns at once) */
        rtr_server_run(srv);
        rtr_server_free(srv);
        cfg_free(cfg);
        return 1;
    }
    if (user)
        base_log(BASE_LOG_MOD_SERVER, BASE_LOG_NOTICE, "Running as user %s (uid %ld, gid %ld)",
                 run_as.name, (long)run_as.uid, (long)run_as.gid);
    char ready[128];
    snprintf(ready, sizeof(ready), "READY=1\nMAINPID=%ld\nSTATUS=Operational, %d worker threads",
             (long)getpid(), rtr_server_workers(srv));
    int nrc = rtr_notify(ready);
    if (nrc < 0)
        base_log(BASE_LOG_MOD_SERVER, BASE_LOG_WARNING,
                 "Cannot tell the service manager (NOTIFY_SOCKET) that we serve: %s",
                 strerror(-nrc));
    if (ready_fd >= 0) {
        char ok = 'y';
        if (write(ready_fd, &ok, 1) != 1) {
            /* the parent is gone; keep running */
        }
        close(ready_fd);
    }
    rc = rtr_server_run(srv);
    rtr_server_free(srv);
    if (pidfile)
        unlink(pidfile);
    cfg_free(cfg);
    return rc == 0 ? 0 : 1;
}
