/* Symmetric eigen-solvers: top-m eigenpairs of a symmetric matrix and of a
 * symmetric-definite pencil (A, B), via LAPACK's MRRR driver with an index
 * range, so only the wanted eigenvectors are computed. */
#ifndef FK_EIG_H
#define FK_EIG_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/err.h"
#include "common/la/mat.h"

/* Top-m eigenpairs of symmetric A (n x n; only the upper triangle in row-major
 * terms is read, A is not modified). vals[0..m) descending; V is initialised
 * here to n x m with the eigenvectors as orthonormal columns. */
FK_CHECKRETURN int fk_eig_sym_top(const fk_mat *A, size_t m, double *vals, fk_mat *V, fk_err *err);

/* Top-m of the generalized problem A w = theta B w with B symmetric positive
 * definite: Cholesky B = L L^T, C = L^-1 A L^-T (dsygst), dsyevr with an index
 * range on C, W = L^-T U. W (initialised here, n x m) satisfies W^T B W = I. */
FK_CHECKRETURN int fk_eig_gen_top(const fk_mat *A, const fk_mat *B, size_t m, double *vals,
                                  fk_mat *W, fk_err *err);

/* Symmetric PSD operator y = A x applied to the b rows of X (b x n,
 * row-major, leading dimension ldx) into the rows of Y (b x n, leading
 * dimension ldy). */
typedef void (*fk_sym_op)(void *ctx, const double *X, size_t ldx, double *Y, size_t ldy, size_t b);

/* Vectors per block fk_eig_op_top applies the operator to, for m eigenpairs
 * of an n x n operator (callers size their work buffers with it). */
size_t fk_eig_op_block(size_t m, size_t n);

/* Top-m eigenpairs of an n x n symmetric positive semi-definite operator by a
 * block Krylov method with Rayleigh-Ritz (full reorthogonalisation, basis up
 * to max_basis columns, random start from seed). Converged when every Ritz
 * residual |A u - theta u| <= tol * theta_1. FK_ENUMERIC if the basis limit is
 * reached first (callers then fall back to fk_eig_sym_top). */
FK_CHECKRETURN int fk_eig_op_top(size_t n, fk_sym_op op, void *ctx, size_t m, size_t max_basis,
                                 double tol, uint64_t seed, double *vals, fk_mat *V, fk_err *err);

/* Flip each column of V so that its entry of largest magnitude is positive
 * (a deterministic sign for eigenvectors). */
void fk_eig_fix_signs(fk_mat *V);

#endif
