/* fedkern bench server: the aggregation server under a load generator.
 *
 * The parent runs the real server pieces (store with synchronous=FULL, round
 * engine, Federation service, gRPC over mutual TLS on 127.0.0.1); a forked
 * load-generator process runs N client agents that answer every task with a
 * synthetic update of `dim` float64 values (method "loadgen": FedAvg of the
 * updates). Reported per N: rounds/s, wall time per round, the share of it
 * spent in aggregation, protocol overhead per round (wall minus aggregation),
 * aggregation throughput of the payload in GB/s, server RSS and CPU seconds
 * (the server process only). A second table times the FedAvg aggregator
 * alone over N in-memory updates (no network, no disk). */
#include <cblas.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "bench/bench.h"
#include "client/agent.h"
#include "common/base/log.h"
#include "common/base/params.h"
#include "common/base/uvcheck.h"
#include "common/methods/aggregate.h"
#include "common/net/certs.h"
#include "common/net/codec.h"
#include "server/engine.h"
#include "server/service.h"

/* ------------------------------------------------------ loadgen method */

typedef struct lg_srv {
    long dim;
    double *w;
    double *acc, wsum; /* the phase's weighted sum while it folds */
} lg_srv;

typedef struct lg_cli {
    long dim;
    int client;
    int step;
} lg_cli;

FK_CHECKRETURN static int lg_server_init(void **srv, const fk_params *p, int n, uint64_t seed,
                                         fk_err *err)
{
    (void)n;
    (void)seed;
    lg_srv *s = calloc(1, sizeof *s);
    if (!s)
        return fk_err_set(err, FK_ENOMEM, "oom");
    if (fk_params_int(p, "dim", 1000, 1, 1L << 28, &s->dim, err) ||
        !(s->w = calloc((size_t)s->dim, sizeof *s->w))) {
        free(s);
        return err && err->code ? err->code : FK_ENOMEM;
    }
    *srv = s;
    return FK_OK;
}

static void lg_server_close(void *srv)
{
    lg_srv *s = srv;
    free(s->w);
    free(s->acc);
    free(s);
}

FK_CHECKRETURN static int lg_plan(void *srv, int round, fk_rng *rng, int *chosen, int *n,
                                  fk_err *err)
{
    (void)srv;
    (void)round;
    (void)rng;
    (void)err;
    (void)chosen;
    return FK_OK + (*n = 0);
}

FK_CHECKRETURN static int lg_task(void *srv, int round, int phase, int client, fk_bundle *out,
                                  fk_err *err)
{
    (void)srv;
    (void)phase;
    (void)client;
    (void)err;
    return fk_bundle_put_scalar(out, "round", round);
}

FK_CHECKRETURN static int lg_aggregate(void *srv, int round, int phase, const fk_update *ups, int n,
                                       int *done, fk_err *err)
{
    (void)round;
    (void)phase;
    lg_srv *s = srv;
    fk_aggregator a = {.kind = FK_AGG_FEDAVG};
    *done = 1;
    return fk_aggregate_tensor(&a, ups, n, "w", s->w, (size_t)s->dim, err);
}

/* --fold 1: the same FedAvg folded one update at a time (sum of n_k x_k, scaled at the end;
 * not the batch's bits, which weigh by n_k / sum n first): the server holds O(dim). */
FK_CHECKRETURN static int lg_fold_begin(void *srv, int round, int phase, fk_err *err)
{
    (void)round;
    (void)phase;
    lg_srv *s = srv;
    if (!s->acc && !(s->acc = malloc((size_t)s->dim * sizeof *s->acc)))
        return fk_err_set(err, FK_ENOMEM, "oom");
    memset(s->acc, 0, (size_t)s->dim * sizeof *s->acc);
    s->wsum = 0;
    return FK_OK;
}

FK_CHECKRETURN static int lg_fold(void *srv, int round, int phase, const fk_update *up,
                                  fk_err *err)
{
    (void)round;
    (void)phase;
    lg_srv *s = srv;
    uint64_t shape[1] = {(uint64_t)s->dim};
    const fk_tensor *t = fk_bundle_expect(&up->msg, "w", 1, shape, err);
    if (!t)
        return FK_EFORMAT;
    double w = up->report.n_samples > 0 ? up->report.n_samples : 1.0;
    cblas_daxpy((int)s->dim, w, t->data, 1, s->acc, 1);
    s->wsum += w;
    return FK_OK;
}

FK_CHECKRETURN static int lg_fold_end(void *srv, int round, int phase, int *done, fk_err *err)
{
    (void)round;
    (void)phase;
    lg_srv *s = srv;
    *done = 1;
    if (!(s->wsum > 0))
        return fk_err_set(err, FK_EINVAL, "loadgen: no updates");
    for (long i = 0; i < s->dim; i++)
        s->w[i] = s->acc[i] / s->wsum;
    return FK_OK;
}

FK_CHECKRETURN static int lg_model(void *srv, fk_bundle *out, fk_err *err)
{
    (void)err;
    lg_srv *s = srv;
    return fk_bundle_put_vec(out, "w", (size_t)s->dim, s->w);
}

FK_CHECKRETURN static int lg_load(void *srv, const fk_bundle *in, fk_err *err)
{
    lg_srv *s = srv;
    uint64_t shape[1] = {(uint64_t)s->dim};
    const fk_tensor *t = fk_bundle_expect(in, "w", 1, shape, err);
    if (!t)
        return FK_EFORMAT;
    memcpy(s->w, t->data, (size_t)s->dim * sizeof *s->w);
    return FK_OK;
}

FK_CHECKRETURN static int lg_client_init(void **cli, const fk_params *p, const fk_dataset *data,
                                         int client, int n, uint64_t seed, fk_err *err)
{
    (void)data;
    (void)n;
    (void)seed;
    lg_cli *c = calloc(1, sizeof *c);
    if (!c)
        return fk_err_set(err, FK_ENOMEM, "oom");
    c->client = client;
    if (fk_params_int(p, "dim", 1000, 1, 1L << 28, &c->dim, err)) {
        free(c);
        return FK_EINVAL;
    }
    *cli = c;
    return FK_OK;
}

static void lg_client_close(void *cli)
{
    free(cli);
}

FK_CHECKRETURN static int lg_step(void *cli, const fk_bundle *task, fk_bundle *update,
                                  fk_report *rep, fk_err *err)
{
    (void)task;
    lg_cli *c = cli;
    double *w = fk_bundle_add(update, "w", 1, (uint64_t[]){(uint64_t)c->dim});
    if (!w)
        return fk_err_set(err, FK_ENOMEM, "oom");
    for (long i = 0; i < c->dim; i++)
        w[i] = (double)((c->client + c->step + i) % 97) * 0.01;
    c->step++;
    rep->n_samples = 100 + c->client % 7;
    return FK_OK;
}

FK_CHECKRETURN static int lg_noop(void *cli, const fk_bundle *in, fk_report *rep, fk_err *err)
{
    (void)cli;
    (void)in;
    (void)rep;
    (void)err;
    return FK_OK;
}

FK_CHECKRETURN static int lg_csave(void *cli, fk_bundle *out, fk_err *err)
{
    (void)cli;
    (void)out;
    (void)err;
    return FK_OK;
}

FK_CHECKRETURN static int lg_cload(void *cli, const fk_bundle *in, fk_err *err)
{
    (void)cli;
    (void)in;
    (void)err;
    return FK_OK;
}

FK_CHECKRETURN static int lg_plan_all(void *srv, int round, fk_rng *rng, int *chosen, int *n,
                                      fk_err *err);

static const fk_param_doc lg_keys[] = {
    {"dim N", "float64 values per update (1000)"},
    {NULL, NULL},
};

static const fk_method loadgen = {
    .name = "loadgen", .summary = "bench: synthetic updates, FedAvg",
    .server_init = lg_server_init, .server_close = lg_server_close, .plan = lg_plan_all,
    .task = lg_task, .aggregate = lg_aggregate, .model = lg_model, .save = lg_model,
    .load = lg_load, .client_init = lg_client_init, .client_close = lg_client_close,
    .local_step = lg_step, .evaluate = lg_noop, .client_save = lg_csave, .client_load = lg_cload,
    .keys = lg_keys,
};

static const fk_method loadgen_fold = {
    .name = "loadgen", .summary = "bench: synthetic updates, FedAvg folded one at a time",
    .server_init = lg_server_init, .server_close = lg_server_close, .plan = lg_plan_all,
    .task = lg_task, .aggregate = lg_aggregate, .fold_begin = lg_fold_begin, .fold = lg_fold,
    .fold_end = lg_fold_end, .model = lg_model, .save = lg_model, .load = lg_load,
    .client_init = lg_client_init, .client_close = lg_client_close, .local_step = lg_step,
    .evaluate = lg_noop, .client_save = lg_csave, .client_load = lg_cload, .keys = lg_keys,
};
static int g_fold; /* --fold: the server aggregates with loadgen_fold */
static long g_upload_mb = 64; /* --upload_memory_mb: the server's upload budget (its default) */

/* All clients every round (the server keeps n from server_init via the job's client list). */
static int g_clients;

FK_CHECKRETURN static int lg_plan_all(void *srv, int round, fk_rng *rng, int *chosen, int *n,
                                      fk_err *err)
{
    int rc = lg_plan(srv, round, rng, chosen, n, err);
    if (rc)
        return rc;
    for (int i = 0; i < g_clients; i++)
        chosen[i] = i;
    *n = g_clients;
    return FK_OK;
}

static const fk_method *find_loadgen(const char *name, fk_err *err)
{
    if (!strcmp(name, "loadgen"))
        return g_fold ? &loadgen_fold : &loadgen;
    fk_err_set(err, FK_ENOTFOUND, "bench server runs only 'loadgen' (got '%s')", name);
    return NULL;
}

/* ------------------------------------------------------ load generator */

static fk_dataset dummy;

static const fk_dataset *dummy_data(void *ud, const char *name, fk_err *err)
{
    (void)ud;
    (void)name;
    (void)err;
    return &dummy;
}

static void on_term(uv_signal_t *s, int signum)
{
    (void)signum;
    uv_stop(s->loop);
}

/* The load generator's agents, started in waves: at most RAMP_INFLIGHT of them between their
 * start and their first Join, so 10,000 clients join without a storm of handshakes that time
 * out and retry (the bench measures rounds, not storms; `bench load --storm` does those). */
enum { RAMP_INFLIGHT = 64 };

typedef struct ramp {
    uv_loop_t *loop;
    fk_agent **agents;
    const char *pki;
    int port, n, started, scan; /* agents [0, scan) have joined */
    uv_timer_t timer;
} ramp;

static void start_agent(ramp *r, int i)
{
    char ca[512], cert[512], key[512];
    snprintf(ca, sizeof ca, "%s/ca.pem", r->pki);
    snprintf(cert, sizeof cert, "%s/client-l%d.pem", r->pki, i);
    snprintf(key, sizeof key, "%s/client-l%d.key", r->pki, i);
    fk_tls_files f = {ca, cert, key, NULL, 0};
    fk_tls_ctx *tls;
    fk_err err = {0};
    if (fk_tls_ctx_new(&tls, 0, &f, &err))
        _exit(3);
    fk_agent_config ac = {.host = "127.0.0.1", .port = r->port, .server_name = "server",
                          .tls = tls, .find = find_loadgen, .data = dummy_data,
                          .backoff_max_ms = 1000, .call_ms = 600000};
    fk_net_limits_default(&ac.limits);
    ac.limits.keepalive_timeout_ms = 600000; /* a starved peer is slow, not gone (below) */
    if (fk_agent_start(&r->agents[i], r->loop, &ac, &err))
        _exit(4);
    fk_tls_ctx_unref(tls);
}

static void ramp_tick(uv_timer_t *t)
{
    ramp *r = t->data;
    fk_agent_stats st;
    for (; r->scan < r->started; r->scan++) {
        fk_agent_stats_get(r->agents[r->scan], &st);
        if (!st.joins)
            break;
    }
    int inflight = 0;
    for (int i = r->scan; i < r->started; i++) {
        fk_agent_stats_get(r->agents[i], &st);
        inflight += !st.joins;
    }
    while (r->started < r->n && inflight++ < RAMP_INFLIGHT)
        start_agent(r, r->started++);
    if (r->started == r->n)
        FK_UV_MUST(uv_timer_stop(t));
}

/* Child: n agents on one loop until SIGTERM. */
static void loadgen_main(const char *pki, int port, int n)
{
    fk_log_set_level(FK_LOG_ERROR);
    uv_loop_t loop;
    if (uv_loop_init(&loop))
        _exit(2);
    if (fk_dataset_init(&dummy, 1, 1, 0))
        _exit(2);
    static ramp r;
    r = (ramp){.loop = &loop, .pki = pki, .port = port, .n = n};
    if (!(r.agents = calloc((size_t)n, sizeof *r.agents)))
        _exit(2);
    FK_UV_MUST(uv_timer_init(&loop, &r.timer));
    r.timer.data = &r;
    FK_UV_MUST(uv_timer_start(&r.timer, ramp_tick, 0, 5));
    uv_signal_t sig;
    if (uv_signal_init(&loop, &sig) || uv_signal_start(&sig, on_term, SIGTERM))
        _exit(5); /* without its stop signal the bench could not end this child */
    FK_UV_MUST(uv_run(&loop, UV_RUN_DEFAULT));
    _exit(0); /* the bench ends the load generator; the OS frees it */
}

/* ------------------------------------------------------------ server */

typedef struct run {
    uv_loop_t loop;
    fk_engine *e;
    fk_service *svc;
    fk_grpc_server *srv;
    int64_t job;
    uv_timer_t watch;
    double t_first_task, t_done;
    int done, ok;
} run;

/* Every millisecond: so the check must cost O(1). fk_engine_status parses the job's config
 * (its client list: O(K log K) at K clients), which at 10,000 clients every millisecond was
 * most of the server's CPU; a job leaves the engine's memory when it ends. */
static void watch_job(uv_timer_t *t)
{
    run *r = t->data;
    if (fk_engine_running(r->e) > 0)
        return;
    fk_job_status s;
    fk_err err = {0};
    if (fk_engine_status(r->e, r->job, &s, &err) == FK_OK && s.state != FK_JOB_RUNNING) {
        r->t_done = fk_bench_now();
        r->done = 1;
        r->ok = s.state == FK_JOB_DONE;
        FK_UV_MUST(uv_timer_stop(t));
        uv_stop(&r->loop);
    }
}

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
           (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

/* Bytes this process sent to storage (/proc/self/io write_bytes): SQLite's WAL writes and
 * checkpoints, the only files the server writes here; -1 when the kernel does not say. */
static double disk_bytes(void)
{
    FILE *f = fopen("/proc/self/io", "r");
    char line[128];
    double v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "write_bytes:", 12))
            v = strtod(line + 12, NULL);
    if (f)
        fclose(f);
    return v;
}

/* Peak RSS of this process, MB (getrusage ru_maxrss). */
static double peak_rss_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static double rss_mb(void)
{
    long size = 0, res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &size, &res) != 2)
            res = 0;
        fclose(f);
    }
    return (double)res * (double)sysconf(_SC_PAGESIZE) / 1048576.0;
}

static void noop_closed(void *ud)
{
    (void)ud;
}

static void svc_closed(void *ud)
{
    fk_grpc_server_close(ud, noop_closed, NULL);
}

int fk_bench_wait_sessions(uv_loop_t *loop, fk_service *svc, int n, double limit_s)
{
    fk_service_stats ss;
    double t0 = fk_bench_now();
    do {
        FK_UV_MUST(uv_run(loop, UV_RUN_NOWAIT));
        fk_service_stats_get(svc, &ss);
        if (ss.sessions < n)
            usleep(1000);
    } while (ss.sessions < n && fk_bench_now() - t0 < limit_s);
    return ss.sessions;
}

void fk_bench_service_stop(uv_loop_t *loop, fk_service *svc, fk_grpc_server *srv)
{
    fk_service_close(svc, svc_closed, srv);
    FK_UV_MUST(uv_run(loop, UV_RUN_DEFAULT));
    fk_service_free(svc);
}

/* One configuration: n load-generator clients (a forked process) against the real engine,
 * service and store in this process, `rounds` rounds of dim values each. */
static int bench_n(int n, int rounds, long dim, int full_sync, int json, const char *tmp,
                   const char *pki_dir)
{
    /* a fresh state database per configuration: no run sees another's sessions; a fresh PKI
     * too, unless --pki_dir keeps one per client count (10,000 certificates take minutes) */
    char pki[256], db[256], ca_pem[300];
    snprintf(pki, sizeof pki, "%s/pki-%d-%d", pki_dir ? pki_dir : tmp, n, pki_dir ? 0 : full_sync);
    snprintf(db, sizeof db, "%s/state-%d-%d.db", tmp, n, full_sync);
    snprintf(ca_pem, sizeof ca_pem, "%s/client-l%d.pem", pki, n - 1);
    fk_err err = {0};
    fk_cert_opts so = {.ips = "127.0.0.1"};
    if (pki_dir && access(ca_pem, R_OK) == 0)
        ; /* issued by an earlier run */
    else if (fk_certs_init_ca(pki, NULL, NULL, &err) ||
        fk_certs_issue(pki, FK_ROLE_SERVER, "server", &so, &err))
        return fprintf(stderr, "bench server: %s\n", err.msg), 1;
    for (int i = 0; (!pki_dir || access(ca_pem, R_OK)) && i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "l%d", i);
        if (fk_certs_issue(pki, FK_ROLE_CLIENT, name, NULL, &err))
            return fprintf(stderr, "bench server: %s\n", err.msg), 1;
    }
    /* the server side exactly as fedkern-server wires it: store, engine, TLS, gRPC, service */
    g_clients = n;
    run r;
    memset(&r, 0, sizeof r);
    int uvrc = uv_loop_init(&r.loop);
    if (uvrc)
        return fprintf(stderr, "bench server: uv_loop_init: %s\n", uv_strerror(uvrc)), 1;
    fk_store *st;
    if (fk_store_open(&st, db, &err) || fk_store_set_full_sync(st, full_sync, &err))
        return fprintf(stderr, "bench server: %s\n", err.msg), 1;
    fk_engine_opts eo = {.store = st,
                         .codec = {fk_codec_bundle_encode, fk_codec_bundle_decode},
                         .find = find_loadgen};
    char ca[512], cert[512], key[512];
    snprintf(ca, sizeof ca, "%s/ca.pem", pki);
    snprintf(cert, sizeof cert, "%s/server-server.pem", pki);
    snprintf(key, sizeof key, "%s/server-server.key", pki);
    fk_tls_files tf = {ca, cert, key, NULL, 0};
    fk_tls_ctx *tls;
    fk_grpc_server_config gc = {.drain_ms = 200};
    fk_net_limits_default(&gc.limits);
    /* the load generator answers PINGs late while it builds 10,000 uploads: not a dead peer */
    gc.limits.keepalive_timeout_ms = 600000;
    gc.upload_budget = (uint64_t)g_upload_mb << 20;
    /* Past 2,000 clients one round's uploads keep the shared 2-core machine (server and load
     * generator) busy for longer than a heartbeat's deadline (4 intervals of 5 s): the clients
     * would take their connections for stalled and reconnect, and the bench would measure a
     * storm. 60 s heartbeats (240 s deadline) keep it measuring rounds. */
    fk_service_config sc = {.heartbeat_ms = n > 2000 ? 60000 : 5000, .tick_ms = 50};
    sc.max_message = (uint32_t)gc.limits.max_message;
    if (fk_engine_open(&r.e, &eo, fk_service_now(), &err) || fk_tls_ctx_new(&tls, 1, &tf, &err))
        return fprintf(stderr, "bench server: %s\n", err.msg), 1;
    gc.tls = tls;
    if (fk_grpc_server_init(&r.srv, &r.loop, &gc, &err) ||
        fk_service_init(&r.svc, &r.loop, r.srv, r.e, st, &sc, &err) ||
        fk_grpc_server_listen(r.srv, "127.0.0.1:0", &err))
        return fprintf(stderr, "bench server: %s\n", err.msg), 1;
    fk_tls_ctx_unref(tls);
    double rss_base = rss_mb(); /* the server with no client yet */
    /* the clients in another process, so their CPU is not counted as the server's */
    pid_t child = fork();
    if (child == 0)
        loadgen_main(pki, fk_grpc_server_port(r.srv), n);
    /* Wait until every client joined, so the timing is the rounds only. */
    fk_service_stats ss;
    double t0 = fk_bench_now();
    double join_limit = n > 2000 ? 0.06 * n : 120; /* 10,000 handshakes: up to 10 minutes */
    int joined = fk_bench_wait_sessions(&r.loop, r.svc, n, join_limit);
    double join_s = fk_bench_now() - t0;
    if (joined < n) {
        fprintf(stderr, "bench server: only %d of %d load-generator clients joined in %.0f s\n",
                joined, n, join_s);
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        return 1;
    }
    /* The server's CPU with every client joined and no job (heartbeats, keepalive PINGs, the
     * connections' timers): a cost per client and second, not per update, that a long round
     * at many clients adds to the CPU per update; reported apart and subtracted below. */
    double idle_cpu0 = cpu_seconds(), idle_t0 = fk_bench_now();
    while (fk_bench_now() - idle_t0 < 5.0)
        FK_UV_MUST(uv_run(&r.loop, UV_RUN_ONCE));
    double idle_rate = (cpu_seconds() - idle_cpu0) / (fk_bench_now() - idle_t0);
    /* every client joined and idle: what their sessions cost (TLS, HTTP/2, session state) */
    double rss_joined = rss_mb();
    /* the timed part: one job of `rounds` rounds, the loop runs until watch_job sees it end */
    char conf[256];
    snprintf(conf, sizeof conf,
             "method = loadgen\ndataset = none\nrounds = %d\ndim = %ld\nquorum = 1\n"
             "deadline = 600\nclients = l[0-%d]\n",
             rounds, dim, n - 1);
    double cpu0 = cpu_seconds(), disk0 = disk_bytes();
    fk_service_stats ss0;
    fk_service_stats_get(r.svc, &ss0);
    fk_store_stats st0, st1;
    fk_store_stats_get(st, &st0);
    double t1 = fk_bench_now();
    if (fk_engine_submit(r.e, conf, fk_service_now(), &r.job, &err)) {
        fprintf(stderr, "bench server: %s\n", err.msg);
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        return 1;
    }
    FK_UV_MUST(uv_timer_init(&r.loop, &r.watch));
    r.watch.data = &r;
    FK_UV_MUST(uv_timer_start(&r.watch, watch_job, 1, 1));
    FK_UV_MUST(uv_run(&r.loop, UV_RUN_DEFAULT));
    double wall = r.t_done - t1, cpu = cpu_seconds() - cpu0;
    double disk = disk0 >= 0 ? disk_bytes() - disk0 : NAN;
    /* rows: throughput, where the time went (aggregation vs protocol), cost, group commit */
    fk_engine_stats es;
    fk_engine_stats_get(r.e, &es);
    fk_service_stats_get(r.svc, &ss);
    fk_store_stats_get(st, &st1);
    double payload = (double)rounds * n * (double)dim * 8.0;
    char c[64];
    snprintf(c, sizeof c, "clients=%d dim=%ld sync=%s%s", n, dim,
             full_sync == 2 ? "strict" : full_sync ? "full" : "normal", g_fold ? " fold" : "");
    fk_bench_emit(json, "server", c, "join_all_seconds", join_s, NULL);
    fk_bench_emit(json, "server", c, "rounds_per_second", rounds / wall, NULL);
    fk_bench_emit(json, "server", c, "wall_ms_per_round", 1e3 * wall / rounds, NULL);
    fk_bench_emit(json, "server", c, "aggregation_ms_per_round",
                  1e3 * es.aggregation_seconds / rounds, NULL);
    fk_bench_emit(json, "server", c, "protocol_overhead_ms_per_round",
                  1e3 * (wall - es.aggregation_seconds) / rounds, NULL);
    fk_bench_emit(json, "server", c, "aggregation_GB_per_s",
                  es.aggregation_seconds > 0 ? payload / es.aggregation_seconds / 1e9 : NAN,
                  NULL);
    fk_bench_emit(json, "server", c, "server_cpu_seconds", cpu, NULL);
    fk_bench_emit(json, "server", c, "server_cpu_ms_per_round", 1e3 * cpu / rounds, NULL);
    fk_bench_emit(json, "server", c, "server_rss_MB", rss_mb(), NULL);
    fk_bench_emit(json, "server", c, "server_peak_rss_MB", peak_rss_mb(), NULL);
    /* Memory target (issue 35): peak RSS against the server with no client, plus two models,
     * plus what the joined, idle clients' sessions cost (measured above, in this run). */
    double model_mb = (double)dim * 8.0 / 1048576.0;
    double target = rss_base + 2.0 * model_mb + (rss_joined - rss_base);
    fk_grpc_server_stats gs;
    fk_grpc_server_stats_get(r.srv, &gs);
    fk_bench_emit(json, "server", c, "server_rss_no_clients_MB", rss_base, NULL);
    fk_bench_emit(json, "server", c, "session_cost_KB_per_client",
                  1024.0 * (rss_joined - rss_base) / n, NULL);
    fk_bench_emit(json, "server", c, "model_MB", model_mb, NULL);
    fk_bench_emit(json, "server", c, "peak_rss_target_MB", target, NULL);
    fk_bench_emit(json, "server", c, "peak_rss_over_target", peak_rss_mb() / target, NULL);
    fk_bench_emit(json, "server", c, "upload_budget_MB", (double)g_upload_mb, NULL);
    fk_bench_emit(json, "server", c, "upload_held_peak_MB", (double)gs.upload_peak / 1048576.0,
                  NULL);
    fk_bench_emit(json, "server", c, "uploads_waited", (double)gs.upload_waits, NULL);
    /* per client update: must not grow with the number of clients (no O(K^2) bookkeeping) */
    double upd = ss.committed ? (double)ss.committed : NAN;
    fk_bench_emit(json, "server", c, "server_cpu_ms_per_update", 1e3 * cpu / upd, NULL);
    fk_bench_emit(json, "server", c, "disk_bytes_per_update", disk / upd, NULL);
    fk_bench_emit(json, "server", c, "disk_bytes_per_update_over_payload",
                  disk / upd / ((double)dim * 8.0), NULL);
    fk_bench_emit(json, "server", c, "updates_committed", (double)ss.committed, NULL);
    /* group commit: updates committed per transaction (fsync) */
    fk_bench_emit(json, "server", c, "update_transactions", (double)ss.batches, NULL);
    fk_bench_emit(json, "server", c, "updates_per_transaction",
                  ss.batches ? (double)ss.committed / (double)ss.batches : 0.0, NULL);
    /* The round overhead: from a round's last update to the next round's tasks sent. The
     * engine's part (aggregate, checkpoint, model, next plan and tasks, with their commits:
     * the fsync share under sync=full) and the service's (matching and sending the tasks). */
    double wake = ss.wake_seconds - ss0.wake_seconds;
    fk_bench_emit(json, "server", c, "round_overhead_ms_per_round",
                  1e3 * (es.end_seconds + wake) / rounds, NULL);
    fk_bench_emit(json, "server", c, "round_close_ms_per_round", 1e3 * es.end_seconds / rounds,
                  NULL);
    fk_bench_emit(json, "server", c, "round_close_cpu_ms_per_round",
                  1e3 * es.end_cpu_seconds / rounds, NULL);
    fk_bench_emit(json, "server", c, "round_close_commit_ms_per_round",
                  1e3 * es.end_commit_seconds / rounds, NULL);
    fk_bench_emit(json, "server", c, "task_send_ms_per_round", 1e3 * wake / rounds, NULL);
    fk_bench_emit(json, "server", c, "round_overhead_commit_share",
                  es.end_seconds + wake > 0 ? es.end_commit_seconds / (es.end_seconds + wake)
                                            : NAN,
                  NULL);
    /* every commit of the run (update batches too): where the fsyncs go */
    fk_bench_emit(json, "server", c, "commit_ms_total", 1e3 * (st1.commit_seconds -
                  st0.commit_seconds), NULL);
    fk_bench_emit(json, "server", c, "commits", (double)(st1.commits - st0.commits), NULL);
    /* per update without the round closes (whose aggregation is O(updates x dim) too) */
    fk_bench_emit(json, "server", c, "server_cpu_ms_per_update_outside_close",
                  1e3 * (cpu - es.end_cpu_seconds) / upd, NULL);
    fk_bench_emit(json, "server", c, "idle_cpu_ms_per_s", 1e3 * idle_rate, NULL);
    fk_bench_emit(json, "server", c, "server_cpu_ms_per_update_net_of_idle",
                  1e3 * (cpu - idle_rate * wall) / upd, NULL);
    fk_bench_emit(json, "server", c, "job_ok", r.ok, NULL);
    fflush(stdout);
    /* teardown in the daemon's order: clients gone, handles closed, loop drained, then state */
    kill(child, SIGTERM);
    waitpid(child, NULL, 0);
    uv_close((uv_handle_t *)&r.watch, NULL); /* else uv_loop_close fails and leaks the loop */
    fk_bench_service_stop(&r.loop, r.svc, r.srv);
    fk_engine_close(r.e);
    fk_store_close(st);
    FK_UV_MUST(uv_loop_close(&r.loop));
    return r.ok ? 0 : 1;
}

/* FedAvg alone over n in-memory updates of dim values. */
static void bench_aggregate(int n, long dim, int json)
{
    fk_update *ups = calloc((size_t)n, sizeof *ups);
    double *out = malloc((size_t)dim * sizeof *out);
    if (!ups || !out) {
        free(ups);
        free(out);
        return;
    }
    for (int i = 0; i < n; i++) {
        fk_bundle_init(&ups[i].msg);
        double *w = fk_bundle_add(&ups[i].msg, "w", 1, (uint64_t[]){(uint64_t)dim});
        for (long j = 0; w && j < dim; j++)
            w[j] = (double)((i + j) % 13);
        ups[i].client = i;
        fk_report_init(&ups[i].report);
        ups[i].report.n_samples = 10 + i % 5;
    }
    fk_aggregator a = {.kind = FK_AGG_FEDAVG};
    fk_err err = {0};
    int rc = fk_aggregate_tensor(&a, ups, n, "w", out, (size_t)dim, &err); /* warm */
    int reps = 5;
    double t0 = fk_bench_now();
    for (int r = 0; !rc && r < reps; r++)
        rc = fk_aggregate_tensor(&a, ups, n, "w", out, (size_t)dim, &err);
    double s = (fk_bench_now() - t0) / reps;
    char c[64];
    snprintf(c, sizeof c, "fedavg clients=%d dim=%ld", n, dim);
    if (rc) /* an update without its w (out of memory above): no rate to report */
        fprintf(stderr, "fedkern bench server: aggregation failed: %s\n", err.msg);
    else
        fk_bench_emit(json, "server", c, "aggregation_GB_per_s", (double)n * dim * 8.0 / s / 1e9,
                      NULL);
    for (int i = 0; i < n; i++)
        fk_bundle_close(&ups[i].msg);
    free(ups);
    free(out);
}

int fk_bench_server(int argc, char **argv)
{
    fk_params p;
    fk_params_init(&p);
    fk_err err = {0};
    int rc = fk_params_parse_args(&p, &argc, argv, &err);
    if (rc || fk_params_get(&p, "help")) {
        fprintf(rc ? stderr : stdout,
                "usage: fedkern bench server [--clients 100] [--rounds 5] [--dim 1000]\n"
                "                            [--sync full,normal] [--pki_dir DIR] [--json]\n"
                "                            [--fold 0|1] [--upload_memory_mb 64]\n"
                "--upload_memory_mb: the server's upload budget (net.upload_memory_mb; 0 = none).\n"
                "peak_rss_target_MB = RSS with no client + 2 x model + the joined clients' RSS.\n"
                "--fold 1: the server folds each update into the sum as it reads it (streaming\n"
                "aggregation, O(dim) memory) instead of holding the round's updates.\n"
                "sync=full is the server's setting (every acknowledged update fsync'd; a\n"
                "round's close and the next round's open, computed from those, are not);\n"
                "sync=normal shows the same run without the per-update fsync; sync=strict\n"
                "fsyncs the round closes and opens too (the server before 2026-11-27).\n%s",
                rc ? err.msg : "");
        fk_params_close(&p);
        return rc ? 2 : 0;
    }
    long rounds, dim;
    int json;
    const char *sync = fk_params_str(&p, "sync", "full,normal");
    if (fk_params_int(&p, "rounds", 5, 1, 100000, &rounds, &err) ||
        fk_params_int(&p, "dim", 1000, 1, 1L << 26, &dim, &err) ||
        fk_params_bool(&p, "json", 0, &json, &err) ||
        fk_params_bool(&p, "fold", 0, &g_fold, &err) ||
        fk_params_int(&p, "upload_memory_mb", 64, 0, 1L << 20, &g_upload_mb, &err)) {
        fprintf(stderr, "fedkern bench server: %s\n", err.msg);
        fk_params_close(&p);
        return 2;
    }
    const char *pki_dir = fk_params_str(&p, "pki_dir", NULL);
    char list[256];
    snprintf(list, sizeof list, "%s", fk_params_str(&p, "clients", "100"));
    char tmp[] = "/tmp/fk-bench-server-XXXXXX";
    if (!mkdtemp(tmp)) {
        fk_params_close(&p);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    fk_log_set_level(FK_LOG_ERROR);
    rc = 0;
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        int n = atoi(tok);
        if (n < 1 || n > 20000) {
            fprintf(stderr, "fedkern bench server: --clients entries must be 1..20000\n");
            rc = 2;
            break;
        }
        if (strstr(sync, "strict"))
            rc |= bench_n(n, (int)rounds, dim, 2, json, tmp, pki_dir);
        if (strstr(sync, "full"))
            rc |= bench_n(n, (int)rounds, dim, 1, json, tmp, pki_dir);
        if (strstr(sync, "normal"))
            rc |= bench_n(n, (int)rounds, dim, 0, json, tmp, pki_dir);
        bench_aggregate(n, 100000, json);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd))
        fprintf(stderr, "fedkern bench server: could not remove %s\n", tmp);
    fk_params_close(&p);
    return rc;
}
