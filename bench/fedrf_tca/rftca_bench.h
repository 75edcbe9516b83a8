/* Benchmarks of the RF-TCA family (common/methods/fedrf_tca/; speed: rftca.c, fidelity: fidelity_rftca.c). */
#ifndef FK_BENCH_RFTCA_H
#define FK_BENCH_RFTCA_H

#include "common/base/err.h"

int fk_bench_rftca(int argc, char **argv);
int fk_bench_fidelity_rftca(int argc, char **argv);

/* Spec §6 checks T3, T7, T9 on the SURF data under dir (bench/fedrf_tca/fidelity_rftca_spec.c). */
FK_CHECKRETURN int fk_bench_rftca_spec_checks(const char *dir, int json, fk_err *err);

/* The federated runs of spec §2.8 (bench/fedrf_tca/fidelity_rftca_fed.c). groups: letters
 * s (multi-source SURF), 1 (single-source pairs), i (implicit heterogeneity). */
typedef struct fk_bench_fed_opts {
    const char *groups;
    const char *pairs; /* single-source pairs: d DeCAF6 W<->D, m MNIST<->USPS, c COIL1<->COIL2 */
    long rounds, N, seeds, avg_last, eval_every;
    long first_seed; /* seeds first_seed .. first_seed + seeds - 1 */
    const char *variants; /* a lambda = 1, s lambda = 1 target_opt = sgd, 0 lambda = 0, o source-only */
    double select_holdout; /* > 0: sources hold out this fraction to select a round's model */
    int extractors; /* bit 0 identity, bit 1 dense */
    int json;
} fk_bench_fed_opts;
FK_CHECKRETURN int fk_bench_rftca_fed_groups(const char *dir, const fk_bench_fed_opts *fo,
                                             fk_err *err);

#endif
