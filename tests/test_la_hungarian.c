#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/hungarian.h"
#include "common/la/rng.h"

/* Minimum over all permutations by Heap's algorithm. */
static double brute_min(const double *c, int n)
{
    int perm[8], cnt[8] = {0};
    for (int i = 0; i < n; i++)
        perm[i] = i;
    double best = INFINITY;
    for (;;) {
        double s = 0.0;
        for (int r = 0; r < n; r++)
            s += c[r * n + perm[r]];
        if (s < best)
            best = s;
        int i = 1;
        while (i < n && cnt[i] >= i)
            cnt[i++] = 0;
        if (i >= n)
            break;
        int j = (i % 2) ? cnt[i] : 0;
        int t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
        cnt[i]++;
    }
    return best;
}

static void matches_brute_force(void **state)
{
    (void)state;
    fk_rng rng;
    fk_rng_init(&rng, 7, 0);
    double c[49];
    int as[7];
    for (int trial = 0; trial < 1000; trial++) {
        int n = 1 + (int)fk_rng_below(&rng, 7);
        for (int i = 0; i < n * n; i++) /* integer costs half the time: many ties */
            c[i] = trial % 2 ? fk_rng_normal(&rng) * 10 : (double)fk_rng_below(&rng, 4);
        double total;
        assert_int_equal(fk_hungarian(c, n, as, &total, NULL), FK_OK);
        int seen[7] = {0};
        double s = 0;
        for (int r = 0; r < n; r++) {
            assert_true(as[r] >= 0 && as[r] < n);
            assert_int_equal(seen[as[r]]++, 0);
            s += c[r * n + as[r]];
        }
        double b = brute_min(c, n);
        assert_true(fabs(total - b) <= 1e-12 * (1 + fabs(b)));
        assert_true(fabs(s - total) <= 1e-12 * (1 + fabs(b)));
    }
}

static void rejects_bad_input(void **state)
{
    (void)state;
    fk_err err;
    double c[4] = {1, NAN, 2, 3};
    int as[2];
    assert_int_equal(fk_hungarian(c, 2, as, NULL, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "not finite"));
    assert_int_equal(fk_hungarian(c, 0, as, NULL, &err), FK_EINVAL);
}

static void misclustering_properties(void **state)
{
    (void)state;
    int truth[12], pred[12];
    double rate;
    for (int i = 0; i < 12; i++) {
        truth[i] = i % 3;
        pred[i] = (truth[i] + 1) % 3; /* a relabelling */
    }
    assert_int_equal(fk_misclustering_rate(truth, pred, 12, 3, 3, &rate, NULL), FK_OK);
    assert_true(fabs(rate) < 1e-15);
    pred[0] = pred[1]; /* one mistake */
    assert_int_equal(fk_misclustering_rate(truth, pred, 12, 3, 3, &rate, NULL), FK_OK);
    assert_true(fabs(rate - 1.0 / 12) < 1e-15);
    for (int i = 0; i < 12; i++)
        pred[i] = 0; /* everything in one cluster: worst case 1 - 1/R */
    assert_int_equal(fk_misclustering_rate(truth, pred, 12, 3, 3, &rate, NULL), FK_OK);
    assert_true(fabs(rate - 2.0 / 3) < 1e-15);
    fk_rng rng;
    fk_rng_init(&rng, 3, 1);
    for (int t = 0; t < 200; t++) { /* equals brute force over matchings */
        int n = 1 + (int)fk_rng_below(&rng, 5);
        int tr[40], pr[40];
        double cm[25] = {0};
        for (int i = 0; i < 40; i++) {
            tr[i] = (int)fk_rng_below(&rng, (uint64_t)n);
            pr[i] = (int)fk_rng_below(&rng, (uint64_t)n);
            cm[pr[i] * n + tr[i]] -= 1;
        }
        assert_int_equal(fk_misclustering_rate(tr, pr, 40, n, n, &rate, NULL), FK_OK);
        double b = 1 + brute_min(cm, n) / 40;
        assert_true(fabs(rate - b) < 1e-12);
        assert_true(rate >= 0 && rate <= 1 - 1.0 / n + 1e-12);
    }
    pred[3] = 7;
    fk_err err;
    assert_int_equal(fk_misclustering_rate(truth, pred, 12, 3, 3, &rate, &err), FK_EINVAL);
}

/* Adjusted Rand index: 1 under any relabelling, the textbook value on a small table, about 0
 * for independent labels, and refusals as for the mis-clustering rate. */
static void adjusted_rand_index_values(void **state)
{
    (void)state;
    fk_err err;
    double ari;
    int t[6] = {0, 0, 1, 1, 2, 2}, p[6] = {2, 2, 0, 0, 1, 1};
    assert_int_equal(fk_adjusted_rand_index(t, p, 6, 3, 3, &ari, &err), FK_OK);
    assert_true(fabs(ari - 1.0) < 1e-15);
    /* truth {0,0,0,1,1,1}, pred {0,0,1,1,2,2}: sum C(n_ij,2) = 2, rows 6, cols 3, C(6,2) = 15:
     * (2 - 6*3/15) / ((6+3)/2 - 6*3/15) = 0.8 / 3.3 */
    int t2[6] = {0, 0, 0, 1, 1, 1}, p2[6] = {0, 0, 1, 1, 2, 2};
    assert_int_equal(fk_adjusted_rand_index(t2, p2, 6, 2, 3, &ari, &err), FK_OK);
    assert_true(fabs(ari - 0.8 / 3.3) < 1e-12);
    enum { M = 20000 };
    int *a = malloc(M * sizeof *a), *b = malloc(M * sizeof *b);
    assert_non_null(a);
    assert_non_null(b);
    fk_rng rng;
    fk_rng_init(&rng, 7, 0);
    for (int i = 0; i < M; i++) {
        a[i] = (int)fk_rng_below(&rng, 4);
        b[i] = (int)fk_rng_below(&rng, 5);
    }
    assert_int_equal(fk_adjusted_rand_index(a, b, M, 4, 5, &ari, &err), FK_OK);
    assert_true(fabs(ari) < 0.01);
    b[3] = 9;
    assert_int_equal(fk_adjusted_rand_index(a, b, M, 4, 5, &ari, &err), FK_EINVAL);
    free(a);
    free(b);
    int one[3] = {0, 0, 0}; /* both partitions one block: they agree */
    assert_int_equal(fk_adjusted_rand_index(one, one, 3, 1, 1, &ari, &err), FK_OK);
    assert_true(ari == 1.0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matches_brute_force),
        cmocka_unit_test(rejects_bad_input),
        cmocka_unit_test(misclustering_properties),
        cmocka_unit_test(adjusted_rand_index_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
