/* FedGrEM (Tian, Weng & Feng, ICML 2024) and its baselines as method
 * operations tables (spec shared/specs/fedgrem.md):
 *   fedgrem      local E-step + gradient M-step, central penalized (Huber-type) fusion
 *   fedem        local exact EM means, server n_k-weighted average
 *   local-em     per-client EEE mixture (also the initializer of all the others)
 *   local-grem   per-client gradient EM, step 0.1, no server step
 *   tgmm         per-client EM borrowing from the other clients' initial centres (0.4)
 *   pooled-grem  gradient EM on the union of all clients via summed statistics
 *   fedgrem-mor, fedem-mor   the same two on mixtures of regressions (fedgrem_mor.c;
 *                data with a regression target y, e.g. synthetic/mor:client=I), with
 *                local-em-mor, local-grem-mor and pooled-grem-mor
 * (pooled-em and pooled-em-mor are declared in pooled_em.h, fedgmm-mor in fedgmm_mor.h.)
 * Round 1 starts with an initialisation phase: every client fits Local-EM and
 * sends its centres; the server aligns labels (Hungarian step) and answers
 * with each client's permutation. Parameters (job config / --key value):
 *   R (5), c_eta (0.95), kappa (0.1), C (2), lambda0 (1), central_passes (0 =
 *   converge; 2 = reference), align_B (50), restarts (10), grem_step (0.1),
 *   tgmm_lambda (0.4), fedem_weights (n|uniform), step_guard (0), local_init
 *   (kmeans = k-means++ starts, `restarts` of them | hc = mclust's hierarchical start; GMM). */
#ifndef FK_FEDGREM_H
#define FK_FEDGREM_H

#include "common/methods/method.h"

extern const fk_method fk_method_fedgrem;
extern const fk_method fk_method_fedem;
extern const fk_method fk_method_local_em;
extern const fk_method fk_method_local_grem;
extern const fk_method fk_method_tgmm;
extern const fk_method fk_method_pooled_grem;
extern const fk_method fk_method_fedgrem_mor;
extern const fk_method fk_method_fedem_mor;
extern const fk_method fk_method_local_em_mor;
extern const fk_method fk_method_local_grem_mor;
extern const fk_method fk_method_pooled_grem_mor;

#endif
