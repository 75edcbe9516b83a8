#include "bench/mixture/gmm_run.h"

#include <stdlib.h>
#include <string.h>

#include "common/models/mixture/gmm.h"

const char *const fk_gmm_methods[] = {"fedgrem",     "fedem",     "local-em", "local-grem",
                                      "tgmm",        "pooled-em", "pooled-grem", NULL};

void fk_gmm_result_close(fk_gmm_result *res)
{
    free(res->theta);
    free(res->w);
    free(res->sigma);
    *res = (fk_gmm_result){0};
}

FK_CHECKRETURN static int alloc_result(fk_gmm_result *res, int K, int R, int p, int with_sigma, fk_err *err)
{
    *res = (fk_gmm_result){.K = K, .R = R, .p = p};
    res->theta = calloc((size_t)K * R * p, sizeof(double));
    res->w = calloc((size_t)K * R, sizeof(double));
    if (with_sigma)
        res->sigma = calloc((size_t)K * p * p, sizeof(double));
    if (!res->theta || !res->w || (with_sigma && !res->sigma)) {
        fk_gmm_result_close(res);
        return fk_err_set(err, FK_ENOMEM, "out of memory for a K=%d R=%d p=%d result", K, R, p);
    }
    return FK_OK;
}

int fk_gmm_run(const char *method, const fk_params *p, const fk_dataset *tasks, int K, int rounds,
               uint64_t seed, fk_sim_progress progress, void *ctx, fk_gmm_result *res,
               fk_err *err)
{
    *res = (fk_gmm_result){0};
    if (K < 1)
        return fk_err_set(err, FK_EINVAL, "need at least one task");
    const fk_method *m = fk_method_find(method, err);
    if (!m)
        return FK_ENOTFOUND;
    /* a method that ends itself gets its own budget (pooled-em runs until it has converged) */
    fk_sim_opts o = {.rounds = m->max_rounds ? m->max_rounds(p) : rounds, .seed = seed,
                     .progress = progress, .ctx = ctx};
    fk_bundle model;
    int rc = fk_sim_run(m, p, tasks, K, &o, &model, NULL, err);
    if (rc)
        return rc;
    const fk_tensor *th = fk_bundle_get(&model, "theta"), *w = fk_bundle_get(&model, "w");
    const fk_tensor *sg = fk_bundle_get(&model, "sigma");
    const fk_tensor *lam = fk_bundle_get(&model, "lambda"), *ps = fk_bundle_get(&model, "central_passes");
    const fk_tensor *cv = fk_bundle_get(&model, "converged");
    if (!th || th->ndim != 3 || !w)
        rc = fk_err_set(err, FK_EFORMAT, "method %s returned no theta/w model", method);
    else if (cv && cv->data[0] != 1.0)
        rc = fk_err_set(err, FK_ENUMERIC, "method %s did not converge in %d rounds", method,
                        o.rounds);
    if (!rc)
        rc = alloc_result(res, K, (int)th->shape[1], (int)th->shape[2], sg != NULL, err);
    if (!rc) {
        memcpy(res->theta, th->data, th->len * sizeof(double));
        memcpy(res->w, w->data, w->len * sizeof(double));
        if (sg)
            memcpy(res->sigma, sg->data, sg->len * sizeof(double));
        res->lambda = lam ? lam->data[0] : 0.0;
        res->passes = ps ? (int)ps->data[0] : 0;
    }
    fk_bundle_close(&model);
    return rc;
}

int fk_gmm_result_labels(const fk_gmm_result *res, int k, const double *X, size_t n, int *labels,
                         fk_err *err)
{
    size_t Rp = (size_t)res->R * res->p;
    const double *th = res->theta + (size_t)k * Rp, *w = res->w + (size_t)k * res->R;
    if (res->sigma)
        return fk_gmm_predict_eee(X, n, res->p, w, th, res->sigma + (size_t)k * res->p * res->p,
                                  res->R, labels, err);
    fk_gmm_predict(X, n, res->p, w, th, res->R, labels);
    return FK_OK;
}

void fk_gmm_sim_errors(const fk_gmm_result *res, const double *theta_true, const double *w_true,
                       int n_good, double *e_theta, double *e_w)
{
    size_t Rp = (size_t)res->R * res->p;
    double et = 0.0, ew = 0.0;
    for (int k = 0; k < n_good; k++) {
        double a = fk_gmm_err_theta(res->theta + k * Rp, theta_true + k * Rp, res->R, res->p);
        double b = fk_gmm_err_w(res->w + (size_t)k * res->R, w_true + (size_t)k * res->R, res->R);
        et = a > et ? a : et;
        ew = b > ew ? b : ew;
    }
    *e_theta = et;
    *e_w = ew;
}
