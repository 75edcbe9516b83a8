/* Fused identity-covariance E-step and sufficient statistics for the per-round client step
 * of FedGrEM and its baselines (spec 1.5), in a component-major layout so every pass is a
 * contiguous, vectorizable loop over the samples. */
#ifndef FK_GMM_ESTEP_H
#define FK_GMM_ESTEP_H

#include <stddef.h>

/* Scratch doubles fk_gmm_estep_stats needs for n samples and R components. */
size_t fk_gmm_estep_work(size_t n, int R);

/* Responsibilities of w, theta (R x p) for X (n x p, row norms xsq; Xt = its p x n transpose,
 * or NULL to use dgemm on X, better for large R p), then nr (R) = their column
 * sums and sx (R x p) = gamma^T X. Same values as fk_gmm_estep + fk_gmm_stats up to rounding
 * (the |x_i|^2 term, common to a row, is left out of the softmax). gamma_t (may be NULL) gets
 * the R x n transposed responsibilities. Returns the observed log-likelihood including
 * -(p/2) ln 2 pi. work: fk_gmm_estep_work(n, R) doubles. */
double fk_gmm_estep_stats(const double *X, const double *Xt, size_t n, int p, const double *xsq,
                          const double *w, const double *theta, int R, double *nr, double *sx,
                          double *work, double *gamma_t);

#endif
