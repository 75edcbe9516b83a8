/* Predictions at the server from a kahm job's model (mode A): the global classifier (63)
 * over every uploaded KAHM, on queries preprocessed as the clients preprocessed their data. */
#include "common/methods/kahm/kahm_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fk__kahm_predict(const fk_bundle *model, const fk_bundle *queries, fk_bundle *out,
                     fk_err *err)
{
    const fk_tensor *up = fk_bundle_get(model, "upload"), *h = fk_bundle_get(model, "holders"),
                    *dim = fk_bundle_get(model, "dim"), *prep = fk_bundle_get(model, "prep");
    if (!up || up->len != 1 || !h || h->ndim != 2 || h->shape[1] < 2 ||
        h->shape[1] > 100000 || !dim || dim->len != 1 ||
        !(dim->data[0] >= 1 && dim->data[0] <= FK_KAHM_MAX_DIM) || !prep || prep->len != 2 ||
        !(prep->data[1] > 0 && isfinite(prep->data[1])))
        return fk_err_set(err, FK_EFORMAT, "kahm model: 'upload', 'holders', 'dim' or 'prep' "
                          "missing or malformed");
    if (up->data[0] != 1)
        return fk_err_set(err, FK_ESTATE,
                          "this kahm job kept its models on the clients (upload_models = 0): "
                          "the clients that hold them answer the queries (client_predict), the "
                          "server takes the minimum of their answers (combine_answers)");
    int C = (int)h->shape[1];
    const fk_tensor *X = fk_bundle_get(queries, "X");
    if (!X || X->ndim != 2 || X->shape[1] != (uint64_t)dim->data[0])
        return fk_err_set(err, FK_EINVAL,
                          "queries: need tensor 'X' of n x %g values (the job's data dimension); "
                          "got %s",
                          dim->data[0], !X ? "none" : X->ndim != 2 ? "not a matrix" : "another width");
    size_t nt = X->shape[0], p = X->shape[1];
    if (nt > ((size_t)1 << 32) / (size_t)C)
        return fk_err_set(err, FK_ELIMIT, "queries: %zu rows x %d classes is too many; send fewer",
                          nt, C);
    for (size_t i = 0; i < X->len; i++)
        if (!isfinite(X->data[i]))
            return fk_err_set(err, FK_EINVAL, "queries: row %zu column %zu is %g (must be finite)",
                              i / p, i % p, X->data[i]);
    double *T = malloc((nt ? nt : 1) * p * sizeof(double));
    double *D = malloc((nt ? nt : 1) * (size_t)C * sizeof(double));
    int *lab = malloc((nt ? nt : 1) * sizeof(int));
    double *dmin = malloc((nt ? nt : 1) * sizeof(double));
    double *scored = calloc((size_t)C, sizeof(double));
    int rc = FK_OK;
    if (!T || !D || !lab || !dmin || !scored)
        rc = fk_err_set(err, FK_ENOMEM, "kahm predict: out of memory for %zu queries", nt);
    for (size_t i = 0; !rc && i < nt * p; i++) { /* the clients' preprocessing */
        double v = X->data[i] * prep->data[1];
        T[i] = prep->data[0] != 0 ? tanh(v) : v;
    }
    for (size_t i = 0; !rc && i < nt * (size_t)C; i++)
        D[i] = INFINITY;
    /* Every client whose update was committed; the others contribute +inf (Remark 11). */
    for (uint64_t k = 0; !rc && k < h->shape[0]; k++) {
        if (h->data[k * (uint64_t)C] < 0)
            continue;
        char pre[32];
        snprintf(pre, sizeof pre, "c%llu.", (unsigned long long)k);
        fk_kahm_set s;
        rc = fk__kahm_decode(model, pre, C, (int)p, 1, &s, NULL, err);
        if (!rc) {
            rc = fk_kahm_set_dist(&s, T, nt, p, D, 1, err);
            for (int a = 0; a < s.n; a++)
                scored[s.cls[a].cls] = 1;
            fk_kahm_set_close(&s);
        }
    }
    if (!rc) {
        fk_kahm_argmin(D, nt, C, lab, dmin);
        size_t n_un = 0; /* the classes no uploaded model covers, named as in mode B */
        for (int c = 0; c < C; c++)
            n_un += scored[c] == 0;
        double *l = fk_bundle_add(out, "labels", 1, (uint64_t[]){nt});
        double *un = fk_bundle_add(out, "unscored_classes", 1, (uint64_t[]){n_un});
        if ((nt && !l) || (n_un && !un) || fk_bundle_put_vec(out, "distances", nt, dmin) ||
            fk_bundle_put_vec(out, "scored_classes", (size_t)C, scored))
            rc = fk_err_set(err, FK_ENOMEM, "kahm predict: out of memory");
        for (size_t i = 0; !rc && i < nt; i++)
            l[i] = lab[i];
        for (int c = 0, t = 0; !rc && c < C; c++)
            if (scored[c] == 0)
                un[t++] = c;
        if (!rc) /* class ids -> the job's raw labels */
            fk__kahm_label_values(model, l, nt, un, n_un);
    }
    free(T);
    free(D);
    free(lab);
    free(dmin);
    free(scored);
    return rc;
}
