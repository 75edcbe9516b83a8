/* FedGMM for mixtures of regressions (spec fedgrem.md 2.5; Wu et al. 2023 as implemented in the
 * FedGrEM reference): per task R1 Gaussian x-components crossed with the R regressions,
 * pi (R1 x R, entry q = a R + r) local, x-means, x-covariances and coefficients averaged by the
 * server. The pieces here are shared by the direct simulation (mor.c) and the fedgmm-mor job
 * (fedgmm_mor.c), so both run the same arithmetic. */
#ifndef FK_FEDGMM_H
#define FK_FEDGMM_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/err.h"
#include "common/models/mixture/mor_local.h"

/* Work space of one task's step: n points, p features, R regressions, R1 x-components. */
typedef struct fk_fedgmm_ws {
    double *L, *Z, *LX, *GG, *U;
} fk_fedgmm_ws;

FK_CHECKRETURN int fk_fedgmm_ws_open(fk_fedgmm_ws *g, size_t n, int p, int R, int R1, fk_err *err);
void fk_fedgmm_ws_close(fk_fedgmm_ws *g);

/* Task k's x-mixture start: an EEE mixture of R1 components fitted to its x (restarts, the
 * stream of task k) gives mu (R1 x p) and the shared covariance, copied to every Sig_a
 * (R1 x p x p). */
FK_CHECKRETURN int fk_fedgmm_init_x(const double *X, size_t n, int p, int R1, int restarts,
                                    uint64_t seed, int k, double *mu, double *Sig, fk_err *err);
/* pi_{a,r} = w0_r / R1 from the task's aligned Local-EM weights w0 (R). */
void fk_fedgmm_pi_init(const double *w0, int R, int R1, double *pi);
/* ALIGN (B task orders) of the K tasks' x-means (K x R1 x p), permuted in place. */
FK_CHECKRETURN int fk_fedgmm_align_x(double *mu, int K, int R1, int p, int B, uint64_t seed,
                                     fk_err *err);

/* One task's local step at (pi, mu, Sig, theta): joint posteriors over (a, r); pi <- their
 * means; mu, Sig <- the x-moments weighted by the posterior mass of each a; loc (R x p) <-
 * weighted least squares (ridge 1e-5) with the mass of each r. FK_ENUMERIC when a covariance
 * is not positive definite or a system is singular. */
FK_CHECKRETURN int fk_fedgmm_local(const double *X, const double *y, size_t n, int p, int R, int R1,
                                   const double *theta, double *pi, double *mu, double *Sig,
                                   double *loc, fk_mor_ws *s, fk_fedgmm_ws *g, fk_err *err);

/* The server's step over K tasks (stacked pi, mu, Sig, loc): x-means weighted by each task's
 * mass sum_r pi_{a,r}, covariances averaged (all components; cov_first: every a gets the mean
 * of the first [COMPAT]), coefficients averaged. */
void fk_fedgmm_average(int K, int R, int R1, int p, const double *pi, const double *mu,
                       const double *Sig, const double *loc, int cov_first, double *mbar,
                       double *sbar, double *tbar);

/* Mixture weights w_r = sum_a pi_{a,r} (R). */
void fk_fedgmm_weights(const double *pi, int R, int R1, double *w);

#endif
