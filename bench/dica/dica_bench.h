/* Benchmarks of the DICA family (common/methods/dica/). */
#ifndef FK_BENCH_DICA_H
#define FK_BENCH_DICA_H

int fk_bench_dica(int argc, char **argv); /* bench/dica/dica.c */
int fk_bench_fidelity_dica(int argc, char **argv); /* bench/dica/fidelity_dica.c */

#endif
