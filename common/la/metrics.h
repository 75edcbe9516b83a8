/* Evaluation metrics: accuracy, confusion matrix, RMSE. (Mis-clustering rate
 * with Hungarian label matching lives with the clustering methods.) */
#ifndef FK_METRICS_H
#define FK_METRICS_H

#include <stddef.h>

#include "common/base/err.h"
#include "common/la/mat.h"

/* Fraction of i with y_pred[i] == y_true[i]; n >= 1. Any int is a valid prediction. */
int fk_accuracy(const int *y_true, const int *y_pred, size_t n, double *acc, fk_err *err);

/* Counts: cm(i, j) = #{samples with true class i predicted as j}; cm is
 * initialised here (n_classes x n_classes) and owned by the caller. Labels outside
 * [0, n_classes) give FK_EINVAL naming the first offending sample. */
int fk_confusion(fk_mat *cm, const int *y_true, const int *y_pred, size_t n, int n_classes,
                 fk_err *err);

/* sqrt(mean((a - b)^2)); n >= 1, all values finite. */
int fk_rmse(const double *a, const double *b, size_t n, double *out, fk_err *err);

#endif
