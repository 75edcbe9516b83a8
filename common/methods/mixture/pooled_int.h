/* What the pooled-em server (pooled_em.c) and client (pooled_em_client.c) share: the stages
 * named in tasks, the clients' random stream, and the client's ops for the table. */
#ifndef FK_POOLED_EM_INT_H
#define FK_POOLED_EM_INT_H

#include <stdint.h>

#include "common/methods/method.h"

static const uint64_t FK__POOLED_CAND_STREAM = 0x7065636400000000ULL; /* client: which of its points */

enum { FK__POOLED_G_SUMS, FK__POOLED_G_SCATTER, FK__POOLED_G_MAIN };              /* job stage: the task's op */
enum { FK__POOLED_S_SEED, FK__POOLED_S_LLOYD, FK__POOLED_S_EM, FK__POOLED_S_DONE, FK__POOLED_S_FAILED }; /* restart stage */
enum { FK__POOLED_CLIENT_BITS = 24 };                        /* client index bits in a stream */

/* What both pooled servers (pooled-em, pooled-em-mor) keep besides their arrays: the job's
 * shape, its stage (the task's op), the step count that seeds every draw, the rounds repeated
 * for a missing client, and the pooled sample count. */
typedef struct fk__pooled_head {
    int K, R, S, p, op, tick, repeats;
    int streak, max_repeats; /* incomplete rounds in a row, and how many end the job */
    uint64_t seed;
    double N;
} fk__pooled_head;

/* One restart's EM bookkeeping after the clients' E-step: counts the iteration, marks the
 * restart failed (`bad`: a client's or the summed log-likelihood out of range) or done
 * (relative change within tol, or cap iterations), else records ll. 1 when the M-step is due. */
/* 1 when model is a pooled EM model that is not ready ("ready" = 0: the round budget ended
 * before the pooled EM reached its main stage), which has no parameters to score. */
int fk__pooled_model_unready(const fk_bundle *model);

int fk__pooled_em_advance(double *stage, double *iters, double *ll, double *ll_old, int r,
                          double ll_now, int bad, double tol, int cap);

/* One server array: checkpoint name, where its pointer lives, its length. */
typedef struct fk__pooled_arr {
    const char *name;
    double **a;
    size_t len;
} fk__pooled_arr;

/* A zeroed server state of `size` bytes whose first member is its head, the head filled from
 * the job's parameters (R, restarts, max_repeats). */
FK_CHECKRETURN int fk__pooled_srv_new(void **out, size_t size, const fk_params *p, int n_clients,
                                      uint64_t seed, fk_err *err);
/* The plan op of both tables (their server state starts with its head): sums need every
 * client, so all of them, every round. */
FK_CHECKRETURN int fk__pooled_plan(void *srv, int round, fk_rng *rng, int *chosen, int *n_chosen,
                                   fk_err *err);
/* A task's op and tick, for a client of this job. */
FK_CHECKRETURN int fk__pooled_task_head(const fk__pooled_head *h, int client, fk_bundle *out,
                                        fk_err *err);
/* After a round's updates (n of K) are checked: 0 when all arrived; 1 when some are missing
 * and the step is to be repeated; FK_ESTATE once more than max_repeats rounds in a row lacked
 * a client (a client that is gone would otherwise keep the job waiting to its last round). */
FK_CHECKRETURN int fk__pooled_incomplete(fk__pooled_head *h, int n, int round, const char *method,
                                         fk_err *err);
/* Updates from this job's clients, each at most once, in client order. */
FK_CHECKRETURN int fk__pooled_check_clients(const fk__pooled_head *h, const fk_update *ups, int n,
                                            fk_err *err);
/* The head and, once op > 0, the arrays into a checkpoint. */
FK_CHECKRETURN int fk__pooled_save(const fk__pooled_head *h, const fk__pooled_arr *a, int n_arr,
                                   fk_bundle *out, fk_err *err);
/* A checkpoint's head: op <= max_op, and K, R and restarts those of this job. */
FK_CHECKRETURN int fk__pooled_load_head(const fk__pooled_head *h, const fk_bundle *in, int max_op,
                                        fk__pooled_head *got, fk_err *err);
/* A checkpoint's arrays into t[], each present, of its length and bounded; nothing changed. */
FK_CHECKRETURN int fk__pooled_take_arrays(const fk_bundle *in, const fk__pooled_arr *a, int n_arr,
                                          const fk_tensor **t, fk_err *err);
/* Client: the task's op (0..max_op) and whole step count, checked. */
FK_CHECKRETURN int fk__pooled_task_op(const fk_bundle *task, int max_op, int *op, uint64_t *tick,
                                      fk_err *err);
void fk__pooled_free(fk__pooled_arr *a, int n_arr);

/* The check_update ops of pooled-em and pooled-em-mor (pooled_em_check.c). */
FK_CHECKRETURN int fk__pooled_em_check(void *srv, int round, int phase, const fk_update *up,
                                       fk_err *err);
FK_CHECKRETURN int fk__pooled_em_mor_check(void *srv, int round, int phase, const fk_update *up,
                                           fk_err *err);

FK_CHECKRETURN int fk__pooled_em_cli_init(void **out, const fk_params *p, const fk_dataset *data,
                                          int client, int n_clients, uint64_t seed, fk_err *err);
void fk__pooled_em_cli_close(void *v);
FK_CHECKRETURN int fk__pooled_em_cli_step(void *v, const fk_bundle *task, fk_bundle *up,
                                          fk_report *rep, fk_err *err);
FK_CHECKRETURN int fk__pooled_em_cli_evaluate(void *v, const fk_bundle *model, fk_report *rep,
                                              fk_err *err);
FK_CHECKRETURN int fk__pooled_em_cli_save(void *v, fk_bundle *out, fk_err *err);
FK_CHECKRETURN int fk__pooled_em_cli_load(void *v, const fk_bundle *in, fk_err *err);

#endif
