/* DICA job types: configuration, message sizes, bundle helpers, built-in data, keys
 * and the two operations tables. */
#include "common/methods/dica/dica_int.h"
#include "common/methods/classes.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint64_t RFF_X_STREAM = 0x6469636178000000ULL; /* input frequencies */
static const uint64_t RFF_Y_STREAM = 0x6469636179000000ULL; /* output frequencies */
static const uint64_t SIM_STREAM = 0x6469636173000000ULL;   /* built-in data */

const fk_param_doc fk__dicaj_keys[] = {
    {"R N", "random frequencies; features D = 2R (default 500)"},
    {"m N", "components (default 0: C-1 for dica, 10 for udica)"},
    {"lambda X", "ridge of the constraint, > 0 (1.0)"},
    {"eps X", "output-kernel regulariser, > 0 (1e-3)"},
    {"q_weight X", "weight of the distributional variance; 1 = the paper (1.0)"},
    {"delta X", "G += delta tr(G)/D I (1e-8)"},
    {"sigma X", "input kernel width (of the standardised inputs unless standardize = none); 0 = "
                "mean-distance rule from the clients' sums (0)"},
    {"standardize pooled|none", "pooled: every input feature centred and scaled by its mean "
                                "and standard deviation over all training clients, from phase "
                                "0's sums (the default, spec §7.8); none: inputs as they are"},
    {"sigma_y X", "output kernel width (regression); 0 = mean training target (0)"},
    {"task classification|regression", "outputs: class labels or the target in y_raw"},
    {"classes LIST|C", "the classes by raw label value, e.g. 1,2,5 or 1..10 (a class is the same "
                        "output on every client; a label not listed is refused), at most 4096; "
                        "unset: the union of the raw labels the clients send; or a count C, "
                        "which needs every client to hold all C classes (unset)"},
    {"holdout LIST", "none, last or client indices (1,3): test-only clients, no upload (none)"},
    {"domains K", "domain ids must be in [0, K); 0 = any id >= 0 (0)"},
    {"min_domain_size N", "smallest domain a client may upload, >= 2 (30; privacy, §7.7)"},
    {"min_train_clients N", "training clients whose statistics must arrive (1); the job's "
                            "quorum (a fraction, read by the server) applies as for every job"},
    {"alpha_rel X", "ridge of the predictor relative to the mean feature energy (1e-3)"},
    {"center_test train|batch", "centre test features by phi_bar or the own batch (train)"},
    {"features iid|orthogonal", "how the random frequencies are drawn (iid)"},
    {"max_message BYTES",
     "optional cap on one client's upload, below the server's own limit (0 = none; the "
     "server passes its limit, the largest update it reassembles, to the job itself)"},
    {"sim_n N", "fedkern sim: samples per built-in client (150)"},
    {"sim_d N", "fedkern sim: input dimension of the built-in data (5)"},
    {NULL, NULL},
};

size_t fk_dica_upload_values(size_t R, size_t Nq, size_t Dy)
{
    size_t D = 2 * R;
    /* the cross moment travels twice: centred (for the solve) and uncentred (for the check) */
    return 1 + Nq * (D + 2) + D * (D + 1) / 2 + Dy + 2 * D * Dy + Dy * (Dy + 1) / 2;
}

size_t fk_dica_upload_bytes(size_t R, size_t Nq, size_t Dy)
{
    return 8 * fk_dica_upload_values(R, Nq, Dy) + FK_DICA_WIRE_OVERHEAD;
}

size_t fk_dica_download_values(size_t R, size_t m)
{
    return 2 * R * (m + 1) + m;
}

size_t fk_dica_max_R(size_t max_bytes, size_t Nq, size_t Dy)
{
    size_t lo = 0, hi = 1;
    while (hi < (1u << 20) && fk_dica_upload_bytes(hi, Nq, Dy) <= max_bytes)
        hi *= 2;
    while (lo + 1 < hi) { /* invariant: lo fits (or is 0), hi does not */
        size_t mid = lo + (hi - lo) / 2;
        if (fk_dica_upload_bytes(mid, Nq, Dy) <= max_bytes)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

FK_CHECKRETURN static int parse_holdout(const char *s, int n, unsigned char *flags, fk_err *err)
{
    if (!strcmp(s, "none") || !*s)
        return FK_OK;
    if (!strcmp(s, "last")) {
        flags[n - 1] = 1;
        return FK_OK;
    }
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= n)
            return fk_err_set(err, FK_EINVAL,
                              "holdout: '%s' must be none, last or client indices in [0, %d)", s,
                              n);
        flags[v] = 1;
        p = end;
        while (*p == ',' || *p == ' ')
            p++;
    }
    return FK_OK;
}

int fk__dicaj_client_roles(const fk_params *p, int n_clients, const char **roles, fk_err *err)
{
    unsigned char *flags = calloc(n_clients > 0 ? (size_t)n_clients : 1, 1);
    if (!flags)
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory for the client roles");
    int rc = parse_holdout(fk_params_str(p, "holdout", "none"), n_clients, flags, err);
    for (int k = 0; !rc && k < n_clients; k++)
        roles[k] = flags[k] ? "unseen" : NULL;
    free(flags);
    return rc;
}

int fk__dicaj_cfg_parse(const fk_params *p, fk_dica_variant v, int n_clients, fk__dicaj_cfg *c,
                        fk_err *err)
{
    *c = (fk__dicaj_cfg){.variant = v, .n_clients = n_clients};
    if (n_clients < 1)
        return fk_err_set(err, FK_EINVAL, "dica: a job needs at least one client");
    long mind = 30;
    /* The job's own optional cap, and the limit of the server running the job (the engine
     * sets FK_JOB_SERVER_MAX_UPDATE from its configuration; absent in `fedkern sim`). */
    double maxmsg = 0, srvmax = 0;
    int rc = fk_params_int(p, "R", 500, 0, 1 << 20, &c->R, err);
    if (!rc && c->R == 0)
        rc = fk_err_set(err, FK_EINVAL, "dica: R = 0 random frequencies; use R >= 1 (e.g. 500)");
    if (!rc)
        rc = fk_params_int(p, "m", 0, 0, 1 << 20, &c->m, err);
    if (!rc)
        rc = fk_params_double(p, "lambda", 1.0, 1e-300, 1e300, &c->lambda, err);
    if (!rc)
        rc = fk_params_double(p, "eps", 1e-3, 1e-300, 1e300, &c->eps, err);
    if (!rc)
        rc = fk_params_double(p, "q_weight", 1.0, 0, 1e12, &c->q_weight, err);
    if (!rc)
        rc = fk_params_double(p, "delta", 1e-8, 0, 1, &c->delta, err);
    if (!rc)
        rc = fk_params_double(p, "alpha_rel", 1e-3, 0, 1e6, &c->alpha_rel, err);
    if (!rc)
        rc = fk_params_double(p, "sigma", 0, 0, 1e300, &c->sigma, err);
    if (!rc)
        rc = fk_params_double(p, "sigma_y", 0, 0, 1e300, &c->sigma_y, err);
    if (!rc)
        rc = fk_params_int(p, "min_domain_size", 30, 2, 1L << 40, &mind, err);
    if (!rc)
        rc = fk_params_int(p, "min_train_clients", 1, 1, n_clients, &c->quorum, err);
    if (!rc)
        rc = fk_params_int(p, "domains", 0, 0, 1L << 31, &c->domains, err);
    if (!rc)
        rc = fk_classes_count_of(p, 0, FK_DICA_MAX_CLASSES, FK_CLASSES_COUNT_OWN, &c->classes,
                                 err);
    if (!rc)
        rc = fk_params_double(p, "max_message", 0, 0, 1e18, &maxmsg, err);
    if (!rc && maxmsg > 0 && maxmsg < 1024)
        rc = fk_err_set(err, FK_EINVAL, "dica: max_message = %g bytes is below 1024; use 0 for "
                        "no cap of the job's own", maxmsg);
    if (!rc)
        rc = fk_params_double(p, FK_JOB_SERVER_MAX_UPDATE, 0, 0, 1e18, &srvmax, err);
    const char *task = fk_params_str(p, "task", "classification");
    const char *ct = fk_params_str(p, "center_test", "train");
    const char *feat = fk_params_str(p, "features", "iid");
    const char *ho = fk_params_str(p, "holdout", "none");
    const char *sd = fk_params_str(p, "standardize", "pooled");
    if (!rc && strcmp(task, "classification") && strcmp(task, "regression"))
        rc = fk_err_set(err, FK_EINVAL,
                        "dica: task must be classification or regression (got '%s')", task);
    if (!rc && strcmp(ct, "train") && strcmp(ct, "batch"))
        rc = fk_err_set(err, FK_EINVAL, "dica: center_test must be train or batch (got '%s')", ct);
    if (!rc && strcmp(sd, "pooled") && strcmp(sd, "none"))
        rc = fk_err_set(err, FK_EINVAL, "dica: standardize must be pooled or none (got '%s')", sd);
    if (!rc)
        rc = fk_rff_kind_parse(feat, &c->features, err);
    if (rc)
        return rc;
    c->standardize = !strcmp(sd, "pooled");
    c->min_domain = (double)mind;
    c->max_message = (uint64_t)maxmsg;
    c->server_max = (uint64_t)srvmax;
    c->regression = !strcmp(task, "regression");
    c->batch_center = !strcmp(ct, "batch");
    c->holdout = calloc((size_t)n_clients, 1);
    if (!c->holdout)
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    rc = parse_holdout(ho, n_clients, c->holdout, err);
    int train = 0;
    for (int i = 0; i < n_clients; i++)
        train += !c->holdout[i];
    if (!rc && train == 0)
        rc = fk_err_set(err, FK_EINVAL, "dica: holdout '%s' leaves no training client", ho);
    if (!rc && c->quorum > train)
        rc = fk_err_set(err, FK_EINVAL, "dica: min_train_clients %ld exceeds the %d training clients",
                        c->quorum, train);
    if (!rc && c->regression && c->classes)
        rc = fk_err_set(err, FK_EINVAL, "dica: classes is for task = classification");
    if (rc)
        fk__dicaj_cfg_close(c);
    return rc;
}

void fk__dicaj_cfg_close(fk__dicaj_cfg *c)
{
    free(c->holdout);
    c->holdout = NULL;
}

size_t fk__dicaj_dy(const fk__dicaj_cfg *c, long C)
{
    if (!fk_dica_supervised(c->variant))
        return 0;
    return c->regression ? 2 * FK_DICA_RY : (size_t)C;
}

size_t fk__dicaj_m(const fk__dicaj_cfg *c, long C)
{
    if (c->m > 0)
        return (size_t)c->m;
    if (fk_dica_supervised(c->variant))
        return c->regression ? 20 : (size_t)(C > 1 ? C - 1 : 1);
    return 10;
}

uint64_t fk__dicaj_limit(const fk__dicaj_cfg *c, uint64_t task_limit)
{
    uint64_t lim = 0;
    const uint64_t l[3] = {c->max_message, c->server_max, task_limit};
    for (int i = 0; i < 3; i++)
        if (l[i] && (!lim || l[i] < lim))
            lim = l[i];
    return lim;
}

int fk__dicaj_check_size(const fk__dicaj_cfg *c, size_t Nq, long C, uint64_t task_limit,
                         fk_err *err)
{
    size_t Dy = fk__dicaj_dy(c, C);
    size_t bytes = fk_dica_upload_bytes((size_t)c->R, Nq, Dy);
    uint64_t lim = fk__dicaj_limit(c, task_limit);
    if (!lim || bytes <= lim)
        return FK_OK;
    size_t best = fk_dica_max_R(lim, Nq, Dy);
    int own = c->max_message && lim == c->max_message;
    return fk_err_set(err, FK_ELIMIT,
                      "dica: R = %ld gives a %.1f MB upload per client (%zu domain(s), D = %ld, "
                      "Dy = %zu), above %s = %llu bytes; the largest R that fits is %zu%s",
                      c->R, 1e-6 * (double)bytes, Nq, 2 * c->R, Dy,
                      own ? "the job's max_message" : "the server's limit for one update", 
                      (unsigned long long)lim, best,
                      own ? " (or raise the job's max_message)" : "");
}

int fk__dicaj_rff(const fk__dicaj_cfg *c, uint64_t seed, size_t d, double sigma, fk_rff *rf,
                  fk_err *err)
{
    /* The frequencies of unit width, then scaled by 1/sigma: the draws depend on the seed
     * and the shape only. Drawing at sigma itself would seed the stream with sigma's bits,
     * so a sigma from the clients' sums, which moves in its last bits with the order of
     * the additions (4 clients or 1 holding the same rows), would draw other frequencies. */
    if (!(sigma > 0) || !isfinite(sigma))
        return fk_err_set(err, FK_EINVAL, "dica: kernel width sigma must be > 0 (got %g)", sigma);
    int rc = fk_rff_init_kind(rf, seed ^ RFF_X_STREAM, d, (size_t)c->R, 1.0, c->features, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < rf->omega.rows; i++)
        fk_scal(rf->omega.cols, 1.0 / sigma, fk_mat_row(&rf->omega, i));
    rf->sigma = sigma;
    return FK_OK;
}

int fk__dicaj_standardize(const fk_bundle *b, int required, const fk_mat *X, fk_mat *Xs,
                          fk_err *err)
{
    *Xs = (fk_mat){0};
    size_t d = X->cols;
    const fk_tensor *mu = fk_bundle_get(b, "x_mean"), *sd = fk_bundle_get(b, "x_scale");
    if (!mu && !sd && !required)
        return fk_mat_copy(Xs, X) ? fk_err_set(err, FK_ENOMEM, "dica: out of memory") : FK_OK;
    if (!(mu = fk__dicaj_take(b, "x_mean", d, err)) || !(sd = fk__dicaj_take(b, "x_scale", d, err)))
        return FK_EINVAL;
    for (size_t j = 0; j < d; j++)
        if (!(sd->data[j] > 0))
            return fk_err_set(err, FK_EINVAL,
                              "dica: task tensor 'x_scale' entry %zu is not a positive scale", j);
    if (fk_mat_init(Xs, X->rows, d))
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory for %zu standardised rows", X->rows);
    for (size_t i = 0; i < X->rows; i++) {
        const double *x = fk_mat_row(X, i);
        double *o = fk_mat_row(Xs, i);
        for (size_t j = 0; j < d; j++)
            o[j] = (x[j] - mu->data[j]) / sd->data[j];
    }
    return FK_OK;
}

int fk__dicaj_rff_y(uint64_t seed, double sigma_y, fk_rff *rf, fk_err *err)
{
    return fk_rff_init(rf, seed ^ RFF_Y_STREAM, 1, FK_DICA_RY, sigma_y, err);
}

int fk__dicaj_put(fk_bundle *b, const char *name, size_t r, size_t c, const double *src,
                  fk_err *err)
{
    uint64_t shape[2] = {r, c};
    int rc = c == 0 ? fk_bundle_put(b, name, 1, shape, src) : fk_bundle_put(b, name, 2, shape, src);
    if (rc)
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory adding '%s'", name);
    return FK_OK;
}

const fk_tensor *fk__dicaj_take(const fk_bundle *b, const char *name, size_t len, fk_err *err)
{
    const fk_tensor *t = fk_bundle_get(b, name);
    if (!t || t->len != len) {
        fk_err_set(err, FK_EINVAL, "dica: tensor '%s' %s (want %zu values, got %zu)", name,
                   t ? "has the wrong size" : "is missing", len, t ? t->len : (size_t)0);
        return NULL;
    }
    for (size_t i = 0; i < len; i++)
        if (!isfinite(t->data[i])) {
            fk_err_set(err, FK_EINVAL, "dica: tensor '%s' holds a NaN or Inf at %zu", name, i);
            return NULL;
        }
    return t;
}

void fk__dicaj_pack(const double *S, size_t D, double *out)
{
    size_t k = 0;
    for (size_t j = 0; j < D; j++)
        for (size_t i = 0; i <= j; i++)
            out[k++] = S[i * D + j];
}

void fk__dicaj_unpack_add(const double *pk, size_t D, double *S)
{
    size_t k = 0;
    for (size_t j = 0; j < D; j++)
        for (size_t i = 0; i <= j; i++, k++) {
            S[i * D + j] += pk[k];
            if (i != j)
                S[j * D + i] += pk[k];
        }
}

/* Built-in data: one domain per client. Three classes with shared class means; each
 * domain shifts and scales the inputs (the domain shift DICA should be invariant to). */
int fk__dicaj_sim_data(const fk_params *p, int n_clients, uint64_t seed, fk_dataset *clients,
                       const unsigned char *want, fk_err *err)
{
    long n, d;
    int rc = fk_params_int(p, "sim_n", 150, 2, 1000000, &n, err);
    if (!rc)
        rc = fk_params_int(p, "sim_d", 5, 3, 10000, &d, err);
    const char *task = fk_params_str(p, "task", "classification");
    if (rc)
        return rc;
    int reg = !strcmp(task, "regression");
    fk_rng g;
    double *raw = malloc((size_t)n * sizeof *raw);
    if (!raw)
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    for (int c = 0; c < n_clients && rc == FK_OK; c++) {
        char name[32];
        snprintf(name, sizeof name, "domain-%d", c);
        if (want && !want[c]) { /* its own stream: the others' draws do not depend on it */
            fk_dataset_set_name(&clients[c], name);
            continue;
        }
        fk_rng_init(&g, seed, SIM_STREAM + (uint64_t)c);
        if (fk_dataset_init(&clients[c], (size_t)n, (size_t)d, 0)) {
            rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory for client %d", c);
            break;
        }
        double scale = 0.7 + 0.6 * fk_rng_uniform(&g);
        double shift[3] = {0.7 * fk_rng_normal(&g), 0.7 * fk_rng_normal(&g),
                           0.7 * fk_rng_normal(&g)};
        for (long i = 0; i < n; i++) {
            int y = (int)fk_rng_below(&g, 3);
            double *x = fk_mat_row(&clients[c].X, (size_t)i);
            for (long j = 0; j < d; j++)
                x[j] = (j == y ? 2.0 : 0.0) + (j < 3 ? shift[j] : 0.0) + scale * fk_rng_normal(&g);
            raw[i] = reg ? sin(x[0]) + x[1] - 0.5 * x[2] : (double)y;
        }
        rc = reg ? fk_dataset_set_target(&clients[c], raw, err)
                 : fk_dataset_set_labels(&clients[c], raw, err);
        if (!rc && !reg) {
            static const double cls[3] = {0, 1, 2};
            rc = fk_dataset_use_classes(&clients[c], cls, 3, err);
        }
        fk_dataset_set_name(&clients[c], name);
    }
    free(raw);
    return rc;
}

FK_CHECKRETURN int fk_dica_job_project(const fk_bundle *model, uint64_t seed, const char *features,
                        const fk_mat *X, fk_mat *Z, fk_err *err)
{
    *Z = (fk_mat){0};
    const fk_tensor *R = fk__dicaj_take(model, "R", 1, err),
                    *sg = fk__dicaj_take(model, "sigma", 1, err);
    const fk_tensor *W = fk_bundle_get(model, "W");
    if (!R || !sg || !W || W->ndim != 2 || !(R->data[0] >= 1 && R->data[0] <= (1 << 20)) ||
        W->shape[0] != 2 * (uint64_t)R->data[0])
        return fk_err_set(err, FK_EINVAL, "dica: not a solved dica model bundle");
    size_t D = (size_t)W->shape[0], m = (size_t)W->shape[1];
    const fk_tensor *pb = fk__dicaj_take(model, "phi_bar", D, err);
    if (!pb)
        return FK_EINVAL;
    fk__dicaj_cfg c = {.R = (long)R->data[0]};
    int rc = fk_rff_kind_parse(features, &c.features, err);
    fk_rff rf = {0};
    fk_mat Phi = {0}, Xs = {0};
    if (!rc)
        rc = fk__dicaj_rff(&c, seed, X->cols, sg->data[0], &rf, err);
    if (!rc) /* the model's standardisation, when it has one */
        rc = fk__dicaj_standardize(model, 0, X, &Xs, err);
    if (!rc)
        rc = fk_rff_map(&rf, &Xs, &Phi, err);
    fk_mat_close(&Xs);
    fk_dica_fit f = {.D = D, .m = m, .W = fk_mat_view(W->data, D, m, m), .phi_bar = pb->data};
    if (!rc)
        rc = fk_dica_project(&f, &Phi, NULL, Z, err);
    fk_mat_close(&Phi);
    fk_rff_close(&rf);
    return rc;
}

/* The variant is fixed by the table; thin wrappers pass it on. */
FK_CHECKRETURN static int srv_init_dica(void **s, const fk_params *p, int n, uint64_t seed, fk_err *err)
{
    return fk__dicaj_server_init(s, p, n, seed, FK_DICA_DICA, err);
}

FK_CHECKRETURN static int srv_init_udica(void **s, const fk_params *p, int n, uint64_t seed, fk_err *err)
{
    return fk__dicaj_server_init(s, p, n, seed, FK_DICA_UDICA, err);
}

FK_CHECKRETURN static int cli_init_dica(void **c, const fk_params *p, const fk_dataset *d, int i, int n,
                         uint64_t seed, fk_err *err)
{
    return fk__dicaj_client_init(c, p, d, i, n, seed, FK_DICA_DICA, err);
}

FK_CHECKRETURN static int cli_init_udica(void **c, const fk_params *p, const fk_dataset *d, int i, int n,
                          uint64_t seed, fk_err *err)
{
    return fk__dicaj_client_init(c, p, d, i, n, seed, FK_DICA_UDICA, err);
}

static int one_round(const fk_params *p)
{
    (void)p;
    return 1;
}

#define FK_DICA_TABLE(NAME, SUMMARY, SINIT, CINIT)                                                 \
    {                                                                                              \
        .name = NAME, .summary = SUMMARY, .server_init = SINIT,                                    \
        .server_close = fk__dicaj_server_close, .plan = fk__dicaj_server_plan,                     \
        .task = fk__dicaj_server_task, .aggregate = fk__dicaj_server_aggregate,                    \
        .model = fk__dicaj_server_model, .save = fk__dicaj_server_save,                            \
        .load = fk__dicaj_server_load, .finished = fk__dicaj_server_finished,                      \
        .max_rounds = one_round, .check_update = fk__dicaj_server_check, .client_init = CINIT,     \
        .predict = fk__dicaj_predict, .export_arrays = fk__dicaj_export,                           \
        .client_close = fk__dicaj_client_close, .local_step = fk__dicaj_client_step,               \
        .evaluate = fk__dicaj_client_evaluate, .client_save = fk__dicaj_client_save,               \
        .client_load = fk__dicaj_client_load, .sim_data = fk__dicaj_sim_data,                      \
        .keys = fk__dicaj_keys, .client_roles = fk__dicaj_client_roles,                            \
    }

const fk_method fk_method_dica = FK_DICA_TABLE(
    "dica", "one-shot federated DICA (supervised domain-invariant components, random features)",
    srv_init_dica, cli_init_dica);
const fk_method fk_method_udica = FK_DICA_TABLE(
    "udica", "one-shot federated UDICA (unsupervised domain-invariant components, random features)",
    srv_init_udica, cli_init_udica);
