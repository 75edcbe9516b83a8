/* fedkern model show|eval|predict: read a model file (what `fedkern job result` writes) and
 * use it without a running server, through the job type's predict op. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/model_export.h"
#include "common/base/params.h"
#include "common/data/load.h"
#include "common/data/prep_model.h"
#include "common/data/source.h"
#include "common/methods/method.h"
#include "common/methods/predict.h"
#include "common/net/modelfile.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: fedkern model show FILE [--json]\n"
            "       fedkern model eval FILE --data FILE [loader options] [--client N]\n"
            "                          [--method NAME] [--json]\n"
            "       fedkern model predict FILE --data FILE --out FILE [loader options]\n"
            "                             [--client N] [--method NAME]\n"
            "       fedkern model export FILE --format npz|json --out FILE\n"
            "\n"
            "FILE is a model file from 'fedkern job result --out FILE': the model's tensors and\n"
            "which job type, job and round made it. No server and no client config are needed:\n"
            "the model holds what prediction needs (random-feature seed, the method's\n"
            "preprocessing, labels), and the rows of --data are read as the raw file holds them.\n"
            "show     prints the job type, round and job, then every tensor: name, shape and\n"
            "         its values (up to 8) or their range.\n"
            "eval     predicts the rows of --data with the job type's predict op and scores the\n"
            "         predictions against the file's labels as the job scores its rounds:\n"
            "         accuracy for a classifier, mis-clustering rate after the best matching\n"
            "         and adjusted Rand index for a clustering (accuracy = 1 - misclust), RMSE\n"
            "         against the file's targets for a regression.\n"
            "predict  writes one 'label,distance' CSV line per row of --data to --out: the\n"
            "         predicted raw label, cluster or value, and the op's score of it (smaller\n"
            "         is surer; docs/operations.md \"Predictions\" says which per job type).\n"
            "export   writes every tensor as one array under its name (npz: NumPy float64\n"
            "         arrays, the scalars 0-d, plus method/job/software strings; json:\n"
            "         {\"arrays\": {NAME: {\"shape\", \"data\"}}}); docs/operations.md\n"
            "         \"Export\" documents the arrays of each job type and a NumPy predictor\n"
            "         that reproduces 'predict'.\n"
            "--client N   mixtures fit one model per client: use client N's (0-based, the order\n"
            "             of the job's clients); a pooled model needs none. Also whose\n"
            "             preprocessing to apply when the clients' differed.\n"
            "The rows of --data get the preprocessing the job's clients applied to their raw\n"
            "files (data.NAME.prep, data.NAME.affine, a catalog set's own), as the model\n"
            "records it ('model show': data_prep); --prep/--affine replace it, --model_prep 0\n"
            "skips it. A model without the record (older clients) is used as is, with a warning.\n"
            "kahm in its default mode keeps its models on the clients: use 'fedkern job\n"
            "predict' (the server asks them). --method NAME names the job type of a model file\n"
            "written before fedkern 0.4 (which does not say).\n"
            "\n"
            "loader options (as 'fedkern data info'):\n"
            "  --format F              csv|libsvm|idx|mat|npy (default: from the extension)\n"
            "  --label first|last|none CSV label column (default first); none = unlabelled\n"
            "  --header                CSV: skip the first line\n"
            "  --delim C               CSV: cell separator (default ,)\n"
            "  --var NAME, --label_var NAME, --labels FILE, --samples_in_columns, --cols N\n");
}

static void print_values(const fk_tensor *t)
{
    if (t->len <= 8) {
        for (size_t i = 0; i < t->len; i++)
            printf("%s%.9g", i ? " " : "", t->data[i]);
        return;
    }
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (size_t i = 0; i < t->len; i++) {
        lo = fmin(lo, t->data[i]);
        hi = fmax(hi, t->data[i]);
        sum += t->data[i];
    }
    printf("min %.6g  max %.6g  mean %.6g", lo, hi, sum / (double)t->len);
}

static void shape_str(const fk_tensor *t, char *buf, size_t cap)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int d = 0; d < t->ndim; d++) {
        int w = snprintf(buf + off, cap - off, "%s%llu", d ? " x " : "",
                         (unsigned long long)t->shape[d]);
        if (w < 0 || (size_t)w >= cap - off)
            break;
        off += (size_t)w;
    }
    if (!t->ndim)
        snprintf(buf, cap, "scalar");
}

FK_CHECKRETURN static int do_show(const char *path, const fk_bundle *m, const fk_model_info *in,
                                  int json)
{
    if (json) {
        printf("{\"file\":\"%s\",\"method\":\"%s\",\"round\":%d,\"job\":\"%s\",\"software\":\"%s\","
               "\"values\":%zu,\"tensors\":[",
               path, in->method, in->round, in->job_id, in->software, fk_bundle_values(m));
        for (size_t i = 0; i < m->count; i++) {
            const fk_tensor *t = &m->items[i];
            printf("%s{\"name\":\"%s\",\"shape\":[", i ? "," : "", t->name);
            for (int d = 0; d < t->ndim; d++)
                printf("%s%llu", d ? "," : "", (unsigned long long)t->shape[d]);
            printf("]}");
        }
        const fk_tensor *sr = fk_bundle_get(m, "sel_round");
        printf("]");
        if (sr && sr->len == 1) /* fedrf-tca's select_holdout: the *_sel tensors */
            printf(",\"selected_round\":%.0f", sr->data[0]);
        char what[160];
        int rows = fk_prep_model_rows(m);
        printf(",\"client_prep\":[");
        for (int r = 0; r < rows; r++) {
            fk_prep_record rec;
            if (fk_prep_model_get(m, rows > 1 ? r : -1, &rec, NULL))
                snprintf(what, sizeof what, "damaged");
            else
                fk_prep_record_describe(&rec, what, sizeof what);
            printf("%s\"%s\"", r ? "," : "", what);
        }
        printf("]}\n");
        return 0;
    }
    printf("model file %s\n", path);
    printf("  method   %s\n", in->method[0] ? in->method : "(not recorded: written before 0.4)");
    if (in->round)
        printf("  round    %d\n", in->round);
    if (in->job_id[0])
        printf("  job      %s\n", in->job_id);
    if (in->software[0])
        printf("  written  by %s\n", in->software);
    printf("  tensors  %zu (%zu values)\n", m->count, fk_bundle_values(m));
    for (size_t i = 0; i < m->count; i++) {
        const fk_tensor *t = &m->items[i];
        char sh[96];
        shape_str(t, sh, sizeof sh);
        printf("    %-20s %-18s ", t->name, sh);
        print_values(t);
        printf("\n");
    }
    /* kahm: the class blocks a client could not model (one sample or identical rows) and left
     * out of its answers (left_out: K x C, 1 = left out) */
    const fk_tensor *lo = fk_bundle_get(m, "left_out");
    for (uint64_t k = 0; lo && lo->ndim == 2 && k < lo->shape[0] && k < 1000; k++) {
        int first = 1;
        for (uint64_t c = 0; c < lo->shape[1] && c < 10000; c++)
            if (lo->data[k * lo->shape[1] + c] == 1) {
                printf("%s%llu", first ? "  class blocks left out by client " : ",",
                       (unsigned long long)(first ? k : c));
                if (first)
                    printf(" (could not be modelled; it serves the others): %llu",
                           (unsigned long long)c);
                first = 0;
            }
        if (!first)
            printf("\n");
    }
    /* what the clients did to their raw files (issue 34), applied by eval and predict */
    int rows = fk_prep_model_rows(m);
    char what[160];
    if (!fk_bundle_get(m, "data_prep"))
        printf("  client preprocessing: unknown (not recorded: an older fedkern or client); "
               "eval/predict use the rows as loaded\n");
    for (int r = 0; r < rows; r++) {
        fk_prep_record rec;
        fk_err err = {0};
        if (fk_prep_model_get(m, rows > 1 ? r : -1, &rec, &err))
            snprintf(what, sizeof what, "damaged: %.140s", err.msg);
        else
            fk_prep_record_describe(&rec, what, sizeof what);
        int none = !strcmp(what, "none");
        if (rows > 1)
            printf("  client preprocessing of client %d: %s (--client %d)\n", r, what, r);
        else if (none)
            printf("  client preprocessing: none (every client used its file as loaded)\n");
        else
            printf("  client preprocessing: %s (every client; eval/predict apply it to the raw "
                   "rows)\n",
                   what);
    }
    /* a model that keeps a selected round's model next to the last one says which is which
     * (fedrf-tca's select_holdout: the *_sel tensors) */
    const fk_tensor *sr = fk_bundle_get(m, "sel_round"), *sa = fk_bundle_get(m, "sel_acc");
    if (sr && sr->len == 1) {
        printf("  selected round %.0f", sr->data[0]);
        if (sa && sa->len == 1)
            printf(" (held-out accuracy %.6g)", sa->data[0]);
        printf(": the *_sel tensors; the others are the model of round %d (the last)\n",
               in->round);
    }
    return 0;
}

/* The rows of ds as the queries bundle ("X", n x p), with the file's targets ("y", which a
 * mixture of regressions needs) and the client whose model to use (client >= 0). */
FK_CHECKRETURN static int queries_of(const fk_dataset *ds, long client, fk_bundle *q)
{
    uint64_t sh[2] = {ds->X.rows, ds->X.cols};
    double *x = fk_bundle_add(q, "X", 2, sh);
    if (!x && ds->X.rows)
        return FK_ENOMEM;
    for (size_t i = 0; i < ds->X.rows; i++)
        memcpy(x + i * ds->X.cols, fk_mat_row(&ds->X, i), ds->X.cols * sizeof(double));
    if (ds->y_raw && fk_bundle_put_vec(q, "y", ds->X.rows, ds->y_raw))
        return FK_ENOMEM;
    if (client >= 0 && fk_bundle_put_scalar(q, "client", (double)client))
        return FK_ENOMEM;
    return FK_OK;
}

FK_CHECKRETURN static int predict(const char *cmd, const fk_method *m, const fk_bundle *model,
                   const fk_dataset *ds, long client, fk_bundle *res)
{
    fk_err err = {0};
    if (!m->predict)
        return fk_cli_fail(cmd,
                           "%s serves no predictions from a model file (it has no predict op)",
                           m->name);
    fk_bundle q;
    fk_bundle_init(&q);
    int rc = queries_of(ds, client, &q) ? fk_cli_fail(cmd, "out of memory") : 0;
    if (!rc && m->predict(model, &q, res, &err))
        rc = fk_cli_fail(cmd, "%s: %s", m->name, err.msg);
    fk_bundle_close(&q);
    const fk_tensor *lab = rc ? NULL : fk_bundle_get(res, "labels");
    const fk_tensor *dist = rc ? NULL : fk_bundle_get(res, "distances");
    if (!rc && (!lab || !dist || lab->len != ds->X.rows || dist->len != ds->X.rows))
        rc = fk_cli_fail(cmd, "%s's predict op gave no labels/distances for the %zu rows", m->name,
                         ds->X.rows);
    return rc;
}

FK_CHECKRETURN static int do_eval_predict(int eval, const char *path, const fk_bundle *model,
                                          const fk_model_info *in, const fk_params *p, int json)
{
    const char *cmd = eval ? "model eval" : "model predict";
    const char *data = fk_params_get(p, "data"), *out = fk_params_get(p, "out");
    const char *name = fk_params_get(p, "method");
    if (!name)
        name = in->method;
    if (!name[0])
        return fk_cli_fail(cmd, "%s does not say which job type made it (written before 0.4); "
                                "name it with --method NAME", path);
    fk_err err = {0};
    const fk_method *m = fk_method_find(name, &err);
    if (!m)
        return fk_cli_fail(cmd, "%s", err.msg);
    long client = -1;
    if (fk_params_get(p, "client") && fk_params_int(p, "client", -1, 0, 1000000, &client, &err))
        return fk_cli_fail(cmd, "%s", err.msg), 2;
    fk_source so; /* the loader options of fedkern data and a client's data.NAME.* keys */
    if (fk_cli_source_opts(&so, p, &err))
        return fk_cli_fail(cmd, "%s", err.msg), 2;
    int model_prep = 1;
    if (fk_params_bool(p, "model_prep", 1, &model_prep, &err))
        return fk_cli_fail(cmd, "%s", err.msg), 2;
    const char *unused = fk_params_unused(p);
    if (unused)
        return fk_cli_fail(cmd, "unknown option '--%s'; see fedkern model --help", unused), 2;
    fk_dataset ds;
    if (fk_cli_load_query(cmd, data, &so, model, client, model_prep, &ds, &err))
        return fk_cli_fail(cmd, "%s", err.msg);
    if (eval && !ds.y && !ds.y_raw) {
        fk_dataset_close(&ds);
        return fk_cli_fail(cmd, "%s holds no labels to score against (see --label)", data);
    }
    fk_bundle res;
    fk_bundle_init(&res);
    int rc = predict(cmd, m, model, &ds, client, &res);
    const fk_tensor *lab = rc ? NULL : fk_bundle_get(&res, "labels");
    const fk_tensor *dist = rc ? NULL : fk_bundle_get(&res, "distances");
    if (!rc && eval) {
        fk_report r;
        if (fk_predict_score(&res, &ds, &r, &err)) {
            rc = fk_cli_fail(cmd, "%s", err.msg);
        } else if (json) {
            printf("{\"model\":\"%s\",\"method\":\"%s\",\"round\":%d,\"data\":\"%s\","
                   "\"rows\":%zu",
                   path, m->name, in->round, data, ds.X.rows);
            for (int f = 0; f < FK_REPORT_N_FIELDS; f++) {
                double v = fk_report_get(&r, fk_report_fields[f].name);
                if (!isnan(v))
                    printf(",\"%s\":%.9g", fk_report_fields[f].name, v);
            }
            printf("}\n");
        } else {
            printf("model %s (%s, round %d) on %s: %zu rows\n", path, m->name, in->round, data,
                   ds.X.rows);
            for (int f = 0; f < FK_REPORT_N_FIELDS; f++) {
                double v = fk_report_get(&r, fk_report_fields[f].name);
                if (!isnan(v))
                    printf("  %-9s %.6f\n", fk_report_fields[f].name, v);
            }
        }
    } else if (!rc) {
        FILE *f = fopen(out, "w");
        if (!f)
            rc = fk_cli_fail(cmd, "cannot write %s: %s", out, strerror(errno));
        for (size_t i = 0; f && i < ds.X.rows; i++)
            fprintf(f, "%.17g,%.17g\n", lab->data[i], dist->data[i]);
        if (f && fclose(f))
            rc = fk_cli_fail(cmd, "cannot write %s", out);
        if (!rc)
            fprintf(stderr, "model predict: %zu predictions written to %s\n", ds.X.rows, out);
    }
    fk_bundle_close(&res);
    fk_dataset_close(&ds);
    return rc;
}

/* Bare flags before FILE: "--json" would take FILE as its value. */
static void bind_flags(int argc, char **argv)
{
    static char json[] = "--json=1", header[] = "--header=1", sic[] = "--samples_in_columns=1";
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            argv[i] = json;
        else if (!strcmp(argv[i], "--header"))
            argv[i] = header;
        else if (!strcmp(argv[i], "--samples_in_columns"))
            argv[i] = sic;
    }
}

int fk_cmd_model(int argc, char **argv)
{
    if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        usage(argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    const char *sub = argv[0];
    int n = argc - 1;
    char **rest = argv + 1;
    bind_flags(n, rest);
    fk_params p;
    fk_params_init(&p);
    fk_err err = {0};
    int rc = 0, json = 0;
    int known = !strcmp(sub, "show") || !strcmp(sub, "eval") || !strcmp(sub, "predict") ||
                !strcmp(sub, "export");
    if (fk_params_parse_args(&p, &n, rest, &err)) {
        rc = fk_cli_fail("model", "%s", err.msg) + 1;
        goto out;
    }
    if (fk_params_get(&p, "help")) {
        usage(stdout);
        goto out;
    }
    if (!known || n != 1) {
        rc = fk_cli_fail("model", known ? "%s takes exactly one model FILE; see --help"
                                        : "unknown subcommand '%s'; see --help",
                         sub) + 1;
        goto out;
    }
    if (fk_params_bool(&p, "json", 0, &json, &err)) {
        rc = fk_cli_fail("model", "%s", err.msg) + 1;
        goto out;
    }
    if (!strcmp(sub, "export") && (!fk_params_get(&p, "format") || !fk_params_get(&p, "out"))) {
        rc = fk_cli_fail("model", "export needs --format npz|json and --out FILE") + 1;
        goto out;
    }
    if (strcmp(sub, "show") && strcmp(sub, "export") && !fk_params_get(&p, "data")) {
        rc = fk_cli_fail("model", "%s needs --data FILE", sub) + 1;
        goto out;
    }
    if (!strcmp(sub, "predict") && !fk_params_get(&p, "out")) {
        rc = fk_cli_fail("model", "predict needs --out FILE") + 1;
        goto out;
    }
    fk_bundle model;
    fk_bundle_init(&model);
    fk_model_info info;
    if (fk_modelfile_read(rest[0], &model, &info, &err)) {
        rc = fk_cli_fail("model", "%s", err.msg);
    } else if (!strcmp(sub, "export")) {
        const char *fmt = fk_params_get(&p, "format"), *to = fk_params_get(&p, "out");
        const char *unused = fk_params_unused(&p);
        if (unused)
            rc = fk_cli_fail("model", "unknown option '--%s'; see --help", unused) + 1;
        else if (fk_model_export(&model, &info, fmt, to, &err))
            rc = fk_cli_fail("model export", "%s", err.msg);
        else
            fprintf(stderr, "model export: %zu arrays written to %s\n", model.count, to);
    } else if (!strcmp(sub, "show")) {
        const char *unused = fk_params_unused(&p);
        rc = unused ? fk_cli_fail("model", "unknown option '--%s'; see --help", unused) + 1
                    : do_show(rest[0], &model, &info, json);
    } else {
        rc = do_eval_predict(!strcmp(sub, "eval"), rest[0], &model, &info, &p, json);
    }
    fk_bundle_close(&model);
out:
    fk_params_close(&p);
    return rc;
}
