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
#include "common/models/sfl/sfl.h"

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

/* The Monte-Carlo f-part of the literal Alg. 1: B fresh atoms a call on this box. */
typedef struct mcpar {
    size_t B;
    double lo[FK_SFL_GRID_MAX_P], hi[FK_SFL_GRID_MAX_P], wmin, wmax;
    fk_rng *rng;
} mcpar;

/* Variant A's iteration (see fk_sfl_solve_va) from lam0 (NULL: 0) and mu (mu_in: the caller's
 * values in mu; else |lam0_n| / (2 sqrt(eps)), 1 where that is 0); mc != NULL replaces the
 * atom-sum f by the Monte-Carlo estimate of Alg. 1. */
FK_CHECKRETURN static int va_core(const double *X, const double *y, size_t N, int p, const fk_sfl_atoms *a,
                   double eps, double gamma, double eta_mu, long T, double tol, const double *lam0,
                   int mu_in, const mcpar *mc, fk_sfl_fit *fit, double *mu, fk_err *err)
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
        if (!isfinite(y[n]) || (lam0 && !isfinite(lam0[n])) || (mu_in && !(mu[n] > 0)))
            return fk_err_set(err, FK_EINVAL, "sfl Variant A: target, start or mu of row %zu is "
                                              "not finite (mu must be > 0)", n);
    size_t J = a->J;
    double *K = malloc(N * J * sizeof *K), *abar = malloc(J * sizeof *abar),
           *va = malloc(J * sizeof *va), *old = malloc(N * sizeof *old),
           *dl = mc ? malloc(2 * N * sizeof *dl) : NULL;
    fit->lambda = calloc(N, sizeof *fit->lambda);
    fit->alpha = calloc(J, sizeof *fit->alpha);
    fit->f = calloc(N, sizeof *fit->f);
    if (!K || !abar || !va || !old || (mc && !dl) || !fit->lambda || !fit->alpha || !fit->f) {
        free(K);
        free(abar);
        free(va);
        free(old);
        free(dl);
        fk_sfl_fit_close(fit);
        return fk_err_set(err, FK_ENOMEM, "sfl Variant A: out of memory for %zu x %zu", N, J);
    }
    fk_sfl_kernel(X, N, p, a, K);
    double *lam = fit->lambda, *f = fit->f, *alpha = fit->alpha;
    double eta = 1.0 / curvature(K, a->v, N, J, f, old, abar), thr = 2 * gamma, se = sqrt(eps);
    for (size_t n = 0; n < N; n++) {
        lam[n] = lam0 ? lam0[n] : 0.0; /* Alg. 1's default start: lambda = 0, mu = 1 */
        if (!mu_in) /* a warm lambda: mu at its maximiser, so the start is consistent */
            mu[n] = lam[n] != 0.0 ? fmax(1e-12, fabs(lam[n]) / (2 * se)) : 1.0;
    }
    fit->status = FK_SFL_MAXITER;
    int rc = FK_OK;
    long t;
    for (t = 1; t <= T; t++) {
        if (mc) { /* Alg. 1 steps 3-5: f by B fresh uniform atoms (d_lam = yhat - f) */
            rc = fk_sfl_alg1_supergrad(X, y, N, p, lam, mu, eps, gamma, mc->lo, mc->hi, mc->wmin,
                                       mc->wmax, mc->B, mc->rng, dl, dl + N, err);
            if (rc)
                break;
            for (size_t n = 0; n < N; n++)
                f[n] = y[n] - lam[n] / (2 * mu[n]) - dl[n];
        } else { /* (2.15) on the atoms, then f = K (v .* alpha) */
            cblas_dgemv(CblasRowMajor, CblasTrans, (int)N, (int)J, 1.0, K, (int)J, lam, 1, 0.0,
                        abar, 1);
            for (size_t j = 0; j < J; j++) {
                alpha[j] = abar[j] * abar[j] > thr ? abar[j] : 0.0;
                va[j] = a->v[j] * alpha[j];
            }
            cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)J, 1.0, K, (int)J, va, 1, 0.0, f,
                        1);
        }
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
    free(dl);
    if (rc) {
        free(K);
        free(abar);
        free(va);
        free(old);
        fk_sfl_fit_close(fit);
        return rc;
    }
    fit->iters = t > T ? T : t;
    /* the returned alpha and f belong to the returned lambda (on the fixed atoms) */
    cblas_dgemv(CblasRowMajor, CblasTrans, (int)N, (int)J, 1.0, K, (int)J, lam, 1, 0.0, abar, 1);
    fit->support = 0;
    for (size_t j = 0; j < J; j++) {
        alpha[j] = abar[j] * abar[j] > thr ? abar[j] : 0.0;
        va[j] = a->v[j] * alpha[j];
        fit->support += alpha[j] != 0.0;
    }
    cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)J, 1.0, K, (int)J, va, 1, 0.0, f, 1);
    double viol = 0, Pa = 0, g = 0;
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

int fk_sfl_solve_va(const double *X, const double *y, size_t N, int p, const fk_sfl_atoms *a,
                    double eps, double gamma, double eta_mu, long T, double tol, fk_sfl_fit *fit,
                    double *mu, fk_err *err)
{
    return va_core(X, y, N, p, a, eps, gamma, eta_mu, T, tol, NULL, 0, NULL, fit, mu, err);
}

int fk_sfl_solve_a(const double *X, const double *y, size_t N, int p, const fk_sfl_atoms *a,
                   const fk_sfl_opts *o, const double *lambda0, fk_sfl_fit *fit, fk_err *err)
{
    memset(fit, 0, sizeof *fit);
    if (!o || !a || o->mode != FK_SFL_REGRESS || o->solver != FK_SFL_SOLVER_VA ||
        !(o->gamma_rel >= 0 && o->gamma_rel < 1) || (o->mc_resample && o->mc_batch < 1))
        return fk_err_set(err, FK_EINVAL, "sfl Variant A: needs mode regress, solver variant_a, "
                                          "gamma_rel in [0, 1) and mc_batch >= 1");
    mcpar mc = {.B = (size_t)o->mc_batch};
    fk_rng rng;
    fk_rng_init(&rng, o->seed, 0x616c6731ULL); /* "alg1": the Monte-Carlo atoms' stream */
    mc.rng = &rng;
    if (o->mc_resample) { /* the box of the fixed grid: first to last point, every width */
        if (!a->grid || a->p != p || p > FK_SFL_GRID_MAX_P)
            return fk_err_set(err, FK_EINVAL,
                              "sfl: mc_resample = true draws atoms uniformly on the job's centre "
                              "box, so it needs atoms = grid (with box_lo, box_hi)");
        for (int i = 0; i < p; i++) {
            mc.lo[i] = INFINITY;
            mc.hi[i] = -INFINITY;
        }
        mc.wmin = INFINITY;
        mc.wmax = -INFINITY;
        for (size_t j = 0; j < a->J; j++) {
            for (int i = 0; i < p; i++) {
                mc.lo[i] = fmin(mc.lo[i], a->s[j * (size_t)p + (size_t)i]);
                mc.hi[i] = fmax(mc.hi[i], a->s[j * (size_t)p + (size_t)i]);
            }
            mc.wmin = fmin(mc.wmin, a->w[j]);
            mc.wmax = fmax(mc.wmax, a->w[j]);
        }
        for (int i = 0; i < p; i++)
            if (!(mc.hi[i] > mc.lo[i]))
                return fk_err_set(err, FK_EINVAL, "sfl: mc_resample needs a grid with two or more "
                                                  "points on every axis (axis %d has one)", i);
        /* the grid sum is the midpoint rule of the integral over its cells: draw on the cells'
         * union, half a spacing beyond the first and last point, so both solve one problem
         * (one width: the counting measure, as the grid) */
        for (int i = 0; i < p; i++) {
            double h = (mc.hi[i] - mc.lo[i]) / (double)(a->dims[i + 1] - 1);
            mc.lo[i] -= h / 2;
            mc.hi[i] += h / 2;
        }
        if (a->dims[0] > 1) {
            mc.wmin -= a->dw / 2;
            mc.wmax += a->dw / 2;
            if (!(mc.wmin > 0))
                return fk_err_set(err, FK_EINVAL, "sfl: mc_resample draws widths on the grid's "
                                                  "width cells, and the first reaches %g <= 0; "
                                                  "use more widths or a larger width_min",
                                  mc.wmin);
        }
    }
    const mcpar *pm = o->mc_resample ? &mc : NULL;
    double *mu = malloc(N * sizeof *mu);
    if (!mu)
        return fk_err_set(err, FK_ENOMEM, "sfl Variant A: out of memory");
    const double eta_mu = 0.5, tol = 1e-9; /* eta_mu 0.5: Newton's mu step at the optimum */
    int two = (o->gamma > 0 || o->gamma_rel > 0) && !lambda0; /* continuation, as fk_sfl_solve */
    double gamma = o->gamma;
    int rc;
    if (two || o->gamma_rel > 0) { /* gamma = 0 pass, then gamma (or gamma_rel) from its lambda */
        fk_sfl_fit f0;
        rc = va_core(X, y, N, p, a, o->eps, 0, eta_mu, o->T, tol, lambda0, 0, pm, &f0, mu, err);
        if (rc) {
            free(mu);
            return rc;
        }
        if (o->gamma_rel > 0) { /* at gamma = 0, alpha = abar = K^T lambda */
            double m = 0;
            for (size_t j = 0; j < f0.J; j++)
                m = fmax(m, fabs(f0.alpha[j]));
            gamma = o->gamma_rel * 0.5 * m * m;
        }
        if (gamma > 0) {
            rc = va_core(X, y, N, p, a, o->eps, gamma, eta_mu, o->T, tol, f0.lambda, 1, pm, fit,
                         mu, err);
            if (!rc)
                fit->iters += f0.iters;
            fk_sfl_fit_close(&f0);
        } else {
            *fit = f0;
        }
    } else {
        rc = va_core(X, y, N, p, a, o->eps, gamma, eta_mu, o->T, tol, lambda0, 0, pm, fit, mu,
                     err);
    }
    free(mu);
    if (!rc)
        fit->viol = fmax(0, fit->viol);
    return rc;
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
