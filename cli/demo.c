/* fedkern demo: two federated jobs on built-in data, a progress line per round,
 * a final table and plots (gnuplot, when installed) in a work directory. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cli/cli.h"
#include "common/base/params.h"
#include "common/data/synth_gmm.h"
#include "common/data/synth_shift.h"
#include "common/methods/sim.h"

typedef struct demo_opts {
    long clients;
    long rounds;      /* 0 = each job's default */
    const char *workdir;
    int json;
    int plots;
    uint64_t seed;
} demo_opts;

typedef struct demo_job {
    const char *method;
    const char *data;     /* description for the table */
    const char *metric;   /* "accuracy" or "mis-clustering" */
    int rounds;
    fk_params params;
    fk_dataset *clients;
    int n_clients;
    fk_sim_round *trace;  /* one entry per round */
    fk_report *final;     /* per client, after the last round */
    double score;         /* target accuracy, or mean mis-clustering of the regular clients */
    FILE *dat;            /* per-round plot data */
    int json;
} demo_job;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: fedkern demo [--clients K] [--rounds R] [--workdir DIR] [--seed S] [--json]\n"
            "                    [--no-plots]\n"
            "\n"
            "Runs two federated jobs on built-in data through the same method operations the\n"
            "daemons run: FedRF-TCA (K-1 labelled source clients and one unlabelled target client\n"
            "on a synthetic domain-shift task) and FedGrEM (Gaussian-mixture clustering on the\n"
            "FedGrEM paper's simulation design with one outlier client). Prints one line per\n"
            "round, a final table, and writes per-round data and SVG/PNG plots (gnuplot) of\n"
            "accuracy/objective and participation to the work directory.\n"
            "\n"
            "options:\n"
            "  --clients K    clients per job (default 4 for FedRF-TCA; FedGrEM uses max(K, 10))\n"
            "  --rounds R     rounds per job (default 60 FedRF-TCA, 100 FedGrEM)\n"
            "  --workdir DIR  where data and plots go (default ./fedkern-demo)\n"
            "  --seed S       seed of data, features, initialisation and plans (default 1)\n"
            "  --json         JSON lines: one per round and a final one per job\n"
            "  --no-plots     skip gnuplot\n");
}

static int parse_opts(int argc, char **argv, demo_opts *o, fk_params *p, fk_err *err)
{
    int rc = fk_params_parse_args(p, &argc, argv, err);
    if (rc)
        return rc;
    if (argc > 0)
        return fk_err_set(err, FK_EINVAL, "unexpected argument '%s' (see --help)", argv[0]);
    int no_plots = 0;
    if ((rc = fk_params_int(p, "clients", 4, 2, 64, &o->clients, err)) ||
        (rc = fk_params_int(p, "rounds", 0, 0, 100000, &o->rounds, err)) ||
        (rc = fk_params_u64(p, "seed", 1, &o->seed, err)) ||
        (rc = fk_params_bool(p, "json", 0, &o->json, err)) ||
        (rc = fk_params_bool(p, "no-plots", 0, &no_plots, err)))
        return rc;
    o->plots = !no_plots;
    o->workdir = fk_params_str(p, "workdir", "fedkern-demo");
    const char *unknown = fk_params_unused(p);
    if (unknown)
        return fk_err_set(err, FK_EINVAL, "unknown option --%s (see --help)", unknown);
    return FK_OK;
}

static void progress(const fk_sim_round *r, void *ctx)
{
    demo_job *j = ctx;
    j->trace[r->round - 1] = *r;
    double score = strcmp(j->metric, "accuracy") == 0 ? r->accuracy : r->error;
    if (j->json)
        printf("{\"job\":\"%s\",\"round\":%d,\"participants\":%d,\"loss\":%.9g,\"%s\":%.9g,"
               "\"bytes\":%llu}\n",
               j->method, r->round, r->participants, r->loss, j->metric,
               isnan(score) ? -1.0 : score, (unsigned long long)r->bytes);
    else
        printf("%-9s round %4d  participants %2d/%-2d  loss %9.5f  bytes %9llu\n", j->method,
               r->round, r->participants, r->planned, r->loss, (unsigned long long)r->bytes);
    if (j->dat)
        fprintf(j->dat, "%d %d %.9g %.9g\n", r->round, r->participants, r->loss,
                isnan(r->accuracy) ? 0.0 : r->accuracy);
    fflush(stdout);
}

static int setup_fedrf_tca(demo_job *j, const demo_opts *o, fk_err *err)
{
    fk_synth_opts so;
    fk_synth_defaults(&so);
    so.n_sources = (int)o->clients - 1;
    so.seed = o->seed;
    j->method = "fedrf-tca";
    j->data = "synthetic domain shift";
    j->metric = "accuracy";
    j->rounds = o->rounds ? (int)o->rounds : 60;
    j->n_clients = so.n_sources + 1;
    j->clients = calloc((size_t)j->n_clients, sizeof *j->clients);
    if (!j->clients)
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    int rc = fk_synth_shift(&so, j->clients, err);
    if (rc)
        return rc;
    static const char *kv[][2] = {{"N", "200"}, {"m", "20"}, {"lr", "0.01"}, {"tc", "10"},
                                  {"classes", "5"}};
    for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++)
        if (fk_params_set(&j->params, kv[i][0], kv[i][1]))
            return fk_err_set(err, FK_ENOMEM, "out of memory");
    char buf[32];
    snprintf(buf, sizeof buf, "%d", j->rounds);
    return fk_params_set(&j->params, "rounds", buf) ? FK_ENOMEM : FK_OK;
}

static int setup_fedgrem(demo_job *j, const demo_opts *o, fk_err *err)
{
    fk_synth_gmm g;
    fk_synth_gmm_defaults(&g);
    if (o->clients > g.K)
        g.K = (int)o->clients;
    j->method = "fedgrem";
    j->data = "GMM design, 1 outlier client";
    j->metric = "mis-clustering";
    j->rounds = o->rounds ? (int)o->rounds : 100;
    j->n_clients = g.K;
    j->clients = calloc((size_t)g.K, sizeof *j->clients);
    double *theta = malloc((size_t)g.K * (size_t)g.R * (size_t)g.p * sizeof *theta);
    double *w = malloc((size_t)g.K * (size_t)g.R * sizeof *w);
    int rc = (!j->clients || !theta || !w) ? fk_err_set(err, FK_ENOMEM, "out of memory")
                                           : fk_synth_gmm_make(&g, o->seed, j->clients, theta, w, err);
    free(theta);
    free(w);
    if (rc)
        return rc;
    char buf[32];
    snprintf(buf, sizeof buf, "%d", g.R);
    return fk_params_set(&j->params, "R", buf) ? FK_ENOMEM : FK_OK;
}

/* FedRF-TCA: accuracy on the target (the last client). FedGrEM: mean mis-clustering
 * over the regular clients (the last client is the planted outlier). */
static double score_job(const demo_job *j)
{
    if (!strcmp(j->metric, "accuracy"))
        return j->final[j->n_clients - 1].accuracy;
    double s = 0.0;
    for (int i = 0; i < j->n_clients - 1; i++)
        s += j->final[i].error;
    return s / (double)(j->n_clients - 1);
}

static int run_job(demo_job *j, const demo_opts *o, fk_err *err)
{
    const fk_method *m = fk_method_find(j->method, err);
    if (!m)
        return err->code;
    j->trace = calloc((size_t)j->rounds, sizeof *j->trace);
    j->final = calloc((size_t)j->n_clients, sizeof *j->final);
    if (!j->trace || !j->final)
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.dat", o->workdir, j->method);
    j->dat = fopen(path, "w");
    if (!j->dat)
        return fk_err_set(err, FK_EIO, "%s: cannot write: %s", path, strerror(errno));
    fprintf(j->dat, "# round participants loss accuracy\n");
    j->json = o->json;
    fk_sim_opts so = {.rounds = j->rounds, .seed = o->seed, .progress = progress, .ctx = j,
                      .final_reports = j->final};
    fk_bundle model;
    int rc = fk_sim_run(m, &j->params, j->clients, j->n_clients, &so, &model, NULL, err);
    if (rc == FK_OK) {
        fk_bundle_close(&model);
        j->score = score_job(j);
    }
    fclose(j->dat);
    j->dat = NULL;
    return rc;
}

static void job_close(demo_job *j)
{
    for (int i = 0; j->clients && i < j->n_clients; i++)
        fk_dataset_close(&j->clients[i]);
    free(j->clients);
    free(j->trace);
    free(j->final);
    fk_params_close(&j->params);
}

/* gnuplot draws the per-round data; a missing gnuplot is reported, not fatal. */
static void plot(const demo_job *j, const char *workdir)
{
    char script[4096], cmd[8192];
    snprintf(script, sizeof script, "%s/%s.gp", workdir, j->method);
    FILE *f = fopen(script, "w");
    if (!f)
        return;
    const char *terms[][2] = {{"svg size 900,600", "svg"}, {"pngcairo size 900,600", "png"}};
    for (int t = 0; t < 2; t++) {
        fprintf(f, "set terminal %s\nset output '%s/%s.%s'\n", terms[t][0], workdir, j->method,
                terms[t][1]);
        fprintf(f, "set multiplot layout 2,1 title 'fedkern demo: %s on %s'\n", j->method, j->data);
        fprintf(f, "set xlabel 'round'\nset grid\n");
        if (!strcmp(j->metric, "accuracy"))
            fprintf(f, "set ylabel 'target accuracy'\nplot '%s/%s.dat' using 1:4 with lines "
                       "title 'accuracy'\n", workdir, j->method);
        else
            fprintf(f, "set ylabel '-loglik / n'\nplot '%s/%s.dat' using 1:3 with lines "
                       "title 'objective'\n", workdir, j->method);
        fprintf(f, "set ylabel 'participants'\nset yrange [0:%d]\nplot '%s/%s.dat' using 1:2 with steps "
                   "title 'participants'\nunset multiplot\nset autoscale y\n",
                j->n_clients + 1, workdir, j->method);
    }
    fclose(f);
    snprintf(cmd, sizeof cmd, "gnuplot '%s' 2>/dev/null", script);
    int st = system(cmd);
    if (st != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fprintf(stderr, "fedkern demo: gnuplot failed or is not installed; plots skipped "
                        "(apt-get install gnuplot-nox)\n");
}

static void print_table(demo_job *jobs, int n, const demo_opts *o)
{
    if (!o->json)
        printf("\n%-10s %-30s %7s %8s %-15s %8s\n", "job", "data", "clients", "rounds", "metric",
               "value");
    for (int i = 0; i < n; i++) {
        demo_job *j = &jobs[i];
        double v = j->score;
        if (o->json)
            printf("{\"job\":\"demo-%d\",\"method\":\"%s\",\"rounds\":%d,\"clients\":%d,"
                   "\"%s\":%.9g}\n",
                   i + 1, j->method, j->rounds, j->n_clients,
                   !strcmp(j->metric, "accuracy") ? "accuracy" : "error", v);
        else
            printf("%-10s %-30s %7d %8d %-15s %7.2f%%\n", j->method, j->data, j->n_clients,
                   j->rounds, j->metric, 100.0 * v);
    }
    if (!o->json)
        printf("\nper-round data and plots: %s/\n", o->workdir);
}

int fk_cmd_demo(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    demo_opts o = {0};
    fk_params p;
    fk_err err = {0};
    fk_params_init(&p);
    int rc = parse_opts(argc, argv, &o, &p, &err);
    if (rc) {
        fk_params_close(&p);
        fk_cli_fail("demo", "%s", err.msg);
        return 2;
    }
    if (mkdir(o.workdir, 0755) != 0 && errno != EEXIST) {
        fk_cli_fail("demo", "cannot create work directory %s: %s", o.workdir, strerror(errno));
        fk_params_close(&p);
        return 1;
    }
    demo_job jobs[2] = {0};
    fk_params_init(&jobs[0].params);
    fk_params_init(&jobs[1].params);
    rc = setup_fedrf_tca(&jobs[0], &o, &err);
    if (!rc)
        rc = run_job(&jobs[0], &o, &err);
    if (!rc)
        rc = setup_fedgrem(&jobs[1], &o, &err);
    if (!rc)
        rc = run_job(&jobs[1], &o, &err);
    if (!rc) {
        print_table(jobs, 2, &o);
        for (int i = 0; o.plots && i < 2; i++)
            plot(&jobs[i], o.workdir);
    } else {
        fk_cli_fail("demo", "%s", err.msg);
    }
    job_close(&jobs[0]);
    job_close(&jobs[1]);
    fk_params_close(&p);
    return rc ? 1 : 0;
}
