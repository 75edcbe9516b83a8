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

/* fk_synth_gmm_make for a process that holds some of the tasks (`fedkern sim fedgrem` under
 * mpirun): want NULL is every task; a task with want[k] == 0 gets its name, no rows, while
 * theta and w get every task's truth. The tasks made are bit for bit fk_synth_gmm_make's
 * (each task draws from its own streams). */
FK_CHECKRETURN int fk_synth_gmm_make_some(const fk_synth_gmm *o, uint64_t seed, fk_dataset *tasks,
                                          double *theta, double *w, const unsigned char *want,
                                          fk_err *err);

/* Task k alone, bit for bit as fk_synth_gmm_make makes it among all K: its data (task NULL:
 * none) and its truth theta_k (R x p) and w_k (R), NaN for an outlier task. */
FK_CHECKRETURN int fk_synth_gmm_task(const fk_synth_gmm *o, uint64_t seed, int k, fk_dataset *task,
                                     double *theta_k, double *w_k, fk_err *err);

/* Task k's name as fk_synth_gmm_make gives it ("task3", "outlier9"). */
void fk_synth_gmm_task_name(const fk_synth_gmm *o, int k, char *name, size_t cap);

#endif
