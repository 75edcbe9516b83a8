/* RF-TCA (spec §1.8): TCA on random Fourier features. The source and target
 * rows are mapped with one shared Omega, the §1.5 problem is solved with
 * Phi = Sigma^T (D = 2N) and both domains are projected with W_RF. */
#ifndef FK_RFTCA_H
#define FK_RFTCA_H

#include <stdint.h>

#include "common/la/mat.h"
#include "common/la/rff.h"
#include "common/models/fedrf_tca/tca.h"

typedef struct fk_rftca_opts {
    size_t N;         /* random frequencies (feature dimension 2N) */
    size_t m;         /* projected dimension */
    double sigma;     /* Gaussian kernel width */
    double gamma;     /* regularizer (paper's gamma) */
    uint64_t seed;    /* Omega seed */
    fk_tca_norm norm; /* column normalization, FK_TCA_NORM_B by default */
    fk_rff_kind features; /* FK_RFF_IID (the paper's) by default */
} fk_rftca_opts;

/* Fit on the stacked domains. W (2N x m) and theta (m values) are optional
 * outputs (NULL to skip); Zs, Zt (initialised here) are the projections. */
FK_CHECKRETURN int fk_rftca_fit(const fk_mat *Xs, const fk_mat *Xt, const fk_rftca_opts *o,
                                fk_mat *Zs, fk_mat *Zt, fk_mat *W, double *theta, fk_err *err);

/* The federated extractor's features of the random features Phi (b x 2N) under W (2N x m,
 * row-major): U = Phi W (b x m) and its rows normalized, F_i = U_i / (|U_i| + eps); norms (b)
 * gets |U_i|. U and F are b x m, allocated by the caller. */
void fk_rftca_project_norm(const fk_mat *Phi, const double *W, size_t m, double eps, fk_mat *U,
                           fk_mat *F, double *norms);

#endif
