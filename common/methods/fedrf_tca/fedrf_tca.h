/* FedRF-TCA (spec §2, paper Alg. 2-5) as a method operations table.
 *
 * Clients 0..n-1; client `target` (default n-1) is the target domain, the
 * others are labelled sources. Every client steps every round (Alg. 2 line 8:
 * sources outside S_t still train on L_C). A round has three phases:
 *   0  every client samples a mini-batch; sources in S_t and the target send
 *      their statistic s = Sigma l (2N values) to the server;
 *   1  the server relays s_T to the sources in S_t and their s_i to the
 *      target; clients take one optimizer step (sources L_C + lambda L_MMD,
 *      target the mean pairwise L_MMD) and send W_RF (and the classifier every
 *      T_C rounds) when asked;
 *   2  the server returns the averages W and C to the senders and the target.
 * The server only ever holds s, W and C; Omega is rebuilt from the shared seed
 * by every client and never sent. Table III drop settings choose which subset
 * of S_t delivers W and C (setting I A/A/A, II A/A/B, III A/B/C); option
 * order picks the Table XVIII senders instead (one source per round in cyclic
 * or random order). Option common_init starts every client from one W and
 * classifier (drawn from the shared seed, as if broadcast). */
#ifndef FK_FEDRF_TCA_H
#define FK_FEDRF_TCA_H

#include <stddef.h>

#include "common/methods/method.h"

extern const fk_method fk_method_fedrf_tca;

/* Values per update (paper Table II): W_RF = 2Nm, classifier P_C, their sum,
 * the statistic (N in the paper's table, 2N actually sent) and the totals. */
typedef struct fk_fedrf_counts {
    size_t w_rf;
    size_t classifier;
    size_t model;
    size_t sigma_paper; /* N */
    size_t sigma_sent;  /* 2N */
    size_t total_paper; /* model + N */
    size_t total_sent;  /* model + 2N */
    /* select_holdout (not in the paper): per source and round the model to score comes down
     * (W_RF + classifier) and two counts go up; the last round adds the tail average (one more
     * model down, one count up) */
    size_t select_down;
    size_t select_up;
} fk_fedrf_counts;

void fk_fedrf_message_params(size_t N, size_t m, const size_t *hidden, int n_hidden,
                             size_t classes, fk_fedrf_counts *out);

/* Values exchanged in one round (spec §2.4) when s sources send Sigma l, w sources
 * send W and c sources send their classifier (c = 0 in rounds that average no
 * classifier); an empty set exchanges nothing. direct is the spec's count with
 * statistics passed peer to peer, 4sN + 2(w+1)2Nm + (2c+1)P_C; relayed adds what
 * the server relay costs on top, the uploads of the s + 1 statistics (2N each). */
typedef struct fk_fedrf_round_values {
    size_t direct;
    size_t relayed;
} fk_fedrf_round_values;

void fk_fedrf_round_count(size_t N, size_t m, size_t p_c, int s, int w, int c,
                          fk_fedrf_round_values *out);

/* Values select_holdout adds to a round, on top of fk_fedrf_round_count: each of `sources`
 * scoring sources receives `cand` candidate models (W_RF, 2Nm each, and a classifier of P_C
 * values each; with voting, voters > 0, the one vote of voters classifiers serves every
 * candidate) and returns the held-out row count and one correct count per candidate. */
size_t fk_fedrf_select_values(size_t N, size_t m, size_t p_c, size_t voters, int sources, int cand);

/* Sizes of the sets of round `round` as the server's plan draws them from
 * plan_rng (fk_sim_plan_rng): |S_t|, the W senders and the classifier senders. */
FK_CHECKRETURN int fk_fedrf_round_sets(const fk_params *p, int n_clients, int round,
                                       fk_rng *plan_rng, int *n_a, int *n_w, int *n_c, fk_err *err);

#endif
