/* Seeded generator of the FedGrEM simulation design (spec fedgrem.md 4.2):
 * K tasks, the last n_outlier of them outliers, R components in p dimensions,
 * task centres at exact distance h from common centres, Dirichlet weights. */
#ifndef FK_SYNTH_GMM_H
#define FK_SYNTH_GMM_H

#include <stdint.h>

#include "common/base/err.h"
#include "common/data/dataset.h"

typedef struct fk_synth_gmm {
    int K, R, p, n;     /* tasks, components, dimension, samples per task */
    int n_outlier;      /* the last n_outlier tasks are outliers */
    double h;           /* |theta_r^(k) - centre_r| for good tasks */
    double dir_alpha;   /* Dirichlet parameter of the weights (5) */
    double out_mean;    /* outlier x ~ N(out_mean 1, out_var I): 2.5 (reference) / 2 (text) */
    double out_var;     /* 4 (reference) / 3 (text) */
} fk_synth_gmm;

/* The paper's defaults: K=10, R=5, p=10, n=150, one outlier, h=0, alpha 5, N(2.5 1, 4 I). */
void fk_synth_gmm_defaults(fk_synth_gmm *o);

/* Common centres: the paper's table for R=5, p=10; otherwise N(0, 9 I) draws from seed. */
FK_CHECKRETURN int fk_synth_gmm_centres(const fk_synth_gmm *o, uint64_t seed, double *centres,
                                        fk_err *err);

/* Fill K datasets (caller closes them) labelled with the true component (0 for
 * outlier tasks); theta (K x R x p) and w (K x R) receive the true parameters
 * (outlier entries: NaN). */
FK_CHECKRETURN int fk_synth_gmm_make(const fk_synth_gmm *o, uint64_t seed, fk_dataset *tasks,
                                     double *theta, double *w, fk_err *err);

#endif
