#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/mixture/gmm_run.h"
#include "common/methods/mixture/pooled_em.h"
#include "common/models/mixture/gmm.h"
#include "tests/support_gmm.h"
#include "tests/support_ops.h"

enum { K = 10, R = 5, P = 10 }; /* the design of support_gmm.h */

static void params(fk_params *p, const char *restarts)
{
    fk_params_init(p);
    assert_int_equal(fk_params_set(p, "restarts", restarts), FK_OK);
}

static int count_rounds_cb_n;
static void count_rounds(const fk_sim_round *r, void *ctx)
{
    (void)ctx;
    count_rounds_cb_n = r->round;
}

/* Run the job in the simulator until it ends itself; the number of rounds it took in *rounds. */
static void run_job(const fk_params *p, const fixture *f, uint64_t seed, double drop_p,
                    fk_bundle *model, int *rounds)
{
    fk_sim_opts o = {.rounds = fk_pooled_em_rounds(R), .seed = seed, .drop = drop_p,
                     .progress = count_rounds};
    fk_err err;
    if (fk_sim_run(&fk_method_pooled_em, p, f->tasks, K, &o, model, NULL, &err))
        fail_msg("pooled-em: %s", err.msg);
    *rounds = count_rounds_cb_n;
}

static double scalar(const fk_bundle *b, const char *name)
{
    const fk_tensor *t = fk_bundle_get(b, name);
    assert_non_null(t);
    return t->data[0];
}

/* The federated fit reaches the centralised EEE fit of the union (fk_gmm_fit_eee, the code
 * Local-EM runs): the same log-likelihood and, labels matched, the same centres, weights and
 * covariance; and it ends itself long before the round bound. */
static void matches_centralised_fit(void **state)
{
    (void)state;
    fixture f;
    make(&f, 3, 0);
    fk_params p;
    params(&p, "4");
    fk_bundle m;
    int rounds;
    run_job(&p, &f, 5, 0.0, &m, &rounds);
    print_message("pooled-em ended after %d of %d rounds\n", rounds, fk_pooled_em_rounds(R));
    assert_true(rounds > 2 + R && rounds < 500);
    assert_true(scalar(&m, "converged") == 1.0 && scalar(&m, "ready") == 1.0);

    size_t N = 0;
    for (int k = 0; k < K; k++)
        N += f.tasks[k].X.rows;
    double *X = malloc(N * P * sizeof *X), w[R], mu[R * P], sg[P * P];
    assert_non_null(X);
    for (int k = 0, off = 0; k < K; k++) {
        memcpy(X + (size_t)off * P, f.tasks[k].X.data, f.tasks[k].X.rows * P * sizeof *X);
        off += (int)f.tasks[k].X.rows;
    }
    fk_rng rng;
    fk_rng_init(&rng, 9, 1);
    fk_eee_fit c = {.w = w, .mu = mu, .sigma = sg};
    assert_int_equal(fk_gmm_fit_eee(X, N, P, R, 4, &rng, &c, NULL), FK_OK);
    double ll = scalar(&m, "loglik");
    print_message("log-likelihood: federated %.10g, centralised %.10g\n", ll, c.loglik);
    assert_true(fabs(ll - c.loglik) <= 1e-4 * fabs(c.loglik)); /* the EM tolerance is 1e-5 */

    const fk_tensor *th = fk_bundle_get(&m, "theta"), *wt = fk_bundle_get(&m, "w");
    const fk_tensor *st = fk_bundle_get(&m, "sigma");
    assert_true(th->len == (size_t)K * R * P && wt->len == (size_t)K * R);
    assert_true(fk_gmm_err_theta(th->data, mu, R, P) < 0.02);
    assert_true(fk_gmm_err_w(wt->data, w, R) < 1e-3);
    for (int i = 0; i < P * P; i++)
        assert_true(fabs(st->data[i] - sg[i]) < 0.02 * (1 + fabs(sg[i])));
    for (int k = 1; k < K; k++) /* one pooled model for every client */
        assert_memory_equal(th->data + (size_t)k * R * P, th->data, R * P * sizeof(double));
    free(X);
    fk_bundle_close(&m);
    fk_params_close(&p);
    drop(&f);
}

/* Lost updates only delay the fit: a round without every client is repeated with the same
 * draws, so the model is bit for bit the one without losses. */
static void dropouts_only_delay(void **state)
{
    (void)state;
    fixture f;
    make(&f, 4, 1);
    fk_params p;
    params(&p, "3");
    fk_bundle a, b;
    int ra, rb;
    run_job(&p, &f, 8, 0.0, &a, &ra);
    run_job(&p, &f, 8, 0.05, &b, &rb);
    print_message("rounds without losses %d, with 5%% of updates lost %d\n", ra, rb);
    assert_true(rb > ra);
    assert_true(scalar(&b, "repeats") == rb - ra && scalar(&a, "repeats") == 0);
    const char *names[] = {"theta", "w", "sigma", "loglik"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        const fk_tensor *ta = fk_bundle_get(&a, names[i]), *tb = fk_bundle_get(&b, names[i]);
        assert_true(ta && tb && ta->len == tb->len);
        assert_memory_equal(ta->data, tb->data, ta->len * sizeof(double));
    }
    fk_bundle_close(&a);
    fk_bundle_close(&b);
    fk_params_close(&p);
    drop(&f);
}

/* A client that stops answering does not keep the job waiting to its last round: after
 * max_repeats incomplete rounds in a row the job fails with one clear error. */
static void gone_client_ends_the_job(void **state)
{
    (void)state;
    fixture f;
    make(&f, 4, 0);
    fk_params p;
    params(&p, "2");
    assert_int_equal(fk_params_set(&p, "max_repeats", "5"), FK_OK);
    fk_sim_opts o = {.rounds = 1000, .seed = 2, .drop = 0.6}; /* all 10 arrive: 1 round in 10^4 */
    fk_bundle m;
    fk_err err;
    assert_int_equal(fk_sim_run(&fk_method_pooled_em, &p, f.tasks, K, &o, &m, NULL, &err),
                     FK_ESTATE);
    print_message("%s\n", err.msg);
    assert_non_null(strstr(err.msg, "6 rounds in a row lacked a client"));
    assert_non_null(strstr(err.msg, "max_repeats (5)"));
    assert_int_equal(fk_params_set(&p, "max_repeats", "-1"), FK_OK);
    assert_int_not_equal(fk_sim_run(&fk_method_pooled_em, &p, f.tasks, K, &o, &m, NULL, &err),
                         FK_OK);
    assert_non_null(strstr(err.msg, "max_repeats"));
    fk_params_close(&p);
    drop(&f);
}

/* Checkpoint mid-seeding and mid-Lloyd, restore into fresh states, finish: same model as
 * uninterrupted and as the simulator; the clients score it (mis-clustering of true labels). */
static void save_load_round_trip(void **state)
{
    (void)state;
    fixture f;
    make(&f, 5, 1);
    fk_params p;
    params(&p, "2");
    fk_report rep;
    checkpoint_round_trip(&fk_method_pooled_em, &p, f.tasks, K, 77, 3, 200, &rep);
    assert_true(isfinite(rep.loss));
    checkpoint_round_trip(&fk_method_pooled_em, &p, f.tasks, K, 77, 9, 200, &rep);
    assert_true(rep.error >= 0 && rep.error < 0.5);
    fk_params_close(&p);
    drop(&f);
}

/* Before any restart reaches EM the model says so instead of inventing one, and fk_gmm_run
 * refuses a model that has not converged. */
static void unfinished_model(void **state)
{
    (void)state;
    fixture f;
    make(&f, 6, 0);
    fk_params p;
    params(&p, "2");
    fk_sim_opts o = {.rounds = 3, .seed = 1};
    fk_bundle m;
    assert_int_equal(fk_sim_run(&fk_method_pooled_em, &p, f.tasks, K, &o, &m, NULL, NULL), FK_OK);
    assert_true(scalar(&m, "ready") == 0.0 && scalar(&m, "converged") == 0.0);
    assert_null(fk_bundle_get(&m, "theta"));
    fk_bundle_close(&m);
    fk_gmm_result r;
    assert_int_equal(fk_gmm_run("pooled-em", &p, f.tasks, K, 1, 1, NULL, NULL, &r, NULL), FK_OK);
    assert_int_equal(r.K, K);
    assert_non_null(r.sigma);
    fk_gmm_result_close(&r);
    fk_params_close(&p);
    drop(&f);
}

static void bad_input(void **state)
{
    (void)state;
    fixture f;
    make(&f, 7, 0);
    fk_params p;
    params(&p, "2");
    fk_err err;
    fk_sim_opts o = {.rounds = 50, .seed = 1};
    fk_bundle m;
    fk_dataset keep = f.tasks[3], narrow, small;
    assert_int_equal(fk_dataset_init(&narrow, 150, P - 1, 0), FK_OK);
    memcpy(narrow.X.data, f.tasks[2].X.data, 150 * (P - 1) * sizeof(double));
    f.tasks[3] = narrow;
    assert_int_equal(fk_sim_run(&fk_method_pooled_em, &p, f.tasks, K, &o, &m, NULL, &err),
                     FK_EINVAL);
    assert_non_null(strstr(err.msg, "p mismatch"));
    assert_int_equal(fk_dataset_subset(&small, &keep, (int[]){0, 1, 2}, 3), FK_OK);
    f.tasks[3] = small;
    assert_int_not_equal(fk_sim_run(&fk_method_pooled_em, &p, f.tasks, K, &o, &m, NULL, &err),
                         FK_OK);
    assert_non_null(strstr(err.msg, "R = 5"));
    f.tasks[3] = keep;
    double save = f.tasks[5].X.data[17];
    f.tasks[5].X.data[17] = NAN;
    assert_int_not_equal(fk_sim_run(&fk_method_pooled_em, &p, f.tasks, K, &o, &m, NULL, &err),
                         FK_OK);
    assert_non_null(strstr(err.msg, "NaN"));
    f.tasks[5].X.data[17] = save;
    assert_int_equal(fk_params_set(&p, "restarts", "0"), FK_OK);
    assert_int_not_equal(fk_sim_run(&fk_method_pooled_em, &p, f.tasks, K, &o, &m, NULL, &err),
                         FK_OK);
    assert_non_null(strstr(err.msg, "restarts"));
    fk_dataset_close(&narrow);
    fk_dataset_close(&small);
    fk_params_close(&p);
    drop(&f);
}

/* Updates, tasks and checkpoints are untrusted: wrong shapes, negative counts, values out of
 * range and bad factors are refused before any state changes. */
static void untrusted_messages_refused(void **state)
{
    (void)state;
    fixture f;
    make(&f, 8, 0);
    fk_params p;
    params(&p, "2");
    const fk_method *m = &fk_method_pooled_em;
    void *srv, *cli[K];
    assert_int_equal(m->server_init(&srv, &p, K, 3, NULL), FK_OK);
    for (int k = 0; k < K; k++)
        assert_int_equal(m->client_init(&cli[k], &p, &f.tasks[k], k, K, 3, NULL), FK_OK);
    drive(m, srv, cli, 1, 6); /* sums, scatter, seeding, into Lloyd */
    fk_update ups[K];
    phase_updates(m, srv, cli, K, 7, 0, ups);
    const uint64_t sr[2] = {2, R}, bad_shape[2] = {2, R + 1}, sv[1] = {2};
    double neg[2 * R] = {-1.0}, big[2] = {1e300, 0}, wide[2 * (R + 1)] = {0};
    tampered(m, srv, ups, K, 7, "nr", 2, bad_shape, wide, FK_EFORMAT, "wrong shape");
    tampered(m, srv, ups, K, 7, "nr", 2, sr, neg, FK_EFORMAT, ">= 0");
    tampered(m, srv, ups, K, 7, "tot", 1, sv, big, FK_EFORMAT, "'tot'");
    fk_bundle before, after;
    fk_bundle_init(&before);
    fk_bundle_init(&after);
    assert_int_equal(m->save(srv, &before, NULL), FK_OK);
    ups[4].client = 3; /* a repeated client */
    fk_err err;
    int done;
    assert_int_equal(m->aggregate(srv, 7, 0, ups, K, &done, &err), FK_EINVAL);
    assert_int_equal(m->save(srv, &after, NULL), FK_OK);
    const fk_tensor *c0 = fk_bundle_get(&before, "C"), *c1 = fk_bundle_get(&after, "C");
    assert_memory_equal(c0->data, c1->data, c0->len * sizeof(double)); /* nothing changed */

    /* a task whose factor has a zero on its diagonal (the client would divide by it) */
    fk_bundle task, up;
    fk_bundle_init(&task);
    fk_bundle_init(&up);
    assert_int_equal(m->task(srv, 7, 0, 0, &task, NULL), FK_OK);
    double *stage = (double *)fk_bundle_get(&task, "stage")->data;
    stage[0] = 2; /* EM */
    fk_report rep;
    assert_int_equal(m->local_step(cli[0], &task, &up, &rep, &err), FK_EFORMAT);
    assert_non_null(strstr(err.msg, "Cholesky"));
    stage[0] = 9;
    assert_int_equal(m->local_step(cli[0], &task, &up, &rep, &err), FK_EFORMAT);

    /* a checkpoint with a restart stage out of range */
    double *st = (double *)fk_bundle_get(&before, "stage")->data;
    st[1] = 7;
    void *srv2;
    assert_int_equal(m->server_init(&srv2, &p, K, 3, NULL), FK_OK);
    assert_int_equal(m->load(srv2, &before, &err), FK_EFORMAT);
    assert_non_null(strstr(err.msg, "stage"));
    st[1] = 1;
    assert_int_equal(fk_params_set(&p, "R", "4"), FK_OK);
    void *srv3;
    assert_int_equal(m->server_init(&srv3, &p, K, 3, NULL), FK_OK);
    assert_int_equal(m->load(srv3, &before, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "R=5"));

    m->server_close(srv3);
    m->server_close(srv2);
    fk_bundle_close(&task);
    fk_bundle_close(&up);
    fk_bundle_close(&before);
    fk_bundle_close(&after);
    for (int k = 0; k < K; k++) {
        fk_bundle_close(&ups[k].msg);
        m->client_close(cli[k]);
    }
    m->server_close(srv);
    fk_params_close(&p);
    drop(&f);
}

static void keep_rounds(const fk_sim_round *r, void *ctx)
{
    fk_sim_round *rows = ctx;
    if (r->round <= 400)
        rows[r->round - 1] = *r;
}

/* Every round once the server has a model (some restart in EM) reports the mis-clustering
 * and adjusted Rand index of the clients' rows under that model: the server's best restart,
 * the one srv_model hands out, not each client's own best. Checked against the evaluate op on
 * the model the last round started from (the run stopped one round earlier): the same
 * clusters, up to the rounding of centred against uncentred coordinates. */
static void rounds_report_misclustering_and_ari(void **state)
{
    (void)state;
    fixture f;
    make(&f, 3, 0);
    assert_non_null(f.tasks[0].y);
    fk_params p;
    params(&p, "3");
    static fk_sim_round rows[400];
    fk_sim_round last;
    fk_sim_opts o = {.rounds = 400, .seed = 2, .progress = keep_rounds, .ctx = rows};
    fk_bundle m;
    fk_err err;
    assert_int_equal(fk_sim_run(&fk_method_pooled_em, &p, f.tasks, K, &o, &m, &last, &err), FK_OK);
    fk_bundle_close(&m);
    int L = last.round, first = 0;
    assert_true(L > 3 && L < 400);
    for (int r = 0; r < L; r++) {
        assert_true(isnan(rows[r].rmse));
        if (isnan(rows[r].misclust)) { /* sums, scatter, seeding, Lloyd: no model yet */
            assert_true(first == 0 && isnan(rows[r].ari));
            continue;
        }
        if (!first)
            first = r + 1;
        assert_true(rows[r].misclust >= 0 && rows[r].misclust <= 1);
        assert_true(rows[r].ari >= -1 && rows[r].ari <= 1);
        assert_true(fabs(rows[r].accuracy - (1 - rows[r].misclust)) < 1e-15);
    }
    print_message("first scored round %d of %d: misclust %.4f ari %.4f; last %.4f ari %.4f\n",
                  first, L, rows[first - 1].misclust, rows[first - 1].ari, last.misclust, last.ari);
    assert_true(first > 1 && first < L);
    assert_true(last.misclust < 0.2 && last.ari > 0.6);

    fk_report fin[K];
    fk_sim_opts before = {.rounds = L - 1, .seed = 2, .final_reports = fin};
    assert_int_equal(fk_sim_run(&fk_method_pooled_em, &p, f.tasks, K, &before, &m, NULL, &err),
                     FK_OK);
    fk_bundle_close(&m);
    fk_update ups[K];
    size_t n = 0;
    for (int k = 0; k < K; k++) {
        ups[k] = (fk_update){.client = k, .report = fin[k]};
        n += f.tasks[k].X.rows;
    }
    double mc = fk_report_mean(ups, K, offsetof(fk_report, misclust));
    double ari = fk_report_mean(ups, K, offsetof(fk_report, ari));
    print_message("evaluate op on round %d's model: misclust %.6f ari %.6f (round: %.6f %.6f)\n",
                  L - 1, mc, ari, last.misclust, last.ari);
    assert_true(fabs(mc - last.misclust) <= 2.0 / (double)n);
    assert_true(fabs(ari - last.ari) <= 0.005);
    fk_params_close(&p);
    drop(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(matches_centralised_fit),
        cmocka_unit_test(dropouts_only_delay),
        cmocka_unit_test(gone_client_ends_the_job),
        cmocka_unit_test(save_load_round_trip),
        cmocka_unit_test(unfinished_model),
        cmocka_unit_test(bad_input),
        cmocka_unit_test(untrusted_messages_refused),
        cmocka_unit_test(rounds_report_misclustering_and_ari),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
