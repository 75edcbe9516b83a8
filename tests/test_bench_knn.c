#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdlib.h>

#include "bench/knn.h"
#include "common/la/rng.h"

static void ties_go_to_lowest_index(void **state)
{
    (void)state;
    fk_mat tr, te;
    fk_err err = {0};
    assert_int_equal(fk_mat_init(&tr, 3, 1), FK_OK);
    assert_int_equal(fk_mat_init(&te, 2, 1), FK_OK);
    tr.data[0] = 0;
    tr.data[1] = 2;
    tr.data[2] = 4;
    te.data[0] = 1; /* equidistant from 0 and 2 */
    te.data[1] = 3.9;
    int y[3] = {7, 8, 9}, pred[2];
    assert_int_equal(fk_knn1_predict(&tr, y, &te, pred, &err), FK_OK);
    assert_int_equal(pred[0], 7);
    assert_int_equal(pred[1], 9);
    fk_mat_close(&tr);
    fk_mat_close(&te);
}

/* Blocked dgemm distances agree with a direct search, across several blocks. */
static void matches_direct_search(void **state)
{
    (void)state;
    size_t n = 97, m = 600, d = 13;
    fk_mat tr, te;
    fk_rng r;
    fk_err err = {0};
    fk_rng_init(&r, 7, 0);
    assert_int_equal(fk_mat_init(&tr, n, d), FK_OK);
    assert_int_equal(fk_mat_init(&te, m, d), FK_OK);
    for (size_t i = 0; i < n * d; i++)
        tr.data[i] = fk_rng_normal(&r);
    for (size_t i = 0; i < m * d; i++)
        te.data[i] = fk_rng_normal(&r);
    int *y = malloc(n * sizeof *y), *pred = malloc(m * sizeof *pred);
    for (size_t i = 0; i < n; i++)
        y[i] = (int)i;
    assert_int_equal(fk_knn1_predict(&tr, y, &te, pred, &err), FK_OK);
    for (size_t i = 0; i < m; i++) {
        size_t best = 0;
        double bd = 1e300;
        for (size_t j = 0; j < n; j++) {
            double s = 0;
            for (size_t k = 0; k < d; k++) {
                double t = fk_mat_get(&te, i, k) - fk_mat_get(&tr, j, k);
                s += t * t;
            }
            if (s < bd) {
                bd = s;
                best = j;
            }
        }
        assert_int_equal(pred[i], (int)best);
    }
    free(y);
    free(pred);
    fk_mat_close(&tr);
    fk_mat_close(&te);
}

static void dimension_mismatch(void **state)
{
    (void)state;
    fk_mat tr, te;
    fk_err err = {0};
    int y[1] = {0}, pred[1];
    assert_int_equal(fk_mat_init(&tr, 1, 2), FK_OK);
    assert_int_equal(fk_mat_init(&te, 1, 3), FK_OK);
    assert_int_equal(fk_knn1_predict(&tr, y, &te, pred, &err), FK_EINVAL);
    fk_mat_close(&tr);
    fk_mat_close(&te);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ties_go_to_lowest_index),
        cmocka_unit_test(matches_direct_search),
        cmocka_unit_test(dimension_mismatch),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
