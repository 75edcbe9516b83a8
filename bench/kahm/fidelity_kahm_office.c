/* fedkern bench fidelity kahm, cell E of spec kahm.md §11.3: Office-Caltech10 semi-supervised
 * transfer (Table 4 protocol, §9.3) with two clients, the source and the target.
 *
 * Per split s = 0..splits-1 and per class: the source domain's class rows shuffled with seed s,
 * the first 20 (Amazon) or 8 (Caltech, DSLR, Webcam) labelled; the target's class rows shuffled
 * with seed s, the first 3 labelled, the rest the test set. The source fits one KAHM per class
 * with n_max = N_per_class - 1 (19 or 7), the target one per class with n_max = 2; "KAHM (63)"
 * labels a test row by the minimum distance over both clients' models, "target-only (64)" by
 * the target's models alone. Accuracy per task = mean over the splits; the SURF summary is the
 * mean and std over the 12 tasks. Features: SURF after per-domain L1 + z-score (the catalog),
 * then tanh; DeCAF6 raw, then tanh (D->W and W->D only: A and C are not in our data).
 * Beside them: 1-NN on the same labelled rows (source and target together), computed here, and
 * the RBF-SVM of spec 11.4 (C = 10, gamma = 'scale', one-vs-one) on the same labelled rows,
 * and Table 4's SURF rows (other methods, published; not recomputed). The spec has no
 * prototype value for either computed baseline: they are printed, without a target. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/kahm/kahm_bench.h"
#include "common/data/catalog.h"
#include "common/data/load.h"
#include "common/la/rng.h"
#include "common/models/kahm/kahm.h"
#include "common/models/svm/svm.h"

enum { NCLS = 10, TGT_LABELLED = 3 };
static const uint64_t OFFICE_STREAM = 0x6f66666900000000ULL; /* "offi" */

/* The spec's prototype per task: KAHM (63) and target-only (64); SURF order A, C, D, W. */
static const char LETTER[4] = {'A', 'C', 'D', 'W'};
static const double SURF_63[4][4] = {
    {0, 39.8, 39.1, 37.9}, {41.1, 0, 42.6, 39.1}, {39.1, 33.7, 0, 77.4}, {36.9, 30.8, 71.1, 0}};
static const double SURF_64[4][4] = {
    {0, 27.8, 53.5, 60.2}, {40.6, 0, 52.0, 60.5}, {40.8, 26.9, 0, 60.3}, {41.2, 29.3, 52.0, 0}};

/* The spec's RBF-SVM width, sklearn's gamma = 'scale' = 1 / (p var(X)) with var over every
 * entry of the training matrix (population variance), as sigma: gamma = 1 / (2 sigma^2). */
double fk_bench_kahm_svm_sigma(const fk_mat *X)
{
    size_t n = X->rows, p = X->cols;
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < p; j++) {
            double v = X->data[i * X->ld + j];
            s += v;
            s2 += v * v;
        }
    double m = s / (double)(n * p), var = s2 / (double)(n * p) - m * m;
    return sqrt((double)p * (var > 0 ? var : 1.0) / 2.0);
}

/* Rows of class c in d, shuffled by the split's stream; *n of them (malloc'd). */
static int *class_rows(const fk_dataset *d, int c, int split, int domain, size_t *n)
{
    int *idx = malloc((d->X.rows ? d->X.rows : 1) * sizeof(int));
    *n = 0;
    if (!idx)
        return NULL;
    for (size_t i = 0; i < d->X.rows; i++)
        if (d->y[i] == c)
            idx[(*n)++] = (int)i;
    fk_rng r;
    fk_rng_init(&r, (uint64_t)split, OFFICE_STREAM + 16 * (uint64_t)domain + (uint64_t)c);
    fk_rng_shuffle(&r, idx, *n);
    return idx;
}

/* Copy rows idx[0..n) of d into X (p columns) and their classes into y, from position at. */
static void take(const fk_dataset *d, const int *idx, size_t n, double *X, int *y, size_t at)
{
    size_t p = d->X.cols;
    for (size_t i = 0; i < n; i++) {
        memcpy(X + (at + i) * p, d->X.data + (size_t)idx[i] * d->X.ld, p * sizeof(double));
        y[at + i] = d->y[idx[i]];
    }
}

typedef struct split_acc {
    double k63, k64, nn, svm; /* percent */
} split_acc;

/* One split of one task: fit both clients, score the target's unlabelled rows. */
FK_CHECKRETURN static int one_split(const fk_dataset *src, const fk_dataset *tgt, int n_src,
                                    int split, int si, int ti, split_acc *out, fk_err *err)
{
    size_t p = src->X.cols, nt = tgt->X.rows;
    size_t ns = (size_t)NCLS * (size_t)n_src, nl = (size_t)NCLS * TGT_LABELLED;
    double *Xs = malloc(ns * p * sizeof(double)), *Xl = malloc(nl * p * sizeof(double));
    double *Xt = malloc(nt * p * sizeof(double));
    int *ys = malloc(ns * sizeof(int)), *yl = malloc(nl * sizeof(int)), *yt = malloc(nt * sizeof(int));
    double *D = malloc(nt * NCLS * sizeof(double)), *D2 = malloc(nt * NCLS * sizeof(double));
    int *lab = malloc(nt * sizeof(int));
    int rc = (!Xs || !Xl || !Xt || !ys || !yl || !yt || !D || !D2 || !lab)
                 ? fk_err_set(err, FK_ENOMEM, "bench fidelity kahm office: out of memory")
                 : FK_OK;
    size_t ms = 0, ml = 0, mt = 0;
    /* The labelled rows of both clients and the target's test rows, class by class. */
    for (int c = 0; !rc && c < NCLS; c++) {
        size_t a, b;
        int *rs = class_rows(src, c, split, si, &a), *rt = class_rows(tgt, c, split, ti, &b);
        if (!rs || !rt || a < (size_t)n_src || b <= TGT_LABELLED)
            rc = fk_err_set(err, FK_EINVAL, "office %c->%c: class %d has %zu source / %zu target "
                            "rows, the protocol needs %d / more than %d", LETTER[si], LETTER[ti],
                            c + 1, a, b, n_src, TGT_LABELLED);
        if (!rc) {
            take(src, rs, (size_t)n_src, Xs, ys, ms);
            take(tgt, rt, TGT_LABELLED, Xl, yl, ml);
            take(tgt, rt + TGT_LABELLED, b - TGT_LABELLED, Xt, yt, mt);
            ms += (size_t)n_src;
            ml += TGT_LABELLED;
            mt += b - TGT_LABELLED;
        }
        free(rs);
        free(rt);
    }
    /* Source KAHMs (n_max = N_per_class - 1), target KAHMs (n_max = 2); (63) and (64). */
    fk_kahm_set S = {0}, T = {0};
    fk_kahm_opts os, ot;
    fk_kahm_opts_default(&os);
    fk_kahm_opts_default(&ot);
    os.n_max = n_src - 1;
    ot.n_max = 2;
    int fs = 0, ft = 0;
    if (!rc && !(rc = fk_kahm_set_fit(&S, Xs, ms, p, p, ys, NCLS, &os, err)))
        fs = 1;
    if (!rc && !(rc = fk_kahm_set_fit(&T, Xl, ml, p, p, yl, NCLS, &ot, err)))
        ft = 1;
    if (!rc)
        rc = fk_kahm_set_dist(&T, Xt, mt, p, D2, 0, err);
    if (!rc) {
        memcpy(D, D2, mt * NCLS * sizeof(double));
        rc = fk_kahm_set_dist(&S, Xt, mt, p, D, 1, err);
    }
    if (!rc) {
        size_t h63 = 0, h64 = 0, hnn = 0;
        fk_kahm_argmin(D, mt, NCLS, lab, NULL);
        for (size_t i = 0; i < mt; i++)
            h63 += lab[i] == yt[i];
        fk_kahm_argmin(D2, mt, NCLS, lab, NULL);
        for (size_t i = 0; i < mt; i++)
            h64 += lab[i] == yt[i];
        /* 1-NN (Euclidean) on the labelled rows of both clients together */
        for (size_t i = 0; i < mt; i++) {
            double best = INFINITY;
            int bl = -1;
            for (size_t j = 0; j < ms + ml; j++) {
                const double *u = j < ms ? Xs + j * p : Xl + (j - ms) * p, *x = Xt + i * p;
                double d = 0;
                for (size_t k = 0; k < p && d < best; k++)
                    d += (x[k] - u[k]) * (x[k] - u[k]);
                if (d < best) {
                    best = d;
                    bl = j < ms ? ys[j] : yl[j - ms];
                }
            }
            hnn += bl == yt[i];
        }
        /* RBF-SVM on the same labelled rows (source then target), a few hundred rows */
        size_t mL = ms + ml, hsv = 0;
        double *XL = malloc(mL * p * sizeof(double));
        int *yL = malloc(mL * sizeof(int));
        if (!XL || !yL)
            rc = fk_err_set(err, FK_ENOMEM, "bench fidelity kahm office: out of memory");
        if (!rc) {
            memcpy(XL, Xs, ms * p * sizeof(double));
            memcpy(XL + ms * p, Xl, ml * p * sizeof(double));
            memcpy(yL, ys, ms * sizeof(int));
            memcpy(yL + ms, yl, ml * sizeof(int));
            fk_mat ML = fk_mat_view(XL, mL, p, p), MT = fk_mat_view(Xt, mt, p, p);
            fk_svm_opts so;
            fk_svm_opts_default(&so);
            so.C = 10;
            fk_svm sv = {0};
            rc = fk_svm_fit_rbf(&sv, &ML, yL, NCLS, fk_bench_kahm_svm_sigma(&ML), &so, err);
            if (!rc)
                rc = fk_svm_predict(&sv, &MT, lab, err);
            for (size_t i = 0; !rc && i < mt; i++)
                hsv += lab[i] == yt[i];
            fk_svm_close(&sv);
        }
        free(XL);
        free(yL);
        out->svm = 100.0 * (double)hsv / (double)mt;
        out->k63 = 100.0 * (double)h63 / (double)mt;
        out->k64 = 100.0 * (double)h64 / (double)mt;
        out->nn = 100.0 * (double)hnn / (double)mt;
    }
    if (rc)
        fk_err_prefix(err, rc, "office %c->%c split %d: ", LETTER[si], LETTER[ti], split);
    if (fs)
        fk_kahm_set_close(&S);
    if (ft)
        fk_kahm_set_close(&T);
    free(Xs);
    free(Xl);
    free(Xt);
    free(ys);
    free(yl);
    free(yt);
    free(D);
    free(D2);
    free(lab);
    return rc;
}

/* tanh of every feature (after the catalog's L1 + z-score for SURF; raw DeCAF6). */
static void prep(fk_dataset *d)
{
    for (size_t i = 0; i < d->X.rows; i++)
        for (size_t j = 0; j < d->X.cols; j++)
            d->X.data[i * d->X.ld + j] = tanh(d->X.data[i * d->X.ld + j]);
}

/* Mean over the splits of one task; the three rows with their targets. */
FK_CHECKRETURN static int run_task(int json, const char *feat, const fk_dataset *src,
                                   const fk_dataset *tgt, int si, int ti, int n_src, int splits,
                                   double t63, double t64, split_acc *mean, fk_err *err)
{
    split_acc sum = {0, 0, 0, 0};
    for (int s = 0; s < splits; s++) {
        split_acc a;
        int rc = one_split(src, tgt, n_src, s, si, ti, &a, err);
        if (rc)
            return rc;
        sum.k63 += a.k63;
        sum.k64 += a.k64;
        sum.nn += a.nn;
        sum.svm += a.svm;
    }
    mean->k63 = sum.k63 / splits;
    mean->k64 = sum.k64 / splits;
    mean->nn = sum.nn / splits;
    mean->svm = sum.svm / splits;
    char cs[64], extra[200];
    snprintf(cs, sizeof cs, "office %s %c->%c splits=%d", feat, LETTER[si], LETTER[ti], splits);
    const double v[2] = {mean->k63, mean->k64}, tg[2] = {t63, t64};
    static const char *metric[2] = {"kahm63_pct", "target_only64_pct"};
    for (int m = 0; m < 2; m++) {
        snprintf(extra, sizeof extra, "\"target\":%.1f,\"tol\":2.0,\"ref\":\"spec 11.3 E "
                 "prototype\",\"target_met\":%s", tg[m], fabs(v[m] - tg[m]) <= 2.0 ? "true" : "false");
        fk_bench_emit(json, "fidelity-kahm", cs, metric[m], v[m], extra);
    }
    fk_bench_emit(json, "fidelity-kahm", cs, "baseline_1nn_labelled_pct", mean->nn,
                  "\"ref\":\"computed: 1-NN on the labelled source and target rows\"");
    fk_bench_emit(json, "fidelity-kahm", cs, "baseline_svm_rbf_labelled_pct", mean->svm,
                  "\"ref\":\"computed: RBF-SVM C=10 gamma=scale on the labelled source and target rows\"");
    return FK_OK;
}

static void mean_std(const double *v, int n, double *m, double *s)
{
    double a = 0, b = 0;
    for (int i = 0; i < n; i++)
        a += v[i];
    a /= n;
    for (int i = 0; i < n; i++)
        b += (v[i] - a) * (v[i] - a);
    *m = a;
    *s = n > 1 ? sqrt(b / (n - 1)) : 0;
}

int fk_bench_kahm_office(int json, const char *dir, int splits, fk_err *err)
{
    static const char *const domains[4] = {"amazon", "caltech", "dslr", "webcam"};
    fk_dataset ds[4];
    memset(ds, 0, sizeof ds);
    int rc = fk_bench_load_surf(ds, domains, dir, err);
    for (int i = 0; !rc && i < 4; i++)
        prep(&ds[i]);
    double v63[12], v64[12], vnn[12], vsv[12];
    int k = 0;
    double t0 = fk_bench_now();
    for (int si = 0; !rc && si < 4; si++)
        for (int ti = 0; !rc && ti < 4; ti++) {
            if (si == ti)
                continue;
            split_acc m;
            rc = run_task(json, "surf", &ds[si], &ds[ti], si, ti, si == 0 ? 20 : 8, splits,
                          SURF_63[si][ti], SURF_64[si][ti], &m, err);
            if (!rc) {
                v63[k] = m.k63;
                v64[k] = m.k64;
                vsv[k] = m.svm;
                vnn[k++] = m.nn;
            }
        }
    if (!rc) {
        double m, s;
        char extra[200], cs[64];
        snprintf(cs, sizeof cs, "office surf mean12 splits=%d", splits);
        static const double tg[2] = {44.0, 45.4};
        static const char *metric[2] = {"kahm63_pct", "target_only64_pct"};
        const double *v[2] = {v63, v64};
        for (int t = 0; t < 2; t++) {
            mean_std(v[t], 12, &m, &s);
            snprintf(extra, sizeof extra, "\"target\":%.1f,\"tol\":1.0,\"std\":%.2f,\"ref\":\"spec "
                     "11.3 E prototype\",\"target_met\":%s", tg[t], s, fabs(m - tg[t]) <= 1.0 ? "true" : "false");
            fk_bench_emit(json, "fidelity-kahm", cs, metric[t], m, extra);
        }
        mean_std(vnn, 12, &m, &s);
        snprintf(extra, sizeof extra, "\"std\":%.2f,\"ref\":\"computed\"", s);
        fk_bench_emit(json, "fidelity-kahm", cs, "baseline_1nn_labelled_pct", m, extra);
        mean_std(vsv, 12, &m, &s);
        snprintf(extra, sizeof extra, "\"std\":%.2f,\"ref\":\"computed\"", s);
        fk_bench_emit(json, "fidelity-kahm", cs, "baseline_svm_rbf_labelled_pct", m, extra);
        /* Table 4's SURF rows: other methods, published, not recomputed */
        static const struct { const char *name; double v; } pub[5] = {
            {"OBTL", 58.9}, {"ILS_1nn", 55.6}, {"CDLS", 53.5}, {"MMDT", 52.5}, {"HFA", 48.1}};
        for (int i = 0; i < 5; i++) {
            char mt[48];
            snprintf(mt, sizeof mt, "published_%s_pct", pub[i].name);
            fk_bench_emit(json, "fidelity-kahm", cs, mt, pub[i].v,
                          "\"ref\":\"paper Table 4 (SURF), not recomputed\"");
        }
        fk_bench_emit(json, "fidelity-kahm", cs, "seconds", fk_bench_now() - t0, NULL);
    }
    for (int i = 0; i < 4; i++)
        fk_dataset_close(&ds[i]);
    /* DeCAF6, raw features then tanh: D->W and W->D */
    fk_dataset dc[2]; /* dslr, webcam */
    memset(dc, 0, sizeof dc);
    static const char *const files[2] = {"office-caltech10-decaf6/dslr.csv.gz",
                                         "office-caltech10-decaf6/webcam.csv.gz"};
    for (int i = 0; !rc && i < 2; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        rc = fk_load(&dc[i], path, NULL, err);
        if (!rc)
            prep(&dc[i]);
    }
    if (!rc && dc[0].n_classes != NCLS)
        rc = fk_err_set(err, FK_EFORMAT, "office DeCAF6: %d classes, expected %d", dc[0].n_classes,
                        NCLS);
    split_acc m;
    /* letters index: D = 2, W = 3; both domains use 8 source rows per class */
    if (!rc)
        rc = run_task(json, "decaf6", &dc[0], &dc[1], 2, 3, 8, splits, 97.4, 88.7, &m, err);
    if (!rc)
        rc = run_task(json, "decaf6", &dc[1], &dc[0], 3, 2, 8, splits, 98.3, 90.7, &m, err);
    for (int i = 0; i < 2; i++)
        fk_dataset_close(&dc[i]);
    return rc;
}
