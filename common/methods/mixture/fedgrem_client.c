/* FedGrEM's client state (fedgrem_int.h: shared with the mixture-of-regressions client of
 * fedgrem_mor.c), the Gaussian-mixture client and the GMM tables. */
#include "common/methods/mixture/fedgrem.h"
#include "common/methods/mixture/fedgrem_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/models/mixture/gmm.h"
#include "common/models/mixture/gmm_estep.h"

static const uint64_t INIT_STREAM = 0x6565650000000000ULL; /* client Local-EM restarts */

/* ---------------- client ---------------- */

void fk__fedgrem_cli_close(void *v)
{
    fk__fedgrem_cli *c = v;
    if (!c)
        return;
    free(c->xsq);
    free(c->Xt);
    free(c->gamma);
    free(c->W);
    free(c->M);
    free(c->S);
    free(c->w);
    free(c->eta);
    free(c->nr);
    free(c->sx);
    free(c->theta);
    free(c->ref);
    free(c->Xc);
    free(c->thc);
    fk_mor_ws_close(&c->mws);
    free(c);
}

int fk__fedgrem_check_data(const fk_dataset *data, int client, int R, fk_err *err)
{
    size_t n = data->X.rows;
    int d = (int)data->X.cols;
    if (n == 0)
        return fk_err_set(err, FK_EINVAL,
                          "client %d has no samples (empty client); give it data or leave it out "
                          "of the job",
                          client);
    if (n < (size_t)R)
        return fk_err_set(err, FK_EINVAL,
                          "client %d has %zu samples but R = %d components; every client needs at "
                          "least R samples (lower R or merge clients)",
                          client, n, R);
    if (d < 1 || data->X.ld != data->X.cols)
        return fk_err_set(err, FK_EINVAL, "client %d: data must be a dense n x p matrix", client);
    if (d > FK_GMM_MAX_P)
        return fk_err_set(err, FK_ELIMIT,
                          "client %d: %d features exceed the GMM limit of %d (p x p covariances); "
                          "reduce the dimension first",
                          client, d, FK_GMM_MAX_P);
    for (size_t i = 0; i < n * (size_t)d; i++)
        if (!isfinite(data->X.data[i]))
            return fk_err_set(err, FK_EINVAL,
                              "client %d: sample %zu feature %zu is NaN or infinite; clean the "
                              "data before the run",
                              client, i / (size_t)d, i % (size_t)d);
    /* Beyond this every fit fails (its squares and covariances overflow or drown the rest),
     * and a centre that large could not be sent: name the magnitude, not the components. */
    for (size_t i = 0; i < n * (size_t)d; i++)
        if (!(fabs(data->X.data[i]) <= FK_GMM_MAX_ABS))
            return fk_err_set(err, FK_EINVAL,
                              "client %d: sample %zu feature %zu is beyond the magnitude a "
                              "mixture fit handles (|x| <= %g); rescale the data or remove the "
                              "outlier",
                              client, i / (size_t)d, i % (size_t)d, FK_GMM_MAX_ABS);
    return FK_OK;
}

/* A Gaussian-mixture client works about its own reference point, the mean of its data:
 * the E-step expands |x - theta|^2 = |x|^2 - 2 x.theta + |theta|^2, which cancels
 * catastrophically when the data sit far from the origin (offset 1e10: -loglik/n 6678
 * instead of 6.8072). Every quantity is translation invariant, so the client keeps X - ref
 * (its row norms and transpose), moves theta by -ref before each E-step and back after the
 * step (O(Rp)), and sends everything in the original coordinates. */
static int centre_data(fk__fedgrem_cli *c)
{
    size_t n = c->n, p = (size_t)c->p;
    c->ref = calloc(p, sizeof *c->ref);
    c->Xc = malloc(n * p * sizeof *c->Xc);
    c->thc = malloc((size_t)c->R * p * sizeof *c->thc);
    if (!c->ref || !c->Xc || !c->thc)
        return FK_ENOMEM;
    const double *X = c->d->X.data;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < p; j++)
            c->ref[j] += X[i * p + j];
    for (size_t j = 0; j < p; j++)
        c->ref[j] /= (double)n;
    for (size_t i = 0; i < n; i++) {
        double s = 0.0;
        for (size_t j = 0; j < p; j++) {
            double v = X[i * p + j] - c->ref[j];
            c->Xc[i * p + j] = v;
            s += v * v;
        }
        c->xsq[i] = s;
    }
    if (c->Xt)
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < p; j++)
                c->Xt[j * n + i] = c->Xc[i * p + j];
    c->X = c->Xc;
    return FK_OK;
}

/* theta (R x p, original coordinates) about the reference point, in c->thc; theta itself when
 * the client works in the original coordinates (mixtures of regressions). */
static double *centred(fk__fedgrem_cli *c, const double *theta)
{
    size_t p = (size_t)c->p;
    if (!c->ref)
        return (double *)theta;
    for (size_t r = 0; r < (size_t)c->R; r++)
        for (size_t j = 0; j < p; j++)
            c->thc[r * p + j] = theta[r * p + j] - c->ref[j];
    return c->thc;
}

/* Rows of a (R x p) from the reference point back to the original coordinates. */
static void uncentre(const fk__fedgrem_cli *c, const double *a, double *out)
{
    size_t p = (size_t)c->p;
    for (size_t r = 0; c->ref && r < (size_t)c->R; r++)
        for (size_t j = 0; j < p; j++)
            out[r * p + j] = a[r * p + j] + c->ref[j];
}

/* The Gaussian-mixture tables' client init: fk__fedgrem_cli_init about the data's mean. */
FK_CHECKRETURN static int gmm_cli_init(void **out, const fk_params *p, const fk_dataset *data,
                                       int client, int n_clients, uint64_t seed, int variant,
                                       fk_err *err)
{
    int rc = fk__fedgrem_cli_init(out, p, data, client, n_clients, seed, variant, err);
    if (rc == FK_OK && centre_data(*out)) {
        fk__fedgrem_cli_close(*out);
        *out = NULL;
        rc = fk_err_set(err, FK_ENOMEM, "client %d: out of memory", client);
    }
    return rc;
}

int fk__fedgrem_cli_init(void **out, const fk_params *p, const fk_dataset *data, int client,
                         int n_clients, uint64_t seed, int variant, fk_err *err)
{
    fk__fedgrem_cfg cf;
    int rc = fk__fedgrem_cfg_parse(&cf, p, err);
    if (rc)
        return rc;
    size_t n = data->X.rows;
    int d = (int)data->X.cols, R = cf.R;
    if ((rc = fk__fedgrem_check_data(data, client, R, err)))
        return rc;
    fk__fedgrem_cli *c = calloc(1, sizeof *c);
    if (!c)
        return fk_err_set(err, FK_ENOMEM, "client: out of memory");
    *c = (fk__fedgrem_cli){.variant = variant,
                           .k = client,
                           .K = n_clients,
                           .R = R,
                           .p = d,
                           .c = cf,
                           .seed = seed,
                           .X = data->X.data,
                           .d = data,
                           .n = n};
    size_t Rp = (size_t)R * d;
    c->xsq = malloc(n * sizeof(double));
    c->gamma = malloc(fk_gmm_estep_work(n, R) * sizeof(double)); /* >= n x R */
    c->W = calloc((size_t)R, sizeof(double));
    c->M = calloc(Rp, sizeof(double));
    c->S = calloc((size_t)d * d, sizeof(double));
    c->w = calloc((size_t)R, sizeof(double));
    c->eta = calloc((size_t)R, sizeof(double));
    c->nr = calloc((size_t)R, sizeof(double));
    c->sx = calloc(Rp, sizeof(double));
    c->theta = calloc(Rp, sizeof(double));
    if (!c->xsq || !c->gamma || !c->W || !c->M || !c->S || !c->w || !c->eta || !c->nr || !c->sx ||
        !c->theta) {
        fk__fedgrem_cli_close(c);
        return fk_err_set(err, FK_ENOMEM, "client %d: out of memory (n=%zu)", client, n);
    }
    for (size_t i = 0; i < n; i++) {
        const double *x = c->X + i * (size_t)d;
        double s = 0.0;
        for (int j = 0; j < d; j++)
            s += x[j] * x[j];
        c->xsq[i] = s;
    }
    /* The small-p E-step kernel needs the transpose. Its absence is an error, not a quiet switch
     * to the dgemm path: that one rounds differently, and a daemon run must equal the simulation. */
    if (d <= 64 && (c->Xt = malloc(n * (size_t)d * sizeof(double))) == NULL) {
        fk__fedgrem_cli_close(c);
        return fk_err_set(err, FK_ENOMEM, "client %d: out of memory (n=%zu)", client, n);
    }
    for (size_t i = 0; c->Xt && i < n; i++)
        for (int j = 0; j < d; j++)
            c->Xt[(size_t)j * n + i] = c->X[i * (size_t)d + j];
    *out = c;
    return FK_OK;
}

int fk__fedgrem_put_fit(fk__fedgrem_cli *c, fk_bundle *up)
{
    uint64_t shape[2] = {(uint64_t)c->R, (uint64_t)c->p};
    int rc = fk_bundle_put(up, "M", 2, shape, c->M);
    if (!rc)
        rc = fk_bundle_put_vec(up, "W", (size_t)c->R, c->W);
    if (!rc)
        rc = fk_bundle_put_scalar(up, "n", (double)c->n);
    return rc;
}

int fk__fedgrem_put_common(fk__fedgrem_cli *c, fk_bundle *up)
{
    uint64_t shape[2] = {(uint64_t)c->R, (uint64_t)c->p};
    int rc = fk_bundle_put(up, "theta", 2, shape, c->theta);
    if (!rc)
        rc = fk_bundle_put_vec(up, "w", (size_t)c->R, c->w);
    return rc;
}

/* The round's quality where the client holds classes: mis-clustering and adjusted Rand index of
 * its rows' clusters (labels given, or the argmax of the component-major responsibilities G). */
FK_CHECKRETURN static int score_round(fk__fedgrem_cli *c, const int *given, const double *G,
                                      fk_report *rep, fk_err *err)
{
    if (!c->d->y || c->d->n_classes <= 0)
        return FK_OK;
    int *lab = given ? NULL : malloc(c->n * sizeof *lab);
    if (!given && !lab)
        return fk_err_set(err, FK_ENOMEM, "client: out of memory scoring the round");
    if (!given)
        fk_report_argmax(G, c->n, c->R, 1, lab);
    int rc = fk_report_score_clusters(rep, c->d->y, given ? given : lab, c->n, c->d->n_classes,
                                      c->R, err);
    free(lab);
    return rc;
}

/* The EEE fit's clusters (W, M about the reference point, S) scored against the classes. */
FK_CHECKRETURN static int score_eee(fk__fedgrem_cli *c, const double *M, fk_report *rep,
                                    fk_err *err)
{
    if (!c->d->y || c->d->n_classes <= 0)
        return FK_OK;
    int *lab = malloc(c->n * sizeof *lab);
    if (!lab)
        return fk_err_set(err, FK_ENOMEM, "client: out of memory scoring the round");
    int rc = fk_gmm_predict_eee(c->X, c->n, c->p, c->W, M, c->S, c->R, lab, err);
    if (!rc)
        rc = score_round(c, lab, NULL, rep, err);
    free(lab);
    return rc;
}

FK_CHECKRETURN static int local_init(fk__fedgrem_cli *c, fk_bundle *up, fk_report *rep, fk_err *err)
{
    fk_rng rng;
    fk_rng_init(&rng, c->seed, INIT_STREAM + (uint64_t)c->k);
    fk_eee_fit f = {.w = c->W, .mu = c->M, .sigma = c->S};
    int rc = c->c.hc_init ? fk_gmm_fit_eee_hc(c->X, c->n, c->p, c->R, &f, err)
                          : fk_gmm_fit_eee(c->X, c->n, c->p, c->R, c->c.restarts, &rng, &f, err);
    if (rc)
        return rc;
    if (f.regularised && !c->warned) {
        fk_log(FK_LOG_WARN, "covariance_regularised",
               "client=%d msg=\"near-singular covariance in the local fit; added a ridge\"", c->k);
        c->warned = 1;
    }
    c->fitted = 1;
    rc = score_eee(c, c->M, rep, err); /* before the means leave the reference point */
    if (rc)
        return rc;
    uncentre(c, c->M, c->M); /* fitted about the reference point */
    uint64_t ss[2] = {(uint64_t)c->p, (uint64_t)c->p};
    rc = fk__fedgrem_put_fit(c, up);
    if (!rc && c->variant == FK__FEDGREM_V_LOCAL_EM)
        rc = fk_bundle_put(up, "sigma", 2, ss, c->S);
    rep->n_samples = (double)c->n;
    rep->loss = -f.loglik / (double)c->n;
    return rc ? fk_err_set(err, FK_ENOMEM, "client: out of memory") : FK_OK;
}

/* Relabel the local fit with the server's permutation; fix the step sizes. */
FK_CHECKRETURN static int apply_perm(fk__fedgrem_cli *c, const fk_tensor *pt, fk_err *err)
{
    int R = c->R;
    if (pt->len != (size_t)R)
        return fk_err_set(err, FK_EFORMAT, "permutation has %zu entries, expected %d", pt->len, R);
    int seen[R];
    memset(seen, 0, sizeof seen);
    for (int r = 0; r < R; r++) { /* range first: casting an out-of-range double is undefined */
        double v = pt->data[r];
        if (!(v >= 0 && v < R) || v != (double)(int)v || seen[(int)v]++)
            return fk_err_set(err, FK_EFORMAT,
                              "permutation entry %d is not one of 0..%d, or repeats one (want "
                              "each exactly once)",
                              r, R - 1);
    }
    for (int r = 0; r < R; r++)
        c->w[r] = c->W[(int)pt->data[r]];
    for (int r = 0; r < R; r++)
        c->eta[r] = c->variant == FK__FEDGREM_V_FEDGREM
                        ? c->c.c_eta / (c->w[r] > 1e-10 ? c->w[r] : 1e-10)
                        : c->c.step;
    c->aligned = 1;
    return FK_OK;
}

int fk__fedgrem_step_task(fk__fedgrem_cli *c, const fk_bundle *task, const fk_tensor **w,
                          const fk_tensor **src, fk_err *err)
{
    int R = c->R, p = c->p;
    const uint64_t shape[2] = {(uint64_t)R, (uint64_t)p}, rshape[1] = {(uint64_t)R};
    const fk_tensor *th, *pt = fk_bundle_get(task, "perm");
    int rc = fk__fedgrem_take(task, "theta", 2, shape, 0, "the server's task", &th, err);
    if (!rc && c->variant == FK__FEDGREM_V_POOLED_GREM)
        rc = fk__fedgrem_take(task, "w", 1, rshape, 1, "the server's pooled task", w, err);
    if (!rc && c->variant == FK__FEDGREM_V_TGMM)
        rc = fk__fedgrem_take(task, "src", 2, shape, 0, "the server's tgmm task", src, err);
    if (!rc && pt)
        rc = apply_perm(c, pt, err);
    if (rc)
        return rc;
    if (!c->aligned || !c->fitted)
        return fk_err_set(err, FK_ESTATE, "client %d got a step before its initialisation", c->k);
    memcpy(c->theta, th->data, (size_t)R * p * sizeof(double));
    return FK_OK;
}

/* The gradient step moves theta_r by rho_r = eta_r w_r of the way to its responsibility mean;
 * with the paper's eta_r = C_eta / w0_r that is C_eta w_r / w0_r, and beyond 2 the step
 * overshoots by more than it corrects: the estimates oscillate with period 2 (the demo's
 * outlier client from round 32 on). The paper's rule stays the default; say so once per client
 * and component, with the cure. */
static void warn_unstable(fk__fedgrem_cli *c)
{
    for (int r = 0; r < c->R; r++) {
        double rho = c->eta[r] * c->w[r];
        uint64_t bit = 1ull << (r < 63 ? r : 63);
        if (!(rho > 2.0) || (c->rho_warned & bit))
            continue;
        c->rho_warned |= bit;
        fk_log(FK_LOG_WARN, "relaxation_unstable",
               "client=%d component=%d rho=%.6g c_eta=%g w=%.4g w0=%.4g msg=\"C_eta w_r / w0_r "
               "> 2: the gradient step overshoots and the estimates oscillate with period 2; "
               "step_guard = 1 caps rho at 1\"",
               c->k, r, rho, c->c.c_eta, c->w[r], c->c.c_eta / c->eta[r]);
    }
}

FK_CHECKRETURN static int cli_step(void *v, const fk_bundle *task, fk_bundle *up, fk_report *rep,
                                   fk_err *err)
{
    fk__fedgrem_cli *c = v;
    const fk_tensor *op = fk_bundle_get(task, "op");
    if (!op || op->len != 1)
        return fk_err_set(err, FK_EFORMAT, "task lacks 'op'");
    if (op->data[0] == 0.0)
        return local_init(c, up, rep, err);
    int R = c->R, p = c->p;
    size_t Rp = (size_t)R * p;
    const uint64_t shape[2] = {(uint64_t)R, (uint64_t)p};
    const fk_tensor *w = NULL, *src = NULL;
    int rc = fk__fedgrem_step_task(c, task, &w, &src, err);
    if (rc)
        return rc;
    rep->n_samples = (double)c->n;
    if (c->variant == FK__FEDGREM_V_LOCAL_EM) { /* the EEE fit is final; report it once more */
        if ((rc = score_eee(c, centred(c, c->M), rep, err)))
            return rc;
        return fk__fedgrem_put_common(c, up) ? fk_err_set(err, FK_ENOMEM, "client: out of memory")
                                             : FK_OK;
    }
    if (w)
        memcpy(c->w, w->data, (size_t)R * sizeof(double));
    double *th = centred(c, c->theta); /* the step about the reference point */
    double ll =
        fk_gmm_estep_stats(c->X, c->Xt, c->n, p, c->xsq, c->w, th, R, c->nr, c->sx, c->gamma, NULL);
    rep->loss = -ll / (double)c->n;
    /* the clusters of the model the round started from, from the responsibilities at hand */
    if ((rc = score_round(c, NULL, c->gamma, rep, err)))
        return rc;
    if (c->variant == FK__FEDGREM_V_POOLED_GREM) {
        for (int r = 0; c->ref && r < R; r++) /* the server adds the sums of all clients */
            for (int j = 0; j < p; j++)
                c->sx[(size_t)r * p + j] += c->nr[r] * c->ref[j];
        rc = fk_bundle_put_vec(up, "nr", (size_t)R, c->nr);
        if (!rc)
            rc = fk_bundle_put(up, "sx", 2, shape, c->sx);
        return rc ? fk_err_set(err, FK_ENOMEM, "client: out of memory") : FK_OK;
    }
    for (int r = 0; r < R; r++)
        c->w[r] = c->nr[r] / (double)c->n;
    if (c->variant == FK__FEDGREM_V_FEDGREM || c->variant == FK__FEDGREM_V_LOCAL_GREM) {
        double eta[R];
        for (int r = 0; r < R; r++) /* step_guard caps the relaxation rho = eta w at 1 */
            eta[r] = c->c.guard && c->eta[r] * c->w[r] > 1.0 ? 1.0 / c->w[r] : c->eta[r];
        if (!c->c.guard)
            warn_unstable(c);
        fk_gmm_grad_step(th, c->nr, c->sx, c->n, p, R, eta);
    } else {
        fk_gmm_exact_means(th, c->nr, c->sx, c->n, p, R);
    }
    uncentre(c, th, c->theta);
    if (src) {
        double a = c->c.tgmm, den = 1.0 + a * (c->K - 1);
        for (size_t i = 0; i < Rp; i++)
            c->theta[i] = (c->theta[i] + a * src->data[i]) / den;
    }
    return fk__fedgrem_put_common(c, up) ? fk_err_set(err, FK_ENOMEM, "client: out of memory")
                                         : FK_OK;
}

int fk__fedgrem_model_slice(const fk__fedgrem_cli *c, const fk_bundle *model, const double **theta,
                            const double **w, fk_err *err)
{
    size_t Rp = (size_t)c->R * c->p;
    const fk_tensor *th = fk_bundle_get(model, "theta"), *wt = fk_bundle_get(model, "w");
    if (!th || th->len != (size_t)c->K * Rp || !wt || wt->len != (size_t)c->K * c->R ||
        !fk__fedgrem_all_bounded(th->data, th->len) || !fk__fedgrem_all_bounded(wt->data, wt->len))
        return fk_err_set(err, FK_EFORMAT,
                          "model lacks finite 'theta' (K x R x p = %d x %d x %d) or 'w' (K x R)",
                          c->K, c->R, c->p);
    *theta = th->data + (size_t)c->k * Rp;
    *w = wt->data + (size_t)c->k * c->R;
    return FK_OK;
}

FK_CHECKRETURN static int cli_evaluate(void *v, const fk_bundle *model, fk_report *rep, fk_err *err)
{
    fk__fedgrem_cli *c = v;
    int R = c->R, p = c->p;
    const double *tk, *wk;
    int rc0 = fk__fedgrem_model_slice(c, model, &tk, &wk, err);
    if (rc0)
        return rc0;
    rep->n_samples = (double)c->n;
    tk = centred(c, tk); /* the data are kept about the reference point */
    rep->loss = -fk_gmm_estep(c->X, c->n, p, c->xsq, wk, tk, R, c->gamma) / (double)c->n;
    if (!c->d->y || c->d->n_classes <= 0)
        return FK_OK;
    int *lab = malloc(c->n * sizeof *lab);
    if (!lab)
        return fk_err_set(err, FK_ENOMEM, "evaluate: out of memory");
    int rc = FK_OK;
    const fk_tensor *sg = fk_bundle_get(model, "sigma");
    if (c->variant == FK__FEDGREM_V_LOCAL_EM && sg && sg->len == (size_t)c->K * p * p)
        rc =
            fk_gmm_predict_eee(c->X, c->n, p, wk, tk, sg->data + (size_t)c->k * p * p, R, lab, err);
    else
        fk_gmm_predict(c->X, c->n, p, wk, tk, R, lab);
    if (!rc)
        rc = score_round(c, lab, NULL, rep, err);
    free(lab);
    return rc;
}

int fk__fedgrem_cli_save(void *v, fk_bundle *out, fk_err *err)
{
    fk__fedgrem_cli *c = v;
    size_t R = (size_t)c->R, P = (size_t)c->p;
    int rc = fk_bundle_put_scalar(out, "fitted", c->fitted);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "aligned", c->aligned);
    if (!rc)
        rc = fk_bundle_put_vec(out, "W", R, c->W);
    if (!rc)
        rc = fk_bundle_put_vec(out, "M", R * P, c->M);
    if (!rc)
        rc = fk_bundle_put_vec(out, "S", P * P, c->S);
    if (!rc)
        rc = fk_bundle_put_vec(out, "w", R, c->w);
    if (!rc)
        rc = fk_bundle_put_vec(out, "eta", R, c->eta);
    return rc ? fk_err_set(err, FK_ENOMEM, "client save: out of memory") : FK_OK;
}

int fk__fedgrem_cli_load(void *v, const fk_bundle *in, fk_err *err)
{
    fk__fedgrem_cli *c = v;
    size_t R = (size_t)c->R, P = (size_t)c->p;
    int f = 0, a = 0;
    int rc = fk__fedgrem_get_count(in, "fitted", 0, 1, &f, err);
    if (!rc)
        rc = fk__fedgrem_get_count(in, "aligned", 0, 1, &a, err);
    if (rc)
        return rc;
    struct {
        const char *name;
        double *d;
        size_t len;
    } arr[] = {
        {"W", c->W, R}, {"M", c->M, R * P}, {"S", c->S, P * P}, {"w", c->w, R}, {"eta", c->eta, R}};
    enum { N_ARR = sizeof arr / sizeof *arr };
    const fk_tensor *t[N_ARR];
    for (size_t i = 0; i < N_ARR; i++) { /* all checked before the state changes */
        t[i] = fk_bundle_get(in, arr[i].name);
        if (!t[i] || t[i]->len != arr[i].len || !fk__fedgrem_all_bounded(t[i]->data, t[i]->len))
            return fk_err_set(err, FK_EFORMAT,
                              "client checkpoint tensor '%s' is missing, has the wrong size or "
                              "holds non-finite values",
                              arr[i].name);
    }
    for (size_t i = 0; i < N_ARR; i++)
        memcpy(arr[i].d, t[i]->data, t[i]->len * sizeof(double));
    c->fitted = f;
    c->aligned = a;
    return FK_OK;
}

/* ---------------- tables ---------------- */

/* One server_init / client_init pair per variant: the tables differ only there. */
FK__FEDGREM_INITS(fedgrem, FK__FEDGREM_V_FEDGREM, FK__FEDGREM_GMM, gmm_cli_init)
FK__FEDGREM_INITS(fedem, FK__FEDGREM_V_FEDEM, FK__FEDGREM_GMM, gmm_cli_init)
FK__FEDGREM_INITS(local_em, FK__FEDGREM_V_LOCAL_EM, FK__FEDGREM_GMM, gmm_cli_init)
FK__FEDGREM_INITS(local_grem, FK__FEDGREM_V_LOCAL_GREM, FK__FEDGREM_GMM, gmm_cli_init)
FK__FEDGREM_INITS(tgmm, FK__FEDGREM_V_TGMM, FK__FEDGREM_GMM, gmm_cli_init)
FK__FEDGREM_INITS(pooled_grem, FK__FEDGREM_V_POOLED_GREM, FK__FEDGREM_GMM, gmm_cli_init)

const fk_method fk_method_fedgrem = FK__FEDGREM_TABLE(
    "fedgrem", "federated gradient EM with robust penalized fusion (Tian et al. 2024)", fedgrem,
    cli_step, cli_evaluate, fk__mixture_predict_gmm);
const fk_method fk_method_fedem =
    FK__FEDGREM_TABLE("fedem", "federated EM: local EM means averaged by the server", fedem,
                      cli_step, cli_evaluate, fk__mixture_predict_gmm);
const fk_method fk_method_local_em =
    FK__FEDGREM_TABLE("local-em", "per-client EEE Gaussian mixture (no federation)", local_em,
                      cli_step, cli_evaluate, fk__mixture_predict_gmm);
const fk_method fk_method_local_grem =
    FK__FEDGREM_TABLE("local-grem", "per-client gradient EM, step 0.1 (no federation)", local_grem,
                      cli_step, cli_evaluate, fk__mixture_predict_gmm);
const fk_method fk_method_tgmm = FK__FEDGREM_TABLE(
    "tgmm", "transfer-learning GMM borrowing from the other clients' initial centres", tgmm,
    cli_step, cli_evaluate, fk__mixture_predict_gmm);
const fk_method fk_method_pooled_grem =
    FK__FEDGREM_TABLE("pooled-grem", "gradient EM on the union of all clients (summed statistics)",
                      pooled_grem, cli_step, cli_evaluate, fk__mixture_predict_gmm);
