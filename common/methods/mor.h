/* Mixture-of-regressions (MoR) instance of FedGrEM and its MoR baselines (spec fedgrem.md
 * 1.1 eq. (5), 1.5, 2.1-2.7, 4.3): y = x^T theta_z + e, x ~ N(0, I_p), e ~ N(0, 1), run as a
 * direct (centralised-loop) simulation. Methods: fedgrem, fedem, local-em (mixture of
 * regressions EM, per-component noise variance), local-grem, pooled-em, pooled-grem, fedgmm
 * (spec 2.5: R1 Gaussian x-components crossed with R regression components). */
#ifndef FK_MOR_H
#define FK_MOR_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/err.h"
#include "common/base/params.h"

extern const char *const fk_mor_methods[];

/* K tasks of n samples: X (K x n x p), y (K x n); true theta (K x R x p), w (K x R) for the
 * good tasks 0..K-n_outlier-1 (outlier entries NaN). */
typedef struct fk_mor_data {
    int K, R, p, n, n_outlier;
    double *X, *y, *theta, *w;
} fk_mor_data;

/* Spec 4.3 design from the GMM design's centres, perturbation h and Dirichlet(5) weights:
 * n = 200 (reference; paper 150), outlier tasks y = x^T (out_coef 1) + e, out_coef = -3
 * (reference; +3 is the text's reading). Caller frees with fk_mor_data_close. */
int fk_mor_make(int K, int R, int p, int n, int n_outlier, double h, double out_coef,
                uint64_t seed, fk_mor_data *d, fk_err *err);
void fk_mor_data_close(fk_mor_data *d);

/* One replication of `method`; theta (K x R x p) and w (K x R) receive the estimates
 * (labels aligned across tasks). Parameters (fk_params, spec 3 defaults): c_eta 0.95,
 * kappa 0.1, C 2, lambda0 1, central_passes 0 (2 = reference), align_B 50, restarts 10,
 * grem_step 0.1, fedgmm_R1 3, fedgmm_cov all|first. Returns FK_ENUMERIC on divergence. */
int fk_mor_run(const char *method, const fk_params *prm, const fk_mor_data *d, int rounds,
               uint64_t seed, double *theta, double *w, fk_err *err);

/* Spec 4.1 errors over the good tasks (max over tasks of the bottleneck errors). */
void fk_mor_errors(const fk_mor_data *d, const double *theta, const double *w, double *e_theta,
                   double *e_w);

#endif
