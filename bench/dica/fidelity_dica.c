/* fedkern bench fidelity dica: spec dica.md §11.3 on Office-Caltech10 SURF,
 * leave-one-domain-out (train on three domains, each a domain; test on the fourth).
 *   kernel  input 1-NN / ridge / RBF-SVM (C = 10, common/models/svm/svm.c), KPCA, UDICA
 *           (m = 100), COIR, DICA (m = 9) with 1-NN and the §8.1 ridge, DICA/UDICA with center_test = batch; sigma by the mean-distance
 *           rule, lambda 1, eps 1e-3 (common/models/dica/dica.c, reduced exact solver);
 *   rf      the federated job type `dica` in simulation, one client per training domain and
 *           the held-out domain as a test-only client, R = 500, 1000, 2000, RF seeds 0..2;
 *           ridge is the job's own predictor scored by the held-out client, 1-NN on the
 *           model's projections.
 * Every cell is printed next to the spec's prototype value with target_met (cells +-1.0,
 * averages +-0.5; RF averages +-1.0, gaps to kernel DICA at R = 2000 <= 2.0 ridge /
 * 3.5 1-NN, gaps shrinking in R). No selection on target labels. */
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <zlib.h>

#include "bench/bench.h"
#include "bench/dica/dica_bench.h"
#include "bench/knn.h"
#include "common/base/params.h"
#include "common/data/catalog.h"
#include "common/methods/dica/dica_job.h"
#include "common/methods/sim.h"
#include "common/models/dica/dica.h"
#include "common/models/svm/svm.h"

/* Columns in the spec's order: held-out A, C, D, W. */
static const char *const domains[4] = {"amazon", "caltech", "dslr", "webcam"};
static const char letters[4] = {'A', 'C', 'D', 'W'};

enum {
    R_INPUT_NN,
    R_INPUT_RIDGE,
    R_INPUT_SVM,
    R_KPCA_NN,
    R_KPCA_RIDGE,
    R_UDICA_NN,
    R_UDICA_RIDGE,
    R_COIR_NN,
    R_COIR_RIDGE,
    R_DICA_NN,
    R_DICA_RIDGE,
    R_DICA_BATCH,
    R_UDICA_BATCH,
    N_ROWS
};

static const struct {
    const char *name;
    double proto[5]; /* A C D W avg */
} rows[N_ROWS] = {
    {"input 1nn", {24.9, 26.7, 45.2, 33.2, 32.53}},
    {"input ridge", {42.0, 35.3, 56.1, 45.4, 44.67}},
    {"input rbf-svm C=10", {52.6, 47.7, 70.1, 57.3, 56.92}},
    {"kpca m=100 1nn", {40.1, 36.2, 74.5, 59.0, 52.46}},
    {"kpca m=100 ridge", {50.4, 47.5, 69.4, 51.5, 54.71}},
    {"udica m=100 1nn", {40.1, 36.2, 74.5, 59.0, 52.46}},
    {"udica m=100 ridge", {50.4, 47.5, 69.4, 51.5, 54.71}},
    {"coir m=9 1nn", {52.5, 46.7, 68.2, 56.6, 55.98}},
    {"coir m=9 ridge", {53.4, 46.1, 67.5, 58.3, 56.35}},
    {"dica m=9 1nn", {52.5, 46.7, 68.2, 56.6, 55.98}},
    {"dica m=9 ridge", {53.4, 46.1, 67.5, 58.3, 56.35}},
    {"dica center_test=batch ridge", {53.4, 46.1, 68.2, 58.3, 56.51}},
    {"udica center_test=batch ridge", {50.5, 47.4, 69.4, 51.9, 54.80}},
};

static const size_t rf_R[3] = {500, 1000, 2000};
static const double rf_proto[2][3][5] = {/* [ridge, 1nn][R] A C D W avg */
                                         {{48.0, 41.4, 60.9, 48.1, 49.61},
                                          {50.5, 44.1, 62.8, 53.4, 52.73},
                                          {51.9, 45.5, 65.6, 55.8, 54.71}},
                                         {{46.9, 39.9, 55.8, 44.7, 46.84},
                                          {49.9, 42.9, 58.6, 48.7, 50.02},
                                          {50.2, 45.3, 63.7, 52.5, 52.92}}};
static const double rf_upload_mb[3] = {4.09, 16.2, 64.4};

typedef struct opts {
    int json, kernel, rf, park, gvhd, time, seeds;
    long rf_max, rf_min, reps;
} opts;

static void emit(const opts *o, const char *cs, double v, double proto, double tol,
                 const char *more)
{
    char ex[320];
    snprintf(ex, sizeof ex,
             "\"prototype\":%.2f,\"target\":\"|x - prototype| <= %.1f\",\"target_met\":%s%s%s",
             proto, tol, fabs(v - proto) <= tol ? "true" : "false", more ? "," : "",
             more ? more : "");
    fk_bench_emit(o->json, "fidelity dica", cs, "accuracy", v, ex);
}

FK_CHECKRETURN static int nn_acc(const fk_mat *Ztr, const int *ytr, const fk_mat *Zte, const int *yte, double *acc,
                  fk_err *err)
{
    int *pred = malloc(Zte->rows * sizeof *pred);
    if (!pred)
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    int rc = fk_knn1_predict(Ztr, ytr, Zte, pred, err);
    size_t hit = 0;
    for (size_t i = 0; !rc && i < Zte->rows; i++)
        hit += pred[i] == yte[i];
    free(pred);
    *acc = 100.0 * (double)hit / (double)Zte->rows;
    return rc;
}

/* The §8.1 ridge (alpha_rel 1e-3) fit on (Ztr, ytr), accuracy on (Zte, yte). */
FK_CHECKRETURN static int ridge_acc(const fk_mat *Ztr, const int *ytr, const fk_mat *Zte, const int *yte, int C,
                     double *acc, fk_err *err)
{
    size_t m = Ztr->cols, p = m + 1, k = (size_t)C;
    double *T = calloc(Ztr->rows * k, sizeof *T), *A = calloc(p * p, sizeof *A);
    double *b = calloc(p * k, sizeof *b), *th = calloc(p * k, sizeof *th);
    double *pred = malloc(Zte->rows * k * sizeof *pred);
    int rc = (T && A && b && th && pred) ? FK_OK : fk_err_set(err, FK_ENOMEM, "out of memory");
    if (!rc) {
        for (size_t i = 0; i < Ztr->rows; i++)
            T[i * k + (size_t)ytr[i]] = 1.0;
        fk_dica_ridge_add(Ztr, T, k, A, b);
        rc = fk_dica_ridge_solve(m, k, A, b, 1e-3, th, err);
    }
    if (!rc) {
        fk_dica_ridge_predict(Zte, th, k, pred);
        size_t hit = 0;
        for (size_t i = 0; i < Zte->rows; i++) {
            size_t best = 0;
            for (size_t c = 1; c < k; c++)
                if (pred[i * k + c] > pred[i * k + best])
                    best = c;
            hit += (int)best == yte[i];
        }
        *acc = 100.0 * (double)hit / (double)Zte->rows;
    }
    free(T);
    free(A);
    free(b);
    free(th);
    free(pred);
    return rc;
}

/* The centralised RBF-SVM baseline (spec §11.5): C = 10, gamma = 1/(2 sigma^2), one-vs-one. */
FK_CHECKRETURN static int svm_acc(const fk_mat *Xtr, const int *ytr, const fk_mat *Xte, const int *yte, int C,
                   double sigma, double *acc, fk_err *err)
{
    fk_svm_opts so;
    fk_svm_opts_default(&so);
    so.C = 10;
    fk_svm s;
    int *pred = malloc(Xte->rows * sizeof *pred);
    if (!pred)
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    int rc = fk_svm_fit_rbf(&s, Xtr, ytr, C, sigma, &so, err);
    if (!rc)
        rc = fk_svm_predict(&s, Xte, pred, err);
    size_t hit = 0;
    for (size_t i = 0; !rc && i < Xte->rows; i++)
        hit += pred[i] == yte[i];
    if (!rc)
        *acc = 100.0 * (double)hit / (double)Xte->rows;
    fk_svm_close(&s);
    free(pred);
    return rc;
}

/* Training rows of the three domains other than t, pooled, with domain ids. */
FK_CHECKRETURN static int pool(const fk_dataset *ds, int t, fk_mat *X, int **y, long **dom, fk_err *err)
{
    size_t n = 0, d = ds[0].X.cols, r = 0;
    for (int i = 0; i < 4; i++)
        n += i == t ? 0 : ds[i].X.rows;
    *y = malloc(n * sizeof **y);
    *dom = malloc(n * sizeof **dom);
    if (!*y || !*dom || fk_mat_init(X, n, d))
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    for (int i = 0; i < 4; i++) {
        if (i == t)
            continue;
        for (size_t j = 0; j < ds[i].X.rows; j++, r++) {
            memcpy(fk_mat_row(X, r), fk_mat_row(&ds[i].X, j), d * sizeof(double));
            (*y)[r] = ds[i].y[j];
            (*dom)[r] = i;
        }
    }
    return FK_OK;
}

static double sigma_rule(const fk_mat *X)
{
    size_t d = X->cols;
    double *s = calloc(2 * d, sizeof *s);
    if (!s)
        return NAN;
    fk_dica_moments(X, X->rows, s, s + d);
    double sg = fk_dica_sigma_rule((double)X->rows, s + d, d);
    free(s);
    return sg;
}

/* Kernel DICA (m = 9) alone, fit from the pooled rows and the test projection: the time a
 * peer implementation is compared with (wall and CPU seconds into sec[0], sec[1]). */
FK_CHECKRETURN static int dica_alone(const fk_mat *X, const int *y, int C, const long *dom, double sigma,
                      const fk_mat *Xte, double sec[2], fk_err *err)
{
    double w0 = fk_bench_now(), c0 = fk_bench_cpu_now();
    fk_dica_opts o;
    fk_dica_opts_default(&o, FK_DICA_DICA, 9);
    fk_dica_kernel kd = {0};
    fk_mat Z = {0};
    int rc = fk_dica_kernel_fit(&kd, X, y, C, NULL, 0, dom, sigma, &o, err);
    if (!rc)
        rc = fk_dica_kernel_project(&kd, Xte, 0, &Z, err);
    sec[0] = fk_bench_now() - w0;
    sec[1] = fk_bench_cpu_now() - c0;
    fk_mat_close(&Z);
    fk_dica_kernel_close(&kd);
    return rc;
}

/* One held-out domain, every kernel row; acc[row] filled. */
FK_CHECKRETURN static int kernel_fold(const fk_dataset *ds, int t, double *acc, double *dv, double *sigma_out,
                       double sec[2], fk_err *err)
{
    fk_mat X = {0}, Z = {0};
    int *y = NULL;
    long *dom = NULL;
    const fk_dataset *te = &ds[t];
    int C = 10;
    int rc = pool(ds, t, &X, &y, &dom, err);
    double sigma = sigma_rule(&X);
    *sigma_out = sigma;
    if (!rc)
        rc = dica_alone(&X, y, C, dom, sigma, &te->X, sec, err);
    if (!rc)
        rc = nn_acc(&X, y, &te->X, te->y, &acc[R_INPUT_NN], err);
    if (!rc)
        rc = ridge_acc(&X, y, &te->X, te->y, C, &acc[R_INPUT_RIDGE], err);
    if (!rc)
        rc = svm_acc(&X, y, &te->X, te->y, C, sigma, &acc[R_INPUT_SVM], err);
    static const struct {
        fk_dica_variant v;
        size_t m;
        int nn, ridge, batch;
    } fits[4] = {{FK_DICA_KPCA, 100, R_KPCA_NN, R_KPCA_RIDGE, -1},
                 {FK_DICA_UDICA, 100, R_UDICA_NN, R_UDICA_RIDGE, R_UDICA_BATCH},
                 {FK_DICA_COIR, 9, R_COIR_NN, R_COIR_RIDGE, -1},
                 {FK_DICA_DICA, 9, R_DICA_NN, R_DICA_RIDGE, R_DICA_BATCH}};
    fk_dica_kernel kd = {0};
    for (int f = 0; f < 4 && !rc; f++) {
        fk_dica_opts o;
        fk_dica_opts_default(&o, fits[f].v, fits[f].m);
        if (fits[f].v == FK_DICA_KPCA || fits[f].v == FK_DICA_COIR)
            o.q_weight = 0;
        rc = f == 0 ? fk_dica_kernel_fit(&kd, &X, y, C, NULL, 0, dom, sigma, &o, err)
                    : fk_dica_kernel_refit(&kd, y, C, NULL, 0, dom, &o, err);
        if (!rc)
            dv[f] = fk_dica_domain_variance(&kd.Z, dom);
        if (!rc)
            rc = fk_dica_kernel_project(&kd, &te->X, 0, &Z, err);
        if (!rc)
            rc = nn_acc(&kd.Z, y, &Z, te->y, &acc[fits[f].nn], err);
        if (!rc)
            rc = ridge_acc(&kd.Z, y, &Z, te->y, C, &acc[fits[f].ridge], err);
        fk_mat_close(&Z);
        if (!rc && fits[f].batch >= 0) {
            rc = fk_dica_kernel_project(&kd, &te->X, 1, &Z, err);
            if (!rc)
                rc = ridge_acc(&kd.Z, y, &Z, te->y, C, &acc[fits[f].batch], err);
            fk_mat_close(&Z);
        }
    }
    fk_dica_kernel_close(&kd);
    fk_mat_close(&X);
    free(y);
    free(dom);
    return rc;
}

/* `--part time`: only the kernel DICA fit + projection of each fold (the rows a peer is
 * timed against), best of --reps runs per fold by CPU seconds. */
FK_CHECKRETURN static int run_time(const fk_dataset *ds, const opts *o, fk_err *err)
{
    double best[2] = {0, 0};
    for (int t = 0; t < 4; t++) {
        fk_mat X = {0};
        int *y = NULL;
        long *dom = NULL;
        int rc = pool(ds, t, &X, &y, &dom, err);
        double sigma = rc ? NAN : sigma_rule(&X), b[2] = {INFINITY, INFINITY};
        for (long r = 0; !rc && r < o->reps; r++) {
            double sec[2];
            rc = dica_alone(&X, y, 10, dom, sigma, &ds[t].X, sec, err);
            if (!rc && sec[1] < b[1]) {
                b[0] = sec[0];
                b[1] = sec[1];
            }
        }
        size_t n = X.rows;
        fk_mat_close(&X);
        free(y);
        free(dom);
        if (rc)
            return rc;
        char cpu[96], cf[64];
        snprintf(cpu, sizeof cpu, "\"cpu_seconds\":%.3f,\"n\":%zu,\"reps\":%ld", b[1], n,
                 o->reps);
        snprintf(cf, sizeof cf, "kernel dica fit+project %c", letters[t]);
        fk_bench_emit(o->json, "fidelity dica", cf, "seconds", b[0], cpu);
        best[0] += b[0];
        best[1] += b[1];
    }
    char cpu[64];
    snprintf(cpu, sizeof cpu, "\"cpu_seconds\":%.3f,\"reps\":%ld", best[1], o->reps);
    fk_bench_emit(o->json, "fidelity dica", "kernel dica fit+project 4 folds", "seconds", best[0],
                  cpu);
    return FK_OK;
}

FK_CHECKRETURN static int run_kernel(const fk_dataset *ds, const opts *o, double *dica_avg, fk_err *err)
{
    double acc[4][N_ROWS], dv[4][4], sig[4], sec[2], sum[2] = {0, 0};
    for (int t = 0; t < 4; t++) {
        double t0 = fk_bench_now();
        int rc = kernel_fold(ds, t, acc[t], dv[t], &sig[t], sec, err);
        if (rc)
            return rc;
        char cpu[64], cf[64];
        snprintf(cpu, sizeof cpu, "\"cpu_seconds\":%.3f", sec[1]);
        snprintf(cf, sizeof cf, "kernel dica fit+project %c", letters[t]);
        fk_bench_emit(o->json, "fidelity dica", cf, "seconds", sec[0], cpu);
        sum[0] += sec[0];
        sum[1] += sec[1];
        if (t == 3) {
            snprintf(cpu, sizeof cpu, "\"cpu_seconds\":%.3f", sum[1]);
            fk_bench_emit(o->json, "fidelity dica", "kernel dica fit+project 4 folds", "seconds",
                          sum[0], cpu);
        }
        char more[160];
        snprintf(more, sizeof more, "\"sigma\":%.4f,\"seconds\":%.1f", sig[t], fk_bench_now() - t0);
        char cs[64];
        snprintf(cs, sizeof cs, "kernel fold %c", letters[t]);
        fk_bench_emit(o->json, "fidelity dica", cs, "sigma_x", sig[t], more);
        /* invariance (§11.1 item 13): UDICA below KPCA, DICA below COIR */
        char ex[200];
        snprintf(ex, sizeof ex,
                 "\"kpca\":%.6g,\"udica\":%.6g,\"coir\":%.6g,\"dica\":%.6g,"
                 "\"target\":\"udica < kpca and dica < coir\",\"target_met\":%s",
                 dv[t][0], dv[t][1], dv[t][2], dv[t][3],
                 dv[t][1] < dv[t][0] && dv[t][3] < dv[t][2] ? "true" : "false");
        snprintf(cs, sizeof cs, "domain variance %c", letters[t]);
        fk_bench_emit(o->json, "fidelity dica", cs, "udica_over_kpca", dv[t][1] / dv[t][0], ex);
    }
    for (int r = 0; r < N_ROWS; r++) {
        double avg = 0;
        for (int t = 0; t < 4; t++) {
            char cs[80];
            snprintf(cs, sizeof cs, "kernel %s %c", rows[r].name, letters[t]);
            emit(o, cs, acc[t][r], rows[r].proto[t], 1.0, NULL);
            avg += acc[t][r] / 4;
        }
        char cs[80];
        snprintf(cs, sizeof cs, "kernel %s avg", rows[r].name);
        emit(o, cs, avg, rows[r].proto[4], 0.5, NULL);
        if (r == R_DICA_RIDGE)
            dica_avg[0] = avg;
        if (r == R_DICA_NN)
            dica_avg[1] = avg;
    }
    return FK_OK;
}

/* Federated RF DICA through the job type: one fold, one R, one seed. */
FK_CHECKRETURN static int rf_fold(const fk_dataset *ds, int t, size_t R, uint64_t seed, double *ridge, double *nn,
                   double *bytes, fk_err *err)
{
    fk_dataset cl[4];
    int k = 0;
    for (int i = 0; i < 4; i++)
        if (i != t)
            cl[k++] = ds[i];
    cl[3] = ds[t];
    fk_params p;
    fk_params_init(&p);
    char buf[32];
    snprintf(buf, sizeof buf, "%zu", R);
    fk_report fin[4];
    fk_sim_opts so = {.rounds = 1, .seed = seed, .final_reports = fin};
    fk_bundle model;
    fk_sim_round last;
    int rc = fk_params_set_all(&p, (const char *const[]){"R", buf, "m", "9", "lambda", "1", "eps",
                                                          "1e-3", "classes", "10", "holdout", "3",
                                                          NULL});
    if (rc)
        rc = fk_err_set(err, rc, "out of memory for the job parameters");
    else
        rc = fk_sim_run(&fk_method_dica, &p, cl, 4, &so, &model, &last, err);
    fk_params_close(&p);
    if (rc)
        return rc;
    *ridge = 100.0 * fin[3].accuracy;
    *bytes = (double)last.bytes;
    /* 1-NN on the projections of the model (centrally, for the table only) */
    fk_mat Zte = {0}, Ztr = {0}, Zi = {0};
    size_t n = 0;
    for (int i = 0; i < 3; i++)
        n += cl[i].X.rows;
    int *y = malloc(n * sizeof *y);
    rc = y ? fk_dica_job_project(&model, seed, "iid", &cl[3].X, &Zte, err)
           : fk_err_set(err, FK_ENOMEM, "out of memory");
    if (!rc && fk_mat_init(&Ztr, n, Zte.cols))
        rc = fk_err_set(err, FK_ENOMEM, "out of memory");
    size_t r0 = 0;
    for (int i = 0; i < 3 && !rc; i++) {
        rc = fk_dica_job_project(&model, seed, "iid", &cl[i].X, &Zi, err);
        for (size_t j = 0; !rc && j < Zi.rows; j++, r0++) {
            memcpy(fk_mat_row(&Ztr, r0), fk_mat_row(&Zi, j), Zi.cols * sizeof(double));
            y[r0] = cl[i].y[j];
        }
        fk_mat_close(&Zi);
    }
    if (!rc)
        rc = nn_acc(&Ztr, y, &Zte, cl[3].y, nn, err);
    free(y);
    fk_mat_close(&Ztr);
    fk_mat_close(&Zte);
    fk_bundle_close(&model);
    return rc;
}

FK_CHECKRETURN static int run_rf(const fk_dataset *ds, const opts *o, const double *dica_avg, fk_err *err)
{
    double gaps[2][3];
    int n_r = 0;
    int first = -1;
    for (int ri = 0; ri < 3 && rf_R[ri] <= (size_t)o->rf_max; ri++) {
        size_t R = rf_R[ri];
        if (R < (size_t)o->rf_min)
            continue;
        if (first < 0)
            first = ri;
        n_r = ri - first + 1;
        double acc[2][4] = {{0}}, secs = 0, bytes = 0;
        for (int t = 0; t < 4; t++)
            for (int s = 0; s < o->seeds; s++) {
                double r, nn, b, t0 = fk_bench_now();
                int rc = rf_fold(ds, t, R, (uint64_t)s, &r, &nn, &b, err);
                if (rc)
                    return rc;
                secs += fk_bench_now() - t0;
                acc[0][t] += r / o->seeds;
                acc[1][t] += nn / o->seeds;
                bytes = b;
            }
        for (int pr = 0; pr < 2; pr++) {
            double avg = 0;
            for (int t = 0; t < 4; t++) {
                char cs[80];
                snprintf(cs, sizeof cs, "rf dica R=%zu %s %c", R, pr ? "1nn" : "ridge", letters[t]);
                char ex[160]; /* cells move with the RF seeds (spec: ~1 pt); the average is the
                                 target */
                snprintf(ex, sizeof ex,
                         "\"prototype\":%.2f,\"target\":\"none (seed noise; see avg)\"",
                         rf_proto[pr][ri][t]);
                fk_bench_emit(o->json, "fidelity dica", cs, "accuracy", acc[pr][t], ex);
                avg += acc[pr][t] / 4;
            }
            char cs[80], more[200];
            gaps[pr][ri] = dica_avg[pr] - avg;
            snprintf(more, sizeof more, "\"seeds\":%d,\"gap_to_kernel_dica\":%.2f,\"seconds\":%.1f",
                     o->seeds, gaps[pr][ri], secs);
            snprintf(cs, sizeof cs, "rf dica R=%zu %s avg", R, pr ? "1nn" : "ridge");
            emit(o, cs, avg, rf_proto[pr][ri][4], 1.0, more);
        }
        char cs[64], ex[200];
        snprintf(cs, sizeof cs, "rf dica R=%zu upload", R);
        snprintf(ex, sizeof ex, "\"spec\":%.2f,\"values\":%zu,\"round_bytes_last_fold\":%.0f",
                 rf_upload_mb[ri], fk_dica_upload_values(R, 1, 10), bytes);
        fk_bench_emit(o->json, "fidelity dica", cs, "MB_per_client",
                      8e-6 * (double)fk_dica_upload_values(R, 1, 10), ex);
    }
    for (int pr = 0; pr < 2 && n_r > 0; pr++) {
        double lim = pr ? 3.5 : 2.0;
        int last = first + n_r - 1, dec = 1;
        for (int i = first + 1; i <= last; i++)
            dec &= gaps[pr][i] < gaps[pr][i - 1];
        char cs[64], ex[200];
        snprintf(cs, sizeof cs, "rf gap R=%zu %s", rf_R[last], pr ? "1nn" : "ridge");
        snprintf(ex, sizeof ex,
                 "\"target\":\"gap <= %.1f at R = 2000\",\"target_met\":%s,"
                 "\"gap_decreasing_in_R\":%s",
                 lim, rf_R[last] == 2000 && gaps[pr][last] <= lim ? "true" : "false",
                 dec ? "true" : "false");
        fk_bench_emit(o->json, "fidelity dica", cs, "gap_pt", gaps[pr][last], ex);
    }
    return FK_OK;
}

/* ---- Parkinson's telemonitoring (spec §11.3): deterministic 10-split protocol ---- */

enum { P_LLS, P_KRR01, P_KRR1, P_KPCA, P_UDICA, P_COIR, P_DICA, P_DICA_REF, NP_ROWS };
static const struct {
    const char *name;
    double proto[2], paper[2]; /* motor, total; paper NAN where it prints none */
} prow[NP_ROWS] = {
    {"lls", {9.47, 12.31}, {8.82, 11.80}},
    {"input rbf kernel ridge alpha=0.1", {9.47, 12.57}, {9.58, 12.67}},
    {"input rbf kernel ridge alpha=1", {9.29, 12.19}, {NAN, NAN}},
    {"kpca+ridge", {9.47, 12.37}, {8.54, 11.20}},
    {"udica+ridge", {9.47, 12.37}, {8.67, 11.36}},
    {"coir+ridge", {9.52, 12.63}, {9.25, 12.41}},
    {"dica+ridge", {9.52, 12.63}, {8.40, 11.05}},
    /* spec §5.5 `ref` (the reference code's unit beta then 1/sqrt(n gamma), close to the
     * Python port's 1/sqrt(eigenvalue)): no prototype, measured beside `constraint` (issue 36) */
    {"dica+ridge normalise=ref", {NAN, NAN}, {8.40, 11.05}},
};

static double rmse(const double *p, const double *t, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (p[i] - t[i]) * (p[i] - t[i]);
    return sqrt(s / (double)n);
}

/* Ridge (§8.1) on features Ztr -> targets, RMSE on Zte. */
FK_CHECKRETURN static int ridge_rmse(const fk_mat *Ztr, const double *ttr, const fk_mat *Zte, const double *tte,
                      double alpha_rel, double *out, fk_err *err)
{
    size_t p = Ztr->cols + 1;
    double *A = calloc(p * p, sizeof *A), *b = calloc(p, sizeof *b), *th = calloc(p, sizeof *th);
    double *pr = malloc(Zte->rows * sizeof *pr);
    int rc = (A && b && th && pr) ? FK_OK : fk_err_set(err, FK_ENOMEM, "out of memory");
    if (!rc) {
        fk_dica_ridge_add(Ztr, ttr, 1, A, b);
        rc = fk_dica_ridge_solve(Ztr->cols, 1, A, b, alpha_rel, th, err);
    }
    if (!rc) {
        fk_dica_ridge_predict(Zte, th, 1, pr);
        *out = rmse(pr, tte, Zte->rows);
    }
    free(A);
    free(b);
    free(th);
    free(pr);
    return rc;
}

/* RBF kernel ridge, targets centred by their training mean (GP posterior mean). */
FK_CHECKRETURN static int krr_rmse(const fk_mat *Xtr, const double *ttr, const fk_mat *Xte, const double *tte,
                    double sigma, double alpha, double *out, fk_err *err)
{
    size_t n = Xtr->rows;
    fk_mat K = {0}, Kt = {0};
    double *a = malloc(n * sizeof *a), *pr = malloc(Xte->rows * sizeof *pr), mean = 0;
    int rc = (a && pr) ? FK_OK : fk_err_set(err, FK_ENOMEM, "out of memory");
    if (!rc)
        rc = fk_dica_gauss_gram(Xtr, Xtr, sigma, &K, err);
    if (!rc)
        rc = fk_dica_gauss_gram(Xte, Xtr, sigma, &Kt, err);
    for (size_t i = 0; !rc && i < n; i++)
        mean += ttr[i] / (double)n;
    for (size_t i = 0; !rc && i < n; i++) {
        a[i] = ttr[i] - mean;
        K.data[i * K.ld + i] += alpha;
    }
    if (!rc &&
        LAPACKE_dposv(LAPACK_ROW_MAJOR, 'U', (lapack_int)n, 1, K.data, (lapack_int)K.ld, a, 1))
        rc = fk_err_set(err, FK_ENUMERIC, "kernel ridge: not positive definite");
    if (!rc) {
        for (size_t i = 0; i < Xte->rows; i++)
            pr[i] = mean + cblas_ddot((int)n, fk_mat_row(&Kt, i), 1, a, 1);
        *out = rmse(pr, tte, Xte->rows);
    }
    free(a);
    free(pr);
    fk_mat_close(&K);
    fk_mat_close(&Kt);
    return rc;
}

/* One split: rows, z-scoring, every method for both targets; out[target][row]. */
FK_CHECKRETURN static int park_split(const fk_dataset *mo, const fk_dataset *to, int r, double out[2][NP_ROWS],
                      fk_err *err)
{
    size_t N = mo->X.rows, d = 16;
    int test[43] = {0};
    for (int j = 0; j < 12; j++)
        test[((4 * r + j) % 42) + 1] = 1;
    /* training rows: 50 per training patient at positions floor(i n_s / 50), file order */
    size_t *tr = malloc(N * sizeof *tr), *te = malloc(N * sizeof *te), ntr = 0, nte = 0;
    size_t *rows_of = malloc(N * sizeof *rows_of);
    if (!tr || !te || !rows_of) {
        free(tr);
        free(te);
        free(rows_of);
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    }
    for (int s = 1; s <= 42; s++) {
        size_t ns = 0;
        for (size_t i = 0; i < N; i++)
            if (mo->group[i] == s)
                rows_of[ns++] = i;
        if (test[s]) {
            for (size_t i = 0; i < ns; i++)
                te[nte++] = rows_of[i];
        } else {
            for (size_t i = 0; i < 50 && ns; i++)
                tr[ntr++] = rows_of[i * ns / 50];
        }
    }
    free(rows_of);
    fk_mat Xtr = {0}, Xte = {0}, Ztr = {0}, Zte = {0};
    double *t[2][2] = {{NULL}};
    long *dom = malloc(ntr * sizeof *dom);
    int rc = (!fk_mat_init(&Xtr, ntr, d) && !fk_mat_init(&Xte, nte, d) && dom)
                 ? FK_OK
                 : fk_err_set(err, FK_ENOMEM, "out of memory");
    for (int k = 0; k < 2 && !rc; k++) {
        t[k][0] = malloc(ntr * sizeof(double));
        t[k][1] = malloc(nte * sizeof(double));
        if (!t[k][0] || !t[k][1])
            rc = fk_err_set(err, FK_ENOMEM, "out of memory");
    }
    for (size_t i = 0; !rc && i < ntr; i++) {
        memcpy(fk_mat_row(&Xtr, i), fk_mat_row(&mo->X, tr[i]) + 3, d * sizeof(double));
        dom[i] = mo->group[tr[i]];
        t[0][0][i] = mo->y_raw[tr[i]];
        t[1][0][i] = to->y_raw[tr[i]];
    }
    for (size_t i = 0; !rc && i < nte; i++) {
        memcpy(fk_mat_row(&Xte, i), fk_mat_row(&mo->X, te[i]) + 3, d * sizeof(double));
        t[0][1][i] = mo->y_raw[te[i]];
        t[1][1][i] = to->y_raw[te[i]];
    }
    /* z-score with the pooled training mean and (population) sd */
    for (size_t j = 0; !rc && j < d; j++) {
        double m = 0, v = 0;
        for (size_t i = 0; i < ntr; i++)
            m += fk_mat_get(&Xtr, i, j) / (double)ntr;
        for (size_t i = 0; i < ntr; i++)
            v += (fk_mat_get(&Xtr, i, j) - m) * (fk_mat_get(&Xtr, i, j) - m) / (double)ntr;
        double sd = v > 0 ? sqrt(v) : 1.0;
        for (size_t i = 0; i < ntr; i++)
            Xtr.data[i * Xtr.ld + j] = (Xtr.data[i * Xtr.ld + j] - m) / sd;
        for (size_t i = 0; i < nte; i++)
            Xte.data[i * Xte.ld + j] = (Xte.data[i * Xte.ld + j] - m) / sd;
    }
    double sigma = sigma_rule(&Xtr);
    for (int k = 0; k < 2 && !rc; k++) {
        /* LLS: least squares with intercept = the ridge with alpha 0 on the inputs */
        rc = ridge_rmse(&Xtr, t[k][0], &Xte, t[k][1], 0.0, &out[k][P_LLS], err);
        if (!rc)
            rc = krr_rmse(&Xtr, t[k][0], &Xte, t[k][1], sigma, 0.1, &out[k][P_KRR01], err);
        if (!rc)
            rc = krr_rmse(&Xtr, t[k][0], &Xte, t[k][1], sigma, 1.0, &out[k][P_KRR1], err);
    }
    static const struct {
        fk_dica_variant v;
        int row;
    } fits[4] = {{FK_DICA_KPCA, P_KPCA},
                 {FK_DICA_UDICA, P_UDICA},
                 {FK_DICA_COIR, P_COIR},
                 {FK_DICA_DICA, P_DICA}};
    fk_dica_kernel kd = {0};
    int fitted = 0;
    for (int k = 0; k < 2 && !rc; k++) {
        double sy = 0;
        for (size_t i = 0; i < ntr; i++)
            sy += t[k][0][i] / (double)ntr;
        for (int f = 0; f < 4 && !rc; f++) {
            if (k == 1 && !fk_dica_supervised(fits[f].v)) { /* unsupervised: same projection */
                fk_dica_opts o;
                fk_dica_opts_default(&o, fits[f].v, 20);
                o.q_weight = fits[f].v == FK_DICA_KPCA ? 0 : 1;
                rc = fk_dica_kernel_refit(&kd, NULL, 0, NULL, 0, dom, &o, err);
            } else {
                fk_dica_opts o;
                fk_dica_opts_default(&o, fits[f].v, 20);
                if (fits[f].v == FK_DICA_KPCA || fits[f].v == FK_DICA_COIR)
                    o.q_weight = 0;
                rc = fitted
                         ? fk_dica_kernel_refit(&kd, NULL, 0, t[k][0], sy, dom, &o, err)
                         : fk_dica_kernel_fit(&kd, &Xtr, NULL, 0, t[k][0], sy, dom, sigma, &o, err);
                fitted = 1;
            }
            if (!rc)
                rc = fk_dica_kernel_project(&kd, &Xte, 0, &Zte, err);
            if (!rc)
                rc = ridge_rmse(&kd.Z, t[k][0], &Zte, t[k][1], 1e-3, &out[k][fits[f].row], err);
            fk_mat_close(&Zte);
        }
        if (!rc) { /* DICA again with the `ref` normalisation */
            fk_dica_opts o;
            fk_dica_opts_default(&o, FK_DICA_DICA, 20);
            o.ref_norm = 1;
            rc = fk_dica_kernel_refit(&kd, NULL, 0, t[k][0], sy, dom, &o, err);
            if (!rc)
                rc = fk_dica_kernel_project(&kd, &Xte, 0, &Zte, err);
            if (!rc)
                rc = ridge_rmse(&kd.Z, t[k][0], &Zte, t[k][1], 1e-3, &out[k][P_DICA_REF], err);
            fk_mat_close(&Zte);
        }
    }
    fk_dica_kernel_close(&kd);
    for (int k = 0; k < 2; k++) {
        free(t[k][0]);
        free(t[k][1]);
    }
    free(tr);
    free(te);
    free(dom);
    fk_mat_close(&Xtr);
    fk_mat_close(&Xte);
    fk_mat_close(&Ztr);
    return rc;
}

static int run_parkinsons(const char *dir, const opts *o, fk_err *err)
{
    fk_dataset mo = {0}, to = {0};
    int rc = fk_catalog_load(&mo, dir, "parkinsons/motor", err);
    if (!rc)
        rc = fk_catalog_load(&to, dir, "parkinsons/total", err);
    if (!rc && (mo.X.cols != 19 || !mo.group || !mo.y_raw || !to.y_raw))
        rc = fk_err_set(err, FK_EFORMAT, "parkinsons: unexpected layout");
    double res[10][2][NP_ROWS];
    double t0 = fk_bench_now();
    for (int r = 0; r < 10 && !rc; r++)
        rc = park_split(&mo, &to, r, res[r], err);
    for (int k = 0; k < 2 && !rc; k++)
        for (int row = 0; row < NP_ROWS; row++) {
            double m = 0, v = 0;
            for (int r = 0; r < 10; r++)
                m += res[r][k][row] / 10;
            for (int r = 0; r < 10; r++)
                v += (res[r][k][row] - m) * (res[r][k][row] - m) / 10;
            char cs[96], ex[320], paper[16];
            snprintf(cs, sizeof cs, "parkinsons %s %s", k ? "total" : "motor", prow[row].name);
            if (isnan(prow[row].paper[k])) /* the paper prints none: null, "nan" is not JSON */
                snprintf(paper, sizeof paper, "null");
            else
                snprintf(paper, sizeof paper, "%.2f", prow[row].paper[k]);
            if (isnan(prow[row].proto[k]))
                snprintf(ex, sizeof ex,
                         "\"std\":%.3f,\"prototype\":null,\"paper_pooling\":%s,\"seconds\":%.0f",
                         sqrt(v), paper, fk_bench_now() - t0);
            else
                snprintf(ex, sizeof ex,
                         "\"std\":%.3f,\"prototype\":%.2f,\"paper_pooling\":%s,"
                         "\"target\":\"|x - prototype| <= 0.05\",\"target_met\":%s,"
                         "\"seconds\":%.0f",
                         sqrt(v), prow[row].proto[k], paper,
                         fabs(m - prow[row].proto[k]) <= 0.05 ? "true" : "false",
                         fk_bench_now() - t0);
            fk_bench_emit(o->json, "fidelity dica", cs, "rmse_mean", m, ex);
        }
    fk_dataset_close(&mo);
    fk_dataset_close(&to);
    return rc;
}

/* ---- GvHD proxy (spec §11.4): leave-one-patient-out on the 35-sample flowset ---- */

enum { G_INPUT, G_SVM, G_KPCA, G_UDICA, G_COIR, G_DICA, NG_ROWS };
static const struct {
    const char *name;
    double proto[6]; /* p5 p6 p7 p9 p10 mean */
} grow[NG_ROWS] = {
    {"input ridge", {83.86, 82.43, 87.54, 77.60, 84.64, 83.21}},
    {"input rbf-svm C=10", {91.36, 93.76, 95.74, 93.63, 94.97, 93.89}},
    {"kpca m=5", {83.43, 88.69, 89.47, 80.56, 87.33, 85.89}},
    {"udica m=5", {83.41, 88.69, 89.47, 80.56, 87.33, 85.89}},
    {"coir m=1", {88.64, 90.27, 94.67, 90.73, 91.34, 91.13}},
    {"dica m=1", {88.53, 90.36, 94.67, 90.70, 91.51, 91.15}},
};
static const int g_patients[5] = {5, 6, 7, 9, 10};

typedef struct gvhd {
    size_t n;
    double *x;                       /* n x 6, transformed */
    int *y, *patient, *sample, *pos; /* pos: index of the cell within its sample, file order */
} gvhd;

static void gvhd_free(gvhd *g)
{
    free(g->x);
    free(g->y);
    free(g->patient);
    free(g->sample);
    free(g->pos);
}

FK_CHECKRETURN static int gvhd_load(const char *dir, gvhd *g, fk_err *err)
{
    char path[512];
    snprintf(path, sizeof path, "%s/gvhd-flow-cytometry/GvHD_flowset_35samples_1000cells.csv.gz",
             dir);
    gzFile f = gzopen(path, "rb");
    if (!f)
        return fk_err_set(err, FK_EIO, "cannot open %s (pass --data_dir)", path);
    size_t cap = 40000;
    *g = (gvhd){0};
    g->x = malloc(cap * 6 * sizeof *g->x);
    g->y = malloc(cap * sizeof *g->y);
    g->patient = malloc(cap * sizeof *g->patient);
    g->sample = malloc(cap * sizeof *g->sample);
    g->pos = malloc(cap * sizeof *g->pos);
    char line[512], names[64][16];
    int n_names = 0, count[64] = {0}, rc = FK_OK;
    if (!g->x || !g->y || !g->patient || !g->sample || !g->pos)
        rc = fk_err_set(err, FK_ENOMEM, "out of memory");
    if (!rc && !gzgets(f, line, sizeof line))
        rc = fk_err_set(err, FK_EFORMAT, "%s: empty", path);
    while (!rc && gzgets(f, line, sizeof line)) {
        char *fld[12];
        int k = 0;
        for (char *p = line; k < 12 && p; k++) {
            fld[k] = p;
            p = strchr(p, ',');
            if (p)
                *p++ = '\0';
        }
        if (k < 12 || g->n == cap) {
            rc = fk_err_set(err, FK_EFORMAT, "%s: row %zu is not 12 fields", path, g->n + 2);
            break;
        }
        int sidx = -1;
        for (int i = 0; i < n_names; i++)
            if (!strcmp(names[i], fld[4]))
                sidx = i;
        if (sidx < 0 && n_names < 64) {
            snprintf(names[n_names], sizeof names[0], "%s", fld[4]);
            sidx = n_names++;
        }
        if (sidx < 0) {
            rc = fk_err_set(err, FK_EFORMAT, "%s: more than 64 samples", path);
            break;
        }
        double fsc = atof(fld[6]), ssc = atof(fld[7]), cd15 = atof(fld[8]), cd45 = atof(fld[9]);
        double cd14 = atof(fld[10]), cd33 = atof(fld[11]);
        double *x = g->x + g->n * 6;
        x[0] = asinh(fsc / 150);
        x[1] = asinh(ssc / 150);
        x[2] = cd15;
        x[3] = cd45;
        x[4] = cd14;
        x[5] = asinh(cd33 / 150);
        g->y[g->n] = ssc < 97 && cd45 > 6.79;
        g->patient[g->n] = atoi(fld[0]);
        g->sample[g->n] = sidx;
        g->pos[g->n] = count[sidx]++;
        g->n++;
    }
    gzclose(f);
    if (!rc && g->n != 35000)
        rc = fk_err_set(err, FK_EFORMAT, "%s: %zu cells, expected 35000", path, g->n);
    return rc;
}

FK_CHECKRETURN static int gvhd_fold(const gvhd *g, int f, double *acc, double *dv, fk_err *err)
{
    size_t ntr = 0, nte = 0;
    for (size_t i = 0; i < g->n; i++) {
        if (g->patient[i] == g_patients[f])
            nte++;
        else if (g->pos[i] % 10 == 0 && g->pos[i] < 1000)
            ntr++;
    }
    fk_mat Xtr = {0}, Xte = {0}, Z = {0};
    int *ytr = malloc(ntr * sizeof *ytr), *yte = malloc(nte * sizeof *yte);
    long *dom = malloc(ntr * sizeof *dom);
    int rc = (ytr && yte && dom && !fk_mat_init(&Xtr, ntr, 6) && !fk_mat_init(&Xte, nte, 6))
                 ? FK_OK
                 : fk_err_set(err, FK_ENOMEM, "out of memory");
    size_t a = 0, b = 0;
    for (size_t i = 0; !rc && i < g->n; i++) {
        if (g->patient[i] == g_patients[f]) {
            memcpy(fk_mat_row(&Xte, b), g->x + i * 6, 6 * sizeof(double));
            yte[b++] = g->y[i];
        } else if (g->pos[i] % 10 == 0 && g->pos[i] < 1000) {
            memcpy(fk_mat_row(&Xtr, a), g->x + i * 6, 6 * sizeof(double));
            ytr[a] = g->y[i];
            dom[a++] = g->sample[i];
        }
    }
    for (size_t j = 0; !rc && j < 6; j++) { /* z-score by the pooled training mean/sd */
        double m = 0, v = 0;
        for (size_t i = 0; i < ntr; i++)
            m += fk_mat_get(&Xtr, i, j) / (double)ntr;
        for (size_t i = 0; i < ntr; i++)
            v += (fk_mat_get(&Xtr, i, j) - m) * (fk_mat_get(&Xtr, i, j) - m) / (double)ntr;
        double sd = v > 0 ? sqrt(v) : 1;
        for (size_t i = 0; i < ntr; i++)
            Xtr.data[i * Xtr.ld + j] = (Xtr.data[i * Xtr.ld + j] - m) / sd;
        for (size_t i = 0; i < nte; i++)
            Xte.data[i * Xte.ld + j] = (Xte.data[i * Xte.ld + j] - m) / sd;
    }
    if (!rc)
        rc = ridge_acc(&Xtr, ytr, &Xte, yte, 2, &acc[G_INPUT], err);
    double sigma = sigma_rule(&Xtr);
    if (!rc)
        rc = svm_acc(&Xtr, ytr, &Xte, yte, 2, sigma, &acc[G_SVM], err);
    static const struct {
        fk_dica_variant v;
        size_t m;
        int row;
    } fits[4] = {{FK_DICA_KPCA, 5, G_KPCA},
                 {FK_DICA_UDICA, 5, G_UDICA},
                 {FK_DICA_COIR, 1, G_COIR},
                 {FK_DICA_DICA, 1, G_DICA}};
    fk_dica_kernel kd = {0};
    for (int k = 0; k < 4 && !rc; k++) {
        fk_dica_opts o;
        fk_dica_opts_default(&o, fits[k].v, fits[k].m);
        if (fits[k].v == FK_DICA_KPCA || fits[k].v == FK_DICA_COIR)
            o.q_weight = 0;
        rc = k == 0 ? fk_dica_kernel_fit(&kd, &Xtr, ytr, 2, NULL, 0, dom, sigma, &o, err)
                    : fk_dica_kernel_refit(&kd, ytr, 2, NULL, 0, dom, &o, err);
        if (!rc)
            dv[k] = fk_dica_domain_variance(&kd.Z, dom);
        if (!rc)
            rc = fk_dica_kernel_project(&kd, &Xte, 0, &Z, err);
        if (!rc)
            rc = ridge_acc(&kd.Z, ytr, &Z, yte, 2, &acc[fits[k].row], err);
        fk_mat_close(&Z);
    }
    fk_dica_kernel_close(&kd);
    fk_mat_close(&Xtr);
    fk_mat_close(&Xte);
    free(ytr);
    free(yte);
    free(dom);
    return rc;
}

FK_CHECKRETURN static int run_gvhd(const char *dir, const opts *o, fk_err *err)
{
    gvhd g = {0};
    int rc = gvhd_load(dir, &g, err);
    double acc[5][NG_ROWS], dv[5][4];
    for (int f = 0; f < 5 && !rc; f++) {
        double t0 = fk_bench_now();
        rc = gvhd_fold(&g, f, acc[f], dv[f], err);
        if (rc)
            break;
        char cs[64], ex[240];
        snprintf(cs, sizeof cs, "gvhd proxy domain variance p%d", g_patients[f]);
        snprintf(ex, sizeof ex,
                 "\"kpca\":%.4g,\"udica\":%.4g,\"coir\":%.4g,\"dica\":%.4g,"
                 "\"target\":\"udica < kpca and dica < coir\",\"target_met\":%s,\"seconds\":%.0f",
                 dv[f][0], dv[f][1], dv[f][2], dv[f][3],
                 dv[f][1] < dv[f][0] && dv[f][3] < dv[f][2] ? "true" : "false",
                 fk_bench_now() - t0);
        fk_bench_emit(o->json, "fidelity dica", cs, "udica_over_kpca", dv[f][1] / dv[f][0], ex);
    }
    for (int r = 0; r < NG_ROWS && !rc; r++) {
        double mean = 0;
        for (int f = 0; f < 5; f++) {
            char cs[80];
            snprintf(cs, sizeof cs, "gvhd proxy %s p%d", grow[r].name, g_patients[f]);
            emit(o, cs, acc[f][r], grow[r].proto[f], 0.3, "\"proxy\":true");
            mean += acc[f][r] / 5;
        }
        char cs[80];
        snprintf(cs, sizeof cs, "gvhd proxy %s mean", grow[r].name);
        emit(o, cs, mean, grow[r].proto[5], 0.3, "\"proxy\":true");
    }
    gvhd_free(&g);
    return rc;
}

int fk_bench_fidelity_dica(int argc, char **argv)
{
    fk_params p;
    fk_params_init(&p);
    fk_err err = {0};
    fk_err_clear(&err);
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help")) {
            printf("usage: fedkern bench fidelity dica [--data_dir DIR] [--json] [--part "
                   "all|kernel|rf|parkinsons|gvhd|time]\n"
                   "                                   [--rf_min R] [--rf_max R] [--seeds N] "
                   "[--reps N]\n"
                   "Spec dica.md §11.3 on Office-Caltech10 SURF leave-one-domain-out: kernel\n"
                   "DICA/UDICA/KPCA/COIR with 1-NN and ridge, and the federated job at R = 500,\n"
                   "1000, 2000 (from --rf_min up to --rf_max) over --seeds RF seeds (3), each cell "
                   "next to the\n"
                   "spec's prototype value with target_met. --part time runs only the kernel DICA\n"
                   "fit + projection of each fold (the rows timed against a peer), best of --reps\n"
                   "(3) by CPU seconds.\n");
            fk_params_close(&p);
            return 0;
        }
    opts o = {0};
    long seeds = 3;
    int rc = fk_params_parse_args(&p, &argc, argv, &err);
    if (!rc)
        rc = fk_params_bool(&p, "json", 0, &o.json, &err);
    if (!rc)
        rc = fk_params_int(&p, "rf_max", 2000, 0, 2000, &o.rf_max, &err);
    if (!rc)
        rc = fk_params_int(&p, "rf_min", 500, 0, 2000, &o.rf_min, &err);
    if (!rc)
        rc = fk_params_int(&p, "seeds", 3, 1, 10, &seeds, &err);
    if (!rc)
        rc = fk_params_int(&p, "reps", 3, 1, 100, &o.reps, &err);
    const char *part = fk_params_str(&p, "part", "all");
    const char *dir = fk_params_str(&p, "data_dir", "../shared/data");
    o.seeds = (int)seeds;
    o.kernel = !strcmp(part, "all") || !strcmp(part, "kernel");
    o.rf = !strcmp(part, "all") || !strcmp(part, "rf");
    o.park = !strcmp(part, "all") || !strcmp(part, "parkinsons");
    o.gvhd = !strcmp(part, "all") || !strcmp(part, "gvhd");
    o.time = !strcmp(part, "time");
    if (!rc && (argc > 0 || fk_params_unused(&p) ||
                (!o.kernel && !o.rf && !o.park && !o.gvhd && !o.time)))
        rc = fk_err_set(&err, FK_EINVAL, "unexpected argument '%s'; see --help",
                        argc > 0               ? argv[0]
                        : fk_params_unused(&p) ? fk_params_unused(&p)
                                               : part);
    if (!rc)
        rc = fk_bench_data_dir(dir, &err);
    fk_dataset ds[4] = {0};
    if (!rc)
        rc = fk_bench_load_surf(ds, domains, dir, &err);
    /* the prototype's kernel DICA averages stand in when only the rf part runs */
    double dica_avg[2] = {rows[R_DICA_RIDGE].proto[4], rows[R_DICA_NN].proto[4]};
    if (!rc && o.time)
        rc = run_time(ds, &o, &err);
    if (!rc && o.kernel)
        rc = run_kernel(ds, &o, dica_avg, &err);
    if (!rc && o.rf)
        rc = run_rf(ds, &o, dica_avg, &err);
    if (!rc && o.park)
        rc = run_parkinsons(dir, &o, &err);
    if (!rc && o.gvhd)
        rc = run_gvhd(dir, &o, &err);
    for (int i = 0; i < 4; i++)
        fk_dataset_close(&ds[i]);
    fk_params_close(&p);
    if (rc) {
        fprintf(stderr, "fedkern bench fidelity dica: %s\n", err.msg);
        return 1;
    }
    return 0;
}
