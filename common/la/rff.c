#include "common/la/rff.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/blas.h"
#include "common/la/rng.h"
#include "common/la/vsincos.h"

/* Omega's stream tag: changing any other random stream never changes Omega. */
static const uint64_t OMEGA_STREAM = 0x6f6d656761000000ULL;

/* Mix (d, N, sigma) into the stream so different shapes never share draws. */
static uint64_t omega_stream(size_t d, size_t N, double sigma)
{
    uint64_t bits;
    memcpy(&bits, &sigma, sizeof bits);
    uint64_t h = OMEGA_STREAM ^ ((uint64_t)d * 0x9E3779B97F4A7C15ULL);
    h ^= (uint64_t)N * 0xBF58476D1CE4E5B9ULL;
    return h ^ (bits * 0x94D049BB133111EBULL);
}

/* Dot product in one fixed order, so Omega does not depend on the BLAS build;
 * eight independent partial sums keep the adder busy (and vectorise). */
static double plain_dot(const double *a, const double *b, size_t n)
{
    double acc[8] = {0};
    size_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (size_t l = 0; l < 8; l++)
            acc[l] += a[j + l] * b[j + l];
    double s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; j < n; j++)
        s += a[j] * b[j];
    return s;
}

/* Rows [r0, r0 + b) of W (ld d) orthonormal by modified Gram-Schmidt; plain
 * loops, not LAPACK, so every machine gets the same bits. One pass suffices:
 * only the directions' independence matters here, not orthogonality to 1e-16. */
static void orthonormalize_rows(double *W, size_t d, size_t r0, size_t b)
{
    for (size_t i = r0; i < r0 + b; i++) {
        double *wi = W + i * d;
        for (size_t k = r0; k < i; k++) {
            const double *wk = W + k * d;
            double c = plain_dot(wi, wk, d);
            for (size_t j = 0; j < d; j++)
                wi[j] -= c * wk[j];
        }
        double inv = 1.0 / sqrt(plain_dot(wi, wi, d));
        for (size_t j = 0; j < d; j++)
            wi[j] *= inv;
    }
}

/* Orthogonal blocks of min(d, N) rows, each row rescaled to a chi_d length
 * drawn from its own stream (independent of the directions). */
static void make_orthogonal(fk_rff *r, uint64_t stream)
{
    size_t d = r->d, N = r->N;
    double *W = r->omega.data;
    fk_rng g;
    fk_rng_init(&g, r->seed, stream ^ 0x6c656e6774680000ULL);
    for (size_t r0 = 0; r0 < N; r0 += d) {
        size_t b = N - r0 < d ? N - r0 : d;
        orthonormalize_rows(W, d, r0, b);
        for (size_t i = r0; i < r0 + b; i++) {
            double c2 = 0;
            for (size_t j = 0; j < d; j++) {
                double z = fk_rng_normal(&g);
                c2 += z * z;
            }
            cblas_dscal((int)d, sqrt(c2) / r->sigma, W + i * d, 1);
        }
    }
}

int fk_rff_kind_parse(const char *s, fk_rff_kind *kind, fk_err *err)
{
    if (!strcmp(s, "iid"))
        *kind = FK_RFF_IID;
    else if (!strcmp(s, "orthogonal"))
        *kind = FK_RFF_ORTHOGONAL;
    else
        return fk_err_set(err, FK_EINVAL,
                          "features must be iid (the paper's) or orthogonal (got '%s')", s);
    return FK_OK;
}

const char *fk_rff_kind_name(fk_rff_kind kind)
{
    return kind == FK_RFF_ORTHOGONAL ? "orthogonal" : "iid";
}

int fk_rff_init(fk_rff *r, uint64_t seed, size_t d, size_t N, double sigma, fk_err *err)
{
    return fk_rff_init_kind(r, seed, d, N, sigma, FK_RFF_IID, err);
}

int fk_rff_init_kind(fk_rff *r, uint64_t seed, size_t d, size_t N, double sigma, fk_rff_kind kind,
                     fk_err *err)
{
    *r = (fk_rff){0};
    if (!(sigma > 0) || !isfinite(sigma))
        return fk_err_set(err, FK_EINVAL, "random features: kernel width sigma must be > 0 (got %g)",
                          sigma);
    if (N == 0)
        return fk_err_set(err, FK_EINVAL, "random features: N (number of frequencies) must be >= 1");
    if (d == 0)
        return fk_err_set(err, FK_EINVAL, "random features: input dimension must be >= 1");
    if (fk_mat_init_uninit(&r->omega, N, d)) /* every entry drawn below */
        return fk_err_set(err, FK_ENOMEM, "random features: out of memory for Omega (%zux%zu)", N, d);
    fk_rng g;
    fk_rng_init(&g, seed, omega_stream(d, N, sigma));
    double inv = 1.0 / sigma;
    for (size_t i = 0; i < N * d; i++)
        r->omega.data[i] = inv * fk_rng_normal(&g);
    r->d = d;
    r->N = N;
    r->sigma = sigma;
    r->seed = seed;
    r->kind = kind;
    if (kind == FK_RFF_ORTHOGONAL)
        make_orthogonal(r, omega_stream(d, N, sigma));
    return FK_OK;
}

void fk_rff_close(fk_rff *r)
{
    fk_mat_close(&r->omega);
    *r = (fk_rff){0};
}

/* cos and sin of t[0..N) into c and s (s may be t), scaled. Our sincos, not libm: it is
 * vectorised (libm's calls dominated the map) and gives the same bits on every machine. */
static void cos_sin_row(const double *t, double *c, double *s, size_t N, double scale)
{
    fk_vsincos(t, s, c, N);
    for (size_t k = 0; k < N; k++) {
        c[k] *= scale;
        s[k] *= scale;
    }
}

int fk_rff_map_into(const fk_rff *r, const fk_mat *X, fk_mat *Z, fk_err *err)
{
    size_t n = X->rows, N = r->N;
    if (X->cols != r->d)
        return fk_err_set(err, FK_EINVAL,
                          "random features: data has %zu features but Omega was drawn for %zu; "
                          "all domains must have the same dimension", X->cols, r->d);
    if (Z->rows != n || Z->cols != 2 * N)
        return fk_err_set(err, FK_EINVAL, "random features: output is %zux%zu, want %zux%zu",
                          Z->rows, Z->cols, n, 2 * N);
    if (n == 0)
        return FK_OK;
    /* The sine half of Z holds Omega x first, then each row is expanded in place. */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)N, (int)r->d, 1.0, X->data,
                (int)X->ld, r->omega.data, (int)r->omega.ld, 0.0, Z->data + N, (int)Z->ld);
    double scale = 1.0 / sqrt((double)N);
    for (size_t i = 0; i < n; i++) {
        double *row = fk_mat_row(Z, i);
        cos_sin_row(row + N, row, row + N, N, scale);
    }
    return FK_OK;
}

int fk_rff_map(const fk_rff *r, const fk_mat *X, fk_mat *Z, fk_err *err)
{
    *Z = (fk_mat){0};
    if (fk_mat_init_uninit(Z, X->rows, 2 * r->N)) /* written in full by the map */
        return fk_err_set(err, FK_ENOMEM, "random features: out of memory for %zux%zu features",
                          X->rows, 2 * r->N);
    int rc = fk_rff_map_into(r, X, Z, err);
    if (rc)
        fk_mat_close(Z);
    return rc;
}

int fk_rff_backward(const fk_rff *r, const fk_mat *X, const fk_mat *G, fk_mat *dX, fk_err *err)
{
    size_t n = X->rows, N = r->N;
    if (X->cols != r->d || G->rows != n || G->cols != 2 * N || dX->rows != n || dX->cols != r->d)
        return fk_err_set(err, FK_EINVAL, "random features backward: shape mismatch");
    fk_mat T;
    double *sc = malloc(2 * N * sizeof *sc); /* sin and cos of one row: the forward map's values */
    if (!sc || fk_mat_init(&T, n, N)) {
        free(sc);
        return fk_err_set(err, FK_ENOMEM, "random features backward: out of memory");
    }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)N, (int)r->d, 1.0, X->data,
                (int)X->ld, r->omega.data, (int)r->omega.ld, 0.0, T.data, (int)T.ld);
    double scale = 1.0 / sqrt((double)N);
    for (size_t i = 0; i < n; i++) {
        double *t = fk_mat_row(&T, i);
        const double *g = fk_mat_row(G, i);
        fk_vsincos(t, sc, sc + N, N);
        for (size_t k = 0; k < N; k++)
            t[k] = scale * (g[N + k] * sc[N + k] - g[k] * sc[k]);
    }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)r->d, (int)N, 1.0, T.data,
                (int)T.ld, r->omega.data, (int)r->omega.ld, 0.0, dX->data, (int)dX->ld);
    fk_mat_close(&T);
    free(sc);
    return FK_OK;
}

double fk_gauss_kernel(const double *x, const double *y, size_t d, double sigma)
{
    double s = 0;
    for (size_t j = 0; j < d; j++) {
        double t = x[j] - y[j];
        s += t * t;
    }
    return exp(-s / (2 * sigma * sigma));
}

int fk_gauss_from_cross(const fk_mat *A, const fk_mat *B, double sigma, fk_mat *K,
                        const char *who, fk_err *err)
{
    double *nb = malloc(B->rows * sizeof *nb);
    if (!nb && B->rows)
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory", who);
    for (size_t j = 0; j < B->rows; j++)
        nb[j] = fk_dot(B->cols, fk_mat_row(B, j), fk_mat_row(B, j));
    double g = -0.5 / (sigma * sigma);
    for (size_t i = 0; i < A->rows; i++) {
        double na = fk_dot(A->cols, fk_mat_row(A, i), fk_mat_row(A, i));
        double *r = fk_mat_row(K, i);
        for (size_t j = 0; j < B->rows; j++) {
            double d2 = na + nb[j] - 2 * r[j];
            r[j] = exp(g * (d2 > 0 ? d2 : 0));
        }
    }
    free(nb);
    return FK_OK;
}
