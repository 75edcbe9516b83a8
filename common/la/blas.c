#include "common/la/blas.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

/* Largest count one cblas call takes (OpenBLAS on Debian uses 32-bit int). */
static const size_t blas_max = (size_t)INT_MAX;

static size_t op_rows(const fk_mat *M, int trans)
{
    return trans ? M->cols : M->rows;
}

static size_t op_cols(const fk_mat *M, int trans)
{
    return trans ? M->rows : M->cols;
}

static enum CBLAS_TRANSPOSE cblas_trans(int trans)
{
    return trans ? CblasTrans : CblasNoTrans;
}

/* FK_OK if M is a well-formed matrix for BLAS (data set, ld >= max(1, cols), fits int). */
FK_CHECKRETURN static int check_mat(const fk_mat *M, const char *what, fk_err *err)
{
    if (!M)
        return fk_err_set(err, FK_EINVAL, "%s: matrix is NULL", what);
    if (M->rows > blas_max || M->cols > blas_max || M->ld > blas_max)
        return fk_err_set(err, FK_ELIMIT,
                          "%s: matrix %zux%zu (ld %zu) exceeds the BLAS index range %zu; "
                          "split the work into smaller blocks",
                          what, M->rows, M->cols, M->ld, blas_max);
    if (M->rows && M->cols && !M->data)
        return fk_err_set(err, FK_EINVAL, "%s: %zux%zu matrix has no data (not initialised?)", what,
                          M->rows, M->cols);
    if (M->rows > 1 && M->ld < M->cols)
        return fk_err_set(err, FK_EINVAL, "%s: leading dimension %zu is below the column count %zu",
                          what, M->ld, M->cols);
    return FK_OK;
}

/* BLAS wants ld >= max(1, cols) even when a dimension is 0 or there is one row. */
static int blas_ld(const fk_mat *M)
{
    size_t ld = M->ld < M->cols ? M->cols : M->ld;
    return ld ? (int)ld : 1;
}

static uintptr_t mat_begin(const fk_mat *M)
{
    return (uintptr_t)M->data;
}

static uintptr_t mat_end(const fk_mat *M)
{
    if (!M->rows || !M->cols)
        return (uintptr_t)M->data;
    return (uintptr_t)(M->data + (M->rows - 1) * M->ld + M->cols);
}

/* Whether two matrices share an element (an output must not alias an input).
 * Side-by-side column blocks of one buffer (same ld) are recognised as disjoint;
 * other interleavings are treated as overlapping. */
static int mats_overlap(const fk_mat *A, const fk_mat *B)
{
    if (mat_begin(A) == mat_end(A) || mat_begin(B) == mat_end(B))
        return 0;
    if (!(mat_begin(A) < mat_end(B) && mat_begin(B) < mat_end(A)))
        return 0;
    if (A->ld != B->ld || !A->ld || mat_begin(B) == mat_begin(A))
        return 1;
    if (mat_begin(B) < mat_begin(A)) {
        const fk_mat *t = A;
        A = B;
        B = t;
    }
    uintptr_t bytes = mat_begin(B) - mat_begin(A);
    if (bytes % sizeof(double))
        return 1;
    size_t col = (size_t)(bytes / sizeof(double)) % A->ld; /* B's first column in A's frame */
    if (A->cols > A->ld || col + B->cols > A->ld)
        return 1;
    return col < A->cols;
}

FK_CHECKRETURN static int check_trans(int trans, const char *fn, fk_err *err)
{
    if (trans != FK_NOTRANS && trans != FK_TRANS)
        return fk_err_set(err, FK_EINVAL,
                          "%s: transpose flag %d is neither FK_NOTRANS nor FK_TRANS", fn, trans);
    return FK_OK;
}

FK_CHECKRETURN static int check_out(const fk_mat *C, const fk_mat *in, const char *fn,
                                    const char *name, fk_err *err)
{
    if (mats_overlap(C, in))
        return fk_err_set(err, FK_EINVAL,
                          "%s: output C overlaps input %s; write the result into a separate matrix",
                          fn, name);
    return FK_OK;
}

int fk_gemm(int transa, int transb, double alpha, const fk_mat *A, const fk_mat *B, double beta,
            fk_mat *C, fk_err *err)
{
    int rc;
    if ((rc = check_trans(transa, "fk_gemm", err)) || (rc = check_trans(transb, "fk_gemm", err)) ||
        (rc = check_mat(A, "fk_gemm: A", err)) || (rc = check_mat(B, "fk_gemm: B", err)) ||
        (rc = check_mat(C, "fk_gemm: C", err)))
        return rc;
    size_t m = op_rows(A, transa), k = op_cols(A, transa);
    size_t kb = op_rows(B, transb), n = op_cols(B, transb);
    if (k != kb)
        return fk_err_set(
            err, FK_EINVAL,
            "fk_gemm: op(A) is %zux%zu but op(B) is %zux%zu; inner dimensions must agree", m, k, kb,
            n);
    if (C->rows != m || C->cols != n)
        return fk_err_set(err, FK_EINVAL, "fk_gemm: C is %zux%zu but op(A)*op(B) is %zux%zu",
                          C->rows, C->cols, m, n);
    if ((rc = check_out(C, A, "fk_gemm", "A", err)) || (rc = check_out(C, B, "fk_gemm", "B", err)))
        return rc;
    if (!m || !n)
        return FK_OK;
    cblas_dgemm(CblasRowMajor, cblas_trans(transa), cblas_trans(transb), (int)m, (int)n, (int)k,
                alpha, A->data, blas_ld(A), B->data, blas_ld(B), beta, C->data, blas_ld(C));
    return FK_OK;
}

int fk_syrk(int trans, double alpha, const fk_mat *A, double beta, fk_mat *C, fk_err *err)
{
    int rc;
    if ((rc = check_trans(trans, "fk_syrk", err)) || (rc = check_mat(A, "fk_syrk: A", err)) ||
        (rc = check_mat(C, "fk_syrk: C", err)))
        return rc;
    size_t n = op_rows(A, trans), k = op_cols(A, trans);
    if (C->rows != n || C->cols != n)
        return fk_err_set(err, FK_EINVAL, "fk_syrk: C is %zux%zu but %s is %zux%zu", C->rows,
                          C->cols, trans ? "A^T*A" : "A*A^T", n, n);
    if ((rc = check_out(C, A, "fk_syrk", "A", err)))
        return rc;
    if (!n)
        return FK_OK;
    cblas_dsyrk(CblasRowMajor, CblasLower, cblas_trans(trans), (int)n, (int)k, alpha, A->data,
                blas_ld(A), beta, C->data, blas_ld(C));
    /* Mirror the lower triangle into the upper one, column i to row i. */
    for (size_t i = 0; i + 1 < n; i++)
        cblas_dcopy((int)(n - i - 1), C->data + (i + 1) * C->ld + i, (int)C->ld,
                    C->data + i * C->ld + i + 1, 1);
    return FK_OK;
}

int fk_gemv(int trans, double alpha, const fk_mat *A, const double *x, size_t nx, double beta,
            double *y, size_t ny, fk_err *err)
{
    int rc;
    if ((rc = check_trans(trans, "fk_gemv", err)) || (rc = check_mat(A, "fk_gemv: A", err)))
        return rc;
    size_t m = op_rows(A, trans), n = op_cols(A, trans);
    if (nx != n || ny != m)
        return fk_err_set(err, FK_EINVAL,
                          "fk_gemv: op(A) is %zux%zu, so x needs length %zu and y length %zu "
                          "(got %zu and %zu)",
                          m, n, n, m, nx, ny);
    if ((nx && !x) || (ny && !y))
        return fk_err_set(err, FK_EINVAL, "fk_gemv: x or y is NULL");
    fk_mat ym = fk_mat_view(y, 1, ny, ny);
    fk_mat xm = fk_mat_view((double *)x, 1, nx, nx);
    if ((rc = check_out(&ym, A, "fk_gemv", "A", err)) ||
        (rc = check_out(&ym, &xm, "fk_gemv", "x", err)))
        return rc;
    if (!m)
        return FK_OK;
    if (!n) {
        fk_scal(m, beta, y);
        return FK_OK;
    }
    cblas_dgemv(CblasRowMajor, cblas_trans(trans), (int)A->rows, (int)A->cols, alpha, A->data,
                blas_ld(A), x, 1, beta, y, 1);
    return FK_OK;
}

/* Contiguous storage lets one vector call cover the whole matrix. */
static int mat_contiguous(const fk_mat *M)
{
    return M->ld == M->cols || M->rows <= 1;
}

int fk_mat_axpy(double alpha, const fk_mat *X, fk_mat *Y, fk_err *err)
{
    int rc;
    if ((rc = check_mat(X, "fk_mat_axpy: X", err)) || (rc = check_mat(Y, "fk_mat_axpy: Y", err)))
        return rc;
    if (X->rows != Y->rows || X->cols != Y->cols)
        return fk_err_set(err, FK_EINVAL, "fk_mat_axpy: X is %zux%zu but Y is %zux%zu", X->rows,
                          X->cols, Y->rows, Y->cols);
    if (mat_contiguous(X) && mat_contiguous(Y)) {
        fk_axpy(X->rows * X->cols, alpha, X->data, Y->data);
        return FK_OK;
    }
    for (size_t i = 0; i < X->rows; i++)
        fk_axpy(X->cols, alpha, fk_mat_row(X, i), fk_mat_row(Y, i));
    return FK_OK;
}

int fk_mat_scal(double alpha, fk_mat *M, fk_err *err)
{
    int rc;
    if ((rc = check_mat(M, "fk_mat_scal: M", err)))
        return rc;
    if (mat_contiguous(M)) {
        fk_scal(M->rows * M->cols, alpha, M->data);
        return FK_OK;
    }
    for (size_t i = 0; i < M->rows; i++)
        fk_scal(M->cols, alpha, fk_mat_row(M, i));
    return FK_OK;
}

/* sqrt(a^2 + b^2) for nonnegative norms without overflow. */
static double norm_combine(double a, double b)
{
    double hi = a > b ? a : b, lo = a > b ? b : a;
    if (hi == 0.0)
        return 0.0;
    double r = lo / hi;
    return hi * sqrt(1.0 + r * r);
}

double fk_mat_nrm2(const fk_mat *M)
{
    if (mat_contiguous(M))
        return fk_nrm2(M->rows * M->cols, M->data);
    double s = 0.0;
    for (size_t i = 0; i < M->rows; i++)
        s = norm_combine(s, fk_nrm2(M->cols, fk_mat_row(M, i)));
    return s;
}

static int chunk(size_t n)
{
    return (int)(n < blas_max ? n : blas_max);
}

void fk_axpy(size_t n, double alpha, const double *x, double *y)
{
    for (size_t done = 0; done < n;) {
        int c = chunk(n - done);
        cblas_daxpy(c, alpha, x + done, 1, y + done, 1);
        done += (size_t)c;
    }
}

void fk_scal(size_t n, double alpha, double *x)
{
    for (size_t done = 0; done < n;) {
        int c = chunk(n - done);
        cblas_dscal(c, alpha, x + done, 1);
        done += (size_t)c;
    }
}

void fk_copy(size_t n, const double *x, double *y)
{
    for (size_t done = 0; done < n;) {
        int c = chunk(n - done);
        cblas_dcopy(c, x + done, 1, y + done, 1);
        done += (size_t)c;
    }
}

double fk_dot(size_t n, const double *x, const double *y)
{
    double s = 0.0;
    for (size_t done = 0; done < n;) {
        int c = chunk(n - done);
        s += cblas_ddot(c, x + done, 1, y + done, 1);
        done += (size_t)c;
    }
    return s;
}

double fk_nrm2(size_t n, const double *x)
{
    double s = 0.0;
    for (size_t done = 0; done < n;) {
        int c = chunk(n - done);
        s = norm_combine(s, cblas_dnrm2(c, x + done, 1));
        done += (size_t)c;
    }
    return s;
}
