/* Pooled-EM for mixtures of regressions (spec fedgrem.md 2.6 with 2.1's mixreg analogue) as a
 * federated job, `pooled-em-mor`: mixture-of-regressions EM with per-component noise variance
 * on the union of all clients' data, from summed statistics, one step per round, the
 * `restarts` runs side by side:
 *   round 1   each client draws a random hard partition of its points per restart (so the
 *             union's partition is uniformly random, as mixreg's restarts) and sends its sums
 *   then      the server's M-step per restart and component: theta_r = A_r^-1 b_r,
 *             sigma_r^2 = (c_r - 2 theta_r^T b_r + theta_r^T A_r theta_r) / n_r, w_r = n_r / N,
 *             with A_r = X^T G_r X, b_r = X^T G_r y, c_r = y^T G_r y, n_r = sum G_r; the
 *             clients' E-step at the new parameters gives the log-likelihood (stop at relative
 *             change 1e-6, or 1000 steps) and the next sums.
 * A restart fails when a component keeps fewer than p + 1 points' weight or its system is
 * singular, as in fk_mor_mixreg_fit. A round that lacks a client's update is repeated, not
 * aggregated; the draws depend on the step count only, so dropouts never change the fit. */
#include "common/methods/mixture/fedgrem.h"
#include "common/methods/mixture/pooled_em.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/methods/mixture/fedgrem_int.h"
#include "common/methods/mixture/pooled_int.h"
#include "common/models/mixture/gmm.h"
#include "common/models/mixture/mor_local.h"

static const uint64_t PART_STREAM = 0x7065707400000000ULL; /* client: hard partitions */
static const double MOR_TOL = 1e-6;                       /* mixreg's relative tolerance */
enum { MOR_CAP = 1000 };

/* ---------------- server ---------------- */

typedef struct msrv {
    /* first (fk__pooled_srv_new, fk__pooled_plan rely on it); op 1 once partitions are summed */
    fk__pooled_head h;
    /* per restart: stage, iters, ll, ll_old (S); th (S x R x p), w, s2 (S x R) */
    double *stage, *iters, *ll, *ll_old, *th, *w, *s2;
    double *A, *b, *nr, *c, *work; /* summed statistics of one restart, factor work space */
} msrv;

enum { M_ARR = 7 };

static void msrv_arrays(msrv *s, fk__pooled_arr *out)
{
    size_t S = (size_t)s->h.S, R = (size_t)s->h.R, P = (size_t)s->h.p;
    fk__pooled_arr a[M_ARR] = {{"stage", &s->stage, S},    {"iters", &s->iters, S},
                     {"ll", &s->ll, S},          {"ll_old", &s->ll_old, S},
                     {"th", &s->th, S * R * P},  {"w", &s->w, S * R},
                     {"s2", &s->s2, S * R}};
    memcpy(out, a, sizeof a);
}

static void msrv_free(msrv *s)
{
    fk__pooled_arr a[M_ARR];
    msrv_arrays(s, a);
    fk__pooled_free(a, M_ARR);
    double **wk[] = {&s->A, &s->b, &s->nr, &s->c, &s->work};
    for (size_t i = 0; i < sizeof wk / sizeof *wk; i++) {
        free(*wk[i]);
        *wk[i] = NULL;
    }
}

FK_CHECKRETURN static int msrv_alloc(msrv *s, int p, fk_err *err)
{
    msrv_free(s);
    s->h.p = p;
    size_t R = (size_t)s->h.R, P = (size_t)p;
    fk__pooled_arr a[M_ARR];
    msrv_arrays(s, a);
    s->A = malloc(R * P * P * sizeof(double));
    s->b = malloc(R * P * sizeof(double));
    s->nr = malloc(R * sizeof(double));
    s->c = malloc(R * sizeof(double));
    s->work = malloc(P * P * sizeof(double));
    int ok = s->A && s->b && s->nr && s->c && s->work;
    for (int i = 0; i < M_ARR; i++)
        ok = ok && (*a[i].a = calloc(a[i].len, sizeof(double))) != NULL;
    return ok ? FK_OK
              : fk_err_set(err, FK_ENOMEM,
                           "pooled-em-mor server: out of memory for R=%d p=%d restarts=%d", s->h.R,
                           p, s->h.S);
}

FK_CHECKRETURN static int msrv_init(void **out, const fk_params *p, int n_clients, uint64_t seed, fk_err *err)
{
    return fk__pooled_srv_new(out, sizeof(msrv), p, n_clients, seed, err);
}

static void msrv_close(void *v)
{
    msrv *s = v;
    if (!s)
        return;
    msrv_free(s);
    free(s);
}

/* The restart the model is: the best finished one, else the best running one; -1 if none. */
static int msrv_best(const msrv *s)
{
    int b = -1;
    for (int want = FK__POOLED_S_DONE; s->h.op && b < 0 && want >= FK__POOLED_S_EM; want--)
        for (int r = 0; r < s->h.S; r++)
            if (s->stage[r] == want && (b < 0 || s->ll[r] > s->ll[b]))
                b = r;
    return b;
}

FK_CHECKRETURN static int msrv_task(void *v, int round, int phase, int client, fk_bundle *out, fk_err *err)
{
    (void)round;
    (void)phase;
    msrv *s = v;
    int rc = fk__pooled_task_head(&s->h, client, out, err);
    if (rc)
        return rc;
    if (s->h.op) {
        uint64_t S = (uint64_t)s->h.S, R = (uint64_t)s->h.R, P = (uint64_t)s->h.p;
        const uint64_t ts[3] = {S, R, P}, ws[2] = {S, R};
        if (!(rc = fk_bundle_put_vec(out, "stage", s->h.S, s->stage)) &&
            !(rc = fk_bundle_put(out, "th", 3, ts, s->th)) &&
            !(rc = fk_bundle_put(out, "w", 2, ws, s->w)))
            rc = fk_bundle_put(out, "s2", 2, ws, s->s2);
        if (!rc) /* the restart the round's model is, for the client to score */
            rc = fk_bundle_put_scalar(out, "best", msrv_best(s));
    }
    return rc ? fk_err_set(err, FK_ENOMEM, "pooled-em-mor task: out of memory") : FK_OK;
}

/* Every client once, in order, each with the sums of every restart: A (S x R x p x p),
 * b (S x R x p), nr and c (S x R), ll (S), n. */
FK_CHECKRETURN static int mcheck_updates(msrv *s, const fk_update *ups, int n, fk_err *err)
{
    const fk_tensor *b0 = n ? fk_bundle_get(&ups[0].msg, "b") : NULL;
    int p = s->h.op ? s->h.p : b0 && b0->ndim == 3 ? (int)b0->shape[2] : 0;
    if (n && (p < 1 || p > FK_GMM_MAX_P))
        return fk_err_set(err, FK_EFORMAT, "client %d sent no sums 'b' (restarts x R x p)",
                          ups[0].client);
    int rc0 = fk__pooled_check_clients(&s->h, ups, n, err);
    if (rc0)
        return rc0;
    for (int i = 0; i < n; i++) {
        char who[48];
        snprintf(who, sizeof who, "client %d", ups[i].client);
        const fk_bundle *u = &ups[i].msg;
        const fk_tensor *bi = fk_bundle_get(u, "b");
        if (bi && bi->ndim == 3 && bi->shape[2] != (uint64_t)p)
            return fk_err_set(err, FK_EINVAL,
                              "p mismatch: client %d has %llu features but client %d has %d; all "
                              "clients must share one feature dimension",
                              ups[i].client, (unsigned long long)bi->shape[2], ups[0].client, p);
        uint64_t S = (uint64_t)s->h.S, R = (uint64_t)s->h.R, P = (uint64_t)p;
        const uint64_t as[4] = {S, R, P, P}, bs[3] = {S, R, P}, rs[2] = {S, R}, sv[1] = {S};
        double nn;
        int rc;
        if ((rc = fk__fedgrem_take(u, "A", 4, as, 0, who, NULL, err)) ||
            (rc = fk__fedgrem_take(u, "b", 3, bs, 0, who, NULL, err)) ||
            (rc = fk__fedgrem_take(u, "nr", 2, rs, 1, who, NULL, err)) ||
            (rc = fk__fedgrem_take(u, "c", 2, rs, 1, who, NULL, err)) ||
            (rc = fk__fedgrem_take(u, "ll", 1, sv, 0, who, NULL, err)) ||
            (rc = fk__fedgrem_take_scalar(u, "n", 1, FK_GMM_MAX_ABS, who, &nn, err)))
            return rc;
    }
    return FK_OK;
}

/* Restart r's sums over all clients into s->A, b, nr, c. */
static void msum(msrv *s, int r, const fk_update *ups)
{
    size_t R = (size_t)s->h.R, P = (size_t)s->h.p;
    memset(s->A, 0, R * P * P * sizeof(double));
    memset(s->b, 0, R * P * sizeof(double));
    memset(s->nr, 0, R * sizeof(double));
    memset(s->c, 0, R * sizeof(double));
    for (int k = 0; k < s->h.K; k++) {
        const fk_bundle *u = &ups[k].msg;
        cblas_daxpy((int)(R * P * P), 1.0, fk_bundle_get(u, "A")->data + r * R * P * P, 1, s->A, 1);
        cblas_daxpy((int)(R * P), 1.0, fk_bundle_get(u, "b")->data + r * R * P, 1, s->b, 1);
        cblas_daxpy((int)R, 1.0, fk_bundle_get(u, "nr")->data + r * R, 1, s->nr, 1);
        cblas_daxpy((int)R, 1.0, fk_bundle_get(u, "c")->data + r * R, 1, s->c, 1);
    }
}

/* M-step of restart r from its sums; a component with under p + 1 points' weight or a
 * singular system ends the restart. */
static void mstep(msrv *s, int r)
{
    int R = s->h.R, p = s->h.p;
    for (int q = 0; q < R; q++) {
        const double *A = s->A + (size_t)q * p * p, *b = s->b + (size_t)q * p;
        double *th = s->th + ((size_t)r * R + q) * p, nr = s->nr[q];
        if (nr < (double)(p + 1) || fk_mor_solve(A, b, p, 0.0, th, s->work)) {
            s->stage[r] = FK__POOLED_S_FAILED;
            return;
        }
        double tAt = 0.0; /* theta^T A theta from the full symmetric A */
        for (int i = 0; i < p; i++)
            tAt += th[i] * cblas_ddot(p, A + (size_t)i * p, 1, th, 1);
        double ss = s->c[q] - 2.0 * cblas_ddot(p, th, 1, b, 1) + tAt;
        s->w[(size_t)r * R + q] = nr / s->h.N;
        s->s2[(size_t)r * R + q] = fmax(ss / nr, 1e-6);
    }
}

static int msrv_finished(void *v)
{
    msrv *s = v;
    if (!s->h.op)
        return 0;
    for (int r = 0; r < s->h.S; r++)
        if (s->stage[r] == FK__POOLED_S_EM)
            return 0;
    return 1;
}

/* Restart r after the clients' E-step at its parameters: converged, failed, or M-step. */
static void mstep_em(msrv *s, int r, const fk_update *ups)
{
    double ll = 0.0;
    for (int k = 0; k < s->h.K; k++)
        ll += fk_bundle_get(&ups[k].msg, "ll")->data[r];
    if (!fk__pooled_em_advance(s->stage, s->iters, s->ll, s->ll_old, r, ll, ll <= -FK_GMM_MAX_ABS,
                               MOR_TOL, MOR_CAP))
        return;
    msum(s, r, ups);
    mstep(s, r);
}

FK_CHECKRETURN static int msrv_aggregate(void *v, int round, int phase, const fk_update *ups, int n,
                          int *round_done, fk_err *err)
{
    (void)phase;
    msrv *s = v;
    *round_done = 1;
    if (msrv_finished(s))
        return FK_OK;
    int rc = mcheck_updates(s, ups, n, err);
    if (rc)
        return fk_err_prefix(err, rc, "round %d: ", round);
    if ((rc = fk__pooled_incomplete(&s->h, n, round, "pooled-em-mor", err)))
        return rc < 0 ? rc : FK_OK; /* sums need every client: the same step next round */
    if (!s->h.op) { /* the random partitions' M-step */
        if ((rc = msrv_alloc(s, (int)fk_bundle_get(&ups[0].msg, "b")->shape[2], err)))
            return rc;
        s->h.N = 0.0;
        for (int k = 0; k < s->h.K; k++)
            s->h.N += fk_bundle_get(&ups[k].msg, "n")->data[0];
        for (int r = 0; r < s->h.S; r++) {
            s->stage[r] = FK__POOLED_S_EM;
            s->ll_old[r] = -FK_GMM_MAX_ABS;
            msum(s, r, ups);
            mstep(s, r);
        }
        s->h.op = 1;
    } else {
        for (int r = 0; r < s->h.S; r++)
            if (s->stage[r] == FK__POOLED_S_EM)
                mstep_em(s, r, ups);
    }
    int failed = 0;
    for (int r = 0; r < s->h.S; r++)
        failed += s->stage[r] == FK__POOLED_S_FAILED;
    if (failed == s->h.S)
        return fk_err_set(err, FK_ENUMERIC,
                          "pooled-em-mor: all %d restarts failed (a component lost its points or "
                          "its weighted least squares was singular)",
                          s->h.S);
    s->h.tick++;
    return FK_OK;
}

FK_CHECKRETURN static int msrv_model(void *v, fk_bundle *out, fk_err *err)
{
    msrv *s = v;
    int b = msrv_best(s);
    int rc = fk_bundle_put_scalar(out, "ready", b >= 0);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "converged", msrv_finished(s));
    if (!rc)
        rc = fk_bundle_put_scalar(out, "repeats", s->h.repeats);
    if (rc || b < 0)
        return rc ? fk_err_set(err, FK_ENOMEM, "model: out of memory") : FK_OK;
    size_t K = (size_t)s->h.K, R = (size_t)s->h.R, P = (size_t)s->h.p;
    const uint64_t th[3] = {K, R, P}, ww[2] = {K, R};
    double *t = fk_bundle_add(out, "theta", 3, th), *w = fk_bundle_add(out, "w", 2, ww);
    double *s2 = fk_bundle_add(out, "s2", 2, ww);
    if (!t || !w || !s2)
        return fk_err_set(err, FK_ENOMEM, "model: out of memory");
    for (size_t k = 0; k < K; k++) { /* one pooled model for every client */
        memcpy(t + k * R * P, s->th + (size_t)b * R * P, R * P * sizeof(double));
        memcpy(w + k * R, s->w + (size_t)b * R, R * sizeof(double));
        memcpy(s2 + k * R, s->s2 + (size_t)b * R, R * sizeof(double));
    }
    if (fk_bundle_put_scalar(out, "loglik", s->ll[b]) ||
        fk_bundle_put_scalar(out, "em_iterations", s->iters[b]))
        return fk_err_set(err, FK_ENOMEM, "model: out of memory");
    return FK_OK;
}

FK_CHECKRETURN static int msrv_save(void *v, fk_bundle *out, fk_err *err)
{
    msrv *s = v;
    fk__pooled_arr a[M_ARR];
    msrv_arrays(s, a);
    return fk__pooled_save(&s->h, a, M_ARR, out, err);
}

FK_CHECKRETURN static int msrv_load(void *v, const fk_bundle *in, fk_err *err)
{
    msrv *s = v, t = *s;
    fk__pooled_head got;
    int rc = fk__pooled_load_head(&s->h, in, 1, &got, err);
    if (rc)
        return rc;
    const fk_tensor *ts[M_ARR];
    fk__pooled_arr a[M_ARR];
    t.h.p = got.p;
    msrv_arrays(&t, a); /* lengths for the checkpoint's p */
    if (got.op && (rc = fk__pooled_take_arrays(in, a, M_ARR, ts, err)))
        return rc;
    for (int r = 0; got.op && r < s->h.S; r++) {
        double st = ts[0]->data[r];
        if (!(st == FK__POOLED_S_EM || st == FK__POOLED_S_DONE || st == FK__POOLED_S_FAILED))
            return fk_err_set(err, FK_EFORMAT, "checkpoint restart %d has stage %g", r, st);
    }
    if (got.op && (rc = msrv_alloc(s, got.p, err)))
        return rc;
    msrv_arrays(s, a);
    for (int i = 0; got.op && i < M_ARR; i++)
        memcpy(*a[i].a, ts[i]->data, a[i].len * sizeof(double));
    s->h = got;
    return FK_OK;
}

/* ---------------- client ---------------- */

typedef struct mcli {
    int k, K, R, S, p;
    uint64_t seed;
    size_t n;
    const double *X, *y;
    double *G, *B; /* responsibilities (n x R), weighted rows (n x p) */
} mcli;

static void mcli_close(void *v)
{
    mcli *c = v;
    if (!c)
        return;
    free(c->G);
    free(c->B);
    free(c);
}

FK_CHECKRETURN static int mcli_init(void **out, const fk_params *p, const fk_dataset *data, int client,
                     int n_clients, uint64_t seed, fk_err *err)
{
    fk__fedgrem_cfg cf;
    int rc = fk__fedgrem_cfg_parse(&cf, p, err);
    if (!rc)
        rc = fk__fedgrem_check_data(data, client, cf.R, err);
    if (!rc)
        rc = fk__fedgrem_check_mor_data(data, client, err);
    if (rc)
        return rc;
    if (n_clients >= 1 << FK__POOLED_CLIENT_BITS)
        return fk_err_set(err, FK_ELIMIT, "pooled-em-mor takes at most %d clients",
                          1 << FK__POOLED_CLIENT_BITS);
    mcli *c = calloc(1, sizeof *c);
    if (!c)
        return fk_err_set(err, FK_ENOMEM, "client: out of memory");
    size_t n = data->X.rows;
    *c = (mcli){.k = client, .K = n_clients, .R = cf.R, .S = cf.restarts,
                .p = (int)data->X.cols, .seed = seed, .n = n, .X = data->X.data, .y = data->y_raw};
    c->G = malloc(n * (size_t)c->R * sizeof(double));
    c->B = malloc(n * (size_t)c->p * sizeof(double));
    if (!c->G || !c->B) {
        mcli_close(c);
        return fk_err_set(err, FK_ENOMEM, "client %d: out of memory (n=%zu)", client, n);
    }
    *out = c;
    return FK_OK;
}

/* Component q's sums from the responsibilities in c->G: A = X^T G_q X, b = X^T G_q y,
 * c = y^T G_q y, n_q = sum G_q. */
static void mcli_sums(mcli *c, int q, double *A, double *b, double *cq, double *nq)
{
    int R = c->R, p = c->p;
    double s = 0.0, yy = 0.0;
    memset(b, 0, (size_t)p * sizeof *b);
    for (size_t i = 0; i < c->n; i++) {
        double g = c->G[i * (size_t)R + q];
        const double *x = c->X + i * (size_t)p;
        for (int j = 0; j < p; j++)
            c->B[i * (size_t)p + j] = g * x[j];
        cblas_daxpy(p, g * c->y[i], x, 1, b, 1);
        s += g;
        yy += g * c->y[i] * c->y[i];
    }
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, p, p, (int)c->n, 1.0, c->B, p, c->X, p,
                0.0, A, p);
    *cq = yy;
    *nq = s;
}

/* The step's task, checked: stages, coefficients, weights, variances (> 0). */
FK_CHECKRETURN static int mcli_task(const mcli *c, const fk_bundle *task, const fk_tensor **t, fk_err *err)
{
    uint64_t S = (uint64_t)c->S, R = (uint64_t)c->R, P = (uint64_t)c->p;
    const uint64_t sv[1] = {S}, ts[3] = {S, R, P}, ws[2] = {S, R};
    const char *who = "the server's task";
    int rc;
    if ((rc = fk__fedgrem_take(task, "stage", 1, sv, 1, who, &t[0], err)) ||
        (rc = fk__fedgrem_take(task, "th", 3, ts, 0, who, &t[1], err)) ||
        (rc = fk__fedgrem_take(task, "w", 2, ws, 1, who, &t[2], err)) ||
        (rc = fk__fedgrem_take(task, "s2", 2, ws, 1, who, &t[3], err)))
        return rc;
    for (size_t i = 0; i < S * R; i++)
        if (t[0]->data[i / R] == FK__POOLED_S_EM && !(t[3]->data[i] >= 1e-300))
            return fk_err_set(err, FK_EFORMAT, "%s has noise variance %g for restart %zu", who,
                              t[3]->data[i], i / R);
    return FK_OK;
}

/* The round's quality: RMSE of the fitted regression under the restart the server's model is
 * at the start of the round (the task's "best"; none yet: not measured). Uses G, which the
 * step recomputes. */
FK_CHECKRETURN static int mcli_score(mcli *c, const fk_bundle *task, const fk_tensor *const *t, fk_report *rep,
                      fk_err *err)
{
    const fk_tensor *b = fk_bundle_get(task, "best");
    if (!b || b->len != 1 || !(b->data[0] >= 0))
        return FK_OK;
    if (b->data[0] != floor(b->data[0]) || b->data[0] >= c->S)
        return fk_err_set(err, FK_EFORMAT, "the server's task names restart %g of %d as its model",
                          b->data[0], c->S);
    size_t r = (size_t)b->data[0], R = (size_t)c->R, P = (size_t)c->p;
    for (size_t q = 0; q < R; q++)
        if (!(t[3]->data[r * R + q] >= 1e-300))
            return fk_err_set(err, FK_EFORMAT, "the server's task has noise variance %g for its model",
                              t[3]->data[r * R + q]);
    (void)fk_mor_estep(c->X, c->y, c->n, c->p, t[2]->data + r * R, t[1]->data + r * R * P,
                       t[3]->data + r * R, c->R, c->G, NULL);
    rep->rmse = fk_mor_fit_rmse(c->X, c->y, c->n, c->p, t[1]->data + r * R * P, c->R, c->G);
    return FK_OK;
}

FK_CHECKRETURN static int mcli_step(void *v, const fk_bundle *task, fk_bundle *up, fk_report *rep, fk_err *err)
{
    mcli *c = v;
    int op;
    uint64_t tick;
    const fk_tensor *t[4] = {0};
    int rc = fk__pooled_task_op(task, 1, &op, &tick, err); /* 0: partition, 1: EM step */
    if (!rc && op == 1)
        rc = mcli_task(c, task, t, err);
    if (!rc && op == 1)
        rc = mcli_score(c, task, t, rep, err);
    if (rc)
        return rc;
    uint64_t S = (uint64_t)c->S, R = (uint64_t)c->R, P = (uint64_t)c->p;
    const uint64_t as[4] = {S, R, P, P}, bs[3] = {S, R, P}, rs[2] = {S, R}, sv[1] = {S};
    double *A = fk_bundle_add(up, "A", 4, as), *b = fk_bundle_add(up, "b", 3, bs);
    double *nr = fk_bundle_add(up, "nr", 2, rs), *cc = fk_bundle_add(up, "c", 2, rs);
    double *ll = fk_bundle_add(up, "ll", 1, sv);
    if (!A || !b || !nr || !cc || !ll || fk_bundle_put_scalar(up, "n", (double)c->n))
        return fk_err_set(err, FK_ENOMEM, "client: out of memory");
    memset(A, 0, S * R * P * P * sizeof *A);
    memset(b, 0, S * R * P * sizeof *b);
    memset(nr, 0, S * R * sizeof *nr);
    memset(cc, 0, S * R * sizeof *cc);
    memset(ll, 0, S * sizeof *ll);
    fk_rng rng; /* the same partitions however often the step is repeated */
    fk_rng_init(&rng, c->seed, PART_STREAM + (tick << FK__POOLED_CLIENT_BITS) + (uint64_t)c->k);
    double best = -INFINITY;
    for (int r = 0; r < c->S; r++) {
        if (op == 0) { /* a random hard partition, as mixreg's restarts */
            memset(c->G, 0, c->n * R * sizeof(double));
            for (size_t i = 0; i < c->n; i++)
                c->G[i * R + fk_rng_below(&rng, R)] = 1.0;
        } else if (t[0]->data[r] == FK__POOLED_S_EM) {
            ll[r] = fk_mor_estep(c->X, c->y, c->n, c->p, t[2]->data + r * R,
                                 t[1]->data + r * R * P, t[3]->data + r * R, c->R, c->G, NULL);
            if (!(fabs(ll[r]) < FK_GMM_MAX_ABS)) {
                ll[r] = -FK_GMM_MAX_ABS; /* the server ends this restart */
                continue;
            }
            best = ll[r] > best ? ll[r] : best;
        } else {
            continue;
        }
        for (int q = 0; q < c->R; q++)
            mcli_sums(c, q, A + (r * R + q) * P * P, b + (r * R + q) * P, cc + r * R + q,
                      nr + r * R + q);
    }
    rep->n_samples = (double)c->n;
    if (best > -INFINITY)
        rep->loss = -best / (double)c->n;
    return FK_OK;
}

/* Negative log-likelihood per sample under the pooled model, with its noise variances. */
FK_CHECKRETURN static int mcli_evaluate(void *v, const fk_bundle *model, fk_report *rep, fk_err *err)
{
    mcli *c = v;
    uint64_t K = (uint64_t)c->K, R = (uint64_t)c->R, P = (uint64_t)c->p;
    const uint64_t ts[3] = {K, R, P}, ws[2] = {K, R};
    const fk_tensor *t, *w, *s2;
    const char *who = "the pooled-em-mor model";
    int rc;
    if (fk__pooled_model_unready(model)) /* no parameters yet: nothing measured (NaN) */
        return FK_OK;
    if ((rc = fk__fedgrem_take(model, "theta", 3, ts, 0, who, &t, err)) ||
        (rc = fk__fedgrem_take(model, "w", 2, ws, 1, who, &w, err)) ||
        (rc = fk__fedgrem_take(model, "s2", 2, ws, 1, who, &s2, err)))
        return rc;
    for (uint64_t q = 0; q < R; q++)
        if (!(s2->data[c->k * R + q] >= 1e-300))
            return fk_err_set(err, FK_EFORMAT, "%s has noise variance %g", who,
                              s2->data[c->k * R + q]);
    rep->n_samples = (double)c->n;
    rep->loss = -fk_mor_estep(c->X, c->y, c->n, c->p, w->data + c->k * R,
                              t->data + c->k * R * P, s2->data + c->k * R, c->R, c->G, NULL) /
                (double)c->n;
    rep->rmse = fk_mor_fit_rmse(c->X, c->y, c->n, c->p, t->data + c->k * R * P, c->R, c->G);
    return FK_OK;
}

/* The partitions' round, then at most MOR_CAP E-steps. */
static int msrv_max_rounds(const fk_params *p)
{
    (void)p;
    return 1 + MOR_CAP;
}

const fk_method fk_method_pooled_em_mor = {
    .name = "pooled-em-mor",
    .summary = "mixture-of-regressions EM (mixreg) on the union of all clients via summed "
               "statistics",
    .server_init = msrv_init,
    .server_close = msrv_close,
    .plan = fk__pooled_plan,
    .task = msrv_task,
    .aggregate = msrv_aggregate,
    .model = msrv_model,
    .save = msrv_save,
    .load = msrv_load,
    .finished = msrv_finished,
    .check_update = fk__pooled_em_mor_check,
    .max_rounds = msrv_max_rounds,
    .client_init = mcli_init,
    .client_close = mcli_close,
    .local_step = mcli_step,
    .evaluate = mcli_evaluate,
    .predict = fk__mixture_predict_mor,
    .keys = fk__pooled_keys,
    .client_save = fk__pooled_em_cli_save,
    .client_load = fk__pooled_em_cli_load,
};
