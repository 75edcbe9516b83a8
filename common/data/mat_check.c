#include "common/data/mat_check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define MAX_DEPTH 16

enum { MI_INT8 = 1, MI_INT32 = 5, MI_UINT32 = 6, MI_MATRIX = 14, MI_COMPRESSED = 15 };

typedef struct elem {
    const unsigned char *b; /* body of one miMATRIX element */
    size_t len;
    int big;                /* file is big-endian */
} elem;

static uint32_t u32(const unsigned char *p, int big)
{
    return big ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
               : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* Bytes per element of a MAT data type, 0 if unknown. */
static size_t mi_size(uint32_t t)
{
    static const unsigned char sz[19] = {0, 1, 1, 2, 2, 4, 4, 4, 0, 8, 0, 0, 8, 8, 0, 0, 1, 2, 4};
    return t < 19 ? sz[t] : 0;
}

/* The sub-element at e->b[*at] (normal 8-byte tag or packed small form): type, byte count
 * and data offset; *at moves past it (padded to 8). */
static const char *sub(const elem *e, size_t *at, uint32_t *type, uint32_t *n, size_t *data)
{
    if (*at > e->len || e->len - *at < 8)
        return "variable header runs past its element";
    uint32_t w = u32(e->b + *at, e->big);
    if (w >> 16) { /* small element: 2-byte count, 2-byte type, data in the next 4 bytes */
        *type = w & 0xffff;
        *n = w >> 16;
        if (*n > 4)
            return "bad small data element";
        *data = *at + 4;
        *at += 8;
        return NULL;
    }
    *type = w;
    *n = u32(e->b + *at + 4, e->big);
    *data = *at + 8;
    if ((size_t)*n > e->len - *data)
        return "sub-element runs past its variable";
    size_t padded = ((size_t)*n + 7) / 8 * 8;
    *at = padded > e->len - *data ? e->len : *data + padded;
    return NULL;
}

static const char *check_matrix(const elem *e, int depth);

/* n nested miMATRIX elements starting at *at (cell contents, struct fields). */
static const char *check_children(const elem *e, size_t *at, size_t count, int depth)
{
    for (size_t k = 0; k < count; k++) {
        uint32_t t, n;
        size_t d;
        const char *why = sub(e, at, &t, &n, &d);
        if (why)
            return why;
        if (t != MI_MATRIX)
            return "cell or struct member is not a variable";
        elem c = {e->b + d, n, e->big};
        if ((why = check_matrix(&c, depth + 1)))
            return why;
    }
    return NULL;
}

static const char *check_matrix(const elem *e, int depth)
{
    if (e->len == 0)
        return NULL; /* empty placeholder */
    if (depth > MAX_DEPTH)
        return "cells or structs nested too deeply";
    size_t at = 0, d;
    uint32_t t, n;
    const char *why = sub(e, &at, &t, &n, &d);
    if (why || t != MI_UINT32 || n != 8)
        return why ? why : "bad array-flags sub-element";
    uint32_t cls = u32(e->b + d, e->big) & 0xff;
    if (cls == 5 || cls > 15)
        return cls == 5 ? "sparse variables are not supported" : "unsupported variable class";
    if ((why = sub(e, &at, &t, &n, &d)))
        return why;
    if (t != MI_INT32 || n < 8 || n % 4 || n > 4 * 32)
        return "bad dimensions sub-element";
    size_t numel = 1;
    for (uint32_t k = 0; k < n / 4; k++) {
        uint32_t dim = u32(e->b + d + 4 * k, e->big);
        if (dim > 0x7fffffffu || (dim && numel > e->len / dim))
            return "dimensions larger than the data stored";
        numel *= dim;
    }
    if ((why = sub(e, &at, &t, &n, &d)))
        return why;
    if (t != MI_INT8 || n > 4096)
        return "bad variable-name sub-element";
    if (cls == 1) { /* cell: numel nested variables */
        if (numel > e->len / 8)
            return "cell larger than the data stored";
        return check_children(e, &at, numel, depth);
    }
    if (cls == 2 || cls == 3) { /* struct/object: [class name], field-name length, names, fields */
        if (cls == 3 && (why = sub(e, &at, &t, &n, &d)))
            return why;
        if ((why = sub(e, &at, &t, &n, &d)))
            return why;
        if (t != MI_INT32 || n != 4)
            return "bad struct field-name length";
        uint32_t flen = u32(e->b + d, e->big);
        if ((why = sub(e, &at, &t, &n, &d)))
            return why;
        if (flen == 0 || flen > 4096 || t != MI_INT8)
            return "bad struct field names";
        size_t nf = n / flen;
        if (nf && numel > e->len / 8 / nf)
            return "struct larger than the data stored";
        return check_children(e, &at, numel * nf, depth);
    }
    if (cls < 4 || numel == 0)
        return NULL;
    if ((why = sub(e, &at, &t, &n, &d)))
        return why;
    if (!mi_size(t) || (cls != 4 && (size_t)n != numel * mi_size(t)))
        return "data size does not match the dimensions";
    if (cls == 4 && numel > (size_t)n)
        return "character data shorter than the dimensions";
    return NULL;
}

/* Inflate n compressed bytes of f into a buffer (at most max_bytes). */
FK_CHECKRETURN static int inflate_element(FILE *f, const char *path, long at, uint32_t n, size_t max_bytes,
                           unsigned char **out, size_t *out_len, fk_err *err)
{
    z_stream z = {0};
    size_t cap = 1u << 16, len = 0, left = n;
    unsigned char in[16384], *buf = malloc(cap);
    if (!buf || inflateInit(&z) != Z_OK) {
        free(buf);
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory", path);
    }
    int zr = Z_OK, rc = FK_OK;
    while (zr != Z_STREAM_END && !rc) {
        if (z.avail_in == 0) {
            size_t k = left < sizeof in ? left : sizeof in;
            if (k == 0 || fread(in, 1, k, f) != k)
                break;
            left -= k;
            z.next_in = in;
            z.avail_in = (uInt)k;
        }
        if (len == cap) {
            if (cap >= max_bytes) {
                rc = fk_err_set(err, FK_ELIMIT, "%s: byte %ld: compressed variable inflates beyond %zu bytes",
                                path, at, max_bytes);
                break;
            }
            unsigned char *nb = realloc(buf, cap * 2);
            if (!nb) {
                rc = fk_err_set(err, FK_ENOMEM, "%s: out of memory inflating a variable", path);
                break;
            }
            buf = nb;
            cap *= 2;
        }
        z.next_out = buf + len;
        z.avail_out = (uInt)(cap - len);
        zr = inflate(&z, Z_NO_FLUSH);
        len = cap - z.avail_out;
        if (zr != Z_OK && zr != Z_STREAM_END)
            break;
    }
    size_t consumed = (size_t)z.total_in;
    inflateEnd(&z);
    if (!rc && zr != Z_STREAM_END)
        rc = fk_err_set(err, FK_EFORMAT, "%s: byte %zu: corrupt or truncated compressed variable", path,
                        (size_t)at + 8 + consumed);
    if (rc) {
        free(buf);
        return rc;
    }
    *out = buf;
    *out_len = len;
    return FK_OK;
}

/* Check one top-level element whose tag sits at file offset at. */
FK_CHECKRETURN static int check_element(FILE *f, const char *path, long at, uint32_t type, uint32_t n, int big,
                         size_t max_bytes, fk_err *err)
{
    unsigned char *buf = NULL;
    size_t len = 0;
    int rc = FK_OK;
    const char *why = NULL;
    if (type == MI_COMPRESSED) {
        rc = inflate_element(f, path, at, n, max_bytes, &buf, &len, err);
        if (!rc && (len < 8 || u32(buf, big) != MI_MATRIX || u32(buf + 4, big) > len - 8))
            why = "compressed data is not one complete variable";
        if (!rc && !why) {
            elem e = {buf + 8, u32(buf + 4, big), big};
            why = check_matrix(&e, 0);
        }
    } else {
        if (n > max_bytes)
            return fk_err_set(err, FK_ELIMIT, "%s: byte %ld: variable of %u bytes over the limit", path, at, n);
        buf = malloc(n ? n : 1);
        if (!buf)
            return fk_err_set(err, FK_ENOMEM, "%s: out of memory", path);
        if (fread(buf, 1, n, f) != n)
            why = "truncated variable";
        else {
            elem e = {buf, n, big};
            why = check_matrix(&e, 0);
        }
    }
    free(buf);
    if (!rc && why)
        rc = fk_err_set(err, FK_EFORMAT, "%s: byte %ld: %s", path, at, why);
    return rc;
}

int fk_mat_check_file(const char *path, size_t max_bytes, fk_err *err)
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
    while (!rc && at < size) {
        unsigned char tag[8];
        if (fseek(f, at, SEEK_SET) != 0 || fread(tag, 1, 8, f) != 8) {
            rc = fk_err_set(err, FK_EFORMAT, "%s: byte %ld: truncated variable tag", path, at);
            break;
        }
        uint32_t type = u32(tag, big), n = u32(tag + 4, big);
        if (type != MI_MATRIX && type != MI_COMPRESSED)
            rc = fk_err_set(err, FK_EFORMAT, "%s: byte %ld: element type %u is not a variable", path, at, type);
        else if ((long)n > size - at - 8)
            rc = fk_err_set(err, FK_EFORMAT,
                            "%s: byte %ld: truncated: variable needs %u bytes, the file ends %ld bytes later",
                            path, at, n, size - at - 8);
        else
            rc = check_element(f, path, at, type, n, big, max_bytes, err);
        /* miMATRIX is padded to 8 bytes; compressed elements are not */
        at += 8 + (long)(type == MI_MATRIX ? ((size_t)n + 7) / 8 * 8 : n);
    }
    fclose(f);
    return rc;
}
