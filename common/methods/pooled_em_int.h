/* What the pooled-em server (pooled_em.c) and client (pooled_em_client.c) share: the stages
 * named in tasks, the clients' random stream, and the client's ops for the table. */
#ifndef FK_POOLED_EM_INT_H
#define FK_POOLED_EM_INT_H

#include <stdint.h>

#include "common/methods/method.h"

static const uint64_t CAND_STREAM = 0x7065636400000000ULL; /* client: which of its points */

enum { G_SUMS, G_SCATTER, G_MAIN };              /* job stage: the task's op */
enum { S_SEED, S_LLOYD, S_EM, S_DONE, S_FAILED }; /* restart stage */
enum { CLIENT_BITS = 24 };                        /* client index bits in a stream */

int fk_pooled_em_cli_init(void **out, const fk_params *p, const fk_dataset *data, int client,
                          int n_clients, uint64_t seed, fk_err *err);
void fk_pooled_em_cli_close(void *v);
int fk_pooled_em_cli_step(void *v, const fk_bundle *task, fk_bundle *up, fk_report *rep,
                          fk_err *err);
int fk_pooled_em_cli_evaluate(void *v, const fk_bundle *model, fk_report *rep, fk_err *err);
int fk_pooled_em_cli_save(void *v, fk_bundle *out, fk_err *err);
int fk_pooled_em_cli_load(void *v, const fk_bundle *in, fk_err *err);

#endif
