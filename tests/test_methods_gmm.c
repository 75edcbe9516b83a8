#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/synth_gmm.h"
#include "common/la/hungarian.h"
#include "common/models/mixture/gmm.h"

#define NEAR(a, b, tol) assert_true(fabs((a) - (b)) <= (tol))

static const double GX[10] = {-1, 0, 0, 1, 1, 0, 3, 0.5, 4, -0.5};

/* Spec 6.1.1 golden local step. */
static void golden_local_step(void **state)
{
    (void)state;
    double w[2] = {0.4, 0.6}, th[4] = {0, 0, 3, 0}, g[10], nr[2], sx[4];
    double ll = fk_gmm_estep(GX, 5, 2, NULL, w, th, 2, g);
    const double g1[5] = {0.999171061154457, 0.983609626102961, 0.749234709066009,
                          0.00735155211417, 0.000368587006957};
    for (int i = 0; i < 5; i++) {
        NEAR(g[2 * i], g1[i], 1e-12);
        NEAR(g[2 * i] + g[2 * i + 1], 1.0, 1e-14);
    }
    NEAR(ll, -14.896102966298386, 1e-12 * 15);
    fk_gmm_stats(GX, 5, 2, g, 2, nr, sx);
    NEAR(nr[0] / 5, 0.5479471070889107, 1e-12);
    NEAR(nr[1] / 5, 0.4520528929110893, 1e-12);
    double eta[2] = {0.95 / 0.5, 0.95 / 0.5}, t2[4];
    memcpy(t2, th, sizeof th);
    fk_gmm_grad_step(t2, nr, sx, 5, 2, 2, eta);
    NEAR(t2[0], -0.08603479213288201, 1e-12);
    NEAR(t2[1], 0.3750984212894956, 1e-12);
    NEAR(t2[2], 3.1693333025396733, 1e-12);
    NEAR(t2[3], 0.004901578710504487, 1e-12);
    fk_gmm_exact_means(t2, nr, sx, 5, 2, 2);
    NEAR(t2[0], -0.08263839512574463, 1e-12);
    NEAR(t2[1], 0.3602906542935353, 1e-12);
    NEAR(t2[2], 3.1971512453696063, 1e-12);
    NEAR(t2[3], 0.0057068062369284925, 1e-12);
    /* rho = eta * w_new = 1 reproduces the exact EM mean (6.1.5) */
    double e1[2] = {5 / nr[0], 5 / nr[1]}, t3[4];
    memcpy(t3, th, sizeof th);
    fk_gmm_grad_step(t3, nr, sx, 5, 2, 2, e1);
    for (int j = 0; j < 4; j++)
        NEAR(t3[j], t2[j], 1e-12);
}

static void estep_stability(void **state)
{
    (void)state;
    double w[2] = {0.4, 0.6}, w2[2], th[4] = {0, 0, 3, 0}, g[10], g2[10];
    fk_gmm_estep(GX, 5, 2, NULL, w, th, 2, g);
    w2[0] = w[0] * 7.5; /* a constant added to every ln w */
    w2[1] = w[1] * 7.5;
    fk_gmm_estep(GX, 5, 2, NULL, w2, th, 2, g2);
    for (int i = 0; i < 10; i++)
        NEAR(g[i], g2[i], 1e-14);
    double far[2] = {1000, 0.5};
    double ll = fk_gmm_estep(far, 1, 2, NULL, w, th, 2, g);
    assert_true(isfinite(ll) && isfinite(g[0]) && isfinite(g[1]));
    assert_true(g[1] >= 1 - 1e-12);
    double wz[2] = {0.0, 1.0}; /* zero weight: zero responsibility */
    fk_gmm_estep(GX, 5, 2, NULL, wz, th, 2, g);
    for (int i = 0; i < 5; i++)
        assert_true(g[2 * i] == 0.0 && g[2 * i + 1] == 1.0);
}

static void make_task(fk_dataset *ds, double *th, double *w, uint64_t seed, double h)
{
    fk_synth_gmm o;
    fk_synth_gmm_defaults(&o);
    o.K = 2;
    o.n = 300;
    o.h = h;
    assert_int_equal(fk_synth_gmm_make(&o, seed, ds, th, w, NULL), FK_OK);
}

/* Exact EM (identity covariance) never decreases the likelihood (6.1.6). */
static void em_monotone(void **state)
{
    (void)state;
    fk_dataset ds[2];
    double th[100], w[10], g[1500], nr[5], sx[50];
    make_task(ds, th, w, 3, 0);
    double t[50], ww[5] = {0.2, 0.2, 0.2, 0.2, 0.2};
    for (int i = 0; i < 50; i++) /* a poor start: truth shifted */
        t[i] = th[i] + ((i % 3) - 1.0);
    double old = -INFINITY;
    for (int it = 0; it < 500; it++) {
        double ll = fk_gmm_estep(ds[0].X.data, 300, 10, NULL, ww, t, 5, g);
        assert_true(ll >= old - 1e-9 * fabs(old));
        old = ll;
        fk_gmm_stats(ds[0].X.data, 300, 10, g, 5, nr, sx);
        for (int r = 0; r < 5; r++)
            ww[r] = nr[r] / 300;
        fk_gmm_exact_means(t, nr, sx, 300, 10, 5);
    }
    fk_dataset_close(&ds[0]);
    fk_dataset_close(&ds[1]);
}

/* Gradient EM (eta = 0.95/w0) converges to the exact-EM fixed point on a well-separated task. */
static void gradient_em_reaches_em_fixed_point(void **state)
{
    (void)state;
    fk_dataset ds[2];
    double th[100], w[10], g[1500], nr[5], sx[50];
    make_task(ds, th, w, 5, 0);
    double te[50], tg[50], we[5], wg[5];
    memcpy(te, th, sizeof te);
    memcpy(tg, th, sizeof tg);
    memcpy(we, w, sizeof we);
    memcpy(wg, w, sizeof wg);
    double eta[5];
    for (int r = 0; r < 5; r++)
        eta[r] = 0.95 / w[r];
    double oldg = -INFINITY;
    for (int it = 0; it < 2000; it++) {
        fk_gmm_estep(ds[0].X.data, 300, 10, NULL, we, te, 5, g);
        fk_gmm_stats(ds[0].X.data, 300, 10, g, 5, nr, sx);
        for (int r = 0; r < 5; r++)
            we[r] = nr[r] / 300;
        fk_gmm_exact_means(te, nr, sx, 300, 10, 5);
        double ll = fk_gmm_estep(ds[0].X.data, 300, 10, NULL, wg, tg, 5, g);
        assert_true(ll >= oldg - 1e-9 * fabs(oldg)); /* generalized EM step: monotone */
        oldg = ll;
        fk_gmm_stats(ds[0].X.data, 300, 10, g, 5, nr, sx);
        for (int r = 0; r < 5; r++)
            wg[r] = nr[r] / 300;
        fk_gmm_grad_step(tg, nr, sx, 300, 10, 5, eta);
    }
    for (int i = 0; i < 50; i++)
        NEAR(te[i], tg[i], 1e-8);
    for (int r = 0; r < 5; r++)
        NEAR(we[r], wg[r], 1e-8);
    fk_dataset_close(&ds[0]);
    fk_dataset_close(&ds[1]);
}

static void eee_fit_recovers_centres(void **state)
{
    (void)state;
    fk_dataset ds[2];
    double th[100], w[10], W[5], M[50], S[100];
    make_task(ds, th, w, 11, 0);
    fk_rng rng;
    fk_rng_init(&rng, 1, 2);
    fk_eee_fit f = {.w = W, .mu = M, .sigma = S};
    assert_int_equal(fk_gmm_fit_eee(ds[0].X.data, 300, 10, 5, 10, &rng, &f, NULL), FK_OK);
    assert_true(isfinite(f.loglik));
    double e = fk_gmm_err_theta(M, th, 5, 10);
    assert_true(e < 1.0);
    for (int j = 0; j < 10; j++) /* covariance near identity */
        assert_true(fabs(S[j * 10 + j] - 1.0) < 0.35);
    /* R > n and NaN are refused with a message */
    fk_err err;
    assert_int_equal(fk_gmm_fit_eee(ds[0].X.data, 3, 10, 5, 1, &rng, &f, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "components"));
    ds[0].X.data[7] = NAN;
    assert_int_equal(fk_gmm_fit_eee(ds[0].X.data, 300, 10, 5, 1, &rng, &f, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "NaN"));
    fk_dataset_close(&ds[0]);
    fk_dataset_close(&ds[1]);
}

/* A constant feature makes the covariance singular: the fit regularises and says so. */
static void eee_singular_covariance_regularised(void **state)
{
    (void)state;
    fk_dataset ds[2];
    double th[100], w[10], W[5], M[50], S[100];
    make_task(ds, th, w, 13, 0);
    for (size_t i = 0; i < 300; i++)
        ds[0].X.data[i * 10 + 4] = 1.0;
    fk_rng rng;
    fk_rng_init(&rng, 1, 3);
    fk_eee_fit f = {.w = W, .mu = M, .sigma = S};
    assert_int_equal(fk_gmm_fit_eee(ds[0].X.data, 300, 10, 5, 3, &rng, &f, NULL), FK_OK);
    assert_int_equal(f.regularised, 1);
    for (int i = 0; i < 100; i++)
        assert_true(isfinite(S[i]));
    fk_dataset_close(&ds[0]);
    fk_dataset_close(&ds[1]);
}

static double brute_bottleneck(const double *c, int R)
{
    int perm[8], cnt[8] = {0};
    for (int i = 0; i < R; i++)
        perm[i] = i;
    double best = INFINITY;
    for (;;) {
        double m = 0;
        for (int r = 0; r < R; r++)
            m = fmax(m, c[r * R + perm[r]]);
        best = fmin(best, m);
        int i = 1;
        while (i < R && cnt[i] >= i)
            cnt[i++] = 0;
        if (i >= R)
            break;
        int j = (i % 2) ? cnt[i] : 0, t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
        cnt[i]++;
    }
    return best;
}

static void bottleneck_matches_brute_force(void **state)
{
    (void)state;
    fk_rng rng;
    fk_rng_init(&rng, 9, 0);
    double c[49];
    for (int t = 0; t < 300; t++) {
        int R = 1 + (int)fk_rng_below(&rng, 7);
        for (int i = 0; i < R * R; i++)
            c[i] = t % 2 ? fk_rng_uniform(&rng) : (double)fk_rng_below(&rng, 5);
        assert_true(fk_gmm_bottleneck(c, R) == brute_bottleneck(c, R));
    }
    /* exact estimates in any label order: zero error (6.5.5) */
    double tr[6] = {1, 2, 3, 4, 5, 6}, es[6] = {5, 6, 1, 2, 3, 4}, wt[3] = {0.2, 0.3, 0.5},
           we[3] = {0.5, 0.2, 0.3};
    assert_true(fk_gmm_err_theta(es, tr, 3, 2) == 0.0);
    assert_true(fk_gmm_err_w(we, wt, 3) == 0.0);
}

static void lambda_schedule(void **state)
{
    (void)state;
    double l1 = fk_gmm_lambda_next(1.0, 0.1, 2.0, 10, 10);
    double l2 = fk_gmm_lambda_next(l1, 0.1, 2.0, 10, 10), l = l2;
    NEAR(l1, 7.115008223229406, 1e-12);
    NEAR(l2, 7.726509045552346, 1e-12);
    for (int t = 3; t <= 1000; t++)
        l = fk_gmm_lambda_next(l, 0.1, 2.0, 10, 10);
    NEAR(l, 7.794453581366006, 1e-12);
}

/* ALIGN recovers planted permutations up to one common relabelling (6.5.2, reduced). */
static void align_recovers_permutations(void **state)
{
    (void)state;
    enum { K = 20, R = 10, P = 5 };
    fk_rng rng;
    fk_rng_init(&rng, 21, 0);
    double C[R * P], M[K * R * P];
    int truth[K * R], perm[K * R];
    for (int trial = 0; trial < 10; trial++) {
        for (int i = 0; i < R * P; i++)
            C[i] = 10.0 * fk_rng_normal(&rng);
        for (int k = 0; k < K; k++) {
            int idx[R];
            for (int r = 0; r < R; r++)
                idx[r] = r;
            fk_rng_shuffle(&rng, idx, R);
            for (int r = 0; r < R; r++) { /* task's own label idx[r] holds centre r */
                truth[k * R + r] = idx[r];
                for (int j = 0; j < P; j++)
                    M[(k * R + idx[r]) * P + j] =
                        k >= 18 ? 30 * fk_rng_normal(&rng) : C[r * P + j] + 0.3 * fk_rng_normal(&rng);
            }
        }
        assert_int_equal(fk_gmm_align(M, K, R, P, 5, &rng, perm, NULL), FK_OK);
        /* common label r of task 0 corresponds to true centre c0(r); others must agree */
        int c0[R];
        for (int r = 0; r < R; r++)
            for (int q = 0; q < R; q++)
                if (truth[q] == perm[r])
                    c0[r] = q;
        for (int k = 1; k < 18; k++)
            for (int r = 0; r < R; r++)
                assert_int_equal(perm[k * R + r], truth[k * R + c0[r]]);
    }
}

/* The alignment as the spec's direct loops compute it (the code before issue 38's blocked,
 * vectorised version): the fast one must give the same labels bit for bit, tie breaks too. */
static double ref_dist(const double *a, const double *b, int p)
{
    double s = 0.0;
    for (int j = 0; j < p; j++)
        s += (a[j] - b[j]) * (a[j] - b[j]);
    return sqrt(s);
}

static const double *ref_centre(const double *M, int R, int p, int k, int s)
{
    return M + ((size_t)k * R + s) * p;
}

static void ref_align(const double *M, int K, int R, int p, int B, fk_rng *rng, int *perm)
{
    int *order = malloc((size_t)K * sizeof *order), *cur = malloc((size_t)K * R * sizeof *cur);
    int as[R];
    double cost[R * R], best = INFINITY;
    assert_non_null(order);
    assert_non_null(cur);
    for (int b = 0; b < B; b++) {
        for (int k = 0; k < K; k++)
            order[k] = k;
        fk_rng_shuffle(rng, order, (size_t)K);
        for (int r = 0; r < R; r++)
            cur[order[0] * R + r] = r;
        for (int j = 1; j < K; j++) {
            int k = order[j];
            for (int r = 0; r < R; r++)
                for (int s = 0; s < R; s++) {
                    double c = 0.0;
                    for (int a = 0; a < j; a++) {
                        int k2 = order[a];
                        c += ref_dist(ref_centre(M, R, p, k, s),
                                      ref_centre(M, R, p, k2, cur[k2 * R + r]), p);
                    }
                    cost[r * R + s] = c;
                }
            assert_int_equal(fk_hungarian(cost, R, as, NULL, NULL), FK_OK);
            for (int r = 0; r < R; r++)
                cur[k * R + r] = as[r];
        }
        double sc = 0.0;
        for (int k = 0; k < K; k++)
            for (int k2 = k + 1; k2 < K; k2++)
                for (int r = 0; r < R; r++)
                    sc += ref_dist(ref_centre(M, R, p, k, cur[k * R + r]),
                                   ref_centre(M, R, p, k2, cur[k2 * R + r]), p);
        if (sc < best) {
            best = sc;
            memcpy(perm, cur, (size_t)K * R * sizeof *cur);
        }
    }
    free(order);
    free(cur);
}

/* Sizes that cross the fast code's blocks (256 tasks), its vector widths (16 and 4 points,
 * scalar tails) and its groups of 8 cost sums (R^2 = 9, 25); centres drawn so that several
 * orders score close, and quantised ones so that distances tie. */
static void align_matches_direct_loops(void **state)
{
    (void)state;
    const int sizes[][4] = {{300, 3, 7, 3}, {37, 5, 10, 4}, {2, 2, 1, 2}, {261, 5, 3, 2}};
    for (size_t t = 0; t < sizeof sizes / sizeof *sizes; t++) {
        int K = sizes[t][0], R = sizes[t][1], P = sizes[t][2], B = sizes[t][3];
        for (int quant = 0; quant < 2; quant++) {
            double *M = malloc((size_t)K * R * P * sizeof *M);
            int *fast = malloc((size_t)K * R * sizeof *fast),
                *ref = malloc((size_t)K * R * sizeof *ref);
            assert_non_null(M);
            assert_non_null(fast);
            assert_non_null(ref);
            fk_rng g;
            fk_rng_init(&g, 7 + (uint64_t)t, (uint64_t)quant);
            for (int i = 0; i < K * R * P; i++) {
                double v = 3.0 * fk_rng_normal(&g);
                M[i] = quant ? round(v) : v;
            }
            fk_rng r1, r2;
            fk_rng_init(&r1, 99, 1);
            fk_rng_init(&r2, 99, 1);
            assert_int_equal(fk_gmm_align(M, K, R, P, B, &r1, fast, NULL), FK_OK);
            ref_align(M, K, R, P, B, &r2, ref);
            assert_memory_equal(fast, ref, (size_t)K * R * sizeof *ref);
            free(M);
            free(fast);
            free(ref);
        }
    }
}

/* Generator (spec 6.6): exact heterogeneity radius, Dirichlet moments, outlier moments. */
static void synth_generator(void **state)
{
    (void)state;
    fk_synth_gmm o;
    fk_synth_gmm_defaults(&o);
    o.h = 1.25;
    o.n = 2000;
    fk_dataset ts[10];
    double th[500], w[50], c[50];
    assert_int_equal(fk_synth_gmm_make(&o, 8, ts, th, w, NULL), FK_OK);
    assert_int_equal(fk_synth_gmm_centres(&o, 8, c, NULL), FK_OK);
    for (int k = 0; k < 9; k++)
        for (int r = 0; r < 5; r++) {
            double d = 0;
            for (int j = 0; j < 10; j++)
                d += (th[(k * 5 + r) * 10 + j] - c[r * 10 + j]) * (th[(k * 5 + r) * 10 + j] - c[r * 10 + j]);
            NEAR(sqrt(d), 1.25, 1e-12);
        }
    double m = 0, v = 0; /* outlier task: N(2.5, 4) per coordinate */
    for (int i = 0; i < 2000 * 10; i++)
        m += ts[9].X.data[i] / 20000;
    for (int i = 0; i < 2000 * 10; i++)
        v += (ts[9].X.data[i] - m) * (ts[9].X.data[i] - m) / 19999;
    NEAR(m, 2.5, 5 * 2 / sqrt(20000));
    NEAR(v, 4.0, 5 * 4 * sqrt(2.0 / 19999));
    for (int k = 0; k < 10; k++)
        fk_dataset_close(&ts[k]);
    /* Dirichlet(5 1_5) weights: mean 0.2, variance 0.2*0.8/26 */
    o.n = 1;
    o.K = 1000;
    o.n_outlier = 0;
    fk_dataset *many = calloc(1000, sizeof *many);
    double *tt = malloc(1000 * 50 * sizeof *tt), *ww = malloc(1000 * 5 * sizeof *ww);
    double mw = 0, vw = 0;
    for (int b = 0; b < 20; b++) {
        assert_int_equal(fk_synth_gmm_make(&o, 100 + (uint64_t)b, many, tt, ww, NULL), FK_OK);
        for (int k = 0; k < 1000; k++) {
            mw += ww[k * 5] / 20000;
            vw += (ww[k * 5] - 0.2) * (ww[k * 5] - 0.2) / 20000;
            fk_dataset_close(&many[k]);
        }
    }
    NEAR(mw, 0.2, 0.002);
    NEAR(vw, 0.2 * 0.8 / 26, 0.05 * 0.2 * 0.8 / 26);
    free(many);
    free(tt);
    free(ww);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(golden_local_step),
        cmocka_unit_test(estep_stability),
        cmocka_unit_test(em_monotone),
        cmocka_unit_test(gradient_em_reaches_em_fixed_point),
        cmocka_unit_test(eee_fit_recovers_centres),
        cmocka_unit_test(eee_singular_covariance_regularised),
        cmocka_unit_test(bottleneck_matches_brute_force),
        cmocka_unit_test(lambda_schedule),
        cmocka_unit_test(align_recovers_permutations),
        cmocka_unit_test(align_matches_direct_loops),
        cmocka_unit_test(synth_generator),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
