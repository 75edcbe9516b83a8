/* Algorithm 5 (Arrow-Hurwicz) for the resilient kernel classifier (spec §5.6, §5.8): the
 * generic primal-dual form that the closed-form dual ascent of sfl.c specialises. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/models/sfl/sfl.h"

int fk_sfl_arrow_hurwicz(const double *X, const double *y, size_t N, int p,
                         const fk_sfl_atoms *a, const fk_sfl_opts *o, double r_primal,
                         double r_dual, double tol, fk_sfl_fit *fit, fk_err *err)
{
    memset(fit, 0, sizeof *fit);
    if (o->mode != FK_SFL_CLASSIFY || (o->res != FK_SFL_QUAD && o->res != FK_SFL_HUBER) ||
        o->gamma > 0 || N < 1 || !a || a->p != p || !(r_primal > 0 && r_primal <= 1) ||
        !(r_dual > 0))
        return fk_err_set(err, FK_EINVAL,
                          "sfl Arrow-Hurwicz: classification with a quadratic or Huber slack "
                          "cost at gamma = 0, step ratios in (0, 1]");
    size_t J = a->J;
    double Np = (double)N, kappa = 1.0 / (o->n_ref > 0 ? o->n_ref : Np);
    double curv = o->res == FK_SFL_QUAD ? kappa * o->c : kappa; /* h''(u) * kappa */
    double box = o->res == FK_SFL_HUBER ? o->c * kappa * Np : INFINITY;
    double *K = malloc(N * J * sizeof *K), *buf = malloc((4 * N + 3 * J) * sizeof *buf);
    fit->lambda = calloc(N, sizeof(double));
    fit->alpha = calloc(J, sizeof(double));
    fit->f = calloc(N, sizeof(double));
    if (!K || !buf || !fit->lambda || !fit->alpha || !fit->f) {
        free(K);
        free(buf);
        fk_sfl_fit_close(fit);
        return fk_err_set(err, FK_ENOMEM, "sfl Arrow-Hurwicz: out of memory");
    }
    double *u = buf, *t = buf + N, *lprev = buf + 2 * N, *d = buf + 3 * N;
    double *abar = buf + 4 * N, *va = abar + J, *aprev = va + J;
    memset(u, 0, N * sizeof *u);
    fk_sfl_kernel(X, N, p, a, K);
    /* L of the dual: top eigenvalue of (1/N^2) Y K V K^T Y by power iteration, plus the ridge */
    for (size_t n = 0; n < N; n++)
        d[n] = 1.0 + 1e-3 * (double)(n % 7);
    double L = 1;
    for (int it = 0; it < 50; it++) {
        double nd = cblas_dnrm2((int)N, d, 1);
        for (size_t n = 0; n < N; n++)
            t[n] = d[n] / nd * y[n] / Np;
        cblas_dgemv(CblasRowMajor, CblasTrans, (int)N, (int)J, 1.0, K, (int)J, t, 1, 0.0, abar, 1);
        for (size_t j = 0; j < J; j++)
            abar[j] *= a->v[j];
        cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)J, 1.0, K, (int)J, abar, 1, 0.0, d,
                    1);
        for (size_t n = 0; n < N; n++)
            d[n] *= y[n] / Np;
        L = cblas_dnrm2((int)N, d, 1);
    }
    L = 1.02 * L + 1.0 / (curv * Np * Np);
    double eta_l = r_dual / L, *lam = fit->lambda, *al = fit->alpha, *f = fit->f;
    long it;
    for (it = 1; it <= o->T; it++) {
        /* every gradient at the previous iterate (Jacobi-style, as printed) */
        memcpy(lprev, lam, N * sizeof *lam);
        memcpy(aprev, al, J * sizeof *al);
        for (size_t n = 0; n < N; n++)
            t[n] = lam[n] * y[n] / Np;
        cblas_dgemv(CblasRowMajor, CblasTrans, (int)N, (int)J, 1.0, K, (int)J, t, 1, 0.0, abar, 1);
        for (size_t j = 0; j < J; j++)
            va[j] = a->v[j] * al[j];
        cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)J, 1.0, K, (int)J, va, 1, 0.0, f, 1);
        for (size_t n = 0; n < N; n++) { /* dual ascent (4.51), projected; slack descent (4.49) */
            double l = 1.0 - o->eps - y[n] * f[n];
            double hp = o->res == FK_SFL_QUAD ? o->c * u[n]
                                              : fmax(-o->c, fmin(o->c, u[n])); /* h'(u) */
            double z = lam[n] + eta_l / Np * (l - u[n]);
            lam[n] = z < 0 ? 0 : z > box ? box : z;
            u[n] -= r_primal / curv * (kappa * hp - lprev[n] / Np);
        }
        for (size_t j = 0; j < J; j++) /* primal descent on alpha: v_j (alpha_j - abar_j) */
            al[j] -= r_primal * (al[j] - abar[j]);
        if (it % 1000 == 0) {
            double dl = 0, nl = 0, da = 0, na = 0;
            for (size_t n = 0; n < N; n++) {
                dl += (lam[n] - lprev[n]) * (lam[n] - lprev[n]);
                nl += lam[n] * lam[n];
            }
            for (size_t j = 0; j < J; j++) {
                da += (al[j] - aprev[j]) * (al[j] - aprev[j]);
                na += al[j] * al[j];
            }
            if (sqrt(dl) <= tol * sqrt(nl) && sqrt(da) <= tol * sqrt(na))
                break;
        }
    }
    for (size_t j = 0; j < J; j++)
        va[j] = a->v[j] * al[j];
    cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)J, 1.0, K, (int)J, va, 1, 0.0, f, 1);
    fit->N = N;
    fit->J = J;
    fit->iters = it > o->T ? o->T : it;
    fit->status = it > o->T ? FK_SFL_MAXITER : FK_SFL_CONVERGED;
    fit->L = L;
    for (size_t j = 0; j < J; j++)
        fit->support += al[j] != 0.0;
    free(K);
    free(buf);
    return FK_OK;
}
