#include "bench/knn.h"

#include <cblas.h>
#include <stdlib.h>

#define BLOCK_ROWS 256

/* Squared row norms of m into out. */
static void row_norms(const fk_mat *m, double *out)
{
    for (size_t i = 0; i < m->rows; i++) {
        const double *r = fk_mat_row(m, i);
        out[i] = cblas_ddot((int)m->cols, r, 1, r, 1);
    }
}

int fk_knn1_predict(const fk_mat *train, const int *ytrain, const fk_mat *test, int *pred, fk_err *err)
{
    size_t n = train->rows, m = test->rows, d = train->cols;
    if (test->cols != d)
        return fk_err_set(err, FK_EINVAL, "1-NN: test samples have %zu features, training samples %zu",
                          test->cols, d);
    if (n == 0)
        return fk_err_set(err, FK_EINVAL, "1-NN: empty training set");
    size_t blk = m < BLOCK_ROWS ? (m ? m : 1) : BLOCK_ROWS;
    double *ntr = malloc(n * sizeof *ntr), *nte = malloc((m ? m : 1) * sizeof *nte);
    double *g = malloc(blk * n * sizeof *g);
    if (!ntr || !nte || !g) {
        free(ntr);
        free(nte);
        free(g);
        return fk_err_set(err, FK_ENOMEM, "1-NN: out of memory for a %zu x %zu distance block", blk, n);
    }
    row_norms(train, ntr);
    row_norms(test, nte);
    for (size_t i0 = 0; i0 < m; i0 += blk) {
        size_t b = m - i0 < blk ? m - i0 : blk;
        /* G = Test_block * Train^T */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)b, (int)n, (int)d, 1.0,
                    fk_mat_row(test, i0), (int)test->ld, train->data, (int)train->ld, 0.0, g, (int)n);
        for (size_t i = 0; i < b; i++) {
            const double *gi = g + i * n;
            size_t best = 0;
            double best_d = nte[i0 + i] + ntr[0] - 2.0 * gi[0];
            for (size_t j = 1; j < n; j++) {
                double dj = nte[i0 + i] + ntr[j] - 2.0 * gi[j];
                if (dj < best_d) { /* strict: ties keep the lowest index */
                    best_d = dj;
                    best = j;
                }
            }
            pred[i0 + i] = ytrain[best];
        }
    }
    free(ntr);
    free(nte);
    free(g);
    return FK_OK;
}
