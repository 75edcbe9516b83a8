#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "bench/subspace.h"
#include "common/la/eig.h"
#include "common/la/rff.h"
#include "common/la/rng.h"
#include "common/models/fedrf_tca/rftca.h"
#include "common/models/fedrf_tca/tca.h"

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
    assert_int_equal(fk_mat_copy(&C, Phi), FK_OK);
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
    assert_int_equal(fk_mat_init(A, D, D), FK_OK);
    assert_int_equal(fk_mat_init(B, D, D), FK_OK);
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
    assert_int_equal(fk_mat_init(&Phi, n, D), FK_OK);
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
 * B-orthonormal W as the dense generalized solver. Features scaled by s with
 * gamma: at s = 1e17, gamma = 1e-6 the float phase overflows (Y^T Y near 1e39)
 * and the double phase starts from random vectors. */
static void krylov_case(double s, double gamma)
{
    size_t n = 700, D = 640, n_s = 300, m = 5;
    fk_mat Phi, A, B, W, Wg;
    assert_int_equal(fk_mat_init(&Phi, n, D), FK_OK);
    fill_normal(&Phi, 77, 0.5, n_s);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < D; j++)
            Phi.data[i * D + j] *= s * pow(0.99, (double)j);
    double theta[5], tg[5], Q[25];
    fk_err err;
    fk_tca_times tm = {0};
    assert_int_equal(fk_tca_solve_timed(&Phi, n_s, gamma, m, FK_TCA_NORM_B, &W, theta, &tm, &err),
                     FK_OK);
    assert_int_equal(tm.krylov_ok, 1);
    assert_true(tm.krylov_cols_f > 0); /* a float32 phase, then double */
    if (s != 1.0) /* the float phase gave up (non-finite) before its first check at 3 blocks */
        assert_true(tm.krylov_cols_f < 3 * 16);
    explicit_ab(&Phi, n_s, gamma, &A, &B);
    if (s == 1.0) {
        assert_int_equal(fk_eig_gen_top(&A, &B, m, tg, &Wg, &err), FK_OK);
    } else { /* B is too ill-conditioned for a Cholesky: the dense P A P route instead */
        double v[640] = {0};
        for (size_t j = 0; j < D; j++)
            for (size_t i = 0; i < n; i++)
                v[j] +=
                    Phi.data[i * D + j] * (i < n_s ? 1.0 / (double)n_s : -1.0 / (double)(n - n_s));
        assert_int_equal(fk_tca_solve_moments(&A, v, gamma, m, FK_TCA_NORM_B, &Wg, tg, &err),
                         FK_OK);
    }
    for (size_t k = 0; k < m; k++)
        assert_true(fabs(theta[k] - tg[k]) <= 1e-10 * tg[0]);
    /* the same directions: |cos| between the columns is 1 */
    for (size_t k = 0; k < m; k++) {
        double a = cblas_ddot((int)D, W.data + k, (int)m, Wg.data + k, (int)Wg.ld);
        a /= cblas_dnrm2((int)D, W.data + k, (int)m) * cblas_dnrm2((int)D, Wg.data + k, (int)Wg.ld);
        assert_true(fabs(fabs(a) - 1.0) < 1e-8);
    }
    quad(&W, &B, Q);
    for (size_t k = 0; s == 1.0 && k < m; k++) /* (B's rounding swamps the scaled case) */
        for (size_t l = 0; l < m; l++)
            assert_true(fabs(Q[k * m + l] - (k == l)) < 1e-7);
    fk_mat_close(&Phi);
    fk_mat_close(&A);
    fk_mat_close(&B);
    fk_mat_close(&W);
    fk_mat_close(&Wg);
}

static void krylov_route_matches_dense(void **state)
{
    (void)state;
    krylov_case(1.0, 0.01);
    krylov_case(1e17, 1e-6);
}

/* Optimality: no random B-orthonormal W' beats the sum of the top eigenvalues. */
static void solution_is_optimal(void **state)
{
    (void)state;
    size_t n = 50, D = 12, n_s = 20, m = 3;
    fk_mat Phi, A, B, W;
    assert_int_equal(fk_mat_init(&Phi, n, D), FK_OK);
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
    assert_int_equal(fk_mat_init(&Xs, 30, 6), FK_OK);
    assert_int_equal(fk_mat_init(&Xt, 20, 6), FK_OK);
    assert_int_equal(fk_mat_init(&Xbad, 20, 7), FK_OK);
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

/* ---------- T8 (Lemma 1, R-TCA forms) and T9 (RF-TCA -> R-TCA) ---------- */

/* sin(Theta)_F between the spans of X and Y (both n x m). */
static double sin_theta(const fk_mat *X, const fk_mat *Y)
{
    double s;
    fk_err err;
    assert_int_equal(fk_sin_theta(X, Y, &s, &err), FK_OK);
    return s;
}

/* H M: subtract each column's mean (in place). */
static void center_columns(fk_mat *M)
{
    fk_err err;
    assert_int_equal(fk_center_columns(M, &err), FK_OK);
}

/* Source rows N(0, I), target rows shifted by `shift` in every coordinate, P-L2. */
static void shifted_domains(fk_mat *X, size_t n_s, size_t n_t, size_t p, double shift, uint64_t seed)
{
    assert_int_equal(fk_mat_init(X, n_s + n_t, p), FK_OK);
    fk_rng g;
    fk_rng_init(&g, seed, 2);
    for (size_t i = 0; i < n_s + n_t; i++)
        for (size_t j = 0; j < p; j++)
            X->data[i * p + j] = fk_rng_normal(&g) + (i >= n_s ? shift : 0.0);
    fk_rows_l2_normalize(X);
}

static void lemma_one_and_rtca_forms(void **state)
{
    (void)state;
    size_t n_s = 60, n_t = 40, n = n_s + n_t, m = 5;
    double gamma = 0.05, theta[5], lam[5], mu[5];
    fk_mat X, K, W, Z, F, A1;
    fk_err err;
    shifted_domains(&X, n_s, n_t, 10, 0.7, 3);
    assert_int_equal(fk_kernel_matrix(&X, FK_KERNEL_GAUSS, 1.0, &K, &err), FK_OK);
    /* Eq. (3) through the §1.5 solver, then H K W. */
    assert_int_equal(fk_tca_solve(&K, n_s, gamma, m, FK_TCA_NORM_B, &W, theta, &err), FK_OK);
    assert_int_equal(fk_tca_project(&K, &W, &Z, &err), FK_OK);
    center_columns(&Z);
    /* Eq. (4): A_L1 = H (K^2 - K^2 l l^T K^2 / (gamma + l^T K^2 l)) H. */
    fk_mat K2;
    assert_int_equal(fk_mat_init(&K2, n, n), FK_OK);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0, K.data,
                (int)n, K.data, (int)n, 0.0, K2.data, (int)n);
    double *l = malloc(n * sizeof *l), *u = malloc(n * sizeof *u);
    for (size_t i = 0; i < n; i++)
        l[i] = i < n_s ? 1.0 / (double)n_s : -1.0 / (double)n_t;
    cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)n, 1.0, K2.data, (int)n, l, 1, 0.0, u, 1);
    double s = 1.0 / (gamma + cblas_ddot((int)n, l, 1, u, 1));
    assert_int_equal(fk_mat_init(&A1, n, n), FK_OK);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            A1.data[i * n + j] = K2.data[i * n + j] - s * u[i] * u[j];
    center_columns(&A1); /* H M, then (H M)^T = M H by symmetry, centred again */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++) {
            double t = A1.data[i * n + j];
            A1.data[i * n + j] = A1.data[j * n + i];
            A1.data[j * n + i] = t;
        }
    center_columns(&A1);
    fk_mat V;
    assert_int_equal(fk_eig_sym_top(&A1, m, lam, &V, &err), FK_OK);
    assert_true(sin_theta(&Z, &V) <= 1e-6);
    for (size_t k = 0; k < m; k++)
        assert_true(fabs(lam[k] - gamma * theta[k]) <= 1e-8 * lam[k]);
    /* R-TCA: Eq. (9) as the generalized problem (K H K, gamma K + K l l^T K), then H K W_R,
     * against the Eq. (22) embedding of fk_rtca_embed; both eigenvalue sets agree. */
    fk_mat KHK, Bm, WR, ZR;
    fk_mat Kc;
    assert_int_equal(fk_mat_copy(&Kc, &K), FK_OK);
    center_columns(&Kc);
    assert_int_equal(fk_mat_init(&KHK, n, n), FK_OK);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0, Kc.data,
                (int)n, Kc.data, (int)n, 0.0, KHK.data, (int)n);
    cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)n, 1.0, K.data, (int)n, l, 1, 0.0, u, 1);
    assert_int_equal(fk_mat_init(&Bm, n, n), FK_OK);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            Bm.data[i * n + j] = gamma * K.data[i * n + j] + u[i] * u[j];
    assert_int_equal(fk_eig_gen_top(&KHK, &Bm, m, mu, &WR, &err), FK_OK);
    assert_int_equal(fk_tca_project(&K, &WR, &ZR, &err), FK_OK);
    center_columns(&ZR);
    assert_int_equal(fk_rtca_embed(&K, n_s, gamma, m, &F, theta, &err), FK_OK);
    assert_true(sin_theta(&ZR, &F) <= 1e-6);
    for (size_t k = 0; k < m; k++)
        assert_true(fabs(theta[k] - mu[k]) <= 1e-8 * mu[0]);
    /* bad input: one clear error each */
    fk_mat none;
    assert_int_equal(fk_rtca_embed(&K, 0, gamma, m, &none, theta, &err), FK_EINVAL);
    assert_int_equal(fk_rtca_embed(&K, n_s, 0.0, m, &none, theta, &err), FK_EINVAL);
    assert_int_equal(fk_rtca_embed(&K, n_s, gamma, n, &none, theta, &err), FK_EINVAL);
    free(l);
    free(u);
    fk_mat_close(&X);
    fk_mat_close(&K);
    fk_mat_close(&K2);
    fk_mat_close(&W);
    fk_mat_close(&Z);
    fk_mat_close(&A1);
    fk_mat_close(&V);
    fk_mat_close(&Kc);
    fk_mat_close(&KHK);
    fk_mat_close(&Bm);
    fk_mat_close(&WR);
    fk_mat_close(&ZR);
    fk_mat_close(&F);
}

/* T9 on synthetic data: the RF-TCA features H Sigma^T W approach the R-TCA
 * eigenspace as N grows (mean sin Theta over 3 Omega seeds). */
static void rftca_converges_to_rtca(void **state)
{
    (void)state;
    size_t n_s = 80, n_t = 70, m = 5, Ns[3] = {250, 1000, 4000};
    double gamma = fk_tca_gamma_normalized(1.0, n_s, n_t), theta[5], sv[3] = {0, 0, 0};
    fk_mat X, K, F;
    fk_err err;
    shifted_domains(&X, n_s, n_t, 5, 0.5, 4);
    assert_int_equal(fk_kernel_matrix(&X, FK_KERNEL_GAUSS, 1.0, &K, &err), FK_OK);
    assert_int_equal(fk_rtca_embed(&K, n_s, gamma, m, &F, theta, &err), FK_OK);
    fk_mat Xs = fk_mat_rows(&X, 0, n_s), Xt = fk_mat_rows(&X, n_s, n_t);
    for (int i = 0; i < 3; i++)
        for (uint64_t seed = 1; seed <= 3; seed++) {
            fk_rftca_opts o = {.N = Ns[i], .m = m, .sigma = 1.0, .gamma = gamma, .seed = seed};
            fk_mat Zs, Zt, Z;
            assert_int_equal(fk_rftca_fit(&Xs, &Xt, &o, &Zs, &Zt, NULL, NULL, &err), FK_OK);
            assert_int_equal(fk_tca_stack(&Zs, &Zt, &Z, &err), FK_OK);
            center_columns(&Z);
            sv[i] += sin_theta(&Z, &F) / 3.0;
            fk_mat_close(&Zs);
            fk_mat_close(&Zt);
            fk_mat_close(&Z);
        }
    print_message("T9 mean sin Theta: N=250 %.3f, N=1000 %.3f, N=4000 %.3f\n", sv[0], sv[1], sv[2]);
    assert_true(sv[1] < sv[0] && sv[2] < sv[1]);
    assert_true(sv[2] / sv[1] <= 0.75);
    fk_mat_close(&X);
    fk_mat_close(&K);
    fk_mat_close(&F);
}

/* With K = Phi Phi^T, the kernel-only projection equals Phi W of the feature
 * solver (normalization 'B') column for column, up to sign. */
static void rtca_project_equals_feature_projection(void **state)
{
    (void)state;
    size_t n_s = 70, n_t = 50, n = n_s + n_t, m = 6;
    double gamma = fk_tca_gamma_normalized(1.0, n_s, n_t), theta[6];
    fk_mat X, Phi, K, W, Z1, Z2;
    fk_err err;
    shifted_domains(&X, n_s, n_t, 8, 0.6, 5);
    fk_rff r;
    assert_int_equal(fk_rff_init(&r, 7, 8, 300, 1.0, &err), FK_OK);
    assert_int_equal(fk_rff_map(&r, &X, &Phi, &err), FK_OK);
    assert_int_equal(fk_mat_init(&K, n, n), FK_OK);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)n, (int)Phi.cols, 1.0,
                Phi.data, (int)Phi.ld, Phi.data, (int)Phi.ld, 0.0, K.data, (int)n);
    assert_int_equal(fk_tca_solve(&Phi, n_s, gamma, m, FK_TCA_NORM_B, &W, theta, &err), FK_OK);
    assert_int_equal(fk_tca_project(&Phi, &W, &Z1, &err), FK_OK);
    assert_int_equal(fk_rtca_project(&K, n_s, gamma, m, &Z2, &err), FK_OK);
    for (size_t j = 0; j < m; j++) {
        double dot = cblas_ddot((int)n, Z1.data + j, (int)m, Z2.data + j, (int)m), worst = 0;
        for (size_t i = 0; i < n; i++) {
            double d = Z1.data[i * m + j] - (dot < 0 ? -1 : 1) * Z2.data[i * m + j];
            worst = fabs(d) > worst ? fabs(d) : worst;
        }
        assert_true(worst <= 1e-6 * cblas_dnrm2((int)n, Z1.data + j, (int)m));
    }
    fk_mat none;
    assert_int_equal(fk_rtca_project(&K, n_s, gamma, 2 * n, &none, &err), FK_EINVAL);
    /* fk_rtca_fit: the Gaussian kernel of the stacked domains, split after n_s rows */
    fk_mat KG, ZG, Zs, Zt, Xs = fk_mat_rows(&X, 0, n_s), Xt = fk_mat_rows(&X, n_s, n_t);
    assert_int_equal(fk_kernel_matrix(&X, FK_KERNEL_GAUSS, 1.5, &KG, &err), FK_OK);
    assert_int_equal(fk_rtca_project(&KG, n_s, gamma, m, &ZG, &err), FK_OK);
    assert_int_equal(fk_rtca_fit(&Xs, &Xt, 1.5, gamma, m, &Zs, &Zt, &err), FK_OK);
    assert_memory_equal(Zs.data, ZG.data, n_s * m * sizeof(double));
    assert_memory_equal(Zt.data, ZG.data + n_s * m, n_t * m * sizeof(double));
    fk_mat Xbad = fk_mat_view(X.data, n_t, 7, X.ld); /* 7 of the 8 features */
    assert_int_equal(fk_rtca_fit(&Xs, &Xbad, 1.5, gamma, m, &none, &none, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "feature space"));
    fk_mat_close(&KG);
    fk_mat_close(&ZG);
    fk_mat_close(&Zs);
    fk_mat_close(&Zt);
    fk_rff_close(&r);
    fk_mat_close(&X);
    fk_mat_close(&Phi);
    fk_mat_close(&K);
    fk_mat_close(&W);
    fk_mat_close(&Z1);
    fk_mat_close(&Z2);
}

/* The moments form (A = Phi^T H Phi, v = Phi^T l) gives fk_tca_solve's W, in every
 * normalization, and refuses bad gamma and m. */
static void moments_form_matches_rows(void **state)
{
    (void)state;
    size_t n = 60, n_s = 35, D = 20, m = 5;
    fk_mat Phi, A, B, W1, W2;
    assert_int_equal(fk_mat_init(&Phi, n, D), FK_OK);
    fill_normal(&Phi, 31, 1.5, n_s);
    explicit_ab(&Phi, n_s, 0.3, &A, &B);
    double *v = calloc(D, sizeof *v), th1[5], th2[5];
    assert_non_null(v);
    for (size_t j = 0; j < D; j++)
        for (size_t i = 0; i < n; i++)
            v[j] += Phi.data[i * D + j] * (i < n_s ? 1.0 / (double)n_s : -1.0 / (double)(n - n_s));
    fk_err err;
    for (int norm = 0; norm < 3; norm++) {
        assert_int_equal(fk_tca_solve(&Phi, n_s, 0.3, m, (fk_tca_norm)norm, &W1, th1, &err), FK_OK);
        assert_int_equal(fk_tca_solve_moments(&A, v, 0.3, m, (fk_tca_norm)norm, &W2, th2, &err),
                         FK_OK);
        double big = max_abs(W1.data, D * m), diff = 0;
        for (size_t i = 0; i < D * m; i++)
            diff = fabs(W1.data[i] - W2.data[i]) > diff ? fabs(W1.data[i] - W2.data[i]) : diff;
        assert_true(diff <= 1e-9 * big);
        for (size_t j = 0; j < m; j++)
            assert_true(fabs(th1[j] - th2[j]) <= 1e-9 * th1[0]);
        fk_mat_close(&W1);
        fk_mat_close(&W2);
    }
    assert_int_equal(fk_tca_solve_moments(&A, v, 0.0, m, FK_TCA_NORM_B, &W2, th2, &err), FK_EINVAL);
    assert_int_equal(fk_tca_solve_moments(&A, v, 0.3, 0, FK_TCA_NORM_B, &W2, th2, &err), FK_EINVAL);
    assert_int_equal(fk_tca_solve_moments(&A, v, 0.3, D + 1, FK_TCA_NORM_B, &W2, th2, &err),
                     FK_EINVAL);
    free(v);
    fk_mat_close(&Phi);
    fk_mat_close(&A);
    fk_mat_close(&B);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(solver_matches_generalized_problem),
        cmocka_unit_test(solution_is_optimal),
        cmocka_unit_test(krylov_route_matches_dense),
        cmocka_unit_test(lemma_one_and_rtca_forms),
        cmocka_unit_test(rftca_converges_to_rtca),
        cmocka_unit_test(rtca_project_equals_feature_projection),
        cmocka_unit_test(normalized_l_helper),
        cmocka_unit_test(moments_form_matches_rows),
        cmocka_unit_test(kernel_tca_runs_and_rejects_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
