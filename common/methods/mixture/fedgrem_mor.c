/* FedGrEM for mixtures of regressions (spec fedgrem.md 1.1 eq. (5), 1.5, 2, 4.3) and its
 * FedEM, Local-EM, Local-GrEM and Pooled-GrEM baselines as method tables: the server is
 * fedgrem_server.c's (it only sees R x p coefficient matrices, weights and, pooled, summed
 * gradients); the client fits y_i = x_i^T theta_r + e with the MoR E-step on residuals, unit
 * noise in the federated steps, and Local-EM (mixreg, per-component noise) as the
 * initialisation, the same single-task code (mor_local.c) the direct simulation fk_mor_run
 * runs. */
#include "common/methods/mixture/fedgrem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/methods/mixture/fedgrem_int.h"
#include "common/models/mixture/mor_local.h"

int fk__fedgrem_check_mor_data(const fk_dataset *data, int client, fk_err *err)
{
    size_t n = data->X.rows, d = data->X.cols;
    if (!data->y_raw || data->y)
        return fk_err_set(err, FK_EINVAL,
                          "client %d (%s): %s; a mixture of regressions needs a numeric target per "
                          "sample (a synthetic/mor: data set, or a catalog data set with a "
                          "regression target such as parkinsons/motor)",
                          client, data->name,
                          data->y ? "the data holds class labels, not a regression target"
                                  : "the data has no regression target y");
    if (n <= d)
        return fk_err_set(err, FK_EINVAL,
                          "client %d (%s) has %zu samples for %zu features; a mixture of "
                          "regressions needs more samples than features",
                          client, data->name, n, d);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(data->y_raw[i]))
            return fk_err_set(err, FK_EINVAL,
                              "client %d (%s): target of sample %zu is NaN or infinite; clean the "
                              "data before the run",
                              client, data->name, i);
    return FK_OK;
}

FK_CHECKRETURN static int mor_cli_init(void **out, const fk_params *p, const fk_dataset *data, int client,
                        int n_clients, uint64_t seed, int variant, fk_err *err)
{
    size_t n = data->X.rows;
    long guard;
    int rc = fk_params_int(p, "step_guard", 0, 0, 0, &guard, err);
    if (rc)
        return fk_err_prefix(err, rc, "the mixture-of-regressions job types have no step guard: ");
    if ((rc = fk__fedgrem_check_mor_data(data, client, err)))
        return rc;
    rc = fk__fedgrem_cli_init(out, p, data, client, n_clients, seed, variant, err);
    if (rc)
        return rc;
    fk__fedgrem_cli *c = *out;
    c->y = data->y_raw;
    rc = fk_mor_ws_open(&c->mws, n, c->p, c->R, err);
    if (rc) {
        fk__fedgrem_cli_close(c);
        *out = NULL;
    }
    return rc;
}

/* The round's quality: RMSE of the fitted regression at (w, th), each sample predicted by the
 * component of highest posterior (unit noise, as the federated steps). The true components
 * are not carried by a data set, so no mis-clustering is measured. Uses the work space's G,
 * which every step recomputes. */
static void score_mor(fk__fedgrem_cli *c, const double *w, const double *th, fk_report *rep)
{
    (void)fk_mor_estep(c->X, c->y, c->n, c->p, w, th, NULL, c->R, c->mws.G, NULL);
    rep->rmse = fk_mor_fit_rmse(c->X, c->y, c->n, c->p, th, c->R, c->mws.G);
}

/* Initialisation phase: Local-EM (mixreg) on this client's data, sent for alignment. */
FK_CHECKRETURN static int mor_local_init(fk__fedgrem_cli *c, fk_bundle *up, fk_report *rep, fk_err *err)
{
    fk_rng rng;
    fk_rng_init(&rng, c->seed, FK_MOR_INIT_STREAM + (uint64_t)c->k);
    int rc = fk_mor_mixreg_fit(c->X, c->y, c->n, c->p, c->R, c->c.restarts, &rng, c->W, c->M,
                               &c->mws, err);
    if (rc)
        return fk_err_prefix(err, rc, "client %d local fit: ", c->k);
    c->fitted = 1;
    score_mor(c, c->W, c->M, rep); /* round 1 scores the local fits */
    rc = fk__fedgrem_put_fit(c, up);
    rep->n_samples = (double)c->n;
    rep->loss = -fk_mor_estep(c->X, c->y, c->n, c->p, c->W, c->M, NULL, c->R, c->mws.G, NULL) /
                (double)c->n;
    return rc ? fk_err_set(err, FK_ENOMEM, "client: out of memory") : FK_OK;
}

FK_CHECKRETURN static int mor_cli_step(void *v, const fk_bundle *task, fk_bundle *up, fk_report *rep,
                        fk_err *err)
{
    fk__fedgrem_cli *c = v;
    const fk_tensor *op = fk_bundle_get(task, "op");
    if (!op || op->len != 1 || !(op->data[0] == 0.0 || op->data[0] == 1.0))
        return fk_err_set(err, FK_EFORMAT, "task lacks 'op' (0 = local fit, 1 = step)");
    if (op->data[0] == 0.0)
        return mor_local_init(c, up, rep, err);
    int R = c->R, p = c->p;
    const fk_tensor *wt = NULL; /* the pooled weights (pooled-grem-mor) */
    int rc = fk__fedgrem_step_task(c, task, &wt, NULL, err); /* theta, permutation */
    if (rc)
        return rc;
    score_mor(c, wt ? wt->data : c->w, c->theta, rep); /* the model the round started from */
    double ll;
    if (c->variant == FK__FEDGREM_V_POOLED_GREM) { /* the server adds the sums and takes the step */
        double nr[R], g[R * p];
        ll = fk_mor_grem_stats(c->X, c->y, c->n, p, R, wt->data, c->theta, nr, g, &c->mws);
        const uint64_t shape[2] = {(uint64_t)R, (uint64_t)p};
        rc = fk_bundle_put_vec(up, "nr", (size_t)R, nr);
        if (!rc)
            rc = fk_bundle_put(up, "sx", 2, shape, g);
        rep->n_samples = (double)c->n;
        rep->loss = -ll / (double)c->n;
        return rc ? fk_err_set(err, FK_ENOMEM, "client: out of memory") : FK_OK;
    }
    if (c->variant == FK__FEDGREM_V_LOCAL_EM) { /* the mixreg fit is final; report it once more */
        ll = fk_mor_estep(c->X, c->y, c->n, p, c->w, c->theta, NULL, R, c->mws.G, NULL);
    } else if (c->variant == FK__FEDGREM_V_FEDGREM || c->variant == FK__FEDGREM_V_LOCAL_GREM) {
        ll = fk_mor_grem_step(c->X, c->y, c->n, p, R, c->eta, c->w, c->theta, &c->mws);
    } else if (fk_mor_em_step(c->X, c->y, c->n, p, R, c->w, c->theta, c->theta, &ll, &c->mws)) {
        return fk_err_set(err, FK_ENUMERIC,
                          "client %d: weighted least squares of a component is singular (the "
                          "component lost its points)",
                          c->k);
    }
    rep->n_samples = (double)c->n;
    rep->loss = -ll / (double)c->n;
    return fk__fedgrem_put_common(c, up) ? fk_err_set(err, FK_ENOMEM, "client: out of memory")
                                        : FK_OK;
}

/* Unit-noise negative log-likelihood per sample of this client's slice of the model. */
FK_CHECKRETURN static int mor_cli_evaluate(void *v, const fk_bundle *model, fk_report *rep, fk_err *err)
{
    fk__fedgrem_cli *c = v;
    const double *tk, *wk;
    int rc = fk__fedgrem_model_slice(c, model, &tk, &wk, err);
    if (rc)
        return rc;
    score_mor(c, wk, tk, rep);
    rep->n_samples = (double)c->n;
    rep->loss =
        -fk_mor_estep(c->X, c->y, c->n, c->p, wk, tk, NULL, c->R, c->mws.G, NULL) / (double)c->n;
    return FK_OK;
}

FK__FEDGREM_INITS(fedgrem_mor, FK__FEDGREM_V_FEDGREM, FK__FEDGREM_MOR, mor_cli_init)
FK__FEDGREM_INITS(fedem_mor, FK__FEDGREM_V_FEDEM, FK__FEDGREM_MOR, mor_cli_init)
FK__FEDGREM_INITS(local_em_mor, FK__FEDGREM_V_LOCAL_EM, FK__FEDGREM_MOR, mor_cli_init)
FK__FEDGREM_INITS(local_grem_mor, FK__FEDGREM_V_LOCAL_GREM, FK__FEDGREM_MOR, mor_cli_init)
FK__FEDGREM_INITS(pooled_grem_mor, FK__FEDGREM_V_POOLED_GREM, FK__FEDGREM_MOR, mor_cli_init)

const fk_method fk_method_fedgrem_mor =
    FK__FEDGREM_TABLE("fedgrem-mor", "FedGrEM for mixtures of regressions (y = x^T theta_z + e)",
                     fedgrem_mor, mor_cli_step, mor_cli_evaluate, fk__mixture_predict_mor);
const fk_method fk_method_fedem_mor = FK__FEDGREM_TABLE(
    "fedem-mor", "federated EM for mixtures of regressions: local WLS, server average", fedem_mor,
    mor_cli_step, mor_cli_evaluate, fk__mixture_predict_mor);
const fk_method fk_method_local_em_mor = FK__FEDGREM_TABLE(
    "local-em-mor", "per-client mixture-of-regressions EM (mixreg; no federation)", local_em_mor,
    mor_cli_step, mor_cli_evaluate, fk__mixture_predict_mor);
const fk_method fk_method_local_grem_mor = FK__FEDGREM_TABLE(
    "local-grem-mor", "per-client mixture-of-regressions gradient EM, step 0.1 (no federation)",
    local_grem_mor, mor_cli_step, mor_cli_evaluate, fk__mixture_predict_mor);
const fk_method fk_method_pooled_grem_mor = FK__FEDGREM_TABLE(
    "pooled-grem-mor",
    "mixture-of-regressions gradient EM on the union of all clients (summed statistics)",
    pooled_grem_mor, mor_cli_step, mor_cli_evaluate, fk__mixture_predict_mor);
