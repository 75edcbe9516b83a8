/* Predictions from a dica / udica model: the rows' random features (the job's frequencies,
 * rebuilt from the model's seed and kind), centred by the training mean phi_bar (or by the
 * query batch's own mean with centering = batch, as the clients score), projected on the
 * learned components W and passed through the one-shot ridge predictor Theta (§8.1): the
 * class of the largest output, or the regression value. The numerics are the estimator's
 * (fk_dica_project, fk_dica_ridge_predict). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/blas.h"
#include "common/methods/dica/dica_int.h"
#include "common/methods/predict.h"

/* The model's random features: R, sigma, d, the seed and kind; rf drawn from them (the
 * caller closes it). */
FK_CHECKRETURN static int model_rff(const fk_bundle *model, double *R, double *d, fk_rff *rf,
                                    fk_err *err)
{
    double sigma = 0, orth = 0;
    uint64_t seed;
    int rc = fk_model_scalar(model, "R", 1, 1 << 20, 1, "dica", R, err);
    if (!rc)
        rc = fk_model_scalar(model, "sigma", 1e-300, 1e300, 0, "dica", &sigma, err);
    if (!rc)
        rc = fk_model_scalar(model, "d", 1, 1e9, 1, "dica", d, err);
    if (!rc)
        rc = fk_model_scalar(model, "rff_orthogonal", 0, 1, 1, "dica", &orth, err);
    if (!rc)
        rc = fk_model_get_seed(model, "rff_seed", &seed, err);
    const fk_tensor *W = fk_bundle_get(model, "W");
    if (!rc && (!W || W->ndim != 2 || W->shape[0] != 2 * (uint64_t)*R))
        rc = fk_err_set(err, FK_EFORMAT, "dica model: no components 'W' (2R x m)");
    if (!rc && *R * *d > FK_EXPORT_MAX_VALUES)
        rc = fk_err_set(err, FK_ELIMIT, "dica model: R x d = %g x %g frequencies, more than %d", *R,
                        *d, (int)FK_EXPORT_MAX_VALUES);
    fk__dicaj_cfg c = {.R = (long)*R, .features = orth ? FK_RFF_ORTHOGONAL : FK_RFF_IID};
    return rc ? rc : fk__dicaj_rff(&c, seed, (size_t)*d, sigma, rf, err);
}

int fk__dicaj_predict(const fk_bundle *model, const fk_bundle *queries, fk_bundle *out, fk_err *err)
{
    double R, d, reg, bc, C = 1;
    int rc = fk_model_scalar(model, "regression", 0, 1, 1, "dica", &reg, err);
    if (!rc)
        rc = fk_model_scalar(model, "batch_center", 0, 1, 1, "dica", &bc, err);
    /* "classes": the class count, or (a job with a class list by raw value) the list */
    const fk_tensor *cl = fk_bundle_get(model, "classes");
    if (!rc && !reg && cl && cl->len >= 2 && cl->len <= FK_DICA_MAX_CLASSES)
        C = (double)cl->len;
    else if (!rc && !reg)
        rc = fk_model_scalar(model, "classes", 1, FK_DICA_MAX_CLASSES, 1, "dica", &C, err);
    if (!rc)
        rc = fk_model_scalar(model, "d", 1, 1e9, 1, "dica", &d, err);
    const double *X;
    size_t n;
    if (!rc) /* the rows first: a file of another width gets that error, not a model's */
        rc = fk_predict_rows(queries, (size_t)d, "dica", &X, &n, NULL, err);
    fk_rff rf = {0};
    if (!rc)
        rc = model_rff(model, &R, &d, &rf, err);
    if (rc) {
        fk_rff_close(&rf);
        return rc;
    }
    size_t D = 2 * (size_t)R, k = (size_t)C;
    const fk_tensor *W = fk_bundle_get(model, "W"), *Th = fk_bundle_get(model, "Theta");
    size_t m = W->shape[1]; /* model_rff checked W: 2R x m */
    const fk_tensor *pb = NULL;
    if (m == 0 || m >= D || !Th)
        rc = fk_err_set(err, FK_EFORMAT,
                        "dica model: no components 'W' (D x m) or no "
                        "predictor 'Theta': the job did not finish its ridge phase");
    if (!rc && (!(pb = fk__dicaj_take(model, "phi_bar", D, err)) ||
                !fk__dicaj_take(model, "W", D * m, err) ||
                !fk__dicaj_take(model, "Theta", (m + 1) * k, err)))
        rc = FK_EFORMAT; /* the message names the tensor */
    if (rc) {
        fk_rff_close(&rf);
        return rc;
    }
    fk_mat Phi = {0}, Z = {0};
    fk_mat Xm = fk_mat_view((double *)X, n, (size_t)d, (size_t)d);
    double *center = NULL, *pred = NULL, *lab = NULL, *dist = NULL;
    fk_mat Xs = {0};
    /* the clients map (x - x_mean) / x_scale when the job standardised (its model says so) */
    rc = fk__dicaj_standardize(model, 0, &Xm, &Xs, err);
    if (!rc)
        rc = fk_rff_map(&rf, &Xs, &Phi, err);
    fk_mat_close(&Xs);
    if (!rc && bc) { /* centering = batch: the queries' own mean, as each client centres */
        if (!(center = calloc(D, sizeof *center)))
            rc = fk_err_set(err, FK_ENOMEM, "dica predict: out of memory");
        for (size_t i = 0; !rc && i < n; i++)
            fk_axpy(D, 1.0 / (double)n, fk_mat_row(&Phi, i), center);
    }
    fk_dica_fit f = {.D = D, .m = m, .W = fk_mat_view(W->data, D, m, m), .phi_bar = pb->data};
    if (!rc)
        rc = fk_dica_project(&f, &Phi, center, &Z, err);
    size_t nn = n ? n : 1;
    if (!rc && (!(pred = malloc(nn * k * sizeof *pred)) || !(lab = malloc(nn * sizeof *lab)) ||
                !(dist = malloc(nn * sizeof *dist))))
        rc = fk_err_set(err, FK_ENOMEM, "dica predict: out of memory for %zu rows", n);
    const double *list = fk_model_class_list(model, k);
    if (!rc) {
        fk_dica_ridge_predict(&Z, Th->data, k, pred);
        for (size_t i = 0; i < n; i++) {
            if (reg) {
                lab[i] = pred[i];
                dist[i] = 0;
                continue;
            }
            size_t best = 0;
            for (size_t j = 1; j < k; j++)
                if (pred[i * k + j] > pred[i * k + best])
                    best = j;
            lab[i] = fk_model_class_value(list, (int)best);
            /* one-hot target 1: how far the winning output fell short of it */
            dist[i] = fmax(0.0, 1.0 - pred[i * k + best]);
        }
        rc = fk_predict_put(out, lab, dist, n, "dica", err);
    }
    if (!rc && (reg ? fk_bundle_put_scalar(out, "regression", 1)
                    : fk_bundle_put(out, "scores", 2, (uint64_t[]){n, k}, pred)))
        rc = fk_err_set(err, FK_ENOMEM, "dica predict: out of memory");
    free(center);
    free(pred);
    free(lab);
    free(dist);
    fk_mat_close(&Phi);
    fk_mat_close(&Z);
    fk_rff_close(&rf);
    return rc;
}

int fk__dicaj_export(const fk_bundle *model, fk_bundle *out, fk_err *err)
{
    double R, d;
    fk_rff rf = {0};
    int rc = model_rff(model, &R, &d, &rf, err);
    /* "omega" (R x d): phi(x) = R^-1/2 [cos(omega x); sin(omega x)] */
    double *om = rc ? NULL : fk_bundle_add(out, "omega", 2, (uint64_t[]){rf.N, rf.d});
    if (!rc && !om)
        rc = fk_err_set(err, FK_ENOMEM, "dica export: out of memory");
    for (size_t i = 0; !rc && i < rf.N; i++)
        memcpy(om + i * rf.d, fk_mat_row(&rf.omega, i), rf.d * sizeof(double));
    fk_rff_close(&rf);
    return rc;
}
