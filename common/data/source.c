/* fk_source: loader options and preprocessing read from parameters, and the load. */
#include "common/data/source.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/data/catalog.h"
#include "common/data/prep.h"
#include "common/data/synth_spec.h"

const fk_param_doc fk_source_docs[] = {
    {"format F", "csv|libsvm|idx|mat|npy (default: from the file name)"},
    {"label first|last|N|none", "CSV label column: first (default), last, column N (1-based) "
                                "or none (unlabelled)"},
    {"header", "CSV: the first line is a header (skipped)"},
    {"delim C", "CSV: cell separator, one character (default ,), or tab, semicolon or space "
                "(';' starts a comment in a config file)"},
    {"var NAME", "MAT: feature variable (default: the largest numeric one)"},
    {"label_var NAME", "MAT: label variable (default: labels/label/Y/y/gnd if present)"},
    {"samples_in_columns", "MAT, NPY: the array is features x samples"},
    {"labels FILE", "IDX, NPY: separate label file"},
    {"cols N", "LIBSVM: number of features (default: the largest index)"},
    {"prep STEPS", "preprocessing, comma-separated, in order: l1 (rows / row sum), l2 "
                   "(rows / norm), zscore (columns to mean 0, std 1)"},
    {"affine FILE", "apply a saved per-column map (fedkern data info --save_affine) after prep"},
    {NULL, NULL},
};

static const char *const keys[] = {"format", "label", "header", "delim", "var", "label_var",
                                   "samples_in_columns", "labels", "cols", "prep", "affine"};
enum { N_KEYS = sizeof keys / sizeof keys[0] };

int fk_source_is_option(const char *key)
{
    for (int i = 0; i < N_KEYS; i++) { /* '-' and '_' are one character, as in fk_params */
        size_t j = 0;
        while (keys[i][j] && (keys[i][j] == key[j] || (keys[i][j] == '_' && key[j] == '-')))
            j++;
        if (!keys[i][j] && !key[j])
            return 1;
    }
    return 0;
}

static const char *get(const fk_params *p, const char *prefix, const char *key, char *full,
                       size_t cap)
{
    snprintf(full, cap, "%s%s", prefix, key);
    return fk_params_get(p, full);
}

/* How a message shows the option: "--label " for a flag, "data.x.label = " in a config. */
static const char *shown(const char *prefix, const char *key, char *buf, size_t cap)
{
    snprintf(buf, cap, *prefix ? "%s%s = " : "--%s%s ", prefix, key);
    return buf;
}

FK_CHECKRETURN static int parse_label(fk_source *s, const char *v, const char *key, fk_err *err)
{
    if (!strcmp(v, "first"))
        s->load.label = FK_LABEL_FIRST;
    else if (!strcmp(v, "last"))
        s->load.label = FK_LABEL_LAST;
    else if (!strcmp(v, "none"))
        s->load.label = FK_LABEL_NONE;
    else {
        char *end;
        errno = 0;
        long n = strtol(v, &end, 10);
        if (end == v || *end || errno || n < 1 || n > (1L << 30))
            return fk_err_set(err, FK_EINVAL,
                              "%s'%s': use first, last, none or a column number (1 = first)",
                              key, v);
        s->load.label = FK_LABEL_INDEX;
        s->load.label_col = (size_t)n;
    }
    return FK_OK;
}

FK_CHECKRETURN static int parse_prep(fk_source *s, const char *v, const char *key, fk_err *err)
{
    const char *p = v;
    while (*p) {
        size_t n = strcspn(p, ",");
        fk_prep_step step = n == 2 && !strncmp(p, "l1", 2)       ? FK_PREP_STEP_L1
                            : n == 2 && !strncmp(p, "l2", 2)     ? FK_PREP_STEP_L2
                            : n == 6 && !strncmp(p, "zscore", 6) ? FK_PREP_STEP_ZSCORE
                                                                 : 0;
        if (!step)
            return fk_err_set(err, FK_EINVAL,
                              "%s'%s': unknown step '%.*s'; use l1, l2 and zscore, "
                              "comma-separated, in the order to apply them",
                              key, v, (int)n, p);
        if (s->n_prep == FK_SOURCE_MAX_PREP)
            return fk_err_set(err, FK_EINVAL, "%s'%s': at most %d steps", key, v,
                              FK_SOURCE_MAX_PREP);
        s->prep[s->n_prep++] = step;
        p += n;
        if (*p == ',')
            p++;
    }
    return FK_OK;
}

int fk_source_parse(fk_source *s, const fk_params *p, const char *prefix, fk_err *err)
{
    memset(s, 0, sizeof *s);
    char k[256];
    const char *v;
    int rc = FK_OK;
    for (int i = 0; i < N_KEYS; i++) /* loader options, not prep/affine */
        if (strcmp(keys[i], "prep") && strcmp(keys[i], "affine") &&
            get(p, prefix, keys[i], k, sizeof k))
            s->loader_set = 1;
    char sh[300];
    if ((v = get(p, prefix, "format", k, sizeof k)) &&
        (s->load.format = fk_format_parse(v)) == FK_FORMAT_AUTO)
        return fk_err_set(err, FK_EINVAL, "%s'%s': use csv, libsvm, idx, mat or npy",
                          shown(prefix, "format", sh, sizeof sh), v);
    if ((v = get(p, prefix, "label", k, sizeof k)) &&
        (rc = parse_label(s, v, shown(prefix, "label", sh, sizeof sh), err)))
        return rc;
    if ((v = get(p, prefix, "delim", k, sizeof k))) {
        if (!strcmp(v, "tab") || !strcmp(v, "\\t"))
            s->load.delim = '\t';
        else if (!strcmp(v, "semicolon")) /* ';' starts a comment in a config file */
            s->load.delim = ';';
        else if (!strcmp(v, "space"))
            s->load.delim = ' ';
        else if (strlen(v) == 1 && v[0] != '\n' && v[0] != '.' && v[0] != '-')
            s->load.delim = v[0];
        else
            return fk_err_set(err, FK_EINVAL,
                              "%s'%s': give one character (not . or -, which are part of "
                              "numbers), or tab, semicolon or space",
                              shown(prefix, "delim", sh, sizeof sh), v);
    }
    s->load.var = get(p, prefix, "var", k, sizeof k);
    s->load.label_var = get(p, prefix, "label_var", k, sizeof k);
    s->load.label_path = get(p, prefix, "labels", k, sizeof k);
    s->affine = get(p, prefix, "affine", k, sizeof k);
    long cols = 0;
    get(p, prefix, "header", k, sizeof k);
    rc = fk_params_bool(p, k, 0, &s->load.header, err);
    if (!rc) {
        get(p, prefix, "samples_in_columns", k, sizeof k);
        rc = fk_params_bool(p, k, 0, &s->load.samples_in_columns, err);
    }
    if (!rc) {
        get(p, prefix, "cols", k, sizeof k);
        rc = fk_params_int(p, k, 0, 0, 1L << 30, &cols, err);
    }
    s->load.cols = (size_t)cols;
    if (!rc && (v = get(p, prefix, "prep", k, sizeof k)))
        rc = parse_prep(s, v, shown(prefix, "prep", sh, sizeof sh), err);
    return rc;
}

void fk_affine_close(fk_affine *a)
{
    free(a->shift);
    free(a->scale);
    *a = (fk_affine){0};
}

int fk_affine_load(fk_affine *a, const char *path, fk_err *err)
{
    *a = (fk_affine){0};
    fk_load_opts o = {.format = FK_FORMAT_CSV, .label = FK_LABEL_NONE, .max_values = 1u << 26};
    fk_dataset ds;
    int rc = fk_load(&ds, path, &o, err);
    if (rc)
        return fk_err_prefix(err, rc, "affine map: ");
    if (ds.X.rows != 2) {
        rc = fk_err_set(err, FK_EFORMAT,
                        "%s: an affine map has 2 rows (shift, then scale), this file has %zu; "
                        "write it with fedkern data info --save_affine",
                        path, ds.X.rows);
    } else {
        a->d = ds.X.cols;
        a->shift = malloc(a->d * sizeof *a->shift);
        a->scale = malloc(a->d * sizeof *a->scale);
        if (!a->shift || !a->scale)
            rc = fk_err_set(err, FK_ENOMEM, "%s: out of memory", path);
        else {
            memcpy(a->shift, fk_mat_row(&ds.X, 0), a->d * sizeof *a->shift);
            memcpy(a->scale, fk_mat_row(&ds.X, 1), a->d * sizeof *a->scale);
        }
    }
    fk_dataset_close(&ds);
    if (rc)
        fk_affine_close(a);
    return rc;
}

int fk_affine_save(const fk_affine *a, const char *path, fk_err *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return fk_err_set(err, FK_EIO, "%s: cannot write: %s", path, strerror(errno));
    for (int row = 0; row < 2; row++)
        for (size_t j = 0; j < a->d; j++)
            fprintf(f, "%.17g%c", (row ? a->scale : a->shift)[j], j + 1 < a->d ? ',' : '\n');
    int bad = ferror(f);
    if (fclose(f) || bad)
        return fk_err_set(err, FK_EIO, "%s: write failed: %s", path, strerror(errno));
    return FK_OK;
}

static int is_catalog_name(const char *src)
{
    for (const char *const *n = fk_catalog_names(); *n; n++)
        if (!strcmp(*n, src))
            return 1;
    return 0;
}

/* The prep steps, then the saved map; zmap gets the last zscore's map. */
static int preprocess(fk_dataset *ds, const char *src, const fk_source *s, fk_affine *zmap,
                      fk_err *err)
{
    size_t d = ds->X.cols;
    for (int i = 0; i < s->n_prep; i++) {
        int rc = FK_OK;
        switch (s->prep[i]) {
        case FK_PREP_STEP_L1: rc = fk_prep_l1_rows(&ds->X); break;
        case FK_PREP_STEP_L2: fk_prep_l2_rows(&ds->X); break;
        case FK_PREP_STEP_DIV255: fk_prep_affine_div(&ds->X, 255.0); break;
        case FK_PREP_STEP_ZSCORE:
            if (zmap) {
                fk_affine_close(zmap);
                zmap->shift = malloc(d * sizeof *zmap->shift);
                zmap->scale = malloc(d * sizeof *zmap->scale);
                if (!zmap->shift || !zmap->scale) {
                    fk_affine_close(zmap);
                    rc = FK_ENOMEM;
                    break;
                }
                zmap->d = d;
            }
            rc = fk_prep_zscore_cols_map(&ds->X, zmap ? zmap->shift : NULL,
                                         zmap ? zmap->scale : NULL);
            break;
        }
        if (rc)
            return fk_err_set(err, FK_ENOMEM, "%s: out of memory in preprocessing", src);
    }
    if (!s->affine)
        return FK_OK;
    fk_affine a;
    int rc = fk_affine_load(&a, s->affine, err);
    if (rc)
        return rc;
    if (a.d != d)
        rc = fk_err_set(err, FK_EINVAL,
                        "%s: the affine map %s has %zu columns, the data %zu; it was saved from "
                        "other data",
                        src, s->affine, a.d, d);
    else
        fk_prep_affine_cols(&ds->X, a.shift, a.scale);
    fk_affine_close(&a);
    return rc;
}

/* Bad values after preprocessing (an affine map with Inf, say): one message naming the first. */
FK_CHECKRETURN static int check_finite(const fk_dataset *ds, const char *src, fk_err *err)
{
    for (size_t i = 0; i < ds->X.rows; i++) {
        const double *r = fk_mat_row(&ds->X, i);
        for (size_t j = 0; j < ds->X.cols; j++)
            if (!isfinite(r[j]))
                return fk_err_set(err, FK_EFORMAT,
                                  "%s: row %zu, column %zu is %s after loading and "
                                  "preprocessing; check the file and the prep/affine options",
                                  src, i + 1, j + 1, isnan(r[j]) ? "NaN" : "infinite");
    }
    for (size_t i = 0; ds->y_raw && i < ds->X.rows; i++)
        if (!isfinite(ds->y_raw[i]))
            return fk_err_set(err, FK_EFORMAT, "%s: row %zu: the label is not finite", src, i + 1);
    return FK_OK;
}

int fk_source_steps(const char *src, const fk_source *s, int *codes, int cap)
{
    int n = src && is_catalog_name(src) ? fk_catalog_steps(src, codes, cap) : 0;
    if (n < 0)
        n = 0;
    for (int i = 0; s && i < s->n_prep && n < cap; i++)
        codes[n++] = (int)s->prep[i];
    return n;
}

int fk_source_load(fk_dataset *ds, const char *src, const fk_source *s, fk_affine *zmap,
                   fk_err *err)
{
    static const fk_source defaults = {0};
    if (!s)
        s = &defaults;
    if (zmap)
        *zmap = (fk_affine){0};
    memset(ds, 0, sizeof *ds);
    int catalog = is_catalog_name(src), synth = !catalog && fk_synth_spec_is(src);
    if ((catalog || synth) && s->loader_set)
        return fk_err_set(err, FK_EINVAL,
                          "%s is a %s data set with its own loader settings; loader options "
                          "(format, label, header, ...) apply to files only (prep and affine "
                          "are allowed)",
                          src, catalog ? "catalog" : "built-in synthetic");
    int rc = catalog ? fk_catalog_load(ds, s->data_dir ? s->data_dir : "../shared/data", src, err)
             : synth ? fk_synth_spec_load(ds, src, err)
                     : fk_load(ds, src, &s->load, err);
    if (rc)
        return rc;
    rc = preprocess(ds, src, s, zmap, err);
    if (!rc)
        rc = check_finite(ds, src, err);
    if (rc) {
        fk_dataset_close(ds);
        if (zmap)
            fk_affine_close(zmap);
    }
    return rc;
}

int fk_source_name_only(fk_dataset *ds, const char *src, const fk_source *s, fk_err *err)
{
    memset(ds, 0, sizeof *ds);
    int catalog = is_catalog_name(src), synth = !catalog && fk_synth_spec_is(src);
    if ((catalog || synth) && s && s->loader_set)
        return fk_err_set(err, FK_EINVAL,
                          "%s is a %s data set with its own loader settings; loader options "
                          "(format, label, header, ...) apply to files only (prep and affine "
                          "are allowed)",
                          src, catalog ? "catalog" : "built-in synthetic");
    if (synth)
        return fk_synth_spec_name(ds, src, err);
    if (catalog) { /* fk_catalog_load names it by its catalog name */
        fk_dataset_set_name(ds, src);
        return FK_OK;
    }
    struct stat st;
    if (stat(src, &st) != 0 || !S_ISREG(st.st_mode))
        return fk_err_set(err, FK_EIO, "%s: not a readable file (%s)", src, strerror(errno));
    const char *base = strrchr(src, '/'); /* the loader's name: the file's base name */
    fk_dataset_set_name(ds, base ? base + 1 : src);
    return FK_OK;
}
