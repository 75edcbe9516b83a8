/* Benchmarks of the RF-TCA family (common/methods/fedrf_tca/; speed: rftca.c, fidelity: fidelity_rftca.c). */
#ifndef FK_BENCH_RFTCA_H
#define FK_BENCH_RFTCA_H

#include "common/base/err.h"

int fk_bench_rftca(int argc, char **argv);
int fk_bench_fidelity_rftca(int argc, char **argv);

/* Spec §6 checks T3, T7, T9 on the SURF data under dir (bench/fedrf_tca/fidelity_rftca_spec.c). */
FK_CHECKRETURN int fk_bench_rftca_spec_checks(const char *dir, int json, fk_err *err);

#endif
