/* Shared pieces of the predict ops (predict.h). */
#include "common/methods/predict.h"

#include <math.h>
#include <stdlib.h>

int fk_predict_rows(const fk_bundle *queries, size_t p, const char *who, const double **X,
                    size_t *n, size_t *cols, fk_err *err)
{
    const fk_tensor *t = fk_bundle_get(queries, "X");
    if (!t || t->ndim != 2)
        return fk_err_set(err, FK_EINVAL,
                          "%s predict: the queries need a matrix 'X' (one row "
                          "per sample)",
                          who);
    if (p && t->shape[1] != p)
        return fk_err_set(err, FK_EINVAL,
                          "%s predict: the rows have %llu columns but the model "
                          "was trained on %zu features; give the file with the job's columns "
                          "(and its label column marked, e.g. --label first|last|none)",
                          who, (unsigned long long)t->shape[1], p);
    if (t->shape[0] > FK_PREDICT_MAX_ROWS)
        return fk_err_set(err, FK_ELIMIT,
                          "%s predict: %llu rows, at most %d per call; split "
                          "the file",
                          who, (unsigned long long)t->shape[0], (int)FK_PREDICT_MAX_ROWS);
    size_t c = (size_t)t->shape[1];
    for (size_t i = 0; i < t->len; i++)
        if (!isfinite(t->data[i]))
            return fk_err_set(err, FK_EINVAL,
                              "%s predict: row %zu column %zu is %g (every "
                              "value must be finite)",
                              who, i / c, i % c, t->data[i]);
    *X = t->data;
    *n = (size_t)t->shape[0];
    if (cols)
        *cols = c;
    return FK_OK;
}

int fk_predict_targets(const fk_bundle *queries, size_t n, const char *who, const double **y,
                       fk_err *err)
{
    const fk_tensor *t = fk_bundle_get(queries, "y");
    *y = NULL;
    if (!t)
        return FK_OK;
    if (t->len != n)
        return fk_err_set(err, FK_EINVAL, "%s predict: 'y' has %zu targets for %zu rows", who,
                          t->len, n);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(t->data[i]))
            return fk_err_set(err, FK_EINVAL,
                              "%s predict: target of row %zu is %g (must be "
                              "finite)",
                              who, i, t->data[i]);
    *y = t->data;
    return FK_OK;
}

int fk_predict_client(const fk_bundle *queries, int K, const char *who, int *k, fk_err *err)
{
    const fk_tensor *t = fk_bundle_get(queries, "client");
    *k = -1;
    if (!t)
        return FK_OK;
    if (t->len != 1 || !(t->data[0] >= 0 && t->data[0] < K) || t->data[0] != floor(t->data[0]))
        return fk_err_set(err, FK_EINVAL,
                          "%s predict: client %g is not one of the job's %d "
                          "clients (0..%d)",
                          who, t->len == 1 ? t->data[0] : NAN, K, K - 1);
    *k = (int)t->data[0];
    return FK_OK;
}

int fk_model_put_seed(fk_bundle *b, const char *name, uint64_t seed)
{
    double v[2] = {(double)(seed >> 32), (double)(seed & 0xffffffffu)};
    return fk_bundle_put_vec(b, name, 2, v);
}

int fk_model_get_seed(const fk_bundle *b, const char *name, uint64_t *seed, fk_err *err)
{
    const fk_tensor *t = fk_bundle_get(b, name);
    for (size_t i = 0; t && t->len == 2 && i < 2; i++)
        if (!(t->data[i] >= 0 && t->data[i] <= 4294967295.0) || t->data[i] != floor(t->data[i]))
            t = NULL;
    if (!t || t->len != 2)
        return fk_err_set(err, FK_EFORMAT,
                          "model: no seed '%s' (two 32-bit halves): a model written before "
                          "models carried it cannot rebuild its random features; train again",
                          name);
    *seed = ((uint64_t)t->data[0] << 32) | (uint64_t)t->data[1];
    return FK_OK;
}

int fk_model_scalar(const fk_bundle *b, const char *name, double lo, double hi, int integral,
                    const char *who, double *v, fk_err *err)
{
    const fk_tensor *t = fk_bundle_get(b, name);
    if (!t || t->len != 1 || !(t->data[0] >= lo && t->data[0] <= hi) ||
        (integral && t->data[0] != floor(t->data[0])))
        return fk_err_set(err, FK_EFORMAT, "%s model: no %s '%s' in [%g, %g]", who,
                          integral ? "whole number" : "scalar", name, lo, hi);
    *v = t->data[0];
    return FK_OK;
}

const double *fk_model_class_list(const fk_bundle *model, size_t k)
{
    /* "class_values" where a job type keeps its class count in "classes" (dica, kahm,
     * fedrf-tca); sfl's "classes" is the list itself */
    const fk_tensor *t = fk_bundle_get(model, "class_values");
    if (!t)
        t = fk_bundle_get(model, "classes");
    if (!t || k < 2 || t->ndim != 1 || t->len != k)
        return NULL;
    for (size_t i = 0; i < k; i++)
        if (!isfinite(t->data[i]) || (i && !(t->data[i] > t->data[i - 1])))
            return NULL;
    return t->data;
}

double fk_model_class_value(const double *list, int c)
{
    return list ? list[c] : (double)c;
}

int fk_predict_put(fk_bundle *out, const double *labels, const double *dist, size_t n,
                   const char *who, fk_err *err)
{
    if (fk_bundle_put_vec(out, "labels", n, labels) || fk_bundle_put_vec(out, "distances", n, dist))
        return fk_err_set(err, FK_ENOMEM, "%s predict: out of memory for %zu answers", who, n);
    return FK_OK;
}

int fk_predict_score(const fk_bundle *res, const fk_dataset *ds, fk_report *r, fk_err *err)
{
    fk_report_init(r);
    size_t n = ds->X.rows;
    const fk_tensor *lab = fk_bundle_get(res, "labels");
    if (!lab || lab->len != n)
        return fk_err_set(err, FK_EINVAL, "predict: the answer has %zu labels for %zu rows",
                          lab ? lab->len : (size_t)0, n);
    const fk_tensor *reg = fk_bundle_get(res, "regression"),
                    *clu = fk_bundle_get(res, "clustering"), *rest = fk_bundle_get(res, "rest_of");
    r->n_samples = (double)n;
    if (reg && reg->len == 1 && reg->data[0] == 1) {
        if (!ds->y_raw)
            return fk_err_set(err, FK_EINVAL,
                              "predict: the file holds no targets to score the "
                              "regression against (see --label)");
        double se = 0;
        for (size_t i = 0; i < n; i++)
            se += (lab->data[i] - ds->y_raw[i]) * (lab->data[i] - ds->y_raw[i]);
        r->rmse = n ? sqrt(se / (double)n) : NAN;
        return FK_OK;
    }
    if (!ds->y)
        return fk_err_set(err, FK_EINVAL,
                          "predict: the file holds no labels to score against "
                          "(see --label)");
    size_t hit = 0;
    for (size_t i = 0; i < n; i++) { /* a data set without a raw class list: index = value */
        double t = ds->classes ? ds->classes[ds->y[i]] : ds->y[i], l = lab->data[i];
        hit += rest && rest->len == 1 && isnan(l) ? t != rest->data[0] : l == t;
    }
    r->accuracy = n ? (double)hit / (double)n : NAN;
    r->error = n ? 1 - r->accuracy : NAN;
    if (!n)
        return FK_OK;
    int clustering = clu && clu->len == 1 && clu->data[0] == 1;
    /* Cluster ids: a clustering's own ids in [0, R) (R from the posteriors when given, else
     * the largest id + 1); a classifier's raw labels numbered in order of appearance, so its
     * predictions are also scored as a partition (misclust, ari), as `model eval` always has. */
    const fk_tensor *post = fk_bundle_get(res, "posterior");
    int *pred = malloc(n * sizeof *pred),
        R = post && post->ndim == 2 && post->shape[1] < 1000000 ? (int)post->shape[1] : 1;
    double *seen = clustering ? NULL : malloc(n * sizeof *seen);
    if (!pred || (!clustering && !seen)) {
        free(pred);
        free(seen);
        return fk_err_set(err, FK_ENOMEM, "predict: out of memory scoring %zu rows", n);
    }
    int k = 0; /* distinct raw labels seen (classifier) */
    for (size_t i = 0; i < n; i++) {
        double l = lab->data[i];
        if (clustering) {
            pred[i] = l >= 0 && l < 1e6 && l == floor(l) ? (int)l : 0;
            R = pred[i] + 1 > R ? pred[i] + 1 : R;
            continue;
        }
        int j = 0; /* NaN ("rest") is one more group */
        while (j < k && !(seen[j] == l || (isnan(seen[j]) && isnan(l))))
            j++;
        if (j == k)
            seen[k++] = l;
        pred[i] = j;
    }
    if (!clustering)
        R = k;
    free(seen);
    double acc = r->accuracy, e = r->error;
    int rc = fk_report_score_clusters(r, ds->y, pred, n, ds->n_classes, R, err);
    free(pred);
    if (!clustering) { /* a classifier keeps the accuracy of its raw labels */
        r->accuracy = acc;
        r->error = e;
    }
    return rc;
}
