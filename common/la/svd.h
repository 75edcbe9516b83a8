/* Thin singular value decomposition A = U diag(s) Vt (LAPACK dgesdd). */
#ifndef FK_SVD_H
#define FK_SVD_H

#include "common/base/err.h"
#include "common/la/mat.h"

typedef struct fk_svd {
    fk_mat U;  /* m x r, orthonormal columns */
    double *s; /* r singular values, descending */
    fk_mat Vt; /* r x n, orthonormal rows */
    size_t r;  /* min(m, n) */
} fk_svd;

/* Decompose a copy of the m x n matrix A (A is not modified). Non-finite
 * entries give FK_EINVAL; no convergence gives FK_ENUMERIC. */
int fk_svd_init(fk_svd *svd, const fk_mat *A, fk_err *err);
void fk_svd_close(fk_svd *svd);

#endif
