/* Job type sfl with its defaults (atoms = auto, widths and preprocessing from the federated
 * statistics of phase 0; issue 32): one client equals the centralised fit (spec Prop. 3), the
 * data's units do not change the result (or the job is refused before any row leaves a
 * client, naming the key), and a refused upload never quotes a value (issue 33 row 3).
 * FK_SFL_ORACLE_VERBOSE=1 prints the measured values. */
// clang-format off
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
// clang-format on
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/methods/sfl/sfl.h"
#include "common/methods/sfl/sfl_int.h"
#include "common/methods/sim.h"
#include "common/models/sfl/sfl.h"
#include "support_say.h"
#include "support_sfl.h"

static const fk_method *const M = &fk_method_sfl;

/* The job with every data-dependent key left to its default. */
static void job(fk_params *p)
{
    fk_params_init(p);
    assert_int_equal(fk_params_set(p, "raw_sample_upload", "acknowledged"), FK_OK);
    assert_int_equal(fk_params_set(p, "local.allow_raw_upload", "true"), FK_OK);
}

/* E3.1 rows, client k of K (k = -1: the whole domain), plus extra noise columns (p > 2). */
static void e31(int K, int k, size_t n, uint64_t seed, int extra, fk_dataset *ds)
{
    fk_err err = {0};
    fk_dataset d;
    assert_int_equal(fk_sfl_e31_make(K, k, n, seed, &d, &err), FK_OK);
    if (!extra) {
        *ds = d;
        return;
    }
    size_t p = 2 + (size_t)extra;
    assert_int_equal(fk_dataset_init(ds, n, p, 1), FK_OK);
    fk_rng r;
    fk_rng_init(&r, seed, 4242 + (uint64_t)(k + 1));
    double *lab = malloc(n * sizeof *lab);
    assert_non_null(lab);
    for (size_t i = 0; i < n; i++) {
        ds->X.data[i * p] = d.X.data[2 * i];
        ds->X.data[i * p + 1] = d.X.data[2 * i + 1];
        for (size_t j = 2; j < p; j++)
            ds->X.data[i * p + j] = 3 * fk_rng_normal(&r);
        lab[i] = d.y_raw[i];
    }
    assert_int_equal(fk_dataset_set_labels(ds, lab, &err), FK_OK);
    free(lab);
    fk_dataset_close(&d);
}

/* One client holding every row against the centralised fit on the same rows with the same
 * resolved settings (read from the job's checkpoint: map, widths, box or candidates): the
 * server solves on the client's critical rows only, so by Prop. 3 its f equals the pooled
 * one up to the solver's tolerance. extra = 0: grid atoms (p = 2); 2: candidates (p = 4). */
static void k1_case(int extra)
{
    enum { N = 450 };
    fk_dataset ds;
    e31(1, 0, N, 31, extra, &ds);
    size_t p = ds.X.cols;
    fk_params pp;
    job(&pp);
    void *srv = NULL, *cli[1] = {NULL};
    fk_test_sfl_open(&pp, &ds, 1, 5, &srv, cli);
    fk_err err = {0};
    int done = 0, ph = 0;
    fk_update ups[1];
    while (!done) { /* count, (centres,) upload */
        fk_test_sfl_phase(srv, cli, 1, ph, ups);
        assert_int_equal(M->aggregate(srv, 1, ph, ups, 1, &done, &err), FK_OK);
        fk_test_sfl_close_ups(ups, 1);
        assert_true(++ph <= 3);
    }
    assert_int_equal(ph, extra ? 3 : 2);
    fk_bundle model, ck;
    fk_bundle_init(&model);
    fk_bundle_init(&ck);
    assert_int_equal(M->model(srv, &model, &err), FK_OK);
    assert_int_equal(M->save(srv, &ck, &err), FK_OK);
    const fk_tensor *sh = fk_bundle_get(&ck, "x_shift"), *sc = fk_bundle_get(&ck, "x_scale"),
                    *wr = fk_bundle_get(&ck, "wr"), *ak = fk_bundle_get(&ck, "akind");
    assert_non_null(sh);
    assert_non_null(sc);
    assert_non_null(wr);
    assert_non_null(ak);
    assert_int_equal((int)ak->data[0], extra ? FK__SFL_AT_CAND : FK__SFL_AT_GRID);
    /* the centralised problem: every row, standardised by the job's map, the same atoms */
    double *X = malloc(N * p * sizeof *X), *y = malloc(N * sizeof *y);
    assert_non_null(X);
    assert_non_null(y);
    for (size_t i = 0; i < N; i++) {
        for (size_t k = 0; k < p; k++)
            X[i * p + k] = (ds.X.data[i * p + k] - sh->data[k]) / sc->data[k];
        y[i] = ds.y_raw[i] == 1 ? 1.0 : -1.0;
    }
    double w[6];
    assert_true(wr->data[0] > 0);
    fk_sfl_widths(wr->data[0], wr->data[1], 6, w);
    fk_sfl_atoms a;
    if (extra) {
        const fk_tensor *z = fk_bundle_get(&ck, "z");
        assert_non_null(z);
        assert_int_equal(fk_sfl_atoms_candidates(&a, z->data, z->shape[0], (int)p, w, 6, &err),
                         FK_OK);
        /* each centre carries n_ref / M rows' mass */
        assert_true(fk_test_scalar(&ck, "zm") == (double)N / (double)z->shape[0]);
        for (size_t j = 0; j < a.J; j++)
            a.v[j] *= fk_test_scalar(&ck, "zm");
    } else {
        const fk_tensor *lo = fk_bundle_get(&ck, "box_lo"), *hi = fk_bundle_get(&ck, "box_hi");
        assert_int_equal(fk_sfl_atoms_grid(&a, 2, lo->data, hi->data, wr->data[2], w, 6, N,
                                           (size_t)1 << 32, &err),
                         FK_OK);
    }
    fk__sfl_cfg c;
    assert_int_equal(fk__sfl_cfg_parse(&c, &pp, &err), FK_OK);
    fk_sfl_opts o;
    fk__sfl_opts(&c, 1, N, 5, &o);
    fk_sfl_fit f;
    assert_int_equal(fk_sfl_solve(X, y, N, (int)p, &a, &o, NULL, &f, &err), FK_OK);
    fk_sfl_model mc;
    assert_int_equal(fk_sfl_model_support(&a, f.alpha, &mc, &err), FK_OK);
    fk_sfl_model mf = {.K = (size_t)fk_test_scalar(&model, "K"), .p = (int)p};
    mf.s = fk_bundle_get(&model, "s")->data;
    mf.w = fk_bundle_get(&model, "w")->data;
    mf.c = fk_bundle_get(&model, "c")->data;
    /* f on held-out points of the whole domain, in the job's units */
    fk_dataset test;
    e31(1, -1, 1000, 77, extra, &test);
    double *T = malloc(1000 * p * sizeof *T), *ff = malloc(1000 * sizeof *ff),
           *fc = malloc(1000 * sizeof *fc), d = 0, s = 0, accF = 0, accC = 0;
    assert_non_null(T);
    assert_non_null(ff);
    assert_non_null(fc);
    for (size_t i = 0; i < 1000; i++)
        for (size_t k = 0; k < p; k++)
            T[i * p + k] = (test.X.data[i * p + k] - sh->data[k]) / sc->data[k];
    fk_sfl_predict(&mf, T, 1000, ff);
    fk_sfl_predict(&mc, T, 1000, fc);
    for (size_t i = 0; i < 1000; i++) {
        double t = test.y_raw[i] == 1 ? 1.0 : -1.0;
        d += (ff[i] - fc[i]) * (ff[i] - fc[i]);
        s += fc[i] * fc[i];
        accF += ((ff[i] >= 0) ? 1.0 : -1.0) == t;
        accC += ((fc[i] >= 0) ? 1.0 : -1.0) == t;
    }
    SAY("pooled status %d iterations %ld; job status %g iterations %g\n", f.status, f.iters,
        fk_test_scalar(&model, "status"), fk_test_scalar(&model, "iterations"));
    SAY("K = 1 vs centralised (%s, p = %zu): uploaded %g of %d rows, f differs %.2g (relative "
        "L2), accuracy %.3f vs %.3f\n",
        extra ? "candidates" : "grid", p, fk_test_scalar(&model, "rows_union"), N, sqrt(d / s),
        accF / 1000, accC / 1000);
    /* the server's tau_gap = 1e-4 bounds alpha to about sqrt(2e-4) (test_methods_sfl_oracle);
     * the client's solve is tight (1e-6) so its critical set is the centralised one */
    assert_true(sqrt(d / s) <= 2e-2);
    assert_true(fabs(accF - accC) <= 5);                   /* 1000 test points: half a point */
    assert_true(fk_test_scalar(&model, "rows_union") < N); /* not a full upload */
    free(T);
    free(ff);
    free(fc);
    free(X);
    free(y);
    fk_dataset_close(&test);
    fk_sfl_model_close(&mc);
    fk_sfl_fit_close(&f);
    fk_sfl_atoms_close(&a);
    fk__sfl_cfg_close(&c);
    fk_bundle_close(&model);
    fk_bundle_close(&ck);
    M->server_close(srv);
    M->client_close(cli[0]);
    fk_dataset_close(&ds);
    fk_params_close(&pp);
}

static void k1_equals_centralised(void **state)
{
    (void)state;
    k1_case(0);
    k1_case(2);
}

/* 9 E3.1 clients of 30 rows (extra: noise columns, candidates), every feature times s or only
 * feature 0 times s (col0): the job's mean accuracy over the clients, its rows uploaded. */
static int run_scaled(int extra, double s, int col0, const fk_params *p, double *acc, double *up,
                      fk_err *err)
{
    enum { K = 9 };
    fk_dataset ds[K];
    for (int k = 0; k < K; k++) {
        e31(K, k, 30, 11, extra, &ds[k]);
        for (size_t i = 0; i < ds[k].X.rows; i++)
            for (size_t j = 0; j < ds[k].X.cols; j++)
                ds[k].X.data[i * ds[k].X.cols + j] *= !col0 || j == 0 ? s : 1;
    }
    fk_report fin[K];
    fk_sim_opts o = {.rounds = 1, .seed = 3, .final_reports = fin};
    fk_bundle model;
    fk_sim_round last;
    int rc = fk_sim_run(M, p, ds, K, &o, &model, &last, err);
    if (!rc) {
        double n = 0;
        *acc = 0;
        for (int k = 0; k < K; k++) {
            *acc += fin[k].accuracy * fin[k].n_samples;
            n += fin[k].n_samples;
        }
        *acc /= n;
        *up = fk_test_scalar(&model, "rows_union") / n;
        fk_bundle_close(&model);
    }
    for (int k = 0; k < K; k++)
        fk_dataset_close(&ds[k]);
    return rc;
}

static void scale_free_defaults(void **state)
{
    (void)state;
    static const double sc[] = {1, 1e-6, 1e6, 1e6};
    for (int extra = 0; extra <= 2; extra += 2) {
        fk_params p;
        job(&p);
        double acc1 = 0, up1 = 0;
        for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++) {
            double acc = 0, up = 0;
            fk_err err = {0};
            assert_int_equal(run_scaled(extra, sc[i], i == 3, &p, &acc, &up, &err), FK_OK);
            SAY("p = %d, x %s%g: accuracy %.4f, uploaded %.3f of the rows\n", 2 + extra,
                i == 3 ? "column 0 " : "", sc[i], acc, up);
            if (i == 0) {
                acc1 = acc;
                up1 = up;
                assert_true(acc >= 0.85);
            }
            assert_true(fabs(acc - acc1) <= 0.01); /* within 1 point of the raw units */
            assert_true(up < 0.9 && fabs(up - up1) <= 0.05);
        }
        fk_params_close(&p);
    }
}

/* Widths set by hand far from the data's scale: refused after phase 0 (no row uploaded),
 * naming the numbers and the keys. */
static void far_widths_refused(void **state)
{
    (void)state;
    static const double sc[] = {1e6, 1e-6};
    static const char *const key[] = {"width_max", "width_min"};
    for (int i = 0; i < 2; i++) {
        fk_params p;
        job(&p);
        assert_int_equal(fk_params_set(&p, "width_min", "0.5"), FK_OK);
        assert_int_equal(fk_params_set(&p, "width_max", "3"), FK_OK);
        assert_int_equal(fk_params_set(&p, "x_scale", "1"), FK_OK);
        double acc = 0, up = 0;
        fk_err err = {0};
        assert_int_equal(run_scaled(0, sc[i], 0, &p, &acc, &up, &err), FK_EINVAL);
        SAY("x %g with widths 0.5..3: %s\n", sc[i], err.msg);
        assert_non_null(strstr(err.msg, key[i]));
        assert_non_null(strstr(err.msg, "x_scale"));
        assert_non_null(strstr(err.msg, "federated"));
        fk_params_close(&p);
    }
}

/* A planted value beyond the 1e12 bound: the server's refusal names the tensor, the position
 * and the bound, never the value; a client's own row beyond it (raw units kept) is refused
 * before the upload, naming row and column and the key. */
static void sentinel_never_quoted(void **state)
{
    (void)state;
    enum { K = 2 };
    const double sentinel = 1.71235e15;
    fk_dataset ds[K];
    for (int k = 0; k < K; k++)
        e31(K, k, 30, 9, 0, &ds[k]);
    fk_params p;
    job(&p);
    assert_int_equal(fk_params_set(&p, "c", "1"), FK_OK); /* every row critical */
    void *srv = NULL, *cli[K];
    fk_test_sfl_open(&p, ds, K, 3, &srv, cli);
    fk_update ups[K];
    fk_test_sfl_uploads(srv, cli, K, ups);
    fk_tensor *x = (fk_tensor *)fk_bundle_get(&ups[0].msg, "x");
    assert_non_null(x);
    x->data[3] = sentinel; /* row 1, column 1 */
    fk_err err = {0};
    assert_int_equal(M->check_update(srv, 1, 1, &ups[0], &err), FK_EINVAL);
    SAY("refusal: %s\n", err.msg);
    const char *fmts[] = {"%g", "%.9g", "%.17g", "%e", "%f", "%.6g"};
    char r[64];
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        snprintf(r, sizeof r, fmts[i], sentinel);
        if (strstr(err.msg, r))
            fail_msg("the refusal quotes the value as '%s': %s", r, err.msg);
    }
    assert_non_null(strstr(err.msg, "tensor 'x' entry 3 (row 1, column 1)"));
    assert_non_null(strstr(err.msg, "1e+12"));
    assert_null(strstr(err.msg, "1.71"));
    fk_test_sfl_close_ups(ups, K);
    M->server_close(srv);
    for (int k = 0; k < K; k++)
        M->client_close(cli[k]);
    /* the client's own row, raw units kept: refused before anything is sent */
    ds[1].X.data[2 * 4 + 1] = sentinel;
    assert_int_equal(fk_params_set(&p, "x_scale", "1"), FK_OK);
    fk_test_sfl_open(&p, ds, K, 3, &srv, cli);
    fk_update u0[K];
    fk_test_sfl_phase(srv, cli, K, 0, u0);
    int done = 0;
    assert_int_equal(M->aggregate(srv, 1, 0, u0, K, &done, &err), FK_OK);
    fk_bundle task, up;
    fk_bundle_init(&task);
    fk_bundle_init(&up);
    assert_int_equal(M->task(srv, 1, 1, 1, &task, &err), FK_OK);
    fk_report rep;
    fk_report_init(&rep);
    assert_int_equal(M->local_step(cli[1], &task, &up, &rep, &err), FK_EINVAL);
    SAY("client refusal: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "row 4 column 1"));
    assert_non_null(strstr(err.msg, "x_scale"));
    assert_null(strstr(err.msg, "1.71"));
    assert_null(fk_bundle_get(&up, "x"));
    fk_bundle_close(&task);
    fk_bundle_close(&up);
    fk_test_sfl_close_ups(u0, K);
    M->server_close(srv);
    for (int k = 0; k < K; k++) {
        M->client_close(cli[k]);
        fk_dataset_close(&ds[k]);
    }
    fk_params_close(&p);
}

int main(void)
{
    fk_log_set_level(FK_LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(k1_equals_centralised),
        cmocka_unit_test(scale_free_defaults),
        cmocka_unit_test(far_widths_refused),
        cmocka_unit_test(sentinel_never_quoted),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
