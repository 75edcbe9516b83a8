#include "common/data/prep.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>

int fk_prep_l1_rows(fk_mat *X)
{
    size_t n = X->rows, d = X->cols;
    if (n == 0 || d == 0)
        return FK_OK;
    double *ones = malloc(d * sizeof *ones), *sum = malloc(n * sizeof *sum);
    if (!ones || !sum) {
        free(ones);
        free(sum);
        return FK_ENOMEM;
    }
    for (size_t j = 0; j < d; j++)
        ones[j] = 1.0;
    /* signed row sums X 1 (as MATLAB sum), not dasum: features may be negative */
    cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)d, 1.0, X->data, (int)X->ld, ones, 1, 0.0, sum, 1);
    for (size_t i = 0; i < n; i++)
        if (sum[i] != 0)
            cblas_dscal((int)d, 1.0 / sum[i], fk_mat_row(X, i), 1);
    free(ones);
    free(sum);
    return FK_OK;
}

void fk_prep_l2_rows(fk_mat *X)
{
    for (size_t i = 0; i < X->rows; i++) {
        double *r = fk_mat_row(X, i);
        double nrm = cblas_dnrm2((int)X->cols, r, 1);
        if (nrm > 0)
            cblas_dscal((int)X->cols, 1.0 / nrm, r, 1);
    }
}

int fk_prep_zscore_cols(fk_mat *X)
{
    return fk_prep_zscore_cols_map(X, NULL, NULL);
}

void fk_prep_affine_cols(fk_mat *X, const double *shift, const double *scale)
{
    /* the same two operations, in the same order, as fk_prep_zscore_cols_map */
    for (size_t i = 0; i < X->rows; i++) {
        double *r = fk_mat_row(X, i);
        for (size_t j = 0; j < X->cols; j++)
            r[j] -= shift[j];
    }
    for (size_t j = 0; j < X->cols; j++)
        cblas_dscal((int)X->rows, scale[j], X->data + j, (int)X->ld);
}

int fk_prep_zscore_cols_map(fk_mat *X, double *shift, double *scale)
{
    size_t n = X->rows, d = X->cols;
    if (n == 0 || d == 0)
        return FK_OK;
    double *ones = malloc(n * sizeof *ones), *mu = calloc(d, sizeof *mu);
    if (!ones || !mu) {
        free(ones);
        free(mu);
        return FK_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        ones[i] = 1.0;
    /* mu = X' 1 / n, then X -= 1 mu' (rank-1 update) */
    cblas_dgemv(CblasRowMajor, CblasTrans, (int)n, (int)d, 1.0 / (double)n, X->data, (int)X->ld, ones, 1,
                0.0, mu, 1);
    cblas_dger(CblasRowMajor, (int)n, (int)d, -1.0, ones, 1, mu, 1, X->data, (int)X->ld);
    for (size_t j = 0; j < d; j++) {
        double *col = X->data + j;
        double sd = cblas_dnrm2((int)n, col, (int)X->ld) / sqrt((double)n);
        /* MATLAB sets sigma 0 to 1 so a constant column becomes 0; rounding in the mean can
         * leave ~1e-17 residue in a constant column, which must not be blown up to +-1 */
        double f = sd <= 1e-13 * fabs(mu[j]) || sd == 0 ? 0.0 : 1.0 / sd;
        cblas_dscal((int)n, f, col, (int)X->ld);
        if (shift)
            shift[j] = mu[j];
        if (scale)
            scale[j] = f;
    }
    free(ones);
    free(mu);
    return FK_OK;
}

void fk_prep_affine_div(fk_mat *X, double div)
{
    /* the catalog's own loop: the same multiplications, so the same bits */
    for (size_t i = 0; i < X->rows; i++)
        cblas_dscal((int)X->cols, 1.0 / div, fk_mat_row(X, i), 1);
}
