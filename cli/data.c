/* fedkern data: inspect data files and the benchmark catalog. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/base/params.h"
#include "common/data/catalog.h"
#include "common/data/load.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: fedkern data info FILE [options]\n"
            "       fedkern data check FILE FILE... [options]\n"
            "       fedkern data catalog [NAME] [--data-dir DIR]\n"
            "\n"
            "info prints one line: rows=R cols=C classes=K mean=M (K distinct labels, 0 if\n"
            "unlabelled; M the mean of all feature values). catalog lists the benchmark data\n"
            "sets, or prints the same line for one of them after its standard preprocessing.\n"
            "check loads several domains with the same options, verifies they share the feature\n"
            "dimension, aligns their labels by raw value and prints domains=N cols=C classes=K.\n"
            "\n"
            "options of info:\n"
            "  --format F              csv|libsvm|idx|mat|npy (default: from the extension)\n"
            "  --label first|last|none CSV label column (default first); none = unlabelled\n"
            "  --header                CSV: skip the first line\n"
            "  --delim C               CSV: cell separator (default ,)\n"
            "  --var NAME              MAT: feature variable (default: the largest numeric one)\n"
            "  --label-var NAME        MAT: label variable (default: labels/label/Y/y/gnd if present)\n"
            "  --samples-in-columns    MAT, NPY: the array is features x samples\n"
            "  --labels FILE           IDX, NPY: separate label file\n"
            "  --cols N                LIBSVM: number of features (default: largest index)\n");
}

/* Bare boolean flags may precede FILE: turn "--flag" into "--flag=1" so FILE is not
 * taken as the flag's value. */
static void bind_flags(int argc, char **argv)
{
    static char header[] = "--header=1", sic[] = "--samples-in-columns=1";
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--header"))
            argv[i] = header;
        else if (!strcmp(argv[i], "--samples-in-columns"))
            argv[i] = sic;
    }
}

static int read_opts(fk_load_opts *o, const fk_params *p, fk_err *err)
{
    *o = (fk_load_opts){0};
    const char *f = fk_params_get(p, "format");
    if (f && (o->format = fk_format_parse(f)) == FK_FORMAT_AUTO)
        return fk_err_set(err, FK_EINVAL, "--format '%s': use csv, libsvm, idx, mat or npy", f);
    const char *l = fk_params_get(p, "label");
    if (l) {
        if (!strcmp(l, "first"))
            o->label = FK_LABEL_FIRST;
        else if (!strcmp(l, "last"))
            o->label = FK_LABEL_LAST;
        else if (!strcmp(l, "none"))
            o->label = FK_LABEL_NONE;
        else
            return fk_err_set(err, FK_EINVAL, "--label '%s': use first, last or none", l);
    }
    const char *d = fk_params_get(p, "delim");
    if (d && strlen(d) != 1)
        return fk_err_set(err, FK_EINVAL, "--delim '%s': give one character", d);
    o->delim = d ? d[0] : 0;
    o->var = fk_params_get(p, "var");
    o->label_var = fk_params_get(p, "label-var");
    o->label_path = fk_params_get(p, "labels");
    long cols = 0;
    int rc = fk_params_bool(p, "header", 0, &o->header, err);
    if (!rc)
        rc = fk_params_bool(p, "samples-in-columns", 0, &o->samples_in_columns, err);
    if (!rc)
        rc = fk_params_int(p, "cols", 0, 0, 1L << 30, &cols, err);
    o->cols = (size_t)cols;
    return rc;
}

int fk_cli_load_opts(fk_load_opts *o, const fk_params *p, fk_err *err)
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

static int cmd_info(int argc, char **argv, const fk_params *p)
{
    fk_err err = {0};
    fk_load_opts o;
    if (argc != 1)
        return fk_cli_fail("data", "info takes exactly one FILE (got %d); see fedkern data --help", argc),
               2;
    if (read_opts(&o, p, &err))
        return fk_cli_fail("data", "%s", err.msg), 2;
    const char *unused = fk_params_unused(p);
    if (unused)
        return fk_cli_fail("data", "unknown option --%s; see fedkern data --help", unused), 2;
    fk_dataset ds;
    if (fk_load(&ds, argv[0], &o, &err))
        return fk_cli_fail("data", "%s", err.msg);
    print_info(&ds);
    fk_dataset_close(&ds);
    return 0;
}

static int cmd_check(int argc, char **argv, const fk_params *p)
{
    fk_err err = {0};
    fk_load_opts o;
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
        rc = fk_load(&ds[loaded], argv[loaded], &o, &err);
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
    const char *dir = fk_params_str(p, "data-dir", "../shared/data");
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
    else if (!strcmp(sub, "catalog"))
        rc = cmd_catalog(argc, argv, &p);
    else
        rc = fk_cli_fail("data", "unknown subcommand '%s'; use info, check or catalog", sub) + 1;
    fk_params_close(&p);
    return rc;
}
