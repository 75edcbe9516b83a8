/* k-means for the partition of a large class (Remark 12): k-means++ seeding, Lloyd
 * iterations, the restart of least within-cluster sum of squares. Distances through
 * dgemm (||x||^2 - 2 x.c + ||c||^2). */
#include "common/models/kahm/kahm.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"

static const uint64_t KMEANS_STREAM = 0x6b61686d00000000ULL; /* "kahm" */

/* Squared distances of every row to every centre into D (N x k); returns the
 * within-cluster sum for the nearest-centre assignment written to assign. */
static double assign_rows(const double *Y, size_t N, size_t p, size_t ldy, const double *xn,
                          const double *C, int k, double *D, int *assign)
{
    double cn[k];
    for (int c = 0; c < k; c++)
        cn[c] = cblas_ddot((int)p, C + (size_t)c * p, 1, C + (size_t)c * p, 1);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, k, (int)p, -2.0, Y, (int)ldy, C,
                (int)p, 0.0, D, k);
    double sse = 0.0;
    for (size_t i = 0; i < N; i++) {
        int best = 0;
        double bd = INFINITY;
        for (int c = 0; c < k; c++) {
            double d = xn[i] + cn[c] + D[i * (size_t)k + (size_t)c];
            d = d > 0 ? d : 0;
            D[i * (size_t)k + (size_t)c] = d;
            if (d < bd) {
                bd = d;
                best = c;
            }
        }
        assign[i] = best;
        sse += bd;
    }
    return sse;
}

/* k-means++: first centre uniform, then each with probability proportional to the
 * squared distance to the nearest chosen centre. */
static void seed_centres(const double *Y, size_t N, size_t p, size_t ldy, int k, fk_rng *rng,
                         double *C, double *dmin)
{
    size_t first = (size_t)fk_rng_below(rng, N);
    memcpy(C, Y + first * ldy, p * sizeof(double));
    for (size_t i = 0; i < N; i++) {
        double s = 0.0;
        for (size_t j = 0; j < p; j++) {
            double d = Y[i * ldy + j] - C[j];
            s += d * d;
        }
        dmin[i] = s;
    }
    for (int c = 1; c < k; c++) {
        double tot = 0.0;
        for (size_t i = 0; i < N; i++)
            tot += dmin[i];
        size_t pick = N - 1;
        if (tot > 0) {
            double u = fk_rng_uniform(rng) * tot, acc = 0.0;
            for (size_t i = 0; i < N; i++) {
                acc += dmin[i];
                if (acc > u) {
                    pick = i;
                    break;
                }
            }
        } else {
            pick = (size_t)fk_rng_below(rng, N);
        }
        double *cc = C + (size_t)c * p;
        memcpy(cc, Y + pick * ldy, p * sizeof(double));
        for (size_t i = 0; i < N; i++) {
            double s = 0.0;
            for (size_t j = 0; j < p; j++) {
                double d = Y[i * ldy + j] - cc[j];
                s += d * d;
            }
            dmin[i] = s < dmin[i] ? s : dmin[i];
        }
    }
}

int fk__kahm_kmeans(const double *Y, size_t N, size_t p, size_t ldy, int k, int restarts,
                    int maxit, uint64_t seed, int *assign, fk_err *err)
{
    if (k < 1 || (size_t)k > N)
        return fk_err_set(err, FK_EINVAL, "k-means: %d clusters for %zu samples", k, N);
    double *C = malloc((size_t)k * p * sizeof(double));
    double *D = malloc(N * (size_t)k * sizeof(double));
    double *xn = malloc(N * sizeof(double));
    double *cnt = malloc((size_t)k * sizeof(double));
    int *cur = malloc(N * sizeof(int));
    int *nxt = malloc(N * sizeof(int));
    if (!C || !D || !xn || !cnt || !cur || !nxt) {
        free(nxt);
        free(C);
        free(D);
        free(xn);
        free(cnt);
        free(cur);
        return fk_err_set(err, FK_ENOMEM, "k-means: out of memory (N=%zu p=%zu k=%d)", N, p, k);
    }
    for (size_t i = 0; i < N; i++)
        xn[i] = cblas_ddot((int)p, Y + i * ldy, 1, Y + i * ldy, 1);
    fk_rng rng;
    fk_rng_init(&rng, seed, KMEANS_STREAM);
    double best = INFINITY;
    for (int r = 0; r < (restarts > 0 ? restarts : 1); r++) {
        seed_centres(Y, N, p, ldy, k, &rng, C, D);
        double sse = assign_rows(Y, N, p, ldy, xn, C, k, D, cur);
        for (int it = 0; it < maxit; it++) {
            /* Centre update; an emptied cluster takes the row farthest from its centre. */
            memset(C, 0, (size_t)k * p * sizeof(double));
            memset(cnt, 0, (size_t)k * sizeof(double));
            for (size_t i = 0; i < N; i++) {
                cblas_daxpy((int)p, 1.0, Y + i * ldy, 1, C + (size_t)cur[i] * p, 1);
                cnt[cur[i]] += 1.0;
            }
            for (int c = 0; c < k; c++) {
                if (cnt[c] > 0) {
                    cblas_dscal((int)p, 1.0 / cnt[c], C + (size_t)c * p, 1);
                    continue;
                }
                size_t far = 0;
                for (size_t i = 1; i < N; i++)
                    if (D[i * (size_t)k + (size_t)cur[i]] > D[far * (size_t)k + (size_t)cur[far]])
                        far = i;
                memcpy(C + (size_t)c * p, Y + far * ldy, p * sizeof(double));
                D[far * (size_t)k + (size_t)cur[far]] = 0;
            }
            int changed = 0;
            sse = assign_rows(Y, N, p, ldy, xn, C, k, D, nxt);
            for (size_t i = 0; i < N && !changed; i++)
                changed = nxt[i] != cur[i];
            memcpy(cur, nxt, N * sizeof(int));
            if (!changed)
                break;
        }
        if (sse < best) {
            best = sse;
            memcpy(assign, cur, N * sizeof(int));
        }
    }
    free(C);
    free(D);
    free(xn);
    free(cnt);
    free(cur);
    free(nxt);
    return FK_OK;
}
