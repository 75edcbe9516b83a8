/* One kernel affine hull machine: the fit of spec §7.1 and the batch distance of §7.2. */
#include "common/models/kahm/kahm.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/eig.h"
#include "common/la/mat.h"
#include "common/la/vexp.h"

enum { DIST_BLOCK = 1000 }; /* query rows per block: bounded memory, as the reference */

void fk_kahm_opts_default(fk_kahm_opts *o)
{
    *o = (fk_kahm_opts){.n_max = 20,
                        .spread_tol = 1e-3,
                        .eig_floor = 2.22e-16,
                        .lambda_tol = 0.01,
                        .lambda_maxit = 100,
                        .lambda_converged = 0,
                        .nb = 1000,
                        .min_cluster = 30,
                        .partition_ceil = 0,
                        .km_restarts = 10,
                        .km_maxit = 10000,
                        .seed = 0};
}

void fk_kahm_close(fk_kahm *k)
{
    if (!k)
        return;
    free(k->P);
    free(k->L);
    free(k->Xw);
    free(k->M);
    free(k->b);
    memset(k, 0, sizeof *k);
}

int fk_kahm_alloc(fk_kahm *k, int N, int p, int n, fk_err *err)
{
    memset(k, 0, sizeof *k);
    if (N < 1 || p < 1 || n < 1 || n > p)
        return fk_err_set(err, FK_EINVAL, "KAHM sizes N=%d p=%d n=%d are not valid (need N, p >= 1, "
                          "1 <= n <= p)", N, p, n);
    k->N = N;
    k->p = p;
    k->n = n;
    size_t Nn = (size_t)N, pn = (size_t)p, nn = (size_t)n;
    k->P = calloc(nn * pn, sizeof(double));
    k->L = calloc(nn * nn, sizeof(double));
    k->Xw = calloc(Nn * nn, sizeof(double));
    k->M = calloc(Nn * pn, sizeof(double));
    k->b = calloc(Nn, sizeof(double));
    if (!k->P || !k->L || !k->Xw || !k->M || !k->b) {
        fk_kahm_close(k);
        return fk_err_set(err, FK_ENOMEM, "KAHM: out of memory for N=%d p=%d n=%d", N, p, n);
    }
    return FK_OK;
}

FK_CHECKRETURN static int check_finite(const double *Y, size_t N, size_t p, size_t ldy, const char *what,
                        fk_err *err)
{
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < p; j++)
            if (!isfinite(Y[i * ldy + j]))
                return fk_err_set(err, FK_EINVAL,
                                  "%s: value (%zu, %zu) is %g; KAHM data must be finite (clean or "
                                  "drop the sample)",
                                  what, i, j, Y[i * ldy + j]);
    return FK_OK;
}

/* Leading covariance eigenvectors of Y as the rows of P (m x p, allocated here), the
 * Gram path when N - 1 < p, the covariance path otherwise (§7.1 step 2). *m on entry is
 * the wanted count, on exit the count above eig_floor. */
FK_CHECKRETURN static int leading_dirs(const double *Y, size_t N, size_t p, size_t ldy, const fk_kahm_opts *o,
                        int *m, double **Pout, fk_err *err)
{
    double *Yc = malloc(N * p * sizeof(double));
    double *mean = calloc(p, sizeof(double));
    int gram = o->path ? o->path == 1 : N - 1 < p;
    size_t dim = gram ? N : p;
    double *S = malloc(dim * dim * sizeof(double));
    double *vals = malloc((size_t)*m * sizeof(double));
    double *P = calloc((size_t)*m * p, sizeof(double));
    fk_mat V = {0};
    int rc = FK_OK;
    if (!Yc || !mean || !S || !vals || !P) {
        rc = fk_err_set(err, FK_ENOMEM, "KAHM: out of memory for the covariance (N=%zu p=%zu)", N,
                        p);
        goto out;
    }
    /* Centre for the covariance only: the encoding itself is not centred (reference). */
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < p; j++)
            mean[j] += Y[i * ldy + j];
    for (size_t j = 0; j < p; j++)
        mean[j] /= (double)N;
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < p; j++)
            Yc[i * p + j] = Y[i * ldy + j] - mean[j];
    double s = 1.0 / (double)(N - 1);
    if (gram)
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)N, (int)p, s, Yc, (int)p, 0.0, S,
                    (int)N);
    else
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)p, (int)N, s, Yc, (int)p, 0.0, S,
                    (int)p);
    for (size_t i = 0; i < dim; i++) /* dsyrk wrote the upper triangle; mirror it */
        for (size_t j = 0; j < i; j++)
            S[i * dim + j] = S[j * dim + i];
    fk_mat Sm = fk_mat_view(S, dim, dim, dim);
    rc = fk_eig_sym_top(&Sm, (size_t)*m, vals, &V, err);
    if (rc)
        goto out;
    int keep = 0;
    while (keep < *m && vals[keep] > o->eig_floor)
        keep++;
    for (int k = 0; k < keep; k++) {
        double *row = P + (size_t)k * p;
        if (gram) { /* e_k = Yc^T u_k / sqrt((N-1) g_k) */
            double sc = 1.0 / sqrt((double)(N - 1) * vals[k]);
            cblas_dgemv(CblasRowMajor, CblasTrans, (int)N, (int)p, sc, Yc, (int)p,
                        V.data + k, (int)V.ld, 0.0, row, 1);
        } else {
            for (size_t j = 0; j < p; j++)
                row[j] = fk_mat_get(&V, j, (size_t)k);
        }
        /* A deterministic sign: the largest-magnitude entry positive (Gamma does not
         * depend on it, the bytes of the model do). */
        size_t jm = 0;
        for (size_t j = 1; j < p; j++)
            if (fabs(row[j]) > fabs(row[jm]))
                jm = j;
        if (row[jm] < 0)
            cblas_dscal((int)p, -1.0, row, 1);
    }
    *m = keep;
out:
    fk_mat_close(&V);
    free(Yc);
    free(mean);
    free(S);
    free(vals);
    if (rc)
        free(P);
    else
        *Pout = P;
    return rc;
}

/* P (n x p) and the encodings X = Y P^T (N x n) after the spread loop of App. B step 3;
 * the rows of P are nested, so dropping the last component needs no recomputation. */
FK_CHECKRETURN static int subspace(const double *Y, size_t N, size_t p, size_t ldy, const fk_kahm_opts *o,
                    double **Pout, double **Xout, int *nout, fk_err *err)
{
    if (N < 2)
        return fk_err_set(err, FK_EINVAL,
                          "a KAHM needs at least 2 samples of the class (got %zu); merge the class "
                          "into another client's data or drop it",
                          N);
    int m = o->n_max;
    if ((size_t)m > p)
        m = (int)p;
    if ((size_t)m > N - 1)
        m = (int)(N - 1);
    if (m < 1)
        return fk_err_set(err, FK_EINVAL, "KAHM: n_max must be >= 1 (got %d)", o->n_max);
    double *P = NULL;
    int rc = leading_dirs(Y, N, p, ldy, o, &m, &P, err);
    if (rc)
        return rc;
    if (m < 1) {
        free(P);
        return fk_err_set(err, FK_EINVAL,
                          "degenerate class data: the %zu samples are identical (no covariance "
                          "eigenvalue above %g)",
                          N, o->eig_floor);
    }
    double *X = malloc(N * (size_t)m * sizeof(double));
    if (!X) {
        free(P);
        return fk_err_set(err, FK_ENOMEM, "KAHM: out of memory for the encodings");
    }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, m, (int)p, 1.0, Y, (int)ldy, P,
                (int)p, 0.0, X, m);
    int n = m;
    for (;;) {
        double minr = INFINITY;
        for (int j = 0; j < n; j++) {
            double lo = X[j], hi = X[j];
            for (size_t i = 1; i < N; i++) {
                double v = X[i * (size_t)m + (size_t)j];
                lo = v < lo ? v : lo;
                hi = v > hi ? v : hi;
            }
            minr = hi - lo < minr ? hi - lo : minr;
        }
        if (minr >= o->spread_tol)
            break;
        if (n == 1) {
            free(P);
            free(X);
            return fk_err_set(err, FK_EINVAL,
                              "degenerate class data: all principal directions have spread < %g",
                              o->spread_tol);
        }
        n--;
    }
    if (n < m) { /* compact X to n columns */
        for (size_t i = 0; i < N; i++)
            memmove(X + i * (size_t)n, X + i * (size_t)m, (size_t)n * sizeof(double));
    }
    *Pout = P;
    *Xout = X;
    *nout = n;
    return FK_OK;
}

int fk_kahm_dim(const double *Y, size_t N, size_t p, size_t ldy, const fk_kahm_opts *o, int *n,
                fk_err *err)
{
    double *P = NULL, *X = NULL;
    int rc = check_finite(Y, N, p, ldy, "KAHM data", err);
    if (!rc)
        rc = subspace(Y, N, p, ldy, o, &P, &X, n, err);
    free(P);
    free(X);
    return rc;
}

/* f(e, tau) of (77) in the eigen form (S2), at ridge lam = e + tau. */
static double recon_err(const double *kappa, const double *r, size_t N, size_t p, double lam)
{
    double s = 0.0;
    for (size_t k = 0; k < N; k++) {
        double q = lam / (kappa[k] + lam);
        s += q * q * r[k];
    }
    return s / ((double)p * (double)N);
}

/* Steps 4-8 of §7.1 on the encodings X (N x n): whitening, kernel, lambda, M and b. */
FK_CHECKRETURN static int fit_kernel(fk_kahm *k, const double *Y, size_t ldy, const double *X,
                      const fk_kahm_opts *o, fk_err *err)
{
    size_t N = (size_t)k->N, p = (size_t)k->p, n = (size_t)k->n;
    double *Kmat = malloc(N * N * sizeof(double));
    double *kappa = malloc(N * sizeof(double));
    double *Yt = malloc(N * p * sizeof(double));
    double *r = malloc(N * sizeof(double));
    double *sq = malloc(N * sizeof(double));
    double *v1 = malloc(N * sizeof(double));
    double *xm = calloc(n, sizeof(double));
    int rc = FK_OK;
    if (!Kmat || !kappa || !Yt || !r || !sq || !v1 || !xm) {
        rc = fk_err_set(err, FK_ENOMEM, "KAHM: out of memory for the %zu x %zu kernel", N, N);
        goto out;
    }
    /* theta = cov(X) (1/(N-1)), Cholesky theta = L L^T, X_w = X L^-T. */
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < n; j++)
            xm[j] += X[i * n + j];
    for (size_t j = 0; j < n; j++)
        xm[j] /= (double)N;
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < n; j++)
            k->Xw[i * n + j] = X[i * n + j] - xm[j];
    cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, (int)n, (int)N, 1.0 / (double)(N - 1),
                k->Xw, (int)n, 0.0, k->L, (int)n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            k->L[i * n + j] = 0.0;
    if (LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', (lapack_int)n, k->L, (lapack_int)n) != 0) {
        rc = fk_err_set(err, FK_ENUMERIC,
                        "KAHM: the covariance of the %zu-d encodings is not positive definite "
                        "(N=%zu); the class data are degenerate",
                        n, N);
        goto out;
    }
    memcpy(k->Xw, X, N * n * sizeof(double));
    cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (int)N, (int)n,
                1.0, k->L, (int)n, k->Xw, (int)n);
    /* K_ij = exp(-||xw_i - xw_j||^2 / (2n)). */
    for (size_t i = 0; i < N; i++)
        sq[i] = cblas_ddot((int)n, k->Xw + i * n, 1, k->Xw + i * n, 1);
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)N, (int)n, 1.0, k->Xw, (int)n, 0.0,
                Kmat, (int)N);
    /* Upper triangle by the vectorised exp (libm's call per entry was a tenth of a
     * Pen-digits fit, issue 36), mirrored into the lower one. */
    for (size_t i = 0; i < N; i++) {
        double *row = Kmat + i * N;
        for (size_t j = i; j < N; j++) {
            double d = sq[i] + sq[j] - 2.0 * row[j];
            row[j] = -(d > 0 ? d : 0) / (2.0 * (double)n);
        }
        fk_vexp_nonpos(row + i, N - i);
        for (size_t j = i + 1; j < N; j++)
            Kmat[j * N + i] = row[j];
    }
    /* All eigenpairs, LAPACK column-major on the row-major buffer (K is symmetric): no
     * transposed copies by LAPACKE; the eigenvectors come back as the rows of Kmat
     * (Kmat = V^T), the workspace on huge pages (fk_mat). */
    {
        double wq = 0;
        lapack_int iq = 0, info;
        info = LAPACKE_dsyevd_work(LAPACK_COL_MAJOR, 'V', 'U', (lapack_int)N, Kmat, (lapack_int)N,
                                   kappa, &wq, -1, &iq, -1);
        fk_mat work = {0};
        lapack_int *iwork = NULL;
        if (info == 0 && (fk_mat_init_uninit(&work, 1, (size_t)wq + 1) ||
                          !(iwork = malloc(((size_t)iq + 1) * sizeof *iwork))))
            info = -1000;
        if (info == 0)
            info = LAPACKE_dsyevd_work(LAPACK_COL_MAJOR, 'V', 'U', (lapack_int)N, Kmat,
                                       (lapack_int)N, kappa, work.data, (lapack_int)wq, iwork,
                                       iq);
        fk_mat_close(&work);
        free(iwork);
        if (info != 0) {
            rc = fk_err_set(err, info == -1000 ? FK_ENOMEM : FK_ENUMERIC,
                            "KAHM: eigendecomposition of the %zu x %zu kernel failed (%d)", N, N,
                            (int)info);
            goto out;
        }
    }
    /* Y~ = V^T Y, r_k = ||Y~_k||^2; the lambda fixed point then costs O(N) a step. */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)p, (int)N, 1.0, Kmat,
                (int)N, Y, (int)ldy, 0.0, Yt, (int)p);
    double fro = 0.0;
    for (size_t i = 0; i < N; i++) {
        r[i] = cblas_ddot((int)p, Yt + i * p, 1, Yt + i * p, 1);
        fro += cblas_ddot((int)p, Y + i * ldy, 1, Y + i * ldy, 1);
    }
    double pN = (double)p * (double)N;
    double tau = 2.0 * fro / pN, lam = tau + 0.5 * fro / pN, used = lam, next = lam;
    int it = 0;
    while (it < o->lambda_maxit) {
        it++;
        used = lam;
        next = tau + recon_err(kappa, r, N, p, lam);
        if (fabs(next - lam) <= o->lambda_tol)
            break;
        lam = next;
    }
    double lamf = o->lambda_converged ? next : used;
    if (!(lamf > 0) || !isfinite(lamf)) {
        rc = fk_err_set(err, FK_ENUMERIC,
                        "KAHM: ridge parameter %g is not positive; the class data are all zero",
                        lamf);
        goto out;
    }
    k->tau = tau;
    k->lambda = lamf;
    k->iters = it;
    /* M = V diag(1/(kappa+lambda)) Y~, b = V diag(1/(kappa+lambda)) V^T 1. */
    for (size_t i = 0; i < N; i++)
        v1[i] = 1.0;
    cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)N, 1.0, Kmat, (int)N, v1, 1, 0.0, sq,
                1);
    for (size_t i = 0; i < N; i++) {
        double w = 1.0 / (kappa[i] + lamf);
        cblas_dscal((int)p, w, Yt + i * p, 1);
        sq[i] *= w;
    }
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)N, (int)p, (int)N, 1.0, Kmat,
                (int)N, Yt, (int)p, 0.0, k->M, (int)p);
    cblas_dgemv(CblasRowMajor, CblasTrans, (int)N, (int)N, 1.0, Kmat, (int)N, sq, 1, 0.0, k->b,
                1);
out:
    free(Kmat);
    free(kappa);
    free(Yt);
    free(r);
    free(sq);
    free(v1);
    free(xm);
    return rc;
}

int fk_kahm_fit(fk_kahm *k, const double *Y, size_t N, size_t p, size_t ldy,
                const fk_kahm_opts *o, fk_err *err)
{
    memset(k, 0, sizeof *k);
    if (N > (size_t)1 << 20 || p > (size_t)1 << 20)
        return fk_err_set(err, FK_ELIMIT, "KAHM: %zu x %zu is too large for one machine; lower nb",
                          N, p);
    int rc = check_finite(Y, N, p, ldy, "KAHM data", err);
    double *P = NULL, *X = NULL;
    int n = 0;
    if (!rc)
        rc = subspace(Y, N, p, ldy, o, &P, &X, &n, err);
    if (!rc)
        rc = fk_kahm_alloc(k, (int)N, (int)p, n, err);
    if (!rc) {
        for (int i = 0; i < n; i++) /* P may hold more rows than n: keep the leading n */
            memcpy(k->P + (size_t)i * p, P + (size_t)i * p, p * sizeof(double));
        rc = fit_kernel(k, Y, ldy, X, o, err);
    }
    free(P);
    free(X);
    /* The modelling error of the reference code: the worst training distance. */
    double *g = rc ? NULL : malloc(N * sizeof(double));
    if (!rc && !g)
        rc = fk_err_set(err, FK_ENOMEM, "KAHM: out of memory");
    if (!rc)
        rc = fk_kahm_dist(k, Y, N, ldy, g, NULL, err);
    if (!rc) {
        double mx = 0.0;
        for (size_t i = 0; i < N; i++)
            mx = g[i] > mx ? g[i] : mx;
        k->model_err = 1.0 - exp(-mx / (double)p);
    }
    free(g);
    if (rc)
        fk_kahm_close(k);
    return rc;
}

int fk_kahm_dist(const fk_kahm *k, const double *T, size_t nt, size_t ldt, double *gamma,
                 double *A, fk_err *err)
{
    size_t N = (size_t)k->N, p = (size_t)k->p, n = (size_t)k->n;
    size_t B = nt < DIST_BLOCK ? nt : DIST_BLOCK;
    if (nt == 0)
        return FK_OK;
    double *Xt = malloc(B * n * sizeof(double));
    double *E = malloc(B * N * sizeof(double));
    double *num = malloc(B * p * sizeof(double));
    double *den = malloc(B * sizeof(double));
    double *sw = malloc(N * sizeof(double));
    if (!Xt || !E || !num || !den || !sw) {
        free(Xt);
        free(E);
        free(num);
        free(den);
        free(sw);
        return fk_err_set(err, FK_ENOMEM, "KAHM: out of memory for a %zu-query block", B);
    }
    double bmax = 0.0;
    for (size_t j = 0; j < N; j++) {
        sw[j] = cblas_ddot((int)n, k->Xw + j * n, 1, k->Xw + j * n, 1);
        bmax = fabs(k->b[j]) > bmax ? fabs(k->b[j]) : bmax;
    }
    for (size_t r0 = 0; r0 < nt; r0 += B) {
        size_t m = nt - r0 < B ? nt - r0 : B;
        const double *Tb = T + r0 * ldt;
        /* Whitened encodings of the queries. */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)n, (int)p, 1.0, Tb,
                    (int)ldt, k->P, (int)p, 0.0, Xt, (int)n);
        cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (int)m,
                    (int)n, 1.0, k->L, (int)n, Xt, (int)n);
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)m, (int)N, (int)n, 1.0, Xt,
                    (int)n, k->Xw, (int)n, 0.0, E, (int)N);
        /* Stabilised kernel: shift each row by its smallest squared distance, which
         * cancels in (69) and keeps far points from underflowing to 0/0. */
        for (size_t i = 0; i < m; i++) {
            double st = cblas_ddot((int)n, Xt + i * n, 1, Xt + i * n, 1);
            double *e = E + i * N, dmin = INFINITY;
            for (size_t j = 0; j < N; j++) {
                double d = st + sw[j] - 2.0 * e[j];
                e[j] = d > 0 ? d : 0;
                dmin = e[j] < dmin ? e[j] : dmin;
            }
            for (size_t j = 0; j < N; j++)
                e[j] = -(e[j] - dmin) / (2.0 * (double)n);
            fk_vexp_nonpos(e, N); /* arguments <= 0; below -37 the term is under the last bit */
        }
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)m, (int)p, (int)N, 1.0, E,
                    (int)N, k->M, (int)p, 0.0, num, (int)p);
        cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)m, (int)N, 1.0, E, (int)N, k->b, 1, 0.0, den,
                    1);
        for (size_t i = 0; i < m; i++) {
            double se = cblas_dasum((int)N, E + i * N, 1);
            const double *t = Tb + i * ldt;
            double *a = num + i * p;
            if (!(fabs(den[i]) > 1e-12 * se * bmax)) {
                gamma[r0 + i] = INFINITY;
                if (A)
                    for (size_t j = 0; j < p; j++)
                        A[(r0 + i) * p + j] = NAN;
                continue;
            }
            double s = 0.0, inv = 1.0 / den[i];
            for (size_t j = 0; j < p; j++) {
                a[j] *= inv;
                double d = t[j] - a[j];
                s += d * d;
            }
            gamma[r0 + i] = sqrt(s);
            if (A)
                memcpy(A + (r0 + i) * p, a, p * sizeof(double));
        }
    }
    free(Xt);
    free(E);
    free(num);
    free(den);
    free(sw);
    return FK_OK;
}

double fk_kahm_risk_bound(double N, double delta)
{
    if (!(N >= 1) || !(delta > 0 && delta < 1))
        return NAN;
    return 4.0 / sqrt(N) + sqrt(log(1.0 / delta) / (2.0 * N));
}

double fk_kahm_sample_complexity(double eps, double delta)
{
    if (!(eps > 0) || !(delta > 0 && delta < 1))
        return NAN;
    double a = 4.0 + sqrt(log(1.0 / delta) / 2.0);
    return a * a / (eps * eps);
}
