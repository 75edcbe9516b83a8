#include "common/data/split.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"

int fk_split_parse(fk_split_spec *s, const char *by, fk_err *err)
{
    memset(s, 0, sizeof *s);
    char *end;
    if (!strcmp(by, "iid")) {
        s->kind = FK_SPLIT_IID;
    } else if (!strcmp(by, "label-skew")) {
        s->kind = FK_SPLIT_LABEL_SKEW;
    } else if (!strncmp(by, "dirichlet:", 10)) {
        errno = 0;
        s->alpha = strtod(by + 10, &end);
        if (end == by + 10 || *end || errno || !(s->alpha > 0 && s->alpha <= 1e6))
            return fk_err_set(err, FK_EINVAL,
                              "--by '%s': ALPHA must be a number in (0, 1e6], e.g. dirichlet:0.5",
                              by);
        s->kind = FK_SPLIT_DIRICHLET;
    } else if (!strncmp(by, "column:", 7)) {
        errno = 0;
        long n = strtol(by + 7, &end, 10);
        if (end == by + 7 || *end || errno || n < 1 || n > (1L << 30))
            return fk_err_set(err, FK_EINVAL, "--by '%s': N must be a column number >= 1", by);
        s->kind = FK_SPLIT_COLUMN;
        s->column = (size_t)n;
    } else {
        return fk_err_set(err, FK_EINVAL,
                          "--by '%s': use iid, label-skew, dirichlet:ALPHA or column:N", by);
    }
    return FK_OK;
}

static void split_iid(size_t n, int k, fk_rng *r, int *perm, int *client)
{
    fk_rng_shuffle(r, perm, n);
    for (size_t i = 0; i < n; i++)
        client[perm[i]] = (int)(i % (size_t)k);
}

/* Sort key for label-skew: class, then a random rank (so ties are in random order). */
typedef struct ranked {
    int cls, rank, row;
} ranked;

static int by_class_rank(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->cls != y->cls)
        return x->cls < y->cls ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

static int split_label_skew(const fk_dataset *ds, int k, fk_rng *r, int *perm, int *client)
{
    size_t n = ds->X.rows;
    ranked *v = malloc(n * sizeof *v);
    if (!v)
        return FK_ENOMEM;
    fk_rng_shuffle(r, perm, n);
    for (size_t i = 0; i < n; i++)
        v[perm[i]] = (ranked){ds->y[perm[i]], (int)i, perm[i]};
    qsort(v, n, sizeof *v, by_class_rank);
    for (size_t i = 0; i < n; i++) /* K contiguous runs of n/K rows (rounded) */
        client[v[i].row] = (int)((i * (size_t)k) / n);
    free(v);
    return FK_OK;
}

/* One draw: per class, shares ~ Dir(alpha) cut the class's shuffled rows. */
static void dirichlet_draw(const fk_dataset *ds, int k, double alpha, fk_rng *r, int *rows,
                           double *p, int *client)
{
    size_t n = ds->X.rows;
    for (int c = 0; c < ds->n_classes; c++) {
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (ds->y[i] == c)
                rows[m++] = (int)i;
        fk_rng_shuffle(r, rows, m);
        double sum = 0;
        for (int j = 0; j < k; j++)
            sum += p[j] = fk_rng_gamma(r, alpha);
        double acc = 0;
        size_t at = 0;
        for (int j = 0; j < k; j++) {
            acc += p[j];
            size_t to = j == k - 1 || sum <= 0 ? m : (size_t)llround(acc / sum * (double)m);
            if (to > m)
                to = m;
            for (; at < to; at++)
                client[rows[at]] = j;
        }
    }
}

FK_CHECKRETURN static int split_dirichlet(const fk_dataset *ds, int k, double alpha, fk_rng *r, int *rows,
                           int *client, fk_err *err)
{
    size_t n = ds->X.rows;
    double *p = malloc((size_t)k * sizeof *p);
    size_t *count = malloc((size_t)k * sizeof *count);
    if (!p || !count) {
        free(p);
        free(count);
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    }
    int rc = FK_EINVAL;
    for (int attempt = 0; attempt < 100 && rc; attempt++) {
        dirichlet_draw(ds, k, alpha, r, rows, p, client);
        memset(count, 0, (size_t)k * sizeof *count);
        for (size_t i = 0; i < n; i++)
            count[client[i]]++;
        rc = FK_OK;
        for (int j = 0; j < k; j++)
            if (!count[j])
                rc = FK_EINVAL;
    }
    free(p);
    free(count);
    if (rc)
        return fk_err_set(err, FK_EINVAL,
                          "dirichlet:%g left a client without rows in 100 draws; raise ALPHA, "
                          "use fewer clients or another --seed",
                          alpha);
    return FK_OK;
}

typedef struct group {
    double value;
    size_t rows;
    int client;
} group;

static int by_value(const void *a, const void *b)
{
    double x = ((const group *)a)->value, y = ((const group *)b)->value;
    return x < y ? -1 : x > y;
}

static int by_size_desc(const void *a, const void *b)
{
    const group *x = a, *y = b;
    if (x->rows != y->rows)
        return x->rows > y->rows ? -1 : 1;
    return x->value < y->value ? -1 : x->value > y->value;
}

FK_CHECKRETURN static int split_column(const fk_dataset *ds, int k, size_t col, int *client, fk_err *err)
{
    size_t n = ds->X.rows;
    if (col > ds->X.cols)
        return fk_err_set(err, FK_EINVAL, "--by column:%zu: the data has %zu feature columns",
                          col, ds->X.cols);
    group *g = malloc(n * sizeof *g);
    size_t *load = calloc((size_t)k, sizeof *load);
    if (!g || !load) {
        free(g);
        free(load);
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        g[i] = (group){fk_mat_get(&ds->X, i, col - 1), 1, 0};
    qsort(g, n, sizeof *g, by_value);
    size_t m = 0; /* distinct values, with their row counts */
    for (size_t i = 0; i < n; i++)
        if (m && g[m - 1].value == g[i].value)
            g[m - 1].rows++;
        else
            g[m++] = g[i];
    int rc = FK_OK;
    if (m < (size_t)k) {
        rc = fk_err_set(err, FK_EINVAL,
                        "--by column:%zu: the column has %zu distinct values, fewer than the %d "
                        "clients",
                        col, m, k);
    } else {
        qsort(g, m, sizeof *g, by_size_desc);
        for (size_t i = 0; i < m; i++) { /* greedy: the least loaded client takes the group */
            int best = 0;
            for (int j = 1; j < k; j++)
                if (load[j] < load[best])
                    best = j;
            g[i].client = best;
            load[best] += g[i].rows;
        }
        qsort(g, m, sizeof *g, by_value);
        for (size_t i = 0; i < n; i++) { /* bisection on the sorted distinct values */
            double v = fk_mat_get(&ds->X, i, col - 1);
            size_t lo = 0, hi = m;
            while (hi - lo > 1) {
                size_t mid = (lo + hi) / 2;
                if (g[mid].value <= v)
                    lo = mid;
                else
                    hi = mid;
            }
            client[i] = g[lo].client;
        }
    }
    free(g);
    free(load);
    return rc;
}

int fk_split_assign(const fk_dataset *ds, const fk_split_spec *s, int k, uint64_t seed,
                    int *client, fk_err *err)
{
    size_t n = ds->X.rows;
    if (k < 1 || (size_t)k > n)
        return fk_err_set(err, FK_EINVAL, "--clients %d: give 1..%zu (the data has %zu rows)", k,
                          n, n);
    if ((s->kind == FK_SPLIT_LABEL_SKEW || s->kind == FK_SPLIT_DIRICHLET) && !ds->y)
        return fk_err_set(err, FK_EINVAL,
                          "--by %s needs class labels and the data has none; give --label, or "
                          "split with iid or column:N",
                          s->kind == FK_SPLIT_LABEL_SKEW ? "label-skew" : "dirichlet");
    if (s->kind == FK_SPLIT_COLUMN)
        return split_column(ds, k, s->column, client, err);
    int *perm = malloc(n * sizeof *perm);
    if (!perm)
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        perm[i] = (int)i;
    fk_rng r;
    fk_rng_init(&r, seed, 0x5b17); /* a stream of its own: "split" */
    int rc = FK_OK;
    if (s->kind == FK_SPLIT_IID)
        split_iid(n, k, &r, perm, client);
    else if (s->kind == FK_SPLIT_LABEL_SKEW)
        rc = split_label_skew(ds, k, &r, perm, client) ? fk_err_set(err, FK_ENOMEM, "out of memory")
                                                       : FK_OK;
    else
        rc = split_dirichlet(ds, k, s->alpha, &r, perm, client, err);
    free(perm);
    return rc;
}
