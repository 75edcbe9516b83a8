/* One class list per job, by raw label value (common/methods/classes.h, issue 32): the
 * `classes` key's forms, the refusal of a label outside the list (value and row), and, per
 * job type that learns from labels, that a client lacking a class gives the model of the
 * aligned computation (every client indexed against the full list) bit for bit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"
#include "common/methods/classes.h"
#include "common/methods/dica/dica_job.h"
#include "common/methods/fedrf_tca/fedrf_tca.h"
#include "common/methods/kahm/kahm.h"
#include "common/methods/sim.h"
#include "tests/bundle_assert.h"

enum { K = 3, C = 3, D = 4 };
static const double RAW[C] = {10, 20, 30}; /* raw labels: not 0-based, on purpose */

static void set_keys(fk_params *p, const char *const *kv)
{
    fk_params_init(p);
    for (int i = 0; kv[i]; i += 2)
        assert_int_equal(fk_params_set(p, kv[i], kv[i + 1]), FK_OK);
}

/* Client k: n rows, class blobs around c * 3 on every axis; client `lacks` has no rows of
 * class 1 (raw 20). Labels are set from raw values, so each data set indexes its own list. */
static void make_client(fk_dataset *ds, int k, size_t n, int lacks)
{
    fk_rng r;
    fk_rng_init(&r, 77, (uint64_t)k);
    double *raw = malloc(n * sizeof *raw);
    assert_non_null(raw);
    assert_int_equal(fk_dataset_init(ds, n, D, 1), FK_OK);
    for (size_t i = 0; i < n; i++) {
        int c = (int)(i % C);
        if (k == lacks && c == 1)
            c = 2;
        raw[i] = RAW[c];
        for (size_t j = 0; j < D; j++)
            fk_mat_set(&ds->X, i, j, 3.0 * c * (j % 2 ? 1 : -1) + fk_rng_normal(&r));
    }
    fk_err err;
    assert_int_equal(fk_dataset_set_labels(ds, raw, &err), FK_OK);
    char nm[16];
    snprintf(nm, sizeof nm, "site%d", k);
    fk_dataset_set_name(ds, nm);
    free(raw);
}

static void parse_forms(void **state)
{
    (void)state;
    fk_params p;
    fk_classes c;
    fk_err err;
    set_keys(&p, (const char *const[]){"classes", "30, 10 20", NULL});
    assert_int_equal(fk_classes_parse(&c, &p, 0, 100, FK_CLASSES_COUNT_OWN, &err), FK_OK);
    assert_int_equal(c.n, 3);
    assert_true(c.listed && c.v[0] == 10 && c.v[1] == 20 && c.v[2] == 30);
    assert_int_equal(fk_classes_find(&c, 20), 1);
    assert_int_equal(fk_classes_find(&c, 15), -1);
    fk_classes_close(&c);
    fk_params_close(&p);
    set_keys(&p, (const char *const[]){"classes", "1..10", NULL});
    assert_int_equal(fk_classes_parse(&c, &p, 0, 100, FK_CLASSES_COUNT_OWN, &err), FK_OK);
    assert_true(c.n == 10 && c.listed && c.v[0] == 1 && c.v[9] == 10);
    fk_classes_close(&c);
    fk_params_close(&p);
    set_keys(&p, (const char *const[]){"classes", "4", NULL});
    assert_int_equal(fk_classes_parse(&c, &p, 0, 100, FK_CLASSES_COUNT_RANGE, &err), FK_OK);
    assert_true(c.n == 4 && c.listed && c.v[3] == 3);
    fk_classes_close(&c);
    assert_int_equal(fk_classes_parse(&c, &p, 0, 100, FK_CLASSES_COUNT_OWN, &err), FK_OK);
    assert_true(c.n == 4 && !c.listed && !c.v);
    fk_classes_close(&c);
    fk_params_close(&p);
    const char *bad[] = {"1,2,2", "1,x", "1", "5..5", "1..1000", "0..", NULL};
    for (int i = 0; bad[i]; i++) {
        set_keys(&p, (const char *const[]){"classes", bad[i], NULL});
        assert_int_not_equal(fk_classes_parse(&c, &p, 0, 100, FK_CLASSES_COUNT_OWN, &err), FK_OK);
        assert_non_null(strstr(err.msg, "classes"));
        assert_null(c.v);
        fk_params_close(&p);
    }
}

/* A row whose label is not in the job's list is refused with its value and row. */
static void label_outside_list(void **state)
{
    (void)state;
    fk_dataset ds;
    make_client(&ds, 0, 30, -1);
    ds.y_raw[16] = 99; /* stays indexed in the data set; the job's list lacks it */
    fk_params p;
    set_keys(&p, (const char *const[]){"classes", "10,20,30", NULL});
    fk_classes c;
    fk_err err;
    int *y = NULL;
    assert_int_equal(fk_classes_parse(&c, &p, 0, 100, FK_CLASSES_COUNT_OWN, &err), FK_OK);
    assert_int_equal(fk_classes_index(&c, &ds, "test", &y, &err), FK_EINVAL);
    assert_null(y);
    assert_non_null(strstr(err.msg, "row 17 (1-based) has label 99"));
    assert_non_null(strstr(err.msg, "'classes'"));
    fk_classes_close(&c);
    fk_params_close(&p);
    /* through the job types' client_init */
    set_keys(&p, (const char *const[]){"classes", "10,20,30", "N", "20", "m", "5", "hidden", "none",
                                       NULL});
    void *cli = NULL;
    assert_int_equal(fk_method_fedrf_tca.client_init(&cli, &p, &ds, 0, 2, 1, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "label 99"));
    assert_int_equal(fk_method_dica.client_init(&cli, &p, &ds, 0, 2, 1, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "label 99"));
    assert_null(cli);
    fk_params_close(&p);
    fk_dataset_close(&ds);
}

/* Two copies of the K clients (site 0 lacks raw label 20): ds with each data set's own class
 * list, al the same rows aligned (re-indexed against RAW, or with ids relabelled 0, 1, 2), and
 * a job's keys for each (the caller sets `classes`). */
typedef struct pair {
    fk_dataset ds[K], al[K];
    fk_params pl, pa;
    fk_bundle ml, ma;
} pair;

static void pair_open(pair *t, size_t n, int ids, const char *const *kv)
{
    fk_err err;
    for (int k = 0; k < K; k++) {
        make_client(&t->ds[k], k, n, 0);
        make_client(&t->al[k], k, n, 0);
        if (ids) {
            for (size_t i = 0; i < n; i++)
                t->al[k].y_raw[i] = t->al[k].y_raw[i] / 10 - 1;
            assert_int_equal(fk_dataset_set_labels(&t->al[k], t->al[k].y_raw, &err), FK_OK);
        } else {
            assert_int_equal(fk_dataset_use_classes(&t->al[k], RAW, C, &err), FK_OK);
        }
    }
    assert_int_equal(t->ds[0].n_classes, 2);
    set_keys(&t->pl, kv);
    set_keys(&t->pa, kv);
    fk_bundle_init(&t->ml);
    fk_bundle_init(&t->ma);
}

static void pair_close(pair *t)
{
    fk_bundle_close(&t->ml);
    fk_bundle_close(&t->ma);
    fk_params_close(&t->pl);
    fk_params_close(&t->pa);
    for (int k = 0; k < K; k++) {
        fk_dataset_close(&t->ds[k]);
        fk_dataset_close(&t->al[k]);
    }
}

/* Run m on the clients twice: each data set with its own class list and the job's `classes`
 * listing the raw values, and (the aligned computation) every data set re-indexed against
 * the full list with `classes` a count. The models and final reports agree bit for bit. */
static void aligned(const fk_method *m, const char *const *kv, size_t n, int rounds, int scored)
{
    pair t;
    pair_open(&t, n, 0, kv);
    assert_int_equal(fk_params_set(&t.pl, "classes", "10,20,30"), FK_OK);
    assert_int_equal(fk_params_set(&t.pa, "classes", "3"), FK_OK);
    fk_report rl[K], rc[K];
    fk_sim_opts o = {.rounds = rounds, .seed = 3, .final_reports = rl};
    fk_err err;
    assert_int_equal(fk_sim_run(m, &t.pl, t.ds, K, &o, &t.ml, NULL, &err), FK_OK);
    o.final_reports = rc;
    assert_int_equal(fk_sim_run(m, &t.pa, t.al, K, &o, &t.ma, NULL, &err), FK_OK);
    /* a listed job carries its list in the model, so predictions answer raw labels
     * (fk_model_class_list; methods_predict checks the mapping); the count's model has none:
     * add it there to compare the rest bit for bit */
    const fk_tensor *cv = fk_bundle_get(&t.ml, "class_values");
    assert_non_null(cv);
    assert_true(cv->len == 3 && cv->data[0] == 10 && cv->data[1] == 20 && cv->data[2] == 30);
    if (!fk_bundle_get(&t.ma, "class_values"))
        assert_int_equal(fk_bundle_put_vec(&t.ma, "class_values", 3, cv->data), FK_OK);
    assert_bundles_equal(&t.ml, &t.ma);
    for (int k = 0; k < K; k++)
        assert_memory_equal(&rl[k].accuracy, &rc[k].accuracy, sizeof(double));
    /* the site lacking a class is served: it scores like the rest, no collapse */
    if (scored)
        assert_true(rl[0].accuracy > 0.9);
    /* before: a count with per-file lists shifted site 0's classes; now refused, naming the key */
    fk_bundle bad;
    o.final_reports = NULL;
    assert_int_equal(fk_sim_run(m, &t.pa, t.ds, K, &o, &bad, NULL, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "holds 2 of the job's"));
    assert_non_null(strstr(err.msg, "classes = "));
    pair_close(&t);
}

static void fedrf_tca_aligned(void **state)
{
    (void)state;
    aligned(&fk_method_fedrf_tca,
            (const char *const[]){"N", "20", "m", "6", "hidden", "none", "batch", "32", "lr",
                                  "0.05", "tc", "2", NULL},
            60, 6, 0);
}

static void dica_aligned(void **state)
{
    (void)state;
    aligned(&fk_method_dica, (const char *const[]){"R", "40", "m", "2", NULL}, 60, 4, 1);
}

/* dica without `classes`: the clients send their raw labels in phase 0 and index their rows
 * by the union the server sends back, so the model is the aligned computation's (plus the
 * union, "class_values"), and every site scores as well. */
static void dica_union(void **state)
{
    (void)state;
    pair t;
    pair_open(&t, 60, 0, (const char *const[]){"R", "40", "m", "2", NULL});
    fk_report ru[K], ra[K];
    fk_sim_opts o = {.rounds = 4, .seed = 3, .final_reports = ru};
    fk_err err;
    assert_int_equal(fk_sim_run(&fk_method_dica, &t.pl, t.ds, K, &o, &t.ml, NULL, &err), FK_OK);
    o.final_reports = ra;
    assert_int_equal(fk_sim_run(&fk_method_dica, &t.pa, t.al, K, &o, &t.ma, NULL, &err), FK_OK);
    const fk_tensor *cv = fk_bundle_get(&t.ml, "class_values");
    assert_non_null(cv);
    assert_true(cv->len == 3 && cv->data[0] == 10 && cv->data[1] == 20 && cv->data[2] == 30);
    /* the aligned data sets all hold the full list, so their union is the same */
    assert_bundles_equal(&t.ml, &t.ma);
    for (int k = 0; k < K; k++)
        assert_memory_equal(&ru[k].accuracy, &ra[k].accuracy, sizeof(double));
    assert_true(ru[0].accuracy > 0.9);
    pair_close(&t);
}

/* kahm: a singleton class block and a block of 30 identical rows are left out of that
 * client's answer; its other classes are served and the job completes. */
static void kahm_left_out(void **state)
{
    (void)state;
    fk_dataset ds[2];
    make_client(&ds[0], 0, 90, -1);
    make_client(&ds[1], 1, 61, -1);
    /* client 0: its 30 rows of raw class 20 all equal; client 1: one row of a fourth class */
    for (size_t i = 0; i < 90; i++)
        if (ds[0].y_raw[i] == 20)
            for (size_t j = 0; j < D; j++)
                fk_mat_set(&ds[0].X, i, j, 0.25);
    double *raw = malloc(90 * sizeof *raw);
    assert_non_null(raw);
    for (size_t i = 0; i < 61; i++)
        raw[i] = i == 60 ? 0 : ds[1].y_raw[i] / 10; /* class ids 1, 2, 3 and one row of 0 */
    fk_err err;
    assert_int_equal(fk_dataset_set_labels(&ds[1], raw, &err), FK_OK);
    for (size_t i = 0; i < 90; i++)
        raw[i] = ds[0].y_raw[i] / 10;
    assert_int_equal(fk_dataset_set_labels(&ds[0], raw, &err), FK_OK);
    free(raw);
    fk_params p;
    set_keys(&p, (const char *const[]){"classes", "4", "holdout", "0", "scale", "0.1", NULL});
    fk_bundle model;
    fk_sim_opts o = {.rounds = 1, .seed = 2};
    fk_sim_round last;
    assert_int_equal(fk_sim_run(&fk_method_kahm, &p, ds, 2, &o, &model, &last, &err), FK_OK);
    assert_int_equal(last.participants, 2);
    assert_int_equal(last.refused, 0);
    const fk_tensor *h = fk_bundle_get(&model, "holders");
    assert_non_null(h);
    assert_int_equal(h->len, 8);
    /* client 0 holds 1 and 3 (2 left out: identical rows); client 1 holds 1, 2, 3 (0 left
     * out: one sample) */
    assert_true(h->data[0] == 0 && h->data[1] > 0 && h->data[2] == 0 && h->data[3] > 0);
    assert_true(h->data[4] == 0 && h->data[5] > 0 && h->data[6] > 0 && h->data[7] > 0);
    /* the model names them; a checkpoint keeps them */
    const fk_tensor *lo = fk_bundle_get(&model, "left_out");
    assert_non_null(lo);
    assert_int_equal(lo->len, 8);
    for (int i = 0; i < 8; i++)
        assert_true(lo->data[i] == (i == 2 || i == 4));
    void *srv;
    fk_bundle again;
    fk_bundle_init(&again);
    assert_int_equal(fk_method_kahm.server_init(&srv, &p, 2, 2, &err), FK_OK);
    assert_int_equal(fk_method_kahm.load(srv, &model, &err), FK_OK);
    assert_int_equal(fk_method_kahm.model(srv, &again, &err), FK_OK);
    assert_bundles_equal(&model, &again);
    fk_bundle_close(&again);
    /* an update that says it left out a class it holds is refused */
    fk_update u = {.client = 0};
    fk_bundle_init(&u.msg);
    assert_int_equal(fk_bundle_put_vec(&u.msg, "held", 1, (double[]){1}), FK_OK);
    assert_int_equal(fk_bundle_put_vec(&u.msg, "counts", 1, (double[]){30}), FK_OK);
    assert_int_equal(fk_bundle_put_vec(&u.msg, "parts", 1, (double[]){1}), FK_OK);
    assert_int_equal(fk_bundle_put_scalar(&u.msg, "dim", D), FK_OK);
    assert_int_equal(fk_bundle_put_vec(&u.msg, "left_out", 1, (double[]){1}), FK_OK);
    fk_method_kahm.server_close(srv);
    assert_int_equal(fk_method_kahm.server_init(&srv, &p, 2, 2, &err), FK_OK);
    assert_int_equal(fk_method_kahm.check_update(srv, 1, 0, &u, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "'left_out'"));
    fk_bundle_get(&u.msg, "left_out")->data[0] = 2;
    assert_int_equal(fk_method_kahm.check_update(srv, 1, 0, &u, &err), FK_OK);
    fk_bundle_close(&u.msg);
    fk_method_kahm.server_close(srv);
    fk_bundle_close(&model);
    fk_params_close(&p);
    fk_dataset_close(&ds[0]);
    fk_dataset_close(&ds[1]);
}

/* kahm with `classes` listing raw values 10, 20, 30 (site 0 lacks 20): the model of the
 * aligned computation (labels 0, 1, 2 and classes = 3) plus "class_values", and predictions
 * in raw labels. */
static void kahm_list(void **state)
{
    (void)state;
    pair t;
    pair_open(&t, 60, 1,
              (const char *const[]){"holdout", "0", "scale", "0.1", "upload_models", "1",
                                    "local.allow_model_upload", "1", NULL});
    assert_int_equal(fk_params_set(&t.pl, "classes", "10,20,30"), FK_OK);
    assert_int_equal(fk_params_set(&t.pa, "classes", "3"), FK_OK);
    fk_sim_opts o = {.rounds = 1, .seed = 4};
    fk_err err;
    assert_int_equal(fk_sim_run(&fk_method_kahm, &t.pl, t.ds, K, &o, &t.ml, NULL, &err), FK_OK);
    assert_int_equal(fk_sim_run(&fk_method_kahm, &t.pa, t.al, K, &o, &t.ma, NULL, &err), FK_OK);
    assert_int_equal(t.ml.count, t.ma.count + 1);
    for (size_t i = 0; i < t.ma.count; i++) {
        const fk_tensor *x = fk_bundle_get(&t.ml, t.ma.items[i].name);
        assert_non_null(x);
        assert_int_equal(x->len, t.ma.items[i].len);
        assert_memory_equal(x->data, t.ma.items[i].data, x->len * sizeof(double));
    }
    const fk_tensor *cv = fk_bundle_get(&t.ml, "class_values");
    assert_non_null(cv);
    assert_true(cv->len == 3 && cv->data[0] == 10 && cv->data[2] == 30);
    fk_bundle q, pl_out, pa_out;
    fk_bundle_init(&q);
    fk_bundle_init(&pl_out);
    fk_bundle_init(&pa_out);
    assert_int_equal(fk_bundle_put(&q, "X", 2, (uint64_t[]){60, D}, t.ds[1].X.data), FK_OK);
    assert_int_equal(fk_method_kahm.predict(&t.ml, &q, &pl_out, &err), FK_OK);
    assert_int_equal(fk_method_kahm.predict(&t.ma, &q, &pa_out, &err), FK_OK);
    const fk_tensor *a = fk_bundle_get(&pl_out, "labels"), *b = fk_bundle_get(&pa_out, "labels");
    size_t hit = 0;
    for (size_t i = 0; i < 60; i++) {
        assert_true(a->data[i] == 10 * (b->data[i] + 1));
        hit += a->data[i] == t.ds[1].y_raw[i];
    }
    assert_true(hit > 54); /* site 0's lack of class 20 costs nothing here */
    fk_bundle_close(&q);
    fk_bundle_close(&pl_out);
    fk_bundle_close(&pa_out);
    pair_close(&t);
}

/* kahm on raw features far beyond tanh's range: with the default scale the task is refused
 * with the numbers and the key to set; a scale the job chose is taken (and logged). */
static void kahm_scale(void **state)
{
    (void)state;
    fk_dataset ds;
    make_client(&ds, 0, 60, -1);
    for (size_t i = 0; i < ds.X.rows * D; i++)
        ds.X.data[i] = 50 + 10 * ds.X.data[i]; /* like pen-digits' raw 0..100 */
    for (size_t i = 0; i < 60; i++)
        ds.y_raw[i] /= 10;
    fk_err err;
    assert_int_equal(fk_dataset_set_labels(&ds, ds.y_raw, &err), FK_OK);
    fk_params p;
    set_keys(&p, (const char *const[]){"classes", "4", NULL});
    fk_bundle model;
    fk_sim_opts o = {.rounds = 1, .seed = 2};
    fk_sim_round last;
    /* fk_sim_run fails with a client's refusal (the daemons count it as that client's
     * error in the job status) */
    assert_int_equal(fk_sim_run(&fk_method_kahm, &p, &ds, 1, &o, &model, &last, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "set the job's scale to about"));
    assert_non_null(strstr(err.msg, "|scale x| > 3"));
    assert_int_equal(fk_params_set(&p, "scale", "0.01"), FK_OK);
    assert_int_equal(fk_sim_run(&fk_method_kahm, &p, &ds, 1, &o, &model, &last, &err), FK_OK);
    assert_int_equal(last.participants, 1);
    fk_bundle_close(&model);
    fk_params_close(&p);
    fk_dataset_close(&ds);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parse_forms),       cmocka_unit_test(label_outside_list),
        cmocka_unit_test(fedrf_tca_aligned), cmocka_unit_test(dica_aligned),
        cmocka_unit_test(dica_union),        cmocka_unit_test(kahm_left_out),
        cmocka_unit_test(kahm_scale),        cmocka_unit_test(kahm_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
