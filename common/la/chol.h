/* Cholesky factorisation of a symmetric positive definite matrix (LAPACK dpotrf):
 * A = L L^T, then solves, whitening and log-determinants from the factor. */
#ifndef FK_CHOL_H
#define FK_CHOL_H

#include "common/base/err.h"
#include "common/la/mat.h"

typedef struct fk_chol {
    fk_mat L;     /* n x n, lower triangle holds the factor, strict upper triangle is zero */
    double anorm; /* 1-norm of A, for the condition estimate */
} fk_chol;

/* Factor a copy of A (only its lower triangle is read). A matrix that is not
 * positive definite gives FK_ENUMERIC naming the failing leading minor. */
int fk_chol_init(fk_chol *c, const fk_mat *A, fk_err *err);
void fk_chol_close(fk_chol *c);

/* B := A^{-1} B in place (B is n x k, k right-hand sides as columns). */
int fk_chol_solve(const fk_chol *c, fk_mat *B, fk_err *err);
/* X := X L^{-T} in place: each row x becomes L^{-1} x, so ||row||^2 = x^T A^{-1} x
 * (Mahalanobis distances with samples in rows). */
int fk_chol_whiten_rows(const fk_chol *c, fk_mat *X, fk_err *err);
/* log det A = 2 sum log L_ii. */
double fk_chol_logdet(const fk_chol *c);
/* Reciprocal condition number estimate in the 1-norm (LAPACK dpocon); 0 on failure. */
double fk_chol_rcond(const fk_chol *c);

#endif
