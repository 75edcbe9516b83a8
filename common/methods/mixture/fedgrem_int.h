/* FedGrEM internals shared by the Gaussian-mixture tables (the server side in
 * fedgrem_server.c, the client state and GMM tables in fedgrem_client.c) and the
 * mixture-of-regressions tables (fedgrem_mor.c): configuration, message
 * validation, the whole server side (the server only sees R x p coefficient
 * matrices and weights, so it is the same for both models) and the client
 * state with its alignment, checkpoint and update pieces. */
#ifndef FK_FEDGREM_INT_H
#define FK_FEDGREM_INT_H

#include <stddef.h>
#include <stdint.h>

#include "common/methods/method.h"
#include "common/models/mixture/mor_local.h"

enum fk__fedgrem_variant { FK__FEDGREM_V_FEDGREM, FK__FEDGREM_V_FEDEM, FK__FEDGREM_V_LOCAL_EM, FK__FEDGREM_V_LOCAL_GREM, FK__FEDGREM_V_TGMM, FK__FEDGREM_V_POOLED_GREM };
/* Which mixture the clients fit: selects the RNG streams and the names in messages. */
enum fk__fedgrem_model { FK__FEDGREM_GMM = 0, FK__FEDGREM_MOR = 1 };

typedef struct fk__fedgrem_cfg {
    int R, B, restarts, passes, guard, uniform;
    int hc_init; /* local_init = hc: mclust's hierarchical start instead of k-means++ */
    double c_eta, kappa, C, lambda0, step, tgmm;
} fk__fedgrem_cfg;

FK_CHECKRETURN int fk__fedgrem_cfg_parse(fk__fedgrem_cfg *c, const fk_params *p, fk_err *err);

/* 1 when every value is finite and within +-FK_GMM_MAX_ABS. */
int fk__fedgrem_all_bounded(const double *a, size_t n);
/* A tensor from another party, before any use: present, exactly this shape, values bounded;
 * `nonneg` also refuses negative values. `who` names the sender in the message. */
FK_CHECKRETURN int fk__fedgrem_take(const fk_bundle *b, const char *name, int ndim,
                                    const uint64_t *shape, int nonneg, const char *who,
                                    const fk_tensor **out, fk_err *err);
/* A scalar from another party: one value, finite, in [lo, hi]. */
FK_CHECKRETURN int fk__fedgrem_take_scalar(const fk_bundle *b, const char *name, double lo,
                                           double hi, const char *who, double *v, fk_err *err);
/* A whole number in [lo, hi] from a checkpoint. */
FK_CHECKRETURN int fk__fedgrem_get_count(const fk_bundle *b, const char *name, double lo, double hi,
                                         int *v, fk_err *err);

/* --- server (all ops of the table) --- */
FK_CHECKRETURN int fk__fedgrem_srv_init(void **out, const fk_params *p, int n_clients,
                                        uint64_t seed, int variant, int model, fk_err *err);
void fk__fedgrem_srv_close(void *v);
FK_CHECKRETURN int fk__fedgrem_srv_plan(void *v, int round, fk_rng *rng, int *chosen, int *n_chosen,
                                        fk_err *err);
FK_CHECKRETURN int fk__fedgrem_srv_task(void *v, int round, int phase, int client, fk_bundle *out,
                                        fk_err *err);
FK_CHECKRETURN int fk__fedgrem_srv_aggregate(void *v, int round, int phase, const fk_update *ups,
                                             int n, int *round_done, fk_err *err);
FK_CHECKRETURN int fk__fedgrem_srv_model(void *v, fk_bundle *out, fk_err *err);
FK_CHECKRETURN int fk__fedgrem_srv_save(void *v, fk_bundle *out, fk_err *err);
FK_CHECKRETURN int fk__fedgrem_srv_load(void *v, const fk_bundle *in, fk_err *err);
/* Local-EM's fit is final after its first round; the other variants run all rounds. */
int fk__fedgrem_srv_finished(void *v);

/* What fedgrem_check.c needs of the server state (fedgrem_server.c keeps it private). */
typedef struct fk__fedgrem_shape {
    int variant, model, K, R, p, init_done;
} fk__fedgrem_shape;
void fk__fedgrem_srv_shape(const void *v, fk__fedgrem_shape *out);
/* The check_update op of every table below (fedgrem_check.c). */
FK_CHECKRETURN int fk__fedgrem_srv_check(void *v, int round, int phase, const fk_update *up,
                                         fk_err *err);

/* fedgmm-mor's server state as its check_update (fedgmm_mor_check.c) needs it. */
typedef struct fk__fedgmm_mor_shape_t {
    int K, R, R1, p, init_done;
} fk__fedgmm_mor_shape_t;
void fk__fedgmm_mor_shape(const void *v, fk__fedgmm_mor_shape_t *out);
FK_CHECKRETURN int fk__fedgmm_mor_check(void *v, int round, int phase, const fk_update *up,
                                        fk_err *err);

/* --- client --- */
typedef struct fk__fedgrem_cli {
    int variant, k, K, R, p, fitted, aligned, warned;
    fk__fedgrem_cfg c;
    uint64_t seed;
    const double *X;
    const fk_dataset *d;
    size_t n;
    double *xsq, *gamma, *W, *M, *S, *w, *eta, *nr, *sx, *theta;
    double *Xt; /* p x n transpose for the small-p E-step kernel (NULL: dgemm) */
    double *ref, *Xc, *thc; /* GMM: the data's mean, X - ref (c->X points here), theta - ref */
    uint64_t rho_warned; /* components whose relaxation C_eta w_r / w0_r > 2 was logged */
    const double *y; /* MoR: regression target (n), else NULL */
    fk_mor_ws mws;   /* MoR: E-step and least-squares work space */
} fk__fedgrem_cli;

/* One client's data for an R-component mixture: non-empty, >= R samples, dense, at most
 * FK_GMM_MAX_P features, finite; one clear error otherwise. */
FK_CHECKRETURN int fk__fedgrem_check_data(const fk_dataset *data, int client, int R, fk_err *err);
/* A mixture-of-regressions client's data: a finite regression target y_raw (not class labels)
 * and more samples than features; one clear error otherwise. */
FK_CHECKRETURN int fk__fedgrem_check_mor_data(const fk_dataset *data, int client, fk_err *err);
/* Checks the data (fk__fedgrem_check_data) and allocates the state. */
FK_CHECKRETURN int fk__fedgrem_cli_init(void **out, const fk_params *p, const fk_dataset *data,
                                        int client, int n_clients, uint64_t seed, int variant,
                                        fk_err *err);
void fk__fedgrem_cli_close(void *v);
/* A step task, checked: theta (R x p) into c->theta, the permutation applied when present;
 * w (pooled-grem) and src (tgmm) for those variants (the pointers may be NULL otherwise).
 * FK_ESTATE before the client's initialisation. */
FK_CHECKRETURN int fk__fedgrem_step_task(fk__fedgrem_cli *c, const fk_bundle *task,
                                         const fk_tensor **w, const fk_tensor **src, fk_err *err);
/* The initialisation update: the local fit M (R x p), W (R) and the sample count n. */
int fk__fedgrem_put_fit(fk__fedgrem_cli *c, fk_bundle *up);
/* The step update: theta (R x p) and w (R). */
int fk__fedgrem_put_common(fk__fedgrem_cli *c, fk_bundle *up);
/* This client's slice (R x p, R) of a K-task model, with its shape checked. */
FK_CHECKRETURN int fk__fedgrem_model_slice(const fk__fedgrem_cli *c, const fk_bundle *model,
                                           const double **theta, const double **w, fk_err *err);
FK_CHECKRETURN int fk__fedgrem_cli_save(void *v, fk_bundle *out, fk_err *err);
FK_CHECKRETURN int fk__fedgrem_cli_load(void *v, const fk_bundle *in, fk_err *err);

/* server_init / client_init of one variant, named srv_init_SUFFIX / cli_init_SUFFIX; CLI_INIT
 * has fk__fedgrem_cli_init's signature (the model's client init). */
#define FK__FEDGREM_INITS(SUFFIX, VARIANT, MODEL, CLI_INIT)                                      \
    static int srv_init_##SUFFIX(void **s, const fk_params *p, int n, uint64_t seed,            \
                                 fk_err *err)                                                   \
    {                                                                                           \
        return fk__fedgrem_srv_init(s, p, n, seed, VARIANT, MODEL, err);                         \
    }                                                                                           \
    static int cli_init_##SUFFIX(void **c, const fk_params *p, const fk_dataset *d, int k,      \
                                 int n, uint64_t seed, fk_err *err)                             \
    {                                                                                           \
        return CLI_INIT(c, p, d, k, n, seed, VARIANT, err);                                     \
    }

/* The operations table of one variant: fedgrem_server.c's server and fedgrem_client.c's
 * client state, the model's step and evaluation. */
/* Job keys (mixture_keys.c): every FK__FEDGREM_TABLE, the pooled tables (+ max_repeats),
 * fedgmm-mor (+ fedgmm_R1, fedgmm_cov). */
extern const fk_param_doc fk__fedgrem_keys[];
extern const fk_param_doc fk__pooled_keys[];
extern const fk_param_doc fk__fedgmm_mor_keys[];

/* The predict ops of the family (mixture_predict.c): Gaussian mixtures (labels = component,
 * "posterior", "clustering") and mixtures of regressions (labels = fitted value, "component",
 * "posterior", "regression"); the queries' "client" names whose mixture to use. */
FK_CHECKRETURN int fk__mixture_predict_gmm(const fk_bundle *model, const fk_bundle *queries,
                                           fk_bundle *out, fk_err *err);
FK_CHECKRETURN int fk__mixture_predict_mor(const fk_bundle *model, const fk_bundle *queries,
                                           fk_bundle *out, fk_err *err);

#define FK__FEDGREM_TABLE(NAME, SUMMARY, SUFFIX, STEP, EVALUATE, PREDICT)                          \
    {                                                                                            \
        .name = NAME, .summary = SUMMARY, .server_init = srv_init_##SUFFIX,                      \
        .server_close = fk__fedgrem_srv_close, .plan = fk__fedgrem_srv_plan,                       \
        .task = fk__fedgrem_srv_task, .aggregate = fk__fedgrem_srv_aggregate,                     \
        .model = fk__fedgrem_srv_model, .save = fk__fedgrem_srv_save, .load = fk__fedgrem_srv_load, \
        .finished = fk__fedgrem_srv_finished, .check_update = fk__fedgrem_srv_check,              \
        .client_init = cli_init_##SUFFIX, .client_close = fk__fedgrem_cli_close,                  \
        .local_step = STEP, .evaluate = EVALUATE, .client_save = fk__fedgrem_cli_save,            \
        .client_load = fk__fedgrem_cli_load, .keys = fk__fedgrem_keys, .predict = PREDICT,       \
        .select_by = "loss", .select_lag = 1, /* the likelihood of the round's start model */     \
    }

#endif
