/* Principal component analysis: column means and the top-k principal axes of
 * the centred data (thin SVD, LAPACK dgesdd). Samples are rows. */
#ifndef FK_PCA_H
#define FK_PCA_H

#include "common/base/err.h"
#include "common/la/mat.h"

typedef struct fk_pca {
    fk_mat mean;           /* 1 x d column means */
    fk_mat axes;           /* k x d principal axes as orthonormal rows, by decreasing variance;
                            * sign fixed so each axis' largest-magnitude entry is positive */
    double *variance;      /* k variances along the axes: s_i^2 / (n - 1) */
    double *ratio;         /* k fractions of the total variance */
    double total_variance; /* sum of the column variances (divisor n - 1) */
    size_t k, d;
} fk_pca;

/* Fit on X (n x d, n >= 2) keeping k axes, 1 <= k <= min(n, d). */
int fk_pca_fit(fk_pca *p, const fk_mat *X, size_t k, fk_err *err);
/* Z = (X - mean) axes^T; Z is initialised here (n x k) and owned by the caller. */
int fk_pca_transform(const fk_pca *p, const fk_mat *X, fk_mat *Z, fk_err *err);
void fk_pca_close(fk_pca *p);

#endif
