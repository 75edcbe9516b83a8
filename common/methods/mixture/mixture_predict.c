/* Predictions from a mixture job's model, for every job type of the family: the model holds
 * one mixture per client (theta K x R x p, w K x R; a pooled job repeats the one mixture), so
 * the queries name the client whose mixture to use ("client"), or the model must have one
 * mixture only. Gaussian mixtures (identity covariance, or EEE with "sigma" K x p x p): the
 * component of each row (fk_gmm_predict / the EEE posteriors' argmax, as the clients score
 * rounds) and its posterior; mixtures of regressions (noise variances "s2" K x R when the
 * model has them, else 1): the component of each row given its target, and the fitted value
 * (fk_mor_predict). The numerics are the estimators' (common/models/mixture/gmm.c, mor_local.c). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/methods/mixture/fedgrem_int.h"
#include "common/methods/predict.h"
#include "common/models/mixture/gmm.h"

typedef struct mix {
    size_t K, R, p;
    const double *theta, *w, *sigma, *s2; /* this client's slice; sigma, s2 may be NULL */
} mix;

/* The slice of client k (queries' "client"), or the model's only mixture. */
FK_CHECKRETURN static int take_mixture(const fk_bundle *model, const fk_bundle *queries,
                                       const char *who, mix *m, const double **X, size_t *n,
                                       fk_err *err)
{
    const fk_tensor *th = fk_bundle_get(model, "theta"), *w = fk_bundle_get(model, "w"),
                    *sg = fk_bundle_get(model, "sigma"), *s2 = fk_bundle_get(model, "s2");
    if (!th || th->ndim != 3 || !w || w->ndim != 2 || w->shape[0] != th->shape[0] ||
        w->shape[1] != th->shape[1] || th->shape[0] < 1 || th->shape[1] < 1 || th->shape[2] < 1 ||
        th->shape[2] > FK_GMM_MAX_P || !fk__fedgrem_all_bounded(th->data, th->len) ||
        !fk__fedgrem_all_bounded(w->data, w->len))
        return fk_err_set(err, FK_EFORMAT,
                          "%s model: no finite 'theta' (K x R x p) and 'w' "
                          "(K x R); is the job done (job result says)?",
                          who);
    m->K = (size_t)th->shape[0];
    m->R = (size_t)th->shape[1];
    m->p = (size_t)th->shape[2];
    if (sg && (sg->len != m->K * m->p * m->p || !fk__fedgrem_all_bounded(sg->data, sg->len)))
        return fk_err_set(err, FK_EFORMAT, "%s model: 'sigma' is not K x p x p finite values", who);
    if (s2 && s2->len != m->K * m->R)
        return fk_err_set(err, FK_EFORMAT, "%s model: 's2' is not K x R values", who);
    for (size_t i = 0; i < w->len; i++)
        if (w->data[i] < 0)
            return fk_err_set(err, FK_EFORMAT, "%s model: weight %zu is negative", who, i);
    for (size_t i = 0; s2 && i < s2->len; i++)
        if (!(s2->data[i] >= 1e-300) || !isfinite(s2->data[i]))
            return fk_err_set(err, FK_EFORMAT, "%s model: noise variance %zu is %g", who, i,
                              s2->data[i]);
    int k;
    int rc = fk_predict_rows(queries, m->p, who, X, n, NULL, err);
    if (!rc)
        rc = fk_predict_client(queries, (int)m->K, who, &k, err);
    if (rc)
        return rc;
    size_t Rp = m->R * m->p;
    if (k < 0) { /* no client named: fine when every client has the same mixture */
        for (size_t j = 1; j < m->K; j++)
            if (memcmp(th->data, th->data + j * Rp, Rp * sizeof(double)) ||
                memcmp(w->data, w->data + j * m->R, m->R * sizeof(double)))
                return fk_err_set(err, FK_EINVAL,
                                  "%s predict: this job fitted one mixture per "
                                  "client (%zu of them); name the client whose mixture to use "
                                  "(--client N, N in 0..%zu, the order of the job's clients)",
                                  who, m->K, m->K - 1);
        k = 0;
    }
    m->theta = th->data + (size_t)k * Rp;
    m->w = w->data + (size_t)k * m->R;
    m->sigma = sg ? sg->data + (size_t)k * m->p * m->p : NULL;
    m->s2 = s2 ? s2->data + (size_t)k * m->R : NULL;
    return FK_OK;
}

/* -ln of the chosen component's posterior: 0 = certain. */
static double surprise(double g)
{
    return g > 0 ? fmax(0.0, -log(g)) : INFINITY;
}

FK_CHECKRETURN static int answer(fk_bundle *out, const double *lab, const double *dist,
                                 const double *G, size_t n, size_t R, const char *flag,
                                 const char *who, fk_err *err)
{
    int rc = fk_predict_put(out, lab, dist, n, who, err);
    if (!rc && (fk_bundle_put(out, "posterior", 2, (uint64_t[]){n, R}, G) ||
                fk_bundle_put_scalar(out, flag, 1)))
        rc = fk_err_set(err, FK_ENOMEM, "%s predict: out of memory", who);
    return rc;
}

FK_CHECKRETURN static int predict_gmm(const char *who, const fk_bundle *model,
                                      const fk_bundle *queries, fk_bundle *out, fk_err *err)
{
    mix m;
    size_t n;
    const double *X;
    int rc = take_mixture(model, queries, who, &m, &X, &n, err);
    if (rc)
        return rc;
    size_t nn = n ? n : 1, R = m.R, p = m.p;
    double *G = malloc(nn * R * sizeof *G), *lab = malloc(nn * sizeof *lab),
           *dist = malloc(nn * sizeof *dist);
    int *comp = malloc(nn * sizeof *comp);
    double *sg = m.sigma ? malloc(p * p * sizeof *sg) : NULL, *chol = NULL, *Z = NULL, *mt = NULL;
    if (m.sigma && sg) {
        chol = malloc(p * p * sizeof *chol);
        Z = malloc(nn * p * sizeof *Z);
        mt = malloc(R * p * sizeof *mt);
    }
    if (!G || !lab || !dist || !comp || (m.sigma && (!sg || !chol || !Z || !mt)))
        rc = fk_err_set(err, FK_ENOMEM, "%s predict: out of memory for %zu rows", who, n);
    if (!rc && m.sigma) { /* EEE: one full covariance (local-em, pooled-em) */
        memcpy(sg, m.sigma, p * p * sizeof *sg);
        if (fk_gmm_eee_chol(sg, (int)p, chol, NULL))
            rc = fk_err_set(err, FK_EFORMAT, "%s model: the covariance is not positive definite",
                            who);
        if (!rc) {
            (void)fk_gmm_eee_estep(X, n, (int)p, m.w, m.theta, chol, (int)R, G, Z, mt);
            fk_report_argmax(G, n, (int)R, 0, comp);
        }
    } else if (!rc) { /* identity covariance: the clients' labels and posteriors */
        fk_gmm_predict(X, n, (int)p, m.w, m.theta, (int)R, comp);
        (void)fk_gmm_estep(X, n, (int)p, NULL, m.w, m.theta, (int)R, G);
    }
    for (size_t i = 0; !rc && i < n; i++) {
        lab[i] = comp[i];
        dist[i] = surprise(G[i * R + (size_t)comp[i]]);
    }
    if (!rc)
        rc = answer(out, lab, dist, G, n, R, "clustering", who, err);
    free(G);
    free(lab);
    free(dist);
    free(comp);
    free(sg);
    free(chol);
    free(Z);
    free(mt);
    return rc;
}

FK_CHECKRETURN static int predict_mor(const char *who, const fk_bundle *model,
                                      const fk_bundle *queries, fk_bundle *out, fk_err *err)
{
    mix m;
    size_t n;
    const double *X, *y;
    int rc = take_mixture(model, queries, who, &m, &X, &n, err);
    if (!rc)
        rc = fk_predict_targets(queries, n, who, &y, err);
    if (rc)
        return rc;
    size_t nn = n ? n : 1, R = m.R;
    double *G = malloc(nn * R * sizeof *G), *val = malloc(nn * sizeof *val),
           *dist = malloc(nn * sizeof *dist), *cd = malloc(nn * sizeof *cd);
    int *comp = malloc(nn * sizeof *comp);
    if (!G || !val || !dist || !cd || !comp)
        rc = fk_err_set(err, FK_ENOMEM, "%s predict: out of memory for %zu rows", who, n);
    if (!rc) {
        fk_mor_predict(X, y, n, (int)m.p, m.w, m.theta, m.s2, (int)R, G, comp, val);
        for (size_t i = 0; i < n; i++) {
            dist[i] = surprise(G[i * R + (size_t)comp[i]]);
            cd[i] = comp[i];
        }
        rc = answer(out, val, dist, G, n, R, "regression", who, err);
    }
    if (!rc && fk_bundle_put_vec(out, "component", n, cd))
        rc = fk_err_set(err, FK_ENOMEM, "%s predict: out of memory", who);
    free(G);
    free(val);
    free(dist);
    free(cd);
    free(comp);
    return rc;
}

int fk__mixture_predict_gmm(const fk_bundle *model, const fk_bundle *queries, fk_bundle *out,
                            fk_err *err)
{
    return predict_gmm("mixture", model, queries, out, err);
}

int fk__mixture_predict_mor(const fk_bundle *model, const fk_bundle *queries, fk_bundle *out,
                            fk_err *err)
{
    return predict_mor("mixture-of-regressions", model, queries, out, err);
}
