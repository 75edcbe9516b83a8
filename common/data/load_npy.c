/* NPY loader (numpy .npy v1/v2/v3, also gzip-compressed): 1-D, 2-D or N-D arrays of
 * float, signed/unsigned integer or bool, C or Fortran order. Rows are samples. */
#include <ctype.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/load_int.h"

#define MAX_HEADER 65536
#define MAX_DIMS 8

typedef struct npy_hdr {
    char kind;      /* 'f', 'i', 'u', 'b' */
    size_t esize;   /* bytes per element */
    int big_endian;
    int fortran;
    int ndim;
    size_t shape[MAX_DIMS];
} npy_hdr;

/* The value following 'key': in the header dict, or NULL. */
static const char *dict_value(const char *h, const char *key)
{
    const char *p = strstr(h, key);
    if (!p)
        return NULL;
    p += strlen(key);
    while (*p == ' ')
        p++;
    if (*p != ':')
        return NULL;
    p++;
    while (*p == ' ')
        p++;
    return p;
}

static const char *parse_descr(const char *v, npy_hdr *h)
{
    if (!v || (*v != '\'' && *v != '"'))
        return "missing or malformed 'descr'";
    v++;
    char order = *v;
    if (order == '<' || order == '>' || order == '|' || order == '=')
        v++;
    else
        order = '=';
    h->big_endian = order == '>';
    if (!*v)
        return "malformed 'descr'";
    h->kind = *v++;
    if (!isdigit((unsigned char)*v))
        return "malformed 'descr'";
    h->esize = (size_t)strtoul(v, NULL, 10);
    int ok = (h->kind == 'f' && (h->esize == 4 || h->esize == 8)) ||
             ((h->kind == 'i' || h->kind == 'u') &&
              (h->esize == 1 || h->esize == 2 || h->esize == 4 || h->esize == 8)) ||
             (h->kind == 'b' && h->esize == 1);
    return ok ? NULL : "unsupported dtype (use float32/64, int8-64, uint8-64 or bool)";
}

static const char *parse_shape(const char *v, npy_hdr *h, size_t max_values)
{
    if (!v || *v != '(')
        return "missing or malformed 'shape'";
    v++;
    h->ndim = 0;
    for (;;) {
        while (*v == ' ')
            v++;
        if (*v == ')')
            break;
        if (!isdigit((unsigned char)*v))
            return "malformed 'shape'";
        if (h->ndim == MAX_DIMS)
            return "more than 8 dimensions";
        char *end;
        unsigned long long k = strtoull(v, &end, 10);
        if (k > max_values)
            return "a dimension exceeds the value limit";
        h->shape[h->ndim++] = (size_t)k;
        v = end;
        while (*v == ' ')
            v++;
        if (*v == ',')
            v++;
        else if (*v != ')')
            return "malformed 'shape'";
    }
    return NULL;
}

FK_CHECKRETURN static int read_header(gzFile gz, const char *path, npy_hdr *h, size_t *off, size_t max_values, fk_err *err)
{
    unsigned char pre[12];
    int rc = fk__gz_read_exact(gz, path, pre, 8, off, "the NPY magic", err);
    if (rc)
        return rc;
    if (memcmp(pre, "\x93NUMPY", 6) != 0)
        return fk_err_set(err, FK_EFORMAT, "%s: byte 0: wrong magic, not an NPY file (expected \\x93NUMPY)",
                          path);
    int major = pre[6];
    if (major < 1 || major > 3)
        return fk_err_set(err, FK_EFORMAT, "%s: byte 6: unsupported NPY version %d", path, major);
    size_t lb = major == 1 ? 2 : 4;
    rc = fk__gz_read_exact(gz, path, pre + 8, lb, off, "the NPY header length", err);
    if (rc)
        return rc;
    size_t hlen = pre[8] | (size_t)pre[9] << 8;
    if (lb == 4)
        hlen |= (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    if (hlen > MAX_HEADER)
        return fk_err_set(err, FK_EFORMAT, "%s: byte 8: NPY header of %zu bytes is implausibly long", path,
                          hlen);
    char *text = malloc(hlen + 1);
    if (!text)
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory", path);
    size_t hstart = *off;
    rc = fk__gz_read_exact(gz, path, text, hlen, off, "the NPY header", err);
    if (rc) {
        free(text);
        return rc;
    }
    text[hlen] = '\0';
    *h = (npy_hdr){0};
    const char *why = memchr(text, '\0', hlen) ? "NUL byte in the header" : NULL;
    if (!why)
        why = parse_descr(dict_value(text, "'descr'"), h);
    if (!why) {
        const char *f = dict_value(text, "'fortran_order'");
        if (f && !strncmp(f, "True", 4))
            h->fortran = 1;
        else if (!f || strncmp(f, "False", 5))
            why = "missing or malformed 'fortran_order'";
    }
    if (!why)
        why = parse_shape(dict_value(text, "'shape'"), h, max_values);
    if (!why && h->fortran && h->ndim > 2)
        why = "Fortran-order arrays with more than 2 dimensions are not supported";
    free(text);
    if (why)
        return fk_err_set(err, FK_EFORMAT, "%s: byte %zu: NPY header: %s", path, hstart, why);
    return FK_OK;
}

static double decode(const unsigned char *p, const npy_hdr *h)
{
    unsigned char b[8];
    for (size_t i = 0; i < h->esize; i++)
        b[i] = h->big_endian ? p[h->esize - 1 - i] : p[i];
    uint64_t u = 0;
    for (size_t i = h->esize; i-- > 0;)
        u = u << 8 | b[i]; /* little-endian value in u */
    if (h->kind == 'f') {
        if (h->esize == 4) {
            uint32_t w = (uint32_t)u;
            float f;
            memcpy(&f, &w, sizeof f);
            return f;
        }
        double d;
        memcpy(&d, &u, sizeof d);
        return d;
    }
    if (h->kind == 'u' || h->kind == 'b')
        return (double)u;
    int shift = 64 - 8 * (int)h->esize; /* sign-extend */
    return (double)((int64_t)(u << shift) >> shift);
}

FK_CHECKRETURN static int read_data(gzFile gz, const char *path, const npy_hdr *h, size_t *off, fk_dataset *ds, int transpose,
                     fk_err *err)
{
    /* stored as a x b (trailing dimensions flattened) */
    size_t a = h->ndim ? h->shape[0] : 1, b = 1;
    for (int i = 1; i < h->ndim; i++)
        b *= h->shape[i];
    size_t n = transpose ? b : a, d = transpose ? a : b, total = a * b;
    if (total == 0)
        return fk_err_set(err, FK_EFORMAT, "%s: empty NPY array", path);
    int rc = fk__gz_plausible(gz, path, *off, total * h->esize, err);
    if (rc)
        return rc;
    if (fk_dataset_init(ds, n, d, 0))
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory for %zu x %zu values", path, n, d);
    size_t block = (1u << 16) / h->esize;
    unsigned char *buf = malloc(block * h->esize);
    if (!buf)
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory", path);
    for (size_t at = 0; at < total && !rc; at += block) {
        size_t k = total - at < block ? total - at : block;
        rc = fk__gz_read_exact(gz, path, buf, k * h->esize, off, "the NPY data", err);
        for (size_t e = 0; e < k && !rc; e++) {
            size_t idx = at + e;
            double v = decode(buf + e * h->esize, h);
            if (!isfinite(v)) {
                rc = fk_err_set(err, FK_EFORMAT, "%s: byte %zu: NaN or Inf value", path,
                                *off - (k - e) * h->esize);
                break;
            }
            size_t i = h->fortran ? idx % a : idx / b, j = h->fortran ? idx / a : idx % b;
            if (transpose)
                fk_mat_set(&ds->X, j, i, v);
            else
                fk_mat_set(&ds->X, i, j, v);
        }
    }
    free(buf);
    if (!rc) {
        unsigned char extra;
        if (gzread(gz, &extra, 1) == 1)
            rc = fk_err_set(err, FK_EFORMAT, "%s: byte %zu: trailing bytes after the NPY array", path, *off);
    }
    return rc;
}

FK_CHECKRETURN static int load_array(fk_dataset *ds, const char *path, int transpose, size_t max_values, fk_err *err)
{
    gzFile gz;
    size_t off = 0;
    npy_hdr h = {0};
    memset(ds, 0, sizeof *ds);
    int rc = fk__gz_open(&gz, path, err);
    if (rc)
        return rc;
    rc = read_header(gz, path, &h, &off, max_values, err);
    if (!rc) {
        size_t total = 1;
        for (int i = 0; i < h.ndim && !rc; i++) {
            if (h.shape[i] && total > max_values / h.shape[i])
                rc = fk_err_set(err, FK_ELIMIT, "%s: NPY array exceeds the limit of %zu values", path,
                                max_values);
            total *= h.shape[i];
        }
    }
    if (!rc)
        rc = read_data(gz, path, &h, &off, ds, transpose, err);
    gzclose_r(gz);
    if (rc)
        fk_dataset_close(ds);
    return rc;
}

int fk__load_npy(fk_dataset *ds, const char *path, const fk_load_opts *o, fk_err *err)
{
    size_t max_values = fk__load_max_values(o);
    int rc = load_array(ds, path, o->samples_in_columns, max_values, err);
    if (rc)
        return rc;
    const char *b = strrchr(path, '/');
    fk_dataset_set_name(ds, b ? b + 1 : path);
    if (!o->label_path || o->label == FK_LABEL_NONE)
        return FK_OK;
    fk_dataset lab;
    rc = load_array(&lab, o->label_path, 0, max_values, err);
    if (!rc && (lab.X.rows != ds->X.rows || lab.X.cols != 1))
        rc = fk_err_set(err, FK_EINVAL, "%s: %zu x %zu labels for the %zu samples of %s", o->label_path,
                        lab.X.rows, lab.X.cols, ds->X.rows, path);
    if (!rc)
        rc = fk_dataset_set_labels(ds, lab.X.data, err);
    if (lab.X.data)
        fk_dataset_close(&lab);
    if (rc)
        fk_dataset_close(ds);
    return rc;
}
