#include "common/la/pca.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>

#include "common/la/blas.h"
#include "common/la/svd.h"

void fk_pca_close(fk_pca *p)
{
    fk_mat_close(&p->mean);
    fk_mat_close(&p->axes);
    free(p->variance);
    free(p->ratio);
    *p = (fk_pca){0};
}

/* mean = (1/n) X^T 1 */
static int column_means(const fk_mat *X, fk_mat *mean, fk_err *err)
{
    size_t n = X->rows;
    double *ones = malloc(n * sizeof *ones);
    if (!ones)
        return fk_err_set(err, FK_ENOMEM, "fk_pca_fit: out of memory for %zu samples", n);
    for (size_t i = 0; i < n; i++)
        ones[i] = 1.0;
    int rc = fk_gemv(FK_TRANS, 1.0 / (double)n, X, ones, n, 0.0, mean->data, mean->cols, err);
    free(ones);
    return rc;
}

/* Xc = X - 1 mean^T (rank-one update on a copy). */
static int centred_copy(const fk_mat *X, const fk_mat *mean, fk_mat *Xc, fk_err *err)
{
    if (fk_mat_copy(Xc, X))
        return fk_err_set(err, FK_ENOMEM, "cannot copy the %zux%zu data", X->rows, X->cols);
    double *ones = malloc(X->rows * sizeof *ones);
    if (!ones) {
        fk_mat_close(Xc);
        return fk_err_set(err, FK_ENOMEM, "out of memory for %zu samples", X->rows);
    }
    for (size_t i = 0; i < X->rows; i++)
        ones[i] = 1.0;
    cblas_dger(CblasRowMajor, (int)X->rows, (int)X->cols, -1.0, ones, 1, mean->data, 1, Xc->data,
               (int)Xc->ld);
    free(ones);
    return FK_OK;
}

/* Deterministic sign: the largest-magnitude entry of each axis is positive. */
static void fix_signs(fk_mat *axes)
{
    for (size_t i = 0; i < axes->rows; i++) {
        double *row = fk_mat_row(axes, i);
        size_t arg = (size_t)cblas_idamax((int)axes->cols, row, 1);
        if (row[arg] < 0)
            fk_scal(axes->cols, -1.0, row);
    }
}

int fk_pca_fit(fk_pca *p, const fk_mat *X, size_t k, fk_err *err)
{
    *p = (fk_pca){0};
    int rc = fk_blas_check_mat(X, "fk_pca_fit: X", err);
    if (rc)
        return rc;
    size_t n = X->rows, d = X->cols, r = n < d ? n : d;
    if (n < 2 || d < 1)
        return fk_err_set(err, FK_EINVAL,
                          "fk_pca_fit: data is %zux%zu; need at least 2 samples and 1 feature", n,
                          d);
    if (k < 1 || k > r)
        return fk_err_set(
            err, FK_EINVAL,
            "fk_pca_fit: k = %zu components requested; need 1 <= k <= min(n, d) = %zu", k, r);
    if ((rc = fk_mat_init(&p->mean, 1, d)) || (rc = fk_mat_init(&p->axes, k, d)) ||
        !(p->variance = malloc(k * sizeof *p->variance)) ||
        !(p->ratio = malloc(k * sizeof *p->ratio))) {
        fk_pca_close(p);
        return fk_err_set(err, FK_ENOMEM, "fk_pca_fit: cannot allocate %zu axes of dimension %zu",
                          k, d);
    }
    p->k = k;
    p->d = d;
    fk_mat Xc = {0};
    fk_svd svd = {0};
    if ((rc = column_means(X, &p->mean, err)))
        goto fail;
    if ((rc = centred_copy(X, &p->mean, &Xc, err))) {
        fk_err_prefix(err, "fk_pca_fit: ");
        goto fail;
    }
    rc = fk_svd_init(&svd, &Xc, err);
    if (rc) {
        fk_err_prefix(err, "fk_pca_fit: ");
        goto fail;
    }
    double total = fk_mat_nrm2(&Xc);
    total = total * total / (double)(n - 1);
    p->total_variance = total;
    for (size_t i = 0; i < k; i++) {
        fk_copy(d, fk_mat_row(&svd.Vt, i), fk_mat_row(&p->axes, i));
        p->variance[i] = svd.s[i] * svd.s[i] / (double)(n - 1);
        p->ratio[i] = total > 0 ? p->variance[i] / total : 0.0;
    }
    fix_signs(&p->axes);
    fk_svd_close(&svd);
    fk_mat_close(&Xc);
    return FK_OK;
fail:
    fk_svd_close(&svd);
    fk_mat_close(&Xc);
    fk_pca_close(p);
    return rc;
}

int fk_pca_transform(const fk_pca *p, const fk_mat *X, fk_mat *Z, fk_err *err)
{
    *Z = (fk_mat){0};
    int rc = fk_blas_check_mat(X, "fk_pca_transform: X", err);
    if (rc)
        return rc;
    if (!p->axes.data)
        return fk_err_set(err, FK_ESTATE, "fk_pca_transform: PCA is not fitted");
    if (X->cols != p->d)
        return fk_err_set(err, FK_EINVAL,
                          "fk_pca_transform: data has %zu features but the PCA was fitted on %zu",
                          X->cols, p->d);
    if ((rc = fk_mat_init(Z, X->rows, p->k)))
        return fk_err_set(err, rc, "fk_pca_transform: cannot allocate %zux%zu scores", X->rows,
                          p->k);
    if (!X->rows)
        return FK_OK;
    /* centre first: subtracting after the projection would cancel digits when |mean| >> spread */
    fk_mat Xc;
    if ((rc = centred_copy(X, &p->mean, &Xc, err))) {
        fk_mat_close(Z);
        return fk_err_prefix(err, "fk_pca_transform: ");
    }
    rc = fk_gemm(FK_NOTRANS, FK_TRANS, 1.0, &Xc, &p->axes, 0.0, Z, err);
    fk_mat_close(&Xc);
    if (rc)
        fk_mat_close(Z);
    return rc;
}
