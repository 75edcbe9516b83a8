/* fedkern model show|eval|predict: read a model file (what `fedkern job result` writes) and
 * use it without a running server, through the job type's predict op. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/base/params.h"
#include "common/data/load.h"
#include "common/data/source.h"
#include "common/methods/method.h"
#include "common/net/modelfile.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: fedkern model show FILE [--json]\n"
            "       fedkern model eval FILE --data FILE [loader options] [--method NAME] [--json]\n"
            "       fedkern model predict FILE --data FILE --out FILE [loader options]\n"
            "                             [--method NAME]\n"
            "\n"
            "FILE is a model file from 'fedkern job result --out FILE': the model's tensors and\n"
            "which job type, job and round made it. No server is needed.\n"
            "show     prints the job type, round and job, then every tensor: name, shape and\n"
            "         its values (up to 8) or their range.\n"
            "eval     predicts the rows of --data with the job type's predict op and scores the\n"
            "         predictions against the file's labels: accuracy, and for a clustering\n"
            "         the mis-clustering rate after label alignment and the adjusted Rand index.\n"
            "predict  writes one 'label,distance' CSV line per row of --data to --out.\n"
            "Job types without a predict op (every one but kahm with upload_models = 1 today)\n"
            "answer 'not supported for METHOD'. --method NAME names the job type of a model file\n"
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

static int do_show(const char *path, const fk_bundle *m, const fk_model_info *in, int json)
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
    return 0;
}

/* The rows of ds as the queries bundle ("X", n x p). */
static int queries_of(const fk_dataset *ds, fk_bundle *q)
{
    uint64_t sh[2] = {ds->X.rows, ds->X.cols};
    double *x = fk_bundle_add(q, "X", 2, sh);
    if (!x && ds->X.rows)
        return FK_ENOMEM;
    for (size_t i = 0; i < ds->X.rows; i++)
        memcpy(x + i * ds->X.cols, fk_mat_row(&ds->X, i), ds->X.cols * sizeof(double));
    return FK_OK;
}

/* Scores of predicted raw labels against the file's: accuracy, and (labels seen as clusters)
 * mis-clustering after alignment and adjusted Rand index. */
static int score(const fk_dataset *ds, const double *lab, fk_report *r, fk_err *err)
{
    size_t n = ds->X.rows, hit = 0;
    int *pred = malloc((n ? n : 1) * sizeof *pred), *truth = malloc((n ? n : 1) * sizeof *truth);
    double *seen = malloc((n ? n : 1) * sizeof *seen);
    int rc = pred && truth && seen ? FK_OK : fk_err_set(err, FK_ENOMEM, "out of memory scoring");
    int k = 0; /* distinct predicted labels, numbered in order of appearance */
    for (size_t i = 0; !rc && i < n; i++) {
        hit += lab[i] == ds->classes[ds->y[i]];
        int j = 0;
        while (j < k && seen[j] != lab[i])
            j++;
        if (j == k)
            seen[k++] = lab[i];
        pred[i] = j;
        truth[i] = ds->y[i];
    }
    if (!rc && n) {
        r->accuracy = (double)hit / (double)n;
        rc = fk_report_score_clusters(r, truth, pred, n, ds->n_classes, k, err);
        r->accuracy = (double)hit / (double)n; /* the raw labels' accuracy, not 1 - misclust */
        r->error = NAN;
    }
    free(pred);
    free(truth);
    free(seen);
    return rc;
}

static int predict(const char *cmd, const fk_method *m, const fk_bundle *model,
                   const fk_dataset *ds, fk_bundle *res)
{
    fk_err err = {0};
    if (!m->predict)
        return fk_cli_fail(cmd,
                           "not supported for %s: that job type has no predict op (it serves no "
                           "predictions from a model file)",
                           m->name);
    fk_bundle q;
    fk_bundle_init(&q);
    int rc = queries_of(ds, &q) ? fk_cli_fail(cmd, "out of memory") : 0;
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

static int do_eval_predict(int eval, const char *path, const fk_bundle *model,
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
    fk_source so; /* the loader options of fedkern data and a client's data.NAME.* keys */
    if (fk_cli_source_opts(&so, p, &err))
        return fk_cli_fail(cmd, "%s", err.msg), 2;
    const char *unused = fk_params_unused(p);
    if (unused)
        return fk_cli_fail(cmd, "unknown option '--%s'; see fedkern model --help", unused), 2;
    fk_dataset ds;
    if (fk_source_load(&ds, data, &so, NULL, &err))
        return fk_cli_fail(cmd, "%s", err.msg);
    if (eval && (!ds.y || !ds.classes)) {
        fk_dataset_close(&ds);
        return fk_cli_fail(cmd, "%s holds no labels to score against (see --label)", data);
    }
    fk_bundle res;
    fk_bundle_init(&res);
    int rc = predict(cmd, m, model, &ds, &res);
    const fk_tensor *lab = rc ? NULL : fk_bundle_get(&res, "labels");
    const fk_tensor *dist = rc ? NULL : fk_bundle_get(&res, "distances");
    if (!rc && eval) {
        fk_report r;
        fk_report_init(&r);
        if (score(&ds, lab->data, &r, &err)) {
            rc = fk_cli_fail(cmd, "%s", err.msg);
        } else if (json) {
            printf("{\"model\":\"%s\",\"method\":\"%s\",\"round\":%d,\"data\":\"%s\",\"rows\":%zu,"
                   "\"accuracy\":%.9g,\"misclust\":%.9g,\"ari\":%.9g}\n",
                   path, m->name, in->round, data, ds.X.rows, r.accuracy, r.misclust, r.ari);
        } else {
            printf("model %s (%s, round %d) on %s: %zu rows\n", path, m->name, in->round, data,
                   ds.X.rows);
            printf("  accuracy  %.6f\n  misclust  %.6f\n  ari       %.6f\n", r.accuracy,
                   r.misclust, r.ari);
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
    int known = !strcmp(sub, "show") || !strcmp(sub, "eval") || !strcmp(sub, "predict");
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
    if (strcmp(sub, "show") && !fk_params_get(&p, "data")) {
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
