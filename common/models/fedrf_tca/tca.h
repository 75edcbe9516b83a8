/* Transfer component analysis closed forms (spec fedrf-tca.md §1.5-§1.9).
 *
 * Every variant reduces to one generalized symmetric problem on explicit
 * features Phi (n x D, samples in rows, the first n_s rows from the source):
 *   A w = theta B w,  A = Phi^T H Phi,  B = v v^T + gamma I,  v = Phi^T l,
 * with l_i = 1/n_s on source rows and -1/n_t on target rows. Linear TCA uses
 * Phi = X, kernel TCA Phi = K (the n x n kernel matrix), RF-TCA Phi = the
 * random features. The solver takes the symmetric route of §1.5: with
 * P = B^-1/2 in closed form, the top eigenvectors of P A P = Y^T Y
 * (Y = H Phi P) are the right singular vectors of Y, found from whichever of
 * Y^T Y (D x D) or Y Y^T (n x n) is smaller. */
#ifndef FK_TCA_H
#define FK_TCA_H

#include <stddef.h>

#include "common/base/err.h"
#include "common/la/mat.h"

typedef enum fk_tca_norm {
    FK_TCA_NORM_B = 0, /* W^T B W = I (default) */
    FK_TCA_NORM_A = 1, /* W^T A W = I, the paper's constraint (whitens) */
    FK_TCA_NORM_E = 2  /* unit Euclidean columns, literally Alg. 1 */
} fk_tca_norm;

typedef enum fk_kernel_kind {
    FK_KERNEL_LINEAR = 0, /* x^T y */
    FK_KERNEL_GAUSS = 1   /* exp(-|x-y|^2 / (2 sigma^2)) */
} fk_kernel_kind;

/* The paper's gamma for the normalized-L regularizer lambda_n (L / |l|^2):
 * gamma = lambda_n * n / (n_s n_t). */
double fk_tca_gamma_normalized(double lambda_n, size_t n_s, size_t n_t);

/* Wall time of the solver's stages (seconds), for benchmarks. */
typedef struct fk_tca_times {
    double center; /* v, centring, closed-form B^-1/2 */
    double gram;   /* dsyrk of the smaller Gram matrix */
    double eig;    /* dsyevr, top m */
    double back;   /* singular-vector map and W = P U */
    double krylov; /* block Krylov attempt on Y^T Y (large problems) */
    double krylov_op; /* of which inside the operator Y^T (Y X) */
    double krylov_flops; /* operator flops (4 n D per column) */
    size_t krylov_cols_f; /* of the columns, those applied in float32 (the first phase) */
    int krylov_ok; /* 1 if the Krylov route converged (then gram = eig = 0) */
    size_t gram_dim, other_dim; /* Gram matrix order k and the summed dimension */
} fk_tca_times;

/* Solve the problem above: W (initialised here, D x m), theta[0..m) descending.
 * Errors: m = 0, m >= n or m > D, gamma <= 0, n_s or n_t empty, rank too small. */
FK_CHECKRETURN int fk_tca_solve(const fk_mat *Phi, size_t n_s, double gamma, size_t m,
                                fk_tca_norm norm, fk_mat *W, double *theta, fk_err *err);

/* Same, recording stage times into t (may be NULL). */
FK_CHECKRETURN int fk_tca_solve_timed(const fk_mat *Phi, size_t n_s, double gamma, size_t m,
                                      fk_tca_norm norm, fk_mat *W, double *theta, fk_tca_times *t,
                                      fk_err *err);

/* The same problem from moments instead of rows (what federated clients can pool without
 * moving data): A = Phi^T H Phi (D x D, the centred scatter, symmetric; only read) and
 * v = Phi^T l (the source-minus-target mean difference). W (initialised here, D x m) and
 * theta as fk_tca_solve; errors: m = 0 or m > D, gamma <= 0, rank below m. */
FK_CHECKRETURN int fk_tca_solve_moments(const fk_mat *A, const double *v, double gamma, size_t m,
                                        fk_tca_norm norm, fk_mat *W, double *theta, fk_err *err);

/* Z (initialised here, n x m) = Phi W. */
FK_CHECKRETURN int fk_tca_project(const fk_mat *Phi, const fk_mat *W, fk_mat *Z, fk_err *err);

/* Kernel matrix K (initialised here, n x n) of the rows of X. */
FK_CHECKRETURN int fk_kernel_matrix(const fk_mat *X, fk_kernel_kind kind, double sigma, fk_mat *K,
                                    fk_err *err);

/* Check that source and target can be adapted: same dimension, both
 * non-empty, and 1 <= m < n_s + n_t. */
FK_CHECKRETURN int fk_tca_check_domains(const fk_mat *Xs, const fk_mat *Xt, size_t m, fk_err *err);

/* Stack [Xs; Xt] into X (initialised here). */
FK_CHECKRETURN int fk_tca_stack(const fk_mat *Xs, const fk_mat *Xt, fk_mat *X, fk_err *err);

/* Kernel TCA: Zs, Zt (initialised here, n_s x m and n_t x m) embed the source
 * and target rows. */
FK_CHECKRETURN int fk_ktca_fit(const fk_mat *Xs, const fk_mat *Xt, fk_kernel_kind kind,
                               double sigma, double gamma, size_t m, fk_tca_norm norm, fk_mat *Zs,
                               fk_mat *Zt, fk_err *err);

/* Linear (primal) TCA, D = d: the form that reproduces the published SURF TCA row. */
FK_CHECKRETURN int fk_ltca_fit(const fk_mat *Xs, const fk_mat *Xt, double gamma, size_t m,
                               fk_tca_norm norm, fk_mat *Zs, fk_mat *Zt, fk_err *err);

/* R-TCA (spec §1.7, Eq. (22)), the n x n object RF-TCA converges to: F
 * (initialised here, n x m) holds the top-m eigenvectors of
 * A_R = gamma^-1 H (K - K l l^T K / (gamma + l^T K l)) H, i.e. the normalized
 * transferred features H K W_R, and theta[0..m) its eigenvalues (descending).
 * K is the n x n kernel matrix, source rows first. */
FK_CHECKRETURN int fk_rtca_embed(const fk_mat *K, size_t n_s, double gamma, size_t m, fk_mat *F,
                                 double *theta, fk_err *err);

/* The projection Phi W of TCA with normalization 'B' computed from the kernel
 * K = Phi Phi^T alone: Z (initialised here, n x m) is
 * gamma^-1 (K - K l l^T K / (gamma + l^T K l)) F diag(theta)^-1/2, F and theta
 * from fk_rtca_embed. Column signs follow F. With the exact Gaussian kernel it
 * is the N -> infinity limit of RF-TCA. */
FK_CHECKRETURN int fk_rtca_project(const fk_mat *K, size_t n_s, double gamma, size_t m, fk_mat *Z,
                                   fk_err *err);

/* fk_rtca_project with the Gaussian kernel of the stacked domains, split into
 * Zs and Zt (initialised here). */
FK_CHECKRETURN int fk_rtca_fit(const fk_mat *Xs, const fk_mat *Xt, double sigma, double gamma,
                               size_t m, fk_mat *Zs, fk_mat *Zt, fk_err *err);

/* Divide every row by its Euclidean norm (rows of norm 0 are left alone). */
void fk_rows_l2_normalize(fk_mat *X);

#endif
