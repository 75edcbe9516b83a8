/* MATLAB v5 .mat loader through libmatio: a numeric feature variable (any class) and
 * an optional label vector; samples in rows unless samples_in_columns. libmatio is opened
 * with dlopen on the first .mat file: it pulls in HDF5, curl and GnuTLS, several MB of
 * resident memory that a daemon reading CSV or IDX data should not carry. */
#include <dlfcn.h>
#include <math.h>
#include <matio.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/load_int.h"
#include "common/data/mat_check.h"

#define MAX_VARS 256

static void silent_log(int level, char *message)
{
    (void)level;
    (void)message; /* errors are reported through fk_err, one line, by this loader */
}

/* The libmatio functions this loader calls, resolved once by dlsym. */
static struct {
    __typeof__(Mat_Open) *Open;
    __typeof__(Mat_Close) *Close;
    __typeof__(Mat_Rewind) *Rewind;
    __typeof__(Mat_VarReadNextInfo) *VarReadNextInfo;
    __typeof__(Mat_VarReadInfo) *VarReadInfo;
    __typeof__(Mat_VarRead) *VarRead;
    __typeof__(Mat_VarFree) *VarFree;
    __typeof__(Mat_SizeOfClass) *SizeOfClass;
    __typeof__(Mat_LogInitFunc) *LogInitFunc;
    char why[200]; /* empty when loaded */
} mx;

static int resolve(void *lib, void **slot, const char *name)
{
    *slot = dlsym(lib, name);
    if (!*slot)
        snprintf(mx.why, sizeof mx.why, "%s has no symbol %s", FK_MATIO_SONAME, name);
    return *slot != NULL;
}

static void load_matio(void)
{
    void *lib = dlopen(FK_MATIO_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *e = dlerror();
        snprintf(mx.why, sizeof mx.why, "%s", e ? e : FK_MATIO_SONAME ": cannot be loaded");
        return;
    }
    if (!(resolve(lib, (void **)&mx.Open, "Mat_Open") && resolve(lib, (void **)&mx.Close, "Mat_Close") &&
          resolve(lib, (void **)&mx.Rewind, "Mat_Rewind") &&
          resolve(lib, (void **)&mx.VarReadNextInfo, "Mat_VarReadNextInfo") &&
          resolve(lib, (void **)&mx.VarReadInfo, "Mat_VarReadInfo") &&
          resolve(lib, (void **)&mx.VarRead, "Mat_VarRead") &&
          resolve(lib, (void **)&mx.VarFree, "Mat_VarFree") &&
          resolve(lib, (void **)&mx.SizeOfClass, "Mat_SizeOfClass") &&
          resolve(lib, (void **)&mx.LogInitFunc, "Mat_LogInitFunc")))
        return;
    mx.LogInitFunc("fedkern", silent_log);
}

static int is_numeric(const matvar_t *v)
{
    return v->class_type >= MAT_C_DOUBLE && v->class_type <= MAT_C_UINT64 && !v->isComplex;
}

/* Element count of v, or 0 on overflow or rank < 1. */
static size_t numel(const matvar_t *v)
{
    if (v->rank < 1 || !v->dims)
        return 0;
    size_t n = 1;
    for (int i = 0; i < v->rank; i++) {
        if (v->dims[i] && n > SIZE_MAX / 16 / v->dims[i])
            return 0;
        n *= v->dims[i];
    }
    return n;
}

static double element(const void *data, enum matio_classes c, size_t k)
{
    switch (c) {
    case MAT_C_DOUBLE: return ((const double *)data)[k];
    case MAT_C_SINGLE: return ((const float *)data)[k];
    case MAT_C_INT8: return ((const int8_t *)data)[k];
    case MAT_C_UINT8: return ((const uint8_t *)data)[k];
    case MAT_C_INT16: return ((const int16_t *)data)[k];
    case MAT_C_UINT16: return ((const uint16_t *)data)[k];
    case MAT_C_INT32: return ((const int32_t *)data)[k];
    case MAT_C_UINT32: return ((const uint32_t *)data)[k];
    case MAT_C_INT64: return (double)((const int64_t *)data)[k];
    case MAT_C_UINT64: return (double)((const uint64_t *)data)[k];
    default: return NAN;
    }
}

typedef struct var_list {
    char *name[MAX_VARS];
    size_t numel[MAX_VARS];
    int numeric[MAX_VARS];
    int count;
} var_list;

static void var_list_free(var_list *l)
{
    for (int i = 0; i < l->count; i++)
        free(l->name[i]);
    l->count = 0;
}

static int list_vars(mat_t *mat, var_list *l)
{
    matvar_t *v;
    l->count = 0;
    mx.Rewind(mat);
    while (l->count < MAX_VARS && (v = mx.VarReadNextInfo(mat))) {
        if (v->name && (l->name[l->count] = strdup(v->name))) {
            l->numel[l->count] = numel(v);
            l->numeric[l->count] = is_numeric(v);
            l->count++;
        }
        mx.VarFree(v);
    }
    return FK_OK;
}

static int find_var(const var_list *l, const char *name)
{
    for (int i = 0; i < l->count; i++)
        if (!strcmp(l->name[i], name))
            return i;
    return -1;
}

static void names_text(const var_list *l, char *out, size_t cap)
{
    out[0] = '\0';
    for (int i = 0; i < l->count && strlen(out) + 2 < cap; i++)
        snprintf(out + strlen(out), cap - strlen(out), "%s%s", i ? ", " : "", l->name[i]);
    if (l->count == 0)
        snprintf(out, cap, "none");
}

/* Feature variable: the one asked for, else the numeric variable with most elements. */
static const char *pick_features(const var_list *l, const char *want)
{
    if (want)
        return find_var(l, want) >= 0 ? want : NULL;
    int best = -1;
    for (int i = 0; i < l->count; i++)
        if (l->numeric[i] && (best < 0 || l->numel[i] > l->numel[best]))
            best = i;
    return best >= 0 ? l->name[best] : NULL;
}

/* Label variable by convention: X_src -> Y_src, else labels/label/Y/y/gnd with n values. */
static const char *pick_labels(const var_list *l, const char *fvar, size_t n)
{
    char paired[256];
    const char *cands[7] = {NULL, "labels", "label", "Y", "y", "gnd", NULL};
    if (fvar[0] == 'X' && fvar[1] == '_' && strlen(fvar) < sizeof paired) {
        snprintf(paired, sizeof paired, "Y%s", fvar + 1);
        cands[0] = paired;
    }
    for (int c = 0; c < 6; c++) {
        int i = cands[c] ? find_var(l, cands[c]) : -1;
        if (i >= 0 && l->numeric[i] && l->numel[i] == n)
            return l->name[i];
    }
    return NULL;
}

FK_CHECKRETURN static int read_numeric(mat_t *mat, const char *path, const char *name, size_t max_values, matvar_t **out,
                        fk_err *err)
{
    *out = NULL;
    matvar_t *info = mx.VarReadInfo(mat, name);
    if (!info)
        return fk_err_set(err, FK_EFORMAT, "%s: variable '%s': unreadable header", path, name);
    int ok = is_numeric(info), sparse = info->class_type == MAT_C_SPARSE;
    size_t n = numel(info);
    mx.VarFree(info);
    if (!ok)
        return fk_err_set(err, FK_EFORMAT, "%s: variable '%s' is %s, not a real numeric array", path, name,
                          sparse ? "sparse" : "not numeric (or complex)");
    if (n == 0)
        return fk_err_set(err, FK_EFORMAT, "%s: variable '%s' is empty", path, name);
    if (n > max_values)
        return fk_err_set(err, FK_ELIMIT, "%s: variable '%s' has %zu values, over the limit %zu", path,
                          name, n, max_values);
    matvar_t *v = mx.VarRead(mat, name);
    if (!v || !v->data || numel(v) != n || !is_numeric(v) || v->data_size <= 0 ||
        (size_t)v->data_size != mx.SizeOfClass(v->class_type) || v->nbytes < n * (size_t)v->data_size) {
        mx.VarFree(v);
        return fk_err_set(err, FK_EFORMAT, "%s: variable '%s': data unreadable (corrupt or truncated file)",
                          path, name);
    }
    *out = v;
    return FK_OK;
}

FK_CHECKRETURN static int fill(fk_dataset *ds, const char *path, const matvar_t *x, const matvar_t *lab, int transpose,
                fk_err *err)
{
    size_t r = x->dims[0], total = numel(x), c = total / r;
    if (transpose && x->rank > 2)
        return fk_err_set(err, FK_EINVAL, "%s: variable '%s' has %d dimensions; samples_in_columns needs 2",
                          path, x->name, x->rank);
    size_t n = transpose ? c : r, d = transpose ? r : c;
    if (lab && numel(lab) != n)
        return fk_err_set(err, FK_EINVAL,
                          "%s: label variable '%s' has %zu values but '%s' has %zu samples%s", path,
                          lab->name, numel(lab), x->name, n,
                          numel(lab) == (transpose ? r : c) ? "; try --samples_in_columns" : "");
    if (fk_dataset_init(ds, n, d, 0))
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory for %zu x %zu values", path, n, d);
    /* MAT data is column-major: element k is (k % r, k / r) of the stored r x c array */
    for (size_t k = 0; k < total; k++) {
        double v = element(x->data, x->class_type, k);
        if (!isfinite(v))
            return fk_err_set(err, FK_EFORMAT, "%s: variable '%s' element (%zu,%zu) is NaN or Inf", path,
                              x->name, k % r + 1, k / r + 1);
        size_t i = k % r, j = k / r;
        if (transpose)
            fk_mat_set(&ds->X, j, i, v);
        else
            fk_mat_set(&ds->X, i, j, v);
    }
    if (!lab)
        return FK_OK;
    double *y = malloc(n * sizeof *y);
    if (!y)
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory", path);
    for (size_t k = 0; k < n; k++)
        y[k] = element(lab->data, lab->class_type, k);
    int rc = fk_dataset_set_labels(ds, y, err);
    free(y);
    return rc ? fk_err_prefix(err, rc, "%s: label variable '%s': ", path, lab->name) : FK_OK;
}

int fk__load_mat(fk_dataset *ds, const char *path, const fk_load_opts *o, fk_err *err)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, load_matio);
    if (mx.why[0])
        return fk_err_set(err, FK_EINVAL, "%s: reading MATLAB files needs libmatio (%s); install the Debian "
                          "package that provides %s (apt-get install libmatio11)", path, mx.why,
                          FK_MATIO_SONAME);
    size_t mv = fk__load_max_values(o);
    int rc = fk_mat_check_file(path, mv > SIZE_MAX / 16 ? SIZE_MAX / 2 : mv * 8 + (1u << 20), err);
    if (rc)
        return rc;
    mat_t *mat = mx.Open(path, MAT_ACC_RDONLY);
    if (!mat)
        return fk_err_set(err, FK_EFORMAT, "%s: libmatio cannot open it as a MATLAB file", path);
    var_list vars = {0};
    list_vars(mat, &vars);
    char names[256];
    names_text(&vars, names, sizeof names);
    matvar_t *x = NULL, *lab = NULL;
    const char *fvar = pick_features(&vars, o->var);
    if (!fvar)
        rc = o->var ? fk_err_set(err, FK_ENOTFOUND, "%s: no variable '%s' (variables: %s); pass --var NAME",
                                 path, o->var, names)
                    : fk_err_set(err, FK_EFORMAT, "%s: no numeric variable (variables: %s)", path, names);
    if (!rc)
        rc = read_numeric(mat, path, fvar, fk__load_max_values(o), &x, err);
    const char *lvar = NULL;
    if (!rc && o->label != FK_LABEL_NONE) {
        size_t r = x->dims[0], n = o->samples_in_columns ? numel(x) / r : r;
        lvar = o->label_var;
        if (lvar && find_var(&vars, lvar) < 0)
            rc = fk_err_set(err, FK_ENOTFOUND, "%s: no label variable '%s' (variables: %s)", path, lvar,
                            names);
        else if (!lvar)
            lvar = pick_labels(&vars, fvar, n);
    }
    if (!rc && lvar)
        rc = read_numeric(mat, path, lvar, fk__load_max_values(o), &lab, err);
    if (!rc) {
        rc = fill(ds, path, x, lab, o->samples_in_columns, err);
        const char *b = strrchr(path, '/');
        fk_dataset_set_name(ds, b ? b + 1 : path);
    }
    if (rc)
        fk_dataset_close(ds);
    mx.VarFree(x);
    mx.VarFree(lab);
    var_list_free(&vars);
    mx.Close(mat);
    return rc;
}
