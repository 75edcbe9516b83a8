/* Benchmarks of the sparse functional learning family (common/methods/sfl/). */
#ifndef FK_BENCH_SFL_H
#define FK_BENCH_SFL_H

int fk_bench_fidelity_sfl(int argc, char **argv); /* bench/sfl/fidelity_sfl.c */

#endif
