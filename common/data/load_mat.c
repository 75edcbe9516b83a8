/* MATLAB v5 .mat loader through libmatio: a numeric feature variable (any class) and
 * an optional label vector; samples in rows unless samples_in_columns. */
#include <math.h>
#include <matio.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/data/load_int.h"

#define MAX_VARS 256

static void silent_log(int level, char *message)
{
    (void)level;
    (void)message; /* errors are reported through fk_err, one line, by this loader */
}

static void init_matio_log(void)
{
    Mat_LogInitFunc("fedkern", silent_log);
}

static uint32_t u32(const unsigned char *p, int big)
{
    return big ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
               : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* Inflate n compressed bytes of f into nowhere: libmatio zero-fills what it cannot
 * decompress, so a corrupt or cut stream must be caught here. */
static int check_inflate(FILE *f, const char *path, long at, uint32_t n, size_t max_out, fk_err *err)
{
    z_stream z = {0};
    if (inflateInit(&z) != Z_OK)
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory", path);
    unsigned char in[16384], out[65536];
    size_t left = n, produced = 0;
    int zr = Z_OK;
    while (zr != Z_STREAM_END) {
        if (z.avail_in == 0) {
            size_t k = left < sizeof in ? left : sizeof in;
            if (k == 0 || fread(in, 1, k, f) != k)
                break;
            left -= k;
            z.next_in = in;
            z.avail_in = (uInt)k;
        }
        z.next_out = out;
        z.avail_out = sizeof out;
        zr = inflate(&z, Z_NO_FLUSH);
        produced += sizeof out - z.avail_out;
        if ((zr != Z_OK && zr != Z_STREAM_END) || produced > max_out)
            break;
    }
    size_t pos = (size_t)z.total_in;
    inflateEnd(&z);
    if (zr == Z_STREAM_END)
        return FK_OK;
    if (produced > max_out)
        return fk_err_set(err, FK_ELIMIT, "%s: byte %ld: compressed variable inflates beyond the limit", path, at);
    return fk_err_set(err, FK_EFORMAT, "%s: byte %zu: corrupt or truncated compressed variable", path,
                      (size_t)at + 8 + pos);
}

/* v5 header (116 bytes text, 8 subsystem offset, version 0x0100, endian "IM"/"MI"), then
 * top-level elements (tag: type, byte count) that must lie inside the file. */
static int check_file(const char *path, size_t max_values, fk_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return fk_err_set(err, FK_EIO, "%s: cannot open", path);
    unsigned char h[128];
    size_t got = fread(h, 1, sizeof h, f);
    int rc = FK_OK, big = 0;
    if (got < sizeof h)
        rc = fk_err_set(err, FK_EFORMAT, "%s: byte %zu: file too short for a MATLAB v5 header (128 bytes)",
                        path, got);
    else if (!((h[126] == 'I' && h[127] == 'M') || (big = h[126] == 'M' && h[127] == 'I')))
        rc = fk_err_set(err, FK_EFORMAT, "%s: byte 126: wrong magic, not a MATLAB v5 file (no IM/MI mark)",
                        path);
    unsigned ver = big ? (unsigned)(h[124] << 8 | h[125]) : (unsigned)(h[124] | h[125] << 8);
    if (!rc && ver == 0x0200)
        rc = fk_err_set(err, FK_EFORMAT,
                        "%s: MATLAB v7.3 (HDF5) file; re-save it with save(..., '-v7') to load it", path);
    else if (!rc && ver != 0x0100)
        rc = fk_err_set(err, FK_EFORMAT, "%s: byte 124: unknown MAT version 0x%04x", path, ver);
    fseek(f, 0, SEEK_END);
    long size = ftell(f), at = 128;
    size_t max_out = max_values * 8 + (1u << 20);
    while (!rc && at < size) {
        unsigned char tag[8];
        if (fseek(f, at, SEEK_SET) != 0 || fread(tag, 1, 8, f) != 8) {
            rc = fk_err_set(err, FK_EFORMAT, "%s: byte %ld: truncated variable tag", path, at);
            break;
        }
        uint32_t type = u32(tag, big), n = u32(tag + 4, big);
        long end = at + 8 + (long)n;
        if (type == 14) /* miMATRIX is padded to 8 bytes */
            end = at + 8 + ((long)n + 7) / 8 * 8;
        if (type != 14 && type != 15)
            rc = fk_err_set(err, FK_EFORMAT, "%s: byte %ld: element type %u is not a variable", path, at,
                            type);
        else if (at + 8 + (long)n > size)
            rc = fk_err_set(err, FK_EFORMAT,
                            "%s: byte %ld: truncated: variable needs %u bytes, the file ends %ld bytes later",
                            path, at, n, size - at - 8);
        else if (type == 15)
            rc = check_inflate(f, path, at, n, max_out, err);
        at = end;
    }
    fclose(f);
    return rc;
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
    Mat_Rewind(mat);
    while (l->count < MAX_VARS && (v = Mat_VarReadNextInfo(mat))) {
        if (v->name && (l->name[l->count] = strdup(v->name))) {
            l->numel[l->count] = numel(v);
            l->numeric[l->count] = is_numeric(v);
            l->count++;
        }
        Mat_VarFree(v);
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

static int read_numeric(mat_t *mat, const char *path, const char *name, size_t max_values, matvar_t **out,
                        fk_err *err)
{
    *out = NULL;
    matvar_t *info = Mat_VarReadInfo(mat, name);
    if (!info)
        return fk_err_set(err, FK_EFORMAT, "%s: variable '%s': unreadable header", path, name);
    int ok = is_numeric(info), sparse = info->class_type == MAT_C_SPARSE;
    size_t n = numel(info);
    Mat_VarFree(info);
    if (!ok)
        return fk_err_set(err, FK_EFORMAT, "%s: variable '%s' is %s, not a real numeric array", path, name,
                          sparse ? "sparse" : "not numeric (or complex)");
    if (n == 0)
        return fk_err_set(err, FK_EFORMAT, "%s: variable '%s' is empty", path, name);
    if (n > max_values)
        return fk_err_set(err, FK_ELIMIT, "%s: variable '%s' has %zu values, over the limit %zu", path,
                          name, n, max_values);
    matvar_t *v = Mat_VarRead(mat, name);
    if (!v || !v->data || numel(v) != n || !is_numeric(v) || v->data_size <= 0 ||
        (size_t)v->data_size != Mat_SizeOfClass(v->class_type) || v->nbytes < n * (size_t)v->data_size) {
        Mat_VarFree(v);
        return fk_err_set(err, FK_EFORMAT, "%s: variable '%s': data unreadable (corrupt or truncated file)",
                          path, name);
    }
    *out = v;
    return FK_OK;
}

static int fill(fk_dataset *ds, const char *path, const matvar_t *x, const matvar_t *lab, int transpose,
                fk_err *err)
{
    size_t r = x->dims[0], total = numel(x), c = total / r;
    if (transpose && x->rank > 2)
        return fk_err_set(err, FK_EINVAL, "%s: variable '%s' has %d dimensions; samples-in-columns needs 2",
                          path, x->name, x->rank);
    size_t n = transpose ? c : r, d = transpose ? r : c;
    if (lab && numel(lab) != n)
        return fk_err_set(err, FK_EINVAL,
                          "%s: label variable '%s' has %zu values but '%s' has %zu samples%s", path,
                          lab->name, numel(lab), x->name, n,
                          numel(lab) == (transpose ? r : c) ? "; try --samples-in-columns" : "");
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
    return rc ? fk_err_prefix(err, "%s: label variable '%s': ", path, lab->name) : FK_OK;
}

int fk_load_mat(fk_dataset *ds, const char *path, const fk_load_opts *o, fk_err *err)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_matio_log);
    int rc = check_file(path, fk_load_max_values(o), err);
    if (rc)
        return rc;
    mat_t *mat = Mat_Open(path, MAT_ACC_RDONLY);
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
        rc = read_numeric(mat, path, fvar, fk_load_max_values(o), &x, err);
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
        rc = read_numeric(mat, path, lvar, fk_load_max_values(o), &lab, err);
    if (!rc) {
        rc = fill(ds, path, x, lab, o->samples_in_columns, err);
        const char *b = strrchr(path, '/');
        fk_dataset_set_name(ds, b ? b + 1 : path);
    }
    if (rc)
        fk_dataset_close(ds);
    Mat_VarFree(x);
    Mat_VarFree(lab);
    var_list_free(&vars);
    Mat_Close(mat);
    return rc;
}
