/* Pooled-EM as a federated job (spec fedgrem.md 2.6): Local-EM's EEE Gaussian mixture fitted
 * to the union of all clients' data from summed statistics, k-means++ seeding, Lloyd and EM
 * steps one per round, restarts side by side; the job ends when every restart has converged
 * (method op `finished`). Parameters: R (5), restarts (10). The model is one pooled theta, w
 * and sigma copied to every client (K x R x p, K x R, K x p x p), with loglik, converged and
 * ready (0 until some restart has its EM parameters). */
#ifndef FK_POOLED_EM_H
#define FK_POOLED_EM_H

#include "common/methods/method.h"

extern const fk_method fk_method_pooled_em;     /* pooled_em.c, pooled_em_client.c */
/* The same on mixtures of regressions (mixreg EM on the union from summed statistics). */
extern const fk_method fk_method_pooled_em_mor; /* pooled_em_mor.c */

/* Rounds after which an R-component job has always finished (seeding, the Lloyd cap, the EM
 * cap), when no round is repeated for a missing client. */
int fk_pooled_em_rounds(int R);

#endif
