/* (PI') baseline (spec §9.1): the classical kernel machine with one fixed width and its kernels
 * at the samples (representer theorem), min a^T K a subject to the same per-row constraints as
 * the sparse problems, solved on its dual with the same engine (FISTA, step 1/L):
 *   regression |(K a)_n - y_n| <= sqrt(eps):
 *       max_lambda  lambda^T y - sqrt(eps) ||lambda||_1 - 1/4 lambda^T K lambda,   a = lambda / 2
 *   classification y_n (K a)_n >= 1 - eps:
 *       max_{lambda >= 0} (1 - eps) sum lambda - 1/4 lambda^T Y K Y lambda [- ||lambda||^2/(2c)],
 *       a = Y lambda / 2 (a hard-margin SVM without bias; c > 0 the quadratic soft margin). */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"
#include "common/models/sfl.h"

/* Top eigenvalue of the PSD matrix Q (N x N) by 50 power iterations, 2 % headroom (as the
 * sparse solver's step constant). */
static double top_eig(const double *Q, size_t N, double *u, double *t)
{
    fk_rng r;
    fk_rng_init(&r, 9001, 0);
    for (size_t n = 0; n < N; n++)
        u[n] = 0.5 + fk_rng_uniform(&r);
    double l = 0;
    for (int it = 0; it < 50; it++) {
        double nu = cblas_dnrm2((int)N, u, 1);
        if (!(nu > 0))
            return 1;
        cblas_dscal((int)N, 1 / nu, u, 1);
        cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)N, 1.0, Q, (int)N, u, 1, 0.0, t, 1);
        l = cblas_ddot((int)N, u, 1, t, 1);
        memcpy(u, t, N * sizeof *u);
    }
    return l > 0 ? 1.02 * l : 1;
}

int fk_sfl_pi_fit(const double *X, const double *y, size_t N, int p, double w, int mode, double eps,
                  double c_soft, long T, fk_sfl_model *m, fk_sfl_pi_info *info, fk_err *err)
{
    memset(m, 0, sizeof *m);
    memset(info, 0, sizeof *info);
    if (!X || !y || N == 0 || p < 1 || !(w > 0) || !isfinite(w) || !(eps >= 0) ||
        (mode == FK_SFL_CLASSIFY && !(eps < 1)) || !(c_soft >= 0) || T < 1 ||
        (mode != FK_SFL_REGRESS && mode != FK_SFL_CLASSIFY))
        return fk_err_set(err, FK_EINVAL,
                          "sfl (PI'): need rows, width > 0, eps >= 0 (< 1 to classify), "
                          "c >= 0, T >= 1 and mode regress or classify (got w %g eps %g c %g)",
                          w, eps, c_soft);
    size_t P = (size_t)p;
    double *Q = malloc(N * N * sizeof *Q), *lam = calloc(N, sizeof *lam),
           *prev = calloc(N, sizeof *prev), *hat = malloc(N * sizeof *hat),
           *g = malloc(N * sizeof *g);
    if (!Q || !lam || !prev || !hat || !g) {
        free(Q);
        free(lam);
        free(prev);
        free(hat);
        free(g);
        return fk_err_set(err, FK_ENOMEM, "sfl (PI'): out of memory for %zu rows", N);
    }
    int cls = mode == FK_SFL_CLASSIFY;
    for (size_t i = 0; i < N; i++) /* Q = K (regress) or Y K Y (classify) */
        for (size_t j = 0; j <= i; j++) {
            double d2 = 0;
            for (size_t t = 0; t < P; t++)
                d2 += (X[i * P + t] - X[j * P + t]) * (X[i * P + t] - X[j * P + t]);
            double k = exp(-d2 / (2 * w * w)) * (cls ? y[i] * y[j] : 1);
            Q[i * N + j] = Q[j * N + i] = k;
        }
    /* gradient of the dual: b - (1/2) Q lambda [- lambda / c]; Lipschitz L = lmax(Q)/2 + 1/c */
    double L = 0.5 * top_eig(Q, N, hat, g) + (cls && c_soft > 0 ? 1 / c_soft : 0), eta = 1 / L,
           tube = sqrt(eps), scale = cls ? 1 - eps : (tube > 0 ? tube : 1), theta = 1;
    info->status = FK_SFL_MAXITER;
    long t;
    for (t = 1; t <= T; t++) {
        /* FISTA extrapolation, then one projected (classify) or proximal (regress) step */
        double th1 = (1 + sqrt(1 + 4 * theta * theta)) / 2, mom = (theta - 1) / th1;
        theta = th1;
        for (size_t n = 0; n < N; n++)
            hat[n] = lam[n] + mom * (lam[n] - prev[n]);
        memcpy(prev, lam, N * sizeof *lam);
        cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)N, -0.5, Q, (int)N, hat, 1, 0.0, g,
                    1);
        for (size_t n = 0; n < N; n++) {
            double z =
                hat[n] + eta * (g[n] + (cls ? 1 - eps - (c_soft > 0 ? hat[n] / c_soft : 0) : y[n]));
            lam[n] = cls ? fmax(z, 0) : copysign(fmax(fabs(z) - eta * tube, 0), z);
        }
        /* adaptive restart (O'Donoghue and Candes): momentum that points downhill is dropped;
         * the kernel matrices of wide kernels are ill-conditioned and plain FISTA oscillates */
        double dir = 0;
        for (size_t n = 0; n < N; n++)
            dir += (hat[n] - lam[n]) * (lam[n] - prev[n]);
        if (dir > 0)
            theta = 1;
        if (t % 50 && t != T)
            continue;
        /* every 50 iterations: violation of the constraints and the duality gap */
        cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)N, 0.5, Q, (int)N, lam, 1, 0.0, g, 1);
        double viol = 0, quad = cblas_ddot((int)N, lam, 1, g, 1) / 2, lin = 0, ridge = 0;
        for (size_t n = 0; n < N; n++) {
            /* classify: g = (1/2) Y K Y lambda, so y_n f_n = g_n; regress: g = f */
            double v = cls ? (1 - eps) - g[n] - (c_soft > 0 ? lam[n] / c_soft : 0)
                           : fabs(g[n] - y[n]) - tube;
            viol = fmax(viol, v);
            lin += cls ? (1 - eps) * lam[n] : lam[n] * y[n] - tube * fabs(lam[n]);
            ridge += c_soft > 0 && cls ? lam[n] * lam[n] / (2 * c_soft) : 0;
        }
        /* quad = 1/4 lambda^T Q lambda = a^T K a, the primal (+ the soft margin's slack cost) */
        double primal = quad + ridge, dual = lin - quad - ridge;
        info->viol = viol;
        info->gap = fabs(primal - dual) / fmax(1, fabs(primal));
        if (viol <= 1e-4 * scale && info->gap <= 1e-4) {
            info->status = FK_SFL_CONVERGED;
            break;
        }
    }
    info->iters = t > T ? T : t;
    free(Q);
    free(prev);
    free(hat);
    free(g);
    m->K = N;
    m->p = p;
    m->s = malloc(N * P * sizeof(double));
    m->w = malloc(N * sizeof(double));
    m->c = lam; /* becomes a = lambda / 2 (times y_n to classify) */
    if (!m->s || !m->w) {
        fk_sfl_model_close(m);
        return fk_err_set(err, FK_ENOMEM, "sfl (PI'): out of memory for %zu rows", N);
    }
    memcpy(m->s, X, N * P * sizeof(double));
    for (size_t n = 0; n < N; n++) {
        m->w[n] = w;
        m->c[n] = lam[n] / 2 * (cls ? y[n] : 1);
        info->active += lam[n] != 0.0;
    }
    return FK_OK;
}
