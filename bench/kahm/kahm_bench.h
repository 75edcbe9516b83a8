/* Benchmarks of the KAHM family (common/methods/kahm/). */
#ifndef FK_BENCH_KAHM_H
#define FK_BENCH_KAHM_H

int fk_bench_kahm(int argc, char **argv); /* bench/kahm/kahm.c */
int fk_bench_fidelity_kahm(int argc, char **argv); /* bench/kahm/fidelity_kahm.c */
int fk_bench_kahm_serve(int argc, char **argv); /* bench/kahm/serve.c */

#include "common/base/err.h"
#include "common/la/mat.h"
/* sklearn's gamma = 'scale' (1 / (p var(X)), var over all entries) as an RBF width sigma. */
double fk_bench_kahm_svm_sigma(const fk_mat *X);
/* Cell E of spec kahm.md 11.3 (Office-Caltech10 semi-supervised, SURF 12 tasks and DeCAF6
 * D<->W) over `splits` splits, rows with target_met (bench/kahm/fidelity_kahm_office.c). */
FK_CHECKRETURN int fk_bench_kahm_office(int json, const char *dir, int splits, fk_err *err);

#endif
