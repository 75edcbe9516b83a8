#include "bench/subspace.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Q (initialised here, n x m): orthonormal basis of the columns of X. */
FK_CHECKRETURN static int orth_basis(const fk_mat *X, fk_mat *Q, fk_err *err)
{
    size_t n = X->rows, m = X->cols;
    double *tau = malloc((m ? m : 1) * sizeof *tau);
    if (!tau || fk_mat_copy(Q, X)) {
        free(tau);
        return fk_err_set(err, FK_ENOMEM, "sin Theta: out of memory for %zux%zu", n, m);
    }
    lapack_int info = LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, (lapack_int)n, (lapack_int)m, Q->data,
                                     (lapack_int)Q->ld, tau);
    if (!info)
        info = LAPACKE_dorgqr(LAPACK_ROW_MAJOR, (lapack_int)n, (lapack_int)m, (lapack_int)m, Q->data,
                              (lapack_int)Q->ld, tau);
    free(tau);
    if (info) {
        fk_mat_close(Q);
        return fk_err_set(err, FK_ENUMERIC, "sin Theta: QR failed (info=%d)", (int)info);
    }
    return FK_OK;
}

int fk_sin_theta(const fk_mat *X, const fk_mat *Y, double *out, fk_err *err)
{
    size_t n = X->rows, m = X->cols;
    if (Y->rows != n || Y->cols != m || m == 0 || m > n)
        return fk_err_set(err, FK_EINVAL,
                          "sin Theta: need two n x m bases with 1 <= m <= n (got %zux%zu and "
                          "%zux%zu)", n, m, Y->rows, Y->cols);
    fk_mat A, B, G;
    int rc = orth_basis(X, &A, err);
    if (rc)
        return rc;
    if ((rc = orth_basis(Y, &B, err))) {
        fk_mat_close(&A);
        return rc;
    }
    if (fk_mat_init(&G, m, m))
        rc = fk_err_set(err, FK_ENOMEM, "sin Theta: out of memory");
    else {
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)m, (int)m, (int)n, 1.0, A.data,
                    (int)A.ld, B.data, (int)B.ld, 0.0, G.data, (int)G.ld);
        double f = cblas_dnrm2((int)(m * m), G.data, 1);
        *out = sqrt(fabs((double)m - f * f));
    }
    fk_mat_close(&A);
    fk_mat_close(&B);
    fk_mat_close(&G);
    return rc;
}

/* Eigenvalue number `which` (1 = smallest) of the symmetric a (n x n, destroyed). */
static int one_eigenvalue(double *a, size_t n, size_t which, double *val)
{
    lapack_int found = 0, isuppz[2];
    double w[1], z[1];
    lapack_int info = LAPACKE_dsyevr(LAPACK_ROW_MAJOR, 'N', 'I', 'U', (lapack_int)n, a,
                                     (lapack_int)n, 0.0, 0.0, (lapack_int)which, (lapack_int)which,
                                     0.0, &found, w, z, 1, isuppz);
    *val = w[0];
    return info == 0 && found == 1 ? FK_OK : FK_ENUMERIC;
}

int fk_sym_norm2(const fk_mat *A, double *out, fk_err *err)
{
    size_t n = A->rows;
    if (A->cols != n || n == 0)
        return fk_err_set(err, FK_EINVAL, "spectral norm: matrix must be square and non-empty "
                          "(got %zux%zu)", n, A->cols);
    double *a = malloc(n * n * sizeof *a), lo = 0, hi = 0;
    if (!a)
        return fk_err_set(err, FK_ENOMEM, "spectral norm: out of memory (n=%zu)", n);
    int rc = FK_OK;
    for (int pass = 0; pass < 2 && !rc; pass++) {
        for (size_t i = 0; i < n; i++)
            memcpy(a + i * n, fk_mat_row(A, i), n * sizeof *a);
        rc = one_eigenvalue(a, n, pass ? n : 1, pass ? &hi : &lo);
    }
    free(a);
    if (rc)
        return fk_err_set(err, FK_ENUMERIC, "spectral norm: dsyevr failed; check for NaN/Inf");
    *out = fmax(fabs(lo), fabs(hi));
    return FK_OK;
}

int fk_center_columns(fk_mat *M, fk_err *err)
{
    size_t n = M->rows;
    if (n == 0 || M->cols == 0)
        return FK_OK;
    double *ones = malloc(n * sizeof *ones), *mu = malloc(M->cols * sizeof *mu);
    if (!ones || !mu) {
        free(ones);
        free(mu);
        return fk_err_set(err, FK_ENOMEM, "centring: out of memory for %zux%zu", n, M->cols);
    }
    for (size_t i = 0; i < n; i++)
        ones[i] = 1.0 / (double)n;
    /* mu = M^T 1/n, then M -= 1 mu^T */
    cblas_dgemv(CblasRowMajor, CblasTrans, (int)n, (int)M->cols, 1.0, M->data, (int)M->ld, ones, 1,
                0.0, mu, 1);
    for (size_t i = 0; i < n; i++)
        ones[i] = 1.0;
    cblas_dger(CblasRowMajor, (int)n, (int)M->cols, -1.0, ones, 1, mu, 1, M->data, (int)M->ld);
    free(ones);
    free(mu);
    return FK_OK;
}
