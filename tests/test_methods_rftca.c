#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "common/data/synth_shift.h"
#include "common/la/rff.h"
#include "common/models/fedrf_tca/rftca.h"

/* Plain 1-NN accuracy (percent) of target rows against labelled source rows. */
static double one_nn(const fk_mat *Zs, const int *ys, const fk_mat *Zt, const int *yt)
{
    size_t ok = 0;
    for (size_t i = 0; i < Zt->rows; i++) {
        double best = INFINITY;
        int lab = -1;
        for (size_t j = 0; j < Zs->rows; j++) {
            double d = 0;
            for (size_t k = 0; k < Zs->cols; k++) {
                double t = fk_mat_get(Zt, i, k) - fk_mat_get(Zs, j, k);
                d += t * t;
            }
            if (d < best) {
                best = d;
                lab = ys[j];
            }
        }
        ok += lab == yt[i];
    }
    return 100.0 * (double)ok / (double)Zt->rows;
}

static void make_pair(fk_dataset ds[2], uint64_t seed)
{
    fk_synth_opts o;
    fk_synth_defaults(&o);
    o.n_sources = 1;
    o.seed = seed;
    fk_err err;
    assert_int_equal(fk_synth_shift(&o, ds, &err), FK_OK);
    fk_rows_l2_normalize(&ds[0].X);
    fk_rows_l2_normalize(&ds[1].X);
}

static fk_rftca_opts default_opts(size_t n)
{
    return (fk_rftca_opts){.N = 300, .m = 10, .sigma = 1.0, .seed = 7,
                           .gamma = fk_tca_gamma_normalized(1.0, n, n), .norm = FK_TCA_NORM_B};
}

static void beats_no_adaptation(void **state)
{
    (void)state;
    double base = 0, adapted = 0;
    for (uint64_t s = 1; s <= 3; s++) {
        fk_dataset ds[2];
        make_pair(ds, s);
        fk_rftca_opts o = default_opts(ds[0].X.rows);
        fk_mat Zs, Zt;
        fk_err err;
        assert_int_equal(fk_rftca_fit(&ds[0].X, &ds[1].X, &o, &Zs, &Zt, NULL, NULL, &err), FK_OK);
        fk_rows_l2_normalize(&Zs);
        fk_rows_l2_normalize(&Zt);
        base += one_nn(&ds[0].X, ds[0].y, &ds[1].X, ds[1].y) / 3;
        adapted += one_nn(&Zs, ds[0].y, &Zt, ds[1].y) / 3;
        fk_mat_close(&Zs);
        fk_mat_close(&Zt);
        fk_dataset_close(&ds[0]);
        fk_dataset_close(&ds[1]);
    }
    print_message("1-NN no adaptation %.1f %%, RF-TCA %.1f %%\n", base, adapted);
    assert_true(adapted > base + 5.0);
}

static void w_rf_is_b_orthonormal_and_deterministic(void **state)
{
    (void)state;
    fk_dataset ds[2];
    make_pair(ds, 4);
    fk_rftca_opts o = default_opts(ds[0].X.rows);
    fk_mat Zs, Zt, W, Zs2, Zt2, W2;
    double theta[10], theta2[10];
    fk_err err;
    assert_int_equal(fk_rftca_fit(&ds[0].X, &ds[1].X, &o, &Zs, &Zt, &W, theta, &err), FK_OK);
    assert_int_equal(fk_rftca_fit(&ds[0].X, &ds[1].X, &o, &Zs2, &Zt2, &W2, theta2, &err), FK_OK);
    assert_memory_equal(W.data, W2.data, W.rows * W.cols * sizeof(double));
    assert_memory_equal(Zt.data, Zt2.data, Zt.rows * Zt.cols * sizeof(double));
    /* W^T B W = I with B = v v^T + gamma I, v = Sigma l = mean_S phi - mean_T phi. */
    fk_rff r;
    fk_mat Ss, St;
    assert_int_equal(fk_rff_init(&r, o.seed, ds[0].X.cols, o.N, o.sigma, &err), FK_OK);
    assert_int_equal(fk_rff_map(&r, &ds[0].X, &Ss, &err), FK_OK);
    assert_int_equal(fk_rff_map(&r, &ds[1].X, &St, &err), FK_OK);
    size_t D = 2 * o.N, m = o.m;
    double *v = calloc(D, sizeof *v), *vw = calloc(m, sizeof *vw);
    for (size_t i = 0; i < Ss.rows; i++)
        cblas_daxpy((int)D, 1.0 / (double)Ss.rows, Ss.data + i * D, 1, v, 1);
    for (size_t i = 0; i < St.rows; i++)
        cblas_daxpy((int)D, -1.0 / (double)St.rows, St.data + i * D, 1, v, 1);
    cblas_dgemv(CblasRowMajor, CblasTrans, (int)D, (int)m, 1.0, W.data, (int)m, v, 1, 0.0, vw, 1);
    for (size_t k = 0; k < m; k++)
        for (size_t l = 0; l < m; l++) {
            double q = o.gamma * cblas_ddot((int)D, W.data + k, (int)m, W.data + l, (int)m) +
                       vw[k] * vw[l];
            assert_true(fabs(q - (k == l)) < 1e-9);
        }
    /* the projection of the source rows is Sigma_S W */
    fk_mat Z;
    assert_int_equal(fk_tca_project(&Ss, &W, &Z, &err), FK_OK);
    for (size_t i = 0; i < Z.rows * Z.cols; i++)
        assert_true(fabs(Z.data[i] - Zs.data[i]) < 1e-10);
    free(v);
    free(vw);
    fk_mat_close(&Z);
    fk_mat_close(&Ss);
    fk_mat_close(&St);
    fk_rff_close(&r);
    fk_mat_close(&Zs);
    fk_mat_close(&Zt);
    fk_mat_close(&W);
    fk_mat_close(&Zs2);
    fk_mat_close(&Zt2);
    fk_mat_close(&W2);
    fk_dataset_close(&ds[0]);
    fk_dataset_close(&ds[1]);
}

/* Same seed, different BLAS thread counts: the same W_RF up to rounding. */
static void thread_count_does_not_change_results(void **state)
{
    (void)state;
    fk_dataset ds[2];
    make_pair(ds, 6);
    fk_rftca_opts o = default_opts(ds[0].X.rows);
    fk_mat Zs, Zt, W1, W2;
    fk_err err;
    openblas_set_num_threads(1);
    assert_int_equal(fk_rftca_fit(&ds[0].X, &ds[1].X, &o, &Zs, &Zt, &W1, NULL, &err), FK_OK);
    fk_mat_close(&Zs);
    fk_mat_close(&Zt);
    openblas_set_num_threads(2);
    assert_int_equal(fk_rftca_fit(&ds[0].X, &ds[1].X, &o, &Zs, &Zt, &W2, NULL, &err), FK_OK);
    for (size_t i = 0; i < W1.rows * W1.cols; i++)
        assert_true(fabs(W1.data[i] - W2.data[i]) <= 1e-9);
    fk_mat_close(&Zs);
    fk_mat_close(&Zt);
    fk_mat_close(&W1);
    fk_mat_close(&W2);
    fk_dataset_close(&ds[0]);
    fk_dataset_close(&ds[1]);
}

static void bad_input(void **state)
{
    (void)state;
    fk_dataset ds[2];
    make_pair(ds, 5);
    fk_mat Zs, Zt, Xb;
    fk_err err;
    fk_rftca_opts o = default_opts(ds[0].X.rows);
    o.sigma = 0;
    assert_int_equal(fk_rftca_fit(&ds[0].X, &ds[1].X, &o, &Zs, &Zt, NULL, NULL, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "sigma"));
    o = default_opts(ds[0].X.rows);
    o.N = 0;
    assert_int_equal(fk_rftca_fit(&ds[0].X, &ds[1].X, &o, &Zs, &Zt, NULL, NULL, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "N "));
    o = default_opts(ds[0].X.rows);
    o.N = 4;
    o.m = 9;
    assert_int_equal(fk_rftca_fit(&ds[0].X, &ds[1].X, &o, &Zs, &Zt, NULL, NULL, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "2N"));
    o = default_opts(ds[0].X.rows);
    o.N = 400;
    o.m = 400;
    assert_int_equal(fk_rftca_fit(&ds[0].X, &ds[1].X, &o, &Zs, &Zt, NULL, NULL, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "samples"));
    assert_int_equal(fk_mat_init(&Xb, 10, ds[0].X.cols + 1), FK_OK);
    o = default_opts(ds[0].X.rows);
    assert_int_equal(fk_rftca_fit(&ds[0].X, &Xb, &o, &Zs, &Zt, NULL, NULL, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "feature space"));
    fk_mat_close(&Xb);
    fk_dataset_close(&ds[0]);
    fk_dataset_close(&ds[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(beats_no_adaptation),
        cmocka_unit_test(w_rf_is_b_orthonormal_and_deterministic),
        cmocka_unit_test(thread_count_does_not_change_results),
        cmocka_unit_test(bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
