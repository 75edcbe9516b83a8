#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include <cblas.h>

#include "common/la/eig.h"
#include "common/la/rng.h"

/* Random symmetric PSD A = Z Z^T of rank r and SPD B = G G^T + I. */
static void random_psd(fk_mat *A, size_t n, size_t r, uint64_t seed)
{
    fk_mat Z;
    fk_rng g;
    fk_rng_init(&g, seed, 0);
    assert_int_equal(fk_mat_init(&Z, n, r), FK_OK);
    for (size_t i = 0; i < n * r; i++)
        Z.data[i] = fk_rng_normal(&g);
    assert_int_equal(fk_mat_init(A, n, n), FK_OK);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)n, (int)r, 1.0, Z.data,
                (int)r, Z.data, (int)r, 0.0, A->data, (int)n);
    fk_mat_close(&Z);
}

static void top_eigenpairs_of_symmetric(void **state)
{
    (void)state;
    size_t n = 50, m = 7;
    fk_mat A, V, AV;
    random_psd(&A, n, 30, 1);
    double vals[7];
    fk_err err;
    assert_int_equal(fk_eig_sym_top(&A, m, vals, &V, &err), FK_OK);
    assert_int_equal(V.rows, n);
    assert_int_equal(V.cols, m);
    assert_int_equal(fk_mat_init(&AV, n, m), FK_OK);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)m, (int)n, 1.0, A.data,
                (int)n, V.data, (int)m, 0.0, AV.data, (int)m);
    for (size_t k = 0; k < m; k++) {
        if (k)
            assert_true(vals[k] <= vals[k - 1]);
        for (size_t i = 0; i < n; i++)
            assert_true(fabs(AV.data[i * m + k] - vals[k] * V.data[i * m + k]) < 1e-9 * vals[0]);
        for (size_t l = 0; l < m; l++) {
            double dot = 0;
            for (size_t i = 0; i < n; i++)
                dot += V.data[i * m + k] * V.data[i * m + l];
            assert_true(fabs(dot - (k == l)) < 1e-10);
        }
    }
    fk_mat_close(&A);
    fk_mat_close(&V);
    fk_mat_close(&AV);
}

static void generalized_top_is_b_orthonormal(void **state)
{
    (void)state;
    size_t n = 40, m = 5;
    fk_mat A, B, W;
    random_psd(&A, n, 20, 2);
    random_psd(&B, n, n, 3);
    for (size_t i = 0; i < n; i++)
        B.data[i * n + i] += 1.0;
    double vals[5];
    fk_err err;
    assert_int_equal(fk_eig_gen_top(&A, &B, m, vals, &W, &err), FK_OK);
    fk_mat AW, BW;
    assert_int_equal(fk_mat_init(&AW, n, m), FK_OK);
    assert_int_equal(fk_mat_init(&BW, n, m), FK_OK);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)m, (int)n, 1.0, A.data,
                (int)n, W.data, (int)m, 0.0, AW.data, (int)m);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)m, (int)n, 1.0, B.data,
                (int)n, W.data, (int)m, 0.0, BW.data, (int)m);
    for (size_t k = 0; k < m; k++) {
        for (size_t i = 0; i < n; i++)
            assert_true(fabs(AW.data[i * m + k] - vals[k] * BW.data[i * m + k]) < 1e-9 * vals[0]);
        for (size_t l = 0; l < m; l++) {
            double dot = 0;
            for (size_t i = 0; i < n; i++)
                dot += W.data[i * m + k] * BW.data[i * m + l];
            assert_true(fabs(dot - (k == l)) < 1e-9);
        }
    }
    fk_mat_close(&A);
    fk_mat_close(&B);
    fk_mat_close(&W);
    fk_mat_close(&AW);
    fk_mat_close(&BW);
}

static void bad_input_gives_clear_errors(void **state)
{
    (void)state;
    fk_mat A, B, V;
    fk_err err;
    double vals[4];
    random_psd(&A, 4, 4, 4);
    assert_int_equal(fk_eig_sym_top(&A, 5, vals, &V, &err), FK_EINVAL);
    assert_int_equal(fk_eig_sym_top(&A, 0, vals, &V, &err), FK_EINVAL);
    assert_int_equal(fk_mat_init(&B, 4, 4), FK_OK); /* zero: not positive definite */
    assert_int_equal(fk_eig_gen_top(&A, &B, 2, vals, &V, &err), FK_ENUMERIC);
    A.data[5] = NAN;
    assert_int_equal(fk_eig_sym_top(&A, 2, vals, &V, &err), FK_ENUMERIC);
    fk_mat_close(&A);
    fk_mat_close(&B);
}

typedef struct mat_op {
    const fk_mat *A;
} mat_op;

static void apply(void *ctx, const double *X, size_t ldx, double *Y, size_t ldy, size_t b)
{
    const fk_mat *A = ((mat_op *)ctx)->A; /* Y = X A^T: A applied to the rows of X */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)b, (int)A->rows, (int)A->cols, 1.0, X,
                (int)ldx, A->data, (int)A->ld, 0.0, Y, (int)ldy);
}

/* Block Krylov agrees with the dense solver; a too-small basis is reported. */
static void krylov_matches_dense(void **state)
{
    (void)state;
    size_t n = 300, m = 6;
    fk_mat A, V1, V2;
    fk_rng g;
    fk_rng_init(&g, 9, 9);
    fk_mat Z;
    assert_int_equal(fk_mat_init(&Z, n, n), FK_OK);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            Z.data[i * n + j] = fk_rng_normal(&g) * pow(0.97, (double)j);
    assert_int_equal(fk_mat_init(&A, n, n), FK_OK);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)n, (int)n, 1.0, Z.data,
                (int)n, Z.data, (int)n, 0.0, A.data, (int)n);
    double v1[6], v2[6];
    fk_err err;
    mat_op op = {&A};
    assert_int_equal(fk_eig_op_top(n, apply, &op, m, 200, 1e-10, 1, v1, &V1, &err), FK_OK);
    assert_int_equal(fk_eig_sym_top(&A, m, v2, &V2, &err), FK_OK);
    for (size_t k = 0; k < m; k++) {
        assert_true(fabs(v1[k] - v2[k]) <= 1e-9 * v2[0]);
        double dot = 0;
        for (size_t i = 0; i < n; i++)
            dot += V1.data[i * m + k] * V2.data[i * m + k];
        assert_true(fabs(fabs(dot) - 1.0) < 1e-6);
    }
    fk_mat_close(&V1);
    size_t two_blocks = 2 * fk_eig_op_block(m, n);
    assert_int_equal(fk_eig_op_top(n, apply, &op, m, two_blocks, 1e-14, 1, v1, &V1, &err),
                     FK_ENUMERIC);
    assert_non_null(strstr(err.msg, "not converged"));
    fk_mat_close(&A);
    fk_mat_close(&Z);
    fk_mat_close(&V2);
}

/* Options: start vectors that already span the answer converge at the first check; a
 * partial run returns what it reached; keep returns more Ritz pairs; bad shapes refused. */
static void krylov_options(void **state)
{
    (void)state;
    size_t n = 300, m = 6;
    fk_mat Z, A, Vd, V;
    fk_rng g;
    fk_rng_init(&g, 9, 9);
    assert_int_equal(fk_mat_init(&Z, n, n), FK_OK);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            Z.data[i * n + j] = fk_rng_normal(&g) * pow(0.97, (double)j);
    assert_int_equal(fk_mat_init(&A, n, n), FK_OK);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)n, (int)n, 1.0, Z.data,
                (int)n, Z.data, (int)n, 0.0, A.data, (int)n);
    double vd[16], v[16];
    fk_err err;
    mat_op op = {&A};
    assert_int_equal(fk_eig_sym_top(&A, 16, vd, &Vd, &err), FK_OK);
    fk_mat start = fk_mat_view(Vd.data, n, m, Vd.ld);
    fk_eig_op_opts o = {.block = 8, .max_basis = 200, .tol = 1e-10, .seed = 1, .start = &start};
    assert_int_equal(fk_eig_op_top_ex(n, apply, &op, m, &o, v, &V, &err), FK_OK);
    assert_true(o.applied <= 3 * 8); /* the first Rayleigh-Ritz check */
    assert_true(o.residual <= 1e-10);
    for (size_t k = 0; k < m; k++) {
        assert_true(fabs(v[k] - vd[k]) <= 1e-12 * vd[0]);
        double dot = cblas_ddot((int)n, V.data + k, (int)m, Vd.data + k, (int)Vd.ld);
        assert_true(fabs(fabs(dot) - 1.0) < 1e-9);
    }
    fk_mat_close(&V);
    /* partial: an unreachable tolerance in two blocks is no error; keep = 8 pairs back */
    fk_eig_op_opts p = {
        .block = 8, .max_basis = 16, .tol = 1e-30, .seed = 1, .keep = 8, .partial = 1};
    assert_int_equal(fk_eig_op_top_ex(n, apply, &op, m, &p, v, &V, &err), FK_OK);
    assert_true(p.residual > 1e-30 && isfinite(p.residual));
    assert_int_equal(p.applied, 16);
    assert_int_equal(V.cols, 8);
    assert_true(v[0] <= vd[0] * (1 + 1e-12) && v[0] > 0.5 * vd[0]);
    fk_mat_close(&V);
    fk_eig_op_opts bad = {.block = 8, .max_basis = 200, .tol = 1e-10, .keep = 9};
    assert_int_equal(fk_eig_op_top_ex(n, apply, &op, m, &bad, v, &V, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "keep"));
    fk_mat_close(&A);
    fk_mat_close(&Z);
    fk_mat_close(&Vd);
}

static void signs_are_fixed(void **state)
{
    (void)state;
    double d[6] = {0.1, -0.9, -0.5, 0.2, 0.3, 0.1};
    fk_mat V = fk_mat_view(d, 3, 2, 2);
    fk_eig_fix_signs(&V);
    assert_true(d[0] == -0.1 && d[2] == 0.5 && d[4] == -0.3); /* column 0 flipped */
    assert_true(d[1] == 0.9 && d[3] == -0.2); /* column 1 flipped too */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(top_eigenpairs_of_symmetric),
        cmocka_unit_test(generalized_top_is_b_orthonormal),
        cmocka_unit_test(krylov_options),
        cmocka_unit_test(bad_input_gives_clear_errors),
        cmocka_unit_test(krylov_matches_dense),
        cmocka_unit_test(signs_are_fixed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
