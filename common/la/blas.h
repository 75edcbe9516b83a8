/* Checked BLAS wrappers on fk_mat (row-major, any ld >= cols).
 *
 * Each call validates shapes, leading dimensions, the 32-bit BLAS index
 * range and output aliasing before handing the work to cblas, and reports a
 * mismatch as FK_EINVAL with both shapes in the message. Outputs are
 * caller-allocated; nothing here allocates. */
#ifndef FK_BLAS_H
#define FK_BLAS_H

#include <stddef.h>

#include "common/base/err.h"
#include "common/la/mat.h"

/* Transpose flag for op(A): FK_NOTRANS uses A, FK_TRANS uses A^T. */
enum fk_trans { FK_NOTRANS = 0, FK_TRANS = 1 };

/* C = alpha * op(A) * op(B) + beta * C. C must not overlap A or B.
 * beta == 0 ignores the old contents of C (NaN in C does not propagate). */
FK_CHECKRETURN int fk_gemm(int transa, int transb, double alpha, const fk_mat *A, const fk_mat *B,
                           double beta, fk_mat *C, fk_err *err);

/* Symmetric rank-k update, both triangles of C written:
 * FK_NOTRANS: C = alpha * A * A^T + beta * C  (C is A.rows x A.rows)
 * FK_TRANS:   C = alpha * A^T * A + beta * C  (C is A.cols x A.cols) */
FK_CHECKRETURN int fk_syrk(int trans, double alpha, const fk_mat *A, double beta, fk_mat *C,
                           fk_err *err);

/* y = alpha * op(A) * x + beta * y; nx, ny are the lengths of x and y. */
FK_CHECKRETURN int fk_gemv(int trans, double alpha, const fk_mat *A, const double *x, size_t nx,
                           double beta, double *y, size_t ny, fk_err *err);

/* Y = alpha * X + Y, same shape. */
FK_CHECKRETURN int fk_mat_axpy(double alpha, const fk_mat *X, fk_mat *Y, fk_err *err);
/* M = alpha * M. */
FK_CHECKRETURN int fk_mat_scal(double alpha, fk_mat *M, fk_err *err);
/* Frobenius norm of M. */
double fk_mat_nrm2(const fk_mat *M);

/* Vector operations on contiguous arrays (n may be 0; lengths beyond the
 * 32-bit BLAS index range are processed in chunks). */
void fk_axpy(size_t n, double alpha, const double *x, double *y);
void fk_scal(size_t n, double alpha, double *x);
double fk_dot(size_t n, const double *x, const double *y);
double fk_nrm2(size_t n, const double *x);
void fk_copy(size_t n, const double *x, double *y);

#endif
