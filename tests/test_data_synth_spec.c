/* Synthetic data-set specs (common/data/synth_spec.c): a client's dataset equals
 * the simulator's dataset for that client, and bad specs give one clear error. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/synth_spec.h"

static void assert_same_data(const fk_dataset *a, const fk_dataset *b)
{
    assert_int_equal(a->X.rows, b->X.rows);
    assert_int_equal(a->X.cols, b->X.cols);
    for (size_t i = 0; i < a->X.rows; i++)
        assert_memory_equal(fk_mat_row((fk_mat *)&a->X, i), fk_mat_row((fk_mat *)&b->X, i),
                            a->X.cols * sizeof(double));
    assert_int_equal(a->y != NULL, b->y != NULL);
    if (a->y)
        assert_memory_equal(a->y, b->y, a->X.rows * sizeof *a->y);
    assert_int_equal(a->n_classes, b->n_classes);
    assert_string_equal(a->name, b->name);
}

/* The spec's name without its data (a process that does not hold the client): the loader's. */
static void assert_name_only(const char *spec, const fk_dataset *loaded)
{
    fk_dataset ds;
    fk_err err = {0};
    assert_int_equal(fk_synth_spec_name(&ds, spec, &err), FK_OK);
    assert_string_equal(ds.name, loaded->name);
    assert_int_equal(ds.X.rows, 0);
    assert_null(ds.X.data);
}

static void shift_matches_generator(void **state)
{
    (void)state;
    fk_synth_opts o;
    fk_synth_defaults(&o);
    o.n_sources = 2;
    o.seed = 7;
    fk_dataset all[3];
    fk_err err;
    assert_int_equal(fk_synth_shift(&o, all, &err), FK_OK);
    for (int c = 0; c < 3; c++) {
        char spec[96];
        snprintf(spec, sizeof spec, "synthetic/shift:sources=2,seed=7,client=%d", c);
        fk_dataset ds;
        assert_int_equal(fk_synth_spec_load(&ds, spec, &err), FK_OK);
        assert_same_data(&ds, &all[c]);
        assert_name_only(spec, &ds);
        fk_dataset_close(&ds);
        fk_dataset_close(&all[c]);
    }
}

static void gmm_matches_generator(void **state)
{
    (void)state;
    fk_synth_gmm g;
    fk_synth_gmm_defaults(&g);
    g.K = 4;
    fk_dataset all[4];
    double theta[4 * 5 * 10], w[4 * 5];
    fk_err err;
    assert_int_equal(fk_synth_gmm_make(&g, 3, all, theta, w, &err), FK_OK);
    for (int c = 0; c < 4; c++) {
        char spec[96];
        snprintf(spec, sizeof spec, "synthetic/gmm:tasks=4,seed=3,client=%d", c);
        fk_dataset ds;
        assert_int_equal(fk_synth_spec_load(&ds, spec, &err), FK_OK);
        assert_same_data(&ds, &all[c]);
        assert_name_only(spec, &ds);
        fk_dataset_close(&ds);
    }
    /* some tasks only (a rank's share under mpirun): those bit for bit, the others named and
     * empty, the truth of every task */
    fk_dataset some[4];
    memset(some, 0, sizeof some);
    double th2[4 * 5 * 10], w2[4 * 5];
    const unsigned char want[4] = {0, 1, 0, 1};
    assert_int_equal(fk_synth_gmm_make_some(&g, 3, some, th2, w2, want, &err), FK_OK);
    assert_memory_equal(th2, theta, sizeof theta);
    assert_memory_equal(w2, w, sizeof w);
    for (int c = 0; c < 4; c++) {
        if (want[c]) {
            assert_same_data(&some[c], &all[c]);
        } else {
            assert_null(some[c].X.data);
            assert_string_equal(some[c].name, all[c].name);
        }
        fk_dataset_close(&some[c]);
        fk_dataset_close(&all[c]);
    }
}

/* Task I of the mixture-of-regressions design: X and the target y (y_raw, unlabelled). */
static void mor_matches_generator(void **state)
{
    (void)state;
    fk_mor_data d;
    fk_err err;
    assert_int_equal(fk_mor_make(4, 2, 3, 50, 1, 0.5, 2.0, 9, &d, &err), FK_OK);
    for (int c = 0; c < 4; c++) {
        char spec[128];
        snprintf(spec, sizeof spec,
                 "synthetic/mor:tasks=4,components=2,dims=3,samples=50,h=0.5,out_coef=2,seed=9,"
                 "client=%d",
                 c);
        fk_dataset ds, ref;
        assert_int_equal(fk_synth_spec_load(&ds, spec, &err), FK_OK);
        assert_int_equal(fk_mor_task_dataset(&d, c, &ref, &err), FK_OK);
        assert_same_data(&ds, &ref);
        assert_null(ds.y);
        assert_memory_equal(ds.y_raw, d.y + (size_t)c * 50, 50 * sizeof(double));
        assert_name_only(spec, &ds);
        fk_dataset_close(&ds);
        fk_dataset_close(&ref);
    }
    fk_mor_data_close(&d);
    fk_synth_spec s; /* defaults: the spec 4.3 reference design */
    assert_int_equal(fk_synth_spec_parse("synthetic/mor:client=9", &s, &err), FK_OK);
    assert_true(s.kind == FK_SYNTH_MOR && s.mor.K == 10 && s.mor.R == 5 && s.mor.p == 10 &&
                s.mor.n == 200 && s.mor.n_outlier == 1 && s.mor.out_coef == -3.0);
}

static void bad_specs_fail_clearly(void **state)
{
    (void)state;
    static const struct {
        const char *spec, *needle;
    } cases[] = {
        {"synthetic/shift", "client=I"},
        {"synthetic/shift:sources=3", "client=I"},
        {"synthetic/shift:client=4", "client"},          /* 3 sources: 0..3 */
        {"synthetic/gmm:client=10", "client"},           /* 10 tasks: 0..9 */
        {"synthetic/gmm:client=1,colour=red", "unknown option 'colour'"},
        {"synthetic/gmm:client=1,client=2", "given twice"},
        {"synthetic/gmm:client", "KEY=VALUE"},
        {"synthetic/gmm:=3", "KEY=VALUE"},
        {"synthetic/gmm:client=x", "client"},
        {"synthetic/spiral:client=0", "unknown synthetic kind 'spiral'"},
        {"synthetic/gmm:client=0,tasks=1", "tasks"},
        {"synthetic/mor:client=0,dims=10,samples=10", "samples"}, /* n > p for a regression */
        {"synthetic/mor:client=0,h=-1", "h"},
        {"synthetic/mor:client=0,sigma=1", "unknown option 'sigma'"},
        {"mnist", "does not start with"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fk_synth_spec s;
        fk_err err = {0};
        int rc = fk_synth_spec_parse(cases[i].spec, &s, &err);
        if (rc != FK_EINVAL || !strstr(err.msg, cases[i].needle))
            fail_msg("%s: rc %d, message '%s' lacks '%s'", cases[i].spec, rc, err.msg,
                     cases[i].needle);
    }
    assert_true(fk_synth_spec_is("synthetic/gmm:client=0"));
    assert_false(fk_synth_spec_is("office-surf/amazon"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shift_matches_generator),
        cmocka_unit_test(gmm_matches_generator),
        cmocka_unit_test(mor_matches_generator),
        cmocka_unit_test(bad_specs_fail_clearly),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
