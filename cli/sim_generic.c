/* fedkern sim NAME for any job type whose table suffices: the method's own ops run
 * in process on its built-in synthetic clients (sim_data) or on one file per client
 * (--data), with the job's keys from --job FILE and --KEY VALUE. A new method needs no
 * code here: a sim_data op (or data files) and its keys table are enough. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/sim_mpi.h"
#include "cli/sim_runners.h"
#include "common/base/params.h"
#include "common/data/load.h"
#include "common/data/prep_model.h"
#include "common/data/source.h"
#include "common/methods/jobconf.h"
#include "common/methods/jobkeys.h"
#include "common/methods/method.h"
#include "common/methods/sim.h"
#include "common/net/modelfile.h"

enum { MAX_DATA = 256 };

/* The runner's own keys next to the job's (fk_jobkeys_check): `clients` may also be a count
 * here (the generic key is the identity list). */
static const fk_param_doc runner_keys[] = {
    {"drop P", "probability that one update is lost (0)"},
    {"model_out FILE", "write the final model as a model file (fedkern model)"},
    {NULL, NULL},
};

/* One --data argument: FILE, or NAME=FILE for the client NAME of the job's `clients`. */
typedef struct data_arg {
    const char *name; /* NULL: positional */
    size_t name_len;
    const char *file;
} data_arg;

typedef struct run_ctx {
    const char *method;
    int json;
} run_ctx;

static void usage(FILE *out, const fk_method *m)
{
    fprintf(out,
            "usage: fedkern sim %s [--job FILE] [--data [NAME=]FILE]... [--clients K] [--rounds N]\n"
            "                  [--seed S] [--drop P] [--json] [--model_out FILE] [--KEY VALUE]...\n"
            "       fedkern sim --job FILE [--data NAME=FILE]... [options]  (the job file's method)\n\n"
            "%s\n\n"
            "Runs the %s job type in this process through the same operations the daemons call:\n"
            "one server state and one state per client, a line per round, then every client's\n"
            "score of the final model. Without --data the clients hold the method's built-in\n"
            "synthetic data; with --data each file is one client's data set (CSV, LIBSVM, IDX,\n"
            "MAT, NPY as `fedkern data info` reads them). The job file of `fedkern job submit` runs\n"
            "here as it is: its clients are the job's `clients`, each given its file by\n"
            "--data NAME=FILE; a key no part of the job reads is refused, as at submit.\n\n"
            "options:\n"
            "  --job FILE              job keys from an INI job file (flags given here win)\n"
            "  --data [NAME=]FILE      one client's data (repeat per client; NAME: a client of\n"
            "                          the job's `clients`, FILE alone: clients in order)\n"
            "  --clients K             number of synthetic clients (default: the job's 'clients' or 4)\n"
            "  --rounds N              round budget (default: the method's)\n"
            "  --seed S                job seed (default 1)\n"
            "  --drop P                probability that one update is lost (default 0)\n"
            "  --json                  JSON lines instead of text\n"
            "  --model_out FILE        write the final model as a model file (fedkern model)\n"
            "  --label, --header, --delim, --prep, --affine, ...  the loader options of\n"
            "                          `fedkern data info`, for every --data file\n",
            m->name, m->summary, m->name);
    if (m->keys) {
        fprintf(out, "\njob keys (--KEY VALUE here, KEY = VALUE in a job file):\n");
        fk_param_docs_print(out, m->keys, NULL, NULL);
    }
}

/* ",\"KEY\":V" with null for a value not measured (NaN): "nan" is not JSON. */
static void json_field(const char *key, double v)
{
    if (isfinite(v))
        printf(",\"%s\":%.9g", key, v);
    else
        printf(",\"%s\":null", key);
}

static void progress(const fk_sim_round *r, void *ctx)
{
    const run_ctx *c = ctx;
    const char *names[4] = {"misclust", "ari", "rmse", "model_error"};
    double q[4] = {r->misclust, r->ari, r->rmse, r->model_error};
    if (c->json) {
        printf("{\"sim\":\"%s\",\"round\":%d,\"planned\":%d,\"participants\":%d,\"refused\":%d",
               c->method, r->round, r->planned, r->participants, r->refused);
        json_field("loss", r->loss);
        json_field("accuracy", r->accuracy);
        json_field("error", r->error);
        printf(",\"bytes\":%llu,\"seconds\":%.6f", (unsigned long long)r->bytes, r->seconds);
        for (int i = 0; i < 4; i++) /* measured only */
            if (!isnan(q[i]))
                printf(",\"%s\":%.9g", names[i], q[i]);
        printf("}\n");
    } else {
        printf("%s round %4d  participants %3d/%-3d  loss %12.6g  accuracy %8.4f  error %10.6g",
               c->method, r->round, r->participants, r->planned, r->loss, r->accuracy, r->error);
        for (int i = 0; i < 4; i++)
            if (!isnan(q[i]))
                printf("  %s %.6g", names[i], q[i]);
        printf("\n");
    }
    fflush(stdout);
}

/* Pull the runner's own options out of argv; everything else is a job key. The loader
 * options of `fedkern data` (fk_source_docs: --label last, --header, --prep zscore, ...)
 * go to *src and apply to every --data file. */
FK_CHECKRETURN static int take_opts(int *argc, char **argv, const char **job, data_arg *data,
                                    int *n_data, int *json, fk_params *src, fk_err *err)
{
    static char header[] = "--header=1", sic[] = "--samples_in_columns=1";
    char *lw[2 * MAX_DATA];
    int nl = 0, out = 0;
    for (int i = 0; i < *argc; i++) {
        char *a = argv[i];
        char key[64] = ""; /* KEY of --KEY or --KEY=VALUE */
        for (size_t k = 0; a[0] == '-' && a[1] == '-' && a[k + 2] && a[k + 2] != '=' &&
                           k + 1 < sizeof key;
             k++) {
            key[k] = a[k + 2];
            key[k + 1] = '\0';
        }
        const char *inl = strchr(a, '='); /* --KEY=VALUE */
        if (!strcmp(a, "--json")) {
            *json = 1;
        } else if (!strcmp(key, "job") || !strcmp(key, "data")) {
            if (!inl && i + 1 >= *argc)
                return fk_err_set(err, FK_EINVAL, "%s needs a file name", a);
            const char *v = inl ? inl + 1 : argv[++i];
            if (key[0] == 'j') {
                *job = v;
            } else {
                if (*n_data == MAX_DATA)
                    return fk_err_set(err, FK_ELIMIT, "at most %d --data files", MAX_DATA);
                const char *eq = strchr(v, '=');
                data[(*n_data)++] = eq ? (data_arg){v, (size_t)(eq - v), eq + 1}
                                       : (data_arg){NULL, 0, v};
            }
        } else if (key[0] && fk_source_is_option(key)) {
            if (nl + 2 > (int)(sizeof lw / sizeof lw[0]))
                return fk_err_set(err, FK_ELIMIT, "too many loader options");
            int flag = !inl && (!strcmp(key, "header") || !strcmp(key, "samples_in_columns"));
            lw[nl++] = flag ? (key[0] == 'h' ? header : sic) : a;
            if (!inl && !flag) {
                if (i + 1 >= *argc)
                    return fk_err_set(err, FK_EINVAL, "%s needs a value", a);
                lw[nl++] = argv[++i];
            }
        } else {
            argv[out++] = argv[i];
        }
    }
    *argc = out;
    int rc = nl ? fk_params_parse_args(src, &nl, lw, err) : FK_OK;
    if (!rc && nl)
        rc = fk_err_set(err, FK_EINVAL, "unexpected argument '%s'", lw[0]);
    return rc;
}

static void close_clients(fk_dataset *ds, int n)
{
    if (!ds)
        return;
    for (int i = 0; i < n; i++)
        fk_dataset_close(&ds[i]);
    free(ds);
}

/* The job's `clients`: a count K (sim's own --clients K) or the identity list of a job file;
 * *names stays empty for a count. */
FK_CHECKRETURN static int read_clients(const fk_params *p, fk_jobconf *names, long *count,
                                       fk_err *err)
{
    const char *v = fk_params_get(p, "clients");
    char *end;
    long k = v ? strtol(v, &end, 10) : 4;
    if (!v || (end != v && *end == '\0')) {
        if (k < 1 || k > 100000)
            return fk_err_set(err, FK_EINVAL, "clients = %s: want 1..100000 clients", v);
        *count = k;
        return FK_OK;
    }
    int rc = fk_jobconf_parse_clients(names, v, "clients", err);
    *count = names->n_clients;
    return rc;
}

/* Which --data argument each client gets: slot[c] = index into data. Named arguments go
 * to the job's client of that name (every client needs one); plain ones go in order. */
FK_CHECKRETURN static int match_data(const fk_jobconf *names, const data_arg *data, int n_data,
                                     int *slot, int *n, fk_err *err)
{
    int named = 0;
    for (int i = 0; i < n_data; i++)
        named += data[i].name != NULL;
    if (named && named != n_data)
        return fk_err_set(err, FK_EINVAL, "give every --data as NAME=FILE, or none");
    if (!named || !names->n_clients) { /* in order; NAME=FILE without a list names them */
        if (names->n_clients && n_data != names->n_clients)
            return fk_err_set(err, FK_EINVAL,
                              "%d --data files for the job's %d clients; give one each, or "
                              "NAME=FILE",
                              n_data, names->n_clients);
        for (int i = 0; i < n_data; i++)
            slot[i] = i;
        *n = n_data;
        return FK_OK;
    }
    if (names->n_clients > MAX_DATA)
        return fk_err_set(err, FK_ELIMIT, "the job lists %d clients; sim takes at most %d files",
                          names->n_clients, MAX_DATA);
    for (int c = 0; c < names->n_clients; c++)
        slot[c] = -1;
    for (int i = 0; i < n_data; i++) {
        char id[128];
        snprintf(id, sizeof id, "%.*s", (int)data[i].name_len, data[i].name);
        int c = fk_jobconf_client_index(names, id);
        if (c < 0)
            return fk_err_set(err, FK_EINVAL,
                              "--data %s=...: '%s' is not one of the job's clients (%s%s)", id, id,
                              names->clients[0], names->n_clients > 1 ? ", ..." : "");
        if (slot[c] >= 0)
            return fk_err_set(err, FK_EINVAL, "--data %s=...: client '%s' has two files", id, id);
        slot[c] = i;
    }
    for (int c = 0; c < names->n_clients; c++)
        if (slot[c] < 0)
            return fk_err_set(err, FK_EINVAL, "client '%s' of the job has no --data %s=FILE",
                              names->clients[c], names->clients[c]);
    *n = names->n_clients;
    return FK_OK;
}

/* Fill the clients' data: one file each, or the method's synthetic clients. */
FK_CHECKRETURN static int open_clients(const fk_method *m, const fk_params *p, const data_arg *data,
                                       int n_data, const fk_source *so, uint64_t seed,
                                       fk_dataset **out, int *n_out, int *slot_out, fk_err *err)
{
    fk_jobconf names;
    memset(&names, 0, sizeof names);
    long k = 0;
    int slot[MAX_DATA], n = 0;
    int rc = read_clients(p, &names, &k, err);
    if (!rc && n_data)
        rc = match_data(&names, data, n_data, slot, &n, err);
    else
        n = (int)k;
    fk_dataset *ds = rc || n < 1 ? NULL : calloc((size_t)n, sizeof *ds);
    if (!rc && !ds)
        rc = fk_err_set(err, FK_ENOMEM, "out of memory for %d clients", n);
    if (rc) {
        fk_jobconf_close(&names);
        return rc;
    }
    if (n_data) {
        for (int i = 0; i < n && rc == FK_OK; i++) {
            const char *file = data[slot[i]].file;
            fk_err nerr = {0};
            /* under mpirun another rank holds this client: its file, catalog set or synthetic
             * part stays unread here (only its name, as the loader gives it, for the output);
             * a source that does not check out is loaded, for the loader's own error */
            if (fk_sim_holds(i) || fk_source_name_only(&ds[i], file, so, &nerr) != FK_OK)
                rc = fk_source_load(&ds[i], file, so, NULL, err);
            if (!rc && data[slot[i]].name) {
                char id[128];
                snprintf(id, sizeof id, "%.*s", (int)data[slot[i]].name_len, data[slot[i]].name);
                fk_dataset_set_name(&ds[i], id);
            }
        }
    } else if (m->sim_data) {
        /* under mpirun each rank makes only its own clients' data (rank 0 none) */
        unsigned char *want;
        rc = fk_sim_want(n, &want, err);
        if (rc == FK_OK)
            rc = m->sim_data(p, n, seed, ds, want, err);
        free(want);
    } else {
        rc = fk_err_set(err, FK_EINVAL,
                        "job type %s has no built-in data: give one --data FILE per client",
                        m->name);
    }
    fk_jobconf_close(&names);
    if (rc) {
        close_clients(ds, n);
        return rc;
    }
    *out = ds;
    *n_out = n;
    for (int i = 0; n_data && i < n; i++)
        slot_out[i] = slot[i];
    return FK_OK;
}

/* Where the job type names clients apart (client_roles: dica/udica holdout = unseen,
 * fedrf-tca's target), the final scores' means apart, as `job status` has them per round
 * (train_<field>, unseen_<field>, target_<field>; weights n_samples, 1 where not positive). */
static void print_role_means(const fk_method *m, const fk_params *p, const fk_report *finals,
                             int n, int json)
{
    const char **roles = n > 0 && m->client_roles ? calloc((size_t)n, sizeof *roles) : NULL;
    fk_err err = {0};
    if (!roles || m->client_roles(p, n, roles, &err)) {
        free(roles);
        return;
    }
    int any = 0;
    for (int k = 0; k < n; k++)
        any |= roles[k] != NULL;
    static const char *const names[3] = {"train", "unseen", "target"};
    for (int r = 0; any && r < 3; r++) {
        int members = 0, printed = 0;
        for (int f = 0; f < FK_REPORT_N_FIELDS; f++) {
            double sum = 0, wsum = 0;
            for (int k = 0; k < n; k++) {
                if (r == 0 ? roles[k] != NULL : !roles[k] || strcmp(roles[k], names[r]))
                    continue;
                members += f == 0;
                double v = fk_report_get(&finals[k], fk_report_fields[f].name);
                if (isnan(v))
                    continue;
                double w = finals[k].n_samples > 0 ? finals[k].n_samples : 1.0;
                sum += w * v;
                wsum += w;
            }
            if (!(wsum > 0))
                continue;
            if (!printed++) {
                if (json)
                    printf("{\"sim\":\"%s\",\"final_role\":\"%s\"", m->name, names[r]);
                else
                    printf("%s final %-6s clients", m->name, names[r]);
            }
            if (json)
                printf(",\"%s_%s\":%.9g", names[r], fk_report_fields[f].name, sum / wsum);
            else
                printf("  %s_%s %.6g", names[r], fk_report_fields[f].name, sum / wsum);
        }
        if (printed)
            printf(json ? ",\"clients\":%d}\n" : "  (%d client%s)\n", members,
                   members == 1 ? "" : "s");
    }
    free(roles);
}

/* What the sim's loader did to each client's file, recorded in the model as the daemons'
 * JobResult records what the clients report (common/data/prep_model.h; the clients' order is
 * the job's, as match_data put the files); built-in data: no preprocessing. */
FK_CHECKRETURN static int record_prep(fk_bundle *model, const data_arg *data, const int *slot,
                                      int n_data, const fk_source *so, int n, fk_err *err)
{
    fk_prep_record *rec = calloc((size_t)(n > 0 ? n : 1), sizeof *rec);
    if (!rec)
        return fk_err_set(err, FK_ENOMEM, "out of memory recording the preprocessing");
    fk_affine a = {0};
    int rc = n_data && so->affine ? fk_affine_load(&a, so->affine, err) : FK_OK;
    for (int i = 0; !rc && i < n; i++) {
        rec[i].known = 1;
        rec[i].n = n_data ? fk_source_steps(data[slot[i]].file, so, rec[i].code,
                                            FK_PREP_MODEL_STEPS)
                          : 0;
        rec[i].d = a.d;
        rec[i].shift = a.shift;
        rec[i].scale = a.scale;
    }
    if (!rc)
        rc = fk_prep_model_put(model, rec, n, NULL, err);
    fk_affine_close(&a);
    free(rec);
    return rc;
}

int fk_sim_generic(const fk_method *m, int argc, char **argv)
{
    char cmd[96];
    snprintf(cmd, sizeof cmd, "sim %s", m->name);
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout, m);
            return 0;
        }
    fk_err err = {0};
    fk_err_clear(&err);
    const char *job = NULL;
    data_arg data[MAX_DATA];
    int n_data = 0, json = 0;
    fk_params p, src;
    fk_params_init(&p);
    fk_params_init(&src);
    fk_source so;
    int rc = take_opts(&argc, argv, &job, data, &n_data, &json, &src, &err);
    if (rc == FK_OK)
        rc = fk_source_parse(&so, &src, "", &err);
    if (rc == FK_OK && src.count && !n_data)
        rc = fk_err_set(&err, FK_EINVAL, "loader options (--%s ...) need --data files",
                        src.items[0].key);
    if (rc == FK_OK && job)
        rc = fk_params_load_ini(&p, job, &err);
    if (rc == FK_OK)
        rc = fk_params_parse_args(&p, &argc, argv, &err);
    if (rc == FK_OK && argc > 0)
        rc = fk_err_set(&err, FK_EINVAL, "unexpected argument '%s'", argv[0]);
    if (rc) {
        fk_params_close(&p);
        fk_params_close(&src);
        fprintf(stderr, "fedkern %s: %s (see --help)\n", cmd, err.msg);
        return 2;
    }
    /* A key nothing reads is refused before anything runs, as job submit does. */
    const char *named = fk_params_get(&p, "method");
    if (named && strcmp(named, m->name))
        rc = fk_err_set(&err, FK_EINVAL, "the job file is for method %s, not %s", named, m->name);
    if (!rc)
        rc = fk_jobkeys_check(&p, m, runner_keys, FK_JOBKEYS_LOCAL, &err);
    if (rc) {
        fk_params_close(&p);
        fk_params_close(&src);
        fprintf(stderr, "fedkern %s: %s\n", cmd, err.msg);
        return 2;
    }
    /* The runner's own keys; the rest belong to the method, which reads them itself. */
    long rounds = 0;
    uint64_t seed = 1;
    double drop = 0;
    rc = fk_params_int(&p, "rounds", 0, 0, 100000000, &rounds, &err);
    if (rc == FK_OK)
        rc = fk_params_u64(&p, "seed", 1, &seed, &err);
    if (rc == FK_OK)
        rc = fk_params_double(&p, "drop", 0.0, 0.0, 0.999999, &drop, &err);
    if (rc) {
        fk_params_close(&p);
        fk_params_close(&src);
        fprintf(stderr, "fedkern %s: %s\n", cmd, err.msg);
        return 2;
    }
    if (rounds == 0)
        rounds = fk_method_default_rounds(m, &p);
    /* the final model as a model file, for `fedkern model show|eval|predict` */
    const char *model_out = fk_params_get(&p, "model_out");

    fk_dataset *clients = NULL;
    int n = 0;
    int slot[MAX_DATA];
    rc = open_clients(m, &p, data, n_data, &so, seed, &clients, &n, slot, &err);
    fk_report *finals = rc == FK_OK ? calloc((size_t)n, sizeof *finals) : NULL;
    if (rc == FK_OK && !finals)
        rc = fk_err_set(&err, FK_ENOMEM, "out of memory for %d reports", n);
    run_ctx ctx = {.method = m->name, .json = json};
    fk_sim_opts o = {.rounds = (int)rounds, .seed = seed, .drop = drop, .progress = progress,
                     .ctx = &ctx, .final_reports = m->evaluate ? finals : NULL};
    fk_bundle model;
    fk_bundle_init(&model);
    fk_sim_round last = {0};
    if (rc == FK_OK)
        rc = fk_sim_run(m, &p, clients, n, &o, &model, &last, &err);
    /* a model that says it is not ready (pooled-em: the budget ended before its EM stage) has
     * nothing to score: the final lines say nan, and this says why */
    const fk_tensor *ready = rc == FK_OK ? fk_bundle_get(&model, "ready") : NULL;
    if (ready && ready->len == 1 && ready->data[0] == 0.0 && fk_mpi_rank() == 0)
        fprintf(stderr,
                "fedkern %s: the model is not ready after %ld rounds (its final scores are not "
                "measured); give more rounds, or none for the method's own budget (%d)\n",
                cmd, rounds, fk_method_default_rounds(m, &p));
    if (rc == FK_OK && model_out)
        rc = record_prep(&model, data, slot, n_data, &so, n, &err);
    if (rc == FK_OK && model_out && fk_mpi_rank() == 0) { /* under mpirun: rank 0 writes */
        fk_model_info info = {.round = last.round};
        snprintf(info.method, sizeof info.method, "%s", m->name);
        snprintf(info.job_id, sizeof info.job_id, "sim");
        snprintf(info.software, sizeof info.software, "fedkern %s", FK_VERSION);
        rc = fk_modelfile_write(model_out, &model, &info, &err);
    }
    for (int c = 0; rc == FK_OK && o.final_reports && c < n; c++) {
        const fk_report *f = &finals[c];
        if (json) {
            printf("{\"sim\":\"%s\",\"final\":true,\"client\":%d,\"name\":\"%s\"", m->name, c,
                   clients[c].name);
            json_field("loss", f->loss);
            json_field("accuracy", f->accuracy);
            json_field("error", f->error);
            if (!isnan(f->model_error)) /* kahm's largest modelling error */
                printf(",\"model_error\":%.9g", f->model_error);
            printf("}\n");
        } else {
            printf("%s final client %3d %-20s loss %12.6g  accuracy %8.4f  error %10.6g",
                   m->name, c, clients[c].name, f->loss, f->accuracy, f->error);
            if (!isnan(f->model_error))
                printf("  model_error %.6g", f->model_error);
            printf("\n");
        }
    }
    if (rc == FK_OK && o.final_reports)
        print_role_means(m, &p, finals, n, json);
    fk_bundle_close(&model);
    free(finals);
    close_clients(clients, n);
    fk_params_close(&p);
    fk_params_close(&src);
    if (rc)
        return fk_cli_fail(cmd, "%s", err.msg);
    return 0;
}
