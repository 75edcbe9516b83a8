/* DICA job, client side: local checks, the §7.3 statistics, the ridge statistics of
 * §8.1 and the local score of the final model. Raw samples never leave the client. */
#include "common/methods/dica/dica_int.h"
#include "common/methods/classes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fk__dicaj_client_close(void *v)
{
    fk__dicaj_client *c = v;
    if (!c)
        return;
    fk__dicaj_cfg_close(&c->c);
    fk_mat_close(&c->X);
    fk_mat_close(&c->Phi);
    free(c->phi_std);
    free(c->y);
    free(c->own_vals);
    free(c->raw);
    free(c->t);
    free(c->dom);
    free(c);
}

/* Domain ids and sizes: group values when present, else the client index. */
FK_CHECKRETURN static int set_domains(fk__dicaj_client *c, const fk_dataset *data, fk_err *err)
{
    size_t n = data->X.rows;
    c->dom = malloc((n ? n : 1) * sizeof *c->dom);
    long *ids = malloc((n ? n : 1) * sizeof *ids);
    double *cnt = calloc(n ? n : 1, sizeof *cnt);
    int rc = (c->dom && ids && cnt) ? FK_OK : fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    size_t N = 0;
    for (size_t i = 0; rc == FK_OK && i < n; i++) {
        long id = data->group ? (long)data->group[i] : (long)c->idx;
        if (id < 0 || (c->c.domains && id >= c->c.domains)) {
            rc = fk_err_set(err, FK_EINVAL, "dica: client %d (%s): unknown domain id %ld (%s)",
                            c->idx, data->name, id,
                            c->c.domains ? "outside [0, domains)" : "negative");
            break;
        }
        c->dom[i] = id;
        size_t k = 0;
        while (k < N && ids[k] != id)
            k++;
        if (k == N)
            ids[N++] = id;
        cnt[k] += 1;
    }
    for (size_t k = 0; rc == FK_OK && !c->holdout && k < N; k++)
        if (cnt[k] < c->c.min_domain)
            rc = fk_err_set(err, FK_EINVAL,
                            "dica: client %d (%s): domain %ld has %.0f sample(s), below "
                            "min_domain_size %.0f (a domain of one sample reveals it, §7.7)",
                            c->idx, data->name, ids[k], cnt[k], c->c.min_domain);
    c->n_dom = N;
    free(ids);
    free(cnt);
    return rc;
}

/* c->y: the rows' indices in the job's class list when it has one (classes.h); without one,
 * the data set's own indices, which task_classes accepts only when they cover every class. */
FK_CHECKRETURN static int index_labels(fk__dicaj_client *c, const fk_params *p,
                                       const fk_dataset *data, fk_err *err)
{
    fk_classes cls;
    char who[64];
    snprintf(who, sizeof who, "dica: client %d", c->idx);
    int rc = fk_classes_parse(&cls, p, 0, FK_DICA_MAX_CLASSES, FK_CLASSES_COUNT_OWN, err);
    if (!rc && cls.n == 0) {
        /* the job lists no classes: send this client's raw labels in phase 0 and index the
         * rows by the union the server sends back ("class_values") */
        size_t n = data->X.rows, k = (size_t)data->n_classes;
        c->own_classes = data->n_classes;
        c->y = malloc((n ? n : 1) * sizeof *c->y);
        c->raw = malloc((n ? n : 1) * sizeof *c->raw);
        c->own_vals = malloc((k ? k : 1) * sizeof *c->own_vals);
        if (!c->y || !c->raw || !c->own_vals)
            rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
        for (size_t i = 0; !rc && i < n; i++) {
            c->y[i] = data->y[i];
            c->raw[i] = fk_classes_raw(data, i);
        }
        for (size_t j = 0; !rc && j < k; j++)
            c->own_vals[j] = data->classes ? data->classes[j] : (double)j;
    } else if (!rc) {
        rc = fk_classes_index(&cls, data, who, &c->y, err);
    }
    fk_classes_close(&cls);
    return rc;
}

FK_CHECKRETURN int fk__dicaj_client_init(void **out, const fk_params *p, const fk_dataset *data, int idx,
                          int n_clients, uint64_t seed, fk_dica_variant v, fk_err *err)
{
    *out = NULL;
    fk__dicaj_client *c = calloc(1, sizeof *c);
    if (!c)
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    c->idx = idx;
    c->seed = seed;
    int rc = fk__dicaj_cfg_parse(p, v, n_clients, &c->c, err);
    if (rc == FK_OK && (idx < 0 || idx >= n_clients))
        rc = fk_err_set(err, FK_EINVAL, "dica: client index %d outside [0, %d)", idx, n_clients);
    size_t n = data->X.rows, d = data->X.cols;
    if (rc == FK_OK) {
        c->holdout = c->c.holdout[idx];
        if (d == 0 || (!c->holdout && n < 2))
            rc =
                fk_err_set(err, FK_EINVAL, "dica: client %d (%s) holds %zu samples of %zu features",
                           idx, data->name, n, d);
    }
    for (size_t i = 0; rc == FK_OK && i < n; i++)
        for (size_t j = 0; j < d; j++)
            if (!isfinite(fk_mat_get(&data->X, i, j))) {
                rc = fk_err_set(err, FK_EINVAL,
                                "dica: client %d (%s): input row %zu column %zu is NaN or Inf", idx,
                                data->name, i, j);
                break;
            }
    if (rc == FK_OK && fk_mat_copy(&c->X, &data->X))
        rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    /* Outputs: labels for classification, y_raw for regression. */
    if (rc == FK_OK && !c->c.regression && data->y) {
        rc = index_labels(c, p, data, err);
        c->labelled = 1;
    }
    if (rc == FK_OK && c->c.regression && data->y_raw) {
        c->t = malloc(n * sizeof *c->t);
        if (!c->t)
            rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
        for (size_t i = 0; rc == FK_OK && i < n; i++) {
            c->t[i] = data->y_raw[i];
            if (!isfinite(c->t[i]))
                rc = fk_err_set(err, FK_EINVAL, "dica: client %d (%s): target %zu is NaN or Inf",
                                idx, data->name, i);
        }
        c->labelled = 1;
    }
    /* The predictor (and DICA itself) learns from labelled training clients only. */
    if (rc == FK_OK && !c->holdout && !c->labelled)
        rc = fk_err_set(err, FK_EINVAL,
                        "dica: client %d (%s) holds no %s, but every training client of a %s job "
                        "needs them (list test-only clients in holdout)",
                        idx, data->name, c->c.regression ? "targets" : "labels",
                        fk_dica_variant_name(v));
    if (rc == FK_OK)
        rc = set_domains(c, data, err);
    if (rc) {
        fk__dicaj_client_close(c);
        return rc;
    }
    *out = c;
    return FK_OK;
}

static double task_scalar(const fk_bundle *b, const char *name)
{
    const fk_tensor *t = fk_bundle_get(b, name);
    return t && t->len == 1 ? t->data[0] : NAN;
}

/* The class count a task or model carries: an integer in [1, FK_DICA_MAX_CLASSES] (1 for
 * regression). A job listing no classes: the rows are re-indexed by its "class_values". */
FK_CHECKRETURN static int task_classes(fk__dicaj_client *c, const fk_bundle *b, size_t *k, fk_err *err)
{
    double v = c->c.regression ? 1.0 : task_scalar(b, "classes");
    if (!(v >= 1 && v <= FK_DICA_MAX_CLASSES) || v != floor(v))
        return fk_err_set(err, FK_EINVAL,
                          "dica: client %d: 'classes' = %g is not a class count (1..%d)", c->idx,
                          v, FK_DICA_MAX_CLASSES);
    /* Without a class list: the union of the clients' labels the server sent ... */
    const fk_tensor *cv = fk_bundle_get(b, "class_values");
    if (c->own_classes && !c->c.regression && cv && c->raw) {
        if (cv->ndim != 1 || cv->len != (uint64_t)v)
            return fk_err_set(err, FK_EINVAL, "dica: client %d: 'class_values' does not list "
                              "the %g classes", c->idx, v);
        fk_classes u = {.v = cv->data, .n = (int)v, .listed = 1};
        for (size_t i = 0; i < c->X.rows; i++) {
            int at = fk_classes_find(&u, c->raw[i]);
            if (at < 0)
                return fk_err_set(err, FK_EINVAL,
                                  "dica: client %d: row %zu (1-based) has label %.17g, which no "
                                  "client sent in phase 0; list the job's classes",
                                  c->idx, i + 1, c->raw[i]);
            c->y[i] = at;
        }
        *k = (size_t)v;
        return FK_OK;
    }
    /* ... or, with a count, index k is the k-th of this client's own labels: the same class as
     * elsewhere only when it holds every class */
    if (c->own_classes && !c->c.regression && (size_t)c->own_classes != (size_t)v)
        return fk_err_set(err, FK_EINVAL,
                          "dica: client %d holds %d of the job's %g classes, so its class "
                          "indices would not mean the same class as the other clients': list "
                          "the job's classes by raw label value, e.g. classes = 1,2,3 or 1..10",
                          c->idx, c->own_classes, v);
    *k = (size_t)v;
    return FK_OK;
}

/* Random features of the client's rows (standardised by the task's x_mean and x_scale when
 * the job standardises) for the broadcast sigma, computed once and kept (phases 1-3 and the
 * final score all need them; sigma, d and the standardisation come from each task). */
FK_CHECKRETURN static int features(fk__dicaj_client *c, const fk_bundle *task, const fk_mat **Phi, fk_err *err)
{
    double sigma = task_scalar(task, "sigma"), d = task_scalar(task, "d");
    if (!(sigma > 0) || !isfinite(sigma) || d != (double)c->X.cols)
        return fk_err_set(
            err, FK_EINVAL,
            "dica: client %d: task carries no kernel width sigma > 0 or another input "
            "dimension d than the client's %zu",
            c->idx, c->X.cols);
    size_t dd = c->X.cols;
    const fk_tensor *mu = fk_bundle_get(task, "x_mean"), *sd = fk_bundle_get(task, "x_scale");
    int same = c->Phi.data && c->phi_sigma == sigma;
    if (same && c->c.standardize)
        same = mu && sd && mu->len == dd && sd->len == dd && c->phi_std &&
               !memcmp(c->phi_std, mu->data, dd * sizeof(double)) &&
               !memcmp(c->phi_std + dd, sd->data, dd * sizeof(double));
    if (same) {
        *Phi = &c->Phi;
        return FK_OK;
    }
    fk_mat_close(&c->Phi);
    free(c->phi_std);
    c->phi_std = NULL;
    c->phi_sigma = 0;
    fk_rff rf = {0};
    fk_mat Xs = {0};
    int rc = fk__dicaj_standardize(task, c->c.standardize, &c->X, &Xs, err);
    if (rc == FK_OK)
        rc = fk__dicaj_rff(&c->c, c->seed, c->X.cols, sigma, &rf, err);
    if (rc == FK_OK)
        rc = fk_rff_map(&rf, &Xs, &c->Phi, err);
    fk_mat_close(&Xs);
    fk_rff_close(&rf);
    if (rc == FK_OK && c->c.standardize) {
        c->phi_std = malloc(2 * dd * sizeof *c->phi_std);
        if (!c->phi_std) {
            fk_mat_close(&c->Phi);
            rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
        } else {
            memcpy(c->phi_std, mu->data, dd * sizeof(double));
            memcpy(c->phi_std + dd, sd->data, dd * sizeof(double));
        }
    }
    if (rc)
        return fk_err_prefix(err, rc, "client %d: ", c->idx);
    c->phi_sigma = sigma;
    *Phi = &c->Phi;
    return FK_OK;
}

/* Output features: one-hot (exact delta kernel) or random features of the target. */
FK_CHECKRETURN static int outputs(const fk__dicaj_client *c, const fk_bundle *task, long C, fk_mat *Psi,
                   fk_err *err)
{
    if (!c->c.regression)
        return fk_dica_onehot(c->y, c->X.rows, (int)C, Psi, err);
    fk_rff rf;
    int rc = fk__dicaj_rff_y(c->seed, task_scalar(task, "sigma_y"), &rf, err);
    fk_mat T = fk_mat_view(c->t, c->X.rows, 1, 1);
    if (rc == FK_OK)
        rc = fk_rff_map(&rf, &T, Psi, err);
    fk_rff_close(&rf);
    return rc;
}

/* Phase 0: n, d, the per-feature sums and second moments about the client's own mean (two
 * passes: stable at any offset; the server joins them by Chan's rule), the class count and
 * the target sum. */
FK_CHECKRETURN static int step_moments(fk__dicaj_client *c, fk_bundle *up, fk_err *err)
{
    size_t n = c->holdout ? 0 : c->X.rows, d = c->X.cols;
    double *sx = calloc(2 * d, sizeof *sx), sy = 0;
    if (!sx)
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    fk_dica_moments(&c->X, n, sx, sx + d);
    for (size_t i = 0; c->t && i < n; i++)
        sy += c->t[i];
    int C = 0;
    for (size_t i = 0; c->y && i < c->X.rows; i++)
        C = c->y[i] + 1 > C ? c->y[i] + 1 : C;
    int rc = fk__dicaj_put(up, "n", 1, 0, (double[]){(double)n}, err);
    if (!rc)
        rc = fk__dicaj_put(up, "d", 1, 0, (double[]){(double)d}, err);
    if (!rc)
        rc = fk__dicaj_put(up, "sum_x", d, 0, sx, err);
    if (!rc)
        rc = fk__dicaj_put(up, "m2_x", d, 0, sx + d, err);
    if (!rc)
        rc = fk__dicaj_put(up, "classes", 1, 0, (double[]){(double)C}, err);
    if (!rc && c->c.regression)
        rc = fk__dicaj_put(up, "sum_y", 1, 0, &sy, err);
    if (!rc && c->own_vals && c->own_classes > 0)
        rc = fk__dicaj_put(up, "labels", (size_t)c->own_classes, 0, c->own_vals, err);
    free(sx);
    return rc;
}

/* The §7.3 message: per-domain sums, packed second moment, output cross-moments. */
FK_CHECKRETURN static int step_stats(fk__dicaj_client *c, const fk_bundle *task, fk_bundle *up, fk_err *err)
{
    if (c->holdout)
        return fk__dicaj_put(up, "n", 1, 0, (double[]){0}, err);
    size_t kc = 0;
    int rc = task_classes(c, task, &kc, err);
    if (rc)
        return rc;
    long C = c->c.regression ? 0 : (long)kc;
    double lim = task_scalar(task, "max_upload"); /* NaN when absent (older servers) */
    rc = fk__dicaj_check_size(&c->c, c->n_dom, C,
                              lim >= 1 && lim < 1.8e19 ? (uint64_t)lim : 0, err);
    if (rc)
        return fk_err_prefix(err, rc, "client %d: ", c->idx);
    size_t Dy = fk__dicaj_dy(&c->c, C), D = 2 * (size_t)c->c.R;
    fk_mat Psi = {0};
    const fk_mat *Phi = NULL;
    fk_dica_stats st = {0};
    rc = features(c, task, &Phi, err);
    if (!rc && Dy)
        rc = outputs(c, task, C, &Psi, err);
    if (!rc)
        rc = fk_dica_stats_init(&st, D, Dy, err);
    if (!rc)
        rc = fk_dica_stats_add(&st, Phi, Dy ? &Psi : NULL, c->dom, err);
    fk_mat_close(&Psi);
    double *buf = NULL;
    if (!rc) {
        size_t big = D * (D + 1) / 2 > st.n_dom ? D * (D + 1) / 2 : st.n_dom;
        buf = malloc((big + Dy * Dy + 1) * sizeof *buf);
        if (!buf)
            rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory for the D = %zu upload", D);
    }
    if (!rc)
        rc = fk__dicaj_put(up, "n", 1, 0, &st.n, err);
    if (!rc) {
        for (size_t i = 0; i < st.n_dom; i++)
            buf[i] = (double)st.dom_id[i];
        rc = fk__dicaj_put(up, "dom_id", st.n_dom, 0, buf, err);
    }
    if (!rc)
        rc = fk__dicaj_put(up, "dom_n", st.n_dom, 0, st.dom_n, err);
    if (!rc)
        rc = fk__dicaj_put(up, "dom_sum", st.n_dom, D, st.dom_sum, err);
    if (!rc) {
        fk__dicaj_pack(st.S, D, buf);
        rc = fk__dicaj_put(up, "S_phiphi_c", D * (D + 1) / 2, 0, buf, err);
    }
    if (!rc && Dy) {
        rc = fk__dicaj_put(up, "s_psi", Dy, 0, st.s_psi, err);
        if (!rc)
            rc = fk__dicaj_put(up, "C_phipsi_c", D, Dy, st.C, err);
        /* and the uncentred sum phi psi^T = C_c + (sum phi)(sum psi)^T / n, which the server
         * checks exactly against the domain sums (a scaled C_c would be plausible data) */
        double *cu = rc ? NULL : malloc((D * Dy + D) * sizeof *cu), *sp = cu ? cu + D * Dy : NULL;
        if (!rc && !cu)
            rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory for the D = %zu upload", D);
        if (!rc) {
            fk_dica_stats_sum_phi(&st, sp);
            for (size_t i = 0; i < D; i++)
                for (size_t j = 0; j < Dy; j++)
                    cu[i * Dy + j] = st.C[i * Dy + j] + sp[i] * st.s_psi[j] / st.n;
            rc = fk__dicaj_put(up, "C_phipsi", D, Dy, cu, err);
        }
        free(cu);
        fk__dicaj_pack(st.Syy, Dy, buf);
        if (!rc)
            rc = fk__dicaj_put(up, "S_psipsi_c", Dy * (Dy + 1) / 2, 0, buf, err);
    }
    free(buf);
    fk_dica_stats_close(&st);
    return rc;
}

/* Projections z = W^T (phi(x) - c) of the client's rows under a model bundle. */
FK_CHECKRETURN static int project(fk__dicaj_client *c, const fk_bundle *model, fk_mat *Z, size_t *m, fk_err *err)
{
    size_t D = 2 * (size_t)c->c.R;
    const fk_tensor *W = fk_bundle_get(model, "W");
    if (!W || W->ndim != 2 || W->shape[0] != D || W->shape[1] == 0 || W->shape[1] >= D)
        return fk_err_set(err, FK_EINVAL, "dica: client %d: model has no D x m tensor 'W'", c->idx);
    *m = (size_t)W->shape[1];
    const fk_tensor *pb = fk__dicaj_take(model, "phi_bar", D, err);
    if (!pb || !fk__dicaj_take(model, "W", D * *m, err))
        return fk_err_prefix(err, FK_EINVAL, "client %d: ", c->idx);
    const fk_mat *Phi = NULL;
    int rc = features(c, model, &Phi, err);
    fk_dica_fit f = {.D = D, .m = *m, .W = fk_mat_view(W->data, D, *m, *m), .phi_bar = pb->data};
    double *center = NULL;
    if (!rc && c->c.batch_center) {
        center = calloc(D, sizeof *center);
        if (!center)
            rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
        for (size_t i = 0; !rc && i < Phi->rows; i++)
            fk_axpy(D, 1.0 / (double)Phi->rows, fk_mat_row(Phi, i), center);
    }
    if (!rc)
        rc = fk_dica_project(&f, Phi, center, Z, err);
    free(center);
    return rc;
}

/* Ridge targets: one-hot rows or the regression target. */
FK_CHECKRETURN static int targets(const fk__dicaj_client *c, size_t k, double **T, fk_err *err)
{
    size_t n = c->X.rows;
    *T = calloc(n * k, sizeof **T);
    if (!*T)
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    for (size_t i = 0; i < n; i++) {
        if (c->c.regression) {
            (*T)[i] = c->t[i];
        } else {
            if (c->y[i] < 0 || (size_t)c->y[i] >= k) {
                free(*T);
                *T = NULL;
                return fk_err_set(err, FK_EINVAL, "dica: client %d: label %d outside [0, %zu)",
                                  c->idx, c->y[i], k);
            }
            (*T)[i * k + (size_t)c->y[i]] = 1.0;
        }
    }
    return FK_OK;
}

FK_CHECKRETURN static int step_ridge(fk__dicaj_client *c, const fk_bundle *task, fk_bundle *up, fk_err *err)
{
    if (c->holdout)
        return fk__dicaj_put(up, "n", 1, 0, (double[]){0}, err);
    size_t m = 0, k = 0;
    fk_mat Z = {0};
    double *T = NULL;
    int rc = task_classes(c, task, &k, err);
    if (rc)
        return rc;
    rc = project(c, task, &Z, &m, err);
    if (!rc)
        rc = targets(c, k, &T, err);
    size_t p = m + 1;
    double *A = rc ? NULL : calloc(p * p, sizeof *A), *b = rc ? NULL : calloc(p * k, sizeof *b);
    if (!rc && (!A || !b))
        rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    if (!rc) {
        fk_dica_ridge_add(&Z, T, k, A, b);
        rc = fk__dicaj_put(up, "n", 1, 0, (double[]){(double)Z.rows}, err);
    }
    if (!rc)
        rc = fk__dicaj_put(up, "ridge_A", p, p, A, err);
    if (!rc)
        rc = fk__dicaj_put(up, "ridge_b", p, k, b, err);
    free(A);
    free(b);
    free(T);
    fk_mat_close(&Z);
    return rc;
}

int fk__dicaj_client_evaluate(void *v, const fk_bundle *model, fk_report *rep, fk_err *err)
{
    fk__dicaj_client *c = v;
    rep->n_samples = (double)c->X.rows;
    if (!c->labelled)
        return FK_OK; /* nothing to score with */
    size_t m = 0, k = 0;
    const fk_tensor *th = fk_bundle_get(model, "Theta");
    if (task_classes(c, model, &k, err))
        return FK_EINVAL;
    if (!th)
        return fk_err_set(err, FK_EINVAL, "dica: client %d: model has no predictor 'Theta'",
                          c->idx);
    fk_mat Z = {0};
    int rc = project(c, model, &Z, &m, err);
    if (!rc && !fk__dicaj_take(model, "Theta", (m + 1) * k, err))
        rc = fk_err_set(err, FK_EINVAL, "dica: client %d: 'Theta' is not (m+1) x classes", c->idx);
    double *pred = rc ? NULL : malloc(Z.rows * k * sizeof *pred);
    if (!rc && !pred)
        rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    if (!rc) {
        fk_dica_ridge_predict(&Z, th->data, k, pred);
        double hit = 0, se = 0;
        for (size_t i = 0; i < Z.rows; i++) {
            if (c->c.regression) {
                double e = pred[i] - c->t[i];
                se += e * e;
            } else {
                size_t best = 0;
                for (size_t j = 1; j < k; j++)
                    if (pred[i * k + j] > pred[i * k + best])
                        best = j;
                hit += (int)best == c->y[i];
            }
        }
        if (c->c.regression)
            rep->error = rep->rmse = sqrt(se / (double)Z.rows);
        else
            rep->accuracy = hit / (double)Z.rows;
    }
    free(pred);
    fk_mat_close(&Z);
    return rc;
}

int fk__dicaj_client_step(void *v, const fk_bundle *task, fk_bundle *up, fk_report *rep,
                          fk_err *err)
{
    fk__dicaj_client *c = v;
    double ph = task_scalar(task, "phase");
    rep->n_samples = (double)c->X.rows;
    if (ph == 0)
        return step_moments(c, up, err);
    if (ph == 1)
        return step_stats(c, task, up, err);
    if (ph == 2)
        return step_ridge(c, task, up, err);
    if (ph == 3) {
        int rc = fk__dicaj_client_evaluate(c, task, rep, err);
        if (!rc)
            rc = fk__dicaj_put(up, "n", 1, 0, (double[]){0}, err);
        return rc;
    }
    return fk_err_set(err, FK_EINVAL, "dica: client %d: task has no valid 'phase'", c->idx);
}

/* The client keeps no state between phases: every task carries what the phase needs. */
int fk__dicaj_client_save(void *v, fk_bundle *out, fk_err *err)
{
    fk__dicaj_client *c = v;
    return fk__dicaj_put(out, "client", 1, 0, (double[]){(double)c->idx}, err);
}

int fk__dicaj_client_load(void *v, const fk_bundle *in, fk_err *err)
{
    fk__dicaj_client *c = v;
    const fk_tensor *t = fk__dicaj_take(in, "client", 1, err);
    if (!t || t->data[0] != (double)c->idx)
        return fk_err_set(err, FK_EFORMAT, "dica: checkpoint is not client %d's", c->idx);
    return FK_OK;
}
