/* DICA / UDICA (Muandet, Balduzzi, Schölkopf, ICML 2013; spec shared/specs/dica.md).
 *
 * Domain-invariant component analysis finds m directions that keep the
 * functional relation X -> Y (DICA: central subspace; UDICA: variance) while
 * shrinking the distributional variance between training domains. Every
 * solver here goes through the finite-feature form of the eigenproblem
 * (spec §6, (S2)/(S3)/(S4)) fed by plain sums over samples (§7.3), so the
 * kernel version (features = the empirical kernel map of the centred Gram
 * matrix, §5.3), the random-feature version (§7) and the federated job (sums
 * added over clients) share one code path. The direct O(n^3) solver of §5.2
 * is here as the reference the tests compare against.
 *
 * Matrices are fk_mat (row-major, samples in rows). Nothing here knows of
 * rounds, bundles or federation. */
#ifndef FK_MODELS_DICA_H
#define FK_MODELS_DICA_H

#include <stddef.h>

#include "common/base/err.h"
#include "common/la/mat.h"

/* The four variants differ in one term each (spec §3.6 [choice]): KPCA = UDICA with
 * q_weight 0, COIR = DICA with q_weight 0. */
typedef enum fk_dica_variant {
    FK_DICA_DICA = 0,
    FK_DICA_UDICA = 1,
    FK_DICA_COIR = 2,
    FK_DICA_KPCA = 3
} fk_dica_variant;

const char *fk_dica_variant_name(fk_dica_variant v);
/* 1 for DICA and COIR (they need outputs). */
int fk_dica_supervised(fk_dica_variant v);

typedef struct fk_dica_opts {
    fk_dica_variant variant;
    size_t m;          /* components */
    double lambda;     /* ridge of the constraint, > 0 (spec §4: 1.0) */
    double eps;        /* output-kernel regulariser, > 0 (supervised; 1e-3) */
    double q_weight;   /* weight of the distributional variance (1 = paper; 0 for KPCA/COIR) */
    double delta;      /* G += delta * tr(G)/D * I (1e-8 random features, 0 kernel map) */
    double min_domain; /* smallest accepted domain size (>= 2) */
    int rank_check;    /* refuse m above the rank of the output features (one-hot, §5.4);
                          0 keeps near-zero components (smooth regression outputs) */
    int ref_norm;      /* kernel version only: the reference code's normalisation (§5.5 `ref`):
                          unit |beta_k|, then / sqrt(n gamma_k); 0 = `constraint` (default) */
    int kernel_map;    /* kernel version only: solve DICA/COIR on the kernel map of §5.3 (all
                          eigenpairs of K~) instead of through R^-1 in n-space (the default) */
} fk_dica_opts;

/* Paper defaults: lambda 1, eps 1e-3, q_weight 1, delta 1e-8, min_domain 2, rank_check 1. */
void fk_dica_opts_default(fk_dica_opts *o, fk_dica_variant v, size_t m);

/* Sufficient statistics (spec §7.3) over the samples added so far. The second moments are
 * kept centred about the statistics' own means (phi_bar = sum of dom_sum / n, psi_bar =
 * s_psi / n), computed in two passes and combined by Chan's parallel rule: the one-pass
 * sum phi phi^T - n phi_bar phi_bar^T loses every digit of G once the features vary little
 * about their mean (sigma much larger than the spread of the inputs). */
typedef struct fk_dica_stats {
    size_t D, Dy; /* input and output feature dimensions (Dy = 0: unsupervised) */
    double n;     /* samples */
    double *S;    /* D x D, sum (phi - phi_bar)(phi - phi_bar)^T (both triangles) */
    size_t n_dom, cap_dom;
    long *dom_id;    /* ids of the domains seen, in order of first appearance */
    double *dom_n;   /* samples per domain */
    double *dom_sum; /* n_dom x D, per-domain sum of phi */
    double *s_psi;   /* Dy, sum psi */
    double *C;       /* D x Dy, sum (phi - phi_bar)(psi - psi_bar)^T */
    double *Syy;     /* Dy x Dy, sum (psi - psi_bar)(psi - psi_bar)^T */
    int diag;        /* set by the caller after init when the features are known to have
                        orthogonal columns (the kernel map of §5.3: G = diag(s)): only the
                        diagonal of S is summed and the solve takes G as diagonal */
} fk_dica_stats;

FK_CHECKRETURN int fk_dica_stats_init(fk_dica_stats *st, size_t D, size_t Dy, fk_err *err);
void fk_dica_stats_close(fk_dica_stats *st);
/* Add the rows of Phi (n x D) with outputs Psi (n x Dy, NULL iff Dy = 0) and domain
 * ids dom[0..n) (>= 0). Refuses non-finite values naming the row. */
FK_CHECKRETURN int fk_dica_stats_add(fk_dica_stats *st, const fk_mat *Phi, const fk_mat *Psi,
                                     const long *dom, fk_err *err);
/* Index of domain id (added with zero sums if new); -1 and FK_ENOMEM on failure. */
long fk_dica_stats_domain(fk_dica_stats *st, long id, fk_err *err);

/* st += o: every sum added, domains merged by id (a domain split over clients). */
FK_CHECKRETURN int fk_dica_stats_merge(fk_dica_stats *st, const fk_dica_stats *o, fk_err *err);

/* Chan's correction before a batch of nb samples with feature sum sum_phi (D) and output
 * sum sum_psi (Dy; NULL iff Dy = 0) is added: S, C and Syy of st gain
 * (n nb / (n + nb)) d_a d_b^T with d = (mean of st) - (mean of the batch). The caller then
 * adds the batch's centred moments and its sums (n, domains, s_psi). */
FK_CHECKRETURN int fk_dica_stats_shift(fk_dica_stats *st, double nb, const double *sum_phi,
                                       const double *sum_psi, fk_err *err);
/* Sum of phi over the domains of st (D values into out). */
void fk_dica_stats_sum_phi(const fk_dica_stats *st, double *out);

/* A fitted projection in feature coordinates: z = W^T (phi(x) - phi_bar). */
typedef struct fk_dica_fit {
    size_t D, m;
    fk_mat W;        /* D x m, columns w_k with w_k^T P w_k = 1, largest |entry| positive */
    double *gamma;   /* m eigenvalues, descending */
    double *phi_bar; /* D, pooled feature mean */
    int n_domains;   /* domains in the solve */
    double dvar_in;  /* distributional variance of the domains in feature space, tr S_Q */
} fk_dica_fit;

void fk_dica_fit_close(fk_dica_fit *f);

/* Solve (S2) from the statistics (spec §7.4). Domains with zero samples are ignored;
 * one below o->min_domain is an error naming it. */
FK_CHECKRETURN int fk_dica_solve(const fk_dica_stats *st, const fk_dica_opts *o, fk_dica_fit *fit,
                                 fk_err *err);

/* Z (n x m, initialised here) = (Phi - 1 c^T) W with c = center, or phi_bar if NULL. */
FK_CHECKRETURN int fk_dica_project(const fk_dica_fit *f, const fk_mat *Phi, const double *center,
                                   fk_mat *Z, fk_err *err);

/* (1/N) sum_i |zbar_i - zbar|^2 over the domains of the rows of Z (spec §11.1 item 13). */
double fk_dica_domain_variance(const fk_mat *Z, const long *dom);

/* One-hot rows (n x C) for labels y in [0, C): the exact feature map of the delta kernel. */
FK_CHECKRETURN int fk_dica_onehot(const int *y, size_t n, int C, fk_mat *Psi, fk_err *err);

/* ---- kernel DICA (spec §5) ---- */

typedef struct fk_dica_kernel {
    fk_dica_fit fit; /* in empirical-kernel-map coordinates (r of them), or, when direct, in
                        the coordinates of the centred kernel rows themselves (D = n, W = B) */
    size_t n, d, r;  /* r: columns of the kernel map (0 until a fit needed it) */
    double sigma;
    int direct;      /* the last (re)fit solved DICA/COIR in n-space without the kernel map */
    fk_mat X;        /* training inputs (copy) */
    fk_mat Kc;       /* n x n centred training kernel K~ = H K H */
    fk_mat Umap;     /* n x r: U diag(1/sqrt(s)); features of a centred kernel row k are k^T Umap */
    fk_mat Phi;      /* n x r: U diag(sqrt(s)), the training rows in those coordinates */
    double *colmean; /* n column means of the uncentred training kernel */
    double grand;    /* its grand mean */
    fk_mat Z;        /* n x m fitted training embedding */
} fk_dica_kernel;

/* Fit on X (n x d) with domain ids dom. Outputs: labels y in [0, C) (delta kernel) or,
 * with y NULL, regression targets t (Gaussian output kernel of width sigma_y);
 * unsupervised variants read neither. DICA/COIR (normalise = constraint) solve (11) in
 * n-space through its rank: B = R^-1 F a with R = q K~QK~ + K~ + lambda I (one Cholesky) and
 * a from the Dy x Dy problem (S3) (F F^T = L~(L~ + n eps I)^-1): no eigendecomposition of
 * K~ at all. UDICA/KPCA and normalise = ref use the reduced exact solver of §5.3 on the
 * kernel map (the eigenpairs of K~ above 1e-10 s_max, dsyevr with a value range). */
FK_CHECKRETURN int fk_dica_kernel_fit(fk_dica_kernel *k, const fk_mat *X, const int *y, int C,
                                      const double *t, double sigma_y, const long *dom,
                                      double sigma, const fk_dica_opts *o, fk_err *err);
void fk_dica_kernel_close(fk_dica_kernel *k);
/* Solve again on the same kernel (another variant, q_weight, m or outputs): K~ and, once
 * computed, its kernel map are shared. k->fit and k->Z are replaced. */
FK_CHECKRETURN int fk_dica_kernel_refit(fk_dica_kernel *k, const int *y, int C, const double *t,
                                        double sigma_y, const long *dom, const fk_dica_opts *o,
                                        fk_err *err);
/* Z (initialised here, n_t x m) for new rows Xt; batch = 1 centres the test rows by the
 * batch mean (reference code), 0 by the training means (default, §5.6). */
FK_CHECKRETURN int fk_dica_kernel_project(const fk_dica_kernel *k, const fk_mat *Xt, int batch,
                                          fk_mat *Z, fk_err *err);

/* Gaussian Gram matrix K (initialised here, na x nb) of the rows of A and B. */
FK_CHECKRETURN int fk_dica_gauss_gram(const fk_mat *A, const fk_mat *B, double sigma, fk_mat *K,
                                      fk_err *err);

/* Direct solver (§5.2; O(n^3), for tests): uncentred K (n x n), uncentred output kernel L
 * (n x n; NULL for unsupervised variants), domain ids. gamma (m) and Z = K~ B (initialised
 * here, n x m; columns normalised by beta^T R beta = 1). */
FK_CHECKRETURN int fk_dica_direct(const fk_mat *K, const fk_mat *L, const long *dom,
                                  const fk_dica_opts *o, double *gamma, fk_mat *Z, fk_err *err);

/* Per-feature first and second moments of the rows of X (n x d), numerically stable:
 * sum[j] = sum_i x_ij and m2[j] = sum_i (x_ij - mean_j)^2 about the rows' own mean (two
 * passes). */
void fk_dica_moments(const fk_mat *X, size_t n, double *sum, double *m2);
/* Chan's parallel rule: (n, sum, m2) += a batch (nb, sumb, m2b) of d features. */
void fk_dica_moments_merge(double *n, double *sum, double *m2, size_t d, double nb,
                           const double *sumb, const double *m2b);
/* Mean-distance bandwidth rule (spec §4): sigma^2 = 2 tr Cov(x) = 2 sum_j m2[j] / n from
 * the centred per-feature moments (NAN when there is no spread). */
double fk_dica_sigma_rule(double n, const double *m2, size_t d);

/* ---- distributional kernel (spec §8.3, eq. 14; optional, centralised) ---- */

/* K (initialised here, n x n) with K_ab = k1(P_dom[a], P_dom[b]) k2(x_a, x_b) from the sample
 * kernel K2 (n x n, all samples: training domains and the test domain, whose own unlabelled
 * sample gives its embedding) and domain ids dom: k1 = exp(-|mu_i - mu_j|^2 / (2 sigma1^2)),
 * |mu_i - mu_j|^2 = G_ii + G_jj - 2 G_ij with G_ij the mean of K2 over domains i x j.
 * sigma1 = +inf gives the pooling kernel K2. The training block trains a kernel machine
 * (common/models/svm/svm.h), the test-by-training block predicts. */
FK_CHECKRETURN int fk_dica_dist_kernel(const fk_mat *K2, const long *dom, double sigma1,
                                       fk_mat *K, fk_err *err);

/* ---- one-shot ridge predictor on the projections (spec §8.1) ---- */

/* A ((m+1) x (m+1)) += sum ztilde ztilde^T, b ((m+1) x k) += sum ztilde t^T over the rows
 * of Z (n x m) and T (n x k row-major), ztilde = [z; 1]. */
void fk_dica_ridge_add(const fk_mat *Z, const double *T, size_t k, double *A, double *b);
/* Theta ((m+1) x k) = (A + alpha diag(1..1,0))^-1 b, alpha = alpha_rel tr(A[0:m,0:m]) / m. */
FK_CHECKRETURN int fk_dica_ridge_solve(size_t m, size_t k, const double *A, const double *b,
                                       double alpha_rel, double *Theta, fk_err *err);
/* out (n x k) = [Z 1] Theta. */
void fk_dica_ridge_predict(const fk_mat *Z, const double *Theta, size_t k, double *out);

#endif
