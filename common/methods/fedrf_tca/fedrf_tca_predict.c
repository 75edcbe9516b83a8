/* Predictions from a fedrf-tca model, as the target client scores it (spec §2): each row
 * L2-normalized, mapped with the job's random features (Omega rebuilt from the model's seed,
 * kind, width and input dimension), projected with W and normalized (fk_rftca_project_norm),
 * then the averaged classifier C, or with voting the majority of the clients' classifiers
 * (ties to the smaller class). The model's "use_sel" / "use_avg" flags (what `fedkern sim`
 * sets to score the selected or tail-averaged model) pick W_sel / W_avg as the client does.
 * A job with the dense extractor cannot predict from its model: the extractor stays on the
 * clients. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/methods/fedrf_tca/fedrf_tca_int.h"
#include "common/methods/predict.h"
#include "common/models/fedrf_tca/rftca.h"
#include "common/models/fedrf_tca/tca.h"

typedef struct rfmodel {
    fk_rff rff;
    fk_mlp net;
    size_t m, D, PC, k; /* k classifiers (voting), else 1 */
    const double *W, *C;
    double eps;
    int voting;
} rfmodel;

FK_CHECKRETURN static int take_model(const fk_bundle *model, size_t cols, rfmodel *r, fk_err *err)
{
    double dense, orth, sigma, d, eps, C;
    uint64_t seed;
    int rc = fk_model_get_seed(model, "rff_seed", &seed, err);
    if (!rc)
        rc = fk_model_scalar(model, "dense", 0, 1, 1, "fedrf-tca", &dense, err);
    if (!rc && dense)
        rc = fk_err_set(err, FK_EINVAL,
                        "fedrf-tca predict: this job trained the dense "
                        "extractor (dense = 1), whose weights stay on the clients (the model "
                        "holds only the classifier on its output); its model cannot predict on "
                        "its own. Train with dense = 0 (the random-feature extractor, which "
                        "the model carries) for a model that predicts anywhere; the target "
                        "client's own accuracy is in 'fedkern job status ID' (per client)");
    if (!rc)
        rc = fk_model_scalar(model, "rff_orthogonal", 0, 1, 1, "fedrf-tca", &orth, err);
    if (!rc)
        rc = fk_model_scalar(model, "sigma", 1e-300, 1e300, 0, "fedrf-tca", &sigma, err);
    if (!rc)
        rc = fk_model_scalar(model, "d", 0, 1e9, 1, "fedrf-tca", &d, err);
    if (!rc)
        rc = fk_model_scalar(model, "eps", 0, 1e300, 0, "fedrf-tca", &eps, err);
    if (!rc)
        rc = fk_model_scalar(model, "n_classes", 2, 100000, 1, "fedrf-tca", &C, err);
    if (rc)
        return rc;
    if (d > 0 && (size_t)d != cols)
        return fk_err_set(err, FK_EINVAL,
                          "fedrf-tca predict: the rows have %zu columns but the "
                          "model was trained on %g features; give the file with the job's "
                          "columns (and its label column marked, e.g. --label first|last|none)",
                          cols, d);
    int sel = fk__fedrf_scalar(model, "use_sel", 0) != 0,
        avg = fk__fedrf_scalar(model, "use_avg", 0) != 0;
    const fk_tensor *W = fk_bundle_get(model, sel   ? "W_sel"
                                              : avg ? "W_avg"
                                                    : "W"),
                    *h = fk_bundle_get(model, "hidden");
    if (!W || W->ndim != 2 || W->shape[0] < 2 || W->shape[0] % 2 || W->shape[1] < 1)
        return fk_err_set(err, FK_EFORMAT,
                          "fedrf-tca model: no extractor W (2N x m); did the "
                          "job finish a round?");
    size_t hid[FK_MLP_MAX_HIDDEN];
    if (!h || h->len > FK_MLP_MAX_HIDDEN)
        return fk_err_set(err, FK_EFORMAT, "fedrf-tca model: no classifier layout 'hidden'");
    for (size_t i = 0; i < h->len; i++) {
        if (!(h->data[i] >= 1 && h->data[i] <= 1e6))
            return fk_err_set(err, FK_EFORMAT, "fedrf-tca model: hidden layer %zu has %g units", i,
                              h->data[i]);
        hid[i] = (size_t)h->data[i];
    }
    r->m = (size_t)W->shape[1];
    r->D = (size_t)W->shape[0];
    r->eps = eps;
    r->W = W->data;
    if ((rc = fk_mlp_layout(&r->net, r->m, hid, (int)h->len, (size_t)C, err)))
        return rc;
    r->PC = r->net.n_params;
    const fk_tensor *V = sel && fk_bundle_get(model, "votes_sel")
                             ? fk_bundle_get(model, "votes_sel")
                             : fk_bundle_get(model, "votes"),
                    *Cm = fk_bundle_get(model, sel   ? "C_sel"
                                               : avg ? "C_avg"
                                                     : "C");
    if (V) {
        if (V->ndim != 2 || V->shape[1] != r->PC || V->shape[0] < 1)
            return fk_err_set(err, FK_EFORMAT, "fedrf-tca model: votes must be k x %zu", r->PC);
        r->voting = 1;
        r->k = (size_t)V->shape[0];
        r->C = V->data;
    } else {
        if (!Cm || Cm->len != r->PC)
            return fk_err_set(err, FK_EFORMAT, "fedrf-tca model: no classifier C of %zu values",
                              r->PC);
        r->k = 1;
        r->C = Cm->data;
    }
    for (size_t i = 0; i < W->len; i++)
        if (!isfinite(W->data[i]))
            return fk_err_set(err, FK_EFORMAT, "fedrf-tca model: W value %zu is not finite", i);
    for (size_t i = 0; i < r->k * r->PC; i++)
        if (!isfinite(r->C[i]))
            return fk_err_set(err, FK_EFORMAT,
                              "fedrf-tca model: classifier value %zu is not "
                              "finite",
                              i);
    return fk_rff_init_kind(&r->rff, seed, cols, r->D / 2, sigma,
                            orth ? FK_RFF_ORTHOGONAL : FK_RFF_IID, err);
}

int fk__fedrf_vote(const fk_mlp *net, const double *votes, size_t k, const fk_mat *F, int *one,
                   int *tally, int *pred, fk_err *err)
{
    size_t b = F->rows, C = net->sizes[net->n_layers];
    memset(tally, 0, b * C * sizeof *tally);
    int rc = FK_OK;
    for (size_t v = 0; v < k && !rc; v++) {
        rc = fk_mlp_predict(net, votes + v * net->n_params, F, one, err);
        for (size_t i = 0; i < b && !rc; i++)
            tally[i * C + (size_t)one[i]]++;
    }
    for (size_t i = 0; !rc && i < b; i++) {
        int best = 0; /* majority, ties to the smallest class */
        for (size_t q = 1; q < C; q++)
            if (tally[i * C + q] > tally[i * C + (size_t)best])
                best = (int)q;
        pred[i] = best;
    }
    return rc;
}

/* Class of every row (and, voting, the share of classifiers that voted for it). */
FK_CHECKRETURN static int classify(const rfmodel *r, const double *X, size_t n, size_t p, int *pred,
                                   double *agree, fk_err *err)
{
    size_t C = r->net.sizes[r->net.n_layers],
           chunk = C > 4096 ? 16 : 256; /* the tally is chunk x C */
    fk_mat Xc = {0}, Phi = {0}, U = {0}, F = {0};
    int *one = malloc(chunk * sizeof *one), *tally = malloc(chunk * C * sizeof *tally);
    double *norms = malloc(chunk * sizeof *norms);
    int rc = one && tally && norms && !fk_mat_init(&Xc, chunk, p) &&
                     !fk_mat_init(&U, chunk, r->m) && !fk_mat_init(&F, chunk, r->m)
                 ? FK_OK
                 : fk_err_set(err, FK_ENOMEM, "fedrf-tca predict: out of memory");
    for (size_t r0 = 0; !rc && r0 < n; r0 += chunk) {
        size_t b = n - r0 < chunk ? n - r0 : chunk;
        fk_mat Xb = fk_mat_rows(&Xc, 0, b), Ub = fk_mat_rows(&U, 0, b), Fb = fk_mat_rows(&F, 0, b);
        for (size_t i = 0; i < b; i++)
            memcpy(fk_mat_row(&Xb, i), X + (r0 + i) * p, p * sizeof(double));
        fk_rows_l2_normalize(&Xb); /* the clients' P-L2 normalization */
        if ((rc = fk_rff_map(&r->rff, &Xb, &Phi, err)))
            break;
        fk_rftca_project_norm(&Phi, r->W, r->m, r->eps, &Ub, &Fb, norms);
        fk_mat_close(&Phi);
        rc = fk__fedrf_vote(&r->net, r->C, r->k, &Fb, one, tally, pred + r0, err);
        for (size_t i = 0; !rc && i < b; i++)
            agree[r0 + i] = (double)tally[i * C + (size_t)pred[r0 + i]] / (double)r->k;
    }
    fk_mat_close(&Xc);
    fk_mat_close(&U);
    fk_mat_close(&F);
    free(one);
    free(tally);
    free(norms);
    return rc;
}

int fk__fedrf_predict(const fk_bundle *model, const fk_bundle *queries, fk_bundle *out, fk_err *err)
{
    const double *X;
    size_t n, p;
    int rc = fk_predict_rows(queries, 0, "fedrf-tca", &X, &n, &p, err);
    if (rc)
        return rc;
    rfmodel r;
    memset(&r, 0, sizeof r);
    if ((rc = take_model(model, p, &r, err))) {
        fk_rff_close(&r.rff);
        return rc;
    }
    size_t nn = n ? n : 1, C = r.net.sizes[r.net.n_layers];
    int *pred = malloc(nn * sizeof *pred);
    double *lab = malloc(nn * sizeof *lab), *dist = malloc(nn * sizeof *dist);
    if (!pred || !lab || !dist)
        rc = fk_err_set(err, FK_ENOMEM, "fedrf-tca predict: out of memory for %zu rows", n);
    if (!rc)
        rc = classify(&r, X, n, p, pred, dist, err);
    const double *list = fk_model_class_list(model, C);
    for (size_t i = 0; !rc && i < n; i++) {
        lab[i] = fk_model_class_value(list, pred[i]);
        dist[i] = 1.0 - dist[i]; /* the share of the classifiers that voted otherwise */
    }
    if (!rc)
        rc = fk_predict_put(out, lab, dist, n, "fedrf-tca", err);
    free(pred);
    free(lab);
    free(dist);
    fk_rff_close(&r.rff);
    return rc;
}

int fk__fedrf_export(const fk_bundle *model, fk_bundle *out, fk_err *err)
{
    double d, orth, sigma;
    uint64_t seed;
    const fk_tensor *W = fk_bundle_get(model, "W");
    int rc = fk_model_get_seed(model, "rff_seed", &seed, err);
    if (!rc)
        rc = fk_model_scalar(model, "d", 1, 1e9, 1, "fedrf-tca", &d, err);
    if (!rc)
        rc = fk_model_scalar(model, "rff_orthogonal", 0, 1, 1, "fedrf-tca", &orth, err);
    if (!rc)
        rc = fk_model_scalar(model, "sigma", 1e-300, 1e300, 0, "fedrf-tca", &sigma, err);
    if (!rc && (!W || W->ndim != 2 || W->shape[0] < 2 || W->shape[0] % 2))
        rc = fk_err_set(err, FK_EFORMAT, "fedrf-tca model: no extractor W (2N x m)");
    if (!rc && (double)(W->shape[0] / 2) * d > FK_EXPORT_MAX_VALUES)
        rc = fk_err_set(err, FK_ELIMIT,
                        "fedrf-tca export: N x d = %llu x %g frequencies, more "
                        "than %d",
                        (unsigned long long)(W->shape[0] / 2), d, (int)FK_EXPORT_MAX_VALUES);
    if (rc)
        return rc;
    fk_rff rf = {0};
    rc = fk_rff_init_kind(&rf, seed, (size_t)d, (size_t)W->shape[0] / 2, sigma,
                          orth ? FK_RFF_ORTHOGONAL : FK_RFF_IID, err);
    /* "omega" (N x d): phi(x) = N^-1/2 [cos(omega x); sin(omega x)] of the L2-normalized row */
    double *om = rc ? NULL : fk_bundle_add(out, "omega", 2, (uint64_t[]){rf.N, rf.d});
    if (!rc && !om)
        rc = fk_err_set(err, FK_ENOMEM, "fedrf-tca export: out of memory");
    for (size_t i = 0; !rc && i < rf.N; i++)
        memcpy(om + i * rf.d, fk_mat_row(&rf.omega, i), rf.d * sizeof(double));
    fk_rff_close(&rf);
    return rc;
}
