/* FedRF-TCA closed-form warm start (spec §3.2 "W_RF": the reference code's disabled option).
 * In round 1 every client sends the moments of its random features over all its rows (count,
 * sum, scatter sum phi phi^T: no row leaves the client); the server pools them into the
 * RF-TCA problem of the union, A = sum phi phi^T - n mu mu^T and v = mu_S - mu_T, and solves it
 * (fk_tca_solve_moments, the §1.5 route) with gamma; every client starts round 1's step from it. */
#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/methods/fedrf_tca/fedrf_tca_int.h"
#include "common/models/fedrf_tca/tca.h"

int fk__fedrf_client_moments(fk__fedrf_client *c, fk_bundle *up, fk_err *err)
{
    /* the training rows only: a source's held-out rows (select_holdout) stay out of every
     * statistic, so selection scores rows no part of training has seen */
    size_t n = c->n_train, D = c->D, chunk = 256;
    double *sum = fk_bundle_add(up, "sum", 1, (uint64_t[1]){D});
    double *S = sum ? fk_bundle_add(up, "scatter", 2, (uint64_t[2]){D, D}) : NULL;
    double *norms = malloc(chunk * sizeof *norms);
    if (!sum || !S || !norms) {
        free(norms);
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory for the warm-start moments");
    }
    int rc = FK_OK;
    for (size_t r0 = 0; r0 < n && !rc; r0 += chunk) {
        size_t b = n - r0 < chunk ? n - r0 : chunk;
        fk_mat Xc = fk_mat_rows(&c->X, r0, b), Phi = {0};
        if ((rc = fk__fedrf_features(c, &Xc, &Phi, norms, err))) /* as the client trains on them */
            break;
        /* upper triangle of S += Phi^T Phi; the sum row by row */
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)D, (int)b, 1.0, Phi.data,
                    (int)Phi.ld, 1.0, S, (int)D);
        for (size_t i = 0; i < b; i++)
            cblas_daxpy((int)D, 1.0, fk_mat_row(&Phi, i), 1, sum, 1);
        fk_mat_close(&Phi);
    }
    free(norms);
    for (size_t i = 0; i < D && !rc; i++) /* send the full symmetric matrix */
        for (size_t j = 0; j < i; j++)
            S[i * D + j] = S[j * D + i];
    return rc ? rc : fk__fedrf_put_scalar(up, "n", (double)n, err);
}

/* The warm start folded over the round-1 updates (issue 35: streaming aggregation), in client
 * order, the moments summed as they come: begin, add per update, end solves. */
int fk__fedrf_warm_begin(fk__fedrf_server *s, fk_err *err)
{
    fk__fedrf_warm *w = &s->warm;
    fk__fedrf_warm_close(s);
    size_t D = s->D;
    w->mus = calloc(D, sizeof *w->mus);
    w->mut = calloc(D, sizeof *w->mut);
    if (!w->mus || !w->mut || fk_mat_init(&w->A, D, D)) {
        fk__fedrf_warm_close(s);
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory for the warm start");
    }
    w->open = 1;
    return FK_OK;
}

void fk__fedrf_warm_add(fk__fedrf_server *s, const fk_update *up)
{
    fk__fedrf_warm *w = &s->warm;
    const fk_bundle *b = &up->msg;
    if (!fk_bundle_get(b, "scatter"))
        return;
    w->got++;
    if (w->bad)
        return; /* an error is reported at the end, if the warm start is solved at all */
    size_t D = s->D;
    const fk_tensor *S = fk__fedrf_want_len(b, "scatter", D * D, &w->bad_err),
                    *sm = fk__fedrf_want_len(b, "sum", D, &w->bad_err),
                    *cnt = fk__fedrf_want_len(b, "n", 1, &w->bad_err);
    if (!S || !sm || !cnt) {
        w->bad = 1;
        return;
    }
    int tgt = (int)s->c.target;
    cblas_daxpy((int)(D * D), 1.0, S->data, 1, w->A.data, 1);
    cblas_daxpy((int)D, 1.0, sm->data, 1, up->client == tgt ? w->mut : w->mus, 1);
    *(up->client == tgt ? &w->nt : &w->ns) += cnt->data[0];
}

void fk__fedrf_warm_close(fk__fedrf_server *s)
{
    fk__fedrf_warm *w = &s->warm;
    fk_mat_close(&w->A);
    free(w->mus);
    free(w->mut);
    *w = (fk__fedrf_warm){0};
}

int fk__fedrf_warm_end(fk__fedrf_server *s, fk_err *err)
{
    fk__fedrf_warm *w = &s->warm;
    size_t D = s->D;
    s->have_W0 = 0;
    if (w->got < s->n) { /* a client's moments are missing: no pooled problem, random start */
        fk__fedrf_warm_close(s);
        return FK_OK;
    }
    if (w->bad) {
        int code = w->bad_err.code ? w->bad_err.code : FK_EFORMAT;
        fk_err_set(err, code, "%s", w->bad_err.msg);
        fk__fedrf_warm_close(s);
        return code;
    }
    fk_mat W = {0};
    fk_mat *A = &w->A;
    double ns = w->ns, nt = w->nt, *mus = w->mus, *mut = w->mut;
    double *tot = calloc(D, sizeof *tot);
    double *theta = malloc((size_t)s->c.m * sizeof *theta);
    if (!tot || !theta) {
        free(tot);
        free(theta);
        fk__fedrf_warm_close(s);
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory for the warm start");
    }
    int rc = FK_OK;
    if (!(ns >= 1 && nt >= 1))
        rc = fk_err_set(err, FK_EINVAL, "fedrf-tca: warm start needs source and target samples");
    if (!rc) {
        /* A = sum phi phi^T - (sum)(sum)^T / n: the scatter about the pooled mean */
        for (size_t i = 0; i < D; i++)
            tot[i] = mus[i] + mut[i];
        cblas_dger(CblasRowMajor, (int)D, (int)D, -1.0 / (ns + nt), tot, 1, tot, 1, A->data,
                   (int)A->ld);
        for (size_t i = 0; i < D; i++) /* v = mu_S - mu_T */
            tot[i] = mus[i] / ns - mut[i] / nt;
        double gamma = s->c.gamma > 0 ? s->c.gamma : (ns + nt) / (ns * nt);
        rc = fk_tca_solve_moments(A, tot, gamma, (size_t)s->c.m, FK_TCA_NORM_B, &W, theta, err);
    }
    if (!rc) {
        /* The closed form fixes the subspace; its scale is a convention (normalization B puts
         * columns near gamma^-1/2, ~16 here, against ~0.6 for the random start) and the row
         * normalization after W makes the forward pass scale-free. Scaled to the random start's
         * Frobenius norm sqrt(m/3), Adam's lr and lambda's weight keep their meaning: unscaled, W
         * barely moved and SURF W / D ended 16 / 10 points below the random start. */
        double f = cblas_dnrm2((int)s->WM, W.data, 1), want = sqrt((double)s->c.m / 3.0);
        for (size_t i = 0; i < s->WM; i++)
            s->W0[i] = f > 0 ? W.data[i] * want / f : 0.0;
        s->have_W0 = 1;
    }
    fk_mat_close(&W);
    fk__fedrf_warm_close(s);
    free(tot);
    free(theta);
    return rc;
}
