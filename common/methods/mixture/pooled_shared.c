/* The parts of the pooled-em and pooled-em-mor servers and clients that do not depend on the
 * model: the job's head, the all-clients plan, update order, and checkpoints. */
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/methods/mixture/fedgrem_int.h"
#include "common/methods/mixture/pooled_int.h"
#include "common/models/mixture/gmm.h"

int fk__pooled_srv_new(void **out, size_t size, const fk_params *p, int n_clients,
                      uint64_t seed, fk_err *err)
{
    fk__fedgrem_cfg c;
    long maxrep;
    int rc = fk__fedgrem_cfg_parse(&c, p, err);
    if (!rc)
        rc = fk_params_int(p, "max_repeats", 20, 0, 1000000, &maxrep, err);
    if (rc)
        return rc;
    fk__pooled_head *h = calloc(1, size);
    if (!h)
        return fk_err_set(err, FK_ENOMEM, "pooled server: out of memory");
    *h = (fk__pooled_head){.K = n_clients, .R = c.R, .S = c.restarts, .seed = seed,
                          .max_repeats = (int)maxrep};
    *out = h;
    return FK_OK;
}

int fk__pooled_plan(void *srv, int round, fk_rng *rng, int *chosen, int *n_chosen, fk_err *err)
{
    (void)round;
    (void)rng;
    (void)err;
    fk_plan_every_client(((const fk__pooled_head *)srv)->K, chosen, n_chosen);
    return FK_OK;
}

int fk__pooled_task_head(const fk__pooled_head *h, int client, fk_bundle *out, fk_err *err)
{
    if (client < 0 || client >= h->K)
        return fk_err_set(err, FK_EINVAL, "task for unknown client %d (job has %d)", client, h->K);
    if (fk_bundle_put_scalar(out, "op", h->op) || fk_bundle_put_scalar(out, "tick", h->tick))
        return fk_err_set(err, FK_ENOMEM, "task: out of memory");
    return FK_OK;
}

int fk__pooled_incomplete(fk__pooled_head *h, int n, int round, const char *method, fk_err *err)
{
    if (n == h->K) {
        h->streak = 0;
        return 0;
    }
    h->repeats++;
    if (++h->streak <= h->max_repeats)
        return 1;
    return fk_err_set(err, FK_ESTATE,
                      "round %d: %d rounds in a row lacked a client (%d of %d answered this "
                      "time); %s sums every client's statistics, so restart the missing "
                      "clients and resubmit, or raise max_repeats (%d)",
                      round, h->streak, n, h->K, method, h->max_repeats);
}

int fk__pooled_em_advance(double *stage, double *iters, double *ll, double *ll_old, int r,
                          double ll_now, int bad, double tol, int cap)
{
    iters[r] += 1;
    if (bad || !isfinite(ll_now)) {
        stage[r] = FK__POOLED_S_FAILED;
        return 0;
    }
    ll[r] = ll_now;
    if (fabs(ll_now - ll_old[r]) <= tol * (1.0 + fabs(ll_now)) || iters[r] >= cap) {
        stage[r] = FK__POOLED_S_DONE;
        return 0;
    }
    ll_old[r] = ll_now;
    return 1;
}

int fk__pooled_check_clients(const fk__pooled_head *h, const fk_update *ups, int n, fk_err *err)
{
    for (int i = 0; i < n; i++)
        if (ups[i].client < 0 || ups[i].client >= h->K ||
            (i && ups[i].client <= ups[i - 1].client))
            return fk_err_set(err, FK_EINVAL,
                              "update from unknown or repeated client %d (job has %d)",
                              ups[i].client, h->K);
    return FK_OK;
}

static const char *const HEAD_NAMES[] = {"K",    "R",       "restarts", "p",
                                         "op",   "tick",    "repeats",  "streak"};
enum { N_HEAD = sizeof HEAD_NAMES / sizeof *HEAD_NAMES };

int fk__pooled_save(const fk__pooled_head *h, const fk__pooled_arr *a, int n_arr, fk_bundle *out,
                   fk_err *err)
{
    const int vals[N_HEAD] = {h->K, h->R, h->S, h->p, h->op, h->tick, h->repeats, h->streak};
    int rc = fk_bundle_put_scalar(out, "N", h->N);
    for (int i = 0; !rc && i < N_HEAD; i++)
        rc = fk_bundle_put_scalar(out, HEAD_NAMES[i], vals[i]);
    for (int i = 0; !rc && h->op > 0 && i < n_arr; i++)
        rc = fk_bundle_put_vec(out, a[i].name, a[i].len, *a[i].a);
    return rc ? fk_err_set(err, FK_ENOMEM, "save: out of memory") : FK_OK;
}

int fk__pooled_load_head(const fk__pooled_head *h, const fk_bundle *in, int max_op,
                        fk__pooled_head *got, fk_err *err)
{
    int v[N_HEAD];
    const double hi[N_HEAD] = {INT_MAX, INT_MAX, INT_MAX, FK_GMM_MAX_P,
                               max_op,  INT_MAX, INT_MAX, INT_MAX};
    double N;
    int rc = fk__fedgrem_take_scalar(in, "N", 0, FK_GMM_MAX_ABS, "checkpoint", &N, err);
    for (int i = 0; !rc && i < N_HEAD; i++)
        rc = fk__fedgrem_get_count(in, HEAD_NAMES[i], 0, hi[i], &v[i], err);
    if (rc)
        return rc;
    *got = (fk__pooled_head){.K = v[0], .R = v[1], .S = v[2], .p = v[3], .op = v[4], .tick = v[5],
                            .repeats = v[6], .streak = v[7], .max_repeats = h->max_repeats,
                            .seed = h->seed, .N = N};
    if (got->K != h->K || got->R != h->R || got->S != h->S)
        return fk_err_set(err, FK_EINVAL,
                          "checkpoint is for K=%d, R=%d, restarts=%d but this job has K=%d, R=%d, "
                          "restarts=%d",
                          got->K, got->R, got->S, h->K, h->R, h->S);
    if (got->op > 0 && (got->p < 1 || !(N > 0)))
        return fk_err_set(err, FK_EFORMAT, "checkpoint has p = %d and N = %g", got->p, N);
    return FK_OK;
}

int fk__pooled_take_arrays(const fk_bundle *in, const fk__pooled_arr *a, int n_arr,
                          const fk_tensor **t, fk_err *err)
{
    for (int i = 0; i < n_arr; i++) {
        t[i] = fk_bundle_get(in, a[i].name);
        if (!t[i] || t[i]->len != a[i].len || !fk__fedgrem_all_bounded(t[i]->data, t[i]->len))
            return fk_err_set(err, FK_EFORMAT,
                              "checkpoint tensor '%s' is missing, has the wrong size or holds "
                              "non-finite values",
                              a[i].name);
    }
    return FK_OK;
}

int fk__pooled_task_op(const fk_bundle *task, int max_op, int *op, uint64_t *tick, fk_err *err)
{
    const fk_tensor *o = fk_bundle_get(task, "op"), *t = fk_bundle_get(task, "tick");
    if (!o || o->len != 1 || !(o->data[0] >= 0 && o->data[0] <= max_op) ||
        o->data[0] != floor(o->data[0]))
        return fk_err_set(err, FK_EFORMAT, "task lacks an 'op' in 0..%d", max_op);
    if (!t || t->len != 1 || !(t->data[0] >= 0 && t->data[0] < 1e15) ||
        t->data[0] != floor(t->data[0]))
        return fk_err_set(err, FK_EFORMAT, "task lacks a whole step count 'tick'");
    *op = (int)o->data[0];
    *tick = (uint64_t)t->data[0];
    return FK_OK;
}

void fk__pooled_free(fk__pooled_arr *a, int n_arr)
{
    for (int i = 0; i < n_arr; i++) {
        free(*a[i].a);
        *a[i].a = NULL;
    }
}

int fk__pooled_model_unready(const fk_bundle *model)
{
    const fk_tensor *r = fk_bundle_get(model, "ready");
    return r && r->len == 1 && r->data[0] == 0.0;
}
