/* fedkern bench kahm: speed of the KAHM estimator on the Fashion-MNIST shapes (p = 784;
 * N = 300, a label-skew class share, and N = 1000, a single-class cluster) on synthetic
 * data of those shapes: fit time per class model, prediction throughput (queries/s) and
 * its GFLOP/s as a ratio of a dgemm of the same size measured in the same run, and the
 * mode-A upload size of one model against its raw data. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/kahm/kahm_bench.h"
#include "common/base/params.h"
#include "common/la/rng.h"
#include "common/models/kahm/kahm.h"

static const char B[] = "kahm";

/* Rows in [-1, 1]: tanh of a 30-d linear structure plus noise, like image classes. */
static double *make_rows(size_t n, size_t p, uint64_t seed)
{
    double *X = malloc(n * p * sizeof(double)), *A = malloc(30 * p * sizeof(double));
    fk_rng r;
    fk_rng_init(&r, seed, 0);
    for (size_t i = 0; i < 30 * p; i++)
        A[i] = 0.2 * fk_rng_normal(&r);
    for (size_t i = 0; i < n; i++) {
        double z[30];
        for (int k = 0; k < 30; k++)
            z[k] = fk_rng_normal(&r);
        for (size_t j = 0; j < p; j++) {
            double v = 0.1 * fk_rng_normal(&r);
            for (int k = 0; k < 30; k++)
                v += A[(size_t)k * p + j] * z[k];
            X[i * p + j] = tanh(v);
        }
    }
    free(A);
    return X;
}

static int run(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: fedkern bench kahm [--json] [--queries 1000]\n\n"
                   "KAHM fit time per class model (N = 300, 1000; p = 784), prediction queries/s and\n"
                   "GFLOP/s as a ratio of dgemm in the same run, mode-A upload bytes vs raw data.\n");
            return 0;
        }
    fk_params p;
    fk_params_init(&p);
    fk_err err = {0};
    int json = 0;
    long nq = 1000;
    int rc = fk_params_parse_args(&p, &argc, argv, &err);
    if (!rc) rc = fk_params_bool(&p, "json", 0, &json, &err);
    if (!rc) rc = fk_params_int(&p, "queries", 1000, 1, 1000000, &nq, &err);
    if (!rc && (argc > 0 || fk_params_unused(&p)))
        rc = fk_err_set(&err, FK_EINVAL, "unexpected argument '%s'; see --help",
                        argc > 0 ? argv[0] : fk_params_unused(&p));
    fk_params_close(&p);
    if (rc) {
        fprintf(stderr, "fedkern bench kahm: %s\n", err.msg);
        return 2;
    }
    const size_t P = 784;
    double ref = fk_bench_dgemm_rate((size_t)nq, 1000, P, 3);
    char cs[64];
    snprintf(cs, sizeof cs, "dgemm %ldx1000x784", nq);
    fk_bench_emit(json, B, cs, "gflops", ref, NULL);
    double *T = make_rows((size_t)nq, P, 99);
    double *g = malloc((size_t)nq * sizeof(double));
    static const size_t sizes[2] = {300, 1000};
    fk_kahm_opts o;
    fk_kahm_opts_default(&o);
    for (int s = 0; s < 2 && !rc; s++) {
        size_t N = sizes[s];
        double *Y = make_rows(N, P, 1 + (uint64_t)s);
        fk_kahm k = {0};
        double best = 1e30;
        for (int r = 0; r < 2 && !rc; r++) {
            fk_kahm_close(&k);
            double t0 = fk_bench_now();
            rc = fk_kahm_fit(&k, Y, N, P, P, &o, &err);
            double t = fk_bench_now() - t0;
            best = t < best ? t : best;
        }
        if (!rc) {
            snprintf(cs, sizeof cs, "N=%zu p=784 n=%d", N, k.n);
            fk_bench_emit(json, B, cs, "fit_seconds_per_model", best, NULL);
            double bq = 1e30;
            for (int r = 0; r < 3 && !rc; r++) {
                double t0 = fk_bench_now();
                rc = fk_kahm_dist(&k, T, (size_t)nq, P, g, NULL, &err);
                double t = fk_bench_now() - t0;
                bq = t < bq ? t : bq;
            }
            double n = k.n, q = (double)nq, Nn = (double)N;
            double flops = 2 * q * P * n + q * n * n + 2 * q * Nn * n + 2 * q * Nn * P + 2 * q * Nn;
            fk_bench_emit(json, B, cs, "queries_per_second", q / bq, NULL);
            fk_bench_emit(json, B, cs, "predict_gflops", flops / bq / 1e9, NULL);
            char extra[64];
            snprintf(extra, sizeof extra, "\"dgemm_gflops\":%.3f", ref);
            fk_bench_emit(json, B, cs, "predict_ratio_to_dgemm", flops / bq / 1e9 / ref, extra);
            double up = 8.0 * (Nn * (P + n + 1) + n * P + n * n + 9), raw = 8.0 * Nn * P;
            fk_bench_emit(json, B, cs, "upload_bytes_mode_a", up, NULL);
            fk_bench_emit(json, B, cs, "upload_over_raw_data", up / raw, NULL);
        }
        fk_kahm_close(&k);
        free(Y);
    }
    free(T);
    free(g);
    if (rc) {
        fprintf(stderr, "fedkern bench kahm: %s\n", err.msg);
        return 1;
    }
    return 0;
}

int fk_bench_kahm(int argc, char **argv)
{
    return run(argc, argv);
}
