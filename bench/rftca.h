/* Benchmarks of the RF-TCA family (speed: bench/rftca.c; fidelity: bench/fidelity_rftca.c). */
#ifndef FK_BENCH_RFTCA_H
#define FK_BENCH_RFTCA_H

int fk_bench_rftca(int argc, char **argv);
int fk_bench_fidelity_rftca(int argc, char **argv);

#endif
