/* fedkern bench fidelity kahm: the accuracy cells of spec kahm.md §11.3 that our data
 * can reproduce, next to the spec's prototype and the paper's values, with target_met.
 *
 *   D. Pen-digits, fixed split: one client with all classes and ten single-class clients
 *      (identical predictions asserted), E1/E2; label skew 20 %/30 % over 100 clients.
 *   A. Fashion-MNIST, 100 clients, label skew 20 %/30 % (Tables 2-3 protocol with the
 *      reference code's slot rule): local (64), global(routed) (the paper's protocol) and
 *      global(all) (eq. 63 over every client).
 *   B. Fashion-MNIST single-class clients (each class split into round(6000/1000) = 6
 *      k-means clusters), E1/E2.
 *   E. Office-Caltech10 semi-supervised transfer, source and target clients (SURF 12 tasks,
 *      DeCAF6 D<->W): fidelity_kahm_office.c.
 * Baselines beside them, centralised on the same features: 1-NN, and the RBF-SVM of spec 11.4
 * (C = 10, gamma = 'scale'; common/models/svm) with target_met against the spec's prototype
 * on digits (5-split mean) and Pen-digits; Fashion-MNIST's 60,000 rows are cut to
 * --svm_max_train (printed without a target).
 * Preprocessing: scale to [0, 1] then tanh (pen-digits /100, images /255). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/kahm/kahm_bench.h"
#include "bench/knn.h"
#include "common/base/params.h"
#include "common/data/catalog.h"
#include "common/data/load.h"
#include "common/la/rng.h"
#include "common/models/kahm/kahm.h"
#include "common/models/svm/svm.h"

#define DIGITS_FILE "/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz"
enum { C10 = 10, DIAG_ROWS = 8000, IDENT_ROWS = 20000 };
static const uint64_t SKEW_STREAM = 0x736b657700000000ULL;

typedef struct bopts {
    int json, seeds, skip_pen, skip_fashion, skip_single, skip_skew, skip_digits, skip_office;
    int office_splits;
    int only_skew; /* 20 or 30: run that label skew only; 0: both */
    long svm_max_train; /* RBF-SVM baseline: at most this many training rows (0: skip it) */
    const char *dir;
} bopts;

static void emit_target(const bopts *o, const char *cs, const char *metric, double v,
                        double target, double tol, const char *ref)
{
    char extra[256];
    int met = fabs(v - target) <= tol;
    snprintf(extra, sizeof extra, "\"target\":%.4f,\"tol\":%.2f,\"ref\":\"%s\",\"target_met\":%s",
             target, tol, ref, met ? "true" : "false");
    fk_bench_emit(o->json, "fidelity-kahm", cs, metric, v, extra);
}

static void prep_tanh(fk_dataset *d, double scale)
{
    for (size_t i = 0; i < d->X.rows; i++)
        for (size_t j = 0; j < d->X.cols; j++) {
            double *v = &d->X.data[i * d->X.ld + j];
            *v = tanh(*v * scale);
        }
}

/* Test distances of one set of class models, nt x C (+inf for classes not held). */
FK_CHECKRETURN static int set_dist(const fk_kahm_set *s, const fk_dataset *te, double *D, int acc,
                                   fk_err *err)
{
    return fk_kahm_set_dist(s, te->X.data, te->X.rows, te->X.ld, D, acc, err);
}

static double accuracy(const double *D, const fk_dataset *te)
{
    size_t nt = te->X.rows, hit = 0;
    int *lab = malloc(nt * sizeof(int));
    fk_kahm_argmin(D, nt, C10, lab, NULL);
    for (size_t i = 0; i < nt; i++)
        hit += lab[i] == te->y[i];
    free(lab);
    return 100.0 * (double)hit / (double)nt;
}

/* The centralised cells: one client with all classes, then C single-class clients;
 * accuracy of (63), identity of the two, E1/E2 on the training data. */
FK_CHECKRETURN static int run_central(const bopts *o, const char *name, const fk_dataset *tr,
                       const fk_dataset *te, double target, double tol, double *acc_out,
                       double *e1_out, fk_err *err)
{
    fk_kahm_opts ko;
    fk_kahm_opts_default(&ko);
    size_t nt = te->X.rows, n = tr->X.rows, p = tr->X.cols;
    double *D1 = malloc(nt * C10 * sizeof(double)), *D2 = malloc(nt * C10 * sizeof(double));
    double *Dtr = malloc(n * C10 * sizeof(double));
    fk_kahm_set all = {0};
    double t0 = fk_bench_now(), c0 = fk_bench_cpu_now();
    int rc = fk_kahm_set_fit(&all, tr->X.data, n, p, tr->X.ld, tr->y, C10, &ko, err);
    double tfit = fk_bench_now() - t0;
    if (!rc)
        rc = set_dist(&all, te, D1, 0, err);
    /* fit + test scoring: what a peer implementation is timed on next to this row */
    double ttest = fk_bench_now() - t0, ctest = fk_bench_cpu_now() - c0;
    /* E1/E2 on every stride-th training row (all rows of Pen-digits; 7,500 of the 60,000
     * Fashion-MNIST rows, whose full training pass costs as much as ten test passes). */
    size_t stride = n > DIAG_ROWS ? (n + DIAG_ROWS - 1) / DIAG_ROWS : 1, nd = (n + stride - 1) / stride;
    fk_dataset dsub = {0};
    int *drows = malloc(nd * sizeof(int));
    for (size_t i = 0; i < nd; i++)
        drows[i] = (int)(i * stride);
    if (!rc)
        rc = fk_dataset_subset(&dsub, tr, drows, nd);
    free(drows);
    if (!rc)
        rc = set_dist(&all, &dsub, Dtr, 0, err);
    double tall = fk_bench_now() - t0;
    /* Single-class clients: class c alone, models fitted from that client's rows only
     * (skipped on large sets, where it repeats the same fits: identity is checked on
     * Pen-digits and in the unit tests). */
    int ident = n <= IDENT_ROWS;
    for (int c = 0; !rc && ident && c < C10; c++) {
        int *rows = malloc(n * sizeof(int));
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (tr->y[i] == c)
                rows[m++] = (int)i;
        fk_dataset sub = {0};
        rc = fk_dataset_subset(&sub, tr, rows, m);
        free(rows);
        fk_kahm_set one = {0};
        if (!rc)
            rc = fk_kahm_set_fit(&one, sub.X.data, m, p, sub.X.ld, sub.y, C10, &ko, err);
        if (!rc)
            rc = set_dist(&one, te, D2, c > 0, err);
        fk_kahm_set_close(&one);
        fk_dataset_close(&sub);
    }
    if (!rc) {
        char cs[96];
        double a1 = accuracy(D1, te), a2 = ident ? accuracy(D2, te) : NAN;
        int same = ident && !memcmp(D1, D2, nt * C10 * sizeof(double));
        double E1, E2, E2n;
        fk_kahm_diag(Dtr, dsub.y, nd, C10, (int)p, &E1, &E2, &E2n);
        int parts = 0;
        for (int c = 0; c < all.n; c++)
            parts += all.cls[c].n_parts;
        snprintf(cs, sizeof cs, "%s single-class", name);
        if (ident)
            emit_target(o, cs, "accuracy_63_pct", a2, target, tol, "spec 11.3 prototype");
        snprintf(cs, sizeof cs, "%s one-client", name);
        emit_target(o, cs, "accuracy_63_pct", a1, target, tol, "spec 11.3 prototype");
        snprintf(cs, sizeof cs, "%s identity", name);
        char extra[96];
        snprintf(extra, sizeof extra, "\"target_met\":%s", same ? "true" : "false");
        if (ident)
            fk_bench_emit(o->json, "fidelity-kahm", cs, "same_distances", same, extra);
        fk_bench_emit(o->json, "fidelity-kahm", cs, "diag_rows", (double)nd, NULL);
        fk_bench_emit(o->json, "fidelity-kahm", cs, "E1", E1, NULL);
        fk_bench_emit(o->json, "fidelity-kahm", cs, "E2_eq68", E2, NULL);
        fk_bench_emit(o->json, "fidelity-kahm", cs, "E2_noscale", E2n, NULL);
        fk_bench_emit(o->json, "fidelity-kahm", cs, "kahms", parts, NULL);
        fk_bench_emit(o->json, "fidelity-kahm", cs, "fit_seconds", tfit, NULL);
        fk_bench_emit(o->json, "fidelity-kahm", cs, "fit_and_score_seconds", tall, NULL);
        fk_bench_emit(o->json, "fidelity-kahm", cs, "fit_and_test_seconds", ttest, NULL);
        fk_bench_emit(o->json, "fidelity-kahm", cs, "fit_and_test_cpu_seconds", ctest, NULL);
        if (acc_out)
            *acc_out = a1;
        if (e1_out)
            *e1_out = E1;
    }
    fk_kahm_set_close(&all);
    fk_dataset_close(&dsub);
    free(D1);
    free(D2);
    free(Dtr);
    return rc;
}

/* Reference-code label skew: k class slots per client drawn with replacement, redrawn
 * until every class occurs; each class's shuffled samples split evenly over its slots.
 * owner[i] = client of training sample i. */
static void skew_partition(const fk_dataset *tr, int K, int k, uint64_t seed, int *owner)
{
    fk_rng r;
    fk_rng_init(&r, seed, SKEW_STREAM);
    int *slot = malloc((size_t)K * (size_t)k * sizeof(int));
    for (;;) {
        int seen[C10] = {0}, all = 1;
        for (int s = 0; s < K * k; s++)
            seen[slot[s] = (int)fk_rng_below(&r, C10)]++;
        for (int c = 0; c < C10; c++)
            all &= seen[c] > 0;
        if (all)
            break;
    }
    size_t n = tr->X.rows;
    int *idx = malloc(n * sizeof(int));
    for (int c = 0; c < C10; c++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (tr->y[i] == c)
                idx[m++] = (int)i;
        fk_rng_shuffle(&r, idx, m);
        int ns = 0;
        for (int s = 0; s < K * k; s++)
            ns += slot[s] == c;
        /* slot j of class c (in client order) gets rows [j m / ns, (j+1) m / ns) */
        int j = 0;
        for (int s = 0; s < K * k; s++) {
            if (slot[s] != c)
                continue;
            size_t lo = (size_t)j * m / (size_t)ns, hi = (size_t)(j + 1) * m / (size_t)ns;
            for (size_t t = lo; t < hi; t++)
                owner[idx[t]] = s / k;
            j++;
        }
    }
    free(idx);
    free(slot);
}

/* One label-skew run: per client fit, local accuracy on the test samples of its
 * classes, routed and all-client global accuracy, each client-averaged. */
FK_CHECKRETURN static int run_skew_once(const fk_dataset *tr, const fk_dataset *te, int K, int k,
                                        uint64_t seed, double out[4], fk_err *err)
{
    fk_kahm_opts ko;
    fk_kahm_opts_default(&ko);
    size_t n = tr->X.rows, nt = te->X.rows, p = tr->X.cols;
    int *owner = malloc(n * sizeof(int));
    skew_partition(tr, K, k, seed, owner);
    double *D = malloc(nt * C10 * sizeof(double)), *Dall = malloc(nt * C10 * sizeof(double));
    double *rbest = malloc(nt * sizeof(double));
    int *rlab = malloc(nt * sizeof(int)), *lab = malloc(nt * sizeof(int));
    unsigned char *holds = calloc((size_t)K * C10, 1);
    int *rows = malloc(n * sizeof(int));
    double dmin;
    for (size_t i = 0; i < nt * C10; i++)
        Dall[i] = INFINITY;
    for (size_t i = 0; i < nt; i++) {
        rbest[i] = INFINITY;
        rlab[i] = -1;
    }
    double local_sum = 0;
    int rc = FK_OK;
    for (int q = 0; !rc && q < K; q++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (owner[i] == q) {
                rows[m++] = (int)i;
                holds[q * C10 + tr->y[i]] = 1;
            }
        fk_dataset sub = {0};
        fk_kahm_set s = {0};
        rc = fk_dataset_subset(&sub, tr, rows, m);
        if (!rc)
            rc = fk_kahm_set_fit(&s, sub.X.data, m, p, sub.X.ld, sub.y, C10, &ko, err);
        if (!rc)
            rc = set_dist(&s, te, D, 0, err);
        if (!rc) {
            fk_kahm_argmin(D, nt, C10, lab, NULL);
            size_t hit = 0, tot = 0;
            for (size_t i = 0; i < nt; i++) {
                for (int c = 0; c < C10; c++)
                    if (D[i * C10 + c] < Dall[i * C10 + c])
                        Dall[i * C10 + c] = D[i * C10 + c];
                if (!holds[q * C10 + te->y[i]])
                    continue;
                tot++;
                hit += lab[i] == te->y[i];
                fk_kahm_argmin(D + i * C10, 1, C10, &(int){0}, &dmin);
                if (dmin < rbest[i]) { /* routed: this client's winning pair */
                    rbest[i] = dmin;
                    rlab[i] = lab[i];
                }
            }
            local_sum += tot ? 100.0 * (double)hit / (double)tot : 0;
        }
        fk_kahm_set_close(&s);
        fk_dataset_close(&sub);
    }
    if (!rc) {
        fk_kahm_argmin(Dall, nt, C10, lab, NULL);
        double rsum = 0, asum = 0;
        size_t plain = 0;
        for (size_t i = 0; i < nt; i++)
            plain += lab[i] == te->y[i];
        for (int q = 0; q < K; q++) {
            size_t tot = 0, hr = 0, ha = 0;
            for (size_t i = 0; i < nt; i++) {
                if (!holds[q * C10 + te->y[i]])
                    continue;
                tot++;
                hr += rlab[i] == te->y[i];
                ha += lab[i] == te->y[i];
            }
            rsum += tot ? 100.0 * (double)hr / (double)tot : 0;
            asum += tot ? 100.0 * (double)ha / (double)tot : 0;
        }
        out[0] = local_sum / K;
        out[1] = rsum / K;
        out[2] = asum / K;
        out[3] = 100.0 * (double)plain / (double)nt;
    }
    free(owner);
    free(D);
    free(Dall);
    free(rbest);
    free(rlab);
    free(lab);
    free(holds);
    free(rows);
    return rc;
}

/* targets[skew][metric]: local, routed, all (NaN: none). */
FK_CHECKRETURN static int run_skew(const bopts *o, const char *name, const fk_dataset *tr,
                                   const fk_dataset *te, const double targets[2][3],
                                   const double tol[3], const char *ref[3], fk_err *err)
{
    static const char *const metric[4] = {"local_64_pct", "global_routed_pct", "global_all_pct",
                                          "global_all_plain_pct"};
    for (int sk = 0; sk < 2; sk++) {
        int pct = sk ? 30 : 20, k = sk ? 3 : 2;
        if (o->only_skew && o->only_skew != pct)
            continue;
        double mean[4] = {0};
        int all_below = 1;
        for (int s = 0; s < o->seeds; s++) {
            double r[4];
            double t0 = fk_bench_now();
            int rc = run_skew_once(tr, te, 100, k, (uint64_t)s, r, err);
            if (rc)
                return rc;
            char cs[96];
            snprintf(cs, sizeof cs, "%s skew%d%% seed%d", name, pct, s);
            for (int m = 0; m < 4; m++) {
                fk_bench_emit(o->json, "fidelity-kahm", cs, metric[m], r[m], NULL);
                mean[m] += r[m] / o->seeds;
            }
            fk_bench_emit(o->json, "fidelity-kahm", cs, "seconds", fk_bench_now() - t0, NULL);
            all_below &= r[2] < r[1];
        }
        char cs[96];
        snprintf(cs, sizeof cs, "%s skew%d%% mean%d", name, pct, o->seeds);
        for (int m = 0; m < 3; m++)
            emit_target(o, cs, metric[m], mean[m], targets[sk][m], tol[m], ref[m]);
        fk_bench_emit(o->json, "fidelity-kahm", cs, metric[3], mean[3], NULL);
        char extra[64];
        snprintf(extra, sizeof extra, "\"target_met\":%s", all_below ? "true" : "false");
        fk_bench_emit(o->json, "fidelity-kahm", cs, "all_below_routed_every_run", all_below,
                      extra);
    }
    return FK_OK;
}

/* Centralised 1-NN on the same preprocessed features, printed next to KAHM with the
 * spec's prototype value (a baseline, not a KAHM target). */
FK_CHECKRETURN static int run_1nn(const bopts *o, const char *name, const fk_dataset *tr,
                                  const fk_dataset *te, double spec, fk_err *err)
{
    int *pred = malloc(te->X.rows * sizeof(int));
    if (!pred)
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    int rc = fk_knn1_predict(&tr->X, tr->y, &te->X, pred, err);
    size_t hit = 0;
    for (size_t i = 0; !rc && i < te->X.rows; i++)
        hit += pred[i] == te->y[i];
    free(pred);
    if (!rc) {
        char cs[96], extra[64];
        snprintf(cs, sizeof cs, "%s baseline", name);
        snprintf(extra, sizeof extra, "\"spec_prototype\":%.2f", spec);
        fk_bench_emit(o->json, "fidelity-kahm", cs, "1nn_pct",
                      100.0 * (double)hit / (double)te->X.rows, extra);
    }
    return rc;
}

/* Centralised RBF-SVM (C = 10, gamma = 'scale', one-vs-one: spec 11.3-11.4) on the same
 * preprocessed features. The fit holds the n x n kernel (8 n^2 bytes), so training sets
 * above o->svm_max_train rows are cut to every stride-th row (gamma from those rows); the
 * row count used is printed and a subsampled cell is never compared with the spec's value. */
FK_CHECKRETURN static int run_svm(const bopts *o, const fk_dataset *tr, const fk_dataset *te,
                                  double *acc, size_t *used, fk_err *err)
{
    size_t n = tr->X.rows, stride = 1;
    if (o->svm_max_train > 0 && n > (size_t)o->svm_max_train)
        stride = (n + (size_t)o->svm_max_train - 1) / (size_t)o->svm_max_train;
    fk_dataset sub = {0};
    const fk_dataset *fit = tr;
    int rc = FK_OK;
    if (stride > 1) {
        size_t m = (n + stride - 1) / stride;
        int *rows = malloc(m * sizeof(int));
        if (!rows)
            return fk_err_set(err, FK_ENOMEM, "out of memory (SVM subsample)");
        for (size_t i = 0; i < m; i++)
            rows[i] = (int)(i * stride);
        rc = fk_dataset_subset(&sub, tr, rows, m);
        free(rows);
        fit = &sub;
    }
    fk_svm_opts so;
    fk_svm_opts_default(&so);
    so.C = 10;
    fk_svm s = {0};
    int *pred = malloc(te->X.rows * sizeof(int));
    if (!rc && !pred)
        rc = fk_err_set(err, FK_ENOMEM, "out of memory (SVM predictions)");
    if (!rc)
        rc = fk_svm_fit_rbf(&s, &fit->X, fit->y, C10, fk_bench_kahm_svm_sigma(&fit->X), &so, err);
    if (!rc)
        rc = fk_svm_predict(&s, &te->X, pred, err);
    size_t hit = 0;
    for (size_t i = 0; !rc && i < te->X.rows; i++)
        hit += pred[i] == te->y[i];
    if (!rc) {
        *acc = 100.0 * (double)hit / (double)te->X.rows;
        *used = fit->X.rows;
    }
    fk_svm_close(&s);
    free(pred);
    fk_dataset_close(&sub);
    return rc;
}

/* One SVM baseline row: against the spec's prototype with target_met when the full
 * training set was used, otherwise printed with the prototype for reference only. */
FK_CHECKRETURN static int emit_svm(const bopts *o, const char *name, const fk_dataset *tr,
                                   const fk_dataset *te, double spec, double tol, fk_err *err)
{
    double acc = 0, t0 = fk_bench_now();
    size_t used = 0;
    int rc = run_svm(o, tr, te, &acc, &used, err);
    if (rc)
        return fk_err_prefix(err, rc, "%s RBF-SVM baseline: ", name);
    char cs[96], extra[160];
    snprintf(cs, sizeof cs, "%s baseline", name);
    if (used == tr->X.rows)
        emit_target(o, cs, "svm_rbf_pct", acc, spec, tol, "spec 11.3 prototype (sklearn SVC C=10 gamma=scale)");
    else {
        snprintf(extra, sizeof extra, "\"spec_prototype\":%.2f,\"note\":\"subsampled, not comparable\"",
                 spec);
        fk_bench_emit(o->json, "fidelity-kahm", cs, "svm_rbf_pct", acc, extra);
    }
    fk_bench_emit(o->json, "fidelity-kahm", cs, "svm_train_rows", (double)used, NULL);
    fk_bench_emit(o->json, "fidelity-kahm", cs, "svm_seconds", fk_bench_now() - t0, NULL);
    return FK_OK;
}

/* sklearn digits (§11.3 C): x/16 then tanh, 5 stratified 70/30 splits (seeds 0-4, our
 * RNG, so the splits differ from sklearn's): KAHM one client = ten single-class clients,
 * E1; the target is the 5-split mean within 0.5 pt. */
FK_CHECKRETURN static int run_digits(const bopts *o, const char *path, fk_err *err)
{
    static const double spec_split[5] = {98.89, 99.07, 98.52, 97.96, 99.07};
    static const double spec_svm[5] = {99.63, 99.07, 98.89, 98.89, 98.52};
    fk_load_opts lo = {.label = FK_LABEL_LAST};
    fk_dataset all = {0};
    int rc = fk_load(&all, path, &lo, err);
    if (rc)
        return fk_err_prefix(err, rc, "sklearn digits (--digits_file): ");
    prep_tanh(&all, 1.0 / 16.0);
    size_t n = all.X.rows;
    int *idx = malloc(n * sizeof(int)), *tr_rows = malloc(n * sizeof(int)),
        *te_rows = malloc(n * sizeof(int));
    double mean = 0, e1max = 0, nn_mean = 0, svm_mean = 0;
    int svm_full = 1;
    for (int s = 0; s < 5 && !rc; s++) {
        fk_rng r;
        fk_rng_init(&r, (uint64_t)s, SKEW_STREAM + 1);
        size_t ntr = 0, nte = 0;
        for (int c = 0; c < all.n_classes; c++) {
            size_t m = 0;
            for (size_t i = 0; i < n; i++)
                if (all.y[i] == c)
                    idx[m++] = (int)i;
            fk_rng_shuffle(&r, idx, m);
            size_t h = (size_t)floor(0.3 * (double)m + 0.5);
            for (size_t t = 0; t < m; t++) {
                if (t < h)
                    te_rows[nte++] = idx[t];
                else
                    tr_rows[ntr++] = idx[t];
            }
        }
        fk_dataset tr = {0}, te = {0};
        rc = fk_dataset_subset(&tr, &all, tr_rows, ntr);
        if (!rc)
            rc = fk_dataset_subset(&te, &all, te_rows, nte);
        char name[48];
        snprintf(name, sizeof name, "digits split%d", s);
        double acc = 0, e1 = 0;
        if (!rc)
            rc = run_central(o, name, &tr, &te, spec_split[s], 1.5, &acc, &e1, err);
        int *pred = rc ? NULL : malloc(te.X.rows * sizeof(int));
        if (!rc && pred && !(rc = fk_knn1_predict(&tr.X, tr.y, &te.X, pred, err))) {
            size_t hit = 0;
            for (size_t i = 0; i < te.X.rows; i++)
                hit += pred[i] == te.y[i];
            nn_mean += 100.0 * (double)hit / (double)te.X.rows / 5;
        }
        free(pred);
        /* RBF-SVM on the same split (digits is small: the full 1,258-row fit, no cap). */
        double sacc = 0;
        size_t sused = 0;
        if (!rc && o->svm_max_train != 0) {
            double t0 = fk_bench_now();
            rc = run_svm(o, &tr, &te, &sacc, &sused, err);
            char cs[64], extra[96];
            snprintf(cs, sizeof cs, "digits split%d baseline", s);
            snprintf(extra, sizeof extra, "\"spec_prototype\":%.2f", spec_svm[s]);
            if (!rc) {
                fk_bench_emit(o->json, "fidelity-kahm", cs, "svm_rbf_pct", sacc, extra);
                fk_bench_emit(o->json, "fidelity-kahm", cs, "svm_train_rows", (double)sused, NULL);
                fk_bench_emit(o->json, "fidelity-kahm", cs, "svm_seconds", fk_bench_now() - t0, NULL);
            }
            svm_full = svm_full && sused == tr.X.rows;
        }
        svm_mean += sacc / 5;
        mean += acc / 5;
        e1max = e1 > e1max ? e1 : e1max;
        fk_dataset_close(&tr);
        fk_dataset_close(&te);
    }
    if (!rc) {
        emit_target(o, "digits mean5", "accuracy_63_pct", mean, 98.70, 0.5, "spec 11.3 C prototype");
        char extra[96];
        snprintf(extra, sizeof extra, "\"target\":0.01,\"target_met\":%s",
                 e1max < 0.01 ? "true" : "false");
        fk_bench_emit(o->json, "fidelity-kahm", "digits mean5", "E1_max", e1max, extra);
        snprintf(extra, sizeof extra, "\"spec_prototype\":98.33");
        fk_bench_emit(o->json, "fidelity-kahm", "digits mean5 baseline", "1nn_pct", nn_mean, extra);
        /* Splits differ from sklearn's (our RNG): the 5-split mean within 0.5 pt, as for KAHM. */
        if (o->svm_max_train != 0 && svm_full)
            emit_target(o, "digits mean5 baseline", "svm_rbf_pct", svm_mean, 99.00, 0.5,
                        "spec 11.3 C prototype (sklearn SVC C=10 gamma=scale)");
        else if (o->svm_max_train != 0)
            fk_bench_emit(o->json, "fidelity-kahm", "digits mean5 baseline", "svm_rbf_pct",
                          svm_mean, "\"spec_prototype\":99.00,\"note\":\"subsampled, not comparable\"");
    }
    free(idx);
    free(tr_rows);
    free(te_rows);
    fk_dataset_close(&all);
    return rc;
}

FK_CHECKRETURN static int load_pair(const char *dir, const char *tr_name, const char *te_name,
                                    double scale, fk_dataset *tr, fk_dataset *te, fk_err *err)
{
    int rc = fk_catalog_load(tr, dir, tr_name, err);
    if (!rc)
        rc = fk_catalog_load(te, dir, te_name, err);
    if (!rc) {
        prep_tanh(tr, scale);
        prep_tanh(te, scale);
    }
    return rc;
}

static int run(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: fedkern bench fidelity kahm [--data_dir DIR] [--json] [--seeds 3]\n"
                   "       [--skip_pendigits] [--skip_fashion] [--skip_single] [--skip_skew]\n"
                   "       [--skip_digits] [--digits_file PATH (python3-sklearn's digits.csv.gz)]\n"
                   "       [--skew 20|30 (one label skew only)] [--skip_office]\n"
                   "       [--office_splits 20] [--svm_max_train 8000 (0: no RBF-SVM rows)]\n\n"
                   "KAHM accuracy cells of spec kahm.md 11.3 (Pen-digits; Fashion-MNIST from the\n"
                   "Debian dataset-fashion-mnist package) with the spec's targets and target_met.\n");
            return 0;
        }
    fk_params p;
    fk_params_init(&p);
    fk_err err = {0};
    bopts o = {0};
    long seeds = 3;
    int rc = fk_params_parse_args(&p, &argc, argv, &err);
    if (!rc) rc = fk_params_bool(&p, "json", 0, &o.json, &err);
    if (!rc) rc = fk_params_int(&p, "seeds", 3, 1, 10, &seeds, &err);
    if (!rc) rc = fk_params_bool(&p, "skip_pendigits", 0, &o.skip_pen, &err);
    if (!rc) rc = fk_params_bool(&p, "skip_fashion", 0, &o.skip_fashion, &err);
    if (!rc) rc = fk_params_bool(&p, "skip_single", 0, &o.skip_single, &err);
    if (!rc) rc = fk_params_bool(&p, "skip_skew", 0, &o.skip_skew, &err);
    if (!rc) rc = fk_params_bool(&p, "skip_digits", 0, &o.skip_digits, &err);
    if (!rc) rc = fk_params_bool(&p, "skip_office", 0, &o.skip_office, &err);
    long osplits = 20;
    if (!rc) rc = fk_params_int(&p, "office_splits", 20, 1, 100, &osplits, &err);
    o.office_splits = (int)osplits;
    if (!rc) rc = fk_params_int(&p, "svm_max_train", 8000, 0, 100000, &o.svm_max_train, &err);
    long only = 0;
    if (!rc) rc = fk_params_int(&p, "skew", 0, 0, 30, &only, &err);
    if (!rc && only && only != 20 && only != 30)
        rc = fk_err_set(&err, FK_EINVAL, "--skew must be 20 or 30 (got %ld)", only);
    o.only_skew = (int)only;
    const char *digits = fk_params_str(&p, "digits_file", DIGITS_FILE);
    o.seeds = (int)seeds;
    o.dir = fk_params_str(&p, "data_dir", "../shared/data");
    if (!rc && (argc > 0 || fk_params_unused(&p)))
        rc = fk_err_set(&err, FK_EINVAL, "unexpected argument '%s'; see --help",
                        argc > 0 ? argv[0] : fk_params_unused(&p));
    if (!rc && !o.skip_digits)
        rc = run_digits(&o, digits, &err);
    if (!rc && !o.skip_pen)
        rc = fk_bench_data_dir(o.dir, &err);
    if (!rc && !o.skip_pen) {
        fk_dataset tr = {0}, te = {0};
        rc = load_pair(o.dir, "pendigits/train", "pendigits/test", 0.01, &tr, &te, &err);
        if (!rc)
            rc = run_central(&o, "pendigits", &tr, &te, 94.77, 0.1, NULL, NULL, &err);
        if (!rc)
            rc = run_1nn(&o, "pendigits", &tr, &te, 97.06, &err);
        /* Same fixed split as the prototype, deterministic SMO: within 0.1 pt. */
        if (!rc && o.svm_max_train != 0)
            rc = emit_svm(&o, "pendigits", &tr, &te, 98.60, 0.1, &err);
        static const double tg[2][3] = {{97.45, 96.68, 92.69}, {91.70, 96.39, 92.47}};
        static const double tol[3] = {1.5, 1.5, 1.5};
        static const char *ref[3] = {"spec 11.3 D prototype", "spec 11.3 D prototype",
                                     "spec 11.3 D prototype"};
        if (!rc && !o.skip_skew)
            rc = run_skew(&o, "pendigits", &tr, &te, tg, tol, ref, &err);
        fk_dataset_close(&tr);
        fk_dataset_close(&te);
    }
    if (!rc && !o.skip_office)
        rc = fk_bench_data_dir(o.dir, &err);
    if (!rc && !o.skip_office)
        rc = fk_bench_kahm_office(o.json, o.dir, o.office_splits, &err);
    if (!rc && !o.skip_fashion) {
        fk_dataset tr = {0}, te = {0};
        rc = load_pair(o.dir, "fashion-mnist/train", "fashion-mnist/test", 1.0, &tr, &te, &err);
        static const double tg[2][3] = {{97.95, 95.24, 87.83}, {95.51, 92.75, 88.26}};
        static const double tol[3] = {1.5, 1.5, 1.5};
        static const char *ref[3] = {"paper Table 2/3", "paper Table 2/3",
                                     "spec 11.3 A prototype"};
        if (!rc && !o.skip_skew)
            rc = run_skew(&o, "fashion-mnist", &tr, &te, tg, tol, ref, &err);
        /* The baseline first: minutes, where the KAHM cell below takes tens of minutes. The
         * full 60,000-row fit needs a 29 GB kernel: capped by --svm_max_train. */
        if (!rc && !o.skip_single && o.svm_max_train != 0)
            rc = emit_svm(&o, "fashion-mnist", &tr, &te, 90.21, 0.5, &err);
        if (!rc && !o.skip_single)
            rc = run_central(&o, "fashion-mnist", &tr, &te, 88.62, 0.3, NULL, NULL, &err);
        fk_dataset_close(&tr);
        fk_dataset_close(&te);
    }
    fk_params_close(&p);
    if (rc) {
        fprintf(stderr, "fedkern bench fidelity kahm: %s\n", err.msg);
        return 1;
    }
    return 0;
}

int fk_bench_fidelity_kahm(int argc, char **argv)
{
    return run(argc, argv);
}
