/* The method operations table: how a federated job type plugs into fedkern.
 *
 * A job runs in rounds. At the start of a round the server-side `plan` op
 * picks the clients to contact. A round has one or more phases; in each phase
 * the server builds one task per contacted client (`task`), each client runs
 * `local_step` on its own data and answers with an update, and the server
 * folds the updates that arrived in time into its state (`aggregate`), which
 * also says whether the round needs another phase. Updates may be missing
 * (dropouts): `aggregate` gets only those that arrived.
 *
 * The in-process simulator (sim.h) and the daemons call exactly these ops,
 * so a simulation and a networked run of the same job and seed agree. */
#ifndef FK_METHOD_H
#define FK_METHOD_H

#include <stdint.h>

#include "common/base/err.h"
#include "common/base/params.h"
#include "common/data/dataset.h"
#include "common/la/rng.h"
#include "common/base/bundle.h"

/* What a client reports next to its update; NaN = not measured. */
typedef struct fk_report {
    double n_samples; /* FedAvg weight */
    double loss;      /* local objective after the step */
    double accuracy;  /* accuracy in [0,1] on data the client may score (e.g. target labels) */
    double error;     /* estimation / clustering error where the method defines one */
    /* The quality metrics users read per round (docs/operations.md "Quality per round"),
     * measured where the client holds labels or targets: */
    double misclust;  /* mixtures: mis-clustering rate after the best label alignment, [0,1] */
    double ari;       /* mixtures: adjusted Rand index against the true classes, [-1,1] */
    double rmse;      /* regression: root mean squared error of the predictions */
    double model_error; /* kahm: the largest modelling error of the client's class models (a
                         * fit residual, not 1 - accuracy; reported as `error` before 0.5) */
} fk_report;

void fk_report_init(fk_report *r); /* all NaN, n_samples = 0 */

/* The measured fields of fk_report by name, in one table: the wire, `job status`, the server
 * log and metrics and the CLI's --json all list the quality numbers from here. */
typedef struct fk_report_field {
    const char *name; /* "loss", "accuracy", "error", "misclust", "ari", "rmse", "model_error" */
    size_t offset;    /* offsetof(fk_report, ...) */
    const char *help; /* one line for docs and metric help */
} fk_report_field;
extern const fk_report_field fk_report_fields[];
enum { FK_REPORT_N_FIELDS = 7 };
/* The field's value in r, or NaN for an unknown name (fk_report_set: ignored). */
double fk_report_get(const fk_report *r, const char *name);
void fk_report_set(fk_report *r, const char *name, double v);

/* Score a clustering of the client's rows against its classes (y in [0, n_classes), pred in
 * [0, n_clusters)): fills r->misclust, r->ari, r->error (= misclust) and r->accuracy
 * (= 1 - misclust). The one path every mixture method takes for its per-round metric. */
FK_CHECKRETURN int fk_report_score_clusters(fk_report *r, const int *y, const int *pred, size_t n,
                                            int n_classes, int n_clusters, fk_err *err);
/* Cluster of each row from responsibilities (any positive multiple of them): the argmax over
 * components; gamma is n x R row-major, or R x n when component_major (fk_gmm_estep_stats's
 * work). */
void fk_report_argmax(const double *gamma, size_t n, int R, int component_major, int *pred);

/* One client's answer to one task. */
typedef struct fk_update {
    int client;      /* client index in [0, n_clients) */
    fk_bundle msg;
    fk_report report;
} fk_update;

/* Sample-weighted mean (weight n_samples, or 1 when not positive) of one report
 * field, given as offsetof(fk_report, loss) etc., over the updates where it is not
 * NaN; NaN when none is. NaN here only ever means "not measured" (e.g. FedRF-TCA's
 * sources have no accuracy): a report with an infinite field or a bad n_samples
 * (fk_update_check_report), or NaN where the method always measures the field (its
 * check_update), was refused before it was stored, like a bad update. */
double fk_report_mean(const fk_update *ups, int n, size_t field);

/* The plan of methods without client sampling: every one of the K clients, every round. */
void fk_plan_every_client(int K, int *chosen, int *n_chosen);

typedef struct fk_method {
    const char *name;    /* job type as written in job configs: "fedrf-tca", "fedgrem", ... */
    const char *summary; /* one line for --help */

    /* --- server side --- */
    FK_CHECKRETURN int (*server_init)(void **srv, const fk_params *p, int n_clients, uint64_t seed,
                                      fk_err *err);
    void (*server_close)(void *srv);
    /* Choose the clients to contact in `round` (1-based). chosen has room for n_clients. */
    FK_CHECKRETURN int (*plan)(void *srv, int round, fk_rng *rng, int *chosen, int *n_chosen,
                               fk_err *err);
    /* Task for one client in (round, phase). */
    FK_CHECKRETURN int (*task)(void *srv, int round, int phase, int client, fk_bundle *out,
                               fk_err *err);
    /* Fold the phase's updates (sorted by client index) into the server state;
     * *round_done = 1 when the round is complete, 0 when another phase follows. */
    FK_CHECKRETURN int (*aggregate)(void *srv, int round, int phase, const fk_update *ups, int n,
                                    int *round_done, fk_err *err);
    /* Optional streaming aggregation (all three or none). fold_begin opens the phase's
     * aggregate; fold takes one update, in ascending client order (the order aggregate gets
     * them), and keeps nothing of its message past the call that the state does not keep
     * anyway; fold_end completes the phase. fold_begin, fold(ups[0]) ... fold(ups[n-1]),
     * fold_end must leave the state bit for bit as aggregate(ups, n) does (test methods_fold).
     * With them the server decodes one update at a time from the store and its memory for a
     * phase is the state's, O(model); without them (the method needs every update at once)
     * the server holds the phase's updates and a job must fit its --aggregate_memory budget.
     * A failed fold or fold_end leaves the phase to be aggregated again from fold_begin. */
    FK_CHECKRETURN int (*fold_begin)(void *srv, int round, int phase, fk_err *err);
    FK_CHECKRETURN int (*fold)(void *srv, int round, int phase, const fk_update *up,
                               fk_err *err);
    FK_CHECKRETURN int (*fold_end)(void *srv, int round, int phase, int *round_done,
                                   fk_err *err);
    /* Current global model (what `job result` returns). */
    FK_CHECKRETURN int (*model)(void *srv, fk_bundle *out, fk_err *err);
    /* Checkpoint: the whole server state as a bundle, and back. */
    FK_CHECKRETURN int (*save)(void *srv, fk_bundle *out, fk_err *err);
    FK_CHECKRETURN int (*load)(void *srv, const fk_bundle *in, fk_err *err);
    /* Optional (NULL: the job runs all its rounds): 1 when the method has converged and
     * further rounds would change nothing, so the job ends after this round. */
    int (*finished)(void *srv);
    /* Optional (NULL: FK_DEFAULT_ROUNDS): the rounds a job with these parameters needs at
     * most when no round is repeated; the job's budget when its config sets no `rounds`. */
    int (*max_rounds)(const fk_params *p);
    /* Optional (NULL: none): the report field that selects the model to keep next to the
     * last one (`job result --selected`), a criterion the clients measure without the labels
     * of the training task or on held-out rows (the mixtures' loss: mean negative
     * log-likelihood). select_max: larger is better. select_lag: the field reported in round t
     * scores the model of round t - select_lag (1: the clients score the model the round
     * started from). The server keeps every round's model; the selected one is the earliest
     * best. */
    const char *select_by;
    int select_max, select_lag;
    /* Optional (NULL: every client is a training client): roles[k] = NULL for a training
     * client, or a static name for one whose quality is reported apart from the training
     * clients' (`job status`, `--json`): "unseen" (a test-only domain: dica's holdout),
     * "target" (fedrf-tca's unlabelled site). From the job's parameters alone. */
    FK_CHECKRETURN int (*client_roles)(const fk_params *p, int n_clients, const char **roles,
                                       fk_err *err);
    /* Optional (NULL: every update is taken as sent). Checks one client's update for
     * (round, phase) before it is committed: tensor names, shapes, finiteness and the bounds
     * the method knows. FK_OK, or FK_EINVAL with a message naming the tensor and the reason.
     * A refused update is never stored and never reaches aggregate; its client counts as a
     * dropout for the phase. Reads the server state, never changes it. */
    FK_CHECKRETURN int (*check_update)(void *srv, int round, int phase, const fk_update *up,
                                       fk_err *err);
    /* Optional (NULL: the job type serves no predictions). Predictions for the queries
     * (tensor "X", n x p) from a job's model as `model` returned it: fills out with
     * "labels" (n) and "distances" (n) and what the method adds; FK_EINVAL with the
     * reason when the model cannot serve them; FK_ESTATE when the models stay on the
     * clients (then the server asks them: client_predict, check_answer, combine_answers). */
    FK_CHECKRETURN int (*predict)(const fk_bundle *model, const fk_bundle *queries,
                                  fk_bundle *out, fk_err *err);
    /* Optional (NULL: the model's tensors are all a predictor needs). Arrays a predictor
     * outside fedkern needs besides the model's tensors, e.g. the random frequencies the model
     * names only by seed and which fedkern's own generator draws (`fedkern model export`). */
    FK_CHECKRETURN int (*export_arrays)(const fk_bundle *model, fk_bundle *out, fk_err *err);
    /* Optional (NULL: predict serves from the model alone). Predictions served by the clients,
     * whose models never left them (kahm mode B): each client that holds models answers a query
     * batch with client_predict; check_answer checks one answer ("D" shapes, finiteness, the
     * client's classes as its committed update declared them) before it is taken, reading only
     * the model and the queries; combine_answers folds the checked answers of distinct clients
     * (any subset: a silent client contributes nothing) into "labels" and "distances" and what
     * the method adds (kahm: "scored_classes", "unscored_classes", "missing_clients"); with no
     * answers it checks the queries against the model (the server does so before asking). */
    /* Optional with the two below (NULL: ask every client): 1 if client holds models. */
    int (*holds_models)(const fk_bundle *model, int client);
    FK_CHECKRETURN int (*check_answer)(const fk_bundle *model, const fk_bundle *queries,
                                       const fk_update *ans, fk_err *err);
    FK_CHECKRETURN int (*combine_answers)(const fk_bundle *model, const fk_bundle *queries,
                                          const fk_update *ans, int n, fk_bundle *out,
                                          fk_err *err);

    /* --- client side --- */
    FK_CHECKRETURN int (*client_init)(void **cli, const fk_params *p, const fk_dataset *data,
                                      int client, int n_clients, uint64_t seed, fk_err *err);
    void (*client_close)(void *cli);
    FK_CHECKRETURN int (*local_step)(void *cli, const fk_bundle *task, fk_bundle *update,
                                     fk_report *rep, fk_err *err);
    /* Score a model on the client's data (final evaluation). */
    FK_CHECKRETURN int (*evaluate)(void *cli, const fk_bundle *model, fk_report *rep, fk_err *err);
    FK_CHECKRETURN int (*client_save)(void *cli, fk_bundle *out, fk_err *err);
    FK_CHECKRETURN int (*client_load)(void *cli, const fk_bundle *in, fk_err *err);
    /* Optional: answer a query batch ("X", n x p raw rows) from the client's fitted state
     * (see check_answer); FK_ESTATE when it has none. */
    FK_CHECKRETURN int (*client_predict)(void *cli, const fk_bundle *queries, fk_bundle *answer,
                                         fk_err *err);

    /* --- in-process simulation and docs (optional) --- */
    /* Built-in synthetic clients for `fedkern sim NAME` run without --data: fills
     * clients[0..n_clients) (zeroed on entry; the caller closes each) from the job
     * parameters and the seed. want (NULL: every client): a client c with want[c] == 0 gets
     * its name only, no rows (a process that holds some clients of the federation: `fedkern
     * sim` under mpirun); the wanted ones are bit for bit those of a call without want. */
    FK_CHECKRETURN int (*sim_data)(const fk_params *p, int n_clients, uint64_t seed,
                                   fk_dataset *clients, const unsigned char *want, fk_err *err);
    /* The job keys the method reads, NULL-terminated, for --help and the docs. */
    const fk_param_doc *keys;
} fk_method;

/* Job parameter the server's engine sets on every job it runs (overriding the config):
 * the largest update in bytes one client may send, i.e. what the server reassembles from
 * chunks. Absent in `fedkern sim`. Methods whose uploads grow with a job key (dica's D x D
 * statistics) read it to refuse a job that could not deliver. */
#define FK_JOB_SERVER_MAX_UPDATE "server.max_update"

/* Round budget of a job whose config sets no `rounds` and whose method has no max_rounds. */
enum { FK_DEFAULT_ROUNDS = 10 };

/* The round budget of a job of type m without `rounds`: max_rounds(p) or FK_DEFAULT_ROUNDS. */
int fk_method_default_rounds(const fk_method *m, const fk_params *p);

/* 1 when m aggregates by folding (fold_begin, fold, fold_end all set). */
int fk_method_folds(const fk_method *m);
/* The phase's aggregate over ups (ascending client order): by fold when the method folds,
 * else its aggregate op. The simulator's path; the server folds the same way from its store. */
FK_CHECKRETURN int fk_method_aggregate(const fk_method *m, void *srv, int round, int phase,
                                       const fk_update *ups, int n, int *round_done, fk_err *err);

/* All job types, NULL-terminated. */
extern const fk_method *const fk_methods[];
/* Look up by name; NULL plus a message listing the known names if unknown. */
const fk_method *fk_method_find(const char *name, fk_err *err);

#endif
