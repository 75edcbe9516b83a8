#include "bench/mixture/mor.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"
#include "common/methods/sim.h"
#include "common/models/mixture/fedgmm.h"
#include "common/models/mixture/gmm.h"
#include "common/models/mixture/mor_local.h"


const char *const fk_mor_methods[] = {"fedgrem",   "fedem",       "local-em", "local-grem",
                                      "pooled-em", "pooled-grem", "fedgmm",   NULL};

static const uint64_t POOL_STREAM = 0x6d6f727000000000ULL;

typedef struct cfg {
    int B, restarts, passes, R1, cov_first;
    double c_eta, kappa, C, lambda0, step;
} cfg;

FK_CHECKRETURN static int cfg_parse(cfg *c, const fk_params *p, fk_err *err)
{
    long B, rs, passes, R1;
    int rc = fk_params_int(p, "align_B", 50, 1, 100000, &B, err);
    if (!rc) rc = fk_params_int(p, "restarts", 10, 1, 10000, &rs, err);
    if (!rc) rc = fk_params_int(p, "central_passes", 0, 0, 1000000, &passes, err);
    if (!rc) rc = fk_params_int(p, "fedgmm_R1", 3, 1, 100, &R1, err);
    if (!rc) rc = fk_params_double(p, "c_eta", 0.95, 1e-12, 100, &c->c_eta, err);
    if (!rc) rc = fk_params_double(p, "kappa", 0.1, 0, 0.999999, &c->kappa, err);
    if (!rc) rc = fk_params_double(p, "C", 2.0, 0, 1e12, &c->C, err);
    if (!rc) rc = fk_params_double(p, "lambda0", 1.0, 0, 1e12, &c->lambda0, err);
    if (!rc) rc = fk_params_double(p, "grem_step", 0.1, 1e-12, 100, &c->step, err);
    const char *cov = fk_params_str(p, "fedgmm_cov", "all");
    if (!rc && strcmp(cov, "all") && strcmp(cov, "first"))
        rc = fk_err_set(err, FK_EINVAL, "fedgmm_cov must be 'all' or 'first' (got '%s')", cov);
    if (!rc)
        rc = fk_mor_check_local_init(fk_params_str(p, "local_init", "kmeans"), err);
    if (rc)
        return rc;
    c->B = (int)B;
    c->restarts = (int)rs;
    c->passes = (int)passes;
    c->R1 = (int)R1;
    c->cov_first = !strcmp(cov, "first");
    return FK_OK;
}

static int all_finite(const double *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i]))
            return 0;
    return 1;
}

/* ---------- initialization: Local-EM per task, then ALIGN (spec 1.3) ---------- */

FK_CHECKRETURN static int init_all(const fk_mor_data *d, const cfg *c, uint64_t seed, double *W0, double *M0,
                    fk_mor_ws *s, fk_err *err)
{
    int K = d->K, R = d->R, p = d->p;
    size_t n = (size_t)d->n, Rp = (size_t)R * p;
    double *W = malloc((size_t)K * R * sizeof *W), *M = malloc((size_t)K * Rp * sizeof *M);
    int *perm = malloc((size_t)K * R * sizeof *perm);
    int rc = W && M && perm ? FK_OK : fk_err_set(err, FK_ENOMEM, "mor: out of memory");
    for (int k = 0; rc == FK_OK && k < K; k++) {
        fk_rng g;
        fk_rng_init(&g, seed, FK_MOR_INIT_STREAM + (uint64_t)k);
        rc = fk_mor_mixreg_fit(d->X + (size_t)k * n * p, d->y + (size_t)k * n, n, p, R, c->restarts, &g,
                        W + (size_t)k * R, M + (size_t)k * Rp, s, err);
        if (rc)
            fk_err_prefix(err, rc, "task %d: ", k);
    }
    if (rc == FK_OK) {
        fk_rng g;
        fk_rng_init(&g, seed, FK_MOR_ALIGN_STREAM);
        rc = fk_gmm_align(M, K, R, p, c->B, &g, perm, err);
    }
    for (int k = 0; rc == FK_OK && k < K; k++)
        for (int r = 0; r < R; r++) {
            int src = perm[k * R + r];
            W0[k * R + r] = W[k * R + src];
            memcpy(M0 + k * Rp + (size_t)r * p, M + k * Rp + (size_t)src * p, (size_t)p * sizeof *M);
        }
    free(W);
    free(M);
    free(perm);
    return rc;
}

/* ---------- federated loops ---------- */

/* FedGrEM (central = 1) or Local-GrEM (central = 0) from the aligned initial values. */
FK_CHECKRETURN static int grem(const fk_mor_data *d, const cfg *c, int central, int rounds, const double *W0,
                const double *M0, double *theta, double *w, fk_mor_ws *s, fk_err *err)
{
    int K = d->K, R = d->R, p = d->p;
    size_t n = (size_t)d->n, Rp = (size_t)R * p;
    memcpy(theta, M0, (size_t)K * Rp * sizeof *theta);
    memcpy(w, W0, (size_t)K * R * sizeof *w);
    double *eta = malloc((size_t)K * R * sizeof *eta), *tt = malloc((size_t)K * p * sizeof *tt);
    double *th = malloc((size_t)K * p * sizeof *th), *work = malloc((size_t)K * p * sizeof *work);
    double *beta = malloc(Rp * sizeof *beta), *nk = malloc((size_t)K * sizeof *nk);
    int rc = eta && tt && th && work && beta && nk ? FK_OK
                                                   : fk_err_set(err, FK_ENOMEM, "mor: out of memory");
    for (int i = 0; rc == FK_OK && i < K * R; i++)
        eta[i] = central ? c->c_eta / fmax(W0[i], 1e-10) : c->step;
    for (size_t i = 0; rc == FK_OK && i < Rp; i++)
        beta[i] = NAN; /* no warm start in round 1 */
    for (int k = 0; rc == FK_OK && k < K; k++)
        nk[k] = (double)n;
    double lambda = c->lambda0;
    for (int t = 1; rc == FK_OK && t <= rounds; t++) {
        for (int k = 0; k < K; k++) {
            const double *X = d->X + (size_t)k * n * p, *y = d->y + (size_t)k * n;
            double *tk = theta + (size_t)k * Rp, *wk = w + (size_t)k * R;
            fk_mor_grem_step(X, y, n, p, R, eta + (size_t)k * R, wk, tk, s);
        }
        if (central) {
            lambda = fk_gmm_lambda_next(lambda, c->kappa, c->C, p, K);
            for (int r = 0; r < R; r++) {
                for (int k = 0; k < K; k++)
                    memcpy(tt + (size_t)k * p, theta + (size_t)k * Rp + (size_t)r * p,
                           (size_t)p * sizeof *tt);
                if (c->passes)
                    fk_gmm_central(tt, nk, K, p, lambda, c->passes, th, beta + (size_t)r * p, work);
                else
                    fk_gmm_central_mm(tt, nk, K, p, lambda, th, beta + (size_t)r * p, work);
                for (int k = 0; k < K; k++)
                    memcpy(theta + (size_t)k * Rp + (size_t)r * p, th + (size_t)k * p,
                           (size_t)p * sizeof *th);
            }
        }
        if (!all_finite(theta, (size_t)K * Rp) || !all_finite(w, (size_t)K * R))
            rc = fk_err_set(err, FK_ENUMERIC, "mor %s: estimates became non-finite in round %d",
                            central ? "fedgrem" : "local-grem", t);
    }
    free(eta);
    free(tt);
    free(th);
    free(work);
    free(beta);
    free(nk);
    return rc;
}

/* FedEM (spec 2.3): exact weighted-least-squares M-step, n-weighted average of the means. */
FK_CHECKRETURN static int fedem(const fk_mor_data *d, int rounds, const double *W0, const double *M0,
                 double *theta, double *w, fk_mor_ws *s, fk_err *err)
{
    int K = d->K, R = d->R, p = d->p;
    size_t n = (size_t)d->n, Rp = (size_t)R * p;
    memcpy(theta, M0, (size_t)K * Rp * sizeof *theta);
    memcpy(w, W0, (size_t)K * R * sizeof *w);
    double *avg = malloc(Rp * sizeof *avg), *loc = malloc(Rp * sizeof *loc);
    int rc = avg && loc ? FK_OK : fk_err_set(err, FK_ENOMEM, "mor: out of memory");
    for (int t = 1; rc == FK_OK && t <= rounds; t++) {
        memset(avg, 0, Rp * sizeof *avg);
        for (int k = 0; rc == FK_OK && k < K; k++) {
            const double *X = d->X + (size_t)k * n * p, *y = d->y + (size_t)k * n;
            double ll;
            if (fk_mor_em_step(X, y, n, p, R, w + (size_t)k * R, theta + (size_t)k * Rp, loc, &ll,
                               s))
                rc = fk_err_set(err, FK_ENUMERIC, "mor fedem: singular least squares");
            for (size_t i = 0; i < Rp; i++) /* equal n_k: the n-weighted mean is the mean */
                avg[i] += loc[i] / K;
        }
        for (int k = 0; k < K; k++)
            memcpy(theta + (size_t)k * Rp, avg, Rp * sizeof *avg);
        if (rc == FK_OK && (!all_finite(theta, (size_t)K * Rp) || !all_finite(w, (size_t)K * R)))
            rc = fk_err_set(err, FK_ENUMERIC, "mor fedem: estimates became non-finite in round %d", t);
    }
    free(avg);
    free(loc);
    return rc;
}

/* FedGMM (spec 2.5): R1 Gaussian x-components crossed with R regressions per task;
 * x-means (mass-weighted), x-covariances and regression coefficients averaged by the server. */
FK_CHECKRETURN static int fedgmm(const fk_mor_data *d, const cfg *c, uint64_t seed, int rounds,
                  const double *W0, const double *M0, double *theta, double *w, fk_mor_ws *s,
                  fk_err *err)
{
    int K = d->K, R = d->R, p = d->p, R1 = c->R1, Q = R1 * R;
    size_t n = (size_t)d->n, Rp = (size_t)R * p, pp = (size_t)p * p;
    double *mu = malloc((size_t)K * R1 * p * sizeof *mu), *Sig = malloc((size_t)K * R1 * pp * sizeof *Sig);
    double *pi = malloc((size_t)K * Q * sizeof *pi), *loc = malloc((size_t)K * Rp * sizeof *loc);
    double *mbar = malloc((size_t)R1 * p * sizeof *mbar), *sbar = malloc((size_t)R1 * pp * sizeof *sbar);
    double *tbar = malloc(Rp * sizeof *tbar);
    fk_fedgmm_ws g = {0};
    int rc = mu && Sig && pi && loc && mbar && sbar && tbar
                 ? fk_fedgmm_ws_open(&g, n, p, R, R1, err)
                 : fk_err_set(err, FK_ENOMEM, "mor fedgmm: out of memory");
    for (int k = 0; rc == FK_OK && k < K; k++) {
        rc = fk_fedgmm_init_x(d->X + (size_t)k * n * p, n, p, R1, c->restarts, seed, k,
                              mu + (size_t)k * R1 * p, Sig + (size_t)k * R1 * pp, err);
        fk_fedgmm_pi_init(W0 + (size_t)k * R, R, R1, pi + (size_t)k * Q);
    }
    if (rc == FK_OK)
        rc = fk_fedgmm_align_x(mu, K, R1, p, c->B, seed, err);
    if (rc == FK_OK)
        memcpy(theta, M0, (size_t)K * Rp * sizeof *theta);
    for (int t = 1; rc == FK_OK && t <= rounds; t++) {
        for (int k = 0; rc == FK_OK && k < K; k++)
            rc = fk_fedgmm_local(d->X + (size_t)k * n * p, d->y + (size_t)k * n, n, p, R, R1,
                                 theta + (size_t)k * Rp, pi + (size_t)k * Q,
                                 mu + (size_t)k * R1 * p, Sig + (size_t)k * R1 * pp,
                                 loc + (size_t)k * Rp, s, &g, err);
        if (rc)
            break;
        fk_fedgmm_average(K, R, R1, p, pi, mu, Sig, loc, c->cov_first, mbar, sbar, tbar);
        for (int k = 0; k < K; k++) {
            memcpy(mu + (size_t)k * R1 * p, mbar, (size_t)R1 * p * sizeof *mu);
            memcpy(Sig + (size_t)k * R1 * pp, sbar, (size_t)R1 * pp * sizeof *Sig);
            memcpy(theta + (size_t)k * Rp, tbar, Rp * sizeof *theta);
        }
        if (!all_finite(theta, (size_t)K * Rp) || !all_finite(pi, (size_t)K * Q))
            rc = fk_err_set(err, FK_ENUMERIC, "mor fedgmm: estimates became non-finite in round %d", t);
    }
    for (int k = 0; rc == FK_OK && k < K; k++)
        fk_fedgmm_weights(pi + (size_t)k * Q, R, R1, w + (size_t)k * R);
    fk_fedgmm_ws_close(&g);
    free(mu);
    free(Sig);
    free(pi);
    free(loc);
    free(mbar);
    free(sbar);
    free(tbar);
    return rc;
}

/* The federated job types (fedgrem-mor, fedem-mor, local-em-mor, local-grem-mor,
 * pooled-grem-mor) through the method table and the in-process simulator: the code the
 * daemons run, on the same data and seed. */
FK_CHECKRETURN static int run_ops(const fk_method *m, const fk_params *prm, const fk_mor_data *d, int rounds,
                   uint64_t seed, double *theta, double *w, fk_err *err)
{
    fk_dataset *ds = calloc((size_t)d->K, sizeof *ds);
    if (!ds)
        return fk_err_set(err, FK_ENOMEM, "mor: out of memory for %d clients", d->K);
    int rc = FK_OK;
    for (int k = 0; rc == FK_OK && k < d->K; k++)
        rc = fk_mor_task_dataset(d, k, &ds[k], err);
    fk_params q; /* the job's parameters with R taken from the design unless given */
    fk_params_init(&q);
    for (int i = 0; rc == FK_OK && i < prm->count; i++)
        if (fk_params_set(&q, prm->items[i].key, prm->items[i].value))
            rc = fk_err_set(err, FK_ENOMEM, "mor: out of memory");
    char rs[16];
    snprintf(rs, sizeof rs, "%d", d->R);
    const char *given = fk_params_get(&q, "R");
    if (!rc && given && strcmp(given, rs))
        rc = fk_err_set(err, FK_EINVAL, "%s: R = %s but the design has R = %d components", m->name,
                        given, d->R);
    if (!rc && !given && fk_params_set(&q, "R", rs))
        rc = fk_err_set(err, FK_ENOMEM, "mor: out of memory");
    /* a method that ends itself gets its own budget (pooled-em-mor runs until converged) */
    fk_sim_opts o = {.rounds = m->max_rounds ? m->max_rounds(&q) : rounds, .seed = seed};
    fk_bundle model;
    fk_bundle_init(&model);
    if (!rc)
        rc = fk_sim_run(m, &q, ds, d->K, &o, &model, NULL, err);
    fk_params_close(&q);
    size_t Rp = (size_t)d->R * d->p;
    const fk_tensor *th = rc ? NULL : fk_bundle_get(&model, "theta");
    const fk_tensor *wt = rc ? NULL : fk_bundle_get(&model, "w");
    if (!rc && (!th || th->len != (size_t)d->K * Rp || !wt || wt->len != (size_t)d->K * d->R))
        rc = fk_err_set(err, FK_EFORMAT, "%s returned no K x R x p model (is R = %d set?)",
                        m->name, d->R);
    if (!rc) {
        memcpy(theta, th->data, th->len * sizeof *theta);
        memcpy(w, wt->data, wt->len * sizeof *w);
    }
    fk_bundle_close(&model);
    for (int k = 0; k < d->K; k++)
        fk_dataset_close(&ds[k]);
    free(ds);
    return rc;
}

int fk_mor_run(const char *method, const fk_params *prm, const fk_mor_data *d, int rounds,
               uint64_t seed, double *theta, double *w, fk_err *err)
{
    size_t len = strlen(method);
    if (len > 4 && !strcmp(method + len - 4, "-mor")) { /* the job types */
        const fk_method *om = fk_method_find(method, err);
        return om ? run_ops(om, prm, d, rounds, seed, theta, w, err) : err->code;
    }
    int m = -1;
    for (int i = 0; fk_mor_methods[i]; i++)
        if (!strcmp(method, fk_mor_methods[i]))
            m = i;
    if (m < 0)
        return fk_err_set(err, FK_EINVAL,
                          "unknown MoR method '%s' (fedgrem, fedem, local-em, local-grem, "
                          "pooled-em, pooled-grem, fedgmm; as federated jobs: fedgrem-mor, "
                          "fedem-mor, local-em-mor, local-grem-mor, pooled-grem-mor)",
                          method);
    if (d->K < 1 || d->R < 1 || d->p < 1 || d->n < d->R || d->n < d->p)
        return fk_err_set(err, FK_EINVAL,
                          "mor: need K >= 1 tasks with n >= R and n >= p samples (K=%d R=%d p=%d "
                          "n=%d)",
                          d->K, d->R, d->p, d->n);
    if (rounds < 1)
        return fk_err_set(err, FK_EINVAL, "mor: rounds must be positive");
    cfg c;
    int rc = cfg_parse(&c, prm, err);
    if (rc)
        return rc;
    int K = d->K, R = d->R, p = d->p;
    size_t n = (size_t)d->n, N = (size_t)K * n, Rp = (size_t)R * p;
    int pooled = !strcmp(method, "pooled-em") || !strcmp(method, "pooled-grem");
    fk_mor_ws s;
    rc = fk_mor_ws_open(&s, pooled ? N : n, p, R, err);
    if (rc)
        return rc;
    if (!strcmp(method, "pooled-em")) { /* its own start, not the aligned local fits */
        fk_rng g;
        fk_rng_init(&g, seed, POOL_STREAM);
        rc = fk_mor_mixreg_fit(d->X, d->y, N, p, R, c.restarts, &g, w, theta, &s, err);
    } else {
        double *W0 = malloc((size_t)K * R * sizeof *W0), *M0 = malloc((size_t)K * Rp * sizeof *M0);
        rc = W0 && M0 ? FK_OK : fk_err_set(err, FK_ENOMEM, "mor: out of memory");
        fk_mor_ws s1 = s;
        if (!rc && pooled)
            rc = fk_mor_ws_open(&s1, n, p, R, err);
        if (!rc)
            rc = init_all(d, &c, seed, W0, M0, &s1, err);
        if (pooled && s1.G != s.G)
            fk_mor_ws_close(&s1);
        if (rc) {
        } else if (!strcmp(method, "local-em")) {
            memcpy(theta, M0, (size_t)K * Rp * sizeof *theta);
            memcpy(w, W0, (size_t)K * R * sizeof *w);
        } else if (!strcmp(method, "fedgrem") || !strcmp(method, "local-grem")) {
            rc = grem(d, &c, !strcmp(method, "fedgrem"), rounds, W0, M0, theta, w, &s, err);
        } else if (!strcmp(method, "fedem")) {
            rc = fedem(d, rounds, W0, M0, theta, w, &s, err);
        } else if (!strcmp(method, "pooled-grem")) { /* one task: all data, task 1's start */
            fk_mor_data pd = {.K = 1, .R = R, .p = p, .n = (int)N, .X = d->X, .y = d->y};
            rc = grem(&pd, &c, 0, rounds, W0, M0, theta, w, &s, err);
        } else {
            rc = fedgmm(d, &c, seed, rounds, W0, M0, theta, w, &s, err);
        }
        free(W0);
        free(M0);
    }
    fk_mor_ws_close(&s);
    if (rc == FK_OK && pooled)
        for (int k = 1; k < K; k++) { /* the single pooled model serves every task */
            memcpy(theta + (size_t)k * Rp, theta, Rp * sizeof *theta);
            memcpy(w + (size_t)k * R, w, (size_t)R * sizeof *w);
        }
    return rc;
}

void fk_mor_errors(const fk_mor_data *d, const double *theta, const double *w, double *e_theta,
                   double *e_w)
{
    size_t Rp = (size_t)d->R * d->p;
    double et = 0.0, ew = 0.0;
    for (int k = 0; k < d->K - d->n_outlier; k++) {
        et = fmax(et, fk_gmm_err_theta(theta + k * Rp, d->theta + k * Rp, d->R, d->p));
        ew = fmax(ew, fk_gmm_err_w(w + (size_t)k * d->R, d->w + (size_t)k * d->R, d->R));
    }
    *e_theta = et;
    *e_w = ew;
}
