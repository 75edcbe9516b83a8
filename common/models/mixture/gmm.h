/* Gaussian-mixture numerics shared by FedGrEM and its baselines (spec
 * shared/specs/fedgrem.md): identity-covariance E-step, exact and gradient
 * M-steps, the EEE full-covariance EM used as Local-EM / initializer, label
 * alignment across tasks, the central penalized update, and error metrics.
 * Parameters are row-major: centres R x p, data n x p, responsibilities n x R. */
#ifndef FK_GMM_H
#define FK_GMM_H

#include <stddef.h>

#include "common/base/err.h"
#include "common/la/mat.h"
#include "common/la/rng.h"

/* Squared distances D[i,r] = |x_i - c_r|^2 via one dgemm; xsq = row norms of X
 * (NULL: computed here). */
void fk_gmm_sqdist(const double *X, size_t n, int p, const double *xsq, const double *C, int R,
                   double *D);

/* Identity-covariance E-step: gamma[i,r] = posterior of component r given
 * weights w and centres theta (log-sum-exp). Returns the observed
 * log-likelihood including the -(p/2) ln 2 pi constant. gamma is n x R. */
double fk_gmm_estep(const double *X, size_t n, int p, const double *xsq, const double *w,
                    const double *theta, int R, double *gamma);

/* Column sums of gamma (nr, R) and gamma^T X (sx, R x p, dgemm). */
void fk_gmm_stats(const double *X, size_t n, int p, const double *gamma, int R, double *nr,
                  double *sx);

/* Gradient M-step for the means: theta_r += eta_r (sx_r - nr_r theta_r)/n. */
void fk_gmm_grad_step(double *theta, const double *nr, const double *sx, size_t n, int p, int R,
                      const double *eta);

/* Exact M-step for the means: theta_r = sx_r / max(nr_r, 1e-10 n). */
void fk_gmm_exact_means(double *theta, const double *nr, const double *sx, size_t n, int p, int R);

/* EEE mixture (one full covariance shared by the components): k-means++ starts
 * + Lloyd, then EM to relative tolerance 1e-5; best of `restarts` fits.
 * Outputs w (R), mu (R x p), sigma (p x p), loglik. Near-singular covariances
 * are regularised (+1e-6 tr/p I); *regularised (may be NULL) is set to 1 then. */
typedef struct fk_eee_fit {
    double *w, *mu, *sigma;
    double loglik;
    int iters;
    int regularised;
} fk_eee_fit;

FK_CHECKRETURN int fk_gmm_fit_eee(const double *X, size_t n, int p, int R, int restarts,
                                  fk_rng *rng, fk_eee_fit *out, fk_err *err);
/* The same EM from one start: mclust's hierarchical partition (fk_gmm_hc_vvv). */
FK_CHECKRETURN int fk_gmm_fit_eee_hc(const double *X, size_t n, int p, int R, fk_eee_fit *out,
                                     fk_err *err);

/* The EEE pieces the federated pooled-em job splits between server and clients. */
/* Lower Cholesky factor of sigma (p x p) into chol; a singular or ill-conditioned sigma is
 * regularised in place first (+1e-6 tr/p I, growing) and *regularised (may be NULL) set to 1.
 * FK_ENUMERIC when even that fails. */
int fk_gmm_eee_chol(double *sigma, int p, double *chol, int *regularised);
/* E-step given the factor: posteriors into G (n x R), returns the log-likelihood.
 * Z (n x p) and mu_t (R x p) are work space. */
double fk_gmm_eee_estep(const double *X, size_t n, int p, const double *w, const double *mu,
                        const double *chol, int R, double *G, double *Z, double *mu_t);
/* M-step from sums over n samples: nr (R), sx = sum gamma x (R x p), xtx = sum x x^T (p x p).
 * FK_ENUMERIC when a component holds under 1e-8 n of the weight. */
int fk_gmm_eee_mstep(const double *nr, const double *sx, const double *xtx, double n, int p, int R,
                     double *w, double *mu, double *sigma);

/* EEE posterior log-densities -> hard labels (argmax, ties to the smallest r). */
FK_CHECKRETURN int fk_gmm_predict_eee(const double *X, size_t n, int p, const double *w,
                                      const double *mu, const double *sigma, int R, int *labels,
                                      fk_err *err);
/* Identity-covariance hard labels: argmax_r ln w_r - |x - theta_r|^2 / 2. */
void fk_gmm_predict(const double *X, size_t n, int p, const double *w, const double *theta, int R,
                    int *labels);

/* Largest magnitude a centre, weight or statistic from another party may have:
 * squared distances over p <= 1e7 features and sums over 1e5 tasks stay finite. */
#define FK_GMM_MAX_ABS 1e100
/* Most features a GMM job takes: every party holds p x p covariances. */
#define FK_GMM_MAX_P 10000

/* Label alignment across K tasks (spec 1.4): B random task orders, Hungarian
 * step per added task, best full score kept. M is K x R x p; perm[k*R + r] =
 * task k's own label assigned to common label r. */
FK_CHECKRETURN int fk_gmm_align(const double *M, int K, int R, int p, int B, fk_rng *rng, int *perm,
                                fk_err *err);

/* Central penalized update for one component (spec 1.6): given theta_tilde
 * (K x p) and sizes n (K), minimize sum_k n_k/2 |t_k - tt_k|^2 + sqrt(n_k) lambda |t_k - beta|.
 * compat_passes = 0: converge to 1e-10 (cap 10000); 2: the reference's two passes.
 * lambda = +inf fuses everything at the n-weighted mean. work has K x p doubles.
 * Returns the number of passes. */
int fk_gmm_central(const double *tt, const double *nk, int K, int p, double lambda,
                   int compat_passes, double *theta, double *beta, double *work);
/* The same converged solution as fk_gmm_central(..., 0, ...) (for lambda in (0, inf), K >= 2),
 * computed faster: exact when every task is fused at the weighted mean, otherwise
 * majorize-minimize (IRLS) on beta's Huber objective from the better of the weighted mean and
 * the warm start given in beta (e.g. the previous round's; ignored if not finite), stopping by
 * the spec's rule |beta - beta_old| <= 1e-10 (1 + |beta_old|). Returns the number of passes. */
int fk_gmm_central_mm(const double *tt, const double *nk, int K, int p, double lambda,
                      double *theta, double *beta, double *work);
/* The objective F of the central update at (theta, beta). */
double fk_gmm_central_objective(const double *tt, const double *nk, int K, int p, double lambda,
                                const double *theta, const double *beta);

/* lambda[t] = kappa lambda[t-1] + C sqrt(p + ln K), lambda[0] = lambda0. */
double fk_gmm_lambda_next(double prev, double kappa, double C, int p, int K);

/* min over permutations pi of max_r cost(r, pi(r)) (bottleneck assignment), R x R. */
double fk_gmm_bottleneck(const double *cost, int R);
/* Estimation errors of one task, labels matched separately (spec 4.1). */
double fk_gmm_err_theta(const double *est, const double *truth, int R, int p);
double fk_gmm_err_w(const double *est, const double *truth, int R);

#endif
