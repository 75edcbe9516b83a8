/* FedGMM for mixtures of regressions (spec fedgrem.md 2.5) as a federated job, `fedgmm-mor`:
 * round 1 starts with an initialisation phase (each client fits Local-EM, mixreg, and an EEE
 * mixture of R1 components to its x; the server aligns the regressions and the x-components
 * across clients with ALIGN); then every round each client runs fedgmm.c's local step from
 * the server's x-means, x-covariances and coefficients and its own pi, and the server averages
 * them (fk_fedgmm_average). The same arithmetic and streams as the direct loop (mor.c), so a
 * run equals fk_mor_run("fedgmm") on the same data and seed. pi stays on the clients; they
 * report it so the model carries the weights w_r = sum_a pi_{a,r}. */
#include "common/methods/mixture/fedgrem.h"
#include "common/methods/mixture/fedgmm_mor.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/methods/mixture/fedgrem_int.h"
#include "common/models/mixture/fedgmm.h"
#include "common/models/mixture/gmm.h"
#include "common/models/mixture/mor_local.h"

typedef struct gcfg {
    int R, R1, B, restarts, cov_first;
} gcfg;

FK_CHECKRETURN static int gcfg_parse(gcfg *c, const fk_params *p, fk_err *err)
{
    fk__fedgrem_cfg f;
    long R1;
    int rc = fk__fedgrem_cfg_parse(&f, p, err);
    if (!rc)
        rc = fk_params_int(p, "fedgmm_R1", 3, 1, 100, &R1, err);
    const char *cov = fk_params_str(p, "fedgmm_cov", "all");
    if (!rc && strcmp(cov, "all") && strcmp(cov, "first"))
        rc = fk_err_set(err, FK_EINVAL, "fedgmm_cov must be 'all' or 'first' (got '%s')", cov);
    if (rc)
        return rc;
    *c = (gcfg){.R = f.R, .R1 = (int)R1, .B = f.B, .restarts = f.restarts,
                .cov_first = !strcmp(cov, "first")};
    return FK_OK;
}

/* ---------------- server ---------------- */

typedef struct gsrv {
    int K, p, init_done, stepped;
    gcfg c;
    uint64_t seed;
    /* per client: th (R x p), w0 (R), mu (R1 x p), Sig (R1 x p x p), pi (R1 x R) */
    double *th, *w0, *mu, *Sig, *pi;
    double *spi, *smu, *sSig, *sloc, *mbar, *sbar, *tbar; /* present clients' stacks, averages */
} gsrv;

typedef struct garr {
    const char *name;
    double **a;
    size_t len;
} garr;

enum { G_ARR = 5, G_WORK = 7 };

/* Checkpointed arrays first, then the work arrays, with lengths for the current K and p. */
static void gsrv_arrays(gsrv *s, garr *out)
{
    size_t K = (size_t)s->K, R = (size_t)s->c.R, S = (size_t)s->c.R1, P = (size_t)s->p;
    garr a[G_ARR + G_WORK] = {
        {"th", &s->th, K * R * P},       {"w0", &s->w0, K * R},          {"mu", &s->mu, K * S * P},
        {"Sig", &s->Sig, K * S * P * P}, {"pi", &s->pi, K * S * R},      {"", &s->spi, K * S * R},
        {"", &s->smu, K * S * P},        {"", &s->sSig, K * S * P * P},  {"", &s->sloc, K * R * P},
        {"", &s->mbar, S * P},           {"", &s->sbar, S * P * P},      {"", &s->tbar, R * P}};
    memcpy(out, a, sizeof a);
}

static void gsrv_free(gsrv *s)
{
    garr a[G_ARR + G_WORK];
    gsrv_arrays(s, a);
    for (int i = 0; i < G_ARR + G_WORK; i++) {
        free(*a[i].a);
        *a[i].a = NULL;
    }
}

FK_CHECKRETURN static int gsrv_alloc(gsrv *s, int p, fk_err *err)
{
    gsrv_free(s);
    s->p = p;
    garr a[G_ARR + G_WORK];
    gsrv_arrays(s, a);
    for (int i = 0; i < G_ARR + G_WORK; i++)
        if (!(*a[i].a = calloc(a[i].len, sizeof(double))))
            return fk_err_set(err, FK_ENOMEM, "fedgmm-mor server: out of memory for K=%d p=%d",
                              s->K, p);
    return FK_OK;
}

FK_CHECKRETURN static int gsrv_init(void **out, const fk_params *p, int n_clients, uint64_t seed, fk_err *err)
{
    gsrv *s = calloc(1, sizeof *s);
    if (!s)
        return fk_err_set(err, FK_ENOMEM, "fedgmm-mor server: out of memory");
    int rc = gcfg_parse(&s->c, p, err);
    if (rc) {
        free(s);
        return rc;
    }
    s->K = n_clients;
    s->seed = seed;
    *out = s;
    return FK_OK;
}

static void gsrv_close(void *v)
{
    gsrv *s = v;
    if (!s)
        return;
    gsrv_free(s);
    free(s);
}

/* Every client, every round: the method has no sampling. */
FK_CHECKRETURN static int gsrv_plan(void *v, int round, fk_rng *rng, int *chosen, int *n_chosen, fk_err *err)
{
    (void)round;
    (void)rng;
    (void)err;
    fk_plan_every_client(((const gsrv *)v)->K, chosen, n_chosen);
    return FK_OK;
}

FK_CHECKRETURN static int gsrv_task(void *v, int round, int phase, int client, fk_bundle *out, fk_err *err)
{
    (void)round;
    (void)phase;
    gsrv *s = v;
    if (client < 0 || client >= s->K)
        return fk_err_set(err, FK_EINVAL, "task for unknown client %d (job has %d)", client, s->K);
    int rc = fk_bundle_put_scalar(out, "op", s->init_done);
    if (!rc && s->init_done) {
        uint64_t R = (uint64_t)s->c.R, S = (uint64_t)s->c.R1, P = (uint64_t)s->p;
        const uint64_t ts[2] = {R, P}, ms[2] = {S, P}, ss[3] = {S, P, P};
        size_t k = (size_t)client;
        if (!(rc = fk_bundle_put(out, "theta", 2, ts, s->th + k * R * P)) &&
            !(rc = fk_bundle_put_vec(out, "w0", R, s->w0 + k * R)) &&
            !(rc = fk_bundle_put(out, "mu", 2, ms, s->mu + k * S * P)))
            rc = fk_bundle_put(out, "Sig", 3, ss, s->Sig + k * S * P * P);
    }
    return rc ? fk_err_set(err, FK_ENOMEM, "fedgmm-mor task: out of memory") : FK_OK;
}

/* Updates from this job's clients, each once, in order, with the tensors of the phase. */
FK_CHECKRETURN static int check_updates(gsrv *s, const fk_update *ups, int n, fk_err *err)
{
    const fk_tensor *m0 = n ? fk_bundle_get(&ups[0].msg, s->init_done ? "loc" : "M") : NULL;
    int p = s->init_done ? s->p : m0 && m0->ndim == 2 ? (int)m0->shape[1] : 0;
    if (n && (p < 1 || p > FK_GMM_MAX_P))
        return fk_err_set(err, FK_EFORMAT, "client %d sent no R x p coefficients (1 <= p <= %d)",
                          ups[0].client, FK_GMM_MAX_P);
    uint64_t R = (uint64_t)s->c.R, S = (uint64_t)s->c.R1, P = (uint64_t)p;
    const uint64_t rp[2] = {R, P}, r1[1] = {R}, sp[2] = {S, P}, spp[3] = {S, P, P}, q[1] = {S * R};
    for (int i = 0; i < n; i++) {
        if (ups[i].client < 0 || ups[i].client >= s->K || (i && ups[i].client <= ups[i - 1].client))
            return fk_err_set(err, FK_EINVAL,
                              "update from unknown or repeated client %d (job has %d)",
                              ups[i].client, s->K);
        char who[48];
        snprintf(who, sizeof who, "client %d", ups[i].client);
        const fk_bundle *u = &ups[i].msg;
        const fk_tensor *m = fk_bundle_get(u, s->init_done ? "loc" : "M");
        if (m && m->ndim == 2 && m->shape[0] == R && m->shape[1] != P)
            return fk_err_set(err, FK_EINVAL,
                              "p mismatch: client %d has %llu features but client %d has %d; all "
                              "clients must share one feature dimension",
                              ups[i].client, (unsigned long long)m->shape[1], ups[0].client, p);
        double nn;
        int rc;
        if (!s->init_done) {
            if ((rc = fk__fedgrem_take(u, "M", 2, rp, 0, who, NULL, err)) ||
                (rc = fk__fedgrem_take(u, "W", 1, r1, 1, who, NULL, err)) ||
                (rc = fk__fedgrem_take(u, "mu", 2, sp, 0, who, NULL, err)) ||
                (rc = fk__fedgrem_take(u, "Sig", 3, spp, 0, who, NULL, err)) ||
                (rc = fk__fedgrem_take_scalar(u, "n", 1, FK_GMM_MAX_ABS, who, &nn, err)))
                return rc;
        } else if ((rc = fk__fedgrem_take(u, "loc", 2, rp, 0, who, NULL, err)) ||
                   (rc = fk__fedgrem_take(u, "pi", 1, q, 1, who, NULL, err)) ||
                   (rc = fk__fedgrem_take(u, "mu", 2, sp, 0, who, NULL, err)) ||
                   (rc = fk__fedgrem_take(u, "Sig", 3, spp, 0, who, NULL, err))) {
            return rc;
        }
    }
    return FK_OK;
}

void fk__fedgmm_mor_shape(const void *v, fk__fedgmm_mor_shape_t *out)
{
    const gsrv *s = v;
    *out = (fk__fedgmm_mor_shape_t){.K = s->K, .R = s->c.R, .R1 = s->c.R1, .p = s->p,
                                    .init_done = s->init_done};
}

/* Round 1's initialisation: every client's fits, aligned (regressions with the stream of
 * the direct loop's init_all, x-components with fk_fedgmm_align_x). */
FK_CHECKRETURN static int agg_init(gsrv *s, const fk_update *ups, int n, fk_err *err)
{
    if (n != s->K)
        return fk_err_set(err, FK_ESTATE,
                          "initialisation needs the local fits of every client (%d of %d "
                          "arrived); rerun the round",
                          n, s->K);
    int R = s->c.R, S = s->c.R1, rc = gsrv_alloc(s, (int)fk_bundle_get(&ups[0].msg, "M")->shape[1],
                                                   err);
    size_t P = (size_t)s->p, Rp = (size_t)R * P;
    int *perm = malloc((size_t)s->K * R * sizeof *perm);
    if (!rc && !perm)
        rc = fk_err_set(err, FK_ENOMEM, "fedgmm-mor: out of memory");
    for (int k = 0; !rc && k < s->K; k++) { /* the local fits, stacked (sloc: M) */
        const fk_bundle *u = &ups[k].msg;
        memcpy(s->sloc + k * Rp, fk_bundle_get(u, "M")->data, Rp * sizeof(double));
        memcpy(s->spi + (size_t)k * R, fk_bundle_get(u, "W")->data, (size_t)R * sizeof(double));
        memcpy(s->mu + k * S * P, fk_bundle_get(u, "mu")->data, S * P * sizeof(double));
        memcpy(s->Sig + k * S * P * P, fk_bundle_get(u, "Sig")->data, S * P * P * sizeof(double));
    }
    fk_rng g;
    fk_rng_init(&g, s->seed, FK_MOR_ALIGN_STREAM);
    if (!rc)
        rc = fk_gmm_align(s->sloc, s->K, R, s->p, s->c.B, &g, perm, err);
    for (int k = 0; !rc && k < s->K; k++)
        for (int r = 0; r < R; r++) {
            int src = perm[k * R + r];
            s->w0[(size_t)k * R + r] = s->spi[(size_t)k * R + src];
            memcpy(s->th + k * Rp + (size_t)r * P, s->sloc + k * Rp + (size_t)src * P,
                   P * sizeof(double));
        }
    if (!rc)
        rc = fk_fedgmm_align_x(s->mu, s->K, S, s->p, s->c.B, s->seed, err);
    for (int k = 0; !rc && k < s->K; k++)
        fk_fedgmm_pi_init(s->w0 + (size_t)k * R, R, S, s->pi + (size_t)k * S * R);
    free(perm);
    if (!rc)
        s->init_done = 1;
    return rc;
}

/* A step: the present clients' pi, x-moments and coefficients averaged; every client gets
 * the averages (the direct loop's server). */
static void agg_step(gsrv *s, const fk_update *ups, int n)
{
    int R = s->c.R, S = s->c.R1;
    size_t P = (size_t)s->p, Rp = (size_t)R * P, Q = (size_t)S * R;
    for (int i = 0; i < n; i++) {
        const fk_bundle *u = &ups[i].msg;
        memcpy(s->spi + i * Q, fk_bundle_get(u, "pi")->data, Q * sizeof(double));
        memcpy(s->smu + i * S * P, fk_bundle_get(u, "mu")->data, S * P * sizeof(double));
        memcpy(s->sSig + i * S * P * P, fk_bundle_get(u, "Sig")->data, S * P * P * sizeof(double));
        memcpy(s->sloc + i * Rp, fk_bundle_get(u, "loc")->data, Rp * sizeof(double));
        memcpy(s->pi + (size_t)ups[i].client * Q, s->spi + i * Q, Q * sizeof(double));
    }
    fk_fedgmm_average(n, R, S, s->p, s->spi, s->smu, s->sSig, s->sloc, s->c.cov_first, s->mbar,
                      s->sbar, s->tbar);
    for (int k = 0; k < s->K; k++) {
        memcpy(s->mu + k * S * P, s->mbar, S * P * sizeof(double));
        memcpy(s->Sig + k * S * P * P, s->sbar, S * P * P * sizeof(double));
        memcpy(s->th + k * Rp, s->tbar, Rp * sizeof(double));
    }
    s->stepped = 1;
}

FK_CHECKRETURN static int gsrv_aggregate(void *v, int round, int phase, const fk_update *ups, int n,
                          int *round_done, fk_err *err)
{
    (void)phase;
    gsrv *s = v;
    int rc = check_updates(s, ups, n, err);
    if (rc)
        return fk_err_prefix(err, rc, "round %d: ", round);
    if (!s->init_done) {
        *round_done = 0;
        return agg_init(s, ups, n, err);
    }
    *round_done = 1;
    if (n == 0)
        return FK_OK; /* every update lost: keep the estimates */
    agg_step(s, ups, n);
    if (!fk__fedgrem_all_bounded(s->th, (size_t)s->K * s->c.R * s->p) ||
        !fk__fedgrem_all_bounded(s->mu, (size_t)s->K * s->c.R1 * s->p) ||
        !fk__fedgrem_all_bounded(s->Sig, (size_t)s->K * s->c.R1 * s->p * s->p))
        return fk_err_set(err, FK_ENUMERIC,
                          "round %d: fedgmm-mor estimates became non-finite; the run diverged",
                          round);
    return FK_OK;
}

FK_CHECKRETURN static int gsrv_model(void *v, fk_bundle *out, fk_err *err)
{
    gsrv *s = v;
    if (!s->init_done)
        return fk_err_set(err, FK_ESTATE, "no model yet: the initialisation phase has not run");
    size_t K = (size_t)s->K, R = (size_t)s->c.R, S = (size_t)s->c.R1, P = (size_t)s->p;
    const uint64_t th[3] = {K, R, P}, ww[2] = {K, R};
    double *w = fk_bundle_add(out, "w", 2, ww);
    if (!w || fk_bundle_put(out, "theta", 3, th, s->th))
        return fk_err_set(err, FK_ENOMEM, "model: out of memory");
    for (size_t k = 0; k < K; k++)
        fk_fedgmm_weights(s->pi + k * S * R, (int)R, (int)S, w + k * R);
    const uint64_t ms[2] = {S, P}, ss[3] = {S, P, P};
    if (fk_bundle_put(out, "mu", 2, ms, s->mu) || fk_bundle_put(out, "Sig", 3, ss, s->Sig) ||
        fk_bundle_put_scalar(out, "stepped", s->stepped))
        return fk_err_set(err, FK_ENOMEM, "model: out of memory");
    return FK_OK;
}

FK_CHECKRETURN static int gsrv_save(void *v, fk_bundle *out, fk_err *err)
{
    gsrv *s = v;
    int rc = fk_bundle_put_scalar(out, "init_done", s->init_done);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "stepped", s->stepped);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "K", s->K);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "p", s->p);
    garr a[G_ARR + G_WORK];
    gsrv_arrays(s, a);
    for (int i = 0; !rc && s->init_done && i < G_ARR; i++)
        rc = fk_bundle_put_vec(out, a[i].name, a[i].len, *a[i].a);
    return rc ? fk_err_set(err, FK_ENOMEM, "save: out of memory") : FK_OK;
}

FK_CHECKRETURN static int gsrv_load(void *v, const fk_bundle *in, fk_err *err)
{
    gsrv *s = v, t = *s;
    int init = 0, stepped = 0, K = 0, p = 0;
    int rc = fk__fedgrem_get_count(in, "init_done", 0, 1, &init, err);
    if (!rc)
        rc = fk__fedgrem_get_count(in, "stepped", 0, 1, &stepped, err);
    if (!rc)
        rc = fk__fedgrem_get_count(in, "K", 0, INT_MAX, &K, err);
    if (!rc)
        rc = fk__fedgrem_get_count(in, "p", 0, FK_GMM_MAX_P, &p, err);
    if (rc)
        return rc;
    if (K != s->K)
        return fk_err_set(err, FK_EINVAL, "checkpoint is for K=%d but this job has K=%d", K, s->K);
    if (init && p < 1)
        return fk_err_set(err, FK_EFORMAT, "checkpoint has an invalid dimension p = %d", p);
    t.p = p;
    garr a[G_ARR + G_WORK];
    gsrv_arrays(&t, a); /* lengths for the checkpoint's p */
    const fk_tensor *ts[G_ARR];
    for (int i = 0; init && i < G_ARR; i++) { /* all checked before the state changes */
        ts[i] = fk_bundle_get(in, a[i].name);
        if (!ts[i] || ts[i]->len != a[i].len || !fk__fedgrem_all_bounded(ts[i]->data, ts[i]->len))
            return fk_err_set(err, FK_EFORMAT,
                              "checkpoint tensor '%s' is missing, has the wrong size or holds "
                              "non-finite values",
                              a[i].name);
    }
    if (init && (rc = gsrv_alloc(s, p, err)))
        return rc;
    gsrv_arrays(s, a);
    for (int i = 0; init && i < G_ARR; i++)
        memcpy(*a[i].a, ts[i]->data, a[i].len * sizeof(double));
    s->p = p;
    s->init_done = init;
    s->stepped = stepped;
    return FK_OK;
}

/* ---------------- client ---------------- */

typedef struct gcli {
    int k, K, p, pi_set;
    gcfg c;
    uint64_t seed;
    size_t n;
    const double *X, *y;
    double *pi, *loc, *mu, *Sig, *W, *M;
    fk_mor_ws ws;
    fk_fedgmm_ws g;
} gcli;

static void gcli_close(void *v)
{
    gcli *c = v;
    if (!c)
        return;
    free(c->pi);
    free(c->loc);
    free(c->mu);
    free(c->Sig);
    free(c->W);
    free(c->M);
    fk_mor_ws_close(&c->ws);
    fk_fedgmm_ws_close(&c->g);
    free(c);
}

FK_CHECKRETURN static int gcli_init(void **out, const fk_params *p, const fk_dataset *data, int client,
                     int n_clients, uint64_t seed, fk_err *err)
{
    gcfg cf;
    int rc = gcfg_parse(&cf, p, err);
    if (!rc)
        rc = fk__fedgrem_check_data(data, client, cf.R, err);
    if (!rc)
        rc = fk__fedgrem_check_mor_data(data, client, err);
    if (!rc && data->X.rows < (size_t)cf.R1)
        rc = fk_err_set(err, FK_EINVAL,
                        "client %d has %zu samples for fedgmm_R1 = %d x-components; lower "
                        "fedgmm_R1",
                        client, data->X.rows, cf.R1);
    if (rc)
        return rc;
    gcli *c = calloc(1, sizeof *c);
    if (!c)
        return fk_err_set(err, FK_ENOMEM, "client: out of memory");
    size_t n = data->X.rows, P = data->X.cols, R = (size_t)cf.R, S = (size_t)cf.R1;
    *c = (gcli){.k = client, .K = n_clients, .p = (int)P, .c = cf, .seed = seed, .n = n,
                .X = data->X.data, .y = data->y_raw};
    c->pi = calloc(S * R, sizeof(double));
    c->loc = calloc(R * P, sizeof(double));
    c->mu = calloc(S * P, sizeof(double));
    c->Sig = calloc(S * P * P, sizeof(double));
    c->W = calloc(R, sizeof(double));
    c->M = calloc(R * P, sizeof(double));
    if (!c->pi || !c->loc || !c->mu || !c->Sig || !c->W || !c->M ||
        fk_mor_ws_open(&c->ws, n, c->p, cf.R, err) ||
        fk_fedgmm_ws_open(&c->g, n, c->p, cf.R, cf.R1, err)) {
        gcli_close(c);
        return fk_err_set(err, FK_ENOMEM, "client %d: out of memory (n=%zu)", client, n);
    }
    *out = c;
    return FK_OK;
}

/* Initialisation: Local-EM (mixreg) and the x-mixture, on the direct loop's streams. */
FK_CHECKRETURN static int gcli_fit(gcli *c, fk_bundle *up, fk_err *err)
{
    fk_rng rng;
    fk_rng_init(&rng, c->seed, FK_MOR_INIT_STREAM + (uint64_t)c->k);
    int rc = fk_mor_mixreg_fit(c->X, c->y, c->n, c->p, c->c.R, c->c.restarts, &rng, c->W, c->M,
                               &c->ws, err);
    if (!rc)
        rc = fk_fedgmm_init_x(c->X, c->n, c->p, c->c.R1, c->c.restarts, c->seed, c->k, c->mu,
                              c->Sig, err);
    if (rc)
        return fk_err_prefix(err, rc, "client %d local fit: ", c->k);
    uint64_t R = (uint64_t)c->c.R, S = (uint64_t)c->c.R1, P = (uint64_t)c->p;
    const uint64_t rp[2] = {R, P}, sp[2] = {S, P}, spp[3] = {S, P, P};
    if (fk_bundle_put(up, "M", 2, rp, c->M) || fk_bundle_put_vec(up, "W", R, c->W) ||
        fk_bundle_put(up, "mu", 2, sp, c->mu) || fk_bundle_put(up, "Sig", 3, spp, c->Sig) ||
        fk_bundle_put_scalar(up, "n", (double)c->n))
        return fk_err_set(err, FK_ENOMEM, "client: out of memory");
    return FK_OK;
}

FK_CHECKRETURN static int gcli_step(void *v, const fk_bundle *task, fk_bundle *up, fk_report *rep, fk_err *err)
{
    gcli *c = v;
    const fk_tensor *op = fk_bundle_get(task, "op");
    if (!op || op->len != 1 || !(op->data[0] == 0.0 || op->data[0] == 1.0))
        return fk_err_set(err, FK_EFORMAT, "task lacks 'op' (0 = local fits, 1 = step)");
    rep->n_samples = (double)c->n;
    if (op->data[0] == 0.0) {
        int rc = gcli_fit(c, up, err);
        if (!rc) { /* round 1 scores the local (mixreg) fit */
            (void)fk_mor_estep(c->X, c->y, c->n, c->p, c->W, c->M, NULL, c->c.R, c->ws.G, NULL);
            rep->rmse = fk_mor_fit_rmse(c->X, c->y, c->n, c->p, c->M, c->c.R, c->ws.G);
        }
        return rc;
    }
    uint64_t R = (uint64_t)c->c.R, S = (uint64_t)c->c.R1, P = (uint64_t)c->p;
    const uint64_t rp[2] = {R, P}, r1[1] = {R}, sp[2] = {S, P}, spp[3] = {S, P, P}, q[1] = {S * R};
    const fk_tensor *th, *w0, *mu, *Sig;
    const char *who = "the server's task";
    int rc;
    if ((rc = fk__fedgrem_take(task, "theta", 2, rp, 0, who, &th, err)) ||
        (rc = fk__fedgrem_take(task, "w0", 1, r1, 1, who, &w0, err)) ||
        (rc = fk__fedgrem_take(task, "mu", 2, sp, 0, who, &mu, err)) ||
        (rc = fk__fedgrem_take(task, "Sig", 3, spp, 0, who, &Sig, err)))
        return rc;
    if (!c->pi_set) { /* the first step starts pi from the aligned Local-EM weights */
        fk_fedgmm_pi_init(w0->data, (int)R, (int)S, c->pi);
        c->pi_set = 1;
    }
    memcpy(c->mu, mu->data, S * P * sizeof(double));
    memcpy(c->Sig, Sig->data, S * P * P * sizeof(double));
    /* the round's quality: RMSE of the model the round started from (its regressions and the
     * mixing weights of this client's pi, which the server's model reports), before the step */
    double wk[R];
    fk_fedgmm_weights(c->pi, (int)R, (int)S, wk);
    (void)fk_mor_estep(c->X, c->y, c->n, c->p, wk, th->data, NULL, (int)R, c->ws.G, NULL);
    rep->rmse = fk_mor_fit_rmse(c->X, c->y, c->n, c->p, th->data, (int)R, c->ws.G);
    rc = fk_fedgmm_local(c->X, c->y, c->n, c->p, (int)R, (int)S, th->data, c->pi, c->mu, c->Sig,
                         c->loc, &c->ws, &c->g, err);
    if (rc)
        return fk_err_prefix(err, rc, "client %d: ", c->k);
    if (fk_bundle_put(up, "loc", 2, rp, c->loc) || fk_bundle_put(up, "pi", 1, q, c->pi) ||
        fk_bundle_put(up, "mu", 2, sp, c->mu) || fk_bundle_put(up, "Sig", 3, spp, c->Sig))
        return fk_err_set(err, FK_ENOMEM, "client: out of memory");
    return FK_OK;
}

/* Unit-noise negative log-likelihood per sample of this client's slice of the model. */
FK_CHECKRETURN static int gcli_evaluate(void *v, const fk_bundle *model, fk_report *rep, fk_err *err)
{
    gcli *c = v;
    uint64_t K = (uint64_t)c->K, R = (uint64_t)c->c.R, P = (uint64_t)c->p;
    const uint64_t ts[3] = {K, R, P}, ws[2] = {K, R};
    const fk_tensor *t, *w;
    int rc;
    if ((rc = fk__fedgrem_take(model, "theta", 3, ts, 0, "the model", &t, err)) ||
        (rc = fk__fedgrem_take(model, "w", 2, ws, 1, "the model", &w, err)))
        return rc;
    rep->n_samples = (double)c->n;
    rep->loss = -fk_mor_estep(c->X, c->y, c->n, c->p, w->data + c->k * R,
                              t->data + c->k * R * P, NULL, (int)R, c->ws.G, NULL) /
                (double)c->n;
    rep->rmse = fk_mor_fit_rmse(c->X, c->y, c->n, c->p, t->data + c->k * R * P, (int)R, c->ws.G);
    return FK_OK;
}

FK_CHECKRETURN static int gcli_save(void *v, fk_bundle *out, fk_err *err)
{
    gcli *c = v;
    if (fk_bundle_put_scalar(out, "pi_set", c->pi_set) ||
        fk_bundle_put_vec(out, "pi", (size_t)c->c.R1 * c->c.R, c->pi))
        return fk_err_set(err, FK_ENOMEM, "client save: out of memory");
    return FK_OK;
}

FK_CHECKRETURN static int gcli_load(void *v, const fk_bundle *in, fk_err *err)
{
    gcli *c = v;
    int set;
    size_t Q = (size_t)c->c.R1 * c->c.R;
    int rc = fk__fedgrem_get_count(in, "pi_set", 0, 1, &set, err);
    if (rc)
        return rc;
    const fk_tensor *t = fk_bundle_get(in, "pi");
    if (!t || t->len != Q || !fk__fedgrem_all_bounded(t->data, Q))
        return fk_err_set(err, FK_EFORMAT,
                          "client checkpoint tensor 'pi' is missing, has the wrong size or holds "
                          "non-finite values");
    for (size_t i = 0; i < Q; i++)
        if (t->data[i] < 0)
            return fk_err_set(err, FK_EFORMAT, "client checkpoint weight %zu is negative", i);
    memcpy(c->pi, t->data, Q * sizeof(double));
    c->pi_set = set;
    return FK_OK;
}

const fk_method fk_method_fedgmm_mor = {
    .name = "fedgmm-mor",
    .summary = "FedGMM for mixtures of regressions: R1 x-components, averaged x-moments and "
               "coefficients",
    .server_init = gsrv_init,
    .server_close = gsrv_close,
    .plan = gsrv_plan,
    .task = gsrv_task,
    .aggregate = gsrv_aggregate,
    .model = gsrv_model,
    .save = gsrv_save,
    .load = gsrv_load,
    .check_update = fk__fedgmm_mor_check,
    .client_init = gcli_init,
    .client_close = gcli_close,
    .local_step = gcli_step,
    .evaluate = gcli_evaluate,
    .predict = fk__mixture_predict_mor,
    .client_save = gcli_save,
    .client_load = gcli_load,
    .keys = fk__fedgmm_mor_keys,
};
