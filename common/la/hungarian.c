#include "common/la/hungarian.h"

#include <math.h>
#include <stdlib.h>

/* Shortest augmenting path with row/column potentials (Jonker-Volgenant form
 * of Kuhn-Munkres). Arrays are 1-based; column 0 is the virtual start. */
static void solve(const double *a, int n, double *u, double *v, int *p, int *way, double *minv,
                  char *used)
{
    for (int i = 1; i <= n; i++) {
        p[0] = i;
        int j0 = 0;
        for (int j = 0; j <= n; j++) {
            minv[j] = INFINITY;
            used[j] = 0;
        }
        do {
            used[j0] = 1;
            int i0 = p[j0], j1 = 0;
            double delta = INFINITY;
            for (int j = 1; j <= n; j++) {
                if (used[j])
                    continue;
                double cur = a[(size_t)(i0 - 1) * (size_t)n + (size_t)(j - 1)] - u[i0] - v[j];
                if (cur < minv[j]) {
                    minv[j] = cur;
                    way[j] = j0;
                }
                if (minv[j] < delta) {
                    delta = minv[j];
                    j1 = j;
                }
            }
            for (int j = 0; j <= n; j++) {
                if (used[j]) {
                    u[p[j]] += delta;
                    v[j] -= delta;
                } else {
                    minv[j] -= delta;
                }
            }
            j0 = j1;
        } while (p[j0] != 0);
        do {
            int j1 = way[j0];
            p[j0] = p[j1];
            j0 = j1;
        } while (j0);
    }
}

int fk_hungarian(const double *cost, int n, int *assign, double *total, fk_err *err)
{
    if (n <= 0)
        return fk_err_set(err, FK_EINVAL, "hungarian: matrix size must be positive (got %d)", n);
    for (size_t i = 0; i < (size_t)n * (size_t)n; i++)
        if (!isfinite(cost[i]))
            return fk_err_set(err, FK_EINVAL,
                              "hungarian: cost entry %zu is not finite; pass finite costs", i);
    size_t m = (size_t)n + 1;
    double *u = calloc(m, sizeof *u), *v = calloc(m, sizeof *v), *minv = calloc(m, sizeof *minv);
    int *p = calloc(m, sizeof *p), *way = calloc(m, sizeof *way);
    char *used = calloc(m, 1);
    int rc = FK_OK;
    if (!u || !v || !minv || !p || !way || !used) {
        rc = fk_err_set(err, FK_ENOMEM, "hungarian: out of memory for n = %d", n);
    } else {
        solve(cost, n, u, v, p, way, minv, used);
        double t = 0.0;
        for (int j = 1; j <= n; j++) {
            assign[p[j] - 1] = j - 1;
            t += cost[(size_t)(p[j] - 1) * (size_t)n + (size_t)(j - 1)];
        }
        if (total)
            *total = t;
    }
    free(u);
    free(v);
    free(minv);
    free(p);
    free(way);
    free(used);
    return rc;
}

int fk_misclustering_rate(const int *truth, const int *pred, size_t n, int n_classes,
                          int n_clusters, double *rate, fk_err *err)
{
    if (n_classes <= 0 || n_clusters <= 0)
        return fk_err_set(err, FK_EINVAL, "misclustering: class and cluster counts must be positive");
    *rate = 0.0;
    if (n == 0)
        return FK_OK;
    int m = n_classes > n_clusters ? n_classes : n_clusters;
    double *c = calloc((size_t)m * (size_t)m, sizeof *c);
    int *as = calloc((size_t)m, sizeof *as);
    if (!c || !as) {
        free(c);
        free(as);
        return fk_err_set(err, FK_ENOMEM, "misclustering: out of memory");
    }
    int rc = FK_OK;
    for (size_t i = 0; i < n && rc == FK_OK; i++) {
        if (truth[i] < 0 || truth[i] >= n_classes || pred[i] < 0 || pred[i] >= n_clusters)
            rc = fk_err_set(err, FK_EINVAL,
                            "misclustering: label out of range at sample %zu (truth %d, pred %d)",
                            i, truth[i], pred[i]);
        else
            c[(size_t)pred[i] * (size_t)m + (size_t)truth[i]] -= 1.0; /* negated counts */
    }
    double total = 0.0;
    if (rc == FK_OK)
        rc = fk_hungarian(c, m, as, &total, err);
    if (rc == FK_OK)
        *rate = 1.0 + total / (double)n;
    free(c);
    free(as);
    return rc;
}

/* pairs among x items */
static double pairs(double x)
{
    return x * (x - 1.0) / 2.0;
}

int fk_adjusted_rand_index(const int *truth, const int *pred, size_t n, int n_classes,
                           int n_clusters, double *ari, fk_err *err)
{
    if (n_classes <= 0 || n_clusters <= 0)
        return fk_err_set(err, FK_EINVAL, "adjusted Rand index: class and cluster counts must be "
                                          "positive");
    *ari = 1.0;
    if (n < 2)
        return FK_OK;
    size_t A = (size_t)n_classes, B = (size_t)n_clusters;
    double *t = calloc(A * B + A + B, sizeof *t); /* contingency table, row sums, column sums */
    if (!t)
        return fk_err_set(err, FK_ENOMEM, "adjusted Rand index: out of memory");
    double *a = t + A * B, *b = a + A;
    for (size_t i = 0; i < n; i++) {
        if (truth[i] < 0 || truth[i] >= n_classes || pred[i] < 0 || pred[i] >= n_clusters) {
            free(t);
            return fk_err_set(err, FK_EINVAL,
                              "adjusted Rand index: label out of range at sample %zu (truth %d, "
                              "pred %d)",
                              i, truth[i], pred[i]);
        }
        t[(size_t)truth[i] * B + (size_t)pred[i]] += 1.0;
        a[truth[i]] += 1.0;
        b[pred[i]] += 1.0;
    }
    double sij = 0.0, sa = 0.0, sb = 0.0;
    for (size_t i = 0; i < A * B; i++)
        sij += pairs(t[i]);
    for (size_t i = 0; i < A; i++)
        sa += pairs(a[i]);
    for (size_t j = 0; j < B; j++)
        sb += pairs(b[j]);
    free(t);
    double expected = sa * sb / pairs((double)n), top = 0.5 * (sa + sb);
    /* both partitions trivial in the same way: the index is 0/0; they agree */
    if (top == expected)
        *ari = sij == top ? 1.0 : 0.0;
    else
        *ari = (sij - expected) / (top - expected);
    return FK_OK;
}
