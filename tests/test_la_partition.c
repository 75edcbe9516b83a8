#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/partition.h"

/* Every sample 0..n-1 appears exactly once, sizes add up, ascending within clients. */
static void assert_valid(const fk_partition *p, size_t n)
{
    assert_int_equal(p->n, n);
    int *seen = calloc(n ? n : 1, sizeof *seen);
    assert_non_null(seen);
    size_t total = 0;
    for (int k = 0; k < p->n_clients; k++) {
        const int *idx = fk_partition_client(p, k);
        size_t m = fk_partition_size(p, k);
        total += m;
        for (size_t j = 0; j < m; j++) {
            assert_true(idx[j] >= 0 && (size_t)idx[j] < n);
            seen[idx[j]]++;
            if (j)
                assert_true(idx[j] > idx[j - 1]);
        }
    }
    assert_int_equal(total, n);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(seen[i], 1);
    free(seen);
}

static int same_partition(const fk_partition *a, const fk_partition *b)
{
    return a->n_clients == b->n_clients && a->n == b->n &&
           !memcmp(a->offset, b->offset, ((size_t)a->n_clients + 1) * sizeof *a->offset) &&
           !memcmp(a->index, b->index, a->n * sizeof *a->index);
}

static void iid_equal_shares_and_determinism(void **state)
{
    (void)state;
    fk_rng r;
    fk_rng_init(&r, 1, 0);
    fk_partition p, q, s;
    fk_err err;
    assert_int_equal(fk_partition_iid(&p, 103, 10, &r, &err), FK_OK);
    assert_valid(&p, 103);
    assert_int_equal(p.n_clients, 10);
    assert_null(p.group);
    for (int k = 0; k < 10; k++)
        assert_int_equal(fk_partition_size(&p, k), k < 3 ? 11 : 10);
    /* shuffled: client 0 does not simply hold 0..10 */
    assert_true(fk_partition_client(&p, 0)[10] != 10);
    fk_rng_init(&r, 1, 0);
    assert_int_equal(fk_partition_iid(&q, 103, 10, &r, &err), FK_OK);
    assert_true(same_partition(&p, &q));
    fk_rng_init(&r, 2, 0);
    assert_int_equal(fk_partition_iid(&s, 103, 10, &r, &err), FK_OK);
    assert_false(same_partition(&p, &s));
    fk_partition_close(&p);
    fk_partition_close(&q);
    fk_partition_close(&s);
    /* K == n: one sample each */
    assert_int_equal(fk_partition_iid(&p, 5, 5, &r, &err), FK_OK);
    assert_valid(&p, 5);
    for (int k = 0; k < 5; k++)
        assert_int_equal(fk_partition_size(&p, k), 1);
    assert_int_equal(fk_partition_size(&p, 5), 0);
    assert_null(fk_partition_client(&p, -1));
    fk_partition_close(&p);
}

static void iid_errors(void **state)
{
    (void)state;
    fk_rng r;
    fk_rng_init(&r, 1, 0);
    fk_partition p;
    fk_err err;
    assert_int_equal(fk_partition_iid(&p, 10, 0, &r, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "at least 1"));
    assert_int_equal(fk_partition_iid(&p, 10, -3, &r, &err), FK_EINVAL);
    assert_int_equal(fk_partition_iid(&p, 10, 11, &r, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "11 clients but only 10 samples"));
    fk_partition_close(&p); /* safe after a failure */
}

/* Mean over clients of the share of the client's most frequent class. */
static double mean_top_class_share(const fk_partition *p, const int *y, int n_classes)
{
    double s = 0;
    int counted = 0;
    for (int k = 0; k < p->n_clients; k++) {
        size_t m = fk_partition_size(p, k);
        if (!m)
            continue;
        int cnt[16] = {0}, top = 0;
        for (size_t j = 0; j < m; j++)
            cnt[y[fk_partition_client(p, k)[j]]]++;
        for (int c = 0; c < n_classes; c++)
            top = cnt[c] > top ? cnt[c] : top;
        s += (double)top / (double)m;
        counted++;
    }
    return s / counted;
}

static void dirichlet_skew_follows_alpha(void **state)
{
    (void)state;
    enum { N = 2000, C = 10, K = 10 };
    int y[N];
    for (int i = 0; i < N; i++)
        y[i] = (i * 7) % C;
    fk_rng r;
    fk_partition skew, flat, again;
    fk_err err;
    fk_rng_init(&r, 3, 0);
    assert_int_equal(fk_partition_dirichlet(&skew, y, N, C, K, 0.1, 0, &r, &err), FK_OK);
    assert_valid(&skew, N);
    fk_rng_init(&r, 3, 0);
    assert_int_equal(fk_partition_dirichlet(&again, y, N, C, K, 0.1, 0, &r, &err), FK_OK);
    assert_true(same_partition(&skew, &again));
    fk_rng_init(&r, 4, 0);
    assert_int_equal(fk_partition_dirichlet(&flat, y, N, C, K, 1000.0, 0, &r, &err), FK_OK);
    assert_valid(&flat, N);
    double s_skew = mean_top_class_share(&skew, y, C), s_flat = mean_top_class_share(&flat, y, C);
    /* alpha = 0.1: clients are dominated by one or two classes; alpha = 1000: near the 1/C of IID
     */
    assert_true(s_skew > 0.5);
    assert_true(s_flat < 0.2);
    /* near-IID sizes are near n/K */
    for (int k = 0; k < K; k++)
        assert_true(labs((long)fk_partition_size(&flat, k) - N / K) < 40);
    fk_partition_close(&skew);
    fk_partition_close(&again);
    fk_partition_close(&flat);
}

static void dirichlet_min_size_and_errors(void **state)
{
    (void)state;
    enum { N = 1000 };
    int y[N];
    for (int i = 0; i < N; i++)
        y[i] = i % 4;
    fk_rng r;
    fk_rng_init(&r, 5, 0);
    fk_partition p;
    fk_err err;
    assert_int_equal(fk_partition_dirichlet(&p, y, N, 4, 8, 0.5, 30, &r, &err), FK_OK);
    assert_valid(&p, N);
    for (int k = 0; k < 8; k++)
        assert_true(fk_partition_size(&p, k) >= 30);
    fk_partition_close(&p);
    /* two classes over ten clients with alpha -> 0: at most ~2 clients get data */
    int y2[N];
    for (int i = 0; i < N; i++)
        y2[i] = i % 2;
    assert_int_equal(fk_partition_dirichlet(&p, y2, N, 2, 10, 1e-3, 1, &r, &err), FK_ENUMERIC);
    assert_non_null(strstr(err.msg, "raise alpha"));
    assert_int_equal(fk_partition_dirichlet(&p, y, N, 4, 10, 0.0, 0, &r, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "alpha = 0"));
    assert_int_equal(fk_partition_dirichlet(&p, y, N, 4, 10, -1.0, 0, &r, &err), FK_EINVAL);
    assert_int_equal(fk_partition_dirichlet(&p, y, N, 4, 10, NAN, 0, &r, &err), FK_EINVAL);
    assert_int_equal(fk_partition_dirichlet(&p, y, N, 4, 0, 1.0, 0, &r, &err), FK_EINVAL);
    assert_int_equal(fk_partition_dirichlet(&p, y, 5, 4, 6, 1.0, 0, &r, &err), FK_EINVAL);
    assert_int_equal(fk_partition_dirichlet(&p, y, N, 4, 10, 1.0, 101, &r, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "min_per_client"));
    y[17] = 4;
    assert_int_equal(fk_partition_dirichlet(&p, y, N, 4, 10, 1.0, 0, &r, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "y[17] = 4"));
    /* tiny alpha still terminates and partitions */
    y[17] = 1;
    assert_int_equal(fk_partition_dirichlet(&p, y, N, 4, 3, 1e-300, 0, &r, &err), FK_OK);
    assert_valid(&p, N);
    fk_partition_close(&p);
}

static void by_group(void **state)
{
    (void)state;
    const int g[7] = {5, 2, 9, 2, 5, 5, 9};
    fk_partition p;
    fk_err err;
    assert_int_equal(fk_partition_group(&p, g, 7, &err), FK_OK);
    assert_valid(&p, 7);
    assert_int_equal(p.n_clients, 3);
    const int want_group[3] = {2, 5, 9};
    assert_memory_equal(p.group, want_group, sizeof want_group);
    const int c0[2] = {1, 3}, c1[3] = {0, 4, 5}, c2[2] = {2, 6};
    assert_int_equal(fk_partition_size(&p, 0), 2);
    assert_memory_equal(fk_partition_client(&p, 0), c0, sizeof c0);
    assert_memory_equal(fk_partition_client(&p, 1), c1, sizeof c1);
    assert_memory_equal(fk_partition_client(&p, 2), c2, sizeof c2);
    fk_partition_close(&p);
    const int bad[3] = {0, -1, 2};
    assert_int_equal(fk_partition_group(&p, bad, 3, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "sample 1"));
    assert_int_equal(fk_partition_group(&p, g, 0, &err), FK_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(iid_equal_shares_and_determinism),
        cmocka_unit_test(iid_errors),
        cmocka_unit_test(dirichlet_skew_follows_alpha),
        cmocka_unit_test(dirichlet_min_size_and_errors),
        cmocka_unit_test(by_group),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
