/* DICA / UDICA estimator: the unit properties of spec dica.md §11.1. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/blas.h"
#include "common/la/eig.h"
#include "common/la/rff.h"
#include "common/la/rng.h"
#include "common/models/dica/dica.h"

/* 4 Gaussian domains in R^5 (sizes 30, 32, 33, 35: n = 130), each with its own shift and
 * scale; labels in 3 classes from a fixed linear rule, regression target smooth in x. */
typedef struct toy {
    fk_mat X;
    long dom[130];
    int y[130];
    double t[130];
    size_t n;
} toy;

static void toy_make(toy *T, uint64_t seed)
{
    static const size_t sizes[4] = {30, 32, 33, 35};
    fk_rng g;
    fk_rng_init(&g, seed, 7);
    T->n = 130;
    assert_int_equal(fk_mat_init(&T->X, T->n, 5), FK_OK);
    size_t row = 0;
    for (int d = 0; d < 4; d++) {
        double shift[5], scale = 0.7 + 0.2 * d;
        for (int j = 0; j < 5; j++)
            shift[j] = 0.8 * fk_rng_normal(&g);
        for (size_t i = 0; i < sizes[d]; i++, row++) {
            double *x = fk_mat_row(&T->X, row);
            for (int j = 0; j < 5; j++)
                x[j] = shift[j] + scale * fk_rng_normal(&g);
            T->dom[row] = 10 + d;
            double s = x[0] + 0.5 * x[1] - 0.3 * x[2];
            T->y[row] = s < -0.5 ? 0 : (s < 0.8 ? 1 : 2);
            T->t[row] = sin(x[0]) + 0.5 * x[1];
        }
    }
}

static double corr_abs(const fk_mat *A, size_t ca, const fk_mat *B, size_t cb)
{
    size_t n = A->rows;
    double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
    for (size_t i = 0; i < n; i++) {
        ma += fk_mat_get(A, i, ca) / (double)n;
        mb += fk_mat_get(B, i, cb) / (double)n;
    }
    for (size_t i = 0; i < n; i++) {
        double a = fk_mat_get(A, i, ca) - ma, b = fk_mat_get(B, i, cb) - mb;
        sab += a * b;
        saa += a * a;
        sbb += b * b;
    }
    return fabs(sab) / sqrt(saa * sbb);
}

/* §11.1 item 4: the reduced exact solver (default) and the direct O(n^3) solver agree on
 * eigenvalues and projections, for all four variants (Gaussian output kernel). */
static void direct_equals_reduced(void **state)
{
    (void)state;
    toy T;
    toy_make(&T, 1);
    fk_err err;
    fk_mat K, L, Tm = fk_mat_view(T.t, T.n, 1, 1);
    assert_int_equal(fk_dica_gauss_gram(&T.X, &T.X, 2.0, &K, &err), FK_OK);
    assert_int_equal(fk_dica_gauss_gram(&Tm, &Tm, 1.0, &L, &err), FK_OK);
    for (int v = 0; v < 4; v++) {
        fk_dica_opts o;
        fk_dica_opts_default(&o, (fk_dica_variant)v, 3);
        o.lambda = 0.1;
        if (v >= 2)
            o.q_weight = 0;
        fk_dica_kernel kd;
        int rc = fk_dica_kernel_fit(&kd, &T.X, NULL, 0, T.t, 1.0, T.dom, 2.0, &o, &err);
        assert_int_equal(rc, FK_OK);
        double g[3];
        fk_mat Z;
        rc = fk_dica_direct(&K, fk_dica_supervised(o.variant) ? &L : NULL, T.dom, &o, g, &Z, &err);
        assert_int_equal(rc, FK_OK);
        for (int k = 0; k < 3; k++) {
            assert_true(fabs(g[k] - kd.fit.gamma[k]) <= 1e-9 * fabs(g[0]));
            assert_true(corr_abs(&Z, (size_t)k, &kd.Z, (size_t)k) >= 1 - 1e-8);
        }
        fk_mat_close(&Z);
        fk_dica_kernel_close(&kd);
    }
    fk_mat_close(&K);
    fk_mat_close(&L);
    fk_mat_close(&T.X);
}

/* Issue 36: DICA/COIR without the eigendecomposition of K~ (one Cholesky of R, the Dy x Dy
 * problem) give the components of the reduced solver on the full kernel map of §5.3 (all
 * eigenpairs of K~): eigenvalues and training projections to 1e-9, labels and regression
 * targets, 3 domains. */
static void direct_equals_kernel_map(void **state)
{
    (void)state;
    toy T;
    toy_make(&T, 11);
    fk_err err;
    for (int v = 0; v < 4; v++) {
        fk_dica_opts o;
        fk_dica_opts_default(&o, v & 1 ? FK_DICA_COIR : FK_DICA_DICA, 2);
        if (v & 1)
            o.q_weight = 0;
        o.lambda = 0.1;
        int reg = v >= 2;
        fk_dica_kernel a, b;
        const int *y = reg ? NULL : T.y;
        const double *t = reg ? T.t : NULL;
        assert_int_equal(fk_dica_kernel_fit(&a, &T.X, y, 3, t, 1.0, T.dom, 2.0, &o, &err), FK_OK);
        o.kernel_map = 1;
        assert_int_equal(fk_dica_kernel_fit(&b, &T.X, y, 3, t, 1.0, T.dom, 2.0, &o, &err), FK_OK);
        assert_true(a.direct && !b.direct && a.r == 0 && b.r > 0);
        double dg = 0, dz = 0, zmax = 0;
        for (size_t k = 0; k < 2; k++) {
            dg = fmax(dg, fabs(a.fit.gamma[k] - b.fit.gamma[k]) / fabs(b.fit.gamma[0]));
            double dot = 0;
            for (size_t i = 0; i < T.n; i++)
                dot += fk_mat_get(&a.Z, i, k) * fk_mat_get(&b.Z, i, k);
            double sg = dot < 0 ? -1.0 : 1.0; /* the two fix signs in other coordinates */
            for (size_t i = 0; i < T.n; i++) {
                zmax = fmax(zmax, fabs(fk_mat_get(&b.Z, i, k)));
                dz = fmax(dz, fabs(sg * fk_mat_get(&a.Z, i, k) - fk_mat_get(&b.Z, i, k)));
            }
        }
        print_message("%s%s: r = %zu of n = %zu, gamma %.2e, Z %.2e (relative)\n",
                      fk_dica_variant_name(o.variant), reg ? " regression" : "", b.r, T.n, dg,
                      dz / zmax);
        assert_true(dg <= 1e-9);
        assert_true(dz <= 1e-9 * zmax);
        /* new rows project alike too */
        fk_mat Za, Zb;
        assert_int_equal(fk_dica_kernel_project(&a, &T.X, 0, &Za, &err), FK_OK);
        assert_int_equal(fk_dica_kernel_project(&b, &T.X, 0, &Zb, &err), FK_OK);
        for (size_t i = 0; i < Za.rows * Za.cols; i++)
            assert_true(fabs(fabs(Za.data[i]) - fabs(Zb.data[i])) <= 1e-9 * zmax);
        fk_mat_close(&Za);
        fk_mat_close(&Zb);
        fk_dica_kernel_close(&a);
        fk_dica_kernel_close(&b);
    }
    fk_mat_close(&T.X);
}

/* §11.1 item 5: KPCA eigenvalues are s_k^2 / (n (s_k + lambda)), s_k those of K~. */
static void kpca_closed_form(void **state)
{
    (void)state;
    toy T;
    toy_make(&T, 2);
    fk_err err;
    fk_dica_opts o;
    fk_dica_opts_default(&o, FK_DICA_KPCA, 6);
    o.q_weight = 0;
    o.lambda = 0.1;
    fk_dica_kernel kd;
    assert_int_equal(fk_dica_kernel_fit(&kd, &T.X, NULL, 0, NULL, 0, T.dom, 2.0, &o, &err), FK_OK);
    fk_mat K, V;
    assert_int_equal(fk_dica_gauss_gram(&T.X, &T.X, 2.0, &K, &err), FK_OK);
    size_t n = T.n;
    double c[130] = {0}, gsum = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            c[j] += fk_mat_get(&K, i, j) / (double)n;
    for (size_t j = 0; j < n; j++)
        gsum += c[j] / (double)n;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            K.data[i * K.ld + j] += gsum - c[i] - c[j];
    double s[6];
    assert_int_equal(fk_eig_sym_top(&K, 6, s, &V, &err), FK_OK);
    for (int k = 0; k < 6; k++) {
        double want = s[k] * s[k] / ((double)n * (s[k] + o.lambda));
        assert_true(fabs(kd.fit.gamma[k] - want) <= 1e-10 * want);
    }
    fk_mat_close(&V);
    fk_mat_close(&K);
    fk_dica_kernel_close(&kd);
    fk_mat_close(&T.X);
}

/* §11.1 item 6: with one domain S_Q = 0, so UDICA is KPCA and DICA is COIR bit for bit;
 * q_weight = 0 likewise. */
static void special_cases_bitwise(void **state)
{
    (void)state;
    toy T;
    toy_make(&T, 3);
    long one[130];
    for (size_t i = 0; i < T.n; i++)
        one[i] = 0;
    fk_err err;
    static const fk_dica_variant pairs[2][2] = {{FK_DICA_UDICA, FK_DICA_KPCA},
                                                {FK_DICA_DICA, FK_DICA_COIR}};
    for (int p = 0; p < 2; p++) {
        for (int qz = 0; qz < 2; qz++) {
            fk_dica_opts a, b;
            fk_dica_opts_default(&a, pairs[p][0], 2);
            fk_dica_opts_default(&b, pairs[p][1], 2);
            b.q_weight = 0;
            if (qz)
                a.q_weight = 0;
            const long *dom = qz ? T.dom : one;
            fk_dica_kernel ka, kb;
            assert_int_equal(fk_dica_kernel_fit(&ka, &T.X, T.y, 3, NULL, 0, dom, 2.0, &a, &err),
                             FK_OK);
            assert_int_equal(fk_dica_kernel_fit(&kb, &T.X, T.y, 3, NULL, 0, dom, 2.0, &b, &err),
                             FK_OK);
            assert_memory_equal(ka.fit.gamma, kb.fit.gamma, 2 * sizeof(double));
            assert_memory_equal(ka.Z.data, kb.Z.data, T.n * 2 * sizeof(double));
            fk_dica_kernel_close(&ka);
            fk_dica_kernel_close(&kb);
        }
    }
    fk_mat_close(&T.X);
}

/* §11.1 items 6/13 and §3.8: projection of the training points equals the fitted
 * embedding; the invariance term lowers the domain variance of the projections, more as
 * q_weight grows. */
static void projection_and_invariance(void **state)
{
    (void)state;
    toy T;
    toy_make(&T, 4);
    fk_err err;
    double prev = INFINITY;
    double qs[4] = {0, 1, 10, 100};
    for (int i = 0; i < 4; i++) {
        fk_dica_opts o;
        fk_dica_opts_default(&o, FK_DICA_UDICA, 3);
        o.q_weight = qs[i];
        fk_dica_kernel kd;
        assert_int_equal(fk_dica_kernel_fit(&kd, &T.X, NULL, 0, NULL, 0, T.dom, 2.0, &o, &err),
                         FK_OK);
        fk_mat Z;
        assert_int_equal(fk_dica_kernel_project(&kd, &T.X, 0, &Z, &err), FK_OK);
        double scale = 0, diff = 0;
        for (size_t j = 0; j < Z.rows * Z.cols; j++) {
            scale = fmax(scale, fabs(kd.Z.data[j]));
            diff = fmax(diff, fabs(kd.Z.data[j] - Z.data[j]));
        }
        assert_true(diff <= 1e-8 * scale);
        double v = fk_dica_domain_variance(&kd.Z, T.dom);
        assert_true(v < prev);
        prev = v;
        fk_mat_close(&Z);
        fk_dica_kernel_close(&kd);
    }
    fk_mat_close(&T.X);
}

/* §6: the finite-feature form equals the kernel form when the features are exact:
 * explicit features Phi (D < n) against the direct solver on K = Phi Phi^T. */
static void finite_features_equal_kernel(void **state)
{
    (void)state;
    toy T;
    toy_make(&T, 5);
    fk_err err;
    fk_rff rf;
    assert_int_equal(fk_rff_init(&rf, 9, 5, 12, 2.0, &err), FK_OK);
    fk_mat Phi, K, L, Psi;
    assert_int_equal(fk_rff_map(&rf, &T.X, &Phi, &err), FK_OK);
    assert_int_equal(fk_mat_init(&K, T.n, T.n), FK_OK);
    for (size_t i = 0; i < T.n; i++)
        for (size_t j = 0; j < T.n; j++) {
            double s = 0;
            for (size_t k = 0; k < Phi.cols; k++)
                s += fk_mat_get(&Phi, i, k) * fk_mat_get(&Phi, j, k);
            fk_mat_set(&K, i, j, s);
        }
    assert_int_equal(fk_dica_onehot(T.y, T.n, 3, &Psi, &err), FK_OK);
    assert_int_equal(fk_mat_init(&L, T.n, T.n), FK_OK);
    for (size_t i = 0; i < T.n; i++)
        for (size_t j = 0; j < T.n; j++)
            fk_mat_set(&L, i, j, T.y[i] == T.y[j]);
    for (int sup = 0; sup < 2; sup++) {
        fk_dica_opts o;
        fk_dica_opts_default(&o, sup ? FK_DICA_DICA : FK_DICA_UDICA, 2);
        o.delta = 0;
        fk_dica_stats st;
        assert_int_equal(fk_dica_stats_init(&st, Phi.cols, sup ? 3 : 0, &err), FK_OK);
        assert_int_equal(fk_dica_stats_add(&st, &Phi, sup ? &Psi : NULL, T.dom, &err), FK_OK);
        fk_dica_fit f;
        assert_int_equal(fk_dica_solve(&st, &o, &f, &err), FK_OK);
        fk_mat Zf, Zd;
        double g[2];
        assert_int_equal(fk_dica_project(&f, &Phi, NULL, &Zf, &err), FK_OK);
        assert_int_equal(fk_dica_direct(&K, sup ? &L : NULL, T.dom, &o, g, &Zd, &err), FK_OK);
        for (int k = 0; k < 2; k++) {
            assert_true(fabs(g[k] - f.gamma[k]) <= 1e-8 * g[0]);
            assert_true(corr_abs(&Zf, (size_t)k, &Zd, (size_t)k) >= 1 - 1e-8);
        }
        fk_mat_close(&Zf);
        fk_mat_close(&Zd);
        fk_dica_fit_close(&f);
        fk_dica_stats_close(&st);
    }
    fk_mat_close(&Phi);
    fk_mat_close(&Psi);
    fk_mat_close(&K);
    fk_mat_close(&L);
    fk_rff_close(&rf);
    fk_mat_close(&T.X);
}

/* §11.1 item 10: statistics summed over clients (domains whole or split) give the pooled
 * solution; the order of the clients does not matter. */
static void federated_sums_equal_pooled(void **state)
{
    (void)state;
    toy T;
    toy_make(&T, 6);
    fk_err err;
    fk_rff rf;
    assert_int_equal(fk_rff_init(&rf, 3, 5, 10, 2.0, &err), FK_OK); /* D = 20, n >= 5D */
    fk_mat Phi, Psi;
    assert_int_equal(fk_rff_map(&rf, &T.X, &Phi, &err), FK_OK);
    assert_int_equal(fk_dica_onehot(T.y, T.n, 3, &Psi, &err), FK_OK);
    fk_dica_opts o;
    fk_dica_opts_default(&o, FK_DICA_DICA, 2);
    fk_dica_stats pooled;
    fk_dica_fit fp;
    assert_int_equal(fk_dica_stats_init(&pooled, 20, 3, &err), FK_OK);
    assert_int_equal(fk_dica_stats_add(&pooled, &Phi, &Psi, T.dom, &err), FK_OK);
    assert_int_equal(fk_dica_solve(&pooled, &o, &fp, &err), FK_OK);
    /* 3 and 7 clients cutting through domains; added in reverse order as well. */
    static const size_t ks[2] = {3, 7};
    for (int a = 0; a < 2; a++)
        for (int rev = 0; rev < 2; rev++) {
            size_t kc = ks[a];
            fk_dica_stats sum;
            assert_int_equal(fk_dica_stats_init(&sum, 20, 3, &err), FK_OK);
            for (size_t c0 = 0; c0 < kc; c0++) {
                size_t c = rev ? kc - 1 - c0 : c0;
                size_t lo = c * T.n / kc, hi = (c + 1) * T.n / kc;
                fk_mat P1 = fk_mat_rows(&Phi, lo, hi - lo), Y1 = fk_mat_rows(&Psi, lo, hi - lo);
                fk_dica_stats part;
                assert_int_equal(fk_dica_stats_init(&part, 20, 3, &err), FK_OK);
                assert_int_equal(fk_dica_stats_add(&part, &P1, &Y1, T.dom + lo, &err), FK_OK);
                assert_int_equal(fk_dica_stats_merge(&sum, &part, &err), FK_OK);
                fk_dica_stats_close(&part);
            }
            fk_dica_fit f;
            assert_int_equal(fk_dica_solve(&sum, &o, &f, &err), FK_OK);
            double wmax = 0, dw = 0;
            for (size_t j = 0; j < 40; j++) {
                wmax = fmax(wmax, fabs(fp.W.data[j]));
                dw = fmax(dw, fabs(fp.W.data[j] - f.W.data[j]));
            }
            assert_true(dw <= 1e-9 * wmax);
            for (int k = 0; k < 2; k++)
                assert_true(fabs(f.gamma[k] - fp.gamma[k]) <= 1e-9 * fp.gamma[0]);
            fk_dica_fit_close(&f);
            fk_dica_stats_close(&sum);
        }
    fk_dica_fit_close(&fp);
    fk_dica_stats_close(&pooled);
    fk_mat_close(&Phi);
    fk_mat_close(&Psi);
    fk_rff_close(&rf);
    fk_mat_close(&T.X);
}

/* §11.1 item 12: random-feature DICA approaches kernel DICA as R grows (first component,
 * mean |rho| over 3 RF seeds, on the training points). */
static void random_features_approach_kernel(void **state)
{
    (void)state;
    toy T;
    toy_make(&T, 8);
    fk_err err;
    fk_dica_opts o;
    fk_dica_opts_default(&o, FK_DICA_DICA, 2);
    fk_dica_kernel kd;
    assert_int_equal(fk_dica_kernel_fit(&kd, &T.X, T.y, 3, NULL, 0, T.dom, 2.0, &o, &err), FK_OK);
    fk_mat Psi;
    assert_int_equal(fk_dica_onehot(T.y, T.n, 3, &Psi, &err), FK_OK);
    static const size_t Rs[3] = {25, 100, 400};
    double prev = 0;
    for (int r = 0; r < 3; r++) {
        double mean = 0;
        for (uint64_t seed = 0; seed < 3; seed++) {
            fk_rff rf;
            fk_mat Phi, Z;
            fk_dica_stats st;
            fk_dica_fit f;
            assert_int_equal(fk_rff_init(&rf, seed, 5, Rs[r], 2.0, &err), FK_OK);
            assert_int_equal(fk_rff_map(&rf, &T.X, &Phi, &err), FK_OK);
            assert_int_equal(fk_dica_stats_init(&st, 2 * Rs[r], 3, &err), FK_OK);
            assert_int_equal(fk_dica_stats_add(&st, &Phi, &Psi, T.dom, &err), FK_OK);
            assert_int_equal(fk_dica_solve(&st, &o, &f, &err), FK_OK);
            assert_int_equal(fk_dica_project(&f, &Phi, NULL, &Z, &err), FK_OK);
            mean += corr_abs(&Z, 0, &kd.Z, 0) / 3;
            fk_mat_close(&Z);
            fk_dica_fit_close(&f);
            fk_dica_stats_close(&st);
            fk_mat_close(&Phi);
            fk_rff_close(&rf);
        }
        assert_true(mean > prev);
        prev = mean;
    }
    assert_true(prev > 0.99);
    fk_mat_close(&Psi);
    fk_dica_kernel_close(&kd);
    fk_mat_close(&T.X);
}

/* Regression outputs have a fast-decaying spectrum: components past the output rank stay
 * zero (gamma 0, zero projection) instead of reading past the reduced problem. */
static void regression_zero_components(void **state)
{
    (void)state;
    toy T;
    toy_make(&T, 9);
    fk_err err;
    fk_dica_opts o;
    fk_dica_opts_default(&o, FK_DICA_DICA, 60);
    fk_dica_kernel kd;
    assert_int_equal(fk_dica_kernel_fit(&kd, &T.X, NULL, 0, T.t, 5.0, T.dom, 2.0, &o, &err), FK_OK);
    int zeros = 0;
    for (size_t k = 0; k < 60; k++) {
        double s = 0;
        for (size_t i = 0; i < T.n; i++)
            s += fabs(fk_mat_get(&kd.Z, i, k));
        if (s == 0) {
            zeros++;
            assert_true(kd.fit.gamma[k] == 0);
        }
    }
    assert_true(zeros > 0 && zeros < 60);
    /* normalise = ref (§5.5) on the same targets: the components past the rank stay zero
     * instead of being refused, the others are finite and non-zero (issue 36) */
    fk_dica_opts r = o;
    r.ref_norm = 1;
    assert_int_equal(fk_dica_kernel_refit(&kd, NULL, 0, T.t, 5.0, T.dom, &r, &err), FK_OK);
    int rzeros = 0;
    for (size_t k = 0; k < 60; k++) {
        double s = 0;
        for (size_t i = 0; i < T.n; i++)
            s += fabs(fk_mat_get(&kd.Z, i, k));
        assert_true(isfinite(s));
        if (kd.fit.gamma[k] > 0) {
            assert_true(s > 0);
        } else {
            assert_true(s == 0);
            rzeros++;
        }
    }
    assert_true(rzeros > 0 && rzeros < 60);
    fk_dica_kernel_close(&kd);
    fk_mat_close(&T.X);
}

/* §11.1 item 8: components satisfy the constraint of (10). With q_weight 0 in kernel-map
 * coordinates P = I + lambda diag(1/s), s_i = |Phi column i|^2: W^T P W = I for KPCA,
 * diag(W^T P W) = 1 for COIR. */
static void normalisation_constraint(void **state)
{
    (void)state;
    toy T;
    toy_make(&T, 10);
    fk_err err;
    for (int v = 0; v < 2; v++) {
        fk_dica_opts o;
        fk_dica_opts_default(&o, v ? FK_DICA_COIR : FK_DICA_KPCA, 2);
        o.q_weight = 0;
        o.lambda = 0.3;
        fk_dica_kernel kd;
        assert_int_equal(fk_dica_kernel_fit(&kd, &T.X, T.y, 3, NULL, 0, T.dom, 2.0, &o, &err),
                         FK_OK);
        /* COIR solves in n-space (B = kd.fit.W): beta^T (K~ + lambda I) beta = 1 */
        for (size_t a = 0; v && a < 2; a++) {
            assert_true(kd.direct && kd.fit.D == kd.n);
            double q = 0;
            for (size_t i = 0; i < kd.n; i++) {
                double rb = o.lambda * fk_mat_get(&kd.fit.W, i, a);
                for (size_t j = 0; j < kd.n; j++)
                    rb += fk_mat_get(&kd.Kc, i, j) * fk_mat_get(&kd.fit.W, j, a);
                q += fk_mat_get(&kd.fit.W, i, a) * rb;
            }
            assert_true(fabs(q - 1) < 1e-8);
        }
        for (size_t a = 0; !v && a < 2; a++)
            for (size_t b = 0; b < 2; b++) {
                double q = 0;
                for (size_t i = 0; i < kd.r; i++) {
                    double si = 0;
                    for (size_t r = 0; r < kd.n; r++)
                        si += fk_mat_get(&kd.Phi, r, i) * fk_mat_get(&kd.Phi, r, i);
                    q += fk_mat_get(&kd.fit.W, i, a) * fk_mat_get(&kd.fit.W, i, b) *
                         (1 + o.lambda / si);
                }
                if (a == b)
                    assert_true(fabs(q - 1) < 1e-8);
                else
                    assert_true(fabs(q) < 1e-8);
            }
        /* `ref`: the same directions, |beta_k| sqrt(n gamma_k) = 1 */
        o.ref_norm = 1;
        fk_mat Zc;
        assert_int_equal(fk_mat_copy(&Zc, &kd.Z), 0);
        assert_int_equal(fk_dica_kernel_refit(&kd, T.y, 3, NULL, 0, T.dom, &o, &err), FK_OK);
        for (size_t a = 0; a < 2; a++) {
            double b2 = 0;
            for (size_t r = 0; r < kd.n; r++) {
                double bt = 0; /* beta = Umap w */
                for (size_t i = 0; i < kd.r; i++)
                    bt += fk_mat_get(&kd.Umap, r, i) * fk_mat_get(&kd.fit.W, i, a);
                b2 += bt * bt;
            }
            assert_true(fabs(sqrt(b2) * sqrt((double)kd.n * kd.fit.gamma[a]) - 1) < 1e-8);
            assert_true(corr_abs(&Zc, a, &kd.Z, a) > 1 - 1e-12);
        }
        fk_mat_close(&Zc);
        fk_dica_kernel_close(&kd);
    }
    fk_mat_close(&T.X);
}

/* §11.1 items 7 and 14: one clear error each. */
static void errors_are_clear(void **state)
{
    (void)state;
    toy T;
    toy_make(&T, 7);
    fk_err err;
    fk_dica_opts o;
    fk_dica_kernel kd;
    fk_dica_opts_default(&o, FK_DICA_DICA, 3); /* 3 classes: rank 2 */
    assert_int_equal(fk_dica_kernel_fit(&kd, &T.X, T.y, 3, NULL, 0, T.dom, 2.0, &o, &err),
                     FK_EINVAL);
    assert_non_null(strstr(err.msg, "rank of the output kernel"));
    o.m = 2;
    o.lambda = 0;
    assert_int_equal(fk_dica_kernel_fit(&kd, &T.X, T.y, 3, NULL, 0, T.dom, 2.0, &o, &err),
                     FK_EINVAL);
    assert_non_null(strstr(err.msg, "lambda"));
    o.lambda = 1;
    o.eps = -1;
    assert_int_equal(fk_dica_kernel_fit(&kd, &T.X, T.y, 3, NULL, 0, T.dom, 2.0, &o, &err),
                     FK_EINVAL);
    assert_non_null(strstr(err.msg, "eps"));
    o.eps = 1e-3;
    assert_int_equal(fk_dica_kernel_fit(&kd, &T.X, T.y, 3, NULL, 0, T.dom, 0.0, &o, &err),
                     FK_EINVAL);
    assert_non_null(strstr(err.msg, "sigma"));
    assert_int_equal(fk_dica_kernel_fit(&kd, &T.X, NULL, 0, NULL, 0, T.dom, 2.0, &o, &err),
                     FK_EINVAL);
    assert_non_null(strstr(err.msg, "labels"));
    /* a one-sample domain */
    long dom[130];
    memcpy(dom, T.dom, sizeof dom);
    dom[0] = 99;
    assert_int_equal(fk_dica_kernel_fit(&kd, &T.X, T.y, 3, NULL, 0, dom, 2.0, &o, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "domain 99 has 1 samples"));
    T.X.data[7] = NAN;
    assert_int_equal(fk_dica_kernel_fit(&kd, &T.X, T.y, 3, NULL, 0, T.dom, 2.0, &o, &err),
                     FK_EINVAL);
    assert_non_null(strstr(err.msg, "row 1"));
    fk_mat_close(&T.X);
}

/* §8.1: the ridge predictor recovers an exact affine target; the sigma rule is
 * sqrt(2 tr Cov). */
static void ridge_and_sigma_rule(void **state)
{
    (void)state;
    fk_mat Z;
    assert_int_equal(fk_mat_init(&Z, 50, 2), FK_OK);
    double t[50], A[9] = {0}, b[3] = {0}, th[3], pred[50];
    fk_rng g;
    fk_rng_init(&g, 1, 1);
    for (int i = 0; i < 50; i++) {
        Z.data[2 * i] = fk_rng_normal(&g);
        Z.data[2 * i + 1] = fk_rng_normal(&g);
        t[i] = 2 * Z.data[2 * i] - Z.data[2 * i + 1] + 3;
    }
    fk_dica_ridge_add(&Z, t, 1, A, b);
    fk_err err;
    assert_int_equal(fk_dica_ridge_solve(2, 1, A, b, 0.0, th, &err), FK_OK);
    fk_dica_ridge_predict(&Z, th, 1, pred);
    for (int i = 0; i < 50; i++)
        assert_true(fabs(pred[i] - t[i]) < 1e-10);
    double sx[2], m2[2];
    fk_dica_moments(&Z, 50, sx, m2);
    double mpd = 0; /* mean squared pairwise distance over ordered pairs */
    for (int i = 0; i < 50; i++)
        for (int j = 0; j < 50; j++) {
            double a = Z.data[2 * i] - Z.data[2 * j], c = Z.data[2 * i + 1] - Z.data[2 * j + 1];
            mpd += (a * a + c * c) / 2500.0;
        }
    assert_true(fabs(fk_dica_sigma_rule(50, m2, 2) - sqrt(mpd)) < 1e-10);
    fk_mat_close(&Z);
}

/* Issue 32: G, C_xy and C_yy centred in two passes and joined by Chan's rule. Random
 * features at sigma = 1e4 of inputs of spread 1 vary by ~1e-4 about their mean, so the
 * centred second moment is ~1e-8 of sum phi phi^T: the one-pass S - n phibar phibar^T kept
 * ~8 digits. The statistics of 4 chunks merged equal a long-double two-pass reference to
 * 1e-10 relative. */
static void centred_moments_far_from_mean(void **state)
{
    (void)state;
    enum { N = 400, DD = 3, R = 20, D = 2 * R, C = 3 };
    fk_mat X, Phi, Psi;
    assert_int_equal(fk_mat_init(&X, N, DD), FK_OK);
    fk_rng g;
    fk_rng_init(&g, 3, 3);
    int y[N];
    long dom[N];
    for (int i = 0; i < N; i++) {
        y[i] = i % C;
        dom[i] = i / 100;
        for (int j = 0; j < DD; j++)
            X.data[i * DD + j] = fk_rng_normal(&g) + (j == y[i] ? 1.0 : 0.0);
    }
    fk_rff rf;
    fk_err err;
    assert_int_equal(fk_rff_init(&rf, 1, DD, R, 1e4, &err), FK_OK);
    assert_int_equal(fk_rff_map(&rf, &X, &Phi, &err), FK_OK);
    assert_int_equal(fk_dica_onehot(y, N, C, &Psi, &err), FK_OK);
    fk_dica_stats st, part;
    assert_int_equal(fk_dica_stats_init(&st, D, C, &err), FK_OK);
    for (int q = 0; q < 4; q++) {
        fk_mat a = fk_mat_rows(&Phi, (size_t)q * 100, 100),
               b = fk_mat_rows(&Psi, (size_t)q * 100, 100);
        assert_int_equal(fk_dica_stats_init(&part, D, C, &err), FK_OK);
        assert_int_equal(fk_dica_stats_add(&part, &a, &b, dom + q * 100, &err), FK_OK);
        assert_int_equal(fk_dica_stats_merge(&st, &part, &err), FK_OK);
        fk_dica_stats_close(&part);
    }
    /* reference: long double, two passes over all rows */
    long double mu[D] = {0}, nu[C] = {0};
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < D; k++)
            mu[k] += Phi.data[i * D + k];
        for (int k = 0; k < C; k++)
            nu[k] += Psi.data[i * C + k];
    }
    for (int k = 0; k < D; k++)
        mu[k] /= N;
    for (int k = 0; k < C; k++)
        nu[k] /= N;
    double eS = 0, nS = 0, eC = 0, nC = 0, e1 = 0;
    for (int a = 0; a < D; a++) {
        for (int b = 0; b < D; b++) {
            long double r = 0, raw = 0;
            for (int i = 0; i < N; i++) {
                r += (Phi.data[i * D + a] - mu[a]) * (Phi.data[i * D + b] - mu[b]);
                raw += (long double)Phi.data[i * D + a] * Phi.data[i * D + b];
            }
            /* the one-pass formula in double, as the old solve did */
            double one = (double)raw - (double)N * (double)mu[a] * (double)mu[b];
            eS = fmax(eS, fabs(st.S[a * D + b] - (double)r));
            e1 = fmax(e1, fabs(one - (double)r));
            nS = fmax(nS, fabs((double)r));
        }
        for (int b = 0; b < C; b++) {
            long double r = 0;
            for (int i = 0; i < N; i++)
                r += (Phi.data[i * D + a] - mu[a]) * (Psi.data[i * C + b] - nu[b]);
            eC = fmax(eC, fabs(st.C[a * C + b] - (double)r));
            nC = fmax(nC, fabs((double)r));
        }
    }
    print_message("centred S: two-pass + Chan error %.2e, one-pass error %.2e (relative)\n",
                  eS / nS, e1 / nS);
    assert_true(eS <= 1e-10 * nS);
    assert_true(eC <= 1e-10 * nC);
    assert_true(st.n == N && st.n_dom == 4);
    fk_dica_stats_close(&st);
    fk_rff_close(&rf);
    fk_mat_close(&X);
    fk_mat_close(&Phi);
    fk_mat_close(&Psi);
}

/* Issue 32: the sigma rule far from the origin. The same spread (3 features, sd 1, 2, 0.5)
 * at offsets 0, 1e7 and 1e9, the rows dealt to 4 "clients" whose moments are joined by
 * Chan's rule, gives the rule of the centred data to 1e-6 (the offset rows themselves are
 * stored to ~1e-7 at 1e9). The one-pass sum |x|^2 - |sum x|^2 / n it replaces was off by
 * 1.2 % at 1e7 and found zero spread at 1e9. */
static void sigma_rule_offsets(void **state)
{
    (void)state;
    enum { N = 400, DD = 3 };
    const double sd[DD] = {1.0, 2.0, 0.5}, offs[3] = {0, 1e7, 1e9};
    fk_mat X;
    assert_int_equal(fk_mat_init(&X, N, DD), FK_OK);
    double ref = 0;
    for (int o = 0; o < 3; o++) {
        fk_rng g;
        fk_rng_init(&g, 7, 7);
        for (int i = 0; i < N; i++)
            for (int j = 0; j < DD; j++)
                X.data[i * DD + j] =
                    offs[o] + (j ? -1.0 : 1.0) * offs[o] * 0.5 + sd[j] * fk_rng_normal(&g);
        double n = 0, sum[DD] = {0}, m2[DD] = {0};
        for (int q = 0; q < 4; q++) { /* 4 clients of 100 rows */
            fk_mat part = fk_mat_rows(&X, (size_t)q * 100, 100);
            double sb[DD], mb[DD];
            fk_dica_moments(&part, 100, sb, mb);
            fk_dica_moments_merge(&n, sum, m2, DD, 100, sb, mb);
        }
        double sg = fk_dica_sigma_rule(n, m2, DD), one = 0, one_pass;
        double s1[DD] = {0}, s2 = 0;
        for (int i = 0; i < N; i++)
            for (int j = 0; j < DD; j++) {
                s1[j] += X.data[i * DD + j];
                s2 += X.data[i * DD + j] * X.data[i * DD + j];
            }
        for (int j = 0; j < DD; j++)
            one += (s1[j] / N) * (s1[j] / N);
        one_pass = s2 / N - one; /* the old rule's tr Cov, for the message */
        if (o == 0)
            ref = sg;
        print_message("offset %.0e: sigma %.12g (offset 0: %.12g), one-pass tr Cov %.6g\n", offs[o],
                      sg, ref, one_pass);
        assert_true(fabs(sg - ref) <= 1e-6 * ref);
    }
    fk_mat_close(&X);
}

/* §8.3: the distributional kernel. With the linear sample kernel the embedding distance is
 * the distance of the domain means, so K_ab = exp(-|xbar_i - xbar_j|^2 / (2 s1^2)) K2_ab
 * exactly; same-domain pairs keep K2; sigma1 = inf is the pooling kernel; with a Gaussian
 * sample kernel the product is PSD; bad input is refused. */
static void distributional_kernel(void **state)
{
    (void)state;
    toy T;
    toy_make(&T, 3);
    size_t n = T.n;
    fk_err err;
    fk_mat K2, K;
    assert_int_equal(fk_mat_init(&K2, n, n), FK_OK);
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++) {
            double s = 0;
            for (size_t j = 0; j < 5; j++)
                s += fk_mat_get(&T.X, a, j) * fk_mat_get(&T.X, b, j);
            fk_mat_set(&K2, a, b, s);
        }
    double mean[4][5] = {{0}}, cnt[4] = {0};
    for (size_t a = 0; a < n; a++) {
        int d = (int)T.dom[a] - 10;
        cnt[d] += 1;
        for (size_t j = 0; j < 5; j++)
            mean[d][j] += fk_mat_get(&T.X, a, j);
    }
    for (int d = 0; d < 4; d++)
        for (size_t j = 0; j < 5; j++)
            mean[d][j] /= cnt[d];
    double s1 = 0.7;
    assert_int_equal(fk_dica_dist_kernel(&K2, T.dom, s1, &K, &err), FK_OK);
    double worst = 0;
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++) {
            int i = (int)T.dom[a] - 10, j = (int)T.dom[b] - 10;
            double d2 = 0;
            for (size_t c = 0; c < 5; c++)
                d2 += (mean[i][c] - mean[j][c]) * (mean[i][c] - mean[j][c]);
            double want = exp(-d2 / (2 * s1 * s1)) * fk_mat_get(&K2, a, b);
            worst = fmax(worst, fabs(fk_mat_get(&K, a, b) - want));
            if (i == j)
                assert_true(fk_mat_get(&K, a, b) == fk_mat_get(&K2, a, b));
        }
    assert_true(worst < 1e-12);
    fk_mat_close(&K);
    assert_int_equal(fk_dica_dist_kernel(&K2, T.dom, INFINITY, &K, &err), FK_OK);
    assert_memory_equal(K.data, K2.data, n * n * sizeof(double));
    fk_mat_close(&K);
    fk_mat_close(&K2);
    /* Gaussian sample kernel: the product kernel is PSD (smallest eigenvalue >= -1e-12) */
    assert_int_equal(fk_dica_gauss_gram(&T.X, &T.X, 1.5, &K2, &err), FK_OK);
    assert_int_equal(fk_dica_dist_kernel(&K2, T.dom, 0.5, &K, &err), FK_OK);
    double lmin;
    fk_mat V;
    assert_int_equal(fk_mat_scal(-1.0, &K, &err), FK_OK);
    assert_int_equal(fk_eig_sym_top(&K, 1, &lmin, &V, &err), FK_OK);
    assert_true(lmin <= 1e-12); /* -lambda_min(K) */
    fk_mat_close(&V);
    fk_mat_close(&K);
    /* refusals */
    assert_int_equal(fk_dica_dist_kernel(&K2, T.dom, 0.0, &K, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "sigma1"));
    T.dom[7] = -2;
    assert_int_equal(fk_dica_dist_kernel(&K2, T.dom, 1.0, &K, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "sample 7"));
    T.dom[7] = 10;
    fk_mat_set(&K2, 4, 9, NAN);
    assert_int_equal(fk_dica_dist_kernel(&K2, T.dom, 1.0, &K, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "row 4"));
    fk_mat Kr = fk_mat_view(K2.data, n, n - 1, K2.ld);
    assert_int_equal(fk_dica_dist_kernel(&Kr, T.dom, 1.0, &K, &err), FK_EINVAL);
    fk_mat_close(&K2);
    fk_mat_close(&T.X);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(direct_equals_reduced),
        cmocka_unit_test(direct_equals_kernel_map),
        cmocka_unit_test(kpca_closed_form),
        cmocka_unit_test(special_cases_bitwise),
        cmocka_unit_test(projection_and_invariance),
        cmocka_unit_test(finite_features_equal_kernel),
        cmocka_unit_test(federated_sums_equal_pooled),
        cmocka_unit_test(random_features_approach_kernel),
        cmocka_unit_test(regression_zero_components),
        cmocka_unit_test(normalisation_constraint),
        cmocka_unit_test(errors_are_clear),
        cmocka_unit_test(ridge_and_sigma_rule),
        cmocka_unit_test(sigma_rule_offsets),
        cmocka_unit_test(centred_moments_far_from_mean),
        cmocka_unit_test(distributional_kernel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
