/* Benchmarks of the sparse functional learning family (common/methods/sfl/). */
#ifndef FK_BENCH_SFL_H
#define FK_BENCH_SFL_H

#include "common/base/err.h"
#include "common/models/sfl/sfl.h"

int fk_bench_fidelity_sfl(int argc, char **argv); /* bench/sfl/fidelity_sfl.c */
int fk_bench_sfl(int argc, char **argv);          /* bench/sfl/sfl.c */
/* `bench sfl --pen` (sfl_pen.c): pooled pen-digits 1 vs 7 against LIBSVM (peer: a python3
 * script printing "cpu_seconds accuracy support_vectors"; NULL or "" skips it). */
FK_CHECKRETURN int fk__bench_sfl_pen(int json, const char *dir, const char *peer, double scale,
                                     double wmin, double wmax, int Q, int reps, fk_err *err);
/* Rows of `fidelity sfl` in fidelity_sfl_ch2.c (E2.2, E2.3 with the KOMP baseline) and
 * fidelity_sfl_res.c (label flips: resilient vs regularised ERM, AUC of the duals). */
typedef struct fk__sfl_res_cfg {
    int fashion;  /* 0: pen-digits, 1: Fashion-MNIST (pool of 4000 rows of the pair) */
    int ca, cb;   /* the pair's raw labels (+1, -1) */
    int n_train;  /* training rows drawn from the pool per repetition */
    int reps;
    long T;
    double kmult; /* Huber slack weight kappa = kmult / n (spec §5.8: 1) */
    int sweep;    /* 1: only the cap sweep (Huber and hinge at caps 1, 10, 100 delta) */
    double blur;  /* > 0: E4.4, blur the corrupted images (sigma, 28 x 28) instead of flipping */
} fk__sfl_res_cfg;
FK_CHECKRETURN int fk__bench_sfl_resilient(int json, const char *dir, const fk__sfl_res_cfg *cfg,
                                           fk_err *err);
FK_CHECKRETURN int fk__bench_sfl_e22(int json, int reps, long T, double grel, double split,
                                     fk_err *err);
/* E2.2 Fig. 8 (fidelity_sfl_ch2.c): m = 10, N = 100, test MSE against the kernel count of
 * (PII')'s gamma_rel path and of KOMP's backward path, their plateaus (tol: relative);
 * centres U(1, 1 + spread) (1: as printed). */
FK_CHECKRETURN int fk__bench_sfl_fig8(int json, int reps, long T, double split, double tol,
                                      double spread, fk_err *err);
/* E2.4 substitute (fidelity_sfl_ovo.c): pen-digits {0..3}, one-vs-one, the first `folds` of 10. */
FK_CHECKRETURN int fk__bench_sfl_e24(int json, const char *dir, int folds, long T, double grel,
                                     fk_err *err);
/* E2.5 Fig. 11 substitute (fidelity_sfl_e25.c): MNIST-2000 0 vs 1 on 3 principal components. */
FK_CHECKRETURN int fk__bench_sfl_e25(int json, const char *dir, long T, double grel, fk_err *err);
/* E2.5 Table 1 substitute (fidelity_sfl_t1.c): Fashion-MNIST (mnist = 0) or MNIST-2000
 * (mnist = 1, training and test rows drawn disjointly from its 2000), 10 classes one-vs-one,
 * n_per training and test_per test rows per class, k_per k-means centres per class. */
FK_CHECKRETURN int fk__bench_sfl_t1(int json, const char *dir, int mnist, int n_per, int k_per,
                                    int test_per, long T, fk_err *err);
/* Test MSE of m on the n points x (1-D) with targets y (fidelity_sfl_ch2.c; NaN: no memory). */
double fk__bench_sfl_mse(const fk_sfl_model *m, const double *x, const double *y, size_t n);
FK_CHECKRETURN int fk__bench_sfl_e23(int json, int reps, long T, double grel, double komp_w,
                                     fk_err *err);

#endif
