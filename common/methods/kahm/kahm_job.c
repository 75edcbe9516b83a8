/* Job type kahm: what the ops share: the job configuration (keys read, class values) and
 * the model's raw label values. */
#include "common/methods/kahm/kahm_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/methods/classes.h"

int fk__kahm_job_parse(fk_kahm_job *j, const fk_params *p, uint64_t seed, fk_err *err)
{
    long up, dim, nmax, nb, minc, maxit, tanh_on, rs;
    memset(j, 0, sizeof *j);
    fk_kahm_opts_default(&j->ko);
    int rc = fk_params_int(p, "upload_models", 0, 0, 1, &up, err);
    if (!rc)
        rc = fk_params_int(p, "dim", 0, 0, FK_KAHM_MAX_DIM, &dim, err);
    if (!rc)
        rc = fk_params_int(p, "tanh", 1, 0, 1, &tanh_on, err);
    if (!rc)
        rc = fk_params_double(p, "scale", 1.0, 1e-300, 1e300, &j->scale, err);
    if (!rc)
        rc = fk_params_double(p, "holdout", 0.2, 0.0, 0.9, &j->holdout, err);
    if (!rc)
        rc = fk_params_int(p, "n_max", 20, 1, 10000, &nmax, err);
    if (!rc)
        rc = fk_params_int(p, "nb", 1000, 2, 1000000, &nb, err);
    if (!rc)
        rc = fk_params_int(p, "min_cluster", 30, 2, 1000000, &minc, err);
    if (!rc)
        rc = fk_params_int(p, "lambda_maxit", 100, 1, 100000, &maxit, err);
    if (!rc)
        rc = fk_params_double(p, "lambda_tol", 0.01, 0.0, 1e6, &j->ko.lambda_tol, err);
    if (!rc)
        rc = fk_params_int(p, "kmeans_restarts", 10, 1, 1000, &rs, err);
    const char *lf = fk_params_str(p, "lambda_final", "last-used");
    const char *part = fk_params_str(p, "partition", "round");
    if (!rc && strcmp(lf, "last-used") && strcmp(lf, "converged"))
        rc = fk_err_set(err, FK_EINVAL,
                        "lambda_final must be 'last-used' or 'converged' (got '%s')", lf);
    if (!rc && strcmp(part, "round") && strcmp(part, "ceil"))
        rc = fk_err_set(err, FK_EINVAL, "partition must be 'round' or 'ceil' (got '%s')", part);
    /* class id k is the k-th value of the job's list (a count C: the labels 0..C-1) */
    fk_classes cls = {0};
    if (!rc)
        rc = fk_classes_parse(&cls, p, 10, 100000, FK_CLASSES_COUNT_RANGE, err);
    if (rc)
        return rc;
    int ids = 1;
    for (int k = 0; k < cls.n; k++)
        ids &= cls.v[k] == k;
    j->C = cls.n;
    j->values = ids ? NULL : cls.v;
    if (ids)
        fk_classes_close(&cls);
    j->upload = (int)up;
    j->dim = (int)dim;
    j->tanh = (int)tanh_on;
    j->ko.n_max = (int)nmax;
    j->ko.nb = (int)nb;
    j->ko.min_cluster = (int)minc;
    j->ko.lambda_maxit = (int)maxit;
    j->ko.lambda_converged = !strcmp(lf, "converged");
    j->ko.partition_ceil = !strcmp(part, "ceil");
    j->ko.km_restarts = (int)rs;
    j->ko.seed = seed;
    return FK_OK;
}

void fk__kahm_job_close(fk_kahm_job *j)
{
    free(j->values);
    j->values = NULL;
}

void fk__kahm_label_values(const fk_bundle *model, double *labels, size_t n, double *cls, size_t m)
{
    const fk_tensor *v = fk_bundle_get(model, "class_values");
    const fk_tensor *h = fk_bundle_get(model, "holders");
    if (!v || !h || h->ndim != 2 || v->len != h->shape[1])
        return;
    for (size_t i = 0; i < n; i++)
        if (labels[i] >= 0 && labels[i] < (double)v->len)
            labels[i] = v->data[(size_t)labels[i]];
    for (size_t i = 0; i < m; i++)
        if (cls[i] >= 0 && cls[i] < (double)v->len)
            cls[i] = v->data[(size_t)cls[i]];
}
