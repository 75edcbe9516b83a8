#include "common/models/fedrf_tca/mmd.h"

#include <cblas.h>
#include <string.h>

void fk_mmd_embedding(const fk_mat *Z, double sign, double *out)
{
    memset(out, 0, Z->cols * sizeof *out);
    if (Z->rows == 0)
        return;
    double w = sign / (double)Z->rows;
    for (size_t i = 0; i < Z->rows; i++)
        cblas_daxpy((int)Z->cols, w, fk_mat_row(Z, i), 1, out, 1);
}

double fk_mmd_loss(const fk_mat *W, const double *d, double scale, fk_mat *gW, double *gd,
                   double *z)
{
    int D = (int)W->rows, m = (int)W->cols, ld = (int)W->ld;
    cblas_dgemv(CblasRowMajor, CblasTrans, D, m, 1.0, W->data, ld, d, 1, 0.0, z, 1);
    double L = cblas_ddot(m, z, 1, z, 1);
    if (gW)
        cblas_dger(CblasRowMajor, D, m, 2.0 * scale, d, 1, z, 1, gW->data, (int)gW->ld);
    if (gd)
        cblas_dgemv(CblasRowMajor, CblasNoTrans, D, m, 2.0, W->data, ld, z, 1, 0.0, gd, 1);
    return L;
}
