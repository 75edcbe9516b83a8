/* Seeded generator of the mixture-of-regressions design (spec fedgrem.md 4.3):
 * y = x^T theta_z + e, x ~ N(0, I_p), e ~ N(0, 1), with the GMM design's centres,
 * perturbation h, Dirichlet(5) weights and latent labels (synth_gmm.h). */
#ifndef FK_SYNTH_MOR_H
#define FK_SYNTH_MOR_H

#include <stdint.h>

#include "common/base/err.h"
#include "common/data/dataset.h"

/* K tasks of n samples: X (K x n x p), y (K x n); true theta (K x R x p), w (K x R) for the
 * good tasks 0..K-n_outlier-1 (outlier entries NaN). */
typedef struct fk_mor_data {
    int K, R, p, n, n_outlier;
    double *X, *y, *theta, *w;
} fk_mor_data;

/* Options of the design as a synthetic client spec (synth_spec.h): K tasks (the last
 * n_outlier outliers), R components, p features, n samples per task, perturbation h,
 * outlier coefficient out_coef. Defaults: 10, 1, 5, 10, 200, 0, -3 (reference MoR.R). */
typedef struct fk_synth_mor {
    int K, R, p, n, n_outlier;
    double h, out_coef;
} fk_synth_mor;

void fk_synth_mor_defaults(fk_synth_mor *o);

/* Spec 4.3 design: n = 200 (reference; paper 150), outlier tasks y = x^T (out_coef 1) + e,
 * out_coef = -3 (reference; +3 is the text's reading). Caller frees with fk_mor_data_close. */
FK_CHECKRETURN int fk_mor_make(int K, int R, int p, int n, int n_outlier, double h, double out_coef,
                               uint64_t seed, fk_mor_data *d, fk_err *err);
void fk_mor_data_close(fk_mor_data *d);

/* Task k alone, bit for bit fk_mor_task_dataset(k) of fk_mor_make with the same arguments
 * (every task draws from its own streams). Caller closes ds. */
FK_CHECKRETURN int fk_mor_task_make(int K, int R, int p, int n, int n_outlier, double h,
                                    double out_coef, uint64_t seed, int k, fk_dataset *ds,
                                    fk_err *err);

/* Task k as a client data set: X (n x p) and the regression target in y_raw (unlabelled).
 * Caller closes ds. */
FK_CHECKRETURN int fk_mor_task_dataset(const fk_mor_data *d, int k, fk_dataset *ds, fk_err *err);

#endif
