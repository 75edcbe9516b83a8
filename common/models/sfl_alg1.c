/* The dissertation's own regression iteration, for the spec's checks of the library's
 * reduced dual (spec §3.5-§3.6, T15 and T16): Variant A, dual ascent in (lambda, mu) with the
 * quadratic cost (2.25) c(yhat, y) = (yhat - y)^2 - eps on a fixed atom set, and the Monte-Carlo
 * supergradient of the literal Algorithm 1 (fresh uniform atoms per call). Variant B (the
 * reduced dual, fk_sfl_solve) is what the jobs use; these two exist so the derivation that
 * connects them is tested, not trusted. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"
#include "common/models/sfl.h"

/* Largest eigenvalue of K diag(v) K^T (the f-part's curvature in lambda), 50 power iterations
 * from a fixed start, 2 % headroom. */
static double curvature(const double *K, const double *v, size_t N, size_t J, double *x,
                        double *z, double *t)
{
    for (size_t n = 0; n < N; n++)
        x[n] = 1.0 + 0.01 * (double)(n % 7);
    double L = 0;
    for (int it = 0; it < 50; it++) {
        double nx = cblas_dnrm2((int)N, x, 1);
        if (!(nx > 0))
            break;
        cblas_dscal((int)N, 1 / nx, x, 1);
        cblas_dgemv(CblasRowMajor, CblasTrans, (int)N, (int)J, 1.0, K, (int)J, x, 1, 0.0, t, 1);
        for (size_t j = 0; j < J; j++)
            t[j] *= v[j];
        cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)J, 1.0, K, (int)J, t, 1, 0.0, z, 1);
        L = cblas_dnrm2((int)N, z, 1);
        memcpy(x, z, N * sizeof *x);
    }
    return L > 0 ? 1.02 * L : 1.0;
}

int fk_sfl_solve_va(const double *X, const double *y, size_t N, int p, const fk_sfl_atoms *a,
                    double eps, double gamma, double eta_mu, long T, double tol, fk_sfl_fit *fit,
                    double *mu, fk_err *err)
{
    memset(fit, 0, sizeof *fit);
    if (!X || !y || !mu || N < 1 || p < 1 || !a || a->J < 1 || a->p != p || !(eps > 0) ||
        !isfinite(eps) || !(gamma >= 0) || !isfinite(gamma) || !(eta_mu > 0) || T < 1 ||
        !(tol >= 0))
        return fk_err_set(err, FK_EINVAL, "sfl Variant A: need rows, atoms of the rows' p, eps > 0, "
                                          "gamma >= 0, eta_mu > 0, T >= 1 (got eps %g gamma %g "
                                          "eta_mu %g T %ld)",
                          eps, gamma, eta_mu, T);
    for (size_t i = 0; i < N * (size_t)p; i++)
        if (!isfinite(X[i]))
            return fk_err_set(err, FK_EINVAL, "sfl Variant A: X value %zu is not finite", i);
    for (size_t n = 0; n < N; n++)
        if (!isfinite(y[n]))
            return fk_err_set(err, FK_EINVAL, "sfl Variant A: target %zu is not finite", n);
    size_t J = a->J;
    double *K = malloc(N * J * sizeof *K), *abar = malloc(J * sizeof *abar),
           *va = malloc(J * sizeof *va), *old = malloc(N * sizeof *old);
    fit->lambda = calloc(N, sizeof *fit->lambda);
    fit->alpha = calloc(J, sizeof *fit->alpha);
    fit->f = calloc(N, sizeof *fit->f);
    if (!K || !abar || !va || !old || !fit->lambda || !fit->alpha || !fit->f) {
        free(K);
        free(abar);
        free(va);
        free(old);
        fk_sfl_fit_close(fit);
        return fk_err_set(err, FK_ENOMEM, "sfl Variant A: out of memory for %zu x %zu", N, J);
    }
    fk_sfl_kernel(X, N, p, a, K);
    double *lam = fit->lambda, *f = fit->f, *alpha = fit->alpha;
    double eta = 1.0 / curvature(K, a->v, N, J, f, old, abar), thr = 2 * gamma;
    for (size_t n = 0; n < N; n++)
        mu[n] = 1.0; /* Alg. 1's default start: lambda = 0, mu = 1 */
    fit->status = FK_SFL_MAXITER;
    long t;
    for (t = 1; t <= T; t++) {
        /* (2.15) on the atoms, then f = K (v .* alpha) */
        cblas_dgemv(CblasRowMajor, CblasTrans, (int)N, (int)J, 1.0, K, (int)J, lam, 1, 0.0, abar,
                    1);
        for (size_t j = 0; j < J; j++) {
            alpha[j] = abar[j] * abar[j] > thr ? abar[j] : 0.0;
            va[j] = a->v[j] * alpha[j];
        }
        cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)J, 1.0, K, (int)J, va, 1, 0.0, f, 1);
        memcpy(old, lam, N * sizeof *old);
        for (size_t n = 0; n < N; n++) {
            /* (2.22a): lambda += eta (yhat - f) with the yhat-step (2.26) yhat = y - lambda/(2 mu)
             * taken at the new lambda (closed form per sample): explicit steps would need
             * eta < 4 mu_n, and mu_n -> 0 on every inactive row */
            lam[n] = (lam[n] + eta * (y[n] - f[n])) / (1 + eta / (2 * mu[n]));
            /* (2.22b): mu += eta_mu_n c(yhat, y), projected on mu >= 1e-12 (§12 E2), with the
             * step relative to the row's scale, eta_mu_n = eta_mu mu_n / eps: the curvature of
             * the dual in mu_n is 2 eps / mu_n, so one fixed step is either unstable on the
             * small multipliers or needs ~mu / eps iterations on the large ones */
            double r = lam[n] / (2 * mu[n]);
            mu[n] = fmax(1e-12, mu[n] + eta_mu * mu[n] / eps * (r * r - eps));
        }
        if (t % 100 == 0) { /* stop when lambda moved less than tol (relative) in one step */
            double d = 0, m = 0;
            for (size_t n = 0; n < N; n++) {
                d = fmax(d, fabs(lam[n] - old[n]));
                m = fmax(m, fabs(lam[n]));
            }
            if (d <= tol * fmax(m, 1e-300)) {
                fit->status = FK_SFL_CONVERGED;
                break;
            }
        }
    }
    fit->iters = t > T ? T : t;
    /* the returned alpha and f belong to the returned lambda */
    cblas_dgemv(CblasRowMajor, CblasTrans, (int)N, (int)J, 1.0, K, (int)J, lam, 1, 0.0, abar, 1);
    fit->support = 0;
    for (size_t j = 0; j < J; j++) {
        alpha[j] = abar[j] * abar[j] > thr ? abar[j] : 0.0;
        va[j] = a->v[j] * alpha[j];
        fit->support += alpha[j] != 0.0;
    }
    cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)J, 1.0, K, (int)J, va, 1, 0.0, f, 1);
    double viol = 0, se = sqrt(eps), Pa = 0, g = 0;
    for (size_t n = 0; n < N; n++) {
        viol = fmax(viol, fabs(f[n] - y[n]) - se);
        g += lam[n] * y[n] - lam[n] * lam[n] / (4 * mu[n]) - mu[n] * eps;
    }
    for (size_t j = 0; j < J; j++) {
        double h = 0.5 * abar[j] * abar[j] - gamma;
        g -= h > 0 ? a->v[j] * h : 0.0;
        Pa += alpha[j] != 0.0 ? a->v[j] * (0.5 * alpha[j] * alpha[j] + gamma) : 0.0;
    }
    fit->N = N;
    fit->J = J;
    fit->gamma = gamma;
    fit->viol = viol;
    fit->primal = Pa;
    fit->dual = g;
    fit->best_dual = g;
    fit->L = 1 / eta;
    free(K);
    free(abar);
    free(va);
    free(old);
    return FK_OK;
}

int fk_sfl_alg1_supergrad(const double *X, const double *y, size_t N, int p, const double *lam,
                          const double *mu, double eps, double gamma, const double *lo,
                          const double *hi, double wmin, double wmax, size_t B, fk_rng *rng,
                          double *d_lam, double *d_mu, fk_err *err)
{
    if (!X || !y || !lam || !mu || !lo || !hi || !rng || !d_lam || !d_mu || N < 1 || p < 1 ||
        B < 1 || !(eps >= 0) || !(gamma >= 0) || !(wmin > 0) || !(wmax >= wmin) ||
        !isfinite(wmax))
        return fk_err_set(err, FK_EINVAL, "sfl Alg. 1: need rows, B >= 1, eps >= 0, gamma >= 0 "
                                          "and 0 < wmin <= wmax (got B %zu, w [%g, %g])",
                          B, wmin, wmax);
    double vol = wmax - wmin > 0 ? wmax - wmin : 1; /* |W|; one width: counting measure */
    for (int i = 0; i < p; i++) {
        if (!(hi[i] > lo[i]) || !isfinite(lo[i]) || !isfinite(hi[i]))
            return fk_err_set(err, FK_EINVAL, "sfl Alg. 1: box side %d is [%g, %g]", i, lo[i],
                              hi[i]);
        vol *= hi[i] - lo[i];
    }
    for (size_t n = 0; n < N; n++)
        if (!(mu[n] > 0))
            return fk_err_set(err, FK_EINVAL, "sfl Alg. 1: mu_%zu = %g must be > 0 (§12 E2)", n,
                              mu[n]);
    size_t P = (size_t)p;
    double *z = malloc(P * sizeof *z), *kz = malloc(N * sizeof *kz);
    if (!z || !kz) {
        free(z);
        free(kz);
        return fk_err_set(err, FK_ENOMEM, "sfl Alg. 1: out of memory");
    }
    /* steps 1-2: the yhat-step (2.26) and d_mu (2.23b) */
    for (size_t n = 0; n < N; n++) {
        double r = lam[n] / (2 * mu[n]);
        d_mu[n] = r * r - eps;
        d_lam[n] = y[n] - r;
    }
    /* steps 3-5: B atoms uniform on the box x [wmin, wmax]; alpha_k by (2.15); the MC estimate
     * of the integral in (2.23a) scaled by the volume (§12 E3) */
    double sc = vol / (double)B, thr = 2 * gamma;
    for (size_t k = 0; k < B; k++) {
        for (size_t i = 0; i < P; i++)
            z[i] = lo[i] + (hi[i] - lo[i]) * fk_rng_uniform(rng);
        double w = wmin + (wmax - wmin) * fk_rng_uniform(rng), ab = 0;
        for (size_t n = 0; n < N; n++) {
            double d2 = 0;
            for (size_t i = 0; i < P; i++)
                d2 += (X[n * P + i] - z[i]) * (X[n * P + i] - z[i]);
            kz[n] = exp(-d2 / (2 * w * w));
            ab += lam[n] * kz[n];
        }
        if (ab * ab > thr)
            for (size_t n = 0; n < N; n++)
                d_lam[n] -= sc * ab * kz[n];
    }
    free(z);
    free(kz);
    return FK_OK;
}
