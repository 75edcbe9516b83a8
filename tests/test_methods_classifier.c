#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"
#include "common/models/fedrf_tca/classifier.h"

static void check_gradients(const size_t *hidden, int n_hidden)
{
    size_t b = 5, in = 6, C = 4;
    fk_mlp net;
    fk_err err;
    assert_int_equal(fk_mlp_layout(&net, in, hidden, n_hidden, C, &err), FK_OK);
    double *th = malloc(net.n_params * sizeof *th), *g = malloc(net.n_params * sizeof *g);
    fk_rng rng;
    fk_rng_init(&rng, 1, 1);
    fk_mlp_init_params(&net, th, &rng);
    fk_mat X, gX;
    assert_int_equal(fk_mat_init(&X, b, in), FK_OK);
    assert_int_equal(fk_mat_init(&gX, b, in), FK_OK);
    for (size_t i = 0; i < b * in; i++)
        X.data[i] = fk_rng_normal(&rng);
    int y[5] = {0, 1, 2, 3, 1};
    double L, lp, lm;
    assert_int_equal(fk_mlp_loss_grad(&net, th, &X, y, &L, g, &gX, &err), FK_OK);
    for (size_t i = 0; i < net.n_params; i++) {
        double t0 = th[i], h = 1e-6;
        th[i] = t0 + h;
        assert_int_equal(fk_mlp_loss_grad(&net, th, &X, y, &lp, NULL, NULL, &err), FK_OK);
        th[i] = t0 - h;
        assert_int_equal(fk_mlp_loss_grad(&net, th, &X, y, &lm, NULL, NULL, &err), FK_OK);
        th[i] = t0;
        double fd = (lp - lm) / (2 * h);
        assert_true(fabs(fd - g[i]) <= 1e-6 * (fabs(fd) + 1e-4));
    }
    for (size_t i = 0; i < b * in; i++) {
        double t0 = X.data[i], h = 1e-6;
        X.data[i] = t0 + h;
        assert_int_equal(fk_mlp_loss_grad(&net, th, &X, y, &lp, NULL, NULL, &err), FK_OK);
        X.data[i] = t0 - h;
        assert_int_equal(fk_mlp_loss_grad(&net, th, &X, y, &lm, NULL, NULL, &err), FK_OK);
        X.data[i] = t0;
        double fd = (lp - lm) / (2 * h);
        assert_true(fabs(fd - gX.data[i]) <= 1e-6 * (fabs(fd) + 1e-4));
    }
    free(th);
    free(g);
    fk_mat_close(&X);
    fk_mat_close(&gX);
}

static void softmax_gradients(void **state)
{
    (void)state;
    check_gradients(NULL, 0);
}

static void mlp_gradients(void **state)
{
    (void)state;
    size_t h[2] = {8, 7};
    check_gradients(h, 2);
}

/* Two Gaussian blobs per class: both optimizers learn them. */
static void training_learns_separable_data(void **state)
{
    (void)state;
    size_t n = 300, in = 4, h[1] = {16};
    fk_mat X;
    int *y = malloc(n * sizeof *y), *pred = malloc(n * sizeof *pred);
    assert_int_equal(fk_mat_init(&X, n, in), FK_OK);
    fk_rng rng;
    fk_rng_init(&rng, 2, 2);
    for (size_t i = 0; i < n; i++) {
        y[i] = (int)(i % 3);
        for (size_t j = 0; j < in; j++)
            X.data[i * in + j] = 0.5 * fk_rng_normal(&rng) + (j == (size_t)y[i] ? 2.0 : 0.0);
    }
    for (int k = 0; k < 2; k++) {
        fk_mlp net;
        fk_err err;
        assert_int_equal(fk_mlp_layout(&net, in, h, k, 3, &err), FK_OK);
        double *th = malloc(net.n_params * sizeof *th);
        fk_mlp_init_params(&net, th, &rng);
        fk_train_opts o = {.epochs = 30, .batch = 32, .lr = k ? 0.01 : 0.1,
                           .opt = k ? FK_OPT_ADAM : FK_OPT_SGD};
        assert_int_equal(fk_mlp_train(&net, th, &X, y, 3, &o, &rng, &err), FK_OK);
        assert_int_equal(fk_mlp_predict(&net, th, &X, pred, &err), FK_OK);
        size_t ok = 0;
        for (size_t i = 0; i < n; i++)
            ok += pred[i] == y[i];
        assert_true(ok > 0.9 * (double)n);
        free(th);
    }
    fk_mat_close(&X);
    free(y);
    free(pred);
}

static void bad_labels(void **state)
{
    (void)state;
    fk_err err;
    int one[4] = {2, 2, 2, 2}, two[4] = {0, 1, 0, 1}, out[2] = {0, 7};
    assert_int_equal(fk_labels_check(NULL, 4, 3, "source amazon", &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "no labels"));
    assert_int_equal(fk_labels_check(one, 4, 3, "source amazon", &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "one class"));
    assert_int_equal(fk_labels_check(out, 2, 3, "source", &err), FK_EINVAL);
    assert_int_equal(fk_labels_check(two, 4, 3, "source", &err), FK_OK);
    fk_mlp net;
    assert_int_equal(fk_mlp_layout(&net, 3, NULL, 0, 1, &err), FK_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(softmax_gradients),
        cmocka_unit_test(mlp_gradients),
        cmocka_unit_test(training_learns_separable_data),
        cmocka_unit_test(bad_labels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
