/* The demo's daemons: one fedkern-server and its fedkern-clients as child
 * processes, each logging to a file in the work directory, and stopped with
 * SIGTERM on every exit path (a signal to the demo included). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/demo.h"

/* The signal handler must reach the children: their pids are the one piece of
 * process-wide state here, written before the handler can need them. */
static volatile sig_atomic_t interrupted;
static volatile pid_t live[FK_FLEET_MAX];

static void on_signal(int sig)
{
    interrupted = sig;
    for (int i = 0; i < FK_FLEET_MAX; i++)
        if (live[i] > 0)
            kill(live[i], SIGTERM);
}

int fk_fleet_interrupted(void)
{
    return interrupted;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int exists_x(const char *path)
{
    return access(path, X_OK) == 0;
}

/* dir/NAME, else dir/../sbin/NAME (installed layout). */
FK_CHECKRETURN static int locate(const char *dir, const char *name, char *out, size_t cap,
                                 fk_err *err)
{
    snprintf(out, cap, "%s/%s", dir, name);
    if (exists_x(out))
        return FK_OK;
    char alt[PATH_MAX + 64];
    snprintf(alt, sizeof alt, "%s/../sbin/%s", dir, name);
    if (exists_x(alt) && snprintf(out, cap, "%s", alt) < (int)cap)
        return FK_OK;
    return fk_err_set(err, FK_ENOTFOUND,
                      "%s not found: looked for %s/%s and %s (build it with 'ninja -C build', "
                      "or install fedkern; use --in_process to run without daemons)",
                      name, dir, name, alt);
}

int fk_fleet_init(fk_fleet *f, const char *dir, fk_err *err)
{
    memset(f, 0, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "%s", dir);
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return fk_err_set(err, FK_EIO, "cannot read /proc/self/exe to find the daemons: %s",
                          strerror(errno));
    self[n] = '\0';
    char *bindir = dirname(self);
    int rc = locate(bindir, "fedkern-server", f->server_bin, sizeof f->server_bin, err);
    if (!rc)
        rc = locate(bindir, "fedkern-client", f->client_bin, sizeof f->client_bin, err);
    if (rc)
        return rc;
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    return FK_OK;
}

/* The last `lines` lines of a log file into out (for error messages). */
static void log_tail(const char *path, int lines, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(out, cap, "(no log at %s)", path);
        return;
    }
    char buf[4096];
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    long from = size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0;
    fseek(f, from, SEEK_SET);
    size_t got = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[got] = '\0';
    while (got > 0 && buf[got - 1] == '\n')
        buf[--got] = '\0';
    char *p = buf + got;
    for (int seen = 0; p > buf; p--)
        if (p[-1] == '\n' && ++seen == lines)
            break;
    if (snprintf(out, cap, "%s", got ? p : "(empty log)") >= (int)cap && cap > 4)
        memcpy(out + cap - 4, "...", 4); /* cut: the start of the tail is enough */
}

FK_CHECKRETURN static int spawn(fk_fleet *f, const char *name, const char *log, char *const argv[],
                                fk_err *err)
{
    if (f->n == FK_FLEET_MAX)
        return fk_err_set(err, FK_ELIMIT, "more than %d daemons", FK_FLEET_MAX);
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return fk_err_set(err, FK_EIO, "%s: cannot write: %s", log, strerror(errno));
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(fd);
        return fk_err_set(err, FK_EIO, "cannot start %s: fork: %s", name, strerror(errno));
    }
    if (pid == 0) {
        /* own process group: Ctrl-C reaches the demo, which stops the daemons in order;
         * a demo killed outright still takes them along (parent-death signal). */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(1);
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGHUP, SIG_DFL);
        signal(SIGPIPE, SIG_DFL);
        unsetenv("NOTIFY_SOCKET"); /* the demo's daemons are not systemd's */
        dup2(fd, 1);
        dup2(fd, 2);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, 0);
        execv(argv[0], argv);
        dprintf(2, "fedkern demo: cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(fd);
    int i = f->n++;
    f->pid[i] = pid;
    live[i] = pid;
    snprintf(f->name[i], sizeof f->name[i], "%s", name);
    snprintf(f->log[i], sizeof f->log[i], "%s", log);
    return FK_OK;
}

/* Reap daemon i if it has exited; FK_ESTATE with its log tail. */
FK_CHECKRETURN static int reap_one(fk_fleet *f, int i, fk_err *err)
{
    int status;
    if (f->pid[i] <= 0 || waitpid(f->pid[i], &status, WNOHANG) != f->pid[i])
        return FK_OK;
    pid_t pid = f->pid[i];
    f->pid[i] = 0;
    live[i] = 0;
    char how[64], tail[1600];
    if (WIFEXITED(status))
        snprintf(how, sizeof how, "exited with status %d", WEXITSTATUS(status));
    else
        snprintf(how, sizeof how, "was killed by signal %d", WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    log_tail(f->log[i], 8, tail, sizeof tail);
    return fk_err_set(err, FK_ESTATE, "%s (pid %d) %s; the end of %s:\n%s", f->name[i], (int)pid,
                      how, f->log[i], tail);
}

int fk_fleet_check(fk_fleet *f, fk_err *err)
{
    if (interrupted)
        return fk_err_set(err, FK_ESTATE, "interrupted by signal %d; stopping the daemons",
                          (int)interrupted);
    for (int i = 0; i < f->n; i++) {
        int rc = reap_one(f, i, err);
        if (rc)
            return rc;
    }
    return FK_OK;
}

/* The whole log file (up to 64 KiB) into buf. */
static size_t read_log(const char *path, char *buf, size_t cap)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return 0;
    size_t n = fread(buf, 1, cap - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    return n;
}

int fk_fleet_start_server(fk_fleet *f, const char *tls_dir, const char *state, fk_err *err)
{
    char log[2100];
    snprintf(log, sizeof log, "%s/server.log", f->dir);
    char *argv[] = {f->server_bin, "--listen", "127.0.0.1:0", "--tls_dir", (char *)tls_dir,
                    "--state", (char *)state, "--metrics_listen", "off", "--heartbeat_ms", "2000",
                    "--drain_ms", "500", "--log_level", "info", NULL};
    int rc = spawn(f, "fedkern-server", log, argv, err);
    if (rc)
        return rc;
    static char buf[1 << 16];
    double until = now_s() + 30.0;
    while (now_s() < until) {
        if ((rc = fk_fleet_check(f, err)))
            return rc;
        if (read_log(log, buf, sizeof buf)) {
            const char *ready = strstr(buf, "event=server_ready ");
            const char *port = ready ? strstr(ready, " port=") : NULL;
            if (port && memchr(ready, '\n', (size_t)(port - ready)) == NULL) {
                f->port = atoi(port + 6);
                if (f->port > 0 && f->port < 65536)
                    return FK_OK;
            }
        }
        usleep(20000);
    }
    char tail[1600];
    log_tail(log, 8, tail, sizeof tail);
    return fk_err_set(err, FK_ESTATE, "fedkern-server did not report ready in 30 s; the end of %s:\n%s",
                      log, tail);
}

int fk_fleet_start_client(fk_fleet *f, const char *name, const char *config, fk_err *err)
{
    char log[2100], what[64];
    snprintf(log, sizeof log, "%s/client-%s.log", f->dir, name);
    snprintf(what, sizeof what, "fedkern-client %s", name);
    char *argv[] = {f->client_bin, "--config", (char *)config, NULL};
    return spawn(f, what, log, argv, err);
}

int fk_fleet_wait_joined(fk_fleet *f, double seconds, fk_err *err)
{
    static char buf[1 << 16];
    double until = now_s() + seconds;
    for (int i = 1; i < f->n; i++) {
        for (;;) {
            int rc = fk_fleet_check(f, err);
            if (rc)
                return rc;
            if (read_log(f->log[i], buf, sizeof buf) && strstr(buf, "event=joined "))
                break;
            if (now_s() > until) {
                char tail[1600];
                log_tail(f->log[i], 8, tail, sizeof tail);
                return fk_err_set(err, FK_ESTATE,
                                  "%s did not join the server in %.0f s; the end of %s:\n%s",
                                  f->name[i], seconds, f->log[i], tail);
            }
            usleep(20000);
        }
    }
    return FK_OK;
}

void fk_fleet_stop(fk_fleet *f, double seconds)
{
    /* clients first, so they leave while the server still answers */
    for (int i = f->n - 1; i >= 0; i--)
        if (f->pid[i] > 0)
            kill(f->pid[i], SIGTERM);
    double until = now_s() + seconds;
    for (;;) {
        int left = 0;
        for (int i = 0; i < f->n; i++) {
            if (f->pid[i] > 0 && waitpid(f->pid[i], NULL, WNOHANG) == f->pid[i]) {
                f->pid[i] = 0;
                live[i] = 0;
            }
            left += f->pid[i] > 0;
        }
        if (!left)
            return;
        if (now_s() > until)
            break;
        usleep(20000);
    }
    for (int i = 0; i < f->n; i++)
        if (f->pid[i] > 0) {
            fprintf(stderr, "fedkern demo: %s (pid %d) ignored SIGTERM for %.0f s; killing it\n",
                    f->name[i], (int)f->pid[i], seconds);
            kill(f->pid[i], SIGKILL);
            waitpid(f->pid[i], NULL, 0);
            f->pid[i] = 0;
            live[i] = 0;
        }
}
