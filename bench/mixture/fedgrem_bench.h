/* Benchmarks of the mixture (FedGrEM) family (common/methods/mixture/). */
#ifndef FK_BENCH_MIXTURE_H
#define FK_BENCH_MIXTURE_H

int fk_bench_fedgrem(int argc, char **argv); /* bench/mixture/fedgrem.c */
int fk_bench_fidelity_fedgrem(int argc, char **argv); /* bench/mixture/fidelity_fedgrem.c */

#endif
