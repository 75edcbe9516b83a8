/* Job type sfl, multiclass = ovo (spec A14): one-vs-one pair problems inside the one-shot
 * critical-sample job, majority vote, per-problem upload checks, clients lacking classes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"
#include "common/methods/sfl/sfl.h"
#include "common/methods/sfl/sfl_int.h"
#include "common/methods/sim.h"
#include "tests/bundle_assert.h"
#include "tests/support_sfl.h"

static const fk_method *M = &fk_method_sfl;

/* Three Gaussian blobs (labels 10, 20, 30, sd 0.7) at (0, 0), (4, 0), (2, 3.5); client k
 * holds the classes with bit j of mask set. */
static void blobs(size_t n, int mask, uint64_t seed, fk_dataset *ds)
{
    static const double cx[3] = {0, 4, 2}, cy[3] = {0, 0, 3.5}, lab_of[3] = {10, 20, 30};
    fk_err err = {0};
    assert_int_equal(fk_dataset_init(ds, n, 2, 1), FK_OK);
    double *lab = malloc(n * sizeof *lab);
    assert_non_null(lab);
    fk_rng r;
    fk_rng_init(&r, seed, 77);
    int held[3], nh = 0;
    for (int j = 0; j < 3; j++)
        if (mask >> j & 1)
            held[nh++] = j;
    for (size_t i = 0; i < n; i++) {
        int j = held[i % (size_t)nh];
        ds->X.data[2 * i] = cx[j] + 0.7 * fk_rng_normal(&r);
        ds->X.data[2 * i + 1] = cy[j] + 0.7 * fk_rng_normal(&r);
        lab[i] = lab_of[j];
    }
    assert_int_equal(fk_dataset_set_labels(ds, lab, &err), FK_OK);
    free(lab);
}

static void job(fk_params *p)
{
    fk_params_init(p);
    assert_int_equal(fk_params_set(p, "raw_sample_upload", "acknowledged"), FK_OK);
    assert_int_equal(fk_params_set(p, "local.allow_raw_upload", "true"), FK_OK);
    assert_int_equal(fk_params_set(p, "multiclass", "ovo"), FK_OK);
    assert_int_equal(fk_params_set(p, "classes", "10,20,30"), FK_OK);
    assert_int_equal(fk_params_set(p, "width_min", "0.5"), FK_OK);
    assert_int_equal(fk_params_set(p, "width_max", "2"), FK_OK);
    assert_int_equal(fk_params_set(p, "n_widths", "3"), FK_OK);
    /* kernels at each party's rows in the raw units: what these tests check (the default
     * atoms = auto and the federated standardisation: test_methods_sfl_scale.c) */
    assert_int_equal(fk_params_set(p, "atoms", "samples"), FK_OK);
    assert_int_equal(fk_params_set(p, "x_scale", "1"), FK_OK);
}

/* The pairs enumerate the upper triangle in order. */
static void pairs(void **state)
{
    (void)state;
    assert_int_equal(fk__sfl_ovo_pairs(3), 3);
    assert_int_equal(fk__sfl_ovo_pairs(10), 45);
    int q = 0;
    for (int a = 0; a < 6; a++)
        for (int b = a + 1; b < 6; b++, q++) {
            int a2, b2;
            fk__sfl_ovo_pair(6, q, &a2, &b2);
            assert_int_equal(a2, a);
            assert_int_equal(b2, b);
        }
}

/* Votes (spec §6.6): one kernel per pair at the origin, f = its weight; f >= 0 votes a, else
 * b; a three-way tie goes to the larger sum of |f| over the won problems, then to the smaller
 * class; an empty pair (no kernels, f = 0) votes a. */
static void vote_ties(void **state)
{
    (void)state;
    double s[6] = {0, 0, 0, 0, 0, 0}, w[3] = {1, 1, 1}, X[2] = {0, 0};
    double f[1], margin[3];
    int votes[3], pred[1];
    struct {
        double c[3];
        int want;
    } cases[] = {
        {{-1, 1, -1}, 0}, /* votes 1, 0, 2: a tie of all three, the smallest id */
        {{1, 1, 1}, 0},   /* 0 beats 1 and 2 */
        {{-1, 1, 1}, 1},  /* 1, 0, 1 */
        {{-1, -1, -1}, 2}, /* 1, 2, 2 */
        {{-1, 2, -1}, 0},  /* a tie; class 0 won its problem by |f| = 2 */
        {{-2, 1, -1}, 1},  /* a tie; class 1 by 2 */
        {{-1, 1, -3}, 2},  /* a tie; class 2 by 3 */
        {{-1, 1, -1.5}, 2}, /* a tie; margins 1, 1, 1.5 */
        {{-1, -1, 2}, 1},  /* 1, 2, 1: two votes for 1 beat any margin */
    };
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        fk_sfl_model m = {3, 2, s, w, cases[t].c};
        double mK[3] = {1, 1, 1};
        fk__sfl_ovo_vote(&m, mK, 3, X, 1, f, votes, margin, pred);
        assert_int_equal(pred[0], cases[t].want);
    }
    /* pair (0,1) empty -> votes 0; (0,2) -> 2; (1,2) -> 2: class 2 */
    double c2[2] = {-1, -1};
    fk_sfl_model m = {2, 2, s, w, c2};
    double mK[3] = {0, 1, 1};
    fk__sfl_ovo_vote(&m, mK, 3, X, 1, f, votes, margin, pred);
    assert_int_equal(pred[0], 2);
    /* pair (1,2) empty votes 1; (0,1) -> 1; (0,2) -> 0: class 1 */
    double c3[2] = {-1, 1};
    fk_sfl_model m3 = {2, 2, s, w, c3};
    double mK3[3] = {1, 1, 0};
    fk__sfl_ovo_vote(&m3, mK3, 3, X, 1, f, votes, margin, pred);
    assert_int_equal(pred[0], 1);
}

/* The simulator runs a 3-class job on three clients, one holding classes {10, 20} only, one
 * {30} only; the voted model classifies held-out rows of all three classes. */
static void three_classes(void **state)
{
    (void)state;
    enum { K = 3 };
    fk_dataset ds[K], test;
    blobs(60, 7, 1, &ds[0]);
    blobs(40, 3, 2, &ds[1]); /* lacks class 30 */
    blobs(30, 4, 3, &ds[2]); /* holds class 30 only: pairs (10,30), (20,30) one-sided */
    blobs(300, 7, 9, &test);
    fk_params p;
    job(&p);
    fk_report fin[K];
    fk_sim_opts o = {.rounds = 1, .seed = 5, .final_reports = fin};
    fk_bundle model, model2;
    fk_sim_round last;
    fk_err err = {0};
    assert_int_equal(fk_sim_run(M, &p, ds, K, &o, &model, &last, &err), FK_OK);
    assert_int_equal(last.participants, K);
    assert_true(last.accuracy >= 0.9); /* the round line: the pairwise local accuracy */
    const fk_tensor *mK = fk_bundle_get(&model, "mK");
    assert_non_null(mK);
    assert_int_equal(mK->len, 3);
    double tot = 0;
    for (int q = 0; q < 3; q++) {
        assert_true(mK->data[q] > 0);
        tot += mK->data[q];
    }
    assert_true(tot == fk_test_scalar(&model, "K"));
    double rows = fk_test_scalar(&model, "rows_union");
    assert_true(rows > 0 && rows < 130); /* only critical rows travelled */
    for (int k = 0; k < K; k++)
        assert_true(fin[k].accuracy >= 0.9);
    void *tc = NULL;
    assert_int_equal(M->client_init(&tc, &p, &test, 0, K, 5, &err), FK_OK);
    fk_report r;
    fk_report_init(&r);
    assert_int_equal(M->evaluate(tc, &model, &r, &err), FK_OK);
    print_message("ovo 3 blobs: held-out accuracy %.4f, union rows %g of 130, kernels %g\n",
                  r.accuracy, rows, tot);
    assert_true(r.accuracy >= 0.95);
    /* a model whose per-pair counts do not add up is refused by an ovo client */
    fk_bundle_clear(&model);
    assert_int_equal(fk_sim_run(M, &p, ds, K, &o, &model2, NULL, &err), FK_OK);
    ((fk_tensor *)fk_bundle_get(&model2, "mK"))->data[0] += 1; /* counts no longer sum to K */
    assert_int_equal(M->evaluate(tc, &model2, &r, &err), FK_EFORMAT);
    M->client_close(tc);
    fk_bundle_close(&model);
    fk_bundle_close(&model2);
    fk_params_close(&p);
    for (int k = 0; k < K; k++)
        fk_dataset_close(&ds[k]);
    fk_dataset_close(&test);
}

/* Bad per-problem tensors are refused (a dropout); the checkpoint round trip of the ovo state
 * resumes to the same model; the distinct-row cap holds. */
static void bad_uploads_and_checkpoint(void **state)
{
    (void)state;
    enum { K = 2 };
    fk_dataset ds[K];
    blobs(45, 7, 4, &ds[0]);
    blobs(30, 7, 5, &ds[1]);
    fk_params p;
    job(&p);
    assert_int_equal(fk_params_set(&p, "max_upload_fraction", "0.2"), FK_OK);
    void *srv = NULL, *srv2 = NULL, *cli[K];
    fk_err err = {0};
    fk_test_sfl_open(&p, ds, K, 1, &srv, cli);
    fk_update ups[K];
    int done = 0;
    fk_test_sfl_phase(srv, cli, K, 0, ups);
    /* phase 0: per-pair counts missing or above n */
    fk_tensor *np = (fk_tensor *)fk_bundle_get(&ups[0].msg, "np");
    assert_non_null(np);
    assert_true(np->data[0] == 30); /* 15 rows of each class */
    np->data[0] = 46;
    assert_int_equal(M->check_update(srv, 1, 0, &ups[0], &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "'np'"));
    np->data[0] = 30;
    assert_int_equal(M->aggregate(srv, 1, 0, ups, K, &done, &err), FK_OK);
    fk_test_sfl_close_ups(ups, K);
    fk_bundle ck;
    fk_bundle_init(&ck);
    fk_test_sfl_restart(srv, &p, K, 1, &ck, &srv2);
    fk_test_sfl_phase(srv, cli, K, 1, ups);
    fk_update *u = &ups[0];
    double D = fk_test_scalar(&u->msg, "rows");
    assert_true(D > 1 && D <= ceil(0.2 * 45)); /* the cap counts distinct rows */
    const fk_tensor *pc = fk_bundle_get(&u->msg, "pc");
    assert_non_null(pc);
    assert_int_equal(pc->len, 3);
    fk_test_sfl_refuse(srv, u, "x", 1, NAN, "'x'");
    fk_test_sfl_refuse(srv, u, "cls", 0, 3, "'cls'");
    fk_test_sfl_refuse(srv, u, "cls", 0, 0.5, "'cls'");
    fk_test_sfl_refuse(srv, u, "rl", 0, 0, "'rl'");
    fk_test_sfl_refuse(srv, u, "rl", 0, INFINITY, "'rl'");
    fk_test_sfl_refuse(srv, u, "ri", 0, D, "'ri'");
    fk_test_sfl_refuse(srv, u, "pc", 0, pc->data[0] + 1,
                       "'ri'"); /* the lists' length no longer matches */
    /* a row listed for a pair its class is not in */
    const fk_tensor *cl = fk_bundle_get(&u->msg, "cls");
    const fk_tensor *ri = fk_bundle_get(&u->msg, "ri");
    size_t bad_row = 0;
    while (bad_row < cl->len && cl->data[bad_row] != 2)
        bad_row++;
    if (bad_row < cl->len && pc->data[0] > 0) /* problem 0 is (10, 20): class 30 is foreign */
        fk_test_sfl_refuse(srv, u, "ri", 0, (double)bad_row, "problem 0");
    (void)ri;
    fk_test_sfl_refuse(srv, u, "rows", 0, D + 1, "client 0");
    /* too many distinct rows for the job's cap */
    fk_test_sfl_refuse(srv, u, "rows", 0, ceil(0.2 * 45) + 1, "max_upload_fraction");
    /* the server solves; a resumed server (checkpoint between the phases) solves the same */
    assert_int_equal(M->aggregate(srv, 1, 1, ups, K, &done, &err), FK_OK);
    assert_int_equal(done, 1);
    assert_int_equal(M->aggregate(srv2, 1, 1, ups, K, &done, &err), FK_OK);
    fk_bundle m1, m2, ck2;
    fk_bundle_init(&m1);
    fk_bundle_init(&m2);
    fk_bundle_init(&ck2);
    assert_int_equal(M->model(srv, &m1, &err), FK_OK);
    assert_int_equal(M->model(srv2, &m2, &err), FK_OK);
    assert_bundles_equal(&m1, &m2);
    fk_test_sfl_restart(srv, &p, K, 1, &ck, &srv2); /* after the solve */
    fk_bundle_clear(&m2);
    assert_int_equal(M->model(srv2, &m2, &err), FK_OK);
    assert_bundles_equal(&m1, &m2);
    assert_int_equal(M->save(srv2, &ck2, &err), FK_OK);
    assert_bundles_equal(&ck, &ck2);
    /* a corrupt ovo checkpoint is refused */
    fk_tensor *mk = (fk_tensor *)fk_bundle_get(&ck2, "mK");
    assert_non_null(mk);
    mk->data[0] += 1;
    assert_int_equal(M->load(srv2, &ck2, &err), FK_EFORMAT);
    fk_bundle_clear(&m2);
    assert_int_equal(M->model(srv2, &m2, &err), FK_OK);
    assert_bundles_equal(&m1, &m2);
    fk_test_sfl_close_ups(ups, K);
    for (int k = 0; k < K; k++) {
        M->client_close(cli[k]);
        fk_dataset_close(&ds[k]);
    }
    M->server_close(srv);
    M->server_close(srv2);
    fk_bundle_close(&ck);
    fk_bundle_close(&ck2);
    fk_bundle_close(&m1);
    fk_bundle_close(&m2);
    fk_params_close(&p);
}

/* Per-problem diagnostics (spec §6.4): each upload carries "pd" (problems x 7: status,
 * iterations, violation, dual, primal, critical rows, not-converged rows), -1 and zeros for a
 * problem the client skipped; check_update refuses bad rows naming 'pd'; the model summarises
 * them per pair (clients that solved it, worst status, critical rows) and a checkpoint keeps
 * the summary. */
static void pair_diagnostics(void **state)
{
    (void)state;
    enum { K = 3 };
    fk_dataset ds[K];
    blobs(45, 7, 11, &ds[0]);
    blobs(30, 3, 12, &ds[1]); /* classes 10, 20: solves (10,30), (20,30) one-sided */
    blobs(24, 4, 13, &ds[2]); /* class 30 only: skips (10,20) */
    fk_params p;
    job(&p);
    void *srv = NULL, *srv2 = NULL, *cli[K];
    fk_err err = {0};
    fk_test_sfl_open(&p, ds, K, 1, &srv, cli);
    fk_update ups[K];
    int done = 0;
    fk_test_sfl_uploads(srv, cli, K, ups);
    double crit_sum[3] = {0, 0, 0};
    for (int k = 0; k < K; k++) {
        const fk_tensor *pd = fk_bundle_get(&ups[k].msg, "pd"),
                        *pc = fk_bundle_get(&ups[k].msg, "pc");
        assert_non_null(pd);
        assert_int_equal(pd->ndim, 2);
        assert_int_equal(pd->shape[0], 3);
        assert_int_equal(pd->shape[1], FK__SFL_PD);
        double nc = 0;
        for (int q = 0; q < 3; q++) {
            const double *d = pd->data + q * FK__SFL_PD;
            if (k == 2 && q == 0) { /* skipped */
                assert_true(d[FK__SFL_PD_STATUS] == -1);
                for (int j = 1; j < FK__SFL_PD; j++)
                    assert_true(d[j] == 0);
                continue;
            }
            assert_true(d[FK__SFL_PD_STATUS] == FK_SFL_CONVERGED);
            assert_true(d[FK__SFL_PD_ITERS] >= 1 && d[FK__SFL_PD_ITERS] <= 40000);
            assert_true(d[FK__SFL_PD_VIOL] >= 0 && d[FK__SFL_PD_VIOL] < 1e-3);
            /* converged: primal and dual values agree (relative gap <= 1e-4, §3.9) */
            assert_true(fabs(d[FK__SFL_PD_PRIMAL] - d[FK__SFL_PD_DUAL]) <=
                        1e-3 * fmax(1, fabs(d[FK__SFL_PD_PRIMAL])));
            assert_true(d[FK__SFL_PD_CRIT] >= pc->data[q] && d[FK__SFL_PD_CRIT] >= 1);
            crit_sum[q] += d[FK__SFL_PD_CRIT];
            nc += d[FK__SFL_PD_NC];
        }
        assert_true(nc == fk_test_scalar(&ups[k].msg, "not_converged"));
        assert_true(ups[k].report.loss > 0); /* the summed primal values: job status's loss */
    }
    fk_update *u = &ups[2];
    double T2 = 2 * 20000; /* two phases of the default T_client */
    fk_test_sfl_refuse(srv, u, "pd", 0 * FK__SFL_PD + FK__SFL_PD_ITERS, 5,
                       "'pd' row 0"); /* skipped */
    size_t r1 = 1 * FK__SFL_PD;
    fk_test_sfl_refuse(srv, u, "pd", r1 + FK__SFL_PD_STATUS, 3, "'pd' row 1");
    fk_test_sfl_refuse(srv, u, "pd", r1 + FK__SFL_PD_STATUS, -1,
                       "'pd' row 1"); /* skipped, with values */
    fk_test_sfl_refuse(srv, u, "pd", r1 + FK__SFL_PD_ITERS, 0, "'pd' row 1");
    fk_test_sfl_refuse(srv, u, "pd", r1 + FK__SFL_PD_ITERS, T2 + 1, "'pd' row 1");
    fk_test_sfl_refuse(srv, u, "pd", r1 + FK__SFL_PD_ITERS, 2.5, "'pd' row 1");
    fk_test_sfl_refuse(srv, u, "pd", r1 + FK__SFL_PD_VIOL, -1e-3, "'pd' row 1");
    fk_test_sfl_refuse(srv, u, "pd", r1 + FK__SFL_PD_DUAL, NAN, "'pd' row 1");
    fk_test_sfl_refuse(srv, u, "pd", r1 + FK__SFL_PD_PRIMAL, INFINITY, "'pd' row 1");
    fk_test_sfl_refuse(srv, u, "pd", r1 + FK__SFL_PD_CRIT,
                       fk_bundle_get(&u->msg, "pc")->data[1] - 1, "'pd' row 1");
    fk_test_sfl_refuse(srv, u, "pd", r1 + FK__SFL_PD_CRIT, 25, "'pd' row 1"); /* above n = 24 */
    double nc1 = fk_bundle_get(&u->msg, "pd")->data[r1 + FK__SFL_PD_NC];
    fk_test_sfl_refuse(srv, u, "pd", r1 + FK__SFL_PD_NC, nc1 + 1,
                       "'not_converged'"); /* sum differs */
    fk_test_sfl_refuse(srv, u, "pd", r1 + FK__SFL_PD_NC, -1, "'pd' row 1");
    /* a missing or misshapen tensor */
    fk_tensor *pd = (fk_tensor *)fk_bundle_get(&u->msg, "pd");
    pd->shape[1] = FK__SFL_PD - 1;
    pd->shape[0] = (uint64_t)(pd->len / (FK__SFL_PD - 1));
    assert_int_equal(M->check_update(srv, 1, 1, u, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "'pd'"));
    pd->shape[0] = 3;
    pd->shape[1] = FK__SFL_PD;
    assert_int_equal(M->check_update(srv, 1, 1, u, &err), FK_OK);
    /* the summary per pair in the model, the same after a checkpoint round trip */
    fk_bundle ck, m1, m2;
    fk_bundle_init(&ck);
    fk_bundle_init(&m1);
    fk_bundle_init(&m2);
    assert_int_equal(M->aggregate(srv, 1, 1, ups, K, &done, &err), FK_OK);
    assert_int_equal(M->model(srv, &m1, &err), FK_OK);
    const fk_tensor *pcl = fk_bundle_get(&m1, "pair_clients"),
                    *pst = fk_bundle_get(&m1, "pair_client_status"),
                    *pcr = fk_bundle_get(&m1, "pair_critical"),
                    *pnc = fk_bundle_get(&m1, "pair_not_converged"),
                    *pit = fk_bundle_get(&m1, "pair_client_iters"),
                    *pvi = fk_bundle_get(&m1, "pair_client_viol");
    assert_true(pcl && pst && pcr && pnc && pit && pvi);
    static const double want_clients[3] = {2, 3, 3};
    for (int q = 0; q < 3; q++) {
        assert_true(pcl->data[q] == want_clients[q]);
        assert_true(pst->data[q] == FK_SFL_CONVERGED);
        assert_true(pcr->data[q] == crit_sum[q]);
        assert_true(pit->data[q] >= 1 && pvi->data[q] >= 0 && pnc->data[q] >= 0);
    }
    fk_test_sfl_restart(srv, &p, K, 1, &ck, &srv2);
    assert_int_equal(M->model(srv2, &m2, &err), FK_OK);
    assert_bundles_equal(&m1, &m2);
    /* a checkpoint with a bad summary is refused and changes nothing */
    fk_tensor *pg = (fk_tensor *)fk_bundle_get(&ck, "pdiag");
    assert_non_null(pg);
    pg->data[1] = 7; /* problem 0's worst status */
    assert_int_equal(M->load(srv2, &ck, &err), FK_EFORMAT);
    fk_bundle_clear(&m2);
    assert_int_equal(M->model(srv2, &m2, &err), FK_OK);
    assert_bundles_equal(&m1, &m2);
    fk_test_sfl_close_ups(ups, K);
    for (int k = 0; k < K; k++) {
        M->client_close(cli[k]);
        fk_dataset_close(&ds[k]);
    }
    M->server_close(srv);
    M->server_close(srv2);
    fk_bundle_close(&ck);
    fk_bundle_close(&m1);
    fk_bundle_close(&m2);
    fk_params_close(&p);
}

/* Built-in data of `fedkern sim sfl` (the sim_data op): under multiclass = ovo one blob per
 * listed class, client k lacking class k mod n_cls; the job runs on them and its voted model
 * classifies a held-out draw. Without ovo the clients are the binary E3.1 cells. */
static void builtin_multiclass_data(void **state)
{
    (void)state;
    enum { K = 4 };
    fk_params p;
    job(&p);
    assert_int_equal(fk_params_set(&p, "classes", "10,20,30,40"), FK_OK);
    assert_int_equal(fk_params_set(&p, "sim_n", "40"), FK_OK);
    fk_dataset ds[K];
    memset(ds, 0, sizeof ds);
    fk_err err = {0};
    assert_non_null(M->sim_data);
    assert_int_equal(M->sim_data(&p, K, 3, ds, NULL, &err), FK_OK);
    for (int k = 0; k < K; k++) {
        assert_int_equal(ds[k].X.rows, 40);
        assert_int_equal(ds[k].X.cols, 2);
        assert_int_equal(ds[k].n_classes, 4);
        int seen[4] = {0};
        for (size_t i = 0; i < 40; i++)
            seen[ds[k].y[i]]++;
        for (int j = 0; j < 4; j++) /* client k lacks class k, holds the others evenly */
            assert_int_equal(seen[j], j == k ? 0 : (int)(40 / 3) + (j < 40 % 3 + (j > k)));
    }
    fk_report fin[K];
    fk_sim_opts o = {.rounds = 1, .seed = 3, .final_reports = fin};
    fk_bundle model;
    fk_sim_round last;
    assert_int_equal(fk_sim_run(M, &p, ds, K, &o, &model, &last, &err), FK_OK);
    assert_int_equal(last.participants, K);
    const fk_tensor *mK = fk_bundle_get(&model, "mK");
    assert_non_null(mK);
    assert_int_equal(mK->len, 6);
    static const double cls[4] = {10, 20, 30, 40};
    fk_dataset test;
    assert_int_equal(fk_sfl_blobs_make(cls, 4, K, -1, 400, 99, &test, &err), FK_OK);
    void *tc = NULL;
    assert_int_equal(M->client_init(&tc, &p, &test, 0, K, 3, &err), FK_OK);
    fk_report r;
    fk_report_init(&r);
    assert_int_equal(M->evaluate(tc, &model, &r, &err), FK_OK);
    print_message("built-in 4 blobs, 4 clients of 40: held-out accuracy %.4f, union rows %g\n",
                  r.accuracy, fk_test_scalar(&model, "rows_union"));
    assert_true(r.accuracy >= 0.9);
    M->client_close(tc);
    fk_dataset_close(&test);
    fk_bundle_close(&model);
    for (int k = 0; k < K; k++)
        fk_dataset_close(&ds[k]);
    /* bad class lists; without ovo: the binary E3.1 cells */
    assert_int_equal(fk_params_set(&p, "classes", "10,5"), FK_OK);
    assert_int_equal(M->sim_data(&p, K, 3, ds, NULL, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "classes"));
    assert_int_equal(fk_params_set(&p, "multiclass", "none"), FK_OK);
    memset(ds, 0, sizeof ds);
    assert_int_equal(M->sim_data(&p, K, 3, ds, NULL, &err), FK_OK);
    assert_int_equal(ds[0].n_classes, 2);
    for (int k = 0; k < K; k++)
        fk_dataset_close(&ds[k]);
    fk_params_close(&p);
}

/* One class list per job, by raw label value: a client whose rows carry a label outside
 * 'classes' is refused with the value and the line (never silently dropped rows), and a
 * client lacking a class still indexes its rows by the job's list (20 is class id 1 on every
 * client, also on one that holds only 20). */
static void client_without_the_classes(void **state)
{
    (void)state;
    enum { K = 2 };
    fk_dataset ds[K];
    blobs(40, 3, 6, &ds[0]);
    blobs(20, 4, 7, &ds[1]); /* class 30 only: outside the job's class set */
    fk_params p;
    job(&p);
    assert_int_equal(fk_params_set(&p, "classes", "10,20"), FK_OK);
    fk_err err = {0};
    void *cli = NULL;
    assert_int_equal(M->client_init(&cli, &p, &ds[1], 1, K, 2, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "row 1 has label 30"));
    assert_non_null(strstr(err.msg, "'classes'"));
    fk_dataset_close(&ds[1]);
    blobs(20, 2, 7, &ds[1]); /* class 20 only: lacks class 10 */
    fk_report fin[K];
    fk_sim_opts o = {.rounds = 1, .seed = 2, .final_reports = fin};
    fk_bundle model;
    fk_sim_round last;
    assert_int_equal(fk_sim_run(M, &p, ds, K, &o, &model, &last, &err), FK_OK);
    assert_int_equal(last.participants, K);
    const fk_tensor *mK = fk_bundle_get(&model, "mK");
    assert_non_null(mK);
    assert_int_equal(mK->len, 1);
    assert_true(mK->data[0] > 0 && mK->data[0] == fk_test_scalar(&model, "K"));
    assert_true(fk_test_scalar(&model, "n_ref") == 60);
    /* the one-class client's rows are predicted as 20, not as the first class */
    assert_true(fin[0].n_samples == 40 && fin[0].accuracy >= 0.95);
    assert_true(fin[1].n_samples == 20 && fin[1].accuracy >= 0.95);
    fk_bundle_close(&model);
    fk_params_close(&p);
    for (int k = 0; k < K; k++)
        fk_dataset_close(&ds[k]);
}

/* Configuration: ovo needs classify and an ascending class list; classes only with ovo. */
static void bad_config(void **state)
{
    (void)state;
    static const char *const bad[][2] = {
        {"classes", "10"}, {"classes", "20,10,30"}, {"classes", "10,10"}, {"mode", "regress"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fk_params p;
        job(&p);
        assert_int_equal(fk_params_set(&p, bad[i][0], bad[i][1]), FK_OK);
        void *srv = NULL;
        fk_err err = {0};
        assert_int_equal(M->server_init(&srv, &p, 2, 1, &err), FK_EINVAL);
        fk_params_close(&p);
    }
    fk_params p;
    job(&p);
    assert_int_equal(fk_params_set(&p, "multiclass", "none"), FK_OK);
    void *srv = NULL;
    fk_err err = {0};
    assert_int_equal(M->server_init(&srv, &p, 2, 1, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "multiclass = ovo"));
    fk_params_close(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pairs),
        cmocka_unit_test(vote_ties),
        cmocka_unit_test(three_classes),
        cmocka_unit_test(bad_uploads_and_checkpoint),
        cmocka_unit_test(pair_diagnostics),
        cmocka_unit_test(builtin_multiclass_data),
        cmocka_unit_test(client_without_the_classes),
        cmocka_unit_test(bad_config),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
