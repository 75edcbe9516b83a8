/* `fedkern bench load`: many concurrent mutual-TLS client connections against
 * a real fedkern-server (started here as a child process on 127.0.0.1). Every
 * connection has its own client certificate, Joins, then sends Heartbeat calls
 * for a bounded time at a paced rate. The connections are split over --procs
 * generator processes (bench/load_gen.c), each with its own libuv loop, so the
 * generator need not be the limit; this process only coordinates and measures.
 * Measures: server RSS before/after the connections (memory per idle mTLS
 * connection), RSS over the heartbeat phase (flat or not), the server's open fds
 * before and after (leak or not), heartbeat latency percentiles (histograms of
 * all generators merged), server and generator CPU per heartbeat, and projects
 * the connection count one 2-core server sustains. Exits 1 when a check fails
 * (fd leak, failed calls, connections that never joined, storm not recovered). */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"
#include "bench/load_gen.h"
#include "bench/load_hist.h"
#include "common/base/log.h"
#include "common/base/params.h"
#include "common/net/certs.h"

/* ---- server process measurements ---- */

static long proc_rss_kb(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    long kb = -1;
    if (!f)
        return -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = strtol(line + 6, NULL, 10);
    fclose(f);
    return kb;
}

static int proc_fds(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* What the server's open descriptors point at (printed when a leak is suspected). */
static void print_fds(pid_t pid)
{
    char path[64], link[600], target[256];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(link, sizeof link, "%s/%s", path, e->d_name);
        ssize_t k = readlink(link, target, sizeof target - 1);
        target[k > 0 ? k : 0] = '\0';
        fprintf(stderr, "  server fd %s -> %s\n", e->d_name, target);
    }
    closedir(d);
}

/* utime + stime of the process in seconds. */
static double proc_cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    unsigned long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* The server's last memory_accounting log line (FEDKERN_MEMACCT=1), bytes per part. */
typedef struct memacct {
    double sessions, openssl, nghttp2, nghttp2_mapped, libuv, conn, call, index, heap_in_use, heap_free;
    int ok;
} memacct;

static memacct read_acct(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/server.log", dir);
    memacct a = {0};
    FILE *f = fopen(path, "r");
    if (!f)
        return a;
    char line[1024], last[1024] = "";
    while (fgets(line, sizeof line, f))
        if (strstr(line, "event=memory_accounting"))
            snprintf(last, sizeof last, "%s", line);
    fclose(f);
    struct { const char *k; double *v; } keys[] = {
        {" sessions=", &a.sessions}, {" openssl=", &a.openssl}, {" nghttp2=", &a.nghttp2},
        {" nghttp2_mapped=", &a.nghttp2_mapped},
        {" libuv=", &a.libuv}, {" conn_structs=", &a.conn}, {" call_structs=", &a.call},
        {" client_index=", &a.index}, {" heap_in_use=", &a.heap_in_use},
        {" heap_free=", &a.heap_free}};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        const char *p = strstr(last, keys[i].k);
        if (p)
            *keys[i].v = strtod(p + strlen(keys[i].k), NULL);
        a.ok += p != NULL;
    }
    a.ok = a.ok == (int)(sizeof keys / sizeof keys[0]);
    return a;
}

/* ---- the server child ---- */

static pid_t start_server(const char *bin, const char *dir, const char *pki, long io_threads,
                          int *port, fk_err *err)
{
    char log[512], db[512], buf[8192], listen[64], threads[32];
    snprintf(threads, sizeof threads, "%ld", io_threads);
    snprintf(listen, sizeof listen, "127.0.0.1:%d", *port); /* 0: any free port */
    snprintf(log, sizeof log, "%s/server.log", dir);
    snprintf(db, sizeof db, "%s/state.db", dir);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        /* memtrim_ms 500: the idle trim after the connections close lands within the run;
         * FEDKERN_MEMACCT=1: the server logs where its heap goes (memory_accounting) */
        setenv("FEDKERN_MEMACCT", "1", 1);
        execl(bin, bin, "--listen", listen, "--tls_dir", pki, "--state", db,
              "--metrics_listen", "127.0.0.1:0", "--memtrim_ms", "500", "--net.io_threads", threads,
              (char *)NULL);
        _exit(127);
    }
    if (pid < 0) {
        fk_err_set(err, FK_EIO, "fork: %s", strerror(errno));
        return -1;
    }
    for (int i = 0; i < 1000; i++) {
        usleep(20000);
        FILE *f = fopen(log, "r");
        size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        buf[n] = '\0';
        char *hit = strstr(buf, "event=server_ready");
        char *p = hit ? strstr(hit, " port=") : NULL;
        if (p) {
            *port = atoi(p + 6);
            return pid;
        }
        if (waitpid(pid, NULL, WNOHANG) == pid) {
            fk_err_set(err, FK_EIO, "fedkern-server %s exited at start; see %s", bin, log);
            return -1;
        }
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    fk_err_set(err, FK_EIO, "fedkern-server %s did not get ready in 20 s; see %s", bin, log);
    return -1;
}

/* fedkern-server next to this executable unless --server_bin says otherwise. */
static void default_server_bin(char *out, size_t cap)
{
    char self[400];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        snprintf(out, cap, "fedkern-server");
        return;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    snprintf(out, cap, "%.400s/fedkern-server", self);
}

static int make_pki(const char *dir, int n, fk_err *err)
{
    /* a --pki_dir kept from an earlier run with at least n clients is used as it is */
    char last[600], name[32];
    struct stat st;
    snprintf(name, sizeof name, "load%d", n - 1);
    if (!fk_certs_path(last, sizeof last, dir, FK_ROLE_CLIENT, name, "pem", err) &&
        !stat(last, &st))
        return FK_OK;
    if (mkdir(dir, 0700) && errno != EEXIST)
        return fk_err_set(err, FK_EIO, "cannot create %s: %s", dir, strerror(errno));
    fk_cert_opts so = {.ips = "127.0.0.1"};
    int rc = fk_certs_init_ca(dir, NULL, NULL, err);
    if (!rc)
        rc = fk_certs_issue(dir, FK_ROLE_SERVER, "server", &so, err);
    for (int i = 0; i < n && !rc; i++) {
        char name[32];
        snprintf(name, sizeof name, "load%d", i);
        rc = fk_certs_issue(dir, FK_ROLE_CLIENT, name, NULL, err);
    }
    return rc;
}

static void raise_nofile(int need)
{
    struct rlimit r;
    if (getrlimit(RLIMIT_NOFILE, &r))
        return;
    rlim_t want = (rlim_t)need;
    if (r.rlim_cur < want) {
        r.rlim_cur = want < r.rlim_max ? want : r.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &r) || r.rlim_cur < want)
            fprintf(stderr,
                    "fedkern bench load: the descriptor limit is %llu, the run needs %d: raise "
                    "it (ulimit -n %d) or expect refused connections\n",
                    (unsigned long long)r.rlim_cur, need, need);
    }
}

/* Busy and total jiffies of the whole machine (every process, not only ours). */
static void machine_jiffies(double *busy, double *total)
{
    *busy = *total = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (!f)
        return;
    unsigned long long v[8] = {0};
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
               &v[4], &v[5], &v[6], &v[7]) == 8) {
        for (int i = 0; i < 8; i++)
            *total += (double)v[i];
        *busy = *total - (double)v[3] - (double)v[4]; /* minus idle and iowait */
    }
    fclose(f);
}

static double loadavg1(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: fedkern bench load [--connections N] [--seconds S] [--interval_ms MS]\n"
            "                          [--rate R] [--procs P] [--batch N] [--storm]\n"
            "                          [--pki_dir DIR] [--server_bin PATH] [--io_threads N]\n"
            "                          [--json]\n"
            "\n"
            "Starts fedkern-server on 127.0.0.1, opens N mutual-TLS connections (one client\n"
            "certificate each) from P generator processes, Joins, then sends Heartbeat calls\n"
            "for S seconds. Reports server RSS per idle connection, RSS drift over the\n"
            "heartbeat phase, server fds before/after (leak check), heartbeat latency\n"
            "p50/p99/max, offered and answered calls/s, server and generator CPU per call,\n"
            "and the projected connections for one 2-core server at the default 10 s\n"
            "heartbeat. Exit 1 if an fd leaked, a call failed or a connection never joined.\n"
            "\n"
            "  --connections N   concurrent connections (1000)\n"
            "  --seconds S       heartbeat phase length (20)\n"
            "  --interval_ms MS  heartbeat interval per connection (1000): offers N/interval\n"
            "                    calls/s in all\n"
            "  --rate R          offered calls/s in all instead (overrides --interval_ms); a\n"
            "                    connection still waiting for an answer passes its turn on\n"
            "  --procs P         generator processes, each with its own loop and 1/P of the\n"
            "                    connections (2: a client costs about as much CPU per call\n"
            "                    as the server, so one process cannot load one server loop)\n"
            "  --batch N         handshakes in flight at once, all generators together (64)\n"
            "  --server_bin PATH fedkern-server to start (next to this fedkern)\n"
            "  --io_threads N    the server's net.io_threads (1: one loop for everything)\n"
            "  --keep            keep the work directory (server.log, state.db) and say where\n"
            "  --pki_dir DIR     certificates here, kept: made once, reused by later runs with\n"
            "                    at most as many connections (default: the work directory)\n"
            "  --storm           after the heartbeats, SIGKILL the server, restart it and time\n"
            "                    the clients' return (full-jitter backoff 200 ms .. 15 s, at most\n"
            "                    --batch reconnects in flight); exit 1 unless all\n"
            "                    rejoined within --storm_limit S (90), each counted once\n"
            "  --json            JSON lines\n");
}

typedef struct load_opts {
    long n, batch, procs, io_threads;
    double seconds, interval_ms, rate, storm_limit;
    int json, keep, storm;
    char server_bin[512];
    char pki[512]; /* certificates: --pki_dir, else the work directory */
} load_opts;

static int parse_opts(int argc, char **argv, load_opts *o, fk_err *err)
{
    fk_params p;
    fk_params_init(&p);
    int n = argc;
    int rc = fk_params_parse_args(&p, &n, argv, err);
    if (!rc && n > 0)
        rc = fk_err_set(err, FK_EINVAL, "unexpected argument '%s'; see --help", argv[0]);
    if (!rc)
        rc = fk_params_int(&p, "connections", 1000, 1, 100000, &o->n, err);
    if (!rc)
        rc = fk_params_int(&p, "batch", 64, 1, 10000, &o->batch, err);
    if (!rc)
        rc = fk_params_int(&p, "procs", 2, 1, 64, &o->procs, err);
    if (!rc)
        rc = fk_params_int(&p, "io_threads", 1, 1, 64, &o->io_threads, err);
    if (!rc)
        rc = fk_params_double(&p, "seconds", 20, 0.5, 3600, &o->seconds, err);
    if (!rc)
        rc = fk_params_double(&p, "interval_ms", 1000, 10, 600000, &o->interval_ms, err);
    if (!rc)
        rc = fk_params_double(&p, "rate", 0, 0, 1e7, &o->rate, err);
    if (!rc)
        rc = fk_params_bool(&p, "json", 0, &o->json, err);
    if (!rc)
        rc = fk_params_bool(&p, "keep", 0, &o->keep, err);
    if (!rc)
        rc = fk_params_bool(&p, "storm", 0, &o->storm, err);
    if (!rc)
        rc = fk_params_double(&p, "storm_limit", 90, 1, 3600, &o->storm_limit, err);
    default_server_bin(o->server_bin, sizeof o->server_bin);
    if (!rc && fk_params_get(&p, "server_bin"))
        snprintf(o->server_bin, sizeof o->server_bin, "%s", fk_params_get(&p, "server_bin"));
    o->pki[0] = '\0';
    if (!rc && fk_params_get(&p, "pki_dir"))
        snprintf(o->pki, sizeof o->pki, "%s", fk_params_get(&p, "pki_dir"));
    const char *extra = rc ? NULL : fk_params_unused(&p);
    if (extra)
        rc = fk_err_set(err, FK_EINVAL, "unknown option --%s; see --help", extra);
    fk_params_close(&p);
    if (!rc && o->procs > o->n)
        o->procs = o->n; /* no generator without a connection */
    if (!rc && o->rate <= 0)
        o->rate = (double)o->n / (o->interval_ms / 1e3);
    return rc;
}

/* ---- the generator processes ---- */

typedef struct workers {
    int p;
    pid_t pid[64];
    int fd[64];
    fk_loadgen_cfg cfg[64];
} workers;

/* Fork P generators, each on its own socket; a child runs its slice and exits. */
FK_CHECKRETURN static int spawn_workers(workers *w, const load_opts *o, const char *dir, int port, fk_err *err)
{
    w->p = 0;
    fflush(stdout); /* the children must not write our buffered output again */
    fflush(stderr);
    for (int k = 0; k < (int)o->procs; k++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
            return fk_err_set(err, FK_EIO, "socketpair: %s", strerror(errno));
        /* the handshakes in flight are --batch in all: more would only time out on a busy
         * server (the clients give up on a handshake after 10 s) */
        int batch = (int)(o->batch * (k + 1) / o->procs - o->batch * k / o->procs);
        w->cfg[k] = (fk_loadgen_cfg){.dir = dir, .port = port, .batch = batch > 0 ? batch : 1,
                                     .id = k,
                                     .lo = (int)(o->n * k / o->procs),
                                     .hi = (int)(o->n * (k + 1) / o->procs)};
        pid_t pid = fork();
        if (pid < 0) {
            close(sv[0]);
            close(sv[1]);
            return fk_err_set(err, FK_EIO, "fork: %s", strerror(errno));
        }
        if (pid == 0) {
            close(sv[0]);
            for (int j = 0; j < w->p; j++) /* the siblings' sockets: EOF must reach them */
                close(w->fd[j]);
            fk_err e = {0};
            int rc = fk_loadgen_run(&w->cfg[k], sv[1], &e);
            if (rc)
                fprintf(stderr, "fedkern bench load: %s\n", e.msg);
            close(sv[1]);
            exit(rc ? 1 : 0);
        }
        close(sv[1]);
        w->pid[k] = pid;
        w->fd[k] = sv[0];
        w->p++;
    }
    return FK_OK;
}

static int send_all(workers *w, const fk_loadgen_cmd *cmd)
{
    for (int k = 0; k < w->p; k++)
        if (fk__loadgen_write(w->fd[k], cmd, sizeof *cmd))
            return FK_EIO;
    return FK_OK;
}

/* Each generator's answer; with times (STORM) the rejoin times are appended to it. */
static int recv_all(workers *w, fk_loadgen_report *r, int kind, double *times, int *n_times)
{
    for (int k = 0; k < w->p; k++) {
        if (fk__loadgen_read(w->fd[k], &r[k], sizeof r[k]) || r[k].kind != kind)
            return FK_EIO;
        if (r[k].kind == FK_LG_STORM && r[k].n_times > 0) {
            if (r[k].n_times > r[k].n ||
                fk__loadgen_read(w->fd[k], times + *n_times,
                                 (size_t)r[k].n_times * sizeof *times))
                return FK_EIO;
            *n_times += r[k].n_times;
        }
    }
    return FK_OK;
}

/* Reap the generators: a clean exit after CLOSE, else (error paths) killed. */
static int reap_workers(workers *w, int kill_them)
{
    int bad = 0;
    for (int k = 0; k < w->p; k++) {
        close(w->fd[k]);
        if (kill_them)
            kill(w->pid[k], SIGKILL);
        int st = 0;
        if (waitpid(w->pid[k], &st, 0) != w->pid[k] || !WIFEXITED(st) || WEXITSTATUS(st))
            bad++;
    }
    w->p = 0;
    return bad;
}

/* The generators' answers to one phase added up (latency histograms merged). */
static void merge(const fk_loadgen_report *r, int p, fk_loadgen_report *sum, double *tmax)
{
    memset(sum, 0, sizeof *sum);
    *tmax = 0;
    for (int k = 0; k < p; k++) {
        sum->n += r[k].n;
        sum->joined += r[k].joined;
        sum->failed_conns += r[k].failed_conns;
        sum->closed += r[k].closed;
        sum->cpu_s += r[k].cpu_s;
        sum->calls_ok += r[k].calls_ok;
        sum->calls_failed += r[k].calls_failed;
        sum->calls_due += r[k].calls_due;
        sum->calls_sent += r[k].calls_sent;
        sum->calls_skipped += r[k].calls_skipped;
        sum->keep_failed += r[k].keep_failed;
        sum->rejoined += r[k].rejoined;
        sum->storm_joins += r[k].storm_joins;
        sum->storm_failures += r[k].storm_failures;
        sum->storm_refused += r[k].storm_refused;
        sum->attempts_max = r[k].attempts_max > sum->attempts_max ? r[k].attempts_max
                                                                  : sum->attempts_max;
        fk_lhist_merge(&sum->hist, &r[k].hist);
        *tmax = r[k].t_phase > *tmax ? r[k].t_phase : *tmax;
    }
}

/* ---- the run ---- */

typedef struct sample {
    long rss0, rss1, rss_min, rss_max, rss_end;
    long rss_mid, rss_hb_end; /* halfway through and at the end of the heartbeat phase */
    long rss_idle;            /* 2 s after the closes: the server's idle trim has run */
    long rss_after_load;      /* still connected, 2.5 s after the heartbeats stopped */
    long rss_storm;           /* the restarted server with every client back */
    double storm_restart_s;   /* kill to the new server's server_ready */
    int storm_sessions;       /* sessions the restarted server counts */
    double cpu_connect;       /* server CPU seconds over the connect phase (handshakes, Joins) */
    double cpu_storm;         /* the restarted server's CPU seconds until all rejoined */
    double t_connect;
    memacct a0, a1;           /* memory accounting idle and connected */
    int fds0, fds1, fds_end;
    double cpu0, cpu1, t_hb;
    double mach_busy, mach_total; /* the whole machine's jiffies over the heartbeat phase */
    double load0, load1;          /* 1-minute load average at the start, after heartbeats */
    fk_loadgen_report con, hb, storm, cls; /* the generators' answers, merged */
    double t99, t100;
} sample;

static void report(const load_opts *o, const sample *s)
{
    int joined = s->con.joined;
    double per_conn_kb = (double)(s->rss1 - s->rss0) / (double)(joined ? joined : 1);
    const fk_lhist *h = &s->hb.hist;
    double calls = (double)s->hb.calls_ok;
    double cpu = s->cpu1 - s->cpu0;
    double cpu_per_call = calls > 0 ? cpu / calls : 0;
    /* one 2-core server, 10 s heartbeat: CPU bound is 2 / (cpu per call) calls/s */
    double proj_cpu = cpu_per_call > 0 ? 2.0 / cpu_per_call * 10.0 : 0;
    double drift = (double)(s->rss_max - s->rss_min);
    int j = o->json;
    const char *b = "load";
    fk_bench_emit(j, b, "connect", "connections", (double)joined, NULL);
    fk_bench_emit(j, b, "connect", "seconds", s->t_connect, NULL);
    fk_bench_emit(j, b, "connect", "failed_connections", (double)s->con.failed_conns, NULL);
    /* the machine is shared: server CPU per handshake + Join is what carries over */
    fk_bench_emit(j, b, "connect", "server_cpu_ms_per_join",
                  joined ? 1e3 * s->cpu_connect / joined : 0, NULL);
    fk_bench_emit(j, b, "connect", "generator_cpu_ms_per_join",
                  joined ? 1e3 * s->con.cpu_s / joined : 0, NULL);
    fk_bench_emit(j, b, "memory", "server_rss_idle_kb", (double)s->rss0, NULL);
    fk_bench_emit(j, b, "memory", "server_rss_connected_kb", (double)s->rss1, NULL);
    fk_bench_emit(j, b, "memory", "kb_per_idle_connection", per_conn_kb, "\"goal\":40");
    if (s->a0.ok && s->a1.ok && joined > 0) {
        /* where each kilobyte of a joined idle client goes (heap accounting in the server) */
        double k = 1024.0 * (double)joined;
        struct { const char *name; double v; } parts[] = {
            {"kb_per_client_openssl", s->a1.openssl - s->a0.openssl},
            {"kb_per_client_nghttp2", s->a1.nghttp2 - s->a0.nghttp2},
            {"kb_per_client_libuv", s->a1.libuv - s->a0.libuv},
            {"kb_per_client_conn_structs", s->a1.conn - s->a0.conn},
            {"kb_per_client_call_structs", s->a1.call - s->a0.call},
            {"kb_per_client_client_index", s->a1.index - s->a0.index},
            {"kb_per_client_heap_in_use", s->a1.heap_in_use - s->a0.heap_in_use},
            {"kb_per_client_nghttp2_mapped_not_all_resident",
             s->a1.nghttp2_mapped - s->a0.nghttp2_mapped},
            {"kb_per_client_heap_free", s->a1.heap_free - s->a0.heap_free}};
        double named = 0;
        for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
            fk_bench_emit(j, b, "memory_parts", parts[i].name, parts[i].v / k, NULL);
            if (i < 6)
                named += parts[i].v;
        }
        /* RSS not in a named heap part: the written pages of nghttp2's mapped blocks, malloc
         * headers and rounding, free heap still resident */
        fk_bench_emit(j, b, "memory_parts", "kb_per_client_other", per_conn_kb - named / k, NULL);
    }
    fk_bench_emit(j, b, "memory", "rss_drift_during_heartbeats_kb", drift, NULL);
    /* flat memory: the second half of the heartbeat phase adds (almost) nothing */
    fk_bench_emit(j, b, "memory", "rss_growth_second_half_kb", (double)(s->rss_hb_end - s->rss_mid),
                  NULL);
    fk_bench_emit(j, b, "memory", "server_rss_after_load_kb", (double)s->rss_after_load, NULL);
    /* back to the connected baseline once the heartbeats stop (goal: within 20 %) */
    fk_bench_emit(j, b, "memory", "rss_after_load_over_connected",
                  s->rss1 > 0 ? (double)s->rss_after_load / (double)s->rss1 : 0, "\"goal\":1.2");
    fk_bench_emit(j, b, "memory", "server_rss_after_close_kb", (double)s->rss_end, NULL);
    fk_bench_emit(j, b, "memory", "server_rss_after_idle_trim_kb", (double)s->rss_idle, NULL);
    fk_bench_emit(j, b, "memory", "rss_returned_by_idle_trim_kb",
                  (double)(s->rss_end - s->rss_idle), NULL);
    fk_bench_emit(j, b, "fds", "server_fds_before", s->fds0, NULL);
    fk_bench_emit(j, b, "fds", "server_fds_connected", s->fds1, NULL);
    fk_bench_emit(j, b, "fds", "server_fds_after_close", s->fds_end, NULL);
    /* offered: what the pacing owed (the target rate); sent: what went out (a turn passes
     * when SCAN connections in a row still wait for an answer); calls: answered in time */
    fk_bench_emit(j, b, "heartbeat", "offered_calls_per_s", (double)s->hb.calls_due / s->t_hb,
                  NULL);
    fk_bench_emit(j, b, "heartbeat", "sent_calls_per_s", (double)s->hb.calls_sent / s->t_hb, NULL);
    fk_bench_emit(j, b, "heartbeat", "skipped_all_busy", (double)s->hb.calls_skipped, NULL);
    fk_bench_emit(j, b, "heartbeat", "calls", calls, NULL);
    fk_bench_emit(j, b, "heartbeat", "calls_per_s", calls / s->t_hb, "\"goal\":20000");
    fk_bench_emit(j, b, "heartbeat", "failed_calls", (double)s->hb.calls_failed, NULL);
    /* the heartbeats at the server's interval outside the timed phase keep sessions alive */
    fk_bench_emit(j, b, "heartbeat", "untimed_failed_calls", (double)s->cls.keep_failed, NULL);
    fk_bench_emit(j, b, "heartbeat", "p50_ms", 1e3 * fk_lhist_pct(h, 0.50), NULL);
    fk_bench_emit(j, b, "heartbeat", "p99_ms", 1e3 * fk_lhist_pct(h, 0.99), "\"goal\":50");
    fk_bench_emit(j, b, "heartbeat", "max_ms", 1e3 * fk_lhist_pct(h, 1.0), NULL);
    fk_bench_emit(j, b, "server_cpu", "cpu_s_per_1000_calls", 1e3 * cpu_per_call, NULL);
    fk_bench_emit(j, b, "server_cpu", "cpu_fraction_of_one_core", cpu / s->t_hb, NULL);
    /* the generators' own cost: with it near a core per process, they set the pace */
    double gcpu = s->hb.cpu_s;
    fk_bench_emit(j, b, "generator", "procs", (double)o->procs, NULL);
    fk_bench_emit(j, b, "generator", "cpu_us_per_call",
                  s->hb.calls_sent ? 1e6 * gcpu / (double)s->hb.calls_sent : 0, NULL);
    fk_bench_emit(j, b, "generator", "cpu_fraction_of_one_core", gcpu / s->t_hb, NULL);
    fk_bench_emit(j, b, "generator", "server_share_of_bench_cpu",
                  cpu + gcpu > 0 ? cpu / (cpu + gcpu) : 0, NULL);
    /* the machine is shared: how busy all of it was (cores) and what others used */
    double cores = s->mach_total > 0 ? 2.0 * s->mach_busy / s->mach_total : 0;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu > 0 && s->mach_total > 0)
        cores = (double)ncpu * s->mach_busy / s->mach_total;
    fk_bench_emit(j, b, "machine", "busy_cores_during_heartbeats", cores, NULL);
    fk_bench_emit(j, b, "machine", "busy_cores_not_bench",
                  cores - (cpu + gcpu) / s->t_hb > 0 ? cores - (cpu + gcpu) / s->t_hb : 0, NULL);
    fk_bench_emit(j, b, "machine", "load_avg_1min_start", s->load0, NULL);
    fk_bench_emit(j, b, "machine", "load_avg_1min_after_heartbeats", s->load1, NULL);
    fk_bench_emit(j, b, "projection_2core", "connections_cpu_bound_10s_heartbeat", proj_cpu,
                  "\"goal\":10000");
    /* The machine is shared, so wall-clock rates say how busy it was. What carries over is CPU
     * per call: on 2 cores of its own, server (one loop: at most one core) and generator
     * together would answer this many calls/s before either runs out of CPU. */
    double gen_per_call = calls > 0 ? gcpu / calls : 0;
    if (cpu_per_call > 0) {
        double both = 2.0 / (cpu_per_call + gen_per_call), one = 1.0 / cpu_per_call;
        fk_bench_emit(j, b, "projection_2core", "calls_per_s_cpu_bound_with_generator",
                      both < one ? both : one, "\"goal\":20000");
        fk_bench_emit(j, b, "projection_2core", "calls_per_s_cpu_bound_server_loop", one, NULL);
    }
    if (o->storm) {
        fk_bench_emit(j, b, "storm", "server_restart_s", s->storm_restart_s, NULL);
        fk_bench_emit(j, b, "storm", "rejoined", (double)s->storm.rejoined, NULL);
        fk_bench_emit(j, b, "storm", "server_cpu_s_until_all_rejoined", s->cpu_storm, NULL);
        fk_bench_emit(j, b, "storm", "generator_cpu_s", s->storm.cpu_s, NULL);
        fk_bench_emit(j, b, "storm", "s_to_99pct_rejoined", s->t99, NULL);
        fk_bench_emit(j, b, "storm", "s_to_100pct_rejoined", s->t100, "\"goal\":60");
        fk_bench_emit(j, b, "storm", "join_calls_ok", (double)s->storm.storm_joins, NULL);
        fk_bench_emit(j, b, "storm", "join_calls_failed", (double)s->storm.storm_failures, NULL);
        /* TCP refused or TLS not finished: the server still down or its backlog full */
        fk_bench_emit(j, b, "storm", "reconnects_not_up", (double)s->storm.storm_refused, NULL);
        fk_bench_emit(j, b, "storm", "attempts_max_one_client", (double)s->storm.attempts_max,
                      NULL);
        fk_bench_emit(j, b, "storm", "server_sessions_after", (double)s->storm_sessions, NULL);
        fk_bench_emit(j, b, "storm", "server_rss_after_storm_kb", (double)s->rss_storm, NULL);
        /* all rejoined: the CPU it took, spread over 2 cores of their own (the server's part
         * on one loop), is the time the storm would take with the machine to itself */
        if (s->t100 > 0) {
            double both = 0.5 * (s->cpu_storm + s->storm.cpu_s);
            fk_bench_emit(j, b, "projection_2core", "storm_s_cpu_bound_with_generator",
                          both > s->cpu_storm ? both : s->cpu_storm, "\"goal\":60");
        }
    }
    double mem_10k_mb = per_conn_kb * 10000.0 / 1024.0;
    fk_bench_emit(j, b, "projection_2core", "server_rss_mb_at_10000_connections",
                  (double)s->rss0 / 1024.0 + mem_10k_mb, NULL);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The timed phase: every generator paces its share of the rate for `seconds` while the
 * server's RSS is sampled every 0.5 s and its CPU time (and the machine's) is taken at
 * both ends. */
static int heartbeat_phase(workers *w, const load_opts *o, pid_t srv, sample *s)
{
    fk_loadgen_report r[64];
    double b0, t0, b1, t1;
    s->load0 = loadavg1();
    for (int k = 0; k < w->p; k++) { /* each generator offers its share of the rate */
        fk_loadgen_cmd cmd = {.kind = FK_LG_HEARTBEAT, .seconds = o->seconds,
                              .rate = o->rate * (w->cfg[k].hi - w->cfg[k].lo) / (double)o->n};
        if (fk__loadgen_write(w->fd[k], &cmd, sizeof cmd))
            return FK_EIO;
    }
    s->cpu0 = proc_cpu_s(srv);
    machine_jiffies(&b0, &t0);
    double th = fk_bench_now(), next_sample = th + 0.5;
    while (fk_bench_now() - th < o->seconds) {
        usleep(20000);
        if (fk_bench_now() >= next_sample) {
            long rss = proc_rss_kb(srv);
            if (!s->rss_mid && fk_bench_now() - th >= o->seconds / 2)
                s->rss_mid = rss;
            s->rss_hb_end = rss;
            s->rss_min = rss < s->rss_min ? rss : s->rss_min;
            s->rss_max = rss > s->rss_max ? rss : s->rss_max;
            next_sample += 0.5;
        }
    }
    s->cpu1 = proc_cpu_s(srv);
    machine_jiffies(&b1, &t1);
    s->mach_busy = b1 - b0;
    s->mach_total = t1 - t0;
    s->t_hb = fk_bench_now() - th;
    /* the generators answer once their calls in flight are back (not timed) */
    if (recv_all(w, r, FK_LG_HEARTBEAT, NULL, NULL))
        return FK_EIO;
    double tmax;
    merge(r, w->p, &s->hb, &tmax);
    s->load1 = loadavg1();
    /* still connected and idle: the server's trim (two 0.5 s checks) gives the spike back */
    usleep(2500000);
    s->rss_after_load = proc_rss_kb(srv);
    return FK_OK;
}

/* Reconnect storm: SIGKILL the server under every joined client, start it again on the same
 * port and state, and time the clients' return (full-jitter backoff, as the client daemon).
 * The server's own session count afterwards shows whether a client was counted twice. */
static int storm_phase(workers *w, const load_opts *o, const char *dir, pid_t *srv, int port,
                       sample *s)
{
    fk_loadgen_report r[64];
    double *times = calloc((size_t)o->n, sizeof *times);
    int n_times = 0, rc = FK_EIO;
    if (!times)
        return FK_ENOMEM;
    /* every generator first arms (a lost connection now reconnects), then the kill */
    fk_loadgen_cmd cmd = {.kind = FK_LG_STORM, .seconds = o->storm_limit};
    if (send_all(w, &cmd) || recv_all(w, r, FK_LG_ARMED, NULL, NULL))
        goto out;
    kill(*srv, SIGKILL);
    waitpid(*srv, NULL, 0);
    double t0 = fk_bench_now();
    fk_err err = {0};
    int p = port;
    if ((*srv = start_server(o->server_bin, dir, o->pki, o->io_threads, &p, &err)) < 0) {
        fprintf(stderr, "fedkern bench load: storm restart: %s\n", err.msg);
        goto out;
    }
    s->storm_restart_s = fk_bench_now() - t0;
    if (recv_all(w, r, FK_LG_STORM, times, &n_times))
        goto out;
    s->cpu_storm = proc_cpu_s(*srv);
    double tmax;
    merge(r, w->p, &s->storm, &tmax);
    /* the first rejoin of each client, all generators together */
    qsort(times, (size_t)n_times, sizeof *times, cmp_double);
    int k99 = (int)((o->n * 99 + 99) / 100);
    s->t99 = n_times >= k99 ? times[k99 - 1] - t0 : 0;
    s->t100 = n_times == o->n && n_times > 0 ? times[n_times - 1] - t0 : 0;
    /* late duplicates would show in the server's count: wait for its next accounting line */
    usleep(1200000);
    s->storm_sessions = (int)read_acct(dir).sessions;
    s->rss_storm = proc_rss_kb(*srv);
    rc = FK_OK;
out:
    free(times);
    return rc;
}

/* Close every connection, then measure what the server gives back: its fds (a leak shows
 * here) and its RSS right after and once it had time to trim. */
static int close_phase(workers *w, pid_t srv, sample *s)
{
    fk_loadgen_report r[64];
    fk_loadgen_cmd cmd = {.kind = FK_LG_CLOSE};
    if (send_all(w, &cmd) || recv_all(w, r, FK_LG_CLOSE, NULL, NULL))
        return FK_EIO;
    double tmax;
    merge(r, w->p, &s->cls, &tmax);
    if (reap_workers(w, 0))
        fprintf(stderr, "fedkern bench load: a generator process did not end cleanly\n");
    /* the server notices the closes on its next loop turns */
    for (int i = 0; i < 50; i++) {
        s->fds_end = proc_fds(srv);
        if (s->fds_end <= s->fds0)
            break;
        usleep(100000);
    }
    if (s->fds_end > s->fds0)
        print_fds(srv);
    s->rss_end = proc_rss_kb(srv);
    /* the server trims once its free heap stayed up for two 0.5 s checks */
    usleep(2000000);
    s->rss_idle = proc_rss_kb(srv);
    return FK_OK;
}

/* Exit status of the run: 1 with a line per broken promise (joins, calls, fd leak). */
static int verdict(const load_opts *o, const sample *s)
{
    int rc = 0;
    if (o->storm && (s->storm.rejoined != o->n || s->storm_sessions != o->n ||
                     s->storm.storm_joins != o->n)) {
        fprintf(stderr,
                "fedkern bench load: storm: %d of %ld rejoined in %.0f s, %d Joins answered, "
                "the server counts %d sessions\n",
                s->storm.rejoined, o->n, o->storm_limit, s->storm.storm_joins, s->storm_sessions);
        rc = 1;
    }
    if (s->con.joined != o->n || s->cls.failed_conns) {
        fprintf(stderr, "fedkern bench load: %d of %ld connections joined, %d failed or lost\n",
                s->con.joined, o->n, s->cls.failed_conns);
        rc = 1;
    }
    if (s->cls.keep_failed) { /* e.g. a session expired while the others connected */
        fprintf(stderr, "fedkern bench load: %ld untimed heartbeats failed\n",
                s->cls.keep_failed);
        rc = 1;
    }
    if (s->hb.calls_failed) {
        fprintf(stderr, "fedkern bench load: %ld heartbeat calls failed\n", s->hb.calls_failed);
        rc = 1;
    }
    if (s->fds_end > s->fds0) {
        fprintf(stderr, "fedkern bench load: server fd leak: %d fds before, %d after closing\n",
                s->fds0, s->fds_end);
        rc = 1;
    }
    if (s->hb.calls_ok == 0) {
        fprintf(stderr, "fedkern bench load: no heartbeat completed\n");
        rc = 1;
    }
    return rc;
}

/* Connect every generator's share, Join, settle; then the server's connected baseline. */
static int connect_phase(workers *w, const load_opts *o, pid_t srv, const char *dir, sample *s)
{
    fk_loadgen_report r[64];
    double tc = fk_bench_now(), cpu_c = proc_cpu_s(srv);
    /* a shared 2-core machine: 6 min for 10,000 */
    fk_loadgen_cmd cmd = {.kind = FK_LG_CONNECT, .seconds = 60 + 0.03 * (double)o->n};
    if (send_all(w, &cmd) || recv_all(w, r, FK_LG_CONNECT, NULL, NULL))
        return FK_EIO;
    s->t_connect = fk_bench_now() - tc;
    s->cpu_connect = proc_cpu_s(srv) - cpu_c;
    double tmax;
    merge(r, w->p, &s->con, &tmax);
    /* settle: let the server finish per-connection work and log a memory_accounting line */
    usleep(1200000);
    s->rss1 = proc_rss_kb(srv);
    s->a1 = read_acct(dir);
    s->fds1 = proc_fds(srv);
    s->rss_min = s->rss_max = s->rss1;
    return FK_OK;
}

int fk_bench_load(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
    load_opts o;
    fk_err err = {0};
    if (parse_opts(argc, argv, &o, &err)) {
        fprintf(stderr, "fedkern bench load: %s\n", err.msg);
        return 2;
    }
    /* a peer's reset must not kill a generator; every connection needs its fd in the server
     * (started from here, it inherits the limit) and in its generator */
    signal(SIGPIPE, SIG_IGN);
    raise_nofile((int)(o.n + 512));
    char dir[] = "/tmp/fk-bench-load-XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "fedkern bench load: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    int rc = 1, port = 0;
    pid_t srv = -1;
    workers w = {0};
    sample s = {0};
    /* one certificate per client and the real fedkern-server binary, as deployed */
    double t0 = fk_bench_now();
    if (!o.pki[0])
        snprintf(o.pki, sizeof o.pki, "%s", dir);
    if (make_pki(o.pki, (int)o.n, &err)) {
        fprintf(stderr, "fedkern bench load: certificates: %s\n", err.msg);
        goto out;
    }
    if (!o.json)
        printf("certificates for %ld clients: %.1f s\n", o.n, fk_bench_now() - t0);
    if ((srv = start_server(o.server_bin, dir, o.pki, o.io_threads, &port, &err)) < 0) {
        fprintf(stderr, "fedkern bench load: %s\n", err.msg);
        goto out;
    }
    /* baseline RSS and fds of the idle server, then connect everyone and settle */
    usleep(1300000); /* one memory_accounting line logged */
    s.rss0 = proc_rss_kb(srv);
    s.a0 = read_acct(dir);
    s.fds0 = proc_fds(srv);
    fk_log_set_level(FK_LOG_ERROR);
    if (spawn_workers(&w, &o, o.pki, port, &err)) {
        fprintf(stderr, "fedkern bench load: generators: %s\n", err.msg);
        goto out;
    }
    int lost = connect_phase(&w, &o, srv, dir, &s) || heartbeat_phase(&w, &o, srv, &s) ||
               (o.storm && storm_phase(&w, &o, dir, &srv, port, &s)) || close_phase(&w, srv, &s);
    if (lost) {
        fprintf(stderr, "fedkern bench load: a generator process failed (see above)\n");
        goto out;
    }
    report(&o, &s);
    rc = verdict(&o, &s);
out:
    /* cleanup on every path: the generators, the server process, the temp dir */
    if (w.p)
        reap_workers(&w, 1);
    if (srv > 0) {
        kill(srv, SIGTERM);
        waitpid(srv, NULL, 0);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (o.keep)
        fprintf(stderr, "fedkern bench load: kept %s\n", dir);
    else if (system(cmd))
        fprintf(stderr, "fedkern bench load: could not remove %s\n", dir);
    return rc;
}
