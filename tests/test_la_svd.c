#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "common/la/blas.h"
#include "common/la/rng.h"
#include "common/la/svd.h"

/* ||Q^T Q - I||_max for the columns (rows = 0) or rows (rows = 1) of Q. */
static double orthonormality_error(const fk_mat *Q, int rows)
{
    size_t r = rows ? Q->rows : Q->cols;
    fk_mat G;
    assert_int_equal(fk_mat_init(&G, r, r), FK_OK);
    assert_int_equal(fk_syrk(rows ? FK_NOTRANS : FK_TRANS, 1.0, Q, 0.0, &G, NULL), FK_OK);
    double worst = 0;
    for (size_t i = 0; i < r; i++)
        for (size_t j = 0; j < r; j++)
            worst = fmax(worst, fabs(fk_mat_get(&G, i, j) - (i == j)));
    fk_mat_close(&G);
    return worst;
}

static void reconstructs(size_t m, size_t n, size_t pad, uint64_t seed)
{
    fk_rng r;
    fk_rng_init(&r, seed, 0);
    fk_mat store;
    assert_int_equal(fk_mat_init(&store, m, n + pad), FK_OK);
    for (size_t i = 0; i < store.rows * store.cols; i++)
        store.data[i] = fk_rng_normal(&r);
    fk_mat A = fk_mat_view(store.data, m, n, n + pad);
    fk_mat A0;
    assert_int_equal(fk_mat_copy(&A0, &A), FK_OK);
    fk_svd svd;
    fk_err err;
    assert_int_equal(fk_svd_init(&svd, &A, &err), FK_OK);
    size_t k = m < n ? m : n;
    assert_int_equal(svd.r, k);
    assert_int_equal(svd.U.rows, m);
    assert_int_equal(svd.U.cols, k);
    assert_int_equal(svd.Vt.rows, k);
    assert_int_equal(svd.Vt.cols, n);
    for (size_t i = 0; i + 1 < k; i++)
        assert_true(svd.s[i] >= svd.s[i + 1]);
    assert_true(svd.s[k - 1] >= 0);
    assert_true(orthonormality_error(&svd.U, 0) < 1e-12);
    assert_true(orthonormality_error(&svd.Vt, 1) < 1e-12);
    /* U diag(s) Vt == A */
    fk_mat US, R;
    assert_int_equal(fk_mat_copy(&US, &svd.U), FK_OK);
    for (size_t j = 0; j < k; j++)
        for (size_t i = 0; i < m; i++)
            fk_mat_set(&US, i, j, fk_mat_get(&US, i, j) * svd.s[j]);
    assert_int_equal(fk_mat_init(&R, m, n), FK_OK);
    assert_int_equal(fk_gemm(FK_NOTRANS, FK_NOTRANS, 1.0, &US, &svd.Vt, 0.0, &R, NULL), FK_OK);
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            assert_true(fabs(fk_mat_get(&R, i, j) - fk_mat_get(&A, i, j)) < 1e-12 * svd.s[0]);
            assert_true(fk_mat_get(&A, i, j) == fk_mat_get(&A0, i, j)); /* input untouched */
        }
    /* ||A||_F^2 = sum s_i^2 */
    double ss = 0;
    for (size_t i = 0; i < k; i++)
        ss += svd.s[i] * svd.s[i];
    double f = fk_mat_nrm2(&A);
    assert_true(fabs(ss - f * f) < 1e-11 * f * f);
    fk_mat_close(&R);
    fk_mat_close(&US);
    fk_svd_close(&svd);
    fk_mat_close(&A0);
    fk_mat_close(&store);
}

static void tall_wide_square_padded(void **state)
{
    (void)state;
    reconstructs(40, 7, 0, 1);
    reconstructs(6, 33, 0, 2);
    reconstructs(12, 12, 5, 3);
    reconstructs(25, 9, 3, 4);
    reconstructs(1, 5, 0, 5);
    reconstructs(5, 1, 2, 6);
}

static void known_singular_values_and_rank_deficiency(void **state)
{
    (void)state;
    /* rank one: x y^T with ||x|| = 5, ||y|| = 2 -> s = (10, 0, 0) */
    double a[9];
    const double x[3] = {3, 4, 0}, y[3] = {0, 2, 0};
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            a[i * 3 + j] = x[i] * y[j];
    fk_mat A = fk_mat_view(a, 3, 3, 3);
    fk_svd svd;
    assert_int_equal(fk_svd_init(&svd, &A, NULL), FK_OK);
    assert_true(fabs(svd.s[0] - 10.0) < 1e-14);
    assert_true(svd.s[1] < 1e-14 && svd.s[2] < 1e-14);
    /* the first left vector is +-x/5 */
    assert_true(fabs(fabs(fk_mat_get(&svd.U, 0, 0)) - 0.6) < 1e-14);
    assert_true(fabs(fabs(fk_mat_get(&svd.U, 1, 0)) - 0.8) < 1e-14);
    fk_svd_close(&svd);
}

static void bad_input(void **state)
{
    (void)state;
    fk_svd svd;
    fk_err err;
    double a[4] = {1, 2, INFINITY, 4};
    fk_mat A = fk_mat_view(a, 2, 2, 2);
    assert_int_equal(fk_svd_init(&svd, &A, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "A(1,0) is not finite"));
    fk_mat E = fk_mat_view(a, 0, 2, 2);
    assert_int_equal(fk_svd_init(&svd, &E, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "0x2"));
    fk_svd_close(&svd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tall_wide_square_padded),
        cmocka_unit_test(known_singular_values_and_rank_deficiency),
        cmocka_unit_test(bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
