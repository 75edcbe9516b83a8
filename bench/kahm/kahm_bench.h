/* Benchmarks of the KAHM family (common/methods/kahm/). */
#ifndef FK_BENCH_KAHM_H
#define FK_BENCH_KAHM_H

int fk_bench_kahm(int argc, char **argv); /* bench/kahm/kahm.c */
int fk_bench_fidelity_kahm(int argc, char **argv); /* bench/kahm/fidelity_kahm.c */
int fk_bench_kahm_serve(int argc, char **argv); /* bench/kahm/serve.c */

#endif
