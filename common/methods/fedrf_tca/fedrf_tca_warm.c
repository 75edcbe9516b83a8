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

int fk__fedrf_warm_start(fk__fedrf_server *s, const fk_update *ups, int n, fk_err *err)
{
    size_t D = s->D;
    int tgt = (int)s->c.target, got = 0;
    for (int k = 0; k < n; k++)
        got += fk_bundle_get(&ups[k].msg, "scatter") != NULL;
    s->have_W0 = 0;
    if (got < s->n)
        return FK_OK; /* a client's moments are missing: no pooled problem, random start */
    fk_mat A = {0}, W = {0};
    double *mus = calloc(D, sizeof *mus), *mut = calloc(D, sizeof *mut), *tot = calloc(D, sizeof *tot);
    double *theta = malloc((size_t)s->c.m * sizeof *theta);
    if (!mus || !mut || !tot || !theta || fk_mat_init(&A, D, D)) {
        free(mus);
        free(mut);
        free(tot);
        free(theta);
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory for the warm start");
    }
    double ns = 0, nt = 0;
    int rc = FK_OK;
    for (int k = 0; k < n && !rc; k++) {
        const fk_bundle *b = &ups[k].msg;
        const fk_tensor *S = fk__fedrf_want_len(b, "scatter", D * D, err),
                        *sm = fk__fedrf_want_len(b, "sum", D, err),
                        *cnt = fk__fedrf_want_len(b, "n", 1, err);
        if (!S || !sm || !cnt) {
            rc = FK_EFORMAT;
            break;
        }
        cblas_daxpy((int)(D * D), 1.0, S->data, 1, A.data, 1);
        cblas_daxpy((int)D, 1.0, sm->data, 1, ups[k].client == tgt ? mut : mus, 1);
        *(ups[k].client == tgt ? &nt : &ns) += cnt->data[0];
    }
    if (!rc && !(ns >= 1 && nt >= 1))
        rc = fk_err_set(err, FK_EINVAL, "fedrf-tca: warm start needs source and target samples");
    if (!rc) {
        /* A = sum phi phi^T - (sum)(sum)^T / n: the scatter about the pooled mean */
        for (size_t i = 0; i < D; i++)
            tot[i] = mus[i] + mut[i];
        cblas_dger(CblasRowMajor, (int)D, (int)D, -1.0 / (ns + nt), tot, 1, tot, 1, A.data,
                   (int)A.ld);
        for (size_t i = 0; i < D; i++) /* v = mu_S - mu_T */
            tot[i] = mus[i] / ns - mut[i] / nt;
        double gamma = s->c.gamma > 0 ? s->c.gamma : (ns + nt) / (ns * nt);
        rc = fk_tca_solve_moments(&A, tot, gamma, (size_t)s->c.m, FK_TCA_NORM_B, &W, theta, err);
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
    fk_mat_close(&A);
    fk_mat_close(&W);
    free(mus);
    free(mut);
    free(tot);
    free(theta);
    return rc;
}
