/* fedkern bench sfl --pen: the pooled sfl fit on pen-digits 1 vs 7 (all 1557 training rows of
 * the two classes, 728 test rows of other writers) against LIBSVM (scikit-learn's SVC, the
 * Debian package) run by bench/sfl/peer_svc.py in the same run: CPU seconds of both, the ratio,
 * held-out accuracies and kernel / support-vector counts. Our side: the estimator with kernels
 * at the rows x the widths (x / x_scale, eps 0.5, resilient quadratic c = 100, gamma = 0), the
 * issue-36 setting. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/sfl/sfl_bench.h"
#include "common/data/catalog.h"
#include "common/models/sfl/sfl.h"

static const char B[] = "sfl";

/* The pair's rows of ds, scaled by 1/scale, labels a -> +1, b -> -1. */
FK_CHECKRETURN static int pair_rows(const fk_dataset *ds, int a, int b, double scale, double **X,
                                    double **y, size_t *n, fk_err *err)
{
    size_t d = ds->X.cols, m = 0;
    *X = malloc(ds->X.rows * d * sizeof **X);
    *y = malloc(ds->X.rows * sizeof **y);
    if (!*X || !*y) {
        free(*X);
        free(*y);
        *X = *y = NULL;
        return fk_err_set(err, FK_ENOMEM, "bench sfl: out of memory for the pen-digits rows");
    }
    for (size_t i = 0; i < ds->X.rows; i++)
        if (ds->y_raw[i] == a || ds->y_raw[i] == b) {
            for (size_t j = 0; j < d; j++)
                (*X)[m * d + j] = ds->X.data[i * ds->X.ld + j] / scale;
            (*y)[m++] = ds->y_raw[i] == a ? 1 : -1;
        }
    *n = m;
    return FK_OK;
}

/* Run the peer script with Debian's python3 (scikit-learn is the Debian package, not a
 * virtual environment's); its one output line is "seconds accuracy n_sv". */
static int run_peer(const char *script, const char *dir, double *secs, double *acc, double *nsv)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' --data_dir '%s' 2>/dev/null", script, dir);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    int got = fscanf(f, "%lf %lf %lf", secs, acc, nsv);
    int st = pclose(f);
    return got == 3 && st == 0 ? 0 : -1;
}

int fk__bench_sfl_pen(int json, const char *dir, const char *peer, double scale, double wmin,
                      double wmax, int Q, int reps, fk_err *err)
{
    fk_dataset tr, te;
    int rc = fk_bench_data_dir(dir, err);
    if (rc)
        return rc;
    if ((rc = fk_catalog_load(&tr, dir, "pendigits/train", err)))
        return rc;
    if ((rc = fk_catalog_load(&te, dir, "pendigits/test", err))) {
        fk_dataset_close(&tr);
        return rc;
    }
    double *X = NULL, *y = NULL, *Xt = NULL, *yt = NULL;
    size_t N = 0, Nt = 0;
    int p = (int)tr.X.cols;
    rc = pair_rows(&tr, 1, 7, scale, &X, &y, &N, err);
    if (!rc)
        rc = pair_rows(&te, 1, 7, scale, &Xt, &yt, &Nt, err);
    double w[16], best = INFINITY, acc = NAN;
    size_t kernels = 0;
    long iters = 0;
    int status = 0;
    if (!rc && (Q < 1 || Q > 16))
        rc = fk_err_set(err, FK_EINVAL, "bench sfl: --pen_widths in [1, 16]");
    for (int r = 0; !rc && r < reps; r++) {
        fk_sfl_widths(wmin, wmax, Q, w);
        fk_sfl_atoms a;
        fk_sfl_opts o;
        fk_sfl_opts_default(&o, FK_SFL_CLASSIFY);
        o.res = FK_SFL_QUAD;
        fk_sfl_fit f;
        fk_sfl_model m = {0};
        double t0 = fk_bench_cpu_now();
        rc = fk_sfl_atoms_candidates(&a, X, N, p, w, Q, err);
        if (rc)
            break;
        rc = fk_sfl_solve(X, y, N, p, &a, &o, NULL, &f, err);
        if (!rc && (rc = fk_sfl_model_support(&a, f.alpha, &m, err)))
            fk_sfl_fit_close(&f);
        double t = fk_bench_cpu_now() - t0;
        fk_sfl_atoms_close(&a);
        if (rc)
            break;
        best = t < best ? t : best;
        double *ft = malloc(Nt * sizeof *ft), right = 0;
        if (!ft) {
            rc = fk_err_set(err, FK_ENOMEM, "bench sfl: out of memory");
        } else {
            fk_sfl_predict(&m, Xt, Nt, ft);
            for (size_t i = 0; i < Nt; i++)
                right += (ft[i] >= 0 ? 1.0 : -1.0) == yt[i];
            acc = right / (double)Nt;
        }
        free(ft);
        kernels = m.K;
        iters = f.iters;
        status = f.status;
        fk_sfl_model_close(&m);
        fk_sfl_fit_close(&f);
    }
    if (!rc) {
        char cs[96], ex[64];
        snprintf(cs, sizeof cs, "pendigits 1v7 pooled N=%zu widths %g-%g x%d", N, wmin, wmax, Q);
        snprintf(ex, sizeof ex, "\"status\":\"%s\"", fk_sfl_status_name(status));
        fk_bench_emit(json, B, cs, "sfl_cpu_seconds", best, ex);
        fk_bench_emit(json, B, cs, "sfl_iterations", (double)iters, NULL);
        fk_bench_emit(json, B, cs, "sfl_accuracy", acc, NULL);
        fk_bench_emit(json, B, cs, "sfl_kernels", (double)kernels, NULL);
        double ps = NAN, pa = NAN, pn = NAN;
        if (peer && *peer && run_peer(peer, dir, &ps, &pa, &pn) != 0) {
            fprintf(stderr,
                    "fedkern bench sfl: the peer '%s' did not run (python3 with "
                    "scikit-learn, the Debian package python3-sklearn, is needed); its "
                    "rows are NaN\n",
                    peer);
            ps = pa = pn = NAN;
        }
        fk_bench_emit(json, B, cs, "libsvm_cpu_seconds", ps, NULL);
        fk_bench_emit(json, B, cs, "libsvm_accuracy", pa, NULL);
        fk_bench_emit(json, B, cs, "libsvm_support_vectors", pn, NULL);
        fk_bench_emit(json, B, cs, "sfl_over_libsvm_time", best / ps, NULL);
        fk_bench_emit(json, B, cs, "sfl_minus_libsvm_accuracy", acc - pa, NULL);
    }
    free(X);
    free(y);
    free(Xt);
    free(yt);
    fk_dataset_close(&tr);
    fk_dataset_close(&te);
    return rc;
}
