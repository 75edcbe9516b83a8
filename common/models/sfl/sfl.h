/* Sparse functional learning over a family of Gaussian RKHSs (Peifer, Chamon, Paternain,
 * Ribeiro 2020; Peifer 2021, Ch. 2-4; implementation spec 004 "peifer").
 *
 * The coefficient function alpha(s, w) over kernel centres s and widths w is discretised on
 * a finite atom set {(s_j, w_j, v_j)} (centre, width, quadrature weight), spec §3.7. The
 * problems
 *   regression  (PII)/(PII')/(PII''):  min 1/2||alpha||^2 + gamma||alpha||_0
 *                                      s.t. |f(x_n) - y_n| <= sqrt(eps)     (2.25, reduced dual)
 *   classification (PC)/(Pi)/(PF):     same objective s.t. y_n f(x_n) >= 1 - eps [- u_n]
 * are solved on their dual by projected (super)gradient ascent with FISTA momentum (spec §3.6,
 * Algorithm SFL-DA): per iteration one product with K^T (the un-thresholded coefficients), one
 * hard threshold (2.15)/(3.4) and one product with K (the fit at the rows). The step is 1/L
 * with L the top eigenvalue of the un-thresholded operator, so it does not depend on the data
 * scale. Optional resilient slack (Ch. 4, §5.8 closed form): quadratic, Huber or linear
 * relaxation cost with the job-level weight kappa = 1/n_ref.
 *
 * Estimator only: matrices in, matrices out; no rounds, bundles or federation. */
#ifndef FK_MODELS_SFL_H
#define FK_MODELS_SFL_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/err.h"
#include "common/la/rng.h"

enum { FK_SFL_GRID_MAX_P = 3 }; /* the tensor grid explodes beyond this (spec §3.7) */

/* Atom set: J atoms, centre s_j (row j of s, p values), width w_j, weight v_j. Grid atoms
 * also keep their structure for bump detection: atom j has grid coordinates
 * (q, i_1, .., i_p) in the order width-major, j = ((q n_1 + i_1) n_2 + i_2) ... */
typedef struct fk_sfl_atoms {
    size_t J;
    int p;
    double *s; /* J x p */
    double *w; /* J */
    double *v; /* J */
    int grid;  /* 1: built by fk_sfl_atoms_grid; dims below valid */
    size_t dims[FK_SFL_GRID_MAX_P + 1]; /* dims[0] = widths Q, dims[1..p] = points per axis */
    double dw; /* width spacing (1 when one width): bumps join widths at most dw apart */
} fk_sfl_atoms;

/* Q widths uniformly spaced on [wmin, wmax] (Q = 1: wmin). */
void fk_sfl_widths(double wmin, double wmax, int Q, double *out);
/* Tensor grid of spacing h over the box [lo, hi] (per feature) times Q widths; weight
 * h^p * dw (dw = width spacing, 1 when Q = 1). Refuses p > FK_SFL_GRID_MAX_P and grids
 * whose N x J kernel matrix would exceed max_bytes for n_rows rows. */
FK_CHECKRETURN int fk_sfl_atoms_grid(fk_sfl_atoms *a, int p, const double *lo, const double *hi,
                                     double h, const double *widths, int Q, size_t n_rows,
                                     size_t max_bytes, fk_err *err);
/* Candidate centres (M x p, e.g. the training rows or k-means centroids) times Q widths;
 * weight dw (counting measure on the centres), spec §3.7 `candidates`. */
FK_CHECKRETURN int fk_sfl_atoms_candidates(fk_sfl_atoms *a, const double *Z, size_t M, int p,
                            const double *widths, int Q, fk_err *err);
void fk_sfl_atoms_close(fk_sfl_atoms *a);

/* Gaussian kernel matrix Kmat[n*J + j] = exp(-||x_n - s_j||^2 / (2 w_j^2)), N x J. */
void fk_sfl_kernel(const double *X, size_t N, int p, const fk_sfl_atoms *a, double *Kmat);

enum { FK_SFL_REGRESS = 0, FK_SFL_CLASSIFY = 1 };
enum { FK_SFL_HARD = 0, FK_SFL_QUAD = 1, FK_SFL_HUBER = 2, FK_SFL_LINEAR = 3 };
enum { FK_SFL_CONVERGED = 0, FK_SFL_INFEASIBLE = 1, FK_SFL_MAXITER = 2 };

typedef struct fk_sfl_opts {
    int mode;         /* FK_SFL_REGRESS or FK_SFL_CLASSIFY */
    double eps;       /* regression: max squared error; classification: margin slack */
    double gamma;     /* sparsity weight (absolute) */
    double gamma_rel; /* > 0: gamma = gamma_rel * max_j abar_j^2 / 2 at the gamma = 0 solution */
    int res;          /* FK_SFL_HARD / QUAD / HUBER / LINEAR (classification only) */
    double c;         /* quadratic cost c, Huber delta, or linear C */
    double n_ref;     /* slack weight kappa = 1/n_ref (0: the problem's own N) */
    int momentum;     /* FISTA on lambda (spec default on) */
    long T;           /* iteration cap per phase (gamma = 0 pass, gamma pass) */
    double tau_feas, tau_gap, tau_crit, tau_act; /* §3.9, §4.3 (relative to the scale) */
    uint64_t seed;    /* classification start U(0, 1e-3]; mc_resample: the Monte-Carlo atoms */
    /* regression only: the dissertation's own iteration instead of the reduced dual (§3.6) */
    int solver;       /* FK_SFL_SOLVER_REDUCED (Variant B, default) or FK_SFL_SOLVER_VA */
    int mc_resample;  /* Variant A with B fresh uniform atoms per iteration: Alg. 1 literally */
    long mc_batch;    /* B of mc_resample (default 256) */
    double cache_mb;  /* memory for kernel rows, MB (0: 1024); gamma > 0 needs all N x J */
} fk_sfl_opts;

enum { FK_SFL_SOLVER_REDUCED = 0, FK_SFL_SOLVER_VA = 1 };

void fk_sfl_opts_default(fk_sfl_opts *o, int mode);

typedef struct fk_sfl_fit {
    size_t N, J;
    int status;       /* FK_SFL_CONVERGED / INFEASIBLE / MAXITER */
    long iters;       /* total over both phases */
    double gamma;     /* the gamma solved (after gamma_rel) */
    double viol;      /* max constraint violation of the returned iterate */
    double primal;    /* primal objective of the returned alpha (incl. slack cost) */
    double dual;      /* dual value at the returned lambda */
    double best_dual; /* largest dual value seen (for gap bounds when gamma > 0) */
    double L;         /* step constant, eta = 1/L */
    double *lambda;   /* N multipliers of the returned iterate */
    double *alpha;    /* J thresholded coefficients */
    double *f;        /* N fitted values at the rows */
    size_t support;   /* atoms with alpha != 0 */
    int kept;         /* 1: the kept best-feasible iterate was returned (gamma > 0) */
    int worst[20];    /* INFEASIBLE: rows with the largest |lambda| */
    int n_worst;
} fk_sfl_fit;

/* Solve on N rows (X: N x p, y: N targets or +-1 labels) over the atoms. lambda0 (N values,
 * may be NULL) warm-starts; with gamma > 0 and no warm start a gamma = 0 pass runs first
 * (continuation, §3.9). INFEASIBLE and MAXITER are results, not errors: FK_OK is returned
 * and fit->status says which; errors are bad arguments and memory. o->solver = VA hands the
 * problem to fk_sfl_solve_a (regression only). */
FK_CHECKRETURN int fk_sfl_solve(const double *X, const double *y, size_t N, int p,
                                const fk_sfl_atoms *a, const fk_sfl_opts *o, const double *lambda0,
                                fk_sfl_fit *fit, fk_err *err);
void fk_sfl_fit_close(fk_sfl_fit *f);
const char *fk_sfl_status_name(int status);

/* The hard threshold (2.15)/(3.4) the solver applies: alpha_j = abar_j if abar_j^2 > 2 gamma,
 * else 0; va (may be NULL) gets v_j alpha_j. Returns the support size. */
size_t fk_sfl_threshold(const double *abar, const double *v, size_t J, double gamma,
                        double *alpha, double *va);

/* The solver's own evaluation at a given lambda (the absolute o->gamma; gamma_rel is not
 * applied), for checks of the dual (spec T2-T4): g the dual value in closed form (with the
 * resilient ridge), P the primal objective of alpha_d(lambda) (resilient: with the slack cost of
 * u = [l]_+), viol its max violation (hard / regression). abar, alpha (J), f (N) and grad (N)
 * may be NULL; grad gets the dual gradient (3.28) with the resilient slack of §5.8,
 * (1/N)(1 - eps - y_n f_n - u_n(lambda_n)), or for regression the supergradient
 * y_n - f_n - sqrt(eps) sign(lambda_n). */
typedef struct fk_sfl_eval {
    double g, P, viol;
    size_t support;
} fk_sfl_eval;
FK_CHECKRETURN int fk_sfl_eval_at(const double *X, const double *y, size_t N, int p,
                                  const fk_sfl_atoms *a, const fk_sfl_opts *o, const double *lam,
                                  fk_sfl_eval *ev, double *abar, double *alpha, double *f,
                                  double *grad, fk_err *err);

/* Critical rows (§4.3): lambda_n > tau_crit max|lambda| and the constraint active to tau_act
 * (classification: l_n - u_n >= -tau_act (1 - eps); regression: |f_n - y_n| >= sqrt(eps)
 * (1 - tau_act)). idx gets the row indices (room for N) in ascending order; *not_conv counts
 * rows with a large lambda whose constraint is not active (not converged). */
void fk_sfl_critical(const fk_sfl_fit *fit, const double *y, const fk_sfl_opts *o, int *idx,
                     size_t *n_crit, size_t *not_conv);
/* The slack u_n the resilient cost assigns to row n at multiplier lam (0 when hard). */
double fk_sfl_slack(const fk_sfl_opts *o, size_t N, double lam, double loss);

/* Generic Arrow-Hurwicz primal-dual iteration (Alg. 5, errata E10-E12 fixed) on the resilient
 * classification problem at gamma = 0: simultaneous gradient steps on the primal alpha (J
 * values), the slacks u (N) and the multipliers lambda (N, projected on lambda >= 0 and the
 * Huber / linear box). Step sizes are relative: eta_alpha v_j = eta_u kappa c = r_primal,
 * eta_lambda = r_dual / L. The reference for the closed form of fk_sfl_solve (spec T12); slow,
 * for tests and small problems. fit gets lambda, alpha and f; status MAXITER unless one step
 * moved lambda and alpha by less than tol (relative; checked every 1000 iterations). */
FK_CHECKRETURN int fk_sfl_arrow_hurwicz(const double *X, const double *y, size_t N, int p,
                         const fk_sfl_atoms *a, const fk_sfl_opts *o, double r_primal,
                         double r_dual, double tol, fk_sfl_fit *fit, fk_err *err);

/* ---- the dissertation's regression iteration, for checks (sfl_alg1.c, spec T15/T16) ---- */
/* Variant A (spec §3.6): dual ascent on the (lambda, mu) dual of the regression problem with
 * the quadratic cost (2.25), the exact integral replaced by the atom sum: per iteration
 * alpha = (2.15) of K^T lambda, f = K (v .* alpha), (2.22a) lambda += eta (yhat - f) with
 * eta = 1/lmax(K diag(v) K^T) and the yhat-step (2.26) yhat = y - lambda / (2 mu) evaluated at
 * the updated lambda (closed form), (2.22b) mu = max(1e-12, mu + eta_mu mu / eps ((yhat - y)^2
 * - eps)) (a step relative to each row's scale; 0.5 is Newton's step at the optimum). No
 * momentum (faithful mode). Start lambda = 0, mu = 1. Stops (CONVERGED) when one step moves
 * lambda by <= tol max|lambda| (checked every 100 iterations), else MAXITER after T. fit gets
 * lambda, alpha, f, support, viol (max |f - y| - sqrt(eps)), primal and the (lambda, mu) dual
 * value; mu (N values, the caller's) the multipliers of the cost constraints. Slow; for tests
 * of the reduced dual fk_sfl_solve solves (Variant B). */
FK_CHECKRETURN int fk_sfl_solve_va(const double *X, const double *y, size_t N, int p,
                                   const fk_sfl_atoms *a, double eps, double gamma, double eta_mu,
                                   long T, double tol, fk_sfl_fit *fit, double *mu, fk_err *err);
/* Variant A (and with o->mc_resample the literal Alg. 1) as a solver for the jobs' regression
 * path: the iteration of fk_sfl_solve_va (eta_mu = 0.5, no momentum) with T = o->T per pass,
 * stop when one step moves lambda by <= 1e-9 max|lambda|; o->gamma, or o->gamma_rel from a
 * gamma = 0 pass first (lambda warm-started from it, as fk_sfl_solve). lambda0 (may be NULL)
 * warm-starts lambda with mu_n = |lambda0_n| / (2 sqrt(eps)) (the maximiser over mu, 1 where
 * lambda0_n = 0). mc_resample: the f-part of (2.22a) is the Monte-Carlo estimate of
 * fk_sfl_alg1_supergrad with o->mc_batch fresh atoms uniform on the grid's box (first to
 * last grid point per axis) x [smallest, largest width], drawn from fk_rng(o->seed) (needs grid
 * atoms); the step 1/L and the returned alpha and f use the fixed atom set, so the model is
 * the usual support model of the returned lambda. A noisy iteration rarely meets the stopping
 * rule: status MAXITER after T is its normal end. fit->viol is clamped at 0. */
FK_CHECKRETURN int fk_sfl_solve_a(const double *X, const double *y, size_t N, int p,
                                  const fk_sfl_atoms *a, const fk_sfl_opts *o,
                                  const double *lambda0, fk_sfl_fit *fit, fk_err *err);
/* One supergradient of the literal Algorithm 1 (spec §3.5, errata E1-E3 fixed) at (lambda, mu):
 * d_mu_n = (yhat_n - y_n)^2 - eps and d_lam_n = yhat_n - (|S x W| / B) sum_k alpha_k
 * k(x_n, z_k; w_k), yhat = y - lambda / (2 mu), with B fresh atoms (z_k, w_k) uniform on the box
 * [lo, hi] (p sides) x [wmin, wmax] drawn from rng and alpha_k = abar_k 1[abar_k^2 > 2 gamma],
 * abar_k = sum_n lambda_n k(x_n, z_k; w_k). Unbiased for the supergradient of the integral
 * problem over that box (wmin = wmax: one width, counting measure). O(N B p). */
FK_CHECKRETURN int fk_sfl_alg1_supergrad(const double *X, const double *y, size_t N, int p,
                                         const double *lam, const double *mu, double eps,
                                         double gamma, const double *lo, const double *hi,
                                         double wmin, double wmax, size_t B, fk_rng *rng,
                                         double *d_lam, double *d_mu, fk_err *err);

/* ---- discrete model (§3.8) ---- */
typedef struct fk_sfl_model {
    size_t K;
    int p;
    double *s; /* K x p */
    double *w; /* K */
    double *c; /* K */
} fk_sfl_model;

/* Support model: every atom with alpha != 0, c_j = v_j alpha_j (exact for the atom set). */
FK_CHECKRETURN int fk_sfl_model_support(const fk_sfl_atoms *a, const double *alpha, fk_sfl_model *m,
                         fk_err *err);
/* Bumps: grid atoms: basins of steepest ascent of |alpha| over same-sign grid neighbours
 * (3^(p+1)-1 of them), i.e. the connected same-sign components of the support split at
 * their local maxima; other atoms: greedy non-maximum suppression with radius
 * r_nms min(w, w') and width gap dw. label[j] = bump of atom j, -1 off the support. */
FK_CHECKRETURN int fk_sfl_bumps(const fk_sfl_atoms *a, const double *alpha, double r_nms,
                                int *label, size_t *n_bumps, fk_err *err);
/* Peaks model: one kernel per bump, at its largest |alpha| (centroid = 0, spec §3.8) or at the
 * bump's mass centroid, the |alpha| v weighted mean of its centres and widths (centroid = 1;
 * Prop. 1 reads a bump of mass a as one kernel of weight a; on E2.1 (PII) the peak sits on
 * the narrow edge of a ridge over widths and the centroid fits far better). split > 0 (grid
 * atoms only): first cut every bump, per centre coordinate, into equal pieces no longer than
 * split times its mean width, one kernel per non-empty piece (a broad bump of a smooth target
 * is many kernels wide; E2.2); 0 keeps whole bumps. refit = 1: least squares of y on those
 * kernels (ridge 1e-8, Cholesky), else c = the bump's mass sum v alpha. */
FK_CHECKRETURN int fk_sfl_model_peaks(const fk_sfl_atoms *a, const double *alpha, const double *X,
                                      const double *y, size_t N, int refit, int centroid,
                                      double split, fk_sfl_model *m, fk_err *err);
/* Regression peaks model that keeps the fit: centroid kernels refit by least squares, bumps
 * split (as above) into pieces of 0 (whole), 4, 2.83, 2, 1.41, 1, 0.71, 0.5, 0.35, 0.25
 * widths, the first that fits: tube > 0: max_n |f(x_n) - y_n| <= tube (the problem's
 * sqrt(eps), or a little above); tube = 0: training MSE <= that of the support model alpha
 * gives. Else the finest. *split_used (may be NULL) gets the piece length taken. Non-grid
 * atoms: whole bumps (non-maximum suppression already bounds them). */
FK_CHECKRETURN int fk_sfl_model_peaks_fit(const fk_sfl_atoms *a, const double *alpha,
                                          const double *X, const double *y, size_t N, double tube,
                                          double *split_used, fk_sfl_model *m, fk_err *err);
/* f(x) = sum_k c_k exp(-||x - s_k||^2 / (2 w_k^2)) for n rows of X (n x p). */
void fk_sfl_predict(const fk_sfl_model *m, const double *X, size_t n, double *f);
void fk_sfl_model_close(fk_sfl_model *m);

/* ---- (PI') baseline (spec §9.1): kernels at the samples, one fixed width ---- */
typedef struct fk_sfl_pi_info {
    int status; /* FK_SFL_CONVERGED (violation <= 1e-4 scale and gap <= 1e-4) or MAXITER */
    long iters;
    double viol;   /* max constraint violation at the end */
    double gap;    /* relative duality gap at the end */
    size_t active; /* rows with lambda != 0 (the support vectors) */
} fk_sfl_pi_info;
/* min a^T K a (K the N x N Gaussian kernel matrix of width w at the rows) s.t. the rows'
 * constraints: regress |(K a)_n - y_n| <= sqrt(eps); classify y_n (K a)_n >= 1 - eps (c_soft > 0:
 * quadratic slack cost c/2 ||u||^2, the dual's ridge ||lambda||^2 / (2c)). Dual FISTA, step
 * 1/L, at most T iterations; m gets N kernels at the rows (width w, weights a). O(N^2) memory:
 * a baseline for benchmarks, not for large N. */
FK_CHECKRETURN int fk_sfl_pi_fit(const double *X, const double *y, size_t N, int p, double w,
                                 int mode, double eps, double c_soft, long T, fk_sfl_model *m,
                                 fk_sfl_pi_info *info, fk_err *err);
/* (PI') with its kernels at M given centres Z (M x p; spec §9.1 general form, e.g. k-means
 * centroids): min a^T K_ZZ a s.t. the same constraints on f = K_XZ a, solved on the same dual
 * with the Gram form K_XZ (K_ZZ + 1e-10 I)^-1 K_XZ^T (Cholesky); a = 1/2 K_ZZ^-1 K_XZ^T (Y)
 * lambda. m gets M kernels at Z (width w). info->active counts rows with lambda != 0.
 * FK_ENUMERIC when K_ZZ is not positive definite (repeated centres). O(N^2 + NM) memory. */
FK_CHECKRETURN int fk_sfl_pi_fit_centres(const double *X, const double *y, size_t N, int p,
                                         const double *Z, size_t M, double w, int mode, double eps,
                                         double c_soft, long T, fk_sfl_model *m,
                                         fk_sfl_pi_info *info, fk_err *err);
/* k-means (spec §9.5): k-means++ seeding from fk_rng(seed), Lloyd until no row changes cluster
 * or 100 iterations; an empty cluster takes the row farthest from its centre. C (M x p) gets
 * the centres, *iters (may be NULL) the Lloyd iterations. 1 <= M <= N. */
FK_CHECKRETURN int fk_sfl_kmeans(const double *X, size_t N, int p, size_t M, uint64_t seed,
                                 double *C, size_t *iters, fk_err *err);

#endif
