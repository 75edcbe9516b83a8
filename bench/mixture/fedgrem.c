/* fedkern bench fedgrem: wall time of FedGrEM on the paper's simulation setting
 * (K=10, R=5, p=10, n=150, T=1000, through the simulator) and a scaling table of
 * the per-round work over K, p, R with GFLOP/s relative to a dgemm timed here. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/bench.h"
#include "bench/mixture/fedgrem_bench.h"
#include "bench/mixture/gmm_run.h"
#include "common/data/synth_gmm.h"
#include "common/models/mixture/gmm.h"
#include "common/models/mixture/gmm_estep.h"



/* The authors' R code on the simulation setting (issue 5 text; not measured here). */
static const double PUBLISHED_R_SECONDS = 4.5;

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Rounds only: every client's E-step + gradient step, then the central update. */
static int scaling_case(int K, int p, int R, int n, int T, double *sec, double *gflops,
                        double *passes)
{
    fk_synth_gmm o;
    fk_synth_gmm_defaults(&o);
    o.K = K;
    o.p = p;
    o.R = R;
    o.n = n;
    o.n_outlier = K / 10;
    fk_dataset *ts = calloc((size_t)K, sizeof *ts);
    size_t KRp = (size_t)K * R * p;
    double *th = malloc(KRp * sizeof *th), *w = malloc((size_t)K * R * sizeof *w);
    double *wk = malloc((size_t)K * R * sizeof *wk), *tt = malloc(KRp * sizeof *tt);
    double *g = malloc(fk_gmm_estep_work((size_t)n, R) * sizeof *g), *nr = malloc((size_t)R * sizeof *nr);
    double *sx = malloc((size_t)R * p * sizeof *sx), *eta = malloc((size_t)R * sizeof *eta);
    double *ctt = malloc((size_t)K * p * sizeof *ctt), *cth = malloc((size_t)K * p * sizeof *cth);
    double *work = malloc((size_t)K * p * sizeof *work), *beta = malloc((size_t)p * sizeof *beta);
    double *nk = malloc((size_t)K * sizeof *nk), *xsq = malloc((size_t)K * n * sizeof *xsq);
    double *xt = p <= 64 ? malloc((size_t)K * n * p * sizeof *xt) : NULL; /* as the client */
    double *betas = malloc((size_t)R * p * sizeof *betas);
    int rc = (ts && th && w && wk && tt && g && nr && sx && eta && ctt && cth && work && beta &&
              nk && xsq && betas && (p > 64 || xt))
                 ? fk_synth_gmm_make(&o, 1, ts, th, w, NULL)
                 : FK_ENOMEM;
    if (rc == FK_OK) {
        for (int k = 0; k < K; k++) {
            nk[k] = n;
            for (int r = 0; r < R; r++) /* start near the truth; outliers at the centres */
                wk[k * R + r] = 1.0 / R;
            for (int i = 0; i < n; i++) {
                xsq[(size_t)k * n + i] = cblas_ddot(p, fk_mat_row(&ts[k].X, (size_t)i), 1,
                                                    fk_mat_row(&ts[k].X, (size_t)i), 1);
                for (int j = 0; xt && j < p; j++)
                    xt[((size_t)k * p + j) * n + i] = fk_mat_row(&ts[k].X, (size_t)i)[j];
            }
        }
        rc = fk_synth_gmm_centres(&o, 1, tt, NULL);
    }
    if (rc == FK_OK) {
        for (int k = 1; k < K; k++)
            memcpy(tt + (size_t)k * R * p, tt, (size_t)R * p * sizeof *tt);
        for (int r = 0; r < R; r++)
            eta[r] = 0.95 * R;
        for (size_t i = 0; i < (size_t)R * p; i++)
            betas[i] = NAN; /* round 1: no warm start */
        double lambda = 1.0, t0 = fk_bench_now();
        *passes = 0;
        for (int t = 0; t < T; t++) {
            for (int k = 0; k < K; k++) {
                double *tk = tt + (size_t)k * R * p;
                fk_gmm_estep_stats(ts[k].X.data, xt ? xt + (size_t)k * n * p : NULL, (size_t)n, p,
                                   xsq + (size_t)k * n, wk + k * R, tk, R, nr, sx, g, NULL);
                for (int r = 0; r < R; r++)
                    wk[k * R + r] = nr[r] / n;
                fk_gmm_grad_step(tk, nr, sx, (size_t)n, p, R, eta);
            }
            lambda = fk_gmm_lambda_next(lambda, 0.1, 2.0, p, K);
            for (int r = 0; r < R; r++) {
                for (int k = 0; k < K; k++)
                    memcpy(ctt + (size_t)k * p, tt + ((size_t)k * R + r) * p, (size_t)p * sizeof *ctt);
                *passes += fk_gmm_central_mm(ctt, nk, K, p, lambda, cth, betas + (size_t)r * p,
                                             work);
                for (int k = 0; k < K; k++)
                    memcpy(tt + ((size_t)k * R + r) * p, cth + (size_t)k * p, (size_t)p * sizeof *ctt);
            }
        }
        *sec = fk_bench_now() - t0;
        *passes /= (double)T * R;
        /* dgemm distances + dgemm statistics: 4 n R p flops per client and round */
        *gflops = 4.0 * n * (double)R * p * K * T / *sec * 1e-9;
    }
    if (ts)
        for (int k = 0; k < K; k++)
            fk_dataset_close(&ts[k]);
    free(ts);
    free(th);
    free(w);
    free(wk);
    free(tt);
    free(g);
    free(nr);
    free(sx);
    free(eta);
    free(ctt);
    free(cth);
    free(work);
    free(beta);
    free(nk);
    free(xsq);
    free(xt);
    free(betas);
    return rc;
}

int fk_bench_fedgrem(int argc, char **argv)
{
    /* per-client matrices are tiny (n x R x p): BLAS threads only add synchronisation */
    openblas_set_num_threads(1);
    fk_params p;
    fk_err err = {0};
    fk_params_init(&p);
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: fedkern bench fedgrem [--json] [--rounds 1000] [--scale_rounds 3] "
                   "[--reps 3] [--no_scaling]\n\nWall time of FedGrEM on the simulation setting "
                   "(K=10, R=5, p=10, n=150) and a scaling table over K, p, R.\n");
            fk_params_close(&p);
            return 0;
        }
    int json = 0, noscale = 0;
    long T, ST, reps;
    int rc = fk_params_parse_args(&p, &argc, argv, &err);
    if (!rc) rc = fk_params_bool(&p, "json", 0, &json, &err);
    if (!rc) rc = fk_params_bool(&p, "no_scaling", 0, &noscale, &err);
    if (!rc) rc = fk_params_int(&p, "rounds", 1000, 1, 1000000, &T, &err);
    if (!rc) rc = fk_params_int(&p, "scale_rounds", 3, 1, 1000000, &ST, &err);
    if (!rc) rc = fk_params_int(&p, "reps", 3, 1, 1000, &reps, &err);
    if (!rc && fk_params_unused(&p))
        rc = fk_err_set(&err, FK_EINVAL, "unknown option --%s; see --help", fk_params_unused(&p));
    if (rc) {
        fprintf(stderr, "fedkern bench fedgrem: %s\n", err.msg);
        fk_params_close(&p);
        return 2;
    }
    fk_params mp; /* method parameters: defaults of the spec */
    fk_params_init(&mp);
    fk_synth_gmm o;
    fk_synth_gmm_defaults(&o);
    fk_dataset ts[10];
    double th[500], w[50];
    rc = fk_synth_gmm_make(&o, 1, ts, th, w, &err);
    double best = INFINITY, best_cpu = INFINITY, e_theta = NAN;
    for (long r = 0; rc == FK_OK && r < reps; r++) {
        fk_gmm_result res;
        double t0 = fk_bench_now(), c0 = cpu_now();
        rc = fk_gmm_run("fedgrem", &mp, ts, 10, (int)T, 1, NULL, NULL, &res, &err);
        double t = fk_bench_now() - t0, c = cpu_now() - c0;
        if (rc)
            break;
        best = t < best ? t : best;
        best_cpu = c < best_cpu ? c : best_cpu;
        double ew;
        fk_gmm_sim_errors(&res, th, w, 9, &e_theta, &ew);
        fk_gmm_result_close(&res);
    }
    for (int k = 0; rc == FK_OK && k < 10; k++)
        fk_dataset_close(&ts[k]);
    if (rc) {
        fprintf(stderr, "fedkern bench fedgrem: %s\n", err.msg);
        fk_params_close(&p);
        fk_params_close(&mp);
        return 1;
    }
    char extra[256];
    char case_name[64];
    snprintf(case_name, sizeof case_name, "sim K10 R5 p10 n150 T%ld", T);
    snprintf(extra, sizeof extra,
             "\"includes\":\"local-EM init + alignment + rounds\",\"E_theta\":%.4f,"
             "\"target_s\":0.25",
             e_theta);
    fk_bench_emit(json, "fedgrem", case_name, "seconds_best_of_reps", best, extra);
    fk_bench_emit(json, "fedgrem", case_name, "cpu_seconds_best_of_reps", best_cpu,
                  "\"note\":\"process CPU time; wall time above includes waiting on a shared machine\"");
    snprintf(extra, sizeof extra,
             "\"note\":\"4.5 s is the issue's figure for the authors' R code on a 2-core "
             "machine; NOT measured here\"");
    if (T == 1000) /* the published figure is for T = 1000 */
        fk_bench_emit(json, "fedgrem", case_name, "speedup_vs_published_R",
                      PUBLISHED_R_SECONDS / best, extra);
    if (!noscale) {
        double peak = fk_bench_dgemm_rate(512, 512, 512, 5);
        fk_bench_emit(json, "fedgrem", "dgemm 512", "gflops", peak,
                      "\"threads\":1,\"note\":\"same single-threaded BLAS as the rows below\"");
        int Ks[] = {10, 100, 1000}, ps[] = {10, 100}, Rs[] = {2, 5, 10};
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 2; b++)
                for (int c = 0; c < 3; c++) {
                    double sec = 0, gf = 0, passes = 0;
                    if (scaling_case(Ks[a], ps[b], Rs[c], 150, (int)ST, &sec, &gf, &passes))
                        continue;
                    snprintf(case_name, sizeof case_name, "K%d p%d R%d n150", Ks[a], ps[b], Rs[c]);
                    snprintf(extra, sizeof extra,
                             "\"rounds\":%ld,\"gflops\":%.3f,\"ratio_to_dgemm\":%.4f,"
                             "\"central_passes_mean\":%.0f,"
                             "\"includes\":\"rounds 1..N only (E-step, gradient step, central) from a common "
                             "start; central passes grow when tasks drift apart\"",
                             ST, gf, gf / peak, passes);
                    fk_bench_emit(json, "fedgrem", case_name, "ms_per_round", 1e3 * sec / ST, extra);
                }
    }
    fk_params_close(&p);
    fk_params_close(&mp);
    return 0;
}
