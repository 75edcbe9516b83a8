/* Predictions from an sfl model (spec §3.8 discrete model): f(x) = sum_k c_k k(x, s_k; w_k) on
 * the rows preprocessed as the clients preprocessed theirs; binary: the sign's raw label
 * (sign(0) := +1), one-vs-one: the majority vote of the pair problems (spec §6.6), regression:
 * f itself. What the model must hold is read and checked here; the kernels by
 * fk__sfl_model_read. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/methods/predict.h"
#include "common/methods/sfl/sfl_int.h"

/* The rows with the model's x <- (x - shift) / scale applied (none: a copy). */
FK_CHECKRETURN static int preprocess(const fk_bundle *model, const double *X, size_t n, size_t p,
                                     double **Xp, fk_err *err)
{
    const fk_tensor *sh = fk_bundle_get(model, "x_shift"), *sc = fk_bundle_get(model, "x_scale");
    if ((sh == NULL) != (sc == NULL) ||
        (sh && (sh->len != sc->len || (sh->len != 1 && sh->len != p))))
        return fk_err_set(err, FK_EFORMAT,
                          "sfl model: 'x_shift' and 'x_scale' must come "
                          "together with 1 or p = %zu values each",
                          p);
    for (size_t k = 0; sc && k < sc->len; k++)
        if (!(sc->data[k] > 0) || !isfinite(sh->data[k]) || !isfinite(sc->data[k]))
            return fk_err_set(err, FK_EFORMAT,
                              "sfl model: preprocessing value %zu is shift %g "
                              "scale %g",
                              k, sh->data[k], sc->data[k]);
    *Xp = malloc((n ? n : 1) * p * sizeof **Xp);
    if (!*Xp)
        return fk_err_set(err, FK_ENOMEM, "sfl predict: out of memory for %zu rows", n);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < p; k++) {
            size_t j = sh && sh->len > 1 ? k : 0;
            double v = X[i * p + k];
            (*Xp)[i * p + k] = sh ? (v - sh->data[j]) / sc->data[j] : v;
        }
    return FK_OK;
}

FK_CHECKRETURN static int ovo(const fk_bundle *model, const fk_sfl_model *m, const double *X,
                              size_t n, double *lab, double *dist, fk_err *err)
{
    const fk_tensor *mk = fk_bundle_get(model, "mK"), *cl = fk_bundle_get(model, "classes");
    int C = cl && cl->ndim == 1 && cl->len >= 3 && cl->len <= 4096 ? (int)cl->len : 0;
    double tot = 0;
    for (size_t q = 0; mk && q < mk->len; q++)
        tot += mk->data[q] >= 0 && mk->data[q] == floor(mk->data[q]) ? mk->data[q] : NAN;
    if (!C || !fk_model_class_list(model, (size_t)C) || !mk ||
        mk->len != (size_t)fk__sfl_ovo_pairs(C) || tot != (double)m->K)
        return fk_err_set(err, FK_EFORMAT,
                          "sfl model: one-vs-one needs 'classes' (the raw "
                          "labels, ascending) and 'mK' (kernels per pair, summing to K)");
    size_t nn = n ? n : 1;
    int *votes = malloc(nn * (size_t)C * sizeof *votes), *pred = malloc(nn * sizeof *pred);
    double *mg = malloc(nn * (size_t)C * sizeof *mg), *f = malloc(nn * sizeof *f);
    int rc =
        votes && pred && mg && f ? FK_OK : fk_err_set(err, FK_ENOMEM, "sfl predict: out of memory");
    if (!rc) {
        fk__sfl_ovo_vote(m, mk->data, C, X, n, f, votes, mg, pred);
        int P = fk__sfl_ovo_pairs(C);
        for (size_t i = 0; i < n; i++) {
            lab[i] = cl->data[pred[i]];
            /* the share of the pair problems the winner lost or did not play */
            dist[i] = 1.0 - (double)votes[i * (size_t)C + (size_t)pred[i]] / (double)P;
        }
    }
    free(votes);
    free(pred);
    free(mg);
    free(f);
    return rc;
}

int fk__sfl_predict(const fk_bundle *model, const fk_bundle *queries, fk_bundle *out, fk_err *err)
{
    double mode, pp;
    int rc = fk_model_scalar(model, "mode", 0, 1, 1, "sfl", &mode, err);
    if (!rc)
        rc = fk_model_scalar(model, "p", 1, 1e6, 1, "sfl", &pp, err);
    if (rc)
        return rc;
    size_t p = (size_t)pp, n;
    const double *X;
    if ((rc = fk_predict_rows(queries, p, "sfl", &X, &n, NULL, err)))
        return rc;
    int is_ovo = fk_bundle_get(model, "mK") != NULL;
    double pos = 0, neg = NAN, rest = 0;
    if (mode == FK_SFL_CLASSIFY && !is_ovo &&
        ((rc = fk_model_scalar(model, "pos_label", -1e300, 1e300, 0, "sfl", &pos, err)) ||
         (!fk_bundle_get(model, "neg_rest") &&
          (rc = fk_model_scalar(model, "neg_label", -1e300, 1e300, 0, "sfl", &neg, err))))) {
        return fk_err_set(err, FK_EFORMAT,
                          "sfl model: no raw labels ('pos_label' with "
                          "'neg_label' or 'neg_rest'): a model written before models carried "
                          "them; train again");
    }
    rest = fk_bundle_get(model, "neg_rest") != NULL;
    fk_sfl_model m;
    if ((rc = fk__sfl_model_read(model, (int)p, &m, err)))
        return rc;
    double *Xp = NULL, *lab = malloc((n ? n : 1) * sizeof *lab),
           *dist = malloc((n ? n : 1) * sizeof *dist);
    if (!lab || !dist)
        rc = fk_err_set(err, FK_ENOMEM, "sfl predict: out of memory for %zu rows", n);
    if (!rc)
        rc = preprocess(model, X, n, p, &Xp, err);
    if (!rc && is_ovo) {
        rc = ovo(model, &m, Xp, n, lab, dist, err);
    } else if (!rc) {
        fk_sfl_predict(&m, Xp, n, lab); /* f(x) */
        for (size_t i = 0; mode == FK_SFL_CLASSIFY && i < n; i++) {
            double f = lab[i];
            lab[i] = f >= 0 ? pos : neg; /* sign(0) := +1, as the job scores */
            dist[i] = exp(-fabs(f));     /* margin |f| mapped to (0, 1]: 1 = on the boundary */
        }
        for (size_t i = 0; mode != FK_SFL_CLASSIFY && i < n; i++)
            dist[i] = 0;
    }
    if (!rc)
        rc = fk_predict_put(out, lab, dist, n, "sfl", err);
    if (!rc && mode != FK_SFL_CLASSIFY && fk_bundle_put_scalar(out, "regression", 1))
        rc = fk_err_set(err, FK_ENOMEM, "sfl predict: out of memory");
    if (!rc && mode == FK_SFL_CLASSIFY && !is_ovo && rest &&
        fk_bundle_put_scalar(out, "rest_of", pos))
        rc = fk_err_set(err, FK_ENOMEM, "sfl predict: out of memory");
    free(Xp);
    free(lab);
    free(dist);
    fk_sfl_model_close(&m);
    return rc;
}
