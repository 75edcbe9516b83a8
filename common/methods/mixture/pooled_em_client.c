/* The pooled-em job's client (pooled_em.c holds the server and the table): one step of the
 * pooled fit on this client's data per task (sums, scatter, or per restart a seeding, Lloyd or
 * EM step), no state beyond a cache of the data centred with the task's pooled mean. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/hungarian.h"
#include "common/methods/mixture/fedgrem_int.h"
#include "common/methods/mixture/pooled_int.h"
#include "common/models/mixture/gmm.h"

/* A client keeps no algorithm state: every task carries what its step needs. The centred
 * data is a cache keyed by the pooled mean it was centred with. */
typedef struct pcli {
    int k, K, R, S, p, centred;
    uint64_t seed;
    size_t n;
    const fk_dataset *d;
    double *mean, *Xc, *xsq, *D, *Z, *mu_t, *dmin;
} pcli;

void fk__pooled_em_cli_close(void *v)
{
    pcli *c = v;
    if (!c)
        return;
    double *a[] = {c->mean, c->Xc, c->xsq, c->D, c->Z, c->mu_t, c->dmin};
    for (size_t i = 0; i < sizeof a / sizeof *a; i++)
        free(a[i]);
    free(c);
}

int fk__pooled_em_cli_init(void **out, const fk_params *p, const fk_dataset *data, int client,
                          int n_clients, uint64_t seed, fk_err *err)
{
    fk__fedgrem_cfg cf;
    int rc = fk__fedgrem_cfg_parse(&cf, p, err);
    if (!rc)
        rc = fk__fedgrem_check_data(data, client, cf.R, err);
    if (rc)
        return rc;
    if (n_clients >= 1 << FK__POOLED_CLIENT_BITS)
        return fk_err_set(err, FK_ELIMIT, "pooled-em takes at most %d clients", 1 << FK__POOLED_CLIENT_BITS);
    pcli *c = calloc(1, sizeof *c);
    if (!c)
        return fk_err_set(err, FK_ENOMEM, "client: out of memory");
    size_t n = data->X.rows, P = data->X.cols, R = (size_t)cf.R;
    *c = (pcli){.k = client, .K = n_clients, .R = cf.R, .S = cf.restarts, .p = (int)P,
                .seed = seed, .n = n, .d = data};
    c->mean = malloc(P * sizeof(double));
    c->Xc = malloc(n * P * sizeof(double));
    c->xsq = malloc(n * sizeof(double));
    c->D = malloc(n * R * sizeof(double));
    c->Z = malloc(n * P * sizeof(double));
    c->mu_t = malloc(R * P * sizeof(double));
    c->dmin = malloc(n * sizeof(double));
    if (!c->mean || !c->Xc || !c->xsq || !c->D || !c->Z || !c->mu_t || !c->dmin) {
        fk__pooled_em_cli_close(c);
        return fk_err_set(err, FK_ENOMEM, "client %d: out of memory (n=%zu)", client, n);
    }
    *out = c;
    return FK_OK;
}

/* The data centred with the task's pooled mean (recomputed only when the mean changes). */
FK_CHECKRETURN static int centre(pcli *c, const fk_bundle *task, fk_err *err)
{
    const uint64_t ps[1] = {(uint64_t)c->p};
    const fk_tensor *m;
    int rc = fk__fedgrem_take(task, "mean", 1, ps, 0, "the server's task", &m, err);
    if (rc)
        return rc;
    size_t P = (size_t)c->p;
    if (c->centred && !memcmp(c->mean, m->data, P * sizeof(double)))
        return FK_OK;
    memcpy(c->mean, m->data, P * sizeof(double));
    const double *X = c->d->X.data;
    for (size_t i = 0; i < c->n; i++) {
        double *x = c->Xc + i * P;
        for (size_t j = 0; j < P; j++)
            x[j] = X[i * P + j] - c->mean[j];
        c->xsq[i] = cblas_ddot(c->p, x, 1, x, 1);
    }
    c->centred = 1;
    return FK_OK;
}

/* Round 1: sample count and feature sums. */
static int put_sums(pcli *c, fk_bundle *up)
{
    double *sum = fk_bundle_add(up, "sum", 1, (const uint64_t[]){(uint64_t)c->p});
    if (!sum)
        return FK_ENOMEM;
    memset(sum, 0, (size_t)c->p * sizeof *sum);
    for (size_t i = 0; i < c->n; i++)
        cblas_daxpy(c->p, 1.0, c->d->X.data + i * (size_t)c->p, 1, sum, 1);
    return fk_bundle_put_scalar(up, "n", (double)c->n);
}

/* Row i of the centred data drawn with probability wt[i] / sum (uniform when wt is NULL). */
static const double *draw_point(const pcli *c, const double *wt, double tot, fk_rng *rng)
{
    size_t pick = (size_t)fk_rng_below(rng, c->n);
    if (wt && tot > 0) {
        double u = fk_rng_uniform(rng) * tot, acc = 0.0;
        for (pick = 0; pick + 1 < c->n; pick++) {
            acc += wt[pick];
            if (acc > u)
                break;
        }
    }
    return c->Xc + pick * (size_t)c->p;
}

/* Round 2: scatter about the pooled mean and one uniform point per restart. */
static int put_scatter(pcli *c, fk_rng *rng, fk_bundle *up)
{
    size_t P = (size_t)c->p;
    double *xtx = fk_bundle_add(up, "xtx", 2, (const uint64_t[]){P, P});
    double *cand = fk_bundle_add(up, "cand", 2, (const uint64_t[]){(uint64_t)c->S, P});
    if (!xtx || !cand)
        return FK_ENOMEM;
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c->p, c->p, (int)c->n, 1.0, c->Xc, c->p,
                c->Xc, c->p, 0.0, xtx, c->p);
    for (int r = 0; r < c->S; r++)
        memcpy(cand + (size_t)r * P, draw_point(c, NULL, 0, rng), P * sizeof(double));
    return FK_OK;
}

/* Seeding: squared distance of every point to its nearest seed; their sum and a point drawn
 * by them. */
static void seed_step(pcli *c, const double *C, int ncent, fk_rng *rng, double *tot, double *cand)
{
    fk_gmm_sqdist(c->Xc, c->n, c->p, c->xsq, C, ncent, c->D);
    double t = 0.0;
    for (size_t i = 0; i < c->n; i++) {
        double m = c->D[i * (size_t)ncent];
        for (int j = 1; j < ncent; j++)
            m = c->D[i * (size_t)ncent + j] < m ? c->D[i * (size_t)ncent + j] : m;
        c->dmin[i] = m;
        t += m;
    }
    *tot = t;
    memcpy(cand, draw_point(c, c->dmin, t, rng), (size_t)c->p * sizeof(double));
}

/* Lloyd: nearest-centre counts and sums, and the point farthest from its centre. */
static void lloyd_step(pcli *c, const double *C, double *nr, double *sx, double *far,
                       double *fard)
{
    int R = c->R, p = c->p;
    fk_gmm_sqdist(c->Xc, c->n, p, c->xsq, C, R, c->D);
    size_t fi = 0;
    double fd = -1.0;
    for (size_t i = 0; i < c->n; i++) {
        const double *d = c->D + i * (size_t)R;
        int b = 0;
        for (int r = 1; r < R; r++)
            if (d[r] < d[b])
                b = r;
        nr[b] += 1.0;
        cblas_daxpy(p, 1.0, c->Xc + i * (size_t)p, 1, sx + (size_t)b * p, 1);
        if (d[b] > fd) {
            fd = d[b];
            fi = i;
        }
    }
    *fard = fd;
    memcpy(far, c->Xc + fi * (size_t)p, (size_t)p * sizeof(double));
}

/* EM: E-step with the server's factor; responsibilities' counts and sums, log-likelihood
 * (-FK_GMM_MAX_ABS when it is not finite: the server ends the restart). */
static double em_step(pcli *c, const double *w, const double *mu, const double *chol, double *nr,
                      double *sx)
{
    double ll = fk_gmm_eee_estep(c->Xc, c->n, c->p, w, mu, chol, c->R, c->D, c->Z, c->mu_t);
    if (!(fabs(ll) < FK_GMM_MAX_ABS))
        return -FK_GMM_MAX_ABS;
    fk_gmm_stats(c->Xc, c->n, c->p, c->D, c->R, nr, sx);
    return ll;
}

/* The main step's task tensors, checked: stages, seed counts, centres, weights, factors. */
FK_CHECKRETURN static int main_task(const pcli *c, const fk_bundle *task, const fk_tensor **t, fk_err *err)
{
    uint64_t S = (uint64_t)c->S, R = (uint64_t)c->R, P = (uint64_t)c->p;
    const uint64_t sv[1] = {S}, srp[3] = {S, R, P}, sr[2] = {S, R}, spp[3] = {S, P, P};
    const char *who = "the server's task";
    int rc;
    if ((rc = fk__fedgrem_take(task, "stage", 1, sv, 1, who, &t[0], err)) ||
        (rc = fk__fedgrem_take(task, "ncent", 1, sv, 1, who, &t[1], err)) ||
        (rc = fk__fedgrem_take(task, "C", 3, srp, 0, who, &t[2], err)) ||
        (rc = fk__fedgrem_take(task, "w", 2, sr, 1, who, &t[3], err)) ||
        (rc = fk__fedgrem_take(task, "chol", 3, spp, 0, who, &t[4], err)))
        return rc;
    for (int r = 0; r < c->S; r++) {
        double st = t[0]->data[r], nc = t[1]->data[r];
        if (st != floor(st) || st > FK__POOLED_S_FAILED || nc != floor(nc) || nc > c->R ||
            (st == FK__POOLED_S_SEED && nc < 1))
            return fk_err_set(err, FK_EFORMAT, "%s has restart %d at stage %g with %g seeds", who,
                              r, st, nc);
        for (int j = 0; st == FK__POOLED_S_EM && j < c->p; j++) /* a factor's diagonal is positive */
            if (!(t[4]->data[((size_t)r * P + j) * P + j] > 0))
                return fk_err_set(err, FK_EFORMAT,
                                  "%s has a Cholesky factor for restart %d with diagonal entry "
                                  "%d not > 0",
                                  who, r, j);
    }
    return FK_OK;
}

FK_CHECKRETURN static int put_main(pcli *c, const fk_bundle *task, fk_rng *rng, fk_bundle *up, double *ll_out,
                    fk_err *err)
{
    const fk_tensor *t[5];
    int rc = main_task(c, task, t, err);
    if (rc)
        return rc;
    uint64_t S = (uint64_t)c->S, R = (uint64_t)c->R, P = (uint64_t)c->p;
    const uint64_t sv[1] = {S}, sp[2] = {S, P}, sr[2] = {S, R}, srp[3] = {S, R, P};
    double *tot = fk_bundle_add(up, "tot", 1, sv), *cand = fk_bundle_add(up, "cand", 2, sp);
    double *nr = fk_bundle_add(up, "nr", 2, sr), *sx = fk_bundle_add(up, "sx", 3, srp);
    double *far = fk_bundle_add(up, "far", 2, sp), *fard = fk_bundle_add(up, "fard", 1, sv);
    double *ll = fk_bundle_add(up, "ll", 1, sv);
    if (!tot || !cand || !nr || !sx || !far || !fard || !ll)
        return fk_err_set(err, FK_ENOMEM, "client: out of memory");
    memset(tot, 0, S * sizeof *tot);
    memset(cand, 0, S * P * sizeof *cand);
    memset(nr, 0, S * R * sizeof *nr);
    memset(sx, 0, S * R * P * sizeof *sx);
    memset(far, 0, S * P * sizeof *far);
    memset(fard, 0, S * sizeof *fard);
    memset(ll, 0, S * sizeof *ll);
    *ll_out = -INFINITY;
    for (int r = 0; r < c->S; r++) {
        int st = (int)t[0]->data[r];
        const double *C = t[2]->data + (size_t)r * R * P;
        if (st == FK__POOLED_S_SEED)
            seed_step(c, C, (int)t[1]->data[r], rng, tot + r, cand + (size_t)r * P);
        else if (st == FK__POOLED_S_LLOYD)
            lloyd_step(c, C, nr + (size_t)r * R, sx + (size_t)r * R * P, far + (size_t)r * P,
                       fard + r);
        else if (st == FK__POOLED_S_EM)
            ll[r] = em_step(c, t[3]->data + (size_t)r * R, C, t[4]->data + (size_t)r * P * P,
                            nr + (size_t)r * R, sx + (size_t)r * R * P);
        if (st == FK__POOLED_S_EM && ll[r] > *ll_out)
            *ll_out = ll[r];
    }
    return FK_OK;
}

/* The round's quality where the client holds classes: its rows' clusters under the restart
 * the server's model is at the start of the round (the task's "best", the global best restart,
 * not this client's), scored against the classes. No such restart yet (still seeding): not
 * measured. */
FK_CHECKRETURN static int score_model(pcli *c, const fk_bundle *task, fk_report *rep, fk_err *err)
{
    const fk_tensor *b = fk_bundle_get(task, "best");
    if (!c->d->y || c->d->n_classes <= 0 || !b || b->len != 1 || !(b->data[0] >= 0))
        return FK_OK;
    if (b->data[0] != floor(b->data[0]) || b->data[0] >= c->S)
        return fk_err_set(err, FK_EFORMAT, "the server's task names restart %g of %d as its model",
                          b->data[0], c->S);
    size_t r = (size_t)b->data[0], R = (size_t)c->R, P = (size_t)c->p;
    const double *mu = fk_bundle_get(task, "C")->data + r * R * P; /* main_task checked shapes */
    const double *w = fk_bundle_get(task, "w")->data + r * R;
    const double *chol = fk_bundle_get(task, "chol")->data + r * P * P;
    for (size_t j = 0; j < P; j++)
        if (!(chol[j * P + j] > 0))
            return fk_err_set(err, FK_EFORMAT,
                              "the server's task has a Cholesky factor for its model (restart "
                              "%zu) with diagonal entry %zu not > 0",
                              r, j);
    int *lab = malloc(c->n * sizeof *lab);
    if (!lab)
        return fk_err_set(err, FK_ENOMEM, "client: out of memory scoring the round");
    (void)fk_gmm_eee_estep(c->Xc, c->n, c->p, w, mu, chol, c->R, c->D, c->Z, c->mu_t);
    fk_report_argmax(c->D, c->n, c->R, 0, lab);
    int rc = fk_report_score_clusters(rep, c->d->y, lab, c->n, c->d->n_classes, c->R, err);
    free(lab);
    return rc;
}

int fk__pooled_em_cli_step(void *v, const fk_bundle *task, fk_bundle *up, fk_report *rep,
                          fk_err *err)
{
    pcli *c = v;
    int op;
    uint64_t tick;
    int rc = fk__pooled_task_op(task, FK__POOLED_G_MAIN, &op, &tick, err); /* sums, scatter or a step */
    if (rc)
        return rc;
    rep->n_samples = (double)c->n;
    if (op == FK__POOLED_G_SUMS)
        return put_sums(c, up) ? fk_err_set(err, FK_ENOMEM, "client: out of memory") : FK_OK;
    rc = centre(c, task, err);
    if (rc)
        return rc;
    fk_rng rng; /* the same draws however often a step is repeated */
    fk_rng_init(&rng, c->seed, FK__POOLED_CAND_STREAM + (tick << FK__POOLED_CLIENT_BITS) + (uint64_t)c->k);
    if (op == FK__POOLED_G_SCATTER)
        return put_scatter(c, &rng, up) ? fk_err_set(err, FK_ENOMEM, "client: out of memory")
                                        : FK_OK;
    double best = -INFINITY; /* the best restart's log-likelihood on this client, while in EM */
    rc = put_main(c, task, &rng, up, &best, err);
    if (!rc && best > -FK_GMM_MAX_ABS)
        rep->loss = -best / (double)c->n;
    if (!rc)
        rc = score_model(c, task, rep, err);
    return rc;
}

/* Negative log-likelihood per sample under the pooled EEE model and, with labels, the
 * mis-clustering rate of its hard labels. */
int fk__pooled_em_cli_evaluate(void *v, const fk_bundle *model, fk_report *rep, fk_err *err)
{
    pcli *c = v;
    size_t R = (size_t)c->R, P = (size_t)c->p, K = (size_t)c->K;
    const uint64_t th[3] = {K, R, P}, ww[2] = {K, R}, sg[3] = {K, P, P};
    const fk_tensor *t, *w, *g;
    const char *who = "the pooled-em model";
    int rc;
    if (fk__pooled_model_unready(model)) /* no parameters yet: nothing measured (NaN) */
        return FK_OK;
    if ((rc = fk__fedgrem_take(model, "theta", 3, th, 0, who, &t, err)) ||
        (rc = fk__fedgrem_take(model, "w", 2, ww, 1, who, &w, err)) ||
        (rc = fk__fedgrem_take(model, "sigma", 3, sg, 0, who, &g, err)))
        return rc;
    const double *mu = t->data + c->k * R * P, *wk = w->data + c->k * R;
    double *sigma = malloc(P * P * sizeof *sigma), *chol = malloc(P * P * sizeof *chol);
    int *lab = malloc(c->n * sizeof *lab);
    if (!sigma || !chol || !lab) {
        rc = fk_err_set(err, FK_ENOMEM, "evaluate: out of memory");
        goto done;
    }
    memcpy(sigma, g->data + c->k * P * P, P * P * sizeof *sigma);
    if (fk_gmm_eee_chol(sigma, c->p, chol, NULL)) {
        rc = fk_err_set(err, FK_ENUMERIC, "%s has a covariance that is not positive definite", who);
        goto done;
    }
    const double *X = c->d->X.data; /* the uncentred data against the uncentred model */
    rep->n_samples = (double)c->n;
    rep->loss = -fk_gmm_eee_estep(X, c->n, c->p, wk, mu, chol, c->R, c->D, c->Z, c->mu_t) /
                (double)c->n;
    if (c->d->y && c->d->n_classes > 0) {
        fk_report_argmax(c->D, c->n, c->R, 0, lab);
        rc = fk_report_score_clusters(rep, c->d->y, lab, c->n, c->d->n_classes, c->R, err);
    }
done:
    free(sigma);
    free(chol);
    free(lab);
    return rc;
}

/* Nothing to keep: the client's steps are functions of the task and the data. */
int fk__pooled_em_cli_save(void *v, fk_bundle *out, fk_err *err)
{
    (void)v;
    return fk_bundle_put_scalar(out, "stateless", 1) ? fk_err_set(err, FK_ENOMEM, "out of memory")
                                                      : FK_OK;
}

int fk__pooled_em_cli_load(void *v, const fk_bundle *in, fk_err *err)
{
    (void)v;
    (void)in;
    (void)err;
    return FK_OK;
}
