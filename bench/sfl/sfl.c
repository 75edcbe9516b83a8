/* fedkern bench sfl: speed of the sparse functional learner and its one-shot federation on
 * the E3.1 generator (dissertation (3.37), 9 clients on a 3 x 3 grid, resilient quadratic
 * c = 100, eps = 0.01, kernels at the rows x 3 widths): iterations and time to the stopping
 * rule of every client, the server and the pooled centralised solve; the GFLOP/s of the two
 * kernel products (dgemv with K and K^T) as a ratio of a dgemm on the same N x J matrix
 * measured in the same run; the critical rows and the bytes they take against sending every
 * row; the server solve time against the pooled solve. The protocol runs on the estimator
 * directly (same operations as the job type: local solve, critical rows, union solve warm
 * started from the concatenated duals) so that each phase can be timed on its own. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/sfl/sfl_bench.h"
#include "common/base/params.h"
#include "common/la/rng.h"
#include "common/methods/sfl/sfl.h"
#include "common/models/sfl/sfl.h"

static const char B[] = "sfl";

enum { NCLI = 9, P = 2, NTEST = 1000 };

static void opts(fk_sfl_opts *o, double n_ref, long T, uint64_t seed)
{
    fk_sfl_opts_default(o, FK_SFL_CLASSIFY);
    o->eps = 0.01;
    o->res = FK_SFL_QUAD;
    o->c = 100;
    o->n_ref = n_ref;
    o->T = T;
    o->seed = seed;
}

/* Best-of-3 rate (GFLOP/s) of C = K W, K the N x J kernel matrix, W J x 64: the dense
 * baseline on the very matrix the solver streams. */
static double dgemm_rate(const double *K, size_t N, size_t J)
{
    size_t b = 64;
    double *W = malloc(J * b * sizeof *W), *C = malloc(N * b * sizeof *C), best = 1e30;
    if (!W || !C) {
        free(W);
        free(C);
        return NAN;
    }
    for (size_t i = 0; i < J * b; i++)
        W[i] = 1.0 / (double)(1 + i % 7);
    for (int r = 0; r < 3; r++) {
        double t0 = fk_bench_now();
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)b, (int)J, 1.0, K,
                    (int)J, W, (int)b, 0.0, C, (int)b);
        double t = fk_bench_now() - t0;
        best = t < best ? t : best;
    }
    free(W);
    free(C);
    return 2.0 * (double)N * (double)J * (double)b / best / 1e9;
}

/* Best-of-5 rate of one solver iteration's products: abar = K^T lambda, f = K alpha. */
static double dgemv_pair_rate(const double *K, size_t N, size_t J)
{
    double *l = malloc(N * sizeof *l), *a = malloc(J * sizeof *a), *f = malloc(N * sizeof *f);
    double best = 1e30;
    if (!l || !a || !f) {
        free(l);
        free(a);
        free(f);
        return NAN;
    }
    for (size_t i = 0; i < N; i++)
        l[i] = 1.0 / (double)(1 + i % 5);
    for (int r = 0; r < 5; r++) {
        double t0 = fk_bench_now();
        for (int it = 0; it < 20; it++) {
            cblas_dgemv(CblasRowMajor, CblasTrans, (int)N, (int)J, 1.0, K, (int)J, l, 1, 0.0, a, 1);
            cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)J, 1.0, K, (int)J, a, 1, 0.0, f,
                        1);
        }
        double t = (fk_bench_now() - t0) / 20;
        best = t < best ? t : best;
    }
    free(l);
    free(a);
    free(f);
    return 4.0 * (double)N * (double)J / best / 1e9;
}

static double accuracy(const fk_sfl_model *m, const double *X, const double *y, size_t n)
{
    double f[NTEST], right = 0;
    fk_sfl_predict(m, X, n, f);
    for (size_t i = 0; i < n; i++)
        right += (f[i] >= 0 ? 1.0 : -1.0) == y[i];
    return right / (double)n;
}

/* Solve on (X, y) with kernels at the rows; time, iterations, status, optional model. */
FK_CHECKRETURN static int solve(const double *X, const double *y, size_t n, const fk_sfl_opts *o,
                 const double *lam0, fk_sfl_fit *f, double *secs, fk_sfl_model *m, fk_err *err)
{
    double w[3];
    fk_sfl_widths(1, 3, 3, w);
    fk_sfl_atoms a;
    double t0 = fk_bench_now();
    int rc = fk_sfl_atoms_candidates(&a, X, n, P, w, 3, err);
    if (rc)
        return rc;
    rc = fk_sfl_solve(X, y, n, P, &a, o, lam0, f, err);
    *secs = fk_bench_now() - t0;
    if (!rc && m && (rc = fk_sfl_model_support(&a, f->alpha, m, err)))
        fk_sfl_fit_close(f);
    fk_sfl_atoms_close(&a);
    return rc;
}

static void emit_status(int json, const char *cs, const char *who, const fk_sfl_fit *f,
                        double secs)
{
    char m[64], ex[64];
    snprintf(ex, sizeof ex, "\"status\":\"%s\"", fk_sfl_status_name(f->status));
    snprintf(m, sizeof m, "%s_iterations", who);
    fk_bench_emit(json, B, cs, m, (double)f->iters, ex);
    snprintf(m, sizeof m, "%s_seconds", who);
    fk_bench_emit(json, B, cs, m, secs, NULL);
}

/* One size: 9 clients of N/9 rows, the union of their critical rows, the pooled problem. */
FK_CHECKRETURN static int run_size(int json, size_t N, long T, fk_err *err)
{
    size_t nk = N / NCLI;
    N = nk * NCLI;
    double *X = malloc(N * P * sizeof *X), *y = malloc(N * sizeof *y);
    double *UX = malloc(N * P * sizeof *UX), *Uy = malloc(N * sizeof *Uy),
           *Ul = malloc(N * sizeof *Ul);
    double Xt[NTEST * P], yt[NTEST];
    int *idx = malloc(nk * sizeof *idx);
    int rc = !X || !y || !UX || !Uy || !Ul || !idx
                 ? fk_err_set(err, FK_ENOMEM, "bench sfl: out of memory")
                 : FK_OK;
    /* data: the job's own generator, labels 0/1 -> -1/+1 */
    for (int k = -1; k < NCLI && !rc; k++) {
        fk_dataset ds;
        size_t n = k < 0 ? NTEST : nk;
        if ((rc = fk_sfl_e31_make(NCLI, k, n, k < 0 ? 9100 : 3100, &ds, err)))
            break;
        double *dx = k < 0 ? Xt : X + (size_t)k * nk * P, *dy = k < 0 ? yt : y + (size_t)k * nk;
        for (size_t i = 0; i < n; i++) {
            for (int j = 0; j < P; j++)
                dx[i * P + (size_t)j] = ds.X.data[i * ds.X.ld + (size_t)j];
            dy[i] = ds.y_raw[i] == 1 ? 1 : -1;
        }
        fk_dataset_close(&ds);
    }
    char cs[48];
    snprintf(cs, sizeof cs, "E3.1 N=%zu K=9", N);
    /* clients: local solve (kappa = 1/N for every party), critical rows with their duals */
    double t_cli = 0, t_cli_max = 0, it_cli = 0;
    size_t U = 0;
    for (int k = 0; k < NCLI && !rc; k++) {
        fk_sfl_opts o;
        opts(&o, (double)N, T, 11 + (uint64_t)k);
        fk_sfl_fit f;
        double s;
        const double *Xk = X + (size_t)k * nk * P, *yk = y + (size_t)k * nk;
        if ((rc = solve(Xk, yk, nk, &o, NULL, &f, &s, NULL, err)))
            break;
        size_t C = 0, nc = 0;
        fk_sfl_critical(&f, yk, &o, idx, &C, &nc);
        for (size_t i = 0; i < C; i++, U++) {
            memcpy(UX + U * P, Xk + (size_t)idx[i] * P, P * sizeof *UX);
            Uy[U] = yk[idx[i]];
            Ul[U] = f.lambda[idx[i]];
        }
        t_cli += s;
        t_cli_max = fmax(t_cli_max, s);
        it_cli += (double)f.iters / NCLI;
        fk_sfl_fit_close(&f);
    }
    if (!rc) {
        fk_bench_emit(json, B, cs, "client_iterations_mean", it_cli, NULL);
        fk_bench_emit(json, B, cs, "client_seconds_sum", t_cli, NULL);
        fk_bench_emit(json, B, cs, "client_seconds_max", t_cli_max, NULL);
        fk_bench_emit(json, B, cs, "critical_rows", (double)U, NULL);
        fk_bench_emit(json, B, cs, "critical_fraction", (double)U / (double)N, NULL);
        /* the upload: features, label and dual per critical row (the client's own count) */
        double up = (double)U * (P + 2) * sizeof(double), all = (double)N * (P + 1) * sizeof(double);
        fk_bench_emit(json, B, cs, "upload_bytes", up, NULL);
        fk_bench_emit(json, B, cs, "all_data_bytes", all, NULL);
        fk_bench_emit(json, B, cs, "upload_bytes_ratio", up / all, NULL);
    }
    /* server: the union warm-started from the concatenated duals; then the pooled problem */
    fk_sfl_fit fs = {0}, fp = {0};
    fk_sfl_model ms = {0}, mp = {0};
    double t_srv = 0, t_pool = 0;
    if (!rc) {
        fk_sfl_opts o;
        opts(&o, (double)N, T, 5);
        rc = solve(UX, Uy, U, &o, Ul, &fs, &t_srv, &ms, err);
    }
    if (!rc) {
        fk_sfl_opts o;
        opts(&o, (double)N, T, 5);
        if ((rc = solve(X, y, N, &o, NULL, &fp, &t_pool, &mp, err))) {
            fk_sfl_fit_close(&fs);
            fk_sfl_model_close(&ms);
        }
    }
    if (!rc) {
        emit_status(json, cs, "server", &fs, t_srv);
        emit_status(json, cs, "pooled", &fp, t_pool);
        fk_bench_emit(json, B, cs, "server_over_pooled_time", t_srv / t_pool, NULL);
        fk_bench_emit(json, B, cs, "accuracy_federated", accuracy(&ms, Xt, yt, NTEST), NULL);
        fk_bench_emit(json, B, cs, "accuracy_pooled", accuracy(&mp, Xt, yt, NTEST), NULL);
        fk_bench_emit(json, B, cs, "kernels_federated", (double)ms.K, NULL);
        fk_bench_emit(json, B, cs, "kernels_pooled", (double)mp.K, NULL);
    }
    /* kernel products on the pooled N x J matrix against dgemm on the same matrix */
    if (!rc) {
        double w[3];
        fk_sfl_widths(1, 3, 3, w);
        fk_sfl_atoms a;
        if (!(rc = fk_sfl_atoms_candidates(&a, X, N, P, w, 3, err))) {
            size_t J = a.J;
            double *K = malloc(N * J * sizeof *K);
            if (!K) {
                rc = fk_err_set(err, FK_ENOMEM, "bench sfl: out of memory for K");
            } else {
                double t0 = fk_bench_now();
                fk_sfl_kernel(X, N, P, &a, K);
                double tk = fk_bench_now() - t0, ref = dgemm_rate(K, N, J);
                double pair = dgemv_pair_rate(K, N, J);
                /* the whole solve's products: 4 N J flops an iteration (power iterations and
                 * the kernel build are in the time too, so this is a lower bound) */
                double insolve = 4.0 * (double)N * (double)J * (double)fp.iters / t_pool / 1e9;
                char ex[64];
                snprintf(ex, sizeof ex, "\"dgemm_gflops\":%.3f", ref);
                fk_bench_emit(json, B, cs, "atoms", (double)J, NULL);
                fk_bench_emit(json, B, cs, "kernel_build_seconds", tk, NULL);
                fk_bench_emit(json, B, cs, "dgemm_gflops", ref, NULL);
                fk_bench_emit(json, B, cs, "products_gflops", pair, NULL);
                fk_bench_emit(json, B, cs, "products_ratio_to_dgemm", pair / ref, ex);
                fk_bench_emit(json, B, cs, "pooled_solve_gflops", insolve, NULL);
                fk_bench_emit(json, B, cs, "pooled_solve_ratio_to_dgemm", insolve / ref, ex);
                fk_bench_emit(json, B, cs, "pooled_iterations_per_second",
                              (double)fp.iters / t_pool, NULL);
                free(K);
            }
            fk_sfl_atoms_close(&a);
        }
        fk_sfl_fit_close(&fs);
        fk_sfl_fit_close(&fp);
        fk_sfl_model_close(&ms);
        fk_sfl_model_close(&mp);
    }
    free(X);
    free(y);
    free(UX);
    free(Uy);
    free(Ul);
    free(idx);
    return rc;
}

int fk_bench_sfl(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: fedkern bench sfl [--json] [--n 450,900] [--T 5000] [--threads 1]\n"
                   "       [--pen] [--data_dir ../shared/data] [--peer bench/sfl/peer_svc.py]\n"
                   "       [--pen_scale 100] [--pen_wmin 0.5] [--pen_wmax 1.5] [--pen_widths 3]\n"
                   "       [--pen_reps 3] [--pen_w1 0.5]\n\n"
                   "E3.1 generator, 9 clients: iterations and seconds to the stopping rule\n"
                   "(clients, server, pooled), kernel-product GFLOP/s as a ratio of dgemm on the\n"
                   "same N x J matrix, critical rows, upload bytes vs all data, server vs pooled\n"
                   "solve time. --pen instead: the pooled fit on pen-digits 1 vs 7 (kernels at\n"
                   "the 1557 rows x the widths) against LIBSVM (scikit-learn SVC, run by the\n"
                   "--peer script with python3 in the same run): CPU seconds (best of\n"
                   "--pen_reps), accuracy on the 728 test rows, the time ratio. --peer '' skips\n"
                   "the peer. A second --pen row takes one width, --pen_w1 (0 skips it).\n");
            return 0;
        }
    fk_params p;
    fk_err err = {0};
    fk_params_init(&p);
    int rc = fk_params_parse_args(&p, &argc, argv, &err), json = 0;
    long T = 5000, thr = 1;
    if (!rc)
        rc = fk_params_bool(&p, "json", 0, &json, &err);
    if (!rc)
        rc = fk_params_int(&p, "T", 5000, 1, 100000000, &T, &err);
    if (!rc)
        rc = fk_params_int(&p, "threads", 1, 1, 256, &thr, &err);
    const char *ns = fk_params_str(&p, "n", "450,900");
    int pen = 0;
    long pen_q = 3, pen_reps = 3;
    double pen_scale = 100, pen_wmin = 0.5, pen_wmax = 1.5;
    if (!rc)
        rc = fk_params_bool(&p, "pen", 0, &pen, &err);
    if (!rc)
        rc = fk_params_int(&p, "pen_widths", 3, 1, 16, &pen_q, &err);
    if (!rc)
        rc = fk_params_int(&p, "pen_reps", 3, 1, 1000, &pen_reps, &err);
    if (!rc)
        rc = fk_params_double(&p, "pen_scale", 100, 1e-12, 1e12, &pen_scale, &err);
    if (!rc)
        rc = fk_params_double(&p, "pen_wmin", 0.5, 1e-12, 1e12, &pen_wmin, &err);
    if (!rc)
        rc = fk_params_double(&p, "pen_wmax", 1.5, 1e-12, 1e12, &pen_wmax, &err);
    double pen_w1 = 0.5;
    if (!rc)
        rc = fk_params_double(&p, "pen_w1", 0.5, 0, 1e12, &pen_w1, &err);
    const char *dir = fk_params_str(&p, "data_dir", "../shared/data");
    const char *peer = fk_params_str(&p, "peer", "bench/sfl/peer_svc.py");
    if (!rc && fk_params_unused(&p))
        rc = fk_err_set(&err, FK_EINVAL, "unknown option '--%s'", fk_params_unused(&p));
    if (!rc)
        openblas_set_num_threads((int)thr);
    if (!rc && pen)
        rc = fk__bench_sfl_pen(json, dir, peer, pen_scale, pen_wmin, pen_wmax, (int)pen_q,
                               (int)pen_reps, &err);
    if (!rc && pen && pen_w1 > 0) /* one width at the rows: the setting that meets the target */
        rc = fk__bench_sfl_pen(json, dir, peer, pen_scale, pen_w1, pen_w1, 1, (int)pen_reps, &err);
    for (const char *s = ns; !rc && !pen && *s;) {
        char *end;
        long n = strtol(s, &end, 10);
        if (end == s || n < NCLI * 4 || n > 20000) {
            rc = fk_err_set(&err, FK_EINVAL, "--n: comma-separated sizes in [36, 20000], got '%s'",
                            ns);
            break;
        }
        rc = run_size(json, (size_t)n, T, &err);
        s = *end == ',' ? end + 1 : end;
    }
    fk_params_close(&p);
    if (rc) {
        fprintf(stderr, "fedkern bench sfl: %s\n", err.msg);
        return 1;
    }
    return 0;
}
