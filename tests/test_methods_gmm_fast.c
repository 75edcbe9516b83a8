/* The fast paths of the per-round FedGrEM work against the reference implementations:
 * vectorized exp, fused E-step + statistics, warm-started MM central update. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"
#include "common/la/vexp.h"
#include "common/models/mixture/gmm.h"
#include "common/models/mixture/gmm_estep.h"

#define NEAR(a, b, tol) assert_true(fabs((a) - (b)) <= (tol))

static void vexp_matches_libm(void **state)
{
    (void)state;
    enum { N = 20001 };
    double *x = malloc(N * sizeof *x);
    assert_non_null(x);
    for (int i = 0; i < N; i++)
        x[i] = -37.0 * i / (N - 1);
    fk_vexp_nonpos(x, N);
    double worst = 0;
    for (int i = 0; i < N; i++) {
        double e = exp(-37.0 * i / (N - 1));
        worst = fmax(worst, fabs(x[i] - e) / e);
    }
    assert_true(worst <= 4.5e-16); /* 2^-51 */
    double y[4] = {-37.5, -1e300, NAN, 0.0};
    fk_vexp_nonpos(y, 4);
    assert_true(y[0] == 0.0 && y[1] == 0.0 && y[2] == 0.0 && y[3] == 1.0);
    free(x);
}

/* Spec 6.1.1 golden step through the fused kernel, both code paths. */
static void fused_estep_golden(void **state)
{
    (void)state;
    const double X[10] = {-1, 0, 0, 1, 1, 0, 3, 0.5, 4, -0.5};
    double Xt[10], xsq[5], w[2] = {0.4, 0.6}, th[4] = {0, 0, 3, 0}, nr[2], sx[4], work[20], gt[10];
    for (int i = 0; i < 5; i++) {
        Xt[i] = X[2 * i];
        Xt[5 + i] = X[2 * i + 1];
        xsq[i] = X[2 * i] * X[2 * i] + X[2 * i + 1] * X[2 * i + 1];
    }
    assert_true(fk_gmm_estep_work(5, 2) <= 20);
    const double g1[5] = {0.999171061154457, 0.983609626102961, 0.749234709066009,
                          0.00735155211417, 0.000368587006957};
    for (int path = 0; path < 2; path++) {
        double ll = fk_gmm_estep_stats(X, path ? Xt : NULL, 5, 2, xsq, w, th, 2, nr, sx, work, gt);
        for (int i = 0; i < 5; i++) {
            NEAR(gt[i], g1[i], 1e-12);
            NEAR(gt[i] + gt[5 + i], 1.0, 1e-14);
        }
        NEAR(ll, -14.896102966298386, 1e-12 * 15);
        NEAR(nr[0] / 5, 0.5479471070889107, 1e-12);
        NEAR(nr[1] / 5, 0.4520528929110893, 1e-12);
        double eta[2] = {0.95 / 0.5, 0.95 / 0.5}, t2[4];
        memcpy(t2, th, sizeof th);
        fk_gmm_grad_step(t2, nr, sx, 5, 2, 2, eta);
        NEAR(t2[0], -0.08603479213288201, 1e-12);
        NEAR(t2[1], 0.3750984212894956, 1e-12);
        NEAR(t2[2], 3.1693333025396733, 1e-12);
        NEAR(t2[3], 0.004901578710504487, 1e-12);
    }
}

/* Random tasks of odd sizes (vector tails) against fk_gmm_estep + fk_gmm_stats. */
static void fused_estep_matches_reference(void **state)
{
    (void)state;
    fk_rng rng;
    fk_rng_init(&rng, 11, 0);
    for (int trial = 0; trial < 30; trial++) {
        size_t n = 1 + fk_rng_below(&rng, 300);
        int p = 1 + (int)fk_rng_below(&rng, 12), R = 1 + (int)fk_rng_below(&rng, 8);
        double *X = malloc(n * p * sizeof *X), *Xt = malloc(n * p * sizeof *Xt);
        double *xsq = malloc(n * sizeof *xsq), *g = malloc(n * R * sizeof *g);
        double *work = malloc(fk_gmm_estep_work(n, R) * sizeof *work);
        double *gt = malloc(n * R * sizeof *gt), th[96], w[8], nr[8], sx[96], nr2[8], sx2[96];
        assert_true(X && Xt && xsq && g && work && gt);
        for (size_t i = 0; i < n; i++) {
            xsq[i] = 0;
            for (int j = 0; j < p; j++) {
                X[i * p + j] = 4 * fk_rng_normal(&rng);
                Xt[j * n + i] = X[i * p + j];
                xsq[i] += X[i * p + j] * X[i * p + j];
            }
        }
        double ws = 0;
        for (int r = 0; r < R; r++) {
            w[r] = r == 0 && R > 1 && trial % 5 == 0 ? 0.0 : 0.1 + fk_rng_uniform(&rng);
            ws += w[r];
            for (int j = 0; j < p; j++)
                th[r * p + j] = 3 * fk_rng_normal(&rng);
        }
        for (int r = 0; r < R; r++)
            w[r] /= ws;
        double ll0 = fk_gmm_estep(X, n, p, xsq, w, th, R, g);
        fk_gmm_stats(X, n, p, g, R, nr, sx);
        for (int path = 0; path < 2; path++) {
            double ll = fk_gmm_estep_stats(X, path ? Xt : NULL, n, p, xsq, w, th, R, nr2, sx2,
                                           work, gt);
            NEAR(ll, ll0, 1e-11 * fabs(ll0));
            for (size_t i = 0; i < n; i++)
                for (int r = 0; r < R; r++)
                    NEAR(gt[(size_t)r * n + i], g[i * R + r], 1e-11);
            for (int r = 0; r < R; r++) {
                NEAR(nr2[r], nr[r], 1e-11 * (double)n);
                for (int j = 0; j < p; j++)
                    NEAR(sx2[r * p + j], sx[r * p + j], 1e-10 * (double)n);
            }
        }
        free(X);
        free(Xt);
        free(xsq);
        free(g);
        free(work);
        free(gt);
    }
}

static void central_mm_goldens(void **state)
{
    (void)state;
    double tt[6] = {0, 0, 1, 0, 10, 0}, n[3] = {100, 100, 100}, th[6], b[2] = {NAN, NAN}, work[6];
    fk_gmm_central_mm(tt, n, 3, 2, 5, th, b, work);
    NEAR(b[0], 1, 1e-9);
    NEAR(th[0], 0.5, 1e-9);
    NEAR(th[2], 1, 1e-9);
    NEAR(th[4], 9.5, 1e-9);
    NEAR(fk_gmm_central_objective(tt, n, 3, 2, 5, th, b), 475, 1e-9);
    double n2[3] = {100, 400, 25};
    b[0] = 50; /* a poor warm start */
    b[1] = -3;
    fk_gmm_central_mm(tt, n2, 3, 2, 5, th, b, work);
    NEAR(b[0], 0.9375, 1e-9);
    NEAR(th[4], 9, 1e-9);
    NEAR(fk_gmm_central_objective(tt, n2, 3, 2, 5, th, b), 249.21875, 1e-9);
    double t3[4] = {0, 0, 3, 0}, n3[2] = {100, 100};
    fk_gmm_central_mm(t3, n3, 2, 2, 10, th, b, work);
    NEAR(th[0], 1, 1e-9);
    NEAR(th[2], 2, 1e-9);
    double t4[4] = {0, 0, 0.8, 0}; /* fused: closed form in one pass */
    assert_int_equal(fk_gmm_central_mm(t4, n3, 2, 2, 5, th, b, work), 1);
    NEAR(th[0], 0.4, 1e-12);
    NEAR(th[2], 0.4, 1e-12);
    double far[20], nf[10], thf[20], bf[2] = {0, 0}, wf[20];
    for (int k = 0; k < 10; k++) {
        far[2 * k] = k < 9 ? 1 : 101;
        far[2 * k + 1] = 2;
        nf[k] = 150;
    }
    fk_gmm_central_mm(far, nf, 10, 2, 7.794453581366006, thf, bf, wf);
    NEAR(bf[0], 1.0707127188820, 1e-9);
    NEAR(thf[18], 100.3635855300615, 1e-9);
}

/* Same minimizer as the alternating solver from any warm start; KKT holds (spec 6.2.4). */
static void central_mm_matches_alternating(void **state)
{
    (void)state;
    fk_rng rng;
    fk_rng_init(&rng, 5, 0);
    enum { K = 9, P = 4 };
    for (int trial = 0; trial < 200; trial++) {
        double tt[K * P], n[K], lam = 0.2 + 15 * fk_rng_uniform(&rng);
        for (int i = 0; i < K * P; i++)
            tt[i] = fk_rng_normal(&rng) + (i < 2 * P && trial % 3 == 0 ? 30 : 0);
        for (int k = 0; k < K; k++)
            n[k] = 20 + (double)fk_rng_below(&rng, 300);
        double th0[K * P], b0[P], w0[K * P], th[K * P], b[P], w[K * P];
        fk_gmm_central(tt, n, K, P, lam, 0, th0, b0, w0);
        for (int j = 0; j < P; j++)
            b[j] = trial % 2 ? 10 * fk_rng_normal(&rng) : b0[j] + 1e-3 * fk_rng_normal(&rng);
        int passes = fk_gmm_central_mm(tt, n, K, P, lam, th, b, w);
        assert_true(passes >= 1 && passes < 10000);
        double F0 = fk_gmm_central_objective(tt, n, K, P, lam, th0, b0);
        double F = fk_gmm_central_objective(tt, n, K, P, lam, th, b);
        assert_true(F <= F0 + 1e-9 * F0);
        for (int i = 0; i < K * P; i++)
            NEAR(th[i], th0[i], 1e-7 * (1 + fabs(th0[i])));
        double g[P] = {0};
        for (int k = 0; k < K; k++)
            for (int j = 0; j < P; j++)
                g[j] += n[k] * (th[k * P + j] - tt[k * P + j]);
        double N = 0;
        for (int k = 0; k < K; k++)
            N += n[k];
        for (int j = 0; j < P; j++)
            NEAR(g[j] / N, 0.0, 1e-8);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(vexp_matches_libm),
        cmocka_unit_test(fused_estep_golden),
        cmocka_unit_test(fused_estep_matches_reference),
        cmocka_unit_test(central_mm_goldens),
        cmocka_unit_test(central_mm_matches_alternating),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
