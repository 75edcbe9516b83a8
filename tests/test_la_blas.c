#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "common/la/blas.h"
#include "common/la/blas_threads.h"
#include "common/la/rng.h"

/* A rows x cols view with ld = cols + pad inside a freshly allocated buffer, filled with N(0,1). */
static fk_mat padded_random(fk_mat *store, size_t rows, size_t cols, size_t pad, fk_rng *r)
{
    assert_int_equal(fk_mat_init(store, rows ? rows : 1, cols + pad), FK_OK);
    for (size_t i = 0; i < store->rows * store->cols; i++)
        store->data[i] = fk_rng_normal(r);
    return fk_mat_view(store->data, rows, cols, cols + pad);
}

/* Element (i, j) of op(M). */
static double opget(const fk_mat *M, int trans, size_t i, size_t j)
{
    return trans ? fk_mat_get(M, j, i) : fk_mat_get(M, i, j);
}

static void gemm_matches_reference_all_transposes(void **state)
{
    (void)state;
    fk_rng r;
    fk_rng_init(&r, 1, 0);
    const size_t m = 7, n = 5, k = 9;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            fk_mat sa, sb, sc;
            fk_mat A = padded_random(&sa, ta ? k : m, ta ? m : k, 3, &r);
            fk_mat B = padded_random(&sb, tb ? n : k, tb ? k : n, 2, &r);
            fk_mat C = padded_random(&sc, m, n, 4, &r);
            fk_mat C0;
            assert_int_equal(fk_mat_copy(&C0, &C), FK_OK);
            fk_err err;
            assert_int_equal(fk_gemm(ta, tb, 1.5, &A, &B, -0.25, &C, &err), FK_OK);
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < n; j++) {
                    double s = 0.0;
                    for (size_t l = 0; l < k; l++)
                        s += opget(&A, ta, i, l) * opget(&B, tb, l, j);
                    double want = 1.5 * s - 0.25 * fk_mat_get(&C0, i, j);
                    assert_true(fabs(fk_mat_get(&C, i, j) - want) < 1e-12 * (1 + fabs(want)));
                }
            fk_mat_close(&C0);
            fk_mat_close(&sa);
            fk_mat_close(&sb);
            fk_mat_close(&sc);
        }
}

static void gemm_leaves_padding_alone(void **state)
{
    (void)state;
    fk_rng r;
    fk_rng_init(&r, 2, 0);
    fk_mat sa, sb, sc;
    fk_mat A = padded_random(&sa, 4, 3, 0, &r);
    fk_mat B = padded_random(&sb, 3, 2, 0, &r);
    fk_mat C = padded_random(&sc, 4, 2, 3, &r);
    double pad[4][3];
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 3; j++)
            pad[i][j] = sc.data[i * 5 + 2 + j];
    assert_int_equal(fk_gemm(FK_NOTRANS, FK_NOTRANS, 1.0, &A, &B, 0.0, &C, NULL), FK_OK);
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 3; j++)
            assert_true(sc.data[i * 5 + 2 + j] == pad[i][j]);
    fk_mat_close(&sa);
    fk_mat_close(&sb);
    fk_mat_close(&sc);
}

static void gemm_beta_zero_ignores_nan(void **state)
{
    (void)state;
    fk_mat A, B, C;
    assert_int_equal(fk_mat_init(&A, 2, 2), FK_OK);
    assert_int_equal(fk_mat_init(&B, 2, 2), FK_OK);
    assert_int_equal(fk_mat_init(&C, 2, 2), FK_OK);
    A.data[0] = 1, A.data[1] = 2, A.data[2] = 3, A.data[3] = 4;
    B.data[0] = 1, B.data[3] = 1;
    for (int i = 0; i < 4; i++)
        C.data[i] = NAN;
    assert_int_equal(fk_gemm(FK_NOTRANS, FK_NOTRANS, 1.0, &A, &B, 0.0, &C, NULL), FK_OK);
    for (int i = 0; i < 4; i++)
        assert_true(C.data[i] == A.data[i]);
    fk_mat_close(&A);
    fk_mat_close(&B);
    fk_mat_close(&C);
}

static void gemm_empty_inner_dimension_scales_c(void **state)
{
    (void)state;
    fk_mat A, B, C;
    assert_int_equal(fk_mat_init(&A, 3, 0), FK_OK);
    assert_int_equal(fk_mat_init(&B, 0, 2), FK_OK);
    assert_int_equal(fk_mat_init(&C, 3, 2), FK_OK);
    for (int i = 0; i < 6; i++)
        C.data[i] = i + 1;
    assert_int_equal(fk_gemm(FK_NOTRANS, FK_NOTRANS, 1.0, &A, &B, 2.0, &C, NULL), FK_OK);
    for (int i = 0; i < 6; i++)
        assert_true(C.data[i] == 2.0 * (i + 1));
    fk_mat_close(&A);
    fk_mat_close(&B);
    fk_mat_close(&C);
}

static void gemm_rejects_bad_shapes_and_aliasing(void **state)
{
    (void)state;
    fk_mat A, B, C;
    fk_err err;
    assert_int_equal(fk_mat_init(&A, 3, 4), FK_OK);
    assert_int_equal(fk_mat_init(&B, 5, 2), FK_OK);
    assert_int_equal(fk_mat_init(&C, 3, 2), FK_OK);
    assert_int_equal(fk_gemm(FK_NOTRANS, FK_NOTRANS, 1, &A, &B, 0, &C, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "3x4"));
    assert_non_null(strstr(err.msg, "5x2"));
    fk_mat B2 = fk_mat_view(B.data, 4, 2, 2);
    fk_mat C2 = fk_mat_view(C.data, 2, 2, 2);
    assert_int_equal(fk_gemm(FK_NOTRANS, FK_NOTRANS, 1, &A, &B2, 0, &C2, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "C is 2x2"));
    /* output overlapping an input */
    fk_mat Asq = fk_mat_view(A.data, 2, 2, 4);
    fk_mat Cright = fk_mat_view(A.data + 2, 2, 2, 4); /* right column block of the same rows */
    assert_int_equal(fk_gemm(FK_NOTRANS, FK_NOTRANS, 1, &Asq, &Asq, 0, &Cright, &err), FK_OK);
    fk_mat Cbelow = fk_mat_view(A.data + 8, 1, 2, 4);
    fk_mat A12 = fk_mat_view(A.data, 1, 2, 4);
    assert_int_equal(fk_gemm(FK_NOTRANS, FK_NOTRANS, 1, &A12, &Asq, 0, &Cbelow, &err), FK_OK);
    fk_mat Cbad = fk_mat_view(A.data + 1, 2, 2, 4);
    assert_int_equal(fk_gemm(FK_NOTRANS, FK_NOTRANS, 1, &Asq, &Asq, 0, &Cbad, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "overlaps"));
    /* ld below cols */
    fk_mat bad = fk_mat_view(A.data, 2, 4, 3);
    assert_int_equal(fk_gemm(FK_NOTRANS, FK_TRANS, 1, &bad, &bad, 0, &C2, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "leading dimension"));
    assert_int_equal(fk_gemm(2, FK_NOTRANS, 1, &Asq, &Asq, 0, &C2, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "transpose flag 2"));
    /* beyond the 32-bit BLAS index range: refused before any memory is touched */
    fk_mat huge = fk_mat_view(A.data, (size_t)1 << 31, 1, 1);
    assert_int_equal(fk_gemm(FK_TRANS, FK_NOTRANS, 1, &huge, &huge, 0, &C2, &err), FK_ELIMIT);
    assert_non_null(strstr(err.msg, "BLAS index range"));
    fk_mat nodata = fk_mat_view(NULL, 2, 2, 2);
    assert_int_equal(fk_gemm(FK_NOTRANS, FK_NOTRANS, 1, &nodata, &Asq, 0, &C2, &err), FK_EINVAL);
    fk_mat_close(&A);
    fk_mat_close(&B);
    fk_mat_close(&C);
}

static void syrk_fills_both_triangles(void **state)
{
    (void)state;
    fk_rng r;
    fk_rng_init(&r, 3, 0);
    for (int t = 0; t < 2; t++) {
        fk_mat sa, sc, G;
        fk_mat A = padded_random(&sa, 6, 4, 1, &r);
        size_t n = t ? 4 : 6;
        fk_mat C = padded_random(&sc, n, n, 2, &r);
        assert_int_equal(fk_mat_init(&G, n, n), FK_OK);
        /* symmetric old C so beta applies to a well-defined matrix */
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < i; j++)
                fk_mat_set(&C, j, i, fk_mat_get(&C, i, j));
        fk_mat C0;
        assert_int_equal(fk_mat_copy(&C0, &C), FK_OK);
        assert_int_equal(fk_gemm(t ? FK_TRANS : FK_NOTRANS, t ? FK_NOTRANS : FK_TRANS, 2.0, &A, &A,
                                 0.0, &G, NULL),
                         FK_OK);
        assert_int_equal(fk_syrk(t, 2.0, &A, 0.5, &C, NULL), FK_OK);
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) {
                double want = fk_mat_get(&G, i, j) + 0.5 * fk_mat_get(&C0, i, j);
                assert_true(fabs(fk_mat_get(&C, i, j) - want) < 1e-12 * (1 + fabs(want)));
                assert_true(fk_mat_get(&C, i, j) == fk_mat_get(&C, j, i));
            }
        fk_err err;
        fk_mat wrong = fk_mat_rows(&C, 0, n - 1);
        assert_int_equal(fk_syrk(t, 1.0, &A, 0.0, &wrong, &err), FK_EINVAL);
        assert_non_null(strstr(err.msg, "fk_syrk"));
        fk_mat_close(&C0);
        fk_mat_close(&G);
        fk_mat_close(&sa);
        fk_mat_close(&sc);
    }
}

static void gemv_both_ways(void **state)
{
    (void)state;
    fk_rng r;
    fk_rng_init(&r, 4, 0);
    fk_mat sa;
    fk_mat A = padded_random(&sa, 5, 3, 2, &r);
    double x3[3] = {1, -2, 0.5}, x5[5] = {0.5, 1, -1, 2, 3}, y5[5], y3[3];
    for (int i = 0; i < 5; i++)
        y5[i] = i;
    for (int i = 0; i < 3; i++)
        y3[i] = -i;
    assert_int_equal(fk_gemv(FK_NOTRANS, 2.0, &A, x3, 3, 1.0, y5, 5, NULL), FK_OK);
    for (size_t i = 0; i < 5; i++) {
        double s = 0;
        for (size_t j = 0; j < 3; j++)
            s += fk_mat_get(&A, i, j) * x3[j];
        assert_true(fabs(y5[i] - (2 * s + (double)i)) < 1e-12);
    }
    assert_int_equal(fk_gemv(FK_TRANS, 1.0, &A, x5, 5, 0.0, y3, 3, NULL), FK_OK);
    for (size_t j = 0; j < 3; j++) {
        double s = 0;
        for (size_t i = 0; i < 5; i++)
            s += fk_mat_get(&A, i, j) * x5[i];
        assert_true(fabs(y3[j] - s) < 1e-12);
    }
    fk_err err;
    assert_int_equal(fk_gemv(FK_TRANS, 1.0, &A, x3, 3, 0.0, y5, 5, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "x needs length 5"));
    fk_mat_close(&sa);
}

static void axpy_scal_norms_on_views(void **state)
{
    (void)state;
    fk_rng r;
    fk_rng_init(&r, 5, 0);
    fk_mat sx, sy;
    fk_mat X = padded_random(&sx, 4, 3, 2, &r);
    fk_mat Y = padded_random(&sy, 4, 3, 1, &r);
    fk_mat Y0;
    assert_int_equal(fk_mat_copy(&Y0, &Y), FK_OK);
    assert_int_equal(fk_mat_axpy(-3.0, &X, &Y, NULL), FK_OK);
    double ss = 0;
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 3; j++) {
            double want = fk_mat_get(&Y0, i, j) - 3.0 * fk_mat_get(&X, i, j);
            assert_true(fabs(fk_mat_get(&Y, i, j) - want) < 1e-14 * (1 + fabs(want)));
            ss += fk_mat_get(&X, i, j) * fk_mat_get(&X, i, j);
        }
    assert_true(fabs(fk_mat_nrm2(&X) - sqrt(ss)) < 1e-13);
    double before = fk_mat_get(&X, 1, 2), pad = sx.data[1 * 5 + 3];
    assert_int_equal(fk_mat_scal(0.5, &X, NULL), FK_OK);
    assert_true(fk_mat_get(&X, 1, 2) == 0.5 * before);
    assert_true(sx.data[1 * 5 + 3] == pad); /* padding untouched */
    fk_err err;
    fk_mat small = fk_mat_rows(&Y, 0, 2);
    assert_int_equal(fk_mat_axpy(1.0, &X, &small, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "4x3"));
    double a[4] = {1, 2, 3, 4}, b[4] = {4, 3, 2, 1}, c[4];
    assert_true(fk_dot(4, a, b) == 20.0);
    assert_true(fk_nrm2(4, a) == sqrt(30.0));
    assert_true(fk_nrm2(0, a) == 0.0);
    fk_copy(4, a, c);
    fk_axpy(4, 1.0, b, c);
    fk_scal(4, 2.0, c);
    for (int i = 0; i < 4; i++)
        assert_true(c[i] == 10.0);
    fk_mat_close(&Y0);
    fk_mat_close(&sx);
    fk_mat_close(&sy);
}

static void empty_inner_dimension_syrk_gemv(void **state)
{
    (void)state;
    fk_mat A, C;
    assert_int_equal(fk_mat_init(&A, 3, 0), FK_OK);
    assert_int_equal(fk_mat_init(&C, 3, 3), FK_OK);
    for (int i = 0; i < 9; i++)
        C.data[i] = 1.0;
    assert_int_equal(fk_syrk(FK_NOTRANS, 1.0, &A, 3.0, &C, NULL), FK_OK);
    for (int i = 0; i < 9; i++)
        assert_true(C.data[i] == 3.0);
    double y[3] = {1, 2, 3};
    assert_int_equal(fk_gemv(FK_NOTRANS, 1.0, &A, NULL, 0, 2.0, y, 3, NULL), FK_OK);
    assert_true(y[0] == 2.0 && y[1] == 4.0 && y[2] == 6.0);
    fk_mat_close(&A);
    fk_mat_close(&C);
}

/* FK_BLAS_THREADS pins OpenBLAS; unset means one thread, and a value that is not a count is
 * refused with the value and what to set, leaving OpenBLAS as it was. */
static void blas_threads_from_environment(void **state)
{
    (void)state;
    int n = 0;
    fk_err err = {0};
    assert_int_equal(unsetenv("FK_BLAS_THREADS"), 0);
    assert_int_equal(fk_blas_threads_setup(&n, &err), FK_OK);
    assert_int_equal(n, FK_BLAS_THREADS_DEFAULT);
    assert_int_equal(openblas_get_num_threads(), FK_BLAS_THREADS_DEFAULT);
    assert_int_equal(setenv("FK_BLAS_THREADS", "2", 1), 0);
    assert_int_equal(fk_blas_threads_setup(&n, &err), FK_OK);
    assert_int_equal(n, 2);
    assert_int_equal(openblas_get_num_threads(), 2);
    static const char *bad[] = {"0", "-1", "2x", " ", "999", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(setenv("FK_BLAS_THREADS", bad[i], 1), 0);
        n = -7;
        assert_int_equal(fk_blas_threads_setup(&n, &err), FK_EINVAL);
        assert_int_equal(n, -7);
        assert_non_null(strstr(err.msg, "FK_BLAS_THREADS"));
        assert_non_null(strstr(err.msg, bad[i]));
        assert_int_equal(openblas_get_num_threads(), 2);
    }
    assert_int_equal(unsetenv("FK_BLAS_THREADS"), 0);
    assert_int_equal(fk_blas_threads_setup(&n, &err), FK_OK);
    assert_int_equal(n, 1);
    assert_non_null(fk_blas_core_name());
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(gemm_matches_reference_all_transposes),
        cmocka_unit_test(gemm_leaves_padding_alone),
        cmocka_unit_test(gemm_beta_zero_ignores_nan),
        cmocka_unit_test(gemm_empty_inner_dimension_scales_c),
        cmocka_unit_test(gemm_rejects_bad_shapes_and_aliasing),
        cmocka_unit_test(syrk_fills_both_triangles),
        cmocka_unit_test(gemv_both_ways),
        cmocka_unit_test(axpy_scal_norms_on_views),
        cmocka_unit_test(empty_inner_dimension_syrk_gemv),
        cmocka_unit_test(blas_threads_from_environment),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
