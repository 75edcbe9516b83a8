#include "common/la/partition.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>

enum { dirichlet_max_draws = 1000 };

void fk_partition_close(fk_partition *p)
{
    free(p->offset);
    free(p->index);
    free(p->group);
    *p = (fk_partition){0};
}

size_t fk_partition_size(const fk_partition *p, int client)
{
    if (client < 0 || client >= p->n_clients)
        return 0;
    return p->offset[client + 1] - p->offset[client];
}

const int *fk_partition_client(const fk_partition *p, int client)
{
    if (client < 0 || client >= p->n_clients)
        return NULL;
    return p->index + p->offset[client];
}

static int check_counts(const char *fn, size_t n, int n_clients, fk_err *err)
{
    if (n > (size_t)INT_MAX)
        return fk_err_set(err, FK_ELIMIT, "%s: %zu samples exceed the index range %d", fn, n,
                          INT_MAX);
    if (n_clients <= 0)
        return fk_err_set(err, FK_EINVAL, "%s: number of clients is %d; need at least 1", fn,
                          n_clients);
    if ((size_t)n_clients > n)
        return fk_err_set(err, FK_EINVAL,
                          "%s: %d clients but only %zu samples; use at most %zu clients", fn,
                          n_clients, n, n);
    return FK_OK;
}

/* Build the grouped index from owner[i] (the client of sample i) by a counting
 * sort, which keeps indices ascending within each client. */
static int build(fk_partition *p, const int *owner, size_t n, int n_clients, const char *fn,
                 fk_err *err)
{
    *p = (fk_partition){0};
    p->offset = calloc((size_t)n_clients + 1, sizeof *p->offset);
    p->index = malloc((n ? n : 1) * sizeof *p->index);
    size_t *next = calloc((size_t)n_clients, sizeof *next);
    if (!p->offset || !p->index || !next) {
        free(next);
        fk_partition_close(p);
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory for %zu samples", fn, n);
    }
    p->n = n;
    p->n_clients = n_clients;
    for (size_t i = 0; i < n; i++)
        p->offset[owner[i] + 1]++;
    for (int k = 0; k < n_clients; k++)
        p->offset[k + 1] += p->offset[k];
    for (size_t i = 0; i < n; i++) {
        int k = owner[i];
        p->index[p->offset[k] + next[k]++] = (int)i;
    }
    free(next);
    return FK_OK;
}

int fk_partition_iid(fk_partition *p, size_t n, int n_clients, fk_rng *rng, fk_err *err)
{
    *p = (fk_partition){0};
    int rc = check_counts("fk_partition_iid", n, n_clients, err);
    if (rc)
        return rc;
    int *perm = malloc(n * sizeof *perm), *owner = malloc(n * sizeof *owner);
    if (!perm || !owner) {
        free(perm);
        free(owner);
        return fk_err_set(err, FK_ENOMEM, "fk_partition_iid: out of memory for %zu samples", n);
    }
    for (size_t i = 0; i < n; i++)
        perm[i] = (int)i;
    fk_rng_shuffle(rng, perm, n);
    size_t K = (size_t)n_clients, base = n / K, extra = n % K, pos = 0;
    for (size_t k = 0; k < K; k++) {
        size_t take = base + (k < extra);
        for (size_t j = 0; j < take; j++)
            owner[perm[pos++]] = (int)k;
    }
    rc = build(p, owner, n, n_clients, "fk_partition_iid", err);
    free(perm);
    free(owner);
    return rc;
}

/* Proportions ~ Dirichlet(alpha): Gamma(alpha) draws normalised. If every draw
 * underflows (tiny alpha), the whole mass goes to one uniformly chosen client,
 * which is the alpha -> 0 limit. */
static void dirichlet(fk_rng *rng, double alpha, double *prop, int K)
{
    double sum = 0.0;
    for (int k = 0; k < K; k++) {
        prop[k] = fk_rng_gamma(rng, alpha);
        sum += prop[k];
    }
    if (!(sum > 0.0)) {
        for (int k = 0; k < K; k++)
            prop[k] = 0.0;
        prop[fk_rng_below(rng, (uint64_t)K)] = 1.0;
        return;
    }
    for (int k = 0; k < K; k++)
        prop[k] /= sum;
}

/* One draw: deal each class's shuffled samples to clients by Dirichlet proportions. */
static void dirichlet_draw(fk_rng *rng, const int *by_class, const size_t *class_start,
                           int n_classes, int K, double alpha, double *prop, int *perm, int *owner)
{
    for (int c = 0; c < n_classes; c++) {
        size_t nc = class_start[c + 1] - class_start[c];
        for (size_t j = 0; j < nc; j++)
            perm[j] = by_class[class_start[c] + j];
        fk_rng_shuffle(rng, perm, nc);
        dirichlet(rng, alpha, prop, K);
        double cum = 0.0;
        size_t lo = 0;
        for (int k = 0; k < K; k++) {
            cum += prop[k];
            size_t hi = k == K - 1 ? nc : (size_t)floor(cum * (double)nc);
            if (hi > nc)
                hi = nc;
            if (hi < lo)
                hi = lo;
            for (size_t j = lo; j < hi; j++)
                owner[perm[j]] = k;
            lo = hi;
        }
    }
}

int fk_partition_dirichlet(fk_partition *p, const int *y, size_t n, int n_classes, int n_clients,
                           double alpha, size_t min_per_client, fk_rng *rng, fk_err *err)
{
    static const char fn[] = "fk_partition_dirichlet";
    *p = (fk_partition){0};
    int rc = check_counts(fn, n, n_clients, err);
    if (rc)
        return rc;
    if (!(alpha > 0.0) || !isfinite(alpha))
        return fk_err_set(err, FK_EINVAL,
                          "%s: alpha = %g; the Dirichlet concentration must be > 0 "
                          "(small = skewed, large = near IID)",
                          fn, alpha);
    if (n_classes <= 0)
        return fk_err_set(err, FK_EINVAL, "%s: %d classes; need labelled data with >= 1 class", fn,
                          n_classes);
    if (min_per_client > n / (size_t)n_clients)
        return fk_err_set(err, FK_EINVAL,
                          "%s: %zu samples cannot give %d clients at least %zu each; lower "
                          "min_per_client or the number of clients",
                          fn, n, n_clients, min_per_client);
    for (size_t i = 0; i < n; i++)
        if (y[i] < 0 || y[i] >= n_classes)
            return fk_err_set(err, FK_EINVAL, "%s: label y[%zu] = %d is outside [0, %d)", fn, i,
                              y[i], n_classes);
    size_t *class_start = calloc((size_t)n_classes + 1, sizeof *class_start);
    size_t *fill = calloc((size_t)n_classes, sizeof *fill);
    size_t *count = calloc((size_t)n_clients, sizeof *count);
    int *by_class = malloc(n * sizeof *by_class), *perm = malloc(n * sizeof *perm);
    int *owner = malloc(n * sizeof *owner);
    double *prop = malloc((size_t)n_clients * sizeof *prop);
    if (!class_start || !fill || !count || !by_class || !perm || !owner || !prop) {
        rc = fk_err_set(err, FK_ENOMEM, "%s: out of memory for %zu samples", fn, n);
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        class_start[y[i] + 1]++;
    for (int c = 0; c < n_classes; c++)
        class_start[c + 1] += class_start[c];
    for (size_t i = 0; i < n; i++)
        by_class[class_start[y[i]] + fill[y[i]]++] = (int)i;
    rc = FK_ENUMERIC;
    for (int draw = 0; draw < dirichlet_max_draws; draw++) {
        dirichlet_draw(rng, by_class, class_start, n_classes, n_clients, alpha, prop, perm, owner);
        for (int k = 0; k < n_clients; k++)
            count[k] = 0;
        for (size_t i = 0; i < n; i++)
            count[owner[i]]++;
        size_t smallest = n;
        for (int k = 0; k < n_clients; k++)
            if (count[k] < smallest)
                smallest = count[k];
        if (smallest >= min_per_client) {
            rc = FK_OK;
            break;
        }
    }
    if (rc)
        fk_err_set(err, FK_ENUMERIC,
                   "%s: no Dirichlet(%g) draw in %d gave every one of %d clients at least %zu "
                   "samples; raise alpha, lower min_per_client or use fewer clients",
                   fn, alpha, dirichlet_max_draws, n_clients, min_per_client);
    else
        rc = build(p, owner, n, n_clients, fn, err);
done:
    free(class_start);
    free(fill);
    free(count);
    free(by_class);
    free(perm);
    free(owner);
    free(prop);
    return rc;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int fk_partition_group(fk_partition *p, const int *group, size_t n, fk_err *err)
{
    static const char fn[] = "fk_partition_group";
    *p = (fk_partition){0};
    if (n == 0)
        return fk_err_set(err, FK_EINVAL, "%s: no samples to partition", fn);
    if (n > (size_t)INT_MAX)
        return fk_err_set(err, FK_ELIMIT, "%s: %zu samples exceed the index range %d", fn, n,
                          INT_MAX);
    for (size_t i = 0; i < n; i++)
        if (group[i] < 0)
            return fk_err_set(err, FK_EINVAL, "%s: group id of sample %zu is %d; ids must be >= 0",
                              fn, i, group[i]);
    int *ids = malloc(n * sizeof *ids), *owner = malloc(n * sizeof *owner);
    if (!ids || !owner) {
        free(ids);
        free(owner);
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory for %zu samples", fn, n);
    }
    for (size_t i = 0; i < n; i++)
        ids[i] = group[i];
    qsort(ids, n, sizeof *ids, cmp_int);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || ids[i] != ids[k - 1])
            ids[k++] = ids[i];
    for (size_t i = 0; i < n; i++) {
        const int *hit = bsearch(&group[i], ids, k, sizeof *ids, cmp_int);
        owner[i] = (int)(hit - ids);
    }
    int rc = build(p, owner, n, (int)k, fn, err);
    free(owner);
    if (rc) {
        free(ids);
        return rc;
    }
    int *shrunk = realloc(ids, k * sizeof *ids);
    p->group = shrunk ? shrunk : ids;
    return FK_OK;
}
