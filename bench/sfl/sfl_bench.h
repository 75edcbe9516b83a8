/* Benchmarks of the sparse functional learning family (common/methods/sfl/). */
#ifndef FK_BENCH_SFL_H
#define FK_BENCH_SFL_H

#include "common/base/err.h"

int fk_bench_fidelity_sfl(int argc, char **argv); /* bench/sfl/fidelity_sfl.c */
int fk_bench_sfl(int argc, char **argv);          /* bench/sfl/sfl.c */
/* Rows of `fidelity sfl` in fidelity_sfl_ch2.c (E2.2, E2.3 with the KOMP baseline) and
 * fidelity_sfl_res.c (label flips: resilient vs regularised ERM, AUC of the duals). */
FK_CHECKRETURN int fk__bench_sfl_resilient(int json, const char *dir, int ca, int cb,
                                           int n_train, int reps, long T, fk_err *err);
FK_CHECKRETURN int fk__bench_sfl_e22(int json, int reps, long T, double grel, double split,
                                     fk_err *err);
/* E2.4 substitute (fidelity_sfl_ovo.c): pen-digits {0..3}, one-vs-one, the first `folds` of 10. */
FK_CHECKRETURN int fk__bench_sfl_e24(int json, const char *dir, int folds, long T, double grel,
                                     fk_err *err);
/* E2.5 Fig. 11 substitute (fidelity_sfl_e25.c): MNIST-2000 0 vs 1 on 3 principal components. */
FK_CHECKRETURN int fk__bench_sfl_e25(int json, const char *dir, long T, double grel, fk_err *err);
FK_CHECKRETURN int fk__bench_sfl_e23(int json, int reps, long T, double grel, double komp_w,
                                     fk_err *err);

#endif
