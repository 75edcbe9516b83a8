/* `fedkern bench load`: many concurrent mutual-TLS client connections against
 * a real fedkern-server (started here as a child process on 127.0.0.1). Every
 * connection has its own client certificate, Joins, then sends Heartbeat calls
 * for a bounded time. Measures: server RSS before/after the connections (memory
 * per idle mTLS connection), RSS over the heartbeat phase (flat or not), the
 * server's open fds before and after (leak or not), heartbeat latency
 * percentiles, server CPU per heartbeat, and projects the connection count one
 * 2-core server sustains. Exits 1 when a check fails (fd leak, failed calls,
 * connections that never joined). */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "bench/bench.h"
#include "common/base/log.h"
#include "common/base/params.h"
#include "common/base/uvcheck.h"
#include "common/la/rng.h"
#include "common/net/certs.h"
#include "common/net/codec.h"
#include "common/net/grpc_client.h"
#include "fedkern.pb.h"

#define FED "/fedkern.v1.Federation/"

typedef struct loadgen loadgen;

typedef struct lconn {
    loadgen *g;
    int idx;
    fk_grpc_client *cl;
    fk_tls_ctx *tls;
    char session[64];
    int up, joined, busy, closed;
    double sent_at;
    uint8_t *req;
    /* storm: reconnect with full jitter after the server was killed */
    uv_timer_t retry;
    int retry_init, attempts, rejoined, storm_joins;
    int inflight, waiting; /* storm: connecting now / queued for a generator slot */
} lconn;

struct loadgen {
    uv_loop_t *loop;
    lconn *conns;
    int n, connecting, joined, up, closed_n;
    int batch;          /* handshakes in flight at once */
    int next_connect;
    int port;
    double hb_interval; /* seconds between heartbeats of one connection */
    int phase;          /* 0 connecting, 1 heartbeats, 2 closing */
    double *lat;        /* heartbeat latencies, seconds */
    size_t n_lat, cap_lat;
    long failed_calls, failed_conns;
    uv_timer_t tick;
    double credit, last_tick; /* heartbeats owed since the last tick */
    int cursor;               /* next connection to heartbeat */
    const char *dir;
    /* storm (phase 4): the server was killed at storm_t0 and restarted */
    double storm_t0, t99, t100;
    int rejoined, storm_joins, storm_failures;
    fk_rng rng;
    /* One process plays every client: at most `batch` reconnects in flight, the rest wait
     * their turn here (a real fleet has a CPU per client; this generator has part of one) */
    int inflight, *waitq, wq_head, wq_len;
};

/* The client daemon's reconnect policy (client/agent.c): full jitter, uniform in
 * [0, min(15 s, 200 ms * 2^attempt)]. */
enum { BACKOFF_MIN_MS = 200, BACKOFF_MAX_MS = 15000 };

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

static pid_t start_server(const char *bin, const char *dir, int *port, fk_err *err)
{
    char log[512], db[512], buf[8192], listen[64];
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
        execl(bin, bin, "--listen", listen, "--tls_dir", dir, "--state", db,
              "--metrics_listen", "127.0.0.1:0", "--memtrim_ms", "500", (char *)NULL);
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

/* ---- load generator ---- */

static void connect_more(loadgen *g);
static void send_heartbeat(lconn *c);

static void lat_push(loadgen *g, double v)
{
    if (g->n_lat == g->cap_lat) {
        size_t cap = g->cap_lat ? 2 * g->cap_lat : 4096;
        double *p = realloc(g->lat, cap * sizeof *p);
        if (!p)
            return;
        g->lat = p;
        g->cap_lat = cap;
    }
    g->lat[g->n_lat++] = v;
}

static void on_hb(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    (void)msg;
    (void)resp;
    (void)len;
    lconn *c = ud;
    free(c->req);
    c->req = NULL;
    c->busy = 0;
    if (status != FK_GRPC_OK) {
        c->g->failed_calls++;
        return;
    }
    if (c->g->phase == 1)
        lat_push(c->g, fk_bench_now() - c->sent_at);
}

static void send_heartbeat(lconn *c)
{
    fedkern_v1_HeartbeatRequest in = fedkern_v1_HeartbeatRequest_init_zero;
    snprintf(in.session_id, sizeof in.session_id, "%s", c->session);
    size_t len;
    fk_err err;
    if (fk_codec_encode(fedkern_v1_HeartbeatRequest_fields, &in, 0, &c->req, &len, &err)) {
        c->g->failed_calls++;
        return;
    }
    c->busy = 1;
    c->sent_at = fk_bench_now();
    if (fk_grpc_client_call(c->cl, FED "Heartbeat", c->req, len, 10000, on_hb, c)) {
        free(c->req);
        c->req = NULL;
        c->busy = 0;
        c->g->failed_calls++;
    }
}

static void storm_retry_later(lconn *c);
static void storm_pump(loadgen *g);

/* A storm reconnect finished (joined or failed): its generator slot goes to the next. */
static void storm_release(lconn *c)
{
    if (!c->inflight)
        return;
    c->inflight = 0;
    c->g->inflight--;
    storm_pump(c->g);
}

static void on_join(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    lconn *c = ud;
    loadgen *g = c->g;
    if (g->phase == 4) { /* storm: a rejoin after the restart */
        storm_release(c);
        free(c->req);
        c->req = NULL;
        c->busy = 0;
        fedkern_v1_JoinResponse out;
        fk_err err;
        if (status != FK_GRPC_OK ||
            fk_codec_decode(fedkern_v1_JoinResponse_fields, &out, resp, len, &err)) {
            g->storm_failures++;
            storm_retry_later(c);
            return;
        }
        snprintf(c->session, sizeof c->session, "%s", out.session_id);
        fk_codec_release(fedkern_v1_JoinResponse_fields, &out);
        c->storm_joins++;
        g->storm_joins++;
        if (!c->rejoined++) {
            double t = fk_bench_now() - g->storm_t0;
            if (++g->rejoined >= (g->n * 99 + 99) / 100 && g->t99 == 0)
                g->t99 = t;
            if (g->rejoined == g->n)
                g->t100 = t;
        }
        return;
    }
    free(c->req);
    c->req = NULL;
    c->busy = 0;
    g->connecting--;
    fedkern_v1_JoinResponse out;
    fk_err err;
    if (status != FK_GRPC_OK ||
        fk_codec_decode(fedkern_v1_JoinResponse_fields, &out, resp, len, &err)) {
        if (!g->failed_conns++)
            fprintf(stderr, "fedkern bench load: Join failed: %s\n", msg ? msg : err.msg);
    } else {
        snprintf(c->session, sizeof c->session, "%s", out.session_id);
        fk_codec_release(fedkern_v1_JoinResponse_fields, &out);
        c->joined = 1;
        g->joined++;
    }
    connect_more(g);
}

static void on_state(fk_grpc_client *cl, int up, const char *why, void *ud)
{
    (void)cl;
    lconn *c = ud;
    if (up) {
        c->up = 1;
        c->g->up++;
        return;
    }
    if (c->up) {
        c->up = 0;
        c->g->up--;
    }
    if (c->g->phase == 4 && !c->closed) { /* storm: the server went away; come back later */
        storm_retry_later(c);
        return;
    }
    if (c->g->phase < 2 && !c->closed && !c->g->failed_conns++)
        fprintf(stderr, "fedkern bench load: connection %d ended: %s\n", c->idx, why);
}

static void on_closed(void *ud)
{
    lconn *c = ud;
    c->g->closed_n++;
}

static void start_conn(loadgen *g, lconn *c)
{
    char ca[600], cert[600], key[600], name[32];
    snprintf(name, sizeof name, "load%d", c->idx);
    fk_err err;
    fk_tls_files files = {.ca = ca, .cert = cert, .key = key};
    fk_grpc_client_config cfg;
    fk_net_limits_default(&cfg.limits);
    g->connecting += g->phase != 4;
    if (!c->tls && (fk_certs_path(ca, sizeof ca, g->dir, FK_ROLE_NONE, NULL, "pem", &err) ||
        fk_certs_path(cert, sizeof cert, g->dir, FK_ROLE_CLIENT, name, "pem", &err) ||
        fk_certs_path(key, sizeof key, g->dir, FK_ROLE_CLIENT, name, "key", &err) ||
        fk_tls_ctx_new(&c->tls, 0, &files, &err))) {
        g->connecting -= g->phase != 4;
        if (!g->failed_conns++)
            fprintf(stderr, "fedkern bench load: %s\n", err.msg);
        return;
    }
    cfg.tls = c->tls;
    if (fk_grpc_client_connect(&c->cl, g->loop, &cfg, "127.0.0.1", g->port, "127.0.0.1", on_state,
                               c, &err)) {
        g->connecting -= g->phase != 4;
        c->cl = NULL;
        if (g->phase == 4) { /* storm: try again later, as the client daemon does */
            storm_retry_later(c);
            return;
        }
        if (!g->failed_conns++)
            fprintf(stderr, "fedkern bench load: %s\n", err.msg);
        return;
    }
    fedkern_v1_JoinRequest in = fedkern_v1_JoinRequest_init_zero;
    in.protocol_version = 1;
    snprintf(in.name, sizeof in.name, "%s", name);
    snprintf(in.software, sizeof in.software, "fedkern bench load");
    size_t len;
    if (fk_codec_encode(fedkern_v1_JoinRequest_fields, &in, 0, &c->req, &len, &err) ||
        fk_grpc_client_call(c->cl, FED "Join", c->req, len, 30000, on_join, c)) {
        free(c->req);
        c->req = NULL;
        g->connecting -= g->phase != 4;
        g->failed_conns += g->phase != 4; /* storm: on_join already scheduled a retry */
        return;
    }
    c->busy = 1;
}

static void on_storm_closed(void *ud)
{
    (void)ud; /* the old client of a storm reconnect: nothing to count */
}

static void on_retry(uv_timer_t *t)
{
    lconn *c = t->data;
    if (c->g->phase != 4)
        return;
    if (c->cl) {
        fk_grpc_client_close(c->cl, on_storm_closed, c);
        c->cl = NULL;
    }
    loadgen *g = c->g;
    if (!c->waiting) {
        c->waiting = 1;
        g->waitq[(g->wq_head + g->wq_len++) % g->n] = c->idx;
    }
    storm_pump(g);
}

static void storm_pump(loadgen *g)
{
    while (g->phase == 4 && g->wq_len > 0 && g->inflight < g->batch) {
        lconn *c = &g->conns[g->waitq[g->wq_head]];
        g->wq_head = (g->wq_head + 1) % g->n;
        g->wq_len--;
        c->waiting = 0;
        c->inflight = 1;
        g->inflight++;
        c->attempts++;
        start_conn(g, c);
    }
}

/* Reconnect and Join after a full-jitter delay, unless one is already pending. */
static void storm_retry_later(lconn *c)
{
    loadgen *g = c->g;
    storm_release(c);
    if (c->waiting)
        return; /* already queued for a slot */
    if (!c->retry_init) {
        FK_UV_MUST(uv_timer_init(g->loop, &c->retry));
        c->retry.data = c;
        c->retry_init = 1;
    }
    if (uv_is_active((uv_handle_t *)&c->retry))
        return;
    uint64_t cap = (uint64_t)BACKOFF_MIN_MS << (c->attempts < 16 ? c->attempts : 16);
    if (cap > BACKOFF_MAX_MS)
        cap = BACKOFF_MAX_MS;
    FK_UV_MUST(uv_timer_start(&c->retry, on_retry, fk_rng_below(&g->rng, cap + 1), 0));
}

static void connect_more(loadgen *g)
{
    while (g->next_connect < g->n && g->connecting < g->batch)
        start_conn(g, &g->conns[g->next_connect++]);
}

/* Heartbeats spread evenly: each tick sends for the connections whose turn it is. */
static void on_tick(uv_timer_t *t)
{
    loadgen *g = t->data;
    if (g->phase != 1)
        return;
    double now = fk_bench_now();
    if (g->last_tick > 0)
        g->credit += (double)g->n * (now - g->last_tick) / g->hb_interval;
    g->last_tick = now;
    for (; g->credit >= 1.0; g->credit -= 1.0) {
        lconn *c = &g->conns[g->cursor];
        g->cursor = (g->cursor + 1) % g->n;
        if (c->joined && c->up && !c->busy)
            send_heartbeat(c);
    }
}

/* Run the loop until cond(g) holds or seconds pass; returns 1 if it held. */
static int run_until(loadgen *g, int (*cond)(loadgen *), double seconds)
{
    double until = fk_bench_now() + seconds;
    while (!cond(g) && fk_bench_now() < until)
        FK_UV_MUST(uv_run(g->loop, UV_RUN_ONCE));
    return cond(g);
}

static int all_settled(loadgen *g)
{
    return g->next_connect == g->n && g->connecting == 0;
}

static int none_busy(loadgen *g)
{
    for (int i = 0; i < g->n; i++)
        if (g->conns[i].busy)
            return 0;
    return 1;
}

static int all_closed(loadgen *g)
{
    int opened = 0;
    for (int i = 0; i < g->n; i++)
        opened += g->conns[i].cl != NULL;
    return g->closed_n == opened;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double pct(const double *v, size_t n, double p)
{
    if (!n)
        return 0;
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

static int make_pki(const char *dir, int n, fk_err *err)
{
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
        setrlimit(RLIMIT_NOFILE, &r);
    }
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: fedkern bench load [--connections N] [--seconds S] [--interval_ms MS]\n"
            "                          [--batch N] [--server_bin PATH] [--json]\n"
            "\n"
            "Starts fedkern-server on 127.0.0.1, opens N mutual-TLS connections (one client\n"
            "certificate each), Joins, then sends Heartbeat calls for S seconds. Reports\n"
            "server RSS per idle connection, RSS drift over the heartbeat phase, server fds\n"
            "before/after (leak check), heartbeat latency p50/p99/max, server CPU per call,\n"
            "and the projected connections for one 2-core server at the default 10 s\n"
            "heartbeat. Exit 1 if an fd leaked, a call failed or a connection never joined.\n"
            "\n"
            "  --connections N   concurrent connections (1000)\n"
            "  --seconds S       heartbeat phase length (20)\n"
            "  --interval_ms MS  heartbeat interval per connection (1000)\n"
            "  --batch N         handshakes in flight at once (64)\n"
            "  --server_bin PATH fedkern-server to start (next to this fedkern)\n"
            "  --keep            keep the work directory (server.log, state.db) and say where\n"
            "  --storm           after the heartbeats, SIGKILL the server, restart it and time\n"
            "                    the clients' return (full-jitter backoff 200 ms .. 15 s, at most\n"
            "                    --batch reconnects in flight in this one generator); exit 1\n"
            "                    unless all rejoined within --storm_limit S (90), each counted once\n"
            "  --json            JSON lines\n");
}

typedef struct load_opts {
    long n, batch;
    double seconds, interval_ms, storm_limit;
    int json, keep, storm;
    char server_bin[512];
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
        rc = fk_params_double(&p, "seconds", 20, 0.5, 3600, &o->seconds, err);
    if (!rc)
        rc = fk_params_double(&p, "interval_ms", 1000, 10, 600000, &o->interval_ms, err);
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
    const char *extra = rc ? NULL : fk_params_unused(&p);
    if (extra)
        rc = fk_err_set(err, FK_EINVAL, "unknown option --%s; see --help", extra);
    fk_params_close(&p);
    return rc;
}

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
    memacct a0, a1;              /* memory accounting idle and connected */
    int fds0, fds1, fds_end;
    double cpu0, cpu1, t_hb;
} sample;

static void report(const load_opts *o, const loadgen *g, const sample *s, double t_connect)
{
    double per_conn_kb = (double)(s->rss1 - s->rss0) / (double)(g->joined ? g->joined : 1);
    double calls = (double)g->n_lat;
    double cpu = s->cpu1 - s->cpu0;
    double cpu_per_call = calls > 0 ? cpu / calls : 0;
    /* one 2-core server, 10 s heartbeat: CPU bound is 2 / (cpu per call) calls/s */
    double proj_cpu = cpu_per_call > 0 ? 2.0 / cpu_per_call * 10.0 : 0;
    double drift = (double)(s->rss_max - s->rss_min);
    int j = o->json;
    const char *b = "load";
    fk_bench_emit(j, b, "connect", "connections", (double)g->joined, NULL);
    fk_bench_emit(j, b, "connect", "seconds", t_connect, NULL);
    fk_bench_emit(j, b, "connect", "failed_connections", (double)g->failed_conns, NULL);
    /* the machine is shared: server CPU per handshake + Join is what carries over */
    fk_bench_emit(j, b, "connect", "server_cpu_ms_per_join",
                  g->joined ? 1e3 * s->cpu_connect / g->joined : 0, NULL);
    fk_bench_emit(j, b, "memory", "server_rss_idle_kb", (double)s->rss0, NULL);
    fk_bench_emit(j, b, "memory", "server_rss_connected_kb", (double)s->rss1, NULL);
    fk_bench_emit(j, b, "memory", "kb_per_idle_connection", per_conn_kb, "\"goal\":40");
    if (s->a0.ok && s->a1.ok && g->joined > 0) {
        /* where each kilobyte of a joined idle client goes (heap accounting in the server) */
        double k = 1024.0 * (double)g->joined;
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
        fk_bench_emit(j, b, "memory_parts", "kb_per_client_other",
                      per_conn_kb - named / k, NULL);
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
    fk_bench_emit(j, b, "heartbeat", "calls", calls, NULL);
    fk_bench_emit(j, b, "heartbeat", "calls_per_s", calls / s->t_hb, NULL);
    fk_bench_emit(j, b, "heartbeat", "failed_calls", (double)g->failed_calls, NULL);
    fk_bench_emit(j, b, "heartbeat", "p50_ms", 1e3 * pct(g->lat, g->n_lat, 0.50), NULL);
    fk_bench_emit(j, b, "heartbeat", "p99_ms", 1e3 * pct(g->lat, g->n_lat, 0.99), NULL);
    fk_bench_emit(j, b, "heartbeat", "max_ms", 1e3 * pct(g->lat, g->n_lat, 1.0), NULL);
    fk_bench_emit(j, b, "server_cpu", "cpu_s_per_1000_calls", 1e3 * cpu_per_call, NULL);
    fk_bench_emit(j, b, "server_cpu", "cpu_fraction_of_one_core", cpu / s->t_hb, NULL);
    fk_bench_emit(j, b, "projection_2core", "connections_cpu_bound_10s_heartbeat", proj_cpu,
                  "\"goal\":10000");
    if (o->storm) {
        fk_bench_emit(j, b, "storm", "server_restart_s", s->storm_restart_s, NULL);
        fk_bench_emit(j, b, "storm", "rejoined", (double)g->rejoined, NULL);
        fk_bench_emit(j, b, "storm", "server_cpu_s_until_all_rejoined", s->cpu_storm, NULL);
        fk_bench_emit(j, b, "storm", "s_to_99pct_rejoined", g->t99, NULL);
        fk_bench_emit(j, b, "storm", "s_to_100pct_rejoined", g->t100, "\"goal\":60");
        fk_bench_emit(j, b, "storm", "join_calls_ok", (double)g->storm_joins, NULL);
        fk_bench_emit(j, b, "storm", "join_calls_failed", (double)g->storm_failures, NULL);
        fk_bench_emit(j, b, "storm", "server_sessions_after", (double)s->storm_sessions, NULL);
        fk_bench_emit(j, b, "storm", "server_rss_after_storm_kb", (double)s->rss_storm, NULL);
    }
    double mem_10k_mb = per_conn_kb * 10000.0 / 1024.0;
    fk_bench_emit(j, b, "projection_2core", "server_rss_mb_at_10000_connections",
                  (double)s->rss0 / 1024.0 + mem_10k_mb, NULL);
}

static void close_all(loadgen *g)
{
    g->phase = 2;
    for (int i = 0; i < g->n; i++) {
        if (g->conns[i].retry_init) {
            FK_UV_MUST(uv_timer_stop(&g->conns[i].retry));
            uv_close((uv_handle_t *)&g->conns[i].retry, NULL);
            g->conns[i].retry_init = 0;
        }
        if (g->conns[i].cl) {
            g->conns[i].closed = 1;
            fk_grpc_client_close(g->conns[i].cl, on_closed, &g->conns[i]);
        }
    }
}

static int all_rejoined(loadgen *g)
{
    return g->rejoined == g->n;
}

/* Reconnect storm: SIGKILL the server under every joined client, start it again on the same
 * port and state, and time the clients' return (full-jitter backoff, as the client daemon).
 * The server's own session count afterwards shows whether a client was counted twice. */
static void storm_phase(loadgen *g, const load_opts *o, pid_t *srv, int port, sample *s)
{
    g->phase = 4;
    fk_rng_init(&g->rng, 24, 1);
    if (!(g->waitq = calloc((size_t)g->n, sizeof *g->waitq))) {
        fprintf(stderr, "fedkern bench load: storm: out of memory\n");
        return;
    }
    kill(*srv, SIGKILL);
    waitpid(*srv, NULL, 0);
    g->storm_t0 = fk_bench_now();
    fk_err err;
    int p = port;
    if ((*srv = start_server(o->server_bin, g->dir, &p, &err)) < 0) {
        fprintf(stderr, "fedkern bench load: storm restart: %s\n", err.msg);
        return;
    }
    s->storm_restart_s = fk_bench_now() - g->storm_t0;
    run_until(g, all_rejoined, o->storm_limit);
    s->cpu_storm = proc_cpu_s(*srv);
    /* late duplicates would show in the server's count: wait for its next accounting line */
    double until = fk_bench_now() + 1.2;
    while (fk_bench_now() < until)
        FK_UV_MUST(uv_run(g->loop, UV_RUN_NOWAIT)), usleep(2000);
    s->storm_sessions = (int)read_acct(g->dir).sessions;
    s->rss_storm = proc_rss_kb(*srv);
}

/* The timed phase: every connection heartbeats for `seconds` (on_tick paces them) while
 * the server's RSS is sampled every 0.5 s and its CPU time is taken at both ends. */
static void heartbeat_phase(loadgen *g, pid_t srv, double seconds, sample *s)
{
    FK_UV_MUST(uv_timer_init(g->loop, &g->tick));
    g->tick.data = g;
    g->phase = 1;
    s->cpu0 = proc_cpu_s(srv);
    double th = fk_bench_now();
    FK_UV_MUST(uv_timer_start(&g->tick, on_tick, 10, 10));
    double next_sample = th + 0.5;
    while (fk_bench_now() - th < seconds) {
        FK_UV_MUST(uv_run(g->loop, UV_RUN_ONCE));
        if (fk_bench_now() >= next_sample) {
            long r = proc_rss_kb(srv);
            if (!s->rss_mid && fk_bench_now() - th >= seconds / 2)
                s->rss_mid = r;
            s->rss_hb_end = r;
            s->rss_min = r < s->rss_min ? r : s->rss_min;
            s->rss_max = r > s->rss_max ? r : s->rss_max;
            next_sample += 0.5;
        }
    }
    s->cpu1 = proc_cpu_s(srv);
    s->t_hb = fk_bench_now() - th;
    FK_UV_MUST(uv_timer_stop(&g->tick));
    g->phase = 3; /* heartbeats still in flight complete but are not timed */
    run_until(g, none_busy, 15);
    /* still connected and idle: the server's trim (two 0.5 s checks) gives the spike back */
    double until = fk_bench_now() + 2.5;
    while (fk_bench_now() < until)
        FK_UV_MUST(uv_run(g->loop, UV_RUN_NOWAIT)), usleep(2000);
    s->rss_after_load = proc_rss_kb(srv);
}

/* Close every connection, then measure what the server gives back: its fds (a leak shows
 * here) and its RSS right after and once it had time to trim. */
static void close_phase(loadgen *g, pid_t srv, sample *s)
{
    close_all(g);
    run_until(g, all_closed, 30);
    uv_close((uv_handle_t *)&g->tick, NULL);
    /* the server notices the closes on its next loop turns */
    for (int i = 0; i < 50; i++) {
        FK_UV_MUST(uv_run(g->loop, UV_RUN_NOWAIT));
        s->fds_end = proc_fds(srv);
        if (s->fds_end <= s->fds0)
            break;
        usleep(100000);
    }
    s->rss_end = proc_rss_kb(srv);
    /* the server trims once its free heap stayed up for two 0.5 s checks */
    usleep(2000000);
    s->rss_idle = proc_rss_kb(srv);
}

/* Exit status of the run: 1 with a line per broken promise (joins, calls, fd leak). */
static int verdict(const load_opts *o, const loadgen *g, const sample *s)
{
    int rc = 0;
    if (o->storm && (g->rejoined != g->n || s->storm_sessions != g->n ||
                     g->storm_joins != g->n)) {
        fprintf(stderr,
                "fedkern bench load: storm: %d of %d rejoined in %.0f s, %d Joins answered, "
                "the server counts %d sessions\n",
                g->rejoined, g->n, o->storm_limit, g->storm_joins, s->storm_sessions);
        rc = 1;
    }
    if (g->joined != g->n || g->failed_conns) {
        fprintf(stderr, "fedkern bench load: %d of %d connections joined, %ld failed\n", g->joined,
                g->n, g->failed_conns);
        rc = 1;
    }
    if (g->failed_calls) {
        fprintf(stderr, "fedkern bench load: %ld heartbeat calls failed\n", g->failed_calls);
        rc = 1;
    }
    if (s->fds_end > s->fds0) {
        fprintf(stderr, "fedkern bench load: server fd leak: %d fds before, %d after closing\n",
                s->fds0, s->fds_end);
        rc = 1;
    }
    if (g->n_lat == 0) {
        fprintf(stderr, "fedkern bench load: no heartbeat completed\n");
        rc = 1;
    }
    return rc;
}

int fk_bench_load(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        }
    load_opts o;
    fk_err err;
    if (parse_opts(argc, argv, &o, &err)) {
        fprintf(stderr, "fedkern bench load: %s\n", err.msg);
        return 2;
    }
    /* a peer's reset must not kill the generator; 1000 connections need the fds */
    signal(SIGPIPE, SIG_IGN);
    raise_nofile((int)(2 * o.n + 256));
    char dir[] = "/tmp/fk-bench-load-XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "fedkern bench load: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    int rc = 1, port = 0;
    pid_t srv = -1;
    loadgen g = {.n = (int)o.n, .batch = (int)o.batch, .hb_interval = o.interval_ms / 1e3,
                 .dir = dir};
    sample s = {0};
    /* one certificate per client and the real fedkern-server binary, as deployed */
    double t0 = fk_bench_now();
    if (make_pki(dir, g.n, &err)) {
        fprintf(stderr, "fedkern bench load: certificates: %s\n", err.msg);
        goto out;
    }
    if (!o.json)
        printf("certificates for %d clients: %.1f s\n", g.n, fk_bench_now() - t0);
    if ((srv = start_server(o.server_bin, dir, &port, &err)) < 0) {
        fprintf(stderr, "fedkern bench load: %s\n", err.msg);
        goto out;
    }
    /* baseline RSS and fds of the idle server, then connect everyone and settle */
    usleep(1300000); /* one memory_accounting line logged */
    s.rss0 = proc_rss_kb(srv);
    s.a0 = read_acct(dir);
    s.fds0 = proc_fds(srv);
    g.port = port;
    g.loop = uv_default_loop();
    g.conns = calloc((size_t)g.n, sizeof *g.conns);
    if (!g.conns)
        goto out;
    for (int i = 0; i < g.n; i++)
        g.conns[i] = (lconn){.g = &g, .idx = i};
    fk_log_set_level(FK_LOG_ERROR);
    double tc = fk_bench_now(), cpu_c = proc_cpu_s(srv);
    connect_more(&g);
    run_until(&g, all_settled, 60 + 0.03 * g.n); /* a shared 2-core machine: 6 min for 10,000 */
    double t_connect = fk_bench_now() - tc;
    run_until(&g, none_busy, 5);
    s.cpu_connect = proc_cpu_s(srv) - cpu_c;
    /* settle: let the server finish per-connection work before measuring */
    double settle = fk_bench_now() + 1.2; /* and a memory_accounting line after it */
    while (fk_bench_now() < settle)
        FK_UV_MUST(uv_run(g.loop, UV_RUN_NOWAIT)), usleep(1000);
    s.rss1 = proc_rss_kb(srv);
    s.a1 = read_acct(dir);
    s.fds1 = proc_fds(srv);
    s.rss_min = s.rss_max = s.rss1;
    heartbeat_phase(&g, srv, o.seconds, &s);
    if (o.storm)
        storm_phase(&g, &o, &srv, port, &s);
    close_phase(&g, srv, &s);
    qsort(g.lat, g.n_lat, sizeof *g.lat, cmp_double);
    report(&o, &g, &s, t_connect);
    rc = verdict(&o, &g, &s);
out:
    /* cleanup on every path: client TLS contexts, the server process, the temp dir */
    if (g.loop) {
        FK_UV_MUST(uv_run(g.loop, UV_RUN_NOWAIT));
        for (int i = 0; g.conns && i < g.n; i++)
            if (g.conns[i].tls)
                fk_tls_ctx_unref(g.conns[i].tls);
    }
    free(g.conns);
    free(g.lat);
    free(g.waitq);
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
