#include "tests/support_fedmean.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/methods/aggregate.h"

enum { DIM = FK_TEST_DIM };

/* ----------------------------------------------- method 1: federated mean */

typedef struct mean_srv {
    int n;
    double mu[DIM];
    double sampling;
    fk_aggregator agg;
    /* two-phase method only */
    double m[DIM];
    double var;
    long pad; /* extra checkpoint values, to make checkpoints need new pages */
    /* fedvar-fold: the phase's sums while it folds (not checkpointed) */
    double fsum[DIM], fss, fw;
    int fn, flast;
    long task_pad;
} mean_srv;

typedef struct mean_cli {
    const fk_dataset *data;
    long update_pad;
} mean_cli;

static int mean_server_init(void **srv, const fk_params *p, int n, uint64_t seed, fk_err *err)
{
    (void)seed;
    mean_srv *s = calloc(1, sizeof *s);
    if (!s)
        return fk_err_set(err, FK_ENOMEM, "oom");
    s->n = n;
    double trim;
    int rc = fk_params_double(p, "sampling", 1.0, 1e-9, 1.0, &s->sampling, err);
    if (!rc)
        rc = fk_params_double(p, "trim", 0.1, 0.0, 0.49, &trim, err);
    if (!rc)
        rc = fk_aggregator_parse(&s->agg, fk_params_str(p, "aggregator", "fedavg"), trim, err);
    if (!rc)
        rc = fk_params_int(p, "ckpt_pad", 0, 0, 1 << 20, &s->pad, err);
    if (!rc)
        rc = fk_params_int(p, "task_pad", 0, 0, 1 << 24, &s->task_pad, err);
    if (!rc && fk_params_get(p, "fail_init"))
        rc = fk_err_set(err, FK_EINVAL, "parameter 'fail_init' rejected");
    if (rc) {
        free(s);
        return rc;
    }
    *srv = s;
    return FK_OK;
}

static void mean_server_close(void *srv)
{
    free(srv);
}

static int mean_plan(void *srv, int round, fk_rng *rng, int *chosen, int *n_chosen, fk_err *err)
{
    (void)round;
    (void)err;
    mean_srv *s = srv;
    int k = (int)ceil(s->sampling * s->n - 1e-9);
    int idx[64];
    for (int i = 0; i < s->n; i++)
        idx[i] = i;
    if (k < s->n)
        fk_rng_shuffle(rng, idx, (size_t)s->n);
    memcpy(chosen, idx, (size_t)k * sizeof *chosen);
    *n_chosen = k;
    return FK_OK;
}

static int mean_task(void *srv, int round, int phase, int client, fk_bundle *out, fk_err *err)
{
    (void)round;
    (void)client;
    (void)err;
    mean_srv *s = srv;
    if (s->task_pad && !fk_bundle_add(out, "pad", 1, (uint64_t[]){(uint64_t)s->task_pad}))
        return FK_ENOMEM;
    return fk_bundle_put_vec(out, phase == 0 ? "mu" : "m", DIM, phase == 0 ? s->mu : s->m);
}

static int mean_aggregate(void *srv, int round, int phase, const fk_update *ups, int n,
                          int *done, fk_err *err)
{
    (void)round;
    (void)phase;
    mean_srv *s = srv;
    double delta[DIM];
    int rc = fk_aggregate_tensor(&s->agg, ups, n, "delta", delta, DIM, err);
    if (rc)
        return rc;
    for (int j = 0; j < DIM; j++)
        s->mu[j] += 0.5 * delta[j];
    *done = 1;
    return FK_OK;
}

static int mean_model(void *srv, fk_bundle *out, fk_err *err)
{
    (void)err;
    mean_srv *s = srv;
    return fk_bundle_put_vec(out, "mu", DIM, s->mu);
}

static int mean_save(void *srv, fk_bundle *out, fk_err *err)
{
    (void)err;
    mean_srv *s = srv;
    uint64_t shape[1] = {DIM};
    int rc = fk_bundle_put(out, "mu", 1, shape, s->mu);
    if (!rc)
        rc = fk_bundle_put(out, "m", 1, shape, s->m);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "var", s->var);
    if (!rc && s->pad && !fk_bundle_add(out, "pad", 1, (uint64_t[]){(uint64_t)s->pad}))
        rc = FK_ENOMEM;
    return rc;
}

static int mean_load(void *srv, const fk_bundle *in, fk_err *err)
{
    mean_srv *s = srv;
    uint64_t shape[1] = {DIM};
    const fk_tensor *mu = fk_bundle_expect(in, "mu", 1, shape, err);
    const fk_tensor *m = fk_bundle_expect(in, "m", 1, shape, err);
    const fk_tensor *var = fk_bundle_expect(in, "var", 0, NULL, err);
    if (!mu || !m || !var)
        return FK_EFORMAT;
    memcpy(s->mu, mu->data, sizeof s->mu);
    memcpy(s->m, m->data, sizeof s->m);
    s->var = var->data[0];
    return FK_OK;
}

static int mean_client_init(void **cli, const fk_params *p, const fk_dataset *data, int client,
                            int n, uint64_t seed, fk_err *err)
{
    (void)client;
    (void)n;
    (void)seed;
    mean_cli *c = calloc(1, sizeof *c);
    if (!c)
        return fk_err_set(err, FK_ENOMEM, "oom");
    if (fk_params_int(p, "update_pad", 0, 0, 1 << 24, &c->update_pad, err)) {
        free(c);
        return FK_EINVAL;
    }
    c->data = data;
    *cli = c;
    return FK_OK;
}

static void mean_client_close(void *cli)
{
    free(cli);
}

static void column_sums(const fk_dataset *ds, const double *center, double *sum, double *ss)
{
    memset(sum, 0, DIM * sizeof *sum);
    *ss = 0.0;
    for (size_t i = 0; i < ds->X.rows; i++)
        for (int j = 0; j < DIM; j++) {
            double v = ds->X.data[i * ds->X.cols + (size_t)j];
            sum[j] += v;
            *ss += (v - center[j]) * (v - center[j]);
        }
}

static int mean_local_step(void *cli, const fk_bundle *task, fk_bundle *update, fk_report *rep,
                           fk_err *err)
{
    mean_cli *c = cli;
    uint64_t shape[1] = {DIM};
    const fk_tensor *mu = fk_bundle_expect(task, "mu", 1, shape, err);
    if (!mu)
        return FK_EFORMAT;
    double sum[DIM], ss, delta[DIM];
    column_sums(c->data, mu->data, sum, &ss);
    double n = (double)c->data->X.rows;
    for (int j = 0; j < DIM; j++)
        delta[j] = sum[j] / n - mu->data[j];
    rep->n_samples = n;
    rep->loss = ss / n;
    if (c->update_pad && !fk_bundle_add(update, "pad", 1, (uint64_t[]){(uint64_t)c->update_pad}))
        return FK_ENOMEM;
    return fk_bundle_put_vec(update, "delta", DIM, delta);
}

static int no_evaluate(void *cli, const fk_bundle *model, fk_report *rep, fk_err *err)
{
    (void)cli;
    (void)model;
    (void)rep;
    (void)err;
    return FK_OK;
}

static int no_client_save(void *cli, fk_bundle *out, fk_err *err)
{
    (void)cli;
    (void)out;
    (void)err;
    return FK_OK;
}

static int no_client_load(void *cli, const fk_bundle *in, fk_err *err)
{
    (void)cli;
    (void)in;
    (void)err;
    return FK_OK;
}

/* Both test methods read these (job submit refuses any other key). */
static const fk_param_doc keys[] = {
    {"sampling F", "fraction of the clients planned per round (1)"},
    {"aggregator NAME", "fedavg, mean, median or trimmed-mean (fedavg)"},
    {"trim F", "trimmed-mean fraction (0.1)"},
    {"ckpt_pad N", "extra checkpoint values"},
    {"task_pad N", "extra task values"},
    {"update_pad N", "extra update values"},
    {"fail_init X", "server_init refuses the job"},
    {NULL, NULL},
};

const fk_method fk_test_fedmean = {
    .name = "fedmean", .summary = "test: federated mean, one phase",
    .server_init = mean_server_init, .server_close = mean_server_close, .plan = mean_plan,
    .task = mean_task, .aggregate = mean_aggregate, .model = mean_model, .save = mean_save,
    .load = mean_load, .client_init = mean_client_init, .client_close = mean_client_close,
    .local_step = mean_local_step, .evaluate = no_evaluate, .client_save = no_client_save,
    .client_load = no_client_load, .keys = keys,
};

/* ------------------------------------- method 2: mean, then variance (two phases) */

static int var_aggregate(void *srv, int round, int phase, const fk_update *ups, int n, int *done,
                         fk_err *err)
{
    (void)round;
    mean_srv *s = srv;
    if (n == 0)
        return fk_err_set(err, FK_EINVAL, "no updates");
    double w = 0.0;
    if (phase == 0) {
        double sum[DIM] = {0};
        for (int i = 0; i < n; i++) {
            const fk_tensor *t = fk_bundle_get(&ups[i].msg, "sum");
            if (!t || t->len != DIM)
                return fk_err_set(err, FK_EFORMAT, "client %d: no sum", ups[i].client);
            for (int j = 0; j < DIM; j++)
                sum[j] += t->data[j];
            w += ups[i].report.n_samples;
        }
        for (int j = 0; j < DIM; j++)
            s->m[j] = sum[j] / w;
        *done = 0;
        return FK_OK;
    }
    double ss = 0.0;
    for (int i = 0; i < n; i++) {
        const fk_tensor *t = fk_bundle_get(&ups[i].msg, "ss");
        if (!t || t->len != 1)
            return fk_err_set(err, FK_EFORMAT, "client %d: no ss", ups[i].client);
        ss += t->data[0];
        w += ups[i].report.n_samples;
    }
    s->var = ss / w;
    memcpy(s->mu, s->m, sizeof s->mu);
    *done = 1;
    return FK_OK;
}

static int var_model(void *srv, fk_bundle *out, fk_err *err)
{
    (void)err;
    mean_srv *s = srv;
    int rc = fk_bundle_put_vec(out, "mean", DIM, s->mu);
    return rc ? rc : fk_bundle_put_scalar(out, "var", s->var);
}

static int var_local_step(void *cli, const fk_bundle *task, fk_bundle *update, fk_report *rep,
                          fk_err *err)
{
    mean_cli *c = cli;
    const fk_tensor *mu = fk_bundle_get(task, "mu");
    const fk_tensor *m = fk_bundle_get(task, "m");
    const fk_tensor *center = mu ? mu : m;
    if (!center || center->len != DIM)
        return fk_err_set(err, FK_EFORMAT, "task lacks mu / m");
    double sum[DIM], ss;
    column_sums(c->data, center->data, sum, &ss);
    rep->n_samples = (double)c->data->X.rows;
    return mu ? fk_bundle_put_vec(update, "sum", DIM, sum) : fk_bundle_put_scalar(update, "ss", ss);
}

const fk_method fk_test_fedvar = {
    .name = "fedvar", .summary = "test: mean then variance, two phases",
    .server_init = mean_server_init, .server_close = mean_server_close, .plan = mean_plan,
    .task = mean_task, .aggregate = var_aggregate, .model = var_model, .save = mean_save,
    .load = mean_load, .client_init = mean_client_init, .client_close = mean_client_close,
    .local_step = var_local_step, .evaluate = no_evaluate, .client_save = no_client_save,
    .client_load = no_client_load, .keys = keys,
};

/* ------------------------- method 3: fedvar folding its updates one at a time (issue 35) */

static int fold_begin(void *srv, int round, int phase, fk_err *err)
{
    (void)round;
    (void)phase;
    (void)err;
    mean_srv *s = srv;
    memset(s->fsum, 0, sizeof s->fsum);
    s->fss = s->fw = 0.0;
    s->fn = 0;
    s->flast = -1;
    return FK_OK;
}

/* The same sums as var_aggregate, in the same order: the same bits. */
static int fold_one(void *srv, int round, int phase, const fk_update *up, fk_err *err)
{
    (void)round;
    mean_srv *s = srv;
    if (up->client <= s->flast) /* the contract: ascending client order */
        return fk_err_set(err, FK_ESTATE, "fedvar-fold: client %d folded after client %d",
                          up->client, s->flast);
    s->flast = up->client;
    const fk_tensor *t = fk_bundle_get(&up->msg, phase == 0 ? "sum" : "ss");
    if (!t || t->len != (phase == 0 ? DIM : 1u))
        return fk_err_set(err, FK_EFORMAT, "client %d: no %s", up->client,
                          phase == 0 ? "sum" : "ss");
    if (phase == 0)
        for (int j = 0; j < DIM; j++)
            s->fsum[j] += t->data[j];
    else
        s->fss += t->data[0];
    s->fw += up->report.n_samples;
    s->fn++;
    return FK_OK;
}

static int fold_end(void *srv, int round, int phase, int *done, fk_err *err)
{
    (void)round;
    mean_srv *s = srv;
    if (s->fn == 0)
        return fk_err_set(err, FK_EINVAL, "no updates");
    if (phase == 0) {
        for (int j = 0; j < DIM; j++)
            s->m[j] = s->fsum[j] / s->fw;
        *done = 0;
        return FK_OK;
    }
    s->var = s->fss / s->fw;
    memcpy(s->mu, s->m, sizeof s->mu);
    *done = 1;
    return FK_OK;
}

const fk_method fk_test_fedvar_fold = {
    .name = "fedvar-fold", .summary = "test: fedvar, aggregated by folding",
    .server_init = mean_server_init, .server_close = mean_server_close, .plan = mean_plan,
    .task = mean_task, .aggregate = var_aggregate, .fold_begin = fold_begin, .fold = fold_one,
    .fold_end = fold_end, .model = var_model, .save = mean_save, .load = mean_load,
    .client_init = mean_client_init, .client_close = mean_client_close,
    .local_step = var_local_step, .evaluate = no_evaluate, .client_save = no_client_save,
    .client_load = no_client_load, .keys = keys,
};

const fk_method *fk_test_find_method(const char *name, fk_err *err)
{
    if (!strcmp(name, "fedvar-fold"))
        return &fk_test_fedvar_fold;
    if (!strcmp(name, "fedmean"))
        return &fk_test_fedmean;
    if (!strcmp(name, "fedvar"))
        return &fk_test_fedvar;
    fk_err_set(err, FK_ENOTFOUND, "unknown method '%s' (known: fedmean, fedvar, fedvar-fold)", name);
    return NULL;
}

