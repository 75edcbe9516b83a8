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
#include "common/data/synth_mor.h"

extern const char *const fk_mor_methods[];

/* One replication of `method`; theta (K x R x p) and w (K x R) receive the estimates
 * (labels aligned across tasks). Parameters (fk_params, spec 3 defaults): c_eta 0.95,
 * kappa 0.1, C 2, lambda0 1, central_passes 0 (2 = reference), align_B 50, restarts 10,
 * grem_step 0.1, fedgmm_R1 3, fedgmm_cov all|first. Returns FK_ENUMERIC on divergence.
 * "fedgrem-mor" and "fedem-mor" run the federated job types (fedgrem_mor.c) through the
 * method table and the in-process simulator instead (R from the design); fedgrem-mor gives
 * the same estimates as "fedgrem" (same streams, same single-task code). */
FK_CHECKRETURN int fk_mor_run(const char *method, const fk_params *prm, const fk_mor_data *d,
                              int rounds, uint64_t seed, double *theta, double *w, fk_err *err);

/* Spec 4.1 errors over the good tasks (max over tasks of the bottleneck errors). */
void fk_mor_errors(const fk_mor_data *d, const double *theta, const double *w, double *e_theta,
                   double *e_w);

#endif
