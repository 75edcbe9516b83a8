/* `fedkern bench wire`: our gRPC client -> our gRPC server over loopback mutual
 * TLS 1.3 (server on its own thread and loop, client on this one), against
 * grpcio client -> grpcio server measured in the same run by
 * bench/wire_grpcio.py. The throwaway PKI comes from common/net/certs. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "bench/bench.h"
#include "common/base/log.h"
#include "common/base/params.h"
#include "common/base/uvcheck.h"
#include "common/net/certs.h"
#include "common/net/grpc_client.h"
#include "common/net/grpc_server.h"

#ifndef FK_SRCDIR
#define FK_SRCDIR "."
#endif

enum { MB = 1 << 20, INFLIGHT = 32 };

typedef struct wire_server {
    uv_loop_t loop;
    uv_async_t stop;
    fk_grpc_server *srv;
    const char *dir;
    int port; /* > 0 once listening, < 0 on failure */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} wire_server;

static void on_echo(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                    uint64_t deadline, void *ud)
{
    (void)peer;
    (void)deadline;
    (void)ud;
    fk_grpc_call_reply(call, FK_GRPC_OK, NULL, req, len);
}

static void on_sink(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                    uint64_t deadline, void *ud)
{
    (void)peer;
    (void)deadline;
    (void)ud;
    (void)req;
    uint8_t out[8];
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)((uint64_t)len >> (8 * i));
    fk_grpc_call_reply(call, FK_GRPC_OK, NULL, out, 8);
}

static void limits(fk_net_limits *l, size_t max_mb)
{
    fk_net_limits_default(l);
    l->max_message = (max_mb + 1) * MB;
    l->max_conn_memory = 4 * (max_mb + 1) * MB;
}

/* CA, server "localhost" (SAN DNS:localhost, IP 127.0.0.1) and client "bench" in dir. */
static int make_pki(const char *dir, fk_err *err)
{
    fk_cert_opts o = {0};
    o.days = 1;
    int rc = fk_certs_init_ca(dir, "fedkern bench CA", &o, err);
    if (rc == FK_OK) {
        o.ips = "127.0.0.1";
        rc = fk_certs_issue(dir, FK_ROLE_SERVER, "localhost", &o, err);
    }
    if (rc == FK_OK) {
        o.ips = NULL;
        rc = fk_certs_issue(dir, FK_ROLE_CLIENT, "bench", &o, err);
    }
    return rc;
}

/* The PKI file names (buffers of 4096); FK_ELIMIT when dir is too long for them. */
FK_CHECKRETURN static int files(const char *dir, int server, char *ca, char *crt, char *key, fk_err *err)
{
    fk_cert_role role = server ? FK_ROLE_SERVER : FK_ROLE_CLIENT;
    const char *name = server ? "localhost" : "bench";
    int rc = fk_certs_path(ca, 4096, dir, FK_ROLE_NONE, NULL, "pem", err);
    if (!rc)
        rc = fk_certs_path(crt, 4096, dir, role, name, "pem", err);
    if (!rc)
        rc = fk_certs_path(key, 4096, dir, role, name, "key", err);
    return rc;
}

static void set_port(wire_server *ws, int port)
{
    pthread_mutex_lock(&ws->mu);
    ws->port = port;
    pthread_cond_signal(&ws->cv);
    pthread_mutex_unlock(&ws->mu);
}

static void server_stop(uv_async_t *a)
{
    wire_server *ws = a->data;
    fk_grpc_server_close(ws->srv, NULL, NULL);
    uv_close((uv_handle_t *)a, NULL);
}

static void *server_main(void *arg)
{
    wire_server *ws = arg;
    pthread_setname_np(pthread_self(), "fk-bench-srv"); /* tells the two ends apart in perf/top */
    char ca[4096], crt[4096], key[4096];
    fk_grpc_server_config cfg = {0};
    limits(&cfg.limits, 128);
    fk_tls_files f = {ca, crt, key, NULL, 0};
    fk_err err = {0};
    int uvrc = uv_loop_init(&ws->loop);
    if (uvrc) {
        fprintf(stderr, "fedkern bench: uv_loop_init: %s\n", uv_strerror(uvrc));
        set_port(ws, -1);
        return NULL;
    }
    if (files(ws->dir, 1, ca, crt, key, &err) != FK_OK ||
        fk_tls_ctx_new(&cfg.tls, 1, &f, &err) != FK_OK ||
        fk_grpc_server_init(&ws->srv, &ws->loop, &cfg, &err) != FK_OK) {
        fprintf(stderr, "fedkern bench: %s\n", err.msg);
        fk_tls_ctx_unref(cfg.tls);
        set_port(ws, -1);
        FK_UV_MUST(uv_loop_close(&ws->loop));
        return NULL;
    }
    fk_tls_ctx_unref(cfg.tls);
    if (fk_grpc_server_handle(ws->srv, "/fkbench.Wire/Echo", on_echo, NULL, &err) ||
        fk_grpc_server_handle(ws->srv, "/fkbench.Wire/Sink", on_sink, NULL, &err))
        fprintf(stderr, "fedkern bench: %s\n", err.msg); /* those calls then fail UNIMPLEMENTED */
    if ((uvrc = uv_async_init(&ws->loop, &ws->stop, server_stop)) != 0) {
        fprintf(stderr, "fedkern bench: uv_async_init: %s\n", uv_strerror(uvrc));
        set_port(ws, -1);
        fk_grpc_server_close(ws->srv, NULL, NULL);
        FK_UV_MUST(uv_run(&ws->loop, UV_RUN_DEFAULT));
        FK_UV_MUST(uv_loop_close(&ws->loop));
        return NULL;
    }
    ws->stop.data = ws;
    if (fk_grpc_server_listen(ws->srv, "127.0.0.1:0", &err) != FK_OK) {
        fprintf(stderr, "fedkern bench: %s\n", err.msg);
        set_port(ws, -1);
        fk_grpc_server_close(ws->srv, NULL, NULL);
        uv_close((uv_handle_t *)&ws->stop, NULL);
    } else {
        set_port(ws, fk_grpc_server_port(ws->srv));
    }
    FK_UV_MUST(uv_run(&ws->loop, UV_RUN_DEFAULT));
    FK_UV_MUST(uv_loop_close(&ws->loop));
    return NULL;
}

/* ---- client driver: latency, then call rate, then throughput per size ---- */

typedef struct driver {
    uv_loop_t *loop;
    fk_grpc_client *cl;
    int phase, failed;
    uint8_t small[1024];
    double *lat;
    int nlat, lat_done, lat_warm;
    double t0, rate_end;
    long rate_done, rate_inflight;
    int *sizes, nsizes, size_i, reps, rep;
    uint8_t *big;
    double *tput, *cpu_total, *cpu_max, *cpu_best;
    double c0, s0, rc0, rs0, best;
    clockid_t server_clock;
    char why[600];
} driver;

static void next(driver *d);

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void fail(driver *d, int status, const char *msg)
{
    if (!d->failed)
        snprintf(d->why, sizeof d->why, "%s: %s", fk_grpc_status_name(status), msg);
    d->failed = 1;
    d->phase = 99;
    next(d);
}

static void lat_done(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    driver *d = ud;
    if (status != FK_GRPC_OK || len != sizeof d->small || memcmp(resp, d->small, len) != 0) {
        fail(d, status, msg[0] ? msg : "echo mismatch");
        return;
    }
    if (d->lat_warm > 0)
        d->lat_warm--;
    else
        d->lat[d->lat_done++] = fk_bench_now() - d->t0;
    next(d);
}

static void rate_done(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    (void)resp;
    driver *d = ud;
    d->rate_inflight--;
    if (status != FK_GRPC_OK || len != sizeof d->small) {
        fail(d, status, msg);
        return;
    }
    d->rate_done++;
    next(d);
}

static void big_done(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    (void)resp;
    driver *d = ud;
    if (status != FK_GRPC_OK || len != 8) {
        fail(d, status, msg);
        return;
    }
    next(d);
}

static void closed(void *ud)
{
    (void)ud;
}

static void next(driver *d)
{
    switch (d->phase) {
    case 0: /* latency: one call at a time */
        if (d->lat_done < d->nlat) {
            d->t0 = fk_bench_now();
            fk_grpc_client_call(d->cl, "/fkbench.Wire/Echo", d->small, sizeof d->small, 10000,
                                lat_done, d);
            return;
        }
        d->phase = 1;
        d->t0 = fk_bench_now();
        d->rate_end = d->t0 + (d->rate_end > 0 ? d->rate_end : 2.0);
        /* fall through */
    case 1: /* call rate: keep INFLIGHT calls going until the time is up */
        if (fk_bench_now() < d->rate_end) {
            while (d->rate_inflight < INFLIGHT && d->phase == 1) {
                d->rate_inflight++;
                fk_grpc_client_call(d->cl, "/fkbench.Wire/Echo", d->small, sizeof d->small, 10000,
                                    rate_done, d);
            }
            return;
        }
        if (d->rate_inflight > 0)
            return;
        d->rate_end = fk_bench_now() - d->t0; /* now: elapsed seconds */
        d->phase = 2;
        d->rep = -1; /* one warm-up transfer per size */
        /* fall through */
    case 2: /* throughput: sequential uploads of each size */
        if (d->size_i < d->nsizes) {
            int reps = d->sizes[d->size_i] <= 16 ? d->reps : 3;
            if (d->rep == 0) {
                d->t0 = fk_bench_now();
                d->c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
                d->s0 = clock_s(d->server_clock);
                d->best = 0;
            }
            if (d->rep > 0) { /* CPU of the transfer that just ended, busier end */
                double c = clock_s(CLOCK_THREAD_CPUTIME_ID), sv = clock_s(d->server_clock);
                double busy = c - d->rc0 > sv - d->rs0 ? c - d->rc0 : sv - d->rs0;
                if (d->best == 0 || busy < d->best)
                    d->best = busy;
            }
            d->rc0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
            d->rs0 = clock_s(d->server_clock);
            if (d->rep < reps) {
                d->rep++;
                fk_grpc_client_call(d->cl, "/fkbench.Wire/Sink", d->big,
                                    (size_t)d->sizes[d->size_i] * MB, 120000, big_done, d);
                return;
            }
            double mb = (double)d->sizes[d->size_i] * reps;
            double dc = clock_s(CLOCK_THREAD_CPUTIME_ID) - d->c0, ds = clock_s(d->server_clock) - d->s0;
            d->tput[d->size_i] = mb / (fk_bench_now() - d->t0);
            fk_log(FK_LOG_DEBUG, "bench_cpu", "mb=%g client_cpu_s=%.3f server_cpu_s=%.3f", mb, dc, ds);
            d->cpu_total[d->size_i] = mb / (dc + ds);
            d->cpu_max[d->size_i] = mb / (dc > ds ? dc : ds);
            d->cpu_best[d->size_i] = (double)d->sizes[d->size_i] / d->best;
            d->size_i++;
            d->rep = -1;
            next(d);
            return;
        }
        d->phase = 99;
        /* fall through */
    default:
        if (d->cl) {
            fk_grpc_client *cl = d->cl;
            d->cl = NULL;
            fk_grpc_client_close(cl, closed, NULL);
        }
    }
}

static void on_state(fk_grpc_client *cl, int up, const char *why, void *ud)
{
    (void)cl;
    driver *d = ud;
    if (up) {
        d->phase = 0;
        next(d);
    } else if (d->cl) {
        d->cl = NULL;
        snprintf(d->why, sizeof d->why, "connection failed: %s", why);
        d->failed = 1;
        fk_grpc_client_close(cl, closed, NULL);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct baseline {
    double p50, p99, rate, tput[8], cpu[8];
} baseline;

/* Run the python helper: writes the PKI into dir and measures grpcio; parses its JSON lines. */
static int run_helper(const char *helper, const char *dir, double seconds, long ncalls,
                      const char *sizes, int skip, baseline *b, int *nsizes)
{
    char cmd[32768];
    if (skip)
        return 0;
    char ca[4096], scrt[4096], skey[4096], ccrt[4096], ckey[4096];
    fk_err err = {0};
    if (files(dir, 1, ca, scrt, skey, &err) || files(dir, 0, ca, ccrt, ckey, &err)) {
        fprintf(stderr, "fedkern bench wire: %s\n", err.msg);
        return -1;
    }
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 '%s' --ca '%s' --server-cert '%s' --server-key '%s' --client-cert '%s' "
             "--client-key '%s' --seconds %g --latency_calls %ld --sizes %s",
             helper, ca, scrt, skey, ccrt, ckey, seconds, ncalls, sizes);
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    char line[512];
    int got = 0, ti = 0;
    while (fgets(line, sizeof line, p)) {
        const char *v = strstr(line, "\"value\": ");
        double x = v ? atof(v + 9) : 0;
        got++;
        if (strstr(line, "p50_us"))
            b->p50 = x;
        else if (strstr(line, "p99_us"))
            b->p99 = x;
        else if (strstr(line, "calls_per_s"))
            b->rate = x;
        else if (strstr(line, "MB_per_cpu_s") && ti < 8)
            b->cpu[ti] = x;
        else if (strstr(line, "MB_per_s") && ti < 8)
            b->tput[ti++] = x;
    }
    int rc = pclose(p);
    *nsizes = ti;
    return got > 0 && rc == 0 ? 0 : -1;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: fedkern bench wire [--json] [--seconds S] [--latency_calls N] [--sizes MB,MB]\n"
            "                          [--reps_small N] [--no_grpcio] [--helper PATH]\n"
            "\n"
            "gRPC over loopback mutual TLS 1.3: 1 KB unary latency (p50/p99) and call rate\n"
            "(%d in flight), upload throughput for each size; ours (client and server threads)\n"
            "against grpcio measured in the same run (bench/wire_grpcio.py), with ratios.\n"
            "  --seconds S        call-rate phase length (2)\n"
            "  --latency_calls N  sequential calls for the latency percentiles (2000)\n"
            "  --sizes MB,MB      payload sizes for throughput (16,128)\n"
            "  --reps_small N     transfers per size of at most 16 MB (8; larger sizes: 3)\n"
            "  --no_grpcio        skip the grpcio baseline\n"
            "  --helper PATH      the python helper (default: the source tree's bench/wire_grpcio.py)\n",
            INFLIGHT);
}

static void emit_ratio(int json, const char *c, const char *metric, double ours, double theirs,
                       const char *unit)
{
    char extra[160];
    if (theirs > 0) {
        snprintf(extra, sizeof extra, "\"grpcio\":%.6g,\"ratio\":%.3f,\"unit\":\"%s\"", theirs,
                 ours / theirs, unit);
        if (!json)
            snprintf(extra, sizeof extra, "grpcio %.6g  ratio %.2f  (%s)", theirs, ours / theirs, unit);
    } else {
        snprintf(extra, sizeof extra, json ? "\"unit\":\"%s\"" : "(%s)", unit);
    }
    fk_bench_emit(json, "wire", c, metric, ours, extra);
}

int fk_bench_wire(int argc, char **argv)
{
    fk_params p;
    fk_err err = {0};
    fk_params_init(&p);
    int n = argc, rc = 1;
    if (fk_params_parse_args(&p, &n, argv, &err) != FK_OK || n > 0) {
        fprintf(stderr, "fedkern bench wire: %s\n", n > 0 ? "unexpected argument; see --help" : err.msg);
        fk_params_close(&p);
        return 2;
    }
    if (fk_params_get(&p, "help")) {
        usage(stdout);
        fk_params_close(&p);
        return 0;
    }
    int json, skip;
    double seconds;
    long ncalls, reps_small;
    if (fk_params_bool(&p, "json", 0, &json, &err) || fk_params_bool(&p, "no_grpcio", 0, &skip, &err) ||
        fk_params_double(&p, "seconds", 2.0, 0.1, 600, &seconds, &err) ||
        fk_params_int(&p, "latency_calls", 2000, 10, 10000000, &ncalls, &err) ||
        fk_params_int(&p, "reps_small", 8, 1, 1000, &reps_small, &err)) {
        fprintf(stderr, "fedkern bench wire: %s\n", err.msg);
        fk_params_close(&p);
        return 2;
    }
    const char *sizes_s = fk_params_str(&p, "sizes", "16,128");
    char helper[4096];
    snprintf(helper, sizeof helper, "%s", fk_params_str(&p, "helper", FK_SRCDIR "/bench/wire_grpcio.py"));
    int sizes[8], nsizes = 0;
    for (const char *s = sizes_s; *s && nsizes < 8;) {
        long mb = strtol(s, (char **)&s, 10);
        if (mb < 1 || mb > 1024 || (*s && *s != ',')) {
            fprintf(stderr, "fedkern bench wire: --sizes '%s' must be MB values 1..1024 joined by commas\n",
                    sizes_s);
            fk_params_close(&p);
            return 2;
        }
        sizes[nsizes++] = (int)mb;
        if (*s == ',')
            s++;
    }
    if (getenv("FK_DEBUG"))
        fk_log_set_level(FK_LOG_DEBUG);
    signal(SIGPIPE, SIG_IGN); /* a peer closing mid-write is an error code, not a kill */
    char dir[] = "/tmp/fkbench-wire-XXXXXX";
    if (!mkdtemp(dir)) {
        fprintf(stderr, "fedkern bench wire: cannot create a temporary directory\n");
        fk_params_close(&p);
        return 1;
    }
    baseline base = {0};
    int nbase = 0;
    if (make_pki(dir, &err) != FK_OK) {
        fprintf(stderr, "fedkern bench wire: %s\n", err.msg);
        goto out;
    }
    if (run_helper(helper, dir, seconds, ncalls / 2, sizes_s, skip, &base, &nbase) != 0) {
        fprintf(stderr, "fedkern bench wire: the python helper %s failed (needs python3-grpcio); "
                        "pass --helper PATH from a source tree, or --no_grpcio\n", helper);
        goto out;
    }
    int maxmb = 0;
    for (int i = 0; i < nsizes; i++)
        maxmb = sizes[i] > maxmb ? sizes[i] : maxmb;
    wire_server ws = {.dir = dir};
    pthread_mutex_init(&ws.mu, NULL);
    pthread_cond_init(&ws.cv, NULL);
    pthread_t th;
    pthread_create(&th, NULL, server_main, &ws);
    pthread_mutex_lock(&ws.mu);
    while (ws.port == 0)
        pthread_cond_wait(&ws.cv, &ws.mu);
    pthread_mutex_unlock(&ws.mu);

    driver d = {0};
    double tput[8] = {0}, cpu_total[8] = {0}, cpu_max[8] = {0}, cpu_best[8] = {0};
    d.cpu_best = cpu_best;
    d.cpu_total = cpu_total;
    d.cpu_max = cpu_max;
    pthread_getcpuclockid(th, &d.server_clock);
    d.nlat = (int)ncalls;
    d.lat_warm = 100;
    d.lat = calloc((size_t)ncalls, sizeof *d.lat);
    d.big = calloc((size_t)maxmb * MB, 1);
    d.sizes = sizes;
    d.nsizes = nsizes;
    d.reps = 1;
    d.tput = tput;
    d.rate_end = seconds;
    memset(d.small, 0x5a, sizeof d.small);
    uv_loop_t loop;
    int loop_rc = uv_loop_init(&loop);
    d.loop = &loop;
    if (loop_rc) {
        d.failed = 1;
        snprintf(d.why, sizeof d.why, "uv_loop_init: %s", uv_strerror(loop_rc));
    } else if (ws.port > 0 && d.lat && d.big) {
        char ca[4096], crt[4096], key[4096];
        fk_tls_files f = {ca, crt, key, NULL, 0};
        fk_grpc_client_config cfg = {0};
        limits(&cfg.limits, (size_t)maxmb);
        if (files(dir, 0, ca, crt, key, &err) == FK_OK &&
            fk_tls_ctx_new(&cfg.tls, 0, &f, &err) == FK_OK &&
            fk_grpc_client_connect(&d.cl, &loop, &cfg, "127.0.0.1", ws.port, "localhost", on_state,
                                   &d, &err) == FK_OK) {
            d.reps = (int)reps_small; /* per size below; adjusted in the loop */
            FK_UV_MUST(uv_run(&loop, UV_RUN_DEFAULT));
        } else {
            snprintf(d.why, sizeof d.why, "%s", err.msg);
            d.failed = 1;
        }
        fk_tls_ctx_unref(cfg.tls);
    } else {
        d.failed = 1;
        snprintf(d.why, sizeof d.why, "server did not start or out of memory");
    }
    if (!loop_rc)
        FK_UV_MUST(uv_loop_close(&loop));
    if (ws.port > 0)
        FK_UV_MUST(uv_async_send(&ws.stop));
    pthread_join(th, NULL);
    if (d.failed) {
        fprintf(stderr, "fedkern bench wire: %s\n", d.why);
    } else {
        qsort(d.lat, (size_t)d.nlat, sizeof *d.lat, cmp_double);
        double p50 = d.lat[d.nlat / 2] * 1e6, p99 = d.lat[(int)(d.nlat * 0.99)] * 1e6;
        emit_ratio(json, "ours 1KB unary", "p50_us", p50, base.p50, "us, sequential calls");
        emit_ratio(json, "ours 1KB unary", "p99_us", p99, base.p99, "us, target < 1000");
        emit_ratio(json, "ours 1KB unary", "calls_per_s", (double)d.rate_done / d.rate_end, base.rate,
                   "calls/s, target ratio >= 3");
        for (int i = 0; i < nsizes; i++) {
            char c[64];
            snprintf(c, sizeof c, "ours %dMB upload", sizes[i]);
            emit_ratio(json, c, "MB_per_s", tput[i], i < nbase ? base.tput[i] : 0,
                       "MB/s wall clock, shared machine");
            emit_ratio(json, c, "MB_per_cpu_s", cpu_total[i], i < nbase ? base.cpu[i] : 0,
                       "MB per CPU-second of both ends");
            emit_ratio(json, c, "one_core_MB_per_s", cpu_max[i], 0,
                       "MB per CPU-second of the busier end, target >= 1000");
            emit_ratio(json, c, "one_core_best_MB_per_s", cpu_best[i], 0,
                       "same, least-disturbed transfer of the run");
        }
        rc = 0;
    }
    free(d.lat);
    free(d.big);
    pthread_mutex_destroy(&ws.mu);
    pthread_cond_destroy(&ws.cv);
out:;
    static const char *made[] = {"ca.pem", "ca.key", "server-localhost.pem", "server-localhost.key",
                                 "client-bench.pem", "client-bench.key"};
    for (int i = 0; i < 6; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, made[i]);
        remove(path);
    }
    remove(dir);
    fk_params_close(&p);
    return rc;
}
