/* fedkern bench fidelity sfl, E2.5 Fig. 11 substitute (spec 004 §8): digits "0" versus "1" of
 * MNIST-2000 (JDA version, 256-d; 196 zeros, 227 ones) projected on the first 3 principal
 * components of the training fold, (PII) with free centres and widths on a 3-D grid of atoms,
 * 5-fold cross-validation; success: accuracy >= 99 % (the dissertation: 99.62 % on MNIST-60k). */
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/sfl/sfl_bench.h"
#include "common/data/catalog.h"
#include "common/la/rng.h"
#include "common/models/sfl/sfl.h"

/* Top-3 principal axes of the n training rows (X: n x d, row-major) into V (d x 3), mean mu. */
FK_CHECKRETURN static int pca3(const double *X, size_t n, size_t d, double *mu, double *V,
                               fk_err *err)
{
    double *C = malloc(d * d * sizeof *C), *Xc = malloc(n * d * sizeof *Xc),
           *ev = malloc(d * sizeof *ev), *Z = malloc(d * 3 * sizeof *Z);
    lapack_int *sup = malloc(2 * d * sizeof *sup), m = 0;
    int rc = FK_OK;
    if (!C || !Xc || !ev || !Z || !sup) {
        rc = fk_err_set(err, FK_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t j = 0; j < d; j++) {
        mu[j] = 0;
        for (size_t i = 0; i < n; i++)
            mu[j] += X[i * d + j] / (double)n;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            Xc[i * d + j] = X[i * d + j] - mu[j];
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, (int)n, 1.0 / (double)n, Xc,
                (int)d, 0.0, C, (int)d);
    /* eigenvalues in ascending order: the top three are indices d-3 .. d-1 */
    lapack_int info = LAPACKE_dsyevr(LAPACK_ROW_MAJOR, 'V', 'I', 'U', (lapack_int)d, C,
                                     (lapack_int)d, 0, 0, (lapack_int)d - 2, (lapack_int)d, 0, &m,
                                     ev, Z, 3, sup);
    if (info != 0 || m != 3) {
        rc = fk_err_set(err, FK_ENUMERIC, "E2.5 PCA: dsyevr failed (%d)", (int)info);
        goto out;
    }
    for (size_t j = 0; j < d; j++) /* largest first */
        for (int k = 0; k < 3; k++)
            V[j * 3 + (size_t)k] = Z[j * 3 + (size_t)(2 - k)];
out:
    free(C);
    free(Xc);
    free(ev);
    free(Z);
    free(sup);
    return rc;
}

/* Scores of n rows on the axes, divided by sd (the first axis' training sd). */
static void project(const double *X, size_t n, size_t d, const double *mu, const double *V,
                    double sd, double *S)
{
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) {
            double s = 0;
            for (size_t j = 0; j < d; j++)
                s += (X[i * d + j] - mu[j]) * V[j * 3 + (size_t)k];
            S[i * 3 + (size_t)k] = s / sd;
        }
}

/* One fold: PCA on the training rows, (PII) on the grid, the support model on the test rows. */
FK_CHECKRETURN static int e25_fold(const double *X, const double *y, const int *fold, size_t n,
                                   size_t d, int f, long T, double grel, double out[4], fk_err *err)
{
    size_t ntr = 0, nte = 0;
    for (size_t i = 0; i < n; i++)
        ntr += fold[i] != f;
    nte = n - ntr;
    double *Xtr = malloc(ntr * d * sizeof *Xtr), *Xte = malloc(nte * d * sizeof *Xte),
           *ytr = malloc(ntr * sizeof *ytr), *yte = malloc(nte * sizeof *yte),
           *Str = malloc(ntr * 3 * sizeof *Str), *Ste = malloc(nte * 3 * sizeof *Ste),
           *mu = malloc(d * sizeof *mu), *V = malloc(d * 3 * sizeof *V),
           *ft = malloc(nte * sizeof *ft);
    fk_sfl_atoms a = {0};
    int rc = (!Xtr || !Xte || !ytr || !yte || !Str || !Ste || !mu || !V || !ft)
                 ? fk_err_set(err, FK_ENOMEM, "out of memory")
                 : FK_OK;
    for (size_t i = 0, t = 0, e = 0; !rc && i < n; i++) {
        if (fold[i] != f) {
            memcpy(Xtr + t * d, X + i * d, d * sizeof *X);
            ytr[t++] = y[i];
        } else {
            memcpy(Xte + e * d, X + i * d, d * sizeof *X);
            yte[e++] = y[i];
        }
    }
    if (!rc)
        rc = pca3(Xtr, ntr, d, mu, V, err);
    if (!rc) {
        project(Xtr, ntr, d, mu, V, 1, Str);
        double sd = 0;
        for (size_t i = 0; i < ntr; i++)
            sd += Str[i * 3] * Str[i * 3] / (double)ntr;
        sd = sqrt(sd);
        project(Xtr, ntr, d, mu, V, sd, Str);
        project(Xte, nte, d, mu, V, sd, Ste);
        /* box: the training scores enlarged by one w_max; h = w_min (quadrature error 1.6e-4
         * relative at h = w, spec §11 item 5) keeps J near 10^4 in 3-D */
        double lo[3], hi[3], widths[2] = {0.5, 1.0};
        for (int k = 0; k < 3; k++) {
            lo[k] = INFINITY;
            hi[k] = -INFINITY;
            for (size_t i = 0; i < ntr; i++) {
                lo[k] = fmin(lo[k], Str[i * 3 + (size_t)k] - widths[1]);
                hi[k] = fmax(hi[k], Str[i * 3 + (size_t)k] + widths[1]);
            }
        }
        rc = fk_sfl_atoms_grid(&a, 3, lo, hi, widths[0], widths, 2, ntr, (size_t)1 << 30, err);
    }
    fk_sfl_fit fit;
    fk_sfl_opts o;
    fk_sfl_opts_default(&o, FK_SFL_CLASSIFY);
    o.res = FK_SFL_QUAD; /* c = 100 */
    o.T = T;
    o.gamma_rel = grel;
    if (!rc && !(rc = fk_sfl_solve(Str, ytr, ntr, 3, &a, &o, NULL, &fit, err))) {
        fk_sfl_model m;
        size_t nb = 0;
        int *label = malloc(a.J * sizeof *label);
        if (!label)
            rc = fk_err_set(err, FK_ENOMEM, "out of memory");
        if (!rc && !(rc = fk_sfl_bumps(&a, fit.alpha, 1.0, label, &nb, err)) &&
            !(rc = fk_sfl_model_support(&a, fit.alpha, &m, err))) {
            fk_sfl_predict(&m, Ste, nte, ft);
            size_t right = 0;
            for (size_t i = 0; i < nte; i++)
                right += (ft[i] >= 0 ? 1.0 : -1.0) == yte[i];
            out[0] = (double)right / (double)nte;
            out[1] = (double)fit.support;
            out[2] = (double)nb;
            out[3] = (double)a.J;
            fk_sfl_model_close(&m);
        }
        free(label);
        fk_sfl_fit_close(&fit);
    }
    fk_sfl_atoms_close(&a);
    free(Xtr);
    free(Xte);
    free(ytr);
    free(yte);
    free(Str);
    free(Ste);
    free(mu);
    free(V);
    free(ft);
    return rc;
}

int fk__bench_sfl_e25(int json, const char *dir, long T, double grel, fk_err *err)
{
    fk_dataset ds;
    int rc = fk_catalog_load(&ds, dir, "mnist-usps/mnist", err);
    if (rc)
        return rc;
    /* JDA labels 1..10: 1 is the digit 0, 2 the digit 1 */
    size_t d = ds.X.cols, n = 0;
    double *X = malloc(ds.X.rows * d * sizeof *X), *y = malloc(ds.X.rows * sizeof *y);
    int *fold = malloc(ds.X.rows * sizeof *fold), seen[2] = {0};
    if (!X || !y || !fold)
        rc = fk_err_set(err, FK_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < ds.X.rows; i++) {
        int c = (int)ds.y_raw[i];
        if (c != 1 && c != 2)
            continue;
        for (size_t j = 0; j < d; j++)
            X[n * d + j] = ds.X.data[i * ds.X.ld + j];
        y[n] = c == 1 ? 1 : -1;
        fold[n++] = seen[c - 1]++ % 5; /* stratified 5 folds, file order */
    }
    double sum[4] = {0}, lo = 1, t0 = fk_bench_now();
    for (int f = 0; f < 5 && !rc; f++) {
        double one[4] = {0};
        if (!(rc = e25_fold(X, y, fold, n, d, f, T, grel, one, err))) {
            for (int k = 0; k < 4; k++)
                sum[k] += one[k] / 5;
            lo = fmin(lo, one[0]);
        }
    }
    if (!rc) {
        const char *cs = "E2.5 Fig.11 MNIST-2000 0 vs 1 PCA-3";
        char ex[200];
        snprintf(ex, sizeof ex,
                 "\"published\":0.9962,\"target\":\">= 0.99 (5-fold CV)\",\"target_met\":%s",
                 sum[0] >= 0.99 ? "true" : "false");
        fk_bench_emit(json, "sfl", cs, "accuracy_mean_over_folds", sum[0], ex);
        fk_bench_emit(json, "sfl", cs, "accuracy_worst_fold", lo, NULL);
        fk_bench_emit(json, "sfl", cs, "support_atoms", sum[1], NULL);
        fk_bench_emit(json, "sfl", cs, "bumps", sum[2], NULL);
        fk_bench_emit(json, "sfl", cs, "atoms", sum[3], NULL);
        fk_bench_emit(json, "sfl", cs, "rows", (double)n, NULL);
        fk_bench_emit(json, "sfl", cs, "gamma_rel", grel, NULL);
        fk_bench_emit(json, "sfl", cs, "seconds", fk_bench_now() - t0, NULL);
    }
    free(X);
    free(y);
    free(fold);
    fk_dataset_close(&ds);
    return rc;
}
