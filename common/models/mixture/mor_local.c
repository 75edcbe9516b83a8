#include "common/models/mixture/mor_local.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const double LN_2PI = 1.8378770664093454836;

/* G (n x R) <- posteriors of the R regressions (noise variances s2, NULL: 1) and, if E is
 * given, the residuals y_i - x_i^T theta_r. Returns the log-likelihood. */
double fk_mor_fit_rmse(const double *X, const double *y, size_t n, int p, const double *th, int R,
                       const double *G)
{
    double ss = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double *g = G + i * (size_t)R;
        int best = 0;
        for (int r = 1; r < R; r++)
            if (g[r] > g[best])
                best = r;
        double e = y[i] - cblas_ddot(p, X + i * (size_t)p, 1, th + (size_t)best * p, 1);
        ss += e * e;
    }
    double rmse = n ? sqrt(ss / (double)n) : NAN;
    return isfinite(rmse) ? rmse : NAN;
}

void fk_mor_predict(const double *X, const double *y, size_t n, int p, const double *w,
                    const double *th, const double *s2, int R, double *G, int *comp, double *val)
{
    if (y)
        (void)fk_mor_estep(X, y, n, p, w, th, s2, R, G, NULL);
    for (size_t i = 0; i < n; i++) {
        double *g = G + i * (size_t)R, mean = 0;
        const double *x = X + i * (size_t)p;
        int best = 0;
        for (int r = 0; r < R; r++) {
            if (!y)
                g[r] = w[r];
            if (g[r] > g[best])
                best = r;
            if (!y)
                mean += w[r] * cblas_ddot(p, x, 1, th + (size_t)r * p, 1);
        }
        comp[i] = best;
        val[i] = y ? cblas_ddot(p, x, 1, th + (size_t)best * p, 1) : mean;
    }
}

double fk_mor_estep(const double *X, const double *y, size_t n, int p, const double *w,
                        const double *th, const double *s2, int R, double *G, double *E)
{
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, R, p, 1.0, X, p, th, p, 0.0, G,
                R);
    double c[R], iv[R], ll = 0.0;
    for (int r = 0; r < R; r++) {
        double v = s2 ? s2[r] : 1.0;
        iv[r] = 1.0 / v;
        c[r] = (w[r] > 0 ? log(w[r]) : -INFINITY) - 0.5 * (LN_2PI + log(v));
    }
    for (size_t i = 0; i < n; i++) {
        double *g = G + i * (size_t)R, m = -INFINITY, s = 0.0;
        for (int r = 0; r < R; r++) {
            double e = y[i] - g[r];
            if (E)
                E[i * (size_t)R + r] = e;
            g[r] = c[r] - 0.5 * e * e * iv[r];
            m = g[r] > m ? g[r] : m;
        }
        for (int r = 0; r < R; r++) {
            g[r] = exp(g[r] - m);
            s += g[r];
        }
        for (int r = 0; r < R; r++)
            g[r] /= s;
        ll += m + log(s);
    }
    return ll;
}

int fk_mor_solve(const double *A, const double *b, int p, double ridge, double *out,
                 double *work)
{
    double tr = 0.0;
    for (int j = 0; j < p; j++)
        tr += A[j * p + j];
    for (int attempt = 0; attempt < 2; attempt++) {
        memcpy(work, A, (size_t)p * p * sizeof(double));
        memcpy(out, b, (size_t)p * sizeof(double));
        for (int j = 0; j < p; j++)
            work[j * p + j] += ridge + (attempt ? 1e-6 * tr / p + 1e-300 : 0.0);
        if (LAPACKE_dposv(LAPACK_ROW_MAJOR, 'U', p, 1, work, p, out, 1) == 0)
            return FK_OK;
    }
    return FK_ENUMERIC;
}

/* out = (X^T diag(g) X + ridge I)^-1 X^T diag(g) y with g = column r of G (n x R);
 * scratch A (p x p), B (n x p), the right-hand side in B's first row. */
int fk_mor_wls(const double *X, const double *y, size_t n, int p, const double *G, int R, int r,
               double ridge, double *out, double *A, double *B)
{
    double xty[p];
    memset(xty, 0, sizeof xty);
    for (size_t i = 0; i < n; i++) {
        double s = sqrt(G[i * (size_t)R + r]), a = G[i * (size_t)R + r] * y[i];
        for (int j = 0; j < p; j++) {
            B[i * (size_t)p + j] = s * X[i * (size_t)p + j];
            xty[j] += a * X[i * (size_t)p + j];
        }
    }
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, p, (int)n, 1.0, B, p, 0.0, A, p);
    return fk_mor_solve(A, xty, p, ridge, out, B);
}

void fk_mor_ws_close(fk_mor_ws *s)
{
    free(s->G);
    free(s->E);
    free(s->A);
    free(s->B);
    free(s->H);
}

int fk_mor_ws_open(fk_mor_ws *s, size_t n, int p, int R, fk_err *err)
{
    *s = (fk_mor_ws){0};
    s->G = malloc(n * R * sizeof(double));
    s->E = malloc(n * R * sizeof(double));
    s->A = malloc((size_t)p * p * sizeof(double));
    s->B = malloc(n * p * sizeof(double));
    s->H = malloc(n * R * sizeof(double));
    if (!s->G || !s->E || !s->A || !s->B || !s->H) {
        fk_mor_ws_close(s);
        return fk_err_set(err, FK_ENOMEM, "mor: out of memory for n=%zu p=%d R=%d", n, p, R);
    }
    return FK_OK;
}

int fk_mor_check_local_init(const char *local_init, fk_err *err)
{
    if (!strcmp(local_init, "kmeans"))
        return FK_OK;
    return fk_err_set(err, FK_EINVAL,
                      "local_init '%s' is not a start for mixtures of regressions: they "
                      "always start from random partitions (drop local_init)",
                      local_init);
}

/* Mixture-of-regressions EM (spec 2.1, mixreg analogue): restarts from random hard
 * partitions, relative tolerance 1e-6, at most 1000 iterations, best log-likelihood kept. */
int fk_mor_mixreg_fit(const double *X, const double *y, size_t n, int p, int R, int restarts,
                      fk_rng *rng, double *w, double *th, fk_mor_ws *s, fk_err *err)
{
    double best = -INFINITY, cw[R], cth[R * p], s2[R];
    for (int rs = 0; rs < restarts; rs++) {
        memset(s->G, 0, n * R * sizeof(double));
        for (size_t i = 0; i < n; i++)
            s->G[i * R + fk_rng_below(rng, (uint64_t)R)] = 1.0;
        double ll = -INFINITY;
        int ok = 1;
        for (int it = 0; it < 1000 && ok; it++) {
            for (int r = 0; r < R && ok; r++) { /* M-step */
                double nr = 0.0, ss = 0.0;
                for (size_t i = 0; i < n; i++)
                    nr += s->G[i * R + r];
                if (nr < (double)(p + 1) || fk_mor_wls(X, y, n, p, s->G, R, r, 0.0, cth + r * p, s->A, s->B)) {
                    ok = 0;
                    break;
                }
                cw[r] = nr / (double)n;
                for (size_t i = 0; i < n; i++) {
                    double e = y[i] - cblas_ddot(p, X + i * p, 1, cth + r * p, 1);
                    ss += s->G[i * R + r] * e * e;
                }
                s2[r] = fmax(ss / nr, 1e-6);
            }
            if (!ok)
                break;
            double nl = fk_mor_estep(X, y, n, p, cw, cth, s2, R, s->G, NULL);
            if (!isfinite(nl)) {
                ok = 0;
                break;
            }
            int done = fabs(nl - ll) <= 1e-6 * (1.0 + fabs(nl));
            ll = nl;
            if (done)
                break;
        }
        if (ok && ll > best) {
            best = ll;
            memcpy(w, cw, sizeof cw);
            memcpy(th, cth, sizeof cth);
        }
    }
    if (!isfinite(best))
        return fk_err_set(err, FK_ENUMERIC,
                          "mor local-em: all %d restarts failed (a component lost its points or "
                          "its weighted least squares was singular)",
                          restarts);
    return FK_OK;
}

/* g (R x p) = sum_i g_ir e_ir x_i, from G and E of the last E-step. */
static void grad_sum(const double *X, size_t n, int p, int R, fk_mor_ws *s, double *g)
{
    for (size_t i = 0; i < n * R; i++)
        s->H[i] = s->G[i] * s->E[i];
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, R, p, (int)n, 1.0, s->H, R, X, p, 0.0, g,
                p);
}

/* Gradient ascent step on the unit-noise surrogate: theta_r += eta_r/n sum_i g_ir e_ir x_i. */
static void grad_step(const double *X, size_t n, int p, int R, const double *eta, fk_mor_ws *s,
                      double *th)
{
    double g[R * p];
    grad_sum(X, n, p, R, s, g);
    for (int r = 0; r < R; r++)
        for (int j = 0; j < p; j++)
            th[r * p + j] += eta[r] / (double)n * g[r * p + j];
}

/* s_r <- sum of column r of G (n x R). */
static void column_sums(const double *G, size_t n, int R, double *s)
{
    for (int r = 0; r < R; r++) {
        double a = 0.0;
        for (size_t i = 0; i < n; i++)
            a += G[i * R + r];
        s[r] = a;
    }
}

/* w_r <- mean of column r of G (n x R). */
static void mean_weights(const double *G, size_t n, int R, double *w)
{
    column_sums(G, n, R, w);
    for (int r = 0; r < R; r++)
        w[r] /= (double)n;
}

double fk_mor_grem_stats(const double *X, const double *y, size_t n, int p, int R, const double *w,
                         const double *th, double *nr, double *g, fk_mor_ws *s)
{
    double ll = fk_mor_estep(X, y, n, p, w, th, NULL, R, s->G, s->E);
    column_sums(s->G, n, R, nr);
    grad_sum(X, n, p, R, s, g);
    return ll;
}

double fk_mor_grem_step(const double *X, const double *y, size_t n, int p, int R,
                        const double *eta, double *w, double *th, fk_mor_ws *s)
{
    double ll = fk_mor_estep(X, y, n, p, w, th, NULL, R, s->G, s->E);
    mean_weights(s->G, n, R, w);
    grad_step(X, n, p, R, eta, s, th);
    return ll;
}

int fk_mor_em_step(const double *X, const double *y, size_t n, int p, int R, double *w,
                   const double *th, double *out, double *ll, fk_mor_ws *s)
{
    *ll = fk_mor_estep(X, y, n, p, w, th, NULL, R, s->G, NULL);
    mean_weights(s->G, n, R, w);
    for (int r = 0; r < R; r++)
        if (fk_mor_wls(X, y, n, p, s->G, R, r, 1e-5, out + (size_t)r * p, s->A, s->B))
            return FK_ENUMERIC;
    return FK_OK;
}
