#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "common/la/eig.h"
#include "common/la/rng.h"
#include "common/methods/tca.h"

static void fill_normal(fk_mat *X, uint64_t seed, double shift_rows_from, size_t r0)
{
    fk_rng g;
    fk_rng_init(&g, seed, 1);
    for (size_t i = 0; i < X->rows; i++)
        for (size_t j = 0; j < X->cols; j++)
            X->data[i * X->ld + j] = fk_rng_normal(&g) + (i >= r0 && j < 3 ? shift_rows_from : 0);
}

/* Explicit A = Phi^T H Phi and B = v v^T + gamma I. */
static void explicit_ab(const fk_mat *Phi, size_t n_s, double gamma, fk_mat *A, fk_mat *B)
{
    size_t n = Phi->rows, D = Phi->cols;
    fk_mat C;
    fk_mat_copy(&C, Phi);
    double *v = calloc(D, sizeof *v);
    for (size_t j = 0; j < D; j++) {
        double mu = 0;
        for (size_t i = 0; i < n; i++) {
            mu += C.data[i * D + j] / (double)n;
            v[j] += C.data[i * D + j] * (i < n_s ? 1.0 / (double)n_s : -1.0 / (double)(n - n_s));
        }
        for (size_t i = 0; i < n; i++)
            C.data[i * D + j] -= mu;
    }
    fk_mat_init(A, D, D);
    fk_mat_init(B, D, D);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)D, (int)D, (int)n, 1.0, C.data,
                (int)D, C.data, (int)D, 0.0, A->data, (int)D);
    for (size_t i = 0; i < D; i++)
        for (size_t j = 0; j < D; j++)
            B->data[i * D + j] = v[i] * v[j] + (i == j ? gamma : 0.0);
    free(v);
    fk_mat_close(&C);
}

static double max_abs(const double *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

/* M^T X N for D x m W: out m x m. */
static void quad(const fk_mat *W, const fk_mat *M, double *out)
{
    size_t D = W->rows, m = W->cols;
    double *MW = malloc(D * m * sizeof *MW);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)D, (int)m, (int)D, 1.0, M->data,
                (int)D, W->data, (int)m, 0.0, MW, (int)m);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)m, (int)m, (int)D, 1.0, W->data,
                (int)m, MW, (int)m, 0.0, out, (int)m);
    free(MW);
}

static void check_solution(size_t n, size_t D, double gamma, fk_tca_norm norm)
{
    size_t n_s = n / 2 + 3, m = 5;
    fk_mat Phi, A, B, W, Wg;
    fk_mat_init(&Phi, n, D);
    fill_normal(&Phi, n * 31 + D, 0.8, n_s);
    double theta[5], tg[5];
    fk_err err;
    assert_int_equal(fk_tca_solve(&Phi, n_s, gamma, m, norm, &W, theta, &err), FK_OK);
    explicit_ab(&Phi, n_s, gamma, &A, &B);
    assert_int_equal(fk_eig_gen_top(&A, &B, m, tg, &Wg, &err), FK_OK);
    double amax = max_abs(A.data, D * D);
    for (size_t k = 0; k < m; k++) {
        assert_true(fabs(theta[k] - tg[k]) <= 1e-9 * tg[0]);
        if (k)
            assert_true(theta[k] <= theta[k - 1]);
    }
    /* residual A W - B W Theta */
    double *AW = malloc(D * m * sizeof *AW), *BW = malloc(D * m * sizeof *BW), Q[25];
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)D, (int)m, (int)D, 1.0, A.data,
                (int)D, W.data, (int)m, 0.0, AW, (int)m);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)D, (int)m, (int)D, 1.0, B.data,
                (int)D, W.data, (int)m, 0.0, BW, (int)m);
    double res = 0;
    for (size_t i = 0; i < D; i++)
        for (size_t k = 0; k < m; k++)
            res = fmax(res, fabs(AW[i * m + k] - theta[k] * BW[i * m + k]));
    double wmax = max_abs(W.data, D * m);
    assert_true(res / (amax * wmax) <= 1e-10);
    quad(&W, norm == FK_TCA_NORM_A ? &A : &B, Q);
    for (size_t k = 0; k < m; k++)
        for (size_t l = 0; l < m; l++) {
            if (norm == FK_TCA_NORM_E && k != l)
                continue;
            double want = norm == FK_TCA_NORM_E ? Q[k * m + k] : (k == l);
            assert_true(fabs(Q[k * m + l] - want) < 1e-9);
        }
    if (norm == FK_TCA_NORM_E)
        for (size_t k = 0; k < m; k++)
            assert_true(fabs(cblas_dnrm2((int)D, W.data + k, (int)m) - 1.0) < 1e-12);
    /* sign convention: largest |entry| positive */
    for (size_t k = 0; k < m; k++) {
        double best = 0;
        for (size_t i = 0; i < D; i++)
            if (fabs(W.data[i * m + k]) > fabs(best))
                best = W.data[i * m + k];
        assert_true(best > 0);
    }
    free(AW);
    free(BW);
    fk_mat_close(&Phi);
    fk_mat_close(&A);
    fk_mat_close(&B);
    fk_mat_close(&W);
    fk_mat_close(&Wg);
}

static void solver_matches_generalized_problem(void **state)
{
    (void)state;
    double gammas[3] = {1e-3, 1.0, 1e3};
    for (int g = 0; g < 3; g++) {
        check_solution(60, 20, gammas[g], FK_TCA_NORM_B); /* D <= n: D x D Gram */
        check_solution(40, 90, gammas[g], FK_TCA_NORM_B); /* D > n: n x n Gram */
    }
    check_solution(60, 20, 1.0, FK_TCA_NORM_A);
    check_solution(40, 90, 1.0, FK_TCA_NORM_E);
}

/* Large problems go through the block Krylov route: same eigenvalues and a
 * B-orthonormal W as the dense generalized solver. */
static void krylov_route_matches_dense(void **state)
{
    (void)state;
    size_t n = 700, D = 640, n_s = 300, m = 5;
    fk_mat Phi, A, B, W, Wg;
    fk_mat_init(&Phi, n, D);
    fill_normal(&Phi, 77, 0.5, n_s);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < D; j++)
            Phi.data[i * D + j] *= pow(0.99, (double)j);
    double theta[5], tg[5], gamma = 0.01, Q[25];
    fk_err err;
    fk_tca_times tm = {0};
    assert_int_equal(fk_tca_solve_timed(&Phi, n_s, gamma, m, FK_TCA_NORM_B, &W, theta, &tm, &err),
                     FK_OK);
    assert_int_equal(tm.krylov_ok, 1);
    explicit_ab(&Phi, n_s, gamma, &A, &B);
    assert_int_equal(fk_eig_gen_top(&A, &B, m, tg, &Wg, &err), FK_OK);
    for (size_t k = 0; k < m; k++)
        assert_true(fabs(theta[k] - tg[k]) <= 1e-7 * tg[0]);
    quad(&W, &B, Q);
    for (size_t k = 0; k < m; k++)
        for (size_t l = 0; l < m; l++)
            assert_true(fabs(Q[k * m + l] - (k == l)) < 1e-7);
    fk_mat_close(&Phi);
    fk_mat_close(&A);
    fk_mat_close(&B);
    fk_mat_close(&W);
    fk_mat_close(&Wg);
}

/* Optimality: no random B-orthonormal W' beats the sum of the top eigenvalues. */
static void solution_is_optimal(void **state)
{
    (void)state;
    size_t n = 50, D = 12, n_s = 20, m = 3;
    fk_mat Phi, A, B, W;
    fk_mat_init(&Phi, n, D);
    fill_normal(&Phi, 5, 1.0, n_s);
    double theta[3];
    fk_err err;
    assert_int_equal(fk_tca_solve(&Phi, n_s, 0.5, m, FK_TCA_NORM_B, &W, theta, &err), FK_OK);
    explicit_ab(&Phi, n_s, 0.5, &A, &B);
    double top = theta[0] + theta[1] + theta[2];
    fk_rng g;
    fk_rng_init(&g, 3, 3);
    for (int t = 0; t < 100; t++) {
        /* random W' made B-orthonormal by Cholesky of W'^T B W' (Gram-Schmidt in B). */
        double Wp[36], BWp[36], G[9];
        for (int i = 0; i < 36; i++)
            Wp[i] = fk_rng_normal(&g);
        for (size_t k = 0; k < m; k++) {
            for (size_t l = 0; l < k; l++) {
                cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)D, (int)D, 1.0, B.data, (int)D,
                            Wp + l, (int)m, 0.0, BWp, 1);
                double dot = cblas_ddot((int)D, Wp + k, (int)m, BWp, 1);
                cblas_daxpy((int)D, -dot, Wp + l, (int)m, Wp + k, (int)m);
            }
            cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)D, (int)D, 1.0, B.data, (int)D, Wp + k,
                        (int)m, 0.0, BWp, 1);
            cblas_dscal((int)D, 1.0 / sqrt(cblas_ddot((int)D, Wp + k, (int)m, BWp, 1)), Wp + k,
                        (int)m);
        }
        fk_mat Wv = fk_mat_view(Wp, D, m, m);
        quad(&Wv, &A, G);
        assert_true(G[0] + G[4] + G[8] <= top + 1e-9);
    }
    fk_mat_close(&Phi);
    fk_mat_close(&A);
    fk_mat_close(&B);
    fk_mat_close(&W);
}

static void normalized_l_helper(void **state)
{
    (void)state;
    assert_true(fabs(fk_tca_gamma_normalized(1.0, 1123, 958) - 1.934e-3) < 1e-6);
}

static void kernel_tca_runs_and_rejects_bad_input(void **state)
{
    (void)state;
    fk_mat Xs, Xt, Zs, Zt, Xbad;
    fk_err err;
    fk_mat_init(&Xs, 30, 6);
    fk_mat_init(&Xt, 20, 6);
    fk_mat_init(&Xbad, 20, 7);
    fill_normal(&Xs, 1, 0, 0);
    fill_normal(&Xt, 2, 0.7, 0);
    assert_int_equal(fk_ktca_fit(&Xs, &Xt, FK_KERNEL_GAUSS, 1.0, 0.05, 5, FK_TCA_NORM_B, &Zs, &Zt,
                                 &err), FK_OK);
    assert_int_equal(Zs.rows, 30);
    assert_int_equal(Zt.cols, 5);
    fk_mat_close(&Zs);
    fk_mat_close(&Zt);
    assert_int_equal(fk_ktca_fit(&Xs, &Xt, FK_KERNEL_LINEAR, 0, 0.05, 8, FK_TCA_NORM_B, &Zs, &Zt,
                                 &err), FK_ENUMERIC); /* a linear kernel in 6-d has rank 6 < 8 */
    assert_non_null(strstr(err.msg, "lower m"));
    fk_mat_close(&Zs);
    fk_mat_close(&Zt);
    assert_int_equal(fk_ktca_fit(&Xs, &Xt, FK_KERNEL_GAUSS, 0.0, 0.05, 5, FK_TCA_NORM_B, &Zs, &Zt,
                                 &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "sigma"));
    assert_int_equal(fk_ktca_fit(&Xs, &Xbad, FK_KERNEL_GAUSS, 1.0, 0.05, 5, FK_TCA_NORM_B, &Zs,
                                 &Zt, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "features"));
    assert_int_equal(fk_ltca_fit(&Xs, &Xt, 0.05, 50, FK_TCA_NORM_B, &Zs, &Zt, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "samples"));
    fk_mat_close(&Xs);
    fk_mat_close(&Xt);
    fk_mat_close(&Xbad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(solver_matches_generalized_problem),
        cmocka_unit_test(solution_is_optimal),
        cmocka_unit_test(krylov_route_matches_dense),
        cmocka_unit_test(normalized_l_helper),
        cmocka_unit_test(kernel_tca_runs_and_rejects_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
