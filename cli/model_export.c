/* fedkern model export: a model file's tensors as NumPy arrays (.npz: one .npy member per
 * tensor, stored uncompressed) or JSON, one array per quantity under the tensor's name, with
 * the job type, round and job beside them. Little-endian float64, C order, the tensor's shape
 * (a scalar is a 0-d array). */
#include "cli/model_export.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "common/methods/method.h"

/* A growable byte buffer. */
typedef struct buf {
    unsigned char *p;
    size_t len, cap;
    int oom;
} buf;

static void put(buf *b, const void *src, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        unsigned char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->len, src, n);
    b->len += n;
}

static void put16(buf *b, unsigned v)
{
    unsigned char x[2] = {(unsigned char)v, (unsigned char)(v >> 8)};
    put(b, x, 2);
}

static void put32(buf *b, unsigned long v)
{
    unsigned char x[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                          (unsigned char)(v >> 24)};
    put(b, x, 4);
}

/* One .npy (format 1.0): magic, header dict padded with spaces to a multiple of 64 bytes
 * ending in '\n', then the data. descr "<f8" with n doubles, or "<Uk" with a string. */
static void npy(buf *b, const char *descr, const uint64_t *shape, int ndim, const void *data,
                size_t bytes)
{
    char hdr[512];
    int off =
        snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int d = 0; d < ndim; d++)
        off += snprintf(hdr + off, sizeof hdr - (size_t)off, "%llu,%s",
                        (unsigned long long)shape[d], d + 1 < ndim ? " " : "");
    off += snprintf(hdr + off, sizeof hdr - (size_t)off, "), }");
    size_t total = 10 + (size_t)off + 1, pad = (64 - total % 64) % 64;
    put(b, "\x93NUMPY\x01\x00", 8);
    put16(b, (unsigned)((size_t)off + pad + 1));
    put(b, hdr, (size_t)off);
    for (size_t i = 0; i < pad; i++)
        put(b, " ", 1);
    put(b, "\n", 1);
    put(b, data, bytes);
}

typedef struct member {
    char name[96];
    unsigned long crc, size, offset;
} member;

/* A stored (uncompressed) zip member. */
static void zip_member(buf *z, member *m, const buf *body)
{
    m->crc = crc32(0, body->p, (uInt)body->len);
    m->size = (unsigned long)body->len;
    m->offset = (unsigned long)z->len;
    size_t nl = strlen(m->name);
    put32(z, 0x04034b50);
    put16(z, 20);   /* version needed */
    put16(z, 0);    /* flags */
    put16(z, 0);    /* stored */
    put16(z, 0);    /* time */
    put16(z, 0x21); /* date: 1980-01-01 */
    put32(z, m->crc);
    put32(z, m->size);
    put32(z, m->size);
    put16(z, (unsigned)nl);
    put16(z, 0);
    put(z, m->name, nl);
    put(z, body->p, body->len);
}

static void zip_end(buf *z, const member *ms, size_t n)
{
    unsigned long cd = (unsigned long)z->len;
    for (size_t i = 0; i < n; i++) {
        size_t nl = strlen(ms[i].name);
        put32(z, 0x02014b50);
        put16(z, 20);
        put16(z, 20);
        put16(z, 0);
        put16(z, 0);
        put16(z, 0);
        put16(z, 0x21);
        put32(z, ms[i].crc);
        put32(z, ms[i].size);
        put32(z, ms[i].size);
        put16(z, (unsigned)nl);
        put16(z, 0);
        put16(z, 0);
        put16(z, 0);
        put16(z, 0);
        put32(z, 0);
        put32(z, ms[i].offset);
        put(z, ms[i].name, nl);
    }
    unsigned long cdlen = (unsigned long)z->len - cd;
    put32(z, 0x06054b50);
    put16(z, 0);
    put16(z, 0);
    put16(z, (unsigned)n);
    put16(z, (unsigned)n);
    put32(z, cdlen);
    put32(z, cd);
    put16(z, 0);
}

/* A string as a 0-d '<U' array (UTF-32LE code units of its bytes, ASCII in practice). */
static void npy_string(buf *b, const char *s)
{
    size_t n = strlen(s) ? strlen(s) : 1;
    unsigned char *u = calloc(n, 4);
    if (!u) {
        b->oom = 1;
        return;
    }
    for (size_t i = 0; s[i]; i++)
        u[4 * i] = (unsigned char)s[i];
    char descr[32];
    snprintf(descr, sizeof descr, "<U%zu", n);
    npy(b, descr, NULL, 0, u, n * 4);
    free(u);
}

FK_CHECKRETURN static int write_npz(FILE *f, const fk_bundle *m, const fk_model_info *in,
                                    fk_err *err)
{
    size_t n = m->count + 3;
    member *ms = calloc(n, sizeof *ms);
    buf z = {0}, body = {0};
    if (!ms)
        return fk_err_set(err, FK_ENOMEM, "model export: out of memory");
    const char *meta[3][2] = {
        {"method", in->method}, {"job", in->job_id}, {"software", in->software}};
    for (size_t i = 0; i < 3; i++) {
        body.len = 0;
        npy_string(&body, meta[i][1]);
        snprintf(ms[i].name, sizeof ms[i].name, "%s.npy", meta[i][0]);
        zip_member(&z, &ms[i], &body);
    }
    for (size_t i = 0; i < m->count; i++) {
        const fk_tensor *t = &m->items[i];
        body.len = 0;
        npy(&body, "<f8", t->shape, t->ndim, t->data, t->len * sizeof(double));
        snprintf(ms[3 + i].name, sizeof ms[3 + i].name, "%s.npy", t->name);
        zip_member(&z, &ms[3 + i], &body);
    }
    zip_end(&z, ms, n);
    int rc = z.oom || body.oom ? fk_err_set(err, FK_ENOMEM, "model export: out of memory") : FK_OK;
    if (!rc && fwrite(z.p, 1, z.len, f) != z.len)
        rc = fk_err_set(err, FK_EIO, "model export: write failed");
    free(z.p);
    free(body.p);
    free(ms);
    return rc;
}

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

FK_CHECKRETURN static int write_json(FILE *f, const fk_bundle *m, const fk_model_info *in)
{
    fprintf(f, "{\"method\":");
    json_string(f, in->method);
    fprintf(f, ",\"round\":%d,\"job\":", in->round);
    json_string(f, in->job_id);
    fprintf(f, ",\"software\":");
    json_string(f, in->software);
    fprintf(f, ",\"arrays\":{");
    for (size_t i = 0; i < m->count; i++) {
        const fk_tensor *t = &m->items[i];
        fprintf(f, "%s", i ? "," : "");
        json_string(f, t->name);
        fprintf(f, ":{\"shape\":[");
        for (int d = 0; d < t->ndim; d++)
            fprintf(f, "%s%llu", d ? "," : "", (unsigned long long)t->shape[d]);
        fprintf(f, "],\"data\":[");
        for (size_t j = 0; j < t->len; j++) {
            double v = t->data[j];
            if (isfinite(v))
                fprintf(f, "%s%.17g", j ? "," : "", v);
            else
                fprintf(f, "%snull", j ? "," : ""); /* JSON has no NaN or Inf */
        }
        fprintf(f, "]}");
    }
    fprintf(f, "}}\n");
    return FK_OK;
}

int fk_model_export(const fk_bundle *model, const fk_model_info *in, const char *format,
                    const char *out, fk_err *err)
{
    int npz = !strcmp(format, "npz");
    if (!npz && strcmp(format, "json"))
        return fk_err_set(err, FK_EINVAL, "--format must be npz or json (got '%s')", format);
    /* the model's tensors and what the job type adds (export_arrays: e.g. its frequencies) */
    fk_bundle m;
    fk_bundle_init(&m);
    fk_err e2;
    const fk_method *meth = in->method[0] ? fk_method_find(in->method, &e2) : NULL;
    int rc = fk_bundle_copy(&m, model) ? fk_err_set(err, FK_ENOMEM, "out of memory") : FK_OK;
    if (!rc && meth && meth->export_arrays) /* its messages name the job type */
        rc = meth->export_arrays(model, &m, err);
    FILE *f = rc ? NULL : fopen(out, "wb");
    if (!rc && !f)
        rc = fk_err_set(err, FK_EIO, "cannot write %s: %s", out, strerror(errno));
    if (!rc)
        rc = npz ? write_npz(f, &m, in, err) : write_json(f, &m, in);
    if (f && fclose(f) && !rc)
        rc = fk_err_set(err, FK_EIO, "cannot write %s", out);
    fk_bundle_close(&m);
    return rc;
}
