/* fedkern sim fedgrem: FedGrEM and its baselines on the paper's simulation
 * design (spec fedgrem.md 4.2), one line per replication plus progress lines. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/mixture/gmm_real.h"
#include "bench/mixture/gmm_run.h"
#include "bench/mixture/sim_fedgrem.h"
#include "bench/sim_designs.h"
#include "common/data/synth_gmm.h"
#include "common/methods/sim.h"

typedef struct progress_ctx {
    int every, json, rep;
    const char *method;
} progress_ctx;

static void progress(const fk_sim_round *r, void *v)
{
    progress_ctx *c = v;
    if (c->every <= 0 || (r->round % c->every && r->round != 1))
        return;
    if (c->json)
        printf("{\"sim\":\"fedgrem\",\"method\":\"%s\",\"rep\":%d,\"round\":%d,\"clients\":%d,"
               "\"neg_loglik_per_sample\":%.9g,\"bytes\":%llu,\"seconds\":%.6g}\n",
               c->method, c->rep, r->round, r->participants, r->loss,
               (unsigned long long)r->bytes, r->seconds);
    else
        printf("  rep %d round %5d  clients %3d  -loglik/n %.6f  bytes %llu\n", c->rep, r->round,
               r->participants, r->loss, (unsigned long long)r->bytes);
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: fedkern sim fedgrem [options]\n\n"
            "Runs a mixture-model method on the FedGrEM paper's simulation design: K tasks,\n"
            "the last --outliers of them outliers N(2.5 1, 4 I), R components in p dims,\n"
            "task centres at distance h from common centres, Dirichlet(5) weights.\n\n"
            "options:\n"
            "  --method M        fedgrem | fedem | local-em | local-grem | tgmm | pooled-em |\n"
            "                    pooled-grem (default fedgrem)\n"
            "  --rounds T        rounds (default 1000)\n"
            "  --reps N          replications, seeds seed..seed+N-1 (default 1)\n"
            "  --seed S          first replication seed (default 1)\n"
            "  --K, --R, --p, --n   design (default 10, 5, 10, 150)\n"
            "  --h H             task heterogeneity (default 0)\n"
            "  --outliers O      outlier tasks (default 1)\n"
            "  --outlier_text 1  use the paper text's outlier N(2 1, 3 I)\n"
            "  --every E         progress line every E rounds (default 100; 0 = none)\n"
            "  --data D          synth (default) | pendigits | fashion-mnist-pca10 |\n"
            "                    fashion-mnist-pca10z: real-data protocol (R=10, 80/20 split\n"
            "                    per client, mis-clustering on good clients' test points)\n"
            "  --data_dir DIR    shared data directory (default ../shared/data)\n"
            "  --clients K       real data: clients (default 44 pendigits, 100 fashion)\n"
            "  --contaminated C  real data: contaminated clients (default 0)\n"
            "  --model M         gmm (default) | mor: mixture of regressions (spec 4.3;\n"
            "                    --n defaults to 200, outlier y = x^T(out_coef 1) + e,\n"
            "                    --out_coef -3); methods fedgrem, fedem, local-em,\n"
            "                    local-grem, pooled-em, pooled-grem, fedgmm\n"
            "                    (--fedgmm_R1 3 --fedgmm_cov all|first), and the job\n"
            "                    types fedgrem-mor, fedem-mor, local-em-mor,\n"
            "                    local-grem-mor, pooled-grem-mor, pooled-em-mor,\n"
            "                    fedgmm-mor (method table; also 'fedkern sim\n"
            "                    fedgrem-mor')\n"
            "  --json            JSON lines\n"
            "  --deadline S, --quorum Q   under mpirun: how long rank 0 waits for a phase's\n"
            "                    updates (default 60 s) and the fraction it needs (0.5)\n"
            "method parameters: --c_eta 0.95 --kappa 0.1 --C 2 --lambda0 1 --central_passes 0\n"
            "  (2 = reference) --align_B 50 --restarts 10 --grem_step 0.1 --tgmm_lambda 0.4\n"
            "  --fedem_weights n|uniform --step_guard 0 --local_init kmeans|hc (Local-EM start:\n"
            "  k-means++ restarts, or mclust's hierarchical VVV partition as in the paper)\n");
}

/* Every option this command or the mixture methods read. */
static const char *const KNOWN[] = {
    "method", "rounds", "reps", "seed", "K", "R", "p", "n", "h", "outliers", "outlier_text",
    "every", "json", "data", "data_dir", "clients", "contaminated", "c_eta", "kappa", "C",
    "lambda0", "central_passes", "align_B", "restarts", "grem_step", "tgmm_lambda",
    "fedem_weights", "step_guard", "local_init", "model", "out_coef", "fedgmm_R1", "fedgmm_cov",
    "deadline", "quorum", NULL};

static const char *unknown_option(const fk_params *p)
{
    for (int i = 0; i < p->count; i++) {
        int ok = 0;
        for (int j = 0; KNOWN[j] && !ok; j++)
            ok = fk_params_key_eq(p->items[i].key, KNOWN[j]);
        if (!ok)
            return p->items[i].key;
    }
    return NULL;
}

static int known_method(const char *m)
{
    for (int i = 0; fk_gmm_methods[i]; i++)
        if (!strcmp(fk_gmm_methods[i], m))
            return 1;
    return 0;
}

static int run_real(fk_params *p, const char *data, const char *method, long rounds, long reps,
                    uint64_t seed, int json)
{
    fk_err err = {0};
    long K, C;
    const char *dir = fk_params_str(p, "data_dir", "../shared/data");
    int rc = fk_params_int(p, "clients", strcmp(data, "pendigits") ? 100 : 44, 1, 1000000, &K, &err);
    if (!rc)
        rc = fk_params_int(p, "contaminated", 0, 0, 1000000, &C, &err);
    if (!rc && !fk_params_get(p, "R") && fk_params_set(p, "R", "10"))
        rc = fk_err_set(&err, FK_ENOMEM, "out of memory for the job parameters");
    fk_gmm_real r;
    if (!rc)
        rc = fk_gmm_real_load(&r, dir, data, &err);
    if (rc)
        return fk_sim_fail("sim fedgrem", "%s", err.msg);
    double sum = 0;
    for (long s = 0; rc == FK_OK && s < reps; s++) {
        fk_gmm_real_out o;
        rc = fk_gmm_real_rep(&r, (int)K, (int)C, method, p, (int)rounds, seed + (uint64_t)s, &o,
                             &err);
        if (rc)
            break;
        sum += o.error;
        if (json)
            printf("{\"sim\":\"fedgrem\",\"data\":\"%s\",\"method\":\"%s\",\"rep\":%llu,"
                   "\"clients\":%ld,\"contaminated\":%ld,\"misclustering_pct\":%.4f,"
                   "\"seconds\":%.3f}\n",
                   data, method, (unsigned long long)(seed + (uint64_t)s), K, C, 100 * o.error,
                   o.seconds);
        else
            printf("%-12s %s rep %llu  K %ld  contaminated %ld  mis-clustering %.2f %%  (%.2f s)\n",
                   method, data, (unsigned long long)(seed + (uint64_t)s), K, C, 100 * o.error,
                   o.seconds);
    }
    fk_gmm_real_close(&r);
    if (rc)
        return fk_sim_fail("sim fedgrem", "%s", err.msg);
    if (reps > 1)
        printf(json ? "{\"sim\":\"fedgrem\",\"data\":\"%s\",\"method\":\"%s\",\"summary\":true,"
                      "\"mean_misclustering_pct\":%.4f}\n"
                    : "%s %s mean mis-clustering %.2f %%\n",
               data, method, 100 * sum / reps);
    return 0;
}

int fk_sim_fedgrem(int argc, char **argv)
{
    /* per-client matrices are tiny (n x R x p): BLAS threads only add synchronisation */
    openblas_set_num_threads(1);
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    fk_params p;
    fk_err err = {0};
    fk_params_init(&p);
    int rc = fk_params_parse_args(&p, &argc, argv, &err);
    if (rc || argc > 0) {
        fk_params_close(&p);
        if (rc)
            return fk_sim_fail("sim fedgrem", "%s", err.msg), 2;
        fprintf(stderr, "fedkern sim fedgrem: unexpected argument '%s'\n", argv[0]);
        return 2;
    }
    const char *bad = unknown_option(&p);
    if (bad) {
        fprintf(stderr, "fedkern sim fedgrem: unknown option --%s; see --help\n", bad);
        fk_params_close(&p);
        return 2;
    }
    const char *method = fk_params_str(&p, "method", "fedgrem");
    long rounds, reps, K, R, dim, n, outl, every, text;
    uint64_t seed;
    double h;
    int json;
    rc = fk_params_int(&p, "rounds", 1000, 1, 100000000, &rounds, &err);
    if (!rc) rc = fk_params_int(&p, "reps", 1, 1, 1000000, &reps, &err);
    if (!rc) rc = fk_params_u64(&p, "seed", 1, &seed, &err);
    if (!rc) rc = fk_params_int(&p, "K", 10, 1, 1000000, &K, &err);
    if (!rc) rc = fk_params_int(&p, "R", 5, 1, 1000, &R, &err);
    if (!rc) rc = fk_params_int(&p, "p", 10, 1, 100000, &dim, &err);
    if (!rc) rc = fk_params_int(&p, "n", 150, 1, 100000000, &n, &err);
    if (!rc) rc = fk_params_int(&p, "outliers", 1, 0, 1000000, &outl, &err);
    if (!rc) rc = fk_params_int(&p, "every", 100, 0, 100000000, &every, &err);
    if (!rc) rc = fk_params_int(&p, "outlier_text", 0, 0, 1, &text, &err);
    if (!rc) rc = fk_params_double(&p, "h", 0.0, 0.0, 1e6, &h, &err);
    if (!rc) rc = fk_params_bool(&p, "json", 0, &json, &err);
    const char *model = fk_params_str(&p, "model", "gmm");
    if (!rc && strcmp(model, "gmm") && strcmp(model, "mor"))
        rc = fk_err_set(&err, FK_EINVAL, "unknown --model '%s' (gmm, mor)", model);
    if (!rc && !strcmp(model, "mor")) {
        if (!fk_params_get(&p, "n"))
            n = 200; /* reference MoR.R (paper text: 150) */
        if (outl >= K) {
            fk_params_close(&p);
            return fk_sim_fail("sim fedgrem", "--outliers %ld must be below --K %ld", outl, K), 2;
        }
        rc = fk_sim_fedgrem_mor(&p, method, rounds, reps, seed, K, R, dim, n, outl, h, json);
        fk_params_close(&p);
        return rc;
    }
    if (!rc && !known_method(method))
        rc = fk_err_set(&err, FK_EINVAL,
                        "unknown --method '%s' (fedgrem, fedem, local-em, local-grem, tgmm, "
                        "pooled-em, pooled-grem)",
                        method);
    if (!rc && outl >= K)
        rc = fk_err_set(&err, FK_EINVAL, "--outliers %ld must be below --K %ld", outl, K);
    if (rc) {
        fk_params_close(&p);
        fk_sim_fail("sim fedgrem", "%s", err.msg);
        return 2;
    }
    const char *data = fk_params_str(&p, "data", "synth");
    if (strcmp(data, "synth")) {
        rc = run_real(&p, data, method, rounds, reps, seed, json);
        fk_params_close(&p);
        return rc;
    }
    fk_synth_gmm d;
    fk_synth_gmm_defaults(&d);
    d.K = (int)K;
    d.R = (int)R;
    d.p = (int)dim;
    d.n = (int)n;
    d.n_outlier = (int)outl;
    d.h = h;
    if (text) {
        d.out_mean = 2.0;
        d.out_var = 3.0;
    }
    fk_dataset *tasks = calloc((size_t)K, sizeof *tasks);
    /* under mpirun each rank makes the data of its own tasks only (rank 0 none: the server
     * side needs none); every rank the truth, for the errors */
    unsigned char *want = NULL;
    if (!rc)
        rc = fk_sim_want((int)K, &want, &err);
    double *th = malloc((size_t)(K * R * dim) * sizeof *th), *w = malloc((size_t)(K * R) * sizeof *w);
    double sum_t = 0, sum_w = 0;
    int failed = 0;
    if (!rc && (!tasks || !th || !w))
        rc = fk_err_set(&err, FK_ENOMEM, "out of memory for K=%ld tasks", K);
    for (long s = 0; rc == FK_OK && s < reps; s++) {
        uint64_t sd = seed + (uint64_t)s;
        rc = fk_synth_gmm_make_some(&d, sd, tasks, th, w, want, &err);
        progress_ctx ctx = {.every = (int)every, .json = json, .rep = (int)sd, .method = method};
        fk_gmm_result res;
        if (!rc) {
            int r2 = fk_gmm_run(method, &p, tasks, (int)K, (int)rounds, sd, progress, &ctx, &res, &err);
            if (r2 == FK_ENUMERIC) { /* a diverged replication is a result, not a crash */
                failed++;
                fprintf(stderr, "fedkern sim fedgrem: replication %llu failed: %s\n",
                        (unsigned long long)sd, err.msg);
            } else if (r2) {
                rc = r2;
            } else {
                double et, ew;
                fk_gmm_sim_errors(&res, th, w, (int)(K - outl), &et, &ew);
                sum_t += et;
                sum_w += ew;
                if (json)
                    printf("{\"sim\":\"fedgrem\",\"method\":\"%s\",\"rep\":%llu,\"h\":%g,"
                           "\"outliers\":%ld,\"E_theta\":%.9g,\"E_w\":%.9g,\"lambda\":%.9g,"
                           "\"central_passes\":%d}\n",
                           method, (unsigned long long)sd, h, outl, et, ew, res.lambda, res.passes);
                else
                    printf("%-12s rep %4llu  h %.3g  E_theta %.4f  E_w %.4f\n", method,
                           (unsigned long long)sd, h, et, ew);
                fk_gmm_result_close(&res);
            }
        }
        for (long k = 0; k < K; k++)
            fk_dataset_close(&tasks[k]);
    }
    long ok = reps - failed;
    if (!rc && ok > 0 && reps > 1) {
        if (json)
            printf("{\"sim\":\"fedgrem\",\"method\":\"%s\",\"summary\":true,\"reps\":%ld,"
                   "\"failed\":%d,\"mean_E_theta\":%.9g,\"mean_E_w\":%.9g}\n",
                   method, reps, failed, sum_t / ok, sum_w / ok);
        else
            printf("%-12s mean over %ld reps (%d failed): E_theta %.4f  E_w %.4f\n", method, ok,
                   failed, sum_t / ok, sum_w / ok);
    }
    free(tasks);
    free(want);
    free(th);
    free(w);
    fk_params_close(&p);
    if (rc)
        return fk_sim_fail("sim fedgrem", "%s", err.msg);
    return 0;
}
