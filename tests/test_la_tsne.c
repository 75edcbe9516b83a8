#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"
#include "common/models/mixture/sptree.h"
#include "common/models/mixture/tsne.h"

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
    o.theta = 0; /* exact dense path */
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

/* Exact repulsion sum_j q_ij^2 (y_i - y_j) and Z = sum_{i != j} q_ij. */
static double exact_rep(const double *Y, int n, int m, double *F)
{
    double Z = 0;
    memset(F, 0, (size_t)n * (size_t)m * sizeof *F);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            if (i == j)
                continue;
            double d2 = 0;
            for (int c = 0; c < m; c++)
                d2 += (Y[i * m + c] - Y[j * m + c]) * (Y[i * m + c] - Y[j * m + c]);
            double q = 1 / (1 + d2);
            Z += q;
            for (int c = 0; c < m; c++)
                F[i * m + c] += q * q * (Y[i * m + c] - Y[j * m + c]);
        }
    return Z;
}

/* Relative error of the normalised repulsive gradient F / Z of the tree. */
static double tree_error(int n, int m, double theta, double scale)
{
    double *Y = malloc((size_t)n * (size_t)m * sizeof *Y), *F = malloc((size_t)n * (size_t)m * sizeof *F);
    double *T = calloc((size_t)n * (size_t)m, sizeof *T);
    assert_non_null(Y);
    assert_non_null(F);
    assert_non_null(T);
    fk_rng r;
    fk_rng_init(&r, 11, 0);
    for (int i = 0; i < n * m; i++) /* two blobs, so the tree has structure */
        Y[i] = scale * fk_rng_normal(&r) + ((i / m) % 2 ? 3.0 : 0.0);
    double Z = exact_rep(Y, n, m, F), Zt = 0;
    fk_sptree t;
    assert_int_equal(fk_sptree_init(&t, Y, (size_t)n, m), FK_OK);
    for (int i = 0; i < n; i++)
        fk_sptree_repulsion(&t, (size_t)i, theta, T + i * m, &Zt);
    fk_sptree_close(&t);
    double num = 0, den = 0;
    for (int i = 0; i < n * m; i++) {
        num += (T[i] / Zt - F[i] / Z) * (T[i] / Zt - F[i] / Z);
        den += (F[i] / Z) * (F[i] / Z);
    }
    double e = fmax(sqrt(num / den), fabs(Zt - Z) / Z);
    free(Y);
    free(F);
    free(T);
    return e;
}

static void tree_theta0_is_exact(void **state)
{
    (void)state;
    assert_true(tree_error(300, 10, 0.0, 1.0) < 1e-12);
    assert_true(tree_error(300, 2, 0.0, 1.0) < 1e-12);
    assert_true(tree_error(5, 3, 0.0, 1.0) < 1e-12);
}

static void tree_theta_half_is_close(void **state)
{
    (void)state;
    /* Rtsne's criterion (max half-width / distance < theta) ignores the cell
     * diagonal (sqrt(D) x the half-width), so 10-d errors at theta 0.5 are
     * ~10x the 2-d ones (measured: 0.12 vs 0.038 here); smaller theta converges */
    double e10 = tree_error(2000, 10, 0.5, 1.0), e2 = tree_error(2000, 2, 0.5, 1.0);
    double f10 = tree_error(2000, 10, 0.1, 1.0), f2 = tree_error(2000, 2, 0.1, 1.0);
    print_message("Barnes-Hut relative error: theta 0.5 %.2e (10-d) %.2e (2-d); theta 0.1 %.2e "
                  "(10-d) %.2e (2-d)\n", e10, e2, f10, f2);
    assert_true(e10 < 0.2);
    assert_true(e2 < 0.06);
    assert_true(f10 < 2e-3 && f2 < 2e-3);
    assert_true(e2 > 0 && e10 > 0); /* the trees do summarise */
}

static void tree_handles_duplicates(void **state)
{
    (void)state;
    double Y[4 * 3] = {0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 0, 1}; /* rows 1 and 2 coincide */
    fk_sptree t;
    assert_int_equal(fk_sptree_init(&t, Y, 4, 3), FK_OK);
    double f[3] = {0}, z = 0;
    fk_sptree_repulsion(&t, 0, 0.0, f, &z); /* row 0 sees both duplicates */
    assert_true(fabs(z - (2.0 / 4.0 + 1.0 / 6.0)) < 1e-15);
    fk_sptree_close(&t);
}

/* Barnes-Hut (sparse P) and exact dense t-SNE embed the clusters equally well;
 * the Barnes-Hut path is deterministic too. */
static void barnes_hut_matches_dense(void **state)
{
    (void)state;
    fk_mat X, Yd, Yb, Yb2;
    int y[N];
    clusters(&X, y);
    fk_tsne_opts o;
    fk_tsne_defaults(&o);
    o.perplexity = 10;
    o.iters = 600; /* 10-d, the FedGrEM dimension */
    o.theta = 0;
    assert_int_equal(fk_tsne(&X, &o, &Yd, NULL), FK_OK);
    o.theta = 0.5;
    assert_int_equal(fk_tsne(&X, &o, &Yb, NULL), FK_OK);
    assert_int_equal(fk_tsne(&X, &o, &Yb2, NULL), FK_OK);
    assert_memory_equal(Yb.data, Yb2.data, N * 10 * sizeof(double));
    fk_mat_close(&Yb2);
    o.threads = 3; /* threads split the points, never the sums: same bits */
    assert_int_equal(fk_tsne(&X, &o, &Yb2, NULL), FK_OK);
    assert_memory_equal(Yb.data, Yb2.data, N * 10 * sizeof(double));
    o.threads = 0;
    double ad = nn_accuracy(&Yd, y), ab = nn_accuracy(&Yb, y);
    assert_true(ad >= 0.97);
    assert_true(ab >= 0.97);
    double mean0 = 0; /* re-centred */
    for (int i = 0; i < N; i++)
        mean0 += fk_mat_get(&Yb, (size_t)i, 3) / N;
    assert_true(fabs(mean0) < 1e-9);
    fk_mat_close(&Yb2);
    o.dims = 2;
    o.iters = 1000;
    assert_int_equal(fk_tsne(&X, &o, &Yb2, NULL), FK_OK);
    assert_true(nn_accuracy(&Yb2, y) >= 0.97);
    fk_mat_close(&Yd);
    fk_mat_close(&Yb);
    fk_mat_close(&Yb2);
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
    o.theta = -1;
    assert_int_equal(fk_tsne(&X, &o, &Y, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "theta"));
    o.theta = NAN;
    assert_int_equal(fk_tsne(&X, &o, &Y, &err), FK_EINVAL);
    o.theta = 0.5;
    o.dims = 40; /* a 2^40-ary tree: refused */
    o.perplexity = 10;
    assert_int_equal(fk_tsne(&X, &o, &Y, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "31"));
    fk_tsne_defaults(&o);
    X.data[5] = NAN;
    assert_int_equal(fk_tsne(&X, &o, &Y, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "not finite"));
    fk_mat_close(&X);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(separates_clusters_and_is_deterministic),
        cmocka_unit_test(tree_theta0_is_exact),
        cmocka_unit_test(tree_theta_half_is_close),
        cmocka_unit_test(tree_handles_duplicates),
        cmocka_unit_test(barnes_hut_matches_dense),
        cmocka_unit_test(rejects_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
