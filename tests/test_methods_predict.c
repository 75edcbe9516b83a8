/* Every job type's predict op against the job's own scoring (issue 34): each family trains
 * through fk_sim_run, then on held-out rows the quality the predictions give (fk_predict_score,
 * the rule of `fedkern model eval` and `job predict`) equals the quality the method's own
 * evaluate op reports for the same rows, computed both ways. Also: the answers' shapes, and
 * one clear error for bad queries (wrong column count, a NaN, an unknown client). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/synth_spec.h"
#include "common/methods/predict.h"
#include "common/methods/sfl/sfl.h"
#include "common/methods/sim.h"
#include "tests/support_sfl.h"

extern const fk_method fk_method_fedgrem, fk_method_fedem, fk_method_local_em, fk_method_local_grem,
    fk_method_tgmm, fk_method_pooled_grem, fk_method_pooled_em, fk_method_fedgrem_mor,
    fk_method_fedem_mor, fk_method_local_em_mor, fk_method_pooled_em_mor, fk_method_fedgmm_mor,
    fk_method_dica, fk_method_udica, fk_method_fedrf_tca, fk_method_sfl;

enum { MAXK = 10 };
static const uint64_t SEED = 7;

/* The rows of ds as queries: X, the targets y when ds has raw values, client k (k >= 0). */
static void queries(const fk_dataset *ds, int k, fk_bundle *q)
{
    fk_bundle_init(q);
    uint64_t sh[2] = {ds->X.rows, ds->X.cols};
    double *x = fk_bundle_add(q, "X", 2, sh);
    assert_true(x || !ds->X.rows);
    for (size_t i = 0; i < ds->X.rows; i++)
        memcpy(x + i * ds->X.cols, fk_mat_row(&ds->X, i), ds->X.cols * sizeof(double));
    if (ds->y_raw)
        assert_int_equal(fk_bundle_put_vec(q, "y", ds->X.rows, ds->y_raw), FK_OK);
    if (k >= 0)
        assert_int_equal(fk_bundle_put_scalar(q, "client", k), FK_OK);
}

static void same(const char *what, const char *method, int k, double job, double pred)
{
    print_message("  %-16s client %d %-8s job %.12g predict %.12g\n", method, k, what, job, pred);
    if (isnan(job)) {
        assert_true(isnan(pred) || !isnan(pred)); /* the job did not measure it */
        return;
    }
    assert_false(isnan(pred));
    assert_true(fabs(job - pred) <= 1e-12 * (1 + fabs(job)));
}

/* Job kv of type m trained on ds[0..K) for rounds by fk_sim_run: *p (closed by the caller)
 * and the final *model. */
static void train_job(const fk_method *m, const char *const *kv, const fk_dataset *ds, int K,
                      int rounds, fk_params *p, fk_bundle *model)
{
    fk_params_init(p);
    assert_int_equal(fk_params_set_all(p, kv), FK_OK);
    fk_sim_opts o = {.rounds = rounds, .seed = SEED};
    fk_err err = {0};
    int rc = fk_sim_run(m, p, ds, K, &o, model, NULL, &err);
    if (rc)
        print_message("%s: %s\n", m->name, err.msg);
    assert_int_equal(rc, FK_OK);
}

/* Train m on train[0..K) with kv, then for every held-out set held[k]: a client k of the job
 * on those rows scores the model (evaluate), and predict (client k named when per_client)
 * scored by fk_predict_score gives the same accuracy / misclust / rmse. Returns through
 * *quality the mean of the first measured metric, for the caller's sanity bound. */
static void check(const fk_method *m, const char *const *kv, fk_dataset *train, fk_dataset *held,
                  int K, int rounds, int per_client, double *quality)
{
    fk_params p;
    fk_bundle model;
    fk_err err = {0};
    int rc;
    train_job(m, kv, train, K, rounds, &p, &model);
    assert_non_null(m->predict);
    double sum = 0;
    int cnt = 0;
    for (int k = 0; k < K; k++) {
        void *cli = NULL;
        rc = m->client_init(&cli, &p, &held[k], k, K, SEED, &err);
        if (rc)
            print_message("%s client %d: %s\n", m->name, k, err.msg);
        assert_int_equal(rc, FK_OK);
        fk_report job;
        fk_report_init(&job);
        assert_int_equal(m->evaluate(cli, &model, &job, &err), FK_OK);
        m->client_close(cli);
        fk_bundle q, res;
        queries(&held[k], per_client ? k : -1, &q);
        fk_bundle_init(&res);
        rc = m->predict(&model, &q, &res, &err);
        if (rc)
            print_message("%s predict: %s\n", m->name, err.msg);
        assert_int_equal(rc, FK_OK);
        const fk_tensor *lab = fk_bundle_get(&res, "labels"), *d = fk_bundle_get(&res, "distances");
        assert_non_null(lab);
        assert_non_null(d);
        assert_int_equal(lab->len, held[k].X.rows);
        assert_int_equal(d->len, held[k].X.rows);
        for (size_t i = 0; i < d->len; i++)
            assert_true(d->data[i] >= 0 || isnan(lab->data[i]));
        fk_report got;
        if (!held[k].y && !held[k].y_raw) { /* nothing to score (an unlabelled target) */
            assert_true(isnan(job.accuracy) && isnan(job.rmse));
            fk_bundle_close(&q);
            fk_bundle_close(&res);
            continue;
        }
        rc = fk_predict_score(&res, &held[k], &got, &err);
        if (rc)
            print_message("%s score: %s\n", m->name, err.msg);
        assert_int_equal(rc, FK_OK);
        int measured = 0;
        if (!isnan(job.rmse)) {
            same("rmse", m->name, k, job.rmse, got.rmse);
            sum += job.rmse, cnt++, measured = 1;
        }
        if (!isnan(job.misclust)) {
            same("misclust", m->name, k, job.misclust, got.misclust);
            same("ari", m->name, k, job.ari, got.ari);
            if (!measured)
                sum += job.accuracy, cnt++;
            measured = 1;
        }
        if (!isnan(job.accuracy)) {
            same("accuracy", m->name, k, job.accuracy, got.accuracy);
            if (!measured)
                sum += job.accuracy, cnt++;
            measured = 1;
        }
        /* a client of a job that scores nothing (fedrf-tca's unlabelled target) is the only
         * excuse; every other held-out client measures something */
        (void)measured;
        fk_bundle_close(&q);
        fk_bundle_close(&res);
    }
    assert_true(cnt > 0);
    *quality = sum / cnt;
    fk_bundle_close(&model);
    fk_params_close(&p);
}

/* Bad queries against a trained model: one clear error each, nothing answered. */
static void bad_queries(const fk_method *m, const fk_bundle *model, size_t p, int K)
{
    fk_err err = {0};
    fk_bundle q, res;
    fk_bundle_init(&res);
    /* one column too many */
    fk_bundle_init(&q);
    double *x = fk_bundle_add(&q, "X", 2, (uint64_t[]){3, p + 1});
    for (size_t i = 0; i < 3 * (p + 1); i++)
        x[i] = 0.1 * (double)i;
    assert_int_equal(m->predict(model, &q, &res, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "columns"));
    assert_null(fk_bundle_get(&res, "labels"));
    fk_bundle_close(&q);
    /* a NaN */
    fk_bundle_init(&q);
    x = fk_bundle_add(&q, "X", 2, (uint64_t[]){3, p});
    for (size_t i = 0; i < 3 * p; i++)
        x[i] = 0.1 * (double)i;
    x[p] = NAN;
    assert_int_equal(m->predict(model, &q, &res, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "row 1"));
    /* no X at all */
    fk_bundle_clear(&q);
    assert_int_equal(fk_bundle_put_scalar(&q, "Y", 1), FK_OK);
    assert_int_equal(m->predict(model, &q, &res, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "'X'"));
    /* a client the job does not have (mixtures name one) */
    if (K > 0) {
        fk_bundle_clear(&q);
        x = fk_bundle_add(&q, "X", 2, (uint64_t[]){1, p});
        memset(x, 0, p * sizeof *x);
        assert_int_equal(fk_bundle_put_scalar(&q, "client", K), FK_OK);
        assert_int_equal(m->predict(model, &q, &res, &err), FK_EINVAL);
        assert_non_null(strstr(err.msg, "client"));
    }
    fk_bundle_close(&q);
    fk_bundle_close(&res);
}

static void load(fk_dataset *ds, int K, const char *fmt, uint64_t seed)
{
    for (int k = 0; k < K; k++) {
        char spec[200];
        snprintf(spec, sizeof spec, fmt, k, (unsigned long long)seed);
        fk_err err;
        int rc = fk_synth_spec_load(&ds[k], spec, &err);
        if (rc)
            print_message("%s: %s\n", spec, err.msg);
        assert_int_equal(rc, FK_OK);
    }
}

static void drop(fk_dataset *ds, int K)
{
    for (int k = 0; k < K; k++)
        fk_dataset_close(&ds[k]);
}

/* FedGrEM and its Gaussian-mixture siblings: the component of each row under client k's
 * mixture, scored after the best matching like the job's rounds. */
static void mixtures_gmm(void **state)
{
    (void)state;
    enum { K = 4 };
    fk_dataset tr[K], te[K];
    const char *fmt = "synthetic/gmm:client=%d,tasks=4,outliers=0,samples=150,seed=%llu";
    load(tr, K, fmt, 1);
    load(te, K, fmt, 2);
    static const char *const kv[] = {"R", "5", "restarts", "2", "align_B", "5", NULL};
    const fk_method *ms[] = {&fk_method_fedgrem,    &fk_method_fedem, &fk_method_local_em,
                             &fk_method_local_grem, &fk_method_tgmm,  &fk_method_pooled_grem};
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) {
        double acc;
        check(ms[i], kv, tr, te, K, 5, 1, &acc);
        print_message("%s: held-out accuracy (1 - misclust) %.4f\n", ms[i]->name, acc);
        assert_true(acc > 0.8);
    }
    static const char *const kvp[] = {"R", "5", "restarts", "2", NULL};
    double acc;
    check(&fk_method_pooled_em, kvp, tr, te, K, 30, 0, &acc);
    print_message("pooled-em: held-out accuracy (1 - misclust) %.4f\n", acc);
    assert_true(acc > 0.8);
    drop(tr, K);
    drop(te, K);
}

/* The mixture-of-regressions types: the fitted value of each row under its component of
 * highest posterior (given its target), the RMSE the job reports. */
static void mixtures_mor(void **state)
{
    (void)state;
    enum { K = 4 };
    fk_dataset tr[K], te[K];
    const char *fmt = "synthetic/mor:client=%d,tasks=4,outliers=0,components=2,dims=3,"
                      "samples=300,seed=%llu";
    load(tr, K, fmt, 1);
    load(te, K, fmt, 2);
    static const char *const kv[] = {"R", "2", "restarts", "3", "align_B", "5", NULL};
    const fk_method *ms[] = {&fk_method_fedgrem_mor, &fk_method_fedem_mor, &fk_method_local_em_mor,
                             &fk_method_fedgmm_mor};
    for (size_t i = 0; i < sizeof ms / sizeof *ms; i++) {
        double rmse;
        check(ms[i], kv, tr, te, K, 5, 1, &rmse);
        print_message("%s: held-out rmse %.4f\n", ms[i]->name, rmse);
        assert_true(isfinite(rmse));
    }
    static const char *const kvp[] = {"R", "2", "restarts", "3", NULL};
    double rmse;
    check(&fk_method_pooled_em_mor, kvp, tr, te, K, 30, 0, &rmse);
    print_message("pooled-em-mor: held-out rmse %.4f\n", rmse);
    /* without targets: the mixture's mean, one value a row, no error */
    fk_bundle model, q, res;
    fk_params p;
    fk_err err;
    train_job(&fk_method_fedgrem_mor, kv, tr, K, 3, &p, &model);
    queries(&te[0], 0, &q);
    assert_int_equal(fk_bundle_put_vec(&q, "y", 0, NULL), FK_OK); /* wrong length */
    fk_bundle_init(&res);
    assert_int_equal(fk_method_fedgrem_mor.predict(&model, &q, &res, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "'y'"));
    fk_bundle_close(&q);
    fk_bundle_init(&q);
    assert_int_equal(fk_bundle_put(&q, "X", 2, (uint64_t[]){te[0].X.rows, 3}, te[0].X.data), FK_OK);
    assert_int_equal(fk_bundle_put_scalar(&q, "client", 1), FK_OK);
    assert_int_equal(fk_method_fedgrem_mor.predict(&model, &q, &res, &err), FK_OK);
    assert_int_equal(fk_bundle_get(&res, "labels")->len, te[0].X.rows);
    /* a per-client model without a client named: one clear error */
    fk_bundle_close(&q);
    fk_bundle_init(&q);
    assert_int_equal(fk_bundle_put(&q, "X", 2, (uint64_t[]){2, 3}, te[0].X.data), FK_OK);
    assert_int_equal(fk_method_fedgrem_mor.predict(&model, &q, &res, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "--client"));
    bad_queries(&fk_method_fedgrem_mor, &model, 3, K);
    fk_bundle_close(&q);
    fk_bundle_close(&res);
    fk_bundle_close(&model);
    fk_params_close(&p);
    drop(tr, K);
    drop(te, K);
}

/* A model with the job's class list by raw value (tensor "class_values", what a job that knows
 * it records) answers raw labels: class index c is list[c]. */
static void raw_class_list(const fk_method *m, const char *const *kv, const fk_dataset *tr,
                           const fk_dataset *te, int K, int rounds, size_t k)
{
    fk_params p;
    fk_bundle model, q, a, b;
    fk_err err;
    double list[8] = {10, 20, 30, 40, 50, 60, 70, 80};
    assert_true(k <= 8);
    train_job(m, kv, tr, K, rounds, &p, &model);
    queries(&te[0], -1, &q);
    fk_bundle_init(&a);
    fk_bundle_init(&b);
    assert_int_equal(m->predict(&model, &q, &a, &err), FK_OK);
    /* the list travels as "class_values" (dica's union of the clients' labels is already
     * there: 0..k-1 here, overwritten in place) */
    const fk_tensor *cv = fk_bundle_get(&model, "class_values");
    if (cv) {
        assert_int_equal(cv->len, k);
        memcpy(cv->data, list, k * sizeof *list);
    } else {
        assert_int_equal(fk_bundle_put_vec(&model, "class_values", k, list), FK_OK);
    }
    assert_int_equal(m->predict(&model, &q, &b, &err), FK_OK);
    const fk_tensor *la = fk_bundle_get(&a, "labels"), *lb = fk_bundle_get(&b, "labels");
    assert_int_equal(la->len, lb->len);
    for (size_t i = 0; i < la->len; i++)
        assert_true(lb->data[i] == 10 * (la->data[i] + 1));
    fk_bundle_close(&q);
    fk_bundle_close(&a);
    fk_bundle_close(&b);
    fk_bundle_close(&model);
    fk_params_close(&p);
}

/* dica and udica: ridge on the learned features, classification and regression, from a model
 * that carries its own random-feature seed (no job config at hand). */
static void dica(void **state)
{
    (void)state;
    enum { K = 4 };
    const fk_method *ms[] = {&fk_method_dica, &fk_method_udica};
    for (int reg = 0; reg < 2; reg++) {
        for (size_t i = 0; i < 2; i++) {
            static const char *const kvc[] = {"R", "100", NULL};
            static const char *const kvr[] = {"R",       "100", "task", "regression",
                                              "sigma_y", "1",   NULL};
            const char *const *kv = reg ? kvr : kvc;
            fk_params p;
            fk_params_init(&p);
            assert_int_equal(fk_params_set_all(&p, kv), FK_OK);
            fk_dataset tr[K], te[K];
            fk_err err;
            memset(tr, 0, sizeof tr);
            memset(te, 0, sizeof te);
            assert_int_equal(ms[i]->sim_data(&p, K, 3, tr, NULL, &err), FK_OK);
            assert_int_equal(ms[i]->sim_data(&p, K, 4, te, NULL, &err), FK_OK);
            double q;
            check(ms[i], kv, tr, te, K, 1, 0, &q);
            print_message("%s %s: held-out %s %.4f\n", ms[i]->name,
                          reg ? "regression" : "classification", reg ? "rmse" : "accuracy", q);
            assert_true(reg ? q < 1.5 : q > 0.5);
            fk_params_close(&p);
            if (!reg && i == 0)
                raw_class_list(ms[i], kv, tr, te, K, 1, 3);
            drop(tr, K);
            drop(te, K);
        }
    }
}

/* fedrf-tca: the target's classifier on the learned features, averaged and voting. */
static void fedrf_tca(void **state)
{
    (void)state;
    enum { K = 4 };
    fk_dataset tr[K], te[K];
    const char *fmt = "synthetic/shift:client=%d,sources=3,seed=%llu"; /* 5 classes, 32 dims */
    /* the shift generator's seed draws the class prototypes too, so rows of another seed are
     * another problem: score on the job's domains, where the target's labels (client 3) were
     * never used for training, as the job itself reports them */
    load(tr, K, fmt, 1);
    load(te, K, fmt, 1);
    for (int voting = 0; voting < 2; voting++) {
        const char *const kv[] = {"N",       "50", "m",      "8",  "hidden", "16",
                                  "batch",   "32", "tc",     "2",  "lr",     "0.1",
                                  "classes", "5",  "rounds", "20", "voting", voting ? "1" : "0",
                                  NULL};
        double acc;
        check(&fk_method_fedrf_tca, kv, tr, te, K, 20, 0, &acc);
        print_message("fedrf-tca%s: held-out accuracy %.4f\n", voting ? " voting" : "", acc);
        assert_true(acc > 0.25); /* 5 classes: chance is 0.2 */
    }
    /* the model alone: wrong width refused */
    fk_params p;
    static const char *const kv[] = {"N",  "50", "m", "8",       "hidden", "16", "batch",
                                     "32", "tc", "2", "classes", "5",      NULL};
    fk_bundle model;
    train_job(&fk_method_fedrf_tca, kv, tr, K, 3, &p, &model);
    bad_queries(&fk_method_fedrf_tca, &model, 32, 0);
    raw_class_list(&fk_method_fedrf_tca, kv, tr, te, K, 3, 5);
    /* a dense-extractor job's model: refused, saying what to do instead */
    {
        fk_bundle q, out;
        fk_bundle_init(&out);
        queries(&te[0], -1, &q);
        assert_int_equal(fk_bundle_put_scalar(&model, "dense", 1), FK_OK);
        fk_err err = {0};
        assert_int_equal(fk_method_fedrf_tca.predict(&model, &q, &out, &err), FK_EINVAL);
        assert_non_null(strstr(err.msg, "dense = 0"));
        assert_non_null(strstr(err.msg, "job status"));
        fk_bundle_close(&q);
        fk_bundle_close(&out);
    }
    fk_bundle_close(&model);
    fk_params_close(&p);
    drop(tr, K);
    drop(te, K);
}

static void put_kv(fk_params *p, const char *const *kv, const char **flat, int *n)
{
    for (int i = 0; kv[i]; i++)
        flat[(*n)++] = kv[i];
    flat[*n] = NULL;
    (void)p;
}

/* sfl: binary (with the clients' preprocessing x <- (x - shift) / scale and raw labels 3 / 8),
 * one-vs-one and regression. */
static void sfl(void **state)
{
    (void)state;
    enum { K = 3 };
    static const char *const base[] = {"raw_sample_upload",
                                       "acknowledged",
                                       "local.allow_raw_upload",
                                       "true",
                                       "width_min",
                                       "1",
                                       "width_max",
                                       "3",
                                       "n_widths",
                                       "3",
                                       NULL};
    fk_err err = {0};
    fk_dataset tr[K], te[K];
    /* binary: E3.1 cells, labels 0/1 -> 8/3 so the raw values matter */
    for (int k = 0; k < K; k++) {
        assert_int_equal(fk_sfl_e31_make(K, k, 40, 11, &tr[k], &err), FK_OK);
        assert_int_equal(fk_sfl_e31_make(K, k, 40, 12, &te[k], &err), FK_OK);
        for (int s = 0; s < 2; s++) {
            fk_dataset *d = s ? &te[k] : &tr[k];
            double *raw = malloc(d->X.rows * sizeof *raw);
            for (size_t i = 0; i < d->X.rows; i++)
                raw[i] = d->y_raw[i] == 1 ? 3 : 8;
            assert_int_equal(fk_dataset_set_labels(d, raw, &err), FK_OK);
            for (size_t i = 0; i < d->X.rows; i++) /* undone by the job's preprocessing */
                for (size_t j = 0; j < d->X.cols; j++)
                    d->X.data[i * d->X.ld + j] = 2 * d->X.data[i * d->X.ld + j] + 0.5;
            free(raw);
        }
    }
    const char *kv[40];
    int n = 0;
    put_kv(NULL, base, kv, &n);
    static const char *const bin[] = {"pos_label", "3", "x_shift", "0.5", "x_scale", "2", NULL};
    put_kv(NULL, bin, kv, &n);
    double q;
    check(&fk_method_sfl, kv, tr, te, K, 1, 0, &q);
    print_message("sfl binary 3 vs rest: held-out accuracy %.4f\n", q);
    assert_true(q > 0.8);
    drop(tr, K);
    drop(te, K);
    /* one-vs-one on three blobs */
    static const double cls[3] = {10, 20, 30};
    for (int k = 0; k < K; k++) {
        assert_int_equal(fk_sfl_blobs_make(cls, 3, K, k, 40, 11, &tr[k], &err), FK_OK);
        assert_int_equal(fk_sfl_blobs_make(cls, 3, K, -1, 60, 12 + (uint64_t)k, &te[k], &err),
                         FK_OK);
    }
    n = 0;
    put_kv(NULL, base, kv, &n);
    static const char *const ovo[] = {"multiclass", "ovo", "classes", "10,20,30", NULL};
    put_kv(NULL, ovo, kv, &n);
    check(&fk_method_sfl, kv, tr, te, K, 1, 0, &q);
    print_message("sfl one-vs-one: held-out accuracy %.4f\n", q);
    assert_true(q > 0.8);
    drop(tr, K);
    drop(te, K);
    /* regression on sine clients */
    fk_test_sfl_sine(tr, K, 40, 0, 6);
    fk_test_sfl_sine(te, K, 40, 0.1, 5.8); /* other rows of the same curve */
    n = 0;
    put_kv(NULL, base, kv, &n);
    static const char *const rg[] = {"mode", "regress",   "eps", "0.01", "width_min",
                                     "0.5",  "width_max", "1.5", NULL};
    put_kv(NULL, rg, kv, &n);
    check(&fk_method_sfl, kv, tr, te, K, 1, 0, &q);
    print_message("sfl regression: held-out rmse %.4f\n", q);
    assert_true(q < 0.3);
    fk_params p;
    fk_bundle model;
    train_job(&fk_method_sfl, kv, tr, K, 1, &p, &model);
    bad_queries(&fk_method_sfl, &model, 1, 0);
    fk_bundle_close(&model);
    fk_params_close(&p);
    drop(tr, K);
    drop(te, K);
}

/* The class list helper: a list by raw value maps indices; a count or a bad list does not. */
static void class_list(void **state)
{
    (void)state;
    fk_bundle b;
    fk_bundle_init(&b);
    assert_null(fk_model_class_list(&b, 3));
    assert_int_equal(fk_bundle_put_scalar(&b, "classes", 3), FK_OK); /* dica's count */
    assert_null(fk_model_class_list(&b, 3));
    assert_int_equal(fk_bundle_put_vec(&b, "classes", 3, (double[]){1, 5, 9}), FK_OK);
    const double *l = fk_model_class_list(&b, 3);
    assert_non_null(l);
    assert_true(fk_model_class_value(l, 2) == 9);
    assert_true(fk_model_class_value(NULL, 2) == 2);
    assert_int_equal(fk_bundle_put_vec(&b, "classes", 3, (double[]){1, 5, 5}), FK_OK);
    assert_null(fk_model_class_list(&b, 3));
    /* seeds travel exactly */
    uint64_t s = 0xfedcba9876543211ULL, back = 0;
    fk_err err;
    assert_int_equal(fk_model_put_seed(&b, "rff_seed", s), FK_OK);
    assert_int_equal(fk_model_get_seed(&b, "rff_seed", &back, &err), FK_OK);
    assert_true(back == s);
    assert_int_equal(fk_model_get_seed(&b, "nope", &back, &err), FK_EFORMAT);
    fk_bundle_close(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(class_list),   cmocka_unit_test(sfl),
        cmocka_unit_test(dica),         cmocka_unit_test(fedrf_tca),
        cmocka_unit_test(mixtures_gmm), cmocka_unit_test(mixtures_mor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
