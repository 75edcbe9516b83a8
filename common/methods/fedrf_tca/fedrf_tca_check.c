/* check_update of fedrf-tca: what each phase's task asked for, and nothing else, checked per
 * update before it is committed, so one source's NaN cannot turn the averaged W into NaN.
 *   phase 0: in round 1 with warm_start the moments n, sum, scatter (check_moments); the MMD statistic s (2N values, |s_i| <= N^-1/2: a signed mean of random
 *            features phi(x) = N^-1/2 [cos; sin]) and the feature dimension d (a whole number,
 *            the one the other clients reported), both only when the task asked (mmd);
 *   phase 1: W (2N x m) when the task set send_W, the classifier C when it set send_C, both
 *            finite and within GROWTH times the global model's largest entry (at least 1):
 *            a client's W is one optimizer step from the last average it received (Adam moves
 *            an entry by about lr), so anything far beyond is a blown-up or forged update that
 *            would drag every client's next step with it;
 *   phase 2: nothing. */
#include <math.h>
#include <stdio.h>

#include "common/methods/fedrf_tca/fedrf_tca_int.h"
#include "common/methods/update_check.h"

static const double GROWTH = 1e3;

/* GROWTH times the largest |entry| of a (at least 1: the initial W is within 2N^-1/2). */
static double growth_bound(const double *a, size_t n, int have)
{
    double m = 1.0;
    for (size_t i = 0; have && i < n; i++)
        m = fabs(a[i]) > m ? fabs(a[i]) : m;
    return GROWTH * m;
}

static int any_other(const unsigned char *f, int n, int skip)
{
    for (int i = 0; i < n; i++)
        if (i != skip && f[i])
            return 1;
    return 0;
}

/* Round 1 with warm_start: the client's count n (whole, >= 1), feature sum (|.| <= n N^-1/2)
 * and scatter sum (2N x 2N, |.| <= n / N, as phi's entries are at most N^-1/2). */
FK_CHECKRETURN static int check_moments(const fk__fedrf_server *s, const fk_update *up, fk_err *err)
{
    int k = up->client, rc;
    const fk_bundle *b = &up->msg;
    const fk_tensor *cnt;
    if ((rc = fk_update_check_tensor(b, "n", 0, NULL, 1e9, 1, 0, k, &cnt, err)) ||
        (rc = fk_update_check_range(cnt, 1, 1e9, 1, k, err)))
        return rc;
    double nv = cnt->data[0], tol = 1.0 + 1e-9;
    const uint64_t d1[1] = {(uint64_t)s->D}, d2[2] = {(uint64_t)s->D, (uint64_t)s->D};
    if ((rc = fk_update_check_tensor(b, "sum", 1, d1, tol * nv / sqrt((double)s->c.N), 0, 0, k,
                                     NULL, err)))
        return rc;
    return fk_update_check_tensor(b, "scatter", 2, d2, tol * nv / (double)s->c.N, 0, 0, k, NULL,
                                  err);
}

FK_CHECKRETURN static int check_stats(const fk__fedrf_server *s, int round, const fk_update *up, fk_err *err)
{
    int k = up->client, tgt = (int)s->c.target, rc;
    const fk_bundle *b = &up->msg;
    int asked = !s->c.source_only && s->c.lambda > 0 && (k == tgt ? any_other(s->inA, s->n, tgt) : s->inA[k]);
    int warm = s->c.warm_start && round == 1;
    const char *names[5] = {NULL, NULL, NULL, NULL, NULL};
    int nn = 0;
    if (asked) {
        names[nn++] = "s";
        names[nn++] = "d";
    }
    if (warm) {
        names[nn++] = "n";
        names[nn++] = "sum";
        names[nn++] = "scatter";
    }
    if ((rc = fk_update_check_names(b, names, nn, k, err)) ||
        (warm && (rc = check_moments(s, up, err))))
        return rc;
    if (!asked)
        return FK_OK;
    const uint64_t ds[1] = {(uint64_t)s->D};
    const double bound = (1.0 + 1e-9) / sqrt((double)s->c.N);
    const fk_tensor *d;
    if ((rc = fk_update_check_tensor(b, "s", 1, ds, bound, 0, 0, k, NULL, err)) ||
        (rc = fk_update_check_tensor(b, "d", 0, NULL, 1e9, 0, 0, k, &d, err)))
        return rc;
    double dv = d->data[0];
    if ((rc = fk_update_check_range(d, 1, 1e9, 1, k, err)))
        return rc;
    if (s->d_seen > 0 && dv != (double)s->d_seen)
        return fk_err_set(err, FK_EINVAL,
                          "client %d sent a feature dimension 'd' other than the other clients' "
                          "(%ld); all domains must share one feature space",
                          k, s->d_seen);
    return FK_OK;
}

FK_CHECKRETURN static int check_models(const fk__fedrf_server *s, int round, const fk_update *up, fk_err *err)
{
    int k = up->client, tgt = (int)s->c.target, rc;
    int last = s->c.rounds > 0 && round == s->c.rounds;
    int wantW = k == tgt ? !s->c.source_only && (any_other(s->inW, s->n, tgt) || last) : s->inW[k];
    int wantC = fk__fedrf_sends_c(s, round, k);
    const char *names[2] = {NULL, NULL};
    int n = 0;
    if (wantW)
        names[n++] = "W";
    if (wantC)
        names[n++] = "C";
    const fk_bundle *b = &up->msg;
    const uint64_t ws[2] = {(uint64_t)s->D, (uint64_t)s->c.m}, cs[1] = {(uint64_t)s->PC};
    double bw = wantW ? growth_bound(s->Wmodel, s->WM, s->have_Wmodel) : 0;
    double bc = wantC ? growth_bound(s->Cmodel, s->PC, s->have_Cmodel) : 0;
    if ((rc = fk_update_check_names(b, names, n, k, err)) ||
        (wantW && (rc = fk_update_check_tensor(b, "W", 2, ws, bw, 0, 0, k, NULL, err))) ||
        (wantC && (rc = fk_update_check_tensor(b, "C", 1, cs, bc, 0, 0, k, NULL, err))))
        return rc;
    return FK_OK;
}

/* Phase 2: nothing, or the held-out counts when the model (and in the last round the tail
 * average, sel_ok_avg) was sent to score (select_holdout). */
FK_CHECKRETURN static int check_select(const fk__fedrf_server *s, int round, const fk_update *up, fk_err *err)
{
    int k = up->client, rc;
    if (!fk__fedrf_sel_asked(s, k))
        return fk_update_check_names(&up->msg, NULL, 0, k, err);
    int avg = fk__fedrf_sel_avg_asked(s, round, k);
    static const char *const names[3] = {"sel_ok", "sel_n", "sel_ok_avg"};
    const fk_tensor *ok, *cnt, *oka = NULL;
    if ((rc = fk_update_check_names(&up->msg, names, 2 + avg, k, err)) ||
        (rc = fk_update_check_tensor(&up->msg, "sel_ok", 0, NULL, 1e9, 0, 0, k, &ok, err)) ||
        (rc = fk_update_check_tensor(&up->msg, "sel_n", 0, NULL, 1e9, 0, 0, k, &cnt, err)) ||
        (avg && (rc = fk_update_check_tensor(&up->msg, "sel_ok_avg", 0, NULL, 1e9, 0, 0, k, &oka,
                                             err))))
        return rc;
    double c = cnt->data[0];
    if ((rc = fk_update_check_range(cnt, 1, 1e9, 1, k, err)) ||
        (rc = fk_update_check_range(ok, 0, c, 1, k, err)) ||
        (oka && (rc = fk_update_check_range(oka, 0, c, 1, k, err))))
        return rc;
    return FK_OK;
}

int fk__fedrf_server_check(void *p, int round, int phase, const fk_update *up, fk_err *err)
{
    const fk__fedrf_server *s = p;
    if (up->client < 0 || up->client >= s->n)
        return fk_err_set(err, FK_EINVAL, "update from unknown client %d (job has %d)",
                          up->client, s->n);
    if (phase == 0)
        return check_stats(s, round, up, err);
    if (phase == 1)
        return check_models(s, round, up, err);
    return check_select(s, round, up, err);
}
