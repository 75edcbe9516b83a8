#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"
#include "common/models/mixture/gmm.h"
#include "common/models/mixture/gmm_hc.h"

/* ---- a from-scratch reference: every pair cost recomputed from the members ---- */

/* n log([n > q] det(W/n) + (tr W + alpha)/n) of the rows with lab == a or b. */
static double ref_term(const double *Z, size_t n, int q, const int *lab, int a, int b,
                       double alpha)
{
    double mu[8] = {0}, W[64] = {0}, cnt = 0;
    for (size_t i = 0; i < n; i++)
        if (lab[i] == a || lab[i] == b) {
            cnt++;
            for (int j = 0; j < q; j++)
                mu[j] += Z[i * q + j];
        }
    for (int j = 0; j < q; j++)
        mu[j] /= cnt;
    for (size_t i = 0; i < n; i++)
        if (lab[i] == a || lab[i] == b)
            for (int j = 0; j < q; j++)
                for (int k = 0; k < q; k++)
                    W[j * q + k] += (Z[i * q + j] - mu[j]) * (Z[i * q + k] - mu[k]) / cnt;
    double tr = 0, det = 0;
    for (int j = 0; j < q; j++)
        tr += W[j * q + j] * cnt;
    if (cnt > q && LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', q, W, q) == 0) {
        det = 1;
        for (int j = 0; j < q; j++)
            det *= W[j * q + j] * W[j * q + j];
    }
    return cnt * log(det + (tr + alpha) / cnt);
}

static void ref_agglomerate(const double *Z, size_t n, int q, int G, int *lab)
{
    double mu[8] = {0}, tot = 0;
    for (size_t i = 0; i < n; i++)
        for (int j = 0; j < q; j++)
            mu[j] += Z[i * q + j] / (double)n;
    for (size_t i = 0; i < n; i++)
        for (int j = 0; j < q; j++)
            tot += (Z[i * q + j] - mu[j]) * (Z[i * q + j] - mu[j]);
    double alpha = tot / ((double)n * q);
    for (size_t i = 0; i < n; i++)
        lab[i] = (int)i;
    for (size_t k = n; k > (size_t)G; k--) {
        double best = INFINITY;
        int ba = -1, bb = -1;
        for (size_t a = 0; a < n; a++)
            for (size_t b = a + 1; b < n; b++) {
                int la = lab[a], lb = lab[b];
                if (la != (int)a || lb != (int)b)
                    continue; /* a cluster is named by its smallest row */
                double d = ref_term(Z, n, q, lab, la, lb, alpha) -
                           ref_term(Z, n, q, lab, la, la, alpha) -
                           ref_term(Z, n, q, lab, lb, lb, alpha);
                if (d < best) {
                    best = d;
                    ba = la;
                    bb = lb;
                }
            }
        for (size_t i = 0; i < n; i++)
            if (lab[i] == bb)
                lab[i] = ba;
    }
}

/* Same partition: rows i, j share a label in one exactly when they do in the other. */
static void assert_same_partition(const int *a, const int *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            assert_int_equal(a[i] == a[j], b[i] == b[j]);
}

/* Labels 0..G-1 in order of first appearance (each cluster's smallest row). */
static void assert_canonical(const int *lab, size_t n, int G)
{
    int next = 0;
    for (size_t i = 0; i < n; i++) {
        assert_true(lab[i] >= 0 && lab[i] <= next);
        if (lab[i] == next)
            next++;
    }
    assert_int_equal(next, G);
}

/* The incremental agglomeration (scatter updates, slot moves) merges exactly as the
 * from-scratch reference, through the regimes n <= q (trace only) and n > q (det). */
static void agglomerate_matches_reference(void **state)
{
    (void)state;
    fk_rng rng;
    fk_rng_init(&rng, 5, 0);
    for (int q = 1; q <= 3; q++) {
        size_t n = 36;
        double Z[36 * 3];
        for (size_t i = 0; i < n * (size_t)q; i++) /* three loose groups */
            Z[i] = fk_rng_normal(&rng) + 3.0 * (double)((i / (size_t)q) % 3);
        const int Gs[] = {1, 2, 3, 5, 9, 36};
        for (size_t g = 0; g < sizeof Gs / sizeof *Gs; g++) {
            int got[36], want[36];
            assert_int_equal(fk_gmm_hc_agglomerate(Z, n, q, Gs[g], got, NULL), FK_OK);
            ref_agglomerate(Z, n, q, Gs[g], want);
            assert_same_partition(got, want, n);
            assert_canonical(got, n, Gs[g]);
        }
    }
}

/* n rows around G far-apart centres; columns on very different scales. */
static void blobs(double *X, size_t n, int p, int G, fk_rng *rng, int *truth)
{
    for (size_t i = 0; i < n; i++) {
        truth[i] = (int)(fk_rng_below(rng, (uint64_t)G));
        for (int j = 0; j < p; j++)
            X[i * p + j] = (fk_rng_normal(rng) + 25.0 * (double)((truth[i] + j) % G)) *
                           pow(10.0, (double)(j % 3) - 1.0);
    }
}

static void recovers_separated_blobs(void **state)
{
    (void)state;
    fk_rng rng;
    fk_rng_init(&rng, 11, 0);
    enum { N = 90, P = 4, G = 3 };
    double X[N * P];
    int truth[N], lab[N];
    blobs(X, N, P, G, &rng, truth);
    assert_int_equal(fk_gmm_hc_vvv(X, N, P, G, lab, NULL), FK_OK);
    assert_same_partition(lab, truth, N);
    assert_canonical(lab, N, G);
}

/* Columns are standardised first, so shifting and rescaling them changes nothing. */
static void invariant_to_column_scale_and_shift(void **state)
{
    (void)state;
    fk_rng rng;
    fk_rng_init(&rng, 12, 0);
    enum { N = 120, P = 3 };
    double X[N * P], Y[N * P];
    int a[N], b[N];
    for (size_t i = 0; i < N * P; i++)
        X[i] = fk_rng_normal(&rng) + 2.0 * (double)(i % 4 == 0);
    for (size_t i = 0; i < N; i++)
        for (int j = 0; j < P; j++)
            Y[i * P + j] = X[i * P + j] * (j + 1) * 4.0 - 7.0 * j;
    for (int G = 2; G <= 6; G += 2) {
        assert_int_equal(fk_gmm_hc_vvv(X, N, P, G, a, NULL), FK_OK);
        assert_int_equal(fk_gmm_hc_vvv(Y, N, P, G, b, NULL), FK_OK);
        assert_memory_equal(a, b, sizeof a);
    }
}

/* Over FK_GMM_HC_MAX_ROWS rows the tree is built on a strided subset; every row is labelled. */
static void subset_labels_every_row(void **state)
{
    (void)state;
    fk_rng rng;
    fk_rng_init(&rng, 13, 0);
    size_t n = FK_GMM_HC_MAX_ROWS + 701;
    int p = 2, G = 3;
    double *X = malloc(n * (size_t)p * sizeof *X);
    int *truth = malloc(n * sizeof *truth), *lab = malloc(n * sizeof *lab);
    assert_non_null(X);
    assert_non_null(truth);
    assert_non_null(lab);
    blobs(X, n, p, G, &rng, truth);
    assert_int_equal(fk_gmm_hc_vvv(X, n, p, G, lab, NULL), FK_OK);
    assert_same_partition(lab, truth, n);
    free(X);
    free(truth);
    free(lab);
}

/* The EEE fit from the hierarchical start finds the blobs, the same way every time. */
static void eee_fit_from_hierarchical_start(void **state)
{
    (void)state;
    fk_rng rng;
    fk_rng_init(&rng, 14, 0);
    enum { N = 300, P = 3, G = 3 };
    double X[N * P], w[2][G], mu[2][G * P], sg[2][P * P];
    int truth[N];
    blobs(X, N, P, G, &rng, truth);
    for (int t = 0; t < 2; t++) {
        fk_eee_fit f = {.w = w[t], .mu = mu[t], .sigma = sg[t]};
        assert_int_equal(fk_gmm_fit_eee_hc(X, N, P, G, &f, NULL), FK_OK);
        assert_true(isfinite(f.loglik));
    }
    assert_memory_equal(mu[0], mu[1], sizeof mu[0]);
    double share[G] = {0};
    for (int i = 0; i < N; i++)
        share[truth[i]] += 1.0 / N;
    for (int r = 0; r < G; r++) { /* each fitted weight is one blob's share */
        int hit = 0;
        for (int g = 0; g < G; g++)
            hit += fabs(w[0][r] - share[g]) < 1e-9;
        assert_true(hit >= 1);
    }
}

static void bad_input(void **state)
{
    (void)state;
    double X[12 * 2] = {0}, big[(FK_GMM_HC_MAX_P + 1) * 2] = {0};
    int lab[FK_GMM_HC_MAX_ROWS + 1];
    fk_err err;
    assert_int_equal(fk_gmm_hc_vvv(big, 2, FK_GMM_HC_MAX_P + 1, 1, lab, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "k-means++"));
    assert_int_equal(fk_gmm_hc_vvv(X, 3, 2, 4, lab, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "3 samples cannot make 4 clusters"));
    assert_int_equal(fk_gmm_hc_vvv(X, 12, 2, 3, lab, &err), FK_ENUMERIC); /* constant data */
    assert_non_null(strstr(err.msg, "no variance"));
    X[7] = NAN;
    assert_int_equal(fk_gmm_hc_vvv(X, 12, 2, 3, lab, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "sample 3 feature 1 is not finite"));
    double *many = calloc((FK_GMM_HC_MAX_ROWS + 1), sizeof *many);
    assert_non_null(many);
    assert_int_equal(fk_gmm_hc_agglomerate(many, FK_GMM_HC_MAX_ROWS + 1, 1, 2, lab, &err),
                     FK_EINVAL);
    free(many);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(agglomerate_matches_reference),
        cmocka_unit_test(recovers_separated_blobs),
        cmocka_unit_test(invariant_to_column_scale_and_shift),
        cmocka_unit_test(subset_labels_every_row),
        cmocka_unit_test(eee_fit_from_hierarchical_start),
        cmocka_unit_test(bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
