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

/* Options of fk_eig_op_top_ex (zero-initialise, then set what differs). */
typedef struct fk_eig_op_opts {
    size_t block;        /* vectors per block; 0: fk_eig_op_block(m, n) */
    size_t max_basis;    /* basis columns at most (rounded down to whole blocks) */
    double tol;          /* converged when every wanted residual <= tol * theta_1 */
    uint64_t seed;       /* random start for the columns start does not give */
    const fk_mat *start; /* NULL or n x s starting vectors (s <= block; orthogonalised here) */
    size_t keep;         /* Ritz pairs returned (m <= keep <= block); 0: m */
    int partial;         /* 1: not converged is not an error: stop at the basis limit or when the
                          * residual stalls (a low-precision operator's floor) and return the
                          * Ritz pairs reached; the caller reads residual */
    int one_pass;        /* 1: one block Gram-Schmidt pass against the basis instead of two
                          * (enough when the operator itself is only float-accurate) */
    double residual;     /* out: largest |A u - theta u| / theta_1 of the m wanted pairs */
    size_t applied;      /* out: vectors the operator was applied to */
} fk_eig_op_opts;

/* fk_eig_op_top with options: vals (keep values) and V (n x keep). */
FK_CHECKRETURN int fk_eig_op_top_ex(size_t n, fk_sym_op op, void *ctx, size_t m, fk_eig_op_opts *o,
                                    double *vals, fk_mat *V, fk_err *err);

/* Flip each column of V so that its entry of largest magnitude is positive
 * (a deterministic sign for eigenvectors). */
void fk_eig_fix_signs(fk_mat *V);

#endif
