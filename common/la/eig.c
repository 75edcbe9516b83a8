#include "common/la/eig.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "common/la/rng.h"

/* Column-major copy of the n x n symmetric A (= A itself, by symmetry). */
static double *sym_copy(const fk_mat *A)
{
    size_t n = A->rows;
    double *a = malloc(n * n * sizeof *a + 8);
    if (!a)
        return NULL;
    for (size_t i = 0; i < n; i++)
        memcpy(a + i * n, fk_mat_row(A, i), n * sizeof *a);
    return a;
}

/* dsyevr with il..iu = n-m+1..n on the column-major n x n matrix a (destroyed);
 * z gets m column-major eigenvectors (ascending), w the eigenvalues. */
FK_CHECKRETURN static int top_range(double *a, size_t n, size_t m, double *w, double *z, fk_err *err)
{
    lapack_int found = 0;
    lapack_int *isuppz = malloc(2 * m * sizeof *isuppz + 8);
    if (!isuppz)
        return fk_err_set(err, FK_ENOMEM, "eigen-solver: out of memory (n=%zu)", n);
    lapack_int info = LAPACKE_dsyevr(LAPACK_COL_MAJOR, 'V', 'I', 'L', (lapack_int)n, a,
                                     (lapack_int)n, 0.0, 0.0, (lapack_int)(n - m + 1),
                                     (lapack_int)n, 0.0, &found, w, z, (lapack_int)n, isuppz);
    free(isuppz);
    if (info != 0 || (size_t)found != m)
        return fk_err_set(err, FK_ENUMERIC,
                          "eigen-solver: dsyevr failed (info=%d, found %d of %zu eigenpairs, n=%zu); "
                          "check the matrix for NaN/Inf",
                          (int)info, (int)found, m, n);
    return FK_OK;
}

FK_CHECKRETURN static int check_args(const fk_mat *A, size_t m, fk_err *err)
{
    if (A->rows != A->cols || A->rows == 0)
        return fk_err_set(err, FK_EINVAL, "eigen-solver: matrix must be square and non-empty (got %zux%zu)",
                          A->rows, A->cols);
    if (m == 0 || m > A->rows)
        return fk_err_set(err, FK_EINVAL, "eigen-solver: asked for %zu eigenpairs of a %zux%zu matrix; "
                          "use 1 <= m <= n", m, A->rows, A->rows);
    for (size_t i = 0; i < A->rows; i++) {
        const double *r = fk_mat_row(A, i);
        for (size_t j = 0; j < A->cols; j++)
            if (!isfinite(r[j]))
                return fk_err_set(err, FK_ENUMERIC, "eigen-solver: entry (%zu,%zu) is not finite", i, j);
    }
    return FK_OK;
}

/* Reverse ascending (w, z) into descending vals and row-major V (n x m). */
FK_CHECKRETURN static int store_desc(const double *w, const double *z, size_t n, size_t m, double *vals, fk_mat *V,
                      fk_err *err)
{
    if (fk_mat_init(V, n, m))
        return fk_err_set(err, FK_ENOMEM, "eigen-solver: out of memory for %zux%zu vectors", n, m);
    for (size_t k = 0; k < m; k++) {
        size_t src = m - 1 - k;
        vals[k] = w[src];
        const double *col = z + src * n;
        for (size_t i = 0; i < n; i++)
            V->data[i * V->ld + k] = col[i];
    }
    return FK_OK;
}

int fk_eig_sym_top(const fk_mat *A, size_t m, double *vals, fk_mat *V, fk_err *err)
{
    *V = (fk_mat){0};
    int rc = check_args(A, m, err);
    if (rc)
        return rc;
    size_t n = A->rows;
    double *a = sym_copy(A);
    double *w = malloc(n * sizeof *w);
    double *z = malloc(n * m * sizeof *z);
    if (!a || !w || !z)
        rc = fk_err_set(err, FK_ENOMEM, "eigen-solver: out of memory (n=%zu)", n);
    if (!rc)
        rc = top_range(a, n, m, w, z, err);
    if (!rc)
        rc = store_desc(w, z, n, m, vals, V, err);
    free(a);
    free(w);
    free(z);
    return rc;
}

int fk_eig_gen_top(const fk_mat *A, const fk_mat *B, size_t m, double *vals, fk_mat *W,
                   fk_err *err)
{
    *W = (fk_mat){0};
    int rc = check_args(A, m, err);
    if (rc)
        return rc;
    if (B->rows != A->rows || B->cols != A->cols)
        return fk_err_set(err, FK_EINVAL, "eigen-solver: B is %zux%zu but A is %zux%zu", B->rows,
                          B->cols, A->rows, A->cols);
    size_t n = A->rows;
    double *a = sym_copy(A);
    double *b = sym_copy(B);
    double *w = malloc(n * sizeof *w);
    double *z = malloc(n * m * sizeof *z);
    if (!a || !b || !w || !z) {
        rc = fk_err_set(err, FK_ENOMEM, "eigen-solver: out of memory (n=%zu)", n);
        goto out;
    }
    lapack_int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)n, b, (lapack_int)n);
    if (info != 0) {
        rc = fk_err_set(err, FK_ENUMERIC,
                        "eigen-solver: B is not positive definite (Cholesky failed at column %d); "
                        "increase the regularizer", (int)info);
        goto out;
    }
    info = LAPACKE_dsygst(LAPACK_COL_MAJOR, 1, 'L', (lapack_int)n, a, (lapack_int)n, b, (lapack_int)n);
    if (info != 0) {
        rc = fk_err_set(err, FK_ENUMERIC, "eigen-solver: dsygst failed (info=%d)", (int)info);
        goto out;
    }
    rc = top_range(a, n, m, w, z, err);
    if (rc)
        goto out;
    /* W = L^-T U: solve L^T W = U for the m columns. */
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (int)n, (int)m, 1.0,
                b, (int)n, z, (int)n);
    rc = store_desc(w, z, n, m, vals, W, err);
out:
    free(a);
    free(b);
    free(w);
    free(z);
    return rc;
}

void fk_eig_fix_signs(fk_mat *V)
{
    for (size_t k = 0; k < V->cols; k++) {
        double best = 0.0;
        for (size_t i = 0; i < V->rows; i++) {
            double v = V->data[i * V->ld + k];
            if (fabs(v) > fabs(best))
                best = v;
        }
        if (best < 0)
            for (size_t i = 0; i < V->rows; i++)
                V->data[i * V->ld + k] = -V->data[i * V->ld + k];
    }
}

/* ---------- block Krylov for operators ---------- */

/* Basis vectors are rows (Q is L x n): OpenBLAS runs the skinny products of
 * a block against the basis or the operator 1.5-2x faster in that layout. */
typedef struct krylov {
    size_t n, b, L;  /* dimension, block size, basis capacity */
    double *Q, *AQ;  /* L x n, row-major, ld n: row i is basis vector i and A applied to it */
    fk_mat Qm, AQm;  /* their storage: rows are written before they are read */
    double *T;       /* L x L projected matrix Q A Q^T */
    double *tau, *tmp;
    double *gram; /* b x b: Cholesky QR's Gram matrix */
    int passes;   /* block Gram-Schmidt passes against the basis (2, or 1 if asked) */
} krylov;

static void krylov_free(krylov *k)
{
    fk_mat_close(&k->Qm);
    fk_mat_close(&k->AQm);
    free(k->T);
    free(k->tau);
    free(k->tmp);
    free(k->gram);
}

/* Householder QR of the b rows at blk (an n x b column-major matrix), Q in place. */
FK_CHECKRETURN static int householder_rows(krylov *k, double *blk, fk_err *err)
{
    size_t n = k->n, b = k->b;
    lapack_int info =
        LAPACKE_dgeqrf(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)b, blk, (lapack_int)n, k->tau);
    if (!info)
        info = LAPACKE_dorgqr(LAPACK_COL_MAJOR, (lapack_int)n, (lapack_int)b, (lapack_int)b, blk,
                              (lapack_int)n, k->tau);
    if (info)
        return fk_err_set(err, FK_ENUMERIC, "Krylov eigen-solver: QR failed (info=%d)", (int)info);
    return FK_OK;
}

/* One Cholesky QR pass on the b rows at blk: G = blk blk^T = R^T R, blk <- R^-T blk. 0 on
 * success; 1 when G is not safely positive definite (a nearly dependent block), blk untouched
 * then. The b x b Gram matrix goes in g. */
static int cholqr_rows(krylov *k, double *blk, double *g)
{
    size_t n = k->n, b = k->b;
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)b, (int)n, 1.0, blk, (int)n, 0.0, g,
                (int)b);
    double dmax = 0;
    for (size_t i = 0; i < b; i++)
        dmax = g[i * b + i] > dmax ? g[i * b + i] : dmax;
    if (!(dmax > 0) || !isfinite(dmax))
        return 1;
    /* row-major upper = column-major lower: G = L L^T with L = R^T */
    if (LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'U', (lapack_int)b, g, (lapack_int)b) != 0)
        return 1;
    /* a pivot below 1e-5 of the largest means cond(block) > 1e5: one more pass could not
     * restore orthogonality to rounding (cond^2 eps), so Householder decides instead */
    for (size_t i = 0; i < b; i++)
        if (!(g[i * b + i] > 1e-5 * sqrt(dmax)))
            return 1;
    cblas_dtrsm(CblasRowMajor, CblasLeft, CblasUpper, CblasTrans, CblasNonUnit, (int)b, (int)n, 1.0,
                g, (int)b, blk, (int)n);
    return 0;
}

/* Orthonormalise block rows [c, c+b) of Q against rows [0, c) (twice, or once) and
 * within the block: Cholesky QR twice (BLAS 3; Householder's panel QR took
 * as long as the products), Householder when the block is nearly dependent.
 * coef (c x b, leading dimension ldc) may hold Q[0:c) times the block
 * already, saving the first pass's product. */
FK_CHECKRETURN static int orth_block(krylov *k, size_t c, const double *coef, size_t ldc, fk_err *err)
{
    size_t n = k->n, b = k->b;
    double *blk = k->Q + c * n;
    for (int pass = 0; pass < k->passes && c > 0; pass++) {
        const double *h = k->tmp;
        size_t ldh = b;
        if (pass == 0 && coef) {
            h = coef;
            ldh = ldc;
        } else {
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)c, (int)b, (int)n, 1.0, k->Q,
                        (int)n, blk, (int)n, 0.0, k->tmp, (int)b);
        }
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)b, (int)n, (int)c, -1.0, h,
                    (int)ldh, k->Q, (int)n, 1.0, blk, (int)n);
    }
    if (cholqr_rows(k, blk, k->gram) || cholqr_rows(k, blk, k->gram))
        return householder_rows(k, blk, err);
    return FK_OK;
}

/* Rayleigh-Ritz on the first c basis vectors: Ritz values into vals, Ritz
 * vectors as rows of Ut (keep x n), the largest relative residual of the first
 * m into worst. */
FK_CHECKRETURN static int ritz(krylov *k, size_t c, size_t m, size_t keep, double *vals, double *Ut,
                               double *worst, fk_err *err)
{
    size_t n = k->n, L = k->L;
    fk_mat Tc, Sm;
    double *w = malloc(c * sizeof *w), *Rt = malloc(m * n * sizeof *Rt);
    if (!w || !Rt || fk_mat_init(&Tc, c, c)) {
        free(w);
        free(Rt);
        return fk_err_set(err, FK_ENOMEM, "Krylov eigen-solver: out of memory");
    }
    /* Only entries (i, j) with i below the end of j's block were computed. */
    for (size_t i = 0; i < c; i++)
        for (size_t j = 0; j < c; j++) {
            int ij = i < (j / k->b + 1) * k->b, ji = j < (i / k->b + 1) * k->b;
            double a = k->T[i * L + j], bb = k->T[j * L + i];
            Tc.data[i * c + j] = ij && ji ? 0.5 * (a + bb) : ij ? a : bb;
        }
    int rc = fk_eig_sym_top(&Tc, keep, w, &Sm, err);
    fk_mat_close(&Tc);
    if (rc) {
        free(w);
        free(Rt);
        return rc;
    }
    memcpy(vals, w, keep * sizeof *w);
    free(w);
    /* U^T = S^T Q, R^T = S^T AQ - diag(theta) U^T. */
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)keep, (int)n, (int)c, 1.0, Sm.data,
                (int)Sm.ld, k->Q, (int)n, 0.0, Ut, (int)n);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)m, (int)n, (int)c, 1.0, Sm.data,
                (int)Sm.ld, k->AQ, (int)n, 0.0, Rt, (int)n);
    fk_mat_close(&Sm);
    double scale = vals[0] > 0 ? vals[0] : 1.0;
    *worst = 0;
    for (size_t j = 0; j < m; j++) {
        cblas_daxpy((int)n, -vals[j], Ut + j * n, 1, Rt + j * n, 1);
        double rel = cblas_dnrm2((int)n, Rt + j * n, 1) / scale;
        *worst = rel > *worst ? rel : *worst;
    }
    free(Rt);
    return FK_OK;
}

/* Block after which to run the next Rayleigh-Ritz step, given a check after
 * block j with residual r. Residuals fall about geometrically per block and
 * faster later, so the rate since the last check overestimates the blocks
 * still needed: the first three estimated blocks are taken whole and 60% of
 * the rest, which rarely overshoots and saves most of the O(L^3) checks of a
 * fixed schedule (the whole estimate when it is under three blocks: a check of
 * a 300-vector basis costs more than a block). Without a usable rate the step
 * is 1 + j/8. */
static size_t next_ritz(size_t j, double r, size_t *last_j, double *last_r, double tol)
{
    size_t step = 1 + j / 8;
    if (*last_j && r < *last_r && r > tol) {
        double per_block = log(*last_r / r) / (double)(j - *last_j);
        double need = log(r / tol) / per_block;
        need = need <= 3.0 ? need : 3.0 + 0.6 * (need - 3.0);
        step = need < 1.0 ? 1 : (size_t)need;
        if (step > 2 * j) /* an early, noisy rate never skips more than 2/3 of the basis */
            step = 2 * j;
    }
    *last_j = j;
    *last_r = r;
    return j + step;
}

size_t fk_eig_op_block(size_t m, size_t n)
{
    size_t b = (m + 8 + 7) / 8 * 8; /* BLAS kernels work in multiples of 4 and 8 */
    return b < n ? b : m;
}

int fk_eig_op_top(size_t n, fk_sym_op op, void *ctx, size_t m, size_t max_basis, double tol,
                  uint64_t seed, double *vals, fk_mat *V, fk_err *err)
{
    fk_eig_op_opts o = {.max_basis = max_basis, .tol = tol, .seed = seed};
    return fk_eig_op_top_ex(n, op, ctx, m, &o, vals, V, err);
}

int fk_eig_op_top_ex(size_t n, fk_sym_op op, void *ctx, size_t m, fk_eig_op_opts *o, double *vals,
                     fk_mat *V, fk_err *err)
{
    *V = (fk_mat){0};
    o->residual = INFINITY;
    o->applied = 0;
    if (m == 0 || m > n)
        return fk_err_set(err, FK_EINVAL, "Krylov eigen-solver: want 1 <= m <= n (m=%zu, n=%zu)", m, n);
    size_t keep = o->keep ? o->keep : m;
    krylov k = {
        .n = n, .b = o->block ? o->block : fk_eig_op_block(m, n), .passes = o->one_pass ? 1 : 2};
    size_t s0 = o->start ? o->start->cols : 0;
    if (keep < m || keep > k.b || k.b > n || s0 > k.b || (o->start && o->start->rows != n))
        return fk_err_set(err, FK_EINVAL,
                          "Krylov eigen-solver: want m=%zu <= keep=%zu <= block=%zu <= n=%zu and "
                          "at most a block of start vectors of length n (got %zu)",
                          m, keep, k.b, n, s0);
    size_t blocks = o->max_basis / k.b;
    if (blocks < 2 || blocks * k.b > n)
        blocks = n / k.b;
    if (blocks < 2)
        return fk_err_set(err, FK_ENUMERIC, "Krylov eigen-solver: matrix too small for a Krylov basis");
    k.L = blocks * k.b;
    /* huge pages for the basis (fk_mat): 4 KiB first touches of two L x n buffers were a
     * tenth of RF-TCA's solve on a virtual machine (issue 36) */
    if (!fk_mat_init_uninit(&k.Qm, k.L, n) && !fk_mat_init_uninit(&k.AQm, k.L, n)) {
        k.Q = k.Qm.data;
        k.AQ = k.AQm.data;
    }
    k.T = calloc(k.L * k.L, sizeof *k.T);
    k.tau = malloc(k.b * sizeof *k.tau);
    k.tmp = malloc(k.L * k.b * sizeof *k.tmp);
    k.gram = malloc(k.b * k.b * sizeof *k.gram);
    double *Ut = malloc(keep * n * sizeof *Ut);
    int rc = FK_OK;
    if (!k.Q || !k.AQ || !k.T || !k.tau || !k.tmp || !k.gram || !Ut) {
        rc = fk_err_set(err, FK_ENOMEM, "Krylov eigen-solver: out of memory (basis %zu)", k.L);
        goto out;
    }
    fk_rng g;
    fk_rng_init(&g, o->seed, 0x6b72796c6f760000ULL);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < k.b; j++)
            k.Q[j * n + i] = j < s0 ? o->start->data[i * o->start->ld + j] : fk_rng_normal(&g);
    if ((rc = orth_block(&k, 0, NULL, 0, err)))
        goto out;
    double worst = INFINITY, last_worst = INFINITY;
    size_t next_check = 3, last_check = 0;
    for (size_t j = 0; j < blocks; j++) {
        size_t c = j * k.b;
        op(ctx, k.Q + c * n, n, k.AQ + c * n, n, k.b);
        o->applied += k.b;
        /* new columns of T = Q (A Q_j)^T for the blocks so far */
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)(c + k.b), (int)k.b, (int)n, 1.0,
                    k.Q, (int)n, k.AQ + c * n, (int)n, 0.0, k.T + c, (int)k.L);
        /* Rayleigh-Ritz (it costs O(L^3)) where convergence may have happened. */
        if (j + 1 == next_check || j + 1 == blocks) {
            double prev = worst;
            if ((rc = ritz(&k, c + k.b, m, keep, vals, Ut, &worst, err)))
                goto out;
            /* a low-precision operator's residual floors (float32: near 1e-7 of theta_1):
             * stop once a small residual no longer falls by a third between checks */
            if (o->partial && worst < 1e-4 && worst > 0.7 * prev)
                break;
            next_check = next_ritz(j + 1, worst, &last_check, &last_worst, o->tol);
        }
        if (worst <= o->tol)
            break;
        if (j + 1 == blocks)
            break;
        /* next block: A Q_j, orthogonalised (its first projection is T's new columns) */
        memcpy(k.Q + (c + k.b) * n, k.AQ + c * n, k.b * n * sizeof(double));
        if ((rc = orth_block(&k, c + k.b, k.T + c, k.L, err)))
            goto out;
    }
    o->residual = worst;
    if (worst > o->tol && !o->partial) {
        rc = fk_err_set(err, FK_ENUMERIC,
                        "Krylov eigen-solver: not converged with %zu basis vectors "
                        "(residual %.2g > %.2g)",
                        k.L, worst, o->tol);
        goto out;
    }
    if (fk_mat_init_uninit(V, n, keep)) {
        rc = fk_err_set(err, FK_ENOMEM, "Krylov eigen-solver: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < keep; j++)
            V->data[i * keep + j] = Ut[j * n + i];
out:
    free(Ut);
    krylov_free(&k);
    return rc;
}
