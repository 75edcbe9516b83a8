/* FedGrEM, the parts every GMM and MoR table shares (fedgrem_int.h): the configuration,
 * the checks of the tensors another party sends, and the whole server side (it only sees
 * R x p coefficient matrices and weights, so it is the same for both models). */
#include "common/methods/mixture/fedgrem_int.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/models/mixture/gmm.h"

static const char *const VARIANT_NAME[] = {"fedgrem",    "fedem", "local-em",
                                           "local-grem", "tgmm",  "pooled-grem"};
static const uint64_t ALIGN_STREAM = 0x616c690000000000ULL; /* alignment task orders */
static const char *const MODEL_NAME[] = {"", "-mor"};

int fk__fedgrem_cfg_parse(fk__fedgrem_cfg *c, const fk_params *p, fk_err *err)
{
    long R, B, rs, passes, guard;
    int rc = fk_params_int(p, "R", 5, 1, 1000, &R, err);
    if (!rc)
        rc = fk_params_int(p, "align_B", 50, 1, 100000, &B, err);
    if (!rc)
        rc = fk_params_int(p, "restarts", 10, 1, 10000, &rs, err);
    if (!rc)
        rc = fk_params_int(p, "central_passes", 0, 0, 1000000, &passes, err);
    if (!rc)
        rc = fk_params_int(p, "step_guard", 0, 0, 1, &guard, err);
    if (!rc)
        rc = fk_params_double(p, "c_eta", 0.95, 1e-12, 100, &c->c_eta, err);
    if (!rc)
        rc = fk_params_double(p, "kappa", 0.1, 0, 0.999999, &c->kappa, err);
    if (!rc)
        rc = fk_params_double(p, "C", 2.0, 0, 1e12, &c->C, err);
    if (!rc)
        rc = fk_params_double(p, "lambda0", 1.0, 0, 1e12, &c->lambda0, err);
    if (!rc)
        rc = fk_params_double(p, "grem_step", 0.1, 1e-12, 100, &c->step, err);
    if (!rc)
        rc = fk_params_double(p, "tgmm_lambda", 0.4, 0, 1e6, &c->tgmm, err);
    const char *wts = fk_params_str(p, "fedem_weights", "n");
    if (!rc && strcmp(wts, "n") && strcmp(wts, "uniform"))
        rc = fk_err_set(err, FK_EINVAL, "fedem_weights must be 'n' or 'uniform' (got '%s')", wts);
    const char *init = fk_params_str(p, "local_init", "kmeans");
    if (!rc && strcmp(init, "kmeans") && strcmp(init, "hc"))
        rc = fk_err_set(err, FK_EINVAL, "local_init must be 'kmeans' or 'hc' (got '%s')", init);
    if (rc)
        return rc;
    c->R = (int)R;
    c->B = (int)B;
    c->restarts = (int)rs;
    c->passes = (int)passes;
    c->guard = (int)guard;
    c->uniform = !strcmp(wts, "uniform");
    c->hc_init = !strcmp(init, "hc");
    return FK_OK;
}

/* ---------------- server ---------------- */

/* 1 when every value is finite and within +-FK_GMM_MAX_ABS (alignment and the
 * central update square differences of these). */
int fk__fedgrem_all_bounded(const double *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(fabs(a[i]) <= FK_GMM_MAX_ABS))
            return 0;
    return 1;
}

/* A tensor from another party, before any use: present, exactly this shape
 * (ndim and every dim), values bounded; `nonneg` also refuses negative values. */
int fk__fedgrem_take(const fk_bundle *b, const char *name, int ndim, const uint64_t *shape,
                     int nonneg, const char *who, const fk_tensor **out, fk_err *err)
{
    const fk_tensor *t = fk_bundle_get(b, name);
    char want[64] = "";
    for (int d = 0; d < ndim; d++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%llu", d ? " x " : "",
                 (unsigned long long)shape[d]);
    if (!t)
        return fk_err_set(err, FK_EFORMAT, "%s sent no '%s' (%s)", who, name, want);
    int ok = t->ndim == ndim;
    for (int d = 0; ok && d < ndim; d++)
        ok = t->shape[d] == shape[d];
    if (!ok)
        return fk_err_set(err, FK_EFORMAT,
                          "%s sent '%s' of the wrong shape (%d dims; this job needs %s)", who, name,
                          t->ndim, want);
    for (size_t i = 0; i < t->len; i++)
        if (!(fabs(t->data[i]) <= FK_GMM_MAX_ABS) || (nonneg && t->data[i] < 0))
            return fk_err_set(err, FK_EFORMAT,
                              "%s sent '%s' with entry %zu out of bounds (must be finite%s, |x| "
                              "<= %g; a diverged or corrupt message)",
                              who, name, i, nonneg ? ", >= 0" : "", FK_GMM_MAX_ABS);
    if (out)
        *out = t;
    return FK_OK;
}

/* A scalar from another party: one value, finite, in [lo, hi]. */
int fk__fedgrem_take_scalar(const fk_bundle *b, const char *name, double lo, double hi,
                            const char *who, double *v, fk_err *err)
{
    const fk_tensor *t = fk_bundle_get(b, name);
    if (!t || t->len != 1 || !(t->data[0] >= lo && t->data[0] <= hi))
        return fk_err_set(err, FK_EFORMAT, "%s sent no scalar '%s' in [%g, %g]", who, name, lo, hi);
    *v = t->data[0];
    return FK_OK;
}

typedef struct gsrv {
    int variant, model, K, R, p, init_done, passes;
    fk__fedgrem_cfg c;
    uint64_t seed;
    double lambda;
    double *nk, *theta, *tilde, *w, *theta0, *beta, *sigma, *perm, *src;
    double *tt, *th, *work, *nkp;
} gsrv;

static void srv_free_arrays(gsrv *s)
{
    double **a[] = {&s->nk,   &s->theta, &s->tilde, &s->w,  &s->theta0, &s->beta, &s->sigma,
                    &s->perm, &s->src,   &s->tt,    &s->th, &s->work,   &s->nkp};
    for (size_t i = 0; i < sizeof a / sizeof *a; i++) {
        free(*a[i]);
        *a[i] = NULL;
    }
}

FK_CHECKRETURN static int srv_alloc(gsrv *s, int p, fk_err *err)
{
    srv_free_arrays(s);
    s->p = p;
    size_t K = (size_t)s->K, R = (size_t)s->R, P = (size_t)p;
    s->nk = calloc(K, sizeof(double));
    s->theta = calloc(K * R * P, sizeof(double));
    s->tilde = calloc(K * R * P, sizeof(double));
    s->w = calloc(K * R, sizeof(double));
    s->theta0 = calloc(K * R * P, sizeof(double));
    s->beta = calloc(R * P, sizeof(double));
    s->sigma = calloc(K * P * P, sizeof(double));
    s->perm = calloc(K * R, sizeof(double));
    s->src = calloc(R * P, sizeof(double));
    s->tt = calloc(K * P, sizeof(double));
    s->th = calloc(K * P, sizeof(double));
    s->work = calloc(K * P, sizeof(double));
    s->nkp = calloc(K, sizeof(double));
    if (!s->nk || !s->theta || !s->tilde || !s->w || !s->theta0 || !s->beta || !s->sigma ||
        !s->perm || !s->src || !s->tt || !s->th || !s->work || !s->nkp)
        return fk_err_set(err, FK_ENOMEM, "fedgrem server: out of memory for K=%d R=%d p=%d", s->K,
                          s->R, p);
    return FK_OK;
}

int fk__fedgrem_srv_init(void **out, const fk_params *p, int n_clients, uint64_t seed, int variant,
                         int model, fk_err *err)
{
    gsrv *s = calloc(1, sizeof *s);
    if (!s)
        return fk_err_set(err, FK_ENOMEM, "fedgrem server: out of memory");
    int rc = fk__fedgrem_cfg_parse(&s->c, p, err);
    if (!rc && model == FK__FEDGREM_MOR)
        rc = fk_mor_check_local_init(fk_params_str(p, "local_init", "kmeans"), err);
    if (rc) {
        free(s);
        return rc;
    }
    s->variant = variant;
    s->model = model;
    s->K = n_clients;
    s->R = s->c.R;
    s->seed = seed;
    s->lambda = s->c.lambda0;
    *out = s;
    return FK_OK;
}

void fk__fedgrem_srv_close(void *v)
{
    gsrv *s = v;
    if (!s)
        return;
    srv_free_arrays(s);
    free(s);
}

/* Every client takes part in every round: the algorithm has no sampling. */
int fk__fedgrem_srv_plan(void *v, int round, fk_rng *rng, int *chosen, int *n_chosen, fk_err *err)
{
    (void)round;
    (void)rng;
    (void)err;
    fk_plan_every_client(((const gsrv *)v)->K, chosen, n_chosen);
    return FK_OK;
}

int fk__fedgrem_srv_task(void *v, int round, int phase, int client, fk_bundle *out, fk_err *err)
{
    gsrv *s = v;
    size_t Rp = (size_t)s->R * (size_t)s->p;
    if (client < 0 || client >= s->K)
        return fk_err_set(err, FK_EINVAL, "task for unknown client %d (job has %d)", client, s->K);
    if (!s->init_done)
        return fk_bundle_put_scalar(out, "op", 0.0) ? fk_err_set(err, FK_ENOMEM, "task: no memory")
                                                    : FK_OK;
    uint64_t shape[2] = {(uint64_t)s->R, (uint64_t)s->p};
    int rc = fk_bundle_put_scalar(out, "op", 1.0);
    if (!rc)
        rc = fk_bundle_put(out, "theta", 2, shape, s->theta + (size_t)client * Rp);
    if (!rc && s->variant == FK__FEDGREM_V_POOLED_GREM)
        rc = fk_bundle_put_vec(out, "w", (size_t)s->R, s->w + (size_t)client * s->R);
    if (!rc && round == 1 && phase == 1)
        rc = fk_bundle_put_vec(out, "perm", (size_t)s->R, s->perm + (size_t)client * s->R);
    if (!rc && s->variant == FK__FEDGREM_V_TGMM) {
        double *d = fk_bundle_add(out, "src", 2, shape);
        if (!d)
            rc = FK_ENOMEM;
        for (size_t i = 0; d && i < Rp; i++)
            d[i] = s->src[i] - s->theta0[(size_t)client * Rp + i];
    }
    return rc ? fk_err_set(err, FK_ENOMEM, "task: out of memory") : FK_OK;
}

/* Initialisation phase: collect local fits, check shapes, align labels. */
FK_CHECKRETURN static int srv_aggregate_init(gsrv *s, const fk_update *ups, int n, fk_err *err)
{
    if (n != s->K)
        return fk_err_set(err, FK_ESTATE,
                          "initialisation needs the local fit of every client (%d of %d arrived); "
                          "rerun the round",
                          n, s->K);
    const fk_tensor *m0 = fk_bundle_get(&ups[0].msg, "M");
    if (!m0 || m0->ndim != 2 || m0->shape[0] != (uint64_t)s->R || m0->shape[1] < 1 ||
        m0->shape[1] > FK_GMM_MAX_P)
        return fk_err_set(err, FK_EFORMAT,
                          "client %d sent no %d x p centre matrix 'M' (1 <= p <= %d)",
                          ups[0].client, s->R, FK_GMM_MAX_P);
    int p = (int)m0->shape[1], R = s->R;
    int rc = srv_alloc(s, p, err);
    if (rc)
        return rc;
    size_t Rp = (size_t)R * p;
    double *M = malloc((size_t)s->K * Rp * sizeof *M), *W = malloc((size_t)s->K * R * sizeof *W);
    int *perm = malloc((size_t)s->K * R * sizeof *perm);
    if (!M || !W || !perm) {
        rc = fk_err_set(err, FK_ENOMEM, "initialisation: out of memory");
        goto done;
    }
    const uint64_t mshape[2] = {(uint64_t)R, (uint64_t)p}, wshape[1] = {(uint64_t)R},
                   sshape[2] = {(uint64_t)p, (uint64_t)p};
    for (int i = 0; i < n && rc == FK_OK; i++) {
        int k = ups[i].client;
        if (k < 0 || k >= s->K) {
            rc = fk_err_set(err, FK_EINVAL, "update from unknown client %d (job has %d)", k, s->K);
            break;
        }
        char who[48];
        snprintf(who, sizeof who, "client %d", k);
        const fk_bundle *u = &ups[i].msg;
        const fk_tensor *m = fk_bundle_get(u, "M"), *w = NULL, *sg = NULL;
        double nn = 0;
        if (m && m->ndim == 2 && m->shape[0] == (uint64_t)R && m->shape[1] != (uint64_t)p) {
            rc = fk_err_set(err, FK_EINVAL,
                            "p mismatch: client %d has %llu features but client %d has %d; all "
                            "clients must share one feature dimension",
                            k, (unsigned long long)m->shape[1], ups[0].client, p);
        } else if (!(rc = fk__fedgrem_take(u, "M", 2, mshape, 0, who, &m, err)) &&
                   !(rc = fk__fedgrem_take(u, "W", 1, wshape, 1, who, &w, err)) &&
                   !(rc = fk__fedgrem_take_scalar(u, "n", 1, FK_GMM_MAX_ABS, who, &nn, err)) &&
                   !(fk_bundle_get(u, "sigma") &&
                     (rc = fk__fedgrem_take(u, "sigma", 2, sshape, 0, who, &sg, err)))) {
            memcpy(M + (size_t)k * Rp, m->data, Rp * sizeof *M);
            memcpy(W + (size_t)k * R, w->data, (size_t)R * sizeof *W);
            s->nk[k] = nn;
            if (sg)
                memcpy(s->sigma + (size_t)k * p * p, sg->data, sg->len * sizeof(double));
        }
    }
    for (int k = 0; rc == FK_OK && k < s->K; k++)
        if (!(s->nk[k] > 0))
            rc = fk_err_set(err, FK_ESTATE, "client %d sent no local fit (duplicate updates?)", k);
    fk_rng rng;
    /* MoR aligns with the direct simulation's stream, so both give the same labels */
    fk_rng_init(&rng, s->seed, s->model == FK__FEDGREM_MOR ? FK_MOR_ALIGN_STREAM : ALIGN_STREAM);
    if (!rc)
        rc = fk_gmm_align(M, s->K, R, p, s->c.B, &rng, perm, err);
    for (int k = 0; rc == FK_OK && k < s->K; k++)
        for (int r = 0; r < R; r++) {
            int src = perm[(size_t)k * R + r];
            s->perm[(size_t)k * R + r] = src;
            s->w[(size_t)k * R + r] = W[(size_t)k * R + src];
            memcpy(s->theta0 + (size_t)k * Rp + (size_t)r * p, M + (size_t)k * Rp + (size_t)src * p,
                   (size_t)p * sizeof *M);
        }
    if (!rc) {
        for (int k = 0; k < s->K; k++) {
            const double *t0 =
                s->theta0 + (s->variant == FK__FEDGREM_V_POOLED_GREM ? 0 : (size_t)k * Rp);
            memcpy(s->theta + (size_t)k * Rp, t0, Rp * sizeof *M);
            if (s->variant ==
                FK__FEDGREM_V_POOLED_GREM) /* pooled starts from task 1's aligned fit */
                memcpy(s->w + (size_t)k * R, s->w, (size_t)R * sizeof *W);
            for (size_t i = 0; i < Rp; i++)
                s->src[i] += s->theta0[(size_t)k * Rp + i];
        }
        s->init_done = 1;
    }
done:
    free(M);
    free(W);
    free(perm);
    return rc;
}

static void central_all(gsrv *s, const int *present, int m)
{
    int p = s->p, R = s->R;
    size_t Rp = (size_t)R * p;
    s->lambda = fk_gmm_lambda_next(s->lambda, s->c.kappa, s->c.C, p, s->K);
    s->passes = 0;
    for (int j = 0; j < m; j++)
        s->nkp[j] = s->nk[present[j]];
    for (int r = 0; r < R; r++) {
        for (int j = 0; j < m; j++)
            memcpy(s->tt + (size_t)j * p, s->tilde + (size_t)present[j] * Rp + (size_t)r * p,
                   (size_t)p * sizeof(double));
        /* converged mode: same minimizer, warm-started from last round's beta */
        int ps = s->c.passes ? fk_gmm_central(s->tt, s->nkp, m, p, s->lambda, s->c.passes, s->th,
                                              s->beta + (size_t)r * p, s->work)
                             : fk_gmm_central_mm(s->tt, s->nkp, m, p, s->lambda, s->th,
                                                 s->beta + (size_t)r * p, s->work);
        s->passes = ps > s->passes ? ps : s->passes;
        for (int j = 0; j < m; j++)
            memcpy(s->theta + (size_t)present[j] * Rp + (size_t)r * p, s->th + (size_t)j * p,
                   (size_t)p * sizeof(double));
    }
}

static void average_all(gsrv *s, const int *present, int m)
{
    size_t Rp = (size_t)s->R * s->p;
    double tot = 0.0;
    memset(s->beta, 0, Rp * sizeof(double));
    for (int j = 0; j < m; j++) {
        double wk = s->c.uniform ? 1.0 : s->nk[present[j]];
        tot += wk;
        for (size_t i = 0; i < Rp; i++)
            s->beta[i] += wk * s->tilde[(size_t)present[j] * Rp + i];
    }
    for (size_t i = 0; i < Rp; i++)
        s->beta[i] /= tot;
    for (int k = 0; k < s->K; k++)
        memcpy(s->theta + (size_t)k * Rp, s->beta, Rp * sizeof(double));
}

/* Pooled gradient EM: summed statistics of all clients give the pooled gradient (GMM:
 * sx = sum gamma x; MoR: sx = sum gamma e x, the gradient's numerator itself). */
FK_CHECKRETURN static int pooled_step(gsrv *s, const fk_update *ups, int n, fk_err *err)
{
    int R = s->R, p = s->p;
    size_t Rp = (size_t)R * p;
    double nr[R], N = 0.0, *sx = s->tilde; /* reuse as the summed gamma^T X */
    memset(nr, 0, sizeof nr);
    memset(sx, 0, Rp * sizeof(double));
    const uint64_t nshape[1] = {(uint64_t)R}, xshape[2] = {(uint64_t)R, (uint64_t)p};
    for (int i = 0; i < n; i++) { /* validate every update before touching the state */
        char who[48];
        snprintf(who, sizeof who, "client %d", ups[i].client);
        if (ups[i].client < 0 || ups[i].client >= s->K)
            return fk_err_set(err, FK_EINVAL, "update from unknown client %d (job has %d)",
                              ups[i].client, s->K);
        int rc;
        if ((rc = fk__fedgrem_take(&ups[i].msg, "nr", 1, nshape, 1, who, NULL, err)) ||
            (rc = fk__fedgrem_take(&ups[i].msg, "sx", 2, xshape, 0, who, NULL, err)))
            return rc;
    }
    for (int i = 0; i < n; i++) {
        const fk_tensor *a = fk_bundle_get(&ups[i].msg, "nr"),
                        *b = fk_bundle_get(&ups[i].msg, "sx");
        for (int r = 0; r < R; r++)
            nr[r] += a->data[r];
        for (size_t q = 0; q < Rp; q++)
            sx[q] += b->data[q];
        N += s->nk[ups[i].client];
    }
    double eta[R];
    for (int r = 0; r < R; r++)
        eta[r] = s->c.step;
    double *th = s->beta;
    memcpy(th, s->theta, Rp * sizeof(double));
    if (s->model == FK__FEDGREM_MOR)
        for (int r = 0; r < R; r++)
            for (int j = 0; j < p; j++)
                th[r * p + j] += eta[r] / (N > 0 ? N : 1) * sx[r * p + j];
    else
        fk_gmm_grad_step(th, nr, sx, (size_t)(N > 0 ? N : 1), p, R, eta);
    for (int k = 0; k < s->K; k++) {
        memcpy(s->theta + (size_t)k * Rp, th, Rp * sizeof(double));
        for (int r = 0; r < R; r++)
            s->w[(size_t)k * R + r] = N > 0 ? nr[r] / N : s->w[(size_t)k * R + r];
    }
    return FK_OK;
}

int fk__fedgrem_srv_aggregate(void *v, int round, int phase, const fk_update *ups, int n,
                              int *round_done, fk_err *err)
{
    (void)phase;
    gsrv *s = v;
    if (!s->init_done) {
        *round_done = 0;
        return srv_aggregate_init(s, ups, n, err);
    }
    *round_done = 1;
    int R = s->R, p = s->p, present[s->K > 0 ? s->K : 1], m = 0;
    size_t Rp = (size_t)R * p;
    int rc = FK_OK;
    if (s->variant == FK__FEDGREM_V_POOLED_GREM) {
        rc = pooled_step(s, ups, n, err);
    } else {
        for (int i = 0; i < n; i++) { /* validate every update before touching the state */
            int k = ups[i].client;
            if (k < 0 || k >= s->K)
                return fk_err_set(err, FK_EINVAL,
                                  "round %d: update from unknown client %d (job "
                                  "has %d)",
                                  round, k, s->K);
            char who[64];
            snprintf(who, sizeof who, "round %d: client %d", round, k);
            const uint64_t tshape[2] = {(uint64_t)R, (uint64_t)p}, wshape[1] = {(uint64_t)R};
            if ((rc = fk__fedgrem_take(&ups[i].msg, "theta", 2, tshape, 0, who, NULL, err)) ||
                (rc = fk__fedgrem_take(&ups[i].msg, "w", 1, wshape, 1, who, NULL, err)))
                return rc;
        }
        for (int i = 0; i < n; i++) {
            int k = ups[i].client;
            const fk_tensor *t = fk_bundle_get(&ups[i].msg, "theta");
            const fk_tensor *w = fk_bundle_get(&ups[i].msg, "w");
            memcpy(s->tilde + (size_t)k * Rp, t->data, Rp * sizeof(double));
            memcpy(s->w + (size_t)k * R, w->data, (size_t)R * sizeof(double));
            present[m++] = k;
        }
        if (m == 0)
            return FK_OK; /* every update lost: keep the estimates */
        if (s->variant == FK__FEDGREM_V_FEDGREM)
            central_all(s, present, m);
        else if (s->variant == FK__FEDGREM_V_FEDEM)
            average_all(s, present, m);
        else
            for (int j = 0; j < m; j++)
                memcpy(s->theta + (size_t)present[j] * Rp, s->tilde + (size_t)present[j] * Rp,
                       Rp * sizeof(double));
    }
    for (size_t i = 0; rc == FK_OK && i < (size_t)s->K * R; i++)
        if (!isfinite(s->w[i]))
            rc = fk_err_set(err, FK_ENUMERIC, "round %d: weights of client %zu became non-finite",
                            round, i / (size_t)R);
    for (size_t i = 0; rc == FK_OK && i < (size_t)s->K * Rp; i++)
        if (!isfinite(s->theta[i]))
            rc = fk_err_set(err, FK_ENUMERIC,
                            "round %d: %s%s estimates became non-finite (client %zu); the run "
                            "diverged (try a smaller c_eta)",
                            round, VARIANT_NAME[s->variant], MODEL_NAME[s->model], i / Rp);
    return rc;
}

int fk__fedgrem_srv_model(void *v, fk_bundle *out, fk_err *err)
{
    gsrv *s = v;
    if (!s->init_done)
        return fk_err_set(err, FK_ESTATE, "no model yet: the initialisation phase has not run");
    uint64_t th[3] = {(uint64_t)s->K, (uint64_t)s->R, (uint64_t)s->p};
    uint64_t ww[2] = {(uint64_t)s->K, (uint64_t)s->R};
    uint64_t bb[2] = {(uint64_t)s->R, (uint64_t)s->p};
    uint64_t sg[3] = {(uint64_t)s->K, (uint64_t)s->p, (uint64_t)s->p};
    int rc = fk_bundle_put(out, "theta", 3, th, s->theta);
    if (!rc)
        rc = fk_bundle_put(out, "w", 2, ww, s->w);
    if (!rc)
        rc = fk_bundle_put(out, "beta", 2, bb, s->beta);
    if (!rc && s->variant == FK__FEDGREM_V_LOCAL_EM)
        rc = fk_bundle_put(out, "sigma", 3, sg, s->sigma);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "lambda", s->lambda);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "central_passes", s->passes);
    return rc ? fk_err_set(err, FK_ENOMEM, "model: out of memory") : FK_OK;
}

int fk__fedgrem_srv_save(void *v, fk_bundle *out, fk_err *err)
{
    gsrv *s = v;
    int rc = fk_bundle_put_scalar(out, "init_done", s->init_done);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "K", s->K);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "R", s->R);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "p", s->p);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "lambda", s->lambda);
    if (rc || !s->init_done)
        return rc ? fk_err_set(err, FK_ENOMEM, "save: out of memory") : FK_OK;
    size_t K = (size_t)s->K, R = (size_t)s->R, P = (size_t)s->p;
    struct {
        const char *name;
        double *a;
        size_t len;
    } arr[] = {{"nk", s->nk, K},         {"theta", s->theta, K * R * P},
               {"w", s->w, K * R},       {"theta0", s->theta0, K * R * P},
               {"beta", s->beta, R * P}, {"sigma", s->sigma, K * P * P},
               {"perm", s->perm, K * R}, {"src", s->src, R * P}};
    for (size_t i = 0; !rc && i < sizeof arr / sizeof *arr; i++)
        rc = fk_bundle_put_vec(out, arr[i].name, arr[i].len, arr[i].a);
    return rc ? fk_err_set(err, FK_ENOMEM, "save: out of memory") : FK_OK;
}

/* A whole number in [lo, hi] from a checkpoint (range first: casting out-of-range doubles is undefined). */
int fk__fedgrem_get_count(const fk_bundle *b, const char *name, double lo, double hi, int *v,
                          fk_err *err)
{
    const fk_tensor *t = fk_bundle_get(b, name);
    if (!t || t->len != 1 || !(t->data[0] >= lo && t->data[0] <= hi) ||
        t->data[0] != floor(t->data[0]))
        return fk_err_set(err, FK_EFORMAT, "checkpoint lacks a whole number '%s' in [%g, %g]", name,
                          lo, hi);
    *v = (int)t->data[0];
    return FK_OK;
}

int fk__fedgrem_srv_load(void *v, const fk_bundle *in, fk_err *err)
{
    gsrv *s = v;
    int init = 0, K = 0, R = 0, p = 0;
    double lambda = 0;
    int rc = fk__fedgrem_get_count(in, "init_done", 0, 1, &init, err);
    if (!rc)
        rc = fk__fedgrem_get_count(in, "K", 0, INT_MAX, &K, err);
    if (!rc)
        rc = fk__fedgrem_get_count(in, "R", 0, INT_MAX, &R, err);
    if (!rc)
        rc = fk__fedgrem_get_count(in, "p", 0, FK_GMM_MAX_P, &p, err);
    if (!rc)
        rc = fk__fedgrem_take_scalar(in, "lambda", 0, FK_GMM_MAX_ABS, "checkpoint", &lambda, err);
    if (rc)
        return rc;
    if (K != s->K || R != s->R)
        return fk_err_set(err, FK_EINVAL,
                          "checkpoint is for K=%d, R=%d but this job has K=%d, R=%d", K, R, s->K,
                          s->R);
    if (init && p < 1)
        return fk_err_set(err, FK_EFORMAT, "checkpoint has an invalid dimension p = %d", p);
    size_t Kz = (size_t)K, Rz = (size_t)R, P = (size_t)p;
    struct {
        const char *name;
        size_t len;
    } arr[] = {{"nk", Kz},       {"theta", Kz * Rz * P}, {"w", Kz * Rz},    {"theta0", Kz * Rz * P},
               {"beta", Rz * P}, {"sigma", Kz * P * P},  {"perm", Kz * Rz}, {"src", Rz * P}};
    enum { N_ARR = sizeof arr / sizeof *arr };
    const fk_tensor *t[N_ARR];
    for (size_t i = 0; init && i < N_ARR; i++) { /* all checked before the state changes */
        t[i] = fk_bundle_get(in, arr[i].name);
        if (!t[i] || t[i]->len != arr[i].len || !fk__fedgrem_all_bounded(t[i]->data, t[i]->len))
            return fk_err_set(err, FK_EFORMAT,
                              "checkpoint tensor '%s' is missing, has the wrong size or holds "
                              "non-finite values",
                              arr[i].name);
    }
    for (size_t i = 0; init && i < Kz * Rz; i++) { /* sent to clients as their permutation */
        double e = t[6]->data[i];
        if (!(e >= 0 && e < R) || e != floor(e))
            return fk_err_set(err, FK_EFORMAT, "checkpoint permutation entry %zu is %g", i, e);
    }
    if (init && (rc = srv_alloc(s, p, err)))
        return rc;
    double *dst[N_ARR] = {s->nk, s->theta, s->w, s->theta0, s->beta, s->sigma, s->perm, s->src};
    for (size_t i = 0; init && i < N_ARR; i++)
        memcpy(dst[i], t[i]->data, t[i]->len * sizeof(double));
    s->lambda = lambda;
    s->init_done = init;
    return FK_OK;
}

void fk__fedgrem_srv_shape(const void *v, fk__fedgrem_shape *out)
{
    const gsrv *s = v;
    *out = (fk__fedgrem_shape){.variant = s->variant,
                               .model = s->model,
                               .K = s->K,
                               .R = s->R,
                               .p = s->p,
                               .init_done = s->init_done};
}

int fk__fedgrem_srv_finished(void *v)
{
    const gsrv *s = v;
    return s->variant == FK__FEDGREM_V_LOCAL_EM && s->init_done;
}
