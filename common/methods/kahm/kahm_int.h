/* Internals of the kahm job type shared by the files of common/methods/kahm/ (fk__ names,
 * libuv's uv__ convention): the job keys, the messages' codec and the ops the table in
 * kahm.c points at. Not for use outside this folder (tests aside). */
#ifndef FK_METHODS_KAHM_INT_H
#define FK_METHODS_KAHM_INT_H

#include "common/base/bundle.h"
#include "common/base/params.h"
#include "common/methods/kahm/kahm.h"
#include "common/methods/method.h"
#include "common/models/kahm/kahm.h"

/* The job keys, parsed once by the server and every client. */
typedef struct fk_kahm_job {
    int C;      /* classes: ids in [0, C) */
    int upload; /* mode A asked for */
    int dim;    /* expected input dimension, 0 = any */
    int tanh;   /* x -> tanh(scale x) before fitting and scoring */
    double scale;
    double holdout; /* share of each class a client keeps aside for evaluate */
    fk_kahm_opts ko;
    double *values; /* the raw label of each class id (C, ascending) when the job's `classes`
                      * lists values other than 0..C-1; NULL when the ids are the labels */
} fk_kahm_job;

/* fk__kahm_job_close frees what a successful parse holds. */
FK_CHECKRETURN int fk__kahm_job_parse(fk_kahm_job *j, const fk_params *p, uint64_t seed,
                                      fk_err *err);
void fk__kahm_job_close(fk_kahm_job *j);
/* Model tensor "class_values" (C raw labels, present when they are not the ids): map the
 * class ids of labels (n, -1 kept) and of a class list (m) to raw values in place. */
void fk__kahm_label_values(const fk_bundle *model, double *labels, size_t n, double *cls, size_t m);

/* Class list of a set: "PREheld", "PREcounts", "PREparts" (one entry per class held)
 * and "PREdim"; with models = 1 also every KAHM as "PREmA.S.{meta,P,L,Xw,M,b}". */
FK_CHECKRETURN int fk__kahm_encode(const fk_kahm_set *s, int p, const char *pre, int models,
                                   fk_bundle *out, fk_err *err);
/* Check and read what fk__kahm_encode wrote (from another party or from disk): names,
 * shapes, finiteness, class ids in [0, C), counts, parts, dimension (dim > 0: must
 * match). With models = 1 the KAHMs are decoded into s (else s gets empty classes);
 * s may be NULL to check only. *p_out gets the dimension. Nothing is kept on error. */
FK_CHECKRETURN int fk__kahm_decode(const fk_bundle *b, const char *pre, int C, int dim, int models,
                                   fk_kahm_set *s, int *p_out, fk_err *err);

/* Server and client ops (kahm_server.c, kahm_client.c). */
FK_CHECKRETURN int fk__kahm_srv_init(void **srv, const fk_params *p, int n_clients, uint64_t seed,
                                     fk_err *err);
void fk__kahm_srv_close(void *srv);
FK_CHECKRETURN int fk__kahm_plan(void *srv, int round, fk_rng *rng, int *chosen, int *n_chosen,
                                 fk_err *err);
FK_CHECKRETURN int fk__kahm_task(void *srv, int round, int phase, int client, fk_bundle *out,
                                 fk_err *err);
FK_CHECKRETURN int fk__kahm_aggregate(void *srv, int round, int phase, const fk_update *ups, int n,
                                      int *round_done, fk_err *err);
FK_CHECKRETURN int fk__kahm_model(void *srv, fk_bundle *out, fk_err *err);
FK_CHECKRETURN int fk__kahm_save(void *srv, fk_bundle *out, fk_err *err);
FK_CHECKRETURN int fk__kahm_load(void *srv, const fk_bundle *in, fk_err *err);
int fk__kahm_finished(void *srv);
FK_CHECKRETURN int fk__kahm_check_update(void *srv, int round, int phase, const fk_update *up,
                                         fk_err *err);

FK_CHECKRETURN int fk__kahm_cli_init(void **cli, const fk_params *p, const fk_dataset *data,
                                     int client, int n_clients, uint64_t seed, fk_err *err);
void fk__kahm_cli_close(void *cli);
FK_CHECKRETURN int fk__kahm_local_step(void *cli, const fk_bundle *task, fk_bundle *update,
                                       fk_report *rep, fk_err *err);
FK_CHECKRETURN int fk__kahm_evaluate(void *cli, const fk_bundle *model, fk_report *rep,
                                     fk_err *err);
FK_CHECKRETURN int fk__kahm_cli_save(void *cli, fk_bundle *out, fk_err *err);
FK_CHECKRETURN int fk__kahm_cli_load(void *cli, const fk_bundle *in, fk_err *err);
/* Global classifier (63) at the server over a mode-A model (kahm_predict.c). */
FK_CHECKRETURN int fk__kahm_predict(const fk_bundle *model, const fk_bundle *queries,
                                    fk_bundle *out, fk_err *err);
/* Mode-B serving (kahm_client.c, kahm_serve.c): a holder client's class distances for a
 * query batch, the server's check of one answer, and the minimum over the answers (63). */
FK_CHECKRETURN int fk__kahm_client_predict(void *cli, const fk_bundle *queries, fk_bundle *answer,
                                           fk_err *err);
int fk__kahm_holds_models(const fk_bundle *model, int client);
FK_CHECKRETURN int fk__kahm_check_answer(const fk_bundle *model, const fk_bundle *queries,
                                         const fk_update *ans, fk_err *err);
FK_CHECKRETURN int fk__kahm_combine(const fk_bundle *model, const fk_bundle *queries,
                                    const fk_update *ans, int n, fk_bundle *out, fk_err *err);
FK_CHECKRETURN int fk__kahm_sim_data(const fk_params *p, int n_clients, uint64_t seed,
                                     fk_dataset *clients, const unsigned char *want, fk_err *err);

#endif
