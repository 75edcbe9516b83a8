#include "common/la/tsne.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"

void fk_tsne_defaults(fk_tsne_opts *o)
{
    *o = (fk_tsne_opts){.dims = 10, .perplexity = 30.0, .iters = 1000, .lr = 200.0,
                        .exag_iters = 250, .exag = 12.0, .seed = 1};
}

/* Squared distances of the rows of A (n x d) into D (n x n) via one dgemm. */
static void pairwise(const double *A, size_t n, int d, double *D, double *sq)
{
    for (size_t i = 0; i < n; i++)
        sq[i] = cblas_ddot(d, A + i * (size_t)d, 1, A + i * (size_t)d, 1);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)n, d, -2.0, A, d, A, d, 0.0,
                D, (int)n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double v = D[i * n + j] + sq[i] + sq[j];
            D[i * n + j] = v > 0 ? v : 0.0;
        }
}

typedef struct pair {
    double d;
    int j;
} pair;

static int cmp_pair(const void *a, const void *b)
{
    const pair *x = a, *y = b;
    if (x->d != y->d)
        return (x->d > y->d) - (x->d < y->d);
    return (x->j > y->j) - (x->j < y->j);
}

/* Row i of the conditional P over its k nearest neighbours: bandwidth by
 * bisection on the entropy (natural log) to ln(perplexity). */
static void row_affinities(const pair *nb, int k, double perp, double *p)
{
    double beta = 1.0, lo = -INFINITY, hi = INFINITY, target = log(perp);
    for (int it = 0; it < 200; it++) {
        double sum = 0.0, h = 0.0;
        for (int q = 0; q < k; q++) {
            p[q] = exp(-beta * (nb[q].d - nb[0].d)); /* shift by the nearest: no underflow */
            sum += p[q];
        }
        for (int q = 0; q < k; q++) {
            p[q] /= sum;
            h += p[q] > 0 ? -p[q] * log(p[q]) : 0.0;
        }
        if (fabs(h - target) < 1e-5)
            break;
        if (h > target) { /* too flat: sharpen */
            lo = beta;
            beta = isinf(hi) ? beta * 2 : 0.5 * (beta + hi);
        } else {
            hi = beta;
            beta = isinf(lo) ? beta / 2 : 0.5 * (beta + lo);
        }
    }
}

/* Symmetric joint P (dense n x n) from exact kNN affinities. */
static int joint_p(const double *X, size_t n, int d, double perp, double *P, double *D, double *sq)
{
    int k = (int)(3 * perp);
    if ((size_t)k > n - 1)
        k = (int)n - 1;
    pair *row = malloc(n * sizeof *row);
    double *p = malloc((size_t)k * sizeof *p);
    if (!row || !p) {
        free(row);
        free(p);
        return FK_ENOMEM;
    }
    pairwise(X, n, d, D, sq);
    memset(P, 0, n * n * sizeof *P);
    for (size_t i = 0; i < n; i++) {
        size_t m = 0;
        for (size_t j = 0; j < n; j++)
            if (j != i)
                row[m++] = (pair){D[i * n + j], (int)j};
        qsort(row, m, sizeof *row, cmp_pair);
        row_affinities(row, k, perp, p);
        for (int q = 0; q < k; q++)
            P[i * n + (size_t)row[q].j] = p[q];
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            double v = (P[i * n + j] + P[j * n + i]) / (2.0 * (double)n);
            P[i * n + j] = P[j * n + i] = v;
        }
    free(row);
    free(p);
    return FK_OK;
}

int fk_tsne(const fk_mat *X, const fk_tsne_opts *o, fk_mat *Y, fk_err *err)
{
    size_t n = X->rows;
    int d = (int)X->cols, m = o->dims;
    if (m < 1 || o->perplexity <= 0 || o->iters < 1 || o->lr <= 0)
        return fk_err_set(err, FK_EINVAL, "t-SNE: dims, perplexity, iterations, rate must be > 0");
    if ((double)n < 3 * o->perplexity + 2)
        return fk_err_set(err, FK_EINVAL,
                          "t-SNE: %zu samples are too few for perplexity %g (need > 3 x perplexity "
                          "+ 1)",
                          n, o->perplexity);
    if (X->ld != X->cols)
        return fk_err_set(err, FK_EINVAL, "t-SNE: X must be dense");
    for (size_t i = 0; i < n * (size_t)d; i++)
        if (!isfinite(X->data[i]))
            return fk_err_set(err, FK_EINVAL, "t-SNE: input value %zu is not finite", i);
    double *P = malloc(n * n * sizeof *P), *Q = malloc(n * n * sizeof *Q);
    double *sq = malloc(n * sizeof *sq), *G = malloc(n * (size_t)m * sizeof *G);
    double *U = calloc(n * (size_t)m, sizeof *U), *gain = malloc(n * (size_t)m * sizeof *gain);
    int rc = (P && Q && sq && G && U && gain) ? fk_mat_init(Y, n, (size_t)m) : FK_ENOMEM;
    if (rc == FK_OK)
        rc = joint_p(X->data, n, d, o->perplexity, P, Q, sq);
    if (rc) {
        rc = fk_err_set(err, FK_ENOMEM, "t-SNE: out of memory for n = %zu (needs 2 n^2 doubles)",
                        n);
        goto done;
    }
    fk_rng rng;
    fk_rng_init(&rng, o->seed, 0x74736e6500000000ULL);
    for (size_t i = 0; i < n * (size_t)m; i++) {
        Y->data[i] = 1e-2 * fk_rng_normal(&rng);
        gain[i] = 1.0;
    }
    for (int it = 0; it < o->iters; it++) {
        double ex = it < o->exag_iters ? o->exag : 1.0, mom = it < 250 ? 0.5 : 0.8;
        pairwise(Y->data, n, m, Q, sq); /* Q holds 1/(1+d2), then the force matrix */
        double Z = 0.0;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) {
                double q = i == j ? 0.0 : 1.0 / (1.0 + Q[i * n + j]);
                Q[i * n + j] = q;
                Z += q;
            }
        for (size_t i = 0; i < n; i++) {
            double rs = 0.0;
            for (size_t j = 0; j < n; j++) {
                double q = Q[i * n + j];
                Q[i * n + j] = (ex * P[i * n + j] - q / Z) * q;
                rs += Q[i * n + j];
            }
            sq[i] = rs;
        }
        /* gradient 4 (diag(rowsum) - M) Y */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, m, (int)n, -4.0, Q, (int)n,
                    Y->data, m, 0.0, G, m);
        for (size_t i = 0; i < n; i++)
            cblas_daxpy(m, 4.0 * sq[i], Y->data + i * (size_t)m, 1, G + i * (size_t)m, 1);
        double mean[m];
        memset(mean, 0, sizeof mean);
        for (size_t i = 0; i < n * (size_t)m; i++) {
            int flip = (G[i] > 0) != (U[i] > 0);
            gain[i] = flip ? gain[i] + 0.2 : gain[i] * 0.8;
            if (gain[i] < 0.01)
                gain[i] = 0.01;
            U[i] = mom * U[i] - o->lr * gain[i] * G[i];
            Y->data[i] += U[i];
            mean[i % (size_t)m] += Y->data[i] / (double)n;
        }
        for (size_t i = 0; i < n * (size_t)m; i++)
            Y->data[i] -= mean[i % (size_t)m];
    }
    for (size_t i = 0; i < n * (size_t)m; i++)
        if (!isfinite(Y->data[i])) {
            rc = fk_err_set(err, FK_ENUMERIC, "t-SNE: the embedding diverged");
            fk_mat_close(Y);
            break;
        }
done:
    free(P);
    free(Q);
    free(sq);
    free(G);
    free(U);
    free(gain);
    return rc;
}
