/* Subspace comparisons for checking eigen-solvers against each other: the
 * sin(Theta) distance between two column spans, the spectral norm of a
 * symmetric matrix, and column centring (H M with the centring matrix H). */
#ifndef FK_SUBSPACE_H
#define FK_SUBSPACE_H

#include "common/base/err.h"
#include "common/la/mat.h"

/* *out = |sin Theta(span X, span Y)|_F = sqrt(m - |Qx^T Qy|_F^2) for X, Y both
 * n x m of full column rank (orthonormal bases by Householder QR). 0 for equal
 * spans, sqrt(m) for orthogonal ones. */
FK_CHECKRETURN int fk_sin_theta(const fk_mat *X, const fk_mat *Y, double *out, fk_err *err);

/* *out = max |eigenvalue| of the symmetric n x n A (A is not modified). */
FK_CHECKRETURN int fk_sym_norm2(const fk_mat *A, double *out, fk_err *err);

/* Subtract each column's mean from that column (M = H M), in place. */
FK_CHECKRETURN int fk_center_columns(fk_mat *M, fk_err *err);

#endif
