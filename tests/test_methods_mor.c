/* Mixture-of-regressions FedGrEM, its MoR baselines and FedGMM (spec fedgrem.md 1.5, 2, 4.3). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/mixture/mor.h"
#include "common/base/params.h"

static void small_params(fk_params *p)
{
    fk_params_init(p);
    assert_int_equal(fk_params_set(p, "restarts", "4"), FK_OK);
    assert_int_equal(fk_params_set(p, "align_B", "5"), FK_OK);
}

/* The outlier task follows y = x^T(out_coef 1) + e: least squares recovers the coefficient. */
static void generator_outlier_regression(void **state)
{
    (void)state;
    fk_mor_data d;
    fk_err err;
    assert_int_equal(fk_mor_make(3, 2, 3, 3000, 1, 0.5, -3.0, 7, &d, &err), FK_OK);
    double A[9] = {0}, b[3] = {0};
    const double *X = d.X + 2 * 3000 * 3, *y = d.y + 2 * 3000;
    for (int i = 0; i < 3000; i++)
        for (int j = 0; j < 3; j++) {
            b[j] += X[i * 3 + j] * y[i];
            for (int l = 0; l < 3; l++)
                A[j * 3 + l] += X[i * 3 + j] * X[i * 3 + l];
        }
    for (int j = 0; j < 3; j++) /* x ~ N(0, I): X^T X ~ n I, so b/n ~ coefficients */
        assert_true(fabs(b[j] / A[j * 3 + j] + 3.0) < 0.15);
    assert_true(isnan(d.w[2 * 2]) && isnan(d.theta[2 * 2 * 3]));
    assert_true(fabs(d.w[0] + d.w[1] - 1.0) < 1e-12);
    fk_mor_data_close(&d);
}

/* Every method returns finite, aligned estimates; on an easy design (large n, one outlier)
 * the federated and local estimates are close to the truth, FedGrEM at least as close as
 * FedEM (the outlier task pulls FedEM's plain average). */
static void methods_run_and_recover(void **state)
{
    (void)state;
    fk_mor_data d;
    fk_err err;
    fk_params p;
    small_params(&p);
    assert_int_equal(fk_mor_make(5, 2, 3, 600, 1, 0.0, -3.0, 3, &d, &err), FK_OK);
    double th[5 * 2 * 3], w[5 * 2], et[7], ew[7];
    for (int m = 0; fk_mor_methods[m]; m++) {
        int rc = fk_mor_run(fk_mor_methods[m], &p, &d, 100, 1, th, w, &err);
        if (rc)
            print_message("%s: %s\n", fk_mor_methods[m], err.msg);
        assert_int_equal(rc, FK_OK);
        for (int i = 0; i < 30; i++)
            assert_true(isfinite(th[i]));
        for (int k = 0; k < 5; k++)
            assert_true(fabs(w[2 * k] + w[2 * k + 1] - 1.0) < 1e-9);
        fk_mor_errors(&d, th, w, &et[m], &ew[m]);
    }
    /* 0 fedgrem, 1 fedem, 2 local-em, 3 local-grem, 4 pooled-em, 5 pooled-grem, 6 fedgmm */
    assert_true(et[2] < 0.6);       /* local fits with 300 points per component */
    assert_true(et[0] < 0.6);       /* FedGrEM resists the outlier task */
    assert_true(et[0] <= et[1] + 0.05);
    assert_true(et[0] < et[6]); /* FedGMM averages the outlier task in, like FedEM */
    fk_mor_data_close(&d);
    /* without outlier tasks the averaging methods recover the common coefficients */
    assert_int_equal(fk_mor_make(5, 2, 3, 600, 0, 0.0, -3.0, 3, &d, &err), FK_OK);
    const char *avg[2] = {"fedem", "fedgmm"};
    for (int m = 0; m < 2; m++) {
        assert_int_equal(fk_mor_run(avg[m], &p, &d, 100, 1, th, w, &err), FK_OK);
        double a, b;
        fk_mor_errors(&d, th, w, &a, &b);
        assert_true(a < 0.3 && b < 0.1);
    }
    fk_mor_data_close(&d);
    fk_params_close(&p);
}

static void bad_input(void **state)
{
    (void)state;
    fk_mor_data d;
    fk_err err;
    fk_params p;
    small_params(&p);
    assert_int_equal(fk_mor_make(2, 2, 3, 50, 0, 0.0, -3.0, 1, &d, &err), FK_OK);
    double th[12], w[4];
    assert_int_equal(fk_mor_run("nosuch", &p, &d, 10, 1, th, w, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "nosuch"));
    d.n = 2; /* fewer samples than features */
    assert_int_equal(fk_mor_run("fedgrem", &p, &d, 10, 1, th, w, &err), FK_EINVAL);
    d.n = 50;
    assert_int_equal(fk_params_set(&p, "fedgmm_cov", "some"), FK_OK);
    assert_int_equal(fk_mor_run("fedgmm", &p, &d, 10, 1, th, w, &err), FK_EINVAL);
    assert_int_equal(fk_params_set(&p, "fedgmm_cov", "all"), FK_OK);
    assert_int_equal(fk_params_set(&p, "local_init", "hc"), FK_OK); /* MoR fits start from random partitions */
    assert_int_equal(fk_mor_run("local-em", &p, &d, 10, 1, th, w, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "not a start for mixtures of regressions"));
    fk_mor_data_close(&d);
    fk_params_close(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(generator_outlier_regression),
        cmocka_unit_test(methods_run_and_recover),
        cmocka_unit_test(bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
