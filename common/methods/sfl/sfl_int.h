/* Internals shared by the files of the sfl job type (common/methods/sfl/). */
#ifndef FK_SFL_INT_H
#define FK_SFL_INT_H

#include <stddef.h>

#include "common/base/params.h"
#include "common/data/dataset.h"
#include "common/methods/method.h"
#include "common/models/sfl/sfl.h"

enum { FK__SFL_INIT_CONCAT = 0, FK__SFL_INIT_RESCALED = 1, FK__SFL_INIT_ZERO = 2 };
enum { FK__SFL_OP_COUNT = 1, FK__SFL_OP_UPLOAD = 2, FK__SFL_OP_CENTRES = 3 };
/* atom set kinds (key 'atoms'); AUTO resolves after phase 0: grid for p <= 3, else cand */
enum { FK__SFL_AT_SAMPLES = 0, FK__SFL_AT_GRID = 1, FK__SFL_AT_AUTO = 2, FK__SFL_AT_CAND = 3 };

/* Largest |value| of an uploaded feature (after the job's preprocessing), label or dual the
 * server accepts (docs/sfl.md, "Checks"); the client refuses its own rows beyond it before
 * anything is sent, naming row and column, never the value. */
#define FK__SFL_MAX_ABS 1e12

/* The job configuration (spec §6.2), identical for every party. */
typedef struct fk__sfl_cfg {
    int mode;                       /* FK_SFL_CLASSIFY / FK_SFL_REGRESS */
    double eps;
    double gamma_client, gamma_server, grel_client, grel_server;
    int res;                        /* FK_SFL_HARD / QUAD / HUBER / LINEAR */
    double c;                       /* quadratic c, Huber delta or linear C */
    long T_client, T_server;
    int grid;                       /* atoms = grid (else samples: candidates at the rows) */
    int atoms;                      /* FK__SFL_AT_*: as set; AUTO until resolved */
    int w_auto, box_auto, h_auto, pre_auto; /* keys absent: from the federated statistics */
    long cpc;                       /* candidates_per_class (k-means centres per class) */
    double *cand, *cand_cls;        /* the job's candidate centres (M x p) and their groups */
    size_t M;
    double cand_mass;               /* rows each candidate stands for: n_ref / M (weight factor) */
    double wmin, wmax, h;
    int Q;
    double *box_lo, *box_hi;        /* grid box, p values each (NULL unless grid) */
    int box_p;
    double *shift, *scale;          /* preprocessing x <- (x - shift) / scale, n_pre values */
    int n_pre;                      /* 0: none; 1: one value for every feature; else p */
    double pos_label, neg_label;
    int neg_rest;                   /* neg_label = rest: every other label is -1 */
    double max_frac;                /* job cap on the uploaded fraction of a client's rows */
    int server_init;
    int peaks;                      /* model_form = peaks (one refit kernel per bump) */
    int strict;                     /* crit_rule = strict: lambda > 0 */
    int ovo;                        /* multiclass = ovo (spec A14): one problem per class pair */
    int n_cls;                      /* ovo: number of classes */
    double *cls;                    /* ovo: the raw labels, ascending; class id = index */
    int solver;                     /* regress: FK_SFL_SOLVER_REDUCED (default) or _VA */
    int mc_resample;                /* regress, variant_a, grid: the literal Alg. 1 */
    long mc_batch;                  /* its B fresh atoms per iteration */
} fk__sfl_cfg;

/* ovo upload: per-problem diagnostics (spec §6.4), tensor "pd" of P x FK__SFL_PD values in
 * this order; a problem the client skipped (no rows of the pair) has status -1, the rest 0. */
enum {
    FK__SFL_PD_STATUS = 0, /* FK_SFL_CONVERGED / INFEASIBLE / MAXITER, or -1: skipped */
    FK__SFL_PD_ITERS,      /* solver iterations, both phases */
    FK__SFL_PD_VIOL,       /* max constraint violation, >= 0 */
    FK__SFL_PD_DUAL,       /* dual value */
    FK__SFL_PD_PRIMAL,     /* primal value */
    FK__SFL_PD_CRIT,       /* |C|: critical rows before the upload cap */
    FK__SFL_PD_NC,         /* large dual, constraint not active: not converged */
    FK__SFL_PD
};

/* binary upload: the solver's diagnostics (spec §6.4), tensor "diag" of FK__SFL_DG values in
 * this order; present when the client has rows of the task (n > 0), absent otherwise. */
enum {
    FK__SFL_DG_STATUS = 0, /* FK_SFL_CONVERGED / INFEASIBLE / MAXITER */
    FK__SFL_DG_ITERS,      /* solver iterations, both phases */
    FK__SFL_DG_VIOL,       /* max constraint violation, >= 0 */
    FK__SFL_DG_DUAL,       /* dual value */
    FK__SFL_DG_PRIMAL,     /* primal value */
    FK__SFL_DG_SUPPORT,    /* atoms with alpha != 0 */
    FK__SFL_DG
};

/* One-vs-one (sfl_ovo.c): problems q = 0..n_cls(n_cls-1)/2-1 enumerate the pairs (a, b),
 * a < b, in lexicographic order; rows of class a are +1, of class b -1. */
int fk__sfl_ovo_pairs(int n_cls);
void fk__sfl_ovo_pair(int n_cls, int q, int *a, int *b);
/* Majority vote of the pairwise classifiers (spec §6.6): m holds the problems' kernels one
 * after the other (mK[q] of them for problem q); pred[i] = the class id with the most votes,
 * ties to the larger sum of |f_q(x)| over the won problems, then to the smaller id. Scratch:
 * f (n), votes and margin (n x n_cls). */
void fk__sfl_ovo_vote(const fk_sfl_model *m, const double *mK, int n_cls, const double *X,
                      size_t n, double *f, int *votes, double *margin, int *pred);

/* Parse and check the job keys; refuses a job without raw_sample_upload = acknowledged. */
FK_CHECKRETURN int fk__sfl_cfg_parse(fk__sfl_cfg *c, const fk_params *p, fk_err *err);
void fk__sfl_cfg_close(fk__sfl_cfg *c);
/* Resolve the data-dependent defaults from the federated statistics of phase 0 (n_ref rows,
 * per-feature mean and variance of the rows after the job's explicit preprocessing, p values
 * each): the standardising map (x_shift/x_scale unset), the width grid (width_min/max unset),
 * the atom kind (atoms = auto), the grid box and spacing. Refuses (FK_EINVAL, with the numbers
 * and the key to set) a spread too small to standardise, data of zero spread, and widths far
 * from the data's scale: before any row leaves a client. */
FK_CHECKRETURN int fk__sfl_resolve(fk__sfl_cfg *c, int p, double n_ref, const double *mean,
                                   const double *var, fk_err *err);
/* Atoms of ovo pair problem q (classes a < b: the candidates of those two groups) or, q < 0,
 * of the binary / regression problem: as fk__sfl_atoms. */
FK_CHECKRETURN int fk__sfl_atoms_q(const fk__sfl_cfg *c, const double *X, size_t n, int p, int q,
                    fk_sfl_atoms *a, fk_err *err);
/* Solver options for a client (server = 0) or the server (server = 1) problem. */
void fk__sfl_opts(const fk__sfl_cfg *c, int server, double n_ref, uint64_t seed, fk_sfl_opts *o);
/* The task's rows of a data set, preprocessed (X: n x p) with targets (+-1 or values);
 * rows of other classes are left out. Caller frees *X and *y. */
/* (ovo: y holds the class id 0..n_cls-1 of each row; rows of other labels are left out.) */
FK_CHECKRETURN int fk__sfl_task_rows(const fk__sfl_cfg *c, const fk_dataset *ds, double **X,
                                     double **y, size_t *n, fk_err *err);
/* The atom set of a problem on rows X (n x p): the grid of the configuration, or the rows
 * themselves as candidate centres times the width grid. */
FK_CHECKRETURN int fk__sfl_atoms(const fk__sfl_cfg *c, const double *X, size_t n, int p,
                                 fk_sfl_atoms *a, fk_err *err);
/* Solve with the spec's continuation (gamma = 0 pass warm-started from lam0 when given,
 * then the problem's gamma from its lambda). */
FK_CHECKRETURN int fk__sfl_solve(const double *X, const double *y, size_t n, int p,
                                 const fk_sfl_atoms *a, const fk_sfl_opts *o, const double *lam0,
                                 fk_sfl_fit *fit, fk_err *err);

extern const fk_param_doc fk__sfl_keys[];

/* server ops (sfl_server.c) */
FK_CHECKRETURN int fk__sfl_srv_init(void **out, const fk_params *p, int n_clients, uint64_t seed,
                                    fk_err *err);
void fk__sfl_srv_close(void *v);
FK_CHECKRETURN int fk__sfl_srv_plan(void *v, int round, fk_rng *rng, int *chosen, int *n_chosen,
                                    fk_err *err);
FK_CHECKRETURN int fk__sfl_srv_task(void *v, int round, int phase, int client, fk_bundle *out,
                                    fk_err *err);
FK_CHECKRETURN int fk__sfl_srv_aggregate(void *v, int round, int phase, const fk_update *ups, int n,
                          int *round_done, fk_err *err);
FK_CHECKRETURN int fk__sfl_srv_model(void *v, fk_bundle *out, fk_err *err);
FK_CHECKRETURN int fk__sfl_srv_save(void *v, fk_bundle *out, fk_err *err);
FK_CHECKRETURN int fk__sfl_srv_load(void *v, const fk_bundle *in, fk_err *err);
int fk__sfl_srv_finished(void *v);
int fk__sfl_srv_max_rounds(const fk_params *p);
FK_CHECKRETURN int fk__sfl_check_update(void *v, int round, int phase, const fk_update *u,
                                        fk_err *err);
/* predict op (sfl_predict.c): labels (raw; binary 'rest': NaN with "rest_of") or values */
FK_CHECKRETURN int fk__sfl_predict(const fk_bundle *model, const fk_bundle *queries,
                                   fk_bundle *out, fk_err *err);

/* client ops (sfl_client.c) */
FK_CHECKRETURN int fk__sfl_cli_init(void **cli, const fk_params *p, const fk_dataset *data,
                                    int client, int n_clients, uint64_t seed, fk_err *err);
void fk__sfl_cli_close(void *cli);
FK_CHECKRETURN int fk__sfl_cli_step(void *cli, const fk_bundle *task, fk_bundle *update,
                                    fk_report *rep, fk_err *err);
FK_CHECKRETURN int fk__sfl_cli_evaluate(void *cli, const fk_bundle *model, fk_report *rep,
                                        fk_err *err);
FK_CHECKRETURN int fk__sfl_cli_save(void *cli, fk_bundle *out, fk_err *err);
FK_CHECKRETURN int fk__sfl_cli_load(void *cli, const fk_bundle *in, fk_err *err);
/* Read a model bundle (K, p, s, w, c) into m, checking shapes and finiteness. */
FK_CHECKRETURN int fk__sfl_model_read(const fk_bundle *b, int p, fk_sfl_model *m, fk_err *err);

/* built-in synthetic clients (sfl_sim.c) */
FK_CHECKRETURN int fk__sfl_sim_data(const fk_params *p, int n_clients, uint64_t seed,
                                    fk_dataset *clients, const unsigned char *want, fk_err *err);

#endif
