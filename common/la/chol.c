#include "common/la/chol.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>

#include "common/la/blas.h"

/* Row-major lower triangle == column-major upper triangle of the same buffer, so
 * LAPACK runs in its native layout with no transposition copies. */

int fk_chol_init(fk_chol *c, const fk_mat *A, fk_err *err)
{
    *c = (fk_chol){0};
    int rc = fk_blas_check_mat(A, "fk_chol_init: A", err);
    if (rc)
        return rc;
    if (A->rows != A->cols || A->rows == 0)
        return fk_err_set(err, FK_EINVAL,
                          "fk_chol_init: matrix is %zux%zu; need a square n x n, n >= 1", A->rows,
                          A->cols);
    size_t n = A->rows;
    if ((rc = fk_mat_init(&c->L, n, n)))
        return fk_err_set(err, rc, "fk_chol_init: cannot allocate the %zux%zu factor", n, n);
    for (size_t i = 0; i < n; i++) {
        const double *src = fk_mat_row(A, i);
        for (size_t j = 0; j <= i; j++) {
            if (!isfinite(src[j])) {
                fk_chol_close(c);
                return fk_err_set(err, FK_EINVAL, "fk_chol_init: A(%zu,%zu) is not finite", i, j);
            }
        }
        fk_copy(i + 1, src, fk_mat_row(&c->L, i));
    }
    c->anorm = LAPACKE_dlansy(LAPACK_COL_MAJOR, '1', 'U', (lapack_int)n, c->L.data, (lapack_int)n);
    lapack_int info =
        LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'U', (lapack_int)n, c->L.data, (lapack_int)n);
    if (info > 0) {
        fk_chol_close(c);
        return fk_err_set(
            err, FK_ENUMERIC,
            "fk_chol_init: matrix is not positive definite (leading minor %d of %zu is "
            "not positive); add a ridge to the diagonal or check the input",
            (int)info, n);
    }
    if (info < 0) {
        fk_chol_close(c);
        return fk_err_set(err, FK_EINVAL, "fk_chol_init: dpotrf rejected argument %d", (int)-info);
    }
    return FK_OK;
}

void fk_chol_close(fk_chol *c)
{
    fk_mat_close(&c->L);
    c->anorm = 0.0;
}

static int check_rhs(const fk_chol *c, const fk_mat *B, const char *fn, size_t need_rows,
                     size_t need_cols, fk_err *err)
{
    int rc = fk_blas_check_mat(B, fn, err);
    if (rc)
        return rc;
    if (!c->L.data)
        return fk_err_set(err, FK_ESTATE, "%s: factor is empty (fk_chol_init failed or not called)",
                          fn);
    if ((need_rows && B->rows != need_rows) || (need_cols && B->cols != need_cols))
        return fk_err_set(err, FK_EINVAL,
                          "%s: factor is %zux%zu but the right-hand side is %zux%zu", fn, c->L.rows,
                          c->L.cols, B->rows, B->cols);
    return FK_OK;
}

/* dpotrs' two triangular solves as row-major cblas_dtrsm: B needs no transposed copy. */
int fk_chol_solve(const fk_chol *c, fk_mat *B, fk_err *err)
{
    int rc = check_rhs(c, B, "fk_chol_solve", c->L.rows, 0, err);
    if (rc || !B->cols)
        return rc;
    int n = (int)c->L.rows, k = (int)B->cols, ldb = (int)(B->ld < B->cols ? B->cols : B->ld);
    cblas_dtrsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, n, k, 1.0,
                c->L.data, n, B->data, ldb);
    cblas_dtrsm(CblasRowMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, n, k, 1.0,
                c->L.data, n, B->data, ldb);
    return FK_OK;
}

int fk_chol_whiten_rows(const fk_chol *c, fk_mat *X, fk_err *err)
{
    int rc = check_rhs(c, X, "fk_chol_whiten_rows", 0, c->L.rows, err);
    if (rc || !X->rows)
        return rc;
    int n = (int)c->L.rows, m = (int)X->rows, ldx = (int)(X->ld < X->cols ? X->cols : X->ld);
    cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, m, n, 1.0,
                c->L.data, n, X->data, ldx);
    return FK_OK;
}

double fk_chol_logdet(const fk_chol *c)
{
    double s = 0.0;
    for (size_t i = 0; i < c->L.rows; i++)
        s += log(fk_mat_get(&c->L, i, i));
    return 2.0 * s;
}

double fk_chol_rcond(const fk_chol *c)
{
    if (!c->L.data)
        return 0.0;
    double rcond = 0.0;
    lapack_int n = (lapack_int)c->L.rows;
    if (LAPACKE_dpocon(LAPACK_COL_MAJOR, 'U', n, c->L.data, n, c->anorm, &rcond) != 0)
        return 0.0;
    return rcond;
}
