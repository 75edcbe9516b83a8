/* Job type sfl (common/methods/sfl/) against spec 004 §10.2 and §6.8. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/la/rng.h"
#include "common/methods/sfl/sfl.h"
#include "common/methods/sfl/sfl_int.h"
#include "common/methods/sim.h"
#include "common/models/sfl/sfl.h"
#include "tests/bundle_assert.h"
#include "tests/support_sfl.h"

static const fk_method *M = &fk_method_sfl;

static void job(fk_params *p, int consent)
{
    fk_params_init(p);
    assert_int_equal(fk_params_set(p, "raw_sample_upload", "acknowledged"), FK_OK);
    if (consent)
        assert_int_equal(fk_params_set(p, "local.allow_raw_upload", "true"), FK_OK);
    assert_int_equal(fk_params_set(p, "width_min", "1"), FK_OK);
    assert_int_equal(fk_params_set(p, "width_max", "3"), FK_OK);
    assert_int_equal(fk_params_set(p, "n_widths", "3"), FK_OK);
    /* kernels at each party's rows in the raw units: what these tests check (the default
     * atoms = auto and the federated standardisation: test_methods_sfl_scale.c) */
    assert_int_equal(fk_params_set(p, "atoms", "samples"), FK_OK);
    assert_int_equal(fk_params_set(p, "x_scale", "1"), FK_OK);
}

static void make_clients(int K, size_t n, fk_dataset *ds)
{
    fk_err err = {0};
    for (int k = 0; k < K; k++)
        assert_int_equal(fk_sfl_e31_make(K, k, n, 11, &ds[k], &err), FK_OK);
}

static void close_clients(fk_dataset *ds, int K)
{
    for (int k = 0; k < K; k++)
        fk_dataset_close(&ds[k]);
}

/* The generic simulator runs the job in one round; every client scores the model. */
static void sim_run(void **state)
{
    (void)state;
    enum { K = 9 };
    fk_dataset ds[K];
    make_clients(K, 30, ds);
    fk_params p;
    job(&p, 1);
    fk_report fin[K];
    fk_sim_opts o = {.rounds = 1, .seed = 3, .final_reports = fin};
    fk_bundle model;
    fk_sim_round last;
    fk_err err = {0};
    assert_int_equal(fk_sim_run(M, &p, ds, K, &o, &model, &last, &err), FK_OK);
    assert_int_equal(last.participants, K);
    assert_int_equal(last.refused, 0);
    assert_true(last.accuracy >= 0.9); /* the round line: local accuracy and its error rate */
    assert_true(fabs(last.error - (1 - last.accuracy)) <= 1e-12);
    double K_ker = fk_test_scalar(&model, "K"), rows = fk_test_scalar(&model, "rows_union");
    assert_true(K_ker > 0);
    assert_true(rows > 0 && rows < K * 30); /* only the critical rows travelled */
    assert_true(fk_test_scalar(&model, "n_ref") == K * 30);
    double acc = 0;
    for (int k = 0; k < K; k++)
        acc += fin[k].accuracy / K;
    assert_true(acc >= 0.9);
    fk_bundle_close(&model);
    fk_params_close(&p);
    close_clients(ds, K);
}

/* Prop. 3 + Lemma 4: when every row is critical the union is the pooled data set and the
 * federated model equals the centralised one (resilient quadratic, c = 1: all rows active). */
static void federated_equals_centralised(void **state)
{
    (void)state;
    enum { K = 3 };
    size_t n = 25, N = K * n;
    fk_dataset ds[K];
    make_clients(K, n, ds);
    fk_params p;
    job(&p, 1);
    assert_int_equal(fk_params_set(&p, "c", "1"), FK_OK);
    fk_sim_opts o = {.rounds = 1, .seed = 5};
    fk_bundle model;
    fk_err err = {0};
    assert_int_equal(fk_sim_run(M, &p, ds, K, &o, &model, NULL, &err), FK_OK);
    assert_true(fk_test_scalar(&model, "rows_union") == (double)N); /* containment checked first */
    /* the pooled learner: same rows in client order, same atoms, kappa = 1/N */
    double *X = malloc(N * 2 * sizeof *X), *y = malloc(N * sizeof *y), w[3];
    for (int k = 0; k < K; k++)
        for (size_t i = 0; i < n; i++) {
            memcpy(X + 2 * (k * n + i), ds[k].X.data + 2 * i, 2 * sizeof *X);
            y[k * n + i] = ds[k].y_raw[i] == 1 ? 1 : -1;
        }
    fk_sfl_widths(1, 3, 3, w);
    fk_sfl_atoms a;
    assert_int_equal(fk_sfl_atoms_candidates(&a, X, N, 2, w, 3, &err), FK_OK);
    fk_sfl_opts so;
    fk_sfl_opts_default(&so, FK_SFL_CLASSIFY);
    so.res = FK_SFL_QUAD;
    so.c = 1;
    so.n_ref = (double)N;
    so.tau_gap = 1e-9; /* tight, so the comparison is about the method, not the tolerance */
    fk_sfl_fit f;
    assert_int_equal(fk_sfl_solve(X, y, N, 2, &a, &so, NULL, &f, &err), FK_OK);
    fk_sfl_model mc;
    assert_int_equal(fk_sfl_model_support(&a, f.alpha, &mc, &err), FK_OK);
    fk_sfl_model mf = {.K = (size_t)fk_test_scalar(&model, "K"), .p = 2};
    mf.s = fk_bundle_get(&model, "s")->data;
    mf.w = fk_bundle_get(&model, "w")->data;
    mf.c = fk_bundle_get(&model, "c")->data;
    fk_dataset test;
    assert_int_equal(fk_sfl_e31_make(K, -1, 400, 99, &test, &err), FK_OK);
    double ff[400], fc[400], d = 0, s = 0;
    fk_sfl_predict(&mf, test.X.data, 400, ff);
    fk_sfl_predict(&mc, test.X.data, 400, fc);
    int agree = 0;
    for (int i = 0; i < 400; i++) {
        d += (ff[i] - fc[i]) * (ff[i] - fc[i]);
        s += fc[i] * fc[i];
        agree += (ff[i] >= 0) == (fc[i] >= 0);
    }
    assert_true(sqrt(d / s) <= 1e-2);
    assert_true(agree >= 398);
    fk_dataset_close(&test);
    fk_sfl_model_close(&mc);
    fk_sfl_fit_close(&f);
    fk_sfl_atoms_close(&a);
    free(X);
    free(y);
    fk_bundle_close(&model);
    fk_params_close(&p);
    close_clients(ds, K);
}

/* §6.8 / T25: no job acknowledgement, no client consent: refused; client cap honoured. */
static void opt_in_refusal(void **state)
{
    (void)state;
    enum { K = 2 };
    fk_dataset ds[K];
    make_clients(K, 40, ds);
    fk_params p;
    fk_params_init(&p);
    void *srv = NULL, *cli = NULL;
    fk_err err = {0};
    assert_int_equal(M->server_init(&srv, &p, K, 1, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "raw_sample_upload = acknowledged"));
    fk_params_close(&p);
    job(&p, 0);
    assert_int_equal(M->client_init(&cli, &p, &ds[0], 0, K, 1, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "allow_raw_upload"));
    assert_int_equal(fk_params_set(&p, "local.allow_raw_upload", "false"), FK_OK);
    assert_int_equal(M->client_init(&cli, &p, &ds[0], 0, K, 1, &err), FK_EINVAL);
    assert_int_equal(fk_params_set(&p, "local.allow_raw_upload", "true"), FK_OK);
    assert_int_equal(fk_params_set(&p, "local.max_upload_fraction", "0.1"), FK_OK);
    assert_int_equal(fk_params_set(&p, "c", "1"), FK_OK); /* every row would be critical: the cap binds */
    assert_int_equal(M->client_init(&cli, &p, &ds[0], 0, K, 1, &err), FK_OK);
    fk_bundle task, up;
    fk_bundle_init(&task);
    fk_bundle_init(&up);
    assert_int_equal(fk_bundle_put_scalar(&task, "op", 2), FK_OK);
    assert_int_equal(fk_bundle_put_scalar(&task, "n_ref", 80), FK_OK);
    fk_report rep;
    fk_report_init(&rep);
    assert_int_equal(M->local_step(cli, &task, &up, &rep, &err), FK_OK);
    assert_true(fk_test_scalar(&up, "rows") <= 4); /* ceil(0.1 * 40) */
    assert_true(fk_test_scalar(&up, "rows") >= 1);
    assert_true(fk_test_scalar(&up, "capped") == 1);
    M->client_close(cli);
    fk_bundle_close(&task);
    fk_bundle_close(&up);
    fk_params_close(&p);
    close_clients(ds, K);
}

/* Checkpoints: a server saved between the phases and after the solve resumes identically. */
static void checkpoint_round_trip(void **state)
{
    (void)state;
    enum { K = 3 };
    fk_dataset ds[K];
    make_clients(K, 30, ds);
    fk_params p;
    job(&p, 1);
    void *srv = NULL, *srv2 = NULL, *cli[K];
    fk_err err = {0};
    fk_test_sfl_open(&p, ds, K, 7, &srv, cli);
    fk_update ups[K];
    int done = 0;
    fk_test_sfl_phase(srv, cli, K, 0, ups);
    assert_int_equal(M->aggregate(srv, 1, 0, ups, K, &done, &err), FK_OK);
    assert_int_equal(done, 0);
    fk_test_sfl_close_ups(ups, K);
    fk_bundle ck, ck2, m1, m2;
    fk_bundle_init(&ck);
    fk_bundle_init(&ck2);
    fk_bundle_init(&m1);
    fk_bundle_init(&m2);
    fk_test_sfl_restart(srv, &p, K, 7, &ck, &srv2); /* between the phases */
    fk_test_sfl_phase(srv, cli, K, 1, ups);
    assert_int_equal(M->aggregate(srv, 1, 1, ups, K, &done, &err), FK_OK);
    assert_int_equal(done, 1);
    assert_int_equal(M->aggregate(srv2, 1, 1, ups, K, &done, &err), FK_OK);
    assert_true(M->finished(srv) && M->finished(srv2));
    assert_int_equal(M->model(srv, &m1, &err), FK_OK);
    assert_int_equal(M->model(srv2, &m2, &err), FK_OK);
    assert_bundles_equal(&m1, &m2); /* the resumed server solved the same problem */
    fk_test_sfl_restart(srv, &p, K, 7, &ck, &srv2); /* after the solve */
    fk_bundle_clear(&m2);
    assert_int_equal(M->model(srv2, &m2, &err), FK_OK);
    assert_bundles_equal(&m1, &m2);
    assert_int_equal(M->save(srv2, &ck2, &err), FK_OK);
    assert_bundles_equal(&ck, &ck2);
    /* a corrupt checkpoint is refused and leaves the state alone */
    assert_int_equal(fk_bundle_put_scalar(&ck2, "stage", 7), FK_OK);
    assert_int_equal(M->load(srv2, &ck2, &err), FK_EFORMAT);
    fk_bundle_clear(&m2);
    assert_int_equal(M->model(srv2, &m2, &err), FK_OK);
    assert_bundles_equal(&m1, &m2);
    /* client checkpoint */
    fk_bundle_clear(&ck2);
    assert_int_equal(M->client_save(cli[0], &ck2, &err), FK_OK);
    assert_int_equal(M->client_load(cli[1], &ck2, &err), FK_OK);
    /* the clients score the model */
    fk_report r;
    fk_report_init(&r);
    assert_int_equal(M->evaluate(cli[0], &m1, &r, &err), FK_OK);
    assert_true(r.accuracy >= 0.8);
    fk_test_sfl_close_ups(ups, K);
    for (int k = 0; k < K; k++)
        M->client_close(cli[k]);
    M->server_close(srv);
    M->server_close(srv2);
    fk_bundle_close(&ck);
    fk_bundle_close(&ck2);
    fk_bundle_close(&m1);
    fk_bundle_close(&m2);
    fk_params_close(&p);
    close_clients(ds, K);
}

/* Bad uploads are refused by check_update, one clear error each; bad data and configs too. */
static void bad_input(void **state)
{
    (void)state;
    enum { K = 2 };
    fk_dataset ds[K];
    make_clients(K, 30, ds);
    fk_params p;
    job(&p, 1);
    assert_int_equal(fk_params_set(&p, "max_upload_fraction", "0.9"), FK_OK);
    void *srv = NULL, *cli[K];
    fk_err err = {0};
    fk_test_sfl_open(&p, ds, K, 1, &srv, cli);
    fk_update ups[K];
    int done = 0;
    fk_test_sfl_uploads(srv, cli, K, ups);
    fk_update *u = &ups[0];
    size_t C = (size_t)fk_test_scalar(&u->msg, "rows");
    assert_true(C > 1);
    fk_tensor *x = (fk_tensor *)fk_bundle_get(&u->msg, "x"),
              *lam = (fk_tensor *)fk_bundle_get(&u->msg, "lambda"),
              *y = (fk_tensor *)fk_bundle_get(&u->msg, "y");
    double keep = x->data[1];
    x->data[1] = NAN;
    assert_int_equal(M->check_update(srv, 1, 1, u, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "'x'"));
    x->data[1] = keep;
    keep = lam->data[0];
    lam->data[0] = -1;
    assert_int_equal(M->check_update(srv, 1, 1, u, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "'lambda'"));
    lam->data[0] = keep;
    keep = y->data[0];
    y->data[0] = 0.5;
    assert_int_equal(M->check_update(srv, 1, 1, u, &err), FK_EINVAL);
    y->data[0] = keep;
    x->shape[1] = 1; /* wrong feature dimension */
    assert_int_equal(M->check_update(srv, 1, 1, u, &err), FK_EINVAL);
    x->shape[1] = 2;
    assert_int_equal(fk_bundle_put_scalar(&u->msg, "n", 31), FK_OK); /* not the declared count */
    assert_int_equal(M->check_update(srv, 1, 1, u, &err), FK_EINVAL);
    assert_int_equal(fk_bundle_put_scalar(&u->msg, "n", 30), FK_OK);
    /* over the job's cap of ceil(0.9 * 30) = 27 */
    assert_int_equal(fk_bundle_put_scalar(&u->msg, "rows", 28), FK_OK);
    assert_int_equal(M->check_update(srv, 1, 1, u, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "max_upload_fraction"));
    assert_int_equal(fk_bundle_put_scalar(&u->msg, "rows", (double)C), FK_OK);
    assert_int_equal(M->check_update(srv, 1, 1, u, &err), FK_OK);
    fk_update stranger = ups[1];
    stranger.client = 5;
    assert_int_equal(M->check_update(srv, 1, 1, &stranger, &err), FK_EINVAL);
    fk_test_sfl_close_ups(ups, K);
    for (int k = 0; k < K; k++)
        M->client_close(cli[k]);
    M->server_close(srv);
    /* data with a NaN, preprocessing of the wrong dimension, a class no client holds */
    ds[0].X.data[3] = NAN;
    assert_int_equal(M->client_init(&cli[0], &p, &ds[0], 0, K, 1, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "NaN"));
    assert_int_equal(fk_params_set(&p, "x_scale", "1,2,3"), FK_OK);
    assert_int_equal(M->client_init(&cli[0], &p, &ds[1], 1, K, 1, &err), FK_EINVAL);
    assert_int_equal(fk_params_set(&p, "x_scale", "1"), FK_OK);
    assert_int_equal(fk_params_set(&p, "pos_label", "7"), FK_OK);
    assert_int_equal(fk_params_set(&p, "neg_label", "8"), FK_OK);
    assert_int_equal(M->server_init(&srv, &p, 1, 1, &err), FK_OK);
    assert_int_equal(M->client_init(&cli[1], &p, &ds[1], 0, 1, 1, &err), FK_OK);
    fk_test_sfl_phase(srv, &cli[1], 1, 0, ups);
    assert_int_equal(M->aggregate(srv, 1, 0, ups, 1, &done, &err), FK_ESTATE);
    assert_non_null(strstr(err.msg, "pos_label"));
    fk_test_sfl_close_ups(ups, 1);
    M->client_close(cli[1]);
    M->server_close(srv);
    assert_int_equal(fk_params_set(&p, "resilient", "bogus"), FK_OK);
    assert_int_equal(M->server_init(&srv, &p, 1, 1, &err), FK_EINVAL);
    fk_params_close(&p);
    close_clients(ds, K);
}

/* The binary upload's solver diagnostics "diag" (spec §6.4: status, iterations, violation,
 * dual, primal, support) are checked by check_update: a bad one is refused naming the tensor,
 * and the job completes without that client (a dropout). A client with no rows of the task
 * sends no diag; one that does is refused. */
static void bad_diag(void **state)
{
    (void)state;
    enum { K = 3, N = 30 };
    fk_dataset ds[K];
    make_clients(K, N, ds);
    for (size_t i = 0; i < N; i++) /* client 2 holds neither label of the task */
        ds[2].y_raw[i] = 5;
    fk_params p;
    job(&p, 1);
    assert_int_equal(fk_params_set(&p, "neg_label", "-1"), FK_OK);
    void *srv = NULL, *cli[K];
    fk_err err = {0};
    fk_test_sfl_open(&p, ds, K, 1, &srv, cli);
    fk_update ups[K];
    int done = 0;
    fk_test_sfl_uploads(srv, cli, K, ups); /* the good uploads pass (each is checked) */
    fk_update *u = &ups[0];
    const fk_tensor *dg = fk_bundle_get(&u->msg, "diag");
    assert_non_null(dg);
    assert_int_equal(dg->ndim, 1);
    assert_int_equal(dg->len, FK__SFL_DG);
    assert_true(dg->data[FK__SFL_DG_STATUS] == FK_SFL_CONVERGED);
    assert_true(dg->data[FK__SFL_DG_SUPPORT] >= 1);
    double C = fk_test_scalar(&u->msg, "rows"), nc = fk_test_scalar(&u->msg, "not_converged");
    assert_true(C >= 1 && nc >= 0 && C + nc <= N);
    assert_null(fk_bundle_get(&ups[2].msg, "diag")); /* no rows, nothing solved */
    assert_true(fk_test_scalar(&ups[2].msg, "n") == 0);
    double T2 = 2 * 20000, J = N * 3; /* two phases of the default T_client; n x 3 widths */
    /* status */
    fk_test_sfl_refuse(srv, u, "diag", FK__SFL_DG_STATUS, 3, "'diag'");
    fk_test_sfl_refuse(srv, u, "diag", FK__SFL_DG_STATUS, -1, "'diag'");
    fk_test_sfl_refuse(srv, u, "diag", FK__SFL_DG_STATUS, 0.5, "'diag'");
    /* iteration bounds */
    fk_test_sfl_refuse(srv, u, "diag", FK__SFL_DG_ITERS, 0, "'diag'");
    fk_test_sfl_refuse(srv, u, "diag", FK__SFL_DG_ITERS, T2 + 1, "'diag'");
    fk_test_sfl_refuse(srv, u, "diag", FK__SFL_DG_ITERS, 2.5, "'diag'");
    /* non-finite or out-of-range values */
    fk_test_sfl_refuse(srv, u, "diag", FK__SFL_DG_VIOL, -1e-3, "'diag'");
    fk_test_sfl_refuse(srv, u, "diag", FK__SFL_DG_VIOL, NAN, "'diag'");
    fk_test_sfl_refuse(srv, u, "diag", FK__SFL_DG_DUAL, NAN, "'diag'");
    fk_test_sfl_refuse(srv, u, "diag", FK__SFL_DG_PRIMAL, INFINITY, "'diag'");
    fk_test_sfl_refuse(srv, u, "diag", FK__SFL_DG_PRIMAL, -INFINITY, "'diag'");
    /* counts inconsistent with the upload: support beyond the atoms, not-converged rows
     * beyond those not uploaded, capped not a flag */
    fk_test_sfl_refuse(srv, u, "diag", FK__SFL_DG_SUPPORT, -1, "'diag'");
    fk_test_sfl_refuse(srv, u, "diag", FK__SFL_DG_SUPPORT, J + 1, "'diag'");
    fk_test_sfl_refuse(srv, u, "diag", FK__SFL_DG_SUPPORT, 1.5, "'diag'");
    fk_test_sfl_refuse(srv, u, "not_converged", 0, N - C + 1, "'not_converged'");
    fk_test_sfl_refuse(srv, u, "not_converged", 0, 0.5, "'not_converged'");
    fk_test_sfl_refuse(srv, u, "capped", 0, 0.5, "'capped'");
    /* shape: a wrong length, a matrix, a missing tensor */
    fk_tensor *t = (fk_tensor *)fk_bundle_get(&u->msg, "diag");
    t->shape[0] = FK__SFL_DG - 1;
    assert_int_equal(M->check_update(srv, 1, 1, u, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "'diag'"));
    t->ndim = 2;
    t->shape[0] = 2;
    t->shape[1] = FK__SFL_DG / 2;
    assert_int_equal(M->check_update(srv, 1, 1, u, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "'diag'"));
    t->ndim = 1;
    t->shape[0] = FK__SFL_DG;
    strcpy(t->name, "diag_");
    assert_int_equal(M->check_update(srv, 1, 1, u, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "'diag_'")); /* an unexpected tensor, refused by name */
    strcpy(t->name, "diag");
    assert_int_equal(M->check_update(srv, 1, 1, u, &err), FK_OK);
    /* a client with no rows of the task sending diagnostics anyway */
    double fake[FK__SFL_DG] = {FK_SFL_CONVERGED, 1, 0, 0, 0, 0};
    assert_int_equal(fk_bundle_put_vec(&ups[2].msg, "diag", FK__SFL_DG, fake), FK_OK);
    assert_int_equal(M->check_update(srv, 1, 1, &ups[2], &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "'diag'"));
    /* a refused update is a dropout: the job completes on client 1 alone */
    fk_tensor *dt = (fk_tensor *)fk_bundle_get(&u->msg, "diag");
    dt->data[FK__SFL_DG_DUAL] = NAN;
    assert_int_equal(M->aggregate(srv, 1, 1, ups, K, &done, &err), FK_OK);
    assert_int_equal(done, 1);
    assert_true(M->finished(srv));
    fk_bundle m;
    fk_bundle_init(&m);
    assert_int_equal(M->model(srv, &m, &err), FK_OK);
    assert_true(fk_test_scalar(&m, "K") > 0);
    fk_bundle_close(&m);
    fk_test_sfl_close_ups(ups, K);
    for (int k = 0; k < K; k++)
        M->client_close(cli[k]);
    M->server_close(srv);
    fk_params_close(&p);
    close_clients(ds, K);
}

/* T24: one of 9 clients silent in the upload phase (a dropout at the deadline): the job
 * completes on the other 8 uploads and the model scores within 5 points of the all-clients
 * one on every client's rows. */
static double mean_accuracy(void **cli, int K, const fk_bundle *m)
{
    double acc = 0;
    fk_err err = {0};
    for (int k = 0; k < K; k++) {
        fk_report r;
        fk_report_init(&r);
        assert_int_equal(M->evaluate(cli[k], m, &r, &err), FK_OK);
        acc += r.accuracy / K;
    }
    return acc;
}

static void dropout(void **state)
{
    (void)state;
    enum { K = 9, SILENT = 4 };
    fk_dataset ds[K];
    make_clients(K, 30, ds);
    fk_params p;
    job(&p, 1);
    double acc[2];
    fk_err err = {0};
    void *cli[K];
    for (int k = 0; k < K; k++)
        assert_int_equal(M->client_init(&cli[k], &p, &ds[k], k, K, 7, &err), FK_OK);
    for (int drop = 0; drop < 2; drop++) {
        void *srv = NULL;
        assert_int_equal(M->server_init(&srv, &p, K, 7, &err), FK_OK);
        fk_update ups[K], kept[K];
        int done = 0, n = 0;
        fk_test_sfl_phase(srv, cli, K, 0, ups);
        assert_int_equal(M->aggregate(srv, 1, 0, ups, K, &done, &err), FK_OK);
        fk_test_sfl_close_ups(ups, K);
        for (int k = 0; k < K; k++) /* fresh clients: an sfl client uploads once per job */
            M->client_close(cli[k]);
        for (int k = 0; k < K; k++)
            assert_int_equal(M->client_init(&cli[k], &p, &ds[k], k, K, 7, &err), FK_OK);
        fk_test_sfl_phase(srv, cli, K, 1, ups);
        for (int k = 0; k < K; k++)
            if (!drop || k != SILENT)
                kept[n++] = ups[k];
        assert_int_equal(M->aggregate(srv, 1, 1, kept, n, &done, &err), FK_OK);
        assert_int_equal(done, 1);
        assert_true(M->finished(srv));
        fk_bundle m;
        fk_bundle_init(&m);
        assert_int_equal(M->model(srv, &m, &err), FK_OK);
        assert_true(fk_test_scalar(&m, "K") > 0);
        acc[drop] = mean_accuracy(cli, K, &m);
        fk_bundle_close(&m);
        fk_test_sfl_close_ups(ups, K);
        M->server_close(srv);
    }
    assert_true(acc[0] >= 0.85);
    assert_true(acc[1] >= acc[0] - 0.05);
    for (int k = 0; k < K; k++)
        M->client_close(cli[k]);
    fk_params_close(&p);
    close_clients(ds, K);
}

/* Regression mode end to end: y = sin(x) + noise on 3 clients, eps = 1e-2 (a 0.1 tube); the
 * clients' RMSE on their own rows stays near the tube and the model is sparse. */
/* Phase-0 counts of two clients declaring n rows each (p = 2, unit spread): messages only,
 * no rows behind them. */
static void count_updates(fk_update *ups, double n)
{
    const double mu[2] = {0, 0}, m2[2] = {n, n};
    for (int k = 0; k < 2; k++) {
        memset(&ups[k], 0, sizeof ups[k]);
        ups[k].client = k;
        fk_bundle_init(&ups[k].msg);
        assert_int_equal(fk_bundle_put_scalar(&ups[k].msg, "n", n), FK_OK);
        assert_int_equal(fk_bundle_put_scalar(&ups[k].msg, "p", 2), FK_OK);
        assert_int_equal(fk_bundle_put_vec(&ups[k].msg, "mu", 2, mu), FK_OK);
        assert_int_equal(fk_bundle_put_vec(&ups[k].msg, "m2", 2, m2), FK_OK);
    }
}

/* Issue 36: a gamma > 0 server problem needs its whole N x J kernel matrix (at most 4e9
 * entries); the job is refused at phase 0, from the declared counts and the upload cap, not
 * at the server's solve after the clients uploaded raw rows. Sample atoms: J = N x 3 widths. */
static void fista_size_refused_early(void **state)
{
    (void)state;
    struct {
        const char *gamma, *frac;
        double n;
        int ok;
    } cases[] = {
        {"0.5", "1", 1e5, 0},    /* N <= 2e5, J <= 6e5: 1.2e11 entries */
        {"0", "1", 1e5, 1},      /* gamma = 0 works in the row budget, whatever N x J */
        {"0.5", "0.05", 1e5, 1}, /* N <= 1e4, J <= 3e4: 3e8 entries */
        {"0.5", "1", 1e4, 1},    /* N <= 2e4: 1.2e9 entries */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fk_params p;
        job(&p, 1);
        assert_int_equal(fk_params_set(&p, "gamma_server", cases[i].gamma), FK_OK);
        assert_int_equal(fk_params_set(&p, "max_upload_fraction", cases[i].frac), FK_OK);
        void *srv = NULL;
        fk_err err = {0};
        assert_int_equal(M->server_init(&srv, &p, 2, 1, &err), FK_OK);
        fk_update ups[2];
        count_updates(ups, cases[i].n);
        int done = -1;
        int rc = M->aggregate(srv, 1, 0, ups, 2, &done, &err);
        if (cases[i].ok) {
            assert_int_equal(rc, FK_OK);
            assert_int_equal(done, 0); /* the upload phase follows */
        } else {
            assert_int_equal(rc, FK_ELIMIT);
            assert_non_null(strstr(err.msg, "gamma_server = 0"));
            assert_non_null(strstr(err.msg, "max_upload_fraction"));
            assert_non_null(strstr(err.msg, "before any row is uploaded"));
            /* still at phase 0: no upload task is ever handed out */
            fk_bundle task;
            fk_bundle_init(&task);
            assert_int_equal(M->task(srv, 1, 1, 0, &task, &err), FK_OK);
            assert_true(fk_test_scalar(&task, "op") == FK__SFL_OP_COUNT);
            fk_bundle_close(&task);
        }
        for (int k = 0; k < 2; k++)
            fk_bundle_close(&ups[k].msg);
        M->server_close(srv);
        fk_params_close(&p);
    }
}

static void regression_job(void **state)
{
    (void)state;
    enum { K = 3, NR = 40 };
    fk_dataset ds[K];
    fk_err err = {0};
    fk_test_sfl_sine(ds, K, NR, 0, 6);
    fk_params p;
    job(&p, 1);
    assert_int_equal(fk_params_set(&p, "mode", "regress"), FK_OK);
    assert_int_equal(fk_params_set(&p, "eps", "0.01"), FK_OK);
    assert_int_equal(fk_params_set(&p, "width_min", "0.5"), FK_OK);
    assert_int_equal(fk_params_set(&p, "width_max", "1.5"), FK_OK);
    fk_report fin[K];
    fk_sim_opts o = {.rounds = 1, .seed = 3, .final_reports = fin};
    fk_bundle model;
    fk_sim_round last;
    assert_int_equal(fk_sim_run(M, &p, ds, K, &o, &model, &last, &err), FK_OK);
    assert_int_equal(last.participants, K);
    assert_true(isnan(last.accuracy)); /* the round line carries the local fits' RMSE */
    assert_true(isfinite(last.error) && last.error <= 0.15);
    double rows = fk_test_scalar(&model, "rows_union"), ker = fk_test_scalar(&model, "K");
    assert_true(rows > 0 && rows <= K * NR);
    assert_true(ker > 0 && ker < 3 * K * NR); /* fewer kernels than atoms */
    for (int k = 0; k < K; k++) {
        assert_true(isfinite(fin[k].error));
        assert_true(fin[k].error <= 0.15); /* RMSE; the tube is 0.1 */
    }
    fk_bundle_close(&model);
    fk_params_close(&p);
    close_clients(ds, K);
}

int main(void)
{
    fk_log_set_level(FK_LOG_WARN); /* the job's per-upload info lines */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sim_run),
        cmocka_unit_test(federated_equals_centralised),
        cmocka_unit_test(opt_in_refusal),
        cmocka_unit_test(checkpoint_round_trip),
        cmocka_unit_test(bad_input),
        cmocka_unit_test(bad_diag),
        cmocka_unit_test(dropout),
        cmocka_unit_test(regression_job),
        cmocka_unit_test(fista_size_refused_early),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
