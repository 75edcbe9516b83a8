/* Job type kahm: simulated runs in both modes, the double opt-in of mode A, checkpoint
 * round trips, and one clear refusal per kind of bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/methods/kahm/kahm_int.h"
#include "common/methods/sim.h"
#include "common/net/codec.h"

enum { K = 4 };

static void set_keys(fk_params *p, const char *const *kv)
{
    fk_params_init(p);
    for (; kv && kv[0]; kv += 2)
        assert_int_equal(fk_params_set(p, kv[0], kv[1]), FK_OK);
}

static void make_clients(const fk_params *p, fk_dataset *ds)
{
    memset(ds, 0, K * sizeof *ds);
    fk_err err;
    assert_int_equal(fk_method_kahm.sim_data(p, K, 7, ds, NULL, &err), FK_OK);
}

static void close_clients(fk_dataset *ds)
{
    for (int i = 0; i < K; i++)
        fk_dataset_close(&ds[i]);
}

static int run(const fk_params *p, fk_dataset *ds, fk_bundle *model, fk_report *fin, fk_err *err)
{
    fk_sim_opts o = {.rounds = 1, .seed = 7, .final_reports = fin};
    return fk_sim_run(&fk_method_kahm, p, ds, K, &o, model, NULL, err);
}

/* Mode B: one round, the model is the holders table only, every client scores well. */
static void sim_mode_b(void **state)
{
    (void)state;
    fk_params p;
    set_keys(&p, (const char *const[]){"classes", "6", "holdout", "0.3", NULL});
    fk_dataset ds[K];
    make_clients(&p, ds);
    fk_bundle model;
    fk_report fin[K];
    fk_err err;
    assert_int_equal(run(&p, ds, &model, fin, &err), FK_OK);
    const fk_tensor *h = fk_bundle_get(&model, "holders");
    assert_non_null(h);
    assert_int_equal(h->shape[0], K);
    assert_int_equal(h->shape[1], 6);
    for (int k = 0; k < K; k++) {
        int held = 0;
        for (int c = 0; c < 6; c++)
            held += h->data[k * 6 + c] > 0;
        assert_int_equal(held, 3);
        assert_true(fin[k].accuracy > 0.9);
    }
    assert_null(fk_bundle_get(&model, "c0.m0.0.M")); /* nothing of the models left the client */
    fk_bundle_close(&model);
    close_clients(ds);
    fk_params_close(&p);
}

/* Mode A needs both the job's upload_models = 1 and the client's own consent. */
static void mode_a_needs_consent(void **state)
{
    (void)state;
    fk_params p;
    set_keys(&p, (const char *const[]){"classes", "6", "upload_models", "1", NULL});
    fk_dataset ds[K];
    make_clients(&p, ds);
    fk_bundle model;
    fk_report fin[K];
    fk_err err;
    assert_int_equal(run(&p, ds, &model, fin, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "does not allow it"));
    assert_non_null(strstr(err.msg, "allow_model_upload = true in the [local] section"));
    /* consent without the job asking: nothing is uploaded */
    fk_params_close(&p);
    set_keys(&p, (const char *const[]){"classes", "6", "local.allow_model_upload", "1", NULL});
    assert_int_equal(run(&p, ds, &model, fin, &err), FK_OK);
    assert_null(fk_bundle_get(&model, "c0.m0.0.M"));
    fk_bundle_close(&model);
    /* both: the models are at the server and the global classifier (63) scores */
    fk_params_close(&p);
    set_keys(&p, (const char *const[]){"classes", "6", "upload_models", "1",
                                       "local.allow_model_upload", "1", NULL});
    assert_int_equal(run(&p, ds, &model, fin, &err), FK_OK);
    assert_non_null(fk_bundle_get(&model, "c0.m0.0.M"));
    assert_non_null(fk_bundle_get(&model, "c3.m2.0.Xw"));
    for (int k = 0; k < K; k++)
        assert_true(fin[k].accuracy > 0.85);
    fk_bundle_close(&model);
    close_clients(ds);
    fk_params_close(&p);
}

/* One client's update for a job with these keys (mode A when upload is 1). */
static void client_update(const fk_params *p, const fk_dataset *ds, int client, int upload,
                          fk_bundle *up)
{
    void *cli;
    fk_err err;
    assert_int_equal(fk_method_kahm.client_init(&cli, p, ds, client, K, 7, &err), FK_OK);
    fk_bundle task;
    fk_bundle_init(&task);
    assert_int_equal(fk_bundle_put_scalar(&task, "upload", upload), FK_OK);
    fk_bundle_init(up);
    fk_report rep;
    fk_report_init(&rep);
    assert_int_equal(fk_method_kahm.local_step(cli, &task, up, &rep, &err), FK_OK);
    fk_bundle_close(&task);
    fk_method_kahm.client_close(cli);
}

static int check(void *srv, fk_bundle *msg, int client, fk_err *err)
{
    fk_update u = {.client = client, .msg = *msg};
    return fk_method_kahm.check_update(srv, 1, 0, &u, err);
}

/* The server refuses, with one message each: a class id outside the job's classes,
 * NaN in an uploaded model, sizes that disagree with the class list, models sent to a
 * mode-B job, an upload without the consent flag, a wrong dimension. */
static void check_update_refusals(void **state)
{
    (void)state;
    fk_params pa, pb;
    set_keys(&pa, (const char *const[]){"classes", "6", "upload_models", "1",
                                        "local.allow_model_upload", "1", "dim", "16", NULL});
    set_keys(&pb, (const char *const[]){"classes", "6", "dim", "16", NULL});
    fk_dataset ds[K];
    make_clients(&pa, ds);
    void *sa, *sb;
    fk_err err;
    assert_int_equal(fk_method_kahm.server_init(&sa, &pa, K, 7, &err), FK_OK);
    assert_int_equal(fk_method_kahm.server_init(&sb, &pb, K, 7, &err), FK_OK);
    fk_bundle up, b2;
    client_update(&pa, &ds[1], 1, 1, &up);
    assert_int_equal(check(sa, &up, 1, &err), FK_OK);
    /* models where only the class list belongs */
    assert_int_equal(check(sb, &up, 1, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "upload_models = 0"));
    /* class id outside [0, C) */
    fk_bundle_init(&b2);
    assert_int_equal(fk_bundle_copy(&b2, &up), FK_OK);
    ((fk_tensor *)fk_bundle_get(&b2, "held"))->data[2] = 6;
    assert_int_equal(check(sa, &b2, 1, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "outside the job's classes"));
    /* NaN in a model */
    fk_bundle_close(&b2);
    assert_int_equal(fk_bundle_copy(&b2, &up), FK_OK);
    ((fk_tensor *)fk_bundle_get(&b2, "m1.0.M"))->data[5] = NAN;
    assert_int_equal(check(sa, &b2, 1, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "m1.0.M"));
    assert_non_null(strstr(err.msg, "finite"));
    /* sizes that disagree with the class list */
    fk_bundle_close(&b2);
    assert_int_equal(fk_bundle_copy(&b2, &up), FK_OK);
    ((fk_tensor *)fk_bundle_get(&b2, "counts"))->data[0] += 1;
    assert_int_equal(check(sa, &b2, 1, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "hold"));
    /* a truncated model tensor */
    fk_bundle_close(&b2);
    assert_int_equal(fk_bundle_copy(&b2, &up), FK_OK);
    ((fk_tensor *)fk_bundle_get(&b2, "m0.0.b"))->shape[0] -= 1;
    assert_int_equal(check(sa, &b2, 1, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "m0.0.b"));
    /* no consent flag */
    fk_bundle_close(&b2);
    assert_int_equal(fk_bundle_copy(&b2, &up), FK_OK);
    ((fk_tensor *)fk_bundle_get(&b2, "allowed"))->data[0] = 0;
    assert_int_equal(check(sa, &b2, 1, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "consent"));
    /* dimension other than the job's */
    fk_bundle_close(&b2);
    client_update(&pb, &ds[2], 2, 0, &b2);
    assert_int_equal(check(sb, &b2, 2, &err), FK_OK);
    ((fk_tensor *)fk_bundle_get(&b2, "dim"))->data[0] = 17;
    assert_int_equal(check(sb, &b2, 2, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "dim"));
    fk_bundle_close(&b2);
    fk_bundle_close(&up);
    fk_method_kahm.server_close(sa);
    fk_method_kahm.server_close(sb);
    close_clients(ds);
    fk_params_close(&pa);
    fk_params_close(&pb);
}

/* Client-side refusals: a label outside the job's classes, a class with one sample,
 * NaN in the data. */
static void client_refusals(void **state)
{
    (void)state;
    fk_params p;
    set_keys(&p, (const char *const[]){"classes", "3", "holdout", "0", NULL});
    fk_dataset d;
    assert_int_equal(fk_dataset_init(&d, 6, 4, 1), FK_OK);
    for (int i = 0; i < 24; i++)
        d.X.data[i] = sin(1.0 + i * i);
    double raw[6] = {0, 0, 0, 1, 1, 5};
    fk_err err;
    assert_int_equal(fk_dataset_set_labels(&d, raw, &err), FK_OK);
    void *cli;
    fk_bundle task, up;
    fk_bundle_init(&task);
    fk_bundle_init(&up);
    assert_int_equal(fk_bundle_put_scalar(&task, "upload", 0), FK_OK);
    fk_report rep;
    assert_int_equal(fk_method_kahm.client_init(&cli, &p, &d, 0, 1, 1, &err), FK_OK);
    assert_int_equal(fk_method_kahm.local_step(cli, &task, &up, &rep, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "row 6 (1-based) has label 5, which is not one of the job's classes"));
    fk_method_kahm.client_close(cli);
    fk_dataset_close(&d);
    double raw2[6] = {0, 0, 0, 1, 1, 2}; /* class 2 has one sample */
    assert_int_equal(fk_dataset_init(&d, 6, 4, 1), FK_OK);
    for (int i = 0; i < 24; i++)
        d.X.data[i] = sin(1.0 + i * i);
    assert_int_equal(fk_dataset_set_labels(&d, raw2, &err), FK_OK);
    /* the singleton class block is left out of the answer, the other classes are served */
    assert_int_equal(fk_method_kahm.client_init(&cli, &p, &d, 0, 1, 1, &err), FK_OK);
    assert_int_equal(fk_method_kahm.local_step(cli, &task, &up, &rep, &err), FK_OK);
    const fk_tensor *held = fk_bundle_get(&up, "held"), *lo = fk_bundle_get(&up, "left_out");
    assert_non_null(held);
    assert_non_null(lo);
    assert_int_equal(held->len, 2);
    assert_true(held->data[0] == 0 && held->data[1] == 1);
    assert_int_equal(lo->len, 1);
    assert_true(lo->data[0] == 2);
    fk_bundle_close(&up);
    fk_bundle_init(&up);
    fk_method_kahm.client_close(cli);
    d.X.data[3] = NAN;
    double raw3[6] = {0, 0, 0, 1, 1, 1};
    assert_int_equal(fk_dataset_set_labels(&d, raw3, &err), FK_OK);
    assert_int_equal(fk_method_kahm.client_init(&cli, &p, &d, 0, 1, 1, &err), FK_OK);
    assert_int_equal(fk_method_kahm.local_step(cli, &task, &up, &rep, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "finite"));
    fk_method_kahm.client_close(cli);
    fk_dataset_close(&d);
    fk_bundle_close(&task);
    fk_bundle_close(&up);
    fk_params_close(&p);
}

/* Checkpoints: a server restored from its save gives the same model; a client restored
 * from its save scores the same; a corrupt checkpoint is refused and leaves the state. */
static void checkpoint_round_trip(void **state)
{
    (void)state;
    fk_params p;
    set_keys(&p, (const char *const[]){"classes", "6", "upload_models", "1",
                                       "local.allow_model_upload", "1", NULL});
    fk_dataset ds[K];
    make_clients(&p, ds);
    void *srv, *srv2, *cli[K];
    fk_err err;
    assert_int_equal(fk_method_kahm.server_init(&srv, &p, K, 7, &err), FK_OK);
    fk_update ups[K];
    fk_bundle task;
    fk_bundle_init(&task);
    assert_int_equal(fk_method_kahm.task(srv, 1, 0, 0, &task, &err), FK_OK);
    for (int k = 0; k < K; k++) {
        assert_int_equal(fk_method_kahm.client_init(&cli[k], &p, &ds[k], k, K, 7, &err), FK_OK);
        ups[k].client = k;
        fk_bundle_init(&ups[k].msg);
        assert_int_equal(fk_method_kahm.local_step(cli[k], &task, &ups[k].msg, &ups[k].report,
                                                   &err), FK_OK);
        assert_int_equal(fk_method_kahm.check_update(srv, 1, 0, &ups[k], &err), FK_OK);
    }
    int done = 0;
    assert_int_equal(fk_method_kahm.aggregate(srv, 1, 0, ups, K - 1, &done, &err), FK_OK);
    assert_int_equal(done, 1);
    fk_bundle s1, m1, m2, c1, bad;
    fk_bundle_init(&s1);
    fk_bundle_init(&m1);
    fk_bundle_init(&m2);
    fk_bundle_init(&c1);
    fk_bundle_init(&bad);
    assert_int_equal(fk_method_kahm.save(srv, &s1, &err), FK_OK);
    assert_int_equal(fk_method_kahm.model(srv, &m1, &err), FK_OK);
    assert_int_equal(fk_method_kahm.server_init(&srv2, &p, K, 7, &err), FK_OK);
    /* corrupt: a NaN in one model; refused, nothing kept */
    assert_int_equal(fk_bundle_copy(&bad, &s1), FK_OK);
    ((fk_tensor *)fk_bundle_get(&bad, "c1.m0.0.Xw"))->data[0] = NAN;
    assert_int_equal(fk_method_kahm.load(srv2, &bad, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "c1.m0.0.Xw"));
    assert_int_equal(fk_method_kahm.load(srv2, &s1, &err), FK_OK);
    assert_int_equal(fk_method_kahm.model(srv2, &m2, &err), FK_OK);
    assert_int_equal(m1.count, m2.count);
    for (size_t i = 0; i < m1.count; i++) {
        const fk_tensor *t = fk_bundle_get(&m2, m1.items[i].name);
        assert_non_null(t);
        assert_int_equal(t->len, m1.items[i].len);
        assert_memory_equal(t->data, m1.items[i].data, t->len * sizeof(double));
    }
    /* client 3 never reached the server: its classes are absent (Remark 11) */
    assert_null(fk_bundle_get(&m2, "c3.held"));
    assert_true(fk_bundle_get(&m2, "holders")->data[3 * 6] == -1);
    /* client checkpoint */
    fk_report r1, r2;
    fk_report_init(&r1);
    fk_report_init(&r2);
    assert_int_equal(fk_method_kahm.evaluate(cli[0], &m2, &r1, &err), FK_OK);
    assert_int_equal(fk_method_kahm.client_save(cli[0], &c1, &err), FK_OK);
    void *cl2;
    assert_int_equal(fk_method_kahm.client_init(&cl2, &p, &ds[0], 0, K, 7, &err), FK_OK);
    assert_int_equal(fk_method_kahm.client_load(cl2, &c1, &err), FK_OK);
    assert_int_equal(fk_method_kahm.evaluate(cl2, &m2, &r2, &err), FK_OK);
    assert_true(r1.accuracy == r2.accuracy && r1.model_error == r2.model_error && r1.accuracy > 0.8);
    fk_method_kahm.client_close(cl2);
    for (int k = 0; k < K; k++) {
        fk_method_kahm.client_close(cli[k]);
        fk_bundle_close(&ups[k].msg);
    }
    fk_bundle_close(&task);
    fk_bundle_close(&s1);
    fk_bundle_close(&m1);
    fk_bundle_close(&m2);
    fk_bundle_close(&c1);
    fk_bundle_close(&bad);
    fk_method_kahm.server_close(srv);
    fk_method_kahm.server_close(srv2);
    close_clients(ds);
    fk_params_close(&p);
}


/* Message size (spec §8.2): a mode-A update carries per KAHM N(p + n + 1) + np + n^2 + 9
 * values (L is sent square), plus the class list (3 per class), dim and the consent flag;
 * the wire adds under 1 % to 8 bytes a value. A mode-B update carries 3 per class + 1. */
static void message_size_matches_spec(void **state)
{
    (void)state;
    fk_params p;
    set_keys(&p, (const char *const[]){"classes", "6", "holdout", "0",
                                       "local.allow_model_upload", "1", NULL});
    fk_dataset ds[K];
    make_clients(&p, ds);
    fk_bundle a, b;
    client_update(&p, &ds[0], 0, 1, &a);
    client_update(&p, &ds[0], 0, 0, &b);
    const fk_tensor *h = fk_bundle_get(&a, "held"), *parts = fk_bundle_get(&a, "parts");
    size_t want = 3 * h->len + 2;
    for (size_t c = 0; c < h->len; c++)
        for (int q = 0; q < (int)parts->data[c]; q++) {
            char nm[48];
            snprintf(nm, sizeof nm, "m%zu.%d.meta", c, q);
            const double *m = fk_bundle_get(&a, nm)->data;
            size_t N = (size_t)m[2], P = (size_t)m[3], n = (size_t)m[4];
            assert_int_equal(P, 16);
            want += N * (P + n + 1) + n * P + n * n + 9;
        }
    assert_int_equal(fk_bundle_values(&a), want);
    assert_int_equal(fk_bundle_values(&b), 3 * h->len + 1);
    size_t wire = 0;
    fk_err err;
    assert_int_equal(fk_codec_bundle_size(&a, FK_DTYPE_F64, &wire, &err), FK_OK);
    assert_true(wire >= 8 * want && wire <= 8 * want + 8 * want / 100 + 512);
    fk_bundle_close(&a);
    fk_bundle_close(&b);
    close_clients(ds);
    fk_params_close(&p);
}

/* The predict op: on a mode-A model it answers every query, classifies the clients' data
 * well and names the scored classes; it refuses a mode-B model, queries of another
 * dimension and non-finite queries, each with its reason. */
static void predict_op(void **state)
{
    (void)state;
    fk_params p;
    set_keys(&p, (const char *const[]){"classes", "6", "upload_models", "1",
                                       "local.allow_model_upload", "1", NULL});
    fk_dataset ds[K];
    make_clients(&p, ds);
    fk_bundle model, q, res;
    fk_report fin[K];
    fk_err err;
    assert_int_equal(run(&p, ds, &model, fin, &err), FK_OK);
    fk_bundle_init(&q);
    fk_bundle_init(&res);
    const fk_dataset *d = &ds[2];
    assert_int_equal(fk_bundle_put(&q, "X", 2, (uint64_t[]){d->X.rows, d->X.cols}, d->X.data),
                     FK_OK);
    assert_int_equal(fk_method_kahm.predict(&model, &q, &res, &err), FK_OK);
    const fk_tensor *l = fk_bundle_get(&res, "labels"), *g = fk_bundle_get(&res, "distances"),
                    *sc = fk_bundle_get(&res, "scored_classes");
    assert_non_null(l);
    assert_non_null(g);
    assert_non_null(sc);
    assert_int_equal(l->len, d->X.rows);
    size_t hit = 0;
    for (size_t i = 0; i < d->X.rows; i++) {
        hit += l->data[i] == d->classes[d->y[i]];
        assert_true(g->data[i] >= 0 && isfinite(g->data[i]));
    }
    assert_true(hit > 0.9 * d->X.rows);
    for (int c = 0; c < 6; c++)
        assert_true(sc->data[c] == 1);
    assert_int_equal(fk_bundle_get(&res, "unscored_classes")->len, 0);
    /* another dimension */
    fk_bundle_close(&res);
    fk_bundle_close(&q);
    fk_bundle_init(&q);
    fk_bundle_init(&res);
    assert_int_equal(fk_bundle_put(&q, "X", 2, (uint64_t[]){2, 8}, d->X.data), FK_OK);
    assert_int_equal(fk_method_kahm.predict(&model, &q, &res, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "dimension"));
    /* NaN */
    fk_bundle_close(&q);
    fk_bundle_init(&q);
    double *x = fk_bundle_add(&q, "X", 2, (uint64_t[]){1, d->X.cols});
    x[3] = NAN;
    assert_int_equal(fk_method_kahm.predict(&model, &q, &res, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "finite"));
    fk_bundle_close(&model);
    /* mode B: the models are not at the server */
    fk_params_close(&p);
    set_keys(&p, (const char *const[]){"classes", "6", NULL});
    assert_int_equal(run(&p, ds, &model, fin, &err), FK_OK);
    x[3] = 0;
    assert_int_equal(fk_method_kahm.predict(&model, &q, &res, &err), FK_ESTATE);
    assert_non_null(strstr(err.msg, "upload_models = 0"));
    for (int k = 0; k < K; k++) /* the server asks every client: each holds classes */
        assert_int_equal(fk_method_kahm.holds_models(&model, k), 1);
    assert_int_equal(fk_method_kahm.holds_models(&model, K), 0);
    fk_bundle_close(&model);
    fk_bundle_close(&q);
    fk_bundle_close(&res);
    close_clients(ds);
    fk_params_close(&p);
}

/* Eq. (63) in process, the oracle of mode-B serving: the minimum over the given clients'
 * own fitted models (their checkpoints, decoded) of each class distance, then argmin. */
static void oracle63(void **cli, const int *who, int n_who, int C, const double *T, size_t nt,
                     size_t p, int *lab, double *dmin)
{
    double *D = malloc(nt * (size_t)C * sizeof(double));
    assert_non_null(D);
    for (size_t i = 0; i < nt * (size_t)C; i++)
        D[i] = INFINITY;
    fk_err err;
    for (int w = 0; w < n_who; w++) {
        fk_bundle b;
        fk_bundle_init(&b);
        assert_int_equal(fk_method_kahm.client_save(cli[who[w]], &b, &err), FK_OK);
        fk_kahm_set s;
        assert_int_equal(fk__kahm_decode(&b, "", C, (int)p, 1, &s, NULL, &err), FK_OK);
        assert_int_equal(fk_kahm_set_dist(&s, T, nt, p, D, 1, &err), FK_OK);
        fk_kahm_set_close(&s);
        fk_bundle_close(&b);
    }
    fk_kahm_argmin(D, nt, C, lab, dmin);
    free(D);
}

/* Combine the answers of the clients in who (each sent through the wire codec and checked
 * first, as the server takes them) and compare with the in-process eq. (63) bit for bit. */
static void serve_and_compare(const fk_bundle *model, const fk_bundle *q, void **cli,
                              const int *who, int n_who, int C, fk_bundle *res)
{
    const fk_tensor *X = fk_bundle_get(q, "X");
    size_t nt = X->shape[0], p = X->shape[1];
    fk_update ans[K];
    fk_err err;
    for (int w = 0; w < n_who; w++) {
        fk_bundle a;
        fk_bundle_init(&a);
        assert_int_equal(fk_method_kahm.client_predict(cli[who[w]], q, &a, &err), FK_OK);
        uint8_t *buf;
        size_t len;
        assert_int_equal(fk_codec_bundle_encode(&a, &buf, &len, &err), FK_OK);
        fk_bundle_close(&a);
        ans[w].client = who[w];
        fk_report_init(&ans[w].report);
        fk_bundle_init(&ans[w].msg);
        assert_int_equal(fk_codec_bundle_decode(buf, len, &ans[w].msg, &err), FK_OK);
        free(buf);
        assert_int_equal(fk_method_kahm.check_answer(model, q, &ans[w], &err), FK_OK);
    }
    fk_bundle_init(res);
    assert_int_equal(fk_method_kahm.combine_answers(model, q, ans, n_who, res, &err), FK_OK);
    double *T = malloc(nt * p * sizeof(double)), *dmin = malloc(nt * sizeof(double));
    int *lab = malloc(nt * sizeof(int));
    assert_non_null(T);
    assert_non_null(dmin);
    assert_non_null(lab);
    for (size_t i = 0; i < nt * p; i++)
        T[i] = tanh(X->data[i]); /* the job's preprocessing: tanh = 1, scale = 1 */
    oracle63(cli, who, n_who, C, T, nt, p, lab, dmin);
    const fk_tensor *l = fk_bundle_get(res, "labels"), *g = fk_bundle_get(res, "distances");
    assert_non_null(l);
    assert_non_null(g);
    assert_int_equal(l->len, nt);
    assert_memory_equal(g->data, dmin, nt * sizeof(double));
    for (size_t i = 0; i < nt; i++)
        assert_true(l->data[i] == lab[i]);
    free(T);
    free(dmin);
    free(lab);
    for (int w = 0; w < n_who; w++)
        fk_bundle_close(&ans[w].msg);
}

/* Mode-B serving without the daemons: every holder client answers its class distances, the
 * server checks each answer and takes the minimum; the result equals eq. (63) over all the
 * clients' models bit for bit. With clients missing, their classes get +inf, and the
 * result names the unscored classes and the missing clients. Bad answers and queries are
 * refused with their reason. */
static void mode_b_serving(void **state)
{
    (void)state;
    enum { C = 6 };
    fk_params p;
    set_keys(&p, (const char *const[]){"classes", "6", "holdout", "0.3",
                                       "sim_classes_per_client", "2", NULL});
    fk_dataset ds[K];
    make_clients(&p, ds);
    fk_bundle model, q, res;
    fk_report fin[K];
    fk_err err;
    assert_int_equal(run(&p, ds, &model, fin, &err), FK_OK);
    void *cli[K];
    for (int k = 0; k < K; k++) { /* each client fits as in round 1 and keeps its models */
        assert_int_equal(fk_method_kahm.client_init(&cli[k], &p, &ds[k], k, K, 7, &err), FK_OK);
        fk_bundle t, u;
        fk_bundle_init(&t);
        fk_bundle_init(&u);
        assert_int_equal(fk_bundle_put_scalar(&t, "upload", 0), FK_OK);
        fk_report rep;
        fk_report_init(&rep);
        assert_int_equal(fk_method_kahm.local_step(cli[k], &t, &u, &rep, &err), FK_OK);
        fk_bundle_close(&t);
        fk_bundle_close(&u);
    }
    /* queries: the rows of clients 0 and 2 */
    size_t pd = ds[0].X.cols, n0 = ds[0].X.rows, n2 = ds[2].X.rows;
    fk_bundle_init(&q);
    double *x = fk_bundle_add(&q, "X", 2, (uint64_t[]){n0 + n2, pd});
    assert_non_null(x);
    memcpy(x, ds[0].X.data, n0 * pd * sizeof(double));
    memcpy(x + n0 * pd, ds[2].X.data, n2 * pd * sizeof(double));
    /* all clients answer: every class scored, nobody missing, accurate */
    serve_and_compare(&model, &q, cli, (const int[]){0, 1, 2, 3}, K, C, &res);
    const fk_tensor *sc = fk_bundle_get(&res, "scored_classes"),
                    *un = fk_bundle_get(&res, "unscored_classes"),
                    *mi = fk_bundle_get(&res, "missing_clients"),
                    *l = fk_bundle_get(&res, "labels");
    for (int c = 0; c < C; c++)
        assert_true(sc->data[c] == 1);
    assert_int_equal(un->len, 0);
    assert_int_equal(mi->len, 0);
    size_t hit = 0;
    for (size_t i = 0; i < n0 + n2; i++)
        hit += l->data[i] == (i < n0 ? ds[0].classes[ds[0].y[i]] : ds[2].classes[ds[2].y[i - n0]]);
    assert_true(hit > 0.9 * (double)(n0 + n2));
    /* the same answer as mode A's predict at the server over the uploaded copies of the models */
    fk_params pa;
    set_keys(&pa, (const char *const[]){"classes", "6", "holdout", "0.3",
                                        "sim_classes_per_client", "2", "upload_models", "1",
                                        "local.allow_model_upload", "1", NULL});
    fk_bundle ma, ra;
    fk_bundle_init(&ra);
    assert_int_equal(run(&pa, ds, &ma, fin, &err), FK_OK);
    assert_int_equal(fk_method_kahm.predict(&ma, &q, &ra, &err), FK_OK);
    assert_memory_equal(fk_bundle_get(&ra, "distances")->data,
                        fk_bundle_get(&res, "distances")->data, (n0 + n2) * sizeof(double));
    assert_memory_equal(fk_bundle_get(&ra, "labels")->data, l->data, (n0 + n2) * sizeof(double));
    fk_bundle_close(&ma);
    fk_bundle_close(&ra);
    fk_params_close(&pa);
    fk_bundle_close(&res);
    /* clients 1 and 2 silent: +inf for the classes only they hold, which are named */
    serve_and_compare(&model, &q, cli, (const int[]){0, 3}, 2, C, &res);
    const fk_tensor *h = fk_bundle_get(&model, "holders");
    sc = fk_bundle_get(&res, "scored_classes");
    un = fk_bundle_get(&res, "unscored_classes");
    mi = fk_bundle_get(&res, "missing_clients");
    size_t n_un = 0;
    for (int c = 0; c < C; c++) {
        int by_rest = h->data[0 * C + c] > 0 || h->data[3 * C + c] > 0;
        assert_true(sc->data[c] == by_rest);
        if (!by_rest)
            assert_true(un->data[n_un++] == c);
    }
    assert_true(n_un > 0);
    assert_int_equal(un->len, n_un);
    assert_int_equal(mi->len, 2);
    assert_true(mi->data[0] == 1 && mi->data[1] == 2);
    fk_bundle_close(&res);
    /* refusals: a NaN distance, a class list that differs, a wrong shape, a twice-answering
     * client, an unfitted client, too many queries, another width */
    fk_update a = {.client = 3};
    fk_bundle_init(&a.msg);
    assert_int_equal(fk_method_kahm.client_predict(cli[3], &q, &a.msg, &err), FK_OK);
    fk_bundle_get(&a.msg, "D")->data[5] = NAN;
    assert_int_equal(fk_method_kahm.check_answer(&model, &q, &a, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, ">= 0, or +inf"));
    /* +inf is a legitimate distance (exp(-d) underflowed): the answer is taken */
    fk_bundle_get(&a.msg, "D")->data[5] = INFINITY;
    assert_int_equal(fk_method_kahm.check_answer(&model, &q, &a, &err), FK_OK);
    fk_bundle_get(&a.msg, "D")->data[5] = -1;
    assert_int_equal(fk_method_kahm.check_answer(&model, &q, &a, &err), FK_EINVAL);
    fk_bundle_get(&a.msg, "D")->data[5] = 0;
    a.client = 1; /* client 3 holds classes 0, 1 (round robin), client 1 holds 2, 3 */
    assert_int_equal(fk_method_kahm.check_answer(&model, &q, &a, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "held"));
    a.client = 3;
    fk_update two[2] = {a, a};
    fk_bundle_init(&res);
    assert_int_equal(fk_method_kahm.combine_answers(&model, &q, two, 2, &res, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "two answers"));
    fk_bundle_close(&res);
    fk_bundle small;
    fk_bundle_init(&small);
    assert_int_equal(fk_bundle_put(&small, "X", 2, (uint64_t[]){2, pd}, ds[0].X.data), FK_OK);
    assert_int_equal(fk_method_kahm.check_answer(&model, &small, &a, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "'D' must be"));
    fk_bundle_close(&small);
    fk_bundle_close(&a.msg);
    void *fresh;
    assert_int_equal(fk_method_kahm.client_init(&fresh, &p, &ds[1], 1, K, 7, &err), FK_OK);
    fk_bundle_init(&a.msg);
    assert_int_equal(fk_method_kahm.client_predict(fresh, &q, &a.msg, &err), FK_ESTATE);
    fk_method_kahm.client_close(fresh);
    fk_bundle big;
    fk_bundle_init(&big);
    assert_non_null(fk_bundle_add(&big, "X", 2, (uint64_t[]){FK_KAHM_MAX_QUERIES + 1, pd}));
    assert_int_equal(fk_method_kahm.client_predict(cli[0], &big, &a.msg, &err), FK_ELIMIT);
    assert_non_null(strstr(err.msg, "at most"));
    fk_bundle_close(&big);
    fk_bundle_init(&big);
    assert_int_equal(fk_bundle_put(&big, "X", 2, (uint64_t[]){2, pd / 2}, ds[0].X.data), FK_OK);
    assert_int_equal(fk_method_kahm.client_predict(cli[0], &big, &a.msg, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "dimension"));
    /* the server checks the queries before asking anyone: a combine of no answers */
    fk_bundle none;
    fk_bundle_init(&none);
    assert_int_equal(fk_method_kahm.combine_answers(&model, &big, NULL, 0, &none, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "dimension"));
    fk_bundle_close(&none);
    fk_bundle_close(&big);
    fk_bundle_init(&big);
    double *bx = fk_bundle_add(&big, "X", 2, (uint64_t[]){2, pd});
    assert_non_null(bx);
    bx[3] = INFINITY;
    fk_bundle_init(&none);
    assert_int_equal(fk_method_kahm.combine_answers(&model, &big, NULL, 0, &none, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "finite"));
    bx[3] = 0;
    assert_int_equal(fk_method_kahm.combine_answers(&model, &big, NULL, 0, &none, &err), FK_OK);
    assert_int_equal(fk_bundle_get(&none, "unscored_classes")->len, C); /* nobody answered */
    assert_true(fk_bundle_get(&none, "labels")->data[0] == -1);
    assert_true(isinf(fk_bundle_get(&none, "distances")->data[0]));
    fk_bundle_close(&none);
    fk_bundle_close(&big);
    fk_bundle_close(&a.msg);
    for (int k = 0; k < K; k++)
        fk_method_kahm.client_close(cli[k]);
    fk_bundle_close(&q);
    fk_bundle_close(&model);
    close_clients(ds);
    fk_params_close(&p);
}

int main(void)
{
    fk_log_set_level(FK_LOG_ERROR);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sim_mode_b),
        cmocka_unit_test(mode_a_needs_consent),
        cmocka_unit_test(check_update_refusals),
        cmocka_unit_test(client_refusals),
        cmocka_unit_test(checkpoint_round_trip),
        cmocka_unit_test(message_size_matches_spec),
        cmocka_unit_test(predict_op),
        cmocka_unit_test(mode_b_serving),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
