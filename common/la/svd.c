#include "common/la/svd.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>

#include "common/la/blas.h"

void fk_svd_close(fk_svd *svd)
{
    fk_mat_close(&svd->U);
    fk_mat_close(&svd->Vt);
    free(svd->s);
    *svd = (fk_svd){0};
}

int fk_svd_init(fk_svd *svd, const fk_mat *A, fk_err *err)
{
    *svd = (fk_svd){0};
    int rc = fk_blas_check_mat(A, "fk_svd_init: A", err);
    if (rc)
        return rc;
    size_t m = A->rows, n = A->cols, r = m < n ? m : n;
    if (!r)
        return fk_err_set(err, FK_EINVAL,
                          "fk_svd_init: matrix is %zux%zu; need at least one row and column", m, n);
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++)
            if (!isfinite(fk_mat_get(A, i, j)))
                return fk_err_set(err, FK_EINVAL, "fk_svd_init: A(%zu,%zu) is not finite", i, j);
    fk_mat work;
    if ((rc = fk_mat_copy(&work, A)))
        return fk_err_set(err, rc, "fk_svd_init: cannot copy the %zux%zu input", m, n);
    svd->r = r;
    svd->s = malloc(r * sizeof *svd->s);
    if (!svd->s || fk_mat_init(&svd->U, m, r) || fk_mat_init(&svd->Vt, r, n)) {
        fk_mat_close(&work);
        fk_svd_close(svd);
        return fk_err_set(err, FK_ENOMEM, "fk_svd_init: cannot allocate the %zux%zu decomposition",
                          m, n);
    }
    /* The row-major m x n buffer is the column-major n x m matrix A^T = V S U^T, so
     * LAPACK's column-major "U" of A^T is our row-major Vt and its "VT" is our U:
     * no transposition copies. */
    lapack_int info = LAPACKE_dgesdd(LAPACK_COL_MAJOR, 'S', (lapack_int)n, (lapack_int)m, work.data,
                                     (lapack_int)n, svd->s, svd->Vt.data, (lapack_int)n,
                                     svd->U.data, (lapack_int)r);
    fk_mat_close(&work);
    if (info != 0) {
        fk_svd_close(svd);
        if (info > 0)
            return fk_err_set(
                err, FK_ENUMERIC,
                "fk_svd_init: dgesdd did not converge on the %zux%zu matrix (info %d); "
                "check the input scaling",
                m, n, (int)info);
        return fk_err_set(err, info == LAPACK_WORK_MEMORY_ERROR ? FK_ENOMEM : FK_EINVAL,
                          "fk_svd_init: dgesdd failed on the %zux%zu matrix (info %d)", m, n,
                          (int)info);
    }
    return FK_OK;
}
