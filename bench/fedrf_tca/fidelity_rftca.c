/* fedkern bench fidelity rf-tca: 1-NN, linear TCA, Gaussian kernel TCA, R-TCA
 * (RF-TCA's exact-kernel limit) and RF-TCA with i.i.d. and orthogonal
 * frequencies (N = 500, 1000, 2000) on the 12 Office-Caltech10 SURF pairs, next to
 * the published numbers (spec fedrf-tca.md §4, §6 T10-T12), plus the DeCAF6
 * W<->D rows of the paper's Table X that our data can reproduce and the
 * analytic Table II. Fixed, pre-declared hyperparameters: no selection on
 * target labels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "bench/fedrf_tca/rftca_bench.h"
#include "bench/knn.h"
#include "common/base/params.h"
#include "common/data/catalog.h"
#include "common/methods/fedrf_tca/fedrf_tca.h"
#include "common/methods/sim.h"
#include "common/models/fedrf_tca/rftca.h"
#include "common/models/fedrf_tca/tca.h"

static const char *const domains[4] = {"caltech", "amazon", "webcam", "dslr"};
static const char letters[4] = {'C', 'A', 'W', 'D'};

/* Pairs in the published order with the JDA paper's 1NN and TCA rows. */
static const struct {
    int src, tgt;
    double nn, tca;
} pairs[12] = {
    {0, 1, 23.7, 45.6}, {0, 2, 25.8, 39.3}, {0, 3, 25.5, 45.9}, {1, 0, 26.0, 42.0},
    {1, 2, 29.8, 40.0}, {1, 3, 25.5, 35.7}, {2, 0, 19.9, 31.5}, {2, 1, 23.0, 30.5},
    {2, 3, 59.2, 91.1}, {3, 0, 26.3, 33.0}, {3, 1, 28.5, 32.8}, {3, 2, 63.4, 87.5},
};

/* r-tca-gauss is RF-TCA's N -> infinity limit (exact Gaussian kernel, same regularizer on the
 * feature-space weights); tca-gauss is kernel TCA, which regularizes the expansion coefficients. */
enum {
    M_NN, M_LTCA, M_KTCA, M_RTCA, M_RF500, M_RF1000, M_RF2000, M_ORF500, M_ORF1000, M_ORF2000,
    N_METHODS
};
static const char *const method_names[N_METHODS] = {
    "1nn",          "tca-linear",    "tca-gauss",     "r-tca-gauss",       "rf-tca N=500",
    "rf-tca N=1000", "rf-tca N=2000", "rf-tca-orf N=500", "rf-tca-orf N=1000", "rf-tca-orf N=2000"};
static const size_t rf_N[N_METHODS] = {0, 0, 0, 0, 500, 1000, 2000, 500, 1000, 2000};

typedef struct cfg {
    fk_rff_kind fed_features; /* Omega of the federated proxy */
    size_t m;
    double lambda_n, sigma;
    int seeds;
    int json;
} cfg;

FK_CHECKRETURN static int knn_acc(const fk_mat *Zs, const int *ys, const fk_mat *Zt, const int *yt,
                                  double *acc, fk_err *err)
{
    int *pred = malloc(Zt->rows * sizeof *pred);
    if (!pred)
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    int rc = fk_knn1_predict(Zs, ys, Zt, pred, err);
    size_t hit = 0;
    for (size_t i = 0; !rc && i < Zt->rows; i++)
        hit += pred[i] == yt[i];
    free(pred);
    *acc = 100.0 * (double)hit / (double)Zt->rows;
    return rc;
}

/* One method on one pair; inputs are P-SURF (catalog) and, for TCA, also P-L2. */
FK_CHECKRETURN static int method_acc(int meth, const fk_dataset *s, const fk_dataset *t,
                                     const cfg *c, double *acc, fk_err *err)
{
    if (meth == M_NN)
        return knn_acc(&s->X, s->y, &t->X, t->y, acc, err);
    fk_mat Xs, Xt, Zs = {0}, Zt = {0};
    if (fk_mat_copy(&Xs, &s->X) || fk_mat_copy(&Xt, &t->X))
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    fk_rows_l2_normalize(&Xs);
    fk_rows_l2_normalize(&Xt);
    double gamma = fk_tca_gamma_normalized(c->lambda_n, Xs.rows, Xt.rows);
    int rc = FK_OK, reps = rf_N[meth] ? c->seeds : 1;
    *acc = 0;
    for (int r = 0; r < reps && !rc; r++) {
        if (meth == M_LTCA)
            rc = fk_ltca_fit(&Xs, &Xt, gamma, c->m, FK_TCA_NORM_B, &Zs, &Zt, err);
        else if (meth == M_KTCA)
            rc = fk_ktca_fit(&Xs, &Xt, FK_KERNEL_GAUSS, c->sigma, gamma, c->m, FK_TCA_NORM_B, &Zs,
                             &Zt, err);
        else if (meth == M_RTCA)
            rc = fk_rtca_fit(&Xs, &Xt, c->sigma, gamma, c->m, &Zs, &Zt, err);
        else {
            fk_rftca_opts o = {.N = rf_N[meth], .m = c->m, .sigma = c->sigma, .gamma = gamma,
                               .seed = 1 + (uint64_t)r, .norm = FK_TCA_NORM_B,
                               .features = meth >= M_ORF500 ? FK_RFF_ORTHOGONAL : FK_RFF_IID};
            rc = fk_rftca_fit(&Xs, &Xt, &o, &Zs, &Zt, NULL, NULL, err);
        }
        double a = 0;
        if (!rc) {
            fk_rows_l2_normalize(&Zs);
            fk_rows_l2_normalize(&Zt);
            rc = knn_acc(&Zs, s->y, &Zt, t->y, &a, err);
        }
        *acc += a / reps;
        fk_mat_close(&Zs);
        fk_mat_close(&Zt);
    }
    fk_mat_close(&Xs);
    fk_mat_close(&Xt);
    return rc;
}

static void emit(const cfg *c, const char *method, const char *pair, double acc, double published,
                 const char *more)
{
    char cs[64], extra[448];
    snprintf(cs, sizeof cs, "%s %s", method, pair);
    if (isnan(published))
        snprintf(extra, sizeof extra, "\"method\":\"%s\",\"pair\":\"%s\",\"published\":null%s%s",
                 method, pair, more ? "," : "", more ? more : "");
    else
        snprintf(extra, sizeof extra, "\"method\":\"%s\",\"pair\":\"%s\",\"published\":%.2f%s%s",
                 method, pair, published, more ? "," : "", more ? more : "");
    fk_bench_emit(c->json, "fidelity", cs, "accuracy", acc, extra);
}

FK_CHECKRETURN static int surf_table(const char *dir, const cfg *c, fk_err *err)
{
    fk_dataset ds[4] = {0};
    int rc = fk_bench_load_surf(ds, domains, dir, err);
    double sum[N_METHODS] = {0};
    for (int k = 0; k < 12 && !rc; k++) {
        const fk_dataset *s = &ds[pairs[k].src], *t = &ds[pairs[k].tgt];
        char pair[8];
        snprintf(pair, sizeof pair, "%c->%c", letters[pairs[k].src], letters[pairs[k].tgt]);
        for (int meth = 0; meth < N_METHODS && !rc; meth++) {
            double acc, pub = meth == M_NN ? pairs[k].nn : meth == M_LTCA ? pairs[k].tca : NAN;
            double t0 = fk_bench_now();
            rc = method_acc(meth, s, t, c, &acc, err);
            if (rc)
                break;
            char more[64];
            snprintf(more, sizeof more, "\"seconds\":%.3f", fk_bench_now() - t0);
            emit(c, method_names[meth], pair, acc, pub, more);
            sum[meth] += acc / 12.0;
        }
    }
    for (int meth = 0; meth < N_METHODS && !rc; meth++) {
        double pub = meth == M_NN ? 31.4 : meth == M_LTCA ? 46.2 : NAN;
        char more[320];
        int n = 0;
        if (rf_N[meth])
            n = snprintf(more, sizeof more,
                         "\"our_tca_gauss\":%.2f,\"gap\":%.2f,\"our_tca_linear\":%.2f,"
                         "\"gap_linear\":%.2f,\"our_r_tca_gauss\":%.2f,\"gap_r_tca\":%.2f",
                         sum[M_KTCA], sum[meth] - sum[M_KTCA], sum[M_LTCA],
                         sum[meth] - sum[M_LTCA], sum[M_RTCA], sum[meth] - sum[M_RTCA]);
        /* issue target: RF-TCA at N = 2000 within 1 point of the TCA that meets the published row */
        if (rf_N[meth] == 2000)
            snprintf(more + n, sizeof more - (size_t)n,
                     ",\"target\":\"|gap_linear| <= 1\",\"target_met\":%s",
                     fabs(sum[meth] - sum[M_LTCA]) <= 1.0 ? "true" : "false");
        else if (meth == M_LTCA)
            snprintf(more, sizeof more, "\"gap\":%.2f,\"target\":\"|gap| <= 1.5\"", sum[meth] - 46.2);
        else
            more[0] = 0;
        emit(c, method_names[meth], "average", sum[meth], pub, more[0] ? more : NULL);
    }
    for (int i = 0; i < 4; i++)
        fk_dataset_close(&ds[i]);
    return rc;
}

/* Table X rows W->D and D->W on DeCAF6 (paper: best-of-grid MLP, m = 100). */
FK_CHECKRETURN static int decaf_rows(const char *dir, const cfg *c, fk_err *err)
{
    fk_dataset w = {0}, d = {0};
    int rc = fk_catalog_load(&w, dir, "office-decaf6/webcam", err);
    if (!rc)
        rc = fk_catalog_load(&d, dir, "office-decaf6/dslr", err);
    static const struct {
        int meth;
        double wd, dw;
    } rows[] = {{M_NN, NAN, NAN}, {M_LTCA, 91.08, 80.00}, {M_KTCA, 91.71, 80.00},
                {M_RF500, 100.00, 90.50}, {M_RF1000, 100.00, 90.84}};
    cfg c2 = *c;
    c2.m = 100;
    c2.sigma = 1.0;
    for (size_t r = 0; r < sizeof rows / sizeof rows[0] && !rc; r++) {
        double a1, a2;
        rc = method_acc(rows[r].meth, &w, &d, &c2, &a1, err);
        if (!rc)
            rc = method_acc(rows[r].meth, &d, &w, &c2, &a2, err);
        if (rc)
            break;
        char name[48];
        snprintf(name, sizeof name, "decaf6 %s", method_names[rows[r].meth]);
        emit(c, name, "W->D", a1, rows[r].wd, "\"table\":\"X\",\"note\":\"paper selects on target\"");
        emit(c, name, "D->W", a2, rows[r].dw, "\"table\":\"X\",\"note\":\"paper selects on target\"");
    }
    fk_dataset_close(&w);
    fk_dataset_close(&d);
    return rc;
}

/* Table V / IX proxy (spec §2.8): SURF features, identity extractor, three
 * sources -> one target, setting (III) (random S_t, T_C = 50), with and
 * without the Sigma-l exchange (lambda = 1 / 0). The paper's numbers come
 * from fine-tuned ResNets on raw images: not comparable, printed for context. */
FK_CHECKRETURN static int fed_proxy(const char *dir, const cfg *c, long rounds, fk_err *err)
{
    static const struct {
        int tgt;
        double table_v3, table_ix;
    } tasks[4] = {{1, 94.5, 91.8}, {0, 98.6, 84.4}, {3, 98.8, 95.7}, {2, 90.0, 94.5}};
    fk_dataset all[4] = {0};
    int rc = fk_bench_load_surf(all, domains, dir, err);
    char buf[32];
    for (int t = 0; t < 4 && !rc; t++) {
        fk_dataset ds[4];
        int k = 0;
        char label[24];
        int o = 0;
        for (int i = 0; i < 4; i++)
            if (i != tasks[t].tgt) {
                ds[k++] = all[i];
                o += snprintf(label + o, sizeof label - (size_t)o, "%s%c", o ? "," : "", letters[i]);
            }
        ds[3] = all[tasks[t].tgt];
        snprintf(label + o, sizeof label - (size_t)o, "->%c", letters[tasks[t].tgt]);
        for (int with_mmd = 1; with_mmd >= 0 && !rc; with_mmd--) {
            fk_params p;
            fk_params_init(&p);
            snprintf(buf, sizeof buf, "%ld", rounds);
            if (fk_params_set(&p, "N", "1000") || fk_params_set(&p, "m", "100") ||
                fk_params_set(&p, "sigma", "1") ||
                fk_params_set(&p, "features", fk_rff_kind_name(c->fed_features)) ||
                fk_params_set(&p, "lambda", with_mmd ? "1" : "0") ||
                fk_params_set(&p, "classes", "10") || fk_params_set(&p, "rounds", buf) ||
                fk_params_set(&p, "eval_every", buf))
                rc = fk_err_set(err, FK_ENOMEM, "out of memory for the job parameters");
            fk_sim_opts so = {.rounds = (int)rounds, .seed = 1};
            fk_bundle model;
            double t0 = fk_bench_now();
            if (!rc)
                rc = fk_sim_run(&fk_method_fedrf_tca, &p, ds, 4, &so, &model, NULL, err);
            int have_model = !rc; /* closed below whatever fails after the run */
            void *cli = NULL;
            fk_report rep;
            fk_report_init(&rep);
            if (!rc)
                rc = fk_method_fedrf_tca.client_init(&cli, &p, &ds[3], 3, 4, 1, err);
            if (!rc)
                rc = fk_method_fedrf_tca.evaluate(cli, &model, &rep, err);
            if (cli)
                fk_method_fedrf_tca.client_close(cli);
            if (have_model)
                fk_bundle_close(&model);
            fk_params_close(&p);
            if (rc)
                break;
            char more[200];
            int n = snprintf(more, sizeof more,
                             "\"table\":\"%s\",\"proxy\":true,\"rounds\":%ld,\"seconds\":%.1f,"
                             "\"features\":\"%s\"",
                             with_mmd ? "V (III)" : "IX (no Sigma-l analogue)", rounds,
                             fk_bench_now() - t0, fk_rff_kind_name(c->fed_features));
            /* spec T16 (loose sanity, C,D,W->A): finite and above 20 % (chance is 10 %) */
            if (tasks[t].tgt == 1)
                snprintf(more + n, sizeof more - (size_t)n, ",\"spec_T16_pass\":%d",
                         isfinite(rep.accuracy) && rep.accuracy > 0.20);
            emit(c, with_mmd ? "fedrf-tca" : "fedrf-tca lambda=0", label, 100.0 * rep.accuracy,
                 with_mmd ? tasks[t].table_v3 : tasks[t].table_ix, more);
        }
    }
    for (int i = 0; i < 4; i++)
        fk_dataset_close(&all[i]);
    return rc;
}

static void table_two(const cfg *c)
{
    size_t h[2] = {100, 100};
    fk_fedrf_counts k;
    fk_fedrf_message_params(1000, 800, h, 2, 10, &k);
    fk_bench_emit(c->json, "fidelity", "table II fedrf-tca per update", "values_millions",
                  (double)k.total_paper / 1e6, "\"published\":1.692,\"table\":\"II\"");
    fk_bench_emit(c->json, "fidelity", "table II fedrf-tca model", "values_millions",
                  (double)k.model / 1e6, "\"published\":1.691,\"table\":\"II\"");
}

static int run(int argc, char **argv)
{
    fk_params p;
    fk_err err = {0};
    fk_params_init(&p);
    cfg c = {0};
    long m, seeds, fed_rounds;
    fk_bench_fed_opts fo = {.groups = "", .rounds = 300, .N = 1000, .seeds = 3, .eval_every = 10};
    int decaf = 1, surf = 1, spec = 1;
    int rc = fk_params_parse_args(&p, &argc, argv, &err);
    if (!rc && fk_params_get(&p, "help")) {
        printf("usage: fedkern bench fidelity rf-tca [--data_dir DIR] [--json] [--m 20] "
               "[--sigma 2] [--lambda 1] [--seeds 1]\n"
               "       [--surf 1] [--decaf 1] [--spec 1] [--fed_rounds 300] [--fed_features iid]\n\n"
               "1-NN, linear TCA, Gaussian kernel TCA, R-TCA (RF-TCA's N -> infinity limit) and\n"
               "RF-TCA with i.i.d. (rf-tca) and orthogonal (rf-tca-orf) frequencies, N = 500,\n"
               "1000, 2000, on the 12 Office-Caltech10 SURF pairs next to the published numbers;\n"
               "DeCAF6 W<->D rows of\n"
               "Table X; Table II message size; FedRF-TCA SURF proxy of Tables V/IX (3 sources ->\n"
               "1 target, fed-rounds rounds, 0 skips; --fed_features orthogonal for orthogonal\n"
               "frequencies); the spec's data checks T3, T7, T9 on SURF\n"
               "D/W (--spec 0 skips) and T16 on the C,D,W->A proxy row. lambda is the\n"
               "normalized-L regularizer.\n"
               "  --fed2 s1i            spec 2.8 federated runs (issue 26): s multi-source SURF,\n"
               "                        1 single-source pairs, i implicit heterogeneity; with\n"
               "                        --fed2_rounds 300 --fed2_N 1000 --fed2_seeds 3\n"
               "                        --fed2_first_seed 1 (seeds first .. first + seeds - 1)\n"
               "                        --fed2_variants as0o (a lambda=1, s lambda=1 target_opt=sgd,\n"
               "                        0 lambda=0, o source-only)\n"
               "                        --fed2_avg_last rounds/5 --fed2_eval_every 10\n"
               "                        --fed2_extractors identity,dense --fed2_pairs dmc (single-\n"
               "                        source pairs: d DeCAF6 W<->D, m MNIST<->USPS, c COIL1<->2)\n"
               "                        --fed2_select_holdout 0 (F > 0: every run also reports the\n"
               "                        round chosen on F of the sources' labelled rows)\n");
        fk_params_close(&p);
        return 0;
    }
    if (!rc)
        rc = fk_params_bool(&p, "json", 0, &c.json, &err);
    if (!rc)
        rc = fk_params_int(&p, "m", 20, 1, 1000, &m, &err);
    if (!rc)
        rc = fk_params_int(&p, "seeds", 1, 1, 20, &seeds, &err);
    if (!rc)
        rc = fk_params_double(&p, "sigma", 2.0, 1e-6, 1e6, &c.sigma, &err);
    if (!rc)
        rc = fk_params_double(&p, "lambda", 1.0, 1e-12, 1e12, &c.lambda_n, &err);
    if (!rc)
        rc = fk_params_bool(&p, "decaf", 1, &decaf, &err);
    if (!rc)
        rc = fk_params_bool(&p, "surf", 1, &surf, &err);
    if (!rc)
        rc = fk_params_bool(&p, "spec", 1, &spec, &err);
    if (!rc)
        rc = fk_params_int(&p, "fed_rounds", 300, 0, 100000, &fed_rounds, &err);
    if (!rc)
        rc = fk_params_int(&p, "fed2_rounds", 300, 1, 100000, &fo.rounds, &err);
    if (!rc)
        rc = fk_params_int(&p, "fed2_N", 1000, 1, 100000, &fo.N, &err);
    if (!rc)
        rc = fk_params_int(&p, "fed2_seeds", 3, 1, 20, &fo.seeds, &err);
    if (!rc)
        rc = fk_params_int(&p, "fed2_first_seed", 1, 1, 1000000, &fo.first_seed, &err);
    if (!rc)
        rc = fk_params_int(&p, "fed2_eval_every", 10, 1, 100000, &fo.eval_every, &err);
    if (!rc)
        rc = fk_params_int(&p, "fed2_avg_last", fo.rounds / 5, 0, 100000, &fo.avg_last, &err);
    if (!rc)
        rc = fk_params_double(&p, "fed2_select_holdout", 0.0, 0.0, 0.9, &fo.select_holdout, &err);
    fo.groups = fk_params_str(&p, "fed2", "");
    fo.pairs = fk_params_str(&p, "fed2_pairs", "dmc");
    fo.variants = fk_params_str(&p, "fed2_variants", "as0o");
    const char *fx = fk_params_str(&p, "fed2_extractors", "identity,dense");
    fo.extractors = (strstr(fx, "identity") ? 1 : 0) | (strstr(fx, "dense") ? 2 : 0);
    if (!rc && !fo.extractors)
        rc = fk_err_set(&err, FK_EINVAL, "--fed2_extractors: identity, dense or both");
    const char *dir = fk_params_str(&p, "data_dir", "../shared/data");
    if (!rc)
        rc = fk_rff_kind_parse(fk_params_str(&p, "fed_features", "iid"), &c.fed_features, &err);
    if (!rc && (argc > 0 || fk_params_unused(&p))) {
        fprintf(stderr, "fedkern bench fidelity rf-tca: unexpected argument '%s'; see --help\n",
                argc > 0 ? argv[0] : fk_params_unused(&p));
        fk_params_close(&p);
        return 2;
    }
    if (rc) {
        fprintf(stderr, "fedkern bench fidelity rf-tca: %s\n", err.msg);
        fk_params_close(&p);
        return 2;
    }
    c.m = (size_t)m;
    c.seeds = (int)seeds;
    fo.json = c.json;
    rc = fk_bench_data_dir(dir, &err);
    if (!rc) {
        table_two(&c);
        if (surf)
            rc = surf_table(dir, &c, &err);
    }
    if (!rc && decaf)
        rc = decaf_rows(dir, &c, &err);
    if (!rc && spec)
        rc = fk_bench_rftca_spec_checks(dir, c.json, &err);
    if (!rc && fed_rounds > 0)
        rc = fed_proxy(dir, &c, fed_rounds, &err);
    if (!rc && fo.groups[0])
        rc = fk_bench_rftca_fed_groups(dir, &fo, &err);
    fk_params_close(&p);
    if (rc) {
        fprintf(stderr, "fedkern bench fidelity rf-tca: %s\n", err.msg);
        return 1;
    }
    return 0;
}

int fk_bench_fidelity_rftca(int argc, char **argv)
{
    return run(argc, argv);
}
