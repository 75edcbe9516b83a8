#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "common/la/blas.h"
#include "common/la/chol.h"
#include "common/la/rng.h"
#include "common/la/svd.h"

/* A = B B^T + n I, B n x n standard normal: well-conditioned SPD. */
static void random_spd(fk_mat *A, size_t n, fk_rng *r)
{
    fk_mat B;
    assert_int_equal(fk_mat_init(&B, n, n), FK_OK);
    for (size_t i = 0; i < n * n; i++)
        B.data[i] = fk_rng_normal(r);
    assert_int_equal(fk_mat_init(A, n, n), FK_OK);
    assert_int_equal(fk_syrk(FK_NOTRANS, 1.0, &B, 0.0, A, NULL), FK_OK);
    for (size_t i = 0; i < n; i++)
        A->data[i * n + i] += (double)n;
    fk_mat_close(&B);
}

static void factor_reconstructs_and_ignores_upper(void **state)
{
    (void)state;
    fk_rng r;
    fk_rng_init(&r, 11, 0);
    const size_t n = 7;
    fk_mat A, LLt;
    random_spd(&A, n, &r);
    /* a padded copy whose strict upper triangle is garbage: only the lower one is read */
    double buf[7 * 9];
    fk_mat Ap = fk_mat_view(buf, n, n, 9);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < 9; j++)
            buf[i * 9 + j] = j < n ? (j <= i ? fk_mat_get(&A, i, j) : 1e6) : NAN;
    fk_chol c;
    fk_err err;
    assert_int_equal(fk_chol_init(&c, &Ap, &err), FK_OK);
    assert_int_equal(fk_mat_init(&LLt, n, n), FK_OK);
    assert_int_equal(fk_gemm(FK_NOTRANS, FK_TRANS, 1.0, &c.L, &c.L, 0.0, &LLt, NULL), FK_OK);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            assert_true(fabs(fk_mat_get(&LLt, i, j) - fk_mat_get(&A, i, j)) < 1e-12 * n);
            if (j > i)
                assert_true(fk_mat_get(&c.L, i, j) == 0.0);
            if (j == i)
                assert_true(fk_mat_get(&c.L, i, i) > 0.0);
        }
    fk_mat_close(&LLt);
    fk_chol_close(&c);
    fk_mat_close(&A);
}

static void solve_whiten_logdet(void **state)
{
    (void)state;
    fk_rng r;
    fk_rng_init(&r, 12, 0);
    const size_t n = 9, k = 3;
    fk_mat A, B, X, AX;
    random_spd(&A, n, &r);
    assert_int_equal(fk_mat_init(&B, n, k), FK_OK);
    for (size_t i = 0; i < n * k; i++)
        B.data[i] = fk_rng_normal(&r);
    assert_int_equal(fk_mat_copy(&X, &B), FK_OK);
    fk_chol c;
    assert_int_equal(fk_chol_init(&c, &A, NULL), FK_OK);
    assert_int_equal(fk_chol_solve(&c, &X, NULL), FK_OK);
    assert_int_equal(fk_mat_init(&AX, n, k), FK_OK);
    assert_int_equal(fk_gemm(FK_NOTRANS, FK_NOTRANS, 1.0, &A, &X, 0.0, &AX, NULL), FK_OK);
    for (size_t i = 0; i < n * k; i++)
        assert_true(fabs(AX.data[i] - B.data[i]) < 1e-11);

    /* whitened rows: ||L^{-1} x||^2 = x^T A^{-1} x, compared with the solve */
    fk_mat Bt, W;
    assert_int_equal(fk_mat_init(&Bt, k, n), FK_OK);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < k; j++)
            fk_mat_set(&Bt, j, i, fk_mat_get(&B, i, j));
    assert_int_equal(fk_mat_copy(&W, &Bt), FK_OK);
    assert_int_equal(fk_chol_whiten_rows(&c, &W, NULL), FK_OK);
    for (size_t j = 0; j < k; j++) {
        double q = 0;
        for (size_t i = 0; i < n; i++)
            q += fk_mat_get(&B, i, j) * fk_mat_get(&X, i, j);
        double w = fk_nrm2(n, fk_mat_row(&W, j));
        assert_true(fabs(w * w - q) < 1e-12 * (1 + q));
    }

    /* log det against the singular values of A (SPD: eigenvalues = singular values) */
    fk_svd svd;
    assert_int_equal(fk_svd_init(&svd, &A, NULL), FK_OK);
    double ld = 0;
    for (size_t i = 0; i < n; i++)
        ld += log(svd.s[i]);
    assert_true(fabs(fk_chol_logdet(&c) - ld) < 1e-10 * fabs(ld));
    double rc = fk_chol_rcond(&c);
    assert_true(rc > 0.0 && rc <= 1.0);
    /* dpocon estimates within a small factor of the true 1-norm value; bound by the 2-norm one
     * loosely */
    assert_true(rc > 0.01 * svd.s[n - 1] / svd.s[0]);
    fk_svd_close(&svd);

    fk_err err;
    fk_mat wrong = fk_mat_rows(&X, 0, n - 1);
    assert_int_equal(fk_chol_solve(&c, &wrong, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "right-hand side"));
    assert_int_equal(fk_chol_whiten_rows(&c, &X, &err), FK_EINVAL);
    fk_mat_close(&W);
    fk_mat_close(&Bt);
    fk_mat_close(&AX);
    fk_mat_close(&X);
    fk_mat_close(&B);
    fk_chol_close(&c);
    fk_mat_close(&A);
}

static void known_small_case(void **state)
{
    (void)state;
    double a[4] = {4, 2, 2, 3};
    fk_mat A = fk_mat_view(a, 2, 2, 2);
    fk_chol c;
    assert_int_equal(fk_chol_init(&c, &A, NULL), FK_OK);
    assert_true(fabs(fk_chol_logdet(&c) - log(8.0)) < 1e-15);
    assert_true(fk_mat_get(&c.L, 0, 0) == 2.0);
    assert_true(fk_mat_get(&c.L, 1, 0) == 1.0);
    assert_true(fabs(fk_mat_get(&c.L, 1, 1) - sqrt(2.0)) < 1e-15);
    fk_chol_close(&c);
    double e[4] = {1, 0, 0, 1e-14};
    fk_mat E = fk_mat_view(e, 2, 2, 2);
    assert_int_equal(fk_chol_init(&c, &E, NULL), FK_OK);
    assert_true(fk_chol_rcond(&c) < 1e-13);
    fk_chol_close(&c);
}

static void errors_are_clear(void **state)
{
    (void)state;
    fk_chol c;
    fk_err err;
    double indef[9] = {1, 0, 0, 0, 1, 0, 0, 2, -1}; /* leading minor 3 is negative */
    fk_mat A = fk_mat_view(indef, 3, 3, 3);
    assert_int_equal(fk_chol_init(&c, &A, &err), FK_ENUMERIC);
    assert_non_null(strstr(err.msg, "not positive definite"));
    assert_non_null(strstr(err.msg, "leading minor 3 of 3"));
    assert_null(c.L.data);
    fk_chol_close(&c); /* closing a failed factor is safe */
    double rect[6] = {1, 2, 3, 4, 5, 6};
    fk_mat R = fk_mat_view(rect, 2, 3, 3);
    assert_int_equal(fk_chol_init(&c, &R, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "2x3"));
    double bad[4] = {1, 0, NAN, 1};
    fk_mat N = fk_mat_view(bad, 2, 2, 2);
    assert_int_equal(fk_chol_init(&c, &N, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "not finite"));
    double b[2] = {1, 1};
    fk_mat Bv = fk_mat_view(b, 2, 1, 1);
    assert_int_equal(fk_chol_solve(&c, &Bv, &err), FK_ESTATE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(factor_reconstructs_and_ignores_upper),
        cmocka_unit_test(solve_whiten_logdet),
        cmocka_unit_test(known_small_case),
        cmocka_unit_test(errors_are_clear),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
