#include "common/models/mixture/fedgmm.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"
#include "common/models/mixture/gmm.h"

static const double LN_2PI = 1.8378770664093454836;
static const uint64_t GMMX_STREAM = 0x6d6f726700000000ULL; /* FedGMM's x-mixture fits */

int fk_fedgmm_ws_open(fk_fedgmm_ws *g, size_t n, int p, int R, int R1, fk_err *err)
{
    size_t Q = (size_t)R1 * R;
    *g = (fk_fedgmm_ws){0};
    g->L = malloc((size_t)p * p * sizeof(double));
    g->Z = malloc(n * p * sizeof(double));
    g->LX = malloc(n * R1 * sizeof(double));
    g->GG = malloc(n * Q * sizeof(double));
    g->U = malloc(n * R1 * sizeof(double));
    if (!g->L || !g->Z || !g->LX || !g->GG || !g->U) {
        fk_fedgmm_ws_close(g);
        return fk_err_set(err, FK_ENOMEM, "fedgmm: out of memory for n=%zu p=%d R=%d R1=%d", n, p,
                          R, R1);
    }
    return FK_OK;
}

void fk_fedgmm_ws_close(fk_fedgmm_ws *g)
{
    free(g->L);
    free(g->Z);
    free(g->LX);
    free(g->GG);
    free(g->U);
    *g = (fk_fedgmm_ws){0};
}

int fk_fedgmm_init_x(const double *X, size_t n, int p, int R1, int restarts, uint64_t seed,
                     int k, double *mu, double *Sig, fk_err *err)
{
    size_t pp = (size_t)p * p;
    double wk[R1];
    fk_rng g;
    fk_rng_init(&g, seed, GMMX_STREAM + (uint64_t)k);
    fk_eee_fit f = {.w = wk, .mu = mu, .sigma = Sig};
    int rc = fk_gmm_fit_eee(X, n, p, R1, restarts, &g, &f, err);
    if (rc)
        return rc;
    for (int a = 1; a < R1; a++) /* EEE: all x-components start equal */
        memcpy(Sig + (size_t)a * pp, Sig, pp * sizeof *Sig);
    return FK_OK;
}

void fk_fedgmm_pi_init(const double *w0, int R, int R1, double *pi)
{
    for (int q = 0; q < R1 * R; q++)
        pi[q] = w0[q % R] / R1; /* q = a R + r */
}

int fk_fedgmm_align_x(double *mu, int K, int R1, int p, int B, uint64_t seed, fk_err *err)
{
    size_t Sp = (size_t)R1 * p;
    int *perm = malloc((size_t)K * R1 * sizeof *perm);
    double *tmu = malloc((size_t)K * Sp * sizeof *tmu);
    if (!perm || !tmu) {
        free(perm);
        free(tmu);
        return fk_err_set(err, FK_ENOMEM, "fedgmm: out of memory aligning K=%d tasks", K);
    }
    memcpy(tmu, mu, (size_t)K * Sp * sizeof *tmu);
    fk_rng g;
    fk_rng_init(&g, seed, FK_MOR_ALIGN_STREAM + 1);
    int rc = fk_gmm_align(tmu, K, R1, p, B, &g, perm, err);
    for (int k = 0; rc == FK_OK && k < K; k++)
        for (int a = 0; a < R1; a++)
            memcpy(mu + (size_t)k * Sp + (size_t)a * p,
                   tmu + (size_t)k * Sp + (size_t)perm[k * R1 + a] * p, (size_t)p * sizeof *mu);
    free(perm);
    free(tmu);
    return rc;
}

/* Cholesky of S (p x p) into L with ln|S|; one retry with 1e-6 tr/p ridge. */
static int chol_logdet(const double *S, int p, double *L, double *logdet)
{
    for (int attempt = 0; attempt < 2; attempt++) {
        memcpy(L, S, (size_t)p * p * sizeof *L);
        double tr = 0.0;
        for (int j = 0; j < p; j++)
            tr += S[j * p + j];
        if (attempt)
            for (int j = 0; j < p; j++)
                L[j * p + j] += 1e-6 * tr / p + 1e-300;
        if (LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', p, L, p) == 0) {
            double ld = 0.0;
            for (int j = 0; j < p; j++)
                ld += 2.0 * log(L[j * p + j]);
            *logdet = ld;
            return FK_OK;
        }
    }
    return FK_ENUMERIC;
}

/* g->LX (n x R1) <- ln N(x_i; mu_a, Sig_a). */
FK_CHECKRETURN static int x_logdens(const double *X, size_t n, int p, int R1, const double *mu,
                     const double *Sig, fk_fedgmm_ws *g, fk_err *err)
{
    size_t pp = (size_t)p * p;
    for (int a = 0; a < R1; a++) {
        double ld;
        if (chol_logdet(Sig + (size_t)a * pp, p, g->L, &ld))
            return fk_err_set(err, FK_ENUMERIC, "mor fedgmm: x-covariance not positive definite");
        const double *m = mu + (size_t)a * p;
        for (size_t i = 0; i < n; i++)
            for (int j = 0; j < p; j++)
                g->Z[i * p + j] = X[i * p + j] - m[j];
        cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (int)n, p,
                    1.0, g->L, p, g->Z, p);
        for (size_t i = 0; i < n; i++)
            g->LX[i * R1 + a] =
                -0.5 * (cblas_ddot(p, g->Z + i * p, 1, g->Z + i * p, 1) + ld + p * LN_2PI);
    }
    return FK_OK;
}

/* Joint posteriors GG (n x Q) over (a, r); pi <- their means; U (n x R1) and s->G (n x R)
 * their marginals. */
static void joint_posteriors(const double *y, size_t n, int R, int R1, double *pi,
                             fk_mor_ws *s, fk_fedgmm_ws *g)
{
    int Q = R1 * R;
    double lp[Q];
    for (int q = 0; q < Q; q++)
        lp[q] = pi[q] > 0 ? log(pi[q]) : -INFINITY;
    for (size_t i = 0; i < n; i++) {
        double *gi = g->GG + i * Q, mx = -INFINITY, sm = 0.0;
        for (int a = 0; a < R1; a++)
            for (int r = 0; r < R; r++) {
                double e = y[i] - s->E[i * R + r];
                gi[a * R + r] = lp[a * R + r] + g->LX[i * R1 + a] - 0.5 * e * e;
                mx = gi[a * R + r] > mx ? gi[a * R + r] : mx;
            }
        for (int q = 0; q < Q; q++) {
            gi[q] = exp(gi[q] - mx);
            sm += gi[q];
        }
        for (int q = 0; q < Q; q++)
            gi[q] /= sm;
    }
    for (int q = 0; q < Q; q++)
        pi[q] = 0.0;
    for (size_t i = 0; i < n; i++) {
        for (int q = 0; q < Q; q++)
            pi[q] += g->GG[i * Q + q] / (double)n;
        for (int a = 0; a < R1; a++) {
            double u = 0.0;
            for (int r = 0; r < R; r++)
                u += g->GG[i * Q + a * R + r];
            g->U[i * R1 + a] = u;
        }
        for (int r = 0; r < R; r++) {
            double v = 0.0;
            for (int a = 0; a < R1; a++)
                v += g->GG[i * Q + a * R + r];
            s->G[i * R + r] = v;
        }
    }
}

/* Local x-means and covariances weighted by U's column a. */
static void x_moments(const double *X, size_t n, int p, int R1, double *mu, double *Sig,
                      fk_fedgmm_ws *g)
{
    size_t pp = (size_t)p * p;
    for (int a = 0; a < R1; a++) {
        double ua = 0.0, *m = mu + (size_t)a * p;
        for (size_t i = 0; i < n; i++)
            ua += g->U[i * R1 + a];
        ua = fmax(ua, 1e-10 * (double)n);
        for (int j = 0; j < p; j++)
            m[j] = 0.0;
        for (size_t i = 0; i < n; i++)
            for (int j = 0; j < p; j++)
                m[j] += g->U[i * R1 + a] * X[i * p + j] / ua;
        for (size_t i = 0; i < n; i++) {
            double sq = sqrt(g->U[i * R1 + a] / ua);
            for (int j = 0; j < p; j++)
                g->Z[i * p + j] = sq * (X[i * p + j] - m[j]);
        }
        double *S = Sig + (size_t)a * pp;
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, p, (int)n, 1.0, g->Z, p, 0.0, S, p);
        for (int i = 0; i < p; i++)
            for (int j = 0; j < i; j++)
                S[i * p + j] = S[j * p + i];
    }
}

int fk_fedgmm_local(const double *X, const double *y, size_t n, int p, int R, int R1,
                    const double *theta, double *pi, double *mu, double *Sig, double *loc,
                    fk_mor_ws *s, fk_fedgmm_ws *g, fk_err *err)
{
    int rc = x_logdens(X, n, p, R1, mu, Sig, g, err);
    if (rc)
        return rc;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, R, p, 1.0, X, p, theta, p, 0.0,
                s->E, R);
    joint_posteriors(y, n, R, R1, pi, s, g);
    x_moments(X, n, p, R1, mu, Sig, g);
    for (int r = 0; r < R; r++)
        if (fk_mor_wls(X, y, n, p, s->G, R, r, 1e-5, loc + (size_t)r * p, s->A, s->B))
            return fk_err_set(err, FK_ENUMERIC, "mor fedgmm: singular least squares");
    return FK_OK;
}

void fk_fedgmm_average(int K, int R, int R1, int p, const double *pi, const double *mu,
                       const double *Sig, const double *loc, int cov_first, double *mbar,
                       double *sbar, double *tbar)
{
    int Q = R1 * R;
    size_t Rp = (size_t)R * p, pp = (size_t)p * p;
    double mass[R1];
    memset(mbar, 0, (size_t)R1 * p * sizeof *mbar);
    memset(sbar, 0, (size_t)R1 * pp * sizeof *sbar);
    memset(tbar, 0, Rp * sizeof *tbar);
    memset(mass, 0, sizeof mass);
    for (int k = 0; k < K; k++) {
        for (int a = 0; a < R1; a++) {
            double m = 0.0;
            for (int r = 0; r < R; r++)
                m += pi[(size_t)k * Q + a * R + r];
            mass[a] += m;
            for (int j = 0; j < p; j++)
                mbar[a * p + j] += m * mu[((size_t)k * R1 + a) * p + j];
            const double *S = Sig + ((size_t)k * R1 + (cov_first ? 0 : a)) * pp;
            for (size_t q = 0; q < pp; q++)
                sbar[a * pp + q] += S[q] / K;
        }
        for (size_t i = 0; i < Rp; i++)
            tbar[i] += loc[(size_t)k * Rp + i] / K;
    }
    for (int a = 0; a < R1; a++)
        for (int j = 0; j < p; j++)
            mbar[a * p + j] /= fmax(mass[a], 1e-300);
}

void fk_fedgmm_weights(const double *pi, int R, int R1, double *w)
{
    for (int r = 0; r < R; r++) {
        double a = 0.0;
        for (int b = 0; b < R1; b++)
            a += pi[b * R + r];
        w[r] = a;
    }
}
