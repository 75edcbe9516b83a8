/* The one-shot ridge predictor on DICA projections (spec dica.md §8.1) and the
 * mean-distance bandwidth rule (§4). */
#include "common/models/dica.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

double fk_dica_sigma_rule(double n, const double *sum_x, size_t d, double sum_x2)
{
    double m2 = 0;
    for (size_t j = 0; j < d; j++)
        m2 += (sum_x[j] / n) * (sum_x[j] / n);
    double tr = sum_x2 / n - m2;
    return tr > 0 ? sqrt(2.0 * tr) : NAN;
}

void fk_dica_ridge_add(const fk_mat *Z, const double *T, size_t k, double *A, double *b)
{
    size_t m = Z->cols, p = m + 1;
    for (size_t i = 0; i < Z->rows; i++) {
        const double *z = fk_mat_row(Z, i);
        const double *t = T + i * k;
        for (size_t a = 0; a < p; a++) {
            double za = a < m ? z[a] : 1.0;
            for (size_t c = 0; c < p; c++)
                A[a * p + c] += za * (c < m ? z[c] : 1.0);
            for (size_t c = 0; c < k; c++)
                b[a * k + c] += za * t[c];
        }
    }
}

int fk_dica_ridge_solve(size_t m, size_t k, const double *A, const double *b, double alpha_rel,
                        double *Theta, fk_err *err)
{
    size_t p = m + 1;
    double *M = malloc(p * p * sizeof *M);
    if (!M)
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    memcpy(M, A, p * p * sizeof *M);
    memcpy(Theta, b, p * k * sizeof *Theta);
    double tr = 0;
    for (size_t i = 0; i < m; i++)
        tr += A[i * p + i];
    double alpha = alpha_rel * tr / (double)(m ? m : 1);
    for (size_t i = 0; i < m; i++)
        M[i * p + i] += alpha;
    lapack_int info = LAPACKE_dposv(LAPACK_ROW_MAJOR, 'U', (lapack_int)p, (lapack_int)k, M,
                                    (lapack_int)p, Theta, (lapack_int)k);
    free(M);
    if (info != 0)
        return fk_err_set(err, FK_ENUMERIC,
                          "dica: ridge system is singular (%d); are there any samples?", (int)info);
    return FK_OK;
}

void fk_dica_ridge_predict(const fk_mat *Z, const double *Theta, size_t k, double *out)
{
    size_t m = Z->cols;
    for (size_t i = 0; i < Z->rows; i++) {
        const double *z = fk_mat_row(Z, i);
        for (size_t c = 0; c < k; c++) {
            double s = Theta[m * k + c];
            for (size_t a = 0; a < m; a++)
                s += z[a] * Theta[a * k + c];
            out[i * k + c] = s;
        }
    }
}
