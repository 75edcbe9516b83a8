#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "common/la/rng.h"
#include "common/la/tsne.h"

enum { N = 150, D = 20 };

static void clusters(fk_mat *X, int *y)
{
    assert_int_equal(fk_mat_init(X, N, D), FK_OK);
    fk_rng r;
    fk_rng_init(&r, 3, 0);
    for (int i = 0; i < N; i++) {
        y[i] = i % 3;
        for (int j = 0; j < D; j++)
            fk_mat_set(X, (size_t)i, (size_t)j, (j == y[i] ? 10.0 : 0.0) + fk_rng_normal(&r));
    }
}

/* Leave-one-out 1-NN accuracy of the labels in the embedding. */
static double nn_accuracy(const fk_mat *Y, const int *y)
{
    int ok = 0;
    for (size_t i = 0; i < Y->rows; i++) {
        double best = INFINITY;
        int lab = -1;
        for (size_t j = 0; j < Y->rows; j++) {
            if (j == i)
                continue;
            double s = 0;
            for (size_t c = 0; c < Y->cols; c++) {
                double v = fk_mat_get(Y, i, c) - fk_mat_get(Y, j, c);
                s += v * v;
            }
            if (s < best) {
                best = s;
                lab = y[j];
            }
        }
        ok += lab == y[i];
    }
    return (double)ok / (double)Y->rows;
}

static void separates_clusters_and_is_deterministic(void **state)
{
    (void)state;
    fk_mat X, Y, Y2;
    int y[N];
    clusters(&X, y);
    fk_tsne_opts o;
    fk_tsne_defaults(&o);
    o.perplexity = 10;
    o.dims = 2;
    o.iters = 1000;
    assert_int_equal(fk_tsne(&X, &o, &Y, NULL), FK_OK);
    assert_true(nn_accuracy(&Y, y) >= 0.97);
    assert_int_equal(fk_tsne(&X, &o, &Y2, NULL), FK_OK);
    assert_memory_equal(Y.data, Y2.data, N * 2 * sizeof(double));
    double mean0 = 0; /* re-centred */
    for (int i = 0; i < N; i++)
        mean0 += fk_mat_get(&Y, (size_t)i, 0) / N;
    assert_true(fabs(mean0) < 1e-9);
    fk_mat_close(&Y2);
    o.dims = 10; /* the FedGrEM preprocessing dimension */
    o.iters = 600;
    assert_int_equal(fk_tsne(&X, &o, &Y2, NULL), FK_OK);
    assert_int_equal(Y2.cols, 10);
    assert_true(nn_accuracy(&Y2, y) >= 0.97);
    fk_mat_close(&Y);
    fk_mat_close(&Y2);
    fk_mat_close(&X);
}

static void rejects_bad_input(void **state)
{
    (void)state;
    fk_mat X, Y;
    int y[N];
    clusters(&X, y);
    fk_tsne_opts o;
    fk_tsne_defaults(&o);
    fk_err err;
    fk_mat few = fk_mat_rows(&X, 0, 50); /* perplexity 30 needs > 91 samples */
    assert_int_equal(fk_tsne(&few, &o, &Y, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "too few"));
    X.data[5] = NAN;
    assert_int_equal(fk_tsne(&X, &o, &Y, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "not finite"));
    fk_mat_close(&X);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(separates_clusters_and_is_deterministic),
        cmocka_unit_test(rejects_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
