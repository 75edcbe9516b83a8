#include "common/la/eig.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

/* Column-major copy of the n x n symmetric A (= A itself, by symmetry). */
static double *sym_copy(const fk_mat *A)
{
    size_t n = A->rows;
    double *a = malloc(n * n * sizeof *a + 8);
    if (!a)
        return NULL;
    for (size_t i = 0; i < n; i++)
        memcpy(a + i * n, fk_mat_row(A, i), n * sizeof *a);
    return a;
}

/* dsyevr with il..iu = n-m+1..n on the column-major n x n matrix a (destroyed);
 * z gets m column-major eigenvectors (ascending), w the eigenvalues. */
static int top_range(double *a, size_t n, size_t m, double *w, double *z, fk_err *err)
{
    lapack_int found = 0;
    lapack_int *isuppz = malloc(2 * m * sizeof *isuppz + 8);
    if (!isuppz)
        return fk_err_set(err, FK_ENOMEM, "eigen-solver: out of memory (n=%zu)", n);
    lapack_int info = LAPACKE_dsyevr(LAPACK_COL_MAJOR, 'V', 'I', 'L', (lapack_int)n, a,
                                     (lapack_int)n, 0.0, 0.0, (lapack_int)(n - m + 1),
                                     (lapack_int)n, 0.0, &found, w, z, (lapack_int)n, isuppz);
    free(isuppz);
    if (info != 0 || (size_t)found != m)
        return fk_err_set(err, FK_ENUMERIC,
                          "eigen-solver: dsyevr failed (info=%d, found %d of %zu eigenpairs, n=%zu); "
                          "check the matrix for NaN/Inf",
                          (int)info, (int)found, m, n);
    return FK_OK;
}

static int check_args(const fk_mat *A, size_t m, fk_err *err)
{
    if (A->rows != A->cols || A->rows == 0)
        return fk_err_set(err, FK_EINVAL, "eigen-solver: matrix must be square and non-empty (got %zux%zu)",
                          A->rows, A->cols);
    if (m == 0 || m > A->rows)
        return fk_err_set(err, FK_EINVAL, "eigen-solver: asked for %zu eigenpairs of a %zux%zu matrix; "
                          "use 1 <= m <= n", m, A->rows, A->rows);
    for (size_t i = 0; i < A->rows; i++) {
        const double *r = fk_mat_row(A, i);
        for (size_t j = 0; j < A->cols; j++)
            if (!isfinite(r[j]))
                return fk_err_set(err, FK_ENUMERIC, "eigen-solver: entry (%zu,%zu) is not finite", i, j);
    }
    return FK_OK;
}

/* Reverse ascending (w, z) into descending vals and row-major V (n x m). */
static int store_desc(const double *w, const double *z, size_t n, size_t m, double *vals, fk_mat *V,
                      fk_err *err)
{
    if (fk_mat_init(V, n, m))
        return fk_err_set(err, FK_ENOMEM, "eigen-solver: out of memory for %zux%zu vectors", n, m);
    for (size_t k = 0; k < m; k++) {
        size_t src = m - 1 - k;
        vals[k] = w[src];
        const double *col = z + src * n;
        for (size_t i = 0; i < n; i++)
            V->data[i * V->ld + k] = col[i];
    }
    return FK_OK;
}

int fk_eig_sym_top(const fk_mat *A, size_t m, double *vals, fk_mat *V, fk_err *err)
{
    *V = (fk_mat){0};
    int rc = check_args(A, m, err);
    if (rc)
        return rc;
    size_t n = A->rows;
    double *a = sym_copy(A);
    double *w = malloc(n * sizeof *w);
    double *z = malloc(n * m * sizeof *z);
    if (!a || !w || !z)
        rc = fk_err_set(err, FK_ENOMEM, "eigen-solver: out of memory (n=%zu)", n);
    if (!rc)
        rc = top_range(a, n, m, w, z, err);
    if (!rc)
        rc = store_desc(w, z, n, m, vals, V, err);
    free(a);
    free(w);
    free(z);
    return rc;
}

int fk_eig_gen_top(const fk_mat *A, const fk_mat *B, size_t m, double *vals, fk_mat *W,
                   fk_err *err)
{
    *W = (fk_mat){0};
    int rc = check_args(A, m, err);
    if (rc)
        return rc;
    if (B->rows != A->rows || B->cols != A->cols)
        return fk_err_set(err, FK_EINVAL, "eigen-solver: B is %zux%zu but A is %zux%zu", B->rows,
                          B->cols, A->rows, A->cols);
    size_t n = A->rows;
    double *a = sym_copy(A);
    double *b = sym_copy(B);
    double *w = malloc(n * sizeof *w);
    double *z = malloc(n * m * sizeof *z);
    if (!a || !b || !w || !z) {
        rc = fk_err_set(err, FK_ENOMEM, "eigen-solver: out of memory (n=%zu)", n);
        goto out;
    }
    lapack_int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)n, b, (lapack_int)n);
    if (info != 0) {
        rc = fk_err_set(err, FK_ENUMERIC,
                        "eigen-solver: B is not positive definite (Cholesky failed at column %d); "
                        "increase the regularizer", (int)info);
        goto out;
    }
    info = LAPACKE_dsygst(LAPACK_COL_MAJOR, 1, 'L', (lapack_int)n, a, (lapack_int)n, b, (lapack_int)n);
    if (info != 0) {
        rc = fk_err_set(err, FK_ENUMERIC, "eigen-solver: dsygst failed (info=%d)", (int)info);
        goto out;
    }
    rc = top_range(a, n, m, w, z, err);
    if (rc)
        goto out;
    /* W = L^-T U: solve L^T W = U for the m columns. */
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (int)n, (int)m, 1.0,
                b, (int)n, z, (int)n);
    rc = store_desc(w, z, n, m, vals, W, err);
out:
    free(a);
    free(b);
    free(w);
    free(z);
    return rc;
}

void fk_eig_fix_signs(fk_mat *V)
{
    for (size_t k = 0; k < V->cols; k++) {
        double best = 0.0;
        for (size_t i = 0; i < V->rows; i++) {
            double v = V->data[i * V->ld + k];
            if (fabs(v) > fabs(best))
                best = v;
        }
        if (best < 0)
            for (size_t i = 0; i < V->rows; i++)
                V->data[i * V->ld + k] = -V->data[i * V->ld + k];
    }
}
