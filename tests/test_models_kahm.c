/* Unit properties of the KAHM estimator (spec §11.1) on synthetic class data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/eig.h"
#include "common/la/rng.h"
#include "common/models/kahm/kahm.h"

enum { P = 30, NC = 4, NPC = 60 };

/* Class c: a centre plus a 5-d random linear structure plus small noise, then tanh
 * (the paper's preprocessing), so classes overlap a little. */
static void make_data(double *X, int *y, size_t n_per, int C, size_t p, uint64_t seed)
{
    fk_rng r;
    fk_rng_init(&r, seed, 0);
    double *mu = malloc((size_t)C * p * sizeof(double));
    double *A = malloc((size_t)C * 5 * p * sizeof(double));
    for (size_t i = 0; i < (size_t)C * p; i++)
        mu[i] = 0.8 * fk_rng_normal(&r);
    for (size_t i = 0; i < (size_t)C * 5 * p; i++)
        A[i] = 0.3 * fk_rng_normal(&r);
    for (int c = 0; c < C; c++)
        for (size_t s = 0; s < n_per; s++) {
            size_t i = (size_t)c * n_per + s;
            double z[5];
            for (int k = 0; k < 5; k++)
                z[k] = fk_rng_normal(&r);
            for (size_t j = 0; j < p; j++) {
                double v = mu[(size_t)c * p + j] + 0.05 * fk_rng_normal(&r);
                for (int k = 0; k < 5; k++)
                    v += A[((size_t)c * 5 + (size_t)k) * p + j] * z[k];
                X[i * p + j] = tanh(v);
            }
            y[i] = c;
        }
    free(mu);
    free(A);
}

static fk_kahm_opts opts(void)
{
    fk_kahm_opts o;
    fk_kahm_opts_default(&o);
    return o;
}

/* Training points lie (almost) on their own machine: small Gamma, modelling error
 * far below one, and smaller than the distance of 95 % of other-class points. */
static void training_points_have_small_distance(void **state)
{
    (void)state;
    double *X = malloc(NC * NPC * P * sizeof(double));
    int *y = malloc(NC * NPC * sizeof(int));
    make_data(X, y, NPC, NC, P, 1);
    fk_kahm_opts o = opts();
    fk_kahm k;
    fk_err err;
    assert_int_equal(fk_kahm_fit(&k, X, NPC, P, P, &o, &err), FK_OK);
    assert_int_equal(k.n, 20);
    double g[NC * NPC];
    assert_int_equal(fk_kahm_dist(&k, X, NC * NPC, P, g, NULL, &err), FK_OK);
    double mx = 0;
    for (int i = 0; i < NPC; i++)
        mx = g[i] > mx ? g[i] : mx;
    assert_true(k.model_err < 0.05);
    assert_true(fabs(k.model_err - (1 - exp(-mx / P))) < 1e-12);
    int below = 0;
    for (int i = NPC; i < NC * NPC; i++)
        below += g[i] > mx;
    assert_true(below >= 0.95 * (NC - 1) * NPC);
    assert_true(k.lambda >= k.tau && k.iters >= 1 && k.iters <= 100);
    /* lambda rule: the converged lambda is within the tolerance of the last-used one */
    fk_kahm k2;
    o.lambda_converged = 1;
    assert_int_equal(fk_kahm_fit(&k2, X, NPC, P, P, &o, &err), FK_OK);
    assert_true(fabs(k2.lambda - k.lambda) <= 0.01);
    fk_kahm_close(&k);
    fk_kahm_close(&k2);
    free(X);
    free(y);
}

/* A(y) lies in the affine hull of the training points (least-squares residual of
 * A(y) - y^1 on span{y^i - y^1} is tiny). */
static void image_in_affine_hull(void **state)
{
    (void)state;
    const size_t N = 20, p = 30; /* N - 1 < p: the hull is a proper subspace */
    double *X = malloc(NC * NPC * P * sizeof(double));
    int *y = malloc(NC * NPC * sizeof(int));
    make_data(X, y, NPC, NC, P, 2);
    fk_kahm_opts o = opts();
    fk_kahm k;
    fk_err err;
    assert_int_equal(fk_kahm_fit(&k, X, N, p, p, &o, &err), FK_OK);
    double A[5 * P], g[5];
    assert_int_equal(fk_kahm_dist(&k, X + NPC * P, 5, P, g, A, &err), FK_OK);
    for (int q = 0; q < 5; q++) {
        double B[P * 19], rhs[P];
        for (size_t j = 0; j < p; j++) {
            for (size_t i = 1; i < N; i++)
                B[j * 19 + (i - 1)] = X[i * p + j] - X[j];
            rhs[j] = A[q * P + j] - X[j];
        }
        double an = 0, res = 0;
        for (size_t j = 0; j < p; j++)
            an += A[q * P + j] * A[q * P + j];
        assert_int_equal(LAPACKE_dgels(LAPACK_ROW_MAJOR, 'N', (int)p, 19, 1, B, 19, rhs, 1), 0);
        for (size_t j = 19; j < p; j++)
            res += rhs[j] * rhs[j];
        assert_true(sqrt(res) <= 1e-9 * sqrt(an));
    }
    fk_kahm_close(&k);
    free(X);
    free(y);
}

/* Largest singular value of the r x c row-major matrix M. */
static double spec_norm(const double *M, size_t r, size_t c)
{
    double *G = calloc(c * c, sizeof(double));
    for (size_t i = 0; i < c; i++)
        for (size_t j = 0; j < c; j++)
            for (size_t k = 0; k < r; k++)
                G[i * c + j] += M[k * c + i] * M[k * c + j];
    fk_mat Gm = fk_mat_view(G, c, c, c), V = {0};
    double v;
    assert_int_equal(fk_eig_sym_top(&Gm, 1, &v, &V, NULL), FK_OK);
    fk_mat_close(&V);
    free(G);
    return sqrt(v > 0 ? v : 0);
}

/* Theorems 2.2 and 2.4: ||A(y)|| < ||Y||_2 (1 + pN^2/(2||Y||_F^2)) and
 * Gamma(y) / ||[y - y^1 ... y - y^N]||_2 < the same factor, for class, other-class and
 * far random points. */
static void bounds_hold(void **state)
{
    (void)state;
    double *X = malloc(NC * NPC * P * sizeof(double));
    int *y = malloc(NC * NPC * sizeof(int));
    make_data(X, y, NPC, NC, P, 3);
    fk_kahm_opts o = opts();
    fk_kahm k;
    fk_err err;
    assert_int_equal(fk_kahm_fit(&k, X, NPC, P, P, &o, &err), FK_OK);
    double fro = 0;
    for (int i = 0; i < NPC * P; i++)
        fro += X[i] * X[i];
    double fac = 1 + (double)P * NPC * NPC / (2 * fro), y2 = spec_norm(X, NPC, P);
    enum { NT = 120 };
    double *T = malloc(NT * P * sizeof(double)), A[NT * P], g[NT];
    fk_rng r;
    fk_rng_init(&r, 4, 0);
    for (int i = 0; i < NT; i++)
        for (int j = 0; j < P; j++) {
            double s = i < 30 ? 0 : i < 60 ? 0 : i < 90 ? 3 : 30;
            T[i * P + j] = i < 30   ? X[i * P + j]
                           : i < 60 ? X[(NPC + i) * P + j]
                                    : s * fk_rng_normal(&r);
        }
    assert_int_equal(fk_kahm_dist(&k, T, NT, P, g, A, &err), FK_OK);
    double *Dm = malloc(NPC * P * sizeof(double));
    for (int i = 0; i < NT; i++) {
        double an = 0;
        for (int j = 0; j < P; j++)
            an += A[i * P + j] * A[i * P + j];
        assert_true(isfinite(g[i]));
        assert_true(sqrt(an) < y2 * fac);
        for (int s = 0; s < NPC; s++)
            for (int j = 0; j < P; j++)
                Dm[s * P + j] = T[i * P + j] - X[s * P + j];
        assert_true(g[i] / spec_norm(Dm, NPC, P) < fac);
    }
    free(Dm);
    free(T);
    fk_kahm_close(&k);
    free(X);
    free(y);
}

/* App. B: generic data n = min(20, p, N-1); 3 directions of variation n = 3; N = 2
 * n = 1; N = 1 and NaN are refused with a message. */
static void subspace_rule(void **state)
{
    (void)state;
    double *X = malloc(NC * NPC * P * sizeof(double));
    int *y = malloc(NC * NPC * sizeof(int));
    make_data(X, y, NPC, NC, P, 5);
    fk_kahm_opts o = opts();
    fk_err err;
    int n = 0;
    assert_int_equal(fk_kahm_dim(X, NPC, P, P, &o, &n, &err), FK_OK);
    assert_int_equal(n, 20);
    assert_int_equal(fk_kahm_dim(X, 12, P, P, &o, &n, &err), FK_OK);
    assert_int_equal(n, 11);
    assert_int_equal(fk_kahm_dim(X, NPC, 8, P, &o, &n, &err), FK_OK);
    assert_int_equal(n, 8);
    assert_int_equal(fk_kahm_dim(X, 2, P, P, &o, &n, &err), FK_OK);
    assert_int_equal(n, 1);
    assert_int_equal(fk_kahm_dim(X, 1, P, P, &o, &n, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "at least 2"));
    /* rank-3 data: y = B z with z in R^3 */
    fk_rng r;
    fk_rng_init(&r, 6, 0);
    double B[3 * P], *Z = malloc(50 * P * sizeof(double));
    for (int i = 0; i < 3 * P; i++)
        B[i] = fk_rng_normal(&r);
    for (int i = 0; i < 50; i++) {
        double z[3] = {fk_rng_normal(&r), fk_rng_normal(&r), fk_rng_normal(&r)};
        for (int j = 0; j < P; j++)
            Z[i * P + j] = z[0] * B[j] + z[1] * B[P + j] + z[2] * B[2 * P + j];
    }
    assert_int_equal(fk_kahm_dim(Z, 50, P, P, &o, &n, &err), FK_OK);
    assert_int_equal(n, 3);
    Z[7] = NAN;
    fk_kahm k;
    assert_int_equal(fk_kahm_fit(&k, Z, 50, P, P, &o, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "finite"));
    /* identical samples: degenerate */
    for (int i = 0; i < 10 * P; i++)
        Z[i] = Z[i % P] = 1.0;
    assert_int_equal(fk_kahm_fit(&k, Z, 10, P, P, &o, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "degenerate"));
    free(Z);
    free(X);
    free(y);
}

/* A point 10^4 units away: the shifted kernel keeps Gamma finite (no 0/0). */
static void far_point_is_finite(void **state)
{
    (void)state;
    double *X = malloc(NC * NPC * P * sizeof(double));
    int *y = malloc(NC * NPC * sizeof(int));
    make_data(X, y, NPC, NC, P, 7);
    fk_kahm_opts o = opts();
    fk_kahm k;
    fk_err err;
    assert_int_equal(fk_kahm_fit(&k, X, NPC, P, P, &o, &err), FK_OK);
    double T[P], g;
    for (int j = 0; j < P; j++)
        T[j] = X[j] + (j == 0 ? 1e4 : 0);
    assert_int_equal(fk_kahm_dist(&k, T, 1, P, &g, NULL, &err), FK_OK);
    assert_true(isfinite(g));
    assert_true(g > 1e4 - 10 && g < 1e4 + 10);
    fk_kahm_close(&k);
    free(X);
    free(y);
}

/* §11.1 item 9: one party holding all classes and C single-class parties give identical
 * distances and labels; party order does not matter; a party without class c leaves
 * class c's distance alone. Also: the same seed gives the same bytes. */
static void one_party_equals_single_class_parties(void **state)
{
    (void)state;
    size_t N = NC * NPC;
    double *X = malloc(N * P * sizeof(double));
    int *y = malloc(N * sizeof(int));
    make_data(X, y, NPC, NC, P, 8);
    fk_kahm_opts o = opts();
    fk_err err;
    fk_kahm_set all, one[NC];
    assert_int_equal(fk_kahm_set_fit(&all, X, N, P, P, y, NC, &o, &err), FK_OK);
    for (int c = 0; c < NC; c++)
        assert_int_equal(
            fk_kahm_set_fit(&one[c], X + (size_t)c * NPC * P, NPC, P, P, y + c * NPC, NC, &o, &err),
            FK_OK);
    double *D1 = malloc(N * NC * sizeof(double)), *D2 = malloc(N * NC * sizeof(double));
    double *D3 = malloc(N * NC * sizeof(double));
    assert_int_equal(fk_kahm_set_dist(&all, X, N, P, D1, 0, &err), FK_OK);
    for (int c = 0; c < NC; c++)
        assert_int_equal(fk_kahm_set_dist(&one[c], X, N, P, D2, c > 0, &err), FK_OK);
    for (int c = NC - 1; c >= 0; c--)
        assert_int_equal(fk_kahm_set_dist(&one[c], X, N, P, D3, c < NC - 1, &err), FK_OK);
    assert_memory_equal(D1, D2, N * NC * sizeof(double));
    assert_memory_equal(D1, D3, N * NC * sizeof(double));
    int l1[NC * NPC], l2[NC * NPC];
    fk_kahm_argmin(D1, N, NC, l1, NULL);
    fk_kahm_argmin(D2, N, NC, l2, NULL);
    assert_memory_equal(l1, l2, sizeof l1);
    int correct = 0;
    for (size_t i = 0; i < N; i++)
        correct += l1[i] == y[i];
    assert_true(correct >= 0.95 * N);
    /* a single-class party has +inf elsewhere (Remark 11) */
    double *D4 = malloc(N * NC * sizeof(double));
    assert_int_equal(fk_kahm_set_dist(&one[1], X, N, P, D4, 0, &err), FK_OK);
    for (size_t i = 0; i < N; i++)
        for (int c = 0; c < NC; c++)
            assert_true(c == 1 ? isfinite(D4[i * NC + c]) : isinf(D4[i * NC + c]));
    /* determinism: the same fit twice gives the same bytes */
    fk_kahm_set again;
    assert_int_equal(fk_kahm_set_fit(&again, X, N, P, P, y, NC, &o, &err), FK_OK);
    for (int c = 0; c < NC; c++) {
        const fk_kahm *a = &all.cls[c].parts[0], *b = &again.cls[c].parts[0];
        assert_int_equal(a->n, b->n);
        assert_memory_equal(a->M, b->M, (size_t)a->N * P * sizeof(double));
        assert_memory_equal(a->Xw, b->Xw, (size_t)a->N * (size_t)a->n * sizeof(double));
    }
    /* diagnostics are defined and in range */
    double E1, E2, E2n;
    fk_kahm_diag(D1, y, N, NC, P, &E1, &E2, &E2n);
    assert_true(E1 >= 0 && E1 < 0.05 && E2 > 0 && E2 <= 1 && E2n >= 0 && E2n <= E2);
    fk_kahm_set_close(&again);
    fk_kahm_set_close(&all);
    for (int c = 0; c < NC; c++)
        fk_kahm_set_close(&one[c]);
    free(D1);
    free(D2);
    free(D3);
    free(D4);
    free(X);
    free(y);
}

/* Remark 12: 1,499 -> one KAHM, 1,500 -> two (rounding); clusters >= 30; same seed
 * same clusters; a class label outside [0, C) and a 1-sample class are refused. */
static void partition_rule(void **state)
{
    (void)state;
    fk_kahm_opts o = opts();
    assert_int_equal(fk_kahm_n_parts(1499, &o), 1);
    assert_int_equal(fk_kahm_n_parts(1500, &o), 2);
    assert_int_equal(fk_kahm_n_parts(10, &o), 1);
    o.partition_ceil = 1;
    assert_int_equal(fk_kahm_n_parts(1001, &o), 2);
    o = opts();
    o.nb = 100; /* small classes, so the test stays fast */
    size_t N = 300, p = 6;
    double *X = malloc(N * p * sizeof(double));
    fk_rng r;
    fk_rng_init(&r, 9, 0);
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < p; j++)
            X[i * p + j] = tanh(0.5 * fk_rng_normal(&r) + (i % 3 == 0 ? 2.0 : -1.0) * (j == 0));
    fk_err err;
    fk_kahm_class c1, c2;
    assert_int_equal(fk_kahm_class_fit(&c1, 0, X, N, p, p, &o, &err), FK_OK);
    assert_int_equal(fk_kahm_class_fit(&c2, 0, X, N, p, p, &o, &err), FK_OK);
    assert_true(c1.n_parts >= 2 && c1.n_parts <= 3);
    int tot = 0;
    for (int s = 0; s < c1.n_parts; s++) {
        assert_true(c1.parts[s].N >= 30);
        assert_int_equal(c1.parts[s].N, c2.parts[s].N);
        tot += c1.parts[s].N;
    }
    assert_int_equal(tot, (int)N);
    fk_kahm_class_close(&c1);
    fk_kahm_class_close(&c2);
    int y[3] = {0, 0, 5};
    fk_kahm_set s;
    assert_int_equal(fk_kahm_set_fit(&s, X, 3, p, p, y, 3, &o, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "outside the job's classes"));
    y[2] = 1;
    assert_int_equal(fk_kahm_set_fit(&s, X, 3, p, p, y, 3, &o, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "at least 2"));
    free(X);
}


/* Toy example (57)-(59), §11.1 item 12: N equidistant points on [-1, 1], class 1 iff
 * |y| < 0.5; one class-1 KAHM (p = n = 1), f* = exp(-Gamma(y)/p). The risk is the left
 * side of (55): |E_y |f*(y) - 1{|y| < 0.5}|^2 - (1/N) sum_i |f*(y^i) - z^i|^2|, the
 * expectation over 50,000 equidistant y. It matches the spec's prototype within 20 % and
 * stays below the bound 4/sqrt(N) + sqrt(log 20 / (2N)). */
static void toy_risk_matches_prototype(void **state)
{
    (void)state;
    static const int Ns[4] = {10, 100, 1000, 2000};
    static const double proto[4] = {0.0441, 0.00353, 0.00029, 0.00015};
    enum { NQ = 50000 };
    double *q = malloc(NQ * sizeof(double)), *g = malloc(NQ * sizeof(double));
    for (int i = 0; i < NQ; i++)
        q[i] = -1.0 + 2.0 * i / (NQ - 1);
    for (int t = 0; t < 4; t++) {
        int N = Ns[t], m = 0;
        double *Y = malloc((size_t)N * sizeof(double)), *all = malloc((size_t)N * sizeof(double));
        double *ga = malloc((size_t)N * sizeof(double));
        for (int i = 0; i < N; i++) {
            all[i] = -1.0 + 2.0 * i / (N - 1);
            if (fabs(all[i]) < 0.5)
                Y[m++] = all[i];
        }
        fk_kahm_opts o = opts();
        fk_kahm k;
        fk_err err;
        assert_int_equal(fk_kahm_fit(&k, Y, (size_t)m, 1, 1, &o, &err), FK_OK);
        assert_int_equal(k.n, 1);
        assert_int_equal(fk_kahm_dist(&k, q, NQ, 1, g, NULL, &err), FK_OK);
        assert_int_equal(fk_kahm_dist(&k, all, (size_t)N, 1, ga, NULL, &err), FK_OK);
        double expected = 0, empirical = 0;
        for (int i = 0; i < NQ; i++) {
            double d = exp(-g[i]) - (fabs(q[i]) < 0.5 ? 1.0 : 0.0);
            expected += d * d / NQ;
        }
        for (int i = 0; i < N; i++) {
            double d = exp(-ga[i]) - (fabs(all[i]) < 0.5 ? 1.0 : 0.0);
            empirical += d * d / N;
        }
        double risk = fabs(expected - empirical);
        double bound = fk_kahm_risk_bound(N, 0.05);
        print_message("toy N=%d risk %.6g (prototype %.6g, bound %.4g)\n", N, risk, proto[t],
                      bound);
        assert_true(fabs(risk - proto[t]) <= 0.2 * proto[t]);
        assert_true(risk < bound);
        fk_kahm_close(&k);
        free(Y);
        free(all);
        free(ga);
    }
    free(q);
    free(g);
}

/* §11.1 item 7: the Gram route (N x N) and the covariance route (p x p) give the same
 * subspace up to signs, so the same distances, for N < p and for N > p. */
static void gram_path_equals_covariance_path(void **state)
{
    (void)state;
    double *X = malloc(NC * NPC * P * sizeof(double));
    int *y = malloc(NC * NPC * sizeof(int));
    make_data(X, y, NPC, NC, P, 11);
    static const size_t Ns[2] = {18, NPC}; /* N - 1 < p and N - 1 > p */
    for (int t = 0; t < 2; t++) {
        fk_kahm_opts og = opts(), oc = opts();
        og.path = 1;
        oc.path = 2;
        fk_kahm kg, kc;
        fk_err err;
        assert_int_equal(fk_kahm_fit(&kg, X, Ns[t], P, P, &og, &err), FK_OK);
        assert_int_equal(fk_kahm_fit(&kc, X, Ns[t], P, P, &oc, &err), FK_OK);
        assert_int_equal(kg.n, kc.n);
        double gg[NC * NPC], gc[NC * NPC];
        assert_int_equal(fk_kahm_dist(&kg, X, NC * NPC, P, gg, NULL, &err), FK_OK);
        assert_int_equal(fk_kahm_dist(&kc, X, NC * NPC, P, gc, NULL, &err), FK_OK);
        for (int i = 0; i < NC * NPC; i++)
            assert_true(fabs(gg[i] - gc[i]) <= 1e-9 * (1 + gc[i]));
        fk_kahm_close(&kg);
        fk_kahm_close(&kc);
    }
    free(X);
    free(y);
}

/* Random orthogonal n x n matrix (QR of normal entries), row-major. */
static void random_orthogonal(double *Q, int n, uint64_t seed)
{
    fk_rng r;
    fk_rng_init(&r, seed, 3);
    double tau[64];
    for (int i = 0; i < n * n; i++)
        Q[i] = fk_rng_normal(&r);
    assert_int_equal(LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, n, n, Q, n, tau), 0);
    assert_int_equal(LAPACKE_dorgqr(LAPACK_ROW_MAJOR, n, n, n, Q, n, tau), 0);
}

/* The model k re-expressed in the basis Q P (every part that depends on P: the encoding,
 * the Cholesky factor of cov(Y (QP)^T) and the whitened encodings; lambda, M and b stay,
 * since the kernel does not change: checked to 1e-12). */
static void rebase(const fk_kahm *k, const double *Y, const double *Q, fk_kahm *k2)
{
    int N = k->N, p = k->p, n = k->n;
    assert_int_equal(fk_kahm_alloc(k2, N, p, n, NULL), FK_OK);
    k2->lambda = k->lambda;
    k2->tau = k->tau;
    memcpy(k2->M, k->M, (size_t)N * (size_t)p * sizeof(double));
    memcpy(k2->b, k->b, (size_t)N * sizeof(double));
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, p, n, 1.0, Q, n, k->P, p, 0.0,
                k2->P, p);
    double *X = malloc((size_t)N * (size_t)n * sizeof(double)), xm[64] = {0};
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, n, p, 1.0, Y, p, k2->P, p, 0.0, X, n);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < n; j++)
            xm[j] += X[i * n + j] / N;
    memset(k2->L, 0, (size_t)n * (size_t)n * sizeof(double));
    for (int a = 0; a < n; a++)
        for (int b = 0; b <= a; b++) {
            double s = 0;
            for (int i = 0; i < N; i++)
                s += (X[i * n + a] - xm[a]) * (X[i * n + b] - xm[b]);
            k2->L[a * n + b] = s / (N - 1);
        }
    assert_int_equal(LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', n, k2->L, n), 0);
    memcpy(k2->Xw, X, (size_t)N * (size_t)n * sizeof(double));
    cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, N, n, 1.0, k2->L,
                n, k2->Xw, n);
    for (int i = 0; i < N; i++) /* the kernel is the same: whitened distances agree */
        for (int j = 0; j < i; j++) {
            double d1 = 0, d2 = 0;
            for (int t = 0; t < n; t++) {
                double u = k->Xw[i * n + t] - k->Xw[j * n + t];
                double v = k2->Xw[i * n + t] - k2->Xw[j * n + t];
                d1 += u * u;
                d2 += v * v;
            }
            assert_true(fabs(exp(-d1 / (2.0 * n)) - exp(-d2 / (2.0 * n))) <= 1e-12);
        }
    free(X);
}

/* §11.1 item 3: replacing P by QP for an orthogonal Q, or flipping eigenvector signs,
 * changes Gamma by at most 1e-9 (class points, other-class points, far points). */
static void basis_invariance(void **state)
{
    (void)state;
    double *X = malloc(NC * NPC * P * sizeof(double));
    int *y = malloc(NC * NPC * sizeof(int));
    make_data(X, y, NPC, NC, P, 21);
    fk_kahm_opts o = opts();
    fk_kahm k;
    fk_err err;
    assert_int_equal(fk_kahm_fit(&k, X, NPC, P, P, &o, &err), FK_OK); /* class 0 */
    int n = k.n;
    assert_true(n > 3);
    enum { NT = NC * NPC + 20 };
    double *T = malloc((size_t)NT * P * sizeof(double));
    memcpy(T, X, NC * NPC * P * sizeof(double));
    fk_rng r;
    fk_rng_init(&r, 4, 4);
    for (int i = NC * NPC * P; i < NT * P; i++)
        T[i] = 3.0 * fk_rng_normal(&r);
    double g[NT], g2[NT], *Q = malloc((size_t)n * n * sizeof(double)), worst = 0;
    assert_int_equal(fk_kahm_dist(&k, T, NT, P, g, NULL, &err), FK_OK);
    for (int t = 0; t < 3; t++) {
        if (t < 2) {
            random_orthogonal(Q, n, 30 + (uint64_t)t);
        } else { /* sign flips of every other eigenvector */
            memset(Q, 0, (size_t)n * n * sizeof(double));
            for (int i = 0; i < n; i++)
                Q[i * n + i] = i % 2 ? -1.0 : 1.0;
        }
        fk_kahm k2;
        rebase(&k, X, Q, &k2);
        assert_int_equal(fk_kahm_dist(&k2, T, NT, P, g2, NULL, &err), FK_OK);
        for (int i = 0; i < NT; i++) {
            double d = fabs(g[i] - g2[i]);
            worst = d > worst ? d : worst;
            assert_true(d <= 1e-9);
        }
        fk_kahm_close(&k2);
    }
    print_message("basis invariance: max |dGamma| = %.3g (n = %d)\n", worst, n);
    fk_kahm_close(&k);
    free(Q);
    free(T);
    free(X);
    free(y);
}

/* f(e, tau) of (77) directly: (1/(pN)) sum_j ||Y_j - K (K + lambda I)^-1 Y_j||^2. */
static double f_direct(const double *K, const double *Y, int N, int p, double lambda)
{
    double *A = malloc((size_t)N * N * sizeof(double)), *Z = malloc((size_t)N * p * sizeof(double));
    double *R = malloc((size_t)N * p * sizeof(double));
    memcpy(A, K, (size_t)N * N * sizeof(double));
    for (int i = 0; i < N; i++)
        A[i * N + i] += lambda;
    memcpy(Z, Y, (size_t)N * p * sizeof(double));
    lapack_int *ipiv = malloc((size_t)N * sizeof(lapack_int));
    assert_int_equal(LAPACKE_dgesv(LAPACK_ROW_MAJOR, N, p, A, N, ipiv, Z, p), 0);
    memcpy(R, Y, (size_t)N * p * sizeof(double));
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, p, N, -1.0, K, N, Z, p, 1.0, R, p);
    double s = 0;
    for (int i = 0; i < N * p; i++)
        s += R[i] * R[i];
    free(A);
    free(Z);
    free(R);
    free(ipiv);
    return s / ((double)p * N);
}

/* f of (S2) through K = V diag(kappa) V^T: (1/(pN)) sum_k (lambda/(kappa_k+lambda))^2 ||(V^T Y)_k||^2. */
static double f_eigen(const double *K, const double *Y, int N, int p, double lambda)
{
    double *V = malloc((size_t)N * N * sizeof(double)), *kap = malloc((size_t)N * sizeof(double));
    double *Yt = malloc((size_t)N * p * sizeof(double));
    memcpy(V, K, (size_t)N * N * sizeof(double));
    assert_int_equal(LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', N, V, N, kap), 0);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, p, N, 1.0, V, N, Y, p, 0.0, Yt, p);
    double s = 0;
    for (int k = 0; k < N; k++) {
        double q = lambda / (kap[k] + lambda);
        s += q * q * cblas_ddot(p, Yt + k * p, 1, Yt + k * p, 1);
    }
    free(V);
    free(kap);
    free(Yt);
    return s / ((double)p * N);
}

/* The fitted model's kernel K_ij = exp(-||xw_i - xw_j||^2 / (2n)). */
static double *model_kernel(const fk_kahm *k)
{
    int N = k->N, n = k->n;
    double *K = malloc((size_t)N * N * sizeof(double));
    for (int i = 0; i < N; i++)
        for (int j = 0; j < N; j++) {
            double d = 0;
            for (int t = 0; t < n; t++) {
                double u = k->Xw[i * n + t] - k->Xw[j * n + t];
                d += u * u;
            }
            K[i * N + j] = exp(-d / (2.0 * n));
        }
    return K;
}

/* §11.1 item 4: the eigen form (S2) equals the direct form (77) to 1e-10 on random K and Y;
 * the fitted lambda* (both final rules) satisfies |lambda* - tau - f(lambda* - tau, tau)| <= tol
 * with f computed directly on the model's kernel, lambda* >= tau, tau = 2||Y||_F^2/(pN), and
 * at most lambda_maxit iterations. */
static void lambda_fixed_point(void **state)
{
    (void)state;
    enum { N = 40, PP = 7 };
    fk_rng r;
    fk_rng_init(&r, 8, 8);
    double *B = malloc(N * N * sizeof(double)), *K = malloc(N * N * sizeof(double));
    double *Y = malloc(N * PP * sizeof(double));
    for (int i = 0; i < N * N; i++)
        B[i] = fk_rng_normal(&r);
    for (int i = 0; i < N * PP; i++)
        Y[i] = fk_rng_normal(&r);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, N, N, 1.0 / N, B, N, B, N, 0.0, K, N);
    static const double lams[3] = {0.01, 0.3, 5.0};
    for (int t = 0; t < 3; t++) {
        double a = f_direct(K, Y, N, PP, lams[t]), b = f_eigen(K, Y, N, PP, lams[t]);
        assert_true(fabs(a - b) <= 1e-10 * fabs(a));
    }
    free(B);
    free(K);
    free(Y);
    /* the fitted models of every class, both final-lambda rules */
    double *X = malloc(NC * NPC * P * sizeof(double));
    int *y = malloc(NC * NPC * sizeof(int));
    make_data(X, y, NPC, NC, P, 5);
    for (int rule = 0; rule < 2; rule++)
        for (int c = 0; c < NC; c++) {
            fk_kahm_opts o = opts();
            o.lambda_converged = rule;
            fk_kahm k;
            fk_err err;
            const double *Yc = X + (size_t)c * NPC * P;
            assert_int_equal(fk_kahm_fit(&k, Yc, NPC, P, P, &o, &err), FK_OK);
            double fro = 0;
            for (int i = 0; i < NPC * P; i++)
                fro += Yc[i] * Yc[i];
            assert_true(fabs(k.tau - 2 * fro / (P * NPC)) <= 1e-12 * k.tau);
            assert_true(k.lambda >= k.tau);
            assert_true(k.iters >= 1 && k.iters <= o.lambda_maxit);
            double *Km = model_kernel(&k);
            double resid = fabs(k.lambda - k.tau - f_direct(Km, Yc, NPC, P, k.lambda));
            assert_true(resid <= o.lambda_tol);
            if (c == 0)
                print_message("lambda rule %s: tau %.6g lambda* %.6g, %d iterations, "
                              "|lambda* - tau - f| = %.3g\n", rule ? "converged" : "last-used",
                              k.tau, k.lambda, k.iters, resid);
            free(Km);
            fk_kahm_close(&k);
        }
    free(X);
    free(y);
}

/* §11.1 item 11: the theory numbers. (56) at eps = 0.1, delta = 0.05 is 2,728.885 and the
 * Theorem 4.3 bound at N = 60,000, delta = 0.05 is 0.021326; bad arguments give NaN. */
static void theory_numbers(void **state)
{
    (void)state;
    assert_true(fabs(fk_kahm_sample_complexity(0.1, 0.05) - 2728.885) <= 1e-3);
    assert_true(fabs(fk_kahm_risk_bound(60000, 0.05) - 0.021326) <= 5e-7);
    /* the prototype's toy bounds (§11.1 item 12) */
    static const double Ns[4] = {10, 100, 1000, 2000}, b[4] = {1.652, 0.522, 0.165, 0.117};
    for (int i = 0; i < 4; i++)
        assert_true(fabs(fk_kahm_risk_bound(Ns[i], 0.05) - b[i]) <= 5e-4);
    assert_true(isnan(fk_kahm_risk_bound(0, 0.05)) && isnan(fk_kahm_risk_bound(10, 1.0)));
    assert_true(isnan(fk_kahm_sample_complexity(0, 0.05)) &&
                isnan(fk_kahm_sample_complexity(0.1, 0)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(training_points_have_small_distance),
        cmocka_unit_test(image_in_affine_hull),
        cmocka_unit_test(bounds_hold),
        cmocka_unit_test(subspace_rule),
        cmocka_unit_test(far_point_is_finite),
        cmocka_unit_test(one_party_equals_single_class_parties),
        cmocka_unit_test(partition_rule),
        cmocka_unit_test(toy_risk_matches_prototype),
        cmocka_unit_test(gram_path_equals_covariance_path),
        cmocka_unit_test(basis_invariance),
        cmocka_unit_test(lambda_fixed_point),
        cmocka_unit_test(theory_numbers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
