#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "common/la/metrics.h"

static void accuracy_counts_matches(void **state)
{
    (void)state;
    const int t[5] = {0, 1, 2, 1, 0}, p[5] = {0, 2, 2, 1, -1};
    double acc = -1;
    fk_err err;
    assert_int_equal(fk_accuracy(t, p, 5, &acc, &err), FK_OK);
    assert_true(acc == 0.6);
    assert_int_equal(fk_accuracy(t, p, 0, &acc, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "no samples"));
}

static void confusion_matrix(void **state)
{
    (void)state;
    const int t[6] = {0, 0, 1, 2, 2, 2}, p[6] = {0, 1, 1, 2, 0, 2};
    fk_mat cm;
    fk_err err;
    assert_int_equal(fk_confusion(&cm, t, p, 6, 3, &err), FK_OK);
    const double want[9] = {1, 1, 0, 0, 1, 0, 1, 0, 2};
    assert_int_equal(cm.rows, 3);
    assert_int_equal(cm.cols, 3);
    for (int i = 0; i < 9; i++)
        assert_true(cm.data[i] == want[i]);
    fk_mat_close(&cm);
    const int bad[6] = {0, 1, 1, 3, 0, 2};
    assert_int_equal(fk_confusion(&cm, t, bad, 6, 3, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "y_pred[3] = 3"));
    assert_null(cm.data);
    assert_int_equal(fk_confusion(&cm, bad, p, 6, 3, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "y_true[3]"));
    assert_int_equal(fk_confusion(&cm, t, p, 6, 0, &err), FK_EINVAL);
    /* no samples: an all-zero matrix */
    assert_int_equal(fk_confusion(&cm, t, p, 0, 2, &err), FK_OK);
    assert_true(cm.data[0] == 0 && cm.data[3] == 0);
    fk_mat_close(&cm);
}

static void rmse_values_and_errors(void **state)
{
    (void)state;
    const double a[3] = {1, 2, 3}, b[3] = {1, 2, 5};
    double r;
    fk_err err;
    assert_int_equal(fk_rmse(a, b, 3, &r, &err), FK_OK);
    assert_true(fabs(r - sqrt(4.0 / 3.0)) < 1e-15);
    assert_int_equal(fk_rmse(a, a, 3, &r, &err), FK_OK);
    assert_true(r == 0.0);
    const double big[2] = {1e200, -1e200}, zero[2] = {0, 0};
    assert_int_equal(fk_rmse(big, zero, 2, &r, &err), FK_OK);
    assert_true(fabs(r / 1e200 - 1.0) < 1e-15);
    const double nan[2] = {1, NAN};
    assert_int_equal(fk_rmse(nan, zero, 2, &r, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "value 1"));
    assert_int_equal(fk_rmse(a, b, 0, &r, &err), FK_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accuracy_counts_matches),
        cmocka_unit_test(confusion_matrix),
        cmocka_unit_test(rmse_values_and_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
