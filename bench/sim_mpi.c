/* fedkern bench sim-mpi (issue 38, docs/mpi.md): `fedkern sim` over P MPI ranks against the
 * in-process run of the same command, measured in the same bench run. Two jobs: FedGrEM on
 * the paper's simulation design with many clients (`sim fedgrem --K 10000`) and dica with 100
 * clients on its built-in data (`sim dica --clients 100`), each in process and then under
 * `mpirun --oversubscribe -n P` for P = 1, 2, 4. Every run is a child process of this one
 * (this fedkern's own executable), bounded by --timeout. Rows: wall seconds (mpirun's start
 * included) and CPU seconds (every rank's), the speed-up against the in-process run,
 * whether the output equals the in-process output (its "seconds" fields aside), and per rank
 * the messages and bytes sent and received per round and the peak RSS, from the ranks'
 * FK_MPI_STATS lines (cli/sim_mpi.c). Rank 0 is the server side and the clients are dealt over ranks 1..P-1,
 * so P = 2 puts every client on one rank. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "common/base/params.h"

#ifndef FK_BENCH_MPI
#define FK_BENCH_MPI 0
#endif
#ifndef FK_BENCH_MPIRUN
#define FK_BENCH_MPIRUN "mpirun"
#endif

static const char bench_name[] = "sim-mpi";

enum { MAX_P = 16, MAX_RANKS = 64, MAX_ARGS = 40 };

typedef struct opts {
    int json;
    long clients, n, rounds, dica_clients, timeout;
    int ps[MAX_P], n_ps;
    int fedgrem, dica;
    char mpirun[512];
} opts;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: fedkern bench sim-mpi [--json] [--clients K] [--rounds T] [--n N]\n"
            "                             [--dica_clients C] [--ps 1,2,4] [--jobs fedgrem,dica]\n"
            "                             [--timeout S] [--mpirun PATH]\n"
            "\n"
            "`fedkern sim` over P MPI ranks (mpirun --oversubscribe -n P, as root also\n"
            "--allow-run-as-root) against the in-process run of the same command in the same\n"
            "bench run (docs/mpi.md). Jobs: fedgrem = `sim fedgrem --K K --n N --rounds T`\n"
            "(default K 10000, N 50, T 3) and dica = `sim dica --clients C` (default 100).\n"
            "Per run: wall seconds, speed-up = in-process / P ranks, whether the output equals\n"
            "the in-process output (times aside), and per rank the messages and bytes sent and\n"
            "received per round and the peak RSS. Each run is stopped after S seconds\n"
            "(default 3600). Exit status 1 when a run fails, times out or differs.\n"
            "Needs a fedkern built with MPI (meson -Dmpi=enabled; libopenmpi-dev openmpi-bin).\n");
}

FK_CHECKRETURN static int parse_ps(opts *o, const char *s, fk_err *err)
{
    o->n_ps = 0;
    const char *q = s;
    while (*q) {
        char *end;
        errno = 0;
        long v = strtol(q, &end, 10);
        if (end == q || errno || v < 1 || v > MAX_RANKS || o->n_ps == MAX_P)
            return fk_err_set(err, FK_EINVAL,
                              "--ps '%s': give up to %d rank counts in 1..%d, comma-separated "
                              "(e.g. 1,2,4)",
                              s, MAX_P, MAX_RANKS);
        o->ps[o->n_ps++] = (int)v;
        q = end;
        if (*q == ',')
            q++;
        else if (*q)
            return fk_err_set(err, FK_EINVAL, "--ps '%s': unexpected '%c' (e.g. --ps 1,2,4)", s,
                              *q);
    }
    return o->n_ps ? FK_OK : fk_err_set(err, FK_EINVAL, "--ps is empty (e.g. --ps 1,2,4)");
}

FK_CHECKRETURN static int parse_jobs(opts *o, const char *s, fk_err *err)
{
    o->fedgrem = o->dica = 0;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "fedgrem"))
            o->fedgrem = 1;
        else if (!strcmp(t, "dica"))
            o->dica = 1;
        else
            return fk_err_set(err, FK_EINVAL, "--jobs: unknown job '%s' (fedgrem, dica)", t);
    }
    return o->fedgrem || o->dica ? FK_OK : fk_err_set(err, FK_EINVAL, "--jobs names no job");
}

static int parse(int argc, char **argv, opts *o)
{
    fk_params p;
    fk_err err = {0};
    fk_params_init(&p);
    int rc = fk_params_parse_args(&p, &argc, argv, &err);
    if (!rc && argc > 0)
        rc = fk_err_set(&err, FK_EINVAL, "unexpected argument '%s'", argv[0]);
    if (!rc)
        rc = fk_params_bool(&p, "json", 0, &o->json, &err);
    if (!rc)
        rc = fk_params_int(&p, "clients", 10000, 2, 1000000, &o->clients, &err);
    if (!rc)
        rc = fk_params_int(&p, "n", 50, 1, 1000000, &o->n, &err);
    if (!rc)
        rc = fk_params_int(&p, "rounds", 3, 1, 100000, &o->rounds, &err);
    if (!rc)
        rc = fk_params_int(&p, "dica_clients", 100, 2, 100000, &o->dica_clients, &err);
    if (!rc)
        rc = fk_params_int(&p, "timeout", 3600, 1, 1000000, &o->timeout, &err);
    if (!rc)
        rc = parse_ps(o, fk_params_str(&p, "ps", "1,2,4"), &err);
    if (!rc)
        rc = parse_jobs(o, fk_params_str(&p, "jobs", "fedgrem,dica"), &err);
    if (!rc)
        snprintf(o->mpirun, sizeof o->mpirun, "%s", fk_params_str(&p, "mpirun", FK_BENCH_MPIRUN));
    const char *unused = rc ? NULL : fk_params_unused(&p);
    if (unused)
        rc = fk_err_set(&err, FK_EINVAL, "unknown option --%s; see --help", unused);
    fk_params_close(&p);
    if (rc)
        fprintf(stderr, "fedkern bench sim-mpi: %s\n", err.msg);
    return rc;
}

/* ---- signals (issue 38) ---- */

static void sleep_s(double s)
{
    struct timespec ts = {.tv_sec = (time_t)s, .tv_nsec = (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* The running child's process group (0: none) and the first SIGTERM/SIGINT/SIGHUP the bench
 * got (0: none). Each child runs in its own group, which the terminal's ^C and a kill of the
 * bench alone do not reach: the handler passes the signal on to the group (kill is
 * async-signal-safe), and the bench reaps the child, stops and exits non-zero. */
static volatile sig_atomic_t child_pgid, stop_sig;

static void on_stop(int sig)
{
    if (!stop_sig)
        stop_sig = sig;
    pid_t g = (pid_t)child_pgid;
    if (g > 0)
        kill(-g, sig);
}

/* Open MPI puts each rank in a process group of its own, so the group signal reaches mpirun,
 * which signals its ranks and may exit before they are gone. The bench is their subreaper
 * (install_stop_handlers): the ranks mpirun leaves become its children, and after a stopped or
 * timed-out run it reaps them, SIGKILLing those still there after 5 s. */
static int other_children(pid_t *pids, int cap)
{
    int n = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    pid_t self = getpid();
    while (d && n < cap && (e = readdir(d))) {
        char path[300], buf[512];
        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "r");
        size_t len = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f)
            fclose(f);
        buf[len] = '\0';
        const char *r = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
        char state;
        long ppid;
        if (r && sscanf(r + 1, " %c %ld", &state, &ppid) == 2 && ppid == (long)self)
            pids[n++] = (pid_t)atol(e->d_name);
    }
    if (d)
        closedir(d);
    return n;
}

static void end_orphans(void)
{
    double t0 = fk_bench_now();
    for (;;) {
        while (waitpid(-1, NULL, WNOHANG) > 0) {
        }
        pid_t pids[MAX_RANKS * 4];
        int n = other_children(pids, MAX_RANKS * 4);
        double t = fk_bench_now() - t0;
        if (n == 0 || t > 10.0)
            return;
        for (int i = 0; t > 5.0 && i < n; i++)
            kill(pids[i], SIGKILL);
        sleep_s(0.1);
    }
}

static void install_stop_handlers(void)
{
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        (void)sigaction(sigs[i], &sa, NULL);
}

/* ---- one child run ---- */

typedef struct run {
    double wall;
    double cpu;     /* user + system seconds of the child and all it waited for (the ranks) */
    long maxrss_kb; /* the child's own peak (the in-process run: fedkern; else mpirun) */
    int status;     /* exit status, 128 + signal, -1 timed out */
} run;

/* argv (argv[0] a path or a name on PATH) with stdout and stderr to files and, when stats is
 * not NULL, FK_MPI_STATS=stats (each rank appends its line there). In its own process group,
 * so a run past timeout_s is ended with every process it started (SIGTERM, then SIGKILL). */
FK_CHECKRETURN static int run_child(char *const argv[], const char *out, const char *errf,
                                    const char *stats, double timeout_s, run *r, fk_err *err)
{
    *r = (run){.maxrss_kb = -1};
    fflush(stdout);
    fflush(stderr);
    double t0 = fk_bench_now();
    pid_t pid = fork();
    if (pid < 0)
        return fk_err_set(err, FK_EIO, "bench sim-mpi: fork for '%s' failed: %s", argv[0],
                          strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);
        /* the bench's handlers stay until exec resets them; a stop before then ends this
         * child (the parent forwards to the group only once it knows the group) */
        if (stop_sig)
            _exit(128 + stop_sig);
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int fe = open(errf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0)
            _exit(126);
        if (stats)
            setenv("FK_MPI_STATS", stats, 1);
        else
            unsetenv("FK_MPI_STATS");
        /* a container often denies ptrace between processes (Open MPI's CMA copies) */
        setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", 0);
        execvp(argv[0], argv);
        fprintf(stderr, "bench sim-mpi: cannot run '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* as the child does: whichever runs first */
    child_pgid = pid;
    int st = 0, killed = 0, forwarded = 0;
    struct rusage ru = {0};
    double deadline = t0 + timeout_s, poll = 0.02;
    for (;;) {
        pid_t w = wait4(pid, &st, WNOHANG, &ru);
        if (w == pid)
            break;
        if (w < 0 && errno != EINTR) {
            child_pgid = 0;
            return fk_err_set(err, FK_EIO, "bench sim-mpi: waiting for '%s': %s", argv[0],
                              strerror(errno));
        }
        double t = fk_bench_now();
        if (stop_sig && !forwarded) {
            /* the handler forwarded it, unless it came before child_pgid was set: again
             * (harmless twice); then as a timeout, SIGKILL after 5 s */
            kill(-pid, stop_sig);
            forwarded = 1;
            if (!killed) {
                killed = 1;
                deadline = t + 5.0;
            }
        }
        if (!killed && t > deadline) {
            kill(-pid, SIGTERM);
            killed = 1;
            deadline = t + 5.0;
        } else if (killed == 1 && t > deadline) {
            kill(-pid, SIGKILL);
            killed = 2;
        }
        sleep_s(poll);
        poll = poll < 0.2 ? poll * 2 : poll;
    }
    if (killed) { /* what the group left behind, and the ranks mpirun did not take down */
        kill(-pid, SIGKILL);
        end_orphans();
    }
    child_pgid = 0;
    r->wall = fk_bench_now() - t0;
    r->maxrss_kb = ru.ru_maxrss;
    r->cpu = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
             (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
    r->status = killed            ? -1
                : WIFEXITED(st)   ? WEXITSTATUS(st)
                : WIFSIGNALED(st) ? 128 + WTERMSIG(st)
                                  : 1;
    return FK_OK;
}

/* The file's text with every "seconds":VALUE removed (the runs' own timings), NUL-ended;
 * NULL when it cannot be read. */
static char *read_output(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    size_t cap = 4096, len = 0;
    char *s = malloc(cap);
    int c;
    while (s && (c = fgetc(f)) != EOF) {
        if (len + 1 >= cap) {
            char *t = realloc(s, cap * 2);
            if (!t) {
                free(s);
                s = NULL;
                break;
            }
            s = t;
            cap *= 2;
        }
        s[len++] = (char)c;
    }
    fclose(f);
    if (!s)
        return NULL;
    s[len] = '\0';
    static const char key[] = "\"seconds\":";
    char *w = s;
    for (const char *p = s; *p;) {
        if (!strncmp(p, key, sizeof key - 1)) {
            p += sizeof key - 1;
            while (*p && *p != ',' && *p != '}' && *p != '\n')
                p++;
        } else {
            *w++ = *p++;
        }
    }
    *w = '\0';
    return s;
}

/* The last few lines of a file, for a failure's message. */
static void tail_of(const char *path, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f)
        return;
    fseek(f, 0, SEEK_END);
    long n = ftell(f), from = n > (long)cap - 1 ? n - (long)cap + 1 : 0;
    fseek(f, from, SEEK_SET);
    size_t got = fread(out, 1, cap - 1, f);
    out[got] = '\0';
    fclose(f);
    for (char *p = out; *p; p++)
        if (*p == '\n' && p[1])
            *p = ' ';
}

typedef struct rank_stats {
    int seen;
    long rounds, sent_msgs, recv_msgs, maxrss_kb;
    unsigned long long sent_bytes, recv_bytes;
} rank_stats;

/* The ranks' fk-mpi-stats lines (cli/sim_mpi.c, fk_mpi_finish) of one run. */
static int read_stats(const char *path, rank_stats *rs, int P)
{
    memset(rs, 0, (size_t)P * sizeof *rs);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[512];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        int rank, size;
        long rounds, sm, rm, rss, grid;
        unsigned long long sb, rb;
        if (sscanf(line,
                   "fk-mpi-stats rank=%d size=%d rounds=%ld sent_msgs=%ld sent_bytes=%llu "
                   "recv_msgs=%ld recv_bytes=%llu maxrss_kb=%ld grid_runs=%ld",
                   &rank, &size, &rounds, &sm, &sb, &rm, &rb, &rss, &grid) == 9 &&
            rank >= 0 && rank < P && !rs[rank].seen) {
            rs[rank] = (rank_stats){.seen = 1,
                                    .rounds = rounds,
                                    .sent_msgs = sm,
                                    .recv_msgs = rm,
                                    .maxrss_kb = rss,
                                    .sent_bytes = sb,
                                    .recv_bytes = rb};
            n++;
        }
    }
    fclose(f);
    return n;
}

typedef struct bench {
    const opts *o;
    char self[4096], dir[256];
    int failed;
} bench;

static void emit(const bench *b, const char *cs, const char *metric, double v, const char *extra)
{
    fk_bench_emit(b->o->json, bench_name, cs, metric, v, extra);
}

/* One job: in process, then over each P. tag: its files' names; args: the `fedkern`
 * arguments (NULL-ended). */
static void job(bench *b, const char *tag, const char *name, const char *const *args)
{
    const opts *o = b->o;
    char *argv[MAX_ARGS + 12];
    int na = 0;
    argv[na++] = b->self;
    for (int i = 0; args[i] && na < MAX_ARGS; i++)
        argv[na++] = (char *)args[i];
    argv[na] = NULL;
    char out1[320], outp[320], errf[320], stats[320], cs[128], extra[256], msg[600];
    snprintf(out1, sizeof out1, "%s/%s.one.out", b->dir, tag);
    snprintf(errf, sizeof errf, "%s/%s.err", b->dir, tag);
    fk_err err = {0};
    run one;
    if (stop_sig) /* stopped before this job */
        return;
    if (run_child(argv, out1, errf, NULL, (double)o->timeout, &one, &err)) {
        fprintf(stderr, "fedkern bench sim-mpi: %s: %s\n", name, err.msg);
        b->failed = 1;
        return;
    }
    if (stop_sig) {
        unlink(out1);
        unlink(errf);
        return;
    }
    snprintf(cs, sizeof cs, "%s in-process", name);
    if (one.status != 0) {
        tail_of(errf, msg, sizeof msg);
        unlink(out1);
        unlink(errf);
        fprintf(stderr, "fedkern bench sim-mpi: %s in process %s: %s\n", name,
                one.status < 0 ? "timed out (--timeout)" : "failed", msg);
        emit(b, cs, "failed", 1, NULL);
        b->failed = 1;
        return;
    }
    char *base = read_output(out1);
    emit(b, cs, "wall_s", one.wall, NULL);
    emit(b, cs, "cpu_s", one.cpu, NULL);
    emit(b, cs, "peak_rss_mb", (double)one.maxrss_kb / 1024.0, NULL);
    for (int k = 0; k < o->n_ps; k++) {
        int P = o->ps[k];
        char pstr[16];
        snprintf(pstr, sizeof pstr, "%d", P);
        char *margv[MAX_ARGS + 12];
        int m = 0;
        margv[m++] = (char *)o->mpirun;
        if (geteuid() == 0)
            margv[m++] = "--allow-run-as-root";
        margv[m++] = "--oversubscribe";
        margv[m++] = "-x";
        margv[m++] = "FK_MPI_STATS";
        margv[m++] = "-x";
        margv[m++] = "OMPI_MCA_btl_vader_single_copy_mechanism";
        margv[m++] = "-n";
        margv[m++] = pstr;
        for (int i = 0; argv[i]; i++)
            margv[m++] = argv[i];
        margv[m] = NULL;
        snprintf(outp, sizeof outp, "%s/%s.p%d.out", b->dir, tag, P);
        snprintf(stats, sizeof stats, "%s/%s.p%d.stats", b->dir, tag, P);
        snprintf(cs, sizeof cs, "%s P=%d", name, P);
        unlink(stats);
        run r;
        if (stop_sig)
            break;
        if (run_child(margv, outp, errf, stats, (double)o->timeout, &r, &err)) {
            fprintf(stderr, "fedkern bench sim-mpi: %s: %s\n", cs, err.msg);
            b->failed = 1;
            continue;
        }
        if (stop_sig) {
            unlink(outp);
            unlink(stats);
            break;
        }
        if (r.status != 0) {
            unlink(outp);
            unlink(stats);
            tail_of(errf, msg, sizeof msg);
            fprintf(stderr, "fedkern bench sim-mpi: %s %s: %s\n", cs,
                    r.status < 0 ? "timed out (--timeout)" : "failed", msg);
            emit(b, cs, "failed", 1, NULL);
            b->failed = 1;
            continue;
        }
        char *mo = read_output(outp);
        int same = base && mo && *base && !strcmp(base, mo);
        free(mo);
        unlink(outp);
        if (!same) {
            fprintf(stderr,
                    "fedkern bench sim-mpi: %s: the output differs from the in-process "
                    "run's\n",
                    cs);
            b->failed = 1;
        }
        emit(b, cs, "wall_s", r.wall, NULL);
        emit(b, cs, "cpu_s", r.cpu, NULL); /* every rank's, and mpirun's */
        snprintf(extra, sizeof extra, "\"baseline_s\":%.6g", one.wall);
        emit(b, cs, "speedup", one.wall / r.wall, o->json ? extra : NULL);
        emit(b, cs, "same_output", same, NULL);
        rank_stats rs[MAX_RANKS];
        int n = read_stats(stats, rs, P);
        unlink(stats);
        if (n != P) {
            fprintf(stderr, "fedkern bench sim-mpi: %s: %d of %d ranks reported their stats\n", cs,
                    n, P);
            b->failed = 1;
        }
        for (int q = 0; q < P; q++) {
            if (!rs[q].seen)
                continue;
            double rounds = (double)rs[q].rounds;
            snprintf(cs, sizeof cs, "%s P=%d rank %d", name, P, q);
            if (o->json)
                snprintf(extra, sizeof extra, "\"rank\":%d,\"rounds\":%ld", q, rs[q].rounds);
            const char *x = o->json ? extra : NULL;
            /* per round of the simulation; P = 1 runs in process (no rounds over MPI) */
            if (rs[q].rounds > 0) {
                emit(b, cs, "sent_msgs_per_round", (double)rs[q].sent_msgs / rounds, x);
                emit(b, cs, "sent_bytes_per_round", (double)rs[q].sent_bytes / rounds, x);
                emit(b, cs, "recv_msgs_per_round", (double)rs[q].recv_msgs / rounds, x);
                emit(b, cs, "recv_bytes_per_round", (double)rs[q].recv_bytes / rounds, x);
            }
            emit(b, cs, "peak_rss_mb", (double)rs[q].maxrss_kb / 1024.0, x);
        }
    }
    free(base);
    unlink(out1);
    unlink(errf);
}

int fk_bench_sim_mpi(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    opts o = {0};
    if (parse(argc, argv, &o))
        return 2;
    if (!FK_BENCH_MPI) {
        fprintf(stderr, "fedkern bench sim-mpi: this fedkern is built without MPI, so `mpirun "
                        "fedkern sim` would run the whole simulation in every process; rebuild "
                        "with MPI (apt-get install libopenmpi-dev openmpi-bin; meson setup "
                        "-Dmpi=enabled) to run this bench\n");
        return 2;
    }
    bench b = {.o = &o};
    ssize_t n = readlink("/proc/self/exe", b.self, sizeof b.self - 1);
    if (n <= 0) {
        fprintf(stderr, "fedkern bench sim-mpi: cannot find this fedkern's executable "
                        "(/proc/self/exe): it starts itself under mpirun\n");
        return 1;
    }
    b.self[n] = '\0';
    const char *tmp = getenv("TMPDIR");
    snprintf(b.dir, sizeof b.dir, "%s/fk-sim-mpi-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(b.dir)) {
        fprintf(stderr,
                "fedkern bench sim-mpi: cannot make a directory for the runs' output in "
                "%s: %s (set TMPDIR)\n",
                tmp && *tmp ? tmp : "/tmp", strerror(errno));
        return 1;
    }
    install_stop_handlers();
    double load[3] = {NAN, NAN, NAN};
    if (getloadavg(load, 3) < 1)
        load[0] = NAN;
    emit(&b, "machine", "cores", (double)sysconf(_SC_NPROCESSORS_ONLN), NULL);
    emit(&b, "machine", "loadavg_1min_start", load[0], NULL);
    /* a rank slowed by the load is waited for (the whole run is bounded by --timeout): the
     * bench measures, it does not drop clients */
    char K[24], N[24], T[24], C[24], deadline[24];
    snprintf(deadline, sizeof deadline, "%ld", o.timeout);
    snprintf(K, sizeof K, "%ld", o.clients);
    snprintf(N, sizeof N, "%ld", o.n);
    snprintf(T, sizeof T, "%ld", o.rounds);
    snprintf(C, sizeof C, "%ld", o.dica_clients);
    if (o.fedgrem) {
        const char *args[] = {"sim",      "fedgrem", "--K",     K,   "--n",        N,
                              "--rounds", T,         "--every", "1", "--deadline", deadline,
                              "--json",   NULL};
        char name[48];
        snprintf(name, sizeof name, "fedgrem K=%ld", o.clients);
        job(&b, "fedgrem", name, args);
    }
    if (o.dica) {
        const char *args[] = {"sim",        "dica",   "--clients", C,
                              "--deadline", deadline, "--json",    NULL};
        char name[48];
        snprintf(name, sizeof name, "dica clients=%ld", o.dica_clients);
        job(&b, "dica", name, args);
    }
    if (getloadavg(load, 3) < 1)
        load[0] = NAN;
    emit(&b, "machine", "loadavg_1min_end", load[0], NULL);
    rmdir(b.dir);   /* each job removed its files */
    if (stop_sig) { /* its child reaped, its group killed: stopped, not finished */
        fprintf(stderr,
                "fedkern bench sim-mpi: stopped by signal %d; the running child's "
                "process group got it too\n",
                (int)stop_sig);
        return 128 + (int)stop_sig;
    }
    return b.failed;
}
