#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/data/catalog.h"
#include "tests/data_fixtures.h"

static void office_preprocessing_and_labels(void **state)
{
    fixture_dir *f = *state;
    mkdir(fixture_path(f, "office-caltech10-surf"), 0700);
    /* labels 10 and 3 only: indices must still follow the documented list 1..10 */
    fixture_text(f, "office-caltech10-surf/dslr_SURF_L10.csv.gz", "10,1,3,0\n3,2,2,0\n10,0,4,0\n", 1);
    fk_dataset ds;
    fk_err err = {0};
    assert_int_equal(fk_catalog_load(&ds, f->dir, "office-surf/dslr", &err), FK_OK);
    assert_string_equal(ds.name, "office-surf/dslr");
    assert_int_equal(ds.n_classes, 10);
    assert_int_equal(ds.y[0], 9);
    assert_int_equal(ds.y[1], 2);
    assert_true(ds.y_raw[0] == 10);
    /* L1 rows: (.25 .75 0), (.5 .5 0), (0 1 0); then zscore(X,1) per column */
    double c0[3] = {0.25, 0.5, 0}, mu = 0.25, sd = sqrt((0 + 0.0625 + 0.0625) / 3);
    for (int i = 0; i < 3; i++) {
        assert_true(fabs(fk_mat_get(&ds.X, (size_t)i, 0) - (c0[i] - mu) / sd) < 1e-12);
        assert_true(fk_mat_get(&ds.X, (size_t)i, 2) == 0); /* constant column */
    }
    fk_dataset_close(&ds);
}

static void pendigits_label_last(void **state)
{
    fixture_dir *f = *state;
    mkdir(fixture_path(f, "uci-pendigits"), 0700);
    fixture_text(f, "uci-pendigits/pendigits.tes", " 47,100, 8\n  0, 89, 2\n", 0);
    fk_dataset ds;
    fk_err err = {0};
    assert_int_equal(fk_catalog_load(&ds, f->dir, "pendigits/test", &err), FK_OK);
    assert_int_equal(ds.X.cols, 2);
    assert_int_equal(ds.n_classes, 10);
    assert_int_equal(ds.y[0], 8);
    assert_true(fk_mat_get(&ds.X, 0, 1) == 100);
    fk_dataset_close(&ds);
}

static void parkinsons_regression(void **state)
{
    fixture_dir *f = *state;
    mkdir(fixture_path(f, "uci-parkinsons-telemonitoring"), 0700);
    fixture_text(f, "uci-parkinsons-telemonitoring/parkinsons_updrs.data",
                 "subject#,age,sex,test_time,motor_UPDRS,total_UPDRS,a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p\n"
                 "3,72,0,5.6,28.1,34.3,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16\n",
                 0);
    fk_dataset ds;
    fk_err err = {0};
    assert_int_equal(fk_catalog_load(&ds, f->dir, "parkinsons/total", &err), FK_OK);
    assert_int_equal(ds.X.cols, 19);
    assert_null(ds.y);
    assert_true(ds.y_raw[0] == 34.3);
    assert_int_equal(ds.group[0], 3);
    assert_true(fk_mat_get(&ds.X, 0, 0) == 72 && fk_mat_get(&ds.X, 0, 18) == 16);
    fk_dataset_close(&ds);
}

static void unknown_and_missing(void **state)
{
    fixture_dir *f = *state;
    fk_dataset ds;
    fk_err err = {0};
    assert_int_equal(fk_catalog_load(&ds, f->dir, "office-surf/nope", &err), FK_ENOTFOUND);
    assert_non_null(strstr(err.msg, "office-surf/amazon"));
    assert_int_equal(fk_catalog_load(&ds, f->dir, "office-surf/amazon", &err), FK_EIO);
    assert_non_null(strstr(err.msg, "--data_dir"));
    int n = 0;
    for (const char *const *p = fk_catalog_names(); *p; p++)
        n++;
    assert_true(n >= 16);
}

/* Debian's dataset-fashion-mnist, when installed: the IDX path end to end. */
static void fashion_mnist_from_debian(void **state)
{
    (void)state;
    if (access("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz", R_OK) != 0)
        skip();
    fk_dataset ds;
    fk_err err = {0};
    assert_int_equal(fk_catalog_load(&ds, NULL, "fashion-mnist/test", &err), FK_OK);
    assert_int_equal(ds.X.rows, 10000);
    assert_int_equal(ds.X.cols, 784);
    assert_int_equal(ds.n_classes, 10);
    double lo = 1, hi = 0;
    for (size_t i = 0; i < ds.X.rows * ds.X.cols; i++) {
        lo = ds.X.data[i] < lo ? ds.X.data[i] : lo;
        hi = ds.X.data[i] > hi ? ds.X.data[i] : hi;
    }
    assert_true(lo == 0 && hi == 1);
    int count[10] = {0};
    for (size_t i = 0; i < ds.X.rows; i++)
        count[ds.y[i]]++;
    for (int k = 0; k < 10; k++)
        assert_int_equal(count[k], 1000);
    fk_dataset_close(&ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(office_preprocessing_and_labels, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(pendigits_label_last, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(parkinsons_regression, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(unknown_and_missing, fixture_setup, fixture_teardown),
        cmocka_unit_test(fashion_mnist_from_debian),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
