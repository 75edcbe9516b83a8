/* fedkern bench dica: speed of the DICA building blocks on the Office-Caltech10 SURF
 * shapes (synthetic rows of the same size: d = 800, the largest domain n = 1123, pooled
 * training n up to ~2400), with GFLOP/s as a ratio to a dgemm measured in the same run:
 *   client statistics (§7.3): random-feature map + the D x D second moment, R = 500..2000;
 *   server solve (§7.4) at D = 2R, 3 domains, 10 classes;
 *   kernel solver at n = 500, 1000, 2000: the default (DICA through R^-1, no eigen-
 *   decomposition) and the reduced exact solver on the kernel map (§5.3), same rows;
 * plus bytes uploaded per client against the raw data, and peak memory. Flop counts are
 * the standard LAPACK leading terms (stated per row). Each row also gives the process CPU
 * seconds: on a shared machine wall >> CPU / threads means the BLAS threads waited. */
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <cblas.h>

#include "bench/bench.h"
#include "bench/dica/dica_bench.h"
#include "common/base/params.h"
#include "common/la/rff.h"
#include "common/la/rng.h"
#include "common/methods/dica/dica_job.h"
#include "common/models/dica/dica.h"

static const char *B = "dica";

/* dgemm GFLOP per CPU second (set by fk_bench_dica): on a machine shared with other jobs
 * the wall-clock ratio measures the scheduler as much as the code; the ratio of work per
 * CPU second says how well the code uses the cores it gets. */
static double cpu_ref = NAN;

/* Process CPU seconds (all threads), next to the wall clock of fk_bench_now. */
static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Best of reps dgemm (a x k)(k x b) in GFLOP per CPU second. */
static double dgemm_cpu_rate(size_t a, size_t k, size_t b, int reps)
{
    fk_mat A = {0}, Bm = {0}, C = {0};
    double best = INFINITY;
    if (fk_bench_normal_rows(&A, a, k, 1, NULL) == FK_OK &&
        fk_bench_normal_rows(&Bm, k, b, 2, NULL) == FK_OK && fk_mat_init(&C, a, b) == FK_OK)
        for (int r = 0; r < reps; r++) {
            double c0 = cpu_now();
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)a, (int)b, (int)k, 1.0,
                        A.data, (int)k, Bm.data, (int)b, 0.0, C.data, (int)b);
            double c = cpu_now() - c0;
            best = c < best ? c : best;
        }
    fk_mat_close(&A);
    fk_mat_close(&Bm);
    fk_mat_close(&C);
    return isfinite(best) && best > 0 ? 2.0 * (double)a * (double)k * (double)b / best / 1e9 : NAN;
}

/* ",\"cpu_gflops\":..,\"cpu_ratio_to_dgemm\":..,\"cpu_target_met\":.." for flops in cpu seconds. */
static void cpu_fields(char *buf, size_t cap, double flops, double cpu)
{
    double g = flops / cpu / 1e9;
    snprintf(buf, cap, ",\"cpu_gflops\":%.2f,\"cpu_ratio_to_dgemm\":%.2f,\"cpu_target_met\":%s", g,
             g / cpu_ref, g / cpu_ref >= 0.6 ? "true" : "false");
}

/* Labels in 10 classes and 3 domains for synthetic rows. */
static void labels(size_t n, int *y, long *dom)
{
    for (size_t i = 0; i < n; i++) {
        y[i] = (int)(i % 10);
        dom[i] = (long)(3 * i / n);
    }
}

/* n x d normal rows with labels(): the client and the kernel solver time the same kind of data. */
FK_CHECKRETURN static int synthetic_rows(size_t n, size_t d, uint64_t seed, fk_mat *X, int **y, long **dom,
                          fk_err *err)
{
    if (fk_bench_normal_rows(X, n, d, seed, err))
        return FK_ENOMEM;
    *y = malloc(n * sizeof **y);
    *dom = malloc(n * sizeof **dom);
    if (!*y || !*dom) {
        free(*y);
        free(*dom);
        fk_mat_close(X);
        return fk_err_set(err, FK_ENOMEM, "out of memory for %zu labels", n);
    }
    labels(n, *y, *dom);
    return FK_OK;
}

FK_CHECKRETURN static int client_stats(int json, size_t n, size_t R, double ref, fk_dica_stats *out, fk_err *err)
{
    size_t d = 800, D = 2 * R;
    fk_mat X, Phi = {0}, Psi = {0};
    int *y;
    long *dom;
    if (synthetic_rows(n, d, 3, &X, &y, &dom, err))
        return FK_ENOMEM;
    fk_rff rf;
    double t0 = fk_bench_now();
    int rc = fk_rff_init(&rf, 1, d, R, 40.0, err);
    if (!rc)
        rc = fk_rff_map(&rf, &X, &Phi, err);
    double t_map = fk_bench_now() - t0;
    if (!rc)
        rc = fk_dica_onehot(y, n, 10, &Psi, err);
    if (!rc)
        rc = fk_dica_stats_init(out, D, 10, err);
    t0 = fk_bench_now();
    double c0 = cpu_now();
    if (!rc)
        rc = fk_dica_stats_add(out, &Phi, &Psi, dom, err);
    double t_st = fk_bench_now() - t0, c_st = cpu_now() - c0;
    if (!rc) {
        char cs[64], ex[400], cf[128];
        double f_map = 2.0 * (double)n * (double)d * (double)R;
        double f_st = (double)n * (double)D * (double)(D + 1) + 2.0 * (double)n * (double)D * 10;
        cpu_fields(cf, sizeof cf, f_st, c_st);
        snprintf(cs, sizeof cs, "client n=%zu R=%zu", n, R);
        snprintf(ex, sizeof ex,
                 "\"map_seconds\":%.3f,\"stats_seconds\":%.3f,\"stats_gflops\":%.2f,"
                 "\"flops\":\"syrk n D^2 + gemm 2 n D C\",\"target\":0.6,\"target_met\":%s,"
                 "\"map_gflops\":%.2f%s",
                 t_map, t_st, f_st / t_st / 1e9, f_st / t_st / 1e9 / ref >= 0.6 ? "true" : "false",
                 f_map / t_map / 1e9, cf);
        fk_bench_emit(json, B, cs, "stats_ratio_to_dgemm", f_st / t_st / 1e9 / ref, ex);
        size_t up = 8 * fk_dica_upload_values(R, 1, 10);
        snprintf(ex, sizeof ex, "\"upload_bytes\":%zu,\"raw_bytes\":%zu", up, 8 * n * d);
        fk_bench_emit(json, B, cs, "upload_over_raw", (double)up / (double)(8 * n * d), ex);
    }
    fk_rff_close(&rf);
    fk_mat_close(&X);
    fk_mat_close(&Phi);
    fk_mat_close(&Psi);
    free(y);
    free(dom);
    return rc;
}

FK_CHECKRETURN static int server_solve(int json, size_t R, double ref, const fk_dica_stats *st, fk_err *err)
{
    fk_dica_opts o;
    fk_dica_opts_default(&o, FK_DICA_DICA, 9);
    fk_dica_fit f;
    double t0 = fk_bench_now(), c0 = cpu_now();
    int rc = fk_dica_solve(st, &o, &f, err);
    double t = fk_bench_now() - t0, ct = cpu_now() - c0;
    if (rc)
        return rc;
    double D = 2.0 * (double)R, fl = 4.0 / 3.0 * D * D * D;
    char cs[64], ex[400], cf[128];
    cpu_fields(cf, sizeof cf, fl, ct);
    snprintf(cs, sizeof cs, "server solve D=%.0f", D);
    snprintf(ex, sizeof ex,
             "\"seconds\":%.3f,\"gflops\":%.2f,\"flops\":\"4/3 D^3 (2 potrf + potri)\","
             "\"target\":0.6,\"target_met\":%s,\"peak_mb\":%.0f%s",
             t, fl / t / 1e9, fl / t / 1e9 / ref >= 0.6 ? "true" : "false", fk_bench_peak_mb(),
             cf);
    fk_bench_emit(json, B, cs, "ratio_to_dgemm", fl / t / 1e9 / ref, ex);
    fk_dica_fit_close(&f);
    return FK_OK;
}

/* Where the kernel-map solver's time goes: the Gaussian Gram matrix (one dsyrk plus exp),
 * the full eigendecomposition of the centred n x n kernel (dsyevd, what the map needs when
 * nearly all of K~'s spectrum is above the cut; half of its tridiagonal reduction is level-2
 * dsymv, memory bound); share_of_fit is of the kernel-map fit's CPU seconds. */
FK_CHECKRETURN static int kernel_parts(int json, size_t n, const fk_mat *X, double ref, double t_fit, fk_err *err)
{
    fk_mat K = {0};
    double t0 = fk_bench_now(), c0 = cpu_now();
    int rc = fk_dica_gauss_gram(X, X, 40.0, &K, err);
    double t_gram = fk_bench_now() - t0, c_gram = cpu_now() - c0, c_eig = 0;
    double *w = rc ? NULL : malloc(n * sizeof *w);
    if (!rc && !w)
        rc = fk_err_set(err, FK_ENOMEM, "out of memory");
    double t_eig = 0;
    if (!rc) {
        /* centre as the fit does, so the spectrum (and dsyevd's deflation) is the same */
        double *c = calloc(n, sizeof *c), g = 0;
        for (size_t i = 0; c && i < n; i++)
            for (size_t j = 0; j < n; j++)
                c[j] += K.data[i * n + j] / (double)n;
        for (size_t j = 0; c && j < n; j++)
            g += c[j] / (double)n;
        for (size_t i = 0; c && i < n; i++)
            for (size_t j = 0; j < n; j++)
                K.data[i * n + j] += g - c[i] - c[j];
        free(c);
        t0 = fk_bench_now();
        c0 = cpu_now();
        lapack_int info = LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'U', (lapack_int)n, K.data,
                                         (lapack_int)n, w);
        t_eig = fk_bench_now() - t0;
        c_eig = cpu_now() - c0;
        if (info)
            rc = fk_err_set(err, FK_ENUMERIC, "dsyevd failed (%d)", (int)info);
    }
    if (!rc) {
        double nn = (double)n, f_gram = nn * nn * 800, f_eig = 10.0 / 3.0 * nn * nn * nn;
        char cs[64], ex[480], cf[128];
        cpu_fields(cf, sizeof cf, f_gram, c_gram);
        snprintf(cs, sizeof cs, "kernel dica n=%zu gram", n);
        snprintf(ex, sizeof ex,
                 "\"seconds\":%.3f,\"gflops\":%.2f,\"flops\":\"n^2 d (dsyrk + exp)\","
                 "\"share_of_fit\":%.2f,\"cpu_seconds\":%.3f,\"target\":0.6,\"target_met\":%s%s",
                 t_gram, f_gram / t_gram / 1e9, c_gram / t_fit, c_gram,
                 f_gram / t_gram / 1e9 / ref >= 0.6 ? "true" : "false", cf);
        fk_bench_emit(json, B, cs, "ratio_to_dgemm", f_gram / t_gram / 1e9 / ref, ex);
        cpu_fields(cf, sizeof cf, f_eig, c_eig);
        snprintf(cs, sizeof cs, "kernel dica n=%zu dsyevd", n);
        snprintf(ex, sizeof ex,
                 "\"seconds\":%.3f,\"gflops\":%.2f,\"flops\":\"10/3 n^3 (dsytrd 4/3 + dormtr "
                 "2; divide and conquer not counted)\",\"share_of_fit\":%.2f,\"cpu_seconds\":%.3f,"
                 "\"target\":0.6,\"target_met\":%s%s",
                 t_eig, f_eig / t_eig / 1e9, c_eig / t_fit, c_eig,
                 f_eig / t_eig / 1e9 / ref >= 0.6 ? "true" : "false", cf);
        fk_bench_emit(json, B, cs, "ratio_to_dgemm", f_eig / t_eig / 1e9 / ref, ex);
    }
    free(w);
    fk_mat_close(&K);
    return rc;
}

/* One kernel fit of DICA (m = 9, 10 classes) as a row: the default solver (through R^-1 in
 * n-space: the gram n^2 d, one Cholesky n^3/3, products with Dy = 10 columns) or, with
 * map set, the reduced solver on the kernel map of §5.3 (the eigendecomposition of K~,
 * 10/3 n^3 counted as for dsyevd). */
FK_CHECKRETURN static int kernel_fit_row(int json, size_t n, const fk_mat *X, const int *y, const long *dom,
                          int map, double ref, double *t_out, fk_err *err)
{
    fk_dica_opts o;
    fk_dica_opts_default(&o, FK_DICA_DICA, 9);
    o.kernel_map = map;
    fk_dica_kernel k;
    double t0 = fk_bench_now(), c0 = cpu_now();
    int rc = fk_dica_kernel_fit(&k, X, y, 10, NULL, 0, dom, 40.0, &o, err);
    double t = fk_bench_now() - t0, ct = cpu_now() - c0;
    if (rc)
        return rc;
    double nn = (double)n, r = (double)k.r;
    double fl = map ? nn * nn * 800 + 10.0 / 3.0 * nn * nn * nn + r * r * r / 3.0
                    : nn * nn * 800 + nn * nn * nn / 3.0 + 10 * nn * nn * 10 + 2 * nn * nn * 9;
    char cs[80], ex[560], cf[128];
    cpu_fields(cf, sizeof cf, fl, ct);
    snprintf(cs, sizeof cs, "kernel dica n=%zu%s", n, map ? " kernel map" : "");
    snprintf(ex, sizeof ex,
             "\"seconds\":%.3f,\"gflops\":%.2f,\"flops\":\"%s\",\"r\":%zu,\"cpu_seconds\":%.3f,"
             "\"target\":0.6,\"target_met\":%s,\"peak_mb\":%.0f%s",
             t, fl / t / 1e9,
             map ? "n^2 d + 10/3 n^3 + r^3/3 (gram, eigendecomposition of K~, potrf of P)"
                 : "n^2 d + n^3/3 + 10 n^2 Dy + 2 n^2 m (gram, potrf of R, products)",
             k.r, ct, fl / t / 1e9 / ref >= 0.6 ? "true" : "false", fk_bench_peak_mb(), cf);
    fk_bench_emit(json, B, cs, "ratio_to_dgemm", fl / t / 1e9 / ref, ex);
    fk_dica_kernel_close(&k);
    *t_out = ct;
    return FK_OK;
}

/* The kernel fit by both solvers on the same rows (the CPU-time ratio map / default is the
 * speed-up of solving without the eigendecomposition), then where the map's time goes. */
FK_CHECKRETURN static int kernel_solver(int json, size_t n, double ref, fk_err *err)
{
    fk_mat X;
    int *y;
    long *dom;
    if (synthetic_rows(n, 800, 4, &X, &y, &dom, err))
        return FK_ENOMEM;
    double c_new = 0, c_map = 0;
    int rc = kernel_fit_row(json, n, &X, y, dom, 0, ref, &c_new, err);
    if (!rc)
        rc = kernel_fit_row(json, n, &X, y, dom, 1, ref, &c_map, err);
    if (!rc) {
        char cs[64], ex[160];
        snprintf(cs, sizeof cs, "kernel dica n=%zu speed-up", n);
        snprintf(ex, sizeof ex, "\"cpu_seconds_default\":%.3f,\"cpu_seconds_kernel_map\":%.3f",
                 c_new, c_map);
        fk_bench_emit(json, B, cs, "cpu_ratio_map_to_default", c_map / c_new, ex);
        rc = kernel_parts(json, n, &X, ref, c_map, err);
    }
    fk_mat_close(&X);
    free(y);
    free(dom);
    return rc;
}

/* The message sizes of spec §7.6, from the job's own formula (tests/test_methods_dica.c checks
 * it against the encoded bundles). */
static void sizes(int json)
{
    static const struct {
        const char *name;
        size_t R, Dy, Nq, m;
        double up, down; /* spec, MB and KB */
    } s[6] = {{"office R=500", 500, 10, 1, 9, 4.09, 80},
              {"office R=1000", 1000, 10, 1, 9, 16.2, 160},
              {"office R=2000", 2000, 10, 1, 9, 64.4, 320},
              {"parkinsons R=500", 500, 100, 1, 20, 4.85, 168},
              {"parkinsons udica R=500", 500, 0, 1, 20, 4.01, 168},
              {"gvhd proxy R=250 7 domains", 250, 2, 7, 1, 1.04, 8}};
    for (int i = 0; i < 6; i++) {
        char cs[64], ex[160];
        snprintf(cs, sizeof cs, "message %s", s[i].name);
        snprintf(ex, sizeof ex, "\"spec_MB\":%.2f,\"download_KB\":%.1f,\"spec_download_KB\":%.0f",
                 s[i].up, 8e-3 * (double)fk_dica_download_values(s[i].R, s[i].m), s[i].down);
        fk_bench_emit(json, B, cs, "upload_MB",
                      8e-6 * (double)fk_dica_upload_values(s[i].R, s[i].Nq, s[i].Dy), ex);
    }
}

int fk_bench_dica(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help")) {
            printf("usage: fedkern bench dica [--json] [--max-R R] [--max_n N]\n"
                   "Client statistics and server solve of federated DICA (R = 500..max-R, 2000)\n"
                   "and the kernel solver (n = 500..max-n, 2000) on SURF-sized synthetic rows,\n"
                   "GFLOP/s as a ratio to dgemm measured in the same run.\n");
            return 0;
        }
    fk_params p;
    fk_params_init(&p);
    fk_err err = {0};
    fk_err_clear(&err);
    int json = 0;
    long maxR = 2000, maxn = 2000;
    int rc = fk_params_parse_args(&p, &argc, argv, &err);
    if (!rc)
        rc = fk_params_bool(&p, "json", 0, &json, &err);
    if (!rc)
        rc = fk_params_int(&p, "max-R", 2000, 100, 4000, &maxR, &err);
    if (!rc)
        rc = fk_params_int(&p, "max_n", 2000, 100, 8000, &maxn, &err);
    if (!rc && (argc > 0 || fk_params_unused(&p)))
        rc = fk_err_set(&err, FK_EINVAL, "unexpected argument; see --help");
    double ref = 0;
    if (!rc)
        sizes(json);
    if (!rc) {
        ref = fk_bench_dgemm_rate(2000, 800, 2000, 3);
        cpu_ref = dgemm_cpu_rate(2000, 800, 2000, 3);
        char ex[64];
        snprintf(ex, sizeof ex, "\"cpu_gflops\":%.2f", cpu_ref);
        fk_bench_emit(json, B, "dgemm 2000x800x2000", "gflops", ref, ex);
    }
    static const size_t Rs[3] = {500, 1000, 2000};
    for (int i = 0; i < 3 && !rc && Rs[i] <= (size_t)maxR; i++) {
        fk_dica_stats st;
        rc = client_stats(json, 1123, Rs[i], ref, &st, &err);
        if (!rc)
            rc = server_solve(json, Rs[i], ref, &st, &err);
        fk_dica_stats_close(&st);
    }
    static const size_t ns[3] = {500, 1000, 2000};
    for (int i = 0; i < 3 && !rc && ns[i] <= (size_t)maxn; i++)
        rc = kernel_solver(json, ns[i], ref, &err);
    fk_params_close(&p);
    if (rc) {
        fprintf(stderr, "fedkern bench dica: %s\n", err.msg);
        return 1;
    }
    return 0;
}
