#include "common/base/bundle.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fk_bundle_init(fk_bundle *b)
{
    *b = (fk_bundle){0};
}

void fk_bundle_clear(fk_bundle *b)
{
    for (size_t i = 0; i < b->count; i++)
        free(b->items[i].data);
    b->count = 0;
}

void fk_bundle_close(fk_bundle *b)
{
    fk_bundle_clear(b);
    free(b->items);
    fk_bundle_init(b);
}

static fk_tensor *find(const fk_bundle *b, const char *name)
{
    for (size_t i = 0; i < b->count; i++)
        if (strcmp(b->items[i].name, name) == 0)
            return &b->items[i];
    return NULL;
}

double *fk_bundle_add(fk_bundle *b, const char *name, int ndim, const uint64_t *shape)
{
    if (ndim < 0 || ndim > FK_TENSOR_MAX_DIMS || strlen(name) >= FK_TENSOR_NAME_MAX)
        return NULL;
    size_t len = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] && len > SIZE_MAX / sizeof(double) / shape[i])
            return NULL;
        len *= (size_t)shape[i];
    }
    double *data = calloc(len ? len : 1, sizeof *data);
    if (!data)
        return NULL;
    fk_tensor *t = find(b, name);
    if (t) {
        free(t->data);
    } else {
        if (b->count == b->cap) {
            size_t cap = b->cap ? 2 * b->cap : 8;
            fk_tensor *n = realloc(b->items, cap * sizeof *n);
            if (!n) {
                free(data);
                return NULL;
            }
            b->items = n;
            b->cap = cap;
        }
        t = &b->items[b->count++];
    }
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    t->len = len;
    t->data = data;
    return data;
}

int fk_bundle_put(fk_bundle *b, const char *name, int ndim, const uint64_t *shape,
                  const double *src)
{
    double *d = fk_bundle_add(b, name, ndim, shape);
    if (!d)
        return FK_ENOMEM;
    const fk_tensor *t = find(b, name);
    if (t->len)
        memcpy(d, src, t->len * sizeof *d);
    return FK_OK;
}

int fk_bundle_put_scalar(fk_bundle *b, const char *name, double v)
{
    return fk_bundle_put(b, name, 0, NULL, &v);
}

int fk_bundle_put_vec(fk_bundle *b, const char *name, size_t n, const double *src)
{
    uint64_t shape[1] = {n};
    return fk_bundle_put(b, name, 1, shape, src);
}

const fk_tensor *fk_bundle_get(const fk_bundle *b, const char *name)
{
    return find(b, name);
}

const fk_tensor *fk_bundle_expect(const fk_bundle *b, const char *name, int ndim,
                                  const uint64_t *want, fk_err *err)
{
    const fk_tensor *t = find(b, name);
    if (!t) {
        fk_err_set(err, FK_EFORMAT, "message lacks tensor '%s'", name);
        return NULL;
    }
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++)
        ok = !want || !want[i] || want[i] == t->shape[i];
    if (!ok) {
        fk_err_set(err, FK_EFORMAT, "tensor '%s' has the wrong shape (%d dims)", name, t->ndim);
        return NULL;
    }
    return t;
}

int fk_bundle_copy(fk_bundle *dst, const fk_bundle *src)
{
    fk_bundle_init(dst);
    for (size_t i = 0; i < src->count; i++) {
        const fk_tensor *t = &src->items[i];
        if (fk_bundle_put(dst, t->name, t->ndim, t->shape, t->data) != FK_OK) {
            fk_bundle_close(dst);
            return FK_ENOMEM;
        }
    }
    return FK_OK;
}

size_t fk_bundle_values(const fk_bundle *b)
{
    size_t n = 0;
    for (size_t i = 0; i < b->count; i++)
        n += b->items[i].len;
    return n;
}
