/* Kernel SVM (common/models/svm/svm.h): a closed-form two-point problem, separable toy data,
 * decision values against the direct formula, the KKT conditions of the dual, determinism
 * and refusal of bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rff.h"
#include "common/la/rng.h"
#include "common/models/svm/svm.h"

/* n points in R^d, class c centred at c * sep along every axis, unit noise. */
static void blobs(fk_mat *X, int *y, size_t n, size_t d, int C, double sep, uint64_t seed)
{
    fk_rng g;
    fk_rng_init(&g, seed, 3);
    assert_int_equal(fk_mat_init(X, n, d), FK_OK);
    for (size_t i = 0; i < n; i++) {
        y[i] = (int)(i % (size_t)C);
        for (size_t j = 0; j < d; j++)
            fk_mat_set(X, i, j, sep * (double)y[i] * (j % 2 ? -1.0 : 1.0) + fk_rng_normal(&g));
    }
}

/* Linear kernel, x = +1 (class 0) and x = -1 (class 1): the hard-margin solution is
 * alpha = (1/2, 1/2), rho = 0, f(x) = x exactly. */
static void two_points_closed_form(void **state)
{
    (void)state;
    double k[4] = {1, -1, -1, 1};
    fk_mat K = fk_mat_view(k, 2, 2, 2);
    int y[2] = {0, 1};
    fk_svm_opts o;
    fk_svm_opts_default(&o);
    o.C = 10;
    fk_svm s;
    fk_err err;
    assert_int_equal(fk_svm_fit_kernel(&s, &K, y, 2, &o, &err), FK_OK);
    assert_int_equal(s.n_models, 1);
    assert_int_equal(s.n_sv, 2);
    assert_true(fabs(fk_mat_get(&s.coef, 0, 0) - 0.5) < 1e-15);
    assert_true(fabs(fk_mat_get(&s.coef, 1, 0) + 0.5) < 1e-15);
    assert_true(fabs(s.rho[0]) < 1e-15);
    /* test points x = 2, -0.25: kernel rows (2, -2), (-0.25, 0.25) -> f = 2, -0.25 */
    double kt[4] = {2, -2, -0.25, 0.25};
    fk_mat Kt = fk_mat_view(kt, 2, 2, 2), dec;
    assert_int_equal(fk_svm_decision_kernel(&s, &Kt, &dec, &err), FK_OK);
    assert_true(fabs(fk_mat_get(&dec, 0, 0) - 2.0) < 1e-14);
    assert_true(fabs(fk_mat_get(&dec, 1, 0) + 0.25) < 1e-14);
    int yh[2];
    assert_int_equal(fk_svm_vote(&s, &dec, yh, &err), FK_OK);
    assert_int_equal(yh[0], 0);
    assert_int_equal(yh[1], 1);
    fk_mat_close(&dec);
    fk_svm_close(&s);
}

/* Three well-separated classes: every training and fresh point right, OvO and OvR. */
static void separable_blobs(void **state)
{
    (void)state;
    for (int multi = 0; multi < 2; multi++) {
        fk_mat X, Xt;
        int y[90], yt[60], yh[60];
        blobs(&X, y, 90, 4, 3, 8.0, 1);
        blobs(&Xt, yt, 60, 4, 3, 8.0, 2);
        fk_svm_opts o;
        fk_svm_opts_default(&o);
        o.C = 10;
        o.multi = multi ? FK_SVM_OVR : FK_SVM_OVO;
        fk_svm s;
        fk_err err;
        assert_int_equal(fk_svm_fit_rbf(&s, &X, y, 3, 3.0, &o, &err), FK_OK);
        assert_int_equal(s.n_models, 3); /* 3 pairs (OvO) or 3 classes (OvR) */
        assert_true(s.n_sv > 0 && s.n_sv < 90);
        int yhtr[90];
        assert_int_equal(fk_svm_predict(&s, &X, yhtr, &err), FK_OK);
        for (int i = 0; i < 90; i++)
            assert_int_equal(yhtr[i], y[i]);
        assert_int_equal(fk_svm_predict(&s, &Xt, yh, &err), FK_OK);
        for (int i = 0; i < 60; i++)
            assert_int_equal(yh[i], yt[i]);
        fk_svm_close(&s);
        fk_mat_close(&X);
        fk_mat_close(&Xt);
    }
}

/* Overlapping classes: decision values equal sum_s coef_s k(x_s, x) - rho computed
 * point by point, and the kernel-row path equals the input path. */
static void decision_matches_formula(void **state)
{
    (void)state;
    fk_mat X, Xt, dec, dk, Kt;
    int y[120], yt[40];
    blobs(&X, y, 120, 5, 4, 1.0, 3);
    blobs(&Xt, yt, 40, 5, 4, 1.0, 4);
    fk_svm_opts o;
    fk_svm_opts_default(&o);
    o.C = 2;
    fk_svm s;
    fk_err err;
    double sigma = 1.7;
    assert_int_equal(fk_svm_fit_rbf(&s, &X, y, 4, sigma, &o, &err), FK_OK);
    assert_int_equal(s.n_models, 6);
    assert_int_equal(fk_svm_decision(&s, &Xt, &dec, &err), FK_OK);
    double worst = 0;
    for (size_t i = 0; i < 40; i++)
        for (size_t k = 0; k < s.n_models; k++) {
            double f = -s.rho[k];
            for (size_t r = 0; r < s.n_sv; r++)
                f += fk_mat_get(&s.coef, r, k) *
                     fk_gauss_kernel(fk_mat_row(&X, s.sv[r]), fk_mat_row(&Xt, i), 5, sigma);
            worst = fmax(worst, fabs(f - fk_mat_get(&dec, i, k)));
        }
    assert_true(worst < 1e-10);
    assert_int_equal(fk_svm_rbf_gram(&Xt, &X, sigma, &Kt, &err), FK_OK);
    assert_int_equal(fk_svm_decision_kernel(&s, &Kt, &dk, &err), FK_OK);
    for (size_t i = 0; i < 40; i++)
        for (size_t k = 0; k < s.n_models; k++)
            assert_true(fabs(fk_mat_get(&dk, i, k) - fk_mat_get(&dec, i, k)) < 1e-12);
    fk_mat_close(&dec);
    fk_mat_close(&dk);
    fk_mat_close(&Kt);
    fk_svm_close(&s);
    fk_mat_close(&X);
    fk_mat_close(&Xt);
}

/* The dual's optimality conditions on a noisy binary problem: y^T alpha = 0, 0 <= alpha
 * <= C, and y f(x_i) >= 1 (alpha 0), = 1 (free), <= 1 (alpha C) within the tolerance. */
static void kkt_conditions(void **state)
{
    (void)state;
    fk_mat X, K, dec;
    int y[150];
    blobs(&X, y, 150, 3, 2, 1.2, 5);
    fk_svm_opts o;
    fk_svm_opts_default(&o);
    o.C = 3;
    o.tol = 1e-6;
    fk_svm s;
    fk_err err;
    assert_int_equal(fk_svm_rbf_gram(&X, &X, 1.5, &K, &err), FK_OK);
    assert_int_equal(fk_svm_fit_kernel(&s, &K, y, 2, &o, &err), FK_OK);
    assert_int_equal(fk_svm_decision_kernel(&s, &K, &dec, &err), FK_OK);
    double a[150] = {0}, sum = 0;
    for (size_t r = 0; r < s.n_sv; r++) {
        double c = fk_mat_get(&s.coef, r, 0);
        int yy = y[s.sv[r]] == 0 ? 1 : -1; /* class 0 is the +1 side */
        a[s.sv[r]] = c * yy;
        sum += c;
    }
    assert_true(fabs(sum) < 1e-10);
    int n_free = 0, n_bound = 0;
    for (int i = 0; i < 150; i++) {
        int yy = y[i] == 0 ? 1 : -1;
        double m = yy * fk_mat_get(&dec, (size_t)i, 0);
        assert_true(a[i] >= 0 && a[i] <= o.C);
        if (a[i] == 0)
            assert_true(m >= 1 - 1e-5);
        else if (a[i] == o.C) {
            assert_true(m <= 1 + 1e-5);
            n_bound++;
        } else {
            assert_true(fabs(m - 1) < 1e-5);
            n_free++;
        }
    }
    assert_true(n_free > 0 && n_bound > 0); /* both kinds exercised */
    /* the same fit twice is bit-identical */
    fk_svm s2;
    assert_int_equal(fk_svm_fit_kernel(&s2, &K, y, 2, &o, &err), FK_OK);
    assert_int_equal(s2.n_sv, s.n_sv);
    assert_memory_equal(s2.coef.data, s.coef.data, s.n_sv * sizeof(double));
    assert_memory_equal(s2.rho, s.rho, sizeof(double));
    fk_svm_close(&s2);
    fk_mat_close(&dec);
    fk_mat_close(&K);
    fk_svm_close(&s);
    fk_mat_close(&X);
}

/* Absent classes are never predicted; labels keep their values. */
static void absent_class(void **state)
{
    (void)state;
    fk_mat X;
    int y[40], yh[40];
    blobs(&X, y, 40, 2, 2, 8.0, 6);
    for (int i = 0; i < 40; i++)
        y[i] = y[i] ? 3 : 1; /* classes 1 and 3 of [0, 5) */
    fk_svm_opts o;
    fk_svm_opts_default(&o);
    fk_svm s;
    fk_err err;
    assert_int_equal(fk_svm_fit_rbf(&s, &X, y, 5, 2.0, &o, &err), FK_OK);
    assert_int_equal(s.n_present, 2);
    assert_int_equal(s.n_models, 1);
    assert_int_equal(fk_svm_predict(&s, &X, yh, &err), FK_OK);
    for (int i = 0; i < 40; i++)
        assert_int_equal(yh[i], y[i]);
    fk_svm_close(&s);
    fk_mat_close(&X);
}

static void bad_input(void **state)
{
    (void)state;
    fk_mat X, K;
    int y[20];
    blobs(&X, y, 20, 2, 2, 3.0, 7);
    fk_svm_opts o;
    fk_svm_opts_default(&o);
    fk_svm s;
    fk_err err;
    o.C = 0;
    assert_int_equal(fk_svm_fit_rbf(&s, &X, y, 2, 1.0, &o, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "C must be > 0"));
    o.C = 1;
    assert_int_equal(fk_svm_fit_rbf(&s, &X, y, 2, 0.0, &o, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "sigma"));
    y[4] = 2;
    assert_int_equal(fk_svm_fit_rbf(&s, &X, y, 2, 1.0, &o, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "label 2 of point 4"));
    int one[20] = {0};
    assert_int_equal(fk_svm_fit_rbf(&s, &X, one, 2, 1.0, &o, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "at least 2"));
    y[4] = 0;
    fk_mat_set(&X, 3, 1, NAN);
    assert_int_equal(fk_svm_fit_rbf(&s, &X, y, 2, 1.0, &o, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "NaN"));
    fk_mat_set(&X, 3, 1, 0.5);
    assert_int_equal(fk_svm_rbf_gram(&X, &X, 1.0, &K, &err), FK_OK);
    fk_mat Kr = fk_mat_view(K.data, 20, 19, K.ld); /* not square */
    assert_int_equal(fk_svm_fit_kernel(&s, &Kr, y, 2, &o, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "square"));
    fk_mat_set(&K, 2, 5, 0.9); /* asymmetric */
    assert_int_equal(fk_svm_fit_kernel(&s, &K, y, 2, &o, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "(5, 2)"));
    fk_mat_set(&K, 2, 5, INFINITY);
    assert_int_equal(fk_svm_fit_kernel(&s, &K, y, 2, &o, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "not finite"));
    fk_mat_set(&K, 2, 5, fk_mat_get(&K, 5, 2));
    /* too few SMO steps: an error naming the gap, never a half-solved model */
    o.max_iter = 1;
    o.C = 100;
    assert_int_equal(fk_svm_fit_kernel(&s, &K, y, 2, &o, &err), FK_ENUMERIC);
    assert_non_null(strstr(err.msg, "SMO did not reach"));
    assert_null(s.rho);
    o.max_iter = 0;
    /* a kernel fit predicts from kernel rows only, with the right width */
    assert_int_equal(fk_svm_fit_kernel(&s, &K, y, 2, &o, &err), FK_OK);
    int yh[20];
    fk_mat dec;
    assert_int_equal(fk_svm_predict(&s, &X, yh, &err), FK_ESTATE);
    assert_int_equal(fk_svm_decision_kernel(&s, &Kr, &dec, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "19 columns"));
    fk_svm_close(&s);
    assert_int_equal(fk_svm_fit_rbf(&s, &X, y, 2, 1.0, &o, &err), FK_OK);
    fk_mat X3 = fk_mat_view(X.data, 20, 1, X.ld);
    assert_int_equal(fk_svm_predict(&s, &X3, yh, &err), FK_EINVAL);
    fk_svm_close(&s);
    fk_mat_close(&K);
    fk_mat_close(&X);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(two_points_closed_form), cmocka_unit_test(separable_blobs),
        cmocka_unit_test(decision_matches_formula), cmocka_unit_test(kkt_conditions),
        cmocka_unit_test(absent_class), cmocka_unit_test(bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
