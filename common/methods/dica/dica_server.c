/* DICA job, server side: check and sum the uploads, solve §7.4, the ridge of §8.1,
 * checkpoints. Every upload is a sum (or a per-domain sum), so a missing client only
 * removes its samples and domains (§7.8). */
#include "common/methods/classes.h"
#include "common/methods/dica/dica_int.h"
#include "common/methods/predict.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"

int fk__dicaj_server_init(void **out, const fk_params *p, int n_clients, uint64_t seed,
                          fk_dica_variant v, fk_err *err)
{
    *out = NULL;
    fk__dicaj_server *s = calloc(1, sizeof *s);
    if (!s)
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    int rc = fk__dicaj_cfg_parse(p, v, n_clients, &s->c, err);
    /* The smallest upload (one domain, C from the job if set) must fit already. */
    if (rc == FK_OK)
        rc = fk__dicaj_check_size(&s->c, 1, s->c.classes, 0, err);
    s->got = calloc((size_t)n_clients, 1);
    if (rc == FK_OK && !s->got)
        rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    /* A listed `classes` travels in the model as "class_values" (what label_union gives a
     * job listing none), so its predictions answer raw labels. */
    fk_classes cls = {0};
    if (rc == FK_OK && !s->c.regression)
        rc = fk_classes_parse(&cls, p, 0, FK_DICA_MAX_CLASSES, FK_CLASSES_COUNT_OWN, err);
    if (rc == FK_OK && cls.listed && cls.v) {
        s->vals = cls.v;
        cls.v = NULL;
    }
    fk_classes_close(&cls);
    if (rc) {
        fk__dicaj_server_close(s);
        return rc;
    }
    s->n = n_clients;
    s->seed = seed;
    *out = s;
    return FK_OK;
}

void fk__dicaj_server_close(void *v)
{
    fk__dicaj_server *s = v;
    if (!s)
        return;
    fk__dicaj_cfg_close(&s->c);
    fk_dica_stats_close(&s->st);
    fk_dica_fit_close(&s->fit);
    free(s->x_mean);
    free(s->x_scale);
    free(s->A);
    free(s->b);
    free(s->Theta);
    free(s->got);
    free(s->vals);
    free(s);
}

int fk__dicaj_server_plan(void *v, int round, fk_rng *rng, int *chosen, int *n_chosen, fk_err *err)
{
    fk__dicaj_server *s = v;
    (void)rng;
    if (round != 1)
        return fk_err_set(err, FK_ESTATE, "dica: the job has one round (asked for round %d)",
                          round);
    fk_plan_every_client(s->n, chosen, n_chosen);
    return FK_OK;
}

static size_t D_of(const fk__dicaj_server *s)
{
    return 2 * (size_t)s->c.R;
}

/* The model as far as it exists: projection, predictor and what a client needs to use
 * them (the frequencies come from the job seed and these scalars). */
FK_CHECKRETURN static int put_model(fk__dicaj_server *s, fk_bundle *out, fk_err *err)
{
    int rc = FK_OK;
    if (fk_bundle_put_scalar(out, "sigma", s->sigma) ||
        fk_bundle_put_scalar(out, "sigma_y", s->sigma_y) ||
        fk_bundle_put_scalar(out, "d", (double)s->d) ||
        fk_bundle_put_scalar(out, "classes", (double)s->C) ||
        fk_bundle_put_scalar(out, "R", (double)s->c.R) ||
        /* what a predictor without the job config needs: the frequencies' seed and kind,
         * the centring and the task */
        fk_model_put_seed(out, "rff_seed", s->seed) ||
        fk_bundle_put_scalar(out, "rff_orthogonal", s->c.features == FK_RFF_ORTHOGONAL) ||
        fk_bundle_put_scalar(out, "batch_center", s->c.batch_center) ||
        fk_bundle_put_scalar(out, "regression", s->c.regression) ||
        (s->vals && fk_bundle_put_vec(out, "class_values", (size_t)s->C, s->vals)))
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    /* the standardisation is part of the model: prediction needs it (a client's task too) */
    if (s->x_mean) {
        rc = fk__dicaj_put(out, "x_mean", (size_t)s->d, 0, s->x_mean, err);
        if (!rc)
            rc = fk__dicaj_put(out, "x_scale", (size_t)s->d, 0, s->x_scale, err);
        if (rc)
            return rc;
    }
    if (s->stage >= ST_SOLVED) {
        size_t D = D_of(s);
        rc = fk__dicaj_put(out, "W", D, s->m, s->fit.W.data, err);
        if (!rc)
            rc = fk__dicaj_put(out, "phi_bar", D, 0, s->fit.phi_bar, err);
        if (!rc)
            rc = fk__dicaj_put(out, "gamma", s->m, 0, s->fit.gamma, err);
        if (!rc && fk_bundle_put_scalar(out, "n_domains", s->fit.n_domains))
            rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
        double *drop = calloc((size_t)s->n, sizeof *drop);
        if (!rc && !drop)
            rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
        for (int i = 0; !rc && i < s->n; i++)
            drop[i] = !s->c.holdout[i] && !s->got[i];
        if (!rc)
            rc = fk__dicaj_put(out, "dropped", (size_t)s->n, 0, drop, err);
        free(drop);
    }
    if (!rc && s->stage >= ST_RIDGE)
        rc = fk__dicaj_put(out, "Theta", s->m + 1, s->k, s->Theta, err);
    return rc;
}

int fk__dicaj_server_task(void *v, int round, int phase, int client, fk_bundle *out, fk_err *err)
{
    fk__dicaj_server *s = v;
    (void)client;
    if (round != 1 || phase < 0 || phase > 3)
        return fk_err_set(err, FK_ESTATE, "dica: no task for round %d phase %d", round, phase);
    if (fk_bundle_put_scalar(out, "phase", phase))
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    if (phase == 0)
        return FK_OK;
    if (phase >= 2 && s->stage < ST_SOLVED + (phase == 3))
        return fk_err_set(err, FK_ESTATE, "dica: phase %d before the solve", phase);
    /* The statistics task carries the upload limit (the server's, or the job's smaller
     * cap): clients check it with their own number of domains before computing. */
    if (phase == 1 && fk_bundle_put_scalar(out, "max_upload", (double)fk__dicaj_limit(&s->c, 0)))
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    return put_model(s, out, err);
}

static int is_count(double v, double lo)
{
    return v >= lo && v <= 9e15 && v == floor(v);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* A job listing no classes: class k is the k-th of the union of the raw labels the clients
 * sent in phase 0, so a client lacking a class still means class k by k (issue 32). No
 * client sent labels (an older client): C stays the largest count. */
FK_CHECKRETURN static int label_union(fk__dicaj_server *s, const fk_update *ups, int n,
                                      fk_err *err)
{
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        const fk_tensor *t = fk_bundle_get(&ups[i].msg, "labels");
        total += t ? t->len : 0;
    }
    free(s->vals);
    s->vals = NULL;
    if (!total)
        return FK_OK;
    double *u = malloc(total * sizeof *u);
    if (!u)
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    size_t at = 0, k = 0;
    for (int i = 0; i < n; i++) {
        const fk_tensor *t = fk_bundle_get(&ups[i].msg, "labels");
        for (size_t j = 0; t && j < t->len; j++)
            u[at++] = t->data[j];
    }
    qsort(u, total, sizeof *u, cmp_double);
    for (size_t i = 0; i < total; i++)
        if (!k || u[i] != u[k - 1])
            u[k++] = u[i];
    if (k > FK_DICA_MAX_CLASSES) {
        free(u);
        return fk_err_set(err, FK_EINVAL, "dica: the clients hold %zu distinct labels (at most "
                          "%d classes)", k, FK_DICA_MAX_CLASSES);
    }
    s->vals = u;
    s->C = (long)k;
    return FK_OK;
}

/* Scale of one input feature from its pooled moments: the standard deviation; 1 for a
 * feature constant over the training rows (it only gets centred). A spread below the
 * rounding of the values themselves cannot be standardised: refused, naming the numbers. */
FK_CHECKRETURN static int feature_scale(const fk__dicaj_server *s, size_t j, double N, double mean,
                                        double m2, double *scale, fk_err *err)
{
    double sd = sqrt(m2 / N);
    if (!isfinite(mean) || !isfinite(sd))
        return fk_err_set(err, FK_EINVAL,
                          "dica: input feature %zu: the clients' sums overflow (mean %g, standard "
                          "deviation %g over %g rows); rescale that feature",
                          j, mean, sd, N);
    if (sd == 0) {
        *scale = 1.0;
        return FK_OK;
    }
    if (sd <= 1e-12 * fabs(mean))
        return fk_err_set(err, FK_EINVAL,
                          "dica: input feature %zu has standard deviation %g about a mean of %g "
                          "over the %g training rows (%d client(s) of %ld features): below the "
                          "rounding of its values, so it cannot be standardised; drop that "
                          "feature, or set standardize = none (and sigma)",
                          j, sd, mean, N, s->n, s->d);
    *scale = sd;
    return FK_OK;
}

/* Phase 0: d, the class count, and the pooled per-feature moments by Chan's rule (each
 * client's m2_x is about its own mean, so nothing cancels however far the data sit from
 * 0); from them the standardisation, sigma and sigma_y. */
FK_CHECKRETURN static int aggregate_moments(fk__dicaj_server *s, const fk_update *ups, int n, fk_err *err)
{
    double N = 0, sy = 0;
    long C = 0;
    int ref = -1, train = 0;
    double *sx = NULL, *m2 = NULL;
    for (int i = 0; i < n; i++) {
        const fk_bundle *b = &ups[i].msg;
        long d = (long)fk_bundle_get(b, "d")->data[0];
        if (ref < 0) {
            ref = ups[i].client;
            s->d = d;
            sx = calloc(2 * (size_t)d, sizeof *sx);
            if (!sx)
                return fk_err_set(err, FK_ENOMEM, "dica: out of memory");
            m2 = sx + d;
        } else if (d != s->d) {
            free(sx);
            return fk_err_set(err, FK_EINVAL,
                              "dica: client %d has d = %ld input features but client %d has %ld; "
                              "every client must use the same features",
                              ups[i].client, d, ref, s->d);
        }
        long c = (long)fk_bundle_get(b, "classes")->data[0];
        C = c > C ? c : C;
        if (s->c.holdout[ups[i].client])
            continue;
        train++;
        fk_dica_moments_merge(&N, sx, m2, (size_t)d, fk_bundle_get(b, "n")->data[0],
                              fk_bundle_get(b, "sum_x")->data, fk_bundle_get(b, "m2_x")->data);
        if (s->c.regression)
            sy += fk_bundle_get(b, "sum_y")->data[0];
    }
    int rc = FK_OK;
    if (train < s->c.quorum || N < 2)
        rc = fk_err_set(err, FK_ELIMIT,
                        "dica: %d training client(s) with %g samples answered phase 0, below the "
                        "min_train_clients = %ld",
                        train, N, s->c.quorum);
    size_t d = (size_t)s->d;
    free(s->x_mean);
    free(s->x_scale);
    s->x_mean = s->x_scale = NULL;
    double sigma = s->c.sigma;
    if (!rc && s->c.standardize) {
        s->x_mean = malloc(d * sizeof *s->x_mean);
        s->x_scale = malloc(d * sizeof *s->x_scale);
        if (!s->x_mean || !s->x_scale)
            rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
        size_t varying = 0;
        for (size_t j = 0; !rc && j < d; j++) {
            s->x_mean[j] = sx[j] / N;
            rc = feature_scale(s, j, N, s->x_mean[j], m2[j], &s->x_scale[j], err);
            varying += m2[j] > 0;
        }
        /* Standardised, every varying feature has variance 1: tr Cov = their number. */
        if (!rc && !(sigma > 0))
            sigma = varying ? sqrt(2.0 * (double)varying) : NAN;
    } else if (!rc && !(sigma > 0)) {
        sigma = fk_dica_sigma_rule(N, m2, d);
    }
    free(sx);
    if (rc) { /* no half-filled standardisation may reach a model */
        free(s->x_mean);
        free(s->x_scale);
        s->x_mean = s->x_scale = NULL;
        return rc;
    }
    if (!(sigma > 0) || !isfinite(sigma))
        return fk_err_set(err, FK_EINVAL,
                          "dica: every one of the %zu input features is constant over the %g "
                          "training rows (zero spread), so the sigma rule has nothing to measure; "
                          "set sigma, or give the clients inputs that vary",
                          d, N);
    s->sigma = sigma;
    s->C = s->c.classes ? s->c.classes : C;
    if (!s->c.classes && !s->c.regression && (rc = label_union(s, ups, n, err)))
        return rc;
    if (fk_dica_supervised(s->c.variant) && !s->c.regression && s->C < 2)
        return fk_err_set(err, FK_EINVAL,
                          "dica: supervised DICA needs at least 2 classes (got %ld)", s->C);
    s->sigma_y = 0;
    if (s->c.regression) {
        double sy_rule = s->c.sigma_y > 0 ? s->c.sigma_y : sy / N;
        if (!(sy_rule > 0) || !isfinite(sy_rule))
            return fk_err_set(err, FK_EINVAL,
                              "dica: the mean training target is not > 0 (the default of "
                              "sigma_y); set sigma_y > 0");
        s->sigma_y = sy_rule;
    }
    s->m = fk__dicaj_m(&s->c, s->C);
    s->k = s->c.regression ? 1 : (size_t)s->C;
    if (s->m >= D_of(s))
        return fk_err_set(err, FK_EINVAL, "dica: m = %zu must be below D = 2R = %zu", s->m,
                          D_of(s));
    rc = fk__dicaj_check_size(&s->c, 1, s->C, 0, err);
    if (rc)
        return rc;
    s->stage = ST_SIGMA;
    return FK_OK;
}

/* The DICA solve on the summed statistics with the job's options: after the statistics
 * round, and again when a checkpoint past that round is loaded. A failed solve leaves no
 * fit, so the stage falls back to before it: the model never names a fit that is gone. */
static int solve(fk__dicaj_server *s, fk_err *err)
{
    fk_dica_opts o;
    fk_dica_opts_default(&o, s->c.variant, s->m);
    o.lambda = s->c.lambda;
    o.eps = s->c.eps;
    o.q_weight = s->c.q_weight;
    o.delta = s->c.delta;
    o.min_domain = s->c.min_domain;
    o.rank_check = !s->c.regression;
    fk_dica_fit_close(&s->fit);
    int rc = fk_dica_solve(&s->st, &o, &s->fit, err);
    if (rc && s->stage >= ST_SOLVED)
        s->stage = ST_SIGMA;
    return rc;
}

/* Sum the statistics in client order, name the missing training clients, solve. */
FK_CHECKRETURN static int aggregate_stats(fk__dicaj_server *s, const fk_update *ups, int n, fk_err *err)
{
    size_t D = D_of(s), Dy = fk__dicaj_dy(&s->c, s->C);
    fk_dica_stats_close(&s->st);
    int rc = fk_dica_stats_init(&s->st, D, Dy, err);
    double *sphi = rc ? NULL : malloc(D * sizeof *sphi);
    if (!rc && !sphi)
        rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    memset(s->got, 0, (size_t)s->n);
    for (int i = 0; rc == FK_OK && i < n; i++) {
        int c = ups[i].client;
        if (s->c.holdout[c])
            continue;
        const fk_bundle *b = &ups[i].msg;
        const fk_tensor *ids = fk_bundle_get(b, "dom_id"), *dn = fk_bundle_get(b, "dom_n");
        const fk_tensor *ds = fk_bundle_get(b, "dom_sum");
        /* Each client's second moments are about its own mean: Chan's correction for the
         * distance between its mean and the sums so far, before its sums join them. */
        for (size_t j = 0; j < D; j++)
            sphi[j] = 0;
        for (size_t q = 0; q < ids->len; q++)
            fk_axpy(D, 1.0, ds->data + q * D, sphi);
        rc = fk_dica_stats_shift(&s->st, fk_bundle_get(b, "n")->data[0], sphi,
                                 Dy ? fk_bundle_get(b, "s_psi")->data : NULL, err);
        for (size_t q = 0; rc == FK_OK && q < ids->len; q++) {
            long k = fk_dica_stats_domain(&s->st, (long)ids->data[q], err);
            if (k < 0) {
                rc = FK_ENOMEM;
                break;
            }
            s->st.dom_n[k] += dn->data[q];
            fk_axpy(D, 1.0, ds->data + q * D, s->st.dom_sum + (size_t)k * D);
        }
        fk__dicaj_unpack_add(fk_bundle_get(b, "S_phiphi_c")->data, D, s->st.S);
        if (Dy) {
            fk_axpy(Dy, 1.0, fk_bundle_get(b, "s_psi")->data, s->st.s_psi);
            fk_axpy(D * Dy, 1.0, fk_bundle_get(b, "C_phipsi_c")->data, s->st.C);
            fk__dicaj_unpack_add(fk_bundle_get(b, "S_psipsi_c")->data, Dy, s->st.Syy);
        }
        s->st.n += fk_bundle_get(b, "n")->data[0];
        s->got[c] = 1;
    }
    free(sphi);
    if (rc)
        return rc;
    int have = 0, want = 0;
    char missing[256] = "";
    size_t off = 0;
    for (int c = 0; c < s->n; c++) {
        if (s->c.holdout[c])
            continue;
        want++;
        have += s->got[c];
        if (!s->got[c] && off < sizeof missing - 16)
            off += (size_t)snprintf(missing + off, sizeof missing - off, "%s%d", off ? "," : "", c);
    }
    if (have < want)
        fk_log(FK_LOG_WARN, "dica_dropout",
               "clients=%s delivered=%d of=%d (their domains are "
               "left out of the solve)",
               missing, have, want);
    if (have < s->c.quorum)
        return fk_err_set(err, FK_ELIMIT,
                          "dica: %d of %d training clients delivered statistics, below "
                          "min_train_clients = %ld (missing: %s)",
                          have, want, s->c.quorum, missing);
    if ((rc = solve(s, err)))
        return rc;
    s->stage = ST_SOLVED;
    return FK_OK;
}

FK_CHECKRETURN static int aggregate_ridge(fk__dicaj_server *s, const fk_update *ups, int n, fk_err *err)
{
    size_t p = s->m + 1, k = s->k;
    if (s->stage == ST_RIDGE)
        s->stage = ST_SOLVED; /* Theta is rebuilt below; a failure leaves none to report */
    free(s->A);
    free(s->b);
    free(s->Theta);
    s->A = calloc(p * p, sizeof *s->A);
    s->b = calloc(p * k, sizeof *s->b);
    s->Theta = calloc(p * k, sizeof *s->Theta);
    if (!s->A || !s->b || !s->Theta)
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    int got = 0;
    for (int i = 0; i < n; i++) {
        const fk_tensor *A = fk_bundle_get(&ups[i].msg, "ridge_A");
        if (s->c.holdout[ups[i].client] || !A)
            continue;
        fk_axpy(p * p, 1.0, A->data, s->A);
        fk_axpy(p * k, 1.0, fk_bundle_get(&ups[i].msg, "ridge_b")->data, s->b);
        got++;
    }
    if (got == 0)
        return fk_err_set(err, FK_ELIMIT, "dica: no training client sent predictor statistics");
    int rc = fk_dica_ridge_solve(s->m, k, s->A, s->b, s->c.alpha_rel, s->Theta, err);
    if (rc)
        return rc;
    /* finite statistics can still overflow the solve; a model is never non-finite */
    for (size_t i = 0; i < p * k; i++)
        if (!isfinite(s->Theta[i]))
            return fk_err_set(err, FK_ENUMERIC,
                              "dica: the predictor's ridge solve overflowed (%d client(s) "
                              "sent statistics); their values are out of range",
                              got);
    s->stage = ST_RIDGE;
    return FK_OK;
}

int fk__dicaj_server_aggregate(void *v, int round, int phase, const fk_update *ups, int n,
                               int *done, fk_err *err)
{
    fk__dicaj_server *s = v;
    *done = 0;
    if (round != 1 || phase < 0 || phase > 3)
        return fk_err_set(err, FK_ESTATE, "dica: the job has one round of 4 phases (got %d/%d)",
                          round, phase);
    if (s->stage < phase) /* stages count the phases done */
        return fk_err_set(err, FK_ESTATE, "dica: phase %d before the earlier phases", phase);
    /* Every update passes the checks here too (the daemon may not call check_update); a
     * refused one is a dropout, as the method table says. One per client, in order. */
    fk_update *ok = malloc(((size_t)n + 1) * sizeof *ok);
    if (!ok)
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    int m = 0;
    for (int i = 0; i < n; i++) {
        fk_err cerr = {0};
        if ((m > 0 && ups[i].client <= ok[m - 1].client) ||
            fk__dicaj_server_check(s, round, phase, &ups[i], &cerr) != FK_OK) {
            fk_log(FK_LOG_WARN, "dica_update_refused", "client=%d phase=%d reason=\"%s\"",
                   ups[i].client, phase,
                   m > 0 && ups[i].client <= ok[m - 1].client ? "duplicate or out of order"
                                                              : cerr.msg);
            continue;
        }
        ok[m++] = ups[i];
    }
    int rc = FK_OK;
    switch (phase) {
    case 0:
        rc = aggregate_moments(s, ok, m, err);
        break;
    case 1:
        rc = aggregate_stats(s, ok, m, err);
        break;
    case 2:
        rc = aggregate_ridge(s, ok, m, err);
        break;
    default:
        s->stage = ST_DONE;
        *done = 1;
        break;
    }
    free(ok);
    return rc;
}

int fk__dicaj_server_model(void *v, fk_bundle *out, fk_err *err)
{
    return put_model(v, out, err);
}

int fk__dicaj_server_finished(void *v)
{
    return ((fk__dicaj_server *)v)->stage == ST_DONE;
}

/* ---- checkpoints: the scalars, the summed statistics, the solve and the ridge ---- */

int fk__dicaj_server_save(void *v, fk_bundle *out, fk_err *err)
{
    fk__dicaj_server *s = v;
    double sc[8] = {s->stage,   (double)s->d, (double)s->C, s->sigma,
                    s->sigma_y, (double)s->m, (double)s->k, (double)s->c.R};
    int rc = fk__dicaj_put(out, "state", 8, 0, sc, err);
    double *got = calloc((size_t)s->n, sizeof *got);
    if (!got)
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    for (int i = 0; i < s->n; i++)
        got[i] = s->got[i];
    if (!rc)
        rc = fk__dicaj_put(out, "got", (size_t)s->n, 0, got, err);
    free(got);
    if (!rc && s->vals)
        rc = fk__dicaj_put(out, "class_values", (size_t)s->C, 0, s->vals, err);
    if (!rc && s->stage >= ST_SIGMA && s->x_mean) {
        rc = fk__dicaj_put(out, "x_mean", (size_t)s->d, 0, s->x_mean, err);
        if (!rc)
            rc = fk__dicaj_put(out, "x_scale", (size_t)s->d, 0, s->x_scale, err);
    }
    if (!rc && s->stage >= ST_SOLVED) {
        const fk_dica_stats *st = &s->st;
        size_t D = st->D, Dy = st->Dy, Nd = st->n_dom;
        double *pk = malloc((D * (D + 1) / 2 + 1) * sizeof *pk);
        double *ids = malloc((Nd + 1) * sizeof *ids);
        if (!pk || !ids)
            rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
        if (!rc) {
            fk__dicaj_pack(st->S, D, pk);
            for (size_t i = 0; i < Nd; i++)
                ids[i] = (double)st->dom_id[i];
            double sn[3] = {st->n, (double)Dy, (double)Nd};
            rc = fk__dicaj_put(out, "st_scal", 3, 0, sn, err);
            if (!rc)
                rc = fk__dicaj_put(out, "st_Sc", D * (D + 1) / 2, 0, pk, err);
            if (!rc && Nd)
                rc = fk__dicaj_put(out, "st_dom_id", Nd, 0, ids, err);
            if (!rc && Nd)
                rc = fk__dicaj_put(out, "st_dom_n", Nd, 0, st->dom_n, err);
            if (!rc && Nd)
                rc = fk__dicaj_put(out, "st_dom_sum", Nd, D, st->dom_sum, err);
            if (!rc && Dy) {
                rc = fk__dicaj_put(out, "st_s_psi", Dy, 0, st->s_psi, err);
                if (!rc)
                    rc = fk__dicaj_put(out, "st_Cc", D, Dy, st->C, err);
                if (!rc)
                    rc = fk__dicaj_put(out, "st_Syyc", Dy, Dy, st->Syy, err);
            }
        }
        free(pk);
        free(ids);
    }
    /* The solve itself is not stored: load re-solves from the sums (bit-identical, §7.8). */
    if (!rc && s->stage >= ST_RIDGE) {
        size_t p = s->m + 1;
        rc = fk__dicaj_put(out, "ridge_A", p, p, s->A, err);
        if (!rc)
            rc = fk__dicaj_put(out, "ridge_b", p, s->k, s->b, err);
    }
    return rc;
}

static const fk_tensor *want(const fk_bundle *in, const char *name, size_t len, fk_err *err)
{
    const fk_tensor *t = fk__dicaj_take(in, name, len, err);
    if (!t)
        fk_err_prefix(err, FK_EINVAL, "checkpoint: ");
    return t;
}

int fk__dicaj_server_load(void *v, const fk_bundle *in, fk_err *err)
{
    fk__dicaj_server *s = v;
    const fk_tensor *sc = want(in, "state", 8, err), *got = want(in, "got", (size_t)s->n, err);
    if (!sc || !got)
        return FK_EFORMAT;
    if (!(sc->data[0] >= ST_NEW && sc->data[0] <= ST_DONE))
        return fk_err_set(err, FK_EFORMAT, "dica: checkpoint stage %g is not a stage", sc->data[0]);
    int stage = (int)sc->data[0];
    if (sc->data[7] != (double)s->c.R || sc->data[1] < 0 || sc->data[1] > 1e8 || sc->data[2] < 0 ||
        sc->data[2] > FK_DICA_MAX_CLASSES || sc->data[5] < 0 || sc->data[5] >= (double)D_of(s) ||
        sc->data[6] < 0 || sc->data[6] > 65536 || sc->data[3] < 0 || sc->data[4] < 0)
        return fk_err_set(err, FK_EFORMAT, "dica: checkpoint does not match this job (R, stage)");
    const fk_tensor *cv = fk_bundle_get(in, "class_values");
    if (cv && (cv->ndim != 1 || cv->len != (uint64_t)sc->data[2]))
        return fk_err_set(err, FK_EFORMAT, "dica: checkpoint 'class_values' does not hold the "
                          "%g classes", sc->data[2]);
    for (size_t i = 0; cv && i < cv->len; i++)
        if (!isfinite(cv->data[i]) || (i && !(cv->data[i] > cv->data[i - 1])))
            return fk_err_set(err, FK_EFORMAT, "dica: checkpoint 'class_values'[%zu] = %g", i,
                              cv->data[i]);
    double *vals = NULL;
    if (cv && cv->len && !(vals = malloc(cv->len * sizeof *vals)))
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    if (vals)
        memcpy(vals, cv->data, cv->len * sizeof *vals);
    free(s->vals);
    s->vals = vals;
    s->d = (long)sc->data[1];
    s->C = (long)sc->data[2];
    s->sigma = sc->data[3];
    s->sigma_y = sc->data[4];
    s->m = (size_t)sc->data[5];
    s->k = (size_t)sc->data[6];
    for (int i = 0; i < s->n; i++)
        s->got[i] = got->data[i] != 0;
    free(s->x_mean);
    free(s->x_scale);
    s->x_mean = s->x_scale = NULL;
    if (stage >= ST_SIGMA && s->c.standardize) {
        size_t d = (size_t)s->d;
        const fk_tensor *mu = want(in, "x_mean", d, err);
        const fk_tensor *sd = mu ? want(in, "x_scale", d, err) : NULL;
        if (!sd)
            return FK_EFORMAT;
        for (size_t j = 0; j < d; j++)
            if (!(sd->data[j] > 0))
                return fk_err_set(err, FK_EFORMAT,
                                  "dica: checkpoint tensor 'x_scale' entry %zu is not positive", j);
        s->x_mean = malloc((d ? d : 1) * sizeof *s->x_mean);
        s->x_scale = malloc((d ? d : 1) * sizeof *s->x_scale);
        if (!s->x_mean || !s->x_scale)
            return fk_err_set(err, FK_ENOMEM, "dica: out of memory");
        memcpy(s->x_mean, mu->data, d * sizeof *s->x_mean);
        memcpy(s->x_scale, sd->data, d * sizeof *s->x_scale);
    }
    s->stage = stage >= ST_SOLVED ? ST_SIGMA : stage;
    if (stage >= ST_SOLVED) {
        size_t D = D_of(s), Dy = fk__dicaj_dy(&s->c, s->C);
        const fk_tensor *sn = want(in, "st_scal", 3, err);
        if (!sn)
            return FK_EFORMAT;
        size_t Nd = sn->data[2] >= 0 && sn->data[2] < 1e7 ? (size_t)sn->data[2] : 0;
        if (sn->data[1] != (double)Dy || Nd == 0 || s->m >= D || s->m == 0 || s->k == 0 ||
            s->k > 65536)
            return fk_err_set(err, FK_EFORMAT, "dica: checkpoint statistics do not match the job");
        const fk_tensor *S = want(in, "st_Sc", D * (D + 1) / 2, err);
        const fk_tensor *ids = S ? want(in, "st_dom_id", Nd, err) : NULL;
        const fk_tensor *dn = ids ? want(in, "st_dom_n", Nd, err) : NULL;
        const fk_tensor *ds = dn ? want(in, "st_dom_sum", Nd * D, err) : NULL;
        if (!ds)
            return FK_EFORMAT;
        fk_dica_stats_close(&s->st);
        int rc = fk_dica_stats_init(&s->st, D, Dy, err);
        if (rc)
            return rc;
        s->st.n = sn->data[0];
        fk__dicaj_unpack_add(S->data, D, s->st.S);
        for (size_t i = 0; i < Nd; i++) {
            if (!is_count(ids->data[i], 0) || ids->data[i] > 2147483647.0)
                return fk_err_set(err, FK_EFORMAT, "dica: checkpoint domain id %zu is not an id", i);
            long k = fk_dica_stats_domain(&s->st, (long)ids->data[i], err);
            if (k < 0)
                return FK_ENOMEM;
            s->st.dom_n[k] += dn->data[i];
            fk_axpy(D, 1.0, ds->data + i * D, s->st.dom_sum + (size_t)k * D);
        }
        if (Dy) {
            const fk_tensor *a = want(in, "st_s_psi", Dy, err),
                            *c = a ? want(in, "st_Cc", D * Dy, err) : NULL;
            const fk_tensor *yy = c ? want(in, "st_Syyc", Dy * Dy, err) : NULL;
            if (!yy)
                return FK_EFORMAT;
            memcpy(s->st.s_psi, a->data, Dy * sizeof(double));
            memcpy(s->st.C, c->data, D * Dy * sizeof(double));
            memcpy(s->st.Syy, yy->data, Dy * Dy * sizeof(double));
        }
        if ((rc = solve(s, err)))
            return fk_err_prefix(err, rc, "checkpoint: re-solving from the stored sums: ");
        s->stage = ST_SOLVED;
    }
    if (stage >= ST_RIDGE) {
        size_t p = s->m + 1;
        const fk_tensor *A = want(in, "ridge_A", p * p, err);
        const fk_tensor *b = A ? want(in, "ridge_b", p * s->k, err) : NULL;
        if (!b)
            return FK_EFORMAT;
        free(s->A);
        free(s->b);
        free(s->Theta);
        s->A = malloc(p * p * sizeof *s->A);
        s->b = malloc(p * s->k * sizeof *s->b);
        s->Theta = malloc(p * s->k * sizeof *s->Theta);
        if (!s->A || !s->b || !s->Theta)
            return fk_err_set(err, FK_ENOMEM, "dica: out of memory");
        memcpy(s->A, A->data, p * p * sizeof *s->A);
        memcpy(s->b, b->data, p * s->k * sizeof *s->b);
        int rc = fk_dica_ridge_solve(s->m, s->k, s->A, s->b, s->c.alpha_rel, s->Theta, err);
        if (rc)
            return rc;
    }
    s->stage = stage;
    return FK_OK;
}
