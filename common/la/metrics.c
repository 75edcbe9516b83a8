#include "common/la/metrics.h"

#include <math.h>
#include <stdlib.h>

#include "common/la/blas.h"

int fk_accuracy(const int *y_true, const int *y_pred, size_t n, double *acc, fk_err *err)
{
    if (n == 0)
        return fk_err_set(err, FK_EINVAL, "fk_accuracy: no samples to score");
    size_t hits = 0;
    for (size_t i = 0; i < n; i++)
        hits += y_true[i] == y_pred[i];
    *acc = (double)hits / (double)n;
    return FK_OK;
}

static int check_label(const char *what, const int *y, size_t n, int n_classes, fk_err *err)
{
    for (size_t i = 0; i < n; i++)
        if (y[i] < 0 || y[i] >= n_classes)
            return fk_err_set(err, FK_EINVAL, "fk_confusion: %s[%zu] = %d is outside [0, %d)", what,
                              i, y[i], n_classes);
    return FK_OK;
}

int fk_confusion(fk_mat *cm, const int *y_true, const int *y_pred, size_t n, int n_classes,
                 fk_err *err)
{
    *cm = (fk_mat){0};
    if (n_classes <= 0)
        return fk_err_set(err, FK_EINVAL, "fk_confusion: %d classes; need at least 1", n_classes);
    int rc;
    if ((rc = check_label("y_true", y_true, n, n_classes, err)) ||
        (rc = check_label("y_pred", y_pred, n, n_classes, err)))
        return rc;
    if ((rc = fk_mat_init(cm, (size_t)n_classes, (size_t)n_classes)))
        return fk_err_set(err, rc, "fk_confusion: cannot allocate a %dx%d matrix", n_classes,
                          n_classes);
    for (size_t i = 0; i < n; i++)
        fk_mat_row(cm, (size_t)y_true[i])[y_pred[i]] += 1.0;
    return FK_OK;
}

int fk_rmse(const double *a, const double *b, size_t n, double *out, fk_err *err)
{
    if (n == 0)
        return fk_err_set(err, FK_EINVAL, "fk_rmse: no values to compare");
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i]) || !isfinite(b[i]))
            return fk_err_set(err, FK_EINVAL, "fk_rmse: value %zu is not finite (%g vs %g)", i,
                              a[i], b[i]);
    double *d = malloc(n * sizeof *d);
    if (!d)
        return fk_err_set(err, FK_ENOMEM, "fk_rmse: out of memory for %zu values", n);
    fk_copy(n, a, d);
    fk_axpy(n, -1.0, b, d);
    /* nrm2 scales internally, so huge differences do not overflow the squares */
    *out = fk_nrm2(n, d) / sqrt((double)n);
    free(d);
    return FK_OK;
}
