#include "common/methods/aggregate.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

int fk_aggregator_parse(fk_aggregator *a, const char *name, double trim, fk_err *err)
{
    a->trim = 0.0;
    if (!strcmp(name, "mean"))
        a->kind = FK_AGG_MEAN;
    else if (!strcmp(name, "fedavg"))
        a->kind = FK_AGG_FEDAVG;
    else if (!strcmp(name, "median"))
        a->kind = FK_AGG_MEDIAN;
    else if (!strcmp(name, "trimmed-mean")) {
        if (!(trim >= 0.0 && trim < 0.5))
            return fk_err_set(err, FK_EINVAL, "trimmed-mean: trim fraction %g is not in [0, 0.5)",
                              trim);
        a->kind = FK_AGG_TRIMMED;
        a->trim = trim;
    } else
        return fk_err_set(err, FK_EINVAL,
                          "unknown aggregator '%s' (use mean, fedavg, median or trimmed-mean)", name);
    return FK_OK;
}

static int compare_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* Median or trimmed mean of each coordinate: gather the n values and sort them. */
static int order_statistic(const fk_aggregator *a, const double *const *src, int n, double *out,
                           size_t len)
{
    double *col = malloc((size_t)n * sizeof *col);
    if (!col)
        return FK_ENOMEM;
    int cut = a->kind == FK_AGG_TRIMMED ? (int)(a->trim * n) : 0;
    for (size_t j = 0; j < len; j++) {
        for (int i = 0; i < n; i++)
            col[i] = src[i][j];
        qsort(col, (size_t)n, sizeof *col, compare_double);
        if (a->kind == FK_AGG_MEDIAN) {
            out[j] = n % 2 ? col[n / 2] : 0.5 * (col[n / 2 - 1] + col[n / 2]);
        } else {
            double s = 0.0;
            for (int i = cut; i < n - cut; i++)
                s += col[i];
            out[j] = s / (double)(n - 2 * cut);
        }
    }
    free(col);
    return FK_OK;
}

int fk_aggregate_tensor(const fk_aggregator *a, const fk_update *ups, int n, const char *name,
                        double *out, size_t len, fk_err *err)
{
    if (n <= 0)
        return fk_err_set(err, FK_EINVAL, "aggregate '%s': no updates", name);
    const double **src = malloc((size_t)n * sizeof *src);
    if (!src)
        return fk_err_set(err, FK_ENOMEM, "aggregate '%s': out of memory", name);
    double wsum = 0.0;
    for (int i = 0; i < n; i++) {
        const fk_tensor *t = fk_bundle_get(&ups[i].msg, name);
        if (!t || t->len != len) {
            free(src);
            return fk_err_set(err, FK_EFORMAT, "aggregate '%s': client %d sent %s", name,
                              ups[i].client, t ? "a tensor of another size" : "no such tensor");
        }
        src[i] = t->data;
        wsum += a->kind == FK_AGG_FEDAVG ? ups[i].report.n_samples : 1.0;
    }
    int rc = FK_OK;
    if (a->kind == FK_AGG_MEAN || a->kind == FK_AGG_FEDAVG) {
        if (!(wsum > 0.0)) {
            free(src);
            return fk_err_set(err, FK_EINVAL, "aggregate '%s': total sample weight is zero", name);
        }
        memset(out, 0, len * sizeof *out);
        /* Fixed order (updates arrive sorted by client) keeps the sum reproducible. */
        for (int i = 0; i < n; i++) {
            double w = (a->kind == FK_AGG_FEDAVG ? ups[i].report.n_samples : 1.0) / wsum;
            cblas_daxpy((int)len, w, src[i], 1, out, 1);
        }
    } else {
        rc = order_statistic(a, src, n, out, len);
        if (rc)
            fk_err_set(err, rc, "aggregate '%s': out of memory", name);
    }
    free(src);
    return rc;
}
