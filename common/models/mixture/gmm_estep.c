#if defined(__GNUC__) && !defined(__clang__)
/* comparisons may not trap here (no FP exceptions are used): lets GCC if-convert the maxima */
#pragma GCC optimize("no-trapping-math")
#endif
#include "common/models/mixture/gmm_estep.h"

#include <cblas.h>
#include <math.h>
#include <string.h>

#include "common/la/vexp.h"

static const double LN_2PI = 1.8378770664093454836;

size_t fk_gmm_estep_work(size_t n, int R)
{
    return n * (size_t)(R + 2);
}

/* Fixed-order partial sums in four 2-lane vectors (GCC/Clang vector extension, SSE2 width so
 * the ABI does not depend on the clone): deterministic, and vectorized where the
 * auto-vectorizer will not reorder a reduction. */
typedef double v2d __attribute__((vector_size(16)));

static inline v2d load2(const double *a)
{
    v2d v;
    memcpy(&v, a, sizeof v);
    return v;
}

static inline double hsum(v2d a, v2d b, v2d c, v2d d)
{
    v2d e = (a + b) + (c + d);
    return e[0] + e[1];
}

/* sum_i a[i] b[i] */
static inline double dot8(const double *a, const double *b, size_t n)
{
    v2d s0 = {0, 0}, s1 = {0, 0}, s2 = {0, 0}, s3 = {0, 0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 += load2(a + i) * load2(b + i);
        s1 += load2(a + i + 2) * load2(b + i + 2);
        s2 += load2(a + i + 4) * load2(b + i + 4);
        s3 += load2(a + i + 6) * load2(b + i + 6);
    }
    double t = hsum(s0, s1, s2, s3);
    for (; i < n; i++)
        t += a[i] * b[i];
    return t;
}

/* sum_i a[i] */
static inline double sum8(const double *a, size_t n)
{
    v2d s0 = {0, 0}, s1 = {0, 0}, s2 = {0, 0}, s3 = {0, 0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        s0 += load2(a + i);
        s1 += load2(a + i + 2);
        s2 += load2(a + i + 4);
        s3 += load2(a + i + 6);
    }
    double t = hsum(s0, s1, s2, s3);
    for (; i < n; i++)
        t += a[i];
    return t;
}

/* sum_i ln s[i] for s[i] >= 1 as logs of running products renormalised by frexp: one log
 * call per 16 samples instead of one per sample. */
static double sum_log(const double *s, size_t n)
{
    double t = 0.0;
    for (size_t i0 = 0; i0 < n; i0 += 16) {
        size_t e = n - i0 < 16 ? n : i0 + 16;
        double prod = 1.0;
        for (size_t i = i0; i < e; i++)
            prod *= s[i];
        int ex;
        double mant = frexp(prod, &ex);
        t += log(mant) + ex * 0.69314718055994530942;
    }
    return t;
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target_clones("avx2", "default"))) /* 4 lanes where the CPU has them */
#endif
double fk_gmm_estep_stats(const double *X, const double *Xt, size_t n, int p, const double *xsq,
                          const double *w, const double *theta, int R, double *nr, double *sx,
                          double *work, double *gamma_t)
{
    double *G = work, *m = work + n * (size_t)R, *s = m + n;
    /* G[r,i] = ln w_r - |theta_r|^2/2 + theta_r . x_i: the log-density up to the -|x_i|^2/2
     * that the softmax does not see */
    if (!Xt)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, (int)n, p, 1.0, theta, p, X, p,
                    0.0, G, (int)n);
    for (int r = 0; r < R; r++) {
        const double *t = theta + (size_t)r * p;
        double c = 0.0;
        for (int j = 0; j < p; j++)
            c += t[j] * t[j];
        c = -0.5 * c + (w[r] > 0 ? log(w[r]) : -INFINITY);
        double *g = G + (size_t)r * n;
        if (Xt) { /* small matrices: plain loops beat BLAS's packing */
            for (size_t i = 0; i < n; i++)
                g[i] = c;
            for (int j = 0; j < p; j++) {
                const double *x = Xt + (size_t)j * n;
                double a = t[j];
                for (size_t i = 0; i < n; i++)
                    g[i] += a * x[i];
            }
        } else {
            for (size_t i = 0; i < n; i++)
                g[i] += c;
        }
    }
    memcpy(m, G, n * sizeof *m);
    for (int r = 1; r < R; r++) {
        const double *g = G + (size_t)r * n;
        for (size_t i = 0; i < n; i++)
            m[i] = g[i] > m[i] ? g[i] : m[i];
    }
    for (int r = 0; r < R; r++) {
        double *g = G + (size_t)r * n;
        for (size_t i = 0; i < n; i++)
            g[i] -= m[i];
    }
    fk_vexp_nonpos(G, n * (size_t)R);
    memcpy(s, G, n * sizeof *s);
    for (int r = 1; r < R; r++) {
        const double *g = G + (size_t)r * n;
        for (size_t i = 0; i < n; i++)
            s[i] += g[i];
    }
    double ll = sum_log(s, n);
    for (size_t i = 0; i < n; i++) {
        ll += m[i] - 0.5 * xsq[i];
        s[i] = 1.0 / s[i];
    }
    for (int r = 0; r < R; r++) {
        double *g = G + (size_t)r * n;
        for (size_t i = 0; i < n; i++)
            g[i] *= s[i];
        nr[r] = sum8(g, n);
        if (Xt)
            for (int j = 0; j < p; j++)
                sx[(size_t)r * p + j] = dot8(g, Xt + (size_t)j * n, n);
    }
    if (!Xt)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, R, p, (int)n, 1.0, G, (int)n, X, p,
                    0.0, sx, p);
    if (gamma_t)
        memcpy(gamma_t, G, n * (size_t)R * sizeof *G);
    return ll - 0.5 * (double)n * p * LN_2PI;
}
