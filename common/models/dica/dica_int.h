/* DICA estimator internals shared by common/models/dica*.c (not a public API). */
#ifndef FK_MODELS_DICA_INT_H
#define FK_MODELS_DICA_INT_H

#include <stddef.h>

#include "common/base/err.h"
#include "common/la/mat.h"

#define FK__DICA_TAU_RANK 1e-10   /* relative cut of the kernel and output spectra (§5.3) */
#define FK__DICA_COMPLEX_TOL 1e-8 /* |Im gamma| allowed relative to |gamma_1| (§5.2) */

/* 1 when a[0..n) are all finite. */
int fk__dica_all_finite(const double *a, size_t n);
/* di[i] = the domain index of sample i, ids[0..N) the domain ids in order of first appearance,
 * cnt[k] += the samples of domain k (ids, di, cnt n long); returns N. */
size_t fk__dica_domain_index(const long *dom, size_t n, long *ids, size_t *di, double *cnt);
/* w^T P w for column k of W (D x m), P dense symmetric D x D; tmp has room for D. */
double fk__dica_quad_col(const double *P, const fk_mat *W, size_t k, double *tmp);

/* A (k x k, symmetric) := (A + eps I)^{-1/2} (eigenvalues below 0 taken as 0). */
FK_CHECKRETURN int fk__dica_inv_sqrt_sym(double *A, size_t k, double eps, fk_err *err);
/* The supervised eigenproblem's last step: dgeev of T (Dy x Dy, destroyed), the m leading
 * eigenvalues by real part into gamma (rank and complex checks, one error each), and the
 * columns W[:, k] = Y a_k (Y rows x Dy, W rows x m, both row-major). */
FK_CHECKRETURN int fk__dica_top_real(double *T, size_t Dy, const double *Y, size_t rows, size_t m,
                                     int rank_check, double *gamma, fk_mat *W, fk_err *err);

#endif
