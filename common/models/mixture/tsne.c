#include "common/models/mixture/tsne.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/la/rng.h"
#include "common/models/mixture/sptree.h"

void fk_tsne_defaults(fk_tsne_opts *o)
{
    *o = (fk_tsne_opts){.dims = 10, .perplexity = 30.0, .iters = 1000, .lr = 200.0,
                        .exag_iters = 250, .exag = 12.0, .seed = 1,
                        .theta = 0.5};
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

/* Y = 1e-4 * N(0, I) from the seed (Rtsne's randn() * .0001), gains 1. */
static void init_y(fk_mat *Y, uint64_t seed, double *gain)
{
    fk_rng rng;
    fk_rng_init(&rng, seed, 0x74736e6500000000ULL);
    for (size_t i = 0; i < Y->rows * Y->cols; i++) {
        Y->data[i] = 1e-4 * fk_rng_normal(&rng);
        gain[i] = 1.0;
    }
}

/* Rtsne's sign(): 0 has its own sign, so every gain grows on the first step. */
static int sign3(double x)
{
    return (x > 0.0) - (x < 0.0);
}

/* One Rtsne update: adaptive gains (floor 0.01), momentum, re-centring. */
static void step(fk_mat *Y, const double *G, double *U, double *gain, double mom, double lr)
{
    size_t n = Y->rows, m = Y->cols;
    double mean[m];
    memset(mean, 0, sizeof mean);
    for (size_t i = 0; i < n * m; i++) {
        int flip = sign3(G[i]) != sign3(U[i]);
        gain[i] = flip ? gain[i] + 0.2 : gain[i] * 0.8;
        if (gain[i] < 0.01)
            gain[i] = 0.01;
        U[i] = mom * U[i] - lr * gain[i] * G[i];
        Y->data[i] += U[i];
        mean[i % m] += Y->data[i] / (double)n;
    }
    for (size_t i = 0; i < n * m; i++)
        Y->data[i] -= mean[i % m];
}

FK_CHECKRETURN static int check_finite(fk_mat *Y, fk_err *err)
{
    for (size_t i = 0; i < Y->rows * Y->cols; i++)
        if (!isfinite(Y->data[i])) {
            fk_mat_close(Y);
            return fk_err_set(err, FK_ENUMERIC, "t-SNE: the embedding diverged");
        }
    return FK_OK;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void heap_down(pair *h, int k, int r)
{
    for (;;) {
        int c = 2 * r + 1;
        if (c >= k)
            return;
        if (c + 1 < k && cmp_pair(&h[c + 1], &h[c]) > 0)
            c++;
        if (cmp_pair(&h[c], &h[r]) <= 0)
            return;
        pair t = h[c];
        h[c] = h[r];
        h[r] = t;
        r = c;
    }
}

/* Exact k nearest neighbours of every row (self excluded), ascending by
 * (distance, index): distances of a block of rows to all rows by one dgemm,
 * so memory stays O(block x n), then a bounded max-heap per row. The kept
 * squared distances are recomputed directly (the dgemm form cancels). */
static int knn(const double *X, size_t n, int d, int k, pair *nb)
{
    size_t B = (size_t)1 << 23; /* block of 8M doubles */
    B = B / n < 1 ? 1 : B / n > 512 ? 512 : B / n;
    double *sq = malloc(n * sizeof *sq), *D = malloc(B * n * sizeof *D);
    if (!sq || !D) {
        free(sq);
        free(D);
        return FK_ENOMEM;
    }
    for (size_t i = 0; i < n; i++)
        sq[i] = cblas_ddot(d, X + i * (size_t)d, 1, X + i * (size_t)d, 1);
    for (size_t i0 = 0; i0 < n; i0 += B) {
        size_t b = n - i0 < B ? n - i0 : B;
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)b, (int)n, d, -2.0,
                    X + i0 * (size_t)d, d, X, d, 0.0, D, (int)n);
        for (size_t r = 0; r < b; r++) {
            size_t i = i0 + r;
            const double *row = D + r * n;
            pair *h = nb + i * (size_t)k;
            int m = 0;
            for (size_t j = 0; j < n; j++) {
                if (j == i)
                    continue;
                pair c = {row[j] + sq[i] + sq[j], (int)j};
                if (m < k) { /* sift up */
                    int q = m++;
                    h[q] = c;
                    while (q > 0 && cmp_pair(&h[q], &h[(q - 1) / 2]) > 0) {
                        pair t = h[q];
                        h[q] = h[(q - 1) / 2];
                        h[(q - 1) / 2] = t;
                        q = (q - 1) / 2;
                    }
                } else if (cmp_pair(&c, &h[0]) < 0) {
                    h[0] = c;
                    heap_down(h, k, 0);
                }
            }
            for (int q = 0; q < k; q++) {
                const double *a = X + i * (size_t)d, *c = X + (size_t)h[q].j * (size_t)d;
                double s = 0.0;
                for (int t = 0; t < d; t++)
                    s += (a[t] - c[t]) * (a[t] - c[t]);
                h[q].d = s;
            }
            qsort(h, (size_t)k, sizeof *h, cmp_pair);
        }
    }
    free(sq);
    free(D);
    return FK_OK;
}

typedef struct ent {
    int32_t j;
    double v;
} ent;

static int cmp_ent(const void *a, const void *b)
{
    const ent *x = a, *y = b;
    return (x->j > y->j) - (x->j < y->j);
}

typedef struct csr {
    size_t *row; /* n + 1 */
    ent *e;
} csr;

/* Symmetric joint P = (P + P^T) / sum as CSR, from the row-conditional kNN
 * affinities (Rtsne's symmetrizeMatrix). */
static int sparse_p(const double *X, size_t n, int d, double perp, csr *P)
{
    int k = (int)(3 * perp);
    if ((size_t)k > n - 1)
        k = (int)n - 1;
    pair *nb = malloc(n * (size_t)k * sizeof *nb);
    double *p = malloc(n * (size_t)k * sizeof *p);
    size_t *cnt = calloc(n + 1, sizeof *cnt);
    P->row = calloc(n + 1, sizeof *P->row);
    P->e = malloc(2 * n * (size_t)k * sizeof *P->e);
    int rc = (nb && p && cnt && P->row && P->e) ? knn(X, n, d, k, nb) : FK_ENOMEM;
    if (rc)
        goto done;
    for (size_t i = 0; i < n; i++)
        row_affinities(nb + i * (size_t)k, k, perp, p + i * (size_t)k);
    for (size_t i = 0; i < n; i++) /* row i gets its k entries and one per j naming i */
        for (int q = 0; q < k; q++) {
            cnt[i + 1]++;
            cnt[(size_t)nb[i * (size_t)k + (size_t)q].j + 1]++;
        }
    for (size_t i = 0; i < n; i++)
        cnt[i + 1] += cnt[i];
    size_t *fill = malloc(n * sizeof *fill);
    if (!fill) {
        rc = FK_ENOMEM;
        goto done;
    }
    memcpy(fill, cnt, n * sizeof *fill);
    for (size_t i = 0; i < n; i++)
        for (int q = 0; q < k; q++) {
            size_t j = (size_t)nb[i * (size_t)k + (size_t)q].j;
            double v = p[i * (size_t)k + (size_t)q];
            P->e[fill[i]++] = (ent){(int32_t)j, v};
            P->e[fill[j]++] = (ent){(int32_t)i, v};
        }
    free(fill);
    /* sort each row by column and merge the pairs (i, j) present in both directions */
    double sum = 0.0;
    size_t out = 0;
    for (size_t i = 0; i < n; i++) {
        ent *r = P->e + cnt[i];
        size_t len = cnt[i + 1] - cnt[i];
        qsort(r, len, sizeof *r, cmp_ent);
        P->row[i] = out;
        for (size_t a = 0; a < len; a++) {
            if (out > P->row[i] && P->e[out - 1].j == r[a].j)
                P->e[out - 1].v += r[a].v;
            else
                P->e[out++] = r[a];
            sum += r[a].v;
        }
    }
    P->row[n] = out;
    for (size_t a = 0; a < out; a++)
        P->e[a].v /= sum;
done:
    free(nb);
    free(p);
    free(cnt);
    return rc;
}

typedef struct rep_job {
    const fk_sptree *tree;
    size_t lo, hi;
    double theta, *neg, *z;
} rep_job;

/* Repulsion of points lo..hi-1; z[i] per point so the total is summed in one
 * fixed order whatever the thread count. */
static void *rep_rows(void *arg)
{
    rep_job *j = arg;
    size_t m = (size_t)j->tree->dims;
    for (size_t i = j->lo; i < j->hi; i++) {
        j->z[i] = 0.0;
        fk_sptree_repulsion(j->tree, i, j->theta, j->neg + i * m, &j->z[i]);
    }
    return NULL;
}

static void repulsion(const fk_sptree *tree, size_t n, double theta, int threads, double *neg,
                      double *z)
{
    enum { MAXT = 16 };
    int T = threads < 1 ? 1 : threads > MAXT ? MAXT : threads;
    rep_job job[MAXT];
    pthread_t th[MAXT];
    int started[MAXT] = {0};
    for (int t = 0; t < T; t++) {
        /* interleaved-size chunks would balance better; contiguous keeps locality */
        job[t] = (rep_job){tree, n * (size_t)t / (size_t)T, n * (size_t)(t + 1) / (size_t)T, theta,
                           neg, z};
        started[t] = t > 0 && pthread_create(&th[t], NULL, rep_rows, &job[t]) == 0;
    }
    rep_rows(&job[0]);
    for (int t = 1; t < T; t++) {
        if (started[t])
            pthread_join(th[t], NULL);
        else
            rep_rows(&job[t]); /* no thread: do it here */
    }
}

/* Rtsne's Barnes-Hut t-SNE: gradient = sum_j p_ij q_ij Z (y_i - y_j)
 * - sum_j (q_ij Z)^2 (y_i - y_j) / Z, with the second sum from the tree. */
FK_CHECKRETURN static int tsne_bh(const fk_mat *X, const fk_tsne_opts *o, fk_mat *Y, fk_err *err)
{
    size_t n = X->rows, m = (size_t)o->dims;
    if (m > 31)
        return fk_err_set(err, FK_EINVAL,
                          "t-SNE: Barnes-Hut supports up to 31 output dimensions (got %zu); "
                          "use theta = 0",
                          m);
    double t0 = now();
    csr P = {0};
    double *G = malloc(n * m * sizeof *G), *U = calloc(n * m, sizeof *U);
    double *gain = malloc(n * m * sizeof *gain), *neg = malloc(n * m * sizeof *neg);
    double *zi = malloc(n * sizeof *zi);
    int rc = (G && U && gain && neg && zi) ? sparse_p(X->data, n, (int)X->cols, o->perplexity, &P)
                                     : FK_ENOMEM;
    if (!rc)
        rc = fk_mat_init(Y, n, m);
    if (rc) {
        rc = fk_err_set(err, FK_ENOMEM, "t-SNE: out of memory for n = %zu (Barnes-Hut path)", n);
        goto done;
    }
    if (o->verbose)
        fprintf(stderr, "t-SNE: n = %zu, sparse P with %zu entries in %.1f s\n", n, P.row[n],
                now() - t0);
    init_y(Y, o->seed, gain);
    double t1 = now();
    for (int it = 0; it < o->iters && !rc; it++) {
        double ex = it < o->exag_iters ? o->exag : 1.0, mom = it < 250 ? 0.5 : 0.8;
        for (size_t i = 0; i < n; i++) { /* attraction over the sparse P */
            const double *yi = Y->data + i * m;
            double *g = G + i * m;
            memset(g, 0, m * sizeof *g);
            for (size_t a = P.row[i]; a < P.row[i + 1]; a++) {
                const double *yj = Y->data + (size_t)P.e[a].j * m;
                double d2 = 1.0;
                for (size_t c = 0; c < m; c++)
                    d2 += (yi[c] - yj[c]) * (yi[c] - yj[c]);
                double w = ex * P.e[a].v / d2;
                for (size_t c = 0; c < m; c++)
                    g[c] += w * (yi[c] - yj[c]);
            }
        }
        fk_sptree tree;
        if (fk_sptree_init(&tree, Y->data, n, (int)m)) {
            rc = fk_err_set(err, FK_ENOMEM, "t-SNE: out of memory for the Barnes-Hut tree");
            break;
        }
        memset(neg, 0, n * m * sizeof *neg);
        repulsion(&tree, n, o->theta, o->threads, neg, zi);
        fk_sptree_close(&tree);
        double Z = 0.0;
        for (size_t i = 0; i < n; i++)
            Z += zi[i];
        cblas_daxpy((int)(n * m), -1.0 / Z, neg, 1, G, 1);
        step(Y, G, U, gain, mom, o->lr);
        if (o->verbose && (it < 5 || (it + 1) % 50 == 0))
            fprintf(stderr, "t-SNE: iteration %d, %.3f s per iteration so far\n", it + 1,
                    (now() - t1) / (it + 1));
    }
    if (!rc)
        rc = check_finite(Y, err);
    else
        fk_mat_close(Y);
done:
    free(P.row);
    free(P.e);
    free(G);
    free(U);
    free(gain);
    free(neg);
    free(zi);
    return rc;
}

FK_CHECKRETURN static int tsne_dense(const fk_mat *X, const fk_tsne_opts *o, fk_mat *Y, fk_err *err)
{
    size_t n = X->rows;
    int d = (int)X->cols, m = o->dims;
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
    init_y(Y, o->seed, gain);
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
        /* (diag(rowsum) - M) Y: Rtsne's exact gradient omits the factor 4 of the paper's,
         * and the spec's learning rate 200 is Rtsne's (the Barnes-Hut path does the same) */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, m, (int)n, -1.0, Q, (int)n,
                    Y->data, m, 0.0, G, m);
        for (size_t i = 0; i < n; i++)
            cblas_daxpy(m, sq[i], Y->data + i * (size_t)m, 1, G + i * (size_t)m, 1);
        step(Y, G, U, gain, mom, o->lr);
    }
    rc = check_finite(Y, err);
done:
    free(P);
    free(Q);
    free(sq);
    free(G);
    free(U);
    free(gain);
    return rc;
}

int fk_tsne(const fk_mat *X, const fk_tsne_opts *o, fk_mat *Y, fk_err *err)
{
    size_t n = X->rows;
    int d = (int)X->cols, m = o->dims;
    if (m < 1 || o->perplexity <= 0 || o->iters < 1 || o->lr <= 0)
        return fk_err_set(err, FK_EINVAL, "t-SNE: dims, perplexity, iterations, rate must be > 0");
    if (!(o->theta >= 0))
        return fk_err_set(err, FK_EINVAL, "t-SNE: theta must be >= 0 (got %g)", o->theta);
    if ((double)n < 3 * o->perplexity + 2)
        return fk_err_set(err, FK_EINVAL,
                          "t-SNE: %zu samples are too few for perplexity %g (need > 3 x perplexity "
                          "+ 1)",
                          n, o->perplexity);
    if (n > INT32_MAX)
        return fk_err_set(err, FK_EINVAL, "t-SNE: %zu samples exceed 2^31 - 1", n);
    if (X->ld != X->cols)
        return fk_err_set(err, FK_EINVAL, "t-SNE: X must be dense");
    for (size_t i = 0; i < n * (size_t)d; i++)
        if (!isfinite(X->data[i]))
            return fk_err_set(err, FK_EINVAL, "t-SNE: input value %zu is not finite", i);
    return o->theta > 0 ? tsne_bh(X, o, Y, err) : tsne_dense(X, o, Y, err);
}
