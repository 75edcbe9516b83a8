/* IDX loader (MNIST / Fashion-MNIST): big-endian header, then the array; images
 * n x h x w become n rows of h*w values, labels come from the matching idx1 file. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/data/load_int.h"

typedef struct idx_array {
    size_t n, d;   /* first dimension, product of the others */
    int type;      /* 0x08 u8, 0x09 i8, 0x0B i16, 0x0C i32, 0x0D f32, 0x0E f64 */
    size_t esize;
    size_t off;    /* uncompressed bytes consumed */
} idx_array;

static size_t type_size(int t)
{
    switch (t) {
    case 0x08: case 0x09: return 1;
    case 0x0B: return 2;
    case 0x0C: case 0x0D: return 4;
    case 0x0E: return 8;
    default: return 0;
    }
}

static uint64_t be(const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

static double decode(const unsigned char *p, int type)
{
    uint64_t u = be(p, type_size(type));
    switch (type) {
    case 0x08: return (double)(uint8_t)u;
    case 0x09: return (double)(int8_t)(uint8_t)u;
    case 0x0B: return (double)(int16_t)(uint16_t)u;
    case 0x0C: return (double)(int32_t)(uint32_t)u;
    case 0x0D: {
        uint32_t w = (uint32_t)u;
        float f;
        memcpy(&f, &w, sizeof f);
        return (double)f;
    }
    default: {
        double f;
        memcpy(&f, &u, sizeof f);
        return f;
    }
    }
}

FK_CHECKRETURN static int read_header(gzFile gz, const char *path, idx_array *a, size_t max_values, fk_err *err)
{
    unsigned char h[4], dims[4 * 255];
    *a = (idx_array){0};
    int rc = fk__gz_read_exact(gz, path, h, 4, &a->off, "the IDX magic number", err);
    if (rc)
        return rc;
    a->type = h[2];
    a->esize = type_size(h[2]);
    if (h[0] != 0 || h[1] != 0 || !a->esize || h[3] == 0)
        return fk_err_set(err, FK_EFORMAT,
                          "%s: byte 0: wrong magic %02x %02x %02x %02x, not an IDX file "
                          "(expected 00 00 TYPE NDIM)",
                          path, h[0], h[1], h[2], h[3]);
    int ndim = h[3];
    rc = fk__gz_read_exact(gz, path, dims, 4 * (size_t)ndim, &a->off, "the IDX dimensions", err);
    if (rc)
        return rc;
    a->n = (size_t)be(dims, 4);
    a->d = 1;
    for (int i = 1; i < ndim; i++) {
        size_t k = (size_t)be(dims + 4 * i, 4);
        if (k && a->d > max_values / k)
            return fk_err_set(err, FK_ELIMIT, "%s: byte %d: sample size over %zu values", path, 4 + 4 * i,
                              max_values);
        a->d *= k;
    }
    if (a->n == 0 || a->d == 0)
        return fk_err_set(err, FK_EFORMAT, "%s: byte 4: empty IDX array (a dimension is 0)", path);
    if (a->n > max_values / a->d)
        return fk_err_set(err, FK_ELIMIT, "%s: byte 4: %zu x %zu values exceed the limit %zu", path, a->n,
                          a->d, max_values);
    return FK_OK;
}

/* Read n*d elements, converted to double, into out (row-major). */
FK_CHECKRETURN static int read_body(gzFile gz, const char *path, idx_array *a, double *out, fk_err *err)
{
    size_t total = a->n * a->d, block = (1u << 16) / a->esize;
    unsigned char *buf = malloc(block * a->esize);
    if (!buf)
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory", path);
    int rc = FK_OK;
    for (size_t at = 0; at < total && !rc; at += block) {
        size_t k = total - at < block ? total - at : block;
        rc = fk__gz_read_exact(gz, path, buf, k * a->esize, &a->off, "the IDX data", err);
        for (size_t i = 0; i < k && !rc; i++) {
            out[at + i] = decode(buf + i * a->esize, a->type);
            if (!isfinite(out[at + i]))
                rc = fk_err_set(err, FK_EFORMAT, "%s: byte %zu: NaN or Inf value", path,
                                a->off - (k - i) * a->esize);
        }
    }
    free(buf);
    return rc;
}

/* Whole IDX file: the header, then alloc(ctx, n, d) gives the row-major destination. */
typedef double *(*idx_alloc)(void *ctx, size_t n, size_t d);

FK_CHECKRETURN static int read_idx(const char *path, idx_array *a, idx_alloc alloc, void *ctx, size_t max_values,
                    fk_err *err)
{
    gzFile gz;
    int rc = fk__gz_open(&gz, path, err);
    if (rc)
        return rc;
    rc = read_header(gz, path, a, max_values, err);
    if (!rc)
        rc = fk__gz_plausible(gz, path, a->off, a->n * a->d * a->esize, err);
    double *out = NULL;
    if (!rc && !(out = alloc(ctx, a->n, a->d)))
        rc = fk_err_set(err, FK_ENOMEM, "%s: out of memory for %zu x %zu values", path, a->n, a->d);
    if (!rc)
        rc = read_body(gz, path, a, out, err);
    if (!rc) {
        unsigned char extra;
        if (gzread(gz, &extra, 1) == 1)
            rc = fk_err_set(err, FK_EFORMAT, "%s: byte %zu: trailing bytes after the IDX array", path,
                            a->off);
    }
    gzclose_r(gz);
    return rc;
}

static double *alloc_dataset(void *ctx, size_t n, size_t d)
{
    fk_dataset *ds = ctx;
    return fk_dataset_init(ds, n, d, 0) ? NULL : ds->X.data;
}

static double *alloc_plain(void *ctx, size_t n, size_t d)
{
    double **p = ctx;
    *p = malloc(n * d * sizeof **p);
    return *p;
}

/* "x-images-idx3-ubyte(.gz)" -> "x-labels-idx1-ubyte(.gz)" when that file exists. */
static char *sibling_labels(const char *path)
{
    const char *at = strstr(path, "images-idx3");
    if (!at)
        return NULL;
    size_t n = strlen(path);
    char *s = malloc(n + 1);
    if (!s)
        return NULL;
    memcpy(s, path, n + 1);
    memcpy(s + (at - path), "labels-idx1", 11);
    if (access(s, R_OK) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

int fk__load_idx(fk_dataset *ds, const char *path, const fk_load_opts *o, fk_err *err)
{
    idx_array a, la;
    double *y = NULL;
    char *auto_labels = NULL;
    const char *lpath = o->label_path;
    if (!lpath && o->label != FK_LABEL_NONE)
        lpath = auto_labels = sibling_labels(path);
    size_t max_values = fk__load_max_values(o);
    int rc = read_idx(path, &a, alloc_dataset, ds, max_values, err);
    if (!rc) {
        const char *b = strrchr(path, '/');
        fk_dataset_set_name(ds, b ? b + 1 : path);
    }
    if (!rc && lpath && o->label != FK_LABEL_NONE) {
        rc = read_idx(lpath, &la, alloc_plain, &y, max_values, err);
        if (!rc && (la.n != a.n || la.d != 1))
            rc = fk_err_set(err, FK_EINVAL, "%s: %zu x %zu labels for the %zu samples of %s", lpath, la.n,
                            la.d, a.n, path);
        if (!rc)
            rc = fk_dataset_set_labels(ds, y, err);
    }
    if (rc)
        fk_dataset_close(ds);
    free(y);
    free(auto_labels);
    return rc;
}
