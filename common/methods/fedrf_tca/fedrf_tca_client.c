/* FedRF-TCA client side: mini-batches and their random features, the source
 * (L_C + lambda L_MMD) and target (L_MMD) steps, and evaluation. */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/methods/classes.h"
#include "common/methods/fedrf_tca/fedrf_tca_int.h"
#include "common/models/fedrf_tca/mmd.h"
#include "common/models/fedrf_tca/rftca.h"
#include "common/models/fedrf_tca/tca.h"

void fk__fedrf_client_close(void *p)
{
    fk__fedrf_client *c = p;
    if (!c)
        return;
    fk_mat_close(&c->X);
    free(c->y);
    fk_rff_close(&c->rff);
    free(c->par);
    fk_opt_close(&c->optW);
    fk_opt_close(&c->optC);
    free(c->perm);
    fk_mat_close(&c->Xb);
    fk_mat_close(&c->Phi);
    free(c->yb);
    free(c->s_own);
    free(c->grad);
    free(c->z);
    free(c->d);
    free(c->ext);
    free(c->gext);
    free(c->hnorm);
    fk_opt_close(&c->optE);
    fk_mat_close(&c->pre);
    fk_mat_close(&c->Hn);
    fk_mat_close(&c->gPhi);
    fk_mat_close(&c->dH);
    free(c);
}

static const uint64_t BATCH_STREAM = 0x6261746368000000ULL;
static const uint64_t INIT_STREAM = 0x696e697400000000ULL;
static const uint64_t EXT_STREAM = 0x6578740000000000ULL;
static const uint64_t HOLD_STREAM = 0x686f6c6400000000ULL;

/* select_holdout: a seeded shuffle of the source's rows, the last floor(F n) held out (never
 * sampled for training; scored in phase 2 to select a round's model). */
FK_CHECKRETURN static int holdout_count(fk__fedrf_client *c, size_t n, const char *name, fk_err *err)
{
    size_t nh = c->is_target ? 0 : (size_t)floor(c->c.select_holdout * (double)n);
    c->n_train = n - nh;
    if (c->c.select_holdout > 0 && !c->is_target && (nh < 1 || c->n_train < 1))
        return fk_err_set(err, FK_EINVAL, "fedrf-tca: select_holdout %g leaves source '%s' (%zu "
                          "rows) no held-out or no training row; raise or drop it",
                          c->c.select_holdout, name, n);
    return FK_OK;
}

/* The shuffle, once X and y are the client's copies (the count is holdout_count's). */
static void split_holdout(fk__fedrf_client *c, uint64_t seed)
{
    size_t n = c->X.rows;
    if (c->n_train == n)
        return;
    fk_rng r;
    fk_rng_init(&r, seed, HOLD_STREAM + (uint64_t)c->idx);
    size_t cols = c->X.cols;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)fk_rng_below(&r, (uint64_t)i + 1);
        double *a = fk_mat_row(&c->X, i), *b = fk_mat_row(&c->X, j);
        for (size_t q = 0; q < cols; q++) {
            double t = a[q];
            a[q] = b[q];
            b[q] = t;
        }
        int t = c->y[i];
        c->y[i] = c->y[j];
        c->y[j] = t;
    }
}

FK_CHECKRETURN static int client_alloc(fk__fedrf_client *c, const fk_dataset *data, fk_err *err)
{
    size_t n = data->X.rows;
    c->par = calloc(c->WM + c->PC, sizeof(double));
    c->perm = malloc(n * sizeof(int));
    c->yb = calloc(c->b, sizeof(int));
    c->s_own = calloc(c->D, sizeof(double));
    c->grad = calloc(c->WM + c->PC, sizeof(double));
    c->z = calloc((size_t)c->c.m + 1, sizeof(double));
    c->d = calloc(c->D, sizeof(double));
    if (!c->par || !c->perm || !c->yb || !c->s_own || !c->grad || !c->z || !c->d ||
        fk_mat_copy(&c->X, &data->X) || fk_mat_init(&c->Xb, c->b, data->X.cols) ||
        fk_mat_init(&c->Phi, c->b, c->D))
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory for client %d", c->idx);
    for (size_t i = 0; i < n; i++)
        c->perm[i] = (int)i;
    if (c->c.dense) {
        size_t ph = (size_t)c->c.ext_dim;
        c->ext = calloc(c->PE, sizeof(double));
        c->gext = calloc(c->PE, sizeof(double));
        c->hnorm = calloc(c->b, sizeof(double));
        if (!c->ext || !c->gext || !c->hnorm || fk_mat_init(&c->pre, c->b, ph) ||
            fk_mat_init(&c->Hn, c->b, ph) || fk_mat_init(&c->dH, c->b, ph) ||
            fk_mat_init(&c->gPhi, c->b, c->D))
            return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory for the extractor");
    }
    return FK_OK;
}

/* c->y: every row's index in the job's class list (classes.h). */
FK_CHECKRETURN static int index_labels(fk__fedrf_client *c, const fk_params *p,
                                       const fk_dataset *data, fk_err *err)
{
    fk_classes cls;
    char who[64];
    snprintf(who, sizeof who, "fedrf-tca: client %d", c->idx);
    int rc = fk_classes_parse(&cls, p, 0, 100000, FK_CLASSES_COUNT_OWN, err);
    if (!rc)
        rc = fk_classes_index(&cls, data, who, &c->y, err);
    fk_classes_close(&cls);
    return rc;
}

int fk__fedrf_client_init(void **out, const fk_params *p, const fk_dataset *data, int idx,
                         int n_clients, uint64_t seed, fk_err *err)
{
    *out = NULL;
    fk__fedrf_client *c = calloc(1, sizeof *c);
    if (!c)
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
    int rc = fk__fedrf_parse_cfg(p, n_clients, &c->c, err);
    if (rc)
        goto fail;
    c->idx = idx;
    c->is_target = idx == c->c.target;
    c->classes = (int)c->c.classes;
    size_t n = data->X.rows;
    if (c->classes < 2) {
        rc = fk_err_set(err, FK_EINVAL, "fedrf-tca: set classes (the raw label values, or their "
                        "number >= 2) for the job");
        goto fail;
    }
    /* Class k is the k-th value of the job's list on every client, whatever this one holds
     * (the target's labels, when it has them, only score). */
    if ((data->y || !c->is_target) && (rc = index_labels(c, p, data, err)))
        goto fail;
    if (n == 0 || data->X.cols == 0) {
        rc = fk_err_set(err, FK_EINVAL, "fedrf-tca: domain '%s' is empty", data->name);
        goto fail;
    }
    /* m may exceed the client's samples: W (2N x m) is learned by gradient steps on
     * mini-batches of min(batch, n) rows; nothing factorises an n x m matrix here. */
    if (!c->is_target && (rc = fk_labels_check(c->y, n, c->classes, data->name, err)))
        goto fail;
    if ((rc = fk_mlp_layout(&c->net, (size_t)c->c.m, c->c.hidden, c->c.n_hidden,
                            (size_t)c->classes, err)))
        goto fail;
    c->D = 2 * (size_t)c->c.N;
    c->WM = c->D * (size_t)c->c.m;
    c->PC = c->net.n_params;
    c->PE = c->c.dense ? (data->X.cols + 1) * (size_t)c->c.ext_dim : 0;
    if ((rc = holdout_count(c, n, data->name, err)))
        goto fail;
    c->b = (size_t)c->c.batch < c->n_train ? (size_t)c->c.batch : c->n_train;
    if ((rc = client_alloc(c, data, err)))
        goto fail;
    split_holdout(c, seed);
    fk_rows_l2_normalize(&c->X);
    /* Omega acts on the extractor's output: every client draws the same one from (seed, p_h) */
    if ((rc = fk_rff_init_kind(&c->rff, seed, c->c.dense ? (size_t)c->c.ext_dim : data->X.cols,
                                (size_t)c->c.N, c->c.sigma,
                                c->c.features, err)))
        goto fail;
    fk_rng init;
    fk_rng_init(&init, seed, INIT_STREAM + (c->c.common_init ? 0 : (uint64_t)idx));
    double r = 1.0 / sqrt((double)c->D);
    for (size_t i = 0; i < c->WM; i++)
        c->par[i] = r * (2.0 * fk_rng_uniform(&init) - 1.0);
    fk_mlp_init_params(&c->net, c->par + c->WM, &init);
    if (c->c.dense) {
        /* Uniform fan-in, and the same start at every client (the shared seed's stream, as the
         * paper's clients all start from one pretrained network): W and C are averaged across
         * clients, so their inputs must begin in one coordinate system. From per-client starts
         * (measured) every target sat at chance level, 2 - 17 % after 60 rounds. */
        fk_rng ext_rng;
        fk_rng_init(&ext_rng, seed, EXT_STREAM);
        double re = 1.0 / sqrt((double)data->X.cols);
        for (size_t i = 0; i < c->PE; i++)
            c->ext[i] = re * (2.0 * fk_rng_uniform(&ext_rng) - 1.0);
    }
    fk_rng_init(&c->rng, seed, BATCH_STREAM + (uint64_t)idx);
    if ((rc = fk_opt_init(&c->optW, c->is_target ? c->c.target_opt : c->c.opt, c->WM, c->c.lr,
                          err)) ||
        (rc = fk_opt_init(&c->optC, c->c.opt, c->PC, c->c.lr, err)) ||
        (c->c.dense && (rc = fk_opt_init(&c->optE, c->is_target ? c->c.target_opt : c->c.opt,
                                         c->PE, c->c.lr, err))))
        goto fail;
    c->loss = NAN;
    *out = c;
    return FK_OK;
fail:
    fk__fedrf_client_close(c);
    return rc;
}

int fk__fedrf_client_load_batch(fk__fedrf_client *c, fk_err *err)
{
    for (size_t i = 0; i < c->b; i++) {
        memcpy(fk_mat_row(&c->Xb, i), fk_mat_row(&c->X, (size_t)c->perm[i]),
               c->X.cols * sizeof(double));
        c->yb[i] = c->y ? c->y[c->perm[i]] : 0;
    }
    if (c->c.dense)
        fk__fedrf_ext_forward(c, &c->Xb, &c->pre, &c->Hn, c->hnorm);
    int rc = fk_rff_map_into(&c->rff, c->c.dense ? &c->Hn : &c->Xb, &c->Phi, err);
    if (rc)
        return rc;
    fk_mmd_embedding(&c->Phi, c->is_target ? -1.0 : 1.0, c->s_own);
    c->batched = 1;
    return FK_OK;
}

/* Draw a mini-batch without replacement and map it to random features. */
FK_CHECKRETURN static int sample_batch(fk__fedrf_client *c, fk_err *err)
{
    size_t n = c->n_train;
    for (size_t i = 0; i < c->b; i++) {
        size_t j = i + (size_t)fk_rng_below(&c->rng, n - i);
        int t = c->perm[i];
        c->perm[i] = c->perm[j];
        c->perm[j] = t;
    }
    return fk__fedrf_client_load_batch(c, err);
}

/* U = Phi W, rows normalized: F = U / (|U| + eps). Keeps U and the norms. */
FK_CHECKRETURN static int project_rows(const fk__fedrf_client *c, const fk_mat *Phi, const double *W, fk_mat *U,
                        fk_mat *F, double *norms, fk_err *err)
{
    size_t b = Phi->rows, m = (size_t)c->c.m;
    if (fk_mat_init(U, b, m) || fk_mat_init(F, b, m)) {
        fk_mat_close(U);
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
    }
    fk_rftca_project_norm(Phi, W, m, c->c.eps, U, F, norms);
    return FK_OK;
}

/* Backward from dL/dPhi (c->gPhi) through the random features and the dense extractor. */
FK_CHECKRETURN static int ext_grad(fk__fedrf_client *c, fk_err *err)
{
    memset(c->dH.data, 0, c->dH.rows * c->dH.ld * sizeof(double));
    int rc = fk_rff_backward(&c->rff, &c->Hn, &c->gPhi, &c->dH, err);
    if (!rc)
        fk__fedrf_ext_backward(c, &c->Xb, &c->pre, &c->Hn, c->hnorm, &c->dH, c->gext);
    return rc;
}

/* Add to every row of gPhi the MMD gradient through the mini-batch mean s_own = sign/b sum_i phi_i:
 * dL/dphi_i = sign/b * dL/ds_own, with dL/ds_own = scale * 2 W z (gd from fk_mmd_loss). */
static void mmd_to_rows(fk__fedrf_client *c, const double *gd, double scale)
{
    double w = (c->is_target ? -1.0 : 1.0) * scale / (double)c->b;
    for (size_t i = 0; i < c->b; i++)
        cblas_daxpy((int)c->D, w, gd, 1, fk_mat_row(&c->gPhi, i), 1);
}

/* Source: classification loss through the normalization into W and C, plus lambda * the
 * pairwise MMD when the target's statistic arrived; the extractor gets both. */
FK_CHECKRETURN static int source_grad(fk__fedrf_client *c, const fk_tensor *s_peer, double *loss, fk_err *err)
{
    size_t b = c->b, m = (size_t)c->c.m;
    double *W = c->par, *gW = c->grad, *gC = c->grad + c->WM;
    double *norms = malloc(b * sizeof *norms), *gd = c->c.dense ? malloc(c->D * sizeof *gd) : NULL;
    fk_mat U = {0}, F = {0}, gF = {0};
    int rc = norms && (gd || !c->c.dense) ? project_rows(c, &c->Phi, W, &U, &F, norms, err)
                                          : fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
    if (!rc && fk_mat_init(&gF, b, m))
        rc = fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
    double Lc = 0, Lm = 0;
    if (!rc)
        rc = fk_mlp_loss_grad(&c->net, c->par + c->WM, &F, c->yb, &Lc, gC, &gF, err);
    if (!rc) {
        /* d f / d u for f = u / (|u| + eps): g_u = g_f/(r+eps) - u (u.g_f) / (r (r+eps)^2). */
        for (size_t i = 0; i < b; i++) {
            double r = norms[i], *u = fk_mat_row(&U, i), *g = fk_mat_row(&gF, i);
            double ug = cblas_ddot((int)m, u, 1, g, 1), a = 1.0 / (r + c->c.eps);
            double bcoef = r > 0 ? ug / (r * (r + c->c.eps) * (r + c->c.eps)) : 0.0;
            for (size_t j = 0; j < m; j++)
                g[j] = a * g[j] - bcoef * u[j];
        }
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)c->D, (int)m, (int)b, 1.0,
                    c->Phi.data, (int)c->Phi.ld, gF.data, (int)gF.ld, 0.0, gW, (int)m);
        if (c->c.dense) /* dL_C/dPhi = g_U W^T */
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)b, (int)c->D, (int)m, 1.0,
                        gF.data, (int)gF.ld, W, (int)m, 0.0, c->gPhi.data, (int)c->gPhi.ld);
        if (s_peer && c->c.lambda > 0) {
            for (size_t k = 0; k < c->D; k++)
                c->d[k] = c->s_own[k] + s_peer->data[k];
            fk_mat Wm = fk_mat_view(W, c->D, m, m), gWm = fk_mat_view(gW, c->D, m, m);
            Lm = fk_mmd_loss(&Wm, c->d, c->c.lambda, &gWm, gd, c->z);
            if (c->c.dense) /* the MMD gradient reaches the extractor through s_own */
                mmd_to_rows(c, gd, c->c.lambda);
        }
        if (c->c.dense)
            rc = ext_grad(c, err);
        *loss = Lc + c->c.lambda * Lm;
    }
    free(norms);
    free(gd);
    fk_mat_close(&U);
    fk_mat_close(&F);
    fk_mat_close(&gF);
    return rc;
}

/* Target: mean over the received sources of |W^T (s_i + s_T)|^2, into W and the extractor. */
FK_CHECKRETURN static int target_grad(fk__fedrf_client *c, const fk_tensor *s_src, double *loss, fk_err *err)
{
    size_t m = (size_t)c->c.m, k = s_src ? (size_t)s_src->shape[0] : 0;
    double *gW = c->grad, L = 0;
    double *gd = c->c.dense ? malloc(c->D * sizeof *gd) : NULL;
    if (c->c.dense && !gd)
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
    memset(gW, 0, c->WM * sizeof *gW);
    if (c->c.dense)
        memset(c->gPhi.data, 0, c->gPhi.rows * c->gPhi.ld * sizeof(double));
    fk_mat Wm = fk_mat_view(c->par, c->D, m, m), gWm = fk_mat_view(gW, c->D, m, m);
    for (size_t i = 0; i < k; i++) {
        for (size_t j = 0; j < c->D; j++)
            c->d[j] = s_src->data[i * c->D + j] + c->s_own[j];
        L += fk_mmd_loss(&Wm, c->d, 1.0 / (double)k, &gWm, gd, c->z) / (double)k;
        if (c->c.dense)
            mmd_to_rows(c, gd, 1.0 / (double)k);
    }
    int rc = c->c.dense && k ? ext_grad(c, err) : FK_OK;
    free(gd);
    *loss = k ? L : NAN;
    return rc;
}

int fk__fedrf_client_grad(fk__fedrf_client *c, const fk_tensor *s_peer, const fk_tensor *s_src,
                          double *loss, fk_err *err)
{
    return c->is_target ? target_grad(c, s_src, loss, err) : source_grad(c, s_peer, loss, err);
}

/* One optimizer step of the client's parameters on its local loss (the target steps only when
 * some source statistic arrived). */
FK_CHECKRETURN static int client_step(fk__fedrf_client *c, const fk_tensor *s_peer, const fk_tensor *s_src,
                       fk_err *err)
{
    double loss = NAN;
    int rc = fk__fedrf_client_grad(c, s_peer, s_src, &loss, err);
    if (rc)
        return rc;
    c->loss = loss;
    if (c->is_target && !(s_src && s_src->shape[0] > 0))
        return FK_OK;
    fk_opt_step(&c->optW, c->par, c->grad);
    if (!c->is_target)
        fk_opt_step(&c->optC, c->par + c->WM, c->grad + c->WM);
    if (c->c.dense)
        fk_opt_step(&c->optE, c->ext, c->gext);
    return FK_OK;
}

/* Predictions for all rows of the client's data with W and one classifier
 * (votes == NULL) or a majority vote of k classifiers. */
FK_CHECKRETURN static int predict_all(const fk__fedrf_client *c, const fk_mat *X, const double *W, const double *C,
                       const double *votes, size_t k, int *pred, fk_err *err)
{
    size_t n = X->rows, chunk = 256, cls = (size_t)c->classes;
    int rc = FK_OK;
    int *one = malloc(chunk * sizeof *one);
    int *tally = calloc(chunk * cls, sizeof *tally);
    double *norms = malloc(chunk * sizeof *norms);
    if (!one || !tally || !norms)
        rc = fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
    for (size_t r0 = 0; r0 < n && !rc; r0 += chunk) {
        size_t b = n - r0 < chunk ? n - r0 : chunk;
        fk_mat Xc = fk_mat_rows(X, r0, b), Phi, U, F;
        if ((rc = fk__fedrf_features(c, &Xc, &Phi, norms, err)))
            break;
        rc = project_rows(c, &Phi, W, &U, &F, norms, err);
        fk_mat_close(&Phi);
        if (rc)
            break;
        if (!votes) {
            rc = fk_mlp_predict(&c->net, C, &F, pred + r0, err);
        } else {
            rc = fk__fedrf_vote(&c->net, votes, k, &F, one, tally, pred + r0, err);
        }
        fk_mat_close(&U);
        fk_mat_close(&F);
    }
    free(one);
    free(tally);
    free(norms);
    return rc;
}

/* Correct predictions on rows [r0, r1) of the client's data. */
FK_CHECKRETURN static int count_correct(const fk__fedrf_client *c, size_t r0, size_t r1, const double *W,
                         const double *C, const double *votes, size_t k, size_t *ok, fk_err *err)
{
    *ok = 0;
    int *pred = malloc((r1 - r0) * sizeof *pred);
    if (!pred)
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
    fk_mat X = fk_mat_rows(&c->X, r0, r1 - r0);
    int rc = predict_all(c, &X, W, C, votes, k, pred, err);
    for (size_t i = 0; i < r1 - r0 && !rc; i++)
        *ok += pred[i] == c->y[r0 + i];
    free(pred);
    return rc;
}

FK_CHECKRETURN static int accuracy(const fk__fedrf_client *c, const double *W, const double *C, const double *votes,
                    size_t k, double *acc, fk_err *err)
{
    *acc = NAN;
    if (!c->y)
        return FK_OK;
    size_t ok;
    int rc = count_correct(c, 0, c->X.rows, W, C, votes, k, &ok, err);
    if (!rc)
        *acc = (double)ok / (double)c->X.rows;
    return rc;
}

/* select_holdout: the held-out rows' correct count of the candidate (W wname, classifier cname
 * or, with voting, the vote of sel_V) into the update's okname; nothing when the task has none. */
FK_CHECKRETURN static int score_holdout(const fk__fedrf_client *c, const fk_bundle *task, const char *wname,
                         const char *cname, const char *okname, fk_bundle *up, fk_err *err)
{
    const fk_tensor *W = fk_bundle_get(task, wname), *C = fk_bundle_get(task, cname),
                    *V = fk_bundle_get(task, "sel_V");
    if (!W || (!C && !V))
        return FK_OK;
    if (W->len != c->WM || (C && C->len != c->PC) || (!C && (V->ndim != 2 || V->shape[1] != c->PC)))
        return fk_err_set(err, FK_EFORMAT, "fedrf-tca: the model to score (%s) has the wrong size",
                          wname);
    size_t ok;
    int rc = count_correct(c, c->n_train, c->X.rows, W->data, C ? C->data : NULL,
                           C ? NULL : V->data, C ? 0 : (size_t)V->shape[0], &ok, err);
    return rc ? rc : fk__fedrf_put_scalar(up, okname, (double)ok, err);
}

int fk__fedrf_client_step(void *p, const fk_bundle *task, fk_bundle *up, fk_report *rep, fk_err *err)
{
    fk__fedrf_client *c = p;
    int phase = (int)fk__fedrf_scalar(task, "phase", -1), rc = FK_OK;
    rep->n_samples = (double)c->X.rows;
    if (phase == 0) {
        if ((rc = sample_batch(c, err)))
            return rc;
        if (fk__fedrf_scalar(task, "warm", 0) != 0 && (rc = fk__fedrf_client_moments(c, up, err)))
            return rc;
        if (fk__fedrf_scalar(task, "mmd", 0) != 0) {
            if ((rc = fk__fedrf_put_vec(up, "s", c->D, c->s_own, err)))
                return rc;
            return fk__fedrf_put_scalar(up, "d", (double)c->X.cols, err);
        }
        return FK_OK;
    }
    if (phase == 1) {
        if (!c->batched) /* e.g. a restarted client without its saved state */
            return fk_err_set(err, FK_ESTATE, "fedrf-tca: client %d got a phase-1 step without "
                              "the mini-batch of phase 0 (client state lost)", c->idx);
        const fk_tensor *w0 = fk_bundle_get(task, "W_init");
        if (w0) { /* the warm start: every client steps from the pooled closed form */
            if (w0->len != c->WM)
                return fk_err_set(err, FK_EFORMAT, "fedrf-tca: W_init has %zu values, want %zu",
                                  w0->len, c->WM);
            memcpy(c->par, w0->data, c->WM * sizeof(double));
        }
        if (c->is_target) {
            const fk_tensor *s = fk_bundle_get(task, "s_src");
            if (s && (s->ndim != 2 || s->shape[1] != c->D))
                return fk_err_set(err, FK_EFORMAT, "fedrf-tca: s_src must be k x 2N");
            if ((rc = client_step(c, NULL, s, err)))
                return rc;
        } else {
            const fk_tensor *s = fk_bundle_get(task, "s_peer");
            if (s && s->len != c->D)
                return fk_err_set(err, FK_EFORMAT, "fedrf-tca: s_peer must have 2N values");
            if ((rc = client_step(c, s, NULL, err)))
                return rc;
        }
        if (fk__fedrf_scalar(task, "send_W", 0) != 0 &&
            (rc = fk__fedrf_put_mat(up, "W", c->D, (size_t)c->c.m, c->par, err)))
            return rc;
        if (fk__fedrf_scalar(task, "send_C", 0) != 0 &&
            (rc = fk__fedrf_put_vec(up, "C", c->PC, c->par + c->WM, err)))
            return rc;
        return FK_OK;
    }
    if (phase != 2)
        return fk_err_set(err, FK_EFORMAT, "fedrf-tca: task has no valid phase");
    const fk_tensor *W = fk_bundle_get(task, "W"), *C = fk_bundle_get(task, "C");
    if (W) {
        if (W->len != c->WM)
            return fk_err_set(err, FK_EFORMAT, "fedrf-tca: averaged W has %zu values, want %zu",
                              W->len, c->WM);
        memcpy(c->par, W->data, c->WM * sizeof(double));
    }
    if (C) {
        if (C->len != c->PC)
            return fk_err_set(err, FK_EFORMAT, "fedrf-tca: averaged classifier has %zu values, "
                              "want %zu", C->len, c->PC);
        memcpy(c->par + c->WM, C->data, c->PC * sizeof(double));
    }
    rep->loss = c->loss;
    /* select_holdout: score the round's global model on the held-out rows, and the tail average
     * when it comes too (the last round) */
    if (c->n_train < c->X.rows &&
        ((rc = score_holdout(c, task, "sel_W", "sel_C", "sel_ok", up, err)) ||
         (rc = score_holdout(c, task, "sel_W_avg", "sel_C_avg", "sel_ok_avg", up, err))))
        return rc;
    if (fk_bundle_get(up, "sel_ok") &&
        (rc = fk__fedrf_put_scalar(up, "sel_n", (double)(c->X.rows - c->n_train), err)))
        return rc;
    c->evals += 1;
    if (!c->is_target || fmod(c->evals, (double)c->c.eval_every) != 0)
        return FK_OK;
    if (c->c.voting) {
        /* the vote, once the sources' classifiers are in; before that no accuracy (the
         * target's own classifier is never trained) */
        const fk_tensor *V = fk_bundle_get(task, "votes");
        if (!V)
            return FK_OK;
        if (V->ndim != 2 || V->shape[1] != c->PC)
            return fk_err_set(err, FK_EFORMAT, "fedrf-tca: votes must be k x %zu", c->PC);
        return accuracy(c, c->par, NULL, V->data, (size_t)V->shape[0], &rep->accuracy, err);
    }
    /* the sources' averaged classifier comes in round tc (then every tc rounds, and in the last
     * round) and stays in par; before the first one no accuracy: the target's own classifier
     * is never trained, and its score (a class frequency) would read as the job's quality.
     * evals counts the rounds this target took part in (checkpointed). */
    if (!C && c->evals < (double)c->c.tc)
        return FK_OK;
    return accuracy(c, c->par, c->par + c->WM, NULL, 0, &rep->accuracy, err);
}

int fk__fedrf_client_evaluate(void *p, const fk_bundle *model, fk_report *rep, fk_err *err)
{
    fk__fedrf_client *c = p;
    rep->n_samples = (double)c->X.rows;
    /* use_avg: score the tail average of the last avg_last rounds (W_avg, C_avg) instead */
    int avg = fk__fedrf_scalar(model, "use_avg", 0) != 0;
    /* use_sel: the round's model chosen on the sources' held-out rows (W_sel, C_sel) */
    int sel = fk__fedrf_scalar(model, "use_sel", 0) != 0;
    const fk_tensor *W = fk_bundle_get(model, sel ? "W_sel" : avg ? "W_avg" : "W");
    const double *Wd = c->par;
    if (W) {
        if (W->len != c->WM)
            return fk_err_set(err, FK_EFORMAT, "fedrf-tca: model W has %zu values, want %zu",
                              W->len, c->WM);
        Wd = W->data;
    }
    const fk_tensor *V = sel && fk_bundle_get(model, "votes_sel") ? fk_bundle_get(model, "votes_sel")
                                                                   : fk_bundle_get(model, "votes"),
                    *C = fk_bundle_get(model, sel ? "C_sel" : avg ? "C_avg" : "C");
    if (V) {
        if (V->ndim != 2 || V->shape[1] != c->PC)
            return fk_err_set(err, FK_EFORMAT, "fedrf-tca: votes must be k x %zu", c->PC);
        return accuracy(c, Wd, NULL, V->data, (size_t)V->shape[0], &rep->accuracy, err);
    }
    if (C && C->len != c->PC)
        return fk_err_set(err, FK_EFORMAT, "fedrf-tca: model classifier has %zu values, want %zu",
                          C->len, c->PC);
    return accuracy(c, Wd, C ? C->data : c->par + c->WM, NULL, 0, &rep->accuracy, err);
}
