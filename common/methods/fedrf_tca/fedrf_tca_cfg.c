/* FedRF-TCA job configuration and the Table II message sizes. */
#include <stdlib.h>
#include <string.h>

#include "common/methods/classes.h"
#include "common/methods/fedrf_tca/fedrf_tca_int.h"

FK_CHECKRETURN static int parse_hidden(const char *s, fk__fedrf_cfg *c, fk_err *err)
{
    c->n_hidden = 0;
    if (!*s || !strcmp(s, "none"))
        return FK_OK;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 100000 || c->n_hidden == FK_MLP_MAX_HIDDEN)
            return fk_err_set(err, FK_EINVAL,
                              "hidden: want up to %d comma-separated layer sizes like 100,100 "
                              "(or none)", FK_MLP_MAX_HIDDEN);
        c->hidden[c->n_hidden++] = (size_t)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return fk_err_set(err, FK_EINVAL, "hidden: unexpected '%c' in layer list", *end);
    }
    return FK_OK;
}

int fk__fedrf_parse_cfg(const fk_params *p, int n_clients, fk__fedrf_cfg *c, fk_err *err)
{
    memset(c, 0, sizeof *c);
    int rc;
    if ((rc = fk_params_int(p, "N", 1000, 0, 1000000, &c->N, err)) ||
        (rc = fk_params_int(p, "m", 100, 0, 1000000, &c->m, err)) ||
        (rc = fk_params_double(p, "sigma", 1.0, -1e300, 1e300, &c->sigma, err)) ||
        (rc = fk_params_double(p, "lambda", 1.0, 0.0, 1e12, &c->lambda, err)) ||
        (rc = fk_params_double(p, "lr", 1e-3, 1e-12, 1e3, &c->lr, err)) ||
        (rc = fk_params_double(p, "eps", 1e-5, 0.0, 1.0, &c->eps, err)) ||
        (rc = fk_params_int(p, "batch", 128, 1, 100000000, &c->batch, err)) ||
        (rc = fk_params_int(p, "tc", 50, 1, 1000000000, &c->tc, err)) ||
        (rc = fk_params_int(p, "rounds", 0, 0, 1000000000, &c->rounds, err)) ||
        (rc = fk_classes_count_of(p, 0, 100000, FK_CLASSES_COUNT_OWN, &c->classes, err)) ||
        (rc = fk_params_int(p, "target", n_clients - 1, 0, n_clients - 1, &c->target, err)) ||
        (rc = fk_params_int(p, "eval_every", 1, 1, 1000000000, &c->eval_every, err)) ||
        (rc = fk_params_bool(p, "voting", 0, &c->voting, err)))
        return rc;
    if (c->N == 0)
        return fk_err_set(err, FK_EINVAL, "N (number of random frequencies) must be >= 1");
    if (!(c->sigma > 0))
        return fk_err_set(err, FK_EINVAL, "sigma (kernel width) must be > 0 (got %g)", c->sigma);
    if (c->m < 1 || c->m > 2 * c->N)
        return fk_err_set(err, FK_EINVAL, "m=%ld must be in 1..2N=%ld (the random-feature dimension)",
                          c->m, 2 * c->N);
    if (n_clients < 2)
        return fk_err_set(err, FK_EINVAL, "fedrf-tca needs at least one source and one target client");
    if ((rc = parse_hidden(fk_params_str(p, "hidden", "100,100"), c, err)) ||
        (rc = fk_opt_parse(fk_params_str(p, "optimizer", "adam"), &c->opt, err)) ||
        (rc = fk_rff_kind_parse(fk_params_str(p, "features", "iid"), &c->features, err)))
        return rc;
    /* The target's loss is the MMD alone, 1e-4 of the classification loss on SURF: Adam's
     * per-coordinate normalisation turns its noisy gradient into full-size steps (see
     * docs/fedrf-tca.md, "Why lambda = 1 hurt"), SGD keeps it at its own scale. At the full
     * protocol Adam on the target cost 4 points on SURF and 14 on the single-source pairs, so
     * SGD is the default whatever the sources' optimizer. */
    const char *to = fk_params_str(p, "target_opt", "sgd");
    if ((rc = fk_opt_parse(to, &c->target_opt, err)))
        return fk_err_set(err, FK_EINVAL, "target_opt must be adam or sgd (got '%s')", to);
    if ((rc = fk_params_int(p, "avg_last", 0, 0, 1000000000, &c->avg_last, err)) ||
        (rc = fk_params_int(p, "ext_dim", 256, 1, 100000, &c->ext_dim, err)))
        return rc;
    if ((rc = fk_params_bool(p, "warm_start", 0, &c->warm_start, err)) ||
        (rc = fk_params_double(p, "gamma", 0.0, 0.0, 1e12, &c->gamma, err)))
        return rc;
    if ((rc = fk_params_bool(p, "source_only", 0, &c->source_only, err)))
        return rc;
    /* the warm start pools the target's moments: not a source-only model */
    if (c->source_only && c->warm_start)
        return fk_err_set(err, FK_EINVAL, "source_only and warm_start exclude each other (the "
                          "warm start uses the target's moments); drop one");
    if ((rc = fk_params_double(p, "select_holdout", 0.0, 0.0, 0.9, &c->select_holdout, err)))
        return rc;
    const char *ex = fk_params_str(p, "extractor", "identity");
    if (strcmp(ex, "identity") && strcmp(ex, "dense"))
        return fk_err_set(err, FK_EINVAL, "extractor must be identity or dense (got '%s')", ex);
    c->dense = !strcmp(ex, "dense");
    const char *part = fk_params_str(p, "participation", "random");
    if (strcmp(part, "random") && strcmp(part, "all"))
        return fk_err_set(err, FK_EINVAL, "participation must be random or all (got '%s')", part);
    c->all = !strcmp(part, "all");
    const char *ds = fk_params_str(p, "drop_setting", "I");
    c->drop_setting = !strcmp(ds, "I") ? 1 : !strcmp(ds, "II") ? 2 : !strcmp(ds, "III") ? 3 : 0;
    if (!c->drop_setting)
        return fk_err_set(err, FK_EINVAL, "drop_setting must be I, II or III (Table III; got '%s')",
                          ds);
    static const char *const orders[] = {"subset", "all", "ordered", "ordered-random", "random",
                                         "random-random"};
    const char *ord = fk_params_str(p, "order", "subset");
    c->order = -1;
    for (int i = 0; i < (int)(sizeof orders / sizeof *orders); i++)
        if (!strcmp(ord, orders[i]))
            c->order = i;
    if (c->order < 0)
        return fk_err_set(err, FK_EINVAL,
                          "order must be subset, all, ordered, ordered-random, random or "
                          "random-random (Table XVIII; got '%s')", ord);
    if (c->order != FK__FEDRF_ORDER_SUBSET && (c->all || c->drop_setting != 1))
        return fk_err_set(err, FK_EINVAL,
                          "order=%s picks the senders itself; leave participation (random) and "
                          "drop_setting (I) at their defaults", ord);
    return fk_params_bool(p, "common_init", 0, &c->common_init, err);
}

size_t fk__fedrf_classifier_params(const fk__fedrf_cfg *c, size_t classes)
{
    fk_mlp net;
    fk_err e = {0};
    if (fk_mlp_layout(&net, (size_t)c->m, c->hidden, c->n_hidden, classes, &e))
        return 0;
    return net.n_params;
}

void fk_fedrf_message_params(size_t N, size_t m, const size_t *hidden, int n_hidden, size_t classes,
                             fk_fedrf_counts *out)
{
    fk_mlp net;
    fk_err e = {0};
    memset(out, 0, sizeof *out);
    out->w_rf = 2 * N * m;
    if (fk_mlp_layout(&net, m, hidden, n_hidden, classes, &e) == FK_OK)
        out->classifier = net.n_params;
    out->model = out->w_rf + out->classifier;
    out->sigma_paper = N;
    out->sigma_sent = 2 * N;
    out->total_paper = out->model + N;
    out->total_sent = out->model + 2 * N;
    out->select_down = out->model;
    out->select_up = 2;
}

size_t fk_fedrf_select_values(size_t N, size_t m, size_t p_c, size_t voters, int sources, int cand)
{
    if (sources <= 0 || cand <= 0)
        return 0;
    size_t k = (size_t)cand, cls = voters ? voters * p_c : k * p_c;
    return (size_t)sources * (k * 2 * N * m + cls + 1 + k);
}

void fk_fedrf_round_count(size_t N, size_t m, size_t p_c, int s, int w, int c,
                          fk_fedrf_round_values *out)
{
    size_t S = s > 0 ? (size_t)s : 0, Wn = w > 0 ? (size_t)w : 0, Cn = c > 0 ? (size_t)c : 0;
    size_t stats = 4 * S * N;
    size_t wrf = Wn ? 2 * (Wn + 1) * 2 * N * m : 0;
    size_t cls = Cn ? (2 * Cn + 1) * p_c : 0;
    out->direct = stats + wrf + cls;
    out->relayed = out->direct + (S ? (S + 1) * 2 * N : 0);
}
