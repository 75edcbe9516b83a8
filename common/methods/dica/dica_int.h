/* DICA job internals shared by the files of common/methods/dica/ (not a public API). */
#ifndef FK_METHODS_DICA_INT_H
#define FK_METHODS_DICA_INT_H

#include <stdint.h>

#include "common/la/blas.h"
#include "common/la/rff.h"
#include "common/methods/dica/dica_job.h"
#include "common/models/dica/dica.h"

enum { FK_DICA_RY = 50 }; /* output frequencies for regression targets (§7.2 [choice]) */
/* Most classes a job may have: the class outputs' second moment is Dy x Dy per client
 * (4096 classes: 134 MB of statistics, a 67 MB upload), so more cannot travel anyway. */
enum { FK_DICA_MAX_CLASSES = 4096 };

typedef struct fk__dicaj_cfg {
    fk_dica_variant variant;
    long R, m; /* m = 0: C-1 (DICA) or 10 (UDICA) */
    double lambda, eps, q_weight, delta, alpha_rel;
    double sigma, sigma_y; /* 0: from phase 0 */
    double min_domain;
    long quorum;  /* training clients whose statistics must arrive */
    long domains; /* 0: any id >= 0; else ids in [0, domains) */
    long classes; /* 0: from the clients */
    uint64_t max_message; /* the job's own cap on one upload (0 = none) */
    uint64_t server_max;  /* the server's limit for one update (0 = none known) */
    int regression, batch_center;
    int standardize; /* pooled per-feature standardisation of the inputs (§7.8) */
    fk_rff_kind features;
    unsigned char *holdout; /* n_clients flags: test-only clients */
    int n_clients;
} fk__dicaj_cfg;

/* The client_roles op: the holdout clients are "unseen" (test-only domains). */
FK_CHECKRETURN int fk__dicaj_client_roles(const fk_params *p, int n_clients, const char **roles,
                                          fk_err *err);
FK_CHECKRETURN int fk__dicaj_cfg_parse(const fk_params *p, fk_dica_variant v, int n_clients,
                                       fk__dicaj_cfg *c, fk_err *err);
void fk__dicaj_cfg_close(fk__dicaj_cfg *c);
/* Dy of the phase-1 upload: C (one-hot), 2*FK_DICA_RY (regression) or 0 (UDICA). */
size_t fk__dicaj_dy(const fk__dicaj_cfg *c, long C);
/* m actually solved for. */
size_t fk__dicaj_m(const fk__dicaj_cfg *c, long C);
/* The smallest of the job's max_message, the server's limit and task_limit (a limit a task
 * carried to a client), ignoring zeros; 0 = no limit. */
uint64_t fk__dicaj_limit(const fk__dicaj_cfg *c, uint64_t task_limit);
/* FK_ELIMIT with the size, the limit and the largest R that fits when an upload of Nq
 * domains would exceed fk__dicaj_limit(c, task_limit). */
FK_CHECKRETURN int fk__dicaj_check_size(const fk__dicaj_cfg *c, size_t Nq, long C,
                                        uint64_t task_limit, fk_err *err);
/* Input and output feature maps from (seed, d, R, sigma) and (seed, 1, RY, sigma_y). */
FK_CHECKRETURN int fk__dicaj_rff(const fk__dicaj_cfg *c, uint64_t seed, size_t d, double sigma,
                                 fk_rff *rf, fk_err *err);
/* Xs (initialised here) = the rows of X standardised by the tensors x_mean and x_scale (d
 * each) of b; a copy of X when b has neither and !required. */
FK_CHECKRETURN int fk__dicaj_standardize(const fk_bundle *b, int required, const fk_mat *X,
                                         fk_mat *Xs, fk_err *err);
FK_CHECKRETURN int fk__dicaj_rff_y(uint64_t seed, double sigma_y, fk_rff *rf, fk_err *err);

/* Helpers on bundles: put or FK_ENOMEM naming the tensor; take a tensor of exactly len
 * finite values or FK_EINVAL naming it. */
FK_CHECKRETURN int fk__dicaj_put(fk_bundle *b, const char *name, size_t r, size_t c,
                                 const double *src, fk_err *err);
const fk_tensor *fk__dicaj_take(const fk_bundle *b, const char *name, size_t len, fk_err *err);
/* Packed upper triangle (column by column, LAPACK 'U') of symmetric D x D row-major S. */
void fk__dicaj_pack(const double *S, size_t D, double *out);
void fk__dicaj_unpack_add(const double *pk, size_t D, double *S);

typedef enum { ST_NEW = 0, ST_SIGMA, ST_SOLVED, ST_RIDGE, ST_DONE } fk__dicaj_stage;

typedef struct fk__dicaj_server {
    fk__dicaj_cfg c;
    uint64_t seed;
    int n;
    int stage;
    long d, C;
    double sigma, sigma_y;
    double *x_mean, *x_scale; /* d each: the pooled standardisation (standardize = pooled) */
    fk_dica_stats st;      /* phase-1 sums */
    fk_dica_fit fit;       /* the solve */
    size_t m, k;           /* components, ridge targets */
    double *A, *b, *Theta; /* ridge sums and solution */
    unsigned char *got;    /* training client delivered phase-1 statistics */
    double *vals;          /* the job's classes by raw value, ascending (C of them): its list,
                            * or (a job listing none) the union of the raw labels the clients
                            * sent in phase 0; else NULL */
} fk__dicaj_server;

typedef struct fk__dicaj_client {
    fk__dicaj_cfg c;
    uint64_t seed;
    int idx, holdout;
    fk_mat X;
    int *y;    /* NULL when unlabelled */
    double *t; /* regression targets or NULL */
    long *dom;
    size_t n_dom; /* distinct domains */
    int labelled; /* y (classification) or t (regression) present */
    int own_classes; /* job without a class list: the classes of the client's own list (its
                      * indices hold only when that is every class of the job); 0 otherwise */
    double *own_vals; /* those classes' raw labels (sent in phase 0) and each row's raw label, */
    double *raw;      /* re-indexed by the union the server sends back ("class_values") */
    fk_mat Phi;   /* random features of X for phi_sigma and phi_std (a cache, not state) */
    double phi_sigma;
    double *phi_std; /* 2d: the x_mean and x_scale Phi was computed with (standardize) */
} fk__dicaj_client;

FK_CHECKRETURN int fk__dicaj_server_init(void **out, const fk_params *p, int n_clients,
                                         uint64_t seed, fk_dica_variant v, fk_err *err);
void fk__dicaj_server_close(void *s);
FK_CHECKRETURN int fk__dicaj_server_plan(void *s, int round, fk_rng *rng, int *chosen,
                                         int *n_chosen, fk_err *err);
FK_CHECKRETURN int fk__dicaj_server_task(void *s, int round, int phase, int client, fk_bundle *out,
                                         fk_err *err);
FK_CHECKRETURN int fk__dicaj_server_check(void *s, int round, int phase, const fk_update *up,
                                          fk_err *err);
FK_CHECKRETURN int fk__dicaj_server_aggregate(void *s, int round, int phase, const fk_update *ups,
                                              int n, int *done, fk_err *err);
FK_CHECKRETURN int fk__dicaj_server_model(void *s, fk_bundle *out, fk_err *err);
FK_CHECKRETURN int fk__dicaj_server_save(void *s, fk_bundle *out, fk_err *err);
FK_CHECKRETURN int fk__dicaj_server_load(void *s, const fk_bundle *in, fk_err *err);
int fk__dicaj_server_finished(void *s);
/* predict op (dica_predict.c): ridge on the learned features, from the model alone */
FK_CHECKRETURN int fk__dicaj_predict(const fk_bundle *model, const fk_bundle *queries,
                                     fk_bundle *out, fk_err *err);
/* export_arrays op: the input frequencies "omega" (R x d) the model names by seed */
FK_CHECKRETURN int fk__dicaj_export(const fk_bundle *model, fk_bundle *out, fk_err *err);

FK_CHECKRETURN int fk__dicaj_client_init(void **out, const fk_params *p, const fk_dataset *data, int idx,
                          int n_clients, uint64_t seed, fk_dica_variant v, fk_err *err);
void fk__dicaj_client_close(void *c);
FK_CHECKRETURN int fk__dicaj_client_step(void *c, const fk_bundle *task, fk_bundle *up,
                                         fk_report *rep, fk_err *err);
FK_CHECKRETURN int fk__dicaj_client_evaluate(void *c, const fk_bundle *model, fk_report *rep,
                                             fk_err *err);
FK_CHECKRETURN int fk__dicaj_client_save(void *c, fk_bundle *out, fk_err *err);
FK_CHECKRETURN int fk__dicaj_client_load(void *c, const fk_bundle *in, fk_err *err);

FK_CHECKRETURN int fk__dicaj_sim_data(const fk_params *p, int n_clients, uint64_t seed,
                                      fk_dataset *clients, const unsigned char *want, fk_err *err);
extern const fk_param_doc fk__dicaj_keys[];

#endif
