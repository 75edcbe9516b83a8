#include "common/models/mixture/gmm_hc.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Agglomeration state over "slots" 0..L-1: merging a < b keeps slot a and moves
 * the last slot into b, as mclust does, so ties resolve in the same order. */
typedef struct hc_state {
    int p;
    double alpha;
    int L;
    double *cnt, *mean, *W, *tr, *T; /* per slot: size, mean (p), scatter (p x p), trace, term */
    int *head, *tail, *next, *low;   /* member lists; low = smallest member row */
    double *d;                       /* packed pair costs, (a < b) at b(b-1)/2 + a */
    double *w1, *diff;               /* scratch: p x p, p */
} hc_state;

static size_t pair_index(int a, int b)
{
    return (size_t)b * (size_t)(b - 1) / 2 + (size_t)a;
}

static void hc_close(hc_state *s)
{
    free(s->cnt);
    free(s->mean);
    free(s->W);
    free(s->tr);
    free(s->T);
    free(s->head);
    free(s->tail);
    free(s->next);
    free(s->low);
    free(s->d);
    free(s->w1);
    free(s->diff);
}

static int hc_open(hc_state *s, size_t m, int p)
{
    size_t pp = (size_t)p * (size_t)p;
    *s = (hc_state){.p = p, .L = (int)m};
    s->cnt = malloc(m * sizeof(double));
    s->mean = malloc(m * (size_t)p * sizeof(double));
    s->W = calloc(m * pp, sizeof(double));
    s->tr = calloc(m, sizeof(double));
    s->T = malloc(m * sizeof(double));
    s->head = malloc(m * sizeof(int));
    s->tail = malloc(m * sizeof(int));
    s->next = malloc(m * sizeof(int));
    s->low = malloc(m * sizeof(int));
    s->d = malloc((m * (m - 1) / 2 + 1) * sizeof(double));
    s->w1 = malloc(pp * sizeof(double));
    s->diff = malloc((size_t)p * sizeof(double));
    return s->cnt && s->mean && s->W && s->tr && s->T && s->head && s->tail && s->next && s->low &&
                   s->d && s->w1 && s->diff
               ? FK_OK
               : FK_ENOMEM;
}

/* n log([n > p] det(W/n) + (tr + alpha)/n); W (may be NULL) is overwritten. */
static double term(const hc_state *s, double n, double tr, double *W)
{
    double c = (tr + s->alpha) / n, D = 0.0;
    int p = s->p;
    if (n <= p || !W)
        return n * log(c);
    cblas_dscal(p * p, 1.0 / n, W, 1);
    if (LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', p, W, p) != 0)
        return n * log(c); /* singular scatter: the determinant part is zero */
    for (int j = 0; j < p; j++)
        D += 2.0 * log(W[(size_t)j * p + j]);
    return n * (D > 0 ? D + log1p(exp(-D) * c) : log(exp(D) + c));
}

/* Scatter and trace of a + b into s->w1 (when needed) and *tr; returns the merged size. */
static double joined(hc_state *s, int a, int b, double *tr, int need_w)
{
    int p = s->p;
    size_t pp = (size_t)p * (size_t)p;
    double na = s->cnt[a], nb = s->cnt[b], n = na + nb, f = na * nb / n;
    memcpy(s->diff, s->mean + (size_t)a * p, (size_t)p * sizeof(double));
    cblas_daxpy(p, -1.0, s->mean + (size_t)b * p, 1, s->diff, 1);
    *tr = s->tr[a] + s->tr[b] + f * cblas_ddot(p, s->diff, 1, s->diff, 1);
    if (need_w) {
        memcpy(s->w1, s->W + (size_t)a * pp, pp * sizeof(double));
        cblas_daxpy((int)pp, 1.0, s->W + (size_t)b * pp, 1, s->w1, 1);
        cblas_dger(CblasRowMajor, p, p, f, s->diff, 1, s->diff, 1, s->w1, p);
    }
    return n;
}

static double pair_cost(hc_state *s, int a, int b)
{
    double tr, n = joined(s, a, b, &tr, s->cnt[a] + s->cnt[b] > s->p);
    return term(s, n, tr, n > s->p ? s->w1 : NULL) - s->T[a] - s->T[b];
}

static void merge(hc_state *s, int a, int b)
{
    int p = s->p;
    size_t pp = (size_t)p * (size_t)p;
    double tr, na = s->cnt[a], nb = s->cnt[b], n = joined(s, a, b, &tr, 1);
    memcpy(s->W + (size_t)a * pp, s->w1, pp * sizeof(double));
    cblas_dscal(p, na / n, s->mean + (size_t)a * p, 1);
    cblas_daxpy(p, nb / n, s->mean + (size_t)b * p, 1, s->mean + (size_t)a * p, 1);
    s->cnt[a] = n;
    s->tr[a] = tr;
    s->T[a] = term(s, n, tr, n > p ? s->w1 : NULL);
    s->next[s->tail[a]] = s->head[b];
    s->tail[a] = s->tail[b];
    if (s->low[b] < s->low[a])
        s->low[a] = s->low[b];
}

/* Slot `from` (the last) into slot `to`, with its pair costs. */
static void move_slot(hc_state *s, int from, int to)
{
    int p = s->p;
    size_t pp = (size_t)p * (size_t)p;
    s->cnt[to] = s->cnt[from];
    memcpy(s->mean + (size_t)to * p, s->mean + (size_t)from * p, (size_t)p * sizeof(double));
    memcpy(s->W + (size_t)to * pp, s->W + (size_t)from * pp, pp * sizeof(double));
    s->tr[to] = s->tr[from];
    s->T[to] = s->T[from];
    s->head[to] = s->head[from];
    s->tail[to] = s->tail[from];
    s->low[to] = s->low[from];
    for (int u = 0; u < from; u++)
        if (u != to)
            s->d[u < to ? pair_index(u, to) : pair_index(to, u)] = s->d[pair_index(u, from)];
}

/* The last pair with the smallest cost in (b, a) scan order, as mclust breaks ties. */
static void best_pair(const hc_state *s, int *a, int *b)
{
    double best = INFINITY;
    *a = 0;
    *b = 1;
    for (int j = 1; j < s->L; j++) {
        const double *row = s->d + pair_index(0, j);
        for (int i = 0; i < j; i++)
            if (row[i] <= best) {
                best = row[i];
                *a = i;
                *b = j;
            }
    }
}

static void agglomerate(hc_state *s, const double *Z, size_t m, int G)
{
    int p = s->p;
    for (size_t i = 0; i < m; i++) {
        s->cnt[i] = 1.0;
        memcpy(s->mean + i * (size_t)p, Z + i * (size_t)p, (size_t)p * sizeof(double));
        s->T[i] = term(s, 1.0, 0.0, NULL);
        s->head[i] = s->tail[i] = s->low[i] = (int)i;
        s->next[i] = -1;
    }
    for (int b = 1; b < s->L; b++)
        for (int a = 0; a < b; a++)
            s->d[pair_index(a, b)] = pair_cost(s, a, b);
    while (s->L > G) {
        int a, b;
        best_pair(s, &a, &b);
        merge(s, a, b);
        if (b != s->L - 1)
            move_slot(s, s->L - 1, b);
        s->L--;
        for (int u = 0; u < s->L; u++)
            if (u != a)
                s->d[u < a ? pair_index(u, a) : pair_index(a, u)] = pair_cost(s, a, u);
    }
}

/* Scaled SVD scores of the standardised columns (mclust's hcUse "SVD"): the
 * transform is fitted on the m strided rows and applied to all n. *q = kept dims. */
static int svd_scores(const double *X, size_t n, int p, size_t step, size_t m, double *Z, int *q)
{
    double *mu = calloc((size_t)p, sizeof *mu), *sd = calloc((size_t)p, sizeof *sd);
    double *Xs = malloc(n * (size_t)p * sizeof *Xs), *A = malloc((size_t)p * p * sizeof *A);
    double *ev = malloc((size_t)p * sizeof *ev), *V = malloc((size_t)p * p * sizeof *V);
    int rc = mu && sd && Xs && A && ev && V ? FK_OK : FK_ENOMEM;
    for (size_t i = 0; !rc && i < m; i++)
        cblas_daxpy(p, 1.0 / (double)m, X + i * step * (size_t)p, 1, mu, 1);
    for (size_t i = 0; !rc && i < m; i++)
        for (int j = 0; j < p; j++) {
            double v = X[i * step * (size_t)p + j] - mu[j];
            sd[j] += v * v / (double)(m > 1 ? m - 1 : 1);
        }
    for (size_t i = 0; !rc && i < n; i++)
        for (int j = 0; j < p; j++) /* a constant column carries no information: zero it */
            Xs[i * (size_t)p + j] = sd[j] > 0 ? (X[i * (size_t)p + j] - mu[j]) / sqrt(sd[j]) : 0.0;
    if (!rc) {
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p, p, (int)m, 1.0, Xs,
                    (int)(step * (size_t)p), Xs, (int)(step * (size_t)p), 0.0, A, p);
        if (LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'V', 'U', p, A, p, ev) != 0)
            rc = FK_ENUMERIC;
    }
    if (!rc) {
        int k0 = 0; /* eigenvalues ascend; keep those above the rank threshold */
        while (k0 < p && !(ev[k0] > 1e-12 * ev[p - 1]))
            k0++;
        *q = p - k0;
        for (int j = 0; j < p; j++)
            for (int k = k0; k < p; k++)
                V[(size_t)j * *q + (k - k0)] = A[(size_t)j * p + k] / pow(ev[k], 0.25);
        if (*q > 0)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, *q, p, 1.0, Xs, p, V,
                        *q, 0.0, Z, *q);
    }
    free(mu);
    free(sd);
    free(Xs);
    free(A);
    free(ev);
    free(V);
    return rc;
}

/* Labels by smallest member; rows outside the subset join the nearest cluster mean. */
static void cut_labels(const hc_state *s, const double *Z, size_t n, size_t step, size_t m,
                       int *labels)
{
    int G = s->L, q = s->p, order[G > 0 ? G : 1], rank[G > 0 ? G : 1];
    for (int g = 0; g < G; g++)
        order[g] = g;
    for (int i = 1; i < G; i++) /* insertion sort on the smallest member row */
        for (int j = i; j > 0 && s->low[order[j]] < s->low[order[j - 1]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    for (int g = 0; g < G; g++)
        rank[order[g]] = g;
    for (size_t i = 0; i < n; i++) {
        int best = 0;
        double bd = INFINITY;
        for (int g = 0; g < G && (i % step || i / step >= m); g++) {
            double dd = 0.0;
            for (int j = 0; j < q; j++) {
                double v = Z[i * (size_t)q + j] - s->mean[(size_t)g * q + j];
                dd += v * v;
            }
            if (dd < bd) {
                bd = dd;
                best = g;
            }
        }
        labels[i] = rank[best];
    }
    for (int g = 0; g < G; g++)
        for (int r = s->head[g]; r >= 0; r = s->next[r])
            labels[(size_t)r * step] = rank[g];
}

/* Agglomerate the m rows i*step of Z (n x q) into G clusters; label all n rows. */
static int run(const double *Z, size_t n, int q, size_t step, size_t m, int G, int *labels,
               fk_err *err)
{
    double *Zs = malloc(m * (size_t)q * sizeof *Zs), *mu = calloc((size_t)q, sizeof *mu);
    hc_state s = {0};
    int rc = Zs && mu ? hc_open(&s, m, q) : FK_ENOMEM;
    if (rc == FK_OK) {
        double tot = 0.0;
        for (size_t i = 0; i < m; i++) {
            memcpy(Zs + i * (size_t)q, Z + i * step * (size_t)q, (size_t)q * sizeof(double));
            cblas_daxpy(q, 1.0 / (double)m, Zs + i * (size_t)q, 1, mu, 1);
        }
        for (size_t i = 0; i < m; i++)
            for (int j = 0; j < q; j++)
                tot += (Zs[i * (size_t)q + j] - mu[j]) * (Zs[i * (size_t)q + j] - mu[j]);
        /* mclust's alpha: the mean within-column variance (n denominator) */
        s.alpha = fmax(tot / ((double)m * q), 2.220446049250313e-16);
        agglomerate(&s, Zs, m, G);
        cut_labels(&s, Z, n, step, m, labels);
    } else {
        fk_err_set(err, rc, "hierarchical start: out of memory (n=%zu, p=%d)", m, q);
    }
    hc_close(&s);
    free(Zs);
    free(mu);
    return rc;
}

FK_CHECKRETURN static int check_args(const double *X, size_t n, int p, int G, fk_err *err)
{
    for (size_t i = 0; p >= 1 && p <= FK_GMM_HC_MAX_P && i < n * (size_t)p; i++)
        if (!isfinite(X[i]))
            return fk_err_set(err, FK_EINVAL,
                              "hierarchical start: sample %zu feature %zu is not finite; remove "
                              "or impute NaN/Inf values first",
                              i / (size_t)p, i % (size_t)p);
    if (p < 1 || p > FK_GMM_HC_MAX_P)
        return fk_err_set(err, FK_EINVAL,
                          "hierarchical start: p = %d features; it supports 1..%d (use the "
                          "k-means++ start for more)",
                          p, FK_GMM_HC_MAX_P);
    if (G < 1 || n < (size_t)G)
        return fk_err_set(err, FK_EINVAL,
                          "hierarchical start: %zu samples cannot make %d clusters; use fewer "
                          "components or give this client more data",
                          n, G);
    return FK_OK;
}

int fk_gmm_hc_agglomerate(const double *Z, size_t n, int q, int G, int *labels, fk_err *err)
{
    int rc = check_args(Z, n, q, G, err);
    if (!rc && n > FK_GMM_HC_MAX_ROWS)
        rc = fk_err_set(err, FK_EINVAL,
                        "hierarchical start: %zu rows; it agglomerates at most %d (use "
                        "fk_gmm_hc_vvv, which subsamples)",
                        n, FK_GMM_HC_MAX_ROWS);
    return rc ? rc : run(Z, n, q, 1, n, G, labels, err);
}

int fk_gmm_hc_vvv(const double *X, size_t n, int p, int G, int *labels, fk_err *err)
{
    int rc = check_args(X, n, p, G, err);
    if (rc)
        return rc;
    size_t step = n > FK_GMM_HC_MAX_ROWS ? n / FK_GMM_HC_MAX_ROWS : 1;
    size_t m = n > FK_GMM_HC_MAX_ROWS ? FK_GMM_HC_MAX_ROWS : n;
    double *Z = malloc(n * (size_t)p * sizeof *Z);
    int q = p;
    rc = Z ? svd_scores(X, n, p, step, m, Z, &q) : FK_ENOMEM;
    if (rc == FK_ENOMEM)
        fk_err_set(err, rc, "hierarchical start: out of memory (n=%zu, p=%d)", n, p);
    else if (rc || q == 0)
        rc = fk_err_set(err, FK_ENUMERIC,
                        "hierarchical start: the data have no variance (n=%zu, p=%d); check for "
                        "constant or duplicated features",
                        n, p);
    else
        rc = run(Z, n, q, step, m, G, labels, err);
    free(Z);
    return rc;
}
