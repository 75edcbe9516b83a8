/* The BLAS thread count, pinned once at program start.
 *
 * OpenBLAS splits dgemm, dsyrk, dgemv, dsymv and long dot products between its threads in a way
 * that depends on the thread count, and the split changes the order of the floating-point sums:
 * with its default (one thread per core) the same job and seed give models that differ in the
 * last bits between a 2-core and a 4-core machine, and between a daemon started with
 * OPENBLAS_NUM_THREADS=1 and `fedkern sim` without it. Every fedkern program therefore pins the
 * count before its first BLAS call: FK_BLAS_THREADS from the environment, 1 when unset. One
 * count gives the same bits on every machine with the same OpenBLAS core type; more threads
 * trade that for speed on large dense solves. OPENBLAS_NUM_THREADS is overridden. */
#ifndef FK_BLAS_THREADS_H
#define FK_BLAS_THREADS_H

#include "common/base/err.h"

/* The count used when FK_BLAS_THREADS is unset. */
#define FK_BLAS_THREADS_DEFAULT 1
/* The largest count accepted. */
#define FK_BLAS_THREADS_MAX 256

/* Reads FK_BLAS_THREADS (a whole number from 1 to FK_BLAS_THREADS_MAX; unset or empty means
 * FK_BLAS_THREADS_DEFAULT), pins OpenBLAS to it and stores it in *threads. FK_EINVAL, with
 * the value and what to set, for anything else; OpenBLAS is then left untouched. */
FK_CHECKRETURN int fk_blas_threads_setup(int *threads, fk_err *err);

/* The name of the core type whose kernels OpenBLAS runs (e.g. "Haswell", "Prescott"). */
const char *fk_blas_core_name(void);

#endif
