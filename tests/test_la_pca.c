#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "common/la/blas.h"
#include "common/la/pca.h"
#include "common/la/rng.h"

/* n samples in d = 5 dims with known axes: standard deviations (5, 2, 1, 0.1, 0.01)
 * along a rotated orthonormal basis, shifted by a large mean. */
static void make_data(fk_mat *X, size_t n, fk_mat *basis, double *mean, fk_rng *r)
{
    const size_t d = 5;
    const double sd[5] = {5, 2, 1, 0.1, 0.01};
    /* orthonormal basis from the SVD-free Gram-Schmidt of random vectors */
    assert_int_equal(fk_mat_init(basis, d, d), FK_OK);
    for (size_t i = 0; i < d; i++) {
        double *b = fk_mat_row(basis, i);
        for (size_t j = 0; j < d; j++)
            b[j] = fk_rng_normal(r);
        for (size_t p = 0; p < i; p++)
            fk_axpy(d, -fk_dot(d, b, fk_mat_row(basis, p)), fk_mat_row(basis, p), b);
        fk_scal(d, 1.0 / fk_nrm2(d, b), b);
    }
    for (size_t j = 0; j < d; j++)
        mean[j] = 1000.0 * (double)(j + 1);
    assert_int_equal(fk_mat_init(X, n, d), FK_OK);
    for (size_t i = 0; i < n; i++) {
        double *x = fk_mat_row(X, i);
        fk_copy(d, mean, x);
        for (size_t p = 0; p < d; p++)
            fk_axpy(d, sd[p] * fk_rng_normal(r), fk_mat_row(basis, p), x);
    }
}

static void recovers_axes_and_variances(void **state)
{
    (void)state;
    fk_rng r;
    fk_rng_init(&r, 21, 0);
    const size_t n = 4000, d = 5;
    fk_mat X, basis;
    double mean[5];
    make_data(&X, n, &basis, mean, &r);
    fk_pca p;
    fk_err err;
    assert_int_equal(fk_pca_fit(&p, &X, 3, &err), FK_OK);
    assert_int_equal(p.k, 3);
    /* column means equal the direct average */
    for (size_t j = 0; j < d; j++) {
        double s = 0;
        for (size_t i = 0; i < n; i++)
            s += fk_mat_get(&X, i, j);
        assert_true(fabs(p.mean.data[j] - s / n) < 1e-9);
        assert_true(fabs(p.mean.data[j] - mean[j]) < 0.5);
    }
    const double var[3] = {25, 4, 1};
    double ratio_sum = 0;
    for (size_t i = 0; i < 3; i++) {
        /* axis i is +-basis row i, variance within sampling error */
        double c = fk_dot(d, fk_mat_row(&p.axes, i), fk_mat_row(&basis, i));
        assert_true(fabs(fabs(c) - 1.0) < 1e-3);
        assert_true(fabs(fk_nrm2(d, fk_mat_row(&p.axes, i)) - 1.0) < 1e-12);
        assert_true(fabs(p.variance[i] - var[i]) < 0.1 * var[i]);
        assert_true(fabs(p.ratio[i] - p.variance[i] / p.total_variance) < 1e-15);
        ratio_sum += p.ratio[i];
        if (i)
            assert_true(p.variance[i] <= p.variance[i - 1]);
        /* sign convention: the largest-magnitude entry is positive */
        size_t arg = 0;
        for (size_t j = 1; j < d; j++)
            if (fabs(fk_mat_get(&p.axes, i, j)) > fabs(fk_mat_get(&p.axes, i, arg)))
                arg = j;
        assert_true(fk_mat_get(&p.axes, i, arg) > 0);
    }
    assert_true(ratio_sum < 1.0 && ratio_sum > 0.99);

    /* scores: zero mean, variance = explained variance, uncorrelated */
    fk_mat Z;
    assert_int_equal(fk_pca_transform(&p, &X, &Z, &err), FK_OK);
    assert_int_equal(Z.rows, n);
    assert_int_equal(Z.cols, 3);
    for (size_t a = 0; a < 3; a++) {
        double s = 0, ss = 0, cross = 0;
        for (size_t i = 0; i < n; i++) {
            double z = fk_mat_get(&Z, i, a);
            s += z;
            ss += z * z;
            cross += z * fk_mat_get(&Z, i, (a + 1) % 3);
        }
        assert_true(fabs(s / n) < 1e-8);
        assert_true(fabs(ss / (n - 1) - p.variance[a]) < 1e-9 * p.variance[a]);
        assert_true(fabs(cross / (n - 1)) < 1e-8);
    }
    /* a single row projects to (x - mean) . axis */
    fk_mat one = fk_mat_rows(&X, 17, 1), Z1;
    assert_int_equal(fk_pca_transform(&p, &one, &Z1, NULL), FK_OK);
    for (size_t a = 0; a < 3; a++) {
        double s = 0;
        for (size_t j = 0; j < d; j++)
            s += (fk_mat_get(&X, 17, j) - p.mean.data[j]) * fk_mat_get(&p.axes, a, j);
        assert_true(fabs(fk_mat_get(&Z1, 0, a) - s) < 1e-9);
        assert_true(fabs(fk_mat_get(&Z1, 0, a) - fk_mat_get(&Z, 17, a)) < 1e-9);
    }
    fk_mat_close(&Z1);
    fk_mat_close(&Z);
    fk_pca_close(&p);
    fk_mat_close(&basis);
    fk_mat_close(&X);
}

static void full_rank_total_variance_and_determinism(void **state)
{
    (void)state;
    fk_rng r;
    fk_rng_init(&r, 22, 0);
    fk_mat X, basis;
    double mean[5];
    make_data(&X, 50, &basis, mean, &r);
    fk_pca a, b;
    assert_int_equal(fk_pca_fit(&a, &X, 5, NULL), FK_OK);
    assert_int_equal(fk_pca_fit(&b, &X, 5, NULL), FK_OK);
    double vs = 0, rs = 0;
    for (size_t i = 0; i < 5; i++) {
        vs += a.variance[i];
        rs += a.ratio[i];
    }
    assert_true(fabs(vs - a.total_variance) < 1e-10 * vs);
    assert_true(fabs(rs - 1.0) < 1e-12);
    assert_memory_equal(a.axes.data, b.axes.data, 25 * sizeof(double));
    fk_pca_close(&a);
    fk_pca_close(&b);
    fk_mat_close(&basis);
    fk_mat_close(&X);
}

static void bad_arguments(void **state)
{
    (void)state;
    double x[6] = {1, 2, 3, 4, 5, 6};
    fk_mat X = fk_mat_view(x, 3, 2, 2);
    fk_pca p;
    fk_err err;
    assert_int_equal(fk_pca_fit(&p, &X, 3, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "k = 3"));
    assert_int_equal(fk_pca_fit(&p, &X, 0, &err), FK_EINVAL);
    fk_mat one = fk_mat_view(x, 1, 2, 2);
    assert_int_equal(fk_pca_fit(&p, &one, 1, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "at least 2 samples"));
    x[3] = NAN;
    assert_int_equal(fk_pca_fit(&p, &X, 1, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "not finite"));
    x[3] = 4;
    assert_int_equal(fk_pca_fit(&p, &X, 1, &err), FK_OK);
    fk_mat wrong = fk_mat_view(x, 2, 3, 3), Z;
    assert_int_equal(fk_pca_transform(&p, &wrong, &Z, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "3 features"));
    fk_pca_close(&p);
    assert_int_equal(fk_pca_transform(&p, &X, &Z, &err), FK_ESTATE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(recovers_axes_and_variances),
        cmocka_unit_test(full_rank_total_variance_and_determinism),
        cmocka_unit_test(bad_arguments),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
