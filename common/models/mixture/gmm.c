#include "common/models/mixture/gmm.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/hungarian.h"
#include "common/la/vexp.h"
#include "common/models/mixture/gmm_hc.h"

static const double LN_2PI = 1.8378770664093454836;

void fk_gmm_sqdist(const double *X, size_t n, int p, const double *xsq, const double *C, int R,
                   double *D)
{
    double csq[R > 0 ? R : 1];
    for (int r = 0; r < R; r++)
        csq[r] = cblas_ddot(p, C + (size_t)r * p, 1, C + (size_t)r * p, 1);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, R, p, -2.0, X, p, C, p, 0.0, D, R);
    for (size_t i = 0; i < n; i++) {
        const double *x = X + i * (size_t)p;
        double s = xsq ? xsq[i] : cblas_ddot(p, x, 1, x, 1);
        for (int r = 0; r < R; r++) {
            double d = D[i * (size_t)R + r] + s + csq[r];
            D[i * (size_t)R + r] = d > 0 ? d : 0.0;
        }
    }
}

/* Rows of L hold log-densities; replace them by posteriors, return sum of row log-sum-exps.
 * Blocks of rows: max per row, one vectorized exp over the block, then the row sums. */
static double normalise_rows(double *L, size_t n, int R)
{
    enum { BLOCK = 256 };
    double total = 0.0, mx[BLOCK];
    for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
        size_t nb = n - i0 < BLOCK ? n - i0 : BLOCK;
        double *B = L + i0 * (size_t)R;
        for (size_t i = 0; i < nb; i++) {
            double *l = B + i * (size_t)R, m = -INFINITY;
            for (int r = 0; r < R; r++)
                m = l[r] > m ? l[r] : m;
            for (int r = 0; r < R; r++)
                l[r] -= m;
            mx[i] = m;
        }
        fk_vexp_nonpos(B, nb * (size_t)R);
        for (size_t i = 0; i < nb; i++) {
            double *l = B + i * (size_t)R, s = 0.0;
            for (int r = 0; r < R; r++)
                s += l[r];
            for (int r = 0; r < R; r++)
                l[r] /= s;
            total += mx[i] + log(s);
        }
    }
    return total;
}

double fk_gmm_estep(const double *X, size_t n, int p, const double *xsq, const double *w,
                    const double *theta, int R, double *gamma)
{
    fk_gmm_sqdist(X, n, p, xsq, theta, R, gamma);
    double lw[R > 0 ? R : 1];
    for (int r = 0; r < R; r++)
        lw[r] = w[r] > 0 ? log(w[r]) : -INFINITY;
    for (size_t i = 0; i < n; i++)
        for (int r = 0; r < R; r++)
            gamma[i * (size_t)R + r] = lw[r] - 0.5 * gamma[i * (size_t)R + r];
    return normalise_rows(gamma, n, R) - 0.5 * (double)n * p * LN_2PI;
}

void fk_gmm_stats(const double *X, size_t n, int p, const double *gamma, int R, double *nr,
                  double *sx)
{
    for (int r = 0; r < R; r++)
        nr[r] = 0.0;
    for (size_t i = 0; i < n; i++)
        for (int r = 0; r < R; r++)
            nr[r] += gamma[i * (size_t)R + r];
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, R, p, (int)n, 1.0, gamma, R, X, p, 0.0, sx,
                p);
}

void fk_gmm_grad_step(double *theta, const double *nr, const double *sx, size_t n, int p, int R,
                      const double *eta)
{
    for (int r = 0; r < R; r++) {
        double *t = theta + (size_t)r * p;
        const double *s = sx + (size_t)r * p;
        double a = eta[r] / (double)n;
        for (int j = 0; j < p; j++)
            t[j] += a * (s[j] - nr[r] * t[j]);
    }
}

void fk_gmm_exact_means(double *theta, const double *nr, const double *sx, size_t n, int p, int R)
{
    for (int r = 0; r < R; r++) {
        double d = nr[r] > 1e-10 * (double)n ? nr[r] : 1e-10 * (double)n;
        for (int j = 0; j < p; j++)
            theta[(size_t)r * p + j] = sx[(size_t)r * p + j] / d;
    }
}

void fk_gmm_predict(const double *X, size_t n, int p, const double *w, const double *theta, int R,
                    int *labels)
{
    double *D = malloc(n * (size_t)R * sizeof *D);
    if (!D) { /* fall back to one row at a time */
        for (size_t i = 0; i < n; i++)
            fk_gmm_predict(X + i * (size_t)p, 1, p, w, theta, R, labels + i);
        return;
    }
    fk_gmm_sqdist(X, n, p, NULL, theta, R, D);
    double lw[R];
    for (int r = 0; r < R; r++)
        lw[r] = w[r] > 0 ? log(w[r]) : -INFINITY;
    for (size_t i = 0; i < n; i++) {
        int best = 0;
        double bv = -INFINITY;
        for (int r = 0; r < R; r++) {
            double v = lw[r] - 0.5 * D[i * (size_t)R + r];
            if (v > bv) {
                bv = v;
                best = r;
            }
        }
        labels[i] = best;
    }
    free(D);
}

/* ---------- EEE mixture ---------- */

typedef struct eee_ws {
    size_t n;
    int p, R;
    double *Z, *zsq, *L, *mu_t, *chol, *G, *nr, *sx, *xtx;
    int regularised;
} eee_ws;

static void eee_ws_close(eee_ws *s)
{
    free(s->Z);
    free(s->zsq);
    free(s->L);
    free(s->mu_t);
    free(s->chol);
    free(s->G);
    free(s->nr);
    free(s->sx);
    free(s->xtx);
}

static int eee_ws_open(eee_ws *s, size_t n, int p, int R)
{
    *s = (eee_ws){.n = n, .p = p, .R = R};
    size_t np = n * (size_t)p, nR = n * (size_t)R, pp = (size_t)p * p, Rp = (size_t)R * p;
    s->Z = malloc(np * sizeof(double));
    s->zsq = malloc(n * sizeof(double));
    s->L = malloc(nR * sizeof(double));
    s->mu_t = malloc(Rp * sizeof(double));
    s->chol = malloc(pp * sizeof(double));
    s->G = malloc(nR * sizeof(double));
    s->nr = malloc((size_t)R * sizeof(double));
    s->sx = malloc(Rp * sizeof(double));
    s->xtx = malloc(pp * sizeof(double));
    return s->Z && s->zsq && s->L && s->mu_t && s->chol && s->G && s->nr && s->sx && s->xtx
               ? FK_OK
               : FK_ENOMEM;
}

int fk_gmm_eee_chol(double *sigma, int p, double *chol, int *regularised)
{
    for (int attempt = 0; attempt < 8; attempt++) {
        memcpy(chol, sigma, (size_t)p * p * sizeof(double));
        double anorm = 0.0, tr = 0.0;
        for (int j = 0; j < p; j++) {
            double c = 0.0;
            for (int i = 0; i < p; i++)
                c += fabs(sigma[i * p + j]);
            anorm = c > anorm ? c : anorm;
            tr += sigma[j * p + j];
        }
        int ok = isfinite(anorm) && anorm > 0 &&
                 LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', p, chol, p) == 0;
        double rcond = 0.0;
        if (ok && LAPACKE_dpocon(LAPACK_ROW_MAJOR, 'L', p, chol, p, anorm, &rcond) != 0)
            ok = 0;
        if (ok && rcond >= 1e-12)
            return FK_OK;
        if (!isfinite(tr))
            return FK_ENUMERIC;
        double add = tr > 0 ? 1e-6 * tr / p : 1e-6;
        for (int j = 0; j < p; j++)
            sigma[j * p + j] += add * (double)(1 << (2 * attempt));
        if (regularised)
            *regularised = 1;
    }
    return FK_ENUMERIC;
}

double fk_gmm_eee_estep(const double *X, size_t n, int p, const double *w, const double *mu,
                        const double *chol, int R, double *G, double *Z, double *mu_t)
{
    memcpy(Z, X, n * (size_t)p * sizeof(double));
    memcpy(mu_t, mu, (size_t)R * p * sizeof(double));
    /* Z = X L^-T, so |L^-1 (x - mu)|^2 = |z - mu_t|^2 */
    cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (int)n, p, 1.0,
                chol, p, Z, p);
    cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, R, p, 1.0, chol, p,
                mu_t, p);
    double logdet_half = 0.0;
    for (int j = 0; j < p; j++)
        logdet_half += log(chol[j * p + j]);
    fk_gmm_sqdist(Z, n, p, NULL, mu_t, R, G);
    double lw[R > 0 ? R : 1];
    for (int r = 0; r < R; r++)
        lw[r] = w[r] > 0 ? log(w[r]) : -INFINITY;
    for (size_t i = 0; i < n; i++)
        for (int r = 0; r < R; r++)
            G[i * (size_t)R + r] = lw[r] - 0.5 * G[i * (size_t)R + r];
    return normalise_rows(G, n, R) - (double)n * (logdet_half + 0.5 * p * LN_2PI);
}

/* E-step with shared covariance; X is centred data. Returns log-likelihood. */
static int eee_estep(eee_ws *s, const double *X, const double *w, const double *mu, double *sigma,
                     double *ll)
{
    if (fk_gmm_eee_chol(sigma, s->p, s->chol, &s->regularised) != FK_OK)
        return FK_ENUMERIC;
    *ll = fk_gmm_eee_estep(X, s->n, s->p, w, mu, s->chol, s->R, s->G, s->Z, s->mu_t);
    return isfinite(*ll) ? FK_OK : FK_ENUMERIC;
}

int fk_gmm_eee_mstep(const double *nr, const double *sx, const double *xtx, double n, int p, int R,
                     double *w, double *mu, double *sigma)
{
    memcpy(sigma, xtx, (size_t)p * p * sizeof(double));
    for (int r = 0; r < R; r++) {
        if (!(nr[r] >= 1e-8 * n))
            return FK_ENUMERIC;
        w[r] = nr[r] / n;
        for (int j = 0; j < p; j++)
            mu[(size_t)r * p + j] = sx[(size_t)r * p + j] / nr[r];
        /* sigma -= nr_r mu_r mu_r^T */
        cblas_dger(CblasRowMajor, p, p, -nr[r], mu + (size_t)r * p, 1, mu + (size_t)r * p, 1,
                   sigma, p);
    }
    for (int j = 0; j < p * p; j++)
        sigma[j] /= n;
    return FK_OK;
}

/* M-step from responsibilities G (centred X). Fails when a component empties. */
static int eee_mstep(eee_ws *s, const double *X, const double *G, double *w, double *mu,
                     double *sigma)
{
    fk_gmm_stats(X, s->n, s->p, G, s->R, s->nr, s->sx);
    return fk_gmm_eee_mstep(s->nr, s->sx, s->xtx, (double)s->n, s->p, s->R, w, mu, sigma);
}

/* k-means++ seeding and Lloyd iterations; hard labels into G (one-hot). FK_ENOMEM when the
 * label buffer cannot be had: the restart must not go on to EM without its Lloyd steps. */
FK_CHECKRETURN static int kmeans(eee_ws *s, const double *X, const double *xsq, fk_rng *rng, double *C,
                  fk_err *err)
{
    int p = s->p, R = s->R;
    size_t n = s->n;
    double *d = s->zsq; /* reuse: distance to nearest chosen centre */
    size_t first = (size_t)fk_rng_below(rng, n);
    memcpy(C, X + first * (size_t)p, (size_t)p * sizeof(double));
    for (size_t i = 0; i < n; i++)
        d[i] = INFINITY;
    for (int c = 1; c <= R; c++) {
        fk_gmm_sqdist(X, n, p, xsq, C + (size_t)(c - 1) * p, 1, s->L);
        double tot = 0.0;
        for (size_t i = 0; i < n; i++) {
            if (s->L[i] < d[i])
                d[i] = s->L[i];
            tot += d[i];
        }
        if (c == R)
            break;
        size_t pick = (size_t)fk_rng_below(rng, n);
        if (tot > 0) {
            double u = fk_rng_uniform(rng) * tot, acc = 0.0;
            for (pick = 0; pick + 1 < n; pick++) {
                acc += d[pick];
                if (acc > u)
                    break;
            }
        }
        memcpy(C + (size_t)c * p, X + pick * (size_t)p, (size_t)p * sizeof(double));
    }
    int *lab = malloc(n * sizeof *lab);
    if (!lab)
        return fk_err_set(err, FK_ENOMEM, "EEE fit: out of memory for k-means labels (n=%zu)", n);
    for (size_t i = 0; i < n; i++)
        lab[i] = -1;
    for (int it = 0; it < 100; it++) {
        fk_gmm_sqdist(X, n, p, xsq, C, R, s->L);
        int changed = 0;
        for (size_t i = 0; i < n; i++) {
            int b = 0;
            for (int r = 1; r < R; r++)
                if (s->L[i * (size_t)R + r] < s->L[i * (size_t)R + b])
                    b = r;
            changed += lab[i] != b;
            lab[i] = b;
        }
        if (!changed)
            break;
        memset(C, 0, (size_t)R * p * sizeof(double));
        memset(s->nr, 0, (size_t)R * sizeof(double));
        for (size_t i = 0; i < n; i++) {
            s->nr[lab[i]] += 1.0;
            cblas_daxpy(p, 1.0, X + i * (size_t)p, 1, C + (size_t)lab[i] * p, 1);
        }
        for (int r = 0; r < R; r++) {
            if (s->nr[r] > 0) {
                cblas_dscal(p, 1.0 / s->nr[r], C + (size_t)r * p, 1);
                continue;
            }
            size_t far = 0; /* empty cluster: reseed at the point farthest from its centre */
            double fd = -1.0;
            for (size_t i = 0; i < n; i++)
                if (s->L[i * (size_t)R + lab[i]] > fd) {
                    fd = s->L[i * (size_t)R + lab[i]];
                    far = i;
                }
            memcpy(C + (size_t)r * p, X + far * (size_t)p, (size_t)p * sizeof(double));
            s->L[far * (size_t)R + lab[far]] = -1.0;
        }
    }
    for (size_t i = 0; i < n; i++)
        for (int r = 0; r < R; r++)
            s->G[i * (size_t)R + r] = lab[i] == r;
    free(lab);
    return FK_OK;
}

/* One EM run from the hard partition in s->G. */
static int eee_em(eee_ws *s, const double *X, double *w, double *mu, double *sigma, double *ll,
                  int *iters)
{
    double old = -INFINITY;
    int rc = eee_mstep(s, X, s->G, w, mu, sigma);
    for (int it = 0; rc == FK_OK && it < 10000; it++) {
        rc = eee_estep(s, X, w, mu, sigma, ll);
        if (rc)
            break;
        *iters = it + 1;
        if (fabs(*ll - old) <= 1e-5 * (1.0 + fabs(*ll)))
            break;
        old = *ll;
        rc = eee_mstep(s, X, s->G, w, mu, sigma);
    }
    return rc;
}

/* One-hot s->G from the hierarchical (mclust) partition of X into s->R clusters. */
FK_CHECKRETURN static int hc_start(eee_ws *s, const double *X, fk_err *err)
{
    int *lab = malloc(s->n * sizeof *lab);
    if (!lab)
        return fk_err_set(err, FK_ENOMEM, "EEE fit: out of memory (n=%zu)", s->n);
    int rc = fk_gmm_hc_vvv(X, s->n, s->p, s->R, lab, err);
    for (size_t i = 0; rc == FK_OK && i < s->n; i++)
        for (int r = 0; r < s->R; r++)
            s->G[i * (size_t)s->R + r] = lab[i] == r;
    free(lab);
    return rc;
}

/* Best of `restarts` EM runs, each from k-means++ (rng) or, with hc, the one hierarchical start. */
FK_CHECKRETURN static int fit_eee(const double *X, size_t n, int p, int R, int restarts, fk_rng *rng, int hc,
                   fk_eee_fit *out, fk_err *err)
{
    if (R < 1 || p < 1)
        return fk_err_set(err, FK_EINVAL, "EEE fit: need R >= 1 and p >= 1 (got R=%d, p=%d)", R, p);
    if (n < (size_t)R)
        return fk_err_set(err, FK_EINVAL,
                          "EEE fit: %zu samples cannot support R = %d components; use fewer "
                          "components or give this client more data",
                          n, R);
    for (size_t i = 0; i < n * (size_t)p; i++)
        if (!isfinite(X[i]))
            return fk_err_set(err, FK_EINVAL,
                              "EEE fit: sample %zu feature %zu is not finite; remove or impute "
                              "NaN/Inf values first",
                              i / (size_t)p, i % (size_t)p);
    eee_ws s;
    double *Xc = malloc(n * (size_t)p * sizeof *Xc), *xsq = malloc(n * sizeof *xsq);
    double *m = calloc((size_t)p, sizeof *m), *C = malloc((size_t)R * p * sizeof *C);
    double *w = malloc((size_t)R * sizeof *w), *mu = malloc((size_t)R * p * sizeof *mu);
    double *sg = malloc((size_t)p * p * sizeof *sg);
    int rc = eee_ws_open(&s, n, p, R);
    if (rc || !Xc || !xsq || !m || !C || !w || !mu || !sg) {
        rc = fk_err_set(err, FK_ENOMEM, "EEE fit: out of memory (n=%zu, p=%d, R=%d)", n, p, R);
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        cblas_daxpy(p, 1.0 / (double)n, X + i * (size_t)p, 1, m, 1);
    for (size_t i = 0; i < n; i++) {
        for (int j = 0; j < p; j++)
            Xc[i * (size_t)p + j] = X[i * (size_t)p + j] - m[j];
        xsq[i] = cblas_ddot(p, Xc + i * (size_t)p, 1, Xc + i * (size_t)p, 1);
    }
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p, p, (int)n, 1.0, Xc, p, Xc, p, 0.0,
                s.xtx, p);
    out->loglik = -INFINITY;
    out->regularised = 0;
    int found = 0;
    for (int b = 0; b < restarts; b++) {
        if (hc && (rc = hc_start(&s, Xc, err)) != FK_OK)
            goto done;
        if (!hc && (rc = kmeans(&s, Xc, xsq, rng, C, err)) != FK_OK)
            goto done;
        double ll = -INFINITY;
        int iters = 0;
        if (eee_em(&s, Xc, w, mu, sg, &ll, &iters) != FK_OK || !(ll > out->loglik))
            continue;
        found = 1;
        out->loglik = ll;
        out->iters = iters;
        memcpy(out->w, w, (size_t)R * sizeof *w);
        memcpy(out->sigma, sg, (size_t)p * p * sizeof *sg);
        for (int r = 0; r < R; r++)
            for (int j = 0; j < p; j++)
                out->mu[(size_t)r * p + j] = mu[(size_t)r * p + j] + m[j];
    }
    out->regularised = s.regularised;
    if (!found && hc)
        rc = fk_err_set(err, FK_ENUMERIC,
                        "EEE fit from the hierarchical start failed (a component emptied or the "
                        "covariance is degenerate) with n=%zu, p=%d, R=%d; try fewer components "
                        "or local_init = kmeans",
                        n, p, R);
    else if (!found)
        rc = fk_err_set(err, FK_ENUMERIC,
                        "EEE fit: all %d restarts failed (a component emptied or the covariance "
                        "is degenerate) with n=%zu, p=%d, R=%d; try fewer components",
                        restarts, n, p, R);
done:
    eee_ws_close(&s);
    free(Xc);
    free(xsq);
    free(m);
    free(C);
    free(w);
    free(mu);
    free(sg);
    return rc;
}

int fk_gmm_fit_eee(const double *X, size_t n, int p, int R, int restarts, fk_rng *rng,
                   fk_eee_fit *out, fk_err *err)
{
    return fit_eee(X, n, p, R, restarts, rng, 0, out, err);
}

int fk_gmm_fit_eee_hc(const double *X, size_t n, int p, int R, fk_eee_fit *out, fk_err *err)
{
    return fit_eee(X, n, p, R, 1, NULL, 1, out, err);
}

int fk_gmm_predict_eee(const double *X, size_t n, int p, const double *w, const double *mu,
                       const double *sigma, int R, int *labels, fk_err *err)
{
    eee_ws s;
    double *sg = malloc((size_t)p * p * sizeof *sg);
    int rc = eee_ws_open(&s, n, p, R);
    if (rc || !sg) {
        rc = fk_err_set(err, FK_ENOMEM, "EEE predict: out of memory");
    } else {
        memcpy(sg, sigma, (size_t)p * p * sizeof *sg);
        double ll;
        rc = fk_gmm_eee_chol(sg, p, s.chol, &s.regularised);
        if (rc == FK_OK) /* a non-finite likelihood of test points is fine for labels */
            eee_estep(&s, X, w, mu, sg, &ll);
        else
            fk_err_set(err, rc, "EEE predict: covariance is not positive definite");
        for (size_t i = 0; rc == FK_OK && i < n; i++) {
            int b = 0;
            for (int r = 1; r < R; r++)
                if (s.G[i * (size_t)R + r] > s.G[i * (size_t)R + b])
                    b = r;
            labels[i] = b;
        }
    }
    eee_ws_close(&s);
    free(sg);
    return rc;
}

/* ---------- alignment ---------- */

#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#include <immintrin.h>
#define FK_GMM_DIST_AVX2 1
#endif

static double dist(const double *a, const double *b, int p)
{
    double s = 0.0;
    for (int j = 0; j < p; j++)
        s += (a[j] - b[j]) * (a[j] - b[j]);
    return sqrt(s);
}

/* Centre s of task k in a K x R x p block. */
static const double *centre(const double *M, int R, int p, int k, int s)
{
    return M + ((size_t)k * (size_t)R + (size_t)s) * (size_t)p;
}

/* out[a] = dist(x, point a) for a < n, the points stored by coordinate (coordinate q of point
 * a at Y[q * ld + a]). Bit for bit dist()'s: per point the same subtractions, products and
 * sums in the same order (the vector version only does several points at once), so the
 * alignment's labels, and the fedgrem models, are those of the direct loops. */
static void dist_many_scalar(const double *x, const double *Y, size_t ld, size_t n, int p,
                             double *out)
{
    for (size_t a = 0; a < n; a++) {
        double s = 0.0;
        for (int q = 0; q < p; q++) {
            double d = x[q] - Y[(size_t)q * ld + a];
            s += d * d;
        }
        out[a] = sqrt(s);
    }
}

#ifdef FK_GMM_DIST_AVX2
/* Four points per lane group, 16 at a time; no FMA (target avx2 only), so every lane rounds
 * exactly as the scalar code does. */
__attribute__((target("avx2"))) static void dist_many_avx2(const double *x, const double *Y,
                                                           size_t ld, size_t n, int p, double *out)
{
    size_t a = 0;
    for (; a + 16 <= n; a += 16) {
        __m256d s0 = _mm256_setzero_pd(), s1 = s0, s2 = s0, s3 = s0;
        for (int q = 0; q < p; q++) {
            const double *y = Y + (size_t)q * ld + a;
            __m256d xq = _mm256_set1_pd(x[q]);
            __m256d d0 = _mm256_sub_pd(xq, _mm256_loadu_pd(y));
            __m256d d1 = _mm256_sub_pd(xq, _mm256_loadu_pd(y + 4));
            __m256d d2 = _mm256_sub_pd(xq, _mm256_loadu_pd(y + 8));
            __m256d d3 = _mm256_sub_pd(xq, _mm256_loadu_pd(y + 12));
            s0 = _mm256_add_pd(s0, _mm256_mul_pd(d0, d0));
            s1 = _mm256_add_pd(s1, _mm256_mul_pd(d1, d1));
            s2 = _mm256_add_pd(s2, _mm256_mul_pd(d2, d2));
            s3 = _mm256_add_pd(s3, _mm256_mul_pd(d3, d3));
        }
        _mm256_storeu_pd(out + a, _mm256_sqrt_pd(s0));
        _mm256_storeu_pd(out + a + 4, _mm256_sqrt_pd(s1));
        _mm256_storeu_pd(out + a + 8, _mm256_sqrt_pd(s2));
        _mm256_storeu_pd(out + a + 12, _mm256_sqrt_pd(s3));
    }
    for (; a + 4 <= n; a += 4) {
        __m256d s0 = _mm256_setzero_pd();
        for (int q = 0; q < p; q++) {
            __m256d d0 =
                _mm256_sub_pd(_mm256_set1_pd(x[q]), _mm256_loadu_pd(Y + (size_t)q * ld + a));
            s0 = _mm256_add_pd(s0, _mm256_mul_pd(d0, d0));
        }
        _mm256_storeu_pd(out + a, _mm256_sqrt_pd(s0));
    }
    dist_many_scalar(x, Y + a, ld, n - a, p, out + a);
}
#endif

static void dist_many(const double *x, const double *Y, size_t ld, size_t n, int p, double *out)
{
#ifdef FK_GMM_DIST_AVX2
    static int avx2 = -1; /* racy first use is benign: every thread computes the same answer */
    if (avx2 < 0)
        avx2 = __builtin_cpu_supports("avx2") ? 1 : 0;
    if (avx2) {
        dist_many_avx2(x, Y, ld, n, p, out);
        return;
    }
#endif
    dist_many_scalar(x, Y, ld, n, p, out);
}

/* Points per dist_many call: a block's distances stay in L1 until they are summed. */
enum { ALIGN_BLOCK = 256, ALIGN_LANES = 8 };

/* The greedy pass of one task order, then its score. The costs and the score are the sums of
 * the direct loops, term by term in the same order (only the distances are computed ahead,
 * ALIGN_BLOCK at a time, from coordinate-major copies of the aligned centres), so perm and
 * every tie break are the direct loops' for the same seed. */
typedef struct align_ws {
    int K, R, p;
    double *A;    /* R x p x K: aligned centre r of the a-th task of the order, coordinate q */
    double *buf;  /* max(R, ALIGN_LANES) x ALIGN_BLOCK distances */
    double *cost; /* R x R */
    int *as;
} align_ws;

/* The cost matrix of task k against the first j tasks of the order (their centres in ws->A):
 * cost(r, s) = sum over a < j of dist(centre s of k, aligned centre r of task a), each sum in
 * the order of a. ALIGN_LANES of the R x R sums run side by side: each is a chain of
 * dependent additions, and only independent chains keep the adder busy. */
static void align_costs(align_ws *w, const double *M, int k, int j)
{
    int R = w->R, p = w->p, RR = R * R;
    size_t K = (size_t)w->K;
    for (int t0 = 0; t0 < RR; t0 += ALIGN_LANES) {
        int nt = RR - t0 < ALIGN_LANES ? RR - t0 : ALIGN_LANES;
        double c[ALIGN_LANES] = {0};
        for (int a0 = 0; a0 < j; a0 += ALIGN_BLOCK) {
            size_t m = (size_t)(j - a0 < ALIGN_BLOCK ? j - a0 : ALIGN_BLOCK);
            for (int l = 0; l < nt; l++) {
                int r = (t0 + l) / R, s = (t0 + l) % R;
                dist_many(centre(M, R, p, k, s), w->A + (size_t)r * p * K + a0, K, m, p,
                          w->buf + (size_t)l * ALIGN_BLOCK);
            }
            const double *b = w->buf;
            if (nt == ALIGN_LANES)
                for (size_t a = 0; a < m; a++)
                    for (int l = 0; l < ALIGN_LANES; l++)
                        c[l] += b[(size_t)l * ALIGN_BLOCK + a];
            else
                for (int l = 0; l < nt; l++)
                    for (size_t a = 0; a < m; a++)
                        c[l] += b[(size_t)l * ALIGN_BLOCK + a];
        }
        for (int l = 0; l < nt; l++)
            w->cost[t0 + l] = c[l];
    }
}

/* Aligned centres of task k (its labels cur_k) into column col of the R x p x K block D. */
static void align_put(double *D, const double *M, int K, int R, int p, int k, const int *cur_k,
                      int col)
{
    for (int r = 0; r < R; r++) {
        const double *x = centre(M, R, p, k, cur_k[r]);
        for (int q = 0; q < p; q++)
            D[((size_t)r * p + (size_t)q) * (size_t)K + (size_t)col] = x[q];
    }
}

/* Sum over task pairs k < k2 and labels r of dist(aligned centre r of k, of k2), in that
 * order (ws->A holds the aligned centres by task). */
static double align_score(align_ws *w, const double *M, const int *cur)
{
    int K = w->K, R = w->R, p = w->p;
    double sc = 0.0;
    for (int k = 0; k < K; k++)
        for (int b0 = k + 1; b0 < K; b0 += ALIGN_BLOCK) {
            size_t m = (size_t)(K - b0 < ALIGN_BLOCK ? K - b0 : ALIGN_BLOCK);
            for (int r = 0; r < R; r++)
                dist_many(centre(M, R, p, k, cur[(size_t)k * R + r]),
                          w->A + (size_t)r * p * (size_t)K + b0, (size_t)K, m, p,
                          w->buf + (size_t)r * ALIGN_BLOCK);
            for (size_t i = 0; i < m; i++)
                for (int r = 0; r < R; r++)
                    sc += w->buf[(size_t)r * ALIGN_BLOCK + i];
        }
    return sc;
}

int fk_gmm_align(const double *M, int K, int R, int p, int B, fk_rng *rng, int *perm, fk_err *err)
{
    if (K < 1 || R < 1 || B < 1)
        return fk_err_set(err, FK_EINVAL, "align: need K, R, B >= 1");
    size_t KR = (size_t)K * R;
    align_ws w = {.K = K, .R = R, .p = p};
    int *order = malloc((size_t)K * sizeof *order), *cur = malloc(KR * sizeof *cur);
    w.as = malloc((size_t)R * sizeof *w.as);
    w.cost = malloc((size_t)R * R * sizeof *w.cost);
    w.A = malloc(KR * (size_t)(p > 0 ? p : 1) * sizeof *w.A);
    w.buf = malloc((size_t)(R > ALIGN_LANES ? R : ALIGN_LANES) * ALIGN_BLOCK * sizeof *w.buf);
    int rc = FK_OK;
    if (!order || !cur || !w.as || !w.cost || !w.A || !w.buf) {
        rc = fk_err_set(err, FK_ENOMEM, "align: out of memory for K=%d, R=%d, p=%d", K, R, p);
        goto done;
    }
    double best = INFINITY;
    for (int b = 0; b < B && rc == FK_OK; b++) {
        for (int k = 0; k < K; k++)
            order[k] = k;
        fk_rng_shuffle(rng, order, (size_t)K);
        for (int r = 0; r < R; r++)
            cur[(size_t)order[0] * R + r] = r;
        align_put(w.A, M, K, R, p, order[0], cur + (size_t)order[0] * R, 0);
        for (int j = 1; j < K && rc == FK_OK; j++) {
            int k = order[j];
            align_costs(&w, M, k, j);
            for (int i = 0; i < R * R && rc == FK_OK; i++)
                if (!isfinite(w.cost[i]))
                    rc = fk_err_set(err, FK_ENUMERIC,
                                    "align: distances between the centres of tasks are not "
                                    "finite (centres beyond +-%g?)",
                                    FK_GMM_MAX_ABS);
            if (rc == FK_OK)
                rc = fk_hungarian(w.cost, R, w.as, NULL, err);
            if (rc) /* no assignment: cur must not be scored */
                goto done;
            for (int r = 0; r < R; r++)
                cur[(size_t)k * R + r] = w.as[r];
            align_put(w.A, M, K, R, p, k, cur + (size_t)k * R, j);
        }
        /* the score sums by task, not by order: the same block, refilled by task */
        for (int k = 0; k < K; k++)
            align_put(w.A, M, K, R, p, k, cur + (size_t)k * R, k);
        double sc = align_score(&w, M, cur);
        if (rc == FK_OK && sc < best) {
            best = sc;
            memcpy(perm, cur, KR * sizeof *cur);
        }
    }
    if (rc == FK_OK && !isfinite(best))
        rc = fk_err_set(err, FK_ENUMERIC, "align: centres are not finite");
done:
    free(order);
    free(cur);
    free(w.as);
    free(w.cost);
    free(w.A);
    free(w.buf);
    return rc;
}

/* ---------- central update ---------- */

double fk_gmm_lambda_next(double prev, double kappa, double C, int p, int K)
{
    return kappa * prev + C * sqrt((double)p + log((double)K));
}

/* beta = sum n_k (tt_k - delta_k) / N */
static void central_beta(const double *tt, const double *nk, int K, int p, const double *delta,
                         double N, double *beta)
{
    for (int j = 0; j < p; j++)
        beta[j] = 0.0;
    for (int k = 0; k < K; k++)
        for (int j = 0; j < p; j++)
            beta[j] += nk[k] * (tt[(size_t)k * p + j] - delta[(size_t)k * p + j]);
    for (int j = 0; j < p; j++)
        beta[j] /= N;
}

/* delta_k = group soft-threshold of tt_k - beta at tau_k = lambda / sqrt(n_k). */
static void central_delta(const double *tt, const double *nk, int K, int p, const double *beta,
                          double lambda, double *delta)
{
    for (int k = 0; k < K; k++) {
        double *d = delta + (size_t)k * p, s = 0.0, tau = lambda / sqrt(nk[k]);
        for (int j = 0; j < p; j++) {
            d[j] = tt[(size_t)k * p + j] - beta[j];
            s += d[j] * d[j];
        }
        s = sqrt(s);
        double f = s > tau ? 1.0 - tau / s : 0.0;
        for (int j = 0; j < p; j++)
            d[j] *= f;
    }
}

int fk_gmm_central(const double *tt, const double *nk, int K, int p, double lambda,
                   int compat_passes, double *theta, double *beta, double *work)
{
    double N = 0.0;
    for (int k = 0; k < K; k++)
        N += nk[k];
    if (lambda == 0.0) { /* no penalty: every task keeps its own estimate (bitwise) */
        memcpy(theta, tt, (size_t)K * p * sizeof *theta);
        memset(work, 0, (size_t)K * p * sizeof *work);
        central_beta(tt, nk, K, p, work, N, beta);
        return 0;
    }
    memset(work, 0, (size_t)K * p * sizeof *work);
    int passes = 0;
    if (isinf(lambda)) {
        central_beta(tt, nk, K, p, work, N, beta);
        passes = 1;
    } else {
        double old[p > 0 ? p : 1];
        int cap = compat_passes > 0 ? compat_passes : 10000;
        for (passes = 1; passes <= cap; passes++) {
            memcpy(old, beta, (size_t)p * sizeof *old);
            central_beta(tt, nk, K, p, work, N, beta);
            central_delta(tt, nk, K, p, beta, lambda, work);
            if (compat_passes == 0 && passes >= 2) {
                double dn = 0.0, on = 0.0;
                for (int j = 0; j < p; j++) {
                    dn += (beta[j] - old[j]) * (beta[j] - old[j]);
                    on += old[j] * old[j];
                }
                if (sqrt(dn) <= 1e-10 * (1.0 + sqrt(on)))
                    break;
            }
        }
        if (passes > cap)
            passes = cap;
    }
    for (int k = 0; k < K; k++)
        for (int j = 0; j < p; j++)
            theta[(size_t)k * p + j] = beta[j] + work[(size_t)k * p + j];
    return passes;
}

/* Huber objective of beta (spec 1.6): sum_k n_k H_tau_k(|beta - tt_k|). */
static double central_huber(const double *tt, const double *nk, int K, int p, double lambda,
                            const double *beta)
{
    double f = 0.0;
    for (int k = 0; k < K; k++) {
        double s = 0.0, tau = lambda / sqrt(nk[k]);
        for (int j = 0; j < p; j++) {
            double d = beta[j] - tt[(size_t)k * p + j];
            s += d * d;
        }
        double u = sqrt(s);
        f += nk[k] * (u <= tau ? 0.5 * s : tau * u - 0.5 * tau * tau);
    }
    return f;
}

int fk_gmm_central_mm(const double *tt, const double *nk, int K, int p, double lambda,
                      double *theta, double *beta, double *work)
{
    if (!(lambda > 0.0) || isinf(lambda) || K < 2)
        return fk_gmm_central(tt, nk, K, p, lambda, 0, theta, beta, work);
    double N = 0.0, mean[p > 0 ? p : 1], old[p > 0 ? p : 1];
    for (int k = 0; k < K; k++)
        N += nk[k];
    memset(work, 0, (size_t)K * p * sizeof *work);
    central_beta(tt, nk, K, p, work, N, mean);
    int fused = 1; /* lambda >= lambda_fuse: the weighted mean is the exact solution */
    for (int k = 0; k < K && fused; k++) {
        double s = 0.0, tau = lambda / sqrt(nk[k]);
        for (int j = 0; j < p; j++) {
            double d = tt[(size_t)k * p + j] - mean[j];
            s += d * d;
        }
        fused = s <= tau * tau;
    }
    int warm = 1;
    for (int j = 0; j < p; j++)
        warm = warm && isfinite(beta[j]);
    if (fused || !warm ||
        central_huber(tt, nk, K, p, lambda, mean) <= central_huber(tt, nk, K, p, lambda, beta))
        memcpy(beta, mean, (size_t)p * sizeof *beta);
    int passes = 1;
    if (!fused) {
        /* majorize-minimize: each Huber term is bounded by a quadratic touching it at beta, so
         * the weighted mean with a_k = n_k min(1, tau_k/|tt_k - beta|) never increases f */
        for (passes = 1; passes <= 10000; passes++) {
            memcpy(old, beta, (size_t)p * sizeof *old);
            double A = 0.0, on = 0.0, dn = 0.0;
            for (int j = 0; j < p; j++)
                beta[j] = 0.0;
            for (int k = 0; k < K; k++) {
                const double *t = tt + (size_t)k * p;
                double s = 0.0, tau = lambda / sqrt(nk[k]);
                for (int j = 0; j < p; j++)
                    s += (t[j] - old[j]) * (t[j] - old[j]);
                double a = s > tau * tau ? nk[k] * tau / sqrt(s) : nk[k];
                A += a;
                for (int j = 0; j < p; j++)
                    beta[j] += a * t[j];
            }
            for (int j = 0; j < p; j++) {
                beta[j] /= A;
                dn += (beta[j] - old[j]) * (beta[j] - old[j]);
                on += old[j] * old[j];
            }
            if (sqrt(dn) <= 1e-10 * (1.0 + sqrt(on)))
                break;
        }
        if (passes > 10000)
            passes = 10000;
    }
    central_delta(tt, nk, K, p, beta, lambda, work);
    for (int k = 0; k < K; k++)
        for (int j = 0; j < p; j++)
            theta[(size_t)k * p + j] = beta[j] + work[(size_t)k * p + j];
    return passes;
}

double fk_gmm_central_objective(const double *tt, const double *nk, int K, int p, double lambda,
                                const double *theta, const double *beta)
{
    double F = 0.0;
    for (int k = 0; k < K; k++) {
        double a = 0.0, b = 0.0;
        for (int j = 0; j < p; j++) {
            double u = theta[(size_t)k * p + j] - tt[(size_t)k * p + j];
            double v = theta[(size_t)k * p + j] - beta[j];
            a += u * u;
            b += v * v;
        }
        F += 0.5 * nk[k] * a + sqrt(nk[k]) * lambda * sqrt(b);
    }
    return F;
}

/* ---------- metrics ---------- */

/* Kuhn's augmenting path on the graph {cost <= thr}. */
static int augment(const double *cost, int R, double thr, int r, char *seen, int *match)
{
    for (int s = 0; s < R; s++) {
        if (seen[s] || cost[r * R + s] > thr)
            continue;
        seen[s] = 1;
        if (match[s] < 0 || augment(cost, R, thr, match[s], seen, match)) {
            match[s] = r;
            return 1;
        }
    }
    return 0;
}

static int perfect(const double *cost, int R, double thr)
{
    int match[R];
    char seen[R];
    for (int s = 0; s < R; s++)
        match[s] = -1;
    for (int r = 0; r < R; r++) {
        memset(seen, 0, (size_t)R);
        if (!augment(cost, R, thr, r, seen, match))
            return 0;
    }
    return 1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double fk_gmm_bottleneck(const double *cost, int R)
{
    int m = R * R;
    double sorted[m];
    memcpy(sorted, cost, (size_t)m * sizeof *sorted);
    qsort(sorted, (size_t)m, sizeof *sorted, cmp_double);
    int lo = 0, hi = m - 1; /* smallest threshold admitting a perfect matching */
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (perfect(cost, R, sorted[mid]))
            hi = mid;
        else
            lo = mid + 1;
    }
    return sorted[lo];
}

double fk_gmm_err_theta(const double *est, const double *truth, int R, int p)
{
    double c[R * R];
    for (int r = 0; r < R; r++)
        for (int s = 0; s < R; s++)
            c[r * R + s] = dist(truth + (size_t)r * p, est + (size_t)s * p, p);
    return fk_gmm_bottleneck(c, R);
}

double fk_gmm_err_w(const double *est, const double *truth, int R)
{
    double c[R * R];
    for (int r = 0; r < R; r++)
        for (int s = 0; s < R; s++)
            c[r * R + s] = fabs(truth[r] - est[s]);
    return fk_gmm_bottleneck(c, R);
}
