#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "common/data/dataset.h"
#include "common/data/prep.h"
#include "common/data/prep_model.h"
#include "common/data/source.h"

static void fill(fk_mat *m, const double *v)
{
    for (size_t i = 0; i < m->rows; i++)
        memcpy(fk_mat_row(m, i), v + i * m->cols, m->cols * sizeof *v);
}

static void l1_rows_zero_row_stays(void **state)
{
    (void)state;
    fk_mat m;
    assert_int_equal(fk_mat_init(&m, 3, 3), FK_OK);
    fill(&m, (const double[]){1, 1, 2, 0, 0, 0, -1, 3, 0});
    assert_int_equal(fk_prep_l1_rows(&m), FK_OK);
    assert_true(fabs(fk_mat_get(&m, 0, 2) - 0.5) < 1e-15);
    assert_true(fk_mat_get(&m, 1, 0) == 0 && fk_mat_get(&m, 1, 2) == 0);
    assert_true(fabs(fk_mat_get(&m, 2, 0) + 0.5) < 1e-15); /* signed sum 2, as MATLAB sum */
    fk_mat_close(&m);
}

static void l2_rows(void **state)
{
    (void)state;
    fk_mat m;
    assert_int_equal(fk_mat_init(&m, 2, 2), FK_OK);
    fill(&m, (const double[]){3, 4, 0, 0});
    fk_prep_l2_rows(&m);
    assert_true(fabs(fk_mat_get(&m, 0, 0) - 0.6) < 1e-15 && fabs(fk_mat_get(&m, 0, 1) - 0.8) < 1e-15);
    assert_true(fk_mat_get(&m, 1, 0) == 0);
    fk_mat_close(&m);
}

static void zscore_population_std(void **state)
{
    (void)state;
    fk_mat m;
    assert_int_equal(fk_mat_init(&m, 4, 3), FK_OK);
    /* column 0: 1 2 3 4 (mean 2.5, population std sqrt(1.25)); column 1 constant 0.1; column 2 zero */
    fill(&m, (const double[]){1, 0.1, 0, 2, 0.1, 0, 3, 0.1, 0, 4, 0.1, 0});
    assert_int_equal(fk_prep_zscore_cols(&m), FK_OK);
    double s = sqrt(1.25);
    assert_true(fabs(fk_mat_get(&m, 0, 0) - (1 - 2.5) / s) < 1e-14);
    assert_true(fabs(fk_mat_get(&m, 3, 0) - (4 - 2.5) / s) < 1e-14);
    for (size_t i = 0; i < 4; i++) {
        assert_true(fk_mat_get(&m, i, 1) == 0);
        assert_true(fk_mat_get(&m, i, 2) == 0);
    }
    fk_mat_close(&m);
}

static void labels_raw_and_aligned(void **state)
{
    (void)state;
    fk_dataset a, b;
    fk_err err = {0};
    assert_int_equal(fk_dataset_init(&a, 3, 2, 0), FK_OK);
    assert_int_equal(fk_dataset_init(&b, 2, 2, 0), FK_OK);
    fk_dataset_set_name(&a, "amazon");
    fk_dataset_set_name(&b, "webcam");
    assert_int_equal(fk_dataset_set_labels(&a, (const double[]){10, 1, 10}, &err), FK_OK);
    assert_int_equal(fk_dataset_set_labels(&b, (const double[]){5, 10}, &err), FK_OK);
    assert_int_equal(a.n_classes, 2);
    assert_int_equal(a.y[0], 1);
    assert_int_equal(b.y[1], 1);
    fk_dataset *both[2] = {&a, &b};
    assert_int_equal(fk_dataset_align_labels(both, 2, &err), FK_OK);
    /* union {1, 5, 10}: raw 10 is class 2 in both domains */
    assert_int_equal(a.n_classes, 3);
    assert_int_equal(b.n_classes, 3);
    assert_int_equal(a.y[0], 2);
    assert_int_equal(b.y[1], 2);
    assert_int_equal(b.y[0], 1);
    assert_true(a.classes[a.y[0]] == a.y_raw[0]);
    /* a subset keeps raw labels and the class list */
    fk_dataset s;
    assert_int_equal(fk_dataset_subset(&s, &a, (const int[]){2, 1}, 2), FK_OK);
    assert_int_equal(s.y[0], 2);
    assert_true(s.y_raw[1] == 1 && s.n_classes == 3 && s.classes[2] == 10);
    fk_dataset_close(&s);
    /* a fixed class list; a label outside it is an error */
    assert_int_equal(fk_dataset_use_classes(&b, (const double[]){5, 10, 11}, 3, &err), FK_OK);
    assert_int_equal(b.y[1], 1);
    assert_int_equal(fk_dataset_use_classes(&a, (const double[]){5, 10}, 2, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "amazon"));
    assert_int_equal(fk_dataset_set_labels(&a, (const double[]){1, NAN, 2}, &err), FK_EFORMAT);
    fk_dataset_close(&a);
    fk_dataset_close(&b);
}

static void dims_must_match(void **state)
{
    (void)state;
    fk_dataset a, b;
    fk_err err = {0};
    assert_int_equal(fk_dataset_init(&a, 2, 800, 0), FK_OK);
    assert_int_equal(fk_dataset_init(&b, 2, 4096, 0), FK_OK);
    fk_dataset_set_name(&a, "surf");
    fk_dataset_set_name(&b, "decaf");
    assert_int_equal(fk_dataset_check_dims(&a, &a, &err), FK_OK);
    assert_int_equal(fk_dataset_check_dims(&a, &b, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "'surf' has 800"));
    assert_non_null(strstr(err.msg, "'decaf' has 4096"));
    fk_dataset_close(&a);
    fk_dataset_close(&b);
}

static void regression_target(void **state)
{
    (void)state;
    fk_dataset a;
    fk_err err = {0};
    assert_int_equal(fk_dataset_init(&a, 2, 1, 1), FK_OK);
    assert_int_equal(fk_dataset_set_target(&a, (const double[]){28.2, 30.5}, &err), FK_OK);
    assert_null(a.y);
    assert_int_equal(a.n_classes, 0);
    assert_true(a.y_raw[1] == 30.5);
    fk_dataset_close(&a);
}

/* Issue 34: the clients' records into the model and back. Clients that agree: one row, and
 * applying it equals the loader's own steps bit for bit; clients that differ: one row each,
 * and reading without a client is refused naming --client; an unknown client: nothing. */
static void model_prep_records(void **state)
{
    (void)state;
    double sh[2] = {1, -2}, sc[2] = {0.5, 4};
    fk_prep_record a = {.known = 1, .n = 2, .code = {1, 3}, .d = 2, .shift = sh, .scale = sc};
    fk_prep_record recs[3] = {a, a, a};
    fk_bundle m;
    fk_bundle_init(&m);
    fk_err err = {0};
    int unknown;
    assert_int_equal(fk_prep_model_put(&m, recs, 3, &unknown, &err), FK_OK);
    assert_int_equal(unknown, -1);
    assert_int_equal(fk_prep_model_rows(&m), 1);
    fk_prep_record got;
    assert_int_equal(fk_prep_model_get(&m, -1, &got, &err), FK_OK);
    assert_true(fk_prep_record_same(&got, &a));
    char what[160];
    fk_prep_record_describe(&got, what, sizeof what);
    assert_string_equal(what, "l1, zscore, then an affine map (2 columns)");
    /* applying it = l1, z-score, then the map, each as the loader does it */
    const double v[] = {1, 2, 3, 5, 8, 1, 2, 2};
    fk_mat x, y;
    assert_int_equal(fk_mat_init(&x, 4, 2), FK_OK);
    assert_int_equal(fk_mat_init(&y, 4, 2), FK_OK);
    fill(&x, v);
    fill(&y, v);
    assert_int_equal(fk_prep_record_apply(&got, 0, &x, &err), FK_OK);
    assert_int_equal(fk_prep_l1_rows(&y), FK_OK);
    assert_int_equal(fk_prep_zscore_cols(&y), FK_OK);
    fk_prep_affine_cols(&y, sh, sc);
    assert_memory_equal(x.data, y.data, 8 * sizeof(double));
    /* a map of another width than the rows: refused */
    fk_mat z;
    assert_int_equal(fk_mat_init(&z, 2, 3), FK_OK);
    assert_int_equal(fk_prep_record_apply(&got, 0, &z, &err), FK_EINVAL);
    fk_mat_close(&z);
    fk_bundle_close(&m);
    /* client 1 had no affine map: a row each; client 1's row is the identity map */
    recs[1].d = 0;
    fk_bundle_init(&m);
    assert_int_equal(fk_prep_model_put(&m, recs, 3, &unknown, &err), FK_OK);
    assert_int_equal(fk_prep_model_rows(&m), 3);
    assert_int_equal(fk_prep_model_get(&m, -1, &got, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "--client N"));
    assert_int_equal(fk_prep_model_get(&m, 1, &got, &err), FK_OK);
    assert_int_equal(got.n, 2);
    assert_true(got.d == 2 && got.shift[0] == 0 && got.scale[1] == 1);
    assert_int_equal(fk_prep_model_get(&m, 3, &got, &err), FK_EINVAL);
    /* a hostile code is refused */
    fk_bundle_get(&m, "data_prep")->data[2] = 7;
    assert_int_equal(fk_prep_model_get(&m, 0, &got, &err), FK_EFORMAT);
    fk_bundle_close(&m);
    /* client 2 did not report: no record at all, and who it was */
    recs[1] = a;
    recs[2].known = 0;
    fk_bundle_init(&m);
    assert_int_equal(fk_prep_model_put(&m, recs, 3, &unknown, &err), FK_OK);
    assert_int_equal(unknown, 2);
    assert_null(fk_bundle_get(&m, "data_prep"));
    assert_int_equal(fk_prep_model_get(&m, -1, &got, &err), FK_OK);
    assert_false(got.known);
    fk_bundle_close(&m);
    fk_mat_close(&x);
    fk_mat_close(&y);
}

/* A catalog set's own steps come first, then the prep option. */
static void source_steps(void **state)
{
    (void)state;
    fk_source so = {.n_prep = 1, .prep = {FK_PREP_STEP_ZSCORE}};
    int c[8];
    assert_int_equal(fk_source_steps("office-surf/dslr", &so, c, 8), 3);
    assert_true(c[0] == 1 && c[1] == 3 && c[2] == 3);
    assert_int_equal(fk_source_steps("mnist-usps/usps", NULL, c, 8), 1);
    assert_int_equal(c[0], 2);
    assert_int_equal(fk_source_steps("some/file.csv", &so, c, 8), 1);
    assert_int_equal(c[0], 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(l1_rows_zero_row_stays), cmocka_unit_test(l2_rows),
        cmocka_unit_test(zscore_population_std),  cmocka_unit_test(labels_raw_and_aligned),
        cmocka_unit_test(dims_must_match),        cmocka_unit_test(regression_target),
        cmocka_unit_test(model_prep_records),     cmocka_unit_test(source_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
