/* Pooled-EM as a federated job (spec fedgrem.md 2.6): Local-EM's EEE Gaussian mixture fitted
 * to the union of all clients' data from summed statistics, k-means++ seeding, Lloyd and EM
 * steps one per round, restarts side by side; the job ends when every restart has converged
 * (method op `finished`). Parameters: R (5), restarts (10). The model is one pooled theta, w
 * and sigma copied to every client (K x R x p, K x R, K x p x p), with loglik, converged and
 * ready (0 until some restart has its EM parameters). */
#ifndef FK_POOLED_EM_H
#define FK_POOLED_EM_H

#include "common/methods/method.h"

extern const fk_method fk_method_pooled_em;

/* Rounds after which an R-component job has always finished (seeding, the Lloyd cap, the EM
 * cap), when no round is repeated for a missing client. */
int fk_pooled_em_rounds(int R);

#endif
