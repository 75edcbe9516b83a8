#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "bench/subspace.h"
#include "common/la/mat.h"
#include "common/la/rng.h"

static void fill_normal(fk_mat *M, uint64_t seed)
{
    fk_rng g;
    fk_rng_init(&g, seed, 1);
    for (size_t i = 0; i < M->rows; i++)
        for (size_t j = 0; j < M->cols; j++)
            fk_mat_set(M, i, j, fk_rng_normal(&g));
}

/* Equal spans (one basis mixed by an invertible matrix) give 0; orthogonal
 * coordinate spans give sqrt(m); one rotated plane gives |sin angle|. */
static void sin_theta_known_cases(void **state)
{
    (void)state;
    size_t n = 30, m = 4;
    fk_mat X, R, Y, E1, E2;
    fk_err err;
    double s;
    assert_int_equal(fk_mat_init(&X, n, m), FK_OK);
    assert_int_equal(fk_mat_init(&R, m, m), FK_OK);
    assert_int_equal(fk_mat_init(&Y, n, m), FK_OK);
    fill_normal(&X, 1);
    fill_normal(&R, 2);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < m; j++) {
            double v = 0;
            for (size_t k = 0; k < m; k++)
                v += fk_mat_get(&X, i, k) * fk_mat_get(&R, k, j);
            fk_mat_set(&Y, i, j, v);
        }
    assert_int_equal(fk_sin_theta(&X, &Y, &s, &err), FK_OK);
    assert_true(s <= 1e-7);
    assert_int_equal(fk_mat_init(&E1, n, m), FK_OK);
    assert_int_equal(fk_mat_init(&E2, n, m), FK_OK);
    for (size_t j = 0; j < m; j++) {
        fk_mat_set(&E1, j, j, 1.0);
        fk_mat_set(&E2, m + j, j, 2.0);
    }
    assert_int_equal(fk_sin_theta(&E1, &E2, &s, &err), FK_OK);
    assert_true(fabs(s - 2.0) <= 1e-12);
    /* rotate the first basis vector by 0.3 rad towards e_{m}: sin Theta = sin 0.3 */
    memcpy(E2.data, E1.data, n * m * sizeof(double));
    fk_mat_set(&E2, 0, 0, cos(0.3));
    fk_mat_set(&E2, m, 0, sin(0.3));
    assert_int_equal(fk_sin_theta(&E1, &E2, &s, &err), FK_OK);
    assert_true(fabs(s - sin(0.3)) <= 1e-12);
    fk_mat bad = fk_mat_rows(&X, 0, 3);
    assert_int_equal(fk_sin_theta(&bad, &Y, &s, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "sin Theta"));
    fk_mat_close(&X);
    fk_mat_close(&R);
    fk_mat_close(&Y);
    fk_mat_close(&E1);
    fk_mat_close(&E2);
}

/* The spectral norm is the largest |eigenvalue|, negative ones included. */
static void spectral_norm_of_symmetric(void **state)
{
    (void)state;
    fk_mat A;
    fk_err err;
    double s;
    assert_int_equal(fk_mat_init(&A, 3, 3), FK_OK);
    /* eigenvalues of [[2,1,0],[1,2,0],[0,0,-5]]: 3, 1, -5 */
    fk_mat_set(&A, 0, 0, 2);
    fk_mat_set(&A, 0, 1, 1);
    fk_mat_set(&A, 1, 0, 1);
    fk_mat_set(&A, 1, 1, 2);
    fk_mat_set(&A, 2, 2, -5);
    assert_int_equal(fk_sym_norm2(&A, &s, &err), FK_OK);
    assert_true(fabs(s - 5.0) <= 1e-12);
    fk_mat_set(&A, 2, 2, 0.5);
    assert_int_equal(fk_sym_norm2(&A, &s, &err), FK_OK);
    assert_true(fabs(s - 3.0) <= 1e-12);
    assert_true(fk_mat_get(&A, 2, 2) == 0.5); /* not modified */
    fk_mat r = fk_mat_rows(&A, 0, 2);
    assert_int_equal(fk_sym_norm2(&r, &s, &err), FK_EINVAL);
    fk_mat_close(&A);
}

static void centring_zeroes_column_means(void **state)
{
    (void)state;
    fk_mat M;
    fk_err err;
    assert_int_equal(fk_mat_init(&M, 17, 5), FK_OK);
    fill_normal(&M, 3);
    for (size_t i = 0; i < 17; i++)
        fk_mat_set(&M, i, 2, fk_mat_get(&M, i, 2) + 40.0);
    double before = fk_mat_get(&M, 4, 1) - fk_mat_get(&M, 9, 1);
    assert_int_equal(fk_center_columns(&M, &err), FK_OK);
    for (size_t j = 0; j < 5; j++) {
        double s = 0;
        for (size_t i = 0; i < 17; i++)
            s += fk_mat_get(&M, i, j);
        assert_true(fabs(s) <= 1e-12);
    }
    assert_true(fabs(fk_mat_get(&M, 4, 1) - fk_mat_get(&M, 9, 1) - before) <= 1e-12);
    fk_mat_close(&M);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sin_theta_known_cases),
        cmocka_unit_test(spectral_norm_of_symmetric),
        cmocka_unit_test(centring_zeroes_column_means),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
