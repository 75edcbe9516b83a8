/* Mode-B serving, the server's part: check each holder client's answer to a query batch
 * against the job's holders table, then take the minimum over the answers (eq. 63). A
 * holder that did not answer contributes +inf for its classes (Remark 11); the result
 * names the classes that could not be scored and the clients that were missing. */
#include "common/methods/kahm/kahm_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The holders table (K x C) and the query count of a batch, or FK_EFORMAT/FK_EINVAL. */
FK_CHECKRETURN static int shapes(const fk_bundle *model, const fk_bundle *queries, const fk_tensor **h,
                  size_t *nt, fk_err *err)
{
    *h = fk_bundle_get(model, "holders");
    if (!*h || (*h)->ndim != 2 || (*h)->shape[1] < 2 || (*h)->shape[1] > 100000 ||
        (*h)->shape[0] < 1)
        return fk_err_set(err, FK_EFORMAT, "kahm model: 'holders' missing or malformed");
    const fk_tensor *X = fk_bundle_get(queries, "X"), *dim = fk_bundle_get(model, "dim");
    if (!X || X->ndim != 2)
        return fk_err_set(err, FK_EINVAL, "kahm queries: need a matrix 'X'");
    if (dim && dim->len == 1 && dim->data[0] > 0 && X->shape[1] != (uint64_t)dim->data[0])
        return fk_err_set(err, FK_EINVAL, "kahm queries: %llu columns, the job's data dimension "
                          "is %g", (unsigned long long)X->shape[1], dim->data[0]);
    if (X->shape[0] > FK_KAHM_MAX_QUERIES)
        return fk_err_set(err, FK_ELIMIT, "kahm queries: %llu rows, at most %d per batch; split "
                          "the query file", (unsigned long long)X->shape[0],
                          (int)FK_KAHM_MAX_QUERIES);
    for (size_t i = 0; i < X->len; i++)
        if (!isfinite(X->data[i]))
            return fk_err_set(err, FK_EINVAL, "kahm queries: row %zu column %zu is %g (must be "
                              "finite)", i / X->shape[1], i % X->shape[1], X->data[i]);
    *nt = (size_t)X->shape[0];
    return FK_OK;
}

/* A client holds models if its round-1 class list was committed and names a class. */
int fk__kahm_holds_models(const fk_bundle *model, int client)
{
    const fk_tensor *h = fk_bundle_get(model, "holders");
    if (!h || h->ndim != 2 || client < 0 || (uint64_t)client >= h->shape[0])
        return 0;
    const double *row = h->data + (size_t)client * h->shape[1];
    for (uint64_t c = 0; c < h->shape[1]; c++)
        if (row[c] > 0)
            return 1;
    return 0;
}

int fk__kahm_check_answer(const fk_bundle *model, const fk_bundle *queries, const fk_update *ans,
                          fk_err *err)
{
    const fk_tensor *h;
    size_t nt;
    int rc = shapes(model, queries, &h, &nt, err);
    if (rc)
        return rc;
    size_t K = (size_t)h->shape[0], C = (size_t)h->shape[1];
    if (ans->client < 0 || (size_t)ans->client >= K)
        return fk_err_set(err, FK_EINVAL, "kahm answer: client %d is not in the job (%zu clients)",
                          ans->client, K);
    const double *row = h->data + (size_t)ans->client * C;
    if (row[0] < 0)
        return fk_err_set(err, FK_EINVAL, "kahm answer: client %d sent no class list in round 1; "
                          "it holds no models of this job", ans->client);
    size_t m = 0;
    for (size_t c = 0; c < C; c++)
        m += row[c] > 0;
    const fk_tensor *held = fk_bundle_get(&ans->msg, "held"), *D = fk_bundle_get(&ans->msg, "D");
    if (!held || held->ndim != 1 || held->len != m)
        return fk_err_set(err, FK_EINVAL, "kahm answer of client %d: 'held' must list the %zu "
                          "classes it declared in round 1", ans->client, m);
    for (size_t a = 0, c = 0; a < m; a++, c++) {
        while (!(row[c] > 0))
            c++;
        if (held->data[a] != (double)c)
            return fk_err_set(err, FK_EINVAL, "kahm answer of client %d: 'held'[%zu] is not "
                              "class %zu of its round-1 class list", ans->client, a, c);
    }
    if (!D || D->ndim != 2 || D->shape[0] != nt || D->shape[1] != m)
        return fk_err_set(err, FK_EINVAL, "kahm answer of client %d: 'D' must be %zu queries x "
                          "%zu classes", ans->client, nt, m);
    /* +inf is a legitimate distance (a query so far from a class model that exp(-d) underflows;
     * eq. (63) takes the minimum over holders, so it simply loses); NaN and negatives are not */
    for (size_t i = 0; i < D->len; i++)
        if (!(D->data[i] >= 0))
            return fk_err_set(err, FK_EINVAL, "kahm answer of client %d: 'D' row %zu column %zu "
                              "is not a distance (>= 0, or +inf)", ans->client, i / m, i % m);
    return FK_OK;
}

int fk__kahm_combine(const fk_bundle *model, const fk_bundle *queries, const fk_update *ans,
                     int n, fk_bundle *out, fk_err *err)
{
    const fk_tensor *h;
    size_t nt;
    int rc = shapes(model, queries, &h, &nt, err);
    if (rc)
        return rc;
    size_t K = (size_t)h->shape[0], C = (size_t)h->shape[1];
    double *D = malloc((nt ? nt : 1) * C * sizeof(double)), *dmin = malloc((nt ? nt : 1) * 8);
    double *scored = calloc(C, sizeof(double));
    int *lab = malloc((nt ? nt : 1) * sizeof(int));
    unsigned char *seen = calloc(K, 1);
    if (!D || !dmin || !scored || !lab || !seen)
        rc = fk_err_set(err, FK_ENOMEM, "kahm predict: out of memory for %zu queries", nt);
    for (size_t i = 0; !rc && i < nt * C; i++)
        D[i] = INFINITY;
    /* Eq. (63): each class's distance is the minimum over the clients that hold it. */
    for (int u = 0; !rc && u < n; u++) {
        rc = fk__kahm_check_answer(model, queries, &ans[u], err);
        if (!rc && seen[ans[u].client]++)
            rc = fk_err_set(err, FK_EINVAL, "kahm predict: two answers from client %d",
                            ans[u].client);
        if (rc)
            break;
        const fk_tensor *held = fk_bundle_get(&ans[u].msg, "held"),
                        *A = fk_bundle_get(&ans[u].msg, "D");
        size_t m = held->len;
        for (size_t a = 0; a < m; a++) {
            size_t c = (size_t)held->data[a];
            scored[c] = 1;
            for (size_t i = 0; i < nt; i++)
                D[i * C + c] = fmin(D[i * C + c], A->data[i * m + a]);
        }
    }
    /* What could not be scored: classes no answering client holds, holders that were silent. */
    size_t n_un = 0, n_miss = 0;
    for (size_t c = 0; !rc && c < C; c++)
        n_un += scored[c] == 0;
    for (size_t k = 0; !rc && k < K; k++)
        n_miss += !seen[k] && h->data[k * C] >= 0;
    if (!rc) {
        fk_kahm_argmin(D, nt, (int)C, lab, dmin);
        double *l = fk_bundle_add(out, "labels", 1, (uint64_t[]){nt});
        double *un = fk_bundle_add(out, "unscored_classes", 1, (uint64_t[]){n_un});
        double *mi = fk_bundle_add(out, "missing_clients", 1, (uint64_t[]){n_miss});
        if ((nt && !l) || (n_un && !un) || (n_miss && !mi) ||
            fk_bundle_put_vec(out, "distances", nt, dmin) ||
            fk_bundle_put_vec(out, "scored_classes", C, scored))
            rc = fk_err_set(err, FK_ENOMEM, "kahm predict: out of memory");
        for (size_t i = 0; !rc && i < nt; i++)
            l[i] = lab[i];
        for (size_t c = 0, t = 0; !rc && c < C; c++)
            if (scored[c] == 0)
                un[t++] = (double)c;
        for (size_t k = 0, t = 0; !rc && k < K; k++)
            if (!seen[k] && h->data[k * C] >= 0)
                mi[t++] = (double)k;
        if (!rc) /* class ids -> the job's raw labels */
            fk__kahm_label_values(model, l, nt, un, n_un);
    }
    free(D);
    free(dmin);
    free(scored);
    free(lab);
    free(seen);
    return rc;
}
