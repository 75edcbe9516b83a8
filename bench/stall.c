/* fedkern bench stall: does the server keep answering while a job aggregates? (issue 35)
 *
 * The parent runs the real server pieces (store, round engine, Federation service, gRPC over
 * mutual TLS on 127.0.0.1) with the registry's dica; a forked child runs the job's client
 * agents on dica's built-in data (the `sim_data` op), another a prober that, every --probe_ms,
 * sends one grpc.health.v1 Check and one JobStatus (as an admin), each once the previous one
 * of its kind was answered, and records how long each took. One dica job with R random
 * frequencies: the server solves a 2R x 2R eigenproblem in its aggregation. Reported per mode,
 * over the calls sent while the job ran: p50, p99 and max latency of each kind, the calls and
 * the failed ones, the job's wall and aggregation seconds.
 *
 * Modes: offload (the server: aggregation on a worker thread) and inline (the server before
 * issue 35: the engine without an offload, so the aggregation runs on the loop), in the same
 * run, so the rows compare on the same machine load. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "bench/bench.h"
#include "client/agent.h"
#include "common/base/log.h"
#include "common/base/params.h"
#include "common/base/uvcheck.h"
#include "common/methods/dica/dica_job.h"
#include "common/net/certs.h"
#include "common/net/codec.h"
#include "common/net/grpc_client.h"
#include "fedkern.pb.h"
#include "health.pb.h"
#include "server/engine.h"
#include "server/service.h"

enum { MAX_CLIENTS = 16, MAX_PROBES = 1 << 16 };

static void on_term(uv_signal_t *s, int signum)
{
    (void)signum;
    uv_stop(s->loop);
}

static int term_on(uv_loop_t *loop, uv_signal_t *sig)
{
    return uv_signal_init(loop, sig) || uv_signal_start(sig, on_term, SIGTERM);
}

static fk_tls_ctx *tls_of(const char *pki, const char *role, const char *name)
{
    char ca[512], cert[512], key[512];
    snprintf(ca, sizeof ca, "%s/ca.pem", pki);
    snprintf(cert, sizeof cert, "%s/%s-%s.pem", pki, role, name);
    snprintf(key, sizeof key, "%s/%s-%s.key", pki, role, name);
    fk_tls_files f = {ca, cert, key, NULL, 0};
    fk_tls_ctx *tls;
    fk_err err;
    if (fk_tls_ctx_new(&tls, !strcmp(role, "server"), &f, &err)) {
        fprintf(stderr, "bench stall: %s\n", err.msg);
        return NULL;
    }
    return tls;
}

/* ------------------------------------------------------------ clients */

static const fk_dataset *data_of(void *ud, const char *name, fk_err *err)
{
    (void)name;
    (void)err;
    return ud;
}

/* Child: the job's clients on dica's built-in data, until SIGTERM. */
static void clients_main(const char *pki, int port, int n, const fk_params *jp, uint64_t seed)
{
    fk_log_set_level(FK_LOG_ERROR);
    uv_loop_t loop;
    static fk_dataset data[MAX_CLIENTS];
    static fk_agent *agents[MAX_CLIENTS];
    fk_err err;
    if (uv_loop_init(&loop) || fk_method_dica.sim_data(jp, n, seed, data, NULL, &err))
        _exit(2);
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "d%d", i);
        fk_tls_ctx *tls = tls_of(pki, "client", name);
        if (!tls)
            _exit(3);
        fk_agent_config ac = {.host = "127.0.0.1",
                              .port = port,
                              .server_name = "server",
                              .tls = tls,
                              .data = data_of,
                              .data_ud = &data[i],
                              .backoff_max_ms = 1000,
                              .call_ms = 600000};
        fk_net_limits_default(&ac.limits);
        if (fk_agent_start(&agents[i], &loop, &ac, &err))
            _exit(4);
        fk_tls_ctx_unref(tls);
    }
    uv_signal_t sig;
    if (term_on(&loop, &sig))
        _exit(5);
    FK_UV_MUST(uv_run(&loop, UV_RUN_DEFAULT));
    _exit(0); /* the OS frees the agents */
}

/* ------------------------------------------------------------- prober */

typedef struct probe {
    double sent, took; /* wall clock of the send, seconds it took */
    int status;
} probe;

typedef struct kind {
    struct prober *p;
    const char *path;
    uint8_t *req;
    size_t len;
    int busy;
    double t0;
    probe *rec;
    int n;
} kind;

typedef struct prober {
    fk_grpc_client *cl;
    kind k[2]; /* health, status */
} prober;

static void probe_done(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    (void)msg, (void)resp, (void)len;
    kind *k = ud;
    k->busy = 0;
    if (k->n < MAX_PROBES)
        k->rec[k->n++] = (probe){.sent = k->t0, .took = fk_service_now() - k->t0, .status = status};
}

static void probe_tick(uv_timer_t *t)
{
    prober *p = t->data;
    for (int i = 0; i < 2; i++) {
        kind *k = &p->k[i];
        if (k->busy)
            continue; /* one call of a kind at a time, as a health checker */
        k->busy = 1;
        k->t0 = fk_service_now();
        (void)fk_grpc_client_call(p->cl, k->path, k->req, k->len, 30000, probe_done, k);
    }
}

/* Child: probe every probe_ms until SIGTERM, then write "kind sent took status" lines. */
static void prober_main(const char *pki, int port, long probe_ms, const char *out)
{
    fk_log_set_level(FK_LOG_ERROR);
    uv_loop_t loop;
    fk_err err;
    static prober p;
    fk_tls_ctx *tls = tls_of(pki, "admin", "op");
    if (uv_loop_init(&loop) || !tls)
        _exit(2);
    fk_grpc_client_config cc = {.tls = tls};
    fk_net_limits_default(&cc.limits);
    if (fk_grpc_client_connect(&p.cl, &loop, &cc, "127.0.0.1", port, "server", NULL, NULL, &err))
        _exit(3);
    fk_tls_ctx_unref(tls);
    grpc_health_v1_HealthCheckRequest hr = grpc_health_v1_HealthCheckRequest_init_zero;
    fedkern_v1_JobStatusRequest sr = fedkern_v1_JobStatusRequest_init_zero;
    snprintf(sr.job_id, sizeof sr.job_id, "1");
    p.k[0].path = "/grpc.health.v1.Health/Check";
    p.k[1].path = "/fedkern.v1.Federation/JobStatus";
    if (fk_codec_encode(grpc_health_v1_HealthCheckRequest_fields, &hr, 0, &p.k[0].req, &p.k[0].len,
                        &err) ||
        fk_codec_encode(fedkern_v1_JobStatusRequest_fields, &sr, 0, &p.k[1].req, &p.k[1].len, &err))
        _exit(4);
    for (int i = 0; i < 2; i++) {
        p.k[i].p = &p;
        if (!(p.k[i].rec = calloc(MAX_PROBES, sizeof *p.k[i].rec)))
            _exit(2);
    }
    uv_timer_t timer;
    uv_signal_t sig;
    FK_UV_MUST(uv_timer_init(&loop, &timer));
    timer.data = &p;
    FK_UV_MUST(uv_timer_start(&timer, probe_tick, 0, (uint64_t)probe_ms));
    if (term_on(&loop, &sig))
        _exit(5);
    FK_UV_MUST(uv_run(&loop, UV_RUN_DEFAULT));
    FILE *f = fopen(out, "w");
    for (int i = 0; f && i < 2; i++) {
        for (int j = 0; j < p.k[i].n; j++)
            fprintf(f, "%d %.6f %.6f %d\n", i, p.k[i].rec[j].sent, p.k[i].rec[j].took,
                    p.k[i].rec[j].status);
        if (p.k[i].busy) /* still unanswered at the end: its wait so far, a failure */
            fprintf(f, "%d %.6f %.6f %d\n", i, p.k[i].t0, fk_service_now() - p.k[i].t0, -1);
    }
    _exit(f && fclose(f) == 0 ? 0 : 6);
}

/* ------------------------------------------------------------- server */

typedef struct srv {
    uv_loop_t loop;
    fk_engine *e;
    fk_service *svc;
    fk_grpc_server *gs;
    int64_t job;
    int done, ok;
    double t_done;
    uv_timer_t watch;
} srv;

static void watch_job(uv_timer_t *t)
{
    srv *r = t->data;
    if (fk_engine_running(r->e) > 0)
        return;
    r->t_done = fk_service_now();
    fk_job_status s;
    fk_err err;
    r->ok = fk_engine_status(r->e, r->job, &s, &err) == FK_OK && s.state == FK_JOB_DONE;
    r->done = 1;
    FK_UV_MUST(uv_timer_stop(t));
    uv_stop(&r->loop);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* p50, p99, max (ms) of the calls of kind `which` sent in [t0, t1]; calls and failures. */
static void summarise(const char *file, int which, double t0, double t1, double *q, int *calls,
                      int *failed)
{
    FILE *f = fopen(file, "r");
    double *v = malloc(MAX_PROBES * sizeof *v);
    int n = 0, kind, status;
    double sent, took;
    *failed = 0;
    while (f && v && n < MAX_PROBES &&
           fscanf(f, "%d %lf %lf %d", &kind, &sent, &took, &status) == 4)
        if (kind == which && sent >= t0 && sent <= t1) {
            v[n++] = 1e3 * took;
            *failed += status != 0;
        }
    if (f)
        fclose(f);
    *calls = n;
    if (n && v) {
        qsort(v, (size_t)n, sizeof *v, cmp_double);
        q[0] = v[(size_t)(0.50 * (n - 1))];
        q[1] = v[(size_t)ceil(0.99 * (n - 1))];
        q[2] = v[n - 1];
    } else {
        q[0] = q[1] = q[2] = NAN;
    }
    free(v);
}

/* One job in one mode; 0 = rows printed. */
static int bench_mode(int offload, int n, long R, long probe_ms, int json, const char *tmp)
{
    char pki[300], db[300], out[300];
    snprintf(pki, sizeof pki, "%s/pki", tmp);
    snprintf(db, sizeof db, "%s/state-%d.db", tmp, offload);
    snprintf(out, sizeof out, "%s/probes-%d.txt", tmp, offload);
    fk_err err;
    srv r;
    memset(&r, 0, sizeof r);
    if (uv_loop_init(&r.loop))
        return 1;
    fk_store *st;
    if (fk_store_open(&st, db, &err))
        return fprintf(stderr, "bench stall: %s\n", err.msg), 1;
    fk_engine_opts eo = {.store = st,
                         .codec = {fk_codec_bundle_encode, fk_codec_bundle_decode},
                         .max_update = FK_SERVICE_REASM_DEFAULT};
    fk_grpc_server_config gc = {.drain_ms = 200};
    fk_net_limits_default(&gc.limits);
    fk_service_config sc = {.heartbeat_ms = 5000, .tick_ms = 200};
    sc.max_message = (uint32_t)gc.limits.max_message;
    fk_tls_ctx *tls = tls_of(pki, "server", "server");
    char *admins[] = {"op"};
    sc.admins = admins;
    sc.n_admins = 1;
    if (!tls || fk_engine_open(&r.e, &eo, fk_service_now(), &err) ||
        fk_grpc_server_init(&r.gs, &r.loop, (gc.tls = tls, &gc), &err) ||
        fk_service_init(&r.svc, &r.loop, r.gs, r.e, st, &sc, &err) ||
        fk_grpc_server_listen(r.gs, "127.0.0.1:0", &err))
        return fprintf(stderr, "bench stall: %s\n", err.msg), 1;
    fk_tls_ctx_unref(tls);
    if (!offload) /* the server before issue 35: every phase close on the loop */
        fk_engine_set_offload(r.e, NULL, NULL);
    char conf[512];
    int w = snprintf(conf, sizeof conf,
                     "method = dica\ndataset = sim\nR = %ld\nseed = 3\nquorum = 1\n"
                     "deadline = 3600\nclients = d[0-%d]\n",
                     R, n - 1);
    fk_params jp; /* sim_data's keys (sim_n, sim_d, task): its defaults */
    fk_params_init(&jp);
    if (w < 0 || (size_t)w >= sizeof conf)
        return 1;
    int port = fk_grpc_server_port(r.gs);
    pid_t kids[2];
    if ((kids[0] = fork()) == 0)
        clients_main(pki, port, n, &jp, 3);
    if ((kids[1] = fork()) == 0)
        prober_main(pki, port, probe_ms, out);
    fk_params_close(&jp);
    /* every client joined before the job starts */
    int joined = fk_bench_wait_sessions(&r.loop, r.svc, n, 60);
    int rc = joined < n;
    if (rc)
        fprintf(stderr, "bench stall: only %d of %d clients joined\n", joined, n);
    double t_submit = fk_service_now();
    if (!rc && (rc = fk_engine_submit(r.e, conf, t_submit, &r.job, &err)))
        fprintf(stderr, "bench stall: %s\n", err.msg);
    if (!rc) {
        FK_UV_MUST(uv_timer_init(&r.loop, &r.watch));
        r.watch.data = &r;
        FK_UV_MUST(uv_timer_start(&r.watch, watch_job, 5, 5));
        FK_UV_MUST(uv_run(&r.loop, UV_RUN_DEFAULT));
        uv_close((uv_handle_t *)&r.watch, NULL);
    }
    for (int i = 0; i < 2; i++) {
        kill(kids[i], SIGTERM);
        /* the server keeps answering the prober's last call while it writes its file */
        int status;
        while (waitpid(kids[i], &status, WNOHANG) == 0) {
            FK_UV_MUST(uv_run(&r.loop, UV_RUN_NOWAIT));
            usleep(1000);
        }
    }
    fk_engine_stats es;
    fk_engine_stats_get(r.e, &es);
    if (!rc) {
        char c[96];
        snprintf(c, sizeof c, "mode=%s R=%ld clients=%d probe_ms=%ld",
                 offload ? "offload" : "inline", R, n, probe_ms);
        static const char *const kinds[2] = {"health", "status"};
        for (int k = 0; k < 2; k++) {
            double q[3];
            int calls, failed;
            char m[64];
            summarise(out, k, t_submit, r.t_done, q, &calls, &failed);
            snprintf(m, sizeof m, "%s_p50_ms", kinds[k]);
            fk_bench_emit(json, "stall", c, m, q[0], NULL);
            snprintf(m, sizeof m, "%s_p99_ms", kinds[k]);
            fk_bench_emit(json, "stall", c, m, q[1], NULL);
            snprintf(m, sizeof m, "%s_max_ms", kinds[k]);
            fk_bench_emit(json, "stall", c, m, q[2], NULL);
            snprintf(m, sizeof m, "%s_calls", kinds[k]);
            fk_bench_emit(json, "stall", c, m, calls, NULL);
            snprintf(m, sizeof m, "%s_failed", kinds[k]);
            fk_bench_emit(json, "stall", c, m, failed, NULL);
        }
        fk_bench_emit(json, "stall", c, "job_seconds", r.t_done - t_submit, NULL);
        /* the phase close: aggregate, solves, checkpoint and model encode, their commit */
        fk_bench_emit(json, "stall", c, "close_seconds", es.end_seconds, NULL);
        fk_bench_emit(json, "stall", c, "job_ok", r.ok, NULL);
        fflush(stdout);
    }
    fk_bench_service_stop(&r.loop, r.svc, r.gs);
    fk_engine_close(r.e);
    fk_store_close(st);
    FK_UV_MUST(uv_loop_close(&r.loop));
    return rc || !r.ok;
}

int fk_bench_stall(int argc, char **argv)
{
    fk_params p;
    fk_params_init(&p);
    fk_err err;
    int rc = fk_params_parse_args(&p, &argc, argv, &err);
    if (rc || fk_params_get(&p, "help")) {
        fprintf(rc ? stderr : stdout,
                "usage: fedkern bench stall [--R 1000] [--clients 3] [--probe_ms 100]\n"
                "                           [--modes offload,inline] [--json]\n"
                "One dica job (the server solves a 2R x 2R eigenproblem) while a prober sends a\n"
                "health Check and a JobStatus every probe_ms: their p50/p99/max latency and\n"
                "failures while the job ran, with the aggregation on a worker thread (offload,\n"
                "the server) and on the event loop (inline, the server before issue 35).\n%s",
                rc ? err.msg : "");
        fk_params_close(&p);
        return rc ? 2 : 0;
    }
    long R, n, probe_ms;
    int json;
    if (fk_params_int(&p, "R", 1000, 1, 100000, &R, &err) ||
        fk_params_int(&p, "clients", 3, 2, MAX_CLIENTS, &n, &err) ||
        fk_params_int(&p, "probe_ms", 100, 1, 60000, &probe_ms, &err) ||
        fk_params_bool(&p, "json", 0, &json, &err)) {
        fprintf(stderr, "fedkern bench stall: %s\n", err.msg);
        fk_params_close(&p);
        return 2;
    }
    const char *modes = fk_params_str(&p, "modes", "offload,inline");
    char tmp[] = "/tmp/fk-bench-stall-XXXXXX";
    if (!mkdtemp(tmp)) {
        fk_params_close(&p);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    fk_log_set_level(FK_LOG_ERROR);
    char pki[300];
    snprintf(pki, sizeof pki, "%s/pki", tmp);
    fk_cert_opts so = {.ips = "127.0.0.1"};
    rc = fk_certs_init_ca(pki, NULL, NULL, &err) ||
         fk_certs_issue(pki, FK_ROLE_SERVER, "server", &so, &err) ||
         fk_certs_issue(pki, FK_ROLE_ADMIN, "op", NULL, &err);
    for (int i = 0; !rc && i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "d%d", i);
        rc = fk_certs_issue(pki, FK_ROLE_CLIENT, name, NULL, &err);
    }
    if (rc)
        fprintf(stderr, "fedkern bench stall: %s\n", err.msg);
    if (!rc && strstr(modes, "offload"))
        rc |= bench_mode(1, (int)n, R, probe_ms, json, tmp);
    if (!rc && strstr(modes, "inline"))
        rc |= bench_mode(0, (int)n, R, probe_ms, json, tmp);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd))
        fprintf(stderr, "fedkern bench stall: could not remove %s\n", tmp);
    fk_params_close(&p);
    return rc;
}
