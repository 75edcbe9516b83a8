/* The fedgrem-mor / fedem-mor job types (fedgrem_mor.c): mixture-of-regressions FedGrEM
 * through the operations table, against the direct simulation fk_mor_run on the same
 * design and seed, checkpoints, robustness to an outlier task, and bad input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/mixture/mor.h"
#include "common/data/synth_spec.h"
#include "common/methods/mixture/fedgmm_mor.h"
#include "common/methods/mixture/fedgrem.h"
#include "common/methods/mixture/pooled_em.h"
#include "common/methods/sim.h"
#include "common/models/mixture/gmm.h"
#include "common/models/mixture/mor_local.h"
#include "tests/support_ops.h"

/* Small design: 5 tasks (the last an outlier y = -3 x^T 1 + e), R = 2, p = 3, n = 600. */
enum { K = 5, R = 2, P = 3, N = 600, RP = R * P };
static const uint64_t SEED = 3;

typedef struct fixture {
    fk_mor_data d;
    fk_dataset tasks[K];
} fixture;

static void params(fk_params *p)
{
    fk_params_init(p);
    assert_int_equal(fk_params_set(p, "R", "2"), FK_OK);
    assert_int_equal(fk_params_set(p, "restarts", "4"), FK_OK);
    assert_int_equal(fk_params_set(p, "align_B", "5"), FK_OK);
}

/* The clients load their data from synthetic/mor specs, as client daemons do. */
static void make(fixture *f)
{
    assert_int_equal(fk_mor_make(K, R, P, N, 1, 0.0, -3.0, SEED, &f->d, NULL), FK_OK);
    for (int k = 0; k < K; k++) {
        char spec[160];
        snprintf(spec, sizeof spec,
                 "synthetic/mor:client=%d,tasks=%d,outliers=1,components=%d,dims=%d,samples=%d,"
                 "seed=%llu",
                 k, K, R, P, N, (unsigned long long)SEED);
        fk_err err;
        int rc = fk_synth_spec_load(&f->tasks[k], spec, &err);
        if (rc)
            print_message("%s\n", err.msg);
        assert_int_equal(rc, FK_OK);
    }
}

static void drop(fixture *f)
{
    for (int k = 0; k < K; k++)
        fk_dataset_close(&f->tasks[k]);
    fk_mor_data_close(&f->d);
}

static void run(const fk_method *m, const fk_params *p, const fk_dataset *tasks, int n, int rounds,
                double *theta, double *w)
{
    fk_sim_opts o = {.rounds = rounds, .seed = SEED};
    fk_bundle model;
    fk_err err;
    int rc = fk_sim_run(m, p, tasks, n, &o, &model, NULL, &err);
    if (rc)
        print_message("%s: %s\n", m->name, err.msg);
    assert_int_equal(rc, FK_OK);
    const fk_tensor *th = fk_bundle_get(&model, "theta"), *wt = fk_bundle_get(&model, "w");
    assert_non_null(th);
    assert_non_null(wt);
    assert_int_equal(th->len, (size_t)n * RP);
    memcpy(theta, th->data, th->len * sizeof *theta);
    memcpy(w, wt->data, wt->len * sizeof *w);
    fk_bundle_close(&model);
}

/* Largest |difference| between two runs' estimates (K x R x p theta, K x R w). */
static double max_diff(const double *th_a, const double *w_a, const double *th_b, const double *w_b)
{
    double d = 0;
    for (int i = 0; i < K * RP; i++)
        d = fmax(d, fabs(th_a[i] - th_b[i]));
    for (int i = 0; i < K * R; i++)
        d = fmax(d, fabs(w_a[i] - w_b[i]));
    return d;
}

/* A synthetic/mor spec yields exactly task k of fk_mor_make (X and the target y). */
static void spec_is_the_design(void **state)
{
    (void)state;
    fixture f;
    make(&f);
    for (int k = 0; k < K; k++) {
        assert_int_equal(f.tasks[k].X.rows, N);
        assert_int_equal(f.tasks[k].X.cols, P);
        assert_null(f.tasks[k].y);
        assert_memory_equal(f.tasks[k].X.data, f.d.X + (size_t)k * N * P, N * P * sizeof(double));
        assert_memory_equal(f.tasks[k].y_raw, f.d.y + (size_t)k * N, N * sizeof(double));
    }
    drop(&f);
}

/* The ops-table job reproduces the direct simulation: same init streams, same alignment
 * stream, same single-task code, so fedgrem-mor equals fk_mor_run("fedgrem") bit for bit;
 * fedem-mor equals fk_mor_run("fedem") up to the order of the server's average. */
static void ops_equal_direct(void **state)
{
    (void)state;
    fixture f;
    make(&f);
    fk_params p;
    params(&p);
    double th_ops[K * RP], w_ops[K * R], th_dir[K * RP], w_dir[K * R];
    run(&fk_method_fedgrem_mor, &p, f.tasks, K, 100, th_ops, w_ops);
    assert_int_equal(fk_mor_run("fedgrem", &p, &f.d, 100, SEED, th_dir, w_dir, NULL), FK_OK);
    assert_memory_equal(th_ops, th_dir, sizeof th_ops);
    assert_memory_equal(w_ops, w_dir, sizeof w_ops);
    double et, ew;
    fk_mor_errors(&f.d, th_ops, w_ops, &et, &ew);
    print_message("fedgrem-mor E_theta %.6f E_w %.6f (fk_mor_run fedgrem: identical)\n", et, ew);
    assert_true(et < 0.6 && ew < 0.1);
    /* fk_mor_run also runs the job type by name */
    double th3[K * RP], w3[K * R];
    assert_int_equal(fk_mor_run("fedgrem-mor", &p, &f.d, 100, SEED, th3, w3, NULL), FK_OK);
    assert_memory_equal(th3, th_dir, sizeof th3);
    run(&fk_method_fedem_mor, &p, f.tasks, K, 100, th_ops, w_ops);
    assert_int_equal(fk_mor_run("fedem", &p, &f.d, 100, SEED, th_dir, w_dir, NULL), FK_OK);
    double dmax = max_diff(th_ops, w_ops, th_dir, w_dir);
    print_message("fedem-mor vs fk_mor_run fedem: max |difference| %.3g\n", dmax);
    assert_true(dmax < 1e-9);
    /* the per-client baselines: the aligned local fits, and gradient EM without fusion */
    const fk_method *local[] = {&fk_method_local_em_mor, &fk_method_local_grem_mor};
    const char *direct[] = {"local-em", "local-grem"};
    for (int i = 0; i < 2; i++) {
        run(local[i], &p, f.tasks, K, 100, th_ops, w_ops);
        assert_int_equal(fk_mor_run(direct[i], &p, &f.d, 100, SEED, th_dir, w_dir, NULL), FK_OK);
        assert_memory_equal(th_ops, th_dir, sizeof th_ops);
        assert_memory_equal(w_ops, w_dir, sizeof w_ops);
    }
    /* without fusion the outlier task's pull is gone, but so is the borrowed strength */
    double et_local, ew_local, et_fed, ew_fed;
    fk_mor_errors(&f.d, th_ops, w_ops, &et_local, &ew_local);
    run(&fk_method_fedgrem_mor, &p, f.tasks, K, 100, th_ops, w_ops);
    fk_mor_errors(&f.d, th_ops, w_ops, &et_fed, &ew_fed);
    print_message("E_theta local-grem-mor %.4f, fedgrem-mor %.4f\n", et_local, et_fed);
    assert_true(et_fed <= et_local);
    /* pooled: the clients' summed statistics give the step on the union of the data; the
     * sums run in another order than the direct loop's single task */
    run(&fk_method_pooled_grem_mor, &p, f.tasks, K, 100, th_ops, w_ops);
    assert_int_equal(fk_mor_run("pooled-grem", &p, &f.d, 100, SEED, th_dir, w_dir, NULL), FK_OK);
    dmax = max_diff(th_ops, w_ops, th_dir, w_dir);
    print_message("pooled-grem-mor vs fk_mor_run pooled-grem: max |difference| %.3g\n", dmax);
    assert_true(dmax < 1e-9);
    for (int k = 1; k < K; k++) /* one model for every client */
        assert_memory_equal(th_ops + k * RP, th_ops, RP * sizeof *th_ops);
    /* FedGMM: the same local step and averages as the direct loop, bit for bit */
    run(&fk_method_fedgmm_mor, &p, f.tasks, K, 30, th_ops, w_ops);
    assert_int_equal(fk_mor_run("fedgmm", &p, &f.d, 30, SEED, th_dir, w_dir, NULL), FK_OK);
    assert_memory_equal(th_ops, th_dir, sizeof th_ops);
    assert_memory_equal(w_ops, w_dir, sizeof w_ops);
    fk_mor_errors(&f.d, th_ops, w_ops, &et, &ew);
    print_message("fedgmm-mor E_theta %.4f E_w %.4f (fk_mor_run fedgmm: identical)\n", et, ew);
    fk_params_close(&p);
    drop(&f);
}

/* Checkpoint after round 7, restore into fresh states, finish: same as uninterrupted. */
static void save_load_round_trip(void **state)
{
    (void)state;
    fixture f;
    make(&f);
    fk_params p;
    params(&p);
    fk_report rep;
    checkpoint_round_trip(&fk_method_fedgrem_mor, &p, f.tasks, K, SEED, 7, 15, &rep);
    assert_true(isfinite(rep.loss) && rep.n_samples == N);
    checkpoint_round_trip(&fk_method_fedem_mor, &p, f.tasks, K, SEED, 7, 15, &rep);
    assert_true(isfinite(rep.loss));
    checkpoint_round_trip(&fk_method_local_em_mor, &p, f.tasks, K, SEED, 7, 15, &rep);
    assert_true(isfinite(rep.loss));
    checkpoint_round_trip(&fk_method_local_grem_mor, &p, f.tasks, K, SEED, 7, 15, &rep);
    assert_true(isfinite(rep.loss));
    checkpoint_round_trip(&fk_method_pooled_grem_mor, &p, f.tasks, K, SEED, 7, 15, &rep);
    assert_true(isfinite(rep.loss));
    checkpoint_round_trip(&fk_method_fedgmm_mor, &p, f.tasks, K, SEED, 7, 15, &rep);
    assert_true(isfinite(rep.loss));
    fk_params_close(&p);
    drop(&f);
}

/* The outlier task (client 4) does not pull the good tasks: their FedGrEM estimates with it
 * are as good as without it, while FedEM's average is dragged away. */
static void outlier_task_does_not_pull(void **state)
{
    (void)state;
    fixture f;
    make(&f);
    fk_params p;
    params(&p);
    double th[K * RP], w[K * R], et_all, et_good, et_fedem, ew;
    run(&fk_method_fedgrem_mor, &p, f.tasks, K, 100, th, w);
    fk_mor_errors(&f.d, th, w, &et_all, &ew);
    run(&fk_method_fedgrem_mor, &p, f.tasks, K - 1, 100, th, w); /* good clients only */
    fk_mor_errors(&f.d, th, w, &et_good, &ew);                   /* (task 4 not scored) */
    run(&fk_method_fedem_mor, &p, f.tasks, K, 100, th, w);
    fk_mor_errors(&f.d, th, w, &et_fedem, &ew);
    print_message("E_theta good tasks: fedgrem-mor %.4f with the outlier, %.4f without; "
                  "fedem-mor %.4f with it\n",
                  et_all, et_good, et_fedem);
    assert_true(fabs(et_all - et_good) < 0.1);
    assert_true(et_all < 0.6);
    assert_true(et_fedem > et_all + 1.0);
    fk_params_close(&p);
    drop(&f);
}

static void expect_init_error(const fk_params *p, const fk_dataset *d, const char *what)
{
    void *cli = NULL;
    fk_err err;
    assert_int_equal(fk_method_fedgrem_mor.client_init(&cli, p, d, 2, K, SEED, &err), FK_EINVAL);
    assert_null(cli);
    if (!strstr(err.msg, what))
        print_message("message: %s\n", err.msg);
    assert_non_null(strstr(err.msg, what));
}

static void bad_input(void **state)
{
    (void)state;
    fixture f;
    make(&f);
    fk_params p;
    params(&p);
    fk_err err;
    /* no target: features only */
    fk_dataset x;
    assert_int_equal(fk_dataset_init(&x, N, P, 0), FK_OK);
    memcpy(x.X.data, f.tasks[2].X.data, N * P * sizeof(double));
    expect_init_error(&p, &x, "no regression target y");
    /* class labels are not a target */
    double lab[N];
    for (int i = 0; i < N; i++)
        lab[i] = i % 3;
    assert_int_equal(fk_dataset_set_labels(&x, lab, NULL), FK_OK);
    expect_init_error(&p, &x, "class labels");
    /* NaN target */
    assert_int_equal(fk_dataset_set_target(&x, f.tasks[2].y_raw, NULL), FK_OK);
    x.y_raw[17] = NAN;
    expect_init_error(&p, &x, "target of sample 17");
    fk_dataset_close(&x);
    /* fewer samples than features */
    fk_dataset few;
    assert_int_equal(fk_dataset_subset(&few, &f.tasks[2], (int[]){0, 1, 2}, 3), FK_OK);
    expect_init_error(&p, &few, "more samples than features");
    fk_dataset_close(&few);
    /* step_guard is a GMM option */
    fk_params g;
    params(&g);
    assert_int_equal(fk_params_set(&g, "step_guard", "1"), FK_OK);
    expect_init_error(&g, &f.tasks[2], "no step guard");
    fk_params_close(&g);
    /* p mismatch: client 3 has 4 features */
    fk_dataset wide, keep = f.tasks[3];
    assert_int_equal(fk_synth_spec_load(&wide,
                                        "synthetic/mor:client=3,tasks=5,components=2,dims=4,"
                                        "samples=600,seed=3",
                                        NULL),
                     FK_OK);
    f.tasks[3] = wide;
    fk_sim_opts o = {.rounds = 2, .seed = SEED};
    fk_bundle model;
    assert_int_equal(fk_sim_run(&fk_method_fedgrem_mor, &p, f.tasks, K, &o, &model, NULL, &err),
                     FK_EINVAL);
    assert_non_null(strstr(err.msg, "p mismatch"));
    f.tasks[3] = keep;
    fk_dataset_close(&wide);
    /* R of the job against the design (fk_mor_run) */
    fk_params r3;
    params(&r3);
    assert_int_equal(fk_params_set(&r3, "R", "3"), FK_OK);
    double th[K * RP], w[K * R];
    assert_int_equal(fk_mor_run("fedgrem-mor", &r3, &f.d, 2, SEED, th, w, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "R = 3"));
    fk_params_close(&r3);
    fk_params_close(&p);
    drop(&f);
}

/* Tasks and updates are untrusted: every received tensor is checked before use. */
static void untrusted_messages_refused(void **state)
{
    (void)state;
    fixture f;
    make(&f);
    fk_params p;
    params(&p);
    const fk_method *m = &fk_method_fedgrem_mor;
    void *srv, *cli[K];
    assert_int_equal(m->server_init(&srv, &p, K, SEED, NULL), FK_OK);
    for (int k = 0; k < K; k++)
        assert_int_equal(m->client_init(&cli[k], &p, &f.tasks[k], k, K, SEED, NULL), FK_OK);
    fk_update ups[K];
    phase_updates(m, srv, cli, K, 1, 0, ups);
    uint64_t ms[2] = {R, P}, fs[1] = {RP}, ws[1] = {R};
    double big[RP], negw[R] = {-0.5, 1.5};
    memcpy(big, fk_bundle_get(&ups[4].msg, "M")->data, sizeof big);
    big[1] = 7.687440341698395e+218;
    tampered(m, srv, ups, K, 1, "M", 2, ms, big, FK_EFORMAT, "client 4 sent 'M' with entry 1");
    tampered(m, srv, ups, K, 1, "M", 1, fs, big, FK_EFORMAT, "wrong shape");
    tampered(m, srv, ups, K, 1, "W", 1, ws, negw, FK_EFORMAT, ">= 0");
    int done;
    assert_int_equal(m->aggregate(srv, 1, 0, ups, K, &done, NULL), FK_OK);
    for (int k = 0; k < K; k++)
        fk_bundle_close(&ups[k].msg);
    /* client: tasks with a bad op, a mis-shaped or non-finite theta, a bad permutation */
    fk_bundle task, out;
    fk_bundle_init(&task);
    fk_bundle_init(&out);
    fk_report rep;
    fk_report_init(&rep);
    fk_err err;
    assert_int_equal(m->task(srv, 1, 1, 2, &task, NULL), FK_OK);
    fk_bundle good;
    assert_int_equal(fk_bundle_copy(&good, &task), FK_OK);
    assert_int_equal(fk_bundle_put_scalar(&task, "op", 7), FK_OK);
    assert_int_equal(m->local_step(cli[2], &task, &out, &rep, &err), FK_EFORMAT);
    assert_non_null(strstr(err.msg, "'op'"));
    fk_bundle_close(&task);
    assert_int_equal(fk_bundle_copy(&task, &good), FK_OK);
    assert_int_equal(fk_bundle_put(&task, "theta", 1, fs, big), FK_OK);
    assert_int_equal(m->local_step(cli[2], &task, &out, &rep, &err), FK_EFORMAT);
    assert_non_null(strstr(err.msg, "wrong shape"));
    big[1] = NAN;
    assert_int_equal(fk_bundle_put(&task, "theta", 2, ms, big), FK_OK);
    assert_int_equal(m->local_step(cli[2], &task, &out, &rep, &err), FK_EFORMAT);
    assert_non_null(strstr(err.msg, "'theta'"));
    fk_bundle_close(&task);
    assert_int_equal(fk_bundle_copy(&task, &good), FK_OK);
    double perm[R] = {0, 0};
    assert_int_equal(fk_bundle_put_vec(&task, "perm", R, perm), FK_OK);
    assert_int_equal(m->local_step(cli[2], &task, &out, &rep, &err), FK_EFORMAT);
    assert_non_null(strstr(err.msg, "permutation"));
    /* the genuine tasks still work, and a non-finite step update is refused */
    phase_updates(m, srv, cli, K, 1, 1, ups);
    memcpy(big, fk_bundle_get(&ups[4].msg, "theta")->data, sizeof big);
    big[0] = INFINITY;
    tampered(m, srv, ups, K, 1, "theta", 2, ms, big, FK_EFORMAT, "'theta' with entry 0");
    tampered(m, srv, ups, K, 1, "w", 1, ws, negw, FK_EFORMAT, ">= 0");
    assert_int_equal(m->aggregate(srv, 1, 1, ups, K, &done, NULL), FK_OK);
    for (int k = 0; k < K; k++)
        fk_bundle_close(&ups[k].msg);
    drive(m, srv, cli, 2, 3);
    /* a non-finite model is refused by evaluate */
    fk_bundle model;
    fk_bundle_init(&model);
    assert_int_equal(m->model(srv, &model, NULL), FK_OK);
    fk_bundle_get(&model, "theta")->data[0] = NAN;
    assert_int_equal(m->evaluate(cli[0], &model, &rep, &err), FK_EFORMAT);
    fk_bundle_close(&model);
    fk_bundle_close(&good);
    fk_bundle_close(&task);
    fk_bundle_close(&out);
    for (int k = 0; k < K; k++)
        m->client_close(cli[k]);
    m->server_close(srv);
    fk_params_close(&p);
    drop(&f);
}

/* pooled-em-mor (federated mixreg EM on the union) reaches the direct fit of the concatenated
 * data (fk_mor_mixreg_fit, what fk_mor_run("pooled-em") runs), ends itself, survives a
 * checkpoint, and lost updates only delay it: the same model bit for bit. */
static void pooled_em_mor_is_the_union_fit(void **state)
{
    (void)state;
    fixture f;
    make(&f);
    fk_params p;
    params(&p);
    const fk_method *m = &fk_method_pooled_em_mor;
    fk_bundle a, b;
    fk_sim_round last;
    fk_sim_opts o = {.rounds = 5000, .seed = 4};
    assert_int_equal(fk_sim_run(m, &p, f.tasks, K, &o, &a, &last, NULL), FK_OK);
    print_message("pooled-em-mor ended after %d of 5000 rounds\n", last.round);
    assert_true(last.round > 2 && last.round < 1000);
    const fk_tensor *cv = fk_bundle_get(&a, "converged"), *th = fk_bundle_get(&a, "theta");
    const fk_tensor *w = fk_bundle_get(&a, "w");
    assert_true(cv && cv->data[0] == 1.0 && th && th->len == (size_t)K * RP && w);

    fk_mor_ws ws;
    assert_int_equal(fk_mor_ws_open(&ws, (size_t)K * N, P, R, NULL), FK_OK);
    double cw[R], cth[RP];
    fk_rng rng;
    fk_rng_init(&rng, 5, 2);
    assert_int_equal(fk_mor_mixreg_fit(f.d.X, f.d.y, (size_t)K * N, P, R, 4, &rng, cw, cth, &ws,
                                       NULL),
                     FK_OK);
    double et = fk_gmm_err_theta(th->data, cth, R, P), ew = fk_gmm_err_w(w->data, cw, R);
    print_message("federated vs direct union fit: theta %.2e, w %.2e apart\n", et, ew);
    assert_true(et < 1e-3 && ew < 1e-3);
    for (int k = 1; k < K; k++)
        assert_memory_equal(th->data + k * RP, th->data, RP * sizeof(double));
    fk_mor_ws_close(&ws);

    o.drop = 0.1;
    fk_sim_round lb;
    assert_int_equal(fk_sim_run(m, &p, f.tasks, K, &o, &b, &lb, NULL), FK_OK);
    print_message("with 10%% of updates lost: %d rounds\n", lb.round);
    assert_true(lb.round > last.round);
    const char *names[] = {"theta", "w", "s2", "loglik"};
    for (int i = 0; i < 4; i++) {
        const fk_tensor *ta = fk_bundle_get(&a, names[i]), *tb = fk_bundle_get(&b, names[i]);
        assert_true(ta && tb && ta->len == tb->len);
        assert_memory_equal(ta->data, tb->data, ta->len * sizeof(double));
    }
    fk_report rep;
    checkpoint_round_trip(m, &p, f.tasks, K, 4, 3, 400, &rep);
    assert_true(isfinite(rep.loss));
    fk_bundle_close(&a);
    fk_bundle_close(&b);

    fk_dataset x; /* class labels are not a regression target */
    assert_int_equal(fk_dataset_init(&x, N, P, 1), FK_OK);
    void *cli = NULL;
    fk_err err;
    assert_int_equal(m->client_init(&cli, &p, &x, 1, K, 4, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "regression target"));
    fk_dataset_close(&x);
    fk_params_close(&p);
    drop(&f);
}

static void keep_rounds(const fk_sim_round *r, void *ctx)
{
    fk_sim_round *rows = ctx;
    if (r->round <= 12)
        rows[r->round - 1] = *r;
}

/* RMSE of the fitted regression per round (no mis-clustering: a data set carries no true
 * components): round 1 scores each client's Local-EM (mixreg) fit, recomputed here from the
 * same restarts; round r scores the model round r started from, which the evaluate op on the
 * model of r - 1 rounds gives too; and the federated fit predicts far better than zero. */
static void rounds_report_rmse(void **state)
{
    (void)state;
    fixture f;
    make(&f);
    fk_params p;
    params(&p);
    enum { T = 6 };
    fk_sim_round rows[12];
    fk_sim_opts o = {.rounds = T, .seed = SEED, .progress = keep_rounds, .ctx = rows};
    fk_bundle model;
    fk_err err;
    const fk_method *ms[] = {&fk_method_fedgrem_mor, &fk_method_fedem_mor,
                             &fk_method_pooled_grem_mor, &fk_method_fedgmm_mor};
    double zero = 0.0; /* the RMSE of predicting 0 (the noise alone gives 1) */
    for (size_t i = 0; i < (size_t)K * N; i++)
        zero += f.d.y[i] * f.d.y[i];
    zero = sqrt(zero / (double)(K * N));
    for (size_t mi = 0; mi < sizeof ms / sizeof *ms; mi++) {
        assert_int_equal(fk_sim_run(ms[mi], &p, f.tasks, K, &o, &model, NULL, &err), FK_OK);
        fk_bundle_close(&model);
        for (int r = 0; r < T; r++) {
            print_message("%s round %d rmse %.6f (predicting 0: %.4f)\n", ms[mi]->name, r + 1,
                          rows[r].rmse, zero);
            assert_true(rows[r].rmse > 0 && rows[r].rmse < zero / 2);
            assert_true(isnan(rows[r].misclust) && isnan(rows[r].ari));
        }
        /* round 1 of fedgrem-mor / fedem-mor: the local fits, by hand (pooled-grem-mor has no
         * local fits: its round 1 is a step of the pooled model) */
        fk_mor_ws ws;
        assert_int_equal(fk_mor_ws_open(&ws, N, P, R, NULL), FK_OK);
        double ss = 0.0;
        for (int k = 0; k < K; k++) {
            fk_rng rng;
            fk_rng_init(&rng, SEED, FK_MOR_INIT_STREAM + (uint64_t)k);
            double w[R], th[RP];
            const double *X = f.tasks[k].X.data, *y = f.tasks[k].y_raw;
            assert_int_equal(fk_mor_mixreg_fit(X, y, N, P, R, 4, &rng, w, th, &ws, NULL), FK_OK);
            (void)fk_mor_estep(X, y, N, P, w, th, NULL, R, ws.G, NULL);
            double e = fk_mor_fit_rmse(X, y, N, P, th, R, ws.G);
            ss += e;
        }
        fk_mor_ws_close(&ws);
        if (ms[mi] != &fk_method_pooled_grem_mor)
            assert_true(fabs(ss / K - rows[0].rmse) < 1e-12);
        /* the last round: the evaluate op on the model it started from */
        fk_report fin[K];
        fk_sim_opts before = {.rounds = T - 1, .seed = SEED, .final_reports = fin};
        assert_int_equal(fk_sim_run(ms[mi], &p, f.tasks, K, &before, &model, NULL, &err), FK_OK);
        fk_bundle_close(&model);
        fk_update ups[K];
        for (int k = 0; k < K; k++)
            ups[k] = (fk_update){.client = k, .report = fin[k]};
        double ev = fk_report_mean(ups, K, offsetof(fk_report, rmse));
        print_message("%s: evaluate op on round %d's model: rmse %.12f (round %d: %.12f)\n",
                      ms[mi]->name, T - 1, ev, T, rows[T - 1].rmse);
        assert_true(fabs(ev - rows[T - 1].rmse) < 1e-12);
    }

    /* pooled-em-mor: once a restart is in EM, the server's best restart is scored */
    fk_sim_opts pe = {.rounds = 12, .seed = 4, .progress = keep_rounds, .ctx = rows};
    assert_int_equal(fk_sim_run(&fk_method_pooled_em_mor, &p, f.tasks, K, &pe, &model, NULL, &err),
                     FK_OK);
    fk_bundle_close(&model);
    assert_true(isnan(rows[0].rmse)); /* the partitions' round: no model yet */
    for (int r = 1; r < 12; r++) { /* round 2 on: the M-step of the partitions on */
        print_message("pooled-em-mor round %d rmse %.6f\n", r + 1, rows[r].rmse);
        assert_true(rows[r].rmse > 0 && rows[r].rmse < zero);
    }
    /* from random partitions to the union fit */
    assert_true(rows[1].rmse > 2 * rows[11].rmse && rows[11].rmse < zero / 2);
    fk_report fin[K];
    fk_sim_opts before = {.rounds = 11, .seed = 4, .final_reports = fin};
    assert_int_equal(
        fk_sim_run(&fk_method_pooled_em_mor, &p, f.tasks, K, &before, &model, NULL, &err), FK_OK);
    fk_bundle_close(&model);
    fk_update ups[K];
    for (int k = 0; k < K; k++)
        ups[k] = (fk_update){.client = k, .report = fin[k]};
    assert_true(fabs(fk_report_mean(ups, K, offsetof(fk_report, rmse)) - rows[11].rmse) < 1e-12);
    fk_params_close(&p);
    drop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(spec_is_the_design),
        cmocka_unit_test(ops_equal_direct),
        cmocka_unit_test(save_load_round_trip),
        cmocka_unit_test(outlier_task_does_not_pull),
        cmocka_unit_test(bad_input),
        cmocka_unit_test(untrusted_messages_refused),
        cmocka_unit_test(pooled_em_mor_is_the_union_fit),
        cmocka_unit_test(rounds_report_rmse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
