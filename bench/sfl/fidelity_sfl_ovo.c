/* fedkern bench fidelity sfl, E2.4 substitute (spec 004 §8): multi-class classification by
 * one-vs-one voting over the sparse kernel classifier. The Wi-Fi localisation data (2000 x 7,
 * 4 rooms) is not held; the spec's stand-in is pen-digits classes {0, 1, 2, 3}, 500 rows per
 * class drawn from the official train + test files (2000 x 16), 10-fold stratified
 * cross-validation, 6 pairwise problems per fold, majority vote; success: accuracy >= 97 %. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/sfl/sfl_bench.h"
#include "common/data/catalog.h"
#include "common/la/rng.h"
#include "common/methods/sfl/sfl.h"
#include "common/methods/sim.h"
#include "common/models/sfl/sfl.h"

enum { E24_C = 4, E24_PER = 500, E24_N = E24_C * E24_PER, E24_P = 16 };

/* The 2000 rows: 500 per class of {0..3}, drawn (seeded) from train + test, scaled to [0, 1]. */
FK_CHECKRETURN static int e24_rows(const char *dir, double *X, int *cls, fk_err *err)
{
    fk_dataset d[2];
    int rc = fk_catalog_load(&d[0], dir, "pendigits/train", err);
    if (rc)
        return rc;
    if ((rc = fk_catalog_load(&d[1], dir, "pendigits/test", err))) {
        fk_dataset_close(&d[0]);
        return rc;
    }
    size_t tot = d[0].X.rows + d[1].X.rows;
    int *idx = malloc(tot * sizeof *idx);
    if (!idx || d[0].X.cols != E24_P || d[1].X.cols != E24_P)
        rc = idx ? fk_err_set(err, FK_EFORMAT, "pen-digits: expected %d features", E24_P)
                 : fk_err_set(err, FK_ENOMEM, "out of memory");
    for (size_t i = 0; !rc && i < tot; i++)
        idx[i] = (int)i;
    fk_rng g;
    fk_rng_init(&g, 2024, 0);
    if (!rc)
        fk_rng_shuffle(&g, idx, tot);
    int have[E24_C] = {0};
    size_t n = 0;
    for (size_t i = 0; !rc && i < tot && n < E24_N; i++) {
        const fk_dataset *s = (size_t)idx[i] < d[0].X.rows ? &d[0] : &d[1];
        size_t r = (size_t)idx[i] < d[0].X.rows ? (size_t)idx[i] : (size_t)idx[i] - d[0].X.rows;
        int c = (int)s->y_raw[r];
        if (c < 0 || c >= E24_C || have[c] >= E24_PER)
            continue;
        for (size_t j = 0; j < E24_P; j++)
            X[n * E24_P + j] = s->X.data[r * s->X.ld + j] / 100; /* features are 0..100 */
        cls[n++] = c;
        have[c]++;
    }
    if (!rc && n < E24_N)
        rc = fk_err_set(err, FK_EFORMAT, "pen-digits: fewer than %d rows of a class in 0..3",
                        E24_PER);
    free(idx);
    fk_dataset_close(&d[0]);
    fk_dataset_close(&d[1]);
    return rc;
}

/* One pairwise problem a (+1) vs b (-1) on the training rows (fold != f): resilient quadratic
 * classifier, kernels at the rows x widths; adds its votes for the test rows (fold == f). */
FK_CHECKRETURN static int e24_pair(const double *X, const int *cls, const int *fold, int f, int a,
                                   int b, long T, double grel, int *votes, double *margin,
                                   double *kern, double *crit, fk_err *err)
{
    size_t n = 0;
    double *Xa = malloc(E24_N * E24_P * sizeof *Xa), *ya = malloc(E24_N * sizeof *ya);
    double *ft = malloc(E24_N * sizeof *ft);
    int *idx = malloc(E24_N * sizeof *idx);
    if (!Xa || !ya || !ft || !idx) {
        free(Xa);
        free(ya);
        free(ft);
        free(idx);
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < E24_N; i++)
        if (fold[i] != f && (cls[i] == a || cls[i] == b)) {
            memcpy(Xa + n * E24_P, X + i * E24_P, E24_P * sizeof *Xa);
            ya[n++] = cls[i] == a ? 1 : -1;
        }
    double widths[3];
    fk_sfl_widths(0.5, 1.5, 3, widths); /* as the pen-digits federated rows */
    fk_sfl_atoms at;
    int rc = fk_sfl_atoms_candidates(&at, Xa, n, E24_P, widths, 3, err);
    fk_sfl_opts o;
    fk_sfl_opts_default(&o, FK_SFL_CLASSIFY);
    o.res = FK_SFL_QUAD; /* c = 100, the job's default */
    o.T = T;
    o.gamma_rel = grel;
    fk_sfl_fit fit;
    if (!rc && !(rc = fk_sfl_solve(Xa, ya, n, E24_P, &at, &o, NULL, &fit, err))) {
        size_t nc = 0, nn = 0;
        fk_sfl_critical(&fit, ya, &o, idx, &nc, &nn);
        fk_sfl_model m;
        if (!(rc = fk_sfl_model_support(&at, fit.alpha, &m, err))) {
            size_t nt = 0;
            for (size_t i = 0; i < E24_N; i++)
                if (fold[i] == f)
                    memcpy(Xa + nt++ * E24_P, X + i * E24_P, E24_P * sizeof *Xa);
            fk_sfl_predict(&m, Xa, nt, ft);
            for (size_t i = 0, t = 0; i < E24_N; i++)
                if (fold[i] == f) {
                    int w = ft[t] >= 0 ? a : b;
                    votes[i * E24_C + w]++;
                    margin[i * E24_C + w] += fabs(ft[t++]); /* tie break: the surer votes */
                }
            *kern += (double)m.K;
            *crit += (double)nc;
            fk_sfl_model_close(&m);
        }
        fk_sfl_fit_close(&fit);
    }
    fk_sfl_atoms_close(&at); /* zeroed on failure: closing is safe */
    free(Xa);
    free(ya);
    free(ft);
    free(idx);
    return rc;
}

/* The same problem through the sfl job (multiclass = ovo, spec A14): fold 0 is the test set,
 * the other 1800 rows are dealt round-robin to `nc` IID clients; each client solves the 6 pair
 * problems on its rows and uploads its critical rows once, the server solves each pair on the
 * pooled uploads; the voted model is scored on fold 0 next to the estimator's fold-0 figure. */
FK_CHECKRETURN static int e24_job(int json, const double *X, const int *cls, const int *fold,
                                  int nc, long T, double grel, double est_acc0, fk_err *err)
{
    enum { NC_MAX = 16 };
    fk_dataset ds[NC_MAX + 1];
    int made = 0, rc = nc < 1 || nc > NC_MAX ? fk_err_set(err, FK_EINVAL, "1..16 clients") : FK_OK;
    size_t cnt[NC_MAX + 1] = {0};
    for (size_t i = 0, t = 0; i < E24_N; i++) /* client t mod nc, or the test set (index nc) */
        cnt[fold[i] == 0 ? nc : (int)(t++ % (size_t)nc)]++;
    for (int k = 0; !rc && k <= nc; k++) /* made: the data sets to close */
        if (fk_dataset_init(&ds[k], cnt[k], E24_P, 1))
            rc = fk_err_set(err, FK_ENOMEM, "out of memory");
        else
            made++;
    double *lab = malloc(E24_N * sizeof *lab);
    if (!rc && !lab)
        rc = fk_err_set(err, FK_ENOMEM, "out of memory");
    for (int k = 0; !rc && k <= nc; k++) {
        size_t r = 0;
        for (size_t i = 0, t = 0; i < E24_N; i++) {
            int to = fold[i] == 0 ? nc : (int)(t++ % (size_t)nc);
            if (to != k)
                continue;
            memcpy(ds[k].X.data + r * ds[k].X.ld, X + i * E24_P, E24_P * sizeof(double));
            lab[r++] = cls[i];
        }
        rc = fk_dataset_set_labels(&ds[k], lab, err);
    }
    fk_params p;
    fk_params_init(&p);
    char tb[32], gb[32];
    snprintf(tb, sizeof tb, "%ld", T);
    snprintf(gb, sizeof gb, "%.17g", grel);
    static const char *const kv[][2] = {
        {"raw_sample_upload", "acknowledged"}, {"local.allow_raw_upload", "true"},
        {"multiclass", "ovo"}, {"classes", "0,1,2,3"}, {"width_min", "0.5"},
        {"width_max", "1.5"}, {"n_widths", "3"}};
    int prc = FK_OK; /* fk_params_set says only FK_ENOMEM, no message */
    for (size_t i = 0; !rc && !prc && i < sizeof kv / sizeof kv[0]; i++)
        prc = fk_params_set(&p, kv[i][0], kv[i][1]);
    if (!rc && !prc)
        prc = fk_params_set(&p, "T_client", tb);
    if (!rc && !prc)
        prc = fk_params_set(&p, "T_server", tb);
    if (!rc && !prc)
        prc = fk_params_set(&p, "gamma_rel_client", gb);
    if (!rc && !prc)
        prc = fk_params_set(&p, "gamma_rel_server", gb);
    if (!rc && prc)
        rc = fk_err_set(err, prc, "sfl ovo job: out of memory for the job keys");
    double t0 = fk_bench_now();
    fk_bundle model;
    fk_bundle_init(&model);
    fk_sim_opts o = {.rounds = 1, .seed = 24};
    if (!rc)
        rc = fk_sim_run(&fk_method_sfl, &p, ds, nc, &o, &model, NULL, err);
    void *tc = NULL;
    fk_report r;
    fk_report_init(&r);
    if (!rc)
        rc = fk_method_sfl.client_init(&tc, &p, &ds[nc], 0, nc, 24, err);
    if (!rc)
        rc = fk_method_sfl.evaluate(tc, &model, &r, err);
    if (tc)
        fk_method_sfl.client_close(tc);
    if (!rc) {
        const fk_tensor *ru = fk_bundle_get(&model, "rows_union"), *kk = fk_bundle_get(&model, "K");
        double U = ru ? ru->data[0] : NAN, ntr = (double)(E24_N - cnt[nc]);
        char ex[256];
        snprintf(ex, sizeof ex,
                 "\"target\":\"within 2 pt of the pooled estimator on the same fold (E3.x "
                 "criterion)\",\"target_met\":%s",
                 r.accuracy >= est_acc0 - 0.02 ? "true" : "false");
        const char *cs = "E2.4 pendigits 0-3 OvO through the sfl job";
        fk_bench_emit(json, "sfl", cs, "accuracy_fold0", r.accuracy, ex);
        fk_bench_emit(json, "sfl", cs, "estimator_accuracy_fold0", est_acc0, NULL);
        fk_bench_emit(json, "sfl", cs, "clients", nc, NULL);
        fk_bench_emit(json, "sfl", cs, "uploaded_rows_fraction", U / ntr, NULL);
        fk_bench_emit(json, "sfl", cs, "kernels_per_classifier", kk ? kk->data[0] / 6.0 : NAN,
                      NULL);
        fk_bench_emit(json, "sfl", cs, "seconds", fk_bench_now() - t0, NULL);
    }
    fk_bundle_close(&model);
    fk_params_close(&p);
    free(lab);
    for (int k = 0; k < made; k++)
        fk_dataset_close(&ds[k]);
    return rc;
}

int fk__bench_sfl_e24(int json, const char *dir, int folds, long T, double grel, fk_err *err)
{
    double *X = malloc(E24_N * E24_P * sizeof *X), *margin = calloc(E24_N * E24_C, sizeof *margin);
    int *cls = malloc(E24_N * sizeof *cls), *fold = malloc(E24_N * sizeof *fold),
        *votes = calloc(E24_N * E24_C, sizeof *votes);
    double t0 = fk_bench_now(), kern = 0, crit = 0, accs[10] = {0};
    int rc = (!X || !margin || !cls || !fold || !votes)
                 ? fk_err_set(err, FK_ENOMEM, "out of memory")
                 : e24_rows(dir, X, cls, err);
    /* stratified folds: the k-th row of each class goes to fold k mod 10 (rows are shuffled) */
    int seen[E24_C] = {0};
    for (size_t i = 0; !rc && i < E24_N; i++)
        fold[i] = seen[cls[i]]++ % 10;
    for (int f = 0; f < folds && !rc; f++) {
        for (int a = 0; a < E24_C && !rc; a++)
            for (int b = a + 1; b < E24_C && !rc; b++)
                rc = e24_pair(X, cls, fold, f, a, b, T, grel, votes, margin, &kern, &crit, err);
        size_t right = 0, nt = 0;
        for (size_t i = 0; !rc && i < E24_N; i++) {
            if (fold[i] != f)
                continue;
            int best = 0;
            for (int c = 1; c < E24_C; c++)
                if (votes[i * E24_C + c] > votes[i * E24_C + best] ||
                    (votes[i * E24_C + c] == votes[i * E24_C + best] &&
                     margin[i * E24_C + c] > margin[i * E24_C + best]))
                    best = c;
            right += best == cls[i];
            nt++;
        }
        accs[f] = nt ? (double)right / (double)nt : 0;
    }
    if (!rc) {
        double mean = 0, lo = 1;
        for (int f = 0; f < folds; f++) {
            mean += accs[f] / folds;
            lo = fmin(lo, accs[f]);
        }
        char ex[256];
        snprintf(ex, sizeof ex,
                 "\"published\":0.98,\"target\":\">= 0.97 (RBF-SVM level; the 0.98 is on "
                 "Wi-Fi data)\",\"target_met\":%s",
                 mean >= 0.97 ? "true" : "false");
        const char *cs = "E2.4 pendigits 0-3 OvO";
        fk_bench_emit(json, "sfl", cs, "accuracy_mean_over_folds", mean, ex);
        fk_bench_emit(json, "sfl", cs, "accuracy_worst_fold", lo, NULL);
        fk_bench_emit(json, "sfl", cs, "kernels_per_classifier", kern / (6.0 * folds), NULL);
        fk_bench_emit(json, "sfl", cs, "critical_rows_per_classifier", crit / (6.0 * folds), NULL);
        fk_bench_emit(json, "sfl", cs, "folds_run_of_10", folds, NULL);
        fk_bench_emit(json, "sfl", cs, "gamma_rel", grel, NULL);
        fk_bench_emit(json, "sfl", cs, "seconds", fk_bench_now() - t0, NULL);
    }
    if (!rc && folds >= 1)
        rc = e24_job(json, X, cls, fold, 6, T, grel, accs[0], err);
    free(X);
    free(margin);
    free(cls);
    free(fold);
    free(votes);
    return rc;
}
