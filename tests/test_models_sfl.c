/* Sparse functional learning solver (common/models/sfl/sfl.h) against spec 004 §10.1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"
#include "common/models/sfl/sfl.h"

/* Two Gaussian blobs 4w apart (w = 1) in 2-D, labels -1 / +1, n per blob. */
static void blobs(size_t n, uint64_t seed, double *X, double *y)
{
    fk_rng r;
    fk_rng_init(&r, seed, 7);
    for (size_t i = 0; i < 2 * n; i++) {
        int pos = i >= n;
        X[2 * i] = (pos ? 4.0 : 0.0) + 0.5 * fk_rng_normal(&r);
        X[2 * i + 1] = 0.5 * fk_rng_normal(&r);
        y[i] = pos ? 1.0 : -1.0;
    }
}

/* Grid atoms over the data box enlarged by 3 w_max (spec §3.7 default). */
static void grid_for(const double *X, size_t N, double h, const double *widths, int Q,
                     fk_sfl_atoms *a)
{
    double lo[2] = {1e300, 1e300}, hi[2] = {-1e300, -1e300};
    for (size_t i = 0; i < N; i++)
        for (int k = 0; k < 2; k++) {
            lo[k] = fmin(lo[k], X[2 * i + k]);
            hi[k] = fmax(hi[k], X[2 * i + k]);
        }
    double m = 3 * widths[Q - 1];
    for (int k = 0; k < 2; k++) {
        lo[k] -= m;
        hi[k] += m;
    }
    fk_err err = {0};
    assert_int_equal(fk_sfl_atoms_grid(a, 2, lo, hi, h, widths, Q, N, 0, &err), FK_OK);
}

/* T6: the grid sum of Gaussian products equals the closed-form integral at h = w/2. */
static void grid_quadrature(void **state)
{
    (void)state;
    double w = 0.8, lo[2] = {-7, -7}, hi[2] = {8, 8}, x[2] = {0.3, -0.2}, x2[2] = {1.1, 0.7};
    fk_sfl_atoms a;
    fk_err err = {0};
    assert_int_equal(fk_sfl_atoms_grid(&a, 2, lo, hi, w / 2, &w, 1, 2, 0, &err), FK_OK);
    double *K = malloc(2 * a.J * sizeof *K), X[4] = {x[0], x[1], x2[0], x2[1]};
    fk_sfl_kernel(X, 2, 2, &a, K);
    double sum = 0;
    for (size_t j = 0; j < a.J; j++)
        sum += a.v[j] * K[j] * K[a.J + j];
    double d2 = (x[0] - x2[0]) * (x[0] - x2[0]) + (x[1] - x2[1]) * (x[1] - x2[1]);
    double ref = M_PI * w * w * exp(-d2 / (4 * w * w));
    assert_true(fabs(sum - ref) <= 1e-10 * ref);
    free(K);
    fk_sfl_atoms_close(&a);
}

/* T5: hard margin, gamma = 0: feasible, complementary slackness, converged. */
static void kkt_hard_margin(void **state)
{
    (void)state;
    size_t n = 50, N = 2 * n;
    double *X = malloc(2 * N * sizeof *X), *y = malloc(N * sizeof *y), w = 1.0;
    blobs(n, 3, X, y);
    fk_sfl_atoms a;
    grid_for(X, N, 0.5, &w, 1, &a);
    fk_sfl_opts o;
    fk_sfl_opts_default(&o, FK_SFL_CLASSIFY);
    o.res = FK_SFL_HARD;
    fk_sfl_fit f;
    fk_err err = {0};
    assert_int_equal(fk_sfl_solve(X, y, N, 2, &a, &o, NULL, &f, &err), FK_OK);
    assert_int_equal(f.status, FK_SFL_CONVERGED);
    double s = 1 - o.eps, lmax = 0;
    for (size_t i = 0; i < N; i++)
        lmax = fmax(lmax, f.lambda[i]);
    assert_true(lmax > 0);
    assert_true(f.viol <= 1e-4 * s);
    assert_true(fabs(f.primal - f.dual) <= 1e-4 * fmax(1, fabs(f.primal)));
    size_t active = 0;
    for (size_t i = 0; i < N; i++) {
        double l = 1 - o.eps - y[i] * f.f[i];
        assert_true(f.lambda[i] >= 0);
        assert_true(l <= 1e-4 * s); /* feasible */
        if (f.lambda[i] > o.tau_crit * lmax) {
            assert_true(fabs(l) <= 1e-3 * s); /* dual > 0 only on active constraints */
            active++;
        }
        assert_true(f.lambda[i] * fabs(l) <= 1e-4 * lmax * s);
    }
    assert_true(active >= 2 && active < N);
    int *idx = malloc(N * sizeof *idx);
    size_t nc = 0, notc = 0;
    fk_sfl_critical(&f, y, &o, idx, &nc, &notc);
    assert_int_equal(nc, active);
    /* T9: re-solving on the critical rows alone gives the same alpha (Prop. 3) */
    double *Xc = malloc(2 * nc * sizeof *Xc), *yc = malloc(nc * sizeof *yc);
    for (size_t i = 0; i < nc; i++) {
        memcpy(Xc + 2 * i, X + 2 * (size_t)idx[i], 2 * sizeof *Xc);
        yc[i] = y[idx[i]];
    }
    fk_sfl_fit g;
    assert_int_equal(fk_sfl_solve(Xc, yc, nc, 2, &a, &o, NULL, &g, &err), FK_OK);
    assert_int_equal(g.status, FK_SFL_CONVERGED);
    double d = 0, nrm = 0;
    for (size_t j = 0; j < a.J; j++) {
        d += (f.alpha[j] - g.alpha[j]) * (f.alpha[j] - g.alpha[j]);
        nrm += f.alpha[j] * f.alpha[j];
    }
    assert_true(sqrt(d / nrm) <= 1e-3);
    fk_sfl_fit_close(&g);
    fk_sfl_fit_close(&f);
    fk_sfl_atoms_close(&a);
    free(Xc);
    free(yc);
    free(idx);
    free(X);
    free(y);
}

/* T11: two identical rows with opposite labels: INFEASIBLE, those rows on top; the resilient
 * quadratic relaxation of the same set converges with u = lambda / (kappa c N). */
static void infeasible_reported(void **state)
{
    (void)state;
    size_t N = 12;
    double X[24], y[12], w = 1.0;
    for (size_t i = 0; i < N; i++) {
        X[2 * i] = (double)(i % 6) - 2.5;
        X[2 * i + 1] = i < 6 ? -1.5 : 1.5;
        y[i] = i < 6 ? -1 : 1;
    }
    X[2 * 11] = X[2 * 3]; /* row 11 duplicates row 3 with the opposite label */
    X[2 * 11 + 1] = X[2 * 3 + 1];
    fk_sfl_atoms a;
    grid_for(X, N, 0.5, &w, 1, &a);
    fk_sfl_opts o;
    fk_sfl_opts_default(&o, FK_SFL_CLASSIFY);
    o.res = FK_SFL_HARD;
    fk_sfl_fit f;
    fk_err err = {0};
    assert_int_equal(fk_sfl_solve(X, y, N, 2, &a, &o, NULL, &f, &err), FK_OK);
    assert_int_equal(f.status, FK_SFL_INFEASIBLE);
    assert_true(f.iters <= 20000);
    assert_true(f.n_worst >= 2);
    assert_true((f.worst[0] == 3 && f.worst[1] == 11) || (f.worst[0] == 11 && f.worst[1] == 3));
    fk_sfl_fit_close(&f);
    o.res = FK_SFL_QUAD;
    o.c = 100;
    assert_int_equal(fk_sfl_solve(X, y, N, 2, &a, &o, NULL, &f, &err), FK_OK);
    assert_int_equal(f.status, FK_SFL_CONVERGED);
    /* equilibrium (P'-RSL): the duplicated rows violate their margin by exactly u_n */
    for (int k = 0; k < 2; k++) {
        size_t i = k ? 11 : 3;
        double l = 1 - o.eps - y[i] * f.f[i], u = fk_sfl_slack(&o, N, f.lambda[i], l);
        assert_true(u > 0.1);
        assert_true(fabs(l - u) <= 1e-2 * u);
    }
    fk_sfl_fit_close(&f);
    fk_sfl_atoms_close(&a);
}

/* Sparsity grows with the regulariser: support atoms fall as gamma rises (spec §10.1 T10). */
static void sparsity_grows_with_gamma(void **state)
{
    (void)state;
    size_t n = 40, N = 2 * n;
    double *X = malloc(2 * N * sizeof *X), *y = malloc(N * sizeof *y), widths[3];
    blobs(n, 5, X, y);
    y[0] = 1; /* one flipped label: hard margin would be infeasible */
    fk_sfl_widths(0.5, 1.5, 3, widths);
    fk_sfl_atoms a;
    grid_for(X, N, 0.5, widths, 3, &a);
    fk_sfl_opts o;
    fk_sfl_opts_default(&o, FK_SFL_CLASSIFY);
    o.res = FK_SFL_QUAD;
    o.c = 100;
    o.T = 6000;
    const double rel[4] = {0, 0.05, 0.2, 0.5};
    size_t prev = a.J + 1;
    fk_err err = {0};
    for (int g = 0; g < 4; g++) {
        o.gamma_rel = rel[g];
        fk_sfl_fit f;
        assert_int_equal(fk_sfl_solve(X, y, N, 2, &a, &o, NULL, &f, &err), FK_OK);
        assert_true(f.support < prev);
        assert_true(f.support > 0);
        size_t correct = 0;
        for (size_t i = 1; i < N; i++)
            correct += (f.f[i] >= 0 ? 1.0 : -1.0) == y[i];
        assert_true(correct >= N - 3); /* still classifies the clean rows */
        prev = f.support;
        fk_sfl_fit_close(&f);
    }
    assert_true(prev < a.J / 4);
    fk_sfl_atoms_close(&a);
    free(X);
    free(y);
}

/* Bump splitting (§3.8 extension, E2.2): a broad bump many widths wide becomes one kernel per
 * piece of at most split widths, the pieces keep the bump's mass, and the adaptive extraction
 * splits only as far as the regression tube needs. */
static void split_broad_bumps(void **state)
{
    (void)state;
    fk_err err = {0};
    double lo = 0, hi = 4, w = 0.5;
    fk_sfl_atoms a;
    assert_int_equal(fk_sfl_atoms_grid(&a, 1, &lo, &hi, 0.05, &w, 1, 1, 0, &err), FK_OK);
    double *alpha = calloc(a.J, sizeof *alpha), mass = 0;
    for (size_t j = 0; j < a.J; j++) /* one smooth bump on [0.5, 3.5]: 6 widths wide */
        if (fabs(a.s[j] - 2.0) <= 1.5 + 1e-9) {
            alpha[j] = exp(-(a.s[j] - 2) * (a.s[j] - 2) / 2);
            mass += a.v[j] * alpha[j];
        }
    const double splits[3] = {0, 2, 1};
    const size_t want[3] = {1, 3, 6};
    for (int i = 0; i < 3; i++) {
        fk_sfl_model m;
        assert_int_equal(fk_sfl_model_peaks(&a, alpha, NULL, NULL, 0, 0, 1, splits[i], &m, &err),
                         FK_OK);
        assert_int_equal(m.K, want[i]);
        double sum = 0;
        for (size_t k = 0; k < m.K; k++) {
            sum += m.c[k];
            assert_true(m.s[k] >= 0.5 - 1e-9 && m.s[k] <= 3.5 + 1e-9);
            if (k >
                0) /* pieces in order; centroids of pieces <= split w long are < 2 split w apart */
                assert_true(m.s[k] > m.s[k - 1] && m.s[k] - m.s[k - 1] < 2 * splits[i] * w);
        }
        assert_true(fabs(sum - mass) <= 1e-12 * mass); /* the pieces keep the bump's mass */
        fk_sfl_model_close(&m);
    }
    fk_sfl_model m;
    assert_int_equal(fk_sfl_model_peaks(&a, alpha, NULL, NULL, 0, 0, 1, -1, &m, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "split"));
    fk_sfl_atoms_close(&a);
    free(alpha);

    /* 2-D: a bump 3 widths by 1.5 widths is cut into 3 x 2 pieces at split = 1 */
    double lo2[2] = {0, 0}, hi2[2] = {2, 2};
    assert_int_equal(fk_sfl_atoms_grid(&a, 2, lo2, hi2, 0.05, &w, 1, 1, 0, &err), FK_OK);
    alpha = calloc(a.J, sizeof *alpha);
    for (size_t j = 0; j < a.J; j++)
        if (fabs(a.s[2 * j] - 1) <= 0.75 + 1e-9 && fabs(a.s[2 * j + 1] - 1) <= 0.375 + 1e-9)
            alpha[j] = 2 - (a.s[2 * j] - 1) * (a.s[2 * j] - 1) -
                       (a.s[2 * j + 1] - 1) * (a.s[2 * j + 1] - 1);
    assert_int_equal(fk_sfl_model_peaks(&a, alpha, NULL, NULL, 0, 0, 1, 1, &m, &err), FK_OK);
    assert_int_equal(m.K, 6);
    fk_sfl_model_close(&m);
    fk_sfl_atoms_close(&a);
    free(alpha);

    /* adaptive: (PII') on a sum of ten width-0.5 kernels centred in [1, 2] (E2.2's signal) */
    size_t N = 60;
    double X[60], y[60], f[60], ctr[10], amp[10];
    fk_rng g;
    fk_rng_init(&g, 22, 0);
    for (int k = 0; k < 10; k++) {
        amp[k] = 1 + fk_rng_uniform(&g);
        ctr[k] = 1 + fk_rng_uniform(&g);
    }
    for (size_t n = 0; n < N; n++) {
        X[n] = 3.0 * (double)n / (double)(N - 1);
        y[n] = 0;
        for (int k = 0; k < 10; k++)
            y[n] += amp[k] * exp(-(X[n] - ctr[k]) * (X[n] - ctr[k]) / (2 * w * w));
    }
    lo = -1.5;
    hi = 4.5;
    assert_int_equal(fk_sfl_atoms_grid(&a, 1, &lo, &hi, 0.05, &w, 1, N, 0, &err), FK_OK);
    fk_sfl_opts o;
    fk_sfl_opts_default(&o, FK_SFL_REGRESS);
    o.eps = 1e-4;
    o.gamma_rel = 0.3;
    fk_sfl_fit fit;
    assert_int_equal(fk_sfl_solve(X, y, N, 1, &a, &o, NULL, &fit, &err), FK_OK);
    double tube = 1.05 * sqrt(o.eps), used = -1, worst = 0;
    assert_int_equal(fk_sfl_model_peaks(&a, fit.alpha, X, y, N, 1, 1, 0, &m, &err), FK_OK);
    fk_sfl_predict(&m, X, N, f);
    for (size_t n = 0; n < N; n++)
        worst = fmax(worst, fabs(f[n] - y[n]));
    assert_true(worst > tube); /* one kernel per whole bump misses the tube */
    size_t whole = m.K;
    fk_sfl_model_close(&m);
    assert_int_equal(fk_sfl_model_peaks_fit(&a, fit.alpha, X, y, N, tube, &used, &m, &err), FK_OK);
    fk_sfl_predict(&m, X, N, f);
    worst = 0;
    for (size_t n = 0; n < N; n++)
        worst = fmax(worst, fabs(f[n] - y[n]));
    assert_true(worst <= tube);
    assert_true(used > 0 && m.K > whole && m.K < fit.support);
    fk_sfl_model_close(&m);
    /* tube = 0: at least the support model's training fit */
    assert_int_equal(fk_sfl_model_peaks_fit(&a, fit.alpha, X, y, N, 0, NULL, &m, &err), FK_OK);
    assert_true(m.K >= 1);
    fk_sfl_model_close(&m);
    assert_int_equal(fk_sfl_model_peaks_fit(&a, fit.alpha, X, y, N, -1, NULL, &m, &err), FK_EINVAL);
    fk_sfl_fit_close(&fit);
    fk_sfl_atoms_close(&a);
}

/* (PI') baseline (spec §9.1): the constraints hold at convergence, the duals live only on the
 * active constraints (complementary slackness), the dual equals the primal, bad input refused. */
static void pi_baseline(void **state)
{
    (void)state;
    fk_err err = {0};
    fk_sfl_model m;
    fk_sfl_pi_info info;
    /* regression: the eps-tube on 30 noisy samples of sin */
    size_t N = 30;
    double X[60], y[30], f[30], eps = 1e-3, tube = sqrt(eps);
    fk_rng r;
    fk_rng_init(&r, 91, 0);
    for (size_t n = 0; n < N; n++) {
        X[n] = 6.0 * (double)n / (double)(N - 1);
        y[n] = sin(X[n]) + 0.05 * fk_rng_normal(&r);
    }
    assert_int_equal(
        fk_sfl_pi_fit(X, y, N, 1, 0.5, FK_SFL_REGRESS, eps, 0, 200000, &m, &info, &err), FK_OK);
    assert_int_equal(info.status, FK_SFL_CONVERGED);
    assert_int_equal(m.K, N);
    assert_true(info.active > 0 && info.active < N); /* the tube binds at some rows only */
    fk_sfl_predict(&m, X, N, f);
    size_t active = 0;
    for (size_t n = 0; n < N; n++) {
        double e = fabs(f[n] - y[n]);
        assert_true(e <= tube * (1 + 1e-4));
        if (m.c[n] != 0.0) { /* a = lambda / 2 != 0 only where |f - y| = sqrt(eps) */
            assert_true(e >= tube * (1 - 1e-2));
            assert_true((m.c[n] > 0) == (y[n] > f[n])); /* the sign of the violated side */
            active++;
        }
    }
    assert_int_equal(active, info.active);
    assert_true(info.gap <= 1e-4);
    fk_sfl_model_close(&m);
    /* classification: hard margin on separable blobs, then the soft margin */
    double Xc[80], yc[40], fc[40];
    blobs(20, 5, Xc, yc);
    for (int soft = 0; soft < 2; soft++) {
        double c = soft ? 10 : 0;
        assert_int_equal(
            fk_sfl_pi_fit(Xc, yc, 40, 2, 1.0, FK_SFL_CLASSIFY, 0.5, c, 50000, &m, &info, &err),
            FK_OK);
        assert_int_equal(info.status, FK_SFL_CONVERGED);
        fk_sfl_predict(&m, Xc, 40, fc);
        for (size_t n = 0; n < 40; n++) {
            double lam = 2 * m.c[n] * yc[n]; /* a = Y lambda / 2 */
            double u = soft ? lam / c : 0;   /* the quadratic slack at the optimum */
            assert_true(lam >= 0);
            assert_true(yc[n] * fc[n] >= 0.5 - u - 1e-4 * 0.5);
            if (lam > 1e-8 * info.viol + 1e-12)
                assert_true(yc[n] * fc[n] <= (0.5 - u) * (1 + 1e-2));
        }
        assert_true(info.active > 0 && info.active < 40);
        fk_sfl_model_close(&m);
    }
    assert_int_equal(fk_sfl_pi_fit(X, y, N, 1, 0, FK_SFL_REGRESS, eps, 0, 10, &m, &info, &err),
                     FK_EINVAL);
    assert_int_equal(fk_sfl_pi_fit(Xc, yc, 40, 2, 1, FK_SFL_CLASSIFY, 1.5, 0, 10, &m, &info, &err),
                     FK_EINVAL);
}

/* (PI') with kernels at k-means centres (spec §9.1 general form, §9.5): k-means++ / Lloyd finds
 * three separated blobs' means; with the rows themselves as centres the fit is (PI') at the
 * samples; with 12 k-means centres the tube holds, the duality gap closes, multipliers sit on
 * the tube's edge only, and the soft margin classifies the blobs. */
static void pi_kmeans_centres(void **state)
{
    (void)state;
    fk_err err = {0};
    /* k-means: 3 blobs of 20 in 2-D at (0,0), (5,0), (0,5), sd 0.3 */
    double B[120], C[6], C2[6];
    fk_rng r;
    fk_rng_init(&r, 31, 0);
    static const double mx[3] = {0, 5, 0}, my[3] = {0, 0, 5};
    for (int i = 0; i < 60; i++) {
        B[2 * i] = mx[i % 3] + 0.3 * fk_rng_normal(&r);
        B[2 * i + 1] = my[i % 3] + 0.3 * fk_rng_normal(&r);
    }
    size_t it = 0;
    assert_int_equal(fk_sfl_kmeans(B, 60, 2, 3, 7, C, &it, &err), FK_OK);
    assert_true(it >= 1 && it <= 100);
    for (int b = 0; b < 3; b++) { /* each blob's mean is one centre, to 0.3 */
        double best = 1e300;
        for (int k = 0; k < 3; k++)
            best = fmin(best, hypot(C[2 * k] - mx[b], C[2 * k + 1] - my[b]));
        assert_true(best < 0.3);
    }
    assert_int_equal(fk_sfl_kmeans(B, 60, 2, 3, 7, C2, NULL, &err), FK_OK);
    assert_memory_equal(C, C2, sizeof C); /* seeded: deterministic */
    assert_int_equal(fk_sfl_kmeans(B, 2, 2, 3, 7, C2, NULL, &err), FK_EINVAL);
    /* regression on 30 noisy samples of sin: centres = the rows reproduce (PI') at the samples */
    size_t N = 30;
    double X[30], y[30], f1[30], f2[30], eps = 1e-2, tube = sqrt(eps);
    fk_rng_init(&r, 92, 0);
    for (size_t n = 0; n < N; n++) {
        X[n] = 6.0 * (double)n / (double)(N - 1);
        y[n] = sin(X[n]) + 0.05 * fk_rng_normal(&r);
    }
    fk_sfl_model m1, m2;
    fk_sfl_pi_info i1, i2;
    assert_int_equal(fk_sfl_pi_fit(X, y, N, 1, 0.5, FK_SFL_REGRESS, eps, 0, 200000, &m1, &i1, &err),
                     FK_OK);
    assert_int_equal(fk_sfl_pi_fit_centres(X, y, N, 1, X, N, 0.5, FK_SFL_REGRESS, eps, 0, 200000,
                                           &m2, &i2, &err),
                     FK_OK);
    assert_int_equal(i1.status, FK_SFL_CONVERGED);
    assert_int_equal(i2.status, FK_SFL_CONVERGED);
    fk_sfl_predict(&m1, X, N, f1);
    fk_sfl_predict(&m2, X, N, f2);
    for (size_t n = 0; n < N; n++)
        assert_true(fabs(f1[n] - f2[n]) <= 1e-2 * tube);
    fk_sfl_model_close(&m1);
    fk_sfl_model_close(&m2);
    /* 12 k-means centres */
    double Z[12];
    assert_int_equal(fk_sfl_kmeans(X, N, 1, 12, 3, Z, NULL, &err), FK_OK);
    assert_int_equal(fk_sfl_pi_fit_centres(X, y, N, 1, Z, 12, 0.5, FK_SFL_REGRESS, eps, 0, 200000,
                                           &m2, &i2, &err),
                     FK_OK);
    assert_int_equal(i2.status, FK_SFL_CONVERGED);
    assert_int_equal(m2.K, 12);
    assert_true(i2.gap <= 1e-4 && i2.active > 0 && i2.active < N);
    fk_sfl_predict(&m2, X, N, f2);
    for (size_t n = 0; n < N; n++)
        assert_true(fabs(f2[n] - y[n]) <= tube * (1 + 1e-4));
    for (size_t k = 0; k < 12; k++)
        assert_true(m2.w[k] == 0.5 && m2.s[k] == Z[k]);
    fk_sfl_model_close(&m2);
    /* classification, soft margin, 6 centres on the two blobs */
    double Xc[80], yc[40], fc[40], Zc[12];
    blobs(20, 5, Xc, yc);
    assert_int_equal(fk_sfl_kmeans(Xc, 40, 2, 6, 5, Zc, NULL, &err), FK_OK);
    assert_int_equal(fk_sfl_pi_fit_centres(Xc, yc, 40, 2, Zc, 6, 1.0, FK_SFL_CLASSIFY, 0.5, 10,
                                           50000, &m2, &i2, &err),
                     FK_OK);
    assert_int_equal(i2.status, FK_SFL_CONVERGED);
    fk_sfl_predict(&m2, Xc, 40, fc);
    for (size_t n = 0; n < 40; n++)
        assert_true(yc[n] * fc[n] > 0);
    fk_sfl_model_close(&m2);
    /* bad input */
    double bad[12];
    memcpy(bad, Z, sizeof bad);
    bad[4] = NAN;
    assert_int_equal(fk_sfl_pi_fit_centres(X, y, N, 1, bad, 12, 0.5, FK_SFL_REGRESS, eps, 0, 10,
                                           &m2, &i2, &err),
                     FK_EINVAL);
    assert_int_equal(fk_sfl_pi_fit_centres(X, y, N, 1, Z, 0, 0.5, FK_SFL_REGRESS, eps, 0, 10, &m2,
                                           &i2, &err),
                     FK_EINVAL);
}

/* T14 (Remark 1): the single kernel at 2.5 that no sample sits on is found. */
static void remark1_single_bump(void **state)
{
    (void)state;
    size_t N = 19;
    double X[19], y[19], lo = -2, hi = 7, w = 1.0;
    for (size_t i = 0; i < N; i++) {
        X[i] = 0.1 + 0.25 * (double)i; /* 0.1 .. 4.6, none in (2.45, 2.55) */
        y[i] = exp(-(X[i] - 2.5) * (X[i] - 2.5) / 2);
    }
    fk_sfl_atoms a;
    fk_err err = {0};
    assert_int_equal(fk_sfl_atoms_grid(&a, 1, &lo, &hi, 0.02, &w, 1, N, 0, &err), FK_OK);
    fk_sfl_opts o;
    fk_sfl_opts_default(&o, FK_SFL_REGRESS);
    o.eps = 1e-4;
    const double gammas[4] = {0, 1, 3, 10};
    for (int g = 0; g < 4; g++) {
        o.gamma = gammas[g];
        fk_sfl_fit f;
        assert_int_equal(fk_sfl_solve(X, y, N, 1, &a, &o, NULL, &f, &err), FK_OK);
        assert_true(f.viol <= 0.05 * sqrt(o.eps));
        int *label = malloc(a.J * sizeof *label);
        size_t nb = 0;
        assert_int_equal(fk_sfl_bumps(&a, f.alpha, 1.0, label, &nb, &err), FK_OK);
        size_t top = 0;
        for (size_t j = 0; j < a.J; j++)
            top = fabs(f.alpha[j]) > fabs(f.alpha[top]) ? j : top;
        assert_true(fabs(a.s[top] - 2.5) <= 0.04); /* the largest coefficient sits at 2.5 */
        if (g == 0) { /* gamma = 0 keeps every atom: side lobes of alternating sign */
            free(label);
            fk_sfl_fit_close(&f);
            continue;
        }
        assert_int_equal(nb, 1); /* gamma > 0: exactly one bump */
        assert_true(f.support <= 40);
        fk_sfl_model m;
        assert_int_equal(fk_sfl_model_peaks(&a, f.alpha, X, y, N, 1, 0, 0, &m, &err), FK_OK);
        assert_int_equal(m.K, 1);
        assert_true(fabs(m.s[0] - 2.5) <= 0.04);
        double fx[19], worst = 0;
        fk_sfl_predict(&m, X, N, fx);
        for (size_t i = 0; i < N; i++)
            worst = fmax(worst, fabs(fx[i] - y[i]));
        assert_true(worst <= 0.02);
        fk_sfl_model_close(&m); /* the bump's centroid lands on 2.5 as well */
        assert_int_equal(fk_sfl_model_peaks(&a, f.alpha, X, y, N, 1, 1, 0, &m, &err), FK_OK);
        assert_int_equal(m.K, 1);
        assert_true(fabs(m.s[0] - 2.5) <= 0.04);
        /* the support model reproduces the solver's fit at the rows */
        fk_sfl_model sm;
        assert_int_equal(fk_sfl_model_support(&a, f.alpha, &sm, &err), FK_OK);
        assert_int_equal(sm.K, f.support);
        fk_sfl_predict(&sm, X, N, fx);
        for (size_t i = 0; i < N; i++)
            assert_true(fabs(fx[i] - f.f[i]) <= 1e-10);
        fk_sfl_model_close(&sm);
        fk_sfl_model_close(&m);
        free(label);
        fk_sfl_fit_close(&f);
    }
    fk_sfl_atoms_close(&a);
}

/* T12: resilient equilibrium. Quadratic: the closed form and the generic Arrow-Hurwicz
 * iteration (Alg. 5) agree; Huber: duals capped at delta kappa N, rows at the cap violate their
 * margin by at least delta. Two blobs with 10 % flipped labels. */
static void resilient_equilibrium(void **state)
{
    (void)state;
    size_t n = 20, N = 2 * n;
    double *X = malloc(2 * N * sizeof *X), *y = malloc(N * sizeof *y), w = 1.0;
    blobs(n, 9, X, y);
    for (size_t i = 0; i < N; i += 10)
        y[i] = -y[i]; /* 4 flipped labels */
    fk_sfl_atoms a;
    grid_for(X, N, 0.5, &w, 1, &a);
    fk_sfl_opts o;
    fk_sfl_opts_default(&o, FK_SFL_CLASSIFY);
    o.res = FK_SFL_QUAD;
    o.c = 10;
    o.tau_gap = 1e-12;
    o.tau_feas = 1e-12;
    o.T = 200000;
    fk_sfl_fit cf, ah;
    fk_err err = {0};
    assert_int_equal(fk_sfl_solve(X, y, N, 2, &a, &o, NULL, &cf, &err), FK_OK);
    o.T = 400000;
    assert_int_equal(fk_sfl_arrow_hurwicz(X, y, N, 2, &a, &o, 0.5, 0.5, 1e-12, &ah, &err), FK_OK);
    double d = 0, s = 0;
    for (size_t i = 0; i < N; i++) {
        d += (ah.lambda[i] - cf.lambda[i]) * (ah.lambda[i] - cf.lambda[i]);
        s += cf.lambda[i] * cf.lambda[i];
    }
    assert_true(sqrt(d / s) <= 1e-3);
    fk_sfl_fit_close(&ah);
    fk_sfl_fit_close(&cf);
    o.res = FK_SFL_HUBER;
    o.c = 0.3; /* delta */
    o.T = 200000;
    assert_int_equal(fk_sfl_solve(X, y, N, 2, &a, &o, NULL, &cf, &err), FK_OK);
    double cap = o.c; /* delta kappa N with kappa = 1/N */
    size_t at_cap = 0;
    for (size_t i = 0; i < N; i++) {
        assert_true(cf.lambda[i] <= cap * (1 + 1e-12));
        if (cf.lambda[i] >= cap * (1 - 1e-9)) {
            at_cap++;
            assert_true(1 - o.eps - y[i] * cf.f[i] >= o.c - 1e-4);
        }
    }
    assert_true(at_cap >= 4); /* the flipped rows pay linearly */
    fk_sfl_fit_close(&cf);
    fk_sfl_atoms_close(&a);
    free(X);
    free(y);
}

static void bad_input(void **state)
{
    (void)state;
    double X[4] = {0, 1, NAN, 2}, y[2] = {1, -1}, w = 1, lo = -1, hi = 1;
    fk_sfl_atoms a;
    fk_err err = {0};
    assert_int_equal(fk_sfl_atoms_grid(&a, 1, &lo, &hi, 0.5, &w, 1, 2, 0, &err), FK_OK);
    fk_sfl_opts o;
    fk_sfl_opts_default(&o, FK_SFL_CLASSIFY);
    fk_sfl_fit f;
    assert_int_equal(fk_sfl_solve(X, y, 2, 2, &a, &o, NULL, &f, &err), FK_EINVAL); /* p */
    double X1[2] = {0, NAN};
    assert_int_equal(fk_sfl_solve(X1, y, 2, 1, &a, &o, NULL, &f, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "NaN"));
    double X2[2] = {0, 0.5}, y2[2] = {1, 0.5};
    assert_int_equal(fk_sfl_solve(X2, y2, 2, 1, &a, &o, NULL, &f, &err), FK_EINVAL);
    fk_sfl_atoms_close(&a);
    double lo4[4] = {0}, hi4[4] = {1, 1, 1, 1};
    assert_int_equal(fk_sfl_atoms_grid(&a, 4, lo4, hi4, 0.5, &w, 1, 2, 0, &err), FK_EINVAL);
    double lo2[2] = {-100, -100}, hi2[2] = {100, 100};
    assert_int_equal(fk_sfl_atoms_grid(&a, 2, lo2, hi2, 0.01, &w, 1, 1000, 1u << 30, &err),
                     FK_ELIMIT);
}

/* T17: determinism. Same seed and thread count: bitwise equal lambda, alpha, f and critical
 * set; 1 against 2 OpenBLAS threads: rel <= 1e-10 and the same critical set. */
static void solve_blobs(fk_sfl_fit *f, int *crit, size_t *nc)
{
    enum { NB = 120 };
    double X[2 * 2 * NB], y[2 * NB], w[2] = {1, 2};
    blobs(NB, 99, X, y);
    for (size_t i = 0; i < 2 * NB; i += 9) /* a few flipped rows: slack and critical rows */
        y[i] = -y[i];
    fk_sfl_atoms a;
    fk_err err = {0};
    assert_int_equal(fk_sfl_atoms_candidates(&a, X, 2 * NB, 2, w, 2, &err), FK_OK);
    fk_sfl_opts o;
    fk_sfl_opts_default(&o, FK_SFL_CLASSIFY);
    o.res = FK_SFL_QUAD;
    o.c = 100;
    o.gamma_rel = 0.1; /* both phases and the kept-iterate path */
    o.T = 3000;
    o.seed = 17;
    assert_int_equal(fk_sfl_solve(X, y, 2 * NB, 2, &a, &o, NULL, f, &err), FK_OK);
    fk_sfl_critical(f, y, &o, crit, nc, &(size_t){0});
    fk_sfl_atoms_close(&a);
}

static double rel_diff(const double *a, const double *b, size_t n)
{
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs(a[i] - b[i]));
        s = fmax(s, fabs(a[i]));
    }
    return s > 0 ? d / s : d;
}

static void determinism(void **state)
{
    (void)state;
    fk_sfl_fit f1, f2, f3;
    int c1[240], c2[240], c3[240];
    size_t n1, n2, n3;
    openblas_set_num_threads(1);
    solve_blobs(&f1, c1, &n1);
    solve_blobs(&f2, c2, &n2);
    assert_int_equal(f1.N, f2.N);
    assert_int_equal(f1.J, f2.J);
    assert_int_equal(f1.iters, f2.iters);
    assert_memory_equal(f1.lambda, f2.lambda, f1.N * sizeof(double));
    assert_memory_equal(f1.alpha, f2.alpha, f1.J * sizeof(double));
    assert_memory_equal(f1.f, f2.f, f1.N * sizeof(double));
    assert_int_equal(n1, n2);
    assert_true(n1 > 0);
    assert_memory_equal(c1, c2, n1 * sizeof(int));
    openblas_set_num_threads(2);
    solve_blobs(&f3, c3, &n3);
    openblas_set_num_threads(1);
    assert_true(rel_diff(f1.lambda, f3.lambda, f1.N) <= 1e-10);
    assert_true(rel_diff(f1.alpha, f3.alpha, f1.J) <= 1e-10);
    assert_int_equal(n1, n3);
    assert_memory_equal(c1, c3, n1 * sizeof(int));
    fk_sfl_fit_close(&f1);
    fk_sfl_fit_close(&f2);
    fk_sfl_fit_close(&f3);
}

/* Issue 36: kernel rows from a cache smaller than the N x J matrix (recomputed on demand) give
 * the solution of the whole matrix, at gamma = 0 where the coordinate ascent needs no matrix;
 * gamma > 0 (the FISTA phase) beyond the budget is refused naming it. */
static void row_cache_equals_full(void **state)
{
    (void)state;
    enum { NB = 60 };
    double X[2 * 2 * NB], y[2 * NB], w[2] = {1, 2};
    blobs(NB, 7, X, y);
    for (size_t i = 0; i < 2 * NB; i += 7)
        y[i] = -y[i];
    fk_sfl_atoms a;
    fk_err err = {0};
    assert_int_equal(fk_sfl_atoms_candidates(&a, X, 2 * NB, 2, w, 2, &err), FK_OK);
    fk_sfl_opts o;
    fk_sfl_opts_default(&o, FK_SFL_CLASSIFY);
    o.res = FK_SFL_QUAD;
    fk_sfl_fit f1, f2;
    assert_int_equal(fk_sfl_solve(X, y, 2 * NB, 2, &a, &o, NULL, &f1, &err), FK_OK);
    o.cache_mb = 10.0 * (double)a.J * 8.0 / 1048576.0; /* ten rows of 120 */
    assert_int_equal(fk_sfl_solve(X, y, 2 * NB, 2, &a, &o, NULL, &f2, &err), FK_OK);
    assert_int_equal(f1.status, FK_SFL_CONVERGED);
    assert_int_equal(f2.status, FK_SFL_CONVERGED);
    double d = 0, m = 0;
    for (size_t n = 0; n < f1.N; n++) {
        d = fmax(d, fabs(f1.f[n] - f2.f[n]));
        m = fmax(m, fabs(f1.f[n]));
    }
    assert_true(d <= 1e-3 * m);
    assert_true(fabs(f1.primal - f2.primal) <= 1e-3 * fabs(f1.primal));
    fk_sfl_fit_close(&f1);
    fk_sfl_fit_close(&f2);
    o.gamma_rel = 0.1;
    assert_int_equal(fk_sfl_solve(X, y, 2 * NB, 2, &a, &o, NULL, &f2, &err), FK_ELIMIT);
    assert_non_null(strstr(err.msg, "kernel-row budget"));
    fk_sfl_atoms_close(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(grid_quadrature),
        cmocka_unit_test(row_cache_equals_full),
        cmocka_unit_test(kkt_hard_margin),
        cmocka_unit_test(infeasible_reported),
        cmocka_unit_test(sparsity_grows_with_gamma),
        cmocka_unit_test(remark1_single_bump),
        cmocka_unit_test(split_broad_bumps),
        cmocka_unit_test(pi_baseline),
        cmocka_unit_test(pi_kmeans_centres),
        cmocka_unit_test(resilient_equilibrium),
        cmocka_unit_test(bad_input),
        cmocka_unit_test(determinism),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
