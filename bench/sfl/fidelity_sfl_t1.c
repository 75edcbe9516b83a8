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
 * distance between training rows (0.5, 1, 1.5; (PI') at 1). k-means and (PI') at the centres
 * are the library's fk_sfl_kmeans and fk_sfl_pi_fit_centres. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/sfl/sfl_bench.h"
#include "common/data/catalog.h"
#include "common/la/rng.h"
#include "common/models/sfl/sfl.h"

enum { NCL = 10, NG = 5 };
static const double t1_grel[NG] = {0, 0.03, 0.1, 0.3, 0.6};

/* Per-class rows: after a seeded shuffle, skip the first `skip` rows of each class and take the
 * next `per` (the same seed with skip = the training count gives disjoint test rows); class =
 * raw label - lab0. */
FK_CHECKRETURN static int class_rows(const fk_dataset *ds, size_t skip, size_t per, uint64_t seed,
                                     int lab0, double *X, int *cls, fk_err *err)
{
    size_t n = ds->X.rows, d = ds->X.cols, have[NCL] = {0}, seen[NCL] = {0}, m = 0;
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
        int c = (int)ds->y_raw[i] - lab0;
        if (c < 0 || c >= NCL || have[c] >= per || seen[c]++ < skip)
            continue;
        for (size_t j = 0; j < d; j++)
            X[m * d + j] = ds->X.data[i * ds->X.ld + j];
        cls[m++] = c;
        have[c]++;
    }
    free(idx);
    return m == per * NCL ? FK_OK
                          : fk_err_set(err, FK_EFORMAT, "%s: fewer than %zu rows of a class",
                                       ds->name, skip + per);
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

int fk__bench_sfl_t1(int json, const char *dir, int mnist, int n_per, int k_per, int test_per,
                     long T, fk_err *err)
{
    /* Fashion-MNIST: its own train and test files; MNIST-2000 (labels 1..10, L2-normalised
     * rows): disjoint training and test rows of the one file */
    fk_dataset tr, te;
    const char *set = mnist ? "mnist" : "fashion";
    int rc = fk_catalog_load(&tr, dir, mnist ? "mnist-usps/mnist" : "fashion-mnist/train", err);
    if (rc)
        return rc;
    if ((rc = fk_catalog_load(&te, dir, mnist ? "mnist-usps/mnist" : "fashion-mnist/test", err))) {
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
           *Kt = malloc(nt * kk * 3 * sizeof *Kt),
           *margin = calloc((size_t)NR * nt * NCL, sizeof *margin);
    int *cls = malloc(n * sizeof *cls), *clt = malloc(nt * sizeof *clt),
        *votes = calloc((size_t)NR * nt * NCL, sizeof *votes);
    double kern[NR] = {0}, t0 = fk_bench_now();
    if (!X || !Xt || !C || !Xa || !ya || !Z || !ft || !Kt || !margin || !cls || !clt || !votes)
        rc = fk_err_set(err, FK_ENOMEM, "out of memory");
    if (!rc)
        rc = class_rows(&tr, 0, (size_t)n_per, 2500, mnist, X, cls, err);
    if (!rc)
        rc = class_rows(&te, mnist ? (size_t)n_per : 0, (size_t)test_per, mnist ? 2500 : 2501,
                        mnist, Xt, clt, err);
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
        rc = fk_sfl_kmeans(Xa, m, (int)d, (size_t)k_per, 2600 + (uint64_t)c,
                           C + (size_t)c * (size_t)k_per * d, NULL, err);
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
                /* (PI') with kernels at the samples (r = 0) or at the k-means centres (r = 1) */
                fk_sfl_model mm;
                fk_sfl_pi_info info;
                rc = r == 0 ? fk_sfl_pi_fit(Xa, ya, m, (int)d, med, FK_SFL_CLASSIFY, eps, csoft, T,
                                            &mm, &info, err)
                            : fk_sfl_pi_fit_centres(Xa, ya, m, (int)d, Z, kk, med, FK_SFL_CLASSIFY,
                                                    eps, csoft, T, &mm, &info, err);
                if (rc)
                    break;
                fk_sfl_predict(&mm, Xt, nt, ft);
                kern[r] += (double)mm.K;
                fk_sfl_model_close(&mm);
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
            snprintf(cs, sizeof cs, "E2.5 Table 1 %s %s", set, nm[r]);
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
        snprintf(cs, sizeof cs, "E2.5 Table 1 %s", set);
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
    free(margin);
    free(cls);
    free(clt);
    free(votes);
    return rc;
}
