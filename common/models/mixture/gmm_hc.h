/* Model-based agglomerative hierarchical clustering with the unconstrained
 * ("VVV") classification-likelihood criterion (Fraley 1998), run the way R's
 * mclust starts EM: columns standardised, scaled SVD scores
 * (Z = U diag(sqrt(d))), merge cost T(a+b) - T(a) - T(b) with
 * T(C) = n log([n > p] det(W/n) + (tr W + alpha)/n), alpha = tr(W_total)/(n p).
 * The FedGrEM paper's Local-EM starts from this partition (spec fedgrem.md
 * A18); fedkern's default start is k-means++ (fk_gmm_fit_eee). */
#ifndef FK_GMM_HC_H
#define FK_GMM_HC_H

#include <stddef.h>

#include "common/base/err.h"

/* Most rows the agglomeration sees (mclust's default subset); with more rows it
 * runs on an evenly strided subset and the rest join the nearest cluster mean. */
#define FK_GMM_HC_MAX_ROWS 2000
/* Most features: every cluster keeps a p x p scatter matrix. */
#define FK_GMM_HC_MAX_P 100

/* Cut of the merge tree at G clusters: labels[i] in 0..G-1, numbered by each
 * cluster's smallest row index. X is n x p row-major. */
FK_CHECKRETURN int fk_gmm_hc_vvv(const double *X, size_t n, int p, int G, int *labels, fk_err *err);

/* The agglomeration alone, on coordinates Z (n x q, n <= FK_GMM_HC_MAX_ROWS) as
 * given: no standardising, no subset. Same labelling. */
FK_CHECKRETURN int fk_gmm_hc_agglomerate(const double *Z, size_t n, int q, int G, int *labels,
                                         fk_err *err);

#endif
