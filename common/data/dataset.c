#include "common/data/dataset.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fk_dataset_init(fk_dataset *ds, size_t n, size_t d, int labelled)
{
    memset(ds, 0, sizeof *ds);
    int rc = fk_mat_init(&ds->X, n, d);
    if (rc)
        return rc;
    if (labelled) {
        ds->y = calloc(n ? n : 1, sizeof *ds->y);
        if (!ds->y) {
            fk_mat_close(&ds->X);
            return FK_ENOMEM;
        }
    }
    return FK_OK;
}

void fk_dataset_close(fk_dataset *ds)
{
    fk_mat_close(&ds->X);
    free(ds->y);
    free(ds->y_raw);
    free(ds->classes);
    free(ds->group);
    memset(ds, 0, sizeof *ds);
}

void fk_dataset_set_name(fk_dataset *ds, const char *name)
{
    snprintf(ds->name, sizeof ds->name, "%s", name ? name : "");
}

/* Copy n elements of size sz, or leave *dst NULL when src is NULL. */
static int dup_array(void **dst, const void *src, size_t n, size_t sz)
{
    *dst = NULL;
    if (!src)
        return FK_OK;
    *dst = malloc(n ? n * sz : 1);
    if (!*dst)
        return FK_ENOMEM;
    if (n)
        memcpy(*dst, src, n * sz);
    return FK_OK;
}

int fk_dataset_subset(fk_dataset *dst, const fk_dataset *src, const int *rows, size_t n)
{
    int rc = fk_dataset_init(dst, n, src->X.cols, src->y != NULL);
    if (rc)
        return rc;
    if (src->y_raw && !(dst->y_raw = malloc((n ? n : 1) * sizeof(double))))
        rc = FK_ENOMEM;
    if (!rc && src->group && !(dst->group = malloc((n ? n : 1) * sizeof(int))))
        rc = FK_ENOMEM;
    if (!rc)
        rc = dup_array((void **)&dst->classes, src->classes, (size_t)src->n_classes, sizeof(double));
    if (rc) {
        fk_dataset_close(dst);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        size_t r = (size_t)rows[i];
        memcpy(fk_mat_row(&dst->X, i), fk_mat_row(&src->X, r), src->X.cols * sizeof(double));
        if (src->y)
            dst->y[i] = src->y[r];
        if (src->y_raw)
            dst->y_raw[i] = src->y_raw[r];
        if (src->group)
            dst->group[i] = src->group[r];
    }
    dst->n_classes = src->n_classes;
    memcpy(dst->name, src->name, sizeof dst->name);
    return FK_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Index of v in the ascending list c[0..k), or -1. */
static int find_class(const double *c, int k, double v)
{
    int lo = 0, hi = k - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (c[mid] == v)
            return mid;
        if (c[mid] < v)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* Sort and deduplicate v[0..n) in place; returns the distinct count. */
static size_t sort_unique(double *v, size_t n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, cmp_double);
    size_t k = 1;
    for (size_t i = 1; i < n; i++)
        if (v[i] != v[k - 1])
            v[k++] = v[i];
    return k;
}

/* Point ds at class list c (k values, ownership of a copy taken) and recompute y. */
static int index_labels(fk_dataset *ds, const double *c, int k, fk_err *err)
{
    size_t n = ds->X.rows;
    double *copy = NULL;
    int rc = dup_array((void **)&copy, c, (size_t)k, sizeof(double));
    if (rc)
        return fk_err_set(err, rc, "%s: out of memory for the class list", ds->name);
    if (!ds->y && !(ds->y = malloc((n ? n : 1) * sizeof(int)))) {
        free(copy);
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory for labels", ds->name);
    }
    for (size_t i = 0; i < n; i++) {
        int idx = find_class(copy, k, ds->y_raw[i]);
        if (idx < 0) {
            free(copy);
            return fk_err_set(err, FK_EINVAL, "%s: sample %zu has label %.17g outside the class list",
                              ds->name, i, ds->y_raw[i]);
        }
        ds->y[i] = idx;
    }
    free(ds->classes);
    ds->classes = copy;
    ds->n_classes = k;
    return FK_OK;
}

int fk_dataset_set_labels(fk_dataset *ds, const double *raw, fk_err *err)
{
    size_t n = ds->X.rows;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(raw[i]))
            return fk_err_set(err, FK_EFORMAT, "%s: sample %zu has a non-finite label", ds->name, i);
    double *r = NULL, *c = NULL;
    if (dup_array((void **)&r, raw, n, sizeof *raw) || dup_array((void **)&c, raw, n, sizeof *raw)) {
        free(r);
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory for labels", ds->name);
    }
    size_t k = sort_unique(c, n);
    if (k > (size_t)1 << 30) {
        free(r);
        free(c);
        return fk_err_set(err, FK_ELIMIT, "%s: too many distinct labels (%zu)", ds->name, k);
    }
    free(ds->y_raw);
    ds->y_raw = r;
    int rc = index_labels(ds, c, (int)k, err);
    free(c);
    return rc;
}

int fk_dataset_set_target(fk_dataset *ds, const double *target, fk_err *err)
{
    double *t = NULL;
    if (dup_array((void **)&t, target, ds->X.rows, sizeof *target))
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory for the target", ds->name);
    free(ds->y_raw);
    free(ds->y);
    free(ds->classes);
    ds->y_raw = t;
    ds->y = NULL;
    ds->classes = NULL;
    ds->n_classes = 0;
    return FK_OK;
}

int fk_dataset_align_labels(fk_dataset *const *ds, int m, fk_err *err)
{
    size_t total = 0;
    for (int i = 0; i < m; i++) {
        if (!ds[i]->y_raw || !ds[i]->classes)
            return fk_err_set(err, FK_EINVAL, "%s: unlabelled, cannot align its labels with other domains",
                              ds[i]->name);
        total += (size_t)ds[i]->n_classes;
    }
    double *u = malloc((total ? total : 1) * sizeof *u);
    if (!u)
        return fk_err_set(err, FK_ENOMEM, "out of memory aligning labels");
    size_t at = 0;
    for (int i = 0; i < m; i++) {
        memcpy(u + at, ds[i]->classes, (size_t)ds[i]->n_classes * sizeof *u);
        at += (size_t)ds[i]->n_classes;
    }
    size_t k = sort_unique(u, total);
    int rc = FK_OK;
    for (int i = 0; i < m && !rc; i++)
        rc = index_labels(ds[i], u, (int)k, err);
    free(u);
    return rc;
}

int fk_dataset_check_dims(const fk_dataset *a, const fk_dataset *b, fk_err *err)
{
    if (a->X.cols == b->X.cols)
        return FK_OK;
    return fk_err_set(err, FK_EINVAL,
                      "dimension mismatch: domain '%s' has %zu features per sample but '%s' has %zu; "
                      "both domains must use the same feature representation",
                      a->name[0] ? a->name : "first", a->X.cols, b->name[0] ? b->name : "second",
                      b->X.cols);
}

int fk_dataset_use_classes(fk_dataset *ds, const double *classes, int k, fk_err *err)
{
    if (!ds->y_raw)
        return fk_err_set(err, FK_EINVAL, "%s: unlabelled, cannot assign a class list", ds->name);
    for (int i = 1; i < k; i++)
        if (!(classes[i - 1] < classes[i]))
            return fk_err_set(err, FK_EINVAL, "class list must be strictly ascending");
    return index_labels(ds, classes, k, err);
}
