/* check_update of pooled-em and pooled-em-mor: the sums each step's aggregate adds up,
 * checked per update before it is committed (names, shapes from the server's head, finite,
 * bounded by FK_GMM_MAX_ABS, counts >= 0). Both servers start with their fk__pooled_head,
 * which says the step (op), the restarts S, R and, once known, p. A refused client leaves
 * its step incomplete: the step repeats next round (the sums need every client). */
#include <math.h>
#include <stdio.h>

#include "common/methods/mixture/pooled_int.h"
#include "common/methods/update_check.h"
#include "common/models/mixture/gmm.h"

FK_CHECKRETURN static int check_client(const fk__pooled_head *h, const fk_update *up, fk_err *err)
{
    if (up->client < 0 || up->client >= h->K)
        return fk_err_set(err, FK_EINVAL, "update from unknown client %d (job has %d)",
                          up->client, h->K);
    return FK_OK;
}

/* A count n >= 1. */
FK_CHECKRETURN static int check_n(const fk_bundle *b, int k, fk_err *err)
{
    const fk_tensor *n;
    int rc = fk_update_check_tensor(b, "n", 0, NULL, FK_GMM_MAX_ABS, 1, 0, k, &n, err);
    if (!rc)
        rc = fk_update_check_range(n, 1.0, FK_GMM_MAX_ABS, 0, k, err);
    return rc;
}

/* The scatter step's own bounds: xtx = Xc^T Xc is symmetric with |xtx_ij| <= sqrt(xtx_ii
 * xtx_jj), and every candidate is a row of Xc, so its squared entries are at most xtx's
 * diagonal. Scaling an honest update (every value times s, each one finite and in bounds) breaks
 * the second once s^2 exceeds the client's sample count, so one client cannot blow up the
 * pooled covariance and, through it, every client's next sums. */
FK_CHECKRETURN static int check_scatter(const fk_tensor *x, const fk_tensor *c, size_t P, int k, fk_err *err)
{
    const double tol = 1e-9;
    const double *a = x->data;
    for (size_t i = 0; i < P; i++)
        for (size_t j = 0; j <= i; j++) {
            double aij = a[i * P + j], aji = a[j * P + i], lim = sqrt(a[i * P + i] * a[j * P + j]);
            if (!(a[i * P + i] >= 0) ||
                !(fabs(aij - aji) <= tol * (fabs(aij) + fabs(aji)) + 1e-300) ||
                !(fabs(aij) <= lim * (1 + tol) + 1e-300))
                return fk_err_set(err, FK_EINVAL,
                                  "client %d sent a scatter matrix 'xtx' that is no X^T X at "
                                  "entries (%zu, %zu) and (%zu, %zu): a diagonal entry below 0, "
                                  "an asymmetric pair or |x_ij| > sqrt(x_ii x_jj)",
                                  k, i, j, j, i);
        }
    for (size_t r = 0; r < c->len / (P ? P : 1); r++)
        for (size_t j = 0; j < P; j++) {
            double v = c->data[r * P + j];
            if (!(v * v <= a[j * P + j] * (1 + tol) + 1e-300))
                return fk_err_set(err, FK_EINVAL,
                                  "client %d sent candidate 'cand' %zu with feature %zu beyond "
                                  "its own scatter 'xtx' (a data row has x_j^2 <= sum x_j^2)",
                                  k, r, j);
        }
    return FK_OK;
}

int fk__pooled_em_check(void *v, int round, int phase, const fk_update *up, fk_err *err)
{
    (void)round;
    (void)phase;
    const fk__pooled_head *h = v;
    const fk_bundle *b = &up->msg;
    int k = up->client, rc = check_client(h, up, err);
    if (rc)
        return rc;
    const double B = FK_GMM_MAX_ABS;
    if (h->op == FK__POOLED_G_SUMS) {
        static const char *const names[] = {"sum", "n"};
        const fk_tensor *s = fk_bundle_get(b, "sum");
        if ((rc = fk_update_check_names(b, names, 2, k, err)))
            return rc;
        if (!s || s->ndim != 1 || s->len < 1 || s->len > FK_GMM_MAX_P)
            return fk_err_set(err, FK_EINVAL,
                              "client %d sent no feature sum 'sum' (a vector of 1 <= p <= %d)", k,
                              FK_GMM_MAX_P);
        const uint64_t ps[1] = {s->shape[0]};
        if ((rc = fk_update_check_tensor(b, "sum", 1, ps, B, 0, 0, k, NULL, err)))
            return rc;
        return check_n(b, k, err);
    }
    uint64_t S = (uint64_t)h->S, R = (uint64_t)h->R, P = (uint64_t)h->p;
    const uint64_t sv[1] = {S}, sp[2] = {S, P}, sr[2] = {S, R}, srp[3] = {S, R, P},
                   pp[2] = {P, P};
    if (h->op == FK__POOLED_G_SCATTER) {
        static const char *const names[] = {"xtx", "cand"};
        const fk_tensor *x, *c;
        if ((rc = fk_update_check_names(b, names, 2, k, err)) ||
            (rc = fk_update_check_tensor(b, "xtx", 2, pp, B, 0, 0, k, &x, err)) ||
            (rc = fk_update_check_tensor(b, "cand", 2, sp, B, 0, 0, k, &c, err)))
            return rc;
        return check_scatter(x, c, (size_t)P, k, err);
    }
    static const char *const names[] = {"tot", "cand", "nr", "sx", "far", "fard", "ll"};
    if ((rc = fk_update_check_names(b, names, 7, k, err)) ||
        (rc = fk_update_check_tensor(b, "tot", 1, sv, B, 1, 0, k, NULL, err)) ||
        (rc = fk_update_check_tensor(b, "cand", 2, sp, B, 0, 0, k, NULL, err)) ||
        (rc = fk_update_check_tensor(b, "nr", 2, sr, B, 1, 0, k, NULL, err)) ||
        (rc = fk_update_check_tensor(b, "sx", 3, srp, B, 0, 0, k, NULL, err)) ||
        (rc = fk_update_check_tensor(b, "far", 2, sp, B, 0, 0, k, NULL, err)) ||
        (rc = fk_update_check_tensor(b, "fard", 1, sv, B, 1, 0, k, NULL, err)) ||
        (rc = fk_update_check_tensor(b, "ll", 1, sv, B, 0, 0, k, NULL, err)))
        return rc;
    return FK_OK;
}

int fk__pooled_em_mor_check(void *v, int round, int phase, const fk_update *up, fk_err *err)
{
    (void)round;
    (void)phase;
    const fk__pooled_head *h = v;
    const fk_bundle *b = &up->msg;
    int k = up->client, rc = check_client(h, up, err);
    if (rc)
        return rc;
    static const char *const names[] = {"A", "b", "nr", "c", "ll", "n"};
    if ((rc = fk_update_check_names(b, names, 6, k, err)))
        return rc;
    /* p is the server's once known; the first step takes it from the client's 'b' */
    const fk_tensor *bt = fk_bundle_get(b, "b");
    uint64_t P = h->op ? (uint64_t)h->p : bt && bt->ndim == 3 ? bt->shape[2] : 0;
    if (P < 1 || P > FK_GMM_MAX_P)
        return fk_err_set(err, FK_EINVAL,
                          "client %d sent no sums 'b' (restarts x R x p, 1 <= p <= %d)", k,
                          FK_GMM_MAX_P);
    uint64_t S = (uint64_t)h->S, R = (uint64_t)h->R;
    const uint64_t as[4] = {S, R, P, P}, bs[3] = {S, R, P}, rs[2] = {S, R}, sv[1] = {S};
    const double B = FK_GMM_MAX_ABS;
    if ((rc = fk_update_check_tensor(b, "A", 4, as, B, 0, 0, k, NULL, err)) ||
        (rc = fk_update_check_tensor(b, "b", 3, bs, B, 0, 0, k, NULL, err)) ||
        (rc = fk_update_check_tensor(b, "nr", 2, rs, B, 1, 0, k, NULL, err)) ||
        (rc = fk_update_check_tensor(b, "c", 2, rs, B, 1, 0, k, NULL, err)) ||
        (rc = fk_update_check_tensor(b, "ll", 1, sv, B, 0, 0, k, NULL, err)))
        return rc;
    return check_n(b, k, err);
}
