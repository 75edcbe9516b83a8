/* fedkern bench kahm serve: kahm mode-B prediction latency through the real server and
 * client agents (spec: "prediction latency through the daemons in mode B for a 1,000-query
 * batch over 100 clients").
 *
 * This process runs the server pieces as fedkern-server wires them (store, engine, service,
 * gRPC over mutual TLS on 127.0.0.1) and an admin gRPC client on the same loop; a forked
 * process runs the N client agents (the real kahm method, synthetic labelled data, each
 * client holding two of the C classes) on one loop. One kahm job (mode B: the models stay on
 * the clients) is trained, then timed: `reps` Predict calls of a `queries`-row batch (every
 * call fans out to all N clients, each answers its class distances, the server takes the
 * minimum, eq. 63), and `single` calls of one query each. Reported: p50/p99/mean latency of a
 * call, queries/s, the accuracy of the answers and the fewest clients that answered a call.
 * All N agents share one process (and this machine's cores), so a call's latency includes
 * every client's work done in turn: an upper bound for N separate machines. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "bench/bench.h"
#include "bench/kahm/kahm_bench.h"
#include "client/agent.h"
#include "common/base/log.h"
#include "common/base/params.h"
#include "common/base/uvcheck.h"
#include "common/la/rng.h"
#include "common/net/certs.h"
#include "common/net/codec.h"
#include "common/net/grpc_client.h"
#include "server/engine.h"
#include "server/service.h"

enum { C = 10, PER_CLASS = 40 };

typedef struct opts {
    long clients, queries, dim, reps, single;
    int json;
} opts;

/* Class means: C normal vectors (seed 1); a sample of class c is its mean plus N(0, 1.5^2). */
static double *class_means(long dim)
{
    double *mu = malloc((size_t)C * (size_t)dim * sizeof *mu);
    fk_rng r;
    fk_rng_init(&r, 1, 0);
    for (long i = 0; mu && i < C * dim; i++)
        mu[i] = fk_rng_normal(&r);
    return mu;
}

/* n rows of the given classes (cls[i % ncls]) from stream `stream`, labelled with the class. */
FK_CHECKRETURN static int make_rows(fk_dataset *d, const double *mu, long dim, const int *cls,
                                    int ncls, size_t n, uint64_t stream, fk_err *err)
{
    if (fk_dataset_init(d, n, (size_t)dim, 1))
        return fk_err_set(err, FK_ENOMEM, "bench kahm serve: out of memory");
    double *raw = malloc((n ? n : 1) * sizeof *raw);
    if (!raw)
        return fk_err_set(err, FK_ENOMEM, "bench kahm serve: out of memory");
    fk_rng r;
    fk_rng_init(&r, 2, stream);
    for (size_t i = 0; i < n; i++) {
        int c = cls[i % (size_t)ncls];
        raw[i] = c;
        for (long j = 0; j < dim; j++)
            d->X.data[i * d->X.ld + (size_t)j] = mu[c * dim + j] + 1.5 * fk_rng_normal(&r);
    }
    int rc = fk_dataset_set_labels(d, raw, err);
    free(raw);
    return rc;
}

/* ------------------------------------------------------------ clients */

static const fk_dataset *client_data(void *ud, const char *name, fk_err *err)
{
    (void)name;
    (void)err;
    return ud;
}

static void on_term(uv_signal_t *s, int signum)
{
    (void)signum;
    uv_stop(s->loop);
}

/* Child: n agents on one loop until SIGTERM; client k holds classes k % C and (k + 1 + k / C)
 * % C (distinct), PER_CLASS samples each. */
static void clients_main(const char *pki, int port, const opts *o)
{
    fk_log_set_level(FK_LOG_ERROR);
    uv_loop_t loop;
    double *mu = class_means(o->dim);
    fk_dataset *ds = calloc((size_t)o->clients, sizeof *ds);
    fk_agent **agents = calloc((size_t)o->clients, sizeof *agents);
    if (uv_loop_init(&loop) || !mu || !ds || !agents)
        _exit(2);
    for (long k = 0; k < o->clients; k++) {
        int cls[2] = {(int)(k % C), (int)((k + 1 + k / C) % C)};
        if (cls[1] == cls[0])
            cls[1] = (cls[0] + 1) % C;
        fk_err err = {0};
        if (make_rows(&ds[k], mu, o->dim, cls, 2, 2 * PER_CLASS, 100 + (uint64_t)k, &err))
            _exit(3);
        char ca[512], cert[512], key[512];
        snprintf(ca, sizeof ca, "%s/ca.pem", pki);
        snprintf(cert, sizeof cert, "%s/client-s%ld.pem", pki, k);
        snprintf(key, sizeof key, "%s/client-s%ld.key", pki, k);
        fk_tls_files f = {ca, cert, key, NULL, 0};
        fk_tls_ctx *tls;
        if (fk_tls_ctx_new(&tls, 0, &f, &err))
            _exit(3);
        fk_agent_config ac = {.host = "127.0.0.1", .port = port, .server_name = "server",
                              .tls = tls, .data = client_data, .data_ud = &ds[k],
                              .backoff_max_ms = 1000};
        fk_net_limits_default(&ac.limits);
        ac.limits.max_message = 64u << 20;
        if (fk_agent_start(&agents[k], &loop, &ac, &err))
            _exit(4);
        fk_tls_ctx_unref(tls);
    }
    uv_signal_t sig;
    if (uv_signal_init(&loop, &sig) || uv_signal_start(&sig, on_term, SIGTERM))
        _exit(5);
    FK_UV_MUST(uv_run(&loop, UV_RUN_DEFAULT));
    _exit(0); /* the bench ends this process; the OS frees it */
}

/* ------------------------------------------------------------- server */

typedef struct run {
    uv_loop_t loop;
    fk_engine *e;
    fk_service *svc;
    fk_grpc_server *srv;
    fk_grpc_client *admin;
    int admin_down;
    /* the call in progress */
    int done, status;
    uint8_t *resp;
    size_t resp_len;
} run;

static void admin_state(fk_grpc_client *cl, int up, const char *why, void *ud)
{
    (void)cl;
    (void)why;
    run *r = ud;
    if (!up)
        r->admin_down = 1;
}

static void call_done(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    run *r = ud;
    r->done = 1;
    r->status = status;
    free(r->resp);
    r->resp = NULL;
    r->resp_len = 0;
    if (status == FK_GRPC_OK && (r->resp = malloc(len ? len : 1))) {
        memcpy(r->resp, resp, len);
        r->resp_len = len;
    } else if (status != FK_GRPC_OK) {
        fprintf(stderr, "bench kahm serve: Predict: %s: %s\n", fk_grpc_status_name(status), msg);
    }
}

/* Run the loop until the job leaves RUNNING (or `seconds` pass): 1 if it is DONE. */
static int wait_job(run *r, int64_t job, double seconds)
{
    double t0 = fk_bench_now();
    fk_job_status s;
    fk_err err = {0};
    while (fk_bench_now() - t0 < seconds) {
        FK_UV_MUST(uv_run(&r->loop, UV_RUN_NOWAIT));
        if (fk_engine_status(r->e, job, &s, &err) == FK_OK && s.state != FK_JOB_RUNNING)
            return s.state == FK_JOB_DONE;
        usleep(1000);
    }
    return 0;
}

/* One Predict call of rows [r0, r0 + n) of Q: its wall time, the hits against Q's labels and
 * how many clients answered (all asked minus missing). FK_OK or a failure. */
FK_CHECKRETURN static int predict(run *r, int64_t job, const fk_dataset *Q, size_t r0, size_t n,
                                  long clients, double *seconds, size_t *hits, long *answered,
                                  fk_err *err)
{
    fk_bundle q, res;
    fk_bundle_init(&q);
    fk_bundle_init(&res);
    fedkern_v1_PredictRequest in = fedkern_v1_PredictRequest_init_zero;
    snprintf(in.job_id, sizeof in.job_id, "%lld", (long long)job);
    in.timeout_ms = 60000;
    fk_codec_tx tx = {.bundle = &q};
    uint8_t *buf = NULL;
    size_t len = 0;
    int rc = fk_bundle_put(&q, "X", 2, (uint64_t[]){n, Q->X.cols}, Q->X.data + r0 * Q->X.ld)
                 ? fk_err_set(err, FK_ENOMEM, "out of memory")
                 : fk_codec_encode_predict_request(&in, &tx, &buf, &len, err);
    if (!rc) {
        r->done = 0;
        double t0 = fk_bench_now();
        (void)fk_grpc_client_call(r->admin, "/fedkern.v1.Federation/Predict", buf, len, 90000,
                                  call_done, r);
        while (!r->done && uv_run(&r->loop, UV_RUN_ONCE))
            ;
        *seconds = fk_bench_now() - t0;
        if (!r->done || r->status != FK_GRPC_OK)
            rc = fk_err_set(err, FK_ENET, "bench kahm serve: the Predict call failed");
    }
    fedkern_v1_PredictResponse out;
    if (!rc)
        rc = fk_codec_decode_predict_response(r->resp, r->resp_len, &out, &res, err);
    const fk_tensor *lab = rc ? NULL : fk_bundle_get(&res, "labels");
    const fk_tensor *miss = rc ? NULL : fk_bundle_get(&res, "missing_clients");
    if (!rc && (!lab || lab->len != n))
        rc = fk_err_set(err, FK_EFORMAT, "bench kahm serve: no labels for the %zu queries", n);
    if (!rc) {
        *hits = 0;
        for (size_t i = 0; i < n; i++)
            *hits += lab->data[i] == Q->classes[Q->y[r0 + i]];
        *answered = clients - (long)(miss ? miss->len : 0);
    }
    free(buf);
    fk_bundle_close(&q);
    fk_bundle_close(&res);
    return rc;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v[0..n). */
static double pct(const double *v, size_t n, double p)
{
    size_t k = (size_t)ceil(p / 100.0 * (double)n);
    return v[k ? k - 1 : 0];
}

/* The timed calls of one kind (n_calls of `rows` queries each, consecutive rows of Q). */
static int timed(run *r, int64_t job, const fk_dataset *Q, long calls, size_t rows,
                 const opts *o, const char *kind)
{
    double *lat = malloc((size_t)calls * sizeof *lat);
    if (!lat)
        return 1;
    size_t hits = 0, total = 0;
    long fewest = o->clients;
    fk_err err = {0};
    double sum = 0;
    for (long i = 0; i < calls; i++) {
        size_t r0 = ((size_t)i * rows) % (Q->X.rows - rows + 1), h;
        long ans;
        if (predict(r, job, Q, r0, rows, o->clients, &lat[i], &h, &ans, &err)) {
            fprintf(stderr, "bench kahm serve: %s\n", err.msg);
            free(lat);
            return 1;
        }
        hits += h;
        total += rows;
        sum += lat[i];
        fewest = ans < fewest ? ans : fewest;
    }
    qsort(lat, (size_t)calls, sizeof *lat, cmp_double);
    char c[128];
    snprintf(c, sizeof c, "%s clients=%ld queries_per_call=%zu dim=%ld calls=%ld", kind,
             o->clients, rows, o->dim, calls);
    fk_bench_emit(o->json, "kahm serve", c, "latency_p50_ms", 1e3 * pct(lat, (size_t)calls, 50),
                  NULL);
    fk_bench_emit(o->json, "kahm serve", c, "latency_p99_ms", 1e3 * pct(lat, (size_t)calls, 99),
                  NULL);
    fk_bench_emit(o->json, "kahm serve", c, "latency_mean_ms", 1e3 * sum / (double)calls, NULL);
    fk_bench_emit(o->json, "kahm serve", c, "queries_per_s", (double)total / sum, NULL);
    fk_bench_emit(o->json, "kahm serve", c, "accuracy", (double)hits / (double)total, NULL);
    fk_bench_emit(o->json, "kahm serve", c, "fewest_clients_answering", (double)fewest, NULL);
    free(lat);
    return 0;
}

static void noop_closed(void *ud)
{
    (void)ud;
}

static void svc_closed(void *ud)
{
    run *r = ud;
    fk_grpc_server_close(r->srv, noop_closed, NULL);
}

static int serve(const opts *o, const char *tmp)
{
    char pki[256], db[256];
    snprintf(pki, sizeof pki, "%s/pki", tmp);
    snprintf(db, sizeof db, "%s/state.db", tmp);
    fk_err err = {0};
    fk_cert_opts so = {.ips = "127.0.0.1"};
    if (fk_certs_init_ca(pki, NULL, NULL, &err) ||
        fk_certs_issue(pki, FK_ROLE_SERVER, "server", &so, &err) ||
        fk_certs_issue(pki, FK_ROLE_ADMIN, "op", NULL, &err))
        return fprintf(stderr, "bench kahm serve: %s\n", err.msg), 1;
    for (long k = 0; k < o->clients; k++) {
        char name[32];
        snprintf(name, sizeof name, "s%ld", k);
        if (fk_certs_issue(pki, FK_ROLE_CLIENT, name, NULL, &err))
            return fprintf(stderr, "bench kahm serve: %s\n", err.msg), 1;
    }
    /* the queries: held-out rows of all C classes, labelled */
    double *mu = class_means(o->dim);
    fk_dataset Q = {0};
    int all[C];
    for (int c = 0; c < C; c++)
        all[c] = c;
    if (!mu || make_rows(&Q, mu, o->dim, all, C, (size_t)o->queries, 7, &err)) {
        free(mu);
        fk_dataset_close(&Q);
        return fprintf(stderr, "bench kahm serve: %s\n", mu ? err.msg : "out of memory"), 1;
    }
    free(mu);
    /* the server side as fedkern-server wires it, with 64 MiB messages (a batch of queries) */
    run r;
    memset(&r, 0, sizeof r);
    fk_store *st;
    int uvrc = uv_loop_init(&r.loop);
    if (uvrc || fk_store_open(&st, db, &err)) {
        fk_dataset_close(&Q);
        return fprintf(stderr, "bench kahm serve: %s\n", uvrc ? uv_strerror(uvrc) : err.msg), 1;
    }
    fk_engine_opts eo = {.store = st, .codec = {fk_codec_bundle_encode, fk_codec_bundle_decode}};
    char ca[512], cert[512], key[512], acert[512], akey[512];
    snprintf(ca, sizeof ca, "%s/ca.pem", pki);
    snprintf(cert, sizeof cert, "%s/server-server.pem", pki);
    snprintf(key, sizeof key, "%s/server-server.key", pki);
    snprintf(acert, sizeof acert, "%s/admin-op.pem", pki);
    snprintf(akey, sizeof akey, "%s/admin-op.key", pki);
    fk_tls_files tf = {ca, cert, key, NULL, 0}, af = {ca, acert, akey, NULL, 0};
    fk_tls_ctx *tls, *atls;
    fk_grpc_server_config gc = {.drain_ms = 200};
    fk_net_limits_default(&gc.limits);
    gc.limits.max_message = 64u << 20;
    gc.limits.max_conn_memory = 256u << 20;
    fk_service_config sc = {.heartbeat_ms = 5000, .tick_ms = 20};
    sc.max_message = (uint32_t)gc.limits.max_message;
    if (fk_engine_open(&r.e, &eo, fk_service_now(), &err) || fk_tls_ctx_new(&tls, 1, &tf, &err) ||
        fk_tls_ctx_new(&atls, 0, &af, &err))
        return fprintf(stderr, "bench kahm serve: %s\n", err.msg), 1;
    gc.tls = tls;
    if (fk_grpc_server_init(&r.srv, &r.loop, &gc, &err) ||
        fk_service_init(&r.svc, &r.loop, r.srv, r.e, st, &sc, &err) ||
        fk_grpc_server_listen(r.srv, "127.0.0.1:0", &err))
        return fprintf(stderr, "bench kahm serve: %s\n", err.msg), 1;
    fk_tls_ctx_unref(tls);
    int port = fk_grpc_server_port(r.srv);
    pid_t child = fork();
    if (child == 0)
        clients_main(pki, port, o);
    fk_grpc_client_config cc = {.tls = atls};
    fk_net_limits_default(&cc.limits);
    cc.limits.max_message = 64u << 20;
    int rc = fk_grpc_client_connect(&r.admin, &r.loop, &cc, "127.0.0.1", port, "server",
                                    admin_state, &r, &err);
    fk_tls_ctx_unref(atls);
    if (rc)
        fprintf(stderr, "bench kahm serve: %s\n", err.msg);
    /* every client joined, then the job (mode B) trains: not timed as serving */
    fk_service_stats ss;
    double t0 = fk_bench_now();
    do {
        FK_UV_MUST(uv_run(&r.loop, UV_RUN_NOWAIT));
        fk_service_stats_get(r.svc, &ss);
        if (ss.sessions < o->clients)
            usleep(1000);
    } while (!rc && ss.sessions < o->clients && fk_bench_now() - t0 < 120);
    if (!rc && ss.sessions < o->clients) {
        fprintf(stderr, "bench kahm serve: only %d of %ld clients joined\n", ss.sessions,
                o->clients);
        rc = 1;
    }
    int64_t job = 0;
    char conf[512];
    snprintf(conf, sizeof conf,
             "method = kahm\ndataset = d\nclasses = %d\nseed = 3\nquorum = 1\ndeadline = 300\n"
             "clients = s[0-%ld]\n",
             C, o->clients - 1);
    double t1 = fk_bench_now();
    if (!rc && fk_engine_submit(r.e, conf, fk_service_now(), &job, &err)) {
        fprintf(stderr, "bench kahm serve: %s\n", err.msg);
        rc = 1;
    }
    if (!rc && !wait_job(&r, job, 300)) {
        fprintf(stderr, "bench kahm serve: the kahm job did not finish\n");
        rc = 1;
    }
    if (!rc) {
        char c[96];
        snprintf(c, sizeof c, "train clients=%ld dim=%ld", o->clients, o->dim);
        fk_bench_emit(o->json, "kahm serve", c, "join_seconds", t1 - t0, NULL);
        fk_bench_emit(o->json, "kahm serve", c, "round1_fit_seconds", fk_bench_now() - t1, NULL);
        /* warm-up call (connections, thread pools), then the timed calls */
        double s;
        size_t h;
        long a;
        rc = predict(&r, job, &Q, 0, 1, o->clients, &s, &h, &a, &err);
        if (rc)
            fprintf(stderr, "bench kahm serve: %s\n", err.msg);
    }
    if (!rc)
        rc = timed(&r, job, &Q, o->reps, (size_t)o->queries, o, "batch");
    if (!rc && o->single > 0)
        rc = timed(&r, job, &Q, o->single, 1, o, "single");
    fflush(stdout);
    /* teardown as in bench server: clients gone, handles closed, loop drained, then state */
    kill(child, SIGTERM);
    waitpid(child, NULL, 0);
    if (r.admin)
        fk_grpc_client_close(r.admin, NULL, NULL);
    fk_service_close(r.svc, svc_closed, &r);
    FK_UV_MUST(uv_run(&r.loop, UV_RUN_DEFAULT));
    fk_service_free(r.svc);
    fk_engine_close(r.e);
    fk_store_close(st);
    FK_UV_MUST(uv_loop_close(&r.loop));
    free(r.resp);
    fk_dataset_close(&Q);
    return rc;
}

int fk_bench_kahm_serve(int argc, char **argv)
{
    fk_params p;
    fk_params_init(&p);
    fk_err err = {0};
    int rc = fk_params_parse_args(&p, &argc, argv, &err);
    opts o = {0};
    if (!rc && !fk_params_get(&p, "help"))
        rc = fk_params_int(&p, "clients", 100, 2, 1000, &o.clients, &err) ||
             fk_params_int(&p, "queries", 1000, 1, 100000, &o.queries, &err) ||
             fk_params_int(&p, "dim", 64, 2, 4096, &o.dim, &err) ||
             fk_params_int(&p, "reps", 10, 1, 1000, &o.reps, &err) ||
             fk_params_int(&p, "single", 200, 0, 100000, &o.single, &err) ||
             fk_params_bool(&p, "json", 0, &o.json, &err);
    const char *unused = rc ? NULL : fk_params_unused(&p);
    if (rc || unused || fk_params_get(&p, "help")) {
        fprintf(rc || unused ? stderr : stdout,
                "usage: fedkern bench kahm serve [--clients 100] [--queries 1000] [--dim 64]\n"
                "                                [--reps 10] [--single 200] [--json]\n"
                "kahm mode B through the real server and %s agents on 127.0.0.1: latency of\n"
                "--reps Predict calls of --queries rows and of --single one-query calls.\n%s%s\n",
                "--clients", rc ? err.msg : "", unused ? "unknown option" : "");
        fk_params_close(&p);
        return rc || unused ? 2 : 0;
    }
    fk_params_close(&p);
    char tmp[] = "/tmp/fk-bench-kahm-serve-XXXXXX";
    if (!mkdtemp(tmp))
        return 1;
    signal(SIGPIPE, SIG_IGN);
    fk_log_set_level(FK_LOG_ERROR);
    rc = serve(&o, tmp);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd))
        fprintf(stderr, "bench kahm serve: could not remove %s\n", tmp);
    return rc;
}
