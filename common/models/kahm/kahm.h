/* Kernel affine hull machines (KAHM; Kumar et al., JAIR 83, 2025, App. A-B; spec
 * ../shared/specs/kahm.md §2-§7): a closed-form, parameter-free class model whose
 * distance function Gamma(y) = ||y - A(y)|| says how far y is from the affine hull of a
 * class's samples. One KAHM per class (or per k-means cluster of a large class); a
 * classifier takes the class of the smallest distance (eqs. 63, 64).
 *
 * Everything here is dense algebra on BLAS/LAPACK (no iterative training): a PCA
 * projection, a Cholesky whitening, one N x N eigendecomposition and a fixed-point
 * iteration for the ridge parameter. Matrices are row-major double arrays, samples in
 * rows. Randomness (k-means of Remark 12 only) comes from fk_rng with an explicit seed. */
#ifndef FK_MODELS_KAHM_H
#define FK_MODELS_KAHM_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/err.h"

typedef struct fk_kahm_opts {
    int n_max;            /* subspace dimension cap (App. B; 20) */
    double spread_tol;    /* min per-component range of the encodings (1e-3) */
    double eig_floor;     /* covariance eigenvalues <= this are dropped (2.22e-16) */
    double lambda_tol;    /* absolute stop of the lambda fixed point (0.01) */
    int lambda_maxit;     /* iterations of the lambda fixed point (100) */
    int lambda_converged; /* 1: keep the final lambda; 0: the last one used (reference) */
    int nb;               /* samples per KAHM before a class is partitioned (1000) */
    int min_cluster;      /* smallest k-means cluster (30) */
    int partition_ceil;   /* S = ceil(N/nb) instead of round(N/nb) */
    int km_restarts;      /* k-means++ restarts (10) */
    int km_maxit;         /* Lloyd iterations per restart (10000) */
    uint64_t seed;        /* k-means seed */
    int path;             /* eigenvectors from 0: the smaller of Gram / covariance, 1: the
                             N x N Gram matrix, 2: the p x p covariance (tests compare them) */
} fk_kahm_opts;

/* The spec's defaults (§6). */
void fk_kahm_opts_default(fk_kahm_opts *o);

/* One affine hull machine on N samples of dimension p. */
typedef struct fk_kahm {
    int N, p, n;        /* samples, input dimension, subspace dimension */
    double lambda, tau; /* ridge used, tau = 2 ||Y||_F^2 / (pN) */
    double model_err;   /* 1 - exp(-max_i Gamma(y^i) / p) over the training samples */
    int iters;          /* lambda iterations */
    double *P;          /* n x p encoding (rows: leading covariance eigenvectors) */
    double *L;          /* n x n lower Cholesky factor of theta = cov(P y) */
    double *Xw;         /* N x n whitened encodings L^-1 P y^i */
    double *M;          /* N x p, (K + lambda I)^-1 Y */
    double *b;          /* N, (K + lambda I)^-1 1 */
} fk_kahm;

/* Subspace dimension of App. B for Y (N x p, leading dimension ldy): n in [1, n_max].
 * N < 2 or degenerate data: FK_EINVAL naming the reason. */
FK_CHECKRETURN int fk_kahm_dim(const double *Y, size_t N, size_t p, size_t ldy,
                               const fk_kahm_opts *o, int *n, fk_err *err);

/* Fit one KAHM on Y (N x p, leading dimension ldy); N >= 2, all values finite. */
FK_CHECKRETURN int fk_kahm_fit(fk_kahm *k, const double *Y, size_t N, size_t p, size_t ldy,
                const fk_kahm_opts *o, fk_err *err);
void fk_kahm_close(fk_kahm *k);
/* Allocate the arrays of a KAHM with the given sizes (for decoders); zeroed. */
FK_CHECKRETURN int fk_kahm_alloc(fk_kahm *k, int N, int p, int n, fk_err *err);

/* Distances Gamma (nt) of the rows of T (nt x p, leading dimension ldt), and A(T) into
 * A (nt x p, may be NULL). A point whose kernel weights cancel gets +inf (§7.2). */
FK_CHECKRETURN int fk_kahm_dist(const fk_kahm *k, const double *T, size_t nt, size_t ldt,
                                double *gamma, double *A, fk_err *err);

/* The KAHMs of one class held by one party: one, or one per cluster (Remark 12). */
typedef struct fk_kahm_class {
    int cls;      /* class id */
    int N;        /* samples of the class */
    int n_parts;
    fk_kahm *parts;
} fk_kahm_class;

/* Number of clusters for N samples (Remark 12, §12 item 1): round or ceil of N/nb, >= 1. */
int fk_kahm_n_parts(size_t N, const fk_kahm_opts *o);
/* Fit the class model; partitions by k-means when the rule asks for more than one part,
 * reducing the count until every cluster has >= min_cluster samples. */
FK_CHECKRETURN int fk_kahm_class_fit(fk_kahm_class *c, int cls, const double *Y, size_t N, size_t p,
                                     size_t ldy, const fk_kahm_opts *o, fk_err *err);
void fk_kahm_class_close(fk_kahm_class *c);

/* The class models one party holds. */
typedef struct fk_kahm_set {
    int n_classes;     /* C: class ids are in [0, C) */
    int n;             /* classes held */
    fk_kahm_class *cls;
} fk_kahm_set;

/* Fit a model for every class present in y (N labels in [0, C)). */
FK_CHECKRETURN int fk_kahm_set_fit(fk_kahm_set *s, const double *X, size_t N, size_t p, size_t ldx,
                    const int *y, int C, const fk_kahm_opts *o, fk_err *err);
/* fk_kahm_set_fit, but a class whose model cannot be fitted from its rows (FK_EINVAL or
 * FK_ENUMERIC from fk_kahm_class_fit: one sample, every row equal, ...) is left out of s:
 * skip(ud, class id, its sample count, why) is called for it and the other classes are
 * fitted. Other errors (out of memory) fail the whole fit. skip NULL: fk_kahm_set_fit. */
typedef void (*fk_kahm_skip_fn)(void *ud, int cls, size_t n, const fk_err *why);
FK_CHECKRETURN int fk_kahm_set_fit_partial(fk_kahm_set *s, const double *X, size_t N, size_t p,
                                           size_t ldx, const int *y, int C, const fk_kahm_opts *o,
                                           fk_kahm_skip_fn skip, void *ud, fk_err *err);
void fk_kahm_set_close(fk_kahm_set *s);
/* D (nt x C): D[i*C + c] = Gamma_c(T_i) for held classes; classes not held are left as
 * they were when acc = 1 (min taken: eq. 18 across parties) and +inf when acc = 0. */
FK_CHECKRETURN int fk_kahm_set_dist(const fk_kahm_set *s, const double *T, size_t nt, size_t ldt,
                                    double *D, int acc, fk_err *err);

/* Labels by eq. (63)/(64): argmin_c D[i*C + c] (smallest class id on ties); dmin may be
 * NULL. A row of +inf gets label -1. */
void fk_kahm_argmin(const double *D, size_t nt, int C, int *label, double *dmin);

/* Assumption diagnostics (§7.4) from global class distances D (nt x C) on training data
 * with labels y: E1 = max over own class |1 - exp(-Gamma/p)|, E2 = mean over other classes
 * of exp(-Gamma/p) (68), E2_noscale = the same of exp(-Gamma). */
void fk_kahm_diag(const double *D, const int *y, size_t nt, int C, int p, double *E1, double *E2,
                  double *E2_noscale);

/* Theory (§4.2-4.3, spec §11.1 item 11). The risk bound of Theorems 4.2-4.3 without the
 * empirical term, 4/sqrt(N) + sqrt(log(1/delta)/(2N)), and the sample-complexity lower bound
 * (56), (1/eps^2)(4 + sqrt(log(1/delta)/2))^2. NaN outside N >= 1, eps > 0, delta in (0, 1). */
double fk_kahm_risk_bound(double N, double delta);
double fk_kahm_sample_complexity(double eps, double delta);

/* k-means with k-means++ seeding and restarts (Lloyd), deterministic for a seed: assign
 * (N) gets cluster ids in [0, k). Internal to the KAHM module. */
FK_CHECKRETURN int fk__kahm_kmeans(const double *Y, size_t N, size_t p, size_t ldy, int k,
                                   int restarts, int maxit, uint64_t seed, int *assign,
                                   fk_err *err);

#endif
