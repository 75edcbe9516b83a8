/* The one-shot ridge predictor on DICA projections (spec dica.md §8.1) and the
 * mean-distance bandwidth rule (§4). */
#include "common/models/dica/dica.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/blas.h"

void fk_dica_moments(const fk_mat *X, size_t n, double *sum, double *m2)
{
    size_t d = X->cols;
    memset(sum, 0, d * sizeof *sum);
    memset(m2, 0, d * sizeof *m2);
    if (n == 0)
        return;
    for (size_t i = 0; i < n; i++)
        fk_axpy(d, 1.0, fk_mat_row(X, i), sum);
    /* second pass about the mean: no cancellation however far the data sit from 0 */
    for (size_t i = 0; i < n; i++) {
        const double *x = fk_mat_row(X, i);
        for (size_t j = 0; j < d; j++) {
            double e = x[j] - sum[j] / (double)n;
            m2[j] += e * e;
        }
    }
}

void fk_dica_moments_merge(double *n, double *sum, double *m2, size_t d, double nb,
                           const double *sumb, const double *m2b)
{
    double na = *n, nt = na + nb;
    for (size_t j = 0; j < d; j++) {
        double corr = 0;
        if (na > 0 && nb > 0) {
            double delta = sumb[j] / nb - sum[j] / na;
            corr = delta * delta * (na * nb / nt);
        }
        m2[j] += m2b[j] + corr;
        sum[j] += sumb[j];
    }
    *n = nt;
}

double fk_dica_sigma_rule(double n, const double *m2, size_t d)
{
    double tr = 0;
    for (size_t j = 0; j < d; j++)
        tr += m2[j];
    tr /= n;
    return tr > 0 && isfinite(tr) ? sqrt(2.0 * tr) : NAN;
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
