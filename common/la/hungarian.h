/* Linear assignment (Hungarian / Kuhn-Munkres, O(n^3)), the mis-clustering
 * rate under the best one-to-one matching of cluster labels to classes, and the
 * adjusted Rand index (both compare a clustering with known classes). */
#ifndef FK_HUNGARIAN_H
#define FK_HUNGARIAN_H

#include <stddef.h>

#include "common/base/err.h"

/* Minimum-cost perfect matching of an n x n row-major cost matrix.
 * assign[r] = column given to row r; *total (may be NULL) = its cost.
 * Deterministic: ties are broken by the lowest column index. Costs must be finite. */
FK_CHECKRETURN int fk_hungarian(const double *cost, int n, int *assign, double *total, fk_err *err);

/* 1 - (matched count / n) under the label matching that maximizes the matched
 * count; truth in [0, n_classes), pred in [0, n_clusters). n = 0 gives 0. */
FK_CHECKRETURN int fk_misclustering_rate(const int *truth, const int *pred, size_t n, int n_classes,
                                         int n_clusters, double *rate, fk_err *err);

/* Adjusted Rand index (Hubert & Arabie 1985) of two labellings: 1 for identical partitions
 * (whatever the label names), about 0 for independent ones, negative below chance. Same label
 * ranges as fk_misclustering_rate; n < 2 or both partitions trivial (one block each, or all
 * singletons) gives 1 when they agree, else 0. */
FK_CHECKRETURN int fk_adjusted_rand_index(const int *truth, const int *pred, size_t n,
                                          int n_classes, int n_clusters, double *ari, fk_err *err);

#endif
