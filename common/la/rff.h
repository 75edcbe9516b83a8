/* Random Fourier features of the Gaussian kernel exp(-|x-y|^2 / (2 sigma^2)):
 * phi(x) = N^-1/2 [cos(Omega x); sin(Omega x)], Omega (N x d) with i.i.d.
 * N(0, 1/sigma^2) entries drawn from fk_rng seeded by (seed, d, N, sigma)
 * only, so every client and the server rebuild the same Omega without
 * sending it. Samples are rows: features of X (n x d) are Z (n x 2N), columns
 * 0..N-1 the cosines, N..2N-1 the sines of the same frequencies. */
#ifndef FK_RFF_H
#define FK_RFF_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/err.h"
#include "common/la/mat.h"

/* How the frequencies are drawn. IID is the paper's: i.i.d. N(0, 1/sigma^2)
 * entries. ORTHOGONAL (Yu et al., "Orthogonal Random Features", NeurIPS 2016)
 * makes each block of min(d, N) rows orthogonal and gives each row an
 * independent chi_d length over sigma: every row is still N(0, I/sigma^2),
 * so the kernel estimate stays unbiased up to O(1/d), with a smaller error
 * at the same N. */
typedef enum fk_rff_kind { FK_RFF_IID = 0, FK_RFF_ORTHOGONAL = 1 } fk_rff_kind;

typedef struct fk_rff {
    size_t d;      /* input dimension */
    size_t N;      /* number of frequencies; feature dimension is 2N */
    double sigma;  /* kernel width */
    uint64_t seed; /* shared seed */
    fk_rff_kind kind;
    fk_mat omega;  /* N x d */
} fk_rff;

/* Draw Omega (i.i.d.). sigma <= 0, N = 0 or d = 0 give FK_EINVAL. */
FK_CHECKRETURN int fk_rff_init(fk_rff *r, uint64_t seed, size_t d, size_t N, double sigma,
                               fk_err *err);
/* Same with the frequencies drawn as `kind` says; the same bits on every machine. */
FK_CHECKRETURN int fk_rff_init_kind(fk_rff *r, uint64_t seed, size_t d, size_t N, double sigma,
                                    fk_rff_kind kind, fk_err *err);
/* "iid" or "orthogonal" into *kind; FK_EINVAL with a message otherwise. */
FK_CHECKRETURN int fk_rff_kind_parse(const char *s, fk_rff_kind *kind, fk_err *err);
const char *fk_rff_kind_name(fk_rff_kind kind);
void fk_rff_close(fk_rff *r);

/* Z (initialised here, n x 2N) = features of the rows of X (n x d). */
FK_CHECKRETURN int fk_rff_map(const fk_rff *r, const fk_mat *X, fk_mat *Z, fk_err *err);
/* Same into an existing n x 2N matrix (no allocation). */
FK_CHECKRETURN int fk_rff_map_into(const fk_rff *r, const fk_mat *X, fk_mat *Z, fk_err *err);

/* Back-propagation through the map: given upstream gradients G (n x 2N, row i
 * = dL/dphi(x_i)), dX (n x d, initialised by the caller) receives
 * dL/dx_i = N^-1/2 Omega^T (g_s .* cos(Omega x_i) - g_c .* sin(Omega x_i)). */
FK_CHECKRETURN int fk_rff_backward(const fk_rff *r, const fk_mat *X, const fk_mat *G, fk_mat *dX,
                                   fk_err *err);

/* Exact Gaussian kernel value for two d-vectors. */
double fk_gauss_kernel(const double *x, const double *y, size_t d, double sigma);
/* Exact Gaussian Gram matrix from cross products: K (A->rows x B->rows) holds A B^T on entry
 * (the caller's dgemm or dsyrk) and exp(-|a_i - b_j|^2 / (2 sigma^2)) on return, the squared
 * distance |a_i|^2 + |b_j|^2 - 2 a_i.b_j clamped at 0 against rounding. Fails only with
 * FK_ENOMEM, the message prefixed by who; K is then left to the caller to close. */
FK_CHECKRETURN int fk_gauss_from_cross(const fk_mat *A, const fk_mat *B, double sigma, fk_mat *K,
                                       const char *who, fk_err *err);

#endif
