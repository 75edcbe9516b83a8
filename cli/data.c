/* fedkern data: inspect data files as a client would load them, split one file into client
 * shares, and the benchmark catalog. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "common/base/params.h"
#include "common/data/catalog.h"
#include "common/data/load.h"
#include "common/data/source.h"
#include "common/data/split.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: fedkern data info FILE [options] [--save_affine FILE]\n"
            "       fedkern data check FILE FILE... [options]\n"
            "       fedkern data split FILE --clients K --by iid|label-skew|dirichlet:ALPHA|column:N\n"
            "                          --seed S --out DIR [options]\n"
            "       fedkern data catalog [NAME] [--data_dir DIR]\n"
            "\n"
            "info prints what a client with the same options would load: a first line\n"
            "rows=R cols=C classes=K mean=M (K distinct labels, 0 if unlabelled; M the mean of\n"
            "all feature values), then the rows of each class (raw label:rows) and whether every\n"
            "value is finite. FILE may also be a catalog name or a synthetic/ spec, as in a\n"
            "client's config. --save_affine FILE writes the map of the last zscore step, to apply\n"
            "the same scaling to other data with --affine FILE.\n"
            "check loads several domains with the same options, verifies they share the feature\n"
            "dimension, aligns their labels by raw value and prints domains=N cols=C classes=K.\n"
            "split writes DIR/client0.csv .. client{K-1}.csv (label first, then the features,\n"
            "17 significant digits; no label column when unlabelled) and prints each client's\n"
            "rows per class; the same seed gives the same files (iid: shuffled, dealt round-robin;\n"
            "label-skew: sorted by class, cut into K runs; dirichlet:ALPHA: per-class shares from\n"
            "Dirichlet(ALPHA); column:N: rows grouped by feature column N, whole groups per client).\n"
            "catalog lists the benchmark data sets, or prints the info line for one of them after\n"
            "its standard preprocessing.\n"
            "\n"
            "options (the same keys as a client's data.NAME.KEY settings):\n");
    fk_param_docs_print(out, fk_source_docs, NULL, NULL);
    fprintf(out, "  --data_dir DIR             catalog names: the shared data folder (../shared/data)\n");
}

/* Bare boolean flags may precede FILE: turn "--flag" into "--flag=1" so FILE is not
 * taken as the flag's value. */
static void bind_flags(int argc, char **argv)
{
    static char header[] = "--header=1", sic[] = "--samples_in_columns=1";
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--header"))
            argv[i] = header;
        else if (!strcmp(argv[i], "--samples_in_columns"))
            argv[i] = sic;
    }
}

FK_CHECKRETURN static int read_opts(fk_source *o, const fk_params *p, fk_err *err)
{
    int rc = fk_source_parse(o, p, "", err);
    if (!rc)
        o->data_dir = fk_params_str(p, "data_dir", "../shared/data");
    return rc;
}

int fk_cli_source_opts(fk_source *o, const fk_params *p, fk_err *err)
{
    return read_opts(o, p, err);
}

static void print_info(const fk_dataset *ds)
{
    double sum = 0;
    for (size_t i = 0; i < ds->X.rows; i++) {
        const double *r = fk_mat_row(&ds->X, i);
        for (size_t j = 0; j < ds->X.cols; j++)
            sum += r[j];
    }
    double n = (double)ds->X.rows * (double)ds->X.cols;
    printf("rows=%zu cols=%zu classes=%d mean=%.9g\n", ds->X.rows, ds->X.cols, ds->n_classes,
           n > 0 ? sum / n : 0.0);
}

/* Class c's raw label: built-in synthetic data carries class indices only (no raw values). */
static double raw_class(const fk_dataset *ds, int c)
{
    return ds->classes ? ds->classes[c] : (double)c;
}

/* Rows per class (raw label:rows), the regression target's range, the finiteness check. */
static int print_details(const fk_dataset *ds)
{
    if (ds->n_classes > 0) {
        size_t *count = calloc((size_t)ds->n_classes, sizeof *count);
        if (!count)
            return FK_ENOMEM;
        for (size_t i = 0; i < ds->X.rows; i++)
            count[ds->y[i]]++;
        printf("class rows:");
        for (int c = 0; c < ds->n_classes; c++)
            printf(" %.17g:%zu", raw_class(ds, c), count[c]);
        printf("\n");
        free(count);
    } else if (ds->y_raw) {
        double lo = ds->y_raw[0], hi = ds->y_raw[0];
        for (size_t i = 1; i < ds->X.rows; i++) {
            lo = ds->y_raw[i] < lo ? ds->y_raw[i] : lo;
            hi = ds->y_raw[i] > hi ? ds->y_raw[i] : hi;
        }
        printf("target: %.9g .. %.9g (regression, no classes)\n", lo, hi);
    } else {
        printf("class rows: unlabelled\n");
    }
    /* fk_source_load refused any NaN/Inf: reaching here means every value is finite */
    printf("finite: yes (no NaN or Inf in features or labels)\n");
    return FK_OK;
}

static int cmd_info(int argc, char **argv, const fk_params *p)
{
    fk_err err = {0};
    fk_source o;
    if (argc != 1)
        return fk_cli_fail("data", "info takes exactly one FILE (got %d); see fedkern data --help", argc),
               2;
    if (read_opts(&o, p, &err))
        return fk_cli_fail("data", "%s", err.msg), 2;
    const char *save = fk_params_get(p, "save_affine");
    const char *unused = fk_params_unused(p);
    if (unused)
        return fk_cli_fail("data", "unknown option --%s; see fedkern data --help", unused), 2;
    fk_dataset ds;
    fk_affine map;
    if (fk_source_load(&ds, argv[0], &o, &map, &err))
        return fk_cli_fail("data", "%s", err.msg);
    int rc = FK_OK;
    if (save && map.d == 0)
        rc = fk_err_set(&err, FK_EINVAL,
                        "--save_affine needs a zscore step (--prep zscore or l1,zscore ...)");
    else if (save)
        rc = fk_affine_save(&map, save, &err);
    if (!rc) {
        print_info(&ds);
        if (print_details(&ds))
            rc = fk_err_set(&err, FK_ENOMEM, "out of memory");
    }
    fk_affine_close(&map);
    fk_dataset_close(&ds);
    return rc ? fk_cli_fail("data", "%s", err.msg) : 0;
}

/* One client's share as CSV: raw label first (when labelled), then the features. */
FK_CHECKRETURN static int write_share(const fk_dataset *ds, const int *client, int c,
                                      const char *path, size_t *counts, fk_err *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return fk_err_set(err, FK_EIO, "%s: cannot write: %s", path, strerror(errno));
    for (size_t i = 0; i < ds->X.rows; i++) {
        if (client[i] != c)
            continue;
        const double *r = fk_mat_row(&ds->X, i);
        if (ds->y_raw)
            fprintf(f, "%.17g,", ds->y_raw[i]);
        else if (ds->y)
            fprintf(f, "%d,", ds->y[i]);
        for (size_t j = 0; j < ds->X.cols; j++)
            fprintf(f, "%.17g%c", r[j], j + 1 < ds->X.cols ? ',' : '\n');
        counts[0]++;
        if (ds->y)
            counts[1 + ds->y[i]]++;
    }
    int bad = ferror(f);
    if (fclose(f) || bad)
        return fk_err_set(err, FK_EIO, "%s: write failed: %s", path, strerror(errno));
    return FK_OK;
}

static int cmd_split(int argc, char **argv, const fk_params *p)
{
    fk_err err = {0};
    fk_source o;
    fk_split_spec spec;
    long k = 0;
    uint64_t seed = 1;
    if (argc != 1)
        return fk_cli_fail("data", "split takes exactly one FILE (got %d); see fedkern data --help",
                           argc),
               2;
    const char *by = fk_params_get(p, "by"), *out = fk_params_get(p, "out");
    int rc = read_opts(&o, p, &err);
    if (!rc && !fk_params_get(p, "clients"))
        rc = fk_err_set(&err, FK_EINVAL, "split needs --clients K");
    if (!rc)
        rc = fk_params_int(p, "clients", 0, 1, 100000, &k, &err);
    if (!rc)
        rc = fk_params_u64(p, "seed", 1, &seed, &err);
    if (!rc && (!by || !out))
        rc = fk_err_set(&err, FK_EINVAL, "split needs --by iid|label-skew|dirichlet:ALPHA|column:N "
                                         "and --out DIR");
    if (!rc)
        rc = fk_split_parse(&spec, by, &err);
    if (rc)
        return fk_cli_fail("data", "%s", err.msg), 2;
    const char *unused = fk_params_unused(p);
    if (unused)
        return fk_cli_fail("data", "unknown option --%s; see fedkern data --help", unused), 2;
    if (mkdir(out, 0755) && errno != EEXIST)
        return fk_cli_fail("data", "--out %s: cannot create it: %s", out, strerror(errno));
    fk_dataset ds;
    if (fk_source_load(&ds, argv[0], &o, NULL, &err))
        return fk_cli_fail("data", "%s", err.msg);
    int *client = malloc(ds.X.rows * sizeof *client);
    size_t width = 1 + (size_t)ds.n_classes;
    size_t *counts = calloc(width, sizeof *counts);
    rc = client && counts ? FK_OK : fk_err_set(&err, FK_ENOMEM, "out of memory");
    if (!rc)
        rc = fk_split_assign(&ds, &spec, (int)k, seed, client, &err);
    /* every file is written before anything is printed: a failure leaves no half table */
    char (*lines)[1024] = rc ? NULL : calloc((size_t)k, sizeof *lines);
    if (!rc && !lines)
        rc = fk_err_set(&err, FK_ENOMEM, "out of memory");
    for (int c = 0; !rc && c < (int)k; c++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/client%d.csv", out, c);
        memset(counts, 0, width * sizeof *counts);
        rc = write_share(&ds, client, c, path, counts, &err);
        int at = snprintf(lines[c], sizeof lines[c], "client%d.csv rows=%zu", c, counts[0]);
        for (int j = 0; j < ds.n_classes && at > 0 && (size_t)at < sizeof lines[c]; j++)
            at += snprintf(lines[c] + at, sizeof lines[c] - (size_t)at, "%s%.17g:%zu",
                           j ? " " : " classes ", raw_class(&ds, j), counts[1 + j]);
    }
    if (!rc)
        for (int c = 0; c < (int)k; c++)
            printf("%s\n", lines[c]);
    free(lines);
    free(client);
    free(counts);
    fk_dataset_close(&ds);
    return rc ? fk_cli_fail("data", "%s", err.msg) : 0;
}

static int cmd_check(int argc, char **argv, const fk_params *p)
{
    fk_err err = {0};
    fk_source o;
    if (argc < 2)
        return fk_cli_fail("data", "check takes two or more FILEs (got %d)", argc), 2;
    if (read_opts(&o, p, &err))
        return fk_cli_fail("data", "%s", err.msg), 2;
    const char *unused = fk_params_unused(p);
    if (unused)
        return fk_cli_fail("data", "unknown option --%s; see fedkern data --help", unused), 2;
    fk_dataset *ds = calloc((size_t)argc, sizeof *ds);
    fk_dataset **all = calloc((size_t)argc, sizeof *all);
    int rc = ds && all ? FK_OK : fk_err_set(&err, FK_ENOMEM, "out of memory");
    int loaded = 0, labelled = 0;
    for (; !rc && loaded < argc; loaded++) {
        rc = fk_source_load(&ds[loaded], argv[loaded], &o, NULL, &err);
        if (rc)
            break;
        all[loaded] = &ds[loaded];
        labelled += ds[loaded].y_raw != NULL;
        if (loaded > 0)
            rc = fk_dataset_check_dims(&ds[0], &ds[loaded], &err);
    }
    if (!rc && labelled == argc)
        rc = fk_dataset_align_labels(all, argc, &err);
    if (!rc)
        printf("domains=%d cols=%zu classes=%d\n", argc, ds[0].X.cols, labelled == argc ? ds[0].n_classes : 0);
    for (int i = 0; ds && i < loaded; i++)
        fk_dataset_close(&ds[i]);
    free(ds);
    free(all);
    return rc ? fk_cli_fail("data", "%s", err.msg) : 0;
}

static int cmd_catalog(int argc, char **argv, const fk_params *p)
{
    const char *dir = fk_params_str(p, "data_dir", "../shared/data");
    const char *unused = fk_params_unused(p);
    if (unused)
        return fk_cli_fail("data", "unknown option --%s; see fedkern data --help", unused), 2;
    if (argc == 0) {
        for (const char *const *n = fk_catalog_names(); *n; n++)
            printf("%s\n", *n);
        return 0;
    }
    if (argc != 1)
        return fk_cli_fail("data", "catalog takes at most one NAME"), 2;
    fk_err err = {0};
    fk_dataset ds;
    if (fk_catalog_load(&ds, dir, argv[0], &err))
        return fk_cli_fail("data", "%s", err.msg);
    print_info(&ds);
    fk_dataset_close(&ds);
    return 0;
}

int fk_cmd_data(int argc, char **argv)
{
    if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        usage(argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    const char *sub = argv[0];
    argc--;
    argv++;
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    bind_flags(argc, argv);
    fk_params p;
    fk_err err = {0};
    fk_params_init(&p);
    int rc;
    if (fk_params_parse_args(&p, &argc, argv, &err))
        rc = fk_cli_fail("data", "%s", err.msg) + 1;
    else if (!strcmp(sub, "info"))
        rc = cmd_info(argc, argv, &p);
    else if (!strcmp(sub, "check"))
        rc = cmd_check(argc, argv, &p);
    else if (!strcmp(sub, "split"))
        rc = cmd_split(argc, argv, &p);
    else if (!strcmp(sub, "catalog"))
        rc = cmd_catalog(argc, argv, &p);
    else
        rc = fk_cli_fail("data", "unknown subcommand '%s'; use info, check, split or catalog", sub) + 1;
    fk_params_close(&p);
    return rc;
}
