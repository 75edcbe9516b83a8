/* The latency histogram of `fedkern bench load` (bench/load_hist.c): every bucket index maps
 * back to bounds that hold the value, percentiles stay within the bucket error of the exact
 * sorted-array percentile, and histograms merged from several generators equal the one that
 * saw every value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench/load_hist.h"
#include "common/la/rng.h"

/* bit-equal doubles (merging must not change a single percentile) */
static int same(double a, double b)
{
    return memcmp(&a, &b, sizeof a) == 0;
}

static void index_and_bounds_agree(void **state)
{
    (void)state;
    int last = -1;
    /* every value below 2^20 us, then a sparse sweep up to the clamp */
    for (uint64_t us = 0; us < (1u << 20); us++) {
        int i = fk__lhist_index(us);
        uint64_t lo, hi;
        fk__lhist_bounds(i, &lo, &hi);
        assert_true(lo <= us && us < hi);
        assert_true(i == last || i == last + 1); /* contiguous, no bucket skipped */
        last = i;
        if (us >= FK_LHIST_SUB)
            assert_true((double)(hi - lo) <= (double)lo / 64.0); /* 1/64 relative width */
    }
    for (uint64_t us = 1u << 20; us < ((uint64_t)1 << 37); us += us / 7 + 1) {
        int i = fk__lhist_index(us);
        uint64_t lo, hi;
        fk__lhist_bounds(i, &lo, &hi);
        assert_true(lo <= us && us < hi);
    }
    assert_int_equal(fk__lhist_index((uint64_t)1 << 40), FK_LHIST_N - 1);
    assert_int_equal(fk__lhist_index(((uint64_t)1 << 37) - 1), FK_LHIST_N - 1);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void percentiles_and_exact_merge(void **state)
{
    (void)state;
    enum { N = 200000, P = 3 };
    double *v = malloc(N * sizeof *v);
    fk_lhist *all = malloc(sizeof *all), *part = malloc(P * sizeof *part), *merged =
        malloc(sizeof *merged);
    assert_non_null(v);
    assert_non_null(all);
    assert_non_null(part);
    assert_non_null(merged);
    fk_lhist_init(all);
    fk_lhist_init(merged);
    for (int k = 0; k < P; k++)
        fk_lhist_init(&part[k]);
    fk_rng r;
    fk_rng_init(&r, 7, 0);
    /* log-uniform latencies from 20 us to 3 s: every scale of the buckets is used */
    for (int i = 0; i < N; i++) {
        v[i] = 20e-6 * exp(fk_rng_uniform(&r) * log(3.0 / 20e-6));
        fk_lhist_record(all, v[i]);
        fk_lhist_record(&part[i % P], v[i]);
    }
    for (int k = 0; k < P; k++)
        fk_lhist_merge(merged, &part[k]);
    assert_int_equal(merged->n, N);
    assert_memory_equal(merged->count, all->count, sizeof all->count);
    qsort(v, N, sizeof *v, cmp);
    const double ps[] = {0.001, 0.1, 0.5, 0.9, 0.99, 0.999, 0.99999};
    for (size_t j = 0; j < sizeof ps / sizeof ps[0]; j++) {
        double exact = v[(size_t)ceil(ps[j] * N) - 1];
        double got = fk_lhist_pct(merged, ps[j]);
        assert_true(same(got, fk_lhist_pct(all, ps[j])));
        /* midpoint of a bucket of relative width <= 1/64, plus the 1 us floor */
        assert_true(fabs(got - exact) <= exact / 128.0 + 1e-6);
    }
    assert_true(same(fk_lhist_pct(merged, 1.0), v[N - 1]));
    assert_true(same(merged->max_s, all->max_s));
    free(v);
    free(all);
    free(part);
    free(merged);
}

static void empty_and_small(void **state)
{
    (void)state;
    fk_lhist h;
    fk_lhist_init(&h);
    assert_true(same(fk_lhist_pct(&h, 0.99), 0));
    fk_lhist_record(&h, -1);      /* clock skew: counted as 0 */
    fk_lhist_record(&h, 50e-6);   /* exact microsecond buckets below 128 us */
    fk_lhist_record(&h, 1e9);     /* clamped into the last bucket, max kept exact */
    assert_int_equal(h.n, 3);
    assert_true(fabs(fk_lhist_pct(&h, 0.5) - 50.5e-6) < 1e-12);
    assert_true(same(fk_lhist_pct(&h, 1.0), 1e9));
    assert_true(fk_lhist_pct(&h, 0.99) <= 1e9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(index_and_bounds_agree),
        cmocka_unit_test(percentiles_and_exact_merge),
        cmocka_unit_test(empty_and_small),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
