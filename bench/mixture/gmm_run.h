/* One replication of a mixture method on K task datasets, through the method
 * operations table and the in-process simulator (pooled-em runs until it has
 * converged, whatever `rounds` says). Shared by `fedkern sim fedgrem` and the
 * FedGrEM benchmarks. */
#ifndef FK_GMM_RUN_H
#define FK_GMM_RUN_H

#include <stdint.h>

#include "common/methods/sim.h"

typedef struct fk_gmm_result {
    int K, R, p;
    double *theta;  /* K x R x p, labels aligned across tasks */
    double *w;      /* K x R */
    double *sigma;  /* K x p x p for EEE methods (local-em, pooled-em), else NULL */
    double lambda;  /* last penalty (fedgrem) */
    int passes;     /* central passes in the last round (fedgrem) */
} fk_gmm_result;

/* The Gaussian-mixture job types fk_gmm_run takes. */
extern const char *const fk_gmm_methods[];

FK_CHECKRETURN int fk_gmm_run(const char *method, const fk_params *p, const fk_dataset *tasks,
                              int K, int rounds, uint64_t seed, fk_sim_progress progress, void *ctx,
                              fk_gmm_result *res, fk_err *err);
void fk_gmm_result_close(fk_gmm_result *res);

/* Hard labels of points X (n x p) of task k under the result's model. */
FK_CHECKRETURN int fk_gmm_result_labels(const fk_gmm_result *res, int k, const double *X, size_t n,
                                        int *labels, fk_err *err);

/* Simulation errors over the good tasks 0..n_good-1 (spec 4.1):
 * E_theta = max_k min_pi max_r |theta_hat - theta*|, E_w likewise. */
void fk_gmm_sim_errors(const fk_gmm_result *res, const double *theta_true, const double *w_true,
                       int n_good, double *e_theta, double *e_w);
#endif
