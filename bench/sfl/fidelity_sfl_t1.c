/* fedkern bench fidelity sfl, E2.5 Table 1 substitute (spec 004 §8): Fashion-MNIST with the
 * dissertation's protocol at a bounded size: one-vs-one over the 10 classes (45 problems,
 * majority vote), candidate centres from k-means per class, and the rows of Table 1:
 *   (PI'), training samples as centres      (kernels at the pair's rows, one width)
 *   (PI'), k-means centres                  (kernels at the pair's 2 k centres, one width)
 *   (PII''), k-means centres, widths free   (2 k centres x 3 widths, gamma_rel 0 and up)
 * Success (the table's shape): the (PII'') row whose kernel count is nearest the (PI')-k-means
 * count is within 1 point of it, and accuracy falls as gamma removes kernels. Sizes: n_per
 * training rows per class (the dissertation: 6000), k_per centres per class (400), test_per
 * test rows per class; features are pixels / 255 and the widths are multiples of the median
 * distance between training rows (0.5, 1, 1.5; (PI') at 1). */
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
#include "common/models/sfl.h"

enum { NCL = 10, NG = 5 };
static const double t1_grel[NG] = {0, 0.03, 0.1, 0.3, 0.6};

/* Lloyd's k-means with k-means++ seeding (spec §9.5): k centres of the n rows of X (n x d)
 * into C (k x d); at most 100 iterations, stops when no row changes cluster. */
static int kmeans(const double *X, size_t n, size_t d, int k, uint64_t seed, double *C,
                  fk_err *err)
{
    double *dm = malloc(n * sizeof *dm);
    int *as = malloc(n * sizeof *as), *cnt = malloc((size_t)k * sizeof *cnt);
    if (!dm || !as || !cnt) {
        free(dm);
        free(as);
        free(cnt);
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    }
    fk_rng g;
    fk_rng_init(&g, seed, 0x6b6dULL);
    memcpy(C, X + fk_rng_below(&g, n) * d, d * sizeof *C);
    for (size_t i = 0; i < n; i++)
        dm[i] = INFINITY;
    for (int c = 1; c < k; c++) { /* k-means++: the next centre with probability ~ D^2 */
        double tot = 0;
        for (size_t i = 0; i < n; i++) {
            double s = 0;
            for (size_t j = 0; j < d; j++)
                s += (X[i * d + j] - C[(size_t)(c - 1) * d + j]) *
                     (X[i * d + j] - C[(size_t)(c - 1) * d + j]);
            dm[i] = fmin(dm[i], s);
            tot += dm[i];
        }
        double r = fk_rng_uniform(&g) * tot, acc = 0;
        size_t pick = n - 1;
        for (size_t i = 0; i < n; i++)
            if ((acc += dm[i]) >= r) {
                pick = i;
                break;
            }
        memcpy(C + (size_t)c * d, X + pick * d, d * sizeof *C);
    }
    for (size_t i = 0; i < n; i++)
        as[i] = -1;
    for (int it = 0; it < 100; it++) {
        int moved = 0;
        for (size_t i = 0; i < n; i++) {
            double best = INFINITY;
            int bc = 0;
            for (int c = 0; c < k; c++) {
                double s = 0;
                for (size_t j = 0; j < d; j++)
                    s += (X[i * d + j] - C[(size_t)c * d + j]) * (X[i * d + j] - C[(size_t)c * d + j]);
                if (s < best) {
                    best = s;
                    bc = c;
                }
            }
            moved += as[i] != bc;
            as[i] = bc;
        }
        if (!moved)
            break;
        memset(cnt, 0, (size_t)k * sizeof *cnt);
        for (size_t i = 0; i < n; i++)
            cnt[as[i]]++;
        for (int c = 0; c < k; c++) /* an emptied cluster keeps its centre */
            if (cnt[c])
                memset(C + (size_t)c * d, 0, d * sizeof *C);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < d; j++)
                C[(size_t)as[i] * d + j] += X[i * d + j] / cnt[as[i]];
    }
    free(dm);
    free(as);
    free(cnt);
    return FK_OK;
}

/* (PI') with fixed centres Z (spec §9.1, general Z): min a^T K_ZZ a s.t. y_n (K_XZ a)_n >= 1 - eps
 * with the quadratic soft margin c: dual max_{lambda >= 0} (1 - eps) sum lambda
 * - 1/4 lambda^T Y M Y lambda - ||lambda||^2 / (2c), M = K_XZ K_ZZ^-1 K_XZ^T, and
 * a = 1/2 K_ZZ^-1 K_XZ^T Y lambda; FISTA with step 1/L, T iterations. a: k weights out. */
static int pi_centres(const double *X, const double *y, size_t N, int p, const double *Z, size_t k,
                      double w, double eps, double c, long T, double *a, fk_err *err)
{
    fk_sfl_atoms at = {.J = k, .p = p, .s = (double *)Z, .w = NULL, .v = NULL};
    double *wv = malloc(k * sizeof *wv), *Kxz = malloc(N * k * sizeof *Kxz),
           *Kzz = malloc(k * k * sizeof *Kzz), *M = malloc(N * N * sizeof *M),
           *B = malloc(k * N * sizeof *B), *buf = malloc(5 * N * sizeof *buf);
    int rc = FK_OK;
    if (!wv || !Kxz || !Kzz || !M || !B || !buf) {
        rc = fk_err_set(err, FK_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t j = 0; j < k; j++)
        wv[j] = w;
    at.w = wv;
    fk_sfl_kernel(X, N, p, &at, Kxz);
    fk_sfl_kernel(Z, k, p, &at, Kzz);
    double tr = 0;
    for (size_t j = 0; j < k; j++)
        tr += Kzz[j * k + j];
    for (size_t j = 0; j < k; j++)
        Kzz[j * k + j] += 1e-10 * tr / (double)k + 1e-12;
    if (LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', (lapack_int)k, Kzz, (lapack_int)k) != 0) {
        rc = fk_err_set(err, FK_ENUMERIC, "(PI') k-means: K_ZZ is not positive definite");
        goto out;
    }
    for (size_t j = 0; j < k; j++) /* B = L^-1 K_XZ^T (k x N), M = Y B^T B Y */
        for (size_t n = 0; n < N; n++)
            B[j * N + n] = Kxz[n * k + j] * y[n];
    cblas_dtrsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, (int)k, (int)N,
                1.0, Kzz, (int)k, B, (int)N);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)N, (int)N, (int)k, 1.0, B, (int)N,
                B, (int)N, 0.0, M, (int)N);
    double *lam = buf, *prev = buf + N, *lh = buf + 2 * N, *g = buf + 3 * N, *u = buf + 4 * N;
    for (size_t n = 0; n < N; n++)
        u[n] = 1.0 + 0.001 * (double)(n % 7);
    double L = 0;
    for (int it = 0; it < 50; it++) { /* top eigenvalue of M by power iteration */
        double nu = cblas_dnrm2((int)N, u, 1);
        cblas_dscal((int)N, 1 / nu, u, 1);
        cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)N, 1.0, M, (int)N, u, 1, 0.0, g, 1);
        L = cblas_ddot((int)N, u, 1, g, 1);
        memcpy(u, g, N * sizeof *u);
    }
    L = 1.02 * 0.5 * L + 1.0 / c;
    memset(lam, 0, N * sizeof *lam);
    memset(prev, 0, N * sizeof *prev);
    double th = 1;
    for (long t = 0; t < T; t++) {
        double th1 = 0.5 * (1 + sqrt(1 + 4 * th * th)), beta = (th - 1) / th1;
        th = th1;
        for (size_t n = 0; n < N; n++)
            lh[n] = lam[n] + beta * (lam[n] - prev[n]);
        cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)N, 1.0, M, (int)N, lh, 1, 0.0, g, 1);
        memcpy(prev, lam, N * sizeof *lam);
        for (size_t n = 0; n < N; n++) {
            double z = lh[n] + ((1 - eps) - 0.5 * g[n] - lh[n] / c) / L;
            lam[n] = z > 0 ? z : 0;
        }
    }
    /* a = 1/2 L^-T B (Y lambda): B already holds the Y scaling */
    cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)k, (int)N, 0.5, B, (int)N, lam, 1, 0.0, a, 1);
    cblas_dtrsv(CblasRowMajor, CblasLower, CblasTrans, CblasNonUnit, (int)k, Kzz, (int)k, a, 1);
out:
    free(wv);
    free(Kxz);
    free(Kzz);
    free(M);
    free(B);
    free(buf);
    return rc;
}

/* Per-class rows: the first `per` rows of each class after a seeded shuffle, scaled by s. */
static int class_rows(const fk_dataset *ds, size_t per, uint64_t seed, double *X, int *cls,
                      fk_err *err)
{
    size_t n = ds->X.rows, d = ds->X.cols, have[NCL] = {0}, m = 0;
    int *idx = malloc(n * sizeof *idx);
    if (!idx)
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        idx[i] = (int)i;
    fk_rng g;
    fk_rng_init(&g, seed, 0);
    fk_rng_shuffle(&g, idx, n);
    for (size_t t = 0; t < n && m < per * NCL; t++) { /* class by class, in shuffled order */
        size_t i = (size_t)idx[t];
        int c = (int)ds->y_raw[i];
        if (c < 0 || c >= NCL || have[c] >= per)
            continue;
        for (size_t j = 0; j < d; j++)
            X[m * d + j] = ds->X.data[i * ds->X.ld + j];
        cls[m++] = c;
        have[c]++;
    }
    free(idx);
    return m == per * NCL ? FK_OK
                          : fk_err_set(err, FK_EFORMAT, "Fashion-MNIST: fewer than %zu rows of a class",
                                       per);
}

/* The vote: most votes, then the larger summed |f| of the won problems, then the smaller class. */
static int vote(const int *votes, const double *margin)
{
    int b = 0;
    for (int c = 1; c < NCL; c++)
        if (votes[c] > votes[b] || (votes[c] == votes[b] && margin[c] > margin[b]))
            b = c;
    return b;
}

int fk__bench_sfl_t1(int json, const char *dir, int n_per, int k_per, int test_per, long T,
                     fk_err *err)
{
    fk_dataset tr, te;
    int rc = fk_catalog_load(&tr, dir, "fashion-mnist/train", err);
    if (rc)
        return rc;
    if ((rc = fk_catalog_load(&te, dir, "fashion-mnist/test", err))) {
        fk_dataset_close(&tr);
        return rc;
    }
    enum { NR = 2 + NG }; /* result rows: PI' samples, PI' k-means, PII'' at each gamma */
    size_t d = tr.X.cols, n = (size_t)n_per * NCL, nt = (size_t)test_per * NCL,
           kk = 2 * (size_t)k_per, np2 = 2 * (size_t)n_per;
    double *X = malloc(n * d * sizeof *X), *Xt = malloc(nt * d * sizeof *Xt),
           *C = malloc((size_t)NCL * (size_t)k_per * d * sizeof *C),
           *Xa = malloc(np2 * d * sizeof *Xa), *ya = malloc(np2 * sizeof *ya),
           *Z = malloc(kk * d * sizeof *Z), *ft = malloc(nt * sizeof *ft),
           *Kt = malloc(nt * kk * 3 * sizeof *Kt), *a = malloc(kk * sizeof *a),
           *margin = calloc((size_t)NR * nt * NCL, sizeof *margin);
    int *cls = malloc(n * sizeof *cls), *clt = malloc(nt * sizeof *clt),
        *votes = calloc((size_t)NR * nt * NCL, sizeof *votes);
    double kern[NR] = {0}, t0 = fk_bench_now();
    if (!X || !Xt || !C || !Xa || !ya || !Z || !ft || !Kt || !a || !margin || !cls || !clt || !votes)
        rc = fk_err_set(err, FK_ENOMEM, "out of memory");
    if (!rc)
        rc = class_rows(&tr, (size_t)n_per, 2500, X, cls, err);
    if (!rc)
        rc = class_rows(&te, (size_t)test_per, 2501, Xt, clt, err);
    fk_dataset_close(&tr);
    fk_dataset_close(&te);
    double med = rc ? 1 : 0;
    if (!rc) { /* median distance between training rows (the first 200 of the shuffle) */
        size_t m = n < 200 ? n : 200, q = 0;
        double *dd = malloc(m * m * sizeof *dd);
        if (!dd)
            rc = fk_err_set(err, FK_ENOMEM, "out of memory");
        for (size_t i = 0; !rc && i < m; i++)
            for (size_t j = i + 1; j < m; j++) {
                double s = 0;
                for (size_t t = 0; t < d; t++)
                    s += (X[i * d + t] - X[j * d + t]) * (X[i * d + t] - X[j * d + t]);
                dd[q++] = sqrt(s);
            }
        for (size_t i = 1; !rc && i < q; i++) /* insertion sort is fine for 20 k values */
            for (size_t j = i; j > 0 && dd[j - 1] > dd[j]; j--) {
                double t = dd[j];
                dd[j] = dd[j - 1];
                dd[j - 1] = t;
            }
        if (!rc)
            med = dd[q / 2];
        free(dd);
    }
    /* k-means per class on its training rows */
    for (int c = 0; !rc && c < NCL; c++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (cls[i] == c)
                memcpy(Xa + m++ * d, X + i * d, d * sizeof *X);
        rc = kmeans(Xa, m, d, k_per, 2600 + (uint64_t)c, C + (size_t)c * (size_t)k_per * d, err);
    }
    double widths[3] = {0.5 * med, med, 1.5 * med}, eps = 0.5, csoft = 100;
    long npairs = 0;
    for (int ca = 0; !rc && ca < NCL; ca++)
        for (int cb = ca + 1; !rc && cb < NCL; cb++) {
            size_t m = 0;
            for (size_t i = 0; i < n; i++)
                if (cls[i] == ca || cls[i] == cb) {
                    memcpy(Xa + m * d, X + i * d, d * sizeof *X);
                    ya[m++] = cls[i] == ca ? 1 : -1;
                }
            memcpy(Z, C + (size_t)ca * (size_t)k_per * d, (size_t)k_per * d * sizeof *Z);
            memcpy(Z + (size_t)k_per * d, C + (size_t)cb * (size_t)k_per * d,
                   (size_t)k_per * d * sizeof *Z);
            npairs++;
            /* the two (PI') rows add their votes for every test row */
            for (int r = 0; r < 2 && !rc; r++) {
                if (r == 0) { /* (PI'), kernels at the samples */
                    fk_sfl_model mm;
                    fk_sfl_pi_info info;
                    if ((rc = fk_sfl_pi_fit(Xa, ya, m, (int)d, med, FK_SFL_CLASSIFY, eps, csoft, T,
                                            &mm, &info, err)))
                        break;
                    fk_sfl_predict(&mm, Xt, nt, ft);
                    kern[r] += (double)mm.K;
                    fk_sfl_model_close(&mm);
                } else { /* (PI'), kernels at the k-means centres */
                    if ((rc = pi_centres(Xa, ya, m, (int)d, Z, kk, med, eps, csoft, T, a, err)))
                        break;
                    double wk[1] = {med};
                    fk_sfl_model mm = {.K = kk, .p = (int)d, .s = Z, .w = NULL, .c = a};
                    double *wv = malloc(kk * sizeof *wv);
                    if (!wv) {
                        rc = fk_err_set(err, FK_ENOMEM, "out of memory");
                        break;
                    }
                    for (size_t j = 0; j < kk; j++)
                        wv[j] = wk[0];
                    mm.w = wv;
                    fk_sfl_predict(&mm, Xt, nt, ft);
                    free(wv);
                    kern[r] += (double)kk;
                }
                for (size_t t = 0; t < nt; t++) {
                    int w = ft[t] >= 0 ? ca : cb;
                    votes[((size_t)r * nt + t) * NCL + (size_t)w]++;
                    margin[((size_t)r * nt + t) * NCL + (size_t)w] += fabs(ft[t]);
                }
            }
            if (rc)
                break;
            fk_sfl_atoms at;
            if ((rc = fk_sfl_atoms_candidates(&at, Z, kk, (int)d, widths, 3, err)))
                break;
            fk_sfl_kernel(Xt, nt, (int)d, &at, Kt);
            fk_sfl_opts o;
            fk_sfl_opts_default(&o, FK_SFL_CLASSIFY);
            o.res = FK_SFL_QUAD; /* c = 100, the default on real data (§5.8) */
            o.eps = eps;
            o.T = T;
            fk_sfl_fit f0;
            if ((rc = fk_sfl_solve(Xa, ya, m, (int)d, &at, &o, NULL, &f0, err))) {
                fk_sfl_atoms_close(&at);
                break;
            }
            for (int g = 0; g < NG && !rc; g++) {
                fk_sfl_fit fg;
                const fk_sfl_fit *fp = &f0;
                if (g > 0) { /* warm from the gamma = 0 duals (continuation, §3.9) */
                    o.gamma_rel = t1_grel[g];
                    if ((rc = fk_sfl_solve(Xa, ya, m, (int)d, &at, &o, f0.lambda, &fg, err)))
                        break;
                    fp = &fg;
                }
                double *va = malloc(at.J * sizeof *va);
                if (!va) {
                    rc = fk_err_set(err, FK_ENOMEM, "out of memory");
                } else {
                    for (size_t j = 0; j < at.J; j++)
                        va[j] = at.v[j] * fp->alpha[j];
                    cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)nt, (int)at.J, 1.0, Kt,
                                (int)at.J, va, 1, 0.0, ft, 1);
                    free(va);
                    kern[2 + g] += (double)fp->support;
                    for (size_t t = 0; t < nt; t++) {
                        int w = ft[t] >= 0 ? ca : cb;
                        votes[((size_t)(2 + g) * nt + t) * NCL + (size_t)w]++;
                        margin[((size_t)(2 + g) * nt + t) * NCL + (size_t)w] += fabs(ft[t]);
                    }
                }
                if (g > 0)
                    fk_sfl_fit_close(&fg);
            }
            fk_sfl_fit_close(&f0);
            fk_sfl_atoms_close(&at);
        }
    if (!rc) {
        double acc[NR];
        for (int r = 0; r < NR; r++) {
            double right = 0;
            for (size_t t = 0; t < nt; t++)
                right += vote(votes + ((size_t)r * nt + t) * NCL,
                              margin + ((size_t)r * nt + t) * NCL) == clt[t];
            acc[r] = right / (double)nt;
            kern[r] /= (double)npairs;
        }
        static const char *const nm[NR] = {"pi_samples", "pi_kmeans", "pii2_g0", "pii2_g0.03",
                                           "pii2_g0.1", "pii2_g0.3", "pii2_g0.6"};
        /* the dissertation's three (PII'') rows (increasing gamma, values not printed) are
         * set against our gamma_rel 0.03, 0.1, 0.3 */
        static const double pub_acc[NR] = {0.9883, 0.9816, NAN, 0.9812, 0.9671, 0.8566, NAN};
        static const double pub_k[NR] = {12000, 800, NAN, 788, 731, 53, NAN};
        char cs[96], ex[160];
        for (int r = 0; r < NR; r++) {
            snprintf(cs, sizeof cs, "E2.5 Table 1 fashion %s", nm[r]);
            if (isnan(pub_acc[r])) {
                fk_bench_emit(json, "sfl", cs, "accuracy", acc[r], NULL);
                fk_bench_emit(json, "sfl", cs, "kernels_per_classifier", kern[r], NULL);
            } else {
                snprintf(ex, sizeof ex, "\"published\":%g", pub_acc[r]);
                fk_bench_emit(json, "sfl", cs, "accuracy", acc[r], ex);
                snprintf(ex, sizeof ex, "\"published\":%g", pub_k[r]);
                fk_bench_emit(json, "sfl", cs, "kernels_per_classifier", kern[r], ex);
            }
        }
        int near = 2; /* the (PII'') row whose kernel count is nearest (PI')-k-means's */
        for (int r = 3; r < NR; r++)
            if (fabs(kern[r] - kern[1]) < fabs(kern[near] - kern[1]))
                near = r;
        double gap = 100 * (acc[near] - acc[1]);
        int kfall = 1, afall = acc[NR - 1] < acc[2];
        for (int r = 3; r < NR; r++)
            kfall &= kern[r] < kern[r - 1];
        snprintf(cs, sizeof cs, "E2.5 Table 1 fashion");
        snprintf(ex, sizeof ex,
                 "\"row\":\"%s\",\"target\":\"|(PII'') - (PI')-k-means| <= 1 point at the "
                 "nearest kernel count\",\"target_met\":%s",
                 nm[near], fabs(gap) <= 1 ? "true" : "false");
        fk_bench_emit(json, "sfl", cs, "pii2_minus_pi_kmeans_points", gap, ex);
        snprintf(ex, sizeof ex,
                 "\"target\":\"kernels fall and accuracy falls as gamma_rel rises 0 -> 0.6\","
                 "\"target_met\":%s",
                 kfall && afall ? "true" : "false");
        fk_bench_emit(json, "sfl", cs, "accuracy_drop_points_gamma", 100 * (acc[2] - acc[NR - 1]), ex);
        fk_bench_emit(json, "sfl", cs, "train_rows", (double)n, NULL);
        fk_bench_emit(json, "sfl", cs, "test_rows", (double)nt, NULL);
        fk_bench_emit(json, "sfl", cs, "centres_per_class", k_per, NULL);
        fk_bench_emit(json, "sfl", cs, "median_distance", med, NULL);
        fk_bench_emit(json, "sfl", cs, "seconds", fk_bench_now() - t0, NULL);
    }
    free(X);
    free(Xt);
    free(C);
    free(Xa);
    free(ya);
    free(Z);
    free(ft);
    free(Kt);
    free(a);
    free(margin);
    free(cls);
    free(clt);
    free(votes);
    return rc;
}
