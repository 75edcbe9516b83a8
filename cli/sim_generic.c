/* fedkern sim NAME for any job type whose table suffices: the method's own ops run
 * in process on its built-in synthetic clients (sim_data) or on one file per client
 * (--data), with the job's keys from --job FILE and --KEY VALUE. A new method needs no
 * code here: a sim_data op (or data files) and its keys table are enough. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/sim_runners.h"
#include "common/base/params.h"
#include "common/data/load.h"
#include "common/methods/method.h"
#include "common/methods/sim.h"

enum { MAX_DATA = 256 };

typedef struct run_ctx {
    const char *method;
    int json;
} run_ctx;

static void usage(FILE *out, const fk_method *m)
{
    fprintf(out,
            "usage: fedkern sim %s [--job FILE] [--data FILE]... [--clients K] [--rounds N]\n"
            "                  [--seed S] [--drop P] [--json] [--KEY VALUE]...\n\n"
            "%s\n\n"
            "Runs the %s job type in this process through the same operations the daemons call:\n"
            "one server state and one state per client, a line per round, then every client's\n"
            "score of the final model. Without --data the clients hold the method's built-in\n"
            "synthetic data; with --data each file is one client's data set (CSV, LIBSVM, IDX,\n"
            "MAT, NPY as `fedkern data info` reads them).\n\n"
            "options:\n"
            "  --job FILE              job keys from an INI job file (flags given here win)\n"
            "  --data FILE             one client's data (repeat per client)\n"
            "  --clients K             number of synthetic clients (default: the job's 'clients' or 4)\n"
            "  --rounds N              round budget (default: the method's)\n"
            "  --seed S                job seed (default 1)\n"
            "  --drop P                probability that one update is lost (default 0)\n"
            "  --json                  JSON lines instead of text\n",
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
    if (c->json) {
        printf("{\"sim\":\"%s\",\"round\":%d,\"planned\":%d,\"participants\":%d,\"refused\":%d",
               c->method, r->round, r->planned, r->participants, r->refused);
        json_field("loss", r->loss);
        json_field("accuracy", r->accuracy);
        json_field("error", r->error);
        printf(",\"bytes\":%llu,\"seconds\":%.6f}\n", (unsigned long long)r->bytes, r->seconds);
    } else
        printf("%s round %4d  participants %3d/%-3d  loss %12.6g  accuracy %8.4f  error %10.6g\n",
               c->method, r->round, r->participants, r->planned, r->loss, r->accuracy, r->error);
    fflush(stdout);
}

/* Pull the runner's own options out of argv; everything else is a job key. */
static int take_opts(int *argc, char **argv, const char **job, const char **data, int *n_data,
                     int *json, fk_err *err)
{
    int out = 0;
    for (int i = 0; i < *argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) {
            *json = 1;
        } else if (!strcmp(a, "--job") || !strcmp(a, "--data")) {
            if (i + 1 >= *argc)
                return fk_err_set(err, FK_EINVAL, "%s needs a file name", a);
            if (a[2] == 'j') {
                *job = argv[++i];
            } else {
                if (*n_data == MAX_DATA)
                    return fk_err_set(err, FK_ELIMIT, "at most %d --data files", MAX_DATA);
                data[(*n_data)++] = argv[++i];
            }
        } else {
            argv[out++] = argv[i];
        }
    }
    *argc = out;
    return FK_OK;
}

static void close_clients(fk_dataset *ds, int n)
{
    if (!ds)
        return;
    for (int i = 0; i < n; i++)
        fk_dataset_close(&ds[i]);
    free(ds);
}

/* Fill the clients' data: one file each, or the method's synthetic clients. */
static int open_clients(const fk_method *m, const fk_params *p, const char **data, int n_data,
                        uint64_t seed, fk_dataset **out, int *n_out, fk_err *err)
{
    long k = 0;
    int rc = fk_params_int(p, "clients", 4, 1, 100000, &k, err);
    if (rc)
        return rc;
    int n = n_data ? n_data : (int)k;
    fk_dataset *ds = calloc((size_t)n, sizeof *ds);
    if (!ds)
        return fk_err_set(err, FK_ENOMEM, "out of memory for %d clients", n);
    if (n_data) {
        for (int i = 0; i < n_data && rc == FK_OK; i++)
            rc = fk_load(&ds[i], data[i], NULL, err);
    } else if (m->sim_data) {
        rc = m->sim_data(p, n, seed, ds, err);
    } else {
        rc = fk_err_set(err, FK_EINVAL,
                        "job type %s has no built-in data: give one --data FILE per client",
                        m->name);
    }
    if (rc) {
        close_clients(ds, n);
        return rc;
    }
    *out = ds;
    *n_out = n;
    return FK_OK;
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
    fk_err err;
    fk_err_clear(&err);
    const char *job = NULL, *data[MAX_DATA];
    int n_data = 0, json = 0;
    fk_params p;
    fk_params_init(&p);
    int rc = take_opts(&argc, argv, &job, data, &n_data, &json, &err);
    if (rc == FK_OK && job)
        rc = fk_params_load_ini(&p, job, &err);
    if (rc == FK_OK)
        rc = fk_params_parse_args(&p, &argc, argv, &err);
    if (rc == FK_OK && argc > 0)
        rc = fk_err_set(&err, FK_EINVAL, "unexpected argument '%s'", argv[0]);
    if (rc) {
        fk_params_close(&p);
        fprintf(stderr, "fedkern %s: %s (see --help)\n", cmd, err.msg);
        return 2;
    }
    /* The runner's own keys; the rest belong to the method, which reads them itself. */
    long rounds = 0;
    uint64_t seed = 1;
    double drop = 0;
    fk_params_str(&p, "method", NULL); /* a job file names its method; sim names it already */
    rc = fk_params_int(&p, "rounds", 0, 0, 100000000, &rounds, &err);
    if (rc == FK_OK)
        rc = fk_params_u64(&p, "seed", 1, &seed, &err);
    if (rc == FK_OK)
        rc = fk_params_double(&p, "drop", 0.0, 0.0, 0.999999, &drop, &err);
    if (rc) {
        fk_params_close(&p);
        fprintf(stderr, "fedkern %s: %s\n", cmd, err.msg);
        return 2;
    }
    if (rounds == 0)
        rounds = fk_method_default_rounds(m, &p);

    fk_dataset *clients = NULL;
    int n = 0;
    rc = open_clients(m, &p, data, n_data, seed, &clients, &n, &err);
    fk_report *finals = rc == FK_OK ? calloc((size_t)n, sizeof *finals) : NULL;
    if (rc == FK_OK && !finals)
        rc = fk_err_set(&err, FK_ENOMEM, "out of memory for %d reports", n);
    run_ctx ctx = {.method = m->name, .json = json};
    fk_sim_opts o = {.rounds = (int)rounds, .seed = seed, .drop = drop, .progress = progress,
                     .ctx = &ctx, .final_reports = m->evaluate ? finals : NULL};
    fk_bundle model;
    fk_bundle_init(&model);
    if (rc == FK_OK)
        rc = fk_sim_run(m, &p, clients, n, &o, &model, NULL, &err);
    const char *unused = rc == FK_OK ? fk_params_unused(&p) : NULL;
    if (rc == FK_OK && unused)
        fprintf(stderr, "fedkern %s: warning: key '%s' was not read by %s\n", cmd, unused,
                m->name);
    for (int c = 0; rc == FK_OK && o.final_reports && c < n; c++) {
        const fk_report *f = &finals[c];
        if (json) {
            printf("{\"sim\":\"%s\",\"final\":true,\"client\":%d,\"name\":\"%s\"", m->name, c,
                   clients[c].name);
            json_field("loss", f->loss);
            json_field("accuracy", f->accuracy);
            json_field("error", f->error);
            printf("}\n");
        } else
            printf("%s final client %3d %-20s loss %12.6g  accuracy %8.4f  error %10.6g\n",
                   m->name, c, clients[c].name, f->loss, f->accuracy, f->error);
    }
    fk_bundle_close(&model);
    free(finals);
    close_clients(clients, n);
    fk_params_close(&p);
    if (rc)
        return fk_cli_fail(cmd, "%s", err.msg);
    return 0;
}
