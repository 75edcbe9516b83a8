/* DICA estimator internals shared by common/models/dica*.c (not a public API). */
#ifndef FK_MODELS_DICA_INT_H
#define FK_MODELS_DICA_INT_H

#include <stddef.h>

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

#endif
