/* Single-task pieces of the mixture-of-regressions model (spec fedgrem.md 1.1 eq. (5), 1.5):
 * E-step on residuals, weighted least squares, the mixreg-style EM used as Local-EM, and the
 * gradient / exact M-steps. Shared by the direct simulation (mor.c) and the fedgrem-mor
 * client (fedgrem_mor.c), so both run the same arithmetic. */
#ifndef FK_MOR_LOCAL_H
#define FK_MOR_LOCAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/err.h"
#include "common/la/rng.h"

/* RNG streams (per task k: + k), shared so both paths draw the same restarts and orders. */
#define FK_MOR_INIT_STREAM 0x6d6f726900000000ULL  /* Local-EM restarts of task k */
#define FK_MOR_ALIGN_STREAM 0x6d6f726100000000ULL /* alignment task orders */

/* Work space for n samples, p features, R components. */
typedef struct fk_mor_ws {
    double *G, *E, *A, *B, *H; /* n x R, n x R, p x p, n x p, n x R */
} fk_mor_ws;

FK_CHECKRETURN int fk_mor_ws_open(fk_mor_ws *s, size_t n, int p, int R, fk_err *err);
void fk_mor_ws_close(fk_mor_ws *s);

/* G (n x R) <- posteriors of the R regressions (noise variances s2, NULL: 1) and, if E is
 * given, the residuals y_i - x_i^T theta_r. Returns the log-likelihood. */
double fk_mor_estep(const double *X, const double *y, size_t n, int p, const double *w,
                    const double *th, const double *s2, int R, double *G, double *E);

/* RMSE of the fitted regression: y_i - x_i^T theta_r with r the component of highest posterior
 * in row i of G (n x R, fk_mor_estep's). NaN when n is 0 or a residual is not finite. */
double fk_mor_fit_rmse(const double *X, const double *y, size_t n, int p, const double *th, int R,
                       const double *G);

/* Predictions of the fitted mixture of regressions for n rows: with targets y (may be NULL),
 * G (n x R) gets the posteriors (fk_mor_estep with noise variances s2, NULL: 1), comp[i] the
 * component of highest posterior (ties to the smaller r, as fk_mor_fit_rmse) and val[i] =
 * x_i^T th_comp, the fit whose RMSE the jobs report; without y the posterior is the prior w,
 * comp its largest weight and val the mixture's mean sum_r w_r x_i^T th_r. */
void fk_mor_predict(const double *X, const double *y, size_t n, int p, const double *w,
                    const double *th, const double *s2, int R, double *G, int *comp, double *val);

/* out = (A + ridge I)^-1 b for a Gram matrix A (p x p, upper triangle read); a failed
 * factorization retries with 1e-6 tr(A)/p more ridge. work: p x p. FK_ENUMERIC if that fails. */
int fk_mor_solve(const double *A, const double *b, int p, double ridge, double *out,
                 double *work);
/* out = (X^T diag(g) X + ridge I)^-1 X^T diag(g) y with g = column r of G (n x R), through
 * fk_mor_solve; scratch A (p x p), B (n x p, n >= p). */
int fk_mor_wls(const double *X, const double *y, size_t n, int p, const double *G, int R, int r,
               double ridge, double *out, double *A, double *B);

/* FK_OK when the job key local_init is "kmeans" (its default): MoR fits start from random
 * partitions, and the hierarchical start (gmm_hc.h) clusters points, not regressions. */
FK_CHECKRETURN int fk_mor_check_local_init(const char *local_init, fk_err *err);

/* Mixture-of-regressions EM (spec 2.1, mixreg analogue, per-component noise variance):
 * restarts from random hard partitions, best log-likelihood kept; w (R), th (R x p). */
FK_CHECKRETURN int fk_mor_mixreg_fit(const double *X, const double *y, size_t n, int p, int R,
                                     int restarts, fk_rng *rng, double *w, double *th, fk_mor_ws *s,
                                     fk_err *err);

/* One local gradient-EM step on the unit-noise surrogate (spec 1.5): E-step at (w, th),
 * w <- mean responsibilities, th_r += eta_r/n sum_i g_ir e_ir x_i. Returns the
 * log-likelihood at the incoming (w, th). */
double fk_mor_grem_step(const double *X, const double *y, size_t n, int p, int R,
                        const double *eta, double *w, double *th, fk_mor_ws *s);

/* The same step's sums, for a server that adds them over clients (pooled gradient EM):
 * E-step at (w, th), nr_r = sum_i g_ir, g (R x p) = sum_i g_ir e_ir x_i. Returns the
 * log-likelihood at (w, th). */
double fk_mor_grem_stats(const double *X, const double *y, size_t n, int p, int R, const double *w,
                         const double *th, double *nr, double *g, fk_mor_ws *s);

/* One local exact EM step (FedEM's client, spec 2.3): E-step at (w, th), w <- mean
 * responsibilities, out_r <- weighted least squares (ridge 1e-5); out may equal th.
 * *ll receives the log-likelihood at the incoming (w, th). FK_ENUMERIC if singular. */
int fk_mor_em_step(const double *X, const double *y, size_t n, int p, int R, double *w,
                   const double *th, double *out, double *ll, fk_mor_ws *s);

#endif
