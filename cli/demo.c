/* fedkern demo: a real federation on 127.0.0.1 (a CA, one fedkern-server and its
 * fedkern-clients over mTLS, demo_fleet.c) runs seven jobs on built-in data (FedRF-TCA,
 * FedGrEM, then the one-round dica, udica, kahm, sfl and sfl one-vs-one), submitted and followed through the
 * `fedkern job` calls (job.c); each final model is checked against the in-process
 * simulation with the same seed, and kahm's model also serves one `job predict`. A
 * progress line per round, a final table and SVG/PNG plots (cli/plot.c) in a work
 * directory. --in_process runs the same method operations without daemons. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/demo.h"
#include "cli/job.h"
#include "cli/plot.h"
#include "common/base/log.h"
#include "common/base/params.h"
#include "common/data/load.h"
#include "common/data/prep_model.h"
#include "common/data/synth_gmm.h"
#include "common/data/synth_shift.h"
#include "common/methods/sim.h"
#include "common/net/certs.h"
#include "common/net/codec.h"

typedef struct demo_opts {
    long clients;
    long rounds;      /* 0 = each job's default */
    const char *workdir;
    int json;
    int plots;
    int in_process;
    uint64_t seed;
} demo_opts;

/* How a job's score comes from the clients' reports of the final model. */
enum {
    SCORE_LAST_ACCURACY, /* accuracy of the last client (the target / unseen domain) */
    SCORE_REGULAR_ERROR, /* mean error over all clients but the last (the outlier) */
    SCORE_MEAN_ACCURACY, /* mean accuracy over the clients */
};

typedef struct demo_job {
    const char *method;
    const char *name;     /* file stem and name in the table: the method, unless two jobs share it */
    const char *data;     /* description for the table */
    const char *metric;   /* "accuracy" or "mis-clustering" */
    const char *dataset;  /* data-set name in the job file and the client configs */
    char spec[160];       /* synthetic data spec without the client index */
    int rounds;
    fk_params params;
    fk_dataset *clients;
    int n_clients;
    fk_sim_round *trace;  /* one entry per round */
    fk_report *final;     /* per client, after the last round */
    double score;         /* target accuracy, or mean mis-clustering of the regular clients */
    FILE *dat;            /* per-round plot data */
    int json;
    /* daemon mode */
    char id[64];          /* the server's job id */
    double sim_score;     /* score of the in-process simulation of the same job */
    int same;             /* daemon model == simulation model, bit for bit */
    double seconds;       /* submit to done */
    int score_kind;       /* SCORE_* */
    const char *leaves;   /* what leaves the clients, said when the job starts */
    const char *consent;  /* client-config comment on its local.* keys (its opt-ins) */
    int from_files;       /* clients read WORKDIR/METHOD-cI.csv (the method's built-in data) */
    fk_report *drep;      /* daemon model scored by each client (daemon mode) */
    /* one `job predict` call (kahm): queries, and the daemon's / simulation's answers */
    int predict;
    int refit;            /* its evaluate scores with the client's own round-1 fit (kahm) */
    fk_dataset queries;
    double pred_acc, sim_pred_acc;
    int pred_same;
    double pred_seconds;
} demo_job;

/* The job's name: its file stem (WORKDIR/NAME.conf, NAME-cI.csv, ...) and its table row. */
static const char *jname(const demo_job *j)
{
    return j->name ? j->name : j->method;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: fedkern demo [--clients K] [--rounds R] [--workdir DIR] [--seed S] [--json]\n"
            "                    [--no_plots] [--in_process]\n"
            "\n"
            "Runs a federation on this machine: creates a CA and certificates in the work\n"
            "directory, starts one fedkern-server and fedkern-client daemons on 127.0.0.1 over\n"
            "mutual TLS (the programs next to this one), and submits seven jobs as 'fedkern job\n"
            "submit' does: FedRF-TCA (K-1 labelled source clients and one unlabelled target\n"
            "client on a built-in synthetic domain-shift task), FedGrEM (Gaussian-mixture\n"
            "clustering on the FedGrEM paper's simulation design with one outlier client), and\n"
            "five one-round jobs on their job types' own built-in data (the data 'fedkern sim\n"
            "METHOD' uses, written to DIR/NAME-cI.csv for the clients to load):\n"
            "  dica  K clients, one domain each; the last is an unseen domain that uploads\n"
            "        nothing and scores the predictor. Each other client uploads per-domain sums\n"
            "        of random features (no samples).\n"
            "  udica the same with the unsupervised (UDICA) objective.\n"
            "  kahm  max(K, 4) clients holding 3 of 10 classes each, mode A (upload_models = 1):\n"
            "        THE CLIENTS UPLOAD THEIR CLASS MODELS, WHICH CONTAIN THEIR TRAINING SAMPLES\n"
            "        (whitened); then one 'fedkern job predict' of DIR/kahm-queries.csv through\n"
            "        the server.\n"
            "  sfl   K clients: RAW ROWS LEAVE THE CLIENTS (each uploads its critical samples);\n"
            "        the job says raw_sample_upload = acknowledged.\n"
            "  sfl_ovo the same job type with multiclass = ovo: K clients of 4 classes (one\n"
            "        Gaussian blob each, client k lacking class k), 6 pair problems, majority\n"
            "        vote; the same opt-ins.\n"
            "The demo's own client configs consent to both in their [local] section\n"
            "(allow_model_upload = true, allow_raw_upload = true); a client's default is no.\n"
            "Prints one line per round (from job status), a final table that also says whether\n"
            "each daemon model (and kahm's predictions) equals the in-process simulation with\n"
            "the same seed bit for bit, and writes per-round data, SVG and PNG plots (as 'fedkern job\n"
            "plot' draws them) of the per-round quality and participation (one-round jobs:\n"
            "each client's accuracy),\n"
            "job files, data files, models and daemon logs to the work directory. Every\n"
            "daemon is stopped with SIGTERM at the end, on error and on Ctrl-C.\n"
            "FedGrEM's printed objective is the mean -loglik/n over all clients, the outlier\n"
            "client included: its data fit no common centre, and with the paper's step\n"
            "C_eta / w0_r its relaxation C_eta w_r / w0_r passes 2 (logged once as\n"
            "relaxation_unstable), so its estimates oscillate with period 2 and the mean rises\n"
            "and wiggles while the regular clients' mis-clustering (the score) improves; the\n"
            "job key step_guard = 1 caps the relaxation at 1.\n"
            "\n"
            "options:\n"
            "  --clients K    clients of the FedRF-TCA, dica, udica and sfl jobs (default 4); FedGrEM\n"
            "                 uses max(K, 10), kahm max(K, 4); max(K, 10) client daemons start\n"
            "  --rounds R     rounds of FedRF-TCA and FedGrEM (default 60, 100); dica, udica, kahm\n"
            "                 and sfl have one round\n"
            "  --workdir DIR  certificates, state, logs, data and plots (default ./fedkern-demo)\n"
            "  --seed S       seed of data, features, initialisation and plans (default 1)\n"
            "  --json         JSON lines: one per round and a final one per job\n"
            "  --no_plots     skip the plots\n"
            "  --in_process   no daemons: run the jobs (and kahm's predictions) through the\n"
            "                 simulator in this process\n");
}

FK_CHECKRETURN static int parse_opts(int argc, char **argv, demo_opts *o, fk_params *p, fk_err *err)
{
    int rc = fk_params_parse_args(p, &argc, argv, err);
    if (rc)
        return rc;
    if (argc > 0)
        return fk_err_set(err, FK_EINVAL, "unexpected argument '%s' (see --help)", argv[0]);
    int no_plots = 0;
    if ((rc = fk_params_int(p, "clients", 4, 2, FK_FLEET_MAX - 1, &o->clients, err)) ||
        (rc = fk_params_int(p, "rounds", 0, 0, 100000, &o->rounds, err)) ||
        (rc = fk_params_u64(p, "seed", 1, &o->seed, err)) ||
        (rc = fk_params_bool(p, "json", 0, &o->json, err)) ||
        (rc = fk_params_bool(p, "no_plots", 0, &no_plots, err)) ||
        (rc = fk_params_bool(p, "in_process", 0, &o->in_process, err)))
        return rc;
    o->plots = !no_plots;
    o->workdir = fk_params_str(p, "workdir", "fedkern-demo");
    const char *unknown = fk_params_unused(p);
    if (unknown)
        return fk_err_set(err, FK_EINVAL, "unknown option --%s (see --help)", unknown);
    return FK_OK;
}

/* A number, or null for NaN (not measured this round). */
static void json_num(double v)
{
    if (isnan(v) || isinf(v))
        printf("null");
    else
        printf("%.9g", v);
}

static void progress(const fk_sim_round *r, void *ctx)
{
    demo_job *j = ctx;
    j->trace[r->round - 1] = *r;
    double score = strcmp(j->metric, "accuracy") == 0 ? r->accuracy : r->error;
    if (j->json) {
        printf("{\"job\":\"%s\",\"name\":\"%s\",\"round\":%d,\"participants\":%d,\"loss\":",
               j->method, jname(j), r->round, r->participants);
        json_num(r->loss);
        printf(",\"%s\":%.9g,\"bytes\":%llu}\n", j->metric, isnan(score) ? -1.0 : score,
               (unsigned long long)r->bytes);
    } else
        printf("%-9s round %4d  participants %2d/%-2d  loss %9.5f  bytes %9llu\n", jname(j),
               r->round, r->participants, r->planned, r->loss, (unsigned long long)r->bytes);
    if (j->dat)
        fprintf(j->dat, "%d %d %.9g %.9g\n", r->round, r->participants, r->loss,
                isnan(r->accuracy) ? 0.0 : r->accuracy);
    fflush(stdout);
}

/* FedRF-TCA's data: K-1 labelled source domains and the unlabelled target (the last
 * client) of the built-in synthetic domain shift; its "rounds" key is the job's rounds. */
FK_CHECKRETURN static int make_shift(demo_job *j, const demo_opts *o, fk_err *err)
{
    fk_synth_opts so;
    fk_synth_defaults(&so);
    so.n_sources = j->n_clients - 1;
    so.seed = o->seed;
    snprintf(j->spec, sizeof j->spec, "synthetic/shift:sources=%d,seed=%llu", so.n_sources,
             (unsigned long long)so.seed);
    j->clients = calloc((size_t)j->n_clients, sizeof *j->clients);
    if (!j->clients)
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    int rc = fk_synth_shift(&so, j->clients, err);
    if (rc)
        return rc;
    char buf[32];
    snprintf(buf, sizeof buf, "%d", j->rounds);
    return fk_params_set(&j->params, "rounds", buf) ? FK_ENOMEM : FK_OK;
}

/* FedGrEM's data: the paper's Gaussian-mixture design with at least its default number of
 * tasks (the last an outlier); the job's R is the design's number of components. */
FK_CHECKRETURN static int make_gmm(demo_job *j, const demo_opts *o, fk_err *err)
{
    fk_synth_gmm g;
    fk_synth_gmm_defaults(&g);
    if (j->n_clients > g.K)
        g.K = j->n_clients;
    snprintf(j->spec, sizeof j->spec, "synthetic/gmm:tasks=%d,seed=%llu", g.K,
             (unsigned long long)o->seed);
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

/* One data set as CSV, the raw label first: %.17g reads back to the same doubles, so
 * the client daemons, the simulation check and --in_process all see the same rows. */
static int write_csv(FILE *f, const fk_dataset *ds)
{
    for (size_t i = 0; i < ds->X.rows; i++) {
        double y = ds->y_raw ? ds->y_raw[i] : ds->y ? ds->classes[ds->y[i]] : 0.0;
        if (fprintf(f, "%.17g", y) < 0)
            return -1;
        const double *x = fk_mat_row(&ds->X, i);
        for (size_t k = 0; k < ds->X.cols; k++)
            if (fprintf(f, ",%.17g", x[k]) < 0)
                return -1;
        if (fputc('\n', f) == EOF)
            return -1;
    }
    return 0;
}

/* Write data sets ds[0..n) into one CSV file at path and read it back into out. */
FK_CHECKRETURN static int csv_round_trip(const char *path, const fk_dataset *ds, int n,
                                         fk_dataset *out, fk_err *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return fk_err_set(err, FK_EIO, "%s: cannot write: %s", path, strerror(errno));
    int bad = 0;
    for (int i = 0; i < n && !bad; i++)
        bad = write_csv(f, &ds[i]);
    bad |= fclose(f) != 0;
    if (bad)
        return fk_err_set(err, FK_EIO, "%s: write failed: %s", path, strerror(errno));
    fk_load_opts lo = {.format = FK_FORMAT_CSV, .label = FK_LABEL_FIRST};
    return fk_load(out, path, &lo, err);
}

/* The clients' data of a job type with built-in data: the method's own sim_data op
 * (what `fedkern sim NAME` uses) with the generator keys in gen, one CSV file per client
 * in dir (WORKDIR/METHOD-cI.csv, read by the client daemons) and read back here. With
 * n_extra > 0 the generator makes that many more clients; their rows, drawn like the
 * others but used by no client, become the query file WORKDIR/METHOD-queries.csv. */
FK_CHECKRETURN static int builtin_data(demo_job *j, const demo_opts *o, const char *dir,
                                       const fk_params *gen, int n_extra, fk_err *err)
{
    const fk_method *m = fk_method_find(j->method, err);
    if (!m)
        return err->code;
    if (!m->sim_data)
        return fk_err_set(err, FK_EINVAL, "job type %s has no built-in data", j->method);
    int n = j->n_clients + n_extra;
    fk_dataset *gen_ds = calloc((size_t)n, sizeof *gen_ds);
    j->clients = calloc((size_t)j->n_clients, sizeof *j->clients);
    if (!gen_ds || !j->clients) {
        free(gen_ds);
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    }
    j->from_files = 1;
    int rc = m->sim_data(gen, n, o->seed, gen_ds, NULL, err);
    char path[4200];
    for (int c = 0; !rc && c < j->n_clients; c++) {
        snprintf(path, sizeof path, "%s/%s-c%d.csv", dir, jname(j), c);
        rc = csv_round_trip(path, &gen_ds[c], 1, &j->clients[c], err);
    }
    if (!rc && n_extra) {
        snprintf(path, sizeof path, "%s/%s-queries.csv", dir, jname(j));
        rc = csv_round_trip(path, &gen_ds[j->n_clients], n_extra, &j->queries, err);
    }
    for (int c = 0; c < n; c++)
        fk_dataset_close(&gen_ds[c]);
    free(gen_ds);
    return rc ? fk_err_prefix(err, rc, "%s demo data: ", j->method) : FK_OK;
}

FK_CHECKRETURN static int set_keys(fk_params *p, const char *const (*kv)[2], size_t n, fk_err *err)
{
    for (size_t i = 0; i < n; i++)
        if (fk_params_set(p, kv[i][0], kv[i][1]))
            return fk_err_set(err, FK_ENOMEM, "out of memory");
    return FK_OK;
}

/* The demo's jobs, one row each, run in this order. A row names the job type and its table
 * row, its job keys (local.* keys are the client's own consent: the in-process run reads them
 * from the job, the client daemons from the [local] section of the demo's client configs,
 * with `consent` as its comment), and where its data comes from: `make` (own generator), or
 * else the job type's built-in data (sim_data, as `fedkern sim NAME`) with its first n_gen
 * keys as generator keys and n_queries more generated clients as `job predict` queries. */
typedef struct demo_row {
    const char *method, *name, *data, *metric, *dataset;
    int score_kind;                /* SCORE_* */
    int rounds;                    /* default rounds, replaced by --rounds; 0: one round */
    int min_clients;               /* clients = max(--clients, min_clients) */
    const char *leaves;            /* what leaves the clients, said when the job starts */
    const char *const (*keys)[2];  /* job keys, up to a {NULL} row */
    int n_gen;
    int n_queries;
    int predict, refit;            /* as demo_job */
    const char *consent;           /* client-config comment on its local.* keys */
    int (*make)(demo_job *j, const demo_opts *o, fk_err *err);
} demo_row;

static const demo_row demo_rows[] = {
    {.method = "fedrf-tca", .data = "synthetic domain shift", .metric = "accuracy",
     .dataset = "shift", .score_kind = SCORE_LAST_ACCURACY, .rounds = 60,
     .keys = (const char *const[][2]){{"N", "200"}, {"m", "20"}, {"lr", "0.01"}, {"tc", "10"},
                                      {"classes", "5"}, {NULL, NULL}},
     .make = make_shift},
    {.method = "fedgrem", .data = "GMM design, 1 outlier client", .metric = "mis-clustering",
     .dataset = "gmm", .score_kind = SCORE_REGULAR_ERROR, .rounds = 100, .make = make_gmm},
    /* DICA and UDICA: one domain per client, the last one held out (it uploads nothing and
     * scores the federated predictor on a domain no statistic came from). UDICA solves the
     * unsupervised invariance objective (no labels in the solve); the §8.1 ridge on its
     * projections still learns from the training clients' labels. */
    {.method = "dica", .data = "shifted domains, last unseen", .metric = "accuracy",
     .dataset = "dica", .score_kind = SCORE_LAST_ACCURACY,
     .leaves = "each training client uploads once the per-domain sums of its random features "
               "(means and second moments, no samples); the held-out client uploads nothing",
     .keys = (const char *const[][2]){{"R", "200"}, {"holdout", "last"}, {"classes", "3"},
                                      {NULL, NULL}}},
    {.method = "udica", .data = "shifted domains, last unseen", .metric = "accuracy",
     .dataset = "udica", .score_kind = SCORE_LAST_ACCURACY,
     .leaves = "each training client uploads once the per-domain sums of its random features "
               "(means and second moments, no samples); the held-out client uploads nothing",
     .keys = (const char *const[][2]){{"R", "200"}, {"holdout", "last"}, {"classes", "3"},
                                      {NULL, NULL}}},
    /* KAHM mode A: the clients upload their class models (which contain their training
     * samples), so the server can answer `job predict`. Client i holds 3 of the 10 classes;
     * four clients cover them all. Two further generated clients give the queries. */
    {.method = "kahm", .data = "10 classes, 3 per client", .metric = "accuracy",
     .dataset = "kahm", .score_kind = SCORE_MEAN_ACCURACY, .min_clients = 4,
     .leaves = "mode A (upload_models = 1): each client uploads its KAHM class models, which "
               "contain whitened encodings of ALL its training samples (close to the data "
               "itself); the demo's client configs allow it ([local] allow_model_upload = true)",
     .keys = (const char *const[][2]){{"classes", "10"}, {"upload_models", "1"},
                                      {"local.allow_model_upload", "true"}, {NULL, NULL}},
     .n_gen = 1, .n_queries = 2, .predict = 1, .refit = 1,
     .consent = "kahm jobs with upload_models = 1 may upload its class models, which contain "
                "its training samples"},
    /* sfl: one shot, each client uploads its critical samples (raw rows with their dual
     * values); the job acknowledges that and the demo's client configs allow it. */
    {.method = "sfl", .data = "2-d two-class task (E3.1)", .metric = "accuracy",
     .dataset = "sfl", .score_kind = SCORE_MEAN_ACCURACY,
     .leaves = "RAW ROWS leave the clients: each uploads its critical samples (inputs, label, "
               "dual value); the job says raw_sample_upload = acknowledged and the demo's "
               "client configs allow it ([local] allow_raw_upload = true)",
     .keys = (const char *const[][2]){{"raw_sample_upload", "acknowledged"},
                                      {"local.allow_raw_upload", "true"}, {NULL, NULL}},
     .consent = "sfl jobs may upload raw rows (its critical samples)"},
    /* sfl with multiclass = ovo: one-vs-one over four classes of the method's built-in
     * blobs (client k lacks class k), the same opt-ins as the binary job. */
    {.method = "sfl", .name = "sfl_ovo", .data = "4 classes one-vs-one, blobs",
     .metric = "accuracy", .dataset = "sfl_ovo", .score_kind = SCORE_MEAN_ACCURACY,
     .leaves = "RAW ROWS leave the clients: each uploads once its critical samples over the 6 "
               "class pairs (inputs, class, per-pair duals) and per-pair solver diagnostics; the "
               "job says raw_sample_upload = acknowledged and the demo's client configs allow it "
               "([local] allow_raw_upload = true)",
     .keys = (const char *const[][2]){{"multiclass", "ovo"},
                                      {"classes", "0,1,2,3"},
                                      {"raw_sample_upload", "acknowledged"},
                                      {"local.allow_raw_upload", "true"},
                                      {NULL, NULL}},
     .n_gen = 2,
     .consent = "sfl jobs may upload raw rows (its critical samples)"},
};

enum { N_JOBS = sizeof demo_rows / sizeof demo_rows[0] };

/* A job from its row: description, rounds, clients, keys, then its data (and the keys its
 * data decides). dir: where built-in data goes as CSV files for the client daemons. */
FK_CHECKRETURN static int setup_job(demo_job *j, const demo_row *r, const demo_opts *o,
                                    const char *dir, fk_err *err)
{
    j->method = r->method;
    j->name = r->name;
    j->data = r->data;
    j->metric = r->metric;
    j->dataset = r->dataset;
    j->score_kind = r->score_kind;
    j->leaves = r->leaves;
    j->consent = r->consent;
    j->predict = r->predict;
    j->refit = r->refit;
    j->rounds = !r->rounds ? 1 : o->rounds ? (int)o->rounds : r->rounds;
    j->n_clients = o->clients > r->min_clients ? (int)o->clients : r->min_clients;
    size_t n_keys = 0;
    while (r->keys && r->keys[n_keys][0])
        n_keys++;
    int rc = set_keys(&j->params, r->keys, n_keys, err);
    if (rc || r->make)
        return rc ? rc : r->make(j, o, err);
    fk_params gen;
    fk_params_init(&gen);
    rc = set_keys(&gen, r->keys, (size_t)r->n_gen, err);
    if (!rc)
        rc = builtin_data(j, o, dir, &gen, r->n_queries, err);
    fk_params_close(&gen);
    return rc;
}

/* The job's score from the clients' reports of the final model (score_kind). */
static double score_reports(const demo_job *j, const fk_report *rep)
{
    if (j->score_kind == SCORE_LAST_ACCURACY)
        return rep[j->n_clients - 1].accuracy;
    double s = 0.0;
    int n = 0;
    for (int i = 0; i < j->n_clients; i++) {
        double v = j->score_kind == SCORE_REGULAR_ERROR ? rep[i].error : rep[i].accuracy;
        if (j->score_kind == SCORE_REGULAR_ERROR && i == j->n_clients - 1)
            continue;
        if (isnan(v))
            continue;
        s += v;
        n++;
    }
    return n ? s / (double)n : NAN;
}

/* The queries as `fedkern job predict` sends them: tensor "X", n x p. */
FK_CHECKRETURN static int query_bundle(const demo_job *j, fk_bundle *q, fk_err *err)
{
    const fk_mat *X = &j->queries.X;
    double *x = fk_bundle_add(q, "X", 2, (uint64_t[]){X->rows, X->cols});
    if (!x)
        return fk_err_set(err, FK_ENOMEM, "out of memory for %zu queries", X->rows);
    for (size_t i = 0; i < X->rows; i++)
        memcpy(x + i * X->cols, fk_mat_row(X, i), X->cols * sizeof(double));
    return FK_OK;
}

/* Share of the queries whose predicted label is the query file's label (NaN if the
 * answer has no label per query). */
static double predict_accuracy(const demo_job *j, const fk_bundle *res)
{
    const fk_dataset *q = &j->queries;
    const fk_tensor *lab = fk_bundle_get(res, "labels");
    if (!lab || lab->len != q->X.rows || !q->y || !q->X.rows)
        return NAN;
    size_t hit = 0;
    for (size_t i = 0; i < q->X.rows; i++)
        hit += lab->data[i] == q->classes[q->y[i]];
    return (double)hit / (double)q->X.rows;
}

/* The model's predictions for the job's queries, in this process. */
FK_CHECKRETURN static int predict_local(const demo_job *j, const fk_bundle *model, fk_bundle *res,
                                        fk_err *err)
{
    const fk_method *m = fk_method_find(j->method, err);
    if (!m)
        return err->code;
    if (!m->predict)
        return fk_err_set(err, FK_EINVAL, "job type %s serves no predictions", j->method);
    fk_bundle q;
    fk_bundle_init(&q);
    int rc = query_bundle(j, &q, err);
    if (!rc)
        rc = m->predict(model, &q, res, err);
    fk_bundle_close(&q);
    return rc;
}

FK_CHECKRETURN static int run_job(demo_job *j, const demo_opts *o, fk_err *err)
{
    const fk_method *m = fk_method_find(j->method, err);
    if (!m)
        return err->code;
    j->trace = calloc((size_t)j->rounds, sizeof *j->trace);
    j->final = calloc((size_t)j->n_clients, sizeof *j->final);
    if (!j->trace || !j->final)
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.dat", o->workdir, jname(j));
    j->dat = fopen(path, "w");
    if (!j->dat)
        return fk_err_set(err, FK_EIO, "%s: cannot write: %s", path, strerror(errno));
    fprintf(j->dat, "# round participants loss accuracy\n");
    j->json = o->json;
    if (!o->json && j->leaves)
        printf("%s: in a federation, what leaves the clients: %s\n", jname(j), j->leaves);
    fflush(stdout);
    fk_sim_opts so = {.rounds = j->rounds, .seed = o->seed, .progress = progress, .ctx = j,
                      .final_reports = j->final};
    fk_bundle model;
    int rc = fk_sim_run(m, &j->params, j->clients, j->n_clients, &so, &model, NULL, err);
    if (rc == FK_OK) {
        j->score = score_reports(j, j->final);
        if (j->predict) {
            fk_bundle res;
            fk_bundle_init(&res);
            rc = predict_local(j, &model, &res, err);
            j->pred_acc = rc ? NAN : predict_accuracy(j, &res);
            fk_bundle_close(&res);
        }
        fk_bundle_close(&model);
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
    free(j->drep);
    fk_dataset_close(&j->queries);
    fk_params_close(&j->params);
}

/* ---- daemon mode ---------------------------------------------------------- */

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

FK_CHECKRETURN static int write_text(const char *path, const char *text, fk_err *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return fk_err_set(err, FK_EIO, "%s: cannot write: %s", path, strerror(errno));
    int bad = fputs(text, f) < 0;
    bad |= fclose(f) != 0;
    return bad ? fk_err_set(err, FK_EIO, "%s: write failed: %s", path, strerror(errno)) : FK_OK;
}

/* One certificate, issued unless an earlier run left it in the directory. */
FK_CHECKRETURN static int ensure_cert(const char *pki, fk_cert_role role, const char *name,
                                      const fk_cert_opts *co, fk_err *err)
{
    char pem[4096];
    int rc = fk_certs_path(pem, sizeof pem, pki, role, name, "pem", err);
    if (rc)
        return rc;
    if (access(pem, F_OK) == 0)
        return FK_OK;
    return fk_certs_issue(pki, role, name, co, err);
}

/* CA, server "server" (IP SAN 127.0.0.1), admin "demo" and clients c0..c(n-1). */
FK_CHECKRETURN static int make_pki(const char *pki, int n_clients, fk_err *err)
{
    char ca[4096];
    snprintf(ca, sizeof ca, "%s/ca.pem", pki);
    int rc = access(ca, F_OK) == 0 ? FK_OK : fk_certs_init_ca(pki, "fedkern demo CA", NULL, err);
    fk_cert_opts so = {.ips = "127.0.0.1"};
    if (!rc)
        rc = ensure_cert(pki, FK_ROLE_SERVER, "server", &so, err);
    if (!rc)
        rc = ensure_cert(pki, FK_ROLE_ADMIN, "demo", NULL, err);
    for (int c = 0; !rc && c < n_clients; c++) {
        char name[16];
        snprintf(name, sizeof name, "c%d", c);
        rc = ensure_cert(pki, FK_ROLE_CLIENT, name, NULL, err);
    }
    return rc ? fk_err_prefix(err, rc, "certificates in %s: ", pki) : FK_OK;
}

/* Append text to buf[len..cap) as "# " comment lines of at most width characters, broken
 * at spaces; returns the new length (>= cap when it did not fit). */
static int comment_wrap(char *buf, int len, size_t cap, const char *text, int width)
{
    int col = 0;
    for (const char *w = text; *w && len < (int)cap;) {
        int n = (int)strcspn(w, " ");
        if (col && col + 1 + n > width) {
            len += snprintf(buf + len, cap - (size_t)len, "\n");
            col = 0;
        }
        if (len < (int)cap)
            len += snprintf(buf + len, cap - (size_t)len, col ? " %.*s" : "# %.*s", n, w);
        col += col ? 1 + n : 2 + n;
        w += n;
        w += *w == ' ';
    }
    return len < (int)cap ? len + snprintf(buf + len, cap - (size_t)len, "\n") : len;
}

/* Whether job i's parameter k (a local.* key) already came with an earlier job or key. */
static int local_seen(const demo_job *jobs, int i, int k)
{
    const char *key = jobs[i].params.items[k].key;
    for (int a = 0; a <= i; a++)
        for (int b = 0; b < (a < i ? jobs[a].params.count : k); b++)
            if (!strcmp(jobs[a].params.items[b].key, key))
                return 1;
    return 0;
}

/* Client cI's config: the server, its certificate, its part of each job's data and
 * its consent to the demo's data-leaving jobs: the jobs' local.* keys in [local], each
 * once, with the jobs' consent notes (kahm mode A, sfl) as the comment. */
FK_CHECKRETURN static int write_client_conf(const char *path, const char *pki, int port, int c,
                             const demo_job *jobs, int n_jobs, const char *workdir, fk_err *err)
{
    char text[16384], note[2048];
    int len = snprintf(text, sizeof text,
                       "# written by fedkern demo\nserver = 127.0.0.1:%d\nserver-name = server\n"
                       "tls_dir = %s\nname = c%d\nbackoff-max-ms = 500\n\n[data]\n",
                       port, pki, c);
    for (int i = 0; i < n_jobs && len < (int)sizeof text; i++)
        if (c < jobs[i].n_clients && jobs[i].from_files)
            len += snprintf(text + len, sizeof text - (size_t)len, "%s = %s/%s-c%d.csv\n",
                            jobs[i].dataset, workdir, jname(&jobs[i]), c);
        else if (c < jobs[i].n_clients)
            len += snprintf(text + len, sizeof text - (size_t)len, "%s = %s,client=%d\n",
                            jobs[i].dataset, jobs[i].spec, c);
    /* the comment: the distinct consent notes, in job order */
    int nl = snprintf(note, sizeof note, "This client's own consent (a job cannot set it):"), any = 0;
    for (int i = 0; i < n_jobs && nl < (int)sizeof note; i++) {
        int dup = !jobs[i].consent;
        for (int a = 0; a < i && !dup; a++)
            dup = jobs[a].consent && !strcmp(jobs[a].consent, jobs[i].consent);
        if (!dup)
            nl += snprintf(note + nl, sizeof note - (size_t)nl, "%s %s", any++ ? ";" : "",
                           jobs[i].consent);
    }
    if (any && len < (int)sizeof text && nl + 1 < (int)sizeof note) {
        note[nl++] = '.';
        note[nl] = '\0';
        len += snprintf(text + len, sizeof text - (size_t)len, "\n");
        len = comment_wrap(text, len, sizeof text, note, 72);
        if (len < (int)sizeof text)
            len += snprintf(text + len, sizeof text - (size_t)len, "[local]\n");
        for (int i = 0; i < n_jobs && len < (int)sizeof text; i++)
            for (int k = 0; k < jobs[i].params.count && len < (int)sizeof text; k++)
                if (!strncmp(jobs[i].params.items[k].key, "local.", 6) && !local_seen(jobs, i, k))
                    len += snprintf(text + len, sizeof text - (size_t)len, "%s = %s\n",
                                    jobs[i].params.items[k].key + 6,
                                    jobs[i].params.items[k].value);
    }
    if (len >= (int)sizeof text || nl + 1 >= (int)sizeof note)
        return fk_err_set(err, FK_ELIMIT, "%s: config too long", path);
    return write_text(path, text, err);
}

/* The job file `fedkern job submit` would send; every method parameter included. */
FK_CHECKRETURN static int job_text(const demo_job *j, const demo_opts *o, char *text, size_t cap,
                                   fk_err *err)
{
    size_t len = (size_t)snprintf(text, cap,
                                  "# written by fedkern demo\nname = demo-%s\nmethod = %s\n"
                                  "dataset = %s\nrounds = %d\nseed = %llu\ndeadline = 30\n"
                                  "clients = ",
                                  jname(j), j->method, j->dataset, j->rounds,
                                  (unsigned long long)o->seed);
    for (int c = 0; c < j->n_clients && len < cap; c++)
        len += (size_t)snprintf(text + len, cap - len, "%sc%d", c ? ", " : "", c);
    for (int i = 0; i < j->params.count && len < cap; i++)
        if (strcmp(j->params.items[i].key, "rounds") &&
            strncmp(j->params.items[i].key, "local.", 6)) /* the clients' own configs say these */
            len += (size_t)snprintf(text + len, cap - len, "\n%s = %s", j->params.items[i].key,
                                    j->params.items[i].value);
    if (len + 2 >= cap)
        return fk_err_set(err, FK_ELIMIT, "job file too long");
    text[len++] = '\n';
    text[len] = '\0';
    return FK_OK;
}


/* One closed round, from the job status of that round. */
static int show_round(demo_job *j, fk_job_conn *c, int round)
{
    fedkern_v1_JobStatusResponse st;
    int rc = fk_job_status_get(c, j->id, (uint32_t)round, &st);
    if (rc)
        return rc;
    const fedkern_v1_Metric *m = st.metrics;
    int n = st.metrics_count;
    if (fk_job_metric(m, n, "round") != round)
        return -1; /* not recorded yet */
    fk_sim_round r = {.round = round};
    r.participants = (int)fk_job_metric(m, n, "participants");
    r.planned = (int)fk_job_metric(m, n, "planned");
    r.loss = fk_job_metric(m, n, "loss");
    r.accuracy = fk_job_metric(m, n, "accuracy");
    r.error = fk_job_metric(m, n, "error");
    r.misclust = fk_job_metric(m, n, "misclust");
    r.ari = fk_job_metric(m, n, "ari");
    r.rmse = fk_job_metric(m, n, "rmse");
    if (round <= j->rounds)
        j->trace[round - 1] = r;
    double score = strcmp(j->metric, "accuracy") == 0 ? r.accuracy : r.error;
    if (j->json) {
        printf("{\"job\":\"%s\",\"method\":\"%s\",\"name\":\"%s\",\"round\":%d,"
               "\"participants\":%d,\"planned\":%d,\"loss\":",
               j->id, j->method, jname(j), round, r.participants, r.planned);
        json_num(r.loss);
        printf(",\"%s\":", strcmp(j->metric, "accuracy") ? "error" : "accuracy");
        json_num(score);
        printf("}\n");
    } else if (isnan(score))
        printf("job %-3s %-9s round %4d  participants %2d/%-2d  loss %9.5f\n", j->id, jname(j),
               round, r.participants, r.planned, r.loss);
    else
        printf("job %-3s %-9s round %4d  participants %2d/%-2d  loss %9.5f  %s %6.2f%%\n", j->id,
               jname(j), round, r.participants, r.planned, r.loss, j->metric, 100.0 * score);
    fflush(stdout);
    if (j->dat)
        fprintf(j->dat, "%d %d %.9g %.9g\n", round, r.participants, r.loss,
                isnan(r.accuracy) ? 0.0 : r.accuracy);
    return 0;
}

/* Poll the job's status until it is done, printing every round that closed. */
FK_CHECKRETURN static int follow_job(demo_job *j, fk_job_conn *c, fk_fleet *f, fk_err *err)
{
    int shown = 0;
    double last_progress = mono_s();
    for (;;) {
        int rc = fk_fleet_check(f, err);
        if (rc)
            return rc;
        fedkern_v1_JobStatusResponse st;
        if (fk_job_status_get(c, j->id, 0, &st))
            return fk_err_set(err, FK_ENET, "job %s: status call failed (see above)", j->id);
        while (shown < (int)st.round) {
            rc = show_round(j, c, shown + 1);
            if (rc > 0)
                return fk_err_set(err, FK_ENET, "job %s: status call failed (see above)", j->id);
            if (rc < 0)
                break;
            shown++;
            last_progress = mono_s();
        }
        if (st.state == fedkern_v1_JobState_JOB_DONE && shown >= (int)st.round)
            return FK_OK;
        if (st.state == fedkern_v1_JobState_JOB_FAILED ||
            st.state == fedkern_v1_JobState_JOB_CANCELLED)
            return fk_err_set(err, FK_ESTATE, "job %s (%s) is %s: %s; see %s/server.log", j->id,
                              j->method, fk_jobcli_state_name(st.state), st.message, f->dir);
        if (mono_s() - last_progress > 120.0)
            return fk_err_set(err, FK_ESTATE,
                              "job %s (%s): no round closed in 120 s (round %d); see the logs in %s",
                              j->id, j->method, shown + 1, f->dir);
        usleep(50000);
    }
}

static int bundles_equal(const fk_bundle *a, const fk_bundle *b)
{
    if (a->count != b->count || a->count == 0)
        return 0;
    for (size_t i = 0; i < a->count; i++) {
        const fk_tensor *t = fk_bundle_get(b, a->items[i].name);
        if (!t || t->ndim != a->items[i].ndim || t->len != a->items[i].len ||
            memcmp(t->shape, a->items[i].shape, sizeof t->shape) ||
            memcmp(t->data, a->items[i].data, t->len * sizeof(double)))
            return 0;
    }
    return 1;
}

/* A client's round-1 step again, on the round-1 task of a fresh server state: what a
 * kahm client's evaluate needs (its own held-out rows and class models, from its fit). */
FK_CHECKRETURN static int refit_client(const fk_method *m, const fk_params *p, const demo_job *j,
                                       uint64_t seed, void *cli, int c, fk_err *err)
{
    void *srv = NULL;
    fk_bundle task, up;
    fk_bundle_init(&task);
    fk_bundle_init(&up);
    fk_report r;
    fk_report_init(&r);
    int rc = m->server_init(&srv, p, j->n_clients, seed, err);
    if (!rc)
        rc = m->task(srv, 1, 0, c, &task, err);
    if (!rc)
        rc = m->local_step(cli, &task, &up, &r, err);
    if (srv)
        m->server_close(srv);
    fk_bundle_close(&task);
    fk_bundle_close(&up);
    return rc;
}

/* Each client's evaluate op on a model, as the simulator's final evaluation does it. */
FK_CHECKRETURN static int evaluate_model(const fk_method *m, const fk_params *p, const demo_job *j,
                                         uint64_t seed, const fk_bundle *model, fk_report *rep,
                                         fk_err *err)
{
    for (int c = 0; c < j->n_clients; c++) {
        void *cli = NULL;
        fk_report_init(&rep[c]);
        int rc = m->client_init(&cli, p, &j->clients[c], c, j->n_clients, seed, err);
        if (!rc && j->refit)
            rc = refit_client(m, p, j, seed, cli, c, err);
        if (!rc)
            rc = m->evaluate(cli, model, &rep[c], err);
        if (cli)
            m->client_close(cli);
        if (rc)
            return fk_err_prefix(err, rc, "evaluating the daemon model on client %d: ", c);
    }
    return FK_OK;
}

/* One `job predict` through the daemons and the same predictions from the simulation's
 * model in this process: both scored against the query file's labels and compared. */
FK_CHECKRETURN static int check_predict(demo_job *j, fk_job_conn *c, const fk_bundle *sim_model,
                                        fk_err *err)
{
    fk_bundle q, dres, sres;
    fk_bundle_init(&q);
    fk_bundle_init(&dres);
    fk_bundle_init(&sres);
    int rc = query_bundle(j, &q, err);
    double t0 = mono_s();
    if (!rc && fk_job_predict(c, j->id, &q, 5, &dres))
        rc = fk_err_set(err, FK_ENET, "job %s: the predict call failed (see above)", j->id);
    j->pred_seconds = mono_s() - t0;
    if (!rc)
        rc = predict_local(j, sim_model, &sres, err);
    if (!rc) {
        j->pred_acc = predict_accuracy(j, &dres);
        j->sim_pred_acc = predict_accuracy(j, &sres);
        j->pred_same = bundles_equal(&dres, &sres);
    }
    fk_bundle_close(&q);
    fk_bundle_close(&dres);
    fk_bundle_close(&sres);
    return rc;
}

/* Fetch the daemon's model, simulate the same job in-process, compare and score both. */

/* The preprocessing record of a model whose clients loaded their files with no steps and no
 * affine map (the demo's client daemons report that at Join: prep_model.h), so the
 * in-process model carries what the daemons' does. */
FK_CHECKRETURN static int record_no_prep(fk_bundle *model, int n, fk_err *err)
{
    fk_prep_record *rec = calloc((size_t)n, sizeof *rec);
    if (!rec)
        return fk_err_set(err, FK_ENOMEM, "out of memory recording the preprocessing");
    for (int i = 0; i < n; i++)
        rec[i].known = 1;
    int rc = fk_prep_model_put(model, rec, n, NULL, err);
    free(rec);
    return rc;
}
FK_CHECKRETURN static int check_job(demo_job *j, fk_job_conn *c, const char *text,
                                    const demo_opts *o, const char *workdir, fk_err *err)
{
    uint8_t *blob = NULL;
    size_t len = 0;
    if (fk_job_model_get(c, j->id, &blob, &len))
        return fk_err_set(err, FK_ENET, "job %s: cannot fetch the model (see above)", j->id);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s-model.bin", workdir, jname(j));
    FILE *mf = fopen(path, "wb");
    if (mf) {
        fwrite(blob, 1, len, mf);
        fclose(mf);
    }
    fk_bundle daemon, sim;
    fk_bundle_init(&daemon);
    fk_bundle_init(&sim);
    fk_params p;
    fk_params_init(&p);
    fk_report *rep = calloc((size_t)j->n_clients, sizeof *rep);
    free(j->drep);
    j->drep = rep;
    const fk_method *m = fk_method_find(j->method, err);
    int rc = !m ? err->code : !rep ? fk_err_set(err, FK_ENOMEM, "out of memory") : FK_OK;
    if (!rc && (rc = fk_codec_bundle_decode(blob, len, &daemon, err)))
        fk_err_prefix(err, rc, "job %s model: ", j->id);
    if (!rc)
        rc = fk_params_parse_ini(&p, text, "demo job", err);
    /* the client daemons add their own [local] keys to the job's; so does the simulation */
    for (int i = 0; !rc && i < j->params.count; i++)
        if (!strncmp(j->params.items[i].key, "local.", 6) &&
            fk_params_set(&p, j->params.items[i].key, j->params.items[i].value))
            rc = fk_err_set(err, FK_ENOMEM, "out of memory");
    fk_sim_opts so = {.rounds = j->rounds, .seed = o->seed, .final_reports = j->final};
    if (!rc && (rc = fk_sim_run(m, &p, j->clients, j->n_clients, &so, &sim, NULL, err)))
        fk_err_prefix(err, rc, "simulating job %s in-process: ", j->id);
    if (!rc) /* what the demo's client daemons report at Join: their CSV files, no steps */
        rc = record_no_prep(&sim, j->n_clients, err);
    /* the re-run fits log what they would send; nothing is sent here */
    int level = fk_log_level();
    fk_log_set_level(FK_LOG_ERROR);
    if (!rc)
        rc = evaluate_model(m, &p, j, o->seed, &daemon, rep, err);
    fk_log_set_level(level);
    if (!rc) {
        j->sim_score = score_reports(j, j->final);
        j->score = score_reports(j, rep);
        j->same = bundles_equal(&daemon, &sim);
    }
    if (!rc && j->predict)
        rc = check_predict(j, c, &sim, err);
    free(blob);
    fk_params_close(&p);
    fk_bundle_close(&daemon);
    fk_bundle_close(&sim);
    return rc;
}

FK_CHECKRETURN static int run_daemon_job(demo_job *j, fk_job_conn *c, fk_fleet *f,
                                         const demo_opts *o, fk_err *err)
{
    j->trace = calloc((size_t)j->rounds, sizeof *j->trace);
    j->final = calloc((size_t)j->n_clients, sizeof *j->final);
    if (!j->trace || !j->final)
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    j->json = o->json;
    char text[4096], path[4200];
    int rc = job_text(j, o, text, sizeof text, err);
    snprintf(path, sizeof path, "%s/%s.conf", f->dir, jname(j));
    if (!rc)
        rc = write_text(path, text, err);
    if (rc)
        return rc;
    snprintf(path, sizeof path, "%s/%s.dat", f->dir, jname(j));
    j->dat = fopen(path, "w");
    if (!j->dat)
        return fk_err_set(err, FK_EIO, "%s: cannot write: %s", path, strerror(errno));
    fprintf(j->dat, "# round participants loss accuracy\n");
    double t0 = mono_s();
    if (fk_job_submit_text(c, text, j->id, sizeof j->id))
        rc = fk_err_set(err, FK_ENET, "cannot submit the %s job (see above)", j->method);
    if (!rc && !o->json)
        printf("job %s: %s on %s, %d clients, %d round%s (%s/%s.conf)\n", j->id, j->method,
               j->data, j->n_clients, j->rounds, j->rounds == 1 ? "" : "s", f->dir, jname(j));
    if (!rc && !o->json && j->leaves)
        printf("job %s: what leaves the clients: %s\n", j->id, j->leaves);
    if (!rc)
        rc = follow_job(j, c, f, err);
    j->seconds = mono_s() - t0;
    fclose(j->dat);
    j->dat = NULL;
    if (!rc)
        rc = check_job(j, c, text, o, f->dir, err);
    return rc;
}

/* Remove the state database of an earlier demo run, so job ids start at 1. */
static void fresh_state(const char *state)
{
    static const char *const sfx[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s%s", state, sfx[i]);
        unlink(path);
    }
}

FK_CHECKRETURN static int run_daemons(demo_job *jobs, int n_jobs, const demo_opts *o,
                                      const char *workdir, fk_err *err)
{
    fk_fleet f;
    int rc = fk_fleet_init(&f, workdir, err);
    if (rc)
        return rc;
    int n_daemons = 0;
    for (int i = 0; i < n_jobs; i++)
        if (jobs[i].n_clients > n_daemons)
            n_daemons = jobs[i].n_clients;
    char pki[2100], state[2100];
    snprintf(pki, sizeof pki, "%s/pki", workdir);
    snprintf(state, sizeof state, "%s/state.db", workdir);
    fresh_state(state);
    fk_job_conn *c = NULL;
    if ((rc = make_pki(pki, n_daemons, err)) ||
        (rc = fk_fleet_start_server(&f, pki, state, err)))
        goto out;
    for (int i = 0; i < n_daemons && !rc; i++) {
        char conf[2200], name[16];
        snprintf(conf, sizeof conf, "%s/client-c%d.conf", workdir, i);
        snprintf(name, sizeof name, "c%d", i);
        rc = write_client_conf(conf, pki, f.port, i, jobs, n_jobs, workdir, err);
        if (!rc)
            rc = fk_fleet_start_client(&f, name, conf, err);
    }
    if (rc || (rc = fk_fleet_wait_joined(&f, 30.0, err)))
        goto out;
    if (!o->json)
        printf("fedkern-server on 127.0.0.1:%d and %d fedkern-client daemons (mTLS, certificates "
               "in %s)\n", f.port, n_daemons, pki);
    fk_params cp;
    fk_params_init(&cp);
    char server[64];
    snprintf(server, sizeof server, "127.0.0.1:%d", f.port);
    if (fk_params_set(&cp, "server", server) || fk_params_set(&cp, "server_name", "server") ||
        fk_params_set(&cp, "tls_dir", pki) || fk_params_set(&cp, "name", "demo"))
        rc = fk_err_set(err, FK_ENOMEM, "out of memory");
    else if (fk_job_open(&c, &cp, "demo"))
        rc = fk_err_set(err, FK_ENET, "cannot connect to the demo's fedkern-server (see above)");
    fk_params_close(&cp);
    for (int i = 0; i < n_jobs && !rc; i++)
        rc = run_daemon_job(&jobs[i], c, &f, o, err);
out:
    fk_job_close(c);
    /* A daemon that died explains most failures: its message replaces err; FK_OK leaves err. */
    if (rc && !fk_fleet_interrupted() && fk_fleet_check(&f, err) != FK_OK) {
        /* err now names the daemon that died */
    }
    fk_fleet_stop(&f, 10.0);
    return rc;
}

/* The per-round plot of a job (cli/plot.c, as `fedkern job plot` draws it); a one-round job has
 * no curve: its plot is each client's accuracy of the final model. */
static void plot_as(const demo_job *j, const char *workdir, const char *ext)
{
    char path[4200], title[200];
    snprintf(path, sizeof path, "%s/%s.%s", workdir, jname(j), ext);
    fk_err err = {0};
    int rc;
    if (j->rounds == 1) {
        const fk_report *rep = j->drep ? j->drep : j->final;
        double x[64], y[64];
        int n = j->n_clients < 64 ? j->n_clients : 64;
        for (int c = 0; c < n; c++) {
            x[c] = c;
            y[c] = rep ? rep[c].accuracy : NAN;
        }
        fk_plot_series s = {.label = "accuracy", .x = x, .y = y, .n = n, .style = FK_PLOT_BARS};
        fk_plot_panel pn = {.ylabel = "accuracy of the final model", .series = &s, .n_series = 1,
                            .ymin = 0, .ymax = 1.05};
        snprintf(title, sizeof title, "fedkern demo: %s on %s (one round)", j->method, j->data);
        fk_plot p = {.title = title, .xlabel = "client", .panels = &pn, .n_panels = 1};
        rc = fk_plot_write(&p, path, &err);
    } else {
        fk_plot_round *rows = calloc((size_t)j->rounds, sizeof *rows);
        int n = 0;
        for (int i = 0; rows && i < j->rounds; i++) {
            const fk_sim_round *t = &j->trace[i];
            if (t->round != i + 1)
                continue; /* not closed */
            fk_plot_round *w = &rows[n++];
            *w = (fk_plot_round){.round = t->round, .participants = t->participants,
                                 .planned = t->planned,
                                 .q = {t->loss, t->accuracy, t->error, t->misclust, t->ari,
                                       t->rmse, t->model_error}};
        }
        snprintf(title, sizeof title, "fedkern demo: %s on %s", j->method, j->data);
        rc = rows ? fk_plot_rounds(path, title, rows, n, &err)
                  : fk_err_set(&err, FK_ENOMEM, "out of memory");
        free(rows);
    }
    if (rc)
        fprintf(stderr, "fedkern demo: plot of %s skipped: %s\n", jname(j), err.msg);
}

static void plot(const demo_job *j, const char *workdir)
{
    plot_as(j, workdir, "svg");
    plot_as(j, workdir, "png");
}

static const char *yes_no(int b)
{
    return b ? "yes" : "NO";
}

/* The job predict row: accuracy of the predicted labels against the query file's. */
static void print_predict_row(const demo_job *j, int i, const demo_opts *o)
{
    size_t nq = j->queries.X.rows;
    char what[64];
    snprintf(what, sizeof what, "job predict, %zu queries", nq);
    if (o->json && o->in_process) {
        printf("{\"job\":\"demo-%d\",\"method\":\"%s\",\"predict\":%zu,\"accuracy\":", i + 1,
               j->method, nq);
        json_num(j->pred_acc);
        printf("}\n");
    } else if (o->json) {
        printf("{\"job\":\"%s\",\"method\":\"%s\",\"predict\":%zu,\"accuracy\":", j->id,
               j->method, nq);
        json_num(j->pred_acc);
        printf(",\"sim_accuracy\":");
        json_num(j->sim_pred_acc);
        printf(",\"daemon_equals_sim\":%s,\"seconds\":%.3f}\n", j->pred_same ? "true" : "false",
               j->pred_seconds);
    } else if (o->in_process) {
        printf("%-10s %-30s %7s %8s %-15s %7.2f%%\n", j->method, what, "-", "-", "accuracy",
               100.0 * j->pred_acc);
    } else {
        printf("%-4s %-10s %-29s %7s %6s %-15s %7.2f%% %7.2f%% %11s\n", j->id, j->method, what, "-",
               "-", "accuracy", 100.0 * j->pred_acc, 100.0 * j->sim_pred_acc,
               yes_no(j->pred_same));
    }
}

static void print_table(demo_job *jobs, int n, const demo_opts *o, const char *workdir)
{
    if (!o->json && o->in_process)
        printf("\n%-10s %-30s %7s %8s %-15s %8s\n", "job", "data", "clients", "rounds", "metric",
               "value");
    else if (!o->json)
        printf("\n%-4s %-10s %-29s %7s %6s %-15s %8s %8s %11s\n", "job", "method", "data",
               "clients", "rounds", "metric", "daemons", "sim", "daemon==sim");
    for (int i = 0; i < n; i++) {
        demo_job *j = &jobs[i];
        const char *key = !strcmp(j->metric, "accuracy") ? "accuracy" : "error";
        if (o->json && o->in_process) {
            printf("{\"job\":\"demo-%d\",\"method\":\"%s\",\"name\":\"%s\",\"rounds\":%d,"
                   "\"clients\":%d,\"%s\":",
                   i + 1, j->method, jname(j), j->rounds, j->n_clients, key);
            json_num(j->score);
            printf("}\n");
        } else if (o->json) {
            printf("{\"job\":\"%s\",\"method\":\"%s\",\"name\":\"%s\",\"state\":\"done\","
                   "\"rounds\":%d,\"clients\":%d,\"%s\":",
                   j->id, j->method, jname(j), j->rounds, j->n_clients, key);
            json_num(j->score);
            printf(",\"sim_%s\":", key);
            json_num(j->sim_score);
            printf(",\"daemon_equals_sim\":%s,\"seconds\":%.3f}\n", j->same ? "true" : "false",
                   j->seconds);
        } else if (o->in_process)
            printf("%-10s %-30s %7d %8d %-15s %7.2f%%\n", jname(j), j->data, j->n_clients,
                   j->rounds, j->metric, 100.0 * j->score);
        else
            printf("%-4s %-10s %-29s %7d %6d %-15s %7.2f%% %7.2f%% %11s\n", j->id, jname(j),
                   j->data, j->n_clients, j->rounds, j->metric, 100.0 * j->score,
                   100.0 * j->sim_score, yes_no(j->same));
        if (j->predict)
            print_predict_row(j, i, o);
    }
    if (!o->json)
        printf("\nper-round data, plots%s: %s/\n",
               o->in_process ? "" : ", job files, models, certificates and daemon logs", workdir);
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
    demo_job jobs[N_JOBS] = {0};
    for (int i = 0; i < N_JOBS; i++)
        fk_params_init(&jobs[i].params);
    char abs[PATH_MAX];
    if (!realpath(o.workdir, abs))
        rc = fk_err_set(&err, FK_EIO, "work directory %s: %s", o.workdir, strerror(errno));
    else if (strlen(abs) > 1800) /* room for the file names under it */
        rc = fk_err_set(&err, FK_ELIMIT, "work directory path %s is too long; use a shorter "
                        "--workdir", abs);
    for (int i = 0; !rc && i < N_JOBS; i++)
        rc = setup_job(&jobs[i], &demo_rows[i], &o, abs, &err);
    for (int i = 0; !rc && o.in_process && i < N_JOBS; i++)
        rc = run_job(&jobs[i], &o, &err);
    if (!rc && !o.in_process)
        rc = run_daemons(jobs, N_JOBS, &o, abs, &err);
    int mismatch = 0;
    if (!rc) {
        print_table(jobs, N_JOBS, &o, o.workdir);
        for (int i = 0; o.plots && i < N_JOBS; i++)
            plot(&jobs[i], o.workdir);
        for (int i = 0; !o.in_process && i < N_JOBS; i++) {
            if (!jobs[i].same) {
                fk_cli_fail("demo", "job %s (%s): the daemon model differs from the in-process "
                                    "simulation with the same seed",
                            jobs[i].id, jname(&jobs[i]));
                mismatch = 1;
            }
            if (jobs[i].predict && !jobs[i].pred_same) {
                fk_cli_fail("demo", "job %s (%s): the daemons' predictions differ from the "
                                    "in_process model's",
                            jobs[i].id, jname(&jobs[i]));
                mismatch = 1;
            }
        }
    } else {
        fk_cli_fail("demo", "%s", err.msg);
    }
    for (int i = 0; i < N_JOBS; i++)
        job_close(&jobs[i]);
    fk_params_close(&p);
    if (fk_fleet_interrupted())
        return 128 + fk_fleet_interrupted();
    return rc || mismatch ? 1 : 0;
}
